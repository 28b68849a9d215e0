"""The terminal's closing block: the last thing a run prints, after pytest's own summary line, so the
last lines a nightly log or an operator reads are the sign-off's: the verdict, "N of M GPU nodes
tested" with the untested by state, the results by outcome (NOT TESTED by kind), one line per failing
node and check with its cause, where the reports are, and the exit status with its meaning.

And the skip lines of pytest's short summary (``-ra``) name the check and the node, not the helper
that raised the skip; a node that took no probes folds into one line however many checks it kept off.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from gpuconf import outcomes

__all__ = ["live_progress", "write_closing_block"]

def write_closing_block(config: pytest.Config, run: Any, results: Sequence[Any], report_dir: Path | None) -> None:
    """The closing block (gpuconf.report.closing), the last thing the run prints."""
    from gpuconf.report.closing import closing_block

    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or run is None:
        return
    width = max(60, min(shutil.get_terminal_size((120, 24)).columns, 160))
    reporter.ensure_newline()
    reporter.write_sep("=", "gpuconf sign-off", bold=True)
    for text, markup in closing_block(run, results, report_dir, width=width,
                                      cncf=config.getoption("--cncf-evidence")):
        reporter.write_line(text, **markup)


def live_progress(config: pytest.Config) -> Any:
    """On a terminal, and not under -q: a callback that shows a waiting campaign's pods (pending,
    running, done; elapsed) after the test line, and restores the line when the campaign ends. None
    (nothing extra) without a TTY or under -q."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or not reporter.isatty() or config.get_verbosity() < 0:
        return None
    import contextlib

    shown: list[str] = []  # the line as pytest left it, while a progress note follows it
    capture = config.pluginmanager.getplugin("capturemanager")

    def show(progress: Any) -> None:
        # a campaign waits inside a test's setup or call, where pytest captures the output: the note
        # goes to the terminal itself, as pytest's live logging does
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            if progress is None:
                if shown:  # blank the note, then the line as it was, the cursor where pytest left it
                    line, width = shown.pop(), shown.pop()
                    reporter._tw.write("\r" + " " * len(width) + "\r" + line)
                return
            if not shown:
                shown[:] = ["", getattr(reporter._tw, "_current_line", "")]
            note = f"{shown[1]} {progress.line()}"
            reporter._tw.write("\r" + note + " " * max(0, len(shown[0]) - len(note)))
            shown[0] = note if len(note) > len(shown[0]) else shown[0]
    return show


#: NOT TESTED by design: the short summary leaves them out (the closing block counts them, the
#: reports list them); what could not run, was blocked or found its node unavailable stays.
_QUIET_KINDS = frozenset({outcomes.NOT_APPLICABLE, outcomes.NOT_SELECTED})


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """pytest's short summary (-ra) without a line per check that does not apply or was not asked for:
    on a healthy fleet those are most of the results, and they hid the lines that matter."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or not hasattr(reporter, "short_test_summary"):
        return
    original = reporter.short_test_summary

    def short_test_summary() -> None:
        skipped = reporter.stats.get("skipped", [])
        quiet = [r for r in skipped if dict(getattr(r, "user_properties", ())).get("gpuconf.not_tested")
                 in _QUIET_KINDS]
        if not quiet:
            original()
            return
        reporter.stats["skipped"] = [r for r in skipped if r not in quiet]
        try:
            original()
        finally:
            reporter.stats["skipped"] = skipped
        if "s" in getattr(reporter, "reportchars", "") or "a" in getattr(reporter, "reportchars", ""):
            reporter.write_line(f"({len(quiet)} skipped as not applicable here or not asked for: the reports list "
                                "them)")
    reporter.short_test_summary = short_test_summary


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """A skip's short-summary line names the check (and the node, where the reason does not), not the
    helper that raised it; NOT TESTED because the node took no probes folds into one line per node."""
    if not report.skipped or not isinstance(report.longrepr, tuple) or len(report.longrepr) != 3:
        return
    props = dict(report.user_properties)
    check, node = props.get("gpuconf.check"), props.get("gpuconf.node")
    if not check:
        return
    path, _, reason = report.longrepr
    text = str(reason).removeprefix("Skipped: ")
    if props.get("gpuconf.not_tested") == outcomes.NODE_UNAVAILABLE and node:
        label = f"every probe check on {node}"
    elif node and str(node) not in text:
        label = f"{check} on {node}"
    else:
        label = str(check)
    # pytest prints the path relative to the invocation, and a None line as none (its own skip marks do)
    report.longrepr = (str(Path.cwd() / label), None, reason)  # type: ignore[assignment]
