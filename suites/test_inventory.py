"""Inventory: on every GPU node, what GFD labels, what the device plugin advertises and what a
probe pod sees through NVML and CUDA agree; the driver is one version per pool; device nodes and
NVML work. One whole-node probe per node, launched together, feeds every check."""

from __future__ import annotations

import pytest

from gpuconf.checks import inventory as checks
from gpuconf.checks.expect import declared_driver_policy, declared_gpu_count, selector_labels
from gpuconf.kit import judge, parsed_probe, probe_report
from gpuconf.probes import ProbeParseError

pytestmark = pytest.mark.inventory


@pytest.mark.check("inventory.gpu-resource-advertised")
def test_gpu_resource_advertised(gpu_node, gpu_nodes, record_property):
    judge(checks.evaluate_gpu_resource_advertised(gpu_nodes[gpu_node]), record_property)


@pytest.mark.check("inventory.allocatable-matches-capacity")
def test_allocatable_matches_capacity(request, gpu_node, gpu_nodes, expect_profile, record_property):
    node = gpu_nodes[gpu_node]
    pool = expect_profile.pool_for(selector_labels(node)) if expect_profile is not None else None
    enumerated, held = unhealthy_views(request, node)
    judge(checks.evaluate_allocatable_matches_capacity(node, enumerated=enumerated, held=held,
                                                       unhealthy_max=pool.gpu.unhealthy_max if pool else None),
          record_property)


def unhealthy_views(request, node) -> tuple[dict[str, str] | None, frozenset[str] | None]:
    """On a node with fewer GPUs allocatable than advertised, whole GPUs only: every GPU its DCGM
    exporter reports (UUID -> name) and the GPUs the whole-node probe, holding every allocatable
    one, was given; their difference names the unhealthy GPUs. (None, None) when that cannot be told."""
    name, ask = node.name, node.whole_node()
    if not ask or not ask.held_back or ask.replicas != 1 or ask.mig_units or ask.count != node.offered(ask):
        return None, None
    if ask.dra:  # held back by a device taint, which the DRA suite names: not the device plugin's Unhealthy
        return None, None
    from gpuconf.checks.metrics import gpu_name, probe_gpus

    probes = request.getfixturevalue("whole_node_probes")
    scrape = request.getfixturevalue("exporter_scrapes").get(name)
    if name not in probes or scrape is None or not scrape.gpus:
        return None, None
    try:
        report = parsed_probe(probes[name], name)
    except ProbeParseError:
        return None, None
    return {uuid: gpu_name(g) for uuid, g in scrape.gpus.items()}, probe_gpus(report, complete=False).uuids


@pytest.fixture(scope="module")
def gpu_views(gpu_nodes):
    return list(gpu_nodes.values())


@pytest.fixture(scope="module")
def driver_uniform(gpu_views, expect_profile, whole_node_probes):
    """Each node's driver.version-uniform-in-pool verdict, by node: judged once for every node (each
    verdict weighs the node's whole pool; per node it was quadratic in the nodes, issue 29). The
    driver is NVML's in the node's whole-node probe where it read one, else the labels' or slice's."""
    verdicts = checks.evaluate_driver_uniform(gpu_views, declared_driver_policy(expect_profile, gpu_views),
                                              probed=probed_drivers(whole_node_probes))
    by_node = {}
    for v in verdicts:
        by_node.setdefault(v.node, v)
    return by_node


def probed_drivers(probes) -> dict[str, str]:
    """Node -> the driver version NVML reported in its whole-node probe (nodes whose probe printed no
    readable report, or whose NVML did not initialise, are left out: their labels speak for them)."""
    out = {}
    for name, outcome in probes.items():
        if not outcome.logs.get("probe"):
            continue
        try:
            version = parsed_probe(outcome, name).nvml_driver_version
        except ProbeParseError:
            continue
        if version:
            out[name] = version
    return out


@pytest.fixture(scope="module")
def pool_counts(gpu_views):
    """Per node, the GPU count its pool's nodes usually have (GFD relabels a node that lost a GPU)."""
    return checks.pool_gpu_count(gpu_views)


@pytest.mark.check("inventory.gpu-count-matches-expected")
def test_gpu_count_matches(gpu_node, gpu_nodes, whole_node_probes, expect_profile, pool_counts, record_property):
    probe = probe_report(whole_node_probes, gpu_node) if gpu_node in whole_node_probes else None
    node = gpu_nodes[gpu_node]
    ask = node.whole_node()
    requested = ask.count if ask else 0  # what the whole-node probe asked for
    judge(checks.evaluate_gpu_count(node, probe=probe, probe_requested=requested, pool=pool_counts.get(gpu_node),
                                    expected=declared_gpu_count(expect_profile, node)), record_property)


@pytest.mark.cncf("driver_runtime_management")
@pytest.mark.check("labels.gfd-matches-hardware")
def test_labels_match_hardware(gpu_node, gpu_nodes, gpu_inventory, whole_node_probes, record_property):
    node = gpu_nodes[gpu_node]
    gfd = checks.gfd_deployment(node, gpu_inventory.cluster_policy, gpu_inventory.gpu_cluster)
    judge(checks.evaluate_labels_match_hardware(node, probe_report(whole_node_probes, gpu_node), gfd=gfd),
          record_property)


@pytest.mark.cncf("driver_runtime_management")
@pytest.mark.check("driver.version-uniform-in-pool")
def test_driver_version_uniform_in_pool(gpu_node, driver_uniform, record_property):
    judge(driver_uniform[gpu_node], record_property)


@pytest.mark.cncf("driver_runtime_management")
@pytest.mark.check("driver.nvml-initializes")
def test_nvml_initializes(gpu_node, whole_node_probes, record_property):
    judge(checks.evaluate_nvml_initializes(gpu_node, probe_report(whole_node_probes, gpu_node)), record_property)


@pytest.mark.cncf("driver_runtime_management")
@pytest.mark.check("runtime.cuda-device-nodes-present")
def test_cuda_device_nodes_present(gpu_node, whole_node_probes, record_property):
    judge(checks.evaluate_cuda_device_nodes(gpu_node, probe_report(whole_node_probes, gpu_node)), record_property)
