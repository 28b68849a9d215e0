"""Whether a GPU node can take the suite's probe pods now, and if not the one reason: NotReady,
cordoned, a taint the probe pods do not tolerate, or GPUs held by other pods (busy).

Pure (no pytest, no I/O): judged before anything is launched from the node's API object, the probe
pods' tolerations and one list of the cluster's unfinished pods, so a node that cannot take a probe
is NOT TESTED with its reason in seconds instead of leaving a pod Pending for the scheduler to refuse.
:func:`placement_blocker` reads the same causes from a scheduler's message, for a probe that stayed
Pending for a reason that arose after the check (a tenant pod that started in between).

The semantics are the scheduler's: NodeUnschedulable (``spec.unschedulable`` unless the pod
tolerates ``node.kubernetes.io/unschedulable:NoSchedule``) and TaintToleration (every NoSchedule and
NoExecute taint must be tolerated, core/v1 ``Toleration.ToleratesTaint``); the real-control-plane
tier (tests/realk8s/test_verdicts.py, test_node_states.py) runs the same states against kube-scheduler
v1.36.2.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

__all__ = ["BUSY", "CORDONED", "NOT_READY", "TAINTED", "UNSCHEDULABLE_TAINT", "Availability",
           "GpuHolder", "TolerationError", "availability", "gpu_holders", "parse_toleration", "placement_blocker",
           "tolerates"]

#: The states a node that cannot be tested is in (the reports' coverage line counts them).
NOT_READY, CORDONED, TAINTED, BUSY = "not-ready", "cordoned", "tainted", "busy"
#: The taint the node lifecycle controller puts on a cordoned node; a pod tolerating it may be placed
#: there (the NodeUnschedulable plugin): what --include-cordoned adds to the probe pods.
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
#: A taint key: an optional DNS subdomain prefix and a name of at most 63 characters (kubectl taint's
#: validation, apimachinery IsQualifiedName); a value: a label value.
_KEY = re.compile(r"^(?:[a-z0-9]([-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                  r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_VALUE = re.compile(r"^(?:[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


class TolerationError(ValueError):
    """A --tolerate value that is not ``KEY[=VALUE][:EFFECT]``."""


def parse_toleration(text: str) -> dict[str, str]:
    """``KEY[=VALUE][:EFFECT]`` (kubectl taint's syntax) as the toleration that tolerates such a taint:
    with a value, operator Equal; without, Exists (any value); without an effect, every effect."""
    spec, _, effect = text.partition(":")
    key, has_value, value = spec.partition("=")
    if not key or not _KEY.match(key) or len(key) > 253:
        raise TolerationError(f"{text!r}: the taint key {key!r} is not a qualified name (KEY[=VALUE][:EFFECT], "
                              "as kubectl taint writes it: dedicated=training:NoSchedule)")
    if has_value and not _VALUE.match(value):
        raise TolerationError(f"{text!r}: the value {value!r} is not a label value")
    if effect and effect not in _EFFECTS:
        raise TolerationError(f"{text!r}: the effect {effect!r} is not one of {', '.join(_EFFECTS)}")
    toleration = {"key": key, "operator": "Equal" if has_value else "Exists"}
    if has_value:
        toleration["value"] = value
    if effect:
        toleration["effect"] = effect
    return toleration


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """core/v1 Toleration.ToleratesTaint: an empty key with Exists tolerates every taint."""
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("key") and toleration.get("key") != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


@dataclass(frozen=True)
class GpuHolder:
    """A pod outside this run holding GPUs on a node (its containers' GPU limits, summed)."""

    namespace: str
    name: str
    gpus: int
    resource: str = "nvidia.com/gpu"

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} holds {self.gpus} {self.resource}"


def _is_gpu_resource(name: str) -> bool:
    return name.startswith(("nvidia.com/gpu", "nvidia.com/mig-"))


def _gpu_limits(container: Mapping[str, Any]) -> dict[str, int]:
    """A container's GPU limits (a limit of 0 is dropped where they are added up: Counter's + and |)."""
    limits = (container.get("resources") or {}).get("limits") or {}
    return {str(r): int(q) for r, q in limits.items() if _is_gpu_resource(str(r)) and str(q).isdigit()}


def gpu_holders(pods: Iterable[Mapping[str, Any]], *,
                exclude_namespace: str | None = None) -> dict[str, list[GpuHolder]]:
    """Unfinished pods (API objects) bound to a node and holding GPU extended resources, by node;
    ``exclude_namespace`` (the run's own) left out. A container's GPUs are its limits (extended
    resources have requests equal to limits), and a pod holds what the scheduler reserves for it,
    whatever its phase: its effective request, the larger of its app containers' sum (sidecars, init
    containers with restartPolicy Always, included) and its largest other init container with the
    sidecars started before it (component-helpers resource.PodRequests, as gpuconf.sim.scheduler)."""
    out: dict[str, list[GpuHolder]] = {}
    for pod in pods:
        meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
        node = spec.get("nodeName")
        if not node or (exclude_namespace and meta.get("namespace") == exclude_namespace):
            continue
        if status.get("phase") in ("Succeeded", "Failed"):
            continue
        held: Counter[str] = Counter()
        for container in spec.get("containers") or []:
            held.update(_gpu_limits(container))
        sidecars: Counter[str] = Counter()  # started so far: they run beside the later init containers
        peak: Counter[str] = Counter()
        for container in spec.get("initContainers") or []:
            if container.get("restartPolicy") == "Always":
                sidecars.update(_gpu_limits(container))
            else:
                peak |= sidecars + Counter(_gpu_limits(container))
        held = (held + sidecars) | peak
        for resource, count in sorted(held.items()):
            out.setdefault(str(node), []).append(
                GpuHolder(str(meta.get("namespace", "")), str(meta.get("name", "")), count, resource))
    return out


def _named(holders: Sequence[GpuHolder], limit: int = 3) -> str:
    shown = ", ".join(str(h) for h in holders[:limit])
    return shown + (f" and {len(holders) - limit} more pod(s)" if len(holders) > limit else "")


@dataclass(frozen=True)
class Availability:
    """A node's availability to the run's probe pods. ``state`` None: it can take them (``holders``
    may still hold some GPUs: ``busy``, and the view offers only the free ones)."""

    state: str | None = None  # NOT_READY, CORDONED, TAINTED or BUSY
    reason: str = ""  # the one line every probe-based check on the node says as NOT TESTED
    holders: tuple[GpuHolder, ...] = ()  # pods outside the run holding GPUs there

    @property
    def blocks_probes(self) -> bool:
        """No probe pod can be placed on the node at all (a busy node still takes smaller asks)."""
        return self.state in (NOT_READY, CORDONED, TAINTED)

    def held(self, resource: str) -> int:
        return sum(h.gpus for h in self.holders if h.resource == resource)

    @property
    def holders_text(self) -> str:
        return _named(self.holders)


def _since(when: str | None, now: datetime | None) -> str:
    if not when:
        return ""
    if now is None:
        return f" since {when}"
    try:
        then = datetime.fromisoformat(when)  # Python 3.11 reads the API's "Z"
    except ValueError:
        return f" since {when}"
    minutes = max(0, (now - then) // timedelta(minutes=1))
    ago = f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60} min"
    return f" since {when} ({ago})"


def _taint_text(taint: Mapping[str, Any]) -> str:
    value = taint.get("value") or ""
    return f"{taint.get('key')}{'=' + value if value else ''}:{taint.get('effect')}"


def availability(node: Any, tolerations: Sequence[Mapping[str, Any]], holders: Sequence[GpuHolder] = (), *,
                 now: datetime | None = None) -> Availability:
    """``node`` (gpuconf.cluster.GpuNode) as the run's probe pods (with ``tolerations``) find it:
    NotReady first (its pods would not start even if placed), then cordoned, then the first
    NoSchedule/NoExecute taint they do not tolerate, then GPUs held by ``holders``."""
    name = node.name
    ready = next((c for c in node.conditions if c.type == "Ready"), None)
    if ready is None or ready.status != "True":
        words = {"False": "Ready=False", "Unknown": "Ready=Unknown: the kubelet stopped posting status"}
        state = "never reported" if ready is None else words.get(ready.status, ready.status)
        detail = "" if ready is None else "; ".join(p for p in (ready.reason, ready.message) if p)
        return Availability(NOT_READY, f"{name} is NotReady ({state}){_since(getattr(ready, 'since', None), now)}"
                            + (f": {detail}" if detail else "") + ": no probe can run there until it is Ready again",
                            tuple(holders))
    unschedulable_taint = {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}
    if node.unschedulable and not any(tolerates(t, unschedulable_taint) for t in tolerations):
        return Availability(CORDONED, f"{name} is cordoned (spec.unschedulable): the scheduler places no probe "
                            "there; give --include-cordoned to test it before it is uncordoned", tuple(holders))
    for taint in node.taints:
        taint = {"key": taint.key, "value": taint.value, "effect": taint.effect}
        if taint["effect"] not in ("NoSchedule", "NoExecute") or taint["key"] == UNSCHEDULABLE_TAINT:
            continue  # the cordon's own taint: judged by spec.unschedulable above
        if not any(tolerates(t, taint) for t in tolerations):
            text = _taint_text(taint)
            return Availability(TAINTED, f"{name} has the taint {text}, which the probe pods do not tolerate; give "
                                f"--tolerate {text} to test it", tuple(holders))
    if holders:
        total = sum(h.gpus for h in holders)
        return Availability(BUSY, f"{name} is busy: {total} GPU(s) held by {len(holders)} other pod(s): "
                            f"{_named(holders)}", tuple(holders))
    return Availability()


#: The scheduler's words for a pod refused for want of a GPU resource.
_INSUFFICIENT = re.compile(r"Insufficient (nvidia\.com/[\w.-]+)")


def placement_blocker(node: str, message: str, found: Availability) -> tuple[str, str] | None:
    """Why a probe pinned to ``node`` stayed Pending when the cause is the node's state, judged from
    the node as it is now (``found``: :func:`availability` of the node re-read after the refusal, with
    the pod's tolerations and the GPU holders now): (state, the one line, quoting the scheduler's
    ``message``), or None. The scheduler's message alone cannot tell: it sums every node's reason
    ("1 Insufficient nvidia.com/gpu, 1 node(s) were unschedulable" names another node's cordon for a
    pod pinned here). A node busy with other pods counts only when the refusal was for GPUs: the run's
    own pods queueing on a node is the check's business."""
    if found.state is None or (found.state == BUSY and not _INSUFFICIENT.search(message)):
        return None
    return found.state, (f"the probe pod stayed Pending on {node}, which changed during the run: {found.reason} "
                         f"(scheduler: {message.strip()})")
