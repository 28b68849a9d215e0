"""The health checks' decisions and their thresholds table, on emulated probe output."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpuconf.checks.health import ECC_CHECK, evaluate_no_uncorrectable_ecc, thresholds
from gpuconf.compat.versions import parse_cuda
from gpuconf.probes.cuda import CudaProbeReport, parse_cuda_probe
from gpuconf.sim.emulate import Visible, cuda_probe_run
from gpuconf.sim.profile import expand, load_profile, with_faults
from gpuconf.verdict import Outcome

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
