"""The NCCL checks' decisions, on emulated nccl-probe documents (healthy, and with each NCCL fault)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from gpuconf.checks import nccl as checks
from gpuconf.compat import tables
from gpuconf.compat.versions import parse_cuda
from gpuconf.probes.nccl import NcclProbeReport, parse_nccl_probe
from gpuconf.sim.emulate import Visible, nccl_probe_run
from gpuconf.sim.profile import expand, load_profile, with_faults
from gpuconf.verdict import Outcome


def probe(profile: str = "healthy-h100", node: str = "h100-0", faults: list[dict] | None = None,
          iters: int = 20) -> NcclProbeReport:
    p = load_profile(profile)
    n = expand(with_faults(p, faults) if faults else p).node(node)
    code, out = nccl_probe_run(n, visible=[Visible(g) for g in n.gpus], image_cuda=parse_cuda("13.0.2"), env={},
                               started_at="2026-12-01T00:00:00.000Z", hostname=node, iters=iters)
    return parse_nccl_probe(out, exit_code=code)


H100 = checks.expected_floor("NVIDIA H100 80GB HBM3", 8)
HEALTHY_8 = probe()


def test_the_h100_board_is_expected_to_reach_the_nvls_floor():
    assert H100 is not None and (H100.figure_gbps, H100.transport) == (460, "NVLS")
    assert checks.expected_floor("H100", 4) is None  # a 4-GPU H100 box: no published figure
    a100 = checks.expected_floor("NVIDIA A100-SXM4-80GB", 8)
    assert a100 is not None and a100.transport == "P2P/NVLink"


def test_a_healthy_node_passes_every_nccl_check():
    report = probe()
    for verdict in (checks.evaluate_allreduce_completes("h100-0", report, gpus=8),
                    checks.evaluate_busbw("h100-0", report, H100), checks.evaluate_transport("h100-0", report, H100)):
        assert verdict.outcome is Outcome.PASS, verdict.message()


def test_a_hang_fails_completion_naming_the_size_and_leaves_busbw_untested():
    report = probe(faults=[{"id": "nccl-hang", "pool": "h100", "node": 0}])
    verdict = checks.evaluate_allreduce_completes("h100-0", report, gpus=8)
    assert verdict.outcome is Outcome.FAIL
    assert verdict.summary.startswith("the all-reduce hung at 1048576 bytes: timeout: all_reduce of 1048576 bytes")
    assert checks.evaluate_busbw("h100-0", report, H100).outcome is Outcome.NOT_TESTED


def test_a_slow_nvlink_degrades_busbw_with_the_floor_and_its_source():
    report = probe(faults=[{"id": "nccl-slow-link", "pool": "h100", "node": 0, "link": "nvlink", "factor": 0.5}])
    verdict = checks.evaluate_busbw("h100-0", report, H100)
    assert verdict.outcome is Outcome.DEGRADED
    assert "is below 460 GB/s less 5% for 8 x NVIDIA H100 80GB HBM3 over nvswitch, nvls" in verdict.summary
    assert verdict.expected == ">= 437 GB/s"
    assert checks.evaluate_transport("h100-0", report, H100).outcome is Outcome.PASS  # same transport, less speed


def test_a_declared_floor_overrides_the_data_and_unknown_hardware_is_not_judged():
    report = probe()
    assert checks.evaluate_busbw("h100-0", report, H100, declared_gbps=500).outcome is Outcome.DEGRADED
    unknown = checks.evaluate_busbw("h100-0", report, None)
    assert unknown.outcome is Outcome.NOT_TESTED and "recorded, not judged" in unknown.summary


def test_wrong_results_fail_completion():
    report = probe()
    bad = dataclasses.replace(report, sizes=(dataclasses.replace(report.sizes[-1], correct=False, mismatches=3),),
                              all_correct=False)
    verdict = checks.evaluate_allreduce_completes("h100-0", bad, gpus=8)
    assert verdict.outcome is Outcome.FAIL and "4294967296 B: 3 mismatches" in (verdict.observed or "")


def test_a_ring_without_nvls_on_an_nvswitch_hopper_board_fails_the_transport():
    report = dataclasses.replace(probe(), transports=("P2P/CUMEM",), nvls_used=False)
    verdict = checks.evaluate_transport("h100-0", report, H100)
    assert verdict.outcome is Outcome.DEGRADED
    assert verdict.summary == "NCCL chose P2P/CUMEM, not NVLS, for 8 x NVIDIA H100 80GB HBM3 over nvswitch, nvls"



def edited(edit) -> NcclProbeReport:
    """The healthy h100-0 document, edited as JSON and parsed again through the probe's schema."""
    p = load_profile("healthy-h100")
    n = expand(p).node("h100-0")
    code, out = nccl_probe_run(n, visible=[Visible(g) for g in n.gpus], image_cuda=parse_cuda("13.0.2"), env={},
                               started_at="2026-12-01T00:00:00.000Z", hostname="h100-0", iters=20)
    doc = json.loads(out)
    edit(doc)
    return parse_nccl_probe(json.dumps(doc), exit_code=code)


def no_sizes(doc: dict) -> None:
    doc["sweep"]["sizes"] = []


def test_a_completed_sweep_that_records_no_message_size_proves_nothing():
    """sweep.completed true with sizes [] passed "completed correctly at 0 message sizes"."""
    report = edited(no_sizes)
    assert report.sweep_completed is True and report.sizes == ()
    v = checks.evaluate_allreduce_completes("h100-0", report, gpus=8)
    assert (v.outcome, v.kind) == (Outcome.NOT_TESTED, "could-not-run")
    assert v.summary == ("the NCCL probe on h100-0 says its sweep completed but records no message size: no "
                         "all-reduce result to judge")
    # a rank of a pair job with such a document has not finished either
    rank = checks.RankResult(1, "h1", report)
    assert not rank.finished and rank.why() == "rank 1 on h1: its sweep records no message size"
    pair = checks.combine_job("p", ("h0", "h1"), [checks.RankResult(0, "h0", HEALTHY_8), rank])
    call = checks.pair_completion_call(pair)
    assert call.ok is False and call.text == "h0 + h1: rank 1 on h1: its sweep records no message size"


def test_an_all_reduce_over_fewer_gpus_than_asked_for_fails_naming_both_counts():
    """A 1-of-8 run completed correctly, and passed; the GPUs asked for were never compared."""
    p = load_profile("healthy-h100")
    n = expand(p).node("h100-0")
    code, out = nccl_probe_run(n, visible=[Visible(n.gpus[0])], image_cuda=parse_cuda("13.0.2"), env={},
                               started_at="2026-12-01T00:00:00.000Z", hostname="h100-0", iters=20)
    one = parse_nccl_probe(out, exit_code=code)
    assert one.exit_code == 0 and one.nranks == 1
    v = checks.evaluate_allreduce_completes("h100-0", one, gpus=8)
    assert v.outcome is Outcome.FAIL
    assert v.summary == ("the all-reduce ran over 1 rank(s) where its pod asked for 8 GPUs: the probe used 1 GPU(s), "
                         "so the job did not span them all")
    assert (v.expected, v.observed) == ("8 ranks, one per GPU asked for", "1 ranks")
    assert v.evidence == (f"GPU {n.gpus[0].uuid}",)
    ok = checks.evaluate_allreduce_completes("h100-0", HEALTHY_8, gpus=8)
    assert (ok.outcome, ok.summary) == (Outcome.PASS, "all-reduce over 8 GPUs completed correctly at 30 message "
                                                      "sizes")
    # a document that does not say how many ranks ran is not judged
    blind = checks.evaluate_allreduce_completes("h100-0", dataclasses.replace(HEALTHY_8, nranks=None), gpus=8)
    assert (blind.outcome, blind.kind) == (Outcome.NOT_TESTED, "could-not-run")
    assert blind.summary == ("the NCCL probe on h100-0 records no rank count: whether the all-reduce ran over the 8 "
                             "GPUs asked for is unknown")
    # and a burn-in round over fewer GPUs is a round that did not complete correctly
    short = checks.evaluate_burn_in_stable("h100-0", [checks.BurnInRound(1, HEALTHY_8), checks.BurnInRound(2, one)],
                                           gpus=8)
    assert short.outcome is Outcome.FAIL
    assert short.summary.startswith("1 of 2 burn-in rounds on h100-0 did not complete correctly: round 2: the "
                                    "all-reduce ran over 1 rank(s)")


@pytest.mark.parametrize("capacity,allocatable,holders,outcome,text", [
    (8, 8, [], Outcome.PASS, "all 8 GPUs allocatable and free"),
    (8, 7, [], Outcome.FAIL, "gpu-node-7 has 7/8 GPUs allocatable"),
    (8, 8, [checks.GpuHolder("team-a", "train-0", 2)], Outcome.NOT_TESTED,
     "gpu-node-7 has 2 of 8 GPUs in use by other pods (team-a/train-0: 2)"),
])
def test_preflight_names_the_node_that_cannot_take_the_job(capacity, allocatable, holders, outcome, text):
    verdict = checks.evaluate_preflight("gpu-node-7", capacity=capacity, allocatable=allocatable, holders=holders)
    assert verdict.outcome is outcome and verdict.summary.startswith(text)


def test_gpu_holders_are_counted_per_node_without_the_runs_own_pods():
    pods = [
        {"metadata": {"namespace": "team-a", "name": "p"}, "spec": {"nodeName": "n1", "containers": [
            {"resources": {"limits": {"nvidia.com/gpu": "2"}}}, {"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}},
        {"metadata": {"namespace": "gpuconf-run", "name": "probe"}, "spec": {"nodeName": "n1", "containers": [
            {"resources": {"limits": {"nvidia.com/gpu": "8"}}}]}},
        {"metadata": {"namespace": "team-b", "name": "cpu"}, "spec": {"nodeName": "n2", "containers": [{}]}},
        {"metadata": {"namespace": "team-b", "name": "pending"}, "spec": {"containers": [
            {"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}},
    ]
    assert checks.holders_by_node(pods, exclude_namespace="gpuconf-run") == {
        "n1": [checks.GpuHolder("team-a", "p", 3)]}


# --- across nodes: pairing, re-pairing, blame -------------------------------------------------

HEALTHY = probe()
HUNG = probe(faults=[{"id": "nccl-hang", "pool": "h100", "node": 0}])


def job(a: str, b: str, busbw: float | None = 369.6, *, hung_rank: int | None = None,
        network: str = "IB") -> checks.JobResult:
    ranks = []
    for rank, node in enumerate((a, b)):
        doc = HUNG if rank == hung_rank else dataclasses.replace(HEALTHY, large_message_avg_busbw_gbps=busbw,
                                                                 network=network)
        ranks.append(checks.RankResult(rank, node, doc))
    return checks.combine_job(f"{a}-{b}", (a, b), ranks)


def test_nodes_are_paired_within_like_hardware_and_the_odd_one_out_is_kept():
    pairs, odd = checks.first_round({"8 x H100": ["n0", "n1", "n2", "n3", "n4"], "8 x A100": ["a0", "a1"]})
    assert pairs == [("n0", "n1"), ("n2", "n3"), ("a0", "a1")] and odd == ["n4"]


def test_failing_pairs_and_the_odd_node_are_re_paired_with_passing_nodes_in_disjoint_rounds():
    group_of = dict.fromkeys(["n0", "n1", "n2", "n3", "n4"], "h100")
    rounds = checks.second_round([(("n0", "n1"), True), (("n2", "n3"), False)], ["n4"], group_of)
    assert rounds == [[("n2", "n0"), ("n3", "n1")], [("n4", "n0")]]
    for pairs in rounds:  # a node takes one job at a time
        nodes = [n for p in pairs for n in p]
        assert len(nodes) == len(set(nodes))
    assert checks.second_round([(("n0", "n1"), False)], [], group_of) == []  # nobody known good


def busbw_calls(jobs: list[checks.JobResult], floor=None) -> list[checks.PairCall]:
    return [checks.pair_busbw_call(j, floor, checks.peer_floor(jobs)) for j in jobs]


def test_a_slow_nic_is_isolated_by_re_pairing_and_only_that_node_is_degraded():
    jobs = [job("h0", "h1"), job("h2", "h3", 184.8), job("h2", "h0", 184.8), job("h3", "h1")]
    calls = busbw_calls(jobs)
    cid = "nccl.pairwise-busbw-above-floor"
    v = checks.evaluate_pairwise(cid, "h2", calls)
    assert v.outcome is Outcome.DEGRADED
    assert v.summary.startswith("h2 is isolated: every pair with it failed (h2 + h3: 184.8 GB/s over IB is below "
                                "332.64 GB/s (90% of the fastest like pair (h0 + h1: 369.6 GB/s))")
    assert "while h3, h0 passed with another node" in v.summary
    for node in ("h0", "h1", "h3"):
        assert checks.evaluate_pairwise(cid, node, calls).outcome is Outcome.PASS, node
    assert "h2 + h3" in checks.evaluate_pairwise(cid, "h3", calls).summary  # the failing pair stays in evidence


def test_a_failing_pair_that_cannot_be_re_paired_names_the_pair_not_a_node():
    calls = [checks.pair_completion_call(job("h0", "h1", hung_rank=1))]
    for node in ("h0", "h1"):
        v = checks.evaluate_pairwise("nccl.pairwise-completes", node, calls)
        assert v.outcome is Outcome.FAIL
        assert v.summary.startswith("pair h0 + h1: rank 1 on h1 hung at 1048576 bytes")
        assert f"{node} could not be isolated (no partner of it passed with another node)" in v.summary


def test_a_healthy_pair_passes_completion_and_the_declared_nic_floor():
    floor = tables.inter_node_floor(400, 8)
    assert floor is not None and floor.figure_gbps == 368
    calls = [checks.pair_busbw_call(job("h0", "h1"), floor, None)]
    v = checks.evaluate_pairwise("nccl.pairwise-busbw-above-floor", "h0", calls)
    assert v.outcome is Outcome.PASS and "369.6 GB/s over IB >= 349.6 GB/s (368 GB/s less 5% for 8 x InfiniBand" \
        in v.summary
    c = checks.evaluate_pairwise("nccl.pairwise-completes", "h1", [checks.pair_completion_call(job("h0", "h1"))])
    assert c.outcome is Outcome.PASS and "all-reduce completed correctly" in c.summary


def test_a_lone_pair_without_a_nic_figure_or_over_sockets_is_not_judged():
    (alone,) = busbw_calls([job("h0", "h1")])
    assert alone.ok is None and "no NIC figure declared and no like pair to compare with" in alone.text
    (socket,) = busbw_calls([job("h0", "h1", 2.4, network="Socket")], tables.inter_node_floor(400, 8))
    assert socket.ok is None and "TCP sockets" in socket.text
    v = checks.evaluate_pairwise("nccl.pairwise-busbw-above-floor", "h0", [alone])
    assert v.outcome is Outcome.NOT_TESTED


def test_the_multinode_job_passes_with_its_busbw_and_fails_naming_ranks_that_did_not_finish():
    ok = checks.evaluate_multinode(job("h0", "h1"), "h0: 349.6 GB/s")
    assert ok.outcome is Outcome.PASS and ok.node is None and "at 369.6 GB/s" in ok.summary
    assert "floor of the slowest node: h0: 349.6 GB/s" in ok.evidence
    missing = checks.combine_job("mn", ("h0", "h1", "h2"), [
        checks.RankResult(0, "h0", HUNG), checks.RankResult(1, "h1", HUNG),
        checks.RankResult(2, "h2", None, "never placed: Pending Unschedulable")])
    bad = checks.evaluate_multinode(missing, None)
    assert bad.outcome is Outcome.FAIL and bad.summary.startswith("the all-reduce across 3 nodes (h0, h1, h2) did not "
                                                                  "complete: rank 0 on h0 hung at 1048576 bytes")
    assert "rank 2 on h2: never placed: Pending Unschedulable" in bad.summary and bad.observed == \
        "3 of 3 ranks did not finish"


def test_a_node_short_of_the_gpus_its_pool_has_is_named_by_the_preflight():
    peers = checks.pool_gpu_counts([("h100-0", "H100", 7), ("h100-1", "H100", 8), ("a100-0", "A100", 4)])
    assert peers == {"h100-0": 8, "h100-1": 8, "a100-0": 4}
    verdict = checks.evaluate_preflight("h100-0", capacity=7, allocatable=7, holders=[], expected=peers["h100-0"],
                                        expected_from="its pool's other nodes have")
    assert verdict.outcome is Outcome.FAIL
    assert verdict.summary.startswith("h100-0 has 7/8 GPUs allocatable (its pool's other nodes have 8)")
    # its remedy names the check that fails with it (a GPU gone), not the allocatable one, which passes
    assert "inventory.gpu-count-matches-expected" in verdict.remediation
    assert "allocatable-matches-capacity" not in verdict.remediation
    unhealthy = checks.evaluate_preflight("h100-1", capacity=8, allocatable=7, holders=[], expected=8)
    assert "marks 1 of the node's 8 GPUs unhealthy (see inventory.allocatable-matches-capacity)" in \
        unhealthy.remediation and "gpu-count" not in unhealthy.remediation
    same = checks.evaluate_preflight("h100-1", capacity=8, allocatable=8, holders=[], expected=8)
    assert same.outcome is Outcome.PASS


# --- burn-in ----------------------------------------------------------------------------------------

def test_the_preflight_pass_says_how_the_job_asks_for_the_gpus():
    note = "; 1 device-tainted GPU left out (gpu-3 (GPU-3): gpu.nvidia.com/xid=79:NoSchedule)"
    v = checks.evaluate_preflight("h200-0", capacity=7, allocatable=7, holders=[], note=note)
    assert v.outcome is Outcome.PASS and v.summary == f"all 7 GPUs allocatable and free{note}"


def burn_in_rounds(*busbw: float | None, hung: int | None = None) -> list[checks.BurnInRound]:
    """Rounds from the emulated healthy H100 document, each with its large-message busbw (None: no
    document), and round ``hung`` from the nccl-hang document."""
    healthy, hanging = probe(iters=200), probe(faults=[{"id": "nccl-hang", "pool": "h100", "node": 0}], iters=200)
    rounds = []
    for number, figure in enumerate(busbw, start=1):
        if number == hung:
            rounds.append(checks.BurnInRound(number, hanging))
        elif figure is None:
            rounds.append(checks.BurnInRound(number, None, "no output: Failed DeadlineExceeded"))
        else:
            rounds.append(checks.BurnInRound(number, dataclasses.replace(healthy,
                                                                         large_message_avg_busbw_gbps=figure)))
    return rounds


def test_burn_in_rounds_that_agree_pass_with_every_round_in_the_evidence():
    verdict = checks.evaluate_burn_in_stable("h100-0", burn_in_rounds(462.0, 455.5, 470.1), gpus=8)
    assert verdict.outcome is Outcome.PASS, verdict.message()
    assert verdict.summary == ("3 rounds completed correctly; large-message busbw 455.5..470.1 GB/s, within 10% of "
                               "the best round")
    assert verdict.evidence == ("round 1: 462 GB/s large-message busbw (200 iterations a size), exit 0 (ok)",
                                "round 2: 455.5 GB/s large-message busbw (200 iterations a size), exit 0 (ok)",
                                "round 3: 470.1 GB/s large-message busbw (200 iterations a size), exit 0 (ok)")


def test_a_burn_in_round_that_hangs_fails_naming_the_round():
    verdict = checks.evaluate_burn_in_stable("h100-0", burn_in_rounds(462.0, 462.0, 462.0, hung=2), gpus=8)
    assert verdict.outcome is Outcome.FAIL  # a hang is a failure although the check's severity is degraded
    assert verdict.summary.startswith("1 of 3 burn-in rounds on h100-0 did not complete correctly: round 2: the "
                                      "all-reduce hung at 1048576 bytes")
    assert verdict.observed == "2/3 completed"
    assert verdict.evidence[1].startswith("round 2: no large-message figure (200 iterations a size), exit 6 (timeout: "
                                          "all_reduce")
    lost = checks.evaluate_burn_in_stable("h100-0", burn_in_rounds(462.0, None), gpus=8)
    assert lost.outcome is Outcome.FAIL
    assert "round 2 produced no nccl-probe document (no output: Failed DeadlineExceeded)" in lost.summary


def test_a_burn_in_round_20_percent_slower_is_degraded_naming_the_round():
    verdict = checks.evaluate_burn_in_stable("h100-0", burn_in_rounds(460.0, 368.0, 458.0), gpus=8)
    assert verdict.outcome is Outcome.DEGRADED
    assert verdict.summary == ("large-message busbw on h100-0 dipped more than 10% below its best round (round 1, "
                               "460 GB/s): round 2 368 GB/s (20% below); an intermittent link, clock or thermal "
                               "problem")
    assert verdict.expected == "every round >= 414 GB/s (10% below the best)"
    assert verdict.observed == "460, 368, 458 GB/s"
    assert "nvlink -e" in verdict.message()  # the remediation
    assert checks.evaluate_burn_in_stable("h100-0", [], gpus=8).outcome is Outcome.NOT_TESTED


def test_the_burn_in_pod_asks_for_more_iterations_and_the_simulated_probe_runs_them():
    from gpuconf.probe_pods import make_nccl_probe_pod

    pod = make_nccl_probe_pod(name="nccl-bi1-h100-0", namespace="ns", run_id="r", check="nccl", node="h100-0",
                              gpu_count=8, iters=200, warmup=10)
    command = next(c for c in pod["spec"]["containers"] if c["name"] == "probe")["command"]
    assert command[1:] == ["--timeout", "300", "--warmup", "10", "--iters", "200"]
    plain = make_nccl_probe_pod(name="x", namespace="ns", run_id="r", check="nccl", node="h100-0", gpu_count=8)
    assert next(c for c in plain["spec"]["containers"] if c["name"] == "probe")["command"][1:] == ["--timeout", "300"]
    with pytest.raises(ValueError, match="at least one iteration"):
        make_nccl_probe_pod(name="x", namespace="ns", run_id="r", check="nccl", node="h100-0", gpu_count=8, iters=0)
    n = expand(load_profile("healthy-h100")).node("h100-0")
    code, out = nccl_probe_run(n, visible=[Visible(g) for g in n.gpus], image_cuda=parse_cuda("13.0.2"), env={},
                               started_at="2026-12-01T00:00:00.000Z", hostname="h100-0", iters=200, warmup=10)
    doc = parse_nccl_probe(out, exit_code=code).raw
    assert (doc["args"]["iters"], doc["args"]["warmup"], doc["args"]["iters_large"]) == (200, 10, 50)
    assert {(s["iters"], s["warmup"]) for s in doc["sweep"]["sizes"]} == {(200, 10), (50, 10)}


def test_a_node_without_nvls_is_named_by_the_transport_check_and_its_twin_passes():
    """Per-node NCCL transport: one NVSwitch node falls back from NVLS to the NVLink ring."""
    report = probe(faults=[{"id": "nccl-nvls-unavailable", "pool": "h100", "node": 0}])
    verdict = checks.evaluate_transport("h100-0", report, H100)
    assert verdict.outcome is Outcome.DEGRADED
    assert verdict.summary == ("NCCL chose P2P/CUMEM, not NVLS, for 8 x NVIDIA H100 80GB HBM3 over nvswitch, nvls")
    assert report.peak_busbw_gbps is not None and report.peak_busbw_gbps < H100.figure_gbps
    twin = probe(node="h100-1", faults=[{"id": "nccl-nvls-unavailable", "pool": "h100", "node": 0}])
    assert checks.evaluate_transport("h100-1", twin, H100).outcome is Outcome.PASS


def test_the_floor_s_model_is_the_one_cuda_names_in_the_probe():
    """The suite picks the busbw floor and transport for the GPU model the all-reduce ran on, as CUDA in
    the probe names it, over a GFD label that may be stale; a job over several models, or a document
    naming none, leaves the label to speak."""
    assert checks.probed_gpu(HEALTHY_8) == "NVIDIA H100 80GB HBM3"
    assert checks.expected_floor(checks.probed_gpu(HEALTHY_8) or "NVIDIA-L40S", 8) == H100
    gpus = HEALTHY_8.raw["local_gpus"]
    mixed = dataclasses.replace(HEALTHY_8, raw={**HEALTHY_8.raw, "local_gpus": [*gpus[:7], {**gpus[7],
                                                                                          "name": "NVIDIA H200"}]})
    assert checks.probed_gpu(mixed) is None
    assert checks.probed_gpu(dataclasses.replace(HEALTHY_8, raw={**HEALTHY_8.raw, "local_gpus": []})) is None
    unnamed = [{**g, "name": ""} for g in gpus]
    assert checks.probed_gpu(dataclasses.replace(HEALTHY_8, raw={**HEALTHY_8.raw, "local_gpus": unnamed})) is None
