"""API-level fault injection: what the fake API server does wrong, on purpose, and when.

The server asks :meth:`FaultPlan.decide` once per request, after routing and before doing any work.
A plan is a list of rules; the first rule that matches the request and fires wins. Modes:

* ``THROTTLE``: 429 TooManyRequests with a ``Retry-After`` header (API Priority and Fairness);
* ``SERVER_ERROR``: 500 InternalError (an etcd hiccup, an admission webhook timing out);
* ``DROP``: the connection is closed without an answer (a load balancer or apiserver restart);
* ``CUT_WATCH``: a watch stream ends after ``after_events`` events, cleanly (the last chunk is sent,
  as when the server's watch timeout fires) or abruptly (the socket is shut mid-stream).

A rule fires with probability ``rate`` from a generator seeded by the plan, so a run is repeatable
when requests arrive in the same order; ``times`` limits it to the next N matching requests. The
``outage`` switch makes every request fail; :meth:`gpuconf.sim.server.FakeApiServer.set_outage`
also closes the listening socket so new connections are refused.

These are faults of the API, for testing the suite's retries and timeouts; faults of the simulated
hardware belong to the node agents.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Fault", "FaultMode", "FaultPlan", "FaultRule", "Injection", "RequestInfo"]


class FaultMode(StrEnum):
    THROTTLE = "throttle"
    SERVER_ERROR = "server-error"
    DROP = "drop"
    CUT_WATCH = "cut-watch"


@dataclass(frozen=True)
class RequestInfo:
    """What the server knows about a request once it is routed (resource "" for discovery)."""

    verb: str  # get list watch create update patch delete deletecollection
    path: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    def resource_names(self) -> frozenset[str]:
        """The spellings a rule may use: ``pods``, ``pods/status``, ``leases.coordination.k8s.io``."""
        names = {self.resource}
        if self.group:
            names.add(f"{self.resource}.{self.group}")
        if self.subresource:
            names.add(f"{self.resource}/{self.subresource}")
        return frozenset(names)


@dataclass(frozen=True)
class Fault:
    """What to do to one request."""

    mode: FaultMode
    retry_after: int = 1  # THROTTLE: seconds in Retry-After and details.retryAfterSeconds
    after_events: int = 0  # CUT_WATCH: events sent before the stream ends
    abrupt: bool = False  # CUT_WATCH: shut the socket instead of ending the chunked body
    message: str = "injected fault"


@dataclass(frozen=True, eq=False)
class FaultRule:
    """When to inject ``fault``: matching verbs/resources (empty = any), rate, and at most ``times``."""

    fault: Fault
    rate: float = 1.0
    verbs: frozenset[str] = frozenset()
    resources: frozenset[str] = frozenset()
    times: int | None = None

    def matches(self, request: RequestInfo) -> bool:
        if self.fault.mode is FaultMode.CUT_WATCH and request.verb != "watch":
            return False
        if self.verbs and request.verb not in self.verbs:
            return False
        return not self.resources or bool(self.resources & request.resource_names())


@dataclass(frozen=True)
class Injection:
    """A record of one injected fault, for tests and for the run's evidence."""

    mode: FaultMode
    verb: str
    path: str


class FaultPlan:
    """The faults a server injects; safe to change while the server runs."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._lock = threading.Lock()
        self._random = random.Random(seed)
        self._rules: list[FaultRule] = []
        self._left: dict[int, int | None] = {}  # id(rule) -> uses left (None: unlimited)
        self._outage = False
        #: Every fault injected so far, in order.
        self.injected: list[Injection] = []

    # Building the plan ---------------------------------------------------------------------------

    def add(self, rule: FaultRule) -> FaultRule:
        with self._lock:
            self._rules.append(rule)
            self._left[id(rule)] = rule.times
        return rule

    def remove(self, rule: FaultRule) -> None:
        with self._lock:
            self._rules = [r for r in self._rules if r is not rule]
            self._left.pop(id(rule), None)

    def clear(self) -> None:
        """Remove every rule and end an outage."""
        with self._lock:
            self._rules.clear()
            self._left.clear()
            self._outage = False

    def _rule(self, fault: Fault, rate: float, verbs: Iterable[str], resources: Iterable[str],
              times: int | None) -> FaultRule:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate must be within [0, 1], got {rate}")
        return self.add(FaultRule(fault, rate, frozenset(verbs), frozenset(resources), times))

    def throttle(self, *, rate: float = 1.0, verbs: Iterable[str] = (), resources: Iterable[str] = (),
                 times: int | None = None, retry_after: int = 1) -> FaultRule:
        """Answer 429 TooManyRequests with ``Retry-After: retry_after``."""
        return self._rule(Fault(FaultMode.THROTTLE, retry_after=retry_after), rate, verbs, resources, times)

    def server_error(self, *, rate: float = 1.0, verbs: Iterable[str] = (), resources: Iterable[str] = (),
                     times: int | None = None, message: str = "injected fault") -> FaultRule:
        """Answer 500 InternalError."""
        return self._rule(Fault(FaultMode.SERVER_ERROR, message=message), rate, verbs, resources, times)

    def drop(self, *, rate: float = 1.0, verbs: Iterable[str] = (), resources: Iterable[str] = (),
             times: int | None = None) -> FaultRule:
        """Close the connection without answering."""
        return self._rule(Fault(FaultMode.DROP), rate, verbs, resources, times)

    def cut_watch(self, *, after_events: int = 1, abrupt: bool = False, rate: float = 1.0,
                  resources: Iterable[str] = (), times: int | None = None) -> FaultRule:
        """End watch streams after ``after_events`` events (only watch requests match)."""
        fault = Fault(FaultMode.CUT_WATCH, after_events=after_events, abrupt=abrupt)
        return self._rule(fault, rate, ("watch",), resources, times)

    @property
    def outage(self) -> bool:
        return self._outage

    @outage.setter
    def outage(self, on: bool) -> None:
        self._outage = on

    # Deciding ------------------------------------------------------------------------------------

    def decide(self, request: RequestInfo) -> Fault | None:
        """The fault to inject into this request, if any (consumes one use of a ``times`` rule)."""
        if self._outage:
            return Fault(FaultMode.DROP, message="outage")
        if not self._rules:
            return None
        with self._lock:
            for rule in self._rules:
                left = self._left.get(id(rule), 0)
                if left == 0 or not rule.matches(request):
                    continue
                if rule.rate < 1.0 and self._random.random() >= rule.rate:
                    continue
                if left is not None:
                    self._left[id(rule)] = left - 1
                self.injected.append(Injection(rule.fault.mode, request.verb, request.path))
                return rule.fault
        return None
