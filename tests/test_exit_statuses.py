"""One exit-status table (docs/exit-statuses.md) for the suite, the merge and the diff, checked against
the code: every status the suite ends with is in it with the meaning the terminal prints, and the
constants each part of the plugin uses are the table's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuconf import outcomes
from gpuconf.report.closing import EXIT_MEANINGS, exit_meaning

DOC = Path(__file__).resolve().parent.parent / "docs" / "exit-statuses.md"


def _suite_table() -> dict[int, tuple[str, str]]:
    """status -> (verdict column, meaning column) of the suite's table."""
    text = DOC.read_text()
    section = text.split("## The suite", 1)[1].split("\n## ", 1)[0]
    return {int(m.group(1)): (m.group(2).strip(), m.group(3).strip())
            for m in re.finditer(r"^\| (\d+) \|([^|]*)\| (.+?) \|$", section, re.M)}


def test_the_docs_table_is_the_terminals():
    assert {status: meaning for status, (_, meaning) in _suite_table().items()} == EXIT_MEANINGS


def test_the_plugins_constants_are_the_tables():
    from gpuconf.cluster.errors import EXIT_BAD_KUBECONFIG, EXIT_FORBIDDEN, EXIT_UNREACHABLE
    from gpuconf.plugin.fleet import EXIT_UNTESTED
    from gpuconf.plugin.session import EXIT_BAD_EXPECT, EXIT_NAMESPACE_BUSY, EXIT_NO_GPU_NODES
    from gpuconf.report.diff import EXIT_LOST_COVERAGE

    assert (EXIT_BAD_KUBECONFIG, EXIT_UNREACHABLE, EXIT_FORBIDDEN, EXIT_NO_GPU_NODES, EXIT_BAD_EXPECT,
            EXIT_NAMESPACE_BUSY) == (10, 11, 12, 13, 14, 16)
    assert EXIT_UNTESTED == EXIT_LOST_COVERAGE == outcomes.EXIT_INCOMPLETE == 15
    for verdict, word in ((outcomes.PASS, "PASS"), (outcomes.FAIL, "FAIL"), (outcomes.DEGRADED, "DEGRADED"),
                          (outcomes.INCOMPLETE, "INCOMPLETE"), (outcomes.PARTIAL, "PARTIAL")):
        status = outcomes.exit_status_for(verdict)
        assert status is not None and _suite_table()[status][0].split(" / ")[0] == word
    assert len(set(outcomes.EXIT_STATUSES.values())) == len(outcomes.EXIT_STATUSES)  # each verdict its own


@pytest.mark.parametrize("status", [6, 99])
def test_an_unknown_status_says_so(status):
    assert exit_meaning(status) == "unknown"


def test_the_merge_and_diff_sections_are_there():
    text = DOC.read_text()
    assert "## `gpuconf report merge`" in text and "## `gpuconf report diff OLD NEW`" in text
    assert "## Which runs count as a sign-off" in text


@pytest.mark.parametrize("outcomes_, scope, pytest_status, status", [
    (["pass"], None, 0, 0),
    (["pass", "degraded"], None, 1, 17),
    (["fail", "degraded"], None, 1, 1),
    (["pass"], {"full": False, "narrowed": ["-m 'smoke' deselected 1 of 2 checks"]}, 0, 18),
    (["not-tested"], {"full": False, "narrowed": ["1 of 15 suites"]}, 0, 18),
    (["not-tested"], None, 0, 15),  # nothing judged: never a pass's 0
    (["pass"], None, 2, 2),  # interrupted: why it stopped
], ids=["pass", "degraded", "fail", "partial", "partial-nothing-tested", "nothing-tested", "interrupted"])
def test_the_verdict_gives_the_exit_status(outcomes_, scope, pytest_status, status):
    from gpuconf.plugin.reports import verdict_exit_status
    from gpuconf.report.model import CheckResult, RunRecord

    results = [CheckResult(f"c{i}", "n", o, f"suites/test_x.py::t{i}[n]") for i, o in enumerate(outcomes_)]
    run = RunRecord("simulated:x", 0.0, 1.0, pytest_status, interrupted=pytest_status == 2, scope=scope)
    assert verdict_exit_status(run, results, pytest_status) == status
