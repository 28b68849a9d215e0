"""Node agents, the node side: what a simulated node registers through the Kubernetes API (Node,
Lease, ResourceSlices, DeviceClasses, RuntimeClasses, ClusterPolicy), and the agents' own rules
(kubelet wording, Go durations, image facts, device manager)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client, watch

from gpuconf.sim.agent import NodeAgents, default_lease_interval
from gpuconf.sim.agent_model import (
    AdmissionError,
    DeviceBook,
    go_duration,
    image_facts,
    kubelet_wording,
)
from gpuconf.sim.node_facts import node_labels
from gpuconf.sim.profile import expand, load_profile, with_faults

from .test_agent_support import running_agents, wait_for


def test_nodes_register_ready_with_gfd_labels_and_the_device_plugin_allocatable(apiserver, api_client, core):
    with running_agents(apiserver, api_client, "healthy-h100") as agents:
        nodes = {n.metadata.name: n for n in core.list_node().items}
        assert sorted(nodes) == ["h100-0", "h100-1"]
        node = nodes["h100-0"]
        sim = agents.cluster.node("h100-0")
        assert node.metadata.labels.items() >= node_labels(sim).items()
        assert node.metadata.labels["kubernetes.io/hostname"] == "h100-0"
        assert node.metadata.labels["node.kubernetes.io/instance-type"] == "sim"
        assert node.status.allocatable["nvidia.com/gpu"] == node.status.capacity["nvidia.com/gpu"] == "8"
        assert {"cpu", "memory", "pods"} <= set(node.status.allocatable)
        ready = next(c for c in node.status.conditions if c.type == "Ready")
        assert (ready.status, ready.reason, ready.message) == \
            ("True", "KubeletReady", "kubelet is posting ready status")
        assert node.status.node_info.kubelet_version == "v1.34.0"
        assert node.status.node_info.container_runtime_version.startswith("containerd://2.")
        assert node.status.daemon_endpoints.kubelet_endpoint.port == agents.log_port
        assert [(a.type, a.address) for a in node.status.addresses][0] == ("InternalIP", "127.0.0.1")


def test_an_existing_node_of_that_name_is_adopted(apiserver, api_client, core):
    core.create_node({"metadata": {"name": "h100-1", "labels": {"team": "ml"}}})
    with running_agents(apiserver, api_client, "healthy-h100"):
        node = core.read_node("h100-1")
        assert node.metadata.labels["team"] == "ml"
        assert node.metadata.labels["nvidia.com/gpu.count"] == "8"
        assert node.status.allocatable["nvidia.com/gpu"] == "8"


def test_a_device_plugin_that_never_registers_leaves_no_nvidia_gpu_resource(apiserver, api_client, core):
    faults = [{"id": "plugin-not-registered", "pool": "h100", "node": 0}]
    with running_agents(apiserver, api_client, "healthy-h100", faults=faults):
        broken, healthy = core.read_node("h100-0"), core.read_node("h100-1")
        assert "nvidia.com/gpu" not in broken.status.capacity
        assert "nvidia.com/gpu" not in broken.status.allocatable
        assert broken.metadata.labels["nvidia.com/gpu.present"] == "true"  # GFD still labels the node
        assert healthy.status.allocatable["nvidia.com/gpu"] == "8"


def test_an_unhealthy_gpu_counts_in_capacity_but_not_allocatable(apiserver, api_client, core):
    faults = [{"id": "gpu-unhealthy", "pool": "h100", "node": 0, "gpu": 2}]
    with running_agents(apiserver, api_client, "healthy-h100", faults=faults):
        node = core.read_node("h100-0")
        assert (node.status.capacity["nvidia.com/gpu"], node.status.allocatable["nvidia.com/gpu"]) == ("8", "7")


def test_leases_exist_and_are_renewed(apiserver, api_client):
    leases = client.CoordinationV1Api(api_client)
    with running_agents(apiserver, api_client, "healthy-h100", lease_interval=0.2):
        first = leases.read_namespaced_lease("h100-0", "kube-node-lease")
        assert first.spec.holder_identity == "h100-0"
        assert first.metadata.owner_references[0].kind == "Node"
        renewed = wait_for(leases.list_namespaced_lease, lambda lease: lease.metadata.name == "h100-0"
                           and lease.spec.renew_time > first.spec.renew_time, "kube-node-lease", timeout=5)
        assert renewed.spec.lease_duration_seconds == 40


def test_a_thousand_idle_nodes_stay_under_twenty_requests_a_second():
    interval = default_lease_interval(1000)
    assert 1000 / interval <= 20
    assert default_lease_interval(2) == 10.0  # small clusters renew like a kubelet


def test_idle_agents_send_only_spread_lease_renewals(apiserver, api_client):
    leases = client.CoordinationV1Api(api_client)
    with running_agents(apiserver, api_client, "multi-pool", lease_interval=1.0) as agents:
        listed = leases.list_namespaced_lease("kube-node-lease")
        first = {lease.metadata.name: lease.spec.renew_time for lease in listed.items}
        seen: list[tuple[str, str]] = []

        def observe(info: Any, _agent: str) -> None:
            seen.append((info.verb, info.resource or info.path))

        apiserver.request_observers.append(observe)
        start = time.monotonic()
        time.sleep(2.0)
        apiserver.request_observers.remove(observe)
        window, elapsed = list(seen), time.monotonic() - start
        nodes = len(agents.cluster.nodes)
        assert sorted(first) == sorted(n.name for n in agents.cluster.nodes)
        # at most one renewal per node per interval (plus the one in flight), no polling; a loaded machine
        # may renew late, never more often
        renewals = [r for r in window if r == ("patch", "leases")]
        assert len(renewals) <= nodes * (elapsed + 1), (len(renewals), elapsed)
        # besides them only what the component pods' kubelets do while they run (a node's Ready condition
        # read at most once a second per node, the pod watch renewed): no polling storm
        others = [r for r in window if r != ("patch", "leases")]
        assert set(others) <= {("get", "nodes"), ("watch", "pods"), ("list", "pods")}, sorted(set(others))
        assert len(others) <= nodes * (elapsed + 1), (others, elapsed)
        # and every node does renew: watched from the listing, not timed (the agents may be starved of CPU)
        late = set(first)
        for event in watch.Watch().stream(leases.list_namespaced_lease, "kube-node-lease", timeout_seconds=30,
                                          resource_version=listed.metadata.resource_version):
            lease = event["object"]
            if lease.spec.renew_time != first.get(lease.metadata.name):
                late.discard(lease.metadata.name)
            if not late:
                break
        assert not late, sorted(late)


def test_dra_only_nodes_publish_slices_and_the_device_classes(apiserver, api_client, core):
    resource = client.ResourceV1Api(api_client)
    with running_agents(apiserver, api_client, "h200-dra-only"):
        slices = {s.spec.node_name: s for s in resource.list_resource_slice().items}
        assert sorted(slices) == ["h200-0", "h200-1"]
        devices = slices["h200-0"].spec.devices
        assert [d.name for d in devices] == [f"gpu-{i}" for i in range(8)]
        assert devices[0].attributes["productName"].string == "NVIDIA H200"
        assert slices["h200-0"].metadata.owner_references[0].name == "h200-0"
        classes = {c.metadata.name: c.spec.selectors[0].cel.expression for c in resource.list_device_class().items}
        assert classes == {
            "gpu.nvidia.com": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
            "mig.nvidia.com": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
        }
        assert "nvidia.com/gpu" not in core.read_node("h200-0").status.allocatable


def test_runtime_classes_and_the_operator_cluster_policy_are_published(apiserver, api_client):
    with running_agents(apiserver, api_client, "healthy-h100"):
        classes = client.NodeV1Api(api_client).list_runtime_class().items
        assert [(c.metadata.name, c.handler) for c in classes] == [("nvidia", "nvidia")]
        policy = client.CustomObjectsApi(api_client).get_cluster_custom_object(
            "nvidia.com", "v1", "clusterpolicies", "cluster-policy")
        assert policy["status"]["state"] == "ready"
        assert policy["spec"]["devicePlugin"]["enabled"] is True


def test_no_runtimeclass_fault_leaves_the_nvidia_class_out_and_no_operator_no_policy(apiserver, api_client):
    cluster = expand(with_faults(load_profile("t4-timeslicing"), [{"id": "no-runtimeclass"}]))
    with NodeAgents(cluster, api_client):
        assert client.NodeV1Api(api_client).list_runtime_class().items == []
        with pytest.raises(client.ApiException) as err:
            client.CustomObjectsApi(api_client).get_cluster_custom_object(
                "nvidia.com", "v1", "clusterpolicies", "cluster-policy")
        assert err.value.status == 404


def test_registration_rides_out_throttling_and_server_errors(apiserver, api_client, core):
    apiserver.faults.throttle(resources=["nodes"], verbs=["create"], times=1, retry_after=1)
    apiserver.faults.server_error(resources=["leases.coordination.k8s.io"], times=2)
    start = time.monotonic()
    with running_agents(apiserver, api_client, "healthy-h100"):
        assert len(core.list_node().items) == 2
        assert len(client.CoordinationV1Api(api_client).list_namespaced_lease("kube-node-lease").items) == 2
    assert time.monotonic() - start >= 1.0  # Retry-After was honoured


# --- the agents' rules ----------------------------------------------------------------------------


@pytest.mark.parametrize(("seconds", "text"), [
    (0.0, "0s"), (0.0004, "0s"), (0.0237, "23ms"), (11.6245, "11.624s"), (2.0, "2s"), (65.2, "1m5.2s"),
    (3603.0, "1h0m3s"),
])
def test_pull_durations_print_like_go_durations_truncated_to_milliseconds(seconds, text):
    assert go_duration(seconds) == text


def test_kubelet_wording_follows_the_profile_version():
    assert kubelet_wording("1.34").created.format(name="probe") == "Created container: probe"
    assert kubelet_wording("1.35").created.format(name="probe") == "Container created"
    assert kubelet_wording("1.31").started.format(name="probe") == "Started container probe"
    assert kubelet_wording("v1.33.2").image_present.format(image="x:1") == \
        'Container image "x:1" already present on machine'


def test_official_cuda_images_carry_their_require_env_and_compat():
    facts = image_facts("nvidia/cuda:13.0.2-devel-ubuntu24.04")
    env = dict(facts.env)
    assert str(facts.cuda) == "13.0.2" and facts.compat
    assert env["NVIDIA_REQUIRE_CUDA"].startswith("cuda>=13.0 ") and env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert facts.normalized == "docker.io/nvidia/cuda:13.0.2-devel-ubuntu24.04"
    probe = image_facts("registry.example.com:5000/gpuconf/cuda-probe:0.1.0-cuda12.9.1")
    assert (str(probe.cuda), probe.probe, probe.compat) == ("12.9.1", "cuda-probe", True)
    plain = image_facts("busybox:1.36")
    assert plain.cuda is None and plain.env == () and plain.normalized == "docker.io/library/busybox:1.36"


def test_the_device_manager_rejects_what_it_cannot_allocate_with_the_kubelets_words():
    node = expand(load_profile("healthy-h100")).node("h100-0")
    book = DeviceBook(node)
    got = book.allocate("ns/a", [("main", False, {"nvidia.com/gpu": "6"})])
    assert [d.gpu.index for d in got["main"]] == [0, 1, 2, 3, 4, 5]
    with pytest.raises(AdmissionError) as err:
        book.allocate("ns/b", [("main", False, {"nvidia.com/gpu": "3"})])
    assert err.value.reason == "UnexpectedAdmissionError"
    assert err.value.message == ("Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
                                 "Requested: 3, Available: 2, which is unexpected")
    assert book.allocate("ns/c", [("x", False, {"example.com/foo": "1"})]) == {"x": []}  # not a plugin resource
    book.release("ns/a")
    assert len(book.allocate("ns/b", [("main", False, {"nvidia.com/gpu": "8"})])["main"]) == 8


def test_time_sliced_replicas_are_spread_over_the_gpus():
    node = expand(load_profile("t4-timeslicing")).node("t4-0")
    book = DeviceBook(node)
    picks = [book.allocate(f"ns/p{i}", [("c", False, {"nvidia.com/gpu": "1"})])["c"][0].gpu.index for i in range(4)]
    assert sorted(picks) == [0, 1, 2, 3]
