"""The sign-off's closing block: the lines a run ends with on the terminal (gpuconf.plugin.terminal)
and `gpuconf report merge` prints for the merged run: the verdict and headline, the coverage with each
untested node, a partial run's scope, the results by outcome and NOT TESTED kind, one line per failing
node and check, where the reports are, and the exit status with its meaning. Pure: no pytest."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpuconf import outcomes

__all__ = ["EXIT_MEANINGS", "closing_block", "exit_meaning"]

#: Every exit status the suite ends with, and what it means (docs/exit-statuses.md is checked against it).
EXIT_MEANINGS = {
    0: "every selected GPU node tested, every check of the sign-off's scope passed or does not apply",
    1: "a check failed (do not hand the failing nodes over)",
    2: "interrupted (Ctrl-C or SIGTERM): the reports hold what ran so far",
    3: "internal error in pytest or a plugin",
    4: "bad option or input (one line says which)",
    5: "no test collected",
    10: "no usable kubeconfig or cluster",
    11: "the API server stopped answering",
    12: "forbidden: the identity lacks a right the run needs",
    13: "no GPU nodes (matching --node-selector)",
    14: "bad --expect file",
    outcomes.EXIT_INCOMPLETE: "nothing failed, but not everything was tested: selected GPU nodes left "
                              "untested, a run cut short, or nothing tested at all",
    16: "--namespace is in use by another gpuconf run",
    outcomes.EXIT_DEGRADED: "nothing failed, but something works below what it should",
    outcomes.EXIT_PARTIAL: "the run selected less than the sign-off's scope (-m, -k, some suites); "
                           "nothing failed, nothing is signed off",
}


def exit_meaning(status: int) -> str:
    return EXIT_MEANINGS.get(int(status), "unknown")


def _first_line(text: str | None) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[0] if lines else ""


def _cause(result: Any) -> str:
    """A failure's cause in one line: its record's summary, else what pytest printed first."""
    line = _first_line(result.record.summary) or _first_line(result.message)
    line = line.removeprefix("DEGRADED: ")
    head = f"{result.check} on {result.node}: " if result.node else f"{result.check}: "
    return line.removeprefix(head)


def closing_block(run: Any, results: Sequence[Any], report_dir: Path | None, *, width: int = 100,
                  cncf: str | None = None) -> list[tuple[str, dict[str, bool]]]:
    """The closing block's lines, each with its terminal markup ({"red": True}...)."""
    from gpuconf.report.model import DEGRADED, FAIL, NOT_TESTED, PASS, cluster_verdict
    from gpuconf.report.writers import _headline, narrowed, not_tested_counts, verdict_word

    verdict = cluster_verdict(run, results)
    colour = {"red": True} if verdict in (FAIL, outcomes.NOT_STARTED) else (
        {"green": True} if verdict == PASS else {"yellow": True})
    lines: list[tuple[str, dict[str, bool]]] = [
        (f"gpuconf: {verdict_word(verdict)}: {_headline(run, verdict, results)}", {**colour, "bold": True})]
    if run.coverage is not None:
        lines.append((f"gpuconf: {run.coverage.line()}", {"yellow": bool(run.coverage.untested)}))
        for u in run.coverage.missing().values():
            lines.append((f"gpuconf:   {u.node} not tested: {u.reason}", {"yellow": True}))
    if run.partial:
        lines.append((f"gpuconf: scope: {narrowed(run)}", {"yellow": True}))
    tiers = (run.scope or {}).get("tiers") or []
    if tiers:
        lines.append(("gpuconf: opt-in tiers run: " + ", ".join(tiers), {}))
    count = Counter(r.outcome for r in results)
    parts = [f"{count[o]} {w}" for o, w in ((PASS, "passed"), (FAIL, "failed"), (DEGRADED, "degraded")) if count[o]]
    if count[NOT_TESTED]:
        parts.append(f"{count[NOT_TESTED]} not tested ({not_tested_counts(results)})")
    if parts:
        lines.append(("gpuconf: results: " + ", ".join(parts), {}))
    failing = sorted((r for r in results if r.outcome in (FAIL, DEGRADED)),
                     key=lambda r: (r.outcome != FAIL, r.node_key, r.check))
    for r in failing:
        text = f"gpuconf:   {verdict_word(r.outcome)} {r.node or 'cluster-wide'} {r.check}: {_cause(r)}"
        lines.append((text if len(text) <= width else text[:width - 1] + "…", {"red": r.outcome == FAIL,
                                                                               "yellow": r.outcome != FAIL}))
    if report_dir is not None:
        lines.append((f"gpuconf: reports in {report_dir} (report.html, report.md, report.json, junit.xml)", {}))
    if cncf:
        lines.append((f"gpuconf: CNCF evidence in {cncf}", {}))
    lines.append((f"gpuconf: exit status {run.exit_status}: {exit_meaning(run.exit_status)}", colour))
    return lines
