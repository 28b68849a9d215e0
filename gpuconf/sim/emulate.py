"""What the real probes would print on a simulated node (issue: probe emulation).

The node agent hands over the facts a real container would have (the node's hardware and driver,
the devices the toolkit injected, the container's env, the image's CUDA and whether it carries
cuda-compat); this module answers with the exact document the cuda-probe prints there, valid
against ``gpuconf/probe_schemas/cuda-probe.v1.json``, and its exit code. The CUDA outcome comes
from ``gpuconf.compat.rules`` — the same engine ``gpuconf predict`` uses — so the simulation
and the prediction cannot disagree silently: a check comparing them tests the engine against the
probe's schema-level behaviour, and a real cluster tests both against reality.

Container *creation* (the legacy-mode requirement check) is decided by ``create_container``; a
container that fails there never runs, so no probe document exists for it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuconf.compat import links, rules, tables
from gpuconf.compat.require import Gpu, HostFacts, check_container
from gpuconf.compat.rules import Mode
from gpuconf.compat.versions import CudaVersion
from gpuconf.sim.profile import SimGpu, SimMigInstance, SimNode

__all__ = ["PROBE_VERSION", "CreateResult", "Visible", "create_container", "cuda_probe_run", "largest_alloc_doc",
           "nccl_probe_run", "nvls_usable", "sm_occupancy_doc"]

PROBE_VERSION = "0.1.0"
#: What containerd/runc print around a failing prestart hook (research/require-cuda.md §2).
_HOOK_ERROR = ("failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create "
               "failed: unable to start container process: error during container init: error running prestart hook "
               "#0: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\n{message}: unknown")


@dataclass(frozen=True)
class Visible:
    """One device the toolkit injected into the container: a full GPU or a MIG instance."""

    gpu: SimGpu
    mig: SimMigInstance | None = None


@dataclass(frozen=True)
class CreateResult:
    ok: bool
    message: str | None = None  # the runtime's error as the kubelet reports it (event and status)


def _native(node: SimNode) -> CudaVersion:
    native = tables.native_cuda(node.driver)
    if native is None:  # the profile loader only accepts branches in the table
        raise ValueError(f"driver branch {node.driver.branch} is not in the data")
    return native


def create_container(node: SimNode, *, env: Sequence[str], visible: Sequence[Visible]) -> CreateResult:
    """The toolkit's part of container creation: only legacy mode evaluates NVIDIA_REQUIRE_*."""
    if node.mode is not Mode.LEGACY:
        return CreateResult(True)
    native = _native(node)
    gpus = tuple(Gpu(node.model_of(v.gpu).compute_capability, node.model_of(v.gpu).nvml_brand, mig=v.mig is not None)
                 for v in visible)
    result = check_container(HostFacts(cuda=f"{native.major}.{native.minor}", driver=str(node.driver), gpus=gpus),
                             env=env)
    if result.ok:
        return CreateResult(True)
    return CreateResult(False, _HOOK_ERROR.format(message=result.message))


# --- the cuda-probe document -------------------------------------------------------------------

_OK = {"code": 0, "name": "cudaSuccess", "message": "no error"}


def _err(code: int, call: str) -> dict[str, Any]:
    e = tables.cuda_error(code)
    return {"call": call, "code": e.code, "name": e.name, "message": e.message, "ms": 0.05, "timed_out": False}


def _ok(call: str, ms: float = 0.01) -> dict[str, Any]:
    return {"call": call, **_OK, "ms": ms, "timed_out": False}


def _brand(name: str) -> dict[str, Any]:
    for row in tables.load("nvml_brands")["brands"]:
        if row["string"] == name:
            return {"enum": int(row["enum"]), "name": name}
    return {"enum": 0, "name": "Unknown"}


def _absent(reason: str) -> dict[str, Any]:
    return {"available": False, "reason": reason}


_MIB = 1 << 20
#: Device memory a CUDA context keeps for itself: what cudaMemGetInfo's free lacks on an idle device.
_CONTEXT_MIB = 512
#: What an MPS client's context takes from its pinned device memory limit before its first cudaMalloc.
_MPS_CLIENT_MIB = 64
#: The probe's bisection (probes/cuda-probe/probe.cu run_largest_alloc).
_ALLOC_GRANULE, _ALLOC_RESOLUTION_DIV, _ALLOC_MAX_STEPS = 2 * _MIB, 128, 12
#: An MPS client's settings, which the cuda-probe reports only when set.
_MPS_ENV = ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT")


def largest_alloc_doc(total: int, fits: int, sfx: str) -> dict[str, Any]:
    """The probe's ``largest_alloc`` on a device of ``total`` bytes where a single cudaMalloc of at
    most ``fits`` bytes succeeds: the same bisection the probe runs, against that threshold."""
    resolution = max(_ALLOC_GRANULE, total // _ALLOC_RESOLUTION_DIV)
    lo, hi, failed_at, steps = 0, total, 0, 0
    last: dict[str, Any] | None = None
    while hi - lo > resolution and steps < _ALLOC_MAX_STEPS:
        mid = (lo + (hi - lo) // 2) // _ALLOC_GRANULE * _ALLOC_GRANULE
        if mid <= lo:
            break
        steps += 1
        if mid <= fits:
            lo = mid
        else:
            hi = failed_at = mid
            last = _err(2, f"cudaMalloc({mid}){sfx}")
    doc: dict[str, Any] = {"ok": True, "largest_ok_bytes": lo, "smallest_failed_bytes": failed_at or None,
                           "steps": steps, "resolution_bytes": resolution,
                           "mem_info": {"free_bytes": total - _CONTEXT_MIB * _MIB, "total_bytes": total},
                           "result": _ok(f"largest_alloc{sfx}")}
    if last is not None:
        doc["last_failure"] = last
    return doc


def _fits(node: SimNode, v: Visible, total: int, env: Mapping[str, str]) -> int:
    """The largest single allocation the container can make on the device: under the device
    plugin's MPS control daemon (a client: CUDA_MPS_PIPE_DIRECTORY set) its pinned device memory
    limit, memory / replicas in whole MiB as the daemon sets it, less the client's context;
    otherwise what the context leaves free. An MPS limit never shows in cudaMemGetInfo."""
    sharing = node.device_plugin.sharing
    if sharing.mps_memory_limit and _mps_client(node, v, env):
        return (v.gpu.memory_mib // sharing.replicas - _MPS_CLIENT_MIB) * _MIB
    return total - _CONTEXT_MIB * _MIB


#: The probe's SM census (probes/cuda-probe/probe.cu run_sm_occupancy): blocks per SM, threads, spin.
_SM_BLOCKS_PER_SM, _SM_THREADS, _SM_SPIN_CYCLES = 32, 32, 100000


def _mps_client(node: SimNode, v: Visible, env: Mapping[str, str]) -> bool:
    """The container is a client of the device plugin's MPS control daemon on a full GPU shared
    more than one way (CUDA_MPS_PIPE_DIRECTORY set)."""
    sharing = node.device_plugin.sharing
    return (v.mig is None and sharing.strategy == "mps" and sharing.replicas > 1
            and bool(env.get("CUDA_MPS_PIPE_DIRECTORY")))


def sm_occupancy_doc(multiprocessors: int, percentage: int | None, sfx: str) -> dict[str, Any]:
    """The probe's ``sm_occupancy`` on a device of ``multiprocessors`` SMs for a client whose
    active thread percentage is ``percentage`` (None: no limit): its blocks reach every SM, or
    ceil(SMs x percentage / 100) of them. cudaDeviceProp.multiProcessorCount stays the device's."""
    blocks = _SM_BLOCKS_PER_SM * max(multiprocessors, 1)
    reach = multiprocessors if percentage is None else min(multiprocessors, -(-multiprocessors * percentage // 100))
    waves = -(-blocks // (reach * _SM_BLOCKS_PER_SM)) if reach else 0
    return {"ok": True, "blocks": blocks, "threads_per_block": _SM_THREADS, "spin_cycles": _SM_SPIN_CYCLES,
            "multiprocessors": multiprocessors, "distinct_sms": reach, "max_smid": reach - 1 if reach else None,
            "unrecorded_blocks": 0, "kernel_ms": round(0.07 * waves, 3), "result": _ok(f"sm_occupancy{sfx}")}


def _thread_percentage(node: SimNode, v: Visible, env: Mapping[str, str]) -> int | None:
    """An MPS client's active thread percentage: the device plugin's daemon sets 100 / replicas
    (``set_default_active_thread_percentage``, integer division); None outside MPS."""
    return 100 // node.device_plugin.sharing.replicas if _mps_client(node, v, env) else None


#: The probe's copies (probes/cuda-probe/probe.cu run_host_device_bw): buffer and timed copies per direction.
_COPY_BYTES, _COPY_ITERATIONS = 256 * _MIB, 8
#: Pinned-copy efficiency against the link's theoretical per-direction rate, from public measurements
#: (tests/data/real/bandwidth/SOURCES.md): PCIe H100 Gen5 57.06 of 63 host-to-device, RTX 4090 Gen4
#: 26.3 / 27.1 of 31.5; GH200 NVLink-C2C 346 of 450 host-to-device, about 15% less back.
_COPY_EFFICIENCY = {"pcie": (0.85, 0.86), "c2c": (0.77, 0.66)}
#: A model the table does not know: a guess (Gen4 x16, the commonest data-center link of the
#: catalogue); a real probe on that hardware settles it.
_UNKNOWN_LINK = (4, 16)


def _link(node: SimNode, gpu: SimGpu) -> tuple[links.Link, links.Link]:
    """(the model's link, the link the GPU trained at: the model's unless pcie-link-degraded)."""
    row = links.host_link(node.model_of(gpu).name)
    model = row.link if row is not None else links.link_for(*_UNKNOWN_LINK)
    assert model is not None
    trained = links.link_for(*gpu.pcie_link) if gpu.pcie_link is not None and model.bus == "pcie" else None
    return model, trained or model


def host_device_bw_doc(node: SimNode, gpu: SimGpu, sfx: str) -> dict[str, Any]:
    """The probe's ``host_device_bw`` on a full GPU: the trained link's rate at the measured efficiency
    (a hair lower on each further GPU, as real siblings differ by a few tenths of a GB/s)."""
    _, trained = _link(node, gpu)
    h2d_eff, d2h_eff = _COPY_EFFICIENCY[trained.bus]
    jitter = 1 - 0.003 * (gpu.index % 4)
    h2d, d2h = round(trained.gbps * h2d_eff * jitter, 2), round(trained.gbps * d2h_eff * jitter, 2)
    total = _COPY_BYTES * _COPY_ITERATIONS
    return {"ok": True, "bytes": _COPY_BYTES, "iterations": _COPY_ITERATIONS, "h2d_gbps": h2d, "d2h_gbps": d2h,
            "h2d_ms": round(total / (h2d * 1e6), 3), "d2h_ms": round(total / (d2h * 1e6), 3),
            "result": _ok(f"host_device_bw{sfx}")}


def _pcie_doc(node: SimNode, gpu: SimGpu) -> dict[str, Any]:
    """NVML's PCIe section for ``gpu``, current values read under the probe's copies. A replay count
    grows only under pcie-replays. A Grace superchip's GPU answers Not Supported: a guess, since no
    public nvidia-smi -q of a GH200's PCI section was found to settle what NVML reports there."""
    model, trained = _link(node, gpu)
    if model.bus != "pcie":
        return _absent("nvmlDeviceGetCurrPcieLinkGeneration: Not Supported")
    if gpu.mig_enabled:  # the probe copies on full GPUs only: nothing ran on this one to read the link under
        return {"link_gen_current": 1, "link_gen_max": trained.gen, "link_gen_gpu_max": model.gen,
                "link_width_current": trained.width, "link_width_max": trained.width, "replay_counter": 0,
                "replay_counter_after_load": _absent("not read: no copy ran on this GPU"),
                "sampled_under_load": False, "load_window_ms": None}
    window = host_device_bw_doc(node, gpu, "")
    before = 0
    return {"link_gen_current": trained.gen, "link_gen_max": trained.gen, "link_gen_gpu_max": model.gen,
            "link_width_current": trained.width, "link_width_max": trained.width, "replay_counter": before,
            "replay_counter_after_load": before + gpu.pcie_replays, "sampled_under_load": True,
            "load_window_ms": round(window["h2d_ms"] + window["d2h_ms"], 3)}


def _device(index: int, node: SimNode, v: Visible, sfx: str, *, ptx_ok: bool, kernel_ms: float) -> dict[str, Any]:
    model = node.model_of(v.gpu)
    mig = v.mig
    name = f"{model.name} MIG {mig.profile}" if mig else model.name
    memory = (mig.memory_mib if mig else v.gpu.memory_mib) << 20
    ptx = _ok(f"ptx_jit{sfx}") if ptx_ok else _err(222, f"ptx_jit{sfx}")
    return {
        "index": index, "name": name, "uuid": mig.uuid if mig else v.gpu.uuid,
        "pci_bus_id": v.gpu.pci_bus_id[4:].lower() if v.gpu.pci_bus_id.startswith("0000") else v.gpu.pci_bus_id,
        "total_memory_bytes": memory, "compute_capability": model.compute_capability, "mig": mig is not None,
        "mig_source": "nvml", "multiprocessors": 132 if mig is None else 16 * mig.slices,
        "properties": _ok(f"cudaGetDeviceProperties{sfx}"),
        "vector_add": {"ok": True, "verified": True, "elements": 1048576, "kernel_ms": kernel_ms, "mismatches": 0,
                       "result": _ok(f"vector_add{sfx}", kernel_ms)},
        "ptx_jit": {"ok": ptx_ok, "verified": ptx_ok, "ptx_target": "compute_75", "result": ptx},
        "host_device_bw": _absent("not measured: a MIG instance (its copy engines are a slice of the GPU's)")
        if mig else host_device_bw_doc(node, v.gpu, sfx),
    }


def _nvml(node: SimNode, visible: Sequence[Visible]) -> dict[str, Any]:
    if node.kernel_driver != node.driver:
        return _absent("nvmlInit_v2: Driver/library version mismatch")
    native = _native(node)
    gpus: list[dict[str, Any]] = []
    seen: set[str] = set()
    for v in visible:
        g = v.gpu
        if g.uuid in seen:
            continue
        seen.add(g.uuid)
        model = node.model_of(g)
        dc = model.gpu_class == "data-center"
        remaps = dc and int(model.compute_capability.split(".")[0]) >= 8
        count: dict[str, Any] = {"corrected": 0, "uncorrected": g.ecc_uncorrected}
        gpus.append({
            "index": g.index, "uuid": g.uuid, "name": model.name, "pci_bus_id": g.pci_bus_id,
            "brand": _brand(model.nvml_brand), "persistence_mode": True,
            "mig_mode": {"current": g.mig_enabled, "pending": False} if model.mig_capable
            else _absent("nvmlDeviceGetMigMode: Not Supported"),
            "ecc": {"enabled": True, "pending": False, "volatile": dict(count), "aggregate": dict(count)} if dc
            else _absent("nvmlDeviceGetEccMode: Not Supported"),
            # Ampere and later remap rows; earlier data-center GPUs retire pages (NVML answers Not Supported
            # to the other query); consumer GPUs have neither
            "retired_pages": {"single_bit": int(g.remap_pending), "double_bit": g.ecc_uncorrected,
                              "pending": g.ecc_uncorrected > 0 or g.remap_pending} if dc and not remaps
            else _absent("nvmlDeviceGetRetiredPages: Not Supported"),
            "remapped_rows": {"correctable": int(g.remap_pending),
                              "uncorrectable": g.ecc_uncorrected + int(g.remap_failed),
                              "pending": g.ecc_uncorrected > 0 or g.remap_pending, "failure": g.remap_failed} if remaps
            else _absent("nvmlDeviceGetRemappedRows: Not Supported"),
            "pcie": _pcie_doc(node, g),
        })
    return {"available": True, "library": "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
            "driver_version": str(node.driver), "cuda_driver_version": native.as_int(), "gpus": gpus}


def cuda_enumerates(visible: Sequence[Visible]) -> list[Visible]:
    """What one CUDA process enumerates of the devices it was given: with any MIG device visible,
    only the first MIG device, and no full GPU (NVIDIA MIG User Guide, "CUDA Device Enumeration":
    a single CUDA process can only enumerate a single MIG device, and no non-MIG GPU once a compute
    instance is enumerated), and never a MIG-enabled GPU itself: without an instance there is nothing
    to run on (cudaGetDeviceCount answers cudaErrorNoDevice when nothing else is visible). NVML
    still lists every device, with its MIG mode."""
    migs = [v for v in visible if v.mig is not None]
    return migs[:1] if migs else [v for v in visible if not v.gpu.mig_enabled]


def cuda_probe_run(node: SimNode, *, visible: Sequence[Visible], image_cuda: CudaVersion, env: Mapping[str, str],
                   compat: bool, started_at: str, hostname: str) -> tuple[int, str]:
    """(exit code, stdout) of the cuda-probe in a container that was created on ``node``."""
    runtime = image_cuda.major_minor
    doc: dict[str, Any] = {
        "schema": "gpuconf.cuda-probe/v1",
        "probe": {"version": PROBE_VERSION, "built_with_cuda": f"{runtime.major}.{runtime.minor}",
                  "archs": "sm_75 sm_80 sm_86 sm_89 sm_90 sm_100 sm_120 compute_120", "timeout_s": 30},
        "started_at": started_at, "duration_ms": 0.0, "exit_code": 0, "exit_reason": "ok", "hostname": hostname,
        "env": {**{k: env.get(k) for k in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES",
                                           "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_REQUIRE_CUDA",
                                           "NVIDIA_DISABLE_REQUIRE")},
                **{k: env[k] for k in _MPS_ENV if k in env}},
        "device_nodes": {"/dev/nvidiactl": bool(visible), "/dev/nvidia-uvm": bool(visible) and node.uvm,
                         "gpus": sorted({f"/dev/nvidia{v.gpu.minor}" for v in visible},
                                        key=lambda p: int(p[len("/dev/nvidia"):]))},
        "runtime": {"value": runtime.as_int(), "version": f"{runtime.major}.{runtime.minor}"},
    }
    present = cuda_enumerates([v for v in visible if v.gpu.present])
    if not visible:
        # No device requested: the toolkit injects no driver at all, exactly like a GPU-less host.
        doc.update(driver={"value": 0, "version": None, "result": _ok("cudaDriverGetVersion")},
                   libcuda=_absent("no libcuda.so* mapped: libcuda.so.1: cannot open shared object file: "
                                   "No such file or directory"),
                   init=_err(35, "cudaFree(0)"), device_count={"value": 0, "result": _err(35, "cudaGetDeviceCount")},
                   devices=[], nvml=_absent("libnvidia-ml.so.1: cannot open shared object file: No such file or "
                                            "directory"))
        return _finish(doc, 3, "CUDA init failed: cudaFree(0) returned 35 cudaErrorInsufficientDriver")

    prediction = rules.predict(
        rules.Node(node.driver, node.model.name, node.model.gpu_class, node.model.nvml_brand,
                   node.model.compute_capability),
        rules.Image(image_cuda, env=tuple(f"{k}={v}" for k, v in env.items()), compat=compat),
        rules.Runtime(toolkit=node.toolkit.version_tuple, mode=node.mode),
    )
    (outcome,) = prediction.outcomes
    if outcome.result == "rejected":
        raise ValueError(f"{node.name}: the container was created, but the rules say creation fails: "
                         f"{outcome.error_message}")
    native = _native(node)
    compat_used = outcome.libcuda != "host"
    lib_cuda = runtime if compat_used else native
    compat_branch = tables.branch_for_cuda(runtime) if compat_used else None
    lib_path = (f"/usr/local/cuda/compat/libcuda.so.{compat_branch}.00.00" if compat_used
                else f"/usr/lib/x86_64-linux-gnu/libcuda.so.{node.driver}")
    doc["driver"] = {"value": lib_cuda.as_int(), "version": f"{lib_cuda.major}.{lib_cuda.minor}",
                     "result": _ok("cudaDriverGetVersion")}
    doc["libcuda"] = {"available": True, "path": lib_path, "version": lib_path.split("libcuda.so.")[1],
                      "compat": compat_used}
    doc["nvml"] = _nvml(node, visible)

    init_error: int | None = None
    if node.kernel_driver != node.driver:
        init_error = 803  # user-mode driver and kernel module disagree
    elif not node.uvm:
        init_error = 999  # nvidia-uvm missing: the driver cannot set up unified memory
    elif outcome.result == "cuda-error":
        init_error = outcome.error_code
    if init_error is not None:
        doc.update(init=_err(init_error, "cudaFree(0)"),
                   device_count={"value": 0, "result": _err(init_error, "cudaGetDeviceCount")}, devices=[])
        e = tables.cuda_error(init_error)
        return _finish(doc, 3, f"CUDA init failed: cudaFree(0) returned {e.code} {e.name}: {e.message}")
    if not present:
        doc.update(init=_err(100, "cudaFree(0)"),
                   device_count={"value": 0, "result": _err(100, "cudaGetDeviceCount")}, devices=[])
        return _finish(doc, 4, "no CUDA device: cudaFree(0) returned 100 cudaErrorNoDevice")

    ptx_ok = outcome.rule != "minor-version"  # newer PTX than the driver can JIT: 222
    devices = [_device(i, node, v, f"(device {i})", ptx_ok=ptx_ok, kernel_ms=0.04) for i, v in enumerate(present)]
    if env.get("GPUCONF_PROBE_MEASURE_ALLOC") == "1":
        for d, v in zip(devices, present, strict=True):
            total = d["total_memory_bytes"]
            d["largest_alloc"] = largest_alloc_doc(total, _fits(node, v, total, env), f"(device {d['index']})")
            d["sm_occupancy"] = sm_occupancy_doc(d["multiprocessors"], _thread_percentage(node, v, env),
                                                 f"(device {d['index']})")
    doc.update(init=_ok("cudaFree(0)", 120.0), devices=devices,
               device_count={"value": len(devices), "result": _ok("cudaGetDeviceCount")})
    broken = [d for d, v in zip(devices, present, strict=True) if v.gpu.xids]
    for d in broken:
        # A GPU with a critical Xid it was not reset after still enumerates, but work on it fails.
        # 999 cudaErrorUnknown: the code the runtime returns when the driver reports a fault it cannot
        # attribute to the call (what applications print as "CUDA error: unknown error" after Xid 79/119);
        # NVIDIA's Xid catalog names a GPU reset as the recovery for these Xids.
        d["vector_add"] = {"ok": False, "verified": False, "elements": 1048576,
                           "result": _err(_XID_CUDA_ERROR, f"vector_add(device {d['index']})")}
    if broken:
        first = broken[0]
        e = tables.cuda_error(_XID_CUDA_ERROR)
        return _finish(doc, 5, "vector_add failed on device(s) " + ", ".join(str(d["index"]) for d in broken)
                       + f"; first: device {first['index']}: vector_add returned {e.code} {e.name}")
    if not ptx_ok:
        return _finish(doc, 7, "PTX JIT failed on every device: 222 cudaErrorUnsupportedPtxVersion")
    return _finish(doc, 0, "ok")


#: The CUDA error a kernel on a GPU with an unrecovered critical Xid returns (see cuda_probe_run).
_XID_CUDA_ERROR = 999


def _finish(doc: dict[str, Any], code: int, reason: str) -> tuple[int, str]:
    doc["exit_code"] = code
    doc["exit_reason"] = reason
    return code, json.dumps(doc, indent=2) + "\n"


# --- the nccl-probe document (single process: every GPU of one pod) ----------------------------

_GIB = 1 << 30
_LARGE = 64 << 20
#: Without an interconnect figure in the profile (PCIe boxes), a conservative PCIe Gen4 ring.
_PCIE_BUSBW_GBPS = 20.0
#: NVLS (NVLink SHARP) exists on NVSwitch systems from Hopper on.
_NVLS_ARCHS = ("hopper", "blackwell")


def nvls_usable(node: SimNode, gpus: int) -> bool:
    """Whether NCCL runs NVLS (NVSwitch multicast) over ``gpus`` GPUs of ``node``: NVLink on a Hopper
    or later board, four GPUs or more, and multicast usable (the nccl-nvls-unavailable fault)."""
    ic = node.interconnect
    return ic.nvlink and ic.nvls and node.model.architecture in _NVLS_ARCHS and gpus >= 4


def _nccl_curve(peak: float, size: int) -> float:
    """busbw at ``size``: latency-bound for small messages, ``peak`` for large ones."""
    return peak * size / (size + (4 << 20))


def nccl_probe_run(node: SimNode, *, visible: Sequence[Visible], image_cuda: CudaVersion, env: Mapping[str, str],
                   started_at: str, hostname: str, max_bytes: int = 4 * _GIB, warmup: int = 5,
                   iters: int = 20) -> tuple[int, str]:
    """(exit code, stdout) of the nccl-probe run over every GPU the pod got, on ``node``'s
    simulated interconnect: the profile's busbw (nccl-slow-link lowers it), a hang when the
    interconnect hangs (nccl-hang), and the transport NCCL would report. ``warmup`` and ``iters``
    are the probe's --warmup/--iters (sizes from 256 MiB time ``max(1, iters // 4)``)."""
    iters_large = max(1, iters // 4)
    runtime = image_cuda.major_minor
    gpus = [v for v in visible if v.gpu.present]
    native = _native(node)
    n = len(gpus)
    doc: dict[str, Any] = {
        "schema": "gpuconf.nccl-probe/v1",
        "probe": {"version": PROBE_VERSION, "built_with_cuda": f"{runtime.major}.{runtime.minor}",
                  "built_with_nccl": "2.27.7", "archs": "sm_75 sm_80 sm_86 sm_89 sm_90 sm_100 sm_120 compute_120"},
        "started_at": started_at, "duration_ms": 0.0, "hostname": hostname, "hung": False,
        "args": {"mode": "single-process", "rank": 0, "world_size": 1, "id_addr": None, "bootstrap_only": False,
                 "min_bytes": 8, "max_bytes": max_bytes, "step_factor": 2, "warmup": warmup, "iters": iters,
                 "iters_large": iters_large, "iters_large_from_bytes": 256 << 20, "op": "sum", "dtype": "float32",
                 "timeout_s": 300, "bootstrap_timeout_s": 120},
        "env": {k: env.get(k) for k in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NCCL_DEBUG",
                                        "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA",
                                        "NCCL_IB_DISABLE", "NCCL_NET", "NCCL_NET_PLUGIN", "NCCL_NET_GDR_LEVEL",
                                        "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE", "NCCL_NVLS_ENABLE",
                                        "NCCL_CUMEM_ENABLE", "NCCL_ALGO", "NCCL_PROTO", "NCCL_TOPO_FILE",
                                        "NCCL_MNNVL_ENABLE")},
        "runtime": {"value": runtime.as_int(), "version": f"{runtime.major}.{runtime.minor}"},
        "driver": {"value": native.as_int(), "version": f"{native.major}.{native.minor}"},
        "nccl": {"version_code": 22707, "version": "2.27.7",
                 "library": {"available": True, "path": "/usr/lib/x86_64-linux-gnu/libnccl.so.2.27.7"}},
        "failure": None,
        "watchdog": {"timeout_s": 300, "grace_s": 15, "fired": False, "hard": False, "step": None, "abort": None},
    }
    not_reached = _absent("not reached")
    debug_settings = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,GRAPH,ENV,BOOTSTRAP",
                      "NCCL_DEBUG_FILE": "/tmp/nccl-probe-sim/nccl-debug.log"}
    if n == 0:
        doc.update(device_count={"value": 0, "result": _err(100, "cudaGetDeviceCount")}, local_gpus=[],
                   bootstrap={"mode": "single-process", "rank": 0, "world_size": 1, "role": "local",
                              "status": "not-run", "reason": "no usable GPU: NCCL unique id not created",
                              "unique_id": _absent("not created: no usable GPU")},
                   comm_init=not_reached, nranks=None, memory=not_reached, sweep=not_reached, summary=not_reached,
                   nccl_debug={"source": "probe", "settings": debug_settings, "captured": False,
                               "reason": "NCCL wrote no debug output (no NCCL call that logs was made)"})
        return _finish(doc, 4, "no GPU visible: cudaGetDeviceCount returned 0 devices")

    model = node.model
    nvlink = node.interconnect.nvlink
    peak = node.interconnect.busbw_gbps or _PCIE_BUSBW_GBPS
    nvls = nvls_usable(node, n)
    transports = (["NVLS", "P2P/CUMEM"] if nvls else ["P2P/CUMEM"]) if nvlink else ["SHM/direct/direct"]
    memory = (gpus[0].mig.memory_mib if gpus[0].mig else gpus[0].gpu.memory_mib) << 20
    limit = min(max_bytes, 1 << ((memory // 3).bit_length() - 1))  # send+recv with headroom, a power of two
    factor = 2 * (n - 1) / n if n > 1 else 0.0
    sizes: list[dict[str, Any]] = []
    size = 8
    hung_at: int | None = None
    while size <= limit:
        if node.interconnect.hang and size >= (1 << 20):
            hung_at = size
            break
        busbw = _nccl_curve(peak, size) if n > 1 else 0.0
        algbw = busbw / factor if factor else _nccl_curve(peak, size)
        count = max(size // 4, 1)
        time_us = round(size / (algbw * 1e3), 3) if algbw else 1.0
        sizes.append({"bytes": size, "count": count, "warmup": warmup,
                      "iters": iters if size < (256 << 20) else iters_large,
                      "time_us": time_us, "time_us_per_gpu": [time_us] * n, "algbw_gbps": round(algbw, 3),
                      "busbw_gbps": round(busbw, 3), "checked_elements": count, "mismatches": 0, "correct": True})
        size *= 2
    large = [s["busbw_gbps"] for s in sizes if s["bytes"] >= _LARGE]
    doc.update(
        device_count={"value": n, "result": _ok("cudaGetDeviceCount")},
        local_gpus=[{"index": i, "name": model.name, "uuid": v.mig.uuid if v.mig else v.gpu.uuid,
                     "pci_bus_id": v.gpu.pci_bus_id[4:].lower(), "total_memory_bytes": memory,
                     "compute_capability": model.compute_capability, "global_rank": i} for i, v in enumerate(gpus)],
        bootstrap={"mode": "single-process", "rank": 0, "world_size": 1, "role": "local", "status": "ok",
                   "reason": "unique id created locally",
                   "unique_id": {"obtained": True, "fingerprint": "5eed5eed5eed5eed",
                                 "result": {"call": "ncclGetUniqueId", "code": 0, "name": "ncclSuccess",
                                            "message": "no error", "last_error": None}}},
        comm_init={"result": {"call": "ncclCommInitRankConfig", "code": 0, "name": "ncclSuccess",
                              "message": "no error", "last_error": None},
                   "ms": 850.0, "nranks": n, "global_ranks": list(range(n)), "blocking": False},
        nranks=n,
        memory={"requested_max_bytes": max_bytes, "local_limit_bytes": limit, "agreed_max_bytes": limit,
                "reduced": limit < max_bytes, "reason": "send and receive buffers must fit with headroom",
                "free_bytes_min": memory, "total_bytes_min": memory, "headroom_bytes": memory - 2 * limit,
                "headroom_rule": "2 x max_bytes <= free memory - 1/3"},
        sweep={"pattern": "(rank+1)*(i%7+1)", "expected": "sum over ranks", "exact_in_float32": True,
               "completed": hung_at is None, "running_bytes": hung_at, "sizes": sizes},
        nccl_debug={"source": "probe", "settings": debug_settings, "captured": True, "lines_total": 200,
                    "nccl_version": f"2.27.7+cuda{runtime.major}.{runtime.minor}", "transports": transports,
                    "transport_kinds": sorted({t.split("/")[0] for t in transports}),
                    "channel_lines": 16 * n, "network": {"name": None, "plugin": None, "lines": []},
                    "nvls": {"supported": nvls, "channels": 16 if nvls else 0, "used": nvls, "lines": []},
                    "gdr": {"enabled": None, "lines": []}, "warnings": [],
                    "excerpt": [f"NCCL INFO Channel 00/0 : 0[0] -> 1[1] via {transports[-1]}"] if n > 1 else [],
                    "excerpt_truncated": False},
    )
    peak_row = max(sizes, key=lambda s: s["busbw_gbps"]) if sizes else None
    doc["summary"] = {
        "nranks": n, "local_gpus": n, "sizes_run": len(sizes), "busbw_factor": factor,
        "peak_busbw_gbps": peak_row["busbw_gbps"] if peak_row else None,
        "peak_algbw_gbps": peak_row["algbw_gbps"] if peak_row else None,
        "peak_at_bytes": peak_row["bytes"] if peak_row else None, "large_message_threshold_bytes": _LARGE,
        "large_message_sizes": len(large),
        "large_message_avg_busbw_gbps": round(sum(large) / len(large), 3) if large else None,
        "mismatches_total": 0, "all_correct": True,
    }
    if hung_at is not None:
        doc["hung"] = True
        doc["watchdog"].update(fired=True, step=f"all_reduce {hung_at} bytes",
                               abort={"attempted": True, "completed": True, "ms": 120.0})
        return _finish(doc, 6, f"timeout: all_reduce of {hung_at} bytes did not finish within 300 s "
                               "(communicators aborted)")
    return _finish(doc, 0, "ok")
