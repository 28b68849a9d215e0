"""The object store behind the fake API server, and the seam for in-process controllers.

One lock guards every object, the global resourceVersion counter and a bounded event history.
Stored objects are never modified in place: each write stores a new dict, so a reader may serialise
a stored object after releasing the lock, and an event in the history keeps the object as it was.

The API semantics of the real server live here too, so that HTTP requests (:mod:`gpuconf.sim.server`)
and in-process controllers get the same behaviour and emit the same watch events:

* create fills uid, resourceVersion, creationTimestamp, generation, generateName and apiVersion/kind,
  checks the namespace exists and is not Terminating, validates the name, runs per-kind defaulting;
* update and patch check resourceVersion preconditions, keep status and spec apart as the
  ``/status`` subresource does, bump generation on spec changes and skip no-op writes;
* delete honours finalizers and graceful pod deletion (see :meth:`Store.set_pod_termination_hook`),
  and deleting a namespace marks it Terminating; a namespace controller (a thread of the store) then
  removes its contents and, once nothing is left, the namespace;
* a new namespace gets the ``default`` ServiceAccount and the ``kube-root-ca.crt`` ConfigMap;
* watchers resume from a resourceVersion, or get 410 Gone once it left the history window.

Controllers use :meth:`Store.subscribe` (a callback per event, run on the subscription's own thread,
never under the lock) or :meth:`Store.watch` (a queue they drain themselves).
"""

from __future__ import annotations

import base64
import binascii
import builtins
import json
import logging
import queue
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gpuconf import podsecurity
from gpuconf.sim import patch as patches
from gpuconf.sim.resources import (
    Cause,
    CreateContext,
    GroupResource,
    ResourceTable,
    ResourceType,
    crd_resource_types,
    validate_name,
)
from gpuconf.sim.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    field_value,
    parse_field_selector,
    parse_label_selector,
)

__all__ = [
    "ApiError",
    "DeleteResult",
    "ObjectList",
    "PodTerminationHook",
    "Store",
    "Subscription",
    "WatchEvent",
    "Watcher",
    "WatcherClosed",
]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

PODS = GroupResource("", "pods")
NAMESPACES = GroupResource("", "namespaces")
RUNTIME_CLASSES = GroupResource("node.k8s.io", "runtimeclasses")
PRIORITY_CLASSES = GroupResource("scheduling.k8s.io", "priorityclasses")
CRDS = GroupResource("apiextensions.k8s.io", "customresourcedefinitions")
#: The namespace label Pod Security admission enforces from.
_PSA_ENFORCE = "pod-security.kubernetes.io/enforce"

#: Decides, for a pod bound to a node and deleted with a grace period, whether a node agent will
#: confirm the deletion (True: the pod gets deletionTimestamp and stays until someone deletes it
#: again with gracePeriodSeconds=0, as a kubelet does once the containers have stopped) or whether
#: it is removed at once (False). Called with a copy of the pod, outside the store lock.
PodTerminationHook = Callable[[Obj], bool]

#: The annotation kube-root-ca.crt carries (v1.36.2's root-ca-cert-publisher).
_ROOT_CA_DESCRIPTION = ("Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
                        "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
                        "guaranteed across distributions of Kubernetes clusters.")

#: The conditions the namespace controller writes once a namespace is empty, just before it is
#: removed (read from a v1.36.2 namespace deletion: type, reason, message).
_NAMESPACE_DELETED_CONDITIONS = (
    ("NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered", "All resources successfully discovered"),
    ("NamespaceDeletionGroupVersionParsingFailure", "ParsedGroupVersions", "All legacy kube types successfully parsed"),
    ("NamespaceDeletionContentFailure", "ContentDeleted",
     "All content successfully deleted, may be waiting on finalization"),
    ("NamespaceContentRemaining", "ContentRemoved", "All content successfully removed"),
    ("NamespaceFinalizersRemaining", "ContentHasNoFinalizers", "All content-preserving finalizers finished"),
)

# utilrand.String's alphabet: no vowels (no accidental words) and no look-alike characters.
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def clone(obj: Any) -> Any:
    """A deep copy of a JSON-shaped value (faster than copy.deepcopy for this shape)."""
    return json.loads(json.dumps(obj))


def _rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _rfc3339_micro(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"


class ApiError(Exception):
    """An error answer of the API server, as a ``kind: Status`` body with the real server's wording."""

    def __init__(self, code: int, reason: str, message: str, *, details: Mapping[str, Any] | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = dict(details) if details else None
        self.headers = dict(headers or {})

    def status(self) -> Obj:
        body: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                     "message": self.message, "reason": self.reason, "code": self.code}
        if self.details is not None:
            body["details"] = self.details
        return body

    @staticmethod
    def _details(rt: ResourceType, name: str, **extra: Any) -> Obj:
        details: Obj = {"name": name}
        if rt.group:
            details["group"] = rt.group
        details["kind"] = rt.plural
        details.update(extra)
        return details

    @classmethod
    def not_found(cls, rt: ResourceType, name: str) -> ApiError:
        return cls(404, "NotFound", f'{rt.qualified} "{name}" not found', details=cls._details(rt, name))

    @classmethod
    def already_exists(cls, rt: ResourceType, name: str) -> ApiError:
        return cls(409, "AlreadyExists", f'{rt.qualified} "{name}" already exists', details=cls._details(rt, name))

    @classmethod
    def conflict(cls, rt: ResourceType, name: str, why: str | None = None, *, subresource: str = "") -> ApiError:
        why = why or "the object has been modified; please apply your changes to the latest version and try again"
        what = f"{rt.qualified}/{subresource}" if subresource else rt.qualified
        return cls(409, "Conflict", f'Operation cannot be fulfilled on {what} "{name}": {why}',
                   details=cls._details(rt, name))

    @classmethod
    def invalid(cls, rt: ResourceType, name: str, causes: list[Cause]) -> ApiError:
        texts = [f"{c.field}: {c.message}" for c in causes]
        summary = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
        details: Obj = {"name": name}
        if rt.group:
            details["group"] = rt.group
        details["kind"] = rt.kind
        details["causes"] = [c.to_dict() for c in causes]
        kind = f"{rt.kind}.{rt.group}" if rt.group else rt.kind  # the qualified kind, as the real server names it
        return cls(422, "Invalid", f'{kind} "{name}" is invalid: {summary}', details=details)

    @classmethod
    def forbidden(cls, rt: ResourceType, name: str, why: str, causes: list[Cause] | None = None) -> ApiError:
        extra = {"causes": [c.to_dict() for c in causes]} if causes else {}
        return cls(403, "Forbidden", f'{rt.qualified} "{name}" is forbidden: {why}',
                   details=cls._details(rt, name, **extra))

    @classmethod
    def bad_request(cls, message: str) -> ApiError:
        return cls(400, "BadRequest", message)

    @classmethod
    def gone(cls, message: str) -> ApiError:
        return cls(410, "Expired", message)


@dataclass(frozen=True)
class WatchEvent:
    """One change, in the stored form. ``previous`` is the object before a MODIFIED/DELETED change."""

    type: str  # ADDED, MODIFIED, DELETED
    object: Obj
    resource_version: int
    storage: GroupResource
    namespace: str
    previous: Obj | None = None


@dataclass(frozen=True)
class ObjectList:
    items: list[Obj]
    resource_version: str
    continue_token: str | None = None
    remaining: int | None = None


@dataclass(frozen=True)
class DeleteResult:
    """What DELETE did: ``deleted`` is False when the object stays (finalizers, graceful pod deletion)."""

    object: Obj
    deleted: bool


class WatcherClosed(Exception):
    """The watcher was closed (by its owner, or because the store shut down)."""


_CLOSE = object()


class _Match:
    """A compiled label + field selector for one resource type."""

    def __init__(self, rt: ResourceType, label_selector: str | None, field_selector: str | None) -> None:
        try:
            self.labels: LabelSelector = parse_label_selector(label_selector)
            self.fields: FieldSelector = parse_field_selector(field_selector)
            supported = rt.supported_field_labels
            self.fields.check_supported(supported)
        except SelectorError as e:
            raise ApiError.bad_request(str(e)) from None
        self.paths = {name: supported[name] for name in self.fields.fields}
        self.everything = self.labels.empty and self.fields.empty
        # The first "field=value" term on an indexed field: lists and watches use the index for it.
        self.indexed: tuple[str, str] | None = next(
            ((r.field, r.value) for r in self.fields.requirements if r.op == "=" and r.field in rt.indexed_fields),
            None)

    def __call__(self, obj: Mapping[str, Any]) -> bool:
        if self.everything:
            return True
        if not self.labels.matches(obj.get("metadata", {}).get("labels")):
            return False
        if self.fields.empty:
            return True
        return self.fields.matches({name: field_value(obj, path) for name, path in self.paths.items()})


class Watcher:
    """A stream of watch events for one resource (optionally one namespace and selectors).

    Events arrive already converted to the watched resource's version. A MODIFIED event that moves
    an object into or out of the selection is delivered as ADDED or DELETED, as the real server does.
    """

    def __init__(self, store: Store, rt: ResourceType, namespace: str | None, match: _Match) -> None:
        self.rt = rt
        self.namespace = namespace
        self._store = store
        self._match = match
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._pending: deque[WatchEvent] = deque()
        self.closed = False

    def _accept(self, event: WatchEvent) -> WatchEvent | None:
        match = self._match
        view = self.rt.strategy.from_storage
        if match.everything:
            return WatchEvent(event.type, view(event.object, self.rt), event.resource_version, event.storage,
                              event.namespace, event.previous)
        now = match(event.object)
        if event.type == "MODIFIED":
            before = event.previous is not None and match(event.previous)
            kind = {(True, True): "MODIFIED", (False, True): "ADDED", (True, False): "DELETED"}.get((before, now))
        else:
            kind = event.type if now else None
        if kind is None:
            return None
        return WatchEvent(kind, view(event.object, self.rt), event.resource_version, event.storage,
                          event.namespace, event.previous)

    def next(self, timeout: float | None = None) -> WatchEvent | None:
        """The next event, or None when ``timeout`` seconds pass first; raises WatcherClosed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._pending:
                raw = self._pending.popleft()
            else:
                if self.closed:
                    raise WatcherClosed()
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    raw = self._queue.get(timeout=remaining)
                except queue.Empty:
                    return None
                if raw is _CLOSE:
                    self.closed = True
                    raise WatcherClosed()
            event = self._accept(raw)
            if event is not None:
                return event

    def idle(self) -> bool:
        """No event is waiting (the store's lock makes this exact when called under it)."""
        return not self._pending and self._queue.empty()

    def __iter__(self) -> Iterator[WatchEvent]:
        while True:
            try:
                event = self.next()
            except WatcherClosed:
                return
            if event is not None:
                yield event

    def close(self) -> None:
        self._store._unregister(self)
        self._queue.put(_CLOSE)

    def __enter__(self) -> Watcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Subscription:
    """Runs ``callback(event_type, object)`` for each event on its own thread, in order.

    The object is a private copy the callback may keep or modify. Exceptions are logged and the
    subscription carries on, as an informer's handler would.
    """

    def __init__(self, watcher: Watcher, callback: Callable[[str, Obj], None]) -> None:
        self.watcher = watcher
        self._callback = callback
        self._thread = threading.Thread(target=self._run, name=f"sim-subscription-{watcher.rt.plural}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for event in self.watcher:
            try:
                self._callback(event.type, clone(event.object))
            except Exception:
                log.exception("subscription callback for %s failed", self.watcher.rt.qualified)

    def close(self, timeout: float = 5.0) -> None:
        self.watcher.close()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)


class Store:
    """All objects of one simulated cluster, with the API semantics of a real API server.

    Resource arguments are a :class:`ResourceType` or a name as kubectl accepts it (``pods``,
    ``po``, ``resourceclaims.resource.k8s.io``, ``clusterpolicies.nvidia.com``). Reads return copies
    unless ``copy=False`` is passed by a caller that promises not to modify the result (the HTTP
    server, which only serialises it).
    """

    def __init__(self, table: ResourceTable | None = None, *, history: int = 10_000,
                 clock: Callable[[], float] = time.time, seed: int | None = None) -> None:
        self.table = table or ResourceTable()
        self._clock = clock
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._objects: dict[GroupResource, dict[str, dict[str, Obj]]] = {}
        self._rv = 0
        self._history: deque[WatchEvent] = deque(maxlen=history)
        self._evicted = 0  # every event up to this resourceVersion has left the history
        self._watchers: dict[GroupResource, set[Watcher]] = {}  # watchers without an index key
        self._keyed_watchers: dict[tuple[GroupResource, str, str], set[Watcher]] = {}  # by (storage, field, value)
        self._index: dict[tuple[GroupResource, str], dict[str, set[tuple[str, str]]]] = {}
        self._index_paths: dict[GroupResource, dict[str, tuple[str, ...]]] = {}
        self._termination_hook: PodTerminationHook | None = None
        #: Namespaces the namespace controller is to empty (None stops it); its thread starts at the
        #: first namespace deletion.
        self._terminating: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._namespace_controller: threading.Thread | None = None
        self._bootstrap()

    def _bootstrap(self) -> None:
        # What a fresh kubeadm cluster has before anyone touches it.
        for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.create("namespaces", {"metadata": {"name": name}})
        for name, value in (("system-cluster-critical", 2000000000), ("system-node-critical", 2000001000)):
            self.create("priorityclasses", {"metadata": {"name": name}, "value": value,
                                            "description": "Used for system critical pods that must run in the "
                                                           "cluster, but can be moved to another node if necessary."})

    # ---------------------------------------------------------------------------------------------
    # Helpers

    def resolve(self, resource: ResourceType | str) -> ResourceType:
        if isinstance(resource, ResourceType):
            return resource
        try:
            return self.table.resolve(resource)
        except KeyError as e:
            raise ApiError(404, "NotFound", str(e.args[0])) from None

    @property
    def resource_version(self) -> str:
        """The current global resourceVersion."""
        return str(self._rv)

    def _namespace(self, rt: ResourceType, namespace: str | None) -> str:
        if not rt.namespaced:
            return ""
        if not namespace:
            raise ApiError.bad_request(f"a namespace is required to address {rt.qualified}")
        return namespace

    def _bucket(self, storage: GroupResource, namespace: str) -> dict[str, Obj]:
        return self._objects.setdefault(storage, {}).setdefault(namespace, {})

    def _current(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self._objects.get(rt.storage, {}).get(namespace, {}).get(name)
        if obj is None:
            raise ApiError.not_found(rt, name)
        return obj

    def _context(self) -> CreateContext:
        now = self._clock()
        return CreateContext(uid=str(uuid.UUID(int=self._random.getrandbits(128), version=4)),
                             now=_rfc3339(now), now_micro=_rfc3339_micro(now))

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def _emit(self, kind: str, storage: GroupResource, namespace: str, obj: Obj, previous: Obj | None) -> None:
        event = WatchEvent(kind, obj, int(obj["metadata"]["resourceVersion"]), storage, namespace, previous)
        if self._history.maxlen is not None and len(self._history) == self._history.maxlen:
            self._evicted = self._history[0].resource_version
        self._history.append(event)
        recipients = list(self._watchers.get(storage, ()))
        paths = self._indexed_paths(storage)
        if paths:
            key = (namespace, str(obj["metadata"]["name"]))
            for label, path in paths.items():
                old = field_value(previous, path) if previous is not None else None
                new = field_value(obj, path) if kind != "DELETED" else None
                self._reindex(storage, label, key, old, new)
                for value in {v for v in (old, new) if v is not None}:
                    recipients.extend(self._keyed_watchers.get((storage, label, value), ()))
        for watcher in recipients:
            if watcher.namespace is None or watcher.namespace == namespace:
                watcher._queue.put(event)

    def _indexed_paths(self, storage: GroupResource) -> dict[str, tuple[str, ...]]:
        paths = self._index_paths.get(storage)
        if paths is None:
            types = self.table.storage_types(storage)
            labels = types[0].supported_field_labels if types else {}
            paths = {f: labels[f] for f in types[0].indexed_fields} if types else {}
            self._index_paths[storage] = paths
        return paths

    def _reindex(self, storage: GroupResource, label: str, key: tuple[str, str], old: str | None,
                 new: str | None) -> None:
        if old == new:
            return
        index = self._index.setdefault((storage, label), {})
        if old is not None:
            keys = index.get(old)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del index[old]
        if new is not None:
            index.setdefault(new, set()).add(key)

    def _candidates(self, rt: ResourceType, ns: str | None, match: _Match) -> builtins.list[Obj]:
        """The objects a list or watch must look at: an index hit, one namespace, or everything."""
        namespaces = self._objects.get(rt.storage, {})
        if match.indexed is not None and self._indexed_paths(rt.storage):
            label, value = match.indexed
            keys = self._index.get((rt.storage, label), {}).get(value, ())
            found = (namespaces.get(k[0], {}).get(k[1]) for k in keys if ns is None or k[0] == ns)
            return [o for o in found if o is not None]
        buckets = [namespaces.get(ns, {})] if ns is not None else list(namespaces.values())
        return [obj for bucket in buckets for obj in bucket.values()]

    def _view(self, rt: ResourceType, obj: Obj, copy: bool) -> Obj:
        out = rt.strategy.from_storage(obj, rt)
        return clone(out) if copy else out

    # ---------------------------------------------------------------------------------------------
    # Reads

    def get(self, resource: ResourceType | str, name: str, *, namespace: str | None = None,
            copy: bool = True) -> Obj:
        rt = self.resolve(resource)
        ns = self._namespace(rt, namespace)
        with self._lock:
            obj = self._current(rt, ns, name)
        return self._view(rt, obj, copy)

    def list(self, resource: ResourceType | str, *, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None, limit: int | None = None, continue_token: str | None = None,
             copy: bool = True) -> ObjectList:
        """Objects in key order (namespace, name), optionally one page of ``limit`` items."""
        rt = self.resolve(resource)
        match = _Match(rt, label_selector, field_selector)
        start, token_rv = self._decode_continue(continue_token)
        ns = namespace if rt.namespaced and namespace else None
        with self._lock:
            rv = self._rv
            candidates = self._candidates(rt, ns, match)
        # Stored objects are immutable, so filtering and sorting need no lock.
        selected = [obj for obj in candidates if match(obj)]
        keyed = sorted(((o["metadata"].get("namespace", ""), o["metadata"]["name"]), o) for o in selected)
        if start is not None:
            keyed = [(k, o) for k, o in keyed if k > start]
            rv = token_rv
        token = remaining = None
        if limit and len(keyed) > limit:
            remaining = len(keyed) - limit
            keyed = keyed[:limit]
            token = self._encode_continue(keyed[-1][0], rv)
        return ObjectList([self._view(rt, o, copy) for _, o in keyed], str(rv), token, remaining)

    @staticmethod
    def _encode_continue(key: tuple[str, str], rv: int) -> str:
        raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": list(key)}).encode()
        return base64.urlsafe_b64encode(raw).decode()

    @staticmethod
    def _decode_continue(token: str | None) -> tuple[tuple[str, str] | None, int]:
        if not token:
            return None, 0
        try:
            data = json.loads(base64.urlsafe_b64decode(token.encode()))
            return (str(data["start"][0]), str(data["start"][1])), int(data["rv"])
        except (ValueError, KeyError, IndexError, TypeError, binascii.Error):
            raise ApiError.bad_request("continue key is not valid: invalid continue token") from None

    def count(self, resource: ResourceType | str, *, namespace: str | None = None) -> int:
        rt = self.resolve(resource)
        with self._lock:
            namespaces = self._objects.get(rt.storage, {})
            if namespace is not None:
                return len(namespaces.get(namespace, {}))
            return sum(len(bucket) for bucket in namespaces.values())

    # ---------------------------------------------------------------------------------------------
    # Create

    def create(self, resource: ResourceType | str, obj: Mapping[str, Any], *, namespace: str | None = None,
               dry_run: bool = False, copy: bool = True) -> Obj:
        """POST: store a new object; raises ApiError as the real server would answer."""
        rt = self.resolve(resource)
        body: Obj = clone(obj)
        if not isinstance(body, dict):
            raise ApiError.bad_request("the body of the request must be a JSON object")
        kind = body.get("kind")
        if kind and kind != rt.kind:
            raise ApiError.bad_request(f'{kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                                       f"the kind in the body does not match the resource")
        if not isinstance(body.get("metadata", {}), dict):
            raise ApiError.bad_request("metadata must be an object")
        if rt.namespaced:
            if not namespace:
                namespace = body.get("metadata", {}).get("namespace")
            ns = self._namespace(rt, namespace)
            if body.get("metadata", {}).get("namespace") not in (None, "", ns):
                raise ApiError.bad_request("the namespace of the provided object does not match the namespace sent "
                                           "on the request")
        else:
            ns = ""
        with self._lock:
            stored = self._create_locked(rt, body, ns, dry_run)
        return self._view(rt, stored, copy)

    def _create_locked(self, rt: ResourceType, body: Obj, ns: str, dry_run: bool) -> Obj:
        obj = rt.strategy.to_storage(body)
        meta = obj.setdefault("metadata", {})
        name = str(meta.get("name") or "")
        if rt.namespaced:
            self._admit_namespace(rt, ns, name)
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        if not name and meta.get("generateName"):
            name = self._generate_name(rt, ns, str(meta["generateName"]))
        meta["name"] = name
        causes = ([Cause("FieldValueRequired", "Required value: name or generateName is required", "metadata.name")]
                  if not name else validate_name(rt.name_rule, name))
        if rt.has_status and not rt.keep_status_on_create:
            obj.pop("status", None)
        ctx = self._context()
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion", "managedFields",
                    "selfLink", "generation"):
            meta.pop(key, None)
        meta["uid"] = ctx.uid
        meta["creationTimestamp"] = ctx.now
        if rt.tracks_generation:
            meta["generation"] = 1
        if rt.storage == rt.group_resource:
            obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        if not causes:
            if rt.storage == PODS:
                self._admit_priority(rt, obj, name)
            rt.strategy.default(obj, ctx)
            causes = rt.strategy.validate(obj)
        if causes:
            raise ApiError.invalid(rt, name, causes)
        if rt.storage == PODS:
            self._admit_runtime_class(rt, obj, name)
            self._admit_pod_security(rt, obj, ns, name)
        bucket = self._bucket(rt.storage, ns)
        if name in bucket:
            raise ApiError.already_exists(rt, name)
        if dry_run:
            return obj
        meta["resourceVersion"] = str(self._next_rv())
        bucket[name] = obj
        self._emit("ADDED", rt.storage, ns, obj, None)
        if rt.storage == CRDS:
            self.table.register(crd_resource_types(obj))
        if rt.storage == NAMESPACES:
            self._populate_namespace_locked(name)
        return obj

    def _populate_namespace_locked(self, ns: str) -> None:
        """What kube-controller-manager puts in every new namespace: the ``default``
        ServiceAccount (serviceaccount controller) and the ``kube-root-ca.crt`` ConfigMap
        (root-ca-cert-publisher). The real controllers write them about 0.1 s after the namespace
        (measured against v1.36.2); here they come in the same write, right after the namespace's
        ADDED event, so nothing in the simulation can see a namespace without them. The simulated
        server speaks plain HTTP: there is no CA, and ``ca.crt`` is empty."""
        self._create_locked(self.table.resolve("serviceaccounts"), {"metadata": {"name": "default"}}, ns, False)
        annotations = {"kubernetes.io/description": _ROOT_CA_DESCRIPTION}
        self._create_locked(self.table.resolve("configmaps"), {
            "metadata": {"name": "kube-root-ca.crt", "annotations": annotations}, "data": {"ca.crt": ""}}, ns, False)

    def _admit_namespace(self, rt: ResourceType, ns: str, name: str) -> None:
        """The NamespaceLifecycle admission plugin: no content in missing or terminating namespaces."""
        namespaces_rt = self.table.resolve("namespaces")
        ns_obj = self._objects.get(NAMESPACES, {}).get("", {}).get(ns)
        if ns_obj is None:
            raise ApiError.not_found(namespaces_rt, ns)
        if ns_obj.get("status", {}).get("phase") == "Terminating" or ns_obj["metadata"].get("deletionTimestamp"):
            raise ApiError.forbidden(
                rt, name, f"unable to create new content in namespace {ns} because it is being terminated",
                [Cause("NamespaceTerminating", f"namespace {ns} is being terminated", "metadata.namespace")])

    def _admit_priority(self, rt: ResourceType, pod: Obj, name: str) -> None:
        """The Priority admission plugin (on by default), before validation: a pod naming a
        PriorityClass that does not exist is refused; one that exists gives the pod its value and
        preemption policy (tests/realk8s/test_mock_fidelity.py sends the same request to both)."""
        spec = pod.setdefault("spec", {})
        wanted = spec.get("priorityClassName")
        if not wanted:
            return
        found = self._objects.get(PRIORITY_CLASSES, {}).get("", {}).get(wanted)
        if found is None:
            raise ApiError.forbidden(rt, name, f"no PriorityClass with name {wanted} was found")
        spec["priority"] = int(found.get("value") or 0)
        spec.setdefault("preemptionPolicy", found.get("preemptionPolicy") or "PreemptLowerPriority")

    def _admit_runtime_class(self, rt: ResourceType, pod: Obj, name: str) -> None:
        """The RuntimeClass admission plugin (on by default): a pod naming a RuntimeClass that does
        not exist is refused at creation, before any node sees it."""
        wanted = (pod.get("spec") or {}).get("runtimeClassName")
        if wanted and wanted not in self._objects.get(RUNTIME_CLASSES, {}).get("", {}):
            raise ApiError.forbidden(rt, name, f'pod rejected: RuntimeClass "{wanted}" not found')

    def _admit_pod_security(self, rt: ResourceType, pod: Obj, ns: str, name: str) -> None:
        """Pod Security admission (on by default): a pod that breaks the `restricted` standard is
        refused in a namespace labelled ``pod-security.kubernetes.io/enforce: restricted``. Only
        that level is simulated (a namespace enforcing baseline admits every pod here), and, as on a
        real cluster, gpuconf's declared exceptions (gpuconf.io/pss-exceptions) count for nothing."""
        ns_obj = self._objects.get(NAMESPACES, {}).get("", {}).get(ns) or {}
        if ((ns_obj.get("metadata") or {}).get("labels") or {}).get(_PSA_ENFORCE) != "restricted":
            return
        found = podsecurity.violations(pod)
        if found:
            raise ApiError.forbidden(rt, name, 'violates PodSecurity "restricted:latest": '
                                     + "; ".join(f"{v.control} ({v.where}: {v.detail})" for v in found))

    def _generate_name(self, rt: ResourceType, ns: str, prefix: str) -> str:
        # names.SimpleNameGenerator: prefix cut to leave room for 5 random characters.
        prefix = prefix[:253 - 5] if rt.name_rule.value == "subdomain" else prefix[:63 - 5]
        bucket = self._objects.get(rt.storage, {}).get(ns, {})
        for _ in range(16):
            name = prefix + "".join(self._random.choice(_NAME_ALPHABET) for _ in range(5))
            if name not in bucket:
                return name
        return name

    # ---------------------------------------------------------------------------------------------
    # Update and patch

    def update(self, resource: ResourceType | str, obj: Mapping[str, Any], *, namespace: str | None = None,
               name: str | None = None, subresource: str | None = None, dry_run: bool = False,
               copy: bool = True) -> Obj:
        """PUT: replace an object (or only its status with ``subresource="status"``)."""
        rt = self.resolve(resource)
        body: Obj = clone(obj)
        if not isinstance(body, dict):
            raise ApiError.bad_request("the body of the request must be a JSON object")
        meta = body.get("metadata") or {}
        ns = self._namespace(rt, namespace or meta.get("namespace"))
        body_name = meta.get("name")
        name = name or body_name
        if not name:
            raise ApiError.bad_request("name is required to update an object")
        if body_name and body_name != name:
            raise ApiError.bad_request(f"the name of the object ({body_name}) does not match the name on the URL "
                                       f"({name})")
        if rt.namespaced and meta.get("namespace") not in (None, "", ns):
            raise ApiError.bad_request("the namespace of the provided object does not match the namespace sent "
                                       "on the request")
        self._check_subresource(rt, subresource)
        with self._lock:
            old = self._current(rt, ns, name)
            stored = self._update_locked(rt, old, rt.strategy.to_storage(body), subresource, dry_run)
        return self._view(rt, stored, copy)

    def update_status(self, resource: ResourceType | str, obj: Mapping[str, Any], *,
                      namespace: str | None = None) -> Obj:
        return self.update(resource, obj, namespace=namespace, subresource="status")

    def patch(self, resource: ResourceType | str, name: str, body: Any, *, namespace: str | None = None,
              patch_type: str = patches.MERGE_PATCH, subresource: str | None = None, dry_run: bool = False,
              copy: bool = True) -> Obj:
        """PATCH with a JSON, merge or strategic-merge patch (the ``patch_type`` media type)."""
        rt = self.resolve(resource)
        ns = self._namespace(rt, namespace)
        self._check_subresource(rt, subresource)
        media = patch_type.split(";", 1)[0].strip().lower()
        allowed = patches.supported_patch_types(strategic=not rt.custom)
        if media not in allowed:
            raise ApiError(415, "UnsupportedMediaType",
                           "the body of the request was in an unknown format - accepted media types include: "
                           + ", ".join(allowed))
        with self._lock:
            old = self._current(rt, ns, name)
            view = rt.strategy.from_storage(old, rt)
            try:
                patched = patches.apply_patch(media, view, body)
            except patches.PatchError as e:
                if e.malformed:
                    raise ApiError.bad_request(str(e)) from None
                raise ApiError(422, "Invalid", str(e)) from None
            if not isinstance(patched, dict):
                raise ApiError.bad_request("the patched object is not a JSON object")
            patched = clone(patched)
            meta = patched.setdefault("metadata", {})
            if meta.get("resourceVersion") in (None, ""):
                meta["resourceVersion"] = old["metadata"]["resourceVersion"]
            stored = self._update_locked(rt, old, rt.strategy.to_storage(patched), subresource, dry_run)
        return self._view(rt, stored, copy)

    def patch_status(self, resource: ResourceType | str, name: str, body: Any, *, namespace: str | None = None,
                     patch_type: str = patches.MERGE_PATCH) -> Obj:
        """Patch only the status, as a controller (scheduler, kubelet, DRA driver) does."""
        return self.patch(resource, name, body, namespace=namespace, patch_type=patch_type, subresource="status")

    @staticmethod
    def _check_subresource(rt: ResourceType, subresource: str | None) -> None:
        if subresource not in (None, "") and not (subresource == "status" and rt.has_status):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")

    def _update_locked(self, rt: ResourceType, old: Obj, new: Obj, subresource: str | None, dry_run: bool) -> Obj:
        old_meta = old["metadata"]
        name = old_meta["name"]
        new_meta = new.get("metadata") if isinstance(new.get("metadata"), dict) else {}
        assert isinstance(new_meta, dict)
        rv = new_meta.get("resourceVersion")
        if rv not in (None, "") and rv != old_meta["resourceVersion"]:
            raise ApiError.conflict(rt, name)
        if subresource == "status":
            # Only status changes; metadata and spec stay (ResetObjectMetaForStatus).
            candidate = {**old, "status": new.get("status", {})}
            candidate["metadata"] = dict(old_meta)
        else:
            candidate = dict(new)
            if rt.has_status:
                if "status" in old:
                    candidate["status"] = old["status"]
                else:
                    candidate.pop("status", None)
            meta = dict(new_meta)
            for key in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                        "deletionGracePeriodSeconds", "generation", "resourceVersion"):
                if key in old_meta:
                    meta[key] = old_meta[key]
                else:
                    meta.pop(key, None)
            candidate["metadata"] = meta
            if old_meta.get("deletionTimestamp"):
                added = set(meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
                if added:
                    raise ApiError.invalid(rt, name, [Cause(
                        "FieldValueForbidden", "Forbidden: no new finalizers can be added if the object is being "
                        "deleted, found new finalizers " + json.dumps(sorted(added)), "metadata.finalizers")])
        candidate["apiVersion"], candidate["kind"] = old.get("apiVersion"), old.get("kind")
        if subresource != "status":
            rt.strategy.prepare_for_update(old, candidate)
        causes = rt.strategy.validate(candidate)
        if causes:
            raise ApiError.invalid(rt, name, causes)
        if candidate == old:
            return old  # a no-op write changes nothing, not even the resourceVersion
        if rt.tracks_generation and _spec_part(candidate) != _spec_part(old):
            candidate["metadata"]["generation"] = int(old_meta.get("generation") or 0) + 1
        if dry_run:
            return candidate
        return self._replace_locked(rt, old, candidate)

    def _replace_locked(self, rt: ResourceType, old: Obj, new: Obj) -> Obj:
        """Store ``new`` over ``old`` (MODIFIED), then finish a pending deletion if nothing holds it."""
        meta = new["metadata"]
        meta["resourceVersion"] = str(self._next_rv())
        ns = meta.get("namespace", "")
        self._bucket(rt.storage, ns)[meta["name"]] = new
        self._emit("MODIFIED", rt.storage, ns, new, old)
        if rt.storage == CRDS:
            self.table.register(crd_resource_types(new))
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and not meta.get("deletionGracePeriodSeconds"):
            if rt.storage == NAMESPACES:
                return self._finish_namespace_locked(meta["name"]) or new  # only once it is empty
            return self._remove_locked(rt, new)
        return new

    # ---------------------------------------------------------------------------------------------
    # Delete

    def set_pod_termination_hook(self, hook: PodTerminationHook | None) -> None:
        """Install the node-agent seam for graceful pod deletion (see :data:`PodTerminationHook`).

        Without a hook there is no node agent to confirm anything, so bound pods are removed at once.
        A node-agent layer installs one (``lambda pod: True`` waits for every bound pod, as a real
        cluster does) and confirms by deleting the pod with ``grace_period_seconds=0``.
        """
        self._termination_hook = hook

    def _awaits_agent(self, pod: Obj, grace_period_seconds: int | None) -> bool:
        hook = self._termination_hook
        if hook is None or _pod_grace(pod, grace_period_seconds) == 0:
            return False
        return bool(hook(clone(pod)))

    def _agent_pods(self, namespace: str | None, names: set[str] | None = None) -> set[tuple[str, str]]:
        """Which pods (namespace, name) a node agent will confirm, asked before taking the lock."""
        if self._termination_hook is None:
            return set()
        with self._lock:
            buckets = self._objects.get(PODS, {})
            pods = [p for ns, bucket in buckets.items() if namespace is None or ns == namespace
                    for p in bucket.values() if names is None or p["metadata"]["name"] in names]
        return {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods if self._awaits_agent(p, None)}

    def delete(self, resource: ResourceType | str, name: str, *, namespace: str | None = None,
               grace_period_seconds: int | None = None, preconditions: Mapping[str, Any] | None = None,
               dry_run: bool = False, copy: bool = True) -> DeleteResult:
        """DELETE one object; the result says whether it is gone or only marked for deletion."""
        rt = self.resolve(resource)
        ns = self._namespace(rt, namespace)
        waiting: set[tuple[str, str]] = set()
        if rt.storage == PODS:
            with self._lock:
                pod = self._current(rt, ns, name)
            if self._awaits_agent(pod, grace_period_seconds):
                waiting.add((ns, name))
        with self._lock:
            result = self._delete_locked(rt, ns, name, grace_period_seconds, waiting, preconditions or {}, dry_run)
        return DeleteResult(self._view(rt, result.object, copy), result.deleted)

    def delete_collection(self, resource: ResourceType | str, *, namespace: str | None = None,
                          label_selector: str | None = None, field_selector: str | None = None,
                          grace_period_seconds: int | None = None, dry_run: bool = False,
                          copy: bool = True) -> builtins.list[Obj]:
        """DELETE on a collection: every selected object, each as a single DELETE would."""
        rt = self.resolve(resource)
        targets = self.list(rt, namespace=namespace, label_selector=label_selector, field_selector=field_selector,
                            copy=False).items
        keys = [(t["metadata"].get("namespace", ""), t["metadata"]["name"]) for t in targets]
        waiting: set[tuple[str, str]] = set()
        if rt.storage == PODS:
            waiting = self._agent_pods(namespace, {n for _, n in keys}) & set(keys)
        out = []
        with self._lock:
            for ns, name in keys:
                try:
                    result = self._delete_locked(rt, ns, name, grace_period_seconds, waiting, {}, dry_run)
                except ApiError as e:
                    if e.code == 404:
                        continue
                    raise
                out.append(result.object)
        return [self._view(rt, o, copy) for o in out]

    def _delete_locked(self, rt: ResourceType, ns: str, name: str, grace_period_seconds: int | None,
                       waiting: set[tuple[str, str]], preconditions: Mapping[str, Any], dry_run: bool) -> DeleteResult:
        obj = self._current(rt, ns, name)
        meta = obj["metadata"]
        for key, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
            wanted = preconditions.get(key)
            if wanted not in (None, "") and wanted != meta.get(key):
                raise ApiError.conflict(rt, name, f"Precondition failed: {label} in precondition: {wanted}, "
                                                  f"{label} in object meta: {meta.get(key)}")
        if dry_run:
            return DeleteResult(obj, False)
        if rt.storage == NAMESPACES:
            return self._delete_namespace_locked(obj)
        if rt.storage == PODS and (ns, name) in waiting:
            grace = _pod_grace(obj, grace_period_seconds)
            if meta.get("deletionTimestamp") and int(meta.get("deletionGracePeriodSeconds") or 0) <= grace:
                return DeleteResult(obj, False)  # already terminating, at least as fast
            marked = clone(obj)
            marked["metadata"]["deletionTimestamp"] = _rfc3339(self._clock() + grace)
            marked["metadata"]["deletionGracePeriodSeconds"] = grace
            return DeleteResult(self._replace_locked(rt, obj, marked), False)
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp") and not meta.get("deletionGracePeriodSeconds"):
                return DeleteResult(obj, False)
            marked = clone(obj)
            marked["metadata"].setdefault("deletionTimestamp", _rfc3339(self._clock()))
            marked["metadata"]["deletionGracePeriodSeconds"] = 0
            return DeleteResult(self._replace_locked(rt, obj, marked), False)
        return DeleteResult(self._remove_locked(rt, obj), True)

    def _remove_locked(self, rt: ResourceType, obj: Obj) -> Obj:
        meta = obj["metadata"]
        ns, name = meta.get("namespace", ""), meta["name"]
        bucket = self._objects.get(rt.storage, {}).get(ns, {})
        bucket.pop(name, None)
        if not bucket:
            self._objects.get(rt.storage, {}).pop(ns, None)
        gone: Obj = clone(obj)
        gone["metadata"]["resourceVersion"] = str(self._next_rv())
        self._emit("DELETED", rt.storage, ns, gone, obj)
        if rt.storage == CRDS:
            self._drop_custom_resources_locked(obj)
        if ns:
            self._finish_namespace_locked(ns)
        return gone

    def _drop_custom_resources_locked(self, crd: Obj) -> None:
        types = crd_resource_types(crd)
        if not types:
            return
        for bucket in list(self._objects.get(types[0].storage, {}).values()):
            for obj in list(bucket.values()):
                self._remove_locked(types[0], obj)
        self.table.unregister(types[0].group, types[0].plural)

    def _delete_namespace_locked(self, ns_obj: Obj) -> DeleteResult:
        """DELETE of a namespace: it goes Terminating at once (deletionTimestamp, status.phase) and
        the answer is the namespace as it now is; the namespace controller then empties it and
        removes it (:meth:`_run_namespace_controller`), as kube-controller-manager does."""
        name = ns_obj["metadata"]["name"]
        current = ns_obj
        if ns_obj.get("status", {}).get("phase") != "Terminating":
            marked = clone(ns_obj)
            marked["metadata"].setdefault("deletionTimestamp", _rfc3339(self._clock()))
            marked["status"] = {**marked.get("status", {}), "phase": "Terminating"}
            marked["metadata"]["resourceVersion"] = str(self._next_rv())
            self._bucket(NAMESPACES, "")[name] = marked
            self._emit("MODIFIED", NAMESPACES, "", marked, ns_obj)
            current = marked
        if self._namespace_controller is None:
            self._namespace_controller = threading.Thread(target=self._run_namespace_controller,
                                                          name="sim-namespace-controller", daemon=True)
            self._namespace_controller.start()
        self._terminating.put(name)
        return DeleteResult(current, False)

    def _run_namespace_controller(self) -> None:
        """The namespace controller: for each Terminating namespace, delete everything in it, each
        object by the usual rules (finalizers and node agents confirming pods can hold it), then,
        once nothing is left, remove it (:meth:`_finish_namespace_locked`)."""
        while (name := self._terminating.get()) is not None:
            try:
                self._empty_namespace(name)
            except Exception:  # the controller carries on with the next namespace, as a real one would
                log.exception("namespace controller: emptying namespace %s failed", name)

    def _empty_namespace(self, name: str) -> None:
        waiting = self._agent_pods(name)
        with self._lock:
            ns_obj = self._objects.get(NAMESPACES, {}).get("", {}).get(name)
            if ns_obj is None or ns_obj.get("status", {}).get("phase") != "Terminating":
                return
            for storage in self.table.namespaced_storages():
                types = self.table.storage_types(storage)
                bucket = self._objects.get(storage, {}).get(name, {})
                for obj_name in list(bucket):
                    if obj_name in bucket:
                        self._delete_locked(types[0], name, obj_name, None, waiting, {}, False)
            self._finish_namespace_locked(name)

    def _finish_namespace_locked(self, ns: str) -> Obj | None:
        """Remove a Terminating namespace once nothing is left in it."""
        ns_obj = self._objects.get(NAMESPACES, {}).get("", {}).get(ns)
        if ns_obj is None or ns_obj.get("status", {}).get("phase") != "Terminating":
            return None
        if ns_obj["metadata"].get("finalizers"):
            return None
        if any(self._objects.get(storage, {}).get(ns) for storage in self.table.namespaced_storages()):
            return None
        # The controller's last status write, then its finalize call (spec.finalizers emptied),
        # which removes the namespace: the DELETED event still shows ["kubernetes"], as the real one.
        done = clone(ns_obj)
        now = _rfc3339(self._clock())
        done["status"]["conditions"] = [{"type": t, "status": "False", "lastTransitionTime": now, "reason": r,
                                         "message": m} for t, r, m in _NAMESPACE_DELETED_CONDITIONS]
        done["metadata"]["resourceVersion"] = str(self._next_rv())
        self._bucket(NAMESPACES, "")[ns] = done
        self._emit("MODIFIED", NAMESPACES, "", done, ns_obj)
        return self._remove_locked(self.table.resolve("namespaces"), done)

    # ---------------------------------------------------------------------------------------------
    # Pod binding (the scheduler's write)

    def bind_pod(self, namespace: str, name: str, node_name: str, *, copy: bool = True) -> Obj:
        """POST pods/binding: set spec.nodeName once and mark the pod PodScheduled."""
        rt = self.resolve("pods")
        with self._lock:
            pod = self._current(rt, namespace, name)
            assigned = pod.get("spec", {}).get("nodeName")
            if assigned:
                raise ApiError.conflict(rt, name, f'pod {name} is already assigned to node "{assigned}"',
                                        subresource="binding")
            if pod["metadata"].get("deletionTimestamp"):
                raise ApiError.conflict(rt, name, f"pod {name} is being deleted, cannot be assigned to a host",
                                        subresource="binding")
            bound = clone(pod)
            bound["spec"]["nodeName"] = node_name
            status = bound.setdefault("status", {})
            conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                               "lastTransitionTime": _rfc3339(self._clock())})
            status["conditions"] = conditions
            stored = self._replace_locked(rt, pod, bound)
        return self._view(rt, stored, copy)

    # ---------------------------------------------------------------------------------------------
    # Watch and subscribe

    def watch(self, resource: ResourceType | str, *, namespace: str | None = None,
              resource_version: str | None = None, label_selector: str | None = None,
              field_selector: str | None = None) -> Watcher:
        """Start a watch. ``resource_version`` None/""/"0" first replays the current objects as ADDED;
        otherwise events after it are replayed from the history (410 Gone if it left the window)."""
        rt = self.resolve(resource)
        match = _Match(rt, label_selector, field_selector)
        ns = namespace if rt.namespaced and namespace else None
        watcher = Watcher(self, rt, ns, match)
        with self._lock:
            if resource_version in (None, "", "0"):
                current = sorted(self._candidates(rt, ns, match), key=lambda o: int(o["metadata"]["resourceVersion"]))
                initial = [WatchEvent("ADDED", o, int(o["metadata"]["resourceVersion"]), rt.storage,
                                      o["metadata"].get("namespace", "")) for o in current]
            else:
                try:
                    since = int(str(resource_version))
                except ValueError:
                    raise ApiError.bad_request(f'invalid resource version "{resource_version}"') from None
                if since < self._evicted:
                    raise ApiError.gone(f"too old resource version: {since} ({self._evicted})")
                initial = []
                for event in reversed(self._history):
                    if event.resource_version <= since:
                        break
                    if event.storage == rt.storage and (ns is None or event.namespace == ns):
                        initial.append(event)
                initial.reverse()
            watcher._pending.extend(initial)
            self._watcher_set(watcher).add(watcher)
        return watcher

    def bookmark(self, watcher: Watcher) -> str | None:
        """A resourceVersion safe to report in a BOOKMARK: every earlier event reached the watcher."""
        with self._lock:
            return str(self._rv) if watcher.idle() else None

    def _watcher_set(self, watcher: Watcher) -> set[Watcher]:
        key = watcher._match.indexed
        if key is not None and self._indexed_paths(watcher.rt.storage):
            return self._keyed_watchers.setdefault((watcher.rt.storage, *key), set())
        return self._watchers.setdefault(watcher.rt.storage, set())

    def _unregister(self, watcher: Watcher) -> None:
        with self._lock:
            self._watcher_set(watcher).discard(watcher)

    def subscribe(self, resource: ResourceType | str, callback: Callable[[str, Obj], None], *,
                  namespace: str | None = None, label_selector: str | None = None,
                  field_selector: str | None = None, replay: bool = True) -> Subscription:
        """Call ``callback(event_type, object)`` for every change, like an informer's event handler.

        With ``replay`` the existing objects arrive first as ADDED. Callbacks run on the
        subscription's thread, after the store lock is released, in resourceVersion order.
        """
        watcher = self.watch(resource, namespace=namespace, label_selector=label_selector,
                             field_selector=field_selector, resource_version=None if replay else self.resource_version)
        return Subscription(watcher, callback)

    def close(self) -> None:
        """End every watch and subscription (the server is shutting down)."""
        with self._lock:
            watchers = [w for group in (*self._watchers.values(), *self._keyed_watchers.values()) for w in group]
            self._watchers.clear()
            self._keyed_watchers.clear()
        for watcher in watchers:
            watcher._queue.put(_CLOSE)
        self._terminating.put(None)


def _spec_part(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Everything but metadata and status: a change here bumps metadata.generation."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _pod_grace(pod: Mapping[str, Any], requested: int | None) -> int:
    """The grace period a pod deletion gets (pkg/registry/core/pod/strategy.go CheckGracefulDelete)."""
    spec = pod.get("spec") or {}
    if not spec.get("nodeName"):
        return 0  # never scheduled: nothing to stop
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return 0  # already terminal
    if requested is not None:
        return max(0, int(requested))
    return int(spec.get("terminationGracePeriodSeconds", 30))
