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


def _kubeconfig(path, server: str) -> None:
    path.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{server}"}}}}]
users: [{{name: u, user: {{}}}}]
contexts: [{{name: c, context: {{cluster: c, user: u}}}}]
current-context: c
""")


@pytest.mark.parametrize("case,status,fragment", [
    ("not yaml", 10, "not YAML"),
    ("unknown context", 10, "unknown context"),
    ("unreachable", 11, "cannot reach the API server"),
    ("no gpu nodes", 13, "the cluster has no GPU nodes"),
])
def test_a_run_that_cannot_start_says_why_in_one_line_with_its_own_exit_status(pytester: pytest.Pytester, case,
                                                                               status, fragment):
    from gpuconf.sim.server import FakeApiServer

    pytester.makepyfile(test_suite="def test_node(gpu_node):\n    pass\n")
    kubeconfig = pytester.path / "kubeconfig"
    args = ["-p", "gpuconf.plugin", "--kubeconfig", str(kubeconfig)]
    server = FakeApiServer().start()
    try:
        if case == "not yaml":
            kubeconfig.write_text("{{{ not: yaml")
        elif case == "unknown context":
            _kubeconfig(kubeconfig, server.url)
            args += ["--context", "prod"]
        elif case == "unreachable":
            _kubeconfig(kubeconfig, "http://127.0.0.1:9")
        else:
            server.write_kubeconfig(kubeconfig)
        result = pytester.runpytest_subprocess(*args)
    finally:
        server.stop()
    assert result.ret == status, result.stdout.str() + result.stderr.str()
    output = result.stdout.str() + result.stderr.str()
    assert fragment in output and "Traceback" not in output
