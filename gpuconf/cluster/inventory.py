"""What GPU hardware and plumbing the cluster says it has, as plain frozen data.

:func:`build_inventory` is pure (API objects as the dicts the server sends, camelCase); only
:func:`load_inventory` calls the API, with one list per kind.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gpuconf.cluster.access import Cluster
from gpuconf.cluster.errors import NotFoundError

__all__ = ["COMPONENT_SELECTORS", "ClusterPolicyState", "ComponentPod", "GpuNode", "Inventory", "NodeCondition",
           "ResourceSliceInfo", "RuntimeClassInfo", "Taint", "as_v1_slice", "build_inventory", "component_pods",
           "is_gpu_resource", "list_active_pods", "list_component_pods", "load_inventory"]

Obj = Mapping[str, Any]

#: The label GPU Feature Discovery (and the GPU Operator) puts on every node with an NVIDIA GPU.
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"


def is_gpu_resource(name: str) -> bool:
    """nvidia.com/gpu, nvidia.com/gpu.shared (renamed sharing), nvidia.com/mig-1g.10gb, ..."""
    return name.startswith(("nvidia.com/gpu", "nvidia.com/mig-"))


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class NodeCondition:
    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str
    message: str
    since: str | None = None  # lastTransitionTime (RFC 3339)


@dataclass(frozen=True)
class ResourceSliceInfo:
    """One ResourceSlice: whose devices, from which driver and pool, how many."""

    name: str
    node: str | None  # None: the slice is not per node (allNodes or a node selector)
    driver: str
    pool: str
    devices: tuple[str, ...]
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)  # the object, for attributes


@dataclass(frozen=True)
class RuntimeClassInfo:
    name: str
    handler: str
    #: ``scheduling.nodeSelector``: the RuntimeClass admission controller merges it into every pod
    #: naming the class, so a class whose selector a node lacks keeps GPU pods off that node.
    node_selector: Mapping[str, str] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class ClusterPolicyState:
    """The GPU Operator's ClusterPolicy as it reports itself (``status.state``: ready, notReady, ...)."""

    name: str
    state: str | None
    spec: Mapping[str, Any]


@dataclass(frozen=True)
class GpuNode:
    name: str
    labels: Mapping[str, str]
    capacity: Mapping[str, str]
    allocatable: Mapping[str, str]
    taints: tuple[Taint, ...]
    conditions: tuple[NodeCondition, ...]
    slices: tuple[ResourceSliceInfo, ...]
    unschedulable: bool

    @property
    def ready(self) -> bool:
        return any(c.type == "Ready" and c.status == "True" for c in self.conditions)

    @property
    def gpu_allocatable(self) -> dict[str, int]:
        """The GPU extended resources this node offers, as counts (``{"nvidia.com/gpu": 8}``)."""
        return {k: _count(v) for k, v in self.allocatable.items() if is_gpu_resource(k)}

    @property
    def gpu_capacity(self) -> dict[str, int]:
        return {k: _count(v) for k, v in self.capacity.items() if is_gpu_resource(k)}


@dataclass(frozen=True)
class Inventory:
    gpu_nodes: tuple[GpuNode, ...]
    other_nodes: tuple[str, ...]
    runtime_classes: tuple[RuntimeClassInfo, ...]
    device_classes: tuple[str, ...]
    slices: tuple[ResourceSliceInfo, ...]
    cluster_policy: ClusterPolicyState | None  # None: not served, or served with no object
    dra_served: bool = False  # the cluster serves resource.k8s.io/v1 ResourceSlices
    dra_version: str | None = None  # the newest resource.k8s.io version its ResourceSlices were read in
    #: DeviceClass name -> its spec (selectors, ``extendedResourceName``), as listed
    device_class_specs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, compare=False)
    #: The GPU Operator's GPUCluster (nvidia.com/v1alpha1), its DRA-first mode: None when not served or none
    gpu_cluster: ClusterPolicyState | None = None
    #: DeviceTaintRules (resource.k8s.io, DRADeviceTaintRules: beta and off by default in 1.36), as
    #: listed; None when the cluster does not serve them (an empty tuple: served, none exists)
    device_taint_rules: tuple[Mapping[str, Any], ...] | None = field(default=None, compare=False)
    #: The API server's gitVersion (``/version``, read with discovery): the CNCF evidence's kubernetesVersion
    server_version: str | None = field(default=None, compare=False)

    @property
    def extended_resources(self) -> dict[str, str]:
        """DRA-backed extended resources (KEP-5004): resource name -> the DeviceClass serving it. A
        class's explicit ``spec.extendedResourceName``, and for every class the implicit
        ``deviceclass.resource.kubernetes.io/<class>``. Two classes naming the same resource: the
        first by name (the scheduler's choice between them is not specified; both are in the specs)."""
        out: dict[str, str] = {}
        for name in sorted(self.device_class_specs):
            explicit = str((self.device_class_specs[name] or {}).get("extendedResourceName") or "")
            if explicit:
                out.setdefault(explicit, name)
            out.setdefault(f"{IMPLICIT_EXTENDED_PREFIX}{name}", name)
        return out

    def node(self, name: str) -> GpuNode:
        for n in self.gpu_nodes:
            if n.name == name:
                return n
        raise KeyError(f"no GPU node {name!r} (GPU nodes: {', '.join(n.name for n in self.gpu_nodes) or 'none'})")


#: KEP-5004: every DeviceClass also serves the extended resource of this prefix and its own name.
IMPLICIT_EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"


def _count(quantity: str) -> int:
    """Extended resources are integers; anything else counts as 0 rather than a guess."""
    try:
        return int(quantity)
    except ValueError:
        return 0


def _strings(mapping: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in (mapping or {}).items()}


def as_v1_slice(obj: Obj) -> Obj:
    """A ResourceSlice of any served version in the resource.k8s.io/v1 shape: v1beta1 nests each
    device's attributes and capacity under ``basic``; v1beta2 and v1 have them on the device."""
    spec = obj.get("spec") or {}
    devices = spec.get("devices") or []
    if not any("basic" in d for d in devices):
        return obj
    flat = [{**{k: v for k, v in d.items() if k != "basic"}, **(d.get("basic") or {})} for d in devices]
    return {**obj, "spec": {**spec, "devices": flat}}


def _slice_info(obj: Obj) -> ResourceSliceInfo:
    obj = as_v1_slice(obj)
    spec = obj.get("spec") or {}
    node = spec.get("nodeName")
    return ResourceSliceInfo(
        name=str((obj.get("metadata") or {}).get("name", "")), node=str(node) if node else None,
        driver=str(spec.get("driver", "")), pool=str((spec.get("pool") or {}).get("name", "")),
        devices=tuple(str(d.get("name", "")) for d in spec.get("devices") or ()), raw=obj)


def _is_gpu_node(node: Obj, has_slices: bool) -> bool:
    meta, status = node.get("metadata") or {}, node.get("status") or {}
    resources = {**(status.get("capacity") or {}), **(status.get("allocatable") or {})}
    return (has_slices or any(is_gpu_resource(k) for k in resources)
            or str((meta.get("labels") or {}).get(GPU_PRESENT_LABEL, "")).lower() == "true")


def _gpu_node(node: Obj, slices: tuple[ResourceSliceInfo, ...]) -> GpuNode:
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    return GpuNode(
        name=str(meta.get("name", "")), labels=_strings(meta.get("labels")),
        capacity=_strings(status.get("capacity")), allocatable=_strings(status.get("allocatable")),
        taints=tuple(Taint(str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "")))
                     for t in spec.get("taints") or ()),
        conditions=tuple(NodeCondition(str(c.get("type", "")), str(c.get("status", "Unknown")),
                                       str(c.get("reason", "")), str(c.get("message", "")),
                                       str(c["lastTransitionTime"]) if c.get("lastTransitionTime") else None)
                         for c in status.get("conditions") or ()),
        slices=slices, unschedulable=bool(spec.get("unschedulable")))


def build_inventory(nodes: Iterable[Obj], runtime_classes: Iterable[Obj], device_classes: Iterable[Obj],
                    slices: Iterable[Obj], cluster_policy: Obj | None, *, dra_served: bool = False,
                    dra_version: str | None = None, gpu_cluster: Obj | None = None,
                    device_taint_rules: Iterable[Obj] | None = None) -> Inventory:
    """Pure: the inventory from listed objects. A node is a GPU node when it has a GPU extended
    resource (capacity or allocatable), the ``nvidia.com/gpu.present=true`` label, or a ResourceSlice."""
    slice_infos = tuple(sorted((_slice_info(s) for s in slices), key=lambda s: s.name))
    by_node: dict[str, list[ResourceSliceInfo]] = {}
    for info in slice_infos:
        if info.node:
            by_node.setdefault(info.node, []).append(info)
    gpu_nodes: list[GpuNode] = []
    others: list[str] = []
    for node in nodes:
        name = str((node.get("metadata") or {}).get("name", ""))
        if _is_gpu_node(node, name in by_node):
            gpu_nodes.append(_gpu_node(node, tuple(by_node.get(name, ()))))
        else:
            others.append(name)
    def state(obj: Obj | None) -> ClusterPolicyState | None:
        if obj is None:
            return None
        return ClusterPolicyState(str((obj.get("metadata") or {}).get("name", "")),
                                  (obj.get("status") or {}).get("state"), dict(obj.get("spec") or {}))

    device_classes = list(device_classes)
    return Inventory(
        gpu_nodes=tuple(sorted(gpu_nodes, key=lambda n: n.name)), other_nodes=tuple(sorted(others)),
        runtime_classes=tuple(sorted((RuntimeClassInfo(str((r.get("metadata") or {}).get("name", "")),
                                                       str(r.get("handler", "")),
                                                       _strings((r.get("scheduling") or {}).get("nodeSelector")))
                                      for r in runtime_classes),
                                     key=lambda r: r.name)),
        device_classes=tuple(sorted(str((d.get("metadata") or {}).get("name", "")) for d in device_classes)),
        slices=slice_infos, cluster_policy=state(cluster_policy), dra_served=dra_served,
        dra_version=dra_version or ("v1" if dra_served else None),
        device_class_specs={str((d.get("metadata") or {}).get("name", "")): dict(d.get("spec") or {})
                            for d in device_classes},
        gpu_cluster=state(gpu_cluster),
        device_taint_rules=None if device_taint_rules is None else tuple(device_taint_rules))


def _list_all(cluster: Cluster, what: str, fn: Any, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """Every item, in pages of 500 (a 1000-node list is megabytes)."""
    items: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        page = cluster.call_json(what, fn, *args, limit=500, _continue=token, **kwargs)
        items.extend(page.get("items") or [])
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return items


def load_inventory(cluster: Cluster, *, node_selector: str | None = None) -> Inventory:
    """List nodes (those matching ``node_selector``, a label selector the API server applies),
    RuntimeClasses, and, where served, DeviceClasses, ResourceSlices (in the newest resource.k8s.io
    version served: v1, else v1beta2 or v1beta1, so a 1.32/1.33 cluster's DRA-only nodes are found)
    and the ClusterPolicy; then :func:`build_inventory`."""
    discovery = cluster.discover()
    nodes = _list_all(cluster, "list nodes", cluster.core.list_node, **(
        {"label_selector": node_selector} if node_selector else {}))
    runtime_classes = _list_all(cluster, "list runtimeclasses", cluster.node_api.list_runtime_class)
    device_classes: list[dict[str, Any]] = []
    slices: list[dict[str, Any]] = []
    dra_served = discovery.serves_resource("resource.k8s.io/v1", "resourceslices")
    version = discovery.dra_version
    if dra_served:
        device_classes = _list_all(cluster, "list deviceclasses", cluster.resource.list_device_class)
        slices = _list_all(cluster, "list resourceslices", cluster.resource.list_resource_slice)
    elif version is not None:  # the typed client speaks v1 only: read the beta versions as custom objects
        custom = cluster.custom.list_cluster_custom_object
        device_classes = _list_all(cluster, "list deviceclasses", custom, "resource.k8s.io", version, "deviceclasses")
        slices = _list_all(cluster, "list resourceslices", custom, "resource.k8s.io", version, "resourceslices")
    policy: dict[str, Any] | None = None
    if discovery.cluster_policy:
        try:
            policies = cluster.call_json("list clusterpolicies", cluster.custom.list_cluster_custom_object,
                                         "nvidia.com", "v1", "clusterpolicies").get("items") or []
        except NotFoundError:  # the CRD went away between discovery and the list
            policies = []
        policy = policies[0] if policies else None
    gpu_cluster: dict[str, Any] | None = None
    if discovery.gpu_cluster:
        try:
            found = cluster.call_json("list gpuclusters", cluster.custom.list_cluster_custom_object,
                                      "nvidia.com", "v1alpha1", "gpuclusters").get("items") or []
        except NotFoundError:
            found = []
        gpu_cluster = found[0] if found else None
    rules: list[dict[str, Any]] | None = None
    rules_version = next((v for v in TAINT_RULE_VERSIONS
                          if discovery.serves_resource(f"resource.k8s.io/{v}", "devicetaintrules")), None)
    if rules_version is not None:  # served only where DRADeviceTaintRules is on (off by default in 1.36)
        try:
            rules = _list_all(cluster, "list devicetaintrules", cluster.custom.list_cluster_custom_object,
                              "resource.k8s.io", rules_version, "devicetaintrules")
        except NotFoundError:
            rules = []
    inventory = build_inventory(nodes, runtime_classes, device_classes, slices, policy, dra_served=dra_served,
                                dra_version=version, gpu_cluster=gpu_cluster, device_taint_rules=rules)
    return replace(inventory, server_version=discovery.server_version or None)


#: The resource.k8s.io versions DeviceTaintRules are read in, newest first (KEP-5055: v1alpha3 from
#: 1.33, v1beta2 from 1.36 where DRADeviceTaintRules is enabled); discovery picks the one served.
TAINT_RULE_VERSIONS = ("v1", "v1beta2", "v1alpha3")


def list_active_pods(cluster: Cluster) -> list[dict[str, Any]]:
    """Every pod of the cluster not yet finished (the API server filters on status.phase): who
    holds GPUs before a job that needs whole nodes."""
    return _list_all(cluster, "list pods", cluster.core.list_pod_for_all_namespaces,
                     field_selector="status.phase!=Succeeded,status.phase!=Failed")


#: The label selectors of the pods whose images show the GPU stack's versions, one cluster-wide list
#: each (set-based, so the GPU Operator's operands are one request): the GPU Operator labels each
#: operand DaemonSet's pods ``app=<DaemonSet>`` and its own Deployment's ``app=gpu-operator``; the
#: standalone Helm charts label theirs ``app.kubernetes.io/name=<chart>``.
COMPONENT_SELECTORS: tuple[str, ...] = (
    "app in (gpu-operator,nvidia-container-toolkit-daemonset,nvidia-device-plugin-daemonset,nvidia-dcgm,"
    "nvidia-dcgm-exporter)",
    "app.kubernetes.io/name in (dcgm-exporter,nvidia-device-plugin,nvidia-dra-driver-gpu)",
)


@dataclass(frozen=True)
class ComponentPod:
    """A pod of the GPU stack and the images of its (non-init) containers, as its spec names them."""

    namespace: str
    name: str
    node: str | None  # None: not bound yet
    phase: str
    images: tuple[str, ...]

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


def component_pods(pods: Iterable[Obj]) -> tuple[ComponentPod, ...]:
    """Pure: the listed pods (deduplicated: the selectors may overlap), those being deleted left out."""
    seen: dict[tuple[str, str], ComponentPod] = {}
    for pod in pods:
        meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
        if meta.get("deletionTimestamp"):
            continue
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        node = spec.get("nodeName")
        seen[key] = ComponentPod(key[0], key[1], str(node) if node else None, str(status.get("phase") or "Pending"),
                                 tuple(str(c.get("image", "")) for c in spec.get("containers") or ()))
    return tuple(sorted(seen.values(), key=lambda p: (p.namespace, p.name)))


def list_component_pods(cluster: Cluster) -> tuple[ComponentPod, ...]:
    """The GPU stack's pods in every namespace (one list per :data:`COMPONENT_SELECTORS` entry)."""
    found: list[Obj] = []
    for selector in COMPONENT_SELECTORS:
        found += _list_all(cluster, f"list pods -l {selector!r}", cluster.core.list_pod_for_all_namespaces,
                           label_selector=selector)
    return component_pods(found)
