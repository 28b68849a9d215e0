"""The DCGM diagnostics checks read dcgmi diag's JSON result by result, in both generations: each
rule proven both ways on the documents of tests/fixtures/dcgm (constructed to the published 3.x and
4.x formats, see its README), with the messages asserted."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from gpuconf.checks import dcgm
from gpuconf.nodes import NodeView
from gpuconf.podsecurity import assess
from gpuconf.sim.dcgm import diag_request, is_dcgm_image
from gpuconf.verdict import Outcome, Verdict

FIXTURES = Path(__file__).parent / "fixtures" / "dcgm"
DATA = Path(__file__).resolve().parents[1] / "gpuconf" / "data"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def diag(name: str, level: int = 2, exit_code: int | None = 0, gpus: int | None = 2) -> Verdict:
    """The fixtures' node has 2 GPUs, both given to the diag pod."""
    return dcgm.evaluate_dcgm_diag("node-a", fixture(name), level, exit_code=exit_code, gpus=gpus)


def warnings(name: str, level: int = 2, exit_code: int | None = 0, gpus: int | None = 2) -> Verdict:
    return dcgm.evaluate_dcgm_warnings("node-a", fixture(name), level, exit_code=exit_code, gpus=gpus)


# --- the data -------------------------------------------------------------------------------------


def test_the_data_file_matches_its_schema_and_levels_grow() -> None:
    data = yaml.safe_load((DATA / "dcgm_diag.yaml").read_text())
    Draft202012Validator(json.loads((DATA / "schemas" / "dcgm_diag.schema.json").read_text())).validate(data)
    levels = [dcgm.diag_level(n) for n in (1, 2, 3, 4)]
    for lower, higher in zip(levels, levels[1:], strict=False):
        assert set(lower.tests) < set(higher.tests) and lower.budget_s < higher.budget_s
    assert all(lv.budget_s >= 2 * lv.typical_s for lv in levels)
    assert {"memtest", "pulse_test"} <= set(levels[3].tests) and not {"memtest", "pulse_test"} & set(levels[2].tests)


def test_the_image_is_ngcs_or_the_same_path_under_the_registry() -> None:
    assert dcgm.diag_image().startswith("nvcr.io/nvidia/cloud-native/dcgm:4.")
    mirrored = dcgm.diag_image("registry.example.com/mirror/")
    assert mirrored.startswith("registry.example.com/mirror/nvidia/cloud-native/dcgm:4.")
    assert is_dcgm_image(mirrored) and is_dcgm_image(dcgm.diag_image())
    assert not is_dcgm_image("docker.io/nvidia/cuda:13.0.2-devel-ubuntu24.04")


def test_exit_statuses_are_named() -> None:
    assert "DCGM_ST_NVVS_ISOLATE_ERROR" in dcgm.exit_meaning(205)
    assert "DCGM_ST_NVVS_ERROR" in dcgm.exit_meaning(226)
    assert "nv-hostengine never answered" in dcgm.exit_meaning(dcgm.EXIT_NO_HOSTENGINE)
    assert dcgm.exit_meaning(42) == "exit 42"


# --- the pod --------------------------------------------------------------------------------------


def test_the_pod_holds_every_gpu_runs_the_level_and_drops_every_capability() -> None:
    pod = dcgm.make_dcgm_diag_pod(name="dcgm-diag-n", namespace="ns", run_id="r1", node="n", gpu_count=8, level=3,
                                  timeout_s=2700, registry="reg.example.com/m", runtime_class="nvidia")
    (c,) = pod["spec"]["containers"]
    assert c["resources"] == {"limits": {"nvidia.com/gpu": "8"}}
    assert c["image"].startswith("reg.example.com/m/nvidia/cloud-native/dcgm:")
    script = c["command"][-1]
    assert "nv-hostengine -n" in script and "dcgmi diag -r 3 --json --timeout 2700" in script
    assert diag_request(c["command"]) == 3
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]} and c["securityContext"]["runAsNonRoot"]
    assert pod["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "n"}
    assert pod["spec"]["runtimeClassName"] == "nvidia"
    assert pod["spec"]["activeDeadlineSeconds"] > 2700
    assert "gpuconf.io/probe" not in pod["metadata"]["labels"]  # no probe sources to ship
    assert assess(pod).violations == ()  # the restricted Pod Security Standard, no exception needed
    with pytest.raises(ValueError, match="level 5"):
        dcgm.make_dcgm_diag_pod(name="x", namespace="ns", run_id="r", node="n", gpu_count=1, level=5, timeout_s=60)


@pytest.mark.parametrize(("labels", "capacity", "allocatable", "dra", "why"), [
    ({}, {"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "8"}, 0, None),
    ({}, {"nvidia.com/gpu": "1", "nvidia.com/mig-1g.10gb": "7"}, {"nvidia.com/gpu": "1"}, 0, "MIG-enabled"),
    ({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"}, {"nvidia.com/gpu": "7"},
     {"nvidia.com/gpu": "7"}, 0, "MIG-enabled"),
    ({"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "mps"}, {"nvidia.com/gpu": "16"},
     {"nvidia.com/gpu": "16"}, 0, "mps, 4 replicas"),
    ({}, {}, {}, 8, None),
    ({}, {"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "7"}, 0, "only 7 of the 8"),
], ids=["whole idle GPUs", "mixed MIG", "single MIG", "MPS", "DRA only: through a claim", "a GPU unhealthy"])
def test_only_nodes_with_whole_exclusive_gpus_get_a_diag_pod(labels: dict[str, str], capacity: dict[str, str],
                                                             allocatable: dict[str, str], dra: int,
                                                             why: str | None) -> None:
    reason = dcgm.not_a_diag_node(NodeView.of("n", labels, capacity, allocatable, dra))
    assert (reason is None) if why is None else (why in (reason or ""))


def test_a_dra_only_node_is_diagnosed_through_one_claim_on_its_usable_gpus() -> None:
    from gpuconf.nodes import GpuRequest, Via

    xid = {"key": "gpu.nvidia.com/xid", "value": "48", "effect": "NoSchedule"}
    slice_ = {"spec": {"nodeName": "n", "driver": "gpu.nvidia.com", "pool": {"name": "n"}, "devices": [
        {"name": f"gpu-{i}", "attributes": {"uuid": {"string": f"GPU-{i}"}}, **({"taints": [xid]} if i == 2 else {})}
        for i in range(4)]}}
    node = NodeView.of("n", slices=[slice_])
    assert dcgm.not_a_diag_node(node) is None  # the tainted GPU is left out, not a reason to skip the node
    ask = node.exclusive(check="the diagnostic")
    assert isinstance(ask, GpuRequest) and ask.via is Via.CLAIM and ask.count == 3 and "gpu-2 (GPU-2)" in ask.note
    assert "no DeviceClass gpu.nvidia.com" in (dcgm.not_a_diag_node(NodeView.of("n", devices=4, device_classes=()))
                                               or "")
    pod = dcgm.make_dcgm_diag_pod(name="dcgm-diag-n", namespace="ns", run_id="r1", node="n", gpu_count=0, level=1,
                                  timeout_s=600, resource_claims={"gpus": "gpuconf-gpus-0"})
    (c,) = pod["spec"]["containers"]
    assert pod["spec"]["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": "gpuconf-gpus-0"}]
    assert c["resources"] == {"claims": [{"name": "gpus"}]}  # no GPU limits: the claim is its GPUs
    assert assess(pod).violations == ()
    extended = dcgm.make_dcgm_diag_pod(name="x", namespace="ns", run_id="r", node="n", gpu_count=8, level=1,
                                       timeout_s=60, gpu_resource="nvidia.com/gpu")
    assert extended["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "8"}}
    with pytest.raises(ValueError, match="at least one GPU"):
        dcgm.make_dcgm_diag_pod(name="x", namespace="ns", run_id="r", node="n", gpu_count=0, level=1, timeout_s=60)


# --- dcgm.diag-passes -----------------------------------------------------------------------------


def test_a_4x_level2_run_where_every_gpu_passes_every_test_passes() -> None:
    v = diag("v4-level2-pass.json")
    assert v.outcome is Outcome.PASS
    assert v.summary == "DCGM level 2 (medium) diagnostic passed on the pod's 2 GPU(s): software, pcie, memory"
    assert v.not_judged == ()


def test_a_failed_gpu_result_fails_though_the_test_summary_said_pass() -> None:
    v = diag("v4-summary-pass-memory-fail.json", exit_code=226)
    assert v.outcome is Outcome.FAIL
    assert ("memory failed on GPU 1 (serial 1650123000002): Couldn't allocate at least 75.0% of GPU memory on GPU 1 "
            "[error 56] although its test_summary said Pass") in v.summary
    assert "exit 226 DCGM_ST_NVVS_ERROR" in (v.observed or "")


def test_a_result_that_records_an_error_yet_says_pass_fails() -> None:
    """NVIDIA/DCGM issue #284: DCGM_FR_MEMORY_ALLOC recorded, the memory test still Pass."""
    doc = json.loads(fixture("v4-level2-pass.json"))
    memory = doc["DCGM Diagnostic"]["test_categories"][2]["tests"][0]
    memory["results"][0]["warnings"] = [{"error_category": 10, "error_id": 56, "error_severity": 2,
                                         "warning": "Couldn't allocate at least 75.0% of GPU memory on GPU 0"}]
    v = dcgm.evaluate_dcgm_diag("node-a", json.dumps(doc), 2, exit_code=0)
    assert v.outcome is Outcome.FAIL
    assert "memory recorded an error but reported Pass on GPU 0 (serial 1650123000001)" in v.summary


def test_a_3x_document_with_a_failed_pcie_result_fails_naming_the_gpu() -> None:
    v = diag("v3-pcie-fail.json", exit_code=226)
    assert v.outcome is Outcome.FAIL
    assert "DCGM level 2 diagnostic (3.x) failed: PCIe failed on GPU 1: Detected more than 8 PCIe replays per minute "\
        "for GPU 1 : 23 [error 3]" in v.summary


def test_a_3x_document_where_everything_passes_passes() -> None:
    doc = json.loads(fixture("v3-pcie-fail.json"))
    doc["DCGM GPU Diagnostic"]["test_categories"][1]["tests"][0]["results"][1] = {"gpu_ids": "1", "status": "Pass"}
    assert dcgm.evaluate_dcgm_diag("node-a", json.dumps(doc), 2, exit_code=0).outcome is Outcome.PASS


def test_a_run_where_every_test_skipped_is_not_tested_with_dcgms_reason() -> None:
    v = diag("v4-skip-only.json")
    assert v.outcome is Outcome.NOT_TESTED
    assert v.summary == ("DCGM level 2 diagnostic skipped every test (pcie, memory): Plugin is not allowed on this "
                         "SKU")


def test_dcgmis_mig_refusal_is_not_tested_with_its_words() -> None:
    v = diag("mig-refusal.txt", exit_code=1)
    assert v.outcome is Outcome.NOT_TESTED
    assert "GPU 0's MIG configuration is incompatible with the diagnostic" in v.summary


def test_a_nonzero_exit_over_an_all_pass_document_is_not_a_pass() -> None:
    v = diag("v4-level2-pass.json", exit_code=226)
    assert v.outcome is Outcome.FAIL
    assert "reported exit 226 DCGM_ST_NVVS_ERROR" in v.summary and "yet no result in its document failed" in v.summary


@pytest.mark.parametrize(("output", "code", "failure", "words"), [
    ("Error: unable to establish a connection to the specified host: localhost\n", 255, None,
     "printed no diag document (exit 255): no JSON object in the output; output: Error: unable to establish"),
    ("gpuconf: nv-hostengine did not answer within 30 s\n", 3, None,
     "exit 3: the embedded nv-hostengine never answered"),
    ("", None, "Pending Unschedulable 0/2 nodes are available", "printed nothing (Pending Unschedulable"),
    ('{"DCGM Diagnostic": {"version": "4.4.2", "runtime_error": "No GPUs found to run the diagnostic on"}}', 1, None,
     "could not run its tests (exit 1): No GPUs found to run the diagnostic on"),
    ('{"something": "else"}', 0, None, "not a dcgmi diag document"),
], ids=["hostengine unreachable", "our wrapper's timeout", "no output at all", "runtime error", "not a diag document"])
def test_output_that_is_no_diag_document_fails_with_what_was_printed(output: str, code: int | None, failure: str | None,
                                                                     words: str) -> None:
    v = dcgm.evaluate_dcgm_diag("node-a", output, 2, exit_code=code, failure=failure)
    assert v.outcome is Outcome.FAIL and words in v.summary, v.summary


def test_the_json_is_found_among_other_log_lines() -> None:
    text = "Successfully started host engine\n" + fixture("v4-level2-pass.json") + "\nbye\n"
    assert dcgm.parse_diag(text).generation == "4.x"


# --- dcgm.diag-no-warnings ------------------------------------------------------------------------


def test_a_warning_is_degraded_naming_the_test_gpu_and_text() -> None:
    v = warnings("v4-warn-only.json")
    assert v.outcome is Outcome.DEGRADED
    assert v.summary.startswith("DCGM level 2 diagnostic warned: software on GPU 0 (serial 1650123000001): "
                                "Persistence mode for GPU 0 is disabled.")
    assert diag("v4-warn-only.json").outcome is Outcome.PASS  # a warning is not a failure


def test_no_warning_passes_and_no_document_leaves_warnings_not_tested() -> None:
    assert warnings("v4-level2-pass.json").outcome is Outcome.PASS
    v = dcgm.evaluate_dcgm_warnings("node-a", "garbage", 2, exit_code=255)
    assert v.outcome is Outcome.NOT_TESTED and "dcgm.diag-passes says why" in v.summary
    assert warnings("v4-skip-only.json").outcome is Outcome.NOT_TESTED


# --- a level is passed only when every test of it ran -----------------------------------------------


def level2_with(edit) -> str:
    doc = json.loads(fixture("v4-level2-pass.json"))
    edit(doc["DCGM Diagnostic"]["test_categories"])
    return json.dumps(doc)


def test_a_test_of_the_level_missing_from_the_output_is_not_a_pass() -> None:
    def drop_memory(categories: list) -> None:
        for c in categories:
            c["tests"] = [t for t in c["tests"] if t["name"] != "memory"]
    v = dcgm.evaluate_dcgm_diag("node-a", level2_with(drop_memory), 2, exit_code=0)
    assert v.outcome is Outcome.NOT_TESTED
    assert v.summary == ("DCGM level 2 (medium) diagnostic did not run every test of the level (software, pcie, "
                         "memory) on node-a: not in its output: memory; the software, pcie that ran passed, so the "
                         "level is not judged")


def test_a_test_of_the_level_skipped_is_named_with_dcgms_reason() -> None:
    def skip_memory(categories: list) -> None:
        for c in categories:
            for t in c["tests"]:
                if t["name"] == "memory":
                    t["results"] = [{"entity_group": "GPU", "entity_id": 0, "status": "Skip",
                                     "info": ["Test skipped: not enough free memory"]}]
                    t["test_summary"] = {"status": "Skip"}
    v = dcgm.evaluate_dcgm_diag("node-a", level2_with(skip_memory), 2, exit_code=0)
    assert v.outcome is Outcome.NOT_TESTED
    assert "skipped memory: Test skipped: not enough free memory" in v.summary


def test_the_3x_names_of_the_level_count_as_its_tests() -> None:
    doc = json.loads(fixture("v3-pcie-fail.json"))
    doc["DCGM GPU Diagnostic"]["test_categories"][1]["tests"][0]["results"][1] = {"gpu_ids": "1", "status": "Pass"}
    v = dcgm.evaluate_dcgm_diag("node-a", json.dumps(doc), 2, exit_code=0, gpus=2)
    assert v.summary == ("DCGM level 2 (medium) diagnostic passed on the pod's 2 GPU(s): Blacklist, NVML Library, "
                         "PCIe, GPU Memory")
    doc["DCGM GPU Diagnostic"]["test_categories"].pop()  # no GPU Memory
    v = dcgm.evaluate_dcgm_diag("node-a", json.dumps(doc), 2, exit_code=0)
    assert v.outcome is Outcome.NOT_TESTED and "not in its output: memory" in v.summary


# --- a level is passed only on every GPU ------------------------------------------------------------


SERIAL = {"0": "1650123000001", "1": "1650123000002"}


def skip_on_gpu1(test_name: str, info: str = "GPU 1 is in use") -> Callable[[list], None]:
    def edit(categories: list) -> None:
        for c in categories:
            for t in c["tests"]:
                if t["name"] == test_name:
                    t["results"][1] = {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 1, "status": "Skip",
                                       "info": [info]}
    return edit


def gpu0_only(categories: list) -> None:
    for c in categories:
        for t in c["tests"]:
            t["results"] = [r for r in t["results"] if r["entity_id"] == 0]


@pytest.mark.parametrize("gpus", [2, None], ids=["the pod's GPU count known", "only the document's GPUs"])
def test_a_level_whose_memory_test_skipped_a_gpu_is_not_tested_naming_the_gpu_and_dcgms_reason(gpus: int | None):
    v = dcgm.evaluate_dcgm_diag("node-a", level2_with(skip_on_gpu1("memory")), 2, exit_code=0, gpus=gpus)
    assert v.outcome is Outcome.NOT_TESTED and v.kind == "could-not-run", v.message()
    count = "the pod's 2 GPU(s)" if gpus else "the 2 GPU(s) its output names"
    assert v.summary == (f"DCGM level 2 (medium) diagnostic did not test every GPU of node-a ({count}): memory Skip "
                         f"on GPU 1 (serial {SERIAL['1']}): GPU 1 is in use; every result it has passed, so the level "
                         f"is not judged on GPU 1 (serial {SERIAL['1']})")


def test_a_level_with_results_for_gpu_0_only_on_a_2_gpu_node_is_not_tested_naming_gpu_1() -> None:
    output = level2_with(gpu0_only)
    v = dcgm.evaluate_dcgm_diag("node-a", output, 2, exit_code=0, gpus=2)
    assert v.outcome is Outcome.NOT_TESTED, v.message()
    gpu1 = f"GPU 1 (serial {SERIAL['1']})"
    assert v.summary == (f"DCGM level 2 (medium) diagnostic did not test every GPU of node-a (the pod's 2 GPU(s)): "
                         f"software has no result for {gpu1}; pcie has no result for {gpu1}; memory has no result for "
                         f"{gpu1}; every result it has passed, so the level is not judged on {gpu1}")
    # the document's own GPU list is no stand-in for the pod's: without the count, the PASS says what it did not judge
    doc = json.loads(output)
    doc["entity_groups"][0]["entities"].pop()
    v = dcgm.evaluate_dcgm_diag("node-a", json.dumps(doc), 2, exit_code=0)
    assert v.outcome is Outcome.PASS
    assert v.summary == ("DCGM level 2 (medium) diagnostic passed on the 1 GPU(s) its output names: software, pcie, "
                         "memory")
    assert v.not_judged == ("whether dcgmi tested every GPU of node-a: how many GPUs the diag pod was given is not "
                            f"known, so only the GPUs its output names were compared (GPU 0 (serial {SERIAL['0']}))",)


def test_a_3x_gpu_left_out_of_a_test_is_not_tested_and_a_result_naming_no_gpu_covers_the_node() -> None:
    doc = json.loads(fixture("v3-pcie-fail.json"))
    tests = doc["DCGM GPU Diagnostic"]["test_categories"]
    tests[1]["tests"][0]["results"][1] = {"gpu_ids": "1", "status": "Pass"}
    tests[2]["tests"][0]["results"] = [{"gpu_ids": "0", "status": "Pass"},
                                       {"gpu_ids": "1", "status": "Skip", "warnings": [{"warning": "GPU 1 is in use"}]}]
    v = dcgm.evaluate_dcgm_diag("node-a", json.dumps(doc), 2, exit_code=0, gpus=2)
    assert v.outcome is Outcome.NOT_TESTED, v.message()
    assert v.summary == ("DCGM level 2 (medium) diagnostic did not test every GPU of node-a (the pod's 2 GPU(s)): "
                         "GPU Memory Skip on GPU 1: GPU 1 is in use; every result it has passed, so the level is not "
                         "judged on GPU 1")


def test_no_warnings_on_a_level_that_skipped_a_gpu_names_it_as_not_judged() -> None:
    v = dcgm.evaluate_dcgm_warnings("node-a", level2_with(skip_on_gpu1("pcie", "Plugin is not allowed on this SKU")),
                                    2, exit_code=0, gpus=2)
    assert v.outcome is Outcome.PASS
    assert v.summary == "no DCGM level 2 test warned on the pod's 2 GPU(s)"
    assert v.not_judged == (f"pcie Skip on GPU 1 (serial {SERIAL['1']}): Plugin is not allowed on this SKU",)
