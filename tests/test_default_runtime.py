"""The default runtime: a GPU pod that names no runtimeClassName gets its GPU (runtime.default-runtime-
injects-gpu), the NVIDIA RuntimeClass is found by its handler whatever its name, and a container no
runtime injected the GPU into is diagnosed as exactly that (real messages in tests/data/real/runtime/),
not as a driver too old for CUDA or an NCCL failure."""

from __future__ import annotations

from pathlib import Path

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


def probe(name: str, gpus: int) -> Sighting:
    """What the cuda-probe saw in a pod on h100-0 given ``gpus`` injected GPUs (0: none injected)."""
    n = expand(load_profile("healthy-h100")).node(NODE)
    code, out = cuda_probe_run(n, visible=[Visible(g) for g in n.present_gpus[:gpus]], image_cuda=parse_cuda("13.0.2"),
                               env={}, compat=False, started_at="2026-12-01T00:00:00.000Z", hostname=name)
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
