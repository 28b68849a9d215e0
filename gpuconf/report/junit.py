"""The JUnit XML gpuconf writes itself (pytest writes the run's own junit.xml): the junit.xml of a run
that could not start (``testsuites``), and the CNCF evidence's junit.xml in gotestsum's shape
(``gotestsum_testsuites``).

Built with ElementTree, not the junit-xml package, because that cannot write either shape: the
suite's time is the caller's (the run's wall time, not a sum of the cases'); every testcase has a
time, 0 included. ``testsuites``: one <testsuite> inside a <testsuites> that repeats its name, counts
and time. ``gotestsum_testsuites``: the attributes gotestsum writes and no others (a v1.37 submission's
junit.xml, tests/data/real/cncf/gke-1.37-junit.excerpt.xml: <testsuites tests failures errors time>,
<testsuite tests failures skipped time name timestamp>, times as %.6f, tab-indented), a failure as
``<failure message="Failed" type="">`` holding the test's output and a skip as ``<skipped message=...>``
holding it, as gotestsum writes them.

A run's junit.xml is read by dashboards (Jenkins, GitLab, Azure DevOps) that show counts and test
cases, not properties (issue 36). So every gpuconf junit.xml, pytest's (``finish_junit`` after pytest
wrote it), a merge's and a run's that could not start, is named for gpuconf and the cluster
(``suite_name``), carries the run's verdict as the testsuite property ``gpuconf.verdict``, and holds
``signoff_cases``: a ``gpuconf.sign-off`` test case (passed only for PASS; a failure for FAIL and
DEGRADED, an error for a run that vouches for nothing: INCOMPLETE, PARTIAL, NOT TESTED, NOT STARTED)
and a skipped ``gpuconf.coverage`` case per untested selected GPU node. A DEGRADED check's <failure>
has ``type="degraded"``, a FAIL's ``type="fail"``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gpuconf.report.model import DEGRADED, FAIL, NOT_TESTED, PASS, CheckResult, Coverage, RunRecord, cluster_verdict

__all__ = ["COVERAGE_CLASS", "COVERAGE_PROPERTY", "SIGN_OFF", "UNTESTED_PREFIX", "VERDICT_PROPERTY", "Case",
           "case_id", "failure_message", "failure_type", "finish_junit", "gotestsum_testsuites",
           "junit_coverage_properties", "run_properties", "signoff_cases", "suite_name", "testsuites"]

#: The testsuite properties that carry a run's coverage (issue 25): the line, and per untested node
#: ``gpuconf.untested.<node>`` = "<state>: <reason>".
COVERAGE_PROPERTY = "gpuconf.coverage"
UNTESTED_PREFIX = "gpuconf.untested."
#: The testsuite property holding the run's verdict as the reports word it (PASS, FAIL, DEGRADED,
#: INCOMPLETE, PARTIAL, NOT TESTED, NOT STARTED).
VERDICT_PROPERTY = "gpuconf.verdict"
#: The test case that stands for the sign-off itself (classname, name), and the classname of the cases
#: that stand for the selected GPU nodes the run did not test (named for the node).
SIGN_OFF = ("gpuconf", "sign-off")
COVERAGE_CLASS = "gpuconf.coverage"

#: What XML 1.0 cannot hold (control characters, lone surrogates from undecodable paths): written as
#: ``#xHH``, as pytest's own junit.xml does, so a message with an escape sequence still parses.
_NOT_XML = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: str) -> str:
    return _NOT_XML.sub(lambda m: f"#x{ord(m.group()):02X}", text)


@dataclass(frozen=True)
class Case:
    """One <testcase>; ``outcome`` names its <failure>, <error> or <skipped> child (none: it passed),
    which carries ``message``, ``type`` if given and ``detail`` as its text if given."""

    name: str
    classname: str
    time: float
    outcome: Literal["passed", "failure", "error", "skipped"] = "passed"
    message: str = ""
    type: str | None = None
    detail: str | None = None
    system_out: str | None = None
    properties: tuple[tuple[str, str], ...] = ()


def junit_coverage_properties(coverage: Coverage | None) -> list[tuple[str, str]]:
    """The testsuite-level properties saying which selected GPU nodes were tested: ``gpuconf.coverage``
    = the coverage line, then one ``gpuconf.untested.<node>`` = "<state>: <reason>" per untested node
    in selection order. None (no accounting): no properties."""
    if coverage is None:
        return []
    return [(COVERAGE_PROPERTY, coverage.line())] + [(f"{UNTESTED_PREFIX}{node}", f"{u.state}: {u.reason}")
                                                     for node, u in coverage.missing().items()]


def testsuites(name: str, cases: Sequence[Case], *, time: float, timestamp: str,
               properties: Sequence[tuple[str, str]] = ()) -> bytes:
    """The document, UTF-8 with its XML declaration: <testsuites> holding one <testsuite> of ``cases``
    (with a <properties> element when ``properties`` are given)."""
    counts = {"tests": len(cases), "failures": sum(c.outcome == "failure" for c in cases),
              "errors": sum(c.outcome == "error" for c in cases), "skipped": sum(c.outcome == "skipped" for c in cases)}
    totals = {"name": _xml(name), **{k: str(v) for k, v in counts.items()}, "time": f"{max(time, 0.0):.3f}"}
    suite = ET.Element("testsuite", {**totals, "timestamp": timestamp})
    if properties:
        props = ET.SubElement(suite, "properties")
        for key, value in properties:
            ET.SubElement(props, "property", {"name": _xml(key), "value": _xml(value)})
    suite.extend(_case_element(c) for c in cases)
    root = ET.Element("testsuites", totals)
    root.append(suite)
    ET.indent(root)
    return bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True))


def _case_element(c: Case) -> ET.Element:
    """One <testcase>: its properties first (as pytest's xunit1 family writes them), then its outcome."""
    case = ET.Element("testcase", {"classname": _xml(c.classname), "name": _xml(c.name),
                                   "time": f"{max(c.time, 0.0):.3f}"})
    if c.properties:
        props = ET.SubElement(case, "properties")
        for key, value in c.properties:
            ET.SubElement(props, "property", {"name": _xml(key), "value": _xml(value)})
    if c.outcome != "passed":
        child = ET.SubElement(case, c.outcome, {"message": _xml(c.message)})
        if c.type is not None:
            child.set("type", _xml(c.type))
        if c.detail is not None:
            child.text = _xml(c.detail)
    if c.system_out is not None:
        ET.SubElement(case, "system-out").text = _xml(c.system_out)
    return case


def suite_name(run: RunRecord) -> str:
    """The <testsuite> (and <testsuites>) name: gpuconf and the cluster it tested, as a dashboard lists
    it: "gpuconf kubeconfig:/ci/kubeconfig@prod", "gpuconf simulated:broken.yaml"; "gpuconf" without one."""
    return f"gpuconf {run.provenance}" if run.provenance else "gpuconf"


def _word(verdict: str) -> str:
    from gpuconf.report.writers import verdict_word

    return verdict_word(verdict)


def run_properties(run: RunRecord, verdict: str) -> list[tuple[str, str]]:
    """The testsuite properties saying what the run was and concluded: ``gpuconf.verdict`` (its word),
    ``gpuconf.provenance``, ``gpuconf.faults`` (a simulated run's injected faults, "; "-separated),
    then the coverage (junit_coverage_properties)."""
    props = [(VERDICT_PROPERTY, _word(verdict)), ("gpuconf.provenance", run.provenance or "no cluster")]
    if run.faults:
        props.append(("gpuconf.faults", "; ".join(run.faults)))
    return props + junit_coverage_properties(run.coverage)


def failure_type(outcome: str) -> str:
    """A check's <failure> type: "degraded" for DEGRADED, "fail" for anything else that failed."""
    return "degraded" if outcome == DEGRADED else "fail"


def failure_message(outcome: str, message: str) -> str:
    """A check's <failure> message led by its outcome's word ("DEGRADED: ...", "FAIL: ..."), without the
    "Failed: " pytest puts before it."""
    word = "DEGRADED" if outcome == DEGRADED else "FAIL"
    text = message.removeprefix("Failed: ")
    return text if text.startswith(f"{word}: ") else f"{word}: {text}"


def signoff_cases(run: RunRecord, results: Sequence[CheckResult]) -> list[Case]:
    """The test cases a dashboard counts the sign-off by: ``gpuconf.sign-off`` (passed for PASS; a
    failure typed "fail" or "degraded" for FAIL and DEGRADED; an error typed with the verdict for a run
    that signed nothing off: INCOMPLETE, PARTIAL, NOT TESTED, NOT STARTED, whose exit status is its
    type), its message the verdict and the reports' headline; then one skipped ``gpuconf.coverage``
    case per untested selected GPU node, its message why."""
    from gpuconf.report.writers import _headline

    verdict = cluster_verdict(run, results)
    word = _word(verdict)
    # a run that could not start says why, as its one line on stderr did
    message = run.error if run.error else f"{word}: {_headline(run, verdict, results)}"
    outcome: Literal["passed", "failure", "error"] = (
        "passed" if verdict == PASS else "failure" if verdict in (FAIL, DEGRADED) else "error")
    kind = f"exit status {run.exit_status}" if run.error else failure_type(verdict) if outcome == "failure" \
        else verdict
    props = (("gpuconf.outcome", verdict),)  # a check's gpuconf.verdict property is its record (gpuconf.verdict)
    # no time of its own (a dashboard summing the cases' times counts the checks' once), but a run that
    # could not start, whose one case it is
    wall = run.finished - run.started if run.error else 0.0
    cases = [Case(SIGN_OFF[1], SIGN_OFF[0], wall, outcome,
                  message if outcome != "passed" else "", kind if outcome != "passed" else None,
                  system_out=message if outcome == "passed" else None, properties=props)]
    missing = run.coverage.missing() if run.coverage is not None else {}
    cases += [Case(node, COVERAGE_CLASS, 0.0, "skipped", u.reason, "gpuconf.not-tested",
                   properties=(("gpuconf.node", node), ("gpuconf.outcome", NOT_TESTED), ("gpuconf.state", u.state)))
              for node, u in missing.items()]
    return cases


def case_id(nodeid: str) -> tuple[str, str]:
    """(classname, name) of a pytest node id as pytest's junitxml names its test case."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    return ".".join(names[:-1]), names[-1] + bracket + params


def finish_junit(path: str | Path, run: RunRecord, results: Sequence[CheckResult]) -> bool:
    """pytest's junit.xml of the run made gpuconf's, in place: the suite named (suite_name), the run's
    properties first (run_properties, those pytest's file lacks), signoff_cases before pytest's own,
    each failed check's <failure> typed "fail" or "degraded" (its ``gpuconf.outcome`` property, else its
    result) with the word leading its message, and the counts to match. False when the file already is
    gpuconf's; OSError (one line) for a file that cannot be read, parsed or written."""
    from gpuconf.report.writers import _atomic_write

    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise OSError(f"gpuconf: could not add the sign-off to {path}: {exc}") from None
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        raise OSError(f"gpuconf: could not add the sign-off to {path}: it holds no <testsuite>")
    if any((c.get("classname"), c.get("name")) == SIGN_OFF for c in suite.iter("testcase")):
        return False
    outcomes = {case_id(r.nodeid): r.outcome for r in results}
    for case in suite.iter("testcase"):
        failure = case.find("failure")
        if failure is None:
            continue
        said = {p.get("name"): p.get("value") for p in case.findall("properties/property")}.get("gpuconf.outcome")
        outcome = DEGRADED if (said or outcomes.get((case.get("classname", ""), case.get("name", "")))) == DEGRADED \
            else FAIL
        failure.set("type", failure_type(outcome))
        failure.set("message", failure_message(outcome, failure.get("message", "")))
    cases = signoff_cases(run, results)
    props = suite.find("properties")
    if props is None:
        props = ET.Element("properties")
        suite.insert(0, props)
    have = {p.get("name") for p in props.findall("property")}
    for index, (key, value) in enumerate((k, v) for k, v in run_properties(run, cluster_verdict(run, results))
                                         if k not in have):
        props.insert(index, ET.Element("property", {"name": _xml(key), "value": _xml(value)}))
    at = list(suite).index(props) + 1
    for offset, c in enumerate(cases):
        suite.insert(at + offset, _case_element(c))
    added = {"tests": len(cases), "failures": sum(c.outcome == "failure" for c in cases),
             "errors": sum(c.outcome == "error" for c in cases), "skipped": sum(c.outcome == "skipped" for c in cases)}
    for element in {id(e): e for e in (root, suite)}.values():
        for key, n in added.items():
            if element.get(key, "").isdigit():
                element.set(key, str(int(element.get(key, "0")) + n))
    name = suite_name(run)
    suite.set("name", _xml(name))
    if root is not suite:
        root.set("name", _xml(name))
    _atomic_write(Path(path), '<?xml version="1.0" encoding="utf-8"?>' + ET.tostring(root, encoding="unicode"))
    return True


def gotestsum_testsuites(package: str, cases: Sequence[Case], *, time: float, timestamp: str,
                         properties: Sequence[tuple[str, str]] = ()) -> bytes:
    """The document as gotestsum writes it for one Go package: <testsuites> holding one <testsuite>
    named ``package``, its cases' classname the package. A failed case's ``detail`` (its output) is
    the <failure> text; a skipped case's is the <skipped> message. ``error`` cases are not a Go
    outcome and are refused."""
    if any(c.outcome == "error" for c in cases):
        raise ValueError("a go test passes, fails or is skipped: no error cases in gotestsum's shape")
    failures, skipped = sum(c.outcome == "failure" for c in cases), sum(c.outcome == "skipped" for c in cases)
    seconds = f"{max(time, 0.0):.6f}"
    root = ET.Element("testsuites", {"tests": str(len(cases)), "failures": str(failures), "errors": "0",
                                     "time": seconds})
    suite = ET.SubElement(root, "testsuite", {"tests": str(len(cases)), "failures": str(failures),
                                              "skipped": str(skipped), "time": seconds, "name": _xml(package),
                                              "timestamp": timestamp})
    if properties:
        props = ET.SubElement(suite, "properties")
        for key, value in properties:
            ET.SubElement(props, "property", {"name": _xml(key), "value": _xml(value)})
    for c in cases:
        case = ET.SubElement(suite, "testcase", {"classname": _xml(package), "name": _xml(c.name),
                                                 "time": f"{max(c.time, 0.0):.6f}"})
        if c.outcome == "failure":
            ET.SubElement(case, "failure", {"message": "Failed", "type": ""}).text = _xml(c.detail or "")
        elif c.outcome == "skipped":
            ET.SubElement(case, "skipped", {"message": _xml(c.detail or c.message)})
    ET.indent(root, space="\t")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n").encode()
