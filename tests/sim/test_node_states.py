"""Fleet states of a simulated node (issue 25): cordoned, tainted, NotReady and busy with a tenant's
GPU pods, each as a real cluster shows it through the API (spec.unschedulable, spec.taints with the
node lifecycle controller's taints, the Ready condition) and with the scheduler and kubelet behaving
as real ones do; and containers that run ``sleep``."""

from __future__ import annotations

import calendar
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from gpuconf.sim.agent_pods import Sleep, parse_sleep
from gpuconf.sim.cluster import SimulatedCluster
from gpuconf.sim.node_lifecycle import lifecycle_taints
from gpuconf.sim.printers import human_duration, node_cells
from gpuconf.sim.profile import load_profile, with_faults

from .test_agent_support import finished, pod_events, wait_for, wait_gone, wait_pod

GPU = "nvidia.com/gpu"
NOW = "2026-12-03T12:00:00Z"
UNSCHEDULABLE = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": NOW}


# --- the node lifecycle controller's taints, as decisions -----------------------------------------


def node(*, unschedulable: bool = False, ready: str | None = "True", taints: list[dict[str, Any]] | None = None,
         **conditions: str) -> dict[str, Any]:
    conds = [{"type": k, "status": v} for k, v in conditions.items()]
    if ready is not None:
        conds.append({"type": "Ready", "status": ready})
    return {"spec": {"unschedulable": unschedulable, "taints": taints or []}, "status": {"conditions": conds}}


OLD = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule", "timeAdded": "2026-01-01T00:00:00Z"}
DEDICATED = {"key": "dedicated", "value": "training", "effect": "NoSchedule"}


@pytest.mark.parametrize("before, after", [
    (node(), None),
    (node(unschedulable=True), [UNSCHEDULABLE]),
    (node(unschedulable=True, taints=[DEDICATED]), [DEDICATED, UNSCHEDULABLE]),
    (node(taints=[DEDICATED, UNSCHEDULABLE]), [DEDICATED]),
    (node(ready="False"), [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": NOW},
                           {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule", "timeAdded": NOW}]),
    (node(ready="Unknown", taints=[OLD]),
     [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": NOW},
      {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule", "timeAdded": NOW}]),
    (node(taints=[OLD, {**OLD, "effect": "NoExecute"}, DEDICATED]), [DEDICATED]),
    (node(ready=None), None),
    (node(DiskPressure="True"), [{"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule",
                                  "timeAdded": NOW}]),
], ids=["a Ready, schedulable node keeps its taints as they are",
        "a cordoned node gets node.kubernetes.io/unschedulable:NoSchedule, stamped",
        "the cordon's taint comes after an administrator's taint, which stays",
        "uncordoned, the unschedulable taint goes and the administrator's stays",
        "Ready False: not-ready NoSchedule and NoExecute",
        "Ready Unknown: unreachable NoSchedule and NoExecute, replacing not-ready",
        "Ready again: every lifecycle taint goes",
        "a node that never reported is left alone (the admission plugin's taint is not modelled)",
        "DiskPressure True: disk-pressure NoSchedule"])
def test_node_lifecycle_taints(before, after):
    assert lifecycle_taints(before, now=NOW) == after


def test_with_no_node_ready_the_controller_adds_and_keeps_no_noexecute_taint():
    """Master disruption mode: the cluster's only zone is fully disrupted."""
    unreachable = node(ready="Unknown", taints=[{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}])
    assert lifecycle_taints(unreachable, now=NOW, disrupted=True) == [
        {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule", "timeAdded": NOW}]
    assert lifecycle_taints(node(ready="False"), now=NOW, disrupted=True) == [
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule", "timeAdded": NOW}]


# --- kubectl get nodes ------------------------------------------------------------------------------


@pytest.mark.parametrize("before, status", [
    (node(), "Ready"),
    (node(unschedulable=True), "Ready,SchedulingDisabled"),
    (node(ready="False"), "NotReady"),
    (node(ready="Unknown", unschedulable=True), "NotReady,SchedulingDisabled"),
    (node(ready=None), "Unknown"),
], ids=["Ready", "cordoned", "Ready False", "Ready Unknown and cordoned", "no Ready condition yet"])
def test_kubectl_get_nodes_status_column(before, status):
    before["metadata"] = {"name": "n", "creationTimestamp": "2026-12-03T11:00:00Z",
                          "labels": {"node-role.kubernetes.io/worker": ""}}
    assert node_cells(before, now=calendar.timegm((2026, 12, 3, 12, 0, 0))) == ["n", status, "worker", "60m", ""]


@pytest.mark.parametrize("seconds, printed", [(5, "5s"), (150, "2m30s"), (600, "10m"), (4 * 3600 + 60, "4h1m"),
                                              (30 * 3600, "30h"), (3 * 86400 + 3600, "3d1h"), (100 * 86400, "100d")])
def test_ages_print_as_kubectl_prints_them(seconds, printed):
    assert human_duration(seconds) == printed


# --- sleep --------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv, expected", [
    (["sleep", "2"], Sleep(2.0)),
    (["sleep", "infinity"], Sleep(None)),
    (["/bin/sleep", "inf"], Sleep(None)),
    (["sleep", "1m", "30"], Sleep(90.0)),
    (["sleep", "0.5"], Sleep(0.5)),
    (["sh", "-c", "sleep 3600"], Sleep(3600.0)),
    (["/bin/bash", "-c", "exec sleep infinity"], Sleep(None)),
    (["sh", "-c", "sleep 1; nvidia-smi"], None),
    (["sleep"], None),
    (["sleep", "soon"], None),
    (["python", "train.py"], None),
    ([], None),
], ids=["sleep 2 runs 2 s", "sleep infinity runs until stopped", "sleep inf by path too",
        "GNU sleep sums its operands with their units", "fractions of a second",
        "a shell running only sleep sleeps", "exec sleep in a shell", "a script doing more is no plain sleep",
        "sleep without an operand is a usage error", "sleep with a bad operand is a usage error",
        "another program is no sleep", "an image's own entrypoint is no sleep"])
def test_parse_sleep(argv, expected):
    assert parse_sleep(argv) == expected


# --- the states in a running simulated cluster ---------------------------------------------------


@pytest.fixture
def sim(request: pytest.FixtureRequest) -> Iterator[tuple[SimulatedCluster, client.CoreV1Api]]:
    """healthy-h100 (two 8-GPU nodes) with the faults given as the fixture's parameter (indirect)."""
    faults = getattr(request, "param", [])
    profile = load_profile("healthy-h100")
    with SimulatedCluster(with_faults(profile, faults) if faults else profile) as cluster:
        core = client.CoreV1Api(cluster.api_client())
        core.create_namespace({"metadata": {"name": "suite"}})
        yield cluster, core


def pinned(name: str, node: str, *, gpus: int = 1, tolerations: list[dict[str, Any]] | None = None,
           command: list[str] | None = None, bind: bool = False) -> dict[str, Any]:
    """A GPU pod for ``node``: through the scheduler (nodeSelector on the hostname), or bound by nodeName."""
    container: dict[str, Any] = {"name": "main", "image": "busybox:1.36", "resources": {"limits": {GPU: str(gpus)}}}
    if command:
        container["command"] = command
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container],
                            "tolerations": tolerations or []}
    spec.update({"nodeName": node} if bind else {"nodeSelector": {"kubernetes.io/hostname": node}})
    return {"metadata": {"name": name}, "spec": spec}


def unschedulable_message(pod: Any) -> str | None:
    for c in (pod.status.conditions if pod.status else None) or []:
        if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
            return str(c.message)
    return None


def refused(core: client.CoreV1Api, name: str) -> str:
    return str(unschedulable_message(wait_pod(core, "suite", name, lambda p: unschedulable_message(p) is not None)))


def scheduled_to(core: client.CoreV1Api, name: str) -> str:
    return str(wait_pod(core, "suite", name, lambda p: bool(p.spec.node_name)).spec.node_name)


def wait_node(core: client.CoreV1Api, name: str, until: Any, timeout: float = 10.0) -> Any:
    return wait_for(core.list_node, until, field_selector=f"metadata.name={name}", timeout=timeout)


def taints(n: Any) -> list[tuple[str, str | None, str]]:
    return sorted((t.key, t.value, t.effect) for t in n.spec.taints or [])


def ready(n: Any) -> Any:
    return next(c for c in n.status.conditions if c.type == "Ready")


def age_s(stamp: Any) -> float:
    return time.time() - calendar.timegm(stamp.utctimetuple())


@pytest.mark.parametrize("sim", [[{"id": "node-cordoned", "node": 0}]], indirect=True, ids=["healthy-h100"])
def test_a_cordoned_node_refuses_pods_that_do_not_tolerate_unschedulable(sim):
    _, core = sim
    n = wait_node(core, "h100-0", lambda n: taints(n))
    assert n.spec.unschedulable is True
    assert taints(n) == [("node.kubernetes.io/unschedulable", None, "NoSchedule")]
    assert n.spec.taints[0].time_added is not None and ready(n).status == "True"
    core.create_namespaced_pod("suite", pinned("probe", "h100-0"))
    assert refused(core, "probe").startswith("0/2 nodes are available: 1 node(s) didn't match Pod's node "
                                             "affinity/selector, 1 node(s) were unschedulable. ")
    core.create_namespaced_pod("suite", pinned("daemon", "h100-0", tolerations=[
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]))
    assert scheduled_to(core, "daemon") == "h100-0"


@pytest.mark.parametrize("sim", [[{"id": "node-tainted", "node": 0}]], indirect=True, ids=["healthy-h100"])
def test_a_tainted_node_takes_only_pods_that_tolerate_its_taint(sim):
    _, core = sim
    n = core.read_node("h100-0")
    assert taints(n) == [("dedicated", "training", "NoSchedule")] and not n.spec.unschedulable
    assert taints(core.read_node("h100-1")) == []
    core.create_namespaced_pod("suite", pinned("probe", "h100-0"))
    assert refused(core, "probe").startswith("0/2 nodes are available: 1 node(s) didn't match Pod's node "
                                             "affinity/selector, 1 node(s) had untolerated taint(s).")
    core.create_namespaced_pod("suite", pinned("team", "h100-0", tolerations=[
        {"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"}]))
    assert scheduled_to(core, "team") == "h100-0"
    assert wait_pod(core, "suite", "team", finished).status.phase == "Succeeded"


@pytest.mark.parametrize("sim", [[{"id": "node-not-ready", "node": 0}]], indirect=True, ids=["healthy-h100"])
def test_a_node_whose_kubelet_stopped_posting_is_unreachable_and_runs_nothing(sim):
    cluster, core = sim
    n = wait_node(core, "h100-0", lambda n: len(taints(n)) == 2)
    assert taints(n) == [("node.kubernetes.io/unreachable", None, "NoExecute"),
                         ("node.kubernetes.io/unreachable", None, "NoSchedule")]
    assert {(c.type, c.status, c.reason, c.message) for c in n.status.conditions} == {
        (kind, "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
        for kind in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")}
    assert 595 <= age_s(ready(n).last_transition_time) <= 620
    lease = client.CoordinationV1Api(cluster.api_client()).read_namespaced_lease("h100-0", "kube-node-lease")
    assert age_s(lease.spec.renew_time) >= 595
    core.create_namespaced_pod("suite", pinned("probe", "h100-0"))
    assert "1 node(s) had untolerated taint(s)" in refused(core, "probe")
    core.create_namespaced_pod("suite", pinned("bound", "h100-0", bind=True))
    time.sleep(2.5)  # what a dead kubelet does in that time: nothing
    pod = core.read_namespaced_pod("bound", "suite")
    assert (pod.status.phase, pod.status.container_statuses) == ("Pending", None)
    assert pod_events(core, "suite", "bound") == []
    core.delete_namespaced_pod("bound", "suite")
    time.sleep(1.0)
    assert core.read_namespaced_pod("bound", "suite").metadata.deletion_timestamp is not None  # Terminating
    core.delete_namespaced_pod("bound", "suite", grace_period_seconds=0)  # kubectl delete --force
    wait_gone(core, "suite", "bound")


@pytest.mark.parametrize("sim", [[{"id": "node-not-ready", "node": "all"}]], indirect=True, ids=["healthy-h100"])
def test_with_every_node_unreachable_the_nodes_get_no_noexecute_taint(sim):
    _, core = sim
    for name in ("h100-0", "h100-1"):
        wait_node(core, name, lambda n: taints(n) == [("node.kubernetes.io/unreachable", None, "NoSchedule")])
    time.sleep(1.0)
    assert [taints(n) for n in core.list_node().items] == [[("node.kubernetes.io/unreachable", None, "NoSchedule")]] * 2


@pytest.mark.parametrize("sim", [[{"id": "node-not-ready", "node": 0, "status": "False", "since_s": 120}]],
                         indirect=True, ids=["healthy-h100"])
def test_a_node_whose_pod_network_is_down_is_not_ready_and_starts_nothing(sim):
    _, core = sim
    n = wait_node(core, "h100-0", lambda n: len(taints(n)) == 2)
    assert taints(n) == [("node.kubernetes.io/not-ready", None, "NoExecute"),
                         ("node.kubernetes.io/not-ready", None, "NoSchedule")]
    condition = ready(n)
    assert (condition.status, condition.reason) == ("False", "KubeletNotReady")
    assert "cni plugin not initialized" in condition.message and 115 <= age_s(condition.last_transition_time) <= 140
    core.create_namespaced_pod("suite", pinned("bound", "h100-0", bind=True))
    wait_for(core.list_namespaced_event, lambda e: e.reason == "NetworkNotReady", "suite",
             field_selector="involvedObject.name=bound")
    ((kind, reason, _, message),) = pod_events(core, "suite", "bound")
    assert (kind, reason) == ("Warning", "NetworkNotReady") and message.startswith("network is not ready: ")
    assert core.read_namespaced_pod("bound", "suite").status.phase == "Pending"


@pytest.mark.parametrize("sim", [[{"id": "gpus-busy", "node": 0}]], indirect=True, ids=["healthy-h100"])
def test_a_tenant_pod_holding_every_gpu_leaves_none_for_anyone_else(sim):
    _, core = sim
    tenant = wait_pod(core, "tenant-a", "train-h100-0-0", lambda p: p.status.phase == "Running")
    assert tenant.spec.node_name == "h100-0" and tenant.spec.containers[0].command == ["sleep", "infinity"]
    assert tenant.spec.containers[0].resources.limits == {GPU: "8"}
    assert tenant.metadata.labels["training.kubeflow.org/job-name"] == "train-h100-0"
    assert core.read_node("h100-0").status.allocatable[GPU] == "8"  # the node still advertises them all
    core.create_namespaced_pod("suite", pinned("probe", "h100-0", gpus=8))
    assert refused(core, "probe").startswith("0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) "
                                             "didn't match Pod's node affinity/selector.")
    time.sleep(1.0)
    assert core.read_namespaced_pod("train-h100-0-0", "tenant-a").status.phase == "Running"


@pytest.mark.parametrize("sim", [[{"id": "gpus-busy", "node": 0, "gpus": 3, "duration_s": 2}]], indirect=True,
                         ids=["healthy-h100"])
def test_a_tenant_pod_that_sleeps_a_while_frees_its_gpus_when_it_ends(sim):
    _, core = sim
    began = time.monotonic()
    wait_pod(core, "tenant-a", "train-h100-0-0", lambda p: p.status.phase == "Running")
    core.create_namespaced_pod("suite", pinned("five", "h100-0", gpus=5))
    assert scheduled_to(core, "five") == "h100-0"  # 8 - 3 left
    core.create_namespaced_pod("suite", pinned("eight", "h100-0", gpus=8))
    assert "Insufficient nvidia.com/gpu" in refused(core, "eight")
    done = wait_pod(core, "tenant-a", "train-h100-0-0", finished)
    assert done.status.phase == "Succeeded" and time.monotonic() - began >= 1.5
    assert done.status.container_statuses[0].state.terminated.exit_code == 0
    wait_pod(core, "suite", "five", finished)
    assert scheduled_to(core, "eight") == "h100-0"  # a retry once the GPUs are free


def test_sleep_2_runs_about_two_seconds_and_sleep_infinity_until_deleted(sim):
    _, core = sim
    began = time.monotonic()
    core.create_namespaced_pod("suite", pinned("short", "h100-0", command=["sleep", "2"], bind=True))
    core.create_namespaced_pod("suite", pinned("forever", "h100-1", command=["sh", "-c", "sleep infinity"], bind=True))
    running = wait_pod(core, "suite", "short", lambda p: p.status.phase == "Running")
    assert running.status.container_statuses[0].state.running is not None
    done = wait_pod(core, "suite", "short", finished)
    elapsed = time.monotonic() - began
    assert done.status.phase == "Succeeded" and 1.8 <= elapsed <= 6.0, elapsed
    terminated = done.status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (0, "Completed")
    assert core.read_namespaced_pod("forever", "suite").status.phase == "Running"
    core.delete_namespaced_pod("forever", "suite")
    wait_gone(core, "suite", "forever")
