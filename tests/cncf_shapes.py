"""Strict readers of the CNCF evidence shapes, proven on a real v1.37 submission (tests/data/real/cncf/):
the ``go test -json`` event stream (results.json), ``go test -v`` text (e2e.log) and the PRODUCT.yaml
template. Each returns what it read and the problems it found, so a test can assert both that a real
sample has none and that a broken one is caught."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REAL = Path(__file__).parent / "data" / "real" / "cncf"
TEMPLATE = REAL / "AIConformance-1.37.yaml"

#: cmd/test2json's TestEvent, in its field order (https://pkg.go.dev/cmd/test2json); FailedBuild (newer
#: Go, build failures only) is never written for tests that ran.
FIELDS = ("Time", "Action", "Package", "Test", "Elapsed", "Output")
ACTIONS = {"start", "run", "pause", "cont", "pass", "bench", "fail", "output", "skip"}
TERMINAL = {"pass", "fail", "skip"}
#: The fields each action carries (besides Time, Action, Package): a package-level event has no Test.
FIELDS_OF = {"start": ({"Time", "Action", "Package"},),
             "run": ({"Time", "Action", "Package", "Test"},),
             "pause": ({"Time", "Action", "Package", "Test"},),
             "cont": ({"Time", "Action", "Package", "Test"},),
             "output": ({"Time", "Action", "Package", "Output"}, {"Time", "Action", "Package", "Test", "Output"}),
             "pass": ({"Time", "Action", "Package", "Elapsed"}, {"Time", "Action", "Package", "Test", "Elapsed"}),
             "fail": ({"Time", "Action", "Package", "Elapsed"}, {"Time", "Action", "Package", "Test", "Elapsed"}),
             "skip": ({"Time", "Action", "Package", "Elapsed"}, {"Time", "Action", "Package", "Test", "Elapsed"})}
#: Go's JSON encoding of a time.Time: RFC 3339 with up to nine fraction digits, trailing zeros dropped.
RFC3339_NANO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{0,8}[1-9])?(Z|[+-]\d{2}:\d{2})$")


def instant(stamp: str) -> tuple[str, int]:
    """An RFC 3339 UTC time as (seconds, nanoseconds), comparable whatever its fraction's length."""
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    return whole, int(fraction.ljust(9, "0")) if fraction else 0


@dataclass
class Stream:
    package: str | None = None
    started: list[str] = field(default_factory=list)  # the tests in the order they ran
    verdicts: dict[str, str] = field(default_factory=dict)  # test -> pass|fail|skip
    elapsed: dict[str, float] = field(default_factory=dict)
    output: dict[str, str] = field(default_factory=dict)  # test ("" for the package) -> its Output, joined
    package_verdict: str | None = None
    problems: list[str] = field(default_factory=list)


def read_stream(text: str) -> Stream:
    """The event stream, line by line: each line one JSON object with exactly the fields go test -json
    writes for its Action, in Go's order; one package; times in order; start first; every test run
    before its output and its one pass|fail|skip (with Elapsed), a subtest inside its running parent
    and finished before it; the package's pass|fail last."""
    s = Stream()
    running: set[str] = set()
    last_time = ("", 0)
    if not text.endswith("\n"):
        s.problems.append("the stream does not end with a newline")
    for n, line in enumerate(text.splitlines(), 1):
        try:
            e = json.loads(line)
        except json.JSONDecodeError as exc:
            s.problems.append(f"line {n}: not JSON ({exc})")
            continue
        if not isinstance(e, dict):
            s.problems.append(f"line {n}: not an object")
            continue
        keys = list(e)
        action = e.get("Action")
        if action not in ACTIONS:
            s.problems.append(f"line {n}: unknown Action {action!r}")
            continue
        if set(keys) not in FIELDS_OF[action]:
            s.problems.append(f"line {n}: {action} event with fields {keys}")
        if keys != [f for f in FIELDS if f in e]:
            s.problems.append(f"line {n}: fields out of Go's order: {keys}")
        if not RFC3339_NANO.match(str(e.get("Time", ""))):
            s.problems.append(f"line {n}: Time {e.get('Time')!r} is not RFC 3339 as Go writes it")
        else:
            when = instant(str(e["Time"]))
            if when < last_time:
                s.problems.append(f"line {n}: Time goes back")
            last_time = when
        if s.package is None:
            s.package = e.get("Package")
            if action != "start":
                s.problems.append(f"line {n}: the stream does not begin with start")
        elif e.get("Package") != s.package:
            s.problems.append(f"line {n}: a second package {e.get('Package')!r}")
        if s.package_verdict is not None:
            s.problems.append(f"line {n}: an event after the package's {s.package_verdict}")
        if "Elapsed" in e and (not isinstance(e["Elapsed"], int | float) or e["Elapsed"] < 0):
            s.problems.append(f"line {n}: Elapsed {e['Elapsed']!r}")
        test = e.get("Test")
        if action == "output":
            s.output[test or ""] = s.output.get(test or "", "") + str(e.get("Output"))
        if test is None:
            if action in TERMINAL:
                s.package_verdict = action
                if running:
                    s.problems.append(f"line {n}: the package ended with {sorted(running)} running")
            continue
        if action == "run":
            if test in running or test in s.verdicts:
                s.problems.append(f"line {n}: {test} run twice")
            parent = test.rsplit("/", 1)[0] if "/" in test else None
            if parent is not None and parent not in running:
                s.problems.append(f"line {n}: {test} runs outside its parent {parent}")
            running.add(test)
            s.started.append(test)
        elif test not in running:
            s.problems.append(f"line {n}: {action} for {test}, which is not running")
        elif action in TERMINAL:
            open_subtests = [t for t in running if t.startswith(test + "/")]
            if open_subtests:
                s.problems.append(f"line {n}: {test} ended before its subtests {sorted(open_subtests)}")
            running.discard(test)
            s.verdicts[test] = action
            if "Elapsed" in e:
                s.elapsed[test] = float(e["Elapsed"])
    if running:
        s.problems.append(f"never finished: {sorted(running)}")
    if s.package_verdict is None:
        s.problems.append("the package never passed or failed")
    return s


# --- go test -v --------------------------------------------------------------------------------

RUN_LINE = re.compile(r"^=== (RUN|PAUSE|CONT|NAME)   (?P<name>\S+)$")
RESULT_LINE = re.compile(r"^(?P<indent>(    )*)--- (?P<word>PASS|FAIL|SKIP): (?P<name>\S+) \((?P<s>\d+\.\d\d)s\)$")
PACKAGE_LINE = re.compile(r"^(?:ok  |FAIL)\t(?P<package>\S+)\t(?P<s>\d+\.\d{3})s$")
WORD = {"PASS": "pass", "FAIL": "fail", "SKIP": "skip"}


@dataclass
class Verbose:
    package: str | None = None
    verdicts: dict[str, str] = field(default_factory=dict)
    elapsed: dict[str, float] = field(default_factory=dict)
    package_verdict: str | None = None
    problems: list[str] = field(default_factory=list)


def read_verbose(text: str) -> Verbose:
    """``go test -v`` text, strictly: lines before the first ``=== RUN`` are the binary's own; after it
    every line is ``=== RUN   <name>``, an indented log line, or ``--- PASS|FAIL|SKIP: <name> (0.00s)``
    indented four spaces per subtest level, for a test that ran and has no result yet, a subtest's result
    after its parent's; the text ends with ``PASS`` or ``FAIL`` and ``ok  \\t<pkg>\\t1.234s`` or
    ``FAIL\\t<pkg>\\t1.234s``, failing when a test failed."""
    v = Verbose()
    lines = text.splitlines()
    if len(lines) < 2 or not text.endswith("\n"):
        v.problems.append("too short to be go test -v output")
        return v
    *body, end, summary = lines
    ran: set[str] = set()
    seen_run = False
    for n, line in enumerate(body, 1):
        if m := RUN_LINE.match(line):
            seen_run = True
            if m["name"] in ran and m[1] == "RUN":
                v.problems.append(f"line {n}: {m['name']} run twice")
            ran.add(m["name"])
        elif m := RESULT_LINE.match(line):
            name = m["name"]
            if name not in ran:
                v.problems.append(f"line {n}: a result for {name}, which never ran")
            if name in v.verdicts:
                v.problems.append(f"line {n}: a second result for {name}")
            if len(m["indent"]) != 4 * name.count("/"):
                v.problems.append(f"line {n}: {name} indented {len(m['indent'])} spaces")
            parent = name.rsplit("/", 1)[0] if "/" in name else None
            if parent is not None and parent not in v.verdicts:
                v.problems.append(f"line {n}: {name}'s result before its parent's")
            v.verdicts[name] = WORD[m["word"]]
            v.elapsed[name] = float(m["s"])
        elif seen_run and not line.startswith("    "):
            v.problems.append(f"line {n}: not go test -v: {line!r}")
    if missing := ran - set(v.verdicts):
        v.problems.append(f"no result for {sorted(missing)}")
    m = PACKAGE_LINE.match(summary)
    if end not in ("PASS", "FAIL") or m is None:
        v.problems.append(f"does not end with PASS|FAIL and the package line: {end!r}, {summary!r}")
        return v
    v.package, v.package_verdict = m["package"], "pass" if summary.startswith("ok") else "fail"
    if (end == "PASS") != (v.package_verdict == "pass"):
        v.problems.append(f"{end} then {summary!r}")
    if "fail" in v.verdicts.values() and v.package_verdict != "fail":
        v.problems.append("a test failed but the package passed")
    return v


# --- PRODUCT.yaml ------------------------------------------------------------------------------

#: scripts/validate.go of cncf/k8s-ai-conformance (stored snapshot b2c8969): validStatuses, and the
#: metadata it requires (metadataFields: repoUrl is optional, k8sConformanceUrl required).
VALID_STATUSES = {"Implemented", "Not Implemented", "Partially Implemented", "N/A"}
REQUIRED_METADATA = {"kubernetesVersion", "platformName", "platformVersion", "vendorName", "websiteUrl",
                     "documentationUrl", "productLogoUrl", "description", "contactEmailAddress", "k8sConformanceUrl"}


def template() -> dict[str, Any]:
    doc = yaml.safe_load(TEMPLATE.read_text())
    assert isinstance(doc, dict)
    return doc


def fragment_problems(fragment: dict[str, Any]) -> list[str]:
    """The fragment against the template's keys: the same top-level keys, the template's metadata keys
    (plus what the validator requires), every category and requirement in the template's order with the
    template's keys in its order, id, description and level; a status the validator knows (or blank,
    then no evidence)."""
    tpl = template()
    problems = []
    if list(fragment) != list(tpl):
        problems.append(f"top-level keys {list(fragment)}, the template's {list(tpl)}")
    meta = fragment.get("metadata") or {}
    if set(meta) != set(tpl["metadata"]) | REQUIRED_METADATA:
        problems.append(f"metadata keys {sorted(meta)}")
    spec, tspec = fragment.get("spec") or {}, tpl["spec"]
    if list(spec) != list(tspec):
        problems.append(f"categories {list(spec)}, the template's {list(tspec)}")
    for category, treqs in tspec.items():
        reqs = spec.get(category) or []
        if [r.get("id") for r in reqs] != [r["id"] for r in treqs]:
            problems.append(f"{category}: ids {[r.get('id') for r in reqs]}")
            continue
        for req, treq in zip(reqs, treqs, strict=True):
            if list(req) != list(treq):
                problems.append(f"{req['id']}: keys {list(req)}, the template's {list(treq)}")
            for key in ("description", "level"):
                if req.get(key) != treq[key]:
                    problems.append(f"{req['id']}: {key} differs from the template's")
            status = req.get("status")
            if status not in VALID_STATUSES | {""}:
                problems.append(f"{req['id']}: status {status!r}")
            if status == "" and req.get("evidence"):
                problems.append(f"{req['id']}: evidence without a status")
            if not isinstance(req.get("notes"), str):
                problems.append(f"{req['id']}: notes {req.get('notes')!r}")
    return problems


def submission_errors(fragment: dict[str, Any], root: Path) -> list[str]:
    """What the CNCF validator (scripts/validate.go) would say of the fragment as a PRODUCT.yaml, less
    its network checks: missing or placeholder metadata, a MUST not Implemented, a bad status, N/A
    without notes; and each file:// evidence path (its anchor dropped) missing under ``root``, the
    checkout the links are relative to, as submissions write them."""
    errors = []
    meta = fragment.get("metadata") or {}
    for key in sorted(REQUIRED_METADATA):
        value = meta.get(key)
        if not value:
            errors.append(f"Missing metadata field: {key}")
        elif isinstance(value, str) and value.startswith("[") and value.endswith("]"):
            errors.append(f"Metadata field {key} has placeholder value: {value}")
    levels = {r["id"]: r["level"] for reqs in template()["spec"].values() for r in reqs}
    for reqs in (fragment.get("spec") or {}).values():
        for req in reqs:
            status, level = req.get("status"), levels.get(req["id"])
            if level == "SHOULD" and status == "" and not req.get("evidence"):
                continue
            if status not in VALID_STATUSES:
                errors.append(f"Invalid status '{status}' for '{req['id']}'")
            if level == "MUST" and status != "Implemented":
                errors.append(f"Requirement '{req['id']}' is MUST level but status is '{status}'")
            if status == "N/A" and not req.get("notes"):
                errors.append(f"Notes required for '{req['id']}' when status is N/A")
            for link in req.get("evidence") or []:
                if link.startswith("file://") and not (root / link.removeprefix("file://").split("#")[0]).is_file():
                    errors.append(f"Invalid evidence file for '{req['id']}': {link}")
    return errors
