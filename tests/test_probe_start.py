"""Nodes the whole-node probe cannot run on (gpuconf.checks.probe_start): one check owns each cause
and fails once, naming it; every check that depends on the probe is NOT TESTED "blocked by <owner>:
<cause>". A node that refuses every probe image at creation gives one failure, smoke's, naming the
requirement error and the remedy; the other nodes are judged normally. The whole run against the
simulated cluster is read from its report.json."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from serving import pytest_subprocess

from gpuconf.checks.probe_start import Blocked, ProbeBlock, blocked_by, evaluate_block, probe_block, whole_node_block
from gpuconf.cluster.outcomes import ContainerOutcome, PodEvent, PodOutcome, PodTimings
from gpuconf.kit.probes import WholeNodeProbes, blocked
from gpuconf.verdict import Outcome, failed, not_tested, passed

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
            logs: dict[str, str] | None = None, phase: str = "Failed", event: str = "Failed",
            unschedulable: bool = False) -> PodOutcome:
    now = datetime(2026, 12, 2, tzinfo=UTC)
    probe = ContainerOutcome("probe", False, image, "terminated", reason, 128, message, 0, None, now)
    return PodOutcome("inventory-rtx-0", "rtx-0", phase, reason, 128, message, (probe,),
                      {"probe": ""} if logs is None else logs, {}, frozenset(),
                      (PodEvent("Warning", event, message or "", 1, "kubelet", now, now),),
                      PodTimings(now, now, now, None, now), False, unschedulable)


def test_a_requirement_rejection_of_the_least_demanding_image_blocks_the_node():
    block = probe_block("rtx-0", outcome("nvidia/cuda:12.9.1-devel-ubuntu24.04"), MATRIX)
    assert block is not None and (block.cuda, block.required) == ("12.9.1", "12.9")
    assert block.cause == f"no probe image could start on rtx-0: {REQUIREMENT}"  # the wrapper's ": unknown" dropped
    assert block.reason == f"blocked by smoke.vector-add-every-gpu: {block.cause}"
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


#: What the simulated NVIDIA DRA plugin answers for a GPU gone since it published its slice (the real
#: pieces and their sources: tests/data/real/dra/SOURCES.md; gpuconf.sim.agent_model.dra_prepare_error).
UID = "3c8337ad-f366-4541-883d-30b9e99fd6be"
PREPARE = ("Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources failed for "
           f"ResourceClaim inventory-h200-0-gpus-x7k2p: error preparing devices for claim gpuconf/inventory-h200-0-"
           f"gpus-x7k2p:{UID}: unable to create CDI spec file for claim: unable to get device spec for {UID}-gpu-3: "
           "failed to get device handle from UUID: Not Found")
#: A real prepare failure that names no device (tests/data/real/dra/prepare-errors.txt, line 1).
PREPARE_NO_DEVICE = next(line for line in (ROOT / "tests/data/real/dra/prepare-errors.txt").read_text().splitlines()
                         if line.startswith("Failed to prepare") and "capabilities" in line)
IMAGE = "nvidia/cuda:12.9.1-devel-ubuntu24.04"
HOOK_ERROR = ("failed to create containerd task: failed to create shim task: OCI runtime create failed: error running "
              "prestart hook #0: exit status 1, stdout: , stderr: nvidia-container-cli: initialization error: nvml "
              "error: driver not loaded: unknown")


def pending(event: str, message: str, *, unschedulable: bool = False) -> PodOutcome:
    """A whole-node probe that never started: its container waits, the pod stays Pending."""
    return outcome(IMAGE, reason=None, message=message, phase="Pending", event=event, unschedulable=unschedulable)


@pytest.mark.parametrize(("probe", "owner", "cause"), [
    (outcome(IMAGE), "smoke.vector-add-every-gpu", f"no probe image could start on rtx-0: {REQUIREMENT}"),
    (pending("FailedPrepareDynamicResources", PREPARE), "dra.attributes-match-hardware",
     "the whole-node probe's ResourceClaim could not be prepared on rtx-0: the DRA driver cannot prepare gpu-3 "
     "(unable to create CDI spec file for claim: unable to get device spec for "
     f"{UID}-gpu-3: failed to get device handle from UUID: Not Found)"),
    (pending("FailedPrepareDynamicResources", PREPARE_NO_DEVICE), "smoke.vector-add-every-gpu",
     "the whole-node probe never left Pending on rtx-0, a node the node view found schedulable: Pending "
     f"{PREPARE_NO_DEVICE}"),
    (outcome(IMAGE, message=HOOK_ERROR), "smoke.vector-add-every-gpu",
     f"the whole-node probe's container could not start on rtx-0: Failed StartError {HOOK_ERROR}"),
    (pending("FailedScheduling", "0/3 nodes are available: 1 Insufficient nvidia.com/gpu.", unschedulable=True),
     "smoke.vector-add-every-gpu", "the whole-node probe never left Pending on rtx-0, a node the node view found "
     "schedulable: Pending 0/3 nodes are available: 1 Insufficient nvidia.com/gpu."),
    (outcome(IMAGE, reason="Error", message=None), "smoke.vector-add-every-gpu",
     "the whole-node probe on rtx-0 printed no report: Failed Error"),
], ids=["the requirement error of the least demanding image: smoke, with the driver remedy",
        "a claim whose device cannot be prepared: the DRA check of the slice's consistency",
        "a prepare failure naming no device: smoke (the DRA check would not fail for it)",
        "a runtime hook error for every image: smoke",
        "a pod that never leaves Pending: smoke",
        "a container that exited without its report: smoke"])
def test_one_check_owns_each_cause_a_whole_node_probe_prints_nothing_for(probe, owner, cause):
    block = whole_node_block("rtx-0", probe, MATRIX)
    assert block is not None and block.owner == owner and block.cause.startswith(cause), block
    assert block.reason == f"blocked by {owner}: {block.cause}"
    if owner == "smoke.vector-add-every-gpu":  # the owner fails once, naming the cause
        verdict = evaluate_block(block, {})
        assert verdict.check == owner and verdict.node == "rtx-0" and verdict.outcome is Outcome.FAIL
        assert verdict.summary.startswith(block.cause)
        assert isinstance(block, ProbeBlock) or "No GPU container ran on rtx-0" in verdict.remediation


def test_a_probe_that_printed_its_report_blocks_nothing():
    assert whole_node_block("rtx-0", outcome(IMAGE, reason="Completed", logs={"probe": '{"schema": "x"}'}),
                            MATRIX) is None
    assert whole_node_block("rtx-0", None, MATRIX) is None


def test_dependants_are_not_tested_blocked_by_the_owner_which_alone_fails():
    probes = WholeNodeProbes({"rtx-0": pending("FailedPrepareDynamicResources", PREPARE)},
                             selected=frozenset({"dra.attributes-match-hardware", "health.no-uncorrectable-ecc"}))
    with pytest.raises(pytest.skip.Exception) as skipped:
        blocked(probes, "rtx-0", "health.no-uncorrectable-ecc")
    assert str(skipped.value).startswith("blocked by dra.attributes-match-hardware: the whole-node probe's "
                                         "ResourceClaim could not be prepared on rtx-0: the DRA driver cannot "
                                         "prepare gpu-3")
    blocked(probes, "rtx-0", "dra.attributes-match-hardware")  # the owner judges it: no skip
    blocked(WholeNodeProbes({"rtx-0": outcome(IMAGE, reason="Completed", logs={"probe": "{}"})}), "rtx-0", None)


def test_a_dependant_fails_with_the_cause_when_its_owner_is_not_part_of_the_run():
    probes = WholeNodeProbes({"rtx-0": pending("FailedPrepareDynamicResources", PREPARE)},
                             selected=frozenset({"health.no-uncorrectable-ecc"}))
    with pytest.raises(pytest.fail.Exception, match=r"^the whole-node probe's ResourceClaim could not be prepared on "
                       r"rtx-0: .* \(the check that reports this, dra.attributes-match-hardware, is not part of "
                       r"this run\)$"):
        blocked(probes, "rtx-0", "health.no-uncorrectable-ecc")


def test_a_blocked_finding_without_a_requirement_is_the_owners_plain_failure():
    block = Blocked("rtx-0", "smoke.vector-add-every-gpu", "the whole-node probe on rtx-0 printed no report: Failed",
                    observed="Failed", evidence=("Failed: exit 139",))
    verdict = evaluate_block(block, {})
    assert (verdict.outcome, verdict.evidence, verdict.observed) == (Outcome.FAIL, ("Failed: exit 139",), "Failed")


def probe_of(visible_gpus: int) -> PodOutcome:
    """A whole-node probe that printed its report, given ``visible_gpus`` GPUs by the runtime (0: runc,
    no NVIDIA runtime: no device node, no libcuda, no NVML, CUDA error 35)."""
    from gpuconf.compat.versions import parse_cuda
    from gpuconf.sim.emulate import Visible, cuda_probe_run
    from gpuconf.sim.profile import expand, load_profile

    n = expand(load_profile("healthy-h100")).node("h100-0")
    code, out = cuda_probe_run(n, visible=[Visible(g) for g in n.gpus[:visible_gpus]], image_cuda=parse_cuda("13.0.2"),
                               env={}, compat=True, started_at="2026-12-03T00:00:00.000Z", hostname=n.name)
    return outcome(IMAGE, reason="Completed", logs={"probe": out})


def test_a_probe_given_no_gpu_on_a_cluster_without_the_nvidia_runtimeclass_is_that_checks_finding():
    missing = "no RuntimeClass has the NVIDIA runtime's handler 'nvidia'"
    block = whole_node_block("rtx-0", probe_of(0), MATRIX, runtime_missing=missing)
    assert block is not None and block.owner == "scheduling.runtimeclass-present"
    assert block.reason == (f"blocked by scheduling.runtimeclass-present: {missing}: the whole-node probe on rtx-0 "
                            "ran under the node's default runtime and was given no GPU (no /dev/nvidiactl; no libcuda "
                            "(no libcuda.so* mapped: libcuda.so.1: cannot open shared object file: No such file or "
                            "directory); no NVML (libnvidia-ml.so.1: cannot open shared object file: No such file or "
                            "directory))")
    # the runtime injected the GPUs (the default runtime is NVIDIA's): its checks judge the report
    assert whole_node_block("rtx-0", probe_of(8), MATRIX, runtime_missing=missing) is None
    # a class exists: a probe that saw no GPU is its own checks' finding (device nodes, smoke)
    assert whole_node_block("rtx-0", probe_of(0), MATRIX) is None


def test_device_nodes_without_the_driver_are_no_gpu_injected_either():
    """runc with the device plugin's device specs: /dev/nvidia0..7 and /dev/nvidiactl are there, no
    libcuda, no NVML. Nothing was injected: the missing RuntimeClass owns it, as for a probe given no
    device node at all. A driver that is there but fails (CUDA 999, NVML Unknown Error) was injected:
    its checks judge the report."""
    missing = "no RuntimeClass has the NVIDIA runtime's handler 'nvidia'"
    runc = probe_of(0)
    doc = json.loads(runc.logs["probe"])
    doc["device_nodes"] = {"/dev/nvidiactl": True, "/dev/nvidia-uvm": True, "gpus": ["/dev/nvidia0", "/dev/nvidia1"]}
    runc = outcome(IMAGE, reason="Completed", logs={"probe": json.dumps(doc)})
    block = whole_node_block("rtx-0", runc, MATRIX, runtime_missing=missing)
    assert block is not None and block.owner == "scheduling.runtimeclass-present" and block.cause.startswith(missing)
    assert block.observed == ("only the device nodes /dev/nvidia0, /dev/nvidia1, no driver library to use them; no "
                              "libcuda (no libcuda.so* mapped: libcuda.so.1: cannot open shared object file: No such "
                              "file or directory); no NVML (libnvidia-ml.so.1: cannot open shared object file: No "
                              "such file or directory)")
    doc = json.loads(probe_of(8).logs["probe"])
    err = {"code": 999, "name": "cudaErrorUnknown", "message": "unknown error", "ms": 0.05, "timed_out": False}
    doc.update(init={"call": "cudaFree(0)", **err}, devices=[], exit_code=3,
               device_count={"value": 0, "result": {"call": "cudaGetDeviceCount", **err}},
               nvml={"available": False, "reason": "nvmlInit_v2: Unknown Error"})
    lost = outcome(IMAGE, reason="Completed", logs={"probe": json.dumps(doc)})
    assert whole_node_block("rtx-0", lost, MATRIX, runtime_missing=missing) is None
    # a libcuda that is there alone (NVML absent) is a driver injected too
    doc["nvml"] = {"available": False, "reason": "libnvidia-ml.so.1: cannot open shared object file: No such file"}
    lost = outcome(IMAGE, reason="Completed", logs={"probe": json.dumps(doc)})
    assert whole_node_block("rtx-0", lost, MATRIX, runtime_missing=missing) is None


def test_a_dependant_failing_for_its_owners_cause_is_not_tested_blocked_by_the_owner():
    owner = failed("isolation.sees-only-allocated", "h100-0", "a pod given 1 GPU sees 8", causes={"sees-more"})
    other = failed("isolation.envvar-without-request-gets-no-gpu", "h100-0", "a pod asking for none sees 8",
                   causes={"envvar-honoured"})
    mine = failed("isolation.no-request-sees-no-gpu", "h100-0", "a pod asking for no GPU sees 8 GPUs")
    verdict = blocked_by(mine, owner, other)
    assert (verdict.check, verdict.node, verdict.outcome) == (mine.check, "h100-0", Outcome.NOT_TESTED)
    assert verdict.summary == "blocked by isolation.sees-only-allocated: a pod given 1 GPU sees 8"
    fine = passed("isolation.sees-only-allocated", "h100-0", "each pod sees its GPUs")
    assert blocked_by(mine, fine, other).summary == "blocked by isolation.envvar-without-request-gets-no-gpu: " \
        "a pod asking for none sees 8"  # the first owner that fails, in order
    assert blocked_by(mine, fine, None) is mine  # its owners pass: its own finding, judged on its own
    ok = passed(mine.check, "h100-0", "sees none")
    assert blocked_by(ok, owner) is ok  # a dependant that passes stays PASS
    skipped = not_tested(mine.check, "h100-0", "no GPU")
    assert blocked_by(skipped, owner) is skipped


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
    cause = f"no probe image could start on rtx-0: {REQUIREMENT}"
    reason = f"blocked by smoke.vector-add-every-gpu: {cause}"
    assert message.startswith(f"smoke.vector-add-every-gpu on rtx-0: {cause}")
    assert "Upgrade the driver on rtx-0 to branch R575 or later (CUDA 12.9)" in message
    assert "driver 570.211.01 (CUDA 12.8)" in message and "During handling" not in result.stdout.str()
    blocked = {t["extra"]["check"] for t in mine if t["status"] == "skipped" and t.get("message") == reason}
    assert blocked == NOT_TESTED
    assert {(t["extra"].get("not_tested"), t["extra"].get("blocked_by")) for t in mine if t.get("message") == reason
            } == {("blocked", "smoke.vector-add-every-gpu")}
    assert "no output" not in json.dumps(mine)
    # the H100 nodes beside it are judged as on any healthy cluster: nothing fails, the smoke check passes
    others = [t for t in tests if (t.get("extra") or {}).get("node") in ("h100-0", "h100-1")]
    assert not [t for t in others if t["status"] == "failed"]
    assert {t["extra"]["node"] for t in others if t["extra"]["check"] == "smoke.vector-add-every-gpu"
            and t["status"] == "passed"} == {"h100-0", "h100-1"}
    assert result.ret == 1
