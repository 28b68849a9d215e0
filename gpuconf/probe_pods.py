"""``make_*`` builders for probe pods and their source ConfigMaps (pure: objects, no API calls).

Zero-registry mode is the default: with no ``registry`` the pod compiles the probe with nvcc in
the public ``nvidia/cuda:<cuda>-devel`` image; with one, it runs the prebuilt probe image.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuconf import images
from gpuconf.render import probe_sources, probe_sources_stamp, render

__all__ = ["CONTAINERS", "DEFAULT_TOLERATIONS", "NCCL_BOOTSTRAP_PORT", "NCCL_JOB_LABEL", "PRIORITY_CLASS",
           "SCHEDULE_BUDGET_ANNOTATION", "ClaimRequest", "make_cuda_probe_pod", "make_nccl_job_service",
           "make_nccl_probe_pod", "make_probe_sources_configmap", "make_rendezvous_service",
           "make_resource_claim_template", "nccl_rank0_address", "probe_pod_name", "RENDEZVOUS_LABEL",
           "RENDEZVOUS_PORT", "RENDEZVOUS_WAIT_S", "RendezvousMember", "rendezvous_group", "rendezvous_group_name",
           "sources_configmap_name"]

#: Created once per cluster by the suite: value 0 and ``preemptionPolicy: Never``, so a probe
#: never evicts anyone's work.
PRIORITY_CLASS = "gpuconf-probe"
#: GPU nodes are commonly tainted so only GPU work lands there; probes are GPU work.
DEFAULT_TOLERATIONS: tuple[dict[str, str], ...] = (
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    # gpuconf's own sign-off taint (--taint-failed): a failed node must be retestable, or it never passes.
    {"key": "gpuconf.io/verdict", "operator": "Equal", "value": "fail", "effect": "NoSchedule"},
)
#: The port rank 0 of a multi-process NCCL job serves the unique id on.
NCCL_BOOTSTRAP_PORT = 29500
#: The label that ties a multi-process NCCL job's rank pods to its headless Service.
NCCL_JOB_LABEL = "gpuconf.io/nccl-job"
#: The label that ties the cuda-probe pods of one rendezvous group (pods that must hold their GPUs at
#: the same time) to its headless Service.
RENDEZVOUS_LABEL = "gpuconf.io/rendezvous"
#: How long a rendezvous probe waits for its peers (the cuda-probe's --rendezvous-wait): the peers of
#: a group are created together, but each may queue for an image pull or an admission.
RENDEZVOUS_WAIT_S = 180
#: The cuda-probe's --rendezvous-port default (an unprivileged port: Pod Security restricted).
RENDEZVOUS_PORT = 7171
#: How long a campaign waits for a pod to be placed (gpuconf.cluster.campaign reads it).
SCHEDULE_BUDGET_ANNOTATION = "gpuconf.io/schedule-budget-s"
#: The probe containers' names, in order: the probe, the optional sidecar and the optional
#: bystander (no GPU, no claim); logs are per name.
CONTAINERS = ("probe", "sidecar", "bystander")


#: Pod names are DNS subdomains of at most 253 characters (node names can be that long too).
_MAX_POD_NAME = 253


def probe_pod_name(prefix: str, role: str, node: str) -> str:
    """``<prefix>-<role>-<node>``, lower-cased with anything outside ``[a-z0-9.-]`` made ``-`` (MIG
    profiles carry ``+``), cut and made unique by a hash of the node name when too long."""
    name = re.sub(r"[^a-z0-9.-]", "-", f"{prefix}-{role}-{node}".lower())
    if len(name) <= _MAX_POD_NAME:
        return name
    digest = hashlib.sha256(node.encode()).hexdigest()[:10]
    return f"{name[:_MAX_POD_NAME - 11].rstrip('.-')}-{digest}"


def sources_configmap_name(probe: str) -> str:
    """Content-addressed, so a run never mixes probe sources of two versions. Hashed once per state
    of the files (probe_sources_stamp): every probe pod names its ConfigMap, and reading and hashing
    the sources for each was ~2% of the runner's CPU at 1,000 nodes (issue 29)."""
    return _sources_configmap_name(probe, probe_sources_stamp(probe))


@functools.lru_cache(maxsize=16)
def _sources_configmap_name(probe: str, stamp: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for name, text in sorted(probe_sources(probe).items()):
        digest.update(name.encode() + b"\0" + text.encode() + b"\0")
    return f"gpuconf-{probe}-src-{digest.hexdigest()[:10]}"


def make_probe_sources_configmap(probe: str, *, namespace: str, run_id: str) -> dict[str, Any]:
    (obj,) = render("probe-sources-configmap.yaml.j2", {
        "name": sources_configmap_name(probe), "namespace": namespace, "run_id": run_id, "probe": probe,
        "files": probe_sources(probe),
    })
    return obj


def make_cuda_probe_pod(
    *,
    name: str,
    namespace: str,
    run_id: str,
    check: str,
    cuda: str,
    registry: str | None = None,
    node: str | None = None,
    gpu_resource: str = "nvidia.com/gpu",
    gpu_count: int = 1,
    sidecar_gpu_count: int | None = None,
    env: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, str]] = DEFAULT_TOLERATIONS,
    runtime_class: str | None = None,
    call_timeout_s: int = 60,
    deadline_s: int = 900,
    cuda_archs: str | None = None,
    resource_claims: Mapping[str, str] | None = None,
    sidecar_claims: Sequence[str] | None = None,
    bystander: bool = False,
    rendezvous: RendezvousMember | None = None,
) -> dict[str, Any]:
    """A cuda-probe pod for ``check`` on ``node`` (by nodeSelector, so the scheduler still
    decides: it is the scheduler's verdict the suite wants to see). ``cuda_archs`` (e.g. "90",
    from the node's ``nvidia.com/gpu.compute.*`` labels) narrows the zero-registry compile.

    ``gpu_count=0`` leaves the container without GPU limits at all (what a pod that asks for no
    GPU looks like). ``sidecar_gpu_count`` adds a second probe container, ``sidecar``, with that
    many GPUs (0: none): the isolation suite's "only the requesting container sees the GPU". Both
    containers run the probe with the same ``env``; in zero-registry mode the one init container
    compiles it for both.

    ``resource_claims`` (pod claim name -> ResourceClaimTemplate name) gives the pod DRA claims,
    all used by the probe container; with ``gpu_count=0`` the claims are its only GPUs. ``node``
    still places such a pod by nodeSelector: a nodeName would bypass the scheduler's allocation.
    ``sidecar_claims`` (names among ``resource_claims``) are the pod claims the sidecar uses too
    (a sidecar with no GPU limits unless ``sidecar_gpu_count`` says otherwise): one claim shared by
    two containers. ``bystander`` adds a third probe container, ``bystander``, with neither GPU
    limits nor claims (what a container beside claim users looks like).

    ``rendezvous`` (one member of :func:`rendezvous_group`) names the pod under the group's headless
    Service and makes its probe container (not the sidecar or bystander, which share its network)
    hold its GPUs until every peer of the group was seen holding its own."""
    if sidecar_claims is not None and sidecar_gpu_count is None:
        sidecar_gpu_count = 0
    if bystander and sidecar_gpu_count is None:
        raise ValueError("a bystander container comes after a sidecar: give sidecar_gpu_count or sidecar_claims")
    counts = [gpu_count] + ([sidecar_gpu_count] if sidecar_gpu_count is not None else []) + ([0] if bystander else [])
    if any(c < 0 for c in counts):
        raise ValueError(f"a GPU count cannot be negative: {counts}")
    unknown = sorted(set(sidecar_claims or ()) - set(resource_claims or {}))
    if unknown:
        raise ValueError(f"the sidecar names pod claims the pod does not have: {unknown}")
    matrix = {p.cuda: p for p in images.matrix() if p.probe == "cuda-probe"}
    if registry:
        probe = matrix.get(cuda)
        if probe is None:
            raise ValueError(f"no cuda-probe image for CUDA {cuda} in the matrix ({', '.join(matrix)})")
        image = images.probe_image(probe, registry).pinned
        mode = "registry"
    else:
        image = images.devel_image(cuda)
        mode = "zero-registry"
    containers: list[dict[str, Any]] = [{"name": n, "gpu_count": c} for n, c in zip(CONTAINERS, counts, strict=False)]
    if resource_claims:
        containers[0]["claims"] = [{"name": k, "template": v} for k, v in resource_claims.items()]
    if sidecar_claims:
        containers[1]["uses"] = list(dict.fromkeys(sidecar_claims))
    if rendezvous is not None:
        containers[0]["env"] = [{"name": k, "value": v} for k, v in rendezvous.env.items()]
    (pod,) = render("cuda-probe-pod.yaml.j2", {
        "name": name, "namespace": namespace, "run_id": run_id, "check": check, "mode": mode, "image": image,
        "probe": "cuda-probe", "args": ["--timeout", str(call_timeout_s)],
        "sources_configmap": sources_configmap_name("cuda-probe") if mode == "zero-registry" else "",
        "node": node, "gpu_resource": gpu_resource,
        "containers": containers,
        "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
        "tolerations": [dict(t) for t in tolerations], "runtime_class": runtime_class,
        "priority_class": PRIORITY_CLASS, "call_timeout_s": call_timeout_s, "deadline_s": deadline_s,
        "cuda_archs": cuda_archs, "extra_labels": {RENDEZVOUS_LABEL: rendezvous.group} if rendezvous else {},
        "annotations": {}, "hostname": rendezvous.hostname if rendezvous else None,
        "subdomain": rendezvous.group if rendezvous else None,
    })
    return pod


@dataclass(frozen=True)
class RendezvousMember:
    """One pod of a rendezvous group: its hostname under the group's Service (``group``) and its
    probe container's rendezvous settings (``env``: the cuda-probe's GPUCONF_PROBE_RENDEZVOUS*)."""

    group: str
    hostname: str
    env: Mapping[str, str]


def rendezvous_group(group: str, hostnames: Sequence[str], *, namespace: str,
                     wait_s: int = RENDEZVOUS_WAIT_S) -> dict[str, RendezvousMember]:
    """The members of one rendezvous group, by hostname: pods that must hold their GPUs at the same
    time, each naming every other as ``<hostname>.<group>.<namespace>.svc`` (the group's headless
    Service, :func:`make_rendezvous_service`, gives them these names). ``group`` is a DNS-1035 label
    (it names the Service), the hostnames DNS labels."""
    if len(set(hostnames)) != len(hostnames) or len(hostnames) < 2:
        raise ValueError(f"a rendezvous group has two or more distinct hostnames: {list(hostnames)}")
    if not re.fullmatch(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", group):
        raise ValueError(f"a rendezvous group names a Service: a DNS-1035 label, not {group!r}")
    bad = [h for h in hostnames if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", h)]
    if bad:
        raise ValueError(f"a pod's hostname is a DNS label: {bad}")
    return {h: RendezvousMember(group, h, {
        "GPUCONF_PROBE_RENDEZVOUS": ",".join(f"{peer}.{group}.{namespace}.svc" for peer in hostnames if peer != h),
        "GPUCONF_PROBE_RENDEZVOUS_WAIT": str(wait_s)}) for h in hostnames}


def rendezvous_group_name(prefix: str, key: str) -> str:
    """A group's Service name: ``<prefix>-<10 hex digits of key>`` (a node name may be 253 characters
    long; a Service name is a DNS-1035 label of at most 63)."""
    return f"{prefix}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


def make_rendezvous_service(*, name: str, namespace: str, run_id: str, check: str) -> dict[str, Any]:
    """The headless Service of one rendezvous group ``name``: it selects the run's pods labelled
    ``gpuconf.io/rendezvous: <name>`` and publishes them before they are ready, so each probe
    reaches its peers by name as soon as they run."""
    (obj,) = render("rendezvous-service.yaml.j2", {"name": name, "namespace": namespace, "run_id": run_id,
                                                   "check": check, "port": RENDEZVOUS_PORT})
    return obj


@dataclass(frozen=True)
class ClaimRequest:
    """One request of a ResourceClaim: ``count`` devices of ``device_class`` (mode ExactCount), or
    every matching one on the node (mode All), each satisfying every CEL ``selectors`` expression."""

    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    mode: str = "ExactCount"
    count: int = 1


def make_resource_claim_template(*, name: str, namespace: str, run_id: str, check: str,
                                 requests: Sequence[ClaimRequest],
                                 match_attributes: Sequence[str] = ()) -> dict[str, Any]:
    """A ResourceClaimTemplate (resource.k8s.io/v1): each pod that names it gets its own claim.
    ``match_attributes``: fully qualified attributes (``gpu.nvidia.com/productName``) on which every
    device allocated for the claim, across all its requests, must agree (``constraints[].matchAttribute``)."""
    if not requests:
        raise ValueError("a ResourceClaimTemplate needs at least one request")
    if any("/" not in a for a in match_attributes):
        raise ValueError(f"a matchAttribute is fully qualified (domain/name): {list(match_attributes)}")
    if any(r.mode == "ExactCount" and r.count < 1 for r in requests):
        raise ValueError(f"an ExactCount request asks for at least one device: {list(requests)}")
    (obj,) = render("resource-claim-template.yaml.j2", {
        "name": name, "namespace": namespace, "run_id": run_id, "check": check,
        "requests": [{"name": r.name, "device_class": r.device_class, "selectors": list(r.selectors),
                      "mode": r.mode, "count": r.count} for r in requests],
        "match_attributes": list(match_attributes),
    })
    return obj


def make_nccl_probe_pod(
    *,
    name: str,
    namespace: str,
    run_id: str,
    check: str,
    node: str | None,
    gpu_count: int,
    registry: str | None = None,
    env: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, str]] = DEFAULT_TOLERATIONS,
    runtime_class: str | None = None,
    step_timeout_s: int = 300,
    deadline_s: int = 1800,
    cuda_archs: str | None = None,
    rank: int | None = None,
    world_size: int | None = None,
    id_addr: str | None = None,
    bootstrap_timeout_s: int = 120,
    hostname: str | None = None,
    subdomain: str | None = None,
    labels: Mapping[str, str] | None = None,
    schedule_budget_s: int | None = None,
    kueue_queue: str | None = None,
    gang: str | None = None,
    iters: int | None = None,
    warmup: int | None = None,
    gpu_resource: str = "nvidia.com/gpu",
    resource_claims: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """An nccl-probe pod: the all-reduce sweep over the ``gpu_count`` GPUs it is given, in one
    process, or as ``rank`` of a ``world_size``-rank job whose rank 0 serves the NCCL unique id at
    ``id_addr`` (HOST:PORT). ``NCCL_DEBUG=INFO`` unless ``env`` says otherwise: the transport NCCL
    chose is part of the evidence. Placed by nodeSelector like every probe.

    A rank of a job on a real cluster is found by name: ``hostname`` and ``subdomain`` (the job's
    headless Service, :func:`make_nccl_job_service`, selecting ``labels``) give it the DNS name
    ``<hostname>.<subdomain>.<namespace>.svc``. ``schedule_budget_s`` bounds how long the campaign
    waits for the pod to be placed (the ``gpuconf.io/schedule-budget-s`` annotation): at most the
    bootstrap timeout, so a rank that cannot be placed is reported rather than waited on.

    ``kueue_queue`` (a LocalQueue) with ``gang`` (the job's name) makes the ranks one Kueue pod group
    (queue-name and pod-group-name labels, pod-group-total-count annotation = ``world_size``): Kueue
    admits all of them or none, so a rank never holds a node's GPUs while its peers wait.

    ``iters`` and ``warmup`` (the probe's ``--iters``/``--warmup``, default 20 and 5 per size;
    sizes from 256 MiB run ``max(1, iters/4)``) lengthen the sweep, as the burn-in tier does.

    The GPUs: ``gpu_count`` of ``gpu_resource`` in the limits (the device plugin's, or a DRA-backed
    extended resource), or ``resource_claims`` (pod claim name -> ResourceClaimTemplate name) with
    ``gpu_count`` 0, as make_cuda_probe_pod gives them."""
    if gpu_count < 1 and not resource_claims:
        raise ValueError("an nccl-probe pod asks for at least one GPU")
    if iters is not None and iters < 1 or warmup is not None and warmup < 0:
        raise ValueError(f"the nccl-probe times at least one iteration and warms up zero or more: iters {iters}, "
                         f"warmup {warmup}")
    if kueue_queue is not None and (gang is None or world_size is None):
        raise ValueError("a Kueue pod group needs the job's name (gang) and its world_size")
    multi = (rank, world_size, id_addr)
    if any(v is not None for v in multi) and not all(v is not None for v in multi):
        raise ValueError("rank, world_size and id_addr go together")
    nccl = next(p for p in images.matrix() if p.probe == "nccl-probe")
    if registry:
        image, mode = images.probe_image(nccl, registry).pinned, "registry"
    else:
        image, mode = images.devel_image(nccl.cuda), "zero-registry"
    kueue_labels: dict[str, str] = {}
    kueue_annotations: dict[str, str] = {}
    if kueue_queue is not None:
        kueue_labels = {"kueue.x-k8s.io/queue-name": kueue_queue, "kueue.x-k8s.io/pod-group-name": str(gang)}
        kueue_annotations = {"kueue.x-k8s.io/pod-group-total-count": str(world_size)}
    args = ["--timeout", str(step_timeout_s)]
    args += ["--warmup", str(warmup)] if warmup is not None else []
    args += ["--iters", str(iters)] if iters is not None else []
    if rank is not None:
        args += ["--rank", str(rank), "--world-size", str(world_size), "--id-addr", str(id_addr),
                 "--bootstrap-timeout", str(bootstrap_timeout_s)]
    probe: dict[str, Any] = {"name": "probe", "gpu_count": gpu_count}
    if resource_claims:
        probe["claims"] = [{"name": k, "template": v} for k, v in resource_claims.items()]
    (pod,) = render("cuda-probe-pod.yaml.j2", {
        "name": name, "namespace": namespace, "run_id": run_id, "check": check, "mode": mode, "image": image,
        "probe": "nccl-probe", "args": args,
        "sources_configmap": sources_configmap_name("nccl-probe") if mode == "zero-registry" else "",
        "node": node, "gpu_resource": gpu_resource, "containers": [probe],
        "env": [{"name": k, "value": v} for k, v in {"NCCL_DEBUG": "INFO", **(env or {})}.items()],
        "tolerations": [dict(t) for t in tolerations], "runtime_class": runtime_class,
        "priority_class": PRIORITY_CLASS, "call_timeout_s": step_timeout_s, "deadline_s": deadline_s,
        "cuda_archs": cuda_archs, "extra_labels": {**(labels or {}), **kueue_labels},
        "annotations": {**({SCHEDULE_BUDGET_ANNOTATION: str(schedule_budget_s)} if schedule_budget_s is not None
                           else {}), **kueue_annotations},
        "hostname": hostname, "subdomain": subdomain,
    })
    return pod


def make_nccl_job_service(*, name: str, namespace: str, run_id: str, check: str, job: str,
                          port: int = NCCL_BOOTSTRAP_PORT) -> dict[str, Any]:
    """The headless Service of one multi-process NCCL job: it selects the run's pods labelled
    ``gpuconf.io/nccl-job: <job>`` and publishes them before they are ready, so rank 0's name
    resolves as soon as it runs."""
    (obj,) = render("nccl-job-service.yaml.j2", {"name": name, "namespace": namespace, "run_id": run_id,
                                                 "check": check, "job": job, "port": port})
    return obj


def nccl_rank0_address(*, job: str, service: str, namespace: str, port: int = NCCL_BOOTSTRAP_PORT) -> str:
    """Where rank 0 of ``job`` serves the unique id: its pod's name under the job's Service."""
    return f"{job}-r0.{service}.{namespace}.svc:{port}"
