"""The cluster against its declared profile (--expect FILE): every declared pool has its nodes, every
GPU node belongs to a pool, and every node carries what its pool declares. The whole-node probes
the inventory suite launches (one campaign, shared) add what a pod sees. Without --expect the
checks are not tested."""

from __future__ import annotations

import pytest

from gpuconf.checks import expect as checks
from gpuconf.kit import judge, probe_report

pytestmark = pytest.mark.expect


@pytest.mark.check("expect.pool-populated")
def test_pools_populated(expect_profile, fleet_nodes, record_property):
    judge(checks.combined(checks.evaluate_pool_populated(expect_profile, list(fleet_nodes.values()))), record_property)


@pytest.mark.check("expect.node-in-a-pool")
def test_node_in_a_pool(gpu_node, expect_profile, gpu_nodes, record_property):
    judge(checks.evaluate_node_in_a_pool(expect_profile, gpu_nodes[gpu_node]), record_property)


@pytest.mark.check("expect.node-matches-pool")
def test_node_matches_pool(gpu_node, expect_profile, gpu_nodes, request, record_property):
    node = gpu_nodes[gpu_node]
    if expect_profile is None or expect_profile.pool_for(checks.selector_labels(node)) is None:
        judge(checks.evaluate_node_matches_pool(expect_profile, node), record_property)
        return
    probes = request.getfixturevalue("whole_node_probes")  # only with a declaration to compare against
    try:
        probe = probe_report(probes, gpu_node) if gpu_node in probes else None
    except (pytest.fail.Exception, pytest.skip.Exception):
        probe = None  # a probe without a report is the inventory suite's failure; compare the labels alone
    ask = node.whole_node()
    requested = ask.count if ask else 0  # what the whole-node probe asked for
    judge(checks.evaluate_node_matches_pool(expect_profile, node, probe=probe, probe_requested=requested),
          record_property)
