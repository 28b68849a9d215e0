"""The nccl-probe parser: the real no-driver run, a healthy 8-GPU document built from it, and
malformed output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuconf.probes import ProbeParseError
from gpuconf.probes.nccl import EXIT_CODES, parse_nccl_probe

NO_DRIVER = (Path(__file__).parent / "fixtures" / "probes" / "nccl-probe-no-driver.json").read_text()
GIB = 1 << 30


def healthy_8_gpu_document(*, busbw_at_large: float = 470.0, mismatches_at: int | None = None) -> str:
    """The real no-driver document edited into a healthy 8 x H100 NVLS sweep (8 B .. 1 GiB)."""
    doc = json.loads(NO_DRIVER)
    ok_nccl = {"code": 0, "name": "ncclSuccess", "message": "no error", "last_error": None}
    n = 8
    factor = 2 * (n - 1) / n
    sizes, size = [], 8
    while size <= GIB:
        busbw = busbw_at_large if size >= 64 << 20 else busbw_at_large * size / (64 << 20) + 1
        algbw = busbw / factor
        bad = 1 if mismatches_at == size else 0
        sizes.append({"bytes": size, "count": size // 4 or 1, "warmup": 5, "iters": 20,
                      "time_us": size / (algbw * 1e3), "time_us_per_gpu": [size / (algbw * 1e3)] * n,
                      "algbw_gbps": algbw, "busbw_gbps": busbw, "checked_elements": size // 4 or 1,
                      "mismatches": bad, "correct": not bad})
        size *= 2
    large = [s["busbw_gbps"] for s in sizes if s["bytes"] >= 64 << 20]
    wrong = sum(s["mismatches"] for s in sizes)
    doc.update(exit_code=5 if wrong else 0, exit_reason="wrong results" if wrong else "ok", nranks=n,
               failure=None)
    doc["local_gpus"] = [{"index": i, "name": "NVIDIA H100 80GB HBM3",
                          "uuid": f"GPU-{i:08x}-0000-0000-0000-000000000000",
                          "pci_bus_id": f"0000:{i:02x}:00.0", "total_memory_bytes": 85520809984,
                          "compute_capability": "9.0", "global_rank": i} for i in range(n)]
    doc["bootstrap"].update(status="ok", reason="unique id created locally")
    doc["comm_init"] = {"result": ok_nccl, "ms": 900.0, "nranks": n, "global_ranks": list(range(n)), "blocking": False}
    doc["memory"] = {"requested_max_bytes": 4 * GIB, "local_limit_bytes": GIB, "agreed_max_bytes": GIB,
                     "reduced": True, "reason": "send+recv buffers must fit", "free_bytes_min": 80 * GIB,
                     "total_bytes_min": 80 * GIB, "headroom_bytes": GIB, "headroom_rule": "1 GiB"}
    doc["sweep"] = {"pattern": "(rank+1)*(i%7+1)", "expected": "sum over ranks", "exact_in_float32": True,
                    "completed": True, "running_bytes": None, "sizes": sizes}
    peak = max(s["busbw_gbps"] for s in sizes)
    doc["summary"] = {"nranks": n, "local_gpus": n, "sizes_run": len(sizes), "busbw_factor": factor,
                      "peak_busbw_gbps": peak, "peak_algbw_gbps": peak / factor,
                      "peak_at_bytes": max(sizes, key=lambda s: s["busbw_gbps"])["bytes"],
                      "large_message_threshold_bytes": 64 << 20, "large_message_sizes": len(large),
                      "large_message_avg_busbw_gbps": sum(large) / len(large), "mismatches_total": wrong,
                      "all_correct": not wrong}
    doc["nccl_debug"].update(captured=True, lines_total=400, nccl_version="2.27.7+cuda13.0",
                             transports=["NVLS", "P2P/CUMEM"], transport_kinds=["NVLS", "P2P"], channel_lines=128,
                             network={"name": "IB", "plugin": None, "lines": []},
                             nvls={"supported": True, "channels": 16, "used": True, "lines": []},
                             gdr={"enabled": None, "lines": []}, warnings=[],
                             excerpt=["NCCL INFO NVLS multicast support is available on dev 0"],
                             excerpt_truncated=True)
    doc["nccl_debug"].pop("reason", None)
    return json.dumps(doc)


def test_the_real_no_driver_run_says_which_call_failed():
    report = parse_nccl_probe(NO_DRIVER, exit_code=3)
    assert report.exit_code == 3 and EXIT_CODES[3].startswith("a CUDA or NCCL call failed")
    assert report.failure["result"]["name"] == "cudaErrorInsufficientDriver"
    assert (report.sizes, report.peak_busbw_gbps, report.all_correct, report.nranks) == ((), None, None, None)
    assert report.bootstrap_status == "not-run"


def test_a_healthy_sweep_reports_bandwidth_with_the_transport_it_was_measured_on():
    report = parse_nccl_probe(healthy_8_gpu_document(), exit_code=0)
    assert report.all_correct and report.sweep_completed and report.nranks == 8
    assert report.large_message_avg_busbw_gbps == pytest.approx(470.0)
    assert report.peak_busbw_gbps == pytest.approx(470.0)
    assert report.nvls_used is True and "NVLS" in report.transports
    assert len(report.local_gpu_uuids) == 8 and report.sizes[-1].bytes == GIB


def test_wrong_results_are_visible_per_size():
    report = parse_nccl_probe(healthy_8_gpu_document(mismatches_at=1 << 20), exit_code=5)
    assert report.all_correct is False
    assert [s.bytes for s in report.sizes if not s.correct] == [1 << 20]


def test_a_summary_that_disagrees_with_its_own_sweep_is_rejected():
    doc = json.loads(healthy_8_gpu_document())
    doc["summary"]["peak_busbw_gbps"] = 900.0
    with pytest.raises(ProbeParseError, match="summary peak busbw 900.0 disagrees with the sweep"):
        parse_nccl_probe(json.dumps(doc))


@pytest.mark.parametrize("text,message", [
    ("", "no output"),
    ("#  out-of-place  in-place\n#  size  count", "output starts with"),
    (NO_DRIVER[:200], "ends before the JSON document is complete"),
    ((Path(__file__).parent / "fixtures" / "probes" / "cuda-probe-no-driver.json").read_text(),
     "expected a gpuconf.nccl-probe/v1 document, got schema 'gpuconf.cuda-probe/v1'"),
    (json.dumps({**json.loads(NO_DRIVER), "nranks": 0}), "at nranks"),
], ids=["empty", "nccl-tests text instead", "truncated", "the cuda-probe's document", "zero ranks"])
def test_malformed_output_is_rejected(text, message):
    with pytest.raises(ProbeParseError, match=message):
        parse_nccl_probe(text)


def test_exit_code_disagreement_is_an_error():
    with pytest.raises(ProbeParseError, match="the process exited 0 but its document says 3"):
        parse_nccl_probe(NO_DRIVER, exit_code=0)
