"""Sharing (time-slicing and MPS): on every node whose GPUs are shared, GFD's replicas and strategy
labels agree with what the device plugin advertises and with the --expect pool's declaration,
the product label says the GPUs are shared, and more pods than the node has GPUs (its GPUs + 1,
one GPU each) run at once and verify their kernel. One campaign launches every such pod of every
node together; the node's own GPU UUIDs come from the whole-node probes the inventory suite shares.
On MPS nodes a second campaign launches a one-replica pod that measures its largest allocation
(the client's memory limit) and the SMs its kernel reaches (the client's active thread
percentage), and a pod asking two replicas, which the device plugin must refuse.
Nodes that do not share their GPUs are not tested, with the reason. The decisions are in
gpuconf.checks.sharing."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpuconf.checks import sharing as checks
from gpuconf.checks.isolation import sighting
from gpuconf.cluster import Inventory, PodOutcome, run_campaign
from gpuconf.expect import ExpectPool, ExpectProfile
from gpuconf.kit import cuda_probe_pod, judge, rendezvous_group, require, run_context
from gpuconf.nodes import NodeView
from gpuconf.outcomes import COULD_NOT_RUN
from gpuconf.verdict import not_tested

pytestmark = pytest.mark.sharing

UuidViews = dict[str, frozenset[str]]  # node -> the distinct GPU UUIDs its whole-node probe saw
Record = Callable[[str, object], None]  # pytest's record_property


@pytest.fixture(autouse=True)
def _not_on_dra_nodes(request: pytest.FixtureRequest, gpu_nodes: dict[str, NodeView]) -> None:
    """A node that gives its GPUs through DRA: every sharing check NOT TESTED, not applicable, with the
    node view's reason (the DRA driver's own sharing is not modelled)."""
    node = getattr(getattr(request.node, "callspec", None), "params", {}).get("gpu_node")
    if node in gpu_nodes and (why := gpu_nodes[node].dra_sharing()) is not None:
        require(why)


def facts(inv: Inventory, node: str) -> checks.SharingFacts:
    n = inv.node(node)
    return checks.sharing_facts(node, n.labels, n.gpu_capacity, n.gpu_allocatable)


def declared_pool(expect_profile: ExpectProfile | None, inv: Inventory, node: str) -> ExpectPool | None:
    """The --expect pool the node belongs to, or None (no --expect, or the node is in no pool)."""
    return expect_profile.pool_for(inv.node(node).labels) if expect_profile is not None else None


def shared_resource(node: NodeView) -> str:
    """The resource a pod asks one shared GPU by, as the node view finds it (nvidia.com/gpu, or
    nvidia.com/gpu.shared under the device plugin's renameByDefault)."""
    ask = node.one_gpu()
    return ask.resource if ask and ask.resource else "nvidia.com/gpu"


@pytest.fixture(scope="module")
def node_uuids(request: pytest.FixtureRequest, gpu_inventory: Inventory, gpu_nodes: dict[str, NodeView],
               expect_profile: ExpectProfile | None) -> UuidViews:
    """The GPUs each shared node's whole-node probe saw (its UUIDs); no probe runs when no node shares."""
    def in_scope(node: str) -> bool:
        pool = declared_pool(expect_profile, gpu_inventory, node)
        return checks.in_scope(facts(gpu_inventory, node), pool.sharing if pool is not None else None)

    if not any(in_scope(n.name) for n in gpu_inventory.gpu_nodes):
        return {}
    probes: dict[str, PodOutcome] = request.getfixturevalue("whole_node_probes")
    out: UuidViews = {}
    for node, outcome in probes.items():
        ask = gpu_nodes[node].whole_node()
        if not ask or ask.count < gpu_nodes[node].offered(ask):
            continue  # MPS: the probe got one replica, a view of one GPU, not of the node
        report = sighting(outcome).report
        if report is not None and report.init.ok and all(d.uuid for d in report.devices):
            out[node] = frozenset(d.uuid for d in report.devices if d.uuid)
    return out


def physical_views(inv: Inventory, uuids: UuidViews, node: str) -> dict[str, int]:
    """The node's physical GPU count by view: GFD's label, then its whole-node probe's distinct UUIDs."""
    views = {}
    f = facts(inv, node)
    if f.gpu_count is not None:
        views["label nvidia.com/gpu.count"] = f.gpu_count
    if node in uuids:
        views["whole-node probe (distinct UUIDs)"] = len(uuids[node])
    return views


@pytest.fixture(scope="module")
def oversubscription(request: pytest.FixtureRequest, gpu_inventory: Inventory, gpu_nodes: dict[str, NodeView],
                     node_uuids: UuidViews) -> dict[str, list[checks.Run] | str]:
    """Every shared node's GPUs + 1 one-GPU pods, pinned by nodeSelector, in one campaign; for a
    node without pods, why not."""
    config = request.config
    plans: dict[str, list[checks.Run] | str] = {}
    pods, where = [], {}
    for node in gpu_inventory.gpu_nodes:
        f = facts(gpu_inventory, node.name)
        physical = next(iter(physical_views(gpu_inventory, node_uuids, node.name).values()), None)
        count, reason = checks.oversubscription_plan(f, physical)
        if reason is not None:
            plans[node.name] = reason
            continue
        plans[node.name] = []
        # the node's allocatable replicas take them all at once: they hold their GPUs until each saw
        # every other hold its own (the probe's rendezvous), so the sharing is exercised by construction
        meet = rendezvous_group(config, check="sharing", prefix="share-together", key=node.name,
                                hostnames=[f"p{i}" for i in range(count)])
        for i in range(count):
            name = checks.pod_name(node.name, i)
            pods.append(cuda_probe_pod(config, name=name, check="sharing", node=node.name, gpu_count=1,
                                       gpu_resource=shared_resource(gpu_nodes[node.name]), rendezvous=meet[f"p{i}"]))
            where[name] = node.name
    outcomes = run_campaign(run_context(config), pods, timeout=config.getoption("gpuconf_timeout")) if pods else {}
    for name in sorted(outcomes, key=lambda n: (where[n], len(n), n)):
        outcome = outcomes[name]
        t = outcome.timings
        window = (t.scheduled.timestamp(), t.finished.timestamp()) if t.scheduled and t.finished else None
        runs = plans[where[name]]
        assert isinstance(runs, list)
        runs.append(checks.Run(sighting(outcome), window))
    return plans


MpsPods = dict[str, tuple[PodOutcome | None, PodOutcome | None]]  # node -> (one-replica pod, two-replica pod)


@pytest.fixture(scope="module")
def mps_pods(request: pytest.FixtureRequest, gpu_inventory: Inventory, gpu_nodes: dict[str, NodeView]) -> MpsPods:
    """On every MPS node, in one campaign: a one-replica pod whose probe measures its largest
    allocation and the SMs its kernel reaches, and a pod asking two replicas (when the node has them to give)."""
    config = request.config
    pods, where = [], {}
    for node in gpu_inventory.gpu_nodes:
        f = facts(gpu_inventory, node.name)
        if checks.mps_plan(f) is not None:
            continue
        resource = shared_resource(gpu_nodes[node.name])
        one = checks.pod_name(node.name, 0, prefix="mps-limit")
        pods.append(cuda_probe_pod(config, name=one, check="sharing", node=node.name, gpu_count=1,
                                   gpu_resource=resource, env=checks.MEASURE_ALLOC_ENV))
        where[one] = (node.name, 0)
        if checks.mps_plan(f, pods=3) is None:
            two = checks.pod_name(node.name, 0, prefix="mps-two")
            pods.append(cuda_probe_pod(config, name=two, check="sharing", node=node.name, gpu_count=2,
                                       gpu_resource=resource))
            where[two] = (node.name, 1)
    outcomes = run_campaign(run_context(config), pods, timeout=config.getoption("gpuconf_timeout")) if pods else {}
    out: MpsPods = {}
    for name, (node_name, slot) in where.items():
        pair = list(out.get(node_name, (None, None)))
        pair[slot] = outcomes.get(name)
        out[node_name] = (pair[0], pair[1])
    return out


@pytest.mark.cncf("gpu_sharing")
@pytest.mark.check("sharing.replicas-match-config")
def test_replicas_match_config(gpu_node: str, gpu_inventory: Inventory, node_uuids: UuidViews,
                               expect_profile: ExpectProfile | None, record_property: Record) -> None:
    pool = declared_pool(expect_profile, gpu_inventory, gpu_node)
    judge(checks.evaluate_replicas_match_config(
        facts(gpu_inventory, gpu_node), physical=physical_views(gpu_inventory, node_uuids, gpu_node),
        declared=pool.sharing if pool is not None else None, pool=pool.name if pool is not None else None),
        record_property)


@pytest.mark.cncf("gpu_sharing")
@pytest.mark.needs_probe
@pytest.mark.check("sharing.oversubscription-runs")
def test_oversubscription_runs(gpu_node: str, gpu_inventory: Inventory, node_uuids: UuidViews,
                               oversubscription: dict[str, list[checks.Run] | str], record_property: Record) -> None:
    planned = oversubscription.get(gpu_node, f"{gpu_node} was not planned")
    f = facts(gpu_inventory, gpu_node)
    if isinstance(planned, str):
        kind = checks.not_planned_kind(f) if gpu_node in oversubscription else COULD_NOT_RUN
        judge(not_tested("sharing.oversubscription-runs", gpu_node, planned, kind=kind), record_property)
        return
    judge(checks.evaluate_oversubscription_runs(gpu_node, planned, physical=len(planned) - 1,
                                                node_uuids=node_uuids.get(gpu_node), replicas=f.replicas or 1,
                                                strategy=f.strategy), record_property)


@pytest.mark.cncf("gpu_sharing")
@pytest.mark.check("sharing.product-label-shared")
def test_product_label_shared(gpu_node: str, gpu_inventory: Inventory, record_property: Record) -> None:
    judge(checks.evaluate_product_label_shared(facts(gpu_inventory, gpu_node)), record_property)


def mps_client(request: pytest.FixtureRequest, f: checks.SharingFacts, node: str, cid: str,
               record: Record) -> PodOutcome:
    """The node's one-replica MPS client pod, or a not-tested verdict (which ends the test) saying why
    there is none."""
    why = checks.mps_plan(f)
    one, _ = request.getfixturevalue("mps_pods").get(node, (None, None)) if why is None else (None, None)
    kind = checks.not_planned_kind(f, mps=True)
    if why is None and one is None:
        why, kind = f"no one-replica MPS pod was launched on {node}", COULD_NOT_RUN
    if one is None:
        judge(not_tested(cid, node, why or "not an MPS node", kind=kind), record)
    assert one is not None  # judge() skips a not-tested verdict
    return one


@pytest.mark.cncf("gpu_sharing")
@pytest.mark.needs_probe
@pytest.mark.check("sharing.mps-client-limits")
def test_mps_client_limits(gpu_node: str, gpu_inventory: Inventory, record_property: Record,
                           request: pytest.FixtureRequest) -> None:
    f = facts(gpu_inventory, gpu_node)
    one = mps_client(request, f, gpu_node, "sharing.mps-client-limits", record_property)
    memory = gpu_inventory.node(gpu_node).labels.get("nvidia.com/gpu.memory", "")
    judge(checks.evaluate_mps_client_limits(f, sighting(one), memory_mib=int(memory) if memory.isdigit() else None),
          record_property)


@pytest.mark.cncf("gpu_sharing")
@pytest.mark.needs_probe
@pytest.mark.check("sharing.mps-thread-limit")
def test_mps_thread_limit(gpu_node: str, gpu_inventory: Inventory, record_property: Record,
                          request: pytest.FixtureRequest) -> None:
    f = facts(gpu_inventory, gpu_node)
    one = mps_client(request, f, gpu_node, "sharing.mps-thread-limit", record_property)
    judge(checks.evaluate_mps_thread_limit(f, sighting(one)), record_property)


@pytest.mark.cncf("gpu_sharing")
@pytest.mark.check("sharing.rejects-multi-replica-request")
def test_rejects_multi_replica_request(gpu_node: str, gpu_inventory: Inventory, record_property: Record,
                                       request: pytest.FixtureRequest) -> None:
    f = facts(gpu_inventory, gpu_node)
    why = checks.mps_plan(f, pods=3)
    if why is not None:
        judge(not_tested("sharing.rejects-multi-replica-request", gpu_node, why,
                         kind=checks.not_planned_kind(f, mps=True)), record_property)
        return
    _, two = request.getfixturevalue("mps_pods").get(gpu_node, (None, None))
    judge(checks.evaluate_rejects_multi_replica_request(f, two), record_property)
