"""The default runtime: a GPU pod that names no runtimeClassName gets its GPU (runtime.default-runtime-
injects-gpu), the NVIDIA RuntimeClass is found by its handler whatever its name, and a container no
runtime injected the GPU into is diagnosed as exactly that (real messages in tests/data/real/runtime/),
not as a driver too old for CUDA or an NCCL failure."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpuconf.checks.isolation import Sighting, sighting
from gpuconf.checks.scheduling import evaluate_default_runtime, evaluate_runtime_class, gpu_runtime_class
from gpuconf.cluster.outcomes import make_outcome
from gpuconf.compat.versions import parse_cuda
from gpuconf.diagnose import diagnose
from gpuconf.sim.emulate import Visible, cuda_probe_run
from gpuconf.sim.profile import expand, load_profile
from gpuconf.verdict import Outcome

REAL = Path(__file__).parent / "data" / "real" / "runtime"
NODE = "h100-0"


def probe(name: str, gpus: int, edit: Callable[[dict[str, Any]], int] | None = None) -> Sighting:
    """What the cuda-probe saw in a pod on h100-0 given ``gpus`` injected GPUs (0: none injected);
    ``edit`` changes its document in place and returns the exit code it then has."""
    n = expand(load_profile("healthy-h100")).node(NODE)
    code, out = cuda_probe_run(n, visible=[Visible(g) for g in n.present_gpus[:gpus]], image_cuda=parse_cuda("13.0.2"),
                               env={}, compat=False, started_at="2026-12-01T00:00:00.000Z", hostname=name)
    if edit is not None:
        doc = json.loads(out)
        code = edit(doc)
        doc["exit_code"] = code
        out = json.dumps(doc)
    t = "2026-12-01T00:00:00Z"
    pod = {"metadata": {"name": name}, "spec": {"nodeName": NODE, "containers": [{"name": "probe"}]},
           "status": {"phase": "Succeeded" if code == 0 else "Failed", "containerStatuses": [
               {"name": "probe", "state": {"terminated": {"exitCode": code, "startedAt": t, "finishedAt": t}}}]}}
    return sighting(make_outcome(pod, [], logs={"probe": out}, missing_logs={}))


@pytest.mark.parametrize(("classes", "found"), [
    ([("nvidia", "nvidia")], "nvidia"),
    ([("gpu-runtime", "nvidia"), ("kata", "kata-qemu")], "gpu-runtime"),
    ([("nvidia-cdi", "nvidia-cdi"), ("nvidia", "nvidia")], "nvidia"),
    ([("kata", "kata-qemu")], None),
    ([], None),
], ids=["the GPU Operator's class", "another name, handler nvidia", "nvidia among the operator's classes",
        "no NVIDIA handler", "no RuntimeClass"])
def test_the_nvidia_runtime_class_is_found_by_its_handler_under_any_name(classes, found) -> None:
    assert gpu_runtime_class(classes) == found
    v = evaluate_runtime_class(classes)
    assert (v.outcome is Outcome.PASS) == (found is not None), v.summary


def test_a_class_of_another_name_with_the_nvidia_handler_passes_naming_it() -> None:
    v = evaluate_runtime_class([("gpu-runtime", "nvidia")])
    assert v.summary == "RuntimeClass gpu-runtime with handler nvidia"
    named = evaluate_runtime_class([("nvidia", "runc"), ("nvidia-cdi", "nvidia-cdi")])
    assert named.outcome is Outcome.FAIL
    assert named.summary == "no RuntimeClass has the NVIDIA runtime's handler 'nvidia'"  # a class's name says nothing
    assert named.observed == "RuntimeClasses: nvidia (handler runc), nvidia-cdi (handler nvidia-cdi)"


def test_a_pod_without_runtime_class_that_sees_its_gpu_passes() -> None:
    v = evaluate_default_runtime(NODE, probe("runtime-default-h100-0", 1), probe("inventory-h100-0", 8), "nvidia")
    assert v.outcome is Outcome.PASS
    assert v.summary.startswith("a pod naming no runtimeClassName, given 1 GPU, sees it (GPU-")


def test_a_gpu_given_through_a_dra_claim_is_named_as_given() -> None:
    given = "1 GPU through a DRA claim on gpu.nvidia.com"
    v = evaluate_default_runtime(NODE, probe("runtime-default-h100-0", 1), None, "nvidia", given=given)
    assert v.outcome is Outcome.PASS
    assert v.summary.startswith(f"a pod naming no runtimeClassName, given {given}, sees it (GPU-")
    v = evaluate_default_runtime(NODE, probe("runtime-default-h100-0", 0), None, None, given=given)
    assert v.summary.startswith(f"no runtime injected the GPU: a pod given {given} sees none")


def test_only_the_runtime_class_path_working_is_degraded_naming_the_setting_to_change() -> None:
    v = evaluate_default_runtime(NODE, probe("runtime-default-h100-0", 0), probe("inventory-h100-0", 8), "nvidia")
    assert v.outcome is Outcome.DEGRADED and v.node == NODE
    assert v.summary.startswith("only pods naming runtimeClassName nvidia get their GPU: a pod without it was "
                                "allocated 1 nvidia.com/gpu but no runtime injected it (no /dev/nvidiactl; no libcuda")
    assert "pod inventory-h100-0 (runtimeClassName nvidia) sees 8 GPU(s)" in v.evidence
    message = v.message()
    assert 'default_runtime_name = "nvidia"' in message and 'default_runtime = "nvidia" in [crio.runtime]' in message
    assert "nvidia-ctk runtime configure --runtime=containerd --set-as-default" in message


def test_no_path_injecting_the_gpu_is_said_plainly() -> None:
    none = probe("runtime-default-h100-0", 0)
    v = evaluate_default_runtime(NODE, none, None, None)
    assert v.outcome is Outcome.DEGRADED
    assert v.summary.startswith("no runtime injected the GPU: a pod given 1 nvidia.com/gpu sees none")
    assert "no RuntimeClass for the NVIDIA runtime either" in v.summary
    v = evaluate_default_runtime(NODE, none, probe("inventory-h100-0", 0), "nvidia")
    assert v.summary.startswith("no runtime injected the GPU, with or without RuntimeClass nvidia")
    v = evaluate_default_runtime(NODE, none, Sighting("pod inventory-h100-0", None, "Pending"), "nvidia")
    assert v.outcome is Outcome.NOT_TESTED and "could not be compared: Pending" in v.summary


@pytest.mark.parametrize("name", sorted(p.name for p in REAL.glob("*.txt")))
def test_real_messages_of_a_pod_no_runtime_injected_are_diagnosed_as_such(name: str) -> None:
    text = (REAL / name).read_text()
    found = diagnose(text)
    assert [d.category for d in found] == ["gpu-not-injected"], [d.category for d in found]
    assert "default_runtime_name" in found[0].remediation
    assert "runtime.default-runtime-injects-gpu" in found[0].checks


def test_the_diagnosis_wins_over_the_cuda_and_nccl_errors_that_follow() -> None:
    """The probe in a pod nothing injected prints CUDA error 35 next to the missing libcuda; an NCCL
    job there fails with a CUDA failure. Neither is the cause."""
    none = probe("runtime-default-h100-0", 0)
    assert none.report is not None and none.report.init.code == 35
    text = "\n".join([str(none.report.libcuda_absent_reason),
                      "CUDA init failed: cudaFree(0) returned 35 cudaErrorInsufficientDriver",
                      "NCCL WARN Cuda failure 'CUDA driver version is insufficient for CUDA runtime version'"])
    assert [d.category for d in diagnose(text)] == ["gpu-not-injected"]
    # without the missing library, the same CUDA error keeps its own diagnosis
    assert "cuda-insufficient-driver" in [d.category for d in diagnose(text.split("\n", 1)[1])]


def device_nodes_only(doc: dict[str, Any]) -> int:
    """runc given the device plugin's device specs: the kubelet created /dev/nvidia0, /dev/nvidiactl
    and /dev/nvidia-uvm, but no runtime injected libcuda or libnvidia-ml (CUDA error 35)."""
    doc["device_nodes"] = {"/dev/nvidiactl": True, "/dev/nvidia-uvm": True, "gpus": ["/dev/nvidia0"]}
    return 3


def driver_but_unknown_error(doc: dict[str, Any]) -> int:
    """The NVIDIA runtime injected the driver and the GPU, but the container lost access to it (the
    systemd cgroup driver after a daemon-reload): CUDA 999, NVML "Unknown Error"."""
    err = {"code": 999, "name": "cudaErrorUnknown", "message": "unknown error", "ms": 0.05, "timed_out": False}
    doc["init"] = {"call": "cudaFree(0)", **err}
    doc["device_count"] = {"value": 0, "result": {"call": "cudaGetDeviceCount", **err}}
    doc["devices"] = []
    doc["nvml"] = {"available": False, "reason": "nvmlInit_v2: Unknown Error"}
    return 3


def driver_but_no_device(doc: dict[str, Any]) -> int:
    """The driver's libraries injected but not the GPU: CUDA answers cudaErrorNoDevice, NVML initialises
    and lists no GPU."""
    err = {"code": 100, "name": "cudaErrorNoDevice", "message": "no CUDA-capable device is detected", "ms": 0.05,
           "timed_out": False}
    doc["init"] = {"call": "cudaFree(0)", **err}
    doc["device_count"] = {"value": 0, "result": {"call": "cudaGetDeviceCount", **err}}
    doc["devices"] = []
    doc["nvml"]["gpus"] = []
    doc["device_nodes"]["gpus"] = []
    return 3


NO_LIBRARIES = ("no libcuda (no libcuda.so* mapped: libcuda.so.1: cannot open shared object file: No such file or "
                "directory); no NVML (libnvidia-ml.so.1: cannot open shared object file: No such file or directory)")


def test_device_nodes_without_the_driver_are_no_gpu_the_default_runtime_is_not_nvidias() -> None:
    """What runc gives a GPU pod when the device plugin passes device specs: /dev/nvidia0 and no driver.
    The pod cannot use the GPU; that is the misconfiguration this check exists for, not a pass."""
    runc = probe("runtime-default-h100-0", 0, device_nodes_only)
    v = evaluate_default_runtime(NODE, runc, probe("inventory-h100-0", 8), "nvidia")
    assert v.outcome is Outcome.DEGRADED
    assert v.summary == ("only pods naming runtimeClassName nvidia get their GPU: a pod without it was allocated 1 "
                         "nvidia.com/gpu but no runtime injected it (only the device nodes /dev/nvidia0, no driver "
                         f"library to use them; {NO_LIBRARIES}); the node's default runtime is not the NVIDIA runtime")
    assert v.evidence == ("pod runtime-default-h100-0: allocated 1 nvidia.com/gpu, only the device nodes "
                          f"/dev/nvidia0, no driver library to use them; {NO_LIBRARIES}",
                          "pod inventory-h100-0 (runtimeClassName nvidia) sees 8 GPU(s)")
    assert "nvidia-ctk runtime configure --runtime=containerd --set-as-default" in v.message()
    alone = evaluate_default_runtime(NODE, runc, None, None)
    assert alone.outcome is Outcome.DEGRADED
    assert alone.summary == ("no runtime injected the GPU: a pod given 1 nvidia.com/gpu sees none (only the device "
                             f"nodes /dev/nvidia0, no driver library to use them; {NO_LIBRARIES}), and the cluster has "
                             "no RuntimeClass for the NVIDIA runtime either")
    both = evaluate_default_runtime(NODE, runc, probe("inventory-h100-0", 0, device_nodes_only), "nvidia")
    assert both.summary.startswith("no runtime injected the GPU, with or without RuntimeClass nvidia (only the device "
                                   "nodes /dev/nvidia0")


def test_a_driver_that_cannot_read_its_gpu_says_nothing_about_the_runtime() -> None:
    """libcuda is there (a runtime injected the driver) but CUDA and NVML both fail with an error that
    does not say whether the GPU was given: NOT TESTED, pointing at the checks that judge that error."""
    v = evaluate_default_runtime(NODE, probe("runtime-default-h100-0", 1, driver_but_unknown_error),
                                 probe("inventory-h100-0", 8), "nvidia")
    assert v.outcome is Outcome.NOT_TESTED and v.kind == "could-not-run"
    assert v.summary == ("a pod naming no runtimeClassName, allocated 1 nvidia.com/gpu, shows no GPU, but its "
                         "readings do not say whether one was injected (libcuda: /usr/lib/x86_64-linux-gnu/libcuda.so."
                         "580.159.03; CUDA: cudaErrorUnknown (999): unknown error; NVML: nvmlInit_v2: Unknown Error): "
                         "not judged; smoke.vector-add-every-gpu and driver.nvml-initializes judge why the driver "
                         "cannot reach the GPUs")


def test_a_driver_reading_no_device_is_a_gpu_not_given() -> None:
    v = evaluate_default_runtime(NODE, probe("runtime-default-h100-0", 1, driver_but_no_device), None, "nvidia")
    assert v.outcome is Outcome.DEGRADED
    assert v.summary == ("a pod naming no runtimeClassName was allocated 1 nvidia.com/gpu and given the driver "
                         "(libcuda /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.03) but no GPU: CUDA sees no device "
                         "(cudaErrorNoDevice (100): no CUDA-capable device is detected)")
    assert v.evidence == ("pod runtime-default-h100-0: allocated 1 nvidia.com/gpu, CUDA sees no device "
                          "(cudaErrorNoDevice (100): no CUDA-capable device is detected), device nodes none",)
    assert v.remedy is not None and "deviceListStrategy" in v.remedy
