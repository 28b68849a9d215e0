"""The coverage's "unknown hardware" state (gpuconf.plugin.fleet.unknown_model) reads the node's GPU model
from the most direct source the run has: the names its whole-node probe read (NVML's, else CUDA's),
else GFD's product label or the DRA driver's productName. A GFD-less device-plugin node with a GPU
gpus.yaml does not know counted as tested when only the label was read."""

from __future__ import annotations

import json
from typing import Any

from gpuconf.cluster.outcomes import make_outcome
from gpuconf.compat.versions import parse_cuda
from gpuconf.nodes import NodeView
from gpuconf.plugin.fleet import probed_gpu_names, unknown_model
from gpuconf.sim.emulate import Visible, cuda_probe_run
from gpuconf.sim.node_facts import node_labels, node_resources
from gpuconf.sim.profile import expand, load_profile

N = expand(load_profile("healthy-h100")).node("h100-0")
UNKNOWN = ("h100-0's GPU model NVIDIA Foo 9000 (as the whole-node probe read it) is not in gpuconf/data/gpus.yaml: "
           "its checks ran, but the figures they judge against (memory, bandwidth, compatibility class) are unknown "
           "for it; add the model to the table")


def probe_outcome(name: str | None = None, *, nvml: bool = True, log: bool = True) -> Any:
    """The whole-node probe pod's outcome on h100-0, its GPUs renamed ``name``, NVML failed unless ``nvml``."""
    code, out = cuda_probe_run(N, visible=[Visible(g) for g in N.gpus], image_cuda=parse_cuda("13.0.2"), env={},
                               compat=True, started_at="2026-12-01T00:00:00.000Z", hostname=N.name)
    doc = json.loads(out)
    if name is not None:
        for g in (*doc["nvml"]["gpus"], *doc["devices"]):
            g["name"] = name
    if not nvml:
        doc["nvml"] = {"available": False, "reason": "nvmlInit_v2: Driver Not Loaded"}
    state = {"terminated": {"exitCode": code, "reason": "Completed"}}
    pod = {"metadata": {"name": "inventory-h100-0"}, "spec": {"nodeName": N.name, "containers": [{"name": "probe"}]},
           "status": {"phase": "Succeeded", "containerStatuses": [{"name": "probe", "state": state}]}}
    return make_outcome(pod, [], logs={"probe": json.dumps(doc)} if log else {},
                        missing_logs={} if log else {"probe": "the container never started"})


def gfd_less() -> NodeView:
    """h100-0 as a device-plugin node without GFD: nvidia.com/gpu advertised, no nvidia.com/gpu.* label."""
    capacity, allocatable = node_resources(N)
    labels = {k: v for k, v in node_labels(N).items() if not k.startswith("nvidia.com/")}
    return NodeView.of(N.name, labels, capacity, allocatable, 0)


def test_a_gfd_less_node_with_an_unknown_gpu_is_unknown_hardware_by_the_probe_s_reading():
    view = gfd_less()
    assert view.facts.product.value is None  # no label, no slice: the label path says nothing
    names = probed_gpu_names({N.name: probe_outcome("NVIDIA Foo 9000")}, N.name)
    assert names == ("NVIDIA Foo 9000",) * 8
    assert unknown_model(view, names) == UNKNOWN
    # with NVML down, CUDA's device names speak for the GPUs
    assert probed_gpu_names({N.name: probe_outcome("NVIDIA Foo 9000", nvml=False)}, N.name) == ("NVIDIA Foo 9000",) * 8


def test_the_probe_s_reading_wins_over_the_label_both_ways():
    labelled = NodeView.of(N.name, node_labels(N), *node_resources(N), 0)  # GFD: NVIDIA-H100-80GB-HBM3, known
    assert unknown_model(labelled, probed_gpu_names({N.name: probe_outcome("NVIDIA Foo 9000")}, N.name)) == UNKNOWN
    stale = NodeView.of(N.name, {**node_labels(N), "nvidia.com/gpu.product": "NVIDIA-Foo-9000"}, *node_resources(N), 0)
    assert unknown_model(stale, probed_gpu_names({N.name: probe_outcome()}, N.name)) is None  # the GPUs are H100s
    # without a readable probe the label is all there is
    assert unknown_model(stale, probed_gpu_names({}, N.name)) == (
        "h100-0's GPU model NVIDIA-Foo-9000 (GFD label nvidia.com/gpu.product) is not in gpuconf/data/gpus.yaml: its "
        "checks ran, but the figures they judge against (memory, bandwidth, compatibility class) are unknown for it; "
        "add the model to the table")
    assert probed_gpu_names({N.name: probe_outcome(log=False)}, N.name) == ()
    assert unknown_model(gfd_less(), ()) is None  # named nowhere: other checks say so
