"""The fault-detection matrix, run by the project's CI: the inventory suite, run with pytest
against simulated clusters, passes on every healthy profile, and for each fault in the catalog
that it covers, exactly the check named for that fault fails, on the faulty node, saying why."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuconf.sim.profile import fault_catalog

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
SUITE = (ROOT / "suites" / "test_inventory.py").read_text()
HEALTHY_H100 = (ROOT / "gpuconf" / "data" / "sim_profiles" / "healthy-h100.yaml").read_text()

#: Which test of suites/test_inventory.py runs which check of gpuconf/data/checks.yaml.
TEST_FOR_CHECK = {
    "inventory.gpu-resource-advertised": "test_gpu_resource_advertised",
    "inventory.allocatable-matches-capacity": "test_allocatable_matches_capacity",
    "inventory.gpu-count-matches-expected": "test_gpu_count_matches",
    "labels.gfd-matches-hardware": "test_labels_match_hardware",
    "driver.version-uniform-in-pool": "test_driver_version_uniform_in_pool",
    "driver.nvml-initializes": "test_nvml_initializes",
    "runtime.cuda-device-nodes-present": "test_cuda_device_nodes_present",
}
FAULTS = [f for f in fault_catalog().values() if f.check in TEST_FOR_CHECK]


def run_suite(pytester: pytest.Pytester, profile: str) -> tuple[pytest.RunResult, set[str]]:
    pytester.makepyfile(test_inventory=SUITE)
    # A subprocess: the cluster (threads, TLS, the cryptography bindings) must not share this interpreter.
    result = pytester.runpytest_subprocess("-p", "gpuconf.plugin", "--simulate", profile, "-rf",
                                           "-p", "no:cacheprovider")
    failed = set(re.findall(r"^FAILED test_inventory\.py::(\S+)", result.stdout.str(), re.M))
    return result, failed


@pytest.mark.parametrize("profile", ["healthy-h100", "a100-mig-mixed", "t4-timeslicing", "h200-dra-only",
                                     "mixed-driver-570", "multi-pool"])
def test_a_healthy_profile_passes_the_inventory_suite(pytester: pytest.Pytester, profile: str):
    result, failed = run_suite(pytester, profile)
    assert not failed, result.stdout.str()[-3000:]
    assert result.parseoutcomes().get("passed", 0) > 0


def test_every_inventory_check_has_a_fault_that_proves_it():
    assert {f.check for f in FAULTS} == set(TEST_FOR_CHECK)


@pytest.mark.parametrize("fault", FAULTS, ids=[f"{f.id} fails {f.check}" for f in FAULTS])
def test_a_fault_fails_exactly_its_check_on_its_node(pytester: pytest.Pytester, fault):
    spec = f"{{id: {fault.id}, pool: h100, node: 0" + (", gpu: 3" if fault.scope == "gpu" else "") + "}"
    profile = pytester.path / f"{fault.id}.yaml"
    profile.write_text(re.sub(r"^faults:.*$", "", HEALTHY_H100, flags=re.M) + f"\nfaults:\n  - {spec}\n")
    result, failed = run_suite(pytester, str(profile))
    assert failed == {f"{TEST_FOR_CHECK[fault.check]}[h100-0]"}, result.stdout.str()[-3000:]
    output = result.stdout.str()
    assert f"{fault.check} on h100-0" in output and "remediation:" in output
