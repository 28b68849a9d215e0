"""`python -m pytest` for the tests' suite runs, forked from a process that imported the heavy
modules once (multiprocessing's fork server) instead of a fresh interpreter each time.

Why: a suite run against a simulated cluster spends about half its CPU importing (measured with
py-spy on a healthy-h100 run of every suite: ~55 % of samples under importlib, most of it the
official client's pydantic API modules, CoreV1Api's alone ~1 s), and the tests make over a hundred
such runs. A forked child starts with those modules imported and nothing else done: no cluster, no
pytest session, no thread. What it runs is what a user's `python -m pytest ARGS` runs: the same
arguments, working directory, environment (with the directory first on sys.path, as pytester's
subprocesses have it), its own stdout and stderr, and its exit status.

Not forked: gpuconf.plugin and the gpuconf.kit it imports (pytest must import them itself to
rewrite their asserts, as in a user's run). Runs that are signalled, or read while running, stay
real subprocesses (tests/serving.py). ``GPUCONF_TESTS_FRESH_PYTHON=1`` makes every run a fresh
interpreter again (pytester's own ``runpytest_subprocess``), e.g. to rule this out when a run
behaves differently.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from _pytest.pathlib import make_numbered_dir

ROOT = Path(__file__).resolve().parents[1]
#: Imported once by the fork server, before any run: what a suite run against a simulated cluster
#: imports, gpuconf.plugin and gpuconf.kit aside (see above).
PRELOAD = [
    "pytest", "_pytest.pytester", "kubernetes.client", "kubernetes.config", "kubernetes.watch",
    "kubernetes.client.api.core_v1_api", "kubernetes.client.api.resource_v1_api",
    "kubernetes.client.api.coordination_v1_api", "kubernetes.client.api.node_v1_api",
    "kubernetes.client.api.scheduling_v1_api", "kubernetes.client.api.custom_objects_api",
    "kubernetes.client.api.apiextensions_v1_api", "kubernetes.client.api.version_api",
    "kubernetes.client.api.apis_api", "gpuconf.sim.cluster", "gpuconf.cluster", "gpuconf.checks.compat",
    "gpuconf.report.writers", "gpuconf.verdict", "jsonschema", "jinja2", "yaml",
]
FRESH = os.environ.get("GPUCONF_TESTS_FRESH_PYTHON") == "1"

_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(PRELOAD)


def _pytest_main(args: list[str], cwd: str, env: dict[str, str], out: str, err: str) -> None:
    """In the forked child: become `python -m pytest ARGS` started in ``cwd`` with ``env``."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    tests = str(ROOT / "tests")
    sys.path[:] = [cwd, *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != cwd),
                   *(p for p in sys.path if p not in ("", tests))]
    sys.argv = [sys.argv[0], *args]
    tempfile.tempdir = None  # the child's TMPDIR, not the server's
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    try:
        status = int(pytest.main(args))
    finally:
        # An interpreter runs its exit handlers when it ends; a forked child ends with os._exit. The
        # official client removes the files it wrote a kubeconfig's inline certificate and key into
        # in one: without it, each run that read such a kubeconfig left a private key in $TMPDIR.
        atexit._run_exitfuncs()
    sys.exit(status)


def _run(argv: list[str], cwd: str | Path, env: dict[str, str], out: Path, err: Path, timeout: float | None) -> int:
    """`python -m pytest ARGV` forked, its stdout and stderr written to ``out`` and ``err``; its exit
    status (-N if a signal N ended it). ``subprocess.TimeoutExpired`` past ``timeout`` (it was killed)."""
    child = _context.Process(target=_pytest_main, args=(argv, str(cwd), env, str(out), str(err)))
    child.start()
    child.join(timeout)
    if child.is_alive():
        child.kill()
        child.join()
        raise subprocess.TimeoutExpired(["pytest", *argv], timeout or 0)
    return int(child.exitcode or 0)


def run_pytest(argv: list[str], *, cwd: str | Path, env: dict[str, str] | None = None,
               timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """``subprocess.run([sys.executable, "-m", "pytest", *argv], cwd=cwd, env=env, capture_output=True,
    text=True, timeout=timeout)``, forked (see the module's text)."""
    env = dict(os.environ if env is None else env)
    if FRESH:
        return subprocess.run([sys.executable, "-m", "pytest", *argv], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=timeout, check=False)
    with tempfile.TemporaryDirectory(prefix="gpuconf-forked-") as where:
        out, err = Path(where, "stdout"), Path(where, "stderr")
        status = _run(argv, cwd, env, out, err, timeout)
        return subprocess.CompletedProcess(["pytest", *argv], status, out.read_text(errors="replace"),
                                           err.read_text(errors="replace"))


def runpytest(pytester: pytest.Pytester, *args: str | os.PathLike[str],
              timeout: float | None = None) -> pytest.RunResult:
    """``pytester.runpytest_subprocess(*args, timeout=timeout)``, forked (see the module's text)."""
    __tracebackhide__ = True
    if FRESH:
        return pytester.runpytest_subprocess(*args, timeout=timeout)
    basetemp = make_numbered_dir(root=pytester.path, prefix="runpytest-", mode=0o700)
    argv = [f"--basetemp={basetemp}", *(str(a) for a in args)]
    for plugin in pytester.plugins:
        argv = ["-p", str(plugin), *argv]
    cwd = os.getcwd()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [cwd, env.get("PYTHONPATH", "")]))
    out, err = pytester.path / "stdout", pytester.path / "stderr"
    began = time.monotonic()
    try:
        status = _run(argv, cwd, env, out, err, timeout)
    except subprocess.TimeoutExpired as exc:
        raise pytester.TimeoutExpired(f"{timeout} second timeout expired running: {argv}") from exc
    result = pytest.RunResult(status, out.read_text(errors="replace").splitlines(),
                              err.read_text(errors="replace").splitlines(), time.monotonic() - began)
    for line in result.outlines:  # as pytester shows a subprocess's output, for a failing test's report
        print(line)
    for line in result.errlines:
        print(line, file=sys.stderr)
    return result
