"""DRA-first clusters in the simulator (issue 27): the GPU Operator's GPUCluster mode without GFD,
device taints in ResourceSlices and the allocator, DRA-backed extended resources (KEP-5004)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from gpuconf.sim.dra import AllocationError, allocate, tolerates
from gpuconf.sim.node_facts import node_labels, resource_slices
from gpuconf.sim.profile import ProfileError, expand, load_profile, with_faults

from .test_agent_support import running_agents
from .test_dra_allocation import CLASSES, claim, exactly, gpu, slice_for

DATA = Path(__file__).resolve().parents[2] / "gpuconf" / "data"

GPUCLUSTER = """\
schema: 1
name: bad
description: GPUCluster mode with one thing wrong
kubernetes: "1.36"
operator: {present: true, mode: gpucluster}
pools:
  - name: h200
    count: 1
    gpu: H200
    gpus_per_node: 8
    driver: "580.95.05"
    toolkit: {version: "1.18.0"}
    dra: {enabled: true}
"""


# --- GPUCluster mode -----------------------------------------------------------------------------


def test_gpucluster_nodes_carry_no_nvidia_label_but_keep_nfd_and_publish_slices():
    cluster = expand(load_profile("h200-gpucluster"))
    for node in cluster.nodes:
        labels = node_labels(node)
        assert not [k for k in labels if k.startswith("nvidia.com/")], labels
        assert labels["feature.node.kubernetes.io/pci-10de.present"] == "true"
        assert len(resource_slices(node)[0]["spec"]["devices"]) == 8  # type: ignore[index]
        assert not node.device_plugin.enabled


def test_the_dra_only_profile_under_a_cluster_policy_still_has_gfd_labels():
    node = expand(load_profile("h200-dra-only")).nodes[0]
    assert node_labels(node)["nvidia.com/gpu.product"] == "NVIDIA-H200"


@pytest.mark.parametrize("change, expected", [
    ("    device_plugin: {enabled: true}\n",
     "12:5: pools[0].device_plugin.enabled: pool 'h200' enables the device plugin, which the GPU Operator's "
     "GPUCluster mode does not deploy (it manages the DRA driver, DCGM and dcgm-exporter only); "
     "set device_plugin.enabled: false"),
    ("", "12:5: pools[0].device_plugin.enabled: pool 'h200' enables the device plugin"),
], ids=["a pool that enables the device plugin", "a pool that leaves the device plugin at its default (on)"])
def test_gpucluster_mode_refuses_a_device_plugin_pool(tmp_path, change, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(GPUCLUSTER + change)
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert str(info.value).startswith(f"{path}:")
    assert "pool 'h200' enables the device plugin" in str(info.value)
    assert "pools[0].device_plugin.enabled" in str(info.value)


def test_gpucluster_mode_needs_the_operator_present(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(GPUCLUSTER.replace("present: true", "present: false") + "    device_plugin: {enabled: false}\n")
    with pytest.raises(ProfileError, match=r"operator\.mode: mode gpucluster needs present: true"):
        load_profile(path)


def test_gpucluster_is_served_and_no_cluster_policy(apiserver, api_client, core):
    custom = client.CustomObjectsApi(api_client)
    with running_agents(apiserver, api_client, "h200-gpucluster"):
        listed = custom.list_cluster_custom_object("nvidia.com", "v1alpha1", "gpuclusters")["items"]
        assert [(o["kind"], o["metadata"]["name"]) for o in listed] == [("GPUCluster", "gpu-cluster")]
        assert listed[0]["status"]["state"] == "ready"
        assert set(listed[0]["spec"]) == {"draDriver", "dcgm", "dcgmExporter"}
        crd = client.ApiextensionsV1Api(api_client).read_custom_resource_definition("gpuclusters.nvidia.com")
        assert (crd.spec.scope, crd.spec.names.kind) == ("Cluster", "GPUCluster")
        with pytest.raises(client.ApiException) as err:
            custom.list_cluster_custom_object("nvidia.com", "v1", "clusterpolicies")
        assert err.value.status == 404
        node = core.read_node("h200-0")
        assert not [k for k in node.metadata.labels if k.startswith("nvidia.com/")]
        assert "nvidia.com/gpu" not in node.status.allocatable
        assert core.list_config_map_for_all_namespaces(field_selector="metadata.name=default-mig-parted-config"
                                                      ).items == []


# --- device taints (KEP-5055) --------------------------------------------------------------------

XID = {"key": "gpu.nvidia.com/xid", "value": "48", "effect": "NoSchedule"}


def tainted_slices(*taints: dict) -> list[dict]:
    devices = [gpu(i) for i in range(4)]
    devices[2] = {**devices[2], "taints": list(taints)}
    return [slice_for("node-a", devices)]


def allocated(request: dict, *taints: dict) -> list[str]:
    got = allocate(claim(request), "node-a", classes=CLASSES, slices=tainted_slices(*taints))
    return [r.device for r in got.results]


def with_tolerations(request: dict, *tolerations: dict) -> dict:
    return {**request, "exactly": {**request["exactly"], "tolerations": list(tolerations)}}


def test_a_noschedule_tainted_device_is_never_allocated_while_its_siblings_are():
    assert allocated(exactly(count=3), XID) == ["gpu-0", "gpu-1", "gpu-3"]
    with pytest.raises(AllocationError, match="no devices on node node-a satisfy request"):
        allocated(exactly(count=4), XID)


@pytest.mark.parametrize("effect, allowed", [("NoSchedule", False), ("NoExecute", False), ("None", True)])
def test_only_noschedule_and_noexecute_restrict(effect, allowed):
    request = exactly(count=1, selectors=("device.attributes['gpu.nvidia.com'].index == 2",))
    if allowed:
        assert allocated(request, {**XID, "effect": effect}) == ["gpu-2"]
    else:
        with pytest.raises(AllocationError):
            allocated(request, {**XID, "effect": effect})


@pytest.mark.parametrize("toleration, ok", [
    ({"key": "gpu.nvidia.com/xid", "operator": "Exists"}, True),
    ({"operator": "Exists"}, True),
    ({"key": "gpu.nvidia.com/xid", "operator": "Equal", "value": "48", "effect": "NoSchedule"}, True),
    ({"key": "gpu.nvidia.com/xid", "value": "48"}, True),  # operator defaults to Equal
    ({"key": "gpu.nvidia.com/xid", "operator": "Equal", "value": "79"}, False),
    ({"key": "gpu.nvidia.com/xid", "operator": "Exists", "effect": "NoExecute"}, False),
    ({"key": "gpu.nvidia.com/gpu-lost", "operator": "Exists"}, False),
], ids=["Exists on the key", "Exists without a key tolerates everything", "Equal on key, value and effect",
        "Equal by default", "Equal with another value", "another effect", "another key"])
def test_tolerations_match_as_pod_tolerations_do(toleration, ok):
    assert tolerates(toleration, XID) is ok
    request = with_tolerations(exactly(count=4), toleration)
    if ok:
        assert allocated(request, XID) == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    else:
        with pytest.raises(AllocationError):
            allocated(request, XID)


def test_first_available_subrequests_carry_their_own_tolerations():
    request = {"name": "gpu", "firstAvailable": [
        {"name": "all4", "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 4},
        {"name": "all4-tolerant", "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 4,
         "tolerations": [{"key": "gpu.nvidia.com/xid", "operator": "Exists"}]}]}
    got = allocate(claim(request), "node-a", classes=CLASSES, slices=tainted_slices(XID))
    assert {r.request for r in got.results} == {"gpu/all4-tolerant"}


def test_allocation_mode_all_over_a_tainted_device_fails_as_the_real_scheduler_does():
    # kube-scheduler v1.36.2 refuses the whole All request (see gpuconf/sim/dra.py _resolve)
    with pytest.raises(AllocationError):
        allocated(exactly(mode="All"), XID)
    assert len(allocated(with_tolerations(exactly(mode="All"), {"operator": "Exists"}), XID)) == 4
    assert len(allocated(exactly(mode="All"), {**XID, "effect": "None"})) == 4


def test_the_fault_taints_the_slice_device_and_records_the_xid():
    faulty = with_faults(load_profile("h200-dra-only"), [{"id": "dra-device-taint", "gpu": 3}])
    node = expand(faulty).nodes[0]
    devices = resource_slices(node)[0]["spec"]["devices"]  # type: ignore[index]
    assert devices[3]["taints"] == [XID]
    assert [d for d in devices if "taints" in d] == [devices[3]]
    assert node.gpus[3].xids == (48,) and node.gpus[3].present
    lost = with_faults(load_profile("h200-dra-only"), [{"id": "dra-device-taint", "gpu": 1,
                                                       "key": "gpu.nvidia.com/gpu-lost", "value": ""}])
    assert expand(lost).nodes[0].gpus[1].xids == ()


def test_the_fault_needs_a_pool_without_the_device_plugin(tmp_path):
    path = tmp_path / "both.yaml"
    path.write_text((DATA / "sim_profiles" / "h200-dra-only.yaml").read_text().replace(
        "device_plugin: {enabled: false}", "device_plugin: {enabled: true}"))
    with pytest.raises(ProfileError, match="dra-device-taint needs no-device-plugin: pool 'h200' already runs the "
                                           "device plugin"):
        with_faults(load_profile(path), [{"id": "dra-device-taint", "gpu": 0}])


def test_the_agents_publish_the_taint_with_its_time(apiserver, api_client):
    resource = client.ResourceV1Api(api_client)
    with running_agents(apiserver, api_client, "h200-dra-only", faults=[{"id": "dra-device-taint", "gpu": 5}]):
        slice_ = next(s for s in resource.list_resource_slice().items if s.spec.node_name == "h200-0")
        taints = {d.name: d.taints for d in slice_.spec.devices if d.taints}
        assert list(taints) == ["gpu-5"]
        taint = taints["gpu-5"][0]
        assert (taint.key, taint.value, taint.effect) == ("gpu.nvidia.com/xid", "48", "NoSchedule")
        assert taint.time_added is not None
