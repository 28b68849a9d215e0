"""One namespace per run, cleaned up whatever happens, and probe campaigns launched into it.

A :class:`RunContext` creates the run namespace (and the non-preempting PriorityClass probes use)
and registers each undo right after each create; the undos run last-in-first-out on exit, on an
exception and on SIGINT/SIGTERM. :func:`run_campaign` launches every pod of a campaign at once and
follows them all with one watch on the namespace (launch once, assert many: a campaign takes as
long as its slowest pod), then reads logs and events once and returns a :class:`PodOutcome` per pod.
"""

from __future__ import annotations

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
from dataclasses import replace
from datetime import UTC, datetime
from types import FrameType, TracebackType
from typing import Any

import urllib3

from gpuconf.cluster.access import Cluster, stream_lines
from gpuconf.cluster.claims import ClaimWatch
from gpuconf.cluster.errors import ApiCallError, ClusterError, ConflictError, ForbiddenError, NotFoundError
from gpuconf.cluster.outcomes import (
    PodOutcome,
    finished_reason,
    is_unschedulable,
    make_outcome,
    make_rejected_outcome,
    parse_time,
)
from gpuconf.probe_pods import PRIORITY_CLASS, make_probe_sources_configmap, sources_configmap_name

__all__ = ["MANAGED_BY_LABEL", "RUN_ID_LABEL", "SCHEDULE_BUDGET_ANNOTATION", "RunContext", "collect_leftovers",
           "make_priority_class", "make_run_namespace", "needed_source_configmaps", "new_run_id", "run_campaign",
           "select_leftovers"]

Obj = Mapping[str, Any]

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
RUN_ID_LABEL = "gpuconf.io/run-id"
CAMPAIGN_LABEL = "gpuconf.io/campaign"
PROBE_LABEL = "gpuconf.io/probe"
#: Per-pod override of how long it may stay Pending-unschedulable before that is its outcome.
SCHEDULE_BUDGET_ANNOTATION = "gpuconf.io/schedule-budget-s"
#: A run older than this whose namespace is still there was killed (kill -9, a lost CI runner).
DEFAULT_LEFTOVER_GRACE_S = 6 * 3600.0


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


# -------------------------------------------------------------------------------------------------
# The run namespace and its cleanup


class RunContext:
    """``with RunContext(cluster) as ctx:``: the run namespace exists inside, and is gone after.

    Signal handlers (main thread only) run the cleanup and then do what the previous handler
    would have done (KeyboardInterrupt for SIGINT, exit by the signal for SIGTERM).
    """

    def __init__(self, cluster: Cluster, *, run_id: str | None = None, handle_signals: bool = True,
                 namespace: str | None = None) -> None:
        self.cluster = cluster
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
            except ClusterError as e:
                self.cleanup_errors.append(f"{what}: {e}")

    # Entering and leaving --------------------------------------------------------------------------

    def __enter__(self) -> RunContext:
        self._install_handlers()
        try:
            self._create_namespace()
            self._ensure_priority_class()
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
        c.call("create namespace", c.core.create_namespace, make_run_namespace(self.run_id))
        self.add_cleanup(f"delete namespace {self.namespace}", lambda: c.call(
            f"delete namespace {self.namespace}", c.core.delete_namespace, self.namespace,
            propagation_policy="Background"))

    def _ensure_priority_class(self) -> None:
        """Create it if missing. It is never deleted: it may be pre-existing, or in use by a
        concurrent run whose pods would be refused without it; it is harmless (value 0, Never)."""
        c = self.cluster
        try:
            c.call("read priorityclass", c.scheduling.read_priority_class, PRIORITY_CLASS)
        except NotFoundError:
            try:
                c.call("create priorityclass", c.scheduling.create_priority_class, make_priority_class())
            except ConflictError:  # another run made it in between
                pass

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


def select_leftovers(namespaces: Sequence[Obj], *, current_run_id: str | None, now: datetime,
                     grace_s: float) -> list[str]:
    """Pure: names of gpuconf run namespaces of other runs, older than ``grace_s``, not already going."""
    out = []
    for ns in namespaces:
        meta = ns.get("metadata") or {}
        labels = meta.get("labels") or {}
        if labels.get(MANAGED_BY_LABEL) != "gpuconf" or RUN_ID_LABEL not in labels:
            continue
        if labels[RUN_ID_LABEL] == current_run_id or meta.get("deletionTimestamp"):
            continue
        created = parse_time(meta.get("creationTimestamp"))
        if created is not None and (now - created).total_seconds() >= grace_s:
            out.append(str(meta.get("name")))
    return sorted(out)


def collect_leftovers(cluster: Cluster, *, current_run_id: str | None = None,
                      grace_s: float = DEFAULT_LEFTOVER_GRACE_S, now: datetime | None = None) -> list[str]:
    """Delete the namespaces of killed runs (see :func:`select_leftovers`); returns their names."""
    listing = cluster.call_json("list namespaces", cluster.core.list_namespace,
                                label_selector=f"{MANAGED_BY_LABEL}=gpuconf,{RUN_ID_LABEL}")
    names = select_leftovers(listing.get("items") or [], current_run_id=current_run_id,
                             now=now or datetime.now(UTC), grace_s=grace_s)
    for name in names:
        try:
            cluster.call(f"delete namespace {name}", cluster.core.delete_namespace, name,
                         propagation_policy="Background")
        except NotFoundError:
            pass
    return names


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
    return out


def needed_source_configmaps(pods: Sequence[Obj]) -> list[str]:
    """Probes whose zero-registry sources ConfigMap some pod mounts (by its content-addressed name)."""
    probes = set()
    for pod in pods:
        probe = ((pod.get("metadata") or {}).get("labels") or {}).get(PROBE_LABEL)
        mounted = {(v.get("configMap") or {}).get("name") for v in (pod.get("spec") or {}).get("volumes") or ()}
        if probe and sources_configmap_name(str(probe)) in mounted:
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


class _Follower:
    """The last state of each pod and why following it stopped; fed by a list, then by watch events."""

    def __init__(self, names: Sequence[str], budgets: Mapping[str, float], created: Mapping[str, float]) -> None:
        self.names = set(names)
        self.pods: dict[str, dict[str, Any]] = {}
        self.done: dict[str, str] = {}
        self.budgets, self.created = budgets, created

    def see(self, kind: str, pod: dict[str, Any]) -> None:
        name = str((pod.get("metadata") or {}).get("name"))
        if name not in self.names or name in self.done:
            return
        self.pods[name] = pod
        if kind == "DELETED":
            self.done[name] = "Deleted"
        elif (why := finished_reason(pod)) is not None:
            self.done[name] = why

    def check_budgets(self, now: float) -> None:
        for name in self.pending:
            pod = self.pods.get(name)
            if pod is not None and is_unschedulable(pod) and now - self.created[name] >= self.budgets[name]:
                self.done[name] = "Unschedulable"

    def next_budget_end(self) -> float:
        ends = [self.created[n] + self.budgets[n] for n in self.pending if not (self.pods.get(n) or {}).get(
            "spec", {}).get("nodeName")]
        return min(ends, default=math.inf)

    @property
    def pending(self) -> list[str]:
        return sorted(self.names - set(self.done))


def _follow(cluster: Cluster, ctx: RunContext, selector: str, follower: _Follower, deadline: float) -> None:
    """One watch on the namespace until every pod is done or the deadline passes: relist on start
    and after 410 Gone; resume from the last resourceVersion when a stream ends or breaks."""
    core, rv = cluster.core, None
    while follower.pending and time.monotonic() < deadline:
        if rv is None:
            listing = cluster.call_json("list pods", core.list_namespaced_pod, ctx.namespace, label_selector=selector)
            for item in listing.get("items") or []:
                follower.see("ADDED", item)
            rv = str((listing.get("metadata") or {}).get("resourceVersion") or "")
            follower.check_budgets(time.monotonic())
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
                follower.check_budgets(time.monotonic())
                if not follower.pending or time.monotonic() >= wake:
                    break
        except (urllib3.exceptions.HTTPError, ConnectionError):
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))  # a cut stream: resume from rv
        finally:
            response.close()  # not back to the pool: an unread rest of the stream would poison it
            response.release_conn()
        follower.check_budgets(time.monotonic())


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


def _read_logs(cluster: Cluster, pod: Obj, max_bytes: int) -> tuple[dict[str, str], dict[str, str], set[str]]:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    statuses = {s.get("name"): s for s in (status.get("initContainerStatuses") or [])
                + (status.get("containerStatuses") or [])}
    logs: dict[str, str] = {}
    missing: dict[str, str] = {}
    truncated: set[str] = set()
    spec = pod.get("spec") or {}
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        name = str(container.get("name"))
        state = (statuses.get(name) or {}).get("state") or {}
        if not state.get("running") and not state.get("terminated"):
            waiting = (state.get("waiting") or {}).get("reason")
            missing[name] = f"never started ({waiting})" if waiting else "never started"
            continue
        try:
            response: Any = cluster.call(f"read log of {meta.get('name')}/{name}", cluster.core.read_namespaced_pod_log,
                                    str(meta.get("name")), str(meta.get("namespace")), container=name,
                                    limit_bytes=max_bytes, _preload_content=False)
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
                 record_claims: bool = False) -> dict[str, PodOutcome]:
    """Launch every pod at once into the run namespace, follow them with one watch until each is
    finished, stuck for good, unschedulable past its budget (``schedule_budget`` seconds from
    creation, or the pod's ``gpuconf.io/schedule-budget-s`` annotation), or ``timeout`` passes;
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
    with ThreadPoolExecutor(max_workers=max(1, parallel_creates)) as pool:
        for pod, refused in zip(prepared, pool.map(lambda p: _create_pod(cluster, p), prepared), strict=True):
            name = pod["metadata"]["name"]
            if refused is not None:
                rejected[name] = refused
            created[name] = time.monotonic()
    following = [n for n in names if n not in rejected]
    follower = _Follower(following, {p["metadata"]["name"]: _budget(p, schedule_budget) for p in prepared}, created)
    claims: ClaimWatch | None = None
    if record_claims:
        with ClaimWatch(cluster, ctx.namespace) as claims:
            _follow(cluster, ctx, selector, follower, deadline)
    else:
        _follow(cluster, ctx, selector, follower, deadline)

    events = _events_by_pod(cluster, ctx.namespace)
    outcomes: dict[str, PodOutcome] = dict(rejected)
    for name in following:
        pod = follower.pods.get(name) or {"metadata": {"name": name}}
        uid = str((pod.get("metadata") or {}).get("uid") or name)
        logs, missing, truncated = _read_logs(cluster, pod, max_log_bytes)
        outcome = make_outcome(pod, events.get(uid, []), logs=logs, missing_logs=missing, truncated_logs=truncated,
                               timed_out=name not in follower.done)
        if claims is not None:
            outcome = replace(outcome, claims=claims.for_pod(name), claims_error=claims.error)
        outcomes[name] = outcome
    try:
        delete_pods()
    except NotFoundError:
        pass
    return {n: outcomes[n] for n in names}
