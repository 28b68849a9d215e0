"""NCCL checks: before a job, the node can take it; within a node, the all-GPU all-reduce completes
with correct results, at the busbw its hardware should give, over the transport it should use.

Floors come from gpuconf/data/nccl_floors.yaml (gpuconf.compat.tables.intra_node_floor): hardware
not in the data is measured and reported, never judged. The figure compared is the large-message
busbw (messages of 1 GiB and more, as the probe averages them), never the mean over every size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuconf.compat import tables
from gpuconf.compat.tables import NcclFloor
from gpuconf.probes.nccl import NcclProbeReport
from gpuconf.verdict import Verdict, failed, not_tested, passed

__all__ = ["GpuHolder", "evaluate_allreduce_completes", "evaluate_busbw", "evaluate_preflight",
           "evaluate_transport", "expected_floor", "holders_by_node"]

#: Parts that come on 8-GPU NVSwitch boards (HGX/DGX) when a node has eight of them.
_NVSWITCH_PARTS = ("NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA H200",
                   "NVIDIA B200")


@dataclass(frozen=True)
class GpuHolder:
    """A pod outside this run holding GPUs on a node."""

    namespace: str
    name: str
    gpus: int


def evaluate_preflight(node: str, *, capacity: int, allocatable: int, holders: Sequence[GpuHolder]) -> Verdict:
    """A node takes an all-GPU NCCL job only with every GPU allocatable and free; otherwise say so by
    name now, rather than let the job time out Pending."""
    cid = "nccl.preflight-gpus-free"
    if capacity < 1:
        return not_tested(cid, node, f"{node} advertises no nvidia.com/gpu")
    if allocatable < capacity:
        return failed(cid, node, f"{node} has {allocatable}/{capacity} GPUs allocatable: an all-GPU NCCL job "
                      "cannot be placed there", expected=f"{capacity}/{capacity} allocatable",
                      observed=f"{allocatable}/{capacity} allocatable")
    used = sum(h.gpus for h in holders)
    if used:
        return not_tested(cid, node, f"{node} has {used} of {capacity} GPUs in use by other pods ("
                          + ", ".join(f"{h.namespace}/{h.name}: {h.gpus}" for h in holders[:5])
                          + (f" and {len(holders) - 5} more" if len(holders) > 5 else "")
                          + "): NCCL runs on idle nodes only")
    return passed(cid, node, f"all {capacity} GPUs allocatable and free")


def evaluate_allreduce_completes(node: str, report: NcclProbeReport) -> Verdict:
    cid = "nccl.allreduce-completes"
    if report.hung:
        at = f" at {report.running_bytes} bytes" if report.running_bytes is not None else ""
        return failed(cid, node, f"the all-reduce hung{at}: {report.exit_reason}", expected="every size completes",
                      observed=f"hung{at} (exit {report.exit_code})")
    if report.exit_code != 0 or not report.sweep_completed:
        return failed(cid, node, f"the NCCL probe did not complete its sweep: {report.exit_reason}",
                      expected="exit 0, sweep completed", observed=f"exit {report.exit_code}")
    wrong = [s for s in report.sizes if not s.correct]
    if wrong or report.all_correct is False:
        return failed(cid, node, f"wrong all-reduce results at {len(wrong)} message size(s)",
                      expected="every element correct",
                      observed=", ".join(f"{s.bytes} B: {s.mismatches} mismatches" for s in wrong[:5]))
    return passed(cid, node, f"all-reduce over {report.nranks or len(report.local_gpu_uuids)} GPUs completed "
                  f"correctly at {len(report.sizes)} message sizes")


def _fabric(gpu: str, gpus: int) -> str:
    model = tables.find_gpu(gpu)
    return "nvswitch" if model is not None and model.name in _NVSWITCH_PARTS and gpus == 8 else "pcie"


def expected_floor(gpu: str, gpus: int) -> NcclFloor | None:
    """The floor the node should reach: its best algorithm's (NVLS where the data has it, else ring)."""
    fabric = _fabric(gpu, gpus)
    for algorithm in ("nvls", "ring"):
        floor = tables.intra_node_floor(gpu, gpus, fabric, algorithm)
        if floor is not None:
            return floor
    return None


def evaluate_busbw(node: str, report: NcclProbeReport, floor: NcclFloor | None, *,
                   declared_gbps: float | None = None) -> Verdict:
    """Large-message busbw against the data's floor (or the floor --expect declares for the pool)."""
    cid = "nccl.busbw-above-floor"
    measured = report.large_message_avg_busbw_gbps
    if measured is None:
        return not_tested(cid, node, f"no large-message figure: {report.exit_reason}")
    if declared_gbps is not None:
        minimum, what = declared_gbps, f"the declared floor {declared_gbps:g} GB/s (--expect)"
    elif floor is not None:
        minimum, what = floor.minimum_gbps, (f"{floor.figure_gbps:g} GB/s less {floor.tolerance:.0%} for "
                                             f"{floor.key} ({floor.source})")
    else:
        return not_tested(cid, node, f"measured {measured:g} GB/s; no floor for this hardware in "
                          "gpuconf/data/nccl_floors.yaml (recorded, not judged)")
    if measured < minimum:
        return failed(cid, node, f"large-message all-reduce busbw {measured:g} GB/s is below {what}",
                      expected=f">= {minimum:g} GB/s", observed=f"{measured:g} GB/s",
                      evidence=(f"peak {report.peak_busbw_gbps} GB/s; transports {', '.join(report.transports)}",))
    return passed(cid, node, f"large-message busbw {measured:g} GB/s >= {minimum:g} GB/s ({what})")


def evaluate_transport(node: str, report: NcclProbeReport, floor: NcclFloor | None) -> Verdict:
    """NCCL chose the transport the hardware calls for (NVLS on NVSwitch Hopper, P2P not SHM...)."""
    cid = "nccl.transport-expected"
    if floor is None:
        return not_tested(cid, node, "no expectation for this hardware in gpuconf/data/nccl_floors.yaml "
                          f"(NCCL chose: {', '.join(report.transports) or 'unknown'})")
    if not report.transports:
        return not_tested(cid, node, f"the probe reported no transport: {report.exit_reason}")
    want = floor.transport.split("/")[0]
    if not any(t == want or t.startswith(want + "/") for t in report.transports):
        return failed(cid, node, f"NCCL chose {', '.join(report.transports)}, not {floor.transport}, for {floor.key}",
                      expected=floor.transport, observed=", ".join(report.transports))
    return passed(cid, node, f"NCCL uses {floor.transport} ({', '.join(report.transports)})")


def holders_by_node(pods: Sequence[Mapping[str, object]], *, exclude_namespace: str) -> dict[str, list[GpuHolder]]:
    """Pods (API objects, not finished) holding nvidia.com/gpu, by node; the run's own excluded."""
    out: dict[str, list[GpuHolder]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        if not isinstance(meta, Mapping) or not isinstance(spec, Mapping):
            continue
        node = spec.get("nodeName")
        if not node or meta.get("namespace") == exclude_namespace:
            continue
        gpus = 0
        for c in spec.get("containers") or []:
            limits = ((c.get("resources") or {}).get("limits") or {}) if isinstance(c, Mapping) else {}
            try:
                gpus += int(str(limits.get("nvidia.com/gpu", "0")))
            except ValueError:
                continue
        if gpus:
            out.setdefault(str(node), []).append(GpuHolder(str(meta.get("namespace")), str(meta.get("name")), gpus))
    return out
