"""The CNCF evidence in the reference suite's shapes (issue 28): the readers in tests/cncf_shapes.py
accept a real v1.37 submission's files (tests/data/real/cncf/) and catch what breaks the shapes; gpuconf's
files pass the same readers, junit.xml read with junitparser has the attributes gotestsum writes, the
three files name the same tests with the same verdicts, and the PRODUCT.yaml fragment has the upstream
template's keys."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from cncf_shapes import (
    REAL,
    fragment_problems,
    read_stream,
    read_verbose,
    submission_errors,
    template,
)
from junitparser import Failure, JUnitXml, Skipped

from gpuconf.report import cncf, junit
from gpuconf.report.model import CheckResult, Coverage, RunRecord, UntestedNode

SECURE = "secure_accelerator_access"
GKE_JUNIT = REAL / "gke-1.37-junit.excerpt.xml"
GKE_EVENTS = REAL / "gke-1.37-results.excerpt.json"
GKE_LOG = REAL / "gke-1.37-e2e.excerpt.log"
#: A run against a real 1.37 cluster (a simulated run's evidence never goes into a v1.37/<product>/ layout).
RUN = RunRecord("kubeconfig:kc", 1_764_000_000.25, 1_764_000_010.5, 1, run_id="r1", server_version="v1.37.2")


def result(check: str, outcome: str, node: str | None = "n0", message: str | None = None,
           duration: float = 0.5) -> CheckResult:
    return CheckResult(check, node, outcome, f"suites/x.py::t[{node}]", duration, message=message)


def evidence(tmp_path: Path, results: list[tuple[str, CheckResult]], run: RunRecord = RUN,
             **options: object) -> Path:
    out = tmp_path / "v1.37" / "acme"
    cncf.write_evidence(run, [cncf.CncfResult((req,), r) for req, r in results], out, options=options)
    return out


MIXED = [(SECURE, result("isolation.no-request-sees-no-gpu", "pass", "n0")),
         (SECURE, result("isolation.no-request-sees-no-gpu", "fail", "n1", "sees 8 GPUs\nnvidia-smi -L: GPU 0")),
         (SECURE, result("isolation.sees-only-allocated", "not-tested", "n1", "blocked by the leak")),
         ("driver_runtime_management", result("driver.nvml-initializes", "pass", "n0")),
         ("driver_runtime_management", result("compat.outcome-matches-prediction", "degraded", None, "slow"))]


# --- the readers, on the real submission -------------------------------------------------------

def test_the_event_reader_accepts_the_real_submissions_results_json():
    s = read_stream(GKE_EVENTS.read_text())
    assert s.problems == []
    assert s.package == "github.com/kubernetes-sigs/ai-conformance/test" and s.package_verdict == "pass"
    assert s.verdicts["TestSecureAcceleratorAccess/PositiveAccessTest"] == "pass"
    assert s.elapsed["TestSecureAcceleratorAccess"] == 120.26
    assert s.elapsed["TestWaitForPodsRunning/returns_all_running_pods"] == 0  # a 0.00s test has "Elapsed":0


@pytest.mark.parametrize(("edit", "problem"), [
    (lambda e: {k: v for k, v in e.items() if k != "Elapsed"},
     "pass event with fields ['Time', 'Action', 'Package', 'Test']"),
    (lambda e: {"Action": e["Action"], **{k: v for k, v in e.items() if k != "Action"}}, "fields out of Go's order"),
    (lambda e: {**e, "Time": "2026-10-01 21:38:37"}, "is not RFC 3339 as Go writes it"),
    (lambda e: {**e, "Output": "x\n"}, "pass event with fields"),
], ids=["no Elapsed", "field order", "time format", "output on a verdict"])
def test_the_event_reader_catches_a_broken_verdict_event(edit, problem):
    lines = GKE_EVENTS.read_text().splitlines()
    i = next(i for i, line in enumerate(lines) if '"Action":"pass"' in line and "PositiveAccessTest" in line)
    lines[i] = json.dumps(edit(json.loads(lines[i])), separators=(",", ":"))
    assert any(problem in p for p in read_stream("\n".join(lines) + "\n").problems)


def test_the_event_reader_catches_a_test_that_never_finished_or_finished_before_its_subtests():
    lines = GKE_EVENTS.read_text().splitlines()
    dropped = [line for line in lines if not ('"Action":"pass"' in line and 'NegativeIsolationTest","Elapsed"' in line)]
    assert "never finished: ['TestSecureAcceleratorAccess/NegativeIsolationTest']" in " ".join(
        read_stream("\n".join(dropped) + "\n").problems)
    parent = next(i for i, line in enumerate(lines)
                  if line.endswith('"Test":"TestSecureAcceleratorAccess","Elapsed":120.26}'))
    sub = next(i for i, line in enumerate(lines) if '"Action":"run"' in line and "PositiveAccessTest" in line)
    early = lines[:sub + 1] + [lines[parent]] + lines[sub + 1:parent] + lines[parent + 1:]
    assert any("ended before its subtests" in p for p in read_stream("\n".join(early) + "\n").problems)


def test_the_verbose_reader_accepts_the_real_submissions_e2e_log():
    v = read_verbose(GKE_LOG.read_text())
    assert v.problems == []
    assert (v.package, v.package_verdict) == ("github.com/kubernetes-sigs/ai-conformance/test", "pass")
    assert v.verdicts["TestGangScheduling/NegativeGangScheduling"] == "pass" and len(v.verdicts) == 12


def test_the_verbose_reader_catches_what_is_not_go_test_v():
    text = GKE_LOG.read_text()
    assert any("indented 0 spaces" in p for p in read_verbose(
        text.replace("    --- PASS: TestGangScheduling/Positive", "--- PASS: TestGangScheduling/Positive")).problems)
    unrun = text.replace("=== RUN   TestLookupAcceleratorConfig\n", "")
    assert any("never ran" in p for p in read_verbose(unrun).problems)
    assert any("not go test -v" in p for p in read_verbose(text.replace(
        "=== RUN   TestGangScheduling\n", "=== RUN   TestGangScheduling\n[It] gang scheduling\n")).problems)
    failed = text.replace("--- PASS: TestLookupAcceleratorConfig", "--- FAIL: TestLookupAcceleratorConfig")
    assert "a test failed but the package passed" in read_verbose(failed).problems


def test_junitparser_reads_the_real_submissions_junit_as_one_gotestsum_suite():
    xml = JUnitXml.fromfile(str(GKE_JUNIT))
    (suite,) = list(xml)
    assert suite.name == "github.com/kubernetes-sigs/ai-conformance/test"
    cases = {c.name: c for c in suite}
    assert cases["TestSecureAcceleratorAccess/PositiveAccessTest"].time == 35.81 and "TestGangScheduling" in cases


# --- gpuconf's files in those shapes -----------------------------------------------------------

def test_results_json_and_e2e_log_pass_the_readers_and_agree_on_every_test(tmp_path: Path):
    out = evidence(tmp_path, MIXED)
    s, v = read_stream((out / "results.json").read_text()), read_verbose((out / "e2e.log").read_text())
    assert s.problems == [] and v.problems == []
    assert s.verdicts == v.verdicts and s.elapsed == v.elapsed
    assert (s.package, s.package_verdict, v.package_verdict) == ("gpuconf/suites", "fail", "fail")
    assert {k: s.verdicts[k] for k in s.verdicts if k.startswith("TestSecureAcceleratorAccess")} == {
        "TestSecureAcceleratorAccess": "fail",
        "TestSecureAcceleratorAccess/isolation.no-request-sees-no-gpu": "fail",
        "TestSecureAcceleratorAccess/isolation.no-request-sees-no-gpu/n0": "pass",
        "TestSecureAcceleratorAccess/isolation.no-request-sees-no-gpu/n1": "fail",
        "TestSecureAcceleratorAccess/isolation.sees-only-allocated": "skip",
        "TestSecureAcceleratorAccess/isolation.sees-only-allocated/n1": "skip"}
    # a cluster-wide check's node is (cluster); a degraded one fails
    assert s.verdicts["TestAcceleratorDriverRuntimeManagement/compat.outcome-matches-prediction/(cluster)"] == "fail"
    # every requirement of v1.37 is a top-level test, named after the upstream test or Test<CamelCase id>
    top = [t for t in s.verdicts if "/" not in t]
    assert top == [r.testcase for r in cncf.requirements() if not r.retired_in]
    assert "TestGpuSharing" in top and "TestDraSupport" not in top


def test_junit_has_gotestsums_attributes_and_the_streams_tests(tmp_path: Path):
    out = evidence(tmp_path, MIXED)
    ours, real = JUnitXml.fromfile(str(out / "junit.xml")), JUnitXml.fromfile(str(GKE_JUNIT))
    (suite,), (real_suite,) = list(ours), list(real)
    assert set(ours._elem.attrib) == set(real._elem.attrib)  # tests failures errors time
    assert set(suite._elem.attrib) == set(real_suite._elem.attrib)  # tests failures skipped time name timestamp
    real_case = next(iter(real_suite))
    assert all(set(c._elem.attrib) == set(real_case._elem.attrib) for c in suite)
    assert suite.name == "gpuconf/suites" and {c.classname for c in suite} == {"gpuconf/suites"}
    assert re.fullmatch(r"\d+\.\d{6}", suite._elem.get("time")) and suite.time == 10.25
    stream = read_stream((out / "results.json").read_text())
    verdict = {c.name: "fail" if any(isinstance(r, Failure) for r in c.result)
               else "skip" if any(isinstance(r, Skipped) for r in c.result) else "pass" for c in suite}
    assert verdict == stream.verdicts
    # in the order the tests started, a parent before its subtests, as in the real file
    real_names = [c.name for c in real_suite]
    parent, sub = "TestSecureAcceleratorAccess", "TestSecureAcceleratorAccess/PositiveAccessTest"
    assert real_names.index(parent) < real_names.index(sub)
    assert [c.name for c in suite] == list(stream.started)
    assert {c.name: c.time for c in suite} == stream.elapsed
    assert (suite.tests, suite.failures, suite.skipped) == (
        len(verdict), list(verdict.values()).count("fail"), list(verdict.values()).count("skip"))
    failure = next(r for c in suite if c.name == "TestSecureAcceleratorAccess/isolation.no-request-sees-no-gpu/n1"
                   for r in c.result)
    assert isinstance(failure, Failure) and failure.message == "Failed"
    assert "suites/x.py::t[n1]: fail: sees 8 GPUs\n        nvidia-smi -L: GPU 0\n" in (failure.text or "")


def test_a_go_test_name_is_rewritten_as_go_rewrites_subtest_names():
    assert cncf.go_name("node a\tb") == "node_a_b"
    assert cncf.go_name("bell\x07") == "bell\\x07"
    run = cncf.evaluate([cncf.CncfResult((SECURE,), result("isolation.sees-only-allocated", "pass", "n0")),
                         cncf.CncfResult((SECURE,), result("isolation.sees-only-allocated", "pass", "n0"))], options={})
    (secure,) = [t for t in cncf.go_tests(run) if t.name == "TestSecureAcceleratorAccess"]
    assert [t.name for t in secure.walk()][2:] == ["TestSecureAcceleratorAccess/isolation.sees-only-allocated/n0",
                                                   "TestSecureAcceleratorAccess/isolation.sees-only-allocated/n0#01"]


def test_gotestsums_shape_has_no_error_cases():
    with pytest.raises(ValueError, match="no error cases"):
        junit.gotestsum_testsuites("p", [junit.Case("T", "p", 0.0, "error")], time=0.0, timestamp="t")


def test_a_run_that_could_not_start_fails_the_package_with_every_test_skipped(tmp_path: Path):
    run = RunRecord(None, RUN.started, RUN.finished, 10, error="cannot reach the API server")
    out = evidence(tmp_path, [], run)
    s, v = read_stream((out / "results.json").read_text()), read_verbose((out / "e2e.log").read_text())
    assert s.problems == [] and v.problems == []
    assert set(s.verdicts.values()) == {"skip"} and s.package_verdict == v.package_verdict == "fail"
    assert "gpuconf: the run could not start: cannot reach the API server\n" in s.output[""]


# --- the PRODUCT.yaml fragment -----------------------------------------------------------------

def test_the_fragment_has_the_templates_keys_and_each_requirements_status_and_evidence(tmp_path: Path):
    out = evidence(tmp_path, MIXED + [("gpu_sharing", result("mig.layout-matches-config", "pass"))])
    fragment = yaml.safe_load((out / "PRODUCT.fragment.yaml").read_text())
    assert fragment_problems(fragment) == []
    reqs = {r["id"]: r for reqs in fragment["spec"].values() for r in reqs}
    # n1 failed a check that passed on n0: a node to fix, not a capability the platform lacks
    assert reqs[SECURE]["status"] == "Implemented" and reqs["gpu_sharing"]["status"] == "Implemented"
    assert reqs[SECURE]["notes"].startswith("Implemented; failing on n1: isolation.no-request-sees-no-gpu (each of "
                                            "these checks passed on other nodes: nodes to fix before submitting")
    # the cluster-wide compat check passed nowhere: what the run saw of it does not work
    assert reqs["driver_runtime_management"]["status"] == "Not Implemented"
    assert reqs["driver_runtime_management"]["notes"].startswith(
        "Not Implemented: compat.outcome-matches-prediction passed on no node; failing cluster-wide: "
        "compat.outcome-matches-prediction. gpuconf FAIL: 1 of 2 checks failed")
    assert reqs["gpu_sharing"]["evidence"] == ["file://v1.37/acme/junit.xml#TestGpuSharing",
                                              "file://v1.37/acme/results.json#TestGpuSharing",
                                              "file://v1.37/acme/e2e.log"]
    assert (reqs["ai_inference"]["status"], reqs["ai_inference"]["evidence"]) == ("", [])
    assert reqs["ai_inference"]["notes"].startswith("gpuconf SKIP: not covered: gpuconf does not test the Gateway API. "
                                                   "gpuconf did not prove it")
    drm = reqs["driver_runtime_management"]
    assert drm["level"] == "SHOULD"
    assert "becomes a MUST in v1.38: https://github.com/kubernetes-sigs/ai-conformance/issues/1" in drm["notes"]
    assert (fragment["metadata"]["kubernetesVersion"], fragment["metadata"]["vendorName"]) == ("v1.37", "[Vendor Name]")
    # each link's anchor names a top-level test of junit.xml and results.json
    tests = {c.name for suite in JUnitXml.fromfile(str(out / "junit.xml")) for c in suite}
    assert {link.split("#")[1] for r in reqs.values() for link in r["evidence"] if "#" in link} <= tests


def test_the_validator_rules_refuse_the_fragment_until_the_submitter_fills_it_in(tmp_path: Path):
    out = evidence(tmp_path, MIXED + [("gpu_sharing", result("mig.layout-matches-config", "pass")),
                                      ("accelerator_metrics", result("metrics.gpu-metrics-present", "fail", "n0"))])
    fragment = yaml.safe_load((out / "PRODUCT.fragment.yaml").read_text())
    errors = submission_errors(fragment, tmp_path)
    assert "Metadata field vendorName has placeholder value: [Vendor Name]" in errors
    assert "Requirement 'accelerator_metrics' is MUST level but status is 'Not Implemented'" in errors
    assert not any("kubernetesVersion" in e for e in errors)  # the cluster's own: v1.37
    assert not any("evidence file" in e for e in errors)  # every file:// link exists under the checkout
    filled = {**fragment, "metadata": {k: f"https://example.invalid/{k}" for k in fragment["metadata"]}}
    for reqs in filled["spec"].values():
        for r in reqs:
            r["status"] = r["status"] if r["status"] == "Implemented" or r["level"] == "SHOULD" else "Implemented"
    assert submission_errors(filled, tmp_path) == []
    (out / "e2e.log").unlink()
    assert "Invalid evidence file for 'gpu_sharing': file://v1.37/acme/e2e.log" in submission_errors(filled, tmp_path)


def test_the_fragment_reader_catches_a_key_or_level_the_template_does_not_have():
    tpl = template()
    tpl["metadata"]["k8sConformanceUrl"] = ""  # the validator requires it; the template lacks it
    assert fragment_problems(tpl) == []
    bad = yaml.safe_load(yaml.safe_dump(tpl))
    bad["spec"]["security"][0]["level"] = "SHOULD"
    bad["spec"]["operator"][0]["owner"] = "x"
    bad["spec"]["scheduling"] = bad["spec"].pop("schedulingOrchestration")
    problems = fragment_problems(bad)
    assert "secure_accelerator_access: level differs from the template's" in problems
    assert any(p.startswith("robust_controller: keys") for p in problems)
    assert any(p.startswith("categories") for p in problems)


def test_the_links_start_at_the_submission_layout_and_elsewhere_at_the_evidence_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    assert cncf.link_base(tmp_path / "k8s-ai-conformance" / "v1.37" / "acme") == "v1.37/acme"
    assert cncf.link_base(Path("v1.37/acme/run-1")) == "v1.37/acme/run-1"
    assert cncf.link_base(Path("v1.36/acme")) == "v1.36/acme"
    # not in a v<major>.<minor>/<product>/ layout: no working-directory or absolute path, none at all
    assert cncf.link_base(tmp_path / "results" / "cncf") is None
    assert cncf.link_base(tmp_path / "v1.37") is None  # no product directory
    assert cncf.link_base(Path("/elsewhere/out")) is None


def test_evidence_outside_the_layout_links_to_its_own_files_says_so_and_warns(tmp_path: Path):
    out = tmp_path / "results" / "cncf"
    cncf.write_evidence(RUN, [cncf.CncfResult(("gpu_sharing",), result("mig.layout-matches-config", "pass"))], out,
                        options={})
    text = (out / "PRODUCT.fragment.yaml").read_text()
    (sharing,) = [r for r in yaml.safe_load(text)["spec"]["accelerators"] if r["id"] == "gpu_sharing"]
    assert sharing["evidence"] == ["file://junit.xml#TestGpuSharing", "file://results.json#TestGpuSharing",
                                   "file://e2e.log"]
    assert str(tmp_path) not in text and str(tmp_path) not in (out / "gpuconf-cncf.json").read_text()
    note = ("the evidence links are relative to the directory these files are in, which is not in a submission's "
            "layout (v1.37/<product>/ in a checkout of cncf/k8s-ai-conformance): once the files are there, re-make "
            "each file://<file> link as file://v1.37/<product>/<file>")
    assert f"# NOTE: {note}\n" in text
    doc = json.loads((out / "gpuconf-cncf.json").read_text())
    assert (doc["links_from"], doc["notes"]) == (None, [note])
    assert cncf.terminal_note(RUN, out, "results/cncf") == (
        "gpuconf: warning: --cncf-evidence results/cncf is not under a v1.37/<product>/ directory: its evidence "
        "links are relative to it and must be re-made in the submission's layout")
    inside = evidence(tmp_path, [])
    assert cncf.terminal_note(RUN, inside, "v1.37/acme") is None
    assert "NOTE:" not in (inside / "PRODUCT.fragment.yaml").read_text()
    assert json.loads((inside / "gpuconf-cncf.json").read_text())["notes"] == []


@pytest.mark.parametrize(("server", "version"), [
    ("v1.37.2", "v1.37"), ("v1.34.0", "v1.34"), ("v1.37.0-gke.3503000", "v1.37"), ("1.36.1", "v1.36"),
    ("v1.100.0", "v1.100"), ("", None), (None, None), ("latest", None), ("v1.3x", None)])
def test_kubernetes_version_is_the_api_servers_major_and_minor(server: str | None, version: str | None):
    assert cncf.kubernetes_version(server) == version


def test_kubernetes_version_is_the_clusters_and_a_minor_other_than_the_checklists_is_said(tmp_path: Path):
    out = evidence(tmp_path, MIXED, replace(RUN, server_version="v1.34.0"))
    text = (out / "PRODUCT.fragment.yaml").read_text()
    assert yaml.safe_load(text)["metadata"]["kubernetesVersion"] == "v1.34"
    note = ("the cluster runs Kubernetes v1.34.0, and this evidence is for the v1.37 checklist (gpuconf's "
            "requirements table): a v1.37 submission needs a v1.37 cluster, and a v1.34 cluster answers the v1.34 "
            "checklist")
    assert f"# NOTE: {note}\n" in text
    assert text.startswith("# Kubernetes AI Conformance Checklist - v1.37: ")  # the table's version
    assert f"gpuconf: {note}\n" in (out / "e2e.log").read_text().split("=== RUN")[0]
    doc = json.loads((out / "gpuconf-cncf.json").read_text())
    assert (doc["version"], doc["server_version"], doc["kubernetes_version"], doc["notes"]) == (
        "1.37", "v1.34.0", "v1.34", [note])
    layout = tmp_path / "other" / "v1.36" / "acme"
    cncf.write_evidence(RUN, [], layout, options={})
    assert json.loads((layout / "gpuconf-cncf.json").read_text())["notes"] == [
        "the evidence is in a v1.36/ directory, and is for the v1.37 checklist"]


def test_an_unknown_kubernetes_version_is_left_as_a_placeholder_the_validator_refuses(tmp_path: Path):
    out = evidence(tmp_path, MIXED, replace(RUN, server_version=None))
    text = (out / "PRODUCT.fragment.yaml").read_text()
    fragment = yaml.safe_load(text)
    assert fragment["metadata"]["kubernetesVersion"] == "[Kubernetes Version]"  # never the checklist's v1.37
    note = ("kubernetesVersion is left as [Kubernetes Version]: the cluster's Kubernetes version is unknown (the run "
            "did not record the API server's version); fill in its vMAJOR.MINOR (kubectl version: Server Version)")
    assert f"# NOTE: {note}\n" in text and f"gpuconf: {note}\n" in (out / "e2e.log").read_text()
    assert json.loads((out / "gpuconf-cncf.json").read_text())["kubernetes_version"] is None
    assert ("Metadata field kubernetesVersion has placeholder value: [Kubernetes Version]"
            in submission_errors(fragment, tmp_path))
    failed = evidence(tmp_path / "failed", [], RunRecord(None, RUN.started, RUN.finished, 10, error="unreachable"))
    assert "the cluster's Kubernetes version is unknown (the run could not start)" in (
        failed / "PRODUCT.fragment.yaml").read_text()


def test_the_coverage_is_in_every_file(tmp_path: Path):
    why = "n1 is cordoned (spec.unschedulable): give --include-cordoned to test it"
    run = replace(RUN, coverage=Coverage(("n0", "n1"), (UntestedNode("n1", "cordoned", why),)))
    out = evidence(tmp_path, MIXED, run)
    line = "1 of 2 GPU nodes tested; 1 cordoned"
    assert f"gpuconf: coverage: {line}\ngpuconf: not tested: n1 (cordoned): {why}\n" in (out / "e2e.log").read_text()
    assert read_stream((out / "results.json").read_text()).output[""].count(f"gpuconf: coverage: {line}\n") == 1
    (suite,) = list(JUnitXml.fromfile(str(out / "junit.xml")))
    assert {p.name: p.value for p in suite.properties()}["gpuconf.untested.n1"] == f"cordoned: {why}"
    fragment = yaml.safe_load((out / "PRODUCT.fragment.yaml").read_text())
    (secure,) = fragment["spec"]["security"][:1]
    assert secure["notes"].endswith(f"; coverage: {line}")


def test_event_times_are_written_as_go_writes_a_time():
    """RFC 3339 with the fraction's trailing zeros dropped, none when it is zero (the GKE stream's
    "2026-10-01T21:37:52.57103356Z")."""
    assert cncf._rfc3339_nano(1_764_000_000.25) == "2025-11-24T16:00:00.25Z"
    assert cncf._rfc3339_nano(1_764_000_000.0) == "2025-11-24T16:00:00Z"
    assert cncf._rfc3339_nano(1_764_000_000.9999999) == "2025-11-24T16:00:01Z"
