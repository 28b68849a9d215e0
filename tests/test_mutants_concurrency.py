"""The concurrency decisions, recorded whole where mutation testing (scripts/mutation-score) found them
unpinned: isolation.concurrent-pods-disjoint on every branch (rendezvous met or not, pod times only
without one, the device plugin's or the claims' allocation), the overlap read from the probes, the pod
times' fallback, the isolation plan's rendezvous group, and sharing.oversubscription-runs' overlap.
Each case's verdict (outcome, summary, expected, observed, evidence) is in
tests/data/verdicts/concurrency.json; the probes' documents come from the simulator's cuda-probe and
its rendezvous (gpuconf.sim.probe_meet)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from test_checks_isolation import pod_outcome, run_probe
from test_checks_sharing import pod_outcome as share_pod
from test_checks_sharing import probe as share_probe
from test_checks_sharing import runs_on
from test_concurrency_overlap import meet, node, without_rendezvous
from verdict_record import check_recording, whole

from gpuconf.checks import isolation as iso
from gpuconf.checks import sharing
from gpuconf.checks.isolation import ClaimGrant, Sighting
from gpuconf.sim.emulate import Visible
from gpuconf.sim.profile import expand, load_profile, with_faults

N = node()
T4 = node("t4-timeslicing", "t4-0")
LEAKY = expand(with_faults(load_profile("healthy-h100"), [{"id": "visible-devices-all", "pool": "h100",
                                                           "node": 0}])).node("h100-0")


def plain(n: Any, gpu: int, name: str, *, times: tuple[str, str] | None = None) -> Any:
    """A pod given GPU ``gpu`` of ``n`` whose probe ran no rendezvous."""
    return pod_outcome(name, {"probe": run_probe(n, [Visible(n.gpus[gpu])], {})}, times=times)


def at(second: int) -> str:
    return f"2026-12-08T00:00:{second:02d}Z"


def blind(where: str) -> Sighting:
    """A probe given a GPU that sees none (its toolkit injected nothing: NVIDIA_VISIBLE_DEVICES=void)."""
    return iso.sighting(pod_outcome(where, {"probe": run_probe(N, [], {"NVIDIA_VISIBLE_DEVICES": "void"})}))


def nothing(role: str) -> Sighting:
    return Sighting(f"pod iso-{role}-h100-0", None, f"pod iso-{role}-h100-0 produced no probe output (Pending)")


def edited(s: Sighting, **rendezvous: Any) -> Sighting:
    """``s`` with its rendezvous document changed."""
    assert s.report is not None
    doc = json.loads(json.dumps(s.report.raw))
    doc["rendezvous"].update(rendezvous)
    from gpuconf.probes.cuda import parse_cuda_probe
    return Sighting(s.where, parse_cuda_probe(json.dumps(doc)))


def disjoint(a: Sighting | None, b: Sighting | None, **kw: Any) -> Any:
    return iso.evaluate_concurrent_pods_disjoint(N.name, a, b, **{"allocatable": 8, **kw})


MET = meet(N, [0, 1], arrive=[0.0, 0.5])
SAME = meet(N, [0, 0])
APART = meet(N, [0, 1], blocked=True)
SAME_APART = meet(N, [0, 0], blocked=True)
OLD = [without_rendezvous(s) for s in MET]
OLD_SAME = [without_rendezvous(s) for s in SAME]
ONE, SPLIT = (iso.sighting(plain(LEAKY, g, f"iso-{r}-h100-0")) for g, r in ((0, "one"), (1, "split")))
GRANTS = {MET[0].where: ClaimGrant((N.gpus[0].uuid,), ("gpu-0",)), MET[1].where: ClaimGrant((N.gpus[1].uuid,),
                                                                                          ("gpu-1",))}
SAME_GRANTS = {OLD_SAME[0].where: ClaimGrant((N.gpus[0].uuid,), ("gpu-0",)),
               OLD_SAME[1].where: ClaimGrant((N.gpus[1].uuid,), ("gpu-1",))}
UNKNOWN_GRANT = {OLD_SAME[0].where: ClaimGrant(unknown="not seen"), OLD_SAME[1].where: SAME_GRANTS[OLD_SAME[1].where]}

FIVE = meet(T4, [0, 1, 2, 3, 0])
FIVE_APART = meet(T4, [0, 1, 2, 3, 0], blocked=True)
FIVE_OLD = [without_rendezvous(s) for s in FIVE]


def oversubscribe(seen: list[Sighting], windows: list[tuple[float, float] | None] | None = None) -> Any:
    runs = [sharing.Run(s, windows[i] if windows else None) for i, s in enumerate(seen)]
    return sharing.evaluate_oversubscription_runs(T4.name, runs, physical=4, replicas=4, strategy="time-slicing",
                                                  node_uuids=frozenset(g.uuid for g in T4.gpus))


def broken(gpu: int, edit: Callable[[dict[str, Any]], None], code: int) -> sharing.Run:
    """The fifth pod, its probe's document on GPU ``gpu`` changed by ``edit``."""
    _, text = share_probe(T4, [gpu])
    doc = json.loads(text)
    edit(doc)
    return sharing.Run(iso.sighting(share_pod("share-t4-0-4", code, json.dumps(doc))), (0.0, 5.0))


def no_init(doc: dict[str, Any]) -> None:
    doc["init"] = {"code": 999, "name": "cudaErrorUnknown", "message": "unknown error", "call": "cudaFree(0)",
                   "ms": 1.0}
    doc["exit_code"], doc["exit_reason"] = 3, "CUDA init failed: cudaFree(0) returned 999 cudaErrorUnknown"


def bad_kernel(doc: dict[str, Any]) -> None:
    doc["exit_code"], doc["exit_reason"] = 5, "vector_add failed on device(s) 0"
    doc["devices"][0]["vector_add"].update(ok=False, verified=False)
    doc["devices"][0]["vector_add"]["result"].update(code=700, name="cudaErrorIllegalAddress",
                                                     message="an illegal memory access was encountered")


def over(runs: list[sharing.Run], physical: int = 4) -> Any:
    return whole(sharing.evaluate_oversubscription_runs(T4.name, runs, physical=physical, replicas=4,
                                                        strategy="time-slicing",
                                                        node_uuids=frozenset(g.uuid for g in T4.gpus)))


def times(*windows: tuple[int, int]) -> list[tuple[float, float] | None]:
    return [(float(a), float(b)) for a, b in windows]


def pair(first: tuple[int, int], second: tuple[int, int], unknown: str | None = None) -> Any:
    """held_together of two pods with these (scheduled, finished) seconds; ``unknown`` (first.scheduled,
    first.finished, second.scheduled or second.finished) missing."""
    a = plain(N, 0, "iso-one-h100-0", times=(at(first[0]), at(first[1])))
    b = plain(N, 1, "iso-split-h100-0", times=(at(second[0]), at(second[1])))
    if unknown is not None:
        which, field = unknown.split(".")
        pod = a if which == "first" else b
        pod = replace(pod, timings=replace(pod.timings, **{field: None}))
        a, b = (pod, b) if which == "first" else (a, pod)
    return iso.held_together(a, b)


CASES: dict[str, Callable[[], Any]] = {
    # isolation.concurrent-pods-disjoint: what cannot be judged
    "one GPU allocatable": lambda: whole(disjoint(*MET, allocatable=1)),
    "two GPUs allocatable": lambda: whole(disjoint(*MET, allocatable=2)),
    "time-sliced": lambda: whole(disjoint(*MET, replicas=4)),
    "time-sliced two ways": lambda: whole(disjoint(*MET, replicas=2)),
    "first pod not planned": lambda: whole(disjoint(None, MET[1])),
    "second pod not planned": lambda: whole(disjoint(MET[0], None)),
    "first pod without a document": lambda: whole(disjoint(nothing("one"), MET[1])),
    "second pod without a document": lambda: whole(disjoint(MET[0], nothing("split"))),
    "first pod sees nothing": lambda: whole(disjoint(blind("iso-one-h100-0"), MET[1])),
    "second pod sees nothing": lambda: whole(disjoint(MET[0], blind("iso-split-h100-0"))),
    # the rendezvous
    "met on different GPUs": lambda: whole(disjoint(*MET)),
    "met on different GPUs, pod times apart": lambda: whole(disjoint(*MET, together=False)),
    "met on different GPUs through DRA claims": lambda: whole(disjoint(*MET, grants=GRANTS)),
    "met on the same GPU": lambda: whole(disjoint(*SAME)),
    "met on the same GPU, pod times apart": lambda: whole(disjoint(*SAME, together=False)),
    "one met, the other ran none": lambda: whole(disjoint(MET[0], OLD[1])),
    "not met, different GPUs": lambda: whole(disjoint(*APART, together=True)),
    "not met, the same GPU": lambda: whole(disjoint(*SAME_APART)),
    "not met without a reason": lambda: whole(disjoint(*(edited(s, reason=None) for s in APART))),
    "a peer that answered nothing and said no error": lambda: whole(disjoint(
        *(edited(s, peer_lines=[{"peer": "p.g", "answered": False, "attempts": 3, "error": None}]) for s in MET))),
    # pod times, for probes without a rendezvous
    "no rendezvous, different GPUs, times overlap": lambda: whole(disjoint(*OLD, together=True)),
    "no rendezvous, different GPUs, times apart": lambda: whole(disjoint(*OLD, together=False)),
    "no rendezvous, different GPUs, times unknown": lambda: whole(disjoint(*OLD, together=None)),
    "no rendezvous, the same GPU, times overlap": lambda: whole(disjoint(*OLD_SAME, together=True)),
    "no rendezvous, the same GPU, times apart": lambda: whole(disjoint(*OLD_SAME, together=False)),
    "no rendezvous, the same GPU, times unknown": lambda: whole(disjoint(*OLD_SAME, together=None)),
    "the device plugin gave different GPUs both see": lambda: whole(disjoint(ONE, SPLIT, together=False)),
    "their claims gave different GPUs both see": lambda: whole(disjoint(*OLD_SAME, grants=SAME_GRANTS)),
    "one claim unknown, the same GPU": lambda: whole(disjoint(*OLD_SAME, grants=UNKNOWN_GRANT, together=None)),
    "no claim recorded, the same GPU": lambda: whole(disjoint(*OLD_SAME, grants={}, together=None)),
    # the overlap the probes proved
    "overlap: none ran a rendezvous": lambda: iso.rendezvous_overlap(OLD),
    "overlap: both met": lambda: iso.rendezvous_overlap(MET),
    "overlap: met without a measure": lambda: iso.rendezvous_overlap([edited(MET[0], overlap_ms=None)]),
    "overlap: five could not meet": lambda: iso.rendezvous_overlap(FIVE_APART),
    "overlap: three could not meet": lambda: iso.rendezvous_overlap(FIVE_APART[:3]),
    "overlap: a pod without a document": lambda: iso.rendezvous_overlap([nothing("one"), MET[1]]),
    # pod times
    "times: overlapping": lambda: pair((0, 5), (3, 9)),
    "times: apart": lambda: pair((0, 5), (6, 9)),
    "times: second before first": lambda: pair((6, 9), (0, 5)),
    "times: within a second": lambda: pair((0, 5), (5, 9)),
    "times: the first starts in the second the other ends": lambda: pair((5, 9), (0, 5)),
    "times: the same second": lambda: pair((5, 5), (5, 5)),
    **{f"times: {u} unknown": (lambda u=u: pair((0, 5), (3, 9), u))
       for u in ("first.scheduled", "first.finished", "second.scheduled", "second.finished")},
    # the plan
    **{f"plan: {n} GPUs{', ' + str(m) + ' a container' if m else ''}{', shared' if s else ''}":
       (lambda n=n, m=m, s=s: iso.plan_node("h100-0", n, max_request=m, shared=s))
       for n, m, s in ((0, None, False), (1, None, False), (2, None, False), (3, None, False), (4, None, False),
                       (8, 1, False), (8, 2, False), (8, None, True), (2, 1, True))},
    "plan: 8 GPUs, sharing not said": lambda: iso.plan_node("h100-0", 8),
    # sharing.oversubscription-runs
    "sharing: met": lambda: whole(oversubscribe(FIVE)),
    "sharing: nothing planned": lambda: over([]),
    "sharing: a pod without a document": lambda: over([*runs_on(T4, [[0], [1], [2], [3]]), sharing.Run(
        Sighting("pod share-t4-0-4", None, "pod share-t4-0-4 produced no probe output (Pending)"))]),
    "sharing: a pod whose CUDA did not start": lambda: over([*runs_on(T4, [[0], [1], [2], [3]]),
                                                            broken(0, no_init, 3)]),
    "sharing: a pod seeing two GPUs": lambda: over(runs_on(T4, [[0], [1], [2], [3], [0, 1]])),
    "sharing: a failed kernel": lambda: over([*runs_on(T4, [[0], [1], [2], [3]]), broken(0, bad_kernel, 5)]),
    "sharing: a GPU of another node": lambda: over([*runs_on(T4, [[0], [1], [2], [3]]),
                                                   runs_on(node("t4-timeslicing", "t4-1"), [[0]])[0]]),
    "sharing: more distinct GPUs than physical": lambda: over(runs_on(T4, [[0], [1], [2], [3], [0]]), physical=2),
    "sharing: too few sharing pairs": lambda: over(runs_on(T4, [[0], [1], [2], [3], [0]]), physical=3),
    "sharing: all on one GPU": lambda: over(runs_on(T4, [[0], [0], [0], [0], [0]])),
    "sharing: could not meet": lambda: whole(oversubscribe(FIVE_APART, times((0, 5), (0, 5), (0, 5), (0, 5), (0, 5)))),
    "sharing: no rendezvous, times overlap": lambda: whole(oversubscribe(FIVE_OLD, times(
        (0, 5), (0, 5), (1, 5), (0, 6), (2, 7)))),
    "sharing: no rendezvous, times apart": lambda: whole(oversubscribe(FIVE_OLD, times(
        (0, 5), (0, 5), (0, 5), (0, 5), (6, 9)))),
    "sharing: no rendezvous, times meet within a second": lambda: whole(oversubscribe(FIVE_OLD, times(
        (0, 5), (0, 5), (0, 5), (0, 5), (5, 9)))),
    "sharing: no rendezvous, a time missing": lambda: whole(oversubscribe(FIVE_OLD, [
        (0.0, 5.0), (0.0, 5.0), (0.0, 5.0), (0.0, 5.0), None])),
}


@pytest.mark.parametrize("case", CASES)
def test_the_verdict_is_the_recorded_one(case: str) -> None:
    check_recording("concurrency", case, CASES[case])
