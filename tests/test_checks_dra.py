"""DRA checks as pure decisions, fed with what the simulated DRA driver publishes and what the
simulated cuda-probe sees in a pod given the claimed devices: a healthy node passes every check,
and the dra-attr-wrong and dra-double-count faults fail the checks the catalog names for them, with
messages that name the node, the device and the views that disagree."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from gpuconf.checks.dra import (
    UNSATISFIABLE_SELECTOR,
    AllocatedDevice,
    Allocation,
    SliceDevice,
    Steering,
    allocation_of,
    dra_skip_reason,
    evaluate_attributes_match_hardware,
    evaluate_claim_allocates_probed_device,
    evaluate_claim_lifecycle,
    evaluate_distinct_claims,
    evaluate_matched_pair,
    evaluate_no_double_publication,
    evaluate_selector_steers_scheduling,
    evaluate_shared_claim,
    evaluate_unsatisfiable_pending,
    memory_selector,
    node_skip_reason,
    parse_quantity,
    pod_name,
    prepare_failures,
    selector_threshold_gib,
    slice_devices,
    steering_attribute,
)
from gpuconf.checks.isolation import Sighting, sighting
from gpuconf.cluster.outcomes import PodOutcome, make_outcome
from gpuconf.compat.versions import parse_cuda
from gpuconf.probe_pods import ClaimRequest, make_cuda_probe_pod, make_resource_claim_template
from gpuconf.render import RenderError
from gpuconf.sim.agent_model import dra_devices, dra_prepare_error
from gpuconf.sim.cel import compile_selector, device_activation
from gpuconf.sim.emulate import Visible, cuda_probe_run
from gpuconf.sim.node_facts import node_resources, resource_slices
from gpuconf.sim.profile import SimNode, expand, fault_catalog, load_profile, with_faults
from gpuconf.verdict import Outcome, checks

NODE = "h200-0"
DRA_CHECKS = {"dra.attributes-match-hardware", "dra.no-double-publication", "dra.claim-allocates-the-probed-device",
              "dra.unsatisfiable-selector-pending", "dra.distinct-claims-distinct-devices",
              "dra.selector-steers-scheduling", "dra.shared-claim-same-device", "dra.claim-reserved-then-deleted",
              "dra.count-with-match-attribute"}
#: The scheduler's message for a claim nothing matches (kube-scheduler 1.36, domain.md §4).
CANNOT_ALLOCATE = ("0/1 nodes are available: 1 cannot allocate all claims. still not schedulable, preemption: 0/1 "
                   "nodes are available: 1 Preemption is not helpful for scheduling.")


def sim_node(*faults: Mapping[str, Any], profile: str = "h200-dra-only") -> SimNode:
    p = load_profile(profile)
    if faults:
        p = with_faults(p, list(faults))
    return expand(p).node(NODE)


def pod_outcome(name: str, run: tuple[int, str] | None, *, message: str | None = None,
                events: Sequence[Mapping[str, str]] = ()) -> PodOutcome:
    """A pod as a campaign returns it: finished with the probe's exit code and output, or (run None)
    Pending, unschedulable, with the scheduler's message."""
    if run is None:
        pod = {"metadata": {"name": name}, "spec": {"containers": [{"name": "probe"}]},
               "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                              "reason": "Unschedulable", "message": message}]}}
        return make_outcome(pod, events, logs={}, missing_logs={"probe": "never started"})
    code, out = run
    t = "2026-11-29T00:00:00Z"
    pod = {"metadata": {"name": name}, "spec": {"nodeName": NODE, "containers": [{"name": "probe"}]},
           "status": {"phase": "Succeeded" if code == 0 else "Failed", "containerStatuses": [
               {"name": "probe", "state": {"terminated": {"exitCode": code, "startedAt": t, "finishedAt": t}}}],
               "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": t}]}}
    return make_outcome(pod, events, logs={"probe": out}, missing_logs={})


def run_probe(n: SimNode, visible: Sequence[Visible]) -> tuple[int, str]:
    """The cuda-probe in a container given ``visible`` (through CDI, as the DRA driver does)."""
    return cuda_probe_run(n, visible=visible, image_cuda=parse_cuda("13.0.2"), env={"NVIDIA_VISIBLE_DEVICES": "void"},
                          compat=False, started_at="2026-11-29T00:00:00.000Z", hostname=n.name)


def probe(n: SimNode, visible: Sequence[Visible], name: str = "dra-pod") -> Sighting:
    return sighting(pod_outcome(name, run_probe(n, visible)))


def whole_node(n: SimNode) -> Sighting:
    return probe(n, [Visible(g) for g in n.present_gpus], pod_name("all", n.name))


def claim(name: str, pod: str, pod_claim: str, *devices: str) -> Allocation:
    return Allocation(name, pod, pod_claim,
                      tuple(AllocatedDevice(pod_claim, "gpu.nvidia.com", NODE, d) for d in devices))


def gpu(n: SimNode, index: int) -> Visible:
    return Visible(next(g for g in n.present_gpus if g.index == index))


# -------------------------------------------------------------------------------------------------
# The catalog


def test_every_dra_check_is_in_the_catalog_and_the_faults_name_two_of_them() -> None:
    assert DRA_CHECKS <= set(checks())
    assert {checks()[c].suite for c in DRA_CHECKS} == {"suites/test_dra.py"}
    named = {f.id: f.check for f in fault_catalog().values() if f.check in DRA_CHECKS}
    assert named == {"dra-attr-wrong": "dra.attributes-match-hardware",
                     "dra-double-count": "dra.no-double-publication",
                     "dra-prepares-wrong-device": "dra.claim-allocates-the-probed-device",
                     "dra-slice-stale": "dra.attributes-match-hardware"}
    assert {checks()[c].severity for c in named.values()} == {"fail"}


# -------------------------------------------------------------------------------------------------
# Reading the slices and claims


def test_slice_devices_read_every_attribute_and_the_memory_of_the_nodes_own_slice() -> None:
    n = sim_node()
    devices = slice_devices(resource_slices(n), NODE)
    assert [d.name for d in devices] == [f"gpu-{i}" for i in range(8)]
    d = devices[0]
    assert d.uuid == n.gpus[0].uuid == d.gpu_uuid and d.kind == "gpu" and d.key == ("gpu.nvidia.com", NODE, "gpu-0")
    assert d.attributes["productName"] == "NVIDIA H200" and d.attributes["driverVersion"] == "580.159.3"
    assert d.attributes["resource.kubernetes.io/pciBusID"] == "0000:18:00.0"
    assert "index" not in d.attributes and "minor" not in d.attributes  # removed by the driver (#563)
    assert d.memory_bytes == n.gpus[0].memory_mib * 2**20
    assert slice_devices(resource_slices(n), "h200-1") == ()  # another node's slice
    assert slice_devices(resource_slices(n), NODE, driver="other.example.com") == ()


def test_fully_qualified_attributes_of_the_drivers_domain_read_as_short_names() -> None:
    s = {"spec": {"driver": "gpu.nvidia.com", "nodeName": "n", "devices": [{"name": "gpu-0", "attributes": {
        "gpu.nvidia.com/uuid": {"string": "GPU-1"}, "gpu.nvidia.com/mig": {"bool": False}}}]}}
    (d,) = slice_devices([s], "n")
    assert d.uuid == "GPU-1" and d.attributes["mig"] == "false" and d.pool == "n" and d.memory_bytes is None


@pytest.mark.parametrize(("text", "value"), [("143771Mi", 143771 * 2**20), ("40Gi", 40 * 2**30), ("80G", 80 * 10**9),
                                             ("1e3", 1000), ("12", 12), ("1.5Ki", 1536), ("lots", None)])
def test_quantities_read_as_kubernetes_writes_them(text: str, value: int | None) -> None:
    assert parse_quantity(text) == value


def test_an_allocated_claim_names_its_pod_its_pod_claim_and_its_devices() -> None:
    obj = {"metadata": {"name": "dra-two-h200-0-first-abcde", "annotations": {
        "resource.kubernetes.io/pod-claim-name": "first"},
        "ownerReferences": [{"kind": "Pod", "name": "dra-two-h200-0"}]},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-2"}]}}}}
    a = allocation_of(obj)
    assert a is not None and (a.pod, a.pod_claim) == ("dra-two-h200-0", "first")
    assert [d.key for d in a.devices] == [("gpu.nvidia.com", NODE, "gpu-2")]
    assert allocation_of({"metadata": {"name": "x"}, "status": {}}) is None


def test_the_suite_skips_without_the_v1_api_or_nvidias_device_class_and_nodes_without_dra_devices() -> None:
    assert "does not serve resource.k8s.io/v1" in str(dra_skip_reason(serves_v1=False, device_classes=()))
    reason = dra_skip_reason(serves_v1=True, device_classes=("other.example.com",))
    assert reason is not None and "no DeviceClass gpu.nvidia.com (DeviceClasses: other.example.com)" in reason
    assert dra_skip_reason(serves_v1=True, device_classes=("gpu.nvidia.com", "mig.nvidia.com")) is None
    assert "h100-0 publishes no device of driver gpu.nvidia.com" in str(node_skip_reason("h100-0", ()))


def test_the_memory_selector_matches_every_gpu_of_the_node_and_the_unsatisfiable_one_none() -> None:
    n = sim_node()
    devices = slice_devices(resource_slices(n), NODE)
    gib = selector_threshold_gib(devices)
    assert gib == 140  # 143771 MiB
    for d in resource_slices(n)[0]["spec"]["devices"]:  # type: ignore[index]
        activation = device_activation("gpu.nvidia.com", d)
        assert compile_selector(memory_selector(gib)).matches(activation)
        assert not compile_selector(UNSATISFIABLE_SELECTOR).matches(activation)


# -------------------------------------------------------------------------------------------------
# dra.attributes-match-hardware


def test_a_healthy_nodes_slice_agrees_with_the_whole_node_probe() -> None:
    n = sim_node()
    v = evaluate_attributes_match_hardware(NODE, slice_devices(resource_slices(n), NODE), whole_node(n))
    assert v.outcome is Outcome.PASS, v.message()
    assert v.summary == "8 published devices agree with the whole-node probe"


def test_a_wrong_product_name_in_the_slice_fails_against_the_probe() -> None:
    n = sim_node({"id": "dra-attr-wrong", "pool": "h200", "node": 0, "gpu": 3})
    v = evaluate_attributes_match_hardware(NODE, slice_devices(resource_slices(n), NODE), whole_node(n))
    assert v.outcome is Outcome.FAIL and v.node == NODE
    assert v.summary.startswith("the DRA driver publishes devices that are not the node's hardware: gpu-3 publishes "
                                f"productName='NVIDIA A100-SXM4-40GB' but the probe for {n.gpus[3].uuid} says "
                                "'NVIDIA H200'")
    assert not any("GFD" in e for e in v.evidence)  # the label is labels.agree-with-dra's
    assert "dra.attributes-match-hardware on h200-0" in v.message() and "remediation:" in v.message()


@pytest.mark.parametrize(("attribute", "value", "said"), [
    ("uuid", "GPU-00000000-0000-0000-0000-000000000000", "which the whole-node probe (NVML) does not see"),
    ("driverVersion", "570.86.15", "publishes driverVersion='570.86.15' but NVML in the probe says '580.159.03'"),
    ("cudaComputeCapability", "8.0.0", "publishes cudaComputeCapability='8.0.0' but the probe for"),
    ("resource.kubernetes.io/pciBusID", "0000:99:00.0", "publishes resource.kubernetes.io/pciBusID='0000:99:00.0'"),
])
def test_any_attribute_that_lies_is_named(attribute: str, value: str, said: str) -> None:
    n = sim_node({"id": "dra-attr-wrong", "pool": "h200", "node": 0, "gpu": 3, "attribute": attribute,
                  "value": value})
    v = evaluate_attributes_match_hardware(NODE, slice_devices(resource_slices(n), NODE), whole_node(n))
    assert v.outcome is Outcome.FAIL
    assert any(said in e for e in v.evidence), v.evidence


def test_without_a_probe_it_is_not_tested_even_where_labels_would_disagree() -> None:
    n = sim_node({"id": "dra-attr-wrong", "pool": "h200", "node": 0, "gpu": 3})
    devices = slice_devices(resource_slices(n), NODE)
    broken = Sighting("pod dra-all-h200-0", None, "pod dra-all-h200-0 produced no probe output (Pending)")
    nothing = evaluate_attributes_match_hardware(NODE, devices, broken)
    assert nothing.outcome is Outcome.NOT_TESTED
    assert nothing.summary == ("h200-0: no whole-node probe says what its GPUs are (pod dra-all-h200-0 produced no "
                               "probe output (Pending))")


REAL_PREPARE = Path(__file__).parent / "data" / "real" / "dra" / "prepare-errors.txt"


def real_prepare_errors() -> list[str]:
    return [line for line in REAL_PREPARE.read_text().splitlines() if line and not line.startswith("#")]


def test_the_device_a_real_prepare_error_names_is_read() -> None:
    full, retry, elided, nvcdi = real_prepare_errors()
    assert prepare_failures([retry]) == {"gpu-2-mig-4g95gb-5-0": "prepare devices failed: error creating MIG device: "
                                         "error creating GPU instance for 'gpu-2-mig-4g95gb-5-0': Insufficient "
                                         "Resources"}
    assert prepare_failures([full, elided, nvcdi]) == {}  # no device named (a MIG capability file; elided ids)
    assert prepare_failures(["requested device is not allocatable: gpu-5"]) == {
        "gpu-5": "requested device is not allocatable: gpu-5"}


def test_real_and_simulated_prepare_failures_get_the_prepare_diagnosis() -> None:
    from gpuconf.diagnose import diagnose

    n = sim_node({"id": "dra-slice-stale", "pool": "h200", "node": 0, "gpu": 3})
    for message in (*real_prepare_errors()[:2], stale_prepare_event(n, "gpu-3")):
        assert diagnose(message)[0].category == "dra-prepare-failed", message


def stale_prepare_event(n: SimNode, device: str) -> str:
    """The kubelet's FailedPrepareDynamicResources message for a claim on ``device`` of ``n``, as the
    simulated driver answers (gpuconf.sim.agent_model.dra_prepare_error)."""
    claim_ = {"metadata": {"name": "dra-all-h200-0-gpus-x7k2p", "namespace": "gpuconf-run",
                           "uid": "3c8337ad-f366-4541-883d-30b9e99fd6be"},
              "status": {"allocation": {"devices": {"results": [
                  {"request": "gpus", "driver": "gpu.nvidia.com", "pool": NODE, "device": device}]}}}}
    error = dra_prepare_error(n, claim_)
    assert error is not None
    return ("Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources failed for "
            f"ResourceClaim dra-all-h200-0-gpus-x7k2p: {error}")


@pytest.mark.parametrize("faults", [(), ({"id": "dra-slice-stale", "pool": "h200", "node": 0, "gpu": 3},)],
                         ids=["healthy", "dra-slice-stale"])
def test_a_slice_that_still_lists_a_gone_gpu_fails_naming_the_device_the_driver_cannot_prepare(faults) -> None:
    n = sim_node(*faults)
    devices = slice_devices(resource_slices(n), NODE)
    assert [d.name for d in devices] == [f"gpu-{i}" for i in range(8)]  # gpu-3 still published either way
    if not faults:
        assert dra_prepare_error(n, {"metadata": {}, "status": {"allocation": {"devices": {"results": [
            {"driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-3"}]}}}}) is None
        v = evaluate_attributes_match_hardware(NODE, devices, whole_node(n))
        assert v.outcome is Outcome.PASS, v.message()
        return
    assert 3 not in {g.index for g in n.present_gpus}
    event = stale_prepare_event(n, "gpu-3")
    assert event.endswith("unable to get device spec for 3c8337ad-f366-4541-883d-30b9e99fd6be-gpu-3: failed to get "
                          "device handle from UUID: Not Found")
    # the whole-node pod claims every published device, so it never starts
    stuck = Sighting("pod dra-all-h200-0", None, "pod dra-all-h200-0 produced no probe output (Pending)")
    v = evaluate_attributes_match_hardware(NODE, devices, stuck, [event])
    assert v.outcome is Outcome.FAIL and v.check == "dra.attributes-match-hardware" and v.node == NODE
    assert v.summary == (
        f"the DRA driver publishes devices that are not the node's hardware: gpu-3 ({n.gpus[3].uuid}) is published, "
        "but the DRA driver cannot prepare it (unable to create CDI spec file for claim: unable to get device spec for "
        "3c8337ad-f366-4541-883d-30b9e99fd6be-gpu-3: failed to get device handle from UUID: Not Found): the GPU is "
        "gone from the node or unusable, and the ResourceSlice still offers it")
    # a one-GPU claim on another device prepares and sees its GPU
    assert dra_prepare_error(n, {"metadata": {}, "status": {"allocation": {"devices": {"results": [
        {"driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-4"}]}}}}) is None


def test_a_gpu_the_slice_leaves_out_is_seen_by_the_probe() -> None:
    n = sim_node()
    devices = slice_devices(resource_slices(n), NODE)[:7]
    v = evaluate_attributes_match_hardware(NODE, devices, whole_node(n))
    assert v.outcome is Outcome.FAIL
    assert f"the whole-node probe (NVML) sees GPU {n.gpus[7].uuid}, which no ResourceSlice device publishes" \
        in v.summary


# -------------------------------------------------------------------------------------------------
# dra.no-double-publication


def test_a_dra_only_node_publishes_each_gpu_once() -> None:
    n = sim_node()
    capacity, _ = node_resources(n)
    v = evaluate_no_double_publication(NODE, slice_devices(resource_slices(n), NODE), capacity, None)
    assert capacity == {} and v.outcome is Outcome.PASS


def test_the_device_plugin_left_on_beside_the_dra_driver_publishes_every_gpu_twice() -> None:
    n = sim_node({"id": "dra-double-count", "pool": "h200", "node": 0})
    capacity, _ = node_resources(n)
    devices = slice_devices(resource_slices(n), NODE)
    plugin_pod = probe(n, [Visible(g) for g in n.present_gpus], "inventory-h200-0")
    v = evaluate_no_double_publication(NODE, devices, capacity, plugin_pod)
    assert capacity == {"nvidia.com/gpu": "8"} and v.outcome is Outcome.FAIL
    assert v.summary.startswith("8 GPUs (")
    assert "are published both by a device plugin (nvidia.com/gpu=8) and by the DRA driver gpu.nvidia.com " \
           "(8 devices)" in v.summary
    # Without a device-plugin probe the resource alone says it
    alone = evaluate_no_double_publication(NODE, devices, capacity, None)
    assert alone.outcome is Outcome.FAIL and alone.summary.startswith("its GPUs are published both")


def test_a_device_plugin_with_other_gpus_than_the_dra_driver_is_no_double_publication() -> None:
    n = sim_node({"id": "dra-double-count", "pool": "h200", "node": 0})
    devices = slice_devices(resource_slices(n), NODE)[:4]
    plugin_pod = probe(n, [Visible(g) for g in n.present_gpus[4:]], "inventory-h200-0")
    v = evaluate_no_double_publication(NODE, devices, {"nvidia.com/gpu": "4"}, plugin_pod)
    assert v.outcome is Outcome.PASS and "different GPUs" in v.summary


# -------------------------------------------------------------------------------------------------
# dra.claim-allocates-the-probed-device


def test_the_selector_claims_device_is_the_gpu_the_pod_sees() -> None:
    n = sim_node()
    devices = slice_devices(resource_slices(n), NODE)
    pod = pod_name("selector", NODE)
    v = evaluate_claim_allocates_probed_device(NODE, probe(n, [gpu(n, 5)], pod), [claim("c1", pod, "gpu", "gpu-5")],
                                               devices, min_gib=140)
    assert v.outcome is Outcome.PASS and v.observed == n.gpus[5].uuid, v.message()


def test_a_pod_seeing_another_gpu_than_its_claims_fails() -> None:
    n = sim_node()
    devices = slice_devices(resource_slices(n), NODE)
    v = evaluate_claim_allocates_probed_device(NODE, probe(n, [gpu(n, 1)]), [claim("c1", "p", "gpu", "gpu-5")],
                                               devices, min_gib=140)
    assert v.outcome is Outcome.FAIL
    assert v.summary == f"the claim was allocated gpu-5 ({n.gpus[5].uuid}) but the pod sees {n.gpus[1].uuid}"


@pytest.mark.parametrize("faults", [(), ({"id": "dra-prepares-wrong-device", "pool": "h200", "node": 0},)],
                         ids=["the healthy driver prepares the allocated GPU", "a driver preparing the next GPU"])
def test_the_gpu_the_driver_prepares_is_judged_against_the_allocation(faults) -> None:
    n = sim_node(*faults)
    allocated = {"status": {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-5"}]}}}}
    pod = pod_name("selector", NODE)
    prepared = dra_devices(n, allocated)  # what the node's DRA driver hands the container
    v = evaluate_claim_allocates_probed_device(NODE, probe(n, prepared, pod), [claim("c1", pod, "gpu", "gpu-5")],
                                               slice_devices(resource_slices(n), NODE), min_gib=140)
    if not faults:
        assert v.outcome is Outcome.PASS, v.message()
        return
    assert v.outcome is Outcome.FAIL
    assert v.summary == f"the claim was allocated gpu-5 ({n.gpus[5].uuid}) but the pod sees {n.gpus[6].uuid}"


def test_a_claim_pod_that_never_ran_or_a_device_too_small_fails() -> None:
    n = sim_node()
    devices = slice_devices(resource_slices(n), NODE)
    pending = sighting(pod_outcome("dra-selector-h200-0", None, message=CANNOT_ALLOCATE))
    v = evaluate_claim_allocates_probed_device(NODE, pending, [], devices, min_gib=140)
    assert v.outcome is Outcome.FAIL and "did not run to a probe report" in v.summary
    assert "cannot allocate all claims" in v.summary
    small = evaluate_claim_allocates_probed_device(NODE, probe(n, [gpu(n, 0)]), [claim("c", "p", "gpu", "gpu-0")],
                                                   devices, min_gib=200)
    assert small.outcome is Outcome.FAIL and "asked for at least 200 GiB" in small.summary
    none = evaluate_claim_allocates_probed_device(NODE, probe(n, [gpu(n, 0)]), [], devices, min_gib=1)
    assert none.outcome is Outcome.FAIL and none.summary == "the claim for one GPU was allocated 0 devices"


# -------------------------------------------------------------------------------------------------
# dra.unsatisfiable-selector-pending


def test_a_claim_nothing_matches_leaves_the_pod_pending_with_the_schedulers_reason() -> None:
    outcome = pod_outcome("dra-none-h200-0", None, message=CANNOT_ALLOCATE)
    v = evaluate_unsatisfiable_pending(NODE, outcome, [], budget_s=5)
    assert v.outcome is Outcome.PASS and "cannot allocate all claims" in v.summary


def test_a_claim_nothing_should_match_that_gets_a_device_fails() -> None:
    n = sim_node()
    outcome = pod_outcome("dra-none-h200-0", run_probe(n, [gpu(n, 0)]))  # placed and ran
    v = evaluate_unsatisfiable_pending(NODE, outcome, [claim("c", "dra-none-h200-0", "gpu", "gpu-0")], budget_s=5)
    assert v.outcome is Outcome.FAIL and "was allocated (gpu.nvidia.com/h200-0/gpu-0)" in v.summary


def test_a_pending_pod_without_the_schedulers_reason_fails() -> None:
    outcome = pod_outcome("dra-none-h200-0", None, message="0/1 nodes are available: 1 Insufficient cpu.")
    v = evaluate_unsatisfiable_pending(NODE, outcome, [], budget_s=5)
    assert v.outcome is Outcome.FAIL and "without the scheduler saying 'cannot allocate all claims'" in v.summary


# -------------------------------------------------------------------------------------------------
# dra.distinct-claims-distinct-devices


def test_two_claims_get_two_devices_and_the_pod_sees_both() -> None:
    n = sim_node()
    devices = slice_devices(resource_slices(n), NODE)
    claims = [claim("a", "p", "first", "gpu-2"), claim("b", "p", "second", "gpu-3")]
    v = evaluate_distinct_claims(NODE, probe(n, [gpu(n, 2), gpu(n, 3)]), claims, devices)
    assert v.outcome is Outcome.PASS, v.message()


def test_two_claims_given_one_device_fail() -> None:
    n = sim_node()
    devices = slice_devices(resource_slices(n), NODE)
    claims = [claim("a", "p", "first", "gpu-2"), claim("b", "p", "second", "gpu-2")]
    v = evaluate_distinct_claims(NODE, probe(n, [gpu(n, 2)]), claims, devices)
    assert v.outcome is Outcome.FAIL and v.summary == "two claims of one GPU each were allocated gpu-2, gpu-2"
    seen_other = evaluate_distinct_claims(NODE, probe(n, [gpu(n, 2), gpu(n, 4)]),
                                          [claim("a", "p", "first", "gpu-2"), claim("b", "p", "second", "gpu-3")],
                                          devices)
    assert seen_other.outcome is Outcome.FAIL and "but the pod sees" in seen_other.summary


def test_two_claims_need_two_gpus() -> None:
    n = sim_node()
    v = evaluate_distinct_claims(NODE, None, [], slice_devices(resource_slices(n), NODE)[:1])
    assert v.outcome is Outcome.NOT_TESTED and "publishes 1 full GPU" in v.summary


# -------------------------------------------------------------------------------------------------
# The objects the suite creates


def test_a_claim_pod_uses_its_claims_in_the_probe_container_and_is_placed_by_node_selector_only() -> None:
    p = make_cuda_probe_pod(name="dra-two-n", namespace="ns", run_id="r", check="dra", cuda="13.0.2", node="n",
                            gpu_count=0, resource_claims={"first": "dra-one-gpu", "second": "dra-one-gpu"})
    spec = p["spec"]
    assert spec["resourceClaims"] == [{"name": "first", "resourceClaimTemplateName": "dra-one-gpu"},
                                      {"name": "second", "resourceClaimTemplateName": "dra-one-gpu"}]
    assert spec["containers"][0]["resources"] == {"claims": [{"name": "first"}, {"name": "second"}]}
    assert "nodeName" not in spec and spec["nodeSelector"] == {"kubernetes.io/hostname": "n"}
    plain = make_cuda_probe_pod(name="x", namespace="ns", run_id="r", check="c", cuda="13.0.2", gpu_count=0)
    assert "resourceClaims" not in plain["spec"] and "resources" not in plain["spec"]["containers"][0]


def test_a_claim_template_carries_class_selectors_and_mode() -> None:
    t = make_resource_claim_template(name="t", namespace="ns", run_id="r", check="dra", requests=[
        ClaimRequest("gpu", "gpu.nvidia.com", (memory_selector(40),)),
        ClaimRequest("all", "mig.nvidia.com", mode="All")])
    assert t["apiVersion"] == "resource.k8s.io/v1" and t["kind"] == "ResourceClaimTemplate"
    one, every = t["spec"]["spec"]["devices"]["requests"]
    assert one == {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount",
                                              "count": 1, "selectors": [{"cel": {"expression": memory_selector(40)}}]}}
    assert every == {"name": "all", "exactly": {"deviceClassName": "mig.nvidia.com", "allocationMode": "All"}}
    with pytest.raises(ValueError, match="at least one request"):
        make_resource_claim_template(name="t", namespace="ns", run_id="r", check="dra", requests=[])
    with pytest.raises(RenderError, match="allocationMode must be ExactCount or All"):
        make_resource_claim_template(name="t", namespace="ns", run_id="r", check="dra",
                                     requests=[ClaimRequest("gpu", "gpu.nvidia.com", mode="Some")])


# -------------------------------------------------------------------------------------------------
# dra.selector-steers-scheduling


def cluster_devices(*faults: Mapping[str, Any]) -> dict[str, tuple[SliceDevice, ...]]:
    p = load_profile("h200-dra-only")
    cluster = expand(with_faults(p, list(faults)) if faults else p)
    return {name: slice_devices(resource_slices(cluster.node(name)), name) for name in ("h200-0", "h200-1")}


def test_one_product_and_driver_steer_by_driver_version_and_every_node_matches() -> None:
    devices = cluster_devices()
    steering = steering_attribute(devices)
    assert steering is not None
    assert steering == Steering("driverVersion", "580.159.3", ("h200-0", "h200-1"), ("h200-0", "h200-1"))
    assert steering.selector == \
        "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver(\"580.159.3\")) == 0"
    selector = compile_selector(steering.selector)
    for d in resource_slices(sim_node())[0]["spec"]["devices"]:  # type: ignore[index]
        assert selector.matches(device_activation("gpu.nvidia.com", d))


def test_a_value_only_one_nodes_gpus_have_is_what_the_claim_selects() -> None:
    devices = cluster_devices({"id": "dra-attr-wrong", "pool": "h200", "node": 0, "gpu": 3})
    steering = steering_attribute(devices)
    assert steering is not None and steering.splits
    assert (steering.attribute, steering.value, steering.matching) == ("productName", "NVIDIA A100-SXM4-40GB",
                                                                       ("h200-0",))
    assert steering.selector == "device.attributes['gpu.nvidia.com'].productName == \"NVIDIA A100-SXM4-40GB\""
    assert steering_attribute({"n": ()}) is None


def test_a_pod_the_scheduler_put_on_a_matching_node_with_a_matching_device_passes() -> None:
    n = sim_node()
    devices = cluster_devices()
    steering = steering_attribute(devices)
    assert steering is not None
    outcome = pod_outcome("dra-steer-cluster", run_probe(n, [gpu(n, 6)]))
    v = evaluate_selector_steers_scheduling(steering, outcome, sighting(outcome),
                                            [claim("c", "dra-steer-cluster", "gpu", "gpu-6")], devices)
    assert v.outcome is Outcome.PASS and v.node == NODE, v.message()
    assert v.summary == ("the scheduler placed the pod selecting driverVersion=580.159.3 on h200-0 (every node matches "
                         f"(h200-0, h200-1): the cluster has one driverVersion) with gpu-6 ({n.gpus[6].uuid})")


def test_a_pod_on_a_node_whose_gpus_do_not_match_or_given_another_device_fails() -> None:
    n = sim_node()
    devices = cluster_devices()
    outcome = pod_outcome("dra-steer-cluster", run_probe(n, [gpu(n, 6)]))  # it ran on h200-0
    elsewhere = Steering("productName", "NVIDIA B200", ("h200-1",), ("h200-0", "h200-1"))
    v = evaluate_selector_steers_scheduling(elsewhere, outcome, sighting(outcome),
                                            [claim("c", "dra-steer-cluster", "gpu", "gpu-6")], devices)
    assert v.outcome is Outcome.FAIL and v.node == NODE
    assert v.summary == ("the pod whose claim selects productName=NVIDIA B200 ran on h200-0, whose GPUs do not match "
                         "(only h200-1 of 2 nodes match)")
    here = Steering("productName", "NVIDIA B200", ("h200-0",), ("h200-0", "h200-1"))
    wrong = evaluate_selector_steers_scheduling(here, outcome, sighting(outcome),
                                                [claim("c", "dra-steer-cluster", "gpu", "gpu-6")], devices)
    assert wrong.outcome is Outcome.FAIL
    assert wrong.summary == (f"the claim was allocated gpu-6 ({n.gpus[6].uuid}) on h200-0 with "
                             "productName=NVIDIA H200, but the pod ran on h200-0 and selected productName=NVIDIA B200")
    pending = evaluate_selector_steers_scheduling(here, None, None, [], devices)
    assert pending.outcome is Outcome.FAIL and pending.summary == "the attribute-selector pod was not observed"


# -------------------------------------------------------------------------------------------------
# dra.shared-claim-same-device


def test_two_containers_sharing_a_claim_see_its_device_and_the_third_none() -> None:
    n = sim_node()
    devices = slice_devices(resource_slices(n), NODE)
    one = probe(n, [gpu(n, 3)])
    v = evaluate_shared_claim(NODE, one, one, probe(n, []), [claim("c", "p", "gpu", "gpu-3")], devices)
    assert v.outcome is Outcome.PASS, v.message()
    assert v.summary == f"both containers using the claim see gpu-3 ({n.gpus[3].uuid}); the one without sees no GPU"


def test_a_container_without_the_claim_that_sees_gpus_or_a_sharer_seeing_another_fails() -> None:
    n = sim_node()
    devices = slice_devices(resource_slices(n), NODE)
    one = probe(n, [gpu(n, 3)])
    leaky = evaluate_shared_claim(NODE, one, one, probe(n, [gpu(n, 0), gpu(n, 1)]), [claim("c", "p", "gpu", "gpu-3")],
                                  devices)
    assert leaky.outcome is Outcome.FAIL
    assert leaky.summary == f"the container without the claim sees 2 GPUs: {n.gpus[0].uuid}, {n.gpus[1].uuid}"
    other = evaluate_shared_claim(NODE, one, probe(n, [gpu(n, 4)]), probe(n, []), [claim("c", "p", "gpu", "gpu-3")],
                                  devices)
    assert other.outcome is Outcome.FAIL
    assert other.summary == (f"the claim both containers use was allocated gpu-3 ({n.gpus[3].uuid}) but the sidecar "
                             f"container sees {n.gpus[4].uuid}")


# -------------------------------------------------------------------------------------------------
# dra.claim-reserved-then-deleted


def reserved(name: str, pod: str, *consumers: str) -> Allocation:
    return Allocation(name, pod, "gpu", (AllocatedDevice("gpu", "gpu.nvidia.com", NODE, "gpu-0"),), consumers)


def test_allocated_claims_are_reserved_for_their_pod_as_the_api_says() -> None:
    raw = {"metadata": {"name": "p-gpu-x", "ownerReferences": [{"kind": "Pod", "name": "p"}]},
           "status": {"allocation": {"devices": {"results": []}},
                      "reservedFor": [{"resource": "pods", "name": "p", "uid": "1"}]}}
    a = allocation_of(raw)
    assert a is not None and a.reserved_for == ("p",)


def test_claims_reserved_while_their_pods_ran_and_gone_after_pass() -> None:
    v = evaluate_claim_lifecycle(NODE, {"p": [reserved("p-gpu-1", "p", "p")], "q": [reserved("q-gpu-2", "q", "q")]},
                                 ["someone-elses"])
    assert v.outcome is Outcome.PASS, v.message()
    assert v.summary == "2 claims were reserved for their pods while they ran and deleted with them"


def test_a_claim_reserved_for_nobody_or_outliving_its_pod_fails() -> None:
    unreserved = evaluate_claim_lifecycle(NODE, {"p": [reserved("p-gpu-1", "p")]}, [])
    assert unreserved.outcome is Outcome.FAIL
    assert unreserved.summary == "claim p-gpu-1 was allocated while pod p ran but status.reservedFor named nobody"
    stale = evaluate_claim_lifecycle(NODE, {"p": [reserved("p-gpu-1", "p", "p")]}, ["p-gpu-1"])
    assert stale.outcome is Outcome.FAIL and stale.summary == "1 generated claim(s) outlived their pods: p-gpu-1"
    unknown = evaluate_claim_lifecycle(NODE, {"p": [reserved("p-gpu-1", "p", "p")]}, [], "watch broke")
    assert unknown.outcome is Outcome.NOT_TESTED and unknown.summary.endswith("is unknown: watch broke")
    assert evaluate_claim_lifecycle(NODE, {}, []).outcome is Outcome.NOT_TESTED


# -------------------------------------------------------------------------------------------------
# dra.count-with-match-attribute


def test_two_devices_with_one_product_both_seen_pass() -> None:
    n = sim_node()
    devices = slice_devices(resource_slices(n), NODE)
    v = evaluate_matched_pair(NODE, probe(n, [gpu(n, 2), gpu(n, 3)]), [claim("c", "p", "gpus", "gpu-2", "gpu-3")],
                              devices)
    assert v.outcome is Outcome.PASS, v.message()
    assert v.summary == "two devices (gpu-2, gpu-3) with productName=NVIDIA H200, both seen by the pod"


def test_a_pair_breaking_the_constraint_or_not_seen_fails() -> None:
    n = sim_node({"id": "dra-attr-wrong", "pool": "h200", "node": 0, "gpu": 3})
    devices = slice_devices(resource_slices(n), NODE)
    broken = evaluate_matched_pair(NODE, probe(n, [gpu(n, 2), gpu(n, 3)]), [claim("c", "p", "gpus", "gpu-2", "gpu-3")],
                                   devices)
    assert broken.outcome is Outcome.FAIL
    assert broken.summary == ("the constraint matchAttribute gpu.nvidia.com/productName did not hold: "
                              "gpu-2=NVIDIA H200, gpu-3=NVIDIA A100-SXM4-40GB")
    one = evaluate_matched_pair(NODE, probe(n, [gpu(n, 2)]), [claim("c", "p", "gpus", "gpu-2")], devices)
    assert one.outcome is Outcome.FAIL and one.summary == "the claim for two GPUs (count 2) was allocated gpu-2"
    unseen = evaluate_matched_pair(NODE, probe(n, [gpu(n, 4)]), [claim("c", "p", "gpus", "gpu-4", "gpu-5")], devices)
    assert unseen.outcome is Outcome.FAIL and unseen.summary.endswith(f"but the pod sees {n.gpus[4].uuid}")
    assert evaluate_matched_pair(NODE, None, [], devices[:1]).outcome is Outcome.NOT_TESTED


def test_a_pair_template_carries_the_count_and_the_match_attribute_constraint() -> None:
    t = make_resource_claim_template(name="t", namespace="ns", run_id="r", check="dra",
                                     requests=[ClaimRequest("gpus", "gpu.nvidia.com", count=2)],
                                     match_attributes=["gpu.nvidia.com/productName"])
    devices = t["spec"]["spec"]["devices"]
    assert devices["requests"][0]["exactly"]["count"] == 2
    assert devices["constraints"] == [{"matchAttribute": "gpu.nvidia.com/productName"}]
    with pytest.raises(ValueError, match="fully qualified"):
        make_resource_claim_template(name="t", namespace="ns", run_id="r", check="dra",
                                     requests=[ClaimRequest("gpus", "gpu.nvidia.com", count=2)],
                                     match_attributes=["productName"])


def test_a_shared_claim_pod_gives_the_sidecar_the_same_claim_and_the_bystander_none() -> None:
    p = make_cuda_probe_pod(name="dra-shared-n", namespace="ns", run_id="r", check="dra", cuda="13.0.2", node="n",
                            gpu_count=0, resource_claims={"gpu": "dra-one-gpu"}, sidecar_claims=["gpu"],
                            bystander=True)
    probe_c, sidecar, bystander = p["spec"]["containers"]
    assert (probe_c["name"], sidecar["name"], bystander["name"]) == ("probe", "sidecar", "bystander")
    assert probe_c["resources"] == sidecar["resources"] == {"claims": [{"name": "gpu"}]}
    assert "resources" not in bystander
    assert p["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "dra-one-gpu"}]
    with pytest.raises(ValueError, match="pod claims the pod does not have"):
        make_cuda_probe_pod(name="x", namespace="ns", run_id="r", check="dra", cuda="13.0.2", gpu_count=0,
                            resource_claims={"gpu": "t"}, sidecar_claims=["other"])


def test_the_pci_address_is_compared_under_the_name_a_25_3_driver_publishes_it() -> None:
    """Releases up to 25.8 publish the PCI address as the driver's own ``pcieBusID``
    (tests/data/real/dra/): it is compared with the probe like ``resource.kubernetes.io/pciBusID``."""
    def renamed(n: SimNode, value: str | None = None) -> list[dict[str, Any]]:
        slices = resource_slices(n)
        for d in slices[0]["spec"]["devices"]:  # type: ignore[index]
            pci = d["attributes"].pop("resource.kubernetes.io/pciBusID")
            d["attributes"]["pcieBusID"] = {"string": value or pci["string"]} if d["name"] == "gpu-3" else pci
        return slices  # type: ignore[return-value]

    n = sim_node()
    devices = slice_devices(renamed(n), NODE)
    assert devices[3].pci_bus_id == ("pcieBusID", n.gpus[3].pci_bus_id[4:].lower())
    assert evaluate_attributes_match_hardware(NODE, devices, whole_node(n)).outcome is Outcome.PASS
    v = evaluate_attributes_match_hardware(NODE, slice_devices(renamed(n, "0000:99:00.0"), NODE), whole_node(n))
    assert v.outcome is Outcome.FAIL
    assert v.summary.startswith("the DRA driver publishes devices that are not the node's hardware: gpu-3 publishes "
                                "pcieBusID='0000:99:00.0' but the probe for")
