"""Coverage accounting (issue 25): which selected GPU nodes a run tested, and why the others were not.
A node not tested is never PASS, a run that left one untested is not PASS, and every report says
"N of M GPU nodes tested" with the reason for each node left out."""

from __future__ import annotations

from typing import Any

import pytest

from gpuconf.report.model import (
    BUSY,
    CORDONED,
    NOT_READY,
    TAINTED,
    UNKNOWN_HARDWARE,
    UNPLACEABLE,
    UNTESTED_STATES,
    CheckResult,
    Coverage,
    RunRecord,
    UntestedNode,
    cluster_verdict,
    node_verdicts,
)

CORDONED_WHY = "h100-1 is cordoned (spec.unschedulable): give --include-cordoned to test it"


def untested(node: str, state: str, reason: str | None = None) -> UntestedNode:
    return UntestedNode(node, state, reason or f"{node} is {state}")


def result(node: str | None, outcome: str, check: str = "inventory.gpu-count") -> CheckResult:
    return CheckResult(check, node, outcome, f"suites/test_inventory.py::test_{check}[{node}]", 0.5)


def run(coverage: Coverage | None, **kw: Any) -> RunRecord:
    return RunRecord("simulated:healthy-h100", 1_700_000_000.0, 1_700_000_010.0, 0, coverage=coverage, **kw)


ONE_CORDONED = Coverage(("h100-0", "h100-1"), (untested("h100-1", CORDONED, CORDONED_WHY),))


# -- the line -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("coverage,line", [
    pytest.param(Coverage(("a", "b")), "2 of 2 GPU nodes tested", id="every node tested names no state"),
    pytest.param(Coverage(("a",)), "1 of 1 GPU node tested", id="one node is a node"),
    pytest.param(Coverage(()), "0 of 0 GPU nodes tested", id="no node selected"),
    pytest.param(ONE_CORDONED, "1 of 2 GPU nodes tested; 1 cordoned", id="a cordoned node"),
    pytest.param(Coverage(("a", "b"), (untested("b", TAINTED),)), "1 of 2 GPU nodes tested; 1 tainted",
                 id="a tainted node"),
    pytest.param(Coverage(("a", "b"), (untested("b", BUSY),)), "1 of 2 GPU nodes tested; 1 busy", id="a busy node"),
    pytest.param(Coverage(("a", "b"), (untested("b", NOT_READY),)), "1 of 2 GPU nodes tested; 1 NotReady",
                 id="a NotReady node is named as kubectl shows it"),
    pytest.param(Coverage(("a", "b"), (untested("b", UNKNOWN_HARDWARE),)),
                 "1 of 2 GPU nodes tested; 1 unknown hardware", id="unknown hardware"),
    pytest.param(Coverage(("a", "b"), (untested("b", UNPLACEABLE),)), "1 of 2 GPU nodes tested; 1 unplaceable",
                 id="an unplaceable node"),
    pytest.param(Coverage(tuple("abcdefgh"), (untested("h", NOT_READY), untested("g", BUSY), untested("a", CORDONED),
                                              untested("b", TAINTED), untested("c", CORDONED))),
                 "3 of 8 GPU nodes tested; 2 cordoned, 1 tainted, 1 busy, 1 NotReady",
                 id="several states are counted in the states' order whatever the entries' order"),
    pytest.param(Coverage(("a", "b"), (untested("a", "drained"), untested("b", BUSY))),
                 "0 of 2 GPU nodes tested; 1 busy, 1 drained", id="a state this version does not know comes last"),
    pytest.param(Coverage(("a", "b"), (untested("b", BUSY), untested("b", TAINTED), untested("z", CORDONED))),
                 "1 of 2 GPU nodes tested; 1 busy",
                 id="a node's second entry and a node not selected are not counted"),
])
def test_the_coverage_line(coverage: Coverage, line: str) -> None:
    assert coverage.line() == line
    assert coverage.tested == int(line.split()[0])


def test_the_states_are_those_of_the_contract_in_line_order() -> None:
    assert UNTESTED_STATES == ("cordoned", "tainted", "busy", "not-ready", "unknown-hardware", "unplaceable")


def test_a_node_left_out_has_its_reason_and_a_tested_one_none() -> None:
    assert ONE_CORDONED.reason("h100-1") == CORDONED_WHY
    assert ONE_CORDONED.reason("h100-0") is None and ONE_CORDONED.reason("elsewhere") is None


def test_coverage_round_trips_through_json() -> None:
    coverage = Coverage(("a", "b", "c"), (untested("b", TAINTED, "b has taint x=y:NoSchedule"), untested("c", BUSY)))
    doc = coverage.as_json()
    assert doc == {"selected": 3, "tested": 1, "line": "1 of 3 GPU nodes tested; 1 tainted, 1 busy",
                   "untested": [{"node": "b", "state": "tainted", "reason": "b has taint x=y:NoSchedule"},
                                {"node": "c", "state": "busy", "reason": "c is busy"}],
                   "nodes": ["a", "b", "c"]}
    assert Coverage.from_json(doc) == coverage


@pytest.mark.parametrize("doc", [
    None, "1 of 2", [], {}, {"nodes": "a,b"}, {"nodes": ["a", 1]}, {"nodes": ["a"], "untested": {"a": "busy"}},
    {"nodes": ["a"], "untested": [{"node": "a", "state": "busy"}]},
    {"nodes": ["a"], "untested": [{"node": "a", "state": None, "reason": "x"}]},
], ids=repr)
def test_malformed_coverage_reads_as_none(doc: Any) -> None:
    assert Coverage.from_json(doc) is None


# -- the verdicts -------------------------------------------------------------------------------------

@pytest.mark.parametrize("outcomes,expected", [
    pytest.param(["pass"], "not-tested", id="a passing check on an untested node does not make it PASS"),
    pytest.param(["not-tested"], "not-tested", id="skips stay NOT TESTED"),
    pytest.param(["pass", "fail"], "fail", id="a failing label check on an untested node still FAILs"),
    pytest.param(["degraded", "pass"], "degraded", id="a degraded check on an untested node still shows"),
])
def test_an_untested_node_is_never_pass(outcomes: list[str], expected: str) -> None:
    results = [result("h100-0", "pass")] + [result("h100-1", o, f"c{i}") for i, o in enumerate(outcomes)]
    assert node_verdicts(results, ONE_CORDONED) == {"h100-0": "pass", "h100-1": expected}


def test_an_untested_node_without_results_is_listed_not_tested() -> None:
    results = [result(None, "pass"), result("h100-0", "pass")]
    assert node_verdicts(results, ONE_CORDONED) == {"(cluster)": "pass", "h100-0": "pass", "h100-1": "not-tested"}
    assert node_verdicts(results) == {"(cluster)": "pass", "h100-0": "pass"}  # without the accounting, as before


@pytest.mark.parametrize("outcomes,coverage,extra,verdict", [
    pytest.param(["pass", "pass"], Coverage(("h100-0", "h100-1")), {}, "pass",
                 id="every selected node tested and passed is PASS"),
    pytest.param(["pass"], ONE_CORDONED, {}, "incomplete", id="an untested node keeps a passing run from PASS"),
    pytest.param([], Coverage(("h100-0",), (untested("h100-0", NOT_READY),)), {}, "incomplete",
                 id="no node tested at all is INCOMPLETE"),
    pytest.param(["pass", "fail"], ONE_CORDONED, {}, "fail", id="a failure stays FAIL"),
    pytest.param(["pass", "degraded"], ONE_CORDONED, {}, "degraded", id="a degraded check stays DEGRADED"),
    pytest.param(["pass"], None, {}, "pass", id="a run without the accounting is judged on its results"),
    pytest.param(["pass"], Coverage(("h100-0",)), {"interrupted": True}, "incomplete",
                 id="an interrupted run is INCOMPLETE"),
    pytest.param(["not-tested"], Coverage(("h100-0",)), {}, "not-tested",
                 id="a tested node whose every check skipped is NOT TESTED"),
    pytest.param([], ONE_CORDONED, {"error": "cannot reach the API server"}, "not-started",
                 id="a run that could not start is NOT STARTED"),
])
def test_the_cluster_verdict_counts_untested_nodes(outcomes: list[str], coverage: Coverage | None,
                                                   extra: dict[str, Any], verdict: str) -> None:
    results = [result("h100-0", o, f"c{i}") for i, o in enumerate(outcomes)]
    assert cluster_verdict(run(coverage, **extra), results) == verdict
