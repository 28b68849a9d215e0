"""Server-side table rows a real API server prints for ``kubectl get`` where the generic
Name/Created At table would hide what a user looks for: Nodes (``pkg/printers/internalversion``
printNode), so that ``kubectl get nodes`` shows ``Ready,SchedulingDisabled`` or ``NotReady``."""

from __future__ import annotations

import calendar
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["NODE_COLUMNS", "human_duration", "node_cells"]

Obj = dict[str, Any]

_ROLE_PREFIX = "node-role.kubernetes.io/"

NODE_COLUMNS: list[Obj] = [
    {"name": "Name", "type": "string", "format": "name", "priority": 0,
     "description": "Name must be unique within a namespace."},
    {"name": "Status", "type": "string", "format": "", "priority": 0, "description": "The status of the node"},
    {"name": "Roles", "type": "string", "format": "", "priority": 0, "description": "The roles of the node"},
    {"name": "Age", "type": "string", "format": "", "priority": 0,
     "description": "CreationTimestamp is a timestamp representing the server time when this object was created."},
    {"name": "Version", "type": "string", "format": "", "priority": 0, "description": "Kubelet Version reported by "
                                                                                      "the node."},
]


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration, as kubectl's AGE column prints it."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes, hours, days = s // 60, s // 3600, s // 86400
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 192:
        return f"{days}d" if hours % 24 == 0 else f"{days}d{hours % 24}h"
    years = days // 365
    if years < 2:
        return f"{days}d"
    if years < 8:
        return f"{years}y{days % 365}d"
    return f"{years}y"


def node_cells(node: Mapping[str, Any], now: float | None = None) -> list[str]:
    """printNode: the Ready condition as Ready / NotReady (Unknown without one), SchedulingDisabled
    when cordoned; the roles from node-role.kubernetes.io/ labels; age; kubelet version."""
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    ready = next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    states = ["Unknown" if ready is None else "Ready" if ready == "True" else "NotReady"]
    if spec.get("unschedulable"):
        states.append("SchedulingDisabled")
    roles = sorted(k[len(_ROLE_PREFIX):] for k in meta.get("labels") or {} if k.startswith(_ROLE_PREFIX))
    created = meta.get("creationTimestamp")
    age = "<unknown>" if not created else human_duration(
        (time.time() if now is None else now) - calendar.timegm(time.strptime(created, "%Y-%m-%dT%H:%M:%SZ")))
    return [str(meta.get("name")), ",".join(states), ",".join(r for r in roles if r) or "<none>", age,
            str((status.get("nodeInfo") or {}).get("kubeletVersion", ""))]
