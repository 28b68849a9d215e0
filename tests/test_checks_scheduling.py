"""The scheduling checks' decisions."""

from __future__ import annotations

from gpuconf.checks.scheduling import evaluate_over_ask, evaluate_runtime_class
from gpuconf.cluster.outcomes import PodEvent, PodOutcome, PodTimings
from gpuconf.verdict import Outcome

REAL = ("0/2 nodes are available: 2 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: 0/2 "
        "nodes are available: 2 Preemption is not helpful for scheduling.")


def outcome(node: str | None, *messages: str) -> PodOutcome:
    events = tuple(PodEvent(type="Warning", reason="FailedScheduling", message=m, count=1,
                            reporting_component="default-scheduler", first_timestamp=None, last_timestamp=None)
                   for m in messages)
    return PodOutcome(name="over-ask", node=node, phase="Pending" if node is None else "Running", reason=None,
                      exit_code=None, message=None, containers=(), logs={}, missing_logs={},
                      truncated_logs=frozenset(), events=events, timings=PodTimings(None, None, None, None, None),
                      timed_out=False, unschedulable=node is None)


def test_pending_with_the_schedulers_insufficient_message_passes():
    assert evaluate_over_ask(outcome(None, REAL), requested=9, budget_s=10).outcome is Outcome.PASS


def test_an_over_ask_that_gets_scheduled_fails():
    verdict = evaluate_over_ask(outcome("h100-0"), requested=9, budget_s=10)
    assert verdict.outcome is Outcome.FAIL and "was scheduled to h100-0" in verdict.summary


def test_pending_without_the_reason_fails_showing_what_was_said():
    verdict = evaluate_over_ask(outcome(None), requested=9, budget_s=10)
    assert verdict.outcome is Outcome.FAIL and verdict.observed == "no FailedScheduling event"


TAINTED = ("0/2 nodes are available: 2 node(s) had untolerated taint {dedicated: training}. no new claims to "
           "deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")


def test_pending_for_another_reason_than_gpus_fails_quoting_the_scheduler():
    """Pending is not the finding: an over-ask kept out by a taint says nothing about how the scheduler
    answers a GPU shortage."""
    verdict = evaluate_over_ask(outcome(None, TAINTED), requested=9, budget_s=10)
    assert verdict.outcome is Outcome.FAIL
    assert verdict.summary == ("the pod stayed Pending but the scheduler did not say 'Insufficient nvidia.com/gpu' "
                               "within 10 s")
    assert verdict.expected == "a FailedScheduling event with 'Insufficient nvidia.com/gpu'"
    assert verdict.observed == TAINTED and verdict.evidence == (f"FailedScheduling: {TAINTED}",)
    # the reason among several events counts wherever it is
    assert evaluate_over_ask(outcome(None, TAINTED, REAL), requested=9, budget_s=10).outcome is Outcome.PASS


def test_runtime_class_present_missing_and_without_handler():
    assert evaluate_runtime_class([("nvidia", "nvidia")]).outcome is Outcome.PASS
    missing = evaluate_runtime_class([("runc", "runc")])
    assert missing.outcome is Outcome.FAIL and "RuntimeClasses: runc" in (missing.observed or "")
    assert evaluate_runtime_class([("nvidia", "")]).outcome is Outcome.FAIL
