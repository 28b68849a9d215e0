"""`gpuconf report diff`: two runs' report.json compared, one line per change, an exit status CI gates on."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from expecting import strict_expect
from serving import pytest_subprocess

from gpuconf.cli import main
from gpuconf.report.diff import (
    METRICS,
    ReportDiff,
    diff_reports,
    large_message_busbw,
    load_report,
    render_json,
    render_text,
)
from gpuconf.report.model import CheckResult, RunRecord
from gpuconf.report.writers import write_json

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
ALLOC, SMOKE, BUSBW = "inventory.allocatable-matches-capacity", "smoke.vector-add-every-gpu", "nccl.busbw-above-floor"
NVML, GFD, TRANSPORT = "driver.nvml-initializes", "labels.gfd-matches-hardware", "nccl.transport-expected"
GIB = 2**30
CURVE = ((2**20, 100.0), (GIB, 360.0), (2 * GIB, 370.0))  # the >= 1 GiB mean is 365.0
Pair = tuple[Path, Path]  # (old, new) report.json
SLOWER = tuple((x, y * 0.8) for x, y in CURVE)  # 20% lower everywhere: 292.0


def result(check: str, node: str, outcome: str, message: str | None = None,
           curve: tuple[tuple[int, float], ...] = ()) -> CheckResult:
    return CheckResult(check, node, outcome, f"suites/test_x.py::test_{check}[{node}]", 0.5, message=message,
                       curve=curve)


HEALTHY = [
    result(ALLOC, "h100-0", "pass"), result(ALLOC, "h100-1", "pass"),
    result(SMOKE, "h100-0", "pass"), result(SMOKE, "h100-1", "fail", "1 of 8 GPUs failed the vector-add kernel"),
    result(BUSBW, "h100-0", "pass", curve=CURVE), result(BUSBW, "h100-1", "pass", curve=CURVE),
    result(NVML, "h100-0", "degraded", "DEGRADED: NVML slow to initialise"), result(GFD, "h100-0", "pass"),
]
REGRESSED = [
    result(ALLOC, "h100-0", "fail", "h100-0 allocatable nvidia.com/gpu is 7, capacity 8\n  more detail"),
    result(ALLOC, "h100-1", "pass"),
    result(SMOKE, "h100-0", "pass"), result(SMOKE, "h100-1", "fail", "1 of 8 GPUs failed the vector-add kernel"),
    result(BUSBW, "h100-0", "pass", curve=SLOWER), result(BUSBW, "h100-1", "pass", curve=CURVE),
    result(NVML, "h100-0", "pass"), result(TRANSPORT, "h100-0", "pass"), result(TRANSPORT, "h100-1", "pass"),
]


def record(run_id: str) -> RunRecord:
    return RunRecord(provenance="simulated:healthy-h100", started=1_700_000_000.0, finished=1_700_000_010.0,
                     exit_status=1, run_id=run_id)


@pytest.fixture
def reports(tmp_path: Path) -> Pair:
    old = write_json(record("old-run"), HEALTHY, tmp_path / "old" / "report.json")
    new = write_json(record("new-run"), REGRESSED, tmp_path / "new" / "report.json")
    return old, new


def cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(["report", "diff", *map(str, argv)], stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


# -- what the diff says ------------------------------------------------------------------------------


def test_a_new_failure_and_a_20_percent_busbw_drop_are_named_one_per_line_and_exit_1(reports: Pair) -> None:
    old, new = reports
    status, out, err = cli(old, new)
    assert (status, err) == (1, "")
    assert out.splitlines() == [
        f"old: {old}, run old-run, simulated:healthy-h100, 2023-11-14T22:13:20Z",
        f"new: {new}, run new-run, simulated:healthy-h100, 2023-11-14T22:13:20Z",
        "new failures (1):",
        f"  FAIL h100-0 {ALLOC} (was PASS): h100-0 allocatable nvidia.com/gpu is 7, capacity 8",
        "fixed (1):",
        f"  PASS h100-0 {NVML} (was DEGRADED)",
        "still failing (1):",
        f"  FAIL h100-1 {SMOKE}: 1 of 8 GPUs failed the vector-add kernel",
        "lost coverage (1 check no longer tested):",
        "  h100-0: 1 check no longer tested",
        f"    ABSENT {GFD} (was PASS): the new run has no result of this check on any node",
        "checks appeared (1):",
        f"  {TRANSPORT}: 2 pass",
        "checks disappeared (1):",
        f"  {GFD}: was 1 pass",
        "node verdicts changed (1):",
        "  h100-0: DEGRADED -> FAIL",
        "metric regressions (tolerance 10%) (1):",
        f"  h100-0 {BUSBW}: busbw >= 1 GiB 365.0 -> 292.0 GB/s (-20.0%)",
        "summary: 1 new failure, 1 fixed, 1 still failing, 1 metric regression (2 compared), 1 check no longer "
        "tested",
    ]


def test_the_same_run_twice_has_nothing_to_say_and_exits_0(reports: Pair) -> None:
    old, _ = reports
    status, out, _ = cli(old, old)
    assert status == 0
    assert out.splitlines()[2:] == [
        "still failing (2):",
        f"  DEGRADED h100-0 {NVML}: DEGRADED: NVML slow to initialise",
        f"  FAIL h100-1 {SMOKE}: 1 of 8 GPUs failed the vector-add kernel",
        "summary: 0 new failures, 0 fixed, 2 still failing, 0 metric regressions (2 compared), 0 checks no longer "
        "tested",
    ]


@pytest.mark.parametrize(("fail_on", "tolerance", "expected"), [
    pytest.param("any", "0.1", 1, id="any: the new failure and the regression gate"),
    pytest.param("failures", "0.1", 1, id="failures: the new failure gates"),
    pytest.param("regressions", "0.1", 1, id="regressions: the 20% busbw drop gates"),
    pytest.param("regressions", "0.25", 0, id="a 20% drop within a 25% tolerance is no regression"),
])
def test_fail_on_selects_what_gates(reports: Pair, fail_on: str, tolerance: str, expected: int) -> None:
    assert cli(*reports, "--fail-on", fail_on, "--tolerance", tolerance)[0] == expected


def test_a_busbw_drop_alone_gates_on_regressions_but_not_on_failures(tmp_path: Path) -> None:
    old = write_json(record("a"), [result(BUSBW, "h100-0", "pass", curve=CURVE)], tmp_path / "a.json")
    new = write_json(record("b"), [result(BUSBW, "h100-0", "pass", curve=SLOWER)], tmp_path / "b.json")
    assert cli(old, new, "--fail-on", "failures")[0] == 0
    status, out, _ = cli(old, new, "--fail-on", "regressions")
    assert status == 1 and f"  h100-0 {BUSBW}: busbw >= 1 GiB 365.0 -> 292.0 GB/s (-20.0%)" in out.splitlines()
    # the other way round is an improvement, never a regression
    assert cli(new, old)[0] == 0


def test_a_check_that_was_not_tested_and_now_fails_is_a_new_failure(tmp_path: Path) -> None:
    old = write_json(record("a"), [result(ALLOC, "h100-0", "not-tested")], tmp_path / "a.json")
    new = write_json(record("b"), [result(ALLOC, "h100-0", "degraded", "DEGRADED: slow")], tmp_path / "b.json")
    status, out, _ = cli(old, new, "--fail-on", "failures")
    assert status == 1 and f"  DEGRADED h100-0 {ALLOC} (was NOT-TESTED): DEGRADED: slow" in out.splitlines()
    status, out, _ = cli(new, old)  # the other way round, the degraded node is no longer tested: lost coverage
    assert status == 15 and out.splitlines()[2:5] == [
        "lost coverage (1 node untested, 1 check no longer tested):", "  h100-0: not tested (was DEGRADED)",
        f"    NOT-TESTED {ALLOC} (was DEGRADED)"]


def test_a_check_that_passed_and_is_now_skipped_is_lost_coverage_with_the_reason(tmp_path: Path) -> None:
    old = write_json(record("a"), [result(BUSBW, "h100-0", "pass", curve=CURVE)], tmp_path / "a.json")
    new = write_json(record("b"), [result(BUSBW, "h100-0", "not-tested", "not run: h100-0 has 7/8 GPUs allocatable")],
                     tmp_path / "b.json")
    status, out, _ = cli(old, new)
    assert status == 15
    assert out.splitlines()[2:] == [
        "lost coverage (1 node untested, 1 check no longer tested):",
        "  h100-0: not tested (was PASS)",
        f"    NOT-TESTED {BUSBW} (was PASS): not run: h100-0 has 7/8 GPUs allocatable",
        "node verdicts changed (1):",
        "  h100-0: PASS -> NOT-TESTED",
        "summary: 0 new failures, 0 fixed, 0 still failing, 0 metric regressions (0 compared), 1 check no longer "
        "tested (1 node untested)",
    ]


def test_json_carries_every_group_and_the_exit_status(reports: Pair) -> None:
    status, out, _ = cli(*reports, "--json")
    doc = json.loads(out)
    assert status == doc["exit_status"] == 1
    assert doc["new_failures"] == [{"check": ALLOC, "node": "h100-0", "old": "pass", "new": "fail",
                                    "message": "h100-0 allocatable nvidia.com/gpu is 7, capacity 8"}]
    assert [(c["check"], c["old"], c["new"]) for c in doc["fixed"]] == [(NVML, "degraded", "pass")]
    assert doc["checks_appeared"] == [{"check": TRANSPORT, "outcomes": {"pass": 2}}]
    assert doc["node_changes"] == [{"node": "h100-0", "old": "degraded", "new": "fail", "reason": None}]
    assert doc["metric_regressions"] == [{"check": BUSBW, "node": "h100-0", "metric": "busbw >= 1 GiB",
                                          "unit": "GB/s", "old": 365.0, "new": 292.0, "change": -0.2}]
    assert doc["tolerance"] == 0.1 and doc["metrics_compared"] == 2
    assert any("kernel" in line for line in doc["not_compared"])


def test_markdown_has_a_section_per_group_for_a_job_summary(reports: Pair) -> None:
    status, out, _ = cli(*reports, "--markdown")
    assert status == 1
    lines = out.splitlines()
    assert lines[0] == "## gpuconf report diff"
    assert ("**1 new failure, 1 fixed, 1 still failing, 1 metric regression (2 compared), 1 check no longer "
            "tested**") in lines
    assert lines[lines.index("### Lost coverage (1 check no longer tested)") + 2:][:2] == [
        "- h100-0: 1 check no longer tested",
        f"  - ABSENT {GFD} (was PASS): the new run has no result of this check on any node"]
    assert "### New failures (1)" in lines and "### Metric regressions (tolerance 10%) (1)" in lines
    assert f"- FAIL h100-0 {ALLOC} (was PASS): h100-0 allocatable nvidia.com/gpu is 7, capacity 8" in lines


def test_a_run_that_could_not_start_says_so_in_its_line(tmp_path: Path) -> None:
    broken = RunRecord(provenance="kubeconfig:/k", started=1_700_000_000.0, finished=1_700_000_001.0, exit_status=11,
                       run_id="r", error="cluster unreachable:\n  connection refused")
    old = write_json(record("a"), [result(ALLOC, "h100-0", "pass")], tmp_path / "a.json")
    new = write_json(broken, [], tmp_path / "b.json")
    status, out, err = cli(old, new)
    assert status == 15  # nothing newly fails, but nothing the old run tested was tested: lost coverage
    assert out.splitlines()[1] == (f"new: {new}, run r, kubeconfig:/k, 2023-11-14T22:13:20Z, "
                                   "NOT STARTED: cluster unreachable: connection refused")
    assert out.splitlines()[2:5] == [
        "lost coverage (1 node untested, 1 check no longer tested):",
        "  h100-0: not tested (was PASS): the run did not start: cluster unreachable: connection refused",
        f"    ABSENT {ALLOC} (was PASS)"]
    assert f"  {ALLOC}: was 1 pass" in out.splitlines()
    assert err.startswith("gpuconf report diff: warning: OLD and NEW are runs of different clusters "
                          "(simulated:healthy-h100 vs kubeconfig:/k): ")


def test_a_node_the_new_run_left_untested_is_named_with_its_reason(tmp_path: Path) -> None:
    """Issue 25: the new run's coverage reaches the diff: its line, and why a node lost its verdict."""
    from dataclasses import replace

    from gpuconf.report.model import CORDONED, Coverage, UntestedNode

    why = "h100-1 is cordoned (spec.unschedulable): give --include-cordoned to test it"
    coverage = Coverage(("h100-0", "h100-1"), (UntestedNode("h100-1", CORDONED, why),))
    both = [result(ALLOC, "h100-0", "pass"), result(ALLOC, "h100-1", "pass")]
    old = write_json(replace(record("a"), coverage=Coverage(("h100-0", "h100-1"))), both, tmp_path / "a.json")
    new = write_json(replace(record("b"), coverage=coverage), both[:1], tmp_path / "b.json")
    status, out, _ = cli(old, new)
    lines = out.splitlines()
    assert status == 15 and lines[0] == f"old: {old}, run a, simulated:healthy-h100, 2023-11-14T22:13:20Z"
    assert lines[1] == f"new: {new}, run b, simulated:healthy-h100, 2023-11-14T22:13:20Z, " + coverage.line()
    assert lines[2:5] == ["lost coverage (1 node untested, 1 check no longer tested):",
                          f"  h100-1: not tested (was PASS): {why}", f"    ABSENT {ALLOC} (was PASS)"]
    assert f"  h100-1: PASS -> NOT-TESTED ({why})" in lines
    doc = json.loads(cli(old, new, "--json")[1])
    assert doc["new"]["coverage"] == coverage.as_json() and doc["old"]["coverage"]["line"] == "2 of 2 GPU nodes tested"
    assert doc["node_changes"] == [{"node": "h100-1", "old": "pass", "new": "not-tested", "reason": why}]
    assert load_report(new).coverage == coverage
    assert load_report(write_json(record("c"), both, tmp_path / "c.json")).coverage is None  # a report without it


def test_a_run_directory_is_read_as_its_report_json(reports: Pair) -> None:
    old, new = reports
    assert cli(old.parent, new.parent)[0] == 1
    assert load_report(old.parent).source == str(old)


# -- lost coverage: exit 15 when it is all that is worse (issue 36) -------------------------------------

WHY = "h100-1 is cordoned (spec.unschedulable): give --include-cordoned to test it"
BOTH = ("h100-0", "h100-1")


def covered(run_id: str, *untested: tuple[str, str]) -> RunRecord:
    """A run of both nodes whose coverage leaves ``untested`` (node, reason) out, as cordoned."""
    from dataclasses import replace

    from gpuconf.report.model import CORDONED, Coverage, UntestedNode

    left_out = tuple(UntestedNode(node, CORDONED, why) for node, why in untested)
    return replace(record(run_id), coverage=Coverage(BOTH, left_out))


def healthy_pair() -> list[CheckResult]:
    return [result(check, node, "pass") for node in BOTH for check in (ALLOC, GFD, SMOKE)]


def test_a_node_tested_before_and_not_tested_now_is_lost_coverage_and_exits_15(tmp_path: Path) -> None:
    """The cordoned-node run: h100-1 PASS -> NOT-TESTED, its checks NOT TESTED with the coverage's reason
    or not run at all; each named under the node, which carries the new run's reason once."""
    new_results = healthy_pair()[:3] + [result(ALLOC, "h100-1", "not-tested", WHY),
                                        result(GFD, "h100-1", "not-tested", WHY)]
    old = write_json(covered("a"), healthy_pair(), tmp_path / "a" / "report.json")
    new = write_json(covered("b", ("h100-1", WHY)), new_results, tmp_path / "b" / "report.json")
    status, out, err = cli(old, new)
    assert (status, err) == (15, "")
    assert out.splitlines()[2:] == [
        "lost coverage (1 node untested, 3 checks no longer tested):",
        f"  h100-1: not tested (was PASS): {WHY}",
        f"    NOT-TESTED {ALLOC} (was PASS)",
        f"    NOT-TESTED {GFD} (was PASS)",
        f"    ABSENT {SMOKE} (was PASS)",
        "node verdicts changed (1):",
        f"  h100-1: PASS -> NOT-TESTED ({WHY})",
        "summary: 0 new failures, 0 fixed, 0 still failing, 0 metric regressions (0 compared), 3 checks no longer "
        "tested (1 node untested)",
    ]
    doc = json.loads(cli(old, new, "--json")[1])
    assert doc["exit_status"] == 15 and doc["fail_on"] == ["failures", "regressions", "coverage"]
    assert [(n["node"], n["old"], n["new"], n["untested"], n["reason"]) for n in doc["lost_coverage"]] == [
        ("h100-1", "pass", "not-tested", True, WHY)]
    assert [(c["check"], c["new"]) for c in doc["no_longer_tested"]] == [(ALLOC, "not-tested"), (GFD, "not-tested"),
                                                                         (SMOKE, "absent")]
    assert cli(new, new)[0] == 0  # the same untested node in both runs: nothing lost


def test_a_check_no_longer_tested_on_a_node_still_tested_is_lost_coverage_and_exits_15(tmp_path: Path) -> None:
    skipped = "not run: h100-0 has 7/8 GPUs allocatable\n  the probe needs all 8"
    old = write_json(covered("a"), [*healthy_pair(), result(BUSBW, "h100-0", "pass", curve=CURVE)],
                     tmp_path / "a.json")
    new = write_json(covered("b"), [*healthy_pair(), result(BUSBW, "h100-0", "not-tested", skipped)],
                     tmp_path / "b.json")
    status, out, _ = cli(old, new)
    *lost, summary = out.splitlines()[2:]
    assert (status, lost) == (15, ["lost coverage (1 check no longer tested):", "  h100-0: 1 check no longer tested",
                                   f"    NOT-TESTED {BUSBW} (was PASS): not run: h100-0 has 7/8 GPUs allocatable"])
    assert summary.endswith("(0 compared), 1 check no longer tested")  # h100-0 is still tested: no node untested


def test_a_failing_check_no_longer_tested_is_lost_coverage_not_a_fix(tmp_path: Path) -> None:
    old = write_json(covered("a"), [*healthy_pair(), result(BUSBW, "h100-0", "fail", "busbw 12 GB/s")],
                     tmp_path / "a.json")
    new = write_json(covered("b"), healthy_pair(), tmp_path / "b.json")
    status, out, _ = cli(old, new)
    assert status == 15 and "fixed (" not in out
    assert out.splitlines()[2:5] == ["lost coverage (1 check no longer tested):", "  h100-0: 1 check no longer tested",
                                     f"    ABSENT {BUSBW} (was FAIL): the new run has no result of this check on any "
                                     "node"]


def test_checks_a_narrower_new_run_did_not_select_are_lost_coverage_named_with_its_selection(tmp_path: Path) -> None:
    from dataclasses import replace

    smoke_only = replace(covered("b"), scope={"selection": {"markexpr": "smoke"}, "full": False, "tiers": [],
                                              "narrowed": ["-m 'smoke' deselected 2 of 3 checks"]})
    old = write_json(covered("a"), healthy_pair(), tmp_path / "a.json")
    new = write_json(smoke_only, [r for r in healthy_pair() if r.check == SMOKE], tmp_path / "b.json")
    status, out, _ = cli(old, new)
    lines = out.splitlines()
    assert status == 15 and lines[1].endswith(", PARTIAL: -m 'smoke' deselected 2 of 3 checks")
    assert lines[2:5] == ["lost coverage (4 checks no longer tested):", "  h100-0: 2 checks no longer tested",
                          f"    ABSENT {ALLOC} (was PASS): not selected by the new run (-m 'smoke' deselected 2 of 3 "
                          "checks)"]


@pytest.fixture
def regressed_and_lost(tmp_path: Path) -> Pair:
    """h100-0's allocatable check newly fails and h100-1 is newly cordoned."""
    new_results = [result(ALLOC, "h100-0", "fail", "h100-0 allocatable nvidia.com/gpu is 7, capacity 8"),
                   *healthy_pair()[1:3]]
    return (write_json(covered("a"), healthy_pair(), tmp_path / "a.json"),
            write_json(covered("b", ("h100-1", WHY)), new_results, tmp_path / "b.json"))


def test_a_regression_with_lost_coverage_exits_1_and_prints_both(regressed_and_lost: Pair) -> None:
    status, out, _ = cli(*regressed_and_lost)
    assert status == 1
    assert out.splitlines()[2:10] == [
        "new failures (1):",
        f"  FAIL h100-0 {ALLOC} (was PASS): h100-0 allocatable nvidia.com/gpu is 7, capacity 8",
        "lost coverage (1 node untested, 3 checks no longer tested):",
        f"  h100-1: not tested (was PASS): {WHY}",
        f"    ABSENT {ALLOC} (was PASS)",
        f"    ABSENT {GFD} (was PASS)",
        f"    ABSENT {SMOKE} (was PASS)",
        "node verdicts changed (2):",
    ]
    assert out.splitlines()[-1] == ("summary: 1 new failure, 0 fixed, 0 still failing, 0 metric regressions "
                                    "(0 compared), 3 checks no longer tested (1 node untested)")


@pytest.mark.parametrize(("fail_on", "expected"), [
    pytest.param("any", 1, id="any: the new failure exits 1, lost coverage or not"),
    pytest.param("failures", 1, id="failures: the new failure exits 1"),
    pytest.param("coverage", 15, id="coverage: the lost node exits 15, the new failure does not gate"),
    pytest.param("regressions", 0, id="regressions: no metric regressed, the rest does not gate"),
    pytest.param("regressions,coverage", 15, id="regressions and coverage: the lost node exits 15"),
    pytest.param("failures, coverage", 1, id="failures and coverage: the new failure exits 1"),
])
def test_fail_on_names_what_gates_and_coverage_exits_15_only_when_nothing_else_gates(
        regressed_and_lost: Pair, fail_on: str, expected: int) -> None:
    status, out, _ = cli(*regressed_and_lost, "--fail-on", fail_on)
    assert status == expected and "lost coverage (1 node untested, 3 checks no longer tested):" in out.splitlines()


def test_degraded_to_fail_is_a_new_failure_and_exits_1(tmp_path: Path) -> None:
    old = write_json(covered("a"), [*healthy_pair(), result(NVML, "h100-0", "degraded", "DEGRADED: NVML slow")],
                     tmp_path / "a.json")
    new = write_json(covered("b"), [*healthy_pair(), result(NVML, "h100-0", "fail", "NVML does not initialise")],
                     tmp_path / "b.json")
    status, out, _ = cli(old, new)
    assert status == 1 and out.splitlines()[2:4] == ["new failures (1):",
                                                     f"  FAIL h100-0 {NVML} (was DEGRADED): NVML does not initialise"]
    status, out, _ = cli(new, old)  # better, still failing: nothing gates
    assert status == 0 and f"  DEGRADED h100-0 {NVML} (was FAIL): DEGRADED: NVML slow" in out.splitlines()


def test_a_node_gone_from_the_new_runs_selection_is_a_verdict_change_not_lost_coverage(tmp_path: Path) -> None:
    """A node removed from the cluster (the new run's coverage does not select it, no result names it)."""
    from dataclasses import replace

    from gpuconf.report.model import Coverage

    old = write_json(covered("a"), healthy_pair(), tmp_path / "a.json")
    new = write_json(replace(record("b"), coverage=Coverage(BOTH[:1])), healthy_pair()[:3], tmp_path / "b.json")
    status, out, _ = cli(old, new)
    assert status == 0 and out.splitlines()[2:] == [
        "node verdicts changed (1):",
        "  h100-1: PASS -> ABSENT (not among the new run's GPU nodes)",
        "summary: 0 new failures, 0 fixed, 0 still failing, 0 metric regressions (0 compared), 0 checks no longer "
        "tested",
    ]
    # a run that recorded no selection cannot tell a node gone from one left out: lost coverage
    bare = write_json(record("c"), healthy_pair()[:3], tmp_path / "c.json")
    assert cli(old, bare)[0] == 15


# -- which cluster: the manifest's kube-system UID, else the provenance ----------------------------------


def run_dir(where: Path, run_id: str, results: list[CheckResult], *, provenance: str = "kubeconfig:/k",
            uid: str | None = None) -> Path:
    """A run's report directory as a run leaves it: report.json and, with ``uid``, its manifest.json."""
    from dataclasses import replace

    from gpuconf.report.manifest import manifest_document, write_manifest

    write_json(replace(covered(run_id), provenance=provenance), results, where / "report.json")
    if uid is not None:
        write_manifest(where, manifest_document(where, ["report.json"], run_id=run_id, provenance=provenance,
                                                simulated=provenance.startswith("simulated:"), cluster_uid=uid,
                                                started=1_700_000_000.0, finished=1_700_000_010.0, exit_status=0))
    return where


def test_identical_runs_of_one_cluster_exit_0_without_a_warning(tmp_path: Path) -> None:
    old = run_dir(tmp_path / "a", "a", healthy_pair(), provenance="kubeconfig:/home/ci/kc", uid="uid-1")
    new = run_dir(tmp_path / "b", "b", healthy_pair(), provenance="kubeconfig:/runner/kc", uid="uid-1")
    status, out, err = cli(old, new)
    assert (status, err) == (0, "")  # one kube-system UID: one cluster, whichever kubeconfig reached it
    assert out.splitlines()[2:] == [
        "summary: 0 new failures, 0 fixed, 0 still failing, 0 metric regressions (0 compared), 0 checks no longer "
        "tested"]
    assert json.loads(cli(old, new, "--json")[1])["different_clusters"] is None


def test_runs_of_clusters_with_different_uids_warn_on_stderr_and_still_diff(tmp_path: Path) -> None:
    broken = [result(ALLOC, "h100-0", "fail", "h100-0 allocatable nvidia.com/gpu is 7, capacity 8"),
              *healthy_pair()[1:]]
    old = run_dir(tmp_path / "a", "a", healthy_pair(), uid="4f1c0d2e-aaaa")
    new = run_dir(tmp_path / "b", "b", broken, uid="9b7e3c11-bbbb")
    status, out, err = cli(old, new)
    assert status == 1 and out.splitlines()[2:4] == [
        "new failures (1):", f"  FAIL h100-0 {ALLOC} (was PASS): h100-0 allocatable nvidia.com/gpu is 7, capacity 8"]
    assert err == ("gpuconf report diff: warning: OLD and NEW are runs of different clusters (kube-system uid "
                   "4f1c0d2e-aaaa vs 9b7e3c11-bbbb): compared anyway; a change listed may be the clusters' "
                   "difference, not the new run's\n")
    doc = json.loads(cli(old, new, "--json")[1])
    assert doc["different_clusters"] == "kube-system uid 4f1c0d2e-aaaa vs 9b7e3c11-bbbb"
    markdown = cli(old, new, "--markdown")[1].splitlines()
    assert "> **Warning**: OLD and NEW are runs of different clusters (kube-system uid 4f1c0d2e-aaaa vs " \
           "9b7e3c11-bbbb)" in markdown


@pytest.mark.parametrize(("old", "new", "warning"), [
    pytest.param(("kubeconfig:/k", None), ("kubeconfig:/other", None), "kubeconfig:/k vs kubeconfig:/other",
                 id="no manifests: different provenances warn"),
    pytest.param(("kubeconfig:/k", "uid-1"), ("kubeconfig:/other", None), "kubeconfig:/k vs kubeconfig:/other",
                 id="one manifest: the provenances decide"),
    pytest.param(("kubeconfig:/k", None), ("kubeconfig:/k", None), None, id="no manifests, one provenance: no warning"),
    pytest.param(("simulated:healthy-h100", "uid-1"), ("simulated:healthy-h100", "uid-2"), None,
                 id="two runs of one simulated profile: each has its own UID, no warning"),
    pytest.param(("simulated:healthy-h100", "uid-1"), ("simulated:multi-pool", "uid-1"),
                 "simulated:healthy-h100 vs simulated:multi-pool", id="simulated profiles differ: warn"),
    pytest.param(("simulated:healthy-h100", "uid-1"), ("kubeconfig:/k", "uid-2"),
                 "simulated:healthy-h100 vs kubeconfig:/k", id="a simulated run against a real one: warn"),
])
def test_without_two_real_uids_the_provenances_tell_the_clusters_apart(
        tmp_path: Path, old: tuple[str, str | None], new: tuple[str, str | None], warning: str | None) -> None:
    a = run_dir(tmp_path / "a", "a", healthy_pair(), provenance=old[0], uid=old[1])
    b = run_dir(tmp_path / "b", "b", healthy_pair(), provenance=new[0], uid=new[1])
    status, _, err = cli(a, b)
    assert status == 0
    assert err == ("" if warning is None else f"gpuconf report diff: warning: OLD and NEW are runs of different "
                   f"clusters ({warning}): compared anyway; a change listed may be the clusters' difference, not the "
                   "new run's\n")


def test_a_manifest_of_another_run_does_not_name_the_cluster(tmp_path: Path) -> None:
    old = run_dir(tmp_path / "a", "a", healthy_pair(), uid="uid-1")
    new = run_dir(tmp_path / "b", "b", healthy_pair(), uid="uid-2")
    run_dir(new, "c", healthy_pair())  # another run's report.json copied over
    assert load_report(new).cluster_uid is None and load_report(old).cluster_uid == "uid-1"
    assert cli(old, new) == (0, cli(old, new)[1], "")  # the provenances, both kubeconfig:/k, agree


# -- where the runs are: a run directory, report.json, or a link such as reports/latest --------------


def test_a_latest_link_names_the_run(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    old = run_dir(reports / "20261207-101500-aaaa", "a", healthy_pair())
    new = run_dir(reports / "20261208-101500-bbbb", "b", healthy_pair()[:3])
    (reports / "latest").symlink_to(new.name)
    for given in (reports / "latest", reports / "latest" / "report.json", reports):
        status, out, _ = cli(old, given)
        assert status == 15 and out.splitlines()[1].startswith(f"new: {reports / 'latest' / 'report.json'}, run b, ")
    (reports / "latest").unlink()
    (reports / "LATEST").write_text(f"{new.name}\n")  # where links cannot be made, the run's name in a file
    status, out, _ = cli(old, reports)
    assert status == 15 and out.splitlines()[1].startswith(f"new: {new / 'report.json'}, run b, ")
    (reports / "latest").symlink_to("20261209-gone")
    status, out, err = cli(old, reports / "latest")
    assert (status, out) == (2, "")
    assert err == f"gpuconf report diff: {reports / 'latest'}: a link to 20261209-gone, which does not exist\n"


def test_the_large_message_figure_is_the_mean_above_1_gib_else_the_largest_message() -> None:
    assert large_message_busbw(CURVE) == (365.0, "busbw >= 1 GiB")
    assert large_message_busbw(((1024, 1.0), (512 * 2**20, 200.0))) == (200.0, "busbw at 512 MiB")
    assert large_message_busbw(()) is None


def test_curves_over_different_message_ranges_are_not_compared(tmp_path: Path) -> None:
    small = ((1024, 1.0), (512 * 2**20, 100.0))
    old = load_report(write_json(record("a"), [result(BUSBW, "n", "pass", curve=CURVE)], tmp_path / "a.json"))
    new = load_report(write_json(record("b"), [result(BUSBW, "n", "pass", curve=small)], tmp_path / "b.json"))
    diff = diff_reports(old, new)
    assert diff.metrics_compared == 0 and diff.regressions == []


# -- bad input: one line on stderr, exit 2 -------------------------------------------------------------


@pytest.mark.parametrize(("content", "says"), [
    pytest.param(None, "no such file", id="a missing file"),
    pytest.param("<testsuites/>", "not JSON", id="junit.xml given by mistake"),
    pytest.param('{"results": {"tests": []}}', "not a gpuconf report (no 'extra.gpuconf' section)", id="plain CTRF"),
    pytest.param('{"extra": {"gpuconf": {}}, "results": {}}', "not a gpuconf report (no results.tests list)",
                 id="no tests"),
    pytest.param('{"extra": {"gpuconf": {}}, '
                 '"results": {"tests": [{"name": "t", "extra": {"check": "c", "outcome": "ok"}}]}}',
                 "not a gpuconf report (results.tests[0] has no gpuconf check and outcome)", id="foreign outcome"),
    pytest.param("[]", "not a gpuconf report (not a JSON object)", id="a JSON list"),
])
def test_bad_input_is_one_line_on_stderr_and_exit_2(reports: Pair, tmp_path: Path, content: str | None,
                                                    says: str) -> None:
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    status, out, err = cli(reports[0], bad)
    assert (status, out) == (2, "")
    assert err.startswith(f"gpuconf report diff: {bad}: {says}")
    assert len(err.splitlines()) == 1


def test_a_directory_without_report_json_is_bad_input(reports: Pair, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    status, _, err = cli(tmp_path / "empty", reports[1])
    assert status == 2 and err == f"gpuconf report diff: {tmp_path / 'empty'}: a directory without report.json\n"


@pytest.mark.parametrize("argv", [["--tolerance", "1.5"], ["--tolerance", "ten"], ["--fail-on", "never"],
                                  ["--json", "--markdown"]])
def test_bad_options_are_bad_input(reports: Pair, argv: list[str]) -> None:
    status, _, err = cli(*reports, *argv)
    assert status == 2 and len(err.splitlines()) == 1 and err.startswith("gpuconf report diff: ")


# -- end to end: two suite runs on the simulated cluster, then the diff --------------------------------


def test_two_simulated_runs_diff_to_the_injected_fault(pytester: pytest.Pytester, tmp_path: Path) -> None:
    suites = pytester.mkdir("suites")
    (suites / "test_inventory.py").write_text((ROOT / "suites" / "test_inventory.py").read_text())
    profile = (ROOT / "gpuconf" / "data" / "sim_profiles" / "healthy-h100.yaml").read_text()
    assert "\nfaults: []\n" in profile
    faulty = pytester.path / "faulty.yaml"
    faulty.write_text(profile.replace("\nfaults: []\n", "\nfaults:\n  - {id: gpu-unhealthy, pool: h100, node: 0, "
                                                        "gpu: 3}\n"))
    runs: dict[str, Path] = {}
    strict = strict_expect(pytester.path)  # one unhealthy GPU FAILs the node
    for name, simulate, expected in (("old", "healthy-h100", 18), ("new", str(faulty), 1)):  # 18: one suite, PARTIAL
        runs[name] = tmp_path / name
        res = pytest_subprocess(pytester, "suites/test_inventory.py", "-p", "gpuconf.plugin", "--simulate",
                                simulate, "--report-dir", str(runs[name]), "-p", "no:cacheprovider",
                                "--expect", str(strict))
        assert res.ret == expected, res.outlines[-20:]
    status, out, err = cli(runs["old"], runs["new"])
    # a profile with a fault injected is another simulated cluster than the profile: compared, with a warning
    assert status == 1 and len(err.splitlines()) == 1
    assert err.startswith("gpuconf report diff: warning: OLD and NEW are runs of different clusters "
                          "(simulated:healthy-h100 vs simulated:")
    lines = out.splitlines()
    groups = [line for line in lines if not line.startswith(" ")][2:]
    assert groups == ["new failures (1):", "node verdicts changed (1):",
                      "summary: 1 new failure, 0 fixed, 0 still failing, 0 metric regressions (0 compared), 0 checks "
                      "no longer tested"]
    assert lines[3].startswith(f"  FAIL h100-0 {ALLOC} (was PASS): ")
    assert lines[5] == "  h100-0: PASS -> FAIL"
    assert cli(runs["new"], runs["old"])[1].splitlines()[2:4] == ["fixed (1):", f"  PASS h100-0 {ALLOC} (was FAIL)"]
    assert cli(runs["new"], runs["old"])[0] == 0


# -- the documented CI jobs call the README's commands -------------------------------------------------


README = (ROOT / "README.md").read_text()


@pytest.mark.parametrize("name", ["github-actions.yml", "gitlab-ci.yml"])
def test_the_ci_examples_run_the_readme_commands_and_publish_the_reports(name: str) -> None:
    import yaml

    text = (ROOT / "docs" / "ci" / name).read_text()
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict) and f"docs/ci/{name}" in README
    assert "bash scripts/bootstrap.sh" in text and "bash scripts/bootstrap.sh" in README
    assert ".venv/bin/python -m pytest suites/ --kubeconfig " in text and "pytest suites/ --kubeconfig " in README
    assert ".venv/bin/gpuconf report diff baseline" in text and "--markdown" in text
    assert "reports/" in text and ("junit: reports/junit.xml" in text or "path: reports/" in text)
    assert "report.md" in text


def test_the_readme_diff_commands_parse() -> None:
    import shlex

    from gpuconf.cli import build_parser

    commands = [line for line in README.splitlines() if line.startswith("gpuconf report diff ")]
    assert len(commands) >= 2  # the diff section and the in-cluster runner section show it
    for line in commands:
        argv = shlex.split(line.split(">>", 1)[0].split("#", 1)[0])[1:]
        args = build_parser().parse_args(argv)
        assert (args.command, args.report_command) == ("report", "diff")


# -- measured figures: kernel time, pull time, time to Running (report.json extra.metrics) ------------


def measured(node: str, **metrics: float) -> CheckResult:
    return CheckResult(SMOKE, node, "pass", f"suites/test_smoke.py::test_vector_add_on_every_gpu[{node}]", 0.5,
                       metrics=metrics)


def metric_diff(tmp_path: Path, old: dict[str, float], new: dict[str, float],
                tolerance: float = 0.1) -> ReportDiff:
    a = load_report(write_json(record("a"), [measured("h100-0", **old)], tmp_path / "a.json"))
    b = load_report(write_json(record("b"), [measured("h100-0", **new)], tmp_path / "b.json"))
    return diff_reports(a, b, tolerance=tolerance)


def test_report_json_metrics_are_read_per_check_and_node(tmp_path: Path) -> None:
    path = write_json(record("a"), [measured("h100-0", kernel_ms=0.04, pull_s=12.0), measured("h100-1")],
                      tmp_path / "a.json")
    assert load_report(path).metrics == {(SMOKE, "h100-0"): {"kernel_ms": 0.04, "pull_s": 12.0}}


def test_slower_kernels_pulls_and_starts_are_regression_lines_and_gate(tmp_path: Path) -> None:
    old = write_json(record("a"), [measured("h100-0", kernel_ms=0.04, pull_s=20.0, to_running_s=30.0),
                                   measured("h100-1", kernel_ms=0.04, pull_s=20.0, to_running_s=30.0)],
                     tmp_path / "a.json")
    new = write_json(record("b"), [measured("h100-0", kernel_ms=0.052, pull_s=26.0, to_running_s=45.5),
                                   measured("h100-1", kernel_ms=0.04, pull_s=20.0, to_running_s=30.0)],
                     tmp_path / "b.json")
    status, out, _ = cli(old, new, "--fail-on", "regressions")
    assert status == 1
    assert out.splitlines()[2:] == [
        "metric regressions (tolerance 10%) (3):",
        f"  h100-0 {SMOKE}: kernel_ms 0.040 -> 0.052 (+30.0%)",
        f"  h100-0 {SMOKE}: pull_s 20.00 -> 26.00 (+30.0%)",
        f"  h100-0 {SMOKE}: to_running_s 30.00 -> 45.50 (+51.7%)",
        "summary: 0 new failures, 0 fixed, 0 still failing, 3 metric regressions (6 compared), 0 checks no longer "
        "tested",
    ]
    assert cli(old, new, "--fail-on", "failures")[0] == 0
    doc = json.loads(cli(old, new, "--json")[1])
    assert doc["metric_regressions"][0] == {"check": SMOKE, "node": "h100-0", "metric": "kernel_ms", "unit": "ms",
                                            "old": 0.04, "new": 0.052, "change": 0.3}
    assert cli(new, old)[0] == 0  # faster is an improvement, never a regression


@pytest.mark.parametrize(("old", "new", "regressed"), [
    pytest.param({"kernel_ms": 0.040}, {"kernel_ms": 0.049}, False, id="kernel +22% but under the 0.01 ms floor"),
    pytest.param({"kernel_ms": 0.040}, {"kernel_ms": 0.051}, True, id="kernel +27% and over the floor"),
    pytest.param({"kernel_ms": 0.200}, {"kernel_ms": 0.215}, False, id="kernel over the floor, within tolerance"),
    pytest.param({"pull_s": 2.0}, {"pull_s": 2.9}, False, id="pull +45% but under the 1 s floor"),
    pytest.param({"pull_s": 2.0}, {"pull_s": 3.5}, True, id="pull +75% and over the floor"),
    pytest.param({"pull_s": 20.0}, {"pull_s": 21.5}, False, id="pull over the floor, within tolerance"),
    pytest.param({"to_running_s": 0.0}, {"to_running_s": 0.9}, False, id="start from 0, under the floor"),
    pytest.param({"to_running_s": 0.0}, {"to_running_s": 3.0}, True, id="start from 0, over the floor"),
    pytest.param({"to_running_s": 3.0, "pull_s": 1.0}, {"to_running_s": 60.0}, False,
                 id="start after a pull against one without: not the same figure"),
    pytest.param({"to_running_s": 3.0}, {"to_running_s": 60.0, "pull_s": 55.0}, False,
                 id="start without a pull against one after a pull: not the same figure"),
    pytest.param({"to_running_s": 3.0, "pull_s": 1.0}, {"to_running_s": 60.0, "pull_s": 1.1}, True,
                 id="start after a pull in both runs"),
    pytest.param({"kernel_ms": 0.052}, {"kernel_ms": 0.040}, False, id="a faster kernel is no regression"),
    pytest.param({"h2d_gbps": 53.6}, {"h2d_gbps": 26.8}, True, id="host-to-device halved: a regression"),
    pytest.param({"d2h_gbps": 9.0}, {"d2h_gbps": 8.05}, False, id="device-to-host -11% but under the 1 GB/s floor"),
    pytest.param({"d2h_gbps": 54.0}, {"d2h_gbps": 50.0}, False, id="device-to-host -7%, within tolerance"),
    pytest.param({"h2d_gbps": 26.8}, {"h2d_gbps": 53.6}, False, id="faster copies are no regression"),
])
def test_each_figure_regresses_in_its_worse_direction_beyond_both_the_tolerance_and_its_floor(
        tmp_path: Path, old: dict[str, float], new: dict[str, float], regressed: bool) -> None:
    assert bool(metric_diff(tmp_path, old, new).regressions) is regressed


def test_a_start_from_zero_says_so_instead_of_a_percentage(tmp_path: Path) -> None:
    diff = metric_diff(tmp_path, {"to_running_s": 0.0}, {"to_running_s": 3.0})
    assert render_text(diff).splitlines()[2] == "metric regressions (tolerance 10%) (1):"
    assert render_text(diff).splitlines()[3] == f"  h100-0 {SMOKE}: to_running_s 0.00 -> 3.00 (from 0)"
    assert render_json(diff)["metric_regressions"][0]["change"] is None


def test_the_tolerance_applies_to_every_figure(tmp_path: Path) -> None:
    old, new = {"kernel_ms": 0.04, "pull_s": 20.0}, {"kernel_ms": 0.052, "pull_s": 26.0}  # both +30%
    assert len(metric_diff(tmp_path, old, new, tolerance=0.25).regressions) == 2
    assert metric_diff(tmp_path, old, new, tolerance=0.35).regressions == []


def test_a_figure_of_unknown_direction_is_not_compared_and_said_so(tmp_path: Path) -> None:
    diff = metric_diff(tmp_path, {"mystery": 1.0, "kernel_ms": 0.04}, {"mystery": 9.0, "kernel_ms": 0.04})
    assert (diff.metrics_compared, diff.regressions, diff.unknown_metrics) == (1, [], ["mystery"])
    assert "mystery: no known direction (not a figure the diff knows)" in render_json(diff)["not_compared"]


def test_every_figure_has_a_direction_a_floor_and_a_unit_its_name_ends_with() -> None:
    assert set(METRICS) == {"kernel_ms", "pull_s", "to_running_s", "h2d_gbps", "d2h_gbps"}
    for name, spec in METRICS.items():
        assert spec.higher_is_worse is (spec.unit != "gbps") and spec.floor > 0 and name.endswith(f"_{spec.unit}")


def test_a_smoke_run_records_the_figures_and_diffs_against_itself_with_nothing_regressed(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    suites = pytester.mkdir("suites")
    (suites / "test_smoke.py").write_text((ROOT / "suites" / "test_smoke.py").read_text())
    res = pytest_subprocess(pytester, "suites/test_smoke.py", "-p", "gpuconf.plugin", "--simulate", "healthy-h100",
                            "--report-dir", str(tmp_path / "run"), "-p", "no:cacheprovider")
    assert res.ret == 18, res.outlines[-20:]  # one suite of the sign-off's scope: PARTIAL
    doc = json.loads((tmp_path / "run" / "report.json").read_text())
    metrics = {t["extra"]["node"]: t["extra"]["metrics"] for t in doc["results"]["tests"]}
    assert set(metrics) == {"h100-0", "h100-1"}
    for figures in metrics.values():
        assert set(figures) == {"kernel_ms", "pull_s", "to_running_s"}  # the simulated node pulls the probe image
        assert figures["kernel_ms"] > 0 and figures["pull_s"] > 0 and figures["to_running_s"] >= 0
    junit = (tmp_path / "run" / "junit.xml").read_text()
    assert 'name="gpuconf.metric.kernel_ms"' in junit
    status, out, _ = cli(tmp_path / "run", tmp_path / "run")
    assert status == 0 and out.splitlines()[-1] == (
        "summary: 0 new failures, 0 fixed, 0 still failing, 0 metric regressions (6 compared), 0 checks no longer "
        "tested")
