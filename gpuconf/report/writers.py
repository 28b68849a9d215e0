"""Report writers: CTRF-compatible JSON, a Markdown summary, a self-contained HTML sign-off page.

Every writer creates the directory, writes atomically (a temporary file renamed over the target)
and renders whatever the results contain (odd characters, markup, missing fields) without raising
on it; the HTML escapes every value and references nothing outside itself.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from markupsafe import Markup

from gpuconf.report.model import (
    DEGRADED,
    FAIL,
    NOT_TESTED,
    OUTCOMES,
    PASS,
    CheckResult,
    RunRecord,
    node_verdicts,
    remediation,
    worst,
)

__all__ = ["CTRF_STATUS", "counts", "write_html", "write_json", "write_markdown", "write_reports"]

#: gpuconf outcome -> CTRF test status (a DEGRADED check fails its test, as in JUnit).
CTRF_STATUS = {PASS: "passed", FAIL: "failed", DEGRADED: "failed", NOT_TESTED: "skipped"}
_TEMPLATES = Path(__file__).parent / "templates"


def _atomic_write(path: Path, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline="\n") as fh:
            fh.write(text)
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


def ctrf_document(run: RunRecord, results: Sequence[CheckResult]) -> dict[str, Any]:
    tests = []
    for r in results:
        test: dict[str, Any] = {"name": r.nodeid, "status": CTRF_STATUS.get(r.outcome, "other"),
                                "duration": _ms(r.duration), "suite": r.nodeid.split("::", 1)[0],
                                "filePath": r.nodeid.split("::", 1)[0]}
        if r.message:
            test["message"] = r.message
        test["extra"] = {"check": r.check, "node": r.node, "outcome": r.outcome, "expected": r.expected,
                         "observed": r.observed, "remediation": remediation(r.check) if r.outcome in (
                             FAIL, DEGRADED) else None}
        if r.curve:
            test["extra"]["curve"] = [[x, y] for x, y in r.curve]
        if r.metrics:  # what `gpuconf report diff` compares besides the curve
            test["extra"]["metrics"] = {name: float(value) for name, value in r.metrics.items()}
        if r.series:  # per-item figures (per-GPU copy bandwidth): {name: [[x, y], ...]}
            test["extra"]["series"] = {name: [[x, y] for x, y in points] for name, points in r.series.items()}
        tests.append(test)
    summary = {**counts(results), "start": _ms(run.started), "stop": _ms(run.finished)}
    return {
        "reportFormat": "CTRF",
        "specVersion": "0.0.0",
        "results": {"tool": {"name": "gpuconf"}, "summary": summary, "tests": tests,
                    "environment": {"extra": {"provenance": run.provenance}}},
        "gpuconf": {"provenance": run.provenance, "simulated": run.simulated, "run_id": run.run_id,
                    "started": _iso(run.started), "finished": _iso(run.finished),
                    "exit_status": run.exit_status, "interrupted": run.interrupted, "error": run.error,
                    "nodes": node_verdicts(results)},
    }


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
    return f"gpuconf sign-off: {'SIMULATED cluster, ' if run.simulated else ''}{where}"


def write_markdown(run: RunRecord, results: Sequence[CheckResult], path: Path) -> Path:
    c = counts(results)
    lines = [f"# {_cell(_title(run))}", ""]
    if run.error:
        lines += [f"**NOT STARTED**: {_cell(run.error)}", ""]
    if run.interrupted:
        lines += ["**INTERRUPTED**: the run was stopped; these are the results collected so far.", ""]
    lines += [f"{c['tests']} checks: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped"
              + (f", {c['other']} other" if c["other"] else "") + f" (pytest exit status {run.exit_status})", ""]
    verdicts = node_verdicts(results)
    if verdicts:
        lines += ["| node | verdict |", "|---|---|"]
        lines += [f"| {_cell(node)} | {verdict.upper()} |" for node, verdict in verdicts.items()]
        lines.append("")
    failures = _failures(results)
    if failures:
        lines += ["## Failures", ""]
        for r in failures:
            first = (r.message or "").strip().splitlines()[0] if r.message and r.message.strip() else ""
            lines.append(f"- {r.outcome.upper()} {_cell(r.node_key)} {_cell(r.check)}"
                         + (f": {_cell(first)}" if first else ""))
        lines.append("")
    return _atomic_write(path, "\n".join(lines))


def _matrix(results: Sequence[CheckResult]) -> tuple[list[str], list[str], dict[tuple[str, str], str]]:
    nodes: dict[str, None] = {}
    checks: dict[str, None] = {}
    cells: dict[tuple[str, str], list[str]] = {}
    for r in results:
        nodes.setdefault(r.node_key)
        checks.setdefault(r.check)
        cells.setdefault((r.node_key, r.check), []).append(r.outcome)
    return list(nodes), list(checks), {key: worst(v) for key, v in cells.items()}


def render_html(run: RunRecord, results: Sequence[CheckResult]) -> str:
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(_TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    nodes, checks, cells = _matrix(results)
    failures = [{"result": r, "remediation": remediation(r.check)} for r in _failures(results)]
    curves = [{"result": r, "svg": curve_svg(r.curve)} for r in results if len(r.curve) >= 2]
    bars = [{"result": r, "name": name, "points": points, "svg": bars_svg(points)}
            for r in results for name, points in r.series.items() if points]
    return env.get_template("signoff.html.j2").render(
        title=_title(run), run=run, counts=counts(results), verdicts=node_verdicts(results), nodes=nodes,
        checks=checks, cells=cells, failures=failures, outcomes=OUTCOMES, curves=curves, bars=bars,
        started=_iso(run.started), finished=_iso(run.finished))


def curve_svg(points: Sequence[tuple[int, float]], *, width: int = 480, height: int = 160) -> Markup:
    """An inline SVG line chart (x: message size, log scale; y: GB/s from 0): self-contained, no
    script, no fetch. Values are numbers we format ourselves, so the markup is safe to embed."""
    import math

    pad, top = 40, max(y for _, y in points) or 1.0
    xs = [math.log2(max(x, 1)) for x, _ in points]
    lo, hi = min(xs), max(xs)
    span = (hi - lo) or 1.0

    def px(x: float) -> float:
        return pad + (x - lo) / span * (width - pad - 10)

    def py(y: float) -> float:
        return height - 20 - y / top * (height - 30)

    line = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, (_, y) in zip(xs, points, strict=True))
    size = points[-1][0]
    label = f"{size / 2**30:g} GiB" if size >= 2**30 else f"{size / 2**20:g} MiB" if size >= 2**20 else f"{size} B"
    return Markup(
        f'<svg width="{width}" height="{height}" role="img">'
        f'<line x1="{pad}" y1="{height - 20}" x2="{width - 10}" y2="{height - 20}" stroke="#888"/>'
        f'<line x1="{pad}" y1="10" x2="{pad}" y2="{height - 20}" stroke="#888"/>'
        f'<text x="2" y="14" font-size="10">{top:g}</text><text x="2" y="{height - 22}" font-size="10">0</text>'
        f'<text x="{pad}" y="{height - 6}" font-size="10">{points[0][0]} B</text>'
        f'<text x="{width - 70}" y="{height - 6}" font-size="10">{label}</text>'
        f'<polyline fill="none" stroke="#1565c0" stroke-width="2" points="{line}"/></svg>')


def bars_svg(points: Sequence[tuple[int, float]], *, width: int = 480, height: int = 140) -> Markup:
    """An inline SVG bar chart of one series (x: the item, e.g. a GPU index; y: its figure from 0), so
    one GPU below its siblings shows at a glance. Numbers we format ourselves: safe to embed."""
    pad, top = 40, max(y for _, y in points) or 1.0
    step = (width - pad - 10) / len(points)
    bars = "".join(
        f'<rect x="{pad + i * step + 2:.1f}" y="{height - 20 - y / top * (height - 30):.1f}" '
        f'width="{max(step - 4, 1):.1f}" height="{y / top * (height - 30):.1f}" fill="#1565c0"/>'
        f'<text x="{pad + i * step + 2:.1f}" y="{height - 6}" font-size="10">{x}</text>'
        for i, (x, y) in enumerate(points))
    return Markup(
        f'<svg width="{width}" height="{height}" role="img">'
        f'<line x1="{pad}" y1="{height - 20}" x2="{width - 10}" y2="{height - 20}" stroke="#888"/>'
        f'<text x="2" y="14" font-size="10">{top:g}</text><text x="2" y="{height - 22}" font-size="10">0</text>'
        f'{bars}</svg>')


def write_html(run: RunRecord, results: Sequence[CheckResult], path: Path) -> Path:
    return _atomic_write(path, render_html(run, results))


def write_not_started_junit(run: RunRecord, path: Path) -> Path:
    """The JUnit file of a run that could not start: one errored test case saying why, so a CI job
    reading junit.xml shows the reason instead of a missing file."""
    from junit_xml import TestCase, TestSuite, to_xml_report_string  # type: ignore[import-untyped]

    case = TestCase("run could not start", classname="gpuconf", elapsed_sec=run.finished - run.started)
    case.add_error_info(message=run.error or "the run could not start", error_type=f"exit status {run.exit_status}")
    suite = TestSuite("gpuconf", [case], timestamp=_iso(run.started))
    return _atomic_write(path, to_xml_report_string([suite], encoding="utf-8"))


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
