"""API-level fault injection: what the fake API server does wrong, on purpose, and when.

The server asks :meth:`FaultPlan.decide` once per request, after routing and before doing any work.
A plan is a list of rules; the first rule that matches the request and fires wins. Modes:

* ``THROTTLE``: 429 TooManyRequests with a ``Retry-After`` header (API Priority and Fairness);
* ``SERVER_ERROR``: 500 InternalError (an etcd hiccup, an admission webhook timing out);
* ``DROP``: the connection is closed without an answer (a load balancer or apiserver restart);
* ``CUT_WATCH``: a watch stream ends after ``after_events`` events, cleanly (the last chunk is sent,
  as when the server's watch timeout fires) or abruptly (the socket is shut mid-stream).

A rule fires with probability ``rate`` from a generator seeded by the plan, so a run is repeatable
when requests arrive in the same order; ``times`` limits it to the next N matching requests, and
``exempt_user_agents`` spares the clients it names (the simulator's own node agents, which stand for
the cluster's kubelets: faults are for the client under test). :meth:`FaultPlan.steady` is the
plan of ``gpuconf sim serve --api-faults RATE``: every mode at once, at a steady total rate. The
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

__all__ = ["AGENT_USER_AGENT", "Fault", "FaultMode", "FaultPlan", "FaultRule", "Injection", "RequestInfo"]

#: The User-Agent of the simulated node agents' API client (:class:`gpuconf.sim.cluster.SimulatedCluster`):
#: they play the kubelets, device plugins and DRA driver, so a steady plan leaves their requests alone.
AGENT_USER_AGENT = "gpuconf-sim/node-agents"


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
    user_agent: str = ""  # the client's User-Agent header ("" when absent)

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
    retry_after: int = 1  # THROTTLE: seconds in Retry-After
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
    exempt_user_agents: frozenset[str] = frozenset()

    def matches(self, request: RequestInfo) -> bool:
        if request.user_agent and request.user_agent in self.exempt_user_agents:
            return False
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
    abrupt: bool = False  # CUT_WATCH: the socket was shut mid-stream


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
              times: int | None, exempt: Iterable[str] = ()) -> FaultRule:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate must be within [0, 1], got {rate}")
        return self.add(FaultRule(fault, rate, frozenset(verbs), frozenset(resources), times, frozenset(exempt)))

    def steady(self, rate: float, *, watch_cuts: float | None = None,
               exempt_user_agents: Iterable[str] = (AGENT_USER_AGENT,), retry_after: int = 1) -> list[FaultRule]:
        """Faults at a steady ``rate`` of the requests of every client but ``exempt_user_agents``:
        a third each 429 (``Retry-After: retry_after``), 500 and dropped connections; a watch that
        escapes those is then cut at ``watch_cuts`` (default ``rate``), half cleanly and half
        abruptly, after one event (a run makes few watches, and real servers end them often).
        The rules' rates are conditional on the earlier rules not firing, so the totals are as given."""
        cuts = rate if watch_cuts is None else watch_cuts
        if not (0.0 <= rate < 1.0 and 0.0 <= cuts < 1.0):
            raise ValueError(f"rates must be within [0, 1), got {rate} and {cuts}")
        exempt = tuple(exempt_user_agents)
        share, taken, rules = rate / 3, 0.0, []
        for fault in (Fault(FaultMode.THROTTLE, retry_after=retry_after), Fault(FaultMode.SERVER_ERROR),
                      Fault(FaultMode.DROP)):
            rules.append(self._rule(fault, share / (1 - taken), (), (), None, exempt))
            taken += share
        clean, abrupt = Fault(FaultMode.CUT_WATCH, after_events=1), Fault(FaultMode.CUT_WATCH, after_events=1,
                                                                         abrupt=True)
        rules.append(self._rule(clean, cuts / 2, ("watch",), (), None, exempt))
        rules.append(self._rule(abrupt, cuts / 2 / (1 - cuts / 2), ("watch",), (), None, exempt))
        return rules

    def summary(self) -> dict[str, int]:
        """How many faults of each kind were injected so far, 0 for none: ``throttle``, ``server-error``,
        ``drop``, ``cut-watch`` (clean) and ``cut-watch-abrupt`` (an outage's drops are not counted)."""
        counts = {mode.value: 0 for mode in FaultMode} | {"cut-watch-abrupt": 0}
        with self._lock:
            for injection in self.injected:
                counts[f"{injection.mode.value}-abrupt" if injection.abrupt else injection.mode.value] += 1
        return counts

    def throttle(self, *, rate: float = 1.0, verbs: Iterable[str] = (), resources: Iterable[str] = (),
                 times: int | None = None, retry_after: int = 1,
                 exempt_user_agents: Iterable[str] = ()) -> FaultRule:
        """Answer 429 TooManyRequests with ``Retry-After: retry_after``."""
        return self._rule(Fault(FaultMode.THROTTLE, retry_after=retry_after), rate, verbs, resources, times,
                          exempt_user_agents)

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
                self.injected.append(Injection(rule.fault.mode, request.verb, request.path, rule.fault.abrupt))
                return rule.fault
        return None
