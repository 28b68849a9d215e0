"""Simulated cluster profiles: what hardware and software a simulated GPU cluster has.

A profile (``gpuconf/data/sim_profiles/<name>.yaml``) describes node pools -- GPU model from the
catalog, GPUs per node, driver, container toolkit and its mode, device-plugin config (list and
id strategies, time-slicing/MPS replicas, MIG strategy and layout), DRA driver, interconnect --
plus cluster-wide facts (RuntimeClasses, GPU Operator) and a list of faults from
``gpuconf/data/faults.yaml``. ``load_profile`` validates it against
``schemas/sim_profile.schema.json`` and against the knowledge tables (GPU catalog, MIG profiles,
driver branches, fault catalog); every problem is a ``ProfileError`` naming file:line:col and
the field path.

``expand`` turns a profile into concrete nodes (``<pool>-<index>``) with per-GPU facts and
applies the faults to exactly the facts each one documents (its ``alters`` list in the
catalog). The node agents play kubelet, device plugin, toolkit, GFD and DRA driver from these
facts; a fault changes a mechanism, never a verdict (docs/architecture.md, "The simulated
cluster").
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, cast

import yaml
from jsonschema import Draft202012Validator

from gpuconf.compat import rules, tables
from gpuconf.compat.rules import Mode
from gpuconf.compat.tables import GpuModel
from gpuconf.compat.versions import DriverVersion, VersionError, parse_cuda, parse_driver
from gpuconf.errors import UsageError
from gpuconf.yamlschema import Document, DocumentError, FieldPath, describe, read, schema, validate

__all__ = [
    "DevicePluginConfig",
    "DraConfig",
    "FaultDef",
    "FaultParam",
    "FaultSpec",
    "Interconnect",
    "MigLayout",
    "NodePool",
    "Operator",
    "Profile",
    "ProfileError",
    "RuntimeClassSpec",
    "Sharing",
    "SimCluster",
    "SimGpu",
    "SimMigInstance",
    "SimNode",
    "TenantPod",
    "Toolkit",
    "effective_mode",
    "expand",
    "expand_nodes",
    "fault_catalog",
    "fault_words",
    "load_profile",
    "shipped_profiles",
    "with_faults",
]

PROFILE_DIR = "gpuconf/data/sim_profiles"  # as error messages print it (relative to the checkout)
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_VERSION_PATTERN = "^[0-9]+(\\.[0-9]+)+$"

Path_ = FieldPath  # a field path into the document: ("pools", 1, "gpu")


class ProfileError(UsageError, DocumentError):
    """A profile that cannot be loaded: ``<file>:<line>:<col>: <field>: <problem>``."""


# --- the profile ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RuntimeClassSpec:
    name: str
    handler: str


@dataclass(frozen=True)
class Operator:
    """The GPU Operator (ClusterPolicy ``cluster-policy``, operand deploy labels) or its absence."""

    present: bool = False
    version: str | None = None
    #: clusterpolicy: the ClusterPolicy ``cluster-policy`` deploys the operands (driver, toolkit, device
    #: plugin, GFD, DCGM exporter...). gpucluster: GPU Operator 26.7's GPUCluster CR (nvidia.com/v1alpha1,
    #: Technology Preview) manages only NVIDIA's DRA driver, DCGM and dcgm-exporter; no device plugin, no
    #: driver, no GFD, and never a ClusterPolicy beside it (anchors-2026-12.md section 4).
    mode: str = "clusterpolicy"

    @property
    def gpucluster(self) -> bool:
        return self.present and self.mode == "gpucluster"


@dataclass(frozen=True)
class Toolkit:
    """The NVIDIA Container Toolkit on a node and the containerd runtime setup it made."""

    version: str
    mode: Mode = Mode.AUTO  # the nvidia runtime's configured mode; see effective_mode()
    #: containerd's / CRI-O's default handler: nvidia | runc. The GPU Operator's toolkit container
    #: sets nvidia as the default (--set-as-default is on by default: NVIDIA/nvidia-container-toolkit
    #: tools/container README; gpu-operator#1323 shows the resulting default_runtime_name = "nvidia").
    default_runtime: str = "nvidia"
    #: accept-nvidia-visible-devices-envvar-when-unprivileged. False is the conformant setting
    #: (the toolkit's own default is true, domain.md section 4).
    accept_envvar_unprivileged: bool = False
    #: Fault-only (visible-devices-all): "allocated" injects what the plugin allocated, "all" every GPU.
    visible_devices: str = "allocated"

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return tuple(int(p) for p in self.version.split("."))


@dataclass(frozen=True)
class Sharing:
    """Device-plugin ``sharing``: time-slicing or MPS advertises ``replicas`` x each GPU."""

    strategy: str = "none"  # none | time-slicing | mps
    replicas: int = 1
    rename_by_default: bool = False  # nvidia.com/gpu.shared instead of nvidia.com/gpu
    fail_requests_greater_than_one: bool = False  # time-slicing only: MPS always refuses > 1 replica
    #: MPS: the control daemon gives each client a pinned device memory limit of memory / replicas
    #: (``set_default_device_pinned_mem_limit <i> <MiB>M``). Fault-only (mps-memory-limit-unset): False.
    mps_memory_limit: bool = True


MigCounts = tuple[tuple[str, int], ...]  # (MIG profile, instances) in declaration order


@dataclass(frozen=True)
class MigLayout:
    """Device-plugin ``migStrategy`` plus the MIG layout mig-manager configured on every GPU."""

    strategy: str = "none"  # none | single | mixed
    layout: MigCounts = ()  # every GPU unless per_gpu says otherwise
    per_gpu: tuple[tuple[int, MigCounts], ...] = ()

    @property
    def enabled(self) -> bool:
        return bool(self.layout or self.per_gpu)

    def for_gpu(self, index: int) -> MigCounts:
        for gpu, counts in self.per_gpu:
            if gpu == index:
                return counts
        return self.layout


@dataclass(frozen=True)
class DevicePluginConfig:
    enabled: bool = True
    device_list_strategy: tuple[str, ...] = ("envvar",)
    device_id_strategy: str = "uuid"
    sharing: Sharing = field(default_factory=Sharing)
    mig: MigLayout = field(default_factory=MigLayout)


@dataclass(frozen=True)
class DraConfig:
    enabled: bool = False
    driver: str = "gpu.nvidia.com"
    #: KEP-5004 (beta, on by default in 1.36): the extended resource (e.g. nvidia.com/gpu) the GPU
    #: DeviceClass maps with ``spec.extendedResourceName``, so a plain resource request is served by DRA
    extended_resource: str | None = None


@dataclass(frozen=True)
class Interconnect:
    """Bandwidths the simulated NCCL reports (GB/s busbw, domain.md section 7); None = no figure."""

    nvlink: bool = False
    nvlink_gbps: float | None = None  # per-GPU NVLink bandwidth (spec figure)
    busbw_gbps: float | None = None  # single-node all-reduce busbw, large messages
    nics: int = 0
    nic_gbps: int = 0  # line rate per NIC, Gb/s
    nic_busbw_gbps: float | None = None  # multi-node all-reduce busbw per NIC
    hang: bool = False  # fault-only (nccl-hang): collectives never complete
    nvls: bool = True  # fault-only (nccl-nvls-unavailable): False, NVSwitch multicast cannot be used


@dataclass(frozen=True)
class NodePool:
    name: str
    count: int
    gpu: GpuModel
    gpus_per_node: int
    driver: DriverVersion
    toolkit: Toolkit
    device_plugin: DevicePluginConfig = field(default_factory=DevicePluginConfig)
    dra: DraConfig = field(default_factory=DraConfig)
    interconnect: Interconnect = field(default_factory=Interconnect)
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class FaultSpec:
    """One fault instance, validated, with every parameter resolved to a concrete value."""

    id: str
    pool: str | None = None  # None: a cluster-scope fault
    node: int | None = None  # None: every node of the pool
    gpu: int | None = None  # gpu-scope faults only
    params: tuple[tuple[str, Any], ...] = ()

    def param(self, name: str) -> Any:
        for key, value in self.params:
            if key == name:
                return value
        raise KeyError(f"fault {self.id} has no parameter {name!r}")


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    source: str  # the file it came from, as error messages print it
    pools: tuple[NodePool, ...]
    kubernetes: str = "1.34"
    operator: Operator = field(default_factory=Operator)
    runtime_classes: tuple[RuntimeClassSpec, ...] = (RuntimeClassSpec("nvidia", "nvidia"),)
    faults: tuple[FaultSpec, ...] = ()

    def pool(self, name: str) -> NodePool:
        for pool in self.pools:
            if pool.name == name:
                return pool
        raise KeyError(name)

    @property
    def node_count(self) -> int:
        return sum(p.count for p in self.pools)

    @property
    def gpu_count(self) -> int:
        return sum(p.count * p.gpus_per_node for p in self.pools)


def effective_mode(toolkit: Toolkit, device_plugin: DevicePluginConfig | None = None) -> Mode:
    """The mode the nvidia runtime really runs in (``auto`` resolved as gpuconf.compat.rules does)."""
    strategy = device_plugin.device_list_strategy[0] if device_plugin else None
    runtime = rules.Runtime(toolkit=toolkit.version_tuple, mode=toolkit.mode, device_list_strategy=strategy)
    return rules.resolve_modes(runtime)[0][0]  # one answer: the toolkit version is known


# --- the fault catalog ----------------------------------------------------------------------


@dataclass(frozen=True)
class FaultParam:
    name: str
    type: str  # integer | number | string | driver-version | mig-layout | gpu-model
    default: Any
    description: str
    enum: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class FaultDef:
    """One entry of gpuconf/data/faults.yaml."""

    id: str
    summary: str
    mechanism: str
    scope: str  # gpu | node | cluster
    alters: tuple[str, ...]
    requires: tuple[str, ...]
    check: str
    suite: str
    severity: str
    parameters: tuple[FaultParam, ...]
    example_profile: str
    sources: tuple[str, ...]


_schema = schema


@cache
def fault_catalog() -> Mapping[str, FaultDef]:
    """The faults a profile may name, by id (validated against faults.schema.json)."""
    data = tables.load("faults")
    error = next(iter(Draft202012Validator(_schema("faults")).iter_errors(data)), None)
    if error is not None:
        raise ValueError(f"gpuconf/data/faults.yaml: {error.json_path}: {error.message}")
    out: dict[str, FaultDef] = {}
    for row in data["faults"]:
        params = tuple(FaultParam(name, p["type"], p["default"], p["description"],
                                  tuple(p["enum"]) if "enum" in p else None)
                       for name, p in row["parameters"].items())
        out[row["id"]] = FaultDef(
            row["id"], row["summary"], " ".join(row["mechanism"].split()), row["scope"], tuple(row["alters"]),
            tuple(row["requires"]), row["caught_by"]["check"], row["caught_by"]["suite"], row["severity"],
            params, row["example_profile"], tuple(row["sources"]))
    implemented = set(_NODE_FAULTS) | set(_CLUSTER_FAULTS)
    if set(out) != implemented:  # every catalogued fault has an implementation, and nothing else does
        raise ValueError(f"gpuconf/data/faults.yaml and gpuconf/sim/profile.py disagree on: "
                         f"{', '.join(sorted(set(out) ^ implemented))}")
    return out


# --- MIG knowledge (gpuconf/data/mig_profiles.yaml) ----------------------------------------------


@dataclass(frozen=True)
class _MigProfile:
    name: str
    slices: int
    memory_gib: int
    max_instances: int
    memory_mib: int  # what CUDA reports: nvidia-smi mig -lgip's figure where the table has one, else the name's


@cache
def _mig_sets() -> dict[str, dict[str, _MigProfile]]:
    """GPU product name -> its MIG profiles by name."""
    out: dict[str, dict[str, _MigProfile]] = {}
    for row in tables.load("mig_profiles")["profile_sets"]:
        profiles = {p["name"]: _MigProfile(p["name"], p["slices"], p["memory_gib"], p["max_instances"],
                                           round(p.get("lgip_gib", p["memory_gib"]) * 1024))
                    for p in row["profiles"]}
        for gpu in row["gpus"]:
            out[gpu] = profiles
    return out


def _mig_problem(counts: MigCounts, gpu: GpuModel) -> str | None:
    """Why ``counts`` cannot exist on one ``gpu``, or None.

    Checks each profile's max_instances, the compute slices (7 on most parts) and the memory
    slices (eight per GPU; a profile takes memory / (full memory / 8), rounded). Placement rules
    beyond these sums are not modelled: check real layouts with ``nvidia-smi mig -lgip``.
    """
    profiles = _mig_sets().get(gpu.name)
    if not gpu.mig_capable or profiles is None:
        return f"{gpu.name} is not MIG-capable"
    full = max(profiles.values(), key=lambda p: (p.slices, p.memory_gib))
    slices = units = 0
    for name, count in counts:
        profile = profiles.get(name)
        if profile is None:
            return f"{gpu.name} has no MIG profile {name!r} (profiles: {', '.join(profiles)})"
        if count > profile.max_instances:
            return f"{gpu.name} holds at most {profile.max_instances} x {name}, not {count}"
        slices += profile.slices * count
        units += round(profile.memory_gib * 8 / full.memory_gib) * count
    if slices > full.slices:
        return f"the layout needs {slices} compute slices; {gpu.name} has {full.slices}"
    if units > 8:
        return f"the layout needs {units} of the 8 memory slices of {gpu.name}"
    return None


# --- locating fields in the YAML --------------------------------------------------------------


_describe = describe


class _Where(Document):
    """Where a profile came from: makes ProfileErrors with a line and column when it can
    (gpuconf.yamlschema locates fields and words schema errors)."""

    error_type = ProfileError


# --- loading ----------------------------------------------------------------------------------


def _profile_dir() -> Path:
    return Path(str(resources.files("gpuconf.data").joinpath("sim_profiles")))


def shipped_profiles() -> list[str]:
    """Names of the profiles under gpuconf/data/sim_profiles."""
    return sorted(p.stem for p in _profile_dir().glob("*.yaml"))


def load_profile(name_or_path: str | Path) -> Profile:
    """A bare name loads ``gpuconf/data/sim_profiles/<name>.yaml``; anything else is a file path."""
    text_name = str(name_or_path)
    bare = not isinstance(name_or_path, Path) and _NAME.match(text_name) is not None
    if bare:
        path, display = _profile_dir() / f"{text_name}.yaml", f"{PROFILE_DIR}/{text_name}.yaml"
        if not path.is_file():
            raise ProfileError(display, "", f"unknown simulated cluster profile {text_name!r} (shipped: "
                                            f"{', '.join(shipped_profiles())})")
    else:
        path, display = Path(name_or_path), text_name
        if not path.is_file():
            raise ProfileError(display, "", "no such profile file (a bare name loads a shipped profile: "
                                            f"{', '.join(shipped_profiles())})")
    profile = _parse(path.read_text(encoding="utf-8"), display)
    if bare and profile.name != text_name:
        raise _Where(display, yaml.compose(path.read_text(encoding="utf-8"))).error(
            ("name",), f"profile name {profile.name!r} differs from its file name {text_name!r}")
    return profile


def _parse(text: str, display: str) -> Profile:
    data, where = read(text, display, _Where, empty="a profile is a mapping with schema, name, pools")
    validate(data, where, _schema("sim_profile"),
             patterns={_VERSION_PATTERN: "a dotted version such as 580.95.05"})
    return _build(cast(dict[str, Any], data), where)


def _counts(raw: Mapping[str, int]) -> MigCounts:
    return tuple((str(k), int(v)) for k, v in raw.items())


def _build_mig(raw: Mapping[str, Any], gpu: GpuModel, gpus: int, where: _Where, at: Path_, *,
               plugin: bool = True) -> MigLayout:
    """The pool's MIG layout. ``strategy`` is the device plugin's (and GFD's); without a device plugin
    (``plugin`` False) a layout under strategy none is mig-manager's alone, handed out by the DRA
    driver as devices of type mig (a100-mig-dra)."""
    strategy = raw.get("strategy", "none")
    layout = _counts(raw.get("layout", {}))
    per_gpu: list[tuple[int, MigCounts]] = []
    for i, entry in enumerate(raw.get("per_gpu", [])):
        for index in entry["gpus"]:
            if index >= gpus:
                raise where.error((*at, "per_gpu", i, "gpus"), f"GPU {index} does not exist (the pool has "
                                                                 f"{gpus} GPUs per node: 0-{gpus - 1})")
            if any(index == g for g, _ in per_gpu):
                raise where.error((*at, "per_gpu", i, "gpus"), f"GPU {index} is given two layouts")
            per_gpu.append((index, _counts(entry["layout"])))
    mig = MigLayout(strategy, layout, tuple(sorted(per_gpu)))
    if strategy == "none" and (not mig.enabled or plugin):
        if mig.enabled:
            raise where.error((*at, "strategy"), "a MIG layout needs strategy single or mixed (or no device plugin)")
        return mig
    if not layout:
        if per_gpu:
            raise where.error((*at, "layout"), f"strategy {strategy} with per_gpu layouts needs a layout for the "
                                               "other GPUs (MIG profile: count)")
        # The device plugin configured with this strategy on GPUs without MIG enabled (the GPU
        # Operator's default is single): GFD still labels mig.strategy, nothing is cut.
        return mig
    if not gpu.mig_capable:
        raise where.error((*at, "layout"), f"{gpu.name} is not MIG-capable")
    for sub, counts in [(("layout",), layout)] + [
            (("per_gpu", i, "layout"), _counts(e["layout"])) for i, e in enumerate(raw.get("per_gpu", []))]:
        problem = _mig_problem(counts, gpu)
        if problem:
            raise where.error((*at, *sub), problem)
        if strategy == "single" and {name for name, _ in counts} != {layout[0][0]}:
            raise where.error((*at, *sub), "strategy single needs one MIG profile on every GPU; use mixed")
    return mig


def _build_pool(raw: Mapping[str, Any], where: _Where, at: Path_) -> NodePool:
    gpu = tables.find_gpu(raw["gpu"])
    if gpu is None:
        known = sorted({(row.get("aliases") or [row["name"]])[0] for row in tables.load("gpus")["gpus"]})
        raise where.error((*at, "gpu"), f"unknown GPU model {raw['gpu']!r} (known: {', '.join(known)})")
    if gpu.memory_mib is None:
        raise where.error((*at, "gpu"), f"{gpu.name} has no memory figure in gpuconf/data/gpus.yaml")
    try:
        driver = parse_driver(raw["driver"])
    except VersionError as e:
        raise where.error((*at, "driver"), str(e)) from e
    if tables.branch(driver.branch) is None:
        branches = ", ".join(str(b["branch"]) for b in tables.load("driver_branches")["branches"])
        raise where.error((*at, "driver"), f"driver branch {driver.branch} is not in "
                                           f"gpuconf/data/driver_branches.yaml (known: {branches})")
    tk = raw["toolkit"]
    toolkit = Toolkit(tk["version"], Mode(tk.get("mode", "auto")), tk.get("default_runtime", "nvidia"),
                      tk.get("accept_envvar_unprivileged", False))
    dp = raw.get("device_plugin", {})
    sh = dp.get("sharing", {})
    sharing = Sharing(sh.get("strategy", "none"), sh.get("replicas", 1), sh.get("rename_by_default", False),
                      sh.get("fail_requests_greater_than_one", False))
    if sharing.strategy == "none" and sharing.replicas != 1:
        raise where.error((*at, "device_plugin", "sharing", "replicas"),
                          "replicas needs strategy time-slicing or mps")
    if sharing.strategy != "none" and "replicas" not in sh:
        raise where.error((*at, "device_plugin", "sharing"), f"strategy {sharing.strategy} needs replicas (>= 1)")
    strategies = dp.get("device_list_strategy", "envvar")
    plugin = DevicePluginConfig(
        dp.get("enabled", True), (strategies,) if isinstance(strategies, str) else tuple(strategies),
        dp.get("device_id_strategy", "uuid"), sharing,
        _build_mig(dp.get("mig", {}), gpu, raw["gpus_per_node"], where, (*at, "device_plugin", "mig"),
                   plugin=dp.get("enabled", True)))
    ic = raw.get("interconnect", {})
    interconnect = Interconnect(ic.get("nvlink", False), ic.get("nvlink_gbps"), ic.get("busbw_gbps"),
                                ic.get("nics", 0), ic.get("nic_gbps", 0), ic.get("nic_busbw_gbps"))
    if not interconnect.nvlink and interconnect.nvlink_gbps is not None:
        raise where.error((*at, "interconnect", "nvlink_gbps"), "an NVLink bandwidth without nvlink: true")
    dra = raw.get("dra", {})
    return NodePool(raw["name"], raw["count"], gpu, raw["gpus_per_node"], driver, toolkit, plugin,
                    DraConfig(dra.get("enabled", False), dra.get("driver", "gpu.nvidia.com"),
                              dra.get("extended_resource")), interconnect,
                    tuple(sorted(raw.get("labels", {}).items())))


def _build(data: dict[str, Any], where: _Where) -> Profile:
    pools: list[NodePool] = []
    for i, raw in enumerate(data["pools"]):
        if any(p.name == raw["name"] for p in pools):
            raise where.error(("pools", i, "name"), f"duplicate pool name {raw['name']!r}")
        pools.append(_build_pool(raw, where, ("pools", i)))
    kubernetes = data.get("kubernetes", "1.34")
    minor = int(kubernetes.split(".")[1])
    for i, pool in enumerate(pools):
        if pool.dra.enabled and minor < 34:
            raise where.error(("pools", i, "dra", "enabled"), f"DRA (resource.k8s.io/v1) needs Kubernetes >= 1.34, "
                                                             f"the profile says {kubernetes}")
        if pool.dra.extended_resource is not None:
            at = ("pools", i, "dra", "extended_resource")
            if not pool.dra.enabled:
                raise where.error(at, "an extended resource served by DRA needs dra.enabled: true")
            if minor < 36:
                raise where.error(at, f"DRA-backed extended resources (KEP-5004, DRAExtendedResource) are on by "
                                      f"default from Kubernetes 1.36, the profile says {kubernetes}")
            if pool.device_plugin.enabled:
                raise where.error(at, f"pool {pool.name!r} runs the device plugin, which would advertise "
                                      f"{pool.dra.extended_resource} itself; set device_plugin.enabled: false")
    others = {p.dra.extended_resource for p in pools if p.dra.extended_resource is not None}
    if len(others) > 1:  # one DeviceClass gpu.nvidia.com carries one extendedResourceName
        raise where.error(("pools",), f"pools map different extended resources ({', '.join(sorted(others))}) "
                                      f"through the one DeviceClass gpu.nvidia.com")
    classes = tuple(RuntimeClassSpec(r["name"], r["handler"])
                    for r in data.get("runtime_classes", [{"name": "nvidia", "handler": "nvidia"}]))
    for i, rc in enumerate(classes):
        if any(other.name == rc.name for other in classes[:i]):
            raise where.error(("runtime_classes", i, "name"), f"duplicate RuntimeClass {rc.name!r}")
    op = data.get("operator", {"present": False})
    if op.get("mode", "clusterpolicy") == "gpucluster":
        if not op["present"]:
            raise where.error(("operator", "mode"), "mode gpucluster needs present: true")
        for i, pool in enumerate(pools):
            if pool.device_plugin.enabled:
                raise where.error(("pools", i, "device_plugin", "enabled"),
                                  f"pool {pool.name!r} enables the device plugin, which the GPU Operator's "
                                  f"GPUCluster mode does not deploy (it manages the DRA driver, DCGM and "
                                  f"dcgm-exporter only); set device_plugin.enabled: false")
            if not pool.dra.enabled:
                raise where.error(("pools", i, "dra", "enabled"),
                                  f"pool {pool.name!r} has no DRA driver, the only way GPUCluster mode hands "
                                  f"out GPUs; set dra.enabled: true")
    profile = Profile(data["name"], " ".join(data["description"].split()), where.name, tuple(pools), kubernetes,
                      Operator(op["present"], op.get("version"), op.get("mode", "clusterpolicy")), classes)
    faults = tuple(_resolve_fault(profile, raw, where, ("faults", i)) for i, raw in enumerate(data.get("faults", [])))
    return replace(profile, faults=faults)


# --- faults: validation -----------------------------------------------------------------------


def _requirement_problem(need: str, profile: Profile, pool: NodePool | None, spec: Mapping[str, Any]) -> str | None:
    if need == "nvidia-runtimeclass":
        ok = any(rc.name == "nvidia" for rc in profile.runtime_classes)
        return None if ok else "the profile has no RuntimeClass named nvidia to remove"
    if need == "extended-resource":
        ok = any(p.dra.extended_resource for p in profile.pools)
        return None if ok else "no pool maps an extended resource to DRA (dra.extended_resource)"
    assert pool is not None
    plugin = pool.device_plugin
    checks: dict[str, tuple[bool, str]] = {
        "device-plugin": (plugin.enabled, "has no device plugin"),
        "no-device-plugin": (not plugin.enabled, "already runs the device plugin"),
        "dra": (pool.dra.enabled, "has no DRA driver"),
        "mig": (plugin.mig.enabled, "has no MIG layout"),
        "sharing": (plugin.sharing.strategy != "none", "does not share GPUs (sharing.strategy none)"),
        "legacy-mode": (effective_mode(pool.toolkit, plugin) is Mode.LEGACY,
                        f"does not run legacy mode (it runs {effective_mode(pool.toolkit, plugin).value})"),
    }
    if need == "nccl-figure":
        attr = "nic_busbw_gbps" if spec.get("link") == "nic" else "busbw_gbps"
        ok = getattr(pool.interconnect, attr) is not None
        return None if ok else f"pool {pool.name!r} has no interconnect.{attr} to degrade"
    good, why = checks[need]
    return None if good else f"pool {pool.name!r} {why}"


def _param_value(param: FaultParam, value: Any, pool: NodePool | None) -> tuple[Any, str | None]:
    """(the checked value, or a problem)."""
    if value is None:
        return None, None
    kind = param.type
    if kind == "integer" and (not isinstance(value, int) or isinstance(value, bool)):
        return value, f"expected an integer, got {_describe(value)}"
    if kind == "number" and (not isinstance(value, int | float) or isinstance(value, bool)):
        return value, f"expected a number, got {_describe(value)}"
    if kind in ("string", "driver-version", "gpu-model") and not isinstance(value, str):
        return value, f"expected a string, got {_describe(value)}"
    if param.enum is not None and value not in param.enum:
        return value, f"{value!r} is not one of {', '.join(map(str, param.enum))}"
    if kind == "driver-version":
        try:
            driver = parse_driver(value)
        except VersionError as e:
            return value, str(e)
        if tables.branch(driver.branch) is None:
            return value, f"driver branch {driver.branch} is not in gpuconf/data/driver_branches.yaml"
        return driver, None
    if kind == "gpu-model":
        model = tables.find_gpu(value)
        if model is None:
            return value, f"unknown GPU model {value!r} (gpuconf/data/gpus.yaml)"
        if model.memory_mib is None:
            return value, f"{model.name} has no memory figure in gpuconf/data/gpus.yaml"
        return model, None
    if kind == "mig-layout":
        if not isinstance(value, Mapping) or not all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
                for k, v in value.items()):
            return value, "expected a MIG layout {profile: count}"
        counts = tuple((k, v) for k, v in value.items() if v)
        assert pool is not None
        problem = _mig_problem(counts, pool.gpu) if counts else None
        return counts, problem
    return value, None


def _cluster_fault_checks(fault: FaultDef, profile: Profile, params: dict[str, Any]) -> tuple[str, str] | None:
    """Rules of cluster-scope faults: (parameter, problem) or None."""
    if fault.id == "extended-resource-stale":
        if "'" in params["product"] or "\\" in params["product"]:
            return "product", "a product name without quotes or backslashes"
        present = sorted({p.gpu.name for p in profile.pools})
        if params["product"] in present:
            return "product", f"is a model the cluster has ({', '.join(present)}): the selector would still match"
    return None


def _fault_checks(fault: FaultDef, pool: NodePool | None, gpu: int | None,
                  params: dict[str, Any]) -> tuple[str, str] | None:
    """Fault-specific rules: (parameter, problem) or None. Also fills derived defaults."""
    if pool is None:
        return None
    fid = fault.id
    if fid == "driver-skew" and params["driver"] == pool.driver:
        return "driver", f"the pool already runs {pool.driver}: a skew needs another version"
    if fid == "probe-images-rejected":
        return _rejects_every_probe(pool, params["driver"])
    if fid == "library-mismatch" and params["kernel_driver"] == pool.driver:
        return "kernel_driver", f"equals the pool's driver {pool.driver}: no mismatch"
    if fid == "label-drift":
        if not params["label"].startswith(("nvidia.com/", "feature.node.kubernetes.io/")):
            return "label", "only GFD/NFD labels (nvidia.com/..., feature.node.kubernetes.io/...) can drift"
        if params["label"] == "nvidia.com/gpu.product" and params["value"] == pool.gpu.gfd_product:
            return "value", f"equals the real product label {pool.gpu.gfd_product!r}"
    if fid == "dra-attr-wrong" and params["attribute"] == "productName" and params["value"] == pool.gpu.name:
        return "value", f"equals the real productName {pool.gpu.name!r}"
    if fid == "timeslice-replicas-wrong":
        configured = pool.device_plugin.sharing.replicas
        if params["replicas"] is None:
            params["replicas"] = 2 * configured
        if params["replicas"] < 1 or params["replicas"] == configured:
            return "replicas", f"must be >= 1 and differ from the configured {configured}"
    if fid == "mig-layout-drift":
        assert gpu is not None
        declared = pool.device_plugin.mig.for_gpu(gpu)
        if params["layout"] is None:
            if not declared:
                return "layout", f"GPU {gpu} has no MIG instances to lose: give the drifted layout"
            *head, (last, n) = declared
            params["layout"] = tuple(head) + (((last, n - 1),) if n > 1 else ())
        if params["layout"] == declared:
            return "layout", "equals the declared layout: no drift"
    if fid == "mig-strategy-mismatch" and params["plugin_strategy"] == pool.device_plugin.mig.strategy:
        return "plugin_strategy", f"equals the pool's strategy {pool.device_plugin.mig.strategy}: no mismatch"
    if fid == "mixed-gpu-models":
        if params["model"] == pool.gpu:
            return "model", f"is the pool's own model {pool.gpu.name}: nothing is mixed"
        if pool.device_plugin.mig.enabled:
            return "pool", f"pool {pool.name!r} has a MIG layout: a mixed-model MIG node is not simulated"
    if fid == "gpus-busy":
        return _busy_problem(pool, params)
    if fid == "node-not-ready" and params["since_s"] < 1:
        return "since_s", "must be >= 1 (seconds since the node turned NotReady)"
    if fid == "dra-prepares-wrong-device" and params["shift"] % pool.gpus_per_node == 0:
        return "shift", f"a shift of {params['shift']} on {pool.gpus_per_node} GPUs prepares the allocated GPU"
    if fid == "nccl-nvls-unavailable" and not (pool.interconnect.nvlink and pool.gpu.architecture in
                                               ("hopper", "blackwell") and pool.gpus_per_node >= 4):
        return "pool", (f"pool {pool.name!r} has no NVSwitch board NCCL would use NVLS on (NVLink, Hopper or "
                        "later, 4+ GPUs)")
    if fid == "nccl-slow-link" and not 0 < params["factor"] < 1:
        return "factor", f"must be between 0 and 1 (exclusive), not {params['factor']}"
    if fid == "ecc-uncorrectable" and params["count"] < 1:
        return "count", "must be >= 1"
    if fid == "dcgm-vulnerable" and not re.fullmatch(r"\d+\.\d+\.\d+-\d+\.\d+\.\d+", str(params["release"])):
        return "release", f"{params['release']!r} is not a dcgm-exporter release such as 4.2.3-4.1.3"
    if fid == "toolkit-vulnerable":
        if not re.fullmatch(r"\d+\.\d+\.\d+", str(params["toolkit_version"])):
            return "toolkit_version", f"{params['toolkit_version']!r} is not a dotted version such as 1.16.1"
    if fid == "compat-libs-broken":
        try:
            version = tuple(int(p) for p in params["toolkit_version"].split("."))
        except ValueError:
            return "toolkit_version", f"{params['toolkit_version']!r} is not a dotted version such as 1.17.4"
        mode = effective_mode(pool.toolkit, pool.device_plugin)
        rule = rules._compat_rule(mode, version)
        if rule != "none":
            return "toolkit_version", (f"toolkit {params['toolkit_version']} still selects cuda-compat in "
                                       f"{mode.value} mode (rule {rule!r}); pick one whose rule is 'none'")
    return None


def _busy_problem(pool: NodePool, params: dict[str, Any]) -> tuple[str, str] | None:
    """gpus-busy: the tenant asks for nvidia.com/gpu, so the pool's plugin must advertise that name."""
    plugin = pool.device_plugin
    if plugin.mig.strategy == "mixed" and plugin.mig.enabled:
        return "pool", (f"pool {pool.name!r} advertises MIG instances as nvidia.com/mig-<profile> "
                        "(strategy mixed): a tenant holding nvidia.com/gpu is not simulated there")
    if plugin.sharing.rename_by_default:
        return "pool", f"pool {pool.name!r} advertises nvidia.com/gpu.shared (renameByDefault), not nvidia.com/gpu"
    if params["gpus"] is not None and params["gpus"] < 1:
        return "gpus", "must be >= 1 (leave it out for every GPU of the node)"
    if params["duration_s"] is not None and params["duration_s"] < 1:
        return "duration_s", "must be >= 1 (leave it out for sleep infinity)"
    return None


def _rejects_every_probe(pool: NodePool, driver: DriverVersion) -> tuple[str, str] | None:
    """probe-images-rejected: the driver's native CUDA must be older than every probe image's, and the
    pool's GPU unable to run them through forward compatibility (data-center GPUs do: the images
    list their branches), or no image is refused."""
    from gpuconf import images

    native = tables.native_cuda(driver)
    oldest = min(parse_cuda(p.cuda).major_minor for p in images.matrix())
    if native is None or native.major_minor >= oldest:
        return "driver", (f"driver {driver} runs CUDA {native.major}.{native.minor} natively" if native else
                          f"driver {driver} has no known native CUDA") + \
            f": the probe images (CUDA {oldest.major}.{oldest.minor} and later) would start"
    if pool.gpu.gpu_class == "data-center":
        return "pool", (f"pool {pool.name!r} has data-center GPUs ({pool.gpu.name}): the images' forward-compatibility "
                        "terms admit them; the fault needs a GPU class that has none (a GeForce)")
    return None


def _resolve_fault(profile: Profile, raw: Any, where: _Where, at: Path_) -> FaultSpec:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("id"), str):
        raise where.error(at, "a fault is a mapping with an id (and pool, node, gpu, parameters)")
    catalog = fault_catalog()
    fault = catalog.get(raw["id"])
    if fault is None:
        raise where.error((*at, "id"), f"unknown fault {raw['id']!r} (known: {', '.join(sorted(catalog))})")
    targeting = {"cluster": (), "node": ("pool", "node"), "gpu": ("pool", "node", "gpu")}[fault.scope]
    names = [p.name for p in fault.parameters]
    for key in raw:
        if key == "id" or key in names or key in targeting:
            continue
        if key in ("pool", "node", "gpu"):
            raise where.error((*at, key), f"{fault.id} is a {fault.scope}-scope fault: it takes no {key}", key=True)
        raise where.error((*at, key), f"unknown parameter for {fault.id} (parameters: "
                                      f"{', '.join(names + list(targeting)) or 'none'})", key=True)
    pool: NodePool | None = None
    node: int | None = None
    gpu: int | None = None
    if fault.scope != "cluster":
        pool_name = raw.get("pool", profile.pools[0].name)
        if not isinstance(pool_name, str) or pool_name not in {p.name for p in profile.pools}:
            raise where.error((*at, "pool"), f"no pool named {pool_name!r} (pools: "
                                             f"{', '.join(p.name for p in profile.pools)})")
        pool = profile.pool(pool_name)
        raw_node = raw.get("node", 0)
        if raw_node != "all":
            if not isinstance(raw_node, int) or isinstance(raw_node, bool) or not 0 <= raw_node < pool.count:
                raise where.error((*at, "node"), f"{raw_node!r} is not a node of pool {pool.name!r} "
                                                 f"(0-{pool.count - 1}, or \"all\")")
            node = raw_node
    if fault.scope == "gpu":
        assert pool is not None
        gpu_raw = raw.get("gpu", 0)
        if not isinstance(gpu_raw, int) or isinstance(gpu_raw, bool) or not 0 <= gpu_raw < pool.gpus_per_node:
            raise where.error((*at, "gpu"), f"{gpu_raw!r} is not a GPU of pool {pool.name!r} "
                                            f"(0-{pool.gpus_per_node - 1})")
        gpu = gpu_raw
    params: dict[str, Any] = {}
    for param in fault.parameters:
        value, problem = _param_value(param, raw.get(param.name, param.default), pool)
        if problem:
            raise where.error((*at, param.name) if param.name in raw else (*at, "id"),
                              f"{param.name}: {problem}" if param.name not in raw else problem)
        params[param.name] = value
    for need in fault.requires:
        problem = _requirement_problem(need, profile, pool, params)
        if problem:
            raise where.error((*at, "pool") if "pool" in raw else (*at, "id"), f"{fault.id} needs {need}: {problem}")
    bad = _fault_checks(fault, pool, gpu, params) if pool else _cluster_fault_checks(fault, profile, params)
    if bad:
        name, problem = bad
        raise where.error((*at, name) if name in raw else (*at, "id"),
                          problem if name in raw else f"{name}: {problem}")
    return FaultSpec(fault.id, pool.name if pool else None, node, gpu, tuple(params.items()))


def _spec_to_raw(spec: FaultSpec) -> dict[str, Any]:
    """A resolved FaultSpec back in profile-file form, to validate it against another profile."""
    raw: dict[str, Any] = {"id": spec.id}
    if spec.pool is not None:
        raw.update(pool=spec.pool, node="all" if spec.node is None else spec.node)
    if spec.gpu is not None:
        raw["gpu"] = spec.gpu
    for name, value in spec.params:
        raw[name] = str(value) if isinstance(value, DriverVersion) else dict(value) if isinstance(value, tuple) \
            else value.name if isinstance(value, GpuModel) else value
    return raw


def with_faults(profile: Profile, faults: Iterable[FaultSpec | Mapping[str, Any]]) -> Profile:
    """A copy of ``profile`` with ``faults`` added: profile-file style mappings
    (``{"id": "gpu-lost", "pool": "h100", "node": 0, "gpu": 3}``) or FaultSpecs."""
    where = _Where(f"with_faults({profile.name})")
    added = [_resolve_fault(profile, _spec_to_raw(f) if isinstance(f, FaultSpec) else f, where,
                            ("faults", len(profile.faults) + i)) for i, f in enumerate(faults)]
    return replace(profile, faults=profile.faults + tuple(added))


def fault_words(profile: Profile) -> tuple[str, ...]:
    """Each fault the profile injects, in its order, as the reports name it: its id and where the profile
    put it, the node by the name the simulated cluster gives it ("gpu-lost on h100-0 GPU 3", "driver-skew
    on every node of pool h100", "no-runtimeclass (cluster-wide)")."""
    words = []
    for f in profile.faults:
        if f.pool is None:
            words.append(f"{f.id} (cluster-wide)")
            continue
        where = f"every node of pool {f.pool}" if f.node is None else f"{f.pool}-{f.node}"
        gpu = "" if f.gpu is None else f"{',' if f.node is None else ''} GPU {f.gpu}"
        words.append(f"{f.id} on {where}{gpu}")
    return tuple(words)


# --- expansion --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SimMigInstance:
    uuid: str  # MIG-<uuid>
    profile: str  # 1g.10gb
    gi: int  # GPU instance id, 1-based in layout order
    slices: int
    memory_gib: int  # the GiB in the profile's name
    memory_mib: int  # what CUDA reports for the instance (nvidia-smi mig -lgip's figure where known)


@dataclass(frozen=True, slots=True)
class SimGpu:
    index: int  # nvidia-smi / NVML index
    minor: int  # /dev/nvidia<minor>
    uuid: str  # GPU-<uuid>, stable across loads and faults
    pci_bus_id: str  # NVML form, 00000000:18:00.0
    memory_mib: int
    present: bool = True  # False: the GPU does not enumerate (gpu-lost)
    health: str = "Healthy"  # what the device plugin's ListAndWatch reports
    mig: tuple[SimMigInstance, ...] = ()  # the instances that really exist
    xids: tuple[int, ...] = ()  # critical Xids logged before the device plugin's current run
    ecc_uncorrected: int = 0  # uncorrectable ECC errors (volatile and aggregate), row remap pending
    remap_pending: bool = False  # a row remapped after correctable errors, applied at the next reset
    remap_failed: bool = False  # row remapping failed: the spare rows are exhausted
    dra_attributes: tuple[tuple[str, str], ...] = ()  # ResourceSlice attributes that lie
    exported: bool = True  # False: the node's DCGM exporter leaves it out (metrics-gpu-missing)
    pcie_link: tuple[int, int] | None = None  # (gen, width) the link trained at; None: its model's (pcie-link-degraded)
    pcie_replays: int = 0  # PCIe replays while the probe's copies run (pcie-replays)
    model: GpuModel | None = None  # another model than the pool's (mixed-gpu-models); None: the pool's
    #: a GPU gone from the bus that the DRA driver's ResourceSlice still lists (dra-slice-stale)
    dra_listed: bool = False
    #: a MIG-enabled GPU the DRA driver also publishes whole, as type gpu (dra-mig-parent-published)
    dra_whole_too: bool = False
    #: MIG mode on as NVML reports it, instances or not: set where mig-manager enabled it; a GPU whose
    #: instances are gone (mig-layout-drift to none, mig-apply-failed) keeps it
    mig_mode: bool = False
    #: device taints (key, value, effect) NVIDIA's DRA driver publishes on the GPU's slice device
    #: (KEP-5055; its NVMLDeviceHealthCheck: gpu.nvidia.com/xid, gpu-lost, unmonitored) (dra-device-taint)
    dra_taints: tuple[tuple[str, str, str], ...] = ()

    @property
    def mig_enabled(self) -> bool:
        """MIG mode on: what NVML's current mode says, whether or not instances exist."""
        return self.mig_mode or bool(self.mig)

    @property
    def dra_pci_bus_id(self) -> str:
        """The form DRA's resource.kubernetes.io/pciBusID uses (4-digit domain, lower case)."""
        return self.pci_bus_id[4:].lower()


@dataclass(frozen=True, slots=True)
class TenantPod:
    """A tenant's workload already running on a node when the suite arrives (gpus-busy): a training
    worker holding GPUs through the device plugin, its container running ``sleep``."""

    namespace: str
    name: str
    gpus: int | None  # nvidia.com/gpu it requests; None: every one the node advertises
    duration_s: int | None  # how long its ``sleep`` runs; None: ``sleep infinity``


@dataclass(frozen=True, slots=True)
class SimNode:
    """One simulated node: the declared pool plus the effective facts, faults applied."""

    name: str  # <pool>-<index>
    pool: NodePool  # what was declared (the device-plugin ConfigMap, what GFD reads)
    index: int
    gpus: tuple[SimGpu, ...]
    driver: DriverVersion  # user-mode driver (libcuda, NVML): what nvidia-smi's library reports
    kernel_driver: DriverVersion  # the loaded nvidia.ko; differs only under library-mismatch
    uvm: bool  # nvidia_uvm loaded, /dev/nvidia-uvm exists
    toolkit: Toolkit  # effective
    device_plugin: DevicePluginConfig  # what the running plugin does
    device_plugin_registered: bool  # whether the plugin, when it runs, registers with the kubelet
    dra: DraConfig
    interconnect: Interconnect
    label_overrides: tuple[tuple[str, str], ...] = ()  # GFD labels that lie, applied last
    exporter: bool = True  # False: no DCGM exporter pod runs on the node (metrics-exporter-absent)
    #: False: the operator deploys no toolkit pod on the node (its nvidia.com/gpu.deploy.container-toolkit
    #: label is false: the toolkit is installed on the host), so no API object shows its version
    #: (toolkit-version-unreadable)
    toolkit_pod: bool = True
    #: the DCGM exporter release (<DCGM>-<exporter>) its pod runs; None: the current one (dcgm-vulnerable)
    exporter_release: str | None = None
    #: the DRA driver prepares GPU (index + dra_shift) mod GPUs for an allocated gpu-<index>
    #: (dra-prepares-wrong-device); 0: the allocated one
    dra_shift: int = 0
    #: the device plugin's Allocate answers a MIG instance with that instance and its next sibling on
    #: the same GPU (mig-sibling-visible)
    mig_sibling_visible: bool = False
    #: the node drops traffic between pods (a default-deny NetworkPolicy, a CNI without pod-to-pod
    #: routes): a probe's connection to a peer pod times out (pod-traffic-blocked)
    pod_traffic_blocked: bool = False
    #: the kubelet's device manager lost its checkpoint: it hands devices running pods hold to new pods
    #: again, the lowest first (gpu-double-allocated)
    double_allocates: bool = False
    #: spec.unschedulable: an administrator cordoned the node (node-cordoned)
    unschedulable: bool = False
    #: spec.taints an administrator set, (key, value, effect) (node-tainted); the node lifecycle
    #: controller's own taints follow from unschedulable and the conditions, not from here
    taints: tuple[tuple[str, str, str], ...] = ()
    #: the Ready condition: True, False (the kubelet reports its runtime network down) or Unknown
    #: (the kubelet stopped posting; the node lifecycle controller marked it) (node-not-ready)
    ready: str = "True"
    ready_since_s: int = 0  # how long ago the Ready condition last changed
    #: what mig-manager reports in nvidia.com/mig.config.state after applying the pool's layout:
    #: success, or failed (mig-apply-failed); pending and rebooting, its states mid-change, are not simulated
    mig_config_state: str = "success"
    tenant_pods: tuple[TenantPod, ...] = ()  # tenant workloads bound to the node (gpus-busy)
    #: GPU Feature Discovery runs and labels the node (False under the GPU Operator's GPUCluster mode,
    #: which deploys no GFD: the node then carries no nvidia.com/ label at all)
    gfd: bool = True
    faults: tuple[str, ...] = ()  # ids of the faults applied here (provenance)

    @property
    def model(self) -> GpuModel:
        return self.pool.gpu

    @property
    def present_gpus(self) -> tuple[SimGpu, ...]:
        return tuple(g for g in self.gpus if g.present)

    def model_of(self, gpu: SimGpu) -> GpuModel:
        """The GPU's own model: the pool's unless mixed-gpu-models put another one in its slot."""
        return gpu.model or self.pool.gpu

    @property
    def mode(self) -> Mode:
        return effective_mode(self.toolkit, self.device_plugin)


@dataclass(frozen=True)
class SimCluster:
    profile: Profile
    nodes: tuple[SimNode, ...]
    runtime_classes: tuple[RuntimeClassSpec, ...]  # effective (no-runtimeclass removes nvidia)
    #: CEL selectors the GPU DeviceClass carries beyond the DRA driver's own, left from earlier
    #: hardware (extended-resource-stale)
    gpu_class_selectors: tuple[str, ...] = ()

    @property
    def extended_resource(self) -> str | None:
        """The extended resource the GPU DeviceClass maps (KEP-5004), None when none does."""
        return next((p.dra.extended_resource for p in self.profile.pools if p.dra.extended_resource), None)

    def node(self, name: str) -> SimNode:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)


def _uuid(key: str) -> str:
    """A UUID-shaped id derived from ``key`` (profile/node/index): stable across loads and runs.
    Real GPU UUIDs are not RFC 4122 versioned either, so none is set."""
    h = hashlib.sha1(f"gpuconf-sim/{key}".encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

#: PCI buses of the eight GPUs of an HGX H100/H200 baseboard; other counts continue the pattern.
_HGX_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)


def _pci(index: int) -> str:
    bus = _HGX_BUSES[index] if index < len(_HGX_BUSES) else 0x10 * (index - len(_HGX_BUSES)) + 0x1B
    return f"00000000:{bus:02X}:00.0"


def _mig_instances(prefix: str, counts: MigCounts, gpu: GpuModel) -> tuple[SimMigInstance, ...]:
    profiles = _mig_sets()[gpu.name]
    out: list[SimMigInstance] = []
    for name, count in counts:
        p = profiles[name]
        for _ in range(count):
            gi = len(out) + 1
            out.append(SimMigInstance(f"MIG-{_uuid(f'{prefix}/mig/{gi}')}", name, gi, p.slices,
                                      p.memory_gib, p.memory_mib))
    return tuple(out)


def _pool_nodes(profile: str, pool: NodePool, gfd: bool = True) -> list[SimNode]:
    memory = pool.gpu.memory_mib or 0
    pcis = [_pci(i) for i in range(pool.gpus_per_node)]
    mig = pool.device_plugin.mig
    nodes = []
    for n in range(pool.count):
        name = f"{pool.name}-{n}"
        gpus = tuple(
            SimGpu(i, i, f"GPU-{_uuid(f'{profile}/{name}/{i}')}", pcis[i], memory,
                   mig=_mig_instances(f"{profile}/{name}/{i}", mig.for_gpu(i), pool.gpu) if mig.enabled else (),
                   mig_mode=mig.enabled and bool(mig.for_gpu(i)))
            for i in range(pool.gpus_per_node))
        nodes.append(SimNode(name, pool, n, gpus, pool.driver, pool.driver, True, pool.toolkit, pool.device_plugin,
                             True, pool.dra, pool.interconnect, gfd=gfd))
    return nodes


def _gpu(node: SimNode, index: int, **changes: Any) -> SimNode:
    gpus = tuple(replace(g, **changes) if g.index == index else g for g in node.gpus)
    return replace(node, gpus=gpus)


# One function per fault: (node, spec) -> node. Each changes exactly the facts its catalog entry
# lists under `alters` (tests/sim/test_profiles.py holds them to it).
_NodeFault = Callable[[SimNode, FaultSpec], SimNode]


def _mig_drift(node: SimNode, f: FaultSpec) -> SimNode:
    assert f.gpu is not None
    prefix = f"{node.name}/{f.gpu}/drift"
    return _gpu(node, f.gpu, mig=_mig_instances(prefix, f.param("layout"), node.model))


def _compat_broken(node: SimNode, f: FaultSpec) -> SimNode:
    pinned = effective_mode(node.toolkit, node.device_plugin)  # the downgrade must not change the mode
    return replace(node, toolkit=replace(node.toolkit, version=f.param("toolkit_version"), mode=pinned))


def _slow_link(node: SimNode, f: FaultSpec) -> SimNode:
    attr = "nic_busbw_gbps" if f.param("link") == "nic" else "busbw_gbps"
    value = getattr(node.interconnect, attr)
    return replace(node, interconnect=replace(node.interconnect, **{attr: value * f.param("factor")}))


def _busy(node: SimNode, f: FaultSpec) -> SimNode:
    pod = TenantPod(TENANT_NAMESPACE, f"train-{node.name}-{len(node.tenant_pods)}", f.param("gpus"),
                    f.param("duration_s"))
    return replace(node, tenant_pods=(*node.tenant_pods, pod))


def _device_taint(node: SimNode, f: FaultSpec) -> SimNode:
    """The DRA driver's health check tainted the GPU's slice device; an Xid taint also leaves the Xid
    in the GPU's log, where DCGM (and so the exporter's DCGM_FI_DEV_XID_ERRORS) sees it."""
    gpu = node.gpus[cast(int, f.gpu)]
    key, value, effect = f.param("key"), f.param("value"), f.param("effect")
    taints = (*[t for t in gpu.dra_taints if (t[0], t[2]) != (key, effect)], (key, value, effect))
    xids = (*gpu.xids, int(value)) if key == XID_TAINT and value.isdigit() else gpu.xids
    return _gpu(node, gpu.index, dra_taints=taints, xids=xids)


#: The device taint key NVIDIA's DRA driver uses for an Xid, the Xid as its value (gpu-health-checking guide).
XID_TAINT = "gpu.nvidia.com/xid"

#: Faults of the whole cluster, applied in expand() to its cluster-level facts.
_CLUSTER_FAULTS = ("no-runtimeclass", "extended-resource-stale")

#: Where gpus-busy puts its tenant's training pods.
TENANT_NAMESPACE = "tenant-a"

_NODE_FAULTS: dict[str, _NodeFault] = {
    "gpu-lost": lambda n, f: _gpu(n, cast(int, f.gpu), present=False),
    "gpu-unhealthy": lambda n, f: _gpu(n, cast(int, f.gpu), health="Unhealthy"),
    "label-drift": lambda n, f: replace(n, label_overrides=(*[(k, v) for k, v in n.label_overrides
                                                             if k != f.param("label")],
                                                           (f.param("label"), f.param("value")))),
    "driver-skew": lambda n, f: replace(n, driver=f.param("driver"), kernel_driver=f.param("driver")),
    "probe-images-rejected": lambda n, f: replace(n, driver=f.param("driver"), kernel_driver=f.param("driver")),
    "uvm-missing": lambda n, f: replace(n, uvm=False),
    "library-mismatch": lambda n, f: replace(n, kernel_driver=f.param("kernel_driver")),
    "visible-devices-all": lambda n, f: replace(n, toolkit=replace(n.toolkit, visible_devices="all")),
    "envvar-leak": lambda n, f: replace(n, toolkit=replace(n.toolkit, accept_envvar_unprivileged=True)),
    "runtime-not-default": lambda n, f: replace(n, toolkit=replace(n.toolkit, default_runtime="runc")),
    "toolkit-cdi-mode": lambda n, f: replace(n, toolkit=replace(n.toolkit, mode=Mode(f.param("mode")))),
    "compat-libs-broken": _compat_broken,
    # an older toolkit release with the node's configured mode (auto resolves as that release does)
    "toolkit-vulnerable": lambda n, f: replace(n, toolkit=replace(n.toolkit, version=f.param("toolkit_version"))),
    "toolkit-version-unreadable": lambda n, f: replace(n, toolkit_pod=False),
    "dcgm-vulnerable": lambda n, f: replace(n, exporter_release=f.param("release")),
    "mig-layout-drift": _mig_drift,
    # mig-parted turned MIG mode on and then failed to create the instances (mig_mode stays set)
    "mig-apply-failed": lambda n, f: replace(n, gpus=tuple(replace(g, mig=()) for g in n.gpus),
                                             mig_config_state="failed"),
    "mps-memory-limit-unset": lambda n, f: replace(n, device_plugin=replace(
        n.device_plugin, sharing=replace(n.device_plugin.sharing, mps_memory_limit=False))),
    "timeslice-replicas-wrong": lambda n, f: replace(n, device_plugin=replace(
        n.device_plugin, sharing=replace(n.device_plugin.sharing, replicas=f.param("replicas")))),
    "dra-attr-wrong": lambda n, f: _gpu(n, cast(int, f.gpu), dra_attributes=(
        *[(k, v) for k, v in n.gpus[cast(int, f.gpu)].dra_attributes if k != f.param("attribute")],
        (f.param("attribute"), f.param("value")))),
    "dra-double-count": lambda n, f: replace(n, device_plugin=replace(n.device_plugin, enabled=True)),
    "nccl-slow-link": _slow_link,
    "nccl-hang": lambda n, f: replace(n, interconnect=replace(n.interconnect, hang=True)),
    "plugin-not-registered": lambda n, f: replace(n, device_plugin_registered=False),
    "xid-errors": lambda n, f: _gpu(n, cast(int, f.gpu), xids=(*n.gpus[cast(int, f.gpu)].xids, f.param("xid"))),
    "ecc-uncorrectable": lambda n, f: _gpu(n, cast(int, f.gpu), ecc_uncorrected=f.param("count")),
    "metrics-gpu-missing": lambda n, f: _gpu(n, cast(int, f.gpu), exported=False),
    "metrics-exporter-absent": lambda n, f: replace(n, exporter=False),
    "row-remap-failure": lambda n, f: _gpu(n, cast(int, f.gpu), remap_failed=True),
    "row-remap-pending": lambda n, f: _gpu(n, cast(int, f.gpu), remap_pending=True),
    "pcie-link-degraded": lambda n, f: _gpu(n, cast(int, f.gpu), pcie_link=(f.param("gen"), f.param("width"))),
    "pcie-replays": lambda n, f: _gpu(n, cast(int, f.gpu), pcie_replays=f.param("replays")),
    "nccl-nvls-unavailable": lambda n, f: replace(n, interconnect=replace(
        n.interconnect, nvls=False, busbw_gbps=f.param("busbw_gbps"))),
    "dra-prepares-wrong-device": lambda n, f: replace(n, dra_shift=f.param("shift")),
    "mig-sibling-visible": lambda n, f: replace(n, mig_sibling_visible=True),
    "pod-traffic-blocked": lambda n, f: replace(n, pod_traffic_blocked=True),
    "gpu-double-allocated": lambda n, f: replace(n, double_allocates=True),
    "dra-mig-parent-published": lambda n, f: _gpu(n, cast(int, f.gpu), dra_whole_too=True),
    "dra-slice-stale": lambda n, f: _gpu(n, cast(int, f.gpu), present=False, dra_listed=True),
    "dra-device-taint": _device_taint,
    "mixed-gpu-models": lambda n, f: _gpu(n, cast(int, f.gpu), model=f.param("model"),
                                          memory_mib=f.param("model").memory_mib),
    "mig-strategy-mismatch": lambda n, f: replace(n, device_plugin=replace(
        n.device_plugin, mig=replace(n.device_plugin.mig, strategy=f.param("plugin_strategy")))),
    "node-cordoned": lambda n, f: replace(n, unschedulable=True),
    "node-tainted": lambda n, f: replace(n, taints=(
        *[t for t in n.taints if (t[0], t[2]) != (f.param("key"), f.param("effect"))],
        (f.param("key"), f.param("value"), f.param("effect")))),
    "node-not-ready": lambda n, f: replace(n, ready=f.param("status"), ready_since_s=f.param("since_s")),
    "gpus-busy": _busy,
}


def expand(profile: Profile) -> SimCluster:
    """The concrete cluster: every node of every pool, faults applied in the order listed."""
    nodes: list[SimNode] = []
    first: dict[str, int] = {}
    for pool in profile.pools:
        first[pool.name] = len(nodes)
        nodes.extend(_pool_nodes(profile.name, pool, gfd=not profile.operator.gpucluster))
    classes = profile.runtime_classes
    selectors: tuple[str, ...] = ()
    for fault in profile.faults:
        if fault.id == "no-runtimeclass":
            classes = tuple(rc for rc in classes if rc.name != "nvidia")
            continue
        if fault.id == "extended-resource-stale":
            selectors = (*selectors, f"device.attributes['gpu.nvidia.com'].productName == '{fault.param('product')}'")
            continue
        assert fault.pool is not None
        pool = profile.pool(fault.pool)
        targets = range(pool.count) if fault.node is None else (fault.node,)
        apply = _NODE_FAULTS[fault.id]
        for n in targets:
            i = first[pool.name] + n
            nodes[i] = apply(nodes[i], fault)
            nodes[i] = replace(nodes[i], faults=(*nodes[i].faults, fault.id))
    return SimCluster(profile, tuple(nodes), classes, selectors)


def expand_nodes(profile: Profile) -> list[SimNode]:
    return list(expand(profile).nodes)

