"""Probe helpers the suites share: the cuda-probe pod with the run's settings, how the whole-node
probe asks for a node's GPUs, and the node's whole-node report read once however many checks use it."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from gpuconf.cluster import PodOutcome
from gpuconf.kit.evidence import skip_not_tested
from gpuconf.kit.state import DEFAULT_PROBE_CUDA, inventory, node_views, run_context, session
from gpuconf.outcomes import BLOCKED, COULD_NOT_RUN

if TYPE_CHECKING:
    from gpuconf.nodes import GpuRequest, NodeView
    from gpuconf.probe_pods import ClaimRequest, RendezvousMember

__all__ = ["WholeNodeProbes", "blocked", "claim_template", "cuda_probe_pod", "gpu_ask", "native_probe_cuda",
           "parsed_probe", "probe_block", "probe_report", "rendezvous_group"]

class WholeNodeProbes(dict[str, PodOutcome]):
    """The whole-node probes by node, and for each GPU node without one the node view's reason why
    (``why``: the NOT TESTED line of every check that reads it; ``kinds``: its NOT TESTED kind,
    gpuconf.nodes.Unavailable.kind); ``selected``: the check ids this run
    selected (None: unknown), so a check blocked by another that does not run fails instead;
    ``runtime_missing``: scheduling.runtimeclass-present's failure where the cluster has no
    RuntimeClass for the NVIDIA runtime (gpuconf.checks.probe_start.whole_node_block); ``extended``: by
    node, the DRA-backed extended resource its probe asked for (gpuconf.nodes.NodeView.extended)."""

    def __init__(self, outcomes: Mapping[str, PodOutcome] | None = None, why: Mapping[str, str] | None = None,
                 selected: frozenset[str] | None = None, runtime_missing: str | None = None,
                 extended: Mapping[str, str] | None = None, kinds: Mapping[str, str] | None = None) -> None:
        super().__init__(outcomes or {})
        self.why: dict[str, str] = dict(why or {})
        self.kinds: dict[str, str] = dict(kinds or {})
        self.selected = selected
        self.runtime_missing = runtime_missing
        self.extended: dict[str, str] = dict(extended or {})


def claim_template(config: pytest.Config, claims: tuple[ClaimRequest, ...], *, check: str) -> str:
    """The ResourceClaimTemplate with these requests, made once per run however many pods use it
    (each pod naming it gets its own claim); its name."""
    from gpuconf.probe_pods import make_resource_claim_template

    state = session(config)
    if claims not in state.templates:
        ctx = run_context(config)
        kinds = "-".join(dict.fromkeys(c.name for c in claims))
        body = make_resource_claim_template(name=f"gpuconf-{kinds}-{len(state.templates)}", namespace=ctx.namespace,
                                            run_id=ctx.run_id, check=check, requests=list(claims))
        api = ctx.cluster.resource
        state.templates[claims] = ctx.create("resourceclaimtemplate", api.create_namespaced_resource_claim_template,
                                             api.delete_namespaced_resource_claim_template, body)
    return state.templates[claims]


def gpu_ask(config: pytest.Config, ask: GpuRequest, *, check: str) -> dict[str, Any]:
    """How a probe pod's container asks for ``ask``'s GPUs, as keyword arguments of the pod builders
    (make_cuda_probe_pod, make_nccl_probe_pod, make_dcgm_diag_pod): a claim from the run's template for
    its requests (no GPU limits), or ``count`` of its resource in the limits (the device plugin's, a MIG
    profile's, or a DRA-backed extended resource the scheduler serves through a claim it makes)."""
    if ask.claims:
        return {"gpu_count": 0, "resource_claims": {ask.claims[0].name: claim_template(config, ask.claims,
                                                                                          check=check)}}
    return {"gpu_count": ask.count, "gpu_resource": ask.resource or "nvidia.com/gpu"}


def native_probe_cuda(node: NodeView) -> str:
    """The newest probe CUDA the node's driver supports natively (the driver's CUDA as the node view
    reads it: GFD's nvidia.com/cuda.runtime.*, else the DRA driver's cudaDriverVersion), so the
    inventory and smoke probe never depends on forward compatibility (the compat suite tests that);
    the default probe CUDA when neither says."""
    from gpuconf import images
    from gpuconf.compat.versions import VersionError, parse_cuda

    cuda = node.facts.cuda.value
    try:
        native = parse_cuda(cuda) if cuda else None
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
                   node: str | None = None, ask: GpuRequest | None = None, **kw: Any) -> dict[str, Any]:
    """A cuda-probe pod in this run's namespace with the run's settings (registry, the probe budget)
    and, unless ``kw`` names one (``runtime_class=None``: none, as most workloads do), the RuntimeClass
    the node view finds for ``node`` by the NVIDIA runtime's handler (for a pod placed by the
    scheduler alone: any class with that handler). ``ask`` (a gpuconf.nodes.GpuRequest) says how the
    probe container asks for its GPUs: the resource limits, or a claim on the run's template for its
    requests. The rest of ``kw`` goes to make_cuda_probe_pod."""
    from gpuconf.probe_pods import make_cuda_probe_pod

    ctx = run_context(config)
    kw.setdefault("registry", config.getoption("--registry"))
    if "runtime_class" not in kw:
        views = node_views(config)
        if node is not None and node in views:
            kw["runtime_class"] = views[node].runtime_class
        else:
            from gpuconf.nodes import RuntimeClassRef, gpu_runtime_class

            inv = inventory(config)
            kw["runtime_class"] = gpu_runtime_class(RuntimeClassRef(rc.name, rc.handler, rc.node_selector)
                                                    for rc in (inv.runtime_classes if inv is not None else ()))
    if ask is not None:
        kw.update(gpu_ask(config, ask, check=check))
    return make_cuda_probe_pod(name=name, namespace=ctx.namespace, run_id=ctx.run_id, check=check, cuda=cuda,
                               node=node, **kw)


def rendezvous_group(config: pytest.Config, *, check: str, prefix: str, key: str,
                     hostnames: Sequence[str]) -> dict[str, RendezvousMember]:
    """Pods that must hold their GPUs at the same time (``key``: what makes the group, e.g. the node):
    the group's headless Service, created now and deleted with the run, and each pod's rendezvous by
    hostname (give it to cuda_probe_pod as ``rendezvous``): its probe holds its GPUs until it has seen
    every peer hold theirs (the cuda-probe's --rendezvous). The probes wait for their peers at most
    half the campaign's budget (--timeout), RENDEZVOUS_WAIT_S at most: a probe whose peer never comes
    still prints its document (met false, with why) before the campaign stops waiting for it."""
    from gpuconf.probe_pods import RENDEZVOUS_WAIT_S, make_rendezvous_service, rendezvous_group_name
    from gpuconf.probe_pods import rendezvous_group as members

    ctx = run_context(config)
    group = rendezvous_group_name(prefix, key)
    core = ctx.cluster.core
    ctx.create("service", core.create_namespaced_service, core.delete_namespaced_service,
               make_rendezvous_service(name=group, namespace=ctx.namespace, run_id=ctx.run_id, check=check))
    wait_s = min(RENDEZVOUS_WAIT_S, max(10, int(config.getoption("gpuconf_timeout") / 2)))
    return members(group, hostnames, namespace=ctx.namespace, wait_s=wait_s)


def probe_block(probes: Mapping[str, PodOutcome], node: str) -> Any:
    """Why the whole-node probe of ``node`` in ``probes`` printed no report and which check owns that
    (gpuconf.checks.probe_start.Block: ProbeBlock where no probe image can start, else Blocked), or
    None."""
    from gpuconf import images
    from gpuconf.checks.probe_start import whole_node_block

    return whole_node_block(node, probes.get(node), [p.cuda for p in images.matrix()],
                            runtime_missing=getattr(probes, "runtime_missing", None),
                            extended=(getattr(probes, "extended", None) or {}).get(node))


def blocked(probes: Mapping[str, PodOutcome], node: str, check: str | None) -> None:
    """For a check that depends on ``node``'s whole-node probe: NOT TESTED "blocked by <owner>:
    <cause>" where the probe printed no report and its owner, another check of this run, reports the
    cause; a failure with the cause where the owner is not part of the run (nothing would report it);
    nothing otherwise (the owner itself, or a probe that printed its report)."""
    block = probe_block(probes, node)
    if block is None or block.owner == check:
        return
    selected = getattr(probes, "selected", None)
    if selected is not None and block.owner not in selected:
        pytest.fail(f"{block.cause} (the check that reports this, {block.owner}, is not part of this run)",
                    pytrace=False)
    skip_not_tested(block.reason, BLOCKED, blocked_by=block.owner)


def probe_report(probes: dict[str, PodOutcome], node: str) -> Any:
    """The node's whole-node cuda-probe report, or NOT TESTED "blocked by <owner>: <cause>" where it
    printed none (gpuconf.checks.probe_start: the owner reports the cause once)."""
    from gpuconf.probes import ProbeParseError

    outcome = probes.get(node)
    if outcome is None:
        skip_not_tested(getattr(probes, "why", {}).get(node) or f"no probe ran on {node}",
                        getattr(probes, "kinds", {}).get(node) or COULD_NOT_RUN)
    blocked(probes, node, None)
    if not outcome.logs.get("probe"):  # whole_node_block names every such case; never judge an absent report
        pytest.fail(f"the probe pod on {node} printed no report", pytrace=False)
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
