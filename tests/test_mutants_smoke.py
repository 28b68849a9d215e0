"""Every branch of smoke.vector-add-every-gpu (gpuconf/checks/smoke.py) gives the verdict recorded in
tests/data/verdicts/smoke.json, whole: nothing to request, CUDA that cannot start (each cause with its
remedy), a count off either way, time-slicing, failing kernels, MIG instances judged, deferred to the
mig suite or failed where the mig suite skips the node, and the device-node owner's precedence."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest
from test_checks_smoke import NO_MIG_LABELS, UVM_MISSING, mig_probe, probe, run_probe
from verdict_record import check_recording

from gpuconf.checks.mig import mig_skip_reason
from gpuconf.checks.smoke import evaluate_vector_add, judged_after_device_nodes
from gpuconf.probes.cuda import CudaProbeReport, parse_cuda_probe
from gpuconf.verdict import passed

NODE = "h100-0"


def edited(edit: Callable[[dict[str, Any]], None], faults: list[dict[str, Any]] | None = None,
           gpus: int = 8) -> CudaProbeReport:
    code, out = run_probe(faults, gpus)
    doc = json.loads(out)
    edit(doc)
    return parse_cuda_probe(json.dumps(doc), exit_code=doc["exit_code"])


def cuda_error(code: int, name: str, message: str) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        doc["init"] = {"call": "cudaFree(0)", "code": code, "name": name, "message": message, "ms": 0.05,
                       "timed_out": False}
        doc["devices"] = []
        doc.update(exit_code=3, exit_reason=f"CUDA init failed: cudaFree(0) returned {code} {name}")
        doc["device_nodes"]["/dev/nvidia-uvm"] = True
    return edit


def no_kernel_times(doc: dict[str, Any]) -> None:
    for d in doc["devices"]:
        d["vector_add"].pop("kernel_ms", None)


def broken(*indexes: int) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        for i in indexes:
            doc["devices"][i]["vector_add"].update(ok=False, verified=True, mismatches=17)
        doc.update(exit_code=5, exit_reason="vector_add mismatched")
    return edit


def smoke(report: CudaProbeReport, requested: int = 8, **kw: Any) -> Any:
    return evaluate_vector_add(NODE, report, requested=requested, **kw)


def mig_case(instances: int | None, requested: int | None = None, skip: bool = False) -> Any:
    n, visible, report = mig_probe(instances)
    why = mig_skip_reason(n.name, NO_MIG_LABELS, {"nvidia.com/gpu": str(len(visible))}) if skip else None
    return evaluate_vector_add(n.name, report, requested=requested or len(visible), mig_skip=why)


def two_profiles() -> Any:
    """A report of two MIG devices of different profiles (CUDA shows one per process; a report says what it says)."""
    n, visible, report = mig_probe()
    other = dataclasses.replace(report.devices[0], index=1, name="NVIDIA H100 80GB HBM3 MIG 2g.20gb", uuid="MIG-2")
    return evaluate_vector_add(n.name, dataclasses.replace(report, devices=(report.devices[0], other)),
                               requested=len(visible))


def after_nodes(report: CudaProbeReport, *, selected: bool = True, node: str | None = NODE) -> Any:
    verdict = smoke(report)
    if node is None:
        verdict = verdict.__class__(**{**verdict.__dict__, "node": None})
    return judged_after_device_nodes(verdict, report, owner_selected=selected)


CASES: dict[str, Callable[[], Any]] = {
    "nothing to request": lambda: smoke(probe(), requested=0),
    "every GPU passes": lambda: smoke(probe(), note=" (2 GPUs held by other pods were not asked for)"),
    "no kernel times": lambda: smoke(edited(no_kernel_times)),
    "one GPU fails": lambda: smoke(edited(broken(2))),
    "two GPUs fail": lambda: smoke(edited(broken(0, 5))),
    "fewer GPUs": lambda: smoke(probe(gpus=7)),
    "more GPUs": lambda: smoke(probe(gpus=8), requested=6),
    "cuda: no nvidia-uvm": lambda: smoke(probe(UVM_MISSING)),
    "cuda: 999 with nvidia-uvm": lambda: smoke(edited(cuda_error(999, "cudaErrorUnknown", "unknown error"))),
    "cuda: 999, nvidia-uvm unreported": lambda: smoke(dataclasses.replace(  # a report built elsewhere than the probe
        edited(cuda_error(999, "cudaErrorUnknown", "unknown error")), device_nodes={"/dev/nvidiactl": True})),
    "cuda: driver mismatch": lambda: smoke(edited(cuda_error(803, "cudaErrorSystemDriverMismatch",
                                                             "system has unsupported display driver / cuda driver "
                                                             "combination"))),
    "time-slicing: every replica": lambda: smoke(probe(gpus=4), requested=16, replicas=4),
    "time-slicing: labelled count": lambda: smoke(probe(gpus=4), requested=32, replicas=4, physical=4),
    "time-slicing: a GPU missing": lambda: smoke(probe(gpus=3), requested=16, replicas=4),
    "time-slicing: a partial ask": lambda: smoke(probe(gpus=4), requested=6, replicas=4),
    "time-slicing: one replica": lambda: smoke(probe(gpus=4), requested=4, replicas=1, physical=2),
    "mig: one instance asked": lambda: mig_case(1),
    "mig: the mig suite judges": lambda: mig_case(None),
    "mig: the mig suite skips": lambda: mig_case(None, skip=True),
    "mig: count matches although skipped": lambda: mig_case(1, skip=True),
    "mig: two profiles": lambda: two_profiles(),
    "time-slicing: two replicas": lambda: smoke(probe(gpus=4), requested=8, replicas=2),
    "after nodes: blocked": lambda: after_nodes(probe(UVM_MISSING)),
    "after nodes: owner not selected": lambda: after_nodes(probe(UVM_MISSING), selected=False),
    "after nodes: no node": lambda: after_nodes(probe(UVM_MISSING), node=None),
    "after nodes: cuda fine": lambda: judged_after_device_nodes(passed("smoke.vector-add-every-gpu", NODE, "x"),
                                                                probe(), owner_selected=True),
}


@pytest.mark.parametrize("case", CASES)
def test_the_verdict_is_the_recorded_one(case: str) -> None:
    check_recording("smoke", case, CASES[case])


def test_nothing_to_judge_here_is_not_applicable() -> None:
    for case in ("nothing to request", "mig: the mig suite judges"):
        assert CASES[case]().kind == "not-applicable", case
