"""NCCL checks: before a job, the node can take it; within a node, the all-GPU all-reduce completes
with correct results, at the busbw its hardware should give, over the transport it should use;
then across nodes, in pairs (each failure re-paired until one node is isolated) and in one
multi-node job.

Floors come from gpuconf/data/nccl_floors.yaml (gpuconf.compat.tables.intra_node_floor): hardware
not in the data is measured and reported, never judged. The figure compared is the large-message
busbw (messages of 1 GiB and more, as the probe averages them), never the mean over every size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gpuconf.compat import tables
from gpuconf.compat.tables import NcclFloor
from gpuconf.nodes.availability import GpuHolder, gpu_holders
from gpuconf.outcomes import COULD_NOT_RUN, NODE_UNAVAILABLE, NOT_APPLICABLE
from gpuconf.probes.nccl import NcclProbeReport
from gpuconf.verdict import Outcome, Verdict, failed, not_tested, passed

__all__ = ["BURN_IN_TOLERANCE", "PEER_TOLERANCE", "BurnInRound", "GpuHolder", "JobResult", "PairCall", "RankResult",
           "combine_job", "evaluate_allreduce_completes", "evaluate_burn_in_stable", "evaluate_busbw",
           "evaluate_multinode", "evaluate_pairwise", "evaluate_preflight", "evaluate_transport", "expected_floor",
           "first_round", "holders_by_node", "pair_busbw_call", "pair_completion_call", "peer_floor", "pool_gpu_counts",
           "probed_gpu", "second_round"]

#: Parts that come on 8-GPU NVSwitch boards (HGX/DGX) when a node has eight of them.
_NVSWITCH_PARTS = ("NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA H200",
                   "NVIDIA B200")


def evaluate_preflight(node: str, *, capacity: int, allocatable: int, holders: Sequence[GpuHolder],
                       expected: int | None = None, expected_from: str = "", note: str = "") -> Verdict:
    """A node takes an all-GPU NCCL job only with every GPU it should have (``expected``: what
    --expect declares or its pool's other nodes have, ``expected_from`` says which) allocatable and
    free; otherwise say so by name now, rather than let the job time out Pending or run short.
    ``note``: how the job asks for them (the node view's, e.g. the device-tainted GPUs left out)."""
    cid = "nccl.preflight-gpus-free"
    if capacity < 1:
        return not_tested(cid, node, f"{node} advertises no nvidia.com/gpu", kind=NOT_APPLICABLE)
    full = max(capacity, expected or 0)
    if allocatable < full:
        missing = expected is not None and expected > capacity
        why = f" ({expected_from} {expected})" if missing else ""
        remedy = (f"The node advertises {capacity} GPUs where {expected_from} {expected}: a GPU is missing from "
                  "it (see inventory.gpu-count-matches-expected; nvidia-smi -L, dmesg for Xid 79); drain the node "
                  "and recover or replace the GPU." if missing else
                  f"The device plugin marks {capacity - allocatable} of the node's {capacity} GPUs unhealthy (see "
                  "inventory.allocatable-matches-capacity); drain the node and reset or replace the GPU.")
        return failed(cid, node, f"{node} has {allocatable}/{full} GPUs allocatable{why}: an all-GPU NCCL job "
                      "cannot be placed there", expected=f"{full}/{full} allocatable",
                      observed=f"{allocatable}/{full} allocatable", remedy=remedy)
    used = sum(h.gpus for h in holders)
    if used:
        return not_tested(cid, node, f"{node} has {used} of {capacity} GPUs in use by other pods ("
                          + ", ".join(f"{h.namespace}/{h.name}: {h.gpus}" for h in holders[:5])
                          + (f" and {len(holders) - 5} more" if len(holders) > 5 else "")
                          + "): NCCL runs on idle nodes only", kind=NODE_UNAVAILABLE)
    return passed(cid, node, f"all {capacity} GPUs allocatable and free{note}")


def pool_gpu_counts(nodes: Sequence[tuple[str, str, int]]) -> dict[str, int]:
    """The whole-GPU count a node's pool has (the most common count among nodes of the same GPU
    product, ties to the larger): (name, product, count) in, node -> count out."""
    by_product: dict[str, list[int]] = {}
    for _, product, count in nodes:
        by_product.setdefault(product, []).append(count)
    usual = {p: max(set(c), key=lambda n: (c.count(n), n)) for p, c in by_product.items()}
    return {name: usual[product] for name, product, _ in nodes}


def evaluate_allreduce_completes(node: str, report: NcclProbeReport, *, gpus: int) -> Verdict:
    """The all-GPU all-reduce completed its sweep with correct results at every message size, over
    the ``gpus`` GPUs its pod asked for. A sweep the document calls complete but that records no
    message size proves nothing about the results (NOT TESTED); one rank per GPU asked for is what
    the document must show, so a job over fewer (or more) GPUs than asked for fails."""
    cid = "nccl.allreduce-completes"
    if report.hung:
        at = f" at {report.running_bytes} bytes" if report.running_bytes is not None else ""
        return failed(cid, node, f"the all-reduce hung{at}: {report.exit_reason}", expected="every size completes",
                      observed=f"hung{at} (exit {report.exit_code})")
    if report.exit_code != 0 or not report.sweep_completed:
        return failed(cid, node, f"the NCCL probe did not complete its sweep: {report.exit_reason}",
                      expected="exit 0, sweep completed", observed=f"exit {report.exit_code}")
    wrong = [s for s in report.sizes if not s.correct]
    if wrong or report.all_correct is False:
        return failed(cid, node, f"wrong all-reduce results at {len(wrong)} message size(s)",
                      expected="every element correct",
                      observed=", ".join(f"{s.bytes} B: {s.mismatches} mismatches" for s in wrong[:5]))
    if not report.sizes:
        return not_tested(cid, node, f"the NCCL probe on {node} says its sweep completed but records no message "
                          "size: no all-reduce result to judge", kind=COULD_NOT_RUN)
    ranks = report.nranks
    if ranks is None:
        return not_tested(cid, node, f"the NCCL probe on {node} records no rank count: whether the all-reduce ran "
                          f"over the {gpus} GPUs asked for is unknown", kind=COULD_NOT_RUN)
    if ranks != gpus:
        return failed(cid, node, f"the all-reduce ran over {ranks} rank(s) where its pod asked for {gpus} GPUs: "
                      f"the probe used {len(report.local_gpu_uuids)} GPU(s), "
                      + ("so the job did not span them all" if ranks < gpus else "more than the pod was given"),
                      expected=f"{gpus} ranks, one per GPU asked for", observed=f"{ranks} ranks",
                      evidence=tuple(f"GPU {uuid}" for uuid in report.local_gpu_uuids))
    return passed(cid, node, f"all-reduce over {ranks} GPUs completed correctly at {len(report.sizes)} message sizes")


def probed_gpu(report: NcclProbeReport) -> str | None:
    """The GPU model the all-reduce ran on as CUDA in the probe names it (the most direct reading, over
    a GFD label or slice attribute), when every GPU of the job is one model; else None."""
    names = {g.get("name") for g in report.raw.get("local_gpus") or () if isinstance(g, dict)}
    name = names.pop() if len(names) == 1 else None
    return name if isinstance(name, str) and name else None


def _fabric(gpu: str, gpus: int) -> str:
    model = tables.find_gpu(gpu)
    return "nvswitch" if model is not None and model.name in _NVSWITCH_PARTS and gpus == 8 else "pcie"


def expected_floor(gpu: str, gpus: int) -> NcclFloor | None:
    """The floor the node should reach: its best algorithm's (NVLS where the data has it, else ring)."""
    fabric = _fabric(gpu, gpus)
    for algorithm in ("nvls", "ring"):
        floor = tables.intra_node_floor(gpu, gpus, fabric, algorithm)
        if floor is not None:
            return floor
    return None


def evaluate_busbw(node: str, report: NcclProbeReport, floor: NcclFloor | None, *,
                   declared_gbps: float | None = None) -> Verdict:
    """Large-message busbw against the data's floor (or the floor --expect declares for the pool)."""
    cid = "nccl.busbw-above-floor"
    measured = report.large_message_avg_busbw_gbps
    if measured is None:
        return not_tested(cid, node, f"no large-message figure: {report.exit_reason}", kind=COULD_NOT_RUN)
    if declared_gbps is not None:
        minimum, what = declared_gbps, f"the declared floor {declared_gbps:g} GB/s (--expect)"
    elif floor is not None:
        minimum, what = floor.minimum_gbps, (f"{floor.figure_gbps:g} GB/s less {floor.tolerance:.0%} for "
                                             f"{floor.key} ({floor.source})")
    else:
        return not_tested(cid, node, f"measured {measured:g} GB/s; no floor for this hardware in "
                          "gpuconf/data/nccl_floors.yaml (recorded, not judged)", kind=COULD_NOT_RUN)
    if measured < minimum:
        return failed(cid, node, f"large-message all-reduce busbw {measured:g} GB/s is below {what}",
                      expected=f">= {minimum:g} GB/s", observed=f"{measured:g} GB/s",
                      evidence=(f"peak {report.peak_busbw_gbps} GB/s; transports {', '.join(report.transports)}",))
    return passed(cid, node, f"large-message busbw {measured:g} GB/s >= {minimum:g} GB/s ({what})")


def evaluate_transport(node: str, report: NcclProbeReport, floor: NcclFloor | None) -> Verdict:
    """NCCL chose the transport the hardware calls for (NVLS on NVSwitch Hopper, P2P not SHM...)."""
    cid = "nccl.transport-expected"
    if floor is None:
        return not_tested(cid, node, "no expectation for this hardware in gpuconf/data/nccl_floors.yaml "
                          f"(NCCL chose: {', '.join(report.transports) or 'unknown'})", kind=COULD_NOT_RUN)
    if not report.transports:
        return not_tested(cid, node, f"the probe reported no transport: {report.exit_reason}", kind=COULD_NOT_RUN)
    want = floor.transport.split("/")[0]
    if not any(t == want or t.startswith(want + "/") for t in report.transports):
        return failed(cid, node, f"NCCL chose {', '.join(report.transports)}, not {floor.transport}, for {floor.key}",
                      expected=floor.transport, observed=", ".join(report.transports))
    return passed(cid, node, f"NCCL uses {floor.transport} ({', '.join(report.transports)})")


def holders_by_node(pods: Sequence[Mapping[str, object]], *, exclude_namespace: str) -> dict[str, list[GpuHolder]]:
    """Pods (API objects, not finished) holding nvidia.com/gpu, by node; the run's own excluded."""
    held = gpu_holders(pods, exclude_namespace=exclude_namespace)
    return {node: mine for node, holders in held.items()
            if (mine := [h for h in holders if h.resource == "nvidia.com/gpu"])}


# -------------------------------------------------------------------------------------------------
# Across nodes: pairs, re-pairing, one multi-node job

#: Without a declared NIC figure, a pair is judged against the fastest pair of the same hardware:
#: below this fraction of it, the pair is slow. Only with two pairs or more to compare.
PEER_TOLERANCE = 0.10


@dataclass(frozen=True)
class RankResult:
    """One rank of a multi-process job: its document, or why there is none (``problem``)."""

    rank: int
    node: str
    report: NcclProbeReport | None
    problem: str | None = None

    @property
    def finished(self) -> bool:
        r = self.report
        return (r is not None and r.exit_code == 0 and not r.hung and bool(r.sweep_completed)
                and r.all_correct is not False and bool(r.sizes) and all(s.correct for s in r.sizes))

    def why(self) -> str:
        r = self.report
        if r is None:
            return f"rank {self.rank} on {self.node}: {self.problem or 'no document'}"
        if r.hung:
            at = f" at {r.running_bytes} bytes" if r.running_bytes is not None else ""
            return f"rank {self.rank} on {self.node} hung{at}: {r.exit_reason}"
        wrong = [x for x in r.sizes if not x.correct]
        if r.exit_code == 0 and wrong:
            return f"rank {self.rank} on {self.node}: wrong results at {len(wrong)} message size(s)"
        if r.exit_code == 0 and r.sweep_completed and not r.sizes:
            return f"rank {self.rank} on {self.node}: its sweep records no message size"
        return f"rank {self.rank} on {self.node} exited {r.exit_code}: {r.exit_reason}"


@dataclass(frozen=True)
class JobResult:
    """A multi-process job over ``nodes`` (by rank), its ranks' documents combined."""

    name: str
    nodes: tuple[str, ...]
    ranks: tuple[RankResult, ...] = field(repr=False)

    @property
    def completed(self) -> bool:
        return len(self.ranks) == len(self.nodes) and all(r.finished for r in self.ranks)

    @property
    def unfinished(self) -> tuple[RankResult, ...]:
        return tuple(r for r in self.ranks if not r.finished)

    @property
    def busbw_gbps(self) -> float | None:
        """The job's large-message busbw: the slowest rank's (each rank times its own GPUs)."""
        figures = [r.report.large_message_avg_busbw_gbps for r in self.ranks if r.report is not None]
        known = [f for f in figures if f is not None]
        return min(known) if known and len(known) == len(self.ranks) else None

    @property
    def network(self) -> str | None:
        names = {r.report.network for r in self.ranks if r.report is not None and r.report.network}
        return ", ".join(sorted(names)) if names else None

    @property
    def label(self) -> str:
        return " + ".join(self.nodes)

    def failure(self) -> str:
        """Why the job did not complete, every unfinished rank named."""
        return "; ".join(r.why() for r in self.unfinished) or "not every rank reported"


def combine_job(name: str, nodes: Sequence[str], ranks: Sequence[RankResult]) -> JobResult:
    return JobResult(name, tuple(nodes), tuple(sorted(ranks, key=lambda r: r.rank)))


def first_round(groups: Mapping[str, Sequence[str]]) -> tuple[list[tuple[str, str]], list[str]]:
    """Pairs (0,1), (2,3)... within each group of like nodes (one GPU model and count: a job needs
    the same GPU count on every rank), and the odd node out of each odd group."""
    pairs: list[tuple[str, str]] = []
    odd: list[str] = []
    for nodes in groups.values():
        pairs += [(nodes[i], nodes[i + 1]) for i in range(0, len(nodes) - 1, 2)]
        if len(nodes) % 2:
            odd.append(nodes[-1])
    return pairs, odd


def second_round(first: Sequence[tuple[tuple[str, str], bool]], odd: Sequence[str],
                 group_of: Mapping[str, str]) -> list[list[tuple[str, str]]]:
    """Re-pairing, as rounds of disjoint pairs: each node of a failing first-round pair, and each
    odd node out, is paired with a node of a passing pair of its group (the passing nodes taken in
    turn, each at most once a round). A node with no passing node in its group stays unpaired."""
    good = [n for pair, ok in first if ok for n in pair]
    need = [n for pair, ok in first if not ok for n in pair] + list(odd)
    rounds: list[list[tuple[str, str]]] = []
    for group in dict.fromkeys(group_of[n] for n in need):
        helpers = [n for n in good if group_of[n] == group]
        if not helpers:
            continue
        for i, node in enumerate(n for n in need if group_of[n] == group):
            index = i // len(helpers)
            while len(rounds) <= index:
                rounds.append([])
            rounds[index].append((node, helpers[i % len(helpers)]))
    return rounds


@dataclass(frozen=True)
class PairCall:
    """One aspect of one pair job, decided: ``ok`` True/False, or None (not judged); ``text`` says
    what was seen."""

    nodes: tuple[str, ...]
    ok: bool | None
    text: str


def pair_completion_call(job: JobResult) -> PairCall:
    if job.completed:
        sizes = min(len(r.report.sizes) for r in job.ranks if r.report is not None)
        return PairCall(job.nodes, True, f"{job.label}: all-reduce completed correctly at {sizes} message sizes")
    return PairCall(job.nodes, False, f"{job.label}: {job.failure()}")


def peer_floor(jobs: Sequence[JobResult]) -> tuple[float, str] | None:
    """The relative floor of like pairs: the fastest completed one's busbw less PEER_TOLERANCE;
    None with fewer than two completed pairs to compare."""
    figures = [(j.busbw_gbps, j.label) for j in jobs if j.completed and j.busbw_gbps is not None]
    if len(figures) < 2:
        return None
    best, label = max(figures, key=lambda f: f[0] or 0.0)
    assert best is not None
    return best * (1 - PEER_TOLERANCE), (f"{1 - PEER_TOLERANCE:.0%} of the fastest like pair ({label}: "
                                         f"{best:g} GB/s)")


def pair_busbw_call(job: JobResult, floor: NcclFloor | None, peers: tuple[float, str] | None) -> PairCall:
    """A pair's large-message busbw against the NIC floor of its slower node (``floor``:
    gpuconf.compat.tables.inter_node_floor of a declared NIC figure), else against like pairs
    (``peers``: :func:`peer_floor`), else not judged."""
    measured = job.busbw_gbps
    if not job.completed or measured is None:
        return PairCall(job.nodes, None, f"{job.label}: no large-message figure ({job.failure()})")
    network = job.network or "unknown"
    if network == "Socket":
        return PairCall(job.nodes, None, f"{job.label}: {measured:g} GB/s over TCP sockets (NCCL found no RDMA "
                        "network): no floor applies")
    if floor is not None:
        minimum, what = floor.minimum_gbps, f"{floor.figure_gbps:g} GB/s less {floor.tolerance:.0%} for {floor.key}"
    elif peers is not None:
        minimum, what = peers
    else:
        return PairCall(job.nodes, None, f"{job.label}: {measured:g} GB/s over {network}; no NIC figure declared "
                        "and no like pair to compare with (recorded, not judged)")
    if measured < minimum:
        return PairCall(job.nodes, False, f"{job.label}: {measured:g} GB/s over {network} is below {minimum:g} GB/s "
                        f"({what})")
    return PairCall(job.nodes, True, f"{job.label}: {measured:g} GB/s over {network} >= {minimum:g} GB/s ({what})")


def evaluate_pairwise(check_id: str, node: str, calls: Sequence[PairCall]) -> Verdict:
    """A node's verdict from every pair it was in (first round and re-pairing). It passes with one
    passing pair; it is blamed when all its judged pairs fail and a partner of a failing pair
    passed with another node (the re-pairing isolates it); when no partner is known good, the
    failure is the pair's and the verdict says the node could not be isolated."""
    mine = [c for c in calls if node in c.nodes]
    judged = [c for c in mine if c.ok is not None]
    evidence = tuple(c.text for c in mine)
    if not judged:
        return not_tested(check_id, node, "; ".join(c.text for c in mine) or f"{node} was in no pair job",
                          kind=COULD_NOT_RUN)
    good = [c for c in judged if c.ok]
    bad = [c for c in judged if not c.ok]
    if not bad:
        return passed(check_id, node, "; ".join(c.text for c in good))
    if good:
        return passed(check_id, node, f"{good[0].text}; a pair without fault of its own failed beside it "
                      f"({'; '.join(c.text for c in bad)}): the partner's verdict says whether it is isolated",
                      evidence=evidence)

    def partner_ok(pair: PairCall) -> str | None:
        for other in pair.nodes:
            if other != node and any(c.ok and other in c.nodes and node not in c.nodes for c in calls):
                return other
        return None

    cleared = [o for o in (partner_ok(c) for c in bad) if o is not None]
    if cleared:
        failing = "; ".join(c.text for c in bad)
        return failed(check_id, node, f"{node} is isolated: every pair with it failed ({failing}), "
                      f"while {', '.join(dict.fromkeys(cleared))} passed with another node",
                      expected="a passing pair", observed=f"{len(bad)} failing pair(s): "
                      + ", ".join(" + ".join(c.nodes) for c in bad), evidence=evidence)
    return failed(check_id, node, f"pair {bad[0].text} failed; {node} could not be isolated (no partner of it "
                  "passed with another node)", expected="a passing pair",
                  observed=f"{len(bad)} failing pair(s): " + ", ".join(" + ".join(c.nodes) for c in bad),
                  evidence=evidence)


def evaluate_multinode(job: JobResult, slowest: str | None) -> Verdict:
    """One job over every eligible node (cluster-level): it completes, every rank named that did
    not; the busbw is evidence beside the floor of the slowest node (``slowest``, words)."""
    cid = "nccl.multinode-completes"
    where = f"{len(job.nodes)} nodes ({', '.join(job.nodes)})"
    busbw = job.busbw_gbps
    evidence = (f"large-message busbw {busbw:g} GB/s over {job.network or 'unknown'}" if busbw is not None
                else "no large-message figure", f"floor of the slowest node: {slowest or 'not known'}")
    if not job.completed:
        return failed(cid, None, f"the all-reduce across {where} did not complete: {job.failure()}",
                      expected="every rank completes", observed=f"{len(job.unfinished)} of {len(job.ranks)} ranks "
                      "did not finish", evidence=evidence)
    return passed(cid, None, f"the all-reduce across {where} completed correctly"
                  + (f" at {busbw:g} GB/s" if busbw is not None else ""), evidence=evidence)


# -------------------------------------------------------------------------------------------------
# Burn-in (the slow tier): the intra-node all-reduce, round after round

#: How far below the node's best round a round's large-message busbw may fall before it is a dip.
BURN_IN_TOLERANCE = 0.10


@dataclass(frozen=True)
class BurnInRound:
    """One burn-in round on one node: its nccl-probe document, or why there is none."""

    number: int  # from 1, in the order the rounds ran
    report: NcclProbeReport | None
    problem: str = ""


def _round_line(r: BurnInRound) -> str:
    if r.report is None:
        return f"round {r.number}: no document ({r.problem})"
    busbw = r.report.large_message_avg_busbw_gbps
    figure = f"{busbw:g} GB/s large-message busbw" if busbw is not None else "no large-message figure"
    args = r.report.raw.get("args")
    iters = args.get("iters") if isinstance(args, dict) else None
    figure += f" ({iters} iterations a size)" if isinstance(iters, int) else ""
    return f"round {r.number}: {figure}, exit {r.report.exit_code} ({r.report.exit_reason})"


def evaluate_burn_in_stable(node: str, rounds: Sequence[BurnInRound], *, gpus: int,
                            tolerance: float = BURN_IN_TOLERANCE) -> Verdict:
    """Every round of the node's all-GPU all-reduce completes with correct results (a round that
    does not is a failure, whatever the check's severity: the node cannot be trusted with a long
    job), and each round's large-message busbw stays within ``tolerance`` of the node's best
    round (a dip is an intermittent link, clock or thermal problem: degraded). The evidence lists
    every round's figure."""
    cid = "nccl.burn-in-stable"
    if not rounds:
        return not_tested(cid, node, f"no burn-in round ran on {node}", kind=COULD_NOT_RUN)
    evidence = tuple(_round_line(r) for r in rounds)
    broken: list[str] = []
    for r in rounds:
        if r.report is None:
            broken.append(f"round {r.number} produced no nccl-probe document ({r.problem})")
            continue
        completes = evaluate_allreduce_completes(node, r.report, gpus=gpus)
        if completes.outcome is not Outcome.PASS:
            broken.append(f"round {r.number}: {completes.summary}")
    if broken:
        return Verdict(cid, node, Outcome.FAIL, f"{len(broken)} of {len(rounds)} burn-in rounds on {node} did not "
                       "complete correctly: " + "; ".join(broken), expected=f"all {len(rounds)} rounds complete",
                       observed=f"{len(rounds) - len(broken)}/{len(rounds)} completed", evidence=evidence)
    figures = [(r.number, r.report.large_message_avg_busbw_gbps) for r in rounds if r.report is not None]
    missing = [n for n, f in figures if f is None]
    if missing:
        return not_tested(cid, node, f"rounds {', '.join(map(str, missing))} on {node} measured no large-message "
                          "busbw (the sweep reached no large message): nothing to compare", kind=COULD_NOT_RUN)
    best_round, best = max(((n, f) for n, f in figures if f is not None), key=lambda x: x[1])
    floor = best * (1 - tolerance)
    dips = [(n, f) for n, f in figures if f is not None and f < floor]
    if dips:
        named = ", ".join(f"round {n} {f:g} GB/s ({(best - f) / best:.0%} below)" for n, f in dips)
        return failed(cid, node, f"large-message busbw on {node} dipped more than {tolerance:.0%} below its best "
                      f"round (round {best_round}, {best:g} GB/s): {named}; an intermittent link, clock or thermal "
                      "problem",
                      expected=f"every round >= {floor:g} GB/s ({tolerance:.0%} below the best)",
                      observed=", ".join(f"{f:g}" for _, f in figures) + " GB/s", evidence=evidence)
    low = min(f for _, f in figures if f is not None)
    return passed(cid, node, f"{len(rounds)} rounds completed correctly; large-message busbw {low:g}..{best:g} GB/s, "
                  f"within {tolerance:.0%} of the best round", evidence=evidence)
