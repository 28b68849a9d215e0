"""compat.current-cuda-major-runs: a node where the images of the newest CUDA major in the matrix are
refused or fail at CUDA init is DEGRADED, naming them, even though the compatibility engine predicted
it (so compat.outcome-matches-prediction passes): workloads built for the current CUDA cannot run."""

from __future__ import annotations

import json
import re
from pathlib import Path

from serving import pytest_subprocess

from gpuconf.checks.compat import DISABLE_REQUIRE, MatrixRow, Observation, evaluate_current_major_runs
from gpuconf.verdict import Outcome

pytest_plugins = ["pytester"]

RUNS = Observation("runs", "", libcuda="580.95.05")
REQUIRE = ("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.2, please update your driver "
           "to a newer version, or use an earlier cuda container")


def row(cuda: str, observed: Observation, env: tuple[tuple[str, str], ...] = ()) -> MatrixRow:
    return MatrixRow(f"compat-n-{cuda}", cuda, f"nvidia/cuda:{cuda}-devel-ubuntu24.04", env, (), observed)


def test_a_node_where_every_current_major_image_runs_passes() -> None:
    v = evaluate_current_major_runs("n", None, [row("12.9.1", RUNS), row("13.0.2", RUNS), row("13.2.0", RUNS)])
    assert v.outcome is Outcome.PASS
    assert v.summary.startswith("the CUDA 13 images run on n: nvidia/cuda:13.0.2-devel-ubuntu24.04: runs")


def test_current_major_images_that_fail_are_degraded_and_named_with_the_twin_s_runtime_error() -> None:
    err = Observation("cuda-error", "cudaErrorSystemDriverMismatch (803)", error_code=803)
    rows = [row("12.9.1", RUNS), row("13.0.2", err), row("13.2.0", Observation("rejected", REQUIRE)),
            row("13.2.0", err, (DISABLE_REQUIRE,))]
    v = evaluate_current_major_runs("n", None, rows)
    assert v.outcome is Outcome.DEGRADED and v.node == "n"
    assert v.summary == ("CUDA 13 images fail on n: nvidia/cuda:13.0.2-devel-ubuntu24.04 cuda-error "
                         "cudaErrorSystemDriverMismatch (803); nvidia/cuda:13.2.0-devel-ubuntu24.04 cuda-error "
                         "cudaErrorSystemDriverMismatch (803) (with NVIDIA_DISABLE_REQUIRE=1; without it: "
                         f"{REQUIRE})")
    assert "Upgrade the node's driver" in v.message()


def test_the_older_major_failing_is_not_this_check_s_business_and_no_outcome_is_not_a_pass() -> None:
    err = Observation("cuda-error", "cudaErrorInsufficientDriver (35)", error_code=35)
    assert evaluate_current_major_runs("n", None, [row("12.9.1", err), row("13.0.2", RUNS)]).outcome is Outcome.PASS
    other = Observation("other", "pod Pending: image pull back-off")
    v = evaluate_current_major_runs("n", None, [row("13.0.2", other)])
    assert v.outcome is Outcome.NOT_TESTED and "image pull back-off" in v.summary
    assert evaluate_current_major_runs("n", None, []).outcome is Outcome.NOT_TESTED


def test_one_current_major_image_unobserved_is_not_a_pass_and_names_it() -> None:
    """13.0.2 ran and 13.2.0 showed no outcome: that the CUDA 13 images run is half proven, so NOT TESTED
    (the sibling comparisons, outcome-matches-prediction and forward-compat-runs, say the same)."""
    other = Observation("other", "pod Pending: image pull back-off")
    v = evaluate_current_major_runs("n", None, [row("12.9.1", RUNS), row("13.0.2", RUNS), row("13.2.0", other)])
    assert (v.outcome, v.kind) == (Outcome.NOT_TESTED, "could-not-run")
    assert v.summary == ("1 of 2 CUDA 13 images' outcome on n could not be observed: "
                         "nvidia/cuda:13.2.0-devel-ubuntu24.04: pod Pending: image pull back-off (seen: "
                         "nvidia/cuda:13.0.2-devel-ubuntu24.04: runs (libcuda 580.95.05))")


def test_a_node_on_a_branch_cuda_13_does_not_support_is_degraded_by_the_compat_suite(pytester) -> None:
    """healthy-h100 with one node on R550 (native CUDA 12.4, no forward compatibility for 13.x on that
    branch): the suite predicts its 13.x failures, and this check still degrades the node."""
    root = Path(__file__).resolve().parents[1]
    profile = re.sub(r"^faults:.*$", "", (root / "gpuconf/data/sim_profiles/healthy-h100.yaml").read_text(), flags=re.M)
    path = pytester.path / "r550.yaml"
    path.write_text(profile + '\nfaults:\n  - {id: driver-skew, pool: h100, node: 0, driver: "550.163.01"}\n')
    suites = pytester.mkdir("suites")
    (suites / "test_compat.py").write_text((root / "suites" / "test_compat.py").read_text())
    reports = pytester.path / "reports"
    result = pytest_subprocess(pytester, "suites", "-p", "gpuconf.plugin", "--simulate", str(path), "--report-dir",
                               str(reports), "-p", "no:cacheprovider")
    tests = json.loads((reports / "report.json").read_text())["results"]["tests"]
    failed = {((t.get("extra") or {}).get("check"), (t.get("extra") or {}).get("node")): t for t in tests
              if t["status"] == "failed"}
    assert set(failed) == {("compat.current-cuda-major-runs", "h100-0")}, result.stdout.str()[-3000:]
    assert failed[("compat.current-cuda-major-runs", "h100-0")]["extra"]["outcome"] == "degraded"
    # the driver is the one NVML reads in the node's whole-node probe, and the verdict says so
    assert "CUDA 13 images fail on h100-0 (NVIDIA H100 80GB HBM3, driver 550.163.01 from NVML in the whole-node " \
           "probe, native CUDA 12.4): nvidia/cuda:13.0.2-devel-ubuntu24.04 cuda-error" in result.stdout.str()
