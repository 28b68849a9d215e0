"""compat.outcome-matches-prediction compares what each matrix pod did with what the engine
predicts, down to the CUDA error code: a pod failing with cudaErrorSystemDriverMismatch (803)
where cudaErrorInsufficientDriver (35) was predicted did not do what was predicted. Pinned where
mutation testing (scripts/mutation-score) found the comparison unpinned."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from test_checks_compat import COMPAT_BROKEN, a100_570, campaign, run_pod

from gpuconf.checks import compat
from gpuconf.compat import tables
from gpuconf.verdict import Outcome

NODE = "a100-570-0"


def with_init_error(outcome: Any, code: int) -> Any:
    """The pod's probe document with cudaFree(0) failing with ``code`` instead (an edited simulated
    document, as the other faults of the probe are made)."""
    doc = json.loads(outcome.logs["probe"])
    e = tables.cuda_error(code)
    error = {"code": e.code, "name": e.name, "message": e.message, "ms": 0.05, "timed_out": False}
    doc["init"] = {"call": "cudaFree(0)", **error}
    doc["device_count"] = {"value": 0, "result": {"call": "cudaGetDeviceCount", **error}}
    doc["exit_reason"] = f"CUDA init failed: cudaFree(0) returned {e.code} {e.name}: {e.message}"
    return dataclasses.replace(outcome, logs={**outcome.logs, "probe": json.dumps(doc)})


def test_a_pod_failing_with_803_where_35_was_predicted_fails_the_comparison() -> None:
    nodes = a100_570(COMPAT_BROKEN)
    rows = campaign(nodes).rows[NODE]
    row = next(r for r in rows if r.cuda == "13.0.2" and not r.env)
    assert {(p.result, p.error_code) for p in row.predicted} == {("runs", None), ("cuda-error", 35)}
    assert (row.observed.result, row.observed.error_code) == ("cuda-error", 35)
    observed = compat.observe(with_init_error(run_pod(nodes[0], row.pod, row.cuda), 803))
    assert (observed.result, observed.error_code) == ("cuda-error", 803)
    mismatched = dataclasses.replace(row, observed=observed)
    assert not mismatched.matches()

    v = compat.evaluate_outcome_matches(NODE, [mismatched if r is row else r for r in rows])
    assert v.outcome is Outcome.FAIL, v.message()
    assert v.summary.startswith(f"1 of {len(rows)} matrix pods on {NODE} did not do what gpuconf predict says: "
                                "nvidia/cuda:13.0.2-devel-ubuntu24.04 was predicted to be runs (")
    assert "or cuda-error cudaErrorInsufficientDriver (35): " in v.summary
    assert v.summary.endswith("and is cuda-error cudaErrorSystemDriverMismatch (803): system has unsupported "
                              "display driver / cuda driver combination")
    assert v.observed == ("nvidia/cuda:13.0.2-devel-ubuntu24.04: cuda-error cudaErrorSystemDriverMismatch (803): "
                          "system has unsupported display driver / cuda driver combination")
    # the same pod failing with the predicted code matches
    assert compat.evaluate_outcome_matches(NODE, rows).outcome is Outcome.PASS


def test_a_row_matches_a_prediction_of_the_same_result_and_for_cuda_errors_the_same_code() -> None:
    rows = campaign(a100_570(COMPAT_BROKEN)).rows[NODE]
    row = next(r for r in rows if r.cuda == "13.0.2" and not r.env)
    runs = compat.Observation("runs", "vector-add verified")
    rejected = compat.Observation("rejected", "unsatisfied condition: cuda>=13.0")
    assert dataclasses.replace(row, observed=runs).matches()
    assert dataclasses.replace(row, observed=compat.Observation("cuda-error", "35", 35)).matches()
    assert not dataclasses.replace(row, observed=compat.Observation("cuda-error", "804", 804)).matches()
    assert not dataclasses.replace(row, observed=rejected).matches()
    assert not dataclasses.replace(row, predicted=(), observed=runs).matches()
