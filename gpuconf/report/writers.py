"""Report writers: CTRF-compatible JSON, a Markdown summary, a self-contained HTML sign-off page.

Every writer creates the directory, writes atomically (a temporary file renamed over the target)
and renders whatever the results contain (odd characters, markup, missing fields) without raising
on it; the HTML escapes every value and references nothing outside itself.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from markupsafe import Markup

from gpuconf.report.junit import run_properties, signoff_cases, suite_name, testsuites
from gpuconf.report.model import (
    BLOCKED,
    CLUSTER,
    COULD_NOT_RUN,
    DEGRADED,
    FAIL,
    INCOMPLETE,
    NODE_UNAVAILABLE,
    NOT_APPLICABLE,
    NOT_SELECTED,
    NOT_STARTED,
    NOT_TESTED,
    NOT_TESTED_KINDS,
    PARTIAL,
    PASS,
    STATE_WORDS,
    CheckResult,
    Coverage,
    RunRecord,
    Series,
    cluster_verdict,
    node_verdicts,
    not_tested_kind,
    result_remediation,
    worst,
)

__all__ = ["CTRF_STATUS", "counts", "write_html", "write_json", "write_markdown", "write_reports"]

#: gpuconf outcome -> CTRF test status (a DEGRADED check fails its test, as in JUnit).
CTRF_STATUS = {PASS: "passed", FAIL: "failed", DEGRADED: "failed", NOT_TESTED: "skipped"}
_TEMPLATES = Path(__file__).parent / "templates"


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _atomic_write(path: Path, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline="\n") as fh:
            fh.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # as junit.xml and the CNCF evidence get: mkstemp's 0600 is private
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def counts(results: Sequence[CheckResult]) -> dict[str, int]:
    """CTRF summary counts (tests, passed, failed, skipped, pending, other)."""
    out = {"tests": len(results), "passed": 0, "failed": 0, "skipped": 0, "pending": 0, "other": 0}
    for r in results:
        out[CTRF_STATUS.get(r.outcome, "other")] += 1
    return out


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


#: The CTRF specification version report.json follows (the JSON schema the official validator, npm
#: ``ctrf``, checks it against: tests/test_reports_ctrf.py).
CTRF_SPEC_VERSION = "0.0.0"


def run_meta(doc: Any) -> dict[str, Any] | None:
    """gpuconf's own section of a report.json (``extra.gpuconf``: provenance, run id, node verdicts...),
    or None when the document has none (not a gpuconf report)."""
    extra = doc.get("extra") if isinstance(doc, dict) else None
    meta = extra.get("gpuconf") if isinstance(extra, dict) else None
    return meta if isinstance(meta, dict) else None


def _suite_path(r: CheckResult) -> list[str]:
    """CTRF's suite hierarchy (top level first): the test file, then the capability's check family."""
    path = [r.nodeid.split("::", 1)[0] or "gpuconf"]
    family = r.check.split(".", 1)[0] if "." in r.check else None
    return path + [family] if family else path


def ctrf_document(run: RunRecord, results: Sequence[CheckResult]) -> dict[str, Any]:
    """The run as a CTRF document (https://ctrf.io, spec 0.0.0); gpuconf's data sits in CTRF's
    extension points: each test's ``extra`` and the document's ``extra.gpuconf``."""
    import uuid

    from gpuconf import __version__

    tests = []
    for r in results:
        test: dict[str, Any] = {"name": r.nodeid, "status": CTRF_STATUS.get(r.outcome, "other"),
                                "duration": _ms(r.duration), "suite": _suite_path(r),
                                "filePath": r.nodeid.split("::", 1)[0], "rawStatus": r.outcome}
        if r.message:
            test["message"] = r.message
        test["extra"] = {"check": r.check, "node": r.node, "outcome": r.outcome, "expected": r.expected,
                         "observed": r.observed, "remediation": result_remediation(r) if r.outcome in (
                             FAIL, DEGRADED) else None, **r.record.as_json()}
        if r.outcome == NOT_TESTED:
            test["extra"]["not_tested"] = not_tested_kind(r)
        if r.curve:
            test["extra"]["curve"] = [[x, y] for x, y in r.curve]
        if r.metrics:  # what `gpuconf report diff` compares besides the curve
            test["extra"]["metrics"] = {name: float(value) for name, value in r.metrics.items()}
        if r.series:
            test["extra"]["series"] = [s.as_json() for s in r.series]
        if r.cncf:  # the CNCF requirements it gives evidence for (a merge writes the evidence from them)
            test["extra"]["cncf"] = list(r.cncf)
        tests.append(test)
    summary = {**counts(results), "start": _ms(run.started), "stop": _ms(run.finished),
               "duration": max(0, _ms(run.finished - run.started))}
    return {
        "reportFormat": "CTRF",
        "specVersion": CTRF_SPEC_VERSION,
        "reportId": str(uuid.uuid4()),
        "timestamp": _iso(run.finished),
        "generatedBy": f"gpuconf {__version__}",
        "results": {"tool": {"name": "gpuconf", "version": __version__}, "summary": summary, "tests": tests,
                    "environment": {"reportName": _title(run), "testEnvironment": run.provenance or "no cluster",
                                    "extra": {"provenance": run.provenance}}},
        "extra": {"gpuconf": {"provenance": run.provenance, "simulated": run.simulated, "run_id": run.run_id,
                              "started": _iso(run.started), "finished": _iso(run.finished),
                              "exit_status": run.exit_status, "interrupted": run.interrupted, "error": run.error,
                              "faults": list(run.faults),
                              "verdict": cluster_verdict(run, results),
                              "nodes": node_verdicts(results, run.coverage),
                              "node_kinds": _kinds(run),
                              "checks_by_node": checks_by_node(results),
                              "coverage": run.coverage.as_json() if run.coverage is not None else None,
                              **({"shard": dict(run.shard)} if run.shard is not None else {}),
                              **({"options": dict(run.options)} if run.options else {}),
                              **({"scope": dict(run.scope)} if run.scope is not None else {}),
                              **({"server_version": run.server_version} if run.server_version else {})}},
    }


def checks_by_node(results: Sequence[CheckResult]) -> dict[str, dict[str, Any]]:
    """Per node, which checks ran (judged: pass, degraded or fail) and which did not, by NOT TESTED kind:
    what the sign-off covered there, for a reader that does not count results itself."""
    out: dict[str, dict[str, Any]] = {}
    for r in results:
        entry = out.setdefault(r.node_key, {"ran": [], "not_tested": {}})
        if r.outcome == NOT_TESTED:
            entry["not_tested"].setdefault(not_tested_kind(r), []).append(r.check)
        else:
            entry["ran"].append(r.check)
    return out


def write_json(run: RunRecord, results: Sequence[CheckResult], path: Path) -> Path:
    return _atomic_write(path, json.dumps(ctrf_document(run, results), indent=2, ensure_ascii=False, default=str)
                         + "\n")


def _cell(text: object) -> str:
    """One Markdown table cell / list item: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _failures(results: Sequence[CheckResult]) -> list[CheckResult]:
    return [r for r in results if r.outcome in (FAIL, DEGRADED)]


def _title(run: RunRecord) -> str:
    where = run.provenance or "no cluster"
    return (f"gpuconf sign-off: {'SIMULATED cluster, ' if run.simulated else ''}{where}{_fault_words(run)}"
            f"{_shard_words(run)}")


#: How many injected faults a title names; past that it counts them (report.md and report.html list all).
_TITLE_FAULTS = 2


def _fault_words(run: RunRecord) -> str:
    """", faults injected: gpu-lost on h100-0 GPU 3" for a simulated run whose profile injected faults
    (", 5 faults injected" past _TITLE_FAULTS), so a broken profile's reports never read as a healthy one's."""
    if not run.faults:
        return ""
    if len(run.faults) > _TITLE_FAULTS:
        return f", {len(run.faults)} faults injected"
    return f", fault{'s' if len(run.faults) > 1 else ''} injected: {'; '.join(run.faults)}"


def _shard_words(run: RunRecord) -> str:
    """", shard 1 of 4" for a shard's own reports, ", merged from 4 shards" for a merge's ("3 of 4
    shards" when some are missing)."""
    shard = run.shard
    if not shard:
        return ""
    count = shard.get("count")
    if "merged" in shard:
        merged = len(shard["merged"])
        return f", merged from {merged} shards" if merged == count else f", merged from {merged} of {count} shards"
    return f", shard {shard.get('index')} of {count}"


_WORDS = {PASS: "PASS", FAIL: "FAIL", DEGRADED: "DEGRADED", NOT_TESTED: "NOT TESTED", NOT_STARTED: "NOT STARTED",
          INCOMPLETE: "INCOMPLETE", PARTIAL: "PARTIAL"}


def verdict_word(verdict: str) -> str:
    """A verdict as every report and the terminal print it: PASS, FAIL, NOT TESTED, PARTIAL..."""
    return _WORDS.get(verdict, verdict.replace("-", " ").upper())


def narrowed(run: RunRecord) -> str:
    """Why the run is not the sign-off's whole scope ("-m 'smoke' deselected 121 of 123 checks"), or ""."""
    return "; ".join(str(n) for n in (run.scope or {}).get("narrowed") or ())


def _untested(run: RunRecord) -> list[dict[str, str]]:
    """The selected GPU nodes the run did not test, in selection order: node, state (as the coverage
    line words it), reason."""
    missing = run.coverage.missing() if run.coverage is not None else {}
    return [{"node": node, "state": STATE_WORDS.get(u.state, u.state), "reason": u.reason}
            for node, u in missing.items()]


def _kinds(run: RunRecord) -> dict[str, str]:
    """How each GPU node hands out its GPUs (Coverage.kinds: device plugin, DRA claims, a DRA-backed
    extended resource, both), by node; empty for a run without the accounting."""
    return dict(run.coverage.kinds) if run.coverage is not None else {}


def _node_word(verdict: str, node: str, coverage: Coverage | None) -> str:
    """A node's verdict for the reader; an untested node says why: NOT TESTED (cordoned)."""
    state = coverage.state(node) if coverage is not None else None
    word = _WORDS.get(verdict, verdict.upper())
    return f"{word} ({STATE_WORDS.get(state, state)})" if state and verdict == NOT_TESTED else word


def write_markdown(run: RunRecord, results: Sequence[CheckResult], path: Path) -> Path:
    """The CI summary: the cluster verdict, the coverage line, each failure once with its remedy, the
    GPU nodes not tested with their reasons, the node verdicts, and the NOT TESTED reasons, each
    distinct reason once."""
    c = counts(results)
    verdict = cluster_verdict(run, results)
    lines = [f"# {_cell(_title(run))}", "",
             f"**{_WORDS.get(verdict, verdict.upper())}**: {_cell(_headline(run, verdict, results))}", ""]
    if run.coverage is not None:
        lines += [f"**Coverage**: {_cell(run.coverage.line())}", ""]
    if run.faults:
        lines += [f"**Faults injected** (simulated): {_cell('; '.join(run.faults))}", ""]
    if run.interrupted:
        lines += ["**INTERRUPTED**: the run was stopped; these are the results collected so far.", ""]
    by_kind = not_tested_counts(results)
    lines += [f"{c['tests']} checks: {c['passed']} passed, {c['failed']} failed, {c['skipped']} not tested"
              + (f" ({by_kind})" if by_kind else "") + (f", {c['other']} other" if c["other"] else "")
              + f" (exit status {run.exit_status})", ""]
    failures = sorted(_failures(results), key=lambda r: 0 if r.outcome == FAIL else 1)
    if failures:
        lines += ["## Failures", ""]
        for r in failures:
            view = failure_view(r)
            seen = f" (expected {r.expected}; observed {r.observed})" if r.expected or r.observed else ""
            lines.append(f"- **{r.outcome.upper()}** {_cell(r.node_key)} `{_cell(r.check)}`: "
                         + " ".join(_cell(part) for part in (view["summary"], seen) if part))
            if view["remediation"]:
                lines.append(f"  - remedy: {_cell(view['remediation'])}")
        lines.append("")
    untested = _untested(run)
    if untested:
        lines += ["## Not tested nodes", ""]
        lines += [f"- {_cell(u['node'])} ({_cell(u['state'])}): {_cell(u['reason'])}" for u in untested]
        lines.append("")
    verdicts = node_verdicts(results, run.coverage)
    if verdicts:
        kinds = _kinds(run)  # the column where the run knows each node's kind
        lines += (["| node | GPUs through | verdict |", "|---|---|---|"] if kinds
                  else ["| node | verdict |", "|---|---|"])
        lines += [f"| {_cell('cluster-wide checks' if node == CLUSTER else node)} | "
                  + (f"{_cell(kinds.get(node, ''))} | " if kinds else "")
                  + f"{_cell(_node_word(v, node, run.coverage))} |" for node, v in verdicts.items()]
        lines.append("")
    caveats = _caveats(results)
    if caveats:
        lines += ["## Passed with caveats", "", "What these checks passed without judging:", ""]
        lines += [f"- `{_cell(c['result'].check)}` on {_cell(c['result'].node_key)}: {_cell('; '.join(c['lines']))}"
                  for c in caveats]
        lines.append("")
    not_tested = _not_tested(results)
    for kind in NOT_TESTED_KINDS:
        if items := not_tested[kind]:
            lines += [f"## {KIND_HEADINGS[kind]}", ""]
            lines += [f"- `{_cell(i['check'])}` on {_nodes_named(i['nodes'])}: {_cell(i['reason'])}" for i in items]
            lines.append("")
    return _atomic_write(path, "\n".join(lines))


def capability(r: CheckResult) -> str:
    """The capability (suite) a result belongs to: its test file without ``test_`` (suites/test_nccl.py:
    nccl), or the check id's family for a result without a file."""
    stem = Path(r.nodeid.split("::", 1)[0]).stem
    return stem.removeprefix("test_") or r.check.split(".", 1)[0]


def _cell_label(results: Sequence[CheckResult], *, untested: bool = False) -> tuple[str, str]:
    """(css class, label) of a nodes x capabilities cell: its worst outcome; an all-skipped cell says
    whether something could not run or nothing applied. On a node the run did not test (``untested``)
    a passing cell is NOT TESTED, as its node is (node_verdicts): a failure there still shows."""
    outcome = worst(r.outcome for r in results)
    if untested and outcome in (PASS, NOT_TESTED):
        return NOT_TESTED, "NOT TESTED"
    if outcome != NOT_TESTED:
        return outcome, outcome.upper()
    kinds = {not_tested_kind(r) for r in results}
    for kind in NOT_TESTED_KINDS:  # the kind that matters most names the cell
        if kind in kinds:
            return kind, _CELL_WORDS[kind]
    return NOT_APPLICABLE, "N/A"


#: An all-NOT-TESTED cell's label by kind (the page's legend says each).
_CELL_WORDS = {COULD_NOT_RUN: "NOT RUN", BLOCKED: "BLOCKED", NODE_UNAVAILABLE: "NOT TESTED",
               NOT_SELECTED: "NOT ASKED", NOT_APPLICABLE: "N/A"}
#: Each kind's heading in report.md and report.html, in NOT_TESTED_KINDS order.
KIND_HEADINGS = {COULD_NOT_RUN: "Could not run", BLOCKED: "Blocked by a failure above",
                 NODE_UNAVAILABLE: "Node unavailable", NOT_SELECTED: "Not asked for (opt-in tiers and options)",
                 NOT_APPLICABLE: "Not applicable here"}


def _grid(results: Sequence[CheckResult], coverage: Coverage | None = None) -> dict[str, Any]:
    """Nodes (cluster-wide checks apart, untested selected nodes included) x capabilities, each cell
    its results."""
    caps: dict[str, None] = {}
    cells: dict[tuple[str, str], list[CheckResult]] = {}
    for r in results:
        caps.setdefault(capability(r))
        cells.setdefault((r.node_key, capability(r)), []).append(r)
    nodes = [n for n in node_verdicts(results, coverage) if n != CLUSTER]
    untested = {u.node for u in coverage.untested} if coverage is not None else set()
    labels = {key: _cell_label(rs, untested=key[0] in untested) for key, rs in cells.items()}
    out = {key: {"results": rs, "css": labels[key][0], "label": labels[key][1],
                 "counts": f"{sum(r.outcome == PASS for r in rs)}/{len(rs)}"} for key, rs in cells.items()}
    return {"nodes": nodes, "capabilities": list(caps), "cells": out,
            "cluster": [r for r in results if r.node is None]}


def _not_tested(results: Sequence[CheckResult]) -> dict[str, list[dict[str, Any]]]:
    """NOT TESTED results by kind, each distinct (check, reason) once with the nodes it holds for."""
    out: dict[str, dict[tuple[str, str], list[str]]] = {kind: {} for kind in NOT_TESTED_KINDS}
    for r in results:
        if r.outcome == NOT_TESTED:
            reason = _first_line(r.record.summary or r.message) or "no reason given"
            nodes = out[not_tested_kind(r)].setdefault((r.check, _strip_node(reason, r.node)), [])
            nodes.append(r.node_key)
    return {kind: [{"check": c, "reason": why, "nodes": ns} for (c, why), ns in groups.items()]
            for kind, groups in out.items()}


def not_tested_counts(results: Sequence[CheckResult]) -> str:
    """"43 not applicable here, 11 not asked for, 2 could not run": the NOT TESTED results by kind."""
    count = {kind: sum(1 for r in results if r.outcome == NOT_TESTED and not_tested_kind(r) == kind)
             for kind in NOT_TESTED_KINDS}
    return ", ".join(f"{n} {KIND_HEADINGS[kind].split(' (')[0].lower()}" for kind, n in count.items() if n)


def _caveats(results: Sequence[CheckResult]) -> list[dict[str, Any]]:
    """The passes that did not judge everything (their record's not_judged), for every report."""
    return [{"result": r, "lines": list(r.record.not_judged)} for r in results
            if r.outcome == PASS and r.record.not_judged]


def _nodes_named(nodes: Sequence[str]) -> str:
    """"2 nodes (h100-0, h100-1)"; past six, the count only."""
    names = ["cluster-wide" if n == CLUSTER else n for n in nodes]
    count = f"{len(names)} node{'' if len(names) == 1 else 's'}"
    return f"{count} ({_cell(', '.join(names))})" if len(names) <= 6 else count


def _strip_node(reason: str, node: str | None) -> str:
    """A reason without its leading node name, so the same reason on many nodes is listed once."""
    if not node or not reason.startswith(node + " ") or reason[len(node):].lstrip().startswith("+"):
        return reason  # "h100-0 + h100-1: ..." names a pair: kept whole
    return reason[len(node):].lstrip(" :")


def _first_line(text: str | None) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[0].strip() if lines else ""


def failure_view(r: CheckResult) -> dict[str, Any]:
    """One failure for the reader, each fact once: the summary line (without the check and node
    the heading names), expected and observed, the evidence lines, the remedy."""
    if r.record.summary is not None:  # judge()'s record: no text to parse
        return {"result": r, "summary": r.record.summary, "evidence": list(r.record.evidence),
                "remediation": result_remediation(r), "capability": capability(r)}
    # a failure with no verdict (pytest.fail in the kit, an error): what pytest printed, line by line
    lines = [line.strip() for line in (r.message or "").strip().splitlines() if line.strip()]
    summary = lines[0] if lines else ""
    summary = summary.removeprefix("DEGRADED: ")
    head = f"{r.check} on {r.node}: " if r.node else f"{r.check}: "
    summary = summary.removeprefix(head)
    evidence = []
    for line in lines[1:]:
        if line.startswith(("remediation:", "expected ")) and (r.expected is not None or r.observed is not None
                                                                or line.startswith("remediation:")):
            continue
        evidence.append(line.removeprefix("evidence: "))
    return {"result": r, "summary": summary, "evidence": evidence, "remediation": result_remediation(r),
            "capability": capability(r)}


#: How many untested nodes the headline names with their reasons; the rest are in "Not tested nodes".
_HEADLINE_UNTESTED = 3


def _coverage_gap(coverage: Coverage) -> str:
    """The coverage line with the untested nodes and their reasons: "1 of 2 GPU nodes tested; 1
    cordoned: h100-1 (h100-1 is cordoned ...)"."""
    missing = list(coverage.missing().values())
    named = ", ".join(f"{u.node} ({u.reason})" for u in missing[:_HEADLINE_UNTESTED])
    more = f" and {len(missing) - _HEADLINE_UNTESTED} more (see Not tested nodes)" if (
        len(missing) > _HEADLINE_UNTESTED) else ""
    return f"{coverage.line()}: {named}{more}"


def _headline(run: RunRecord, verdict: str, results: Sequence[CheckResult]) -> str:
    coverage = run.coverage
    nodes = node_verdicts(results, coverage)
    node_count = len([n for n in nodes if n != CLUSTER])
    gap = coverage is not None and bool(coverage.missing())
    if verdict == NOT_STARTED:
        return "No check ran: " + (run.error or "the run could not start")
    if verdict == INCOMPLETE:
        stopped = "The run was stopped before it finished: no failure so far, but not every check ran"
        if not gap or coverage is None:
            return stopped
        after = ("No GPU node could be tested; none can be handed over until tested." if coverage.tested == 0 else
                 "The tested nodes passed every check that applied; the others cannot be handed over until tested.")
        return (f"{stopped}. " if run.interrupted else "") + f"{_coverage_gap(coverage)}. {after}"
    if verdict == NOT_TESTED:
        return f"Nothing was tested: every check on {node_count} node(s) skipped (see Not tested)"
    if verdict == PARTIAL:
        return (f"Not a sign-off: the run selected part of the sign-off's scope ({narrowed(run)}); what it ran "
                f"passed on {coverage.tested if coverage is not None else node_count} GPU node(s). Run every "
                "suite to sign the nodes off")
    if verdict == PASS:
        short = sum(1 for r in results if r.outcome == NOT_TESTED and not_tested_kind(r) == COULD_NOT_RUN)
        caveat = f" ({short} check result{'' if short == 1 else 's'} could not run: see Could not run)" if short else ""
        if coverage is not None:
            total = len(dict.fromkeys(coverage.selected))
            return (f"All {coverage.tested} of {total} GPU node{'' if total == 1 else 's'} tested and passed every "
                    f"check that applied{caveat}: they can be handed over")
        return f"All {node_count} node(s) passed every check that applied{caveat}: they can be handed over"

    def named(names: list[str]) -> str:
        return ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")

    failing = [n for n, v in nodes.items() if v == FAIL and n != CLUSTER]
    degraded = [n for n, v in nodes.items() if v == DEGRADED and n != CLUSTER]
    parts = []
    if failing:
        parts.append(f"{len(failing)} of {node_count} node(s) fail: {named(failing)}")
    if degraded:
        parts.append(f"{len(degraded)} of {node_count} node(s) degraded: {named(degraded)}")
    if nodes.get(CLUSTER) in (FAIL, DEGRADED):
        parts.append(f"cluster-wide checks {'fail' if nodes[CLUSTER] == FAIL else 'are degraded'}")
    if gap and coverage is not None:
        return "; ".join(parts) + f". {_coverage_gap(coverage)}"
    return "; ".join(parts)


def render_html(run: RunRecord, results: Sequence[CheckResult]) -> str:
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(_TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["word"] = lambda outcome: _WORDS.get(str(outcome), str(outcome).upper())
    verdict = cluster_verdict(run, results)
    verdicts = node_verdicts(results, run.coverage)
    failures = [failure_view(r) for r in _failures(results)]
    failures.sort(key=lambda f: 0 if f["result"].outcome == FAIL else 1)  # FAIL first, run order within
    series = [{"result": r, "series": s, "svg": series_svg(s)} for r in results for s in r.series
              if len(s.points) >= (1 if s.x_scale == "category" else 2)]
    return env.get_template("signoff.html.j2").render(
        title=_title(run), run=run, verdict=verdict, headline=_headline(run, verdict, results),
        counts=counts(results), verdicts=verdicts, grid=_grid(results, run.coverage), failures=failures,
        not_tested=_not_tested(results), series=series, started=_iso(run.started), finished=_iso(run.finished),
        capabilities=sorted({capability(r) for r in results if r.outcome != NOT_TESTED}),
        nodes_tested=len([n for n, v in verdicts.items() if n != CLUSTER and v != NOT_TESTED]),
        coverage=run.coverage.line() if run.coverage is not None else None, untested=_untested(run),
        node_word=lambda v, node: _node_word(v, node, run.coverage), kinds=_kinds(run),
        kind_headings=[(kind, KIND_HEADINGS[kind]) for kind in NOT_TESTED_KINDS], caveats=_caveats(results),
        not_tested_counts=not_tested_counts(results),
        cluster_key=CLUSTER)


def _si(value: float) -> str:
    """An axis tick: 1024-based sizes are for byte axes, so plain numbers get k/M/G at 1000s."""
    for factor, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:g}{suffix}"
    return f"{value:g}"


def _bytes(value: float) -> str:
    for factor, suffix in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if value >= factor:
            return f"{value / factor:g} {suffix}"
    return f"{value:g} B"


def _nice_top(top: float) -> float:
    """The y axis' end: the next 1, 2 or 5 times a power of ten at or above ``top``."""
    if top <= 0:
        return 1.0
    exp = 10.0 ** math.floor(math.log10(top))
    return float(next(m * exp for m in (1, 2, 5, 10) if m * exp >= top))


def series_svg(series: Series, *, width: int = 560, height: int = 240) -> Markup:
    """An inline SVG chart of a measured series: x and y axes with ticks, labels and units, the floor
    as a dashed red line, the points as a polyline with dots. Self-contained, no script; every value
    is a number formatted here or an escaped label, so the markup is safe to embed."""
    from markupsafe import escape

    left, right, top_pad, bottom = 64, 32, 16, 44
    xs_raw = [x for x, _ in series.points]
    log = series.x_scale == "log2" and min(xs_raw) > 0
    category = series.x_scale == "category"
    xs = [math.log2(x) if log else x for x in xs_raw]
    lo, hi = min(xs), max(xs)
    if category:  # half a slot of room either side of the first and last bar
        lo, hi = lo - 0.5, hi + 0.5
    span = (hi - lo) or 1.0
    top = _nice_top(max([y for _, y in series.points] + ([series.floor] if series.floor is not None else [])))
    plot_w, plot_h = width - left - right, height - top_pad - bottom

    def px(x: float) -> float:
        return left + (x - lo) / span * plot_w

    def py(y: float) -> float:
        return top_pad + plot_h - max(0.0, y) / top * plot_h

    unit_fmt = _bytes if series.x_unit == "B" else _si
    parts = [f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
             f'aria-label="{escape(series.title or series.name)}">',
             f'<line x1="{left}" y1="{top_pad + plot_h}" x2="{width - right}" y2="{top_pad + plot_h}" class="axis"/>',
             f'<line x1="{left}" y1="{top_pad}" x2="{left}" y2="{top_pad + plot_h}" class="axis"/>']
    for i in range(5):  # y ticks: 0, 1/4 ... top
        value = top * i / 4
        y = py(value)
        parts.append(f'<line x1="{left - 4}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" class="grid"/>'
                     f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{_si(value)}</text>')
    ticks = 6 if len(xs) > 6 else len(xs)
    for i in range(ticks):  # x ticks at evenly spaced measured points
        x = xs[round(i * (len(xs) - 1) / max(1, ticks - 1))]
        raw = 2 ** x if log else x
        parts.append(f'<line x1="{px(x):.1f}" y1="{top_pad + plot_h}" x2="{px(x):.1f}" y2="{top_pad + plot_h + 4}" '
                     f'class="axis"/><text x="{px(x):.1f}" y="{top_pad + plot_h + 16}" text-anchor="middle" '
                     f'class="tick">{escape(unit_fmt(raw))}</text>')
    parts.append(f'<text x="{left + plot_w / 2:.0f}" y="{height - 6}" text-anchor="middle" class="label">'
                 f'{escape(series.x_label)} ({escape(series.x_unit)}{", log scale" if log else ""})</text>')
    parts.append(f'<text x="14" y="{top_pad + plot_h / 2:.0f}" text-anchor="middle" class="label" '
                 f'transform="rotate(-90 14 {top_pad + plot_h / 2:.0f})">{escape(series.y_label)} '
                 f'({escape(series.y_unit)})</text>')
    if series.floor is not None:
        y = py(series.floor)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" class="floor"/>'
                     f'<text x="{width - right}" y="{y - 4:.1f}" text-anchor="end" class="floor-label">floor '
                     f'{series.floor:g} {escape(series.y_unit)}</text>')
    if category:  # one bar per item (a GPU), so one below its siblings shows at a glance
        bar = max(2.0, plot_w / len(xs) * 0.6)
        parts += [f'<rect x="{px(x) - bar / 2:.1f}" y="{py(y):.1f}" width="{bar:.1f}" '
                  f'height="{top_pad + plot_h - py(y):.1f}" class="bar"><title>{escape(series.x_label)} {x:g}: '
                  f'{y:g} {escape(series.y_unit)}</title></rect>' for x, (_, y) in zip(xs, series.points, strict=True)]
    else:
        line = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, (_, y) in zip(xs, series.points, strict=True))
        parts.append(f'<polyline points="{line}" class="series"/>')
        parts += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" class="point"/>'
                  for x, (_, y) in zip(xs, series.points, strict=True)]
    parts.append("</svg>")
    return Markup("".join(parts))


def write_html(run: RunRecord, results: Sequence[CheckResult], path: Path) -> Path:
    return _atomic_write(path, render_html(run, results))


def write_not_started_junit(run: RunRecord, path: Path) -> Path:
    """The JUnit file of a run that could not start: the sign-off errored saying why (its type the exit
    status), so a CI job reading junit.xml shows the reason instead of a missing file, and the run's
    properties (gpuconf.report.junit.signoff_cases, run_properties)."""
    wall = run.finished - run.started
    return _atomic_write(path, testsuites(suite_name(run), signoff_cases(run, []), time=wall,
                                          timestamp=_iso(run.started),
                                          properties=run_properties(run, cluster_verdict(run, []))).decode())


def write_reports(run: RunRecord, results: Sequence[CheckResult], directory: Path) -> list[Path]:
    """report.json, report.md and report.html in ``directory``; a writer that fails does not stop the others."""
    written, errors = [], []
    for name, writer in (("report.json", write_json), ("report.md", write_markdown), ("report.html", write_html)):
        try:
            written.append(writer(run, results, Path(directory) / name))
        except Exception as exc:  # noqa: BLE001 - report what could be written, then say what could not
            errors.append(f"{name}: {exc}")
    if errors:
        raise OSError("gpuconf: could not write " + "; ".join(errors))
    return written
