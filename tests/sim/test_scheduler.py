"""The simulated scheduler, through the official client over HTTP: where pods land, and the exact
FailedScheduling texts a real kube-scheduler (1.34-1.36) gives when they cannot land.

The expected texts come from kube-scheduler's source (see gpuconf/sim/scheduler.py) and from
messages captured on real control planes (docs/domain.md section 4).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from gpuconf.sim import FakeApiServer
from gpuconf.sim.controllers import ControlPlane
from gpuconf.sim.scheduler import (
    NodeStatus,
    Scheduler,
    fit_error_message,
    pod_requests,
    preemption_message,
    tolerates,
)

from .watching import wait_for

GPU = "nvidia.com/gpu"
NOT_HELPFUL = "no new claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful " \
              "for scheduling."

# --- helpers ---------------------------------------------------------------------------------------


def make_node(name: str, allocatable: dict[str, str] | None = None, *, labels: dict[str, str] | None = None,
              taints: list[dict[str, str]] | None = None, ready: str = "True", unschedulable: bool = False) -> dict:
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110", **(allocatable or {})}
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {"taints": taints or [], "unschedulable": unschedulable},
            "status": {"capacity": resources, "allocatable": resources,
                       "conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady"}]}}


def make_pod(name: str, limits: dict[str, str] | None = None, **spec: Any) -> dict:
    container: dict[str, Any] = {"name": "main", "image": "nvcr.io/nvidia/cuda:12.8.0-base-ubuntu24.04"}
    if limits:
        container["resources"] = {"limits": limits}
    return {"metadata": {"name": name}, "spec": {"restartPolicy": "Never", "containers": [container], **spec}}


def bound(pod: Any) -> bool:
    return bool(pod.spec.node_name)


def failed_scheduling(core: client.CoreV1Api, namespace: str, pod: str, **kwargs: Any) -> Any:
    return wait_for(core.list_namespaced_event, namespace, until=lambda e: True,
                    field_selector=f"involvedObject.name={pod},reason=FailedScheduling", **kwargs)


def scheduled_on(core: client.CoreV1Api, namespace: str, name: str, timeout: float = 5.0) -> str:
    pod = wait_for(core.list_namespaced_pod, namespace, until=bound, field_selector=f"metadata.name={name}",
                   timeout=timeout)
    return str(pod.spec.node_name)


@pytest.fixture
def plane(apiserver: FakeApiServer) -> Iterator[ControlPlane]:
    scheduler = Scheduler(apiserver.store, initial_backoff=0.02, max_backoff=0.2)
    with ControlPlane(apiserver.store, scheduler=scheduler) as control_plane:
        yield control_plane


@pytest.fixture
def resource_api(api_client: client.ApiClient) -> client.ResourceV1Api:
    return client.ResourceV1Api(api_client)


# --- pure decisions --------------------------------------------------------------------------------


@pytest.mark.parametrize("spec,expected", [
    ({"containers": [{"resources": {"limits": {GPU: "2"}}}]}, {GPU: 2}),
    ({"containers": [{"resources": {"requests": {"cpu": "500m"}}}, {"resources": {"requests": {"cpu": "1"}}}],
      "initContainers": [{"resources": {"requests": {"cpu": "2"}}}]}, {"cpu": 2000}),
    ({"containers": [{"resources": {"requests": {"cpu": "1"}}}],
      "initContainers": [{"restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                         {"resources": {"requests": {"cpu": "1500m"}}}]}, {"cpu": 2500}),
    ({"containers": [{"resources": {"requests": {"memory": "1Gi"}}}], "overhead": {"memory": "1Gi"}},
     {"memory": 2 * 2**30}),
], ids=["limits count as requests", "an init container larger than the sum wins",
        "a sidecar runs beside later init containers", "pod overhead is added"])
def test_pod_requests_follow_the_schedulers_arithmetic(spec, expected):
    assert pod_requests(spec) == expected


@pytest.mark.parametrize("toleration,taint,expected", [
    ({"operator": "Exists"}, {"key": "anything", "value": "x", "effect": "NoSchedule"}, True),
    ({"key": "gpu", "operator": "Equal", "value": "a100", "effect": "NoSchedule"},
     {"key": "gpu", "value": "a100", "effect": "NoSchedule"}, True),
    ({"key": "gpu", "operator": "Equal", "value": "h100"}, {"key": "gpu", "value": "a100", "effect": "NoSchedule"},
     False),
    ({"key": "gpu", "operator": "Exists", "effect": "NoExecute"}, {"key": "gpu", "effect": "NoSchedule"}, False),
], ids=["empty key with Exists tolerates all", "Equal with the same value", "Equal with another value",
        "another effect"])
def test_tolerations_match_taints_as_core_v1_does(toleration, taint, expected):
    assert tolerates(toleration, taint) is expected


def test_the_message_sorts_count_reason_strings_as_sort_strings_does():
    statuses = {"a": NodeStatus(("Insufficient cpu",), resolvable=True), "b": NodeStatus(("Insufficient cpu",)),
                "c": NodeStatus(("node(s) had untolerated taint(s)",))}
    postfilter = "no new claims to deallocate, " + preemption_message("PreemptLowerPriority", 3, statuses)
    assert fit_error_message(3, statuses, postfilter=postfilter) == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu. no new claims to "
        "deallocate, preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
        "2 Preemption is not helpful for scheduling.")


# --- device-plugin resources ----------------------------------------------------------------------


def test_a_gpu_pod_lands_on_the_gpu_node_and_the_scheduler_says_so(plane, core, namespace):
    core.create_node(make_node("cpu-only"))
    core.create_node(make_node("gpu-node", {GPU: "8"}))
    pod = core.create_namespaced_pod(namespace, make_pod("p", {GPU: "1"}))
    assert scheduled_on(core, namespace, "p") == "gpu-node"
    event = wait_for(core.list_namespaced_event, namespace, until=lambda e: True,
                     field_selector="involvedObject.name=p,reason=Scheduled")
    assert event.type == "Normal" and event.message == f"Successfully assigned {namespace}/p to gpu-node"
    assert event.reporting_component == "default-scheduler"
    assert not (event.source and event.source.component)  # as on a real cluster: only reportingComponent
    assert event.involved_object.uid == pod.metadata.uid and event.involved_object.kind == "Pod"
    conditions = {c.type: c.status for c in core.read_namespaced_pod("p", namespace).status.conditions}
    assert conditions["PodScheduled"] == "True"


def test_eight_gpus_on_a_node_with_seven_allocatable_get_the_real_insufficient_message(plane, core, namespace):
    core.create_node(make_node("gpu-node", {GPU: "7"}))
    core.create_namespaced_pod(namespace, make_pod("big", {GPU: "8"}))
    event = failed_scheduling(core, namespace, "big")
    expected = f"0/1 nodes are available: 1 Insufficient nvidia.com/gpu. {NOT_HELPFUL}"
    assert (event.type, event.message) == ("Warning", expected)  # docs/domain.md section 4, verbatim
    pod = core.read_namespaced_pod("big", namespace)
    condition = next(c for c in pod.status.conditions if c.type == "PodScheduled")
    assert (condition.status, condition.reason, condition.message) == ("False", "Unschedulable", expected)
    assert pod.status.phase == "Pending" and not pod.spec.node_name


AFFINITY = "node(s) didn't match Pod's node affinity/selector"


def required(*terms: dict) -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


@pytest.mark.parametrize("node_kw,pod_kw,reason", [
    ({"labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}},
     {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}, AFFINITY),
    ({"labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}},
     {"affinity": required({"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In",
                                                  "values": ["NVIDIA-H100-80GB-HBM3"]}]})}, AFFINITY),
    ({"labels": {"nvidia.com/gpu.memory": "40960"}},
     {"affinity": required({"matchExpressions": [{"key": "nvidia.com/gpu.memory", "operator": "Gt",
                                                  "values": ["81000"]}]})}, AFFINITY),
    ({}, {"affinity": required({"matchExpressions": [{"key": "nvidia.com/mig.capable", "operator": "Exists"}]})},
     AFFINITY),
    ({}, {"affinity": required({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["other"]}]})},
     AFFINITY),
    ({"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}, {},
     "node(s) had untolerated taint(s)"),
    ({"taints": [{"key": "dedicated", "value": "training", "effect": "NoExecute"}]},
     {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"}]},
     "node(s) had untolerated taint(s)"),
    ({"ready": "False"}, {}, "node(s) had untolerated taint(s)"),
    ({"ready": "Unknown"}, {}, "node(s) had untolerated taint(s)"),
    ({"unschedulable": True}, {}, "node(s) were unschedulable"),
], ids=["nodeSelector on another product", "required affinity In", "required affinity Gt", "Exists on a missing label",
        "matchFields on another node", "a NoSchedule taint", "a NoExecute taint tolerated only for NoSchedule",
        "a not-ready node (the lifecycle controller's taint)", "an unreachable node", "a cordoned node"])
def test_a_node_that_does_not_fit_is_reported_with_the_real_reason(plane, core, namespace, node_kw, pod_kw, reason):
    core.create_node(make_node("gpu-node", {GPU: "8"}, **node_kw))
    core.create_namespaced_pod(namespace, make_pod("p", {GPU: "1"}, **pod_kw))
    assert failed_scheduling(core, namespace, "p").message == f"0/1 nodes are available: 1 {reason}. {NOT_HELPFUL}"


@pytest.mark.parametrize("node_kw,pod_kw", [
    ({"labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
     {"affinity": required({"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "NotIn",
                                                  "values": ["Tesla-T4"]}]},
                           {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["x"]}]})}),
    ({"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
     {"tolerations": [{"operator": "Exists"}]}),
    ({"unschedulable": True}, {"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]}),
], ids=["terms are ORed", "empty key with Exists tolerates every taint", "tolerating the unschedulable taint"])
def test_a_node_that_fits_gets_the_pod(plane, core, namespace, node_kw, pod_kw):
    core.create_node(make_node("gpu-node", {GPU: "8"}, **node_kw))
    core.create_namespaced_pod(namespace, make_pod("p", {GPU: "1"}, **pod_kw))
    assert scheduled_on(core, namespace, "p") == "gpu-node"


def test_every_node_is_accounted_for_and_preemption_is_judged_per_node(plane, core, namespace):
    core.create_node(make_node("gpu-a", {GPU: "1"}))
    core.create_node(make_node("cpu-a", labels={"role": "apps"}))
    core.create_node(make_node("control-plane", {GPU: "1"},
                               taints=[{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]))
    core.create_namespaced_pod(namespace, make_pod("holder", {GPU: "1"},
                                                   nodeSelector={"kubernetes.io/hostname": "gpu-a"}))
    assert scheduled_on(core, namespace, "holder") == "gpu-a"
    # Evicting the holder could free gpu-a; nothing frees a GPU on a node that has none, or lifts a taint.
    core.create_namespaced_pod(namespace, make_pod("anywhere", {GPU: "1"}))
    assert failed_scheduling(core, namespace, "anywhere").message == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient nvidia.com/gpu. "
        "no new claims to deallocate, preemption: 0/3 nodes are available: "
        "1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.")
    core.create_namespaced_pod(namespace, make_pod("apps-only", {GPU: "1"}, nodeSelector={"role": "apps"}))
    assert failed_scheduling(core, namespace, "apps-only").message == (
        "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't match Pod's node "
        "affinity/selector, 1 node(s) had untolerated taint(s). no new claims to deallocate, preemption: "
        "0/3 nodes are available: 3 Preemption is not helpful for scheduling.")


@pytest.mark.parametrize("allocatable,requests,fits", [
    ({"nvidia.com/mig-1g.10gb": "7"}, {"nvidia.com/mig-1g.10gb": "2"}, True),
    ({"nvidia.com/mig-1g.10gb": "7"}, {"nvidia.com/mig-3g.40gb": "1"}, False),
    ({GPU: "4", "nvidia.com/gpu.shared": "4"}, {"nvidia.com/gpu.shared": "4"}, True),
    ({GPU: "4"}, {"nvidia.com/gpu.shared": "1"}, False),
], ids=["a MIG slice the node has", "a MIG profile the node lacks", "time-sliced replicas", "no shared resource"])
def test_mig_and_shared_resources_are_counted_like_any_extended_resource(plane, core, namespace, allocatable,
                                                                          requests, fits):
    core.create_node(make_node("gpu-node", allocatable))
    core.create_namespaced_pod(namespace, make_pod("p", requests))
    if fits:
        assert scheduled_on(core, namespace, "p") == "gpu-node"
    else:
        (resource,) = requests
        assert failed_scheduling(core, namespace, "p").message == \
            f"0/1 nodes are available: 1 Insufficient {resource}. {NOT_HELPFUL}"


def test_time_sliced_replicas_fill_up_and_the_next_pod_is_told_why(plane, core, namespace):
    core.create_node(make_node("gpu-node", {GPU: "4"}))  # 1 GPU x 4 time-slicing replicas
    for i in range(4):
        core.create_namespaced_pod(namespace, make_pod(f"p{i}", {GPU: "1"}))
    for i in range(4):
        assert scheduled_on(core, namespace, f"p{i}") == "gpu-node"
    core.create_namespaced_pod(namespace, make_pod("p4", {GPU: "1"}))
    # The node could hold it if something were evicted, so preemption is tried and finds no victims.
    assert failed_scheduling(core, namespace, "p4").message == (
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: "
        "0/1 nodes are available: 1 No preemption victims found for incoming pod.")


def test_cpu_memory_and_pod_count_are_all_reported_when_short(plane, core, namespace):
    core.create_node(make_node("small", {"cpu": "1", "memory": "1Gi", "pods": "0"}))
    core.create_namespaced_pod(namespace, make_pod("p", {"cpu": "2", "memory": "2Gi"}))
    assert failed_scheduling(core, namespace, "p").message == (
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 1 Too many pods. "
        f"{NOT_HELPFUL}")


def test_two_pods_racing_for_the_last_gpu_only_one_binds(plane, core, namespace):
    core.create_node(make_node("gpu-node", {GPU: "1"}))
    barrier = threading.Barrier(2)

    def create(name: str) -> None:
        barrier.wait()
        core.create_namespaced_pod(namespace, make_pod(name, {GPU: "1"}))

    threads = [threading.Thread(target=create, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winner = wait_for(core.list_namespaced_pod, namespace, until=bound)
    loser = "b" if winner.metadata.name == "a" else "a"
    assert "1 Insufficient nvidia.com/gpu" in failed_scheduling(core, namespace, loser).message
    assert [p.metadata.name for p in core.list_namespaced_pod(namespace).items if p.spec.node_name] == \
        [winner.metadata.name]


def test_a_pending_pod_binds_once_the_gpu_it_waits_for_is_freed(plane, core, namespace):
    core.create_node(make_node("gpu-node", {GPU: "1"}))
    core.create_namespaced_pod(namespace, make_pod("first", {GPU: "1"}))
    assert scheduled_on(core, namespace, "first") == "gpu-node"
    core.create_namespaced_pod(namespace, make_pod("second", {GPU: "1"}))
    failed_scheduling(core, namespace, "second")
    core.delete_namespaced_pod("first", namespace)
    assert scheduled_on(core, namespace, "second") == "gpu-node"


def test_a_finished_pod_no_longer_holds_its_gpu(plane, core, namespace):
    core.create_node(make_node("gpu-node", {GPU: "1"}))
    core.create_namespaced_pod(namespace, make_pod("first", {GPU: "1"}))
    scheduled_on(core, namespace, "first")
    core.create_namespaced_pod(namespace, make_pod("second", {GPU: "1"}))
    failed_scheduling(core, namespace, "second")
    core.patch_namespaced_pod_status("first", namespace, {"status": {"phase": "Succeeded"}})
    assert scheduled_on(core, namespace, "second") == "gpu-node"


def test_repeated_failures_update_one_event_instead_of_flooding(plane, core, namespace):
    core.create_node(make_node("gpu-node", {GPU: "1"}))
    core.create_namespaced_pod(namespace, make_pod("p", {GPU: "2"}))
    first = failed_scheduling(core, namespace, "p")
    assert first.count == 1
    for i in range(2):  # node updates that change nothing for this pod still make the scheduler retry
        core.patch_node("gpu-node", {"metadata": {"labels": {"touched": str(i)}}})
        wait_for(core.list_namespaced_event, namespace, until=lambda e, n=i + 2: (e.count or 0) >= n,
                 field_selector="involvedObject.name=p,reason=FailedScheduling")
    events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=p,reason=FailedScheduling")
    assert len(events.items) == 1
    (event,) = events.items
    assert event.count == 3 and event.metadata.name == first.metadata.name and event.message == first.message
    assert event.last_timestamp >= first.last_timestamp and event.series.count == 3


def test_a_cluster_without_nodes_says_so(plane, core, namespace):
    core.create_namespaced_pod(namespace, make_pod("p"))
    event = failed_scheduling(core, namespace, "p")
    assert event.message == "no nodes available to schedule pods"
    reason = next(c.reason for c in core.read_namespaced_pod("p", namespace).status.conditions
                  if c.type == "PodScheduled")
    assert reason == "SchedulerError"


def test_pods_for_another_scheduler_or_with_a_node_name_are_left_alone(plane, core, namespace):
    core.create_node(make_node("gpu-node", {GPU: "8"}))
    core.create_namespaced_pod(namespace, make_pod("other", {GPU: "1"}, schedulerName="volcano"))
    core.create_namespaced_pod(namespace, make_pod("pinned", {GPU: "1"}, nodeName="gpu-node"))
    core.create_namespaced_pod(namespace, make_pod("mine", {GPU: "1"}))
    scheduled_on(core, namespace, "mine")
    assert core.read_namespaced_pod("other", namespace).spec.node_name is None
    events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=pinned").items
    assert events == []


# --- priority -------------------------------------------------------------------------------------


def test_a_never_preempting_priority_class_sets_priority_and_says_it_will_not_preempt(plane, api_client, core,
                                                                                      namespace):
    client.SchedulingV1Api(api_client).create_priority_class(
        {"metadata": {"name": "never-preempts"}, "value": 1000, "preemptionPolicy": "Never"})
    core.create_node(make_node("gpu-node", {GPU: "1"}))
    core.create_namespaced_pod(namespace, make_pod("p", {GPU: "2"}, priorityClassName="never-preempts"))
    message = failed_scheduling(core, namespace, "p").message
    assert message == ("0/1 nodes are available: 1 Insufficient nvidia.com/gpu. no new claims to deallocate, "
                       "preemption: not eligible due to preemptionPolicy=Never.")
    pod = core.read_namespaced_pod("p", namespace)
    assert (pod.spec.priority, pod.spec.preemption_policy) == (1000, "Never")


def test_higher_priority_pods_are_scheduled_first(apiserver, api_client, core, namespace):
    client.SchedulingV1Api(api_client).create_priority_class({"metadata": {"name": "high"}, "value": 100})
    core.create_node(make_node("gpu-node", {GPU: "1"}))
    core.create_namespaced_pod(namespace, make_pod("low", {GPU: "1"}))
    core.create_namespaced_pod(namespace, make_pod("high", {GPU: "1"}, priorityClassName="high", priority=100))
    with ControlPlane(apiserver.store):  # both wait in the queue before the scheduler starts
        assert scheduled_on(core, namespace, "high") == "gpu-node"
        assert "Insufficient nvidia.com/gpu" in failed_scheduling(core, namespace, "low").message


# --- DRA ------------------------------------------------------------------------------------------

DRIVER = "gpu.nvidia.com"
GPU_CLASS = {"metadata": {"name": "gpu.nvidia.com"}, "spec": {"selectors": [{"cel": {"expression":
             "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}}
MEM = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('{}')) >= 0"


def dra_gpu(i: int, product: str, memory: str) -> dict:
    return {"name": f"gpu-{i}", "attributes": {
        "type": {"string": "gpu"}, "uuid": {"string": f"GPU-{i:08x}-aaaa-bbbb-cccc-dddddddddddd"},
        "productName": {"string": product}, "index": {"int": i}, "driverVersion": {"version": "570.133.20"}},
        "capacity": {"memory": {"value": memory}}}


def dra_slice(node: str, devices: list[dict]) -> dict:
    return {"metadata": {"name": f"{node}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                  "resourceSliceCount": 1}, "devices": devices}}


def claim_spec(*selectors: str, cls: str = "gpu.nvidia.com", name: str = "gpu") -> dict:
    return {"devices": {"requests": [{"name": name, "exactly": {
        "deviceClassName": cls, "allocationMode": "ExactCount", "count": 1,
        "selectors": [{"cel": {"expression": s}} for s in selectors]}}]}}


def dra_pod(name: str, *claims: tuple[str, str]) -> dict:
    """A pod whose claims are (pod claim name, template name)."""
    body = make_pod(name)
    body["spec"]["resourceClaims"] = [{"name": c, "resourceClaimTemplateName": t} for c, t in claims]
    body["spec"]["containers"][0]["resources"] = {"claims": [{"name": c} for c, _ in claims]}
    return body


@pytest.fixture
def dra_node(core: client.CoreV1Api, resource_api: client.ResourceV1Api) -> str:
    """A node whose DRA driver publishes a 24 GiB L4 and an 80 GiB H100."""
    core.create_node(make_node("dra-node"))
    resource_api.create_device_class(GPU_CLASS)
    resource_api.create_resource_slice(dra_slice("dra-node", [dra_gpu(0, "NVIDIA L4", "24Gi"),
                                                              dra_gpu(1, "NVIDIA H100 80GB HBM3", "80Gi")]))
    return "dra-node"


def template(resource_api: client.ResourceV1Api, namespace: str, name: str, *selectors: str, **kw: Any) -> None:
    resource_api.create_namespaced_resource_claim_template(
        namespace, {"metadata": {"name": name}, "spec": {"spec": claim_spec(*selectors, **kw)}})


def test_a_template_claim_is_created_allocated_to_the_selected_device_and_reserved(plane, core, resource_api,
                                                                                    namespace, dra_node):
    template(resource_api, namespace, "big-gpu", MEM.format("40Gi"))
    pod = core.create_namespaced_pod(namespace, dra_pod("trainer", ("gpu", "big-gpu")))
    assert scheduled_on(core, namespace, "trainer") == dra_node
    status = core.read_namespaced_pod("trainer", namespace).status
    (entry,) = status.resource_claim_statuses
    assert entry.name == "gpu" and entry.resource_claim_name.startswith("trainer-gpu-")
    assert len(entry.resource_claim_name) == len("trainer-gpu-") + 5
    claim = resource_api.read_namespaced_resource_claim(entry.resource_claim_name, namespace)
    assert claim.metadata.annotations["resource.kubernetes.io/pod-claim-name"] == "gpu"
    (owner,) = claim.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid, owner.controller) == ("Pod", "trainer", pod.metadata.uid, True)
    (result,) = claim.status.allocation.devices.results
    assert (result.request, result.driver, result.pool, result.device) == ("gpu", DRIVER, dra_node, "gpu-1")
    terms = claim.status.allocation.node_selector.node_selector_terms
    assert terms[0].match_fields[0].values == [dra_node]
    (consumer,) = claim.status.reserved_for
    assert (consumer.resource, consumer.name, consumer.uid) == ("pods", "trainer", pod.metadata.uid)
    assert "resource.kubernetes.io/delete-protection" in claim.metadata.finalizers


def test_an_unsatisfiable_selector_leaves_the_pod_pending_with_cannot_allocate(plane, core, resource_api, namespace,
                                                                                dra_node):
    template(resource_api, namespace, "huge-gpu", MEM.format("200Gi"))
    core.create_namespaced_pod(namespace, dra_pod("p", ("gpu", "huge-gpu")))
    event = failed_scheduling(core, namespace, "p")
    assert event.message == ("0/1 nodes are available: 1 cannot allocate all claims. still not schedulable, "
                             "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")
    assert core.read_namespaced_pod("p", namespace).status.phase == "Pending"


def test_two_claims_get_two_distinct_devices(plane, core, resource_api, namespace, dra_node):
    template(resource_api, namespace, "any-gpu")
    core.create_namespaced_pod(namespace, dra_pod("p", ("first", "any-gpu"), ("second", "any-gpu")))
    scheduled_on(core, namespace, "p")
    claims = resource_api.list_namespaced_resource_claim(namespace).items
    devices = sorted(c.status.allocation.devices.results[0].device for c in claims)
    assert devices == ["gpu-0", "gpu-1"]


def test_a_third_claim_waits_until_a_device_is_released(plane, core, resource_api, namespace, dra_node):
    template(resource_api, namespace, "any-gpu")
    core.create_namespaced_pod(namespace, dra_pod("a", ("gpu", "any-gpu")))
    core.create_namespaced_pod(namespace, dra_pod("b", ("gpu", "any-gpu")))
    scheduled_on(core, namespace, "a")
    scheduled_on(core, namespace, "b")
    core.create_namespaced_pod(namespace, dra_pod("c", ("gpu", "any-gpu")))
    assert "1 cannot allocate all claims" in failed_scheduling(core, namespace, "c").message
    core.delete_namespaced_pod("a", namespace)
    assert scheduled_on(core, namespace, "c") == dra_node


def test_a_cel_runtime_error_is_reported_as_an_error_not_as_node_counts(plane, core, resource_api, namespace,
                                                                        dra_node):
    template(resource_api, namespace, "broken", "device.attributes['gpu.nvidia.com'].parentUUID == 'x'")
    core.create_namespaced_pod(namespace, dra_pod("p", ("gpu", "broken")))
    event = failed_scheduling(core, namespace, "p")
    claim = core.read_namespaced_pod("p", namespace).status.resource_claim_statuses[0].resource_claim_name
    assert event.message == (f'running "DynamicResources" filter plugin: claim {namespace}/{claim}: selector #0: '
                             "CEL runtime error: no such key: parentUUID")
    condition = next(c for c in core.read_namespaced_pod("p", namespace).status.conditions
                     if c.type == "PodScheduled")
    assert condition.reason == "SchedulerError"


def test_a_missing_device_class_fails_the_whole_cycle_at_prefilter(plane, core, resource_api, namespace, dra_node):
    template(resource_api, namespace, "nope", cls="nope.example.com")
    core.create_namespaced_pod(namespace, dra_pod("p", ("gpu", "nope")))
    assert failed_scheduling(core, namespace, "p").message == (
        "0/1 nodes are available: request gpu: device class nope.example.com does not exist. "
        f"{NOT_HELPFUL}")


def test_a_pod_whose_claim_is_not_created_yet_waits_silently_as_on_a_real_cluster(apiserver, core, resource_api,
                                                                                  namespace, dra_node):
    template(resource_api, namespace, "any-gpu")
    with Scheduler(apiserver.store) as scheduler:  # no claim controller: the claim never appears
        core.create_namespaced_pod(namespace, dra_pod("p", ("gpu", "any-gpu")))
        assert scheduler.wait_until(lambda: scheduler.waiting_reason(namespace, "p") is not None, timeout=5)
        assert scheduler.waiting_reason(namespace, "p") == f'pod "{namespace}/p": ResourceClaim not created yet'
        assert core.list_namespaced_event(namespace).items == []
        assert core.read_namespaced_pod("p", namespace).status.conditions is None


def test_the_assigned_pods_cache_keeps_the_newest_state_of_each_pod() -> None:
    from gpuconf.sim.scheduler import _AssignedPods

    def pod(rv: int, node: str = "", phase: str = "Pending") -> dict[str, Any]:
        return {"metadata": {"name": "p", "namespace": "ns", "resourceVersion": str(rv)},
                "spec": {"nodeName": node} if node else {}, "status": {"phase": phase}}

    cache, key = _AssignedPods(), ("ns", "p")
    cache.apply("ADDED", key, pod(1))
    assert cache.snapshot() == {}
    cache.apply("MODIFIED", key, pod(3, "n1"))  # the scheduler's own bind, assumed before its event
    cache.apply("MODIFIED", key, pod(2))  # an older event arriving late changes nothing
    assert cache.snapshot() == {"n1": [pod(3, "n1")]}
    cache.apply("MODIFIED", key, pod(4, "n1", "Succeeded"))  # terminal: its resources are free
    assert cache.snapshot() == {}
    cache.apply("MODIFIED", key, pod(5, "n2", "Running"))
    cache.apply("DELETED", key, pod(6, "n2", "Running"))
    assert cache.snapshot() == {}
