"""The node agents' pure half: what a kubelet, the NVIDIA device plugin, the container toolkit and
the DRA driver would decide on a simulated node, as functions of plain data (no API calls).

* :func:`kubelet_wording`: the event texts of the kubelet version a profile declares;
* :func:`go_duration`: Go's ``time.Duration`` text, as the ``Pulled`` event prints it;
* :func:`image_facts`: what an image reference carries (CUDA version, env, cuda-compat, size);
* :class:`DeviceBook`: the kubelet's device manager on one node (admission and allocation);
* :func:`injected_devices`: what the container toolkit (or CDI, for DRA) puts in a container;
* :func:`dra_devices`: a ResourceClaim allocation's devices on a node;
* ``make_*``: the Node, Lease, DeviceClass, RuntimeClass and ClusterPolicy objects.

Every text a user would see is the real component's wording, with the source named where it is
defined.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpuconf.compat import tables
from gpuconf.compat.versions import CudaVersion, VersionError, parse_cuda
from gpuconf.sim.emulate import Visible
from gpuconf.sim.node_facts import (
    AdvertisedDevice,
    advertised_devices,
    mig_config_name,
    mig_parted_entries,
    node_labels,
    node_resources,
)
from gpuconf.sim.profile import Profile, Sharing, SimCluster, SimNode

__all__ = [
    "GPU_CLUSTER_NAME",
    "MIG_PARTED_CONFIG",
    "MPS_PIPE_DIRECTORY",
    "NETWORK_NOT_READY",
    "OPERATOR_NAMESPACE",
    "STATUS_UNKNOWN",
    "AdmissionError",
    "DeviceBook",
    "admin_spec",
    "as_visible",
    "cluster_policy_status",
    "make_mig_parted_config",
    "plugin_env",
    "ImageFacts",
    "KubeletWording",
    "dra_devices",
    "dra_prepare_error",
    "go_duration",
    "image_facts",
    "injected_devices",
    "kubelet_version",
    "kubelet_wording",
    "make_cluster_policy",
    "make_cluster_policy_crd",
    "make_device_classes",
    "make_gpu_cluster",
    "make_gpu_cluster_crd",
    "make_lease",
    "make_node",
    "make_node_status",
    "make_runtime_class",
    "node_conditions",
    "pod_ip",
]

Obj = dict[str, Any]

# --- kubelet wording ----------------------------------------------------------------------------


@dataclass(frozen=True)
class KubeletWording:
    """The kubelet's container event messages (pkg/kubelet/kuberuntime and images), by version.

    ``created``/``started`` take ``{name}``; the image messages take ``{image}``.
    """

    created: str
    started: str
    image_present: str
    pulling: str = 'Pulling image "{image}"'
    #: pkg/kubelet/images/image_manager.go since 1.30: pull time, then time including the wait in
    #: the (serialized) pull queue, both truncated to milliseconds, then the image size.
    pulled: str = 'Successfully pulled image "{image}" in {pull} ({total} including waiting). Image size: {size} bytes.'
    failed: str = "Error: {message}"  # kuberuntime_container.go startContainer: "Error: %v"
    killing: str = "Stopping container {name}"


#: (first kubelet minor, wording). 1.32.0 and 1.33.2 kubelets write "Created container: <name>"
#: (captured in public cluster logs); kubernetes/kubernetes#134043 (1.35) dropped the container
#: name ("Container created"), and 1.35 clusters add "and can be accessed by the pod" to the
#: image-present message. Where 1.34 words the image message is not confirmed: it is taken to be
#: the 1.33 text.
_WORDINGS: tuple[tuple[int, KubeletWording], ...] = (
    (0, KubeletWording("Created container {name}", "Started container {name}",
                       'Container image "{image}" already present on machine')),
    (32, KubeletWording("Created container: {name}", "Started container {name}",
                        'Container image "{image}" already present on machine')),
    (35, KubeletWording("Container created", "Container started",
                        'Container image "{image}" already present on machine and can be accessed by the pod')),
)


def kubelet_wording(kubernetes: str) -> KubeletWording:
    """The event wording of a kubelet of version ``kubernetes`` (``1.34`` or ``v1.34.2``)."""
    minor = int(kubernetes.lstrip("v").split(".")[1])
    return [w for first, w in _WORDINGS if minor >= first][-1]


def kubelet_version(profile: Profile) -> str:
    """``v1.34.0`` from a profile's ``kubernetes: "1.34"``."""
    parts = profile.kubernetes.lstrip("v").split(".")
    return "v" + ".".join((parts + ["0"])[:3])


def go_duration(seconds: float) -> str:
    """``time.Duration(...).Truncate(time.Millisecond).String()``: 0s, 523ms, 11.624s, 1m5.2s, 1h0m3s."""
    ms = max(0, int(seconds * 1000))
    if ms == 0:
        return "0s"
    if ms < 1000:
        return f"{ms}ms"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs, frac = divmod(rest, 1000)
    text = f"{secs}" + (f".{frac:03d}".rstrip("0") if frac else "") + "s"
    if hours or minutes:
        text = f"{minutes}m" + text
    if hours:
        text = f"{hours}h" + text
    return text


# --- images ---------------------------------------------------------------------------------------

#: Compressed sizes of the official nvidia/cuda flavours, rounded (illustrative, not per release:
#: they only make Pulled messages and pull times plausible). Other images: a small utility image.
_FLAVOUR_BYTES = {"base": 110_000_000, "runtime": 1_700_000_000, "devel": 4_300_000_000}
_OTHER_BYTES = 45_000_000
#: What the gpuconf probe images are built FROM (probes/*/Dockerfile: the run stage).
_PROBE_BASES = {"cuda-probe": "base", "nccl-probe": "runtime"}
_CUDA_TAG = re.compile(r"^(\d+\.\d+(?:\.\d+)?)-(?:cudnn\d*-)?(base|runtime|devel)(?:-|$)")
_PROBE_TAG = re.compile(r"-cuda(\d+\.\d+(?:\.\d+)?)$")


@dataclass(frozen=True)
class ImageFacts:
    """What an image carries, as far as the simulation needs it."""

    ref: str  # as the pod spec names it
    normalized: str  # docker.io/nvidia/cuda:13.0.2-devel-ubuntu24.04 (what containerd reports)
    image_id: str  # <repository>@sha256:<digest>
    size: int  # bytes, for the Pulled message and the pull time
    cuda: CudaVersion | None = None  # the CUDA the image is built on (nvidia/cuda and gpuconf probes)
    env: tuple[tuple[str, str], ...] = ()  # the image config's Env
    compat: bool = False  # carries /usr/local/cuda/compat (every nvidia/cuda flavour does)
    probe: str | None = None  # cuda-probe | nccl-probe for gpuconf's prebuilt probe images


def _split_ref(ref: str) -> tuple[str, str, str]:
    """(registry, repository path, tag) with Docker's defaults (docker.io, library/, latest)."""
    name = ref.split("@", 1)[0]
    tag = "latest"
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1:]
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        registry, path = first, rest
    else:
        registry, path = "docker.io", name
    if registry == "docker.io" and "/" not in path:
        path = f"library/{path}"
    return registry, path, tag


def _official_env(cuda: str) -> tuple[tuple[str, str], ...]:
    """The Env of nvidia/cuda:<cuda>-* (research/require-cuda.md §9; NVIDIA_REQUIRE_CUDA from the data)."""
    row = tables.image_require(cuda)
    env = [("NVIDIA_VISIBLE_DEVICES", "all"), ("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"),
           ("CUDA_VERSION", row.cuda_version_env if row else cuda)]
    if row is not None:
        env.append(("NVIDIA_REQUIRE_CUDA", row.require))
    return tuple(env)


def image_facts(ref: str) -> ImageFacts:
    """Facts of ``ref``: official ``[registry/]nvidia/cuda:<ver>-<flavour>-<distro>`` images and
    gpuconf's ``<registry>/gpuconf/<probe>:<probe-version>-cuda<ver>`` carry CUDA, its env and
    cuda-compat; anything else is an ordinary image without them."""
    registry, path, tag = _split_ref(ref)
    digest = hashlib.sha256(f"{registry}/{path}:{tag}".encode()).hexdigest()
    normalized, image_id = f"{registry}/{path}:{tag}", f"{registry}/{path}@sha256:{digest}"
    jitter = 1 + (int(digest[:4], 16) % 600 - 300) / 10_000  # +-3 %, stable per image
    official = path in ("nvidia/cuda", "library/nvidia/cuda")
    match = _CUDA_TAG.match(tag) if official else None
    probe = next((p for p in _PROBE_BASES if path.endswith(f"gpuconf/{p}")), None)
    probe_match = _PROBE_TAG.search(tag) if probe else None
    version, flavour = (match.group(1), match.group(2)) if match else \
        (probe_match.group(1), _PROBE_BASES[probe]) if probe and probe_match else (None, None)
    if version is None or flavour is None:
        return ImageFacts(ref, normalized, image_id, int(_OTHER_BYTES * jitter))
    try:
        cuda = parse_cuda(version)
    except VersionError:
        return ImageFacts(ref, normalized, image_id, int(_OTHER_BYTES * jitter))
    return ImageFacts(ref, normalized, image_id, int(_FLAVOUR_BYTES[flavour] * jitter), cuda,
                      _official_env(version), True, probe)


# --- the device manager -----------------------------------------------------------------------


class AdmissionError(Exception):
    """The kubelet rejects the pod: ``reason`` and the message of its event (``Pod was rejected:``
    prefixes it in the pod status)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason, self.message = reason, message


def _quantity(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0  # extended resources are whole numbers; the API server rejects anything else


@dataclass
class DeviceBook:
    """The kubelet's device manager on one node, fed by the device plugin's ListAndWatch.

    Resources the plugin never registered are skipped, as the kubelet does (its admission drops
    extended resources the node does not report, and ``allocateContainerResources`` skips names
    that are not device-plugin resources), so such a pod is admitted and gets nothing.
    """

    node: SimNode
    devices: list[AdvertisedDevice] = field(init=False)
    owner: dict[str, str] = field(default_factory=dict)  # device id -> pod key

    def __post_init__(self) -> None:
        self.devices = advertised_devices(self.node)

    @property
    def resources(self) -> set[str]:
        return {d.resource for d in self.devices}

    def allocate(self, pod_key: str, containers: Sequence[tuple[str, bool, Mapping[str, Any]]]
                 ) -> dict[str, list[AdvertisedDevice]]:
        """Devices per container (``(name, is_init, limits)`` in start order); AdmissionError when
        a registered resource lacks free healthy devices. Init containers' devices are reused by
        the app containers, as the device manager's ``devicesToReuse`` does."""
        taken: dict[str, list[AdvertisedDevice]] = {}
        reusable: list[AdvertisedDevice] = []
        mine: set[str] = set()
        for name, is_init, limits in containers:
            got: list[AdvertisedDevice] = []
            for resource, raw in sorted(limits.items()):
                needed = _quantity(raw)
                if resource not in self.resources or needed <= 0:
                    continue
                reuse = [d for d in reusable if d.resource == resource]
                # gpu-double-allocated: the device manager forgot what running pods hold
                free = [d for d in self.devices if d.resource == resource and d.healthy
                        and (self.node.double_allocates or d.id not in self.owner) and d.id not in mine]
                available = reuse + self._preferred(free)
                if needed > len(available):
                    raise AdmissionError("UnexpectedAdmissionError", (
                        f"Allocate failed due to requested number of devices unavailable for {resource}. "
                        f"Requested: {needed}, Available: {len(available)}, which is unexpected"))
                chosen = available[:needed]
                refusal = self._refuse_shared(resource, chosen)
                if refusal is not None:
                    raise AdmissionError("UnexpectedAdmissionError", (
                        f"Allocate failed due to rpc error: code = Unknown desc = {refusal}, which is unexpected"))
                got.extend(chosen)
                mine.update(d.id for d in chosen)
                reusable = [d for d in reusable if d not in chosen]
            taken[name] = got
            if is_init:
                reusable.extend(d for d in got if d not in reusable)
        for device_id in mine:
            self.owner[device_id] = pod_key
        if self.node.mig_sibling_visible:
            for got in taken.values():
                got.extend(s for s in dict.fromkeys(self._sibling(d) for d in list(got)) if s is not None
                           and s not in got)
        return taken

    def _sibling(self, device: AdvertisedDevice) -> AdvertisedDevice | None:
        """The mig-sibling-visible fault: the instance after ``device`` on the same GPU (wrapping),
        which the faulty Allocate also names; None for a whole GPU or a GPU with one instance."""
        if device.mig is None or len(device.gpu.mig) < 2:
            return None
        instances = device.gpu.mig
        after = instances[(instances.index(device.mig) + 1) % len(instances)]
        return next((d for d in self.devices if d.mig == after), None)

    def _refuse_shared(self, resource: str, chosen: Sequence[AdvertisedDevice]) -> str | None:
        """The device plugin's Allocate error for one container asking more than one shared replica
        (ids annotated ``::n``): always under MPS (the plugin supports one MPS replica per container,
        NVIDIA/k8s-device-plugin#929, PR #574), under time-slicing only with
        ``failRequestsGreaterThanOne: true``. The text is the plugin's, as the kubelet's
        UnexpectedAdmissionError event quotes it (the plugin's gpu-sharing docs)."""
        sharing = self.node.device_plugin.sharing
        if len(chosen) <= 1 or not any("::" in d.id for d in chosen):
            return None
        if sharing.strategy == "mps" or (sharing.strategy == "time-slicing" and sharing.fail_requests_greater_than_one):
            return (f"request for '{resource}: {len(chosen)}' too large: maximum request size for shared resources "
                    "is 1")
        return None

    def _preferred(self, free: list[AdvertisedDevice]) -> list[AdvertisedDevice]:
        """GetPreferredAllocation: shared (time-sliced) replicas go to the least-used GPU first."""
        if not any("::" in d.id for d in free):
            return free
        used: dict[str, int] = {}
        for d in self.devices:
            if d.id in self.owner:
                used[d.gpu.uuid] = used.get(d.gpu.uuid, 0) + 1
        return sorted(free, key=lambda d: (used.get(d.gpu.uuid, 0), d.gpu.index))

    def release(self, pod_key: str) -> None:
        for device_id in [i for i, owner in self.owner.items() if owner == pod_key]:
            del self.owner[device_id]


#: Where the device plugin points an MPS client at the control daemon it runs for the resource
#: (the pipe directory is mounted into the container as well).
MPS_PIPE_DIRECTORY = "/mps/nvidia.com/gpu/pipe"


def plugin_env(devices: Sequence[AdvertisedDevice], sharing: Sharing | None = None) -> dict[str, str]:
    """The device plugin's Allocate response with ``deviceListStrategy: envvar``: the devices' ids,
    replica suffixes (``::n``) stripped and duplicates dropped; under MPS (``sharing``) also
    ``CUDA_MPS_PIPE_DIRECTORY``, the control daemon's pipe."""
    if not devices:
        return {}
    ids: list[str] = []
    for d in devices:
        base = d.id.split("::", 1)[0]
        if base not in ids:
            ids.append(base)
    env = {"NVIDIA_VISIBLE_DEVICES": ",".join(ids)}
    if sharing is not None and sharing.strategy == "mps" and any(d.mig is None for d in devices):
        env["CUDA_MPS_PIPE_DIRECTORY"] = MPS_PIPE_DIRECTORY
    return env


def as_visible(devices: Iterable[AdvertisedDevice]) -> list[Visible]:
    out: list[Visible] = []
    for d in devices:
        v = Visible(d.gpu, d.mig)
        if v not in out:
            out.append(v)
    return out


def _every_device(node: SimNode) -> list[Visible]:
    """``NVIDIA_VISIBLE_DEVICES=all``: every GPU that enumerates, as MIG instances where enabled."""
    out: list[Visible] = []
    for g in node.present_gpus:
        out.extend([Visible(g, m) for m in g.mig] if g.mig else [Visible(g)])  # MIG on, none: NVML only
    return out


def _by_id(node: SimNode, value: str) -> list[Visible]:
    """A device list (``0,1``, ``GPU-...``, ``MIG-...``); ids the node does not have are left out."""
    out: list[Visible] = []
    for raw in value.split(","):
        token = raw.strip()
        for g in node.present_gpus:
            if token in (g.uuid, str(g.index)):
                out.append(Visible(g))
            out.extend(Visible(g, m) for m in g.mig if token == m.uuid)
    return out


def injected_devices(node: SimNode, *, nvidia_runtime: bool, allocated: Sequence[Visible],
                     cdi: Sequence[Visible], own_env: str | None, privileged: bool) -> list[Visible]:
    """What ends up in the container.

    ``allocated``: the device plugin's choice, honoured by the toolkit; ``cdi``: DRA devices, which
    containerd injects through CDI with any runtime handler; ``own_env``: NVIDIA_VISIBLE_DEVICES
    as the container itself (its spec, or its image when nothing was allocated) sets it. Without
    the nvidia runtime the toolkit injects nothing. The toolkit honours ``own_env`` only for
    privileged containers or with accept-nvidia-visible-devices-envvar-when-unprivileged (the
    envvar-leak fault); the visible-devices-all fault injects every device whenever the toolkit
    injects anything.
    """
    out = list(cdi)
    if not nvidia_runtime:
        return out
    wants = own_env not in (None, "", "void", "none")
    if node.toolkit.visible_devices == "all" and (allocated or wants):
        chosen = _every_device(node)
    elif own_env is not None and (privileged or node.toolkit.accept_envvar_unprivileged):
        chosen = [] if not wants else _every_device(node) if own_env == "all" else _by_id(node, own_env or "")
    else:
        chosen = list(allocated)
    return out + [v for v in chosen if v not in out]


def dra_devices(node: SimNode, claim: Mapping[str, Any], requests: Iterable[str] | None = None) -> list[Visible]:
    """The devices of an allocated ResourceClaim that the node's DRA driver prepares: results for
    this node's pool (device names as node_facts.resource_slices gives them: ``gpu-<i>``,
    ``gpu-<i>-mig-<gi>``), narrowed to ``requests`` when the container names some."""
    wanted = set(requests) if requests is not None else None
    results = ((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or [])
    out: list[Visible] = []
    for r in results:
        if r.get("driver") != node.dra.driver or r.get("pool") != node.name:
            continue
        request = str(r.get("request", ""))
        if wanted is not None and request not in wanted and request.split("/", 1)[0] not in wanted:
            continue
        match = re.fullmatch(r"gpu-(\d+)(?:-mig-(\d+))?", str(r.get("device", "")))
        if not match:
            continue
        index = (int(match.group(1)) + node.dra_shift) % len(node.gpus)  # dra-prepares-wrong-device
        gpu = next((g for g in node.present_gpus if g.index == index), None)
        if gpu is None:
            continue
        if match.group(2) is None:
            out.append(Visible(gpu))
        else:
            out.extend(Visible(gpu, m) for m in gpu.mig if m.gi == int(match.group(2)))
    return out


def dra_prepare_error(node: SimNode, claim: Mapping[str, Any]) -> str | None:
    """The error NVIDIA's DRA kubelet plugin answers NodePrepareResources with for ``claim`` on
    ``node``, or None when it prepares. A device of a GPU that no longer enumerates (dra-slice-stale)
    cannot be prepared: building its CDI spec asks NVML for the GPU by UUID and gets Not Found.
    The pieces are real messages (tests/data/real/dra/SOURCES.md: the plugin's "error preparing
    devices for claim <ns>/<name>:<uid>" and "unable to create CDI spec file for claim", #1330's
    "unable to get device spec for <claimUID>-<device>: ... device handle from UUID: Not Found");
    how they chain for a GPU lost after the plugin started is a guess: a kubelet-plugin log from
    such a node would settle it."""
    meta = claim.get("metadata") or {}
    results = ((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or [])
    present = {g.index for g in node.present_gpus}
    for r in results:
        if r.get("driver") != node.dra.driver or r.get("pool") != node.name:
            continue
        match = re.fullmatch(r"gpu-(\d+)(?:-mig-\d+)?", str(r.get("device", "")))
        if match and int(match.group(1)) not in present:
            uid = meta.get("uid", "")
            return (f"error preparing devices for claim {meta.get('namespace')}/{meta.get('name')}:{uid}: unable to "
                    f"create CDI spec file for claim: unable to get device spec for {uid}-{r.get('device')}: failed "
                    "to get device handle from UUID: Not Found")
    return None


# --- objects ------------------------------------------------------------------------------------

#: kubelet condition reasons and messages (pkg/kubelet/nodestatus/setters.go).
_CONDITIONS = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)
CONTAINER_RUNTIME = "containerd://2.1.4"
#: Ready False as a live kubelet reports it when the CNI plugin is not up (kubelet_node_status.go
#: via runtimeState.runtimeErrors/networkErrors; the containerd text of a node without a CNI config).
NETWORK_NOT_READY = ("container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
                     "message:Network plugin returns error: cni plugin not initialized")
#: What the node lifecycle controller writes into every condition of a node whose kubelet stopped
#: posting (node_lifecycle_controller.go tryUpdateNodeHealth).
STATUS_UNKNOWN = ("NodeStatusUnknown", "Kubelet stopped posting node status.")


def _rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def node_conditions(node: SimNode, now: float) -> list[Obj]:
    """The conditions a registered node shows: the kubelet's, or, on a NotReady node (node-not-ready),
    Ready False since ``ready_since_s`` (a live kubelet without pod network), or every condition
    Unknown since then (the controller's verdict on a kubelet that stopped posting at that moment)."""
    since = _rfc3339(now - node.ready_since_s)
    out = []
    for kind, status, reason, message in _CONDITIONS:
        heartbeat = transition = _rfc3339(now)
        if node.ready == "Unknown":
            status, (reason, message), heartbeat, transition = "Unknown", STATUS_UNKNOWN, since, since
        elif kind == "Ready" and node.ready == "False":
            status, reason, message, transition = "False", "KubeletNotReady", NETWORK_NOT_READY, since
        out.append({"type": kind, "status": status, "reason": reason, "message": message,
                    "lastHeartbeatTime": heartbeat, "lastTransitionTime": transition})
    return out


#: Simulated pod networks are in loopback (127.0.0.0/8, all of it routed to ``lo`` on Linux): an API
#: server proxying to a pod, or a kubelet's log endpoint, dials only this machine. The second octet
#: starts past 127.0.x.x, where the control plane and the agents' own endpoints listen.
POD_NET_BASE = 100


def pod_cidr(node_index: int) -> str:
    """The node's podCIDR, 127.<100 + hi>.<lo>.0/24 (hi, lo: the node index's bytes)."""
    return f"127.{POD_NET_BASE + ((node_index >> 8) & 127)}.{node_index & 255}.0/24"


def pod_ip(node_index: int, serial: int) -> str:
    """An address from the node's podCIDR (.2 to .254, reused in turn)."""
    return pod_cidr(node_index).replace(".0/24", f".{2 + serial % 253}")


def make_node(node: SimNode, index: int) -> Obj:
    """The Node a kubelet registers (metadata and spec; the status comes with make_node_status)."""
    labels = {"kubernetes.io/hostname": node.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
              "node.kubernetes.io/instance-type": "sim", **node_labels(node)}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node.name, "labels": labels, "annotations": {
            "node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
        "spec": {"podCIDR": pod_cidr(index), "podCIDRs": [pod_cidr(index)],
                 "providerID": f"gpuconf-sim://{node.name}", **admin_spec(node)},
    }


def admin_spec(node: SimNode) -> Obj:
    """What an administrator set on the Node (node-cordoned, node-tainted): ``kubectl cordon`` and
    ``kubectl taint``'s fields. The lifecycle taints that follow are the controller's to add."""
    spec: Obj = {}
    if node.unschedulable:
        spec["unschedulable"] = True
    if node.taints:
        spec["taints"] = [{"key": k, "value": v, "effect": e} if v else {"key": k, "effect": e}
                          for k, v, e in node.taints]
    return spec


def make_node_status(node: SimNode, *, kubelet: str, port: int, now: float, address: str = "127.0.0.1") -> Obj:
    """status: capacity/allocatable (cpu, memory, pods + the device plugin's resources),
    conditions, addresses, daemonEndpoints (the agents' log endpoint) and nodeInfo."""
    gpus = max(1, len(node.gpus))
    cpu = max(8, 24 * gpus)
    memory_ki = max(32, 256 * gpus) * 1024 * 1024
    extended_capacity, extended_allocatable = node_resources(node)
    base = {"cpu": str(cpu), "ephemeral-storage": "1843269916Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0",
            "pods": "110"}
    ident = hashlib.sha1(f"gpuconf-sim/{node.name}".encode()).hexdigest()
    return {
        "capacity": {**base, "memory": f"{memory_ki}Ki", **extended_capacity},
        "allocatable": {**base, "memory": f"{memory_ki - 102400}Ki", **extended_allocatable},
        "conditions": node_conditions(node, now),
        "addresses": [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": node.name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
        "nodeInfo": {"machineID": ident[:32], "systemUUID": f"{ident[:8]}-{ident[8:12]}-{ident[12:16]}-"
                                                            f"{ident[16:20]}-{ident[20:32]}",
                     "bootID": ident[8:40], "kernelVersion": "6.8.0-87-generic", "osImage": "Ubuntu 24.04.3 LTS",
                     "containerRuntimeVersion": CONTAINER_RUNTIME, "kubeletVersion": kubelet,
                     "kubeProxyVersion": "",  # deprecated; the kubelet leaves it empty (no omitempty)
                     "operatingSystem": "linux", "architecture": "amd64"},
    }


def make_lease(node_name: str, node_uid: str | None, *, duration: int, now_micro: str) -> Obj:
    """The node's heartbeat Lease in kube-node-lease, owned by its Node (pkg/kubelet/nodelease)."""
    meta: Obj = {"name": node_name, "namespace": "kube-node-lease"}
    if node_uid:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid}]
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
            "spec": {"holderIdentity": node_name, "leaseDurationSeconds": duration, "renewTime": now_micro}}


def make_device_classes(drivers: Iterable[str], *, extended_resource: str | None = None,
                        gpu_selectors: Iterable[str] = ()) -> list[Obj]:
    """The DeviceClasses NVIDIA's DRA driver chart installs (gpu.nvidia.com, mig.nvidia.com). The GPU
    class maps ``extended_resource`` (KEP-5004 ``spec.extendedResourceName``) where the cluster serves
    that resource through DRA, and carries ``gpu_selectors`` after its own (extended-resource-stale)."""
    out = []
    for driver in sorted(set(drivers)):
        for kind, name in (("gpu", driver), ("mig", driver.replace("gpu.", "mig.", 1))):
            expressions = [f"device.driver == '{driver}' && device.attributes['{driver}'].type == '{kind}'"]
            spec: Obj = {}
            if kind == "gpu":
                expressions += list(gpu_selectors)
                if extended_resource:
                    spec["extendedResourceName"] = extended_resource
            spec["selectors"] = [{"cel": {"expression": e}} for e in expressions]
            out.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
                        "spec": spec})
    return out


def make_runtime_class(name: str, handler: str) -> Obj:
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name}, "handler": handler}


def _open_crd(plural: str, kind: str, version: str) -> Obj:
    """A minimal cluster-scoped nvidia.com CRD with its schema left open."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.nvidia.com"},
        "spec": {"group": "nvidia.com", "scope": "Cluster",
                 "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
                 "versions": [{"name": version, "served": True, "storage": True, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object",
                                                              "x-kubernetes-preserve-unknown-fields": True}}}]},
    }


def make_cluster_policy_crd() -> Obj:
    """clusterpolicies.nvidia.com (the GPU Operator's CRD)."""
    return _open_crd("clusterpolicies", "ClusterPolicy", "v1")


def make_cluster_policy(cluster: SimCluster) -> Obj:
    """ClusterPolicy ``cluster-policy`` describing what the operator deploys on the pools."""
    pools = cluster.profile.pools
    plugin = any(p.device_plugin.enabled for p in pools)
    mig = any(p.device_plugin.mig.enabled for p in pools)
    strategy = next((p.device_plugin.mig.strategy for p in pools if p.device_plugin.mig.enabled), "single")
    # One operator deploys one toolkit release: spec.toolkit.version names it where every pool runs
    # the same one (a profile whose pools differ shows their versions only in the toolkit pods).
    toolkits = {p.toolkit.version for p in pools}
    toolkit: Obj = {"enabled": True}
    if len(toolkits) == 1:
        toolkit["version"] = f"v{toolkits.pop()}-ubuntu20.04"
    return {
        "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
        "spec": {"operator": {"defaultRuntime": "containerd"}, "driver": {"enabled": True},
                 "toolkit": toolkit, "devicePlugin": {"enabled": plugin}, "gfd": {"enabled": True},
                 "dcgmExporter": {"enabled": True},
                 "migManager": {"enabled": mig, "config": {"name": MIG_PARTED_CONFIG, "default": "all-disabled"}},
                 "mig": {"strategy": strategy},
                 "validator": {"plugin": {"env": []}}, "cdi": {"enabled": True, "default": False}},
    }


def make_gpu_cluster_crd() -> Obj:
    """gpuclusters.nvidia.com (GPU Operator 26.7's GPUCluster CRD, nvidia.com/v1alpha1, cluster-scoped)."""
    return _open_crd("gpuclusters", "GPUCluster", "v1alpha1")


#: The one GPUCluster object the simulated operator runs from.
GPU_CLUSTER_NAME = "gpu-cluster"


def make_gpu_cluster() -> Obj:
    """GPUCluster ``gpu-cluster``: the operands it manages (NVIDIA's DRA driver, DCGM, dcgm-exporter;
    anchors-2026-12.md section 4). The field names inside spec are NOT from a real object: the
    operator's docs review pages name the managed components but no sample CR was at hand; a real
    ``kubectl get gpucluster -o yaml`` from a 26.7 install would settle them. gpuconf reads only that
    the object exists (Inventory.gpu_cluster)."""
    return {
        "apiVersion": "nvidia.com/v1alpha1", "kind": "GPUCluster", "metadata": {"name": GPU_CLUSTER_NAME},
        "spec": {"draDriver": {"enabled": True, "driver": "gpu.nvidia.com"}, "dcgm": {"enabled": True},
                 "dcgmExporter": {"enabled": True}},
    }


def cluster_policy_status() -> Obj:
    return {"state": "ready", "namespace": OPERATOR_NAMESPACE}


#: Where the GPU Operator keeps mig-manager's layouts (ClusterPolicy spec.migManager.config.name).
OPERATOR_NAMESPACE = "gpu-operator"
MIG_PARTED_CONFIG = "default-mig-parted-config"


def make_mig_parted_config(cluster: SimCluster) -> Obj | None:
    """The ConfigMap mig-manager reads its layouts from (``config.yaml``, mig-parted's v1 format),
    holding every MIG pool's declared layout under the name its ``nvidia.com/mig.config`` label
    gives; None when no pool uses MIG."""
    configs: dict[str, object] = {}
    for pool in cluster.profile.pools:
        name = mig_config_name(pool)
        if name is not None:
            configs.setdefault(name, mig_parted_entries(pool))
    if not configs:
        return None
    text = yaml.safe_dump({"version": "v1", "mig-configs": {
        "all-disabled": [{"devices": "all", "mig-enabled": False}], **configs}}, sort_keys=False)
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": MIG_PARTED_CONFIG, "namespace": OPERATOR_NAMESPACE}, "data": {"config.yaml": text}}
