"""Isolation checks as pure decisions, fed with what the simulated toolkit would inject into each of
the suite's probe containers: a healthy node passes every check, and the envvar-leak and
visible-devices-all faults fail the checks the catalog names for them, with messages that name the
node and what was seen."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuconf.checks.isolation import (
    GpuView,
    Sighting,
    evaluate_concurrent_pods_disjoint,
    evaluate_envvar_without_request,
    evaluate_no_request_sees_no_gpu,
    evaluate_only_requesting_container,
    evaluate_sees_only_allocated,
    held_together,
    plan_node,
    pod_name,
    sighting,
)
from gpuconf.cluster.outcomes import PodOutcome, make_outcome
from gpuconf.compat.versions import parse_cuda
from gpuconf.probes.cuda import parse_cuda_probe
from gpuconf.sim.agent_model import injected_devices
from gpuconf.sim.emulate import Visible, cuda_probe_run
from gpuconf.sim.profile import SimNode, expand, fault_catalog, load_profile, with_faults
from gpuconf.verdict import Outcome, checks, failed, not_tested, passed

pytest_plugins = ["pytester"]

NODE = "h100-0"
ISOLATION_CHECKS = {"isolation.no-request-sees-no-gpu", "isolation.envvar-without-request-gets-no-gpu",
                    "isolation.sees-only-allocated", "isolation.concurrent-pods-disjoint",
                    "isolation.only-requesting-container-sees-gpu"}


def sim_node(fault: str | None = None, profile: str = "healthy-h100", node: str = NODE) -> SimNode:
    p = load_profile(profile)
    if fault is not None:
        p = with_faults(p, [{"id": fault, "pool": node.rsplit("-", 1)[0], "node": 0}])
    return expand(p).node(node)


def run_probe(n: SimNode, allocated: Sequence[Visible], own_env: Mapping[str, str]) -> tuple[int, str]:
    """The cuda-probe in a container on ``n`` with the nvidia runtime: what the toolkit injects for
    the allocation and the container's own environment (its image, nvidia/cuda, sets
    NVIDIA_VISIBLE_DEVICES=all, which counts when nothing was allocated), as the node agent does."""
    env = {"NVIDIA_VISIBLE_DEVICES": ",".join(v.gpu.uuid for v in allocated) if allocated else "all", **own_env}
    requested = own_env.get("NVIDIA_VISIBLE_DEVICES", None if allocated else "all")
    visible = injected_devices(n, nvidia_runtime=True, allocated=list(allocated), cdi=[], own_env=requested,
                               privileged=False)
    return cuda_probe_run(n, visible=visible, image_cuda=parse_cuda("13.0.2"), env=env, compat=True,
                          started_at="2026-11-29T00:00:00.000Z", hostname=n.name)


def pod_outcome(name: str, runs: Mapping[str, tuple[int, str]], *, phase: str | None = None,
                times: tuple[str, str] | None = None, message: str | None = None,
                events: Sequence[Mapping[str, str]] = ()) -> PodOutcome:
    """A finished pod as a campaign returns it: each container's exit code and output."""
    scheduled, finished = times or ("2026-11-29T00:00:00Z", "2026-11-29T00:00:05Z")
    statuses = [{"name": c, "state": {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                                     "startedAt": scheduled, "finishedAt": finished}}}
                for c, (code, _) in runs.items()]
    pod = {"metadata": {"name": name}, "spec": {"nodeName": NODE, "containers": [{"name": c} for c in runs]},
           "status": {"phase": phase or ("Succeeded" if all(code == 0 for code, _ in runs.values()) else "Failed"),
                      "message": message, "containerStatuses": statuses if runs else [],
                      "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled}]}}
    return make_outcome(pod, events, logs={c: out for c, (_, out) in runs.items()}, missing_logs={})


def observe(n: SimNode) -> dict[str, PodOutcome]:
    """Every pod plan_node plans on ``n``, with disjoint allocations as the device plugin makes them."""
    gpus = [Visible(g) for g in n.gpus]
    allocation = {"one": gpus[0:1], "split": gpus[1:2], "two": gpus[2:4]}
    out = {}
    for planned in plan_node(n.name, len(gpus)):
        runs = {"probe": run_probe(n, allocation.get(planned.role, []), planned.env)}
        if planned.sidecar_gpu_count is not None:
            runs["sidecar"] = run_probe(n, [], planned.env)
        out[planned.role] = pod_outcome(planned.name, runs)
    return out


def verdicts(n: SimNode):
    pods = observe(n)

    def seen(role: str, container: str = "probe") -> Sighting:
        return sighting(pods[role], container)

    return {v.check: v for v in (
        evaluate_no_request_sees_no_gpu(n.name, seen("none")),
        evaluate_envvar_without_request(n.name, seen("envvar")),
        evaluate_sees_only_allocated(n.name, [(1, seen("one")), (2, seen("two"))], allocatable=8),
        evaluate_concurrent_pods_disjoint(n.name, seen("one"), seen("split"), allocatable=8,
                                          together=held_together(pods["one"], pods["split"])),
        evaluate_only_requesting_container(n.name, seen("split"), seen("split", "sidecar")),
    )}


def test_every_isolation_check_is_in_the_catalog_and_the_faults_name_two_of_them():
    assert ISOLATION_CHECKS <= set(checks())
    assert {checks()[c].suite for c in ISOLATION_CHECKS} == {"suites/test_isolation.py"}
    named = {f.id: f.check for f in fault_catalog().values() if f.check in ISOLATION_CHECKS}
    assert named == {"envvar-leak": "isolation.envvar-without-request-gets-no-gpu",
                     "visible-devices-all": "isolation.sees-only-allocated",
                     "pod-traffic-blocked": "isolation.concurrent-pods-disjoint",
                     "gpu-double-allocated": "isolation.concurrent-pods-disjoint"}


def test_a_healthy_node_passes_every_isolation_check_naming_what_it_saw():
    results = verdicts(sim_node())
    bad = {k: v.message() for k, v in results.items() if v.outcome is not Outcome.PASS}
    assert not bad, bad
    assert set(results) == ISOLATION_CHECKS
    assert "sees no GPU (CUDA devices: 0; NVML GPUs: 0; /dev/nvidiaN: 0)" in results[
        "isolation.no-request-sees-no-gpu"].summary
    gpus = sim_node().gpus
    assert f"see different GPUs: {gpus[0].uuid} and {gpus[1].uuid}" in results[
        "isolation.concurrent-pods-disjoint"].summary
    assert f"2: {gpus[2].uuid}, {gpus[3].uuid}" in results["isolation.sees-only-allocated"].summary
    assert gpus[1].uuid in results["isolation.only-requesting-container-sees-gpu"].summary


def test_no_device_is_a_passing_observation_read_from_the_document_not_the_exit_code():
    pods = observe(sim_node())
    none = pods["none"].container("probe")
    assert none.exit_code == 3  # no driver injected: cudaFree(0) 35, a valid document
    report = sighting(pods["none"]).report
    assert report is not None and report.init.code == 35 and GpuView.of(report).views() == {
        "CUDA devices": (), "NVML GPUs": (), "/dev/nvidiaN": ()}


def test_envvar_leak_fails_the_envvar_check_and_everything_that_requests_no_gpu():
    results = verdicts(sim_node("envvar-leak"))
    failing = {k for k, v in results.items() if v.outcome is Outcome.FAIL}
    # The image's own NVIDIA_VISIBLE_DEVICES=all is honoured too, so the plain no-request pod and
    # the sidecar see every GPU as well; pods with an allocation are unaffected.
    assert failing == {"isolation.envvar-without-request-gets-no-gpu", "isolation.no-request-sees-no-gpu",
                       "isolation.only-requesting-container-sees-gpu"}
    v = results["isolation.envvar-without-request-gets-no-gpu"]
    assert v.node == NODE
    assert v.summary.startswith("an unprivileged pod that requests no GPU and sets NVIDIA_VISIBLE_DEVICES=all sees "
                                "8 GPUs: GPU-")
    assert v.summary.endswith("and 5 more") and "CUDA devices: 8" in (v.observed or "")
    assert "accept-nvidia-visible-devices-envvar-when-unprivileged = false" in v.message()
    assert "the container that requests no GPU sees 8 next to one that requests one" in results[
        "isolation.only-requesting-container-sees-gpu"].summary


def test_visible_devices_all_fails_sees_only_allocated_and_concurrent_pods_share_gpus():
    results = verdicts(sim_node("visible-devices-all"))
    assert {k for k, v in results.items() if v.outcome is Outcome.FAIL} == ISOLATION_CHECKS
    v = results["isolation.sees-only-allocated"]
    assert v.node == NODE
    assert v.summary.startswith("a pod requesting 1 GPU sees CUDA devices: 8, NVML GPUs: 8, /dev/nvidiaN: 8: GPU-")
    assert v.expected == "exactly 1 GPU in every view"
    assert results["isolation.concurrent-pods-disjoint"].summary.startswith(
        "two pods each given one GPU at the same time (their pod times overlap) both see GPU-")


def test_the_other_node_of_a_faulty_pool_is_unaffected():
    for fault in ("envvar-leak", "visible-devices-all"):
        p = with_faults(load_profile("healthy-h100"), [{"id": fault, "pool": "h100", "node": 0}])
        results = verdicts(expand(p).node("h100-1"))
        assert all(v.outcome is Outcome.PASS for v in results.values()), fault


def test_a_pod_that_produced_no_document_fails_with_its_reason_and_a_diagnosis():
    event = {"type": "Warning", "reason": "FailedCreatePodSandBox",
             "message": 'Failed to create pod sandbox: runtimeclass.node.k8s.io "nvidia" not found'}
    stuck = pod_outcome("iso-none-h100-0", {}, phase="Pending", events=[event])
    seen = sighting(stuck)
    assert seen.report is None
    v = evaluate_no_request_sees_no_gpu(NODE, seen)
    assert v.outcome is Outcome.FAIL
    assert "pod iso-none-h100-0 produced no probe output (Pending)" in v.summary
    assert "diagnosis: The pod names a RuntimeClass that does not exist" in v.summary


def test_output_that_is_not_a_probe_document_is_a_failure_not_a_pass():
    v = evaluate_envvar_without_request(NODE, sighting(pod_outcome("iso-envvar-h100-0", {"probe": (1, "boom\n")})))
    assert v.outcome is Outcome.FAIL and "could not be observed" in v.summary


def test_a_view_that_could_not_be_read_is_not_taken_for_zero():
    n = sim_node("library-mismatch")
    code, out = run_probe(n, [Visible(n.gpus[0])], {})
    view = GpuView.of(parse_cuda_probe(out, exit_code=code))
    assert view.cuda is None and view.nvml is None and view.dev == ("/dev/nvidia0",)
    assert "CUDA did not initialise" in view.describe() and "NVML did not load" in view.describe()
    seen = Sighting("pod iso-one-h100-0", parse_cuda_probe(out, exit_code=code))
    # /dev/nvidia0 alone is no proof of isolation: not a pass; not a failure either, the unreadable
    # driver stack is driver.nvml-initializes' (one root cause, one failure)
    v = evaluate_sees_only_allocated(NODE, [(1, seen)], allocatable=8)
    assert v.outcome is Outcome.NOT_TESTED
    assert v.summary.startswith("what 1 of 1 pod(s) on h100-0 see could not be read: pod iso-one-h100-0 (requested "
                                "1): CUDA and NVML were both unreadable (CUDA did not initialise: ")
    assert "NVML did not load: nvmlInit_v2: Driver/library version mismatch" in v.summary
    assert v.summary.endswith("and /dev/nvidiaN alone proves nothing")
    code3, out3 = run_probe(n, [Visible(g) for g in n.gpus[:3]], {})  # /dev still counts: 3 nodes for 2 is a leak
    two = Sighting("pod iso-two-h100-0", parse_cuda_probe(out3, exit_code=code3))
    assert evaluate_sees_only_allocated(NODE, [(1, seen), (2, two)], allocatable=8).outcome is Outcome.FAIL
    code0, out0 = run_probe(n, [], {})
    only = evaluate_only_requesting_container(NODE, seen, Sighting("container other",
                                                                   parse_cuda_probe(out0, exit_code=code0)))
    assert only.outcome is Outcome.NOT_TESTED and "what pod iso-one-h100-0 sees could not be read" in only.summary


def test_a_pod_without_a_request_whose_cuda_and_nvml_are_unreadable_is_not_passed_on_dev_alone():
    n = sim_node("library-mismatch")
    code, out = run_probe(n, [Visible(n.gpus[0])], {})
    doc = json.loads(out)
    doc["device_nodes"] = {"/dev/nvidiactl": False, "/dev/nvidia-uvm": False, "gpus": []}
    seen = Sighting("pod iso-none-h100-0", parse_cuda_probe(json.dumps(doc), exit_code=code))
    v = evaluate_no_request_sees_no_gpu(NODE, seen)
    assert v.outcome is Outcome.NOT_TESTED
    assert v.summary.startswith("what a pod that requests no GPU sees could not be read: CUDA and NVML were both "
                                "unreadable (CUDA did not initialise: ")


def test_time_sliced_replicas_may_share_a_physical_gpu():
    n = sim_node(profile="t4-timeslicing", node="t4-0")
    code, out = run_probe(n, [Visible(n.gpus[0])], {})  # two replicas of GPU 0: one UUID
    seen = Sighting("pod iso-two-t4-0", parse_cuda_probe(out, exit_code=code))
    assert evaluate_sees_only_allocated("t4-0", [(2, seen)], allocatable=16).outcome is Outcome.FAIL
    v = evaluate_sees_only_allocated("t4-0", [(2, seen)], replicas=4, allocatable=16)
    assert v.outcome is Outcome.PASS and "1 to N distinct GPUs (time-sliced)" in v.summary
    v = evaluate_concurrent_pods_disjoint("t4-0", seen, seen, allocatable=16, replicas=4)
    assert v.outcome is Outcome.NOT_TESTED and "time-sliced 4 ways" in v.summary


def test_one_allocatable_gpu_tests_n_equals_one_only_and_not_two_concurrent_pods():
    pods = observe(sim_node())
    seen = sighting(pods["one"])
    v = evaluate_sees_only_allocated(NODE, [(1, seen)], allocatable=1)
    assert v.outcome is Outcome.PASS and "N=2 not tested: h100-0 has 1 allocatable nvidia.com/gpu" in v.summary
    v = evaluate_concurrent_pods_disjoint(NODE, seen, None, allocatable=1)
    assert v.outcome is Outcome.NOT_TESTED and "two pods with one GPU each need two" in v.summary


def test_a_shared_gpu_is_legitimate_only_when_the_pods_did_not_hold_it_at_the_same_time():
    n = sim_node()
    run = run_probe(n, [Visible(n.gpus[0])], {})

    def pod(name: str, scheduled: str, finished: str) -> PodOutcome:
        at = "2026-11-29T00:00:0{}Z".format
        return pod_outcome(name, {"probe": run}, times=(at(scheduled), at(finished)))

    first, later = pod("iso-one-h100-0", "0", "5"), pod("iso-split-h100-0", "6", "9")
    overlapping, same_second = pod("iso-split-h100-0", "3", "9"), pod("iso-split-h100-0", "5", "9")
    assert (held_together(first, later), held_together(first, overlapping), held_together(first, same_second)) == (
        False, True, None)

    def verdict(other: PodOutcome):
        return evaluate_concurrent_pods_disjoint(NODE, sighting(first), sighting(other), allocatable=8,
                                                 together=held_together(first, other))

    assert verdict(later).outcome is Outcome.NOT_TESTED and "did not hold their GPUs at the same time" in \
        verdict(later).summary
    assert verdict(overlapping).outcome is Outcome.FAIL and f"both see {n.gpus[0].uuid}" in verdict(overlapping).summary
    # Handed over within one second, with the same allocation in both environments: cannot tell.
    assert verdict(same_second).outcome is Outcome.NOT_TESTED and "unknown" in verdict(same_second).summary


def test_pods_given_different_gpus_that_see_the_same_one_fail_whatever_their_times():
    n = sim_node("visible-devices-all")
    runs = [run_probe(n, [Visible(g)], {}) for g in n.gpus[:2]]
    a, b = (pod_outcome(f"iso-{r}-h100-0", {"probe": run}, times=("2026-11-29T00:00:05Z", "2026-11-29T00:00:05Z"))
            for r, run in zip(("one", "split"), runs, strict=True))
    assert held_together(a, b) is None
    v = evaluate_concurrent_pods_disjoint(NODE, sighting(a), sighting(b), allocatable=8, together=None)
    assert v.outcome is Outcome.FAIL
    assert v.summary.startswith(f"the device plugin gave two pods different GPUs ({n.gpus[0].uuid} and "
                                f"{n.gpus[1].uuid}) but both see GPU-")


def test_a_requesting_container_that_sees_nothing_fails_and_is_not_compared_with_another_pod():
    n = sim_node()
    blind = pod_outcome("iso-split-h100-0", {"probe": run_probe(n, [], {"NVIDIA_VISIBLE_DEVICES": "void"}),
                                             "sidecar": run_probe(n, [], {})})
    v = evaluate_only_requesting_container(NODE, sighting(blind), sighting(blind, "sidecar"))
    assert v.outcome is Outcome.FAIL and "the container that requests one GPU sees CUDA devices: 0" in v.summary
    v = evaluate_concurrent_pods_disjoint(NODE, sighting(blind), sighting(blind), allocatable=8)
    assert v.outcome is Outcome.NOT_TESTED and "saw no GPU" in v.summary


@pytest.mark.parametrize(("allocatable", "roles", "waits"), [
    (0, ["none", "envvar"], False),
    (1, ["none", "envvar", "one", "split"], True),
    (3, ["none", "envvar", "one", "split", "two"], True),
    (4, ["none", "envvar", "one", "split", "two"], False),
], ids=["a node without nvidia.com/gpu gets only the pods that request none",
        "one GPU: no N=2, the two one-GPU pods queue",
        "three GPUs: four asked for, so they queue",
        "four GPUs: everything at once"])
def test_the_plan_fits_the_node(allocatable, roles, waits):
    plan = plan_node("node-a", allocatable)
    assert [p.role for p in plan] == roles
    assert {p.waits for p in plan if p.gpu_count} <= {waits} and not any(p.waits for p in plan if not p.gpu_count)
    by_role = {p.role: p for p in plan}
    assert by_role["envvar"].env == {"NVIDIA_VISIBLE_DEVICES": "all"} and by_role["none"].gpu_count == 0
    if "split" in by_role:
        assert (by_role["split"].gpu_count, by_role["split"].sidecar_gpu_count) == (1, 0)
    assert len({p.name for p in plan}) == len(plan) and all(p.name.startswith("iso-") for p in plan)


def test_pod_names_stay_valid_and_unique_for_long_node_names():
    long_a, long_b = "n" * 250 + "a", "n" * 250 + "b"
    a, b = pod_name("envvar", long_a), pod_name("envvar", long_b)
    assert len(a) <= 253 and len(b) <= 253 and a != b
    assert pod_name("one", "h100-0") == "iso-one-h100-0"


def test_the_probe_documents_the_tests_feed_are_real_cuda_probe_documents():
    pods = observe(sim_node())
    for outcome in pods.values():
        for name, text in outcome.logs.items():
            assert json.loads(text)["schema"] == "gpuconf.cuda-probe/v1", (outcome.name, name)


# --- GPUs given through DRA claims: each pod sees exactly the devices its claim was allocated -----


def claimed(outcome: PodOutcome, devices: Sequence[str], pool: str = NODE) -> PodOutcome:
    """``outcome`` with the pod's claim as run_campaign(record_claims=True) saw it allocated."""
    import dataclasses

    claim = {"metadata": {"name": f"{outcome.name}-gpus", "ownerReferences": [{"kind": "Pod", "name": outcome.name}]},
             "status": {"allocation": {"devices": {"results": [
                 {"request": "gpus", "driver": "gpu.nvidia.com", "pool": pool, "device": d} for d in devices]}}}}
    return dataclasses.replace(outcome, claims=(claim,))


def slice_of(n: SimNode) -> tuple:
    from gpuconf.nodes import SliceDevice

    return tuple(SliceDevice(n.name, "gpu.nvidia.com", n.name, f"gpu-{i}", {"uuid": g.uuid})
                 for i, g in enumerate(n.gpus))


def test_a_pod_given_gpus_through_a_claim_sees_exactly_the_devices_its_claim_was_allocated():
    from gpuconf.checks.isolation import CLAIM_OWNER, claim_grant

    n = sim_node()
    devices = slice_of(n)
    one = claimed(pod_outcome("iso-one-h100-0", {"probe": run_probe(n, [Visible(n.gpus[0])], {})}), ["gpu-0"])
    two = claimed(pod_outcome("iso-two-h100-0", {"probe": run_probe(n, [Visible(g) for g in n.gpus[2:4]], {})}),
                  ["gpu-2", "gpu-3"])
    grants = {sighting(p).where: claim_grant(p, devices) for p in (one, two)}
    assert grants["pod iso-two-h100-0"].uuids == (n.gpus[2].uuid, n.gpus[3].uuid)
    seen = [(1, sighting(one)), (2, sighting(two))]
    v = evaluate_sees_only_allocated(NODE, seen, allocatable=8, grants=grants)
    assert v.outcome is Outcome.PASS and v.summary.endswith("; each pod sees exactly the devices its claim was "
                                                            "allocated")
    assert f"pod iso-one-h100-0: its claim was allocated gpu-0 ({n.gpus[0].uuid})" in v.evidence
    # the DRA driver prepared another GPU than the claim's: the DRA suite's finding, once, where its
    # check failed on this node; this check's own failure wherever it did not (finding 5 of the audit)
    wrong = claimed(pod_outcome("iso-one-h100-0", {"probe": run_probe(n, [Visible(n.gpus[1])], {})}), ["gpu-0"])
    grants["pod iso-one-h100-0"] = claim_grant(wrong, devices)
    mixed = [(1, sighting(wrong)), (2, sighting(two))]
    finding = (f"pod iso-one-h100-0 sees {n.gpus[1].uuid} but its claim was allocated gpu-0 ({n.gpus[0].uuid}): the "
               "DRA driver prepared another GPU than the one allocated")
    owner_fails = failed(CLAIM_OWNER, NODE, "the selector claim was allocated gpu-5, the pod sees gpu-6",
                         causes={"sees-another-device"})
    blocked = evaluate_sees_only_allocated(NODE, mixed, allocatable=8, grants=grants, owner=owner_fails)
    assert blocked.outcome is Outcome.NOT_TESTED and blocked.blocked_by == CLAIM_OWNER
    assert blocked.summary == (f"blocked by {CLAIM_OWNER}: the selector claim was allocated gpu-5, the pod sees "
                               f"gpu-6 (here too: {finding})")
    alone = evaluate_sees_only_allocated(NODE, mixed, allocatable=8, grants=grants)
    assert alone.outcome is Outcome.FAIL
    assert alone.summary == f"{finding} ({CLAIM_OWNER}, the check that reports this, did not judge h100-0 in this run)"
    assert (alone.expected, alone.observed) == (f"exactly {n.gpus[0].uuid}", n.gpus[1].uuid)


def test_a_claim_mismatch_is_deferred_only_to_an_owner_that_failed_on_the_same_node():
    """A driver that swaps two devices only (gpu-2 and gpu-3): the DRA suite's own pod, allocated gpu-0,
    sees gpu-0 and passes; the isolation pod allocated gpu-2 sees GPU 3 and must fail, not wait for
    an owner that has nothing to report."""
    from gpuconf.checks.isolation import CLAIM_OWNER, claim_grant

    n = sim_node()
    devices = slice_of(n)
    swapped = claimed(pod_outcome("iso-one-h100-0", {"probe": run_probe(n, [Visible(n.gpus[3])], {})}), ["gpu-2"])
    grants = {"pod iso-one-h100-0": claim_grant(swapped, devices)}
    seen = [(1, sighting(swapped))]
    finding = (f"pod iso-one-h100-0 sees {n.gpus[3].uuid} but its claim was allocated gpu-2 ({n.gpus[2].uuid}): the "
               "DRA driver prepared another GPU than the one allocated")
    owner_passed = passed(CLAIM_OWNER, NODE, "the claim was allocated gpu-0 and the pod sees it")
    v = evaluate_sees_only_allocated(NODE, seen, allocatable=8, grants=grants, owner=owner_passed)
    assert v.outcome is Outcome.FAIL
    assert v.summary == (f"{finding} ({CLAIM_OWNER} passed on h100-0 with its own pod: the driver mixes up some "
                         "devices only)")
    skipped = not_tested(CLAIM_OWNER, NODE, "h100-0 publishes no GPU with a memory capacity: no memory selector to try")
    v = evaluate_sees_only_allocated(NODE, seen, allocatable=8, grants=grants, owner=skipped)
    assert v.outcome is Outcome.FAIL and v.summary == (
        f"{finding} ({CLAIM_OWNER} did not judge it on h100-0: h100-0 publishes no GPU with a memory capacity: no "
        "memory selector to try)")
    # an owner failing on another node, or another check failing here, blocks nothing
    elsewhere = failed(CLAIM_OWNER, "h100-1", "the pod sees another GPU")
    for other in (elsewhere, failed("dra.distinct-claims-distinct-devices", NODE, "two claims, one GPU")):
        v = evaluate_sees_only_allocated(NODE, seen, allocatable=8, grants=grants, owner=other)
        assert v.outcome is Outcome.FAIL and v.summary == (
            f"{finding} ({CLAIM_OWNER}, the check that reports this, did not judge h100-0 in this run)")
    # an owner failing for a finding sees-only-allocated does not share (its selector's memory) blocks nothing
    small = failed(CLAIM_OWNER, NODE, "the selector asked for at least 100 GiB but gpu-0 has 80 GiB",
                   causes={"memory-below-selector"})
    v = evaluate_sees_only_allocated(NODE, seen, allocatable=8, grants=grants, owner=small)
    assert v.outcome is Outcome.FAIL and v.summary == (
        f"{finding} ({CLAIM_OWNER} fails on h100-0 for another finding: the selector asked for at least 100 GiB but "
        "gpu-0 has 80 GiB)")
    for cause in ("sees-another-device", "unpublished-device"):
        owner = failed(CLAIM_OWNER, NODE, "x", causes={cause})
        v = evaluate_sees_only_allocated(NODE, seen, allocatable=8, grants=grants, owner=owner)
        assert v.outcome is Outcome.NOT_TESTED and v.summary == f"blocked by {CLAIM_OWNER}: x (here too: {finding})"


def test_an_unknown_claim_allocation_is_not_tested_and_claims_tell_two_pods_apart():
    from gpuconf.checks.isolation import claim_grant

    n = sim_node()
    devices = slice_of(n)
    one = pod_outcome("iso-one-h100-0", {"probe": run_probe(n, [Visible(n.gpus[0])], {})})
    grants = {"pod iso-one-h100-0": claim_grant(one, devices)}  # no claim recorded while it ran
    v = evaluate_sees_only_allocated(NODE, [(1, sighting(one))], allocatable=8, grants=grants)
    assert v.outcome is Outcome.NOT_TESTED and "which devices its claim got is unknown" in v.summary
    stale = claim_grant(claimed(one, ["gpu-9"]), devices)
    assert stale.unknown is not None and "gpu.nvidia.com/h100-0/gpu-9, which no ResourceSlice" in stale.unknown
    # two pods whose claims got different GPUs and which both see one: a failure whatever their times
    leaky = sim_node("visible-devices-all")
    a, b = (claimed(pod_outcome(f"iso-{r}-h100-0", {"probe": run_probe(leaky, [Visible(leaky.gpus[i])], {})},
                                times=("2026-11-29T00:00:05Z", "2026-11-29T00:00:05Z")), [f"gpu-{i}"])
            for i, r in enumerate(("one", "split")))
    pair = {sighting(p).where: claim_grant(p, slice_of(leaky)) for p in (a, b)}
    v = evaluate_concurrent_pods_disjoint(NODE, sighting(a), sighting(b), allocatable=8, together=None, grants=pair)
    assert v.outcome is Outcome.FAIL and v.summary.startswith("their claims gave two pods different GPUs (")


def as_mig(seen: Sighting, instances: int) -> Sighting:
    """``seen`` as a pod given ``instances`` MIG instances of its one GPU: CUDA enumerates them as MIG
    devices, NVML and /dev still show the one parent."""
    report = seen.report
    assert report is not None and len(report.devices) == 1
    device = report.devices[0]
    migs = tuple(replace(device, index=i, uuid=f"MIG-0000000{i}-aaaa-bbbb-cccc-dddddddddddd", mig=True)
                 for i in range(instances))
    return replace(seen, report=replace(report, devices=migs, device_count=instances))


def test_cuda_showing_two_mig_devices_fails_even_where_nvml_shows_one_parent():
    """A CUDA process enumerates one MIG device however many it was given (MIG User Guide): two are a
    leak, also to a pod that asked for two."""
    n = sim_node()
    one = sighting(pod_outcome("iso-one-h100-0", {"probe": run_probe(n, [Visible(n.gpus[0])], {})}))
    v = evaluate_sees_only_allocated(NODE, [(1, as_mig(one, 1))], allocatable=1)
    assert v.outcome is Outcome.PASS
    assert v.summary.startswith("pods requesting N = 1 GPUs see exactly N (1: MIG-0000000")
    for asked in (1, 2):
        v = evaluate_sees_only_allocated(NODE, [(asked, as_mig(one, 2))], allocatable=8)
        assert v.outcome is Outcome.FAIL
        assert v.summary == (f"a pod requesting {asked} GPU{'s' if asked > 1 else ''} sees CUDA devices: 2: "
                             "MIG-00000000-aaaa-bbbb-cccc-dddddddddddd, MIG-00000001-aaaa-bbbb-cccc-dddddddddddd")
    # two MIG instances on one parent asked as 2: CUDA's one MIG device and NVML's one parent are right
    v = evaluate_sees_only_allocated(NODE, [(2, as_mig(one, 1))], allocatable=8)
    assert v.outcome is Outcome.PASS
    only = evaluate_only_requesting_container(NODE, as_mig(one, 2), sighting(pod_outcome(
        "iso-split-h100-0", {"sidecar": run_probe(n, [], {})}), "sidecar"))
    assert only.outcome is Outcome.FAIL and only.summary.startswith(
        "the container that requests one GPU sees CUDA devices: 2: MIG-00000000")


def test_a_claim_allocated_more_devices_than_the_pod_sees_fails():
    """A claim for one GPU allocated two devices, and the pod sees one of them: not exactly its
    allocation (the pod's count matches its request, the claim's does not)."""
    from gpuconf.checks.isolation import CLAIM_OWNER, claim_grant

    n = sim_node()
    wide = claimed(pod_outcome("iso-one-h100-0", {"probe": run_probe(n, [Visible(n.gpus[0])], {})}),
                   ["gpu-0", "gpu-1"])
    grants = {"pod iso-one-h100-0": claim_grant(wide, slice_of(n))}
    v = evaluate_sees_only_allocated(NODE, [(1, sighting(wide))], allocatable=8, grants=grants)
    assert v.outcome is Outcome.FAIL
    assert v.summary == (f"pod iso-one-h100-0 sees {n.gpus[0].uuid} but its claim was allocated gpu-0 "
                         f"({n.gpus[0].uuid}), gpu-1 ({n.gpus[1].uuid}): the DRA driver prepared another GPU than the "
                         f"one allocated ({CLAIM_OWNER}, the check that reports this, did not judge h100-0 in this "
                         "run)")
    assert v.expected == f"exactly {n.gpus[0].uuid}, {n.gpus[1].uuid}" and v.observed == n.gpus[0].uuid


# --- the suites: the owner's verdict comes from the DRA suite's own campaigns, in either order ----

DRA_ONLY = Path(__file__).resolve().parents[1] / "gpuconf" / "data" / "sim_profiles" / "h200-dra-only.yaml"


def run_suites(pytester: pytest.Pytester, *suites: str, fault: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The suites, in the order given, on h200-dra-only with ``fault`` on node h200-0: each check's test
    record by (check, node)."""
    from serving import pytest_subprocess

    folder = pytester.path / "suites"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    for suite in suites:
        (folder / suite).write_text((DRA_ONLY.parents[3] / "suites" / suite).read_text())
    text = re.sub(r"^faults:.*$", "", DRA_ONLY.read_text(), flags=re.M)
    profile = pytester.path / "faulty.yaml"
    profile.write_text(text + f"\nfaults:\n  - {{id: {fault}, pool: h200, node: 0}}\n")
    reports = pytester.path / f"reports-{len(suites)}"
    pytest_subprocess(pytester, *(f"suites/{s}" for s in suites), "-p", "gpuconf.plugin", "--simulate", str(profile),
                      "--report-dir", str(reports), "-p", "no:cacheprovider")
    tests = json.loads((reports / "report.json").read_text())["results"]["tests"]
    return {(t["extra"]["check"], t["extra"].get("node")): t for t in tests if (t.get("extra") or {}).get("check")}


def test_the_suite_defers_to_the_dra_owner_only_where_it_fails_whatever_the_order(pytester: pytest.Pytester):
    """A DRA driver that prepares the wrong device for every claim: the DRA suite's owner fails on h200-0 and
    sees-only-allocated is NOT TESTED behind it, also when the isolation suite runs first (the DRA
    campaigns are launched by whichever suite needs them first); without the DRA suite in the run the
    isolation suite fails the node itself, saying so."""
    both = run_suites(pytester, "test_isolation.py", "test_dra.py", fault="dra-prepares-wrong-device")
    owner = both[("dra.claim-allocates-the-probed-device", "h200-0")]
    mine = both[("isolation.sees-only-allocated", "h200-0")]
    assert owner["status"] == "failed"
    assert mine["status"] == "skipped"
    assert "blocked by dra.claim-allocates-the-probed-device: the claim was allocated gpu-" in str(mine["message"])
    assert "(here too: pod iso-one-h200-0 sees GPU-" in str(mine["message"])
    assert both[("isolation.sees-only-allocated", "h200-1")]["status"] == "passed"
    alone = run_suites(pytester, "test_isolation.py", fault="dra-prepares-wrong-device")
    mine = alone[("isolation.sees-only-allocated", "h200-0")]
    assert mine["status"] == "failed"
    assert "the DRA driver prepared another GPU than the one allocated (dra.claim-allocates-the-probed-device, the " \
        "check that reports this, did not judge h200-0 in this run)" in str(mine["message"])
