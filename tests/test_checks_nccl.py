"""The NCCL checks' decisions, on emulated nccl-probe documents (healthy, and with each NCCL fault)."""

from __future__ import annotations

import dataclasses

import pytest

from gpuconf.checks import nccl as checks
from gpuconf.compat.versions import parse_cuda
from gpuconf.probes.nccl import NcclProbeReport, parse_nccl_probe
from gpuconf.sim.emulate import Visible, nccl_probe_run
from gpuconf.sim.profile import expand, load_profile, with_faults
from gpuconf.verdict import Outcome


def probe(profile: str = "healthy-h100", node: str = "h100-0", faults: list[dict] | None = None) -> NcclProbeReport:
    p = load_profile(profile)
    n = expand(with_faults(p, faults) if faults else p).node(node)
    code, out = nccl_probe_run(n, visible=[Visible(g) for g in n.gpus], image_cuda=parse_cuda("13.0.2"), env={},
                               started_at="2026-12-01T00:00:00.000Z", hostname=node)
    return parse_nccl_probe(out, exit_code=code)


H100 = checks.expected_floor("NVIDIA H100 80GB HBM3", 8)


def test_the_h100_board_is_expected_to_reach_the_nvls_floor():
    assert H100 is not None and (H100.figure_gbps, H100.transport) == (460, "NVLS")
    assert checks.expected_floor("H100", 4) is None  # a 4-GPU H100 box: no published figure
    a100 = checks.expected_floor("NVIDIA A100-SXM4-80GB", 8)
    assert a100 is not None and a100.transport == "P2P/NVLink"


def test_a_healthy_node_passes_every_nccl_check():
    report = probe()
    for verdict in (checks.evaluate_allreduce_completes("h100-0", report),
                    checks.evaluate_busbw("h100-0", report, H100), checks.evaluate_transport("h100-0", report, H100)):
        assert verdict.outcome is Outcome.PASS, verdict.message()


def test_a_hang_fails_completion_naming_the_size_and_leaves_busbw_untested():
    report = probe(faults=[{"id": "nccl-hang", "pool": "h100", "node": 0}])
    verdict = checks.evaluate_allreduce_completes("h100-0", report)
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
    verdict = checks.evaluate_allreduce_completes("h100-0", bad)
    assert verdict.outcome is Outcome.FAIL and "4294967296 B: 3 mismatches" in (verdict.observed or "")


def test_a_ring_without_nvls_on_an_nvswitch_hopper_board_fails_the_transport():
    report = dataclasses.replace(probe(), transports=("P2P/CUMEM",), nvls_used=False)
    verdict = checks.evaluate_transport("h100-0", report, H100)
    assert verdict.outcome is Outcome.DEGRADED
    assert verdict.summary == "NCCL chose P2P/CUMEM, not NVLS, for 8 x NVIDIA H100 80GB HBM3 over nvswitch, nvls"


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
