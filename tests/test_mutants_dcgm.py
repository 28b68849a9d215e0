"""The DCGM diagnostics tier's every branch, pinned where mutation testing (scripts/mutation-score)
found it unpinned: each case is one function of gpuconf.checks.dcgm called on a document built from
tests/fixtures/dcgm/v4-level2-pass.json (or v3-pcie-fail.json) with one thing changed, or on a node
view, and gives what tests/data/verdicts/dcgm.json recorded, whole: a verdict's outcome, summary,
expected/observed, evidence and what a PASS did not judge; a parsed document; the diag pod."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from verdict_record import check_recording, whole

from gpuconf.checks import dcgm
from gpuconf.nodes import NodeView

FIXTURES = Path(__file__).parent / "fixtures" / "dcgm"
V4 = json.loads((FIXTURES / "v4-level2-pass.json").read_text())
V3 = json.loads((FIXTURES / "v3-pcie-fail.json").read_text())
NODE = "node-a"

Edit = Callable[[dict[str, Any]], None]


def v4(*edits: Edit) -> str:
    """The 4.x level 2 document (2 GPUs, every test passing), edited."""
    doc = copy.deepcopy(V4)
    for edit in edits:
        edit(doc)
    return json.dumps(doc)


def v3(*edits: Edit) -> str:
    """The 3.x document with GPU 1's PCIe result passing, edited."""
    doc = copy.deepcopy(V3)
    doc["DCGM GPU Diagnostic"]["test_categories"][1]["tests"][0]["results"][1] = {"gpu_ids": "1", "status": "Pass"}
    for edit in edits:
        edit(doc)
    return json.dumps(doc)


def test_named(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for c in doc["DCGM Diagnostic"]["test_categories"] for t in c["tests"] if t["name"] == name)


test_named.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


def result(test: str, gpu: int, **fields: Any) -> Edit:
    """Replace the fields of ``test``'s result for ``gpu``."""
    def edit(doc: dict[str, Any]) -> None:
        r = next(r for r in test_named(doc, test)["results"] if r["entity_id"] == gpu)
        r.update(fields)
    return edit


def summary(test: str, **fields: Any) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        test_named(doc, test)["test_summary"] = fields
    return edit


def drop_gpu(gpu: int, *tests: str) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        for c in doc["DCGM Diagnostic"]["test_categories"]:
            for t in c["tests"]:
                if not tests or t["name"] in tests:
                    t["results"] = [r for r in t["results"] if r["entity_id"] != gpu]
    return edit


def drop_test(name: str) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        for c in doc["DCGM Diagnostic"]["test_categories"]:
            c["tests"] = [t for t in c["tests"] if t["name"] != name]
    return edit


def skip_test(name: str, *info: str) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        t = test_named(doc, name)
        t["results"] = [{"entity_group": "GPU", "entity_id": r["entity_id"], "status": "Skip",
                         **({"info": list(info)} if info else {})} for r in t["results"]]
        t["test_summary"] = {"status": "Skip"}
    return edit


def skip_all(*info: str) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        for name in ("software", "pcie", "memory"):
            skip_test(name, *info)(doc)
    return edit


def add_test(name: str, category: str, status: str = "Skip") -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        doc["DCGM Diagnostic"]["test_categories"].append({"category": category, "tests": [{
            "name": name, "results": [{"entity_group": "GPU", "entity_id": i, "status": status,
                                       "info": [f"{name} is not run at this level"]} for i in (0, 1)]}]})
    return edit


def four_gpus(doc: dict[str, Any]) -> None:
    """Two more GPUs (2, 3), passing every test, without serial numbers."""
    for c in doc["DCGM Diagnostic"]["test_categories"]:
        for t in c["tests"]:
            t["results"] += [{"entity_group": "GPU", "entity_id": i, "status": "Pass"} for i in (2, 3)]


def fail_everywhere(doc: dict[str, Any]) -> None:
    for c in doc["DCGM Diagnostic"]["test_categories"]:
        for t in c["tests"]:
            for r in t["results"]:
                r["status"] = "Fail"
                r["warnings"] = [{"warning": f"{t['name']} failed on GPU {r['entity_id']}",
                                  "error_id": 10 + r["entity_id"]}]


def fail_first(n: int) -> Edit:
    """The first ``n`` results (test by test, GPU by GPU) failed."""
    def edit(doc: dict[str, Any]) -> None:
        results = [r for c in doc["DCGM Diagnostic"]["test_categories"] for t in c["tests"] for r in t["results"]]
        for i, r in enumerate(results[:n]):
            r.update(status="Fail", warnings=[{"warning": f"failure {i}"}])
    return edit


def gpus_2_and_10_skipped(doc: dict[str, Any]) -> None:
    """Memory results for GPUs 10 and 2 too, both skipped (ids that sort differently as text)."""
    test_named(doc, "memory")["results"] += [{"entity_group": "GPU", "entity_id": i, "status": "Skip",
                                              "info": [f"GPU {i} is in use"]} for i in (10, 2)]


def no_serial_for_gpu1(doc: dict[str, Any]) -> None:
    doc["entity_groups"][0]["entities"].pop()


ALLOC = {"warning": "Couldn't allocate at least 75.0% of GPU memory on GPU 1", "error_id": 56, "error_severity": 2}
PERSIST = {"warning": "Persistence mode for GPU 0 is disabled.", "error_id": 29}
NO_ID = {"warning": "an error without an id"}


def diag(output: str | None, *, level: int = 2, code: int | None = 0, failure: str | None = None,
         gpus: int | None = 2) -> Callable[[], Any]:
    return lambda: whole(dcgm.evaluate_dcgm_diag(NODE, output, level, exit_code=code, failure=failure, gpus=gpus))


def warns(output: str | None, *, level: int = 2, code: int | None = 0, failure: str | None = None,
          gpus: int | None = 2) -> Callable[[], Any]:
    return lambda: whole(dcgm.evaluate_dcgm_warnings(NODE, output, level, exit_code=code, failure=failure, gpus=gpus))


def parsed(output: str) -> Callable[[], Any]:
    return lambda: dcgm.parse_diag(output)


def parse_error(output: str) -> Callable[[], Any]:
    def make() -> Any:
        with pytest.raises(dcgm.DiagParseError) as e:
            dcgm.parse_diag(output)
        return str(e.value)
    return make


def pod(**kw: Any) -> Callable[[], Any]:
    args = {"name": "dcgm-diag-n", "namespace": "ns", "run_id": "r1", "node": "n", "gpu_count": 2, "level": 2,
            "timeout_s": 900, **kw}
    return lambda: dcgm.make_dcgm_diag_pod(**args)


def diag_node(node: NodeView) -> Callable[[], Any]:
    return lambda: {"reason": dcgm.not_a_diag_node(node), "kind": dcgm.not_a_diag_node_kind(node)}


MIG_OUTPUT = ("Successfully started\nGPU 0's MIG configuration is incompatible with the diagnostic because it "
              "prevents access to the entire GPU.\nGPU 3's MIG configuration is incompatible with the diagnostic\n")
LONG_GARBAGE = "\n".join(f"line {i}: " + "x" * 150 for i in range(6))
GPU1_SKIP = result("memory", 1, status="Skip", info=["GPU 1 is in use"])

CASES: dict[str, Callable[[], Any]] = {
    # dcgm.diag-passes: the document
    "diag: nothing printed, the pod's failure": diag("", failure="Pending Unschedulable", code=None),
    "diag: nothing printed, the exit status": diag("  \n", code=3),
    "diag: None printed, no exit status": diag(None, code=None),
    "diag: MIG refusal": diag(MIG_OUTPUT, code=1),
    "diag: no JSON, long output": diag(LONG_GARBAGE, code=255),
    "diag: JSON that does not parse": diag("started\n{\"DCGM Diagnostic\": {oops}\nbye", code=255),
    "diag: not a diag document": diag('{"something": "else"}'),
    "diag: a nested schema violation": diag('{"DCGM Diagnostic": {"test_categories": [{"tests": [{"name": 3}]}]}}'),
    "diag: runtime error": diag('{"DCGM Diagnostic": {"version": "4.4.2", "runtime_error": "No GPUs found"}}', code=1),
    # dcgm.diag-passes: failures
    "diag: one failed result": diag(v4(result("memory", 1, status="Fail", warnings=[ALLOC])), code=226),
    "diag: a failed result under a passing summary, isolate": diag(
        v4(result("memory", 1, status="Fail", warnings=[ALLOC]), summary("memory", status="Pass")), code=205),
    "diag: a Pass result recording an error": diag(v4(result("pcie", 0, warnings=[PERSIST, NO_ID]))),
    "diag: a failed result without error text": diag(v4(result("pcie", 1, status="Fail")), code=226),
    "diag: a failed summary alone": diag(v4(summary("pcie", status="Fail", warnings=[PERSIST])), code=226),
    "diag: a passing summary recording an error": diag(v4(summary("software", status="Pass", warnings=[NO_ID]))),
    "diag: eight failures": diag(v4(four_gpus, fail_everywhere), code=226, gpus=4),
    "diag: six failures": diag(v4(fail_first(6)), code=226),
    "diag: seven failures": diag(v4(add_test("pulse_test", "Hardware", status="Pass"), fail_first(7)), code=226),
    "diag: a 3.x deployment check failed on the node": diag(v3(lambda d: d["DCGM GPU Diagnostic"]["test_categories"][
        0]["tests"][0]["results"][0].update(status="Fail", warnings=[NO_ID])), code=226),
    "diag: short output that is no JSON": diag("\n".join(f"line {i}" for i in range(7)), code=255),
    # dcgm.diag-passes: what did not run
    "diag: every test skipped, DCGM's reasons": diag(v4(skip_all("Plugin is not allowed on this SKU", "busy"))),
    "diag: every test skipped, no reason": diag(v4(skip_all())),
    "diag: every test skipped, five reasons": diag(v4(skip_all("a", "b", "c", "d", "e"))),
    "diag: every test skipped, reasons as errors": diag(v4(skip_all(), result("pcie", 0, warnings=[NO_ID]))),
    "diag: nonzero exit over an all-pass document": diag(v4(), code=226),
    "diag: no exit status over an all-pass document": diag(v4(), code=None),
    "diag: memory missing": diag(v4(drop_test("memory"))),
    "diag: memory and pcie missing": diag(v4(drop_test("memory"), drop_test("pcie"))),
    "diag: memory skipped with a reason": diag(v4(skip_test("memory", "not enough free memory", "a", "b", "c"))),
    "diag: memory skipped without a reason": diag(v4(skip_test("memory"))),
    "diag: pcie missing, memory skipped": diag(v4(drop_test("pcie"), skip_test("memory", "busy"))),
    "diag: level 3 on a level 2 document": diag(v4(), level=3),
    # dcgm.diag-passes: every GPU
    "diag: pass": diag(v4()),
    "diag: pass, the GPU count unknown": diag(v4(), gpus=None),
    "diag: pass, a test of no level skipped": diag(v4(add_test("pulse_test", "Hardware"))),
    "diag: pass, two tests of no level skipped": diag(v4(add_test("pulse_test", "Hardware"),
                                                         add_test("memtest", "Stress"))),
    "diag: pass, a test of no level ran": diag(v4(add_test("pulse_test", "Hardware", status="Pass"))),
    "diag: memory skipped GPU 1": diag(v4(GPU1_SKIP)),
    "diag: memory skipped GPU 1, the count unknown": diag(v4(GPU1_SKIP), gpus=None),
    "diag: a skip without a reason": diag(v4(result("pcie", 0, status="Skip"))),
    "diag: a result with no status": diag(v4(result("pcie", 1, status="", info="no status given"))),
    "diag: Not Run and Skip on two tests": diag(v4(result("pcie", 1, status="Not Run", info=["not run"]),
                                                  result("memory", 0, status="Skip", info=["x", "y", "z", "w"]))),
    "diag: results for GPU 0 only": diag(v4(drop_gpu(1))),
    "diag: results for GPU 0 only, the count unknown": diag(v4(drop_gpu(1)), gpus=None),
    "diag: a third GPU the document does not name": diag(v4(), gpus=3),
    "diag: one GPU given, a second one skipped": diag(v4(result("memory", 1, status="Skip", info=["?"])), gpus=1),
    "diag: four GPUs, two missing from memory": diag(v4(four_gpus, drop_gpu(2, "memory"), drop_gpu(3, "memory")),
                                                     gpus=4),
    "diag: GPUs 2 and 10 skipped, the count unknown": diag(v4(gpus_2_and_10_skipped), gpus=None),
    "diag: a summary that passed with no results": diag(v4(lambda d: test_named(d, "pcie").update(results=[]))),
    "diag: a result of another entity group": diag(v4(result("pcie", 1, entity_group="GPU_I", status="Skip"))),
    "diag: 3.x pass": diag(v3()),
    "diag: 3.x, GPU Memory for GPU 0 only": diag(v3(lambda d: d["DCGM GPU Diagnostic"]["test_categories"][2][
        "tests"][0].update(results=[{"gpu_id": 0, "status": "Pass"}]))),
    "diag: 3.x fail": diag(json.dumps(V3), code=226),
    # dcgm.diag-no-warnings
    "warn: none": warns(v4()),
    "warn: none, the count unknown": warns(v4(), gpus=None),
    "warn: one result warns": warns(v4(result("software", 0, status="Warn", warnings=[PERSIST]))),
    "warn: two results and a summary warn": warns(v4(result("software", 0, status="Warn", warnings=[PERSIST]),
                                                     result("pcie", 1, status="Warn"),
                                                     summary("pcie", status="Warn"),
                                                     summary("memory", status="Warn", warnings=[NO_ID]))),
    "warn: seven warnings": warns(v4(four_gpus, lambda d: [r.update(status="Warn") for c in d["DCGM Diagnostic"][
        "test_categories"] for t in c["tests"] for r in t["results"]]), gpus=4),
    "warn: MIG refusal": warns(MIG_OUTPUT, code=1),
    "warn: no document": warns("garbage", code=255),
    "warn: nothing printed": warns("", failure="Failed DeadlineExceeded", code=None),
    "warn: runtime error": warns('{"DCGM Diagnostic": {"runtime_error": "No GPUs found"}}', code=1),
    "warn: every test skipped": warns(v4(skip_all("busy"))),
    "warn: only a summary ran": warns(v4(skip_all(), summary("pcie", status="Pass"))),
    "warn: a GPU skipped": warns(v4(GPU1_SKIP)),
    "warn: results for GPU 0 only": warns(v4(drop_gpu(1)), gpus=2),
    "warn: results and serials for GPU 0 only": warns(v4(drop_gpu(1), no_serial_for_gpu1), gpus=2),
    "warn: every result failed": warns(v4(fail_first(6)), code=226),
    # the document as read
    "parse: 4.x": parsed(v4(result("memory", 0, info="one line of info"), summary("pcie", status="Warn",
                                                                                    warnings=[PERSIST]),
                            result("memory", 1, status="Fail", warnings=[ALLOC]))),
    "parse: 4.x, version in the body": parsed(v4(lambda d: d.pop("metadata"),
                                                 lambda d: d["DCGM Diagnostic"].update(version="4.1.0"))),
    "parse: 4.x, no entity groups or version": parsed(v4(lambda d: d.pop("metadata"),
                                                         lambda d: d.pop("entity_groups"))),
    "parse: 4.x, a non-GPU entity group": parsed(v4(lambda d: d["entity_groups"].append(
        {"entity_group": "CPU", "entities": [{"entity_id": 9, "serial_num": "CPU9"}]}),
        lambda d: d["entity_groups"][0]["entities"][0].pop("serial_num"))),
    "parse: 3.x": parsed(json.dumps(V3)),
    "parse: 3.x gpu_id and a category-less test": parsed(v3(lambda d: d["DCGM GPU Diagnostic"][
        "test_categories"].append({"tests": [{"name": "Extra", "results": [
            {"gpu_id": "2", "status": "Pass"}, {"gpu_ids": " 0 , 1 ,", "status": "Pass"}]}]}))),
    "parse: among log lines": parsed("started\n" + v4() + "\nstopped"),
    "parse: trailing text after the last brace": parsed(v4() + "x"),
    "parse error: no JSON": parse_error("no braces here"),
    "parse error: braces the wrong way round": parse_error("} then {"),
    "parse error: JSON that does not parse": parse_error("{\"a\": }"),
    "parse error: top-level violation": parse_error('{"DCGM Diagnostic": {}, "DCGM GPU Diagnostic": {}}'),
    "parse error: two violations": parse_error('{"DCGM Diagnostic": {"test_categories": [{"tests": [{"name": 1, '
                                               '"results": [{"status": 2}]}]}]}}'),
    # the pod and the node
    "pod: plain": pod(),
    "pod: one GPU": pod(gpu_count=1),
    "pod: mirrored, a runtime class, one toleration, a DRA extended resource": pod(
        registry="reg.example.com/m/", runtime_class="nvidia", tolerations=[{"operator": "Exists"}],
        gpu_resource="gpu.example.com/gpu", level=4, timeout_s=5400),
    "pod: through a claim": pod(gpu_count=0, resource_claims={"gpus": "tmpl-a", "more": "tmpl-b"}),
    "pod name": lambda: [dcgm.pod_name("n"), dcgm.pod_name("Node_With+Odd.Chars"), dcgm.pod_name("x" * 80)],
    "exit meanings": lambda: [dcgm.exit_meaning(c) for c in (None, 0, 3, 205, 215, 217, 226, 42)],
    "images": lambda: [dcgm.diag_image(), dcgm.diag_image("reg.example.com/m//"), dcgm.diag_image(""),
                       dcgm.diag_image("reg.example.com/MX/")],
    "node: whole idle GPUs": diag_node(NodeView.of("n", {}, {"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "8"})),
    "node: mixed MIG": diag_node(NodeView.of("n", {}, {"nvidia.com/gpu": "1", "nvidia.com/mig-1g.10gb": "7",
                                                      "nvidia.com/mig-3g.40gb": "2"}, {"nvidia.com/gpu": "1"})),
    "node: single MIG": diag_node(NodeView.of("n", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"},
                                              {"nvidia.com/gpu": "7"}, {"nvidia.com/gpu": "7"})),
    "node: MPS": diag_node(NodeView.of("n", {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "mps"},
                                       {"nvidia.com/gpu": "16"}, {"nvidia.com/gpu": "16"})),
    "node: a GPU unhealthy": diag_node(NodeView.of("n", {}, {"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "7"})),
    "node: no GPU": diag_node(NodeView.of("n", {}, {}, {})),
}


@pytest.mark.parametrize("case", CASES)
def test_the_result_is_the_recorded_one(case: str) -> None:
    check_recording("dcgm", case, CASES[case])


def test_a_gpu_id_orders_as_a_number_and_names_after_numbers() -> None:
    order = sorted(["10", "b", "2", "a", "0"], key=dcgm._gpu_order)
    assert order == ["0", "2", "10", "a", "b"]


def test_a_pod_asking_for_no_gpu_is_refused_saying_so() -> None:
    with pytest.raises(ValueError, match=r"^a DCGM diag pod asks for at least one GPU$"):
        dcgm.make_dcgm_diag_pod(name="x", namespace="ns", run_id="r", node="n", gpu_count=0, level=1, timeout_s=60)
