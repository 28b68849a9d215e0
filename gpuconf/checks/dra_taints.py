"""Device taints (KEP-5055, DRADeviceTaints, beta and on by default in Kubernetes 1.36): NVIDIA's DRA
driver reports a GPU's health as taints on its ResourceSlice device (anchors-2026-12.md section 4,
dra-driver-nvidia-gpu ``docs/guides/gpu-health-checking.md``):

* ``gpu.nvidia.com/xid`` with the Xid as value: NoSchedule when the Xid is fatal, else None;
* ``gpu.nvidia.com/gpu-lost``: NoSchedule;
* ``gpu.nvidia.com/unmonitored``: None (health checking could not watch the GPU).

The driver never uses NoExecute; an administrator may, through a DeviceTaintRule (resource.k8s.io,
DRADeviceTaintRules: beta and off by default in 1.36), which taints every device its selector names
(driver, pool, device) without touching the slice.

Two checks:

* ``dra.devices-untainted``: no GPU of the node carries a taint. A NoSchedule or NoExecute taint takes
  the GPU out of service (the scheduler allocates it to no claim that does not tolerate it): FAIL,
  naming the GPU (device name, UUID, PCI address), the taint and, for an Xid, its meaning and action
  from gpuconf/data/xid_codes.yaml. **A taint of effect None only is DEGRADED**: the scheduler still
  allocates the GPU, so nothing is out of service, but the driver says something about it (a
  non-fatal Xid, or health checking that cannot watch it) that an operator should read before
  handing the node over; it is not PASS, because the GPU is not known healthy either.
* ``dra.tainted-device-not-allocated``: across the claims the run's probe pods got on the node, a
  NoSchedule-tainted device was never allocated and at least one untainted sibling was: the
  scheduler honoured the taint end to end. A tainted device allocated: FAIL. No allocation seen on
  the node: NOT TESTED saying so (no evidence either way).

Pure: no pytest, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuconf.checks.dra import Allocation
from gpuconf.nodes.devices import DeviceTaint, SliceDevice
from gpuconf.outcomes import COULD_NOT_RUN, NOT_APPLICABLE
from gpuconf.verdict import Outcome, Verdict, failed, not_tested, passed

__all__ = ["NOT_ALLOCATED", "NVIDIA_TAINTS", "UNTAINTED", "TaintRule", "device_taint_rules",
           "evaluate_devices_untainted", "evaluate_tainted_not_allocated", "taints_of"]

UNTAINTED = "dra.devices-untainted"
NOT_ALLOCATED = "dra.tainted-device-not-allocated"

#: What each of the driver's taint keys means, for the verdict (the Xid's own meaning is the table's).
NVIDIA_TAINTS = {
    "gpu.nvidia.com/xid": "the GPU raised an Xid",
    "gpu.nvidia.com/gpu-lost": "the driver lost the GPU (it no longer answers NVML)",
    "gpu.nvidia.com/unmonitored": "the driver's health checking cannot watch the GPU",
}


@dataclass(frozen=True)
class TaintRule:
    """A DeviceTaintRule: ``taint`` on every device its selector names (an empty field matches all)."""

    name: str
    taint: DeviceTaint
    driver: str | None = None
    pool: str | None = None
    device: str | None = None

    def selects(self, d: SliceDevice) -> bool:
        return all(want is None or want == have for want, have in
                   ((self.driver, d.driver), (self.pool, d.pool), (self.device, d.name)))


def device_taint_rules(objects: Iterable[Mapping[str, Any]]) -> tuple[TaintRule, ...]:
    """DeviceTaintRule objects (``spec.deviceSelector`` {driver, pool, device}, ``spec.taint``) as
    rules (resource.k8s.io v1beta2 reference: an empty selector matches every device, none matches
    none). A rule whose selector also carries fields this reading does not evaluate (the alpha API's
    ``deviceClassName`` or CEL ``selectors``) is kept only when it names a device: a rule we cannot
    evaluate must not be read as tainting every device."""
    out = []
    for obj in objects:
        spec = obj.get("spec") or {}
        if spec.get("deviceSelector") is None:  # the API: without a selector no device is matched
            continue
        sel = spec["deviceSelector"] or {}  # an empty one matches every device
        taint = spec.get("taint") or {}
        if (sel.get("deviceClassName") or sel.get("selectors")) and not sel.get("device"):
            continue
        out.append(TaintRule(str((obj.get("metadata") or {}).get("name", "")),
                             DeviceTaint(str(taint.get("key", "")), str(taint.get("value") or ""),
                                         str(taint.get("effect") or "")),
                             sel.get("driver") or None, sel.get("pool") or None, sel.get("device") or None))
    return tuple(out)


def taints_of(device: SliceDevice, rules: Sequence[TaintRule] = ()) -> list[tuple[DeviceTaint, str]]:
    """The device's taints and where each was read: its slice, or the DeviceTaintRule naming it."""
    return ([(t, "ResourceSlice") for t in device.taints]
            + [(r.taint, f"DeviceTaintRule {r.name}") for r in rules if r.selects(device)])


def _xid_meaning(value: str, table: Mapping[int, Any]) -> str:
    if not value.isdigit():
        return f"Xid {value!r} (not a number)"
    row = table.get(int(value))
    if row is None:
        return f"Xid {value}, not in gpuconf/data/xid_codes.yaml: read NVIDIA's Xid catalog"
    return f"Xid {value} {row.name} ({row.severity}: {row.action})"


def _gpu(d: SliceDevice) -> str:
    pci = d.pci_bus_id
    return f"{d.name} ({d.uuid or 'no uuid'}" + (f", PCI {pci[1]}" if pci else "") + ")"


def _describe(taint: DeviceTaint, where: str, table: Mapping[int, Any]) -> str:
    meaning = (_xid_meaning(taint.value, table) if taint.key == "gpu.nvidia.com/xid"
               else NVIDIA_TAINTS.get(taint.key, "a taint not of NVIDIA's driver"))
    return f"{taint} ({meaning}; from the {where})"


def evaluate_devices_untainted(node: str, devices: Sequence[SliceDevice], rules: Sequence[TaintRule] = (), *,
                               xids: Mapping[int, Any] | None = None) -> Verdict:
    """``dra.devices-untainted`` on ``node``: none of its DRA devices carries a taint (module docstring
    for FAIL vs DEGRADED). ``rules``: the cluster's DeviceTaintRules where served; ``xids``: the
    Xid table (gpuconf.checks.health.xid_table)."""
    if not devices:
        return not_tested(UNTAINTED, node, f"not applicable: {node} publishes no DRA device", kind=NOT_APPLICABLE)
    if xids is None:
        from gpuconf.checks.health import xid_table

        xids = xid_table()
    tainted = [(d, taints_of(d, rules)) for d in devices]
    tainted = [(d, ts) for d, ts in tainted if ts]
    if not tainted:
        read = " and the cluster's DeviceTaintRules" if rules else ""
        return passed(UNTAINTED, node, f"{len(devices)} devices, none tainted (the ResourceSlice's device "
                      f"taints{read})")
    lines = [f"{_gpu(d)}: " + "; ".join(_describe(t, w, xids) for t, w in ts) for d, ts in tainted]
    out = [d for d, ts in tainted if any(t.blocks_allocation for t, _ in ts)]
    if out:
        names = ", ".join(_gpu(d) for d in out)
        return failed(UNTAINTED, node, f"{len(out)} of {len(devices)} GPUs of {node} are out of service, tainted "
                      f"NoSchedule/NoExecute so the scheduler allocates them to no claim: {lines[0]}"
                      + (f" (and {len(lines) - 1} more tainted)" if len(lines) > 1 else ""),
                      expected="no device taint", observed=names, evidence=tuple(lines))
    return Verdict(UNTAINTED, node, Outcome.DEGRADED,
                   f"{len(tainted)} of {len(devices)} GPUs of {node} carry a taint of effect None (still allocated, "
                   f"but the driver reports a problem): {'; '.join(lines)}",
                   expected="no device taint", observed=", ".join(_gpu(d) for d, _ in tainted), evidence=tuple(lines))


def evaluate_tainted_not_allocated(node: str, devices: Sequence[SliceDevice], allocations: Sequence[Allocation],
                                   rules: Sequence[TaintRule] = (), *, unknown: str | None = None) -> Verdict:
    """``dra.tainted-device-not-allocated`` on ``node``: ``allocations`` are the claims the run's probe
    pods got (recorded with record_claims=True); ``unknown``: why that record may be incomplete (the
    claim watch broke), which leaves a verdict of "never allocated" unfounded."""
    blocked = [d for d in devices if any(t.blocks_allocation for t, _ in taints_of(d, rules))]
    if not blocked:
        return not_tested(NOT_ALLOCATED, node, f"not applicable: no device of {node} carries a NoSchedule or "
                          "NoExecute taint", kind=NOT_APPLICABLE)
    keys = {d.key: d for d in devices}
    here = [(a.claim, keys[dev.key]) for a in allocations for dev in a.devices if dev.key in keys]
    evidence = tuple(f"claim {claim}: {_gpu(d)}" for claim, d in here)
    tainted_keys = {d.key for d in blocked}
    wrong = [(claim, d) for claim, d in here if d.key in tainted_keys]
    if wrong:
        claim, d = wrong[0]
        taint = next(t for t, _ in taints_of(d, rules) if t.blocks_allocation)
        return failed(NOT_ALLOCATED, node, f"claim {claim} was allocated {_gpu(d)}, tainted {taint}: the scheduler "
                      "gave a claim that does not tolerate the taint a device out of service",
                      expected="no tainted device allocated", observed=", ".join(f"{c}: {x.name}" for c, x in wrong),
                      evidence=evidence)
    if unknown is not None:  # a claim not seen may hold the tainted device: "never" is unfounded
        return not_tested(NOT_ALLOCATED, node, f"the allocations of the probes' claims on {node} are not all known: "
                          f"{unknown}", kind=COULD_NOT_RUN)
    if not here:
        return not_tested(NOT_ALLOCATED, node, f"no probe claim was seen allocated a device of {node}, so whether "
                          f"the scheduler avoids the tainted {', '.join(d.name for d in blocked)} is not shown",
                          kind=COULD_NOT_RUN)
    siblings = sorted({d.name for _, d in here})
    return passed(NOT_ALLOCATED, node, f"the tainted {', '.join(_gpu(d) for d in blocked)} never allocated, while "
                  f"{len(here)} claim device(s) went to untainted {', '.join(siblings)}",
                  expected="no tainted device allocated", observed=f"allocated: {', '.join(siblings)}",
                  evidence=evidence)
