"""The pytest plugin's cluster options, tested the way pytest tests itself (pytester)."""

from __future__ import annotations

import json
from xml.etree import ElementTree

import pytest
from serving import pytest_subprocess

from gpuconf.nodes import NodeView

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
    result = pytest_subprocess(pytester, "-p", "gpuconf.plugin", "--simulate", "t4-timeslicing")
    result.assert_outcomes(passed=1)


NO_CLUSTER = "gpuconf: no cluster to test: give --kubeconfig PATH or --simulate PROFILE"


def test_a_suite_without_a_cluster_ends_with_exit_status_10_not_a_green_run_of_skips(pytester: pytest.Pytester,
                                                                                      monkeypatch):
    """A test that asks for the cluster, outside suites/: the run ends once it is collected (HOME is
    pytester's empty directory)."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest("-p", "gpuconf.plugin", "-rs")
    assert result.ret == 10
    result.stderr.fnmatch_lines([f"{NO_CLUSTER} (neither $KUBECONFIG nor ~/.kube/config names a kubeconfig, and "
                                 "this is not a pod with a service account token)"])
    result.assert_outcomes()


def test_the_projects_own_tests_never_open_the_cluster_the_environment_names(pytester: pytest.Pytester,
                                                                             monkeypatch):
    """$KUBECONFIG names a cluster that does not answer: a run of tests outside suites/ that ask for no
    cluster passes, connects nowhere and writes no reports; one that asks for the cluster is told that
    only a run of suites/ takes it from the environment."""
    _kubeconfig(pytester.path / "kc", "http://127.0.0.1:9")
    monkeypatch.setenv("KUBECONFIG", str(pytester.path / "kc"))
    pytester.makepyfile(test_own="def test_own():\n    pass\n")
    result = pytester.runpytest("-p", "gpuconf.plugin")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "reports").exists()
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest("-p", "gpuconf.plugin", "test_suite.py")
    assert result.ret == 10
    result.stderr.fnmatch_lines([f"{NO_CLUSTER} (the run's test paths are not in a suites/ directory*"])


@pytest.fixture(scope="module")
def served_h100(tmp_path_factory: pytest.TempPathFactory):
    from serving import serve

    with serve(tmp_path_factory.mktemp("served"), "healthy-h100") as served:
        yield served


def test_a_run_of_suites_finds_its_cluster_as_kubectl_does(pytester: pytest.Pytester, monkeypatch, served_h100):
    """No --kubeconfig: $KUBECONFIG, else ~/.kube/config; the reports say which (HOME: pytester's
    directory)."""
    suites = pytester.mkdir("suites")
    (suites / "test_suite.py").write_text("def test_node(gpu_node):\n    pass\n")
    monkeypatch.setenv("KUBECONFIG", str(served_h100.kubeconfig))
    result = pytest_subprocess(pytester, "-p", "gpuconf.plugin", "suites", "-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=2)
    doc = json.loads((pytester.path / "reports" / "latest" / "report.json").read_text())["extra"]["gpuconf"]
    assert doc["provenance"] == f"kubeconfig:$KUBECONFIG={served_h100.kubeconfig}"
    monkeypatch.delenv("KUBECONFIG")
    (pytester.path / ".kube").mkdir()
    (pytester.path / ".kube" / "config").write_bytes(served_h100.kubeconfig.read_bytes())
    result = pytest_subprocess(pytester, "-p", "gpuconf.plugin", "suites", "-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=2)
    doc = json.loads((pytester.path / "reports" / "latest" / "report.json").read_text())["extra"]["gpuconf"]
    assert doc["provenance"] == "kubeconfig:~/.kube/config"


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


def test_a_run_that_cannot_start_writes_every_report_saying_why(pytester: pytest.Pytester):
    """Each way a run cannot start, with its line and status, is in tests/test_bad_input.py; here the
    four reports of one of them."""
    pytester.makepyfile(test_suite="def test_node(gpu_node):\n    pass\n")
    kubeconfig = pytester.path / "kubeconfig"
    _kubeconfig(kubeconfig, "http://127.0.0.1:9")
    result = pytest_subprocess(pytester, "-p", "gpuconf.plugin", "--kubeconfig", str(kubeconfig))
    fragment, status = "cannot reach the API server", 11
    assert result.ret == status, result.stdout.str() + result.stderr.str()
    reports = pytester.path / "reports" / "latest"  # the run's own directory (no --report-dir)
    doc = json.loads((reports / "report.json").read_text())["extra"]["gpuconf"]
    assert fragment in doc["error"] and doc["exit_status"] == status and doc["provenance"] == f"kubeconfig:{kubeconfig}"
    for name in ("report.md", "report.html"):
        assert "NOT STARTED" in (reports / name).read_text()
    junit = ElementTree.parse(reports / "junit.xml").getroot()
    (error,) = junit.iter("error")
    assert fragment in error.get("message", "") and error.get("type") == f"exit status {status}"


OPTIONS_SUITE = """
import pytest
from gpuconf.kit import cuda_probe_pod, run_context

def test_node(gpu_node):
    pass

def test_probe_pods_follow_the_options(request, gpu_cluster):
    pod = cuda_probe_pod(request.config, name="p", check="smoke", node="x")
    image = pod["spec"]["containers"][0]["image"]
    assert image.startswith("registry.example.com/mirror/gpuconf/cuda-probe:"), image
    assert "initContainers" not in pod["spec"]  # registry mode: no compile step
    assert run_context(request.config).namespace == pod["metadata"]["namespace"] == "default"
    # --prepare-timeout reaches every campaign through the run's context (7 in the first run, else 20)
    assert run_context(request.config).prepare_budget_s == request.config.getoption("prepare_timeout")

@pytest.mark.disruptive
def test_disruptive():
    pass
"""


def test_node_selector_registry_namespace_and_disruptive(pytester: pytest.Pytester):
    pytester.makepyfile(test_suite=OPTIONS_SUITE)
    result = pytest_subprocess(pytester,
        "-p", "gpuconf.plugin", "--simulate", "multi-pool", "--node-selector", "nvidia.com/gpu.machine=sim-l40s", "-v",
        "--registry", "registry.example.com/mirror", "--namespace", "default", "--prepare-timeout", "7", "-rs")
    result.stdout.fnmatch_lines(["*test_node?l40s-0? PASSED*", "*test_node?l40s-1? PASSED*",
                                 "*test_disruptive SKIPPED (disruptive (changes node sta*",
                                 "(1 skipped as not applicable here or not asked for: the reports list them)"])
    assert "h100" not in result.stdout.str().split("short test summary")[0].replace("multi-pool", "")
    result.assert_outcomes(passed=3, skipped=1)
    again = pytest_subprocess(pytester, "-p", "gpuconf.plugin", "--simulate", "multi-pool", "--allow-disruptive",
                              "--registry", "registry.example.com/mirror", "--namespace", "default",
                              "--node-selector", "nvidia.com/gpu.machine=sim-l40s")
    again.assert_outcomes(passed=4)


def test_a_failing_verdict_carries_the_diagnosis_of_its_evidence():
    from gpuconf.kit import judge
    from gpuconf.verdict import failed

    verdict = failed("smoke.vector-add-every-gpu", "h100-0", "CUDA could not start in the probe pod",
                     observed="cudaErrorSystemDriverMismatch (803)",
                     evidence=("CUDA init failed: cudaFree(0) returned 803 cudaErrorSystemDriverMismatch",))
    recorded: list[tuple[str, str]] = []
    with pytest.raises(pytest.fail.Exception) as info:
        judge(verdict, lambda k, v: recorded.append((k, v)))
    assert ("gpuconf.diagnosis", "cuda-system-driver-mismatch") in recorded
    assert "\n  diagnosis: CUDA error 803: the libcuda in use does not match the kernel driver: " in str(info.value)


@pytest.mark.parametrize("native,probe", [("13.0", "13.0.2"), ("13.4", "13.2.0"), ("12.8", "12.9.1"),
                                          ("12.9", "12.9.1"), (None, "13.0.2")])
def test_the_whole_node_probe_needs_no_forward_compatibility(native, probe):
    from gpuconf.kit import native_probe_cuda

    labels = {}
    if native:
        labels["nvidia.com/cuda.runtime.major"], labels["nvidia.com/cuda.runtime.minor"] = native.split(".")
    assert native_probe_cuda(NodeView.of("n", labels)) == probe


def test_without_gfd_the_whole_node_probe_reads_the_drivers_cuda_from_the_resource_slice():
    from gpuconf.kit import native_probe_cuda

    slice_ = {"spec": {"nodeName": "n", "driver": "gpu.nvidia.com", "pool": {"name": "n"}, "devices": [
        {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}, "cudaDriverVersion": {"version": "12.8.0"}}}]}}
    assert native_probe_cuda(NodeView.of("n", slices=[slice_])) == "12.9.1"  # not the 13.0 default


def test_a_check_marker_naming_no_catalogued_check_is_a_usage_error(pytester: pytest.Pytester):
    pytester.makepyfile(test_suite="import pytest\n\n@pytest.mark.check('smoke.typo')\ndef test_x():\n    pass\n")
    result = pytest_subprocess(pytester, "-p", "gpuconf.plugin")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "names no check of gpuconf/data/checks.yaml" in result.stderr.str()


def test_an_interrupt_in_a_frame_without_a_line_number_is_still_reported_as_an_interrupt():
    from _pytest._code.code import Traceback

    from gpuconf.plugin.guards import pytest_keyboard_interrupt

    class NoLine:  # what a traceback entry is for a frame whose tb_lineno is None
        @property
        def lineno(self) -> int:
            raise TypeError("unsupported operand type(s) for -: 'NoneType' and 'int'")

    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        excinfo = pytest.ExceptionInfo.from_current()
    real = list(excinfo.traceback)
    excinfo.traceback = Traceback([*real, NoLine()])  # type: ignore[list-item]
    pytest_keyboard_interrupt(excinfo)
    assert list(excinfo.traceback) == real
    assert "KeyboardInterrupt" in str(excinfo.getrepr())
