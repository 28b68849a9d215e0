"""The sign-off's vocabulary, in one place: what a check says (its outcome), why a check was NOT TESTED
(its kind), what a run says (the cluster verdict) and the exit status each run verdict ends with.

Everything that writes or reads a verdict (gpuconf.verdict, the reports, the merge, the diff, the node
labels, the terminal) takes its words from here; no other module spells them. Plain strings: this
module imports nothing, so the report readers load it without the Kubernetes client.
"""

from __future__ import annotations

__all__ = ["BLOCKED", "COULD_NOT_RUN", "DEGRADED", "EXIT_DEGRADED", "EXIT_FAIL", "EXIT_INCOMPLETE", "EXIT_PARTIAL",
           "EXIT_PASS", "EXIT_STATUSES", "FAIL", "INCOMPLETE", "NODE_UNAVAILABLE", "NOT_APPLICABLE", "NOT_SELECTED",
           "NOT_STARTED", "NOT_TESTED", "NOT_TESTED_KINDS", "OUTCOMES", "PARTIAL", "PASS", "KIND_WORDS",
           "exit_status_for"]

#: What one check says on one node.
PASS, DEGRADED, FAIL, NOT_TESTED = "pass", "degraded", "fail", "not-tested"
OUTCOMES = (PASS, DEGRADED, FAIL, NOT_TESTED)

#: Why a check was NOT TESTED on a node, in the order the reports list them:
#: - not-applicable: the capability is absent here by design (MIG on a node without MIG, NCCL on
#:   time-sliced GPUs, DRA where no DRA driver is installed); nothing is missing from the sign-off;
#: - node-unavailable: the node takes no probes (cordoned, tainted, NotReady, busy, unplaceable): its
#:   state is the reason, and the node is not signed off;
#: - could-not-run: the check tried and could not (a probe or a permission failed, the API server
#:   stopped answering, a reading is missing): the sign-off is short of it;
#: - blocked: another check failed with the cause (``blocked_by`` names it): one root cause, one failure;
#: - not-selected: an opt-in tier the run did not ask for (DCGM levels, burn-in, disruptive checks).
NOT_APPLICABLE, NODE_UNAVAILABLE, COULD_NOT_RUN, BLOCKED, NOT_SELECTED = (
    "not-applicable", "node-unavailable", "could-not-run", "blocked", "not-selected")
NOT_TESTED_KINDS = (COULD_NOT_RUN, BLOCKED, NODE_UNAVAILABLE, NOT_SELECTED, NOT_APPLICABLE)
#: Each kind as the reports head it.
KIND_WORDS = {COULD_NOT_RUN: "could not run", BLOCKED: "blocked by another check's failure",
              NODE_UNAVAILABLE: "node unavailable", NOT_SELECTED: "tier not asked for",
              NOT_APPLICABLE: "not applicable here"}

#: What a run says (its sign-off's first word), beyond the node outcomes: a run that never reached a
#: check (NOT STARTED), one interrupted or that left selected GPU nodes untested (INCOMPLETE), and one
#: whose selection was narrower than the sign-off's scope (PARTIAL: -m, -k, some suites only).
NOT_STARTED, INCOMPLETE, PARTIAL = "not-started", "incomplete", "partial"

#: The exit status each run verdict ends with (docs/exit-statuses.md has the whole table, the run's
#: other reasons to stop included). A nightly job tells them apart without reading a report.
EXIT_PASS, EXIT_FAIL, EXIT_INCOMPLETE, EXIT_DEGRADED, EXIT_PARTIAL = 0, 1, 15, 17, 18
EXIT_STATUSES = {PASS: EXIT_PASS, FAIL: EXIT_FAIL, INCOMPLETE: EXIT_INCOMPLETE, DEGRADED: EXIT_DEGRADED,
                 PARTIAL: EXIT_PARTIAL}


def exit_status_for(verdict: str) -> int | None:
    """The exit status of a run whose verdict is ``verdict``; None for a verdict that takes its status
    from elsewhere (NOT STARTED: why it could not start; NOT TESTED: nothing ran)."""
    return EXIT_STATUSES.get(verdict)
