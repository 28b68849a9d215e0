"""The NCCL checks' decisions, every branch, with what each says recorded whole in
tests/data/verdicts/nccl.json (tests/verdict_record.py): the outcome, the summary, the expected and
observed line, the evidence and the remedy, on the simulator's healthy h100-0 nccl-probe document with
one thing changed per case. Where mutation testing (scripts/mutation-score) found a comparison
unpinned, a rule below asserts it by name."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from verdict_record import check_recording

from gpuconf.checks import nccl as checks
from gpuconf.compat import tables
from gpuconf.compat.versions import parse_cuda
from gpuconf.probes.nccl import NcclProbeReport, SizeResult, parse_nccl_probe
from gpuconf.sim.emulate import Visible, nccl_probe_run
from gpuconf.sim.profile import expand, load_profile, with_faults
from gpuconf.verdict import Outcome, Verdict


def probe(faults: list[dict[str, Any]] | None = None, iters: int = 20) -> NcclProbeReport:
    p = load_profile("healthy-h100")
    n = expand(with_faults(p, faults) if faults else p).node("h100-0")
    code, out = nccl_probe_run(n, visible=[Visible(g) for g in n.gpus], image_cuda=parse_cuda("13.0.2"), env={},
                               started_at="2026-12-01T00:00:00.000Z", hostname="h100-0", iters=iters)
    return parse_nccl_probe(out, exit_code=code)


OK = probe()
HUNG = probe([{"id": "nccl-hang", "pool": "h100", "node": 0}])
H100 = checks.expected_floor("NVIDIA H100 80GB HBM3", 8)
A100 = checks.expected_floor("NVIDIA A100-SXM4-80GB", 8)
NIC = tables.inter_node_floor(400, 8)


def doc(**changes: Any) -> NcclProbeReport:
    return dataclasses.replace(OK, **changes)


def wrong(n: int) -> NcclProbeReport:
    """OK with its last ``n`` sizes wrong (3 mismatches each)."""
    sizes = list(OK.sizes)
    for i in range(len(sizes) - n, len(sizes)):
        sizes[i] = dataclasses.replace(sizes[i], correct=False, mismatches=3)
    return doc(sizes=tuple(sizes), all_correct=False)


def record(value: Any) -> Any:
    """What the recording keeps: a verdict whole with its kind, caveats and blocker; anything else as is."""
    if isinstance(value, Verdict):
        return {"verdict": value, "kind": value.kind, "not_judged": list(value.not_judged),
                "blocked_by": value.blocked_by}
    return value


def holder(i: int) -> checks.GpuHolder:
    return checks.GpuHolder("team-a", f"train-{i}", 1)


def job(a: str, b: str, busbw: float | None = 369.6, *, hung_rank: int | None = None, network: str | None = "IB",
        missing_rank: int | None = None) -> checks.JobResult:
    ranks = []
    for rank, node in enumerate((a, b)):
        if rank == missing_rank:
            ranks.append(checks.RankResult(rank, node, None, "never placed: Pending Unschedulable"))
            continue
        report = HUNG if rank == hung_rank else doc(large_message_avg_busbw_gbps=busbw, network=network)
        ranks.append(checks.RankResult(rank, node, report))
    return checks.combine_job(f"{a}-{b}", (a, b), ranks)


def call(ok: bool | None, *nodes: str, text: str = "") -> checks.PairCall:
    return checks.PairCall(tuple(nodes), ok, text or f"{' + '.join(nodes)}: {ok}")


def rounds(*busbw: float | None, broken: int | None = None, iters: bool = True) -> list[checks.BurnInRound]:
    out = []
    for number, figure in enumerate(busbw, start=1):
        if number == broken:
            out.append(checks.BurnInRound(number, HUNG))
        elif figure is None:
            out.append(checks.BurnInRound(number, None, "no output: Failed DeadlineExceeded"))
        else:
            raw = OK.raw if iters else {k: v for k, v in OK.raw.items() if k != "args"}
            out.append(checks.BurnInRound(number, doc(large_message_avg_busbw_gbps=figure, raw=raw)))
    return out


CASES: dict[str, Callable[[], Any]] = {
    # nccl.preflight-gpus-free
    "preflight: no gpu": lambda: checks.evaluate_preflight("n", capacity=0, allocatable=0, holders=[]),
    "preflight: free": lambda: checks.evaluate_preflight("n", capacity=8, allocatable=8, holders=[], note="; a note"),
    "preflight: one unhealthy": lambda: checks.evaluate_preflight("n", capacity=8, allocatable=7, holders=[]),
    "preflight: one missing": lambda: checks.evaluate_preflight(
        "n", capacity=7, allocatable=7, holders=[], expected=8, expected_from="its pool's other nodes have"),
    "preflight: missing and unhealthy": lambda: checks.evaluate_preflight(
        "n", capacity=7, allocatable=6, holders=[], expected=8, expected_from="its --expect pool declares"),
    "preflight: fewer expected than advertised": lambda: checks.evaluate_preflight(
        "n", capacity=8, allocatable=7, holders=[], expected=4, expected_from="its --expect pool declares"),
    "preflight: as many as expected": lambda: checks.evaluate_preflight("n", capacity=8, allocatable=8, holders=[],
                                                                         expected=8),
    "preflight: one gpu": lambda: checks.evaluate_preflight("n", capacity=1, allocatable=1, holders=[]),
    "preflight: one missing, source unsaid": lambda: checks.evaluate_preflight("n", capacity=7, allocatable=7,
                                                                               holders=[], expected=8),
    "preflight: six holders": lambda: checks.evaluate_preflight("n", capacity=8, allocatable=8,
                                                                holders=[holder(i) for i in range(6)]),
    "preflight: busy": lambda: checks.evaluate_preflight("n", capacity=8, allocatable=8, holders=[holder(0)]),
    "preflight: five holders": lambda: checks.evaluate_preflight("n", capacity=8, allocatable=8,
                                                                 holders=[holder(i) for i in range(5)]),
    "preflight: seven holders": lambda: checks.evaluate_preflight("n", capacity=8, allocatable=8,
                                                                  holders=[holder(i) for i in range(7)]),
    # the pool's count
    "pool counts: the commonest, ties to the larger": lambda: checks.pool_gpu_counts(
        [("a", "H100", 8), ("b", "H100", 7), ("c", "H100", 8), ("d", "A100", 4), ("e", "A100", 8), ("f", "L4", 1)]),
    "pool counts: the commonest below the largest": lambda: checks.pool_gpu_counts(
        [("a", "H100", 8), ("b", "H100", 7), ("c", "H100", 7)]),
    # nccl.allreduce-completes
    "completes: healthy": lambda: checks.evaluate_allreduce_completes("n", OK, gpus=8),
    "completes: hung at a size": lambda: checks.evaluate_allreduce_completes("n", HUNG, gpus=8),
    "completes: hung, size unknown": lambda: checks.evaluate_allreduce_completes(
        "n", dataclasses.replace(HUNG, running_bytes=None), gpus=8),
    "completes: exited 3": lambda: checks.evaluate_allreduce_completes(
        "n", doc(exit_code=3, exit_reason="a CUDA or NCCL call failed"), gpus=8),
    "completes: sweep not completed": lambda: checks.evaluate_allreduce_completes(
        "n", doc(sweep_completed=False), gpus=8),
    "completes: sweep unknown": lambda: checks.evaluate_allreduce_completes("n", doc(sweep_completed=None), gpus=8),
    "completes: one size wrong": lambda: checks.evaluate_allreduce_completes("n", wrong(1), gpus=8),
    "completes: seven sizes wrong": lambda: checks.evaluate_allreduce_completes("n", wrong(7), gpus=8),
    "completes: the summary says wrong": lambda: checks.evaluate_allreduce_completes(
        "n", doc(all_correct=False), gpus=8),
    "completes: no size": lambda: checks.evaluate_allreduce_completes("n", doc(sizes=()), gpus=8),
    "completes: no rank count": lambda: checks.evaluate_allreduce_completes("n", doc(nranks=None), gpus=8),
    "completes: fewer ranks": lambda: checks.evaluate_allreduce_completes(
        "n", doc(nranks=2, local_gpu_uuids=OK.local_gpu_uuids[:2]), gpus=8),
    "completes: more ranks": lambda: checks.evaluate_allreduce_completes("n", OK, gpus=4),
    # floors
    "floors": lambda: {f"{gpu} x{n}": checks.expected_floor(gpu, n) for gpu, n in (
        ("NVIDIA H100 80GB HBM3", 8), ("NVIDIA H100 80GB HBM3", 4), ("NVIDIA H100 80GB HBM3", 9),
        ("NVIDIA A100-SXM4-80GB", 8), ("NVIDIA H200", 8), ("NVIDIA L40S", 4), ("NVIDIA L40S", 8),
        ("NVIDIA Foo 9000", 8), ("H100", 8))},
    "fabric": lambda: {f"{gpu} x{n}": checks._fabric(gpu, n) for gpu, n in (
        ("NVIDIA H100 80GB HBM3", 8), ("NVIDIA H100 80GB HBM3", 4), ("NVIDIA L40S", 8), ("NVIDIA Foo 9000", 8),
        ("NVIDIA B200", 8))},
    # nccl.busbw-above-floor
    "busbw: healthy": lambda: checks.evaluate_busbw("n", OK, H100),
    "busbw: no figure": lambda: checks.evaluate_busbw("n", HUNG, H100),
    "busbw: below the floor": lambda: checks.evaluate_busbw("n", doc(large_message_avg_busbw_gbps=400.0), H100),
    "busbw: at the floor": lambda: checks.evaluate_busbw("n", doc(large_message_avg_busbw_gbps=437.0), H100),
    "busbw: declared, above": lambda: checks.evaluate_busbw("n", OK, None, declared_gbps=400.0),
    "busbw: declared, below": lambda: checks.evaluate_busbw("n", OK, H100, declared_gbps=500.0),
    "busbw: declared, at": lambda: checks.evaluate_busbw("n", doc(large_message_avg_busbw_gbps=450.0), None,
                                                         declared_gbps=450.0),
    "busbw: no floor": lambda: checks.evaluate_busbw("n", OK, None),
    # nccl.transport-expected
    "transport: nvls": lambda: checks.evaluate_transport("n", OK, H100),
    "transport: no floor": lambda: checks.evaluate_transport("n", OK, None),
    "transport: no floor, none seen": lambda: checks.evaluate_transport("n", doc(transports=()), None),
    "transport: none reported": lambda: checks.evaluate_transport("n", doc(transports=()), H100),
    "transport: ring on nvswitch": lambda: checks.evaluate_transport("n", doc(transports=("P2P/CUMEM", "SHM")), H100),
    "transport: p2p family": lambda: checks.evaluate_transport("n", doc(transports=("SHM", "P2P/CUMEM")), A100),
    "transport: a prefix is no match": lambda: checks.evaluate_transport("n", doc(transports=("P2PX",)), A100),
    # ranks and jobs
    "rank: finished": lambda: (checks.RankResult(0, "a", OK).finished, checks.RankResult(0, "a", OK).why()),
    "rank: no document": lambda: (checks.RankResult(1, "b", None).finished, checks.RankResult(1, "b", None).why()),
    "rank: problem": lambda: checks.RankResult(1, "b", None, "its pod was not created").why(),
    "rank: hung": lambda: (checks.RankResult(1, "b", HUNG).finished, checks.RankResult(1, "b", HUNG).why()),
    "rank: hung, size unknown": lambda: checks.RankResult(
        1, "b", dataclasses.replace(HUNG, running_bytes=None)).why(),
    "rank: wrong": lambda: (checks.RankResult(1, "b", wrong(2)).finished, checks.RankResult(1, "b", wrong(2)).why()),
    "rank: wrong, exited 5": lambda: checks.RankResult(1, "b", dataclasses.replace(
        wrong(2), exit_code=5, exit_reason="wrong all-reduce results")).why(),
    "rank: no sizes": lambda: (checks.RankResult(1, "b", doc(sizes=())).finished,
                               checks.RankResult(1, "b", doc(sizes=())).why()),
    "rank: no sizes, sweep not completed": lambda: checks.RankResult(1, "b", doc(
        sizes=(), sweep_completed=False, exit_code=6, exit_reason="timeout")).why(),
    "rank: exited": lambda: (checks.RankResult(1, "b", doc(exit_code=7, exit_reason="bootstrap failed")).finished,
                             checks.RankResult(1, "b", doc(exit_code=7, exit_reason="bootstrap failed")).why()),
    "rank: not completed": lambda: checks.RankResult(1, "b", doc(sweep_completed=False)).finished,
    "rank: summary wrong": lambda: checks.RankResult(1, "b", doc(all_correct=False)).finished,
    "rank: summary unknown": lambda: checks.RankResult(1, "b", doc(all_correct=None)).finished,
    "job: healthy": lambda: (lambda j: (j.name, j.completed, j.unfinished, j.busbw_gbps, j.network, j.label,
                                        j.failure(), [r.rank for r in j.ranks]))(job("a", "b")),
    "job: ranks out of order": lambda: [r.rank for r in checks.combine_job("j", ("a", "b"), [
        checks.RankResult(1, "b", OK), checks.RankResult(0, "a", OK)]).ranks],
    "job: a rank short": lambda: (lambda j: (j.completed, j.failure()))(checks.combine_job(
        "j", ("a", "b", "c"), [checks.RankResult(0, "a", OK), checks.RankResult(1, "b", OK)])),
    "job: no rank": lambda: (lambda j: (j.completed, j.failure(), j.busbw_gbps, j.network))(
        checks.combine_job("j", ("a", "b"), [])),
    "job: the slowest rank": lambda: checks.combine_job("j", ("a", "b"), [
        checks.RankResult(0, "a", doc(large_message_avg_busbw_gbps=300.0)),
        checks.RankResult(1, "b", doc(large_message_avg_busbw_gbps=200.0))]).busbw_gbps,
    "job: a rank without a figure": lambda: job("a", "b", hung_rank=1).busbw_gbps,
    "job: a rank without a document": lambda: (lambda j: (j.busbw_gbps, j.network, j.failure()))(
        job("a", "b", missing_rank=0)),
    "job: networks": lambda: checks.combine_job("j", ("a", "b"), [
        checks.RankResult(0, "a", doc(network="Socket")), checks.RankResult(1, "b", doc(network="IB"))]).network,
    "job: no network": lambda: job("a", "b", network=None).network,
    "job: two unfinished": lambda: (lambda j: ([r.rank for r in j.unfinished], j.failure()))(checks.combine_job(
        "j", ("a", "b", "c"), [checks.RankResult(0, "a", HUNG), checks.RankResult(1, "b", OK),
                               checks.RankResult(2, "c", None, "no output")])),
    # pairing
    "first round": lambda: checks.first_round({"x": ["n0", "n1", "n2"], "y": ["a0"], "z": ["b0", "b1"], "w": []}),
    "second round: re-paired in turn": lambda: checks.second_round(
        [(("n0", "n1"), True), (("n2", "n3"), False), (("n4", "n5"), False)], ["n6"],
        dict.fromkeys(["n0", "n1", "n2", "n3", "n4", "n5", "n6"], "h")),
    "second round: per group": lambda: checks.second_round(
        [(("h0", "h1"), True), (("a0", "a1"), False), (("h2", "h3"), False)], ["a2"],
        {"h0": "h", "h1": "h", "h2": "h", "h3": "h", "a0": "a", "a1": "a", "a2": "a"}),
    "second round: one helper": lambda: checks.second_round(
        [(("n0", "n1"), False), (("n2", "n3"), True)], [], dict.fromkeys(["n0", "n1", "n2", "n3"], "h")),
    "pair completes": lambda: checks.pair_completion_call(job("a", "b")),
    "pair completes: fewest sizes": lambda: checks.pair_completion_call(checks.combine_job("j", ("a", "b"), [
        checks.RankResult(0, "a", OK), checks.RankResult(1, "b", doc(sizes=OK.sizes[:4]))])),
    "pair does not complete": lambda: checks.pair_completion_call(job("a", "b", hung_rank=0)),
    "peer floor: one pair": lambda: checks.peer_floor([job("a", "b")]),
    "peer floor: two pairs": lambda: checks.peer_floor([job("a", "b", 300.0), job("c", "d", 350.0)]),
    "peer floor: a hung pair does not count": lambda: checks.peer_floor([job("a", "b"), job("c", "d", hung_rank=1)]),
    "peer floor: figures under 1 GB/s": lambda: checks.peer_floor([job("a", "b", 0.0), job("c", "d", 0.5)]),
    "peer floor: a fast pair with wrong results does not count": lambda: checks.peer_floor([
        job("a", "b", 300.0), job("c", "d", 350.0), checks.combine_job("e-f", ("e", "f"), [
            checks.RankResult(0, "e", dataclasses.replace(wrong(1), large_message_avg_busbw_gbps=900.0)),
            checks.RankResult(1, "f", doc(large_message_avg_busbw_gbps=900.0))])]),
    "peer floor: a pair without a figure": lambda: checks.peer_floor([
        job("a", "b"), job("c", "d", None), job("e", "f", 100.0)]),
    "pair busbw: not completed": lambda: checks.pair_busbw_call(job("a", "b", hung_rank=1), NIC, None),
    "pair busbw: no figure": lambda: checks.pair_busbw_call(job("a", "b", None), NIC, None),
    "pair busbw: sockets": lambda: checks.pair_busbw_call(job("a", "b", 2.4, network="Socket"), NIC, None),
    "pair busbw: no network": lambda: checks.pair_busbw_call(job("a", "b", network=None), NIC, None),
    "pair busbw: nic floor, above": lambda: checks.pair_busbw_call(job("a", "b"), NIC, (1000.0, "peers")),
    "pair busbw: nic floor, below": lambda: checks.pair_busbw_call(job("a", "b", 300.0), NIC, None),
    "pair busbw: nic floor, at": lambda: checks.pair_busbw_call(job("a", "b", NIC.minimum_gbps if NIC else 0.0),
                                                                NIC, None),
    "pair busbw: peers, above": lambda: checks.pair_busbw_call(job("a", "b"), None, (300.0, "90% of like pairs")),
    "pair busbw: peers, below": lambda: checks.pair_busbw_call(job("a", "b", 200.0), None, (300.0, "90% of pairs")),
    "pair busbw: nothing to compare": lambda: checks.pair_busbw_call(job("a", "b"), None, None),
    # nccl.pairwise-*
    "pairwise: in no pair": lambda: checks.evaluate_pairwise("nccl.pairwise-completes", "z", [call(True, "a", "b")]),
    "pairwise: not judged": lambda: checks.evaluate_pairwise("nccl.pairwise-busbw-above-floor", "a", [
        call(None, "a", "b", text="a + b: not judged"), call(None, "a", "c", text="a + c: not judged")]),
    "pairwise: passes": lambda: checks.evaluate_pairwise("nccl.pairwise-completes", "a", [
        call(True, "a", "b"), call(None, "a", "c"), call(True, "a", "d")]),
    "pairwise: a pass beside a failure": lambda: checks.evaluate_pairwise("nccl.pairwise-completes", "a", [
        call(False, "a", "b"), call(True, "a", "c")]),
    "pairwise: two failures beside a pass": lambda: checks.evaluate_pairwise("nccl.pairwise-completes", "a", [
        call(False, "a", "b"), call(False, "a", "c"), call(True, "a", "d")]),
    "pairwise: isolated": lambda: checks.evaluate_pairwise("nccl.pairwise-completes", "a", [
        call(False, "a", "b"), call(True, "b", "c"), call(False, "a", "d"), call(True, "d", "e"),
        call(None, "a", "f")]),
    "pairwise: isolated by one partner": lambda: checks.evaluate_pairwise("nccl.pairwise-busbw-above-floor", "a", [
        call(False, "a", "b"), call(False, "a", "c"), call(True, "b", "d"), call(True, "b", "e")]),
    "pairwise: the partner passed only with this node": lambda: checks.evaluate_pairwise(
        "nccl.pairwise-completes", "a", [call(False, "a", "b"), call(True, "a", "b")]),
    "pairwise: two failures, not isolated": lambda: checks.evaluate_pairwise("nccl.pairwise-completes", "a", [
        call(False, "a", "b"), call(False, "a", "c")]),
    "pairwise: not isolated": lambda: checks.evaluate_pairwise("nccl.pairwise-completes", "a", [
        call(False, "a", "b"), call(False, "b", "c")]),
    # nccl.multinode-completes
    "multinode: completes": lambda: checks.evaluate_multinode(job("a", "b"), "a: 349.6 GB/s"),
    "multinode: completes without a figure": lambda: checks.evaluate_multinode(job("a", "b", None, network=None),
                                                                               None),
    "multinode: completes, network unknown": lambda: checks.evaluate_multinode(job("a", "b", network=None), None),
    "multinode: a rank hung": lambda: checks.evaluate_multinode(job("a", "b", hung_rank=1), None),
    "multinode: a rank never placed": lambda: checks.evaluate_multinode(job("a", "b", missing_rank=1),
                                                                         "b: 349.6 GB/s"),
    # nccl.burn-in-stable
    "burn-in: no round": lambda: checks.evaluate_burn_in_stable("n", [], gpus=8),
    "burn-in: stable": lambda: checks.evaluate_burn_in_stable("n", rounds(462.0, 455.5, 470.1), gpus=8),
    "burn-in: stable without iterations": lambda: checks.evaluate_burn_in_stable(
        "n", rounds(462.0, 455.5, iters=False), gpus=8),
    "burn-in: a round hung": lambda: checks.evaluate_burn_in_stable("n", rounds(462.0, 462.0, 462.0, broken=2),
                                                                    gpus=8),
    "burn-in: a round lost": lambda: checks.evaluate_burn_in_stable("n", rounds(462.0, None), gpus=8),
    "burn-in: a round over fewer gpus": lambda: checks.evaluate_burn_in_stable("n", rounds(462.0, 462.0), gpus=4),
    "burn-in: a round lost, then one hung": lambda: checks.evaluate_burn_in_stable(
        "n", [*rounds(None, 462.0), *rounds(462.0, 462.0, 462.0, broken=3)[2:]], gpus=8),
    "burn-in: a round without sizes": lambda: checks.evaluate_burn_in_stable(
        "n", [*rounds(462.0), checks.BurnInRound(2, doc(sizes=()))], gpus=8),
    "burn-in: a round without a figure": lambda: checks.evaluate_burn_in_stable(
        "n", [*rounds(462.0), checks.BurnInRound(2, doc(large_message_avg_busbw_gbps=None)),
              checks.BurnInRound(3, doc(large_message_avg_busbw_gbps=None))], gpus=8),
    "burn-in: a dip": lambda: checks.evaluate_burn_in_stable("n", rounds(460.0, 368.0, 458.0, 300.0), gpus=8),
    "burn-in: at the tolerance": lambda: checks.evaluate_burn_in_stable("n", rounds(400.0, 360.0), gpus=8),
    "burn-in: a tighter tolerance": lambda: checks.evaluate_burn_in_stable("n", rounds(400.0, 390.0), gpus=8,
                                                                           tolerance=0.01),
}


@pytest.mark.parametrize("case", CASES)
def test_each_nccl_decision_is_recorded(case: str) -> None:
    check_recording("nccl", case, lambda: record(CASES[case]()))


# -------------------------------------------------------------------------------------------------
# Rules the recording pins, stated


def test_a_busbw_exactly_at_the_floor_passes_and_just_under_it_does_not() -> None:
    assert H100 is not None
    at = checks.evaluate_busbw("n", doc(large_message_avg_busbw_gbps=H100.minimum_gbps), H100)
    under = checks.evaluate_busbw("n", doc(large_message_avg_busbw_gbps=H100.minimum_gbps - 0.01), H100)
    assert (at.outcome, under.outcome) == (Outcome.PASS, Outcome.DEGRADED)


def test_a_burn_in_round_exactly_at_the_tolerance_is_no_dip() -> None:
    at = checks.evaluate_burn_in_stable("n", rounds(400.0, 360.0), gpus=8)
    under = checks.evaluate_burn_in_stable("n", rounds(400.0, 359.9), gpus=8)
    assert (at.outcome, under.outcome) == (Outcome.PASS, Outcome.DEGRADED)


def test_a_pair_exactly_at_its_floor_passes() -> None:
    assert checks.pair_busbw_call(job("a", "b", 300.0), None, (300.0, "peers")).ok is True
    assert checks.pair_busbw_call(job("a", "b", 299.9), None, (300.0, "peers")).ok is False


def test_the_ranks_asked_for_are_compared_exactly() -> None:
    for gpus, outcome in ((8, Outcome.PASS), (7, Outcome.FAIL), (9, Outcome.FAIL)):
        assert checks.evaluate_allreduce_completes("n", OK, gpus=gpus).outcome is outcome, gpus


def test_a_wrong_size_fails_even_when_the_summary_says_correct() -> None:
    v = checks.evaluate_allreduce_completes("n", dataclasses.replace(wrong(1), all_correct=True), gpus=8)
    assert v.outcome is Outcome.FAIL and v.summary == "wrong all-reduce results at 1 message size(s)"


def test_sizes_are_read_from_the_sweep() -> None:
    assert all(isinstance(s, SizeResult) for s in OK.sizes) and len(OK.sizes) == 30
