"""Nodes the probes cannot run on (gpuconf.checks.probe_start): a node that refuses every probe
image at creation gives one failure, smoke's, naming the requirement error and the remedy; every
other check that needs a probe there is NOT TESTED with that reason; the other nodes are judged
normally. The whole run against the simulated cluster is read from its report.json."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from serving import pytest_subprocess

from gpuconf.checks.probe_start import probe_block
from gpuconf.cluster.outcomes import ContainerOutcome, PodEvent, PodOutcome, PodTimings

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
#: The real wording under containerd/runc with the toolkit in legacy mode
#: (tests/fixtures/diagnose/docker-legacy-mode-cuda12.8.txt), for CUDA 12.9.
REQUIREMENT = ("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.9, please update your driver "
               "to a newer version, or use an earlier cuda container")
START_ERROR = ("failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create "
               "failed: unable to start container process: error during container init: error running prestart hook "
               f"#0: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\n{REQUIREMENT}: unknown")
MATRIX = ["12.9.1", "13.0.2", "13.2.0", "13.0.2"]
#: Every check of the suites that needs a probe on the node (the not-applicable ones say their own reason).
NOT_TESTED = {
    "bandwidth.pcie-link-at-max", "bandwidth.host-device-floor", "compat.current-cuda-major-runs",
    "health.no-uncorrectable-ecc", "health.row-remapping-not-failed", "health.no-pending-memory-repair",
    "inventory.gpu-count-matches-expected", "labels.gfd-matches-hardware", "driver.nvml-initializes",
    "runtime.cuda-device-nodes-present", "isolation.sees-only-allocated", "isolation.concurrent-pods-disjoint",
    "isolation.only-requesting-container-sees-gpu", "metrics.gpu-metrics-present", "nccl.allreduce-completes",
    "nccl.busbw-above-floor", "nccl.transport-expected", "nccl.pairwise-completes", "nccl.pairwise-busbw-above-floor",
    "runtime.default-runtime-injects-gpu", "sharing.oversubscription-runs", "sharing.mps-client-limits",
    "sharing.mps-thread-limit",
}


def outcome(image: str, *, reason: str | None = "StartError", message: str | None = START_ERROR,
            logs: dict[str, str] | None = None) -> PodOutcome:
    now = datetime(2026, 12, 2, tzinfo=UTC)
    probe = ContainerOutcome("probe", False, image, "terminated", reason, 128, message, 0, None, now)
    return PodOutcome("inventory-rtx-0", "rtx-0", "Failed", reason, 128, message, (probe,),
                      {"probe": ""} if logs is None else logs, {}, frozenset(),
                      (PodEvent("Warning", "Failed", message or "", 1, "kubelet", now, now),),
                      PodTimings(now, now, now, None, now), False, False)


def test_a_requirement_rejection_of_the_least_demanding_image_blocks_the_node():
    block = probe_block("rtx-0", outcome("nvidia/cuda:12.9.1-devel-ubuntu24.04"), MATRIX)
    assert block is not None and (block.cuda, block.required) == ("12.9.1", "12.9")
    assert block.reason == f"no probe image could start on rtx-0: {REQUIREMENT}"  # the wrapper's ": unknown" dropped
    prebuilt = probe_block("rtx-0", outcome("registry.example.com/gpuconf/cuda-probe:0.4.0-cuda12.9.1"), MATRIX)
    assert prebuilt is not None and prebuilt.cuda == "12.9.1"


@pytest.mark.parametrize(("image", "kw"), [
    ("nvidia/cuda:13.0.2-devel-ubuntu24.04", {"message": START_ERROR.replace("12.9", "13.0")}),
    ("nvidia/cuda:12.9.1-devel-ubuntu24.04", {"reason": "Error", "message": None}),
    ("nvidia/cuda:12.9.1-devel-ubuntu24.04", {"message": "error running prestart hook #0: nvidia-container-cli: "
                                              "initialization error: nvml error: driver not loaded"}),
    ("nvidia/cuda:12.9.1-devel-ubuntu24.04", {"logs": {"probe": '{"schema": "gpuconf.cuda-probe/v1"}'}}),
], ids=["a newer image refused: an older one might start", "a probe that ran and failed",
        "another creation error (its own checks judge it)", "a container that printed its document"])
def test_what_does_not_block_a_node(image, kw):
    assert probe_block("rtx-0", outcome(image, **kw), MATRIX) is None


def test_a_node_no_probe_can_start_on_has_one_failure_and_its_dependent_checks_are_not_tested(
        pytester: pytest.Pytester):
    text = (ROOT / "gpuconf/data/sim_profiles/geforce-workstation.yaml").read_text()
    profile = pytester.path / "rejected.yaml"
    profile.write_text(text.replace("faults: []", "faults: [{id: probe-images-rejected, pool: rtx, node: 0}]"))
    suites = pytester.mkdir("suites")
    for suite in sorted((ROOT / "suites").glob("test_*.py")):
        (suites / suite.name).write_text(suite.read_text())
    reports = pytester.path / "reports"
    result = pytest_subprocess(pytester, "suites", "-p", "gpuconf.plugin", "--simulate", str(profile),
                               "--report-dir", str(reports), "-p", "no:cacheprovider",
                               "-o", "junit_family=xunit1")
    tests = json.loads((reports / "report.json").read_text())["results"]["tests"]
    mine = [t for t in tests if (t.get("extra") or {}).get("node") == "rtx-0"]
    failed = [t for t in mine if t["status"] == "failed"]
    assert [t["extra"]["check"] for t in failed] == ["smoke.vector-add-every-gpu"], result.stdout.str()[-3000:]
    message = failed[0]["message"]
    reason = f"no probe image could start on rtx-0: {REQUIREMENT}"
    assert message.startswith(f"smoke.vector-add-every-gpu on rtx-0: {reason}")
    assert "Upgrade the driver on rtx-0 to branch R575 or later (CUDA 12.9)" in message
    assert "driver 570.133.20 (CUDA 12.8)" in message and "During handling" not in result.stdout.str()
    blocked = {t["extra"]["check"] for t in mine if t["status"] == "skipped" and t.get("message") == reason}
    assert blocked == NOT_TESTED
    assert all(t["extra"].get("not_tested") == "could-not-run" for t in mine if t.get("message") == reason)
    assert "no output" not in json.dumps(mine)
    # the H100 nodes beside it are judged as on any healthy cluster: nothing fails, the smoke check passes
    others = [t for t in tests if (t.get("extra") or {}).get("node") in ("h100-0", "h100-1")]
    assert not [t for t in others if t["status"] == "failed"]
    assert {t["extra"]["node"] for t in others if t["extra"]["check"] == "smoke.vector-add-every-gpu"
            and t["status"] == "passed"} == {"h100-0", "h100-1"}
    assert result.ret == 1
