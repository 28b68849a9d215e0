"""Failure diagnosis: from event, pod-status and log text to known failure categories.

The categories are data (``gpuconf/data/diagnoses.yaml``): each names regexes on the stable core of
a real message, an explanation and a remediation. Real messages differ across containerd 1.x/2.x,
CRI-O, Docker, runc and Kubernetes versions only in their wrappers, so the patterns match the core
and ``tests/fixtures/diagnose/`` keeps the real variants.

``diagnose(text)`` never guesses: text no pattern recognises gives an empty list. Results come most
specific first (the order of the data file), one per category, and a generic category (e.g. "an OCI
hook failed") is dropped when a category that explains it (e.g. "requirement unsatisfied") matched
the same input.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from gpuconf.compat import tables

__all__ = ["Category", "Diagnosis", "categories", "diagnose", "diagnose_pod", "pod_texts"]

#: An excerpt longer than this is cut to a window around the match.
_MAX_EXCERPT = 400


@dataclass(frozen=True)
class Category:
    id: str
    title: str
    stage: str
    patterns: tuple[re.Pattern[str], ...]
    extract: tuple[re.Pattern[str], ...]
    superseded_by: frozenset[str]
    supersedes: frozenset[str]  # the inverse: categories this one explains, dropped when it matched
    cuda_error: int | None
    explanation: str
    remediation: str
    checks: tuple[str, ...]
    sources: tuple[str, ...]


@dataclass(frozen=True)
class Diagnosis:
    """One recognised failure. ``excerpt`` is the line the pattern matched; ``facts`` what the
    pattern's named groups (and the category's extract patterns) pulled out of the input."""

    category: str
    title: str
    excerpt: str
    facts: Mapping[str, str] = field(default_factory=dict)
    explanation: str = ""
    remediation: str = ""
    checks: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"category": self.category, "title": self.title, "excerpt": self.excerpt,
                "facts": dict(self.facts), "explanation": self.explanation,
                "remediation": self.remediation, "checks": list(self.checks)}


def _compile(patterns: Iterable[str], where: str) -> tuple[re.Pattern[str], ...]:
    out = []
    for p in patterns:
        try:
            out.append(re.compile(p, re.MULTILINE))
        except re.error as exc:  # a data error: say where
            raise ValueError(f"gpuconf/data/diagnoses.yaml: {where}: bad regex {p!r}: {exc}") from exc
    return tuple(out)


@cache
def categories() -> tuple[Category, ...]:
    """The categories of ``diagnoses.yaml``, most specific first."""
    out: list[Category] = []
    for row in tables.load("diagnoses")["categories"]:
        cid = str(row["id"])
        out.append(Category(
            id=cid, title=str(row["title"]), stage=str(row["stage"]),
            patterns=_compile(row["patterns"], cid), extract=_compile(row.get("extract", ()), cid),
            superseded_by=frozenset(row.get("superseded_by", ())), supersedes=frozenset(row.get("supersedes", ())),
            cuda_error=int(row["cuda_error"]) if "cuda_error" in row else None,
            explanation=" ".join(str(row["explanation"]).split()),
            remediation=" ".join(str(row["remediation"]).split()),
            checks=tuple(row.get("checks", ())), sources=tuple(row.get("sources", ())),
        ))
    return tuple(out)


def _excerpt(text: str, start: int, end: int) -> str:
    """The line(s) holding text[start:end], stripped; a long line is cut around the match."""
    first = text.rfind("\n", 0, start) + 1
    last = text.find("\n", end)
    line_start, line_end = first, len(text) if last < 0 else last
    line = text[line_start:line_end].strip()
    if len(line) <= _MAX_EXCERPT:
        return line
    lo = max(line_start, start - _MAX_EXCERPT // 4)
    hi = min(line_end, max(end, lo + _MAX_EXCERPT // 2) + _MAX_EXCERPT // 4)
    return ("…" if lo > line_start else "") + text[lo:hi].strip() + ("…" if hi < line_end else "")


def _facts(match: re.Match[str]) -> dict[str, str]:
    return {k: v for k, v in match.groupdict().items() if v is not None}


def _match(category: Category, text: str) -> Diagnosis | None:
    for pattern in category.patterns:
        m = pattern.search(text)
        if m is None:
            continue
        facts = _facts(m)
        for extra in category.extract:
            e = extra.search(text)
            if e is not None:
                for k, v in _facts(e).items():
                    facts.setdefault(k, v)
        if category.cuda_error is not None:
            facts.setdefault("cuda_error", str(category.cuda_error))
            facts.setdefault("cuda_error_name", tables.cuda_error(category.cuda_error).name)
        return Diagnosis(category.id, category.title, _excerpt(text, m.start(), m.end()), facts,
                         category.explanation, category.remediation, category.checks)
    return None


def diagnose(text: str) -> list[Diagnosis]:
    """Every known failure in ``text`` (a message, ``kubectl describe pod`` or ``kubectl get
    events`` output, a log), most specific first; ``[]`` when nothing is recognised."""
    text = text.replace("\r\n", "\n")
    found = [d for d in (_match(c, text) for c in categories()) if d is not None]
    ids = {d.category for d in found}
    by_id = {c.id: c for c in categories()}
    explained = {s for i in ids for s in by_id[i].supersedes}
    return [d for d in found if not (by_id[d.category].superseded_by & ids) and d.category not in explained]


# --- pods -----------------------------------------------------------------------------------


def _state_texts(status: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for key in ("state", "lastState"):
        state = status.get(key) or {}
        if not isinstance(state, Mapping):
            continue
        for detail in state.values():  # waiting / running / terminated
            if isinstance(detail, Mapping):
                out.extend(str(detail[k]) for k in ("reason", "message") if detail.get(k))
    return out


def pod_texts(pod_status: Mapping[str, Any], events: Sequence[Mapping[str, Any]] = (),
              logs: str = "") -> list[str]:
    """The texts of a pod that can carry a failure message, one per line or block: the pod's
    reason/message, its conditions' messages, every (init/ephemeral) container's state and last
    state reasons and messages, the events' reasons and messages (core/v1 ``message`` or
    events.k8s.io ``note``), then the logs. ``pod_status`` is the pod's ``status`` or the whole pod."""
    status: Mapping[str, Any] = pod_status
    inner = pod_status.get("status")
    if isinstance(inner, Mapping) and ("metadata" in pod_status or "spec" in pod_status):
        status = inner
    out: list[str] = [str(status[k]) for k in ("reason", "message") if status.get(k)]
    for cond in status.get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("message"):
            out.append(str(cond["message"]))
    for key in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"):
        for cs in status.get(key) or ():
            if isinstance(cs, Mapping):
                out.extend(_state_texts(cs))
    for ev in events:
        reason, message = ev.get("reason"), ev.get("message") or ev.get("note")
        if message:
            out.append(f"{reason}: {message}" if reason else str(message))
    if logs:
        out.append(logs)
    return out


def diagnose_pod(pod_status: Mapping[str, Any], events: Sequence[Mapping[str, Any]] = (),
                 logs: str = "") -> list[Diagnosis]:
    """``diagnose`` over everything a pod says about itself (see ``pod_texts``)."""
    return diagnose("\n".join(pod_texts(pod_status, events, logs)))
