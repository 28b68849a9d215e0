"""Scheduling: over-asking GPUs leaves a pod Pending with the scheduler's real reason, and the
NVIDIA RuntimeClass the probes use exists with a handler."""

from __future__ import annotations

import pytest

from gpuconf.checks.scheduling import evaluate_over_ask, evaluate_runtime_class
from gpuconf.cluster import run_campaign
from gpuconf.plugin import judge, run_context
from gpuconf.probe_pods import make_cuda_probe_pod

pytestmark = pytest.mark.scheduling

#: kube-scheduler tries a new pod at once; an over-ask is unschedulable on the first attempt.
BUDGET_S = 10.0


def test_over_asking_gpus_is_insufficient(request, gpu_inventory, record_property):
    largest = max((int(n.allocatable.get("nvidia.com/gpu", "0") or 0) for n in gpu_inventory.gpu_nodes), default=0)
    if largest < 1:
        pytest.skip("no node advertises nvidia.com/gpu (DRA-only or MIG-only cluster)")
    ctx = run_context(request.config)
    pod = make_cuda_probe_pod(name="over-ask", namespace=ctx.namespace, run_id=ctx.run_id, check="scheduling",
                              cuda="13.0.2", gpu_count=largest + 1)
    (outcome,) = run_campaign(ctx, [pod], timeout=BUDGET_S + 30, schedule_budget=BUDGET_S).values()
    judge(evaluate_over_ask(outcome, requested=largest + 1, budget_s=BUDGET_S), record_property)


def test_nvidia_runtime_class_present(gpu_inventory, record_property):
    judge(evaluate_runtime_class([(rc.name, rc.handler) for rc in gpu_inventory.runtime_classes]), record_property)
