"""What became of one probe pod, as frozen data, and the pure decisions a campaign makes on pods.

Pure: inputs are the Pod and Event objects as the API serves them (camelCase dicts) and the logs
already read; nothing here calls the API.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = ["TERMINAL_WAITING_REASONS", "ContainerOutcome", "PodEvent", "PodOutcome", "PodTimings", "finished_reason",
           "is_unschedulable", "make_outcome", "make_rejected_outcome", "parse_time"]

Obj = Mapping[str, Any]

#: Waiting reasons after which a ``restartPolicy: Never`` probe will not run without someone
#: changing something (kubelet's container state reasons; ErrImagePull counts: the probe images are
#: public and pinned, so a failed pull is the observation, not a hiccup to wait out).
TERMINAL_WAITING_REASONS = frozenset({
    "CreateContainerConfigError", "CreateContainerError", "CrashLoopBackOff", "ErrImageNeverPull", "ErrImagePull",
    "ImagePullBackOff", "InvalidImageName", "RunContainerError",
})


def parse_time(value: Any) -> datetime | None:
    """RFC 3339 (``2025-01-01T00:00:00Z``, with or without fractions) to an aware datetime."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass(frozen=True)
class ContainerOutcome:
    name: str
    init: bool
    image: str
    state: str  # waiting | running | terminated | unknown (no status yet)
    reason: str | None
    exit_code: int | None
    message: str | None
    restart_count: int
    started: datetime | None
    finished: datetime | None


@dataclass(frozen=True)
class PodEvent:
    type: str
    reason: str
    message: str
    count: int
    reporting_component: str
    first_timestamp: datetime | None
    last_timestamp: datetime | None


@dataclass(frozen=True)
class PodTimings:
    """From the pod's status and its events; None where the pod never got there."""

    created: datetime | None
    scheduled: datetime | None
    pulled: datetime | None  # the last image pulled (or found present)
    started: datetime | None  # the first app container started
    finished: datetime | None  # the last app container finished


@dataclass(frozen=True)
class PodOutcome:
    """Everything the campaign observed about one pod. ``reason``/``exit_code``/``message`` sum up
    why it ended where it did (the failing init container, a terminal waiting reason, the
    FailedScheduling message, the app container's exit); ``logs`` hold what was read, bounded, and
    ``missing_logs`` why a container has none (never started, unreadable): never a guess."""

    name: str
    node: str | None
    phase: str  # Pending Running Succeeded Failed Unknown, or Rejected (the API refused to create it)
    reason: str | None
    exit_code: int | None
    message: str | None
    containers: tuple[ContainerOutcome, ...]
    logs: Mapping[str, str]
    missing_logs: Mapping[str, str]
    truncated_logs: frozenset[str]
    events: tuple[PodEvent, ...]
    timings: PodTimings
    timed_out: bool
    unschedulable: bool
    #: With ``run_campaign(record_claims=True)``: the pod's ResourceClaims as last seen allocated
    #: (raw objects); ``claims_error`` says why that view may be incomplete (the watch broke).
    claims: tuple[Mapping[str, Any], ...] = ()
    claims_error: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.phase == "Succeeded"

    def container(self, name: str) -> ContainerOutcome:
        for c in self.containers:
            if c.name == name:
                return c
        raise KeyError(f"pod {self.name} has no container {name!r}")

    def event_reasons(self) -> list[str]:
        return [e.reason for e in self.events]


# -------------------------------------------------------------------------------------------------
# Decisions on a pod while the campaign follows it


def _statuses(pod: Obj) -> list[tuple[bool, Obj]]:
    status = pod.get("status") or {}
    return ([(True, s) for s in status.get("initContainerStatuses") or ()]
            + [(False, s) for s in status.get("containerStatuses") or ()])


def finished_reason(pod: Obj) -> str | None:
    """Why following this pod can stop now (its phase, or a terminal waiting reason), else None."""
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        return str(phase)
    for _, s in _statuses(pod):
        reason = ((s.get("state") or {}).get("waiting") or {}).get("reason")
        if reason in TERMINAL_WAITING_REASONS:
            return str(reason)
    return None


def is_unschedulable(pod: Obj) -> bool:
    """The scheduler has said it cannot place the pod (PodScheduled=False, reason Unschedulable)."""
    status = pod.get("status") or {}
    return not (pod.get("spec") or {}).get("nodeName") and any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in status.get("conditions") or ())


# -------------------------------------------------------------------------------------------------
# Building the outcome


def _container(init: bool, spec: Obj, status: Obj | None) -> ContainerOutcome:
    if status is None:
        return ContainerOutcome(str(spec.get("name")), init, str(spec.get("image", "")), "unknown", None, None, None,
                                0, None, None)
    state = status.get("state") or {}
    kind = next((k for k in ("terminated", "running", "waiting") if state.get(k) is not None), "unknown")
    detail = state.get(kind) or {}
    return ContainerOutcome(
        name=str(status.get("name", spec.get("name"))), init=init,
        image=str(status.get("image") or spec.get("image", "")), state=kind, reason=detail.get("reason"),
        exit_code=int(detail["exitCode"]) if kind == "terminated" and detail.get("exitCode") is not None else None,
        message=detail.get("message"), restart_count=int(status.get("restartCount") or 0),
        started=parse_time(detail.get("startedAt")), finished=parse_time(detail.get("finishedAt")))


def _containers(pod: Obj) -> tuple[ContainerOutcome, ...]:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    out: list[ContainerOutcome] = []
    for init, specs, statuses in ((True, spec.get("initContainers"), status.get("initContainerStatuses")),
                                  (False, spec.get("containers"), status.get("containerStatuses"))):
        by_name = {s.get("name"): s for s in statuses or ()}
        out.extend(_container(init, c, by_name.get(c.get("name"))) for c in specs or ())
    return tuple(out)


def _event(obj: Obj) -> PodEvent:
    series = obj.get("series") or {}
    last = (parse_time(obj.get("lastTimestamp")) or parse_time(series.get("lastObservedTime"))
            or parse_time(obj.get("eventTime")) or parse_time(obj.get("firstTimestamp")))
    first = parse_time(obj.get("firstTimestamp")) or parse_time(obj.get("eventTime")) or last
    source = obj.get("source") or {}
    return PodEvent(
        type=str(obj.get("type", "")), reason=str(obj.get("reason", "")), message=str(obj.get("message", "")),
        count=int(obj.get("count") or series.get("count") or 1),
        reporting_component=str(obj.get("reportingComponent") or source.get("component") or ""),
        first_timestamp=first, last_timestamp=last)


def _timings(pod: Obj, containers: tuple[ContainerOutcome, ...], events: tuple[PodEvent, ...]) -> PodTimings:
    def at(reason: str, pick: Any) -> datetime | None:
        times = [e.first_timestamp for e in events if e.reason == reason and e.first_timestamp]
        return pick(times) if times else None

    conditions = {c.get("type"): c for c in (pod.get("status") or {}).get("conditions") or ()}
    scheduled_condition = conditions.get("PodScheduled") or {}
    scheduled = at("Scheduled", min) or (parse_time(scheduled_condition.get("lastTransitionTime"))
                                         if scheduled_condition.get("status") == "True" else None)
    apps = [c for c in containers if not c.init]
    starts = [c.started for c in apps if c.started]
    ends = [c.finished for c in apps if c.finished]
    return PodTimings(
        created=parse_time((pod.get("metadata") or {}).get("creationTimestamp")), scheduled=scheduled,
        pulled=at("Pulled", max), started=min(starts) if starts else at("Started", max),
        finished=max(ends) if ends and len(ends) == len(apps) else None)


def _summary(pod: Obj, containers: tuple[ContainerOutcome, ...], events: tuple[PodEvent, ...],
             unschedulable: bool) -> tuple[str | None, int | None, str | None]:
    """(reason, exit code, message): the first thing that explains where the pod ended."""
    status = pod.get("status") or {}
    if unschedulable:
        failed = [e for e in events if e.reason == "FailedScheduling"]
        condition: Obj = next((c for c in status.get("conditions") or () if c.get("type") == "PodScheduled"), {})
        return "Unschedulable", None, failed[-1].message if failed else condition.get("message")
    for c in containers:
        if c.init and c.state == "terminated" and c.exit_code:
            return f"Init:{c.reason or 'Error'}", c.exit_code, c.message
    for c in containers:
        if c.state == "waiting" and c.reason in TERMINAL_WAITING_REASONS:
            return (f"Init:{c.reason}" if c.init else c.reason), None, c.message
    if status.get("reason"):  # DeadlineExceeded, Evicted, ...
        return str(status["reason"]), None, status.get("message")
    apps = [c for c in containers if not c.init and c.state == "terminated"]
    main = next((c for c in apps if c.exit_code), apps[0] if apps else None)
    if main is not None:
        return main.reason, main.exit_code, main.message
    return None, None, status.get("message")


_EPOCH = datetime.min.replace(tzinfo=UTC)


def _ordered(events: Iterable[Obj]) -> tuple[PodEvent, ...]:
    """By first time, then by resourceVersion (timestamps have one-second resolution)."""
    def key(pair: tuple[PodEvent, Obj]) -> tuple[datetime, int]:
        rv = str((pair[1].get("metadata") or {}).get("resourceVersion") or "0")
        return pair[0].first_timestamp or _EPOCH, int(rv) if rv.isdigit() else 0

    return tuple(e for e, _ in sorted(((_event(o), o) for o in events), key=key))


def make_outcome(pod: Obj, events: Iterable[Obj], *, logs: Mapping[str, str], missing_logs: Mapping[str, str],
                 truncated_logs: Iterable[str] = (), timed_out: bool = False) -> PodOutcome:
    """Pure: one pod's outcome from its last observed object, its events, and the logs read."""
    containers = _containers(pod)
    pod_events = _ordered(events)
    unschedulable = is_unschedulable(pod)
    reason, exit_code, message = _summary(pod, containers, pod_events, unschedulable)
    return PodOutcome(
        name=str((pod.get("metadata") or {}).get("name", "")), node=(pod.get("spec") or {}).get("nodeName"),
        phase=str((pod.get("status") or {}).get("phase") or "Pending"), reason=reason, exit_code=exit_code,
        message=message, containers=containers, logs=dict(logs), missing_logs=dict(missing_logs),
        truncated_logs=frozenset(truncated_logs), events=pod_events, timings=_timings(pod, containers, pod_events),
        timed_out=timed_out, unschedulable=unschedulable)


def make_rejected_outcome(name: str, reason: str, message: str) -> PodOutcome:
    """A pod the API server refused to create (admission, quota, validation): an observation too."""
    return PodOutcome(name=name, node=None, phase="Rejected", reason=reason, exit_code=None, message=message,
                      containers=(), logs={}, missing_logs={}, truncated_logs=frozenset(), events=(),
                      timings=PodTimings(None, None, None, None, None), timed_out=False, unschedulable=False)
