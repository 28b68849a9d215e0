"""Finding the DCGM exporter on each GPU node and reading its ``/metrics`` through the API server.

The exporter pods are found with one cluster-wide pod list per known deployment's label selector
(the GPU Operator's ``app=nvidia-dcgm-exporter``, the dcgm-exporter Helm chart's
``app.kubernetes.io/name=dcgm-exporter``), one pod per node. Each is scraped through the pod proxy,
``GET /api/v1/namespaces/{ns}/pods/{name}:{port}/proxy/metrics`` (``pods/proxy``, verb get), so
the runner needs no route to the pod network. A scrape never stops the run: the answer, the
node's failure (no pod, a pod not running, the exporter not answering) or the runner's missing
permission comes back as a :class:`Scrape`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from gpuconf.cluster.access import Cluster, _retry_after, wrap_error
from gpuconf.cluster.errors import ClusterError, ForbiddenError, OverloadedError
from gpuconf.cluster.inventory import _list_all

__all__ = ["EXPORTER_SELECTORS", "ExporterPod", "Scrape", "exporter_pods", "list_exporter_pods", "scrape",
           "scrape_nodes"]

Obj = Mapping[str, Any]

#: The label selectors of the deployments that run dcgm-exporter, and who each is.
EXPORTER_SELECTORS: tuple[tuple[str, str], ...] = (
    ("app=nvidia-dcgm-exporter", "GPU Operator"),
    ("app.kubernetes.io/name=dcgm-exporter", "dcgm-exporter Helm chart"),
)
#: dcgm-exporter's default listen port (DCGM_EXPORTER_LISTEN=:9400), the container port named "metrics".
DEFAULT_PORT = 9400
#: The rule the runner's ClusterRole needs to scrape (manifests/runner/clusterrole.yaml has it).
PROXY_RULE = 'apiGroups: [""], resources: [pods/proxy], verbs: [get]'


@dataclass(frozen=True)
class ExporterPod:
    namespace: str
    name: str
    node: str
    phase: str
    port: int
    deployed_by: str

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Scrape:
    """One node's exporter scrape: ``text`` on success, else ``error`` (the cluster's fault) or
    ``forbidden`` (the runner's permissions)."""

    node: str
    pod: ExporterPod | None
    text: str | None = None
    error: str | None = None
    forbidden: str | None = None


def _port(pod: Obj) -> int:
    """The exporter's container port: the one named "metrics", else 9400 if declared, else the first."""
    ports = [p for c in (pod.get("spec") or {}).get("containers") or [] for p in c.get("ports") or []]
    for p in ports:
        if p.get("name") == "metrics" and p.get("containerPort"):
            return int(p["containerPort"])
    declared = [int(p["containerPort"]) for p in ports if p.get("containerPort")]
    return DEFAULT_PORT if DEFAULT_PORT in declared or not declared else declared[0]


def exporter_pods(found: Iterable[tuple[str, Obj]]) -> dict[str, ExporterPod]:
    """Pure: one exporter pod per node from (deployed_by, pod) pairs: a Running one first, then the
    newest; pods not bound to a node or being deleted are left out."""
    best: dict[str, tuple[tuple[bool, str], ExporterPod]] = {}
    for deployed_by, pod in found:
        meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
        node = spec.get("nodeName")
        if not node or meta.get("deletionTimestamp"):
            continue
        phase = str(status.get("phase") or "Pending")
        candidate = ExporterPod(str(meta.get("namespace", "")), str(meta.get("name", "")), str(node), phase,
                                _port(pod), deployed_by)
        rank = (phase == "Running", str(meta.get("creationTimestamp") or ""))
        if node not in best or rank > best[node][0]:
            best[node] = (rank, candidate)
    return {node: pod for node, (_, pod) in best.items()}


def list_exporter_pods(cluster: Cluster) -> dict[str, ExporterPod]:
    found: list[tuple[str, Obj]] = []
    for selector, deployed_by in EXPORTER_SELECTORS:
        found += [(deployed_by, p) for p in _list_all(cluster, f"list pods -l {selector}",
                                                      cluster.core.list_pod_for_all_namespaces,
                                                      label_selector=selector)]
    return exporter_pods(found)


def scrape(cluster: Cluster, node: str, pod: ExporterPod | None, *, timeout: float = 20.0) -> Scrape:
    """One GET of the exporter's /metrics through the pod proxy. An exporter that does not answer
    is the finding, not a transient error to wait out; only the API server's own hiccups (429
    with its Retry-After, 500, a dropped connection) get up to two more attempts, and a 429 on the
    last is the API server overloaded (OverloadedError: the check is not tested, the node not judged)."""
    if pod is None:
        return Scrape(node, None, error=f"no DCGM exporter pod runs on {node} (looked for "
                      f"{' or '.join(s for s, _ in EXPORTER_SELECTORS)} in every namespace)")
    if pod.phase != "Running":
        return Scrape(node, pod, error=f"the DCGM exporter pod {pod.ref} on {node} is {pod.phase}, not Running")
    what = f"get pods/proxy {pod.ref}:{pod.port}/metrics"
    for attempt in range(3):
        try:
            response: Any = cluster.core.connect_get_namespaced_pod_proxy_with_path(
                f"{pod.name}:{pod.port}", pod.namespace, "metrics", _preload_content=False,
                _request_timeout=timeout)
            return Scrape(node, pod, text=bytes(response.data or b"").decode("utf-8", "replace"))
        except Exception as e:  # noqa: BLE001 - every failure becomes this node's finding
            error = wrap_error(e, what, cluster.host)
            hiccup = (isinstance(e, ApiException) and e.status in (429, 500)) or isinstance(
                e, urllib3.exceptions.ProtocolError) or (isinstance(e, urllib3.exceptions.MaxRetryError)
                                                         and isinstance(e.reason, urllib3.exceptions.ProtocolError))
            if not hiccup or attempt == 2:
                break
            time.sleep(min(5.0, _retry_after(e) or 0.5))
    if isinstance(error, OverloadedError):  # the API server refused, the exporter was never asked
        raise OverloadedError(f"{error.message} (gave up after 3 attempts)", status=429, reason=error.reason)
    if isinstance(error, ForbiddenError):
        return Scrape(node, pod, forbidden=f"the runner may not get pods/proxy ({error}); add the rule "
                      f"{PROXY_RULE} to its ClusterRole")
    return Scrape(node, pod, error=f"the DCGM exporter pod {pod.ref} on {node} did not answer on port {pod.port}: "
                  f"{error}")


def scrape_nodes(cluster: Cluster, nodes: Iterable[str], *, workers: int = 16,
                 timeout: float = 20.0) -> dict[str, Scrape]:
    """Every node's exporter scraped at once (one pod list, then the scrapes in parallel); a failed
    pod list makes every node's scrape an error (or forbidden) with the list's reason."""
    names = list(nodes)
    try:
        pods = list_exporter_pods(cluster)
    except ForbiddenError as e:
        return {n: Scrape(n, None, forbidden=f"the runner may not list pods ({e})") for n in names}
    except OverloadedError:
        raise
    except ClusterError as e:
        return {n: Scrape(n, None, error=f"could not look for the DCGM exporter pods: {e}") for n in names}
    with ThreadPoolExecutor(max(1, min(workers, len(names))), thread_name_prefix="gpuconf-scrape") as pool:
        done = pool.map(lambda n: scrape(cluster, n, pods.get(n), timeout=timeout), names)
        return {s.node: s for s in done}
