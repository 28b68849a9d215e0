"""The kubelet half of a node agent: running the pods bound to a simulated node.

:class:`Kubelet` keeps one :class:`PodRun` per pod and advances it each time the pod is synced:
admission (device manager) → sandbox (RuntimeClass) → init containers in order → app containers →
a terminal phase, writing the kubelet's events and pod status through a :class:`KubeletApi`
(the Kubernetes API, see :mod:`gpuconf.sim.agent`). A sync never sleeps: it returns when the pod
should be synced again (a pull or a run finishing), and the caller's work queue comes back then.

What a container prints is the simulated program's output: the cuda-probe's and nccl-probe's
documents from :mod:`gpuconf.sim.emulate` for pods labelled ``gpuconf.io/probe`` (the ranks of a
multi-process nccl-probe job meet in :mod:`gpuconf.sim.nccl_world`'s rendezvous), nvcc's output
for their compile init container, and for anything else the test hooks in annotations:

* ``gpuconf.io/sim-exit-code``: the exit code of every app container (default 0);
* ``gpuconf.io/sim-logs``: what every app container prints (default nothing);
* ``gpuconf.io/sim-run-seconds``: wall-clock seconds an app container runs (default: a second
  of simulated time; with restartPolicy Always, until the pod is deleted).

A container whose command is ``sleep`` (:func:`parse_sleep`) runs that long in real time and
exits 0; ``sleep infinity`` runs until the pod is deleted. On a NotReady node the kubelet starts
nothing (see ``Kubelet._node_down``).

Not simulated: container restarts (a container that exits non-zero under restartPolicy
Always/OnFailure is shown waiting in CrashLoopBackOff, its exit in lastState), probes
(readiness/liveness), volumes (a missing ConfigMap does not block the pod), CPU/memory admission.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from gpuconf.sim import dcgm, emulate, nccl_world, probe_meet
from gpuconf.sim.agent_logs import LogStore
from gpuconf.sim.agent_model import (
    AdmissionError,
    DeviceBook,
    ImageFacts,
    KubeletWording,
    as_visible,
    dra_devices,
    dra_prepare_error,
    go_duration,
    image_facts,
    injected_devices,
    plugin_env,
    pod_ip,
)
from gpuconf.sim.node_facts import AdvertisedDevice
from gpuconf.sim.profile import SimNode

__all__ = ["ANNOTATION_EXIT_CODE", "ANNOTATION_LOGS", "ANNOTATION_RUN_SECONDS", "Kubelet", "KubeletApi",
           "NodeRuntime", "PodRun", "Sleep", "Timings", "parse_sleep"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

ANNOTATION_EXIT_CODE = "gpuconf.io/sim-exit-code"
ANNOTATION_LOGS = "gpuconf.io/sim-logs"
ANNOTATION_RUN_SECONDS = "gpuconf.io/sim-run-seconds"
PROBE_LABEL = "gpuconf.io/probe"
_EPOCH = "1970-01-01T00:00:00Z"  # what a container that never started reports as startedAt


class KubeletApi(Protocol):
    """What the kubelet needs from the API server."""

    def emit_event(self, pod: Obj, *, node: str, field_path: str | None, type_: str, reason: str,
                   message: str, when: float) -> None: ...

    def write_pod_status(self, pod: Obj, status: Obj) -> None: ...

    def delete_pod(self, pod: Obj) -> None: ...

    def runtime_handler(self, name: str) -> str | None: ...

    def read_claim(self, namespace: str, name: str) -> Obj | None: ...

    def read_service(self, namespace: str, name: str) -> Obj | None: ...

    def node_ready(self, name: str, *, fresh: bool = False) -> tuple[str, str]:
        """The node's Ready condition as the API shows it: (status, message); read again, not from the
        last second's answer, when ``fresh``."""
        ...


@dataclass(frozen=True)
class Timings:
    """Nominal durations (seconds) of the simulated work, divided by ``speed`` when run: the
    default speed makes a 4 GB pull take milliseconds; speed 1 is real time."""

    speed: float = 10_000.0
    pull_bytes_per_second: float = 200e6
    compile_seconds: float = 12.0
    cuda_probe_seconds: float = 3.0
    nccl_probe_seconds: float = 60.0
    plain_seconds: float = 1.0
    sandbox_retry_seconds: float = 2.0  # real seconds between retries of a failed sandbox
    #: Real seconds a multi-process nccl-probe rank waits for its peers at least, whatever the
    #: speed: the ranks' pods are created by separate API calls, whose latency is not scaled.
    rendezvous_floor_seconds: float = 2.0
    #: Real seconds a cuda-probe started with --rendezvous waits for its peers at least (gpuconf.sim.probe_meet):
    #: the pods of a group are created by separate API calls and admitted by a loaded kubelet.
    meet_floor_seconds: float = 15.0

    def scaled(self, nominal: float) -> float:
        return nominal / self.speed


def rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def rfc3339_milli(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


@dataclass
class NodeRuntime:
    """One node's containerd and device manager: image store, serialized pull queue, devices."""

    sim: SimNode
    index: int
    devices: DeviceBook = field(init=False)
    images: set[str] = field(default_factory=set)
    pull_free_at: float = 0.0
    pods_started: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.devices = DeviceBook(self.sim)


@dataclass
class ContainerRun:
    name: str
    init: bool
    spec: Obj
    image: ImageFacts
    phase: str = "new"  # new | pulling | create | running | exited | start-failed
    waiting: str = "ContainerCreating"
    pull_requested: float = 0.0
    pull_started: float = 0.0
    pull_done: float = 0.0
    container_id: str = ""
    started_at: float | None = None
    finished_at: float | None = None
    run_until: float | None = None  # None while running: until the pod is stopped
    exit_code: int | None = None
    message: str | None = None
    output: str = ""
    ticket: nccl_world.Ticket | None = None  # a multi-process nccl-probe rank until its job decides
    meeting: probe_meet.Ticket | None = None  # a cuda-probe with --rendezvous until it met its peers or gave up

    @property
    def field_path(self) -> str:
        return f"spec.{'initContainers' if self.init else 'containers'}{{{self.name}}}"

    @property
    def terminal(self) -> bool:
        return self.phase in ("exited", "start-failed")


#: The key run.claims keeps the scheduler's extended-resource claim under (no pod claim has this name:
#: pod claim names are DNS labels).
EXTENDED_CLAIM = "<extended-resources>"


@dataclass
class PodRun:
    key: str  # namespace/name
    uid: str
    node: NodeRuntime
    containers: list[ContainerRun]
    restart_policy: str
    stage: str = "admit"  # admit | sandbox | containers | done
    phase: str = "Pending"
    reason: str | None = None
    message: str | None = None
    start_time: float | None = None
    deadline: float | None = None
    ip: str = ""
    nvidia_runtime: bool = False
    allocations: dict[str, list[AdvertisedDevice]] = field(default_factory=dict)
    claims: dict[str, Obj] = field(default_factory=dict)  # pod claim name -> ResourceClaim
    #: (container, request) of the extended-resource claim's requestMappings (KEP-5004)
    extended: tuple[tuple[str, str], ...] = ()
    sandbox_failed: bool = False
    prepare_failed: bool = False  # NodePrepareResources failed (its event is written once)
    rejected: bool = False
    adopted: bool = False
    delete_requested: bool = False
    written: Obj | None = None
    transitions: dict[str, tuple[str, float]] = field(default_factory=dict)


def _stale_sibling(node: SimNode, v: emulate.Visible) -> tuple[emulate.Visible, ...]:
    """The mig-sibling-visible fault on a DRA node: the kubelet plugin's map of MIG devices, gone stale
    after the layout was recut, resolves a claimed instance to the instance after it on the same GPU
    (wrapping) as well, and its CDI spec names that sibling first, so the sibling is what CUDA
    enumerates (one MIG device per process). A guess at how a sibling leaks through DRA, like the
    device-plugin form of the fault; which of two injected instances CUDA enumerates is not settled
    either (a probe run given two instances of one GPU through CDI would settle it)."""
    if not node.mig_sibling_visible or v.mig is None or len(v.gpu.mig) < 2:
        return ()
    instances = v.gpu.mig
    return (emulate.Visible(v.gpu, instances[(instances.index(v.mig) + 1) % len(instances)]),)


def _env(spec: Obj) -> dict[str, str]:
    return {str(e["name"]): str(e.get("value", "")) for e in spec.get("env") or [] if "valueFrom" not in e}


class Kubelet:
    """The kubelet, device plugin, toolkit and DRA driver of every simulated node."""

    def __init__(self, nodes: Mapping[str, NodeRuntime], api: KubeletApi, logs: LogStore, *,
                 wording: KubeletWording, timings: Timings, clock: Callable[[], float] = time.time) -> None:
        self.nodes = nodes
        self.api = api
        self.logs = logs
        self.wording = wording
        self.timings = timings
        self.clock = clock
        self._runs: dict[str, PodRun] = {}
        self._network_reported: set[str] = set()  # pods told NetworkNotReady (uids)
        self._lock = threading.Lock()
        #: Multi-process nccl-probe jobs, by --id-addr, across every node of the cluster.
        self.rendezvous = nccl_world.Rendezvous(speed=timings.speed, run_seconds=timings.nccl_probe_seconds,
                                                floor_seconds=timings.rendezvous_floor_seconds)
        #: cuda-probes started with --rendezvous, by namespace
        self.meetings = probe_meet.Meetings(speed=timings.speed, work_ms=timings.cuda_probe_seconds * 1000,
                                            floor_seconds=timings.meet_floor_seconds)

    # Entry points ----------------------------------------------------------------------------

    def owns(self, pod: Obj) -> bool:
        return (pod.get("spec") or {}).get("nodeName") in self.nodes

    def sync(self, key: str, pod: Obj | None) -> float | None:
        """Advance the pod; the wall-clock time it wants its next sync at, or None."""
        with self._lock:
            run = self._runs.get(key)
        if pod is None or not self.owns(pod) or (run is not None and run.uid != pod["metadata"].get("uid")):
            self.forget(key)
            if pod is None or not self.owns(pod):
                return None
            run = None
        # A pod some earlier agent already started (the stack's and the exporter's, registered Running)
        # is adopted as it is: nothing starts, so the node need not be read afresh for it.
        status = pod.get("status") or {}
        adopted = status.get("phase") in ("Succeeded", "Failed") or bool(status.get("startTime"))
        down = self._node_down(pod, first=run is None and not adopted)
        if down is not None:
            return down
        if pod["metadata"].get("deletionTimestamp"):
            self._stop(pod, run)
            return None
        if run is None:
            run = self._new_run(key, pod)
            with self._lock:
                self._runs[key] = run
        if run.stage == "done":
            return None
        wake = self._advance(run, pod)
        self._flush(run, pod)
        return wake

    def _node_down(self, pod: Obj, *, first: bool) -> float | None:
        """When to look again at a pod of a NotReady node, or None to go on. Ready Unknown: the
        kubelet is gone; nothing starts, nothing is reported, a deleted pod stays Terminating until
        it is force-deleted. Ready False (the pod network is down): a new pod is not started and
        gets the kubelet's NetworkNotReady event (kubelet.go SyncPod), once."""
        node = str(pod["spec"]["nodeName"])
        # A new pod reads the node afresh: a condition set a moment ago through the API (a real kubelet
        # knows its own) must not start the pod on a cached Ready.
        status, message = self.api.node_ready(node, fresh=first)
        if status == "True" or (status == "False" and (not first or pod["metadata"].get("deletionTimestamp"))):
            return None
        now = self.clock()
        uid = str(pod["metadata"].get("uid"))
        if status == "False" and uid not in self._network_reported:
            self._network_reported.add(uid)
            self._event_for(pod, node, "Warning", "NetworkNotReady", f"network is not ready: {message}", now)
        return now + self.timings.sandbox_retry_seconds

    def forget(self, key: str) -> None:
        with self._lock:
            run = self._runs.pop(key, None)
        if run is not None:
            with run.node.lock:
                run.node.devices.release(key)
            self.logs.forget(key)

    def pod_run(self, key: str) -> PodRun | None:
        with self._lock:
            return self._runs.get(key)

    # The state machine -----------------------------------------------------------------------

    def _new_run(self, key: str, pod: Obj) -> PodRun:
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        node = self.nodes[spec["nodeName"]]
        groups = ((True, spec.get("initContainers") or []), (False, spec.get("containers") or []))
        containers = [ContainerRun(str(c["name"]), init, c, image_facts(str(c.get("image", ""))))
                      for init, group in groups for c in group]
        if spec.get("initContainers"):
            for c in containers:
                if not c.init:
                    c.waiting = "PodInitializing"
        run = PodRun(key, pod["metadata"]["uid"], node, containers, str(spec.get("restartPolicy", "Always")))
        # A pod some earlier agent already started (or finished) is left as it is.
        if status.get("phase") in ("Succeeded", "Failed") or status.get("startTime"):
            run.stage, run.adopted = "done", True
        return run

    def _advance(self, run: PodRun, pod: Obj) -> float | None:
        now = self.clock()
        while run.stage != "done":
            if run.deadline is not None and now >= run.deadline:
                self._deadline_exceeded(run, pod, now)
                break
            stage = run.stage
            wake = {"admit": self._admit, "sandbox": self._sandbox, "containers": self._containers}[stage](
                run, pod, now)
            if wake is not None:
                return min(wake, run.deadline) if run.deadline is not None else wake
            if run.stage == stage:  # nothing more happens until something changes (or the deadline)
                return run.deadline
        return None

    def _admit(self, run: PodRun, pod: Obj, now: float) -> float | None:
        spec = pod.get("spec") or {}
        for entry in spec.get("resourceClaims") or []:
            if entry["name"] in run.claims:
                continue
            claim_name = entry.get("resourceClaimName") or next(
                (s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
                 if s.get("name") == entry["name"]), None)
            claim = self.api.read_claim(pod["metadata"]["namespace"], claim_name) if claim_name else None
            if claim is None or not ((claim.get("status") or {}).get("allocation")):
                return now + self.timings.sandbox_retry_seconds  # the scheduler has not allocated it yet
            run.claims[entry["name"]] = claim
        extended = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
        if extended.get("resourceClaimName") and EXTENDED_CLAIM not in run.claims:
            # KEP-5004: the scheduler's claim for the pod's DRA-backed extended resources is prepared
            # like any pod claim (NodePrepareResources, CDI injection into the mapped containers)
            claim = self.api.read_claim(pod["metadata"]["namespace"], str(extended["resourceClaimName"]))
            if claim is None or not ((claim.get("status") or {}).get("allocation")):
                return now + self.timings.sandbox_retry_seconds
            run.claims[EXTENDED_CLAIM] = claim
            run.extended = tuple((str(m.get("containerName")), str(m.get("requestName")))
                                 for m in extended.get("requestMappings") or [])
        for claim in run.claims.values():
            # NodePrepareResources, before the sandbox; the kubelet retries a failed one
            # (pkg/kubelet/cm/dra/manager.go: "NodePrepareResources failed for ResourceClaim <name>: <error>").
            error = dra_prepare_error(run.node.sim, claim)
            if error is not None:
                if run.prepare_failed:
                    return now + self.timings.sandbox_retry_seconds
                run.prepare_failed = True
                self._event(run, pod, None, "Warning", "FailedPrepareDynamicResources",
                            "Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources "
                            f"failed for ResourceClaim {claim['metadata']['name']}: {error}", now)
                return now + self.timings.sandbox_retry_seconds
        limits = [(c.name, c.init, ((c.spec.get("resources") or {}).get("limits") or {})) for c in run.containers]
        try:
            with run.node.lock:
                run.allocations = run.node.devices.allocate(run.key, limits)
        except AdmissionError as e:
            self._event(run, pod, None, "Warning", e.reason, e.message, now)
            run.phase, run.reason, run.message = "Failed", e.reason, f"Pod was rejected: {e.message}"
            run.stage, run.rejected = "done", True
            return None
        run.stage = "sandbox"
        return None

    def _sandbox(self, run: PodRun, pod: Obj, now: float) -> float | None:
        spec = pod.get("spec") or {}
        name = spec.get("runtimeClassName")
        if name:
            handler = self.api.runtime_handler(str(name))
            if handler is None:
                # kuberuntime_manager.go SyncPod: "Failed to create pod sandbox: %v", the error being
                # the RuntimeClass lister's NotFound.
                if not run.sandbox_failed:
                    self._event(run, pod, None, "Warning", "FailedCreatePodSandBox",
                                f'Failed to create pod sandbox: runtimeclass.node.k8s.io "{name}" not found', now)
                    run.sandbox_failed = True
                return now + self.timings.sandbox_retry_seconds
            run.nvidia_runtime = handler == "nvidia"
        else:
            run.nvidia_runtime = run.node.sim.toolkit.default_runtime == "nvidia"
        with run.node.lock:
            serial = run.node.pods_started
            run.node.pods_started += 1
        run.ip = pod_ip(run.node.index, serial)
        run.start_time = now
        deadline = spec.get("activeDeadlineSeconds")
        run.deadline = now + float(deadline) if deadline is not None else None
        run.stage = "containers"
        return None

    def _containers(self, run: PodRun, pod: Obj, now: float) -> float | None:
        for c in run.containers:
            if not c.init:
                break
            if c.phase == "exited" and c.exit_code == 0:
                continue
            if c.terminal:
                self._finish(run, now)
                return None
            wake = self._drive(run, pod, c, now)
            if wake is not None or not c.terminal:
                return wake
            if c.exit_code != 0:
                self._finish(run, now)
                return None
        for c in run.containers:
            if c.init:
                continue
            c.waiting = "ContainerCreating" if c.waiting == "PodInitializing" else c.waiting
            if c.phase in ("new", "pulling", "create"):
                wake = self._drive(run, pod, c, now)
                if wake is not None:
                    return wake
        wakes = []
        for c in run.containers:
            if not c.init and c.phase == "running":
                wake = self._drive(run, pod, c, now)
                if wake is not None:
                    wakes.append(wake)
        if all(c.terminal for c in run.containers if not c.init):
            self._finish(run, now)
            return None
        return min(wakes) if wakes else None

    def _drive(self, run: PodRun, pod: Obj, c: ContainerRun, now: float) -> float | None:
        """Move one container as far as it goes now; the time it next changes, or None."""
        if c.phase == "new":
            wake = self._pull(run, pod, c, now)
            if wake is not None:
                return wake
        if c.phase == "pulling":
            if now < c.pull_done:
                return c.pull_done
            message = self.wording.pulled.format(image=c.spec.get("image"), pull=go_duration(now - c.pull_started),
                                                 total=go_duration(now - c.pull_requested), size=c.image.size)
            self._event(run, pod, c, "Normal", "Pulled", message, now)
            with run.node.lock:
                run.node.images.add(c.image.normalized)
            c.phase = "create"
        if c.phase == "create":
            self._start(run, pod, c, now)
        if c.phase == "running":
            if c.ticket is not None:
                outcome = self.rendezvous.poll(c.ticket, now)
                if isinstance(outcome, float):
                    return outcome
                c.ticket = None
                c.exit_code, c.output, c.run_until = outcome.code, outcome.output, outcome.finish_at
            if c.meeting is not None:
                met = self.meetings.poll(c.meeting, now, self.api.read_service)
                if isinstance(met, float):
                    return met
                c.meeting = None
                c.exit_code, c.output, c.run_until = met.code, met.output, met.finish_at
            if c.run_until is None:
                return None
            if now < c.run_until:
                return c.run_until
            self._exit(run, c, c.exit_code if c.exit_code is not None else 0, now)
        return None

    def _pull(self, run: PodRun, pod: Obj, c: ContainerRun, now: float) -> float | None:
        image = str(c.spec.get("image"))
        policy = c.spec.get("imagePullPolicy", "IfNotPresent")
        with run.node.lock:
            present = c.image.normalized in run.node.images
        if present and policy != "Always":
            self._event(run, pod, c, "Normal", "Pulled", self.wording.image_present.format(image=image), now)
            c.phase = "create"
            return None
        self._event(run, pod, c, "Normal", "Pulling", self.wording.pulling.format(image=image), now)
        seconds = self.timings.scaled(c.image.size / self.timings.pull_bytes_per_second)
        with run.node.lock:  # serializeImagePulls: one pull at a time per node
            c.pull_started = max(now, run.node.pull_free_at)
            c.pull_done = run.node.pull_free_at = c.pull_started + seconds
        c.pull_requested = now
        c.phase = "pulling"
        return c.pull_done

    def _start(self, run: PodRun, pod: Obj, c: ContainerRun, now: float) -> None:
        node = run.node.sim
        allocated = as_visible(run.allocations.get(c.name, []))
        cdi = self._claim_devices(run, c)
        own = _env(c.spec)
        image_env = dict(c.image.env)
        env = {**image_env, **plugin_env(run.allocations.get(c.name, []), node.device_plugin.sharing)}
        if cdi:
            env["NVIDIA_VISIBLE_DEVICES"] = "void"  # the DRA driver's CDI edits: devices come through CDI
        env.update(own)
        own_devices = own.get("NVIDIA_VISIBLE_DEVICES")
        if own_devices is None and not allocated and not cdi:
            own_devices = image_env.get("NVIDIA_VISIBLE_DEVICES")
        privileged = bool((c.spec.get("securityContext") or {}).get("privileged"))
        visible = injected_devices(node, nvidia_runtime=run.nvidia_runtime, allocated=allocated, cdi=cdi,
                                   own_env=own_devices, privileged=privileged)
        hooked = [v for v in visible if v not in cdi]
        c.container_id = "containerd://" + hashlib.sha256(f"{run.uid}/{c.name}/{now}".encode()).hexdigest()
        self._event(run, pod, c, "Normal", "Created", self.wording.created.format(name=c.name), now)
        if run.nvidia_runtime and (hooked or own_devices == "none"):
            created = emulate.create_container(node, env=[f"{k}={v}" for k, v in env.items()], visible=hooked)
            if not created.ok:
                message = created.message or "failed to create containerd task"
                self._event(run, pod, c, "Warning", "Failed", self.wording.failed.format(message=message), now)
                c.phase, c.exit_code, c.message, c.finished_at = "start-failed", 128, message, now
                return
        self._event(run, pod, c, "Normal", "Started", self.wording.started.format(name=c.name), now)
        c.phase, c.started_at = "running", now
        code, output, seconds = self._program(run, pod, c, env, visible, now)
        waits = c.ticket is not None or c.meeting is not None
        c.exit_code, c.run_until = (None if waits else code), (now + seconds if seconds is not None else None)
        c.output = output
        if seconds is None:  # runs until stopped: what it prints is there from the start
            self.logs.put(run.key, run.uid, c.name, output)

    def _claim_devices(self, run: PodRun, c: ContainerRun) -> list[emulate.Visible]:
        out: list[emulate.Visible] = []
        requests = [r for container, r in run.extended if container == c.name]
        if requests and EXTENDED_CLAIM in run.claims:
            out.extend(dra_devices(run.node.sim, run.claims[EXTENDED_CLAIM], requests))
        for ref in (c.spec.get("resources") or {}).get("claims") or []:
            claim = run.claims.get(str(ref.get("name")))
            if claim is None:
                continue
            request = ref.get("request")
            for v in dra_devices(run.node.sim, claim, [request] if request else None):
                for w in (*_stale_sibling(run.node.sim, v), v):
                    if w not in out:
                        out.append(w)
        return out

    def _program(self, run: PodRun, pod: Obj, c: ContainerRun, env: dict[str, str],
                 visible: list[emulate.Visible], now: float) -> tuple[int, str, float | None]:
        """(exit code, output, seconds it runs or None for "until stopped") of the container."""
        meta = pod["metadata"]
        probe = (meta.get("labels") or {}).get(PROBE_LABEL)
        t = self.timings
        node = run.node.sim
        hostname = str((pod.get("spec") or {}).get("hostname") or meta["name"])
        if probe in ("cuda-probe", "nccl-probe") and c.init:
            # build.sh prints nothing but the binary's path on success (probes/cuda-probe/build.sh).
            args = [str(a) for a in (c.spec.get("command") or []) + (c.spec.get("args") or [])]
            return 0, (args[-1] + "\n" if args else ""), t.scaled(t.compile_seconds)
        if probe == "cuda-probe" and c.image.cuda is not None:
            try:
                code, out = emulate.cuda_probe_run(node, visible=visible, image_cuda=c.image.cuda, env=env,
                                                   compat=c.image.compat, started_at=rfc3339_milli(now),
                                                   hostname=hostname)
            except ValueError as e:  # the emulation and the creation check disagree: a bug to see
                log.exception("cuda-probe emulation failed for %s", run.key)
                return 1, f"gpuconf simulation error: {e}\n", t.scaled(t.cuda_probe_seconds)
            try:
                meet = probe_meet.request(env, [str(a) for a in (c.spec.get("command") or []) +
                                                (c.spec.get("args") or [])])
            except ValueError as e:  # the probe's usage error: one line, no document
                return 2, f"cuda-probe: {e} (try --help)\n", t.scaled(t.plain_seconds)
            if meet is not None and not c.init:
                # It holds its GPUs until its peers were seen holding theirs (see _drive).
                spec = pod.get("spec") or {}
                c.meeting = self.meetings.join(meet, namespace=str(meta.get("namespace")), pod=str(meta["name"]),
                                               hostname=hostname, subdomain=spec.get("subdomain"),
                                               labels=meta.get("labels") or {}, node=node.name,
                                               blocked=node.pod_traffic_blocked, code=code, output=out,
                                               now=now + t.scaled(t.cuda_probe_seconds))
                return code, "", None
            return code, out, t.scaled(t.cuda_probe_seconds)
        if probe == "nccl-probe" and c.image.cuda is not None:
            args = [str(a) for a in (c.spec.get("command") or []) + (c.spec.get("args") or [])]
            try:
                multi = nccl_world.rank_args(args)
            except ValueError as e:  # the probe's usage error
                return 2, f"nccl-probe: {e}\n", t.scaled(t.plain_seconds)
            if multi is not None:
                # One rank of a job: it runs until the job's bootstrap decides (see _drive).
                c.ticket = self.rendezvous.join(multi, node, visible=visible, image_cuda=c.image.cuda, env=env,
                                                started_at=rfc3339_milli(now), hostname=hostname, ip=run.ip, now=now)
                return 0, "", None
            warmup, iters = _count_arg(args, "--warmup", 5), _count_arg(args, "--iters", 20)
            code, out = emulate.nccl_probe_run(node, visible=visible, image_cuda=c.image.cuda, env=env,
                                               started_at=rfc3339_milli(now), hostname=hostname, warmup=warmup,
                                               iters=max(iters, 1))
            # the nominal run time is the default sweep's (20 iterations a size); more iterations take longer
            seconds = _timeout_arg(args) if node.interconnect.hang else t.nccl_probe_seconds * max(1.0, iters / 20)
            return code, out, t.scaled(seconds)
        if not c.init and dcgm.is_dcgm_image(c.image.normalized):
            level = dcgm.diag_request([str(a) for a in (c.spec.get("command") or []) + (c.spec.get("args") or [])])
            if level is not None:  # NVIDIA's DCGM image running dcgmi diag (suites/test_dcgm.py)
                code, out = dcgm.dcgm_diag_run(node, visible=visible, level=level)
                return code, out, t.scaled(t.cuda_probe_seconds)
        annotations = meta.get("annotations") or {}
        slept = parse_sleep([str(a) for a in (c.spec.get("command") or []) + (c.spec.get("args") or [])])
        if c.init:
            return 0, "", t.scaled(t.plain_seconds) if slept is None else slept.seconds
        output = str(annotations.get(ANNOTATION_LOGS, ""))
        try:
            code = int(annotations.get(ANNOTATION_EXIT_CODE, "0"))
            run_for = float(annotations[ANNOTATION_RUN_SECONDS]) if ANNOTATION_RUN_SECONDS in annotations else None
        except ValueError as e:  # a misused test hook fails the container visibly
            return 1, f"gpuconf simulation: bad {ANNOTATION_EXIT_CODE}/{ANNOTATION_RUN_SECONDS}: {e}\n", 0.0
        if run_for is not None:
            return code, output, run_for
        if slept is not None:  # sleep runs in real time, whatever the speed: someone may be waiting on it
            return code, output, slept.seconds
        if run.restart_policy == "Always" and ANNOTATION_EXIT_CODE not in annotations:
            return code, output, None  # a service: runs until the pod is deleted
        return code, output, t.scaled(t.plain_seconds)

    def _exit(self, run: PodRun, c: ContainerRun, code: int, now: float) -> None:
        c.phase, c.exit_code, c.finished_at = "exited", code, now
        self.logs.put(run.key, run.uid, c.name, c.output)

    def _finish(self, run: PodRun, now: float) -> None:
        apps = [c for c in run.containers if not c.init]
        inits_failed = any(c.init and c.terminal and c.exit_code != 0 for c in run.containers)
        failed = inits_failed or any(c.exit_code != 0 for c in apps if c.terminal)
        if run.restart_policy == "Always" or (run.restart_policy == "OnFailure" and failed):
            return  # restarts are not simulated: the pod stays in its CrashLoopBackOff picture
        run.phase = "Failed" if failed else "Succeeded"
        run.stage = "done"
        with run.node.lock:
            run.node.devices.release(run.key)

    def _deadline_exceeded(self, run: PodRun, pod: Obj, now: float) -> None:
        # pkg/kubelet/active_deadline.go: reason and message, as a Normal event.
        message = "Pod was active on the node longer than the specified deadline"
        self._event(run, pod, None, "Normal", "DeadlineExceeded", message, now)
        self._kill(run, pod, now)
        run.phase, run.reason, run.message, run.stage = "Failed", "DeadlineExceeded", message, "done"
        with run.node.lock:
            run.node.devices.release(run.key)

    def _kill(self, run: PodRun, pod: Obj, now: float) -> None:
        for c in run.containers:
            if c.phase == "running":
                self._event(run, pod, c, "Normal", "Killing", self.wording.killing.format(name=c.name), now)
                self._exit(run, c, 143, now)  # SIGTERM, not handled by the simulated program

    def _stop(self, pod: Obj, run: PodRun | None) -> None:
        """A deleted pod: stop what runs, report it, and confirm with a grace-0 delete."""
        if run is not None and run.delete_requested:
            return
        if run is not None and run.stage != "done" and not run.adopted:
            now = self.clock()
            self._kill(run, pod, now)
            if run.start_time is not None:
                run.phase = "Failed" if any(c.exit_code not in (0, None) for c in run.containers) else "Succeeded"
            run.stage = "done"
            with run.node.lock:
                run.node.devices.release(run.key)
            self._flush(run, pod)
        if run is not None:
            run.delete_requested = True
        self.api.delete_pod(pod)

    # Status --------------------------------------------------------------------------------------

    def _event(self, run: PodRun, pod: Obj, c: ContainerRun | None, type_: str, reason: str, message: str,
               now: float) -> None:
        self.api.emit_event(pod, node=run.node.sim.name, field_path=c.field_path if c else None, type_=type_,
                            reason=reason, message=message, when=now)

    def _event_for(self, pod: Obj, node: str, type_: str, reason: str, message: str, now: float) -> None:
        self.api.emit_event(pod, node=node, field_path=None, type_=type_, reason=reason, message=message, when=now)

    def _flush(self, run: PodRun, pod: Obj) -> None:
        status = self.status(run)
        if status != run.written:
            self.api.write_pod_status(pod, status)
            run.written = status

    def status(self, run: PodRun) -> Obj:
        """The pod status the kubelet reports for ``run`` (pkg/kubelet/kubelet_pods.go)."""
        if run.rejected:
            return {"phase": "Failed", "reason": run.reason, "message": run.message}
        out: Obj = {"phase": self._phase(run), "conditions": self._conditions(run)}
        if run.start_time is not None:
            out.update(hostIP="127.0.0.1", hostIPs=[{"ip": "127.0.0.1"}], podIP=run.ip, podIPs=[{"ip": run.ip}],
                       startTime=rfc3339(run.start_time))
        if run.reason:
            out["reason"], out["message"] = run.reason, run.message
        inits = [self._container_status(run, c) for c in run.containers if c.init]
        if inits:
            out["initContainerStatuses"] = inits
        out["containerStatuses"] = sorted((self._container_status(run, c) for c in run.containers if not c.init),
                                          key=lambda s: str(s["name"]))
        return out

    @staticmethod
    def _phase(run: PodRun) -> str:
        """pkg/kubelet/kubelet_pods.go getPhase, for the states simulated here."""
        if run.stage == "done":
            return run.phase
        if any(c.init and not (c.phase == "exited" and c.exit_code == 0) for c in run.containers):
            return "Pending"
        apps = [c for c in run.containers if not c.init]
        if any(c.phase == "running" for c in apps) or (apps and all(c.terminal for c in apps)):
            return "Running"  # the second case: exited under a restart policy (restarts are not simulated)
        return "Pending"

    def _condition(self, run: PodRun, type_: str, ok: bool, reason: str | None = None,
                   message: str | None = None) -> Obj:
        status = "True" if ok else "False"
        previous = run.transitions.get(type_)
        if previous is None or previous[0] != status:
            run.transitions[type_] = (status, self.clock())
        cond: Obj = {"type": type_, "status": status, "lastProbeTime": None,
                     "lastTransitionTime": rfc3339(run.transitions[type_][1])}
        if reason:
            cond["reason"] = reason
        if message:
            cond["message"] = message
        return cond

    def _conditions(self, run: PodRun) -> list[Obj]:
        started = run.start_time is not None
        done = run.stage == "done"
        inits = [c for c in run.containers if c.init]
        apps = [c for c in run.containers if not c.init]
        pending_inits = [c.name for c in inits if not (c.phase == "exited" and c.exit_code == 0)]
        unready = [c.name for c in apps if c.phase != "running"]
        if done and run.phase in ("Succeeded", "Failed"):
            why = "PodCompleted" if run.phase == "Succeeded" else "PodFailed"
            ready = [self._condition(run, "Ready", False, why), self._condition(run, "ContainersReady", False, why)]
        elif unready:
            message = f"containers with unready status: [{' '.join(unready)}]"
            ready = [self._condition(run, "Ready", False, "ContainersNotReady", message),
                     self._condition(run, "ContainersReady", False, "ContainersNotReady", message)]
        else:
            ready = [self._condition(run, "Ready", True), self._condition(run, "ContainersReady", True)]
        if pending_inits:
            initialized = self._condition(run, "Initialized", False, "ContainersNotInitialized",
                                          f"containers with incomplete status: [{' '.join(pending_inits)}]")
        else:
            initialized = self._condition(run, "Initialized", True,
                                          "PodCompleted" if done and run.phase == "Succeeded" else None)
        return [self._condition(run, "PodReadyToStartContainers", started and not done), initialized, *ready,
                self._condition(run, "PodScheduled", True)]

    def _container_status(self, run: PodRun, c: ContainerRun) -> Obj:
        out: Obj = {"name": c.name, "image": c.image.normalized, "imageID": "", "ready": False, "restartCount": 0,
                    "started": False, "state": {}, "lastState": {}}
        if c.phase in ("running", "exited", "start-failed"):
            out["imageID"], out["containerID"] = c.image.image_id, c.container_id
        if c.phase == "running":
            out["state"] = {"running": {"startedAt": rfc3339(c.started_at or 0)}}
            out["ready"] = out["started"] = not c.init
        elif c.terminal:
            terminated: Obj = {"exitCode": c.exit_code, "containerID": c.container_id,
                               "finishedAt": rfc3339(c.finished_at or 0)}
            if c.phase == "start-failed":
                terminated.update(reason="StartError", message=c.message, startedAt=_EPOCH)
            else:
                terminated.update(reason="Completed" if c.exit_code == 0 else "Error",
                                  startedAt=rfc3339(c.started_at or 0))
            restarting = run.stage != "done" and (
                run.restart_policy == "Always" or (run.restart_policy == "OnFailure" and c.exit_code != 0))
            if restarting:
                waiting = "RunContainerError" if c.phase == "start-failed" else "CrashLoopBackOff"
                out["state"] = {"waiting": {"reason": waiting, "message": c.message or ""}}
                out["lastState"] = {"terminated": terminated}
            else:
                out["state"] = {"terminated": terminated}
        else:
            out["state"] = {"waiting": {"reason": c.waiting}}
        return out


_SHELLS = {"sh", "bash", "ash", "dash"}
_SLEEP_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_SLEEP_OPERAND = re.compile(r"^(?:(inf|infinity)|(\d+(?:\.\d*)?|\.\d+)([smhd]?))$")


@dataclass(frozen=True)
class Sleep:
    seconds: float | None  # None: ``sleep infinity``, until the container is stopped


def parse_sleep(argv: list[str]) -> Sleep | None:
    """How long a container whose command is ``sleep`` runs, or None when the command is no plain
    sleep. Understood: ``sleep N...`` (GNU coreutils: each
    operand a number with an optional s/m/h/d suffix, the operands summed, ``inf``/``infinity``
    forever) by name or path, and a shell running only that (``sh -c "sleep 3600"``, ``exec sleep``)."""
    if len(argv) == 3 and argv[0].rsplit("/", 1)[-1] in _SHELLS and argv[1] == "-c":
        argv = argv[2].split()
        if argv[:1] == ["exec"]:
            argv = argv[1:]
    if len(argv) < 2 or argv[0].rsplit("/", 1)[-1] != "sleep":
        return None
    total = 0.0
    for operand in argv[1:]:
        match = _SLEEP_OPERAND.match(operand)
        if match is None:
            return None  # sleep prints its usage and exits 1: left to the default program
        if match.group(1):
            return Sleep(None)
        total += float(match.group(2)) * _SLEEP_UNITS[match.group(3)]
    return Sleep(total)


def _count_arg(args: list[str], flag: str, default: int) -> int:
    """An nccl-probe count flag (``--iters N``, ``--warmup=N``); ``default`` when absent or not a number."""
    for i, a in enumerate(args):
        value = a.split("=", 1)[1] if a.startswith(flag + "=") else args[i + 1] if a == flag and \
            i + 1 < len(args) else None
        if value is not None and value.isdigit():
            return int(value)
    return default


def _timeout_arg(args: list[str]) -> float:
    """The nccl-probe's --timeout (default 300 s): how long a hung run takes to give up."""
    for i, a in enumerate(args):
        value = a.split("=", 1)[1] if a.startswith("--timeout=") else args[i + 1] if a == "--timeout" and \
            i + 1 < len(args) else None
        if value is not None and re.fullmatch(r"\d+(\.\d+)?", value):
            return float(value)
    return 300.0
