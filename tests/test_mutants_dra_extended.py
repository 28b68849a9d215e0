"""dra.extended-resource-served (gpuconf/checks/dra_extended.py), branch by branch, where mutation
testing (scripts/mutation-score) found it unpinned: which claim is the scheduler's (annotated, owned
by the pod, whatever the other claims and owners around it), when a Pending pod is a stale mapping
(the scheduler's reason in its message or in a FailedScheduling event, and nothing else), and every
verdict of the check, recorded whole (outcome, summary, expected, observed, evidence, remedy, and a
NOT TESTED's kind) in tests/data/verdicts/dra_extended.json, on facts of the simulated h200-dra-only
node with one thing changed per case."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from test_checks_dra import CANNOT_ALLOCATE, NODE, pod_outcome, run_probe, sim_node
from test_checks_dra_first import POD, devices, extended_claim, with_claims
from verdict_record import check_recording, whole

from gpuconf.checks.dra_extended import (
    EXTENDED_CLAIM_ANNOTATION,
    SERVED,
    evaluate_extended_resource_served,
    stale_mapping,
)
from gpuconf.checks.dra_extended import extended_claim as scheduler_claim
from gpuconf.cluster.outcomes import PodOutcome
from gpuconf.nodes.devices import SliceDevice
from gpuconf.outcomes import COULD_NOT_RUN
from gpuconf.sim.emulate import Visible
from gpuconf.verdict import Outcome

N = sim_node()
DEVICES = devices()
GPU = "nvidia.com/gpu"



def ran(*indexes: int, edit: Callable[[dict[str, Any]], None] | None = None) -> PodOutcome:
    """The whole-node probe pod, finished, having been given GPUs ``indexes`` (its output edited by ``edit``)."""
    code, out = run_probe(N, [Visible(g) for g in N.present_gpus if g.index in indexes])
    if edit is not None:
        doc = json.loads(out)
        edit(doc)
        out = json.dumps(doc)
    return pod_outcome(POD, (code, out))


def pending(message: str | None = CANNOT_ALLOCATE, events: tuple[Mapping[str, str], ...] = ()) -> PodOutcome:
    return pod_outcome(POD, None, message=message, events=events)


def claim_of(pod: str = POD, *names: str, annotation: str | None = "true", owners: Any = None,
             name: str | None = None) -> dict[str, Any]:
    """A claim allocated ``names`` with the scheduler's annotation set to ``annotation`` (None: absent)
    and ``owners`` as its ownerReferences (default: pod ``pod``)."""
    doc = extended_claim(pod, *names)
    meta = doc["metadata"]
    meta["annotations"] = {} if annotation is None else {EXTENDED_CLAIM_ANNOTATION: annotation}
    if owners is not None:
        meta["ownerReferences"] = owners
    if name is not None:
        meta["name"] = name
    return doc


ALL = tuple(d.name for d in DEVICES)


def served(outcome: PodOutcome | None, requested: int = 8, ds: Any = DEVICES, **kw: Any) -> Callable[[], Any]:
    return lambda: whole(evaluate_extended_resource_served(NODE, resource=GPU, outcome=outcome, devices=ds,
                                                           requested=requested, **kw))


def no_nvml(doc: dict[str, Any]) -> None:
    doc["nvml"] = {"available": False, "reason": "nvmlInit_v2: Driver Not Loaded"}


def without_uuid(index: int) -> list[SliceDevice]:
    out = list(DEVICES)
    d = out[index]
    out[index] = dataclasses.replace(d, attributes={k: v for k, v in d.attributes.items() if k != "uuid"})
    return out


def scheduled_pending() -> PodOutcome:
    """Placed on the node, not yet running: no scheduling problem."""
    return dataclasses.replace(pending(), unschedulable=False, node=NODE, phase="Pending")


def pending_unplaced() -> PodOutcome:
    """Pending and not placed, without the Unschedulable condition (the reason only in an event)."""
    return dataclasses.replace(pending(message=None, events=({"type": "Warning", "reason": "FailedScheduling",
                                                               "message": CANNOT_ALLOCATE},)),
                               unschedulable=False, message=None)


def said_in_an_older_event() -> PodOutcome:
    """Unschedulable, its message the last FailedScheduling event's, an earlier one the scheduler's reason."""
    return dataclasses.replace(pending(events=({"type": "Warning", "reason": "FailedScheduling",
                                                "message": CANNOT_ALLOCATE},)), message="0/1 nodes are available")


OTHER_EVENT = ({"type": "Normal", "reason": "Scheduled", "message": CANNOT_ALLOCATE},)
INSUFFICIENT = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
MIG_ONLY = [dataclasses.replace(d, attributes={**d.attributes, "type": "mig"}) for d in DEVICES[:2]]

CASES: dict[str, Callable[[], Any]] = {
    # which claim is the scheduler's
    "claim: annotated and owned": lambda: scheduler_claim(with_claims(ran(0), claim_of(POD, "gpu-0"))),
    "claim: annotated True": lambda: scheduler_claim(with_claims(ran(0), claim_of(POD, "gpu-0", annotation="True"))),
    "claim: annotated false": lambda: scheduler_claim(with_claims(ran(0), claim_of(POD, "gpu-0", annotation="false"))),
    "claim: not annotated": lambda: scheduler_claim(with_claims(ran(0), claim_of(POD, "gpu-0", annotation=None))),
    "claim: owned by another pod": lambda: scheduler_claim(with_claims(ran(0), claim_of("other", "gpu-0"))),
    "claim: owned by a job of the pod's name": lambda: scheduler_claim(with_claims(ran(0), claim_of(
        POD, "gpu-0", owners=[{"kind": "Job", "name": POD}]))),
    "claim: the second owner is the pod": lambda: scheduler_claim(with_claims(ran(0), claim_of(
        POD, "gpu-0", owners=[{"kind": "ReplicaSet", "name": "rs"}, {"kind": "Pod", "name": POD}]))),
    "claim: no owners": lambda: scheduler_claim(with_claims(ran(0), claim_of(POD, "gpu-0", owners=[]))),
    "claim: after an unannotated and an unowned one": lambda: scheduler_claim(with_claims(
        ran(0), claim_of(POD, "gpu-1", annotation=None, name="user-claim"), claim_of("other", "gpu-2", name="theirs"),
        claim_of(POD, "gpu-0"))),
    "claim: after one without metadata or annotations": lambda: scheduler_claim(with_claims(
        ran(0), {"status": {}}, {"metadata": {"name": "bare", "annotations": None, "ownerReferences": None}},
        claim_of(POD, "gpu-0"))),
    "claim: annotated, owners null": lambda: scheduler_claim(with_claims(ran(0), {"metadata": {
        "name": "c", "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"}, "ownerReferences": None}})),
    "claim: none": lambda: scheduler_claim(ran(0)),
    # when a pod is a stale mapping
    "stale: unschedulable, the scheduler's reason": lambda: stale_mapping(pending(), GPU),
    "stale: unschedulable, Insufficient": lambda: stale_mapping(pending(INSUFFICIENT), GPU),
    "stale: unschedulable, Insufficient of another resource": lambda: stale_mapping(pending(INSUFFICIENT),
                                                                                     "example.com/gpu"),
    "stale: unschedulable, another reason": lambda: stale_mapping(pending("0/1 nodes: 1 Insufficient cpu."), GPU),
    "stale: unschedulable, no message": lambda: stale_mapping(pending(None), GPU),
    "stale: the reason in a FailedScheduling event": lambda: stale_mapping(
        pending("0/1 nodes are available", ({"type": "Warning", "reason": "FailedScheduling",
                                             "message": CANNOT_ALLOCATE},)), GPU),
    "stale: the reason in an older FailedScheduling event": lambda: stale_mapping(said_in_an_older_event(), GPU),
    "stale: the reason in another event": lambda: stale_mapping(pending("0/1 nodes are available", OTHER_EVENT), GPU),
    "stale: pending, not placed, the reason in an event": lambda: stale_mapping(pending_unplaced(), GPU),
    "stale: placed, pending": lambda: stale_mapping(scheduled_pending(), GPU),
    "stale: ran": lambda: stale_mapping(ran(0), GPU),
    # dra.extended-resource-served
    "served: passes": served(with_claims(ran(*range(8)), claim_of(POD, *ALL))),
    "served: passes, two": served(with_claims(ran(2, 3), claim_of(POD, "gpu-2", "gpu-3")), requested=2),
    "served: passes, another class": served(with_claims(ran(2), claim_of(POD, "gpu-2")), requested=1,
                                            device_class="gpu.example.com"),
    "served: passes on CUDA alone": served(with_claims(ran(2, edit=no_nvml), claim_of(POD, "gpu-2")), requested=1),
    "served: no probe": served(None),
    "served: stale mapping": served(pending()),
    "served: stale mapping, Insufficient": served(pending(INSUFFICIENT), requested=2),
    "served: stale mapping, another class": served(pending(), device_class="gpu.example.com"),
    "served: stale mapping, nothing published": served(pending(), ds=()),
    "served: stale mapping, MIG only": served(pending(), ds=MIG_ONLY),
    "served: stale mapping in an event": served(pending_unplaced()),
    "served: stale mapping in an older event": served(said_in_an_older_event()),
    "served: pending for another reason": served(pending("0/1 nodes: 1 Insufficient cpu.")),
    "served: placed, pending": served(scheduled_pending()),
    "served: no claim": served(ran(*range(8))),
    "served: claims unknown": served(with_claims(ran(*range(8)), error="watch expired")),
    "served: claims unknown, ours seen": served(with_claims(ran(*range(8)), claim_of(POD, *ALL),
                                                            error="watch expired")),
    "served: claim not annotated": served(with_claims(ran(*range(8)), claim_of(POD, *ALL, annotation=None))),
    "served: claim of another pod": served(with_claims(ran(*range(8)), claim_of("other", *ALL))),
    "served: not allocated": served(with_claims(ran(*range(8)), claim_of(POD) | {"status": {}})),
    "served: allocated nothing": served(with_claims(ran(*range(8)), claim_of(POD))),
    "served: short": served(with_claims(ran(0, 1), claim_of(POD, "gpu-0", "gpu-1"))),
    "served: one too many": served(with_claims(ran(0, 1, 2), claim_of(POD, "gpu-0", "gpu-1", "gpu-2")), requested=2),
    "served: an unpublished device": served(with_claims(ran(0, 1), claim_of(POD, "gpu-0", "gpu-99")), requested=2),
    "served: claim without a name": served(with_claims(ran(1), claim_of(POD, "gpu-1") | {"metadata": {
        "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"}, "ownerReferences": [{"kind": "Pod", "name": POD}]}}),
        requested=1),
    "served: probe gave no output": served(with_claims(pod_outcome(POD, (1, "Segmentation fault")),
                                                       claim_of(POD, "gpu-0")), requested=1),
    "served: probe sees others": served(with_claims(ran(0, 1), claim_of(POD, "gpu-2", "gpu-3")), requested=2),
    "served: probe sees one more": served(with_claims(ran(0, 1, 2), claim_of(POD, "gpu-0", "gpu-1")), requested=2),
    "served: probe sees none": served(with_claims(ran(), claim_of(POD, "gpu-0")), requested=1),
    "served: probe sees none, CUDA alone": served(with_claims(ran(edit=no_nvml), claim_of(POD, "gpu-0")),
                                                  requested=1),
    "served: a device without uuid": served(with_claims(ran(0, 1), claim_of(POD, "gpu-0", "gpu-1")), requested=2,
                                            ds=without_uuid(1)),
}


@pytest.mark.parametrize("case", CASES)
def test_the_verdict_is_the_recorded_one(case: str) -> None:
    check_recording("dra_extended", case, CASES[case])


def test_the_annotation_is_read_whatever_its_case_and_only_on_the_pods_own_claim() -> None:
    ours = claim_of(POD, "gpu-0", annotation="TRUE")
    assert scheduler_claim(with_claims(ran(0), claim_of(POD, "gpu-1", annotation=None), ours)) is ours
    assert scheduler_claim(with_claims(ran(0), claim_of(POD, "gpu-0", owners=[{"kind": "Job", "name": POD}]))) is None


def test_a_claim_seen_while_the_watch_broke_is_still_judged() -> None:
    v = evaluate_extended_resource_served(NODE, resource=GPU, outcome=with_claims(
        ran(*range(8)), claim_of(POD, *ALL), error="watch expired"), devices=DEVICES, requested=8)
    assert v.outcome is Outcome.PASS and v.summary.startswith(f"8 x {GPU} served through DRA")


def test_every_not_tested_says_it_could_not_run() -> None:
    for case in ("served: no probe", "served: no claim", "served: claims unknown", "served: probe gave no output"):
        v = CASES[case]()
        assert v["outcome"] == Outcome.NOT_TESTED.value and v["kind"] == COULD_NOT_RUN, case
        assert v["check"] == SERVED and v["node"] == NODE


def test_a_stale_mapping_is_the_finding_its_dependants_fold_behind() -> None:
    """The whole-node probe's dependants are blocked by dra.extended-resource-served only for this
    finding (gpuconf/data/checks.yaml); a probe seeing other GPUs declares none."""
    stale = evaluate_extended_resource_served(NODE, resource=GPU, outcome=pending(), devices=DEVICES, requested=8)
    assert stale.outcome is Outcome.FAIL and stale.causes == frozenset({"class-selects-no-device"})
    wrong = evaluate_extended_resource_served(NODE, resource=GPU, outcome=with_claims(
        ran(0, 1), claim_of(POD, "gpu-2", "gpu-3")), devices=DEVICES, requested=2)
    assert wrong.outcome is Outcome.FAIL and wrong.causes == frozenset()
