"""Health: device health from the NVML section of the whole-node cuda-probe the inventory suite
launched (launch once, assert many: nothing new runs). The decisions live in gpuconf.checks.health,
the thresholds in gpuconf/data/health_thresholds.yaml."""

from __future__ import annotations

import pytest

from gpuconf.checks import health
from gpuconf.plugin import judge, probe_report

pytestmark = pytest.mark.health


@pytest.mark.check("health.no-uncorrectable-ecc")
def test_no_uncorrectable_ecc(gpu_node, whole_node_probes, record_property):
    verdict = health.evaluate_no_uncorrectable_ecc(gpu_node, probe_report(whole_node_probes, gpu_node))
    for line in verdict.evidence:
        record_property("gpuconf.gpu", line)
    judge(verdict, record_property)
