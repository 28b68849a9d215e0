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
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from gpuconf.report.model import Coverage

__all__ = ["COVERAGE_PROPERTY", "UNTESTED_PREFIX", "Case", "gotestsum_testsuites", "junit_coverage_properties",
           "testsuites"]

#: The testsuite properties that carry a run's coverage (issue 25): the line, and per untested node
#: ``gpuconf.untested.<node>`` = "<state>: <reason>".
COVERAGE_PROPERTY = "gpuconf.coverage"
UNTESTED_PREFIX = "gpuconf.untested."

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
    for c in cases:
        case = ET.SubElement(suite, "testcase", {"classname": _xml(c.classname), "name": _xml(c.name),
                                                 "time": f"{max(c.time, 0.0):.3f}"})
        if c.outcome != "passed":
            child = ET.SubElement(case, c.outcome, {"message": _xml(c.message)})
            if c.type is not None:
                child.set("type", _xml(c.type))
            if c.detail is not None:
                child.text = _xml(c.detail)
        if c.system_out is not None:
            ET.SubElement(case, "system-out").text = _xml(c.system_out)
    root = ET.Element("testsuites", totals)
    root.append(suite)
    ET.indent(root)
    return bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True))


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
