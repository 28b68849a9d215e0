"""Scheduling checks: what the scheduler says when GPUs cannot be had, and the runtime class."""

from __future__ import annotations

from collections.abc import Sequence

from gpuconf.cluster import PodOutcome
from gpuconf.verdict import Verdict, failed, passed

__all__ = ["evaluate_over_ask", "evaluate_runtime_class"]

#: The stable core of kube-scheduler's message (domain.md §4): wording around it varies by version.
INSUFFICIENT = "Insufficient nvidia.com/gpu"


def evaluate_over_ask(outcome: PodOutcome, *, requested: int, budget_s: float) -> Verdict:
    cid = "scheduling.over-ask-is-insufficient"
    events = [e for e in outcome.events if e.reason == "FailedScheduling"]
    evidence = tuple(f"{e.reason}: {e.message}" for e in events[:3])
    if outcome.node:
        return failed(cid, None, f"a pod asking for {requested} GPUs, more than any node advertises, was scheduled "
                      f"to {outcome.node}", expected="Pending (unschedulable)", observed=f"bound to {outcome.node}, "
                      f"phase {outcome.phase}", evidence=evidence)
    if not any(INSUFFICIENT in e.message for e in events):
        seen = events[0].message if events else "no FailedScheduling event"
        return failed(cid, None, f"the pod stayed Pending but the scheduler did not say {INSUFFICIENT!r} "
                      f"within {budget_s:.0f} s", expected=f"a FailedScheduling event with {INSUFFICIENT!r}",
                      observed=seen, evidence=evidence)
    return passed(cid, None, f"Pending with {INSUFFICIENT!r} as it should be", evidence=evidence)


def evaluate_runtime_class(names_to_handlers: Sequence[tuple[str, str]], *, expected: str = "nvidia") -> Verdict:
    cid = "scheduling.runtimeclass-present"
    handlers = dict(names_to_handlers)
    if expected not in handlers:
        return failed(cid, None, f"there is no RuntimeClass {expected!r}",
                      expected=f"RuntimeClass {expected} with a handler",
                      observed="RuntimeClasses: " + (", ".join(sorted(handlers)) or "none"))
    if not handlers[expected]:
        return failed(cid, None, f"RuntimeClass {expected!r} has no handler", expected="a handler", observed="empty")
    return passed(cid, None, f"RuntimeClass {expected} with handler {handlers[expected]}")
