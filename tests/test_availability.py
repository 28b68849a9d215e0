"""A GPU node's availability to the run's probe pods (gpuconf/nodes/availability.py): the states a
real fleet's nodes are in, judged before anything is launched, and read back from the scheduler's
words when they arise later; the node view's requests refuse a node that takes no probe, and offer
only the GPUs other pods leave free."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from gpuconf.cluster.inventory import build_inventory
from gpuconf.nodes import (
    BUSY,
    CORDONED,
    NOT_READY,
    TAINTED,
    NodeView,
    TolerationError,
    Why,
    build_views,
    gpu_holders,
    parse_toleration,
    placement_blocker,
)
from gpuconf.nodes.availability import availability, tolerates
from gpuconf.probe_pods import DEFAULT_TOLERATIONS
from gpuconf.verdict import checks

NOW = datetime(2026, 12, 3, 17, 0, tzinfo=UTC)


def node(name: str = "h100-1", *, ready: str | None = "True", unschedulable: bool = False,
         taints: list[dict[str, str]] | None = None, gpus: int = 8,
         allocatable: int | None = None) -> dict[str, object]:
    conditions = [] if ready is None else [{"type": "Ready", "status": ready, "reason": "KubeletNotReady" if ready !=
                                            "True" else "KubeletReady", "message": "PLEG is not healthy" if ready !=
                                            "True" else "", "lastTransitionTime": "2026-12-03T16:42:00Z"}]
    return {"metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true"}},
            "spec": {"unschedulable": unschedulable, "taints": taints or []},
            "status": {"capacity": {"nvidia.com/gpu": str(gpus)},
                       "allocatable": {"nvidia.com/gpu": str(gpus if allocatable is None else allocatable)},
                       "conditions": conditions}}


def gpu_node(obj: dict[str, object]):  # type: ignore[no-untyped-def]
    return build_inventory([obj], [], [], [], None).gpu_nodes[0]


def pod(name: str, node_name: str | None, gpus: int, *, namespace: str = "tenant-a", phase: str = "Running",
        resource: str = "nvidia.com/gpu") -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": namespace},
            "spec": {"nodeName": node_name,
                     "containers": [{"name": "main", "resources": {"limits": {resource: gpus}}}]},
            "status": {"phase": phase}}


# --- --tolerate -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("given", "toleration"), [
    ("dedicated=training:NoSchedule", {"key": "dedicated", "operator": "Equal", "value": "training",
                                       "effect": "NoSchedule"}),
    ("dedicated:NoExecute", {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}),
    ("dedicated", {"key": "dedicated", "operator": "Exists"}),
    ("example.com/pool=a100", {"key": "example.com/pool", "operator": "Equal", "value": "a100"}),
    ("dedicated=", {"key": "dedicated", "operator": "Equal", "value": ""}),
])
def test_tolerate_takes_kubectl_taint_syntax(given: str, toleration: dict[str, str]) -> None:
    assert parse_toleration(given) == toleration


@pytest.mark.parametrize(("given", "says"), [
    ("", "is not a qualified name"),
    ("=training:NoSchedule", "is not a qualified name"),
    ("dedicated=training:NoSchedul", "'NoSchedul' is not one of NoSchedule, PreferNoSchedule, NoExecute"),
    ("bad key=x", "is not a qualified name"),
    ("dedicated=has space", "is not a label value"),
])
def test_a_bad_tolerate_is_one_line(given: str, says: str) -> None:
    with pytest.raises(TolerationError, match=says):
        parse_toleration(given)


def test_toleration_semantics_are_the_schedulers() -> None:
    taint = {"key": "dedicated", "value": "training", "effect": "NoSchedule"}
    assert tolerates(parse_toleration("dedicated=training:NoSchedule"), taint)
    assert tolerates(parse_toleration("dedicated"), taint)  # Exists, every effect
    assert not tolerates(parse_toleration("dedicated=inference"), taint)
    assert not tolerates(parse_toleration("dedicated=training:NoExecute"), taint)
    assert tolerates({"operator": "Exists"}, taint)  # empty key with Exists: everything


# --- availability, before launch --------------------------------------------------------------------

def test_a_ready_idle_schedulable_node_takes_probes() -> None:
    found = availability(gpu_node(node()), DEFAULT_TOLERATIONS, now=NOW)
    assert found.state is None and not found.blocks_probes and found.reason == ""


def test_not_ready_comes_first_and_says_since_when() -> None:
    found = availability(gpu_node(node(ready="False", unschedulable=True)), DEFAULT_TOLERATIONS, now=NOW)
    assert found.state == NOT_READY and found.blocks_probes
    assert found.reason == ("h100-1 is NotReady (Ready=False) since 2026-12-03T16:42:00Z (18 min): KubeletNotReady; "
                            "PLEG is not healthy: no probe can run there until it is Ready again")
    unknown = availability(gpu_node(node(ready="Unknown")), DEFAULT_TOLERATIONS, now=NOW)
    assert "Ready=Unknown: the kubelet stopped posting status" in unknown.reason
    assert availability(gpu_node(node(ready=None)), DEFAULT_TOLERATIONS).state == NOT_READY


def test_cordoned_unless_the_probes_tolerate_the_unschedulable_taint() -> None:
    cordoned = gpu_node(node(unschedulable=True, taints=[
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]))
    found = availability(cordoned, DEFAULT_TOLERATIONS)
    assert found.state == CORDONED
    assert found.reason.startswith("h100-1 is cordoned (spec.unschedulable)") and "--include-cordoned" in found.reason
    included = [*DEFAULT_TOLERATIONS, {"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                                       "effect": "NoSchedule"}]
    assert availability(cordoned, included).state is None


def test_an_untolerated_taint_is_named_with_the_option_that_tolerates_it() -> None:
    tainted = gpu_node(node(taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"},
                                    {"key": "example.com/maintenance", "effect": "PreferNoSchedule"},
                                    {"key": "dedicated", "value": "training", "effect": "NoSchedule"}]))
    found = availability(tainted, DEFAULT_TOLERATIONS)
    assert found.state == TAINTED
    assert found.reason == ("h100-1 has the taint dedicated=training:NoSchedule, which the probe pods do not "
                            "tolerate; give --tolerate dedicated=training:NoSchedule to test it")
    assert availability(tainted, [*DEFAULT_TOLERATIONS, parse_toleration("dedicated=training:NoSchedule")]).state \
        is None


def test_gpus_held_by_other_pods_make_the_node_busy_and_name_the_holders() -> None:
    pods = [pod("train-0", "h100-1", 8), pod("done", "h100-1", 8, phase="Succeeded"), pod("cpu", "h100-1", 0),
            pod("mine", "h100-1", 1, namespace="gpuconf-run"), pod("pending", None, 8)]
    holders = gpu_holders(pods, exclude_namespace="gpuconf-run")
    assert {k: [str(h) for h in v] for k, v in holders.items()} == {
        "h100-1": ["tenant-a/train-0 holds 8 nvidia.com/gpu"]}
    found = availability(gpu_node(node()), DEFAULT_TOLERATIONS, holders["h100-1"])
    assert found.state == BUSY and not found.blocks_probes
    assert found.reason == "h100-1 is busy: 8 GPU(s) held by 1 other pod(s): tenant-a/train-0 holds 8 nvidia.com/gpu"


def test_an_untolerated_no_execute_taint_makes_the_node_unavailable() -> None:
    """NoExecute keeps pods off as NoSchedule does (and evicts those already there): the scheduler's
    TaintToleration filter refuses a probe that does not tolerate it."""
    tainted = gpu_node(node(taints=[{"key": "example.com/drain", "value": "now", "effect": "NoExecute"}]))
    found = availability(tainted, DEFAULT_TOLERATIONS)
    assert found.state == TAINTED and found.blocks_probes
    assert found.reason == ("h100-1 has the taint example.com/drain=now:NoExecute, which the probe pods do not "
                            "tolerate; give --tolerate example.com/drain=now:NoExecute to test it")
    assert availability(tainted, [*DEFAULT_TOLERATIONS, parse_toleration("example.com/drain:NoExecute")]).state is None
    # only a NoSchedule toleration of the same key does not tolerate the NoExecute taint
    assert availability(tainted, [*DEFAULT_TOLERATIONS, parse_toleration("example.com/drain:NoSchedule")]).state \
        == TAINTED


def test_a_pods_gpu_init_containers_hold_gpus() -> None:
    """The scheduler reserves a pod's effective request on its node, whatever the phase: the larger of
    its app containers' sum (sidecar init containers included) and its largest init container. A
    Pending pod whose init container asks for GPUs holds them, its app containers asking for none."""
    def with_init(name: str, phase: str | None, app: int = 0, sidecar: int = 0) -> dict[str, object]:
        p = pod(name, "h100-1", app, phase=phase or "Running")
        p["spec"]["initContainers"] = [  # type: ignore[index]
            {"name": "warmup", "resources": {"limits": {"nvidia.com/gpu": 3}}},
            {"name": "proxy", "restartPolicy": "Always", "resources": {"limits": {"nvidia.com/gpu": sidecar}}},
            {"name": "fetch", "resources": {"limits": {"nvidia.com/gpu": 2}}}]
        if phase is None:
            p["status"] = {}
        return p
    holders = gpu_holders([with_init("starting", "Pending"), with_init("unphased", None),
                           with_init("running", "Running", app=2), with_init("bigger", "Pending", app=4),
                           with_init("sidecar", "Pending", app=1, sidecar=2), with_init("both", "Running", app=4,
                                                                                     sidecar=2)])
    assert [str(h) for h in holders["h100-1"]] == ["tenant-a/starting holds 3 nvidia.com/gpu",
                                                   "tenant-a/unphased holds 3 nvidia.com/gpu",
                                                   "tenant-a/running holds 3 nvidia.com/gpu",
                                                   "tenant-a/bigger holds 4 nvidia.com/gpu",
                                                   "tenant-a/sidecar holds 4 nvidia.com/gpu",  # fetch beside proxy
                                                   "tenant-a/both holds 6 nvidia.com/gpu"]  # app and sidecar
    found = availability(gpu_node(node()), DEFAULT_TOLERATIONS, holders["h100-1"][:2])
    assert found.state == BUSY
    assert found.reason == ("h100-1 is busy: 6 GPU(s) held by 2 other pod(s): tenant-a/starting holds 3 "
                            "nvidia.com/gpu, tenant-a/unphased holds 3 nvidia.com/gpu")


# --- the node view's requests ----------------------------------------------------------------------

def view(obj: dict[str, object], *, tolerations=DEFAULT_TOLERATIONS, pods=()) -> NodeView:  # type: ignore[no-untyped-def]
    inv = build_inventory([obj], [{"metadata": {"name": "nvidia"}, "handler": "nvidia"}], [], [], None)
    return build_views(inv, tolerations=tolerations, holders=gpu_holders(pods), now=NOW)["h100-1"]


def test_a_node_that_takes_no_probe_refuses_every_request_with_its_one_reason() -> None:
    cordoned = view(node(unschedulable=True))
    for ask in (cordoned.whole_node(), cordoned.one_gpu(), cordoned.gpus(2), cordoned.exclusive(min_gpus=2),
                cordoned.mig_instances("1g.10gb")):
        assert not ask and ask.why is Why.BLOCKED and ask.reason == cordoned.availability.reason
    assert cordoned.blocked() is not None and view(node()).blocked() is None


def test_a_busy_node_refuses_whole_node_asks_and_offers_the_free_gpus() -> None:
    half = view(node(), pods=[pod("train-0", "h100-1", 6)])
    whole = half.whole_node()
    assert not whole and whole.why is Why.BUSY
    assert whole.reason == ("h100-1 is busy: 6 GPU(s) held by 1 other pod(s): tenant-a/train-0 holds 6 "
                            "nvidia.com/gpu; the whole-node probe needs every GPU of h100-1")
    nccl = half.exclusive(min_gpus=2, check="an all-GPU NCCL job")
    assert not nccl and nccl.why is Why.BUSY and nccl.reason.endswith("an all-GPU NCCL job needs every GPU of h100-1")
    two = half.gpus(2)
    assert two and two.count == 2 and half.offered(two) == 2  # the free ones
    three = half.gpus(3, check="the isolation pods")
    assert not three and three.why is Why.BUSY and "2 nvidia.com/gpu free, and the isolation pods asks for 3" in \
        three.reason
    idle = view(node())
    assert idle.whole_node() and idle.offered(idle.one_gpu()) == 8  # type: ignore[arg-type]


def test_an_unknown_condition_is_not_ready_in_the_view() -> None:
    assert view(node(ready="Unknown")).availability.state == NOT_READY


def test_the_view_of_tests_is_available() -> None:
    plain = NodeView.of("n", capacity={"nvidia.com/gpu": "1"}, allocatable={"nvidia.com/gpu": "1"})
    assert plain.availability.state is None and plain.one_gpu()
    assert replace(plain, availability=availability(gpu_node(node("n", unschedulable=True)), ())).one_gpu().why \
        is Why.BLOCKED  # type: ignore[union-attr]


# --- the scheduler's words, after launch -------------------------------------------------------------

#: FitError messages as kube-scheduler v1.36.2 writes them for a pod pinned to one node of two (the
#: taint wording as the real-control-plane tier saw it: tests/realk8s/test_node_states.py).
CORDONED_MESSAGE = ("0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) were "
                    "unschedulable. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
TAINT_MESSAGE = ("0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had "
                 "untolerated taint(s). preemption: 0/2 nodes are available: 2 Preemption is not "
                 "helpful for scheduling.")
NOT_READY_MESSAGE = ("0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had "
                     "untolerated taint(s). preemption: 0/2 nodes are available: 2 "
                     "Preemption is not helpful for scheduling.")
BUSY_MESSAGE = ("0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't match Pod's node "
                "affinity/selector. preemption: 0/2 nodes are available: 1 No preemption victims found for incoming "
                "pod, 1 Preemption is not helpful for scheduling.")


def test_the_refusal_is_judged_from_the_node_as_it_is_now() -> None:
    cordoned = availability(gpu_node(node(unschedulable=True)), DEFAULT_TOLERATIONS)
    state, reason = placement_blocker("h100-1", CORDONED_MESSAGE, cordoned)  # type: ignore[misc]
    assert state == CORDONED and reason.startswith("the probe pod stayed Pending on h100-1, which changed during the "
                                                   "run: h100-1 is cordoned (spec.unschedulable)")
    assert reason.endswith(f"(scheduler: {CORDONED_MESSAGE})")
    tainted = availability(gpu_node(node(taints=[{"key": "dedicated", "value": "training", "effect": "NoSchedule"}])),
                           DEFAULT_TOLERATIONS)
    assert placement_blocker("h100-1", TAINT_MESSAGE, tainted)[0] == TAINTED  # type: ignore[index]
    not_ready = availability(gpu_node(node(ready="Unknown")), DEFAULT_TOLERATIONS, now=NOW)
    assert placement_blocker("h100-1", NOT_READY_MESSAGE, not_ready)[0] == NOT_READY  # type: ignore[index]
    busy = availability(gpu_node(node()), DEFAULT_TOLERATIONS, gpu_holders([pod("train-0", "h100-1", 8)])["h100-1"])
    state, reason = placement_blocker("h100-1", BUSY_MESSAGE, busy)  # type: ignore[misc]
    assert state == BUSY and "tenant-a/train-0 holds 8 nvidia.com/gpu" in reason


def test_another_nodes_cordon_in_the_message_is_not_this_nodes_state() -> None:
    """The scheduler's message sums every node: a pod pinned to an idle, schedulable node waiting for
    its GPUs, beside a cordoned node, reads "1 node(s) were unschedulable"; the node itself is fine."""
    idle = availability(gpu_node(node()), DEFAULT_TOLERATIONS)
    beside_a_cordon = "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) were unschedulable."
    assert placement_blocker("h100-1", beside_a_cordon, idle) is None


def test_a_shortage_without_outside_holders_or_another_cause_is_the_checks_business() -> None:
    idle = availability(gpu_node(node()), DEFAULT_TOLERATIONS)
    assert placement_blocker("h100-1", BUSY_MESSAGE, idle) is None  # the run's own pods compete
    busy = availability(gpu_node(node()), DEFAULT_TOLERATIONS, gpu_holders([pod("train-0", "h100-1", 2)])["h100-1"])
    assert placement_blocker("h100-1", "0/2 nodes are available: 1 cannot allocate all claims, 1 node(s) didn't "
                             "match Pod's node affinity/selector.", busy) is None  # refused for another reason


# --- what each check reads -------------------------------------------------------------------------

def test_every_check_says_what_it_reads() -> None:
    reads = {c.id: c.reads for c in checks().values()}
    assert set(reads.values()) == {"probe", "node", "api"}
    assert reads["smoke.vector-add-every-gpu"] == "probe" and reads["inventory.gpu-resource-advertised"] == "api"
    assert reads["health.no-critical-xid"] == "node"
