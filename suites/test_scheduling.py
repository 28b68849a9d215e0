"""Scheduling: over-asking GPUs leaves a pod Pending with the scheduler's real reason, and the
NVIDIA RuntimeClass the probes use exists with a handler."""

from __future__ import annotations

import pytest

from gpuconf.checks.scheduling import evaluate_over_ask, evaluate_runtime_class
from gpuconf.cluster import run_campaign
from gpuconf.plugin import cuda_probe_pod, judge, run_context

pytestmark = pytest.mark.scheduling

#: kube-scheduler tries a new pod at once; an over-ask is unschedulable on the first attempt.
BUDGET_S = 10.0
#: Once the pod is marked Unschedulable, how long to let the scheduler's event catch up with the
#: condition (the event recorder is asynchronous) before reading the events.
EVENT_GRACE_S = 1.0


@pytest.mark.check("scheduling.over-ask-is-insufficient")
def test_over_asking_gpus_is_insufficient(request, gpu_inventory, record_property):
    largest = max((int(n.allocatable.get("nvidia.com/gpu", "0") or 0) for n in gpu_inventory.gpu_nodes), default=0)
    if largest < 1:
        pytest.skip("no node advertises nvidia.com/gpu (DRA-only or MIG-only cluster)")
    pod = cuda_probe_pod(request.config, name="over-ask", check="scheduling", gpu_count=largest + 1)
    (outcome,) = run_campaign(run_context(request.config), [pod], timeout=BUDGET_S,
                              schedule_budget=EVENT_GRACE_S).values()
    judge(evaluate_over_ask(outcome, requested=largest + 1, budget_s=BUDGET_S), record_property)


@pytest.mark.check("scheduling.runtimeclass-present")
def test_nvidia_runtime_class_present(gpu_inventory, record_property):
    judge(evaluate_runtime_class([(rc.name, rc.handler) for rc in gpu_inventory.runtime_classes]), record_property)
