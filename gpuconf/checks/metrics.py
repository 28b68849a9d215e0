"""Accelerator metrics: what the DCGM exporter on each GPU node publishes (CNCF AI conformance
``accelerator_metrics``), from one scrape of its ``/metrics`` through the API server's pod proxy.

* ``metrics.gpu-metrics-present`` (fail): an exporter pod runs on the node and answers; every GPU
  it publishes has the required families of ``gpuconf/data/accelerator_metrics.yaml``
  (utilisation, framebuffer used and free); and its GPU UUIDs match those the whole-node
  cuda-probe saw on the node.
* ``metrics.recommended-metrics-present`` (degraded): temperature and power for every GPU, NVLink
  bandwidth for GPUs with NVLink.

Decisions:

* **GPUs are keyed by the exporter's ``UUID`` label.** On a MIG-enabled GPU the exporter labels
  each GPU instance's series with ``GPU_I_ID``/``GPU_I_PROFILE`` and the *parent* GPU's UUID, so
  instances fold into their parent GPU: a parent GPU is the unit compared with the probe, and
  its instance series count for it (framebuffer summed, other figures the largest). DCGM reports
  no ``DCGM_FI_DEV_GPU_UTIL`` for MIG instances; ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` is accepted
  for utilisation (the table lists alternatives per family).
* **The UUID match is as strong as the probe.** The probe's GPUs are its NVML section's UUIDs and
  its CUDA devices' ``GPU-`` UUIDs. Where the probe held every GPU of the node (no sharing, no MIG,
  allocatable equal to capacity) the sets must be equal; otherwise the probe's GPUs must be among
  the exporter's. Without a probe report (a DRA-only node, a node offering no whole GPU, a probe
  that failed) the metrics are still checked, and only if they hold is the check NOT_TESTED for
  the UUID match, with the reason.
* **NVLink is expected by model.** The NVML product name (the exporter's ``modelName`` label) is
  looked up in the table's ``nvlink_models``; a node whose exporter publishes an NVLink family for
  one GPU is expected to publish it for all of them.
* **Access is not the cluster's fault.** When the runner may not use ``pods/proxy`` the checks are
  NOT_TESTED with the rule to add, never failed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache

from gpuconf.compat import tables
from gpuconf.outcomes import COULD_NOT_RUN
from gpuconf.probes.cuda import CudaProbeReport
from gpuconf.verdict import Verdict, failed, not_tested, passed

__all__ = ["PRESENT_CHECK", "RECOMMENDED_CHECK", "AcceleratorMetrics", "ExporterScrape", "GpuSamples", "MetricFamily",
           "MetricsParseError", "ProbeGpus", "evaluate_gpu_metrics_present", "evaluate_recommended_metrics_present",
           "exporter_scrape", "gpu_name", "metrics_table", "parse_exporter_text", "probe_gpus"]

PRESENT_CHECK = "metrics.gpu-metrics-present"
RECOMMENDED_CHECK = "metrics.recommended-metrics-present"

#: Families whose MIG instance series add up to the parent GPU's figure.
_SUMMED = ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE")


class MetricsParseError(ValueError):
    """The exporter's answer is not the Prometheus text format."""


@dataclass(frozen=True)
class MetricFamily:
    """One row of accelerator_metrics.yaml: a figure and the metric names that give it."""

    id: str
    level: str  # required | recommended
    metrics: tuple[str, ...]
    when: str | None = None  # "nvlink": only for GPUs with NVLink
    source: str = ""

    def describe(self) -> str:
        return f"{self.id} ({' or '.join(self.metrics)})"


@dataclass(frozen=True)
class AcceleratorMetrics:
    families: tuple[MetricFamily, ...]
    nvlink_models: frozenset[str]

    def level(self, level: str) -> tuple[MetricFamily, ...]:
        return tuple(f for f in self.families if f.level == level)


@cache
def metrics_table() -> AcceleratorMetrics:
    data = tables.load("accelerator_metrics")
    families = tuple(MetricFamily(str(r["id"]), str(r["level"]), tuple(str(m) for m in r["metrics"]),
                                  r.get("when"), str(r["source"])) for r in data["families"])
    return AcceleratorMetrics(families, frozenset(str(m) for m in data["nvlink_models"]))


@dataclass(frozen=True)
class GpuSamples:
    """What the exporter publishes for one GPU (MIG instances folded into their parent)."""

    uuid: str
    index: int | None  # the ``gpu`` label (NVML index)
    labels: Mapping[str, str]  # the GPU's own labels (gpu, UUID, pci_bus_id, device, modelName, ...)
    values: Mapping[str, float]  # metric name -> value
    instances: tuple[str, ...] = ()  # GPU_I_IDs of the MIG instances it published

    @property
    def model(self) -> str | None:
        return self.labels.get("modelName")


@dataclass(frozen=True)
class ExporterScrape:
    """One node's exporter and what its ``/metrics`` gave; ``error`` (the node's fault) or
    ``not_tested`` (the runner's: RBAC) when there is nothing to read."""

    node: str
    pod: str | None  # namespace/name of the exporter pod
    gpus: Mapping[str, GpuSamples] = field(default_factory=dict)
    error: str | None = None
    not_tested: str | None = None


@dataclass(frozen=True)
class ProbeGpus:
    """The GPUs the node's whole-node cuda-probe saw; ``complete``: it held every GPU of the node."""

    uuids: frozenset[str]
    complete: bool


_GPU_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "hostname", "DCGM_FI_DRIVER_VERSION",
               "DCGM_FI_SYSTEM_DRIVER_VERSION")


def parse_exporter_text(text: str) -> dict[str, GpuSamples]:
    """Per GPU UUID, the exporter's samples (series without a ``UUID`` label are not per GPU)."""
    from prometheus_client.parser import text_string_to_metric_families

    device: dict[str, dict[str, float]] = {}
    inst: dict[str, dict[str, list[float]]] = {}
    labels: dict[str, dict[str, str]] = {}
    instances: dict[str, list[str]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                uuid = s.labels.get("UUID")
                if not uuid:
                    continue
                own = labels.setdefault(uuid, {})
                own.update({k: v for k, v in s.labels.items() if k in _GPU_LABELS and k not in own})
                # The parser names a counter's sample <family>_total; the exporter's name is the family's.
                name = family.name if s.name in (family.name, f"{family.name}_total") else s.name
                gi = s.labels.get("GPU_I_ID")
                if gi is None:
                    device.setdefault(uuid, {})[name] = float(s.value)
                else:
                    inst.setdefault(uuid, {}).setdefault(name, []).append(float(s.value))
                    if gi not in instances.setdefault(uuid, []):
                        instances[uuid].append(gi)
    except ValueError as e:
        raise MetricsParseError(f"not the Prometheus text format: {e}") from None
    out: dict[str, GpuSamples] = {}
    for uuid, own in labels.items():
        values = {name: (sum(v) if name in _SUMMED else max(v)) for name, v in inst.get(uuid, {}).items()}
        values.update(device.get(uuid, {}))
        index = own.get("gpu")
        out[uuid] = GpuSamples(uuid, int(index) if index and index.isdigit() else None, dict(own), values,
                               tuple(instances.get(uuid, ())))
    return out


def exporter_scrape(node: str, pod: str | None, *, text: str | None = None, error: str | None = None,
                    forbidden: str | None = None) -> ExporterScrape:
    """One node's scrape as the checks read it: the parsed answer, or why there is none."""
    if forbidden is not None:
        return ExporterScrape(node, pod, not_tested=forbidden)
    if error is not None or text is None:
        return ExporterScrape(node, pod, error=error or f"the DCGM exporter pod {pod} on {node} gave no answer")
    try:
        gpus = parse_exporter_text(text)
    except MetricsParseError as e:
        return ExporterScrape(node, pod, error=f"the DCGM exporter pod {pod} on {node} answered {e}")
    return ExporterScrape(node, pod, gpus)


def probe_gpus(report: CudaProbeReport, *, complete: bool) -> ProbeGpus:
    """The physical GPUs a cuda-probe report names: NVML's UUIDs and the CUDA devices' ``GPU-`` ones
    (a MIG device's ``MIG-`` UUID is not a GPU's)."""
    uuids = {g.uuid for g in report.nvml_gpus if g.uuid}
    uuids |= {d.uuid for d in report.devices if d.uuid and d.uuid.startswith("GPU-")}
    return ProbeGpus(frozenset(uuids), complete)


def gpu_name(g: GpuSamples) -> str:
    """A GPU as the exporter names it: its UUID and NVML index."""
    return f"{g.uuid} (gpu {g.index})" if g.index is not None else g.uuid


def _missing(g: GpuSamples, families: Iterable[MetricFamily]) -> list[MetricFamily]:
    return [f for f in families if not any(m in g.values for m in f.metrics)]


def _uuids(uuids: Iterable[str]) -> str:
    return ", ".join(sorted(uuids)) or "none"


def evaluate_gpu_metrics_present(node: str, scrape: ExporterScrape, probe: ProbeGpus | None, *,
                                 probe_reason: str | None = None,
                                 table: AcceleratorMetrics | None = None) -> Verdict:
    """``probe``: the probe's GPUs, or None with ``probe_reason`` saying why there are none."""
    table = table or metrics_table()
    required = table.level("required")
    if scrape.not_tested is not None:
        return not_tested(PRESENT_CHECK, node, scrape.not_tested, kind=COULD_NOT_RUN)
    expected = (f"the DCGM exporter on {node} publishes {', '.join(f.describe() for f in required)} "
                "for every GPU, under the UUIDs the probe saw")
    if scrape.error is not None:
        return failed(PRESENT_CHECK, node, scrape.error, expected=expected, observed=scrape.error)
    where = f"the exporter pod {scrape.pod} on {node}"
    if not scrape.gpus:
        return failed(PRESENT_CHECK, node, f"{where} publishes no per-GPU series (no UUID label)",
                      expected=expected, observed="no GPU series")
    problems = [f"{gpu_name(g)} lacks {', '.join(f.describe() for f in missing)}"
                for g in sorted(scrape.gpus.values(), key=lambda g: (g.index is None, g.index or 0, g.uuid))
                if (missing := _missing(g, required))]
    published = frozenset(scrape.gpus)
    sets: tuple[str, ...] = ()
    if probe is not None and probe.uuids:
        unpublished = probe.uuids - published
        if unpublished:
            problems.append(f"the probe saw {_uuids(unpublished)}, which {where} does not publish")
        unseen = published - probe.uuids
        if probe.complete and unseen:
            problems.append(f"{where} publishes {_uuids(unseen)}, which the whole-node probe did not see")
        if unpublished or (probe.complete and unseen):
            sets = (f"the probe saw: {_uuids(probe.uuids)}", f"the exporter publishes: {_uuids(published)}")
    observed = f"{len(published)} GPU(s) published: {_uuids(published)}"
    if problems:
        return failed(PRESENT_CHECK, node, "; ".join(problems), expected=expected, observed=observed,
                      evidence=(*problems, *sets))
    if probe is None or not probe.uuids:
        why = probe_reason or "the probe reported no GPU UUID"
        return not_tested(PRESENT_CHECK, node, f"{where} publishes the required metrics for {len(published)} GPU(s), "
                          f"but their UUIDs are not compared: {why}", kind=COULD_NOT_RUN)
    how = "the same GPUs as" if probe.complete else "every GPU of"
    beyond = published - probe.uuids  # only where the probe held part of the node: nothing to compare them with
    return passed(PRESENT_CHECK, node, f"{where} publishes the required metrics for {len(published)} GPU(s), "
                  f"{how} the whole-node probe", expected=expected, observed=observed,
                  not_judged=(f"whether {_uuids(beyond)}, published beyond the probe's GPUs, are GPUs of {node}: "
                              "the probe did not hold every GPU of the node",) if beyond else ())


def _nvlink(g: GpuSamples, table: AcceleratorMetrics, node_has_nvlink: bool) -> bool:
    return node_has_nvlink or (g.model is not None and g.model in table.nvlink_models)


def evaluate_recommended_metrics_present(node: str, scrape: ExporterScrape, *,
                                         table: AcceleratorMetrics | None = None) -> Verdict:
    table = table or metrics_table()
    recommended = table.level("recommended")
    if scrape.not_tested is not None:
        return not_tested(RECOMMENDED_CHECK, node, scrape.not_tested, kind=COULD_NOT_RUN)
    if scrape.error is not None or not scrape.gpus:
        return not_tested(RECOMMENDED_CHECK, node, f"no exporter metrics to read on {node} "
                          f"({scrape.error or 'no GPU series'}; {PRESENT_CHECK} reports it)", kind=COULD_NOT_RUN)
    link_metrics = {m for f in recommended if f.when == "nvlink" for m in f.metrics}
    node_has_nvlink = any(link_metrics & set(g.values) for g in scrape.gpus.values())
    problems: list[str] = []
    for g in sorted(scrape.gpus.values(), key=lambda g: (g.index is None, g.index or 0, g.uuid)):
        wanted: Sequence[MetricFamily] = [f for f in recommended
                                          if f.when is None or _nvlink(g, table, node_has_nvlink)]
        missing = _missing(g, wanted)
        if missing:
            problems.append(f"{gpu_name(g)} ({g.model or 'model unknown'}) lacks "
                            f"{', '.join(f.describe() for f in missing)}")
    expected = (f"every GPU on {node} publishes {', '.join(f.describe() for f in recommended)} "
                "(interconnect only with NVLink)")
    if problems:
        return failed(RECOMMENDED_CHECK, node, "; ".join(problems), expected=expected,
                      observed=f"{len(problems)} of {len(scrape.gpus)} GPU(s) lack a recommended metric",
                      evidence=tuple(problems))
    # NVLink is expected by model: a GPU whose model the exporter does not name, on a node publishing no
    # NVLink figure, may have NVLink all the same.
    unknown = [gpu_name(g) for g in scrape.gpus.values() if not g.model and not _nvlink(g, table, node_has_nvlink)]
    return passed(RECOMMENDED_CHECK, node, f"all {len(scrape.gpus)} GPU(s) publish the recommended metrics"
                  + (" (NVLink included)" if any(_nvlink(g, table, node_has_nvlink) for g in scrape.gpus.values())
                     else ""), expected=expected,
                  not_judged=(f"whether {', '.join(sorted(unknown))} should publish NVLink bandwidth: the exporter "
                              "names no model (modelName label)",) if unknown else ())
