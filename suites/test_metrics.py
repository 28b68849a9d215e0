"""Accelerator metrics (CNCF AI conformance accelerator_metrics): the DCGM exporter on every GPU
node publishes per-GPU utilisation and memory (and, recommended, temperature, power and NVLink)
under the UUIDs of the GPUs the node really has. Every node's exporter is scraped once, all at
once, through the API server's pod proxy (the ``exporter_scrapes`` fixture); the GPUs are compared
with the whole-node cuda-probe the inventory suite launches (nothing new runs). The decisions are
in gpuconf.checks.metrics, the expected families in gpuconf/data/accelerator_metrics.yaml."""

from __future__ import annotations

import pytest

from gpuconf.checks import metrics as checks
from gpuconf.cluster import PodOutcome
from gpuconf.kit import judge, parsed_probe
from gpuconf.nodes import NodeView
from gpuconf.probes import ProbeParseError

pytestmark = [pytest.mark.health]


def probe_view(probes: dict[str, PodOutcome], view: NodeView) -> tuple[checks.ProbeGpus | None, str | None]:
    """The GPUs the node's whole-node probe saw, or None and why there are none (the probe's own
    failures are the inventory and smoke suites' to report)."""
    node, ask, outcome = view.name, view.whole_node(), probes.get(view.name)
    if outcome is None:
        return None, f"no whole-node probe ran on {node}" + (f": {ask.reason}" if not ask else "")
    text = outcome.logs.get("probe")
    if text is None:
        return None, f"the whole-node probe on {node} produced no output ({outcome.phase} {outcome.reason or ''})"
    try:
        report = parsed_probe(outcome, node)
    except ProbeParseError as e:
        return None, f"the whole-node probe's report on {node} is unreadable ({e})"
    # complete: the probe held every GPU of the node once (whole, unshared, no MIG, none held back as
    # unhealthy), so its GPUs and the exporter's must be the same set
    return checks.probe_gpus(report, complete=bool(ask) and ask.complete), None


@pytest.mark.cncf("accelerator_metrics")
@pytest.mark.needs_probe
@pytest.mark.check("metrics.gpu-metrics-present")
def test_gpu_metrics_present(gpu_node, gpu_nodes, exporter_scrapes, whole_node_probes, record_property):
    probe, why = probe_view(whole_node_probes, gpu_nodes[gpu_node])
    judge(checks.evaluate_gpu_metrics_present(gpu_node, exporter_scrapes[gpu_node], probe, probe_reason=why),
          record_property)


@pytest.mark.cncf("accelerator_metrics")
@pytest.mark.check("metrics.recommended-metrics-present")
def test_recommended_metrics_present(gpu_node, exporter_scrapes, record_property):
    judge(checks.evaluate_recommended_metrics_present(gpu_node, exporter_scrapes[gpu_node]), record_property)
