"""Every GPU node accounted for: a node that cannot take the run's probes (NotReady, cordoned, a
taint the probes do not tolerate, found before anything is launched; or a probe the scheduler
refused there for the node's state, found when it said so) has its probe-reading checks NOT TESTED
with that one reason, its API-only checks still judged; and the run's coverage ("N of M GPU nodes
tested; K cordoned, ...") that the reports, the node sign-off and the exit status read.

Exit status 15: nothing failed, but some selected GPU nodes could not be tested (README: exit
statuses), so a nightly CI tells an incomplete sign-off from a clean pass.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from gpuconf.kit.state import SESSION, inventory, node_views

#: Nothing failed, but not every selected GPU node was tested (the coverage line says which and why).
EXIT_UNTESTED = 15
#: The words in a failure that say the check's pod was never placed (the campaign's outcome).
_UNPLACED_WORDS = ("Unschedulable", "Pending")


def _reads(item: pytest.Item) -> str | None:
    from gpuconf.verdict import checks

    marker = item.get_closest_marker("check")
    if marker is None or not marker.args or marker.args[0] not in checks():
        return None
    return checks()[marker.args[0]].reads


def _node_of(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    node = callspec.params.get("gpu_node") if callspec is not None else None
    return str(node) if node else None


def untested_reason(config: pytest.Config, node: str, reads: str | None) -> str | None:
    """Why a check reading ``reads`` cannot be tested on ``node`` because of the node's state, or None:
    probe checks on a node that takes no probes (or where the scheduler refused one for the node's
    state), node-served checks on a NotReady node."""
    from gpuconf.nodes import NOT_READY

    if reads not in ("probe", "node"):
        return None
    view = node_views(config).get(node)
    if view is not None and view.availability.blocks_probes and (
            reads == "probe" or view.availability.state == NOT_READY):
        return view.availability.reason
    run = config.stash[SESSION].run
    if reads == "probe" and run is not None and node in run.unplaced:
        return run.unplaced[node][1]
    return None


def _gfd_subject(item: pytest.Item) -> bool:
    """Whether the item's check judges GFD's labels (gpuconf/data/checks.yaml ``subject: gfd-labels``)."""
    from gpuconf.compat import tables

    marker = item.get_closest_marker("check")
    if marker is None or not marker.args:
        return False
    return any(row["id"] == marker.args[0] and row.get("subject") == "gfd-labels"
               for row in tables.load("checks")["checks"])


def gfd_absent_reason(config: pytest.Config, node: str) -> str | None:
    """Why a check whose subject is GFD's labels does not apply on ``node``: it carries none and
    nothing deploys GFD there (the GPU Operator's GPUCluster mode, a ClusterPolicy with GFD off, no
    operator); None where GFD should run or the node has its labels (the check then judges them, and
    labels.gfd-matches-hardware fails for a GFD that should run and does not)."""
    from gpuconf.checks.inventory import gfd_absent_by_design, gfd_deployment

    view, inv = node_views(config).get(node), inventory(config)
    if view is None or inv is None:
        return None
    return gfd_absent_by_design(view, gfd_deployment(view, inv.cluster_policy, inv.gpu_cluster))


@pytest.fixture(autouse=True)
def _node_takes_probes(request: pytest.FixtureRequest) -> None:
    """A per-node test whose check reads probes is NOT TESTED, before it launches anything, on a node
    that takes none (the node view's availability), with that one reason; one whose check judges GFD's
    labels, on a node GFD is absent from by design, is NOT TESTED (not applicable) saying so."""
    node = _node_of(request.node)
    if node is None:
        return
    from gpuconf.kit.evidence import skip_not_tested
    from gpuconf.outcomes import NODE_UNAVAILABLE, NOT_APPLICABLE

    if (why := untested_reason(request.config, node, _reads(request.node))) is not None:
        skip_not_tested(why, NODE_UNAVAILABLE, state=_node_state(request.config, node))
    if _gfd_subject(request.node) and (why := gfd_absent_reason(request.config, node)) is not None:
        skip_not_tested(why, NOT_APPLICABLE)


def _node_state(config: pytest.Config, node: str) -> str | None:
    """The state that keeps probes off ``node`` (cordoned, tainted, NotReady, busy, unplaceable)."""
    view = node_views(config).get(node)
    if view is not None and view.availability.state is not None:
        return str(view.availability.state)
    run = config.stash[SESSION].run
    return run.unplaced[node][0] if run is not None and node in run.unplaced else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """A probe check that failed because its pod was never placed, on a node whose state the scheduler
    named when it refused it (cordoned, tainted or its GPUs taken by others after the run began), is
    NOT TESTED with that reason: the node's state is not the check's failure."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    node = _node_of(item)
    if node is None or not any(word in report.longreprtext for word in _UNPLACED_WORDS):
        return
    run = item.config.stash[SESSION].run
    if _reads(item) != "probe" or run is None or node not in run.unplaced:
        return
    from gpuconf.kit.evidence import KIND_PROPERTY, STATE_PROPERTY, VERDICT_PROPERTY
    from gpuconf.outcomes import NODE_UNAVAILABLE

    state, reason = run.unplaced[node]
    report.outcome = "skipped"
    report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {reason}")
    item.user_properties[:] = [(k, v) for k, v in item.user_properties
                               if k not in ("gpuconf.outcome", VERDICT_PROPERTY, KIND_PROPERTY, STATE_PROPERTY)]
    item.user_properties += [("gpuconf.outcome", "not-tested"), (KIND_PROPERTY, NODE_UNAVAILABLE),
                             (STATE_PROPERTY, state)]
    report.user_properties = list(item.user_properties)


def run_coverage(config: pytest.Config) -> Any:
    """The run's coverage (gpuconf.report.model.Coverage) over the selected GPU nodes: those whose
    availability kept probes off them, those the scheduler refused a probe for the node's state, and
    those with a GPU model gpuconf/data/gpus.yaml does not know (their checks ran, but a figure
    judged against an unknown model is no sign-off); None for a run without a cluster."""
    from gpuconf.report.model import UNKNOWN_HARDWARE, Coverage, UntestedNode

    state = config.stash.get(SESSION, None)
    if state is None or state.inventory is None:
        return None
    views = state.views if state.views is not None else {} if not state.inventory.gpu_nodes else None
    if views is None:  # nothing asked about the nodes (no test ran)
        return None
    untested: dict[str, UntestedNode] = {}
    for name, view in views.items():
        if view.availability.state is not None:
            untested[name] = UntestedNode(name, view.availability.state, view.availability.reason)
        elif state.run is not None and name in state.run.unplaced:
            untested[name] = UntestedNode(name, *state.run.unplaced[name])
        elif (unknown := unknown_model(view, probed_gpu_names(state.probes, name))) is not None:
            untested[name] = UntestedNode(name, UNKNOWN_HARDWARE, unknown)
    return Coverage(tuple(n.name for n in state.inventory.gpu_nodes), tuple(untested.values()),
                    {name: view.kind for name, view in views.items()})


def probed_gpu_names(probes: Any, node: str) -> tuple[str, ...]:
    """The names of the node's whole GPUs as its whole-node probe read them (NVML's, else CUDA's for
    devices that are not MIG instances); () where no probe printed a readable report."""
    from gpuconf.kit.probes import parsed_probe
    from gpuconf.probes import ProbeParseError

    outcome = (probes or {}).get(node)
    if outcome is None or not outcome.logs.get("probe"):
        return ()
    try:
        report = parsed_probe(outcome, node)
    except ProbeParseError:
        return ()
    names = tuple(g.name for g in report.nvml_gpus if g.name)
    return names or tuple(d.name for d in report.devices if d.name and not d.mig)


def unknown_model(view: Any, probed: tuple[str, ...] = ()) -> str | None:
    """Why the node's GPU model is unknown to gpuconf/data/gpus.yaml, or None: known, or not named at
    all (other checks say that). Read from the most direct source the run has: the GPU names the
    whole-node probe read (``probed``), else GFD's product label or the DRA driver's productName."""
    from gpuconf.compat.tables import find_gpu

    if probed:
        unknown = sorted({name for name in probed if find_gpu(name) is None})
        if not unknown:
            return None
        model, source = ", ".join(unknown), " (as the whole-node probe read it)"
    else:
        fact = view.facts.product
        if not fact.value or find_gpu(str(fact.value)) is not None:
            return None
        model, source = str(fact), ""
    return (f"{view.name}'s GPU model {model}{source} is not in gpuconf/data/gpus.yaml: its checks ran, but the "
            "figures they judge against (memory, bandwidth, compatibility class) are unknown for it; add the model to "
            "the table")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """The coverage in pytest's own junit.xml (testsuite properties), before pytest writes it."""
    from _pytest.junitxml import xml_key

    from gpuconf.report.junit import junit_coverage_properties

    xml = session.config.stash.get(xml_key, None)
    coverage = run_coverage(session.config)
    if xml is None or coverage is None:
        return
    for name, value in junit_coverage_properties(coverage):
        xml.add_global_property(name, value)
