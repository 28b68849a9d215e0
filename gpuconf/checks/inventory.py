"""Inventory checks: the three views of a node's GPUs agree — what GFD labels, what the device
plugin advertises (capacity/allocatable), and what a probe pod sees through NVML and CUDA.

Inputs are plain facts (a node's labels, capacity, allocatable; the probe's parsed report), so
the suites only fetch and the decisions are unit-tested here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gpuconf.probes.cuda import CudaProbeReport
from gpuconf.verdict import Verdict, failed, not_tested, passed

__all__ = [
    "NodeView",
    "evaluate_allocatable_matches_capacity",
    "evaluate_cuda_device_nodes",
    "evaluate_driver_uniform",
    "evaluate_gpu_count",
    "evaluate_gpu_resource_advertised",
    "evaluate_labels_match_hardware",
    "evaluate_nvml_initializes",
    "gpu_resources",
]

GPU_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-")


@dataclass(frozen=True)
class NodeView:
    """What the API says about a node's GPUs."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    capacity: Mapping[str, str] = field(default_factory=dict)
    allocatable: Mapping[str, str] = field(default_factory=dict)
    dra_devices: int = 0  # devices its ResourceSlices publish

    def label(self, key: str) -> str | None:
        return self.labels.get(f"nvidia.com/{key}")


def gpu_resources(amounts: Mapping[str, str]) -> dict[str, int]:
    return {k: int(v) for k, v in amounts.items() if k.startswith(GPU_PREFIXES) and str(v).isdigit()}


def evaluate_gpu_resource_advertised(node: NodeView) -> Verdict:
    cid = "inventory.gpu-resource-advertised"
    advertised = sum(gpu_resources(node.capacity).values())
    if advertised or node.dra_devices:
        how = f"{advertised} in capacity" if advertised else f"{node.dra_devices} DRA devices"
        return passed(cid, node.name, f"GPUs advertised ({how})")
    declared = node.label("gpu.count") or ("some" if node.label("gpu.present") == "true" else None)
    if declared is None:
        return not_tested(cid, node.name, "the node is not labelled as having NVIDIA GPUs")
    return failed(cid, node.name, "the node is labelled as a GPU node but advertises no GPU resource",
                  expected=f"{declared} GPUs as nvidia.com/gpu (or a DRA ResourceSlice)",
                  observed="no nvidia.com/gpu or nvidia.com/mig-* in capacity, no ResourceSlice",
                  evidence=(f"label nvidia.com/gpu.count={node.label('gpu.count')}",))


def evaluate_allocatable_matches_capacity(node: NodeView) -> Verdict:
    cid = "inventory.allocatable-matches-capacity"
    capacity, allocatable = gpu_resources(node.capacity), gpu_resources(node.allocatable)
    if not capacity:
        return not_tested(cid, node.name, "no GPU resource advertised")
    short = {r: (c, allocatable.get(r, 0)) for r, c in capacity.items() if allocatable.get(r, 0) < c}
    if not short:
        return passed(cid, node.name, ", ".join(f"{r} {c}/{c} allocatable" for r, c in sorted(capacity.items())))
    detail = ", ".join(f"{r}: {a} of {c} allocatable ({c - a} unhealthy)" for r, (c, a) in sorted(short.items()))
    return failed(cid, node.name, f"the device plugin reports unhealthy GPUs: {detail}",
                  expected="allocatable = capacity for every GPU resource", observed=detail)


def _physical_advertised(node: NodeView) -> int | None:
    """Physical GPUs behind the advertised resource: replicas removed; None under MIG."""
    capacity = gpu_resources(node.capacity)
    if any(k.startswith("nvidia.com/mig-") for k in capacity) or (node.label("mig.strategy") == "single"
                                                                    and "MIG" in (node.label("gpu.product") or "")):
        return None
    total = capacity.get("nvidia.com/gpu", 0) + capacity.get("nvidia.com/gpu.shared", 0)
    replicas = int(node.label("gpu.replicas") or "1") or 1
    return total // replicas


def evaluate_gpu_count(node: NodeView, *, probe: CudaProbeReport | None = None, probe_requested: int | None = None,
                       expected: int | None = None) -> Verdict:
    """The GPU count agrees across GFD, the device plugin, a whole-node probe and --expect
    (``expected``: the per-node count the node's pool declares, gpuconf.checks.expect.declared_gpu_count).
    The probe counts only when it asked for every advertised GPU (``probe_requested``): a probe that
    got the allocatable ones on a node with an unhealthy GPU says nothing about the node's count."""
    cid = "inventory.gpu-count-matches-expected"
    views: dict[str, int] = {}
    gfd_count = node.label("gpu.count")
    advertised = _physical_advertised(node)
    # Under MIG (advertised None) GFD's gpu.count counts MIG devices (single) or the GPUs left
    # without MIG (mixed), not the node's GPUs.
    if gfd_count and gfd_count.isdigit() and advertised is not None:
        views["GFD label nvidia.com/gpu.count"] = int(gfd_count)
    capacity = gpu_resources(node.capacity)
    shared_total = capacity.get("nvidia.com/gpu", 0) + capacity.get("nvidia.com/gpu.shared", 0)
    shared = int(node.label("gpu.replicas") or "1") > 1
    # On a shared node capacity is GPUs x replicas: that relation is sharing.replicas-match-config's
    # to judge (a stale replicas label must not read as a lost GPU); the probe that asked for every
    # replica sees each physical GPU once.
    if advertised is not None and capacity and not shared:
        views["device plugin (capacity, replicas removed)"] = advertised
    whole_node = (probe_requested is None or advertised is None or probe_requested == advertised
                  or (shared and probe_requested == shared_total))
    if probe is not None and probe.init.ok and whole_node:
        views["probe (CUDA devices in a whole-node pod)"] = len({d.uuid for d in probe.devices})
    if expected is not None:
        views["--expect"] = expected
    if len(views) < 2:
        return not_tested(cid, node.name, "fewer than two views of the GPU count to compare")
    counts = set(views.values())
    described = "; ".join(f"{k}: {v}" for k, v in views.items())
    if len(counts) == 1:
        return passed(cid, node.name, f"{counts.pop()} GPUs in every view ({described})")
    want = expected if expected is not None else max(counts)
    return failed(cid, node.name, f"GPU count disagrees between views: {described}",
                  expected=f"{want} GPUs everywhere", observed=described)


def evaluate_labels_match_hardware(node: NodeView, probe: CudaProbeReport) -> Verdict:
    """GFD's product, memory, compute capability, driver and CUDA labels vs what the probe saw."""
    cid = "labels.gfd-matches-hardware"
    if not probe.devices:
        return not_tested(cid, node.name, "the probe saw no GPU, so there is no hardware to compare with")
    device = probe.devices[0]
    product = node.label("gpu.product") or ""
    for suffix in ("-SHARED",):
        product = product.removesuffix(suffix)
    seen: dict[str, tuple[str | None, str | None]] = {
        "nvidia.com/gpu.product": (product.split("-MIG-")[0] or None,
                                   (device.name or "").split(" MIG ")[0].replace(" ", "-") or None),
        "nvidia.com/gpu.compute.major.minor": (
            f"{node.label('gpu.compute.major')}.{node.label('gpu.compute.minor')}", device.compute_capability),
        "nvidia.com/cuda.driver-version.full": (node.label("cuda.driver-version.full"), probe.nvml_driver_version),
        # The host driver's CUDA as NVML reports it: cudaDriverGetVersion would report the compat
        # libcuda's CUDA under forward compatibility, which is not what GFD labels.
        "nvidia.com/cuda.runtime-version.full": (node.label("cuda.runtime-version.full"), _nvml_cuda(probe)),
    }
    if not device.mig and device.total_memory_bytes is not None:
        seen["nvidia.com/gpu.memory"] = (node.label("gpu.memory"), str(device.total_memory_bytes >> 20))
    wrong = {k: v for k, v in seen.items() if v[0] is not None and v[1] is not None and v[0] != v[1]}
    if not wrong:
        return passed(cid, node.name, f"GFD labels match the hardware ({product})")
    return failed(cid, node.name, "GFD labels disagree with what a pod on the node sees: "
                  + ", ".join(f"{k} says {a!r}, the GPU says {b!r}" for k, (a, b) in sorted(wrong.items())),
                  expected="; ".join(f"{k}={b}" for k, (_, b) in sorted(wrong.items())),
                  observed="; ".join(f"{k}={a}" for k, (a, _) in sorted(wrong.items())))


def _nvml_cuda(probe: CudaProbeReport) -> str | None:
    value = (probe.raw.get("nvml") or {}).get("cuda_driver_version")
    return f"{value // 1000}.{(value % 1000) // 10}" if isinstance(value, int) and value >= 1000 else None


def evaluate_driver_uniform(nodes: Sequence[NodeView]) -> list[Verdict]:
    """One verdict per node: its driver against the majority of its pool (same GPU product)."""
    cid = "driver.version-uniform-in-pool"
    pools: dict[str, list[NodeView]] = defaultdict(list)
    for n in nodes:
        pools[(n.label("gpu.product") or "unknown").removesuffix("-SHARED")].append(n)
    out = []
    for product, members in sorted(pools.items()):
        versions = {n.name: n.label("cuda.driver-version.full") for n in members}
        known = [v for v in versions.values() if v]
        if not known:
            out += [not_tested(cid, n.name, "no nvidia.com/cuda.driver-version.full label") for n in members]
            continue
        # The pool's version is the most common one; on a tie, the newest (a node left behind by
        # an upgrade is the usual odd one out). A declared --expect version will take precedence.
        majority = max(set(known), key=lambda v: (known.count(v), tuple(int(p) for p in v.split(".")
                                                                        if p.isdigit())))
        for n in members:
            version = versions[n.name]
            if version is None:
                out.append(not_tested(cid, n.name, "no nvidia.com/cuda.driver-version.full label"))
            elif version == majority:
                out.append(passed(cid, n.name, f"driver {version}, as the rest of the {product} pool"))
            else:
                out.append(failed(cid, n.name, f"driver {version} while the {product} pool runs {majority}",
                                  expected=majority, observed=version))
    return out


def evaluate_nvml_initializes(node: str, probe: CudaProbeReport) -> Verdict:
    cid = "driver.nvml-initializes"
    reason = probe.nvml_absent_reason
    if reason is None:
        return passed(cid, node, f"NVML driver {probe.nvml_driver_version}")
    if "mismatch" in reason.lower():
        return failed(cid, node, "NVML fails: the kernel module and the user-space driver differ",
                      expected="NVML initialises", observed=reason, evidence=(reason,))
    return not_tested(cid, node, f"NVML not loaded in the probe: {reason}")


def evaluate_cuda_device_nodes(node: str, probe: CudaProbeReport) -> Verdict:
    """The device nodes a GPU container needs. CUDA init failures with the nodes present are other
    checks' business (NVML, compatibility); they are shown here as evidence only."""
    cid = "runtime.cuda-device-nodes-present"
    nodes = probe.device_nodes
    missing = [p for p in ("/dev/nvidiactl", "/dev/nvidia-uvm") if not nodes.get(p)]
    if not nodes.get("gpus"):
        missing.append("/dev/nvidia<N>")
    evidence = (f"cudaFree(0): {probe.init}",)
    if not missing:
        return passed(cid, node, f"/dev/nvidiactl, /dev/nvidia-uvm and {len(nodes['gpus'])} GPU device nodes present",
                      evidence=evidence)
    return failed(cid, node, "a GPU pod on this node lacks " + ", ".join(missing) + (
        " (nvidia_uvm is not loaded: nvidia-smi works but CUDA fails)" if "/dev/nvidia-uvm" in missing else ""),
        expected="/dev/nvidiactl, /dev/nvidia-uvm and /dev/nvidiaN", observed="missing " + ", ".join(missing),
        evidence=evidence)
