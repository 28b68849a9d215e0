"""suites/test_dcgm.py end to end against simulated clusters, read from the run's report.json: the
tier runs only with --dcgm-diag, passes on a healthy cluster, and names the node, the test and the
GPU when one GPU has uncorrectable ECC errors; an xid fault fails the level 3 diagnostic test."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from serving import pytest_subprocess

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ROOT / "gpuconf" / "data" / "sim_profiles"


def run(pytester: pytest.Pytester, profile: str, *args: str) -> tuple[pytest.RunResult, list[dict[str, Any]]]:
    suites = pytester.mkdir("suites")
    (suites / "test_dcgm.py").write_text((ROOT / "suites" / "test_dcgm.py").read_text())
    reports = pytester.path / "reports"
    # A subprocess: the cluster (threads, TLS, the cryptography bindings) must not share this interpreter.
    result = pytest_subprocess(pytester, "suites", "-p", "gpuconf.plugin", "--simulate", profile, "--report-dir",
                               str(reports), "-rfs", "-p", "no:cacheprovider", *args)
    return result, json.loads((reports / "report.json").read_text())["results"]["tests"]


def faulty(pytester: pytest.Pytester, fault: str) -> str:
    """healthy-h100 with ``fault`` on GPU 3 of the first pool's node 0."""
    text = re.sub(r"^faults:.*$", "", (PROFILES / "healthy-h100.yaml").read_text(), flags=re.M)
    path = pytester.path / f"{fault}.yaml"
    path.write_text(text + f"\nfaults:\n  - {{id: {fault}, pool: h100, node: 0, gpu: 3}}\n")
    return str(path)


def by_status(tests: list[dict[str, Any]], status: str) -> list[dict[str, Any]]:
    return [t for t in tests if t["status"] == status]


def test_without_the_option_every_test_is_skipped_saying_how_to_run_it(pytester: pytest.Pytester) -> None:
    result, tests = run(pytester, "healthy-h100")
    # the DCGM suite alone, nothing tested: PARTIAL (18), never a pass's 0
    assert result.ret == 18 and tests and len(by_status(tests, "skipped")) == len(tests)
    # the terminal counts what was not asked for in one line; each report's result says how to ask for it
    assert {(t["extra"]["not_tested"], t["message"].split(" (")[0]) for t in tests} == {
        ("not-selected", "run with --dcgm-diag LEVEL")}
    result.stdout.fnmatch_lines(["gpuconf: results: 4 not tested (4 not asked for)"])


def test_a_healthy_cluster_passes_level_2(pytester: pytest.Pytester) -> None:
    """Every diagnostic passes; the run is PARTIAL (exit 18), not a sign-off: it collected the DCGM suite only."""
    result, tests = run(pytester, "healthy-h100", "--dcgm-diag", "2")
    assert result.ret == 18, result.stdout.str()[-3000:]
    assert len(by_status(tests, "passed")) == len(tests) == 4
    result.stdout.fnmatch_lines(["gpuconf: PARTIAL: Not a sign-off: *; what it ran passed on 2 GPU node(s)*",
                                 "gpuconf: opt-in tiers run: DCGM diagnostics level 2", "gpuconf: results: 4 passed",
                                 "gpuconf: exit status 18: *"])


def test_an_out_of_range_level_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytest_subprocess(pytester, "-p", "gpuconf.plugin", "--dcgm-diag", "5", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--dcgm-diag 5: give a level from 1 to 4" in result.stderr.str()


def test_uncorrectable_ecc_fails_the_memory_test_on_that_gpu_and_node_only(pytester: pytest.Pytester) -> None:
    result, tests = run(pytester, faulty(pytester, "ecc-uncorrectable"), "--dcgm-diag", "2")
    failed = by_status(tests, "failed")
    assert [(t["extra"]["check"], t["extra"]["node"]) for t in failed] == [("dcgm.diag-passes", "h100-0")], failed
    assert failed[0]["extra"]["outcome"] == "fail"
    out = result.stdout.str()
    assert ("dcgm.diag-passes on h100-0: DCGM level 2 diagnostic (4.x) failed: memory failed on GPU 3" in out
            and "Detected 1 volatile double-bit ECC error(s) in GPU 3. [error 4]" in out
            and "dcgmi exited 205" in out), out[-3000:]


def test_an_xid_fails_the_level_3_diagnostic_test(pytester: pytest.Pytester) -> None:
    result, tests = run(pytester, faulty(pytester, "xid-errors"), "--dcgm-diag", "3")
    failed = by_status(tests, "failed")
    assert [(t["extra"]["check"], t["extra"]["node"]) for t in failed] == [("dcgm.diag-passes", "h100-0")], failed
    assert "diagnostic failed on GPU 3" in result.stdout.str() and "Detected XID" in result.stdout.str()
