"""Where each fact about a node's GPUs comes from: a GFD label, else an attribute NVIDIA's DRA driver
publishes in the node's ResourceSlice, else the device plugin's capacity (the probe adds its own
view later, in the checks). Pure: no pytest, no I/O.

GFD labels first, because they are what the checks have always judged and what users' selectors
name; the slice attribute is the fallback that lets a DRA-only node without GFD (GPU Operator's
GPUCluster mode, anchors-2026-12.md section 4) still say what it is. Both are recorded with their
source, so a verdict can say which one it read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from gpuconf.nodes.devices import SliceDevice

__all__ = ["Fact", "NodeFacts", "Source", "label_cuda_version", "label_driver_version", "node_facts"]


class Source(Enum):
    GFD = "GFD label"
    SLICE = "ResourceSlice attribute"
    CAPACITY = "node capacity"
    NONE = "not published"


@dataclass(frozen=True)
class Fact:
    """One fact and where it was read: ``key`` is the label, attribute or resource name."""

    value: str | None
    source: Source
    key: str = ""

    def __str__(self) -> str:
        return f"{self.value} ({self.source.value} {self.key})" if self.value is not None else "unknown"


_UNKNOWN = Fact(None, Source.NONE)


@dataclass(frozen=True)
class NodeFacts:
    product: Fact = _UNKNOWN
    driver: Fact = _UNKNOWN
    cuda: Fact = _UNKNOWN  # the driver's CUDA version (GFD's cuda.runtime.*, DRA's cudaDriverVersion)
    gpus: Fact = _UNKNOWN  # physical GPUs (GFD's gpu.count; the slice's GPUs; the plugin's capacity)
    compute: Fact = _UNKNOWN  # compute capability, major.minor
    memory: Fact = _UNKNOWN  # per GPU, MiB (GFD's gpu.memory; the slice's capacity memory, as GFD counts it)


def label_driver_version(labels: Mapping[str, str]) -> tuple[str | None, str]:
    """GFD's driver version and the labels it was read from: ``cuda.driver-version.full``, or on
    GFD releases before it (and alongside it, deprecated) ``cuda.driver.major/minor/rev`` joined as
    GFD split it (a driver without a patch level has an empty rev: ``535.54``)."""
    full = labels.get("nvidia.com/cuda.driver-version.full")
    if full:
        return full, "nvidia.com/cuda.driver-version.full"
    major, minor = labels.get("nvidia.com/cuda.driver.major"), labels.get("nvidia.com/cuda.driver.minor")
    if major and minor:
        rev = labels.get("nvidia.com/cuda.driver.rev")
        return ".".join(p for p in (major, minor, rev) if p), "nvidia.com/cuda.driver.major/minor/rev"
    return None, "no nvidia.com/cuda.driver-version.full or cuda.driver.major/minor label"


def label_cuda_version(labels: Mapping[str, str]) -> str | None:
    """The driver's CUDA version GFD labels: ``cuda.runtime-version.full``, or the older
    ``cuda.runtime.major/minor`` (GFD's name for the driver's CUDA, not a runtime's)."""
    full = labels.get("nvidia.com/cuda.runtime-version.full")
    if full:
        return full
    major, minor = labels.get("nvidia.com/cuda.runtime.major"), labels.get("nvidia.com/cuda.runtime.minor")
    return f"{major}.{minor}" if major and minor else None

def _common(devices: Iterable[SliceDevice], attribute: str) -> str | None:
    """The value every whole GPU of the slice publishes for ``attribute``, or None (absent, or the
    GPUs disagree: a mixed node has no one product)."""
    values = {d.attributes.get(attribute) for d in devices if d.kind == "gpu"}
    return values.pop() if len(values) == 1 and None not in values else None


def _memory_mib(devices: Iterable[SliceDevice]) -> str | None:
    """The memory every whole GPU of the slice publishes, in MiB (GFD's unit), or None."""
    sizes = {d.memory_bytes for d in devices if d.kind == "gpu"}
    size = sizes.pop() if len(sizes) == 1 else None
    return str(size >> 20) if size is not None else None


def _first(*facts: Fact) -> Fact:
    return next((f for f in facts if f.value is not None), _UNKNOWN)


def node_facts(labels: Mapping[str, str], capacity: Mapping[str, str], devices: Iterable[SliceDevice]) -> NodeFacts:
    """Each fact from GFD's label, else the DRA driver's attribute, else (for the GPU count) the
    device plugin's capacity."""
    devices = tuple(devices)
    gpus = sum(d.kind == "gpu" for d in devices)
    driver, driver_key = label_driver_version(labels)
    count = labels.get("nvidia.com/gpu.count", "")
    cc_major, cc_minor = labels.get("nvidia.com/gpu.compute.major"), labels.get("nvidia.com/gpu.compute.minor")
    plugin = str(capacity.get("nvidia.com/gpu", "") or "")
    memory = labels.get("nvidia.com/gpu.memory", "")
    return NodeFacts(
        product=_first(Fact(labels.get("nvidia.com/gpu.product") or None, Source.GFD, "nvidia.com/gpu.product"),
                       Fact(_common(devices, "productName"), Source.SLICE, "productName")),
        driver=_first(Fact(driver, Source.GFD, driver_key),
                      Fact(_common(devices, "driverVersion"), Source.SLICE, "driverVersion")),
        cuda=_first(Fact(label_cuda_version(labels), Source.GFD, "nvidia.com/cuda.runtime"),
                    Fact(_common(devices, "cudaDriverVersion"), Source.SLICE, "cudaDriverVersion")),
        gpus=_first(Fact(count if count.isdigit() else None, Source.GFD, "nvidia.com/gpu.count"),
                    Fact(str(gpus) if gpus else None, Source.SLICE, "devices of type gpu"),
                    Fact(plugin if plugin.isdigit() and int(plugin) > 0 else None, Source.CAPACITY,
                         "nvidia.com/gpu")),
        compute=_first(Fact(f"{cc_major}.{cc_minor}" if cc_major and cc_minor else None, Source.GFD,
                            "nvidia.com/gpu.compute.major/minor"),
                       Fact(_common(devices, "cudaComputeCapability"), Source.SLICE, "cudaComputeCapability")),
        memory=_first(Fact(memory if memory.isdigit() and memory != "0" else None, Source.GFD, "nvidia.com/gpu.memory"),
                      Fact(_memory_mib(devices), Source.SLICE, "capacity memory")))
