"""Smoke: every GPU on every node runs a verified vector-add kernel through a normal resource
request (the whole-node probe the inventory suite launched: launch once, assert many)."""

from __future__ import annotations

import pytest

from gpuconf.checks.probe_start import evaluate_probe_block
from gpuconf.checks.smoke import evaluate_vector_add
from gpuconf.kit import (
    dra_whole_gpus,
    judge,
    probe_block,
    probe_pod_metrics,
    probe_report,
    record_metrics,
    whole_node_request,
)

pytestmark = pytest.mark.smoke


@pytest.mark.check("smoke.vector-add-every-gpu")
def test_vector_add_on_every_gpu(gpu_node, gpu_inventory, whole_node_probes, record_property):
    node = gpu_inventory.node(gpu_node)
    requested = whole_node_request(node)
    replicas = int(node.labels.get("nvidia.com/gpu.replicas", "1") or 1)
    note = ""
    if requested < int(node.allocatable.get("nvidia.com/gpu", "0") or 0):  # MPS: one replica per container
        replicas, note = 1, (f" (MPS: a container gets one replica of one GPU; the sharing suite's pods run on "
                             f"more of {gpu_node}'s GPUs)")
    if requested < 1 and gpu_node in whole_node_probes:  # DRA only: the probe's claim holds every GPU
        requested, note = dra_whole_gpus(node), " (every GPU through one DRA claim)"
    if requested < 1:
        pytest.skip(f"{gpu_node} advertises no nvidia.com/gpu (MIG nodes are covered by the mig suite)")
    if node.labels.get("nvidia.com/mig.strategy") == "single" and "-MIG-" in node.labels.get("nvidia.com/gpu.product",
                                                                                         ""):
        pytest.skip(f"{gpu_node} advertises MIG devices as nvidia.com/gpu (strategy single): one CUDA process "
                    "enumerates one MIG device, so a whole-node probe cannot exercise them; the mig suite does")
    if (block := probe_block(whole_node_probes, gpu_node)) is not None:
        # the one failure of a node no probe image can start on; its other checks are not tested
        judge(evaluate_probe_block(block, node.labels, check="smoke.vector-add-every-gpu"), record_property)
    count = node.labels.get("nvidia.com/gpu.count", "")
    report = probe_report(whole_node_probes, gpu_node)
    verdict = evaluate_vector_add(gpu_node, report, requested=requested, replicas=replicas,
                                  physical=int(count) if count.isdigit() and not note else None, note=note)
    for line in verdict.evidence:
        record_property("gpuconf.gpu", line)
    # for `gpuconf report diff`: the node's slowest GPU, and how long the whole-node probe pod took to pull and start
    times = [d.kernel_ms for d in report.devices if d.kernel_ms is not None]
    record_metrics(record_property, kernel_ms=max(times) if times else None,
                   **probe_pod_metrics(whole_node_probes[gpu_node]))
    judge(verdict, record_property)
