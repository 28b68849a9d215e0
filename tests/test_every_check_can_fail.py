"""Every check of gpuconf/data/checks.yaml is proven able to fail by a test that asserts it: a unit test
whose assertions fail when that check's FAIL (or DEGRADED, its severity) on the test's crafted input is
turned into a PASS. The table also names the faults of the simulator's catalog that name the check as
the one that catches them (tests/test_suite_fault_matrix.py asserts each fails on the faulty node).

The unit tests run again in a subprocess under tests/verdict_recorder.py, which re-runs each passing
test with each check it saw fail sabotaged; the table (check, the test that asserts its failure, the
faults) is printed. A FAIL the product made in passing, with no assertion on it, proves nothing."""

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
    logged = json.loads(log.read_text())
    proven: dict[str, str] = logged["proven"]
    faults: dict[str, list[str]] = {}
    for fault in fault_catalog().values():
        if fault.severity != "not-tested":
            faults.setdefault(fault.check, []).append(fault.id)
    width = max(map(len, checks()))
    for cid in sorted(checks()):
        print(f"{cid:<{width}}  {proven.get(cid, '-')}  faults: {', '.join(faults.get(cid, [])) or '-'}")
    # every check has a unit test that asserts its failure (the catalog faults are shown beside, as the
    # second proof tests/test_suite_fault_matrix.py gives where one exists)
    never = sorted(cid for cid in checks() if cid not in proven)
    assert not never, ("checks no unit test asserts the failure of: "
                       + ", ".join(f"{c} (failed unasserted in {logged['seen'][c]})" if c in logged["seen"] else c
                                   for c in never))
    # The recorder saw only catalogued checks: a verdict for an unknown id would be a typo somewhere.
    assert set(logged["seen"]) <= set(checks()), set(logged["seen"]) - set(checks())


def test_the_recorder_credits_a_test_that_asserts_a_failure_and_no_other(tmp_path: Path):
    (tmp_path / "test_probe.py").write_text(
        "from gpuconf.checks.probe_start import evaluate_block\n"
        "from gpuconf.checks.probe_start import Blocked\n"
        "from gpuconf.checks.inventory import evaluate_cuda_device_nodes\n"
        "from gpuconf.verdict import Outcome, failed, passed\n"
        "from test_checks_inventory import h100_0, whole_node_probe\n"
        "import dataclasses\n"
        "def broken():\n"
        "    p = whole_node_probe(h100_0())\n"
        "    return dataclasses.replace(p, device_nodes={**p.device_nodes, '/dev/nvidia-uvm': False})\n"
        "def test_asserts():\n"
        "    assert evaluate_cuda_device_nodes('n', broken()).outcome is Outcome.FAIL\n"
        "def test_watches_only():\n"
        "    evaluate_cuda_device_nodes('n', broken())\n"
        "    v = evaluate_cuda_device_nodes('n', whole_node_probe(h100_0()))\n"
        "    assert v.outcome is Outcome.PASS\n"
        "def test_builds_its_own():\n"
        "    assert failed('smoke.vector-add-every-gpu', 'n', 'x').outcome is Outcome.FAIL\n"
        "    passed('inventory.gpu-resource-advertised', 'n', 'x')\n")
    log = tmp_path / "failing.json"
    env = {**os.environ, "GPUCONF_VERDICT_LOG": str(log), "PYTHONPATH": str(ROOT / "tests")}
    for only in ("test_watches_only or test_builds_its_own", "test_asserts or test_watches_only"):
        subprocess.run([sys.executable, "-m", "pytest", str(tmp_path / "test_probe.py"), "-q", "-p", "no:xdist",
                        "-p", "verdict_recorder", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "-k", only],
                       cwd=tmp_path, env=env, check=True, capture_output=True)
        logged = json.loads(log.read_text())
        if "test_asserts" in only:  # the asserting test is the proof, and the tests still pass
            assert logged["proven"] == {"runtime.cuda-device-nodes-present": "test_probe.py::test_asserts"}
        else:  # a FAIL made in passing is seen, never proof; a verdict the test builds itself is neither
            assert logged == {"proven": {}, "seen": {"runtime.cuda-device-nodes-present":
                                                     "test_probe.py::test_watches_only"}}
