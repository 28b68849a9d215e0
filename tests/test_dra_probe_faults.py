"""The probe-based suites on a DRA-only node catch the faults they exist for, through DRA: on the
simulated h200-dra-only cluster (no device plugin: every probe gets its GPUs through a claim on
gpu.nvidia.com), each fault below fails its check on the faulty node, saying why, and the node's
other probe checks still run. The healthy side is pinned in tests/data/healthy_outcomes.yaml."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from serving import pytest_subprocess

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "gpuconf" / "data" / "sim_profiles" / "h200-dra-only.yaml"

#: (fault, the suite that catches it, its check, a phrase of the failure)
CASES = [
    ("compat-libs-broken", "test_compat.py", "compat.forward-compat-runs", "forward compatibility does not work"),
    ("envvar-leak", "test_isolation.py", "isolation.envvar-without-request-gets-no-gpu",
     "an unprivileged pod that requests no GPU and sets NVIDIA_VISIBLE_DEVICES=all sees 8 GPUs"),
    ("nccl-hang", "test_nccl.py", "nccl.allreduce-completes", "the all-reduce hung"),
]


def run_suite(pytester: pytest.Pytester, suite: str, fault: str) -> list[dict[str, object]]:
    (pytester.mkdir("suites") / suite).write_text((ROOT / "suites" / suite).read_text())
    pool = re.search(r"^pools:\s*\n\s*-\s*name:\s*(\S+)", PROFILE.read_text(), flags=re.M)
    assert pool is not None
    text = re.sub(r"^faults:.*$", "", PROFILE.read_text(), flags=re.M)
    profile = pytester.path / f"{fault}.yaml"
    profile.write_text(text + f"\nfaults:\n  - {{id: {fault}, pool: {pool.group(1)}, node: 0}}\n")
    reports = pytester.path / "reports"
    pytest_subprocess(pytester, "suites", "-p", "gpuconf.plugin", "--simulate", str(profile), "--report-dir",
                      str(reports), "-p", "no:cacheprovider")
    return list(json.loads((reports / "report.json").read_text())["results"]["tests"])


@pytest.mark.parametrize(("fault", "suite", "check", "phrase"), CASES, ids=[c[0] for c in CASES])
def test_a_fault_on_a_dra_only_node_fails_its_probe_check_through_claims(pytester: pytest.Pytester, fault: str,
                                                                        suite: str, check: str, phrase: str) -> None:
    tests = run_suite(pytester, suite, fault)
    by_node = {(t["extra"]["check"], t["extra"].get("node")): t for t in tests  # type: ignore[index]
               if (t.get("extra") or {}).get("check")}  # type: ignore[union-attr]
    mine = by_node[(check, "h200-0")]
    assert mine["status"] == "failed" and phrase in str(mine.get("message")), mine.get("message")
    assert by_node[(check, "h200-1")]["status"] == "passed"  # the healthy node, asked the same way
    assert not any("no DRA variant" in str(t.get("message")) for t in tests)


#: The probe checks that must still run and pass on a node with one device-tainted GPU (the taint is the
#: DRA suite's finding, dra.devices-untainted; the node's other checks ask for its untainted GPUs).
STILL_PASSING = ("smoke.vector-add-every-gpu", "isolation.sees-only-allocated", "isolation.concurrent-pods-disjoint",
                 "compat.outcome-matches-prediction", "nccl.preflight-gpus-free", "nccl.allreduce-completes",
                 "dcgm.diag-passes")


@pytest.mark.parametrize("profile", ["h200-dra-only", "h200-dra-extended"])
def test_one_device_tainted_gpu_does_not_block_the_nodes_probe_checks(pytester: pytest.Pytester,
                                                                      profile: str) -> None:
    suites = pytester.mkdir("suites")
    for suite in ("test_smoke.py", "test_isolation.py", "test_compat.py", "test_nccl.py", "test_dcgm.py"):
        (suites / suite).write_text((ROOT / "suites" / suite).read_text())
    text = re.sub(r"^faults:.*$", "", (PROFILE.parent / f"{profile}.yaml").read_text(), flags=re.M)
    path = pytester.path / "tainted.yaml"
    path.write_text(text + "\nfaults:\n  - {id: dra-device-taint, pool: h200, node: 0, gpu: 3}\n")
    reports = pytester.path / "reports"
    pytest_subprocess(pytester, "suites", "-p", "gpuconf.plugin", "--simulate", str(path), "--report-dir",
                      str(reports), "-p", "no:cacheprovider", "--dcgm-diag", "1")
    tests = json.loads((reports / "report.json").read_text())["results"]["tests"]
    status = {(t["extra"]["check"], t["extra"].get("node")): t["status"] for t in tests
              if (t.get("extra") or {}).get("check")}
    for node in ("h200-0", "h200-1"):
        # the two one-GPU pods hold their GPUs until each saw the other's (the probe's rendezvous): a pass,
        # never a decline, however loaded the machine
        assert {c: status.get((c, node)) for c in STILL_PASSING} == dict.fromkeys(STILL_PASSING, "passed"), node
