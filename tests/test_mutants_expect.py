"""The expect checks' decisions, every branch, with what each says recorded whole in
tests/data/verdicts/expect.json (tests/verdict_record.py): which pool a node's labels select, the
driver policy and GPU count a pool hands to other checks, pools populated or short (and the node
that misses by one label), several verdicts folded into one, a node in no pool, and every declared
field of a pool against every view of a node (labels, device plugin, DRA slices, the whole-node
probe), on crafted nodes and the simulator's h100-0 probe. The boundaries are stated as rules below."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from test_checks_expect import gfd_less, nodes_of, whole_node_probe
from verdict_record import check_recording, whole

from gpuconf.checks import expect as ex
from gpuconf.checks.inventory import NodeView
from gpuconf.compat.versions import parse_cuda
from gpuconf.expect import (
    CudaSpec,
    DriverSpec,
    ExpectPool,
    ExpectProfile,
    GpuSpec,
    MigSpec,
    NcclSpec,
    NodeCount,
    RuntimeSpec,
    SharingSpec,
)
from gpuconf.probes.cuda import parse_cuda_probe
from gpuconf.sim.emulate import Visible, cuda_probe_run
from gpuconf.sim.profile import expand, load_profile
from gpuconf.verdict import Outcome, Verdict, failed, not_tested, passed

H100 = nodes_of(load_profile("healthy-h100"))[0]
PROBE, REQUESTED = whole_node_probe(H100)
H200 = gfd_less(nodes_of(load_profile("h200-dra-only"))[0])


def mig_probe() -> Any:
    """The whole-node probe of the simulator's a100-mig-mixed node: its CUDA devices are MIG instances."""
    n = expand(load_profile("a100-mig-mixed")).node("a100-0")
    visible = [Visible(g, m) for g in n.gpus for m in g.mig]
    code, out = cuda_probe_run(n, visible=visible, image_cuda=parse_cuda("13.0.2"), env={}, compat=True,
                               started_at="2026-12-01T00:00:00.000Z", hostname=n.name)
    return parse_cuda_probe(out, exit_code=code)


MIG_PROBE = mig_probe()

#: GFD's labels on a healthy HGX H100 node (what the simulator writes that the comparisons read).
LABELS = {"nvidia.com/gpu.machine": "sim-h100", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
          "nvidia.com/gpu.count": "8", "nvidia.com/gpu.memory": "81559",
          "nvidia.com/cuda.driver-version.full": "580.159.03", "nvidia.com/cuda.runtime-version.full": "13.0",
          "nvidia.com/mig.strategy": "single", "nvidia.com/gpu.sharing-strategy": "none",
          "nvidia.com/gpu.replicas": "1"}
EIGHT = {"nvidia.com/gpu": "8"}
SELECTOR = (("nvidia.com/gpu.machine", "sim-h100"),)


def node(name: str = "n", drop: tuple[str, ...] = (), capacity: Mapping[str, str] | None = None, devices: int = 0,
         **labels: str) -> NodeView:
    """A node with LABELS, less ``drop``, plus ``labels`` (keys without nvidia.com/, '-' as '__', '.' as '_')."""
    merged = {k: v for k, v in LABELS.items() if k.removeprefix("nvidia.com/") not in drop}
    merged.update({f"nvidia.com/{k.replace('__', '-').replace('_', '.')}": v for k, v in labels.items()})
    cap = dict(EIGHT if capacity is None else capacity)
    return NodeView.of(name, merged, cap, cap, devices)


def pool(name: str = "h100", selector: tuple[tuple[str, str], ...] = SELECTOR, **specs: Any) -> ExpectPool:
    return ExpectPool(name, selector, **specs)


FULL = pool(nodes=NodeCount(exact=2), gpu=GpuSpec("NVIDIA-H100-80GB-HBM3", 8, 81559),
            driver=DriverSpec("580.159.03", 580), cuda=CudaSpec("13.0"), mig=MigSpec("none"),
            sharing=SharingSpec("none"), runtime=RuntimeSpec("legacy"), nccl=NcclSpec(460.0))


def profile(*pools: ExpectPool) -> ExpectProfile:
    return ExpectProfile("crafted.yaml", tuple(pools) or (FULL,))


def matches(n: NodeView, p: ExpectPool = FULL, *, probe: Any = None, requested: int | None = None,
            mode: str | None = None) -> Verdict:
    return ex.evaluate_node_matches_pool(profile(p), n, probe=probe, probe_requested=requested, runtime_mode=mode)


def probe_with(**changes: Any) -> Any:
    return dataclasses.replace(PROBE, **changes)


MIG_MIXED = {"nvidia.com/mig-3g.40gb": "8", "nvidia.com/mig-2g.20gb": "8", "nvidia.com/mig-1g.10gb": "16"}
LAYOUT = (("3g.40gb", 1), ("2g.20gb", 1), ("1g.10gb", 2))
MIG_POOL = pool(gpu=GpuSpec(count=8), mig=MigSpec("mixed", LAYOUT))


def mig_labels(counts: Mapping[str, str]) -> dict[str, str]:
    return {f"mig-{k.removeprefix('nvidia.com/mig-')}.count": v for k, v in counts.items()}


def mixed_node(capacity: Mapping[str, str] = MIG_MIXED, counts: Mapping[str, str] | None = None) -> NodeView:
    labels = {"nvidia.com/gpu.machine": "sim-h100", "nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.count": "8",
              **{f"nvidia.com/{k}": v for k, v in mig_labels(MIG_MIXED if counts is None else counts).items()}}
    return NodeView.of("n", labels, dict(capacity), dict(capacity))


def single_node(count: str = "56", capacity: str = "56") -> NodeView:
    labels = {"nvidia.com/gpu.machine": "sim-h100", "nvidia.com/mig.strategy": "single",
              "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", "nvidia.com/gpu.count": count,
              "nvidia.com/gpu.memory": "9984"}
    return NodeView.of("n", labels, {"nvidia.com/gpu": capacity}, {"nvidia.com/gpu": capacity})


def verdicts(n: int, *, fail: int = 0, untested: int = 0) -> list[Verdict]:
    out = [passed(ex.POPULATED, None, f"pool p{i}: fine", evidence=(f"pass evidence {i}",)) for i in range(n)]
    out += [failed(ex.POPULATED, None, f"pool f{i}: short", expected=f"{i + 2} nodes", observed=f"{i} nodes",
                   evidence=(f"fail evidence {i}",)) for i in range(fail)]
    out += [not_tested(ex.POPULATED, None, f"pool u{i}: unseen") for i in range(untested)]
    return out


SHORT = pool(nodes=NodeCount(exact=3), selector=(("nvidia.com/gpu.machine", "sim-h100"),
                                                 ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3")))
#: Nodes outside SHORT: one label off (wrong value), one label missing, two labels off.
STRAYS = [node("s1", gpu_machine="sim-h100b"), node("s2", drop=("gpu.product",)),
          node("s3", gpu_machine="x", gpu_product="y")]

CASES: dict[str, Callable[[], Any]] = {
    # which pool: the selector's labels
    "selector: labels": lambda: {k: v for k, v in ex.selector_labels(node()).items()},
    "selector: a gfd-less node's slice": lambda: {k: v for k, v in ex.selector_labels(H200).items()
                                                  if k.startswith("nvidia.com/")},
    "selector: a label wins over the slice": lambda: ex.selector_labels(dataclasses.replace(
        H200, labels={**H200.labels, "nvidia.com/gpu.product": "Custom", "nvidia.com/gpu.count": "7"})),
    # what a pool hands to other checks
    "driver policy": lambda: ex.declared_driver_policy(profile(
        pool("v", (("nvidia.com/gpu.machine", "v"),), driver=DriverSpec("580.159.03")),
        pool("b", (("nvidia.com/gpu.machine", "b"),), driver=DriverSpec(branch=570)),
        pool("none", (("nvidia.com/gpu.machine", "none"),))),
        [node("nv", gpu_machine="v"), node("nb", gpu_machine="b"), node("nn", gpu_machine="none"),
         node("nx", gpu_machine="x")]),
    "driver policy: no profile": lambda: ex.declared_driver_policy(None, [node()]),
    "gpu count": lambda: (ex.declared_gpu_count(profile(), node()), ex.declared_gpu_count(None, node()),
                          ex.declared_gpu_count(profile(), node(gpu_machine="x"))),
    # expect.pool-populated
    "populated: no profile": lambda: ex.evaluate_pool_populated(None, [node()]),
    "populated: exactly": lambda: ex.evaluate_pool_populated(profile(), [node("a"), node("b")]),
    "populated: short, a stray by one value and one missing label": lambda: ex.evaluate_pool_populated(
        profile(SHORT), [node("a"), *STRAYS]),
    "populated: at least, met": lambda: ex.evaluate_pool_populated(profile(pool(nodes=NodeCount(min=2))),
                                                                   [node("a"), node("b"), node("c")]),
    "populated: at least, short": lambda: ex.evaluate_pool_populated(profile(pool(nodes=NodeCount(min=2))),
                                                                     [node("a")]),
    "populated: six strays": lambda: ex.evaluate_pool_populated(profile(SHORT), [
        node(f"s{i}", gpu_machine=f"sim-{i}") for i in range(7)]),
    "populated: empty": lambda: ex.evaluate_pool_populated(profile(pool(nodes=NodeCount(exact=1))), []),
    # folding
    "combined: one": lambda: ex.combined(verdicts(1)),
    "combined: failures beside a pass": lambda: ex.combined(verdicts(1, fail=2)),
    "combined: a pass beside not tested": lambda: ex.combined(verdicts(1, untested=1)),
    "combined: passes": lambda: ex.combined(verdicts(2)),
    "combined: a failure without expected": lambda: ex.combined(
        [*verdicts(0, fail=1), failed(ex.POPULATED, None, "pool g: short", evidence=("e",))]),
    "combined: not tested only": lambda: ex.combined(verdicts(0, untested=2)),
    # expect.node-in-a-pool
    "in a pool: no profile": lambda: ex.evaluate_node_in_a_pool(None, node()),
    "in a pool": lambda: ex.evaluate_node_in_a_pool(profile(), node()),
    "in a pool: the most specific": lambda: ex.evaluate_node_in_a_pool(profile(FULL, SHORT), node()),
    "in no pool": lambda: ex.evaluate_node_in_a_pool(profile(FULL, SHORT, pool(
        "t4", (("nvidia.com/gpu.product", "Tesla-T4"), ("nvidia.com/zone", "a")))), node(gpu_machine="x")),
    # expect.node-matches-pool
    "matches: no profile": lambda: ex.evaluate_node_matches_pool(None, node()),
    "matches: in no pool": lambda: matches(node(gpu_machine="x")),
    "matches: nothing declared": lambda: matches(node(), pool()),
    "matches: healthy with the probe": lambda: matches(node(), probe=PROBE, requested=REQUESTED),
    "matches: healthy without the probe": lambda: matches(node()),
    "matches: healthy with a canary": lambda: matches(node(), mode="legacy"),
    "matches: another runtime mode": lambda: matches(node(), mode="cdi"),
    "matches: another product label": lambda: matches(node(gpu_product="NVIDIA-H100-PCIe")),
    "matches: a shared and a MIG product label": lambda: (
        matches(node(gpu_product="NVIDIA-H100-80GB-HBM3-SHARED")),
        matches(node(gpu_product="NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"))),
    "matches: the probe sees another product": lambda: matches(node(), probe=probe_with(devices=tuple(
        dataclasses.replace(d, name="NVIDIA H200") for d in PROBE.devices)), requested=REQUESTED),
    "matches: a stale product label beside the probe": lambda: matches(node(gpu_product="NVIDIA-H200"), probe=PROBE,
                                                                       requested=REQUESTED),
    "matches: no product anywhere": lambda: matches(node(drop=("gpu.product",)),
                                                    pool(gpu=GpuSpec("NVIDIA-H100-80GB-HBM3"))),
    "matches: a gpu short": lambda: matches(node(gpu_count="7", capacity={"nvidia.com/gpu": "7"}), probe=probe_with(
        devices=PROBE.devices[:7]), requested=7),
    "matches: the probe asked for fewer": lambda: matches(node(), probe=probe_with(devices=PROBE.devices[:4]),
                                                          requested=4),
    "matches: the probe's cuda failed": lambda: matches(node(), probe=probe_with(
        init=dataclasses.replace(PROBE.init, code=999, name="cudaErrorUnknown", message="unknown error"),
        devices=()), requested=REQUESTED),
    "matches: a stale count label beside the probe": lambda: matches(node(gpu_count="4"), probe=PROBE,
                                                                     requested=REQUESTED),
    "matches: counts from dra devices": lambda: matches(node(drop=("gpu.count",), capacity={}, devices=8),
                                                        pool(gpu=GpuSpec(count=8))),
    "matches: dra devices short": lambda: matches(node(drop=("gpu.count",), capacity={}, devices=6),
                                                  pool(gpu=GpuSpec(count=8))),
    "matches: no count anywhere": lambda: matches(node(drop=("gpu.count",), capacity={}), pool(gpu=GpuSpec(count=8))),
    "matches: shared gpus count": lambda: matches(
        node(gpu_replicas="4", gpu_sharing__strategy="time-slicing", capacity={"nvidia.com/gpu.shared": "32"}),
        pool(gpu=GpuSpec(count=8), sharing=SharingSpec("time-slicing", 4)), probe=PROBE, requested=32),
    "matches: another memory label": lambda: matches(node(gpu_memory="40960")),
    "matches: the probe sees another memory": lambda: matches(node(), probe=probe_with(devices=tuple(
        dataclasses.replace(d, total_memory_bytes=40960 << 20) for d in PROBE.devices)), requested=REQUESTED),
    "matches: a stale memory label beside the probe": lambda: matches(node(gpu_memory="40960"), probe=PROBE,
                                                                      requested=REQUESTED),
    "matches: another driver": lambda: matches(node(cuda_driver__version_full="570.211.01")),
    "matches: the probe runs another driver": lambda: matches(node(), probe=probe_with(
        nvml_driver_version="580.82.07"), requested=REQUESTED),
    "matches: an unreadable driver label": lambda: matches(node(cuda_driver__version_full="five-eighty")),
    "matches: an old gfd's driver and cuda labels": lambda: matches(NodeView.of("n", {
        **{k: v for k, v in LABELS.items() if "version.full" not in k}, "nvidia.com/cuda.driver.major": "580",
        "nvidia.com/cuda.driver.minor": "159", "nvidia.com/cuda.driver.rev": "03",
        "nvidia.com/cuda.runtime.major": "12", "nvidia.com/cuda.runtime.minor": "8"}, EIGHT, EIGHT)),
    "matches: no driver anywhere": lambda: matches(node(drop=("cuda.driver-version.full", "cuda.runtime-version.full")),
                                                   pool(driver=DriverSpec("580.159.03", 580), cuda=CudaSpec("13.0"))),
    "matches: another cuda": lambda: matches(node(cuda_runtime__version_full="12.8")),
    "matches: an unreadable cuda label": lambda: matches(node(cuda_runtime__version_full="thirteen")),
    "matches: the probe's cuda": lambda: matches(node(), probe=probe_with(raw={
        **PROBE.raw, "nvml": {**PROBE.raw["nvml"], "cuda_driver_version": 12080}}), requested=REQUESTED),
    "matches: the probe's cuda unread": lambda: matches(node(drop=("cuda.runtime-version.full",)), probe=probe_with(
        raw={**PROBE.raw, "nvml": {**PROBE.raw["nvml"], "cuda_driver_version": 999}}), requested=REQUESTED),
    "matches: a gfd-less node's slices": lambda: matches(H200, pool(
        selector=(("nvidia.com/gpu.product", "NVIDIA-H200"),), gpu=GpuSpec("NVIDIA-H200", 8, 143771),
        driver=DriverSpec("580.159.03"), cuda=CudaSpec("13.0"))),
    "matches: mig strategy none, configured single": lambda: matches(node(), pool(mig=MigSpec("none"))),
    "matches: mig strategy none, no label": lambda: matches(node(drop=("mig.strategy",)), pool(mig=MigSpec("none"))),
    "matches: mig strategy single declared, none in use": lambda: matches(node(), pool(mig=MigSpec("single"))),
    "matches: mig mixed": lambda: matches(mixed_node(), MIG_POOL),
    "matches: mig mixed declared none": lambda: matches(mixed_node(), pool(mig=MigSpec("none"))),
    "matches: mig mixed, a gpu with another layout": lambda: matches(mixed_node(
        {**MIG_MIXED, "nvidia.com/mig-1g.10gb": "14", "nvidia.com/mig-7g.80gb": "1"}), MIG_POOL),
    "matches: mig mixed, uneven copies": lambda: matches(mixed_node(
        {**MIG_MIXED, "nvidia.com/mig-1g.10gb": "18"}), MIG_POOL),
    "matches: mig layout without a count": lambda: matches(mixed_node(), pool(mig=MigSpec("mixed", LAYOUT))),
    "matches: mig layout without a count, uneven": lambda: matches(mixed_node(
        {**MIG_MIXED, "nvidia.com/mig-1g.10gb": "18"}), pool(mig=MigSpec("mixed", LAYOUT))),
    "matches: mig count without a layout": lambda: matches(mixed_node(), pool(gpu=GpuSpec(count=8),
                                                                            mig=MigSpec("mixed"))),
    "matches: mig layout on whole gpus": lambda: matches(node(), pool(mig=MigSpec("mixed", LAYOUT))),
    "matches: mig layout, nothing advertised": lambda: matches(node(capacity={}), pool(mig=MigSpec("mixed", LAYOUT))),
    "matches: mig single": lambda: matches(single_node(), pool(gpu=GpuSpec(count=8, memory_mib=81559),
                                                               mig=MigSpec("single", (("1g.10gb", 7),)))),
    "matches: mig single, a gpu short": lambda: matches(single_node("49", "49"), pool(
        gpu=GpuSpec(count=8), mig=MigSpec("single", (("1g.10gb", 7),)))),
    "matches: mig single, no count label": lambda: matches(NodeView.of("n", {
        k: v for k, v in single_node().labels.items() if k != "nvidia.com/gpu.count"}, {"nvidia.com/gpu": "56"},
        {"nvidia.com/gpu": "56"}), pool(mig=MigSpec("single", (("1g.10gb", 7),)))),
    "matches: mig single with the probe's memory": lambda: matches(single_node(), pool(
        gpu=GpuSpec(memory_mib=81559)), probe=PROBE, requested=56),
    "matches: mig single shared": lambda: matches(NodeView.of("n", {
        **single_node().labels, "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED"},
        {"nvidia.com/gpu": "56"}, {"nvidia.com/gpu": "56"}), pool(mig=MigSpec("single", (("1g.10gb", 7),)))),
    "matches: mig labels only": lambda: matches(NodeView.of("n", {
        "nvidia.com/gpu.machine": "sim-h100", "nvidia.com/mig-1g.10gb.count": "56", "nvidia.com/mig-x.count": "n"},
        {}, {}), pool(gpu=GpuSpec(count=8), mig=MigSpec("mixed", (("1g.10gb", 7),)))),
    "matches: sharing strategy": lambda: matches(node(gpu_sharing__strategy="mps"),
                                                 pool(sharing=SharingSpec("time-slicing", 4))),
    "matches: no sharing label": lambda: matches(node(drop=("gpu.sharing-strategy", "gpu.replicas"), capacity={}),
                                                 pool(sharing=SharingSpec("time-slicing", 4))),
    "matches: replicas by capacity": lambda: matches(
        node(gpu_replicas="4", gpu_sharing__strategy="time-slicing", capacity={"nvidia.com/gpu": "32"}),
        pool(sharing=SharingSpec("time-slicing", 4))),
    "matches: replicas, capacity uneven": lambda: matches(
        node(gpu_replicas="4", gpu_sharing__strategy="time-slicing", capacity={"nvidia.com/gpu": "30"}),
        pool(sharing=SharingSpec("time-slicing", 4))),
    "matches: replicas, the declared count divides": lambda: matches(
        node(drop=("gpu.count",), gpu_replicas="4", capacity={"nvidia.com/gpu": "32"}),
        pool(gpu=GpuSpec(count=8), sharing=SharingSpec("time-slicing", 4))),
    "matches: unshared, more advertised than gpus": lambda: matches(node(capacity={"nvidia.com/gpu": "16"}),
                                                                    pool(sharing=SharingSpec("none"))),
    "matches: unshared, fewer advertised than gpus": lambda: matches(node(capacity={"nvidia.com/gpu": "7"}),
                                                                     pool(sharing=SharingSpec("none"))),
    "matches: unshared, as many as gpus": lambda: matches(node(), pool(sharing=SharingSpec("none"))),
    "matches: count on a shared node, sharing undeclared": lambda: matches(
        node(gpu_replicas="4", capacity={"nvidia.com/gpu": "32"}), pool(gpu=GpuSpec(count=8)), probe=PROBE,
        requested=32),
    "matches: a slice attribute the probe contradicts": lambda: matches(H200, pool(
        selector=(("feature.node.kubernetes.io/pci-10de.present", "true"),), gpu=GpuSpec("NVIDIA-H100-80GB-HBM3")),
        probe=PROBE, requested=8),
    "matches: the probe's cuda at 1000": lambda: matches(node(drop=("cuda.runtime-version.full",)), probe=probe_with(
        raw={**PROBE.raw, "nvml": {**PROBE.raw["nvml"], "cuda_driver_version": 1000}}), requested=REQUESTED),
    "matches: mig instances in the probe": lambda: matches(mixed_node(), pool(
        gpu=GpuSpec("NVIDIA-A100-SXM4-80GB", memory_mib=81920)), probe=MIG_PROBE, requested=32),
    "matches: replicas 2 declared, the plugin not sharing": lambda: matches(
        node(gpu_replicas="2"), pool(sharing=SharingSpec("time-slicing", 2))),
    "matches: no memory anywhere": lambda: matches(node(drop=("gpu.memory",)), pool(gpu=GpuSpec(memory_mib=81559))),
    "matches: two counts, both off": lambda: matches(node(gpu_count="7", capacity={"nvidia.com/gpu": "6"}),
                                                     pool(gpu=GpuSpec(count=8))),
    "matches: mig by its resources alone": lambda: matches(mixed_node(counts={}), MIG_POOL),
    "matches: count without a replicas label or declared sharing": lambda: matches(
        node(drop=("gpu.replicas",)), pool(gpu=GpuSpec(count=8)), probe=PROBE, requested=REQUESTED),
    "matches: nccl floor only": lambda: matches(node(), pool(nccl=NcclSpec(400.0))),
    "matches: nothing observable": lambda: matches(node(), pool(runtime=RuntimeSpec("cdi"), nccl=NcclSpec(400.0))),
}


@pytest.mark.parametrize("case", CASES)
def test_each_expect_decision_is_recorded(case: str) -> None:
    value = CASES[case]()
    check_recording("expect", case, lambda: record(value))


def record(value: Any) -> Any:
    if isinstance(value, Verdict):
        return {**whole(value), "facts": value.facts}
    if isinstance(value, (list, tuple)):
        return [record(v) for v in value]
    return value


# -------------------------------------------------------------------------------------------------
# Rules the recording holds, stated


def test_a_pool_at_its_exact_or_minimum_count_is_populated_and_one_off_is_not() -> None:
    assert NodeCount(exact=2).admits(2) and not NodeCount(exact=2).admits(3)
    assert [v.outcome for v in ex.evaluate_pool_populated(profile(pool(nodes=NodeCount(min=2))),
                                                          [node("a"), node("b")])] == [Outcome.PASS]
    assert [v.outcome for v in ex.evaluate_pool_populated(profile(pool(nodes=NodeCount(min=2))),
                                                          [node("a")])] == [Outcome.FAIL]


def test_a_label_the_probe_contradicts_is_not_judged_and_one_it_confirms_is() -> None:
    stale = matches(node(gpu_memory="40960"), probe=PROBE, requested=REQUESTED)
    assert stale.outcome is Outcome.PASS
    wrong = matches(node(cuda_driver__version_full="570.211.01"), probe=probe_with(nvml_driver_version="570.211.01"),
                    requested=REQUESTED)
    assert wrong.outcome is Outcome.FAIL
    assert "observed 570.211.01 (label nvidia.com/cuda.driver-version.full; NVML in the probe)" in wrong.summary


def test_the_worst_outcome_leads_a_fold() -> None:
    assert ex.combined(verdicts(1, fail=1, untested=1)).outcome is Outcome.FAIL
    assert ex.combined(verdicts(1, untested=1)).outcome is Outcome.PASS
