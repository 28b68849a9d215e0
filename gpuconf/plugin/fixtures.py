"""The session fixtures the suites use: the cluster, its inventory, the whole-node probes (launched
once, read by many checks), the --expect profile, the exporters' scrapes; and the guard that makes
a ``needs_probe`` test NOT TESTED "blocked by <owner>: <cause>" where its node's whole-node probe
could not run (gpuconf.checks.probe_start)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gpuconf.cluster import Inventory, PodOutcome
from gpuconf.kit.probes import WholeNodeProbes, blocked, cuda_probe_pod, native_probe_cuda
from gpuconf.kit.state import SESSION, ClusterHandle, fleet_views, inventory, node_views, run_context, session
from gpuconf.nodes import GpuRequest, NodeView, Unavailable


@pytest.fixture(scope="session")
def gpu_cluster(request: pytest.FixtureRequest) -> Iterator[ClusterHandle]:
    """The cluster under test for the whole session."""
    state = session(request.config)
    if state.handle is None:
        from gpuconf.kit.evidence import skip_not_tested
        from gpuconf.outcomes import COULD_NOT_RUN

        skip_not_tested(state.skip_reason or "no cluster", COULD_NOT_RUN)
    yield state.handle


@pytest.fixture(scope="session")
def gpu_inventory(request: pytest.FixtureRequest, gpu_cluster: ClusterHandle) -> Inventory:
    inv = inventory(request.config)
    assert inv is not None
    return inv


@pytest.fixture(scope="session")
def gpu_nodes(request: pytest.FixtureRequest, gpu_inventory: Inventory) -> dict[str, NodeView]:
    """One gpuconf.nodes.NodeView per GPU node, by name: the one place a suite asks how to request
    GPUs on a node, which RuntimeClass runs them there and where each fact comes from."""
    return node_views(request.config)


@pytest.fixture(scope="session")
def fleet_nodes(request: pytest.FixtureRequest, gpu_inventory: Inventory) -> dict[str, NodeView]:
    """A NodeView for every selected GPU node, by name: ``gpu_nodes`` in an unsharded run; in a sharded
    one (--shard) the whole fleet's, for the cluster-wide checks that count it (shard 0 runs them)."""
    return fleet_views(request.config)


@pytest.fixture(scope="session")
def whole_node_probes(request: pytest.FixtureRequest, gpu_nodes: dict[str, NodeView]) -> dict[str, PodOutcome]:
    """One cuda-probe per GPU node holding every GPU the node view's whole_node() asks for, launched
    together: every allocatable nvidia.com/gpu, or on a node that publishes its GPUs through DRA only
    every usable one (no NoSchedule/NoExecute device taint) through one ResourceClaim (ExactCount) or the
    DRA-backed extended resource, so inventory, smoke, health and metrics cover DRA nodes too. A node
    the view cannot ask gets no probe (its checks say why)."""
    from gpuconf.cluster import run_campaign

    state = session(request.config)
    if state.probes:
        return state.probes
    asks = {node.name: node.whole_node() for node in gpu_nodes.values()}
    pods = [cuda_probe_pod(request.config, name=f"inventory-{node.name}", check="inventory", node=node.name, ask=ask,
                           cuda=native_probe_cuda(node))
            for node in gpu_nodes.values() if isinstance(ask := asks[node.name], GpuRequest)]
    # Claims are recorded where a probe gets its GPUs through DRA (a claim, or the scheduler's claim
    # for a DRA-backed extended resource): dra.extended-resource-served and the taint checks read them.
    through_dra = any(isinstance(ask, GpuRequest) and ask.dra for ask in asks.values())
    outcomes = run_campaign(run_context(request.config), pods, timeout=request.config.getoption("gpuconf_timeout"),
                            record_claims=through_dra)
    state.probes = WholeNodeProbes({o.node or name.removeprefix("inventory-"): o for name, o in outcomes.items()},
                                   {name: ask.reason for name, ask in asks.items() if isinstance(ask, Unavailable)},
                                   selected_checks(request.session), runtime_missing(inventory(request.config)),
                                   {n.name: n.extended for n in gpu_nodes.values() if n.extended},
                                   {name: ask.kind for name, ask in asks.items() if isinstance(ask, Unavailable)})
    return state.probes


def runtime_missing(inv: Inventory | None) -> str | None:
    """scheduling.runtimeclass-present's failure, the very verdict that check gives, where the
    cluster has no RuntimeClass for the NVIDIA runtime; None where it has one."""
    from gpuconf.checks.scheduling import evaluate_runtime_class
    from gpuconf.verdict import Outcome

    if inv is None:
        return None
    verdict = evaluate_runtime_class([(rc.name, rc.handler) for rc in inv.runtime_classes])
    return verdict.summary if verdict.outcome is not Outcome.PASS else None


def selected_checks(session: pytest.Session) -> frozenset[str]:
    """The check ids of the run's selected tests (under pytest-xdist each worker collects them all)."""
    return frozenset(str(m.args[0]) for item in session.items if (m := item.get_closest_marker("check")) is not None)


@pytest.fixture(scope="session")
def selected_check_ids(request: pytest.FixtureRequest) -> frozenset[str]:
    """The check ids this run selected: a dependant whose owner check is not among them fails with its
    cause instead of waiting on a verdict nobody reports."""
    return selected_checks(request.session)


@pytest.fixture(scope="session")
def expect_profile(request: pytest.FixtureRequest) -> Any:
    """The declared cluster profile given with --expect (gpuconf.expect.ExpectProfile), or None."""
    return request.config.stash[SESSION].expect


@pytest.fixture(scope="session")
def exporter_scrapes(gpu_cluster: ClusterHandle, gpu_inventory: Inventory) -> dict[str, Any]:
    """Every GPU node's DCGM exporter, found by one cluster-wide pod list and scraped once through
    the API server's pod proxy, all nodes at once: node name -> gpuconf.checks.metrics.ExporterScrape
    (per GPU UUID its labels and values, or the error / not-tested reason)."""
    from gpuconf.checks.metrics import exporter_scrape
    from gpuconf.cluster.metrics import scrape_nodes

    scrapes = scrape_nodes(gpu_cluster.cluster, [n.name for n in gpu_inventory.gpu_nodes])
    return {node: exporter_scrape(node, s.pod.ref if s.pod is not None else None, text=s.text, error=s.error,
                                  forbidden=s.forbidden) for node, s in scrapes.items()}


@pytest.fixture(autouse=True)
def _probe_can_start(request: pytest.FixtureRequest) -> None:
    """A test marked ``needs_probe`` judges probes launched on its node (``gpu_node``): where the
    node's whole-node probe could not run, it is NOT TESTED "blocked by <owner>: <cause>" (the owner
    reports the cause once; gpuconf.checks.probe_start has the table)."""
    if request.node.get_closest_marker("needs_probe") is None:
        return
    callspec = getattr(request.node, "callspec", None)
    node = callspec.params.get("gpu_node") if callspec is not None else None
    if not node:
        return
    check = request.node.get_closest_marker("check")
    blocked(request.getfixturevalue("whole_node_probes"), node, str(check.args[0]) if check is not None else None)
