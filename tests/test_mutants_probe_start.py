"""Every finding of gpuconf/checks/probe_start.py outside blocked_by, recorded whole in
tests/data/verdicts/probe_start.json: what blocks a node (the requirement error of the least
demanding image, a claim that cannot be prepared, a stale extended-resource mapping, a probe given
no driver on a cluster without the NVIDIA RuntimeClass, any other reason the probe printed nothing)
and the owner's one failure for each, so a reader is told the same cause in the same words."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest
from test_probe_start import (
    HOOK_ERROR,
    IMAGE,
    MATRIX,
    PREPARE,
    PREPARE_NO_DEVICE,
    START_ERROR,
    outcome,
    pending,
    probe_of,
)
from verdict_record import check_recording

from gpuconf.checks.probe_start import (
    Blocked,
    ProbeBlock,
    blocked_by,
    claim_prepare_block,
    evaluate_block,
    probe_block,
    whole_node_block,
)
from gpuconf.cluster.outcomes import PodEvent, PodOutcome
from gpuconf.verdict import Outcome, failed, passed

NODE = "rtx-0"
MISSING = "no RuntimeClass has the NVIDIA runtime's handler 'nvidia'"
CANNOT = "0/3 nodes are available: 1 cannot allocate all claims. preemption: 0/3 nodes are available."
#: GFD's labels of a GeForce workstation on R570 (CUDA 12.8), and of a node they say nothing about.
R570 = {"nvidia.com/cuda.driver-version.full": "570.195.03", "nvidia.com/cuda.driver.major": "570",
        "nvidia.com/cuda.driver.minor": "195", "nvidia.com/cuda.driver.rev": "03"}
RTX = {"nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-4090", **R570}
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", **R570}


def with_events(o: PodOutcome, *events: tuple[str, str]) -> PodOutcome:
    now = o.events[0].first_timestamp if o.events else None
    return dataclasses.replace(o, events=tuple(PodEvent("Warning", r, m, 1, "kubelet", now, now) for r, m in events))


def said(o: PodOutcome, container: str | None, pod: str | None) -> PodOutcome:
    """``o`` with its probe container's message and the pod's message replaced."""
    return dataclasses.replace(o, message=pod, containers=(dataclasses.replace(o.containers[0], message=container),))


def runc(nodes: list[str], edit: Callable[[dict[str, Any]], None] | None = None, gpus: int = 0) -> PodOutcome:
    doc = json.loads(probe_of(gpus).logs["probe"])
    doc["device_nodes"]["gpus"] = nodes
    if edit is not None:
        edit(doc)
    return outcome(IMAGE, reason="Completed", logs={"probe": json.dumps(doc)})


def block(o: PodOutcome | None, **kw: Any) -> Any:
    return whole_node_block(NODE, o, MATRIX, **kw)


def owner(o: PodOutcome, labels: dict[str, str] | None = None, **kw: Any) -> Any:
    found = block(o, **kw)
    assert found is not None
    return evaluate_block(found, labels or {})


CASES: dict[str, Callable[[], Any]] = {
    "no outcome": lambda: block(None),
    "requirement: least demanding image": lambda: block(outcome(IMAGE)),
    "requirement: a newer image": lambda: block(outcome("nvidia/cuda:13.0.2-devel-ubuntu24.04",
                                                        message=START_ERROR.replace("12.9", "13.0"))),
    "requirement: as old as the oldest": lambda: probe_block(NODE, outcome(IMAGE), ["12.9.1", "13.0.2"]),
    "requirement: an unreadable matrix": lambda: probe_block(NODE, outcome(IMAGE), ["twelve"]),
    "requirement: prebuilt image": lambda: block(outcome("r.example.com/gpuconf/cuda-probe:0.4.0-cuda12.9.1")),
    "requirement: an image of no known CUDA": lambda: block(outcome("example.com/probe:latest")),
    "requirement: in an event only": lambda: block(with_events(outcome(IMAGE, message="exit status 1"),
                                                               ("Failed", START_ERROR))),
    "requirement: no probe container": lambda: probe_block(NODE, dataclasses.replace(outcome(IMAGE), containers=()),
                                                           MATRIX),
    "requirement: no outcome": lambda: probe_block(NODE, None, MATRIX),
    "requirement: the owner's failure, GeForce": lambda: owner(outcome(IMAGE), RTX),
    "requirement: the owner's failure, data center": lambda: owner(outcome(IMAGE), H100),
    "requirement: the owner's failure, no labels": lambda: owner(outcome(IMAGE)),
    "prepare: names a device": lambda: block(pending("FailedPrepareDynamicResources", PREPARE)),
    "prepare: twice, then another": lambda: block(with_events(
        pending("FailedPrepareDynamicResources", PREPARE), ("FailedPrepareDynamicResources", PREPARE),
        ("FailedPrepareDynamicResources", PREPARE), ("FailedScheduling", CANNOT))),
    "prepare: names none": lambda: block(pending("FailedPrepareDynamicResources", PREPARE_NO_DEVICE)),
    "prepare: after the container printed": lambda: block(outcome(IMAGE, reason=None, phase="Running", logs={
        "probe": ""}, event="FailedPrepareDynamicResources", message=PREPARE)),
    "extended: cannot allocate": lambda: block(pending("FailedScheduling", CANNOT, unschedulable=True),
                                               extended="nvidia.com/gpu"),
    "extended: insufficient": lambda: block(pending("FailedScheduling", "0/1 nodes: 1 Insufficient example.com/gpu.",
                                                    unschedulable=True), extended="example.com/gpu"),
    "extended: another reason": lambda: block(pending("FailedScheduling", "0/1 nodes: 1 node(s) had untolerated taint",
                                                      unschedulable=True), extended="nvidia.com/gpu"),
    "extended: not asked": lambda: block(pending("FailedScheduling", CANNOT, unschedulable=True)),
    "runtime: nothing injected": lambda: block(runc([]), runtime_missing=MISSING),
    "runtime: device nodes only": lambda: block(runc(["/dev/nvidia0", "/dev/nvidia3"]), runtime_missing=MISSING),
    "runtime: the class exists": lambda: block(runc(["/dev/nvidia0"])),
    "runtime: injected": lambda: block(probe_of(8), runtime_missing=MISSING),
    "runtime: libcuda unread": lambda: block(runc([], lambda d: d.update(libcuda={
        "available": False, "reason": "not read: the probe stopped before CUDA init returned"})),
        runtime_missing=MISSING),
    "runtime: NVML failing": lambda: block(runc([], lambda d: d.update(nvml={
        "available": False, "reason": "nvmlInit_v2: Driver Not Loaded"})), runtime_missing=MISSING),
    "runtime: unreadable report": lambda: block(outcome(IMAGE, reason="Completed", logs={"probe": "{}"}),
                                                runtime_missing=MISSING),
    "runtime: the owner's failure": lambda: owner(runc(["/dev/nvidia0"]), runtime_missing=MISSING),
    "no report: hook error": lambda: block(outcome(IMAGE, message=HOOK_ERROR)),
    "no report: hook error, the owner's failure": lambda: owner(outcome(IMAGE, message=HOOK_ERROR)),
    "no report: pending": lambda: block(pending("FailedScheduling", "0/3 nodes are available: 1 Insufficient "
                                                "nvidia.com/gpu.", unschedulable=True)),
    "no report: unschedulable but Running": lambda: block(dataclasses.replace(
        outcome(IMAGE, reason="Error", message=None), unschedulable=True)),
    "no report: exited": lambda: block(outcome(IMAGE, reason="Error", message="exit 139")),
    "no report: no probe container": lambda: block(dataclasses.replace(
        outcome(IMAGE, reason="Error", message="killed"), containers=())),
    "no report: silent": lambda: block(dataclasses.replace(outcome(IMAGE, reason=None, message=None), events=())),
    "no report: the owner's failure": lambda: owner(outcome(IMAGE, reason="Error", message="exit 139")),
    "no report: the container and the pod say different things": lambda: block(dataclasses.replace(
        outcome(IMAGE, reason="Error", message="exec format error"), message="pod said otherwise")),
    "no report: the pod alone says": lambda: block(said(outcome(IMAGE, reason="Evicted", message=None), None,
                                                        "The node was low on resource: memory.")),
    "no report: a diagnosis ending a line": lambda: block(with_events(
        outcome(IMAGE, reason="Error", message="CUDA init failed: cudaErrorInsufficientDriver"),
        ("BackOff", "Back-off restarting failed container"))),
    "no report: a diagnosis starting a line": lambda: block(with_events(
        outcome(IMAGE, reason="Error", message="exit 3"), ("Failed", "cudaErrorInsufficientDriver in the probe"))),
    "no report: two diagnoses": lambda: block(with_events(
        outcome(IMAGE, message=HOOK_ERROR), ("FailedScheduling", "0/3 nodes are available: 1 Insufficient "
                                             "nvidia.com/gpu."))),
    "prepare: a container printed": lambda: claim_prepare_block(NODE, outcome(
        IMAGE, reason=None, phase="Running", logs={"probe": "{}"}, event="FailedPrepareDynamicResources",
        message=PREPARE), what="a claim"),
    "requirement: the owner's failure, an unknown GPU": lambda: owner(outcome(IMAGE), {
        "nvidia.com/gpu.product": "NVIDIA-Mystery-GPU", **R570}),
    "requirement: a CUDA of no known branch": lambda: evaluate_block(ProbeBlock(NODE, "99.0.1", "99.0",
                                                                                "requirement error"), H100),
    "requirement: in the container's message only": lambda: block(with_events(
        outcome(IMAGE), ("Failed", "Error: context deadline exceeded"))),
    "requirement: a brand condition": lambda: block(outcome(IMAGE, message=(
        "nvidia-container-cli: requirement error: unsatisfied condition: brand = tesla, please update your driver "
        "to a newer version, or use an earlier cuda container"))),
    "a plain finding's failure": lambda: evaluate_block(Blocked(NODE, "smoke.vector-add-every-gpu", "cause",
                                                                observed="seen", evidence=("e1", "e2")), {}),
    "a requirement finding": lambda: ProbeBlock(NODE, "12.9.1", "12.9", "requirement error"),
}


@pytest.mark.parametrize("case", CASES)
def test_the_verdict_is_the_recorded_one(case: str) -> None:
    check_recording("probe_start", case, CASES[case])


def test_a_finding_says_its_reason_and_owner() -> None:
    found = ProbeBlock(NODE, "12.9.1", "12.9", "requirement error")
    assert (found.owner, found.cause) == ("smoke.vector-add-every-gpu", "no probe image could start on rtx-0: "
                                          "requirement error")
    assert found.reason == f"blocked by smoke.vector-add-every-gpu: {found.cause}"
    plain = Blocked(NODE, "dra.attributes-match-hardware", "a cause", observed="x")
    assert plain.reason == "blocked by dra.attributes-match-hardware: a cause"


def test_a_cluster_level_dependant_folds_behind_a_failing_owner_of_its_declared_cause_only() -> None:
    """blocked_by for a verdict of no node (a cluster-level check): any node's owner failure counts, but
    only a failing one whose finding the dependant declares."""
    mine = failed("isolation.no-request-sees-no-gpu", None, "a pod that requests no GPU sees 8 GPUs")
    more = failed("isolation.sees-only-allocated", "h100-0", "a pod requesting 1 GPU sees 8", causes={"sees-more"})
    folded = blocked_by(mine, more)
    assert (folded.outcome, folded.node, folded.summary, folded.blocked_by) == (
        Outcome.NOT_TESTED, None, "blocked by isolation.sees-only-allocated: a pod requesting 1 GPU sees 8",
        "isolation.sees-only-allocated")
    fewer = failed("isolation.sees-only-allocated", "h100-0", "a pod requesting 2 GPUs sees 1", causes={"sees-fewer"})
    assert blocked_by(mine, fewer) is mine
    passing = passed("isolation.sees-only-allocated", "h100-0", "each pod sees its GPUs")
    assert blocked_by(mine, dataclasses.replace(passing, causes=frozenset({"sees-more"}))) is mine
    assert blocked_by(mine, fewer, more).summary == folded.summary  # the first owner that explains it


def test_an_undeclared_owner_is_refused_naming_every_one_and_the_table() -> None:
    owners = (failed("runtime.cuda-device-nodes-present", "h100-0", "x", causes={"device-node-missing"}),
              failed("labels.gfd-matches-hardware", "h100-0", "y"))
    with pytest.raises(ValueError) as refused:
        blocked_by(passed("isolation.no-request-sees-no-gpu", "h100-0", "ok"), *owners)
    assert str(refused.value) == ("isolation.no-request-sees-no-gpu declares no dependency on "
                                  "labels.gfd-matches-hardware, runtime.cuda-device-nodes-present "
                                  "(gpuconf/data/checks.yaml blocked_by)")
