"""MIG checks: on a node whose GPUs are cut into MIG instances, the layout it declares is the one
it has, each instance is isolated, and no MIG-enabled GPU is also handed out whole.

The suite observes, it never reconfigures (domain.md §6: changing a MIG layout stops all work on
the GPU). One campaign puts on every MIG node, per advertised resource (``nvidia.com/mig-<profile>``
with the mixed strategy, ``nvidia.com/gpu`` with single), an ``all`` pod requesting every
allocatable instance and a ``one`` pod requesting a single one (:func:`plan_node`); the two queue
for the same instances. Three checks read the result:

* ``mig.layout-matches-config``: the instance counts per profile agree in every view that has
  them: the layout mig-manager was told to apply (``nvidia.com/mig.config`` looked up in its
  mig-parted config), GFD's labels (``nvidia.com/mig-<profile>.count``; with single,
  ``nvidia.com/gpu.count`` and the ``-MIG-<profile>`` product), the device plugin's capacity, and
  the MIG instances the ``all`` pods are given (NVIDIA_VISIBLE_DEVICES, which must name exactly
  what was granted, with the one instance CUDA enumerates of the pod's profile).
* ``mig.instance-isolated``: each ``one`` pod is given exactly one instance, of its profile, with
  that profile's memory (:func:`memory_band`: the real ``nvidia-smi mig -lgip`` figure of
  gpuconf/data/mig_profiles.yaml within :data:`LGIP_SPREAD`, else a band below the name's GiB
  derived from every real figure), runs
  the kernel on it, and is given no other instance, no whole GPU and no GPU but the instance's
  parent, as NVIDIA_VISIBLE_DEVICES, NVML and /dev/nvidiaN show.
* ``mig.not-also-full-gpu``: with single, every ``nvidia.com/gpu`` is an instance (no ``GPU-`` id
  in NVIDIA_VISIBLE_DEVICES, no GPU with MIG mode off in NVML); with mixed, the GPUs behind
  ``nvidia.com/gpu`` (the whole-node probe) have MIG disabled, are none of the MIG instances'
  parents and come with no instance.

Decisions:

* **Desired before actual**: a node whose ``nvidia.com/mig.config`` may ask for instances (any
  config but mig-parted's ``all-disabled`` / ``all-enabled``) is judged even when no view shows an
  instance; ``nvidia.com/mig.config.state=failed``, or a config asking for instances where GFD's
  labels, the plugin's capacity and the probes show none (MIG mode on without instances: CUDA
  enumerates nothing, the plugin advertises nothing), fails the layout check naming the config,
  ahead of the ``-MIG-INVALID`` and strategy findings that follow from it. GPUs without instances
  are named by count (GFD's ``gpu.count`` under mixed): nothing is advertised on them, so no probe
  can read their UUIDs.
* **GFD's count labels follow the real instances** (GFD enumerates them through NVML), so only
  mig-manager's ``nvidia.com/mig.config`` says what the layout should be. Without that label, or
  without a readable mig-parted config, the layout check compares the views it has and says the
  declared layout was not available.
* **Instance counts are compared per node**, not per GPU: mig-parted addresses GPUs by host NVML
  index, which a container's NVML renumbers. A config entry for ``devices: all`` is counted over
  the GPUs observed (MIG parents the probes see plus whole GPUs advertised), so a GPU that lost
  every instance and is advertised as nothing escapes an ``all`` entry (explicit indices catch it).
* **CUDA enumerates one MIG device per process** (MIG User Guide, "CUDA device enumeration":
  one MIG device however many are visible, and no whole GPU beside it): CUDA confirms that an
  instance of the pod's profile works, never how many a pod holds or what else it was given.
  Counts and extra devices are read where a real node shows them: NVIDIA_VISIBLE_DEVICES (the
  device plugin's envvar strategy: ``MIG-``/``GPU-`` ids, or ``i:j``/``i`` indices), NVML (every
  physical GPU handed over, with its MIG mode) and /dev/nvidiaN. Without that list (CDI,
  volume-mounts) the ``all`` pods' count is left out of the layout comparison, not guessed, and
  siblings on the instance's own GPU cannot be seen.
* **NVML is the one view of MIG mode**: where it fails in a pod whose NVIDIA_VISIBLE_DEVICES names
  no device (CDI), what ``nvidia.com/gpu`` hands out cannot be told (CUDA never enumerates a
  MIG-enabled GPU, nor a whole GPU beside an instance), so ``mig.not-also-full-gpu`` is NOT TESTED
  naming the failure; a pod whose NVML fails is no proof of zero whole GPUs, and a GPU whose MIG
  mode NVML leaves unread is named as not judged.
* **Config entries with a ``device-filter``** (PCI device ids, which no label carries) apply when
  every profile they name exists on the node's GPU model; when that is ambiguous the declared
  layout is reported as unresolved, never guessed.
* **Unknown GPU models** (no MIG table): the instance memory is not judged; the verdict is
  NOT_TESTED with what did hold.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import yaml

from gpuconf.checks.isolation import GpuView, Sighting
from gpuconf.compat import tables
from gpuconf.nodes.devices import MIG_CLASS, SliceDevice
from gpuconf.outcomes import COULD_NOT_RUN, NOT_APPLICABLE
from gpuconf.probe_pods import probe_pod_name
from gpuconf.probes.cuda import CudaProbeReport, DeviceReport
from gpuconf.verdict import Outcome, Verdict, failed, not_tested, passed

__all__ = [
    "LGIP_MARGIN",
    "LGIP_SPREAD",
    "NAME_CEILING",
    "PROBES_VIEW",
    "SLICE_VIEW",
    "Declared",
    "Listed",
    "MigDevice",
    "MigProfile",
    "PlannedPod",
    "declared_layout",
    "memory_band",
    "name_floor",
    "evaluate_instance_isolated",
    "evaluate_layout_matches_config",
    "evaluate_not_also_full_gpu",
    "gpu_model",
    "labelled_layout",
    "advertised_layout",
    "listed_devices",
    "mig_devices",
    "mig_profiles",
    "mig_invalid",
    "mig_skip_reason",
    "parse_mig_parted",
    "plan_node",
    "pod_name",
    "published_layout",
    "strategy",
    "strategy_disagreement",
]

GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
STRATEGY_LABEL = "nvidia.com/mig.strategy"
CONFIG_LABEL = "nvidia.com/mig.config"
CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"
PRODUCT_LABEL = "nvidia.com/gpu.product"
INVALID_SUFFIX = "-MIG-INVALID"

#: The rounding of ``nvidia-smi mig -lgip``'s Memory column (GiB to two decimals) and of CUDA's
#: figure against it: the one real pairing found (RTX PRO 6000 1g.24gb: lgip 23.62, CUDA 24192 MiB =
#: 23.625 GiB) agrees to that rounding.
LGIP_MARGIN = 0.01
#: How far one profile's memory strays from the lgip_gib in mig_profiles.yaml on another driver or
#: host, as a fraction: real figures of one profile differ by up to 2.1 % (RTX PRO 6000 1g.24gb: 23.12
#: GiB on 580.105.06, 23.62 elsewhere; H100 NVL 1g.12gb: 10.75 and 10.62; every reading with its source
#: in tests/data/real/mig/instance-memory.csv), plus :data:`LGIP_MARGIN`, rounded up to half a percent.
#: Profiles of different memory on one GPU are at least 1.9 x apart, so an instance showing a bigger
#: profile's memory stays outside.
LGIP_SPREAD = 0.035
#: The upper bound of a profile without an lgip figure, as a fraction of the GiB in its name: CUDA
#: never reports more than the name (every real lgip figure is below it).
NAME_CEILING = 1.02

_CUDA_MIG_NAME = re.compile(r"\bMIG\s+(\S+)\s*$")  # "NVIDIA A100-SXM4-80GB MIG 3g.40gb"
_COUNT_LABEL = re.compile(r"^nvidia\.com/mig-(.+)\.count$")
_SINGLE_PRODUCT = re.compile(r"-MIG-(.+?)(?:-SHARED)?$")
_INDEX_MIG = re.compile(r"^\d+:\d+$")  # deviceIDStrategy index: <gpu>:<instance>

#: The probes' view in the layout comparison.
PROBES_VIEW = "the MIG instances the probes are given"
#: The DRA driver's view: the devices of type mig in the node's ResourceSlice.
SLICE_VIEW = "the DRA driver's ResourceSlice"

Layout = Mapping[str, int]  # MIG profile -> instances


def _fmt(layout: Layout | None) -> str:
    if layout is None:
        return "unknown"
    items = [f"{p} x{n}" for p, n in sorted(layout.items()) if n]
    return ", ".join(items) if items else "no instances"


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _int(value: str | None) -> int | None:
    text = str(value or "").strip()
    return int(text) if text.isdigit() else None


# -------------------------------------------------------------------------------------------------
# What the node says about itself


def strategy(labels: Mapping[str, str]) -> str:
    """GFD's ``nvidia.com/mig.strategy`` (none when absent)."""
    return labels.get(STRATEGY_LABEL, "none") or "none"


def mig_invalid(labels: Mapping[str, str]) -> bool:
    """GFD's ``<model>-MIG-INVALID`` product: the layout does not fit mig.strategy=single."""
    return labels.get(PRODUCT_LABEL, "").removesuffix("-SHARED").endswith(INVALID_SUFFIX)


def _labelled_instances(labels: Mapping[str, str]) -> bool:
    """GFD labels MIG instances: per-profile counts (mixed) or a ``-MIG-<profile>`` product (single)."""
    single = _SINGLE_PRODUCT.search(labels.get(PRODUCT_LABEL, "")) and not mig_invalid(labels)
    return bool(single) or any((_int(v) or 0) > 0 for k, v in labels.items() if _COUNT_LABEL.match(k))


def published_layout(devices: Iterable[SliceDevice], *, usable_only: bool = False) -> dict[str, int] | None:
    """MIG instances per profile that NVIDIA's DRA driver publishes (devices of type ``mig`` with
    their ``profile`` attribute; ``?`` for one without); None when it publishes no MIG device."""
    out: Counter[str] = Counter(d.attributes.get("profile") or "?" for d in devices
                                if d.kind == "mig" and (d.usable or not usable_only))
    return dict(out) if any(d.kind == "mig" for d in devices) else None


def mig_skip_reason(node: str, labels: Mapping[str, str], capacity: Mapping[str, str],
                    published: Mapping[str, int] | None = None) -> str | None:
    """Why ``node`` has no MIG to check, or None when its labels, its resources or its DRA slice
    (``published``, :func:`published_layout`) show MIG (also when they disagree: the layout check
    judges that, it is never skipped).

    ``nvidia.com/mig.strategy`` alone shows nothing: GFD writes the device plugin's configured
    strategy on every node, MIG-capable or not (typically ``single``, the GPU Operator's default)."""
    mode = strategy(labels)
    mig_resources = sorted(k for k in capacity if k.startswith(MIG_PREFIX) and (_int(capacity[k]) or 0) > 0)
    if mig_resources or _labelled_instances(labels) or mig_invalid(labels) or published:
        return None
    config = labels.get(CONFIG_LABEL)
    if labels.get(CONFIG_STATE_LABEL) == "failed" or (config and _asks_by_name(config) is not False):
        return None  # mig-manager was told to cut the GPUs: whether it did is the layout check's to judge
    capable = labels.get("nvidia.com/mig.capable", "unlabelled")
    if mode in ("single", "mixed"):
        return (f"{node} has no GPU with MIG enabled ({STRATEGY_LABEL}={mode} is the device plugin's configured "
                f"strategy, nvidia.com/mig.capable={capable}; no MIG instance is labelled or advertised): no MIG "
                "layout to check")
    return (f"{node} does not use MIG ({STRATEGY_LABEL}={labels.get(STRATEGY_LABEL, 'unlabelled')}, "
            f"nvidia.com/mig.capable={capable})")


def strategy_disagreement(labels: Mapping[str, str], capacity: Mapping[str, str]) -> str | None:
    """GFD and the device plugin running different MIG strategies, told from what each publishes:
    GFD's per-profile count labels (mixed) or ``-MIG-<profile>`` product (single) against the
    plugin's ``nvidia.com/mig-<profile>`` resources (mixed) or instances as ``nvidia.com/gpu``
    (single). None when they agree or one of them shows no MIG."""
    counted = {m.group(1): _int(v) or 0 for k, v in labels.items() if (m := _COUNT_LABEL.match(k))}
    mig_resources = {k[len(MIG_PREFIX):]: _int(v) or 0 for k, v in capacity.items() if k.startswith(MIG_PREFIX)}
    single = _SINGLE_PRODUCT.search(labels.get(PRODUCT_LABEL, "")) and not mig_invalid(labels)
    whole = _int(capacity.get(GPU)) or 0
    if single and mig_resources:
        offered = ", ".join(f"{MIG_PREFIX}{p}: {n}" for p, n in sorted(mig_resources.items()))
        return (f"GFD labels {STRATEGY_LABEL}={strategy(labels)} ({PRODUCT_LABEL}={labels.get(PRODUCT_LABEL)}) while "
                f"the device plugin advertises {offered} (strategy mixed)")
    if any(counted.values()) and not mig_resources and whole:
        return (f"GFD labels MIG instances per profile ({_fmt(counted)}; {STRATEGY_LABEL}={strategy(labels)}) while "
                f"the device plugin advertises no {MIG_PREFIX}<profile> resource but {GPU}: {whole} (strategy single "
                "or none)")
    return None


def labelled_layout(labels: Mapping[str, str]) -> dict[str, int] | None:
    """The layout GFD labels: per-profile ``.count`` labels (mixed) or ``nvidia.com/gpu.count``
    instances of the product's ``-MIG-<profile>`` (single); None when the labels say nothing
    (also for a ``-MIG-INVALID`` product, which names no profile)."""
    if strategy(labels) == "single" and not mig_invalid(labels):
        match = _SINGLE_PRODUCT.search(labels.get(PRODUCT_LABEL, ""))
        count = _int(labels.get("nvidia.com/gpu.count"))
        return {match.group(1): count} if match and count is not None else None
    out = {m.group(1): _int(v) or 0 for k, v in labels.items() if (m := _COUNT_LABEL.match(k))}
    return out or None


def advertised_layout(labels: Mapping[str, str], amounts: Mapping[str, str]) -> dict[str, int]:
    """Instances per profile in ``amounts`` (capacity or allocatable): ``nvidia.com/mig-<profile>``
    (mixed), or ``nvidia.com/gpu`` under the product label's profile (single; ``?`` unlabelled)."""
    if strategy(labels) == "single":
        match = _SINGLE_PRODUCT.search(labels.get(PRODUCT_LABEL, ""))
        profile = match.group(1) if match and not mig_invalid(labels) else "?"
        return {profile: _int(amounts.get(GPU)) or 0}
    return {k[len(MIG_PREFIX):]: _int(v) or 0 for k, v in amounts.items() if k.startswith(MIG_PREFIX)}


# -------------------------------------------------------------------------------------------------
# MIG profile tables


@dataclass(frozen=True)
class MigProfile:
    name: str
    slices: int
    memory_gib: int
    max_instances: int
    lgip_gib: float | None = None  # what nvidia-smi mig -lgip (and CUDA) report, where a real output says
    lgip_guess: bool = False  # lgip_gib backed by no real output yet


def _norm(name: str) -> str:
    return " ".join(name.replace("-", " ").lower().split())


@cache
def _profile_sets() -> dict[str, dict[str, MigProfile]]:
    out: dict[str, dict[str, MigProfile]] = {}
    for row in tables.load("mig_profiles")["profile_sets"]:
        profiles = {p["name"]: MigProfile(p["name"], p["slices"], p["memory_gib"], p["max_instances"],
                                          p.get("lgip_gib"), bool(p.get("lgip_guess", False)))
                    for p in row["profiles"]}
        for gpu in row["gpus"]:
            out[_norm(gpu)] = profiles
    return out


def mig_profiles(gpu: str | None) -> dict[str, MigProfile] | None:
    """The MIG profiles of a GPU model (NVML name or GFD product, ``-MIG-...``/``-SHARED`` cut off);
    None for a model gpuconf/data/mig_profiles.yaml does not list."""
    if not gpu:
        return None
    base = re.sub(r"-MIG-.*$", "", gpu)
    base = base[: -len("-SHARED")] if base.upper().endswith("-SHARED") else base
    sets = _profile_sets()
    if _norm(base) in sets:
        return sets[_norm(base)]
    model = tables.find_gpu(base)
    return sets.get(_norm(model.name)) if model is not None else None


def gpu_model(labels: Mapping[str, str], reports: Iterable[CudaProbeReport | None] = ()) -> str | None:
    """The GPU model: the parent NVML name a probe saw, else GFD's product label."""
    for report in reports:
        for g in report.nvml_gpus if report is not None else ():
            if g.name:
                return g.name
    return labels.get(PRODUCT_LABEL) or None


# -------------------------------------------------------------------------------------------------
# The declared layout (mig-manager's config)


@dataclass(frozen=True)
class Declared:
    """What ``nvidia.com/mig.config`` resolves to: ``layout`` (node totals) or ``why`` it does not."""

    name: str | None
    layout: dict[str, int] | None
    why: str
    state: str | None = None
    #: whether the config asks for MIG instances on any GPU (None: cannot tell); known even where
    #: ``layout`` counts no GPU to put them on
    asks: bool | None = None


def parse_mig_parted(text: str) -> dict[str, list[dict[str, Any]]]:
    """The ``mig-configs`` of a mig-parted config (v1). Raises ValueError on a malformed one."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"not YAML: {exc}") from exc
    configs = doc.get("mig-configs") if isinstance(doc, dict) else None
    if not isinstance(configs, dict) or not all(isinstance(v, list) for v in configs.values()):
        raise ValueError("no mig-configs mapping of config name to a list of entries")
    return {str(k): [e for e in v if isinstance(e, dict)] for k, v in configs.items()}


def _entry_applies(entry: Mapping[str, Any], profiles: Mapping[str, MigProfile] | None) -> bool | None:
    """Whether an entry applies to this node's GPU model (None: cannot tell)."""
    if "device-filter" not in entry:
        return True
    if profiles is None:
        return None
    names = (entry.get("mig-devices") or {}).keys()
    return all(str(n) in profiles for n in names) if names else None


def declared_layout(labels: Mapping[str, str], configs: Mapping[str, list[dict[str, Any]]] | None, *,
                    source: str, gpus: int, profiles: Mapping[str, MigProfile] | None) -> Declared:
    """The node totals of the layout ``nvidia.com/mig.config`` names in ``configs`` (mig-parted's
    ``mig-configs``, read from ``source``; None with ``source`` saying why there are none), over
    ``gpus`` GPUs for ``devices: all`` entries."""
    name, state = labels.get(CONFIG_LABEL), labels.get(CONFIG_STATE_LABEL)
    if not name:
        return Declared(None, None, f"no {CONFIG_LABEL} label (mig-manager does not manage this node)", state)
    by_name = _asks_by_name(name)
    if configs is None:
        return Declared(name, None, f"{CONFIG_LABEL}={name}, but its mig-parted config is unreadable: {source}",
                        state, by_name)
    entries = configs.get(name)
    if entries is None:
        return Declared(name, None, f"{CONFIG_LABEL}={name} is not a config in {source} "
                        f"(configs: {', '.join(sorted(configs)) or 'none'})", state, by_name)
    applying = []
    for entry in entries:
        applies = _entry_applies(entry, profiles)
        if applies is None:
            return Declared(name, None, f"config {name} in {source} has device-filtered entries, and which applies "
                            "to this node's GPU model cannot be told", state, by_name)
        if applies:
            applying.append(entry)
    asks = any(e.get("mig-enabled") and any(int(n) for n in (e.get("mig-devices") or {}).values()) for e in applying)
    indices = [int(i) for e in applying if isinstance(e.get("devices"), list) for i in e["devices"]]
    count = max([gpus, *(i + 1 for i in indices)])
    total: Counter[str] = Counter()
    for index in range(count):
        chosen: Mapping[str, Any] | None = next(
            (e for e in applying if e.get("devices") == "all"
             or (isinstance(e.get("devices"), list) and index in e["devices"])), None)
        if chosen is not None and chosen.get("mig-enabled"):
            for profile, n in (chosen.get("mig-devices") or {}).items():
                total[str(profile)] += int(n)
    return Declared(name, dict(total), f"{CONFIG_LABEL}={name} in {source}, over {count} GPUs", state, asks)


#: mig-parted's default config names: all-disabled (MIG off) and all-enabled (MIG on, no instance)
#: ask for none; all-balanced and all-<profile> ask for instances on every GPU.
_NO_INSTANCES = ("all-disabled", "all-enabled")
_ASKING = re.compile(r"^all-(?:balanced|\d+g\.\d+gb.*)$")


def _asks_by_name(name: str) -> bool | None:
    """Whether a config asks for MIG instances, by mig-parted's default names alone (None: cannot tell)."""
    if name in _NO_INSTANCES:
        return False
    return True if _ASKING.match(name) else None


def node_gpus(labels: Mapping[str, str], observed: int) -> int:
    """The GPUs a ``devices: all`` config entry covers: those observed (MIG parents the probes saw
    plus whole GPUs advertised), or GFD's ``nvidia.com/gpu.count`` under mixed, which counts every
    physical GPU, MIG-enabled or not (tests/data/real/gfd/SOURCES.md), whichever is more: a GPU
    that lost every instance is advertised as nothing and seen by no probe."""
    counted = _int(labels.get("nvidia.com/gpu.count")) if strategy(labels) == "mixed" else None
    return max(observed, counted or 0)


# -------------------------------------------------------------------------------------------------
# The probe pods


def pod_name(role: str, node: str) -> str:
    """``mig-<role>-<node>``, cut and made unique by a hash of the node name when too long."""
    return probe_pod_name("mig", role, node)


@dataclass(frozen=True)
class PlannedPod:
    """One MIG probe pod: ``all`` requests every allocatable instance of ``resource``, ``one``
    requests one (it waits for the ``all`` pod of the same resource to finish, or runs first)."""

    role: str  # all | one
    profile: str  # the profile behind the resource (single: the product label's)
    resource: str
    count: int
    name: str


def plan_node(node: str, labels: Mapping[str, str], allocatable: Mapping[str, str],
              devices: Sequence[SliceDevice] = ()) -> tuple[PlannedPod, ...]:
    """The MIG pods for ``node``: an ``all`` and a ``one`` pod per advertised profile with an
    allocatable instance; none under a ``-MIG-INVALID`` product (the layout check judges that).
    Where the device plugin advertises no MIG instance, the profiles of the MIG devices the DRA
    driver publishes in ``devices`` (those no taint keeps from allocation), asked for by claims on
    mig.nvidia.com (the node view says how)."""
    if mig_invalid(labels):  # GFD names no profile: what nvidia.com/gpu is there is no instance to ask for
        return ()
    pods = []
    single = strategy(labels) == "single"
    advertised = {p: n for p, n in advertised_layout(labels, allocatable).items() if n >= 1}
    published = published_layout(devices, usable_only=True) or {}
    for profile, n in sorted((advertised or published).items()):
        if n < 1 or profile == "?":
            continue
        resource = MIG_CLASS if not advertised else GPU if single else f"{MIG_PREFIX}{profile}"
        suffix = "" if single and advertised else f"-{profile}"
        pods += [PlannedPod("all", profile, resource, n, pod_name(f"all{suffix}", node)),
                 PlannedPod("one", profile, resource, 1, pod_name(f"one{suffix}", node))]
    return tuple(pods)


# -------------------------------------------------------------------------------------------------
# What a container saw


@dataclass(frozen=True)
class MigDevice:
    """A CUDA device that is a MIG instance."""

    uuid: str
    profile: str | None  # from the CUDA name
    memory_bytes: int | None
    parent_bus: str | None  # the parent GPU's PCI bus id, normalised
    kernel_ok: bool


def _bus(bus_id: str | None) -> str | None:
    """``00000000:18:00.0`` and ``0000:18:00.0`` alike: the domain as a number, the rest lower case."""
    if not bus_id or ":" not in bus_id:
        return None
    domain, rest = bus_id.split(":", 1)
    try:
        return f"{int(domain, 16):x}:{rest.lower()}"
    except ValueError:
        return bus_id.lower()


def _is_mig(d: DeviceReport) -> bool:
    return bool(d.mig) or (d.uuid or "").startswith("MIG-")


def mig_devices(report: CudaProbeReport) -> list[MigDevice]:
    out = []
    for d in report.devices:
        if _is_mig(d):
            match = _CUDA_MIG_NAME.search(d.name or "")
            out.append(MigDevice(d.uuid or f"CUDA device {d.index}", match.group(1) if match else None,
                                 d.total_memory_bytes, _bus(d.pci_bus_id), d.vector_add_ok))
    return out


@dataclass(frozen=True)
class Listed:
    """The devices NVIDIA_VISIBLE_DEVICES names (the device plugin's envvar strategy), in order."""

    mig: tuple[str, ...]  # MIG-<uuid> or <gpu>:<instance>
    whole: tuple[str, ...]  # GPU-<uuid> or <gpu>


def listed_devices(report: CudaProbeReport) -> Listed | None:
    """What NVIDIA_VISIBLE_DEVICES names; None when it names no device ids (unset, ``all``,
    ``none``, ``void`` under CDI, a volume-mounts path)."""
    ids = [v.strip() for v in (report.env.get("NVIDIA_VISIBLE_DEVICES") or "").split(",") if v.strip()]
    mig: list[str] = []
    whole: list[str] = []
    for v in ids:
        if v.startswith("MIG-") or _INDEX_MIG.match(v):
            target = mig
        elif v.startswith("GPU-") or v.isdigit():
            target = whole
        else:
            return None
        if v not in target:
            target.append(v)
    return Listed(tuple(mig), tuple(whole)) if ids else None


def _whole(report: CudaProbeReport) -> dict[str, list[str]]:
    """The whole GPUs a container was given, with where each shows: a CUDA device that is no
    instance, an NVML GPU with MIG mode off, a ``GPU-`` id in NVIDIA_VISIBLE_DEVICES."""
    out: dict[str, list[str]] = {}
    for d in report.devices:
        if not _is_mig(d):
            out.setdefault(d.uuid or f"CUDA device {d.index}", []).append("CUDA")
    for g in report.nvml_gpus:
        if g.mig_enabled is False:
            out.setdefault(g.uuid or f"NVML GPU {g.index}", []).append("NVML with MIG mode off")
    listed = listed_devices(report)
    for uuid in listed.whole if listed is not None else ():
        out.setdefault(uuid, []).append("NVIDIA_VISIBLE_DEVICES")
    return out


def _where(whole: Mapping[str, Sequence[str]]) -> str:
    """``the whole GPU X (in NVML with MIG mode off, NVIDIA_VISIBLE_DEVICES)``."""
    places = sorted({w for ws in whole.values() for w in ws})
    return f"the whole GPU{'s' if len(whole) > 1 else ''} {', '.join(sorted(whole))} (in {', '.join(places)})"


def _parents(report: CudaProbeReport) -> list[tuple[str, str | None, bool | None]]:
    """The NVML GPUs a container saw: (uuid, bus id, MIG mode)."""
    return [(g.uuid or f"NVML GPU {g.index}", _bus(str(g.raw.get("pci_bus_id") or "") or None), g.mig_enabled)
            for g in report.nvml_gpus]


def _no_output(cid: str, node: str, seen: Sighting, what: str) -> Verdict:
    return failed(cid, node, f"{what}: {seen.failure}", expected="a cuda-probe document",
                  observed=seen.failure or "no document")


def _on_parents(parents: Mapping[str, Any], seen: Sequence[Sighting]) -> str:
    """``on 4 MIG-enabled GPUs``, or why the MIG pods' NVML could not count them."""
    blind = [why for s in seen if (why := _nvml_blind(s)) is not None]
    if blind:
        return f"on MIG-enabled GPUs NVML could not count ({'; '.join(blind)})"
    return f"on {len(parents)} MIG-enabled GPUs"


def _nvml_blind(seen: Sighting) -> str | None:
    """Why the GPUs ``seen``'s container was given, and their MIG mode, cannot be read from NVML
    (None: NVML was read). CUDA is no substitute: it enumerates one MIG device and no whole GPU
    beside it, and never a MIG-enabled GPU itself."""
    report = seen.report
    if report is None or report.nvml_absent_reason is None:
        return None
    return f"NVML did not load in {seen.where} ({report.nvml_absent_reason})"


# -------------------------------------------------------------------------------------------------
# The checks


def _instances_anywhere(labels: Mapping[str, str], capacity: Mapping[str, str], seen: Mapping[str, Sighting],
                        published: Mapping[str, int] | None = None) -> bool:
    """Any MIG instance on the node in any view: GFD's labels, the plugin's capacity, the DRA
    driver's slice, the probes."""
    advertised = advertised_layout(labels, capacity)
    probes = any(mig_devices(s.report) or ((listed := listed_devices(s.report)) is not None and listed.mig)
                 for s in seen.values() if s.report is not None)
    return (any(n for p, n in advertised.items() if p != "?") or any((labelled_layout(labels) or {}).values())
            or any((published or {}).values()) or probes)


def _requested_but_missing(node: str, labels: Mapping[str, str], capacity: Mapping[str, str],
                           seen: Mapping[str, Sighting], declared: Declared,
                           published: Mapping[str, int] | None = None) -> Verdict | None:
    """The FAIL of a layout mig-manager was told to apply and did not: ``nvidia.com/mig.config.state``
    failed, or a config asking for instances on a node where no view shows one (MIG mode on and no
    instance: the device plugin advertises nothing, CUDA enumerates nothing); None otherwise.

    GPUs without instances are named by count: a GPU with MIG mode on and no instance is advertised
    as nothing, so no probe pod can be placed on it to read its UUID."""
    cid = "mig.layout-matches-config"
    config, state = labels.get(CONFIG_LABEL), declared.state
    anywhere = _instances_anywhere(labels, capacity, seen, published)
    # A -MIG-INVALID product hides instances that may exist (several profiles under single): the
    # INVALID finding names that, unless mig-manager itself reports the apply failed.
    if state != "failed" and (anywhere or not declared.asks or mig_invalid(labels)):
        return None
    counted = _int(labels.get("nvidia.com/gpu.count")) if strategy(labels) == "mixed" else None
    gpus = f"no view shows a MIG instance on any of its {f'{counted} GPUs (GFD counts them)' if counted else 'GPUs'}"
    offered = advertised_layout(labels, capacity)
    shows = (f"GFD labels {PRODUCT_LABEL}={labels.get(PRODUCT_LABEL, 'unlabelled')} and the device plugin advertises "
             f"{_fmt(offered) if any(n for p, n in offered.items() if p != '?') else 'no MIG instance'}"
             + (f"; {SLICE_VIEW} publishes {_fmt(published)}" if published is not None else ""))
    wanted = _fmt(declared.layout) if declared.layout else "MIG instances"
    if state == "failed":
        summary = (f"mig-manager could not apply {CONFIG_LABEL}={config} ({CONFIG_STATE_LABEL}=failed)"
                   + (f": {gpus} ({shows})" if not anywhere else f"; {shows}"))
    else:
        summary = (f"{CONFIG_LABEL}={config} asks for {wanted}, but {gpus} ({shows}"
                   + (f", {CONFIG_STATE_LABEL}={state}" if state else "") + ")")
    return Verdict(
        cid, node, Outcome.FAIL,
        summary + "; read the nvidia-mig-manager pod's log on the node for mig-parted's error, free the GPUs "
        f"(no process may hold them) and re-apply {config} (relabel {CONFIG_LABEL})",
        expected=f"{wanted} as {CONFIG_LABEL}={config} declares" + (f" ({declared.why})" if declared.layout else ""),
        observed=("no MIG instance on any GPU" if not anywhere else "the layout below")
        + (f", {CONFIG_STATE_LABEL}={state}" if state else ""),
        evidence=(f"{CONFIG_LABEL}: {declared.why}", shows))


def evaluate_layout_matches_config(node: str, *, labels: Mapping[str, str], capacity: Mapping[str, str],
                                   allocatable: Mapping[str, str], seen: Mapping[str, Sighting],
                                   declared: Declared, published: Mapping[str, int] | None = None,
                                   granted_by_dra: Mapping[str, int] | None = None) -> Verdict:
    """The layout mig-manager was told to apply, GFD's labels, the device plugin's capacity, the MIG
    devices the DRA driver publishes (``published``, :func:`published_layout`; None without) and the
    instances the ``all`` pods are given (``seen``: profile -> sighting) agree; each ``all`` pod is
    given exactly the instances it was granted, and CUDA enumerates one of its profile.

    Where GFD labels no MIG instance and the device plugin advertises none, the DRA driver's slice
    is the node's own view (GPU Operator with the device plugin disabled, GPUCluster mode: GFD's mig
    labels follow the plugin's strategy, none here): the labels and capacity views are left out,
    and the verdict says the layout was read from the slice. ``granted_by_dra``: the instances per
    profile the ``all`` pods' claims asked for (the usable published ones), in place of allocatable."""
    cid = "mig.layout-matches-config"
    config = labels.get(CONFIG_LABEL)
    missing = _requested_but_missing(node, labels, capacity, seen, declared, published)
    if missing is not None:
        return missing
    if not mig_invalid(labels) and not _instances_anywhere(labels, capacity, seen, published):
        asks = ("asks for no MIG instance" if declared.asks is False
                else f"may ask for MIG instances, which cannot be told ({declared.why})")
        return not_tested(cid, node, f"{CONFIG_LABEL}={config} {asks}, and no GPU of {node} has one: no MIG layout "
                          "to compare", kind=NOT_APPLICABLE if declared.asks is False else COULD_NOT_RUN)
    # Both leave the node's MIG instances unusable as advertised: a FAIL, whatever a layout drift's
    # severity (the check's catalog severity, degraded) would be.
    if mig_invalid(labels):
        product, offered = labels.get(PRODUCT_LABEL), advertised_layout(labels, capacity)
        return Verdict(
            cid, node, Outcome.FAIL,
            f"GFD labels {PRODUCT_LABEL}={product}: the MIG layout" + (f" {config}" if config else "")
            + f" does not fit {STRATEGY_LABEL}={strategy(labels)} (more than one MIG profile on the node, MIG-enabled "
            "beside MIG-disabled GPUs, or a MIG-enabled GPU without instances), so GFD withdrew the GPU labels and the "
            f"device plugin advertises {_fmt(offered) if any(offered.values()) else 'nothing'}; apply a layout with "
            "one profile on every GPU (all-<profile>), or run the device plugin and GFD with mig.strategy=mixed",
            expected=f"one MIG profile on every GPU under {STRATEGY_LABEL}={strategy(labels)}",
            observed=f"{PRODUCT_LABEL}={product}" + (f", {CONFIG_LABEL}={config}" if config else ""),
            evidence=(declared.why,))
    disagreement = strategy_disagreement(labels, capacity)
    if disagreement is not None:
        return Verdict(
            cid, node, Outcome.FAIL,
            f"GFD and the device plugin run different MIG strategies: {disagreement}; set the same migStrategy for "
            "both (the device plugin's config file or the GPU Operator's mig.strategy, which GFD shares)",
            expected="the same MIG strategy in GFD's labels and the device plugin's resources", observed=disagreement,
            evidence=(declared.why,))
    labelled = labelled_layout(labels)
    advertised = advertised_layout(labels, capacity)
    # The slice is the only view: GFD and the device plugin show no MIG (their strategy is none).
    slice_only = published is not None and labelled is None and not any(advertised.values())
    granted = dict(granted_by_dra or {}) if slice_only else advertised_layout(labels, allocatable)
    observed: Counter[str] = Counter()
    evidence = [f"{CONFIG_LABEL}: {declared.why}" + (f" (state {declared.state})" if declared.state else "")]
    uuids: set[str] = set()
    complete = True
    for profile, s in sorted(seen.items()):
        if s.report is None:
            return _no_output(cid, node, s, f"the pod holding every {profile} instance could not be observed")
        wanted = granted.get(profile, 0)
        cuda = mig_devices(s.report)
        listed = listed_devices(s.report)
        evidence.append(f"{s.where} (granted {wanted} x {profile}): {GpuView.of(s.report).describe()}; "
                        f"NVIDIA_VISIBLE_DEVICES lists " + (f"{len(listed.mig)} MIG instances, {len(listed.whole)} "
                                                            "whole GPUs" if listed else "no device ids"))
        other = next((d for d in cuda if d.profile not in (None, profile)), None)
        if other is not None:
            return failed(cid, node, f"a pod granted every allocatable {profile} instance enumerates a "
                          f"{other.profile} instance ({other.uuid}) through CUDA", expected=f"{profile} instances",
                          observed=f"{other.profile} {other.uuid}", evidence=tuple(evidence))
        if not cuda and wanted:
            return failed(cid, node, f"a pod granted every allocatable {profile} instance ({wanted}) enumerates no "
                          f"MIG device through CUDA ({GpuView.of(s.report).describe()})",
                          expected=f"a {profile} MIG device", observed="none", evidence=tuple(evidence))
        if listed is not None:
            ids, where = [i for i in listed.mig if i not in uuids], "in NVIDIA_VISIBLE_DEVICES"
        elif len(cuda) >= wanted:
            ids, where = [d.uuid for d in cuda if d.uuid not in uuids], "through CUDA"
        else:
            # CUDA enumerates one MIG device per process, and nothing else lists the rest.
            complete = False
            evidence.append(f"{s.where}: CUDA enumerates one MIG device per process and NVIDIA_VISIBLE_DEVICES "
                            "lists no device ids: the probes' view is left out")
            continue
        uuids.update(ids)
        kinds = Counter({profile: len(ids)}) if ids else Counter()
        if kinds != Counter({profile: wanted}):
            return failed(cid, node, f"a pod granted every allocatable {profile} instance ({wanted}) is given "
                          f"{_fmt(kinds)} {where}", expected=f"{profile} x{wanted} MIG instances",
                          observed=_fmt(kinds), evidence=tuple(evidence))
        observed.update(kinds)
    views: dict[str, Mapping[str, int] | None] = (
        {SLICE_VIEW: published} if slice_only else {"advertised capacity": advertised, "GFD labels": labelled})
    if published is not None and not slice_only:
        views[SLICE_VIEW] = published
    if declared.layout is not None:
        views = {f"{CONFIG_LABEL}={declared.name}": declared.layout, **views}
    total = published if slice_only else advertised
    if complete and granted == total:
        views[PROBES_VIEW] = dict(observed)
    elif granted != total:
        evidence.append(f"{'the usable devices' if slice_only else 'allocatable'} ({_fmt(granted)}) "
                        f"{'are' if slice_only else 'is'} below {'those published' if slice_only else 'capacity'} "
                        f"({_fmt(total)}): the probes are given those only")
    if slice_only:
        evidence.append(f"source: {SLICE_VIEW} (GFD labels no MIG instance under {STRATEGY_LABEL}="
                        f"{strategy(labels)} and no device plugin advertises one)")
    evidence.append("; ".join(f"{k}: {_fmt(v)}" for k, v in views.items()))
    present = {k: Counter({p: n for p, n in v.items() if n}) for k, v in views.items() if v is not None}
    reference_name, reference = next(iter(present.items()))
    differing = [k for k, v in present.items() if v != reference]
    if differing:
        state = f" (mig-manager state: {declared.state})" if declared.state and declared.state != "success" else ""
        groups: dict[str, list[str]] = {}
        for k in differing:
            groups.setdefault(_fmt(present[k]), []).append(k)
        observed_text = "; ".join(f"{_and(names)}: {layout}" for layout, names in groups.items())
        return failed(cid, node, f"{reference_name} says {_fmt(reference)}, but {observed_text}{state}",
                      expected=f"{_fmt(reference)} in every view", observed=observed_text, evidence=tuple(evidence))
    if labelled is None and not slice_only:
        return failed(cid, node, f"GFD labels no MIG layout ({strategy(labels)} strategy) while {node} advertises "
                      f"{_fmt(advertised)}", expected="GFD MIG count labels", observed="none",
                      evidence=tuple(evidence))
    note = "" if declared.layout is not None else f"; declared layout not compared: {declared.why}"
    if slice_only:
        note += " (read from the DRA driver's ResourceSlice: GFD labels no MIG instance)"
    return passed(cid, node, f"{_fmt(reference)} in {', '.join(present)}{note}", evidence=tuple(evidence))


@cache
def name_floor() -> float:
    """The lower bound of a profile without a real lgip figure, as a fraction of the GiB in its name:
    the smallest lgip/name ratio of every real -lgip figure in mig_profiles.yaml (GB200 1g.24gb:
    20.00 of 24, 0.833), less :data:`LGIP_SPREAD`. A model's own lgip output replaces it."""
    ratios = [p.lgip_gib / p.memory_gib for profiles in _profile_sets().values() for p in profiles.values()
              if p.lgip_gib is not None and not p.lgip_guess]
    return min(ratios) * (1 - LGIP_SPREAD)


def memory_band(profile: MigProfile) -> tuple[float, float, str]:
    """(low, high) GiB the instance memory CUDA reports may be for ``profile``, and where it comes from."""
    by_name = (name_floor() * profile.memory_gib, NAME_CEILING * profile.memory_gib)
    if profile.lgip_gib is None:
        return (*by_name, f"{name_floor():.3f}-{NAME_CEILING:.2f} x the {profile.memory_gib} GiB in its name, "
                "no real nvidia-smi mig -lgip figure for this model")
    low, high = profile.lgip_gib * (1 - LGIP_SPREAD), profile.lgip_gib * (1 + LGIP_SPREAD)
    if profile.lgip_guess:  # not backed by an output yet: the guess or the name-based band, whichever is wider
        return (min(low, by_name[0]), max(high, by_name[1]),
                f"a guessed lgip {profile.lgip_gib:g} GiB or the name-based band")
    return low, high, f"nvidia-smi mig -lgip {profile.lgip_gib:.2f} GiB +- {LGIP_SPREAD:.1%}"


def _tolerance(memory: int | None, profile: MigProfile) -> str | None:
    """Why ``memory`` bytes is not ``profile``'s memory, or None."""
    if memory is None:
        return "no memory figure"
    low, high, source = memory_band(profile)
    if low * (1 << 30) <= memory <= high * (1 << 30):
        return None
    return f"{memory / (1 << 30):.2f} GiB, outside {low:.2f}-{high:.2f} GiB ({source})"


def _claimed_instance(profile: str, s: Sighting, report: CudaProbeReport, allocated: Sequence[SliceDevice] | None,
                      devices: Sequence[SliceDevice]) -> tuple[str | None, str | None]:
    """(problem, not-tested reason) of a ``one`` pod given its instance by a DRA claim: CUDA's MIG
    device must be the allocated device (its ``uuid`` attribute) and NVML must show its parent
    (``parentUUID``) alone. Under CDI NVIDIA_VISIBLE_DEVICES is ``void``, so the allocation is the
    only list of what the pod was meant to get; a sibling named there is told as one."""
    if not allocated:
        return None, (f"the allocation of the claim of {s.where} ({profile}) could not be read, so whether it sees "
                      "the instance it was allocated is not known")
    own = allocated[0]
    if len(allocated) != 1 or own.kind != "mig":
        got = ", ".join(d.describe() for d in allocated)
        return f"its claim for one {profile} instance was allocated {got}", None
    seen = [d.uuid for d in mig_devices(report)]
    problems = []
    if seen and seen != [own.uuid]:
        others = {d.uuid: d for d in devices if d.kind == "mig"}
        named = []
        for uuid in seen:
            other = others.get(uuid)
            sibling = other is not None and other.attributes.get("parentUUID") == own.attributes.get("parentUUID")
            named.append(f"{'the sibling ' if sibling else ''}{other.describe() if other else uuid}"
                         + (f" on the same GPU {own.attributes.get('parentUUID')}" if sibling else ""))
        problems.append(f"CUDA enumerates {', '.join(named)}, not the allocated device {own.describe()}")
    parent = own.attributes.get("parentUUID")
    nvml = [p[0] for p in _parents(report)]
    if parent and nvml and nvml != [parent]:
        problems.append(f"NVML shows the GPUs {', '.join(nvml)}, not only the allocated device's parent {parent}")
    return ("; ".join(problems) or None), None


def evaluate_instance_isolated(node: str, seen: Mapping[str, Sighting], *, model: str | None,
                               claimed: Mapping[str, Sequence[SliceDevice] | None] | None = None,
                               node_devices: Sequence[SliceDevice] = ()) -> Verdict:
    """Each ``one`` pod (``seen``: profile -> sighting) is given exactly one MIG instance of its
    profile, with its memory, runs the kernel on it, and is given no other instance, whole GPU or
    other GPU (NVIDIA_VISIBLE_DEVICES, NVML, /dev/nvidiaN; CUDA shows one instance at most).

    ``claimed``: for the profiles asked for by a DRA claim on mig.nvidia.com, the slice devices the
    claim was allocated (None: the allocation could not be read, which leaves the check NOT
    TESTED); ``node_devices``: the node's slice devices, to name a sibling the pod sees instead."""
    cid = "mig.instance-isolated"
    if not seen:
        return not_tested(cid, node, f"{node} has no allocatable MIG instance to request", kind=COULD_NOT_RUN)
    table = mig_profiles(model)
    evidence, held = [], []
    for profile, s in sorted(seen.items()):
        if s.report is None:
            return _no_output(cid, node, s, f"the pod requesting one {profile} instance could not be observed")
        if claimed is not None and profile in claimed:
            allocated = claimed[profile]
            problem, unknown = _claimed_instance(profile, s, s.report, allocated, node_devices)
            if unknown is not None:
                return not_tested(cid, node, unknown, kind=COULD_NOT_RUN)
            evidence.append(f"{s.where} (one {profile}): its claim was allocated "
                            + ", ".join(d.describe() for d in allocated or ()))
            if problem is not None:
                return failed(cid, node, f"{s.where}, given one {profile} instance by a DRA claim, sees something "
                              f"else: {problem}", expected="exactly the allocated MIG device and only its parent GPU",
                              observed=GpuView.of(s.report).describe(), evidence=tuple(evidence))
        view = GpuView.of(s.report)
        devices, whole = mig_devices(s.report), _whole(s.report)
        parents = _parents(s.report)
        listed = listed_devices(s.report)
        evidence.append(f"{s.where} (one {profile}): {view.describe(full=True)}; NVIDIA_VISIBLE_DEVICES="
                        f"{s.report.env.get('NVIDIA_VISIBLE_DEVICES')!r}")
        problems = []
        if listed is not None and len(listed.mig) > 1:
            # CUDA enumerates the first listed instance: that is the pod's own, the rest are extra.
            own = next((d.uuid for d in devices if d.uuid in listed.mig), listed.mig[0])
            extra = [u for u in listed.mig if u != own]
            problems.append(f"{len(listed.mig)} MIG instances in NVIDIA_VISIBLE_DEVICES: its own {own} and "
                            f"{'the extra instance' if len(extra) == 1 else f'{len(extra)} extra instances'} "
                            f"{', '.join(extra)}")
        if len(devices) != 1:
            problems.append(f"{len(devices)} MIG devices through CUDA ({', '.join(d.uuid for d in devices) or 'none'})")
        if whole:
            problems.append(_where(whole))
        if len(parents) > 1 or len(view.dev) > 1:
            problems.append(f"{max(len(parents), len(view.dev))} GPUs through NVML or /dev "
                            f"({', '.join(p[0] for p in parents) or ', '.join(view.dev)})")
        if view.unreadable and not devices:
            problems.append("; ".join(view.unreadable))
        if problems:
            return failed(cid, node, f"{s.where}, requesting one {profile} instance, sees {'; '.join(problems)}",
                          expected=f"exactly one MIG-{profile} device and only its parent GPU",
                          observed=view.describe(), evidence=tuple(evidence))
        device = devices[0]
        if device.profile not in (None, profile):
            return failed(cid, node, f"a pod requesting one {profile} instance got a {device.profile} ({device.uuid})",
                          expected=f"a {profile} instance", observed=f"{device.profile} {device.uuid}",
                          evidence=tuple(evidence))
        if not device.kernel_ok:
            return failed(cid, node, f"the vector-add kernel failed on the {profile} instance {device.uuid}",
                          expected="a verified kernel", observed=f"probe exit {s.report.exit_code} "
                          f"({s.report.exit_reason})", evidence=tuple(evidence))
        if table is not None:
            spec = table.get(profile)
            why = f"a profile {model} does not have" if spec is None else _tolerance(device.memory_bytes, spec)
            if why is not None:
                return failed(cid, node, f"the {profile} instance {device.uuid} has {why}",
                              expected=f"{spec.lgip_gib or spec.memory_gib} GiB ({profile})" if spec
                              else f"a {model} MIG profile",
                              observed=why, evidence=tuple(evidence))
        memory = f"{device.memory_bytes / (1 << 30):.1f} GiB" if device.memory_bytes else "memory unknown"
        held.append(f"{profile}: {device.uuid} ({memory})")
        if listed is None and claimed is not None and profile in claimed:
            env = s.report.env.get("NVIDIA_VISIBLE_DEVICES")
            evidence.append(f"{s.where}: CDI injection (NVIDIA_VISIBLE_DEVICES={env!r}): "
                            "CUDA's one MIG device is the allocated one; a sibling injected after it would not show "
                            "(CUDA enumerates one MIG device per process)")
        elif listed is None:
            evidence.append(f"{s.where}: NVIDIA_VISIBLE_DEVICES lists no device ids, so a sibling instance on the "
                            "same GPU would not show (CUDA enumerates one MIG device per process)")
    summary = f"one instance each, alone and running the kernel: {'; '.join(held)}"
    if table is None:
        return not_tested(cid, node, f"instance memory not judged: GPU model {model or 'unknown'} has no MIG "
                          f"profile table in gpuconf/data/mig_profiles.yaml ({summary})", kind=COULD_NOT_RUN)
    return passed(cid, node, summary + " (memory as profiled)", evidence=tuple(evidence))


def _dra_not_also_full(node: str, devices: Sequence[SliceDevice], full_seen: Sighting | None) -> Verdict:
    """DRA: the driver publishes a MIG-enabled GPU as its MIG devices only, never also as a device of
    type gpu (the static-MIG path of the driver's device discovery announces the physical GPU only
    when MIG mode is off: dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/nvlib.go
    GetPerGpuAllocatableDevices), so no claim on gpu.nvidia.com can be given a GPU whose instances
    other claims hold; a whole-GPU claim's pod (``full_seen``) sees only GPUs with MIG off."""
    cid = "mig.not-also-full-gpu"
    migs = [d for d in devices if d.kind == "mig"]
    parents = {p for d in migs if (p := d.attributes.get("parentUUID"))}
    whole = [d for d in devices if d.kind == "gpu"]
    both = [d for d in whole if d.uuid in parents]
    evidence = [f"{SLICE_VIEW}: {len(migs)} MIG devices on {len(parents)} GPUs ({', '.join(sorted(parents))}); "
                f"{len(whole)} devices of type gpu" + (f" ({', '.join(d.describe() for d in whole)})" if whole else "")]
    if both:
        named = ", ".join(d.describe() for d in both)
        return failed(cid, node, f"the DRA driver publishes the MIG-enabled GPU{'s' if len(both) > 1 else ''} {named} "
                      "also whole, as a device of type gpu beside its MIG devices: a claim on gpu.nvidia.com can be "
                      "given a GPU whose instances other pods hold",
                      expected="MIG-enabled GPUs published as their MIG devices only",
                      observed=f"{len(both)} MIG parents published as type gpu", evidence=tuple(evidence))
    if full_seen is not None:
        if full_seen.report is None:
            return _no_output(cid, node, full_seen, "the pod claiming whole GPUs could not be observed")
        gpus = _parents(full_seen.report)
        evidence.append(f"{full_seen.where}: {GpuView.of(full_seen.report).describe(full=True)}")
        bad = sorted({u for u, _, mig in gpus if mig} | ({u for u, _, _ in gpus} & parents))
        instances = sorted(d.uuid for d in mig_devices(full_seen.report) if d.uuid)
        if bad or instances:
            return failed(cid, node, "a claim for whole GPUs on gpu.nvidia.com is given "
                          + (f"MIG-enabled GPU{'s' if len(bad) != 1 else ''} {', '.join(bad)}" if bad
                             else f"MIG instances {', '.join(instances)}"),
                          expected="whole GPUs with MIG disabled only", observed=f"{len(bad)} MIG-enabled GPUs, "
                          f"{len(instances)} instances", evidence=tuple(evidence))
        if (blind := _nvml_blind(full_seen)) is not None:
            # The slice alone still shows no MIG parent published whole: only the pod's view is missing.
            return passed(cid, node, f"the DRA driver publishes the {len(parents)} MIG-enabled GPUs as their "
                          f"{len(migs)} MIG devices only, none also as type gpu ({len(whole)} whole GPUs published)",
                          evidence=tuple(evidence), not_judged=(f"the MIG mode of the GPUs a whole-GPU claim is "
                                                                f"given: {blind}",))
        return passed(cid, node, f"the {len(gpus)} GPUs a whole-GPU claim is given have MIG disabled, and the DRA "
                      f"driver publishes none of the {len(parents)} MIG-enabled GPUs as type gpu",
                      evidence=tuple(evidence))
    return passed(cid, node, f"the DRA driver publishes the {len(parents)} MIG-enabled GPUs as their {len(migs)} MIG "
                  f"devices only, none also as type gpu ({len(whole)} whole GPUs published)", evidence=tuple(evidence))


def evaluate_not_also_full_gpu(node: str, *, labels: Mapping[str, str], capacity: Mapping[str, str],
                               mig_seen: Sequence[Sighting], full_seen: Sighting | None,
                               devices: Sequence[SliceDevice] = ()) -> Verdict:
    """No MIG-enabled GPU is also advertised whole. Single: every device behind ``nvidia.com/gpu``
    (the ``all`` pod, in ``mig_seen``) is an instance: no ``GPU-`` id in NVIDIA_VISIBLE_DEVICES, no
    GPU with MIG mode off in NVML. Mixed: the GPUs behind ``nvidia.com/gpu`` (``full_seen``, a pod
    holding every allocatable one) have MIG off, are no instance's parent and come with no instance."""
    cid = "mig.not-also-full-gpu"
    for s in mig_seen:
        if s.report is None:
            return _no_output(cid, node, s, "a MIG pod could not be observed")
    reports = [s.report for s in mig_seen if s.report is not None]
    parents = {p[0]: p for r in reports for p in _parents(r) if p[2] is not False}
    full = _int(capacity.get(GPU)) or 0
    if any(d.kind == "mig" for d in devices) and not any(advertised_layout(labels, capacity).values()):
        # MIG through DRA alone (``devices``: the node's slice): the driver decides what is whole
        return _dra_not_also_full(node, devices, full_seen)
    if not reports and (strategy(labels) == "single" or full == 0):
        # Nothing handed out to look at (no instance advertised): "all 0 are instances" is no finding.
        offered = _fmt(advertised_layout(labels, capacity))
        return not_tested(cid, node, f"{node} hands out no MIG instance to look at ({offered} advertised, "
                          f"{strategy(labels)} strategy): whether a MIG GPU is also handed out whole is not judged",
                          kind=COULD_NOT_RUN)
    if strategy(labels) == "single":
        whole: dict[str, list[str]] = {}
        for r in reports:
            for uuid, places in _whole(r).items():
                known = whole.setdefault(uuid, [])
                known.extend(p for p in places if p not in known)
        if whole:
            return failed(cid, node, f"with the single strategy, {GPU} hands out {_where(whole)} beside MIG instances",
                          expected=f"only MIG instances behind {GPU}", observed=f"{len(whole)} whole GPUs",
                          evidence=tuple(f"{s.where}: {GpuView.of(s.report).describe(full=True)}; "
                                         f"NVIDIA_VISIBLE_DEVICES={s.report.env.get('NVIDIA_VISIBLE_DEVICES')!r}"
                                         for s in mig_seen if s.report is not None))
        for s in mig_seen:
            env = s.report.env.get("NVIDIA_VISIBLE_DEVICES") if s.report is not None else None
            if (blind := _nvml_blind(s)) is not None and s.report is not None and listed_devices(s.report) is None:
                return not_tested(cid, node, f"whether {GPU} on {node} hands out a whole GPU beside MIG instances "
                                  f"could not be read: {blind}, and NVIDIA_VISIBLE_DEVICES={env!r} names no device "
                                  "(CDI or volume-mounts), while CUDA enumerates one MIG device and no whole GPU "
                                  "beside it", kind=COULD_NOT_RUN)
        return passed(cid, node, f"all {full} {GPU} on {node} are MIG instances (single strategy), "
                      f"{_on_parents(parents, mig_seen)}")
    if full == 0:
        return passed(cid, node, f"{node} advertises no whole {GPU}; its MIG instances sit "
                      f"{_on_parents(parents, mig_seen)}")
    if full_seen is None:
        return not_tested(cid, node, f"{node} advertises {full} {GPU} but none is allocatable to look at",
                          kind=COULD_NOT_RUN)
    if full_seen.report is None:
        return _no_output(cid, node, full_seen, f"the pod holding every {GPU} could not be observed")
    report = full_seen.report
    gpus = _parents(report)
    listed = listed_devices(report)
    evidence = (f"{full_seen.where}: {GpuView.of(report).describe(full=True)}; "
                f"NVIDIA_VISIBLE_DEVICES={report.env.get('NVIDIA_VISIBLE_DEVICES')!r}",
                f"MIG parents seen by the MIG pods: {', '.join(sorted(parents)) or 'none'}")
    enabled = [u for u, _, mig in gpus if mig]
    shared = sorted({u for u, _, _ in gpus} & set(parents))
    instances = sorted({d.uuid for d in mig_devices(report)} | set(listed.mig if listed is not None else ()))
    if enabled or shared or instances:
        bad = sorted(set(enabled) | set(shared))
        text = f"{GPU} hands out MIG-enabled GPU{'s' if len(bad) != 1 else ''} {', '.join(bad)}" if bad \
            else f"{GPU} hands out MIG instances"
        return failed(cid, node, text + (f" (instances {', '.join(instances)} through CUDA or NVIDIA_VISIBLE_DEVICES)"
                                         if instances else ""),
                      expected=f"{GPU} only for GPUs with MIG disabled",
                      observed=f"MIG enabled on {len(enabled)}, parent of an instance: {len(shared)}, "
                      f"instances: {len(instances)}", evidence=evidence)
    if (blind := _nvml_blind(full_seen)) is not None:
        return not_tested(cid, node, f"whether {GPU} on {node} hands out a MIG-enabled GPU could not be read: {blind}, "
                          f"the only view of the MIG mode of the GPUs it holds (NVIDIA_VISIBLE_DEVICES="
                          f"{report.env.get('NVIDIA_VISIBLE_DEVICES')!r}; CUDA never enumerates a MIG-enabled GPU)",
                          kind=COULD_NOT_RUN)
    if not gpus:
        return not_tested(cid, node, f"{full_seen.where}, holding every {GPU} ({full} advertised), shows no GPU in "
                          "NVML: no whole GPU to judge", kind=COULD_NOT_RUN)
    unread = [u for u, _, mig in gpus if mig is None]
    return passed(cid, node, f"the {len(gpus)} whole GPUs behind {GPU} have MIG disabled and none is a parent of "
                  f"the instances {_on_parents(parents, mig_seen)}", evidence=evidence,
                  not_judged=tuple(f"whether {u} has MIG enabled: NVML gave no MIG mode for it (it is no parent of "
                                   "the instances seen)" for u in unread))
