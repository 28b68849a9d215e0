"""The ``gpuconf`` command: ``predict`` and ``require`` (the compatibility engine's front door).

Exit statuses (gpuconf.errors): 0 the answer is yes (runs / satisfied), 1 the answer is no
(rejected / fails), 2 bad input (one line on stderr, never a traceback), 3 the environment cannot
do what was asked (e.g. docker missing for ``images build``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, NoReturn, TextIO

from gpuconf import __version__
from gpuconf.compat.require import CLI_PREFIX, Gpu, HostFacts, RequireResult, check_container
from gpuconf.compat.versions import VersionError, nvc_cuda_string, parse_cuda, parse_driver
from gpuconf.errors import EXIT_OK, EXIT_REJECTED, EXIT_USAGE, UsageError


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad options as one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see '{self.prog} --help')")


# --- gpuconf require ------------------------------------------------------------------------


def _fact(value: Any, what: str) -> str | None:
    """A host fact from JSON or the command line: None = unknown; numbers become text."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise UsageError(f"{what} must be a string, got {json.dumps(value)}")
    if isinstance(value, int) and what == "cuda":
        return nvc_cuda_string(value) if value >= 1000 else str(value)
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return value
    raise UsageError(f"{what} must be a string, got {json.dumps(value)}")


def _gpu(entry: Any, index: int) -> Gpu:
    if not isinstance(entry, dict):
        raise UsageError(f"gpus[{index}] must be an object with 'arch' and 'brand'")
    return Gpu(arch=_fact(entry.get("arch"), "arch"), brand=_fact(entry.get("brand"), "brand"),
               mig=bool(entry.get("mig", False)))


def _strings(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"'{what}' must be a list of strings")
    return value


def evaluate_case(case: Any) -> RequireResult:
    """One ``--jsonl`` input object → the check's result (see the README for the format)."""
    if not isinstance(case, dict):
        raise UsageError("each line must be a JSON object")
    if "gpus" in case and case["gpus"] is not None:
        if not isinstance(case["gpus"], list):
            raise UsageError("'gpus' must be a list ([] = no GPU visible)")
        gpus = tuple(_gpu(g, i) for i, g in enumerate(case["gpus"]))
    else:
        gpus = (Gpu(arch=_fact(case.get("arch"), "arch"), brand=_fact(case.get("brand"), "brand")),)
    facts = HostFacts(cuda=_fact(case.get("cuda"), "cuda"), driver=_fact(case.get("driver"), "driver"),
                      gpus=gpus)
    return check_container(facts, env=_strings(case.get("env"), "env"),
                           requirements=_strings(case.get("requirements"), "requirements"))


def result_json(result: RequireResult) -> dict[str, Any]:
    if result.ok:
        return {"ok": True, "error": None}
    error = result.error if result.stage != "input" else f"input error: {result.error}"
    return {"ok": False, "error": error}


def _require_jsonl(stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    status = EXIT_OK
    for number, line in enumerate(stdin, start=1):
        if not line.strip():
            continue
        try:
            out = result_json(evaluate_case(json.loads(line)))
        except (json.JSONDecodeError, UsageError) as exc:
            # Keep one output line per input line so batch consumers stay aligned.
            print(f"gpuconf require: line {number}: {exc}", file=stderr)
            out = {"ok": None, "error": f"bad input: {exc}"}
            status = EXIT_USAGE
        stdout.write(json.dumps(out) + "\n")
    stdout.flush()
    return status


def _cmd_require(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    if args.jsonl:
        if args.requirements or args.env:
            raise UsageError("--jsonl reads everything from stdin; give no requirements or --env")
        return _require_jsonl(sys.stdin, stdout, stderr)
    for what, value in (("driver", args.driver), ("cuda", args.cuda)):
        if value is not None:
            try:
                parse_driver(value) if what == "driver" else parse_cuda(value)
            except VersionError as exc:
                raise UsageError(str(exc)) from exc
    if not args.requirements and not args.env:
        raise UsageError("give at least one requirement or --env NVIDIA_REQUIRE_...=... "
                         "(or --jsonl to read cases from stdin)")
    gpus: tuple[Gpu, ...] = () if args.no_gpu else (Gpu(arch=args.arch, brand=args.brand),)
    cuda = args.cuda.strip() if args.cuda else None
    if cuda and cuda.isdigit() and len(cuda) >= 4:  # the integer form NVML reports
        cuda = nvc_cuda_string(int(cuda))
    result = check_container(HostFacts(cuda=cuda, driver=args.driver, gpus=gpus),
                             env=args.env, requirements=args.requirements)
    if args.json:
        stdout.write(json.dumps(result_json(result)) + "\n")
    elif result.ok:
        stdout.write("satisfied: nvidia-container-cli would create this container\n")
    else:
        stdout.write(f"{result.message}\n")
        if result.stage == "requirement" and result.error and result.error.startswith("unsatisfied"):
            stdout.write(f"  failing requirement: {result.requirement!r}"
                         + (f" on GPU {result.gpu}" if result.gpu is not None else "") + "\n")
    return EXIT_OK if result.ok else EXIT_REJECTED


# --- the parser -----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gpuconf", description="Conformance suite for GPU Kubernetes clusters.")
    parser.add_argument("--version", action="version", version=f"gpuconf {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    req = sub.add_parser(
        "require",
        help="evaluate NVIDIA_REQUIRE_* as nvidia-container-cli does (legacy mode)",
        description="Evaluate NVIDIA_REQUIRE_* requirements against host facts exactly as "
        "libnvidia-container's nvidia-container-cli does in the toolkit's legacy mode. "
        "A fact left out is unknown, and an unknown fact satisfies its condition (as in the CLI).",
    )
    req.add_argument("requirements", nargs="*", metavar="REQUIREMENT",
                     help="a requirement string, e.g. 'cuda>=13.0 brand=nvidia,driver>=570,driver<571'")
    req.add_argument("--cuda", help="host CUDA version as NVML reports it: 12.8 (or 12080)")
    req.add_argument("--driver", help="host driver version, e.g. 570.133.20")
    req.add_argument("--arch", help="GPU compute capability, e.g. 9.0")
    req.add_argument("--brand", help="GPU brand as libnvidia-container names it: Nvidia, Tesla, GeForce...")
    req.add_argument("--no-gpu", action="store_true", help="no GPU visible (arch/brand conditions hold)")
    req.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                     help="container environment entry (repeatable): NVIDIA_REQUIRE_*, CUDA_VERSION, "
                     "NVIDIA_DISABLE_REQUIRE, NVIDIA_VISIBLE_DEVICES")
    req.add_argument("--json", action="store_true", help="print {\"ok\": ..., \"error\": ...}")
    req.add_argument("--jsonl", action="store_true",
                     help="batch: read one JSON case per line on stdin, write one result per line")
    req.set_defaults(func=_cmd_require)

    from gpuconf.cli.diagnose import add_diagnose_parser
    from gpuconf.cli.images import add_images_parser
    from gpuconf.cli.predict import add_predict_parser
    from gpuconf.cli.report import add_report_parser
    from gpuconf.cli.results import add_results_parser
    from gpuconf.cli.sim import add_sim_parser

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


__all__ = ["CLI_PREFIX", "build_parser", "evaluate_case", "main", "result_json"]
