"""What the node lifecycle controller of kube-controller-manager writes into a Node's spec.taints
(``pkg/controller/nodelifecycle/node_lifecycle_controller.go``), as pure decisions.

* ``doNoScheduleTaintingPass`` (TaintNodesByCondition), on every Node add and update: one
  NoSchedule taint per condition that says so (Ready False → ``node.kubernetes.io/not-ready``,
  Ready Unknown → ``node.kubernetes.io/unreachable``, MemoryPressure/DiskPressure/PIDPressure/
  NetworkUnavailable True → their keys) plus ``node.kubernetes.io/unschedulable`` while
  ``spec.unschedulable``; it adds the missing ones and removes those no longer meant, touching no
  other taint.
* ``doNoExecuteTaintingPass`` (taint-based eviction), from the health monitor: Ready False →
  ``not-ready:NoExecute``, Unknown → ``unreachable:NoExecute`` (the two exclusive), True → neither.
  The real controller gets there within its node-monitor-period (5 s) and a rate-limited queue;
  here it happens in the same pass. When no node of the cluster is Ready (``handleDisruption``:
  every zone in FullDisruption, "master disruption mode"), it stops tainting and removes the
  NoExecute taints from every node (seen with a real 1.36 controller-manager: two nodes NotReady,
  the NoSchedule taints only). Simulated nodes carry no zone label: the cluster is one zone.

``SwapNodeControllerTaint`` stamps every taint it adds with ``timeAdded``; so does this.
Not simulated: the health monitor itself (the lease-based switch to Unknown after
node-monitor-grace-period: a simulated node is marked Unknown by whoever sets its condition),
marking the pods of a NotReady node not Ready (MarkPodsNotReady), and evicting the pods a
NoExecute taint repels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["CONDITION_TAINTS", "NOT_READY", "UNREACHABLE", "UNSCHEDULABLE", "is_ready", "lifecycle_taints"]

Obj = dict[str, Any]

UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"

#: nodeConditionToTaintKeyStatusMap: (condition, status) → the NoSchedule taint's key.
CONDITION_TAINTS: Mapping[tuple[str, str], str] = {
    ("Ready", "False"): NOT_READY,
    ("Ready", "Unknown"): UNREACHABLE,
    ("MemoryPressure", "True"): "node.kubernetes.io/memory-pressure",
    ("DiskPressure", "True"): "node.kubernetes.io/disk-pressure",
    ("PIDPressure", "True"): "node.kubernetes.io/pid-pressure",
    ("NetworkUnavailable", "True"): "node.kubernetes.io/network-unavailable",
}
_OWNED_NO_SCHEDULE = {UNSCHEDULABLE, *CONDITION_TAINTS.values()}
_NO_EXECUTE = {"False": NOT_READY, "Unknown": UNREACHABLE}


def _wanted(node: Mapping[str, Any], disrupted: bool) -> set[tuple[str, str]]:
    """(key, effect) of every taint the controller keeps on ``node``."""
    conditions = {c.get("type"): c.get("status") for c in (node.get("status") or {}).get("conditions") or []}
    wanted = {(key, "NoSchedule") for (kind, status), key in CONDITION_TAINTS.items() if conditions.get(kind) == status}
    if (node.get("spec") or {}).get("unschedulable"):
        wanted.add((UNSCHEDULABLE, "NoSchedule"))
    ready = conditions.get("Ready")
    if ready in _NO_EXECUTE and not disrupted:
        wanted.add((_NO_EXECUTE[str(ready)], "NoExecute"))
    return wanted


def is_ready(node: Mapping[str, Any]) -> bool:
    """Whether the node's Ready condition is True (what the disruption count calls ready)."""
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def _owned(taint: Mapping[str, Any]) -> bool:
    key, effect = taint.get("key"), taint.get("effect")
    return (effect == "NoSchedule" and key in _OWNED_NO_SCHEDULE) or (effect == "NoExecute"
                                                                       and key in _NO_EXECUTE.values())


def lifecycle_taints(node: Mapping[str, Any], *, now: str, disrupted: bool = False) -> list[Obj] | None:
    """``node``'s spec.taints once the controller has passed (its own taints added, stamped ``now``,
    or removed; every other taint kept in place), or None when it would change nothing.
    ``disrupted``: no node of the cluster is Ready (no NoExecute taint anywhere).

    A node without a Ready condition (never reported) keeps its NoExecute taints as they are: the
    real controller waits for the condition before it decides."""
    taints = [dict(t) for t in (node.get("spec") or {}).get("taints") or []]
    wanted = _wanted(node, disrupted)
    has_ready = any(c.get("type") == "Ready" for c in (node.get("status") or {}).get("conditions") or [])
    kept = [t for t in taints if not _owned(t) or (t.get("key"), t.get("effect")) in wanted
            or (t.get("effect") == "NoExecute" and not has_ready and not disrupted)]
    present = {(t.get("key"), t.get("effect")) for t in kept}
    added = [{"key": key, "effect": effect, "timeAdded": now} for key, effect in sorted(wanted - present)]
    if not added and len(kept) == len(taints):
        return None
    return kept + added
