"""``gpuconf require``: evaluate ``NVIDIA_REQUIRE_*`` against host facts as nvidia-container-cli does
(legacy mode); ``--jsonl`` reads one case per line (``evaluate_case``, ``result_json``).

Exit statuses: 0 satisfied, 1 rejected, 2 bad input (a bad version, no requirement, a bad ``--jsonl``
line: that line's result is ``{"ok": null, ...}`` and the others still run).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from gpuconf.compat.require import Gpu, HostFacts, RequireResult, check_container
from gpuconf.compat.versions import VersionError, nvc_cuda_string, parse_cuda, parse_driver
from gpuconf.errors import EXIT_OK, EXIT_REJECTED, EXIT_USAGE, UsageError

__all__ = ["add_require_parser", "evaluate_case", "result_json"]


def add_require_parser(sub: Any) -> None:
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
