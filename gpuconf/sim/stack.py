"""The GPU stack's own pods on the simulated cluster, whose images show each component's version
where a real cluster shows it (the check security.component-versions reads them):

* under the GPU Operator's ClusterPolicy, in ``gpu-operator``: per node the toolkit
  (``nvidia-container-toolkit-daemonset``, ``app=nvidia-container-toolkit-daemonset``, image
  ``nvcr.io/nvidia/k8s/container-toolkit:v<node's toolkit>-ubuntu20.04``) and, where the node runs
  it, the device plugin (``nvidia-device-plugin-daemonset``); once, the operator's own pod
  (``app=gpu-operator``, ``nvcr.io/nvidia/gpu-operator:v<version>``);
* under the GPUCluster (no ClusterPolicy: no toolkit, no device plugin from the operator) and
  without an operator: the device plugin from its Helm chart (``app.kubernetes.io/name=nvidia-device-plugin``,
  namespace ``nvidia-device-plugin``) where a node runs it; the toolkit is installed on the host
  and shows its version nowhere in the API;
* on DRA nodes, NVIDIA's DRA driver's kubelet plugin (``app.kubernetes.io/name=nvidia-dra-driver-gpu``,
  namespace ``nvidia-dra-driver-gpu``).

The DCGM exporter's pods are gpuconf.sim.exporter's. Each pod is registered Running, like the
exporter's (a DaemonSet pod that has been up for a while). Fault: a node with ``toolkit_pod``
False gets no toolkit pod and the operator's ``nvidia.com/gpu.deploy.container-toolkit=false``
label (toolkit-version-unreadable).

The image references follow NVIDIA's published tags (tests/data/real/security/image-tags.yaml);
the device plugin's and the DRA driver's default versions are chosen above every bulletin's
fixed version in gpuconf/data/security_advisories.yaml, not read from a real cluster of one date.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpuconf.sim.exporter import Obj, pod_names
from gpuconf.sim.profile import SimCluster, SimNode

__all__ = ["DEFAULT_OPERATOR_VERSION", "StackPod", "stack_pods"]

#: The GPU Operator release a profile that names none runs (bulletin 5850's fixed release).
DEFAULT_OPERATOR_VERSION = "26.3.2"
#: The device plugin release the operator (or its Helm chart) deploys (bulletin 5659's fix is 0.17.3).
DEVICE_PLUGIN_VERSION = "0.17.3"
#: NVIDIA's DRA driver release (no bulletin names it; a release the driver's repository tags).
DRA_DRIVER_VERSION = "25.8.0"
OPERATOR_NAMESPACE = "gpu-operator"


@dataclass(frozen=True)
class StackPod:
    namespace: str
    daemonset: str  # the owning DaemonSet's (or Deployment's) name: the pods' name prefix
    container: str
    image: str
    labels: Mapping[str, str]


def _toolkit(node: SimNode) -> StackPod:
    return StackPod(OPERATOR_NAMESPACE, "nvidia-container-toolkit-daemonset", "nvidia-container-toolkit-ctr",
                    f"nvcr.io/nvidia/k8s/container-toolkit:v{node.toolkit.version}-ubuntu20.04",
                    {"app": "nvidia-container-toolkit-daemonset"})


def _device_plugin(operator: bool) -> StackPod:
    image = f"nvcr.io/nvidia/k8s-device-plugin:v{DEVICE_PLUGIN_VERSION}"
    if operator:
        return StackPod(OPERATOR_NAMESPACE, "nvidia-device-plugin-daemonset", "nvidia-device-plugin", image,
                        {"app": "nvidia-device-plugin-daemonset"})
    return StackPod("nvidia-device-plugin", "nvidia-device-plugin", "nvidia-device-plugin-ctr", image,
                    {"app.kubernetes.io/name": "nvidia-device-plugin"})


def _dra_plugin() -> StackPod:
    return StackPod("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu-kubelet-plugin", "gpus",
                    f"nvcr.io/nvidia/k8s-dra-driver-gpu:v{DRA_DRIVER_VERSION}",
                    {"app.kubernetes.io/name": "nvidia-dra-driver-gpu"})


def operator_pod(cluster: SimCluster) -> StackPod | None:
    operator = cluster.profile.operator
    if not operator.present:
        return None
    return StackPod(OPERATOR_NAMESPACE, "gpu-operator", "gpu-operator",
                    f"nvcr.io/nvidia/gpu-operator:v{operator.version or DEFAULT_OPERATOR_VERSION}",
                    {"app": "gpu-operator"})


def node_pods(cluster: SimCluster, node: SimNode) -> list[StackPod]:
    """The stack's pods on ``node`` (the operator's own pod runs on the cluster's first node)."""
    operator = cluster.profile.operator
    policy = operator.present and not operator.gpucluster
    out: list[StackPod] = []
    if policy and node.toolkit_pod:
        out.append(_toolkit(node))
    if node.device_plugin.enabled:
        out.append(_device_plugin(policy))
    if node.dra.enabled:
        out.append(_dra_plugin())
    if node.name == cluster.nodes[0].name:
        own = operator_pod(cluster)
        if own is not None:
            out.append(own)
    return out


def stack_pods(cluster: SimCluster, node: SimNode) -> list[Obj]:
    """The pod objects of :func:`node_pods`, bound to ``node``, named as their DaemonSet names them."""
    names = tuple(n.name for n in cluster.nodes)
    out = []
    for p in node_pods(cluster, node):
        name = pod_names(p.daemonset, names)[node.name]
        out.append({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": p.namespace, "labels": dict(p.labels)},
            "spec": {"nodeName": node.name, "restartPolicy": "Always",
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": [{"name": p.container, "image": p.image}]},
        })
    return out


def running_status(pod: Obj, *, ip: str, started: str) -> Obj:
    """A Running, Ready status, each container running since ``started``."""
    conditions = [{"type": t, "status": "True", "lastTransitionTime": started}
                  for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")]
    return {"phase": "Running", "conditions": conditions, "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}],
            "podIP": ip, "podIPs": [{"ip": ip}], "startTime": started,
            "containerStatuses": [{"name": c["name"], "image": c["image"], "imageID": "", "ready": True,
                                   "restartCount": 0, "started": True, "state": {"running": {"startedAt": started}}}
                                  for c in pod["spec"]["containers"]]}
