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
        "checks appeared (1):",
        f"  {TRANSPORT}: 2 pass",
        "checks disappeared (1):",
        f"  {GFD}: was 1 pass",
        "node verdicts changed (1):",
        "  h100-0: DEGRADED -> FAIL",
        "metric regressions (tolerance 10%) (1):",
        f"  h100-0 {BUSBW}: busbw >= 1 GiB 365.0 -> 292.0 GB/s (-20.0%)",
        "summary: 1 new failure, 1 fixed, 1 still failing, 1 metric regression (2 compared)",
    ]


def test_the_same_run_twice_has_nothing_to_say_and_exits_0(reports: Pair) -> None:
    old, _ = reports
    status, out, _ = cli(old, old)
    assert status == 0
    assert out.splitlines()[2:] == [
        "still failing (2):",
        f"  DEGRADED h100-0 {NVML}: DEGRADED: NVML slow to initialise",
        f"  FAIL h100-1 {SMOKE}: 1 of 8 GPUs failed the vector-add kernel",
        "summary: 0 new failures, 0 fixed, 2 still failing, 0 metric regressions (2 compared)",
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
    status, out, _ = cli(new, old)
    assert status == 0 and f"  NOT-TESTED h100-0 {ALLOC} (was DEGRADED)" in out.splitlines()
    assert "no longer tested (1):" in out.splitlines()


def test_a_check_that_passed_and_is_now_skipped_is_no_longer_tested_with_the_reason(tmp_path: Path) -> None:
    old = write_json(record("a"), [result(BUSBW, "h100-0", "pass", curve=CURVE)], tmp_path / "a.json")
    new = write_json(record("b"), [result(BUSBW, "h100-0", "not-tested", "not run: h100-0 has 7/8 GPUs allocatable")],
                     tmp_path / "b.json")
    status, out, _ = cli(old, new)
    assert status == 0
    assert out.splitlines()[2:] == [
        "no longer tested (1):",
        f"  NOT-TESTED h100-0 {BUSBW} (was PASS): not run: h100-0 has 7/8 GPUs allocatable",
        "node verdicts changed (1):",
        "  h100-0: PASS -> NOT-TESTED",
        "summary: 0 new failures, 0 fixed, 0 still failing, 0 metric regressions (0 compared)",
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
    assert "**1 new failure, 1 fixed, 1 still failing, 1 metric regression (2 compared)**" in lines
    assert "### New failures (1)" in lines and "### Metric regressions (tolerance 10%) (1)" in lines
    assert f"- FAIL h100-0 {ALLOC} (was PASS): h100-0 allocatable nvidia.com/gpu is 7, capacity 8" in lines


def test_a_run_that_could_not_start_says_so_in_its_line(tmp_path: Path) -> None:
    broken = RunRecord(provenance="kubeconfig:/k", started=1_700_000_000.0, finished=1_700_000_001.0, exit_status=11,
                       run_id="r", error="cluster unreachable:\n  connection refused")
    old = write_json(record("a"), [result(ALLOC, "h100-0", "pass")], tmp_path / "a.json")
    new = write_json(broken, [], tmp_path / "b.json")
    status, out, _ = cli(old, new)
    assert status == 0  # nothing newly fails: CI gates on the suite's own exit status (11) for this
    assert out.splitlines()[1] == (f"new: {new}, run r, kubeconfig:/k, 2023-11-14T22:13:20Z, "
                                   "NOT STARTED: cluster unreachable: connection refused")
    assert f"  {ALLOC}: was 1 pass" in out.splitlines()


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
    assert status == 0 and lines[0] == f"old: {old}, run a, simulated:healthy-h100, 2023-11-14T22:13:20Z"
    assert lines[1] == f"new: {new}, run b, simulated:healthy-h100, 2023-11-14T22:13:20Z, " + coverage.line()
    assert f"  ABSENT h100-1 {ALLOC} (was PASS): {why}" in lines
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
    for name, simulate, expected in (("old", "healthy-h100", 0), ("new", str(faulty), 1)):
        runs[name] = tmp_path / name
        res = pytest_subprocess(pytester, "suites/test_inventory.py", "-p", "gpuconf.plugin", "--simulate",
                                simulate, "--report-dir", str(runs[name]), "-p", "no:cacheprovider",
                                "--expect", str(strict))
        assert res.ret == expected, res.outlines[-20:]
    status, out, err = cli(runs["old"], runs["new"])
    assert (status, err) == (1, "")
    lines = out.splitlines()
    groups = [line for line in lines if not line.startswith(" ")][2:]
    assert groups == ["new failures (1):", "node verdicts changed (1):",
                      "summary: 1 new failure, 0 fixed, 0 still failing, 0 metric regressions (0 compared)"]
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
        "summary: 0 new failures, 0 fixed, 0 still failing, 3 metric regressions (6 compared)",
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
    assert res.ret == 0, res.outlines[-20:]
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
        "summary: 0 new failures, 0 fixed, 0 still failing, 0 metric regressions (6 compared)")
