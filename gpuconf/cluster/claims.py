"""Watching a namespace's ResourceClaims while a campaign runs.

A claim generated from a pod's ResourceClaimTemplate is deallocated and deleted as soon as its pod
is done, so its allocation (``status.allocation.devices.results``) can only be seen while the pod
runs. :class:`ClaimWatch` keeps one watch on the namespace's claims for the length of a campaign and
remembers, per claim, the last state in which it was allocated.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from types import TracebackType
from typing import Any

import urllib3

from gpuconf.cluster.access import Cluster, stream_lines
from gpuconf.cluster.errors import ClusterError

__all__ = ["ClaimWatch", "claim_pod"]

Obj = Mapping[str, Any]


def claim_pod(claim: Obj) -> str | None:
    """The pod a claim belongs to: the owner of a generated claim, else the first pod it is reserved for."""
    meta, status = claim.get("metadata") or {}, claim.get("status") or {}
    owners = [o for o in meta.get("ownerReferences") or () if o.get("kind") == "Pod"]
    reserved = [r for r in status.get("reservedFor") or () if r.get("resource") == "pods"]
    name = (owners or reserved or [{}])[0].get("name")
    return str(name) if name else None


class ClaimWatch:
    """``with ClaimWatch(cluster, namespace) as watch:`` ... ``watch.allocated`` maps each claim's name
    to the claim as last seen allocated. ``error`` says why the watch broke, if it did (then what it
    saw is incomplete, and a check must not read a missing claim as "never allocated")."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.cluster, self.namespace = cluster, namespace
        self.allocated: dict[str, dict[str, Any]] = {}
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"claims-{namespace}", daemon=True)
        self._rv = ""

    def for_pod(self, pod: str) -> tuple[dict[str, Any], ...]:
        """The claims of ``pod`` seen allocated, by name."""
        return tuple(c for _, c in sorted(self.allocated.items()) if claim_pod(c) == pod)

    def _see(self, claim: dict[str, Any]) -> None:
        if (claim.get("status") or {}).get("allocation"):
            self.allocated[str((claim.get("metadata") or {}).get("name"))] = claim

    def _list(self) -> None:
        c = self.cluster
        listing = c.call_json("list resourceclaims", c.resource.list_namespaced_resource_claim, self.namespace)
        for claim in listing.get("items") or []:
            self._see(claim)
        self._rv = str((listing.get("metadata") or {}).get("resourceVersion") or "")

    def __enter__(self) -> ClaimWatch:
        self._list()
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    #: Attempts at the last watch after the stop: one the server cuts is tried again from the last
    #: resourceVersion (what the server sent meanwhile is the allocation of the campaign's last pods).
    DRAIN_ATTEMPTS = 5

    def _run(self) -> None:
        # After the stop, one more short watch takes in what the server sent meanwhile.
        drains = 0
        while drains < self.DRAIN_ATTEMPTS:
            if self._stop.is_set():
                drains += 1
            try:
                if not self._rv:
                    self._list()
                self._watch_once()
                if drains:
                    return  # drained
            except (urllib3.exceptions.HTTPError, OSError) as e:  # a cut stream: resume from the last rv
                if isinstance(e, urllib3.exceptions.MaxRetryError | urllib3.exceptions.NewConnectionError):
                    self.error = f"watching resourceclaims in {self.namespace}: {e}"
                    if drains:
                        return
                self._stop.wait(0.2)
            except (ClusterError, ValueError) as e:
                self.error = f"watching resourceclaims in {self.namespace}: {e}"
                if drains:
                    return
                self._stop.wait(0.5)
        if drains >= self.DRAIN_ATTEMPTS:
            self.error = (f"watching resourceclaims in {self.namespace}: the last watch was cut "
                          f"{self.DRAIN_ATTEMPTS} times after the campaign")

    def _watch_once(self) -> None:
        c = self.cluster
        response: Any = c.call("watch resourceclaims", c.resource.list_namespaced_resource_claim, self.namespace,
                               watch=True, resource_version=self._rv, allow_watch_bookmarks=True, timeout_seconds=1,
                               _preload_content=False, _request_timeout=(c.retry.request_timeout, 10))
        try:
            for line in stream_lines(response):
                self._event(json.loads(line))
        finally:
            response.close()
            response.release_conn()

    def _event(self, event: Mapping[str, Any]) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:  # the history moved on: relist (what was seen is kept)
                self._rv = ""
            return
        self._rv = str((obj.get("metadata") or {}).get("resourceVersion") or self._rv)
        if kind in ("ADDED", "MODIFIED"):
            self._see(dict(obj))
