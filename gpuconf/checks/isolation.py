"""Isolation checks (secure accelerator access): a pod sees the GPUs it was allocated and no
others: none without a request (even when its environment asks for all), exactly N with N, none
shared with a concurrent pod, and none in a container of the pod that did not request one.

Every probe pod of the suite is planned here (:func:`plan_node`) and launched in one campaign;
what each container saw comes in as a :class:`Sighting` (the parsed cuda-probe document, or why
there is none). A probe that sees no device exits 3 or 4 with a valid document: for these checks
that is the expected observation, so the document is read, not the exit code. A container that
produced no document proves nothing and fails, with the pod's reason and a diagnosis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gpuconf.cluster import PodOutcome
from gpuconf.diagnose import diagnose
from gpuconf.nodes import SliceDevice
from gpuconf.outcomes import COULD_NOT_RUN, NOT_APPLICABLE
from gpuconf.probe_pods import probe_pod_name
from gpuconf.probes import ProbeParseError
from gpuconf.probes.cuda import CudaProbeReport, parse_cuda_probe
from gpuconf.verdict import Outcome, Verdict, check, failed, not_tested, passed

__all__ = [
    "CLAIM_OWNER",
    "CONCURRENT_ROLES",
    "ClaimGrant",
    "GpuView",
    "PlannedPod",
    "Sighting",
    "evaluate_concurrent_pods_disjoint",
    "evaluate_envvar_without_request",
    "evaluate_no_request_sees_no_gpu",
    "evaluate_only_requesting_container",
    "evaluate_sees_only_allocated",
    "Overlap",
    "held_together",
    "rendezvous_overlap",
    "plan_node",
    "claim_grant",
    "pod_name",
    "sighting",
]

#: The check that owns "a pod sees another GPU than its claim was allocated" (the DRA driver prepares
#: the wrong device): gpuconf.checks.probe_start's table of owners.
CLAIM_OWNER = "dra.claim-allocates-the-probed-device"



def pod_name(role: str, node: str) -> str:
    """``iso-<role>-<node>``, cut and made unique by a hash of the node name when too long."""
    return probe_pod_name("iso", role, node)


@dataclass(frozen=True)
class PlannedPod:
    """One isolation probe pod on one node. ``waits``: the node's pods together ask for more GPUs
    than it has, so this one may stay Pending until others finish (the suite gives it the
    campaign's budget to be scheduled in, instead of the default). ``together``: one of the two
    concurrent one-GPU pods, which hold their GPUs until each has seen the other hold its own (the
    cuda-probe's rendezvous, under the hostname ``role``)."""

    role: str  # none | envvar | one | split | two
    name: str
    gpu_count: int
    sidecar_gpu_count: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    waits: bool = False
    together: bool = False


#: The two pods that hold one GPU each at the same time (isolation.concurrent-pods-disjoint).
CONCURRENT_ROLES = ("one", "split")


def plan_node(node: str, allocatable: int, *, max_request: int | None = None,
              shared: bool = False) -> tuple[PlannedPod, ...]:
    """The isolation pods for a node with ``allocatable`` nvidia.com/gpu: two that request none
    (``none``, ``envvar``), and where the node has GPUs ``one`` (1 GPU), ``split`` (1 GPU in its
    probe container, none in its sidecar) and, with two or more, ``two`` (2 GPUs). ``max_request``:
    the most one container may ask for (1 on MPS nodes, whose device plugin refuses more).

    ``one`` and ``split`` are also the two concurrent one-GPU pods: where the node has two GPUs for
    them (and does not share its GPUs, ``shared``: then concurrency proves nothing) they are a
    rendezvous group, holding their GPUs until each saw the other hold its own, so they overlap by
    construction. They fit together: on a node with fewer than four GPUs ``two`` may queue for them
    (``waits``) but never holds them while waiting, so the group is always admitted in the end."""
    pods = [PlannedPod("none", pod_name("none", node), 0),
            PlannedPod("envvar", pod_name("envvar", node), 0, env={"NVIDIA_VISIBLE_DEVICES": "all"})]
    if allocatable < 1:
        return tuple(pods)
    two = allocatable >= 2 and (max_request is None or max_request >= 2)
    wanted = [("one", 1, None), ("split", 1, 0)] + ([("two", 2, None)] if two else [])
    waits = sum(count for _, count, _ in wanted) > allocatable
    together = allocatable >= 2 and not shared
    return tuple(pods + [PlannedPod(role, pod_name(role, node), count, sidecar, waits=waits,
                                    together=together and role in CONCURRENT_ROLES)
                         for role, count, sidecar in wanted])


# -------------------------------------------------------------------------------------------------
# What a container saw


@dataclass(frozen=True)
class Sighting:
    """What one probe container saw: its report, or ``failure`` saying why there is none."""

    where: str  # "pod iso-one-node-a" or "container sidecar of pod iso-split-node-a"
    report: CudaProbeReport | None
    failure: str | None = None


def sighting(outcome: PodOutcome, container: str = "probe") -> Sighting:
    """The container's cuda-probe document from a campaign outcome, or why there is none (the
    pod's phase and reason, its events' diagnosis)."""
    where = f"pod {outcome.name}" if container == "probe" else f"container {container} of pod {outcome.name}"
    text = outcome.logs.get(container)
    if not text:
        messages = [m for m in (outcome.message, *(e.message for e in outcome.events)) if m]
        hints = [d.title for d in diagnose("\n".join(messages))]
        why = " ".join(p for p in (outcome.phase, outcome.reason or "", outcome.message or "") if p)
        missing = outcome.missing_logs.get(container)
        failure = f"{where} produced no probe output ({why})" + (f"; logs: {missing}" if missing else "") + (
            f"; diagnosis: {'; '.join(hints)}" if hints else "")
        return Sighting(where, None, failure)
    try:
        code = next((c.exit_code for c in outcome.containers if c.name == container and not c.init), None)
        return Sighting(where, parse_cuda_probe(text, exit_code=code, source=where))
    except ProbeParseError as exc:
        return Sighting(where, None, str(exc))


@dataclass(frozen=True)
class ClaimGrant:
    """The devices a pod's ResourceClaims were allocated (``status.allocation.devices.results``, as
    run_campaign(record_claims=True) saw them while the pod ran), as the GPU UUIDs the node's slices
    publish for them; ``unknown`` says why they are not known (then nothing is judged on them)."""

    uuids: tuple[str, ...] = ()
    names: tuple[str, ...] = ()  # the devices, for evidence: gpu-3 (GPU-...)
    unknown: str | None = None


def claim_grant(outcome: PodOutcome, devices: Sequence[SliceDevice]) -> ClaimGrant:
    """What ``outcome``'s pod was allocated through its claims (a claim from the run's template, or the
    one the scheduler made for a DRA-backed extended resource: both name the pod as owner)."""
    if not outcome.claims:
        why = outcome.claims_error or "no allocated claim of the pod was seen while it ran"
        return ClaimGrant(unknown=f"the allocation of pod {outcome.name}'s claim is unknown: {why}")
    by_key = {(d.driver, d.pool, d.name): d for d in devices}
    uuids, names = [], []
    for claim in outcome.claims:
        allocation = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
        for r in allocation.get("results") or ():
            key = (str(r.get("driver")), str(r.get("pool")), str(r.get("device")))
            device = by_key.get(key)
            if device is None or not device.uuid:
                return ClaimGrant(unknown=f"pod {outcome.name}'s claim was allocated {'/'.join(key)}, which no "
                                  "ResourceSlice of the node publishes with a UUID")
            uuids.append(device.uuid)
            names.append(device.describe())
    return ClaimGrant(tuple(uuids), tuple(names))


@dataclass(frozen=True)
class GpuView:
    """The GPUs a container saw, three ways. ``cuda``/``nvml`` are None where that view could not
    be read (CUDA failed for another reason than "no device"; NVML failed to initialise): an
    unreadable view is no evidence of zero."""

    cuda: tuple[str, ...] | None  # CUDA device UUIDs (MIG-... for instances)
    nvml: tuple[str, ...] | None  # NVML GPU UUIDs (physical GPUs)
    dev: tuple[str, ...]  # /dev/nvidiaN
    mig: bool = False  # CUDA's devices are MIG instances
    unreadable: tuple[str, ...] = ()  # why a view is None

    @classmethod
    def of(cls, report: CudaProbeReport) -> GpuView:
        unreadable: list[str] = []
        no_driver = report.libcuda_absent_reason is not None  # nothing injected: libcuda is not there
        cuda: tuple[str, ...] | None
        if report.init.ok:
            cuda = tuple(d.uuid or f"CUDA device {d.index}" for d in report.devices)
        elif report.init.code == 100 or no_driver:
            cuda = ()
        else:
            cuda = None
            unreadable.append(f"CUDA did not initialise: {report.init}")
        nvml: tuple[str, ...] | None
        if report.nvml_absent_reason is None:
            nvml = tuple(g.uuid or f"NVML GPU {g.index}" for g in report.nvml_gpus)
        elif "cannot open shared object" in report.nvml_absent_reason:
            nvml = ()  # libnvidia-ml is injected with a GPU; without one it is not there
        else:
            nvml = None
            unreadable.append(f"NVML did not load: {report.nvml_absent_reason}")
        dev = tuple(str(p) for p in report.device_nodes.get("gpus") or ())
        return cls(cuda, nvml, dev, any(d.mig for d in report.devices), tuple(unreadable))

    def views(self) -> dict[str, tuple[str, ...]]:
        """The readable views, by name."""
        out = {"CUDA devices": self.cuda, "NVML GPUs": self.nvml, "/dev/nvidiaN": self.dev}
        return {k: v for k, v in out.items() if v is not None}

    def uuids(self) -> tuple[str, ...]:
        """The identities to compare between pods: CUDA's (MIG-aware), else NVML's, else the nodes."""
        return self.cuda if self.cuda is not None else self.nvml if self.nvml is not None else self.dev

    def describe(self, *, full: bool = False) -> str:
        parts = [f"{k}: {len(v)}" + (f" ({', '.join(v) if full else _ids(v)})" if v else "")
                 for k, v in self.views().items()]
        return "; ".join(parts + list(self.unreadable))


def _ids(ids: Sequence[str], limit: int = 3) -> str:
    """A list of GPU ids for a message: the first ``limit`` and how many more (evidence has them all)."""
    if not ids:
        return "none"
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def _env_line(report: CudaProbeReport) -> str:
    return f"NVIDIA_VISIBLE_DEVICES in the container: {report.env.get('NVIDIA_VISIBLE_DEVICES')!r}"


def _no_output(cid: str, node: str, seen: Sighting, what: str) -> Verdict:
    why = seen.failure or f"{seen.where} produced no cuda-probe document"
    return failed(cid, node, f"{what}: {why}", expected="a cuda-probe document", observed=why)


def _blind(view: GpuView) -> str | None:
    """Why ``view`` cannot judge what a container sees (None: CUDA or NVML was read). The device
    nodes alone are no identity and no proof: a container given a GPU whose CUDA and NVML both fail
    shows /dev/nvidiaN and nothing else. Not a failure here: the unreadable stack is
    driver.nvml-initializes' and smoke's to report (one root cause, one failure)."""
    if view.cuda is not None or view.nvml is not None:
        return None
    return f"CUDA and NVML were both unreadable ({'; '.join(view.unreadable)}), and /dev/nvidiaN alone proves nothing"


# -------------------------------------------------------------------------------------------------
# The checks


#: The finding (gpuconf/data/checks.yaml) a pod that should see no GPU but does stands for, by check:
#: the envvar pod's is the toolkit honouring NVIDIA_VISIBLE_DEVICES; the no-request pod's is its own.
_SEES_NONE_FINDING = {"isolation.envvar-without-request-gets-no-gpu": frozenset({"envvar-honoured"})}


def _sees_none(cid: str, node: str, seen: Sighting, who: str) -> Verdict:
    if seen.report is None:
        return _no_output(cid, node, seen, f"{who} could not be observed")
    view = GpuView.of(seen.report)
    leaked = {k: v for k, v in view.views().items() if v}
    evidence = (f"{seen.where}: probe exit {seen.report.exit_code} ({seen.report.exit_reason})",
                f"{seen.where} saw {view.describe(full=True)}", _env_line(seen.report))
    if not leaked and (blind := _blind(view)) is not None:
        return not_tested(cid, node, f"what {who} sees could not be read: {blind}", kind=COULD_NOT_RUN)
    if not leaked:
        return passed(cid, node, f"{who} sees no GPU ({view.describe()})", evidence=evidence)
    count = max(len(v) for v in leaked.values())
    uuids = view.nvml or view.cuda or view.dev
    return failed(cid, node, f"{who} sees {count} GPU{'s' if count != 1 else ''}: {_ids(uuids)}",
                  expected="no /dev/nvidiaN, no CUDA device, no NVML GPU", observed=view.describe(),
                  evidence=evidence, causes=_SEES_NONE_FINDING.get(cid, frozenset()))


def evaluate_no_request_sees_no_gpu(node: str, seen: Sighting) -> Verdict:
    """A pod without a GPU request (its image sets NVIDIA_VISIBLE_DEVICES=all) sees no GPU."""
    return _sees_none("isolation.no-request-sees-no-gpu", node, seen, "a pod that requests no GPU")


def evaluate_envvar_without_request(node: str, seen: Sighting) -> Verdict:
    """An unprivileged pod that requests no GPU and sets NVIDIA_VISIBLE_DEVICES=all gets none."""
    return _sees_none("isolation.envvar-without-request-gets-no-gpu", node, seen,
                      "an unprivileged pod that requests no GPU and sets NVIDIA_VISIBLE_DEVICES=all")


def _count_problems(view: GpuView, requested: int, *, shared: bool) -> list[str]:
    """How ``view`` differs from what ``requested`` GPUs should show. Time-sliced replicas may land
    on one physical GPU, and MIG instances on one parent: then 1 to N distinct GPUs are right. A
    CUDA process enumerates a single MIG device however many it is given (MIG User Guide)."""
    problems = []
    for name, ids in view.views().items():
        physical = name != "CUDA devices"
        loose = shared or (physical and view.mig)
        if not physical and view.mig:
            ok = len(set(ids)) == 1
        else:
            ok = 1 <= len(set(ids)) <= requested if loose else len(set(ids)) == requested
        if not ok:
            problems.append(f"{name}: {len(set(ids))}")
    return problems


def _owner_failed(owner: Verdict | None, node: str) -> bool:
    """Whether ``owner`` is :data:`CLAIM_OWNER`'s verdict on ``node`` failing for a finding that
    sees-only-allocated declares it shares (gpuconf/data/checks.yaml blocked_by: its pod saw
    another device, or one no slice publishes)."""
    shared = check("isolation.sees-only-allocated").blocked_by[CLAIM_OWNER]
    return (owner is not None and owner.check == CLAIM_OWNER and owner.node == node
            and owner.outcome in (Outcome.FAIL, Outcome.DEGRADED) and bool(owner.causes & shared))


def _owner_state(owner: Verdict | None, node: str) -> str:
    """Why a claim mismatch is not deferred to :data:`CLAIM_OWNER`, for the failure's summary."""
    if owner is None or owner.check != CLAIM_OWNER or owner.node != node:
        return f"{CLAIM_OWNER}, the check that reports this, did not judge {node} in this run"
    if owner.outcome is Outcome.PASS:
        return f"{CLAIM_OWNER} passed on {node} with its own pod: the driver mixes up some devices only"
    if owner.outcome is Outcome.NOT_TESTED:
        return f"{CLAIM_OWNER} did not judge it on {node}: {owner.summary}"
    return f"{CLAIM_OWNER} fails on {node} for another finding: {owner.summary}"


def evaluate_sees_only_allocated(node: str, seen: Sequence[tuple[int, Sighting]], *, replicas: int = 1,
                                 allocatable: int | None = None, one_per_container: bool = False,
                                 grants: Mapping[str, ClaimGrant] | None = None,
                                 owner: Verdict | None = None) -> Verdict:
    """Each pod requesting N GPUs sees exactly N (1 to N distinct where ``replicas`` > 1). ``grants``
    (by sighting ``where``): the pods got their GPUs through DRA claims, and each must see exactly the
    devices its claim was allocated. One that sees others is :data:`CLAIM_OWNER`'s finding (the DRA
    driver prepared another device) only where ``owner``, that check's verdict on the same node, failed:
    then this is NOT TESTED, blocked by it (one root cause, one failure). Where the owner passed (its own
    pod got its device: a driver that mixes up some devices only), did not judge the node, or is not
    part of the run (None), the mismatch is this check's own failure."""
    cid = "isolation.sees-only-allocated"
    shared = replicas > 1
    evidence: list[str] = []
    saw: list[str] = []
    blind: list[str] = []
    for requested, s in seen:
        if s.report is None:
            return _no_output(cid, node, s, f"the pod requesting {requested} GPU{'s' if requested != 1 else ''} "
                              "could not be observed")
        view = GpuView.of(s.report)
        evidence.append(f"{s.where} (requested {requested}): {view.describe(full=True)}; {_env_line(s.report)}")
        saw.append(f"{requested}: {_ids(view.uuids())}")
        problems = _count_problems(view, requested, shared=shared)
        if problems:
            want = f"1 to {requested}" if shared else f"exactly {requested}"
            return failed(cid, node, f"a pod requesting {requested} GPU{'s' if requested != 1 else ''} sees "
                          f"{', '.join(problems)}: {_ids(view.uuids())}",
                          expected=f"{want} GPU{'s' if requested != 1 else ''} in every view"
                          + (f" (time-sliced {replicas} ways)" if shared else ""),
                          observed=view.describe(), evidence=tuple(evidence),
                          causes={"sees-more" if any(len(set(ids)) > requested for ids in view.views().values())
                                  else "sees-fewer"})
        if (why := _blind(view)) is not None:
            blind.append(f"{s.where} (requested {requested}): {why}")
    if not seen:
        return not_tested(cid, node, f"{node} has no allocatable nvidia.com/gpu", kind=COULD_NOT_RUN)
    if blind:
        return not_tested(cid, node, f"what {len(blind)} of {len(seen)} pod(s) on {node} see could not be read: "
                          + "; ".join(blind), kind=COULD_NOT_RUN)
    claimed = ""
    if grants is not None:
        for requested, s in seen:
            grant = grants.get(s.where) or ClaimGrant(unknown=f"no claim of {s.where} was recorded")
            if grant.unknown is not None:
                return not_tested(cid, node, f"{s.where} sees {requested} GPU{'s' if requested != 1 else ''} as "
                                  f"requested, but which devices its claim got is unknown: {grant.unknown}",
                                  kind=COULD_NOT_RUN)
            assert s.report is not None
            view = GpuView.of(s.report)
            ids = set(view.cuda if view.cuda is not None and not view.mig else view.nvml or ())
            evidence.append(f"{s.where}: its claim was allocated {', '.join(grant.names)}")
            if ids != set(grant.uuids):
                finding = (f"{s.where} sees {_ids(sorted(ids))} but its claim was allocated {_ids(grant.names)}: the "
                           "DRA driver prepared another GPU than the one allocated")
                if _owner_failed(owner, node):
                    assert owner is not None
                    return not_tested(cid, node, f"blocked by {CLAIM_OWNER}: {owner.summary} (here too: {finding})",
                                      blocked_by=CLAIM_OWNER)
                return failed(cid, node, f"{finding} ({_owner_state(owner, node)})",
                              expected=f"exactly {', '.join(grant.uuids)}",
                              observed=", ".join(sorted(ids)) or "none", evidence=tuple(evidence),
                              causes={"claim-mismatch"})
        claimed = "; each pod sees exactly the devices its claim was allocated"
    counts = sorted({n for n, _ in seen})
    note = ""
    if 2 not in counts and allocatable is not None and allocatable < 2:
        note = f"; N=2 not tested: {node} has {allocatable} allocatable nvidia.com/gpu"
    elif 2 not in counts and one_per_container:
        note = f"; N=2 not tested: {node} shares its GPUs through MPS, whose device plugin gives a container one"
    how = "1 to N distinct GPUs (time-sliced)" if shared else "exactly N"
    return passed(cid, node, f"pods requesting N = {' and '.join(map(str, counts))} GPUs see {how} "
                  f"({'; '.join(saw)}){note}{claimed}", evidence=tuple(evidence))


def held_together(a: PodOutcome, b: PodOutcome) -> bool | None:
    """Whether the two pods held their GPUs at the same time by their pod times, the fallback for
    probes that ran without a rendezvous (devices are allocated at admission, right after
    scheduling, and freed when the pod finishes). Pod times have a resolution of one second, so a
    pod that finished in the second the other was scheduled may or may not have handed its GPU
    over: True and False only when the windows surely overlap or surely do not, else None (also
    when a time is missing)."""
    s1, f1, s2, f2 = a.timings.scheduled, a.timings.finished, b.timings.scheduled, b.timings.finished
    if s1 is None or f1 is None or s2 is None or f2 is None:
        return None
    if f1 < s2 or f2 < s1:
        return False
    if s2 < f1 and s1 < f2:
        return True
    return None


@dataclass(frozen=True)
class Overlap:
    """Whether probe pods held their GPUs at the same time, as their probes' rendezvous proved it
    (the cuda-probe's --rendezvous: each holds until it has seen every peer hold its own).
    ``held``: True when a probe met every peer (``overlap_ms``: the overlap it measured, the largest
    any measured); None when none did (``reason``: why, in the probes' words)."""

    held: bool | None
    overlap_ms: float | None
    reason: str | None
    evidence: tuple[str, ...]

    def said(self) -> str:
        """How the overlap is known, for a summary."""
        return f"an overlap of {self.overlap_ms:.0f} ms measured by their probes' rendezvous"


def rendezvous_overlap(seen: Sequence[Sighting]) -> Overlap | None:
    """The overlap the probes of ``seen`` proved through their rendezvous, or None where none of
    them ran one (an older probe, or a pod planned without a group: then pod times are all there is).
    One probe that met its peers proves it: when it read its last peer's line, no peer could have
    released (each waits for its acknowledgement)."""
    meets = [(s.where, s.report.rendezvous) for s in seen if s.report is not None and s.report.rendezvous is not None]
    if not meets:
        return None
    evidence = []
    for where, m in meets:
        lines = "; ".join(f"{p.peer} ({p.name}) holding {_ids(p.uuids)}" if p.answered
                          else f"{p.peer}: no answer ({p.error or 'unknown'})" for p in m.lines)
        state = f"met, overlap {m.overlap_ms:.0f} ms" if m.met and m.overlap_ms is not None else f"not met: {m.reason}"
        evidence.append(f"{where}: rendezvous {state} after {m.waited_ms:.0f} ms of at most {m.wait_s:g} s; {lines}")
    met = [m.overlap_ms or 0.0 for _, m in meets if m.met]
    if met:
        return Overlap(True, max(met), None, tuple(evidence))
    reasons = list(dict.fromkeys(f"{where}: {m.reason or 'no reason given'}" for where, m in meets))
    rest = len(reasons) - 2
    more = f"; and {rest} more probe{'s' if rest != 1 else ''} (evidence)" if rest > 0 else ""
    return Overlap(None, None, "; ".join(reasons[:2]) + more, tuple(evidence))


def _allocated(report: CudaProbeReport) -> frozenset[str] | None:
    """The devices the device plugin allocated, from NVIDIA_VISIBLE_DEVICES as it sets it with
    deviceListStrategy envvar (UUIDs or indices); None where it says nothing about the allocation
    (volume-mounts and CDI strategies, all/none/void)."""
    value = (report.env.get("NVIDIA_VISIBLE_DEVICES") or "").strip()
    ids = [v.strip() for v in value.split(",") if v.strip()]
    if not ids or any(not (v.startswith(("GPU-", "MIG-")) or v.isdigit()) for v in ids):
        return None
    return frozenset(ids)


def evaluate_concurrent_pods_disjoint(node: str, a: Sighting | None, b: Sighting | None, *, allocatable: int,
                                      replicas: int = 1, together: bool | None = None,
                                      grants: Mapping[str, ClaimGrant] | None = None) -> Verdict:
    """Two pods each given one GPU at the same time on ``node`` see different GPU UUIDs. That they
    held their GPUs at the same time comes from their probes' rendezvous (:func:`rendezvous_overlap`);
    ``together`` (their pod times, :func:`held_together`) only where the probes ran none. A GPU
    both see is a failure when they held their GPUs at the same time, or when the device plugin (or,
    with ``grants``, their DRA claims) gave them different ones; a GPU handed from one to the other
    is not. Different GPUs pass only with the overlap proven: pods that ran one after the other
    prove nothing about isolation."""
    cid = "isolation.concurrent-pods-disjoint"
    if allocatable < 2:
        return not_tested(cid, node, f"{node} has {allocatable} allocatable nvidia.com/gpu; two pods with one "
                          "GPU each need two", kind=NOT_APPLICABLE)
    if replicas > 1:
        return not_tested(cid, node, f"nvidia.com/gpu on {node} is time-sliced {replicas} ways: pods share "
                          "physical GPUs by design, with no isolation to test", kind=NOT_APPLICABLE)
    if a is None or b is None:
        return not_tested(cid, node, "the two one-GPU pods were not planned on this node", kind=COULD_NOT_RUN)
    for s in (a, b):
        if s.report is None:
            return _no_output(cid, node, s, "one of the two pods could not be observed")
    assert a.report is not None and b.report is not None
    va, vb = GpuView.of(a.report), GpuView.of(b.report)
    ua, ub = va.uuids(), vb.uuids()
    ga, gb = _allocated(a.report), _allocated(b.report)
    if grants is not None:  # DRA: the claims' allocations, not NVIDIA_VISIBLE_DEVICES
        ga, gb = (frozenset(g.uuids) if (g := grants.get(s.where)) is not None and g.unknown is None else None
                  for s in (a, b))
    overlap = rendezvous_overlap((a, b))
    evidence = (f"{a.where}: {va.describe(full=True)}; {_env_line(a.report)}",
                f"{b.where}: {vb.describe(full=True)}; {_env_line(b.report)}") + (
        overlap.evidence if overlap is not None else (
            "no rendezvous in their probes: pod times "
            + {True: "overlap", False: "do not overlap", None: "meet within a second"}[together],))
    if not ua or not ub:
        blind = a.where if not ua else b.where
        return not_tested(cid, node, f"{blind} saw no GPU, so there is nothing to compare "
                          "(isolation.sees-only-allocated reports it)", kind=COULD_NOT_RUN)
    shared = sorted(set(ua) & set(ub))
    observed = f"{a.where}: {_ids(ua)}; {b.where}: {_ids(ub)}"
    held = overlap.held if overlap is not None else together
    how = overlap.said() if overlap is not None and overlap.held else "their pod times overlap"
    if shared and held:
        return failed(cid, node, f"two pods each given one GPU at the same time ({how}) both see {_ids(shared)}",
                      expected="disjoint GPU UUIDs", observed=observed, evidence=evidence)
    if shared and ga is not None and gb is not None and not ga & gb:
        return failed(cid, node, f"{'their claims' if grants is not None else 'the device plugin'} gave two "
                      f"pods different GPUs ({_ids(sorted(ga))} and "
                      f"{_ids(sorted(gb))}) but both see {_ids(shared)}", expected="disjoint GPU UUIDs",
                      observed=observed, evidence=evidence)
    if overlap is not None and not overlap.held:
        return not_tested(cid, node, "the two pods could not hold their GPUs at the same time: "
                          f"{overlap.reason}", kind=COULD_NOT_RUN)
    if held:
        return passed(cid, node, f"two pods holding one GPU each at the same time ({how}) see different GPUs: "
                      f"{_ids(ua)} and {_ids(ub)}", evidence=evidence)
    if not shared:
        return not_tested(cid, node, f"two pods given one GPU each see different GPUs ({_ids(ua)} and {_ids(ub)}), "
                          "but nothing shows they held them at the same time (their probes ran no rendezvous and "
                          + ("one finished before the other was scheduled)" if together is False
                             else "their pod times meet within a second)"), kind=COULD_NOT_RUN)
    if together is False:
        return not_tested(cid, node, "the two pods did not hold their GPUs at the same time (one finished before "
                          "the other was scheduled), so reusing a GPU was legitimate", kind=COULD_NOT_RUN)
    return not_tested(cid, node, f"both pods see {_ids(shared)}, but whether they held it at the same time is "
                      "unknown: their times meet within a second and their environment does not show the device "
                      "plugin giving them different GPUs (a pod that queued for a GPU may get the one just freed)",
                      kind=COULD_NOT_RUN)


def evaluate_only_requesting_container(node: str, requester: Sighting, other: Sighting) -> Verdict:
    """In a two-container pod, the container requesting one GPU sees exactly it; the other none. One GPU is
    one GPU however the node shares it (time-slicing, MPS): the requester sees exactly one either way."""
    cid = "isolation.only-requesting-container-sees-gpu"
    unseen = "a container of the two-container pod could not be observed"
    if requester.report is None:
        return _no_output(cid, node, requester, unseen)
    if other.report is None:
        return _no_output(cid, node, other, unseen)
    mine, theirs = GpuView.of(requester.report), GpuView.of(other.report)
    evidence = (f"{requester.where} (requested 1): {mine.describe(full=True)}",
                f"{other.where} (requested none): {theirs.describe(full=True)}; {_env_line(other.report)}")
    leaked = {k: v for k, v in theirs.views().items() if v}
    if leaked:
        return failed(cid, node, f"the container that requests no GPU sees {max(len(v) for v in leaked.values())} "
                      f"next to one that requests one: {_ids(theirs.nvml or theirs.cuda or theirs.dev)}",
                      expected="no GPU in the container without a request", observed=theirs.describe(),
                      evidence=evidence)
    problems = [f"{name}: {len(set(ids))}" for name, ids in mine.views().items() if len(set(ids)) != 1]
    if problems:
        return failed(cid, node, f"the container that requests one GPU sees {', '.join(problems)}: "
                      f"{_ids(mine.uuids())}", expected="exactly 1 GPU in the requesting container",
                      observed=mine.describe(), evidence=evidence)
    for container, view in ((requester, mine), (other, theirs)):
        if (blind := _blind(view)) is not None:
            return not_tested(cid, node, f"what {container.where} sees could not be read: {blind}", kind=COULD_NOT_RUN)
    return passed(cid, node, f"only the requesting container sees a GPU ({_ids(mine.uuids())}); its "
                  "neighbour sees none", evidence=evidence)
