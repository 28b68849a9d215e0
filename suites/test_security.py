"""Security floors: every GPU node's driver, Container Toolkit, GPU Operator, device plugin, DRA
driver, DCGM and DCGM exporter, at the versions the cluster shows (the node's driver facts, the
GPU stack's pod images, the ClusterPolicy), judged against NVIDIA's security bulletins
(gpuconf/data/security_advisories.yaml, or the site's own table given with --security-floor).
Nothing runs on the nodes: one cluster-wide pod list per selector (gpuconf.cluster.inventory
COMPONENT_SELECTORS). The decisions are in gpuconf.checks.security."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from gpuconf.checks import security as checks
from gpuconf.cluster.errors import ClusterError, OverloadedError
from gpuconf.cluster.inventory import ComponentPod, Inventory, list_component_pods
from gpuconf.kit import ClusterHandle, judge
from gpuconf.nodes import NodeView

pytestmark = [pytest.mark.security]


@dataclass(frozen=True)
class StackPods:
    pods: tuple[ComponentPod, ...]
    problem: str | None  # the list failed: every node NOT TESTED with this reason


@pytest.fixture(scope="module")
def stack_pods(gpu_cluster: ClusterHandle) -> StackPods:
    try:
        return StackPods(list_component_pods(gpu_cluster.cluster), None)
    except OverloadedError:
        raise
    except ClusterError as e:
        return StackPods((), f"listing the GPU stack's pods failed: {e}")


@pytest.mark.check("security.component-versions")
def test_component_versions(gpu_node: str, gpu_nodes: dict[str, NodeView], gpu_inventory: Inventory,
                            stack_pods: StackPods, request: pytest.FixtureRequest, record_property: Any) -> None:
    node = gpu_nodes[gpu_node]
    policy = gpu_inventory.cluster_policy.spec if gpu_inventory.cluster_policy is not None else None
    readings = checks.node_readings(node=gpu_node, driver=node.facts.driver, labels=node.labels,
                                    pods=stack_pods.pods, cluster_policy=policy)
    judge(checks.evaluate_component_versions(gpu_node, readings, security_floors(request.config),
                                             pods_problem=stack_pods.problem), record_property)


def security_floors(config: pytest.Config) -> checks.Floors:
    """The --security-floor table (checked at startup), else the built-in one."""
    path = config.getoption("security_floor")
    return checks.load_floors(path) if path else checks.builtin_floors()
