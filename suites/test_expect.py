"""The cluster against its declared profile (--expect FILE): every declared pool has its nodes, every
GPU node belongs to a pool, and every node carries what its pool declares. The whole-node probes
the inventory suite launches (one campaign, shared) add what a pod sees. Without --expect the
checks are not tested."""

from __future__ import annotations

import pytest

from gpuconf.checks import expect as checks
from gpuconf.checks.inventory import NodeView
from gpuconf.cluster import Inventory
from gpuconf.kit import judge, probe_report, whole_node_request

pytestmark = pytest.mark.expect


def view(inv: Inventory, name: str) -> NodeView:
    n = inv.node(name)
    return NodeView.of(n.name, n.labels, n.capacity, n.allocatable, sum(len(s.devices) for s in n.slices))


@pytest.mark.check("expect.pool-populated")
def test_pools_populated(expect_profile, gpu_inventory, record_property):
    nodes = [view(gpu_inventory, n.name) for n in gpu_inventory.gpu_nodes]
    judge(checks.combined(checks.evaluate_pool_populated(expect_profile, nodes)), record_property)


@pytest.mark.check("expect.node-in-a-pool")
def test_node_in_a_pool(gpu_node, expect_profile, gpu_inventory, record_property):
    judge(checks.evaluate_node_in_a_pool(expect_profile, view(gpu_inventory, gpu_node)), record_property)


@pytest.mark.check("expect.node-matches-pool")
def test_node_matches_pool(gpu_node, expect_profile, gpu_inventory, request, record_property):
    node = view(gpu_inventory, gpu_node)
    if expect_profile is None or expect_profile.pool_for(node.labels) is None:
        judge(checks.evaluate_node_matches_pool(expect_profile, node), record_property)
        return
    probes = request.getfixturevalue("whole_node_probes")  # only with a declaration to compare against
    try:
        probe = probe_report(probes, gpu_node) if gpu_node in probes else None
    except (pytest.fail.Exception, pytest.skip.Exception):
        probe = None  # a probe without a report is the inventory suite's failure; compare the labels alone
    requested = whole_node_request(node)  # what the whole-node probe asked for
    judge(checks.evaluate_node_matches_pool(expect_profile, node, probe=probe, probe_requested=requested),
          record_property)
