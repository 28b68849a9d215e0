"""Smoke: every GPU a node advertises runs a verified kernel in a normally scheduled pod."""

from __future__ import annotations

from gpuconf.outcomes import NOT_APPLICABLE
from gpuconf.probes.cuda import CudaProbeReport
from gpuconf.verdict import Verdict, failed, not_tested, passed

__all__ = ["CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "DEVICE_NODES_OWNER", "evaluate_vector_add",
           "judged_after_device_nodes"]

#: cuInit's "mismatch between the versions of the display driver and the CUDA driver" (cuda.h,
#: CUresult): the loaded kernel module and the user-mode libraries differ, typically a driver
#: upgraded in place without a reboot. The GPU is fine; resetting or replacing it fixes nothing.
CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803
DRIVER_MISMATCH_REMEDY = (
    "The loaded NVIDIA kernel module and the driver's user-mode libraries are different versions (a driver "
    "upgraded without a reboot; driver.nvml-initializes says the same): drain the node and reboot it, or unload "
    "and reload the nvidia kernel modules, so both come from the installed driver. The GPU itself needs no reset.")
#: The check that owns a GPU pod's missing device nodes (gpuconf/checks/inventory.py).
DEVICE_NODES_OWNER = "runtime.cuda-device-nodes-present"
UVM = "/dev/nvidia-uvm"
#: CUDA needs /dev/nvidia-uvm, which exists only while the nvidia_uvm kernel module is loaded; without
#: it cudaFree(0) fails with cudaErrorUnknown (999) while nvidia-smi and NVML still work (domain.md §1;
#: NVIDIA/nvidia-docker#139, ggml-org/llama.cpp#7218: "unknown error", fixed by modprobe nvidia_uvm).
UVM_REMEDY = (
    "CUDA cannot start without /dev/nvidia-uvm, and the probe pod on {node} had none: the nvidia_uvm kernel module "
    "is not loaded on {node} (nvidia-smi and NVML work without it). Load it on the node (modprobe nvidia-uvm, or "
    "nvidia-modprobe -u -c=0, which also creates /dev/nvidia-uvm) and make it load at boot; where the GPU Operator "
    "manages the driver, its driver container loads it: read that pod's log on {node}. The GPU itself needs no reset "
    "or replacement.")


def evaluate_vector_add(node: str, probe: CudaProbeReport, *, requested: int, replicas: int = 1,
                        physical: int | None = None, note: str = "", mig_skip: str | None = None) -> Verdict:
    """``requested``: how many GPUs the pod asked for; each must show up and pass. With time-slicing
    (``replicas`` per GPU, the node's nvidia.com/gpu.replicas label) a pod asking for every replica
    gets every physical GPU once: CUDA sees ``physical`` devices (GFD's nvidia.com/gpu.count), or
    ``requested / replicas`` when that is not labelled. ``mig_skip``: why the mig suite skips the
    node (gpuconf.checks.mig.mig_skip_reason), None where it judges the node's MIG instances."""
    cid = "smoke.vector-add-every-gpu"
    shared = replicas > 1 and (physical is not None or requested % replicas == 0)
    seen_as = (physical if physical is not None else requested // replicas) if shared else requested
    if requested < 1:
        return not_tested(cid, node, "the node advertises no nvidia.com/gpu to request", kind=NOT_APPLICABLE)
    if not probe.init.ok:
        return _no_cuda(cid, node, probe, requested)
    migs = sorted({str(d.name or d.uuid) for d in probe.devices if d.mig})
    if migs and len(probe.devices) < seen_as:
        # The device plugin handed out MIG instances as nvidia.com/gpu (its strategy is single,
        # whatever GFD labels): CUDA enumerates one MIG device per process, so the missing devices
        # are no lost GPUs. The mig suite judges them where the node's labels, resources or DRA slice
        # show MIG; where they show none it skips the node, and nothing else exercises the instances.
        given = f"the pod asked for {requested} GPUs and was given MIG instances ({', '.join(migs)})"
        if mig_skip is None:
            return not_tested(cid, node, f"{given}: one CUDA process enumerates one MIG device, so a whole-node "
                              "probe cannot exercise them; the mig suite judges this node", kind=NOT_APPLICABLE)
        return failed(cid, node, f"{given}, but nothing says {node} has MIG and the mig suite skips it ({mig_skip}): "
                      "the device plugin hands out MIG instances as nvidia.com/gpu while GFD labels none, so no "
                      "check exercises them and workloads asking for a GPU get a MIG slice",
                      expected=f"{seen_as} whole GPUs, or MIG instances the node's labels show",
                      observed=f"{len(probe.devices)} MIG device(s) enumerated", evidence=(f"mig suite: {mig_skip}",),
                      remedy="Run GFD and the device plugin with the same MIG strategy (the GPU Operator's "
                      "mig.strategy, or the nvidia.com/device-plugin.config label naming a config whose migStrategy "
                      "GFD shares) and restart both on the node; the mig suite then judges its instances.")
    bad = [d for d in probe.devices if not d.vector_add_ok]
    per_gpu = tuple(f"GPU {d.index} {d.uuid}: " + ("ok" if d.vector_add_ok else f"FAILED {d.vector_add}")
                    + (f", {d.kernel_ms} ms" if d.kernel_ms is not None else "") for d in probe.devices)
    asked = f"{requested} GPUs" + (f" ({seen_as} GPUs shared {replicas} ways)" if shared else "")
    if len(probe.devices) != seen_as:
        return failed(cid, node, f"the pod asked for {asked} and CUDA sees {len(probe.devices)}",
                      expected=f"{seen_as} GPUs", observed=f"{len(probe.devices)} GPUs", evidence=per_gpu)
    if bad:
        return failed(cid, node, f"{len(bad)} of {seen_as} GPUs failed the vector-add kernel: "
                      + ", ".join(f"GPU {d.index} ({d.vector_add})" for d in bad),
                      expected="every element correct on every GPU", observed=f"{len(bad)} failing", evidence=per_gpu)
    return passed(cid, node, f"vector-add verified on all {seen_as} GPUs{note}", evidence=per_gpu)


def _no_cuda(cid: str, node: str, probe: CudaProbeReport, requested: int) -> Verdict:
    """CUDA did not initialise: the remedy for the cause the probe shows (issue 36: remedies from the
    cause), the check's own (a GPU to inspect, reset or replace) only where it shows none."""
    uvm_missing = probe.device_nodes.get(UVM) is False  # observed absent, not merely unreported
    cause = f" ({UVM} is missing in the pod: the nvidia_uvm kernel module is not loaded)" if uvm_missing else ""
    if uvm_missing:
        remedy: str | None = UVM_REMEDY.format(node=node)
    elif probe.init.code == CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
        remedy = DRIVER_MISMATCH_REMEDY
    else:
        remedy = None
    return failed(cid, node, f"CUDA could not start in the probe pod: {probe.init}{cause}",
                  expected=f"a CUDA context on {requested} GPUs", observed=str(probe.init),
                  evidence=(probe.exit_reason,) + ((f"device nodes: {UVM} absent",) if uvm_missing else ()),
                  remedy=remedy)


def judged_after_device_nodes(verdict: Verdict, probe: CudaProbeReport, *, owner_selected: bool) -> Verdict:
    """One root cause, one failure (issue 26): where CUDA could not start and the pod lacks a device
    node CUDA needs (/dev/nvidia-uvm without nvidia_uvm, /dev/nvidiactl, every /dev/nvidiaN),
    runtime.cuda-device-nodes-present owns the cause: smoke is NOT TESTED "blocked by" it when that
    check is part of the run (``owner_selected``), and otherwise fails with the cause's remedy."""
    from gpuconf.checks.inventory import evaluate_cuda_device_nodes
    from gpuconf.checks.probe_start import blocked_by

    if not owner_selected or probe.init.ok or verdict.node is None:
        return verdict
    return blocked_by(verdict, evaluate_cuda_device_nodes(verdict.node, probe))
