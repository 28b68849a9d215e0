"""The pytest plugin's cluster options, tested the way pytest tests itself (pytester)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

SUITE = """
from kubernetes import client

def test_nodes_are_visible(gpu_cluster):
    nodes = client.CoreV1Api(gpu_cluster.api_client).list_node().items
    assert gpu_cluster.provenance == "simulated:t4-timeslicing"
    assert {n.metadata.name for n in nodes} == {"t4-0", "t4-1"}
"""


def test_simulate_runs_a_suite_against_a_simulated_cluster(pytester: pytest.Pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess("-p", "gpuconf.plugin", "--simulate", "t4-timeslicing")
    result.assert_outcomes(passed=1)


def test_without_a_cluster_the_suite_skips_with_the_reason(pytester: pytest.Pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest("-p", "gpuconf.plugin", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*no cluster to test: give --kubeconfig PATH or --simulate PROFILE*"])


def test_an_unknown_profile_is_a_usage_error_naming_the_shipped_ones(pytester: pytest.Pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest("-p", "gpuconf.plugin", "--simulate", "nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown simulated cluster profile 'nope'*healthy-h100*"])
