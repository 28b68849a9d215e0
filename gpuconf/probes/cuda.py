"""gpuconf cuda-probe output (schema ``gpuconf.cuda-probe/v1``) → a typed report.

The probe's exit codes (probes/cuda-probe/README.md) are mirrored in ``EXIT_CODES`` so a report
can name what a bare exit status means even when the output is lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuconf.probes.errors import ProbeParseError
from gpuconf.probes.schema import parse_document

__all__ = ["EXIT_CODES", "SCHEMA_ID", "CudaCall", "CudaProbeReport", "DeviceReport", "HostDeviceBandwidth",
           "LargestAlloc", "NvmlGpu", "PcieLink", "PeerLine", "Rendezvous", "SmOccupancy", "parse_cuda_probe"]

SCHEMA_ID = "gpuconf.cuda-probe/v1"

EXIT_CODES = {
    0: "ok: CUDA initialised, every device ran and verified its kernels",
    2: "usage error (bad flag)",
    3: "CUDA init failed: context creation (cudaFree(0)) returned an error other than no-device",
    4: "no CUDA device: init returned cudaErrorNoDevice (100) or the device count is 0",
    5: "a device failed its vector-add kernel or its verification",
    6: "watchdog: a CUDA or NVML call did not return in time",
    7: "only the PTX-JIT kernel failed (typical of minor-version compatibility: 222)",
    8: "internal probe error",
}


@dataclass(frozen=True)
class CudaCall:
    """The result of one CUDA call as the probe recorded it."""

    code: int
    name: str
    message: str
    call: str | None = None
    ms: float | None = None
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.code == 0 and not self.timed_out

    def __str__(self) -> str:
        return f"{self.name} ({self.code}): {self.message}" + (" [timed out]" if self.timed_out else "")


def _call(obj: dict[str, Any]) -> CudaCall:
    return CudaCall(int(obj["code"]), str(obj["name"]), str(obj["message"]), obj.get("call"), obj.get("ms"),
                    bool(obj.get("timed_out", False)))


@dataclass(frozen=True)
class LargestAlloc:
    """The probe's ``--measure-alloc`` bisection on one device: the largest single cudaMalloc that
    succeeded (``largest_ok_bytes``) and the smallest that failed with cudaErrorMemoryAllocation
    (``smallest_failed_bytes``, None when none did); the true largest lies between them. Under MPS
    this is where a pinned device memory limit shows: cudaMemGetInfo (``free_bytes``) does not
    reflect it. ``absent_reason``: why the device was not measured (the other facts are then 0/None)."""

    ok: bool
    largest_ok_bytes: int
    smallest_failed_bytes: int | None
    steps: int
    resolution_bytes: int
    result: CudaCall | None
    free_bytes: int | None = None
    total_bytes: int | None = None
    absent_reason: str | None = None


def _largest_alloc(obj: dict[str, Any] | None) -> LargestAlloc | None:
    if obj is None:
        return None
    if obj.get("available") is False:
        return LargestAlloc(False, 0, None, 0, 0, None, absent_reason=str(obj["reason"]))
    info = obj.get("mem_info") or {}
    return LargestAlloc(bool(obj["ok"]), int(obj.get("largest_ok_bytes", 0)), obj.get("smallest_failed_bytes"),
                        int(obj.get("steps", 0)), int(obj.get("resolution_bytes", 0)), _call(obj["result"]),
                        info.get("free_bytes"), info.get("total_bytes"))


@dataclass(frozen=True)
class SmOccupancy:
    """The probe's ``--measure-alloc`` SM census on one device: a kernel of ``blocks`` spinning
    blocks recorded the SM each ran on; ``distinct_sms`` of the device's ``multiprocessors``
    (cudaDeviceProp.multiProcessorCount) ran them. Under MPS the control daemon's active thread
    percentage confines a client's kernels to about that share of the SMs. ``absent_reason``: why
    the device was not measured (the other facts are then 0/None)."""

    ok: bool
    blocks: int
    multiprocessors: int | None
    distinct_sms: int | None
    kernel_ms: float | None
    result: CudaCall | None
    absent_reason: str | None = None


def _sm_occupancy(obj: dict[str, Any] | None) -> SmOccupancy | None:
    if obj is None:
        return None
    if obj.get("available") is False:
        return SmOccupancy(False, 0, None, None, None, None, absent_reason=str(obj["reason"]))
    return SmOccupancy(bool(obj["ok"]), int(obj.get("blocks", 0)), obj.get("multiprocessors"),
                       obj.get("distinct_sms"), obj.get("kernel_ms"), _call(obj["result"]))


@dataclass(frozen=True)
class HostDeviceBandwidth:
    """The probe's pinned-memory copies on one device: ``iterations`` cudaMemcpyAsync of ``bytes``
    each way, timed with CUDA events, in decimal GB/s (None where that direction did not complete;
    ``result`` says why). ``absent_reason``: why the device was not measured (a MIG instance, the
    probe run with --copy-mib 0, properties unreadable)."""

    ok: bool
    bytes: int
    iterations: int
    h2d_gbps: float | None
    d2h_gbps: float | None
    result: CudaCall | None
    absent_reason: str | None = None


def _host_device_bw(obj: dict[str, Any] | None) -> HostDeviceBandwidth | None:
    if obj is None:
        return None
    if obj.get("available") is False:
        return HostDeviceBandwidth(False, 0, 0, None, None, None, absent_reason=str(obj["reason"]))
    return HostDeviceBandwidth(bool(obj["ok"]), int(obj["bytes"]), int(obj["iterations"]), obj.get("h2d_gbps"),
                               obj.get("d2h_gbps"), _call(obj["result"]))


@dataclass(frozen=True)
class PcieLink:
    """One GPU's PCIe link as NVML reports it: the generation and width now (``*_current``, read
    while the probe's copies ran when ``under_load``: an idle GPU trains its link down to save
    power) and the most the GPU and the system together allow (``*_max``); ``gen_gpu_max`` is the
    GPU's own maximum. ``replays``: the replay counter before the copies, ``replays_after_load``
    after them, ``load_ms`` apart. A fact NVML could not give is None, with its reason in ``unread``."""

    gen_current: int | None
    gen_max: int | None
    gen_gpu_max: int | None
    width_current: int | None
    width_max: int | None
    replays: int | None
    replays_after_load: int | None
    under_load: bool
    load_ms: float | None
    unread: tuple[str, ...] = ()


_PCIE_FIELDS = ("link_gen_current", "link_gen_max", "link_gen_gpu_max", "link_width_current", "link_width_max",
                "replay_counter", "replay_counter_after_load")


def _pcie(obj: Any) -> PcieLink | None:
    if not isinstance(obj, dict) or obj.get("available") is False:
        return None
    values = {k: _value(obj, k) for k in _PCIE_FIELDS}
    unread = tuple(f"{k}: {obj[k].get('reason')}" for k in _PCIE_FIELDS
                   if isinstance(obj.get(k), dict) and obj[k].get("available") is False)
    return PcieLink(values["link_gen_current"], values["link_gen_max"], values["link_gen_gpu_max"],
                    values["link_width_current"], values["link_width_max"], values["replay_counter"],
                    values["replay_counter_after_load"], bool(obj.get("sampled_under_load", False)),
                    obj.get("load_window_ms"), unread)


@dataclass(frozen=True)
class DeviceReport:
    """One CUDA device. Facts are None when cudaGetDeviceProperties failed (see ``properties``)."""

    index: int
    name: str | None
    uuid: str | None
    pci_bus_id: str | None
    total_memory_bytes: int | None
    compute_capability: str | None
    mig: bool | None
    vector_add_ok: bool
    vector_add: CudaCall
    kernel_ms: float | None
    ptx_jit_ok: bool
    ptx_jit: CudaCall
    properties: CudaCall | None = None
    largest_alloc: LargestAlloc | None = None  # only when the probe ran with --measure-alloc
    sm_occupancy: SmOccupancy | None = None  # only when the probe ran with --measure-alloc
    host_device_bw: HostDeviceBandwidth | None = None  # None: a probe before the copies were measured


@dataclass(frozen=True)
class NvmlGpu:
    index: int
    uuid: str | None
    name: str | None
    brand: str | None
    persistence_mode: bool | None
    mig_enabled: bool | None
    ecc_volatile_uncorrected: int | None
    ecc_aggregate_uncorrected: int | None
    retired_pages_pending: bool | None
    remapped_rows_pending: bool | None
    remapped_rows_failure: bool | None
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)
    pcie: PcieLink | None = None  # None: NVML gave no PCIe section (an older probe, or not readable)
    pcie_absent_reason: str | None = None

    @property
    def pci_bus_id(self) -> str | None:
        value = self.raw.get("pci_bus_id")
        return value if isinstance(value, str) else None


def _value(obj: Any, *keys: str) -> Any:
    """A nested fact, or None where the probe reported it absent."""
    for key in keys:
        if not isinstance(obj, dict) or obj.get("available") is False or key not in obj:
            return None
        obj = obj[key]
    if isinstance(obj, dict) and obj.get("available") is False:
        return None
    return obj


@dataclass(frozen=True)
class PeerLine:
    """One peer of a rendezvous as this probe reached it: its line (name, how long it had held its
    devices, their UUIDs as it reported them) or, when it never answered, the last error."""

    peer: str  # as the probe was given it: HOST or HOST:PORT
    answered: bool
    attempts: int
    name: str | None = None
    held_ms: float | None = None
    cuda_uuids: tuple[str, ...] = ()
    nvml_uuids: tuple[str, ...] = ()
    error: str | None = None

    @property
    def uuids(self) -> tuple[str, ...]:
        """The peer's devices: CUDA's (MIG-aware) where it had any, else NVML's."""
        return self.cuda_uuids or self.nvml_uuids


@dataclass(frozen=True)
class Rendezvous:
    """The probe's ``--rendezvous``: whether it held its devices while every peer held its own
    (``met``: it read every peer's line and every peer read its own), the overlap it proved in ms
    (None when they did not meet) and, when not met, why."""

    peers: tuple[str, ...]
    name: str
    met: bool
    overlap_ms: float | None
    waited_ms: float
    wait_s: float
    reason: str | None
    lines: tuple[PeerLine, ...]
    acknowledged_by: tuple[str, ...]
    cuda_uuids: tuple[str, ...] = ()
    nvml_uuids: tuple[str, ...] = ()


def _rendezvous(obj: dict[str, Any] | None) -> Rendezvous | None:
    if obj is None:
        return None
    lines = tuple(PeerLine(str(p["peer"]), bool(p["answered"]), int(p["attempts"]), p.get("name"), p.get("held_ms"),
                           tuple(p.get("cuda_uuids") or ()), tuple(p.get("nvml_uuids") or ()), p.get("error"))
                  for p in obj["peer_lines"])
    return Rendezvous(tuple(obj["peers"]), str(obj["name"]), bool(obj["met"]), obj["overlap_ms"],
                      float(obj["waited_ms"]), float(obj["wait_s"]), obj["reason"], lines,
                      tuple(obj["acknowledged_by"]), tuple(obj["cuda_uuids"]), tuple(obj["nvml_uuids"]))


@dataclass(frozen=True)
class CudaProbeReport:
    exit_code: int
    exit_reason: str
    runtime_cuda: str | None  # cudaRuntimeGetVersion: the cudart in the probe (layer 3)
    driver_cuda: str | None  # cudaDriverGetVersion: what the loaded libcuda supports (layer 2)
    init: CudaCall
    device_count: int
    devices: tuple[DeviceReport, ...]
    libcuda_path: str | None
    libcuda_version: str | None
    libcuda_compat: bool | None
    libcuda_absent_reason: str | None
    nvml_driver_version: str | None
    nvml_absent_reason: str | None
    nvml_gpus: tuple[NvmlGpu, ...]
    env: dict[str, str | None]
    device_nodes: dict[str, Any]
    raw: dict[str, Any] = field(repr=False, compare=False)
    rendezvous: Rendezvous | None = None  # None: a probe run without --rendezvous (or an older probe)

    @property
    def timed_out(self) -> bool:
        return self.exit_code == 6


def parse_cuda_probe(stdout: str, *, exit_code: int | None = None, source: str = "cuda-probe") -> CudaProbeReport:
    """Parse one cuda-probe run. ``exit_code``, when known, must agree with the document."""
    doc = parse_document(stdout, SCHEMA_ID, source=source)
    if exit_code is not None and exit_code != doc["exit_code"]:
        raise ProbeParseError(f"the process exited {exit_code} but its document says {doc['exit_code']} "
                              f"({doc['exit_reason']})", source=source)
    devices = tuple(
        DeviceReport(
            index=d["index"], name=d["name"], uuid=d["uuid"], pci_bus_id=d["pci_bus_id"],
            total_memory_bytes=d["total_memory_bytes"], compute_capability=d["compute_capability"], mig=d["mig"],
            vector_add_ok=d["vector_add"]["ok"], vector_add=_call(d["vector_add"]["result"]),
            kernel_ms=d["vector_add"].get("kernel_ms"), ptx_jit_ok=d["ptx_jit"]["ok"],
            ptx_jit=_call(d["ptx_jit"]["result"]),
            properties=_call(d["properties"]) if "properties" in d else None,
            largest_alloc=_largest_alloc(d.get("largest_alloc")),
            sm_occupancy=_sm_occupancy(d.get("sm_occupancy")),
            host_device_bw=_host_device_bw(d.get("host_device_bw")),
        )
        for d in doc["devices"]
    )
    nvml = doc["nvml"]
    gpus = tuple(
        NvmlGpu(
            index=g["index"], uuid=g["uuid"], name=g["name"], brand=_value(g, "brand", "name"),
            persistence_mode=_value(g, "persistence_mode"), mig_enabled=_value(g, "mig_mode", "current"),
            ecc_volatile_uncorrected=_value(g, "ecc", "volatile", "uncorrected"),
            ecc_aggregate_uncorrected=_value(g, "ecc", "aggregate", "uncorrected"),
            retired_pages_pending=_value(g, "retired_pages", "pending"),
            remapped_rows_pending=_value(g, "remapped_rows", "pending"),
            remapped_rows_failure=_value(g, "remapped_rows", "failure"), raw=g, pcie=_pcie(g.get("pcie")),
            pcie_absent_reason=str(g["pcie"].get("reason")) if isinstance(g.get("pcie"), dict)
            and g["pcie"].get("available") is False else None,
        )
        for g in (nvml.get("gpus", []) if nvml.get("available") else [])
    )
    lib = doc["libcuda"]
    return CudaProbeReport(
        exit_code=doc["exit_code"], exit_reason=doc["exit_reason"],
        runtime_cuda=doc["runtime"]["version"], driver_cuda=doc["driver"]["version"],
        init=_call(doc["init"]), device_count=doc["device_count"]["value"], devices=devices,
        libcuda_path=lib.get("path"), libcuda_version=lib.get("version"),
        libcuda_compat=lib.get("compat") if lib.get("available") else None,
        libcuda_absent_reason=None if lib.get("available") else lib["reason"],
        nvml_driver_version=nvml.get("driver_version") if nvml.get("available") else None,
        nvml_absent_reason=None if nvml.get("available") else nvml["reason"],
        nvml_gpus=gpus, env=dict(doc["env"]), device_nodes=dict(doc["device_nodes"]), raw=doc,
        rendezvous=_rendezvous(doc.get("rendezvous")),
    )
