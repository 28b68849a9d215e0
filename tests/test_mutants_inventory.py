"""The inventory checks' comparisons, branch by branch, where mutation testing
(scripts/mutation-score) found them unpinned: GPU counts between GFD, the device plugin, a
whole-node probe, --expect and the node's pool; allocatable against capacity; each GFD label
against what the GPU says; driver versions within a pool; the device nodes a GPU container needs.
Each case asserts its check, node, outcome and the facts it names (counts, versions, identities), and
its whole verdict (summary, expected, observed, evidence) is recorded in
tests/data/verdicts/inventory.json."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from test_checks_inventory import whole_node_probe
from verdict_record import check_recording

from gpuconf.checks import inventory as inv
from gpuconf.checks.inventory import DriverPolicy, NodeView
from gpuconf.probes.cuda import CudaProbeReport
from gpuconf.sim.profile import expand, load_profile

SIM = expand(load_profile("healthy-h100")).node("h100-0")
PROBE = whole_node_probe(SIM)
UUIDS = [d.uuid for d in PROBE.devices]
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.machine": "sim-hgx", "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.compute.major": "9", "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/cuda.driver-version.full": "580.159.03", "nvidia.com/cuda.runtime-version.full": "13.0"}
EIGHT = {"nvidia.com/gpu": "8"}
LABEL = " (label nvidia.com/cuda.driver-version.full)"  # the driver label, as a verdict names its source


def node(name: str = "n", labels: Mapping[str, str] | None = None, capacity: Mapping[str, str] | None = None,
         allocatable: Mapping[str, str] | None = None, devices: int = 0, **label: str) -> NodeView:
    """A node with ``labels`` (H100's by default) plus ``label`` (gpu_count= for nvidia.com/gpu.count;
    an empty value drops the label), and capacity (8 GPUs by default) all allocatable unless said."""
    merged = {**(H100 if labels is None else labels),
              **{f"nvidia.com/{k.replace('_', '.')}": v for k, v in label.items()}}
    capacity = EIGHT if capacity is None else capacity
    return NodeView.of(name, {k: v for k, v in merged.items() if v}, capacity,
                       capacity if allocatable is None else allocatable, devices)


def probe_with(**changes: Any) -> CudaProbeReport:
    """The whole-node probe with its first device changed (name=..., compute_capability=...,
    total_memory_bytes=...), or with ``devices`` given."""
    devices = changes.pop("devices", None)
    if devices is None:
        devices = (dataclasses.replace(PROBE.devices[0], **changes), *PROBE.devices[1:])
    return dataclasses.replace(PROBE, devices=tuple(devices))


def some_devices(count: int) -> tuple[Any, ...]:
    return tuple(PROBE.devices[:count])


A100 = dataclasses.replace(PROBE.devices[7], name="NVIDIA A100-SXM4-80GB", compute_capability="8.0")

#: case -> (the verdict, the check, the node, the outcome, the words its summary holds)
CASES: dict[str, tuple[Callable[[], Any], str, str]] = {}


def case(name: str, check: str, outcome: str, *words: str) -> Callable[[Callable[[], Any]], None]:
    def add(make: Callable[[], Any]) -> None:
        CASES[name] = (make, check, outcome, *words)  # type: ignore[assignment]
    return add


ADVERTISED = "inventory.gpu-resource-advertised"
case("advertised: in capacity", ADVERTISED, "pass", "GPUs advertised (8 in capacity)")(
    lambda: inv.evaluate_gpu_resource_advertised(node(capacity={"nvidia.com/gpu": "8", "cpu": "64"})))
case("advertised: mig instances", ADVERTISED, "pass", "GPUs advertised (14 in capacity)")(
    lambda: inv.evaluate_gpu_resource_advertised(node(capacity={"nvidia.com/mig-1g.10gb": "7",
                                                                "nvidia.com/mig-2g.20gb": "7"})))
case("advertised: by DRA", ADVERTISED, "pass", "GPUs advertised (4 DRA devices)")(
    lambda: inv.evaluate_gpu_resource_advertised(node(capacity={"nvidia.com/gpu": "0"}, devices=4)))
case("advertised: labelled with a count, nothing advertised", ADVERTISED, "fail",
     "labelled as a GPU node but advertises no GPU resource")(
    lambda: inv.evaluate_gpu_resource_advertised(node(capacity={"cpu": "64", "nvidia.com/gpu": "x"})))
case("advertised: labelled present, nothing advertised", ADVERTISED, "fail",
     "labelled as a GPU node but advertises no GPU resource")(
    lambda: inv.evaluate_gpu_resource_advertised(node(labels={"nvidia.com/gpu.present": "true"}, capacity={})))
case("advertised: not a GPU node", ADVERTISED, "not-tested", "not labelled as having NVIDIA GPUs")(
    lambda: inv.evaluate_gpu_resource_advertised(node(labels={"nvidia.com/gpu.present": "false"}, capacity={})))

ALLOCATABLE = "inventory.allocatable-matches-capacity"
case("allocatable: all", ALLOCATABLE, "pass", "nvidia.com/gpu 8/8 allocatable")(
    lambda: inv.evaluate_allocatable_matches_capacity(node()))
case("allocatable: two resources", ALLOCATABLE, "pass",
     "nvidia.com/mig-1g.10gb 7/7 allocatable, nvidia.com/mig-3g.40gb 2/2 allocatable")(
    lambda: inv.evaluate_allocatable_matches_capacity(node(capacity={"nvidia.com/mig-3g.40gb": "2",
                                                                     "nvidia.com/mig-1g.10gb": "7"})))
case("allocatable: one unhealthy", ALLOCATABLE, "degraded",
     "the device plugin reports 1 GPU(s) Unhealthy (which one: the device plugin's log",
     "nvidia.com/gpu: 7 of 8 allocatable (1 unhealthy)", "the node works with the rest")(
    lambda: inv.evaluate_allocatable_matches_capacity(node(allocatable={"nvidia.com/gpu": "7"})))
case("allocatable: one unhealthy, named", ALLOCATABLE, "degraded",
     f"1 GPU(s) Unhealthy: GPU 3 ({UUIDS[3]})")(
    lambda: inv.evaluate_allocatable_matches_capacity(
        node(allocatable={"nvidia.com/gpu": "7"}),
        enumerated={u: f"GPU {i} ({u})" for i, u in enumerate(UUIDS)}, held=UUIDS[:3] + UUIDS[4:]))
case("allocatable: two unhealthy, one told", ALLOCATABLE, "degraded", "2 GPU(s) Unhealthy (which one:")(
    lambda: inv.evaluate_allocatable_matches_capacity(
        node(allocatable={"nvidia.com/gpu": "6"}), enumerated={u: u for u in UUIDS}, held=UUIDS[1:]))
case("allocatable: within the tolerance", ALLOCATABLE, "degraded", "(within the 2 --expect tolerates)")(
    lambda: inv.evaluate_allocatable_matches_capacity(node(allocatable={"nvidia.com/gpu": "6"}), unhealthy_max=2))
case("allocatable: past the tolerance", ALLOCATABLE, "fail",
     "2 GPU(s) Unhealthy", "more than the 1 unhealthy GPU(s) per node --expect tolerates (gpu.unhealthy_max)")(
    lambda: inv.evaluate_allocatable_matches_capacity(node(allocatable={"nvidia.com/gpu": "6"}), unhealthy_max=1))
case("allocatable: none left", ALLOCATABLE, "fail", "8 GPU(s) Unhealthy", "nothing is left allocatable")(
    lambda: inv.evaluate_allocatable_matches_capacity(node(allocatable={})))
case("allocatable: shared replicas", ALLOCATABLE, "degraded", "1 GPU(s) Unhealthy",
     "nvidia.com/gpu: 28 of 32 allocatable (4 unhealthy)")(
    lambda: inv.evaluate_allocatable_matches_capacity(node(capacity={"nvidia.com/gpu": "32"},
                                                           allocatable={"nvidia.com/gpu": "28"}, gpu_replicas="4")))
case("allocatable: a bad replicas label", ALLOCATABLE, "degraded", "4 GPU(s) Unhealthy")(
    lambda: inv.evaluate_allocatable_matches_capacity(node(capacity={"nvidia.com/gpu": "32"},
                                                           allocatable={"nvidia.com/gpu": "28"}, gpu_replicas="0")))
case("allocatable: one replica of four unhealthy", ALLOCATABLE, "degraded", "1 GPU(s) Unhealthy",
     "nvidia.com/gpu: 31 of 32 allocatable (1 unhealthy)")(
    lambda: inv.evaluate_allocatable_matches_capacity(node(capacity={"nvidia.com/gpu": "32"},
                                                           allocatable={"nvidia.com/gpu": "31"}, gpu_replicas="4")))
case("allocatable: the resource missing from allocatable", ALLOCATABLE, "fail", "nothing is left allocatable")(
    lambda: inv.evaluate_allocatable_matches_capacity(node(capacity={"nvidia.com/gpu": "1"}, allocatable={})))
case("allocatable: an exporter view but no probe", ALLOCATABLE, "degraded", "1 GPU(s) Unhealthy (which one:")(
    lambda: inv.evaluate_allocatable_matches_capacity(node(allocatable={"nvidia.com/gpu": "7"}),
                                                      enumerated={u: u for u in UUIDS}))
case("allocatable: nothing advertised", ALLOCATABLE, "not-tested", "no GPU resource advertised")(
    lambda: inv.evaluate_allocatable_matches_capacity(node(capacity={})))

COUNT = "inventory.gpu-count-matches-expected"
POOL = (8, "the 4 nodes of its pool (NVIDIA-H100-80GB-HBM3 on sim-hgx)")
case("count: every view", COUNT, "pass", "8 GPUs in every view (GFD label nvidia.com/gpu.count: 8; "
     "device plugin (capacity, replicas removed): 8; probe (CUDA devices in a whole-node pod): 8; --expect: 8)")(
    lambda: inv.evaluate_gpu_count(node(), probe=PROBE, expected=8, pool=POOL))
case("count: GFD says 7", COUNT, "fail", "GPU count disagrees between views: GFD label nvidia.com/gpu.count: 7; "
     "device plugin (capacity, replicas removed): 8")(
    lambda: inv.evaluate_gpu_count(node(gpu_count="7")))
case("count: --expect says 8, all say 7", COUNT, "fail", "--expect: 8")(
    lambda: inv.evaluate_gpu_count(node(gpu_count="7", capacity={"nvidia.com/gpu": "7"}), expected=8))
case("count: --expect says 6, all say 8", COUNT, "fail", "--expect: 6")(
    lambda: inv.evaluate_gpu_count(node(), probe=PROBE, expected=6))
case("count: the pool remembers 8", COUNT, "fail", "the 4 nodes of its pool (NVIDIA-H100-80GB-HBM3 on sim-hgx): 8",
     "(1 GPU(s) missing: fallen off the bus")(
    lambda: inv.evaluate_gpu_count(node(gpu_count="7", capacity={"nvidia.com/gpu": "7"}),
                                   probe=probe_with(devices=some_devices(7)), pool=POOL))
case("count: bigger than the pool", COUNT, "pass", "8 GPUs in every view")(
    lambda: inv.evaluate_gpu_count(node(), probe=PROBE, pool=(4, "the 3 nodes of its pool (x)")))
case("count: one view and the pool", COUNT, "pass", "8 GPUs (device plugin (capacity, replicas removed)); "
     "the 4 nodes of its pool (NVIDIA-H100-80GB-HBM3 on sim-hgx) have 8")(
    lambda: inv.evaluate_gpu_count(node(gpu_count=""), pool=POOL))
case("count: one view", COUNT, "not-tested", "fewer than two views of the GPU count to compare")(
    lambda: inv.evaluate_gpu_count(node(gpu_count="")))
case("count: the probe asked for fewer", COUNT, "pass", "8 GPUs in every view (GFD label nvidia.com/gpu.count: 8; "
     "device plugin (capacity, replicas removed): 8)")(
    lambda: inv.evaluate_gpu_count(node(), probe=probe_with(devices=some_devices(7)), probe_requested=7))
case("count: the probe asked for all", COUNT, "fail", "probe (CUDA devices in a whole-node pod): 7")(
    lambda: inv.evaluate_gpu_count(node(), probe=probe_with(devices=some_devices(7)), probe_requested=8))
case("count: a probe whose CUDA failed", COUNT, "pass", "8 GPUs in every view (GFD label nvidia.com/gpu.count: 8; "
     "device plugin (capacity, replicas removed): 8)")(
    lambda: inv.evaluate_gpu_count(node(), probe=dataclasses.replace(
        PROBE, init=dataclasses.replace(PROBE.init, code=999), devices=())))
case("count: time-sliced", COUNT, "pass", "8 GPUs in every view (GFD label nvidia.com/gpu.count: 8; probe")(
    lambda: inv.evaluate_gpu_count(node(capacity={"nvidia.com/gpu": "32"}, gpu_replicas="4"), probe=PROBE,
                                   probe_requested=32))
case("count: under MIG", COUNT, "pass", "8 GPUs in every view (probe (CUDA devices in a whole-node pod): 8; "
     "--expect: 8)")(
    lambda: inv.evaluate_gpu_count(node(capacity={"nvidia.com/mig-1g.10gb": "56"}), probe=PROBE, expected=8))
case("count: single MIG strategy", COUNT, "fail", "probe (CUDA devices in a whole-node pod): 8; --expect: 7")(
    lambda: inv.evaluate_gpu_count(node(mig_strategy="single", gpu_product="NVIDIA-H100-80GB-HBM3-MIG-1g.10gb",
                                        capacity={"nvidia.com/gpu": "56"}), probe=PROBE, expected=7))
case("count: two replicas", COUNT, "pass", "8 GPUs in every view (GFD label nvidia.com/gpu.count: 8; probe")(
    lambda: inv.evaluate_gpu_count(node(capacity={"nvidia.com/gpu": "16"}, gpu_replicas="2"), probe=PROBE,
                                   probe_requested=16))
case("count: renamed shared resource", COUNT, "pass", "8 GPUs in every view (GFD label nvidia.com/gpu.count: 8; "
     "probe")(
    lambda: inv.evaluate_gpu_count(node(capacity={"nvidia.com/gpu.shared": "16"}, gpu_replicas="2"), probe=PROBE,
                                   probe_requested=16))
case("count: MIG mixed strategy, MIG product", COUNT, "pass", "8 GPUs in every view (GFD label nvidia.com/gpu.count: "
     "8; device plugin (capacity, replicas removed): 8)")(
    lambda: inv.evaluate_gpu_count(node(mig_strategy="mixed", gpu_product="NVIDIA-H100-80GB-HBM3-MIG-1g.10gb")))
case("count: single strategy, no MIG product", COUNT, "pass", "8 GPUs in every view (GFD label nvidia.com/gpu.count: "
     "8; device plugin (capacity, replicas removed): 8)")(
    lambda: inv.evaluate_gpu_count(node(mig_strategy="single")))
case("count: mixed models", COUNT, "pass", "8 GPUs in every view (device plugin (capacity, replicas removed): 8; "
     "probe")(
    lambda: inv.evaluate_gpu_count(node(gpu_count="7"), probe=probe_with(devices=(*PROBE.devices[:7], A100))))

LABELS = "labels.gfd-matches-hardware"
NO_GFD = {"nvidia.com/gpu.present": "true"}
case("labels: none, GFD deployed", LABELS, "fail", "the GPU Operator deploys GFD here but node n carries no "
     "nvidia.com/gpu.* labels")(lambda: inv.evaluate_labels_match_hardware(
         node(labels=NO_GFD), PROBE, gfd=inv.GfdDeployment(True, "the GPU Operator deploys GFD here")))
case("labels: none, GFD not deployed", LABELS, "not-tested", "not applicable: no ClusterPolicy deploys GFD, and n")(
    lambda: inv.evaluate_labels_match_hardware(node(labels=NO_GFD), PROBE, gfd=inv.GfdDeployment(
        False, "no ClusterPolicy deploys GFD")))
case("labels: none, GFD unknown", LABELS, "not-tested", "n carries no GFD label (nvidia.com/gpu.product, ")(
    lambda: inv.evaluate_labels_match_hardware(node(labels=NO_GFD), PROBE))
case("labels: match", LABELS, "pass", "GFD labels match the hardware (NVIDIA-H100-80GB-HBM3)")(
    lambda: inv.evaluate_labels_match_hardware(node(), PROBE))
case("labels: shared product, NVLink clique", LABELS, "pass",
     "GFD labels match the hardware (NVIDIA-H100-80GB-HBM3, NVLink clique abc.1)")(
    lambda: inv.evaluate_labels_match_hardware(node(gpu_product="NVIDIA-H100-80GB-HBM3-SHARED",
                                                    gpu_clique="abc.1"), PROBE))
case("labels: product", LABELS, "fail",
     "nvidia.com/gpu.product says 'NVIDIA-H200', the GPU says 'NVIDIA-H100-80GB-HBM3'")(
    lambda: inv.evaluate_labels_match_hardware(node(gpu_product="NVIDIA-H200"), PROBE))
case("labels: compute capability", LABELS, "fail",
     "nvidia.com/gpu.compute.major.minor says '8.0', the GPU says '9.0'")(
    lambda: inv.evaluate_labels_match_hardware(node(gpu_compute_major="8"), PROBE))
case("labels: memory", LABELS, "fail", "nvidia.com/gpu.memory says '40960', the GPU says '81559'")(
    lambda: inv.evaluate_labels_match_hardware(node(gpu_memory="40960"), PROBE))
case("labels: driver", LABELS, "fail",
     "nvidia.com/cuda.driver-version.full says '570.211.01', the GPU says '580.159.03'")(
    lambda: inv.evaluate_labels_match_hardware(node(**{"cuda_driver-version_full": "570.211.01"}), PROBE))
case("labels: cuda", LABELS, "fail", "nvidia.com/cuda.runtime-version.full says '12.8', the GPU says '13.0'")(
    lambda: inv.evaluate_labels_match_hardware(node(**{"cuda_runtime-version_full": "12.8"}), PROBE))
case("labels: two wrong", LABELS, "fail", "nvidia.com/gpu.memory says '1', the GPU says '81559', "
     "nvidia.com/gpu.product says 'X', the GPU says 'NVIDIA-H100-80GB-HBM3'")(
    lambda: inv.evaluate_labels_match_hardware(node(gpu_memory="1", gpu_product="X"), PROBE))
case("labels: a MIG device", LABELS, "pass", "GFD labels match the hardware (NVIDIA-H100-80GB-HBM3-MIG-1g.10gb)")(
    lambda: inv.evaluate_labels_match_hardware(node(gpu_product="NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", gpu_memory="9"),
                                               probe_with(name="NVIDIA H100 80GB HBM3 MIG 1g.10gb", mig=True)))
case("labels: MIG invalid", LABELS, "fail", "GFD labels the product NVIDIA-H100-80GB-HBM3-MIG-INVALID",
     "mig.strategy=single", "gpu.count=0")(
    lambda: inv.evaluate_labels_match_hardware(node(gpu_product="NVIDIA-H100-80GB-HBM3-MIG-INVALID", gpu_count="0",
                                                    mig_config="all-balanced"), PROBE))
case("labels: no GPU seen", LABELS, "not-tested", "the probe saw no GPU")(
    lambda: inv.evaluate_labels_match_hardware(node(), probe_with(devices=())))
case("labels: mixed models", LABELS, "fail", f"n mixes GPU models: GPU 7 ({UUIDS[7]}, bus",
     "is NVIDIA A100-SXM4-80GB, where the other 7 are NVIDIA H100 80GB HBM3",
     "(nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3, gpu.count=8)")(
    lambda: inv.evaluate_labels_match_hardware(node(), probe_with(devices=(*PROBE.devices[:7], A100))))
case("labels: mixed models, labelled as the fewer", LABELS, "fail", "GPU 0 (", "where the other 1 are NVIDIA A100")(
    lambda: inv.evaluate_labels_match_hardware(node(gpu_product="NVIDIA-A100-SXM4-80GB"),
                                               probe_with(devices=(*PROBE.devices[:7], A100))))

case("labels: mixed models, labelled as neither", LABELS, "fail", "n mixes GPU models: GPU 7 (",
     "is NVIDIA H100 80GB HBM3, where the other 7 are NVIDIA A100-SXM4-80GB")(
    lambda: inv.evaluate_labels_match_hardware(node(gpu_product="X"), probe_with(devices=(
        *(dataclasses.replace(A100, index=i, uuid=u) for i, u in enumerate(UUIDS[:7])), PROBE.devices[7]))))
case("labels: MIG invalid, no config label", LABELS, "fail", "GFD labels the product X-MIG-INVALID",
     "mig.strategy=mixed", "gpu.memory=0")(
    lambda: inv.evaluate_labels_match_hardware(node(gpu_product="X-MIG-INVALID", gpu_memory="0",
                                                    mig_strategy="mixed"), PROBE))

NVML = "driver.nvml-initializes"
case("nvml: initialises", NVML, "pass", "NVML driver 580.159.03")(lambda: inv.evaluate_nvml_initializes("n", PROBE))
case("nvml: mismatch", NVML, "fail", "NVML does not initialise", "Driver/library version mismatch")(
    lambda: inv.evaluate_nvml_initializes("n", dataclasses.replace(
        PROBE, nvml_absent_reason="nvmlInit_v2: Driver/library version mismatch")))

NODES = "runtime.cuda-device-nodes-present"
case("device nodes: present", NODES, "pass", "/dev/nvidiactl, /dev/nvidia-uvm and 8 GPU device nodes present")(
    lambda: inv.evaluate_cuda_device_nodes("n", PROBE))
case("device nodes: no uvm", NODES, "fail", "a GPU pod on this node lacks /dev/nvidia-uvm (nvidia_uvm is not loaded")(
    lambda: inv.evaluate_cuda_device_nodes("n", dataclasses.replace(
        PROBE, device_nodes={**PROBE.device_nodes, "/dev/nvidia-uvm": False})))
case("device nodes: none", NODES, "fail",
     "a GPU pod on this node lacks /dev/nvidiactl, /dev/nvidia<N>")(
    lambda: inv.evaluate_cuda_device_nodes("n", dataclasses.replace(
        PROBE, device_nodes={"/dev/nvidia-uvm": True, "gpus": []})))


@pytest.mark.parametrize("name", CASES)
def test_each_inventory_verdict_names_its_check_node_and_facts(name: str) -> None:
    make, check, outcome, *words = CASES[name]  # type: ignore[misc]
    v = make()
    assert (v.check, v.outcome.value) == (check, outcome), v.message()
    assert v.node == "n"
    for word in words:
        assert word in v.summary, v.summary
    check_recording("inventory", name, lambda: v)


@pytest.mark.parametrize("name", CASES)
def test_each_inventory_verdicts_kind_caveats_and_findings_are_the_recorded_ones(name: str) -> None:
    """What inventory.json's words leave out: a NOT TESTED's kind, what a PASS did not judge, the owner
    it is blocked by and the findings its dependants fold behind (inventory_kinds.json)."""
    v = CASES[name][0]()
    check_recording("inventory_kinds", name, lambda: {"kind": v.kind, "not_judged": list(v.not_judged),
                                                      "blocked_by": v.blocked_by, "causes": sorted(v.causes)})


def policy(nodes: list[NodeView], **declared: Any) -> dict[str, DriverPolicy]:
    return {n.name: DriverPolicy("h100", **declared) for n in nodes}


def pool_of(*drivers: str, product: str = "NVIDIA-H100-80GB-HBM3") -> list[NodeView]:
    return [node(f"n{i}", **{"gpu_product": product, "cuda_driver-version_full": d}) for i, d in enumerate(drivers)]


@pytest.mark.parametrize(("drivers", "declared", "outcomes", "words"), [
    (("580.159.03", "580.159.03", "570.211.01"), {}, ["pass", "pass", "degraded"],
     ["driver 580.159.03 (label nvidia.com/cuda.driver-version.full), as the rest of the NVIDIA-H100-80GB-HBM3 pool",
      f"driver 570.211.01{LABEL} while the NVIDIA-H100-80GB-HBM3 pool runs 580.159.03"]),
    (("570.211.01", "580.159.03"), {}, ["degraded", "pass"], ["while the NVIDIA-H100-80GB-HBM3 pool runs 580.159.03"]),
    (("580.95.5", "580.95.10"), {}, ["degraded", "pass"], [f"driver 580.95.5{LABEL} while the NVIDIA-H100-80GB-HBM3 "
                                                        "pool runs 580.95.10"]),
    (("580.159.03", "570.211.01"), {"version": "580.159.03"}, ["pass", "degraded"],
     ["driver 580.159.03 (label nvidia.com/cuda.driver-version.full), as --expect declares for pool h100",
      f"driver 570.211.01{LABEL} while --expect declares 580.159.03 for pool h100"]),
    (("580.159.03", "580.82.07"), {"branch": 580}, ["pass", "pass"],
     [f"driver 580.159.03{LABEL} on branch 580, which --expect allows for pool h100 (branch-only "
      "policy; the pool also runs 580.82.07)"]),
    (("580.159.03", "570.211.01"), {"branch": 580}, ["pass", "degraded"],
     [f"driver 570.211.01{LABEL} is on branch 570 while --expect declares branch 580 for pool h100"]),
    (("580.159.03",), {"branch": 580}, ["pass"], ["(branch-only policy)"]),
    (("580.159.03", "580.82.07", "580.65.06"), {"branch": 580}, ["pass"] * 3, [
        "the pool also runs 580.65.06, 580.82.07)"]),
    (("580.159.03", ""), {}, ["not-tested", "not-tested"], [
        "the driver of the other node(s) of the NVIDIA-H100-80GB-HBM3 pool is unknown (n1): n0's driver 580.159.03"]),
    (("580.159.03", "580.159.03", ""), {}, ["pass", "pass", "not-tested"], [
        f"driver 580.159.03{LABEL}, as the rest of the NVIDIA-H100-80GB-HBM3 pool"]),
    (("580.159.03",), {}, ["not-tested"], [
        "n0 is the only node of the NVIDIA-H100-80GB-HBM3 pool: there is no other node to compare its driver "
        "580.159.03 (label nvidia.com/cuda.driver-version.full) with (--expect can declare the pool's driver)"]),
], ids=["the odd node of three", "a tie goes to the newer", "versions compare as numbers", "an exact policy",
        "a branch policy allows the branch", "a branch policy fails another branch", "a branch policy, one node",
        "a branch policy, three versions",
        "a node without a driver label", "a node without a driver label beside two", "a pool of one"])
def test_the_driver_is_compared_within_the_pool_or_with_the_policy(drivers: tuple[str, ...], declared: dict[str, Any],
                                                                  outcomes: list[str], words: list[str]) -> None:
    nodes = pool_of(*drivers)
    verdicts = inv.evaluate_driver_uniform(nodes, policy(nodes, **declared) if declared else None)
    assert [v.outcome.value for v in verdicts] == outcomes
    assert [v.node for v in verdicts] == [n.name for n in nodes]
    assert {v.check for v in verdicts} == {"driver.version-uniform-in-pool"}
    summaries = " | ".join(v.summary for v in verdicts)
    for word in words:
        assert word in summaries, summaries
    for v in verdicts:
        if v.outcome.value == "degraded":  # the check's severity: a pool runs, unevenly
            assert v.expected is not None and v.observed is not None
            assert f"driver {v.observed} " in v.summary and v.expected.removeprefix("a ").removesuffix(".x driver") \
                in v.summary


def test_pools_are_per_product_so_two_products_are_two_majorities() -> None:
    nodes = [*pool_of("580.159.03", "580.159.03"), *pool_of("570.211.01", product="NVIDIA-A100-SXM4-80GB-SHARED")]
    nodes[2] = dataclasses.replace(nodes[2], name="a")
    # the A100 alone is a pool of one: nothing to compare its 570 with, and no skew of the H100 pool
    assert [(v.node, v.outcome.value) for v in inv.evaluate_driver_uniform(nodes)] == [
        ("a", "not-tested"), ("n0", "pass"), ("n1", "pass")]
    shared = [*pool_of("580.159.03", "580.159.03"), *pool_of("570.211.01", product="NVIDIA-H100-80GB-HBM3-SHARED")]
    shared[2] = dataclasses.replace(shared[2], name="s")
    odd = inv.evaluate_driver_uniform(shared)[-1]
    assert odd.node == "s" and odd.summary == (f"driver 570.211.01{LABEL} while the NVIDIA-H100-80GB-HBM3 "
                                               "pool runs 580.159.03")
    unlabelled = inv.evaluate_driver_uniform([node("u", labels={"nvidia.com/cuda.driver-version.full": "580.159.03"}),
                                              node("v", labels={"nvidia.com/cuda.driver-version.full": "580.159.03"})])
    assert unlabelled[0].summary == f"driver 580.159.03{LABEL}, as the rest of the unknown pool"


def test_the_pool_count_is_the_commonest_among_nodes_of_one_product_and_machine() -> None:
    nodes = [node(f"n{i}", gpu_count=c) for i, c in enumerate(("8", "8", "7"))] + [
        node("solo", gpu_count="4", gpu_machine="other"), node("vm", gpu_count="4", gpu_machine="",
                                                                 **{"gpu_product": "NVIDIA-H100-80GB-HBM3-SHARED"})]
    nodes[-1] = dataclasses.replace(nodes[-1], labels={**nodes[-1].labels, "node.kubernetes.io/instance-type": "f1"})
    assert inv.pool_key(nodes[0]) == "NVIDIA-H100-80GB-HBM3 on sim-hgx"
    assert inv.pool_key(nodes[-1]) == "NVIDIA-H100-80GB-HBM3 on f1"
    assert inv.pool_key(node(labels={})) == "unknown"
    pools = inv.pool_gpu_count(nodes)
    assert pools == {f"n{i}": (8, "the 3 nodes of its pool (NVIDIA-H100-80GB-HBM3 on sim-hgx)") for i in range(3)}
    assert inv.node_gpu_count(node(gpu_count="")) == 8
    assert inv.node_gpu_count(node(gpu_count="", capacity={"nvidia.com/gpu": "32"}, gpu_replicas="4")) == 8
    assert inv.node_gpu_count(node(capacity={"nvidia.com/mig-1g.10gb": "7"})) is None
    assert inv.node_gpu_count(node(gpu_count="", capacity={})) is None
    assert inv.node_gpu_count(node(gpu_count="", mig_strategy="single",
                                   gpu_product="NVIDIA-H100-80GB-HBM3-MIG-1g.10gb")) is None
    assert inv.node_gpu_count(node(gpu_count="", capacity={"nvidia.com/gpu.shared": "16"}, gpu_replicas="2")) == 8
    assert inv.node_gpu_count(node(gpu_count="", gpu_replicas="0")) == 8
    assert inv.gpu_resources({"nvidia.com/gpu": "8", "nvidia.com/mig-1g.10gb": "7", "cpu": "4",
                              "nvidia.com/gpu.shared": "x"}) == {"nvidia.com/gpu": 8, "nvidia.com/mig-1g.10gb": 7}
