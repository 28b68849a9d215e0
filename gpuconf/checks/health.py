"""Health checks: device health read from the whole-node cuda-probe's NVML section (launch once,
assert many: the inventory suite's probe, nothing new is launched).

* ``health.no-uncorrectable-ecc``: every GPU NVML lists on the node, with ECC enabled, is under
  the thresholds of ``gpuconf/data/health_thresholds.yaml`` that name the check (volatile and
  aggregate uncorrectable ECC counts above 0: NVIDIA's Xid catalog treats a double-bit ECC error,
  Xid 48, as needing a GPU reset). Each GPU over a threshold is named by UUID with the counter.

Decisions:

* **Thresholds are data.** The numbers, the severity (isolate / reset / monitor), the outcome and
  the remediation per metric live in the table with their sources; this module only compares.
* **No ECC is not a pass.** Without NVML in the container, or with ECC unsupported or disabled on
  every GPU (consumer GPUs), the counters do not exist: NOT_TESTED with the reason. A GPU whose
  ECC mode is on but whose counter query failed is evidence, never a silent zero.
* **The device plugin does not see these.** It acts on Xid events raised while it watches, so a GPU
  with errors from before its current run stays Healthy and allocatable; only the counters tell.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuconf.compat import tables
from gpuconf.probes.cuda import CudaProbeReport, NvmlGpu
from gpuconf.verdict import Verdict, failed, not_tested, passed

__all__ = ["ECC_CHECK", "Threshold", "evaluate_no_uncorrectable_ecc", "thresholds"]

ECC_CHECK = "health.no-uncorrectable-ecc"

#: The probe's NVML facts, by the metric names of health_thresholds.yaml.
_FIELDS: Mapping[str, str] = {
    "ecc.volatile.uncorrected": "ecc_volatile_uncorrected",
    "ecc.aggregate.uncorrected": "ecc_aggregate_uncorrected",
    "remapped_rows.failure": "remapped_rows_failure",
    "remapped_rows.pending": "remapped_rows_pending",
    "retired_pages.pending": "retired_pages_pending",
}


@dataclass(frozen=True)
class Threshold:
    """One row of health_thresholds.yaml."""

    metric: str
    kind: str  # count | flag
    above: int | None
    severity: str  # isolate | reset | monitor
    outcome: str  # fail | degraded
    check: str | None
    remediation: str
    source: str

    @property
    def rule(self) -> str:
        return f"> {self.above}" if self.kind == "count" else "set"

    def trips(self, value: Any) -> bool:
        if value is None:
            return False
        return bool(value) if self.kind == "flag" else int(value) > (self.above or 0)


def thresholds(check: str | None = None) -> tuple[Threshold, ...]:
    """The table's thresholds, those of ``check`` only when given."""
    rows = tables.load("health_thresholds")["thresholds"]
    out = tuple(Threshold(r["metric"], r["kind"], r.get("above"), r["severity"], r["outcome"], r.get("check"),
                          r["remediation"], r["source"]) for r in rows)
    return tuple(t for t in out if check is None or t.check == check)


def _ecc_mode(gpu: NvmlGpu) -> str | None:
    """Why the GPU has no ECC counters (None: ECC is enabled)."""
    ecc = gpu.raw.get("ecc")
    if not isinstance(ecc, dict) or ecc.get("available") is False:
        reason = ecc.get("reason") if isinstance(ecc, dict) else None
        return f"ECC not supported ({reason or 'no ECC section'})"
    if ecc.get("enabled") is False:
        return "ECC disabled"
    return None


def _label(gpu: NvmlGpu) -> str:
    return f"GPU {gpu.index} {gpu.uuid or '(no UUID)'}"


def evaluate_no_uncorrectable_ecc(node: str, probe: CudaProbeReport,
                                  limits: Sequence[Threshold] | None = None) -> Verdict:
    """``health.no-uncorrectable-ecc`` on ``node`` from its whole-node probe."""
    limits = thresholds(ECC_CHECK) if limits is None else limits
    if probe.nvml_absent_reason is not None:
        return not_tested(ECC_CHECK, node, f"NVML is not available in the probe on {node}: "
                                           f"{probe.nvml_absent_reason}")
    if not probe.nvml_gpus:
        return not_tested(ECC_CHECK, node, f"NVML lists no GPU in the probe on {node}")
    evidence: list[str] = []
    over: list[str] = []
    checked = 0
    for gpu in probe.nvml_gpus:
        why = _ecc_mode(gpu)
        if why is not None:
            evidence.append(f"{_label(gpu)}: not tested, {why}")
            continue
        checked += 1
        values = {t.metric: getattr(gpu, _FIELDS[t.metric]) for t in limits}
        unread = [m for m, v in values.items() if v is None]
        tripped = [t for t in limits if t.trips(values[t.metric])]
        over += [f"{_label(gpu)} {t.metric}={values[t.metric]} ({t.rule}: {t.severity})" for t in tripped]
        evidence.append(f"{_label(gpu)}: " + ", ".join(f"{m}={v}" for m, v in values.items())
                        + (f" (unread: {', '.join(unread)})" if unread else ""))
    if not checked:
        return not_tested(ECC_CHECK, node, f"no GPU on {node} has ECC enabled: "
                                           + "; ".join(evidence))
    expected = "every uncorrectable ECC counter " + ", ".join(f"{t.metric} not {t.rule}" for t in limits)
    if over:
        remedies = sorted({t.remediation for t in limits if any(t.metric in o for o in over)})
        return failed(ECC_CHECK, node, f"{len(over)} uncorrectable ECC counter(s) over threshold on {node}: "
                      + "; ".join(over), expected=expected, observed="; ".join(over),
                      evidence=(*evidence, *remedies))
    return passed(ECC_CHECK, node, f"{checked} GPU(s) on {node} report no uncorrectable ECC error",
                  expected=expected, observed=f"0 over threshold on {checked} GPU(s)", evidence=tuple(evidence))
