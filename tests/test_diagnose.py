"""Failure diagnosis: every real message in tests/fixtures/diagnose is classified into its category
with its facts, the simulated cluster's texts are classified like the real ones, unrelated text
gives nothing, and `gpuconf diagnose` reads an argument or stdin and exits 0/1/2."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from gpuconf.cli import main
from gpuconf.compat import tables
from gpuconf.compat.require import Gpu, HostFacts, check_container
from gpuconf.diagnose import categories, diagnose, diagnose_pod, pod_texts
from gpuconf.sim import emulate, scheduler
from gpuconf.sim.agent_model import AdmissionError, DeviceBook
from gpuconf.sim.emulate import Visible, create_container, cuda_probe_run
from gpuconf.sim.profile import expand, load_profile, with_faults

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "diagnose"
DATA = ROOT / "gpuconf" / "data"


def ids(text: str) -> list[str]:
    return [d.category for d in diagnose(text)]


# --- the data -------------------------------------------------------------------------------


def test_the_table_matches_its_schema_and_its_references_exist():
    data = yaml.safe_load((DATA / "diagnoses.yaml").read_text(encoding="utf-8"))
    schema = json.loads((DATA / "schemas" / "diagnoses.schema.json").read_text(encoding="utf-8"))
    errors = sorted(Draft202012Validator(schema).iter_errors(data), key=str)
    assert not errors, errors[0].message
    cats = data["categories"]
    known = [c["id"] for c in cats]
    assert len(known) == len(set(known))
    faults = yaml.safe_load((DATA / "faults.yaml").read_text(encoding="utf-8"))
    checks = {f["caught_by"]["check"] for f in faults["faults"]}
    for c in cats:
        assert set(c.get("superseded_by", ())) <= set(known) - {c["id"]}, c["id"]
        assert set(c["checks"]) <= checks, (c["id"], set(c["checks"]) - checks)
        for p in c["patterns"] + c.get("extract", []):
            re.compile(p, re.MULTILINE)


def test_the_issue_s_categories_are_all_there():
    required = {
        "insufficient-gpu", "requirement-unsatisfied", "cuda-insufficient-driver", "nvidia-smi-no-devices",
        "cuda-no-device", "nvml-library-mismatch", "cuda-unsupported-ptx", "cuda-requires-newer-driver",
        "toolkit-cli-error", "toolkit-hook-failed", "runtimeclass-missing", "runtime-handler-missing",
        "dra-cannot-allocate", "insufficient-mig", "device-plugin-unhealthy", "nccl-error", "nccl-cuda-failure",
        "cuda-image-pull", "nvidia-smi-no-driver", "cuda-compat-not-supported", "cuda-system-driver-mismatch",
        "admission-devices-unavailable", "untolerated-taint", "node-affinity-mismatch", "xid-fallen-off-bus",
    }
    assert required <= {c.id for c in categories()}


@pytest.mark.parametrize("category", [c for c in categories() if c.cuda_error is not None], ids=lambda c: c.id)
def test_a_cuda_category_recognises_the_runtime_s_own_name_and_message(category):
    error = tables.cuda_error(category.cuda_error)
    for text in (error.message, error.name, f"cudaFree(0) returned {error.code} {error.name}"):
        found = diagnose(text)
        assert found and found[0].category == category.id, text
        assert found[0].facts["cuda_error"] == str(error.code)
        assert found[0].facts["cuda_error_name"] == error.name


# --- real messages --------------------------------------------------------------------------

#: fixture file -> (categories in order, facts that must be there)
CASES: dict[str, tuple[list[str], dict[str, str]]] = {
    "docker-2017-old-format-cuda9.0.txt": (["requirement-unsatisfied"],
                                           {"condition": "cuda >= 9.0", "required_cuda": "9.0"}),
    "docker-2018-brand-condition.txt": (["requirement-unsatisfied"], {"condition": "brand = tesla"}),
    "docker-2020-runc-rc-requirement-cuda10.1.txt": (["requirement-unsatisfied"],
                                                     {"condition": "cuda>=10.1", "required_cuda": "10.1"}),
    "docker-runc1.0-requirement-cuda11.0.txt": (["requirement-unsatisfied"],
                                                {"condition": "cuda>=11.0", "required_cuda": "11.0"}),
    "docker-legacy-mode-cuda12.8.txt": (["requirement-unsatisfied"],
                                        {"condition": "cuda>=12.8", "required_cuda": "12.8", "toolkit_mode": "legacy"}),
    "k8s-containerd-runc1.1-requirement-invalid.txt": (["requirement-invalid"], {}),
    "k8s-containerd-prestart-requirement-invalid.txt": (["requirement-invalid"], {}),
    "k8s-containerd-hook-nvml-mismatch.txt": (["nvml-library-mismatch"], {"toolkit_mode": "legacy"}),
    "nvidia-smi-nvml-mismatch.txt": (["nvml-library-mismatch"], {"nvml_library_version": "570.195"}),
    "crio-ocp-hook-exit-code.txt": (["toolkit-hook-failed"], {
        "hook_path": "/usr/local/nvidia/toolkit/nvidia-container-runtime-hook", "exit_code": "1"}),
    "podman-crun-cdi-hook.txt": (["toolkit-hook-failed"], {"hook_path": "/usr/bin/nvidia-cdi-hook", "exit_code": "1"}),
    "docker-toolkit-init-driver-error.txt": (["toolkit-cli-error"], {
        "stage": "initialization", "detail": "driver error: failed to process request"}),
    "k8s-docker-toolkit-device-error.txt": (["toolkit-cli-error"], {
        "stage": "device", "detail": "no-gpu-has-128MiB-to-run: unknown device", "toolkit_mode": "legacy"}),
    "scheduler-1.36-insufficient-gpu.txt": (["insufficient-gpu"], {
        "total_nodes": "1", "nodes": "1", "resource": "nvidia.com/gpu"}),
    "scheduler-1.27-insufficient-gpu-no-victims.txt": (["insufficient-gpu"], {
        "nodes": "1", "resource": "nvidia.com/gpu"}),
    "scheduler-2019-insufficient-gpu-unschedulable.txt": (["insufficient-gpu"], {"total_nodes": "2", "nodes": "1"}),
    "scheduler-2021-node-selector.txt": (["insufficient-gpu", "node-affinity-mismatch"], {"total_nodes": "6"}),
    "scheduler-1.36-dra-cannot-allocate.txt": (["dra-cannot-allocate"], {"nodes": "1"}),
    "admission-hami-devices-unavailable.txt": (["admission-devices-unavailable"], {
        "resource": "nvidia.com/gpu", "requested": "1", "available": "0"}),
    "admission-k8s-130145-devices-unavailable.txt": (["admission-devices-unavailable"], {
        "resource": "nvidia.com/gpu", "requested": "1", "available": "0"}),
    "admission-gpu-lost.txt": (["admission-allocate-failed"], {}),
    "device-plugin-xid-unhealthy.txt": (["device-plugin-unhealthy"], {
        "xid": "69", "device": "GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8"}),
    "containerd-no-runtime-nvidia.txt": (["runtime-handler-missing"], {"handler": "nvidia"}),
    "containerd-no-runtime-oci-sandbox.txt": (["runtime-handler-missing"], {"handler": "nvidia"}),
    "runtime-handler-not-supported.txt": (["runtime-handler-missing"], {"handler": "runc"}),
    "kubeedge-kubelet-runtimeclass-not-found.txt": (["runtimeclass-missing"], {"runtimeclass": "kata-test"}),
    "apiserver-runtimeclass-rejected.txt": (["runtimeclass-missing"], {"runtimeclass": "native"}),
    "nvidia-smi-no-driver.txt": (["nvidia-smi-no-driver"], {}),
    "gpu-operator-startup-probe-no-devices.txt": (["nvidia-smi-no-devices"], {}),
    "devicequery-cuda-35.txt": (["cuda-insufficient-driver"], {"cuda_error": "35"}),
    "caffe-cuda-803.txt": (["cuda-system-driver-mismatch"], {"cuda_error": "803"}),
    "pytorch-cuda-804.txt": (["cuda-compat-not-supported"], {"cuda_error_name": "cudaErrorCompatNotSupportedOnDevice"}),
    "tensorrt-llm-cuda-804.txt": (["cuda-compat-not-supported"], {"cuda_error": "804"}),
    "pytorch-cuda-36.txt": (["cuda-requires-newer-driver"], {"cuda_error": "36"}),
    "cuda-memtest-222.txt": (["cuda-unsupported-ptx"], {"cuda_error": "222"}),
    "k8s-events-cuda-image-pull.txt": (["cuda-image-pull"], {"image": "nvidia/cuda"}),
    "docker-manifest-unknown-cuda.txt": (["cuda-image-pull"], {"image": "nvidia/cuda:11.0-base-ubuntu20.04"}),
    "podman-reading-manifest-cuda.txt": (["cuda-image-pull"], {
        "image": "docker.io/nvidia/cuda", "tag": "10.2-cudnn7-devel-ubuntu18.04"}),
    "nccl-warn-cuda-oom.txt": (["nccl-cuda-failure"], {"cuda_message": "out of memory"}),
    "pytorch-nccl-unhandled-cuda-error.txt": (["nccl-cuda-failure", "nccl-error"], {
        "cuda_error_code": "1", "cuda_message": "invalid argument", "nccl_version": "2.20.5"}),
    "nccl-tests-unhandled-cuda-error.txt": (["nccl-error"], {"nccl_error": "unhandled cuda error"}),
    "nccl-socket-warn.txt": (["nccl-error"], {}),
    "dmesg-xid-79.txt": (["xid-fallen-off-bus"], {"xid": "79", "pci": "0000:44:00"}),
    "dmesg-fallen-off-bus-no-xid.txt": (["xid-fallen-off-bus"], {"pci": "0000:b3:00.0"}),
}


def test_every_fixture_has_a_case_and_a_readme_row():
    files = {p.name for p in FIXTURES.glob("*.txt")}
    assert files == set(CASES)
    readme = (FIXTURES / "README.md").read_text(encoding="utf-8")
    assert all(f"| {name} |" in readme for name in files)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_real_message_is_classified_with_its_facts(name):
    text = (FIXTURES / name).read_text(encoding="utf-8")
    expected, facts = CASES[name]
    found = diagnose(text)
    assert [d.category for d in found] == expected
    first = found[0]
    merged = {k: v for d in found for k, v in d.facts.items()}
    assert facts.items() <= merged.items()
    assert first.excerpt and first.excerpt in text.replace("\r\n", "\n") or first.excerpt.startswith("…")
    assert first.explanation and first.remediation and first.title


def test_a_requirement_error_names_only_the_first_token_and_no_trailing_comma():
    text = ("nvidia-container-cli: requirement error: unsatisfied condition: brand=vcs,driver!=0.133,"
            "driver<900, please update")
    (d,) = diagnose(text)
    assert d.facts == {"condition": "brand=vcs,driver!=0.133,driver<900"}


def test_a_wrapper_alone_is_the_generic_hook_failure_and_a_known_cause_replaces_it():
    hook = ("Error: failed to create containerd task: failed to create shim task: OCI runtime create failed: runc "
            "create failed: unable to start container process: error during container init: error running prestart "
            "hook #0: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'")
    (d,) = diagnose(hook)
    assert d.category == "toolkit-hook-failed"
    assert d.facts == {"hook_type": "prestart", "hook": "0", "toolkit_mode": "legacy", "exit_status": "1"}
    cause = "\nnvidia-container-cli: requirement error: invalid expression: unknown"
    assert ids(hook + cause) == ["requirement-invalid"]


def test_several_events_give_one_diagnosis_per_category_most_specific_first():
    text = "\n".join([
        "Warning FailedScheduling 2m default-scheduler 0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
        "Warning FailedScheduling 1m default-scheduler 0/3 nodes are available: 2 Insufficient nvidia.com/gpu.",
        "Warning Failed 10s kubelet Error: nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.0",
    ])
    found = diagnose(text)
    assert [d.category for d in found] == ["requirement-unsatisfied", "insufficient-gpu"]
    assert found[1].facts["nodes"] == "3" and found[1].excerpt.startswith("Warning FailedScheduling 2m")


def test_mig_and_shared_resources_and_old_taint_wordings():
    assert diagnose("0/5 nodes are available: 5 Insufficient nvidia.com/mig-3g.40gb.")[0].facts == {
        "total_nodes": "5", "nodes": "5", "resource": "nvidia.com/mig-3g.40gb", "profile": "3g.40gb"}
    assert ids("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.shared.") == ["insufficient-gpu"]
    assert ids("0/2 nodes are available: 2 Insufficient example.com/gpu-mem.") == []
    old = diagnose("0/3 nodes are available: 3 node(s) had taint {nvidia.com/gpu: present}, "
                   "that the pod didn't tolerate.")
    assert [d.category for d in old] == ["untolerated-taint"] and old[0].facts["taint"] == "nvidia.com/gpu: present"
    named = diagnose("0/2 nodes are available: 1 node(s) had untolerated taint "
                     "{node-role.kubernetes.io/control-plane: }.")
    assert named[0].facts == {"nodes": "1", "taint": "node-role.kubernetes.io/control-plane: "}


def test_xid_lines_other_than_79():
    (d,) = diagnose("[ 300.1] NVRM: Xid (PCI:0000:3b:00): 48, pid=2113, name=python, Ch 00000008")
    assert d.category == "xid-error" and d.facts == {"pci": "0000:3b:00", "xid": "48"}


def test_a_long_line_is_cut_around_the_match():
    text = "x" * 2000 + " NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. " + "y" * 2000
    (d,) = diagnose(text)
    assert len(d.excerpt) < 500 and "couldn't communicate" in d.excerpt
    assert d.excerpt.startswith("…") and d.excerpt.endswith("…")


@pytest.mark.parametrize("text", [
    "",
    "Normal Scheduled 10s default-scheduler Successfully assigned default/gpu to node-1",
    "Normal Started 3s kubelet Started container cuda",
    "Warning FailedScheduling 0/3 nodes are available: 3 Insufficient cpu, 3 Insufficient memory.",
    "Back-off pulling image \"nginx:1.27\"",
    "Failed to pull image \"busybox:does-not-exist\": not found",
    "NCCL INFO Channel 00/02 : 0 1 2 3",
    "cudaSuccess: no error",
    "Warning BackOff kubelet Back-off restarting failed container app",
])
def test_unrelated_text_gives_nothing(text):
    assert diagnose(text) == []


# --- the simulated cluster says what the real one says --------------------------------------


def sim_node(profile: str, name: str, faults: list[dict] | None = None):
    p = load_profile(profile)
    return expand(with_faults(p, faults) if faults else p).node(name)


def test_the_simulated_legacy_hook_rejection_is_a_requirement_error():
    n = sim_node("healthy-h100", "h100-0")
    created = create_container(n, env=["NVIDIA_REQUIRE_CUDA=cuda>=99.0"], visible=[Visible(n.gpus[0])])
    assert not created.ok and created.message
    (d,) = diagnose(created.message)
    assert d.category == "requirement-unsatisfied"
    assert d.facts == {"condition": "cuda>=99.0", "required_cuda": "99.0", "toolkit_mode": "legacy"}
    # the same wrapper around an invalid expression
    bad = check_container(HostFacts(cuda="12.8", driver="570.133.20", gpus=(Gpu("9.0", "Nvidia"),)),
                          env=["NVIDIA_REQUIRE_CUDA=cuda>>=1"])
    assert not bad.ok and bad.message == "nvidia-container-cli: requirement error: invalid expression"
    assert ids(emulate._HOOK_ERROR.format(message=bad.message)) == ["requirement-invalid"]


def test_the_simulated_scheduler_messages_are_classified():
    nodes = {f"n{i}": scheduler.NodeStatus(("Insufficient nvidia.com/gpu",), True) for i in range(2)}
    nodes["n2"] = scheduler.NodeStatus((scheduler.REASON_TAINT,))
    nodes["n3"] = scheduler.NodeStatus((scheduler.REASON_AFFINITY,))
    msg = scheduler.fit_error_message(4, nodes, postfilter=scheduler.preemption_message(None, 4, nodes))
    found = diagnose(msg)
    assert [d.category for d in found] == ["insufficient-gpu", "untolerated-taint", "node-affinity-mismatch"]
    assert found[0].facts == {"total_nodes": "4", "nodes": "2", "resource": "nvidia.com/gpu"}
    dra = scheduler.fit_error_message(1, {"n": scheduler.NodeStatus((scheduler.REASON_CANNOT_ALLOCATE,))},
                                      postfilter=scheduler.POSTFILTER_STILL + ", preemption: 0/1 nodes are available:"
                                      " 1 Preemption is not helpful for scheduling.")
    assert ids(dra) == ["dra-cannot-allocate"]
    mig = scheduler.fit_error_message(1, {"n": scheduler.NodeStatus(("Insufficient nvidia.com/mig-1g.10gb",))})
    assert diagnose(mig)[0].facts["profile"] == "1g.10gb"


def test_the_simulated_admission_rejection_and_sandbox_failure_are_classified():
    book = DeviceBook(sim_node("healthy-h100", "h100-0"))
    with pytest.raises(AdmissionError) as err:
        book.allocate("ns/a", [("main", False, {"nvidia.com/gpu": "99"})])
    (d,) = diagnose(f"{err.value.reason}: Pod was rejected: {err.value.message}")
    assert d.category == "admission-devices-unavailable"
    assert d.facts == {"resource": "nvidia.com/gpu", "requested": "99", "available": "8"}
    # gpuconf/sim/agent_pods.py words a missing RuntimeClass as the kubelet does
    source = (ROOT / "gpuconf" / "sim" / "agent_pods.py").read_text(encoding="utf-8")
    assert 'Failed to create pod sandbox: runtimeclass.node.k8s.io "{name}" not found' in source
    (rc,) = diagnose('Failed to create pod sandbox: runtimeclass.node.k8s.io "nvidia" not found')
    assert rc.category == "runtimeclass-missing" and rc.facts == {"runtimeclass": "nvidia"}


def test_the_simulated_probe_on_a_library_mismatch_node_is_classified_and_a_healthy_one_is_not():
    from gpuconf.compat.versions import parse_cuda

    image_env = {"NVIDIA_VISIBLE_DEVICES": "all"}
    healthy = sim_node("healthy-h100", "h100-0")
    code, out = cuda_probe_run(healthy, visible=[Visible(healthy.gpus[0])], image_cuda=parse_cuda("12.8"),
                               env=image_env, compat=False, started_at="2026-11-29T00:00:00.000Z", hostname="h")
    assert code == 0 and diagnose(out) == []
    broken = sim_node("healthy-h100", "h100-0", [{"id": "library-mismatch", "pool": "h100", "node": 0}])
    _, out = cuda_probe_run(broken, visible=[Visible(broken.gpus[0])], image_cuda=parse_cuda("12.8"), env=image_env,
                            compat=False, started_at="2026-11-29T00:00:00.000Z", hostname="h")
    assert ids(out) == ["nvml-library-mismatch", "cuda-system-driver-mismatch"]


# --- gpuconf's own failure messages (issue 36) ----------------------------------------------

#: The smoke check's summary on a node without nvidia_uvm before issue 36, and as a user pastes it.
SMOKE_999 = "CUDA could not start in the probe pod: cudaErrorUnknown (999): unknown error"


def test_the_smoke_text_alone_is_an_unknown_cuda_error():
    (d,) = diagnose(SMOKE_999)
    assert d.category == "cuda-unknown-error" and d.title.startswith("CUDA error 999")
    assert d.facts == {"cuda_error": "999", "cuda_error_name": "cudaErrorUnknown"}
    assert "nvidia_uvm" in d.explanation and "Xid" in d.remediation


def test_the_smoke_failure_without_nvidia_uvm_is_the_missing_module_not_a_gpu_to_replace():
    from gpuconf.checks.inventory import evaluate_cuda_device_nodes
    from gpuconf.checks.smoke import evaluate_vector_add
    from gpuconf.compat.versions import parse_cuda
    from gpuconf.probes.cuda import parse_cuda_probe

    node = sim_node("healthy-h100", "h100-0", [{"id": "uvm-missing", "pool": "h100", "node": 0}])
    code, out = cuda_probe_run(node, visible=[Visible(g) for g in node.gpus], image_cuda=parse_cuda("13.0"),
                               env={}, compat=False, started_at="2026-12-07T00:00:00.000Z", hostname="h")
    report = parse_cuda_probe(out, exit_code=code)
    smoke = evaluate_vector_add("h100-0", report, requested=8)
    owner = evaluate_cuda_device_nodes("h100-0", report)
    for verdict in (smoke, owner):  # the failure as printed, and as the run's diagnosis reads it
        for text in (verdict.message(), "\n".join([verdict.summary, verdict.observed or "", *verdict.evidence])):
            assert ids(text) == ["cuda-uvm-missing"], text  # the module's category replaces the unknown error
    (d,) = diagnose(smoke.summary)
    assert "modprobe nvidia-uvm" in d.remediation and "nvidia-modprobe -u -c=0" in d.remediation
    assert "not at fault" in d.explanation and d.checks == ("runtime.cuda-device-nodes-present",)


@pytest.mark.parametrize("text", [
    "lstat /dev/nvidia-uvm: no such file or directory",  # NVIDIA/nvidia-docker#139
    "nvidia-docker | 2016/06/06 22:49:17 Error: Could not load UVM kernel module",  # NVIDIA/nvidia-docker#106
    "modprobe: FATAL: Module nvidia_uvm not found in directory /lib/modules/4.4.0-83-generic",  # nvidia-docker#481
])
def test_real_messages_of_a_missing_nvidia_uvm(text):
    assert ids(text) == ["cuda-uvm-missing"]


def test_an_unknown_error_in_other_words_is_not_cuda_s():
    for text in ("Failed to initialize NVML: Unknown Error", "nvidia-container-cli: initialization error: unknown"):
        assert "cuda-unknown-error" not in ids(text), text


def test_cli_names_the_missing_module_for_the_smoke_text(monkeypatch):
    out = io.StringIO()
    text = SMOKE_999 + " (/dev/nvidia-uvm is missing in the pod: the nvidia_uvm kernel module is not loaded)"
    assert main(["diagnose", text], stdout=out, stderr=io.StringIO()) == 0
    assert out.getvalue().startswith("[cuda-uvm-missing] /dev/nvidia-uvm is missing")
    out = io.StringIO()
    assert main(["diagnose", SMOKE_999], stdout=out, stderr=io.StringIO()) == 0  # was: nothing recognised, exit 1
    assert out.getvalue().startswith("[cuda-unknown-error] CUDA error 999")


# --- pods -----------------------------------------------------------------------------------


def test_diagnose_pod_reads_statuses_conditions_events_and_logs():
    pod = {
        "metadata": {"name": "p"}, "spec": {},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                            "message": "0/1 nodes are available: 1 cannot allocate all claims."}],
            "initContainerStatuses": [{"name": "init", "state": {"waiting": {
                "reason": "CreateContainerError",
                "message": "failed to create containerd task: ... stderr: nvidia-container-cli: requirement error: "
                           "unsatisfied condition: cuda>=12.9, please update your driver"}}}],
            "containerStatuses": [{"name": "main", "state": {"waiting": {"reason": "PodInitializing"}},
                                   "lastState": {"terminated": {"reason": "Error",
                                                                "message": "No devices were found"}}}],
        },
    }
    events = [{"reason": "Failed", "message": "Failed to pull image \"nvidia/cuda:12.9.0-base\": not found"},
              {"reason": "FailedCreatePodSandBox", "note": "no runtime for \"nvidia\" is configured"}]
    found = diagnose_pod(pod, events, logs="RuntimeError: CUDA error: no CUDA-capable device is detected\n")
    assert [d.category for d in found] == [
        "requirement-unsatisfied", "cuda-no-device", "nvidia-smi-no-devices", "runtime-handler-missing",
        "cuda-image-pull", "dra-cannot-allocate"]
    assert [d.category for d in diagnose_pod(pod["status"])] == [d.category for d in diagnose_pod(pod)]
    assert "CreateContainerError" in pod_texts(pod["status"])
    assert diagnose_pod({"status": {"phase": "Running"}, "metadata": {}}, [], "hello") == []


def test_diagnose_pod_reads_the_admission_rejection_in_the_pod_status():
    status = {"phase": "Failed", "reason": "UnexpectedAdmissionError",
              "message": "Pod was rejected: Allocate failed due to requested number of devices unavailable for "
                         "nvidia.com/gpu. Requested: 2, Available: 1, which is unexpected"}
    (d,) = diagnose_pod(status)
    assert d.category == "admission-devices-unavailable" and d.facts["requested"] == "2"


# --- the command ----------------------------------------------------------------------------


def run_cli(argv, stdin_text=None, monkeypatch=None):
    out, err = io.StringIO(), io.StringIO()
    if monkeypatch is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin_text or ""))
    code = main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_cli_argument_prints_title_line_meaning_and_fix(monkeypatch):
    text = (FIXTURES / "docker-legacy-mode-cuda12.8.txt").read_text(encoding="utf-8")
    code, out, err = run_cli(["diagnose", text], monkeypatch=monkeypatch)
    assert code == 0 and err == ""
    assert out.startswith("[requirement-unsatisfied] ")
    assert "matched: nvidia-container-cli: requirement error" in out
    assert "meaning: " in out and "fix: " in out and "required_cuda=12.8" in out


def test_cli_reads_stdin_like_a_pipe_from_kubectl(monkeypatch):
    describe = "Events:\n  Warning  FailedScheduling  default-scheduler  0/1 nodes are available: 1 Insufficient " \
               "nvidia.com/gpu.\n"
    code, out, _ = run_cli(["diagnose"], describe, monkeypatch)
    assert code == 0 and out.startswith("[insufficient-gpu]")


def test_cli_json_shape(monkeypatch):
    code, out, _ = run_cli(["diagnose", "--json"], "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus",
                           monkeypatch)
    doc = json.loads(out)
    assert code == 0 and doc["recognised"] is True
    (d,) = doc["diagnoses"]
    assert set(d) == {"category", "title", "excerpt", "facts", "explanation", "remediation", "checks"}
    assert d["category"] == "xid-fallen-off-bus" and d["facts"] == {"pci": "0000:44:00", "xid": "79"}


def test_cli_nothing_recognised_exits_1(monkeypatch):
    code, out, _ = run_cli(["diagnose", "all good"], monkeypatch=monkeypatch)
    assert code == 1 and "no known GPU failure" in out
    code, out, _ = run_cli(["diagnose", "--json", "all good"], monkeypatch=monkeypatch)
    assert code == 1 and json.loads(out) == {"recognised": False, "diagnoses": [], "closest": [],
                                             "outputs": []}


@pytest.mark.parametrize("argv,stdin_text", [(["diagnose"], ""), (["diagnose"], "  \n"), (["diagnose", "   "], None),
                                             (["diagnose", "--bogus", "x"], None)])
def test_cli_bad_input_exits_2_with_one_line(monkeypatch, argv, stdin_text):
    code, out, err = run_cli(argv, stdin_text, monkeypatch)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("gpuconf")


def test_cli_without_text_on_a_terminal_exits_2(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Tty(""))
    out, err = io.StringIO(), io.StringIO()
    assert main(["diagnose"], stdout=out, stderr=err) == 2
    assert "pipe" in err.getvalue() and err.getvalue().count("\n") == 1
