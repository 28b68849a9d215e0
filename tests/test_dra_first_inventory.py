"""What the inventory and the node view read for DRA-first clusters (issue 27): DeviceClasses that
back extended resources (KEP-5004), the GPU Operator's GPUCluster, and device taints on slices."""

from __future__ import annotations

from typing import Any

from gpuconf.cluster.access import make_discovery
from gpuconf.cluster.inventory import IMPLICIT_EXTENDED_PREFIX, build_inventory
from gpuconf.nodes import DeviceTaint, build_views, slice_devices


def node(name: str, allocatable: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {}}, "spec": {},
            "status": {"capacity": dict(allocatable or {}), "allocatable": dict(allocatable or {}),
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def gpu_slice(node_name: str, gpus: int, taints: dict[int, list[dict[str, str]]] | None = None) -> dict[str, Any]:
    devices = []
    for i in range(gpus):
        device: dict[str, Any] = {"name": f"gpu-{i}", "attributes": {
            "type": {"string": "gpu"}, "uuid": {"string": f"GPU-{node_name}-{i}"},
            "productName": {"string": "NVIDIA H200"}}}
        if taints and i in taints:
            device["taints"] = taints[i]
        devices.append(device)
    return {"metadata": {"name": f"{node_name}-gpu.nvidia.com"},
            "spec": {"nodeName": node_name, "driver": "gpu.nvidia.com", "pool": {"name": node_name},
                     "devices": devices}}


def device_class(name: str, extended: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f"device.driver == '{name}'"}}]}
    if extended:
        spec["extendedResourceName"] = extended
    return {"metadata": {"name": name}, "spec": spec}


def test_extended_resources_are_the_explicit_names_and_every_class_implicit_one() -> None:
    inv = build_inventory([node("h200-0")], [], [device_class("gpu.nvidia.com", "nvidia.com/gpu"),
                                                 device_class("mig.nvidia.com")], [gpu_slice("h200-0", 2)], None,
                          dra_served=True)
    assert inv.extended_resources == {
        "nvidia.com/gpu": "gpu.nvidia.com",
        f"{IMPLICIT_EXTENDED_PREFIX}gpu.nvidia.com": "gpu.nvidia.com",
        f"{IMPLICIT_EXTENDED_PREFIX}mig.nvidia.com": "mig.nvidia.com"}
    assert inv.device_classes == ("gpu.nvidia.com", "mig.nvidia.com")
    assert inv.device_class_specs["gpu.nvidia.com"]["extendedResourceName"] == "nvidia.com/gpu"


def test_a_dra_node_without_the_plugin_resource_is_served_by_the_extended_resource() -> None:
    classes = [device_class("gpu.nvidia.com", "nvidia.com/gpu")]
    inv = build_inventory([node("dra-0"), node("both-0", {"nvidia.com/gpu": "2"})], [], classes,
                          [gpu_slice("dra-0", 2), gpu_slice("both-0", 2)], None, dra_served=True)
    views = build_views(inv)
    assert views["dra-0"].extended == "nvidia.com/gpu"
    assert views["dra-0"].kind == "DRA-backed extended resource nvidia.com/gpu"
    # the device plugin advertises nvidia.com/gpu there: the scheduler uses the node's own allocatable
    assert views["both-0"].extended is None
    assert views["both-0"].kind == "device plugin and DRA"


def test_without_an_explicit_name_a_dra_node_asks_through_claims() -> None:
    inv = build_inventory([node("dra-0")], [], [device_class("gpu.nvidia.com")], [gpu_slice("dra-0", 2)], None,
                          dra_served=True)
    view = build_views(inv)["dra-0"]
    assert view.extended is None
    assert view.kind == "DRA claims"


def test_the_gpu_cluster_is_read_and_discovered() -> None:
    gpu_cluster = {"metadata": {"name": "gpu-cluster"}, "spec": {"draDriver": {"enabled": True}},
                   "status": {"state": "ready"}}
    inv = build_inventory([node("dra-0")], [], [], [gpu_slice("dra-0", 1)], None, dra_served=True,
                          gpu_cluster=gpu_cluster)
    assert inv.gpu_cluster is not None
    assert (inv.gpu_cluster.name, inv.gpu_cluster.state) == ("gpu-cluster", "ready")
    assert inv.cluster_policy is None
    served = make_discovery({"gitVersion": "v1.36.2"}, {"versions": ["v1"]},
                            {"groups": [{"name": "nvidia.com", "versions": [{"groupVersion": "nvidia.com/v1alpha1",
                                                                              "version": "v1alpha1"}]}]},
                            {"nvidia.com/v1alpha1": {"resources": [{"name": "gpuclusters"},
                                                                    {"name": "gpuclusters/status"}]}})
    assert served.gpu_cluster and not served.cluster_policy


def test_device_taints_are_read_and_only_scheduling_effects_make_a_device_unusable() -> None:
    taints = {1: [{"key": "gpu.nvidia.com/xid", "value": "48", "effect": "NoSchedule",
                   "timeAdded": "2026-12-03T10:00:00Z"}],
              2: [{"key": "gpu.nvidia.com/unmonitored", "effect": "None"}],
              3: [{"key": "gpu.nvidia.com/gpu-lost", "effect": "NoExecute"}]}
    devices = slice_devices([gpu_slice("h200-0", 4, taints)], "h200-0")
    assert [d.taints for d in devices] == [
        (), (DeviceTaint("gpu.nvidia.com/xid", "48", "NoSchedule"),),
        (DeviceTaint("gpu.nvidia.com/unmonitored", "", "None"),),
        (DeviceTaint("gpu.nvidia.com/gpu-lost", "", "NoExecute"),)]
    assert [d.usable for d in devices] == [True, False, True, False]
    assert str(devices[1].taints[0]) == "gpu.nvidia.com/xid=48:NoSchedule"
    assert str(devices[3].taints[0]) == "gpu.nvidia.com/gpu-lost:NoExecute"
