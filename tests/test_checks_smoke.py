"""The smoke check's decision, on emulated probe output."""

from __future__ import annotations

import json

from gpuconf.checks.mig import mig_skip_reason
from gpuconf.checks.smoke import evaluate_vector_add, judged_after_device_nodes
from gpuconf.compat.versions import parse_cuda
from gpuconf.probes.cuda import parse_cuda_probe
from gpuconf.sim.emulate import Visible, cuda_probe_run
from gpuconf.sim.profile import expand, load_profile, with_faults
from gpuconf.verdict import Outcome


def run_probe(faults=None, gpus=8) -> tuple[int, str]:
    p = load_profile("healthy-h100")
    n = expand(with_faults(p, faults) if faults else p).node("h100-0")
    return cuda_probe_run(n, visible=[Visible(g) for g in n.gpus[:gpus]], image_cuda=parse_cuda("13.0.2"),
                          env={}, compat=True, started_at="2026-11-29T00:00:00.000Z", hostname=n.name)


def probe(faults=None, gpus=8, break_gpu: int | None = None):
    code, out = run_probe(faults, gpus)
    if break_gpu is not None:  # a device whose kernel result did not verify (what a bad GPU prints)
        doc = json.loads(out)
        dev = doc["devices"][break_gpu]["vector_add"]
        dev.update(ok=False, verified=True, mismatches=17)
        doc.update(exit_code=5, exit_reason="vector_add mismatched on device 2")
        code, out = 5, json.dumps(doc)
    return parse_cuda_probe(out, exit_code=code)


def test_every_gpu_passing_is_a_pass_with_per_gpu_evidence():
    verdict = evaluate_vector_add("h100-0", probe(), requested=8)
    assert verdict.outcome is Outcome.PASS and len(verdict.evidence) == 8


def test_a_gpu_whose_kernel_mismatches_fails_naming_it():
    verdict = evaluate_vector_add("h100-0", probe(break_gpu=2), requested=8)
    assert verdict.outcome is Outcome.FAIL and "1 of 8 GPUs failed" in verdict.summary and "GPU 2" in verdict.summary


UVM_MISSING = [{"id": "uvm-missing", "pool": "h100", "node": 0}]


def test_cuda_that_cannot_start_fails_with_the_error():
    verdict = evaluate_vector_add("h100-0", probe(UVM_MISSING), requested=8)
    assert verdict.outcome is Outcome.FAIL and "cudaErrorUnknown (999)" in verdict.summary


def test_cuda_failing_without_nvidia_uvm_names_the_module_and_its_fix_not_the_gpu():
    verdict = evaluate_vector_add("h100-0", probe(UVM_MISSING), requested=8)
    assert verdict.summary == ("CUDA could not start in the probe pod: cudaErrorUnknown (999): unknown error "
                               "(/dev/nvidia-uvm is missing in the pod: the nvidia_uvm kernel module is not loaded)")
    remedy = verdict.remediation
    assert remedy.startswith("CUDA cannot start without /dev/nvidia-uvm, and the probe pod on h100-0 had none: the "
                             "nvidia_uvm kernel module is not loaded on h100-0")
    assert "modprobe nvidia-uvm" in remedy and "nvidia-modprobe -u -c=0" in remedy and "GPU Operator" in remedy
    assert "reset or replace the GPU" not in remedy and remedy.endswith("needs no reset or replacement.")
    assert "remediation: CUDA cannot start without /dev/nvidia-uvm" in verdict.message()


def test_an_unexplained_cuda_init_failure_keeps_the_check_s_own_remedy():
    doc = json.loads(run_probe(UVM_MISSING)[1])
    doc["device_nodes"]["/dev/nvidia-uvm"] = True  # the node is there: 999 for another reason
    verdict = evaluate_vector_add("h100-0", parse_cuda_probe(json.dumps(doc), exit_code=3), requested=8)
    assert verdict.outcome is Outcome.FAIL and "nvidia_uvm" not in verdict.summary
    assert "reset or replace the GPU" in verdict.remediation  # the check's own remedy (checks.yaml)


def test_without_nvidia_uvm_smoke_is_blocked_by_the_device_node_check_when_it_runs():
    report = probe(UVM_MISSING)
    verdict = evaluate_vector_add("h100-0", report, requested=8)
    blocked = judged_after_device_nodes(verdict, report, owner_selected=True)
    assert blocked.outcome is Outcome.NOT_TESTED
    assert blocked.summary == ("blocked by runtime.cuda-device-nodes-present: a GPU pod on this node lacks "
                               "/dev/nvidia-uvm (nvidia_uvm is not loaded: nvidia-smi works but CUDA fails)")
    # the owner not part of the run (pytest -m smoke): smoke fails, with the module's remedy
    assert judged_after_device_nodes(verdict, report, owner_selected=False) == verdict
    # a healthy node: smoke's pass is its own
    healthy = probe()
    passing = evaluate_vector_add("h100-0", healthy, requested=8)
    assert judged_after_device_nodes(passing, healthy, owner_selected=True) == passing


def test_a_cuda_failure_with_the_device_nodes_present_is_smoke_s_own():
    fault = {"id": "library-mismatch", "pool": "h100", "node": 0}
    report = probe([fault])
    verdict = evaluate_vector_add("h100-0", report, requested=8)
    assert judged_after_device_nodes(verdict, report, owner_selected=True) == verdict


def test_a_driver_library_mismatch_is_remedied_by_a_reboot_not_a_gpu_reset():
    fault = {"id": "library-mismatch", "pool": "h100", "node": 0}
    verdict = evaluate_vector_add("h100-0", probe([fault]), requested=8)
    assert verdict.outcome is Outcome.FAIL and "(803)" in verdict.summary
    assert "reboot it" in verdict.remediation and "reset or replace" not in verdict.remediation


def test_fewer_gpus_than_requested_fail():
    verdict = evaluate_vector_add("h100-0", probe([{"id": "gpu-lost", "pool": "h100", "node": 0, "gpu": 1}]),
                                  requested=8)
    assert verdict.outcome is Outcome.FAIL and "asked for 8 GPUs and CUDA sees 7" in verdict.summary


def test_more_gpus_than_requested_fail():
    """A pod seeing GPUs it did not ask for is as wrong as one missing some (isolation's finding too)."""
    verdict = evaluate_vector_add("h100-0", probe(gpus=8), requested=4)
    assert verdict.outcome is Outcome.FAIL
    assert verdict.summary == "the pod asked for 4 GPUs and CUDA sees 8"
    assert (verdict.expected, verdict.observed, len(verdict.evidence)) == ("4 GPUs", "8 GPUs", 8)


def test_time_slicing_replicas_show_each_physical_gpu_once():
    verdict = evaluate_vector_add("t4-0", probe(gpus=4), requested=16, replicas=4)
    assert verdict.outcome is Outcome.PASS and verdict.summary == "vector-add verified on all 4 GPUs"


def test_time_slicing_with_a_gpu_missing_fails_counting_physical_gpus():
    verdict = evaluate_vector_add("t4-0", probe(gpus=3), requested=16, replicas=4)
    assert verdict.outcome is Outcome.FAIL
    assert "asked for 16 GPUs (4 GPUs shared 4 ways) and CUDA sees 3" in verdict.summary


def test_a_stale_replicas_label_does_not_change_what_smoke_expects_when_gpu_count_is_labelled():
    # 32 replicas advertised (8 per GPU) while the label still says 4: the 4 physical GPUs all ran.
    verdict = evaluate_vector_add("t4-0", probe(gpus=4), requested=32, replicas=4, physical=4)
    assert verdict.outcome is Outcome.PASS and verdict.summary == "vector-add verified on all 4 GPUs"


def mig_probe(instances: int | None = None):
    """The whole-node probe on h100-mig-0 given its MIG instances as nvidia.com/gpu (the first ``instances``)."""
    n = expand(load_profile("h100-mig-single")).node("h100-mig-0")
    visible = [Visible(g, i) for g in n.gpus for i in g.mig][:instances]
    code, out = cuda_probe_run(n, visible=visible, image_cuda=parse_cuda("13.0"), env={}, compat=False,
                               started_at="2026-12-01T00:00:00.000Z", hostname=n.name)
    return n, visible, parse_cuda_probe(out, exit_code=code)


#: GFD's labels on a MIG node (single) and on one it labels as whole GPUs (strategy none).
MIG_LABELS = {"nvidia.com/mig.strategy": "single", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb",
              "nvidia.com/gpu.count": "7", "nvidia.com/mig.capable": "true"}
NO_MIG_LABELS = {"nvidia.com/mig.strategy": "none", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                 "nvidia.com/mig.capable": "true"}


def test_mig_instances_handed_out_as_gpus_are_not_lost_gpus():
    """A plugin serving MIG instances as nvidia.com/gpu on a node GFD labels otherwise (strategies that
    disagree): CUDA enumerates one MIG device per process, and smoke says so instead of blaming the bus."""
    n, visible, report = mig_probe()
    assert mig_skip_reason(n.name, MIG_LABELS, {"nvidia.com/gpu": "7"}) is None  # the pointer below is true
    verdict = evaluate_vector_add(n.name, report, requested=len(visible))
    assert verdict.outcome is Outcome.NOT_TESTED
    assert verdict.summary.startswith(f"the pod asked for {len(visible)} GPUs and was given MIG instances (")
    assert verdict.summary.endswith("one CUDA process enumerates one MIG device, so a whole-node probe cannot "
                                    "exercise them; the mig suite judges this node")


def test_a_mig_device_given_for_a_one_gpu_ask_is_judged():
    """One MIG instance for one nvidia.com/gpu: CUDA enumerates it, so smoke runs the kernel on it and
    judges it, as on a whole GPU."""
    n, _, report = mig_probe(1)
    verdict = evaluate_vector_add(n.name, report, requested=1)
    assert verdict.outcome is Outcome.PASS and verdict.summary == "vector-add verified on all 1 GPUs"
    (line,) = verdict.evidence
    assert line.startswith("GPU 0 MIG-") and ": ok, " in line


def test_mig_instances_on_a_node_the_mig_suite_skips_fail_here():
    """GFD labels whole GPUs (strategy none) while the plugin hands out MIG instances: the mig suite
    skips the node (no MIG shown), so "the mig suite judges this node" would be false: smoke fails it."""
    n, visible, report = mig_probe()
    skip = mig_skip_reason(n.name, NO_MIG_LABELS, {"nvidia.com/gpu": str(len(visible))})
    assert skip == "h100-mig-0 does not use MIG (nvidia.com/mig.strategy=none, nvidia.com/mig.capable=true)"
    verdict = evaluate_vector_add(n.name, report, requested=len(visible), mig_skip=skip)
    assert verdict.outcome is Outcome.FAIL
    assert verdict.summary.startswith(f"the pod asked for {len(visible)} GPUs and was given MIG instances (")
    assert verdict.summary.endswith(f"), but nothing says h100-mig-0 has MIG and the mig suite skips it ({skip}): the "
                                    "device plugin hands out MIG instances as nvidia.com/gpu while GFD labels none, so "
                                    "no check exercises them and workloads asking for a GPU get a MIG slice")
    assert verdict.expected == f"{len(visible)} whole GPUs, or MIG instances the node's labels show"
    assert verdict.observed == "1 MIG device(s) enumerated" and verdict.evidence == (f"mig suite: {skip}",)
    assert verdict.remedy is not None and verdict.remedy.startswith("Run GFD and the device plugin with the same MIG")
