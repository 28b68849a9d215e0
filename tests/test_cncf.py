"""CNCF AI conformance evidence (--cncf-evidence): the requirement table agrees with the suites'
@pytest.mark.cncf markers and the upstream v1.37 template, each requirement's status follows from its
checks, and a simulated run writes junit.xml, results.json, e2e.log (in the reference suite's shapes,
tests/cncf_shapes.py), PRODUCT.fragment.yaml and gpuconf-cncf.json that say pass, or fail when a fault
breaks isolation."""

from __future__ import annotations

import ast
import json
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from cncf_shapes import fragment_problems, read_stream, read_verbose, template
from serving import pytest_subprocess

from gpuconf.paths import project_root
from gpuconf.report import cncf
from gpuconf.report.model import CheckResult, RunRecord
from gpuconf.verdict import checks

pytest_plugins = ["pytester"]

ROOT = project_root()
SECURE = "secure_accelerator_access"
#: The reference suite's test names (kubernetes-sigs/ai-conformance test/README.md), by requirement.
UPSTREAM = {
    SECURE: "TestSecureAcceleratorAccess",
    "gang_scheduling": "TestGangScheduling",
    "cluster_autoscaling": "TestAcceleratorClusterAutoscaling",
    "robust_controller": "TestRobustCRDControllerOperation",
    "workload_sandboxing": "TestWorkloadSandboxing",
    "driver_runtime_management": "TestAcceleratorDriverRuntimeManagement",
    "accelerator_metrics": "TestAcceleratorPerformanceMetrics",
}
V137 = {"driver_runtime_management": "SHOULD", "gpu_sharing": "SHOULD", "virtualized_accelerator": "SHOULD",
        "ai_inference": "MUST", "advanced_inference_ingress": "SHOULD", "high_performance_networking": "SHOULD",
        "disaggregated_inference": "SHOULD", "gang_scheduling": "MUST", "cluster_autoscaling": "MUST",
        "pod_autoscaling": "MUST", "accelerator_metrics": "MUST", "ai_service_metrics": "MUST",
        SECURE: "MUST", "workload_sandboxing": "SHOULD", "robust_controller": "MUST"}


def suite_markers() -> set[tuple[str, str]]:
    """(requirement, check) for every suite test carrying @pytest.mark.cncf."""
    pairs = set()
    for path in sorted((ROOT / "suites").glob("test_*.py")):
        for fn in ast.parse(path.read_text()).body:
            if not isinstance(fn, ast.FunctionDef):
                continue
            calls = [d for d in fn.decorator_list if isinstance(d, ast.Call)]
            marks = {name: [ast.literal_eval(d.args[0]) for d in calls if ast.unparse(d.func).endswith(name)]
                     for name in ("mark.check", "mark.cncf")}
            pairs |= {(req, check) for req in marks["mark.cncf"] for check in marks["mark.check"]}
    return pairs


# --- the table ---------------------------------------------------------------------------------

def test_the_table_lists_every_v1_37_requirement_with_its_level_and_upstream_test():
    current = {r.id: r for r in cncf.requirements() if not r.retired_in}
    assert {k: r.level for k, r in current.items()} == V137
    assert {k: r.upstream_test for k, r in current.items() if r.upstream_test} == UPSTREAM
    assert current[SECURE].kar == "KAR-0049" and current["driver_runtime_management"].kar == "KAR-0001"


def test_the_table_has_the_templates_categories_descriptions_and_levels_in_its_order():
    """tests/data/real/cncf/AIConformance-1.37.yaml is docs/AIConformance-1.37.yaml upstream."""
    upstream = [(category, r["id"], r["description"], r["level"])
                for category, reqs in template()["spec"].items() for r in reqs]
    assert [(r.area, r.id, r.description, r.level) for r in cncf.requirements() if not r.retired_in] == upstream


def test_driver_runtime_management_is_marked_as_becoming_a_must_in_1_38_with_its_source():
    marked = {r.id: (r.must_in, r.must_source) for r in cncf.requirements() if r.must_in}
    assert list(marked) == ["driver_runtime_management"]
    version, source = marked["driver_runtime_management"]
    assert version == "1.38"
    assert source and source.startswith("https://github.com/kubernetes-sigs/ai-conformance/issues/1 ")


def test_dra_support_is_listed_as_retired_in_1_36():
    (dra,) = [r for r in cncf.requirements() if r.retired_in]
    assert (dra.id, dra.retired_in, dra.level) == ("dra_support", "1.36", "MUST")


def test_accelerator_metrics_is_covered_by_the_metrics_suite():
    (metrics,) = [r for r in cncf.requirements() if r.id == "accelerator_metrics"]
    assert metrics.checks == ("metrics.gpu-metrics-present", "metrics.recommended-metrics-present")
    assert metrics.not_covered is None


def test_the_suites_markers_and_the_table_name_the_same_requirement_check_pairs():
    table = {(r.id, c) for r in cncf.requirements() for c in r.checks}
    assert suite_markers() == table


def test_every_check_the_table_names_is_catalogued():
    assert {c for r in cncf.requirements() for c in r.checks} <= set(checks())


def test_an_unknown_requirement_on_a_marker_is_a_usage_error(pytester: pytest.Pytester):
    pytester.makepyfile(test_x="""
import pytest

@pytest.mark.cncf("gpu_magic")
@pytest.mark.check("smoke.vector-add-every-gpu")
def test_x():
    pass
""")
    result = pytester.runpytest("-p", "gpuconf.plugin")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "@pytest.mark.cncf('gpu_magic',) names no requirement" in result.stderr.str()


# --- statuses ----------------------------------------------------------------------------------

def result(check: str, outcome: str, node: str = "n0", message: str | None = None) -> CheckResult:
    return CheckResult(check, node, outcome, f"suites/x.py::t[{node}]", 0.5, message=message)


def status_of(results: list[tuple[str, CheckResult]], requirement: str, **options: object) -> cncf.RequirementStatus:
    evidence = [cncf.CncfResult((req,), r) for req, r in results]
    statuses = {s.requirement.id: s for s in cncf.evaluate(evidence, options=options)}
    return statuses[requirement]


def test_a_requirement_whose_checks_all_pass_passes_and_names_checks_and_nodes():
    s = status_of([(SECURE, result("isolation.no-request-sees-no-gpu", "pass", "n0")),
                   (SECURE, result("isolation.sees-only-allocated", "pass", "n1")),
                   (SECURE, result("isolation.sees-only-allocated", "not-tested", "n2"))], SECURE)
    assert (s.status, s.reason) == ("pass", "2 checks passed on 2 node(s)")
    assert s.checks == ["isolation.no-request-sees-no-gpu", "isolation.sees-only-allocated"]
    assert s.nodes == ["n0", "n1", "n2"]


def test_one_failing_or_degraded_check_fails_the_requirement():
    s = status_of([(SECURE, result("isolation.no-request-sees-no-gpu", "pass")),
                   (SECURE, result("isolation.envvar-without-request-gets-no-gpu", "fail", "n3"))], SECURE)
    assert (s.status, s.reason) == ("fail", "1 of 2 checks failed: isolation.envvar-without-request-gets-no-gpu on n3")
    degraded = status_of([("gpu_sharing", result("sharing.replicas-match-config", "degraded"))], "gpu_sharing")
    assert degraded.status == "fail"


def test_a_requirement_failing_on_one_node_is_implemented_there_with_the_failing_node_named():
    """One broken node is a finding to fix, not a capability the platform lacks (issue 36)."""
    s = status_of([("driver_runtime_management", result("smoke.vector-add-every-gpu", "fail", "h100-0")),
                   ("driver_runtime_management", result("smoke.vector-add-every-gpu", "pass", "h100-1")),
                   ("driver_runtime_management", result("driver.nvml-initializes", "pass", "h100-0"))],
                  "driver_runtime_management")
    assert s.status == "fail"  # its Go test fails, as a failing subtest fails its parent
    assert (s.product_status, s.failing, s.passed_nowhere) == (
        "Implemented", {"h100-0": ["smoke.vector-add-every-gpu"]}, [])
    assert s.product_note() == ("Implemented; failing on h100-0: smoke.vector-add-every-gpu (each of these checks "
                                "passed on other nodes: nodes to fix before submitting, not a capability the "
                                "platform lacks)")


def test_a_check_that_passed_on_no_node_makes_its_requirement_not_implemented():
    everywhere = status_of([(SECURE, result("isolation.no-request-sees-no-gpu", "pass", "n0")),
                            (SECURE, result("isolation.envvar-without-request-gets-no-gpu", "fail", "n0")),
                            (SECURE, result("isolation.envvar-without-request-gets-no-gpu", "degraded", "n1")),
                            (SECURE, result("isolation.envvar-without-request-gets-no-gpu", "not-tested", "n2"))],
                           SECURE)
    assert everywhere.product_status == "Not Implemented"
    assert everywhere.product_note() == (
        "Not Implemented: isolation.envvar-without-request-gets-no-gpu passed on no node; failing on n0: "
        "isolation.envvar-without-request-gets-no-gpu; on n1: isolation.envvar-without-request-gets-no-gpu")
    gang = status_of([("gang_scheduling", result("nccl.multinode-completes", "fail", None))], "gang_scheduling",
                     **{"--kueue-queue": "team-a"})
    assert (gang.product_status, gang.product_note()) == (
        "Not Implemented", "Not Implemented: nccl.multinode-completes passed on no node; failing cluster-wide: "
        "nccl.multinode-completes")


def test_a_requirement_that_passed_is_implemented_and_one_not_proven_is_left_blank():
    passed = status_of([(SECURE, result("isolation.no-request-sees-no-gpu", "pass"))], SECURE)
    assert (passed.product_status, passed.product_note()) == ("Implemented", None)
    unproven = status_of([(SECURE, result("isolation.no-request-sees-no-gpu", "not-tested"))], SECURE)
    assert (unproven.product_status, unproven.product_note()) == ("", None)
    # a failing check is no evidence either where the option it needs was not given
    job = status_of([("gang_scheduling", result("nccl.multinode-completes", "fail", None))], "gang_scheduling")
    assert (job.product_status, job.product_note()) == ("", None)


def test_the_notes_name_ten_failing_nodes_and_count_the_rest():
    results = [(SECURE, result("isolation.no-request-sees-no-gpu", "fail", f"n{i:02d}")) for i in range(12)]
    s = status_of(results + [(SECURE, result("isolation.no-request-sees-no-gpu", "pass", "ok"))], SECURE)
    note = s.product_note() or ""
    assert "on n09: " in note and "n10" not in note
    assert note.endswith("; and on 2 more node(s) (gpuconf-cncf.json names them) (each of these checks passed on "
                         "other nodes: nodes to fix before submitting, not a capability the platform lacks)")
    assert len(s.failing) == 12


def test_a_requirement_none_of_whose_checks_ran_is_skipped_with_the_reason():
    s = status_of([(SECURE, result("isolation.no-request-sees-no-gpu", "not-tested", message="no nodes"))], SECURE)
    assert (s.status, s.reason) == ("skip", "no check ran: no nodes")
    unselected = status_of([], "gpu_sharing")
    assert unselected.status == "skip" and unselected.reason.startswith("not run: this run selected none of its")


def test_a_requirement_gpuconf_does_not_cover_is_skipped_as_not_covered():
    s = status_of([], "pod_autoscaling")
    assert (s.status, s.reason) == ("skip", "not covered: gpuconf does not test HPA on custom metrics")


def test_the_multinode_job_is_gang_evidence_only_with_a_kueue_queue():
    job = [("gang_scheduling", result("nccl.multinode-completes", "pass"))]
    without = status_of(job, "gang_scheduling")
    assert without.status == "skip" and "without --kueue-queue" in without.reason
    assert status_of(job, "gang_scheduling", **{"--kueue-queue": "team-a"}).status == "pass"


def test_a_run_that_could_not_start_skips_every_requirement_with_its_error():
    statuses = cncf.evaluate([], options={}, error="cannot reach the API server")
    assert {s.status for s in statuses} == {"skip"}
    assert all(s.reason == "the run could not start: cannot reach the API server" for s in statuses)


# --- the files ---------------------------------------------------------------------------------

RUN = RunRecord("kubeconfig:kc", 1_764_000_000.0, 1_764_000_010.0, 1, run_id="r1", server_version="v1.37.1")
TOP = {r: UPSTREAM.get(r, "Test" + "".join(p.capitalize() for p in r.split("_"))) for r in V137}


def test_junit_has_a_parent_per_current_requirement_named_after_the_upstream_test_and_a_subtest_per_check_and_node(
        tmp_path: Path):
    evidence = [cncf.CncfResult((SECURE,), result("isolation.no-request-sees-no-gpu", "fail", "n0", "leaked"))]
    cncf.write_evidence(RUN, evidence, tmp_path, options={})
    root = ET.parse(tmp_path / "junit.xml").getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert set(cases) == set(TOP.values()) | {  # no test for the retired dra_support
        "TestSecureAcceleratorAccess/isolation.no-request-sees-no-gpu",
        "TestSecureAcceleratorAccess/isolation.no-request-sees-no-gpu/n0"}
    failure = cases["TestSecureAcceleratorAccess/isolation.no-request-sees-no-gpu/n0"].find("failure")
    assert failure is not None and "suites/x.py::t[n0]: fail: leaked" in (failure.text or "")
    parent = cases["TestSecureAcceleratorAccess"].find("failure")
    assert parent is not None
    assert "FAIL: 1 of 1 checks failed: isolation.no-request-sees-no-gpu on n0" in (parent.text or "")
    (suite,) = root.iter("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("17", "3", "14")


def test_junit_still_parses_when_a_check_message_holds_control_characters(tmp_path: Path):
    """A probe's output can carry terminal escapes; XML 1.0 cannot hold them, so they are written as #x1B."""
    message = "nvidia-smi: \x1b[31mNo devices were found\x1b[0m"
    evidence = [cncf.CncfResult((SECURE,), result("isolation.no-request-sees-no-gpu", "fail", "n0", message))]
    cncf.write_evidence(RUN, evidence, tmp_path, options={})
    (case,) = [c for c in ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")
               if c.get("name") == "TestSecureAcceleratorAccess/isolation.no-request-sees-no-gpu/n0"]
    assert "#x1B[31mNo devices were found#x1B[0m" in (case.findtext("failure") or "")


def test_gpuconf_json_lists_each_requirement_with_level_status_checks_nodes_and_go_tests(tmp_path: Path):
    evidence = [cncf.CncfResult(("dra_support",), result("dra.selector-steers-scheduling", "pass", "n0")),
                cncf.CncfResult((SECURE,), result("isolation.sees-only-allocated", "pass", "n1"))]
    cncf.write_evidence(RUN, evidence, tmp_path, options={})
    doc = json.loads((tmp_path / "gpuconf-cncf.json").read_text())
    assert (doc["schema"], doc["version"], doc["package"]) == ("gpuconf.cncf-evidence/2", "1.37", "gpuconf/suites")
    assert [r["id"] for r in doc["requirements"]] == list(V137)
    (secure,) = [r for r in doc["requirements"] if r["id"] == SECURE]
    assert secure["results"] == [{"check": "isolation.sees-only-allocated", "node": "n1", "outcome": "pass",
                                  "test": "suites/x.py::t[n1]",
                                  "go_test": "TestSecureAcceleratorAccess/isolation.sees-only-allocated/n1"}]
    (drm,) = [r for r in doc["requirements"] if r["id"] == "driver_runtime_management"]
    assert drm["must_in"] == "1.38" and drm["must_in_source"].startswith("https://github.com/kubernetes-sigs/")
    (retired,) = doc["retired"]
    assert retired | {"results": None} == {
        "id": "dra_support", "area": "accelerators", "level": "MUST", "must_in": None, "must_in_source": None,
        "status": "pass", "reason": "1 checks passed on 1 node(s)", "product_status": "Implemented",
        "product_note": None, "failing": {}, "testcase": "TestDraSupport",
        "upstream_test": None, "kar": None, "checks": ["dra.selector-steers-scheduling"], "nodes": ["n0"],
        "removed_in": "1.36", "results": None}
    assert retired["results"][0]["go_test"] is None  # not a v1.37 test


SIMULATED = RunRecord("simulated:healthy-h100", 1_764_000_000.0, 1_764_000_010.0, 0, run_id="r1",
                      server_version="v1.34.0")
BANNER = ("SIMULATED: evidence from a simulated cluster (simulated:healthy-h100), not from a product: no evidence "
          "for a CNCF submission")
REFUSED = ("v1.37/acme is a submission's layout (v<major>.<minor>/<product>/): a simulated run's evidence is never "
           "written there; give a directory outside it")


def test_a_simulated_runs_evidence_is_marked_simulated_in_every_file(tmp_path: Path):
    evidence = [cncf.CncfResult((SECURE,), result("isolation.no-request-sees-no-gpu", "pass"))]
    cncf.write_evidence(SIMULATED, evidence, tmp_path / "sim", options={})
    assert (tmp_path / "sim" / "e2e.log").read_text().startswith(f"gpuconf: {BANNER}\n")
    assert read_stream((tmp_path / "sim" / "results.json").read_text()).output[""].startswith(f"gpuconf: {BANNER}\n")
    assert (tmp_path / "sim" / "PRODUCT.fragment.yaml").read_text().startswith(f"# {BANNER}\n")
    doc = json.loads((tmp_path / "sim" / "gpuconf-cncf.json").read_text())
    assert (doc["simulated"], doc["notes"][0]) == (True, BANNER)
    assert cncf.terminal_note(SIMULATED, tmp_path / "sim", "sim") == (
        "gpuconf: the CNCF evidence in sim is from a simulated cluster: marked SIMULATED, it is no evidence for a "
        "submission")
    cncf.write_evidence(RUN, evidence, tmp_path / "real", options={})
    assert not any("SIMULATED" in f.read_text() for f in (tmp_path / "real").iterdir())
    assert json.loads((tmp_path / "real" / "gpuconf-cncf.json").read_text())["simulated"] is False


def test_a_simulated_runs_evidence_is_never_written_into_a_submission_layout(tmp_path: Path):
    from gpuconf.errors import UsageError
    from gpuconf.report.merge import write_merged

    layout = tmp_path / "v1.37" / "acme"
    with pytest.raises(UsageError) as refused:
        cncf.write_evidence(SIMULATED, [], layout, options={})
    assert str(refused.value) == f"--cncf-evidence {layout}: {REFUSED}"
    assert not layout.exists()
    # a merge of simulated shards: refused before anything is written
    with pytest.raises(UsageError) as merged:
        write_merged(SIMULATED, [], tmp_path / "merged", cncf_evidence=layout)
    assert str(merged.value) == f"gpuconf report merge: --cncf-evidence {layout}: {REFUSED}"
    assert not (tmp_path / "merged").exists() and not layout.exists()
    cncf.write_evidence(replace(SIMULATED, provenance="kubeconfig:kc"), [], layout, options={})  # a real run may
    assert (layout / "PRODUCT.fragment.yaml").is_file()


def test_a_simulated_run_refuses_a_submission_layout_at_startup(pytester: pytest.Pytester):
    pytester.makepyfile(test_suite="def test_x():\n    pass\n")
    result = pytester.runpytest("-p", "gpuconf.plugin", "--simulate", "healthy-h100", "--cncf-evidence", "v1.37/acme")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--cncf-evidence v1.37/acme: {REFUSED}" in result.stderr.str()
    assert not (pytester.path / "v1.37").exists()


def test_a_simulated_cluster_serves_its_profiles_kubernetes_version():
    from gpuconf.sim.cluster import SimulatedCluster

    assert SimulatedCluster("h200-gpucluster").server.version["gitVersion"] == "v1.36.0"  # kubernetes: "1.36"
    assert SimulatedCluster("healthy-h100").server.version["gitVersion"] == "v1.34.0"


# --- a simulated run ---------------------------------------------------------------------------

def isolation_run(pytester: pytest.Pytester, profile: str, suite: str = "test_isolation.py"
                  ) -> tuple[pytest.RunResult, Path]:
    suites = pytester.mkdir("suites")
    (suites / suite).write_text((ROOT / "suites" / suite).read_text())
    evidence = pytester.path / "evidence"
    result = pytest_subprocess(pytester, "suites", "-p", "gpuconf.plugin", "--simulate", profile,
                               "--cncf-evidence", "evidence", "-p", "no:cacheprovider")
    return result, evidence


def find_case(evidence: Path, name: str) -> ET.Element:
    (case,) = [c for c in ET.parse(evidence / "junit.xml").getroot().iter("testcase") if c.get("name") == name]
    return case


def shapes_hold(evidence: Path) -> tuple[dict[str, str], str]:
    """The files pass the shape readers and agree; the verdicts by test, and the package's."""
    stream = read_stream((evidence / "results.json").read_text())
    verbose = read_verbose((evidence / "e2e.log").read_text())
    assert stream.problems == [] and verbose.problems == []
    assert stream.verdicts == verbose.verdicts and stream.package_verdict == verbose.package_verdict
    assert fragment_problems(yaml.safe_load((evidence / "PRODUCT.fragment.yaml").read_text())) == []
    assert stream.package_verdict is not None
    return stream.verdicts, stream.package_verdict


def test_a_healthy_simulated_isolation_run_proves_secure_accelerator_access(pytester: pytest.Pytester):
    result, evidence = isolation_run(pytester, "healthy-h100")
    assert result.ret == 18, result.stdout.str()  # PARTIAL: one suite of the sign-off's scope, nothing failed
    case = find_case(evidence, "TestSecureAcceleratorAccess")
    assert case.find("failure") is None and case.find("skipped") is None
    verdicts, package = shapes_hold(evidence)
    secure = {k: v for k, v in verdicts.items() if k.startswith("TestSecureAcceleratorAccess/")}
    assert len(secure) == 15 and set(secure.values()) == {"pass"}  # 5 checks, each on h100-0 and h100-1
    assert verdicts["TestSecureAcceleratorAccess/isolation.envvar-without-request-gets-no-gpu/h100-1"] == "pass"
    assert package == "pass"
    doc = json.loads((evidence / "gpuconf-cncf.json").read_text())
    (secure_doc,) = [r for r in doc["requirements"] if r["id"] == SECURE]
    assert (secure_doc["status"], secure_doc["level"], secure_doc["nodes"]) == ("pass", "MUST", ["h100-0", "h100-1"])
    log = (evidence / "e2e.log").read_text()
    assert "    PASS: 10 checks passed on 2 node(s)\n--- PASS: TestSecureAcceleratorAccess (" in log
    fragment = yaml.safe_load((evidence / "PRODUCT.fragment.yaml").read_text())
    (secure_req,) = [r for r in fragment["spec"]["security"] if r["id"] == SECURE]
    assert secure_req["status"] == "Implemented"
    # links relative to the evidence directory, which is not in a submission's layout
    assert secure_req["evidence"][0] == "file://junit.xml#TestSecureAcceleratorAccess"
    # the simulated cluster's own version (its /version, read with the inventory), not the checklist's
    assert fragment["metadata"]["kubernetesVersion"] == "v1.34"
    assert (doc["server_version"], doc["kubernetes_version"], doc["simulated"]) == ("v1.34.0", "v1.34", True)
    assert log.startswith("gpuconf: SIMULATED: evidence from a simulated cluster (simulated:healthy-h100)")
    assert "gpuconf: the cluster runs Kubernetes v1.34.0, and this evidence is for the v1.37 checklist" in log
    assert ("gpuconf: the CNCF evidence in evidence is from a simulated cluster: marked SIMULATED, it is no evidence "
            "for a submission") in result.stderr.str()


def test_the_envvar_leak_fault_fails_secure_accelerator_access(pytester: pytest.Pytester):
    text = (ROOT / "gpuconf" / "data" / "sim_profiles" / "healthy-h100.yaml").read_text()
    profile = pytester.path / "leak.yaml"
    fault = "\nfaults:\n  - {id: envvar-leak, pool: h100, node: 0}\n"
    profile.write_text(re.sub(r"^faults:.*$", "", text, flags=re.M) + fault)
    result, evidence = isolation_run(pytester, str(profile))
    assert result.ret == 1, result.stdout.str()
    failure = find_case(evidence, "TestSecureAcceleratorAccess").find("failure")
    assert failure is not None
    # the fault's check alone, on h100-0 only: the checks the same leak breaks are NOT TESTED, blocked by it
    why = "    FAIL: 1 of 10 checks failed: isolation.envvar-without-request-gets-no-gpu on h100-0\n"
    assert why in (failure.text or "")
    leaf = find_case(evidence, "TestSecureAcceleratorAccess/isolation.envvar-without-request-gets-no-gpu/h100-0")
    assert "NVIDIA_VISIBLE_DEVICES=all sees 8 GPUs" in (leaf.findtext("failure") or "")
    verdicts, package = shapes_hold(evidence)
    assert {k for k, v in verdicts.items() if v == "fail"} == {
        "TestSecureAcceleratorAccess", "TestSecureAcceleratorAccess/isolation.envvar-without-request-gets-no-gpu",
        "TestSecureAcceleratorAccess/isolation.envvar-without-request-gets-no-gpu/h100-0"}
    assert package == "fail"
    assert "\n        --- FAIL: TestSecureAcceleratorAccess/isolation.envvar-without-request-gets-no-gpu/h100-0 (" in (
        evidence / "e2e.log").read_text()
    doc = json.loads((evidence / "gpuconf-cncf.json").read_text())
    assert [r["status"] for r in doc["requirements"] if r["id"] == SECURE] == ["fail"]
    fragment = yaml.safe_load((evidence / "PRODUCT.fragment.yaml").read_text())
    # the leak is h100-0's: h100-1 passed every check, so the platform implements it and h100-0 is to fix
    (secure_req,) = [r for r in fragment["spec"]["security"] if r["id"] == SECURE]
    assert secure_req["status"] == "Implemented"
    assert secure_req["notes"].startswith("Implemented; failing on h100-0: isolation.envvar-without-request-gets-no-gpu"
                                          " (each of these checks passed on other nodes")
    assert "    PRODUCT.yaml: Implemented; failing on h100-0: " in (failure.text or "")
    (secure_doc,) = [r for r in doc["requirements"] if r["id"] == SECURE]
    assert (secure_doc["product_status"], secure_doc["failing"]) == (
        "Implemented", {"h100-0": ["isolation.envvar-without-request-gets-no-gpu"]})


def test_a_driver_skewed_node_fails_driver_runtime_management_which_becomes_a_must(pytester: pytest.Pytester):
    text = (ROOT / "gpuconf" / "data" / "sim_profiles" / "healthy-h100.yaml").read_text()
    profile = pytester.path / "skew.yaml"
    profile.write_text(re.sub(r"^faults:.*$", "", text, flags=re.M)
                       + "\nfaults:\n  - {id: driver-skew, pool: h100, node: 1}\n")
    result, evidence = isolation_run(pytester, str(profile), "test_inventory.py")
    assert result.ret == 17, result.stdout.str()  # DEGRADED: nothing failed outright
    verdicts, package = shapes_hold(evidence)
    drm = "TestAcceleratorDriverRuntimeManagement"
    assert {k for k, v in verdicts.items() if v == "fail" and k.startswith(drm)} == {
        drm, f"{drm}/driver.version-uniform-in-pool", f"{drm}/driver.version-uniform-in-pool/h100-1"}
    assert verdicts[f"{drm}/driver.version-uniform-in-pool/h100-0"] == "pass" and package == "fail"
    leaf = find_case(evidence, f"{drm}/driver.version-uniform-in-pool/h100-1").findtext("failure") or ""
    assert "570.211.01" in leaf
    fragment = yaml.safe_load((evidence / "PRODUCT.fragment.yaml").read_text())
    (req,) = [r for r in fragment["spec"]["accelerators"] if r["id"] == "driver_runtime_management"]
    assert req["status"] == "Implemented" and "becomes a MUST in v1.38" in req["notes"]
    assert req["notes"].startswith("Implemented; failing on h100-1: driver.version-uniform-in-pool (")
    assert "gpuconf: driver_runtime_management is SHOULD in v1.37 and becomes a MUST in v1.38: " in (
        evidence / "e2e.log").read_text().split("=== RUN")[0]


def test_a_run_that_cannot_start_still_writes_the_evidence_all_skipped(pytester: pytest.Pytester):
    pytester.makepyfile(test_suite="def test_node(gpu_node):\n    pass\n")
    kubeconfig = pytester.path / "kubeconfig"
    kubeconfig.write_text("{{{ not: yaml")
    result = pytest_subprocess(pytester, "-p", "gpuconf.plugin", "--kubeconfig", str(kubeconfig),
                               "--cncf-evidence", "evidence")
    assert result.ret == 10
    doc = json.loads((pytester.path / "evidence" / "gpuconf-cncf.json").read_text())
    assert {r["status"] for r in doc["requirements"]} == {"skip"}
    assert all(r["reason"].startswith("the run could not start: ") for r in doc["requirements"])
    assert "not YAML" in doc["error"]
    assert (pytester.path / "evidence" / "e2e.log").read_text().count("the run could not start") >= 2
    verdicts, package = shapes_hold(pytester.path / "evidence")
    assert set(verdicts.values()) == {"skip"} and package == "fail"  # nothing was tested: not ok
    # a run against a real cluster, into a directory outside a submission's layout: one warning line
    assert ("gpuconf: warning: --cncf-evidence evidence is not under a v1.37/<product>/ directory: its evidence links "
            "are relative to it and must be re-made in the submission's layout") in result.stderr.lines
    fragment = yaml.safe_load((pytester.path / "evidence" / "PRODUCT.fragment.yaml").read_text())
    assert fragment["metadata"]["kubernetesVersion"] == "[Kubernetes Version]"
    assert doc["notes"][0].startswith("kubernetesVersion is left as [Kubernetes Version]: the cluster's Kubernetes "
                                      "version is unknown (the run could not start)")


def test_the_evidence_says_which_gpu_nodes_were_tested(tmp_path: Path):
    """Issue 25: each file names the nodes left out and why; a requirement is still judged on its checks."""
    from gpuconf.report.model import CORDONED, Coverage, UntestedNode

    why = "n1 is cordoned (spec.unschedulable): give --include-cordoned to test it"
    run = replace(RUN, coverage=Coverage(("n0", "n1"), (UntestedNode("n1", CORDONED, why),)))
    evidence = [cncf.CncfResult((SECURE,), result("isolation.no-request-sees-no-gpu", "pass", "n0"))]
    statuses = cncf.write_evidence(run, evidence, tmp_path, options={})
    assert [s.status for s in statuses if s.requirement.id == SECURE] == ["pass"]
    log = (tmp_path / "e2e.log").read_text().splitlines()
    assert log[1:3] == ["gpuconf: coverage: 1 of 2 GPU nodes tested; 1 cordoned",
                        f"gpuconf: not tested: n1 (cordoned): {why}"]
    (suite,) = ET.parse(tmp_path / "junit.xml").getroot().iter("testsuite")
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["gpuconf.coverage"] == "1 of 2 GPU nodes tested; 1 cordoned"
    assert properties["gpuconf.untested.n1"] == f"cordoned: {why}"
    doc = json.loads((tmp_path / "gpuconf-cncf.json").read_text())
    assert run.coverage is not None and doc["coverage"] == run.coverage.as_json()
    stream = read_stream((tmp_path / "results.json").read_text())
    assert "gpuconf: coverage: 1 of 2 GPU nodes tested; 1 cordoned\n" in stream.output[""]
    cncf.write_evidence(RUN, evidence, tmp_path / "plain", options={})
    assert json.loads((tmp_path / "plain" / "gpuconf-cncf.json").read_text())["coverage"] is None
    assert "coverage:" not in (tmp_path / "plain" / "e2e.log").read_text()
