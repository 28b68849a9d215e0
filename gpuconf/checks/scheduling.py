"""Scheduling checks: what the scheduler says when GPUs cannot be had, the runtime class, and
whether a GPU pod that names no runtime class gets its GPU (the node's default runtime)."""

from __future__ import annotations

from collections.abc import Sequence

from gpuconf.checks.isolation import Sighting
from gpuconf.cluster import PodOutcome
from gpuconf.nodes.view import NVIDIA_HANDLER, RuntimeClassRef
from gpuconf.nodes.view import gpu_runtime_class as nodes_runtime_class
from gpuconf.outcomes import COULD_NOT_RUN
from gpuconf.probes.cuda import CudaProbeReport
from gpuconf.verdict import Verdict, failed, not_tested, passed

__all__ = ["NVIDIA_HANDLER", "evaluate_default_runtime", "evaluate_over_ask", "evaluate_runtime_class",
           "gpu_runtime_class"]


#: The stable core of kube-scheduler's message (domain.md §4): wording around it varies by version.
INSUFFICIENT = "Insufficient nvidia.com/gpu"


def evaluate_over_ask(outcome: PodOutcome, *, requested: int, budget_s: float) -> Verdict:
    cid = "scheduling.over-ask-is-insufficient"
    events = [e for e in outcome.events if e.reason == "FailedScheduling"]
    evidence = tuple(f"{e.reason}: {e.message}" for e in events[:3])
    if outcome.node:
        return failed(cid, None, f"a pod asking for {requested} GPUs, more than any node advertises, was scheduled "
                      f"to {outcome.node}", expected="Pending (unschedulable)", observed=f"bound to {outcome.node}, "
                      f"phase {outcome.phase}", evidence=evidence)
    if not any(INSUFFICIENT in e.message for e in events):
        seen = events[0].message if events else "no FailedScheduling event"
        return failed(cid, None, f"the pod stayed Pending but the scheduler did not say {INSUFFICIENT!r} "
                      f"within {budget_s:.0f} s", expected=f"a FailedScheduling event with {INSUFFICIENT!r}",
                      observed=seen, evidence=evidence)
    return passed(cid, None, f"Pending with {INSUFFICIENT!r} as it should be", evidence=evidence)


def gpu_runtime_class(names_to_handlers: Sequence[tuple[str, str]]) -> str | None:
    """The RuntimeClass GPU pods should name, found by the NVIDIA runtime's handler whatever its name
    (gpuconf.nodes.gpu_runtime_class; the node view answers per node); None when there is none."""
    return nodes_runtime_class(RuntimeClassRef(name, handler) for name, handler in names_to_handlers)


def evaluate_runtime_class(names_to_handlers: Sequence[tuple[str, str]]) -> Verdict:
    """A RuntimeClass whose handler is the NVIDIA runtime's exists, under any name (the GPU
    Operator's is called nvidia; clusters call theirs nvidia-gpu, nvidia-cdi, gpu-runtime...)."""
    cid = "scheduling.runtimeclass-present"
    found = gpu_runtime_class(names_to_handlers)
    if found is None:
        return failed(cid, None, f"no RuntimeClass has the NVIDIA runtime's handler {NVIDIA_HANDLER!r}",
                      expected=f"a RuntimeClass (any name) with handler {NVIDIA_HANDLER}",
                      observed="RuntimeClasses: " + (", ".join(f"{name} (handler {handler or 'none'})" for name, handler
                                                                in sorted(names_to_handlers)) or "none"))
    return passed(cid, None, f"RuntimeClass {found} with handler {NVIDIA_HANDLER}")


def _sees_gpu(report: CudaProbeReport) -> list[str]:
    """The GPUs a container saw: CUDA's devices and NVML's GPUs. Its /dev/nvidiaN nodes alone are no
    GPU: the kubelet creates them for any runtime when the device plugin passes device specs, and a
    container without the driver's libraries (runc) cannot use them."""
    found = [d.uuid or f"CUDA device {d.index}" for d in report.devices]
    return found + [u for g in report.nvml_gpus if (u := g.uuid or f"NVML GPU {g.index}") not in found]


#: dlopen's words for a library that is not in the container at all.
_NO_LIBRARY = "cannot open shared object"


def _no_driver(report: CudaProbeReport) -> bool:
    """No driver library is in the container: libcuda.so.1 and libnvidia-ml.so.1 both failed to open
    as absent. Both come from the host's driver, injected by the NVIDIA runtime (or CDI) alone, so
    this is no runtime having injected anything, whatever /dev/nvidia* the kubelet created."""
    return all(why is not None and _NO_LIBRARY in why for why in (report.libcuda_absent_reason,
                                                                  report.nvml_absent_reason))


def _reads_no_gpu(report: CudaProbeReport) -> str | None:
    """What a working driver reading says when it shows the container no GPU: CUDA answering
    cudaErrorNoDevice, NVML initialised and listing none; or None where neither could read (an
    error that says nothing about what the container was given)."""
    if report.init.code == 100:
        return f"CUDA sees no device ({report.init})"
    if report.nvml_absent_reason is None and not report.nvml_gpus:
        return "NVML lists no GPU"
    return None


def _not_injected(report: CudaProbeReport) -> str:
    """What a container without the driver (:func:`_no_driver`) lacked, in the words of the probe:
    the device nodes it has or lacks, and both driver libraries."""
    parts = []
    if nodes := [str(p) for p in report.device_nodes.get("gpus") or ()]:
        parts.append(f"only the device nodes {', '.join(nodes)}, no driver library to use them")
    if not report.device_nodes.get("/dev/nvidiactl"):
        parts.append("no /dev/nvidiactl")
    return "; ".join([*parts, f"no libcuda ({report.libcuda_absent_reason})",
                      f"no NVML ({report.nvml_absent_reason})"])


def evaluate_default_runtime(node: str, default: Sighting, with_class: Sighting | None,
                             runtime_class: str | None, *, given: str | None = None) -> Verdict:
    """A pod given one GPU that names no runtimeClassName sees it (the node's default runtime is the
    NVIDIA runtime, or CDI injects it). ``with_class``: the whole-node probe, which names
    ``runtime_class`` (None: the cluster has no RuntimeClass for the NVIDIA runtime). ``given``: what
    the pod was given (``1 GPU through a DRA claim on gpu.nvidia.com``: the DRA driver injects it
    through CDI)."""
    cid = "runtime.default-runtime-injects-gpu"
    allocated = given or "1 nvidia.com/gpu"
    if default.report is None:
        why = default.failure or "nothing"
        return failed(cid, node, f"the pod without runtimeClassName gave no probe output: {why}",
                      expected="a probe report", observed=why)
    seen = _sees_gpu(default.report)
    if seen:
        return passed(cid, node, f"a pod naming no runtimeClassName, given {given or '1 GPU'}, sees it "
                      f"({', '.join(seen)})",
                      expected="the allocated GPU visible", observed=", ".join(seen))
    if not _no_driver(default.report):
        # A driver library is in the container: a runtime injected the driver. Either a working
        # reading shows no GPU (the allocated GPU was not given: the check's failure), or CUDA and NVML
        # both failed for another reason, which proves nothing about what the pod was given: NOT
        # TESTED, and the checks that judge a GPU the driver cannot use (smoke, NVML) say why.
        return _driver_without_gpu(cid, node, default.where, default.report, allocated)
    lacks = _not_injected(default.report)
    evidence = (f"{default.where}: allocated {allocated}, {lacks}",)
    if runtime_class is None:
        return failed(cid, node, f"no runtime injected the GPU: a pod given {allocated} sees none ({lacks}), "
                      "and the cluster has no RuntimeClass for the NVIDIA runtime either",
                      expected="the allocated GPU visible", observed=lacks, evidence=evidence)
    if with_class is None or with_class.report is None:
        return not_tested(cid, node, f"{node}: a pod naming no runtimeClassName sees no GPU ({lacks}), but the "
                          f"RuntimeClass {runtime_class} path could not be compared: "
                          + (with_class.failure if with_class is not None and with_class.failure else "no probe"),
                          kind=COULD_NOT_RUN)
    if not _sees_gpu(with_class.report):
        return failed(cid, node, f"no runtime injected the GPU, with or without RuntimeClass {runtime_class} "
                      f"({lacks})", expected="the allocated GPU visible", observed=lacks, evidence=evidence)
    return failed(cid, node, f"only pods naming runtimeClassName {runtime_class} get their GPU: a pod without it "
                  f"was allocated {allocated} but no runtime injected it ({lacks}); the node's default "
                  "runtime is not the NVIDIA runtime", expected="the allocated GPU visible without a runtimeClassName",
                  observed=lacks, evidence=(*evidence, f"{with_class.where} (runtimeClassName {runtime_class}) "
                                            f"sees {len(_sees_gpu(with_class.report))} GPU(s)"))


def _driver_without_gpu(cid: str, node: str, where: str, report: CudaProbeReport, allocated: str) -> Verdict:
    """The verdict for a pod without runtimeClassName (``where``) that saw no GPU and is not proven
    driverless (:func:`_no_driver`)."""
    zero = _reads_no_gpu(report)
    if zero is None:  # NVML did not initialise either (one that did saw a GPU, or none: _reads_no_gpu)
        libcuda = report.libcuda_path if report.libcuda_absent_reason is None else report.libcuda_absent_reason
        return not_tested(cid, node, f"a pod naming no runtimeClassName, allocated {allocated}, shows no GPU, but "
                          f"its readings do not say whether one was injected (libcuda: {libcuda}; CUDA: "
                          f"{report.init}; NVML: {report.nvml_absent_reason}): not judged; smoke.vector-add-every-gpu "
                          "and driver.nvml-initializes judge why the driver cannot reach the GPUs", kind=COULD_NOT_RUN)
    # a reading that answered: CUDA through libcuda, or NVML initialised
    driver = f"libcuda {report.libcuda_path}" if report.libcuda_absent_reason is None else "libnvidia-ml"
    return failed(cid, node, f"a pod naming no runtimeClassName was allocated {allocated} and given the driver "
                  f"({driver}) but no GPU: {zero}", expected="the allocated GPU visible", observed=zero,
                  evidence=(f"{where}: allocated {allocated}, {zero}, device nodes "
                            f"{', '.join(str(p) for p in report.device_nodes.get('gpus') or ()) or 'none'}",),
                  remedy="The runtime injected the driver's libraries but not the allocated GPU: the device "
                  "plugin's device list (NVIDIA_VISIBLE_DEVICES, volume mounts or CDI annotations) did not reach "
                  "the runtime. Make the device plugin's deviceListStrategy one the toolkit accepts (with "
                  "accept-nvidia-visible-devices-as-volume-mounts for volume-mounts, CDI enabled for cdi-*), "
                  "then restart the device plugin and the runtime on the node.")
