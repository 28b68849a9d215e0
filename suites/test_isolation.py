"""Isolation (secure accelerator access): on every GPU node, a pod sees the GPUs it was allocated
and no others. One campaign launches every isolation pod of every node together (launch once,
assert many): pods that request no GPU (one of them setting NVIDIA_VISIBLE_DEVICES=all), pods
requesting one and two GPUs, and a two-container pod where only one container requests a GPU (it
is also the second of the two one-GPU pods that run at the same time). The decisions are in gpuconf.checks.isolation."""

from __future__ import annotations

import pytest

from gpuconf.checks import isolation as checks
from gpuconf.cluster import Inventory, PodOutcome, run_campaign
from gpuconf.cluster.campaign import SCHEDULE_BUDGET_ANNOTATION
from gpuconf.kit import cuda_probe_pod, judge, run_context

pytestmark = pytest.mark.isolation

Observations = dict[str, dict[str, PodOutcome]]  # node -> role -> outcome


def allocatable(inv: Inventory, node: str) -> int:
    return int(inv.node(node).allocatable.get("nvidia.com/gpu", "0") or 0)


def replicas(inv: Inventory, node: str) -> int:
    """Time-slicing replicas per GPU as GFD labels them (1: not shared)."""
    value = inv.node(node).labels.get("nvidia.com/gpu.replicas", "1")
    return int(value) if value.isdigit() and int(value) > 0 else 1


def needs_gpu_resource(inv: Inventory, node: str) -> None:
    n = inv.node(node)
    reason = checks.no_gpu_resource_reason(node, n.allocatable, capacity=n.capacity,
                                           dra_devices=sum(len(s.devices) for s in n.slices))
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def isolation_probes(request: pytest.FixtureRequest, gpu_inventory: Inventory) -> Observations:
    """Every isolation pod of every GPU node, pinned by nodeSelector, in one campaign."""
    timeout = request.config.getoption("--probe-timeout")
    pods, roles = [], {}
    for node in gpu_inventory.gpu_nodes:
        for planned in checks.plan_node(node.name, allocatable(gpu_inventory, node.name),
                                        max_request=1 if mps(gpu_inventory, node.name) else None):
            pod = cuda_probe_pod(request.config, name=planned.name, check="isolation", node=node.name,
                                 gpu_count=planned.gpu_count, sidecar_gpu_count=planned.sidecar_gpu_count,
                                 env=dict(planned.env))
            if planned.waits:  # queued behind the node's other GPU pods: it may be Pending a while
                pod["metadata"].setdefault("annotations", {})[SCHEDULE_BUDGET_ANNOTATION] = str(int(timeout))
            pods.append(pod)
            roles[planned.name] = (node.name, planned.role)
    outcomes = run_campaign(run_context(request.config), pods, timeout=timeout)
    observed: Observations = {}
    for name, outcome in outcomes.items():
        node, role = roles[name]
        observed.setdefault(node, {})[role] = outcome
    return observed


def mps(inv: Inventory, node: str) -> bool:
    """The node shares its GPUs through MPS: its device plugin gives a container one replica at most."""
    return inv.node(node).labels.get("nvidia.com/gpu.sharing-strategy") == "mps"


def seen(probes: Observations, node: str, role: str, container: str = "probe") -> checks.Sighting | None:
    outcome = probes.get(node, {}).get(role)
    return checks.sighting(outcome, container) if outcome is not None else None


@pytest.mark.cncf("secure_accelerator_access")
@pytest.mark.check("isolation.no-request-sees-no-gpu")
def test_no_request_sees_no_gpu(gpu_node, isolation_probes, record_property):
    sighting = seen(isolation_probes, gpu_node, "none")
    assert sighting is not None
    judge(checks.evaluate_no_request_sees_no_gpu(gpu_node, sighting), record_property)


@pytest.mark.cncf("secure_accelerator_access")
@pytest.mark.check("isolation.envvar-without-request-gets-no-gpu")
def test_envvar_without_request_gets_no_gpu(gpu_node, isolation_probes, record_property):
    sighting = seen(isolation_probes, gpu_node, "envvar")
    assert sighting is not None
    judge(checks.evaluate_envvar_without_request(gpu_node, sighting), record_property)


@pytest.mark.cncf("secure_accelerator_access")
@pytest.mark.needs_probe
@pytest.mark.check("isolation.sees-only-allocated")
def test_sees_only_allocated(gpu_node, gpu_inventory, isolation_probes, record_property):
    needs_gpu_resource(gpu_inventory, gpu_node)
    observed = [(n, s) for n, role in ((1, "one"), (2, "two"))
                if (s := seen(isolation_probes, gpu_node, role)) is not None]
    judge(checks.evaluate_sees_only_allocated(gpu_node, observed, replicas=replicas(gpu_inventory, gpu_node),
                                              allocatable=allocatable(gpu_inventory, gpu_node),
                                              one_per_container=mps(gpu_inventory, gpu_node)), record_property)


@pytest.mark.cncf("secure_accelerator_access")
@pytest.mark.needs_probe
@pytest.mark.check("isolation.concurrent-pods-disjoint")
def test_concurrent_pods_disjoint(gpu_node, gpu_inventory, isolation_probes, record_property):
    needs_gpu_resource(gpu_inventory, gpu_node)
    pods = isolation_probes.get(gpu_node, {})
    together = checks.held_together(pods["one"], pods["split"]) if {"one", "split"} <= set(pods) else None
    judge(checks.evaluate_concurrent_pods_disjoint(
        gpu_node, seen(isolation_probes, gpu_node, "one"), seen(isolation_probes, gpu_node, "split"),
        allocatable=allocatable(gpu_inventory, gpu_node), replicas=replicas(gpu_inventory, gpu_node),
        together=together), record_property)


@pytest.mark.cncf("secure_accelerator_access")
@pytest.mark.needs_probe
@pytest.mark.check("isolation.only-requesting-container-sees-gpu")
def test_only_requesting_container_sees_gpu(gpu_node, gpu_inventory, isolation_probes, record_property):
    needs_gpu_resource(gpu_inventory, gpu_node)
    requester, other = seen(isolation_probes, gpu_node, "split"), seen(isolation_probes, gpu_node, "split", "sidecar")
    assert requester is not None and other is not None
    judge(checks.evaluate_only_requesting_container(gpu_node, requester, other,
                                                    replicas=replicas(gpu_inventory, gpu_node)), record_property)
