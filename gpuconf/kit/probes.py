"""Probe helpers the suites share: the cuda-probe pod with the run's settings, how the whole-node
probe asks for a node's GPUs, and the node's whole-node report read once however many checks use it."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import pytest

from gpuconf.cluster import PodOutcome, RunContext
from gpuconf.kit.state import DEFAULT_PROBE_CUDA, inventory, run_context

__all__ = ["DRA_GPU_CLASS", "cuda_probe_pod", "dra_whole_gpus", "native_probe_cuda", "parsed_probe", "probe_block",
           "probe_report", "whole_node_claim_template", "whole_node_request"]

#: The NVIDIA DRA driver's DeviceClass for whole GPUs.
DRA_GPU_CLASS = "gpu.nvidia.com"


def whole_node_request(node: Any) -> int:
    """How many nvidia.com/gpu the whole-node probe asks for on ``node`` (a GpuNode): every allocatable
    one, except on MPS nodes, whose device plugin gives a container one replica at most ("maximum
    request size for shared resources is 1"): there it asks for one."""
    allocatable = int(node.allocatable.get("nvidia.com/gpu", "0") or 0)
    if node.labels.get("nvidia.com/gpu.sharing-strategy") == "mps":
        return min(allocatable, 1)
    return allocatable


def dra_whole_gpus(node: Any) -> int:
    """How many whole GPUs (device type gpu, not MIG instances) the NVIDIA DRA driver publishes for
    ``node`` (a GpuNode) in its node-local ResourceSlices: what the whole-node probe's claim gets on a
    node without nvidia.com/gpu."""
    from gpuconf.checks.dra import slice_devices

    return sum(d.kind == "gpu" for d in slice_devices([s.raw for s in node.slices], node.name))


def whole_node_claim_template(ctx: RunContext) -> str:
    """A ResourceClaimTemplate asking every GPU of the node the pod lands on (allocation mode All):
    the whole-node probe of a node that publishes its GPUs through DRA only."""
    from gpuconf.probe_pods import ClaimRequest, make_resource_claim_template

    body = make_resource_claim_template(name="whole-node-gpus", namespace=ctx.namespace, run_id=ctx.run_id,
                                        check="inventory",
                                        requests=[ClaimRequest("gpus", DRA_GPU_CLASS, mode="All")])
    api = ctx.cluster.resource
    return ctx.create("resourceclaimtemplate", api.create_namespaced_resource_claim_template,
                      api.delete_namespaced_resource_claim_template, body)


def native_probe_cuda(labels: Mapping[str, str]) -> str:
    """The newest probe CUDA the node's driver supports natively (GFD's nvidia.com/cuda.runtime.*),
    so the inventory and smoke probe never depends on forward compatibility (the compat suite tests
    that); the default probe CUDA when the labels do not say."""
    from gpuconf import images
    from gpuconf.compat.versions import VersionError, parse_cuda

    major, minor = labels.get("nvidia.com/cuda.runtime.major"), labels.get("nvidia.com/cuda.runtime.minor")
    try:
        native = parse_cuda(f"{major}.{minor}") if major and minor else None
        matrix = sorted((parse_cuda(p.cuda), p.cuda) for p in images.matrix() if p.probe == "cuda-probe")
    except VersionError:
        return DEFAULT_PROBE_CUDA
    if native is None or not matrix:
        return DEFAULT_PROBE_CUDA
    fitting = [cuda for version, cuda in matrix if version.major_minor <= native.major_minor]
    # Below every probe: the oldest one (minor-version compatibility within a major, else the
    # compat suite says why nothing runs).
    return fitting[-1] if fitting else matrix[0][1]


def cuda_probe_pod(config: pytest.Config, *, name: str, check: str, cuda: str = DEFAULT_PROBE_CUDA,
                   **kw: Any) -> dict[str, Any]:
    """A cuda-probe pod in this run's namespace with the run's settings (registry, the RuntimeClass
    whose handler is nvidia when the cluster has one, the probe budget); ``kw`` goes to
    make_cuda_probe_pod (``runtime_class=None``: name none, as most workloads do)."""
    from gpuconf.probe_pods import make_cuda_probe_pod

    ctx = run_context(config)
    inv = inventory(config)
    kw.setdefault("registry", config.getoption("--registry"))
    if "runtime_class" not in kw and inv is not None:
        from gpuconf.checks.scheduling import gpu_runtime_class  # the NVIDIA runtime's class, whatever its name

        kw["runtime_class"] = gpu_runtime_class([(rc.name, rc.handler) for rc in inv.runtime_classes])
    return make_cuda_probe_pod(name=name, namespace=ctx.namespace, run_id=ctx.run_id, check=check, cuda=cuda, **kw)


def probe_block(probes: Mapping[str, PodOutcome], node: str) -> Any:
    """The finding that no probe image can start on ``node`` (gpuconf.checks.probe_start.ProbeBlock),
    read from its whole-node probe in ``probes``, or None."""
    from gpuconf import images
    from gpuconf.checks.probe_start import probe_block as block_of

    return block_of(node, probes.get(node), [p.cuda for p in images.matrix()])


def probe_report(probes: dict[str, PodOutcome], node: str) -> Any:
    """The node's whole-node cuda-probe report, or a failure that says why there is none (NOT TESTED
    where no probe image can start on the node: smoke reports that once)."""
    from gpuconf.diagnose import diagnose
    from gpuconf.probes import ProbeParseError

    outcome = probes.get(node)
    if outcome is None:
        pytest.skip(f"no probe ran on {node}: it advertises no nvidia.com/gpu")
    if (block := probe_block(probes, node)) is not None:
        pytest.skip(block.reason)
    text = outcome.logs.get("probe")
    if text is None:
        hints = [d.title for d in diagnose("\n".join([outcome.message or ""] + [e.message for e in outcome.events]))]
        pytest.fail(f"the probe pod on {node} produced no output: {outcome.phase} {outcome.reason or ''} "
                    f"{outcome.message or ''}".strip() + (f"\n  diagnosis: {'; '.join(hints)}" if hints else ""),
                    pytrace=False)
    try:
        return parsed_probe(outcome, node)
    except ProbeParseError as exc:
        unreadable = str(exc)
    pytest.fail(unreadable, pytrace=False)  # outside the handler: one message, no chained exception


def parsed_probe(outcome: PodOutcome, node: str) -> Any:
    """The cuda-probe report in ``outcome``'s ``probe`` container log (which must be there), parsed
    once however many checks read it; raises gpuconf.probes.ProbeParseError."""
    return _parsed_probe(outcome.logs["probe"], outcome.container("probe").exit_code, f"probe pod on {node}")


@functools.lru_cache(maxsize=4096)
def _parsed_probe(text: str, code: int | None, source: str) -> Any:
    """One parse (and schema validation) per whole-node report, however many checks read it: the
    report is frozen, so every test of the node shares it (at 1,000 nodes re-parsing was a third of
    the runner's CPU)."""
    from gpuconf.probes.cuda import parse_cuda_probe

    return parse_cuda_probe(text, exit_code=code, source=source)
