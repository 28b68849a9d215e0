"""The project keeps its promises: the README's commands work, CI runs the README's test
command, the code type-checks and lints."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from gpuconf.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def quick_start() -> list[str]:
    block = README.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.startswith("bash scripts/bootstrap.sh && ")]


def test_the_quick_start_has_two_commands_and_ci_runs_the_test_one():
    main_cmd, test_cmd = quick_start()
    assert "pytest suites/ --simulate" in main_cmd and "pytest tests" in test_cmd
    assert test_cmd in (ROOT / ".ci" / "run").read_text()


def test_the_quick_start_main_command_runs_the_suites_and_passes():
    main_cmd = quick_start()[0]
    argv = shlex.split(main_cmd.split("&& ", 1)[1])
    assert argv[0] == ".venv/bin/python"
    proc = subprocess.run([sys.executable, *argv[1:], "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout.splitlines()[-1]


def test_every_gpuconf_example_in_the_readme_parses():
    checked = 0
    for match in re.finditer(r"^gpuconf (require|predict) ([^\n\[]*?)(?:\\\n[^\n]*)*$", README, re.M):
        if "--jsonl" in match.group(0) or "[" in match.group(0):
            continue
        argv = shlex.split(match.group(0).replace("\\\n", " "))[1:]
        assert main(argv) in (0, 1), argv
        checked += 1
    assert checked >= 2


def test_mypy_strict_passes():
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "gpuconf"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_passes():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "gpuconf", "tests", "suites"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_suite_test_declares_the_check_it_proves():
    """So each result in the reports names its check, also when it skips before its verdict."""
    import ast

    from gpuconf.verdict import checks

    for path in sorted((ROOT / "suites").glob("test_*.py")):
        for fn in ast.parse(path.read_text()).body:
            if isinstance(fn, ast.FunctionDef) and fn.name.startswith("test_"):
                marks = [d for d in fn.decorator_list if isinstance(d, ast.Call) and ast.unparse(d.func).endswith(
                    "mark.check")]
                assert len(marks) == 1, f"{path.name}::{fn.name} has no @pytest.mark.check(...)"
                assert ast.literal_eval(marks[0].args[0]) in checks(), f"{path.name}::{fn.name}"


def test_no_test_module_shares_a_basename_with_a_suite():
    """`pytest` from the repository root collects tests/ and suites/ together (no __init__.py in
    either): two modules with one basename would stop collection with an import-file mismatch."""
    suites = {p.name for p in (ROOT / "suites").glob("test_*.py")}
    tests = {p.name for p in (ROOT / "tests").glob("test_*.py")}
    assert not suites & tests


def test_the_readme_lists_every_fault_with_its_check_and_parameters():
    from gpuconf.sim.profile import fault_catalog

    table = README.split("| fault | targets | caught by | parameters (default) |", 1)[1].split("\n\n", 1)[0]
    for fault in fault_catalog().values():  # the fault table only: a diagnosis may share a fault's name
        row = next((line for line in table.splitlines() if line.startswith(f"| `{fault.id}` |")), None)
        assert row is not None, f"README lists no fault {fault.id}"
        assert f"`{fault.check}` ({fault.severity})" in row, row
        assert all(f"`{p.name}` ({p.default}" in row for p in fault.parameters), row
