"""The fault-detection matrix, run by the project's CI: every suite under suites/, run with pytest
against simulated clusters, passes on every shipped healthy profile; and for each fault in the
catalog whose check lives in a suite that exists, the check named for that fault fails on the
faulty node, saying why, while every unrelated check stays green.

The verdicts are read from the run's own report.json (what a user gets), so the matrix also proves
the report: each failure carries its check id and node.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from healthy_outcomes import load, mismatches, observed
from serving import pytest_subprocess

from gpuconf.sim.profile import FaultDef, fault_catalog, load_profile
from gpuconf.verdict import checks

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
SUITES = sorted((ROOT / "suites").glob("test_*.py"))
PROFILES = ROOT / "gpuconf" / "data" / "sim_profiles"
#: The shipped profiles a healthy cluster looks like (scale-1000 is the benchmarks' profile).
HEALTHY = ["healthy-h100", "a100-mig-mixed", "h100-mig-single", "t4-timeslicing", "a100-mps", "h200-dra-only",
           "plugin-and-dra", "mixed-driver-570", "multi-pool", "geforce-workstation"]

#: Fleet states no check fails for (severity not-tested): a cordoned, tainted, NotReady or busy node.
# issue 25: the suite reports these NOT TESTED (tests/test_fleet_states.py)
NOT_TESTED = {f.id for f in fault_catalog().values() if f.severity == "not-tested"}
#: Faults whose named check lives in a suite that exists (the others belong to suites still to come).
FAULTS = [f for f in fault_catalog().values() if f.check in checks() and (ROOT / checks()[f.check].suite).exists()
          and f.id not in NOT_TESTED]

#: Checks a fault legitimately breaks besides its own, with the reason. Anything else failing is a bug
#: (a check that cannot tell its fault from another's).
CASCADES: dict[str, tuple[set[str], str]] = {
    "uvm-missing": ({"smoke.vector-add-every-gpu"}, "without /dev/nvidia-uvm CUDA cannot initialise: no kernel runs"),
    "library-mismatch": ({"smoke.vector-add-every-gpu"}, "cudaFree(0) fails with 803: no kernel runs"),
    "gpu-lost": ({"nccl.preflight-gpus-free"}, "a node with 7 GPUs where its pool's nodes have 8 cannot take "
                 "the pool's all-GPU NCCL job: the preflight names it"),
    "gpu-unhealthy": ({"nccl.preflight-gpus-free"}, "a node with 7/8 GPUs allocatable cannot take an all-GPU NCCL "
                      "job: the preflight names it"),
    "no-runtimeclass": ({"runtime.cuda-device-nodes-present", "smoke.vector-add-every-gpu",
                         "isolation.sees-only-allocated", "isolation.only-requesting-container-sees-gpu",
                         "nccl.allreduce-completes"},
                        "GPU pods without runtimeClassName run under the node's default runtime (runc), which is "
                        "given the GPUs by the device plugin but injects none: on every node, no GPU is usable"),
    "envvar-leak": ({"isolation.no-request-sees-no-gpu", "isolation.only-requesting-container-sees-gpu"},
                    "nvidia/cuda images set NVIDIA_VISIBLE_DEVICES=all themselves: with the envvar honoured for "
                    "unprivileged containers, any GPU-less container under the nvidia runtime gets every GPU"),
    "visible-devices-all": ({"isolation.no-request-sees-no-gpu", "isolation.envvar-without-request-gets-no-gpu",
                             "isolation.concurrent-pods-disjoint", "isolation.only-requesting-container-sees-gpu"},
                            "the toolkit injects every GPU into every container it touches: no isolation holds"),
    "compat-libs-broken": ({"compat.current-cuda-major-runs"}, "without the image's cuda-compat libcuda, the "
                           "CUDA 13 images fail at CUDA init on a 570 node: workloads of the current CUDA major "
                           "cannot run there"),
    "xid-errors": ({"smoke.vector-add-every-gpu"}, "CUDA work on a GPU that raised a critical Xid fails until the GPU "
                   "is reset: its vector-add returns an error"),
    "pcie-link-degraded": ({"bandwidth.host-device-floor"}, "a GPU on a link trained down copies at that link's "
                           "rate: under its floor and its siblings"),
    "dra-prepares-wrong-device": ({"dra.distinct-claims-distinct-devices", "dra.selector-steers-scheduling",
                                   "dra.shared-claim-same-device", "dra.count-with-match-attribute"},
                                  "every DRA check that compares the allocated device with the one the pod sees finds "
                                  "the driver preparing another GPU on the faulty node"),
    "nccl-nvls-unavailable": ({"nccl.busbw-above-floor"}, "without NVLS the all-reduce runs over the NVLink ring, "
                              "whose busbw (about 370 GB/s on 8 x H100) is below the NVLS floor"),
    "mig-sibling-visible": ({"mig.layout-matches-config"}, "the faulty Allocate adds a sibling to every pod's "
                            "instances: the pod granted every 1g.10gb instance is also given the 2g/3g instance after "
                            "each one, more instances than it was granted"),
    "mixed-gpu-models": ({"compat.outcome-matches-prediction", "compat.forward-compat-runs",
                          "compat.current-cuda-major-runs"},
                         "the legacy hook checks an image's NVIDIA_REQUIRE_CUDA brand=tesla,... alternatives against "
                         "every GPU a container gets: a compat pod holding the GeForce is refused the forward-"
                         "compatible CUDA 13.2 image the labelled H100 model would run"),
    "dra-slice-stale": ({"inventory.gpu-count-matches-expected", "labels.gfd-matches-hardware",
                         "driver.nvml-initializes", "runtime.cuda-device-nodes-present", "smoke.vector-add-every-gpu",
                         "health.no-uncorrectable-ecc", "health.row-remapping-not-failed",
                         "health.no-pending-memory-repair", "bandwidth.pcie-link-at-max", "bandwidth.host-device-floor",
                         "dra.claim-allocates-the-probed-device", "dra.distinct-claims-distinct-devices",
                         "dra.shared-claim-same-device", "dra.count-with-match-attribute",
                         "dra.selector-steers-scheduling"},
                        "on a DRA-only node every pod claiming all published devices (the whole-node probe the "
                        "inventory, smoke, health and bandwidth checks read) is allocated the gone GPU and never "
                        "starts (NodePrepareResources fails), and so does any one-GPU claim the scheduler gives it"),
    "ecc-uncorrectable": ({"health.no-pending-memory-repair"},
                          "an uncorrectable error on an Ampere-or-later GPU remaps its row, applied at the next reset: "
                          "the pending remap is reported beside the ECC counters"),
}

Failure = tuple[str, str | None]  # (check id, node); a test that failed before judging: (test name, None)


def run_suites(pytester: pytest.Pytester, profile: str, *options: str) -> tuple[pytest.RunResult, list[dict[str, Any]]]:
    suites = pytester.mkdir("suites")
    for suite in SUITES:
        (suites / suite.name).write_text(suite.read_text())
    reports = pytester.path / "reports"
    # A subprocess: the cluster (threads, TLS, the cryptography bindings) must not share this interpreter.
    result = pytest_subprocess(pytester, "suites", "-p", "gpuconf.plugin", "--simulate", profile, "--report-dir",
                               str(reports), "-rf", "-p", "no:cacheprovider", "-o", "junit_family=xunit1", *options)
    tests = json.loads((reports / "report.json").read_text())["results"]["tests"]
    return result, tests


def failures(tests: list[dict[str, Any]]) -> set[Failure]:
    out: set[Failure] = set()
    for t in tests:
        if t["status"] == "failed":
            extra = t.get("extra") or {}
            out.add((extra["check"], extra.get("node")) if extra.get("check") else (t["name"], None))
    return out


@pytest.mark.parametrize("profile", HEALTHY)
def test_a_healthy_profile_passes_every_suite(pytester: pytest.Pytester, profile: str):
    result, tests = run_suites(pytester, profile)
    assert not failures(tests), result.stdout.str()[-4000:]
    assert result.ret == 0 and sum(t["status"] == "passed" for t in tests) > 0
    # Each check's outcome there is pinned (tests/healthy_outcomes.py): a check drifting to NOT TESTED fails here.
    drift = mismatches(load(profile), observed(tests))
    regenerate = f"after a deliberate change: .venv/bin/python tests/healthy_outcomes.py {profile}"
    assert not drift, "\n".join([*drift, regenerate])
    for t in tests:  # the catalog says truly where each check lives
        check = (t.get("extra") or {}).get("check")
        if check:
            assert checks()[check].suite == t["filePath"], (check, t["filePath"])


def test_the_matrix_covers_every_fault_of_the_existing_suites():
    covered = {f.id for f in FAULTS}
    for f in fault_catalog().values():
        if f.id in NOT_TESTED:
            continue
        assert (f.id in covered) == (ROOT / f.suite).exists(), f"{f.id}: catalog suite {f.suite}"
        assert f.suite == checks()[f.check].suite if f.check in checks() else True, f.id


def target(fault: FaultDef) -> tuple[str, str | None]:
    """The profile text with the fault injected on the first pool's first node, and that node."""
    text = (PROFILES / f"{fault.example_profile}.yaml").read_text()
    if fault.scope == "cluster":
        spec, node = f"{{id: {fault.id}}}", None
    else:
        pool = load_profile(fault.example_profile).pools[0].name
        spec = f"{{id: {fault.id}, pool: {pool}, node: 0" + (", gpu: 3" if fault.scope == "gpu" else "") + "}"
        node = f"{pool}-0"
    return re.sub(r"^faults:.*$", "", text, flags=re.M) + f"\nfaults:\n  - {spec}\n", node


@pytest.mark.parametrize("fault", FAULTS, ids=[f"{f.id} fails {f.check}" for f in FAULTS])
def test_a_fault_fails_its_check_on_its_node_and_nothing_unrelated(pytester: pytest.Pytester, fault: FaultDef):
    text, node = target(fault)
    profile = pytester.path / f"{fault.id}.yaml"
    profile.write_text(text)
    # A DRA claim the kubelet cannot prepare is reported 5 s after its FailedPrepareDynamicResources,
    # not the default 20 (dra-slice-stale has three campaigns that wait it out).
    result, tests = run_suites(pytester, str(profile), "--prepare-timeout", "5")
    output = result.stdout.str()
    failed = failures(tests)
    assert (fault.check, node) in failed, output[-4000:]
    allowed, _why = CASCADES.get(fault.id, (set(), ""))
    unexpected = {(c, n) for c, n in failed if c != fault.check and c not in allowed}
    assert not unexpected, output[-4000:]
    assert f"{fault.check}" + (f" on {node}" if node else "") in output and "remediation:" in output
    mine = [t for t in tests if (t.get("extra") or {}).get("check") == fault.check
            and (t.get("extra") or {}).get("node") == node]
    assert mine and all(t["extra"]["outcome"] == fault.severity for t in mine if t["status"] == "failed"), mine
