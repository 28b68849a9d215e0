"""Inventory: on every GPU node, what GFD labels, what the device plugin advertises and what a
probe pod sees through NVML and CUDA agree; the driver is one version per pool; device nodes and
NVML work. One whole-node probe per node, launched together, feeds every check."""

from __future__ import annotations

import pytest

from gpuconf.checks import inventory as checks
from gpuconf.checks.expect import declared_driver_policy, declared_gpu_count
from gpuconf.cluster import Inventory
from gpuconf.plugin import judge, probe_report, whole_node_request

pytestmark = pytest.mark.inventory


def view(inv: Inventory, name: str) -> checks.NodeView:
    n = inv.node(name)
    return checks.NodeView(n.name, n.labels, n.capacity, n.allocatable, sum(len(s.devices) for s in n.slices))


@pytest.mark.check("inventory.gpu-resource-advertised")
def test_gpu_resource_advertised(gpu_node, gpu_inventory, record_property):
    judge(checks.evaluate_gpu_resource_advertised(view(gpu_inventory, gpu_node)), record_property)


@pytest.mark.check("inventory.allocatable-matches-capacity")
def test_allocatable_matches_capacity(gpu_node, gpu_inventory, record_property):
    judge(checks.evaluate_allocatable_matches_capacity(view(gpu_inventory, gpu_node)), record_property)


@pytest.fixture(scope="module")
def gpu_views(gpu_inventory):
    return [view(gpu_inventory, n.name) for n in gpu_inventory.gpu_nodes]


@pytest.fixture(scope="module")
def pool_counts(gpu_views):
    """Per node, the GPU count its pool's nodes usually have (GFD relabels a node that lost a GPU)."""
    return checks.pool_gpu_count(gpu_views)


@pytest.mark.check("inventory.gpu-count-matches-expected")
def test_gpu_count_matches(gpu_node, gpu_inventory, whole_node_probes, expect_profile, pool_counts, record_property):
    probe = probe_report(whole_node_probes, gpu_node) if gpu_node in whole_node_probes else None
    requested = whole_node_request(gpu_inventory.node(gpu_node))  # what it asked for
    node = view(gpu_inventory, gpu_node)
    judge(checks.evaluate_gpu_count(node, probe=probe, probe_requested=requested, pool=pool_counts.get(gpu_node),
                                    expected=declared_gpu_count(expect_profile, node)), record_property)


@pytest.mark.cncf("driver_runtime_management")
@pytest.mark.check("labels.gfd-matches-hardware")
def test_labels_match_hardware(gpu_node, gpu_inventory, whole_node_probes, record_property):
    judge(checks.evaluate_labels_match_hardware(view(gpu_inventory, gpu_node),
                                                probe_report(whole_node_probes, gpu_node)), record_property)


@pytest.mark.cncf("driver_runtime_management")
@pytest.mark.check("driver.version-uniform-in-pool")
def test_driver_version_uniform_in_pool(gpu_node, gpu_views, expect_profile, record_property):
    verdicts = checks.evaluate_driver_uniform(gpu_views, declared_driver_policy(expect_profile, gpu_views))
    judge(next(v for v in verdicts if v.node == gpu_node), record_property)


@pytest.mark.cncf("driver_runtime_management")
@pytest.mark.check("driver.nvml-initializes")
def test_nvml_initializes(gpu_node, whole_node_probes, record_property):
    judge(checks.evaluate_nvml_initializes(gpu_node, probe_report(whole_node_probes, gpu_node)), record_property)


@pytest.mark.cncf("driver_runtime_management")
@pytest.mark.check("runtime.cuda-device-nodes-present")
def test_cuda_device_nodes_present(gpu_node, whole_node_probes, record_property):
    judge(checks.evaluate_cuda_device_nodes(gpu_node, probe_report(whole_node_probes, gpu_node)), record_property)
