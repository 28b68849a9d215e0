"""The DRA checks' comparisons, pinned where mutation testing (scripts/mutation-score) found them
unpinned: a pod that sees its allocated GPU *plus another* fails every "sees exactly" check, and
every branch of every check gives the verdict recorded in tests/data/verdicts/dra.json (its
outcome and the words a reader acts on), on facts from the simulated h200-dra-only node with one
thing changed per case."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from test_checks_dra import (
    CANNOT_ALLOCATE,
    NODE,
    claim,
    gpu,
    pod_outcome,
    real_prepare_errors,
    run_probe,
    sim_node,
    whole_node,
)
from verdict_record import check_recording

from gpuconf.checks import dra
from gpuconf.checks.dra import Allocation, SliceDevice, Steering
from gpuconf.checks.dra_labels import evaluate_labels_agree_with_dra
from gpuconf.checks.isolation import Sighting, sighting
from gpuconf.sim.node_facts import node_labels, resource_slices
from gpuconf.sim.profile import SimNode
from gpuconf.verdict import Outcome, Verdict

N = sim_node()
DEVICES = dra.slice_devices(resource_slices(N), NODE)
LABELS = node_labels(N)
UUID = [g.uuid for g in N.gpus]
#: The driverVersion the node's slices publish (semver, "580.159.3" for driver 580.159.03).
DRIVER = str(DEVICES[0].attributes["driverVersion"])
MAJOR, MINOR, PATCH = DRIVER.split(".")


def seen(*indexes: int, edit: Callable[[dict[str, Any]], None] | None = None, node: SimNode = N,
         name: str = "dra-pod") -> Sighting:
    """What a pod given GPUs ``indexes`` sees, its probe document edited by ``edit``."""
    code, out = run_probe(node, [gpu(node, i) for i in indexes])
    if edit is not None:
        doc = json.loads(out)
        edit(doc)
        out = json.dumps(doc)
    return sighting(pod_outcome(name, (code, out)))


def no_nvml(doc: dict[str, Any]) -> None:
    doc["nvml"] = {"available": False, "reason": "nvmlInit_v2: Driver Not Loaded"}


def cuda_failed(doc: dict[str, Any]) -> None:
    doc["init"] = {"call": "cudaFree(0)", "code": 999, "name": "cudaErrorUnknown", "message": "unknown error",
                   "ms": 0.05, "timed_out": False}
    doc["devices"] = []


def unreadable(doc: dict[str, Any]) -> None:
    """A container given the driver (libcuda injected) whose CUDA and NVML both fail."""
    doc["libcuda"] = json.loads(run_probe(N, [gpu(N, 0)])[1])["libcuda"]
    cuda_failed(doc)
    no_nvml(doc)


def compat_libcuda(doc: dict[str, Any]) -> None:
    doc["libcuda"]["compat"] = True


def slice_with(index: int, **changes: Any) -> list[SliceDevice]:
    """The node's devices with device ``index`` changed: attribute=value pairs (None drops one),
    or memory_bytes."""
    out = list(DEVICES)
    d = out[index]
    memory = changes.pop("memory_bytes", d.memory_bytes)
    attributes = {k: v for k, v in {**d.attributes, **changes}.items() if v is not None}
    out[index] = dataclasses.replace(d, attributes=attributes, memory_bytes=memory)
    return out


def failing(text: str) -> Sighting:
    return Sighting("pod dra-x", None, text)


# -------------------------------------------------------------------------------------------------
# A pod that sees its allocated GPU plus another


def test_a_selector_pod_that_sees_its_allocated_gpu_plus_another_fails() -> None:
    pod = dra.pod_name("selector", NODE)
    v = dra.evaluate_claim_allocates_probed_device(NODE, seen(5, 6, name=pod), [claim("c1", pod, "gpu", "gpu-5")],
                                                   DEVICES, min_gib=140)
    assert v.outcome is Outcome.FAIL, v.message()
    assert v.summary == f"the claim was allocated gpu-5 ({UUID[5]}) but the pod sees {UUID[5]}, {UUID[6]}"
    assert v.expected == f"exactly {UUID[5]}" and v.observed == f"{UUID[5]}, {UUID[6]}"


def test_a_steered_pod_that_sees_its_device_plus_another_fails() -> None:
    steering = Steering("productName", "NVIDIA H200", (NODE,), (NODE,))
    v = dra.evaluate_selector_steers_scheduling(steering, pod_outcome("p", run_probe(N, [gpu(N, 2)])), seen(2, 3),
                                                [claim("c", "p", "gpu", "gpu-2")], {NODE: DEVICES})
    assert v.outcome is Outcome.FAIL and v.summary.endswith(f"but the pod sees {UUID[2]}, {UUID[3]}"), v.message()


@pytest.mark.parametrize("who", ["probe", "sidecar"])
def test_a_container_sharing_a_claim_that_sees_its_device_plus_another_fails(who: str) -> None:
    views = {"probe": seen(4), "sidecar": seen(4), "bystander": seen()}
    views[who] = seen(4, 7)
    v = dra.evaluate_shared_claim(NODE, views["probe"], views["sidecar"], views["bystander"],
                                  [claim("c", "p", "gpu", "gpu-4")], DEVICES)
    assert v.outcome is Outcome.FAIL and f"the {who} container sees {UUID[4]}, {UUID[7]}" in v.summary, v.message()


def test_two_claims_whose_pod_sees_a_third_gpu_fail() -> None:
    claims = [claim("a", "p", "first", "gpu-2"), claim("b", "p", "second", "gpu-3")]
    v = dra.evaluate_distinct_claims(NODE, seen(2, 3, 4), claims, DEVICES)
    assert v.outcome is Outcome.FAIL, v.message()
    assert v.summary == f"the claims were allocated {', '.join(sorted(UUID[2:4]))} but the pod sees " \
                        f"{UUID[2]}, {UUID[3]}, {UUID[4]}"


def test_a_matched_pair_whose_pod_sees_a_third_gpu_fails() -> None:
    v = dra.evaluate_matched_pair(NODE, seen(0, 1, 2), [claim("c", "p", "gpu", "gpu-0", "gpu-1")], DEVICES)
    assert v.outcome is Outcome.FAIL and "exactly the two allocated GPUs" == v.expected, v.message()


# -------------------------------------------------------------------------------------------------
# Every branch, its verdict recorded


def lifecycle(reserved: Mapping[str, tuple[str, ...]]) -> dict[str, list[Allocation]]:
    return {pod: [Allocation(f"{pod}-claim-{i}", pod, "gpu", (), r) for i, r in enumerate(rs)]
            for pod, rs in {p: [reserved[p]] for p in reserved}.items()}


def other_node() -> list[SliceDevice]:
    """The same GPUs published by another node, with another product (a mixed cluster)."""
    return [dataclasses.replace(d, node="a100-0", pool="a100-0",
                                attributes={**d.attributes, "productName": "NVIDIA A100-SXM4-80GB"})
            for d in DEVICES[:2]]


def by_labels(labels: Mapping[str, str]) -> Callable[[], Any]:
    """labels.agree-with-dra on these GFD labels (they were dra.attributes-match-hardware's before issue 27)."""
    return lambda: evaluate_labels_agree_with_dra(NODE, labels, DEVICES)


def mig_instance() -> list[SliceDevice]:
    """The node's devices and a MIG instance of GPU 0 that CUDA in the whole-node probe does not list."""
    mig = SliceDevice(NODE, dra.GPU_DRIVER, NODE, "gpu-0-mig-1g18gb-0", {
        "type": "mig", "uuid": "MIG-00000000-0000-0000-0000-000000000000", "parentUUID": UUID[0],
        "productName": "NVIDIA H200"})
    return [*DEVICES, mig]


def no_driver_version(devices: list[SliceDevice], node: str, products: tuple[str, str]) -> list[SliceDevice]:
    """Two GPUs of ``node`` with two products and no driverVersion (a node of mixed GPUs)."""
    return [dataclasses.replace(d, node=node, pool=node, attributes={
        **{k: v for k, v in d.attributes.items() if k != "driverVersion"}, "productName": p})
        for d, p in zip(devices, products, strict=True)]


STEER = Steering("productName", "NVIDIA H200", (NODE,), ("a100-0", NODE))
EVERYWHERE = Steering("driverVersion", DRIVER, ("a100-0", NODE), ("a100-0", NODE))
ADVERTISED = {"nvidia.com/gpu": "8", "cpu": "64"}
MANY = [f"GPU-{i:08d}-0000-0000-0000-000000000000" for i in range(5)]

CASES: dict[str, Callable[[], Any]] = {
    # what the ResourceSlices publish
    "skip: v1beta2 only": lambda: dra.dra_skip_reason(serves_v1=False, device_classes=[], served="v1beta2"),
    "skip: no DRA": lambda: dra.dra_skip_reason(serves_v1=False, device_classes=[]),
    "skip: compute domains only": lambda: dra.dra_skip_reason(serves_v1=True, device_classes=list(
        dra.COMPUTE_DOMAIN_CLASSES)),
    "skip: no device class": lambda: dra.dra_skip_reason(serves_v1=True, device_classes=[]),
    "skip: other classes": lambda: dra.dra_skip_reason(serves_v1=True, device_classes=["x.example.com"]),
    "skip: runs": lambda: dra.dra_skip_reason(serves_v1=True, device_classes=[dra.GPU_CLASS, "x"], served="v1"),
    "node skip": lambda: (dra.node_skip_reason(NODE, []), dra.node_skip_reason(NODE, DEVICES)),
    "threshold: a device without memory": lambda: dra.selector_threshold_gib(slice_with(0, memory_bytes=None)),
    "threshold": lambda: (dra.selector_threshold_gib(DEVICES), dra.selector_threshold_gib([]),
                          dra.selector_threshold_gib(slice_with(0, memory_bytes=2**29)),
                          dra.selector_threshold_gib(slice_with(0, type="mig"))),
    "selectors": lambda: (dra.memory_selector(140), dra.UNSATISFIABLE_SELECTOR, STEER.selector, EVERYWHERE.selector,
                          STEER.splits, EVERYWHERE.splits),
    "pod names": lambda: (dra.pod_name("all", NODE), dra.pod_name("selector", "n" * 80)),
    "allocation": lambda: dra.allocation_of({
        "metadata": {"name": "c1", "annotations": {dra.POD_CLAIM_ANNOTATION: "gpu"},
                     "ownerReferences": [{"kind": "Pod", "name": "p", "controller": True}]},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": dra.GPU_DRIVER, "pool": NODE, "device": "gpu-1"}]}},
            "reservedFor": [{"resource": "pods", "name": "p"}, {"resource": "pods", "name": "q", "apiGroup": "x"},
                            {"resource": "jobs", "name": "j"}]}}),
    "allocation: none": lambda: (dra.allocation_of({"metadata": {"name": "c"}, "status": {}}),
                                 dra.allocation_of({"metadata": {"name": "c"}, "status": {"allocation": {}}})),
    "prepare failures": lambda: dra.prepare_failures([
        *real_prepare_errors(), "unrelated", "error creating GPU instance for 'gpu-0-mig-1g'",
        "Warning FailedPrepareDynamicResources: error preparing devices for claim ns/c:uid: requested device is "
        "not allocatable: gpu-9"]),
    # dra.attributes-match-hardware
    "attributes: healthy": lambda: dra.evaluate_attributes_match_hardware(NODE, DEVICES, whole_node(N)),
    "attributes: labels only": lambda: dra.evaluate_attributes_match_hardware(
        NODE, DEVICES, failing("pod dra-all-h200-0 produced no probe output (Pending)")),
    "attributes: nothing": lambda: dra.evaluate_attributes_match_hardware(
        NODE, DEVICES, failing("pod dra-all-h200-0 produced no probe output (Pending)")),
    "attributes: nothing, no sighting": lambda: dra.evaluate_attributes_match_hardware(NODE, DEVICES, None),
    "attributes: prepare error": lambda: dra.evaluate_attributes_match_hardware(
        NODE, DEVICES, whole_node(N),
        ["error preparing devices for claim ns/c:uid: requested device is not allocatable: gpu-2"]),
    "attributes: prepare error only": lambda: dra.evaluate_attributes_match_hardware(
        NODE, DEVICES, None, ["requested device is not allocatable: gpu-2"]),
    "attributes: nvml absent, a gpu unseen": lambda: dra.evaluate_attributes_match_hardware(
        NODE, DEVICES, seen(*range(7), edit=no_nvml)),
    "attributes: a gpu unseen": lambda: dra.evaluate_attributes_match_hardware(
        NODE, DEVICES, seen(*range(7))),
    "attributes: a gpu unpublished": lambda: dra.evaluate_attributes_match_hardware(
        NODE, DEVICES[:7], whole_node(N)),
    "attributes: no uuid": lambda: dra.evaluate_attributes_match_hardware(
        NODE, slice_with(1, uuid=None), whole_node(N)),
    "attributes: productName": lambda: dra.evaluate_attributes_match_hardware(
        NODE, slice_with(3, productName="NVIDIA H100 80GB HBM3"), whole_node(N)),
    "attributes: productName, cuda only": lambda: dra.evaluate_attributes_match_hardware(
        NODE, slice_with(3, productName="NVIDIA H100 80GB HBM3"), seen(*range(8), edit=no_nvml)),
    "attributes: productName case": lambda: dra.evaluate_attributes_match_hardware(
        NODE, slice_with(3, productName=" nvidia h200 "), whole_node(N)),
    "attributes: brand": lambda: dra.evaluate_attributes_match_hardware(
        NODE, slice_with(3, brand="GeForce"), whole_node(N)),
    "attributes: compute capability": lambda: dra.evaluate_attributes_match_hardware(
        NODE, slice_with(3, cudaComputeCapability="9.1"), whole_node(N)),
    "attributes: compute capability 9.0.0": lambda: dra.evaluate_attributes_match_hardware(
        NODE, slice_with(3, cudaComputeCapability="9.0.0"), whole_node(N)),
    "attributes: pci": lambda: dra.evaluate_attributes_match_hardware(
        NODE, slice_with(3, **{"resource.kubernetes.io/pciBusID": "0000:99:00.0"}), whole_node(N)),
    "attributes: pci, short form": lambda: dra.evaluate_attributes_match_hardware(
        NODE, slice_with(0, **{"resource.kubernetes.io/pciBusID": "0000:18:00.0"}), whole_node(N)),
    "attributes: pci, 25.3 name": lambda: dra.evaluate_attributes_match_hardware(
        NODE, slice_with(0, **{"resource.kubernetes.io/pciBusID": None, "pcieBusID": "0000:19:00.0"}),
        whole_node(N)),
    "attributes: pci, unreadable": lambda: dra.evaluate_attributes_match_hardware(
        NODE, slice_with(0, **{"resource.kubernetes.io/pciBusID": "zz:18:00.0"}), whole_node(N)),
    "attributes: memory, 2 % off": lambda: dra.evaluate_attributes_match_hardware(
        NODE, slice_with(3, memory_bytes=int(DEVICES[3].memory_bytes * 0.98)), whole_node(N)),
    "attributes: memory, 0.5 % off": lambda: dra.evaluate_attributes_match_hardware(
        NODE, slice_with(3, memory_bytes=int(DEVICES[3].memory_bytes * 0.995)), whole_node(N)),
    "attributes: driverVersion": lambda: dra.evaluate_attributes_match_hardware(
        NODE, slice_with(3, driverVersion=f"{MAJOR}.{MINOR}.{int(PATCH) + 1}"), whole_node(N)),
    "attributes: driverVersion, trailing zero": lambda: dra.evaluate_attributes_match_hardware(
        NODE, slice_with(3, driverVersion=f"{DRIVER}.0"), whole_node(N)),
    "attributes: cudaDriverVersion": lambda: dra.evaluate_attributes_match_hardware(
        NODE, slice_with(3, cudaDriverVersion="12.9"), whole_node(N)),
    "attributes: cudaDriverVersion, compat libcuda": lambda: dra.evaluate_attributes_match_hardware(
        NODE, slice_with(3, cudaDriverVersion="12.9"), seen(*range(8), edit=compat_libcuda)),
    "attributes: architecture": lambda: dra.evaluate_attributes_match_hardware(
        NODE, slice_with(3, architecture="Blackwell"), whole_node(N)),
    "attributes: several wrong": lambda: dra.evaluate_attributes_match_hardware(
        NODE, slice_with(2, brand="GeForce", driverVersion="1.2.3"), whole_node(N)),
    "attributes: cuda failed": lambda: dra.evaluate_attributes_match_hardware(
        NODE, slice_with(2, productName="NVIDIA H100"), seen(*range(8), edit=cuda_failed)),
    "labels: product shared": by_labels({**LABELS, "nvidia.com/gpu.product": "NVIDIA-H200-SHARED"}),
    "labels: product mig": by_labels({**LABELS, "nvidia.com/gpu.product": "NVIDIA-H200-MIG-1g.18gb"}),
    "labels: product wrong": by_labels({"nvidia.com/gpu.product": "NVIDIA-H100-SXM5-80GB"}),
    "labels: family": by_labels({"nvidia.com/gpu.family": "ampere"}),
    "labels: compute": by_labels({"nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "0"}),
    "labels: compute major only": by_labels({"nvidia.com/gpu.compute.major": "8"}),
    "labels: compute minor only": by_labels({"nvidia.com/gpu.compute.minor": "1"}),
    "labels: memory": by_labels({"nvidia.com/gpu.memory": "81559"}),
    "labels: memory unreadable": by_labels({"nvidia.com/gpu.memory": "81559Mi"}),
    "labels: driver": by_labels({"nvidia.com/cuda.driver.major": "570", "nvidia.com/cuda.driver.minor": "95",
                                 "nvidia.com/cuda.driver.rev": "05"}),
    "labels: driver partial": by_labels({"nvidia.com/cuda.driver.major": "570", "nvidia.com/cuda.driver.minor": "95"}),
    "labels: cuda runtime": by_labels({"nvidia.com/cuda.runtime.major": "12", "nvidia.com/cuda.runtime.minor": "8"}),
    "labels: cuda runtime major only": by_labels({"nvidia.com/cuda.runtime.major": "12"}),
    "labels: cuda runtime minor only": by_labels({"nvidia.com/cuda.runtime.minor": "8"}),
    "labels: count": by_labels({"nvidia.com/gpu.count": "7"}),
    "labels: count unreadable": by_labels({"nvidia.com/gpu.count": "eight"}),
    "attributes: a MIG instance CUDA does not list": lambda: dra.evaluate_attributes_match_hardware(
        NODE, mig_instance(), whole_node(N)),
    "attributes: two devices of one unseen GPU": lambda: dra.evaluate_attributes_match_hardware(
        NODE, [*DEVICES, dataclasses.replace(DEVICES[7], name="gpu-7-again")], seen(*range(7))),
    "attributes: memory exactly 1 % off": lambda: dra.evaluate_attributes_match_hardware(
        NODE, slice_with(3, memory_bytes=N.gpus[3].memory_mib * 2**20 * 100 // 99), whole_node(N)),
    # dra.no-double-publication
    "double: one GPU advertised": lambda: dra.evaluate_no_double_publication(
        NODE, DEVICES, {"nvidia.com/gpu": "1"}, seen(0)),
    "double: three gpus": lambda: dra.evaluate_no_double_publication(NODE, DEVICES, ADVERTISED, seen(0, 1, 2)),
    "double: nothing advertised": lambda: dra.evaluate_no_double_publication(
        NODE, DEVICES, {"cpu": "64", "nvidia.com/gpu": "0", "nvidia.com/mig-1g.18gb": "x"}, None),
    "double: same gpus": lambda: dra.evaluate_no_double_publication(NODE, DEVICES, ADVERTISED, seen(0, 1, 2, 3)),
    "double: two gpus": lambda: dra.evaluate_no_double_publication(NODE, DEVICES, ADVERTISED, seen(0, 1)),
    "double: mig resource": lambda: dra.evaluate_no_double_publication(
        NODE, DEVICES, {"nvidia.com/mig-1g.18gb": "7"}, seen(6)),
    "double: other gpus": lambda: dra.evaluate_no_double_publication(NODE, DEVICES[:4], ADVERTISED, seen(4, 5)),
    "double: plugin pod saw nothing": lambda: dra.evaluate_no_double_publication(
        NODE, DEVICES[:4], ADVERTISED, seen(edit=lambda d: d.update(devices=[]))),
    "double: plugin pod failed": lambda: dra.evaluate_no_double_publication(
        NODE, DEVICES, ADVERTISED, failing("pod dp-h200-0 produced no probe output (Pending)")),
    "double: no plugin pod": lambda: dra.evaluate_no_double_publication(NODE, DEVICES, ADVERTISED, None),
    "double: nvml absent": lambda: dra.evaluate_no_double_publication(NODE, DEVICES, ADVERTISED,
                                                                      seen(0, edit=no_nvml)),
    # dra.claim-allocates-the-probed-device
    "selector: passes": lambda: dra.evaluate_claim_allocates_probed_device(
        NODE, seen(5), [claim("c1", "p", "gpu", "gpu-5")], DEVICES, min_gib=140),
    "selector: not observed": lambda: dra.evaluate_claim_allocates_probed_device(NODE, None, [], DEVICES, min_gib=1),
    "selector: pending": lambda: dra.evaluate_claim_allocates_probed_device(
        NODE, sighting(pod_outcome("dra-selector-h200-0", None, message=CANNOT_ALLOCATE)), [], DEVICES, min_gib=1),
    "selector: two devices": lambda: dra.evaluate_claim_allocates_probed_device(
        NODE, seen(5), [claim("c1", "p", "gpu", "gpu-5", "gpu-6")], DEVICES, min_gib=1),
    "selector: unpublished device": lambda: dra.evaluate_claim_allocates_probed_device(
        NODE, seen(5), [claim("c1", "p", "gpu", "gpu-99")], DEVICES, min_gib=1),
    "selector: sees another": lambda: dra.evaluate_claim_allocates_probed_device(
        NODE, seen(1), [claim("c1", "p", "gpu", "gpu-5")], DEVICES, min_gib=1),
    "selector: sees none": lambda: dra.evaluate_claim_allocates_probed_device(
        NODE, seen(), [claim("c1", "p", "gpu", "gpu-5")], DEVICES, min_gib=1),
    "selector: too small": lambda: dra.evaluate_claim_allocates_probed_device(
        NODE, seen(5), [claim("c1", "p", "gpu", "gpu-5")], DEVICES, min_gib=200),
    "selector: 0.5 % short": lambda: dra.evaluate_claim_allocates_probed_device(
        NODE, seen(5), [claim("c1", "p", "gpu", "gpu-5")], DEVICES,
        min_gib=round(N.gpus[5].memory_mib * 2**20 / 0.995) // 2**30),
    # dra.unsatisfiable-selector-pending
    "pending: passes": lambda: dra.evaluate_unsatisfiable_pending(
        NODE, pod_outcome("dra-none-h200-0", None, message=CANNOT_ALLOCATE), [], budget_s=5),
    "pending: reason in an event": lambda: dra.evaluate_unsatisfiable_pending(
        NODE, pod_outcome("dra-none-h200-0", None, message="0/1 nodes are available",
                          events=[{"type": "Warning", "reason": "FailedScheduling", "message": CANNOT_ALLOCATE}]),
        [], budget_s=5),
    "pending: not observed": lambda: dra.evaluate_unsatisfiable_pending(NODE, None, [], budget_s=5),
    "pending: placed": lambda: dra.evaluate_unsatisfiable_pending(
        NODE, pod_outcome("dra-none-h200-0", run_probe(N, [gpu(N, 0)])), [claim("c", "p", "gpu", "gpu-0")],
        budget_s=5),
    "pending: allocated, not placed": lambda: dra.evaluate_unsatisfiable_pending(
        NODE, pod_outcome("dra-none-h200-0", None, message=CANNOT_ALLOCATE), [claim("c", "p", "gpu", "gpu-0")],
        budget_s=5),
    "pending: placed, nothing allocated": lambda: dra.evaluate_unsatisfiable_pending(
        NODE, pod_outcome("dra-none-h200-0", run_probe(N, [])), [], budget_s=5),
    "pending: no message, reason in an event": lambda: dra.evaluate_unsatisfiable_pending(
        NODE, pod_outcome("dra-none-h200-0", None, message=None, events=[
            {"type": "Warning", "reason": "FailedScheduling", "message": "0/1 nodes are available: 1 Insufficient cpu."}
        ]), [], budget_s=5),
    "pending: other reason": lambda: dra.evaluate_unsatisfiable_pending(
        NODE, pod_outcome("dra-none-h200-0", None, message="0/1 nodes are available: 1 Insufficient cpu."), [],
        budget_s=5.4),
    # dra.distinct-claims-distinct-devices
    "distinct: passes": lambda: dra.evaluate_distinct_claims(
        NODE, seen(2, 3), [claim("a", "p", "first", "gpu-2"), claim("b", "p", "second", "gpu-3")], DEVICES),
    "distinct: one gpu published": lambda: dra.evaluate_distinct_claims(NODE, None, [], DEVICES[:1]),
    "distinct: two gpus published": lambda: dra.evaluate_distinct_claims(
        NODE, seen(0, 1), [claim("a", "p", "first", "gpu-0"), claim("b", "p", "second", "gpu-1")], DEVICES[:2]),
    "distinct: not run": lambda: dra.evaluate_distinct_claims(NODE, None, [], DEVICES),
    "distinct: same device": lambda: dra.evaluate_distinct_claims(
        NODE, seen(2), [claim("a", "p", "first", "gpu-2"), claim("b", "p", "second", "gpu-2")], DEVICES),
    "distinct: one claim, two devices": lambda: dra.evaluate_distinct_claims(
        NODE, seen(2, 3), [claim("a", "p", "first", "gpu-2", "gpu-3")], DEVICES),
    "distinct: three devices": lambda: dra.evaluate_distinct_claims(
        NODE, seen(2, 3), [claim("a", "p", "first", "gpu-2"), claim("b", "p", "second", "gpu-3", "gpu-4")], DEVICES),
    "distinct: nothing allocated": lambda: dra.evaluate_distinct_claims(
        NODE, seen(2, 3), [claim("a", "p", "first"), claim("b", "p", "second")], DEVICES),
    "distinct: sees one": lambda: dra.evaluate_distinct_claims(
        NODE, seen(2), [claim("a", "p", "first", "gpu-2"), claim("b", "p", "second", "gpu-3")], DEVICES),
    "distinct: sees another": lambda: dra.evaluate_distinct_claims(
        NODE, seen(2, 4), [claim("a", "p", "first", "gpu-2"), claim("b", "p", "second", "gpu-3")], DEVICES),
    "distinct: one unpublished": lambda: dra.evaluate_distinct_claims(
        NODE, seen(2, 3), [claim("a", "p", "first", "gpu-2"), claim("b", "p", "second", "gpu-99")], DEVICES),
    # steering
    "steering: mixed products": lambda: dra.steering_attribute({NODE: DEVICES, "a100-0": other_node()}),
    "steering: one product": lambda: dra.steering_attribute({NODE: DEVICES, "h200-1": DEVICES[:2]}),
    "steering: the rarer product": lambda: dra.steering_attribute(
        {NODE: DEVICES[:1], "a100-0": other_node()[:1], "a100-1": [dataclasses.replace(other_node()[1], node="a100-1",
                                                                                      pool="a100-1")]}),
    "steering: mixed nodes, no driverVersion": lambda: dra.steering_attribute(
        {NODE: no_driver_version(DEVICES[:2], NODE, ("NVIDIA H200", "NVIDIA A100")),
         "h200-1": no_driver_version(DEVICES[2:4], "h200-1", ("NVIDIA A100", "NVIDIA H200"))}),
    "steering: mixed drivers": lambda: dra.steering_attribute(
        {NODE: DEVICES, "h200-1": slice_with(0, driverVersion="570.1")[:1]}),
    "steering: nothing published": lambda: dra.steering_attribute(
        {NODE: [dataclasses.replace(d, attributes={"uuid": d.uuid or ""}) for d in DEVICES]}),
    "steering: mig only": lambda: dra.steering_attribute({NODE: slice_with(0, type="mig")[:1]}),
    "steer: passes": lambda: dra.evaluate_selector_steers_scheduling(
        STEER, pod_outcome("p", run_probe(N, [gpu(N, 2)])), seen(2), [claim("c", "p", "gpu", "gpu-2")],
        {NODE: DEVICES, "a100-0": other_node()}),
    "steer: every node matches": lambda: dra.evaluate_selector_steers_scheduling(
        dataclasses.replace(EVERYWHERE, nodes=(NODE,), matching=(NODE,)), pod_outcome("p", run_probe(N, [gpu(N, 2)])),
        seen(2), [claim("c", "p", "gpu", "gpu-2")], {NODE: slice_with(2, driverVersion=DRIVER)}),
    "steer: not run": lambda: dra.evaluate_selector_steers_scheduling(STEER, None, None, [], {NODE: DEVICES}),
    "steer: ran elsewhere": lambda: dra.evaluate_selector_steers_scheduling(
        dataclasses.replace(STEER, matching=("a100-0",)), pod_outcome("p", run_probe(N, [gpu(N, 2)])), seen(2),
        [claim("c", "p", "gpu", "gpu-2")], {NODE: DEVICES, "a100-0": other_node()}),
    "steer: no outcome": lambda: dra.evaluate_selector_steers_scheduling(
        STEER, None, seen(2), [claim("c", "p", "gpu", "gpu-2")], {NODE: DEVICES}),
    "steer: two devices": lambda: dra.evaluate_selector_steers_scheduling(
        STEER, pod_outcome("p", run_probe(N, [gpu(N, 2)])), seen(2), [claim("c", "p", "gpu", "gpu-2", "gpu-3")],
        {NODE: DEVICES}),
    "steer: unpublished device": lambda: dra.evaluate_selector_steers_scheduling(
        STEER, pod_outcome("p", run_probe(N, [gpu(N, 2)])), seen(2), [claim("c", "p", "gpu", "gpu-99")],
        {NODE: DEVICES}),
    "steer: nothing allocated": lambda: dra.evaluate_selector_steers_scheduling(
        STEER, pod_outcome("p", run_probe(N, [gpu(N, 2)])), seen(2), [], {NODE: DEVICES}),
    "steer: device elsewhere": lambda: dra.evaluate_selector_steers_scheduling(
        STEER, pod_outcome("p", run_probe(N, [gpu(N, 2)])), seen(2),
        [Allocation("c", "p", "gpu", (dra.AllocatedDevice("gpu", dra.GPU_DRIVER, "a100-0", "gpu-0"),))],
        {NODE: DEVICES, "a100-0": [dataclasses.replace(d, node="a100-0", pool="a100-0") for d in DEVICES[:1]]}),
    "steer: device not matching": lambda: dra.evaluate_selector_steers_scheduling(
        STEER, pod_outcome("p", run_probe(N, [gpu(N, 2)])), seen(2), [claim("c", "p", "gpu", "gpu-2")],
        {NODE: slice_with(2, productName="NVIDIA H100")}),
    "steer: sees another": lambda: dra.evaluate_selector_steers_scheduling(
        STEER, pod_outcome("p", run_probe(N, [gpu(N, 2)])), seen(3), [claim("c", "p", "gpu", "gpu-2")],
        {NODE: DEVICES}),
    "steer: sees none": lambda: dra.evaluate_selector_steers_scheduling(
        STEER, pod_outcome("p", run_probe(N, [gpu(N, 2)])), seen(), [claim("c", "p", "gpu", "gpu-2")],
        {NODE: DEVICES}),
    # dra.shared-claim-same-device
    "shared: passes": lambda: dra.evaluate_shared_claim(NODE, seen(4), seen(4), seen(), [claim("c", "p", "gpu",
                                                                                                "gpu-4")], DEVICES),
    "shared: probe not run": lambda: dra.evaluate_shared_claim(NODE, None, seen(4), seen(), [], DEVICES),
    "shared: sidecar failed": lambda: dra.evaluate_shared_claim(NODE, seen(4), failing("no output"), seen(), [],
                                                                DEVICES),
    "shared: bystander sees only a device node": lambda: dra.evaluate_shared_claim(
        NODE, seen(4), seen(4), seen(edit=lambda d: d["device_nodes"].update(gpus=["/dev/nvidia3"])),
        [claim("c", "p", "gpu", "gpu-4")], DEVICES),
    "shared: bystander's NVML sees one, CUDA none": lambda: dra.evaluate_shared_claim(
        NODE, seen(4), seen(4), seen(1, edit=lambda d: d.update(devices=[])), [claim("c", "p", "gpu", "gpu-4")],
        DEVICES),
    "shared: bystander unreadable": lambda: dra.evaluate_shared_claim(
        NODE, seen(4), seen(4), seen(edit=unreadable), [claim("c", "p", "gpu", "gpu-4")], DEVICES),
    "shared: bystander not run": lambda: dra.evaluate_shared_claim(NODE, seen(4), seen(4), None, [], DEVICES),
    "shared: two devices": lambda: dra.evaluate_shared_claim(
        NODE, seen(4), seen(4), seen(), [claim("c", "p", "gpu", "gpu-4", "gpu-5")], DEVICES),
    "shared: nothing allocated": lambda: dra.evaluate_shared_claim(NODE, seen(4), seen(4), seen(), [], DEVICES),
    "shared: unpublished": lambda: dra.evaluate_shared_claim(
        NODE, seen(4), seen(4), seen(), [claim("c", "p", "gpu", "gpu-99")], DEVICES),
    "shared: sidecar sees another": lambda: dra.evaluate_shared_claim(
        NODE, seen(4), seen(5), seen(), [claim("c", "p", "gpu", "gpu-4")], DEVICES),
    "shared: sidecar sees none": lambda: dra.evaluate_shared_claim(
        NODE, seen(4), seen(), seen(), [claim("c", "p", "gpu", "gpu-4")], DEVICES),
    "shared: bystander sees one": lambda: dra.evaluate_shared_claim(
        NODE, seen(4), seen(4), seen(1), [claim("c", "p", "gpu", "gpu-4")], DEVICES),
    "shared: bystander sees two": lambda: dra.evaluate_shared_claim(
        NODE, seen(4), seen(4), seen(1, 2), [claim("c", "p", "gpu", "gpu-4")], DEVICES),
    "shared: bystander given no driver, its CUDA failing": lambda: dra.evaluate_shared_claim(
        NODE, seen(4), seen(4), seen(edit=lambda d: (cuda_failed(d), no_nvml(d))), [claim("c", "p", "gpu", "gpu-4")],
        DEVICES),
    "shared: bystander without nvml": lambda: dra.evaluate_shared_claim(
        NODE, seen(4), seen(4), seen(edit=no_nvml), [claim("c", "p", "gpu", "gpu-4")], DEVICES),
    # dra.claim-reserved-then-deleted
    "lifecycle: nothing seen": lambda: dra.evaluate_claim_lifecycle(NODE, {}, []),
    "lifecycle: passes": lambda: dra.evaluate_claim_lifecycle(NODE, lifecycle({"p": ("p",), "q": ("q", "x")}), []),
    "lifecycle: unreserved": lambda: dra.evaluate_claim_lifecycle(NODE, lifecycle({"p": ("q",), "r": ("r",)}), []),
    "lifecycle: reserved for two others": lambda: dra.evaluate_claim_lifecycle(
        NODE, lifecycle({"p": ("q", "r")}), []),
    "lifecycle: two unreserved": lambda: dra.evaluate_claim_lifecycle(NODE, lifecycle({"p": (), "q": ("x",)}), []),
    "lifecycle: left": lambda: dra.evaluate_claim_lifecycle(NODE, lifecycle({"p": ("p",)}), ["p-claim-0", "other"]),
    "lifecycle: many left": lambda: dra.evaluate_claim_lifecycle(
        NODE, lifecycle({p: (p,) for p in "abcd"}), [f"{p}-claim-0" for p in "abcd"]),
    "lifecycle: three left": lambda: dra.evaluate_claim_lifecycle(
        NODE, lifecycle({p: (p,) for p in "abc"}), [f"{p}-claim-0" for p in "abc"]),
    "lifecycle: unknown deletion": lambda: dra.evaluate_claim_lifecycle(NODE, lifecycle({"p": ("p",)}), [],
                                                                         "watch failed: 503"),
    # dra.count-with-match-attribute
    "pair: one gpu": lambda: dra.evaluate_matched_pair(NODE, None, [], DEVICES[:1]),
    "pair: two gpus published": lambda: dra.evaluate_matched_pair(
        NODE, seen(0, 1), [claim("c", "p", "gpu", "gpu-0", "gpu-1")], DEVICES[:2]),
    "pair: nothing allocated": lambda: dra.evaluate_matched_pair(NODE, seen(0, 1), [claim("c", "p", "gpu")], DEVICES),
    "pair: not run": lambda: dra.evaluate_matched_pair(NODE, None, [], DEVICES),
    "pair: passes": lambda: dra.evaluate_matched_pair(NODE, seen(0, 1), [claim("c", "p", "gpu", "gpu-0", "gpu-1")],
                                                      DEVICES),
    "pair: one device": lambda: dra.evaluate_matched_pair(NODE, seen(0), [claim("c", "p", "gpu", "gpu-0")], DEVICES),
    "pair: same device twice": lambda: dra.evaluate_matched_pair(
        NODE, seen(0), [claim("c", "p", "gpu", "gpu-0", "gpu-0")], DEVICES),
    "pair: three devices": lambda: dra.evaluate_matched_pair(
        NODE, seen(0, 1), [claim("c", "p", "gpu", "gpu-0", "gpu-1", "gpu-2")], DEVICES),
    "pair: unpublished": lambda: dra.evaluate_matched_pair(
        NODE, seen(0, 1), [claim("c", "p", "gpu", "gpu-0", "gpu-99")], DEVICES),
    "pair: products differ": lambda: dra.evaluate_matched_pair(
        NODE, seen(0, 1), [claim("c", "p", "gpu", "gpu-0", "gpu-1")], slice_with(1, productName="NVIDIA H100")),
    "pair: product missing": lambda: dra.evaluate_matched_pair(
        NODE, seen(0, 1), [claim("c", "p", "gpu", "gpu-0", "gpu-1")], slice_with(1, productName=None)),
    "pair: by another attribute": lambda: dra.evaluate_matched_pair(
        NODE, seen(0, 1), [claim("c", "p", "gpu", "gpu-0", "gpu-1")], DEVICES, attribute="driverVersion"),
    "pair: sees one": lambda: dra.evaluate_matched_pair(NODE, seen(0), [claim("c", "p", "gpu", "gpu-0", "gpu-1")],
                                                        DEVICES),
    "pair: sees another": lambda: dra.evaluate_matched_pair(
        NODE, seen(0, 2), [claim("c", "p", "gpu", "gpu-0", "gpu-1")], DEVICES),
    "pair: sees one twice": lambda: dra.evaluate_matched_pair(
        NODE, seen(0, 1, edit=lambda d: d.update(devices=[d["devices"][0], d["devices"][0], d["devices"][1]])),
        [claim("c", "p", "gpu", "gpu-0", "gpu-1")], DEVICES),
}


@pytest.mark.parametrize("case", CASES)
def test_the_verdict_is_the_recorded_one(case: str) -> None:
    check_recording("dra", case, CASES[case])


def beside_the_words(result: Any) -> Any:
    """What a verdict carries beside its words (dra.json records the words): a NOT TESTED's kind, what a
    PASS did not judge, the owner it is blocked by, the findings its dependants fold behind; None for a
    case that is not a verdict."""
    if not isinstance(result, Verdict):
        return None
    return {"kind": result.kind, "not_judged": list(result.not_judged), "blocked_by": result.blocked_by,
            "causes": sorted(result.causes)}


@pytest.mark.parametrize("case", CASES)
def test_the_kind_caveats_and_findings_are_the_recorded_ones(case: str) -> None:
    check_recording("dra_kinds", case, lambda: beside_the_words(CASES[case]()))



# -------------------------------------------------------------------------------------------------
# A PASS names what it could not judge (fail closed: never a silent subset)


def test_attributes_judged_without_cuda_say_which_comparisons_were_not_made() -> None:
    v = dra.evaluate_attributes_match_hardware(NODE, DEVICES, seen(*range(8), edit=cuda_failed))
    assert v.outcome is Outcome.PASS, v.message()
    assert v.summary == ("8 published devices agree with the whole-node probe; not compared: "
                         "compute capability, PCI address, memory and MIG instances (CUDA did not initialise in the "
                         "whole-node probe: cudaErrorUnknown unknown error)")
    assert v.evidence[-1].startswith("not compared: compute capability")
    # with CUDA working nothing is left out
    assert "not compared" not in dra.evaluate_attributes_match_hardware(NODE, DEVICES, seen(*range(8))).summary


def test_a_selector_claim_judged_on_nvml_alone_says_its_memory_was_not_judged() -> None:
    pod = dra.pod_name("selector", NODE)
    v = dra.evaluate_claim_allocates_probed_device(NODE, seen(5, name=pod, edit=cuda_failed),
                                                   [claim("c1", pod, "gpu", "gpu-5")], DEVICES, min_gib=140)
    assert v.outcome is Outcome.PASS, v.message()
    assert v.summary.endswith("the GPU the pod sees; its memory was not read (CUDA did not initialise in the pod: "
                              "cudaErrorUnknown), so the >= 140 GiB selector was not judged")
    working = dra.evaluate_claim_allocates_probed_device(NODE, seen(5, name=pod), [claim("c1", pod, "gpu", "gpu-5")],
                                                         DEVICES, min_gib=140)
    assert working.outcome is Outcome.PASS and "not judged" not in working.summary
