"""What a simulated node publishes about itself, derived from its facts: the labels NFD, the GPU
Operator and GFD put on the Node, the capacity and allocatable the device plugin reports, the
devices it advertises (for allocation), and the ResourceSlices NVIDIA's DRA driver publishes.

Pure functions of ``SimNode``; the node agent writes their results through the Kubernetes API.
GFD describes the *declared* configuration read from the node (the device-plugin ConfigMap),
the device plugin reports what is really there: that difference is what several faults
(label-drift, mig-layout-drift, timeslice-replicas-wrong) plant for the suites to find.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from gpuconf.compat import tables
from gpuconf.compat.tables import GpuModel
from gpuconf.sim.profile import NodePool, SimGpu, SimMigInstance, SimNode

__all__ = ["AdvertisedDevice", "advertised_devices", "mig_config_name", "mig_parted_entries", "node_labels",
           "node_resources", "resource_slices"]

GPU = "nvidia.com/gpu"


def mig_config_name(pool: NodePool) -> str | None:
    """The name of the pool's declared MIG layout in mig-manager's config, as its
    ``nvidia.com/mig.config`` label names it: ``all-<profile>`` for one profile on every GPU
    at its most instances (mig-parted's own naming), else ``custom-<pool>``; None without MIG."""
    mig = pool.device_plugin.mig
    if not mig.enabled:
        return None
    if not mig.per_gpu and len(mig.layout) == 1:
        profile, count = mig.layout[0]
        most = next((p["max_instances"] for row in tables.load("mig_profiles")["profile_sets"]
                     if pool.gpu.name in row["gpus"] for p in row["profiles"] if p["name"] == profile), None)
        if count == most:
            return f"all-{profile}"
    return f"custom-{pool.name}"


def mig_parted_entries(pool: NodePool) -> list[dict[str, object]]:
    """The pool's declared layout as mig-parted config entries (``devices``, ``mig-enabled``,
    ``mig-devices``): one entry per distinct layout, by GPU index where GPUs differ."""
    mig = pool.device_plugin.mig
    if not mig.per_gpu:
        return [{"devices": "all", "mig-enabled": True, "mig-devices": dict(mig.layout)}]
    groups: dict[tuple[tuple[str, int], ...], list[int]] = {}
    for index in range(pool.gpus_per_node):
        groups.setdefault(mig.for_gpu(index), []).append(index)
    return [{"devices": gpus, "mig-enabled": bool(layout), **({"mig-devices": dict(layout)} if layout else {})}
            for layout, gpus in groups.items()]


def _cuda_labels(node: SimNode) -> dict[str, str]:
    parts = str(node.driver).split(".")
    major, minor = parts[0], parts[1] if len(parts) > 1 else "0"
    rev = parts[2] if len(parts) > 2 else ""
    native = tables.native_cuda(node.driver)
    labels = {
        "nvidia.com/cuda.driver-version.full": str(node.driver),
        "nvidia.com/cuda.driver-version.major": major, "nvidia.com/cuda.driver-version.minor": minor,
        "nvidia.com/cuda.driver-version.revision": rev,
        # The deprecated keys GFD still writes, for tools that read them.
        "nvidia.com/cuda.driver.major": major, "nvidia.com/cuda.driver.minor": minor, "nvidia.com/cuda.driver.rev": rev,
    }
    if native is not None:
        labels.update({
            "nvidia.com/cuda.runtime-version.full": f"{native.major}.{native.minor}",
            "nvidia.com/cuda.runtime-version.major": str(native.major),
            "nvidia.com/cuda.runtime-version.minor": str(native.minor),
            "nvidia.com/cuda.runtime.major": str(native.major), "nvidia.com/cuda.runtime.minor": str(native.minor),
        })
    return labels


def _mig_invalid(gpus: tuple[SimGpu, ...], mig_capable: bool) -> bool:
    """GFD's verdict on a MIG layout under mig.strategy=single (k8s-device-plugin
    internal/lm/mig-strategy.go, newMigStrategySingleLabeler): MIG-enabled GPUs beside MIG-disabled
    ones, a MIG-enabled GPU with no instance (mig-strategy_test.go "empty mig devices returns MIG
    invalid label"), or more than one MIG profile on the node."""
    enabled = [g for g in gpus if g.mig_enabled]
    if not enabled or not mig_capable:
        return False
    return (len(enabled) != len(gpus) or any(not g.mig for g in enabled)
            or len({i.profile for g in enabled for i in g.mig}) > 1)


def labelled_model(node: SimNode) -> GpuModel:
    """The one model GFD describes on a node with several. GFD counts the GPUs per model name, warns
    "Multiple device types detected: [...]" and builds one labeler per model, each writing
    gpu.product, gpu.count (that model's GPUs only), gpu.memory, gpu.family and gpu.compute.*; the
    labelers are merged in Go map order, so the last visited model wins and may change from one
    relabel to the next (k8s-device-plugin internal/lm/mig-strategy.go newGPULabelers; the flip is
    reported in NVIDIA/gpu-feature-discovery#27; tests/data/real/gfd/SOURCES.md). The simulation is
    deterministic: the model most of the node's GPUs have, the pool's on a tie."""
    counts = Counter(node.model_of(g).name for g in node.present_gpus)
    best = max(counts.values(), default=0)
    if counts.get(node.pool.gpu.name) == best or not counts:
        return node.pool.gpu
    name = next(n for n, c in counts.items() if c == best)
    return next(node.model_of(g) for g in node.present_gpus if node.model_of(g).name == name)


def node_labels(node: SimNode) -> dict[str, str]:
    """The GPU labels of the Node object (label_overrides, the label-drift fault, applied last).

    As GFD writes them (tests/data/real/gfd/SOURCES.md): ``mig.strategy`` is the device plugin's
    configured strategy on every node, MIG or not, and absent under ``none``; ``gpu.count`` counts
    the GPUs that enumerate now (GFD relabels a node that lost one), under ``mixed`` every physical
    GPU, under ``single`` with MIG the MIG devices; a layout that does not fit ``single`` is
    labelled ``<model>-MIG-INVALID`` with count, replicas and memory 0. A node with GPUs of several
    models gets one model's product, family, compute capability, memory and count (that model's GPUs
    only), see :func:`labelled_model`."""
    model = labelled_model(node)
    declared = node.pool.device_plugin
    sharing = declared.sharing
    mig = declared.mig
    gpus = node.present_gpus
    cc_major, _, cc_minor = model.compute_capability.partition(".")
    product = model.gfd_product
    count = sum(node.model_of(g) == model for g in gpus)
    memory = model.memory_mib or 0
    replicas = str(sharing.replicas if sharing.strategy != "none" else 1)
    labels = {
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.family": model.architecture,
        "nvidia.com/gpu.compute.major": cc_major, "nvidia.com/gpu.compute.minor": cc_minor,
        "nvidia.com/gpu.machine": f"sim-{node.pool.name}",
        "nvidia.com/gpu.mode": "compute",
        "nvidia.com/mig.capable": str(model.mig_capable).lower(),
        "nvidia.com/mps.capable": str(sharing.strategy == "mps").lower(),
        "nvidia.com/vgpu.present": "false",
        "nvidia.com/gpu.sharing-strategy": sharing.strategy,
        **_cuda_labels(node),
    }
    if mig.strategy != "none":
        labels["nvidia.com/mig.strategy"] = mig.strategy
    if mig.strategy == "single" and _mig_invalid(gpus, model.mig_capable):
        product, count, memory, replicas = f"{product}-MIG-INVALID", 0, 0, "0"
    elif mig.strategy == "single" and gpus and gpus[0].mig:
        instance = gpus[0].mig[0]
        product = f"{product}-MIG-{instance.profile}"
        count = sum(len(g.mig) for g in gpus)
        memory = instance.memory_mib
    elif mig.strategy == "mixed":
        per_profile: Counter[str] = Counter(i.profile for g in gpus for i in g.mig)
        for profile, n in sorted(per_profile.items()):
            sample = next(i for g in gpus for i in g.mig if i.profile == profile)
            prefix = f"nvidia.com/mig-{profile}"
            labels.update({f"{prefix}.count": str(n), f"{prefix}.product": f"{product}-MIG-{profile}",
                           f"{prefix}.memory": str(sample.memory_mib), f"{prefix}.slices.gi": str(sample.slices),
                           f"{prefix}.replicas": "1"})
    labels["nvidia.com/gpu.replicas"] = replicas
    config = mig_config_name(node.pool)
    if config is not None:  # mig-manager's labels: the layout it was asked for, and that it applied it
        labels.update({"nvidia.com/mig.config": config, "nvidia.com/mig.config.state": node.mig_config_state})
    if sharing.strategy != "none" and not sharing.rename_by_default and not product.endswith("-MIG-INVALID"):
        product = f"{product}-SHARED"
    labels.update({"nvidia.com/gpu.product": product, "nvidia.com/gpu.count": str(count),
                   "nvidia.com/gpu.memory": str(memory)})
    for operand in ("driver", "container-toolkit", "device-plugin", "gpu-feature-discovery", "dcgm-exporter",
                    "operator-validator"):
        labels[f"nvidia.com/gpu.deploy.{operand}"] = "true"
    if not node.toolkit_pod:  # the operator told not to deploy its toolkit here (a host-installed one)
        labels["nvidia.com/gpu.deploy.container-toolkit"] = "false"
    if not node.gfd:  # GPUCluster mode: no GFD, no operand deploy labels; NFD's PCI label stays
        labels = {k: v for k, v in labels.items() if not k.startswith("nvidia.com/")}
    labels.update(dict(node.pool.labels))
    labels.update(dict(node.label_overrides))
    return labels


@dataclass(frozen=True)
class AdvertisedDevice:
    """One device the device plugin reports in ListAndWatch, and what backs it."""

    resource: str  # nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-1g.10gb
    id: str  # what the kubelet allocates and the plugin turns into NVIDIA_VISIBLE_DEVICES
    healthy: bool
    gpu: SimGpu
    mig: SimMigInstance | None = None


def advertised_devices(node: SimNode) -> list[AdvertisedDevice]:
    """ListAndWatch's answer: nothing without a registered plugin; per real GPU or MIG instance
    (a lost GPU does not enumerate), times the time-slicing/MPS replicas."""
    plugin = node.device_plugin
    if not plugin.enabled or not node.device_plugin_registered:
        return []
    replicas = plugin.sharing.replicas if plugin.sharing.strategy != "none" else 1
    gpu_resource = f"{GPU}.shared" if plugin.sharing.strategy != "none" and plugin.sharing.rename_by_default else GPU
    out: list[AdvertisedDevice] = []
    if plugin.mig.strategy == "single" and _mig_invalid(node.present_gpus, node.model.mig_capable):
        # The plugin refuses a layout single cannot express ("more than one MIG device type present
        # on node", "devices with MIG enabled and disable detected") and registers nothing.
        return []
    for g in node.present_gpus:
        healthy = g.health == "Healthy"
        if plugin.mig.strategy in ("single", "mixed") and g.mig_enabled:
            # A MIG-enabled GPU is advertised as its instances only: none when it has none.
            for inst in g.mig:
                resource = GPU if plugin.mig.strategy == "single" else f"nvidia.com/mig-{inst.profile}"
                out.append(AdvertisedDevice(resource, inst.uuid, healthy, g, inst))
            continue
        base = g.uuid if plugin.device_id_strategy == "uuid" else str(g.index)
        for r in range(replicas):
            out.append(AdvertisedDevice(gpu_resource, base if replicas == 1 else f"{base}::{r}", healthy, g))
    return out


def node_resources(node: SimNode) -> tuple[dict[str, str], dict[str, str]]:
    """(capacity, allocatable) extended resources, as the kubelet reports them from the plugin:
    unhealthy devices count in capacity but not in allocatable."""
    capacity: Counter[str] = Counter()
    allocatable: Counter[str] = Counter()
    for d in advertised_devices(node):
        capacity[d.resource] += 1
        if d.healthy:
            allocatable[d.resource] += 1
    for resource in capacity:
        allocatable.setdefault(resource, 0)
    return ({k: str(v) for k, v in sorted(capacity.items())}, {k: str(v) for k, v in sorted(allocatable.items())})


def _semver(version: str) -> str:
    """DRA publishes versions as semver, so leading zeros are dropped (560.35.03 → 560.35.3)."""
    parts = [str(int(p)) for p in version.split(".")]
    while len(parts) < 3:
        parts.append("0")
    return ".".join(parts[:3])


def _taints(gpu: SimGpu) -> dict[str, object]:
    """The GPU's device taints as a slice device carries them (``timeAdded`` is set by the agent when
    it publishes). A MIG-enabled GPU's instances all carry their parent's taints: a guess from the
    health check's unit (NVML events of the parent GPU), no real slice of a tainted MIG GPU at hand."""
    if not gpu.dra_taints:
        return {}
    return {"taints": [{"key": k, "value": v, "effect": e} for k, v, e in gpu.dra_taints]}


def resource_slices(node: SimNode) -> list[dict[str, object]]:
    """The node-local ResourceSlice NVIDIA's DRA driver publishes (empty without the driver), as
    releases from 25.12 publish it: the PCI address as ``resource.kubernetes.io/pciBusID``, and no
    ``index``/``minor`` (removed, kubernetes-sigs/dra-driver-nvidia-gpu#563, #744; real slices of both
    generations in tests/data/real/dra/). ``addressingMode`` and ``resource.kubernetes.io/pcieRoot``,
    which real slices also carry, are not simulated: no check reads them."""
    if not node.dra.enabled:
        return []
    native = tables.native_cuda(node.driver)
    devices: list[dict[str, object]] = []
    # A GPU gone from the bus is still listed while the driver has not republished (dra-slice-stale).
    for g in (g for g in node.gpus if g.present or g.dra_listed):
        model = node.model_of(g)  # each device its own model (mixed-gpu-models)
        common = {
            "productName": {"string": model.name}, "brand": {"string": model.nvml_brand},
            "architecture": {"string": model.architecture.capitalize()},
            "cudaComputeCapability": {"version": _semver(model.compute_capability)},
            "driverVersion": {"version": _semver(str(node.driver))},
            "cudaDriverVersion": {"version": _semver(f"{native.major}.{native.minor}" if native else "0.0")},
            "resource.kubernetes.io/pciBusID": {"string": g.pci_bus_id[4:].lower()},
        }
        overrides = {k: {"string": v} if not k.endswith("Version") else {"version": v} for k, v in g.dra_attributes}
        if g.mig_enabled:
            # A MIG-enabled GPU is published as its MIG devices only, never also as type gpu, and as
            # nothing without instances (the driver logs "Physical GPU %s has MIG mode enabled but no
            # configured MIG devices"): the static-MIG path of dra-driver-nvidia-gpu
            # cmd/gpu-kubelet-plugin/nvlib.go GetPerGpuAllocatableDevices. Its DynamicMIG mode (alpha)
            # publishes the full GPU and every possible partition instead; not simulated.
            for inst in g.mig:
                devices.append({"name": f"gpu-{g.index}-mig-{inst.gi}", "attributes": {
                    **common, "type": {"string": "mig"}, "uuid": {"string": inst.uuid},
                    "parentUUID": {"string": g.uuid}, "profile": {"string": inst.profile}, **overrides},
                    "capacity": {"memory": {"value": f"{inst.memory_mib}Mi"}}, **_taints(g)})
            if not g.dra_whole_too:  # dra-mig-parent-published: the parent as type gpu too
                continue
        devices.append({"name": f"gpu-{g.index}", "attributes": {
            **common, "type": {"string": "gpu"}, "uuid": {"string": g.uuid}, **overrides},
            "capacity": {"memory": {"value": f"{g.memory_mib}Mi"}}, **_taints(g)})
    return [{
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{node.name}-{node.dra.driver}"},
        "spec": {"driver": node.dra.driver, "nodeName": node.name,
                 "pool": {"name": node.name, "generation": 1, "resourceSliceCount": 1}, "devices": devices},
    }]
