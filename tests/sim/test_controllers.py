"""The simulated controller-manager loops, through the official client over HTTP: ResourceClaims
from templates and their release, and batch/v1 Jobs (Indexed and NonIndexed)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from gpuconf.sim import FakeApiServer
from gpuconf.sim.controllers import ControlPlane, _claim_generate_name, format_indexes
from gpuconf.sim.scheduler import Scheduler

from .watching import _watch, wait_for

DRIVER = "gpu.nvidia.com"
GPU_CLASS = {"metadata": {"name": "gpu.nvidia.com"}, "spec": {"selectors": [{"cel": {"expression":
             "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}}
CLAIM_SPEC = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}
FINALIZER = "resource.kubernetes.io/delete-protection"

# --- helpers (the same waiting rule as test_scheduler.py: a watch with a deadline, never a sleep) ------


def wait_count(list_fn: Callable[..., Any], *args: Any, count: int, timeout: float = 5.0, **kwargs: Any) -> list:
    """Wait until ``list_fn`` lists exactly ``count`` objects (re-listing on each watch event)."""
    deadline = time.monotonic() + timeout
    listing = list_fn(*args, **kwargs)
    stream = _watch(listing)
    try:
        while len(listing.items) != count and (remaining := deadline - time.monotonic()) > 0:
            for _ in stream.stream(list_fn, *args, resource_version=listing.metadata.resource_version,
                                   timeout_seconds=math.ceil(remaining), **kwargs):
                listing = list_fn(*args, **kwargs)
                if len(listing.items) == count or time.monotonic() > deadline:
                    break
    finally:
        stream.stop()
    assert len(listing.items) == count, [i.metadata.name for i in listing.items]
    return list(listing.items)


def make_node(name: str) -> dict:
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "8"}
    return {"metadata": {"name": name}, "status": {"capacity": resources, "allocatable": resources,
                                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def claim_pod(name: str, claim: dict[str, str]) -> dict:
    return {"metadata": {"name": name}, "spec": {
        "restartPolicy": "Never", "resourceClaims": [{"name": "gpu", **claim}],
        "containers": [{"name": "main", "image": "cuda", "resources": {"claims": [{"name": "gpu"}]}}]}}


def set_phase(core: client.CoreV1Api, namespace: str, name: str, phase: str) -> None:
    core.patch_namespaced_pod_status(name, namespace, {"status": {"phase": phase}})


@pytest.fixture
def plane(apiserver: FakeApiServer, core: client.CoreV1Api) -> Iterator[ControlPlane]:
    core.create_node(make_node("node-a"))
    with ControlPlane(apiserver.store, scheduler=Scheduler(apiserver.store, initial_backoff=0.02,
                                                           max_backoff=0.2)) as control_plane:
        yield control_plane


@pytest.fixture
def resource_api(api_client: client.ApiClient) -> client.ResourceV1Api:
    return client.ResourceV1Api(api_client)


@pytest.fixture
def batch(api_client: client.ApiClient) -> client.BatchV1Api:
    return client.BatchV1Api(api_client)


@pytest.fixture
def dra(resource_api: client.ResourceV1Api, namespace: str) -> client.ResourceV1Api:
    """node-a's DRA driver publishes two GPUs; a template asks for any one."""
    resource_api.create_device_class(GPU_CLASS)
    devices = [{"name": f"gpu-{i}", "attributes": {"type": {"string": "gpu"}},
                "capacity": {"memory": {"value": "80Gi"}}} for i in range(2)]
    resource_api.create_resource_slice({"metadata": {"name": "node-a-gpu"}, "spec": {
        "driver": DRIVER, "nodeName": "node-a", "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
        "devices": devices}})
    resource_api.create_namespaced_resource_claim_template(namespace, {"metadata": {"name": "any-gpu"},
                                                                       "spec": {"spec": CLAIM_SPEC}})
    return resource_api


def claim_of(core: client.CoreV1Api, namespace: str, pod: str) -> str:
    found = wait_for(core.list_namespaced_pod, namespace, until=lambda p: bool(p.status.resource_claim_statuses),
                     field_selector=f"metadata.name={pod}")
    return str(found.status.resource_claim_statuses[0].resource_claim_name)


def bound(core: client.CoreV1Api, namespace: str, pod: str) -> Any:
    return wait_for(core.list_namespaced_pod, namespace, until=lambda p: bool(p.spec.node_name),
                    field_selector=f"metadata.name={pod}")


# --- ResourceClaims from templates ---------------------------------------------------------------------


@pytest.mark.parametrize("pod,claim,expected", [
    ("trainer", "gpu", "trainer-gpu-"),
    ("p" * 60, "claim", "p" * 51 + "-" + "clai"),  # 60*57//67 and 5*57//67 characters, no trailing dash
], ids=["short names are kept", "long names are cut in proportion"])
def test_generated_claim_names_follow_the_controller(pod, claim, expected):
    assert _claim_generate_name(pod, claim) == expected


def test_a_deleted_pods_generated_claim_is_released_and_deleted(plane, core, dra, namespace):
    core.create_namespaced_pod(namespace, claim_pod("p", {"resourceClaimTemplateName": "any-gpu"}))
    name = claim_of(core, namespace, "p")
    bound(core, namespace, "p")
    assert dra.read_namespaced_resource_claim(name, namespace).status.allocation is not None
    core.delete_namespaced_pod("p", namespace)
    wait_count(dra.list_namespaced_resource_claim, namespace, count=0)


def test_a_finished_pod_gives_its_device_back(plane, core, dra, namespace):
    core.create_namespaced_pod(namespace, claim_pod("p", {"resourceClaimTemplateName": "any-gpu"}))
    bound(core, namespace, "p")
    set_phase(core, namespace, "p", "Succeeded")
    wait_count(dra.list_namespaced_resource_claim, namespace, count=0)  # the pod stays, its claim does not
    assert core.read_namespaced_pod("p", namespace).status.phase == "Succeeded"


def test_a_shared_claim_stays_allocated_until_its_last_consumer_is_gone(plane, core, dra, namespace):
    dra.create_namespaced_resource_claim(namespace, {"metadata": {"name": "shared"}, "spec": CLAIM_SPEC})
    for pod in ("a", "b"):
        core.create_namespaced_pod(namespace, claim_pod(pod, {"resourceClaimName": "shared"}))
        bound(core, namespace, pod)
    claim = dra.read_namespaced_resource_claim("shared", namespace)
    assert sorted(r.name for r in claim.status.reserved_for) == ["a", "b"]
    device = claim.status.allocation.devices.results[0].device
    core.delete_namespaced_pod("a", namespace)
    claim = wait_for(dra.list_namespaced_resource_claim, namespace, field_selector="metadata.name=shared",
                     until=lambda c: [r.name for r in c.status.reserved_for or []] == ["b"])
    assert claim.status.allocation.devices.results[0].device == device
    core.delete_namespaced_pod("b", namespace)
    # Two writes, as the real controller makes them: deallocate (status), then drop the finalizer.
    claim = wait_for(dra.list_namespaced_resource_claim, namespace, field_selector="metadata.name=shared",
                     until=lambda c: c.status.allocation is None and FINALIZER not in (c.metadata.finalizers or []))
    assert not claim.status.reserved_for and claim.metadata.deletion_timestamp is None


def test_a_template_created_after_the_pod_still_gets_the_pod_its_claim(plane, core, resource_api, namespace):
    resource_api.create_device_class(GPU_CLASS)
    core.create_namespaced_pod(namespace, claim_pod("p", {"resourceClaimTemplateName": "late"}))
    resource_api.create_namespaced_resource_claim_template(namespace, {"metadata": {"name": "late"},
                                                                       "spec": {"spec": CLAIM_SPEC}})
    assert claim_of(core, namespace, "p").startswith("p-gpu-")


def test_deleting_an_allocated_claim_waits_for_its_pod(plane, core, dra, namespace):
    core.create_namespaced_pod(namespace, claim_pod("p", {"resourceClaimTemplateName": "any-gpu"}))
    name = claim_of(core, namespace, "p")
    bound(core, namespace, "p")
    dra.delete_namespaced_resource_claim(name, namespace)
    held = dra.read_namespaced_resource_claim(name, namespace)
    assert held.metadata.deletion_timestamp is not None and FINALIZER in held.metadata.finalizers
    core.delete_namespaced_pod("p", namespace)
    wait_count(dra.list_namespaced_resource_claim, namespace, count=0)


# --- Jobs ----------------------------------------------------------------------------------------------


def job_body(name: str, *, completions: int | None = 4, parallelism: int = 4, mode: str = "Indexed",
             **spec: Any) -> dict:
    body: dict[str, Any] = {"metadata": {"name": name}, "spec": {
        "parallelism": parallelism, "completionMode": mode, **spec,
        "template": {"spec": {"restartPolicy": "Never", "subdomain": "workers",
                              "containers": [{"name": "worker", "image": "busybox",
                                              "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}
    if completions is not None:
        body["spec"]["completions"] = completions
    return body


def job_pods(core: client.CoreV1Api, namespace: str, job: str, count: int) -> list:
    return wait_count(core.list_namespaced_pod, namespace, count=count,
                      label_selector=f"batch.kubernetes.io/job-name={job}")


def finished(job: Any) -> bool:
    return any(c.type in ("Complete", "Failed") and c.status == "True" for c in job.status.conditions or [])


def test_an_indexed_job_runs_one_pod_per_index_and_completes_when_they_succeed(plane, batch, core, namespace):
    job = batch.create_namespaced_job(namespace, job_body("train"))
    pods = job_pods(core, namespace, "train", 4)
    by_index = {int(p.metadata.labels["batch.kubernetes.io/job-completion-index"]): p for p in pods}
    assert sorted(by_index) == [0, 1, 2, 3]
    for index, pod in by_index.items():
        assert pod.metadata.annotations["batch.kubernetes.io/job-completion-index"] == str(index)
        assert pod.metadata.name.startswith(f"train-{index}-")
        assert (pod.spec.hostname, pod.spec.subdomain) == (f"train-{index}", "workers")
        assert pod.metadata.labels["batch.kubernetes.io/controller-uid"] == job.metadata.uid
        assert pod.metadata.labels["batch.kubernetes.io/job-name"] == "train"
        (owner,) = pod.metadata.owner_references
        assert (owner.kind, owner.name, owner.uid, owner.controller) == ("Job", "train", job.metadata.uid, True)
        (env,) = pod.spec.containers[0].env
        assert env.name == "JOB_COMPLETION_INDEX"
        assert env.value_from.field_ref.field_path == "metadata.labels['batch.kubernetes.io/job-completion-index']"
    for pod in pods:
        bound(core, namespace, pod.metadata.name)  # the scheduler placed every one
    running = wait_for(batch.list_namespaced_job, namespace, until=lambda j: j.status.active == 4,
                       field_selector="metadata.name=train")
    assert running.status.start_time is not None and not finished(running)
    for pod in pods:
        set_phase(core, namespace, pod.metadata.name, "Succeeded")
    done = wait_for(batch.list_namespaced_job, namespace, until=finished, field_selector="metadata.name=train")
    assert [(c.type, c.reason) for c in done.status.conditions] == [("SuccessCriteriaMet", "CompletionsReached"),
                                                                    ("Complete", "CompletionsReached")]
    assert done.status.conditions[1].message == "Reached expected number of succeeded pods"
    assert (done.status.succeeded, done.status.active, done.status.completed_indexes) == (4, None, "0-3")
    assert done.status.completion_time is not None
    events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=train").items
    reasons = {e.reason for e in events}
    assert {"SuccessfulCreate", "Completed"} <= reasons


def test_parallelism_limits_how_many_indexes_run_at_once(plane, batch, core, namespace):
    batch.create_namespaced_job(namespace, job_body("j", completions=3, parallelism=2))
    first = job_pods(core, namespace, "j", 2)
    assert sorted(p.metadata.labels["batch.kubernetes.io/job-completion-index"] for p in first) == ["0", "1"]
    set_phase(core, namespace, next(p.metadata.name for p in first
                                    if p.metadata.labels["batch.kubernetes.io/job-completion-index"] == "1"),
              "Succeeded")
    pods = job_pods(core, namespace, "j", 3)
    assert sorted(p.metadata.labels["batch.kubernetes.io/job-completion-index"] for p in pods) == ["0", "1", "2"]
    job = wait_for(batch.list_namespaced_job, namespace, until=lambda j: j.status.completed_indexes == "1",
                   field_selector="metadata.name=j")
    assert job.status.active == 2


def test_a_failed_index_is_retried_and_too_many_failures_fail_the_job(plane, batch, core, namespace):
    batch.create_namespaced_job(namespace, job_body("j", completions=2, parallelism=2, backoffLimit=1))
    pods = job_pods(core, namespace, "j", 2)
    victim = next(p for p in pods if p.metadata.labels["batch.kubernetes.io/job-completion-index"] == "0")
    set_phase(core, namespace, victim.metadata.name, "Failed")
    pods = job_pods(core, namespace, "j", 3)  # index 0 again, beside the failed pod
    retry = next(p for p in pods if p.metadata.name != victim.metadata.name
                 and p.metadata.labels["batch.kubernetes.io/job-completion-index"] == "0")
    set_phase(core, namespace, retry.metadata.name, "Failed")
    job = wait_for(batch.list_namespaced_job, namespace, until=finished, field_selector="metadata.name=j")
    assert [(c.type, c.reason) for c in job.status.conditions] == [("FailureTarget", "BackoffLimitExceeded"),
                                                                   ("Failed", "BackoffLimitExceeded")]
    assert job.status.conditions[1].message == "Job has reached the specified backoff limit"
    assert job.status.failed == 2 and job.status.active is None
    left = core.list_namespaced_pod(namespace, label_selector="batch.kubernetes.io/job-name=j").items
    assert sorted(p.status.phase for p in left) == ["Failed", "Failed"]  # the running index-1 pod was deleted


def test_a_job_past_its_deadline_fails(plane, batch, core, namespace):
    batch.create_namespaced_job(namespace, job_body("slow", completions=1, parallelism=1, activeDeadlineSeconds=1))
    job_pods(core, namespace, "slow", 1)
    job = wait_for(batch.list_namespaced_job, namespace, until=finished, field_selector="metadata.name=slow",
                   timeout=4)
    failed = job.status.conditions[-1]
    assert (failed.type, failed.reason, failed.message) == ("Failed", "DeadlineExceeded",
                                                            "Job was active longer than specified deadline")
    job_pods(core, namespace, "slow", 0)


def test_a_non_indexed_job_counts_successes(plane, batch, core, namespace):
    batch.create_namespaced_job(namespace, job_body("plain", completions=2, parallelism=2, mode="NonIndexed"))
    pods = job_pods(core, namespace, "plain", 2)
    for pod in pods:
        assert pod.metadata.name.startswith("plain-") and pod.spec.hostname is None
        assert "batch.kubernetes.io/job-completion-index" not in pod.metadata.labels
        set_phase(core, namespace, pod.metadata.name, "Succeeded")
    job = wait_for(batch.list_namespaced_job, namespace, until=finished, field_selector="metadata.name=plain")
    assert job.status.succeeded == 2 and job.status.completed_indexes is None


def test_deleting_a_job_deletes_its_pods(plane, batch, core, namespace):
    batch.create_namespaced_job(namespace, job_body("gone"))
    job_pods(core, namespace, "gone", 4)
    batch.delete_namespaced_job("gone", namespace)
    job_pods(core, namespace, "gone", 0)


@pytest.mark.parametrize("indexes,text", [(set(), ""), ({0, 1, 2, 3}, "0-3"), ({1, 3, 4, 5, 7}, "1,3-5,7")])
def test_completed_indexes_are_written_as_intervals(indexes, text):
    assert format_indexes(indexes) == text


def test_the_control_plane_starts_and_stops_cleanly(apiserver, core, namespace):
    plane = ControlPlane(apiserver.store).start()
    assert plane.start() is plane  # starting twice is harmless
    plane.stop()
    core.create_node(make_node("n"))
    core.create_namespaced_pod(namespace, {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "busybox"}]}})
    with plane:  # started again, it picks up what happened while it was stopped
        assert bound(core, namespace, "p").spec.node_name == "n"
    with ControlPlane(apiserver.store):  # and so does a new one
        core.create_namespaced_pod(namespace, {"metadata": {"name": "q"}, "spec": {"containers": [
            {"name": "c", "image": "busybox"}]}})
        assert bound(core, namespace, "q").spec.node_name == "n"
