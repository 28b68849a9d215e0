"""Sharing checks (time-slicing and MPS): a node whose device plugin shares each GPU N ways
advertises N x its GPUs, labels what it does, and runs more pods than it has GPUs at once.

GFD labels the sharing it reads from the device plugin's config (``nvidia.com/gpu.replicas``,
``nvidia.com/gpu.sharing-strategy``, the product's ``-SHARED`` suffix); the device plugin
advertises what it really runs with (capacity = GPUs x replicas). A plugin that did not reload a
changed config advertises the old count under the new labels (NVIDIA/gpu-operator#1144): the
replicas check compares the two, and both with the ``--expect`` pool's declaration.

MPS per-client limits (pinned device memory, active thread percentage) are not checked: the
cuda-probe does not report them, so there is nothing observed to hold them against.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuconf.checks.isolation import Sighting
from gpuconf.expect import SharingSpec
from gpuconf.verdict import Verdict, failed, not_tested, passed

__all__ = [
    "SHARED_RESOURCES",
    "Run",
    "SharingFacts",
    "evaluate_oversubscription_runs",
    "evaluate_product_label_shared",
    "evaluate_replicas_match_config",
    "in_scope",
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
                                                           or (declared.replicas or 0) > 1))


def _not_shared(cid: str, f: SharingFacts) -> Verdict:
    return not_tested(cid, f.node, f"{f.node} does not share its GPUs ({f.labels_text()})")


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
    if f.strategy in _STRATEGIES and (f.replicas or 0) <= 1:
        problems.append((f"GFD labels sharing strategy {f.strategy} with nvidia.com/gpu.replicas="
                         f"{f.replicas if f.replicas is not None else '(absent)'}",
                         "replicas > 1 with a sharing strategy", f.labels_text()))
    # GFD before v0.15 writes no sharing-strategy label: only a present one can contradict replicas.
    if (f.replicas or 0) > 1 and f.strategy is not None and f.strategy not in _STRATEGIES:
        problems.append((f"GFD labels {f.replicas} replicas with sharing strategy {f.strategy or '(absent)'}",
                         "sharing-strategy time-slicing or mps with replicas > 1", f.labels_text()))
    if declared is not None:
        problems += _declaration_problems(f, declared, pool)
    problems += _capacity_problems(f, physical, declared)
    if not problems:
        per = f.replicas if f.labelled_shared else declared.effective_replicas if declared else None
        gpus = next(iter(physical.values()), None)
        said = f" and as --expect pool {pool} declares" if declared is not None else ""
        if gpus is None:
            return not_tested(cid, f.node, f"the number of physical GPUs on {f.node} is unknown (no "
                              "nvidia.com/gpu.count label, no whole-node probe), so its capacity cannot be divided "
                              "into replicas")
        return passed(cid, f.node, f"{f.resource} {f.capacity.get(f.resource or '', 0)} = {gpus} GPUs x {per} "
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
    replicas = f.replicas if f.labelled_shared and (f.replicas or 0) > 1 else (
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
    if not f.labelled_shared or (f.replicas or 0) <= 1:
        return _not_shared(cid, f)
    if not f.product:
        return not_tested(cid, f.node, f"{f.node} has no nvidia.com/gpu.product label "
                          "(labels.gfd-matches-hardware reports it)")
    resource = f.resource
    evidence = (f"labels: {f.labels_text()}, nvidia.com/gpu.product={f.product}", f"advertised: {f.advertised_text()}")
    if resource is None:
        return not_tested(cid, f.node, f"{f.node} advertises {f.advertised_text()}: whether GFD appends -SHARED "
                          "depends on the device plugin's rename setting, which the cluster does not expose "
                          "when the resource is renamed to another name")
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


def pod_name(node: str, index: int) -> str:
    """``share-<node>-<index>``, cut and made unique by a hash of the node name when too long."""
    name = f"share-{node}-{index}"
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(node.encode()).hexdigest()[:10]
    tail = f"-{digest}-{index}"
    return f"share-{node}"[:_MAX_NAME - len(tail)].rstrip(".-") + tail


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
    """Whether every pod held its GPU at one moment (times have one-second resolution): True when
    the windows surely share a moment, False when two surely do not, else None."""
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
    same UUID (the pigeonhole bound; a pod seeing a GPU the node does not have breaks it)."""
    cid = "sharing.oversubscription-runs"
    if not runs:
        return not_tested(cid, node, f"no oversubscription pod was planned on {node}")
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
    together = _together(runs)
    if together is False:
        return not_tested(cid, node, f"the {count} pods did not all hold their GPUs at the same time, so sharing "
                          "was not exercised (each ran and verified its kernel)")
    when = "held their GPUs at the same time" if together else "were launched at once"
    shared = ", ".join(f"{u} x{n}" for u, n in sorted(distinct.items()) if n > 1)
    return passed(cid, node, f"{count} pods on {physical} GPUs ({strategy}, {replicas} replicas) {when}; each "
                  f"verified its kernel on one of the node's GPUs; shared: {shared}", evidence=tuple(evidence))
