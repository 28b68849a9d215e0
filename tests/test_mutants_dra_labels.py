"""labels.agree-with-dra (gpuconf/checks/dra_labels.py), fact by fact, where mutation testing
(scripts/mutation-score) found it unpinned: GFD's product suffixes, versions compared as versions (and
an unreadable one never equal to another unreadable one), the memory tolerance at its bound, which
label a fact is read from (the .full labels or GFD's older split ones), the GPU count over whole GPUs
and MIG parents (and not under mig.strategy=single), and every verdict recorded whole (outcome,
summary, expected, observed, evidence, a NOT TESTED's kind) in tests/data/verdicts/dra_labels.json,
on the simulated plugin-and-dra node's labels and slice with one thing changed per case."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from test_checks_dra import NODE, sim_node
from verdict_record import check_recording, whole

from gpuconf.checks.dra import MEMORY_TOLERANCE, slice_devices
from gpuconf.checks.dra_labels import AGREE, evaluate_labels_agree_with_dra, gfd_product
from gpuconf.nodes.devices import SliceDevice
from gpuconf.outcomes import COULD_NOT_RUN, NOT_APPLICABLE
from gpuconf.sim.node_facts import node_labels, resource_slices
from gpuconf.verdict import Outcome

SIM = sim_node(profile="plugin-and-dra")
LABELS = {k: v for k, v in node_labels(SIM).items() if k.startswith("nvidia.com/")}
DEVICES = tuple(slice_devices(resource_slices(SIM), NODE))
MEMORY = DEVICES[0].memory_bytes or 0
#: The labels of one fact each, nothing else (GFD's deprecated split labels left out).
ONLY = {
    "product": {"nvidia.com/gpu.product": "NVIDIA-H200"},
    "driver": {"nvidia.com/cuda.driver-version.full": "580.159.03"},
    "cuda": {"nvidia.com/cuda.runtime-version.full": "13.0"},
    "compute": {"nvidia.com/gpu.compute.major": "9", "nvidia.com/gpu.compute.minor": "0"},
    "family": {"nvidia.com/gpu.family": "hopper"},
    "memory": {"nvidia.com/gpu.memory": str(MEMORY >> 20)},
    "count": {"nvidia.com/gpu.count": "8"},
}



def agree(labels: Mapping[str, str], ds: Sequence[SliceDevice] = DEVICES) -> Callable[[], Any]:
    return lambda: whole(evaluate_labels_agree_with_dra(NODE, labels, ds))


def changed(index: int | None = None, memory_bytes: Any = ..., **attributes: str | None) -> list[SliceDevice]:
    """The node's devices with device ``index`` (None: every device) changed: attribute=value pairs
    (None drops one), or its memory."""
    out = []
    for i, d in enumerate(DEVICES):
        if index is None or i == index:
            attrs = {k: v for k, v in {**d.attributes, **attributes}.items() if v is not None}
            d = dataclasses.replace(d, attributes=attrs,
                                    memory_bytes=d.memory_bytes if memory_bytes is ... else memory_bytes)
        out.append(d)
    return out


def mig(parent: int, number: int) -> SliceDevice:
    """A MIG instance of GPU ``parent``."""
    return SliceDevice(NODE, DEVICES[0].driver, NODE, f"gpu-{parent}-mig-1g18gb-{number}", {
        "type": "mig", "uuid": f"MIG-{parent:08d}-0000-0000-0000-{number:012d}",
        "parentUUID": DEVICES[parent].uuid or "", "productName": "NVIDIA H200"})


def migrated(*parents: int) -> list[SliceDevice]:
    """The node with GPUs ``parents`` published as two MIG instances each, not whole."""
    return [d for i, d in enumerate(DEVICES) if i not in parents] + [mig(p, n) for p in parents for n in (0, 1)]


#: The fewest MiB a label may say and still agree with the slice's memory (within MEMORY_TOLERANCE).
LOWEST_MIB = -(-int(MEMORY * (1 - MEMORY_TOLERANCE)) // 2**20)
OTHER_KIND = dataclasses.replace(DEVICES[0], name="channel-0", attributes={"type": "channel", "uuid": "CH-0"})

CASES: dict[str, Callable[[], Any]] = {
    "gfd product": lambda: [gfd_product(p) for p in (
        "NVIDIA-H200", "NVIDIA-H200-SHARED", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "NVIDIA-A100-MIG-1g.5gb-SHARED",
        "NVIDIA-H200-SHAREDX", "NVIDIA-H200-SHARED-SHARED", "NVIDIA-MIGHTY", "NVIDIA-X-MIG-")],
    # healthy
    "passes": agree(LABELS),
    "passes, split labels": agree({k: v for k, v in LABELS.items()
                                   if k not in ("nvidia.com/cuda.driver-version.full",
                                                "nvidia.com/cuda.runtime-version.full")}),
    "passes, one GPU": agree(LABELS | {"nvidia.com/gpu.count": "1"}, DEVICES[:1]),
    "passes, two GPUs": agree(LABELS | {"nvidia.com/gpu.count": "2"}, DEVICES[:2]),
    "passes, product in another case": agree({"nvidia.com/gpu.product": "nvidia-h200"}),
    "passes, product shared": agree({"nvidia.com/gpu.product": "NVIDIA-H200-SHARED"}),
    "passes, family in another case": agree({"nvidia.com/gpu.family": "HOPPER "}),
    "passes, compute 9.0 against 9.0.0": agree(ONLY["compute"]),
    # one fact each, alone
    **{f"only {fact}": agree(labels) for fact, labels in ONLY.items()},
    # one fact wrong
    "product wrong": agree(LABELS | {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
    "product of a MIG layout": agree({"nvidia.com/gpu.product": "NVIDIA-H200-MIG-1g.18gb"}),
    "product of a MIG layout, count, strategy single": agree(
        {"nvidia.com/gpu.product": "NVIDIA-H200-MIG-1g.18gb", "nvidia.com/mig.strategy": "single",
         "nvidia.com/gpu.count": "56"}),
    "product of a MIG layout, count, strategy mixed": agree(
        {"nvidia.com/gpu.product": "NVIDIA-H200-MIG-1g.18gb", "nvidia.com/mig.strategy": "mixed",
         "nvidia.com/gpu.count": "56"}),
    "strategy single, a whole product, count": agree(
        {"nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/mig.strategy": "single", "nvidia.com/gpu.count": "7"}),
    "MIG-INVALID": agree(LABELS | {"nvidia.com/gpu.product": "NVIDIA-H200-MIG-INVALID"}),
    "driver wrong": agree(ONLY["driver"] | {"nvidia.com/cuda.driver-version.full": "580.159.04"}),
    "driver, trailing zero": agree({"nvidia.com/cuda.driver-version.full": "580.159.3.0"}),
    "driver, split labels": agree({"nvidia.com/cuda.driver.major": "570", "nvidia.com/cuda.driver.minor": "95",
                                   "nvidia.com/cuda.driver.rev": "05"}),
    "driver unreadable, both": agree({"nvidia.com/cuda.driver-version.full": "unknown"},
                                     changed(driverVersion="unknown")),
    "driver unreadable, the label": agree({"nvidia.com/cuda.driver-version.full": "n/a"}),
    "cuda wrong": agree({"nvidia.com/cuda.runtime-version.full": "12.9"}),
    "cuda, split labels": agree({"nvidia.com/cuda.runtime.major": "12", "nvidia.com/cuda.runtime.minor": "9"}),
    "cuda, major only": agree({"nvidia.com/cuda.runtime.major": "13"}),
    "compute wrong": agree({"nvidia.com/gpu.compute.major": "9", "nvidia.com/gpu.compute.minor": "1"}),
    "compute, major only": agree({"nvidia.com/gpu.compute.major": "9"}),
    "compute, minor only": agree({"nvidia.com/gpu.compute.minor": "0"}),
    "family wrong": agree({"nvidia.com/gpu.family": "blackwell"}),
    "memory wrong": agree({"nvidia.com/gpu.memory": "81559"}),
    "memory within 1 %": agree({"nvidia.com/gpu.memory": str(LOWEST_MIB)}),
    "memory just past 1 %": agree({"nvidia.com/gpu.memory": str(LOWEST_MIB - 1)}),
    "memory above by 1 %": agree({"nvidia.com/gpu.memory": str(int(MEMORY * 1.01) >> 20)}, changed(
        memory_bytes=(int(MEMORY * 1.01) >> 20) * 2**20 * 100 // 101)),
    "memory exactly 1 % under": agree({"nvidia.com/gpu.memory": "99"}, changed(memory_bytes=100 * 2**20)),
    "memory zero": agree({"nvidia.com/gpu.memory": "0"}),
    "memory one MiB": agree({"nvidia.com/gpu.memory": "1"}),
    "memory unreadable": agree({"nvidia.com/gpu.memory": "140Gi"}),
    "memory unreadable, with count": agree({"nvidia.com/gpu.memory": "140Gi", "nvidia.com/gpu.count": "8"}),
    "count wrong": agree({"nvidia.com/gpu.count": "7"}),
    "count unreadable": agree({"nvidia.com/gpu.count": "eight"}),
    "count unreadable, with a fact": agree({"nvidia.com/gpu.count": "eight", **ONLY["family"]}),
    "count zero": agree({"nvidia.com/gpu.count": "0"}),
    "count over MIG parents": agree({"nvidia.com/gpu.count": "8"}, migrated(2, 5)),
    "count over MIG parents, wrong": agree({"nvidia.com/gpu.count": "10"}, migrated(2, 5)),
    "count, a MIG GPU also whole": agree({"nvidia.com/gpu.count": "8"}, [*DEVICES, mig(3, 0), mig(3, 1)]),
    "count, a device of another kind": agree({"nvidia.com/gpu.count": "8"}, [*DEVICES, OTHER_KIND]),
    "count, a GPU without uuid": agree({"nvidia.com/gpu.count": "8"}, changed(4, uuid=None)),
    "several wrong on one GPU": agree(LABELS, changed(3, productName="NVIDIA H100", architecture="Ampere")),
    "one wrong on every GPU": agree(LABELS | {"nvidia.com/gpu.family": "ampere"}),
    "two wrong, one GPU": agree(LABELS | {"nvidia.com/gpu.family": "ampere", "nvidia.com/gpu.count": "2"},
                                DEVICES[:1]),
    "attribute missing on one GPU": agree(ONLY["product"] | ONLY["family"], changed(2, productName=None)),
    "memory not published on one GPU": agree(ONLY["memory"], changed(2, memory_bytes=None)),
    # nothing to compare
    "no GPU device": agree(LABELS, ()),
    "MIG devices only": agree(LABELS, [mig(0, 0), mig(0, 1)]),
    "no label": agree({"kubernetes.io/hostname": NODE}),
    "labels without an attribute": agree(ONLY["product"] | ONLY["compute"], changed(
        productName=None, cudaComputeCapability=None)),
    "memory label, no memory published": agree(ONLY["memory"], changed(memory_bytes=None)),
}


@pytest.mark.parametrize("case", CASES)
def test_the_verdict_is_the_recorded_one(case: str) -> None:
    check_recording("dra_labels", case, CASES[case])


def test_each_case_has_the_outcome_its_name_says() -> None:
    outcomes = {"passes": Outcome.PASS, "driver unreadable, both": Outcome.FAIL, "memory within 1 %": Outcome.PASS,
                "memory just past 1 %": Outcome.FAIL, "memory above by 1 %": Outcome.PASS,
                "count over MIG parents": Outcome.PASS, "count, a MIG GPU also whole": Outcome.PASS,
                "product of a MIG layout, count, strategy single": Outcome.PASS,
                "product of a MIG layout, count, strategy mixed": Outcome.FAIL,
                "MIG-INVALID": Outcome.NOT_TESTED, "no label": Outcome.NOT_TESTED}
    for case, outcome in outcomes.items():
        v = CASES[case]()
        assert (v["check"], v["node"], v["outcome"]) == (AGREE, NODE, outcome.value), case
    assert CASES["MIG-INVALID"]()["kind"] == COULD_NOT_RUN
    for case in ("no GPU device", "no label", "labels without an attribute", "count unreadable"):
        assert CASES[case]()["kind"] == NOT_APPLICABLE, case
