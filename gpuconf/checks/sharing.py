"""Sharing checks (time-slicing and MPS): a node whose device plugin shares each GPU N ways
advertises N x its GPUs, labels what it does, and runs more pods than it has GPUs at once.

GFD labels the sharing it reads from the device plugin's config (``nvidia.com/gpu.replicas``,
``nvidia.com/gpu.sharing-strategy``, the product's ``-SHARED`` suffix); the device plugin
advertises what it really runs with (capacity = GPUs x replicas). A plugin that did not reload a
changed config advertises the old count under the new labels (NVIDIA/gpu-operator#1144): the
replicas check compares the two, and both with the ``--expect`` pool's declaration.

Under MPS the device plugin runs a control daemon per resource that gives each client a pinned
device memory limit of memory / replicas (``set_default_device_pinned_mem_limit <i> <MiB>M``) and
an active thread percentage of 100 / replicas, points each allocated container at the daemon
(``CUDA_MPS_PIPE_DIRECTORY``) and refuses a container asking more than one replica
(NVIDIA/k8s-device-plugin#929). The memory limit does not show in cudaMemGetInfo (free and total
stay the device's); an allocation beyond it fails with cudaErrorMemoryAllocation, so the
cuda-probe's ``--measure-alloc`` bisection (its largest single allocation) is what shows it. The
thread percentage confines a client's kernels to about that share of the SMs while
cudaDeviceProp.multiProcessorCount may still report the whole device, so the probe's SM census
(the same switch: a kernel of 32 x SMs spinning blocks recording ``%smid``) is what shows it.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuconf.checks.isolation import Sighting, rendezvous_overlap
from gpuconf.cluster.outcomes import PodOutcome
from gpuconf.expect import SharingSpec
from gpuconf.outcomes import COULD_NOT_RUN, NOT_APPLICABLE
from gpuconf.verdict import Verdict, failed, not_tested, passed

__all__ = [
    "MEASURE_ALLOC_ENV",
    "MPS_LIMIT_OVER",
    "MPS_LIMIT_UNDER",
    "MPS_SM_SLACK",
    "MPS_SM_SLACK_FRACTION",
    "PLUGIN_REFUSAL",
    "SHARED_RESOURCES",
    "Run",
    "SharingFacts",
    "evaluate_mps_client_limits",
    "evaluate_mps_thread_limit",
    "evaluate_oversubscription_runs",
    "evaluate_rejects_multi_replica_request",
    "mps_plan",
    "not_planned_kind",
    "evaluate_product_label_shared",
    "evaluate_replicas_match_config",
    "in_scope",
    "mps_sm_bound",
    "oversubscription_plan",
    "pod_name",
    "sharing_facts",
]

#: The resources a shared GPU is advertised under: the default name, and the one the device
#: plugin's ``renameByDefault: true`` gives it (``<resource>.shared``).
SHARED_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")
_STRATEGIES = ("time-slicing", "mps")
_MAX_NAME = 253


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and value.strip().isdigit() else None


@dataclass(frozen=True)
class SharingFacts:
    """What the Node says about sharing: GFD's labels and the device plugin's capacity."""

    node: str
    strategy: str | None  # nvidia.com/gpu.sharing-strategy
    replicas: int | None  # nvidia.com/gpu.replicas (None: absent or not a number)
    product: str | None  # nvidia.com/gpu.product
    gpu_count: int | None  # nvidia.com/gpu.count: physical GPUs (MIG devices under MIG single)
    capacity: Mapping[str, int]  # the shared resources, as the device plugin advertises them
    allocatable: Mapping[str, int]

    @property
    def labelled_shared(self) -> bool:
        """GFD says the GPUs are shared (it writes strategy none when replicas <= 1)."""
        return self.strategy in _STRATEGIES or (self.replicas or 0) > 1

    @property
    def resource(self) -> str | None:
        """The resource the shared GPUs are advertised under, or None when neither is advertised."""
        present = [r for r in SHARED_RESOURCES if self.capacity.get(r, 0) > 0]
        return present[0] if len(present) == 1 else None

    def labels_text(self) -> str:
        return (f"nvidia.com/gpu.sharing-strategy={self.strategy or '(absent)'}, "
                f"nvidia.com/gpu.replicas={self.replicas if self.replicas is not None else '(absent)'}")

    def advertised_text(self) -> str:
        parts = [f"{r} {self.capacity[r]} (allocatable {self.allocatable.get(r, 0)})" for r in SHARED_RESOURCES
                 if r in self.capacity]
        return ", ".join(parts) or "no nvidia.com/gpu or nvidia.com/gpu.shared"


def sharing_facts(node: str, labels: Mapping[str, str], capacity: Mapping[str, int],
                  allocatable: Mapping[str, int]) -> SharingFacts:
    """The node's sharing facts from its labels and its GPU resources (as counts)."""
    return SharingFacts(node, labels.get("nvidia.com/gpu.sharing-strategy"),
                        _int(labels.get("nvidia.com/gpu.replicas")), labels.get("nvidia.com/gpu.product"),
                        _int(labels.get("nvidia.com/gpu.count")),
                        {r: capacity[r] for r in SHARED_RESOURCES if r in capacity},
                        {r: allocatable[r] for r in SHARED_RESOURCES if r in allocatable})


def in_scope(f: SharingFacts, declared: SharingSpec | None = None) -> bool:
    """Whether the replicas check applies: GFD labels the GPUs shared, or the --expect pool declares them so."""
    return f.labelled_shared or (declared is not None and (declared.strategy in _STRATEGIES
                                                           or (declared.replicas or 1) > 1))


def _not_shared(cid: str, f: SharingFacts) -> Verdict:
    return not_tested(cid, f.node, f"{f.node} does not share its GPUs ({f.labels_text()})", kind=NOT_APPLICABLE)


def _declared_text(declared: SharingSpec) -> str:
    parts = [f"strategy {declared.strategy}" if declared.strategy is not None else "",
             f"replicas {declared.replicas}" if declared.replicas is not None else ""]
    return ", ".join(p for p in parts if p) or "nothing"


# -------------------------------------------------------------------------------------------------
# sharing.replicas-match-config


def evaluate_replicas_match_config(f: SharingFacts, *, physical: Mapping[str, int],
                                   declared: SharingSpec | None = None, pool: str | None = None) -> Verdict:
    """GFD's replicas and strategy labels, the device plugin's capacity (physical GPUs x replicas)
    and, when given, the ``--expect`` pool's sharing declaration agree. ``physical``: the node's
    GPU count by view (the nvidia.com/gpu.count label, the whole-node probe's distinct UUIDs);
    where they disagree the GPU count is wrong (inventory.gpu-count-matches-expected), so the
    capacity is accepted when it matches the labelled replicas over any of them."""
    cid = "sharing.replicas-match-config"
    if not in_scope(f, declared):
        return _not_shared(cid, f)
    evidence = [f"labels: {f.labels_text()}, nvidia.com/gpu.count={f.gpu_count}",
                f"advertised: {f.advertised_text()}",
                "physical GPUs: " + ("; ".join(f"{k}: {v}" for k, v in physical.items()) or "unknown")]
    if declared is not None:
        evidence.append(f"--expect pool {pool}: sharing {_declared_text(declared)}")
    problems: list[tuple[str, str, str]] = []  # (summary, expected, observed)
    if f.strategy in _STRATEGIES and (f.replicas or 1) <= 1:
        problems.append((f"GFD labels sharing strategy {f.strategy} with nvidia.com/gpu.replicas="
                         f"{f.replicas if f.replicas is not None else '(absent)'}",
                         "replicas > 1 with a sharing strategy", f.labels_text()))
    # GFD before v0.15 writes no sharing-strategy label: only a present one can contradict replicas.
    if (f.replicas or 1) > 1 and f.strategy is not None and f.strategy not in _STRATEGIES:
        problems.append((f"GFD labels {f.replicas} replicas with sharing strategy {f.strategy or '(absent)'}",
                         "sharing-strategy time-slicing or mps with replicas > 1", f.labels_text()))
    if declared is not None:
        problems += _declaration_problems(f, declared, pool)
    problems += _capacity_problems(f, physical, declared)
    if not problems:
        # no problem: the labels share the GPUs (a declaration alone contradicts labels that do not), and
        # the capacity of the one shared resource (the other absent or 0) is a count x the labelled replicas
        # (a positive capacity: a count of 0 never divides it)
        per = f.replicas
        capacity = sum(f.capacity.get(r, 0) for r in SHARED_RESOURCES)
        # the count the capacity divides into (the views may disagree: inventory's finding, not this one's)
        gpus = next((n for n in physical.values() if per is not None and capacity == n * per), None)
        said = f" and as --expect pool {pool} declares" if declared is not None else ""
        if gpus is None:
            known = "; ".join(f"{k}: {v}" for k, v in physical.items())
            return not_tested(cid, f.node, f"the number of physical GPUs on {f.node} is unknown ("
                              + (known or "no nvidia.com/gpu.count label, no whole-node probe")
                              + "), so its capacity cannot be divided into replicas", kind=COULD_NOT_RUN)
        return passed(cid, f.node, f"{f.resource} {capacity} = {gpus} GPUs x {per} "
                      f"{f.strategy or 'shared'} replicas, as GFD labels it{said}", evidence=tuple(evidence))
    summary, expected, observed = problems[0]
    more = [f"also: {p[0]}" for p in problems[1:]]
    return failed(cid, f.node, summary, expected=expected, observed=observed, evidence=tuple(evidence + more))


def _declaration_problems(f: SharingFacts, declared: SharingSpec, pool: str | None) -> list[tuple[str, str, str]]:
    out = []
    if declared.strategy is not None and declared.strategy != (f.strategy or "none"):
        out.append((f"--expect pool {pool} declares sharing strategy {declared.strategy} but GFD labels "
                    f"{f.strategy or '(absent)'}", f"nvidia.com/gpu.sharing-strategy={declared.strategy}",
                    f.labels_text()))
    want = declared.effective_replicas
    if want is not None and want != (f.replicas or 1):
        out.append((f"--expect pool {pool} declares {want} replicas per GPU but GFD labels "
                    f"{f.replicas if f.replicas is not None else '(absent)'}", f"nvidia.com/gpu.replicas={want}",
                    f.labels_text()))
    return out


def _capacity_problems(f: SharingFacts, physical: Mapping[str, int],
                       declared: SharingSpec | None) -> list[tuple[str, str, str]]:
    """The device plugin's capacity against GPUs x the labelled (else declared) replicas."""
    resource = f.resource
    if resource is None:
        if any(f.capacity.get(r, 0) > 0 for r in SHARED_RESOURCES):
            return [(f"{f.node} advertises both nvidia.com/gpu and nvidia.com/gpu.shared",
                     "one shared GPU resource", f.advertised_text())]
        return [(f"{f.node} is labelled as sharing its GPUs but advertises no nvidia.com/gpu or nvidia.com/gpu.shared",
                 "GPUs x replicas of nvidia.com/gpu", f.advertised_text())]
    replicas = f.replicas if f.labelled_shared and (f.replicas or 1) > 1 else (
        declared.effective_replicas if declared is not None else None)
    gpus = [n for n in physical.values() if n > 0]
    if replicas is None or not gpus:
        return []  # nothing to multiply: the label problems above say why
    capacity = f.capacity[resource]
    if any(capacity == n * replicas for n in gpus):
        return []
    n = gpus[0]
    source = next(k for k, v in physical.items() if v == n)
    expected = f"{resource} {n * replicas} ({n} GPUs x {replicas} replicas)"
    if capacity % n == 0:
        return [(f"the device plugin advertises {capacity} {resource} on {n} GPUs, {capacity // n} replicas per "
                 f"GPU, but GFD labels nvidia.com/gpu.replicas={f.replicas} (the plugin runs another sharing "
                 "config than the one labelled)", expected, f"{resource} {capacity} ({source}: {n})")]
    return [(f"the device plugin advertises {capacity} {resource}, not a multiple of the {n} GPUs: it matches "
             f"no whole number of replicas (labelled {f.replicas})", expected,
             f"{resource} {capacity} ({source}: {n})")]


# -------------------------------------------------------------------------------------------------
# sharing.product-label-shared


def evaluate_product_label_shared(f: SharingFacts) -> Verdict:
    """GFD appends ``-SHARED`` to nvidia.com/gpu.product when the GPU is shared (replicas > 1) and
    the device plugin did not rename the resource; with ``renameByDefault`` (the resource becomes
    nvidia.com/gpu.shared) the product keeps its plain name. A resource renamed to some other
    name cannot be told apart from a missing one, so that case is not tested."""
    cid = "sharing.product-label-shared"
    if not f.labelled_shared or (f.replicas or 1) <= 1:
        return _not_shared(cid, f)
    if not f.product:
        return not_tested(cid, f.node, f"{f.node} has no nvidia.com/gpu.product label "
                          "(labels.gfd-matches-hardware reports it)", kind=COULD_NOT_RUN)
    resource = f.resource
    evidence = (f"labels: {f.labels_text()}, nvidia.com/gpu.product={f.product}", f"advertised: {f.advertised_text()}")
    if resource is None:
        return not_tested(cid, f.node, f"{f.node} advertises {f.advertised_text()}: whether GFD appends -SHARED "
                          "depends on the device plugin's rename setting, which the cluster does not expose "
                          "when the resource is renamed to another name", kind=COULD_NOT_RUN)
    suffixed = f.product.endswith("-SHARED")
    renamed = resource == "nvidia.com/gpu.shared"
    if suffixed != renamed:
        why = ("renameByDefault: the resource is nvidia.com/gpu.shared" if renamed
               else "not renamed: the resource is nvidia.com/gpu")
        return passed(cid, f.node, f"nvidia.com/gpu.product={f.product} "
                      + ("keeps its plain name" if renamed else "carries -SHARED") + f" ({why})", evidence=evidence)
    if renamed:
        return failed(cid, f.node, f"nvidia.com/gpu.product={f.product} carries -SHARED although the device plugin "
                      "renamed the shared resource to nvidia.com/gpu.shared (renameByDefault)",
                      expected=f"nvidia.com/gpu.product={f.product.removesuffix('-SHARED')}",
                      observed=f"nvidia.com/gpu.product={f.product}", evidence=evidence)
    return failed(cid, f.node, f"nvidia.com/gpu.product={f.product} lacks the -SHARED suffix although nvidia.com/gpu "
                  f"is shared {f.replicas} ways ({f.strategy}) under its own name",
                  expected=f"nvidia.com/gpu.product={f.product}-SHARED", observed=f"nvidia.com/gpu.product={f.product}",
                  evidence=evidence)


# -------------------------------------------------------------------------------------------------
# sharing.oversubscription-runs


def pod_name(node: str, index: int, prefix: str = "share") -> str:
    """``<prefix>-<node>-<index>``, cut and made unique by a hash of the node name when too long."""
    name = f"{prefix}-{node}-{index}"
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(node.encode()).hexdigest()[:10]
    tail = f"-{digest}-{index}"
    return f"{prefix}-{node}"[:_MAX_NAME - len(tail)].rstrip(".-") + tail


def not_planned_kind(f: SharingFacts, *, mps: bool = False) -> str:
    """The NOT TESTED kind of a node the sharing pods (``mps``: the MPS pods) are not planned on, with
    :func:`oversubscription_plan`'s or :func:`mps_plan`'s reason: not applicable where the node does not
    share its GPUs (through MPS), could-not-run where it does and the pods cannot be launched."""
    shares = f.strategy == "mps" if mps else f.labelled_shared and (f.replicas or 1) > 1
    return COULD_NOT_RUN if shares else NOT_APPLICABLE


def oversubscription_plan(f: SharingFacts, physical: int | None) -> tuple[int, str | None]:
    """How many one-GPU pods to launch on the node at once (its GPUs + 1), or 0 and why none."""
    if not f.labelled_shared or (f.replicas or 0) <= 1:
        return 0, f"{f.node} does not share its GPUs ({f.labels_text()})"
    resource = f.resource
    if resource is None:
        return 0, f"{f.node} advertises {f.advertised_text()}: no shared GPU resource to request"
    if physical is None or physical < 1:
        return 0, f"the number of physical GPUs on {f.node} is unknown (no nvidia.com/gpu.count label, no probe)"
    free = f.allocatable.get(resource, 0)
    if free < physical + 1:
        return 0, (f"{f.node} has {free} allocatable {resource} for {physical} GPUs: not enough to run "
                   f"{physical + 1} pods at once (sharing.replicas-match-config says why)")
    return physical + 1, None


@dataclass(frozen=True)
class Run:
    """One oversubscription pod: what its probe saw (isolation's Sighting) and when it held its GPU."""

    seen: Sighting
    window: tuple[float, float] | None = None  # scheduled, finished (seconds since the epoch)


def _together(runs: Sequence[Run]) -> bool | None:
    """Whether every pod held its GPU at one moment by their pod times, the fallback for probes that
    ran without a rendezvous (times have one-second resolution): True when the windows surely share
    a moment, False when two surely do not, else None."""
    windows = [r.window for r in runs]
    if any(w is None for w in windows):
        return None
    starts, ends = [w[0] for w in windows if w], [w[1] for w in windows if w]
    if max(starts) < min(ends):
        return True
    if any(a[1] < b[0] for a in windows if a for b in windows if b):
        return False
    return None


def evaluate_oversubscription_runs(node: str, runs: Sequence[Run], *, physical: int,
                                   node_uuids: frozenset[str] | None, replicas: int, strategy: str | None) -> Verdict:
    """N pods of one GPU each on a node with G < N physical GPUs all run and verify their kernel,
    each sees one GPU of the node, and the pods share GPUs: at least N - G pairs of pods see the
    same UUID (the pigeonhole bound; a pod seeing a GPU the node does not have breaks it), while
    they all hold their GPUs at the same time: their probes' rendezvous proves it (pod times only
    where the probes ran none). Pods launched at once but not shown to overlap prove no sharing."""
    cid = "sharing.oversubscription-runs"
    if not runs:
        return not_tested(cid, node, f"no oversubscription pod was planned on {node}", kind=COULD_NOT_RUN)
    count = len(runs)
    evidence: list[str] = []
    uuids: list[str] = []
    for r in runs:
        s = r.seen
        if s.report is None:
            return failed(cid, node, f"{count} pods of one GPU each on {physical} GPUs: {s.failure}",
                          expected=f"all {count} pods run on {physical} GPUs shared {replicas} ways",
                          observed=s.failure or "no probe output", evidence=tuple(evidence))
        report = s.report
        if not report.init.ok:
            return failed(cid, node, f"{s.where} (one of {count} pods on {physical} GPUs) could not start CUDA: "
                          f"{report.init}",
                          expected="a CUDA context in every pod sharing a GPU", observed=str(report.init),
                          evidence=tuple(evidence + [f"{s.where}: {report.exit_reason}"]))
        seen = [d.uuid or f"CUDA device {d.index}" for d in report.devices]
        evidence.append(f"{s.where}: {', '.join(seen) or 'no GPU'}"
                        + "".join(f"; {d.uuid} vector-add FAILED {d.vector_add}" for d in report.devices
                                  if not d.vector_add_ok))
        if len(report.devices) != 1:
            return failed(cid, node, f"{s.where} asked for one shared GPU and CUDA sees {len(report.devices)}",
                          expected="1 GPU", observed=f"{len(report.devices)} GPUs ({', '.join(seen) or 'none'})",
                          evidence=tuple(evidence))
        device = report.devices[0]
        if not device.vector_add_ok:
            return failed(cid, node, f"the vector-add kernel failed in {s.where} on {seen[0]} while {count} pods "
                          f"shared {physical} GPUs: {device.vector_add}",
                          expected="every element correct in every pod", observed=str(device.vector_add),
                          evidence=tuple(evidence))
        uuids.append(seen[0])
    foreign = sorted({u for u in uuids if node_uuids is not None and u not in node_uuids})
    if foreign:
        return failed(cid, node, f"pods on {node} see GPUs the node does not have: {', '.join(foreign)}",
                      expected=f"UUIDs among the node's {len(node_uuids or ())}: {', '.join(sorted(node_uuids or ()))}",
                      observed=", ".join(uuids), evidence=tuple(evidence))
    distinct = Counter(uuids)
    pairs = sum(n * (n - 1) // 2 for n in distinct.values())
    if len(distinct) > physical or pairs < count - physical:
        return failed(cid, node, f"{count} pods on {physical} GPUs see {len(distinct)} distinct GPUs "
                      f"({pairs} sharing pairs)", expected=f"at most {physical} distinct GPUs, at least "
                      f"{count - physical} pairs of pods on one GPU", observed=", ".join(uuids),
                      evidence=tuple(evidence))
    overlap = rendezvous_overlap([r.seen for r in runs])
    if overlap is not None and not overlap.held:
        return not_tested(cid, node, f"the {count} pods could not hold their GPUs at the same time: {overlap.reason}",
                          kind=COULD_NOT_RUN)
    together = overlap.held if overlap is not None else _together(runs)
    if together is False:
        return not_tested(cid, node, f"the {count} pods did not all hold their GPUs at the same time, so sharing "
                          "was not exercised (each ran and verified its kernel)", kind=COULD_NOT_RUN)
    if together is None:
        return not_tested(cid, node, f"the {count} pods ran and verified their kernels, but nothing shows they held "
                          "their GPUs at the same time (their probes ran no rendezvous and their pod times "
                          + ("are missing)" if any(r.window is None for r in runs) else "meet within a second)"),
                          kind=COULD_NOT_RUN)
    how = overlap.said() if overlap is not None else "their pod times overlap"
    shared = ", ".join(f"{u} x{n}" for u, n in sorted(distinct.items()) if n > 1)
    return passed(cid, node, f"{count} pods on {physical} GPUs ({strategy}, {replicas} replicas) held their GPUs at "
                  f"the same time ({how}); each verified its kernel on one of the node's GPUs; shared: {shared}",
                  evidence=tuple(evidence) + (overlap.evidence if overlap is not None else ()))


# -------------------------------------------------------------------------------------------------
# sharing.mps-client-limits and sharing.rejects-multi-replica-request

#: The cuda-probe's switch for its largest-allocation bisection (probes/cuda-probe/README.md).
MEASURE_ALLOC_ENV = {"GPUCONF_PROBE_MEASURE_ALLOC": "1"}
#: How far a client's largest allocation may exceed memory / replicas: the plugin divides NVML's
#: memory (the nvidia.com/gpu.memory label), which exceeds CUDA's totalGlobalMem by 1-2% (memory
#: the driver reserves), and rounds to whole MiB. A client without a limit reaches nearly the
#: whole GPU, at least 2 x memory / replicas less its context, far beyond 1.05.
MPS_LIMIT_OVER = 1.05
#: How far below memory / replicas the limit may be: the client's context is charged to its limit
#: (hundreds of MiB) and the bisection stops at 1/128 of the GPU (3% of the limit at 4 replicas,
#: 13% at 16). Below 3/4 the daemon runs another (larger) replicas count than labelled.
MPS_LIMIT_UNDER = 0.75
#: The device plugin's Allocate error for a container asking more than one shared replica.
PLUGIN_REFUSAL = "maximum request size for shared resources is 1"
_GIB = 1 << 30


def _gib(n: int | float) -> str:
    return f"{n / _GIB:.2f} GiB"


def mps_plan(f: SharingFacts, *, pods: int = 1) -> str | None:
    """Why the MPS pods (``pods`` replicas in all) cannot be launched on the node, or None."""
    if f.strategy != "mps":
        return (f"{f.node} does not share its GPUs through MPS ({f.labels_text()}): per-client limits and the "
                "one-replica rule are MPS's")
    if (f.replicas or 1) <= 1:
        return f"{f.node} labels MPS with {f.replicas} replicas: nothing to divide (sharing.replicas-match-config)"
    resource = f.resource
    if resource is None:
        return f"{f.node} advertises {f.advertised_text()}: no shared GPU resource to request"
    free = f.allocatable.get(resource, 0)
    if free < pods:
        return f"{f.node} has {free} allocatable {resource}: not enough for {pods} replicas"
    return None


def evaluate_mps_client_limits(f: SharingFacts, seen: Sighting, *, memory_mib: int | None) -> Verdict:
    """A pod asking one MPS replica is an MPS client (CUDA_MPS_PIPE_DIRECTORY set) and its largest
    single allocation is memory / replicas within [MPS_LIMIT_UNDER, MPS_LIMIT_OVER]; ``memory_mib``
    is the GPU's memory as GFD labels it (nvidia.com/gpu.memory), else the probe's total is used."""
    cid = "sharing.mps-client-limits"
    node = f.node
    why = mps_plan(f)
    if why is not None:
        return not_tested(cid, node, why, kind=not_planned_kind(f, mps=True))
    replicas = f.replicas or 1
    if seen.report is None:
        why = seen.failure or "no probe output"
        return failed(cid, node, f"the one-replica MPS pod on {node} did not report: {why}",
                      expected="a cuda-probe document from a one-replica MPS client", observed=why)
    report = seen.report
    pipe = report.env.get("CUDA_MPS_PIPE_DIRECTORY")
    evidence = [f"{seen.where}: CUDA_MPS_PIPE_DIRECTORY={pipe or '(unset)'}",
                f"labels: {f.labels_text()}, nvidia.com/gpu.memory="
                f"{memory_mib if memory_mib is not None else '(absent)'}"]
    evidence += [f"{seen.where}: {k}={v}" for k, v in sorted(report.env.items())
                 if k in ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT") and v is not None]
    if not report.init.ok:
        return failed(cid, node, f"{seen.where} (one MPS replica) could not start CUDA: {report.init}",
                      expected="a CUDA context as an MPS client", observed=str(report.init),
                      evidence=tuple(evidence + [f"{seen.where}: {report.exit_reason}"]))
    if len(report.devices) != 1:
        return failed(cid, node, f"{seen.where} asked one MPS replica and CUDA sees {len(report.devices)} devices",
                      expected="1 GPU", observed=f"{len(report.devices)} devices", evidence=tuple(evidence))
    device = report.devices[0]
    la = device.largest_alloc
    if la is None:
        return not_tested(cid, node, f"the cuda-probe in {seen.where} reports no largest allocation (a probe "
                          "without --measure-alloc): the MPS memory limit shows only by allocating", kind=COULD_NOT_RUN)
    if la.absent_reason is not None:
        return not_tested(cid, node, f"{seen.where} did not measure its largest allocation: {la.absent_reason}",
                          kind=COULD_NOT_RUN)
    if not la.ok:
        return failed(cid, node, f"{seen.where}'s allocations on {device.uuid} failed with another error than "
                      f"out of memory: {la.result}", expected="cudaMalloc succeeding up to the client's limit",
                      observed=str(la.result), evidence=tuple(evidence))
    total = memory_mib << 20 if memory_mib is not None else device.total_memory_bytes
    if total is None:
        return not_tested(cid, node, f"the memory of {device.uuid} is unknown (no nvidia.com/gpu.memory label, "
                          "no CUDA total): nothing to divide into replicas", kind=COULD_NOT_RUN)
    limit = total / replicas
    failed_text = _gib(la.smallest_failed_bytes) if la.smallest_failed_bytes is not None else "none"
    evidence.append(f"{seen.where} on {device.uuid}: largest allocation {_gib(la.largest_ok_bytes)}, smallest "
                    f"failed {failed_text} ({la.steps} steps, resolution {_gib(la.resolution_bytes)}); "
                    + (f"cudaMemGetInfo free {_gib(la.free_bytes)} of {_gib(la.total_bytes)} (it does not "
                       "reflect an MPS limit)" if la.free_bytes is not None and la.total_bytes is not None
                       else "cudaMemGetInfo not read"))
    expected = (f"CUDA_MPS_PIPE_DIRECTORY set and a largest allocation of about {_gib(limit)} (memory "
                f"{_gib(total)} / {replicas} replicas): from {_gib(limit * MPS_LIMIT_UNDER)} to "
                f"{_gib(limit * MPS_LIMIT_OVER)}")
    observed = f"CUDA_MPS_PIPE_DIRECTORY={pipe or '(unset)'}, largest allocation {_gib(la.largest_ok_bytes)}"
    over = la.largest_ok_bytes > limit * MPS_LIMIT_OVER
    if not pipe:
        return failed(cid, node, f"{seen.where} asked one MPS replica on {node} but has no CUDA_MPS_PIPE_DIRECTORY: "
                      "it is no client of the device plugin's MPS control daemon"
                      + (f", and it allocated {_gib(la.largest_ok_bytes)} in one piece (memory / replicas is "
                         f"{_gib(limit)}): clients can starve each other" if over else ""),
                      expected=expected, observed=observed, evidence=tuple(evidence))
    if over:
        return failed(cid, node, f"{seen.where} (one of {replicas} MPS replicas of {device.uuid}) allocated "
                      f"{_gib(la.largest_ok_bytes)} in one piece, more than memory / replicas = {_gib(limit)}: the "
                      "MPS control daemon applies no per-client memory limit, so clients can starve each other",
                      expected=expected, observed=observed, evidence=tuple(evidence))
    if la.smallest_failed_bytes is not None and la.smallest_failed_bytes < limit * MPS_LIMIT_UNDER:
        return failed(cid, node, f"{seen.where} could not allocate {_gib(la.smallest_failed_bytes)} on "
                      f"{device.uuid}, less than {MPS_LIMIT_UNDER:.0%} of memory / replicas = {_gib(limit)}: the MPS "
                      "limit is smaller than the labelled replicas give", expected=expected, observed=observed,
                      evidence=tuple(evidence))
    return passed(cid, node, f"{seen.where} is an MPS client ({pipe}) whose largest allocation on {device.uuid} is "
                  f"{_gib(la.largest_ok_bytes)}, about memory / replicas = {_gib(limit)} (its share of the SMs: "
                  "sharing.mps-thread-limit)", evidence=tuple(evidence))


#: The SMs a client may be seen on beyond ceil(SMs x percentage / 100): the hardware provisions
#: SMs in whole TPCs (2 SMs on Volta and later) and the MPS server rounds the percentage to them,
#: so a few SMs above the exact share are the limit working; at least MPS_SM_SLACK SMs, else
#: MPS_SM_SLACK_FRACTION of the share. A client without a limit runs on every SM, 4 x the share
#: at 4 replicas and 2 x at 2, far beyond it.
MPS_SM_SLACK = 2
MPS_SM_SLACK_FRACTION = 0.10


def mps_sm_bound(multiprocessors: int, replicas: int) -> tuple[int, int, int]:
    """(active thread percentage, the SMs it gives, the most SMs a limited client may be seen on)
    for a device of ``multiprocessors`` SMs shared ``replicas`` ways: the device plugin sets
    100 / replicas (integer division) per client."""
    percentage = 100 // replicas
    share = math.ceil(multiprocessors * percentage / 100)
    return percentage, share, share + max(MPS_SM_SLACK, math.ceil(share * MPS_SM_SLACK_FRACTION))


def evaluate_mps_thread_limit(f: SharingFacts, seen: Sighting) -> Verdict:
    """A pod asking one MPS replica runs its kernels on about 100 / replicas percent of the GPU's
    SMs: the distinct SM ids of the cuda-probe's SM census (``--measure-alloc``) are at most
    ceil(SMs x percentage / 100) plus MPS_SM_SLACK (or MPS_SM_SLACK_FRACTION of that share).
    A pod that did not report or is no MPS client is sharing.mps-client-limits' failure, not
    tested here."""
    cid = "sharing.mps-thread-limit"
    node = f.node
    why = mps_plan(f)
    if why is not None:
        return not_tested(cid, node, why, kind=not_planned_kind(f, mps=True))
    replicas = f.replicas or 1
    if seen.report is None:
        why = seen.failure or "no probe output"
        return not_tested(cid, node, f"the one-replica MPS pod on {node} did not report ({why}): "
                          "sharing.mps-client-limits reports it", kind=COULD_NOT_RUN)
    report = seen.report
    pipe = report.env.get("CUDA_MPS_PIPE_DIRECTORY")
    if not report.init.ok or len(report.devices) != 1 or not pipe:
        what = (f"could not start CUDA ({report.init})" if not report.init.ok
                else f"sees {len(report.devices)} devices" if len(report.devices) != 1
                else "has no CUDA_MPS_PIPE_DIRECTORY (no client of the device plugin's MPS control daemon)")
        return not_tested(cid, node, f"{seen.where} {what}: sharing.mps-client-limits reports it", kind=COULD_NOT_RUN)
    device = report.devices[0]
    so = device.sm_occupancy
    if so is None:
        return not_tested(cid, node, f"the cuda-probe in {seen.where} reports no SM census (a probe without "
                          "--measure-alloc's sm_occupancy): the MPS thread limit shows only in the SMs a kernel uses",
                          kind=COULD_NOT_RUN)
    if so.absent_reason is not None:
        return not_tested(cid, node, f"{seen.where} did not measure the SMs its kernels use: {so.absent_reason}",
                          kind=COULD_NOT_RUN)
    if not so.ok:
        return not_tested(cid, node, f"the SM census kernel in {seen.where} on {device.uuid} did not complete: "
                          f"{so.result}", kind=COULD_NOT_RUN)
    if so.distinct_sms is None:
        return not_tested(cid, node, f"the SM census in {seen.where} on {device.uuid} counted no distinct SMs "
                          "(its kernel completed): nothing to compare with the share", kind=COULD_NOT_RUN)
    sms = so.multiprocessors
    if not sms:
        return not_tested(cid, node, f"the multiprocessor count of {device.uuid} is unknown: nothing to divide "
                          "into replicas", kind=COULD_NOT_RUN)
    percentage, share, bound = mps_sm_bound(sms, replicas)
    env_pct = report.env.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")
    evidence = (f"{seen.where}: CUDA_MPS_PIPE_DIRECTORY={pipe}"
                + (f", CUDA_MPS_ACTIVE_THREAD_PERCENTAGE={env_pct} (only lowers the daemon's)" if env_pct else ""),
                f"labels: {f.labels_text()}",
                f"{seen.where} on {device.uuid}: {so.blocks} blocks ran on {so.distinct_sms} distinct SMs of "
                f"multiProcessorCount {sms} in {so.kernel_ms if so.kernel_ms is not None else '?'} ms")
    if bound >= sms:
        return not_tested(cid, node, f"{percentage}% of {sms} SMs is {share} SMs: with the allowance for whole TPCs "
                          f"(up to {bound}) a limited client cannot be told from one on every SM", kind=COULD_NOT_RUN)
    expected = (f"at most {bound} distinct SMs: {percentage}% (100 / {replicas} replicas) of {sms} SMs is {share}, "
                f"plus {bound - share} for whole TPCs")
    observed = f"{so.distinct_sms} distinct SMs of {sms}"
    if so.distinct_sms > bound:
        every = "every one" if so.distinct_sms >= sms else f"{so.distinct_sms}"
        return failed(cid, node, f"{seen.where} (one of {replicas} MPS replicas of {device.uuid}) ran its kernel on "
                      f"{every} of the GPU's {sms} SMs, more than {percentage}% (about {share}, at most {bound}): the "
                      "MPS daemon applies no per-client thread limit, so one client's kernels can take the SMs of "
                      "every other replica", expected=expected, observed=observed, evidence=evidence)
    return passed(cid, node, f"{seen.where} (one of {replicas} MPS replicas of {device.uuid}) ran its kernel on "
                  f"{so.distinct_sms} of {sms} SMs, within {percentage}% (100 / replicas: {share} SMs, at most "
                  f"{bound})", evidence=evidence)


def evaluate_rejects_multi_replica_request(f: SharingFacts, outcome: PodOutcome | None) -> Verdict:
    """A pod whose container asks two MPS replicas is rejected at admission with the device
    plugin's message (UnexpectedAdmissionError; the pod fails without running)."""
    cid = "sharing.rejects-multi-replica-request"
    node = f.node
    why = mps_plan(f, pods=2)
    if why is not None:
        return not_tested(cid, node, why, kind=not_planned_kind(f, mps=True))
    if outcome is None:
        return not_tested(cid, node, f"no two-replica pod was launched on {node}", kind=COULD_NOT_RUN)
    where = f"pod {outcome.name}"
    texts = [e.message for e in outcome.events] + ([outcome.message] if outcome.message else [])  # the event first
    refusal = next((t for t in texts if PLUGIN_REFUSAL in t), None)
    resource = f.resource  # mps_plan made sure there is one
    expected = (f"rejected at admission: UnexpectedAdmissionError ... request for '{resource}: 2' too large: "
                f"{PLUGIN_REFUSAL}")
    observed = " ".join(p for p in (outcome.phase, outcome.reason or "", outcome.message or "") if p)
    evidence = tuple(f"{where} event {e.reason}: {e.message}" for e in outcome.events if e.reason != "Scheduled")
    ran = outcome.phase in ("Running", "Succeeded") or any(c.started for c in outcome.containers if not c.init)
    if refusal is not None and outcome.phase == "Failed" and not ran:
        return passed(cid, node, f"{where} asking 2 MPS replicas of {resource} was refused: {refusal}",
                      evidence=evidence)
    if ran:  # a refusal seen before it ran (an earlier admission attempt) is no refusal
        return failed(cid, node, f"{where} asking 2 MPS replicas of {resource} on {node} was admitted and ran: the "
                      "device plugin does not refuse more than one MPS replica per container", expected=expected,
                      observed=observed, evidence=evidence)
    if outcome.phase == "Pending" or outcome.unschedulable:
        return not_tested(cid, node, f"{where} asking 2 replicas of {resource} did not reach {node}'s kubelet "
                          f"({observed}): the refusal was not exercised", kind=COULD_NOT_RUN)
    return failed(cid, node, f"{where} asking 2 MPS replicas of {resource} ended {observed}, not with the device "
                  f"plugin's refusal", expected=expected, observed=observed, evidence=evidence)
