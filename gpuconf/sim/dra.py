"""Structured-parameters DRA allocation, as the kube-scheduler's DynamicResources plugin does it
(resource.k8s.io/v1): which devices on a node satisfy a pod's claims, or why none do.

Pure: inputs are plain objects (DeviceClasses, ResourceSlices, ResourceClaims as dicts), the output
is an allocation (``status.allocation.devices.results``) or a reason. The simulated scheduler calls
it per candidate node; a failure on every node becomes the real event text
``0/N nodes are available: N cannot allocate all claims``.

Covered: ``exactly`` requests (ExactCount with ``count``, All), ``firstAvailable`` sub-requests,
DeviceClass and request CEL selectors, ``constraints[].matchAttribute``, devices already allocated
to other claims, node-local slices (``spec.nodeName``), device taints (KEP-5055: a device with a
NoSchedule or NoExecute taint goes to no request that does not tolerate it; effect None restricts
nothing). Not covered: partitionable devices, admin access, consumable capacity, node selectors on
slices (``allNodes``/``nodeSelector``), DeviceTaintRules (beta and off by default in 1.36).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuconf.sim.cel import CelError, compile_selector, device_activation

__all__ = ["Allocation", "AllocationError", "Device", "DeviceResult", "allocate", "node_devices", "tolerates",
           "untolerated"]


@dataclass(frozen=True)
class Device:
    driver: str
    pool: str
    name: str
    spec: dict[str, Any] = field(compare=False, hash=False, repr=False)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.name)

    def attribute(self, qualified: str) -> Any:
        """A ``domain/name`` attribute's typed value, or None when the device lacks it."""
        domain, _, short = qualified.rpartition("/")
        attrs = self.spec.get("attributes") or {}
        for key in ((qualified, short) if domain == self.driver else (qualified,)):
            if key in attrs:
                value = attrs[key]
                return next(iter(value.items()))
        return None


@dataclass(frozen=True)
class DeviceResult:
    request: str
    driver: str
    pool: str
    device: str

    def to_dict(self) -> dict[str, str]:
        return {"request": self.request, "driver": self.driver, "pool": self.pool, "device": self.device}


@dataclass(frozen=True)
class Allocation:
    results: tuple[DeviceResult, ...]

    def status(self, node: str) -> dict[str, Any]:
        """``status.allocation`` for the claim (with the node the devices are on)."""
        return {
            "devices": {"results": [r.to_dict() for r in self.results]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
        }


class AllocationError(Exception):
    """The claim cannot be allocated on this node; ``reason`` says why (kept as evidence)."""

    def __init__(self, reason: str, *, fatal: bool = False) -> None:
        self.reason = reason
        #: A CEL runtime error or a missing DeviceClass is an error of the claim itself, not of
        #: the node: the real scheduler reports it instead of "cannot allocate all claims".
        self.fatal = fatal
        super().__init__(reason)


def node_devices(slices: Iterable[Mapping[str, Any]], node: str) -> list[Device]:
    """Every device the node-local ResourceSlices of ``node`` publish."""
    out: list[Device] = []
    for s in slices:
        spec = s.get("spec") or {}
        if spec.get("nodeName") != node:
            continue
        driver, pool = spec.get("driver", ""), (spec.get("pool") or {}).get("name", node)
        out.extend(Device(driver, pool, d["name"], d) for d in spec.get("devices") or [])
    return out


def _selectors(obj: Mapping[str, Any] | None) -> list[str]:
    return [s["cel"]["expression"] for s in (obj or {}).get("selectors") or [] if "cel" in s]


def _matches(device: Device, expressions: Sequence[str], where: str) -> bool:
    if not expressions:
        return True
    activation = device_activation(device.driver, device.spec)
    for expression in expressions:
        try:
            if not compile_selector(expression).matches(activation):
                return False
        except CelError as exc:
            raise AllocationError(f"{where}: selector #{expressions.index(expression)}: {exc}", fatal=True) from exc
    return True


@dataclass(frozen=True)
class _Request:
    name: str
    candidates: tuple[Device, ...]
    mode: str
    count: int


def _resolve(request: Mapping[str, Any], classes: Mapping[str, Mapping[str, Any]], devices: Sequence[Device],
             used: set[tuple[str, str, str]], claim: str) -> list[_Request]:
    """The alternatives for one request: itself, or each ``firstAvailable`` sub-request in order."""
    options = [(f"{request['name']}/{sub['name']}", sub) for sub in request.get("firstAvailable") or []]
    if not options:
        options = [(request["name"], request.get("exactly") or {})]
    out = []
    for name, spec in options:
        class_name = spec.get("deviceClassName")
        device_class = classes.get(class_name or "")
        if device_class is None:
            raise AllocationError(f"claim {claim}, request {name}: device class {class_name} does not exist",
                                  fatal=True)
        class_sel = _selectors(device_class.get("spec"))
        req_sel = _selectors(spec)
        matching = [d for d in devices if _matches(d, class_sel, f"class {class_name}")
                    and _matches(d, req_sel, f"claim {claim}, request {name}")]
        mode = spec.get("allocationMode", "ExactCount")
        if mode == "All" and any(d.key in used for d in matching):
            continue  # "All" means every matching device, so one in use elsewhere rules it out
        tolerations = spec.get("tolerations") or []
        usable = tuple(d for d in matching if d.key not in used and not untolerated(d, tolerations))
        if mode == "All" and len(usable) != len(matching):
            # "All" takes no device out for a taint: the request cannot be allocated at all. Seen on
            # kube-scheduler v1.36.2 (2026-12-03, gpuconf sim agents, h200 node with gpu-3 tainted
            # gpu.nvidia.com/xid=48:NoSchedule): an All claim stayed unallocated, the pod Pending with
            # "0/2 nodes are available: 1 cannot allocate all claims, ..."; the same claim tolerating
            # the taint got all eight devices, gpu-3 included.
            continue
        out.append(_Request(name, usable, mode, int(spec.get("count", 1))))
    return out


#: Taint effects that keep a device from a request that does not tolerate them (resource.k8s.io/v1
#: DeviceTaintEffect; None is informational).
RESTRICTING = ("NoSchedule", "NoExecute")


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Whether one DeviceToleration matches one DeviceTaint, as a pod toleration matches a node
    taint: an empty effect matches every effect; operator Exists (a key of its own or none: every
    key) matches any value, Equal (the default) the same key and value."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if toleration.get("operator", "Equal") == "Exists":
        return not key or key == taint.get("key")
    return key == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated(device: Device, tolerations: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The device's NoSchedule/NoExecute taints none of ``tolerations`` tolerates."""
    return [taint for taint in device.spec.get("taints") or [] if taint.get("effect") in RESTRICTING
            and not any(tolerates(t, taint) for t in tolerations)]


def _constraint_ok(chosen: Mapping[str, list[Device]], constraints: Sequence[Mapping[str, Any]]) -> bool:
    for constraint in constraints:
        attribute = constraint.get("matchAttribute")
        if not attribute:
            continue
        names = set(constraint.get("requests") or chosen)
        values = {d.attribute(attribute) for req, devs in chosen.items()
                  if req.split("/")[0] in names for d in devs}
        if None in values or len(values) > 1:
            return False
    return True


def allocate(claim: Mapping[str, Any], node: str, *, classes: Mapping[str, Mapping[str, Any]],
             slices: Iterable[Mapping[str, Any]], allocated: Iterable[tuple[str, str, str]] = ()) -> Allocation:
    """Allocate ``claim`` on ``node`` or raise AllocationError with the reason."""
    name = (claim.get("metadata") or {}).get("name", "?")
    spec = (claim.get("spec") or {}).get("devices") or {}
    requests = spec.get("requests") or []
    constraints = spec.get("constraints") or []
    used = set(allocated)
    devices = node_devices(slices, node)
    alternatives = [_resolve(r, classes, devices, used, name) for r in requests]

    Chosen = dict[str, list[Device]]

    def search(i: int, taken: set[tuple[str, str, str]], chosen: Chosen) -> Chosen | None:
        if i == len(alternatives):
            return dict(chosen) if _constraint_ok(chosen, constraints) else None
        for option in alternatives[i]:
            free = [d for d in option.candidates if d.key not in taken]
            if option.mode == "All":
                if not option.candidates or len(free) != len(option.candidates):
                    continue
                picks = [free]
            else:
                if len(free) < option.count:
                    continue
                picks = _combinations(free, option.count)
            for pick in picks:
                chosen[option.name] = pick
                found = search(i + 1, taken | {d.key for d in pick}, chosen)
                if found is not None:
                    return found
                del chosen[option.name]
        return None

    found = search(0, set(), {})
    if found is None:
        wanted = ", ".join(f"{r['name']}" for r in requests)
        raise AllocationError(f"claim {name}: no devices on node {node} satisfy request(s) {wanted}"
                              + (" with the constraints" if constraints else ""))
    return Allocation(tuple(DeviceResult(req, d.driver, d.pool, d.name) for req, devs in found.items() for d in devs))


def _combinations(devices: Sequence[Device], count: int, limit: int = 256) -> list[list[Device]]:
    """Candidate picks in device order, bounded: the first fit is what the scheduler takes too."""
    out: list[list[Device]] = []

    def rec(start: int, acc: list[Device]) -> None:
        if len(out) >= limit:
            return
        if len(acc) == count:
            out.append(list(acc))
            return
        for j in range(start, len(devices)):
            acc.append(devices[j])
            rec(j + 1, acc)
            acc.pop()

    rec(0, [])
    return out
