"""Run reports: the model's verdict rule, the three writers, and the plugin writing them end to end."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest
from expecting import strict_expect
from serving import pytest_subprocess

from gpuconf.report.model import CheckResult, Record, RunRecord, from_test_report, node_verdicts, worst
from gpuconf.report.writers import write_html, write_json, write_markdown, write_not_started_junit, write_reports

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
CHECK = "inventory.allocatable-matches-capacity"

CTRF_SCHEMA = {
    "type": "object",
    "required": ["results"],
    "properties": {
        "reportFormat": {"const": "CTRF"},
        "results": {
            "type": "object",
            "required": ["tool", "summary", "tests"],
            "properties": {
                "tool": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
                "summary": {
                    "type": "object",
                    "required": ["tests", "passed", "failed", "skipped", "pending", "other", "start", "stop"],
                    "properties": {k: {"type": "integer", "minimum": 0} for k in
                                   ("tests", "passed", "failed", "skipped", "pending", "other", "start", "stop")},
                },
                "tests": {"type": "array", "items": {
                    "type": "object", "required": ["name", "status", "duration"],
                    "properties": {"name": {"type": "string"},
                                   "status": {"enum": ["passed", "failed", "skipped", "pending", "other"]},
                                   "duration": {"type": "number", "minimum": 0},
                                   "message": {"type": "string"}, "extra": {"type": "object"}}}},
            },
        },
    },
}


def run(provenance: str | None = "simulated:healthy-h100", **kw: object) -> RunRecord:
    return RunRecord(provenance=provenance, started=1_700_000_000.0, finished=1_700_000_010.5, exit_status=1,
                     **kw)  # type: ignore[arg-type]


def result(node: str | None, outcome: str, check: str = CHECK, message: str | None = None) -> CheckResult:
    return CheckResult(check, node, outcome, f"suites/test_x.py::test_{check}[{node}]", 0.25,
                       "8" if outcome != "pass" else None, "7" if outcome != "pass" else None, message)


RESULTS = [
    result("a", "pass"), result("a", "fail", "c2", "c2 on a: <script>alert(1)</script> & more"),
    result("a", "degraded", "c3", "DEGRADED: slow"),
    result("b", "pass"), result("b", "not-tested", "c2"),
    result("c", "not-tested"), result("c", "not-tested", "c2"),
    result("d", "degraded", "c3", "DEGRADED: x"), result("d", "pass"),
]


# -- model -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("outcomes,expected", [
    (["pass", "degraded", "fail"], "fail"), (["pass", "degraded"], "degraded"), (["pass", "not-tested"], "pass"),
    (["not-tested", "not-tested"], "not-tested"), ([], "not-tested"), (["fail", "not-tested"], "fail"),
])
def test_worst_verdict_rule(outcomes, expected):
    assert worst(outcomes) == expected


def test_a_node_is_the_worst_of_its_checks_and_only_skips_is_not_tested():
    assert node_verdicts(RESULTS) == {"a": "fail", "b": "pass", "c": "not-tested", "d": "degraded"}


def test_results_come_from_gpuconf_properties_or_from_pytest_outcome():
    props = {"gpuconf.check": CHECK, "gpuconf.outcome": "degraded", "gpuconf.node": "n1", "gpuconf.expected": "8"}
    r = from_test_report("s.py::test_alloc[n1]", "failed", 0.5, props, "DEGRADED: x\n")
    assert (r.check, r.node, r.outcome, r.expected, r.observed, r.message) == (CHECK, "n1", "degraded", "8", None,
                                                                               "DEGRADED: x")
    r = from_test_report("s.py::test_probe[n2]", "failed", 0.1, {}, "no output")
    assert (r.check, r.node, r.outcome) == ("test_probe", "n2", "fail")
    assert from_test_report("s.py::test_probe[n2]", "skipped", 0, {}, "why").outcome == "not-tested"
    assert from_test_report("s.py::test_x[no-cluster]", "skipped", 0, {}, None).node is None


# -- writers -----------------------------------------------------------------------------------------

def test_json_is_ctrf_shaped_and_carries_provenance_and_node_verdicts(tmp_path):
    path = write_json(run(run_id="abc123"), RESULTS, tmp_path / "deep" / "report.json")
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, CTRF_SCHEMA)
    summary = doc["results"]["summary"]
    assert (summary["tests"], summary["passed"], summary["failed"], summary["skipped"]) == (9, 3, 3, 3)
    assert doc["results"]["tool"]["name"] == "gpuconf"
    meta = doc["extra"]["gpuconf"]
    assert meta["provenance"] == "simulated:healthy-h100" and meta["simulated"] is True
    assert meta["run_id"] == "abc123"
    assert meta["nodes"] == {"a": "fail", "b": "pass", "c": "not-tested", "d": "degraded"}
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]  # no temporary file left behind


def test_html_is_self_contained_escapes_messages_and_says_simulated(tmp_path):
    # node c's checks do not apply there (a kind the check records: the report guesses none)
    results = [replace(r, record=Record(kind="not-applicable")) if r.node == "c" else r for r in RESULTS]
    html = write_html(run(), results, tmp_path / "report.html").read_text()
    assert "http://" not in html and "https://" not in html
    assert not re.search(r"<link\b|<script\b|<img\b|@import|url\(", html, re.I)
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in html
    assert "SIMULATED" in html
    for cell in ('class="cell pass" data-node="b"', 'class="cell fail" data-node="a"',
                 'class="cell degraded" data-node="d"', 'class="cell not-applicable" data-node="c"'):
        assert cell in html
    assert "Find the unhealthy GPU" not in html  # no remediation for a check that did not fail...
    html = write_html(run(), [result("n", "fail")], tmp_path / "report.html").read_text()
    assert "Find the unhealthy GPU" in html  # ...the one from checks.yaml for one that did


def test_html_for_a_real_cluster_does_not_say_simulated(tmp_path):
    html = write_html(run("kubeconfig:/k/config@prod"), RESULTS[:1], tmp_path / "r.html").read_text()
    assert "SIMULATED" not in html and "kubeconfig:/k/config@prod" in html


def test_markdown_lists_each_failure_once(tmp_path):
    md = write_markdown(run(), RESULTS, tmp_path / "report.md").read_text()
    failure_lines = [line for line in md.splitlines() if line.startswith("- ")]
    assert failure_lines[:3] == [
        "- **FAIL** a `c2`: <script>alert(1)</script> & more (expected 8; observed 7)",
        "- **DEGRADED** a `c3`: slow (expected 8; observed 7)",
        "- **DEGRADED** d `c3`: x (expected 8; observed 7)",
    ]
    assert "**FAIL**: 1 of 4 node(s) fail: a; 1 of 4 node(s) degraded: d" in md
    assert "| a | FAIL |" in md and "| c | NOT TESTED |" in md
    # NOT TESTED by kind: these results record none, so they count as could not run (never as passed)
    assert "9 checks: 3 passed, 3 failed, 3 not tested (3 could not run) (exit status 1)" in md


def test_writers_survive_odd_content(tmp_path):
    odd = [CheckResult("c|x", None, "fail", "n::t", 0.0, "\x00", "\ud800 surrogate", "line1\n\nline | 2 ]]>"),
           CheckResult("c", "n", "weird", "n::u", 0.0)]
    paths = write_reports(run(None, interrupted=True), odd, tmp_path / "r")
    assert sorted(p.name for p in paths) == ["report.html", "report.json", "report.md"]
    assert "INTERRUPTED" in (tmp_path / "r" / "report.md").read_text()
    assert json.loads((tmp_path / "r" / "report.json").read_text())["results"]["summary"]["other"] == 1


@pytest.mark.parametrize("error", [
    "cannot reach the API server at https://10.0.0.1:6443",
    "kubeconfig /home/\udcff/config: \x1b[31minvalid\x1b[0m <&> \"quoted\"",
], ids=["a plain reason", "a reason with control characters and an undecodable path"])
def test_a_run_that_could_not_start_writes_a_junit_file_with_one_error_saying_why(tmp_path, error):
    path = write_not_started_junit(run(error=error), tmp_path / "junit.xml")
    root = ET.parse(path).getroot()
    (suite,) = root.iter("testsuite")
    counts = ("tests", "failures", "errors", "skipped")
    assert [root.get(k) for k in counts] == [suite.get(k) for k in counts] == ["1", "0", "1", "0"]
    assert root.get("time") == suite.get("time") == "10.500" and suite.get("timestamp") == "2023-11-14T22:13:20Z"
    assert suite.get("name") == root.get("name") == "gpuconf simulated:healthy-h100"
    props = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    assert props["gpuconf.verdict"] == "NOT STARTED"
    (case,) = suite.iter("testcase")
    assert (case.get("classname"), case.get("name"), case.get("time")) == ("gpuconf", "sign-off", "10.500")
    failure = case.find("error")
    assert failure is not None and failure.get("type") == "exit status 1"
    assert failure.get("message") == error.replace("\udcff", "#xDCFF").replace("\x1b", "#x1B")


# -- end to end --------------------------------------------------------------------------------------

def _suite(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inventory=(ROOT / "suites" / "test_inventory.py").read_text())


def _junit_counts(path: Path) -> dict[str, int]:
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None
    n = {k: int(suite.get(k, "0")) for k in ("tests", "failures", "errors", "skipped")}
    return {"tests": n["tests"], "failed": n["failures"] + n["errors"], "skipped": n["skipped"]}


def _junit_signoff(path: Path) -> dict[str, str | None]:
    """What a dashboard shows of a junit.xml's sign-off: the suite's name and ``gpuconf.verdict``
    property, and the gpuconf.sign-off case's outcome (passed, failure, error), type and message."""
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    (case,) = [c for c in suite.iter("testcase") if (c.get("classname"), c.get("name")) == ("gpuconf", "sign-off")]
    child = next((c for c in case if c.tag in ("failure", "error", "skipped")), None)
    told = {"case": child.tag, "type": child.get("type"), "message": child.get("message")} if child is not None else {
        "case": "passed", "type": None, "message": None}
    return {"suite": suite.get("name"), "verdict": props.get("gpuconf.verdict"), "faults": props.get("gpuconf.faults"),
            **told}


def test_a_simulated_run_writes_four_reports_that_agree(pytester: pytest.Pytester, tmp_path):
    _suite(pytester)
    out = tmp_path / "reports"
    res = pytest_subprocess(pytester, "-p", "gpuconf.plugin", "--simulate", "healthy-h100", "--report-dir", str(out))
    assert res.ret == 0, res.outlines[-20:]
    assert sorted(p.name for p in out.iterdir()) == ["junit.xml", "manifest.json", "report.html", "report.json",
                                                     "report.md"]
    doc = json.loads((out / "report.json").read_text())
    summary = doc["results"]["summary"]
    assert doc["extra"]["gpuconf"]["faults"] == []  # the shipped profile injects none
    junit = _junit_counts(out / "junit.xml")  # the checks and the sign-off
    assert junit == {"tests": summary["tests"] + 1, "failed": summary["failed"], "skipped": summary["skipped"]}
    assert _junit_signoff(out / "junit.xml") == {"suite": "gpuconf simulated:healthy-h100", "verdict": "PASS",
                                                 "faults": None, "case": "passed", "type": None, "message": None}
    assert summary["tests"] == summary["passed"] > 0
    md = (out / "report.md").read_text()
    assert f"{summary['tests']} checks: {summary['passed']} passed, 0 failed, 0 not tested (exit status 0)" in md
    assert md.splitlines()[0] == "# gpuconf sign-off: SIMULATED cluster, simulated:healthy-h100"
    assert "Faults injected" not in md
    html = (out / "report.html").read_text()
    assert "SIMULATED" in html and '<div class="word">PASS</div>' in html and 'id="faults"' not in html
    assert 'class="cell pass"' in html and 'class="cell fail"' not in html


def test_a_faulty_node_fails_in_the_sign_off_with_its_remediation(pytester: pytest.Pytester, tmp_path):
    _suite(pytester)
    profile = (ROOT / "gpuconf" / "data" / "sim_profiles" / "healthy-h100.yaml").read_text()
    assert "\nfaults: []\n" in profile
    fault = pytester.path / "faulty.yaml"
    fault.write_text(profile.replace("\nfaults: []\n",
                                     "\nfaults:\n  - {id: gpu-unhealthy, pool: h100, node: 0, gpu: 3}\n"))
    out = tmp_path / "reports"
    res = pytest_subprocess(pytester, "-p", "gpuconf.plugin", "--simulate", str(fault), "--report-dir", str(out),
                            "--expect", str(strict_expect(pytester.path)))
    assert res.ret == 1
    html = (out / "report.html").read_text()
    assert '<div class="word">FAIL</div>' in html
    assert '<td class="cell fail" data-node="h100-0" data-capability="inventory">' in html
    assert '<td class="cell pass" data-node="h100-1" data-capability="inventory">' in html
    assert re.search(r'<tr><th>h100-0</th><td class="nodeverdict"><span class="tag fail">FAIL</span>', html)
    assert re.search(r'<tr><th>h100-1</th><td class="nodeverdict"><span class="tag pass">PASS</span>', html)
    assert "Find the unhealthy GPU" in html
    doc = json.loads((out / "report.json").read_text())
    assert doc["extra"]["gpuconf"]["nodes"] == {"h100-0": "fail", "h100-1": "pass"}
    assert doc["results"]["summary"]["failed"] == 1  # the check; junit.xml has the sign-off's failure too
    assert _junit_counts(out / "junit.xml")["failed"] == 2
    signoff = _junit_signoff(out / "junit.xml")
    assert (signoff["verdict"], signoff["case"], signoff["type"]) == ("FAIL", "failure", "fail")
    assert str(signoff["message"]).startswith("FAIL: 1 of 2 node(s) fail: h100-0")
    md = (out / "report.md").read_text()
    assert sum(line.startswith(f"- **FAIL** h100-0 `{CHECK}`") for line in md.splitlines()) == 1
    # the profile as given, and the fault it injected, in every report
    given, injected = f"simulated:{fault}", "gpu-unhealthy on h100-0 GPU 3"
    assert (doc["extra"]["gpuconf"]["provenance"], doc["extra"]["gpuconf"]["faults"]) == (given, [injected])
    assert md.splitlines()[0] == f"# gpuconf sign-off: SIMULATED cluster, {given}, fault injected: {injected}"
    assert f"**Faults injected** (simulated): {injected}" in md
    assert f"<h1>gpuconf sign-off: SIMULATED cluster, {given}, fault injected: {injected}</h1>" in html
    assert f'<div id="faults">Faults injected by the profile: <code>{injected}</code>.</div>' in html
    assert (signoff["suite"], signoff["faults"]) == (f"gpuconf {given}", injected)


def test_junit_tells_degraded_from_fail_and_shows_each_untested_node_as_a_skipped_case(
        pytester: pytest.Pytester, tmp_path):
    """A run whose one check is DEGRADED and whose other node is cordoned: a dashboard counts the sign-off's
    failure (typed degraded, as the check's is) and shows h100-1 skipped with why; the faults are named."""
    _suite(pytester)
    profile = (ROOT / "gpuconf" / "data" / "sim_profiles" / "healthy-h100.yaml").read_text()
    (pytester.path / "two.yaml").write_text(profile.replace("\nfaults: []\n", (
        "\nfaults:\n  - {id: gpu-unhealthy, pool: h100, node: 0, gpu: 3}\n"
        "  - {id: node-cordoned, pool: h100, node: 1}\n")))
    out = tmp_path / "reports"
    res = pytest_subprocess(pytester, "-p", "gpuconf.plugin", "--simulate", "two.yaml", "--report-dir", str(out))
    assert res.ret == 17, res.outlines[-20:]
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    signoff = _junit_signoff(out / "junit.xml")
    assert signoff["suite"] == "gpuconf simulated:two.yaml" and signoff["verdict"] == "DEGRADED"
    assert (signoff["case"], signoff["type"]) == ("failure", "degraded")
    assert signoff["faults"] == "gpu-unhealthy on h100-0 GPU 3; node-cordoned on h100-1"
    failures = {c.get("name"): c.find("failure") for c in suite.iter("testcase") if c.find("failure") is not None}
    check = failures["test_allocatable_matches_capacity[h100-0]"]
    assert check is not None and check.get("type") == "degraded"
    assert str(check.get("message")).startswith(f"DEGRADED: {CHECK} on h100-0: the device plugin reports 1 GPU(s)")
    (node,) = [c for c in suite.iter("testcase") if c.get("classname") == "gpuconf.coverage"]
    skipped = node.find("skipped")
    assert node.get("name") == "h100-1" and skipped is not None
    assert str(skipped.get("message")).startswith("h100-1 is cordoned (spec.unschedulable)")
    props = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    assert props["gpuconf.coverage"] == "1 of 2 GPU nodes tested; 1 cordoned"
    doc = json.loads((out / "report.json").read_text())
    assert _junit_counts(out / "junit.xml") == {  # the checks, the sign-off and h100-1
        "tests": doc["results"]["summary"]["tests"] + 2, "failed": doc["results"]["summary"]["failed"] + 1,
        "skipped": doc["results"]["summary"]["skipped"] + 1}
    assert doc["extra"]["gpuconf"]["faults"] == ["gpu-unhealthy on h100-0 GPU 3", "node-cordoned on h100-1"]
    assert "faults injected: gpu-unhealthy on h100-0 GPU 3; node-cordoned on h100-1" in (
        out / "report.md").read_text().splitlines()[0]


def _signoff_of(record: RunRecord, results: list[CheckResult]) -> tuple[str, str | None, str]:
    from gpuconf.report.junit import signoff_cases

    case = signoff_cases(record, results)[0]
    return case.outcome, case.type, case.message


ONE_PASS = [result("h100-0", "pass")]


@pytest.mark.parametrize("record, results, expected", [
    (run(), ONE_PASS, ("passed", None, "")),
    (run(), [result("h100-0", "fail")], ("failure", "fail", "FAIL: 1 of 1 node(s) fail: h100-0")),
    (run(), [result("h100-0", "degraded")], ("failure", "degraded", "DEGRADED: 1 of 1 node(s) degraded: h100-0")),
    (run(interrupted=True), ONE_PASS, ("error", "incomplete", "INCOMPLETE: The run was stopped before it finished")),
    (run(scope={"full": False, "narrowed": ["-m smoke"]}), ONE_PASS, ("error", "partial", "PARTIAL: ")),
    (run(), [result("h100-0", "not-tested")], ("error", "not-tested", "NOT TESTED: Nothing was tested")),
    (run(error="cannot reach the API server"), [], ("error", "exit status 1", "cannot reach the API server")),
], ids=["PASS passes", "FAIL is a failure typed fail", "DEGRADED is a failure typed degraded",
        "INCOMPLETE is an error", "PARTIAL is an error", "NOT TESTED is an error",
        "NOT STARTED is an error typed with its exit status"])
def test_the_sign_off_case_passes_only_for_a_pass(record, results, expected):
    outcome, kind, message = _signoff_of(record, results)
    assert (outcome, kind) == expected[:2] and message.startswith(expected[2]), message


def test_every_untested_node_is_a_skipped_case_saying_why():
    from gpuconf.report.junit import signoff_cases
    from gpuconf.report.model import Coverage, UntestedNode

    coverage = Coverage(("h100-0", "h100-1"), (UntestedNode("h100-1", "cordoned", "h100-1 is cordoned: uncordon it"),))
    sign_off, node = signoff_cases(run(coverage=coverage), ONE_PASS)
    assert (sign_off.outcome, sign_off.type) == ("error", "incomplete")
    assert "1 of 2 GPU nodes tested; 1 cordoned" in sign_off.message
    assert (node.classname, node.name, node.outcome, node.message) == (
        "gpuconf.coverage", "h100-1", "skipped", "h100-1 is cordoned: uncordon it")
    assert dict(node.properties) == {"gpuconf.node": "h100-1", "gpuconf.outcome": "not-tested",
                                     "gpuconf.state": "cordoned"}
    assert len(signoff_cases(run(coverage=Coverage(("h100-0",))), ONE_PASS)) == 1  # every node tested


#: pytest's junit.xml of a run (its shape, family xunit1): a passing check, a DEGRADED one that says so
#: in a property, and a failure with none (its result says DEGRADED).
PYTEST_JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest"
 errors="0" failures="2" skipped="0" tests="3" time="1.0" timestamp="2026-12-07T00:00:00" hostname="vm"><properties>
<property name="gpuconf.coverage" value="1 of 1 GPU node tested" /></properties>
<testcase classname="suites.test_x" name="test_ok[h100-0]" time="0.1" />
<testcase classname="suites.test_x" name="test_slow[h100-0]" time="0.1"><properties>
<property name="gpuconf.outcome" value="degraded" /></properties><failure message="Failed: DEGRADED: slow">x</failure>
</testcase><testcase classname="suites.test_x.TestC" name="test_b[h100-0]" time="0.1"><failure
 message="Failed: b is low">y</failure></testcase></testsuite></testsuites>"""


def test_pytests_junit_is_finished_as_a_sign_off_once(tmp_path):
    from gpuconf.report.junit import finish_junit

    path = tmp_path / "junit.xml"
    path.write_text(PYTEST_JUNIT)
    results = [result("h100-0", "pass"),
               CheckResult("x.slow", "h100-0", "degraded", "suites/test_x.py::test_slow[h100-0]"),
               CheckResult("x.b", "h100-0", "degraded", "suites/test_x.py::TestC::test_b[h100-0]")]
    assert finish_junit(path, run(faults=("gpu-lost on h100-0 GPU 3",)), results) is True
    root = ET.parse(path).getroot()
    suite = root.find("testsuite")
    assert suite is not None
    assert root.get("name") == suite.get("name") == "gpuconf simulated:healthy-h100"
    assert [(p.get("name"), p.get("value")) for p in suite.findall("properties/property")] == [
        ("gpuconf.verdict", "DEGRADED"), ("gpuconf.provenance", "simulated:healthy-h100"),
        ("gpuconf.faults", "gpu-lost on h100-0 GPU 3"), ("gpuconf.coverage", "1 of 1 GPU node tested")]
    assert [suite.get(k) for k in ("tests", "failures", "errors", "skipped")] == ["4", "3", "0", "0"]
    cases = list(suite.iter("testcase"))
    assert (cases[0].get("classname"), cases[0].get("name")) == ("gpuconf", "sign-off")
    assert [(f.get("type"), f.get("message")) for f in suite.iter("failure")] == [
        ("degraded", "DEGRADED: 1 of 1 node(s) degraded: h100-0"), ("degraded", "DEGRADED: slow"),
        ("degraded", "DEGRADED: b is low")]
    before = path.read_bytes()
    assert finish_junit(path, run(), results) is False and path.read_bytes() == before  # already a sign-off's
    path.write_text(PYTEST_JUNIT)
    finish_junit(path, run(), results[:1])  # no result and no property says DEGRADED: a FAIL
    assert [f.get("type") for f in ET.parse(path).iter("failure")] == ["degraded", "fail"]


def test_a_junit_that_cannot_be_finished_is_one_line(tmp_path):
    from gpuconf.report.junit import finish_junit

    path = tmp_path / "junit.xml"
    path.write_text("<testsuites><testsuite")
    with pytest.raises(OSError, match=r"^gpuconf: could not add the sign-off to .*junit.xml: ") as caught:
        finish_junit(path, run(), [])
    assert "\n" not in str(caught.value)


def test_an_interrupted_run_writes_what_it_collected_and_says_so(pytester: pytest.Pytester, tmp_path):
    pytester.makepyfile(test_stop="""
def test_first(gpu_cluster):
    pass

def test_ctrl_c():
    raise KeyboardInterrupt

def test_never():
    pass
""")
    out = tmp_path / "reports"
    res = pytest_subprocess(pytester, "-p", "gpuconf.plugin", "--simulate", "healthy-h100", "--report-dir", str(out))
    assert res.ret == pytest.ExitCode.INTERRUPTED
    doc = json.loads((out / "report.json").read_text())
    assert doc["extra"]["gpuconf"]["interrupted"] is True and doc["extra"]["gpuconf"]["exit_status"] == 2
    assert [t["name"] for t in doc["results"]["tests"]][0] == "test_stop.py::test_first"
    assert "test_stop.py::test_never" not in [t["name"] for t in doc["results"]["tests"]]
    assert "INTERRUPTED" in (out / "report.html").read_text() and "INTERRUPTED" in (out / "report.md").read_text()


def test_a_junitxml_given_by_the_user_is_kept(pytester: pytest.Pytester, tmp_path):
    pytester.makepyfile(test_one="def test_one(gpu_cluster):\n    pass\n")
    out, mine = tmp_path / "reports", tmp_path / "mine.xml"
    res = pytest_subprocess(pytester, "-p", "gpuconf.plugin", "--simulate", "healthy-h100", "--report-dir", str(out),
                            f"--junitxml={mine}")
    assert res.ret == 0
    assert mine.exists() and not (out / "junit.xml").exists() and (out / "report.json").exists()


def test_without_a_cluster_or_report_dir_nothing_is_written(pytester: pytest.Pytester):
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    assert pytest_subprocess(pytester, "-p", "gpuconf.plugin").ret == 0
    assert not (pytester.path / "reports").exists()


def test_a_run_against_a_cluster_writes_to_reports_in_the_invocation_dir_by_default(pytester: pytest.Pytester):
    """Into the run's own directory there, which reports/latest points at (tests/test_report_manifest.py:
    one directory per run)."""
    pytester.makepyfile(test_one="def test_one(gpu_node):\n    pass\n")
    assert pytest_subprocess(pytester, "-p", "gpuconf.plugin", "--simulate", "healthy-h100").ret == 0
    (run,) = [p for p in (pytester.path / "reports").iterdir() if p.name != "latest"]
    assert run.name.endswith("Z-norun") and (pytester.path / "reports" / "latest").resolve() == run
    assert sorted(p.name for p in run.iterdir()) == [
        "junit.xml", "manifest.json", "report.html", "report.json", "report.md"]


def test_a_measured_curve_is_drawn_inline_in_html_and_kept_in_json(tmp_path):
    from gpuconf.report.model import format_curve

    points = ((1024, 0.5), (1 << 20, 52.2), (1 << 30, 462.0), (4 << 30, 469.5))
    r = from_test_report("suites/test_nccl.py::test_busbw_above_floor[h100-0]", "passed", 1.0,
                         {"gpuconf.check": "nccl.busbw-above-floor", "gpuconf.node": "h100-0",
                          "gpuconf.outcome": "pass", "gpuconf.curve": format_curve(points)}, None)
    assert r.curve == points
    html = write_html(run(), [r], tmp_path / "report.html").read_text()
    assert html.count("<polyline") == 1 and ">4 GiB</text>" in html and "<td>1.07374e+09</td><td>462</td>" in html
    assert "message size (B, log scale)" in html and "bus bandwidth (GB/s)" in html
    assert "http://" not in html and "https://" not in html
    doc = json.loads(write_json(run(), [r], tmp_path / "report.json").read_text())
    assert doc["results"]["tests"][0]["extra"]["curve"] == [list(p) for p in points]


# -- measured figures (gpuconf.metric.* properties -> report.json extra.metrics) ---------------------

def test_metric_properties_become_the_results_metrics_and_bad_values_are_left_out():
    from gpuconf.report.model import parse_metrics

    props = {"gpuconf.check": "smoke.vector-add-every-gpu", "gpuconf.node": "h100-0", "gpuconf.outcome": "pass",
             "gpuconf.metric.kernel_ms": "0.04", "gpuconf.metric.pull_s": 12.5, "gpuconf.metric.to_running_s": "nan",
             "gpuconf.metric.odd": "fast", "gpuconf.metric.": "1", "gpuconf.metric.flag": True, "gpuconf.gpu": "1.0"}
    r = from_test_report("suites/test_smoke.py::test_vector_add_on_every_gpu[h100-0]", "passed", 1.0, props, None)
    assert r.metrics == {"kernel_ms": 0.04, "pull_s": 12.5}
    assert parse_metrics({}) == {} and result("a", "pass").metrics == {}
    assert hash(r) == hash(r)  # a result stays hashable with its metrics


def test_metrics_are_kept_in_json_and_left_out_when_there_are_none(tmp_path):
    from dataclasses import replace

    measured = replace(result("h100-0", "pass"), metrics={"kernel_ms": 0.04, "to_running_s": 3.0})
    doc = json.loads(write_json(run(), [measured, result("h100-1", "pass")], tmp_path / "report.json").read_text())
    jsonschema.validate(doc, CTRF_SCHEMA)
    extras = [t["extra"] for t in doc["results"]["tests"]]
    assert extras[0]["metrics"] == {"kernel_ms": 0.04, "to_running_s": 3.0} and "metrics" not in extras[1]


def test_record_metrics_writes_one_property_per_measured_figure():
    from gpuconf.kit.evidence import record_metrics
    from gpuconf.report.model import parse_metrics

    recorded: list[tuple[str, object]] = []
    record_metrics(lambda k, v: recorded.append((k, v)), kernel_ms=0.0425, pull_s=None, to_running_s=float("inf"))
    assert recorded == [("gpuconf.metric.kernel_ms", "0.0425")]
    assert parse_metrics(dict(recorded)) == {"kernel_ms": 0.0425}


@pytest.mark.parametrize(("message", "seconds"), [
    ('Successfully pulled image "nvidia/cuda:13.0.2-devel" in 1.234s (2.5s including waiting). Image size: 9 bytes.',
     1.234),
    ('Successfully pulled image "x" in 1m2.5s (1m2.5s including waiting)', 62.5),
    ('Successfully pulled image "x" in 850ms', 0.85),
    ('Successfully pulled image "x" in 1h0m0.5s', 3600.5),
    ('Container image "x" already present on machine', None),
    ('Container image "x" already present on machine and can be accessed by the pod', None),
    ('Pulling image "x"', None),
])
def test_the_pull_time_is_read_from_the_kubelets_pulled_message(message, seconds):
    from gpuconf.kit.evidence import pulled_seconds

    assert pulled_seconds(message) == (None if seconds is None else pytest.approx(seconds))


def _probe_outcome(*pulled: str, started: str | None = "2025-01-01T00:00:42Z"):
    from gpuconf.cluster.outcomes import make_outcome

    state = {"terminated": {"exitCode": 0, "startedAt": started, "finishedAt": "2025-01-01T00:00:50Z"}} if started \
        else {"waiting": {"reason": "ContainerCreating"}}
    pod = {"metadata": {"name": "inventory-h100-0", "creationTimestamp": "2025-01-01T00:00:00Z"},
           "spec": {"nodeName": "h100-0", "containers": [{"name": "probe", "image": "x"}]},
           "status": {"phase": "Succeeded" if started else "Pending",
                      "containerStatuses": [{"name": "probe", "image": "x", "state": state}]}}
    events = [{"reason": "Pulled", "message": m, "firstTimestamp": "2025-01-01T00:00:30Z",
               "metadata": {"resourceVersion": str(i)}} for i, m in enumerate(pulled)]
    return make_outcome(pod, events, logs={}, missing_logs={})


def test_the_probe_pods_pull_time_and_time_to_running():
    from gpuconf.kit.evidence import probe_pod_metrics

    pulled = _probe_outcome('Successfully pulled image "a" in 20.5s (20.5s including waiting)',
                            'Successfully pulled image "b" in 1.25s (21.75s including waiting)')
    assert probe_pod_metrics(pulled) == {"pull_s": 21.75, "to_running_s": 42.0}
    cached = _probe_outcome('Container image "a" already present on machine')
    assert probe_pod_metrics(cached) == {"pull_s": None, "to_running_s": 42.0}  # nothing pulled: no pull time
    assert probe_pod_metrics(_probe_outcome(started=None)) == {"pull_s": None, "to_running_s": None}


def test_the_remedy_reported_is_the_one_the_failure_gave_else_the_checks(tmp_path):
    specific = CheckResult("nccl.preflight-gpus-free", "n", "fail", "s.py::t[n]", 0.1, "8/8", "7/8",
                           "nccl.preflight-gpus-free on n: n has 7/8 GPUs\n  remediation: a GPU is missing: see X",
                           record=Record(remediation="a GPU is missing: see X"))
    plain = result("m", "fail", message="inventory.allocatable-matches-capacity on m: 7 of 8")
    doc = json.loads(write_json(run(), [specific, plain], tmp_path / "report.json").read_text())
    first, second = (t["extra"]["remediation"] for t in doc["results"]["tests"])
    assert first == "a GPU is missing: see X" and second.startswith("Find the unhealthy GPU")
    html = write_html(run(), [specific, plain], tmp_path / "report.html").read_text()
    assert html.count("a GPU is missing: see X") == 1 and "Fewer GPUs allocatable than" not in html


def test_any_recorded_series_is_drawn_with_its_axes_units_and_floor(tmp_path):
    """Not only NCCL's: a series a suite records (record_series) comes back from the properties and
    is drawn the same way, and report.json keeps it."""
    from gpuconf.kit.evidence import record_series

    props: list[tuple[str, str]] = []
    record_series(lambda k, v: props.append((k, v)), "h2d", [(1 << 20, 12.5), (1 << 24, 48.0), (1 << 28, 53.1)],
                  x=("transfer size", "B"), y=("host to device bandwidth", "GB/s"), floor=40.0, x_scale="log2",
                  title="GPU 0 host-to-device copy")
    properties = {"gpuconf.check": "hostbw.h2d", "gpuconf.node": "n1", "gpuconf.outcome": "pass", **dict(props)}
    r = from_test_report("suites/test_hostbw.py::test_h2d[n1]", "passed", 1.0, properties, None)
    [series] = r.series
    assert (series.name, series.floor, series.points[-1]) == ("h2d", 40.0, (float(1 << 28), 53.1)) and not r.curve
    html = write_html(run(), [r], tmp_path / "report.html").read_text()
    assert "GPU 0 host-to-device copy" in html and "transfer size (B, log scale)" in html
    assert "host to device bandwidth (GB/s)" in html and 'class="floor"' in html and "floor 40 GB/s" in html
    assert ">256 MiB</text>" in html and ">16 MiB</text>" in html  # byte ticks in binary units
    doc = json.loads(write_json(run(), [r], tmp_path / "report.json").read_text())
    assert doc["results"]["tests"][0]["extra"]["series"][0]["floor"] == 40.0
    bad = from_test_report("s.py::t", "passed", 0.0, {"gpuconf.series.x": "{not json"}, None)
    assert bad.series == ()  # a malformed recording is left out, the report still written


@pytest.mark.parametrize(("reason", "recorded", "kind"), [
    # the kind comes from the check's record, whatever the reason's words say
    ("h100-0 does not use MIG (nvidia.com/mig.strategy=none, nvidia.com/mig.capable=true)", "not-applicable",
     "not-applicable"),
    ("burn-in: give --burn-in to run it", "not-selected", "not-selected"),
    ("h100-0 has 8 of 8 GPUs in use by other pods (team/a: 8): NCCL runs on idle nodes only", "node-unavailable",
     "node-unavailable"),
    ("blocked by driver.nvml-initializes: NVML did not initialise in the probe", "blocked", "blocked"),
    ("no canary ran on h100-0", "could-not-run", "could-not-run"),
    # nothing recorded: could-not-run, even where the words read as "not applicable" (no guess from text)
    ("the node advertises no nvidia.com/gpu to request", None, "could-not-run"),
    ("not applicable: h100-0 publishes no DRA device", None, "could-not-run"),
])
def test_a_not_tested_kind_is_the_one_its_record_carries(reason, recorded, kind):
    from gpuconf.report.model import not_tested_kind

    result = CheckResult("c", "n", "not-tested", "s.py::t[n]", message=reason, record=Record(kind=recorded))
    assert not_tested_kind(result) == kind and replace(result, outcome="pass").kind is None


def test_per_gpu_series_reach_report_json_and_are_drawn_as_bars(tmp_path):
    """The bandwidth checks' per-GPU copy figures: a category series, one bar per GPU, kept in report.json."""
    from gpuconf.kit.evidence import record_series

    props: list[tuple[str, str]] = []
    record_series(lambda k, v: props.append((k, v)), "h2d_gbps", [(0, 53.6), (1, 53.4), (2, 26.5)],
                  x=("GPU", "CUDA index"), y=("host-to-device copy", "GB/s"), x_scale="category",
                  title="host-to-device pinned copy bandwidth per GPU")
    properties = {"gpuconf.check": "bandwidth.host-device-floor", "gpuconf.node": "h100-0",
                  "gpuconf.outcome": "degraded", **dict(props)}
    r = from_test_report("suites/test_bandwidth.py::test_host_device_floor[h100-0]", "failed", 0.1, properties, "m")
    [series] = r.series
    assert (series.x_scale, series.points) == ("category", ((0.0, 53.6), (1.0, 53.4), (2.0, 26.5)))
    doc = json.loads(write_json(run(), [r], tmp_path / "report.json").read_text())
    [kept] = doc["results"]["tests"][0]["extra"]["series"]
    assert kept["x"]["scale"] == "category" and kept["points"] == [[0.0, 53.6], [1.0, 53.4], [2.0, 26.5]]
    html = write_html(run(), [r], tmp_path / "report.html").read_text()
    assert "host-to-device pinned copy bandwidth per GPU" in html and html.count('class="bar"') == 3
    assert "GPU 2: 26.5 GB/s" in html
