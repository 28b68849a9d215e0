"""The cluster against its declared profile (``--expect FILE``, gpuconf/expect.py).

Three checks: every declared pool has its nodes (``expect.pool-populated``), every GPU node
belongs to a declared pool (``expect.node-in-a-pool``), and every node carries what its pool
declares (``expect.node-matches-pool``). Without an --expect file they are not tested.

Each declared field is compared with every view of the node that shows it: GFD's labels, the
device plugin's capacity, DRA ResourceSlices, and the whole-node cuda-probe when one ran. A view
that cannot speak to a field is left out rather than guessed (under MIG, ``nvidia.com/gpu.count``
counts MIG devices, not GPUs); a field no view shows is reported as not observed, never passed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpuconf.checks.inventory import DriverPolicy, NodeView, gpu_resources, label_cuda_version, label_driver_version
from gpuconf.compat.versions import VersionError, parse_cuda, parse_driver
from gpuconf.expect import ExpectPool, ExpectProfile, MigCounts, mig_text
from gpuconf.nodes.facts import Source
from gpuconf.outcomes import COULD_NOT_RUN, NOT_APPLICABLE, NOT_SELECTED
from gpuconf.probes.cuda import CudaProbeReport
from gpuconf.verdict import Outcome, Verdict, failed, not_tested, passed

__all__ = [
    "FieldCheck",
    "NO_EXPECT",
    "Observation",
    "combined",
    "compare_node",
    "declared_driver_policy",
    "declared_gpu_count",
    "evaluate_node_in_a_pool",
    "evaluate_node_matches_pool",
    "evaluate_pool_populated",
    "selector_labels",
]

POPULATED, IN_A_POOL, MATCHES = "expect.pool-populated", "expect.node-in-a-pool", "expect.node-matches-pool"

#: GFD's label for each fact the node view can also read from a ResourceSlice (gpuconf.nodes.facts).
_FACT_LABELS = (("product", "nvidia.com/gpu.product"), ("gpus", "nvidia.com/gpu.count"),
                ("memory", "nvidia.com/gpu.memory"))


def selector_labels(node: NodeView) -> dict[str, str]:
    """The labels a pool selector is matched against: the node's own, and for a fact GFD does not
    label there (a GPUCluster-mode node, no GFD) the DRA driver's attribute in GFD's spelling
    (productName with spaces as dashes, the GPUs of type gpu, memory in MiB), so a pool declared by
    ``nvidia.com/gpu.product`` still finds its GFD-less nodes. A label the node carries always wins."""
    out = dict(node.labels)
    for fact, label in _FACT_LABELS:
        value = getattr(node.facts, fact)
        if label not in out and value.value is not None and value.source is Source.SLICE:
            out[label] = value.value.replace(" ", "-") if fact == "product" else value.value
    return out
NO_EXPECT = "no --expect file given"
MIG_PREFIX = "nvidia.com/mig-"


def declared_driver_policy(profile: ExpectProfile | None, nodes: Sequence[NodeView]) -> dict[str, DriverPolicy]:
    """Per node, the driver version or branch its pool declares (for driver.version-uniform-in-pool)."""
    out: dict[str, DriverPolicy] = {}
    for node in nodes:
        pool = profile.pool_for(selector_labels(node)) if profile is not None else None
        if pool is not None and (pool.driver.version is not None or pool.driver.branch is not None):
            out[node.name] = DriverPolicy(pool.name, pool.driver.version, pool.driver.branch)
    return out


def declared_gpu_count(profile: ExpectProfile | None, node: NodeView) -> int | None:
    """The per-node GPU count the node's pool declares (for inventory.gpu-count-matches-expected)."""
    pool = profile.pool_for(selector_labels(node)) if profile is not None else None
    return pool.gpu.count if pool is not None else None


# --- the pools ----------------------------------------------------------------------------------


def evaluate_pool_populated(profile: ExpectProfile | None, nodes: Sequence[NodeView]) -> list[Verdict]:
    """One verdict per declared pool (node None): its GPU nodes against its declared count."""
    if profile is None:
        return [not_tested(POPULATED, None, NO_EXPECT, kind=NOT_SELECTED)]
    members: dict[str, list[str]] = {p.name: [] for p in profile.pools}
    for n in nodes:
        pool = profile.pool_for(selector_labels(n))
        if pool is not None:
            members[pool.name].append(n.name)
    out = []
    for pool in profile.pools:
        names = members[pool.name]
        listed = ", ".join(names) or "none"
        if pool.nodes.admits(len(names)):
            out.append(passed(POPULATED, None, f"pool {pool.name!r}: {len(names)} GPU nodes ({listed}), "
                                               f"{pool.nodes} declared", evidence=(f"selector {pool.selector_text}",),
                              facts={"pool": pool.name, "nodes": names}))
            continue
        near = [_near_miss(pool, n) for n in nodes if profile.pool_for(selector_labels(n)) is None]
        out.append(failed(POPULATED, None, f"pool {pool.name!r} has {len(names)} GPU nodes; {pool.nodes} declared",
                          expected=f"{pool.nodes} GPU nodes labelled {pool.selector_text}",
                          observed=f"{len(names)} ({listed})",
                          evidence=(f"selector {pool.selector_text}", *[m for m in near if m][:5]),
                          facts={"pool": pool.name, "nodes": names}))
    return out


def _near_miss(pool: ExpectPool, node: NodeView) -> str | None:
    """A node outside every pool that misses this pool's selector by one label: likely a lost member."""
    labels = selector_labels(node)
    wrong = [(k, v) for k, v in pool.selector if labels.get(k) != v]
    if len(wrong) != 1:
        return None
    key, want = wrong[0]
    have = labels.get(key)
    return f"{node.name} has {key}={have}, not {want}" if have is not None else f"{node.name} lacks {key}={want}"


_RANK = {Outcome.NOT_TESTED: 0, Outcome.PASS: 1, Outcome.DEGRADED: 2, Outcome.FAIL: 3}


def combined(verdicts: Sequence[Verdict]) -> Verdict:
    """Several verdicts of one check (one per pool) as one: the worst outcome, the others as evidence."""
    worst = max(verdicts, key=lambda v: _RANK[v.outcome])
    if len(verdicts) == 1:
        return worst
    bad = [v for v in verdicts if v.outcome is worst.outcome]
    summary = "; ".join(v.summary for v in bad)
    evidence = tuple(f"{v.outcome.value}: {v.summary}" for v in verdicts if v.outcome is not worst.outcome)
    joined = [v for v in bad if v.expected is not None]
    return Verdict(worst.check, None, worst.outcome, summary,
                   expected="; ".join(str(v.expected) for v in joined) if joined else None,
                   observed="; ".join(str(v.observed) for v in joined) if joined else None,
                   evidence=evidence + tuple(e for v in bad for e in v.evidence),
                   facts={"verdicts": [v.facts for v in verdicts]})


def evaluate_node_in_a_pool(profile: ExpectProfile | None, node: NodeView) -> Verdict:
    if profile is None:
        return not_tested(IN_A_POOL, node.name, NO_EXPECT, kind=NOT_SELECTED)
    pool = profile.pool_for(selector_labels(node))
    if pool is not None:
        return passed(IN_A_POOL, node.name, f"in pool {pool.name!r} ({pool.selector_text})", facts={"pool": pool.name})
    keys = list(dict.fromkeys(k for p in profile.pools for k, _ in p.selector))
    labels = selector_labels(node)
    seen = ", ".join(f"{k}={labels[k]}" if k in labels else f"{k} absent" for k in keys)
    return failed(IN_A_POOL, node.name, "the GPU node matches no pool the --expect file declares",
                  expected="one of: " + "; ".join(f"{p.name} ({p.selector_text})" for p in profile.pools),
                  observed=seen)


# --- a node against its pool ----------------------------------------------------------------------


@dataclass(frozen=True)
class Observation:
    """One view of a field on the node: where it comes from, what it says, whether that agrees, and
    whether it is judged (a label or slice attribute is not, beside the probe's own reading of the
    field: the most direct source decides, and a label that disagrees with the hardware is
    labels.gfd-matches-hardware's finding, not the pool's)."""

    source: str
    value: str
    agrees: bool
    judged: bool = True


@dataclass(frozen=True)
class FieldCheck:
    field: str
    declared: str
    observations: tuple[Observation, ...]
    unobserved: str | None = None  # why no view shows the field (observations empty)

    @property
    def mismatches(self) -> tuple[Observation, ...]:
        return tuple(o for o in self.observations if not o.agrees and o.judged)

    def line(self) -> str:
        """``field: declared X, observed Y (source), Z (other sources)``, or ``..., not observed (why)``."""
        if not self.observations:
            return f"{self.field}: declared {self.declared}, not observed ({self.unobserved})"
        values: dict[str, list[str]] = {}
        for o in self.observations:
            values.setdefault(o.value, []).append(o.source if o.judged or o.agrees else
                                                  f"{o.source}, not judged beside the probe's reading")
        seen = ", ".join(f"{v} ({'; '.join(sources)})" for v, sources in values.items())
        return f"{self.field}: declared {self.declared}, observed {seen}"


def _same_driver(a: str, b: str) -> bool:
    try:
        return parse_driver(a) == parse_driver(b)
    except VersionError:
        return False


def _same_cuda(a: str, b: str) -> bool:
    try:
        return parse_cuda(a).major_minor == parse_cuda(b).major_minor
    except VersionError:
        return False


def _branch_of(version: str) -> str:
    try:
        return str(parse_driver(version).branch)
    except VersionError:
        return version


class _Facts:
    """The views of one node that the field comparisons draw on."""

    def __init__(self, node: NodeView, probe: CudaProbeReport | None, probe_requested: int | None) -> None:
        self.node, self.probe = node, probe
        self.capacity = gpu_resources(node.capacity)
        self.product_label = node.label("gpu.product")
        self.mig_resources = {k.removeprefix(MIG_PREFIX): v for k, v in self.capacity.items()
                              if k.startswith(MIG_PREFIX)}
        self.mig_single = "-MIG-" in (self.product_label or "")
        # GFD labels mig.strategy with the device plugin's configured strategy on every node, MIG or
        # not (k8s-device-plugin internal/lm/mig-strategy.go): the label alone says nothing about MIG.
        self.mig = bool(self.mig_resources) or self.mig_single or any(
            k.startswith(MIG_PREFIX) and k.endswith(".count") for k in node.labels)
        self.gpu_total = self.capacity.get("nvidia.com/gpu", 0) + self.capacity.get("nvidia.com/gpu.shared", 0)
        self.whole_node = probe_requested is None or probe_requested == self.gpu_total

    def label(self, key: str) -> str | None:
        return self.node.label(key)

    def int_label(self, key: str) -> int | None:
        value = self.node.label(key)
        return int(value) if value is not None and value.isdigit() else None

    def probe_nvml_cuda(self) -> str | None:
        value = (self.probe.raw.get("nvml") or {}).get("cuda_driver_version") if self.probe else None
        return f"{value // 1000}.{(value % 1000) // 10}" if isinstance(value, int) and value >= 1000 else None

    def mig_totals(self) -> list[tuple[str, dict[str, int]]]:
        """MIG instances on the node by profile, per view."""
        out: list[tuple[str, dict[str, int]]] = []
        if self.mig_resources:
            out.append(("device plugin capacity nvidia.com/mig-*", dict(self.mig_resources)))
        counted = {k[len(MIG_PREFIX):-len(".count")]: int(v) for k, v in self.node.labels.items()
                   if k.startswith(MIG_PREFIX) and k.endswith(".count") and v.isdigit()}
        if counted:
            out.append(("labels nvidia.com/mig-*.count", counted))
        if self.mig_single and self.product_label:
            profile = self.product_label.split("-MIG-", 1)[1].removesuffix("-SHARED")
            if "nvidia.com/gpu" in self.capacity:
                out.append(("device plugin capacity nvidia.com/gpu (MIG single)",
                            {profile: self.capacity["nvidia.com/gpu"]}))
            count = self.int_label("gpu.count")
            if count is not None:
                out.append(("labels nvidia.com/gpu.product and gpu.count (MIG single)", {profile: count}))
        return out


def _gpus_per_layout(totals: dict[str, int], layout: MigCounts) -> int | None:
    """How many GPUs carry ``layout`` if ``totals`` is a whole number of copies of it, else None."""
    per_gpu = dict(layout)
    if set(totals) != set(per_gpu) or any(totals[p] % n for p, n in per_gpu.items()):
        return None
    copies = {totals[p] // n for p, n in per_gpu.items()}
    return copies.pop() if len(copies) == 1 else None


_Compare = Callable[[str], bool]


def _direct(source: str) -> bool:
    """A view the probe read on the node itself (NVML or CUDA in a pod given its GPUs)."""
    return "probe" in source


def _reported(source: str) -> bool:
    """A view that reports what another component read (GFD's labels, the DRA driver's attributes)."""
    return source.startswith(("label", "ResourceSlice"))


def _field(name: str, declared: str, views: list[tuple[str, str | None]], same: _Compare,
           unobserved: str) -> FieldCheck:
    """The field's observations; where the probe read the field, a label or slice attribute that says
    otherwise is shown but not judged (the most direct source decides)."""
    seen = [(source, value) for source, value in views if value is not None]
    direct = {value for source, value in seen if _direct(source)}
    obs = tuple(Observation(source, value, same(value), not (direct and _reported(source) and value not in direct))
                for source, value in seen)
    return FieldCheck(name, declared, obs, None if obs else unobserved)


def _product_views(f: _Facts) -> list[tuple[str, str | None]]:
    label = f.product_label.removesuffix("-SHARED").split("-MIG-")[0] if f.product_label else None
    views: list[tuple[str, str | None]] = [("label nvidia.com/gpu.product", label)]
    views += _slice_view(f, "product", lambda v: v.replace(" ", "-"))
    names = dict.fromkeys(d.name.split(" MIG ")[0].replace(" ", "-") for d in f.probe.devices if d.name) \
        if f.probe else {}
    views += [("CUDA device name in the probe", n) for n in names]
    return views


def _count_views(f: _Facts, pool: ExpectPool) -> list[tuple[str, str | None]]:
    if f.mig:
        if not pool.mig.layout:
            return []
        out: list[tuple[str, str | None]] = []
        for source, totals in f.mig_totals():
            gpus = _gpus_per_layout(totals, pool.mig.layout)
            out.append((f"{source}, per the declared layout",
                        str(gpus) if gpus is not None else f"not a whole number ({mig_text(totals)})"))
        return out
    replicas = pool.sharing.effective_replicas or f.int_label("gpu.replicas") or 1
    views: list[tuple[str, str | None]] = [("label nvidia.com/gpu.count", f.label("gpu.count"))]
    if replicas == 1 and f.gpu_total:  # shared GPUs: capacity counts replicas (sharing.replicas checks it)
        views.append(("device plugin capacity", str(f.gpu_total)))
    if f.node.dra_devices:
        views.append(("DRA ResourceSlice devices", str(f.node.dra_devices)))
    if f.probe is not None and f.probe.init.ok and f.whole_node and replicas == 1:
        views.append(("CUDA devices in the whole-node probe", str(len(f.probe.devices))))
    return views


def _memory_views(f: _Facts) -> list[tuple[str, str | None]]:
    views: list[tuple[str, str | None]] = []
    if not f.mig_single:  # under MIG single GFD labels the instance's memory
        views.append(("label nvidia.com/gpu.memory", f.label("gpu.memory")))
        views += _slice_view(f, "memory")
    if f.probe is not None:
        sizes = dict.fromkeys(str(d.total_memory_bytes >> 20) for d in f.probe.devices
                              if not d.mig and d.total_memory_bytes is not None)
        views += [("CUDA device memory in the probe", s) for s in sizes]
    return views


def _driver_views(f: _Facts) -> list[tuple[str, str | None]]:
    label, source = label_driver_version(f.node.labels)
    return [(f"label {source}", label), *_slice_view(f, "driver"),
            ("NVML in the probe", f.probe.nvml_driver_version if f.probe else None)]


def _cuda_views(f: _Facts) -> list[tuple[str, str | None]]:
    # GFD's cuda.runtime-version is the CUDA the host driver supports (cuDriverGetVersion); the
    # probe's own cudaDriverGetVersion would report a compat libcuda, so NVML's figure is used.
    source = ("label nvidia.com/cuda.runtime-version.full" if f.label("cuda.runtime-version.full")
              else "labels nvidia.com/cuda.runtime.major/minor")
    return [(source, label_cuda_version(f.node.labels)), *_slice_view(f, "cuda"),
            ("NVML in the probe", f.probe_nvml_cuda())]


def _slice_view(f: _Facts, fact: str, spell: Callable[[str], str] = str) -> list[tuple[str, str | None]]:
    """The DRA driver's attribute for ``fact`` as one more view, where GFD does not label it (a view
    read from a slice beside a GFD label would only repeat labels.agree-with-dra's comparison)."""
    value = getattr(f.node.facts, fact)
    if value.value is None or value.source is not Source.SLICE:
        return []
    return [(f"{value.source.value} {value.key}", spell(value.value))]


def _mig_strategy_views(f: _Facts) -> list[tuple[str, str | None]]:
    """GFD's label, and the plugin's resources when MIG is in use. With no GPU MIG-enabled, none,
    single and mixed all advertise whole GPUs and the label is only the plugin's configured strategy
    (the GPU Operator's default single, on any GPU): see :func:`_mig_strategy_agrees`."""
    label = f.label("mig.strategy")
    if not f.mig:
        return [(f"label nvidia.com/mig.strategy (no GPU MIG-enabled{', no label' if label is None else ''})",
                 label or "none")]
    advertised = "mixed" if f.mig_resources else "single" if f.mig_single else None
    return [("label nvidia.com/mig.strategy", label), ("device plugin resources", advertised)]


def _mig_strategy_agrees(f: _Facts, declared: str) -> Callable[[str], bool]:
    """A node without MIG meets a declared ``none`` whatever strategy the plugin is configured with
    (no MIG enabled, no MIG layout to check); otherwise the strategy must be the declared one."""
    return lambda v: v == declared or (declared == "none" and not f.mig)


def _replica_views(f: _Facts, pool: ExpectPool) -> list[tuple[str, str | None]]:
    """GFD's replicas label, and the capacity per GPU. Capacity is replicas x GPUs, so it is divided
    by the GPUs GFD found (else the declared count): a GPU missing from GFD's count is then
    gpu.count's finding, not a replica problem. Without sharing, capacity speaks to replicas only
    when it exceeds the GPUs (fewer is gpu.count's finding)."""
    views: list[tuple[str, str | None]] = [("label nvidia.com/gpu.replicas", f.label("gpu.replicas"))]
    gpus = f.int_label("gpu.count") or pool.gpu.count
    shared = (pool.sharing.effective_replicas or 1) > 1
    if f.gpu_total and gpus and not f.mig and (shared or f.gpu_total > gpus):
        per_gpu = str(f.gpu_total // gpus) if f.gpu_total % gpus == 0 else f"{f.gpu_total}/{gpus}"
        views.append((f"device plugin capacity {f.gpu_total} over {gpus} GPUs", per_gpu))
    return views


def compare_node(pool: ExpectPool, node: NodeView, *, probe: CudaProbeReport | None = None,
                 probe_requested: int | None = None, runtime_mode: str | None = None) -> list[FieldCheck]:
    """Every field ``pool`` declares, against every view of ``node`` that shows it."""
    f = _Facts(node, probe, probe_requested)
    out: list[FieldCheck] = []
    gpu, drv = pool.gpu, pool.driver
    if gpu.product is not None:
        out.append(_field("gpu.product", gpu.product, _product_views(f), lambda v: v == gpu.product,
                          "no nvidia.com/gpu.product label and no probe"))
    if gpu.count is not None:
        why = ("MIG: labels and resources count MIG devices; declare mig.layout to derive the GPUs"
               if f.mig else "no nvidia.com/gpu.count label, GPU resource, DRA device or whole-node probe")
        out.append(_field("gpu.count", str(gpu.count), _count_views(f, pool), lambda v: v == str(gpu.count), why))
    if gpu.memory_mib is not None:
        out.append(_field("gpu.memory_mib", str(gpu.memory_mib), _memory_views(f), lambda v: v == str(gpu.memory_mib),
                          "MIG single labels the instance's memory, and no probe saw a whole GPU"
                          if f.mig_single else "no nvidia.com/gpu.memory label and no probe"))
    if drv.version is not None:
        version = drv.version
        out.append(_field("driver.version", version, _driver_views(f), lambda v: _same_driver(v, version),
                          "no nvidia.com/cuda.driver-version label and no probe"))
    if drv.branch is not None:
        branch = str(drv.branch)
        out.append(_field("driver.branch", branch, [(s, _branch_of(v) if v else None) for s, v in _driver_views(f)],
                          lambda v: v == branch, "no nvidia.com/cuda.driver-version label and no probe"))
    if pool.cuda.driver_version is not None:
        cuda = pool.cuda.driver_version
        out.append(_field("cuda.driver_version", cuda, _cuda_views(f), lambda v: _same_cuda(v, cuda),
                          "no nvidia.com/cuda.runtime-version label and no NVML figure from a probe"))
    out += _mig_fields(pool, f)
    sharing = pool.sharing
    if sharing.strategy is not None:
        strategy = sharing.strategy
        out.append(_field("sharing.strategy", strategy, [("label nvidia.com/gpu.sharing-strategy",
                                                          f.label("gpu.sharing-strategy"))],
                          lambda v: v == strategy, "no nvidia.com/gpu.sharing-strategy label"))
    replicas = sharing.effective_replicas
    if replicas is not None:
        shown = str(replicas) if sharing.replicas is not None else "1 (strategy none)"
        out.append(_field("sharing.replicas", shown, _replica_views(f, pool), lambda v: v == str(replicas),
                          "no nvidia.com/gpu.replicas label, and no GPU resource to divide"))
    if pool.runtime.mode is not None:
        mode = pool.runtime.mode
        out.append(_field("runtime.mode", mode, [("canary pod", runtime_mode)], lambda v: v == mode,
                          "no label shows it: a canary pod with NVIDIA_REQUIRE_CUDA=cuda>=99.0 does, and none ran"))
    if pool.nccl.busbw_floor_gbps is not None:
        out.append(FieldCheck("nccl.busbw_floor_gbps", f"{pool.nccl.busbw_floor_gbps:g}", (),
                              "bus bandwidth is measured by the NCCL suite, not here"))
    return out


def _mig_fields(pool: ExpectPool, f: _Facts) -> list[FieldCheck]:
    out: list[FieldCheck] = []
    mig = pool.mig
    if mig.strategy is not None:
        strategy = mig.strategy
        out.append(_field("mig.strategy", strategy, _mig_strategy_views(f), _mig_strategy_agrees(f, strategy),
                          "no nvidia.com/mig.strategy label and no GPU resource"))
    if mig.layout:
        gpus = pool.gpu.count
        want = {p: n * gpus for p, n in mig.layout} if gpus is not None else None
        declared = f"{mig_text(mig.layout)} per GPU" + (f" = {mig_text(want)} on {gpus} GPUs" if want else "")

        def agrees(totals: dict[str, int]) -> bool:
            return totals == want if want is not None else _gpus_per_layout(totals, mig.layout) is not None

        views = f.mig_totals()
        obs = tuple(Observation(source, mig_text(totals), agrees(totals)) for source, totals in views)
        if not obs and f.gpu_total:
            obs = (Observation("device plugin resources", f"no MIG devices ({f.gpu_total} whole GPUs)", False),)
        out.append(FieldCheck("mig.layout", declared, obs, None if obs else "no MIG resources or labels on the node"))
    return out


def evaluate_node_matches_pool(profile: ExpectProfile | None, node: NodeView, *, probe: CudaProbeReport | None = None,
                               probe_requested: int | None = None, runtime_mode: str | None = None) -> Verdict:
    """The node against every field its pool declares. ``probe`` is the whole-node cuda-probe report
    (``probe_requested``: the GPUs it asked for); ``runtime_mode`` the mode a canary pod showed."""
    if profile is None:
        return not_tested(MATCHES, node.name, NO_EXPECT, kind=NOT_SELECTED)
    pool = profile.pool_for(selector_labels(node))
    if pool is None:
        return not_tested(MATCHES, node.name, "the node matches no declared pool (expect.node-in-a-pool reports it)",
                          kind=COULD_NOT_RUN)
    fields = compare_node(pool, node, probe=probe, probe_requested=probe_requested, runtime_mode=runtime_mode)
    facts: dict[str, Any] = {"pool": pool.name, "fields": {
        c.field: {"declared": c.declared, "observed": [o.__dict__ for o in c.observations], "unobserved": c.unobserved}
        for c in fields}}
    lines = tuple(c.line() for c in fields)
    if not fields:
        return not_tested(MATCHES, node.name, f"pool {pool.name!r} declares nothing beyond its selector",
                          kind=NOT_APPLICABLE)
    bad = [c for c in fields if c.mismatches]
    unseen = [c.field for c in fields if not c.observations]
    if bad:
        return failed(MATCHES, node.name, f"differs from pool {pool.name!r}: " + "; ".join(c.line() for c in bad),
                      expected="; ".join(f"{c.field}={c.declared}" for c in bad),
                      observed="; ".join(f"{c.field}=" + ", ".join(dict.fromkeys(o.value for o in c.mismatches))
                                         for c in bad),
                      evidence=lines, facts=facts)
    if len(unseen) == len(fields):
        return Verdict(MATCHES, node.name, Outcome.NOT_TESTED,
                       f"none of the fields pool {pool.name!r} declares can be observed on this node: "
                       + "; ".join(lines), evidence=lines, facts=facts, kind=COULD_NOT_RUN)
    summary = f"matches pool {pool.name!r} on {len(fields) - len(unseen)} declared fields"
    if unseen:
        summary += f"; not observed: {', '.join(unseen)}"
    return passed(MATCHES, node.name, summary, evidence=lines, facts=facts,
                  not_judged=tuple(f"{field}: not observed on this node" for field in unseen))
