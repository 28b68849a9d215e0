"""The ``gpuconf`` command's parser and ``main()``; each subcommand's module adds its own parser.

Exit statuses (gpuconf.errors): 0 the answer is yes (runs / satisfied), 1 the answer is no
(rejected / fails), 2 bad input (one line on stderr, never a traceback), 3 the environment cannot
do what was asked (e.g. docker missing for ``images build``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn, TextIO

from gpuconf import __version__
from gpuconf.errors import EXIT_OK, EXIT_USAGE, UsageError


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad options as one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gpuconf", description="Conformance suite for GPU Kubernetes clusters.")
    parser.add_argument("--version", action="version", version=f"gpuconf {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    from gpuconf.cli.diagnose import add_diagnose_parser
    from gpuconf.cli.images import add_images_parser
    from gpuconf.cli.predict import add_predict_parser
    from gpuconf.cli.report import add_report_parser
    from gpuconf.cli.require import add_require_parser
    from gpuconf.cli.results import add_results_parser
    from gpuconf.cli.sim import add_sim_parser

    add_require_parser(sub)
    add_predict_parser(sub)
    add_images_parser(sub)
    add_sim_parser(sub)
    add_diagnose_parser(sub)
    add_report_parser(sub)
    add_results_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None,
         stderr: TextIO | None = None) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    try:
        args = build_parser().parse_args(argv)
        return int(args.func(args, out, err))
    except UsageError as exc:
        text = " ".join(str(exc).split())  # one line, whatever the cause's formatting
        print(text if text.startswith("gpuconf") else f"gpuconf: {text}", file=err)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("gpuconf: interrupted", file=err)
        return 130
    except BrokenPipeError:
        return EXIT_OK


__all__ = ["build_parser", "main"]
