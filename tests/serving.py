"""Helpers for tests that run the suites as a user would: against `gpuconf sim serve` in its own
process, with `python -m pytest suites/ --kubeconfig` in another (tests/test_api_faults.py,
tests/test_cleanup.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import forked
import pytest

ROOT = Path(__file__).resolve().parents[1]
GPUCONF = [sys.executable, "-m", "gpuconf.cli"]
#: How many suite runs a fixture makes at once: one per core (at least two; a run waits on its
#: simulated cluster part of the time), shared among pytest-xdist's workers, each of which runs suites
#: too: more starve each other's start-up deadlines on 2 cores.
PARALLEL_RUNS = max(2, os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) or 1

#: Given to every pytest the tests start: hypothesis's pytest plugin imports all of hypothesis when
#: a run ends (its terminal summary hook, unconditionally: ~1.5 s CPU a run, measured), and the
#: tests start over a hundred suite runs, none of which has a property test.
NO_HYPOTHESIS = ("-p", "no:hypothesispytest")

K = TypeVar("K")
V = TypeVar("V")


def in_parallel(jobs: Mapping[K, Callable[[], V]]) -> dict[K, V]:
    """Run independent jobs (each starting its own suite run) PARALLEL_RUNS at a time; their results
    by key, in the jobs' order. The first job to raise raises here, after the others finished."""
    with ThreadPoolExecutor(max_workers=PARALLEL_RUNS) as pool:
        futures = {key: pool.submit(job) for key, job in jobs.items()}
    return {key: future.result() for key, future in futures.items()}


@dataclass
class Served:
    """A running `gpuconf sim serve`: its kubeconfig and process; ``summary`` (the faults it
    injected, by mode) is read once it stopped, when it was asked to write one."""

    kubeconfig: Path
    process: subprocess.Popen[str]
    summary_path: Path

    def summary(self) -> dict[str, int]:
        return dict(json.loads(self.summary_path.read_text()))


@contextmanager
def serve(base: Path, profile: str | Path, *options: str) -> Iterator[Served]:
    """`gpuconf sim serve --profile PROFILE OPTIONS` until the block ends (then Ctrl-C, as a user)."""
    base.mkdir(parents=True, exist_ok=True)
    kubeconfig, summary = base / "kubeconfig", base / "faults.json"
    log = (base / "serve.log").open("w")
    process = subprocess.Popen([*GPUCONF, "sim", "serve", "--profile", str(profile), "--kubeconfig-out",
                                str(kubeconfig), "--faults-summary", str(summary), *options],
                               cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 180
        while not kubeconfig.exists():
            assert process.poll() is None, f"gpuconf sim serve ended: {(base / 'serve.log').read_text()}"
            assert time.monotonic() < deadline, "gpuconf sim serve did not write its kubeconfig within 180 s"
            time.sleep(0.1)
        yield Served(kubeconfig, process, summary)
    finally:
        interrupt(process)
        log.close()


def interrupt(process: subprocess.Popen[str]) -> None:
    """Ctrl-C, as a user stops it; killed if it has not ended within 30 s."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def suite_args(kubeconfig: Path, report_dir: Path, *options: str, suites: Sequence[str] = ("suites/",)) -> list[str]:
    """`pytest`'s arguments for the suites against ``kubeconfig``."""
    return [*NO_HYPOTHESIS, *suites, "-p", "gpuconf.plugin", "--kubeconfig", str(kubeconfig), "--report-dir",
            str(report_dir), "-q", "-p", "no:cacheprovider", *options]


def start_suites(kubeconfig: Path, report_dir: Path, *options: str,
                 suites: Sequence[str] = ("suites/",)) -> subprocess.Popen[str]:
    """The suites as a separate process (its own session, so a signal reaches only it)."""
    return subprocess.Popen([sys.executable, "-m", "pytest", *suite_args(kubeconfig, report_dir, *options,
                                                                         suites=suites)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def run_suites(kubeconfig: Path, report_dir: Path, *options: str, suites: Sequence[str] = ("suites/",),
               timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The suites against ``kubeconfig`` to their end (forked: tests/forked.py)."""
    return forked.run_pytest(suite_args(kubeconfig, report_dir, *options, suites=suites), cwd=ROOT, timeout=timeout)


def report(report_dir: Path) -> dict[str, Any]:
    return dict(json.loads((report_dir / "report.json").read_text()))


def outcomes(report_dir: Path) -> dict[tuple[str, str, str], str]:
    """Each test's outcome, keyed by (check, node, test): the node "" for a cluster-wide test."""
    out = {}
    for test in report(report_dir)["results"]["tests"]:
        extra = test.get("extra") or {}
        out[(str(extra.get("check") or ""), str(extra.get("node") or ""), str(test["name"]))] = str(test["status"])
    return out


def pytest_subprocess(pytester: pytest.Pytester, *args: str | Path, timeout: float | None = None) -> pytest.RunResult:
    """``pytester.runpytest_subprocess`` without hypothesis's plugin (NO_HYPOTHESIS), forked from
    a process that has the heavy modules imported (tests/forked.py)."""
    return forked.runpytest(pytester, *NO_HYPOTHESIS, *args, timeout=timeout)
