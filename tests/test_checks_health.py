"""The health checks' decisions and their thresholds table, on emulated probe output."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpuconf.checks.health import (
    ECC_CHECK,
    PENDING_REPAIR_CHECK,
    REMAP_FAILED_CHECK,
    evaluate_no_critical_xid,
    evaluate_no_pending_repair,
    evaluate_no_uncorrectable_ecc,
    evaluate_row_remapping,
    thresholds,
    xid_table,
)
from gpuconf.compat import tables
from gpuconf.compat.versions import parse_cuda
from gpuconf.probes.cuda import CudaProbeReport, parse_cuda_probe
from gpuconf.sim.emulate import Visible, cuda_probe_run
from gpuconf.sim.profile import expand, load_profile, with_faults
from gpuconf.verdict import Outcome, check

ABSENT = {"available": False, "reason": "nvmlDeviceGetEccMode: Not Supported"}


def run(faults: list[dict[str, Any]] | None = None) -> tuple[int, dict[str, Any]]:
    p = load_profile("healthy-h100")
    n = expand(with_faults(p, faults) if faults else p).node("h100-0")
    code, out = cuda_probe_run(n, visible=[Visible(g) for g in n.gpus], image_cuda=parse_cuda("13.0.2"), env={},
                               compat=True, started_at="2026-12-01T00:00:00.000Z", hostname=n.name)
    return code, json.loads(out)


def report(code: int, doc: dict[str, Any]) -> CudaProbeReport:
    return parse_cuda_probe(json.dumps(doc), exit_code=code)


def probe(faults: list[dict[str, Any]] | None = None) -> CudaProbeReport:
    return report(*run(faults))


ECC_FAULT = [{"id": "ecc-uncorrectable", "pool": "h100", "node": 0, "gpu": 3, "count": 2}]


def test_thresholds_of_the_ecc_check_are_any_uncorrectable_error_isolates():
    rows = thresholds(ECC_CHECK)
    assert {t.metric for t in rows} == {"ecc.volatile.uncorrected", "ecc.aggregate.uncorrected"}
    assert all(t.kind == "count" and t.above == 0 and t.severity == "isolate" and t.outcome == "fail" for t in rows)


def test_every_threshold_metric_is_a_probe_fact_with_a_source():
    for t in thresholds():
        assert t.source.startswith("https://docs.nvidia.com/"), t
        assert t.trips(True if t.kind == "flag" else 1) and not t.trips(0) and not t.trips(None)


def test_gpus_without_uncorrectable_errors_pass_with_every_gpu_in_the_evidence():
    verdict = evaluate_no_uncorrectable_ecc("h100-0", probe())
    assert verdict.outcome is Outcome.PASS and "8 GPU(s) on h100-0" in verdict.summary
    assert len(verdict.evidence) == 8 and "ecc.volatile.uncorrected=0" in verdict.evidence[0]


def test_a_gpu_with_uncorrectable_errors_fails_naming_its_uuid_and_counters():
    p = probe(ECC_FAULT)
    uuid = p.nvml_gpus[3].uuid
    verdict = evaluate_no_uncorrectable_ecc("h100-0", p)
    assert verdict.outcome is Outcome.FAIL
    assert f"GPU 3 {uuid} ecc.volatile.uncorrected=2 (> 0: isolate)" in verdict.summary
    assert f"GPU 3 {uuid} ecc.aggregate.uncorrected=2" in verdict.summary
    assert "2 uncorrectable ECC counter(s) over threshold on h100-0" in verdict.message()
    assert "remediation: Drain the node" in verdict.message()


def test_without_nvml_the_check_is_not_tested_with_the_reason():
    code, doc = run()
    doc["nvml"] = {"available": False, "reason": "libnvidia-ml.so.1: cannot open shared object file"}
    verdict = evaluate_no_uncorrectable_ecc("h100-0", report(code, doc))
    assert verdict.outcome is Outcome.NOT_TESTED and "libnvidia-ml.so.1" in verdict.summary


DISABLED = {"enabled": False, "pending": False, "volatile": {"corrected": 0, "uncorrected": 0},
            "aggregate": {"corrected": 0, "uncorrected": 0}}


@pytest.mark.parametrize("ecc", [ABSENT, DISABLED],
                         ids=["a consumer GPU without ECC support is not tested", "ECC disabled is not tested"])
def test_gpus_without_ecc_are_not_tested(ecc):
    code, doc = run()
    for g in doc["nvml"]["gpus"]:
        g["ecc"] = json.loads(json.dumps(ecc))
    verdict = evaluate_no_uncorrectable_ecc("h100-0", report(code, doc))
    assert verdict.outcome is Outcome.NOT_TESTED and "no GPU on h100-0 has ECC enabled" in verdict.summary


def test_a_gpu_without_ecc_beside_one_with_errors_still_fails():
    code, doc = run(ECC_FAULT)
    doc["nvml"]["gpus"][0]["ecc"] = dict(ABSENT)
    verdict = evaluate_no_uncorrectable_ecc("h100-0", report(code, doc))
    assert verdict.outcome is Outcome.FAIL and "GPU 0" not in verdict.summary
    assert any("GPU 0" in e and "not tested" in e for e in verdict.evidence)


def test_a_gpu_with_an_unrecovered_xid_fails_its_vector_add_with_999():
    code, doc = run([{"id": "xid-errors", "pool": "h100", "node": 0, "gpu": 3}])
    p = report(code, doc)
    assert code == 5 and "device(s) 3" in p.exit_reason
    bad = [d for d in p.devices if not d.vector_add_ok]
    assert [d.index for d in bad] == [3] and bad[0].vector_add.code == 999


def test_every_threshold_names_a_check_whose_severity_is_its_outcome():
    for t in thresholds():
        assert t.check is not None and check(t.check).severity == t.outcome, t
    assert {t.metric for t in thresholds(REMAP_FAILED_CHECK)} == {"remapped_rows.failure"}
    assert {t.metric for t in thresholds(PENDING_REPAIR_CHECK)} == {"remapped_rows.pending", "retired_pages.pending"}


def test_healthy_gpus_have_no_failed_or_pending_memory_repair():
    p = probe()
    remap, pending = evaluate_row_remapping("h100-0", p), evaluate_no_pending_repair("h100-0", p)
    for verdict in (remap, pending):
        assert verdict.outcome is Outcome.PASS and "8 GPU(s) on h100-0" in verdict.summary, verdict.message()
    assert "remapped_rows.failure=False" in remap.evidence[0]
    # H100 has row remapping, not page retirement: the retirement flag is listed unread, never taken as 0
    assert "remapped_rows.pending=False, retired_pages.pending=None (unread: retired_pages.pending)" \
        in pending.evidence[0]


def test_a_failed_row_remapping_fails_naming_the_gpu_and_the_rma_remedy():
    p = probe([{"id": "row-remap-failure", "pool": "h100", "node": 0, "gpu": 5}])
    verdict = evaluate_row_remapping("h100-0", p)
    assert verdict.outcome is Outcome.FAIL
    assert f"GPU 5 {p.nvml_gpus[5].uuid} remapped_rows.failure=True (set: isolate)" in verdict.summary
    assert "exhausted its spare rows" in verdict.message()
    assert evaluate_no_uncorrectable_ecc("h100-0", p).outcome is Outcome.PASS


def test_a_pending_row_remap_degrades_naming_the_gpu_and_the_reset():
    p = probe([{"id": "row-remap-pending", "pool": "h100", "node": 0, "gpu": 2}])
    verdict = evaluate_no_pending_repair("h100-0", p)
    assert verdict.outcome is Outcome.DEGRADED
    assert f"GPU 2 {p.nvml_gpus[2].uuid} remapped_rows.pending=True (set: reset)" in verdict.summary
    assert "1 pending memory repair counter(s) over threshold on h100-0" in verdict.summary
    assert "Reset the GPU to apply the remap" in verdict.message()
    assert evaluate_row_remapping("h100-0", p).outcome is Outcome.PASS
    assert evaluate_no_uncorrectable_ecc("h100-0", p).outcome is Outcome.PASS


def test_a_pending_page_retirement_on_an_older_gpu_degrades():
    code, doc = run()
    for g in doc["nvml"]["gpus"]:
        g["remapped_rows"] = {"available": False, "reason": "nvmlDeviceGetRemappedRows: Not Supported"}
        g["retired_pages"] = {"single_bit": 0, "double_bit": 1, "pending": g["index"] == 1}
    verdict = evaluate_no_pending_repair("h100-0", report(code, doc))
    assert verdict.outcome is Outcome.DEGRADED and "retired_pages.pending=True" in verdict.summary
    assert "GPU 1 " in verdict.summary and "GPU 0 " not in verdict.summary


def test_gpus_reading_neither_remapping_nor_retirement_are_not_tested():
    code, doc = run()
    for g in doc["nvml"]["gpus"]:
        g["remapped_rows"] = {"available": False, "reason": "nvmlDeviceGetRemappedRows: Not Supported"}
    verdict = evaluate_row_remapping("h100-0", report(code, doc))
    assert verdict.outcome is Outcome.NOT_TESTED
    assert "no GPU on h100-0 reads row remapping: all 8 GPU(s): " in verdict.summary
    assert "remapped rows not readable (nvmlDeviceGetRemappedRows: Not Supported)" in verdict.summary
    assert "nvmlDeviceGetRemappedRows: Not Supported" in verdict.summary


def xids(*values: int | None) -> list[tuple[str, int | None]]:
    return [(f"GPU {i} GPU-{i:04d}", v) for i, v in enumerate(values)]


def test_the_xid_table_has_unique_codes_and_every_severity():
    rows = tables.load("xid_codes")["xids"]
    assert len({r["code"] for r in rows}) == len(rows)
    table = xid_table()
    assert table[79].severity == "isolate" and table[119].severity == "reset" and table[13].severity == "monitor"


def test_no_xid_on_any_gpu_passes_with_the_source():
    verdict = evaluate_no_critical_xid("h100-0", xids(0, 0, 0), source="dcgm-exporter pod gpu-operator/x")
    assert verdict.outcome is Outcome.PASS and "no critical Xid on 3 GPU(s) of h100-0" in verdict.summary
    assert verdict.evidence[0] == "source: dcgm-exporter pod gpu-operator/x"


def test_a_critical_xid_fails_naming_the_gpu_the_code_and_the_action():
    verdict = evaluate_no_critical_xid("h100-0", xids(0, 119, 0), source="exporter")
    assert verdict.outcome is Outcome.FAIL
    assert "1 GPU(s) on h100-0 raised a critical Xid: GPU 1 GPU-0001 last Xid 119 GSP RPC timeout (reset)" \
        in verdict.summary
    assert any(e.startswith("Xid 119: drain the node and reset the GPU") for e in verdict.evidence)


def test_an_application_xid_is_recorded_not_failed():
    verdict = evaluate_no_critical_xid("h100-0", xids(13, 0), source="exporter")
    assert verdict.outcome is Outcome.PASS
    assert any("Xid 13 Graphics Engine Exception (monitor" in e for e in verdict.evidence)


def test_an_unknown_xid_fails_and_says_to_look_it_up():
    verdict = evaluate_no_critical_xid("h100-0", xids(0, 0, 999), source="exporter")
    assert verdict.outcome is Outcome.FAIL
    assert "GPU 2 GPU-0002 last Xid 999 (not in gpuconf's Xid table" in verdict.summary


def test_xid_unreadable_is_not_tested_with_the_reason():
    verdict = evaluate_no_critical_xid("h100-0", [], source="exporter", unavailable="no DCGM exporter pod on h100-0")
    assert verdict.outcome is Outcome.NOT_TESTED and "no DCGM exporter pod on h100-0" in verdict.summary
    verdict = evaluate_no_critical_xid("h100-0", xids(None, None), source="exporter")
    assert verdict.outcome is Outcome.NOT_TESTED and "no DCGM_FI_DEV_XID_ERRORS for any GPU" in verdict.summary


def test_a_gpu_without_the_xid_metric_leaves_the_node_not_tested_naming_it():
    verdict = evaluate_no_critical_xid("h100-0", xids(None, 0), source="exporter")
    assert verdict.outcome is Outcome.NOT_TESTED
    assert verdict.summary == ("exporter has no DCGM_FI_DEV_XID_ERRORS for 1 of 2 GPU(s) on h100-0, so they are not "
                               "judged: GPU 0 GPU-0000 (1 other GPU(s) read, no critical Xid)")
    verdict = evaluate_no_critical_xid("h100-0", xids(None, 79), source="exporter")  # a read GPU already fails
    assert verdict.outcome is Outcome.FAIL and "(not judged, no DCGM_FI_DEV_XID_ERRORS: GPU 0 GPU-0000)" in \
        verdict.summary


UNREAD = {"available": False, "reason": "nvmlDeviceGetTotalEccErrors: Unknown Error"}


def unread_ecc(doc: dict[str, Any], *gpus: int) -> None:
    """ECC enabled on ``gpus``, both uncorrected counters unreadable (the probe's absent counters)."""
    for i in gpus:
        ecc = doc["nvml"]["gpus"][i]["ecc"]
        ecc["volatile"]["uncorrected"] = dict(UNREAD)
        ecc["aggregate"]["uncorrected"] = dict(UNREAD)


def test_ecc_enabled_with_both_counters_unreadable_is_not_tested_never_a_silent_zero():
    code, doc = run()
    unread_ecc(doc, *range(8))
    verdict = evaluate_no_uncorrectable_ecc("h100-0", report(code, doc))
    assert verdict.outcome is Outcome.NOT_TESTED
    assert verdict.summary.startswith("the uncorrectable ECC counters of 8 of 8 GPU(s) on h100-0 could not be read, "
                                      "so they are not judged: GPU 0 ")
    assert "(ecc.volatile.uncorrected, ecc.aggregate.uncorrected: nvmlDeviceGetTotalEccErrors: Unknown Error)" in \
        verdict.summary


def test_one_gpu_with_unreadable_ecc_counters_is_named_and_the_node_not_passed():
    code, doc = run()
    unread_ecc(doc, 2)
    verdict = evaluate_no_uncorrectable_ecc("h100-0", report(code, doc))
    assert verdict.outcome is Outcome.NOT_TESTED
    uuid = doc["nvml"]["gpus"][2]["uuid"]
    assert verdict.summary == (
        f"the uncorrectable ECC counters of 1 of 8 GPU(s) on h100-0 could not be read, so they are not judged: GPU 2 "
        f"{uuid} (ecc.volatile.uncorrected, ecc.aggregate.uncorrected: nvmlDeviceGetTotalEccErrors: Unknown Error) "
        "(7 other GPU(s) read, none over threshold)")


def test_unreadable_ecc_counters_beside_a_gpu_over_threshold_still_fail_and_say_what_was_not_judged():
    code, doc = run(ECC_FAULT)
    unread_ecc(doc, 0)
    verdict = evaluate_no_uncorrectable_ecc("h100-0", report(code, doc))
    assert verdict.outcome is Outcome.FAIL and "(not judged, counters unreadable: GPU 0 " in verdict.summary


def test_a_counter_read_on_one_side_only_is_named_in_the_pass():
    code, doc = run()
    doc["nvml"]["gpus"][4]["ecc"]["aggregate"]["uncorrected"] = dict(UNREAD)
    verdict = evaluate_no_uncorrectable_ecc("h100-0", report(code, doc))
    assert verdict.outcome is Outcome.PASS
    assert verdict.summary.endswith("(not read: GPU 4 " + doc["nvml"]["gpus"][4]["uuid"]
                                    + " (ecc.aggregate.uncorrected: nvmlDeviceGetTotalEccErrors: Unknown Error))")
