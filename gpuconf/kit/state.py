"""The session's state as the suites and the plugin read it: the cluster under test, its inventory
and the run's context, kept in ``config.stash[SESSION]`` (style.md), never in globals. The cluster
is opened lazily, once per session, by the first reader (the plugin's session start); the plugin
(gpuconf.plugin.session) closes it. Nothing here imports the plugin."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from kubernetes import client

from gpuconf.cluster import (
    Cluster,
    ClusterError,
    ClusterSource,
    Inventory,
    PodOutcome,
    RetryPolicy,
    RunContext,
    connect,
    load_inventory,
)
from gpuconf.cluster import cluster_source as find_cluster

if TYPE_CHECKING:
    from gpuconf.nodes import NodeView

__all__ = ["DEFAULT_PROBE_CUDA", "SESSION", "ClusterHandle", "Session", "aims_at_suites", "cluster_source",
           "compat_cudas", "fleet_inventory", "fleet_views", "inventory", "node_views", "pool_key", "probe_tolerations",
           "run_context", "session", "simulated_faults"]

#: The CUDA of the probe every suite uses unless it tests a matrix (the current major's baseline).
DEFAULT_PROBE_CUDA = "13.0.2"


@dataclass(frozen=True)
class ClusterHandle:
    """What a suite gets: the cluster, its kubeconfig, and where the answers come from."""

    cluster: Cluster
    kubeconfig: Path | None
    provenance: str  # "simulated:<profile>", "kubeconfig:<path>[@context]" (gpuconf.cluster.access.ClusterSource)

    @property
    def api_client(self) -> client.ApiClient:
        return self.cluster.api_client


@dataclass
class Session:
    """The session's cluster, run namespace and shared observations (launch once, assert many)."""

    handle: ClusterHandle | None = None
    skip_reason: str | None = None
    sim: Any = None
    sim_dir: Path | None = None  # the simulated cluster's kubeconfig lives here, removed with it
    run: RunContext | None = None
    inventory: Inventory | None = None
    expect: Any = None  # the --expect profile (gpuconf.expect.ExpectProfile), loaded at session start
    probes: dict[str, PodOutcome] = field(default_factory=dict)
    views: dict[str, Any] | None = None  # node name -> gpuconf.nodes.NodeView, built once from the inventory
    templates: dict[Any, str] = field(default_factory=dict)  # claim requests -> the ResourceClaimTemplate made for them
    cannot_start: bool = False  # the run ended before any test (gpuconf.plugin.session)
    unreachable: str | None = None  # the API server stopped answering mid-run: why (the run stops, status 11)
    #: --shard I/N (or the Indexed Job's environment), checked at configure: gpuconf.shards.ShardSpec
    shard_spec: Any = None
    #: A sharded run's plan (gpuconf.shards.ShardPlan), made with the inventory: ``inventory`` then holds
    #: the shard's GPU nodes and ``fleet`` every selected one (what cluster-wide checks judge)
    shard: Any = None
    fleet: Inventory | None = None
    fleet_views: dict[str, Any] | None = None  # node name -> NodeView for every selected GPU node


SESSION = pytest.StashKey[Session]()


def compat_cudas(config: pytest.Config) -> list[str] | None:
    """The compat matrix ``--compat-images`` chose (validated at startup), or None for the default."""
    from gpuconf.checks.compat import resolve_compat_images

    chosen = config.getoption("compat_images")
    return resolve_compat_images(chosen) if chosen is not None else None


def session(config: pytest.Config) -> Session:
    """The session state, opening the cluster on first use."""
    state = config.stash[SESSION]
    if state.handle is not None or state.skip_reason is not None:
        return state
    simulate, kubeconfig = config.getoption("--simulate"), config.getoption("--kubeconfig")
    retry = RetryPolicy(deadline=config.getoption("api_deadline"))
    if simulate:
        from gpuconf.sim.cluster import SimulatedCluster

        state.sim = SimulatedCluster(simulate).start()
        state.sim_dir = _tmp_dir()
        path = state.sim.write_kubeconfig(state.sim_dir / "kubeconfig")
        # the profile as given (a file's path, a shipped profile's name): a file is often a shipped profile
        # with faults added, under the shipped profile's own name (README: Try a broken cluster)
        state.handle = ClusterHandle(connect(str(path), retry=retry), path, f"simulated:{simulate}")
    elif (source := cluster_source(config)) is not None:
        # ClusterError: pytest_sessionstart ends the run with it
        cluster = connect(kubeconfig, config.getoption("--context"), retry=retry)
        state.handle = ClusterHandle(cluster, source.paths[0] if source.paths else None, cluster.source)
    else:
        state.skip_reason = "no cluster to test: give --kubeconfig PATH or --simulate PROFILE"
    return state


def cluster_source(config: pytest.Config) -> ClusterSource | None:
    """Where the run's cluster comes from, the one answer to "is there a cluster" (session start,
    the reports, the SIGTERM guard): --simulate (it wins), --kubeconfig, else, for a run of the suites
    only (:func:`aims_at_suites`), $KUBECONFIG, ~/.kube/config or the pod's service account, as
    kubectl finds them (gpuconf.cluster.access.cluster_source, which `gpuconf results` uses too).
    None: no cluster to test."""
    simulate = config.getoption("--simulate")
    if simulate:
        return ClusterSource(f"simulated:{simulate}", (), given=True)
    found = find_cluster(config.getoption("--kubeconfig"))
    return found if found is not None and (found.given or aims_at_suites(config)) else None


def aims_at_suites(config: pytest.Config) -> bool:
    """Whether the run's test paths reach a ``suites`` directory (``pytest suites/``, a suite file,
    ``pytest .`` in the checkout). Only such a run takes its cluster from the environment: the project's
    own tests (``pytest tests/``) never open the cluster a developer's kubeconfig names. Decided from the
    arguments, before collection: the suites parametrize over the cluster's GPU nodes."""
    cwd = config.invocation_params.dir
    for arg in config.args:
        path = Path(cwd, arg.split("::", 1)[0]).resolve()
        try:
            parts = path.relative_to(cwd.resolve()).parts
        except ValueError:
            parts = path.parts
        if "suites" in parts or (path / "suites").is_dir():
            return True
    return False


def simulated_faults(config: pytest.Config) -> tuple[str, ...]:
    """The faults the simulated cluster's profile injected, as the reports name them
    (gpuconf.sim.profile.fault_words); none for a real cluster, or before the simulator started."""
    state = config.stash.get(SESSION, None)
    if state is None or state.sim is None:
        return ()
    from gpuconf.sim.profile import fault_words

    return fault_words(state.sim.profile)


def _tmp_dir() -> Path:
    import tempfile

    return Path(tempfile.mkdtemp(prefix="gpuconf-sim-"))


def inventory(config: pytest.Config) -> Inventory | None:
    state = session(config)
    if state.handle is None:
        return None
    if state.inventory is None:
        inv = load_inventory(state.handle.cluster, node_selector=config.getoption("--node-selector"))
        if state.shard_spec is not None:
            import dataclasses

            from gpuconf.shards import plan

            state.fleet = inv
            state.shard = plan(state.shard_spec, [(n.name, pool_key(n)) for n in inv.gpu_nodes])
            mine = set(state.shard.nodes)
            inv = dataclasses.replace(inv, gpu_nodes=tuple(n for n in inv.gpu_nodes if n.name in mine))
        state.inventory = inv
    return state.inventory


def fleet_inventory(config: pytest.Config) -> Inventory | None:
    """Every selected GPU node's inventory: the shard's in a sharded run is ``inventory``'s subset."""
    inv = inventory(config)
    return session(config).fleet or inv


def pool_key(node: Any) -> str | None:
    """The node's pool for sharding (gpuconf.shards): its GPU product as GFD's label or the DRA driver's
    productName give it (time-slicing's -SHARED suffix ignored); None when neither names it."""
    from gpuconf.checks.compat import pool_of
    from gpuconf.nodes.devices import slice_devices
    from gpuconf.nodes.facts import node_facts

    devices = slice_devices([s.raw for s in node.slices], node.name)
    product = node_facts(node.labels, node.capacity, devices).product.value
    return pool_of(str(product)) if product else None


def probe_tolerations(config: pytest.Config) -> tuple[dict[str, str], ...]:
    """The tolerations every probe pod gets besides its own: node.kubernetes.io/unschedulable with
    --include-cordoned, and each --tolerate."""
    from gpuconf.nodes import UNSCHEDULABLE_TAINT, parse_toleration

    extra = [{"key": UNSCHEDULABLE_TAINT, "operator": "Exists", "effect": "NoSchedule"}] \
        if config.getoption("--include-cordoned") else []
    return tuple(extra + [parse_toleration(t) for t in config.getoption("--tolerate")])


def node_views(config: pytest.Config) -> dict[str, NodeView]:
    """One gpuconf.nodes.NodeView per GPU node of the inventory, built once: the suites ask it how
    to request GPUs on a node, which RuntimeClass runs them there, and whether a probe can be placed
    there now (NotReady, cordoned, a taint the probes do not tolerate, GPUs held by other pods: one
    paged list of the cluster's unfinished pods)."""
    state = session(config)
    if state.views is None:
        from datetime import UTC, datetime

        from gpuconf.cluster import list_active_pods
        from gpuconf.nodes import build_views, gpu_holders
        from gpuconf.probe_pods import DEFAULT_TOLERATIONS

        inv = fleet_inventory(config)
        if inv is None:
            state.views = {}
            return state.views
        holders = {}
        if state.handle is not None and inv.gpu_nodes:
            try:
                holders = gpu_holders(list_active_pods(state.handle.cluster),
                                      exclude_namespace=config.getoption("--namespace"))
            except ClusterError:
                # Pods not readable now (throttled past --api-deadline, say): no node is judged busy
                # up front; a probe the scheduler then refuses for GPUs held by others still says so
                # (gpuconf.cluster.campaign records the node as it is at that moment).
                holders = {}
        views = build_views(inv, tolerations=(*DEFAULT_TOLERATIONS, *probe_tolerations(config)),
                            holders=holders, now=datetime.now(UTC))
        state.fleet_views = views
        mine = set(state.shard.nodes) if state.shard is not None else None
        state.views = views if mine is None else {name: v for name, v in views.items() if name in mine}
    return state.views


def fleet_views(config: pytest.Config) -> dict[str, NodeView]:
    """A NodeView for every selected GPU node: in a sharded run the fleet's, not only the shard's
    (``node_views``), for the cluster-wide checks that count the fleet (expect.pool-populated)."""
    node_views(config)
    return session(config).fleet_views or {}


def run_context(config: pytest.Config) -> RunContext:
    state = session(config)
    assert state.handle is not None
    if state.run is None:
        state.run = RunContext(state.handle.cluster, namespace=config.getoption("--namespace"),
                               liveness_interval_s=config.getoption("--liveness-interval"),
                               prepare_budget_s=config.getoption("prepare_timeout"),
                               tolerations=probe_tolerations(config)).__enter__()
        from gpuconf.plugin.terminal import live_progress

        state.run.on_progress = live_progress(config)
    return state.run
