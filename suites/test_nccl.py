"""NCCL, within each node: before any job, the node can take one that needs all its GPUs (or it is
named, not left to time out Pending); then one nccl-probe per node over every GPU, all nodes at once
(launch once, assert many): the all-reduce completes with correct results, reaches the busbw floor
for its hardware (gpuconf/data/nccl_floors.yaml, or the floor --expect declares for the pool), over
the transport the floor assumes. Nodes whose GPUs are shared (time-slicing, MPS) or MIG instances
are not NCCL nodes and skip with the reason. The decisions are in gpuconf.checks.nccl."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from gpuconf.checks import nccl as checks
from gpuconf.cluster import GpuNode, Inventory, PodOutcome, list_active_pods, run_campaign
from gpuconf.plugin import ClusterHandle, judge, run_context
from gpuconf.probe_pods import make_nccl_probe_pod
from gpuconf.probes import ProbeParseError
from gpuconf.probes.nccl import NcclProbeReport, parse_nccl_probe
from gpuconf.report.model import format_curve
from gpuconf.verdict import Outcome, Verdict

pytestmark = pytest.mark.nccl


def whole_gpus(node: GpuNode) -> int:
    return int(node.capacity.get("nvidia.com/gpu", "0") or 0)


def not_an_nccl_node(node: GpuNode) -> str | None:
    """Why the node takes no all-GPU NCCL job, or None."""
    labels = node.labels
    if int(labels.get("nvidia.com/gpu.replicas", "1") or 1) > 1:
        return (f"{node.name} shares its GPUs ({labels.get('nvidia.com/gpu.sharing-strategy', 'time-slicing')}, "
                f"{labels['nvidia.com/gpu.replicas']} replicas): an NCCL job needs whole GPUs")
    if "-MIG-" in labels.get("nvidia.com/gpu.product", "") or not whole_gpus(node):
        return f"{node.name} advertises no whole GPUs as nvidia.com/gpu (MIG instances or DRA only)"
    if whole_gpus(node) < 2:
        return f"{node.name} has one GPU: nothing to all-reduce across within the node"
    return None


@dataclass
class IntraNode:
    preflight: dict[str, Verdict] = field(default_factory=dict)
    outcomes: dict[str, PodOutcome] = field(default_factory=dict)


@pytest.fixture(scope="module")
def intra_node(request: pytest.FixtureRequest, gpu_cluster: ClusterHandle, gpu_inventory: Inventory) -> IntraNode:
    config = request.config
    ctx = run_context(config)
    holders = checks.holders_by_node(list_active_pods(gpu_cluster.cluster), exclude_namespace=ctx.namespace)
    run = IntraNode()
    pods = []
    runtime_class = "nvidia" if any(rc.name == "nvidia" for rc in gpu_inventory.runtime_classes) else None
    for node in gpu_inventory.gpu_nodes:
        if not_an_nccl_node(node):
            continue
        verdict = checks.evaluate_preflight(node.name, capacity=whole_gpus(node),
                                            allocatable=int(node.allocatable.get("nvidia.com/gpu", "0") or 0),
                                            holders=holders.get(node.name, []))
        run.preflight[node.name] = verdict
        if verdict.outcome is Outcome.PASS:
            pods.append(make_nccl_probe_pod(name=f"nccl-{node.name}", namespace=ctx.namespace, run_id=ctx.run_id,
                                            check="nccl", node=node.name, gpu_count=whole_gpus(node),
                                            registry=config.getoption("--registry"), runtime_class=runtime_class))
    if pods:
        for name, outcome in run_campaign(ctx, pods, timeout=config.getoption("gpuconf_timeout")).items():
            run.outcomes[name.removeprefix("nccl-")] = outcome
    return run


def nccl_node(inventory: Inventory, name: str) -> GpuNode:
    node = inventory.node(name)
    reason = not_an_nccl_node(node)
    if reason:
        pytest.skip(reason)
    return node


def report(run: IntraNode, node: str) -> NcclProbeReport:
    """The node's intra-node document, or a skip/failure that says why there is none."""
    verdict = run.preflight[node]
    if verdict.outcome is not Outcome.PASS:
        pytest.skip(f"not run: {verdict.summary}")
    outcome = run.outcomes[node]
    text = outcome.logs.get("probe")
    if text is None:
        pytest.fail(f"the nccl-probe pod on {node} produced no output: {outcome.phase} {outcome.reason or ''} "
                    f"{outcome.message or ''}".strip(), pytrace=False)
    try:
        return parse_nccl_probe(text, exit_code=outcome.container("probe").exit_code,
                                source=f"nccl-probe pod on {node}")
    except ProbeParseError as exc:
        pytest.fail(str(exc), pytrace=False)


def declared_floor(expect_profile: object, node: GpuNode) -> float | None:
    pool = expect_profile.pool_for(node.labels) if expect_profile is not None else None  # type: ignore[attr-defined]
    return pool.nccl.busbw_floor_gbps if pool is not None and pool.nccl is not None else None


@pytest.mark.check("nccl.preflight-gpus-free")
def test_preflight_gpus_free(gpu_node, gpu_inventory, intra_node, record_property):
    nccl_node(gpu_inventory, gpu_node)
    judge(intra_node.preflight[gpu_node], record_property)


@pytest.mark.check("nccl.allreduce-completes")
def test_allreduce_completes(gpu_node, gpu_inventory, intra_node, record_property):
    nccl_node(gpu_inventory, gpu_node)
    judge(checks.evaluate_allreduce_completes(gpu_node, report(intra_node, gpu_node)), record_property)


@pytest.mark.check("nccl.busbw-above-floor")
def test_busbw_above_floor(gpu_node, gpu_inventory, intra_node, expect_profile, record_property):
    node = nccl_node(gpu_inventory, gpu_node)
    doc = report(intra_node, gpu_node)
    floor = checks.expected_floor(node.labels.get("nvidia.com/gpu.product", ""), whole_gpus(node))
    record_property("gpuconf.curve", format_curve((size.bytes, size.busbw_gbps) for size in doc.sizes))
    judge(checks.evaluate_busbw(gpu_node, doc, floor, declared_gbps=declared_floor(expect_profile, node)),
          record_property)


@pytest.mark.check("nccl.transport-expected")
def test_transport_expected(gpu_node, gpu_inventory, intra_node, record_property):
    node = nccl_node(gpu_inventory, gpu_node)
    floor = checks.expected_floor(node.labels.get("nvidia.com/gpu.product", ""), whole_gpus(node))
    judge(checks.evaluate_transport(gpu_node, report(intra_node, gpu_node), floor), record_property)
