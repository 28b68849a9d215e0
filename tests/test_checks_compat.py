"""The compat checks' decisions, on the pods the simulator's emulation produces (the same
requirement check and probe document a simulated node gives): healthy facts pass, the fault's
facts fail with the message a user reads."""

from __future__ import annotations

from typing import Any

import pytest

from gpuconf import images
from gpuconf.checks import compat
from gpuconf.cluster.outcomes import make_outcome
from gpuconf.compat import rules
from gpuconf.compat.versions import parse_driver
from gpuconf.outcomes import COULD_NOT_RUN, NOT_APPLICABLE
from gpuconf.sim import emulate
from gpuconf.sim.agent_model import image_facts
from gpuconf.sim.node_facts import node_labels
from gpuconf.sim.profile import SimNode, expand, load_profile, with_faults
from gpuconf.verdict import Outcome

T0 = "2026-11-29T00:00:00Z"
MATRIX = compat.matrix_cudas()


def sim_node(profile: str, name: str, *faults: dict[str, Any]) -> SimNode:
    p = load_profile(profile)
    return expand(with_faults(p, list(faults)) if faults else p).node(name)


def run_pod(node: SimNode, name: str, cuda: str, env: tuple[tuple[str, str], ...] = (), *,
            nvidia_runtime: bool = True) -> Any:
    """What the campaign returns for one 1-GPU cuda-probe pod on ``node``: refused at creation with
    the runtime's message, or finished with the probe's document in its log."""
    facts = image_facts(images.devel_image(cuda))
    full = {**dict(facts.env), "NVIDIA_VISIBLE_DEVICES": node.gpus[0].uuid, **dict(env)}
    visible = [emulate.Visible(node.gpus[0])] if nvidia_runtime else []
    created = emulate.create_container(node, env=[f"{k}={v}" for k, v in full.items()], visible=visible) \
        if nvidia_runtime else emulate.CreateResult(True)
    pod: dict[str, Any] = {"metadata": {"name": name, "uid": name, "creationTimestamp": T0},
                           "spec": {"nodeName": node.name, "containers": [{"name": "probe", "image": facts.ref}]}}
    if not created.ok:
        state = {"terminated": {"exitCode": 128, "reason": "StartError", "message": created.message}}
        pod["status"] = {"phase": "Failed", "containerStatuses": [{"name": "probe", "state": state}]}
        event = {"type": "Warning", "reason": "Failed", "message": f"Error: {created.message}",
                 "firstTimestamp": T0}
        return make_outcome(pod, [event], logs={}, missing_logs={"probe": "the container never started"})
    assert facts.cuda is not None
    code, out = emulate.cuda_probe_run(node, visible=visible, image_cuda=facts.cuda, env=full, compat=facts.compat,
                                       started_at="2026-11-29T00:00:00.000Z", hostname=name)
    state = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}}
    pod["status"] = {"phase": "Succeeded" if code == 0 else "Failed",
                     "containerStatuses": [{"name": "probe", "state": state}]}
    return make_outcome(pod, [], logs={"probe": out}, missing_logs={})


def campaign(nodes: list[SimNode], *, nvidia_runtime: bool = True) -> compat.CompatRun:
    """The compat campaign on ``nodes``, planned, run on the emulation and assembled as the suite does."""
    targets = [compat.make_target(n.name, node_labels(n)) for n in nodes]
    plan = compat.plan_pods(targets, canary_cuda="13.0.2")
    by_name = {n.name: n for n in nodes}
    outcomes = {p.name: run_pod(by_name[p.node], p.name, p.cuda, p.env, nvidia_runtime=nvidia_runtime) for p in plan}
    return compat.assemble(targets, plan, outcomes)


def verdicts(run: compat.CompatRun, node: str) -> dict[str, Any]:
    return {
        "enforced": compat.evaluate_require_enforced(node, run.canaries, run.pools),
        "matches": compat.evaluate_outcome_matches(node, run.rows[node], unpredictable=run.unpredictable.get(node)),
        "forward": compat.evaluate_forward_compat(node, run.targets[node], run.rows[node]),
    }


def h100(*faults: dict[str, Any]) -> list[SimNode]:
    return [sim_node("healthy-h100", n, *faults) for n in ("h100-0", "h100-1")]


def a100_570(*faults: dict[str, Any]) -> list[SimNode]:
    return [sim_node("mixed-driver-570", n, *faults) for n in ("a100-570-0", "a100-570-1")]


CDI_MODE = {"id": "toolkit-cdi-mode", "pool": "h100", "node": 0}
COMPAT_BROKEN = {"id": "compat-libs-broken", "pool": "a100-570", "node": 0}
DRIVER_560 = {"id": "driver-skew", "pool": "h100", "node": 0, "driver": "560.35.03"}


# --- the canary --------------------------------------------------------------------------------


def test_a_legacy_node_refuses_the_canary_with_the_requirement_error():
    canary = compat.classify_canary(run_pod(h100()[0], "c", "13.0.2", (("NVIDIA_REQUIRE_CUDA", "cuda>=99.0"),)))
    assert canary.enforcing is True
    assert "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=99.0, please update your driver" \
        in canary.detail and not canary.detail.endswith(": unknown")


def test_a_cdi_node_starts_the_canary():
    canary = compat.classify_canary(run_pod(h100(CDI_MODE)[0], "c", "13.0.2", (("NVIDIA_REQUIRE_CUDA", "cuda>=99.0"),)))
    assert canary.enforcing is False and "started with the driver injected" in canary.detail
    assert canary.modes() == (rules.Mode.CDI, rules.Mode.JIT_CDI)


def test_a_canary_that_got_no_driver_says_nothing_about_enforcement():
    pod = run_pod(h100()[0], "c", "13.0.2", (("NVIDIA_REQUIRE_CUDA", "cuda>=99.0"),), nvidia_runtime=False)
    canary = compat.classify_canary(pod)
    assert canary.enforcing is None and "injected no driver" in canary.detail


def test_a_canary_that_never_ran_is_unknown_with_the_diagnosis():
    pod = make_outcome({"metadata": {"name": "c"}, "spec": {}, "status": {"phase": "Pending"}},
                       [{"type": "Warning", "reason": "FailedScheduling", "firstTimestamp": T0,
                         "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}],
                       logs={}, missing_logs={}, timed_out=True)
    canary = compat.classify_canary(pod)
    assert canary.enforcing is None and "still going when the campaign's time ran out" in canary.detail
    assert "diagnosis:" in canary.detail


# --- runtime.require-cuda-enforced ---------------------------------------------------------------


def test_a_pool_that_enforces_everywhere_passes():
    run = campaign(h100())
    v = verdicts(run, "h100-0")["enforced"]
    assert v.outcome is Outcome.PASS and "as every probed node of the NVIDIA-H100-80GB-HBM3 pool (2)" in v.summary


def test_toolkit_cdi_mode_makes_its_node_the_odd_one_on_a_tie():
    run = campaign(h100(CDI_MODE))
    odd, other = (compat.evaluate_require_enforced(n, run.canaries, run.pools) for n in ("h100-0", "h100-1"))
    assert odd.outcome is Outcome.DEGRADED
    assert odd.summary == ("h100-0 does not enforce NVIDIA_REQUIRE_CUDA while 1 of 2 nodes of the "
                           "NVIDIA-H100-80GB-HBM3 pool do (a tie: not checking requirements is the weaker state, so "
                           "the non-enforcing nodes are the odd ones)")
    assert odd.expected is not None and "enforced at container creation (legacy mode)" in odd.expected
    assert odd.observed is not None and "canary started" in odd.observed
    assert "runtime.require-cuda-enforced on h100-0" in odd.message() and "remediation:" in odd.message()
    assert other.outcome is Outcome.PASS


def canaries(**enforcing: bool | None) -> dict[str, compat.Canary]:
    return {n: compat.Canary(e, "seen") for n, e in enforcing.items()}


def test_the_majority_decides_so_a_lone_enforcing_node_is_the_odd_one():
    c = canaries(a=False, b=False, c=True)
    pools = dict.fromkeys(c, "Tesla-T4")
    assert compat.evaluate_require_enforced("a", c, pools).outcome is Outcome.PASS
    lone = compat.evaluate_require_enforced("c", c, pools)
    assert lone.outcome is Outcome.DEGRADED and lone.summary.startswith("c enforces NVIDIA_REQUIRE_CUDA while 2 of 3")


def test_a_pool_all_on_cdi_passes_and_pools_are_per_product():
    c = canaries(a=False, b=False, h=True, i=True)
    pools = {"a": "Tesla-T4", "b": "Tesla-T4", "h": "NVIDIA-H100-80GB-HBM3", "i": "NVIDIA-H100-80GB-HBM3"}
    assert all(compat.evaluate_require_enforced(n, c, pools).outcome is Outcome.PASS for n in c)


def test_a_pool_of_one_node_has_nothing_to_compare_its_enforcement_with():
    """A lone node passed "as every probed node of the pool (1)": a pool of one is uniform with nothing."""
    c = canaries(a=False, b=False, h=True)
    pools = {"a": "Tesla-T4", "b": "Tesla-T4", "h": "NVIDIA-H100-80GB-HBM3"}
    lone = compat.evaluate_require_enforced("h", c, pools)
    assert (lone.outcome, lone.kind) == (Outcome.NOT_TESTED, NOT_APPLICABLE)
    assert lone.summary == ("h is the only node of the NVIDIA-H100-80GB-HBM3 pool: there is no other node to compare "
                            "its requirement enforcement with (NVIDIA_REQUIRE_CUDA enforced at container creation "
                            "(legacy mode))")
    # a declared mode judges it alone
    assert compat.evaluate_require_enforced("h", c, pools, declared="legacy").outcome is Outcome.PASS


def test_a_node_whose_pool_mates_enforcement_is_unknown_is_not_compared_and_a_pass_names_who_was_not():
    c = {**canaries(a=False, b=False), "u": compat.Canary(None, "the pod never started")}
    pools = dict.fromkeys(c, "Tesla-T4")
    full = compat.evaluate_require_enforced("a", c, pools)
    assert full.outcome is Outcome.PASS
    assert full.summary == "NVIDIA_REQUIRE_CUDA not checked (cdi or jit-cdi mode), as every probed node of the " \
        "Tesla-T4 pool (2)"
    assert full.not_judged == ("the enforcement of u (no canary reading), so it is compared with 1 of the pool's 2 "
                               "other nodes",)
    alone = compat.evaluate_require_enforced("a", {"a": c["a"], "u": c["u"]}, {"a": "Tesla-T4", "u": "Tesla-T4"})
    assert (alone.outcome, alone.kind) == (Outcome.NOT_TESTED, COULD_NOT_RUN)
    assert alone.summary == ("the requirement enforcement of the other node(s) of the Tesla-T4 pool is unknown (u): "
                             "a's (NVIDIA_REQUIRE_CUDA not checked (cdi or jit-cdi mode)) has nothing to be compared "
                             "with")
    unpooled = compat.evaluate_require_enforced("a", c, {"a": None, "b": None})
    assert (unpooled.outcome, unpooled.kind) == (Outcome.NOT_TESTED, COULD_NOT_RUN)
    assert unpooled.summary.startswith("a has no pool to be compared with (no nvidia.com/gpu.product label")


def test_a_declared_mode_is_the_expectation_instead_of_the_pool():
    c = canaries(a=False, b=False)
    pools = dict.fromkeys(c, "Tesla-T4")
    v = compat.evaluate_require_enforced("a", c, pools, declared="legacy")
    assert v.outcome is Outcome.DEGRADED and "although the declared mode is legacy" in v.summary
    assert compat.evaluate_require_enforced("a", c, pools, declared="jit-cdi").outcome is Outcome.PASS
    with pytest.raises(ValueError, match="legacy, cdi or jit-cdi"):
        compat.evaluate_require_enforced("a", c, pools, declared="auto")


def test_unknown_enforcement_is_not_tested_with_why():
    v = compat.evaluate_require_enforced("a", {"a": compat.Canary(None, "the pod never started")}, {"a": "x"})
    assert v.outcome is Outcome.NOT_TESTED and v.summary.endswith("the pod never started")


# --- compat.outcome-matches-prediction -------------------------------------------------------------


def test_every_matrix_pod_does_what_predict_says_on_healthy_nodes():
    for run, node in ((campaign(h100()), "h100-0"), (campaign(a100_570()), "a100-570-0"),
                      (campaign(h100(CDI_MODE)), "h100-0")):
        v = verdicts(run, node)["matches"]
        assert v.outcome is Outcome.PASS, v.message()
        assert f"all {len(MATRIX)} matrix pods on {node} did what gpuconf predict says" in v.summary


def test_a_driver_the_images_do_not_accept_refuses_them_and_the_disabled_twins_show_the_runtime():
    run = campaign(h100(DRIVER_560))
    rows = {r.pod: r for r in run.rows["h100-0"]}
    assert set(rows) == {"compat-h100-0-cuda12-9-1", "compat-h100-0-cuda13-0-2",
                         "compat-h100-0-cuda13-0-2-disable-require", "compat-h100-0-cuda13-2-0",
                         "compat-h100-0-cuda13-2-0-disable-require"}
    refused = rows["compat-h100-0-cuda13-0-2"].observed
    assert refused.result == "rejected" and refused.detail == (
        "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.0, please update your driver to a "
        "newer version, or use an earlier cuda container")
    twin = rows["compat-h100-0-cuda13-0-2-disable-require"].observed
    assert twin.result == "cuda-error" and twin.error_code == 803 and twin.libcuda_compat is True
    v = verdicts(run, "h100-0")["matches"]
    assert v.outcome is Outcome.PASS and "with NVIDIA_DISABLE_REQUIRE=1: cuda-error" in v.summary


def test_a_node_whose_label_lies_about_its_driver_fails_with_prediction_and_observation():
    drift = {"id": "label-drift", "pool": "h100", "node": 0, "label": "nvidia.com/cuda.driver-version.full",
             "value": "560.35.03"}
    v = verdicts(campaign(h100(drift)), "h100-0")["matches"]
    assert v.outcome is Outcome.FAIL
    assert v.summary.startswith("4 of 5 matrix pods on h100-0 did not do what gpuconf predict says: "
                                "nvidia/cuda:13.0.2-devel-ubuntu24.04 was predicted to be rejected at container "
                                "creation (nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.0")
    assert "and is runs (libcuda /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.03)" in v.summary
    assert any("predicted rejected" in e and "why:" in e and "legacy mode" in e for e in v.evidence)
    assert any(e.startswith("pod compat-h100-0-cuda13-0-2: probe exit 0") for e in v.evidence)


def test_a_disabled_twin_still_refused_fails_saying_what_the_variable_should_do():
    (row,) = [r for r in campaign(h100(DRIVER_560)).rows["h100-0"] if r.pod.endswith("13-0-2-disable-require")]
    still = compat.Observation("rejected", "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.0")
    v = compat.evaluate_outcome_matches("h100-0", [compat.MatrixRow(row.pod, row.cuda, row.image, row.env,
                                                                    row.predicted, still)])
    assert v.outcome is Outcome.FAIL and "with NVIDIA_DISABLE_REQUIRE=1 was predicted to be cuda-error" in v.summary
    assert v.summary.endswith("(NVIDIA_DISABLE_REQUIRE=1 should have shown the runtime's outcome instead of the "
                              "rejection)")


def test_a_broken_driver_stack_is_not_a_compatibility_outcome():
    v = verdicts(campaign(h100({"id": "uvm-missing", "pool": "h100", "node": 0})), "h100-0")
    assert v["matches"].outcome is Outcome.NOT_TESTED and v["forward"].outcome is Outcome.NOT_TESTED
    assert "device nodes missing in the container: /dev/nvidia-uvm; CUDA init: cudaErrorUnknown (999)" \
        in v["matches"].summary


def test_a_node_without_the_driver_label_or_probe_is_not_predicted():
    target = compat.make_target("n", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    assert target.model is None and target.problem is not None and "driver version is unknown" in target.problem
    assert [p.role for p in compat.plan_pods([target], canary_cuda="13.0.2")] == ["canary"] + ["matrix"] * len(MATRIX)


def test_a_gpu_gpus_yaml_does_not_know_is_not_predicted_naming_the_model_and_the_table():
    relabelled = {"id": "label-drift", "pool": "h100", "node": 0, "label": "nvidia.com/gpu.product",
                  "value": "NVIDIA-Foo-9000"}
    run = campaign(h100(relabelled))
    v = verdicts(run, "h100-0")
    why = ("GPU model NVIDIA-Foo-9000 is not in gpuconf/data/gpus.yaml, so its class, brand and architecture are "
           "unknown: add it to gpuconf/data/gpus.yaml")
    assert v["matches"].outcome is Outcome.NOT_TESTED and v["matches"].summary == f"no prediction for h100-0: {why}"
    assert v["forward"].outcome is Outcome.NOT_TESTED and v["forward"].summary.endswith(why)
    assert verdicts(run, "h100-1")["matches"].outcome is Outcome.PASS  # its sibling, labelled H100, is predicted


@pytest.mark.parametrize("product", ["NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", "NVIDIA-H100-80GB-HBM3-MIG-INVALID",
                                     "NVIDIA-H100-80GB-HBM3-SHARED"])
def test_gfd_suffixes_do_not_make_a_known_gpu_unknown(product):
    target = compat.make_target("n", {"nvidia.com/gpu.product": product,
                                      "nvidia.com/cuda.driver-version.full": "580.159.03"})
    assert target.model is not None and target.model.gpu_class == "data-center", target.problem


# --- compat.forward-compat-runs ------------------------------------------------------------------


def test_forward_compat_runs_on_the_570_data_center_pool():
    v = verdicts(campaign(a100_570()), "a100-570-0")["forward"]
    assert v.outcome is Outcome.PASS and v.summary.startswith(
        "forward compatibility works on a100-570-0 (NVIDIA A100-SXM4-80GB, driver 570.211.01, native CUDA 12.8): ")
    assert "nvidia/cuda:13.0.2-devel-ubuntu24.04: runs (libcuda /usr/local/cuda/compat/libcuda.so.580" in v.summary


def test_compat_libs_broken_fails_forward_compat_and_nothing_else():
    run = campaign(a100_570(COMPAT_BROKEN))
    v = verdicts(run, "a100-570-0")
    assert v["forward"].outcome is Outcome.FAIL
    assert v["forward"].summary == (
        "forward compatibility does not work on a100-570-0 (NVIDIA A100-SXM4-80GB, driver 570.211.01, native CUDA "
        "12.8): nvidia/cuda:12.9.1-devel-ubuntu24.04 ran on the host libcuda, not the image's cuda-compat one; "
        "nvidia/cuda:13.0.2-devel-ubuntu24.04 cuda-error cudaErrorInsufficientDriver (35): CUDA driver version is "
        "insufficient for CUDA runtime version; nvidia/cuda:13.2.0-devel-ubuntu24.04 cuda-error "
        "cudaErrorInsufficientDriver (35): CUDA driver version is insufficient for CUDA runtime version")
    assert v["forward"].expected is not None and "runs on the image's cuda-compat libcuda" in v["forward"].expected
    # The toolkit is unknown to the suite, and a toolkit that uses no compat libcuda is a predicted
    # possibility: only forward-compat-runs reports it.
    assert v["matches"].outcome is Outcome.PASS and v["enforced"].outcome is Outcome.PASS
    assert verdicts(run, "a100-570-1")["forward"].outcome is Outcome.PASS


def test_no_matrix_image_newer_than_the_native_cuda_is_not_tested():
    target = compat.make_target("n", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                                      "nvidia.com/cuda.driver-version.full": "595.71.05"})
    v = compat.evaluate_forward_compat("n", target, campaign(h100()).rows["h100-0"])
    assert v.outcome is Outcome.NOT_TESTED
    assert v.summary == ("no matrix image is newer than the native CUDA 13.2 of n (NVIDIA H100 80GB HBM3, driver "
                         "595.71.05, native CUDA 13.2; matrix: 12.9.1, 13.0.2, 13.2.0)")


def test_a_gpu_outside_the_data_center_is_not_tested():
    target = compat.make_target("n", {"nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-4090",
                                      "nvidia.com/cuda.driver-version.full": "570.211.01"})
    v = compat.evaluate_forward_compat("n", target, [])
    assert v.outcome is Outcome.NOT_TESTED
    assert v.summary == ("forward compatibility is supported on data-center GPUs only; NVIDIA GeForce RTX 4090 on n "
                         "is consumer")


def test_a_branch_no_compat_package_supports_is_not_tested():
    v = verdicts(campaign(h100(DRIVER_560)), "h100-0")["forward"]
    assert v.outcome is Outcome.NOT_TESTED and "pairs with driver branch 560 in gpuconf/data/forward_compat.yaml" \
        in v.summary


def test_a_refused_image_is_judged_by_its_disabled_twin():
    target = compat.make_target("n", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                                      "nvidia.com/cuda.driver-version.full": "570.211.01"})
    refused = compat.Observation("rejected", "requirement error: unsatisfied condition: cuda>=13.0")
    ran = compat.Observation("runs", "vector-add verified", None, "/usr/local/cuda/compat/libcuda.so.580.00.00", True)
    image = images.devel_image("13.0.2")
    rows = [compat.MatrixRow("p", "13.0.2", image, (), (), refused),
            compat.MatrixRow("q", "13.0.2", image, (("NVIDIA_DISABLE_REQUIRE", "1"),), (), ran)]
    v = compat.evaluate_forward_compat("n", target, rows)
    assert v.outcome is Outcome.PASS and "(with NVIDIA_DISABLE_REQUIRE=1; without it: requirement error" in v.summary


# --- facts, plan, predictions --------------------------------------------------------------------


def test_the_gpu_is_resolved_from_the_product_label_as_predict_does():
    for product in ("Tesla-T4-SHARED", "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"):
        target = compat.make_target("n", {"nvidia.com/gpu.product": product,
                                          "nvidia.com/cuda.driver-version.full": "580.159.03"})
        assert target.model is not None and target.model.gpu_class == "data-center", product
    assert compat.pool_of("Tesla-T4-SHARED") == "Tesla-T4"


def test_the_driver_comes_from_the_whole_node_probe_when_the_label_is_missing():
    node = h100()[0]
    report = compat.probe_facts(run_pod(node, "w", "13.0.2"))
    target = compat.make_target("h100-0", {}, report)
    assert target.model is not None and target.driver == "580.159.03" and target.model.gpu_class == "data-center"
    assert any("from NVML in the whole-node probe" in n for n in target.notes)


def test_the_driver_nvml_reads_wins_over_a_stale_label_and_the_verdict_names_it():
    """GFD's driver label says 570.211.01 while NVML in the whole-node probe reads 580.159.03: the
    prediction is made for the driver the node runs; the label is labels.gfd-matches-hardware's finding."""
    node = h100()[0]
    report = compat.probe_facts(run_pod(node, "w", "13.0.2"))
    labels = {**node_labels(node), "nvidia.com/cuda.driver-version.full": "570.211.01"}
    target = compat.make_target("h100-0", labels, report)
    assert target.driver == "580.159.03" and target.model is not None and str(target.model.driver) == "580.159.03"
    assert target.notes == ("driver 580.159.03 from NVML in the whole-node probe (the label says 570.211.01: "
                            "labels.gfd-matches-hardware judges it)",)
    assert target.driver_from == "NVML in the whole-node probe"
    rows = [compat.MatrixRow(f"p{c}", c, images.devel_image(c), (), (), compat.Observation("runs", "ok"))
            for c in ("13.0.2", "13.2.0")]
    v = compat.evaluate_current_major_runs("h100-0", target, rows)
    assert v.summary.startswith("the CUDA 13 images run on h100-0 (NVIDIA H100 80GB HBM3, driver 580.159.03 from "
                                "NVML in the whole-node probe, native CUDA 13.0): ")
    same = compat.make_target("h100-0", node_labels(node), report)
    assert same.notes == ("driver 580.159.03 from NVML in the whole-node probe (as the label says)",)
    assert compat.make_target("h100-0", labels).driver == "570.211.01"  # no probe: the label is all there is
    assert compat.make_target("h100-0", labels).driver_from == ""


def test_the_plan_pins_every_pod_and_twins_only_predicted_rejections():
    plan = compat.plan_pods([compat.make_target(n.name, node_labels(n)) for n in h100(DRIVER_560)],
                            canary_cuda="13.0.2")
    assert {p.node for p in plan} == {"h100-0", "h100-1"}
    assert [(p.name, p.role) for p in plan if p.node == "h100-0" and p.role != "matrix"] == [
        ("compat-h100-0-canary", "canary"), ("compat-h100-0-cuda13-0-2-disable-require", "disable-require"),
        ("compat-h100-0-cuda13-2-0-disable-require", "disable-require")]
    assert next(p for p in plan if p.role == "canary").env == (("NVIDIA_REQUIRE_CUDA", "cuda>=99.0"),)
    assert not [p for p in plan if p.node == "h100-1" and p.role == "disable-require"]


def test_an_unknown_toolkit_predicts_every_way_of_choosing_the_compat_libcuda():
    model = rules.Node(parse_driver("570.211.01"), "NVIDIA A100-SXM4-80GB", "data-center", "Nvidia", "8.0")
    predicted = compat.predict_outcomes(model, compat.make_image("13.0.2"), [rules.Mode.LEGACY])
    assert {(p.result, p.error_code) for p in predicted} == {("runs", None), ("cuda-error", 35)}
    (broken,) = [p for p in predicted if p.error_code == 35]
    assert broken.when == ("legacy mode, toolkit 1.17.4",)
    (known,) = compat.predict_outcomes(model, compat.make_image("13.0.2"), [rules.Mode.LEGACY], toolkit=(1, 17, 8))
    assert known.outcome.rule == "forward-compat"


def test_the_pod_env_replaces_the_image_s_own():
    image = compat.make_image("13.0.2", [("NVIDIA_REQUIRE_CUDA", "cuda>=99.0")])
    assert image.env is not None and [e for e in image.env if e.startswith("NVIDIA_REQUIRE_CUDA=")] == [
        "NVIDIA_REQUIRE_CUDA=cuda>=99.0"]


# --- GPUs given through DRA (a claim, or a DRA-backed extended resource): CDI by the DRA driver ---------


def dra_campaign(nodes: list[SimNode], dra: set[str]) -> compat.CompatRun:
    """The campaign as the suite plans it when ``dra`` nodes' probes get their GPUs through DRA."""
    targets = [compat.make_target(n.name, node_labels(n), dra=n.name in dra) for n in nodes]
    plan = compat.plan_pods(targets, canary_cuda="13.0.2")
    by_name = {n.name: n for n in nodes}
    outcomes = {p.name: run_pod(by_name[p.node], p.name, p.cuda, p.env) for p in plan}
    return compat.assemble(targets, plan, outcomes)


def test_a_dra_node_is_predicted_in_cdi_mode_and_its_mismatch_fails_cleanly_in_cuda():
    # the emulation injects the DRA node's GPU through CDI (toolkit-cdi-mode): requirements unchecked
    nodes = h100(CDI_MODE, {**DRIVER_560, "node": 0})
    run = dra_campaign(nodes, {"h100-0"})
    assert run.dra == frozenset({"h100-0"}) and run.targets["h100-0"].dra
    rows = run.rows["h100-0"]
    assert not any(r.disable_require for r in rows)  # no legacy rejection to look behind on a DRA node
    assert all(p.when and all(w.startswith("cdi mode") for w in p.when) for r in rows for p in r.predicted)
    newest = next(r for r in rows if r.cuda == MATRIX[-1])
    assert newest.observed.result == "cuda-error"  # started, and CUDA itself refused the too-old driver
    matches = compat.evaluate_outcome_matches("h100-0", rows)
    assert matches.outcome is Outcome.PASS
    assert any("injected through CDI by the DRA driver" in e for e in matches.evidence)
    # the other node of the pool asks through the device plugin: predicted in the mode its canary showed
    assert all(w.startswith("legacy mode") for r in run.rows["h100-1"] for p in r.predicted for w in p.when)


def test_a_dra_node_refusing_an_image_for_its_requirement_is_not_what_cdi_does():
    # a legacy-mode runtime on a node whose GPUs are given through DRA: the prediction (CDI) fails
    run = dra_campaign(h100(DRIVER_560), {"h100-0"})
    v = compat.evaluate_outcome_matches("h100-0", run.rows["h100-0"])
    assert v.outcome is Outcome.FAIL and "rejected at container creation" in v.summary
    assert "was predicted to be cuda-error" in v.summary


def test_require_cuda_enforced_is_not_applicable_where_the_dra_driver_injects_and_dra_nodes_do_not_vote():
    c = canaries(a=False, b=False, h=True)
    pools = dict.fromkeys(c, "NVIDIA-H100-80GB-HBM3")
    dra = {"a", "b"}
    v = compat.evaluate_require_enforced("a", c, pools, dra=dra)
    assert v.outcome is Outcome.NOT_TESTED
    assert v.summary == ("not applicable: the DRA driver injects through CDI: NVIDIA_REQUIRE_CUDA is not enforced "
                         "there")
    # the plugin node is judged against its pool's plugin nodes only: alone, it has none to compare with
    lone = compat.evaluate_require_enforced("h", c, pools, dra=dra)
    assert (lone.outcome, lone.kind) == (Outcome.NOT_TESTED, NOT_APPLICABLE)
    assert lone.summary.startswith("h is the only node of the NVIDIA-H100-80GB-HBM3 pool not given its GPUs through "
                                   "DRA: there is no other node to compare")
    assert compat.evaluate_require_enforced("h", c, pools).outcome is Outcome.DEGRADED  # without: the odd one


def test_without_gfd_the_target_reads_the_dra_drivers_product_and_driver_and_names_the_source() -> None:
    """A GPUCluster-mode node (issue 27): no GFD label; the ResourceSlice says what the node is."""
    from gpuconf.nodes import NodeView
    from gpuconf.sim.node_facts import resource_slices

    n = expand(load_profile("h200-dra-only")).node("h200-0")
    view = NodeView.of(n.name, {"kubernetes.io/hostname": n.name}, slices=resource_slices(n))
    target = compat.make_target(n.name, view.labels, facts=view.facts)
    assert target.problem is None and target.model is not None
    assert (target.product, target.driver, target.gpu) == ("NVIDIA-H200", "580.159.3", "NVIDIA-H200")
    assert target.model.driver == parse_driver("580.159.03") and target.model.gpu_class == "data-center"
    assert target.notes == ("driver 580.159.3 from the ResourceSlice attribute driverVersion (no "
                            "nvidia.com/cuda.driver-version.full)",
                            "GPU 'NVIDIA H200' from the ResourceSlice attribute productName (no "
                            "nvidia.com/gpu.product)")
    # GFD's labels, where present, still come first
    labelled = compat.make_target(n.name, node_labels(n), facts=view.facts)
    assert labelled.driver == "580.159.03" and labelled.notes == ()


def test_a_pool_counts_its_members_no_probe_reached_so_a_cordoned_mate_leaves_the_node_uncompared():
    """A pool whose other node took no probe (cordoned) is not a pool of one: that node's enforcement is
    unknown, so the probed node is NOT TESTED (could not run) naming it, not "the only node of the pool"."""
    run = compat.assemble([], [], {}, {"h100-1": "h100-1 is cordoned (spec.unschedulable)"},
                          products={"h100-0": "NVIDIA-H100-80GB-HBM3", "h100-1": "NVIDIA-H100-80GB-HBM3"})
    assert run.pools == {"h100-0": "NVIDIA-H100-80GB-HBM3", "h100-1": "NVIDIA-H100-80GB-HBM3"}
    verdict = compat.evaluate_require_enforced("h100-0", canaries(**{"h100-0": True}), run.pools)
    assert (verdict.outcome, verdict.kind) == (Outcome.NOT_TESTED, COULD_NOT_RUN)
    assert verdict.summary.startswith("the requirement enforcement of the other node(s) of the NVIDIA-H100-80GB-HBM3 "
                                      "pool is unknown (h100-1)")
