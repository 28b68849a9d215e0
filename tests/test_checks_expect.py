"""The expect.* checks as pure decisions, fed from simulated nodes: each simulated profile passes
against a declaration of itself, every declared field a fault changes is named with what was
declared and what each view of the node shows, and nothing is passed that was not observed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuconf.checks.expect import (
    NO_EXPECT,
    combined,
    declared_gpu_count,
    evaluate_node_in_a_pool,
    evaluate_node_matches_pool,
    evaluate_pool_populated,
)
from gpuconf.checks.inventory import NodeView, evaluate_gpu_count, evaluate_labels_match_hardware
from gpuconf.compat import tables
from gpuconf.compat.versions import parse_cuda
from gpuconf.expect import ExpectProfile, load_expect
from gpuconf.probes.cuda import CudaProbeReport, parse_cuda_probe
from gpuconf.sim.emulate import Visible, cuda_probe_run
from gpuconf.sim.node_facts import node_labels, node_resources, resource_slices
from gpuconf.sim.profile import NodePool, Profile, SimNode, expand, load_profile, with_faults
from gpuconf.verdict import Outcome, checks

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "expect"
CHECKS = ("expect.pool-populated", "expect.node-in-a-pool", "expect.node-matches-pool")


def view(n: SimNode) -> NodeView:
    capacity, allocatable = node_resources(n)
    devices = sum(len(s["spec"]["devices"]) for s in resource_slices(n))
    return NodeView.of(n.name, node_labels(n), capacity, allocatable, devices)


def whole_node_probe(n: SimNode) -> tuple[CudaProbeReport, int]:
    """What the inventory suite's whole-node probe reports, and how many GPUs it asked for."""
    row = tables.image_require("13.0.2")
    env = {"NVIDIA_REQUIRE_CUDA": row.require, "CUDA_VERSION": row.cuda_version_env}
    code, out = cuda_probe_run(n, visible=[Visible(g) for g in n.present_gpus if g.health == "Healthy"],
                               image_cuda=parse_cuda("13.0.2"), env=env, compat=True,
                               started_at="2026-11-29T00:00:00.000Z", hostname=n.name)
    return parse_cuda_probe(out, exit_code=code), int(node_resources(n)[1].get("nvidia.com/gpu", "0"))


def nodes_of(profile: Profile) -> list[SimNode]:
    return list(expand(profile).nodes)


def matches(expect: ExpectProfile, n: SimNode, *, probe: bool = True, **kw: Any):
    report, requested = whole_node_probe(n) if probe and n.device_plugin.enabled else (None, None)
    return evaluate_node_matches_pool(expect, view(n), probe=report, probe_requested=requested, **kw)


def all_verdicts(expect: ExpectProfile, nodes: list[SimNode], *, probe: bool = True):
    views = [view(n) for n in nodes]
    out = evaluate_pool_populated(expect, views)
    out += [evaluate_node_in_a_pool(expect, v) for v in views]
    out += [matches(expect, n, probe=probe) for n in nodes]
    return out


def declare(profile: Profile, tmp_path: Path) -> ExpectProfile:
    """An --expect file declaring everything a simulated profile's pools are (selected by GFD's
    gpu.machine label, which the simulator sets per pool), written and loaded like a user's."""
    pools = []
    for p in profile.pools:
        plugin = p.device_plugin
        pool: dict[str, Any] = {
            "name": p.name, "selector": {"nvidia.com/gpu.machine": f"sim-{p.name}"}, "nodes": p.count,
            "gpu": {"product": p.gpu.gfd_product, "count": p.gpus_per_node, "memory_mib": p.gpu.memory_mib},
            "driver": {"version": str(p.driver), "branch": p.driver.branch},
            "cuda": {"driver_version": str(tables.native_cuda(p.driver))},
            "mig": {"strategy": plugin.mig.strategy} | ({"layout": dict(plugin.mig.layout)} if plugin.mig.layout
                                                         else {}),
            "sharing": {"strategy": plugin.sharing.strategy}
            | ({"replicas": plugin.sharing.replicas} if plugin.sharing.strategy != "none" else {}),
        }
        pools.append(pool)
    path = tmp_path / f"{profile.name}.yaml"
    path.write_text(yaml.safe_dump({"schema": 1, "name": profile.name, "pools": pools}, sort_keys=False))
    return load_expect(path)


def bad(verdicts) -> dict[tuple[str, str | None], str]:
    return {(v.check, v.node): v.message() for v in verdicts if v.outcome is not Outcome.PASS}


def test_the_checks_are_in_the_catalog_with_their_suite():
    for cid in CHECKS:
        assert checks()[cid].suite == "suites/test_expect.py"
    assert checks()["expect.node-in-a-pool"].severity == "degraded"


# --- each profile against its own declaration ------------------------------------------------


@pytest.mark.parametrize("name", ["healthy-h100", "mixed-driver-570"])
def test_each_example_passes_against_the_simulated_cluster_it_describes(name):
    expect = load_expect(EXAMPLES / f"{name}.yaml")
    assert not bad(all_verdicts(expect, nodes_of(load_profile(name))))


#: Every shipped profile whose MIG layout is one per GPU (a100-mig-mixed gives GPUs 4-7 another
#: layout, which a pool's per-GPU layout cannot declare) and small enough to probe every node.
DECLARABLE = ["healthy-h100", "mixed-driver-570", "multi-pool", "t4-timeslicing", "h200-dra-only"]


@pytest.mark.parametrize("name", DECLARABLE)
def test_a_healthy_profile_passes_against_a_declaration_of_itself(tmp_path, name):
    profile = load_profile(name)
    assert not bad(all_verdicts(declare(profile, tmp_path), nodes_of(profile)))


def test_a_mig_mixed_node_is_counted_through_its_declared_layout(tmp_path):
    profile = load_profile("multi-pool")
    n = expand(profile).node("a100-mig-0")
    verdict = matches(declare(profile, tmp_path), n)
    assert verdict.outcome is Outcome.PASS, verdict.message()
    assert ("gpu.count: declared 8, observed 8 (device plugin capacity nvidia.com/mig-*, per the declared layout; "
            "labels nvidia.com/mig-*.count, per the declared layout)") in verdict.evidence
    assert ("mig.layout: declared {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2} per GPU = {3g.40gb: 8, 2g.20gb: 8, "
            "1g.10gb: 16} on 8 GPUs, observed {1g.10gb: 16, 2g.20gb: 8, 3g.40gb: 8} (device plugin capacity "
            "nvidia.com/mig-*; labels nvidia.com/mig-*.count)") in verdict.evidence


# --- faults: the field they change is named, declared against observed ------------------------------


@pytest.mark.parametrize("fault, profile, pool, wanted", [
    ({"id": "driver-skew"}, "healthy-h100", "h100",
     ["driver.version: declared 580.159.03, observed 570.211.01 (label nvidia.com/cuda.driver-version.full; "
      "NVML in the probe)",
      "driver.branch: declared 580, observed 570 (label nvidia.com/cuda.driver-version.full; NVML in the probe)",
      "cuda.driver_version: declared 13.0, observed 12.8 (label nvidia.com/cuda.runtime-version.full; NVML in the "
      "probe)"]),
    ({"id": "gpu-lost", "gpu": 3}, "healthy-h100", "h100",
     ["gpu.count: declared 8, observed 7 (label nvidia.com/gpu.count; device plugin capacity; CUDA devices in "
      "the whole-node probe)"]),
    ({"id": "timeslice-replicas-wrong", "replicas": 8}, "t4-timeslicing", "t4",
     ["sharing.replicas: declared 4, observed 4 (label nvidia.com/gpu.replicas), 8 (device plugin capacity 32 "
      "over 4 GPUs)"]),
    ({"id": "mig-layout-drift", "gpu": 1, "layout": {"7g.80gb": 1}}, "multi-pool", "a100-mig",
     ["gpu.count: declared 8, observed not a whole number ({1g.10gb: 14, 2g.20gb: 7, 3g.40gb: 7, 7g.80gb: 1}) "
      "(device plugin capacity nvidia.com/mig-*, per the declared layout; labels nvidia.com/mig-*.count, per the "
      "declared layout)",
      "mig.layout: declared {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2} per GPU = {3g.40gb: 8, 2g.20gb: 8, 1g.10gb: 16} "
      "on 8 GPUs, observed {1g.10gb: 14, 2g.20gb: 7, 3g.40gb: 7, 7g.80gb: 1} (device plugin capacity "
      "nvidia.com/mig-*; labels nvidia.com/mig-*.count)"]),
], ids=["a node left on another driver differs in driver and CUDA",
        "a GPU fallen off the bus leaves the node one GPU short",
        "a device plugin advertising more replicas than declared",
        "a GPU with another MIG layout breaks the declared layout"])
def test_a_fault_fails_node_matches_pool_naming_the_field(tmp_path, fault, profile, pool, wanted):
    base = load_profile(profile)
    expect = declare(base, tmp_path)
    nodes = nodes_of(with_faults(base, [{"pool": pool, "node": 0} | fault]))
    broken = bad(all_verdicts(expect, nodes))
    assert set(broken) == {("expect.node-matches-pool", f"{pool}-0")}, broken
    verdict = matches(expect, next(n for n in nodes if n.name == f"{pool}-0"))
    assert verdict.outcome is Outcome.FAIL
    assert verdict.summary == f"differs from pool {pool!r}: " + "; ".join(wanted)
    assert "remediation:" in verdict.message()


def test_a_label_that_lies_beside_the_probe_s_reading_is_the_label_check_s_finding_not_the_pool_s(tmp_path):
    """GFD's memory label says 40960 MiB where CUDA in the whole-node probe reads 81559: the node has the
    declared memory, so it matches its pool; the label is shown, not judged, and labels.gfd-matches-hardware
    fails on it. Without the probe the label is the only view and is judged."""
    base = load_profile("healthy-h100")
    expect = declare(base, tmp_path)
    drift = {"id": "label-drift", "pool": "h100", "node": 0, "label": "nvidia.com/gpu.memory", "value": "40960"}
    n = next(n for n in nodes_of(with_faults(base, [drift])) if n.name == "h100-0")
    verdict = matches(expect, n)
    assert verdict.outcome is Outcome.PASS, verdict.message()
    assert ("gpu.memory_mib: declared 81559, observed 40960 (label nvidia.com/gpu.memory, not judged beside the "
            "probe's reading), 81559 (CUDA device memory in the probe)") in verdict.evidence
    assert verdict.facts["fields"]["gpu.memory_mib"]["observed"][0] == {
        "source": "label nvidia.com/gpu.memory", "value": "40960", "agrees": False, "judged": False}
    report, _ = whole_node_probe(n)
    assert evaluate_labels_match_hardware(view(n), report).outcome is Outcome.FAIL
    blind = matches(expect, n, probe=False)
    assert blind.outcome is Outcome.FAIL
    assert blind.summary == "differs from pool 'h100': gpu.memory_mib: declared 81559, observed 40960 (label " \
        "nvidia.com/gpu.memory)"


def test_a_drifted_product_label_takes_the_node_out_of_its_pool(tmp_path):
    """Selected by product, a node whose product label lies leaves the pool: the pool is short, the
    node is in no pool, and the pool's failure names it as the node that misses by one label."""
    expect = load_expect(EXAMPLES / "healthy-h100.yaml")
    nodes = nodes_of(with_faults(load_profile("healthy-h100"), [{"id": "label-drift", "pool": "h100", "node": 1}]))
    verdicts = all_verdicts(expect, nodes)
    assert {k: v.split("\n")[0] for k, v in bad(verdicts).items()} == {
        ("expect.pool-populated", None): "expect.pool-populated: pool 'h100' has 1 GPU nodes; exactly 2 declared",
        ("expect.node-in-a-pool", "h100-1"): "expect.node-in-a-pool on h100-1: the GPU node matches no pool the "
                                             "--expect file declares",
        ("expect.node-matches-pool", "h100-1"): "expect.node-matches-pool on h100-1: the node matches no declared "
                                                "pool (expect.node-in-a-pool reports it)",
    }
    populated = verdicts[0]
    assert populated.evidence == ("selector nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3",
                                  "h100-1 has nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB, not NVIDIA-H100-80GB-HBM3")
    assert populated.observed == "1 (h100-0)"
    in_pool = verdicts[2]
    assert in_pool.outcome is Outcome.DEGRADED
    assert in_pool.observed == "nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB"


def test_nodes_of_another_cluster_are_in_no_pool(tmp_path):
    expect = load_expect(EXAMPLES / "healthy-h100.yaml")
    verdicts = all_verdicts(expect, nodes_of(load_profile("mixed-driver-570")), probe=False)
    outcomes = {(v.check, v.node): v.outcome for v in verdicts}
    assert outcomes[("expect.node-in-a-pool", "a100-570-0")] is Outcome.DEGRADED
    assert outcomes[("expect.node-matches-pool", "a100-570-0")] is Outcome.NOT_TESTED
    assert outcomes[("expect.node-in-a-pool", "h100-580-0")] is Outcome.PASS
    assert outcomes[("expect.pool-populated", None)] is Outcome.PASS


# --- pools --------------------------------------------------------------------------------------


def test_a_pool_short_of_its_declared_count_fails_and_the_others_are_evidence(tmp_path):
    path = tmp_path / "two.yaml"
    path.write_text((EXAMPLES / "mixed-driver-570.yaml").read_text().replace("nodes: {min: 2}", "nodes: {min: 3}"))
    verdicts = evaluate_pool_populated(load_expect(path), [view(n) for n in nodes_of(load_profile("mixed-driver-570"))])
    assert [v.outcome for v in verdicts] == [Outcome.PASS, Outcome.FAIL]
    assert verdicts[1].summary == "pool 'h100-580' has 2 GPU nodes; at least 3 declared"
    one = combined(verdicts)
    assert (one.outcome, one.node, one.summary) == (Outcome.FAIL, None, verdicts[1].summary)
    assert one.evidence[0] == ("pass: pool 'a100-570': 2 GPU nodes (a100-570-0, a100-570-1), exactly 2 declared")
    assert one.expected == "at least 3 GPU nodes labelled nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"


def test_every_pool_populated_is_one_passing_verdict():
    verdicts = evaluate_pool_populated(load_expect(EXAMPLES / "mixed-driver-570.yaml"),
                                       [view(n) for n in nodes_of(load_profile("mixed-driver-570"))])
    one = combined(verdicts)
    assert one.outcome is Outcome.PASS
    assert one.summary == ("pool 'a100-570': 2 GPU nodes (a100-570-0, a100-570-1), exactly 2 declared; "
                           "pool 'h100-580': 2 GPU nodes (h100-580-0, h100-580-1), at least 2 declared")


# --- what cannot be observed is said, never passed -------------------------------------------------------


def test_a_healthy_node_passes_and_says_what_it_could_not_observe():
    expect = load_expect(EXAMPLES / "healthy-h100.yaml")
    verdict = matches(expect, nodes_of(load_profile("healthy-h100"))[0])
    assert verdict.outcome is Outcome.PASS
    assert verdict.summary == ("matches pool 'h100' on 8 declared fields; not observed: runtime.mode, "
                               "nccl.busbw_floor_gbps")
    assert ("runtime.mode: declared legacy, not observed (no label shows it: a canary pod with "
            "NVIDIA_REQUIRE_CUDA=cuda>=99.0 does, and none ran)") in verdict.evidence
    assert verdict.facts["pool"] == "h100"


def test_without_a_probe_the_labels_and_capacity_still_answer():
    expect = load_expect(EXAMPLES / "healthy-h100.yaml")
    verdict = matches(expect, nodes_of(load_profile("healthy-h100"))[0], probe=False)
    assert verdict.outcome is Outcome.PASS
    assert "gpu.count: declared 8, observed 8 (label nvidia.com/gpu.count; device plugin capacity)" in verdict.evidence


def test_a_runtime_mode_observed_by_a_canary_is_compared():
    expect = load_expect(EXAMPLES / "healthy-h100.yaml")
    n = nodes_of(load_profile("healthy-h100"))[0]
    assert matches(expect, n, probe=False, runtime_mode="legacy").summary.startswith("matches pool 'h100' on 9 ")
    verdict = matches(expect, n, probe=False, runtime_mode="jit-cdi")
    assert verdict.outcome is Outcome.FAIL
    assert verdict.summary == "differs from pool 'h100': runtime.mode: declared legacy, observed jit-cdi (canary pod)"
    assert (verdict.expected, verdict.observed) == ("runtime.mode=legacy", "runtime.mode=jit-cdi")


def test_a_pool_whose_fields_no_view_shows_is_not_tested(tmp_path):
    path = tmp_path / "unseen.yaml"
    path.write_text("schema: 1\npools:\n  - name: h100\n    selector: {nvidia.com/gpu.machine: sim-h100}\n"
                    "    runtime: {mode: cdi}\n    nccl: {busbw_floor_gbps: 400}\n")
    verdict = matches(load_expect(path), nodes_of(load_profile("healthy-h100"))[0], probe=False)
    assert verdict.outcome is Outcome.NOT_TESTED
    assert verdict.summary.startswith("none of the fields pool 'h100' declares can be observed on this node: ")
    assert "nccl.busbw_floor_gbps: declared 400, not observed (bus bandwidth is measured by the NCCL suite, " \
           "not here)" in verdict.summary


def test_a_pool_declaring_only_its_selector_is_not_tested(tmp_path):
    path = tmp_path / "bare.yaml"
    path.write_text("schema: 1\npools:\n  - {name: h100, selector: {nvidia.com/gpu.machine: sim-h100}}\n")
    verdict = matches(load_expect(path), nodes_of(load_profile("healthy-h100"))[0], probe=False)
    assert (verdict.outcome, verdict.summary) == (Outcome.NOT_TESTED, "pool 'h100' declares nothing beyond its "
                                                                      "selector")


def test_without_an_expect_file_every_check_is_not_tested():
    n = view(nodes_of(load_profile("healthy-h100"))[0])
    verdicts = [*evaluate_pool_populated(None, [n]), evaluate_node_in_a_pool(None, n),
                evaluate_node_matches_pool(None, n)]
    assert [(v.check, v.outcome, v.summary) for v in verdicts] == [(cid, Outcome.NOT_TESTED, NO_EXPECT)
                                                                   for cid in CHECKS]
    assert NO_EXPECT == "no --expect file given"


# --- inventory.gpu-count-matches-expected with the declared count ------------------------------------


def test_the_declared_gpu_count_joins_the_inventory_count_check():
    expect = load_expect(EXAMPLES / "healthy-h100.yaml")
    healthy = nodes_of(load_profile("healthy-h100"))[0]
    assert declared_gpu_count(expect, view(healthy)) == 8
    verdict = evaluate_gpu_count(view(healthy), expected=declared_gpu_count(expect, view(healthy)))
    assert verdict.outcome is Outcome.PASS and "--expect: 8" in verdict.summary
    lost = expand(with_faults(load_profile("healthy-h100"), [{"id": "gpu-lost", "pool": "h100", "node": 0,
                                                               "gpu": 1}])).node("h100-0")
    verdict = evaluate_gpu_count(view(lost), expected=declared_gpu_count(expect, view(lost)))
    assert verdict.outcome is Outcome.FAIL and verdict.expected == "8 GPUs everywhere"
    assert declared_gpu_count(None, view(healthy)) is None


def test_a_mig_node_gfd_count_is_not_mistaken_for_its_gpu_count(tmp_path):
    """Under MIG the device plugin advertises instances, not GPUs, and GFD's gpu.count counts every
    physical GPU under mixed (k8s-device-plugin#738) but MIG devices under single: the count check
    does not read the node's GPU count from either."""
    n = expand(load_profile("multi-pool")).node("a100-mig-0")
    assert node_labels(n)["nvidia.com/gpu.count"] == "8"
    assert evaluate_gpu_count(view(n), expected=8).outcome is Outcome.NOT_TESTED


def test_declare_helper_covers_every_pool(tmp_path):
    """The declarations the tests above build are complete: one pool per simulated pool."""
    profile = load_profile("multi-pool")
    assert [p.name for p in declare(profile, tmp_path).pools] == [p.name for p in profile.pools]
    assert all(isinstance(p, NodePool) for p in profile.pools)


# --- DRA-first nodes without GFD (issue 27) ---------------------------------------------------


def gfd_less(n: SimNode) -> NodeView:
    """A DRA node as the GPU Operator's GPUCluster mode leaves it: no nvidia.com/ label, its slices."""
    capacity, allocatable = node_resources(n)
    labels = {k: v for k, v in node_labels(n).items() if not k.startswith("nvidia.com/")}
    return NodeView.of(n.name, labels, capacity, allocatable, slices=resource_slices(n))


def test_a_product_pool_finds_its_gfd_less_nodes_and_judges_them_on_their_slices(tmp_path):
    profile = load_profile("h200-dra-only")
    path = tmp_path / "dra.yaml"
    path.write_text(yaml.safe_dump({"schema": 1, "name": "dra", "pools": [{
        "name": "h200", "selector": {"nvidia.com/gpu.product": "NVIDIA-H200"}, "nodes": 2,
        "gpu": {"product": "NVIDIA-H200", "count": 8, "memory_mib": 143771},
        "driver": {"version": "580.159.03"}, "cuda": {"driver_version": "13.0"}}]}))
    expect = load_expect(path)
    views = [gfd_less(n) for n in nodes_of(profile)]
    assert all(v.outcome is Outcome.PASS for v in evaluate_pool_populated(expect, views))
    v = evaluate_node_matches_pool(expect, views[0])
    assert v.outcome is Outcome.PASS, v.message()
    assert v.summary == "matches pool 'h200' on 5 declared fields"
    assert "gpu.product: declared NVIDIA-H200, observed NVIDIA-H200 (ResourceSlice attribute productName)" in v.evidence
    assert ("driver.version: declared 580.159.03, observed 580.159.3 (ResourceSlice attribute driverVersion)"
            in v.evidence)
    assert "gpu.memory_mib: declared 143771, observed 143771 (ResourceSlice attribute capacity memory)" in v.evidence
    # a slice of another driver is named with its source
    other = NodeView.of("h200-9", {}, slices=[{**s, "spec": {**s["spec"], "nodeName": "h200-9", "devices": [
        {**d, "attributes": {**d["attributes"], "driverVersion": {"version": "570.195.3"}}}
        for d in s["spec"]["devices"]]}} for s in resource_slices(nodes_of(profile)[0])])
    wrong = evaluate_node_matches_pool(expect, other)
    assert wrong.outcome is Outcome.FAIL
    assert "driver.version: declared 580.159.03, observed 570.195.3 (ResourceSlice attribute driverVersion)" \
        in wrong.summary
