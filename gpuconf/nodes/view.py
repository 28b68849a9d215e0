"""One GPU node as the suites need it: what it has, where each fact comes from, how a container asks
for its GPUs (or why it cannot), and which RuntimeClass runs GPUs there.

Pure (no pytest, no I/O): built once per session from the inventory (:func:`build_views`); the
suites ask it and never branch on node kinds themselves. The MIG and sharing checks still judge
GFD's labels; the view only decides how to ask and where to run.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpuconf.nodes.availability import Availability, GpuHolder, availability
from gpuconf.nodes.devices import GPU_CLASS, MIG_CLASS, SliceDevice, slice_devices
from gpuconf.nodes.facts import NodeFacts, label_driver_version, node_facts
from gpuconf.nodes.offers import GpuRequest, Unavailable, Via, Why
from gpuconf.probe_pods import ClaimRequest

__all__ = ["NVIDIA_HANDLER", "NodeView", "RuntimeClassRef", "build_views", "gpu_runtime_class"]

#: The handler containerd/CRI-O know the NVIDIA container runtime by (the GPU Operator's toolkit and
#: the Container Toolkit's `nvidia-ctk runtime configure` both register it under this name). A
#: RuntimeClass is found by this handler, never by its own name: clusters call it nvidia, nvidia-gpu,
#: nvidia-cdi...
NVIDIA_HANDLER = "nvidia"
#: The resources NVIDIA's device plugin advertises whole (or time-sliced) GPUs under; the second is
#: its renameByDefault name for shared GPUs.
PLUGIN_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")
GPU = "nvidia.com/gpu"
SHARING_STRATEGIES = ("time-slicing", "mps")


@dataclass(frozen=True)
class RuntimeClassRef:
    name: str
    handler: str
    node_selector: Mapping[str, str] = field(default_factory=dict)  # scheduling.nodeSelector


def gpu_runtime_class(classes: Iterable[RuntimeClassRef], labels: Mapping[str, str] | None = None) -> str | None:
    """The RuntimeClass GPU pods on a node with ``labels`` should name: one whose handler is the NVIDIA
    runtime's and whose ``scheduling.nodeSelector`` the node satisfies (a class the node does not
    satisfy would keep the pod off it), the first by name; None when there is none. ``labels`` None:
    any node (the cluster-wide question)."""
    fitting = sorted(rc.name for rc in classes if rc.handler == NVIDIA_HANDLER and (
        labels is None or all(labels.get(k) == v for k, v in rc.node_selector.items())))
    return fitting[0] if fitting else None


def _count(amounts: Mapping[str, str], key: str) -> int:
    value = str(amounts.get(key, "0") or "0")
    return int(value) if value.isdigit() else 0


@dataclass(frozen=True)
class NodeView:
    """One GPU node: the API's facts, its DRA devices, and the answers built on them."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    capacity: Mapping[str, str] = field(default_factory=dict)
    allocatable: Mapping[str, str] = field(default_factory=dict)
    devices: tuple[SliceDevice, ...] = ()  # the NVIDIA DRA driver's node-local devices
    runtime_class: str | None = None  # by handler, honouring RuntimeClass scheduling.nodeSelector
    claimable: bool = False  # the DeviceClass gpu.nvidia.com exists: whole GPUs can be claimed
    mig_claimable: bool = False  # the DeviceClass mig.nvidia.com exists
    node: Any = field(default=None, compare=False, repr=False)  # the inventory's GpuNode, untouched
    #: Whether the run's probe pods can be placed here now (NotReady, cordoned, tainted, busy).
    availability: Availability = field(default_factory=Availability)
    #: KEP-5004: the extended resource a DeviceClass maps onto this node's DRA GPUs (class gpu.nvidia.com's
    #: ``spec.extendedResourceName``, e.g. nvidia.com/gpu) where no device plugin advertises it here, so
    #: the scheduler serves a plain request for it through a claim it creates; None otherwise.
    extended: str | None = None

    @classmethod
    def of(cls, name: str, labels: Mapping[str, str] | None = None, capacity: Mapping[str, str] | None = None,
           allocatable: Mapping[str, str] | None = None, devices: Sequence[SliceDevice] | int = (), *,
           slices: Sequence[Mapping[str, Any]] = (), runtime_classes: Iterable[RuntimeClassRef] = (),
           device_classes: Iterable[str] = (GPU_CLASS, MIG_CLASS),
           extended_resources: Mapping[str, str] | None = None) -> NodeView:
        """A view from plain facts (tests; ``devices`` as a number: that many anonymous GPUs;
        ``extended_resources``: resource name -> DeviceClass, as Inventory.extended_resources)."""
        labels = dict(labels or {})
        if isinstance(devices, int):
            devices = tuple(SliceDevice(name, GPU_CLASS, name, f"gpu-{i}") for i in range(devices))
        found = tuple(devices) + slice_devices(slices, name)
        classes = set(device_classes)
        allocatable = dict(allocatable or {})
        return cls(name, labels, dict(capacity or {}), allocatable, found,
                   gpu_runtime_class(runtime_classes, labels), GPU_CLASS in classes, MIG_CLASS in classes,
                   extended=dra_extended_resource(extended_resources or {}, found, allocatable))

    # -- what the API says (the members the label checks read) -------------------------------------

    def label(self, key: str) -> str | None:
        return self.labels.get(f"nvidia.com/{key}")

    @property
    def driver_version(self) -> str | None:
        return label_driver_version(self.labels)[0]

    @property
    def dra_devices(self) -> int:
        return len(self.devices)

    @functools.cached_property
    def facts(self) -> NodeFacts:
        return node_facts(self.labels, self.capacity, self.devices)

    @property
    def kind(self) -> str:
        """How this node hands out whole GPUs, for the report: device plugin, DRA claims, a DRA-backed
        extended resource (KEP-5004), device plugin and DRA both, or none."""
        plugin = any(_count(self.capacity, r) for r in PLUGIN_RESOURCES) or self.mig == "mixed"
        if self.extended and not plugin:
            return f"DRA-backed extended resource {self.extended}"
        if plugin and self.devices:
            return "device plugin and DRA"
        if plugin:
            return "device plugin"
        return "DRA claims" if self.devices else "none"

    @property
    def dra_gpus(self) -> int:
        """Whole GPUs (device type gpu, not MIG instances) the DRA driver publishes, less any whose MIG
        instances it publishes too: a MIG-enabled GPU runs no CUDA work whole, and publishing it so is
        mig.not-also-full-gpu's finding (the probes do not claim it)."""
        return len(self._whole())

    def _whole(self) -> tuple[SliceDevice, ...]:
        parents = {d.attributes.get("parentUUID") for d in self.devices if d.kind == "mig"}
        return tuple(d for d in self.devices if d.kind == "gpu" and not (d.uuid and d.uuid in parents))

    @property
    def usable_gpus(self) -> tuple[SliceDevice, ...]:
        """The whole DRA GPUs a claim can get: no NoSchedule/NoExecute device taint (the probes' claims
        tolerate none, so the scheduler never allocates a tainted one to them)."""
        return tuple(d for d in self._whole() if d.usable)

    @property
    def tainted_gpus(self) -> tuple[SliceDevice, ...]:
        """The whole DRA GPUs a device taint keeps the scheduler from allocating."""
        return tuple(d for d in self._whole() if not d.usable)

    @property
    def dra_only(self) -> bool:
        """The node's whole GPUs reach pods through DRA only: the DRA driver publishes GPUs and no device
        plugin advertises nvidia.com/gpu (or its shared name) or MIG instances here. A node with both
        keeps asking through the device plugin."""
        plugin = any(_count(self.capacity, r) for r in PLUGIN_RESOURCES) or self.mig == "mixed"
        return self.dra_gpus > 0 and not plugin

    def dra_via(self) -> Via | None:
        """How a container asks for this node's DRA GPUs: the DRA-backed extended resource (KEP-5004) as
        users do where a DeviceClass maps one, else a claim on gpu.nvidia.com; None where the node is not
        DRA-only or the cluster has no way to ask (no DeviceClass)."""
        if not self.dra_only:
            return None
        if self.extended:
            return Via.EXTENDED
        return Via.CLAIM if self.claimable else None

    def dra_sharing(self) -> Unavailable | None:
        """Why the sharing checks (GFD's replicas and strategy labels, the device plugin's time-slicing
        and MPS) do not apply to a node that gives its GPUs through DRA, or None. The DRA driver shares
        GPUs its own way (time-slicing and MPS set by an opaque config on a claim, alpha feature gates,
        or consumable capacity), which gpuconf does not model yet: NOT TESTED, never PASS."""
        if self.dra_via() is None:
            return None
        return Unavailable(Why.NO_PATH, f"not applicable: {self.name} gives its GPUs through DRA ({self.kind}); the "
                           "DRA driver's time-slicing and MPS (alpha, set by an opaque config on a claim) are not "
                           "modelled, and the device plugin's sharing these checks judge is not there")

    def _left_out(self) -> str:
        """Evidence naming the GPUs a device taint keeps out of a request ("" when none)."""
        tainted = self.tainted_gpus
        if not tainted:
            return ""
        names = "; ".join(f"{d.describe()}: {', '.join(str(t) for t in d.taints if t.blocks_allocation)}"
                          for d in tainted)
        return f"; {len(tainted)} device-tainted GPU{'s' if len(tainted) != 1 else ''} left out ({names})"

    def _dra_request(self, n: int) -> GpuRequest:
        """``n`` DRA GPUs for one container: the DRA-backed extended resource in its limits, or one claim
        with an ExactCount request for ``n`` devices of gpu.nvidia.com."""
        usable = len(self.usable_gpus)
        held_back = self.dra_gpus - usable
        if self.dra_via() is Via.EXTENDED:
            assert self.extended is not None
            note = f" ({self.extended} served through DRA by DeviceClass {GPU_CLASS}{self._left_out()})"
            return GpuRequest(Via.EXTENDED, n, self.extended, held_back=held_back, note=note)
        return GpuRequest(Via.CLAIM, n, claims=(ClaimRequest("gpus", GPU_CLASS, count=n),), held_back=held_back,
                          note=f" (through one DRA claim on {GPU_CLASS}{self._left_out()})")

    def _no_dra_path(self, check: str) -> Unavailable:
        """Why a DRA-only node's GPUs cannot be asked for: no DeviceClass to claim them with."""
        return Unavailable(Why.NO_PATH, f"{self.name} publishes {self.dra_gpus} GPUs through DRA ResourceSlices "
                           f"only, and the cluster has no DeviceClass {GPU_CLASS} to claim them with ({check})")

    def _all_tainted(self, check: str) -> Unavailable:
        return Unavailable(Why.UNHEALTHY, f"every one of the {self.dra_gpus} DRA GPUs of {self.name} carries a "
                           f"NoSchedule/NoExecute device taint, so no claim gets one ({check}){self._left_out()}")

    @property
    def replicas(self) -> int:
        """Time-slicing replicas per GPU as GFD labels them (1: not shared, or not labelled)."""
        value = self.labels.get("nvidia.com/gpu.replicas", "1")
        return int(value) if value.isdigit() and int(value) > 0 else 1

    @property
    def sharing(self) -> str | None:
        """time-slicing, mps, or None (GFD writes strategy none, or nothing, on unshared GPUs)."""
        strategy = self.labels.get("nvidia.com/gpu.sharing-strategy")
        if strategy in SHARING_STRATEGIES:
            return strategy
        return "time-slicing" if self.replicas > 1 else None

    @property
    def mig(self) -> str:
        """MIG in use, not the mig.strategy label (GFD writes the plugin's configured strategy on
        nodes without MIG too): mixed (nvidia.com/mig-* advertised), single (nvidia.com/gpu are MIG
        devices: GFD's product carries -MIG-), dra (the DRA driver publishes MIG devices), none."""
        if any(k.startswith("nvidia.com/mig-") for k in self.capacity):
            return "mixed"
        if "-MIG-" in self.labels.get("nvidia.com/gpu.product", ""):
            return "single"
        if any(d.kind == "mig" for d in self.devices):
            return "dra"
        return "none"

    # -- how to ask -------------------------------------------------------------------------------

    def blocked(self) -> Unavailable | None:
        """Why no probe can be placed here at all (NotReady, cordoned, an untolerated taint), or None."""
        if self.availability.blocks_probes:
            return Unavailable(Why.BLOCKED, self.availability.reason)
        return None

    def _free(self, resource: str) -> int:
        """``resource`` allocatable and not held by pods outside the run."""
        return max(0, _count(self.allocatable, resource) - self.availability.held(resource))

    def _busy(self, what: str) -> Unavailable:
        return Unavailable(Why.BUSY, f"{self.availability.reason}; {what}")

    def _no_whole_gpus(self, path: str) -> Unavailable:
        """Why no whole GPU can be asked for ``path`` here (the node advertises none under it)."""
        mig = sorted(k for k, v in self.allocatable.items() if k.startswith("nvidia.com/mig-") and _count(
            self.allocatable, k) >= 1)
        if mig:
            return Unavailable(Why.MIG_ONLY, f"{self.name} advertises no nvidia.com/gpu, only MIG instances "
                               f"({', '.join(mig)}: mixed strategy), and {path} asks for whole GPUs")
        if (capacity := _count(self.capacity, GPU)) >= 1:
            return Unavailable(Why.UNHEALTHY, f"none of the {capacity} nvidia.com/gpu on {self.name} is allocatable "
                               "(all unhealthy; inventory.allocatable-matches-capacity reports it)")
        if any(d.kind == "mig" for d in self.devices) and not self.dra_gpus:
            migs = sum(d.kind == "mig" for d in self.devices)
            return Unavailable(Why.MIG_ONLY, f"{self.name} publishes only MIG devices through DRA ({migs} of them, no "
                               f"whole GPU), and {path} asks for whole GPUs")
        if self.devices:  # whole DRA GPUs, asked for through the device plugin's path (via=Via.PLUGIN)
            return Unavailable(Why.NO_PATH, f"{self.name} advertises no nvidia.com/gpu: its {self.dra_devices} GPUs "
                               f"are published through DRA ResourceSlices only, and {path} asks for nvidia.com/gpu")
        return Unavailable(Why.NO_GPU, f"{self.name} advertises no nvidia.com/gpu, MIG instance or DRA device "
                           "(inventory.gpu-resource-advertised says whether it should)")

    def whole_node(self) -> GpuRequest | Unavailable:
        """Every GPU of the node in one container (the whole-node probe): every allocatable
        nvidia.com/gpu (one replica on MPS, whose plugin gives a container one at most); on a node
        that publishes its GPUs through DRA only, every usable one through DRA (see _dra_whole)."""
        if (blocked := self.blocked()) is not None:
            return blocked
        allocatable, capacity = _count(self.allocatable, GPU), _count(self.capacity, GPU)
        if self.availability.holders:
            return self._busy(f"the whole-node probe needs every GPU of {self.name}")
        if allocatable >= 1:
            shared = self.labels.get("nvidia.com/gpu.sharing-strategy", "none") != "none" or \
                self.labels.get("nvidia.com/gpu.replicas", "1") != "1"
            held_back, mig_units = capacity - allocatable, self.mig == "single"
            complete = self.mig == "none" and not shared and allocatable == capacity
            per_container = 1 if self.sharing == "mps" else None
            if self.sharing == "mps" and allocatable > 1:
                note = (f" (MPS: a container gets one replica of one GPU; the sharing suite's pods run on more of "
                        f"{self.name}'s GPUs)")
                return GpuRequest(Via.PLUGIN, 1, GPU, held_back=held_back, mig_units=mig_units, complete=complete,
                                  per_container=per_container, note=note)
            return GpuRequest(Via.PLUGIN, 1 if self.sharing == "mps" else allocatable, GPU, replicas=self.replicas,
                              physical=self.physical_count(), held_back=held_back, mig_units=mig_units,
                              complete=complete, per_container=per_container)
        if self.dra_only:
            return self._dra_whole("the whole-node probe")
        return self._no_whole_gpus("the whole-node probe")

    def _dra_whole(self, check: str) -> GpuRequest | Unavailable:
        """Every usable DRA GPU of a DRA-only node in one container: an ExactCount of that number (not
        allocation mode All, which would wait for a tainted GPU too), ``complete`` only when no GPU is
        left out; the note names the tainted ones."""
        if self.dra_via() is None:
            return self._no_dra_path(check)
        usable = len(self.usable_gpus)
        if usable < 1:
            return self._all_tainted(check)
        ask = self._dra_request(usable)
        every = "every GPU" if usable == self.dra_gpus else f"{usable} of {self.dra_gpus} GPUs"
        how = f"as {self.extended}, served through DRA" if ask.via is Via.EXTENDED else "through one DRA claim"
        return replace(ask, physical=usable, complete=usable == self.dra_gpus,
                       note=f" ({every} {how}{self._left_out()})")

    def physical_count(self) -> int | None:
        """Physical GPUs as GFD counts them (nvidia.com/gpu.count), or None."""
        count = self.labels.get("nvidia.com/gpu.count", "")
        return int(count) if count.isdigit() else None

    def gpus(self, n: int, *, via: Via | None = None, check: str = "this check") -> GpuRequest | Unavailable:
        """``n`` GPUs (or time-slicing replicas of them) for one container: through the device plugin
        (nvidia.com/gpu, else its renamed nvidia.com/gpu.shared) where it advertises them; on a DRA-only
        node through DRA (the DRA-backed extended resource, else one claim for ``n`` devices of
        gpu.nvidia.com), counting the usable (untainted) devices. MPS gives one per container (the plugin
        refuses more). ``via``: force a path (Via.PLUGIN: the device plugin's, or why not)."""
        if via not in (None, Via.PLUGIN, Via.CLAIM, Via.EXTENDED):
            raise ValueError(f"{via}: whole GPUs come through the device plugin or DRA")
        if (blocked := self.blocked()) is not None:
            return blocked
        if via is not Via.PLUGIN and self.dra_only:
            return self._dra_gpus(n, via, check)
        if via is not None and via is not Via.PLUGIN:
            return Unavailable(Why.NO_PATH, f"{self.name} does not serve its GPUs through DRA alone, and {check} asks "
                               f"for a {via.value}")
        resource = next((r for r in PLUGIN_RESOURCES if _count(self.allocatable, r) >= 1), None)
        if resource is None:
            return self._no_whole_gpus(check)
        offered = self._free(resource)
        if self.sharing == "mps" and n > 1:
            return Unavailable(Why.SHARED, f"{self.name} shares its GPUs through MPS: the device plugin gives a "
                               f"container one replica at most, and {check} asks for {n}")
        if offered < n and self.availability.held(resource):
            return self._busy(f"{offered} {resource} free, and {check} asks for {n}")
        if offered < n:
            return Unavailable(Why.TOO_FEW, f"{self.name} has {offered} {resource} allocatable, and {check} asks "
                               f"for {n}")
        return GpuRequest(Via.PLUGIN, n, resource, replicas=self.replicas, held_back=_count(self.capacity, resource)
                          - offered, mig_units=self.mig == "single", per_container=1 if self.sharing == "mps" else None)

    def _dra_gpus(self, n: int, via: Via | None, check: str) -> GpuRequest | Unavailable:
        path = self.dra_via()
        if path is None:
            return self._no_dra_path(check)
        if via is not None and via is not path:
            served = f"as {self.extended}" if path is Via.EXTENDED else "through claims"
            return Unavailable(Why.NO_PATH, f"{self.name} serves its DRA GPUs {served}, not through a {via.value}, "
                               f"which {check} asks for")
        offered = len(self.usable_gpus)
        if offered < 1:
            return self._all_tainted(check)
        if path is Via.EXTENDED and self.extended is not None and self.availability.held(self.extended):
            offered = max(0, offered - self.availability.held(self.extended))
            if offered < n:
                return self._busy(f"{offered} {self.extended} free, and {check} asks for {n}")
        if offered < n:
            return Unavailable(Why.TOO_FEW, f"{self.name} has {offered} usable DRA GPU{'s' if offered != 1 else ''}"
                               f"{self._left_out()}, and {check} asks for {n}")
        return self._dra_request(n)

    def gpu_allocatable(self, resource: str) -> int:
        """How many ``resource`` the node's allocatable lists (the device plugin's), whoever holds them
        now; a DRA-backed extended resource is not listed there (0)."""
        return _count(self.allocatable, resource)

    def one_gpu(self, *, check: str = "this check") -> GpuRequest | Unavailable:
        return self.gpus(1, check=check)

    def offered(self, ask: GpuRequest) -> int:
        """How many units of ``ask``'s resource the node has allocatable: the device plugin's free
        ones; for DRA (a claim or a DRA-backed extended resource) its usable (untainted) GPUs, less
        those pods outside the run hold as the extended resource."""
        if ask.via in (Via.CLAIM, Via.EXTENDED):
            held = self.availability.held(ask.resource) if ask.resource is not None else 0
            return max(0, len(self.usable_gpus) - held)
        return self._free(ask.resource) if ask.resource is not None else ask.count

    def exclusive(self, *, min_gpus: int = 1, check: str = "this check") -> GpuRequest | Unavailable:
        """Every whole GPU of the node, unshared (NCCL, the DCGM diagnostic): through the device plugin,
        the GPUs the node advertises, allocatable or not (``held_back`` says how many are not: the
        callers judge that themselves); on a DRA-only node every usable DRA GPU as an ExactCount of that
        number, so one device-tainted GPU does not block the node (``complete`` False, the note names it)."""
        if (blocked := self.blocked()) is not None:
            return blocked
        whole = _count(self.capacity, GPU)
        if self.sharing is not None:  # time-slicing (replicas > 1) or MPS
            return Unavailable(Why.SHARED, f"{self.name} shares its GPUs ({self.sharing}, {self.replicas} replicas): "
                               f"a pod cannot get exclusive use of a whole GPU, which {check} needs")
        if self.mig == "single" or (self.mig == "mixed" and whole < 1):
            return Unavailable(Why.MIG_ONLY, f"{self.name} advertises no whole GPUs as nvidia.com/gpu, only MIG "
                               f"instances ({self.mig} strategy), and {check} needs whole GPUs")
        if whole < 1 and self.dra_only:
            usable = len(self.usable_gpus)
            if self.dra_via() is not None and 1 <= usable < min_gpus:
                return Unavailable(Why.TOO_FEW, f"{self.name} has {usable} usable DRA GPU{'s' if usable != 1 else ''}"
                                   f"{self._left_out()}: {check} needs {min_gpus} or more")
            if self.availability.holders:
                return self._busy(f"{check} needs every GPU of {self.name}")
            return self._dra_whole(check)
        if whole < 1:
            return self._no_whole_gpus(check) if self.devices else Unavailable(
                Why.NO_GPU, f"{self.name} advertises no nvidia.com/gpu")
        if whole < min_gpus:
            return Unavailable(Why.TOO_FEW, f"{self.name} has {whole} GPU{'s' if whole != 1 else ''}: {check} needs "
                               f"{min_gpus} or more")
        if self.availability.holders:
            return self._busy(f"{check} needs every GPU of {self.name}")
        allocatable = _count(self.allocatable, GPU)
        return GpuRequest(Via.PLUGIN, whole, GPU, physical=whole, held_back=whole - allocatable,
                          complete=self.mig == "none" and allocatable == whole)

    def mig_instances(self, profile: str, n: int = 1) -> GpuRequest | Unavailable:
        """``n`` MIG instances of ``profile`` (``1g.10gb``): nvidia.com/mig-<profile> (mixed), nvidia.com/gpu
        on a single-strategy node of that profile, or a claim on mig.nvidia.com selecting the profile."""
        want = f"{n} MIG instance{'s' if n != 1 else ''} of {profile}"
        if (blocked := self.blocked()) is not None:
            return blocked
        if self.mig == "mixed":
            resource = f"nvidia.com/mig-{profile}"
            have = self._free(resource)
            if have >= n:
                return GpuRequest(Via.MIG, n, resource, mig_units=True)
            if self.availability.held(resource):
                return self._busy(f"{have} {resource} free, not {want}")
            return Unavailable(Why.TOO_FEW, f"{self.name} has {have} {resource} allocatable, not {want}")
        if self.mig == "single":
            product = self.labels.get("nvidia.com/gpu.product", "")
            have = self._free(GPU)
            if product.endswith(f"-MIG-{profile}") and have >= n:
                return GpuRequest(Via.PLUGIN, n, GPU, mig_units=True)
            return Unavailable(Why.TOO_FEW, f"{self.name} advertises {have} nvidia.com/gpu as {product} (strategy "
                               f"single), not {want}")
        if self.mig == "dra":
            have = sum(d.kind == "mig" and d.attributes.get("profile") == profile for d in self.devices)
            if have >= n and self.mig_claimable:
                selector = f"device.attributes['{GPU_CLASS}'].profile == '{profile}'"
                return GpuRequest(Via.CLAIM, n, claims=(ClaimRequest("mig", MIG_CLASS, (selector,), count=n),),
                                  mig_units=True)
            return Unavailable(Why.TOO_FEW if not have or self.mig_claimable else Why.NO_PATH,
                               f"{self.name} publishes {have} MIG devices of {profile} through DRA"
                               + ("" if self.mig_claimable else f" and the cluster has no DeviceClass {MIG_CLASS}")
                               + f": {want} asked for")
        return Unavailable(Why.NO_GPU, f"{self.name} has no MIG instances: {want} asked for")


def dra_extended_resource(extended_resources: Mapping[str, str], devices: Sequence[SliceDevice],
                          allocatable: Mapping[str, str]) -> str | None:
    """The extended resource DRA serves this node's whole GPUs under (KEP-5004): the explicit name a
    DeviceClass for whole GPUs (gpu.nvidia.com) maps, when the node publishes GPUs in slices and no
    device plugin advertises that resource here (the scheduler prefers the node's own allocatable)."""
    if not any(d.kind == "gpu" for d in devices):
        return None
    names = sorted(r for r, c in extended_resources.items() if c == GPU_CLASS and not r.startswith(
        "deviceclass.resource.kubernetes.io/"))
    return next((r for r in names if _count(allocatable, r) < 1), None)


def build_views(inventory: Any, *, tolerations: Sequence[Mapping[str, Any]] = (),
                holders: Mapping[str, Sequence[GpuHolder]] | None = None, now: Any = None) -> dict[str, NodeView]:
    """One view per GPU node of ``inventory`` (gpuconf.cluster.Inventory), by node name, each with its
    availability to probe pods carrying ``tolerations``, with ``holders`` (pods outside the run
    holding GPUs, by node: gpuconf.nodes.gpu_holders) at ``now``."""
    classes = tuple(RuntimeClassRef(rc.name, rc.handler, dict(getattr(rc, "node_selector", {}) or {}))
                    for rc in inventory.runtime_classes)
    device_classes = set(inventory.device_classes)
    extended = dict(getattr(inventory, "extended_resources", {}) or {})
    views = {}
    for node in inventory.gpu_nodes:
        devices = slice_devices([s.raw for s in node.slices], node.name)
        views[node.name] = NodeView(node.name, node.labels, node.capacity, node.allocatable, devices,
                                    gpu_runtime_class(classes, node.labels), GPU_CLASS in device_classes,
                                    MIG_CLASS in device_classes, node,
                                    availability(node, tolerations, (holders or {}).get(node.name, ()), now=now),
                                    dra_extended_resource(extended, devices, node.allocatable))
    return views
