"""Nodes the whole-node probe cannot run on: a per-node finding every check that judges a probe on the
node consults, so one cause is reported once, by the one check that owns it, and every check that
depends on the probe is NOT TESTED "blocked by <owner>: <cause>" (issue 26, one root cause per fault).

The whole-node probe (gpuconf.plugin.fixtures.whole_node_probes: one cuda-probe per GPU node holding
every GPU, on a DRA-only node one ResourceClaim for all devices) is the run's baseline: inventory,
smoke, health and bandwidth read its report, and the ``needs_probe`` checks launch probes of their
own on the same node. When it printed no report, each of them used to fail with "no output" for one
and the same cause. :func:`whole_node_block` names the cause and its owner:

====================================================  =================================  ===========================
cause (read from the whole-node probe's outcome)      owner (fails once, naming it)      fault of the catalog
====================================================  =================================  ===========================
container refused at creation for the CUDA            smoke.vector-add-every-gpu         probe-images-rejected
requirement of the run's least demanding image        (with the driver upgrade remedy)
(:class:`ProbeBlock`)
claim not prepared: FailedPrepareDynamicResources     dra.attributes-match-hardware      dra-slice-stale
naming a published device the DRA driver cannot       (a published device that is not
prepare                                               the node's hardware)
the probe, asking for the node's DRA-backed extended   dra.extended-resource-served       extended-resource-stale
resource (KEP-5004: NodeView.extended), stayed        (the mapped DeviceClass selects no
unschedulable: ``cannot allocate all claims``         device of the node)
the probe ran without the NVIDIA runtime and was      scheduling.runtimeclass-present    no-runtimeclass
given no driver (no libcuda, no NVML; /dev nodes      (the cluster has no RuntimeClass   (where the default
alone are no GPU), while the cluster has no           with the NVIDIA runtime's handler: runtime is runc; tests/
RuntimeClass with the NVIDIA runtime's handler        no GPU pod gets its GPU injected)  test_runtime_class_by_
                                                                                         handler.py)
any other reason the probe printed nothing: a         smoke.vector-add-every-gpu         (none yet: a hook error,
container-create or start error that is not the       ("every GPU runs a kernel": here   an image pull failure, a
requirement's, a prepare failure naming no device,    no GPU container ran at all)       kubelet that never admits)
a pod that never left Pending on a node the node
view found schedulable, a container that exited
without its document
====================================================  =================================  ===========================

Decisions:

* **The owner is the check whose requirement the cause breaks**, guided by the fault catalog's
  ``caught_by`` (gpuconf/data/faults.yaml): a stale ResourceSlice is the DRA driver publishing what
  the node does not have, so dra.attributes-match-hardware owns it (it reads the same
  FailedPrepareDynamicResources messages, from the DRA suite's own all-devices claim and from this
  probe). Smoke owns whatever else keeps a GPU container from running on the node: it is the quick
  tier, and its requirement (every GPU runs a kernel) is the first one such a node breaks.
* **A prepare failure goes to DRA only when it names a device** (gpuconf.checks.dra.prepare_failures
  reads the device from the plugin's error): that is when dra.attributes-match-hardware fails for
  it. A prepare error in a wording that names none stays with smoke, so the owner always fails
  when its dependants say they are blocked by it (fail closed).
* **Only when the owner runs.** A dependant is NOT TESTED only when the owner is among the run's
  selected checks (``pytest -m health`` alone has no smoke); otherwise it fails with the cause
  itself (gpuconf.kit.probes.probe_report).
* **A probe that printed its document blocks nothing**, with one exception: its checks judge what it
  says (CUDA errors, missing GPUs), each against its own requirement. The exception is a probe given
  no GPU at all on a cluster without a RuntimeClass for the NVIDIA runtime (``runtime_missing``,
  the owner's own failure): every GPU pod there runs under the node's default runtime (runc) and
  sees nothing, so the device-node, smoke, isolation and NCCL checks would each report that one
  missing RuntimeClass. A probe that sees no GPU while such a class exists is its checks' finding.

The same rule beyond the whole-node probe (:func:`blocked_by`): where a fault breaks one mechanism
that several checks of a suite each observe through their own pods, the check whose requirement
names the mechanism owns it, and a dependant that fails while its owner fails on the same node is
NOT TESTED "blocked by <owner>: <the owner's finding>":

=============================================  ===========================================  ====================
owner (its failure names the mechanism)        dependants (fail for the same reason)         fault
=============================================  ===========================================  ====================
isolation.sees-only-allocated (a pod given     isolation.no-request-sees-no-gpu,            visible-devices-all
N GPUs sees others: the runtime injects        isolation.envvar-without-request-gets-no-gpu,
GPUs it was not allocated)                     isolation.concurrent-pods-disjoint,
                                               isolation.only-requesting-container-sees-gpu
isolation.envvar-without-request-gets-no-gpu   isolation.no-request-sees-no-gpu,            envvar-leak
(the toolkit honours NVIDIA_VISIBLE_DEVICES    isolation.only-requesting-container-sees-gpu
for unprivileged containers; nvidia/cuda       (their images set it to all themselves)
images set it themselves)
dra.claim-allocates-the-probed-device (the     dra.distinct-claims-distinct-devices,        dra-prepares-wrong-
pod sees another GPU than its claim was        dra.shared-claim-same-device,                device
allocated: the driver prepares the wrong one)  dra.count-with-match-attribute,
                                               dra.selector-steers-scheduling
labels.gfd-matches-hardware (GFD's labels do   compat.outcome-matches-prediction,           mixed-gpu-models
not describe the node's GPUs; the compat       compat.forward-compat-runs,
campaign predicts from those labels)           compat.current-cuda-major-runs
=============================================  ===========================================  ====================

A dependant that passes stays PASS, and one whose owner passes is judged on its own: only a failure
the owner already explains is folded into it (rerun after fixing the owner's cause to judge it).

The requirement case in detail: a GeForce GPU on an R570 driver (CUDA 12.8) under a toolkit that
checks requirements (legacy mode) refuses every probe image: each is CUDA 12.9 or later, and from the
12.5 images on NVIDIA_REQUIRE_CUDA lists no forward-compatibility term for GeForce
(research/require-cuda.md, cases 6, 13, 16). Each pod then dies at container creation with
``nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.9, please update your
driver ...`` (real wordings: tests/fixtures/diagnose/docker-legacy-mode-cuda12.8.txt and its README).

* **Read from the whole-node probe.** It runs the least demanding image the node may start: the
  newest probe its driver supports natively, else the oldest of the matrix
  (gpuconf.kit.native_probe_cuda). When that image is rejected for its CUDA requirement, and its CUDA
  is no newer than any probe image of the run, every other probe image (a newer ``cuda>=``) is
  refused too: the node runs no probe. A rejection of a newer image (labels that do not say the
  node's CUDA) is not that finding (an older image might start): the generic row of the table above
  then holds for the whole-node probe's dependants.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpuconf.cluster import PodOutcome
from gpuconf.compat import tables
from gpuconf.compat.versions import VersionError, parse_cuda
from gpuconf.verdict import Outcome, Verdict, check, failed, not_tested

__all__ = ["DRA_OWNER", "EXTENDED_OWNER", "RUNTIME_OWNER", "SMOKE", "Block", "Blocked", "ProbeBlock",
           "claim_prepare_block", "blocked_by", "evaluate_block", "evaluate_probe_block", "probe_block",
           "whole_node_block"]

#: The owners of the table above.
SMOKE = "smoke.vector-add-every-gpu"
DRA_OWNER = "dra.attributes-match-hardware"
EXTENDED_OWNER = "dra.extended-resource-served"
RUNTIME_OWNER = "scheduling.runtimeclass-present"

#: Container states of a container that was never created or never started (kubelet reasons; a
#: prestart hook failure under containerd is a terminated StartError, exit code 128).
_NOT_STARTED = frozenset({"StartError", "CreateContainerError", "RunContainerError", "ContainerCannotRun"})
#: The runtime's wrapper around nvidia-container-cli's message ends in ": unknown" (containerd/runc).
_WRAPPER_TAIL = re.compile(r":\s*unknown\s*$")


@dataclass(frozen=True)
class ProbeBlock:
    """No probe image can start on ``node``: the ``cuda`` probe image, the run's least demanding,
    was rejected at container creation with ``error``."""

    node: str
    cuda: str  # the rejected image's CUDA (12.9.1)
    required: str  # the CUDA its requirement names (12.9)
    error: str  # nvidia-container-cli: requirement error: unsatisfied condition: ...

    @property
    def owner(self) -> str:
        return SMOKE

    @property
    def cause(self) -> str:
        """What the owner's failure says first."""
        return f"no probe image could start on {self.node}: {self.error}"

    @property
    def reason(self) -> str:
        """What every check that needs a probe on the node says (NOT TESTED)."""
        return f"blocked by {self.owner}: {self.cause}"


@dataclass(frozen=True)
class Blocked:
    """The whole-node probe on ``node`` printed no report, for ``cause``, which ``owner`` reports."""

    node: str
    owner: str  # the check id that fails once, naming the cause
    cause: str  # one line: what happened to the probe, with the cluster's own words
    observed: str  # the event or status message it was read from
    evidence: tuple[str, ...] = ()

    @property
    def reason(self) -> str:
        """What every check that depends on the probe says (NOT TESTED)."""
        return f"blocked by {self.owner}: {self.cause}"


#: Either finding.
Block = ProbeBlock | Blocked

_PREPARE = "FailedPrepareDynamicResources"


def whole_node_block(node: str, outcome: PodOutcome | None, probe_cudas: Iterable[str], *,
                     runtime_missing: str | None = None, extended: str | None = None) -> Block | None:
    """Why the whole-node probe ``outcome`` of ``node`` printed no report, or a report of no GPU on a
    cluster without a RuntimeClass for the NVIDIA runtime (``runtime_missing``: the failure of the
    check that says so), and which check owns that (the table of the module's docstring); or None:
    its checks judge its report, or there is no outcome (the node view's reason stands).
    ``extended``: the DRA-backed extended resource the probe asked for (gpuconf.nodes.NodeView.extended)."""
    if outcome is None:
        return None
    if (image := probe_block(node, outcome, probe_cudas)) is not None:
        return image
    if outcome.logs.get("probe"):
        return _runtime_block(node, outcome, runtime_missing) if runtime_missing else None
    if (prepare := claim_prepare_block(node, outcome, what="the whole-node probe's ResourceClaim")) is not None:
        return prepare
    if extended is not None and (stale := _extended_block(node, outcome, extended)) is not None:
        return stale
    return _no_report(node, outcome)


def _extended_block(node: str, outcome: PodOutcome, resource: str) -> Blocked | None:
    """The extended-resource owner's finding where the probe asking for ``resource`` (served by DRA on
    ``node``) stayed unschedulable because no device of the mapped DeviceClass could be allocated."""
    from gpuconf.checks.dra_extended import stale_mapping

    message = stale_mapping(outcome, resource)
    if message is None:
        return None
    return Blocked(node, EXTENDED_OWNER, f"the whole-node probe asking for {resource} (served by DRA on {node}) is "
                   f"unschedulable: {message}", observed=message,
                   evidence=tuple(dict.fromkeys(f"{e.reason}: {e.message}" for e in outcome.events)))


def claim_prepare_block(node: str, outcome: PodOutcome, *, what: str) -> Blocked | None:
    """The DRA owner's finding when ``outcome`` (a pod whose claims were allocated devices of ``node``)
    never started because the kubelet could not prepare a claim naming a device, or None."""
    from gpuconf.checks.dra import prepare_failures

    if any(outcome.logs.get(c.name) for c in outcome.containers):
        return None
    messages = [e.message for e in outcome.events if e.reason == _PREPARE]
    failures = prepare_failures(messages)
    if not failures:
        return None
    device, error = next(iter(failures.items()))
    return Blocked(node, DRA_OWNER, f"{what} could not be prepared on {node}: the DRA driver cannot prepare "
                   f"{device} ({error})", observed=messages[-1], evidence=tuple(dict.fromkeys(messages)))


def _runtime_block(node: str, outcome: PodOutcome, runtime_missing: str) -> Blocked | None:
    """The runtime owner's finding where the whole-node probe's report shows no GPU injected at all."""
    from gpuconf.checks.scheduling import _no_driver, _not_injected
    from gpuconf.probes import ProbeParseError
    from gpuconf.probes.cuda import parse_cuda_probe

    try:
        report = parse_cuda_probe(outcome.logs["probe"])
    except ProbeParseError:
        return None  # an unreadable report is its checks' finding
    if not _no_driver(report):
        return None  # a driver library is there: a runtime injected it, and the report is its checks' to judge
    lacks = _not_injected(report)
    return Blocked(node, RUNTIME_OWNER, f"{runtime_missing}: the whole-node probe on {node} ran under the node's "
                   f"default runtime and was given no GPU ({lacks})", observed=lacks)


def _no_report(node: str, outcome: PodOutcome) -> Blocked:
    """Smoke's finding: the whole-node probe printed nothing, and why, in the cluster's words."""
    from gpuconf.diagnose import diagnose

    try:
        probe = outcome.container("probe")
    except KeyError:
        probe = None
    # what the cluster said, the container's own words first
    texts = [t for t in (probe and probe.message, outcome.message, *(e.message for e in outcome.events)) if t]
    status = " ".join(x for x in (outcome.phase, outcome.reason, outcome.message) if x)
    if outcome.phase == "Pending" or outcome.unschedulable:
        how = f"the whole-node probe never left Pending on {node}, a node the node view found schedulable"
    elif probe is not None and probe.reason in _NOT_STARTED:
        how = f"the whole-node probe's container could not start on {node}"
    else:
        how = f"the whole-node probe on {node} printed no report"
    hints = [d.title for d in diagnose("\n".join(texts))]
    cause = f"{how}: {status}" + (f" (diagnosis: {'; '.join(hints)})" if hints else "")
    observed = texts[0] if texts else status
    return Blocked(node, SMOKE, cause, observed=observed,
                   evidence=tuple(dict.fromkeys(f"{e.reason}: {e.message}" for e in outcome.events)))


def probe_block(node: str, outcome: PodOutcome | None, probe_cudas: Iterable[str]) -> ProbeBlock | None:
    """The finding for ``node`` from its whole-node probe ``outcome``, or None: the probe container
    was refused at creation with a CUDA requirement error, for an image no newer than every probe
    image of the run (``probe_cudas``)."""
    from gpuconf.diagnose import diagnose

    if outcome is None:
        return None
    try:
        probe = outcome.container("probe")
    except KeyError:
        return None
    if probe.reason not in _NOT_STARTED or outcome.logs.get("probe"):
        return None
    texts = [t for t in (probe.message, *(e.message for e in outcome.events)) if t]
    found = next((d for d in diagnose("\n".join(texts)) if d.category == "requirement-unsatisfied"), None)
    required = found.facts.get("required_cuda") if found is not None else None
    cuda = _image_cuda(probe.image)
    if found is None or required is None or cuda is None:
        return None
    try:
        rejected = parse_cuda(required).major_minor
        oldest = min(parse_cuda(c).major_minor for c in probe_cudas)
    except (VersionError, ValueError):
        return None
    if rejected > oldest:
        return None  # an older probe image might start
    return ProbeBlock(node, cuda, required, _WRAPPER_TAIL.sub("", found.excerpt).strip())


_IMAGE_CUDA = re.compile(r"(?:cuda-probe:[^:@]*-cuda|nvidia/cuda:)(\d+\.\d+(?:\.\d+)?)")


def _image_cuda(image: str) -> str | None:
    """The CUDA of a probe image reference: ``nvidia/cuda:12.9.1-devel-ubuntu24.04`` (compiled in
    place) or ``R/gpuconf/cuda-probe:<probe>-cuda12.9.1`` (prebuilt)."""
    match = _IMAGE_CUDA.search(image)
    return match.group(1) if match else None


def evaluate_probe_block(block: ProbeBlock, labels: Mapping[str, str], *, check: str) -> Verdict:
    """The one failure of a node no probe can start on, for the check that owns it (smoke): the
    requirement error, what the node has (its GFD labels) and what it needs."""
    from gpuconf.checks.compat import make_target

    target = make_target(block.node, labels)
    facts = target.model
    branch = tables.branch_for_cuda(parse_cuda(block.required))
    has = f"driver {target.driver}" if target.driver else "driver"
    native = tables.native_cuda(facts.driver) if facts is not None else None
    if native is not None:
        has += f" (CUDA {native.major}.{native.minor})"
    gpu_class = facts.gpu_class if facts is not None else None
    on = f"its {target.gpu} ({gpu_class}) GPUs" if target.gpu and gpu_class else "its GPUs"
    compat = ("forward compatibility (cuda-compat) works on data-center GPUs only (no image of CUDA 12.5 or "
              "later lists a forward-compatibility branch for GeForce)") if gpu_class == "consumer" else \
        "no forward-compatibility branch the images list matches this driver and GPU"
    remedy = (f"Every probe image (CUDA {block.required} and later) is refused at container creation on {block.node}: "
              f"its {has} is older than their CUDA, the toolkit checks NVIDIA_REQUIRE_CUDA (legacy mode), and "
              f"{compat}. Upgrade the driver on {block.node} to branch R{branch or '?'} or later (CUDA "
              f"{block.required}); until then no current CUDA image runs on {on}, only images of CUDA up to the "
              "driver's own.")
    return failed(check, block.node, f"{block.cause} (the CUDA {block.cuda} probe image, the run's least demanding, "
                  "was rejected at container creation)",
                  expected=f"a probe container created on {block.node}", observed=block.error,
                  evidence=(f"probe image CUDA {block.cuda} rejected: {block.error}",), remedy=remedy)


def evaluate_block(block: Block, labels: Mapping[str, str]) -> Verdict:
    """The one failure a node's :func:`whole_node_block` finding gives, for its owner."""
    if isinstance(block, ProbeBlock):
        return evaluate_probe_block(block, labels, check=block.owner)
    return failed(block.owner, block.node, block.cause,
                  expected=f"the whole-node probe runs on {block.node} and prints its report",
                  observed=block.observed, evidence=block.evidence,
                  remedy=f"No GPU container ran on {block.node}, so none of its GPUs could be judged. Read the "
                  f"probe pod's events and status above (kubectl describe pod in the run's namespace, or `gpuconf "
                  f"diagnose`), fix what keeps it from starting on {block.node} (the runtime and its hook, the image "
                  "registry, the kubelet's admission), and rerun: the checks that read the probe are NOT TESTED "
                  "until then.")


_FAILING = frozenset({Outcome.FAIL, Outcome.DEGRADED})


def blocked_by(verdict: Verdict, *owners: Verdict | None) -> Verdict:
    """A dependant check's ``verdict``, or NOT TESTED "blocked by <owner>: <its finding>" where it
    fails and one of ``owners`` (the checks whose cause it would report again, in order of
    precedence) fails on the same node for a cause the dependant depends on: one of the owner's
    findings (``Verdict.causes``) that gpuconf/data/checks.yaml declares under the dependant's
    ``blocked_by``. An owner that passed, was not tested or fails for another finding folds nothing:
    the dependant's own failure stands. An owner the dependant declares no dependency on is a
    mistake in the suite (ValueError), found on the first run of it."""
    declared = check(verdict.check).blocked_by
    present = [o for o in owners if o is not None]
    if undeclared := sorted({o.check for o in present} - set(declared)):
        raise ValueError(f"{verdict.check} declares no dependency on {', '.join(undeclared)} "
                         "(gpuconf/data/checks.yaml blocked_by)")
    if verdict.outcome not in _FAILING:
        return verdict
    owner = next((o for o in present if o.outcome in _FAILING and o.node in (verdict.node, None)
                  and o.causes & declared[o.check]), None) if verdict.node is not None else next(
        (o for o in present if o.outcome in _FAILING and o.causes & declared[o.check]), None)
    if owner is None:
        return verdict
    return not_tested(verdict.check, verdict.node, f"blocked by {owner.check}: {owner.summary}",
                      blocked_by=owner.check)
