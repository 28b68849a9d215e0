"""Coverage accounting (issue 25): which selected GPU nodes a run tested, and why the others were not.
A node not tested is never PASS, a run that left one untested is not PASS, and every report says
"N of M GPU nodes tested" with the reason for each node left out."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
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
    assert UNTESTED_STATES == ("cordoned", "tainted", "busy", "not-ready", "unknown-hardware", "unplaceable",
                               "missing-shard")


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


# -- the headline -------------------------------------------------------------------------------------

FOUR_LEFT_OUT = Coverage(tuple(f"n{i}" for i in range(6)), tuple(
    untested(f"n{i}", state) for i, state in zip(range(2, 6), (CORDONED, TAINTED, BUSY, NOT_READY), strict=True)))


@pytest.mark.parametrize("outcomes,coverage,extra,headline", [
    pytest.param(["pass"], ONE_CORDONED, {},
                 f"1 of 2 GPU nodes tested; 1 cordoned: h100-1 ({CORDONED_WHY}). The tested nodes passed every check "
                 "that applied; the others cannot be handed over until tested.",
                 id="INCOMPLETE by coverage names each node left out with its reason"),
    pytest.param(["pass"], ONE_CORDONED, {"interrupted": True},
                 "The run was stopped before it finished: no failure so far, but not every check ran. 1 of 2 GPU nodes "
                 f"tested; 1 cordoned: h100-1 ({CORDONED_WHY}). The tested nodes passed every check that applied; the "
                 "others cannot be handed over until tested.", id="INCOMPLETE by both says both"),
    pytest.param(["pass"], Coverage(("h100-0",)), {"interrupted": True},
                 "The run was stopped before it finished: no failure so far, but not every check ran",
                 id="INCOMPLETE by an interruption alone keeps its wording"),
    pytest.param([], Coverage(("h100-0",), (untested("h100-0", NOT_READY, "h100-0 is NotReady"),)), {},
                 "0 of 1 GPU node tested; 1 NotReady: h100-0 (h100-0 is NotReady). No GPU node could be tested; none "
                 "can be handed over until tested.", id="no node tested"),
    pytest.param(["pass"], FOUR_LEFT_OUT, {},
                 "2 of 6 GPU nodes tested; 1 cordoned, 1 tainted, 1 busy, 1 NotReady: n2 (n2 is cordoned), "
                 "n3 (n3 is tainted), n4 (n4 is busy) and 1 more (see Not tested nodes). The tested nodes passed "
                 "every check that applied; the others cannot be handed over until tested.",
                 id="many nodes left out: three named, the rest counted"),
    pytest.param(["pass"], Coverage(("h100-0", "h100-1")), {},
                 "All 2 of 2 GPU nodes tested and passed every check that applied: they can be handed over",
                 id="PASS names the count"),
    pytest.param(["pass"], None, {}, "All 1 node(s) passed every check that applied: they can be handed over",
                 id="PASS without the accounting as before"),
    pytest.param(["fail"], ONE_CORDONED, {},
                 f"1 of 2 node(s) fail: h100-0. 1 of 2 GPU nodes tested; 1 cordoned: h100-1 ({CORDONED_WHY})",
                 id="FAIL appends the nodes left out"),
    pytest.param(["degraded"], Coverage(("h100-0",)), {}, "1 of 1 node(s) degraded: h100-0",
                 id="DEGRADED with every node tested says nothing more"),
])
def test_the_headline_says_what_is_missing(outcomes: list[str], coverage: Coverage | None, extra: dict[str, Any],
                                           headline: str) -> None:
    from gpuconf.report.writers import _headline

    results = [result("h100-0", o, f"c{i}") for i, o in enumerate(outcomes)]
    record = run(coverage, **extra)
    assert _headline(record, cluster_verdict(record, results), results) == headline


# -- every format carries it ----------------------------------------------------------------------------

RESULTS = [result("h100-0", "pass"), result("h100-0", "pass", "smoke.vector-add"),
           result("h100-1", "pass"), result(None, "pass", "dra.driver-installed")]
NOT_READY_WHY = "h100-2 is NotReady (KubeletNotReady: container runtime is down): fix the node, then run again"
TWO_LEFT_OUT = Coverage(("h100-0", "h100-1", "h100-2"),
                        (untested("h100-1", CORDONED, CORDONED_WHY), untested("h100-2", NOT_READY, NOT_READY_WHY)))
LINE = "1 of 3 GPU nodes tested; 1 cordoned, 1 NotReady"


def test_markdown_gives_the_line_near_the_top_and_each_node_left_out_with_its_reason(tmp_path: Path) -> None:
    from gpuconf.report.writers import write_markdown

    md = write_markdown(run(TWO_LEFT_OUT), RESULTS, tmp_path / "report.md").read_text().splitlines()
    assert md[2].startswith(f"**INCOMPLETE**: {LINE}: h100-1 ({CORDONED_WHY}), h100-2 ({NOT_READY_WHY}).")
    assert md[4] == f"**Coverage**: {LINE}"
    section = md.index("## Not tested nodes")
    assert md[section + 2:section + 4] == [f"- h100-1 (cordoned): {CORDONED_WHY}",
                                           f"- h100-2 (NotReady): {NOT_READY_WHY}"]
    assert [line for line in md if line.startswith("| h100")] == [
        "| h100-0 | PASS |", "| h100-1 | NOT TESTED (cordoned) |", "| h100-2 | NOT TESTED (NotReady) |"]


def test_markdown_without_the_accounting_has_no_coverage(tmp_path: Path) -> None:
    from gpuconf.report.writers import write_markdown

    md = write_markdown(run(None), RESULTS, tmp_path / "report.md").read_text()
    assert "Coverage" not in md and "Not tested nodes" not in md and "| h100-1 | PASS |" in md


def test_html_gives_the_line_under_the_verdict_and_a_row_per_node_left_out(tmp_path: Path) -> None:
    from gpuconf.report.writers import write_html

    html = write_html(run(TWO_LEFT_OUT), RESULTS, tmp_path / "report.html").read_text()
    verdict = html[html.index('<section id="verdict"'):html.index("</section>")]
    assert '<div class="word">INCOMPLETE</div>' in verdict
    assert f'<div class="coverage" id="coverage">{LINE}</div>' in verdict
    assert "node(s) tested" not in verdict  # the line says it, once
    assert html.count('<tr class="untested-node"') == 2
    assert ('<tr class="untested-node" data-node="h100-1"><td>h100-1</td><td><span class="tag not-tested">cordoned'
            f'</span></td><td>{CORDONED_WHY}</td></tr>') in html
    assert ('data-node="h100-2"><td>h100-2</td><td><span class="tag not-tested">NotReady</span></td>'
            f'<td>{NOT_READY_WHY}</td>') in html


def _grid_row(html: str, node: str) -> str:
    start = html.index(f"<tr><th>{node}</th>")
    return html[start:html.index("</tr>", start)]


def test_html_never_shows_an_untested_node_pass(tmp_path: Path) -> None:
    """The node grid: an untested node's verdict is NOT TESTED with its state, and a cell it passed is
    NOT TESTED too (node_verdicts' rule); a node without results gets a row of its own."""
    from gpuconf.report.writers import write_html

    html = write_html(run(TWO_LEFT_OUT), RESULTS, tmp_path / "report.html").read_text()
    tested, cordoned, not_ready = (_grid_row(html, n) for n in ("h100-0", "h100-1", "h100-2"))
    assert '<span class="tag pass">PASS</span>' in tested and 'class="cell pass"' in tested
    assert '<span class="tag not-tested">NOT TESTED (cordoned)</span>' in cordoned
    assert 'class="cell not-tested" data-node="h100-1"' in cordoned and "<summary>NOT TESTED " in cordoned
    assert '<span class="tag not-tested">NOT TESTED (NotReady)</span>' in not_ready
    assert ">PASS" not in cordoned.split("<details>")[0] and "cell pass" not in cordoned and "PASS" not in not_ready


def test_html_without_the_accounting_counts_the_nodes_as_before(tmp_path: Path) -> None:
    from gpuconf.report.writers import write_html

    html = write_html(run(None), RESULTS, tmp_path / "report.html").read_text()
    assert 'class="coverage"' not in html and "Not tested nodes" not in html and "2 node(s) tested" in html


def test_json_carries_the_coverage_and_the_node_verdicts_that_follow_it(tmp_path: Path) -> None:
    from test_report_formats import SCHEMA

    from gpuconf.report.writers import write_json

    doc = json.loads(write_json(run(TWO_LEFT_OUT), RESULTS, tmp_path / "report.json").read_text())
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()), format_checker=jsonschema.FormatChecker())
    meta = doc["extra"]["gpuconf"]
    assert meta["coverage"] == TWO_LEFT_OUT.as_json() and meta["coverage"]["line"] == LINE
    assert meta["coverage"]["untested"][0] == {"node": "h100-1", "state": "cordoned", "reason": CORDONED_WHY}
    assert meta["verdict"] == "incomplete"
    assert meta["nodes"] == {"h100-0": "pass", "h100-1": "not-tested", "(cluster)": "pass", "h100-2": "not-tested"}
    assert Coverage.from_json(meta["coverage"]) == TWO_LEFT_OUT
    old = json.loads(write_json(run(None), RESULTS, tmp_path / "old.json").read_text())["extra"]["gpuconf"]
    assert old["coverage"] is None and old["nodes"]["h100-1"] == "pass"


def test_the_official_ctrf_validator_accepts_a_report_with_coverage(tmp_path: Path) -> None:
    from test_report_formats import _official_validate

    from gpuconf.report.writers import write_json

    paths = [write_json(run(c), RESULTS, tmp_path / f"{i}.json") for i, c in enumerate((TWO_LEFT_OUT, None))]
    assert _official_validate(paths) == [{"valid": True, "errors": []}] * 2


def test_junit_properties_carry_the_line_and_each_node_left_out() -> None:
    from gpuconf.report.junit import junit_coverage_properties

    assert junit_coverage_properties(TWO_LEFT_OUT) == [
        ("gpuconf.coverage", LINE), ("gpuconf.untested.h100-1", f"cordoned: {CORDONED_WHY}"),
        ("gpuconf.untested.h100-2", f"not-ready: {NOT_READY_WHY}")]
    assert junit_coverage_properties(Coverage(("a",))) == [("gpuconf.coverage", "1 of 1 GPU node tested")]
    assert junit_coverage_properties(None) == []


def test_the_junit_of_a_run_that_could_not_start_carries_the_coverage(tmp_path: Path) -> None:
    from gpuconf.report.writers import write_not_started_junit

    record = run(TWO_LEFT_OUT, error="the API server went away")
    root = ET.parse(write_not_started_junit(record, tmp_path / "junit.xml")).getroot()
    (suite,) = root.iter("testsuite")
    properties = [(p.get("name"), p.get("value")) for p in suite.findall("properties/property")]
    assert properties[:2] == [("gpuconf.verdict", "NOT STARTED"), ("gpuconf.provenance", "simulated:healthy-h100")]
    assert properties[2] == ("gpuconf.coverage", LINE)
    assert ("gpuconf.untested.h100-2", f"not-ready: {NOT_READY_WHY}") in properties
    plain = ET.parse(write_not_started_junit(run(None, error="x"), tmp_path / "plain.xml")).getroot()
    assert [p.get("name") for p in plain.findall("testsuite/properties/property")] == [
        "gpuconf.verdict", "gpuconf.provenance"]


def test_the_line_and_the_nodes_left_out_are_in_the_first_screen_at_1400_px(tmp_path: Path) -> None:
    from test_report_formats import SCREEN, _measure

    from gpuconf.report.writers import write_html

    page = write_html(run(TWO_LEFT_OUT), RESULTS, tmp_path / "page" / "report.html")
    seen = _measure({"coverage": page.parent}, "coverage", tmp_path)
    text = seen["verdict_text"].split("\n")
    assert text[0] == "INCOMPLETE" and LINE in text and seen["width"] <= SCREEN[0]
    assert 0 <= seen["verdict"]["top"] and seen["verdict"]["bottom"] <= SCREEN[1]
