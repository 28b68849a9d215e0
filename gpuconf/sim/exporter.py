"""The DCGM exporter of every simulated GPU node: its pod, its Service, and its ``/metrics`` answer.

With the GPU Operator, the exporter is the operator's ``nvidia-dcgm-exporter`` DaemonSet in
``gpu-operator`` (pods labelled ``app=nvidia-dcgm-exporter``, container port 9400 named
``metrics``, Service port ``gpu-metrics``); without it, the standalone Helm chart's
(``app.kubernetes.io/name=dcgm-exporter``, here in the ``dcgm-exporter`` namespace). The node agents
register one Running pod per node (a DaemonSet pod that has been up for a while: no pull, no
start-up, and the node's first pod address), and :class:`ExporterProvider` answers the API
server's pod proxy (``GET /api/v1/namespaces/NS/pods/NAME:9400/proxy/metrics``) for them with the
exporter's text format rendered from the node model:

* one series per metric and GPU, labelled ``gpu`` (NVML index), ``UUID``, ``pci_bus_id``,
  ``device`` (``nvidia<minor>``), ``modelName``, ``Hostname`` and ``DCGM_FI_DRIVER_VERSION``;
* the default counters the checks read: utilisation 0 (idle), framebuffer used/free in MiB,
  temperature, power, the last Xid (``DCGM_FI_DEV_XID_ERRORS``: the GPU's last logged Xid, 0 when
  none), and ``DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL`` on NVLink nodes only;
* on a MIG-enabled GPU, utilisation and framebuffer per GPU instance (``GPU_I_ID``,
  ``GPU_I_PROFILE``, ``UUID`` the parent GPU's), ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` in place of
  ``DCGM_FI_DEV_GPU_UTIL`` (which DCGM does not report for MIG instances), and the device-level
  fields (temperature, power, Xid, NVLink) once for the parent GPU.

Faults: a node with ``exporter`` False gets no pod (``metrics-exporter-absent``); a GPU with
``exported`` False is left out of the answer (``metrics-gpu-missing``); a node's ``exporter_release``
is the release its pod runs (``dcgm-vulnerable``: an older DCGM and exporter).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from gpuconf.sim.profile import SimCluster, SimGpu, SimNode

__all__ = ["EXPORTER_PORT", "ExporterDeployment", "ExporterProvider", "deployment", "make_exporter_pod",
           "make_exporter_service", "make_exporter_status", "pod_names", "render_metrics"]

Obj = dict[str, Any]

#: dcgm-exporter's default listen address is :9400 (DCGM_EXPORTER_LISTEN).
EXPORTER_PORT = 9400
PORT_NAME = "metrics"
#: DCGM 4.5.3 and exporter 4.8.2: the release that fixes NVIDIA bulletin 5857 (CVE-2026-47483);
#: the -ubuntu22.04 base follows the published tag scheme (tests/data/real/security/image-tags.yaml)
RELEASE = "4.5.3-4.8.2"
IMAGE = f"nvcr.io/nvidia/k8s/dcgm-exporter:{RELEASE}-ubuntu22.04"


def image_of(node: SimNode) -> str:
    """The node's exporter image: the current release, or the one a fault left there (dcgm-vulnerable)."""
    return f"nvcr.io/nvidia/k8s/dcgm-exporter:{node.exporter_release or RELEASE}-ubuntu22.04"

#: Idle figures of a node at rest (no workload runs on the simulated GPUs between probes).
IDLE_TEMP_C = 34.0
IDLE_POWER_W = 71.5


@dataclass(frozen=True)
class ExporterDeployment:
    """Who deployed the exporter: the GPU Operator or the standalone Helm chart."""

    namespace: str
    name: str  # the DaemonSet's (and Service's) name, the pods' name prefix
    container: str
    labels: Mapping[str, str]
    service_port: str


OPERATOR = ExporterDeployment("gpu-operator", "nvidia-dcgm-exporter", "nvidia-dcgm-exporter",
                              {"app": "nvidia-dcgm-exporter"}, "gpu-metrics")
HELM_CHART = ExporterDeployment("dcgm-exporter", "dcgm-exporter", "exporter",
                                {"app.kubernetes.io/name": "dcgm-exporter"}, "metrics")


def deployment(cluster: SimCluster) -> ExporterDeployment:
    return OPERATOR if cluster.profile.operator.present else HELM_CHART


#: The five-character suffixes Kubernetes generates names with (no vowels, no look-alikes).
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def _suffix(key: str) -> str:
    n = int(hashlib.sha1(key.encode()).hexdigest(), 16)
    return "".join(_ALPHABET[(n // len(_ALPHABET) ** i) % len(_ALPHABET)] for i in range(5))


@cache
def pod_names(name: str, nodes: tuple[str, ...]) -> Mapping[str, str]:
    """Each node's DaemonSet pod name: the DaemonSet's and five characters, stable per node and
    distinct across the cluster (a clash is re-drawn, as generateName's retry would)."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for node in nodes:
        salt = 0
        while (candidate := f"{name}-{_suffix(f'{node}/{salt}')}") in used:
            salt += 1
        used.add(candidate)
        out[node] = candidate
    return out


def make_exporter_pod(d: ExporterDeployment, node: SimNode, name: str) -> Obj:
    """The exporter pod ``name`` of ``node``, bound to it (a DaemonSet pod is created with its nodeName)."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": d.namespace, "labels": dict(d.labels)},
        "spec": {
            "nodeName": node.name, "restartPolicy": "Always",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{
                "name": d.container, "image": image_of(node),
                "env": [{"name": "DCGM_EXPORTER_LISTEN", "value": f":{EXPORTER_PORT}"},
                        {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"}],
                "ports": [{"name": PORT_NAME, "containerPort": EXPORTER_PORT, "protocol": "TCP"}],
            }],
        },
    }


def make_exporter_status(d: ExporterDeployment, *, ip: str, started: str, image: str = IMAGE) -> Obj:
    """A Running, Ready status (what the kubelet reported when the pod started)."""
    conditions = [{"type": t, "status": "True", "lastTransitionTime": started}
                  for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")]
    return {"phase": "Running", "conditions": conditions, "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}],
            "podIP": ip, "podIPs": [{"ip": ip}], "startTime": started,
            "containerStatuses": [{"name": d.container, "image": image, "imageID": "", "ready": True,
                                   "restartCount": 0, "started": True,
                                   "state": {"running": {"startedAt": started}}}]}


def make_exporter_service(d: ExporterDeployment) -> Obj:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": d.name, "namespace": d.namespace, "labels": dict(d.labels)},
            "spec": {"selector": dict(d.labels), "type": "ClusterIP",
                     "ports": [{"name": d.service_port, "port": EXPORTER_PORT, "targetPort": EXPORTER_PORT,
                                "protocol": "TCP"}]}}


# --- the text format ----------------------------------------------------------------------------

_HELP = {
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "GPU temperature (in C)."),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W)."),
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %)."),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gauge", "Ratio of time the graphics engine is active."),
    "DCGM_FI_DEV_FB_FREE": ("gauge", "Frame buffer memory free (in MiB)."),
    "DCGM_FI_DEV_FB_USED": ("gauge", "Frame buffer memory used (in MiB)."),
    "DCGM_FI_DEV_XID_ERRORS": ("gauge", "Value of the last XID error encountered."),
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": ("counter", "Total number of NVLink bandwidth counters for all lanes."),
}


def _labels(pairs: Mapping[str, str]) -> str:
    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return ",".join(f'{k}="{esc(v)}"' for k, v in pairs.items())


def _series(node: SimNode, hostname: str) -> list[tuple[str, dict[str, str], float]]:
    out: list[tuple[str, dict[str, str], float]] = []
    for g in node.present_gpus:
        if not g.exported:
            continue
        base = {"gpu": str(g.index), "UUID": g.uuid, "pci_bus_id": g.pci_bus_id, "device": f"nvidia{g.minor}",
                "modelName": node.model_of(g).name, "Hostname": hostname, "DCGM_FI_DRIVER_VERSION": str(node.driver)}
        out += _gpu_series(node, g, base)
    return out


def _gpu_series(node: SimNode, g: SimGpu, base: dict[str, str]) -> list[tuple[str, dict[str, str], float]]:
    out = [("DCGM_FI_DEV_GPU_TEMP", base, IDLE_TEMP_C), ("DCGM_FI_DEV_POWER_USAGE", base, IDLE_POWER_W),
           ("DCGM_FI_DEV_XID_ERRORS", base, float(g.xids[-1] if g.xids else 0))]
    if node.interconnect.nvlink:
        out.append(("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", base, 0.0))
    if not g.mig:
        out += [("DCGM_FI_DEV_GPU_UTIL", base, 0.0), ("DCGM_FI_DEV_FB_USED", base, 0.0),
                ("DCGM_FI_DEV_FB_FREE", base, float(g.memory_mib))]
        return out
    for inst in g.mig:
        labels = {**base, "GPU_I_PROFILE": inst.profile, "GPU_I_ID": str(inst.gi)}
        out += [("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, 0.0), ("DCGM_FI_DEV_FB_USED", labels, 0.0),
                ("DCGM_FI_DEV_FB_FREE", labels, float(inst.memory_mib))]
    return out


def render_metrics(node: SimNode, *, hostname: str | None = None) -> str:
    """The exporter's ``/metrics`` text for ``node`` (HELP and TYPE once per family, as it writes them)."""
    families: dict[str, list[str]] = {}
    for metric, labels, value in _series(node, hostname or node.name):
        families.setdefault(metric, []).append(f"{metric}{{{_labels(labels)}}} {value:g}")
    lines: list[str] = []
    for metric, samples in families.items():
        kind, text = _HELP[metric]
        lines += [f"# HELP {metric} {text}", f"# TYPE {metric} {kind}", *samples]
    return "\n".join(lines) + "\n"


class ExporterProvider:
    """Answers the pod proxy for the exporter pods of ``cluster``'s nodes: ``(status, content type,
    body)``, or None for any other pod (the API server's default then answers)."""

    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster
        self.deployment = deployment(cluster)
        self._nodes = {n.name: n for n in cluster.nodes}

    def __call__(self, pod: Mapping[str, Any], port: str, path: str) -> tuple[int, str, bytes] | None:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        node = self._nodes.get(str((pod.get("spec") or {}).get("nodeName") or ""))
        if node is None or not node.exporter or any(labels.get(k) != v for k, v in self.deployment.labels.items()):
            return None
        if port not in ("", str(EXPORTER_PORT)):  # no port: the API server takes the first container port
            return None  # nothing listens there: connection refused
        if path.strip("/") != "metrics":
            return 404, "text/plain; charset=utf-8", b"404 page not found\n"
        return 200, "text/plain; version=0.0.4; charset=utf-8", render_metrics(node).encode()
