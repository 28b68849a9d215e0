"""The cuda-probe's ``--rendezvous`` on a simulated cluster (probes/cuda-probe/README.md, "rendezvous").

A probe container started with ``GPUCONF_PROBE_RENDEZVOUS`` (or ``--rendezvous``) joins its
namespace's :class:`Meetings` once its checks are done, under the DNS names its pod gets from
``hostname`` + ``subdomain`` when a headless Service of that name selects it
(``<hostname>.<subdomain>[.<namespace>[.svc[.cluster.local]]]``). It stays running until the
protocol of the real probe decides:

* it reads peer P's line at its first retry (every 200 ms of real time) after P listens, while
  both are still waiting; a name no running probe answers to is "name resolution failed", and on a
  node whose pod-to-pod traffic is dropped (fault pod-traffic-blocked) every connection times out;
* it acknowledges its peers once it has read all their lines, and releases when it has read every
  line and every peer acknowledged its own (``met``), or when its wait ends (``met`` false, with the
  reason the real probe gives).

The wait is the probe's ``--rendezvous-wait`` divided by the timings' speed, but never shorter than
``floor_seconds`` of real time: the pods of a group are created by separate API calls whose latency
is not scaled. Times are the agents' wall clock; the overlap and held times reported are the
simulated probe's: its checks take ``work_ms`` (nominal) before it listens, which its peers' lines
say it has held.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Outcome: (exit code, output, finish time), how a waiting probe ends; _value: a flag's value
from gpuconf.sim.nccl_world import Outcome
from gpuconf.sim.nccl_world import _value as _flag

__all__ = ["DEFAULT_PORT", "DEFAULT_WAIT_S", "Meetings", "Outcome", "Request", "Ticket", "request"]

DEFAULT_PORT = 7171
DEFAULT_WAIT_S = 90.0
_RETRY_S = 0.2  # the probe's kRendezvousRetryMs
_MAGIC_ENV = "GPUCONF_PROBE_RENDEZVOUS"

Obj = dict[str, Any]
#: (namespace, name) -> the Service, or None: how a meeting finds the headless Service behind a name
ServiceLookup = Callable[[str, str], Obj | None]


@dataclass(frozen=True)
class Request:
    """A probe's rendezvous settings: its peers as given, its port and its wait (seconds)."""

    peers: tuple[str, ...]
    port: int = DEFAULT_PORT
    wait_s: float = DEFAULT_WAIT_S


def request(env: Mapping[str, str], args: Sequence[str]) -> Request | None:
    """The rendezvous a cuda-probe command line and environment ask for (the flags win), or None.
    Raises ValueError with the probe's usage message where a setting is malformed."""
    peers = _flag(args, "--rendezvous")
    peers = peers if peers is not None else env.get(_MAGIC_ENV) or None
    if peers is None:
        return None
    port_text = _flag(args, "--rendezvous-port") or env.get(f"{_MAGIC_ENV}_PORT") or str(DEFAULT_PORT)
    wait_text = _flag(args, "--rendezvous-wait") or env.get(f"{_MAGIC_ENV}_WAIT") or str(DEFAULT_WAIT_S)
    if not port_text.isdigit() or not 1025 <= int(port_text) <= 65535:
        raise ValueError(f"invalid --rendezvous-port '{port_text}': expected a port from 1025 to 65535")
    try:
        wait = float(wait_text)
    except ValueError:
        wait = -1.0
    if not 0 < wait <= 3600 or not math.isfinite(wait):
        raise ValueError(f"invalid --rendezvous-wait '{wait_text}': expected seconds > 0 and <= 3600")
    items = peers.split(",")
    if any(not p.split(":")[0] for p in items):
        raise ValueError(f"invalid --rendezvous '{peers}': empty peer in '{peers}'")
    return Request(tuple(items), int(port_text), wait)


@dataclass
class _Member:
    req: Request
    namespace: str
    pod: str
    hostname: str
    subdomain: str | None
    labels: Mapping[str, str]
    node: str
    blocked: bool  # the node drops pod-to-pod traffic (pod-traffic-blocked)
    listening: float  # real clock: when its checks were done and it answered connections
    deadline: float
    doc: Obj
    code: int
    cuda: tuple[str, ...]
    nvml: tuple[str, ...]
    done: Outcome | None = None

    @property
    def name(self) -> str:
        return f"{self.hostname}:{self.req.port}"


#: One probe's place in its namespace's meetings (kept by its container until it is done).
Ticket = _Member


@dataclass(kw_only=True)
class Meetings:
    """Every cuda-probe rendezvous of one simulated cluster: the probes waiting or done, by namespace,
    and the headless Services found for their names."""

    speed: float
    work_ms: float  # how long the probe's checks take (nominal) before it listens
    floor_seconds: float = 15.0
    poll_seconds: float = 0.05
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _spaces: dict[str, list[_Member]] = field(default_factory=dict, repr=False)
    _services: dict[tuple[str, str], Obj] = field(default_factory=dict, repr=False)

    def join(self, req: Request, *, namespace: str, pod: str, hostname: str, subdomain: str | None,
             labels: Mapping[str, str], node: str, blocked: bool, code: int, output: str, now: float) -> Ticket:
        """A probe whose checks ended at ``now`` (with exit ``code`` and document ``output``) starts
        listening and reaching its peers."""
        doc = json.loads(output)
        cuda = tuple(str(d["uuid"]) for d in doc.get("devices") or () if d.get("uuid"))
        nvml_doc = doc.get("nvml") or {}
        nvml = tuple(str(g["uuid"]) for g in (nvml_doc.get("gpus") or () if nvml_doc.get("available") else ())
                     if g.get("uuid"))
        window = max(req.wait_s / self.speed, self.floor_seconds)
        me = _Member(req, namespace, pod, hostname, subdomain, dict(labels), node, blocked, now, now + window, doc,
                     code, cuda, nvml)
        with self._lock:
            members = self._spaces.setdefault(namespace, [])
            members[:] = [m for m in members if m.pod != pod] + [me]
        return me

    def poll(self, ticket: Ticket, now: float, services: ServiceLookup) -> Outcome | float:
        """The probe's outcome once it is decided, else the time to ask again."""
        with self._lock:
            me = ticket
            if me.done is None:
                decided = self._decide(me, now, services)
                if isinstance(decided, float):
                    return decided
                me.done = decided
            return me.done

    # The protocol -----------------------------------------------------------------------------

    def _resolve(self, me: _Member, peer: str, services: ServiceLookup) -> _Member | None:
        """The probe answering ``peer`` (HOST or HOST:PORT) for ``me``: a pod of its namespace whose
        hostname and subdomain the name spells, selected by the headless Service of that name."""
        host, _, port = peer.partition(":")
        parts = host.split(".")
        if len(parts) < 2:
            return None
        hostname, subdomain, rest = parts[0], parts[1], parts[2:]
        if rest and rest not in ([me.namespace], [me.namespace, "svc"], [me.namespace, "svc", "cluster", "local"]):
            return None
        wanted = int(port) if port.isdigit() else me.req.port
        found = next((m for m in self._spaces[me.namespace]
                      if (m.hostname, m.subdomain, m.req.port) == (hostname, subdomain, wanted)), None)
        if found is None:
            return None
        key = (me.namespace, subdomain)
        if key not in self._services:  # a headless Service, once found, is kept (the run creates it first)
            service = services(*key)
            if service is None:
                return None
            self._services[key] = service
        return found if _selects(self._services[key], found.labels) else None

    def _read_at(self, me: _Member, peer: _Member) -> float | None:
        """When ``me`` read ``peer``'s line: at its first retry after the peer listened (at once when
        the peer was there first), while both still waited; None: not (yet)."""
        if me.blocked or peer.blocked:
            return None
        at = me.listening if peer.listening <= me.listening else \
            me.listening + math.ceil((peer.listening - me.listening) / _RETRY_S) * _RETRY_S
        return at if at <= min(me.deadline, peer.deadline) else None

    def _all_lines(self, me: _Member, services: ServiceLookup) -> float | None:
        peers = [self._resolve(me, p, services) for p in me.req.peers]
        if any(p is None for p in peers):
            return None
        times = [self._read_at(me, p) for p in peers if p is not None]
        read = [t for t in times if t is not None]
        return max(read, default=me.listening) if len(read) == len(times) else None

    def _decide(self, me: _Member, now: float, services: ServiceLookup) -> Outcome | float:
        peers = [self._resolve(me, p, services) for p in me.req.peers]
        lines = self._all_lines(me, services)
        acks = [self._all_lines(p, services) if p is not None else None for p in peers]
        release = max([lines, *acks]) if lines is not None and all(a is not None for a in acks) else None  # type: ignore[type-var]
        if release is not None and release <= me.deadline:
            return self._done(me, peers, lines, True, None, release)
        if now < me.deadline:
            return min(me.deadline, now + self.poll_seconds)
        return self._done(me, peers, lines, False, self._why(me, peers, services), me.deadline)

    def _why(self, me: _Member, peers: Sequence[_Member | None], services: ServiceLookup) -> str:
        wait = f"{me.req.wait_s:g} s"
        missing = []
        for spec, p in zip(me.req.peers, peers, strict=True):
            if p is not None and self._read_at(me, p) is not None:
                continue
            error = ("Connection timed out" if me.blocked or (p is not None and p.blocked)
                     else "name resolution failed: Name or service not known" if p is None
                     else "Connection refused")
            missing.append(f"peer {spec} did not answer within {wait}: {error}")
        if not missing:
            unacked = sum(1 for p in peers if p is None or (t := self._all_lines(p, services)) is None
                          or t > me.deadline)
            missing.append(f"{unacked} of {len(peers)} peer(s) did not read this probe's line within {wait}")
        return "; ".join(missing)

    def _done(self, me: _Member, peers: Sequence[_Member | None], lines: float | None, met: bool, reason: str | None,
              at: float) -> Outcome:
        def held(p: _Member, when: float) -> float:
            return round(self.work_ms + (when - p.listening) * 1000, 3)

        peer_lines = []
        starts = [me.listening]
        for spec, p in zip(me.req.peers, peers, strict=True):
            read = self._read_at(me, p) if p is not None else None
            if p is None or read is None:
                error = (reason or "").split(f"peer {spec} did not answer within {me.req.wait_s:g} s: ")
                peer_lines.append({"peer": spec, "answered": False, "attempts": _attempts(me, at),
                                   "error": error[1].split("; ")[0] if len(error) > 1 else None})
                continue
            starts.append(p.listening)
            peer_lines.append({"peer": spec, "answered": True, "attempts": 1 + round((read - me.listening) / _RETRY_S),
                               "name": p.name, "held_ms": held(p, read),
                               "read_at_ms": held(me, read), "cuda_uuids": list(p.cuda), "nvml_uuids": list(p.nvml)})
        acked = [p.name for p in peers if p is not None and met]
        overlap = round(self.work_ms + ((lines or at) - max(starts)) * 1000, 3) if met else None
        doc = dict(me.doc)
        doc["rendezvous"] = {
            "peers": list(me.req.peers), "name": me.name, "port": me.req.port, "wait_s": me.req.wait_s,
            "cuda_uuids": list(me.cuda), "nvml_uuids": list(me.nvml), "peer_lines": peer_lines,
            "acknowledged_by": acked, "met": met, "waited_ms": round((at - me.listening) * 1000, 3),
            "overlap_ms": overlap, "reason": reason}
        return Outcome(me.code, json.dumps(doc, indent=2) + "\n", at)


def _attempts(me: _Member, at: float) -> int:
    return max(1, int((at - me.listening) / _RETRY_S))


def _selects(service: Obj | None, labels: Mapping[str, str]) -> bool:
    """Whether ``service`` is a headless Service whose selector picks a pod with ``labels`` and that
    publishes it before it is ready (the probe pods have no readiness probe)."""
    if service is None:
        return False
    spec = service.get("spec") or {}
    selector = spec.get("selector") or {}
    return (spec.get("clusterIP") == "None" and bool(spec.get("publishNotReadyAddresses")) and bool(selector)
            and all(labels.get(k) == v for k, v in selector.items()))
