"""One namespace per run, cleaned up whatever happens, and probe campaigns launched into it.

A :class:`RunContext` creates the run namespace (and the non-preempting PriorityClass probes use)
and registers each undo right after each create; the undos run last-in-first-out on exit, on an
exception and on SIGINT/SIGTERM. :func:`run_campaign` launches every pod of a campaign at once and
follows them all with one watch on the namespace (launch once, assert many: a campaign takes as
long as its slowest pod), then reads logs and events once and returns a :class:`PodOutcome` per pod.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from types import FrameType, TracebackType
from typing import Any

import urllib3

from gpuconf.cluster.access import Cluster, stream_lines
from gpuconf.cluster.claims import ClaimWatch
from gpuconf.cluster.errors import (
    ApiCallError,
    ClusterError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    OverloadedError,
    UnreachableError,
)
from gpuconf.cluster.outcomes import (
    PodOutcome,
    finished_reason,
    is_unschedulable,
    make_outcome,
    make_rejected_outcome,
    parse_time,
)
from gpuconf.probe_pods import PRIORITY_CLASS, make_probe_sources_configmap, sources_configmap_name

__all__ = ["LIVENESS_INTERVAL_S", "MANAGED_BY_LABEL", "RUN_ID_LABEL", "SCHEDULE_BUDGET_ANNOTATION", "RunContext",
           "collect_leftovers", "lease_expired", "live_runs", "make_priority_class", "make_run_lease",
           "make_run_namespace", "needed_source_configmaps", "new_run_id", "run_campaign", "select_dead_runs",
           "select_leftovers"]

Obj = Mapping[str, Any]

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
RUN_ID_LABEL = "gpuconf.io/run-id"
CAMPAIGN_LABEL = "gpuconf.io/campaign"
PROBE_LABEL = "gpuconf.io/probe"
#: Per-pod override of how long it may stay Pending-unschedulable before that is its outcome.
SCHEDULE_BUDGET_ANNOTATION = "gpuconf.io/schedule-budget-s"
#: A run older than this whose namespace is still there was killed (kill -9, a lost CI runner);
#: the rule for runs without a liveness mark (see :func:`make_run_lease`).
DEFAULT_LEFTOVER_GRACE_S = 6 * 3600.0
#: How often a live run renews its liveness mark; the mark expires after three periods.
LIVENESS_INTERVAL_S = 10.0


def new_run_id() -> str:
    """Sortable by start time and unique enough for concurrent runs: ``20250102-030405-a1b2``."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)


def make_run_namespace(run_id: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": f"gpuconf-{run_id}", "labels": {RUN_ID_LABEL: run_id, MANAGED_BY_LABEL: "gpuconf"}}}


def make_priority_class() -> dict[str, Any]:
    """Value 0 and ``preemptionPolicy: Never``: a probe waits for room, it never evicts anyone's work."""
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": PRIORITY_CLASS, "labels": {MANAGED_BY_LABEL: "gpuconf"}},
            "value": 0, "preemptionPolicy": "Never", "globalDefault": False,
            "description": "gpuconf conformance probes: never preempt other pods"}


def _micro_time(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def make_run_lease(run_id: str, namespace: str, *, interval_s: float, now: datetime) -> dict[str, Any]:
    """The run's liveness mark: a Lease ``gpuconf-run-<run id>`` in the run's namespace, renewed
    every ``interval_s`` while the run lives and valid for three periods (``leaseDurationSeconds``),
    so a later run can tell a killed run's objects from a live run's within seconds."""
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": f"gpuconf-run-{run_id}", "namespace": namespace,
                         "labels": {RUN_ID_LABEL: run_id, MANAGED_BY_LABEL: "gpuconf"}},
            "spec": {"holderIdentity": run_id, "leaseDurationSeconds": max(1, math.ceil(3 * interval_s)),
                     "acquireTime": _micro_time(now), "renewTime": _micro_time(now)}}


def ensure_priority_class(c: Cluster) -> None:
    """Create the probes' PriorityClass if missing. It is never deleted: it may be pre-existing, or
    in use by a concurrent run whose pods would be refused without it; it is harmless (value 0,
    Never). ForbiddenError when the identity may not read it, or may not create a missing one."""
    try:
        c.call("read priorityclass", c.scheduling.read_priority_class, PRIORITY_CLASS)
    except NotFoundError:
        try:
            c.call("create priorityclass", c.scheduling.create_priority_class, make_priority_class())
        except ConflictError:  # another run made it in between
            pass


def live_runs(cluster: Cluster, namespace: str, *, now: datetime | None = None) -> list[str]:
    """The gpuconf runs whose liveness mark in ``namespace`` is current (renewed within its duration),
    by run id: a run started in that namespace meanwhile would create probe objects under the same
    names as theirs (``inventory-<node>``, the NCCL Services, the claim templates)."""
    now = now or datetime.now(UTC)
    listing = cluster.call_json(f"list leases in {namespace}", cluster.coordination.list_namespaced_lease,
                                namespace, label_selector=_RUN_SELECTOR)
    return sorted({run for lease in listing.get("items") or []
                   if (run := _run_of(lease)) is not None and not lease_expired(lease, now)})


def lease_expired(lease: Obj, now: datetime) -> bool:
    """Pure: whether a liveness mark was last renewed more than its duration ago."""
    spec = lease.get("spec") or {}
    renewed = parse_time(spec.get("renewTime") or spec.get("acquireTime"))
    duration = spec.get("leaseDurationSeconds")
    if renewed is None or not isinstance(duration, int | float):
        return False  # not one of ours, or unreadable: the 6-hour rule decides
    return (now - renewed).total_seconds() > float(duration)


# -------------------------------------------------------------------------------------------------
# The run namespace and its cleanup


class RunContext:
    """``with RunContext(cluster) as ctx:``: the run namespace exists inside, and is gone after.

    Signal handlers (main thread only) run the cleanup and then do what the previous handler
    would have done (KeyboardInterrupt for SIGINT; for SIGTERM the plugin's interrupt, or exit by the signal).
    """

    def __init__(self, cluster: Cluster, *, run_id: str | None = None, handle_signals: bool = True,
                 namespace: str | None = None, liveness_interval_s: float | None = LIVENESS_INTERVAL_S,
                 prepare_budget_s: float | None = None, tolerations: Sequence[Mapping[str, str]] = ()) -> None:
        self.cluster = cluster
        #: Tolerations every campaign pod gets besides its own (--include-cordoned, --tolerate).
        self.tolerations = tuple(dict(t) for t in tolerations)
        #: Nodes a pinned probe could not be placed on for the node's own state, found when the
        #: scheduler said so (cordoned, tainted or busy after the run started): node -> (state, reason).
        self.unplaced: dict[str, tuple[str, str]] = {}
        #: The campaigns' ``prepare_budget`` (``--prepare-timeout``; PREPARE_BUDGET_S when not given).
        self.prepare_budget_s = PREPARE_BUDGET_S if prepare_budget_s is None else prepare_budget_s
        self.run_id = run_id or new_run_id()
        #: ``namespace`` given: an existing namespace the run uses and keeps (users who may not create
        #: namespaces); only what the run creates in it is deleted.
        self.own_namespace = namespace is None
        self.namespace = namespace or f"gpuconf-{self.run_id}"
        self._cleanups: list[tuple[str, Callable[[], object]]] = []
        self._lock = threading.RLock()
        self._handle_signals = handle_signals
        self._previous: dict[int, Any] = {}
        self._campaigns = 0
        #: Undos that failed (other than NotFound), as one-line messages, in the order they ran.
        self.cleanup_errors: list[str] = []
        #: The liveness mark's renewal period (None: no mark, and no collection of killed runs' objects).
        self.liveness_interval_s = liveness_interval_s
        self._alive = threading.Event()
        #: What this run deleted of killed runs at its start, and why a collection could not be made.
        self.collected: list[str] = []
        self.collect_error: str | None = None
        #: Told how a campaign's pods stand while it waits (gpuconf.plugin.terminal's live line on a
        #: terminal): a CampaignProgress at most every PROGRESS_EVERY_S seconds, and None when it ends.
        self.on_progress: Callable[[CampaignProgress | None], None] | None = None

    # Cleanup -------------------------------------------------------------------------------------

    def add_cleanup(self, what: str, undo: Callable[[], object]) -> None:
        """Register ``undo`` (named ``what`` in messages) to run at exit, before earlier ones."""
        with self._lock:
            self._cleanups.append((what, undo))

    def cleanup(self) -> None:
        """Run every registered undo, last first, once each; NotFound means already undone."""
        while True:
            with self._lock:
                if not self._cleanups:
                    return
                what, undo = self._cleanups.pop()
            try:
                undo()
            except NotFoundError:
                continue
            except UnreachableError as e:  # every other undo would wait out its retries in vain
                with self._lock:
                    left, self._cleanups = len(self._cleanups), []
                self._alive.set()
                self.cleanup_errors.append(f"{what} and {left} more not done: {e}; a later run deletes them once "
                                           f"this run's liveness mark expires")
                return
            except ClusterError as e:
                self.cleanup_errors.append(f"{what}: {e}")

    # Entering and leaving --------------------------------------------------------------------------

    def __enter__(self) -> RunContext:
        self._install_handlers()
        try:
            self._create_namespace()
            self._ensure_priority_class()
            if self.liveness_interval_s is not None:
                self._mark_alive(self.liveness_interval_s)
                self._collect_leftovers()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            self.cleanup()
        finally:
            self._restore_handlers()
        if exc is None and self.cleanup_errors:
            raise ClusterError(f"run {self.run_id}: cleanup left objects behind: {'; '.join(self.cleanup_errors)}")

    def _create_namespace(self) -> None:
        c = self.cluster
        if not self.own_namespace:
            try:
                c.call("read namespace", c.core.read_namespace, self.namespace)
            except NotFoundError as e:
                raise ClusterError(f"namespace {self.namespace} does not exist (--namespace names an existing "
                                   f"namespace; leave it out and the run creates its own)") from e
            return
        try:
            c.call("create namespace", c.core.create_namespace, make_run_namespace(self.run_id))
        except ConflictError:  # a retried create whose first attempt went through (the run id is new)
            pass
        self.add_cleanup(f"delete namespace {self.namespace}", lambda: c.call(
            f"delete namespace {self.namespace}", c.core.delete_namespace, self.namespace,
            propagation_policy="Background"))

    def _mark_alive(self, interval_s: float) -> None:
        """Create the run's Lease and renew it from a background thread until cleanup (its undo
        runs before the earlier ones: the objects go while the mark still says the run lives)."""
        c = self.cluster
        lease = make_run_lease(self.run_id, self.namespace, interval_s=interval_s, now=datetime.now(UTC))
        name = lease["metadata"]["name"]
        try:
            c.call(f"create lease {name}", c.coordination.create_namespaced_lease, self.namespace, lease)
        except ConflictError:  # a retried create whose first attempt went through
            pass
        except ForbiddenError as e:  # an identity without the Lease rule: the run goes on unmarked
            self.collect_error = f"no liveness mark: {e}"
            return
        if not self.own_namespace:  # a run namespace takes its lease with it
            self.add_cleanup(f"delete lease {name}", lambda: c.call(
                f"delete lease {name}", c.coordination.delete_namespaced_lease, name, self.namespace))

        def renew() -> None:
            while not self._alive.wait(interval_s):
                patch = {"spec": {"renewTime": _micro_time(datetime.now(UTC))}}
                try:
                    c.call(f"renew lease {name}", c.coordination.patch_namespaced_lease, name, self.namespace, patch)
                except ClusterError:  # the next renewal tries again; three misses and the run looks killed
                    continue

        self._alive.clear()
        threading.Thread(target=renew, name=f"lease-{self.run_id}", daemon=True).start()
        self.add_cleanup(f"stop renewing lease {name}", self._alive.set)

    def _collect_leftovers(self) -> None:
        """Delete what killed runs left (their namespaces, or their objects in the shared namespace)."""
        try:
            self.collected = collect_leftovers(self.cluster, current_run_id=self.run_id,
                                               namespace=None if self.own_namespace else self.namespace)
        except ForbiddenError as e:  # the identity may not look: the run goes on, the report says so
            self.collect_error = str(e)

    def _ensure_priority_class(self) -> None:
        ensure_priority_class(self.cluster)

    # Signals --------------------------------------------------------------------------------------

    def _install_handlers(self) -> None:
        if not self._handle_signals or threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._on_signal)

    def _restore_handlers(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        self._previous = {}

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        previous = self._previous.get(signum)
        self.cleanup()
        self._restore_handlers()
        if callable(previous):
            previous(signum, frame)  # SIGINT: Python's default raises KeyboardInterrupt
        elif previous != signal.SIG_IGN:
            os.kill(os.getpid(), signum)  # the default action, now that our handler is gone

    def create(self, what: str, create: Callable[..., object], delete: Callable[..., object],
               body: dict[str, Any]) -> str:
        """Create a namespaced object the run needs (``create(namespace, body)``) and register its
        deletion (``delete(name, namespace)``); one already there from earlier in this run is reused."""
        name = str(body["metadata"]["name"])
        c = self.cluster
        try:
            c.call(f"create {what} {name}", create, self.namespace, body)
        except ConflictError:  # made earlier in this run: its cleanup is registered
            return name
        self.add_cleanup(f"delete {what} {name}", lambda: c.call(f"delete {what} {name}", delete, name,
                                                                  self.namespace))
        return name

    def next_campaign_id(self) -> str:
        with self._lock:
            self._campaigns += 1
            return f"c{self._campaigns}"


# -------------------------------------------------------------------------------------------------
# Leftovers of killed runs


def _run_of(obj: Obj) -> str | None:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if labels.get(MANAGED_BY_LABEL) != "gpuconf" or not labels.get(RUN_ID_LABEL):
        return None
    return str(labels[RUN_ID_LABEL])


def _is_lease(obj: Obj) -> bool:
    return obj.get("kind") == "Lease" or "holderIdentity" in (obj.get("spec") or {})


def select_dead_runs(objects: Sequence[Obj], *, current_run_id: str | None, now: datetime,
                     grace_s: float) -> list[str]:
    """Pure: the ids of other runs that are over, from what carries their run-id label. A run with a
    liveness mark (a Lease among ``objects``) is over when the mark expired; a run without one (a run
    of an older gpuconf, or one killed before it made its mark) when its newest object is older than
    ``grace_s``."""
    leases: dict[str, Obj] = {}
    newest: dict[str, datetime | None] = {}
    for obj in objects:
        run = _run_of(obj)
        if run is None or run == current_run_id:
            continue
        if _is_lease(obj):
            leases[run] = obj
        created = parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
        before = newest.get(run)
        newest[run] = created if before is None or (created is not None and created > before) else before
    dead = []
    for run, created in newest.items():
        if run in leases:
            if lease_expired(leases[run], now):
                dead.append(run)
        elif created is not None and (now - created).total_seconds() >= grace_s:
            dead.append(run)
    return sorted(dead)


def select_leftovers(namespaces: Sequence[Obj], *, current_run_id: str | None, now: datetime,
                     grace_s: float, leases: Sequence[Obj] = ()) -> list[str]:
    """Pure: names of gpuconf run namespaces of other runs that are over (see
    :func:`select_dead_runs`; ``leases``: the runs' liveness marks), not already going."""
    live = [ns for ns in namespaces if not (ns.get("metadata") or {}).get("deletionTimestamp")]
    marks = [lease for lease in leases
             if any((lease.get("metadata") or {}).get("namespace") == (ns.get("metadata") or {}).get("name")
                    for ns in live)]
    dead = set(select_dead_runs([*live, *marks], current_run_id=current_run_id, now=now, grace_s=grace_s))
    return sorted(str((ns.get("metadata") or {}).get("name")) for ns in live if _run_of(ns) in dead)


_RUN_SELECTOR = f"{MANAGED_BY_LABEL}=gpuconf,{RUN_ID_LABEL}"


def _shared_kinds(cluster: Cluster) -> list[tuple[str, Callable[..., Any], Callable[..., Any]]]:
    """What a run creates in a shared namespace (``--namespace``) besides pods: kind, list, delete."""
    core, resource = cluster.core, cluster.resource
    return [("service", core.list_namespaced_service, core.delete_namespaced_service),
            ("configmap", core.list_namespaced_config_map, core.delete_namespaced_config_map),
            ("resourceclaimtemplate", resource.list_namespaced_resource_claim_template,
             resource.delete_namespaced_resource_claim_template),
            ("lease", cluster.coordination.list_namespaced_lease, cluster.coordination.delete_namespaced_lease)]


def collect_leftovers(cluster: Cluster, *, current_run_id: str | None = None, namespace: str | None = None,
                      grace_s: float = DEFAULT_LEFTOVER_GRACE_S, now: datetime | None = None) -> list[str]:
    """Delete what runs that are over left behind (see :func:`select_dead_runs`): without
    ``namespace``, their run namespaces; with it (a shared namespace), their pods, Services,
    ConfigMaps, ResourceClaimTemplates and Leases there. Returns what it deleted: namespace names,
    or ``KIND/NAME`` in the shared namespace."""
    now = now or datetime.now(UTC)
    if namespace is None:
        listing = cluster.call_json("list namespaces", cluster.core.list_namespace, label_selector=_RUN_SELECTOR)
        leases = cluster.call_json("list leases", cluster.coordination.list_lease_for_all_namespaces,
                                   label_selector=_RUN_SELECTOR)
        names = select_leftovers(listing.get("items") or [], current_run_id=current_run_id, now=now,
                                 grace_s=grace_s, leases=[{**i, "kind": "Lease"} for i in leases.get("items") or []])
        for name in names:
            try:
                cluster.call(f"delete namespace {name}", cluster.core.delete_namespace, name,
                             propagation_policy="Background")
            except NotFoundError:
                pass
        return names
    found: list[tuple[str, Callable[..., Any], dict[str, Any]]] = []
    pods = cluster.call_json(f"list pods in {namespace}", cluster.core.list_namespaced_pod, namespace,
                             label_selector=_RUN_SELECTOR)
    found += [("pod", cluster.core.delete_namespaced_pod, i) for i in pods.get("items") or []]
    for kind, lister, deleter in _shared_kinds(cluster):
        listing = cluster.call_json(f"list {kind}s in {namespace}", lister, namespace, label_selector=_RUN_SELECTOR)
        found += [(kind, deleter, {**i, "kind": "Lease"} if kind == "lease" else i) for i in listing.get("items") or []]
    dead = set(select_dead_runs([obj for _, _, obj in found], current_run_id=current_run_id, now=now, grace_s=grace_s))
    deleted = []
    for run in sorted(dead):
        if any(kind == "pod" and _run_of(obj) == run for kind, _, obj in found):
            cluster.call(f"delete pods of run {run}", cluster.core.delete_collection_namespaced_pod, namespace,
                         label_selector=f"{RUN_ID_LABEL}={run}")
        for kind, deleter, obj in found:
            if _run_of(obj) != run:
                continue
            name = str((obj.get("metadata") or {}).get("name"))
            deleted.append(f"{kind}/{name}")
            if kind == "pod":
                continue
            try:
                cluster.call(f"delete {kind} {name}", deleter, name, namespace)
            except NotFoundError:
                pass
    return deleted


# -------------------------------------------------------------------------------------------------
# Campaigns: pure preparation


def _prepare(pod: Obj, ctx: RunContext, campaign: str) -> dict[str, Any]:
    out = copy.deepcopy(dict(pod))
    meta = out.setdefault("metadata", {})
    if not meta.get("name"):
        raise ValueError("every campaign pod needs a metadata.name (outcomes are keyed by it)")
    if meta.get("namespace") not in (None, ctx.namespace):
        raise ValueError(f"pod {meta['name']} is for namespace {meta['namespace']}, not the run's {ctx.namespace}")
    meta["namespace"] = ctx.namespace
    meta["labels"] = {**(meta.get("labels") or {}), RUN_ID_LABEL: ctx.run_id, MANAGED_BY_LABEL: "gpuconf",
                      CAMPAIGN_LABEL: campaign}
    if ctx.tolerations:
        spec = out.setdefault("spec", {})
        own = list(spec.get("tolerations") or [])
        spec["tolerations"] = own + [t for t in ctx.tolerations if t not in own]
    return out


def _pinned_node(pod: Obj) -> str | None:
    """The node a probe is pinned to (by the hostname nodeSelector, as every per-node probe is)."""
    spec = pod.get("spec") or {}
    return (spec.get("nodeSelector") or {}).get("kubernetes.io/hostname") or spec.get("nodeName") or None


def _record_unplaced(ctx: RunContext, prepared: Sequence[Obj], outcomes: Mapping[str, PodOutcome]) -> None:
    """Pinned pods the scheduler refused for the node's own state (cordoned, tainted, NotReady, its
    GPUs taken by other pods: judged from the node re-read now and one pod list) mark the node
    untested in ``ctx.unplaced``."""
    from gpuconf.cluster.inventory import build_inventory, list_active_pods
    from gpuconf.nodes.availability import availability, gpu_holders, placement_blocker

    refused = {node: (pod, outcomes[name].message or "") for pod in prepared
               if (name := pod["metadata"]["name"]) in outcomes and outcomes[name].reason == "Unschedulable"
               and (node := _pinned_node(pod)) is not None and node not in ctx.unplaced}
    if not refused:
        return
    try:
        holders = gpu_holders(list_active_pods(ctx.cluster), exclude_namespace=ctx.namespace)
        # a list by name, not a get: the runner's ClusterRole lists nodes and gets none
        nodes = {name: (ctx.cluster.call_json(f"list node {name}", ctx.cluster.core.list_node,
                                              field_selector=f"metadata.name={name}").get("items") or [{}])[0]
                 for name in refused}
    except ClusterError:
        return  # the refusals stand as the checks' own outcomes
    for name, (pod, message) in refused.items():
        found = build_inventory([nodes[name]], [], [], [], None).gpu_nodes if nodes[name] else ()
        if not found:
            continue
        now = availability(found[0], (pod.get("spec") or {}).get("tolerations") or (), holders.get(name, ()),
                           now=datetime.now(UTC))
        if (blocker := placement_blocker(name, message, now)) is not None:
            ctx.unplaced[name] = blocker


def needed_source_configmaps(pods: Sequence[Obj]) -> list[str]:
    """Probes whose zero-registry sources ConfigMap some pod mounts (by its content-addressed name)."""
    probes = set()
    names: dict[str, str] = {}  # once per probe, not per pod: the name hashes the probe's source files
    for pod in pods:
        probe = ((pod.get("metadata") or {}).get("labels") or {}).get(PROBE_LABEL)
        if not probe or str(probe) in probes:
            continue
        mounted = {(v.get("configMap") or {}).get("name") for v in (pod.get("spec") or {}).get("volumes") or ()}
        if str(probe) not in names:
            names[str(probe)] = sources_configmap_name(str(probe))
        if names[str(probe)] in mounted:
            probes.add(str(probe))
    return sorted(probes)


def _budget(pod: Obj, default: float) -> float:
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(SCHEDULE_BUDGET_ANNOTATION)
    try:
        return float(value) if value is not None else default
    except ValueError:
        return default


# -------------------------------------------------------------------------------------------------
# Campaigns: following the pods with one watch


@dataclass(frozen=True)
class CampaignProgress:
    """How a campaign's pods stand: scheduled or not yet (pending), running, done; seconds it has waited."""

    pods: int
    pending: int
    running: int
    done: int
    elapsed_s: float

    def line(self) -> str:
        return (f"[{self.pods} probe pod{'' if self.pods == 1 else 's'}: {self.pending} pending, {self.running} "
                f"running, {self.done} done; {self.elapsed_s:.0f} s]")


#: How often a waiting campaign tells RunContext.on_progress, at most.
PROGRESS_EVERY_S = 1.0


class _Follower:
    """The last state of each pod and why following it stopped; fed by a list, then by watch events.

    Each event costs O(1): the pods still pending and those unschedulable among them are kept as
    sets, so a campaign of thousands of pods is not quadratic in its watch events."""

    def __init__(self, names: Sequence[str], budgets: Mapping[str, float], created: Mapping[str, float],
                 prepare_budget: float = math.inf) -> None:
        self.names = set(names)
        self.pods: dict[str, dict[str, Any]] = {}
        self.done: dict[str, str] = {}
        self.budgets, self.created = budgets, created
        self._pending = set(self.names)
        self._unschedulable: set[str] = set()
        #: pods with ResourceClaims bound to a node and not started: when to look at their events next
        self.prepare_budget = prepare_budget
        self._unprepared: dict[str, float] = {}

    def see(self, kind: str, pod: dict[str, Any]) -> None:
        name = str((pod.get("metadata") or {}).get("name"))
        if name not in self.names or name in self.done:
            return
        self.pods[name] = pod
        if kind == "DELETED":
            self._finish(name, "Deleted")
        elif (why := finished_reason(pod)) is not None:
            self._finish(name, why)
        elif is_unschedulable(pod):
            self._unschedulable.add(name)
        else:
            self._unschedulable.discard(name)
            if _awaits_prepare(pod) and math.isfinite(self.prepare_budget):
                self._unprepared.setdefault(name, time.monotonic() + self.prepare_budget)
            else:
                self._unprepared.pop(name, None)

    def _finish(self, name: str, why: str) -> None:
        self.done[name] = why
        self._pending.discard(name)
        self._unschedulable.discard(name)
        self._unprepared.pop(name, None)

    def prepare_due(self, now: float) -> list[str]:
        """Claim pods bound for ``prepare_budget`` seconds without a container started: their events
        say whether the kubelet is stuck preparing their claims (:meth:`prepare_failed`)."""
        return sorted(n for n, at in self._unprepared.items() if now >= at)

    def prepare_failed(self, name: str, failed: bool, now: float) -> None:
        """Stop following ``name`` when the kubelet is stuck preparing its claims (it retries for ever,
        the pod stays ContainerCreating); else look again one budget later."""
        if failed:
            self._finish(name, FAILED_PREPARE)
        elif name in self._unprepared:
            self._unprepared[name] = now + self.prepare_budget

    def check_budgets(self, now: float) -> None:
        for name in sorted(self._unschedulable):
            if now - self.created[name] >= self.budgets[name]:
                self._finish(name, "Unschedulable")

    def next_budget_end(self) -> float:
        """When the first unschedulable pod's budget runs out (the watch must wake then, as no event
        may come). A pod merely not scheduled yet needs no wake-up: the scheduler's verdict on it
        arrives as an event, and :meth:`check_budgets` runs on every event. Counting such pods
        made a campaign whose creates outlast the budget re-watch after every event."""
        return min([*(self.created[n] + self.budgets[n] for n in self._unschedulable),
                    *self._unprepared.values()], default=math.inf)

    def progress(self, elapsed_s: float) -> CampaignProgress:
        running = sum(1 for n in self._pending if ((self.pods.get(n) or {}).get("status") or {}).get("phase")
                      == "Running")
        return CampaignProgress(len(self.names), len(self._pending) - running, running, len(self.done), elapsed_s)

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)

    @property
    def pending(self) -> list[str]:
        return sorted(self._pending)


#: The kubelet's event for a pod whose ResourceClaims its DRA driver could not prepare.
FAILED_PREPARE = "FailedPrepareDynamicResources"
#: Seconds a pod with ResourceClaims may stay bound without a started container before its events
#: are read: the kubelet prepares claims before the sandbox and the image pull, so a pod past this
#: with a FailedPrepareDynamicResources event and none of a later step has been retried and is stuck.
#: The default of ``--prepare-timeout``: a DRA driver whose prepare fails at first and succeeds on a
#: retry later than this is reported as failing; give more where that is normal.
PREPARE_BUDGET_S = 20.0


def _awaits_prepare(pod: Obj) -> bool:
    """A pod with ResourceClaims, bound to a node, none of whose containers runs or ran yet."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if not spec.get("resourceClaims") or not spec.get("nodeName"):
        return False
    states = [s.get("state") or {} for s in (status.get("initContainerStatuses") or [])
              + (status.get("containerStatuses") or [])]
    return not any(st.get("running") or st.get("terminated") for st in states)


#: Kubelet events that come only after a pod's claims were prepared.
_PAST_PREPARE = frozenset({"Pulling", "Pulled", "Created", "Started", "Failed", "BackOff", "Killing"})


def _stuck_preparing(cluster: Cluster, namespace: str, name: str) -> bool:
    """The kubelet reported FailedPrepareDynamicResources for the pod and nothing it does later."""
    listing = cluster.call_json("list events", cluster.core.list_namespaced_event, namespace,
                                field_selector=f"involvedObject.kind=Pod,involvedObject.name={name}")
    reasons = {str(e.get("reason") or "") for e in listing.get("items") or []}
    return FAILED_PREPARE in reasons and not reasons & _PAST_PREPARE


def _check_prepares(cluster: Cluster, ctx: RunContext, follower: _Follower) -> None:
    now = time.monotonic()
    for name in follower.prepare_due(now):
        follower.prepare_failed(name, _stuck_preparing(cluster, ctx.namespace, name), now)


def _follow(cluster: Cluster, ctx: RunContext, selector: str, follower: _Follower, deadline: float) -> None:
    """One watch on the namespace until every pod is done or the deadline passes: relist on start
    and after 410 Gone; resume from the last resourceVersion when a stream ends or breaks."""
    tell = _progress_teller(ctx, follower)
    try:
        _watch(cluster, ctx, selector, follower, deadline, tell)
    finally:
        if (show := getattr(ctx, "on_progress", None)) is not None:
            show(None)


def _progress_teller(ctx: RunContext, follower: _Follower) -> Callable[[], None]:
    """What tells ctx.on_progress how the campaign stands, at most every PROGRESS_EVERY_S seconds."""
    started, last = time.monotonic(), [-math.inf]

    def tell() -> None:
        now = time.monotonic()
        show = getattr(ctx, "on_progress", None)  # (a context made elsewhere may not have it)
        if show is not None and now - last[0] >= PROGRESS_EVERY_S:
            last[0] = now
            show(follower.progress(now - started))
    return tell


def _watch(cluster: Cluster, ctx: RunContext, selector: str, follower: _Follower, deadline: float,
           tell: Callable[[], None]) -> None:
    core, rv = cluster.core, None
    while follower.has_pending and time.monotonic() < deadline:
        if rv is None:
            listing = cluster.call_json("list pods", core.list_namespaced_pod, ctx.namespace, label_selector=selector)
            for item in listing.get("items") or []:
                follower.see("ADDED", item)
            tell()
            rv = str((listing.get("metadata") or {}).get("resourceVersion") or "")
            follower.check_budgets(time.monotonic())
            _check_prepares(cluster, ctx, follower)
            continue
        wake = min(deadline, follower.next_budget_end())
        wait_s = max(1, math.ceil(wake - time.monotonic()))
        try:
            response: Any = cluster.call("watch pods", core.list_namespaced_pod, ctx.namespace, label_selector=selector,
                                    watch=True, resource_version=rv, allow_watch_bookmarks=True,
                                    timeout_seconds=wait_s, _preload_content=False,
                                    _request_timeout=(cluster.retry.request_timeout, wait_s + 5))
        except ClusterError as e:
            if isinstance(e, ApiCallError) and e.status == 410:
                rv = None
                continue
            raise
        try:
            for line in stream_lines(response):
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:  # too old: the history moved on, relist
                        rv = None
                        break
                    raise ApiCallError(f"watch pods in {ctx.namespace}: {obj.get('message')}",
                                       status=int(obj.get("code") or 0), reason=str(obj.get("reason", "")))
                rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                if kind != "BOOKMARK":
                    follower.see(str(kind), obj)
                    tell()
                follower.check_budgets(time.monotonic())
                _check_prepares(cluster, ctx, follower)
                # A pod that turned unschedulable in this event may end its budget before the
                # watch's own timeout: re-watch with the nearer wake-up, as no event may come.
                if not follower.has_pending or time.monotonic() >= wake or follower.next_budget_end() < wake:
                    break
        except (urllib3.exceptions.HTTPError, ConnectionError):
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))  # a cut stream: resume from rv
        finally:
            response.close()  # not back to the pool: an unread rest of the stream would poison it
            response.release_conn()
        follower.check_budgets(time.monotonic())
        _check_prepares(cluster, ctx, follower)


# -------------------------------------------------------------------------------------------------
# Campaigns: evidence


def _events_by_pod(cluster: Cluster, namespace: str) -> dict[str, list[dict[str, Any]]]:
    listing = cluster.call_json("list events", cluster.core.list_namespaced_event, namespace,
                                field_selector="involvedObject.kind=Pod")
    out: dict[str, list[dict[str, Any]]] = {}
    for event in listing.get("items") or []:
        involved = event.get("involvedObject") or {}
        out.setdefault(str(involved.get("uid") or involved.get("name")), []).append(event)
    return out


#: Why a campaign outcome has no log of an init container: it exited 0 and the pod succeeded, so
#: its log (the probe's build) is no evidence of anything; it is read whenever the pod did not succeed.
SKIPPED_INIT_LOG = "not read: the init container exited 0 and the pod succeeded"


def _read_logs(cluster: Cluster, pod: Obj, max_bytes: int) -> tuple[dict[str, str], dict[str, str], set[str]]:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    statuses = {s.get("name"): s for s in (status.get("initContainerStatuses") or [])
                + (status.get("containerStatuses") or [])}
    logs: dict[str, str] = {}
    missing: dict[str, str] = {}
    truncated: set[str] = set()
    spec = pod.get("spec") or {}
    inits = {str(c.get("name")) for c in spec.get("initContainers") or []}
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        name = str(container.get("name"))
        state = (statuses.get(name) or {}).get("state") or {}
        if not state.get("running") and not state.get("terminated"):
            waiting = (state.get("waiting") or {}).get("reason")
            missing[name] = f"never started ({waiting})" if waiting else "never started"
            continue
        if name in inits and status.get("phase") == "Succeeded" and (state.get("terminated") or {}).get(
                "exitCode") == 0:  # one request per pod fewer: a step that worked, in a pod that worked
            missing[name] = SKIPPED_INIT_LOG
            continue
        try:
            response: Any = cluster.call(f"read log of {meta.get('name')}/{name}", cluster.core.read_namespaced_pod_log,
                                    str(meta.get("name")), str(meta.get("namespace")), container=name,
                                    limit_bytes=max_bytes, _preload_content=False)
        except OverloadedError:  # the API server's state, not the node's: the check is not tested
            raise
        except ApiCallError as e:  # a node gone, a kubelet not answering: say so, never guess
            missing[name] = f"unreadable: {e}"
            continue
        data = bytes(response.data or b"")
        if len(data) >= max_bytes:
            truncated.add(name)
        logs[name] = data.decode("utf-8", errors="replace")
    return logs, missing, truncated


def _deleter(cluster: Cluster, kind: str, name: str, namespace: str) -> Callable[[], object]:
    delete = {"configmap": cluster.core.delete_namespaced_config_map}[kind]
    return lambda: cluster.call(f"delete {kind} {name}", delete, name, namespace)


def _create_pod(cluster: Cluster, pod: dict[str, Any]) -> PodOutcome | None:
    """None when created (or already there after a retried create); an outcome when refused."""
    name = pod["metadata"]["name"]
    try:
        cluster.call(f"create pod {name}", cluster.core.create_namespaced_pod, pod["metadata"]["namespace"], pod)
    except ConflictError:  # a retried create whose first attempt went through: our own pod
        return None
    except ForbiddenError:
        raise
    except ApiCallError as e:
        if 400 <= e.status < 500 and e.status != 429:  # admission, validation, quota: the cluster's answer
            return make_rejected_outcome(name, e.reason or str(e.status), e.message)
        raise
    return None


def run_campaign(ctx: RunContext, pods: Sequence[Obj], *, timeout: float, schedule_budget: float = 60.0,
                 max_log_bytes: int = 256 * 1024, parallel_creates: int = 8,
                 record_claims: bool = False, prepare_budget: float | None = None) -> dict[str, PodOutcome]:
    """Launch every pod at once into the run namespace, follow them with one watch until each is
    finished, stuck for good, unschedulable past its budget (``schedule_budget`` seconds from
    creation, or the pod's ``gpuconf.io/schedule-budget-s`` annotation), bound with ResourceClaims
    the kubelet still fails to prepare ``prepare_budget`` seconds later (default: the run's
    ``prepare_budget_s``, ``--prepare-timeout``), or ``timeout`` passes;
    then read logs and events once. The campaign's pods are deleted afterwards (a pod left
    Pending or Running would hold GPUs the next campaign needs). ``record_claims``: also watch the
    namespace's ResourceClaims meanwhile and give each outcome its claims as seen allocated."""
    cluster = ctx.cluster
    campaign = ctx.next_campaign_id()
    prepared = [_prepare(p, ctx, campaign) for p in pods]
    names = [p["metadata"]["name"] for p in prepared]
    if len(set(names)) != len(names):
        raise ValueError(f"campaign pods need unique names: {sorted(n for n in set(names) if names.count(n) > 1)}")
    deadline = time.monotonic() + timeout
    selector = f"{CAMPAIGN_LABEL}={campaign},{RUN_ID_LABEL}={ctx.run_id}"

    for probe in needed_source_configmaps(prepared):
        configmap = make_probe_sources_configmap(probe, namespace=ctx.namespace, run_id=ctx.run_id)
        cm_name = configmap["metadata"]["name"]
        try:
            cluster.call(f"create configmap {cm_name}", cluster.core.create_namespaced_config_map, ctx.namespace,
                         configmap)
        except ConflictError:  # a previous campaign of this run made it; its cleanup is registered
            continue
        ctx.add_cleanup(f"delete configmap {cm_name}", _deleter(cluster, "configmap", cm_name, ctx.namespace))

    def delete_pods() -> object:
        return cluster.call(f"delete pods of campaign {campaign}", cluster.core.delete_collection_namespaced_pod,
                            ctx.namespace, label_selector=selector)

    # Registered before the creates, which run in parallel: deleting by label undoes any subset.
    ctx.add_cleanup(f"delete pods of campaign {campaign}", delete_pods)
    created: dict[str, float] = {}
    rejected: dict[str, PodOutcome] = {}
    claims: ClaimWatch | None = None
    with contextlib.ExitStack() as watching:
        if record_claims:  # before the creates: a claim can come and go while a create waits out a Retry-After
            claims = watching.enter_context(ClaimWatch(cluster, ctx.namespace))
        for pod in prepared:  # a node the scheduler already refused for its own state: nothing to wait for
            if (node := _pinned_node(pod)) in ctx.unplaced:
                rejected[pod["metadata"]["name"]] = replace(
                    make_rejected_outcome(pod["metadata"]["name"], "Unschedulable", ctx.unplaced[node][1]),
                    phase="Pending", unschedulable=True)
        creating = [p for p in prepared if p["metadata"]["name"] not in rejected]
        with ThreadPoolExecutor(max_workers=max(1, parallel_creates)) as pool:
            for pod, refused in zip(creating, pool.map(lambda p: _create_pod(cluster, p), creating), strict=True):
                name = pod["metadata"]["name"]
                if refused is not None:
                    rejected[name] = refused
                created[name] = time.monotonic()
        following = [n for n in names if n not in rejected]
        follower = _Follower(following, {p["metadata"]["name"]: _budget(p, schedule_budget) for p in prepared},
                             created, ctx.prepare_budget_s if prepare_budget is None else prepare_budget)
        _follow(cluster, ctx, selector, follower, deadline)

    events = _events_by_pod(cluster, ctx.namespace)
    outcomes: dict[str, PodOutcome] = dict(rejected)
    last = {name: follower.pods.get(name) or {"metadata": {"name": name}} for name in following}
    with ThreadPoolExecutor(max_workers=max(1, parallel_creates)) as pool:  # one request per container: overlap them
        read = dict(zip(following, pool.map(lambda n: _read_logs(cluster, last[n], max_log_bytes), following),
                        strict=True))
    for name in following:
        pod = last[name]
        uid = str((pod.get("metadata") or {}).get("uid") or name)
        logs, missing, truncated = read[name]
        outcome = make_outcome(pod, events.get(uid, []), logs=logs, missing_logs=missing, truncated_logs=truncated,
                               timed_out=name not in follower.done)
        if claims is not None:
            outcome = replace(outcome, claims=claims.for_pod(name), claims_error=claims.error)
        outcomes[name] = outcome
    try:
        delete_pods()
    except NotFoundError:
        pass
    _record_unplaced(ctx, prepared, outcomes)
    return {n: outcomes[n] for n in names}
