"""gpuconf.cluster campaigns: the run namespace and its cleanup, leftovers, and probe campaigns
followed with one watch, against the simulated cluster."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpuconf.cluster import Cluster, NotFoundError, PodOutcome, RunContext, collect_leftovers, connect, run_campaign
from gpuconf.cluster.campaign import (
    SCHEDULE_BUDGET_ANNOTATION,
    SKIPPED_INIT_LOG,
    _follow,
    _Follower,
    _read_logs,
    select_leftovers,
)
from gpuconf.cluster.outcomes import finished_reason, make_outcome
from gpuconf.probe_pods import PRIORITY_CLASS, make_cuda_probe_pod
from gpuconf.probes.cuda import parse_cuda_probe
from gpuconf.sim.cluster import SimulatedCluster
from gpuconf.sim.faults import FaultPlan

NODES = ("h100-0", "h100-1")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with SimulatedCluster("healthy-h100") as sim:
        yield connect(sim.write_kubeconfig(tmp_path_factory.mktemp("h100") / "kubeconfig"))


def namespace_gone(cluster: Cluster, name: str) -> bool:
    try:
        ns = cluster.call_json("read namespace", cluster.core.read_namespace, name)
    except NotFoundError:
        return True
    return bool(ns["metadata"].get("deletionTimestamp"))


def probe_pod(ctx: RunContext, name: str, *, node: str | None, gpus: int) -> dict[str, Any]:
    return make_cuda_probe_pod(name=name, namespace=ctx.namespace, run_id=ctx.run_id, check="smoke", cuda="13.0.2",
                               node=node, gpu_count=gpus, runtime_class="nvidia")


@pytest.fixture(scope="module")
def outcomes(cluster: Cluster) -> Iterator[dict[str, PodOutcome]]:
    """Launched once: one 8-GPU probe per node, one asking for 9 GPUs with a 2 s schedule budget, and
    one naming a RuntimeClass the cluster does not have."""
    with RunContext(cluster, handle_signals=False) as ctx:
        too_big = probe_pod(ctx, "nine-gpus", node=None, gpus=9)
        too_big["metadata"]["annotations"] = {SCHEDULE_BUDGET_ANNOTATION: "2"}
        no_class = probe_pod(ctx, "no-class", node=None, gpus=1)
        no_class["spec"]["runtimeClassName"] = "kata-gpu"
        yield run_campaign(ctx, [*(probe_pod(ctx, f"probe-{n}", node=n, gpus=8) for n in NODES), too_big, no_class],
                           timeout=20)


def test_a_probe_per_node_succeeds_and_its_log_parses(outcomes: dict[str, PodOutcome]) -> None:
    for node in NODES:
        outcome = outcomes[f"probe-{node}"]
        assert (outcome.phase, outcome.node, outcome.exit_code, outcome.timed_out) == ("Succeeded", node, 0, False)
        report = parse_cuda_probe(outcome.logs["probe"], exit_code=outcome.exit_code)
        assert len(report.devices) == 8
        assert outcome.container("build").init and outcome.container("build").exit_code == 0
        assert outcome.missing_logs == {"build": SKIPPED_INIT_LOG}  # one log request per pod fewer


def test_a_probe_has_its_events_and_timings(outcomes: dict[str, PodOutcome]) -> None:
    outcome = outcomes["probe-h100-0"]
    reasons = outcome.event_reasons()
    assert reasons[0] == "Scheduled" and {"Pulled", "Started"} <= set(reasons)
    scheduled = next(e for e in outcome.events if e.reason == "Scheduled")
    assert scheduled.reporting_component == "default-scheduler" and scheduled.count == 1
    t = outcome.timings
    assert t.created and t.scheduled and t.pulled and t.started and t.finished
    assert t.created <= t.scheduled <= t.pulled <= t.started <= t.finished


def test_a_pod_asking_for_9_gpus_is_pending_with_insufficient_gpu_within_its_budget(
        outcomes: dict[str, PodOutcome]) -> None:
    outcome = outcomes["nine-gpus"]
    assert (outcome.phase, outcome.reason, outcome.unschedulable, outcome.timed_out) == (
        "Pending", "Unschedulable", True, False)
    assert outcome.message is not None and "Insufficient nvidia.com/gpu" in outcome.message
    assert outcome.event_reasons()[0] == "FailedScheduling" and outcome.events[0].type == "Warning"
    assert outcome.logs == {} and outcome.missing_logs == {"build": "never started", "probe": "never started"}


def test_a_pod_refused_by_admission_is_a_rejected_outcome_not_a_stopped_run(
        outcomes: dict[str, PodOutcome]) -> None:
    outcome = outcomes["no-class"]
    assert (outcome.phase, outcome.reason, outcome.node) == ("Rejected", "Forbidden", None)
    assert outcome.message == 'create pod no-class: pods "no-class" is forbidden: pod rejected: RuntimeClass ' \
        '"kata-gpu" not found'


def test_a_campaign_resumes_its_watch_when_the_stream_is_cut(tmp_path: Path) -> None:
    faults = FaultPlan()
    faults.cut_watch(after_events=1, abrupt=True, resources=["pods"], times=3)
    with SimulatedCluster("healthy-h100", faults=faults) as sim:
        cluster = connect(sim.write_kubeconfig(tmp_path / "kc"))
        with RunContext(cluster, handle_signals=False) as ctx:
            outcome = run_campaign(ctx, [probe_pod(ctx, "p", node="h100-1", gpus=1)], timeout=15)["p"]
    assert outcome.phase == "Succeeded" and not outcome.timed_out
    assert [i.mode for i in faults.injected] == ["cut-watch"] * len(faults.injected) and faults.injected


def test_the_run_namespace_is_labelled_and_the_priority_class_never_preempts(cluster: Cluster) -> None:
    with RunContext(cluster, handle_signals=False) as ctx:
        ns = cluster.call_json("read namespace", cluster.core.read_namespace, ctx.namespace)
        labels = ns["metadata"]["labels"]
        assert (labels["gpuconf.io/run-id"], labels["app.kubernetes.io/managed-by"]) == (ctx.run_id, "gpuconf")
    pc = cluster.call_json("read priorityclass", cluster.scheduling.read_priority_class, PRIORITY_CLASS)
    assert (pc["value"], pc["preemptionPolicy"]) == (0, "Never")  # and it stays: other runs may use it
    assert namespace_gone(cluster, ctx.namespace)


def test_cleanup_removes_the_namespace_even_when_the_body_raises(cluster: Cluster) -> None:
    undone: list[str] = []
    with pytest.raises(RuntimeError, match="boom"), RunContext(cluster, handle_signals=False) as ctx:
        ctx.add_cleanup("first", lambda: undone.append("first"))
        ctx.add_cleanup("second", lambda: undone.append("second"))
        raise RuntimeError("boom")
    assert undone == ["second", "first"]  # last in, first out, before the namespace
    assert namespace_gone(cluster, ctx.namespace)


def test_ctrl_c_runs_the_cleanup_then_interrupts(cluster: Cluster) -> None:
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt), RunContext(cluster) as ctx:
        os.kill(os.getpid(), signal.SIGINT)
    assert namespace_gone(cluster, ctx.namespace)
    assert signal.getsignal(signal.SIGINT) is before


def test_a_leftover_namespace_of_an_old_run_is_collected_and_the_current_one_kept(cluster: Cluster) -> None:
    cluster.call("create namespace", cluster.core.create_namespace, {"metadata": {
        "name": "gpuconf-old", "labels": {"gpuconf.io/run-id": "old", "app.kubernetes.io/managed-by": "gpuconf"}}})
    with RunContext(cluster, handle_signals=False) as ctx:
        collected = collect_leftovers(cluster, current_run_id=ctx.run_id, grace_s=0)
        assert "gpuconf-old" in collected and ctx.namespace not in collected
        assert not namespace_gone(cluster, ctx.namespace)
    assert namespace_gone(cluster, "gpuconf-old")


NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def _ns(name: str, run: str | None, age: timedelta, managed: bool = True) -> dict[str, Any]:
    labels = {"app.kubernetes.io/managed-by": "gpuconf"} if managed else {}
    if run:
        labels["gpuconf.io/run-id"] = run
    return {"metadata": {"name": name, "labels": labels,
                         "creationTimestamp": (NOW - age).strftime("%Y-%m-%dT%H:%M:%SZ")}}


@pytest.mark.parametrize("namespace,collected", [
    (_ns("gpuconf-a", "a", timedelta(hours=7)), True),
    (_ns("gpuconf-b", "b", timedelta(hours=1)), False),
    (_ns("gpuconf-now", "now", timedelta(days=3)), False),
    (_ns("team-x", "x", timedelta(days=3), managed=False), False),
], ids=["a run older than the grace period was killed", "a younger run may still be running",
        "the current run is never collected", "a namespace gpuconf does not manage is never collected"])
def test_select_leftovers(namespace: dict[str, Any], collected: bool) -> None:
    names = select_leftovers([namespace], current_run_id="now", now=NOW, grace_s=6 * 3600)
    assert (names == [namespace["metadata"]["name"]]) is collected


def test_an_init_container_failure_is_the_pods_reason() -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"nodeName": "n", "initContainers": [{"name": "build", "image": "i"}],
                                               "containers": [{"name": "probe", "image": "i"}]},
           "status": {"phase": "Failed", "initContainerStatuses": [
               {"name": "build", "state": {"terminated": {"exitCode": 2, "reason": "Error", "message": "nvcc"}}}],
               "containerStatuses": [{"name": "probe", "state": {"waiting": {"reason": "PodInitializing"}}}]}}
    outcome = make_outcome(pod, [], logs={"build": "nvcc fatal"}, missing_logs={"probe": "never started"})
    assert (outcome.reason, outcome.exit_code, outcome.message) == ("Init:Error", 2, "nvcc")


def test_a_crash_loop_is_terminal_while_the_pod_is_still_running() -> None:
    pod = {"status": {"phase": "Running", "containerStatuses": [
        {"name": "probe", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}
    assert finished_reason(pod) == "CrashLoopBackOff"
    assert finished_reason({"status": {"phase": "Pending"}}) is None


def test_pods_must_be_for_the_run_namespace(cluster: Cluster, tmp_path: Path) -> None:
    with RunContext(cluster, handle_signals=False) as ctx, pytest.raises(ValueError, match="not the run's"):
        run_campaign(ctx, [{"metadata": {"name": "x", "namespace": "default"}}], timeout=1)


def test_a_given_namespace_is_used_and_kept_and_a_missing_one_is_one_clear_error(cluster: Cluster) -> None:
    from gpuconf.cluster import ClusterError

    with RunContext(cluster, handle_signals=False, namespace="default") as ctx:
        (outcome,) = run_campaign(ctx, [probe_pod(ctx, "in-default", node="h100-0", gpus=1)], timeout=20).values()
        assert outcome.succeeded and ctx.namespace == "default"
    assert not namespace_gone(cluster, "default")
    pods = cluster.call_json("list pods", cluster.core.list_namespaced_pod, "default")["items"]
    assert not [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    with pytest.raises(ClusterError, match=r"^namespace absent does not exist \(--namespace names an existing"):
        with RunContext(cluster, handle_signals=False, namespace="absent"):
            pass


def claim_pod(ctx: RunContext, name: str, request: Any) -> dict[str, Any]:
    """A probe pod on h200-0 with one claim of ``request`` (a ClaimRequest), from a template of the run."""
    from gpuconf.probe_pods import make_resource_claim_template

    api = ctx.cluster.resource
    template = ctx.create("resourceclaimtemplate", api.create_namespaced_resource_claim_template,
                          api.delete_namespaced_resource_claim_template, make_resource_claim_template(
                              name=f"{name}-claim", namespace=ctx.namespace, run_id=ctx.run_id, check="test",
                              requests=[request]))
    return make_cuda_probe_pod(name="claimer", namespace=ctx.namespace, run_id=ctx.run_id, check="test",
                               cuda="13.0.2", node="h200-0", gpu_count=0, resource_claims={name: template})


def test_a_campaign_records_the_claims_its_pods_were_allocated(tmp_path: Path) -> None:
    """A generated claim is deallocated and deleted once its pod is done: the campaign keeps what it
    saw while the pod ran."""
    from gpuconf.probe_pods import ClaimRequest

    with SimulatedCluster("h200-dra-only") as sim:
        dra = connect(sim.write_kubeconfig(tmp_path / "kubeconfig"))
        with RunContext(dra, handle_signals=False) as ctx:
            api = dra.resource
            pod = claim_pod(ctx, "gpu", ClaimRequest("gpu", "gpu.nvidia.com"))
            (outcome,) = run_campaign(ctx, [pod], timeout=20, record_claims=True).values()
            later = dra.call_json("list claims", api.list_namespaced_resource_claim, ctx.namespace)["items"]
    assert outcome.succeeded and outcome.claims_error is None
    (claim,) = outcome.claims
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"], result["request"]) == ("gpu.nvidia.com", "h200-0", "gpu")
    assert not [c for c in later if not c["metadata"].get("deletionTimestamp")]  # gone with its pod


def test_a_claim_pod_the_kubelet_cannot_prepare_ends_after_the_prepare_budget_not_the_timeout(tmp_path: Path) -> None:
    """dra-slice-stale: the slice still offers a GPU that fell off the bus; a claim for every published
    device gets it, NodePrepareResources fails, and the kubelet retries for ever. The campaign stops
    following the pod once the budget (the run's, as --prepare-timeout sets it) has passed with the
    failure the latest word."""
    from gpuconf.probe_pods import ClaimRequest
    from gpuconf.sim.profile import load_profile, with_faults

    profile = with_faults(load_profile("h200-dra-only"), [{"id": "dra-slice-stale", "pool": "h200", "node": 0,
                                                           "gpu": 3}])
    with SimulatedCluster(profile) as sim:
        dra = connect(sim.write_kubeconfig(tmp_path / "kubeconfig"))
        with RunContext(dra, handle_signals=False, prepare_budget_s=1.0) as ctx:
            pod = claim_pod(ctx, "gpus", ClaimRequest("gpus", "gpu.nvidia.com", mode="All"))
            started = time.monotonic()
            (outcome,) = run_campaign(ctx, [pod], timeout=120).values()
            took = time.monotonic() - started
    assert not outcome.timed_out and took < 60, took
    assert outcome.phase == "Pending" and not outcome.succeeded
    (event,) = [e for e in outcome.events if e.reason == "FailedPrepareDynamicResources"]
    assert event.message.startswith("Failed to prepare dynamic resources: prepare dynamic resources: "
                                    "NodePrepareResources failed for ResourceClaim claimer-gpus-")
    assert event.message.endswith("-gpu-3: failed to get device handle from UUID: Not Found")


class _LogReader:
    """A stand-in for Cluster.call that serves container logs and records what was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.core = self

    def read_namespaced_pod_log(self, name: str, namespace: str, *, container: str, **_: Any) -> Any:
        self.asked.append(container)
        return type("Response", (), {"data": f"{container} log".encode()})()

    def call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)


@pytest.mark.parametrize(("phase", "probe_exit", "read"), [
    ("Succeeded", 0, ["probe"]), ("Failed", 1, ["build", "probe"])])
def test_a_succeeded_init_containers_log_is_read_only_when_the_pod_did_not_succeed(
        phase: str, probe_exit: int, read: list[str]) -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns"},
           "spec": {"initContainers": [{"name": "build"}], "containers": [{"name": "probe"}]},
           "status": {"phase": phase,
                      "initContainerStatuses": [{"name": "build", "state": {"terminated": {"exitCode": 0}}}],
                      "containerStatuses": [{"name": "probe", "state": {"terminated": {"exitCode": probe_exit}}}]}}
    reader = _LogReader()
    logs, missing, _ = _read_logs(reader, pod, 1024)  # type: ignore[arg-type]
    assert reader.asked == read and sorted(logs) == read
    assert missing == ({"build": SKIPPED_INIT_LOG} if phase == "Succeeded" else {})



class _HeldStream:
    """A watch response whose events are all delivered; reading on means waiting until the server
    ends the stream (timeoutSeconds, or a bookmark about once a minute on a real kube-apiserver)."""

    def __init__(self, events: list[dict[str, Any]], waited: list[int], index: int) -> None:
        self.events, self.waited, self.index = events, waited, index

    def stream(self, _size: int) -> Iterator[bytes]:
        for event in self.events:
            yield json.dumps(event).encode() + b"\n"
        self.waited.append(self.index)

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


def test_a_pod_turning_unschedulable_mid_watch_rewatches_with_the_budgets_wake_up() -> None:
    """Once a pod turns Unschedulable, the campaign must wake at the end of its schedule budget by
    itself: the watch is re-issued with that nearer timeout, rather than read on until the next
    event or bookmark (about 60 s on a real API server, past which the pod reads as timed out)."""
    pending = {"metadata": {"name": "p", "resourceVersion": "1"}, "status": {"phase": "Pending"}}
    unschedulable = {"metadata": {"name": "p", "resourceVersion": "2"}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/2 nodes are available"}]}}
    watches: list[int] = []
    waited: list[int] = []  # the watches read on past their events

    def list_pods(namespace: str, label_selector: str, watch: bool = False, timeout_seconds: int = 0,
                  **_: Any) -> Any:
        if not watch:
            return {"items": [pending], "metadata": {"resourceVersion": "1"}}
        watches.append(timeout_seconds)
        return _HeldStream([{"type": "MODIFIED", "object": unschedulable}] if len(watches) == 1 else [], waited,
                           len(watches))

    cluster = SimpleNamespace(core=SimpleNamespace(list_namespaced_pod=list_pods),
                              retry=SimpleNamespace(request_timeout=5.0),
                              call=lambda _what, fn, *a, **k: fn(*a, **k),
                              call_json=lambda _what, fn, *a, **k: fn(*a, **k))
    follower = _Follower(["p"], {"p": 2.0}, {"p": time.monotonic() - 1.0})
    _follow(cluster, SimpleNamespace(namespace="ns"), "x=y", follower, time.monotonic() + 30)  # type: ignore[arg-type]
    assert follower.done == {"p": "Unschedulable"}
    assert watches[0] >= 29 and all(w <= 2 for w in watches[1:]) and len(watches) >= 2
    assert 1 not in waited  # the first watch was not read on, waiting for an event that may not come
