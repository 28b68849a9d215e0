"""Failure diagnosis: from event, pod-status and log text to known failure categories.

The categories are data (``gpuconf/data/diagnoses.yaml``): each names regexes on the stable core of
a real message, an explanation and a remediation. Real messages differ across containerd 1.x/2.x,
CRI-O, Docker, runc and Kubernetes versions only in their wrappers, so the patterns match the core
and ``tests/fixtures/diagnose/`` keeps the real variants.

``diagnose(text)`` never guesses: text no pattern recognises gives an empty list. Results come most
specific first (the order of the data file), one per category, and a generic category (e.g. "an OCI
hook failed") is dropped when a category that explains it (e.g. "requirement unsatisfied") matched
the same input. ``closest(text)`` names the categories whose wording the unrecognised text shares
most, as pointers for the reader, never as a cause.

nvidia-smi and nccl-tests output inside the text is read by the parsers (:mod:`gpuconf.tool_outputs`):
a table showing a MIG mode change pending (``Enabled*``) is diagnosed as such, and a requirement error
next to the node's nvidia-smi gets the driver's CUDA and the compatibility rule that applies.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

from gpuconf.compat import tables
from gpuconf.compat.versions import VersionError, parse_cuda, parse_driver

__all__ = ["Category", "Diagnosis", "categories", "closest", "diagnose", "diagnose_pod", "pod_texts"]

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
    events`` output, a log, nvidia-smi or nccl-tests output), most specific first; ``[]`` when
    nothing is recognised."""
    from gpuconf.tool_outputs import read_outputs

    text = text.replace("\r\n", "\n")
    found = [d for d in (_match(c, text) for c in categories()) if d is not None]
    found = _from_outputs(found, read_outputs(text))
    ids = {d.category for d in found}
    by_id = {c.id: c for c in categories()}
    order = {c.id: n for n, c in enumerate(categories())}
    found.sort(key=lambda d: order[d.category])
    explained = {s for i in ids for s in by_id[i].supersedes}
    return [d for d in found if not (by_id[d.category].superseded_by & ids) and d.category not in explained]


def _diagnosis_of(category_id: str, excerpt: str, facts: dict[str, str]) -> Diagnosis:
    c = next(c for c in categories() if c.id == category_id)
    return Diagnosis(c.id, c.title, excerpt, facts, c.explanation, c.remediation, c.checks)


def _compat_rule(required: str, driver: str, cuda: str) -> str | None:
    """Which CUDA rule decides an image needing CUDA ``required`` on a node whose nvidia-smi shows
    ``driver`` / ``cuda``, in words; None when a version does not parse."""
    try:
        want, have, drv = parse_cuda(required).major_minor, parse_cuda(cuda).major_minor, parse_driver(driver)
    except VersionError:
        return None
    if have >= want:
        return (f"the driver supports CUDA {have} natively, so CUDA {want} is not what failed: another factor of the "
                "requirement (brand, driver branch, arch) or another node")
    baseline = tables.minor_version_baseline(want.major)
    if have.major == want.major and baseline is not None and drv >= baseline:
        return (f"minor-version compatibility: CUDA {want} on a CUDA {have} driver runs where the requirement is not "
                "checked (CDI / jit-cdi), except APIs newer than the driver (36) and PTX JIT (222); with cuda-compat "
                "loaded on a GeForce it fails with 804")
    return (f"CUDA {want} needs a newer driver than this CUDA {have} one: without the check it fails at CUDA "
            "initialisation with 35 unless cuda-compat carries it on a data-center GPU of a supported branch")


def _from_outputs(found: list[Diagnosis], outputs: Sequence[Any]) -> list[Diagnosis]:
    """What the parsed tool outputs add: a pending MIG mode change seen in an nvidia-smi table, and
    the node's driver next to a requirement error."""
    ids = {d.category for d in found}
    smi = [o for o in outputs if o.kind == "nvidia-smi" and o.error is None and "driver" in o.facts]
    for o in smi:
        if "mig_pending_gpus" in o.facts and "mig-mode-change-pending" not in ids:
            pending = (ln.strip() for ln in o.text.splitlines() if re.search(r"\b(?:Enabled|Disabled)\*", ln))
            line = next(pending, o.summary)
            found.append(_diagnosis_of("mig-mode-change-pending", line, {"gpus": o.facts["mig_pending_gpus"]}))
            ids.add("mig-mode-change-pending")
    node = next((o for o in smi if "cuda" in o.facts), None)
    if node is None:
        return found
    out = []
    for d in found:
        required = d.facts.get("required_cuda")
        if d.category == "requirement-unsatisfied" and required:
            facts = dict(d.facts, node_driver=node.facts["driver"], node_cuda=node.facts["cuda"])
            rule = _compat_rule(required, node.facts["driver"], node.facts["cuda"])
            if rule:
                facts["compat_rule"] = rule
            d = replace(d, facts=facts)
        out.append(d)
    return out


# --- near misses ----------------------------------------------------------------------------

#: Words too common in GPU failure text to say anything about a category.
_STOP = frozenset({
    "error", "errors", "failed", "failure", "fails", "with", "from", "that", "this", "there", "their",
    "cannot", "could", "unable", "node", "nodes", "container", "pod", "pods", "gpu", "gpus", "nvidia",
    "warning", "unknown", "found", "when", "then", "than", "have", "been", "does", "into", "only",
    "the", "and", "for", "not", "was", "are", "has", "any", "all", "can", "its", "one", "per", "out",
})
_WORD = re.compile(r"[a-z][a-z0-9]{2,}")
_REGEX_SYNTAX = re.compile(r"\\[A-Za-z]|\(\?P<\w+>|\(\?[:=!<]+|\[\^?[^\]]*\]|\{[^}]*\}")


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


@cache
def _vocabulary() -> tuple[tuple[Category, dict[str, float]], ...]:
    """Each category's distinctive words (title and the literal text of its patterns), weighted by
    how few categories use them (inverse document frequency)."""
    bags = []
    for c in categories():
        named = _words(c.id.replace("-", " ") + " " + c.title)
        bags.append((c, named, named | _words(" ".join(_REGEX_SYNTAX.sub(" ", p.pattern) for p in c.patterns))))
    df = Counter(w for _, _, bag in bags for w in bag)
    n = len(bags)
    # a word in the category's name or title counts twice: it says what the category is about
    return tuple((c, {w: math.log(n / df[w]) * (2 if w in named else 1) for w in bag if df[w] < n})
                 for c, named, bag in bags)


def closest(text: str, limit: int = 3) -> list[Category]:
    """The categories whose wording shares most with ``text`` (at most ``limit``, best first); ``[]``
    when no category shares a distinctive word. For text ``diagnose`` did not recognise: these are
    where to look, not a diagnosis."""
    words = _words(text)
    scored = []
    for category, weights in _vocabulary():
        score = sum(weights.get(w, 0.0) for w in words)
        if score > 0:
            scored.append((score, category))
    scored.sort(key=lambda sc: -sc[0])
    return [c for _, c in scored[:limit]]


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
