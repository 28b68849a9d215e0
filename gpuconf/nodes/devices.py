"""What NVIDIA's DRA driver publishes for one node: its ResourceSlice devices as plain frozen data.

Pure (no pytest, no I/O). The DRA checks judge these devices; the node view counts and requests them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = ["DeviceTaint", "GPU_CLASS", "GPU_DRIVER", "MIG_CLASS", "PCI_ATTRIBUTES", "SliceDevice", "parse_quantity",
           "slice_devices"]

#: NVIDIA's DRA driver and the DeviceClasses its chart installs (domain.md §5).
GPU_DRIVER = "gpu.nvidia.com"
GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"

#: The GPU's PCI address, under the names real releases publish it: the standard attribute
#: (kubernetes-sigs/dra-driver-nvidia-gpu#800, releases from 25.12) and the driver's own ``pcieBusID``
#: of 25.3 to 25.8 (tests/data/real/dra/SOURCES.md). The first one a device has is compared.
PCI_ATTRIBUTES = ("resource.kubernetes.io/pciBusID", "pcieBusID")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")


def parse_quantity(text: str) -> int | None:
    """A Kubernetes quantity (``143771Mi``, ``80G``, ``1e9``) in units (bytes for memory), or None."""
    match = _QUANTITY.match(str(text).strip())
    if not match:
        return None
    number, suffix = match.group(1), match.group(2) or ""
    try:
        value = Decimal(number) * (_BINARY.get(suffix) or _DECIMAL[suffix])
    except InvalidOperation:
        return None
    return int(value)


@dataclass(frozen=True)
class DeviceTaint:
    """A taint on a ResourceSlice device (KEP-5055, resource.k8s.io/v1 ``devices[].taints``): NVIDIA's
    DRA driver reports GPU health this way (``gpu.nvidia.com/xid`` with the Xid as value, NoSchedule when
    fatal, else None; ``gpu.nvidia.com/gpu-lost`` NoSchedule; ``gpu.nvidia.com/unmonitored`` None)."""

    key: str
    value: str = ""
    effect: str = ""  # NoSchedule | NoExecute | None

    @property
    def blocks_allocation(self) -> bool:
        """The scheduler allocates no device with this taint to a claim that does not tolerate it."""
        return self.effect in ("NoSchedule", "NoExecute")

    def __str__(self) -> str:
        return f"{self.key}{'=' + self.value if self.value else ''}:{self.effect or 'None'}"


@dataclass(frozen=True)
class SliceDevice:
    """One device of a node-local ResourceSlice. ``attributes``: the values as strings, keyed by
    the short name for the driver's own domain (``uuid``) and fully qualified otherwise
    (``resource.kubernetes.io/pciBusID``)."""

    node: str
    driver: str
    pool: str
    name: str
    attributes: Mapping[str, str] = field(default_factory=dict)
    memory_bytes: int | None = None
    taints: tuple[DeviceTaint, ...] = ()

    @property
    def usable(self) -> bool:
        """No taint keeps the scheduler from allocating it (the probes' claims tolerate none)."""
        return not any(t.blocks_allocation for t in self.taints)

    @property
    def kind(self) -> str:
        return self.attributes.get("type", "gpu")

    @property
    def uuid(self) -> str | None:
        return self.attributes.get("uuid")

    @property
    def pci_bus_id(self) -> tuple[str, str] | None:
        """(attribute name, value) of the device's PCI address, under whichever name it publishes."""
        return next(((k, self.attributes[k]) for k in PCI_ATTRIBUTES if k in self.attributes), None)

    @property
    def gpu_uuid(self) -> str | None:
        """The physical GPU: the device's own UUID, or its parent's for a MIG instance."""
        return self.attributes.get("parentUUID") if self.kind == "mig" else self.uuid

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.name)

    def describe(self) -> str:
        return f"{self.name} ({self.uuid or 'no uuid'})"


def _attribute_value(value: Any) -> str | None:
    if not isinstance(value, Mapping) or not value:
        return None
    (kind, raw), *_ = value.items()
    if kind == "bool":
        return "true" if raw else "false"
    return str(raw)


def slice_devices(slices: Iterable[Mapping[str, Any]], node: str, *,
                  driver: str = GPU_DRIVER) -> tuple[SliceDevice, ...]:
    """The devices ``driver`` publishes in the ResourceSlices local to ``node`` (``spec.nodeName``)."""
    out: list[SliceDevice] = []
    for s in slices:
        spec = s.get("spec") or {}
        if spec.get("nodeName") != node or spec.get("driver") != driver:
            continue
        pool = str((spec.get("pool") or {}).get("name") or node)
        for entry in spec.get("devices") or []:
            d = {**entry, **(entry.get("basic") or {})}  # resource.k8s.io/v1beta1 nests them under basic
            attributes: dict[str, str] = {}
            for key, value in (d.get("attributes") or {}).items():
                text = _attribute_value(value)
                if text is not None:
                    attributes[key.removeprefix(f"{driver}/")] = text
            memory = ((d.get("capacity") or {}).get("memory") or {}).get("value")
            taints = tuple(DeviceTaint(str(t.get("key", "")), str(t.get("value") or ""), str(t.get("effect") or ""))
                           for t in d.get("taints") or () if isinstance(t, Mapping))
            out.append(SliceDevice(node, driver, pool, str(d.get("name")), attributes,
                                   parse_quantity(str(memory)) if memory is not None else None, taints))
    return tuple(out)
