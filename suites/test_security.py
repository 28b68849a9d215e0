"""Security floors: every GPU node's driver, Container Toolkit, GPU Operator, device plugin, DRA
driver, DCGM and DCGM exporter, at the versions the cluster shows (the node's driver facts, the
GPU stack's pod images, the ClusterPolicy), judged against NVIDIA's security bulletins
(gpuconf/data/security_advisories.yaml, or the site's own table given with --security-floor).
Nothing runs on the nodes: one cluster-wide pod list per selector (gpuconf.cluster.inventory
COMPONENT_SELECTORS); the driver's version is NVML's where this run's whole-node probe already ran on
the node (the inventory suite's), the node's label otherwise. The decisions are in gpuconf.checks.security."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from gpuconf.checks import security as checks
from gpuconf.cluster.errors import ClusterError, OverloadedError
from gpuconf.cluster.inventory import ComponentPod, Inventory, list_component_pods
from gpuconf.kit import ClusterHandle, judge, parsed_probe
from gpuconf.kit.state import session
from gpuconf.nodes import NodeView
from gpuconf.probes import ProbeParseError

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
    nvml, probe = probe_driver(request.config, gpu_node)
    readings = checks.node_readings(node=gpu_node, driver=node.facts.driver, labels=node.labels,
                                    pods=stack_pods.pods, cluster_policy=policy, nvml_driver=nvml, probe=probe)
    judge(checks.evaluate_component_versions(gpu_node, readings, security_floors(request.config),
                                             pods_problem=stack_pods.problem), record_property)


def probe_driver(config: pytest.Config, node: str) -> tuple[str | None, str | None]:
    """(NVML's driver version, the probe pod) of this run's whole-node probe on ``node``, where one already
    ran (nothing is launched for it here); (None, None) where none did or its report is unreadable."""
    outcome = session(config).probes.get(node)
    if outcome is None or not outcome.logs.get("probe"):
        return None, None
    try:
        report = parsed_probe(outcome, node)
    except ProbeParseError:
        return None, None
    return report.nvml_driver_version, outcome.name


def security_floors(config: pytest.Config) -> checks.Floors:
    """The --security-floor table (checked at startup), else the built-in one."""
    path = config.getoption("security_floor")
    return checks.load_floors(path) if path else checks.builtin_floors()
