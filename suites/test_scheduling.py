"""Scheduling: over-asking GPUs leaves a pod Pending with the scheduler's real reason, the
NVIDIA RuntimeClass the probes use exists with a handler, and a GPU pod that names no RuntimeClass
(as most workloads do) still gets its GPU from the node's default runtime."""

from __future__ import annotations

import pytest

from gpuconf.checks.isolation import sighting
from gpuconf.checks.scheduling import evaluate_default_runtime, evaluate_over_ask, evaluate_runtime_class
from gpuconf.cluster import PodOutcome, run_campaign
from gpuconf.kit import cuda_probe_pod, judge, native_probe_cuda, run_context, skip_not_tested
from gpuconf.nodes import NodeView
from gpuconf.outcomes import COULD_NOT_RUN, NOT_APPLICABLE
from gpuconf.probe_pods import probe_pod_name

pytestmark = pytest.mark.scheduling

#: kube-scheduler tries a new pod at once; an over-ask is unschedulable on the first attempt.
BUDGET_S = 10.0
#: Once the pod is marked Unschedulable, how long to let the scheduler's event catch up with the
#: condition (the event recorder is asynchronous) before reading the events.
EVENT_GRACE_S = 1.0


@pytest.mark.check("scheduling.over-ask-is-insufficient")
def test_over_asking_gpus_is_insufficient(request, fleet_nodes, record_property):
    # the most nvidia.com/gpu one node offers, as the node view asks for them (the scheduler's
    # message names the resource: Insufficient nvidia.com/gpu)
    # (the device plugin's: a DRA-backed nvidia.com/gpu is refused by the DRA plugin in its own words,
    # not modelled; an over-asked claim is the DRA suite's dra.unsatisfiable-selector-pending)
    # Every selected node counts, busy or not (its GPUs are freed later; in a sharded run they may be
    # another shard's probes'): the pod must be unschedulable on each.
    largest = max((node.gpu_allocatable("nvidia.com/gpu") for node in fleet_nodes.values()), default=0)
    if largest < 1:
        skip_not_tested("no node advertises nvidia.com/gpu (DRA-only or MIG-only cluster): an unsatisfiable claim is "
                        "dra.unsatisfiable-selector-pending's", NOT_APPLICABLE)
    pod = cuda_probe_pod(request.config, name="over-ask", check="scheduling", gpu_count=largest + 1)
    (outcome,) = run_campaign(run_context(request.config), [pod], timeout=BUDGET_S,
                              schedule_budget=EVENT_GRACE_S).values()
    judge(evaluate_over_ask(outcome, requested=largest + 1, budget_s=BUDGET_S), record_property)


@pytest.mark.check("scheduling.runtimeclass-present")
def test_nvidia_runtime_class_present(gpu_inventory, record_property):
    judge(evaluate_runtime_class([(rc.name, rc.handler) for rc in gpu_inventory.runtime_classes]), record_property)


@pytest.fixture(scope="module")
def default_runtime_probes(request: pytest.FixtureRequest, gpu_nodes: dict[str, NodeView]) -> dict[str, PodOutcome]:
    """On every node that can give a pod one whole GPU, one cuda-probe given one as the node view asks
    for it (the device plugin's resource, a DRA claim or a DRA-backed extended resource, which the DRA
    driver injects through CDI) that names no runtimeClassName, all nodes at once."""
    pods, nodes = [], {}
    for node in gpu_nodes.values():
        if not (ask := node.one_gpu()):
            continue
        name = probe_pod_name("runtime", "default", node.name)
        pods.append(cuda_probe_pod(request.config, name=name, check="runtime", node=node.name, ask=ask,
                                   runtime_class=None, cuda=native_probe_cuda(node)))
        nodes[name] = node.name
    if not pods:
        return {}
    outcomes = run_campaign(run_context(request.config), pods, timeout=request.config.getoption("--probe-timeout"))
    return {nodes[name]: outcome for name, outcome in outcomes.items()}


@pytest.mark.needs_probe
@pytest.mark.check("runtime.default-runtime-injects-gpu")
def test_default_runtime_injects_gpu(gpu_node, gpu_nodes, default_runtime_probes, whole_node_probes,
                                     record_property):
    outcome = default_runtime_probes.get(gpu_node)
    if outcome is None:
        why = gpu_nodes[gpu_node].one_gpu()
        skip_not_tested(f"{why.reason if not why else f'no probe ran on {gpu_node}'} (MIG instances are judged by the "
                        "MIG suite)", why.kind if not why else COULD_NOT_RUN)
    runtime_class = gpu_nodes[gpu_node].runtime_class
    whole = whole_node_probes.get(gpu_node)
    ask = gpu_nodes[gpu_node].one_gpu()
    judge(evaluate_default_runtime(gpu_node, sighting(outcome), sighting(whole) if whole is not None else None,
                                   runtime_class, given=ask.describe() if ask else "1 nvidia.com/gpu"),
          record_property)
