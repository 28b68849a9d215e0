"""Verdicts: the closed vocabulary every check answers in, with its evidence.

A check is a pure ``evaluate_*(facts) -> Verdict`` (style.md: thin hooks, pure decisions); suites
fetch the facts and act on the verdict; reports map outcomes to JUnit, JSON and the sign-off page.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from types import MappingProxyType
from typing import Any

from gpuconf import outcomes
from gpuconf.compat import tables

__all__ = ["Check", "Outcome", "Verdict", "check", "checks"]


class Outcome(enum.Enum):
    """A check's outcome; the words are gpuconf.outcomes' (one vocabulary for checks and reports)."""

    PASS = outcomes.PASS
    DEGRADED = outcomes.DEGRADED  # works, but not as declared or not at full strength
    FAIL = outcomes.FAIL
    NOT_TESTED = outcomes.NOT_TESTED  # the capability is absent or the check could not run; kind and reason say why


@dataclass(frozen=True)
class Check:
    """One entry of gpuconf/data/checks.yaml."""

    id: str
    title: str
    requirement: str
    severity: str  # fail | degraded: the outcome when the check does not hold
    remediation: str
    suite: str
    sources: tuple[str, ...] = ()
    #: What it judges: probe (pods launched on the node), node (what the node's own pods serve), api
    #: (API objects only); a node that takes no probes has its probe (and, NotReady, node) checks NOT TESTED.
    reads: str = "probe"
    #: An owner's findings: each tag a failing verdict of this check may carry in ``causes``, with what
    #: it means. Declared so that a dependant can name the findings it would report again.
    findings: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: A dependant's owners: for each check whose failure this check would report again, the findings
    #: of that owner that are this check's cause too (gpuconf.checks.probe_start.blocked_by folds this
    #: check behind an owner only for one of them).
    blocked_by: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))


@cache
def checks() -> dict[str, Check]:
    out = {}
    for row in tables.load("checks")["checks"]:
        out[row["id"]] = Check(row["id"], row["title"], row["requirement"], row["severity"], row["remediation"],
                               row["suite"], tuple(row.get("sources", [])), row["reads"],
                               MappingProxyType(dict(row.get("findings", {}))),
                               MappingProxyType({owner: frozenset(tags)
                                                 for owner, tags in row.get("blocked_by", {}).items()}))
    return out


def check(check_id: str) -> Check:
    return checks()[check_id]


@dataclass(frozen=True)
class Verdict:
    check: str
    node: str | None
    outcome: Outcome
    summary: str
    expected: str | None = None
    observed: str | None = None
    evidence: tuple[str, ...] = ()
    facts: dict[str, Any] = field(default_factory=dict, compare=False)
    #: The remedy for what was observed, where the check's own (gpuconf/data/checks.yaml) covers
    #: another cause: a remedy never sends the reader to a check that passed, or to a wrong fix.
    remedy: str | None = None
    #: What the check did not judge although it passed (a fail-closed caveat: "not observed:
    #: runtime.mode"): every report shows it beside the PASS.
    not_judged: tuple[str, ...] = ()
    #: NOT TESTED only: why, one of gpuconf.outcomes.NOT_TESTED_KINDS (None: the reports count it as
    #: could-not-run: an unclassified NOT TESTED is never taken for "not applicable").
    kind: str | None = None
    #: NOT TESTED blocked by another check's failure: that check's id (kind is then "blocked").
    blocked_by: str | None = None
    #: A failing verdict's findings, as tags its check declares (Check.findings): what a dependant's
    #: declared dependency (Check.blocked_by) is matched against. Empty: a finding no dependant shares.
    causes: frozenset[str] = frozenset()

    @property
    def remediation(self) -> str:
        return self.remedy or check(self.check).remediation

    def message(self) -> str:
        """What a failing test prints: the summary, one expected/observed line, the remedy."""
        lines = [f"{self.check}" + (f" on {self.node}" if self.node else "") + f": {self.summary}"]
        if self.expected is not None or self.observed is not None:
            lines.append(f"  expected {self.expected}; observed {self.observed}")
        lines += [f"  evidence: {e}" for e in self.evidence]
        if self.outcome in (Outcome.FAIL, Outcome.DEGRADED):
            lines.append(f"  remediation: {self.remediation}")
        return "\n".join(lines)

    def record(self) -> dict[str, Any]:
        """The verdict as the one record every report reads (gpuconf.report.model.CheckResult carries
        it from the test to report.json, the merge, the diff, the CNCF evidence and the node labels)."""
        nt = self.outcome is Outcome.NOT_TESTED
        kind = self.kind or (outcomes.BLOCKED if self.blocked_by else outcomes.COULD_NOT_RUN)
        return {"check": self.check, "node": self.node, "outcome": self.outcome.value, "summary": self.summary,
                "not_judged": list(self.not_judged), "expected": self.expected, "observed": self.observed,
                "evidence": list(self.evidence),
                "remediation": self.remediation if self.outcome in (Outcome.FAIL, Outcome.DEGRADED) else None,
                "blocked_by": self.blocked_by,
                "kind": kind if nt else None}


def passed(check_id: str, node: str | None, summary: str, **kw: Any) -> Verdict:
    return Verdict(check_id, node, Outcome.PASS, summary, **kw)


def failed(check_id: str, node: str | None, summary: str, *, causes: frozenset[str] | set[str] = frozenset(),
           **kw: Any) -> Verdict:
    """The check's own severity decides FAIL or DEGRADED. ``causes``: the findings, as tags the check
    declares in gpuconf/data/checks.yaml (``findings``), that checks depending on it may share."""
    meta = check(check_id)
    if undeclared := set(causes) - set(meta.findings):
        raise ValueError(f"{check_id} declares no finding {sorted(undeclared)} (gpuconf/data/checks.yaml findings)")
    outcome = Outcome.FAIL if meta.severity == "fail" else Outcome.DEGRADED
    return Verdict(check_id, node, outcome, summary, causes=frozenset(causes), **kw)


def not_tested(check_id: str, node: str | None, reason: str, *, kind: str | None = None,
               blocked_by: str | None = None) -> Verdict:
    """NOT TESTED with its reason and kind (gpuconf.outcomes.NOT_TESTED_KINDS); ``blocked_by`` names the
    failing check that owns the cause (the kind is then "blocked")."""
    if kind is not None and kind not in outcomes.NOT_TESTED_KINDS:
        raise ValueError(f"not a NOT TESTED kind: {kind!r}")
    return Verdict(check_id, node, Outcome.NOT_TESTED, reason, kind=outcomes.BLOCKED if blocked_by else kind,
                   blocked_by=blocked_by)
