"""The node view: one place that knows each GPU node (how to ask for its GPUs, which RuntimeClass
runs them, where each fact comes from). Pure: no pytest, no I/O; built once per session from the
inventory (gpuconf.kit builds it, the suites ask it)."""

from gpuconf.nodes.availability import (
    BUSY,
    CORDONED,
    NOT_READY,
    TAINTED,
    UNSCHEDULABLE_TAINT,
    Availability,
    GpuHolder,
    TolerationError,
    gpu_holders,
    parse_toleration,
    placement_blocker,
)
from gpuconf.nodes.devices import GPU_CLASS, GPU_DRIVER, MIG_CLASS, DeviceTaint, SliceDevice, slice_devices
from gpuconf.nodes.facts import Fact, NodeFacts, Source
from gpuconf.nodes.offers import GpuRequest, Unavailable, Via, Why
from gpuconf.nodes.view import NVIDIA_HANDLER, NodeView, RuntimeClassRef, build_views, gpu_runtime_class

__all__ = ["Availability", "BUSY", "CORDONED", "DeviceTaint", "Fact", "GPU_CLASS", "GPU_DRIVER", "GpuHolder",
           "GpuRequest", "MIG_CLASS", "NOT_READY", "NVIDIA_HANDLER", "NodeFacts", "NodeView", "RuntimeClassRef",
           "SliceDevice", "Source", "TAINTED", "TolerationError", "UNSCHEDULABLE_TAINT", "Unavailable", "Via", "Why",
           "build_views", "gpu_holders", "gpu_runtime_class", "parse_toleration", "placement_blocker", "slice_devices"]
