"""The node agents' plumbing: the official client with retries (:class:`AgentApi`) and client-go's
work queue (:class:`WorkQueue`).

Retries (tenacity): 429 TooManyRequests waits the server's Retry-After; 5xx, connection resets and
timeouts back off exponentially with jitter (50 ms to 2 s); the whole call gives up after
``retry_timeout`` or as soon as the agents stop.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import math
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_delay, stop_when_event_set
from tenacity.wait import wait_base

__all__ = ["MERGE", "AgentApi", "WorkQueue"]

Obj = dict[str, Any]

MERGE = "application/merge-patch+json"
_TRANSIENT = (0, 429, 500, 502, 503, 504)


# --- retries ------------------------------------------------------------------------------------


def _transient(error: BaseException) -> bool:
    if isinstance(error, ApiException):
        return error.status in _TRANSIENT
    return isinstance(error, urllib3.exceptions.HTTPError | ConnectionError | TimeoutError)


class _RetryAfter(wait_base):
    """429: the server's Retry-After; otherwise exponential backoff with jitter (50 ms .. 2 s)."""

    def __call__(self, retry_state: RetryCallState) -> float:
        outcome = retry_state.outcome
        error = outcome.exception() if outcome is not None else None
        if isinstance(error, ApiException) and error.status == 429:
            raw = (error.headers or {}).get("Retry-After")
            with contextlib.suppress(TypeError, ValueError):
                return min(float(str(raw)), 30.0)
        backoff = 0.05 * 2 ** (retry_state.attempt_number - 1)
        return float(min(2.0, backoff * random.uniform(0.5, 1.5)))


class AgentApi:
    """The official client with retries; answers are plain JSON dicts (no model objects: they cost
    a lot of CPU with many nodes)."""

    def __init__(self, api_client: client.ApiClient, stopping: threading.Event, retry_timeout: float) -> None:
        self.core = client.CoreV1Api(api_client)
        self.coordination = client.CoordinationV1Api(api_client)
        self.resource = client.ResourceV1Api(api_client)
        self.node = client.NodeV1Api(api_client)
        self.extensions = client.ApiextensionsV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self._stopping = stopping
        self._retry_timeout = retry_timeout

    def _sleep(self, seconds: float) -> None:
        self._stopping.wait(seconds)  # a stopping agent does not sit out a backoff

    def retrying(self) -> Retrying:
        return Retrying(retry=retry_if_exception(_transient), wait=_RetryAfter(),
                        stop=stop_after_delay(self._retry_timeout) | stop_when_event_set(self._stopping),
                        sleep=self._sleep, reraise=True)

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Obj:
        def once() -> Obj:
            resp = fn(*args, _preload_content=False, _request_timeout=(5, 30), **kwargs)
            try:
                data = resp.data
            finally:
                resp.release_conn()
            parsed = json.loads(data) if data else {}
            return parsed if isinstance(parsed, dict) else {}

        return self.retrying()(once)

    def ignoring(self, codes: Sequence[int], fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Obj | None:
        """``call``, with the given error codes (404 NotFound, 409 Conflict/AlreadyExists) as None."""
        try:
            return self.call(fn, *args, **kwargs)
        except ApiException as e:
            if e.status in codes:
                return None
            raise


# --- the work queue ---------------------------------------------------------------------------


class WorkQueue:
    """client-go's workqueue: a key is queued once however often it is added, handled by one worker
    at a time (added again while handled, it comes back once the worker is done), plus timers."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._timers: list[tuple[float, int, str]] = []
        self._next: dict[str, float] = {}
        self._seq = itertools.count()
        self._closed = False

    def _add_locked(self, key: str) -> None:
        if self._closed or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.append(key)
            self._cond.notify()

    def add(self, key: str) -> None:
        with self._cond:
            self._add_locked(key)

    def add_at(self, key: str, when: float) -> None:
        with self._cond:
            if self._next.get(key, math.inf) <= when:
                return
            self._next[key] = when
            heapq.heappush(self._timers, (when, next(self._seq), key))
            self._cond.notify()

    def get(self) -> str | None:
        with self._cond:
            while True:
                if self._closed:
                    return None
                now = time.time()
                while self._timers and self._timers[0][0] <= now:
                    when, _, key = heapq.heappop(self._timers)
                    if self._next.get(key) == when:
                        del self._next[key]
                        self._add_locked(key)
                if self._queue:
                    key = self._queue.popleft()
                    self._dirty.discard(key)
                    self._processing.add(key)
                    return key
                self._cond.wait(self._timers[0][0] - now if self._timers else None)

    def done(self, key: str) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
