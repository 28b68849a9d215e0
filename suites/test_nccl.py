"""NCCL, within each node: before any job, the node can take one that needs all its GPUs (or it is
named, not left to time out Pending); then one nccl-probe per node over every GPU, all nodes at once
(launch once, assert many): the all-reduce completes with correct results, reaches the busbw floor
for its hardware (gpuconf/data/nccl_floors.yaml, or the floor --expect declares for the pool), over
the transport the floor assumes. Nodes whose GPUs are shared (time-slicing, MPS) or MIG instances
are not NCCL nodes and skip with the reason.

Then across nodes, each job's ranks created together in one campaign (a headless Service per job
names rank 0, whose address every rank is given): the pairwise pass pairs the nodes that passed
the intra-node pass (0,1), (2,3)... within like hardware, all pairs at once; an odd node out and
each node of a failing pair are re-paired with nodes of passing pairs, so a node is named only
when the re-pairing isolates it. Last, one job across the nodes still standing (--nccl-nodes of
them, by default all, at most 16).

The burn-in tier (marked slow, run only with --burn-in ROUNDS) repeats the intra-node all-reduce
with --iters 200 on every node that passed it, ROUNDS campaigns one after the other: every round
completes correctly and none dips more than 10% below the node's best. The decisions are in
gpuconf.checks.nccl."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from gpuconf.checks import nccl as checks
from gpuconf.checks.expect import selector_labels
from gpuconf.cluster import PodOutcome, list_active_pods, run_campaign
from gpuconf.compat import tables
from gpuconf.compat.tables import NcclFloor
from gpuconf.kit import (
    ClusterHandle,
    gpu_ask,
    judge,
    probe_block,
    record_metrics,
    record_series,
    require,
    run_context,
    skip_not_tested,
)
from gpuconf.nodes import GpuRequest, NodeView, Unavailable, Via
from gpuconf.outcomes import COULD_NOT_RUN, NOT_APPLICABLE
from gpuconf.probe_pods import NCCL_JOB_LABEL, make_nccl_job_service, make_nccl_probe_pod, nccl_rank0_address
from gpuconf.probes import ProbeParseError
from gpuconf.probes.nccl import NcclProbeReport, parse_nccl_probe
from gpuconf.report.model import format_curve
from gpuconf.verdict import Outcome, Verdict

pytestmark = pytest.mark.nccl


def nccl_request(node: NodeView) -> GpuRequest | Unavailable:
    """Every whole GPU of the node for one NCCL pod (the node view's exclusive request, two or more),
    or why the node takes no all-GPU NCCL job (shared GPUs, MIG instances, one GPU or one usable DRA GPU)."""
    return node.exclusive(min_gpus=2, check="an all-GPU NCCL job")


def gpus_of(config: pytest.Config, node: NodeView) -> dict[str, object]:
    """How a node's nccl-probe pod asks for every GPU of the node: nvidia.com/gpu in its limits, or the
    whole-node claim (an ExactCount of the usable DRA GPUs) on a DRA-only node."""
    return gpu_ask(config, require(nccl_request(node)), check="nccl")


def whole_gpus(node: NodeView) -> int:
    ask = nccl_request(node)
    return ask.count if ask else 0


def multinode_nodes(views: Mapping[str, NodeView]) -> list[str]:
    """The nodes a multi-node job may span before the pairwise pass: the largest group with the same
    all-GPU count. In a sharded run the shard holding most of them runs the job (``shard_home``)."""
    by_hardware: dict[int, list[str]] = {}
    for node in views.values():
        if nccl_request(node):
            by_hardware.setdefault(whole_gpus(node), []).append(node.name)
    return max(by_hardware.values(), key=len, default=[])


def product(node: NodeView) -> str:
    return node.facts.product.value or ""


@dataclass
class IntraNode:
    preflight: dict[str, Verdict] = field(default_factory=dict)
    outcomes: dict[str, PodOutcome] = field(default_factory=dict)
    blocked: dict[str, str] = field(default_factory=dict)  # node -> why no probe image can start there


@pytest.fixture(scope="module")
def intra_node(request: pytest.FixtureRequest, gpu_cluster: ClusterHandle, gpu_nodes: dict[str, NodeView],
               expect_profile: object) -> IntraNode:
    config = request.config
    ctx = run_context(config)
    holders = checks.holders_by_node(list_active_pods(gpu_cluster.cluster), exclude_namespace=ctx.namespace)
    peers = checks.pool_gpu_counts([(n.name, product(n), whole_gpus(n)) for n in gpu_nodes.values() if nccl_request(n)])
    run = IntraNode()
    pods = []
    for node in gpu_nodes.values():
        if not nccl_request(node):
            continue
        if (block := probe_block(request.getfixturevalue("whole_node_probes"), node.name)) is not None:
            run.blocked[node.name] = block.reason  # its pod would be refused at creation: none is launched
        expected, expected_from = declared_gpus(expect_profile, node), "its --expect pool declares"
        if expected is None:
            expected, expected_from = peers.get(node.name), "its pool's other nodes have"
        ask = require(nccl_request(node))
        allocatable = ask.count - ask.held_back
        if ask.via is not Via.PLUGIN:
            # DRA: the job asks for the usable GPUs; a device-tainted one is left out (the note names it)
            # and reported once by the DRA suite, not again as a GPU missing from the pool
            allocatable, expected = ask.count, expected if not ask.held_back else None
        verdict = checks.evaluate_preflight(node.name, capacity=ask.count, allocatable=allocatable,
                                            holders=holders.get(node.name, []), expected=expected,
                                            expected_from=expected_from, note=ask.note)
        run.preflight[node.name] = verdict
        if verdict.outcome is Outcome.PASS and node.name not in run.blocked:
            pods.append(make_nccl_probe_pod(name=f"nccl-{node.name}", namespace=ctx.namespace, run_id=ctx.run_id,
                                            check="nccl", node=node.name, registry=config.getoption("--registry"),
                                            runtime_class=node.runtime_class, **gpus_of(config, node)))
    if pods:
        for name, outcome in run_campaign(ctx, pods, timeout=config.getoption("gpuconf_timeout")).items():
            run.outcomes[name.removeprefix("nccl-")] = outcome
    return run


def nccl_node(gpu_nodes: dict[str, NodeView], name: str) -> NodeView:
    node = gpu_nodes[name]
    require(nccl_request(node))
    return node


def report(run: IntraNode, node: str) -> NcclProbeReport:
    """The node's intra-node document, or a skip/failure that says why there is none."""
    verdict = run.preflight[node]
    if verdict.outcome is not Outcome.PASS:
        skip_not_tested(f"not run: {verdict.summary}", not_run_kind(run, node))
    outcome = run.outcomes[node]
    text = outcome.logs.get("probe")
    if text is None:
        pytest.fail(f"the nccl-probe pod on {node} produced no output: {outcome.phase} {outcome.reason or ''} "
                    f"{outcome.message or ''}".strip(), pytrace=False)
    try:
        return parse_nccl_probe(text, exit_code=outcome.container("probe").exit_code,
                                source=f"nccl-probe pod on {node}")
    except ProbeParseError as exc:
        unreadable = str(exc)
    pytest.fail(unreadable, pytrace=False)  # outside the handler: one message, no chained exception


def not_run_kind(run: IntraNode, node: str) -> str:
    """The NOT TESTED kind of a node the intra-node pass let no further: its preflight's where that is
    NOT TESTED (a busy node: node unavailable), else could-not-run."""
    verdict = run.preflight.get(node)
    return (verdict.kind or COULD_NOT_RUN) if verdict is not None and verdict.outcome is Outcome.NOT_TESTED \
        else COULD_NOT_RUN


def declared_gpus(expect_profile: object, node: NodeView) -> int | None:
    pool = expect_profile.pool_for(selector_labels(node)) if expect_profile is not None else None  # type: ignore[attr-defined]
    return pool.gpu.count if pool is not None and pool.gpu is not None else None


def declared_floor(expect_profile: object, node: NodeView) -> float | None:
    pool = expect_profile.pool_for(selector_labels(node)) if expect_profile is not None else None  # type: ignore[attr-defined]
    return pool.nccl.busbw_floor_gbps if pool is not None and pool.nccl is not None else None


@pytest.mark.check("nccl.preflight-gpus-free")
def test_preflight_gpus_free(gpu_node, gpu_nodes, intra_node, record_property):
    nccl_node(gpu_nodes, gpu_node)
    judge(intra_node.preflight[gpu_node], record_property)


@pytest.mark.needs_probe
@pytest.mark.check("nccl.allreduce-completes")
def test_allreduce_completes(gpu_node, gpu_nodes, intra_node, record_property):
    node = nccl_node(gpu_nodes, gpu_node)
    judge(checks.evaluate_allreduce_completes(gpu_node, report(intra_node, gpu_node), gpus=whole_gpus(node)),
          record_property)


@pytest.mark.needs_probe
@pytest.mark.check("nccl.busbw-above-floor")
def test_busbw_above_floor(gpu_node, gpu_nodes, intra_node, expect_profile, record_property):
    node = nccl_node(gpu_nodes, gpu_node)
    doc = report(intra_node, gpu_node)
    floor = checks.expected_floor(checks.probed_gpu(doc) or product(node), whole_gpus(node))
    declared = declared_floor(expect_profile, node)
    minimum = declared if declared is not None else floor.minimum_gbps if floor is not None else None
    record_series(record_property, "busbw", ((size.bytes, size.busbw_gbps) for size in doc.sizes),
                  x=("message size", "B"), y=("bus bandwidth", "GB/s"), floor=minimum, x_scale="log2",
                  title="all-reduce bus bandwidth by message size (floor: messages of 1 GiB and more)")
    judge(checks.evaluate_busbw(gpu_node, doc, floor, declared_gbps=declared), record_property)


@pytest.mark.needs_probe
@pytest.mark.check("nccl.transport-expected")
def test_transport_expected(gpu_node, gpu_nodes, intra_node, record_property):
    node = nccl_node(gpu_nodes, gpu_node)
    doc = report(intra_node, gpu_node)
    floor = checks.expected_floor(checks.probed_gpu(doc) or product(node), whole_gpus(node))
    judge(checks.evaluate_transport(gpu_node, doc, floor), record_property)


# -------------------------------------------------------------------------------------------------
# Across nodes

#: How long rank 0 waits for its peers and a peer tries to reach rank 0; also how long a rank may
#: stay unplaced (a rank that cannot be scheduled is reported, not waited on).
BOOTSTRAP_TIMEOUT_S = 300
#: The most nodes in the multi-node job.
MAX_MULTINODE = 16


def intra_node_failure(run: IntraNode, node: str, gpus: int) -> str | None:
    """Why ``node`` does not go on to the pairwise pass (None: its intra-node all-reduce completed
    correctly)."""
    verdict = run.preflight[node]
    if verdict.outcome is not Outcome.PASS:
        return f"its preflight did not pass ({verdict.summary})"
    if node in run.blocked:
        return run.blocked[node]
    outcome = run.outcomes[node]
    text = outcome.logs.get("probe")
    if text is None:
        return f"its intra-node probe produced no output ({outcome.phase} {outcome.reason or ''})".strip()
    try:
        doc = parse_nccl_probe(text, exit_code=outcome.container("probe").exit_code, source=f"nccl-probe on {node}")
    except ProbeParseError as exc:
        return f"its intra-node document is unreadable ({exc})"
    verdict = checks.evaluate_allreduce_completes(node, doc, gpus=gpus)
    return None if verdict.outcome is Outcome.PASS else f"nccl.allreduce-completes failed ({verdict.summary})"


def rank_result(rank: int, node: str, outcome: PodOutcome | None) -> checks.RankResult:
    if outcome is None:
        return checks.RankResult(rank, node, None, "its pod was not created")
    text = outcome.logs.get("probe")
    if text is None:
        what = "never placed" if outcome.unschedulable else "no output"
        return checks.RankResult(rank, node, None, " ".join(
            x for x in (f"{what}:", outcome.phase, outcome.reason, outcome.message) if x))
    try:
        return checks.RankResult(rank, node, parse_nccl_probe(text, exit_code=outcome.container("probe").exit_code,
                                                              source=f"nccl-probe rank {rank} on {node}"))
    except ProbeParseError as exc:
        return checks.RankResult(rank, node, None, str(exc))


def run_jobs(config: pytest.Config, jobs: list[tuple[str, list[NodeView]]]) -> list[checks.JobResult]:
    """Every job's headless Service, then every rank of every job in one campaign."""
    if not jobs:
        return []
    ctx = run_context(config)
    core = ctx.cluster.core
    pods = []
    for job, nodes in jobs:
        ctx.create("service", core.create_namespaced_service, core.delete_namespaced_service,
                   make_nccl_job_service(name=job, namespace=ctx.namespace, run_id=ctx.run_id, check="nccl", job=job))
        address = nccl_rank0_address(job=job, service=job, namespace=ctx.namespace)
        for rank, node in enumerate(nodes):
            pods.append(make_nccl_probe_pod(
                name=f"{job}-r{rank}", namespace=ctx.namespace, run_id=ctx.run_id, check="nccl", node=node.name,
                registry=config.getoption("--registry"), **gpus_of(config, node),
                runtime_class=node.runtime_class, rank=rank, world_size=len(nodes), id_addr=address,
                bootstrap_timeout_s=BOOTSTRAP_TIMEOUT_S,
                hostname=f"{job}-r{rank}", subdomain=job, labels={NCCL_JOB_LABEL: job},
                schedule_budget_s=BOOTSTRAP_TIMEOUT_S, kueue_queue=config.getoption("--kueue-queue"), gang=job))
    outcomes = run_campaign(ctx, pods, timeout=config.getoption("gpuconf_timeout"),
                            schedule_budget=BOOTSTRAP_TIMEOUT_S)
    return [checks.combine_job(job, [n.name for n in nodes],
                               [rank_result(r, n.name, outcomes.get(f"{job}-r{r}")) for r, n in enumerate(nodes)])
            for job, nodes in jobs]


def declared_nic_floor(expect_profile: object, node: NodeView) -> NcclFloor | None:
    """The inter-node floor of the NIC figure --expect declares for the node's pool (nccl.nic_gbps
    and nccl.nics), if it declares one. GFD labels no NICs and the nccl-probe reports no link
    speed, so without a declaration the pairs are judged against each other."""
    pool = expect_profile.pool_for(selector_labels(node)) if expect_profile is not None else None  # type: ignore[attr-defined]
    spec = pool.nccl if pool is not None else None
    nic_gbps, nics = getattr(spec, "nic_gbps", None), getattr(spec, "nics", None)
    return tables.inter_node_floor(int(nic_gbps), int(nics)) if nic_gbps and nics else None


def hardware(node: NodeView) -> str:
    return f"{whole_gpus(node)} x {product(node) or 'unknown GPU'}"


@dataclass
class Pairwise:
    excluded: dict[str, str] = field(default_factory=dict)  # node -> why it is not in the pass
    unpaired: dict[str, str] = field(default_factory=dict)  # node -> why it found no partner
    kinds: dict[str, str] = field(default_factory=dict)  # node -> the NOT TESTED kind of either
    jobs: list[checks.JobResult] = field(default_factory=list)
    completion: list[checks.PairCall] = field(default_factory=list)
    busbw: list[checks.PairCall] = field(default_factory=list)


def pair_calls(jobs: list[checks.JobResult], group_of: dict[str, str], floors: dict[str, NcclFloor | None]
               ) -> tuple[list[checks.PairCall], list[checks.PairCall]]:
    completion = [checks.pair_completion_call(j) for j in jobs]
    busbw = []
    for job in jobs:
        both = [floors.get(n) for n in job.nodes]
        floor = min(both, key=lambda f: f.minimum_gbps) if all(both) else None  # type: ignore[union-attr]
        like = [j for j in jobs if group_of[j.nodes[0]] == group_of[job.nodes[0]]]
        busbw.append(checks.pair_busbw_call(job, floor, checks.peer_floor(like)))
    return completion, busbw


@pytest.fixture(scope="module")
def pairwise(request: pytest.FixtureRequest, gpu_nodes: dict[str, NodeView], intra_node: IntraNode,
             expect_profile: object) -> Pairwise:
    config = request.config
    out = Pairwise()
    nodes = {name: n for name, n in gpu_nodes.items() if nccl_request(n)}
    groups: dict[str, list[str]] = {}
    for name, node in nodes.items():
        why = intra_node_failure(intra_node, name, whole_gpus(node))
        if why is not None:
            out.excluded[name] = f"{name} is excluded from the pairwise pass: {why}"
            out.kinds[name] = not_run_kind(intra_node, name)
        else:
            groups.setdefault(hardware(node), []).append(name)
    group_of = {n: g for g, members in groups.items() for n in members}
    floors = {n: declared_nic_floor(expect_profile, nodes[n]) for n in group_of}
    pairs, odd = checks.first_round(groups)
    out.jobs = run_jobs(config, [(f"nccl-p1-{i}", [nodes[a], nodes[b]]) for i, (a, b) in enumerate(pairs)])
    completion, busbw = pair_calls(out.jobs, group_of, floors)
    first = [(job.nodes, c.ok is True and b.ok is not False) for job, c, b in zip(out.jobs, completion, busbw,
                                                                                  strict=True)]
    for number, pairs2 in enumerate(checks.second_round([((a, b), ok) for (a, b), ok in first], odd, group_of),
                                    start=2):
        out.jobs += run_jobs(config, [(f"nccl-p{number}-{i}", [nodes[a], nodes[b]]) for i, (a, b) in
                                      enumerate(pairs2)])
    out.completion, out.busbw = pair_calls(out.jobs, group_of, floors)
    alike = Counter(hardware(n) for n in nodes.values())  # NCCL nodes by hardware, before any pass
    for name in group_of:
        if not any(name in j.nodes for j in out.jobs):
            out.unpaired[name] = (f"{name} found no partner: no other node of its hardware ({group_of[name]}) "
                                  "passed the intra-node pass and a passing pair")
            # the only node of its hardware has no partner by the cluster's shape
            out.kinds[name] = NOT_APPLICABLE if alike[group_of[name]] < 2 else COULD_NOT_RUN
    return out


def pairwise_node(gpu_nodes: dict[str, NodeView], run: Pairwise, name: str) -> None:
    nccl_node(gpu_nodes, name)
    reason = run.excluded.get(name) or run.unpaired.get(name)
    if reason:
        skip_not_tested(reason, run.kinds.get(name, COULD_NOT_RUN))


@pytest.mark.needs_probe
@pytest.mark.check("nccl.pairwise-completes")
def test_pairwise_completes(gpu_node, gpu_nodes, pairwise, record_property):
    pairwise_node(gpu_nodes, pairwise, gpu_node)
    judge(checks.evaluate_pairwise("nccl.pairwise-completes", gpu_node, pairwise.completion), record_property)


@pytest.mark.needs_probe
@pytest.mark.check("nccl.pairwise-busbw-above-floor")
def test_pairwise_busbw_above_floor(gpu_node, gpu_nodes, pairwise, record_property):
    pairwise_node(gpu_nodes, pairwise, gpu_node)
    judge(checks.evaluate_pairwise("nccl.pairwise-busbw-above-floor", gpu_node, pairwise.busbw), record_property)


@dataclass
class MultiNode:
    job: checks.JobResult | None = None
    why_not: str = ""
    slowest: str | None = None
    kind: str = COULD_NOT_RUN  # why_not's NOT TESTED kind


@pytest.fixture(scope="module")
def multinode(request: pytest.FixtureRequest, gpu_nodes: dict[str, NodeView], pairwise: Pairwise,
              expect_profile: object) -> MultiNode:
    config = request.config
    wanted = min(config.getoption("--nccl-nodes") or MAX_MULTINODE, MAX_MULTINODE)
    blamed = set(checks_failing(pairwise))
    by_hardware: dict[str, list[NodeView]] = {}
    for node in gpu_nodes.values():
        if nccl_request(node) and node.name not in pairwise.excluded and node.name not in blamed:
            by_hardware.setdefault(str(whole_gpus(node)), []).append(node)
    chosen = max(by_hardware.values(), key=len, default=[])[:wanted]
    if len(chosen) < 2:
        # not applicable where no two nodes of one GPU count take an NCCL job at all (MIG, shared GPUs)
        alike = Counter(str(whole_gpus(n)) for n in gpu_nodes.values() if nccl_request(n))
        return MultiNode(why_not=f"{len(chosen)} node(s) eligible for a multi-node job with the same GPU count "
                         f"(after the intra-node and pairwise passes; --nccl-nodes {wanted}): nothing across nodes",
                         kind=NOT_APPLICABLE if max(alike.values(), default=0) < 2 else COULD_NOT_RUN)
    (job,) = run_jobs(config, [("nccl-mn", chosen)])
    floors = [(f, n.name) for n in chosen if (f := declared_nic_floor(expect_profile, n)) is not None]
    slowest = None
    if floors:
        floor, name = min(floors, key=lambda x: x[0].minimum_gbps)
        slowest = f"{name}: {floor.minimum_gbps:g} GB/s ({floor.key})"
    return MultiNode(job=job, slowest=slowest or "no NIC figure declared (--expect)")


def checks_failing(run: Pairwise) -> list[str]:
    """Nodes whose pairwise-completes verdict failed (blamed, or in a failing pair not isolated)."""
    nodes = dict.fromkeys(n for c in run.completion for n in c.nodes)
    return [n for n in nodes
            if checks.evaluate_pairwise("nccl.pairwise-completes", n, run.completion).outcome is Outcome.FAIL]


@pytest.mark.cncf("gang_scheduling")
@pytest.mark.check("nccl.multinode-completes")
@pytest.mark.shard_home.with_args(multinode_nodes)
def test_multinode_completes(multinode, record_property):
    if multinode.job is None:
        skip_not_tested(multinode.why_not, multinode.kind)
    judge(checks.evaluate_multinode(multinode.job, multinode.slowest), record_property)


# -------------------------------------------------------------------------------------------------
# Burn-in (the slow tier, --burn-in ROUNDS): the intra-node all-reduce again and again

#: Timed iterations per message size in a burn-in round (the probe's default is 20).
BURN_IN_ITERS = 200


@dataclass
class BurnIn:
    excluded: dict[str, str] = field(default_factory=dict)  # node -> why it takes no burn-in rounds
    kinds: dict[str, str] = field(default_factory=dict)  # node -> that NOT TESTED's kind
    rounds: dict[str, list[checks.BurnInRound]] = field(default_factory=dict)


def burn_in_round(number: int, outcome: PodOutcome | None) -> checks.BurnInRound:
    if outcome is None:
        return checks.BurnInRound(number, None, "its pod was not created")
    text = outcome.logs.get("probe")
    if text is None:
        return checks.BurnInRound(number, None, " ".join(
            x for x in ("no output:", outcome.phase, outcome.reason, outcome.message) if x))
    try:
        return checks.BurnInRound(number, parse_nccl_probe(text, exit_code=outcome.container("probe").exit_code,
                                                           source=f"burn-in round {number} nccl-probe"))
    except ProbeParseError as exc:
        return checks.BurnInRound(number, None, str(exc))


@pytest.fixture(scope="module")
def burn_in(request: pytest.FixtureRequest, gpu_nodes: dict[str, NodeView], intra_node: IntraNode) -> BurnIn:
    """ROUNDS campaigns one after the other, each one all-GPU nccl-probe (--iters 200) on every node
    whose intra-node all-reduce completed correctly, all nodes together."""
    config = request.config
    ctx = run_context(config)
    rounds = int(config.getoption("burn_in") or 1)
    out = BurnIn()
    nodes = []
    for node in gpu_nodes.values():
        if not nccl_request(node):
            continue
        why = intra_node_failure(intra_node, node.name, whole_gpus(node))
        if why is not None:
            out.excluded[node.name] = f"{node.name} is excluded from the burn-in: {why}"
            out.kinds[node.name] = not_run_kind(intra_node, node.name)
        else:
            nodes.append(node)
            out.rounds[node.name] = []
    for number in range(1, rounds + 1):
        if not nodes:
            break
        pods = [make_nccl_probe_pod(name=f"nccl-bi{number}-{node.name}", namespace=ctx.namespace, run_id=ctx.run_id,
                                    check="nccl", node=node.name, registry=config.getoption("--registry"),
                                    runtime_class=node.runtime_class, iters=BURN_IN_ITERS, **gpus_of(config, node))
                for node in nodes]
        outcomes = run_campaign(ctx, pods, timeout=config.getoption("gpuconf_timeout"))
        for node in nodes:
            out.rounds[node.name].append(burn_in_round(number, outcomes.get(f"nccl-bi{number}-{node.name}")))
    return out


@pytest.mark.slow
@pytest.mark.needs_probe
@pytest.mark.check("nccl.burn-in-stable")
def test_burn_in_stable(gpu_node, gpu_nodes, burn_in, record_property):
    node = nccl_node(gpu_nodes, gpu_node)
    if gpu_node in burn_in.excluded:
        skip_not_tested(burn_in.excluded[gpu_node], burn_in.kinds.get(gpu_node, COULD_NOT_RUN))
    rounds = burn_in.rounds[gpu_node]
    verdict = checks.evaluate_burn_in_stable(gpu_node, rounds, gpus=whole_gpus(node))
    for line in verdict.evidence:  # every round's figure, in junit.xml also when the check passes
        record_property("gpuconf.burn-in", line)
    # report.json carries each round's figure; `gpuconf report diff` compares the curve of the node's slowest round
    record_metrics(record_property, **{f"burn_in_round{r.number}_busbw_gbps": r.report.large_message_avg_busbw_gbps
                                       for r in rounds if r.report is not None})
    measured = [r.report for r in rounds if r.report is not None and r.report.large_message_avg_busbw_gbps is not None]
    if measured:
        slowest = min(measured, key=lambda d: d.large_message_avg_busbw_gbps or 0.0)
        record_property("gpuconf.curve", format_curve((size.bytes, size.busbw_gbps) for size in slowest.sizes))
    judge(verdict, record_property)
