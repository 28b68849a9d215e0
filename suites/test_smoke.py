"""Smoke: every GPU on every node runs a verified vector-add kernel through a normal resource
request (the whole-node probe the inventory suite launched: launch once, assert many)."""

from __future__ import annotations

import pytest

from gpuconf.checks.probe_start import evaluate_probe_block
from gpuconf.checks.smoke import evaluate_vector_add
from gpuconf.kit import judge, probe_block, probe_pod_metrics, probe_report, record_metrics, require

pytestmark = pytest.mark.smoke


@pytest.mark.check("smoke.vector-add-every-gpu")
def test_vector_add_on_every_gpu(gpu_node, gpu_nodes, whole_node_probes, record_property):
    node = gpu_nodes[gpu_node]
    # NOT TESTED with the node view's reason where the whole node cannot be asked for (MIG instances
    # only, no GPU...); MIG devices handed out as nvidia.com/gpu (strategy single) are told apart by
    # what CUDA enumerates (gpuconf.checks.smoke), not by a label
    ask = require(node.whole_node())
    if (block := probe_block(whole_node_probes, gpu_node)) is not None:
        # the one failure of a node no probe image can start on; its other checks are not tested
        judge(evaluate_probe_block(block, node.labels, check="smoke.vector-add-every-gpu"), record_property)
    report = probe_report(whole_node_probes, gpu_node)
    verdict = evaluate_vector_add(gpu_node, report, requested=ask.count, replicas=ask.replicas, physical=ask.physical,
                                  note=ask.note)
    for line in verdict.evidence:
        record_property("gpuconf.gpu", line)
    # for `gpuconf report diff`: the node's slowest GPU, and how long the whole-node probe pod took to pull and start
    times = [d.kernel_ms for d in report.devices if d.kernel_ms is not None]
    record_metrics(record_property, kernel_ms=max(times) if times else None,
                   **probe_pod_metrics(whole_node_probes[gpu_node]))
    judge(verdict, record_property)
