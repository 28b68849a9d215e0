"""Smoke: every GPU on every node runs a verified vector-add kernel through a normal resource
request (the whole-node probe the inventory suite launched: launch once, assert many)."""

from __future__ import annotations

import pytest

from gpuconf.checks.mig import mig_skip_reason, published_layout
from gpuconf.checks.probe_start import evaluate_block
from gpuconf.checks.smoke import DEVICE_NODES_OWNER, evaluate_vector_add, judged_after_device_nodes
from gpuconf.kit import judge, probe_block, probe_pod_metrics, probe_report, record_metrics, require

pytestmark = pytest.mark.smoke


@pytest.mark.check("smoke.vector-add-every-gpu")
def test_vector_add_on_every_gpu(gpu_node, gpu_nodes, whole_node_probes, selected_check_ids, record_property):
    node = gpu_nodes[gpu_node]
    # NOT TESTED with the node view's reason where the whole node cannot be asked for (MIG instances
    # only, no GPU...); MIG devices handed out as nvidia.com/gpu (strategy single) are told apart by
    # what CUDA enumerates (gpuconf.checks.smoke), not by a label
    ask = require(node.whole_node())
    block = probe_block(whole_node_probes, gpu_node)
    if block is not None and block.owner == "smoke.vector-add-every-gpu":
        # the one failure of a node whose whole-node probe could not run (no probe image starts there,
        # its container or pod never started); its dependent checks are NOT TESTED, blocked by this one
        judge(evaluate_block(block, node.labels), record_property)
    report = probe_report(whole_node_probes, gpu_node)  # NOT TESTED where another check owns the cause
    verdict = evaluate_vector_add(gpu_node, report, requested=ask.count, replicas=ask.replicas, physical=ask.physical,
                                  note=ask.note, mig_skip=mig_skip_reason(gpu_node, node.labels, node.capacity,
                                                                          published_layout(node.devices)))
    for line in verdict.evidence:
        record_property("gpuconf.gpu", line)
    # for `gpuconf report diff`: the node's slowest GPU, and how long the whole-node probe pod took to pull and start
    times = [d.kernel_ms for d in report.devices if d.kernel_ms is not None]
    record_metrics(record_property, kernel_ms=max(times) if times else None,
                   **probe_pod_metrics(whole_node_probes[gpu_node]))
    # CUDA that cannot start for a missing device node (nvidia_uvm not loaded) is the device-node
    # check's one failure: NOT TESTED here, blocked by it, when it is part of the run
    judge(judged_after_device_nodes(verdict, report, owner_selected=DEVICE_NODES_OWNER in selected_check_ids),
          record_property)
