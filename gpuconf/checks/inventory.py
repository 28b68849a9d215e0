"""Inventory checks: the three views of a node's GPUs agree — what GFD labels, what the device
plugin advertises (capacity/allocatable), and what a probe pod sees through NVML and CUDA.

Inputs are plain facts (a node's labels, capacity, allocatable; the probe's parsed report), so
the suites only fetch and the decisions are unit-tested here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gpuconf.compat import tables
from gpuconf.nodes import NodeView
from gpuconf.nodes.facts import label_cuda_version, label_driver_version
from gpuconf.outcomes import COULD_NOT_RUN, NOT_APPLICABLE
from gpuconf.probes.cuda import CudaProbeReport, DeviceReport
from gpuconf.verdict import Outcome, Verdict, failed, not_tested, passed

__all__ = [
    "MIG_INVALID",
    "NVML_CHECK",
    "PROBE_DRIVER",
    "DriverPolicy",
    "GfdDeployment",
    "OperatorPolicy",
    "NodeView",
    "evaluate_allocatable_matches_capacity",
    "evaluate_cuda_device_nodes",
    "evaluate_driver_uniform",
    "evaluate_gpu_count",
    "evaluate_gpu_resource_advertised",
    "evaluate_labels_match_hardware",
    "evaluate_nvml_initializes",
    "fact_product",
    "gfd_absent_by_design",
    "gfd_deployment",
    "node_driver",
    "slice_gpus",
    "gpu_resources",
    "nvml_blocked",
    "nvml_failure",
    "node_gpu_count",
    "pool_key",
    "label_cuda_version",
    "label_driver_version",
    "pool_gpu_count",
]

GPU_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-")


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
        return not_tested(cid, node.name, "the node is not labelled as having NVIDIA GPUs", kind=NOT_APPLICABLE)
    return failed(cid, node.name, "the node is labelled as a GPU node but advertises no GPU resource",
                  expected=f"{declared} GPUs as nvidia.com/gpu (or a DRA ResourceSlice)",
                  observed="no nvidia.com/gpu or nvidia.com/mig-* in capacity, no ResourceSlice",
                  evidence=(f"label nvidia.com/gpu.count={node.label('gpu.count')}",))


def evaluate_allocatable_matches_capacity(node: NodeView, *, enumerated: Mapping[str, str] | None = None,
                                          held: Iterable[str] | None = None,
                                          unhealthy_max: int | None = None) -> Verdict:
    """Every advertised GPU is allocatable. A GPU the device plugin reports Unhealthy leaves the node
    working with the rest: DEGRADED, naming the GPU where it can be told (``enumerated``: every GPU
    the node has, UUID -> name, from its DCGM exporter; ``held``: the UUIDs the whole-node probe,
    holding every allocatable GPU, was given: the difference is the unhealthy ones). FAIL past the
    declared threshold (``unhealthy_max``: --expect's ``gpu.unhealthy_max`` for the node's pool),
    or when nothing is left allocatable."""
    cid = "inventory.allocatable-matches-capacity"
    capacity, allocatable = gpu_resources(node.capacity), gpu_resources(node.allocatable)
    if not capacity:  # a node whose GPUs DRA publishes advertises none by design
        return not_tested(cid, node.name, "no GPU resource advertised",
                          kind=NOT_APPLICABLE if node.dra_devices else COULD_NOT_RUN)
    short = {r: (c, allocatable.get(r, 0)) for r, c in capacity.items() if allocatable.get(r, 0) < c}
    if not short:
        return passed(cid, node.name, ", ".join(f"{r} {c}/{c} allocatable" for r, c in sorted(capacity.items())))
    detail = ", ".join(f"{r}: {a} of {c} allocatable ({c - a} unhealthy)" for r, (c, a) in sorted(short.items()))
    text = node.label("gpu.replicas") or "1"
    replicas = int(text) if text.isdigit() and int(text) > 0 else 1
    unhealthy = sum(c - a for c, a in short.values()) // replicas or 1  # physical GPUs behind the replicas
    named: list[str] = []
    if enumerated is not None and held is not None:
        named = [enumerated[u] for u in sorted(set(enumerated) - set(held))]
    which = (f": {', '.join(named)}" if named and len(named) == unhealthy
             else " (which one: the device plugin's log, 'marking device ... as unhealthy')")
    summary = f"the device plugin reports {unhealthy} GPU(s) Unhealthy{which}; {detail}"
    left = sum(allocatable.get(r, 0) for r in capacity)
    evidence = (f"GPUs the node's DCGM exporter reports and the whole-node probe was not given: "
                f"{', '.join(named) or 'none'}",) if enumerated is not None and held is not None else ()
    if left == 0 or (unhealthy_max is not None and unhealthy > unhealthy_max):
        why = ("nothing is left allocatable" if left == 0 else
               f"more than the {unhealthy_max} unhealthy GPU(s) per node --expect tolerates (gpu.unhealthy_max)")
        return Verdict(cid, node.name, Outcome.FAIL, f"{summary}: {why}", expected="allocatable = capacity for every "
                       "GPU resource", observed=detail, evidence=evidence)
    tolerance = (f"within the {unhealthy_max} --expect tolerates" if unhealthy_max is not None
                 else "the node works with the rest; declare gpu.unhealthy_max in --expect to fail past a threshold")
    return Verdict(cid, node.name, Outcome.DEGRADED, f"{summary} ({tolerance})",
                   expected="allocatable = capacity for every GPU resource", observed=detail, evidence=evidence)


def _physical_advertised(node: NodeView) -> int | None:
    """Physical GPUs behind the advertised resource: replicas removed; None under MIG."""
    capacity = gpu_resources(node.capacity)
    if any(k.startswith("nvidia.com/mig-") for k in capacity) or (node.label("mig.strategy") == "single"
                                                                    and "MIG" in (node.label("gpu.product") or "")):
        return None
    total = capacity.get("nvidia.com/gpu", 0) + capacity.get("nvidia.com/gpu.shared", 0)
    replicas = int(node.label("gpu.replicas") or "1") or 1
    return total // replicas


def node_gpu_count(node: NodeView) -> int | None:
    """The node's physical GPUs as GFD and the device plugin publish them (None under MIG, where
    neither counts GPUs, or when the node publishes no count)."""
    advertised = _physical_advertised(node)
    if advertised is None:
        return None
    gfd = node.label("gpu.count")
    if gfd and gfd.isdigit():
        return int(gfd)
    return advertised or slice_gpus(node) or None  # a DRA-only node: the GPUs its ResourceSlices publish


def slice_gpus(node: NodeView) -> int:
    """The physical GPUs NVIDIA's DRA driver publishes on the node (a MIG instance counts its parent)."""
    return len({d.gpu_uuid for d in node.devices if d.gpu_uuid}) or node.dra_gpus


def fact_product(node: NodeView) -> str | None:
    """The node's GPU product as GFD spells it (spaces as dashes, no -SHARED suffix): its GFD label,
    else the DRA driver's productName (gpuconf.nodes.facts), so a GFD-less node and a labelled one
    of the same GPU fall into one pool."""
    fact = node.facts.product
    if fact.value is None:
        return None
    return fact.value.replace(" ", "-").removesuffix("-SHARED")


def pool_key(node: NodeView) -> str:
    """The pool a node's GPU count is compared within: its GPU product (without the sharing suffix)
    on its machine type (GFD's ``gpu.machine``, the DMI product name) and instance type (the cloud
    provider's ``node.kubernetes.io/instance-type``, e.g. a VM flavor: every OpenStack VM has the
    machine type OpenStack-Nova), so an 8-GPU board and a 4-GPU server or flavor with the same GPU
    are not one pool."""
    product = fact_product(node) or "unknown"
    where = [v for v in (node.label("gpu.machine"), node.labels.get("node.kubernetes.io/instance-type")) if v]
    return f"{product} on {' '.join(dict.fromkeys(where))}" if where else product


def pool_gpu_count(nodes: Sequence[NodeView]) -> dict[str, tuple[int, str]]:
    """Per node, the GPU count its pool's nodes usually have and the pool's name: the most common
    count among the nodes of its :func:`pool_key` (ties to the larger), over nodes that publish a
    count. GFD relabels ``gpu.count`` after a GPU is lost, so the pool is what still remembers it."""
    from gpuconf.checks.nccl import pool_gpu_counts  # one majority rule for every pool comparison

    known = [(n.name, pool_key(n), c) for n in nodes if (c := node_gpu_count(n)) is not None]
    usual = pool_gpu_counts(known)
    sizes: dict[str, int] = defaultdict(int)
    for _, key, _ in known:
        sizes[key] += 1
    return {name: (usual[name], f"the {sizes[key]} nodes of its pool ({key})") for name, key, _ in known
            if sizes[key] > 1}


def evaluate_gpu_count(node: NodeView, *, probe: CudaProbeReport | None = None, probe_requested: int | None = None,
                       expected: int | None = None, pool: tuple[int, str] | None = None) -> Verdict:
    """The GPU count agrees across GFD, the device plugin, a whole-node probe and --expect
    (``expected``: the per-node count the node's pool declares, gpuconf.checks.expect.declared_gpu_count),
    and is not below what its pool's other nodes have (``pool``: :func:`pool_gpu_count`; after a
    GPU falls off the bus GFD, the device plugin and the probe all count one fewer, so only the
    pool and --expect still say how many there should be).
    The probe counts only when it asked for every advertised GPU (``probe_requested``): a probe that
    got the allocatable ones on a node with an unhealthy GPU says nothing about the node's count."""
    cid = "inventory.gpu-count-matches-expected"
    views: dict[str, int] = {}
    gfd_count = node.label("gpu.count")
    advertised = _physical_advertised(node)
    # Under MIG (advertised None) GFD's gpu.count counts MIG devices (single) or every physical GPU
    # (mixed), and the device plugin advertises instances: neither is the node's GPU count.
    # On a node with GPUs of several models GFD counts the labelled model's GPUs only: that count is
    # not the node's, and labels.gfd-matches-hardware names the odd GPUs.
    models = {_gfd_name(d.name) for d in probe.devices if not d.mig} if probe is not None else set()
    if gfd_count and gfd_count.isdigit() and advertised is not None and len(models) < 2:
        views["GFD label nvidia.com/gpu.count"] = int(gfd_count)
    capacity = gpu_resources(node.capacity)
    shared_total = capacity.get("nvidia.com/gpu", 0) + capacity.get("nvidia.com/gpu.shared", 0)
    shared = int(node.label("gpu.replicas") or "1") > 1
    # On a shared node capacity is GPUs x replicas: that relation is sharing.replicas-match-config's
    # to judge (a stale replicas label must not read as a lost GPU); the probe that asked for every
    # replica sees each physical GPU once.
    if advertised is not None and capacity and not shared:
        views["device plugin (capacity, replicas removed)"] = advertised
    if not views and advertised is not None and slice_gpus(node):
        # no GFD count and no device plugin (a GPUCluster-mode node): the DRA driver's count speaks for the node
        views["DRA ResourceSlices (GPUs published)"] = slice_gpus(node)
    whole_node = (probe_requested is None or advertised is None or probe_requested == advertised
                  or (shared and probe_requested == shared_total))
    if probe is not None and probe.init.ok and whole_node:
        views["probe (CUDA devices in a whole-node pod)"] = len({d.uuid for d in probe.devices})
    if expected is not None:
        views["--expect"] = expected
    # The pool speaks only against a node with fewer GPUs than its peers: GPUs get lost, not found,
    # and one bigger node among smaller ones of the same machine type is a different build.
    if pool is not None and views and min(views.values()) < pool[0]:
        views[pool[1]] = pool[0]
    if len(views) < 2:
        if len(views) == 1 and pool is not None:
            (what, count), = views.items()
            return passed(cid, node.name, f"{count} GPUs ({what}); {pool[1]} have {pool[0]}")
        return not_tested(cid, node.name, "fewer than two views of the GPU count to compare", kind=COULD_NOT_RUN)
    counts = set(views.values())
    described = "; ".join(f"{k}: {v}" for k, v in views.items())
    if len(counts) == 1:
        return passed(cid, node.name, f"{counts.pop()} GPUs in every view ({described})")
    want = expected if expected is not None else max(counts)
    lost = ""
    if pool is not None and pool[1] in views:
        lost = (f" ({pool[0] - min(counts)} GPU(s) missing: fallen off the bus, disabled or never enumerated; "
                "nvidia-smi -L and the kernel log (Xid 79) on the node say which)")
    return failed(cid, node.name, f"GPU count disagrees between views: {described}{lost}",
                  expected=f"{want} GPUs everywhere", observed=described)


#: GFD's product under mig.strategy=single when the MIG layout does not fit it (internal/lm/mig-strategy.go
#: newInvalidMigStrategyLabeler): MIG-enabled GPUs without instances, MIG-enabled beside MIG-disabled
#: GPUs, or more than one MIG profile on the node. Count, replicas and memory are then labelled 0.
MIG_INVALID = "-MIG-INVALID"


#: Where the GPU Operator's operand deploy labels switch GFD off on one node (all operands, or GFD's own).
_GFD_OFF_LABELS = ("nvidia.com/gpu.deploy.operands", "nvidia.com/gpu.deploy.gpu-feature-discovery")


class OperatorPolicy(Protocol):
    """What :func:`gfd_deployment` reads of the GPU Operator's ClusterPolicy
    (gpuconf.cluster.inventory.ClusterPolicyState)."""

    @property
    def name(self) -> str: ...

    @property
    def spec(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class GfdDeployment:
    """Whether GFD should label a node (``expected``) and why, in words."""

    expected: bool
    why: str


def gfd_deployment(node: NodeView, policy: OperatorPolicy | None,
                   gpu_cluster: OperatorPolicy | None = None) -> GfdDeployment:
    """Whether GPU Feature Discovery runs on ``node``: the GPU Operator's ClusterPolicy deploys it
    unless ``spec.gfd.enabled`` is false, on every GPU node but one whose operand deploy label says
    false (``nvidia.com/gpu.deploy.gpu-feature-discovery`` or ``.operands``). The operator's
    GPUCluster (``gpu_cluster``: nvidia.com/v1alpha1, its DRA-first mode from v26.7) deploys the DRA
    driver, DCGM and the exporter and never GFD (anchors-2026-12.md section 4; a cluster has one of
    the two, never both, so a ClusterPolicy beside it still decides). Without either nothing says GFD
    should run (a DRA-only cluster, or GFD installed by hand)."""
    if policy is None and gpu_cluster is not None:
        return GfdDeployment(False, f"the GPU Operator's GPUCluster {gpu_cluster.name} deploys no GFD (DRA-first mode, "
                                    "v26.7)")
    if policy is None:
        return GfdDeployment(False, "no GPU Operator ClusterPolicy deploys GFD on this cluster (a DRA-only cluster, "
                                    "or GFD left out by design)")
    gfd = policy.spec.get("gfd")
    if isinstance(gfd, Mapping) and str(gfd.get("enabled", True)).lower() == "false":
        return GfdDeployment(False, f"ClusterPolicy {policy.name} disables GFD (spec.gfd.enabled=false)")
    off = next((k for k in _GFD_OFF_LABELS if node.labels.get(k) == "false"), None)
    if off is not None:
        return GfdDeployment(False, f"{node.name} carries {off}=false, so ClusterPolicy {policy.name} deploys no GFD "
                                    "there")
    return GfdDeployment(True, f"GFD is deployed by ClusterPolicy {policy.name}")


#: The GFD labels a node carries when GFD runs there (a label-reading check's subject).
GFD_LABELS = ("nvidia.com/gpu.product", "nvidia.com/gpu.count", "nvidia.com/gpu.memory", "nvidia.com/gpu.family",
              "nvidia.com/gpu.compute.major", "nvidia.com/cuda.driver-version.full", "nvidia.com/cuda.driver.major",
              "nvidia.com/gpu.replicas", "nvidia.com/gpu.sharing-strategy", "nvidia.com/mig.strategy")


def gfd_absent_by_design(node: NodeView, gfd: GfdDeployment | None) -> str | None:
    """The NOT TESTED reason of a check whose subject is GFD's labels on ``node``: the node carries
    none of them and nothing deploys GFD there (``gfd``: :func:`gfd_deployment`), so there is nothing
    to judge and nothing is wrong; never a PASS. None where the check applies: the node has GFD
    labels, or GFD should run there (labels.gfd-matches-hardware then fails for the missing ones),
    or whether it should is unknown (``gfd`` None: the check judges what is there)."""
    if gfd is None or gfd.expected or any(k in node.labels for k in GFD_LABELS):
        return None
    return f"not applicable: {gfd.why}, and {node.name} carries no GFD label"


def evaluate_labels_match_hardware(node: NodeView, probe: CudaProbeReport, *,
                                   gfd: GfdDeployment | None = None) -> Verdict:
    """GFD's product, memory, compute capability, driver and CUDA labels vs what the probe saw
    (the driver and CUDA also from the deprecated ``cuda.driver.*`` / ``cuda.runtime.*`` labels
    older GFD releases publish alone). A ``-MIG-INVALID`` product is GFD saying the MIG layout does
    not fit ``mig.strategy=single``: a finding, never a profile named INVALID.

    Fail closed: a node with none of these labels FAILs where GFD should run (``gfd``:
    :func:`gfd_deployment`), and is NOT TESTED (not applicable) where it does not, or where nobody
    said (``gfd`` None); a node with some of them is judged on those, and the verdict names the
    labels missing and the facts the probe could not read."""
    cid = "labels.gfd-matches-hardware"
    product = (node.label("gpu.product") or "").removesuffix("-SHARED")
    clique = node.label("gpu.clique")
    shown = (f"NVLink clique {clique}",) if clique else ()
    if product.endswith(MIG_INVALID):
        return failed(cid, node.name, f"GFD labels the product {product}: the node's MIG layout does not fit "
                      f"mig.strategy={node.label('mig.strategy') or 'single'} (more than one MIG profile, MIG-enabled "
                      "beside MIG-disabled GPUs, or a MIG-enabled GPU without instances), so GFD withdrew the GPU "
                      f"labels (gpu.count={node.label('gpu.count')}, gpu.memory={node.label('gpu.memory')}); apply "
                      "a layout with one profile on every GPU, or switch the device plugin to mig.strategy=mixed",
                      expected="one MIG profile on every GPU (mig.strategy=single)",
                      observed=f"nvidia.com/gpu.product={product}"
                      + (f", nvidia.com/mig.config={node.labels['nvidia.com/mig.config']}"
                         if "nvidia.com/mig.config" in node.labels else ""), evidence=shown,
                      causes={"mig-invalid"})
    driver, driver_source = label_driver_version(node.labels)
    driver_key = driver_source if driver is not None else "nvidia.com/cuda.driver-version.full"
    compute = (f"{node.label('gpu.compute.major')}.{node.label('gpu.compute.minor')}"
               if node.label("gpu.compute.major") and node.label("gpu.compute.minor") else None)
    labelled = {"nvidia.com/gpu.product": product.split("-MIG-")[0] or None,
                "nvidia.com/gpu.compute.major.minor": compute,
                driver_key: driver,
                "nvidia.com/cuda.runtime-version.full": label_cuda_version(node.labels),
                "nvidia.com/gpu.memory": node.label("gpu.memory")}
    if all(v is None for v in labelled.values()):
        return _no_gfd_labels(cid, node, gfd, list(labelled))
    if not probe.devices:
        return not_tested(cid, node.name, "the probe saw no GPU, so there is no hardware to compare with",
                          kind=COULD_NOT_RUN)
    mixed = _mixed_models(node, probe, product)
    if mixed is not None:
        return mixed
    device = probe.devices[0]
    seen: dict[str, tuple[str | None, str | None]] = {
        "nvidia.com/gpu.product": (labelled["nvidia.com/gpu.product"],
                                   (device.name or "").split(" MIG ")[0].replace(" ", "-") or None),
        "nvidia.com/gpu.compute.major.minor": (compute, device.compute_capability),
        driver_key: (driver, probe.nvml_driver_version),
        # The host driver's CUDA as NVML reports it: cudaDriverGetVersion would report the compat
        # libcuda's CUDA under forward compatibility, which is not what GFD labels.
        "nvidia.com/cuda.runtime-version.full": (labelled["nvidia.com/cuda.runtime-version.full"], _nvml_cuda(probe)),
    }
    if not device.mig:  # a MIG instance's memory is its slice's, not the GPU's GFD labels
        seen["nvidia.com/gpu.memory"] = (labelled["nvidia.com/gpu.memory"],
                                         None if device.total_memory_bytes is None
                                         else str(device.total_memory_bytes >> 20))
    wrong = {k: v for k, v in seen.items() if v[0] is not None and v[1] is not None and v[0] != v[1]}
    if not wrong:
        unlabelled = [k for k, (a, _) in seen.items() if a is None]
        unread = [k for k, (a, b) in seen.items() if a is not None and b is None]
        judged = [k for k, (a, b) in seen.items() if a is not None and b is not None]
        if not judged:
            return not_tested(cid, node.name, f"no GFD label on {node.name} has a probe reading to compare with "
                              f"(the probe could not read: {', '.join(unread)})", kind=COULD_NOT_RUN)
        gaps = ([f"not labelled: {', '.join(unlabelled)}"] if unlabelled else []) + (
            [f"not read by the probe, so not judged: {', '.join(unread)}"] if unread else [])
        return passed(cid, node.name, f"GFD labels match the hardware ({product}"
                      + (f", NVLink clique {clique}" if clique else "") + ")"
                      + (f"; {'; '.join(gaps)}" if gaps else ""), evidence=shown)
    return failed(cid, node.name, "GFD labels disagree with what a pod on the node sees: "
                  + ", ".join(f"{k} says {a!r}, the GPU says {b!r}" for k, (a, b) in sorted(wrong.items())),
                  expected="; ".join(f"{k}={b}" for k, (_, b) in sorted(wrong.items())),
                  observed="; ".join(f"{k}={a}" for k, (a, _) in sorted(wrong.items())), evidence=shown,
                  causes={_LABEL_FINDING.get(k, "driver-version") for k in wrong})


#: The finding (gpuconf/data/checks.yaml) of each label labels.gfd-matches-hardware compares; the
#: driver's label is whichever of the current and deprecated keys the node carries ("driver-version").
_LABEL_FINDING = {"nvidia.com/gpu.product": "gpu.product", "nvidia.com/gpu.compute.major.minor": "compute-capability",
                  "nvidia.com/cuda.runtime-version.full": "cuda-version", "nvidia.com/gpu.memory": "gpu.memory"}


def _no_gfd_labels(cid: str, node: NodeView, gfd: GfdDeployment | None, keys: Sequence[str]) -> Verdict:
    """The verdict on a node that carries none of GFD's labels: a broken GFD where it should run."""
    which = ", ".join(keys)
    if gfd is None:
        return not_tested(cid, node.name, f"{node.name} carries no GFD label ({which}), and whether GFD should run "
                          "there is unknown", kind=COULD_NOT_RUN)
    if not gfd.expected:
        return not_tested(cid, node.name, f"not applicable: {gfd.why}, and {node.name} carries no GFD label",
                          kind=NOT_APPLICABLE)
    return failed(cid, node.name, f"{gfd.why} but node {node.name} carries no nvidia.com/gpu.* labels ({which}): "
                  "GFD is not running there or cannot read the GPUs",
                  expected="GFD's labels on the node", observed="none of " + which, causes={"no-labels"},
                  remedy="Find the node's gpu-feature-discovery pod (kubectl get pods -A -o wide -l "
                  "app=gpu-feature-discovery --field-selector spec.nodeName=NODE) and read its log; a missing pod "
                  "means the operator does not schedule it there (node labels nvidia.com/gpu.present, "
                  "nvidia.com/gpu.deploy.gpu-feature-discovery, taints), a crashing one names its error (often NVML "
                  "failing in its container).")


def _gfd_name(name: str | None) -> str:
    """A CUDA/NVML device name as GFD writes it in gpu.product (spaces to dashes)."""
    return (name or "unknown").split(" MIG ")[0].replace(" ", "-")


def _mixed_models(node: NodeView, probe: CudaProbeReport, product: str) -> Verdict | None:
    """A failure when the whole-node probe sees GPUs of more than one model, naming each GPU that is
    not the labelled model (or, when none is, not the commonest) by index, UUID and bus id. GFD
    describes one model per node and counts only that model's GPUs (k8s-device-plugin
    internal/lm/mig-strategy.go newGPULabelers, which warns "Multiple device types detected"), so
    whatever it labels is false for some of the node's GPUs. None when every GPU is one model."""
    cid = "labels.gfd-matches-hardware"
    whole = [d for d in probe.devices if not d.mig]
    groups: dict[str, list[DeviceReport]] = defaultdict(list)
    for d in whole:
        groups[_gfd_name(d.name)].append(d)
    if len(groups) < 2:
        return None
    labelled = product.split("-MIG-")[0]
    main = labelled if labelled in groups else max(groups, key=lambda k: len(groups[k]))
    odd = [d for k, ds in groups.items() if k != main for d in ds]
    name = {k: ds[0].name for k, ds in groups.items()}
    gpus = "; ".join(f"GPU {d.index} ({d.uuid}, bus {d.pci_bus_id}) is {d.name}" for d in odd)
    others = len(whole) - len(odd)
    return failed(cid, node.name, f"{node.name} mixes GPU models: {gpus}, where the other {others} are {name[main]}; "
                  f"GFD labels one model per node (nvidia.com/gpu.product={product or 'absent'}, "
                  f"gpu.count={node.label('gpu.count')}), so pods selecting by it may get the other model: replace "
                  "the odd GPU with the node's model, or expose it as its own resource and label",
                  expected=f"every GPU a {name[main]}",
                  observed="; ".join(f"{len(ds)} x {ds[0].name}" for ds in sorted(groups.values(), key=len,
                                                                                    reverse=True)),
                  evidence=tuple(f"GPU {d.index} {d.uuid} bus {d.pci_bus_id}: {d.name}, "
                                 f"{(d.total_memory_bytes or 0) >> 20} MiB, compute {d.compute_capability}"
                                 for d in whole), causes={"mixed-models"})


def _nvml_cuda(probe: CudaProbeReport) -> str | None:
    value = (probe.raw.get("nvml") or {}).get("cuda_driver_version")
    return f"{value // 1000}.{(value % 1000) // 10}" if isinstance(value, int) and value >= 1000 else None


@dataclass(frozen=True)
class DriverPolicy:
    """What --expect declares for a node's pool: an exact driver version, or only its branch (a
    branch-only policy allows any version of that branch, so skew inside it is no finding)."""

    pool: str
    version: str | None = None
    branch: int | None = None


def _branch(version: str) -> int | None:
    head = version.split(".")[0]
    return int(head) if head.isdigit() else None


#: Where :func:`node_driver` read a driver version from the probe (the most direct reading).
PROBE_DRIVER = "NVML in the whole-node probe"


def node_driver(node: NodeView, probed: str | None = None) -> tuple[str | None, str]:
    """The node's driver version and where it was read, or None and why it is unknown, from the most
    direct source the run has: ``probed``, the driver NVML reported in the whole-node probe (what a
    pod given the node's GPUs runs on), else GFD's ``cuda.driver-version.full`` label (or, from older
    GFD releases, ``cuda.driver.major/minor/rev``), else the DRA driver's ``driverVersion`` attribute
    (gpuconf.nodes.facts). A label that disagrees with the probe is labels.gfd-matches-hardware's
    finding, never a driver skew."""
    if probed:
        return probed, PROBE_DRIVER
    version, missing = label_driver_version(node.labels)
    if version is not None:
        return version, f"label {missing}"
    fact = node.facts.driver
    if fact.value is not None:
        return fact.value, f"{fact.source.value} {fact.key}"
    return None, f"{missing}, no ResourceSlice attribute driverVersion and no NVML reading from a whole-node probe"


def _version(text: str) -> tuple[int, ...]:
    """580.95.05 and 580.95.5 alike (the DRA driver drops leading zeros): numeric parts."""
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def evaluate_driver_uniform(nodes: Sequence[NodeView], policy: Mapping[str, DriverPolicy] | None = None, *,
                            probed: Mapping[str, str] | None = None) -> list[Verdict]:
    """One verdict per node: its driver against what --expect declares for its pool (``policy``,
    by node name: an exact version, or a branch that allows any version on it), else against the
    majority of its pool (same GPU product, :func:`fact_product`). The version is :func:`node_driver`'s
    (``probed``: node -> the driver NVML reported in its whole-node probe; else GFD's label, else the
    DRA driver's attribute), compared as a version; every verdict names its source. A pool of one has
    nothing to be uniform with (not applicable without a policy); a node whose pool's other drivers
    are all unknown could not be compared; a PASS names the pool's nodes it was not compared with."""
    cid = "driver.version-uniform-in-pool"
    policy = policy or {}
    probed = probed or {}
    pools: dict[str, list[NodeView]] = defaultdict(list)
    for n in nodes:
        pools[fact_product(n) or "unknown"].append(n)
    out = []
    for product, members in sorted(pools.items()):
        versions = {n.name: node_driver(n, probed.get(n.name)) for n in members}
        known = [_version(v) for v, _ in versions.values() if v]
        # The pool's version is the most common one; on a tie, the newest (a node left behind by
        # an upgrade is the usual odd one out). A declared --expect policy takes precedence.
        top = max(set(known), key=lambda v: (known.count(v), v)) if known else None
        majority = next((v for v, _ in versions.values() if v and _version(v) == top), None)
        for n in members:
            version, source = versions[n.name]
            declared = policy.get(n.name)
            if version is None:
                out.append(not_tested(cid, n.name, source, kind=COULD_NOT_RUN))
                continue
            shown = f"{version} ({source})"
            if declared is not None and declared.version is not None:
                if _version(version) == _version(declared.version):
                    out.append(passed(cid, n.name, f"driver {shown}, as --expect declares for pool {declared.pool}"))
                else:
                    out.append(failed(cid, n.name, f"driver {shown} while --expect declares {declared.version} for "
                                      f"pool {declared.pool}", expected=declared.version, observed=version))
                continue
            if declared is not None and declared.branch is not None:
                if _branch(version) == declared.branch:
                    others = sorted({v for v, _ in versions.values() if v and _version(v) != _version(version)})
                    out.append(passed(cid, n.name, f"driver {shown} on branch {declared.branch}, which --expect "
                                      f"allows for pool {declared.pool} (branch-only policy"
                                      + (f"; the pool also runs {', '.join(others)}" if others else "") + ")"))
                else:
                    out.append(failed(cid, n.name, f"driver {shown} is on branch {_branch(version)} while --expect "
                                      f"declares branch {declared.branch} for pool {declared.pool}",
                                      expected=f"a {declared.branch}.x driver", observed=version))
                continue
            out.append(_against_pool(cid, n.name, product, shown, version, majority,
                                     {m.name: versions[m.name][0] for m in members if m is not n}))
    return out


def _against_pool(cid: str, node: str, product: str, shown: str, version: str, majority: str | None,
                  others: Mapping[str, str | None]) -> Verdict:
    """A node's driver against its pool's majority (``others``: every other node of the pool and its
    version, None where unknown)."""
    if not others:
        return not_tested(cid, node, f"{node} is the only node of the {product} pool: there is no other node to "
                          f"compare its driver {shown} with (--expect can declare the pool's driver)",
                          kind=NOT_APPLICABLE)
    unknown = [m for m, v in others.items() if v is None]
    if len(unknown) == len(others):
        return not_tested(cid, node, f"the driver of the other node(s) of the {product} pool is unknown ("
                          f"{', '.join(unknown)}): {node}'s driver {shown} has nothing to be compared with",
                          kind=COULD_NOT_RUN)
    caveat = (f"the driver of {', '.join(unknown)} (unknown), so it is compared with {len(others) - len(unknown)} of "
              f"the pool's {len(others)} other nodes",) if unknown else ()
    if majority is not None and _version(version) == _version(majority):
        return passed(cid, node, f"driver {shown}, as the rest of the {product} pool", not_judged=caveat)
    return failed(cid, node, f"driver {shown} while the {product} pool runs {majority}",
                  expected=str(majority), observed=version)


NVML_CHECK = "driver.nvml-initializes"
#: The probe's NVML section until its NVML step ran (probes/cuda-probe/probe.cu run_nvml).
NVML_NOT_REACHED = "NVML not initialised yet"


def nvml_failure(reason: str) -> tuple[str, str]:
    """What NVML's error (the probe's ``nvml.reason``: the failing call and nvmlErrorString, or
    dlopen's error) means in a pod given GPUs, and its remedy (gpuconf/data/nvml_errors.yaml)."""
    for row in tables.load("nvml_errors")["errors"]:
        if str(row["match"]).lower() in reason.lower():
            return str(row["cause"]), str(row["remediation"])
    raise ValueError("gpuconf/data/nvml_errors.yaml has no catch-all row (match: \"\")")


def nvml_blocked(probe: CudaProbeReport) -> str | None:
    """Why a check reading the probe's NVML section is blocked (None: NVML initialised): the
    failure is ``driver.nvml-initializes``'s to report, once; its dependants are NOT TESTED."""
    if probe.nvml_absent_reason is None:
        return None
    return f"blocked by {NVML_CHECK}: NVML did not initialise in the probe ({probe.nvml_absent_reason})"


def evaluate_nvml_initializes(node: str, probe: CudaProbeReport) -> Verdict:
    """NVML initialises in the whole-node probe, a pod that was given the node's GPUs. Any failure
    is the node's: a version mismatch, a library the toolkit did not inject, no driver loaded, no
    permission on the device nodes, NVML's "Unknown Error" (a container that lost its devices), a
    hang. The failure names NVML's own error and the remedy for it."""
    reason = probe.nvml_absent_reason
    if reason is None:
        return passed(NVML_CHECK, node, f"NVML driver {probe.nvml_driver_version}")
    if reason == NVML_NOT_REACHED:  # the probe stopped before its NVML step: smoke reports why, once
        return not_tested(NVML_CHECK, node, f"the probe on {node} stopped before it loaded NVML (exit "
                          f"{probe.exit_code}: {probe.exit_reason})", kind=COULD_NOT_RUN)
    cause, remedy = nvml_failure(reason)
    return failed(NVML_CHECK, node, f"NVML does not initialise in a pod given the GPUs of {node}: {reason} ({cause})",
                  expected="NVML initialises", observed=reason, evidence=(reason,), remedy=remedy)


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
        evidence=evidence, causes={"device-node-missing"})
