"""Health: device health from the NVML section of the whole-node cuda-probe the inventory suite
launched (launch once, assert many: nothing new runs). The decisions live in gpuconf.checks.health,
the thresholds in gpuconf/data/health_thresholds.yaml."""

from __future__ import annotations

import pytest

from gpuconf.checks import health
from gpuconf.kit import judge, probe_report, skip_not_tested
from gpuconf.outcomes import COULD_NOT_RUN

pytestmark = pytest.mark.health


@pytest.mark.check("health.no-uncorrectable-ecc")
def test_no_uncorrectable_ecc(gpu_node, whole_node_probes, record_property):
    verdict = health.evaluate_no_uncorrectable_ecc(gpu_node, probe_report(whole_node_probes, gpu_node))
    for line in verdict.evidence:
        record_property("gpuconf.gpu", line)
    judge(verdict, record_property)


@pytest.mark.check("health.row-remapping-not-failed")
def test_row_remapping_not_failed(gpu_node, whole_node_probes, record_property):
    judge(health.evaluate_row_remapping(gpu_node, probe_report(whole_node_probes, gpu_node)), record_property)


@pytest.mark.check("health.no-pending-memory-repair")
def test_no_pending_memory_repair(gpu_node, whole_node_probes, record_property):
    judge(health.evaluate_no_pending_repair(gpu_node, probe_report(whole_node_probes, gpu_node)), record_property)


@pytest.mark.check("health.no-critical-xid")
def test_no_critical_xid(gpu_node, exporter_scrapes, record_property):
    scrape = exporter_scrapes.get(gpu_node)
    if scrape is None:
        skip_not_tested(f"no exporter scrape for {gpu_node}", COULD_NOT_RUN)
    rows, unavailable = health.last_xids(scrape)
    judge(health.evaluate_no_critical_xid(gpu_node, rows, source=f"DCGM exporter pod {scrape.pod}",
                                          unavailable=unavailable), record_property)
