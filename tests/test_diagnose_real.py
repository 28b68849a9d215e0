"""Diagnosis of real messages kept under tests/data/real/diagnose/ (SOURCES.md names each file's
public source and the category `gpuconf diagnose` must name first): the device plugin without
NVML, CRI-O's missing runtime handler, NCCL's older wordings, MIG permission / resource-manager /
pending-mode / strategy failures, DRA plugin registration, prepare and claim failures with their
older wordings, GKE's XidCriticalError node condition, libnvidia-container errors without their
prefix, and the pre-1.0.6 requirement format. Text matching nothing names the closest categories
and never a cause; `gpuconf diagnose --list` and `--file` work."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from gpuconf.cli import main
from gpuconf.diagnose import categories, closest, diagnose

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "data" / "real" / "diagnose"
_ROW = re.compile(r"^\| (?P<file>[\w.-]+\.txt) \| (?P<category>[a-z0-9-]+) \| (?P<source>[^|]+) \|", re.MULTILINE)


def table() -> dict[str, tuple[str, str]]:
    text = (REAL / "SOURCES.md").read_text(encoding="utf-8")
    return {m["file"]: (m["category"], m["source"].strip()) for m in _ROW.finditer(text)}


ROWS = table()

#: The categories issue 16 asked for: each must have at least one real fixture here.
REQUIRED = {
    "device-plugin-nvml-unavailable", "runtime-handler-missing", "nccl-error", "mig-insufficient-permissions",
    "device-plugin-resource-managers-failed", "mig-mode-change-pending", "mig-strategy-mismatch",
    "dra-driver-not-registered", "dra-prepare-failed", "dra-cannot-allocate", "toolkit-cli-error",
    "node-condition-xid", "node-condition-accelerated-hardware", "requirement-unsatisfied",
}


def test_every_file_has_a_row_with_a_public_source_and_a_known_category():
    files = {p.name for p in REAL.glob("*.txt")}
    assert files == set(ROWS)
    known = {c.id for c in categories()}
    for name, (category, source) in ROWS.items():
        assert category in known, name
        assert source.startswith("https://github.com/") or "find_string" in source, name


def test_every_asked_for_category_has_real_fixtures():
    covered = {category for category, _ in ROWS.values()}
    assert REQUIRED <= covered, REQUIRED - covered


@pytest.mark.parametrize("name", sorted(ROWS))
def test_diagnose_names_the_fixture_s_category_and_no_other(name):
    text = (REAL / name).read_text(encoding="utf-8")
    found = diagnose(text)
    # exactly the fixture's category: naming a second one would be naming a wrong cause
    assert [d.category for d in found] == [ROWS[name][0]]
    assert found[0].excerpt and found[0].explanation and found[0].remediation


@pytest.mark.parametrize("name,facts", [
    ("device-plugin-0.17-incompatible-strategy.txt", {"strategy": "auto"}),
    ("crio-ocp-retyped-runtime-handler.txt", {"handler": "nvidia"}),
    ("crio-rke2-runtime-handler.txt", {"handler": "nvidia"}),
    ("nccl-old-error-2-system.txt", {"nccl_error_code": "2", "nccl_error": "unhandled system error"}),
    ("nccl-old-error-1-cuda.txt", {"nccl_error_code": "1", "nccl_error": "unhandled cuda error"}),
    ("vllm-pynccl-unhandled-cuda-error.txt", {"nccl_error": "unhandled cuda error"}),
    ("device-plugin-mig-insufficient-permissions.txt", {"what": "parent memory info"}),
    ("nvidia-smi-mig-lci-insufficient-permissions.txt", {"what": "compute instances"}),
    ("mig-manager-pending-in-use.txt", {"pending": "enable", "pci": "00000001:00:00.0",
                                        "reason": "In use by another client"}),
    ("mig-manager-mode-disabled.txt", {"mode": "disabled"}),
    ("device-plugin-single-strategy-mixed-layout.txt", {"detail": "More than one MIG device type present on node"}),
    ("kubelet-dra-driver-not-registered.txt", {"driver": "compute-domain.nvidia.com"}),
    ("kubelet-dra-prepare-cdi-failed.txt", {"claim": "default/rdma-demo"}),
    ("dra-gpu-plugin-mig-prepare-failed.txt", {"claim_uid": "148dc683-2f43-4b2f-a11e-2d49477cf6d6"}),
    ("scheduler-1.27-dra-waiting-for-controller.txt", {"claim": "pod0-gpu"}),
    ("gke-node-condition-xid-describe.txt", {"xids": '"31":true'}),
    ("gke-node-condition-xid-yaml.txt", {"xids": '"31":true'}),
    ("eks-condition-dcgm-health-code.txt", {"reason": "DCGMHealthCode122"}),
    ("eks-condition-dcgm-error.txt", {"reason": "DCGMError"}),
    ("gfd-single-strategy-labeler.txt", {"strategy": "single"}),
    ("docker-2019-old-format-driver.txt", {"condition": "driver >= 410", "failed_property": "driver",
                                           "failed_operator": ">=", "failed_value": "410"}),
    ("docker-2019-old-format-brand.txt", {"condition": "brand = tesla", "failed_property": "brand"}),
    ("compose-wrapped-load-library-failed.txt", {"stage": "initialization", "library": "libnvidia-ml.so.1",
                                                 "toolkit_mode": "legacy"}),
])
def test_facts_of_real_messages(name, facts):
    found = diagnose((REAL / name).read_text(encoding="utf-8"))
    assert facts.items() <= found[0].facts.items()


def test_a_consequence_gives_way_to_its_cause():
    # the plugin's "mixed is only supported with NVML" line is explained by NVML missing
    assert [d.category for d in diagnose((REAL / "device-plugin-0.17-nvml-not-detected.txt").read_text())] == [
        "device-plugin-nvml-unavailable"]
    # the kubelet wraps "driver not registered" in "Failed to prepare dynamic resources"
    assert [d.category for d in diagnose((REAL / "kubelet-dra-driver-not-registered.txt").read_text())] == [
        "dra-driver-not-registered"]
    # a resource-manager failure whose cause is a MIG permission names the permission
    assert [d.category for d in diagnose((REAL / "device-plugin-mig-insufficient-permissions.txt").read_text())] == [
        "mig-insufficient-permissions"]


def test_the_requirement_explanation_is_true_for_both_formats():
    (new,) = diagnose("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update")
    assert new.facts == {"condition": "cuda>=12.8", "required_cuda": "12.8"}
    assert "first space-separated token" in new.explanation and "last factor that failed" in new.explanation


def test_libnvidia_container_errors_without_the_cli_prefix():
    # the message of NVIDIA/libnvidia-container#231 as quoted without its "nvidia-container-cli: " prefix
    tail = "initialization error: load library failed: libnvidia-ml.so.1: cannot open shared object file: " \
           "no such file or directory"
    (d,) = diagnose(tail)
    assert d.category == "toolkit-cli-error"
    assert d.facts == {"stage": "initialization", "library": "libnvidia-ml.so.1",
                       "detail": "load library failed: libnvidia-ml.so.1: cannot open shared object file: "
                                 "no such file or directory"}
    (bare,) = diagnose("load library failed: libcuda.so.1: cannot open shared object file")
    assert bare.category == "toolkit-cli-error" and bare.facts["library"] == "libcuda.so.1"


@pytest.mark.parametrize("text", [
    "Normal Scheduled default-scheduler Successfully assigned default/gpu to node-1",
    "XidCriticalError     False   Mon, 23 Jun 2025 18:45:43 +0000   Mon, 23 Jun 2025 18:44:57 +0000   NoXid",
    "Mode change pending: false",
    "NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
    "Insufficient Permissions to change the clocks",
    "I0117 15:43:15.907336 1 factory.go:107] Detected NVML platform: found NVML library",
    # AKS node-problem-detector's healthy GPU conditions (Azure/AgentBaker#8797)
    '{"type":"XIDError","status":"False","lastHeartbeatTime":"2026-06-30T16:58:18Z","lastTransitionTime":'
    '"2026-06-30T16:57:54Z","reason":"XIDErrorIsNotPresent","message":"XID error status is good"}',
    "node condition {Type:AcceleratedHardwareReady Status:True}",
])
def test_healthy_or_unrelated_text_is_not_diagnosed(text):
    assert diagnose(text) == []


def test_unrecognised_text_names_the_closest_categories_and_no_cause(monkeypatch):
    near = [c.id for c in closest("Error: MIG configuration could not be applied on GPU 0")]
    assert near and all(c.startswith("mig-") or c == "insufficient-mig" for c in near)
    assert closest("hello world") == []
    out, err = io.StringIO(), io.StringIO()
    code = main(["diagnose", "the nccl all-reduce hung for ten minutes"], stdout=out, stderr=err)
    assert code == 1
    text = out.getvalue()
    assert text.startswith("no known GPU failure recognised in the input\n")
    # a person's words are no message: nothing recognised, the hang's category named first among the closest
    assert "closest categories (not a diagnosis" in text and "  nccl-allreduce-hang:" in text.splitlines()[2]
    assert "meaning:" not in text and "fix:" not in text
    out = io.StringIO()
    assert main(["diagnose", "--json", "the nccl all-reduce hung"], stdout=out, stderr=io.StringIO()) == 1
    doc = json.loads(out.getvalue())
    assert doc["recognised"] is False and doc["diagnoses"] == []
    assert [c["category"] for c in doc["closest"]][0] == "nccl-allreduce-hang"


def test_list_names_every_category():
    out = io.StringIO()
    assert main(["diagnose", "--list"], stdout=out, stderr=io.StringIO()) == 0
    listed = [line.split()[0] for line in out.getvalue().splitlines()[1:]]
    assert listed == [c.id for c in categories()]
    out = io.StringIO()
    assert main(["diagnose", "--list", "--json"], stdout=out, stderr=io.StringIO()) == 0
    doc = json.loads(out.getvalue())
    assert [c["category"] for c in doc["categories"]] == listed
    assert all(set(c) == {"category", "stage", "title", "checks"} for c in doc["categories"])


def test_readme_lists_every_category():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [c.id for c in categories() if f"`{c.id}`" not in readme]
    assert not missing, missing


def test_file_option_reads_a_saved_text_and_bad_files_get_one_line(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    assert main(["diagnose", "--file", str(REAL / "crio-rke2-runtime-handler.txt")], stdout=out, stderr=err) == 0
    assert out.getvalue().startswith("[runtime-handler-missing]")
    for path, words in [(tmp_path / "missing.txt", "cannot read"), (tmp_path, "cannot read")]:
        out, err = io.StringIO(), io.StringIO()
        assert main(["diagnose", "--file", str(path)], stdout=out, stderr=err) == 2
        assert words in err.getvalue() and err.getvalue().count("\n") == 1 and out.getvalue() == ""
    binary = tmp_path / "core"
    binary.write_bytes(b"\xff\xfe\x00binary")
    err = io.StringIO()
    assert main(["diagnose", "--file", str(binary)], stdout=io.StringIO(), stderr=err) == 2
    assert "not UTF-8" in err.getvalue() and err.getvalue().count("\n") == 1
    err = io.StringIO()
    assert main(["diagnose", "--file", str(binary), "text"], stdout=io.StringIO(), stderr=err) == 2
    assert err.getvalue().count("\n") == 1
