"""``gpuconf report diff OLD NEW``: what changed between two runs (a nightly's regression gate).

Exit statuses: 0 nothing newly failing and no metric regression, 1 new failures or regressions (as
``--fail-on`` selects), 2 bad input (a missing or unreadable file, not JSON, not a gpuconf report).
"""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from gpuconf.errors import UsageError
from gpuconf.report.diff import (
    FAIL_ON,
    diff_reports,
    exit_status,
    load_report,
    render_json,
    render_markdown,
    render_text,
)

__all__ = ["add_report_parser"]


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"a fraction in [0, 1) such as 0.1 for 10%, not {text}")
    return value


def add_report_parser(sub: Any) -> None:
    report = sub.add_parser("report", help="work with the reports a suite run writes",
                            description="Work with the reports a suite run writes (report.json).")
    actions = report.add_subparsers(dest="report_command", required=True, metavar="diff", parser_class=type(report))
    p = actions.add_parser(
        "diff", help="compare two runs: new failures, fixes, node verdicts, metric regressions",
        description="Compare two suite runs' report.json (a file, or the run directory holding it): new "
        "failures (a check failing or degraded on a node where it passed, was not tested or did not run), "
        "fixed ones, those still failing, checks that appeared or disappeared, node verdict changes, and "
        "metric regressions: NCCL busbw (the mean over messages >= 1 GiB) lower, and the smoke check's "
        "kernel_ms, pull_s and to_running_s higher, by more than the tolerance and an absolute floor "
        "(0.01 ms, 1 s). "
        "Exit 0 when nothing gates, 1 on new failures or regressions (see --fail-on), 2 on bad input.")
    p.add_argument("old", metavar="OLD", help="the baseline: report.json or its run directory")
    p.add_argument("new", metavar="NEW", help="the run to judge: report.json or its run directory")
    p.add_argument("--tolerance", type=_tolerance, default=0.1, metavar="FRACTION",
                   help="how much worse a measured figure may get before it is a regression (default 0.1 = 10%%)")
    p.add_argument("--fail-on", choices=FAIL_ON, default="any",
                   help="what exits 1: new failures, metric regressions, or any of them (default any)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print the comparison as one JSON object")
    fmt.add_argument("--markdown", action="store_true", help="print Markdown (for CI job summaries)")
    p.set_defaults(func=_cmd_diff)


def _cmd_diff(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    try:
        old, new = load_report(args.old), load_report(args.new)
    except UsageError as exc:
        raise UsageError(f"gpuconf report diff: {exc}") from exc
    diff = diff_reports(old, new, tolerance=args.tolerance)
    if args.json:
        stdout.write(json.dumps(render_json(diff, fail_on=args.fail_on), ensure_ascii=False) + "\n")
    elif args.markdown:
        stdout.write(render_markdown(diff))
    else:
        stdout.write(render_text(diff))
    return exit_status(diff, args.fail_on)
