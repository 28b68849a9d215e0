"""Node agents: the kubelet, NVIDIA device plugin, container toolkit, GFD and NVIDIA DRA driver of
every node of a simulated cluster, in one process, talking to the API server only through the
Kubernetes API (like KWOK), so they work against the fake API server and a real control plane.

Usage::

    with FakeApiServer() as server, ApiClient(Configuration(host=server.url)) as api:
        with NodeAgents(expand(load_profile("healthy-h100")), api) as agents:
            agents.serve_logs(server)          # pods/log answered from the agents' memory
            agents.confirm_deletions(server)   # graceful pod deletion waits for the agent
            ...

What the agents do (the kubelet's own texts are in :mod:`.agent_model` and :mod:`.agent_pods`):

* **register** every Node (or adopt an existing one of that name) with GFD/NFD/operator labels,
  capacity and allocatable from the device plugin, the kubelet's conditions, nodeInfo and the
  log endpoint's port; a Lease per node in kube-node-lease, renewed with the renewals spread
  over the interval; the DRA driver's ResourceSlices; once per cluster the DeviceClasses
  (gpu.nvidia.com, mig.nvidia.com) when a node runs the DRA driver, the profile's RuntimeClasses,
  and the GPU Operator's ClusterPolicy ``cluster-policy`` (its CRD first when not served);
* **run the pods bound to their nodes** (:class:`gpuconf.sim.agent_pods.Kubelet`), from ONE pod
  watch over all pods (relisted after a 410 or an error), a work queue and a few workers;
* **serve container output** from memory (:meth:`NodeAgents.serve_logs`, and the kubelet-style
  endpoint of :mod:`.agent_logs`).

Every request goes through the official client, retried on 429 (honouring Retry-After), 5xx and
connection failures with tenacity. At idle the agents send only lease renewals: by default at
most ``lease_rate`` (18) per second, whatever the node count (the interval grows past the
kubelet's 10 s when there are more than 180 nodes: 1,000 nodes renew every 55.6 s). A real
control plane marks a node NotReady when its lease is older than the controller manager's
node-monitor-grace-period (40-50 s by default), so against a real one with more than about 700
nodes pass a shorter ``lease_interval`` (and accept the higher rate) or raise that period.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpuconf.sim import exporter, stack
from gpuconf.sim.agent_io import MERGE, AgentApi, WorkQueue
from gpuconf.sim.agent_logs import LogEndpoint, LogStore, NoSuchContainer
from gpuconf.sim.agent_model import (
    admin_spec,
    cluster_policy_status,
    kubelet_version,
    kubelet_wording,
    make_cluster_policy,
    make_cluster_policy_crd,
    make_device_classes,
    make_gpu_cluster,
    make_gpu_cluster_crd,
    make_lease,
    make_mig_parted_config,
    make_node,
    make_node_status,
    make_runtime_class,
    pod_ip,
)
from gpuconf.sim.agent_pods import Kubelet, NodeRuntime, PodRun, Timings, rfc3339
from gpuconf.sim.node_facts import node_resources, resource_slices
from gpuconf.sim.profile import SimCluster, SimNode
from gpuconf.sim.server import FakeApiServer, LogProvider, LogRequest, LogUnavailable
from gpuconf.sim.tenants import make_tenant_namespace, make_tenant_pod

__all__ = ["DEFAULT_LEASE_RATE", "NodeAgents", "default_lease_interval"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

LEASE_NAMESPACE = "kube-node-lease"
GPU_RESOURCE = "nvidia.com/gpu"
#: Lease renewals per second the agents allow themselves by default (the kubelet renews every
#: 10 s, NodeLeaseDurationSeconds 40, pkg/kubelet/nodelease).
DEFAULT_LEASE_RATE = 18.0


def default_lease_interval(nodes: int, rate: float = DEFAULT_LEASE_RATE) -> float:
    """The kubelet's 10 s, stretched so that ``nodes`` renewals spread over it stay at ``rate``/s."""
    return max(10.0, nodes / rate)


def _now_micro(t: float | None = None) -> str:
    t = time.time() if t is None else t
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"


# --- the agents ---------------------------------------------------------------------------------


class NodeAgents:
    """The agents of every node of ``cluster``, over ``api_client``.

    ``workers``: threads running pods; ``lease_interval``: seconds between one node's lease
    renewals (default: :func:`default_lease_interval` at ``lease_rate``); ``speed``: how much
    faster than real time pulls, compiles and probe runs go (1.0: real time); ``log_port``: the
    log endpoint's port (0: a free one); ``address``: the nodes' InternalIP, where an API server
    reaches that endpoint (``gpuconf sim agents --address`` against a real control plane).
    """

    def __init__(self, cluster: SimCluster, api_client: client.ApiClient, *, workers: int = 4,
                 lease_interval: float | None = None, lease_rate: float = DEFAULT_LEASE_RATE,
                 speed: float = Timings.speed, log_port: int = 0, register_concurrency: int = 8,
                 retry_timeout: float = 30.0, watch_timeout: int = 300, address: str = "127.0.0.1") -> None:
        self.cluster = cluster
        self.lease_interval = lease_interval if lease_interval is not None else \
            default_lease_interval(len(cluster.nodes), lease_rate)
        #: The kubelet's ratio: renew every quarter of the lease duration (40 s / 10 s).
        self.lease_duration = max(40, math.ceil(4 * self.lease_interval))
        self.kubelet_version = kubelet_version(cluster.profile)
        self._stopping = threading.Event()
        self._api = AgentApi(api_client, self._stopping, retry_timeout)
        self._workers = workers
        self._register_concurrency = register_concurrency
        self._watch_timeout = watch_timeout
        self._runtimes = {n.name: NodeRuntime(n, i) for i, n in enumerate(cluster.nodes)}
        self.logs = LogStore()
        self.kubelet = Kubelet(self._runtimes, self, self.logs, wording=kubelet_wording(cluster.profile.kubernetes),
                               timings=Timings(speed=speed))
        #: The InternalIP the nodes advertise: where an API server reaches the log endpoint.
        self.address = address
        bind = "127.0.0.1" if address.startswith("127.") else "0.0.0.0"  # noqa: S104 - the node's own address
        self._endpoint = LogEndpoint(self._lookup, host=bind, port=log_port, name=address)
        self._queue = WorkQueue()
        self._cache: dict[str, Obj] = {}
        self._cache_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._watch_resp: Any = None
        self._seen: str | None = None  # the last resourceVersion the pod watch delivered
        self._failures: dict[str, int] = {}
        self._runtime_classes: dict[str, tuple[float, str | None]] = {}
        self._ready: dict[str, tuple[float, tuple[str, str]]] = {}  # node -> (read at, its Ready condition)
        self._event_ns = 0
        self._event_lock = threading.Lock()
        self._servers: list[tuple[FakeApiServer, LogProvider]] = []
        self._hooked: list[FakeApiServer] = []
        self._node_uids: dict[str, str] = {}
        self._started = False

    # Lifecycle -------------------------------------------------------------------------------

    @property
    def log_port(self) -> int:
        return self._endpoint.port

    @property
    def log_url(self) -> str:
        return self._endpoint.url

    @property
    def log_certificate(self) -> bytes:
        """The log endpoint's self-signed serving certificate (PEM)."""
        return self._endpoint.certificate

    def start(self) -> NodeAgents:
        """Register everything (returns once every Node, Lease and slice exists), then run pods."""
        if self._started:
            return self
        self._started = True
        self._endpoint.start()
        try:
            self._register_cluster_objects()
            with ThreadPoolExecutor(self._register_concurrency, thread_name_prefix="gpuconf-sim-register") as pool:
                list(pool.map(self._register_node, self.cluster.nodes))
        except BaseException:
            self.stop()
            raise
        self._spawn("gpuconf-sim-pod-watch", self._watch_loop)
        for i in range(self._workers):
            self._spawn(f"gpuconf-sim-kubelet-{i}", self._work)
        self._spawn("gpuconf-sim-leases", self._lease_loop)
        return self

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self) -> None:
        """Stop watching, running and renewing; the Nodes and their objects stay (like a stopped kubelet)."""
        self._stopping.set()
        self._queue.close()
        resp = self._watch_resp
        if resp is not None:
            with contextlib.suppress(Exception):
                resp.shutdown()
        for thread in self._threads:
            thread.join(10)
        self._threads.clear()
        self._endpoint.stop()
        for server, previous in self._servers:
            server.set_log_provider(previous)
        for server in self._hooked:
            server.store.set_pod_termination_hook(None)
        self._servers.clear()
        self._hooked.clear()

    def __enter__(self) -> NodeAgents:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # In-process seams with a FakeApiServer -----------------------------------------------------

    def serve_logs(self, server: FakeApiServer) -> None:
        """Answer ``server``'s pods/log for pods on these nodes (others go to its previous provider)."""
        previous = server.log_provider

        def provide(request: LogRequest) -> str:
            if (request.pod.get("spec") or {}).get("nodeName") not in self._runtimes:
                return previous(request)
            try:
                return self._lookup(request.namespace, request.pod_name, request.container, request.previous)
            except NoSuchContainer:
                raise LogUnavailable(f'container "{request.container}" in pod "{request.pod_name}" is waiting to '
                                     "start: ContainerCreating") from None

        server.set_log_provider(provide)
        self._servers.append((server, previous))

    def confirm_deletions(self, server: FakeApiServer) -> None:
        """Make ``server`` wait for these agents to confirm graceful deletion of their pods, as a
        real API server waits for the kubelet (the agent deletes with grace 0 once stopped)."""
        nodes = set(self._runtimes)
        server.store.set_pod_termination_hook(
            lambda pod: not self._stopping.is_set() and (pod.get("spec") or {}).get("nodeName") in nodes)
        self._hooked.append(server)

    def pod_run(self, namespace: str, name: str) -> PodRun | None:
        """The agent's record of a pod (for inspection and tests)."""
        return self.kubelet.pod_run(f"{namespace}/{name}")

    def _lookup(self, namespace: str, pod: str, container: str, previous: bool) -> str:
        key = f"{namespace}/{pod}"
        run = self.kubelet.pod_run(key)
        if run is None:
            raise NoSuchContainer(f'pod "{pod}" does not exist')
        c = next((c for c in run.containers if c.name == container), None)
        if c is None:
            raise NoSuchContainer(f'container "{container}" not found in pod "{pod}"')
        if previous:
            raise LogUnavailable(f'previous terminated container "{container}" in pod "{pod}" not found')
        got = self.logs.get(key, container)
        if got is not None and got[0] == run.uid:
            return got[1]
        if c.phase in ("new", "pulling", "create"):
            raise LogUnavailable(f'container "{container}" in pod "{pod}" is waiting to start: {c.waiting}')
        return ""

    # Registration ------------------------------------------------------------------------------

    def _register_cluster_objects(self) -> None:
        api = self._api
        for rc in self.cluster.runtime_classes:
            api.ignoring((409,), api.node.create_runtime_class, make_runtime_class(rc.name, rc.handler))
        drivers = {n.dra.driver for n in self.cluster.nodes if n.dra.enabled}
        for device_class in make_device_classes(drivers, extended_resource=self.cluster.extended_resource,
                                                gpu_selectors=self.cluster.gpu_class_selectors):
            api.ignoring((409,), api.resource.create_device_class, device_class)
        if self.cluster.profile.operator.gpucluster:  # GPUCluster mode: no ClusterPolicy, no mig-manager
            self._register_gpu_cluster()
        elif self.cluster.profile.operator.present:
            self._register_cluster_policy()
            mig_config = make_mig_parted_config(self.cluster)
            if mig_config is not None:
                namespace = mig_config["metadata"]["namespace"]
                api.ignoring((409,), api.core.create_namespace, {"metadata": {"name": namespace}})
                api.ignoring((409,), api.core.create_namespaced_config_map, namespace, mig_config)
        self._register_exporter_service()

    def _register_cluster_policy(self) -> None:
        self._register_custom(make_cluster_policy_crd(), "v1", "clusterpolicies", make_cluster_policy(self.cluster),
                              cluster_policy_status())

    def _register_gpu_cluster(self) -> None:
        self._register_custom(make_gpu_cluster_crd(), "v1alpha1", "gpuclusters", make_gpu_cluster(),
                              cluster_policy_status())

    def _register_custom(self, crd: Obj, version: str, plural: str, body: Obj, status: Obj) -> None:
        """The operator's CRD (when not served yet), its one cluster-scoped object and its status."""
        api = self._api
        if api.ignoring((404,), api.extensions.read_custom_resource_definition, crd["metadata"]["name"]) is None:
            api.ignoring((409,), api.extensions.create_custom_resource_definition, crd)
        deadline = time.monotonic() + 10
        while True:  # a real server serves a new CRD after a moment (404 until it is Established)
            try:
                api.ignoring((409,), api.custom.create_cluster_custom_object, "nvidia.com", version, plural, body)
                break
            except ApiException as e:
                if e.status != 404 or time.monotonic() > deadline:
                    raise
                self._stopping.wait(0.2)
        api.call(api.custom.patch_cluster_custom_object_status, "nvidia.com", version, plural,
                 body["metadata"]["name"], {"status": status}, _content_type=MERGE)

    def _register_node(self, node: SimNode) -> None:
        api = self._api
        runtime = self._runtimes[node.name]
        body = make_node(node, runtime.index)
        now = time.time()
        status = make_node_status(node, kubelet=self.kubelet_version, port=self.log_port, now=now,
                                  address=self.address)
        created = api.ignoring((409,), api.core.create_node, body)
        if created is None:  # adopt the existing Node: our labels over its own, our status in place of its
            existing = api.call(api.core.read_node, node.name)
            meta = existing.setdefault("metadata", {})
            meta["labels"] = {**(meta.get("labels") or {}), **body["metadata"]["labels"]}
            meta["annotations"] = {**(meta.get("annotations") or {}), **body["metadata"]["annotations"]}
            _add_admin_spec(existing.setdefault("spec", {}), admin_spec(node))
            created = api.call(api.core.replace_node, node.name, existing)
            created["status"] = status
            created = api.call(api.core.replace_node_status, node.name, created)
        else:
            created = api.call(api.core.patch_node_status, node.name, {"status": status}, _content_type=MERGE)
        uid = str(created.get("metadata", {}).get("uid", ""))
        self._node_uids[node.name] = uid
        # A kubelet that stopped posting (node-not-ready, Unknown) last renewed its lease when it stopped.
        dead = node.ready == "Unknown"
        renewed = _now_micro(now - node.ready_since_s if dead else now)
        lease = make_lease(node.name, uid, duration=self.lease_duration, now_micro=renewed)
        if api.ignoring((409,), api.coordination.create_namespaced_lease, LEASE_NAMESPACE, lease) is None \
                and not dead:
            self._renew(node.name)
        for rs in resource_slices(node):
            for device in cast(list[Obj], cast(Obj, rs["spec"])["devices"]):
                for taint in device.get("taints") or []:
                    taint["timeAdded"] = rfc3339(now)  # the DRA driver's health check tainted it as it started
            meta = cast(Obj, rs["metadata"])
            meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": uid,
                                        "controller": True}]
            if api.ignoring((409,), api.resource.create_resource_slice, rs) is None:
                existing = api.call(api.resource.read_resource_slice, meta["name"])
                meta["resourceVersion"] = existing["metadata"]["resourceVersion"]
                api.call(api.resource.replace_resource_slice, meta["name"], rs)
        self._register_exporter(node)
        self._register_stack(node)
        self._register_tenants(node)

    def _register_tenants(self, node: SimNode) -> None:
        """The tenant pods already running on the node (gpus-busy), bound to it like any pod the
        scheduler placed; the pod watch then runs them (their GPUs held while they sleep)."""
        api = self._api
        for tenant in node.tenant_pods:
            gpus = tenant.gpus if tenant.gpus is not None else int(node_resources(node)[1].get(GPU_RESOURCE, "0"))
            api.ignoring((409,), api.core.create_namespace, make_tenant_namespace(tenant.namespace))
            api.ignoring((409,), api.core.create_namespaced_pod, tenant.namespace, make_tenant_pod(node, tenant, gpus))

    def _register_exporter_service(self) -> None:
        """The DCGM exporter's namespace and Service (its pods come with each node)."""
        api, d = self._api, exporter.deployment(self.cluster)
        api.ignoring((409,), api.core.create_namespace, {"metadata": {"name": d.namespace}})
        api.ignoring((409,), api.core.create_namespaced_service, d.namespace, exporter.make_exporter_service(d))

    def _register_exporter(self, node: SimNode) -> None:
        """The node's DCGM exporter pod, Running since registration (the DaemonSet's pod started
        before anything else: it holds the node's first pod address); none under metrics-exporter-absent."""
        if not node.exporter:
            return
        api, d, runtime = self._api, exporter.deployment(self.cluster), self._runtimes[node.name]
        names = exporter.pod_names(d.name, tuple(n.name for n in self.cluster.nodes))
        pod = exporter.make_exporter_pod(d, node, names[node.name])
        if api.ignoring((409,), api.core.create_namespaced_pod, d.namespace, pod) is None:
            return  # already there (agents restarted against the same cluster): left as it is
        with runtime.lock:
            serial = runtime.pods_started
            runtime.pods_started += 1
        status = exporter.make_exporter_status(d, ip=pod_ip(runtime.index, serial), started=rfc3339(time.time()),
                                               image=exporter.image_of(node))
        api.call(api.core.patch_namespaced_pod_status, pod["metadata"]["name"], d.namespace, {"status": status},
                 _content_type=MERGE)

    def _register_stack(self, node: SimNode) -> None:
        """The GPU stack's pods on the node (toolkit, device plugin, DRA kubelet plugin, the operator's
        own; gpuconf.sim.stack), Running since registration like the exporter's."""
        api, runtime = self._api, self._runtimes[node.name]
        for pod in stack.stack_pods(self.cluster, node):
            namespace = pod["metadata"]["namespace"]
            api.ignoring((409,), api.core.create_namespace, {"metadata": {"name": namespace}})
            if api.ignoring((409,), api.core.create_namespaced_pod, namespace, pod) is None:
                continue  # already there (agents restarted against the same cluster)
            with runtime.lock:
                serial = runtime.pods_started
                runtime.pods_started += 1
            status = stack.running_status(pod, ip=pod_ip(runtime.index, serial), started=rfc3339(time.time()))
            api.call(api.core.patch_namespaced_pod_status, pod["metadata"]["name"], namespace, {"status": status},
                     _content_type=MERGE)

    # Leases --------------------------------------------------------------------------------------

    def _renew(self, name: str) -> None:
        api = self._api
        renewed = api.ignoring((404,), api.coordination.patch_namespaced_lease, name, LEASE_NAMESPACE,
                               {"spec": {"renewTime": _now_micro(), "holderIdentity": name,
                                         "leaseDurationSeconds": self.lease_duration}}, _content_type=MERGE)
        if renewed is None:  # someone deleted it: the kubelet recreates it
            lease = make_lease(name, self._node_uids.get(name), duration=self.lease_duration, now_micro=_now_micro())
            api.ignoring((409,), api.coordination.create_namespaced_lease, LEASE_NAMESPACE, lease)

    def _lease_loop(self) -> None:
        names = [n.name for n in self.cluster.nodes if n.ready != "Unknown"]  # a dead kubelet renews nothing
        start, interval = time.monotonic(), self.lease_interval
        # Spread: node i first renews at (i + 1) / n of the interval, then every interval.
        due = [(start + interval * (i + 1) / len(names), i) for i in range(len(names))]
        heapq.heapify(due)
        while due and not self._stopping.is_set():
            when, i = due[0]
            if self._stopping.wait(max(0.0, when - time.monotonic())):
                return
            heapq.heapreplace(due, (when + interval, i))
            try:
                self._renew(names[i])
            except Exception as e:  # keep renewing the others; this one retries next interval
                log.warning("lease renewal of %s failed: %s", names[i], e)

    # The pod watch --------------------------------------------------------------------------------

    def _remember(self, pod: Obj) -> str | None:
        meta = pod.get("metadata") or {}
        if (pod.get("spec") or {}).get("nodeName") not in self._runtimes:
            return None
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        with self._cache_lock:
            self._cache[key] = pod
        return key

    def _relist(self) -> str:
        """List every bound pod; forget those that went away (their devices first: a pod listed
        now may need them), then queue the rest."""
        api = self._api
        pods: list[Obj] = []
        token: str | None = None
        while True:
            page = api.call(api.core.list_pod_for_all_namespaces, field_selector="spec.nodeName!=", limit=500,
                            _continue=token)
            pods.extend(p for p in page.get("items") or [] if (p.get("spec") or {}).get("nodeName") in self._runtimes)
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                break
        listed = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in pods}
        with self._cache_lock:
            gone = [k for k, cached in self._cache.items()
                    if k not in listed or listed[k]["metadata"].get("uid") != cached["metadata"].get("uid")]
            for k in gone:
                del self._cache[k]
        for k in gone:
            self.kubelet.forget(k)
        for pod in pods:
            key = self._remember(pod)
            if key is not None:
                self._queue.add(key)
        return str((page.get("metadata") or {}).get("resourceVersion", ""))

    def _watch_loop(self) -> None:
        version: str | None = None
        backoff = 0.1
        while not self._stopping.is_set():
            try:
                if version is None:
                    version = self._relist()
                version = self._watch(version)
                if version is None:
                    log.info("pod watch expired (410 Gone): relisting")
                backoff = 0.1
            except Exception as e:
                if self._stopping.is_set():
                    return
                # Resume after the last event seen (a watch that fails right away: relist).
                version = None if isinstance(e, ApiException) and e.status == 410 else self._seen
                log.info("pod watch failed (%s); watching again in %.1fs", e, backoff)
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, 5.0)

    def _watch(self, version: str) -> str | None:
        """Stream pod events from ``version``; the last version seen, or None to relist (410 Gone)."""
        self._seen = version
        resp: Any = self._api.core.list_pod_for_all_namespaces(
            watch=True, resource_version=version, allow_watch_bookmarks=True, field_selector="spec.nodeName!=",
            timeout_seconds=self._watch_timeout, _preload_content=False,
            _request_timeout=(5, self._watch_timeout + 30))
        self._watch_resp = resp
        try:
            for line in _lines(resp):
                if self._stopping.is_set():
                    return version
                event = json.loads(line)
                obj = event.get("object") or {}
                kind = event.get("type")
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        return None
                    raise RuntimeError(f"watch error: {obj.get('message')}")
                version = self._seen = str((obj.get("metadata") or {}).get("resourceVersion") or version or "")
                if kind == "BOOKMARK":
                    continue
                if kind == "DELETED":
                    meta = obj.get("metadata") or {}
                    key = f"{meta.get('namespace')}/{meta.get('name')}"
                    with self._cache_lock:
                        cached = self._cache.get(key)
                        if cached is not None and cached["metadata"].get("uid") == meta.get("uid"):
                            del self._cache[key]
                        else:
                            continue
                    self.kubelet.forget(key)  # free its devices before any later pod is admitted
                    self._queue.add(key)
                    continue
                added = self._remember(obj)
                if added is not None:
                    self._queue.add(added)
        finally:
            self._watch_resp = None
            with contextlib.suppress(Exception):
                resp.release_conn()
        return version

    # Workers ---------------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            key = self._queue.get()
            if key is None:
                return
            try:
                with self._cache_lock:
                    pod = self._cache.get(key)
                wake = self.kubelet.sync(key, pod)
                if wake is not None:
                    self._queue.add_at(key, wake)
                self._failures.pop(key, None)
            except Exception as e:
                if self._stopping.is_set():
                    return
                n = self._failures[key] = self._failures.get(key, 0) + 1
                log.warning("syncing pod %s failed (attempt %d): %s", key, n, e, exc_info=n == 1)
                self._queue.add_at(key, time.time() + min(0.05 * 2 ** n, 10.0))
            finally:
                self._queue.done(key)

    # KubeletApi: what the kubelet writes and reads ----------------------------------------------

    def emit_event(self, pod: Obj, *, node: str, field_path: str | None, type_: str, reason: str, message: str,
                   when: float) -> None:
        meta = pod["metadata"]
        with self._event_lock:  # the recorder names events <object>.<unix nanoseconds in hex>
            self._event_ns = max(time.time_ns(), self._event_ns + 1)
            stamp = self._event_ns
        involved: Obj = {"kind": "Pod", "namespace": meta["namespace"], "name": meta["name"], "uid": meta.get("uid"),
                         "apiVersion": "v1", "resourceVersion": meta.get("resourceVersion")}
        if field_path:
            involved["fieldPath"] = field_path
        body = {"metadata": {"name": f"{meta['name']}.{stamp:x}", "namespace": meta["namespace"]},
                "involvedObject": involved, "reason": reason, "message": message,
                "source": {"component": "kubelet", "host": node}, "firstTimestamp": rfc3339(when),
                "lastTimestamp": rfc3339(when), "count": 1, "type": type_, "eventTime": None,
                "reportingComponent": "kubelet", "reportingInstance": node}
        try:
            self._api.call(self._api.core.create_namespaced_event, meta["namespace"], body)
        except Exception as e:  # the kubelet's recorder drops events it cannot write, too
            log.warning("event %s for %s/%s dropped: %s", reason, meta["namespace"], meta["name"], e)

    def write_pod_status(self, pod: Obj, status: Obj) -> None:
        meta = pod["metadata"]
        self._api.ignoring((404,), self._api.core.patch_namespaced_pod_status, meta["name"], meta["namespace"],
                           {"status": status}, _content_type=MERGE)

    def delete_pod(self, pod: Obj) -> None:
        meta = pod["metadata"]
        self._api.ignoring((404, 409), self._api.core.delete_namespaced_pod, meta["name"], meta["namespace"],
                           grace_period_seconds=0, body={"preconditions": {"uid": meta.get("uid")}})

    def runtime_handler(self, name: str) -> str | None:
        cached = self._runtime_classes.get(name)
        if cached is not None and time.monotonic() - cached[0] < 1.0:
            return cached[1]
        found = self._api.ignoring((404,), self._api.node.read_runtime_class, name)
        handler = str(found.get("handler")) if found is not None else None
        self._runtime_classes[name] = (time.monotonic(), handler)
        return handler

    def node_ready(self, name: str, *, fresh: bool = False) -> tuple[str, str]:
        cached = self._ready.get(name)
        if not fresh and cached is not None and time.monotonic() - cached[0] < 1.0:
            return cached[1]
        node = self._api.ignoring((404,), self._api.core.read_node, name) or {}
        ready = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"),
                     {"status": "True"})  # not posted yet: this kubelet is up
        answer = (str(ready.get("status")), str(ready.get("message") or ""))
        self._ready[name] = (time.monotonic(), answer)
        return answer

    def read_claim(self, namespace: str, name: str) -> Obj | None:
        return self._api.ignoring((404,), self._api.resource.read_namespaced_resource_claim, name, namespace)

    def read_service(self, namespace: str, name: str) -> Obj | None:
        return self._api.ignoring((404,), self._api.core.read_namespaced_service, name, namespace)


def _add_admin_spec(spec: Obj, wanted: Obj) -> None:
    """Put a profile's cordon and taints on an adopted Node, keeping whatever else it has."""
    if wanted.get("unschedulable"):
        spec["unschedulable"] = True
    taints = list(spec.get("taints") or [])
    for taint in wanted.get("taints", []):
        taints = [t for t in taints if (t.get("key"), t.get("effect")) != (taint["key"], taint["effect"])] + [taint]
    if taints:
        spec["taints"] = taints


def _lines(resp: Any) -> Iterator[str]:
    """Newline-delimited watch events from a raw response."""
    buffer = b""
    for chunk in resp.stream(amt=None, decode_content=False):
        buffer += chunk if isinstance(chunk, bytes) else str(chunk).encode()
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line.decode("utf-8", errors="replace")
