"""Sharing checks as pure decisions, fed with what a simulated node publishes (GFD's labels, the
device plugin's capacity) and what the simulated cuda-probe reports in each oversubscription pod:
a time-sliced node passes every check, and the timeslice-replicas-wrong fault fails the check the
catalog names for it, with a message that names the node, the capacity and the labelled replicas."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from gpuconf.checks.isolation import Sighting, sighting
from gpuconf.checks.sharing import (
    MEASURE_ALLOC_ENV,
    PLUGIN_REFUSAL,
    Run,
    SharingFacts,
    evaluate_mps_client_limits,
    evaluate_mps_thread_limit,
    evaluate_oversubscription_runs,
    evaluate_product_label_shared,
    evaluate_rejects_multi_replica_request,
    evaluate_replicas_match_config,
    mps_plan,
    mps_sm_bound,
    oversubscription_plan,
    pod_name,
    sharing_facts,
)
from gpuconf.cluster.outcomes import PodOutcome, make_outcome
from gpuconf.compat.versions import parse_cuda
from gpuconf.expect import SharingSpec
from gpuconf.sim.agent_model import AdmissionError, DeviceBook, as_visible, plugin_env
from gpuconf.sim.emulate import Visible, cuda_probe_run
from gpuconf.sim.node_facts import node_labels, node_resources
from gpuconf.sim.profile import SimNode, expand, fault_catalog, load_profile, with_faults
from gpuconf.verdict import Outcome, Verdict, checks

NODE = "t4-0"
SHARING_CHECKS = {"sharing.replicas-match-config", "sharing.oversubscription-runs", "sharing.product-label-shared",
                  "sharing.mps-client-limits", "sharing.mps-thread-limit", "sharing.rejects-multi-replica-request"}
LABELLED = "label nvidia.com/gpu.count"
PROBED = "whole-node probe (distinct UUIDs)"


def sim_node(fault: str | None = None, profile: str = "t4-timeslicing", node: str = NODE) -> SimNode:
    p = load_profile(profile)
    if fault is not None:
        p = with_faults(p, [{"id": fault, "pool": node.rsplit("-", 1)[0], "node": 0}])
    return expand(p).node(node)


def facts_of(n: SimNode) -> SharingFacts:
    capacity, allocatable = node_resources(n)
    return sharing_facts(n.name, node_labels(n), {k: int(v) for k, v in capacity.items()},
                         {k: int(v) for k, v in allocatable.items()})


def renamed(n: SimNode) -> SimNode:
    """The node with the device plugin's renameByDefault: true."""
    plugin = n.device_plugin
    pool_plugin = n.pool.device_plugin
    return replace(n, device_plugin=replace(plugin, sharing=replace(plugin.sharing, rename_by_default=True)),
                   pool=replace(n.pool, device_plugin=replace(pool_plugin, sharing=replace(
                       pool_plugin.sharing, rename_by_default=True))))


def both_views(n: SimNode) -> dict[str, int]:
    return {LABELLED: len(n.gpus), PROBED: len(n.gpus)}


# -------------------------------------------------------------------------------------------------
# The catalog


def test_the_sharing_checks_are_in_the_catalog_and_the_fault_names_the_replicas_check() -> None:
    assert SHARING_CHECKS <= set(checks())
    assert {checks()[c].suite for c in SHARING_CHECKS} == {"suites/test_sharing.py"}
    fault = fault_catalog()["timeslice-replicas-wrong"]
    assert (fault.check, fault.severity) == ("sharing.replicas-match-config", "degraded")
    assert checks()["sharing.replicas-match-config"].severity == "degraded"


# -------------------------------------------------------------------------------------------------
# sharing.replicas-match-config


def test_a_time_sliced_node_advertises_its_gpus_times_the_labelled_replicas() -> None:
    n = sim_node()
    v = evaluate_replicas_match_config(facts_of(n), physical=both_views(n))
    assert v.outcome is Outcome.PASS, v.message()
    assert v.summary == "nvidia.com/gpu 16 = 4 GPUs x 4 time-slicing replicas, as GFD labels it"


def test_a_plugin_advertising_other_replicas_than_labelled_is_degraded_naming_both_counts() -> None:
    n = sim_node("timeslice-replicas-wrong")
    v = evaluate_replicas_match_config(facts_of(n), physical=both_views(n))
    assert v.outcome is Outcome.DEGRADED and v.node == NODE
    assert v.summary == ("the device plugin advertises 32 nvidia.com/gpu on 4 GPUs, 8 replicas per GPU, but GFD labels "
                         "nvidia.com/gpu.replicas=4 (the plugin runs another sharing config than the one labelled)")
    assert v.expected == "nvidia.com/gpu 16 (4 GPUs x 4 replicas)"
    assert v.observed == "nvidia.com/gpu 32 (label nvidia.com/gpu.count: 4)"
    assert "sharing.replicas-match-config on t4-0" in v.message() and "remediation:" in v.message()


def test_the_fault_stays_on_its_node() -> None:
    other = sim_node("timeslice-replicas-wrong", node="t4-1")
    assert evaluate_replicas_match_config(facts_of(other), physical=both_views(other)).outcome is Outcome.PASS


def test_the_expect_pools_declaration_must_match_the_labels() -> None:
    n = sim_node()
    ok = evaluate_replicas_match_config(facts_of(n), physical=both_views(n),
                                        declared=SharingSpec("time-slicing", 4), pool="t4")
    assert ok.outcome is Outcome.PASS and "as --expect pool t4 declares" in ok.summary
    v = evaluate_replicas_match_config(facts_of(n), physical=both_views(n), declared=SharingSpec("time-slicing", 8),
                                       pool="t4")
    assert v.outcome is Outcome.DEGRADED
    assert v.summary == "--expect pool t4 declares 8 replicas per GPU but GFD labels 4"
    mps = evaluate_replicas_match_config(facts_of(n), physical=both_views(n), declared=SharingSpec("mps"), pool="t4")
    assert mps.summary == "--expect pool t4 declares sharing strategy mps but GFD labels time-slicing"


def test_a_pool_declared_shared_on_a_node_that_is_not_is_degraded() -> None:
    n = sim_node(profile="healthy-h100", node="h100-0")
    v = evaluate_replicas_match_config(facts_of(n), physical={LABELLED: 8}, declared=SharingSpec("time-slicing", 2),
                                       pool="h100")
    assert v.outcome is Outcome.DEGRADED
    assert v.summary == "--expect pool h100 declares sharing strategy time-slicing but GFD labels none"
    assert "nvidia.com/gpu 8" in " ".join(v.evidence)


def test_a_node_that_does_not_share_is_not_tested_with_its_labels() -> None:
    n = sim_node(profile="healthy-h100", node="h100-0")
    v = evaluate_replicas_match_config(facts_of(n), physical={LABELLED: 8})
    assert v.outcome is Outcome.NOT_TESTED
    assert v.summary == ("h100-0 does not share its GPUs (nvidia.com/gpu.sharing-strategy=none, "
                         "nvidia.com/gpu.replicas=1)")


def test_a_lost_gpu_is_the_gpu_counts_finding_not_a_replica_problem() -> None:
    # Three GPUs enumerate (12 = 3 x 4) while the label still says 4: the probe's view explains it.
    f = replace(facts_of(sim_node()), capacity={"nvidia.com/gpu": 12}, allocatable={"nvidia.com/gpu": 12})
    v = evaluate_replicas_match_config(f, physical={LABELLED: 4, PROBED: 3})
    assert v.outcome is Outcome.PASS
    # the pass names the count the capacity divides into, not the first view's
    assert v.summary == "nvidia.com/gpu 12 = 3 GPUs x 4 time-slicing replicas, as GFD labels it"


def test_a_node_counted_with_no_gpu_is_not_passed_on_zero_gpus() -> None:
    """A label or probe that counts 0 GPUs divides nothing: NOT TESTED naming the counts, never
    "16 = 0 GPUs x 4"."""
    f = facts_of(sim_node())
    v = evaluate_replicas_match_config(f, physical={LABELLED: 0})
    assert v.outcome is Outcome.NOT_TESTED
    assert v.summary == ("the number of physical GPUs on t4-0 is unknown (label nvidia.com/gpu.count: 0), so its "
                         "capacity cannot be divided into replicas")
    assert evaluate_replicas_match_config(f, physical={LABELLED: 0, PROBED: 4}).summary == (
        "nvidia.com/gpu 16 = 4 GPUs x 4 time-slicing replicas, as GFD labels it")


def test_a_capacity_that_is_no_whole_number_of_replicas_is_degraded() -> None:
    f = replace(facts_of(sim_node()), capacity={"nvidia.com/gpu": 14}, allocatable={"nvidia.com/gpu": 14})
    v = evaluate_replicas_match_config(f, physical={LABELLED: 4})
    assert v.outcome is Outcome.DEGRADED
    assert v.summary == ("the device plugin advertises 14 nvidia.com/gpu, not a multiple of the 4 GPUs: it matches no "
                         "whole number of replicas (labelled 4)")


def test_labels_that_contradict_each_other_are_degraded() -> None:
    f = replace(facts_of(sim_node()), replicas=1)
    v = evaluate_replicas_match_config(f, physical={LABELLED: 4})
    assert v.outcome is Outcome.DEGRADED
    assert v.summary == "GFD labels sharing strategy time-slicing with nvidia.com/gpu.replicas=1"


def test_a_gfd_without_the_strategy_label_is_judged_by_its_replicas() -> None:
    # GFD before v0.15 labels replicas only.
    f = replace(facts_of(sim_node()), strategy=None)
    v = evaluate_replicas_match_config(f, physical={LABELLED: 4})
    assert v.outcome is Outcome.PASS and v.summary == "nvidia.com/gpu 16 = 4 GPUs x 4 shared replicas, as GFD labels it"
    none = evaluate_replicas_match_config(replace(f, strategy="none"), physical={LABELLED: 4})
    assert none.outcome is Outcome.DEGRADED
    assert none.summary == "GFD labels 4 replicas with sharing strategy none"


def test_without_a_physical_gpu_count_the_capacity_is_not_tested() -> None:
    v = evaluate_replicas_match_config(replace(facts_of(sim_node()), gpu_count=None), physical={})
    assert v.outcome is Outcome.NOT_TESTED and "cannot be divided into replicas" in v.summary


def test_renamed_shared_resources_are_counted_under_their_new_name() -> None:
    n = renamed(sim_node())
    f = facts_of(n)
    assert f.capacity == {"nvidia.com/gpu.shared": 16} and f.resource == "nvidia.com/gpu.shared"
    v = evaluate_replicas_match_config(f, physical={LABELLED: 4})
    assert v.outcome is Outcome.PASS and v.summary.startswith("nvidia.com/gpu.shared 16 = 4 GPUs x 4")


# -------------------------------------------------------------------------------------------------
# sharing.product-label-shared


def test_a_shared_gpu_under_its_own_name_carries_the_shared_suffix() -> None:
    v = evaluate_product_label_shared(facts_of(sim_node()))
    assert v.outcome is Outcome.PASS
    assert v.summary == ("nvidia.com/gpu.product=Tesla-T4-SHARED carries -SHARED (not renamed: the resource is "
                         "nvidia.com/gpu)")


def test_renamed_by_default_keeps_the_plain_product_name() -> None:
    v = evaluate_product_label_shared(facts_of(renamed(sim_node())))
    assert v.outcome is Outcome.PASS and "nvidia.com/gpu.product=Tesla-T4 keeps its plain name" in v.summary


def test_a_shared_gpu_without_the_suffix_is_degraded() -> None:
    f = replace(facts_of(sim_node()), product="Tesla-T4")
    v = evaluate_product_label_shared(f)
    assert v.outcome is Outcome.DEGRADED and v.node == NODE
    assert v.summary == ("nvidia.com/gpu.product=Tesla-T4 lacks the -SHARED suffix although nvidia.com/gpu is shared "
                         "4 ways (time-slicing) under its own name")
    assert v.expected == "nvidia.com/gpu.product=Tesla-T4-SHARED"


def test_a_renamed_resource_with_the_suffix_is_degraded() -> None:
    f = replace(facts_of(renamed(sim_node())), product="Tesla-T4-SHARED")
    v = evaluate_product_label_shared(f)
    assert v.outcome is Outcome.DEGRADED and "carries -SHARED although the device plugin renamed" in v.summary


def test_a_resource_renamed_to_another_name_is_not_tested_with_the_reason() -> None:
    f = replace(facts_of(sim_node()), capacity={}, allocatable={})
    v = evaluate_product_label_shared(f)
    assert v.outcome is Outcome.NOT_TESTED
    assert "depends on the device plugin's rename setting, which the cluster does not expose" in v.summary


def test_the_product_check_skips_a_node_that_does_not_share() -> None:
    v = evaluate_product_label_shared(facts_of(sim_node(profile="healthy-h100", node="h100-0")))
    assert v.outcome is Outcome.NOT_TESTED and "does not share its GPUs" in v.summary


# -------------------------------------------------------------------------------------------------
# sharing.oversubscription-runs


def pod_outcome(name: str, code: int, out: str, *, times: tuple[str, str] | None = None) -> PodOutcome:
    scheduled, finished = times or ("2026-11-29T00:00:00Z", "2026-11-29T00:00:05Z")
    statuses = [{"name": "probe", "state": {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else
                                                           "Error", "startedAt": scheduled, "finishedAt": finished}}}]
    pod = {"metadata": {"name": name}, "spec": {"nodeName": NODE, "containers": [{"name": "probe"}]},
           "status": {"phase": "Succeeded" if code == 0 else "Failed", "containerStatuses": statuses,
                      "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled}]}}
    return make_outcome(pod, [], logs={"probe": out}, missing_logs={})


def probe(n: SimNode, gpus: Sequence[int]) -> tuple[int, str]:
    visible = [Visible(n.gpus[i]) for i in gpus]
    return cuda_probe_run(n, visible=visible, image_cuda=parse_cuda("13.0.2"),
                          env={"NVIDIA_VISIBLE_DEVICES": ",".join(v.gpu.uuid for v in visible)}, compat=True,
                          started_at="2026-11-29T00:00:00.000Z", hostname=n.name)


def runs_on(n: SimNode, allocation: Sequence[Sequence[int]]) -> list[Run]:
    """One pod per allocation (GPU indices), as the device plugin's preferred allocation makes them."""
    out = []
    for i, gpus in enumerate(allocation):
        code, text = probe(n, gpus)
        out.append(Run(sighting(pod_outcome(pod_name(n.name, i), code, text)), (0.0, 5.0)))
    return out


def uuids(n: SimNode) -> frozenset[str]:
    return frozenset(g.uuid for g in n.gpus)


def oversubscribe(n: SimNode, runs: Sequence[Run]) -> Verdict:
    return evaluate_oversubscription_runs(n.name, runs, physical=len(n.gpus), node_uuids=uuids(n), replicas=4,
                                          strategy="time-slicing")


def test_the_plan_is_the_nodes_gpus_plus_one_on_a_shared_node_only() -> None:
    assert oversubscription_plan(facts_of(sim_node()), 4) == (5, None)
    count, reason = oversubscription_plan(facts_of(sim_node(profile="healthy-h100", node="h100-0")), 8)
    assert count == 0 and reason is not None and "does not share its GPUs" in reason
    tight = replace(facts_of(sim_node()), allocatable={"nvidia.com/gpu": 4})
    assert oversubscription_plan(tight, 4) == (0, "t4-0 has 4 allocatable nvidia.com/gpu for 4 GPUs: not enough to "
                                               "run 5 pods at once (sharing.replicas-match-config says why)")


def test_pod_names_stay_valid_and_unique_for_long_node_names() -> None:
    long = "n" * 260
    names = {pod_name(long, i) for i in range(5)}
    assert len(names) == 5 and all(len(x) <= 253 for x in names)
    assert pod_name("t4-0", 3) == "share-t4-0-3"


def test_five_pods_on_four_time_sliced_gpus_run_and_share_one() -> None:
    n = sim_node()
    v = oversubscribe(n, runs_on(n, [[0], [1], [2], [3], [0]]))
    assert v.outcome is Outcome.PASS, v.message()
    assert v.summary == (f"5 pods on 4 GPUs (time-slicing, 4 replicas) held their GPUs at the same time (their pod "
                         "times overlap); each verified its kernel on one of the node's GPUs; shared: "
                         f"{n.gpus[0].uuid} x2")


def test_a_pod_that_never_ran_fails_with_its_reason() -> None:
    n = sim_node()
    runs = runs_on(n, [[0], [1], [2], [3]])
    pending = Sighting("pod share-t4-0-4", None, "pod share-t4-0-4 produced no probe output (Pending "
                       "Unschedulable 0/1 nodes are available: 1 Insufficient nvidia.com/gpu.)")
    v = oversubscribe(n, [*runs, Run(pending)])
    assert v.outcome is Outcome.FAIL
    assert v.summary.startswith("5 pods of one GPU each on 4 GPUs: pod share-t4-0-4 produced no probe output (Pending")


def test_a_pod_seeing_two_gpus_or_a_foreign_one_fails() -> None:
    n = sim_node()
    two = oversubscribe(n, runs_on(n, [[0], [1], [2], [3], [0, 1]]))
    assert two.outcome is Outcome.FAIL
    assert two.summary == "pod share-t4-0-4 asked for one shared GPU and CUDA sees 2"
    other = sim_node(node="t4-1")
    runs = [*runs_on(n, [[0], [1], [2], [3]]), runs_on(other, [[], [], [], [], [0]])[4]]
    foreign = oversubscribe(n, runs)
    assert foreign.outcome is Outcome.FAIL
    assert foreign.summary == f"pods on t4-0 see GPUs the node does not have: {other.gpus[0].uuid}"


def test_a_failed_kernel_in_a_sharing_pod_fails_naming_the_pod_and_gpu() -> None:
    n = sim_node()
    runs = runs_on(n, [[0], [1], [2], [3]])
    code, text = probe(n, [0])
    doc = json.loads(text)
    doc["exit_code"], doc["exit_reason"] = 5, "a device failed its vector-add kernel or its verification"
    doc["devices"][0]["vector_add"].update(ok=False, verified=False, mismatches=12)
    doc["devices"][0]["vector_add"]["result"].update(code=700, name="cudaErrorIllegalAddress",
                                                     message="an illegal memory access was encountered")
    bad = Run(sighting(pod_outcome("share-t4-0-4", 5, json.dumps(doc))), (0.0, 5.0))
    v = oversubscribe(n, [*runs, bad])
    assert v.outcome is Outcome.FAIL
    assert v.summary.startswith(f"the vector-add kernel failed in pod share-t4-0-4 on {n.gpus[0].uuid} while 5 pods "
                                "shared 4 GPUs: cudaErrorIllegalAddress (700)")


def test_pods_that_never_overlapped_did_not_exercise_sharing() -> None:
    n = sim_node()
    runs = runs_on(n, [[0], [1], [2], [3], [0]])
    late = replace(runs[4], window=(10.0, 12.0))
    v = oversubscribe(n, [*runs[:4], late])
    assert v.outcome is Outcome.NOT_TESTED and "did not all hold their GPUs at the same time" in v.summary
    # launched at once is not held at once: without a time (and no rendezvous) sharing is not shown
    unknown = oversubscribe(n, [*runs[:4], replace(runs[4], window=None)])
    assert (unknown.outcome, unknown.kind) == (Outcome.NOT_TESTED, "could-not-run")
    assert unknown.summary == ("the 5 pods ran and verified their kernels, but nothing shows they held their GPUs at "
                               "the same time (their probes ran no rendezvous and their pod times are missing)")


@pytest.mark.parametrize("allocation", [[[0], [0], [0], [0], [0]], [[1], [2], [1], [2], [3]]],
                         ids=["all on one GPU", "spread unevenly"])
def test_any_packing_on_the_nodes_gpus_is_sharing(allocation: list[list[int]]) -> None:
    n = sim_node()
    assert oversubscribe(n, runs_on(n, allocation)).outcome is Outcome.PASS


# -------------------------------------------------------------------------------------------------
# sharing.mps-client-limits and sharing.rejects-multi-replica-request (a100-mps: 8 x A100 80GB, 4 replicas)

MPS_NODE = "a100-0"
A100_MIB = 81920


def mps_node(fault: str | None = None) -> SimNode:
    return sim_node(fault, profile="a100-mps", node=MPS_NODE)


def mps_client(n: SimNode, *, env: dict[str, str] | None = None, pipe: bool = True) -> Sighting:
    """The one-replica pod's probe, with what the simulated device plugin allocates and sets."""
    got = DeviceBook(n).allocate("ns/mps", [("probe", False, {"nvidia.com/gpu": "1"})])["probe"]
    penv = plugin_env(got, n.device_plugin.sharing)
    if not pipe:
        penv.pop("CUDA_MPS_PIPE_DIRECTORY")
    code, text = cuda_probe_run(n, visible=as_visible(got), image_cuda=parse_cuda("13.0.2"),
                                env={**penv, **(MEASURE_ALLOC_ENV if env is None else env)}, compat=True,
                                started_at="2026-11-29T00:00:00.000Z", hostname=n.name)
    return sighting(pod_outcome("mps-limit-a100-0-0", code, text))


def test_the_mps_checks_and_their_fault_are_in_the_catalog() -> None:
    fault = fault_catalog()["mps-memory-limit-unset"]
    assert (fault.check, fault.severity, fault.example_profile) == ("sharing.mps-client-limits", "fail", "a100-mps")
    assert checks()["sharing.mps-client-limits"].severity == "fail"


def test_an_mps_client_held_to_memory_over_replicas_passes() -> None:
    n = mps_node()
    seen = mps_client(n)
    assert seen.report is not None and seen.report.env["CUDA_MPS_PIPE_DIRECTORY"] == "/mps/nvidia.com/gpu/pipe"
    v = evaluate_mps_client_limits(facts_of(n), seen, memory_mib=A100_MIB)
    assert v.outcome is Outcome.PASS, v.message()
    assert v.summary.startswith("pod mps-limit-a100-0-0 is an MPS client (/mps/nvidia.com/gpu/pipe) whose largest "
                                "allocation on GPU-")
    assert "about memory / replicas = 20.00 GiB (its share of the SMs: sharing.mps-thread-limit)" in v.summary


def test_an_mps_client_without_a_memory_limit_fails_naming_the_starvation() -> None:
    n = mps_node("mps-memory-limit-unset")
    v = evaluate_mps_client_limits(facts_of(n), mps_client(n), memory_mib=A100_MIB)
    assert v.outcome is Outcome.FAIL and v.node == MPS_NODE
    assert "allocated 79.38 GiB in one piece, more than memory / replicas = 20.00 GiB: the MPS control daemon " \
        "applies no per-client memory limit, so clients can starve each other" in v.summary
    assert v.expected == ("CUDA_MPS_PIPE_DIRECTORY set and a largest allocation of about 20.00 GiB (memory 80.00 GiB / "
                          "4 replicas): from 15.00 GiB to 21.00 GiB")
    assert any("cudaMemGetInfo free 79.50 GiB of 80.00 GiB (it does not reflect an MPS limit)" in e
               for e in v.evidence)


def test_a_client_without_the_mps_pipe_fails_as_no_client_of_the_daemon() -> None:
    n = mps_node()
    v = evaluate_mps_client_limits(facts_of(n), mps_client(n, pipe=False), memory_mib=A100_MIB)
    assert v.outcome is Outcome.FAIL
    assert v.summary == ("pod mps-limit-a100-0-0 asked one MPS replica on a100-0 but has no CUDA_MPS_PIPE_DIRECTORY: "
                         "it is no client of the device plugin's MPS control daemon, and it allocated 79.38 GiB in one "
                         "piece (memory / replicas is 20.00 GiB): clients can starve each other")


def test_a_limit_far_below_memory_over_replicas_fails() -> None:
    n = mps_node()
    eight = replace(facts_of(n), replicas=2)  # labelled 2, the daemon divides by 4: the 20 GiB limit is half of 40
    v = evaluate_mps_client_limits(eight, mps_client(n), memory_mib=A100_MIB)
    assert v.outcome is Outcome.FAIL
    assert "less than 75% of memory / replicas = 40.00 GiB: the MPS limit is smaller than the labelled replicas" \
        in v.summary


def test_the_mps_limit_check_skips_other_nodes_and_a_probe_that_did_not_measure() -> None:
    t4 = facts_of(sim_node())
    v = evaluate_mps_client_limits(t4, Sighting("pod x", None, "never ran"), memory_mib=15360)
    assert v.outcome is Outcome.NOT_TESTED
    assert v.summary == ("t4-0 does not share its GPUs through MPS (nvidia.com/gpu.sharing-strategy=time-slicing, "
                         "nvidia.com/gpu.replicas=4): per-client limits and the one-replica rule are MPS's")
    n = mps_node()
    unmeasured = evaluate_mps_client_limits(facts_of(n), mps_client(n, env={}), memory_mib=A100_MIB)
    assert unmeasured.outcome is Outcome.NOT_TESTED and "reports no largest allocation" in unmeasured.summary
    gone = evaluate_mps_client_limits(facts_of(n), Sighting("pod x", None, "pod x produced no probe output"),
                                      memory_mib=A100_MIB)
    assert gone.outcome is Outcome.FAIL and gone.summary.startswith("the one-replica MPS pod on a100-0 did not report")


# -------------------------------------------------------------------------------------------------
# sharing.mps-thread-limit (a100-mps: the emulated A100 reports 132 SMs, 4 replicas: 25% = 33 SMs)


def with_census(seen: Sighting, distinct: int, **changes: Any) -> Sighting:
    """The client's probe as if its SM census had seen ``distinct`` SMs (and ``changes``)."""
    assert seen.report is not None
    device = seen.report.devices[0]
    assert device.sm_occupancy is not None
    census = replace(device.sm_occupancy, distinct_sms=distinct, **changes)
    return replace(seen, report=replace(seen.report, devices=(replace(device, sm_occupancy=census),)))


def test_the_thread_check_is_in_the_catalog_as_degraded() -> None:
    c = checks()["sharing.mps-thread-limit"]
    assert (c.severity, c.suite) == ("degraded", "suites/test_sharing.py")
    assert "sharing.mps-thread-limit" in checks()["sharing.mps-client-limits"].requirement


@pytest.mark.parametrize(("sms", "replicas", "bound"), [
    (132, 4, (25, 33, 37)), (108, 4, (25, 27, 30)), (40, 2, (50, 20, 22)), (132, 16, (6, 8, 10)),
    (132, 3, (33, 44, 49)), (132, 2, (50, 66, 73))])
def test_the_sm_bound_is_the_share_plus_whole_tpcs(sms: int, replicas: int, bound: tuple[int, int, int]) -> None:
    assert mps_sm_bound(sms, replicas) == bound


def test_an_mps_client_on_a_quarter_of_the_sms_passes() -> None:
    n = mps_node()
    seen = mps_client(n)
    assert seen.report is not None
    census = seen.report.devices[0].sm_occupancy
    assert census is not None and (census.multiprocessors, census.distinct_sms) == (132, 33)
    v = evaluate_mps_thread_limit(facts_of(n), seen)
    assert v.outcome is Outcome.PASS, v.message()
    assert v.summary.startswith("pod mps-limit-a100-0-0 (one of 4 MPS replicas of GPU-")
    assert v.summary.endswith("ran its kernel on 33 of 132 SMs, within 25% (100 / replicas: 33 SMs, at most 37)")
    assert evaluate_mps_thread_limit(facts_of(n), with_census(seen, 37)).outcome is Outcome.PASS  # whole TPCs


def test_an_mps_client_on_every_sm_is_degraded_naming_the_missing_thread_limit() -> None:
    n = mps_node()
    v = evaluate_mps_thread_limit(facts_of(n), with_census(mps_client(n), 132))
    assert v.outcome is Outcome.DEGRADED and v.node == MPS_NODE
    assert v.summary.endswith("ran its kernel on every one of the GPU's 132 SMs, more than 25% (about 33, at most "
                              "37): the MPS daemon applies no per-client thread limit, so one client's kernels can "
                              "take the SMs of every other replica")
    assert v.expected == "at most 37 distinct SMs: 25% (100 / 4 replicas) of 132 SMs is 33, plus 4 for whole TPCs"
    assert v.observed == "132 distinct SMs of 132"
    just_over = evaluate_mps_thread_limit(facts_of(n), with_census(mps_client(n), 38))
    assert just_over.outcome is Outcome.DEGRADED and "ran its kernel on 38 of the GPU's 132 SMs" in just_over.summary


def test_the_memory_fault_leaves_the_thread_limit_alone() -> None:
    n = mps_node("mps-memory-limit-unset")
    v = evaluate_mps_thread_limit(facts_of(n), mps_client(n))
    assert v.outcome is Outcome.PASS, v.message()


def test_the_thread_check_skips_what_it_cannot_measure() -> None:
    v = evaluate_mps_thread_limit(facts_of(sim_node()), Sighting("pod x", None, "never ran"))
    assert v.outcome is Outcome.NOT_TESTED and "does not share its GPUs through MPS" in v.summary
    n = mps_node()
    f = facts_of(n)
    unmeasured = evaluate_mps_thread_limit(f, mps_client(n, env={}))
    assert unmeasured.outcome is Outcome.NOT_TESTED
    assert unmeasured.summary.startswith("the cuda-probe in pod mps-limit-a100-0-0 reports no SM census")
    gone = evaluate_mps_thread_limit(f, Sighting("pod x", None, "pod x produced no probe output"))
    assert gone.outcome is Outcome.NOT_TESTED and gone.summary == (
        "the one-replica MPS pod on a100-0 did not report (pod x produced no probe output): sharing.mps-client-limits "
        "reports it")
    no_pipe = evaluate_mps_thread_limit(f, mps_client(n, pipe=False))
    assert no_pipe.outcome is Outcome.NOT_TESTED and "has no CUDA_MPS_PIPE_DIRECTORY" in no_pipe.summary
    seen = mps_client(n)
    absent = with_census(seen, 0, ok=False, absent_reason="not measured: cudaSetDevice returned 46")
    v = evaluate_mps_thread_limit(f, absent)
    assert v.outcome is Outcome.NOT_TESTED and v.summary.endswith("not measured: cudaSetDevice returned 46")
    small = evaluate_mps_thread_limit(replace(f, replicas=2), with_census(seen, 132))
    assert small.outcome is Outcome.DEGRADED  # 50%: at most 73 of 132
    v = evaluate_mps_thread_limit(f, with_census(seen, 3, multiprocessors=3))  # 25% of 3 is 1 SM, + 2 is all
    assert v.outcome is Outcome.NOT_TESTED and "cannot be told from one on every SM" in v.summary


def rejected_outcome(n: SimNode, count: int = 2) -> PodOutcome:
    """The two-replica pod as the simulated kubelet leaves it: the device plugin's refusal, or admitted."""
    name = "mps-two-a100-0-0"
    try:
        DeviceBook(n).allocate("ns/two", [("probe", False, {"nvidia.com/gpu": str(count)})])
    except AdmissionError as e:
        pod = {"metadata": {"name": name, "namespace": "ns"}, "spec": {"nodeName": n.name,
                                                                        "containers": [{"name": "probe"}]},
               "status": {"phase": "Failed", "reason": e.reason, "message": f"Pod was rejected: {e.message}"}}
        event = {"type": "Warning", "reason": e.reason, "message": e.message, "count": 1,
                 "involvedObject": {"name": name}, "source": {"component": "kubelet"}}
        return make_outcome(pod, [event], logs={}, missing_logs={"probe": "never started"})
    return pod_outcome(name, 0, "{}")


def test_a_two_replica_mps_request_refused_by_the_plugin_passes() -> None:
    n = mps_node()
    out = rejected_outcome(n)
    assert out.reason == "UnexpectedAdmissionError"
    v = evaluate_rejects_multi_replica_request(facts_of(n), out)
    assert v.outcome is Outcome.PASS, v.message()
    assert v.summary == ("pod mps-two-a100-0-0 asking 2 MPS replicas of nvidia.com/gpu was refused: Allocate failed "
                         "due to rpc error: code = Unknown desc = request for 'nvidia.com/gpu: 2' too large: maximum "
                         "request size for shared resources is 1, which is unexpected")


def test_a_two_replica_mps_request_that_runs_fails() -> None:
    n = mps_node()
    admitted = pod_outcome("mps-two-a100-0-0", 0, "{}")
    v = evaluate_rejects_multi_replica_request(facts_of(n), admitted)
    assert v.outcome is Outcome.DEGRADED and v.node == MPS_NODE
    assert v.summary == ("pod mps-two-a100-0-0 asking 2 MPS replicas of nvidia.com/gpu on a100-0 was admitted and ran: "
                         "the device plugin does not refuse more than one MPS replica per container")
    assert PLUGIN_REFUSAL in (v.expected or "")


def test_the_multi_replica_check_skips_time_slicing_and_needs_replicas() -> None:
    v = evaluate_rejects_multi_replica_request(facts_of(sim_node()), None)
    assert v.outcome is Outcome.NOT_TESTED and "does not share its GPUs through MPS" in v.summary
    tight = replace(facts_of(mps_node()), allocatable={"nvidia.com/gpu": 1})
    assert mps_plan(tight, pods=2) == "a100-0 has 1 allocatable nvidia.com/gpu: not enough for 2 replicas"


def with_alloc(seen: Sighting, **changes: Any) -> Sighting:
    """The client's probe as if its largest-allocation bisection had found ``changes``."""
    assert seen.report is not None
    device = seen.report.devices[0]
    assert device.largest_alloc is not None
    measured = replace(device.largest_alloc, **changes)
    return replace(seen, report=replace(seen.report, devices=(replace(device, largest_alloc=measured),)))


def test_a_client_allocating_more_than_its_share_beyond_the_rounding_fails() -> None:
    """memory / replicas is 20 GiB on a100-0: up to 5 % over it is NVML's memory over CUDA's and the
    plugin's rounding; 30 GiB (1.5 x, a limit set for 2 or 3 replicas instead of 4) is no limit of 4."""
    n = mps_node()
    f, seen = facts_of(n), mps_client(n)
    assert seen.report is not None
    gpu = seen.report.devices[0].uuid
    over = evaluate_mps_client_limits(f, with_alloc(seen, largest_ok_bytes=30 << 30), memory_mib=A100_MIB)
    assert over.outcome is Outcome.FAIL
    assert over.summary == (f"pod mps-limit-a100-0-0 (one of 4 MPS replicas of {gpu}) allocated 30.00 GiB in one "
                            "piece, more than memory / replicas = 20.00 GiB: the MPS control daemon applies no "
                            "per-client memory limit, so clients can starve each other")
    assert over.observed == "CUDA_MPS_PIPE_DIRECTORY=/mps/nvidia.com/gpu/pipe, largest allocation 30.00 GiB"
    edge = int(20 * 2**30 * 1.05)  # 21 GiB: the allowance itself passes, a byte more does not
    assert evaluate_mps_client_limits(f, with_alloc(seen, largest_ok_bytes=edge), memory_mib=A100_MIB).outcome \
        is Outcome.PASS
    assert evaluate_mps_client_limits(f, with_alloc(seen, largest_ok_bytes=edge + 1), memory_mib=A100_MIB).outcome \
        is Outcome.FAIL
    # the lower bound the same way: a failed allocation at 3/4 of the share passes, a byte below does not
    low = 15 << 30
    fine = evaluate_mps_client_limits(f, with_alloc(seen, smallest_failed_bytes=low), memory_mib=A100_MIB)
    assert fine.outcome is Outcome.PASS
    small = evaluate_mps_client_limits(f, with_alloc(seen, smallest_failed_bytes=low - 1), memory_mib=A100_MIB)
    assert small.outcome is Outcome.FAIL and small.summary == (
        f"pod mps-limit-a100-0-0 could not allocate 15.00 GiB on {gpu}, less than 75% of memory / replicas = "
        "20.00 GiB: the MPS limit is smaller than the labelled replicas give")


def test_the_refusal_text_passes_only_with_the_pod_failed_at_admission() -> None:
    """The device plugin's refusal in an event is not a refusal if the pod then ran (a retried
    admission that succeeded) or never left Pending: only a pod that Failed with it passes."""
    n = mps_node()
    refused = rejected_outcome(n)
    ran = replace(refused, phase="Running")
    v = evaluate_rejects_multi_replica_request(facts_of(n), ran)
    assert v.outcome is Outcome.DEGRADED
    assert v.summary == ("pod mps-two-a100-0-0 asking 2 MPS replicas of nvidia.com/gpu on a100-0 was admitted and ran: "
                         "the device plugin does not refuse more than one MPS replica per container")
    assert v.observed == ("Running UnexpectedAdmissionError Pod was rejected: Allocate failed due to rpc error: code = "
                          "Unknown desc = request for 'nvidia.com/gpu: 2' too large: maximum request size for shared "
                          "resources is 1, which is unexpected")
    pending = evaluate_rejects_multi_replica_request(facts_of(n), replace(refused, phase="Pending"))
    assert pending.outcome is Outcome.NOT_TESTED and pending.summary.startswith(
        "pod mps-two-a100-0-0 asking 2 replicas of nvidia.com/gpu did not reach a100-0's kubelet (Pending ")
    assert pending.summary.endswith("): the refusal was not exercised")
    other = evaluate_rejects_multi_replica_request(facts_of(n), replace(refused, phase="Unknown"))
    assert other.outcome is Outcome.DEGRADED and other.summary.startswith(
        "pod mps-two-a100-0-0 asking 2 MPS replicas of nvidia.com/gpu ended Unknown UnexpectedAdmissionError")
    assert other.summary.endswith(", not with the device plugin's refusal")


def test_a_refusal_event_does_not_pass_a_pod_whose_container_ran() -> None:
    """The refusal in an event of an earlier admission attempt, then a container that started (and
    failed): the pod was admitted with two replicas, whatever its events say."""
    n = mps_node()
    ran = replace(pod_outcome("mps-two-a100-0-0", 1, "{}"), events=rejected_outcome(n).events)
    assert ran.phase == "Failed" and ran.containers[0].started is not None
    v = evaluate_rejects_multi_replica_request(facts_of(n), ran)
    assert v.outcome is Outcome.DEGRADED
    assert v.summary == ("pod mps-two-a100-0-0 asking 2 MPS replicas of nvidia.com/gpu on a100-0 was admitted and ran: "
                         "the device plugin does not refuse more than one MPS replica per container")


def test_more_distinct_gpus_than_physical_fails_even_with_enough_sharing_pairs() -> None:
    """Five pods on a node labelled with 2 GPUs that see 3 of its GPUs: three share one (3 pairs, the
    pigeonhole's 5 - 2), yet a third GPU means the count is wrong or a pod got a GPU it should not have."""
    n = sim_node()
    runs = runs_on(n, [[0], [0], [0], [1], [2]])
    v = evaluate_oversubscription_runs(n.name, runs, physical=2, node_uuids=uuids(n), replicas=4,
                                       strategy="time-slicing")
    assert v.outcome is Outcome.FAIL
    assert v.summary == "5 pods on 2 GPUs see 3 distinct GPUs (3 sharing pairs)"
    assert v.expected == "at most 2 distinct GPUs, at least 3 pairs of pods on one GPU"
    assert v.observed == ", ".join([n.gpus[0].uuid] * 3 + [n.gpus[1].uuid, n.gpus[2].uuid])
    # the same pods on the 3 GPUs they see: 3 distinct, 3 pairs >= 5 - 3, a pass
    ok = evaluate_oversubscription_runs(n.name, runs, physical=3, node_uuids=uuids(n), replicas=4,
                                        strategy="time-slicing")
    assert ok.outcome is Outcome.PASS, ok.message()
