"""Compat checks: the deliberate driver/toolkit mismatch, observed on every GPU node and held
against ``gpuconf.compat.predict``.

One campaign (launch once, assert many) puts on every node that advertises ``nvidia.com/gpu``:

* a **canary**: a cuda-probe pod whose env says ``NVIDIA_REQUIRE_CUDA=cuda>=99.0``. Refused at
  container creation with ``unsatisfied condition: cuda>=99.0`` means the node's runtime checks
  requirements (legacy mode); started with the driver injected means it does not (cdi / jit-cdi;
  domain.md §3); anything else leaves enforcement unknown, with the diagnosis;
* the **image matrix**: a cuda-probe pod for each CUDA of ``gpuconf.images.matrix()``, plus, for
  each image the engine predicts a legacy-mode rejection for, the same image with
  ``NVIDIA_DISABLE_REQUIRE=1``.

Three checks read the result:

* ``runtime.require-cuda-enforced``: the node enforces requirements exactly when its pool (GPU
  nodes with the same ``nvidia.com/gpu.product``, ``-SHARED`` ignored as the inventory's driver
  check does) mostly does; on a tie the non-enforcing nodes are the odd ones (not checking is the
  weaker state: images the driver cannot run start and crash instead of being refused with a
  clear message). A pool all on one setting passes (CDI is legitimate); a declared mode, when
  given, is the expectation instead of the pool.
* ``compat.outcome-matches-prediction``: every matrix pod did one of the things the engine
  predicts for that node (result, and the error code for a CUDA error).
* ``compat.forward-compat-runs``: on a data-center GPU, every matrix image newer than the
  driver's native CUDA that carries cuda-compat and whose pairing with the driver branch
  ``forward_compat.yaml`` supports runs on the image's compat libcuda.

Decisions:

* **NVIDIA_DISABLE_REQUIRE is part of outcome-matches-prediction, not its own check.** The engine
  models the variable (``gpuconf.compat.require``), so "the disabled pod shows the runtime
  outcome instead of the rejection" is exactly the comparison of that pod with its prediction; a
  separate check would judge the same pod against the same prediction twice. Its pods are rows of
  the matrix, named with the variable, and forward-compat-runs reads a disabled pod's outcome
  when the plain pod was refused at creation (the rejection hides the runtime's behaviour).
* **The toolkit version is unknown** (nothing on a node says which container toolkit it runs), so
  the prediction is the union over one toolkit release per way of choosing the compat libcuda
  (``TOOLKIT_ERAS``), not the engine's single default assumption. A toolkit that never uses the
  compat libcuda is therefore a *predicted* possibility: whether forward compatibility works is
  forward-compat-runs' question, and one broken toolkit fails that check alone.
* **The rules presume an intact driver stack.** A pod whose container got no libcuda, no
  ``/dev/nvidiactl`` / ``/dev/nvidia-uvm`` / GPU device node, no working NVML, or whose kernel
  failed after CUDA started, says something about the node, not about the image: it is classed
  ``other`` and leaves the comparison NOT_TESTED (never PASS) with the diagnosis, so the node's
  runtime and driver checks, not these, report the fault.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from gpuconf import images
from gpuconf.checks.inventory import label_driver_version
from gpuconf.cluster import PodOutcome
from gpuconf.compat import rules, tables
from gpuconf.compat.rules import Mode
from gpuconf.compat.versions import VersionError, parse_cuda, parse_driver
from gpuconf.diagnose import diagnose
from gpuconf.nodes.facts import NodeFacts, Source
from gpuconf.outcomes import COULD_NOT_RUN, NOT_APPLICABLE
from gpuconf.probes import ProbeParseError
from gpuconf.probes.cuda import CudaProbeReport, parse_cuda_probe
from gpuconf.verdict import Verdict, failed, not_tested, passed

__all__ = [
    "CANARY_REQUIREMENT",
    "TOOLKIT_ERAS",
    "Canary",
    "CompatRun",
    "MatrixRow",
    "Observation",
    "PlannedPod",
    "Predicted",
    "Target",
    "assemble",
    "classify_canary",
    "evaluate_current_major_runs",
    "evaluate_forward_compat",
    "evaluate_outcome_matches",
    "evaluate_require_enforced",
    "make_image",
    "make_target",
    "matrix_cudas",
    "observe",
    "plan_pods",
    "pool_of",
    "predict_outcomes",
    "probe_facts",
    "resolve_compat_images",
    "unknown_gpu",
]

#: The canary's requirement: no driver satisfies it, so only a runtime that checks refuses it.
CANARY_REQUIREMENT = "cuda>=99.0"
DISABLE_REQUIRE = ("NVIDIA_DISABLE_REQUIRE", "1")
#: One container-toolkit release per way it treats the image's /usr/local/cuda/compat libcuda
#: (research/require-cuda.md §10.4, gpuconf.compat.rules._compat_rule): <= 1.17.3 mounts one
#: whose branch differs, 1.17.4 uses none, 1.17.5-1.18 uses a newer one, >= 1.19 also needs the
#: host branch in the library's ELF note. Each with how a condition names it.
TOOLKIT_ERAS: tuple[tuple[tuple[int, ...], str], ...] = (
    ((1, 17, 3), "toolkit <= 1.17.3"),
    ((1, 17, 4), "toolkit 1.17.4"),
    ((1, 17, 8), "toolkit 1.17.5-1.18.x"),
    ((1, 19, 0), "toolkit >= 1.19"),
)
#: The requirement error as nvidia-container-cli prints it, cut from its runc/containerd wrapper.
_REQUIREMENT_ERROR = re.compile(
    r"(?:nvidia-container-cli: )?requirement error: (?:invalid expression|unsatisfied condition: [^\n\"\\]*?)"
    r"(?=: unknown|[\n\"\\]|$)", re.M)
_MIG_SUFFIX = re.compile(r"-MIG-\d+g\.\d+gb$", re.I)


# --- the nodes ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A GPU node the campaign probes, with the facts the engine needs (None = unknown)."""

    node: str
    product: str | None  # nvidia.com/gpu.product
    driver: str | None
    gpu: str | None
    model: rules.Node | None
    problem: str | None = None  # why there is no model
    notes: tuple[str, ...] = ()
    #: The probes' GPUs are given through DRA (a claim, or a DRA-backed extended resource): the DRA driver
    #: injects them through CDI, so the prediction is cdi mode's whatever the canary shows.
    dra: bool = False

    @property
    def driver_from(self) -> str:
        """Where the driver version was read when not from GFD's label ("NVML in the whole-node probe",
        "the ResourceSlice attribute driverVersion"), as the notes say; "" for the label."""
        return next((n.removeprefix(f"driver {self.driver} from ").split(" (")[0] for n in self.notes
                     if n.startswith(f"driver {self.driver} from ")), "")


def probe_facts(outcome: PodOutcome | None) -> CudaProbeReport | None:
    """The parsed cuda-probe document of a pod that printed one, else None."""
    if outcome is None or "probe" not in outcome.logs:
        return None
    try:
        code = outcome.container("probe").exit_code
        return parse_cuda_probe(outcome.logs["probe"], exit_code=code, source=f"pod {outcome.name}")
    except (KeyError, ProbeParseError):
        return None


def make_target(node: str, labels: Mapping[str, str], probe: CudaProbeReport | None = None, *,
                dra: bool = False, facts: NodeFacts | None = None) -> Target:
    """The node's facts: driver from the most direct reading, the whole-node probe's NVML (``probe``),
    else GFD's labels (``cuda.driver-version.full``, or the ``cuda.driver.major/minor/rev`` older GFD
    releases publish alone), else the DRA driver's ``driverVersion`` attribute (``facts``:
    gpuconf.nodes.NodeView.facts, on a node without GFD); GPU from ``nvidia.com/gpu.product``, else
    the attribute ``productName``, else the probe's device name, resolved as ``gpuconf predict``
    resolves ``--driver`` and ``--gpu``. A fact not from GFD is named in the notes with its source
    (a driver label the probe contradicts is labels.gfd-matches-hardware's finding, never the
    prediction's input). ``dra``: the probes get their GPUs through DRA."""
    return replace(_target(node, labels, probe, facts), dra=dra)


def _target(node: str, labels: Mapping[str, str], probe: CudaProbeReport | None,
            facts: NodeFacts | None) -> Target:
    product = labels.get("nvidia.com/gpu.product")
    driver, _ = label_driver_version(labels)
    notes: list[str] = []
    probed = probe.nvml_driver_version if probe is not None else None
    if probed:  # the most direct reading: what a pod given the node's GPUs runs on
        notes.append(f"driver {probed} from NVML in the whole-node probe " + (
            "(no nvidia.com/cuda.driver-version.full)" if not driver else f"(the label says {driver}: "
            "labels.gfd-matches-hardware judges it)" if driver != probed else "(as the label says)"))
        driver = probed
    if facts is not None and not driver and facts.driver.source is Source.SLICE and facts.driver.value:
        driver = facts.driver.value
        notes.append(f"driver {driver} from the {facts.driver.source.value} {facts.driver.key} (no "
                     "nvidia.com/cuda.driver-version.full)")
    if facts is not None and not product and facts.product.source is Source.SLICE and facts.product.value:
        product = facts.product.value.replace(" ", "-")  # as GFD spells it, so pools merge with labelled nodes
        notes.append(f"GPU {facts.product.value!r} from the {facts.product.source.value} {facts.product.key} (no "
                     "nvidia.com/gpu.product)")
    gpu = _MIG_SUFFIX.sub("", product) if product else None
    if not gpu and probe is not None:
        gpu = next((g.name for g in probe.nvml_gpus if g.name), None) or next(
            (d.name for d in probe.devices if d.name), None)
        if gpu:
            notes.append(f"GPU {gpu!r} from the whole-node probe (no nvidia.com/gpu.product)")
    if not driver:
        return Target(node, product, None, gpu, None, "the driver version is unknown: no "
                      "nvidia.com/cuda.driver-version.full label and no whole-node probe NVML driver version",
                      tuple(notes))
    try:
        version = parse_driver(driver)
    except VersionError as exc:
        return Target(node, product, driver, gpu, None, f"driver {driver!r}: {exc}", tuple(notes))
    if tables.native_cuda(version) is None:
        return Target(node, product, driver, gpu, None, f"driver branch {version.branch} is not in "
                      "gpuconf/data/driver_branches.yaml, so its native CUDA is unknown", tuple(notes))
    # Unknown hardware is unknown: the prediction needs the GPU's class, brand and architecture, and
    # without them it would be the union of every outcome, which accepts nearly anything.
    model = tables.find_gpu(gpu) if gpu else None
    if model is None:
        return Target(node, product, driver, gpu, None, unknown_gpu(gpu), tuple(notes))
    return Target(node, product, driver, gpu, rules.Node(
        driver=version, gpu_name=model.name, gpu_class=model.gpu_class, brand=model.nvml_brand,
        arch=model.compute_capability), None, tuple(notes))


def unknown_gpu(gpu: str | None) -> str:
    """Why a check that needs the GPU model's facts cannot judge ``gpu`` (a model gpus.yaml lacks)."""
    if not gpu:
        return ("the GPU model is unknown (no nvidia.com/gpu.product label and no GPU name from the whole-node "
                "probe), so its class, brand and architecture are too")
    return (f"GPU model {gpu} is not in gpuconf/data/gpus.yaml, so its class, brand and architecture are unknown: "
            "add it to gpuconf/data/gpus.yaml")


def pool_of(product: str | None) -> str | None:
    """The node's pool: its GPU product, time-slicing's ``-SHARED`` suffix ignored."""
    return product.removesuffix("-SHARED") if product else None


# --- images and predictions -----------------------------------------------------------------


def matrix_cudas() -> list[str]:
    return [p.cuda for p in images.matrix() if p.probe == "cuda-probe"]


def resolve_compat_images(text: str) -> list[str]:
    """``--compat-images 12.4,12.8,13.1``: each CUDA version (major.minor, or a full version) as the
    newest official nvidia/cuda image of it in gpuconf/data/cuda_images.yaml, so that every
    probe's outcome stays predictable. Raises ValueError with one line saying what is wrong."""
    known = tables.image_versions()
    out: list[str] = []
    for raw in (part.strip() for part in text.split(",")):
        if not raw:
            raise ValueError("give CUDA versions separated by commas, e.g. 12.4,12.8,13.1")
        try:
            wanted = parse_cuda(raw)
        except VersionError as exc:
            raise ValueError(f"{raw!r} is not a CUDA version ({exc})") from exc
        exact = raw.count(".") >= 2
        fits = [v for v in known if (v == raw if exact else parse_cuda(v).major_minor == wanted.major_minor)]
        if not fits:
            raise ValueError(f"no official nvidia/cuda image of CUDA {raw} in gpuconf/data/cuda_images.yaml "
                             f"(known: {', '.join(known)})")
        if fits[-1] not in out:
            out.append(fits[-1])
    return out


def make_image(cuda: str, env: Iterable[tuple[str, str]] = ()) -> rules.Image:
    """The nvidia/cuda devel image a probe of ``cuda`` runs in, with the env the pod sets on top of
    the image's own (a pod variable replaces the image's of the same name)."""
    ref = images.devel_image(cuda)
    base = rules.image_from_ref(ref) or rules.Image(cuda=parse_cuda(cuda), ref=ref, env=None, compat=True)
    own = dict(env)
    if base.env is None:  # the image's own env is unknown: so is the container's, whatever the pod adds
        return base
    kept = tuple(e for e in base.env if e.split("=", 1)[0] not in own)
    return replace(base, env=kept + tuple(f"{k}={v}" for k, v in own.items()))


@dataclass(frozen=True)
class Predicted:
    """One outcome the engine predicts, with the settings under which it happens."""

    outcome: rules.Outcome
    when: tuple[str, ...]

    @property
    def result(self) -> str:
        return self.outcome.result

    @property
    def error_code(self) -> int | None:
        return self.outcome.error_code

    def describe(self) -> str:
        o = self.outcome
        if o.result == "runs":
            return f"runs ({o.rule}" + (f", libcuda {o.libcuda}" if o.libcuda != "host" else "") + ")"
        if o.result == "rejected":
            return f"rejected at container creation ({o.error_message})"
        return f"cuda-error {o.error_name} ({o.error_code}): {o.error_message}"


def predict_outcomes(node: rules.Node, image: rules.Image, modes: Sequence[Mode],
                     toolkit: tuple[int, ...] | None = None) -> tuple[Predicted, ...]:
    """Every distinct outcome the engine predicts for ``image`` on ``node`` in any of ``modes``: with a
    known ``toolkit`` for it alone, else for each of ``TOOLKIT_ERAS``.
    Raises VersionError when the driver branch is not in the data."""
    eras = [(toolkit, "toolkit " + ".".join(map(str, toolkit)))] if toolkit else list(TOOLKIT_ERAS)
    found: dict[tuple[object, ...], tuple[rules.Outcome, list[str]]] = {}
    for mode in modes:
        for version, era in eras:
            for o in rules.predict(node, image, rules.Runtime(toolkit=version, mode=mode)).outcomes:
                found.setdefault(o.key(), (o, []))[1].append(f"{mode.value} mode, {era}")
    return tuple(Predicted(o, tuple(when)) for o, when in found.values())


# --- planning the campaign ------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedPod:
    name: str
    node: str
    cuda: str
    role: str  # canary | matrix | disable-require
    env: tuple[tuple[str, str], ...] = ()


def _pod_name(node: str, suffix: str) -> str:
    return f"compat-{node}-{suffix}"


def plan_pods(targets: Sequence[Target], *, canary_cuda: str, cudas: Sequence[str] | None = None) -> list[PlannedPod]:
    """Every pod of the campaign: per node the canary, the matrix, and the NVIDIA_DISABLE_REQUIRE=1
    twin of each image the engine predicts a legacy-mode rejection for (the canary has not run yet,
    so the legacy prediction decides; on a node whose facts are unknown, no twin)."""
    out: list[PlannedPod] = []
    for t in targets:
        out.append(PlannedPod(_pod_name(t.node, "canary"), t.node, canary_cuda, "canary",
                              (("NVIDIA_REQUIRE_CUDA", CANARY_REQUIREMENT),)))
        for cuda in cudas if cudas is not None else matrix_cudas():
            tag = "cuda" + cuda.replace(".", "-")
            out.append(PlannedPod(_pod_name(t.node, tag), t.node, cuda, "matrix"))
            if t.model is not None and not t.dra and _rejected_in_legacy(t.model, cuda):
                out.append(PlannedPod(_pod_name(t.node, f"{tag}-disable-require"), t.node, cuda, "disable-require",
                                      (DISABLE_REQUIRE,)))
    return out


def _rejected_in_legacy(node: rules.Node, cuda: str) -> bool:
    try:
        return any(p.result == "rejected" for p in predict_outcomes(node, make_image(cuda), [Mode.LEGACY]))
    except VersionError:
        return False


# --- observing one pod ------------------------------------------------------------------------


@dataclass(frozen=True)
class Observation:
    """What one pod did: runs | rejected | cuda-error | other (outside the compatibility rules)."""

    result: str
    detail: str  # the requirement error, the CUDA error, or why it is "other"
    error_code: int | None = None
    libcuda: str | None = None
    libcuda_compat: bool | None = None
    evidence: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.result == "runs":
            if self.libcuda is None:
                return "runs"
            return f"runs (libcuda {self.libcuda}" + (", the image's cuda-compat)" if self.libcuda_compat else ")")
        if self.result == "rejected":
            return f"rejected at container creation ({self.detail})"
        if self.result == "cuda-error":
            return f"cuda-error {self.detail}"
        return f"other ({self.detail})"


def _texts(outcome: PodOutcome) -> list[str]:
    out = [t for t in [outcome.message] + [c.message for c in outcome.containers] if t]
    return out + [f"{e.reason}: {e.message}" for e in outcome.events if e.message]


def _requirement_error(outcome: PodOutcome) -> str | None:
    for text in _texts(outcome):
        m = _REQUIREMENT_ERROR.search(text)
        if m:
            return m.group(0)
    return None


def _broken_stack(probe: CudaProbeReport) -> str | None:
    """Why the container's driver stack is not what the compatibility rules presume, or None."""
    if probe.libcuda_absent_reason is not None:
        return f"no libcuda in the container ({probe.libcuda_absent_reason})"
    missing = [p for p in ("/dev/nvidiactl", "/dev/nvidia-uvm") if probe.device_nodes.get(p) is False]
    if not probe.device_nodes.get("gpus"):
        missing.append("/dev/nvidiaN")
    if missing:
        return f"device nodes missing in the container: {', '.join(missing)}"
    if probe.nvml_absent_reason is not None:
        return f"NVML did not initialise ({probe.nvml_absent_reason})"
    return None


def _diagnosis(outcome: PodOutcome) -> str:
    where = f"pod {outcome.name}: {outcome.phase}" + (f" {outcome.reason}" if outcome.reason else "") + (
        f" ({outcome.message})" if outcome.message else "")
    if outcome.timed_out:
        where += ", still going when the campaign's time ran out"
    found = diagnose("\n".join(_texts(outcome) + list(outcome.logs.values())))
    return where + (f"; diagnosis: {'; '.join(d.title for d in found)}" if found else "")


def observe(outcome: PodOutcome) -> Observation:
    """Classify a matrix pod's outcome (the probe document, else the pod's status and events)."""
    requirement = _requirement_error(outcome)
    if requirement is not None:
        return Observation("rejected", requirement, evidence=(f"pod {outcome.name}: {requirement}",))
    probe = probe_facts(outcome)
    if probe is None:
        return Observation("other", "no readable probe output: " + _diagnosis(outcome))
    evidence = (f"pod {outcome.name}: probe exit {probe.exit_code} ({probe.exit_reason}); libcuda "
                + (f"{probe.libcuda_path}" if probe.libcuda_path else f"absent ({probe.libcuda_absent_reason})"),)
    broken = _broken_stack(probe)
    if broken is not None:
        return Observation("other", f"{broken}; CUDA init: {probe.init}", evidence=evidence)
    if not probe.init.ok:
        return Observation("cuda-error", str(probe.init), probe.init.code, probe.libcuda_path, probe.libcuda_compat,
                           evidence)
    bad = [d for d in probe.devices if not d.vector_add_ok]
    if not probe.devices or bad:
        what = ", ".join(f"device {d.index}: {d.vector_add}" for d in bad) or "no device"
        return Observation("other", f"CUDA started but the vector-add did not verify ({what})", evidence=evidence)
    jit = [d for d in probe.devices if not d.ptx_jit_ok]
    notes = (f"PTX JIT failed: {jit[0].ptx_jit}",) if jit else ()
    return Observation("runs", "vector-add verified", None, probe.libcuda_path, probe.libcuda_compat,
                       evidence + notes)


# --- GPUs given through DRA ------------------------------------------------------------------------

#: Why a node whose probes get their GPUs through DRA is predicted in cdi mode. NVIDIA's DRA driver
#: writes a CDI spec for each prepared device (its nvcdi library, the toolkit's), and the container
#: runtime applies its edits: no NVIDIA runtime hook reads NVIDIA_REQUIRE_CUDA, so a mismatched image
#: starts and CUDA itself fails (803, 35). Simulated behaviour as the docs describe it (domain.md §3,
#: §5; nvidia-container-toolkit#1470 still asks for requirements in CDI mode): a real sample of a
#: claim-given container with NVIDIA_REQUIRE_CUDA=cuda>=99.0 would settle it.
DRA_CDI = ("injected through CDI by the DRA driver: NVIDIA_REQUIRE_CUDA is not enforced and the legacy runtime "
           "hook does not run, so the prediction is cdi mode's")
DRA_REQUIRE_NA = "the DRA driver injects through CDI: NVIDIA_REQUIRE_CUDA is not enforced there"


# --- the canary -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Canary:
    """The node's requirement enforcement as the canary showed it (None: unknown) and why."""

    enforcing: bool | None
    detail: str
    evidence: tuple[str, ...] = ()

    def modes(self) -> tuple[Mode, ...]:
        if self.enforcing is None:
            return (Mode.LEGACY, Mode.CDI, Mode.JIT_CDI)
        return (Mode.LEGACY,) if self.enforcing else (Mode.CDI, Mode.JIT_CDI)


def classify_canary(outcome: PodOutcome) -> Canary:
    """Enforcing: refused with its own requirement error; not enforcing: started with the driver
    injected (whatever CUDA did next); otherwise unknown, with what the pod said."""
    requirement = _requirement_error(outcome)
    if requirement is not None:
        if f"unsatisfied condition: {CANARY_REQUIREMENT}" in requirement:
            return Canary(True, f"the NVIDIA_REQUIRE_CUDA={CANARY_REQUIREMENT} canary was refused at container "
                          f"creation: {requirement}", (f"pod {outcome.name}: {requirement}",))
        return Canary(None, f"the canary was refused with a requirement error that is not its own: {requirement}",
                      (f"pod {outcome.name}: {requirement}",))
    probe = probe_facts(outcome)
    if probe is not None and probe.libcuda_absent_reason is None:
        return Canary(False, f"the NVIDIA_REQUIRE_CUDA={CANARY_REQUIREMENT} canary started with the driver "
                      f"injected (libcuda {probe.libcuda_path}; probe exit {probe.exit_code}): requirements are "
                      "not checked (cdi or jit-cdi mode)", (f"pod {outcome.name}: probe {probe.exit_reason}",))
    if probe is not None:
        return Canary(None, "the canary started but the NVIDIA runtime injected no driver "
                      f"({probe.libcuda_absent_reason}), so it says nothing about requirement checks")
    return Canary(None, "the canary neither started nor was refused for its requirement: " + _diagnosis(outcome))


# --- assembling the campaign's result ------------------------------------------------------------


@dataclass(frozen=True)
class MatrixRow:
    pod: str
    cuda: str
    image: str
    env: tuple[tuple[str, str], ...]
    predicted: tuple[Predicted, ...]
    observed: Observation

    @property
    def disable_require(self) -> bool:
        return DISABLE_REQUIRE in self.env

    @property
    def label(self) -> str:
        return self.image + "".join(f" with {k}={v}" for k, v in self.env)

    def matches(self) -> bool:
        o = self.observed
        return any(p.result == o.result and (o.result != "cuda-error" or p.error_code == o.error_code)
                   for p in self.predicted)


@dataclass(frozen=True)
class CompatRun:
    """Everything the checks need, per node; ``skipped`` nodes are not probed, with the reason (and
    its NOT TESTED kind in ``skipped_kinds``: gpuconf.nodes.Unavailable.kind)."""

    targets: Mapping[str, Target]
    canaries: Mapping[str, Canary]
    rows: Mapping[str, tuple[MatrixRow, ...]]
    pools: Mapping[str, str | None]
    skipped: Mapping[str, str] = field(default_factory=dict)
    #: Why a node's predictions could not be made (the driver unknown...).
    unpredictable: Mapping[str, str] = field(default_factory=dict)
    #: The nodes whose probes got their GPUs through DRA (injected through CDI by the DRA driver).
    dra: frozenset[str] = frozenset()
    skipped_kinds: Mapping[str, str] = field(default_factory=dict)


def assemble(targets: Sequence[Target], plan: Sequence[PlannedPod], outcomes: Mapping[str, PodOutcome],
             skipped: Mapping[str, str] | None = None, *,
             skipped_kinds: Mapping[str, str] | None = None,
             products: Mapping[str, str | None] | None = None) -> CompatRun:
    """The canaries classified, and each matrix pod's observation next to its prediction for the
    mode its node's canary showed. ``products``: the product label of every GPU node of the pools, the
    probed and those that took no probe now (cordoned, tainted, NotReady, busy), so that a node's pool
    counts the members no probe reached (a pool whose other node is cordoned is not a pool of one: that
    node's enforcement is unknown, not absent)."""
    by_node = {t.node: t for t in targets}
    canaries = {p.node: classify_canary(outcomes[p.name]) for p in plan if p.role == "canary"}
    rows: dict[str, list[MatrixRow]] = {t.node: [] for t in targets}
    unpredictable: dict[str, str] = {}
    for p in plan:
        if p.role == "canary":
            continue
        target = by_node[p.node]
        image = make_image(p.cuda, p.env)
        predicted: tuple[Predicted, ...] = ()
        if target.model is None:
            unpredictable[p.node] = target.problem or "the node's facts are unknown"
        else:
            modes = (Mode.CDI,) if target.dra else canaries[p.node].modes()
            try:
                predicted = predict_outcomes(target.model, image, modes)
            except VersionError as exc:
                unpredictable[p.node] = str(exc)
        observed = observe(outcomes[p.name])
        if target.dra:
            observed = replace(observed, evidence=(f"pod {p.name}: the GPU was {DRA_CDI}", *observed.evidence))
        rows[p.node].append(MatrixRow(p.name, p.cuda, image.ref or p.cuda, p.env, predicted, observed))
    return CompatRun(by_node, canaries, {n: tuple(r) for n, r in rows.items()},
                     {**{n: pool_of(p) for n, p in (products or {}).items()},
                      **{t.node: pool_of(t.product) for t in targets}}, dict(skipped or {}), unpredictable,
                     frozenset(t.node for t in targets if t.dra), dict(skipped_kinds or {}))


# --- runtime.require-cuda-enforced ---------------------------------------------------------------


def _enforcement(enforcing: bool) -> str:
    return ("NVIDIA_REQUIRE_CUDA enforced at container creation (legacy mode)" if enforcing
            else "NVIDIA_REQUIRE_CUDA not checked (cdi or jit-cdi mode)")


def evaluate_require_enforced(node: str, canaries: Mapping[str, Canary], pools: Mapping[str, str | None], *,
                              declared: str | None = None, dra: Collection[str] = ()) -> Verdict:
    """The node's enforcement against its pool's (the majority; a tie makes the non-enforcing nodes
    the odd ones), or against ``declared`` (legacy | cdi | jit-cdi) when given. ``dra``: nodes whose
    probes get their GPUs through DRA: not applicable there (CDI), and no vote in their pool."""
    cid = "runtime.require-cuda-enforced"
    canary = canaries.get(node)
    if node in dra:
        return not_tested(cid, node, f"not applicable: {DRA_REQUIRE_NA}", kind=NOT_APPLICABLE)
    if canary is None:
        return not_tested(cid, node, f"no canary ran on {node}", kind=COULD_NOT_RUN)
    if canary.enforcing is None:
        return not_tested(cid, node, f"requirement enforcement on {node} is unknown: {canary.detail}",
                          kind=COULD_NOT_RUN)
    observed = f"{_enforcement(canary.enforcing)}: {canary.detail}"
    if declared is not None:
        if declared not in ("legacy", "cdi", "jit-cdi"):
            raise ValueError(f"declared runtime mode must be legacy, cdi or jit-cdi, not {declared!r}")
        want = declared == "legacy"
        if canary.enforcing == want:
            return passed(cid, node, f"{_enforcement(want)}, as declared ({declared})", evidence=canary.evidence)
        return failed(cid, node, f"{node} runs with {_enforcement(canary.enforcing)} although the declared mode is "
                      f"{declared}", expected=f"{_enforcement(want)} (declared mode {declared})", observed=observed,
                      evidence=canary.evidence)
    pool = pools.get(node)
    if pool is None:
        return not_tested(cid, node, f"{node} has no pool to be compared with (no nvidia.com/gpu.product label or "
                          f"productName attribute): {_enforcement(canary.enforcing)}, not judged", kind=COULD_NOT_RUN)
    members = [n for n, p in pools.items() if p == pool and n not in dra]
    others = [n for n in members if n != node]
    if not others:  # a pool of one is uniform with nothing: there is no majority to hold it against
        through_dra = any(p == pool and n in dra for n, p in pools.items())
        return not_tested(cid, node, f"{node} is the only node of the {pool} pool"
                          + (" not given its GPUs through DRA" if through_dra else "")
                          + ": there is no other node to compare its requirement enforcement with "
                          f"({_enforcement(canary.enforcing)})", kind=NOT_APPLICABLE)
    known = {n: canaries[n].enforcing for n in members if n in canaries and canaries[n].enforcing is not None}
    unknown = [n for n in others if n not in known]
    if len(known) == 1:
        return not_tested(cid, node, f"the requirement enforcement of the other node(s) of the {pool} pool is "
                          f"unknown ({', '.join(unknown)}): {node}'s ({_enforcement(canary.enforcing)}) has nothing "
                          "to be compared with", kind=COULD_NOT_RUN)
    caveat = (f"the enforcement of {', '.join(unknown)} (no canary reading), so it is compared with "
              f"{len(known) - 1} of the pool's {len(others)} other nodes",) if unknown else ()
    votes = Counter(known.values())
    if len(votes) == 1:
        return passed(cid, node, f"{_enforcement(canary.enforcing)}, as every probed node of the {pool} pool "
                      f"({len(known)})", evidence=canary.evidence, not_judged=caveat)
    want = votes[True] >= votes[False]
    tie = " (a tie: not checking requirements is the weaker state, so the non-enforcing nodes are the odd ones)" \
        if votes[True] == votes[False] else ""
    if canary.enforcing == want:
        return passed(cid, node, f"{_enforcement(want)}, as {votes[want]} of {len(known)} nodes of the {pool} pool"
                      + tie, evidence=canary.evidence, not_judged=caveat)
    odd = "does not enforce" if want else "enforces"
    return failed(cid, node, f"{node} {odd} NVIDIA_REQUIRE_CUDA while {votes[want]} of {len(known)} nodes of the "
                  f"{pool} pool {'do' if want else 'do not'}{tie}",
                  expected=f"{_enforcement(want)}, as the {pool} pool", observed=observed, evidence=canary.evidence)


# --- compat.outcome-matches-prediction ------------------------------------------------------------


def _predicted_text(row: MatrixRow) -> str:
    return " or ".join(p.describe() for p in row.predicted)


def _row_evidence(row: MatrixRow) -> tuple[str, ...]:
    out = [f"{row.label}: predicted {p.describe()} when {' | '.join(p.when)}; why: {'; '.join(p.outcome.why)}"
           for p in row.predicted]
    return (*out, f"{row.label}: observed {row.observed.describe()}", *row.observed.evidence)


def evaluate_outcome_matches(node: str, rows: Sequence[MatrixRow], *, unpredictable: str | None = None) -> Verdict:
    """Every matrix pod did one of the things the engine predicts (result; the code of a CUDA error)."""
    cid = "compat.outcome-matches-prediction"
    if not rows:
        return not_tested(cid, node, f"no matrix pod ran on {node}", kind=COULD_NOT_RUN)
    if unpredictable is not None:
        return not_tested(cid, node, f"no prediction for {node}: {unpredictable}", kind=COULD_NOT_RUN)
    unobserved = [r for r in rows if r.observed.result == "other"]
    wrong = [r for r in rows if r.observed.result != "other" and not r.matches()]
    if wrong:
        hint = "".join(" (NVIDIA_DISABLE_REQUIRE=1 should have shown the runtime's outcome instead of the rejection)"
                       for r in wrong[:1] if r.disable_require and r.observed.result == "rejected")
        return failed(cid, node, f"{len(wrong)} of {len(rows)} matrix pods on {node} did not do what gpuconf predict "
                      "says: " + "; ".join(f"{r.label} was predicted to be {_predicted_text(r)} and is "
                                           f"{r.observed.describe()}" for r in wrong) + hint,
                      expected="; ".join(f"{r.label}: {_predicted_text(r)}" for r in wrong),
                      observed="; ".join(f"{r.label}: {r.observed.describe()}" for r in wrong),
                      evidence=tuple(e for r in wrong for e in _row_evidence(r)))
    if unobserved:
        return not_tested(cid, node, f"{len(unobserved)} of {len(rows)} matrix pods on {node} show no compatibility "
                          "outcome, so the comparison is incomplete: " + "; ".join(
                              f"{r.label}: {r.observed.detail}" for r in unobserved), kind=COULD_NOT_RUN)
    return passed(cid, node, f"all {len(rows)} matrix pods on {node} did what gpuconf predict says: "
                  + "; ".join(f"{r.label}: {r.observed.describe()}" for r in rows),
                  evidence=tuple(e for r in rows for e in _row_evidence(r)))


# --- compat.forward-compat-runs -------------------------------------------------------------------


def evaluate_forward_compat(node: str, target: Target | None, rows: Sequence[MatrixRow]) -> Verdict:
    """On a data-center GPU, each matrix image newer than the driver's native CUDA, carrying
    cuda-compat and paired with a supported host branch, runs on the image's compat libcuda."""
    cid = "compat.forward-compat-runs"
    if target is None or target.model is None:
        return not_tested(cid, node, f"no prediction for {node}: "
                          + (target.problem if target is not None and target.problem else "its facts are unknown"),
                          kind=COULD_NOT_RUN)
    model = target.model
    classes = tables.load("forward_compat").get("gpu_classes", ["data-center"])
    gpu = model.gpu_name or "the GPU"
    if model.gpu_class not in classes:
        return not_tested(cid, node, f"forward compatibility is supported on {' and '.join(classes)} GPUs only; "
                          f"{gpu} on {node} is " + (model.gpu_class or "of an unknown class"),
                          kind=NOT_APPLICABLE if model.gpu_class else COULD_NOT_RUN)
    native = rules.native_cuda(model)
    assert native is not None  # make_target only models branches in the table
    branch = model.driver.branch
    plain = [r for r in rows if not r.env]
    newer = [r for r in plain if parse_cuda(r.cuda).major_minor > native]
    facts = f"{gpu}, driver {model.driver}, native CUDA {native}"
    if not newer:
        return not_tested(cid, node, f"no matrix image is newer than the native CUDA {native} of {node} ({facts}; "
                          f"matrix: {', '.join(r.cuda for r in plain)})", kind=NOT_APPLICABLE)
    candidates = [r for r in newer if _supported(r, branch)]
    if not candidates:
        return not_tested(cid, node, f"no matrix image newer than CUDA {native} pairs with driver branch {branch} "
                          "in gpuconf/data/forward_compat.yaml ("
                          + ", ".join(r.cuda for r in newer) + f" on {facts})", kind=NOT_APPLICABLE)
    seen = [(r, *_runtime_outcome(r, rows)) for r in candidates]
    bad = [(r, o, note) for r, o, note in seen if o.result != "other" and not (o.result == "runs" and o.libcuda_compat)]
    lines = tuple(f"{r.label}: {o.describe()}{note}" for r, o, note in seen)
    evidence = tuple(e for _, o, _ in seen for e in o.evidence)
    if bad:
        host = "ran on the host libcuda, not the image's cuda-compat one"
        return failed(cid, node, f"forward compatibility does not work on {node} ({facts}): " + "; ".join(
            f"{r.image} {host if o.result == 'runs' else o.describe()}{note}" for r, o, note in bad),
            expected="each of " + ", ".join(r.image for r, _, _ in seen) + " runs on the image's cuda-compat libcuda "
            "(/usr/local/cuda/compat)", observed="; ".join(lines), evidence=evidence)
    unobserved = [(r, o) for r, o, _ in seen if o.result == "other"]
    if unobserved:
        return not_tested(cid, node, "forward compatibility could not be observed on "
                          f"{node}: " + "; ".join(f"{r.image}: {o.detail}" for r, o in unobserved), kind=COULD_NOT_RUN)
    return passed(cid, node, f"forward compatibility works on {node} ({facts}): " + "; ".join(lines),
                  evidence=evidence)


def evaluate_current_major_runs(node: str, target: Target | None, rows: Sequence[MatrixRow]) -> Verdict:
    """The images of the newest CUDA major in the probe matrix run on ``node`` (natively or through
    forward compatibility). Where they are refused at creation or fail at CUDA init (803, 804, 35 on
    a branch that major does not support), the node is DEGRADED naming them, even when every
    outcome was predicted: workloads built for the current CUDA cannot run there."""
    cid = "compat.current-cuda-major-runs"
    plain = [r for r in rows if not r.env]
    if not plain:
        return not_tested(cid, node, f"no probe-matrix image ran on {node}", kind=COULD_NOT_RUN)
    major = max(parse_cuda(r.cuda).major for r in plain)
    current = [(r, *_runtime_outcome(r, rows)) for r in plain if parse_cuda(r.cuda).major == major]
    facts = ""
    if target is not None and target.model is not None:
        native = rules.native_cuda(target.model)
        source = f" from {target.driver_from}" if target.driver_from else ""
        facts = f" ({target.model.gpu_name or 'the GPU'}, driver {target.model.driver}{source}, native CUDA {native})"
    bad = [(r, o, note) for r, o, note in current if o.result in ("rejected", "cuda-error")]
    lines = tuple(f"{r.label}: {o.describe()}{note}" for r, o, note in current)
    if bad:
        return failed(cid, node, f"CUDA {major} images fail on {node}{facts}: " + "; ".join(
            f"{r.image} {o.describe()}{note}" for r, o, note in bad),
            expected=f"every CUDA {major}.x image of the matrix runs", observed="; ".join(lines),
            evidence=tuple(e for _, o, _ in bad for e in o.evidence))
    # A PASS says every image of the major runs: one whose outcome was not seen leaves that unproven,
    # as it leaves the other compat checks' comparisons incomplete (NOT TESTED, the images named).
    unobserved = [(r, o) for r, o, _ in current if o.result == "other"]
    if unobserved:
        ran = [f"{r.label}: {o.describe()}{note}" for r, o, note in current if o.result != "other"]
        return not_tested(cid, node, f"{len(unobserved)} of {len(current)} CUDA {major} images' outcome on {node} "
                          "could not be observed: " + "; ".join(f"{r.image}: {o.detail}" for r, o in unobserved)
                          + (f" (seen: {'; '.join(ran)})" if ran else ""), kind=COULD_NOT_RUN)
    return passed(cid, node, f"the CUDA {major} images run on {node}{facts}: " + "; ".join(lines))


def _supported(row: MatrixRow, branch: int) -> bool:
    package = tables.compat_package(parse_cuda(row.cuda))
    image = make_image(row.cuda)
    return bool(image.compat) and package is not None and branch in package.host_branches


def _runtime_outcome(row: MatrixRow, rows: Sequence[MatrixRow]) -> tuple[Observation, str]:
    """The plain pod's observation; when it was refused at creation, its NVIDIA_DISABLE_REQUIRE twin's."""
    if row.observed.result == "rejected":
        twin = next((r for r in rows if r.cuda == row.cuda and r.disable_require), None)
        if twin is not None:
            return twin.observed, f" (with NVIDIA_DISABLE_REQUIRE=1; without it: {row.observed.detail})"
    return row.observed, ""

