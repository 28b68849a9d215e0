"""Compat: the deliberate driver/toolkit mismatch. On every node that can give a probe one GPU, a
canary with NVIDIA_REQUIRE_CUDA=cuda>=99.0 shows whether the runtime checks requirements, and the
probe matrix (every CUDA of gpuconf.images.matrix(), with NVIDIA_DISABLE_REQUIRE=1 twins where a
rejection is predicted) is held against gpuconf predict. One campaign feeds every check; the
decisions live in gpuconf.checks.compat."""

from __future__ import annotations

import pytest

from gpuconf.checks import compat
from gpuconf.checks.probe_start import blocked_by
from gpuconf.cluster import run_campaign
from gpuconf.kit import DEFAULT_PROBE_CUDA, compat_cudas, cuda_probe_pod, judge, parsed_probe, run_context
from gpuconf.nodes import Via
from gpuconf.outcomes import COULD_NOT_RUN, NODE_UNAVAILABLE
from gpuconf.probes import ProbeParseError
from gpuconf.verdict import Verdict, not_tested

pytestmark = pytest.mark.compat


@pytest.fixture(scope="module")
def compat_run(request, gpu_inventory, gpu_nodes) -> compat.CompatRun:
    config = request.config
    # each probe asks for one GPU as the node view says (the device plugin's resource, a DRA claim or a
    # DRA-backed extended resource); a node that cannot give one is not probed, with the view's reason
    # (MIG instances only, no DeviceClass to claim with, none allocatable)
    asks = {name: view.one_gpu() for name, view in gpu_nodes.items()}
    skipped = {name: ask.reason for name, ask in asks.items() if not ask}
    nodes = [n for n in gpu_inventory.gpu_nodes if n.name not in skipped]
    # GPUs given through DRA (a claim, or a DRA-backed extended resource) are injected through CDI by the DRA driver
    dra = {name for name, ask in asks.items() if ask and ask.via in (Via.CLAIM, Via.EXTENDED)}
    # the prediction's driver is the one NVML reads in the node's whole-node probe (the most direct
    # source; a stale label is labels.gfd-matches-hardware's finding), else GFD's label or the slice's
    probes = request.getfixturevalue("whole_node_probes")
    targets = [compat.make_target(n.name, n.labels, compat.probe_facts(probes.get(n.name)), dra=n.name in dra,
                                  facts=gpu_nodes[n.name].facts)
               for n in nodes]
    plan = compat.plan_pods(targets, canary_cuda=DEFAULT_PROBE_CUDA, cudas=compat_cudas(config))
    pods = [cuda_probe_pod(config, name=p.name, check="compat", cuda=p.cuda, node=p.node, ask=asks[p.node],
                           env=dict(p.env)) for p in plan]
    # Pods on a node with few GPUs wait for one another: waiting for a free GPU is not unschedulable.
    budget = config.getoption("--probe-timeout")
    outcomes = run_campaign(run_context(config), pods, timeout=budget, schedule_budget=budget) if pods else {}
    return compat.assemble(targets, plan, outcomes, skipped,
                           skipped_kinds={name: ask.kind for name, ask in asks.items() if not ask},
                           products={n.name: n.labels.get("nvidia.com/gpu.product") for n in gpu_inventory.gpu_nodes
                                     if n.name not in skipped or asks[n.name].kind == NODE_UNAVAILABLE})


def skip_unprobed(run: compat.CompatRun, check: str, node: str, record_property) -> None:
    """A node the campaign did not probe: NOT_TESTED with the reason (judge skips the test)."""
    if node in run.skipped:
        judge(not_tested(check, node, run.skipped[node], kind=run.skipped_kinds.get(node, COULD_NOT_RUN)),
              record_property)


def labels_owner(request, node: str) -> Verdict | None:
    """labels.gfd-matches-hardware's verdict on ``node``. The campaign predicts each node's outcomes
    from its GFD labels (compat.make_target): where they do not describe the node's GPUs (another
    model among them, a driver they misstate), a compat failure is that finding again and is NOT
    TESTED, blocked by it (gpuconf.checks.probe_start.blocked_by). None without a whole-node report."""
    from gpuconf.checks.inventory import evaluate_labels_match_hardware

    outcome = request.getfixturevalue("whole_node_probes").get(node)
    if outcome is None or not outcome.logs.get("probe"):
        return None
    try:
        report = parsed_probe(outcome, node)
    except ProbeParseError:
        return None
    return evaluate_labels_match_hardware(request.getfixturevalue("gpu_nodes")[node], report)


@pytest.mark.cncf("driver_runtime_management")
@pytest.mark.check("runtime.require-cuda-enforced")
def test_require_cuda_enforced(gpu_node, compat_run, record_property):
    skip_unprobed(compat_run, "runtime.require-cuda-enforced", gpu_node, record_property)
    judge(compat.evaluate_require_enforced(gpu_node, compat_run.canaries, compat_run.pools, dra=compat_run.dra),
          record_property)


@pytest.mark.cncf("driver_runtime_management")
@pytest.mark.check("compat.outcome-matches-prediction")
def test_outcome_matches_prediction(request, gpu_node, compat_run, record_property):
    skip_unprobed(compat_run, "compat.outcome-matches-prediction", gpu_node, record_property)
    judge(blocked_by(compat.evaluate_outcome_matches(gpu_node, compat_run.rows.get(gpu_node, ()),
                                                     unpredictable=compat_run.unpredictable.get(gpu_node)),
                     labels_owner(request, gpu_node)), record_property)


@pytest.mark.cncf("driver_runtime_management")
@pytest.mark.check("compat.forward-compat-runs")
def test_forward_compat_runs(request, gpu_node, compat_run, record_property):
    skip_unprobed(compat_run, "compat.forward-compat-runs", gpu_node, record_property)
    judge(blocked_by(compat.evaluate_forward_compat(gpu_node, compat_run.targets.get(gpu_node),
                                                    compat_run.rows.get(gpu_node, ())),
                     labels_owner(request, gpu_node)), record_property)


@pytest.mark.cncf("driver_runtime_management")
@pytest.mark.needs_probe  # a node that starts no probe at all is smoke's failure, not this degradation
@pytest.mark.check("compat.current-cuda-major-runs")
def test_current_cuda_major_runs(request, gpu_node, compat_run, record_property):
    skip_unprobed(compat_run, "compat.current-cuda-major-runs", gpu_node, record_property)
    judge(blocked_by(compat.evaluate_current_major_runs(gpu_node, compat_run.targets.get(gpu_node),
                                                        compat_run.rows.get(gpu_node, ())),
                     labels_owner(request, gpu_node)), record_property)
