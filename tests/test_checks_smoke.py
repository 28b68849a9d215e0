"""The smoke check's decision, on emulated probe output."""

from __future__ import annotations

import json

from gpuconf.checks.smoke import evaluate_vector_add
from gpuconf.compat.versions import parse_cuda
from gpuconf.probes.cuda import parse_cuda_probe
from gpuconf.sim.emulate import Visible, cuda_probe_run
from gpuconf.sim.profile import expand, load_profile, with_faults
from gpuconf.verdict import Outcome


def probe(faults=None, gpus=8, break_gpu: int | None = None):
    p = load_profile("healthy-h100")
    n = expand(with_faults(p, faults) if faults else p).node("h100-0")
    code, out = cuda_probe_run(n, visible=[Visible(g) for g in n.gpus[:gpus]], image_cuda=parse_cuda("13.0.2"),
                               env={}, compat=True, started_at="2026-11-29T00:00:00.000Z", hostname=n.name)
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


def test_cuda_that_cannot_start_fails_with_the_error():
    verdict = evaluate_vector_add("h100-0", probe([{"id": "uvm-missing", "pool": "h100", "node": 0}]), requested=8)
    assert verdict.outcome is Outcome.FAIL and "cudaErrorUnknown (999)" in verdict.summary


def test_a_driver_library_mismatch_is_remedied_by_a_reboot_not_a_gpu_reset():
    fault = {"id": "library-mismatch", "pool": "h100", "node": 0}
    verdict = evaluate_vector_add("h100-0", probe([fault]), requested=8)
    assert verdict.outcome is Outcome.FAIL and "(803)" in verdict.summary
    assert "reboot it" in verdict.remediation and "reset or replace" not in verdict.remediation
    other = evaluate_vector_add("h100-0", probe([{"id": "uvm-missing", "pool": "h100", "node": 0}]), requested=8)
    assert "reset or replace the GPU" in other.remediation  # the check's own remedy for other causes


def test_fewer_gpus_than_requested_fail():
    verdict = evaluate_vector_add("h100-0", probe([{"id": "gpu-lost", "pool": "h100", "node": 0, "gpu": 1}]),
                                  requested=8)
    assert verdict.outcome is Outcome.FAIL and "asked for 8 GPUs and CUDA sees 7" in verdict.summary


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


def test_mig_instances_handed_out_as_gpus_are_not_lost_gpus():
    """A plugin serving MIG instances as nvidia.com/gpu on a node GFD labels otherwise (strategies that
    disagree): CUDA enumerates one MIG device per process, and smoke says so instead of blaming the bus."""
    n = expand(load_profile("h100-mig-single")).node("h100-mig-0")
    visible = [Visible(g, i) for g in n.gpus for i in g.mig]
    code, out = cuda_probe_run(n, visible=visible, image_cuda=parse_cuda("13.0"), env={}, compat=False,
                               started_at="2026-12-01T00:00:00.000Z", hostname=n.name)
    verdict = evaluate_vector_add(n.name, parse_cuda_probe(out, exit_code=code), requested=len(visible))
    assert verdict.outcome is Outcome.NOT_TESTED
    assert verdict.summary.startswith(f"the pod asked for {len(visible)} GPUs and was given MIG instances (")
    assert verdict.summary.endswith("one CUDA process enumerates one MIG device, so a whole-node probe cannot "
                                    "exercise them; the mig suite judges this node")
