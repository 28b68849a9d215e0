"""Health checks: device health read from the whole-node cuda-probe's NVML section (launch once,
assert many: the inventory suite's probe, nothing new is launched).

* ``health.no-uncorrectable-ecc``: every GPU NVML lists on the node, with ECC enabled, is under
  the thresholds of ``gpuconf/data/health_thresholds.yaml`` that name the check (volatile and
  aggregate uncorrectable ECC counts above 0: NVIDIA's Xid catalog treats a double-bit ECC error,
  Xid 48, as needing a GPU reset). Each GPU over a threshold is named by UUID with the counter.

Decisions:

* **Thresholds are data.** The numbers, the severity (isolate / reset / monitor), the outcome and
  the remediation per metric live in the table with their sources; this module only compares.
* **No ECC is not a pass.** Without NVML in the container (blocked by driver.nvml-initializes), or
  with ECC unsupported or disabled on every GPU (consumer GPUs), the counters do not exist:
  NOT_TESTED with the reason. A GPU whose ECC mode is on but whose counters could not be read is
  never a silent zero: the node is NOT_TESTED naming it, unless another GPU already fails. The
  same for a GPU without the exporter's Xid metric.
* **The device plugin does not see these.** It acts on Xid events raised while it watches, so a GPU
  with errors from before its current run stays Healthy and allocatable; only the counters tell.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuconf.checks.inventory import NVML_CHECK, nvml_blocked
from gpuconf.compat import tables
from gpuconf.outcomes import COULD_NOT_RUN, NOT_APPLICABLE
from gpuconf.probes.cuda import CudaProbeReport, NvmlGpu
from gpuconf.verdict import Verdict, failed, not_tested, passed

__all__ = [
    "ECC_CHECK", "PENDING_REPAIR_CHECK", "REMAP_FAILED_CHECK", "XID_CHECK", "Threshold", "Xid",
    "evaluate_no_critical_xid", "evaluate_no_pending_repair", "evaluate_no_uncorrectable_ecc", "evaluate_row_remapping",
    "last_xids", "thresholds", "xid_table",
]

ECC_CHECK = "health.no-uncorrectable-ecc"
REMAP_FAILED_CHECK = "health.row-remapping-not-failed"
PENDING_REPAIR_CHECK = "health.no-pending-memory-repair"
XID_CHECK = "health.no-critical-xid"
#: The DCGM exporter's last-Xid gauge (a default counter of dcgm-exporter).
XID_METRIC = "DCGM_FI_DEV_XID_ERRORS"

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


def _reading(gpu: NvmlGpu, limits: Sequence[Threshold]) -> tuple[dict[str, Any], list[str]]:
    values = {t.metric: getattr(gpu, _FIELDS[t.metric]) for t in limits}
    return values, [m for m, v in values.items() if v is None]


def _absent_reason(gpu: NvmlGpu, metric: str) -> str | None:
    """The probe's reason for an unread counter (the first absent section on its path), if it gave one."""
    obj: Any = gpu.raw
    for key in metric.split("."):
        if isinstance(obj, dict) and obj.get("available") is False:
            return str(obj.get("reason") or "absent")
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return str(obj.get("reason") or "absent") if isinstance(obj, dict) and obj.get("available") is False else None


def _unread_line(gpu: NvmlGpu, unread: Sequence[str]) -> str:
    reasons = sorted({r for m in unread if (r := _absent_reason(gpu, m)) is not None})
    return f"{_label(gpu)} ({', '.join(unread)}" + (f": {'; '.join(reasons)}" if reasons else "") + ")"


def _judge(check: str, node: str, probe: CudaProbeReport, limits: Sequence[Threshold], *, what: str, none: str,
           applies: Callable[[NvmlGpu, Mapping[str, Any]], str | None]) -> Verdict:
    """Compare every applicable GPU's NVML facts with ``limits`` (a tripped threshold fails the
    check, at the check's severity: the table's outcome column agrees with it). ``applies`` says why
    a GPU is not tested by design (None: it is); ``what`` names the counters in messages.

    Fail closed: a GPU the check applies to whose every counter NVML could not read is not judged,
    so the node is NOT TESTED naming it (unless another GPU already fails); a PASS names the GPUs
    left out by design and the counters it could not read."""
    if (blocked := nvml_blocked(probe)) is not None:
        return not_tested(check, node, blocked, blocked_by=NVML_CHECK)
    if not probe.nvml_gpus:
        return not_tested(check, node, f"NVML lists no GPU in the probe on {node}", kind=COULD_NOT_RUN)
    evidence: list[str] = []
    over: list[tuple[Threshold, str]] = []
    skipped: list[str] = []  # not applicable by design (the GPU has no such counter)
    unjudged: list[str] = []  # applicable, every counter unreadable
    partial: list[str] = []  # applicable, judged on some counters only
    checked = 0
    for gpu in probe.nvml_gpus:
        values, unread = _reading(gpu, limits)
        why = applies(gpu, values)
        if why is not None:
            evidence.append(f"{_label(gpu)}: not tested, {why}")
            skipped.append(f"{_label(gpu)}: {why}")
            continue
        if len(unread) == len(values):
            unjudged.append(_unread_line(gpu, unread))
            evidence.append(f"{_label(gpu)}: not judged, no {what} counter read ({', '.join(unread)})")
            continue
        checked += 1
        over += [(t, f"{_label(gpu)} {t.metric}={values[t.metric]} ({t.rule}: {t.severity})")
                 for t in limits if t.trips(values[t.metric])]
        # A counter NVML answers Not Supported for does not exist on this GPU (page retirement on
        # a GPU that remaps rows): no gap. Any other unread counter is named.
        if missed := [m for m in unread if "not supported" not in (_absent_reason(gpu, m) or "").lower()]:
            partial.append(_unread_line(gpu, missed))
        evidence.append(f"{_label(gpu)}: " + ", ".join(f"{m}={v}" for m, v in values.items())
                        + (f" (unread: {', '.join(unread)})" if unread else ""))
    if not checked and not unjudged:
        whys = {line.split(": not tested, ", 1)[-1] for line in evidence}
        detail = f"all {len(evidence)} GPU(s): {whys.pop()}" if len(whys) == 1 else "; ".join(evidence)
        return not_tested(check, node, f"no GPU on {node} {none}: {detail}", kind=NOT_APPLICABLE)
    expected = f"every {what} counter " + ", ".join(f"{t.metric} not {t.rule}" for t in limits)
    if over:
        lines = [line for _, line in over]
        remedies = tuple(sorted({t.remediation for t, _ in over}))
        summary = f"{len(over)} {what} counter(s) over threshold on {node}: " + "; ".join(lines) + (
            f" (not judged, counters unreadable: {'; '.join(unjudged)})" if unjudged else "")
        return failed(check, node, summary, expected=expected, observed="; ".join(lines),
                      evidence=(*evidence, *remedies))
    if unjudged:
        return not_tested(check, node, f"the {what} counters of {len(unjudged)} of {len(unjudged) + checked} GPU(s) "
                          f"on {node} could not be read, so they are not judged: {'; '.join(unjudged)}"
                          + (f" ({checked} other GPU(s) read, none over threshold)" if checked else ""),
                          kind=COULD_NOT_RUN)
    gaps = ([f"not read: {'; '.join(partial)}"] if partial else []) + (
        [f"not tested by design: {'; '.join(skipped)}"] if skipped else [])
    return passed(check, node, f"{checked} GPU(s) on {node} report no {what} over threshold"
                  + (f" ({'; '.join(gaps)})" if gaps else ""),
                  expected=expected, observed=f"0 over threshold on {checked} GPU(s)", evidence=tuple(evidence),
                  not_judged=tuple(gaps))


def _ecc_applies(gpu: NvmlGpu, values: Mapping[str, Any]) -> str | None:
    return _ecc_mode(gpu)


def _repair_applies(gpu: NvmlGpu, values: Mapping[str, Any]) -> str | None:
    """None when NVML answered any of the check's queries; otherwise each query's own answer."""
    if any(v is not None for v in values.values()):
        return None
    sections = sorted({metric.split(".")[0] for metric in values})
    reasons = [str((gpu.raw.get(k) or {}).get("reason") or f"no {k} section") for k in sections
               if not _readable(gpu.raw.get(k))]
    return (" and ".join(s.replace("_", " ") for s in sections) + " not readable ("
            + ("; ".join(reasons) or "NVML gave no value") + ")")


def _readable(section: Any) -> bool:
    return isinstance(section, dict) and section.get("available") is not False


def evaluate_no_uncorrectable_ecc(node: str, probe: CudaProbeReport,
                                  limits: Sequence[Threshold] | None = None) -> Verdict:
    """``health.no-uncorrectable-ecc`` on ``node`` from its whole-node probe."""
    limits = thresholds(ECC_CHECK) if limits is None else limits
    return _judge(ECC_CHECK, node, probe, limits, what="uncorrectable ECC", none="has ECC enabled",
                  applies=_ecc_applies)


def evaluate_row_remapping(node: str, probe: CudaProbeReport, limits: Sequence[Threshold] | None = None) -> Verdict:
    """``health.row-remapping-not-failed``: no GPU has exhausted its spare rows."""
    limits = thresholds(REMAP_FAILED_CHECK) if limits is None else limits
    return _judge(REMAP_FAILED_CHECK, node, probe, limits, what="row-remapping failure",
                  none="reads row remapping", applies=_repair_applies)


def evaluate_no_pending_repair(node: str, probe: CudaProbeReport, limits: Sequence[Threshold] | None = None) -> Verdict:
    """``health.no-pending-memory-repair``: no GPU waits for a reset to apply a row remap or a
    page retirement (degraded: running work is unaffected, the repair needs a reset)."""
    limits = thresholds(PENDING_REPAIR_CHECK) if limits is None else limits
    return _judge(PENDING_REPAIR_CHECK, node, probe, limits, what="pending memory repair",
                  none="reads row remapping or page retirement", applies=_repair_applies)


@dataclass(frozen=True)
class Xid:
    """One row of xid_codes.yaml."""

    code: int
    name: str
    severity: str  # isolate | reset | monitor
    action: str


def xid_table() -> dict[int, Xid]:
    return {r["code"]: Xid(r["code"], r["name"], r["severity"], r["action"])
            for r in tables.load("xid_codes")["xids"]}


def evaluate_no_critical_xid(node: str, last_xids: Sequence[tuple[str, int | None]], *, source: str,
                             unavailable: str | None = None, table: Mapping[int, Xid] | None = None) -> Verdict:
    """``health.no-critical-xid`` on ``node``: ``last_xids`` is each GPU's label and its last Xid
    (0: none; None: the metric is missing for it) as ``source`` reports them; ``unavailable`` is why
    nothing could be read (not tested)."""
    if unavailable is not None:
        return not_tested(XID_CHECK, node, f"the GPUs' last Xid is not readable on {node}: {unavailable}",
                          kind=COULD_NOT_RUN)
    if not last_xids:
        return not_tested(XID_CHECK, node, f"{source} lists no GPU on {node}", kind=COULD_NOT_RUN)
    table = xid_table() if table is None else table
    evidence: list[str] = []
    critical: list[str] = []
    actions: list[str] = []
    unread = [label for label, value in last_xids if value is None]
    for label, value in last_xids:
        if value is None:
            evidence.append(f"{label}: DCGM_FI_DEV_XID_ERRORS missing")
        elif value == 0:
            evidence.append(f"{label}: no Xid")
        elif (row := table.get(value)) is None:
            critical.append(f"{label} last Xid {value} (not in gpuconf's Xid table: look it up in NVIDIA's catalog)")
            evidence.append(f"{label}: Xid {value}, unknown")
        else:
            line = f"{label} last Xid {value} {row.name} ({row.severity})"
            evidence.append(f"{label}: Xid {value} {row.name} ({row.severity}: {row.action})")
            if row.severity != "monitor":
                critical.append(line)
                actions.append(f"Xid {value}: {row.action}")
    read = len(last_xids) - len(unread)
    if not read:
        return not_tested(XID_CHECK, node, f"{source} has no DCGM_FI_DEV_XID_ERRORS for any GPU on {node}",
                          kind=COULD_NOT_RUN)
    expected = "no GPU's last Xid needs a reset or isolation (gpuconf/data/xid_codes.yaml)"
    if critical:
        summary = f"{len(critical)} GPU(s) on {node} raised a critical Xid: " + "; ".join(critical) + (
            f" (not judged, no {XID_METRIC}: {', '.join(unread)})" if unread else "")
        return failed(XID_CHECK, node, summary, expected=expected, observed="; ".join(critical),
                      evidence=(f"source: {source}", *evidence, *sorted(set(actions))))
    if unread:  # a GPU without the metric may be the one that raised an Xid: no PASS on the others alone
        return not_tested(XID_CHECK, node, f"{source} has no {XID_METRIC} for {len(unread)} of {len(last_xids)} "
                          f"GPU(s) on {node}, so they are not judged: {', '.join(unread)} ({read} other GPU(s) read, "
                          "no critical Xid)", kind=COULD_NOT_RUN)
    return passed(XID_CHECK, node, f"no critical Xid on {read} GPU(s) of {node}",
                  expected=expected, observed=f"{read} GPU(s) read", evidence=(f"source: {source}", *evidence))


def last_xids(scrape: Any) -> tuple[list[tuple[str, int | None]], str | None]:
    """Each GPU's label and last Xid from a node's exporter scrape (gpuconf.checks.metrics.ExporterScrape),
    ordered by index, or why nothing is readable."""
    if scrape.error is not None or scrape.not_tested is not None:
        return [], scrape.error or scrape.not_tested
    rows: list[tuple[str, int | None]] = []
    for gpu in sorted(scrape.gpus.values(), key=lambda g: (g.index is None, g.index or 0, g.uuid)):
        value = gpu.values.get(XID_METRIC)
        rows.append((f"GPU {gpu.index if gpu.index is not None else '?'} {gpu.uuid}",
                     None if value is None else int(value)))
    return rows, None
