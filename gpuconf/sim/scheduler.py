"""The simulated kube-scheduler: places Pending pods on nodes and allocates their DRA claims, with
the real scheduler's filters, failure texts, events and retry triggers (kube-scheduler 1.34-1.36).

It is an in-process controller on the :class:`~gpuconf.sim.store.Store` seam: subscriptions feed a
scheduling queue, one worker thread schedules one pod at a time from fresh reads of the store (so
two pods never get the same GPU), and everything it writes goes through the store as a real
scheduler's API calls would (claim status, ``pods/binding``, pod status, events).

What a pod goes through, in the real framework's order (``pkg/scheduler/apis/config/v1/default_plugins.go``:
NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit, ..., DynamicResources; PostFilter:
DynamicResources then DefaultPreemption):

* PreEnqueue (DynamicResources): every claim must exist; a template claim not created yet keeps the
  pod out of the queue *silently*, with no event and no condition, exactly as 1.34-1.36 do (the
  PreEnqueue status only reaches the pod with the alpha gate of KEP-5501; see ``report_pre_enqueue``);
* PreFilter (DynamicResources): device classes must exist, else the whole cycle fails with
  ``request <r>: device class <c> does not exist``;
* Filter per node, first failure wins: ``node(s) were unschedulable``, ``node(s) had untolerated
  taint(s)`` (including the ``not-ready``/``unreachable`` taints the node lifecycle controller puts
  on a node whose Ready condition is not True), ``node(s) didn't match Pod's node affinity/selector``,
  ``Too many pods`` / ``Insufficient <resource>`` (every one that is short), ``cannot allocate all
  claims`` / ``resourceclaim not available on the node``;
* PostFilter: ``no new claims to deallocate`` | ``deallocation of ResourceClaim completed`` |
  ``still not schedulable``, then ``preemption: 0/N nodes are available: ...`` or
  ``preemption: not eligible due to preemptionPolicy=Never.``.

The failure text is ``FitError.Error()`` (``pkg/scheduler/framework/types.go``)::

    0/N nodes are available: <PreFilterMsg>. <"count reason" strings, sort.Strings, ", ">. <PostFilterMsg>

Not simulated: preemption itself (a pod that could evict lower-priority pods is reported as the
real scheduler reports a node without victims), pod (anti-)affinity, topology spread, host ports,
volumes, scoring beyond least-allocated cpu/memory plus preferred node affinity (ties go to the
first node by name, where the real scheduler picks at random), scheduler extenders and profiles.
"""

from __future__ import annotations

import logging
import math
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from gpuconf.nodes.availability import tolerates  # core/v1 Toleration.ToleratesTaint, one place
from gpuconf.sim.cel import CelError, parse_quantity
from gpuconf.sim.dra import AllocationError, allocate
from gpuconf.sim.node_lifecycle import CONDITION_TAINTS, UNSCHEDULABLE
from gpuconf.sim.store import ApiError, Store, Subscription

__all__ = [
    "DEFAULT_SCHEDULER",
    "EXTENDED_CLAIM_ANNOTATION",
    "EventRecorder",
    "ExtendedRequest",
    "extended_requests",
    "extended_resource_classes",
    "informer",
    "NodeStatus",
    "Scheduler",
    "fit_error_message",
    "pod_requests",
    "preemption_message",
]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Key = tuple[str, str]

DEFAULT_SCHEDULER = "default-scheduler"

# --- The real texts, each from kube-scheduler's source --------------------------------------------

#: plugins/nodeunschedulable/node_unschedulable.go, ErrReasonUnschedulable.
REASON_UNSCHEDULABLE = "node(s) were unschedulable"
#: plugins/tainttoleration/taint_toleration.go since kubernetes#134740 (1.35, cherry-picked to 1.34
#: as #135023): the taint's key and value no longer appear ("node(s) had untolerated taint {k: v}" before).
REASON_TAINT = "node(s) had untolerated taint(s)"
#: plugins/nodeaffinity/node_affinity.go, ErrReasonPod (nodeSelector and required affinity alike).
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
#: plugins/noderesources/fit.go fitsRequest: "Too many pods", "Insufficient cpu", "Insufficient %v".
REASON_TOO_MANY_PODS = "Too many pods"
#: plugins/dynamicresources/dynamicresources.go Filter, both via statusUnschedulable (UnschedulableAndUnresolvable).
REASON_CANNOT_ALLOCATE = "cannot allocate all claims"
REASON_CLAIM_ELSEWHERE = "resourceclaim not available on the node"
#: dynamicresources.go PostFilter.
POSTFILTER_NO_CLAIMS = "no new claims to deallocate"
POSTFILTER_DEALLOCATED = "deallocation of ResourceClaim completed"
POSTFILTER_STILL = "still not schedulable"
#: framework/preemption/preemption.go (absent nodes' status) and defaultpreemption SelectVictimsOnNode.
PREEMPTION_NOT_HELPFUL = "Preemption is not helpful for scheduling"
PREEMPTION_NO_VICTIMS = "No preemption victims found for incoming pod"
#: defaultpreemption/default_preemption.go PodEligibleToPreemptOthers.
PREEMPTION_NEVER = "not eligible due to preemptionPolicy=Never."
#: schedule_one.go ErrNoNodesAvailable.
NO_NODES = "no nodes available to schedule pods"
#: framework/runtime/framework.go RunFilterPlugins wraps a plugin's error (not a rejection) so.
FILTER_ERROR = 'running "DynamicResources" filter plugin: '

#: The finalizer the scheduler puts on a claim it allocates (resource.k8s.io/v1 ``Finalizer``).
CLAIM_FINALIZER = "resource.kubernetes.io/delete-protection"

#: KEP-5004 (DRA-backed extended resources, beta and on in 1.36): the annotation on the claim the
#: scheduler makes for a pod's extended resources, and the implicit resource name of every class.
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
IMPLICIT_EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"


def _now_rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _now_micro(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"


# ---------------------------------------------------------------------------------------------------
# Pure decisions: requests, taints, affinity, fit, messages


def _quantity(value: Any) -> Decimal:
    try:
        return parse_quantity(str(value)).value
    except CelError:
        return Decimal(0)


def _amount(resource: str, value: Any) -> int:
    """cpu in millicores, everything else in whole units, rounded up as resource.Quantity does."""
    q = _quantity(value)
    return math.ceil(q * 1000) if resource == "cpu" else math.ceil(q)


def _container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    res = container.get("resources") or {}
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    merged = {**limits, **requests}  # limits default requests (API defaulting, repeated for safety)
    return {name: _amount(name, v) for name, v in merged.items()}


def _add(a: dict[str, int], b: Mapping[str, int]) -> None:
    for k, v in b.items():
        a[k] = a.get(k, 0) + v


def pod_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """What the scheduler charges a pod (component-helpers resource.PodRequests): the sum over
    containers, at least the largest init container (sidecars, restartPolicy Always, add up and run
    beside later init containers), pod-level cpu/memory requests when set, plus spec.overhead."""
    total: dict[str, int] = {}
    for c in spec.get("containers") or []:
        _add(total, _container_requests(c))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in spec.get("initContainers") or []:
        reqs = _container_requests(c)
        if c.get("restartPolicy") == "Always":
            _add(total, reqs)
            _add(sidecars, reqs)
            continue
        step = dict(reqs)
        _add(step, sidecars)
        for k, v in step.items():
            init_peak[k] = max(init_peak.get(k, 0), v)
    for k, v in init_peak.items():
        total[k] = max(total.get(k, 0), v)
    pod_level = (spec.get("resources") or {}).get("requests") or {}
    for name in ("cpu", "memory"):
        if name in pod_level:
            total[name] = _amount(name, pod_level[name])
    _add(total, {k: _amount(k, v) for k, v in (spec.get("overhead") or {}).items()})
    return {k: v for k, v in total.items() if v}


def extended_resource_classes(classes: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Extended resource name -> the DeviceClass that serves it: every class's implicit
    ``deviceclass.resource.kubernetes.io/<class>`` and its explicit ``spec.extendedResourceName``."""
    out: dict[str, str] = {}
    for device_class in sorted(classes, key=lambda c: str(c["metadata"]["name"])):
        name = str(device_class["metadata"]["name"])
        out[IMPLICIT_EXTENDED_PREFIX + name] = name
        explicit = (device_class.get("spec") or {}).get("extendedResourceName")
        if explicit:
            out[str(explicit)] = name
    return out


@dataclass(frozen=True)
class ExtendedRequest:
    """One container's DRA-backed extended resource: a request of the pod's extended-resource claim."""

    container: str
    request: str  # container-<container index>-request-<index of the resource in the sorted names>
    resource: str
    device_class: str
    count: int


def extended_requests(spec: Mapping[str, Any], mapped: Mapping[str, str]) -> list[ExtendedRequest]:
    """The pod's requests of extended resources a DeviceClass maps, in container order. The request
    name counts the resource among all of the container's sorted resource names (cpu included), as
    kube-scheduler v1.36.2 names them: a container asking cpu and nvidia.com/gpu gets
    ``container-0-request-1`` (seen on the real tier, 2026-12-03). Init containers are not covered."""
    out: list[ExtendedRequest] = []
    for ci, container in enumerate(spec.get("containers") or []):
        requests = _container_requests(container)
        for ri, name in enumerate(sorted(requests)):
            if name in mapped and requests[name] > 0:
                out.append(ExtendedRequest(str(container.get("name")), f"container-{ci}-request-{ri}", name,
                                           mapped[name], requests[name]))
    return out


def extended_claim_spec(requests: Sequence[ExtendedRequest]) -> Obj:
    """spec of the extended-resource claim: one ExactCount request per container and resource."""
    return {"devices": {"requests": [{"name": r.request, "exactly": {
        "deviceClassName": r.device_class, "allocationMode": "ExactCount", "count": r.count}} for r in requests]}}


def request_mappings(requests: Sequence[ExtendedRequest]) -> list[Obj]:
    """pod.status.extendedResourceClaimStatus.requestMappings, ordered by resource name, then
    container: what kube-scheduler v1.36.2 wrote on the real tier (2026-12-03) for seven pods, the
    same order every time (a pod of containers a, b, c asking deviceclass.resource.kubernetes.io/
    gpu.nvidia.com in a and c and nvidia.com/gpu in a and b: a's and c's class requests first)."""
    ordered = sorted(requests, key=lambda r: (r.resource, int(r.request.split("-")[1])))
    return [{"containerName": r.container, "resourceName": r.resource, "requestName": r.request} for r in ordered]


def effective_taints(node: Mapping[str, Any]) -> list[Obj]:
    """spec.taints plus the NoSchedule taints the node lifecycle controller derives from conditions
    (:mod:`.node_lifecycle` writes them into spec.taints; this covers the moment before it has)."""
    taints = [dict(t) for t in (node.get("spec") or {}).get("taints") or []]
    conditions = {c.get("type"): c.get("status") for c in (node.get("status") or {}).get("conditions") or []}
    if "Ready" not in conditions:
        conditions["Ready"] = "False"  # a node that never reported is registered with the not-ready taint
    present = {(t.get("key"), t.get("effect")) for t in taints}
    for (ctype, cstatus), key in CONDITION_TAINTS.items():
        if conditions.get(ctype) == cstatus and (key, "NoSchedule") not in present:
            taints.append({"key": key, "effect": "NoSchedule"})
    return taints


def untolerated_taint(tolerations: Sequence[Mapping[str, Any]], taints: Iterable[Mapping[str, Any]]) -> Obj | None:
    """FindMatchingUntoleratedTaint with DoNotScheduleTaintsFilterFunc (NoSchedule and NoExecute)."""
    for taint in taints:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return dict(taint)
    return None


def _requirement_matches(req: Mapping[str, Any], values: Mapping[str, str]) -> bool:
    key, op = req.get("key", ""), req.get("operator", "")
    wanted = [str(v) for v in req.get("values") or []]
    present = key in values
    if op == "In":
        return present and values[key] in wanted
    if op == "NotIn":
        return not present or values[key] not in wanted
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(wanted) != 1:
            return False
        try:
            actual, bound = int(values[key]), int(wanted[0])
        except ValueError:
            return False
        return actual > bound if op == "Gt" else actual < bound
    return False


def node_selector_term_matches(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """One NodeSelectorTerm: its expressions and fields ANDed; a term with neither matches nothing."""
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    labels = (node.get("metadata") or {}).get("labels") or {}
    node_fields = {"metadata.name": (node.get("metadata") or {}).get("name", "")}
    return (all(_requirement_matches(r, labels) for r in expressions)
            and all(_requirement_matches(r, node_fields) for r in fields))


def node_selector_matches(selector: Mapping[str, Any] | None, node: Mapping[str, Any]) -> bool:
    """A NodeSelector: its terms ORed (nil selects every node)."""
    if selector is None:
        return True
    return any(node_selector_term_matches(t, node) for t in selector.get("nodeSelectorTerms") or [])


def pod_matches_node(spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """nodeSelector (every label equal) and required node affinity, as NodeAffinity.Filter checks."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    for k, v in (spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    return node_selector_matches(required, node)


def _allocatable(node: Mapping[str, Any]) -> dict[str, int]:
    raw = (node.get("status") or {}).get("allocatable") or {}
    return {name: _amount(name, v) for name, v in raw.items()}


def insufficient_resources(request: Mapping[str, int], allocatable: Mapping[str, int], used: Mapping[str, int],
                           pods_on_node: int) -> list[tuple[str, bool]]:
    """noderesources/fit.go fitsRequest: each (reason, unresolvable); unresolvable when even an empty
    node could not hold the request (then preemption cannot help)."""
    out: list[tuple[str, bool]] = []
    if pods_on_node + 1 > allocatable.get("pods", 0):
        out.append((REASON_TOO_MANY_PODS, False))
    for name in ("cpu", "memory", "ephemeral-storage"):
        want = request.get(name, 0)
        if want > 0 and want > allocatable.get(name, 0) - used.get(name, 0):
            out.append((f"Insufficient {name}", want > allocatable.get(name, 0)))
    for name in sorted(request):
        if name in ("cpu", "memory", "ephemeral-storage", "pods"):
            continue
        want = request[name]
        if want > 0 and want > allocatable.get(name, 0) - used.get(name, 0):
            out.append((f"Insufficient {name}", want > allocatable.get(name, 0)))
    return out


@dataclass(frozen=True)
class NodeStatus:
    """Why one node was rejected: the reasons, and whether preemption could help (Unschedulable)
    or not (UnschedulableAndUnresolvable)."""

    reasons: tuple[str, ...]
    resolvable: bool = False


def _histogram(num_nodes: int, statuses: Mapping[str, NodeStatus], absent: str | None) -> list[str]:
    counts: dict[str, int] = {}
    for status in statuses.values():
        for reason in status.reasons:
            counts[reason] = counts.get(reason, 0) + 1
    if absent is not None and len(statuses) < num_nodes:
        counts[absent] = counts.get(absent, 0) + num_nodes - len(statuses)
    # sort.Strings over "<count> <reason>", as FitError.Error does: the count is part of the sort key.
    return sorted(f"{n} {reason}" for reason, n in counts.items())


def fit_error_message(num_nodes: int, statuses: Mapping[str, NodeStatus], *, prefilter: str = "",
                      postfilter: str = "") -> str:
    """FitError.Error() of pkg/scheduler/framework/types.go."""
    message = f"0/{num_nodes} nodes are available:"
    if prefilter:
        message += f" {prefilter}."
    else:
        histogram = _histogram(num_nodes, statuses, None)
        if histogram:
            message += f" {', '.join(histogram)}."
    if postfilter:
        message += f" {postfilter}"
    return message


def preemption_message(preemption_policy: str | None, num_nodes: int, statuses: Mapping[str, NodeStatus]) -> str:
    """DefaultPreemption's PostFilter status: never eligible, or the FitError of its own dry run.

    Nodes rejected for a reason preemption cannot fix are absent from the dry run and reported as
    "Preemption is not helpful for scheduling"; the others as if no victim could be found (the
    simulation does not preempt)."""
    if preemption_policy == "Never":
        return "preemption: " + PREEMPTION_NEVER
    dry_run = {name: NodeStatus((PREEMPTION_NO_VICTIMS,)) for name, s in statuses.items() if s.resolvable}
    counts = _histogram(num_nodes, dry_run, PREEMPTION_NOT_HELPFUL)
    return f"preemption: 0/{num_nodes} nodes are available: {', '.join(counts)}."


def informer(store: Store, resource: str, handler: Callable[[str, Obj], None]) -> Subscription:
    """List, hand every object to ``handler`` as ADDED on this thread, then watch from the list's
    resourceVersion: when this returns, the handler has seen the whole current state (WaitForCacheSync)."""
    listing = store.list(resource)
    for obj in listing.items:
        try:
            handler("ADDED", obj)
        except Exception:
            log.exception("%s handler failed on the initial list", resource)
    return Subscription(store.watch(resource, resource_version=listing.resource_version), handler)


# ---------------------------------------------------------------------------------------------------
# Events


class EventRecorder:
    """Writes core/v1 Events for a component and folds repeats into one Event, as client-go's event
    correlator does: the same object, type, reason and message bump ``count``, ``lastTimestamp`` and
    ``series`` of the existing Event instead of creating another."""

    def __init__(self, store: Store, component: str, *, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self.component = component
        self.instance = f"{component}-{socket.gethostname()}"
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str, str, str], tuple[str, str]] = {}  # key -> (namespace, event name)
        self._serial = 0

    def record(self, regarding: Mapping[str, Any], event_type: str, reason: str, message: str, *,
               action: str = "") -> Obj | None:
        meta = regarding.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        key = (str(meta.get("uid", "")), event_type, reason, message)
        now = self._clock()
        with self._lock:
            existing = self._seen.get(key)
            if existing is not None:
                try:
                    event = self._store.get("events", existing[1], namespace=existing[0])
                except ApiError:
                    event = None
                if event is not None:
                    count = int(event.get("count") or 1) + 1
                    event["count"] = count
                    event["lastTimestamp"] = _now_rfc3339(now)
                    event["series"] = {"count": count, "lastObservedTime": _now_micro(now)}
                    try:
                        return self._store.update("events", event, namespace=existing[0])
                    except ApiError as e:
                        log.debug("event update failed: %s", e.message)
            self._serial += 1
            name = f"{meta.get('name', 'object')}.{time.time_ns() + self._serial:x}"
            body: Obj = {
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {"apiVersion": regarding.get("apiVersion", "v1"), "kind": regarding.get("kind", ""),
                                   "name": meta.get("name", ""), "namespace": meta.get("namespace", ""),
                                   "uid": meta.get("uid", ""), "resourceVersion": meta.get("resourceVersion", "")},
                "reason": reason, "message": message, "type": event_type,
                # The real scheduler's events.k8s.io recorder leaves source empty and fills
                # reportingController; checks must read reportingComponent (client-go makeEvent).
                "reportingComponent": self.component, "reportingInstance": self.instance,
                "action": action, "count": 1,
                "firstTimestamp": _now_rfc3339(now), "lastTimestamp": _now_rfc3339(now), "eventTime": _now_micro(now),
            }
            try:
                created = self._store.create("events", body, namespace=namespace)
            except ApiError as e:
                log.debug("event not recorded: %s", e.message)
                return None
            self._seen[key] = (namespace, name)
            return created


# ---------------------------------------------------------------------------------------------------
# The scheduling queue


Outcome = Literal["forget", "unschedulable", "parked", "backoff"]


@dataclass
class _Entry:
    key: Key
    priority: int
    seq: int
    has_claims: bool
    attempts: int = 0
    last_attempt: float = 0.0
    ready_at: float = 0.0
    since: float = 0.0
    message: str | None = None


class _SchedulingQueue:
    """activeQ / backoffQ / unschedulablePods of the real scheduler, on one condition variable.

    A pod that failed waits in ``unschedulable`` until a cluster event may help it (``move``); it then
    becomes active once its backoff has passed. ``parked`` holds pods a PreEnqueue check rejected. An
    event that arrives while a pod is being scheduled sends it back to the active queue afterwards,
    so nothing is lost between reading the cluster and recording the failure.
    """

    def __init__(self, initial_backoff: float, max_backoff: float, flush_after: float | None) -> None:
        self._cond = threading.Condition(threading.RLock())
        self._entries: dict[Key, _Entry] = {}
        self._state: dict[Key, str] = {}  # active | unschedulable | parked | inflight
        self._moved: set[Key] = set()
        self._seq = 0
        self._closed = False
        self._initial = initial_backoff
        self._max = max_backoff
        self._flush_after = flush_after

    def _backoff(self, entry: _Entry) -> float:
        if entry.attempts == 0:
            return 0.0
        return float(min(self._initial * 2.0 ** (entry.attempts - 1), self._max))

    def upsert(self, key: Key, priority: int, has_claims: bool, changed: bool) -> None:
        """A pod to schedule was added or updated; ``changed`` when something that matters changed."""
        with self._cond:
            entry = self._entries.get(key)
            if entry is None:
                self._seq += 1
                self._entries[key] = _Entry(key, priority, self._seq, has_claims)
                self._state[key] = "active"
                self._cond.notify_all()
                return
            entry.priority, entry.has_claims = priority, has_claims
            if not changed:
                return
            self._activate(entry)

    def _activate(self, entry: _Entry) -> None:
        state = self._state.get(entry.key)
        if state == "inflight":
            self._moved.add(entry.key)
        elif state == "removed":  # deleted and created again while being scheduled
            self._state[entry.key] = "inflight"
            self._moved.add(entry.key)
        elif state in ("unschedulable", "parked"):
            entry.ready_at = entry.last_attempt + self._backoff(entry) if state == "unschedulable" else 0.0
            self._state[entry.key] = "active"
            self._cond.notify_all()

    def move(self, wanted: Callable[[_Entry], bool]) -> None:
        """A cluster event that may make some waiting pods schedulable."""
        with self._cond:
            for entry in list(self._entries.values()):
                if wanted(entry):
                    self._activate(entry)

    def remove(self, key: Key) -> None:
        with self._cond:
            if self._state.get(key) == "inflight":
                self._moved.discard(key)
                self._state[key] = "removed"
                return
            self._entries.pop(key, None)
            self._state.pop(key, None)

    def message(self, key: Key) -> str | None:
        with self._cond:
            entry = self._entries.get(key)
            return entry.message if entry is not None and self._state.get(key) == "parked" else None

    def pop(self) -> _Entry | None:
        """The next pod to try (highest priority, then oldest), waiting without polling until one is ready."""
        with self._cond:
            while not self._closed:
                now = time.monotonic()
                self._flush(now)
                ready = [e for k, e in self._entries.items() if self._state.get(k) == "active" and e.ready_at <= now]
                if ready:
                    entry = min(ready, key=lambda e: (-e.priority, e.seq))
                    self._state[entry.key] = "inflight"
                    return entry
                self._cond.wait(self._next_wakeup(now))
            return None

    def _flush(self, now: float) -> None:
        if self._flush_after is None:
            return
        for key, entry in self._entries.items():
            if self._state.get(key) == "unschedulable" and now - entry.since >= self._flush_after:
                self._activate(entry)

    def _next_wakeup(self, now: float) -> float | None:
        times = [e.ready_at for k, e in self._entries.items() if self._state.get(k) == "active"]
        if self._flush_after is not None:
            times += [e.since + self._flush_after for k, e in self._entries.items()
                      if self._state.get(k) == "unschedulable"]
        return max(0.0, min(times) - now) if times else None

    def done(self, entry: _Entry, outcome: Outcome, message: str | None = None) -> None:
        with self._cond:
            key = entry.key
            moved = key in self._moved
            self._moved.discard(key)
            if self._state.get(key) == "removed" or (outcome == "forget" and not moved):
                self._entries.pop(key, None)
                self._state.pop(key, None)
                return
            if outcome == "forget":  # something changed meanwhile: look at it again, from scratch
                entry.attempts, entry.ready_at, entry.message = 0, 0.0, None
                self._state[key] = "active"
                self._cond.notify_all()
                return
            now = time.monotonic()
            entry.message = message
            if outcome == "parked":
                self._state[key] = "parked"
            else:
                entry.attempts += 1
                entry.last_attempt = now
                entry.since = now
                self._state[key] = "unschedulable" if outcome == "unschedulable" else "active"
                entry.ready_at = now + self._backoff(entry)
            if moved:
                self._activate(entry)
            self._cond.notify_all()

    def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(predicate, timeout)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


# ---------------------------------------------------------------------------------------------------
# The scheduler


@dataclass(frozen=True)
class _PodView:
    uid: str
    node: str
    terminal: bool
    signature: str


@dataclass
class _Cycle:
    """What one scheduling attempt read from the store."""

    nodes: list[Obj]
    pods_on: dict[str, list[Obj]]
    claims: list[Obj] = field(default_factory=list)  # the pod's claims, in spec order
    to_allocate: list[Obj] = field(default_factory=list)
    classes: dict[str, Obj] = field(default_factory=dict)
    slices: list[Obj] = field(default_factory=list)
    allocated: set[tuple[str, str, str]] = field(default_factory=set)
    #: the pod's DRA-backed extended resources (KEP-5004), wherever a node does not advertise them
    extended: list[ExtendedRequest] = field(default_factory=list)
    #: node -> status.allocation of the extended-resource claim there
    extended_allocations: dict[str, Obj] = field(default_factory=dict)


class _AssignedPods:
    """The scheduler's cache of the pods holding node resources (bound, not terminal), by node.

    Fed by the pod informer and by the scheduler's own binds (assumed at once, so the next cycle
    counts the pod even before its watch event arrives); an event older than what the cache holds
    for a pod (by resourceVersion) is ignored. Reading it costs O(pods) once per cycle instead of a
    sorted list of every pod in the store, which made a campaign of thousands of pods quadratic."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rv: dict[Key, int] = {}
        self._node_of: dict[Key, str] = {}
        self._on: dict[str, dict[Key, Obj]] = {}

    def apply(self, kind: str, key: Key, pod: Obj) -> None:
        rv = int((pod.get("metadata") or {}).get("resourceVersion") or 0)
        node = (pod.get("spec") or {}).get("nodeName") or ""
        holds = kind != "DELETED" and bool(node) and not _is_terminal(pod)
        with self._lock:
            if rv < self._rv.get(key, -1):
                return
            self._rv[key] = rv
            previous = self._node_of.pop(key, None)
            if previous is not None:
                self._on[previous].pop(key, None)
                if not self._on[previous]:
                    del self._on[previous]
            if holds:
                self._node_of[key] = node
                self._on.setdefault(node, {})[key] = pod

    def snapshot(self) -> dict[str, list[Obj]]:
        with self._lock:
            return {node: list(pods.values()) for node, pods in self._on.items()}


class _FatalFilterError(Exception):
    """A filter plugin's error (not a rejection): the cycle aborts and the pod retries with backoff."""


def _is_terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _pod_signature(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    return repr((pod.get("spec"), meta.get("labels"), meta.get("annotations"), status.get("resourceClaimStatuses")))


def _node_signature(node: Mapping[str, Any]) -> str:
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    conditions = sorted((str(c.get("type")), str(c.get("status"))) for c in status.get("conditions") or [])
    return repr((meta.get("labels"), spec.get("taints"), spec.get("unschedulable"), status.get("allocatable"),
                 conditions))


def _claim_name(pod: Mapping[str, Any], pod_claim: Mapping[str, Any]) -> str | None:
    """resourceclaim.Name: the claim a pod's entry refers to, or None when not created yet."""
    if pod_claim.get("resourceClaimName"):
        return str(pod_claim["resourceClaimName"])
    for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        if status.get("name") == pod_claim.get("name"):
            return str(status.get("resourceClaimName") or "") or None
    return None


def _device_keys(claim: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    results = ((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or [])
    return [(str(r.get("driver")), str(r.get("pool")), str(r.get("device"))) for r in results]


def _reserved_for(claim: Mapping[str, Any], uid: str) -> bool:
    return any(r.get("uid") == uid for r in (claim.get("status") or {}).get("reservedFor") or [])


class Scheduler:
    """The default scheduler of the simulated cluster (``schedulerName: default-scheduler``).

    ``initial_backoff``/``max_backoff`` are the per-pod retry backoff (the real 1 s/10 s would make
    tests slow); ``flush_unschedulable_after`` retries pods no event has woken (the real 5 minutes).
    ``report_pre_enqueue`` gives pods held before the queue (claims not created yet) a PodScheduled
    condition with reason ``NotReadyForScheduling``, as the alpha gate SchedulerPreEnqueuePodStatus
    (KEP-5501) does; off by default, as on a 1.34-1.36 cluster where such a pod shows nothing.
    """

    def __init__(self, store: Store, *, name: str = DEFAULT_SCHEDULER, initial_backoff: float = 0.1,
                 max_backoff: float = 2.0, flush_unschedulable_after: float | None = 300.0,
                 report_pre_enqueue: bool = False) -> None:
        self.store = store
        self.name = name
        self.events = EventRecorder(store, name)
        self.report_pre_enqueue = report_pre_enqueue
        self._queue_settings = (initial_backoff, max_backoff, flush_unschedulable_after)
        self._queue = _SchedulingQueue(*self._queue_settings)
        self._pods: dict[Key, _PodView] = {}
        self._nodes: dict[str, str] = {}
        self._assigned = _AssignedPods()
        self._subscriptions: list[Subscription] = []
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()

    # --- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> Scheduler:
        """Sync the caches (list, then watch from there), then start scheduling, as the real one does."""
        if self._thread is not None:
            return self
        self._stopped.clear()
        self._queue = _SchedulingQueue(*self._queue_settings)  # a restart begins from a fresh list, as a new process
        self._pods, self._nodes, self._assigned = {}, {}, _AssignedPods()
        self._subscriptions = [
            informer(self.store, "nodes", self._on_node),
            informer(self.store, "pods", self._on_pod),
            informer(self.store, "resourceclaims.resource.k8s.io", self._on_claim),
            informer(self.store, "resourceslices.resource.k8s.io", self._on_dra_inventory),
            informer(self.store, "deviceclasses.resource.k8s.io", self._on_dra_inventory),
        ]
        self._thread = threading.Thread(target=self._run, name=f"sim-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        for subscription in self._subscriptions:
            subscription.close()
        self._subscriptions = []
        self._queue.close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5.0)
        self._thread = None

    def __enter__(self) -> Scheduler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def waiting_reason(self, namespace: str, name: str) -> str | None:
        """Why a pod is held before the queue (PreEnqueue), e.g. ``pod "ns/p": ResourceClaim not created yet``."""
        return self._queue.message((namespace, name))

    def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Block until ``predicate`` holds, re-checked whenever the scheduling queue changes."""
        return self._queue.wait_until(predicate, timeout)

    # --- informers -----------------------------------------------------------------------------------

    def _schedulable_by_us(self, pod: Mapping[str, Any]) -> bool:
        spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
        return (not spec.get("nodeName") and (spec.get("schedulerName") or DEFAULT_SCHEDULER) == self.name
                and not meta.get("deletionTimestamp") and not _is_terminal(pod))

    def _on_pod(self, kind: str, pod: Obj) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        key = (meta.get("namespace", ""), meta["name"])
        self._assigned.apply(kind, key, pod)
        previous = self._pods.get(key)
        if kind == "DELETED":
            self._pods.pop(key, None)
            self._queue.remove(key)
            if previous is not None and previous.node and not previous.terminal:
                self._queue.move(lambda e: True)  # its resources (and devices) are free again
            return
        view = _PodView(meta.get("uid", ""), spec.get("nodeName") or "", _is_terminal(pod), _pod_signature(pod))
        self._pods[key] = view
        if view.node:
            self._queue.remove(key)
            if previous is not None and previous.uid == view.uid and not previous.terminal and view.terminal:
                self._queue.move(lambda e: True)
            return
        if not self._schedulable_by_us(pod):
            self._queue.remove(key)
            return
        changed = previous is None or previous.signature != view.signature or previous.uid != view.uid
        self._queue.upsert(key, int(spec.get("priority") or 0), bool(spec.get("resourceClaims")) or any(
            "/" in name for name in pod_requests(spec)), changed)  # DRA-backed extended resources wait on DRA too

    def _on_node(self, kind: str, node: Obj) -> None:
        name = node["metadata"]["name"]
        if kind == "DELETED":
            self._nodes.pop(name, None)
            return
        signature = _node_signature(node)
        if self._nodes.get(name) != signature:
            self._nodes[name] = signature
            self._queue.move(lambda e: True)

    def _on_claim(self, kind: str, claim: Obj) -> None:
        self._queue.move(lambda e: e.has_claims)

    def _on_dra_inventory(self, kind: str, obj: Obj) -> None:
        if kind != "DELETED":
            self._queue.move(lambda e: e.has_claims)

    # --- the loop ------------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopped.is_set():
            entry = self._queue.pop()
            if entry is None:
                return
            try:
                outcome, message = self._schedule_one(entry.key)
            except Exception:
                log.exception("scheduling %s/%s failed", *entry.key)
                outcome, message = "backoff", None
            self._queue.done(entry, outcome, message)

    def _schedule_one(self, key: Key) -> tuple[Outcome, str | None]:
        namespace, name = key
        try:
            pod = self.store.get("pods", name, namespace=namespace)
        except ApiError:
            return "forget", None
        if not self._schedulable_by_us(pod):
            return "forget", None
        if (pod.get("spec") or {}).get("schedulingGates"):
            # The SchedulingGates PreEnqueue plugin; the API server's condition message (SchedulingGated).
            return "parked", "Scheduling is blocked due to non-empty scheduling gates"
        pod = self._apply_priority(pod)
        gate = self._pre_enqueue(pod)
        if gate is not None:
            if self.report_pre_enqueue:
                self._set_condition(pod, "NotReadyForScheduling", gate)
            return "parked", gate
        nodes = self.store.list("nodes", copy=False).items
        if not nodes:
            self._fail(pod, NO_NODES, "SchedulerError")
            return "backoff", None
        cycle = self._read_cluster(nodes)
        prefilter = self._pre_filter(pod, cycle)
        if prefilter is not None:
            statuses = {n["metadata"]["name"]: NodeStatus((prefilter,)) for n in nodes}
            self._unschedulable(pod, cycle, statuses, prefilter=prefilter, postfilter_claims=False)
            return "unschedulable", None
        try:
            statuses, feasible = self._filter(pod, cycle)
        except _FatalFilterError as e:
            self._fail(pod, FILTER_ERROR + str(e), "SchedulerError")
            return "backoff", None
        if not feasible:
            self._unschedulable(pod, cycle, statuses, prefilter="",
                                postfilter_claims=bool(cycle.claims or cycle.extended))
            return "unschedulable", None
        node, allocations = self._pick(pod, cycle, feasible)
        return self._bind(pod, node, cycle, allocations)

    # --- PriorityClass (the Priority admission plugin, applied late) --------------------------------

    def _apply_priority(self, pod: Obj) -> Obj:
        """Resolve spec.priorityClassName (or the globalDefault class) into spec.priority and
        spec.preemptionPolicy. A class with preemptionPolicy Never makes the pod never preempt; as
        this scheduler never preempts anyway, the class only changes the PostFilter text."""
        spec = pod.get("spec") or {}
        class_name = spec.get("priorityClassName")
        try:
            if class_name:
                pc: Obj | None = self.store.get("priorityclasses", class_name)
            else:
                pc = next((c for c in self.store.list("priorityclasses", copy=False).items if c.get("globalDefault")),
                          None)
        except ApiError:
            return pod  # the real admission plugin would have refused the pod; keep what it has
        if pc is None:
            return pod
        wanted = {"priority": int(pc.get("value") or 0),
                  "preemptionPolicy": pc.get("preemptionPolicy") or "PreemptLowerPriority"}
        if not class_name:
            wanted["priorityClassName"] = pc["metadata"]["name"]
        if all(spec.get(k) == v for k, v in wanted.items()):
            return pod
        try:
            return self.store.patch("pods", pod["metadata"]["name"], {"spec": wanted},
                                    namespace=pod["metadata"]["namespace"])
        except ApiError:
            return pod

    # --- DynamicResources -------------------------------------------------------------------------

    def _pre_enqueue(self, pod: Obj) -> str | None:
        """DynamicResources.PreEnqueue (foreachPodResourceClaim): every claim exists and is the pod's."""
        namespace, name, uid = pod["metadata"]["namespace"], pod["metadata"]["name"], pod["metadata"]["uid"]
        for pod_claim in (pod.get("spec") or {}).get("resourceClaims") or []:
            claim_name = _claim_name(pod, pod_claim)
            if claim_name is None:
                if pod_claim.get("resourceClaimTemplateName"):
                    # resourceclaim.Name: fmt.Errorf(`pod "%s/%s": %w`, ..., ErrClaimNotFound)
                    return f'pod "{namespace}/{name}": ResourceClaim not created yet'
                continue  # deliberately no claim for this entry
            try:
                claim = self.store.get("resourceclaims.resource.k8s.io", claim_name, namespace=namespace)
            except ApiError:
                return f'resourceclaim.resource.k8s.io "{claim_name}" not found'
            if (claim.get("metadata") or {}).get("deletionTimestamp"):
                return f'resourceclaim "{claim_name}" is being deleted'
            if pod_claim.get("resourceClaimTemplateName") and not any(
                    o.get("uid") == uid for o in (claim["metadata"].get("ownerReferences") or [])):
                # resourceclaim.IsForPod
                return f"ResourceClaim {namespace}/{claim_name} was not created for pod {namespace}/{name} " \
                       "(pod is not owner)"
        return None

    def _read_cluster(self, nodes: list[Obj]) -> _Cycle:
        return _Cycle(nodes=sorted(nodes, key=lambda n: n["metadata"]["name"]), pods_on=self._assigned.snapshot())

    def _pre_filter(self, pod: Obj, cycle: _Cycle) -> str | None:
        """DynamicResources.PreFilter: gather the claims; every device class must exist."""
        namespace = pod["metadata"]["namespace"]
        names = [_claim_name(pod, pc) for pc in (pod.get("spec") or {}).get("resourceClaims") or []]
        names = [n for n in names if n]
        if any("/" in name for name in pod_requests(pod.get("spec") or {})):
            classes = self.store.list("deviceclasses.resource.k8s.io", copy=False).items
            cycle.extended = extended_requests(pod.get("spec") or {}, extended_resource_classes(classes))
            if cycle.extended:
                cycle.classes = {c["metadata"]["name"]: c for c in classes}
                cycle.slices = self.store.list("resourceslices.resource.k8s.io", copy=False).items
                for claim in self.store.list("resourceclaims.resource.k8s.io", copy=False).items:
                    cycle.allocated.update(_device_keys(claim))
        if not names:
            return None
        all_claims = self.store.list("resourceclaims.resource.k8s.io", copy=False).items
        by_key = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in all_claims}
        cycle.claims = [by_key[(namespace, n)] for n in names if (namespace, n) in by_key]
        if len(cycle.claims) != len(names):
            return f'resourceclaim.resource.k8s.io "{next(n for n in names if (namespace, n) not in by_key)}" not found'
        cycle.to_allocate = [c for c in cycle.claims if not (c.get("status") or {}).get("allocation")]
        if not cycle.to_allocate:
            return None
        cycle.classes = {c["metadata"]["name"]: c for c in self.store.list("deviceclasses.resource.k8s.io",
                                                                           copy=False).items}
        for claim in cycle.to_allocate:
            for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
                subs = [(f"{request['name']}/{s['name']}", s) for s in request.get("firstAvailable") or []]
                for request_name, spec in subs or [(request["name"], request.get("exactly") or {})]:
                    class_name = spec.get("deviceClassName") or ""
                    if class_name not in cycle.classes:
                        # validateDeviceClass: statusUnschedulable(...).
                        return f"request {request_name}: device class {class_name} does not exist"
        cycle.slices = self.store.list("resourceslices.resource.k8s.io", copy=False).items
        if not cycle.extended:
            for claim in all_claims:
                cycle.allocated.update(_device_keys(claim))
        return None

    def _dra_filter(self, pod: Obj, node: Obj, cycle: _Cycle) -> tuple[NodeStatus | None, list[Obj]]:
        """DynamicResources.Filter: allocate the unallocated claims here; allocated ones must be here."""
        node_name = node["metadata"]["name"]
        elsewhere = [c for c in cycle.claims if (c.get("status") or {}).get("allocation")
                     and not node_selector_matches((c["status"]["allocation"]).get("nodeSelector"), node)]
        results: list[Obj] = []
        used = set(cycle.allocated)
        served = self._served_by_dra(node, cycle)
        extended = {"metadata": {"name": f"{pod['metadata']['name']}-extended-resources"},
                    "spec": extended_claim_spec(served)}
        for claim in [*cycle.to_allocate, *([extended] if served else [])]:
            try:
                allocation = allocate(claim, node_name, classes=cycle.classes, slices=cycle.slices, allocated=used)
            except AllocationError as e:
                if e.fatal:
                    raise _FatalFilterError(self._allocator_error(claim, e.reason)) from e
                return NodeStatus((REASON_CANNOT_ALLOCATE,)), []
            used.update((r.driver, r.pool, r.device) for r in allocation.results)
            if claim is extended:  # the pod's DRA-backed extended resources: a claim made at binding
                cycle.extended_allocations[node_name] = allocation.status(node_name)
            else:
                results.append(allocation.status(node_name))
        if elsewhere:
            return NodeStatus((REASON_CLAIM_ELSEWHERE,)), []
        return None, results

    @staticmethod
    def _served_by_dra(node: Mapping[str, Any], cycle: _Cycle) -> list[ExtendedRequest]:
        """The pod's mapped extended resources this node does not advertise: DRA serves them here
        (where the node's allocatable has the resource, a device plugin does, and NodeResourcesFit counts it)."""
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        return [r for r in cycle.extended if r.resource not in allocatable]

    @staticmethod
    def _allocator_error(claim: Mapping[str, Any], reason: str) -> str:
        """The structured allocator's wording: ``claim <ns>/<name>: selector #<i>: CEL runtime error: ...``
        (staging/src/k8s.io/dynamic-resource-allocation/structured/allocator.go selectorsMatch); a
        class selector's error reads ``class <name>: selector #<i>: ...`` there and in gpuconf.sim.dra."""
        meta = claim.get("metadata") or {}
        prefix = f"claim {meta.get('name')}, request "
        if reason.startswith(prefix) and ": selector #" in reason:
            return f"claim {meta.get('namespace')}/{meta.get('name')}: selector #" + reason.split(": selector #", 1)[1]
        return reason

    # --- Filter, score ------------------------------------------------------------------------------

    def _filter(self, pod: Obj, cycle: _Cycle) -> tuple[dict[str, NodeStatus], dict[str, list[Obj]]]:
        spec = pod.get("spec") or {}
        tolerations = spec.get("tolerations") or []
        unschedulable_taint = {"key": UNSCHEDULABLE, "effect": "NoSchedule"}
        request = pod_requests(spec)
        statuses: dict[str, NodeStatus] = {}
        feasible: dict[str, list[Obj]] = {}
        for node in cycle.nodes:
            name = node["metadata"]["name"]
            if (node.get("spec") or {}).get("unschedulable") and not any(tolerates(t, unschedulable_taint)
                                                                          for t in tolerations):
                statuses[name] = NodeStatus((REASON_UNSCHEDULABLE,))
                continue
            if untolerated_taint(tolerations, effective_taints(node)) is not None:
                statuses[name] = NodeStatus((REASON_TAINT,))
                continue
            if not pod_matches_node(spec, node):
                statuses[name] = NodeStatus((REASON_AFFINITY,))
                continue
            on_node = cycle.pods_on.get(name, [])
            used: dict[str, int] = {}
            for other in on_node:
                _add(used, pod_requests(other.get("spec") or {}))
            served = {r.resource for r in self._served_by_dra(node, cycle)}
            fit = {k: v for k, v in request.items() if k not in served} if served else request
            short = insufficient_resources(fit, _allocatable(node), used, len(on_node))
            if short:
                statuses[name] = NodeStatus(tuple(r for r, _ in short), resolvable=not any(u for _, u in short))
                continue
            if cycle.claims or cycle.extended:
                status, allocations = self._dra_filter(pod, node, cycle)
                if status is not None:
                    statuses[name] = status
                    continue
                feasible[name] = allocations
            else:
                feasible[name] = []
        return statuses, feasible

    def _pick(self, pod: Obj, cycle: _Cycle, feasible: Mapping[str, list[Obj]]) -> tuple[Obj, list[Obj]]:
        """LeastAllocated on cpu and memory plus preferred node affinity; ties to the first by name."""
        spec = pod.get("spec") or {}
        request = pod_requests(spec)
        preferred = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "preferredDuringSchedulingIgnoredDuringExecution") or []
        best: tuple[float, str] | None = None
        chosen: Obj | None = None
        for node in cycle.nodes:
            name = node["metadata"]["name"]
            if name not in feasible:
                continue
            allocatable = _allocatable(node)
            used = dict(request)
            for other in cycle.pods_on.get(name, []):
                _add(used, pod_requests(other.get("spec") or {}))
            free = [(allocatable[r] - used.get(r, 0)) * 100 / allocatable[r] for r in ("cpu", "memory")
                    if allocatable.get(r)]
            score = sum(free) / len(free) if free else 0.0
            score += sum(int(p.get("weight") or 0) for p in preferred
                         if node_selector_term_matches(p.get("preference") or {}, node))
            if best is None or score > best[0]:
                best, chosen = (score, name), node
        assert chosen is not None
        return chosen, feasible[chosen["metadata"]["name"]]

    # --- outcomes -------------------------------------------------------------------------------------

    def _unschedulable(self, pod: Obj, cycle: _Cycle, statuses: dict[str, NodeStatus], *, prefilter: str,
                       postfilter_claims: bool) -> None:
        postfilter = POSTFILTER_NO_CLAIMS
        if postfilter_claims:
            postfilter = self._deallocate_for(pod, cycle, statuses)
        policy = (pod.get("spec") or {}).get("preemptionPolicy")
        postfilter += ", " + preemption_message(policy, len(cycle.nodes), statuses)
        message = fit_error_message(len(cycle.nodes), statuses, prefilter=prefilter, postfilter=postfilter)
        self._fail(pod, message, "Unschedulable")

    def _deallocate_for(self, pod: Obj, cycle: _Cycle, statuses: Mapping[str, NodeStatus]) -> str:
        """DynamicResources.PostFilter: free an allocated claim that only keeps the pod off every node."""
        if not any(REASON_CLAIM_ELSEWHERE in s.reasons for s in statuses.values()):
            return POSTFILTER_STILL
        uid = pod["metadata"]["uid"]
        for claim in cycle.claims:
            status = claim.get("status") or {}
            reserved = status.get("reservedFor") or []
            if status.get("allocation") and (not reserved or (len(reserved) == 1 and reserved[0].get("uid") == uid)):
                try:
                    self.store.patch_status("resourceclaims.resource.k8s.io", claim["metadata"]["name"],
                                            {"metadata": {"resourceVersion": claim["metadata"]["resourceVersion"]},
                                             "status": {"allocation": None, "reservedFor": None}},
                                            namespace=claim["metadata"]["namespace"])
                except ApiError:
                    return POSTFILTER_STILL
                return POSTFILTER_DEALLOCATED
        return POSTFILTER_STILL

    def _set_condition(self, pod: Obj, reason: str, message: str) -> None:
        conditions = [dict(c) for c in (pod.get("status") or {}).get("conditions") or []]
        current = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
        if current is not None and (current.get("status"), current.get("reason"), current.get("message")) == (
                "False", reason, message):
            return  # podutil.UpdatePodCondition: nothing changed, no write
        condition = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message,
                     "lastProbeTime": None, "lastTransitionTime": _now_rfc3339(time.time())}
        if current is not None and current.get("status") == "False" and current.get("lastTransitionTime"):
            condition["lastTransitionTime"] = current["lastTransitionTime"]
        conditions = [c for c in conditions if c.get("type") != "PodScheduled"] + [condition]
        try:
            self.store.patch_status("pods", pod["metadata"]["name"], {"status": {"conditions": conditions}},
                                    namespace=pod["metadata"]["namespace"])
        except ApiError as e:
            log.debug("pod condition not written: %s", e.message)

    def _fail(self, pod: Obj, message: str, reason: str) -> None:
        """handleSchedulingFailure: the FailedScheduling event and the PodScheduled=False condition."""
        self.events.record(pod, "Warning", "FailedScheduling", message, action="Scheduling")
        self._set_condition(pod, reason, message)

    def _bind(self, pod: Obj, node: Obj, cycle: _Cycle, allocations: list[Obj]) -> tuple[Outcome, str | None]:
        """PreBind (claims: finalizer, allocation, reservedFor), Bind, then the Scheduled event."""
        meta = pod["metadata"]
        consumer = {"resource": "pods", "name": meta["name"], "uid": meta["uid"]}
        pending = dict(zip((id(c) for c in cycle.to_allocate), allocations, strict=False))
        try:
            for claim in cycle.claims:
                if _reserved_for(claim, meta["uid"]):
                    continue
                self._reserve(claim, consumer, pending.get(id(claim)))
            extended = cycle.extended_allocations.get(node["metadata"]["name"])
            if extended is not None:
                self._extended_claim(pod, self._served_by_dra(node, cycle), extended, consumer)
            bound = self.store.bind_pod(meta["namespace"], meta["name"], node["metadata"]["name"], copy=False)
        except ApiError as e:
            log.info("binding %s/%s to %s failed: %s", meta["namespace"], meta["name"], node["metadata"]["name"],
                     e.message)
            return "backoff", None
        self._assigned.apply("MODIFIED", (meta["namespace"], meta["name"]), bound)  # assumed, as the real cache does
        self.events.record(pod, "Normal", "Scheduled",
                           f"Successfully assigned {meta['namespace']}/{meta['name']} to {node['metadata']['name']}",
                           action="Binding")
        return "forget", None

    def _extended_claim(self, pod: Obj, requests: Sequence[ExtendedRequest], allocation: Obj, consumer: Obj) -> None:
        """PreBind for DRA-backed extended resources: the special claim, owned by the pod, allocated and
        reserved for it, and its name and request mappings in pod.status.extendedResourceClaimStatus.
        Every field as kube-scheduler v1.36.2 wrote it on the real tier (2026-12-03)."""
        meta = pod["metadata"]
        body: Obj = {"metadata": {
            "generateName": f"{meta['name']}-extended-resources-",
            "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
            "finalizers": [CLAIM_FINALIZER],
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"],
                                 "controller": True}]},
            "spec": extended_claim_spec(requests)}
        resource = "resourceclaims.resource.k8s.io"
        created = self.store.create(resource, body, namespace=meta["namespace"])
        self.store.patch_status(resource, created["metadata"]["name"],
                                {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
                                 "status": {"allocation": allocation, "reservedFor": [consumer]}},
                                namespace=meta["namespace"])
        self.store.patch_status("pods", meta["name"], {"status": {"extendedResourceClaimStatus": {
            "resourceClaimName": created["metadata"]["name"], "requestMappings": request_mappings(requests)}}},
            namespace=meta["namespace"])

    def _reserve(self, claim: Obj, consumer: Obj, allocation: Obj | None) -> None:
        resource = "resourceclaims.resource.k8s.io"
        meta = claim["metadata"]
        if allocation is not None and CLAIM_FINALIZER not in (meta.get("finalizers") or []):
            updated = dict(claim)
            updated["metadata"] = {**meta, "finalizers": [*(meta.get("finalizers") or []), CLAIM_FINALIZER]}
            claim = self.store.update(resource, updated, namespace=meta["namespace"])
        status: Obj = {"reservedFor": [*((claim.get("status") or {}).get("reservedFor") or []), consumer]}
        if allocation is not None:
            status["allocation"] = allocation
        self.store.patch_status(resource, meta["name"],
                                {"metadata": {"resourceVersion": claim["metadata"]["resourceVersion"]},
                                 "status": status}, namespace=meta["namespace"])

