"""DCGM diagnostics (opt-in: run with --dcgm-diag LEVEL, 1 smoke, 2 acceptance, 3 and 4 burn-in):
one campaign launches a diag pod on every eligible node at once, each holding every GPU of its node,
running NVIDIA's DCGM image with an embedded hostengine and ``dcgmi diag -r LEVEL --json``. Each
node's document is judged per test and per GPU, never by its summary (gpuconf.checks.dcgm).

Nodes the diagnostic cannot or must not run on are skipped with the reason: MIG-enabled GPUs
(dcgmi refuses them), time-sliced or MPS GPUs (no exclusive use), DRA-only nodes (no
nvidia.com/gpu to request), GPUs not all allocatable, and busy nodes (GPUs held by pods outside
this run: a diagnostic must never compete with, or disturb, someone's work)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from gpuconf.checks import dcgm as checks
from gpuconf.checks.nccl import holders_by_node
from gpuconf.cluster import PodOutcome, list_active_pods, run_campaign
from gpuconf.kit import ClusterHandle, gpu_ask, judge, require, run_context, skip_not_tested
from gpuconf.nodes import NodeView
from gpuconf.outcomes import COULD_NOT_RUN, NODE_UNAVAILABLE, NOT_SELECTED

pytestmark = [pytest.mark.health, pytest.mark.dcgm]

OPTION_HINT = "run with --dcgm-diag LEVEL (1 short, 2 medium, 3 long, 4 xlong) to run the DCGM diagnostics tier"


@dataclass
class DiagRuns:
    level: int | None
    skipped: dict[str, str] = field(default_factory=dict)  # node -> why no pod
    kinds: dict[str, str] = field(default_factory=dict)  # node -> that NOT TESTED's kind
    outcomes: dict[str, PodOutcome] = field(default_factory=dict)
    gpus: dict[str, int] = field(default_factory=dict)  # node -> the GPUs its diag pod was given


@pytest.fixture(scope="module")
def dcgm_runs(request: pytest.FixtureRequest, gpu_cluster: ClusterHandle, gpu_nodes: dict[str, NodeView]) -> DiagRuns:
    config = request.config
    level = config.getoption("dcgm_diag")
    runs = DiagRuns(level)
    if level is None:
        return runs
    ctx = run_context(config)
    holders = holders_by_node(list_active_pods(gpu_cluster.cluster), exclude_namespace=ctx.namespace)
    budget = max(checks.diag_level(level).budget_s, int(config.getoption("gpuconf_timeout")))
    pods = []
    for node in gpu_nodes.values():
        reason = checks.not_a_diag_node(node)
        kind = checks.not_a_diag_node_kind(node) if reason is not None else NODE_UNAVAILABLE
        busy = holders.get(node.name, [])
        if reason is None and busy:
            reason = (f"{node.name} is busy: " + ", ".join(f"{h.namespace}/{h.name} holds {h.gpus} GPU(s)"
                                                          for h in busy[:5])
                      + (f" and {len(busy) - 5} more pods" if len(busy) > 5 else "")
                      + "; the diagnostic runs on idle nodes only")
        if reason is not None:
            runs.skipped[node.name], runs.kinds[node.name] = reason, kind
            continue
        ask = require(node.exclusive(check="the diagnostic"))  # not_a_diag_node said it is a GpuRequest
        runs.gpus[node.name] = ask.count
        pods.append(checks.make_dcgm_diag_pod(
            name=checks.pod_name(node.name), namespace=ctx.namespace, run_id=ctx.run_id, node=node.name,
            level=level, timeout_s=budget, registry=config.getoption("--registry"), runtime_class=node.runtime_class,
            **gpu_ask(config, ask, check="dcgm")))
    if pods:
        by_name = {p["metadata"]["name"]: p["spec"]["nodeSelector"]["kubernetes.io/hostname"] for p in pods}
        # the campaign's budget covers the pull, the hostengine's start and dcgmi's own timeout
        for name, outcome in run_campaign(ctx, pods, timeout=budget + 120).items():
            runs.outcomes[by_name[name]] = outcome
    return runs


@dataclass(frozen=True)
class NodeRun:
    output: str | None
    exit_code: int | None
    failure: str | None
    gpus: int  # the GPUs the diag pod was given: each test must cover every one


def node_run(runs: DiagRuns, node: str) -> tuple[int, NodeRun]:
    """The level and the node's diag output, or a skip that says why there is none."""
    if runs.level is None:
        skip_not_tested(OPTION_HINT, NOT_SELECTED)
    if node in runs.skipped:
        skip_not_tested(runs.skipped[node], runs.kinds.get(node, COULD_NOT_RUN))
    outcome = runs.outcomes[node]
    container = next((c for c in outcome.containers if c.name == "probe" and not c.init), None)
    output = outcome.logs.get("probe")
    failure = None if output else " ".join(p for p in (outcome.phase, outcome.reason or "", outcome.message or "",
                                                        outcome.missing_logs.get("probe", "")) if p)
    return runs.level, NodeRun(output, container.exit_code if container else None, failure or None, runs.gpus[node])


@pytest.mark.check("dcgm.diag-passes")
def test_diag_passes(gpu_node: str, dcgm_runs: DiagRuns, record_property: Any) -> None:
    level, run = node_run(dcgm_runs, gpu_node)
    judge(checks.evaluate_dcgm_diag(gpu_node, run.output, level, exit_code=run.exit_code, failure=run.failure,
                                    gpus=run.gpus), record_property)


@pytest.mark.check("dcgm.diag-no-warnings")
def test_diag_no_warnings(gpu_node: str, dcgm_runs: DiagRuns, record_property: Any) -> None:
    level, run = node_run(dcgm_runs, gpu_node)
    judge(checks.evaluate_dcgm_warnings(gpu_node, run.output, level, exit_code=run.exit_code, failure=run.failure,
                                        gpus=run.gpus), record_property)
