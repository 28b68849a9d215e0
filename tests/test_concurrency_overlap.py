"""Overlap by construction: the pods of isolation.concurrent-pods-disjoint and
sharing.oversubscription-runs hold their GPUs until their probes have seen each other hold theirs
(the cuda-probe's --rendezvous). The checks read the overlap from the probes' documents: met is a
proven overlap, named with the milliseconds measured; not met is NOT TESTED (could not run) with the
probes' reason; pod times only where the probes ran no rendezvous. Pods that were not shown to hold
their GPUs at the same time never pass (audit 2026-12-07, findings 10 and 11)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest
from serving import pytest_subprocess

from gpuconf.checks.isolation import (
    CONCURRENT_ROLES,
    Sighting,
    evaluate_concurrent_pods_disjoint,
    plan_node,
    rendezvous_overlap,
)
from gpuconf.checks.sharing import Run, evaluate_oversubscription_runs
from gpuconf.compat.versions import parse_cuda
from gpuconf.outcomes import COULD_NOT_RUN
from gpuconf.probe_pods import (
    RENDEZVOUS_LABEL,
    make_cuda_probe_pod,
    make_rendezvous_service,
    rendezvous_group,
    rendezvous_group_name,
)
from gpuconf.probes.cuda import parse_cuda_probe
from gpuconf.sim.emulate import Visible, cuda_probe_run
from gpuconf.sim.probe_meet import Meetings, Outcome, Request
from gpuconf.sim.profile import SimNode, expand, load_profile
from gpuconf.verdict import Outcome as Verdict

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
NS = "ns"
GROUP = "iso-together-abc"
SERVICE = {"spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {RENDEZVOUS_LABEL: GROUP}}}


def node(profile: str = "healthy-h100", name: str = "h100-0") -> SimNode:
    return expand(load_profile(profile)).node(name)


def meet(n: SimNode, gpus: Sequence[int], *, arrive: Sequence[float] | None = None, blocked: bool = False,
         at: float = 200.0) -> list[Sighting]:
    """The probes of one group on ``n``, probe i given GPU gpus[i], each naming every other, arriving at
    ``arrive`` (default: together); what each printed by ``at`` (real seconds)."""
    meetings = Meetings(speed=10_000.0, work_ms=3000.0, floor_seconds=15.0)
    hosts = [f"p{i}" for i in range(len(gpus))]
    tickets = []
    for i, (host, gpu) in enumerate(zip(hosts, gpus, strict=True)):
        uuid = n.gpus[gpu].uuid
        code, out = cuda_probe_run(n, visible=[Visible(n.gpus[gpu])], image_cuda=parse_cuda("13.0.2"),
                                   env={"NVIDIA_VISIBLE_DEVICES": uuid}, compat=True,
                                   started_at="2026-12-08T00:00:00.000Z", hostname=host)
        peers = tuple(f"{h}.{GROUP}.{NS}.svc" for h in hosts if h != host)
        tickets.append(meetings.join(Request(peers, 7171, 90.0), namespace=NS, pod=f"pod-{host}", hostname=host,
                                     subdomain=GROUP, labels={RENDEZVOUS_LABEL: GROUP}, node=n.name,
                                     blocked=blocked, code=code, output=out,
                                     now=100.0 + (arrive[i] if arrive else 0.0)))
    seen = []
    for host, t in zip(hosts, tickets, strict=True):
        done = meetings.poll(t, at, lambda ns, name: SERVICE if (ns, name) == (NS, GROUP) else None)
        assert isinstance(done, Outcome), done
        seen.append(Sighting(f"pod {host}", parse_cuda_probe(done.output, exit_code=done.code)))
    return seen


def without_rendezvous(s: Sighting) -> Sighting:
    assert s.report is not None
    doc = {k: v for k, v in s.report.raw.items() if k != "rendezvous"}
    return Sighting(s.where, parse_cuda_probe(json.dumps(doc)))


# -------------------------------------------------------------------------------------------------
# isolation.concurrent-pods-disjoint


def test_two_pods_that_met_on_different_gpus_pass_naming_the_overlap_measured():
    n = node()
    a, b = meet(n, [0, 1], arrive=[0.0, 0.5])
    v = evaluate_concurrent_pods_disjoint(n.name, a, b, allocatable=8)
    assert v.outcome is Verdict.PASS, v.message()
    assert v.summary == (f"two pods holding one GPU each at the same time (an overlap of 3100 ms measured by their "
                         f"probes' rendezvous) see different GPUs: {n.gpus[0].uuid} and {n.gpus[1].uuid}")
    assert v.evidence[2] == (f"pod p0: rendezvous met, overlap 3100 ms after 600 ms of at most 90 s; "
                             f"p1.{GROUP}.{NS}.svc (p1:7171) holding {n.gpus[1].uuid}")


def test_two_pods_that_met_on_the_same_gpu_fail_whatever_their_pod_times_say():
    """The device plugin handed one GPU to two pods at once (both environments name it): the
    overlap is proven, so the timing that used to hide it (within a second: unknown) no longer can."""
    n = node()
    a, b = meet(n, [0, 0])
    v = evaluate_concurrent_pods_disjoint(n.name, a, b, allocatable=8, together=None)
    assert v.outcome is Verdict.FAIL
    assert v.summary == ("two pods each given one GPU at the same time (an overlap of 3000 ms measured by their "
                         f"probes' rendezvous) both see {n.gpus[0].uuid}")
    assert (v.expected, v.observed) == ("disjoint GPU UUIDs", f"pod p0: {n.gpus[0].uuid}; pod p1: {n.gpus[0].uuid}")


@pytest.mark.parametrize("gpus", [[0, 1], [0, 0]], ids=["different GPUs", "the same GPU"])
def test_pods_that_could_not_meet_are_not_tested_with_the_probes_reason(gpus):
    n = node()
    a, b = meet(n, gpus, blocked=True)
    v = evaluate_concurrent_pods_disjoint(n.name, a, b, allocatable=8, together=True)  # rendezvous beats pod times
    assert (v.outcome, v.kind) == (Verdict.NOT_TESTED, COULD_NOT_RUN)
    assert v.summary == ("the two pods could not hold their GPUs at the same time: "
                         f"pod p0: peer p1.{GROUP}.{NS}.svc did not answer within 90 s: Connection timed out; "
                         f"pod p1: peer p0.{GROUP}.{NS}.svc did not answer within 90 s: Connection timed out")


@pytest.mark.parametrize(("together", "why"), [
    (False, "one finished before the other was scheduled"), (None, "their pod times meet within a second")],
    ids=["surely apart", "unknown"])
def test_different_gpus_without_proven_overlap_are_not_a_pass(together, why):
    """Finding 11: pods that never overlapped but got different GPUs passed "given one GPU each"."""
    n = node()
    a, b = (without_rendezvous(s) for s in meet(n, [0, 1]))
    v = evaluate_concurrent_pods_disjoint(n.name, a, b, allocatable=8, together=together)
    assert (v.outcome, v.kind) == (Verdict.NOT_TESTED, COULD_NOT_RUN)
    assert v.summary == (f"two pods given one GPU each see different GPUs ({n.gpus[0].uuid} and {n.gpus[1].uuid}), but "
                         f"nothing shows they held them at the same time (their probes ran no rendezvous and {why})")


def test_pod_times_that_surely_overlap_are_the_fallback_of_probes_without_a_rendezvous():
    n = node()
    a, b = (without_rendezvous(s) for s in meet(n, [0, 1]))
    v = evaluate_concurrent_pods_disjoint(n.name, a, b, allocatable=8, together=True)
    assert v.outcome is Verdict.PASS
    assert v.summary.startswith("two pods holding one GPU each at the same time (their pod times overlap) see "
                                "different GPUs")
    assert v.evidence[-1] == "no rendezvous in their probes: pod times overlap"


def test_one_probe_that_met_proves_the_overlap_and_the_largest_measure_is_named():
    n = node()
    a, b = meet(n, [0, 1], arrive=[0.0, 0.5])
    overlap = rendezvous_overlap([a, without_rendezvous(b)])
    assert overlap is not None and (overlap.held, overlap.overlap_ms, overlap.reason) == (True, 3100.0, None)
    both = rendezvous_overlap([a, b])
    assert both is not None and both.overlap_ms == 3100.0  # b measured 3000
    assert rendezvous_overlap([without_rendezvous(a), without_rendezvous(b)]) is None


# -------------------------------------------------------------------------------------------------
# sharing.oversubscription-runs (t4-timeslicing: 4 x T4, 4 replicas)


def oversubscribe(n: SimNode, seen: Sequence[Sighting], windows: Sequence[tuple[float, float] | None] | None = None):
    runs = [Run(s, windows[i] if windows else None) for i, s in enumerate(seen)]
    return evaluate_oversubscription_runs(n.name, runs, physical=4, node_uuids=frozenset(g.uuid for g in n.gpus),
                                          replicas=4, strategy="time-slicing")


def test_oversubscribed_pods_that_met_pass_naming_the_overlap():
    n = node("t4-timeslicing", "t4-0")
    v = oversubscribe(n, meet(n, [0, 1, 2, 3, 0]))
    assert v.outcome is Verdict.PASS, v.message()
    assert v.summary == ("5 pods on 4 GPUs (time-slicing, 4 replicas) held their GPUs at the same time (an overlap of "
                         "3000 ms measured by their probes' rendezvous); each verified its kernel on one of the node's "
                         f"GPUs; shared: {n.gpus[0].uuid} x2")


def test_oversubscribed_pods_that_could_not_meet_are_not_tested_even_with_overlapping_pod_times():
    n = node("t4-timeslicing", "t4-0")
    v = oversubscribe(n, meet(n, [0, 1, 2, 3, 0], blocked=True), windows=[(0.0, 5.0)] * 5)
    assert (v.outcome, v.kind) == (Verdict.NOT_TESTED, COULD_NOT_RUN)
    peers = "; ".join(f"peer p{i}.{GROUP}.{NS}.svc did not answer within 90 s: Connection timed out"
                      for i in (1, 2, 3, 4))
    assert v.summary.startswith(f"the 5 pods could not hold their GPUs at the same time: pod p0: {peers}; pod p1: ")
    # two probes' reasons, and how many more the evidence has
    assert v.summary.endswith("Connection timed out; and 3 more probes (evidence)")


def test_launched_at_once_is_no_pass_without_times_or_a_rendezvous():
    """Finding 10: 5 pods without timings passed "were launched at once"."""
    n = node("t4-timeslicing", "t4-0")
    seen = [without_rendezvous(s) for s in meet(n, [0, 1, 2, 3, 0])]
    v = oversubscribe(n, seen, windows=[(0.0, 5.0), (0.0, 5.0), (0.0, 5.0), (0.0, 5.0), (5.0, 9.0)])
    assert (v.outcome, v.kind) == (Verdict.NOT_TESTED, COULD_NOT_RUN)
    assert v.summary == ("the 5 pods ran and verified their kernels, but nothing shows they held their GPUs at the "
                         "same time (their probes ran no rendezvous and their pod times meet within a second)")


# -------------------------------------------------------------------------------------------------
# The plan and the pods


@pytest.mark.parametrize(("allocatable", "shared", "together"), [
    (8, False, ["one", "split"]), (2, False, ["one", "split"]), (1, False, []), (16, True, [])],
    ids=["eight GPUs", "two GPUs: two queues for them", "one GPU: one at a time", "time-sliced: nothing to prove"])
def test_only_pods_that_can_hold_their_gpus_together_are_a_group(allocatable, shared, together):
    plan = plan_node("h100-0", allocatable, shared=shared)
    assert [p.role for p in plan if p.together] == together
    assert set(together) <= set(CONCURRENT_ROLES)


def test_a_group_names_every_peer_under_its_headless_service_and_only_the_probe_container_waits():
    group = rendezvous_group_name("iso-together", "a-node-name-that-is-long" * 10)
    assert group.startswith("iso-together-") and len(group) == len("iso-together-") + 10
    members = rendezvous_group(group, ["one", "split"], namespace=NS)
    pod = make_cuda_probe_pod(name="iso-split-n", namespace=NS, run_id="r", check="isolation", cuda="13.0.2",
                              sidecar_gpu_count=0, rendezvous=members["split"])
    spec = pod["spec"]
    assert (spec["hostname"], spec["subdomain"], pod["metadata"]["labels"][RENDEZVOUS_LABEL]) == ("split", group, group)
    probe, sidecar = spec["containers"]
    assert probe["env"] == [{"name": "GPUCONF_PROBE_RENDEZVOUS", "value": f"one.{group}.{NS}.svc"},
                            {"name": "GPUCONF_PROBE_RENDEZVOUS_WAIT", "value": "180"}]
    assert sidecar["env"] == []  # it shares the pod's network: a second listener would take the port
    service = make_rendezvous_service(name=group, namespace=NS, run_id="r", check="isolation")
    assert service["spec"] == {"clusterIP": "None", "publishNotReadyAddresses": True,
                               "selector": {"gpuconf.io/run-id": "r", RENDEZVOUS_LABEL: group},
                               "ports": [{"name": "rendezvous", "port": 7171, "targetPort": 7171, "protocol": "TCP"}]}
    plain = make_cuda_probe_pod(name="iso-one-n", namespace=NS, run_id="r", check="isolation", cuda="13.0.2")
    assert "hostname" not in plain["spec"] and RENDEZVOUS_LABEL not in plain["metadata"]["labels"]


@pytest.mark.parametrize(("group", "hosts", "message"), [
    ("g", ["one"], "a rendezvous group has two or more distinct hostnames: ['one']"),
    ("g", ["one", "one"], "a rendezvous group has two or more distinct hostnames: ['one', 'one']"),
    ("9g", ["a", "b"], "a rendezvous group names a Service: a DNS-1035 label, not '9g'"),
    ("g", ["a", "B"], "a pod's hostname is a DNS label: ['B']"),
], ids=["alone", "twice the same", "a service name starting with a digit", "an upper-case hostname"])
def test_a_malformed_group_is_refused(group, hosts, message):
    with pytest.raises(ValueError) as err:
        rendezvous_group(group, hosts, namespace=NS)
    assert str(err.value) == message


# -------------------------------------------------------------------------------------------------
# The simulated cluster, end to end: the fault the concurrent check exists for is caught on every run


def run_isolation(pytester: pytest.Pytester, fault: str | None, *options: str) -> dict[str, tuple[str, str]]:
    """(status, message and evidence) of isolation.concurrent-pods-disjoint by node, after the isolation
    suite ran on healthy-h100 (with ``fault`` on h100-0)."""
    suites = pytester.path / "suites"
    suites.mkdir(exist_ok=True)
    (suites / "test_isolation.py").write_text((ROOT / "suites" / "test_isolation.py").read_text())
    text = re.sub(r"^faults:.*$", "", (ROOT / "gpuconf/data/sim_profiles/healthy-h100.yaml").read_text(), flags=re.M)
    profile = pytester.path / "profile.yaml"
    profile.write_text(text + (f"\nfaults:\n  - {{id: {fault}, pool: h100, node: 0}}\n" if fault else ""))
    reports = pytester.path / "reports"
    shutil.rmtree(reports, ignore_errors=True)
    pytest_subprocess(pytester, "suites", "-p", "gpuconf.plugin", "--simulate", str(profile), "--report-dir",
                      str(reports), "-p", "no:cacheprovider", *options)
    tests = json.loads((reports / "report.json").read_text())["results"]["tests"]
    return {t["extra"]["node"]: (t["status"], "\n".join([str(t.get("message") or ""), *t["extra"]["evidence"]]))
            for t in tests
            if (t.get("extra") or {}).get("check") == "isolation.concurrent-pods-disjoint"}


def test_a_gpu_handed_to_two_running_pods_is_caught_on_every_run(pytester: pytest.Pytester):
    """gpu-double-allocated: each pod sees exactly its one GPU, and the same one; only the overlap
    shows it, and the rendezvous makes the overlap certain: three runs, three failures, the healthy
    node passing beside it each time."""
    for _ in range(3):
        seen = run_isolation(pytester, "gpu-double-allocated")
        status, message = seen["h100-0"]
        caught = re.search(r"two pods each given one GPU at the same time \(an overlap of \d+ ms measured by their "
                           r"probes' rendezvous\) both see GPU-", message)
        assert status == "failed" and caught, message
        assert seen["h100-1"][0] == "passed", seen["h100-1"]


def test_the_probes_wait_for_their_peers_at_most_half_the_campaigns_budget(pytester: pytest.Pytester):
    """A probe whose peer never comes must print its document (met false, why) before the campaign
    stops waiting for it, or the check would fail "no probe output" instead of saying why."""
    status, text = run_isolation(pytester, None, "--timeout", "30")["h100-0"]
    assert status == "passed" and "rendezvous met, overlap " in text and " of at most 15 s; " in text, text
