"""The sharing checks' decisions, pinned where mutation testing (scripts/mutation-score) found them
unpinned: every branch of every check gives the verdict recorded in tests/data/verdicts/sharing.json
(its outcome and the words a reader acts on: summary, expected, observed, evidence), on what the
simulated t4-timeslicing and a100-mps nodes publish and what the cuda-probe reports in their pods,
with one thing changed per case."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from test_checks_sharing import (
    A100_MIB,
    LABELLED,
    PROBED,
    facts_of,
    mps_client,
    mps_node,
    pod_outcome,
    rejected_outcome,
    renamed,
    runs_on,
    sim_node,
    uuids,
    with_alloc,
    with_census,
)
from verdict_record import check_recording, whole

from gpuconf.checks import sharing as sh
from gpuconf.checks.isolation import Sighting
from gpuconf.cluster.outcomes import PodOutcome
from gpuconf.expect import SharingSpec
from gpuconf.probes.cuda import CudaCall
from gpuconf.verdict import Verdict

T4 = facts_of(sim_node())  # 4 x T4, time-slicing 4 ways: nvidia.com/gpu 16
A100 = facts_of(mps_node())  # 8 x A100 80GB, MPS 4 ways: nvidia.com/gpu 32
RENAMED = facts_of(renamed(sim_node()))  # nvidia.com/gpu.shared 16, product without -SHARED
UNSHARED = facts_of(sim_node(profile="healthy-h100", node="h100-0"))
CLIENT = mps_client(mps_node())
GIB = 1 << 30


def t4(**changes: Any) -> sh.SharingFacts:
    return replace(T4, **changes)


def a100(**changes: Any) -> sh.SharingFacts:
    return replace(A100, **changes)


def gpus(n: int, per: int = 4, resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    """capacity and allocatable of ``n`` x ``per`` under ``resource``."""
    return {"capacity": {resource: n * per}, "allocatable": {resource: n * per}}


def replicas(f: sh.SharingFacts, physical: dict[str, int] | None = None, declared: SharingSpec | None = None) -> Any:
    return sh.evaluate_replicas_match_config(f, physical={LABELLED: 4, PROBED: 4} if physical is None else physical,
                                             declared=declared, pool="t4" if declared is not None else None)


def described(f: sh.SharingFacts) -> Any:
    return {"shared": f.labelled_shared, "resource": f.resource, "labels": f.labels_text(),
            "advertised": f.advertised_text(), "scope": sh.in_scope(f), "kind": sh.not_planned_kind(f),
            "mps kind": sh.not_planned_kind(f, mps=True), "plan": sh.mps_plan(f), "plan of 2": sh.mps_plan(f, pods=2)}


def parsed(labels: dict[str, str], capacity: dict[str, int] | None = None) -> Any:
    cap = {"nvidia.com/gpu": 16, "cpu": 8} if capacity is None else capacity
    return sh.sharing_facts("t4-0", labels, cap, dict(cap))


def with_report(seen: Sighting, **changes: Any) -> Sighting:
    assert seen.report is not None
    return replace(seen, report=replace(seen.report, **changes))


def with_device(seen: Sighting, **changes: Any) -> Sighting:
    assert seen.report is not None
    return with_report(seen, devices=(replace(seen.report.devices[0], **changes),))


def with_env(seen: Sighting, **env: str | None) -> Sighting:
    assert seen.report is not None
    return with_report(seen, env={**seen.report.env, **env})


INIT_FAILED = CudaCall(999, "cudaErrorUnknown", "unknown error", "cudaFree(0)")
OOM = CudaCall(2, "cudaErrorMemoryAllocation", "out of memory", "cudaMalloc")
LAUNCH = CudaCall(719, "cudaErrorLaunchFailure", "unspecified launch failure", "sm census kernel")
GONE = Sighting("pod mps-limit-a100-0-0", None, "pod mps-limit-a100-0-0 produced no probe output (Pending)")


def limits(seen: Sighting, f: sh.SharingFacts = A100, memory_mib: int | None = A100_MIB) -> Any:
    return sh.evaluate_mps_client_limits(f, seen, memory_mib=memory_mib)


def alloc(**changes: Any) -> Sighting:
    return with_alloc(CLIENT, **changes)


def threads(seen: Sighting, f: sh.SharingFacts = A100) -> Any:
    return sh.evaluate_mps_thread_limit(f, seen)


def census(distinct: int, **changes: Any) -> Sighting:
    return with_census(CLIENT, distinct, **changes)


REFUSED = rejected_outcome(mps_node())
NODE_T4 = sim_node()
FIVE = runs_on(NODE_T4, [[0], [0], [1], [2], [3]])  # 5 pods of one GPU on 4 time-sliced GPUs, held together


def over(runs: list[sh.Run], physical: int = 4, node_uuids: frozenset[str] | None = uuids(NODE_T4)) -> Any:
    return sh.evaluate_oversubscription_runs("t4-0", runs, physical=physical, node_uuids=node_uuids, replicas=4,
                                             strategy="time-slicing")


def fifth(seen: Sighting | Callable[[Sighting], Sighting]) -> list[sh.Run]:
    """FIVE with the third pod's sighting replaced (or edited)."""
    third = FIVE[2]
    return [*FIVE[:2], replace(third, seen=seen(third.seen) if callable(seen) else seen), *FIVE[3:]]


def refused(**changes: Any) -> PodOutcome:
    return replace(REFUSED, **changes)


def rejects(outcome: PodOutcome | None, f: sh.SharingFacts = A100) -> Any:
    return sh.evaluate_rejects_multi_replica_request(f, outcome)


CASES: dict[str, Callable[[], Any]] = {
    # what the node says
    "facts: time-sliced t4": lambda: described(T4),
    "facts: MPS a100": lambda: described(A100),
    "facts: renamed": lambda: described(RENAMED),
    "facts: not shared": lambda: described(UNSHARED),
    "facts: both resources": lambda: described(t4(capacity={"nvidia.com/gpu": 16, "nvidia.com/gpu.shared": 16})),
    "facts: no shared resource": lambda: described(t4(capacity={}, allocatable={})),
    "facts: MPS with one replica": lambda: described(a100(replicas=1)),
    "facts: MPS, replicas absent": lambda: described(a100(replicas=None)),
    "facts: MPS, too few allocatable for two": lambda: described(a100(allocatable={"nvidia.com/gpu": 1})),
    "facts: MPS, none allocatable": lambda: described(a100(allocatable={})),
    "facts: MPS, two resources": lambda: described(a100(capacity={"nvidia.com/gpu": 32, "nvidia.com/gpu.shared": 1})),
    "facts: replicas without a strategy": lambda: described(t4(strategy=None)),
    "facts: strategy none with 2 replicas": lambda: described(t4(strategy="none", replicas=2)),
    "parse: labels and resources": lambda: parsed({"nvidia.com/gpu.sharing-strategy": "time-slicing",
                                                   "nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.count": "4",
                                                   "nvidia.com/gpu.product": "Tesla-T4-SHARED"}),
    "parse: replicas not a number": lambda: parsed({"nvidia.com/gpu.replicas": "four", "nvidia.com/gpu.count": "x"}),
    "parse: padded numbers": lambda: parsed({"nvidia.com/gpu.replicas": " 4 ", "nvidia.com/gpu.count": "4 "}),
    "parse: no labels": lambda: parsed({}, {"nvidia.com/gpu.shared": 8}),
    "scope: declared time-slicing on an unshared node": lambda: sh.in_scope(UNSHARED, SharingSpec("time-slicing")),
    "scope: declared 2 replicas": lambda: sh.in_scope(UNSHARED, SharingSpec(replicas=2)),
    "scope: declared none": lambda: sh.in_scope(UNSHARED, SharingSpec("none", 1)),
    "scope: declared 1 replica": lambda: sh.in_scope(UNSHARED, SharingSpec(replicas=1)),
    # sharing.replicas-match-config
    "replicas: as labelled": lambda: replicas(T4),
    "replicas: renamed": lambda: replicas(RENAMED),
    "replicas: MPS": lambda: replicas(A100, {LABELLED: 8, PROBED: 8}),
    "replicas: as declared": lambda: replicas(T4, declared=SharingSpec("time-slicing", 4)),
    "replicas: declared strategy only": lambda: replicas(T4, declared=SharingSpec("time-slicing")),
    "replicas: declared another strategy": lambda: replicas(T4, declared=SharingSpec("mps", 4)),
    "replicas: declared other replicas": lambda: replicas(T4, declared=SharingSpec("time-slicing", 8)),
    "replicas: declared shared, not labelled": lambda: replicas(UNSHARED, {LABELLED: 8, PROBED: 8},
                                                                SharingSpec("time-slicing", 2)),
    "replicas: declared shared, plain capacity matches": lambda: replicas(
        replace(UNSHARED, capacity={"nvidia.com/gpu": 16}), {LABELLED: 8}, SharingSpec("time-slicing", 2)),
    "replicas: declared none on an unshared node": lambda: replicas(UNSHARED, {LABELLED: 8},
                                                                    SharingSpec("none")),
    "replicas: not shared": lambda: replicas(UNSHARED),
    "replicas: strategy with one replica": lambda: replicas(t4(replicas=1, **gpus(4, 1))),
    "replicas: strategy without replicas": lambda: replicas(t4(replicas=None, **gpus(4, 1))),
    "replicas: replicas with strategy none": lambda: replicas(t4(strategy="none")),
    "replicas: replicas without a strategy label": lambda: replicas(t4(strategy=None)),
    "replicas: the plugin runs 2 replicas": lambda: replicas(t4(**gpus(4, 2))),
    "replicas: a capacity of no whole number": lambda: replicas(t4(capacity={"nvidia.com/gpu": 14},
                                                                   allocatable={"nvidia.com/gpu": 14})),
    "replicas: both resources": lambda: replicas(t4(capacity={"nvidia.com/gpu": 16, "nvidia.com/gpu.shared": 16})),
    "replicas: no resource": lambda: replicas(t4(capacity={}, allocatable={})),
    "replicas: a resource of 0": lambda: replicas(t4(capacity={"nvidia.com/gpu": 0})),
    "replicas: a lost GPU by the probe": lambda: replicas(t4(**gpus(3)), {LABELLED: 4, PROBED: 3}),
    "replicas: a GPU the label does not count": lambda: replicas(t4(**gpus(4)), {LABELLED: 3, PROBED: 4}),
    "replicas: neither count divides": lambda: replicas(t4(**gpus(5)), {LABELLED: 4, PROBED: 3}),
    "replicas: no count": lambda: replicas(T4, {}),
    "replicas: a count of 0": lambda: replicas(T4, {LABELLED: 0}),
    "replicas: label only": lambda: replicas(T4, {LABELLED: 4}),
    "replicas: two replicas": lambda: replicas(t4(replicas=2, **gpus(4, 2))),
    "replicas: two replicas with strategy none": lambda: replicas(t4(strategy="none", replicas=2, **gpus(4, 2))),
    "replicas: replicas with an empty strategy": lambda: replicas(t4(strategy="")),
    "replicas: one GPU": lambda: replicas(t4(**gpus(1)), {LABELLED: 1}),
    "replicas: one GPU, another capacity": lambda: replicas(t4(**gpus(2)), {LABELLED: 1}),
    "replicas: counts of 0 and 0": lambda: replicas(T4, {LABELLED: 0, PROBED: 0}),
    "replicas: no count, a label problem": lambda: replicas(t4(replicas=1), {}),
    "replicas: one resource of 1 each": lambda: replicas(t4(capacity={"nvidia.com/gpu": 1,
                                                                      "nvidia.com/gpu.shared": 1})),
    "replicas: the other resource at 0": lambda: replicas(t4(capacity={"nvidia.com/gpu": 16,
                                                                       "nvidia.com/gpu.shared": 0})),
    "replicas: one replica labelled, four declared": lambda: replicas(t4(replicas=1), declared=SharingSpec(
        "time-slicing", 4)),
    "replicas: two labelled, four declared": lambda: replicas(t4(replicas=2, **gpus(4, 2)),
                                                              declared=SharingSpec(replicas=4)),
    "replicas: declared mps, no strategy label": lambda: replicas(t4(strategy=None), declared=SharingSpec("mps")),
    "replicas: declared none, no strategy label": lambda: replicas(replace(UNSHARED, strategy=None, replicas=None),
                                                                   {LABELLED: 8}, SharingSpec("none", 2)),
    "replicas: declared one replica, no labels": lambda: replicas(t4(strategy=None, replicas=None, **gpus(4, 1)),
                                                                  declared=SharingSpec("time-slicing", 1)),
    "replicas: declared four, replicas label absent": lambda: replicas(t4(replicas=None),
                                                                       declared=SharingSpec("time-slicing", 4)),
    "replicas: declared nothing": lambda: replicas(T4, declared=SharingSpec()),
    "replicas: declared replicas only": lambda: replicas(T4, declared=SharingSpec(replicas=4)),
    "replicas: declared four, replicas label absent, two advertised": lambda: replicas(
        t4(replicas=None, **gpus(4, 2)), declared=SharingSpec("time-slicing", 4)),
    "replicas: strategy none, replicas absent, declared shared": lambda: replicas(
        replace(UNSHARED, replicas=None), {LABELLED: 8}, SharingSpec("time-slicing", 2)),
    "replicas: several problems at once": lambda: replicas(t4(strategy="mps", replicas=1, **gpus(4, 3)),
                                                           declared=SharingSpec("time-slicing", 4)),
    # sharing.product-label-shared
    "product: carries -SHARED": lambda: sh.evaluate_product_label_shared(T4),
    "product: renamed keeps its name": lambda: sh.evaluate_product_label_shared(RENAMED),
    "product: lacks -SHARED": lambda: sh.evaluate_product_label_shared(t4(product="Tesla-T4")),
    "product: renamed with -SHARED": lambda: sh.evaluate_product_label_shared(replace(RENAMED,
                                                                                     product="Tesla-T4-SHARED")),
    "product: no label": lambda: sh.evaluate_product_label_shared(t4(product=None)),
    "product: an empty label": lambda: sh.evaluate_product_label_shared(t4(product="")),
    "product: both resources": lambda: sh.evaluate_product_label_shared(
        t4(capacity={"nvidia.com/gpu": 16, "nvidia.com/gpu.shared": 16})),
    "product: renamed to another name": lambda: sh.evaluate_product_label_shared(t4(capacity={"example.com/gpu": 16})),
    "product: not shared": lambda: sh.evaluate_product_label_shared(UNSHARED),
    "product: strategy with one replica": lambda: sh.evaluate_product_label_shared(t4(replicas=1)),
    "product: strategy without replicas": lambda: sh.evaluate_product_label_shared(t4(replicas=None)),
    "product: replicas without a strategy": lambda: sh.evaluate_product_label_shared(t4(strategy=None)),
    "product: two replicas": lambda: sh.evaluate_product_label_shared(t4(replicas=2)),
    "product: MPS": lambda: sh.evaluate_product_label_shared(A100),
    # sharing.mps-client-limits
    "limits: held to its share": lambda: limits(CLIENT),
    "limits: memory from CUDA's total": lambda: limits(CLIENT, memory_mib=None),
    "limits: the label's memory over CUDA's": lambda: limits(CLIENT, memory_mib=40960),
    "limits: a pod that left no reason": lambda: limits(Sighting("pod mps-limit-a100-0-0", None, None)),
    "limits: no memory at all": lambda: limits(with_device(CLIENT, total_memory_bytes=None), memory_mib=None),
    "limits: no limit": lambda: limits(alloc(largest_ok_bytes=79 * GIB, smallest_failed_bytes=None)),
    "limits: half again the share": lambda: limits(alloc(largest_ok_bytes=30 * GIB)),
    "limits: at the allowance": lambda: limits(alloc(largest_ok_bytes=int(20 * GIB * sh.MPS_LIMIT_OVER))),
    "limits: a byte over the allowance": lambda: limits(alloc(largest_ok_bytes=int(20 * GIB * sh.MPS_LIMIT_OVER) + 1)),
    "limits: failing below three quarters": lambda: limits(alloc(smallest_failed_bytes=15 * GIB - 1)),
    "limits: failing at three quarters": lambda: limits(alloc(smallest_failed_bytes=15 * GIB)),
    "limits: nothing failed": lambda: limits(alloc(smallest_failed_bytes=None)),
    "limits: cudaMemGetInfo not read": lambda: limits(alloc(free_bytes=None)),
    "limits: cudaMemGetInfo total not read": lambda: limits(alloc(total_bytes=None)),
    "limits: no pipe": lambda: limits(with_env(CLIENT, CUDA_MPS_PIPE_DIRECTORY=None)),
    "limits: no pipe and no limit": lambda: limits(with_env(alloc(largest_ok_bytes=79 * GIB),
                                                            CUDA_MPS_PIPE_DIRECTORY=None)),
    "limits: the client's own limits in its environment": lambda: limits(with_env(
        CLIENT, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="25", CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="0=20G")),
    "limits: labelled 2 replicas": lambda: limits(CLIENT, a100(replicas=2)),
    "limits: labelled 8 replicas": lambda: limits(CLIENT, a100(replicas=8)),
    "limits: allocations failed otherwise": lambda: limits(alloc(ok=False, result=LAUNCH)),
    "limits: allocation not measured": lambda: limits(alloc(absent_reason="not measured: cudaSetDevice returned 46")),
    "limits: a probe without --measure-alloc": lambda: limits(with_device(CLIENT, largest_alloc=None)),
    "limits: CUDA did not start": lambda: limits(with_report(CLIENT, init=INIT_FAILED)),
    "limits: two devices": lambda: limits(with_report(CLIENT, devices=CLIENT.report.devices * 2)),  # type: ignore
    "limits: no device": lambda: limits(with_report(CLIENT, devices=())),
    "limits: no document": lambda: limits(GONE),
    "limits: a time-sliced node": lambda: limits(CLIENT, T4),
    "limits: one replica": lambda: limits(CLIENT, a100(replicas=1)),
    "limits: no shared resource": lambda: limits(CLIENT, a100(capacity={}, allocatable={})),
    "limits: none allocatable": lambda: limits(CLIENT, a100(allocatable={})),
    # sharing.mps-thread-limit
    "threads: a quarter of the SMs": lambda: threads(CLIENT),
    "threads: at the allowance": lambda: threads(census(37)),
    "threads: one over": lambda: threads(census(38)),
    "threads: every SM": lambda: threads(census(132)),
    "threads: more than every SM": lambda: threads(census(140)),
    "threads: labelled 2 replicas": lambda: threads(census(73), a100(replicas=2)),
    "threads: labelled 2 replicas, one over": lambda: threads(census(74), a100(replicas=2)),
    "threads: a small GPU": lambda: threads(census(3, multiprocessors=3)),
    "threads: a GPU of 10 SMs at 2 replicas": lambda: threads(census(8, multiprocessors=10), a100(replicas=2)),
    "threads: a GPU of 40 SMs at 2 replicas": lambda: threads(census(23, multiprocessors=40), a100(replicas=2)),
    "threads: the multiprocessor count unknown": lambda: threads(census(33, multiprocessors=None)),
    "threads: the multiprocessor count 0": lambda: threads(census(33, multiprocessors=0)),
    "threads: the census kernel failed": lambda: threads(census(0, ok=False, result=LAUNCH)),
    "threads: no distinct count": lambda: threads(with_device(CLIENT, sm_occupancy=replace(
        CLIENT.report.devices[0].sm_occupancy, distinct_sms=None))),  # type: ignore[union-attr]
    "threads: no kernel time": lambda: threads(census(33, kernel_ms=None)),
    "threads: not measured": lambda: threads(census(0, ok=False, absent_reason="not measured: cudaSetDevice 46")),
    "threads: a probe without the census": lambda: threads(with_device(CLIENT, sm_occupancy=None)),
    "threads: the client's own percentage": lambda: threads(with_env(CLIENT, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="10")),
    "threads: no pipe": lambda: threads(with_env(CLIENT, CUDA_MPS_PIPE_DIRECTORY=None)),
    "threads: CUDA did not start": lambda: threads(with_report(CLIENT, init=INIT_FAILED)),
    "threads: two devices": lambda: threads(with_report(CLIENT, devices=CLIENT.report.devices * 2)),  # type: ignore
    "threads: no document": lambda: threads(GONE),
    "threads: a pod that left no reason": lambda: threads(Sighting("pod mps-limit-a100-0-0", None, None)),
    "threads: a time-sliced node": lambda: threads(CLIENT, T4),
    "threads: no shared resource": lambda: threads(CLIENT, a100(capacity={}, allocatable={})),
    # sharing.oversubscription-runs' failures (their overlap: tests/test_mutants_concurrency.py)
    "over: no pod planned": lambda: over([]),
    "over: five on four": lambda: over(FIVE),
    "over: two GPUs shared": lambda: over(runs_on(NODE_T4, [[0], [0], [1], [1], [2]])),
    "over: the node's GPUs unknown": lambda: over(FIVE, node_uuids=None),
    "over: a GPU the node does not have": lambda: over(FIVE, node_uuids=frozenset(uuids(NODE_T4) - {
        NODE_T4.gpus[3].uuid, NODE_T4.gpus[2].uuid})),
    "over: more distinct GPUs than physical": lambda: over(FIVE, physical=3),
    "over: one distinct GPU too many, pairs enough": lambda: over(runs_on(NODE_T4, [[0], [0], [0], [1], [2]]),
                                                                 physical=2),
    "over: a pod that never ran": lambda: over(fifth(Sighting("pod share-t4-0-2", None, "pod share-t4-0-2 "
                                                               "produced no probe output (Pending)"))),
    "over: a pod without a reason": lambda: over(fifth(Sighting("pod share-t4-0-2", None, None))),
    "over: CUDA did not start": lambda: over(fifth(lambda s: with_report(s, init=INIT_FAILED))),
    "over: a pod sees two GPUs": lambda: over(runs_on(NODE_T4, [[0], [0], [1, 2], [2], [3]])),
    "over: a pod sees none": lambda: over(fifth(lambda s: with_report(s, devices=()))),
    "over: a pod sees two GPUs whose kernels failed": lambda: over(fifth(lambda s: with_report(s, devices=tuple(
        replace(s.report.devices[0], index=i, uuid=NODE_T4.gpus[i].uuid, vector_add_ok=False, vector_add=LAUNCH)
        for i in (2, 3))))),  # type: ignore[union-attr]
    "over: a kernel failed": lambda: over(fifth(lambda s: with_device(s, vector_add_ok=False, vector_add=LAUNCH))),
    "over: a device without a UUID": lambda: over(fifth(lambda s: with_device(s, uuid=None)), node_uuids=None),
    # the oversubscription plan and the pods' names
    "plan: time-sliced": lambda: sh.oversubscription_plan(T4, 4),
    "plan: not shared": lambda: sh.oversubscription_plan(UNSHARED, 8),
    "plan: one replica labelled": lambda: sh.oversubscription_plan(t4(replicas=1), 4),
    "plan: two replicas": lambda: sh.oversubscription_plan(t4(replicas=2, **gpus(4, 2)), 4),
    "plan: replicas without a strategy": lambda: sh.oversubscription_plan(t4(strategy=None), 4),
    "plan: no shared resource": lambda: sh.oversubscription_plan(t4(capacity={"nvidia.com/gpu": 16,
                                                                             "nvidia.com/gpu.shared": 16}), 4),
    "plan: physical count unknown": lambda: sh.oversubscription_plan(T4, None),
    "plan: physical count 0": lambda: sh.oversubscription_plan(T4, 0),
    "plan: one physical GPU": lambda: sh.oversubscription_plan(t4(**gpus(1)), 1),
    "plan: none allocatable": lambda: sh.oversubscription_plan(t4(allocatable={}), 4),
    "plan: exactly enough allocatable": lambda: sh.oversubscription_plan(t4(allocatable={"nvidia.com/gpu": 5}), 4),
    "plan: one short": lambda: sh.oversubscription_plan(t4(allocatable={"nvidia.com/gpu": 4}), 4),
    "plan: renamed": lambda: sh.oversubscription_plan(RENAMED, 4),
    "names: short": lambda: [sh.pod_name("t4-0", 3), sh.pod_name("t4-0", 0, "mps-limit")],
    "names: 253 characters": lambda: sh.pod_name("n" * 245, 3),
    "names: 254 characters": lambda: sh.pod_name("n" * 246, 3),
    "names: cut at dots": lambda: sh.pod_name("a" * 229 + "X" + "." * 40, 7),
    "names: cut at dashes": lambda: sh.pod_name("a" * 229 + "X" + "-" * 40, 12),
    "sm bound: 132 at 4": lambda: sh.mps_sm_bound(132, 4),
    "sm bound: 132 at 3": lambda: sh.mps_sm_bound(132, 3),
    "sm bound: 132 at 16": lambda: sh.mps_sm_bound(132, 16),
    "sm bound: 200 at 2": lambda: sh.mps_sm_bound(200, 2),
    "sm bound: 7 at 2": lambda: sh.mps_sm_bound(7, 2),
    "sm bound: 1000 at 1": lambda: sh.mps_sm_bound(1000, 1),
    # sharing.rejects-multi-replica-request
    "rejects: refused at admission": lambda: rejects(REFUSED),
    "rejects: refused after being scheduled": lambda: rejects(refused(events=(replace(
        REFUSED.events[0], reason="Scheduled", message="Successfully assigned ns/mps-two-a100-0-0 to a100-0"),)
        + REFUSED.events)),
    "rejects: no message, no refusal": lambda: rejects(refused(events=(), message=None)),
    "rejects: refused, renamed resource": lambda: rejects(REFUSED, a100(capacity={"nvidia.com/gpu.shared": 32},
                                                                         allocatable={"nvidia.com/gpu.shared": 32})),
    "rejects: the refusal in the pod's message only": lambda: rejects(refused(events=())),
    "rejects: the refusal in an event only": lambda: rejects(refused(message="Pod was rejected")),
    "rejects: refusal text, pod Running": lambda: rejects(refused(phase="Running")),
    "rejects: refusal text, pod Succeeded": lambda: rejects(refused(phase="Succeeded")),
    "rejects: refusal text, pod Pending": lambda: rejects(refused(phase="Pending")),
    "rejects: refusal text, pod Unknown": lambda: rejects(refused(phase="Unknown")),
    "rejects: admitted and ran": lambda: rejects(pod_outcome("mps-two-a100-0-0", 0, "{}")),
    "rejects: Failed after its container started": lambda: rejects(replace(
        pod_outcome("mps-two-a100-0-0", 1, "{}"), events=REFUSED.events)),
    "rejects: Failed for another reason": lambda: rejects(refused(events=(), message="OutOfnvidia.com/gpu",
                                                                  reason="OutOfnvidia.com/gpu")),
    "rejects: unschedulable": lambda: rejects(refused(events=(), message=None, phase="Failed", unschedulable=True)),
    "rejects: Pending without a word": lambda: rejects(refused(events=(), message=None, reason=None,
                                                               phase="Pending")),
    "rejects: not launched": lambda: rejects(None),
    "rejects: a time-sliced node": lambda: rejects(REFUSED, T4),
    "rejects: one allocatable replica": lambda: rejects(REFUSED, a100(allocatable={"nvidia.com/gpu": 1})),
    "rejects: two allocatable replicas": lambda: rejects(REFUSED, a100(allocatable={"nvidia.com/gpu": 2})),
}


@pytest.mark.parametrize("case", CASES)
def test_the_verdict_is_the_recorded_one(case: str) -> None:
    check_recording("sharing", case, lambda: recorded(CASES[case]()))


def recorded(value: Any) -> Any:
    """A verdict whole (its NOT TESTED kind, what a PASS did not judge, its findings too), anything else as is."""
    return {**whole(value), "causes": sorted(value.causes)} if isinstance(value, Verdict) else value
