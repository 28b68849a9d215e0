"""The isolation checks' decisions, pinned where mutation testing (scripts/mutation-score) found them
unpinned: every branch of every check gives the verdict recorded in tests/data/verdicts/isolation.json
(its outcome and the words a reader acts on: summary, expected, observed, evidence), on what the
simulated healthy-h100 node's toolkit injects into a probe container, with one thing changed per case:
a view that could not be read, a GPU too many, a claim that got another device, an owner that failed
or passed."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from test_checks_isolation import claimed, pod_outcome, run_probe, sim_node, slice_of
from verdict_record import check_recording, whole

from gpuconf.checks import isolation as iso
from gpuconf.checks.isolation import CLAIM_OWNER, ClaimGrant, GpuView, Sighting
from gpuconf.cluster.outcomes import PodOutcome
from gpuconf.sim.emulate import Visible
from gpuconf.verdict import Verdict, failed, not_tested, passed

N = sim_node()
NODE = N.name
DEVICES = slice_of(N)
Edit = Callable[[dict[str, Any]], None]


def run(*gpus: int, edit: Edit | None = None, env: dict[str, str] | None = None) -> tuple[int, str]:
    """The cuda-probe in a container given GPUs ``gpus`` of the node (and its own ``env``), its document
    edited by ``edit``."""
    code, out = run_probe(N, [Visible(N.gpus[i]) for i in gpus], env or {})
    if edit is not None:
        doc = json.loads(out)
        edit(doc)
        out = json.dumps(doc)
    return code, out


def pod(role: str, *gpus: int, edit: Edit | None = None, env: dict[str, str] | None = None,
        sidecar: tuple[int, ...] | None = None, sidecar_edit: Edit | None = None) -> PodOutcome:
    runs = {"probe": run(*gpus, edit=edit, env=env)}
    if sidecar is not None:
        runs["sidecar"] = run(*sidecar, edit=sidecar_edit)
    return pod_outcome(f"iso-{role}-{NODE}", runs)


def seen(role: str, *gpus: int, edit: Edit | None = None, env: dict[str, str] | None = None) -> Sighting:
    return iso.sighting(pod(role, *gpus, edit=edit, env=env))


def nothing(role: str = "none") -> Sighting:
    """A pod that never ran: no document, with its reason."""
    event = {"type": "Warning", "reason": "FailedScheduling", "message": "0/2 nodes are available: 2 Insufficient "
             "nvidia.com/gpu."}
    return iso.sighting(pod_outcome(f"iso-{role}-{NODE}", {}, phase="Pending", events=[event]))


# -- edits of the probe document -------------------------------------------------------------------


def cuda_failed(doc: dict[str, Any]) -> None:
    doc["init"] = {"call": "cudaFree(0)", "code": 999, "name": "cudaErrorUnknown", "message": "unknown error",
                   "ms": 0.05, "timed_out": False}
    doc["devices"] = []
    doc["device_count"] = {"value": 0, "result": dict(doc["init"], call="cudaGetDeviceCount")}


def cuda_no_device(doc: dict[str, Any]) -> None:
    cuda_failed(doc)
    doc["init"].update(code=100, name="cudaErrorNoDevice", message="no CUDA-capable device is detected")


def nvml_broken(doc: dict[str, Any]) -> None:
    doc["nvml"] = {"available": False, "reason": "nvmlInit_v2: Driver Not Loaded"}


def nvml_missing(doc: dict[str, Any]) -> None:
    doc["nvml"] = {"available": False, "reason": "libnvidia-ml.so.1: cannot open shared object file: No such file"}


def unreadable(doc: dict[str, Any]) -> None:
    cuda_failed(doc)
    nvml_broken(doc)


def no_dev(doc: dict[str, Any]) -> None:
    doc["device_nodes"]["gpus"] = []


def dev_only(doc: dict[str, Any]) -> None:
    """A container that shows /dev/nvidia0 and nothing else readable as empty: CUDA 100, NVML absent."""
    cuda_no_device(doc)
    nvml_missing(doc)


def no_uuids(doc: dict[str, Any]) -> None:
    for d in doc["devices"]:
        d["uuid"] = None
    for g in doc["nvml"]["gpus"]:
        g["uuid"] = None


def as_mig(doc: dict[str, Any], instances: int = 1) -> None:
    """CUDA enumerates MIG instances of the container's GPU (NVML and /dev keep the parent)."""
    first = doc["devices"][0]
    doc["devices"] = [{**first, "index": i, "uuid": f"MIG-{i}aaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "mig": True}
                      for i in range(instances)]
    doc["device_count"]["value"] = instances


def mig(instances: int) -> Edit:
    return lambda doc: as_mig(doc, instances)


# -- what was seen, by role ------------------------------------------------------------------------

ONE = seen("one", 0)
TWO = seen("two", 2, 3)
SPLIT = pod("split", 1, sidecar=())
ENVVAR = seen("envvar", env={"NVIDIA_VISIBLE_DEVICES": "all"})
NONE = seen("none")
LEAK_ALL = seen("none", *range(8))


def grants(*pods: tuple[PodOutcome, list[str]]) -> dict[str, ClaimGrant]:
    """Each pod's claim allocated the named devices of the node's slice."""
    return {iso.sighting(p).where: iso.claim_grant(claimed(p, names), DEVICES) for p, names in pods}


def one_pod(*gpus: int, edit: Edit | None = None) -> PodOutcome:
    return pod("one", *gpus, edit=edit)


def sees_only(seen_: list[tuple[int, Sighting]], **kw: Any) -> Any:
    return iso.evaluate_sees_only_allocated(NODE, seen_, **kw)


def claim_case(sees: tuple[int, ...], allocated: list[str], owner: Any = None, edit: Edit | None = None) -> Any:
    p = one_pod(*sees, edit=edit)
    return sees_only([(len(sees) or 1, iso.sighting(p))], allocatable=8, grants=grants((p, allocated)),
                     owner=owner)


def owner_failing(cause: str = "sees-another-device", node: str = NODE) -> Any:
    return failed(CLAIM_OWNER, node, "the claim was allocated gpu-5 (GPU-x) but the pod sees GPU-y", causes={cause})


def raw_claim(outcome: PodOutcome, results: list[dict[str, str]]) -> PodOutcome:
    claim = {"metadata": {"name": f"{outcome.name}-gpus"},
             "status": {"allocation": {"devices": {"results": results}}}}
    return replace(outcome, claims=(claim,))


def view(s: Sighting) -> Any:
    assert s.report is not None
    v = GpuView.of(s.report)
    return {"views": v.views(), "uuids": v.uuids(), "mig": v.mig, "unreadable": v.unreadable,
            "short": v.describe(), "full": v.describe(full=True)}


def sighted(s: Sighting) -> Any:
    return {"where": s.where, "failure": s.failure,
            "exit": None if s.report is None else (s.report.exit_code, s.report.init.code)}


CASES: dict[str, Callable[[], Any]] = {
    # what a container saw, read from a campaign outcome
    "sighting: a probe document": lambda: sighted(ONE),
    "sighting: the sidecar's document": lambda: sighted(iso.sighting(SPLIT, "sidecar")),
    "sighting: a pod that never ran, with its events' diagnosis": lambda: sighted(nothing()),
    "sighting: a container whose logs could not be read": lambda: sighted(iso.sighting(replace(
        pod_outcome(f"iso-one-{NODE}", {}, phase="Failed", message="OOMKilled"),
        missing_logs={"probe": "the kubelet returned 500"}))),
    "sighting: a sidecar without a document names the container": lambda: sighted(iso.sighting(
        pod_outcome(f"iso-split-{NODE}", {"probe": run(1)}), "sidecar")),
    "sighting: a pod with two diagnoses": lambda: sighted(iso.sighting(pod_outcome(
        f"iso-one-{NODE}", {}, phase="Pending", message='runtimeclass.node.k8s.io "nvidia" not found',
        events=[{"type": "Warning", "reason": "FailedScheduling", "message": "0/2 nodes are available: 2 "
                 "Insufficient nvidia.com/gpu."}]))),
    "sighting: a document whose exit code is not the container's": lambda: sighted(iso.sighting(pod_outcome(
        f"iso-one-{NODE}", {"probe": (137, run(0)[1])}))),
    "sighting: output that is no document": lambda: sighted(iso.sighting(pod_outcome(
        f"iso-one-{NODE}", {"probe": (1, "Segmentation fault\n")}))),
    "sighting: the exit code is the probe container's": lambda: sighted(iso.sighting(pod_outcome(
        f"iso-none-{NODE}", {"probe": run()}))),
    # the three views
    "view: one GPU": lambda: view(ONE),
    "view: eight GPUs, the short form cut after three": lambda: view(LEAK_ALL),
    "view: no GPU": lambda: view(NONE),
    "view: CUDA failed for another reason than no device": lambda: view(seen("one", 0, edit=cuda_failed)),
    "view: CUDA found no device": lambda: view(seen("one", 0, edit=cuda_no_device)),
    "view: NVML did not initialise": lambda: view(seen("one", 0, edit=nvml_broken)),
    "view: NVML not injected": lambda: view(seen("one", 0, edit=nvml_missing)),
    "view: both unreadable": lambda: view(seen("one", 0, edit=unreadable)),
    "view: devices without UUIDs": lambda: view(seen("two", 2, 3, edit=no_uuids)),
    "view: MIG instances": lambda: view(seen("one", 0, edit=mig(2))),
    "view: NVML only": lambda: view(seen("one", 0, edit=cuda_failed)),
    "view: /dev only": lambda: view(seen("one", 0, edit=unreadable)),
    # what a claim got
    "claim: none seen while the pod ran": lambda: iso.claim_grant(one_pod(0), DEVICES),
    "claim: none seen, the watch broke": lambda: iso.claim_grant(
        replace(one_pod(0), claims_error="the watch on resourceclaims ended: 410 Gone"), DEVICES),
    "claim: one device": lambda: iso.claim_grant(claimed(one_pod(0), ["gpu-0"]), DEVICES),
    "claim: two devices": lambda: iso.claim_grant(claimed(one_pod(2, 3), ["gpu-2", "gpu-3"]), DEVICES),
    "claim: a device no slice publishes": lambda: iso.claim_grant(claimed(one_pod(0), ["gpu-0", "gpu-9"]), DEVICES),
    "claim: another driver's device": lambda: iso.claim_grant(raw_claim(one_pod(0), [
        {"driver": "other.example.com", "pool": NODE, "device": "gpu-0"}]), DEVICES),
    "claim: a device published without a UUID": lambda: iso.claim_grant(
        claimed(one_pod(0), ["gpu-0"]), (replace(DEVICES[0], attributes={}),)),
    "claim: an allocation without results": lambda: iso.claim_grant(raw_claim(one_pod(0), []), DEVICES),
    # no-request-sees-no-gpu and envvar-without-request-gets-no-gpu
    "none: sees none": lambda: iso.evaluate_no_request_sees_no_gpu(NODE, NONE),
    "none: never ran": lambda: iso.evaluate_no_request_sees_no_gpu(NODE, nothing()),
    "none: no document and no reason": lambda: iso.evaluate_no_request_sees_no_gpu(
        NODE, Sighting(f"pod iso-none-{NODE}", None, None)),
    "none: sees eight": lambda: iso.evaluate_no_request_sees_no_gpu(NODE, LEAK_ALL),
    "none: sees one": lambda: iso.evaluate_no_request_sees_no_gpu(NODE, seen("none", 3)),
    "none: sees one on NVML only": lambda: iso.evaluate_no_request_sees_no_gpu(NODE, seen("none", 3, edit=cuda_failed)),
    "none: sees /dev only": lambda: iso.evaluate_no_request_sees_no_gpu(NODE, seen("none", 3, edit=dev_only)),
    "none: CUDA and NVML unreadable, no /dev": lambda: iso.evaluate_no_request_sees_no_gpu(
        NODE, seen("none", 3, edit=lambda d: (unreadable(d), no_dev(d)))),
    "none: CUDA unreadable, NVML empty": lambda: iso.evaluate_no_request_sees_no_gpu(
        NODE, seen("none", edit=lambda d: (cuda_failed(d), nvml_missing(d)))),
    "envvar: sees none": lambda: iso.evaluate_envvar_without_request(NODE, ENVVAR),
    "envvar: sees two": lambda: iso.evaluate_envvar_without_request(
        NODE, seen("envvar", 0, 1, env={"NVIDIA_VISIBLE_DEVICES": "all"})),
    "envvar: never ran": lambda: iso.evaluate_envvar_without_request(NODE, nothing("envvar")),
    # sees-only-allocated, device plugin
    "only: one and two": lambda: sees_only([(1, ONE), (2, TWO)], allocatable=8),
    "only: one on a one-GPU node": lambda: sees_only([(1, ONE)], allocatable=1),
    "only: one on an MPS node": lambda: sees_only([(1, ONE)], allocatable=8, one_per_container=True),
    "only: one on a node of two, without N=2": lambda: sees_only([(1, ONE)], allocatable=2),
    "only: one, allocatable unknown": lambda: sees_only([(1, ONE)]),
    "only: nothing planned": lambda: sees_only([], allocatable=0),
    "only: the one-GPU pod sees two": lambda: sees_only([(1, seen("one", 0, 1)), (2, TWO)], allocatable=8),
    "only: the two-GPU pod sees three": lambda: sees_only([(1, ONE), (2, seen("two", 2, 3, 4))], allocatable=8),
    "only: the two-GPU pod sees one": lambda: sees_only([(1, ONE), (2, seen("two", 2))], allocatable=8),
    "only: sees none": lambda: sees_only([(1, seen("one"))], allocatable=8),
    "only: NVML sees two, CUDA one": lambda: sees_only([(1, seen("one", 0, edit=lambda d: d["nvml"]["gpus"].append(
        {**d["nvml"]["gpus"][0], "index": 1, "uuid": N.gpus[1].uuid})))], allocatable=8),
    "only: /dev shows two": lambda: sees_only([(1, seen("one", 0, edit=lambda d: d["device_nodes"]["gpus"].append(
        "/dev/nvidia1")))], allocatable=8),
    "only: the two-GPU pod never ran": lambda: sees_only([(1, ONE), (2, nothing("two"))], allocatable=8),
    "only: the first pod never ran": lambda: sees_only([(1, nothing("one"))], allocatable=8),
    "only: one blind of two": lambda: sees_only([(1, seen("one", 0, edit=unreadable)), (2, TWO)], allocatable=8),
    "only: both blind": lambda: sees_only([(1, seen("one", 0, edit=unreadable)),
                                           (2, seen("two", 2, 3, edit=unreadable))], allocatable=8),
    "only: NVML unreadable, CUDA right": lambda: sees_only([(1, seen("one", 0, edit=nvml_broken))], allocatable=8),
    "only: time-sliced, two replicas of one GPU": lambda: sees_only([(2, seen("two", 2))], replicas=4,
                                                                    allocatable=32),
    "only: time-sliced, three for two": lambda: sees_only([(2, seen("two", 2, 3, 4))], replicas=4, allocatable=32),
    "only: time-sliced, none for one": lambda: sees_only([(1, seen("one"))], replicas=2, allocatable=16),
    "only: one MIG instance for one": lambda: sees_only([(1, seen("one", 0, edit=mig(1)))], allocatable=7),
    "only: two MIG instances for one": lambda: sees_only([(1, seen("one", 0, edit=mig(2)))], allocatable=7),
    "only: two MIG instances of two parents for two": lambda: sees_only(
        [(2, seen("two", 2, 3, edit=mig(1)))], allocatable=7),
    "only: MIG instance of three parents for two": lambda: sees_only(
        [(2, seen("two", 2, 3, 4, edit=mig(1)))], allocatable=7),
    # sees-only-allocated, DRA claims
    "claims: each sees its own": lambda: sees_only(
        [(1, iso.sighting(one_pod(0))), (2, iso.sighting(pod("two", 2, 3)))], allocatable=8,
        grants=grants((one_pod(0), ["gpu-0"]), (pod("two", 2, 3), ["gpu-2", "gpu-3"]))),
    "claims: each sees its own, on one GPU": lambda: sees_only(
        [(1, iso.sighting(one_pod(0)))], allocatable=1, grants=grants((one_pod(0), ["gpu-0"]))),
    "claims: no claim recorded for the pod": lambda: sees_only([(1, ONE)], allocatable=8, grants={}),
    "claims: the allocation is unknown": lambda: sees_only(
        [(1, ONE)], allocatable=8, grants={ONE.where: iso.claim_grant(one_pod(0), DEVICES)}),
    "claims: another GPU, no owner": lambda: claim_case((1,), ["gpu-0"]),
    "claims: another GPU, the owner failed for it": lambda: claim_case((1,), ["gpu-0"], owner_failing()),
    "claims: another GPU, the owner failed for an unpublished device": lambda: claim_case(
        (1,), ["gpu-0"], owner_failing("unpublished-device")),
    "claims: another GPU, the owner failed for its memory": lambda: claim_case(
        (1,), ["gpu-0"], owner_failing("memory-below-selector")),
    "claims: another GPU, the owner failed on another node": lambda: claim_case(
        (1,), ["gpu-0"], owner_failing(node="h100-1")),
    "claims: another GPU, the owner passed": lambda: claim_case(
        (3,), ["gpu-2"], passed(CLAIM_OWNER, NODE, "the claim was allocated gpu-0 and the pod sees it")),
    "claims: another GPU, the owner did not judge": lambda: claim_case(
        (3,), ["gpu-2"], not_tested(CLAIM_OWNER, NODE, "no memory selector to try")),
    "claims: another GPU, another check failed": lambda: claim_case(
        (3,), ["gpu-2"], failed("dra.attributes-match-hardware", NODE, "gpu-2's uuid is another GPU's")),
    "claims: another GPU, the owner's verdict has no node": lambda: claim_case(
        (3,), ["gpu-2"], replace(owner_failing(), node=None)),
    "claims: one of two devices": lambda: claim_case((0,), ["gpu-0", "gpu-1"]),
    "claims: sees none of its device": lambda: claim_case((), ["gpu-0"]),
    "claims: MIG, judged by NVML's parent": lambda: claim_case((0,), ["gpu-0"], edit=mig(1)),
    "claims: MIG of another parent": lambda: claim_case((1,), ["gpu-0"], edit=mig(1)),
    "claims: NVML unreadable, CUDA's devices": lambda: claim_case((0,), ["gpu-0"], edit=nvml_broken),
    "claims: CUDA unreadable, NVML's GPUs": lambda: claim_case((0,), ["gpu-0"], edit=cuda_failed),
    # only-requesting-container-sees-gpu
    "container: only the requester": lambda: iso.evaluate_only_requesting_container(
        NODE, iso.sighting(SPLIT), iso.sighting(SPLIT, "sidecar")),
    "container: the neighbour sees eight": lambda: iso.evaluate_only_requesting_container(
        NODE, iso.sighting(SPLIT), seen("split", *range(8))),
    "container: the neighbour sees /dev only": lambda: iso.evaluate_only_requesting_container(
        NODE, iso.sighting(SPLIT), seen("split", 1, edit=dev_only)),
    "container: the requester sees two": lambda: iso.evaluate_only_requesting_container(
        NODE, seen("split", 1, 2), iso.sighting(SPLIT, "sidecar")),
    "container: the requester sees none": lambda: iso.evaluate_only_requesting_container(
        NODE, seen("split"), iso.sighting(SPLIT, "sidecar")),
    "container: the requester sees five": lambda: iso.evaluate_only_requesting_container(
        NODE, seen("split", 1, 2, 3, 4, 5), iso.sighting(SPLIT, "sidecar")),
    "container: the neighbour sees CUDA's GPUs, NVML not injected": lambda: iso.evaluate_only_requesting_container(
        NODE, iso.sighting(SPLIT), seen("split", 2, 3, edit=nvml_missing)),
    "container: the neighbour sees NVML's GPUs, CUDA none": lambda: iso.evaluate_only_requesting_container(
        NODE, iso.sighting(SPLIT), seen("split", 2, 3, edit=cuda_no_device)),
    "container: the requester never ran": lambda: iso.evaluate_only_requesting_container(
        NODE, nothing("split"), iso.sighting(SPLIT, "sidecar")),
    "container: the neighbour never ran": lambda: iso.evaluate_only_requesting_container(
        NODE, iso.sighting(SPLIT), iso.sighting(pod_outcome(f"iso-split-{NODE}", {"probe": run(1)}), "sidecar")),
    "container: the requester blind": lambda: iso.evaluate_only_requesting_container(
        NODE, seen("split", 1, edit=unreadable), iso.sighting(SPLIT, "sidecar")),
    "container: the neighbour blind": lambda: iso.evaluate_only_requesting_container(
        NODE, iso.sighting(SPLIT), seen("split", 1, edit=lambda d: (unreadable(d), no_dev(d)))),
    "container: the neighbour given no driver": lambda: iso.evaluate_only_requesting_container(
        NODE, iso.sighting(SPLIT), seen("split", edit=lambda d: (unreadable(d), no_dev(d)))),
}


@pytest.mark.parametrize("case", CASES)
def test_the_verdict_is_the_recorded_one(case: str) -> None:
    check_recording("isolation", case, lambda: recorded(CASES[case]()))


def recorded(value: Any) -> Any:
    """A verdict whole (its NOT TESTED kind and owner, what a PASS did not judge, its findings too), anything
    else as is."""
    return {**whole(value), "causes": sorted(value.causes)} if isinstance(value, Verdict) else value
