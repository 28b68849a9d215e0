"""Inventory checks as pure decisions, fed from simulated nodes: healthy nodes pass every check,
and each fault fails exactly the check the catalog names for it, with a message naming the node
and the cause."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuconf.checks.inventory import (
    DriverPolicy,
    NodeView,
    evaluate_allocatable_matches_capacity,
    evaluate_cuda_device_nodes,
    evaluate_driver_uniform,
    evaluate_gpu_count,
    evaluate_gpu_resource_advertised,
    evaluate_labels_match_hardware,
    evaluate_nvml_initializes,
    fact_product,
    gfd_absent_by_design,
    gfd_deployment,
    node_driver,
    pool_gpu_count,
    pool_key,
)
from gpuconf.compat import tables
from gpuconf.compat.versions import parse_cuda
from gpuconf.probes.cuda import parse_cuda_probe
from gpuconf.sim.emulate import Visible, cuda_probe_run
from gpuconf.sim.node_facts import node_labels, node_resources, resource_slices
from gpuconf.sim.profile import SimNode, expand, fault_catalog, load_profile, with_faults
from gpuconf.verdict import Outcome, checks

PROFILE = "healthy-h100"
LABEL = " (label nvidia.com/cuda.driver-version.full)"  # the driver label, as a verdict names its source
REAL_GFD = Path(__file__).parent / "data" / "real" / "gfd"


def view(n: SimNode) -> NodeView:
    capacity, allocatable = node_resources(n)
    devices = sum(len(s["spec"]["devices"]) for s in resource_slices(n))
    return NodeView.of(n.name, node_labels(n), capacity, allocatable, devices)


def whole_node_probe(n: SimNode):
    row = tables.image_require("13.0.2")
    env = {"NVIDIA_REQUIRE_CUDA": row.require, "CUDA_VERSION": row.cuda_version_env}
    code, out = cuda_probe_run(n, visible=[Visible(g) for g in n.gpus], image_cuda=parse_cuda("13.0.2"), env=env,
                               compat=True, started_at="2026-11-29T00:00:00.000Z", hostname=n.name)
    return parse_cuda_probe(out, exit_code=code)


def verdicts(nodes: list[SimNode]) -> dict[tuple[str, str], Outcome]:
    out = {}
    views = [view(n) for n in nodes]
    pools = pool_gpu_count(views)
    for v in evaluate_driver_uniform(views):
        out[(v.check, v.node)] = v
    for n, v in zip(nodes, views, strict=True):
        probe = whole_node_probe(n)
        for verdict in (evaluate_gpu_resource_advertised(v), evaluate_allocatable_matches_capacity(v),
                        evaluate_gpu_count(v, probe=probe, pool=pools.get(n.name)),
                        evaluate_labels_match_hardware(v, probe),
                        evaluate_nvml_initializes(n.name, probe), evaluate_cuda_device_nodes(n.name, probe)):
            out[(verdict.check, n.name)] = verdict
    return out


def test_a_healthy_cluster_passes_every_inventory_check():
    results = verdicts(list(expand(load_profile(PROFILE)).nodes))
    bad = {k: v.message() for k, v in results.items() if v.outcome is not Outcome.PASS}
    assert not bad, bad


#: The checks `verdicts` evaluates (the other catalog checks need a cluster: the suites test them).
EVALUATED = {"inventory.gpu-resource-advertised", "inventory.allocatable-matches-capacity",
             "inventory.gpu-count-matches-expected", "labels.gfd-matches-hardware", "driver.version-uniform-in-pool",
             "driver.nvml-initializes", "runtime.cuda-device-nodes-present"}
INVENTORY_FAULTS = [f for f in fault_catalog().values() if f.check in EVALUATED]


def test_every_evaluated_check_is_in_the_catalog():
    assert EVALUATED <= set(checks())


@pytest.mark.parametrize("fault", INVENTORY_FAULTS, ids=[f"{f.id} is caught by {f.check}" for f in INVENTORY_FAULTS])
def test_each_fault_fails_its_check_on_its_node_and_nothing_else(fault):
    profile = with_faults(load_profile(PROFILE), [{"id": fault.id, "pool": "h100", "node": 0}
                                                  | ({"gpu": 2} if fault.scope == "gpu" else {})])
    nodes = list(expand(profile).nodes)
    results = verdicts(nodes)
    broken = {k for k, v in results.items() if v.outcome in (Outcome.FAIL, Outcome.DEGRADED)}
    assert broken == {(fault.check, "h100-0")}, {k: results[k].message() for k in broken}
    verdict = results[(fault.check, "h100-0")]
    assert verdict.outcome is (Outcome.FAIL if fault.severity == "fail" else Outcome.DEGRADED)
    message = verdict.message()
    assert "h100-0" in message and "remediation:" in message and "expected" in message


def test_the_unhealthy_count_and_resource_are_named():
    n = expand(with_faults(load_profile(PROFILE), [{"id": "gpu-unhealthy", "pool": "h100", "node": 0, "gpu": 5}])) \
        .node("h100-0")
    verdict = evaluate_allocatable_matches_capacity(view(n))
    assert "nvidia.com/gpu: 7 of 8 allocatable (1 unhealthy)" in verdict.summary


def unhealthy(gpus: list[int]) -> SimNode:
    faults = [{"id": "gpu-unhealthy", "pool": "h100", "node": 0, "gpu": g} for g in gpus]
    return expand(with_faults(load_profile(PROFILE), faults)).node("h100-0")


@pytest.mark.parametrize(("gpus", "unhealthy_max", "outcome", "tail"), [
    ([5], None, Outcome.DEGRADED, "(the node works with the rest; declare gpu.unhealthy_max in --expect to fail past a "
                                  "threshold)"),
    ([2, 5], 2, Outcome.DEGRADED, "(within the 2 --expect tolerates)"),
    ([2, 5], 1, Outcome.FAIL, ": more than the 1 unhealthy GPU(s) per node --expect tolerates (gpu.unhealthy_max)"),
    (list(range(8)), None, Outcome.FAIL, ": nothing is left allocatable"),
], ids=["one of eight is degraded", "within the declared threshold is degraded", "past it fails",
        "none left allocatable fails"])
def test_unhealthy_gpus_degrade_a_node_and_fail_it_past_the_declared_threshold(gpus, unhealthy_max, outcome, tail):
    n = unhealthy(gpus)
    held = [g.uuid for g in n.gpus if g.index not in gpus]
    enumerated = {g.uuid: f"{g.uuid} (gpu {g.index})" for g in n.gpus}
    verdict = evaluate_allocatable_matches_capacity(view(n), enumerated=enumerated, held=held,
                                                    unhealthy_max=unhealthy_max)
    names = ", ".join(f"{g.uuid} (gpu {g.index})" for g in sorted(n.gpus, key=lambda g: g.uuid) if g.index in gpus)
    assert verdict.outcome is outcome
    assert verdict.summary.startswith(f"the device plugin reports {len(gpus)} GPU(s) Unhealthy: {names}; ")
    assert verdict.summary.endswith(tail)


def test_an_unhealthy_gpu_without_an_exporter_view_is_not_guessed():
    verdict = evaluate_allocatable_matches_capacity(view(unhealthy([5])))
    assert "which one: the device plugin's log, 'marking device ... as unhealthy'" in verdict.summary


def test_time_sliced_nodes_count_physical_gpus():
    n = expand(load_profile("t4-timeslicing")).node("t4-0")
    verdict = evaluate_gpu_count(view(n), expected=len(n.gpus))
    assert verdict.outcome is Outcome.PASS, verdict.message()


def test_a_node_without_gpu_labels_is_not_tested_rather_than_failed():
    verdict = evaluate_gpu_resource_advertised(NodeView.of("cpu-node", {"kubernetes.io/os": "linux"}, {"cpu": "8"}))
    assert verdict.outcome is Outcome.NOT_TESTED


def test_a_stale_replicas_label_is_not_a_lost_gpu():
    # timeslice-replicas-wrong: 8 replicas advertised per GPU while GFD still labels 4. The count of
    # GPUs is right (GFD, the whole-node probe); the replicas relation is the sharing suite's check.
    fault = {"id": "timeslice-replicas-wrong", "pool": "t4", "node": 0}
    n = expand(with_faults(load_profile("t4-timeslicing"), [fault])).node("t4-0")
    requested = sum(int(v) for k, v in view(n).allocatable.items() if k == "nvidia.com/gpu")
    verdict = evaluate_gpu_count(view(n), probe=whole_node_probe(n), probe_requested=requested)
    assert verdict.outcome is Outcome.PASS, verdict.message()
    assert "GFD label nvidia.com/gpu.count: 4; probe (CUDA devices in a whole-node pod): 4" in verdict.summary


@pytest.mark.parametrize(("policy", "outcome", "summary"), [
    (None, Outcome.DEGRADED, f"driver 580.82.07{LABEL} while the NVIDIA-H100-80GB-HBM3 pool runs "
                             "580.159.03"),
    (DriverPolicy("h100", branch=580), Outcome.PASS,
     f"driver 580.82.07{LABEL} on branch 580, which --expect allows for pool h100 (branch-only "
     "policy; the pool also runs 580.159.03)"),
    (DriverPolicy("h100", branch=570), Outcome.DEGRADED,
     f"driver 580.82.07{LABEL} is on branch 580 while --expect declares branch 570 for pool h100"),
    (DriverPolicy("h100", version="580.82.07"), Outcome.PASS,
     "driver 580.82.07 (label nvidia.com/cuda.driver-version.full), as --expect declares for pool h100"),
], ids=["without --expect the majority rules", "a branch-only policy allows skew inside the branch",
        "a branch-only policy still catches another branch", "an exact version is the reference"])
def test_driver_uniformity_honours_the_declared_policy(policy, outcome, summary):
    profile = with_faults(load_profile(PROFILE), [{"id": "driver-skew", "pool": "h100", "node": 0,
                                                   "driver": "580.82.07"}])
    views = [view(n) for n in expand(profile).nodes]
    policies = {v.name: policy for v in views} if policy else None
    verdict = next(v for v in evaluate_driver_uniform(views, policies) if v.node == "h100-0")
    assert (verdict.outcome, verdict.summary) == (outcome, summary)


def test_a_lost_gpu_relabelled_by_gfd_is_caught_by_the_pool_and_named_as_missing():
    """GFD relabels gpu.count after a GPU falls off the bus (the device plugin and the probe count one
    fewer too): only the pool's other nodes say there should be 8."""
    nodes = list(expand(with_faults(load_profile(PROFILE), [{"id": "gpu-lost", "pool": "h100", "node": 0,
                                                               "gpu": 3}])).nodes)
    lost = nodes[0]
    assert node_labels(lost)["nvidia.com/gpu.count"] == "7"
    views = [view(n) for n in nodes]
    pools = pool_gpu_count(views)
    verdict = evaluate_gpu_count(views[0], probe=whole_node_probe(lost), pool=pools["h100-0"])
    assert verdict.outcome is Outcome.FAIL
    assert verdict.summary == (
        "GPU count disagrees between views: GFD label nvidia.com/gpu.count: 7; device plugin (capacity, replicas "
        "removed): 7; probe (CUDA devices in a whole-node pod): 7; the 2 nodes of its pool (NVIDIA-H100-80GB-HBM3 on "
        "sim-h100): 8 (1 GPU(s) missing: fallen off the bus, disabled or never enumerated; nvidia-smi -L and the "
        "kernel log (Xid 79) on the node say which)")
    assert evaluate_gpu_count(views[1], probe=whole_node_probe(nodes[1]), pool=pools["h100-1"]).outcome is Outcome.PASS


# -------------------------------------------------------------------------------------------------
# mixed-gpu-models: one node, GPUs of two models


def mixed(profile: str, pool: str, gpu: int, model: str) -> list[SimNode]:
    faults = [{"id": "mixed-gpu-models", "pool": pool, "node": 0, "gpu": gpu, "model": model}]
    return list(expand(with_faults(load_profile(profile), faults)).nodes)


@pytest.mark.parametrize(("profile", "pool", "model", "main", "odd"), [
    ("healthy-h100", "h100", "NVIDIA GeForce RTX 4090", "NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 4090"),
    ("a100-mps", "a100", "A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-40GB"),
], ids=["geforce-among-h100", "a100-40gb-among-80gb"])
def test_a_node_of_mixed_models_fails_the_label_check_naming_the_odd_gpu_and_both_models(profile, pool, model, main,
                                                                                       odd):
    nodes = mixed(profile, pool, 5, model)
    n = nodes[0]
    gpu = n.gpus[5]
    labels = node_labels(n)
    # GFD labels one model, counting that model's GPUs only (internal/lm/mig-strategy.go newGPULabelers)
    assert labels["nvidia.com/gpu.product"].removesuffix("-SHARED") == tables.find_gpu(main).gfd_product
    assert labels["nvidia.com/gpu.count"] == str(len(n.gpus) - 1)
    results = verdicts(nodes)
    broken = {k for k, v in results.items() if v.outcome is not Outcome.PASS}
    assert broken == {("labels.gfd-matches-hardware", n.name)}, {k: results[k].message() for k in broken}
    v = results[("labels.gfd-matches-hardware", n.name)]
    assert v.outcome is Outcome.FAIL
    assert v.summary.startswith(
        f"{n.name} mixes GPU models: GPU 5 ({gpu.uuid}, bus {gpu.pci_bus_id[4:].lower()}) is {odd}, where the other "
        f"{len(n.gpus) - 1} are {main}; GFD labels one model per node (nvidia.com/gpu.product="
        f"{labels['nvidia.com/gpu.product'].removesuffix('-SHARED')}, gpu.count={len(n.gpus) - 1})")
    # the GPU-count check does not mistake GFD's per-model count for a lost GPU
    assert results[("inventory.gpu-count-matches-expected", n.name)].outcome is Outcome.PASS


def test_every_view_of_a_mixed_node_shows_each_gpu_as_its_own_model():
    n = mixed("h200-dra-only", "h200", 2, "NVIDIA GeForce RTX 4090")[0]
    probe = whole_node_probe(n)
    assert [d.name for d in probe.devices].count("NVIDIA GeForce RTX 4090") == 1
    assert probe.devices[2].name == "NVIDIA GeForce RTX 4090" and probe.devices[2].compute_capability == "8.9"
    assert {g.name for g in probe.nvml_gpus} == {"NVIDIA GeForce RTX 4090", "NVIDIA H200"}
    devices = {d["name"]: d["attributes"] for s in resource_slices(n) for d in s["spec"]["devices"]}
    assert devices["gpu-2"]["productName"] == {"string": "NVIDIA GeForce RTX 4090"}
    assert devices["gpu-2"]["brand"] == {"string": "GeForce"}
    assert devices["gpu-2"]["architecture"] == {"string": "Ada"} and devices["gpu-0"]["architecture"] == {
        "string": "Hopper"}
    assert devices["gpu-0"]["productName"] == {"string": "NVIDIA H200"}


def test_the_real_gfd_warning_names_models_one_node_mixes(tmp_path):
    """GFD's own warning on a node of three GeForce models (tests/data/real/gfd/SOURCES.md): the
    models it lists are what the probe sees per GPU; the two the catalogue knows, mixed on one
    simulated node, fail the label check."""
    line = (REAL_GFD / "mixed-geforce-gfd-warning.log").read_text().strip().splitlines()[-1]
    listed = line.split("Multiple device types detected: [", 1)[1].rstrip("]")
    names = [n for n in ("NVIDIA GeForce RTX 3080", "NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 4090")
             if n in listed]
    assert len(names) == 3
    known = [n for n in names if tables.find_gpu(n) is not None]
    assert known == ["NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 4090"]
    profile = tmp_path / "geforce.yaml"
    profile.write_text("""schema: 1
name: geforce
description: a workstation node with GeForce cards
pools:
  - name: rtx
    count: 1
    gpu: "NVIDIA GeForce RTX 3090"
    gpus_per_node: 3
    driver: "580.159.03"
    toolkit: {version: "1.17.8"}
faults:
  - {id: mixed-gpu-models, pool: rtx, node: 0, gpu: 2, model: "NVIDIA GeForce RTX 4090"}
""")
    nodes = list(expand(load_profile(profile)).nodes)
    v = verdicts(nodes)[("labels.gfd-matches-hardware", "rtx-0")]
    assert v.outcome is Outcome.FAIL and "GPU 2 (" in v.summary and f"is {known[1]}, where the other 2 are " \
        f"{known[0]}" in v.summary


# --- driver.nvml-initializes: any NVML failure fails the node, once ----------------------------------


def probe_with_nvml(reason: str):
    """The healthy whole-node probe of h100-0 with its NVML section replaced by ``reason``, as the
    probe reports an NVML that did not load or initialise (probes/cuda-probe/probe.cu run_nvml)."""
    healthy = whole_node_probe(expand(load_profile(PROFILE)).node("h100-0"))
    doc = json.loads(json.dumps(healthy.raw))
    doc["nvml"] = {"available": False, "reason": reason}
    return parse_cuda_probe(json.dumps(doc), exit_code=healthy.exit_code)


@pytest.mark.parametrize(("reason", "cause", "remedy"), [
    ("nvmlInit_v2: Driver/library version mismatch", "different driver versions", "reboot"),
    ("nvmlInit_v2: Unknown Error", "daemon-reload", "nvidia-ctk system create-dev-char-symlinks"),
    ("libnvidia-ml.so.1: cannot open shared object file: No such file or directory", "was not injected",
     "NVIDIA_DRIVER_CAPABILITIES includes utility"),
    ("nvmlInit_v2: Driver Not Loaded", "no loaded NVIDIA kernel driver", "lsmod | grep nvidia"),
    ("nvmlInit_v2: Insufficient Permissions", "may not open the GPU device nodes", "ls -l /dev/nvidia*"),
    ("dlopen(libnvidia-ml.so.1) did not return in time (watchdog)", "driver is hung", "reset the GPUs"),
    ("nvmlInit_v2: NVML error 999", "did not initialise", "nvmlReturn_t"),
], ids=["a version mismatch fails", "Unknown Error fails", "a library not injected fails", "no driver loaded fails",
        "no permission on the device nodes fails", "a hang fails", "an error no row knows still fails"])
def test_any_nvml_failure_fails_the_node_naming_nvmls_error_and_its_remedy(reason, cause, remedy):
    probe = probe_with_nvml(reason)
    v = evaluate_nvml_initializes("h100-0", probe)
    assert v.outcome is Outcome.FAIL
    assert v.summary.startswith(f"NVML does not initialise in a pod given the GPUs of h100-0: {reason} (")
    assert cause in v.summary and remedy in v.remediation and v.observed == reason


def test_the_checks_that_read_nvml_are_blocked_by_the_nvml_check_not_failed():
    from gpuconf.checks.bandwidth import evaluate_pcie_link_at_max
    from gpuconf.checks.health import evaluate_no_pending_repair, evaluate_no_uncorrectable_ecc, evaluate_row_remapping

    probe = probe_with_nvml("nvmlInit_v2: Unknown Error")
    for verdict in (evaluate_no_uncorrectable_ecc("h100-0", probe), evaluate_row_remapping("h100-0", probe),
                    evaluate_no_pending_repair("h100-0", probe), evaluate_pcie_link_at_max("h100-0", probe)):
        assert verdict.outcome is Outcome.NOT_TESTED
        assert verdict.summary == ("blocked by driver.nvml-initializes: NVML did not initialise in the probe "
                                   "(nvmlInit_v2: Unknown Error)")


def test_a_probe_that_stopped_before_nvml_leaves_the_nvml_check_not_tested():
    v = evaluate_nvml_initializes("h100-0", probe_with_nvml("NVML not initialised yet"))
    assert v.outcome is Outcome.NOT_TESTED and "stopped before it loaded NVML" in v.summary


# --- labels.gfd-matches-hardware: absent labels are a finding where GFD should run -----------------

GFD_WRITES = ("nvidia.com/gpu.product", "nvidia.com/gpu.count", "nvidia.com/gpu.memory", "nvidia.com/gpu.family",
              "nvidia.com/gpu.compute.", "nvidia.com/cuda.", "nvidia.com/gpu.machine", "nvidia.com/gpu.replicas",
              "nvidia.com/gpu.sharing-strategy", "nvidia.com/gpu.mode", "nvidia.com/mig.", "nvidia.com/mps.",
              "nvidia.com/vgpu.")


def without_gfd(n: SimNode, keep: tuple[str, ...] = (), **extra: str) -> NodeView:
    """h100-0 as the API shows it when GFD wrote nothing (the operator's gpu.present and gpu.deploy.*
    labels stay): ``keep`` names GFD labels left in place."""
    v = view(n)
    labels = {k: val for k, val in v.labels.items() if k in keep or not k.startswith(GFD_WRITES)}
    return NodeView.of(n.name, {**labels, **extra}, v.capacity, v.allocatable, v.dra_devices)


def policy(spec: dict | None = None):
    from gpuconf.cluster.inventory import ClusterPolicyState

    return ClusterPolicyState("cluster-policy", "ready", spec if spec is not None else {"driver": {"enabled": True}})


def h100_0() -> SimNode:
    return expand(load_profile(PROFILE)).node("h100-0")


def test_no_gfd_labels_where_the_cluster_policy_deploys_gfd_fails_naming_it():
    n = h100_0()
    bare = without_gfd(n)
    assert "nvidia.com/gpu.present" in bare.labels and not any(k.startswith(GFD_WRITES) for k in bare.labels)
    gfd = gfd_deployment(bare, policy())
    v = evaluate_labels_match_hardware(bare, whole_node_probe(n), gfd=gfd)
    assert v.outcome is Outcome.FAIL
    assert v.summary.startswith("GFD is deployed by ClusterPolicy cluster-policy but node h100-0 carries no "
                                "nvidia.com/gpu.* labels (nvidia.com/gpu.product, ")
    assert "gpu-feature-discovery" in v.remediation


@pytest.mark.parametrize(("spec", "extra", "why"), [
    (None, {}, "no GPU Operator ClusterPolicy deploys GFD on this cluster (a DRA-only cluster, or GFD left out by "
               "design)"),
    ({"gfd": {"enabled": False}}, {}, "ClusterPolicy cluster-policy disables GFD (spec.gfd.enabled=false)"),
    ({}, {"nvidia.com/gpu.deploy.gpu-feature-discovery": "false"},
     "h100-0 carries nvidia.com/gpu.deploy.gpu-feature-discovery=false, so ClusterPolicy cluster-policy deploys no "
     "GFD there"),
], ids=["no ClusterPolicy", "GFD disabled in the ClusterPolicy", "GFD's deploy label false on the node"])
def test_no_gfd_labels_where_no_gfd_runs_by_design_is_not_applicable(spec, extra, why):
    n = h100_0()
    bare = without_gfd(n, **extra)
    gfd = gfd_deployment(bare, None if spec is None else policy(spec))
    v = evaluate_labels_match_hardware(bare, whole_node_probe(n), gfd=gfd)
    assert v.outcome is Outcome.NOT_TESTED
    assert v.summary == f"not applicable: {why}, and h100-0 carries no GFD label"


def test_no_gfd_labels_and_nobody_saying_whether_gfd_runs_is_not_tested():
    n = h100_0()
    v = evaluate_labels_match_hardware(without_gfd(n), whole_node_probe(n))
    assert v.outcome is Outcome.NOT_TESTED and "whether GFD should run there is unknown" in v.summary


def test_some_gfd_labels_are_judged_and_the_missing_ones_named():
    n = h100_0()
    partial = without_gfd(n, keep=("nvidia.com/gpu.product", "nvidia.com/cuda.driver-version.full"))
    v = evaluate_labels_match_hardware(partial, whole_node_probe(n), gfd=gfd_deployment(partial, policy()))
    assert v.outcome is Outcome.PASS
    assert v.summary == ("GFD labels match the hardware (NVIDIA-H100-80GB-HBM3); not labelled: "
                         "nvidia.com/gpu.compute.major.minor, nvidia.com/cuda.runtime-version.full, "
                         "nvidia.com/gpu.memory")
    lying = without_gfd(n, keep=("nvidia.com/gpu.product",), **{"nvidia.com/gpu.memory": "40960"})
    v = evaluate_labels_match_hardware(lying, whole_node_probe(n), gfd=gfd_deployment(lying, policy()))
    assert v.outcome is Outcome.FAIL and "nvidia.com/gpu.memory says '40960'" in v.summary


def test_a_healthy_simulated_cluster_policy_deploys_gfd_and_its_nodes_carry_the_labels():
    from gpuconf.sim.agent_model import make_cluster_policy

    cluster = expand(load_profile(PROFILE))
    sim_policy = make_cluster_policy(cluster)
    state = policy(sim_policy["spec"])
    for n in cluster.nodes:
        gfd = gfd_deployment(view(n), state)
        assert gfd.expected and gfd.why == "GFD is deployed by ClusterPolicy cluster-policy"
        assert evaluate_labels_match_hardware(view(n), whole_node_probe(n), gfd=gfd).outcome is Outcome.PASS


# -------------------------------------------------------------------------------------------------
# DRA-first clusters (issue 27): the GPU Operator's GPUCluster mode deploys no GFD; facts from slices


def gpu_cluster():
    from gpuconf.cluster.inventory import ClusterPolicyState

    return ClusterPolicyState("gpu-cluster", "ready", {"draDriver": {"enabled": True}})


def dra_only(n: SimNode, keep: tuple[str, ...] = ()) -> NodeView:
    """A simulated DRA node as GPUCluster mode leaves it: its ResourceSlices, no GFD label, no plugin."""
    capacity, allocatable = node_resources(n)
    labels = {k: v for k, v in node_labels(n).items() if k in keep or not k.startswith(GFD_WRITES)}
    return NodeView.of(n.name, labels, capacity, allocatable, slices=resource_slices(n))


def h200(node: str = "h200-0", *faults: dict) -> SimNode:
    p = load_profile("h200-dra-only")
    return expand(with_faults(p, list(faults)) if faults else p).node(node)


def test_gpucluster_mode_deploys_no_gfd_so_the_label_check_is_not_applicable_never_pass():
    n = h200()
    node = dra_only(n)
    gfd = gfd_deployment(node, None, gpu_cluster())
    assert not gfd.expected
    assert gfd.why == "the GPU Operator's GPUCluster gpu-cluster deploys no GFD (DRA-first mode, v26.7)"
    v = evaluate_labels_match_hardware(node, whole_node_probe(n), gfd=gfd)
    assert v.outcome is Outcome.NOT_TESTED
    assert v.summary == ("not applicable: the GPU Operator's GPUCluster gpu-cluster deploys no GFD (DRA-first mode, "
                         "v26.7), and h200-0 carries no GFD label")
    assert gfd_absent_by_design(node, gfd) == v.summary
    # GFD absent where a ClusterPolicy deploys it stays a finding
    assert gfd_deployment(node, policy(), gpu_cluster()).expected
    assert evaluate_labels_match_hardware(node, whole_node_probe(n), gfd=gfd_deployment(node, policy())).outcome \
        is Outcome.FAIL
    # a node that carries GFD labels is judged on them
    assert gfd_absent_by_design(view(n), gfd) is None


def test_without_gfd_the_pool_and_the_driver_come_from_the_slice_and_say_so():
    nodes = [dra_only(h200("h200-0")), dra_only(h200("h200-1"))]
    assert [pool_key(v) for v in nodes] == ["NVIDIA-H200", "NVIDIA-H200"]  # productName, spaces as dashes
    assert node_driver(nodes[0]) == ("580.159.3", "ResourceSlice attribute driverVersion")
    verdicts = evaluate_driver_uniform(nodes)
    assert [v.outcome for v in verdicts] == [Outcome.PASS, Outcome.PASS]
    assert verdicts[0].summary == ("driver 580.159.3 (ResourceSlice attribute driverVersion), as the rest of the "
                                   "NVIDIA-H200 pool")


def test_a_labelled_and_a_gfd_less_node_of_one_product_are_one_pool_and_versions_compare_as_versions():
    labelled = view(h200("h200-0"))  # GFD: NVIDIA-H200, 580.159.03
    bare = dra_only(h200("h200-1"))  # slice: NVIDIA H200, 580.159.3
    assert fact_product(labelled) == fact_product(bare) == "NVIDIA-H200"  # the driver's pools are by product
    assert {v.outcome for v in evaluate_driver_uniform([labelled, bare])} == {Outcome.PASS}
    odd = NodeView.of("h200-2", {}, slices=[{**s, "spec": {**s["spec"], "nodeName": "h200-2", "devices": [
        {**d, "attributes": {**d["attributes"], "driverVersion": {"version": "570.195.3"}}}
        for d in s["spec"]["devices"]]}} for s in resource_slices(h200("h200-1"))])
    verdicts = {v.node: v for v in evaluate_driver_uniform([labelled, bare, odd])}
    assert verdicts["h200-2"].outcome is Outcome.DEGRADED
    assert verdicts["h200-2"].summary == ("driver 570.195.3 (ResourceSlice attribute driverVersion) while the "
                                          "NVIDIA-H200 pool runs 580.159.03")


def test_without_gfd_or_a_plugin_the_slice_counts_the_gpus_against_the_probe_and_the_pool():
    n = h200()
    node = dra_only(n)
    v = evaluate_gpu_count(node, probe=whole_node_probe(n), probe_requested=0)
    assert v.outcome is Outcome.PASS
    assert v.summary == ("8 GPUs in every view (DRA ResourceSlices (GPUs published): 8; probe (CUDA devices in a "
                         "whole-node pod): 8)")
    assert pool_gpu_count([node, dra_only(h200("h200-1"))]) == {
        "h200-0": (8, "the 2 nodes of its pool (NVIDIA-H200)"), "h200-1": (8, "the 2 nodes of its pool (NVIDIA-H200)")}


def test_the_checks_whose_subject_is_gfds_labels_are_marked_in_the_catalog():
    """gpuconf.plugin.fleet makes these NOT TESTED, not applicable, on a node GFD is absent from by design."""
    rows = tables.load("checks")["checks"]
    assert sorted(r["id"] for r in rows if r.get("subject") == "gfd-labels") == [
        "labels.gfd-matches-hardware", "sharing.product-label-shared", "sharing.replicas-match-config"]
    assert {r.get("subject") for r in rows} == {None, "gfd-labels"}


# --- driver.version-uniform-in-pool: the most direct reading, and pools that cannot be compared ----


def test_the_driver_is_nvml_s_in_the_probe_so_a_stale_label_is_the_label_check_s_finding_not_a_skew():
    """GFD's driver label on h100-0 says 570.211.01 while the node runs 580.159.03 (NVML in its whole-node
    probe): the pool is uniform; the stale label is labels.gfd-matches-hardware's failure alone."""
    drift = {"id": "label-drift", "pool": "h100", "node": 0, "label": "nvidia.com/cuda.driver-version.full",
             "value": "570.211.01"}
    nodes = expand(with_faults(load_profile(PROFILE), [drift])).nodes
    views = [view(n) for n in nodes]
    probes = {n.name: whole_node_probe(n) for n in nodes}
    probed = {name: p.nvml_driver_version for name, p in probes.items()}
    verdicts = {v.node: v for v in evaluate_driver_uniform(views, probed=probed)}
    assert {v.outcome for v in verdicts.values()} == {Outcome.PASS}
    assert verdicts["h100-0"].summary == ("driver 580.159.03 (NVML in the whole-node probe), as the rest of the "
                                          "NVIDIA-H100-80GB-HBM3 pool")
    label = evaluate_labels_match_hardware(views[0], probes["h100-0"])
    assert label.outcome is Outcome.FAIL
    assert label.summary == ("GFD labels disagree with what a pod on the node sees: "
                             "nvidia.com/cuda.driver-version.full says '570.211.01', the GPU says '580.159.03'")
    # without the probe's reading the label is all there is, and it names itself as the source
    stale = {v.node: v for v in evaluate_driver_uniform(views)}["h100-0"]
    assert stale.outcome is Outcome.DEGRADED
    assert stale.summary == ("driver 570.211.01 (label nvidia.com/cuda.driver-version.full) while the "
                             "NVIDIA-H100-80GB-HBM3 pool runs 580.159.03")


def test_a_lone_node_of_its_pool_has_nothing_to_be_uniform_with():
    """A lone L40S passed "as the rest of the pool"; there is no rest: not applicable, unless --expect
    declares the pool's driver."""
    lone = NodeView.of("l40s-0", {"nvidia.com/gpu.product": "NVIDIA-L40S",
                                  "nvidia.com/cuda.driver-version.full": "535.54.03"})
    (v,) = evaluate_driver_uniform([lone])
    assert (v.outcome, v.kind) == (Outcome.NOT_TESTED, "not-applicable")
    assert v.summary == ("l40s-0 is the only node of the NVIDIA-L40S pool: there is no other node to compare its "
                         "driver 535.54.03 (label nvidia.com/cuda.driver-version.full) with (--expect can declare "
                         "the pool's driver)")
    (declared,) = evaluate_driver_uniform([lone], {"l40s-0": DriverPolicy("l40s", version="535.54.03")})
    assert declared.outcome is Outcome.PASS


def test_a_pass_names_the_pool_mates_whose_driver_is_unknown_and_none_known_is_not_tested():
    labels = {"nvidia.com/gpu.product": "NVIDIA-L40S", "nvidia.com/cuda.driver-version.full": "535.54.03"}
    a, b = NodeView.of("a", labels), NodeView.of("b", labels)
    blind = NodeView.of("u", {"nvidia.com/gpu.product": "NVIDIA-L40S"})
    verdicts = evaluate_driver_uniform([a, b, blind])
    assert [v.outcome for v in verdicts] == [Outcome.PASS, Outcome.PASS, Outcome.NOT_TESTED]
    assert verdicts[0].not_judged == ("the driver of u (unknown), so it is compared with 1 of the pool's 2 other "
                                      "nodes",)
    alone, unknown = evaluate_driver_uniform([a, blind])
    assert (alone.outcome, alone.kind) == (Outcome.NOT_TESTED, "could-not-run")
    assert alone.summary == ("the driver of the other node(s) of the NVIDIA-L40S pool is unknown (u): a's driver "
                             "535.54.03 (label nvidia.com/cuda.driver-version.full) has nothing to be compared with")
    assert unknown.summary == ("no nvidia.com/cuda.driver-version.full or cuda.driver.major/minor label, no "
                               "ResourceSlice attribute driverVersion and no NVML reading from a whole-node probe")
