"""DRA-first clusters in the simulator (issue 27): the GPU Operator's GPUCluster mode without GFD,
device taints in ResourceSlices and the allocator, DRA-backed extended resources (KEP-5004)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kubernetes import client

from gpuconf.sim.dra import AllocationError, allocate, tolerates
from gpuconf.sim.node_facts import node_labels, resource_slices
from gpuconf.sim.profile import ProfileError, expand, load_profile, with_faults

from .test_agent_pods import BASE, probe_report, terminated
from .test_agent_support import finished, running_agents, wait_gone, wait_pod
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


# --- DRA-backed extended resources (KEP-5004) ------------------------------------------------------


@pytest.fixture
def plane(apiserver):
    from gpuconf.sim.controllers import ControlPlane
    from gpuconf.sim.scheduler import Scheduler

    with ControlPlane(apiserver.store, scheduler=Scheduler(apiserver.store, initial_backoff=0.02,
                                                          max_backoff=0.2)) as control_plane:
        yield control_plane


def gpu_pod(name: str, *containers: tuple[str, dict[str, str]], node: str | None = "h200-0",
            probe: bool = False) -> dict:
    spec: dict = {"restartPolicy": "Never", "containers": [
        {"name": c, "image": BASE if probe else "busybox:1.36", "resources": {"limits": limits}}
        for c, limits in containers]}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    labels = {"gpuconf.io/probe": "cuda-probe"} if probe else {}
    return {"metadata": {"name": name, "labels": labels}, "spec": spec}


def test_the_gpu_device_class_maps_the_extended_resource(apiserver, api_client):
    resource = client.ResourceV1Api(api_client)
    with running_agents(apiserver, api_client, "h200-dra-extended"):
        gpu_class = resource.read_device_class("gpu.nvidia.com")
        assert gpu_class.spec.extended_resource_name == "nvidia.com/gpu"
        assert resource.read_device_class("mig.nvidia.com").spec.extended_resource_name is None


def test_a_pod_asking_nvidia_gpu_gets_the_special_claim_and_sees_its_devices(apiserver, api_client, core,
                                                                              namespace, plane):
    resource = client.ResourceV1Api(api_client)
    with running_agents(apiserver, api_client, "h200-dra-extended") as agents:
        body = gpu_pod("two", ("main", {"nvidia.com/gpu": "2"}))
        body["spec"]["containers"][0]["command"] = ["sleep", "infinity"]
        core.create_namespaced_pod(namespace, body)
        pod = wait_pod(core, namespace, "two", lambda p: p.status.phase == "Running", timeout=20)
        status = api_client.sanitize_for_serialization(pod)["status"]
        claim_name = status["extendedResourceClaimStatus"]["resourceClaimName"]
        prefix = "two-extended-resources-"
        assert claim_name.startswith(prefix) and len(claim_name) == len(prefix) + 5
        assert status["extendedResourceClaimStatus"]["requestMappings"] == [
            {"containerName": "main", "resourceName": "nvidia.com/gpu", "requestName": "container-0-request-0"}]
        claim = api_client.sanitize_for_serialization(resource.read_namespaced_resource_claim(claim_name, namespace))
        assert claim["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
        assert claim["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "two",
                                                         "uid": pod.metadata.uid, "controller": True}]
        assert claim["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
        assert claim["spec"] == {"devices": {"requests": [{"name": "container-0-request-0", "exactly": {
            "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 2}}]}}
        results = claim["status"]["allocation"]["devices"]["results"]
        assert [(r["pool"], r["device"]) for r in results] == [("h200-0", "gpu-0"), ("h200-0", "gpu-1")]
        assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "two", "uid": pod.metadata.uid}]
        # the next pod's claim gets other devices, and CDI injects exactly those into its container
        core.create_namespaced_pod(namespace, gpu_pod("probe", ("probe", {"nvidia.com/gpu": "2"}), probe=True))
        done = wait_pod(core, namespace, "probe", finished, timeout=20)
        report = probe_report(core, namespace, "probe", terminated(done, "probe").exit_code)
        gpus = agents.cluster.node("h200-0").gpus
        assert report.exit_code == 0
        assert [d.uuid for d in report.devices] == [gpus[2].uuid, gpus[3].uuid]
        core.delete_namespaced_pod("two", namespace)
        wait_gone(core, namespace, "two")
        deadline = time.monotonic() + 10
        while resource.list_namespaced_resource_claim(namespace).items and time.monotonic() < deadline:
            time.sleep(0.1)
        assert resource.list_namespaced_resource_claim(namespace).items == []  # the claims go with their pods


def test_request_names_count_every_resource_of_the_container_and_devices_are_not_shared(
        apiserver, api_client, core, namespace, plane):
    resource = client.ResourceV1Api(api_client)
    with running_agents(apiserver, api_client, "h200-dra-extended"):
        core.create_namespaced_pod(namespace, gpu_pod(
            "multi", ("a", {"nvidia.com/gpu": "1", "cpu": "100m"}),
            ("b", {"nvidia.com/gpu": "1", "deviceclass.resource.kubernetes.io/gpu.nvidia.com": "1"}), node="h200-1"))
        pod = wait_pod(core, namespace, "multi", lambda p: p.spec.node_name is not None, timeout=20)
        pod = wait_pod(core, namespace, "multi", lambda p: p.status.extended_resource_claim_status is not None)
        status = api_client.sanitize_for_serialization(pod)["status"]["extendedResourceClaimStatus"]
        # what kube-scheduler v1.36.2 wrote for this very pod (the real tier, 2026-12-03)
        assert status["requestMappings"] == [
            {"containerName": "b", "resourceName": "deviceclass.resource.kubernetes.io/gpu.nvidia.com",
             "requestName": "container-1-request-0"},
            {"containerName": "a", "resourceName": "nvidia.com/gpu", "requestName": "container-0-request-1"},
            {"containerName": "b", "resourceName": "nvidia.com/gpu", "requestName": "container-1-request-1"}]
        claim = resource.read_namespaced_resource_claim(status["resourceClaimName"], namespace)
        assert [r.name for r in claim.spec.devices.requests] == [
            "container-0-request-1", "container-1-request-0", "container-1-request-1"]
        assert [r.device for r in claim.status.allocation.devices.results] == ["gpu-0", "gpu-1", "gpu-2"]
        # a second pod does not get the first one's devices
        core.create_namespaced_pod(namespace, gpu_pod("more", ("main", {"nvidia.com/gpu": "5"}), node="h200-1"))
        more = wait_pod(core, namespace, "more", lambda p: p.status.extended_resource_claim_status is not None,
                        timeout=20)
        other = resource.read_namespaced_resource_claim(more.status.extended_resource_claim_status.resource_claim_name,
                                                        namespace)
        assert [r.device for r in other.status.allocation.devices.results] == [f"gpu-{i}" for i in range(3, 8)]


def test_a_pod_asking_more_than_the_usable_gpus_stays_pending_with_the_real_text(apiserver, api_client, core,
                                                                                namespace, plane):
    with running_agents(apiserver, api_client, "h200-dra-extended", faults=[{"id": "dra-device-taint", "gpu": 3}]):
        core.create_namespaced_pod(namespace, gpu_pod("eight", ("main", {"nvidia.com/gpu": "8"})))
        pod = wait_pod(core, namespace, "eight", lambda p: any(
            c.type == "PodScheduled" and c.status == "False" for c in p.status.conditions or []), timeout=20)
        condition = next(c for c in pod.status.conditions if c.type == "PodScheduled")
        assert condition.message == (
            "0/2 nodes are available: 1 cannot allocate all claims, 1 node(s) didn't match Pod's node "
            "affinity/selector. still not schedulable, preemption: 0/2 nodes are available: 2 Preemption is not "
            "helpful for scheduling.")
        assert pod.status.extended_resource_claim_status is None
        assert client.ResourceV1Api(api_client).list_namespaced_resource_claim(namespace).items == []


def test_a_node_whose_device_plugin_advertises_the_resource_is_left_to_the_plugin():
    from gpuconf.sim.scheduler import extended_requests, extended_resource_classes

    classes = [{"metadata": {"name": "gpu.nvidia.com"}, "spec": {"extendedResourceName": "nvidia.com/gpu"}},
               {"metadata": {"name": "mig.nvidia.com"}, "spec": {}}]
    mapped = extended_resource_classes(classes)
    assert mapped == {"deviceclass.resource.kubernetes.io/gpu.nvidia.com": "gpu.nvidia.com",
                      "deviceclass.resource.kubernetes.io/mig.nvidia.com": "mig.nvidia.com",
                      "nvidia.com/gpu": "gpu.nvidia.com"}
    spec = {"containers": [{"name": "a", "resources": {"limits": {"memory": "1Gi", "nvidia.com/gpu": "2"}}},
                           {"name": "b", "resources": {"limits": {"cpu": "1"}}}]}
    assert [(r.container, r.request, r.count) for r in extended_requests(spec, mapped)] == [
        ("a", "container-0-request-1", 2)]


def test_a_stale_selector_on_the_mapping_class_keeps_every_nvidia_gpu_pod_pending(apiserver, api_client, core,
                                                                                  namespace, plane):
    resource = client.ResourceV1Api(api_client)
    with running_agents(apiserver, api_client, "h200-dra-extended", faults=[{"id": "extended-resource-stale"}]):
        selectors = [s.cel.expression for s in resource.read_device_class("gpu.nvidia.com").spec.selectors]
        assert selectors[1] == "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"
        core.create_namespaced_pod(namespace, gpu_pod("one", ("main", {"nvidia.com/gpu": "1"}), node=None))
        pod = wait_pod(core, namespace, "one", lambda p: any(
            c.type == "PodScheduled" and c.status == "False" for c in p.status.conditions or []), timeout=20)
        condition = next(c for c in pod.status.conditions if c.type == "PodScheduled")
        assert condition.message == (
            "0/2 nodes are available: 2 cannot allocate all claims. still not schedulable, preemption: 0/2 nodes "
            "are available: 2 Preemption is not helpful for scheduling.")
        assert resource.list_namespaced_resource_claim(namespace).items == []


@pytest.mark.parametrize("fault, problem", [
    ({"id": "extended-resource-stale", "product": "NVIDIA H200"},
     "product: is a model the cluster has (NVIDIA H200): the selector would still match"),
    ({"id": "extended-resource-stale", "product": "it's"}, "product: a product name without quotes or backslashes"),
], ids=["a product the cluster has", "a product that would break the CEL string"])
def test_the_stale_selector_must_match_nothing(fault, problem):
    with pytest.raises(ProfileError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        with_faults(load_profile("h200-dra-extended"), [fault])


def test_the_stale_fault_needs_an_extended_resource():
    with pytest.raises(ProfileError, match=r"extended-resource-stale needs extended-resource: no pool maps an "
                                           r"extended resource to DRA \(dra.extended_resource\)"):
        with_faults(load_profile("h200-dra-only"), [{"id": "extended-resource-stale"}])


@pytest.mark.parametrize("change, problem", [
    ('kubernetes: "1.36"', 'kubernetes: "1.35"'),
    ("device_plugin: {enabled: false}", "device_plugin: {enabled: true}"),
], ids=["Kubernetes before 1.36", "the device plugin on the same pool"])
def test_the_extended_resource_option_is_validated(tmp_path, change, problem):
    path = tmp_path / "bad.yaml"
    text = (DATA / "sim_profiles" / "h200-dra-extended.yaml").read_text().replace(
        'operator: {present: true, version: "26.7.0", mode: gpucluster}', "operator: {present: true}")
    path.write_text(text.replace(change, problem))
    expected = {"kubernetes": "DRA-backed extended resources (KEP-5004, DRAExtendedResource) are on by default "
                              "from Kubernetes 1.36, the profile says 1.35",
                "device_plugin": "pool 'h200' runs the device plugin, which would advertise nvidia.com/gpu itself; "
                                 "set device_plugin.enabled: false"}[change.split(":")[0]]
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert str(info.value).endswith(f"pools[0].dra.extended_resource: {expected}")
