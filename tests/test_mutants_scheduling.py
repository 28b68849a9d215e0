"""Every branch of the scheduling checks (gpuconf/checks/scheduling.py) gives the verdict recorded in
tests/data/verdicts/scheduling.json, whole: the over-ask's answers, the RuntimeClass found or not, and
each reading of a pod without runtimeClassName (a GPU seen, nothing injected, device nodes alone, a
driver that reads no GPU, a driver that cannot read at all) against the RuntimeClass path. The words
are what a reader acts on; the recording pins them where mutation testing found them unpinned."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from test_checks_scheduling import REAL, TAINTED, outcome
from test_default_runtime import NODE, device_nodes_only, driver_but_no_device, driver_but_unknown_error, probe
from verdict_record import check_recording

from gpuconf.checks.isolation import Sighting
from gpuconf.checks.scheduling import evaluate_default_runtime, evaluate_over_ask, evaluate_runtime_class
from gpuconf.cluster.outcomes import PodEvent

DEFAULT = "runtime-default-h100-0"
WHOLE = "inventory-h100-0"


def edits(*changes: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], int]:
    """One probe-document edit made of several; the exit code is the last one's, or 3."""
    def edit(doc: dict[str, Any]) -> int:
        code = 3
        for change in changes:
            code = change(doc) or code
        return code
    return edit


def nvml(reason: str) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        doc["nvml"] = {"available": False, "reason": reason}
    return edit


def cuda_fails_nvml_lists_none(doc: dict[str, Any]) -> int:
    """CUDA cannot start (999) while NVML initialises and lists no GPU."""
    kept = dict(doc["nvml"])
    driver_but_unknown_error(doc)
    doc["nvml"] = {**kept, "gpus": []}
    return 3


def two_nodes(doc: dict[str, Any]) -> None:
    doc["device_nodes"]["gpus"] = ["/dev/nvidia0", "/dev/nvidia1"]


def no_uuids(doc: dict[str, Any]) -> None:
    for d in doc["devices"]:
        d["uuid"] = None
    for g in doc["nvml"].get("gpus", []):
        g["uuid"] = None


def no_cuda_devices(doc: dict[str, Any]) -> None:
    doc["devices"] = []


def libcuda(reason: str) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        doc["libcuda"] = {"available": False, "reason": reason}
    return edit


NO_LIB = "libnvidia-ml.so.1: cannot open shared object file: No such file or directory"
STOPPED = "not read: the probe stopped before CUDA init returned"


def event(reason: str, message: str) -> PodEvent:
    return PodEvent(type="Warning", reason=reason, message=message, count=1, reporting_component="default-scheduler",
                    first_timestamp=None, last_timestamp=None)


def over_ask(node: str | None, *messages: str, other: str | None = None, budget: float = 12.4) -> Any:
    o = outcome(node, *messages)
    if other is not None:
        o = o.__class__(**{**o.__dict__, "events": (event("Preempting", other), *o.events)})
    return evaluate_over_ask(o, requested=9, budget_s=budget)


def runtime(default: Sighting, with_class: Sighting | None = None, runtime_class: str | None = "nvidia",
            given: str | None = None) -> Any:
    return evaluate_default_runtime(NODE, default, with_class, runtime_class, given=given)


CASES: dict[str, Callable[[], Any]] = {
    "over-ask: scheduled": lambda: over_ask("h100-0", TAINTED, REAL, REAL, REAL),
    "over-ask: insufficient": lambda: over_ask(None, TAINTED, REAL, REAL, REAL),
    "over-ask: no event": lambda: over_ask(None),
    "over-ask: another reason": lambda: over_ask(None, TAINTED, TAINTED),
    "over-ask: insufficient in another event's reason": lambda: over_ask(None, other=REAL, budget=30.6),
    "runtime class: found": lambda: evaluate_runtime_class([("kata", "kata-qemu"), ("gpu", "nvidia")]),
    "runtime class: none with the handler": lambda: evaluate_runtime_class([("runc", "runc"), ("nvidia", "")]),
    "runtime class: none at all": lambda: evaluate_runtime_class([]),
    "default: no output": lambda: runtime(Sighting(f"pod {DEFAULT}", None, "ContainerCreating for 300 s")),
    "default: no output, nothing said": lambda: runtime(Sighting(f"pod {DEFAULT}", None, None)),
    "default: sees it": lambda: runtime(probe(DEFAULT, 1), probe(WHOLE, 8)),
    "default: sees it through DRA": lambda: runtime(probe(DEFAULT, 1), given="1 GPU through a DRA claim on x"),
    "default: sees it without uuids": lambda: runtime(probe(DEFAULT, 1, edits(no_uuids, lambda d: 0))),
    "default: NVML alone sees it": lambda: runtime(probe(DEFAULT, 1, edits(
        no_cuda_devices, lambda d: d["init"].update(code=999, name="cudaErrorUnknown", message="unknown error")))),
    "default: nothing injected, no class": lambda: runtime(probe(DEFAULT, 0), runtime_class=None),
    "default: nothing injected, class not probed": lambda: runtime(probe(DEFAULT, 0)),
    "default: nothing injected, class probe failed": lambda: runtime(
        probe(DEFAULT, 0), Sighting(f"pod {WHOLE}", None, "Pending for 300 s")),
    "default: nothing injected, class probe said nothing": lambda: runtime(
        probe(DEFAULT, 0), Sighting(f"pod {WHOLE}", None, None)),
    "default: nothing injected either way": lambda: runtime(probe(DEFAULT, 0), probe(WHOLE, 0)),
    "default: only the class injects": lambda: runtime(probe(DEFAULT, 0), probe(WHOLE, 8), given="1 GPU (x)"),
    "default: device nodes only, class injects": lambda: runtime(probe(DEFAULT, 0, device_nodes_only),
                                                                 probe(WHOLE, 8)),
    "default: device nodes only, no class": lambda: runtime(probe(DEFAULT, 0, device_nodes_only), None, None),
    "default: device nodes only either way": lambda: runtime(probe(DEFAULT, 0, device_nodes_only),
                                                             probe(WHOLE, 0, device_nodes_only)),
    "default: driver, unknown error": lambda: runtime(probe(DEFAULT, 1, driver_but_unknown_error), probe(WHOLE, 8)),
    "default: libcuda unread, NVML absent": lambda: runtime(probe(DEFAULT, 1, edits(
        driver_but_unknown_error, libcuda(STOPPED), nvml(NO_LIB))), None, None),
    "default: no libcuda, NVML failing": lambda: runtime(probe(DEFAULT, 0, edits(
        nvml("nvmlInit_v2: Driver Not Loaded"))), probe(WHOLE, 8)),
    "default: driver, no device": lambda: runtime(probe(DEFAULT, 1, driver_but_no_device), probe(WHOLE, 8)),
    "default: driver, NVML lists none": lambda: runtime(probe(DEFAULT, 1, cuda_fails_nvml_lists_none), None, None),
    "default: NVML alone, lists none": lambda: runtime(probe(DEFAULT, 1, edits(
        cuda_fails_nvml_lists_none, libcuda("dlopen: libcuda.so.1: cannot open shared object file"))),
        probe(WHOLE, 8), given="1 GPU (y)"),
    "default: two device nodes only": lambda: runtime(probe(DEFAULT, 0, edits(device_nodes_only, two_nodes)), None,
                                                      None),
    "default: driver, no device, two nodes": lambda: runtime(probe(DEFAULT, 1, edits(driver_but_no_device, two_nodes)),
                                                             None, None),
}


@pytest.mark.parametrize("case", CASES)
def test_the_verdict_is_the_recorded_one(case: str) -> None:
    check_recording("scheduling", case, CASES[case])


def test_a_runtime_class_path_that_could_not_be_compared_is_could_not_run() -> None:
    for case in ("default: nothing injected, class not probed", "default: nothing injected, class probe failed",
                 "default: driver, unknown error"):
        assert CASES[case]().kind == "could-not-run", case
