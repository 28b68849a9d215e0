"""``gpuconf diagnose``: name the failure in a message, ``kubectl describe pod`` or ``kubectl get
events`` output, and say what it means and what to do.

Exit statuses: 0 something was recognised, 1 nothing was, 2 bad input (no text at all).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from gpuconf.diagnose import Diagnosis, diagnose
from gpuconf.errors import EXIT_OK, EXIT_REJECTED, UsageError

__all__ = ["add_diagnose_parser", "render_text"]


def add_diagnose_parser(sub: Any) -> None:
    p = sub.add_parser(
        "diagnose", help="name a GPU failure from an event, pod status or log text",
        description="Classify a message (or `kubectl describe pod` / `kubectl get events` output, or a "
        "container log) into known GPU failure categories, with the matched line, an explanation and "
        "a remediation. Reads TEXT, or stdin when TEXT is not given: kubectl describe pod x | gpuconf "
        "diagnose. Exit 0 when something was recognised, 1 when nothing was, 2 on bad input.")
    p.add_argument("text", nargs="?", metavar="TEXT", help="the message (default: read stdin)")
    p.add_argument("--json", action="store_true",
                   help='print {"recognised": bool, "diagnoses": [{category, title, excerpt, facts, '
                   'explanation, remediation, checks}]}')
    p.set_defaults(func=_cmd_diagnose)


def _read_input(args: argparse.Namespace) -> str:
    if args.text is not None:
        text = str(args.text)
    else:
        stdin = sys.stdin
        if stdin is None or stdin.isatty():
            raise UsageError("diagnose: give TEXT or pipe text into stdin "
                             "(e.g. kubectl describe pod NAME | gpuconf diagnose)")
        try:
            text = stdin.read()
        except UnicodeDecodeError as exc:
            raise UsageError(f"diagnose: stdin is not text: {exc}") from exc
    if not text.strip():
        raise UsageError("diagnose: the input is empty")
    return text


def render_text(diagnoses: list[Diagnosis]) -> str:
    if not diagnoses:
        return "no known GPU failure recognised in the input\n"
    blocks = []
    for d in diagnoses:
        lines = [f"[{d.category}] {d.title}", f"  matched: {d.excerpt}"]
        if d.facts:
            lines.append("  facts:   " + ", ".join(f"{k}={v}" for k, v in d.facts.items()))
        lines.append(f"  meaning: {d.explanation}")
        lines.append(f"  fix:     {d.remediation}")
        if d.checks:
            lines.append("  checks:  " + ", ".join(d.checks))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def _cmd_diagnose(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    found = diagnose(_read_input(args))
    if args.json:
        stdout.write(json.dumps({"recognised": bool(found), "diagnoses": [d.as_dict() for d in found]},
                                ensure_ascii=False) + "\n")
    else:
        stdout.write(render_text(found))
    return EXIT_OK if found else EXIT_REJECTED
