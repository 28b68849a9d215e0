"""Bandwidth: host-device copy bandwidth and PCIe links from the whole-node cuda-probe the inventory
suite launched (launch once, assert many: the probe measures each GPU's pinned copies and reads its
link through NVML; nothing new runs). The decisions live in gpuconf.checks.bandwidth, the links and
floors in gpuconf/data/host_bandwidth.yaml."""

from __future__ import annotations

import pytest

from gpuconf.checks import bandwidth
from gpuconf.checks.expect import selector_labels
from gpuconf.kit import judge, probe_report, record_metrics, record_series

pytestmark = pytest.mark.bandwidth

#: The series the bandwidth checks record, by name: what each measures.
_DIRECTIONS = {"h2d_gbps": "host-to-device", "d2h_gbps": "device-to-host"}


def declared_link(expect_profile, gpu_nodes, node: str) -> tuple[int, int] | None:
    """The (generation, width) the node's --expect pool declares under ``pcie``, or None."""
    pool = expect_profile.pool_for(selector_labels(gpu_nodes[node])) if expect_profile is not None else None
    return (pool.pcie.gen, pool.pcie.width) if pool is not None and pool.pcie is not None else None


def report(verdict, record_property) -> None:
    """Each GPU's reading as evidence, the per-GPU copy figures as series and the node's slowest GPU
    as the figures `gpuconf report diff` compares, then the verdict."""
    for line in verdict.evidence:
        record_property("gpuconf.gpu", line)
    series = verdict.facts.get("series", {})
    for name, points in series.items():
        direction = _DIRECTIONS.get(name, name)
        record_series(record_property, name, points, x=("GPU", "CUDA index"), y=(f"{direction} copy", "GB/s"),
                      x_scale="category", title=f"{direction} pinned copy bandwidth per GPU")
    record_metrics(record_property, **{name: min(y for _, y in points) for name, points in series.items()})
    judge(verdict, record_property)


@pytest.mark.check("bandwidth.pcie-link-at-max")
def test_pcie_link_at_max(gpu_node, whole_node_probes, expect_profile, gpu_nodes, record_property):
    report(bandwidth.evaluate_pcie_link_at_max(gpu_node, probe_report(whole_node_probes, gpu_node),
                                               declared=declared_link(expect_profile, gpu_nodes, gpu_node)),
           record_property)


@pytest.mark.check("bandwidth.host-device-floor")
def test_host_device_floor(gpu_node, whole_node_probes, expect_profile, gpu_nodes, record_property):
    report(bandwidth.evaluate_host_device_floor(gpu_node, probe_report(whole_node_probes, gpu_node),
                                                declared=declared_link(expect_profile, gpu_nodes, gpu_node)),
           record_property)
