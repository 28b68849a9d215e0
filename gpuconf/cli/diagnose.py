"""``gpuconf diagnose``: name the failure in a message, ``kubectl describe pod`` or ``kubectl get
events`` output, and say what it means and what to do. ``--list`` lists the categories; text that
matches none names the closest ones (as pointers, never as a cause).

Exit statuses: 0 something was recognised (or --list), 1 nothing was, 2 bad input (no text at all,
an unreadable --file).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from gpuconf.diagnose import Category, Diagnosis, categories, closest, diagnose
from gpuconf.errors import EXIT_OK, EXIT_REJECTED, UsageError
from gpuconf.tool_outputs import ToolOutput, read_outputs

__all__ = ["add_diagnose_parser", "render_text"]


def add_diagnose_parser(sub: Any) -> None:
    p = sub.add_parser(
        "diagnose", help="name a GPU failure from an event, pod status or log text",
        description="Classify a message (or `kubectl describe pod` / `kubectl get events` output, or a "
        "container log) into known GPU failure categories, with the matched line, an explanation and "
        "a remediation. Reads TEXT, --file PATH, or stdin when neither is given: kubectl describe pod x | "
        "gpuconf diagnose. nvidia-smi and nccl-tests output in the text is read by gpuconf's parsers and "
        "summarised. Text that matches no category says so and names the closest categories. "
        "Exit 0 when something was recognised, 1 when nothing was, 2 on bad input.")
    source = p.add_mutually_exclusive_group()
    source.add_argument("text", nargs="?", metavar="TEXT", help="the message (default: read stdin)")
    source.add_argument("--file", "-f", metavar="PATH",
                        help="read the text from PATH (a saved pod description, event list or log)")
    source.add_argument("--list", action="store_true",
                        help="list the failure categories (id, stage, title, checks that catch the cause)")
    p.add_argument("--json", action="store_true",
                   help='print {"recognised": bool, "diagnoses": [{category, title, excerpt, facts, '
                   'explanation, remediation, checks}], "closest": [{category, title}], "outputs": [{kind, '
                   'line, summary, facts, error}]}; with --list '
                   '{"categories": [{category, stage, title, checks}]}')
    p.set_defaults(func=_cmd_diagnose)


def _read_input(args: argparse.Namespace) -> str:
    if args.file is not None:
        try:
            with open(args.file, encoding="utf-8") as f:
                text = f.read()
        except UnicodeDecodeError as exc:
            raise UsageError(f"diagnose: {args.file} is not UTF-8 text: {exc.reason}") from exc
        except OSError as exc:
            raise UsageError(f"diagnose: cannot read {args.file}: {exc.strerror or exc}") from exc
    elif args.text is not None:
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


def _render_outputs(outputs: list[ToolOutput]) -> str:
    if not outputs:
        return ""
    return "\ntool output read:\n" + "".join(f"  line {o.line}: {o.summary}\n" for o in outputs)


def render_text(diagnoses: list[Diagnosis], near: list[Category] | None = None,
                outputs: list[ToolOutput] | None = None) -> str:
    if not diagnoses:
        out = "no known GPU failure recognised in the input\n"
        if near:
            out += "closest categories (not a diagnosis; no pattern matched):\n" + "".join(
                f"  {c.id}: {c.title}\n" for c in near)
        return out + _render_outputs(outputs or [])
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
    return "\n\n".join(blocks) + "\n" + _render_outputs(outputs or [])


def render_list() -> str:
    cats = categories()
    width = max(len(c.id) for c in cats)
    lines = [f"{'category':<{width}}  {'stage':<10}  title", ]
    lines += [f"{c.id:<{width}}  {c.stage:<10}  {c.title}" for c in cats]
    return "\n".join(lines) + "\n"


def _cmd_diagnose(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    if args.list:
        if args.json:
            stdout.write(json.dumps({"categories": [
                {"category": c.id, "stage": c.stage, "title": c.title, "checks": list(c.checks)}
                for c in categories()]}, ensure_ascii=False) + "\n")
        else:
            stdout.write(render_list())
        return EXIT_OK
    text = _read_input(args)
    found = diagnose(text)
    near = [] if found else closest(text)
    outputs = read_outputs(text)
    if args.json:
        stdout.write(json.dumps({"recognised": bool(found), "diagnoses": [d.as_dict() for d in found],
                                 "closest": [{"category": c.id, "title": c.title} for c in near],
                                 "outputs": [o.as_dict() for o in outputs]}, ensure_ascii=False) + "\n")
    else:
        stdout.write(render_text(found, near, outputs))
    return EXIT_OK if found else EXIT_REJECTED
