"""The kube-controller-manager loops the simulated cluster needs, and :class:`ControlPlane`, which runs
them with the scheduler against one :class:`~gpuconf.sim.store.Store`.

* :class:`ResourceClaimController` (``pkg/controller/resourceclaim``): a claim per pod claim that
  names a ResourceClaimTemplate, recorded in ``pod.status.resourceClaimStatuses``; consumers that are
  gone or done leave ``reservedFor``, an unreserved claim is deallocated, a generated claim whose pod
  is gone is deleted (the garbage collector's part, done here).
* :class:`JobController` (``pkg/controller/job``): NonIndexed and Indexed Jobs, with the pods,
  labels, annotations, hostnames and status fields a real 1.3x Job gets.
* :class:`NodeLifecycleController` (``pkg/controller/nodelifecycle``): the taints that follow a
  Node's ``spec.unschedulable`` and conditions, written into its ``spec.taints``
  (:mod:`.node_lifecycle` decides which).

Each controller is event-driven: store subscriptions put keys on a work queue, one worker thread
syncs a key from fresh reads of the store (a resync only happens when asked for, e.g. a deadline).

Usage::

    with FakeApiServer() as server, ControlPlane(server.store):
        ...  # pods get scheduled, claims created and allocated, Jobs run their pods

Not simulated: the Job controller's pod finalizers (``batch.kubernetes.io/job-tracking``) and pod
failure backoff (failed pods are replaced at once), podFailurePolicy, successPolicy,
backoffLimitPerIndex, the Suspended condition, orphaning pods on Job deletion (pods are always
deleted, as ``kubectl delete`` does); generated claims whose pod was deleted are removed at once
rather than by the garbage collector's later pass.
"""

from __future__ import annotations

import abc
import calendar
import heapq
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuconf.sim.node_lifecycle import is_ready, lifecycle_taints
from gpuconf.sim.scheduler import CLAIM_FINALIZER, EXTENDED_CLAIM_ANNOTATION, EventRecorder, Scheduler, informer
from gpuconf.sim.store import ApiError, Store, Subscription, clone

__all__ = ["ControlPlane", "JobController", "NodeLifecycleController", "ResourceClaimController",
           "POD_CLAIM_NAME_ANNOTATION"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

CLAIMS = "resourceclaims.resource.k8s.io"
TEMPLATES = "resourceclaimtemplates.resource.k8s.io"
#: resource.k8s.io/v1 ``PodResourceClaimAnnotation``: which pod claim a generated claim is for.
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
#: batch/v1 ``JobCompletionIndexAnnotation``, also the label since PodIndexLabel (GA in 1.32).
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"


def _now_rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _parse_rfc3339(text: str) -> float:
    return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))


def _terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _pod_done(pod: Mapping[str, Any]) -> bool:
    """resourceclaim controller isPodDone: terminal, or deleted before it was ever scheduled."""
    return _terminal(pod) or bool((pod.get("metadata") or {}).get("deletionTimestamp")
                                  and not (pod.get("spec") or {}).get("nodeName"))


def _controller_of(obj: Mapping[str, Any], kind: str) -> Obj | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == kind:
            return dict(ref)
    return None


def _owner_ref(api_version: str, kind: str, owner: Mapping[str, Any]) -> Obj:
    meta = owner["metadata"]
    return {"apiVersion": api_version, "kind": kind, "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def _ignore_not_found(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except ApiError as e:
        if e.code != 404:
            raise
        return None


# ---------------------------------------------------------------------------------------------------
# A work queue with one worker (client-go workqueue + controller loop, in small)


class _Worker:
    """Keys to sync, each at most once in the queue and never synced by two threads at once; a key
    whose sync raises is retried with exponential backoff; ``add_after`` schedules a later sync."""

    def __init__(self, name: str, sync: Callable[[str], None], *, retry_backoff: float = 0.05,
                 max_retries: int = 10) -> None:
        self.name = name
        self._sync = sync
        self._cond = threading.Condition()
        self._due: dict[str, float] = {}
        self._heap: list[tuple[float, str]] = []
        self._busy: set[str] = set()
        self._again: dict[str, float] = {}  # added while busy: when to run once it is done
        self._failures: dict[str, int] = {}
        self._retry = retry_backoff
        self._max_retries = max_retries
        self._closed = False
        self._thread: threading.Thread | None = None

    def add(self, key: str, delay: float = 0.0) -> None:
        when = time.monotonic() + delay
        with self._cond:
            if key in self._busy:
                self._again[key] = min(when, self._again.get(key, when))
                return
            if key in self._due and self._due[key] <= when:
                return
            self._due[key] = when
            heapq.heappush(self._heap, (when, key))
            self._cond.notify_all()

    def _next(self) -> str | None:
        with self._cond:
            while not self._closed:
                now = time.monotonic()
                while self._heap and self._due.get(self._heap[0][1]) != self._heap[0][0]:
                    heapq.heappop(self._heap)  # superseded entry
                if self._heap and self._heap[0][0] <= now:
                    _, key = heapq.heappop(self._heap)
                    del self._due[key]
                    self._busy.add(key)
                    return key
                self._cond.wait(self._heap[0][0] - now if self._heap else None)
            return None

    def _finish(self, key: str, failed: bool) -> None:
        with self._cond:
            self._busy.discard(key)
            again = self._again.pop(key, None)
        if failed:
            tries = self._failures.get(key, 0) + 1
            self._failures[key] = tries
            if tries <= self._max_retries:
                self.add(key, self._retry * 2 ** (tries - 1))
                return
        else:
            self._failures.pop(key, None)
        if again is not None:
            self.add(key, max(0.0, again - time.monotonic()))

    def _run(self) -> None:
        while True:
            key = self._next()
            if key is None:
                return
            failed = False
            try:
                self._sync(key)
            except Exception:
                log.debug("%s: sync of %s failed, retrying", self.name, key, exc_info=True)
                failed = True
            self._finish(key, failed)

    def start(self) -> None:
        if self._thread is None:
            with self._cond:
                self._closed = False
            self._thread = threading.Thread(target=self._run, name=f"sim-{self.name}", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5.0)
        self._thread = None


def _key(*parts: str) -> str:
    return "\x00".join(parts)


def _split(key: str) -> list[str]:
    return key.split("\x00")


class _Controller(abc.ABC):
    """Subscriptions feeding a :class:`_Worker`; each controller says what it watches and how it
    handles one key."""

    name = "controller"

    def __init__(self, store: Store) -> None:
        self.store = store
        self._worker = _Worker(self.name, self._dispatch)
        self._subscriptions: list[Subscription] = []

    @abc.abstractmethod
    def _subscribe(self) -> list[Subscription]: ...

    @abc.abstractmethod
    def _dispatch(self, key: str) -> None: ...

    def start(self) -> _Controller:
        if not self._subscriptions:
            self._worker.start()
            self._subscriptions = self._subscribe()
        return self

    def stop(self) -> None:
        for subscription in self._subscriptions:
            subscription.close()
        self._subscriptions = []
        self._worker.stop()


# ---------------------------------------------------------------------------------------------------
# ResourceClaims from templates


def _claim_generate_name(pod_name: str, claim_name: str) -> str:
    """resourceclaim controller handleClaim: ``<pod>-<claim>-``, both cut proportionally beyond 57."""
    generate_name = f"{pod_name}-{claim_name}-"
    max_base = 57  # room for the 5 random characters in a 63-character name
    if len(generate_name) > max_base:
        total = len(generate_name)
        generate_name = (pod_name[:len(pod_name) * max_base // total] + "-"
                         + claim_name[:len(claim_name) * max_base // total])
    return generate_name


class ResourceClaimController(_Controller):
    """Creates a pod's claims from its ResourceClaimTemplates and releases claims of finished pods."""

    name = "resourceclaim-controller"

    def _subscribe(self) -> list[Subscription]:
        return [informer(self.store, "pods", self._on_pod), informer(self.store, CLAIMS, self._on_claim),
                informer(self.store, TEMPLATES, self._on_template)]

    # --- events ---------------------------------------------------------------------------------------

    def _on_pod(self, kind: str, pod: Obj) -> None:
        meta = pod["metadata"]
        if kind == "DELETED" or _pod_done(pod):
            self._claims_of(meta["namespace"], meta["uid"])
            return
        if any(pc.get("resourceClaimTemplateName") for pc in (pod.get("spec") or {}).get("resourceClaims") or []):
            self._worker.add(_key("pod", meta["namespace"], meta["name"]))

    def _claims_of(self, namespace: str, uid: str) -> None:
        for claim in self.store.list(CLAIMS, namespace=namespace, copy=False).items:
            reserved = {r.get("uid") for r in (claim.get("status") or {}).get("reservedFor") or []}
            owners = {o.get("uid") for o in claim["metadata"].get("ownerReferences") or []}
            if uid in reserved or uid in owners:
                self._worker.add(_key("claim", namespace, claim["metadata"]["name"]))

    def _on_claim(self, kind: str, claim: Obj) -> None:
        if kind != "DELETED":
            self._worker.add(_key("claim", claim["metadata"]["namespace"], claim["metadata"]["name"]))

    def _on_template(self, kind: str, template: Obj) -> None:
        if kind == "DELETED":
            return
        namespace, name = template["metadata"]["namespace"], template["metadata"]["name"]
        for pod in self.store.list("pods", namespace=namespace, copy=False).items:
            if any(pc.get("resourceClaimTemplateName") == name for pc in pod["spec"].get("resourceClaims") or []):
                self._worker.add(_key("pod", namespace, pod["metadata"]["name"]))

    def _dispatch(self, key: str) -> None:
        kind, namespace, name = _split(key)
        if kind == "pod":
            self._sync_pod(namespace, name)
        else:
            self._sync_claim(namespace, name)

    # --- pods: create the claims ----------------------------------------------------------------------

    def _sync_pod(self, namespace: str, name: str) -> None:
        pod = _ignore_not_found(lambda: self.store.get("pods", name, namespace=namespace))
        if pod is None or _pod_done(pod) or pod["metadata"].get("deletionTimestamp"):
            return
        statuses = list((pod.get("status") or {}).get("resourceClaimStatuses") or [])
        known = {s.get("name") for s in statuses}
        added = []
        for pod_claim in pod["spec"].get("resourceClaims") or []:
            template_name = pod_claim.get("resourceClaimTemplateName")
            if not template_name or pod_claim["name"] in known:
                continue
            claim_name = self._existing_claim(pod, pod_claim["name"]) or self._create_claim(pod, pod_claim,
                                                                                            template_name)
            if claim_name is None:
                continue  # the template does not exist yet: its creation brings the pod back here
            added.append({"name": pod_claim["name"], "resourceClaimName": claim_name})
        if added:
            self.store.patch_status("pods", name, {"status": {"resourceClaimStatuses": statuses + added}},
                                    namespace=namespace)

    def _existing_claim(self, pod: Obj, pod_claim_name: str) -> str | None:
        """A claim created for this pod claim before its name reached the pod status (findPodResourceClaim)."""
        uid = pod["metadata"]["uid"]
        for claim in self.store.list(CLAIMS, namespace=pod["metadata"]["namespace"], copy=False).items:
            meta = claim["metadata"]
            owner = _controller_of(claim, "Pod")
            if owner is not None and owner.get("uid") == uid and \
                    (meta.get("annotations") or {}).get(POD_CLAIM_NAME_ANNOTATION) == pod_claim_name:
                return str(meta["name"])
        return None

    def _create_claim(self, pod: Obj, pod_claim: Mapping[str, Any], template_name: str) -> str | None:
        namespace = pod["metadata"]["namespace"]
        template = _ignore_not_found(lambda: self.store.get(TEMPLATES, template_name, namespace=namespace))
        if template is None:
            log.debug("pod %s/%s: resource claim template %s not found", namespace, pod["metadata"]["name"],
                      template_name)
            return None
        template_spec = template.get("spec") or {}
        template_meta = template_spec.get("metadata") or {}
        body: Obj = {
            "metadata": {
                "generateName": _claim_generate_name(pod["metadata"]["name"], pod_claim["name"]),
                "labels": dict(template_meta.get("labels") or {}),
                "annotations": {**(template_meta.get("annotations") or {}),
                                POD_CLAIM_NAME_ANNOTATION: pod_claim["name"]},
                "ownerReferences": [_owner_ref("v1", "Pod", pod)],
            },
            "spec": template_spec.get("spec") or {},
        }
        if not body["metadata"]["labels"]:
            del body["metadata"]["labels"]
        created = self.store.create(CLAIMS, body, namespace=namespace)
        return str(created["metadata"]["name"])

    # --- claims: release, deallocate, delete ----------------------------------------------------------

    def _sync_claim(self, namespace: str, name: str) -> None:
        claim = _ignore_not_found(lambda: self.store.get(CLAIMS, name, namespace=namespace))
        if claim is None:
            return
        meta, status = claim["metadata"], claim.get("status") or {}
        reserved = status.get("reservedFor") or []
        valid = [r for r in reserved if self._consumer_valid(namespace, r)]
        allocation = status.get("allocation")
        if len(valid) < len(reserved) or (meta.get("deletionTimestamp") and not valid and allocation):
            patch: Obj = {"reservedFor": valid or None}
            if not valid and allocation:
                patch["allocation"] = None  # nobody uses it: give the devices back
                allocation = None
            claim = self.store.patch_status(CLAIMS, name, {"metadata": {"resourceVersion": meta["resourceVersion"]},
                                                           "status": patch}, namespace=namespace)
            meta = claim["metadata"]
        if not valid and allocation is None and CLAIM_FINALIZER in (meta.get("finalizers") or []):
            claim["metadata"] = {**meta, "finalizers": [f for f in meta["finalizers"] if f != CLAIM_FINALIZER]}
            claim = self.store.update(CLAIMS, claim, namespace=namespace)  # completes a pending deletion
        if not valid:
            self._delete_if_orphan(namespace, name, claim)

    def _consumer_valid(self, namespace: str, ref: Mapping[str, Any]) -> bool:
        if ref.get("resource") != "pods" or ref.get("apiGroup"):
            return True  # some other consumer: not ours to judge
        pod = _ignore_not_found(lambda: self.store.get("pods", str(ref.get("name")), namespace=namespace))
        return pod is not None and pod["metadata"].get("uid") == ref.get("uid") and not _pod_done(pod)

    def _delete_if_orphan(self, namespace: str, name: str, claim: Obj) -> None:
        owner = _controller_of(claim, "Pod")
        annotations = claim["metadata"].get("annotations") or {}
        if owner is None or (POD_CLAIM_NAME_ANNOTATION not in annotations
                             and annotations.get(EXTENDED_CLAIM_ANNOTATION) != "true"):
            return  # not generated for a pod (from a template, or by the scheduler for extended resources)
        pod = _ignore_not_found(lambda: self.store.get("pods", str(owner.get("name")), namespace=namespace))
        if pod is None or pod["metadata"].get("uid") != owner.get("uid") or _pod_done(pod):
            _ignore_not_found(lambda: self.store.delete(CLAIMS, name, namespace=namespace))


# ---------------------------------------------------------------------------------------------------
# Jobs


def _index_of(pod: Mapping[str, Any]) -> int | None:
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(COMPLETION_INDEX)
    try:
        index = int(str(value))
    except ValueError:
        return None
    return index if index >= 0 else None


def format_indexes(indexes: set[int]) -> str:
    """status.completedIndexes: ascending intervals, "1,3-5,7"."""
    out: list[str] = []
    ordered = sorted(indexes)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def _condition(kind: str, reason: str, message: str, now: str) -> Obj:
    return {"type": kind, "status": "True", "reason": reason, "message": message, "lastProbeTime": now,
            "lastTransitionTime": now}


@dataclass
class _Counted:
    """Terminated pods already counted for a Job (the real controller tracks them with finalizers)."""

    succeeded: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    indexes: set[int] = field(default_factory=set)


class JobController(_Controller):
    """batch/v1 Jobs, NonIndexed and Indexed."""

    name = "job-controller"

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.events = EventRecorder(store, self.name)
        self._counted: dict[str, _Counted] = {}

    def _subscribe(self) -> list[Subscription]:
        return [informer(self.store, "jobs.batch", self._on_job), informer(self.store, "pods", self._on_pod)]

    def _on_job(self, kind: str, job: Obj) -> None:
        meta = job["metadata"]
        if kind == "DELETED":
            self._worker.add(_key("gone", meta["namespace"], meta["uid"]))
        else:
            self._worker.add(_key("job", meta["namespace"], meta["name"]))

    def _on_pod(self, kind: str, pod: Obj) -> None:
        owner = _controller_of(pod, "Job")
        if owner is not None:
            self._worker.add(_key("job", pod["metadata"]["namespace"], str(owner.get("name"))))

    def _dispatch(self, key: str) -> None:
        kind, namespace, name = _split(key)
        if kind == "gone":
            self._delete_pods_of(namespace, name)
        else:
            self._sync(namespace, name)

    def _delete_pods_of(self, namespace: str, uid: str) -> None:
        self._counted.pop(uid, None)
        for pod in self.store.list("pods", namespace=namespace, label_selector=f"{CONTROLLER_UID_LABEL}={uid}",
                                   copy=False).items:
            self._delete_pod(namespace, pod["metadata"]["name"])

    def _delete_pod(self, namespace: str, name: str) -> bool:
        try:
            self.store.delete("pods", name, namespace=namespace)
        except ApiError as e:
            if e.code != 404:
                raise
            return False
        return True

    def _pods(self, job: Obj) -> list[Obj]:
        uid = job["metadata"]["uid"]
        pods = self.store.list("pods", namespace=job["metadata"]["namespace"],
                               label_selector=f"{CONTROLLER_UID_LABEL}={uid}", copy=False).items
        return [p for p in pods if (_controller_of(p, "Job") or {}).get("uid") == uid]

    def _sync(self, namespace: str, name: str) -> None:
        job = _ignore_not_found(lambda: self.store.get("jobs.batch", name, namespace=namespace))
        if job is None or job["metadata"].get("deletionTimestamp"):
            return
        spec, status = job.get("spec") or {}, job.get("status") or {}
        indexed = spec.get("completionMode") == "Indexed"
        completions = spec.get("completions")
        pods = self._pods(job)
        counted = self._counted.setdefault(job["metadata"]["uid"], _Counted())
        for pod in pods:
            phase = (pod.get("status") or {}).get("phase")
            if phase == "Succeeded":
                counted.succeeded.add(pod["metadata"]["uid"])
                index = _index_of(pod)
                if indexed and index is not None and completions is not None and index < int(completions):
                    counted.indexes.add(index)
            elif phase == "Failed":
                counted.failed.add(pod["metadata"]["uid"])
        active = [p for p in pods if not _terminal(p) and not p["metadata"].get("deletionTimestamp")]
        terminating = [p for p in pods if not _terminal(p) and p["metadata"].get("deletionTimestamp")]
        succeeded = len(counted.indexes) if indexed else max(int(status.get("succeeded") or 0), len(counted.succeeded))
        failed = max(int(status.get("failed") or 0), len(counted.failed))
        conditions = [dict(c) for c in status.get("conditions") or []]
        finished = any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions)
        now = time.time()
        stamp = _now_rfc3339(now)
        new: Obj = {}
        suspended = bool(spec.get("suspend"))
        start_time = status.get("startTime") or (None if suspended else stamp)
        if not finished:
            verdict = self._verdict(job, succeeded, failed, active, start_time, now, indexed)
            if verdict is not None:
                kind, reason, message = verdict
                self._delete(job, active)
                active = []
                first = "SuccessCriteriaMet" if kind == "Complete" else "FailureTarget"
                conditions += [_condition(first, reason, message, stamp), _condition(kind, reason, message, stamp)]
                if kind == "Complete":
                    new["completionTime"] = stamp
                    self.events.record(job, "Normal", "Completed", "Job completed")
                else:
                    self.events.record(job, "Warning", reason, message)
            elif suspended:
                self._delete(job, active)
                active = []
            else:
                active = active + self._create(job, active, succeeded, counted.indexes, indexed)
                self._arm_deadline(job, start_time, now)
        ready = sum(1 for p in active if any(c.get("type") == "Ready" and c.get("status") == "True"
                                             for c in (p.get("status") or {}).get("conditions") or []))
        new.update({"active": len(active) or None, "succeeded": succeeded or None, "failed": failed or None,
                    "ready": ready, "terminating": len(terminating), "startTime": start_time,
                    "conditions": conditions or None, "uncountedTerminatedPods": {}})
        if indexed:
            new["completedIndexes"] = format_indexes(counted.indexes) or None
        if any(status.get(k) != v for k, v in new.items() if v is not None) or \
                any(k in status for k, v in new.items() if v is None):
            self.store.patch_status("jobs.batch", name, {"status": new}, namespace=namespace)

    @staticmethod
    def _verdict(job: Obj, succeeded: int, failed: int, active: list[Obj], start_time: str | None, now: float,
                 indexed: bool) -> tuple[str, str, str] | None:
        """(condition, reason, message) once the Job is done, with pkg/controller/job's texts."""
        spec = job.get("spec") or {}
        if failed > int(spec.get("backoffLimit", 6)):
            return "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"
        deadline = spec.get("activeDeadlineSeconds")
        if deadline is not None and start_time and now >= _parse_rfc3339(start_time) + int(deadline):
            return "Failed", "DeadlineExceeded", "Job was active longer than specified deadline"
        completions = spec.get("completions")
        done = (succeeded >= int(completions)) if completions is not None else (succeeded > 0 and not active)
        if done:
            return "Complete", "CompletionsReached", "Reached expected number of succeeded pods"
        return None

    def _arm_deadline(self, job: Obj, start_time: str | None, now: float) -> None:
        deadline = (job.get("spec") or {}).get("activeDeadlineSeconds")
        if deadline is not None and start_time:
            remaining = _parse_rfc3339(start_time) + int(deadline) - now
            self._worker.add(_key("job", job["metadata"]["namespace"], job["metadata"]["name"]), max(0.0, remaining))

    def _delete(self, job: Obj, pods: list[Obj]) -> None:
        namespace = job["metadata"]["namespace"]
        for pod in pods:
            if self._delete_pod(namespace, pod["metadata"]["name"]):
                self.events.record(job, "Normal", "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}")

    def _create(self, job: Obj, active: list[Obj], succeeded: int, completed: set[int], indexed: bool) -> list[Obj]:
        spec = job.get("spec") or {}
        parallelism = int(spec.get("parallelism", 1))
        completions = spec.get("completions")
        if indexed:
            busy = {_index_of(p) for p in active}
            wanted: list[int | None] = [i for i in range(int(completions or 0)) if i not in completed and i not in busy]
            wanted = wanted[:max(0, parallelism - len(active))]
        else:
            target = parallelism if completions is None else min(parallelism, int(completions) - succeeded)
            if completions is None and succeeded > 0:
                target = 0  # a work queue: once one pod succeeded, no new pods
            wanted = [None] * max(0, target - len(active))
        created = []
        for index in wanted:
            pod = self.store.create("pods", self._pod_for(job, index), namespace=job["metadata"]["namespace"])
            self.events.record(job, "Normal", "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}")
            created.append(pod)
        return created

    @staticmethod
    def _pod_for(job: Obj, index: int | None) -> Obj:
        """The pod template as the Job controller stamps it (getPodsForJob / manageJob)."""
        name = job["metadata"]["name"]
        template = (job.get("spec") or {}).get("template") or {}
        template_meta = template.get("metadata") or {}
        labels = dict(template_meta.get("labels") or {})
        labels.setdefault(JOB_NAME_LABEL, name)
        labels.setdefault(CONTROLLER_UID_LABEL, job["metadata"]["uid"])
        annotations = dict(template_meta.get("annotations") or {})
        pod_spec: Obj = clone(template.get("spec") or {})
        generate_name = f"{name}-"
        if index is not None:
            labels[COMPLETION_INDEX] = str(index)
            annotations[COMPLETION_INDEX] = str(index)
            pod_spec["hostname"] = f"{name}-{index}"
            generate_name = f"{name}-{index}-"
            env = {"name": COMPLETION_INDEX_ENV,
                   "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{COMPLETION_INDEX}']"}}}
            for key in ("initContainers", "containers"):
                for container in pod_spec.get(key) or []:
                    if not any(e.get("name") == COMPLETION_INDEX_ENV for e in container.get("env") or []):
                        container["env"] = [*(container.get("env") or []), env]
        meta: Obj = {"generateName": generate_name, "labels": labels,
                     "ownerReferences": [_owner_ref("batch/v1", "Job", job)]}
        if annotations:
            meta["annotations"] = annotations
        return {"metadata": meta, "spec": pod_spec}


# ---------------------------------------------------------------------------------------------------
# Node lifecycle taints


class NodeLifecycleController(_Controller):
    """Keeps each Node's lifecycle taints (unschedulable, not-ready, unreachable, pressure) in its
    spec.taints, whoever changed the Node: a profile's agent, ``kubectl cordon``, a status patch."""

    name = "node-lifecycle-controller"

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self._ready: dict[str, bool] = {}  # node -> Ready True, for the disruption count
        self._disrupted = False  # no node Ready: master disruption mode

    def _subscribe(self) -> list[Subscription]:
        return [informer(self.store, "nodes", self._on_node)]

    def _on_node(self, kind: str, node: Obj) -> None:
        name = node["metadata"]["name"]
        if kind == "DELETED":
            self._ready.pop(name, None)
        else:
            self._ready[name] = is_ready(node)
        disrupted = bool(self._ready) and not any(self._ready.values())
        if disrupted != self._disrupted:  # every node's NoExecute taints change with the mode
            self._disrupted = disrupted
            for other in self._ready:
                self._worker.add(other)
        elif kind != "DELETED" and lifecycle_taints(node, now="", disrupted=disrupted) is not None:
            self._worker.add(name)

    def _dispatch(self, key: str) -> None:
        node = _ignore_not_found(lambda: self.store.get("nodes", key))
        if node is None:
            return
        taints = lifecycle_taints(node, now=_now_rfc3339(time.time()), disrupted=self._disrupted)
        if taints is None:
            return
        node.setdefault("spec", {})["taints"] = taints
        self.store.update("nodes", node)  # a Conflict (someone wrote in between) retries from a fresh read


# ---------------------------------------------------------------------------------------------------
# The control plane


class ControlPlane:
    """The scheduler, the ResourceClaim, Job and node lifecycle controllers on one store.

    ``ControlPlane(server.store).start()`` ... ``.stop()``, or ``with ControlPlane(server.store):``.
    ``scheduler`` lets a caller pass a configured :class:`Scheduler` (backoff, KEP-5501 reporting).
    """

    def __init__(self, store: Store, *, scheduler: Scheduler | None = None) -> None:
        self.store = store
        self.scheduler = scheduler or Scheduler(store)
        self.claims = ResourceClaimController(store)
        self.jobs = JobController(store)
        self.nodes = NodeLifecycleController(store)

    def start(self) -> ControlPlane:
        self.nodes.start()
        self.claims.start()
        self.jobs.start()
        self.scheduler.start()
        return self

    def stop(self) -> None:
        self.scheduler.stop()
        self.jobs.stop()
        self.claims.stop()
        self.nodes.stop()

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
