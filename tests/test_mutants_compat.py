"""compat.outcome-matches-prediction compares what each matrix pod did with what the engine
predicts, down to the CUDA error code: a pod failing with cudaErrorSystemDriverMismatch (803)
where cudaErrorInsufficientDriver (35) was predicted did not do what was predicted. Pinned where
mutation testing (scripts/mutation-score) found the comparison unpinned."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from typing import Any

import pytest
from test_checks_compat import CDI_MODE, COMPAT_BROKEN, DRIVER_560, a100_570, campaign, h100, run_pod
from verdict_record import check_recording, shape, whole

from gpuconf import images
from gpuconf.checks import compat
from gpuconf.cluster.outcomes import make_outcome
from gpuconf.compat import tables
from gpuconf.verdict import Outcome

NODE = "a100-570-0"


def with_init_error(outcome: Any, code: int) -> Any:
    """The pod's probe document with cudaFree(0) failing with ``code`` instead (an edited simulated
    document, as the other faults of the probe are made)."""
    doc = json.loads(outcome.logs["probe"])
    e = tables.cuda_error(code)
    error = {"code": e.code, "name": e.name, "message": e.message, "ms": 0.05, "timed_out": False}
    doc["init"] = {"call": "cudaFree(0)", **error}
    doc["device_count"] = {"value": 0, "result": {"call": "cudaGetDeviceCount", **error}}
    doc["exit_reason"] = f"CUDA init failed: cudaFree(0) returned {e.code} {e.name}: {e.message}"
    return dataclasses.replace(outcome, logs={**outcome.logs, "probe": json.dumps(doc)})


def test_a_pod_failing_with_803_where_35_was_predicted_fails_the_comparison() -> None:
    nodes = a100_570(COMPAT_BROKEN)
    rows = campaign(nodes).rows[NODE]
    row = next(r for r in rows if r.cuda == "13.0.2" and not r.env)
    assert {(p.result, p.error_code) for p in row.predicted} == {("runs", None), ("cuda-error", 35)}
    assert (row.observed.result, row.observed.error_code) == ("cuda-error", 35)
    observed = compat.observe(with_init_error(run_pod(nodes[0], row.pod, row.cuda), 803))
    assert (observed.result, observed.error_code) == ("cuda-error", 803)
    mismatched = dataclasses.replace(row, observed=observed)
    assert not mismatched.matches()

    v = compat.evaluate_outcome_matches(NODE, [mismatched if r is row else r for r in rows])
    assert v.outcome is Outcome.FAIL, v.message()
    assert v.summary.startswith(f"1 of {len(rows)} matrix pods on {NODE} did not do what gpuconf predict says: "
                                "nvidia/cuda:13.0.2-devel-ubuntu24.04 was predicted to be runs (")
    assert "or cuda-error cudaErrorInsufficientDriver (35): " in v.summary
    assert v.summary.endswith("and is cuda-error cudaErrorSystemDriverMismatch (803): system has unsupported "
                              "display driver / cuda driver combination")
    assert v.observed == ("nvidia/cuda:13.0.2-devel-ubuntu24.04: cuda-error cudaErrorSystemDriverMismatch (803): "
                          "system has unsupported display driver / cuda driver combination")
    # the same pod failing with the predicted code matches
    assert compat.evaluate_outcome_matches(NODE, rows).outcome is Outcome.PASS


def test_a_row_matches_a_prediction_of_the_same_result_and_for_cuda_errors_the_same_code() -> None:
    rows = campaign(a100_570(COMPAT_BROKEN)).rows[NODE]
    row = next(r for r in rows if r.cuda == "13.0.2" and not r.env)
    runs = compat.Observation("runs", "vector-add verified")
    rejected = compat.Observation("rejected", "unsatisfied condition: cuda>=13.0")
    assert dataclasses.replace(row, observed=runs).matches()
    assert dataclasses.replace(row, observed=compat.Observation("cuda-error", "35", 35)).matches()
    assert not dataclasses.replace(row, observed=compat.Observation("cuda-error", "804", 804)).matches()
    assert not dataclasses.replace(row, observed=rejected).matches()
    assert not dataclasses.replace(row, predicted=(), observed=runs).matches()


# -------------------------------------------------------------------------------------------------
# Every branch of the compat checks: which check, which node, the outcome, whether it says what
# was expected and observed and with how much evidence (recorded in tests/data/verdicts/compat.json),
# and the facts it names (asserted here: counts, versions, error codes, the pool)


@functools.cache
def run_of(profile: str, *faults: str) -> compat.CompatRun:
    by_id = {"cdi": CDI_MODE, "560": DRIVER_560, "broken": COMPAT_BROKEN,
             "uvm": {"id": "uvm-missing", "pool": "h100", "node": 0},
             "drift": {"id": "label-drift", "pool": "h100", "node": 0,
                       "label": "nvidia.com/cuda.driver-version.full", "value": "560.35.03"}}
    nodes = h100 if profile == "h100" else a100_570
    return campaign(nodes(*(by_id[f] for f in faults)))


def rows_of(profile: str, node: str, *faults: str) -> tuple[compat.MatrixRow, ...]:
    return run_of(profile, *faults).rows[node]


def target(gpu: str, driver: str | None) -> compat.Target:
    labels = {"nvidia.com/gpu.product": gpu}
    if driver is not None:
        labels["nvidia.com/cuda.driver-version.full"] = driver
    return compat.make_target("n", labels)


def enforced(node: str, *faults: str, declared: str | None = None) -> Any:
    run = run_of("h100", *faults)
    return compat.evaluate_require_enforced(node, run.canaries, run.pools, declared=declared)


def pool(**enforcing: bool | None) -> Any:
    return {n: compat.Canary(e, f"canary of {n}", (f"pod c-{n}",)) for n, e in enforcing.items()}


RAN_COMPAT = compat.Observation("runs", "vector-add verified", None, "/usr/local/cuda/compat/libcuda.so.580.00.00",
                                True, ("pod q: probe exit 0",))
REFUSED = compat.Observation("rejected", "requirement error: unsatisfied condition: cuda>=13.0", None, None, None,
                             ("pod p: refused",))


def twins(observed: compat.Observation) -> list[compat.MatrixRow]:
    image = images.devel_image("13.0.2")
    return [compat.MatrixRow("p", "13.0.2", image, (), (), REFUSED),
            compat.MatrixRow("q", "13.0.2", image, (("NVIDIA_DISABLE_REQUIRE", "1"),), (), observed)]


A100 = ("NVIDIA-A100-SXM4-80GB", "570.211.01")
CID = {"enforced": "runtime.require-cuda-enforced", "matches": "compat.outcome-matches-prediction",
       "forward": "compat.forward-compat-runs", "major": "compat.current-cuda-major-runs"}

#: case -> (the verdict, the words its summary holds)
CASES: dict[str, tuple[Callable[[], Any], tuple[str, ...]]] = {
    "enforced: a pool enforcing everywhere": (lambda: enforced("h100-0"), (
        "NVIDIA_REQUIRE_CUDA enforced at container creation (legacy mode)", "NVIDIA-H100-80GB-HBM3 pool (2)")),
    "enforced: the cdi node of a tie": (lambda: enforced("h100-0", "cdi"), (
        "h100-0 does not enforce NVIDIA_REQUIRE_CUDA while 1 of 2 nodes", "(a tie:")),
    "enforced: the legacy node of a tie": (lambda: enforced("h100-1", "cdi"), (
        "NVIDIA_REQUIRE_CUDA enforced at container creation (legacy mode), as 1 of 2 nodes", "(a tie:")),
    "enforced: declared legacy, enforcing": (lambda: enforced("h100-0", declared="legacy"), (
        "NVIDIA_REQUIRE_CUDA enforced at container creation (legacy mode), as declared (legacy)",)),
    "enforced: declared cdi, enforcing": (lambda: enforced("h100-0", declared="cdi"), (
        "h100-0 runs with NVIDIA_REQUIRE_CUDA enforced at container creation (legacy mode) although the declared "
        "mode is cdi",)),
    "enforced: declared jit-cdi, not enforcing": (lambda: enforced("h100-0", "cdi", declared="jit-cdi"), (
        "NVIDIA_REQUIRE_CUDA not checked (cdi or jit-cdi mode), as declared (jit-cdi)",)),
    "enforced: the majority not enforcing": (lambda: compat.evaluate_require_enforced(
        "a", pool(a=False, b=False, c=True, d=None), dict.fromkeys("abcd", "Tesla-T4")), (
        "NVIDIA_REQUIRE_CUDA not checked (cdi or jit-cdi mode), as 2 of 3 nodes of the Tesla-T4 pool",)),
    "enforced: the lone enforcing node": (lambda: compat.evaluate_require_enforced(
        "c", pool(a=False, b=False, c=True), dict.fromkeys("abc", "Tesla-T4")), (
        "c enforces NVIDIA_REQUIRE_CUDA while 2 of 3 nodes of the Tesla-T4 pool do not",)),
    "enforced: a node without a pool": (lambda: compat.evaluate_require_enforced(
        "c", pool(a=False, c=True), {"a": None, "c": None}), (
        "c has no pool to be compared with (no nvidia.com/gpu.product label or productName attribute): "
        "NVIDIA_REQUIRE_CUDA enforced at container creation (legacy mode), not judged",)),
    "enforced: a pool of one": (lambda: compat.evaluate_require_enforced(
        "c", pool(a=False, c=True), {"a": "Tesla-T4", "c": "NVIDIA-L40S"}), (
        "c is the only node of the NVIDIA-L40S pool: there is no other node to compare its requirement enforcement "
        "with (NVIDIA_REQUIRE_CUDA enforced at container creation (legacy mode))",)),
    "enforced: the pool's other node unknown": (lambda: compat.evaluate_require_enforced(
        "a", pool(a=False, b=None), dict.fromkeys("ab", "Tesla-T4")), (
        "the requirement enforcement of the other node(s) of the Tesla-T4 pool is unknown (b): a's "
        "(NVIDIA_REQUIRE_CUDA not checked (cdi or jit-cdi mode)) has nothing to be compared with",)),
    "enforced: no canary": (lambda: compat.evaluate_require_enforced("z", pool(a=True), {"a": "x"}), (
        "no canary ran on z",)),
    "enforced: unknown": (lambda: compat.evaluate_require_enforced("a", pool(a=None), {"a": "x"}), (
        "requirement enforcement on a is unknown: canary of a",)),
    "matches: healthy h100": (lambda: compat.evaluate_outcome_matches("h100-0", rows_of("h100", "h100-0")), (
        "all 3 matrix pods on h100-0 did what gpuconf predict says: ",)),
    "matches: twins on driver 560": (lambda: compat.evaluate_outcome_matches(
        "h100-0", rows_of("h100", "h100-0", "560")), (
        "all 5 matrix pods on h100-0", "with NVIDIA_DISABLE_REQUIRE=1: cuda-error",
        "cudaErrorSystemDriverMismatch (803)")),
    "matches: a label lying about the driver": (lambda: compat.evaluate_outcome_matches(
        "h100-0", rows_of("h100", "h100-0", "drift")), ("4 of 5 matrix pods on h100-0 did not do what",)),
    "matches: no rows": (lambda: compat.evaluate_outcome_matches("h100-0", []), ("no matrix pod ran on h100-0",)),
    "matches: unpredictable": (lambda: compat.evaluate_outcome_matches(
        "h100-0", rows_of("h100", "h100-0"), unpredictable="the driver version is unknown"), (
        "no prediction for h100-0: the driver version is unknown",)),
    "matches: a broken stack": (lambda: compat.evaluate_outcome_matches(
        "h100-0", rows_of("h100", "h100-0", "uvm")), (
        "3 of 3 matrix pods on h100-0 show no compatibility outcome", "/dev/nvidia-uvm")),
    "forward: the 570 pool": (lambda: compat.evaluate_forward_compat(
        "a100-570-0", run_of("a100").targets["a100-570-0"], rows_of("a100", "a100-570-0")), (
        "forward compatibility works on a100-570-0 (NVIDIA A100-SXM4-80GB, driver 570.211.01, native CUDA 12.8)",)),
    "forward: compat libs broken": (lambda: compat.evaluate_forward_compat(
        "a100-570-0", run_of("a100", "broken").targets["a100-570-0"], rows_of("a100", "a100-570-0", "broken")), (
        "ran on the host libcuda, not the image's cuda-compat one", "cudaErrorInsufficientDriver (35)")),
    "forward: no target": (lambda: compat.evaluate_forward_compat("n", None, []), (
        "no prediction for n: its facts are unknown",)),
    "forward: no driver": (lambda: compat.evaluate_forward_compat("n", target(A100[0], None), []), (
        "no prediction for n: the driver version is unknown",)),
    "forward: a consumer gpu": (lambda: compat.evaluate_forward_compat(
        "n", target("NVIDIA-GeForce-RTX-4090", "570.211.01"), []), ("supported on data-center GPUs only",
                                                                   "NVIDIA GeForce RTX 4090 on n is consumer")),
    "forward: nothing newer": (lambda: compat.evaluate_forward_compat(
        "n", target("NVIDIA-H100-80GB-HBM3", "595.71.05"), rows_of("h100", "h100-0")), (
        "no matrix image is newer than the native CUDA 13.2 of n", "matrix: 12.9.1, 13.0.2, 13.2.0")),
    "forward: branch 560": (lambda: compat.evaluate_forward_compat(
        "h100-0", run_of("h100", "560").targets["h100-0"], rows_of("h100", "h100-0", "560")), (
        "no matrix image newer than CUDA 12.6 pairs with driver branch 560",)),
    "forward: the refused image's twin ran": (lambda: compat.evaluate_forward_compat(
        "n", target(*A100), twins(RAN_COMPAT)), ("(with NVIDIA_DISABLE_REQUIRE=1; without it: requirement error",)),
    "forward: the twin ran on the host": (lambda: compat.evaluate_forward_compat(
        "n", target(*A100), twins(dataclasses.replace(RAN_COMPAT, libcuda="/usr/lib/libcuda.so.570",
                                                      libcuda_compat=False))), (
        "nvidia/cuda:13.0.2-devel-ubuntu24.04 ran on the host libcuda",)),
    "forward: unobserved": (lambda: compat.evaluate_forward_compat(
        "n", target(*A100), twins(compat.Observation("other", "the pod never started"))), (
        "forward compatibility could not be observed on n: nvidia/cuda:13.0.2-devel-ubuntu24.04: the pod never",)),
    "forward: a GPU of an unknown class": (lambda: compat.evaluate_forward_compat(
        "n", target("NVIDIA-Mystery-9000", "570.211.01"), []), (
        "no prediction for n: GPU model NVIDIA-Mystery-9000 is not in gpuconf/data/gpus.yaml",)),
    "forward: no GPU named": (lambda: compat.evaluate_forward_compat(
        "n", compat.make_target("n", {"nvidia.com/cuda.driver-version.full": "570.211.01"}), []), (
        "no prediction for n: the GPU model is unknown (no nvidia.com/gpu.product label",)),
    "major: no GPU named": (lambda: compat.evaluate_current_major_runs(
        "h100-0", compat.make_target("h100-0", {"nvidia.com/cuda.driver-version.full": "580.159.03"}),
        rows_of("h100", "h100-0")), (
        "the CUDA 13 images run on h100-0: nvidia/cuda:13.0.2-devel-ubuntu24.04: runs",)),
    "major: healthy h100": (lambda: compat.evaluate_current_major_runs(
        "h100-0", run_of("h100").targets["h100-0"], rows_of("h100", "h100-0")), (
        "the CUDA 13 images run on h100-0 (NVIDIA H100 80GB HBM3, driver 580.159.03, native CUDA 13.0)",)),
    "major: driver 560 refuses them": (lambda: compat.evaluate_current_major_runs(
        "h100-0", run_of("h100", "560").targets["h100-0"], rows_of("h100", "h100-0", "560")), (
        "CUDA 13 images fail on h100-0", "cudaErrorSystemDriverMismatch (803)",
        "(with NVIDIA_DISABLE_REQUIRE=1; without it:")),
    "major: compat libs broken": (lambda: compat.evaluate_current_major_runs(
        "a100-570-0", run_of("a100", "broken").targets["a100-570-0"], rows_of("a100", "a100-570-0", "broken")), (
        "CUDA 13 images fail on a100-570-0", "nvidia/cuda:13.0.2-devel-ubuntu24.04 cuda-error "
        "cudaErrorInsufficientDriver (35): CUDA driver version is insufficient for CUDA runtime version; "
        "nvidia/cuda:13.2.0-devel-ubuntu24.04 cuda-error")),
    "major: refused, no twin": (lambda: compat.evaluate_current_major_runs("n", None, twins(RAN_COMPAT)[:1]), (
        "CUDA 13 images fail on n: nvidia/cuda:13.0.2-devel-ubuntu24.04 rejected at container creation",)),
    "major: no target": (lambda: compat.evaluate_current_major_runs("h100-0", None, rows_of("h100", "h100-0")), (
        "the CUDA 13 images run on h100-0: ",)),
    "major: no rows": (lambda: compat.evaluate_current_major_runs("n", None, []), (
        "no probe-matrix image ran on n",)),
    "major: only twins": (lambda: compat.evaluate_current_major_runs("n", None, twins(RAN_COMPAT)[1:]), (
        "no probe-matrix image ran on n",)),
    "major: unobserved": (lambda: compat.evaluate_current_major_runs(
        "h100-0", None, rows_of("h100", "h100-0", "uvm")), ("2 of 2 CUDA 13 images' outcome on h100-0 could not be "
                                                            "observed: nvidia/cuda:13.0.2-devel-ubuntu24.04: device",)),
    "major: one of two unobserved": (lambda: compat.evaluate_current_major_runs(
        "h100-0", None, [*rows_of("h100", "h100-0")[:2], *rows_of("h100", "h100-0", "uvm")[2:]]), (
        "1 of 2 CUDA 13 images' outcome on h100-0 could not be observed: nvidia/cuda:13.2.0-devel-ubuntu24.04: "
        "device nodes missing", "(seen: nvidia/cuda:13.0.2-devel-ubuntu24.04: runs")),
}


@pytest.mark.parametrize("case", CASES)
def test_each_compat_verdict_names_its_check_node_and_facts(case: str) -> None:
    make, words = CASES[case]
    v = make()
    assert v.check == CID[case.split(":")[0]]
    for word in words:
        assert word in v.summary, v.summary
    check_recording("compat", case, lambda: shape(v))


@pytest.mark.parametrize("case", CASES)
def test_each_compat_verdict_is_the_recorded_one_whole(case: str) -> None:
    """Beside the words each case names: the whole verdict (summary, expected, observed, evidence, remedy),
    a NOT TESTED's kind, a PASS's caveats and a FAIL's findings, recorded in compat_whole.json."""
    def make() -> Any:
        v = CASES[case][0]()
        return {**whole(v), "causes": sorted(v.causes)}
    check_recording("compat_whole", case, make)


# -------------------------------------------------------------------------------------------------
# What the campaign plans, observes and predicts: recorded whole (names, roles, env; each pod's
# result, CUDA error code, libcuda and evidence; each prediction's result, code and conditions)


def pod(profile: str, cuda: str, *faults: str, env: tuple[tuple[str, str], ...] = (),
        edit: Callable[[dict[str, Any]], None] | None = None, nvidia_runtime: bool = True) -> Any:
    by_id = {"cdi": CDI_MODE, "560": DRIVER_560, "broken": COMPAT_BROKEN,
             "uvm": {"id": "uvm-missing", "pool": "h100", "node": 0}}
    nodes = (h100 if profile == "h100" else a100_570)(*(by_id[f] for f in faults))
    outcome = run_pod(nodes[0], f"compat-{cuda}", cuda, env, nvidia_runtime=nvidia_runtime)
    if edit is not None:
        doc = json.loads(outcome.logs["probe"])
        edit(doc)
        outcome = dataclasses.replace(outcome, logs={**outcome.logs, "probe": json.dumps(doc)})
    return outcome


def pending(*, timed_out: bool, message: str | None = None) -> Any:
    status: dict[str, Any] = {"phase": "Pending"}
    if message:
        status.update(reason="Unschedulable", message=message)
    return make_outcome({"metadata": {"name": "c"}, "spec": {}, "status": status},
                        [{"type": "Warning", "reason": "FailedScheduling", "firstTimestamp": "2026-11-29T00:00:00Z",
                          "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}],
                        logs={}, missing_logs={}, timed_out=timed_out)


def vector_add_failed(doc: dict[str, Any]) -> None:
    doc["devices"][0]["vector_add"].update(ok=False, verified=False, mismatches=7)


def ptx_jit_failed(doc: dict[str, Any]) -> None:
    e = tables.cuda_error(222)
    doc["devices"][0]["ptx_jit"].update(ok=False, verified=False, result={
        "call": "ptx_jit(device 0)", "code": e.code, "name": e.name, "message": e.message, "ms": 0.01,
        "timed_out": False})


CANARY = (("NVIDIA_REQUIRE_CUDA", compat.CANARY_REQUIREMENT),)
OBSERVED: dict[str, Callable[[], Any]] = {
    "observe: runs on the host libcuda": lambda: compat.observe(pod("h100", "12.9.1")),
    "observe: runs on cuda-compat": lambda: compat.observe(pod("a100", "13.0.2")),
    "observe: refused at creation": lambda: compat.observe(pod("h100", "13.0.2", "560")),
    "observe: the disabled twin's 803": lambda: compat.observe(pod("h100", "13.0.2", "560",
                                                                   env=(compat.DISABLE_REQUIRE,))),
    "observe: 35 with compat libs broken": lambda: compat.observe(pod("a100", "13.0.2", "broken")),
    "observe: uvm missing": lambda: compat.observe(pod("h100", "13.0.2", "uvm")),
    "observe: no driver injected": lambda: compat.observe(pod("h100", "13.0.2", nvidia_runtime=False)),
    "observe: nvml absent": lambda: compat.observe(pod("h100", "13.0.2", edit=lambda d: d.update(
        nvml={"available": False, "reason": "nvmlInit_v2: Driver Not Loaded"}))),
    "observe: no GPU device node": lambda: compat.observe(pod("h100", "13.0.2", edit=lambda d: d[
        "device_nodes"].update(gpus=[]))),
    "observe: no control nor uvm device node": lambda: compat.observe(pod("h100", "13.0.2", edit=lambda d: d[
        "device_nodes"].update({"/dev/nvidiactl": False, "/dev/nvidia-uvm": False}))),
    "assemble: a node without facts": lambda: (lambda run: (run.unpredictable, run.skipped, run.pools, [
        (r.pod, r.predicted, r.observed.result) for r in run.rows["n"]]))(unknown_node_run()),
    "observe: vector-add wrong": lambda: compat.observe(pod("h100", "13.0.2", edit=vector_add_failed)),
    "observe: no device": lambda: compat.observe(pod("h100", "13.0.2", edit=lambda d: d.update(devices=[]))),
    "observe: PTX JIT failed": lambda: compat.observe(pod("h100", "13.0.2", edit=ptx_jit_failed)),
    "observe: unreadable probe output": lambda: compat.observe(dataclasses.replace(
        pod("h100", "13.0.2"), logs={"probe": "Segmentation fault"})),
    "observe: pending past the deadline": lambda: compat.observe(pending(timed_out=True)),
    "observe: pending, unschedulable": lambda: compat.observe(pending(
        timed_out=False, message="0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")),
    "canary: refused": lambda: compat.classify_canary(pod("h100", "13.0.2", env=CANARY)),
    "canary: started": lambda: compat.classify_canary(pod("h100", "13.0.2", "cdi", env=CANARY)),
    "canary: refused for another requirement": lambda: compat.classify_canary(pod("h100", "13.0.2", "560")),
    "canary: no driver": lambda: compat.classify_canary(pod("h100", "13.0.2", env=CANARY, nvidia_runtime=False)),
    "canary: never ran": lambda: compat.classify_canary(pending(timed_out=True)),
    "plan: h100": lambda: compat.plan_pods([run_of("h100").targets["h100-0"]], canary_cuda="13.0.2"),
    "plan: driver 560, two images": lambda: compat.plan_pods([run_of("h100", "560").targets["h100-0"]],
                                                             canary_cuda="12.9.1", cudas=["12.9.1", "13.0.2"]),
    "predicted: h100": lambda: [(r.pod, [(p.result, p.error_code, p.when, p.describe()) for p in r.predicted])
                                for r in rows_of("h100", "h100-0")],
    "predicted: driver 560 in cdi mode": lambda: [
        (r.pod, [(p.result, p.error_code, p.when, p.describe()) for p in r.predicted])
        for r in rows_of("h100", "h100-1", "cdi")],
    "predicted: a100 on 570": lambda: [(r.pod, [(p.result, p.error_code, p.when) for p in r.predicted])
                                       for r in rows_of("a100", "a100-570-0")],
    "predicted: twins on driver 560": lambda: [(r.pod, r.label, [(p.result, p.error_code) for p in r.predicted])
                                               for r in rows_of("h100", "h100-0", "560")],
    "images": lambda: [compat.make_image("13.0.2"), compat.make_image("12.9.1", (("NVIDIA_REQUIRE_CUDA", "x"),
                                                                                  ("A", "1")))],
    "pools": lambda: [compat.pool_of("NVIDIA-H100-80GB-HBM3-SHARED"), compat.pool_of(None), compat.matrix_cudas()],
}


def unknown_node_run() -> compat.CompatRun:
    """The campaign on a node whose driver is unknown (no label, no probe), beside a skipped one."""
    targets = [compat.make_target("n", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED"})]
    plan = compat.plan_pods(targets, canary_cuda="13.0.2")
    node = h100()[0]
    return compat.assemble(targets, plan, {p.name: run_pod(node, p.name, p.cuda, p.env) for p in plan},
                           {"cordoned-0": "cordoned"})


def test_only_a_refused_disabled_twin_gets_the_hint_about_nvidia_disable_require() -> None:
    rows = rows_of("h100", "h100-0")
    refused = [dataclasses.replace(r, observed=REFUSED) if r.cuda == "13.0.2" else r for r in rows]
    v = compat.evaluate_outcome_matches("h100-0", refused)
    assert v.outcome is Outcome.FAIL and "13.0.2-devel-ubuntu24.04 was predicted to be runs" in v.summary
    assert "NVIDIA_DISABLE_REQUIRE" not in v.summary
    twins_560 = [dataclasses.replace(r, observed=REFUSED) if r.disable_require else r
                 for r in rows_of("h100", "h100-0", "560")]
    hinted = compat.evaluate_outcome_matches("h100-0", twins_560)
    assert hinted.summary.startswith("2 of 5 matrix pods on h100-0 did not do what gpuconf predict says: ")
    assert hinted.summary.count("should have shown the runtime's outcome") == 1
    assert hinted.summary.count("; nvidia/cuda:13.2.0-devel-ubuntu24.04 with NVIDIA_DISABLE_REQUIRE=1 was "
                                "predicted") == 1


@pytest.mark.parametrize("case", OBSERVED)
def test_what_the_campaign_plans_observes_and_predicts_is_the_recorded(case: str) -> None:
    check_recording("compat", case, OBSERVED[case])


def test_a_target_reads_the_driver_and_gpu_from_the_labels_else_from_the_whole_node_probe() -> None:
    labelled = compat.make_target("n", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb",
                                        "nvidia.com/cuda.driver-version.full": "570.211.01"})
    assert (labelled.node, labelled.product, labelled.driver, labelled.gpu, labelled.problem, labelled.notes) == (
        "n", "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", "570.211.01", "NVIDIA-A100-SXM4-80GB", None, ())
    assert labelled.model is not None and str(labelled.model.driver) == "570.211.01"
    assert (labelled.model.gpu_name, labelled.model.gpu_class, labelled.model.brand, labelled.model.arch) == (
        "NVIDIA A100-SXM4-80GB", "data-center", "Nvidia", "8.0")
    older = compat.make_target("n", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                                     "nvidia.com/cuda.driver.major": "570", "nvidia.com/cuda.driver.minor": "211",
                                     "nvidia.com/cuda.driver.rev": "01"})
    assert older.driver == "570.211.01" and older.model is not None

    whole = compat.probe_facts(pod("h100", "13.0.2"))
    assert whole is not None
    probed = compat.make_target("n", {}, whole)
    assert (probed.driver, probed.gpu, probed.product) == ("580.159.03", "NVIDIA H100 80GB HBM3", None)
    assert probed.notes == (
        "driver 580.159.03 from NVML in the whole-node probe (no nvidia.com/cuda.driver-version.full)",
        "GPU 'NVIDIA H100 80GB HBM3' from the whole-node probe (no nvidia.com/gpu.product)")
    assert probed.model is not None and probed.model.gpu_class == "data-center"
    no_nvml = dataclasses.replace(whole, nvml_gpus=())
    assert compat.make_target("n", {"nvidia.com/cuda.driver-version.full": "580.159.03"}, no_nvml).gpu == \
        "NVIDIA H100 80GB HBM3"  # CUDA's device name when NVML names none
    assert compat.probe_facts(None) is None
    assert compat.probe_facts(dataclasses.replace(pod("h100", "13.0.2"), logs={"probe": "{"})) is None


@pytest.mark.parametrize(("driver", "problem"), [
    ("570.abc", "driver '570.abc': "),
    ("123.45.67", "driver branch 123 is not in gpuconf/data/driver_branches.yaml, so its native CUDA is unknown"),
])
def test_a_driver_the_tables_cannot_place_leaves_the_target_without_a_model(driver: str, problem: str) -> None:
    t = compat.make_target("n", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                                 "nvidia.com/cuda.driver-version.full": driver})
    assert t.model is None and t.driver == driver and t.gpu == "NVIDIA-A100-SXM4-80GB"
    assert (t.node, t.product, t.notes) == ("n", "NVIDIA-A100-SXM4-80GB", ())
    assert t.problem is not None and t.problem.startswith(problem)


def test_a_target_without_a_driver_keeps_its_gpu_and_the_probe_s_notes() -> None:
    t = compat.make_target("n", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    assert (t.node, t.product, t.driver, t.gpu, t.model, t.notes) == (
        "n", "NVIDIA-H100-80GB-HBM3", None, "NVIDIA-H100-80GB-HBM3", None, ())
    whole = compat.probe_facts(pod("h100", "13.0.2"))
    assert whole is not None
    nameless = dataclasses.replace(whole, nvml_driver_version=None, nvml_gpus=())
    probed = compat.make_target("n", {}, nameless)
    assert (probed.gpu, probed.driver, probed.model) == ("NVIDIA H100 80GB HBM3", None, None)
    assert probed.notes == ("GPU 'NVIDIA H100 80GB HBM3' from the whole-node probe (no nvidia.com/gpu.product)",)
    no_name = dataclasses.replace(nameless, devices=tuple(dataclasses.replace(d, name=None) for d in whole.devices))
    assert compat.make_target("n", {}, no_name).gpu is None
