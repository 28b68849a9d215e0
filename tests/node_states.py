"""Helpers for the fleet-state tests against a served simulated cluster and a real control plane
(tests/sim/test_node_states_served.py, tests/realk8s/test_node_states.py): polling a read with a
deadline, a node's taints, a pod's scheduling refusal, a GPU pod."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

UNSCHEDULABLE = ("node.kubernetes.io/unschedulable", None, "NoSchedule")
DEDICATED = ("dedicated", "training", "NoSchedule")


def eventually(what: str, read: Callable[[], Any], until: Callable[[Any], Any], timeout: float = 15) -> Any:
    """The first result of ``read`` that satisfies ``until``; fails with the last one seen at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        seen = read()
        if until(seen):
            return seen
        assert time.monotonic() < deadline, f"{what} not within {timeout}s; last seen: {seen}"
        time.sleep(0.2)


def taints(node: Any) -> set[tuple[str, str | None, str]]:
    return {(t.key, t.value, t.effect) for t in node.spec.taints or []}


def refusal(pod: Any) -> str | None:
    """The scheduler's message on a pod it could not place, or None."""
    return next((c.message for c in (pod.status.conditions if pod.status else None) or []
                 if c.type == "PodScheduled" and c.reason == "Unschedulable"), None)


def gpu_pod(name: str, *, gpus: int, command: list[str], node: str | None = None, bind: str | None = None,
            tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A pod asking for ``gpus`` nvidia.com/gpu: for ``node`` through the scheduler (nodeSelector on
    the hostname), or ``bind``-ed to a node by nodeName."""
    spec: dict[str, Any] = {"restartPolicy": "Never", "tolerations": tolerations or [], "containers": [{
        "name": "main", "image": "busybox:1.36", "command": command,
        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    if bind:
        spec["nodeName"] = bind
    return {"metadata": {"name": name}, "spec": spec}
