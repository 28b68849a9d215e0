"""The declared cluster profile (``--expect FILE``): what the cluster should be, pool by pool.

A platform team writes down what it bought and configured -- which nodes form a pool (a label
selector), how many there are, and what every node of the pool carries: GPU product, count and
memory as GPU Feature Discovery labels them, driver version or branch, the driver's native CUDA,
MIG strategy and layout, sharing, the container runtime's mode, an NCCL bandwidth floor. The
``expect.*`` checks (gpuconf/checks/expect.py) then compare the cluster with the declaration
instead of with itself (docs/architecture.md, principle 5).

The file is YAML validated against ``schemas/expect.schema.json``; :func:`load_expect` adds the
rules a schema cannot express and reports every problem as one :class:`ExpectError` line,
``<file>:<line>:<col>: <field>: <problem>``.

Pools and selectors: a node belongs to the pool whose selector (labels that must all match)
it matches. Two selectors that could match one node are accepted only when one is a strict
subset of the other -- the node then belongs to the more specific pool (the one with more
labels), so a general ``nvidia.com/gpu.product`` pool can carve out a special rack by adding a
label. Any other overlap (equal selectors, or two selectors on different labels that a node
could carry both of) is an error at load time: which pool a node belongs to is never a guess.
Selectors match labels exactly, as a Kubernetes nodeSelector does: a time-sliced node's product
label carries GFD's ``-SHARED`` suffix, so its pool selects ``Tesla-T4-SHARED`` while its
``gpu.product`` declares the GPU itself, ``Tesla-T4``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, cast

from gpuconf.compat import tables
from gpuconf.compat.versions import parse_cuda, parse_driver
from gpuconf.yamlschema import Document, DocumentError, FieldPath, read, schema, validate

__all__ = [
    "CudaSpec",
    "DriverSpec",
    "ExpectError",
    "ExpectPool",
    "ExpectProfile",
    "GpuSpec",
    "MigSpec",
    "NcclSpec",
    "NodeCount",
    "PcieSpec",
    "RuntimeSpec",
    "SharingSpec",
    "load_expect",
]


class ExpectError(DocumentError):
    """An ``--expect`` file that cannot be used: ``<file>:<line>:<col>: <field>: <problem>``, or
    ``<file>: cannot read: <why>``."""


# --- the declaration ------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeCount:
    """How many GPU nodes a pool has: exactly ``exact``, or at least ``min``."""

    exact: int | None = None
    min: int = 1  # an undeclared count still means the pool exists

    def admits(self, count: int) -> bool:
        return count == self.exact if self.exact is not None else count >= self.min

    def __str__(self) -> str:
        return f"exactly {self.exact}" if self.exact is not None else f"at least {self.min}"


@dataclass(frozen=True)
class GpuSpec:
    product: str | None = None  # as GFD's nvidia.com/gpu.product labels it, without -SHARED or -MIG-...
    count: int | None = None  # physical GPUs per node
    memory_mib: int | None = None  # per GPU, as nvidia.com/gpu.memory labels it
    #: the most GPUs per node the device plugin may report Unhealthy before the node FAILs
    #: inventory.allocatable-matches-capacity (up to it: DEGRADED, the GPUs named)
    unhealthy_max: int | None = None


@dataclass(frozen=True)
class DriverSpec:
    version: str | None = None  # 580.95.05
    branch: int | None = None  # 580


@dataclass(frozen=True)
class CudaSpec:
    driver_version: str | None = None  # the driver's native CUDA, major.minor (GFD cuda.runtime-version)


MigCounts = tuple[tuple[str, int], ...]  # (MIG profile, instances on each GPU), in declaration order


@dataclass(frozen=True)
class MigSpec:
    strategy: str | None = None  # none | single | mixed
    layout: MigCounts = ()


@dataclass(frozen=True)
class SharingSpec:
    strategy: str | None = None  # none | time-slicing | mps
    replicas: int | None = None

    @property
    def effective_replicas(self) -> int | None:
        """The replicas each GPU is advertised as: declared, or 1 when sharing is declared off."""
        return self.replicas if self.replicas is not None else (1 if self.strategy == "none" else None)


@dataclass(frozen=True)
class RuntimeSpec:
    mode: str | None = None  # legacy | cdi | jit-cdi: what the nvidia runtime really runs


@dataclass(frozen=True)
class NcclSpec:
    busbw_floor_gbps: float | None = None  # intra-node all-reduce bus bandwidth floor, for the NCCL suite
    nic_gbps: int | None = None  # each NIC port's line rate (400 for NDR), for the inter-node floor
    nics: int | None = None  # NIC ports each node uses for NCCL (one per GPU on rail-optimised nodes)


@dataclass(frozen=True)
class PcieSpec:
    """The PCIe link the pool's GPUs must train at (bandwidth.pcie-link-at-max, host-device-floor)."""

    gen: int
    width: int


@dataclass(frozen=True)
class ExpectPool:
    name: str
    selector: tuple[tuple[str, str], ...]  # labels that must all match, in declaration order
    nodes: NodeCount = field(default_factory=NodeCount)
    gpu: GpuSpec = field(default_factory=GpuSpec)
    driver: DriverSpec = field(default_factory=DriverSpec)
    cuda: CudaSpec = field(default_factory=CudaSpec)
    mig: MigSpec = field(default_factory=MigSpec)
    sharing: SharingSpec = field(default_factory=SharingSpec)
    runtime: RuntimeSpec = field(default_factory=RuntimeSpec)
    nccl: NcclSpec = field(default_factory=NcclSpec)
    pcie: PcieSpec | None = None

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(key) == value for key, value in self.selector)

    @property
    def selector_text(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.selector)

    def declared(self) -> list[tuple[str, str]]:
        """Every declared per-node field as (field path, declared value as text), in file order."""
        out: list[tuple[str, Any]] = [
            ("gpu.product", self.gpu.product), ("gpu.count", self.gpu.count), ("gpu.memory_mib", self.gpu.memory_mib),
            ("driver.version", self.driver.version), ("driver.branch", self.driver.branch),
            ("cuda.driver_version", self.cuda.driver_version), ("mig.strategy", self.mig.strategy),
            ("mig.layout", mig_text(self.mig.layout) if self.mig.layout else None),
            ("sharing.strategy", self.sharing.strategy), ("sharing.replicas", self.sharing.effective_replicas),
            ("runtime.mode", self.runtime.mode), ("nccl.busbw_floor_gbps", self.nccl.busbw_floor_gbps),
        ]
        return [(name, f"{value:g}" if isinstance(value, float) else str(value)) for name, value in out
                if value is not None]


def mig_text(counts: MigCounts | Mapping[str, int]) -> str:
    items = counts.items() if isinstance(counts, Mapping) else counts
    return "{" + ", ".join(f"{p}: {n}" for p, n in items) + "}"


@dataclass(frozen=True)
class ExpectProfile:
    source: str  # the file, as given
    pools: tuple[ExpectPool, ...]
    name: str | None = None
    description: str | None = None

    def pool(self, name: str) -> ExpectPool:
        for pool in self.pools:
            if pool.name == name:
                return pool
        raise KeyError(name)

    def pool_for(self, labels: Mapping[str, str]) -> ExpectPool | None:
        """The pool a node with these labels belongs to: of the pools whose selector matches, the
        most specific (load_expect guarantees they nest, so it is unique); None if none matches."""
        matching = [p for p in self.pools if p.matches(labels)]
        return max(matching, key=lambda p: len(p.selector)) if matching else None


# --- loading ----------------------------------------------------------------------------------

_PATTERNS = {
    "^[a-z0-9]([a-z0-9-]*[a-z0-9])?$": "a lower-case name such as h100 or a100-mig",
    "^([A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?)?$":
        "a label value (letters, digits, '-', '_', '.'; GFD writes spaces as '-': NVIDIA-H100-80GB-HBM3)",
    "^[0-9]+(\\.[0-9]+)+$": "a dotted driver version such as 580.95.05",
    "^[0-9]+\\.[0-9]+$": "a CUDA major.minor such as 13.0",
    "^([a-z0-9]([a-z0-9.-]*[a-z0-9])?/)?[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$":
        "a label key such as nvidia.com/gpu.product",
    "^[0-9]+g\\.[0-9]+gb([+-][a-z.]+)?$": "a MIG profile such as 1g.10gb",
}


class _Where(Document):
    error_type = ExpectError


def _nccl(raw: Mapping[str, Any] | None) -> NcclSpec:
    if raw is None:
        return NcclSpec()
    floor, nic, nics = raw.get("busbw_floor_gbps"), raw.get("nic_gbps"), raw.get("nics")
    return NcclSpec(float(floor) if floor is not None else None, int(nic) if nic is not None else None,
                    int(nics) if nics is not None else None)


def load_expect(path: str | Path) -> ExpectProfile:
    """Read and check an ``--expect`` file; every problem is an :class:`ExpectError`."""
    display = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ExpectError(display, "", f"cannot read: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise ExpectError(display, "", f"cannot read: not UTF-8 text ({e.reason} at byte {e.start})") from e
    data, where = read(text, display, _Where, empty="an --expect file is a mapping with schema: 1 and pools")
    validate(data, where, _schema(), patterns=_PATTERNS, quote_hint='quote it: "{value}"')
    return _build(cast(dict[str, Any], data), where)


@cache
def _schema() -> dict[str, Any]:
    return schema("expect")


def _build(data: Mapping[str, Any], where: _Where) -> ExpectProfile:
    pools: list[ExpectPool] = []
    for i, raw in enumerate(data["pools"]):
        at: FieldPath = ("pools", i)
        for j, other in enumerate(pools):
            if other.name == raw["name"]:
                raise where.error((*at, "name"), f"duplicate pool name {raw['name']!r} (first at {_line(where, j)})")
        pool = _build_pool(raw, where, at)
        for j, other in enumerate(pools):
            problem = _overlap(pool, other)
            if problem:
                both = ", ".join(f"{k}={v}" for k, v in {**dict(other.selector), **dict(pool.selector)}.items())
                raise where.error((*at, "selector"), f"{problem} pool {other.name!r} ({_line(where, j)}): a node "
                                                     f"labelled {both} would match both; make one selector include "
                                                     f"all of the other's labels, or give them a label with "
                                                     f"different values")
        pools.append(pool)
    return ExpectProfile(where.name, tuple(pools), data.get("name"),
                         " ".join(data["description"].split()) if "description" in data else None)


def _line(where: _Where, index: int) -> str:
    node = where.node(("pools", index))
    return f"line {node.start_mark.line + 1}" if node is not None else f"pools[{index}]"


def _overlap(a: ExpectPool, b: ExpectPool) -> str | None:
    """Why ``a`` and ``b`` could both claim a node without one being more specific, or None."""
    sa, sb = dict(a.selector), dict(b.selector)
    if any(sa[k] != sb[k] for k in sa.keys() & sb.keys()):
        return None  # a label with different values: no node matches both
    if sa == sb:
        return "the same selector as"
    if sa.items() <= sb.items() or sb.items() <= sa.items():
        return None  # nested: the node belongs to the more specific one
    return "overlaps"


def _build_pool(raw: Mapping[str, Any], where: _Where, at: FieldPath) -> ExpectPool:
    nodes = raw.get("nodes")
    count = (NodeCount() if nodes is None else NodeCount(exact=nodes) if isinstance(nodes, int)
             else NodeCount(min=nodes["min"]))
    g = raw.get("gpu", {})
    gpu = GpuSpec(g.get("product"), g.get("count"), g.get("memory_mib"), g.get("unhealthy_max"))
    if gpu.product is not None:
        for suffix, why in (("-SHARED", "sharing"), ("-MIG-", "mig")):
            if suffix in gpu.product:
                base = gpu.product.split(suffix)[0]
                raise where.error((*at, "gpu", "product"), f"declare the GPU itself ({base}); GFD's {suffix} "
                                                           f"suffix is checked through {why}")
    d = raw.get("driver", {})
    driver = DriverSpec(d.get("version"), d.get("branch"))
    if driver.version is not None and driver.branch is not None \
            and parse_driver(driver.version).branch != driver.branch:
        raise where.error((*at, "driver", "branch"), f"driver {driver.version} is on branch "
                                                     f"{parse_driver(driver.version).branch}, not {driver.branch}")
    cuda = CudaSpec(raw.get("cuda", {}).get("driver_version"))
    branch = parse_driver(driver.version).branch if driver.version else driver.branch
    known = tables.branch(branch) if branch is not None else None
    if cuda.driver_version is not None and known is not None \
            and known.cuda.major_minor != parse_cuda(cuda.driver_version):
        raise where.error((*at, "cuda", "driver_version"),
                          f"driver branch {branch} runs CUDA {known.cuda.major_minor} natively "
                          f"(gpuconf/data/driver_branches.yaml), not {cuda.driver_version}")
    mig = _build_mig(raw.get("mig"), gpu, where, (*at, "mig"))
    s = raw.get("sharing", {})
    sharing = SharingSpec(s.get("strategy"), s.get("replicas"))
    if sharing.strategy == "none" and sharing.replicas not in (None, 1):
        raise where.error((*at, "sharing", "replicas"), "replicas needs strategy time-slicing or mps")
    return ExpectPool(
        raw["name"], tuple((str(k), str(v)) for k, v in raw["selector"].items()), count, gpu, driver, cuda, mig,
        sharing, RuntimeSpec(raw.get("runtime", {}).get("mode")),
        _nccl(raw.get("nccl")), PcieSpec(raw["pcie"]["gen"], raw["pcie"]["width"]) if "pcie" in raw else None)


@cache
def _mig_profiles() -> dict[str, dict[str, int]]:
    """GPU product name (as nvidia-smi prints it) → {MIG profile: most instances on one GPU}."""
    out: dict[str, dict[str, int]] = {}
    for row in tables.load("mig_profiles")["profile_sets"]:
        for gpu in row["gpus"]:
            out[gpu] = {p["name"]: p["max_instances"] for p in row["profiles"]}
    return out


def _build_mig(raw: Mapping[str, Any] | None, gpu: GpuSpec, where: _Where, at: FieldPath) -> MigSpec:
    if raw is None:
        return MigSpec()
    mig = MigSpec(raw["strategy"], tuple((str(k), int(v)) for k, v in raw.get("layout", {}).items()))
    if mig.strategy == "none":
        if mig.layout:
            raise where.error((*at, "layout"), "a MIG layout needs strategy single or mixed")
        return mig
    if mig.strategy == "single" and len(mig.layout) > 1:
        raise where.error((*at, "layout"), "strategy single needs one MIG profile on every GPU; use mixed")
    model = tables.find_gpu(gpu.product) if gpu.product else None
    if model is None:
        return mig  # a GPU the catalog does not know: its MIG profiles cannot be checked here
    if not model.mig_capable:
        raise where.error((*at, "strategy"), f"{model.name} is not MIG-capable")
    profiles = _mig_profiles().get(model.name, {})
    for name, n in mig.layout:
        if profiles and name not in profiles:
            raise where.error((*at, "layout", name), f"{model.name} has no MIG profile {name!r} (profiles: "
                                                     f"{', '.join(profiles)})", key=True)
        if name in profiles and n > profiles[name]:
            raise where.error((*at, "layout", name), f"{model.name} holds at most {profiles[name]} x {name}, not {n}")
    return mig
