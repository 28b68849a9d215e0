"""The exact words and edges of gpuconf/nodes/availability.py (the mutants scripts/mutation-score
makes of it): every state's one line, the holders each state carries, the GPU resources counted,
the pods skipped, the times and the toleration syntax's limits. tests/test_availability.py holds the
behaviour; these pin what a reader of the coverage line and a NOT TESTED reason is told."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from test_availability import gpu_node, node, pod

from gpuconf.nodes import CORDONED, NOT_READY, TAINTED, TolerationError, gpu_holders, parse_toleration
from gpuconf.nodes.availability import GpuHolder, availability, tolerates
from gpuconf.probe_pods import DEFAULT_TOLERATIONS

HOLDERS = (GpuHolder("tenant-a", "train-0", 8),)


def not_ready_since(since: str | None, now: datetime | None = datetime(2026, 12, 3, 17, 0, tzinfo=UTC)) -> str:
    obj = node(ready="False")
    obj["status"]["conditions"][0]["lastTransitionTime"] = since  # type: ignore[index]
    return availability(gpu_node(obj), DEFAULT_TOLERATIONS, now=now).reason


@pytest.mark.parametrize(("since", "now", "says"), [
    ("2026-12-03T17:00:00Z", "now", " since 2026-12-03T17:00:00Z (0 min)"),
    ("2026-12-03T16:42:30Z", "now", " since 2026-12-03T16:42:30Z (17 min)"),
    ("2026-12-03T15:01:00Z", "now", " since 2026-12-03T15:01:00Z (119 min)"),
    ("2026-12-03T15:00:00Z", "now", " since 2026-12-03T15:00:00Z (2 h 0 min)"),
    ("2026-12-03T13:59:00Z", "now", " since 2026-12-03T13:59:00Z (3 h 1 min)"),
    ("2026-12-03T17:05:00Z", "now", " since 2026-12-03T17:05:00Z (0 min)"),  # a clock ahead of ours
    ("yesterday", "now", " since yesterday"),
    ("2026-12-03T16:42:00Z", None, " since 2026-12-03T16:42:00Z"),
    (None, "now", ""),
], ids=["just now", "minutes floored", "under two hours", "two hours", "hours and minutes", "future",
        "unreadable", "no clock", "no time"])
def test_not_ready_says_since_when_in_minutes_then_hours(since: str | None, now: str | None, says: str) -> None:
    kw = {} if now else {"now": None}
    assert not_ready_since(since, **kw) == (f"h100-1 is NotReady (Ready=False){says}: KubeletNotReady; PLEG is not "
                                            "healthy: no probe can run there until it is Ready again")


def test_each_ready_state_has_its_words_and_every_blocked_state_keeps_the_holders() -> None:
    never = availability(gpu_node(node(ready=None)), DEFAULT_TOLERATIONS, HOLDERS)
    assert (never.state, never.holders) == (NOT_READY, HOLDERS)
    assert never.reason == "h100-1 is NotReady (never reported): no probe can run there until it is Ready again"
    unknown = node(ready="Unknown")
    unknown["status"]["conditions"][0].update(reason="", message="", lastTransitionTime=None)  # type: ignore[index]
    assert availability(gpu_node(unknown), DEFAULT_TOLERATIONS).reason == (
        "h100-1 is NotReady (Ready=Unknown: the kubelet stopped posting status): no probe can run there until it is "
        "Ready again")
    odd = node(ready="Maybe")
    assert availability(gpu_node(odd), DEFAULT_TOLERATIONS).reason.startswith("h100-1 is NotReady (Maybe) since ")
    cordoned = availability(gpu_node(node(unschedulable=True)), DEFAULT_TOLERATIONS, HOLDERS)
    assert (cordoned.state, cordoned.holders) == (CORDONED, HOLDERS)
    assert cordoned.reason == ("h100-1 is cordoned (spec.unschedulable): the scheduler places no probe there; give "
                               "--include-cordoned to test it before it is uncordoned")
    tainted = availability(gpu_node(node(taints=[{"key": "maintenance", "effect": "NoExecute"}])), DEFAULT_TOLERATIONS,
                           HOLDERS)
    assert (tainted.state, tainted.holders) == (TAINTED, HOLDERS)
    assert tainted.reason == ("h100-1 has the taint maintenance:NoExecute, which the probe pods do not tolerate; give "
                              "--tolerate maintenance:NoExecute to test it")  # no value: no "="
    free = availability(gpu_node(node()), DEFAULT_TOLERATIONS)
    assert (free.state, free.reason, free.holders) == (None, "", ())


def test_holders_are_named_three_at_a_time() -> None:
    pods = [pod(f"p{i}", "h100-1", 1) for i in range(4)]
    four = availability(gpu_node(node()), DEFAULT_TOLERATIONS, gpu_holders(pods)["h100-1"])
    assert four.reason == ("h100-1 is busy: 4 GPU(s) held by 4 other pod(s): tenant-a/p0 holds 1 nvidia.com/gpu, "
                           "tenant-a/p1 holds 1 nvidia.com/gpu, tenant-a/p2 holds 1 nvidia.com/gpu and 1 more pod(s)")
    three = availability(gpu_node(node()), DEFAULT_TOLERATIONS, gpu_holders(pods[:3])["h100-1"])
    assert three.holders_text == ("tenant-a/p0 holds 1 nvidia.com/gpu, tenant-a/p1 holds 1 nvidia.com/gpu, "
                                  "tenant-a/p2 holds 1 nvidia.com/gpu")


def test_every_unfinished_gpu_pod_is_read_whatever_comes_before_it() -> None:
    """A pod that is not bound, a finished one or one of the run's own namespace is skipped, not the end
    of the list; MIG resources are GPUs; one GPU is a holder; the same resource of two containers sums."""
    bare = {"metadata": {}, "spec": {"nodeName": "h100-1", "containers": [
        {"name": "a", "resources": {"limits": {"nvidia.com/gpu": 1}}},
        {"name": "b", "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "4"}}}]}, "status": {"phase": "Running"}}
    pods = [pod("unbound", None, 8), pod("done", "h100-1", 8, phase="Succeeded"),
            pod("crashed", "h100-1", 8, phase="Failed"), pod("mine", "h100-1", 1, namespace="gpuconf-run"),
            pod("mig", "h100-1", 2, resource="nvidia.com/mig-1g.10gb"), bare,
            pod("other", "h100-1", 3, resource="example.com/fpga")]
    holders = gpu_holders(pods, exclude_namespace="gpuconf-run")
    assert [(h.namespace, h.name, h.gpus, h.resource) for h in holders["h100-1"]] == [
        ("tenant-a", "mig", 2, "nvidia.com/mig-1g.10gb"), ("", "", 3, "nvidia.com/gpu")]


def test_a_taint_key_may_be_253_characters_and_no_more() -> None:
    prefix = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 57])  # 249 characters
    assert parse_toleration(f"{prefix}/abc")["key"] == f"{prefix}/abc"  # 253
    with pytest.raises(TolerationError) as err:
        parse_toleration(f"{prefix}/abcd")
    assert str(err.value) == (f"'{prefix}/abcd': the taint key '{prefix}/abcd' is not a qualified name "
                              "(KEY[=VALUE][:EFFECT], as kubectl taint writes it: dedicated=training:NoSchedule)")


def test_a_toleration_without_operator_is_equal_and_a_missing_value_is_empty() -> None:
    taint = {"key": "dedicated", "effect": "NoSchedule"}
    assert tolerates({"key": "dedicated"}, taint)  # operator Equal, value "" on both sides
    assert tolerates({"key": "dedicated", "value": None}, {**taint, "value": ""})
    assert not tolerates({"key": "dedicated"}, {**taint, "value": "training"})
    assert tolerates({"key": "dedicated", "value": "training"}, {**taint, "value": "training"})
    assert not tolerates({"key": "dedicated", "operator": "Bogus"}, taint)
