"""``--label-nodes``/``--taint-failed``: the run's verdict per node written onto the nodes it
tested, once the run finished (gpuconf.cluster.signoff does the patches)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuconf.kit.state import SESSION


def sign_off_nodes(config: pytest.Config, results: list[Any], exitstatus: int, reporter: Any,
                   coverage: Any = None, *, partial: bool = False) -> int:
    """--label-nodes/--taint-failed: sign off each node of the run's inventory that has a check result
    (gpuconf.cluster.signoff). Only a run that finished (all passed, or some failed) signs off; the
    exit status becomes 12/11 when RBAC refused the patches or the API server was gone. A PARTIAL run
    (``partial``: it selected less than the sign-off's scope) labels only the nodes it saw fail or
    degrade: what failed is true whatever the scope, a pass of part of the checks is no sign-off."""
    from datetime import UTC, datetime

    from gpuconf.cluster import ForbiddenError, UnreachableError
    from gpuconf.cluster.errors import access_exit_status
    from gpuconf.cluster.signoff import NodeSignOff, sign_off
    from gpuconf.report.model import DEGRADED, FAIL, node_verdicts

    taint = bool(config.getoption("--taint-failed"))
    state = config.stash.get(SESSION, None)
    if not (taint or config.getoption("--label-nodes")) or state is None or state.handle is None:
        return exitstatus

    def say(line: str, red: bool = False) -> None:
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(line, red=red)

    from gpuconf.outcomes import EXIT_DEGRADED, EXIT_PARTIAL
    from gpuconf.plugin.fleet import EXIT_UNTESTED

    if exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, EXIT_UNTESTED, EXIT_DEGRADED,
                          EXIT_PARTIAL):
        say(f"gpuconf: nodes not signed off: the run did not finish (exit status {exitstatus})", red=True)
        return exitstatus
    tested = {n.name for n in state.inventory.gpu_nodes} if state.inventory is not None else set()
    signoffs = [NodeSignOff(node, verdict, tuple(r.check for r in results
                                                 if r.node == node and r.outcome in (FAIL, DEGRADED)))
                for node, verdict in node_verdicts(results, coverage).items() if node in tested]
    if partial:
        held = [s.node for s in signoffs if s.verdict not in (FAIL, DEGRADED)]
        signoffs = [s for s in signoffs if s.verdict in (FAIL, DEGRADED)]
        if held:
            say(f"gpuconf: not labelled: {', '.join(held)}: a partial run (it selected less than the sign-off's "
                "scope) signs no node off; run every suite to label them", red=True)
    done = sign_off(state.handle.cluster, signoffs, run_id=state.run.run_id if state.run is not None else None,
                    when=datetime.now(UTC), taint_failed=taint)
    say("gpuconf: nodes signed off: " + (", ".join(
        f"{r.node} {r.verdict}" + (f" (taint {r.taint})" if r.taint else "") for r in done if r.error is None)
        or "none"))
    for r in done:
        if r.error is not None:
            say(f"gpuconf: {r.node} not signed off: {r.error}", red=True)
            if isinstance(r.error, ForbiddenError | UnreachableError) and exitstatus in (
                    0, 1, EXIT_UNTESTED, EXIT_DEGRADED, EXIT_PARTIAL):
                exitstatus = access_exit_status(r.error) or exitstatus
    return exitstatus
