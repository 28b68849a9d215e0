"""Every check of gpuconf/data/checks.yaml can fail: some crafted input in the checks' unit tests makes
it FAIL (or DEGRADED, its severity), or a fault of the simulator's catalog names it as the check that
catches it (tests/test_suite_fault_matrix.py proves that one fails on the faulty node).

The unit tests run again in a subprocess under tests/verdict_recorder.py, which records the first test
in which each check returned a failing verdict; the table (check, the test, the faults) is printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gpuconf.sim.profile import fault_catalog
from gpuconf.verdict import checks

ROOT = Path(__file__).resolve().parent.parent
#: The unit tests that call the checks on crafted facts (no simulated cluster: seconds, not minutes).
UNIT_TESTS = [*sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_checks_*.py")),
              "tests/test_probe_start.py", "tests/test_current_cuda_major.py", "tests/test_default_runtime.py"]


def test_every_check_fails_on_some_crafted_input_or_catalog_fault(tmp_path: Path):
    log = tmp_path / "failing.json"
    env = {**os.environ, "GPUCONF_VERDICT_LOG": str(log),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-m", "pytest", *UNIT_TESTS, "-q", "-p", "no:xdist", "-p", "verdict_recorder",
                          "-p", "no:cacheprovider", "-p", "no:hypothesispytest"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:]
    failing: dict[str, str] = json.loads(log.read_text())
    faults: dict[str, list[str]] = {}
    for fault in fault_catalog().values():
        if fault.severity != "not-tested":
            faults.setdefault(fault.check, []).append(fault.id)
    width = max(map(len, checks()))
    for cid in sorted(checks()):
        print(f"{cid:<{width}}  {failing.get(cid, '-')}  faults: {', '.join(faults.get(cid, [])) or '-'}")
    never = sorted(cid for cid in checks() if cid not in failing and cid not in faults)
    assert not never, f"checks no crafted input and no catalog fault makes fail: {never}"
    # The recorder saw only catalogued checks: a verdict for an unknown id would be a typo somewhere.
    assert set(failing) <= set(checks()), set(failing) - set(checks())


def test_the_recorder_sees_a_failing_verdict_and_ignores_the_others(tmp_path: Path):
    (tmp_path / "test_probe.py").write_text(
        "from gpuconf.verdict import failed, passed, not_tested\n"
        "def test_fail():\n    failed('smoke.vector-add-every-gpu', 'n', 'x')\n"
        "def test_other():\n    passed('inventory.gpu-resource-advertised', 'n', 'x')\n"
        "    not_tested('dcgm.diag-passes', 'n', 'x')\n")
    log = tmp_path / "failing.json"
    env = {**os.environ, "GPUCONF_VERDICT_LOG": str(log), "PYTHONPATH": str(ROOT / "tests")}
    subprocess.run([sys.executable, "-m", "pytest", str(tmp_path / "test_probe.py"), "-q", "-p", "no:xdist",
                    "-p", "verdict_recorder", "-p", "no:cacheprovider", "--rootdir", str(tmp_path)],
                   cwd=tmp_path, env=env, check=True, capture_output=True)
    assert json.loads(log.read_text()) == {"smoke.vector-add-every-gpu": f"{'test_probe.py'}::test_fail"}
