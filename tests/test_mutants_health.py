"""The health checks' every branch, pinned where mutation testing (scripts/mutation-score) found it
unpinned: each case is one check called on the simulated healthy-h100 node's whole-node probe with one
thing changed (or on crafted Xid readings and exporter scrapes), and gives the verdict recorded in
tests/data/verdicts/health.json, whole (outcome, summary, expected/observed, evidence, what a PASS
did not judge, a NOT TESTED's kind); the thresholds' and the Xid table's comparisons are asserted
as rules."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest
from test_checks_health import ECC_FAULT, UNREAD, report, run, unread_ecc, xids
from verdict_record import check_recording, whole

from gpuconf.checks import health
from gpuconf.checks.health import Threshold, Xid
from gpuconf.checks.metrics import ExporterScrape, GpuSamples
from gpuconf.probes import ProbeParseError
from gpuconf.probes.cuda import CudaProbeReport

NODE = "h100-0"
NOT_SUPPORTED = {"available": False, "reason": "nvmlDeviceGetRemappedRows: Not Supported"}


def edited(edit: Callable[[dict[str, Any]], None] | None = None,
           faults: list[dict[str, Any]] | None = None) -> CudaProbeReport:
    """The node's probe report, its document edited by ``edit``; an edit the probe's schema refuses
    (a section missing, an absence without its reason) is read unvalidated: the checks read such
    an NVML entry defensively all the same."""
    code, doc = run(faults)
    if edit is not None:
        edit(doc)
    try:
        return report(code, doc)
    except ProbeParseError:
        with mock.patch("gpuconf.probes.cuda.parse_document", lambda text, *a, **kw: json.loads(text)):
            return report(code, doc)


def gpus(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return doc["nvml"]["gpus"]


def ecc_of(*indexes: int, ecc: Any) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        for i in indexes:
            if ecc is None:
                gpus(doc)[i].pop("ecc")
            else:
                gpus(doc)[i]["ecc"] = json.loads(json.dumps(ecc))
    return edit


def every(edit: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """``edit`` applied to every GPU's NVML entry."""
    def apply(doc: dict[str, Any]) -> None:
        for g in gpus(doc):
            edit(g)
    return apply


def unread(*indexes: int) -> Callable[[dict[str, Any]], None]:
    return lambda doc: unread_ecc(doc, *indexes)


def aggregate_unread(*indexes: int, reason: dict[str, Any] = UNREAD) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        for i in indexes:
            gpus(doc)[i]["ecc"]["aggregate"]["uncorrected"] = dict(reason)
    return edit


def volatile_section_absent(doc: dict[str, Any]) -> None:
    """GPU 1's whole volatile section absent with a reason (the first absent section on the path names it)."""
    gpus(doc)[1]["ecc"]["volatile"] = {"available": False, "reason": "nvmlDeviceGetMemoryErrorCounter: Unknown Error"}


def volatile_section_absent_without_reason(doc: dict[str, Any]) -> None:
    gpus(doc)[1]["ecc"]["volatile"] = {"available": False}
    gpus(doc)[1]["ecc"]["aggregate"]["uncorrected"] = {"available": False}


def counters_missing(doc: dict[str, Any]) -> None:
    """GPU 2's uncorrected counters simply missing (no reason on the path): unread, no reason given."""
    del gpus(doc)[2]["ecc"]["volatile"]["uncorrected"]
    del gpus(doc)[2]["ecc"]["aggregate"]


def no_uuid(doc: dict[str, Any]) -> None:
    gpus(doc)[0]["uuid"] = ""


def several(*edits: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def apply(doc: dict[str, Any]) -> None:
        for e in edits:
            e(doc)
    return apply


def no_remap(g: dict[str, Any]) -> None:
    g["remapped_rows"] = dict(NOT_SUPPORTED)


def no_remap_section(g: dict[str, Any]) -> None:
    g.pop("remapped_rows", None)
    g.pop("retired_pages", None)


def retirement(pending: Callable[[int], bool]) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        for g in gpus(doc):
            no_remap(g)
            g["retired_pages"] = {"single_bit": 0, "double_bit": 1, "pending": pending(g["index"])}
    return edit


def nvml_down(doc: dict[str, Any]) -> None:
    doc["nvml"] = {"available": False, "reason": "libnvidia-ml.so.1: cannot open shared object file"}


def nvml_empty(doc: dict[str, Any]) -> None:
    doc["nvml"]["gpus"] = []


def null_counter(doc: dict[str, Any]) -> None:
    """GPU 6's volatile counter null (a shape the schema refuses): unread, and no reason on its path."""
    gpus(doc)[6]["ecc"]["volatile"]["uncorrected"] = None


def two_reasons(doc: dict[str, Any]) -> None:
    gpus(doc)[2]["ecc"]["volatile"]["uncorrected"] = {"available": False, "reason": "volatile: Unknown Error"}
    gpus(doc)[2]["ecc"]["aggregate"]["uncorrected"] = {"available": False, "reason": "aggregate: Timeout"}


def remap_value_null(doc: dict[str, Any]) -> None:
    """Every GPU's remapped_rows section readable but its failure and pending flags null, no page retirement."""
    for g in gpus(doc):
        g["remapped_rows"]["failure"] = None
        g["remapped_rows"]["pending"] = None
        g["retired_pages"] = {"available": False, "reason": "nvmlDeviceGetRetiredPages: Not Supported"}


TWO_ECC = [*ECC_FAULT, {"id": "ecc-uncorrectable", "pool": "h100", "node": 0, "gpu": 5, "count": 1}]
DISABLED = {"enabled": False, "pending": False, "volatile": {"corrected": 0, "uncorrected": 0},
            "aggregate": {"corrected": 0, "uncorrected": 0}}
ABSENT = {"available": False, "reason": "nvmlDeviceGetEccMode: Not Supported"}


def ecc(edit: Callable[[dict[str, Any]], None] | None = None, faults: list[dict[str, Any]] | None = None,
        limits: tuple[Threshold, ...] | None = None) -> Callable[[], Any]:
    return lambda: whole(health.evaluate_no_uncorrectable_ecc(NODE, edited(edit, faults), limits))


def remap(edit: Callable[[dict[str, Any]], None] | None = None, faults: list[dict[str, Any]] | None = None,
          limits: tuple[Threshold, ...] | None = None) -> Callable[[], Any]:
    return lambda: whole(health.evaluate_row_remapping(NODE, edited(edit, faults), limits))


def pending(edit: Callable[[dict[str, Any]], None] | None = None, faults: list[dict[str, Any]] | None = None,
            limits: tuple[Threshold, ...] | None = None) -> Callable[[], Any]:
    return lambda: whole(health.evaluate_no_pending_repair(NODE, edited(edit, faults), limits))


def xid(readings: list[tuple[str, int | None]], unavailable: str | None = None,
        table: dict[int, Xid] | None = None) -> Callable[[], Any]:
    return lambda: whole(health.evaluate_no_critical_xid(NODE, readings, source="dcgm-exporter pod gpu-operator/x",
                                                         unavailable=unavailable, table=table))


#: One threshold of a site's own: the volatile counter only, above 1 (the table's are above 0).
VOLATILE_ABOVE_1 = (Threshold("ecc.volatile.uncorrected", "count", 1, "reset", "fail", health.ECC_CHECK,
                              "site remedy", "site"),)
CUSTOM_XIDS = {48: Xid(48, "DBE (Double Bit Error) ECC Error", "monitor", "site: watch it")}

CASES: dict[str, Callable[[], Any]] = {
    # health.no-uncorrectable-ecc
    "ecc: healthy": ecc(),
    "ecc: one GPU over both thresholds": ecc(faults=ECC_FAULT),
    "ecc: two GPUs over thresholds": ecc(faults=TWO_ECC),
    "ecc: NVML down": ecc(nvml_down),
    "ecc: NVML lists no GPU": ecc(nvml_empty),
    "ecc: ECC not supported anywhere": ecc(ecc_of(*range(8), ecc=ABSENT)),
    "ecc: no ECC section anywhere": ecc(ecc_of(*range(8), ecc=None)),
    "ecc: ECC section absent without a reason": ecc(ecc_of(*range(8), ecc={"available": False})),
    "ecc: ECC disabled on half, not supported on half": ecc(several(ecc_of(0, 1, 2, 3, ecc=DISABLED),
                                                                    ecc_of(4, 5, 6, 7, ecc=ABSENT))),
    "ecc: ECC disabled on two GPUs, the rest pass": ecc(ecc_of(1, 6, ecc=DISABLED)),
    "ecc: ECC off on GPU 0 beside a GPU over threshold": ecc(ecc_of(0, ecc=ABSENT), ECC_FAULT),
    "ecc: every counter unreadable": ecc(unread(*range(8))),
    "ecc: two GPUs' counters unreadable": ecc(unread(2, 5)),
    "ecc: every counter unreadable but one GPU ECC off": ecc(several(unread(*range(1, 8)), ecc_of(0, ecc=DISABLED))),
    "ecc: unreadable counters beside two GPUs over threshold": ecc(unread(0, 1), TWO_ECC),
    "ecc: one counter unread on two GPUs": ecc(aggregate_unread(4, 6)),
    "ecc: one counter Not Supported is no gap": ecc(aggregate_unread(4, reason={
        "available": False, "reason": "nvmlDeviceGetTotalEccErrors: Not Supported"})),
    "ecc: a volatile section absent with its reason": ecc(volatile_section_absent),
    "ecc: sections absent without a reason": ecc(volatile_section_absent_without_reason),
    "ecc: counters missing without a reason": ecc(counters_missing),
    "ecc: a gap and a GPU off by design": ecc(several(aggregate_unread(3), ecc_of(7, ecc=DISABLED))),
    "ecc: a GPU without a UUID": ecc(several(no_uuid, unread(0))),
    "ecc: a site threshold above 1 on a count of 2": ecc(faults=ECC_FAULT, limits=VOLATILE_ABOVE_1),
    "ecc: a site threshold above 1 on a count of 1": ecc(faults=TWO_ECC, limits=VOLATILE_ABOVE_1),
    "ecc: a counter null": ecc(null_counter),
    "ecc: two counters unread for two reasons on a judged GPU": ecc(two_reasons, limits=(
        *health.thresholds(health.ECC_CHECK), *health.thresholds(health.REMAP_FAILED_CHECK))),
    # health.row-remapping-not-failed
    "remap: healthy": remap(),
    "remap: failed on GPU 5": remap(faults=[{"id": "row-remap-failure", "pool": "h100", "node": 0, "gpu": 5}]),
    "remap: Not Supported anywhere": remap(every(no_remap)),
    "remap: no section anywhere": remap(every(no_remap_section)),
    "remap: NVML down": remap(nvml_down),
    "remap: the section readable, its flag null": remap(remap_value_null),
    "remap: a site's limits": remap(faults=[{"id": "row-remap-pending", "pool": "h100", "node": 0, "gpu": 2}],
                                    limits=health.thresholds(health.PENDING_REPAIR_CHECK)),
    # health.no-pending-memory-repair
    "pending: healthy": pending(),
    "pending: a row remap pending on GPU 2": pending(faults=[{"id": "row-remap-pending", "pool": "h100", "node": 0,
                                                              "gpu": 2}]),
    "pending: a page retirement pending on GPUs 1 and 3": pending(retirement(lambda i: i in (1, 3))),
    "pending: page retirement only, none pending": pending(retirement(lambda i: False)),
    "pending: neither readable": pending(every(no_remap_section)),
    "pending: the section readable, its flags null": pending(remap_value_null),
    "pending: a site's limits": pending(faults=[{"id": "row-remap-failure", "pool": "h100", "node": 0, "gpu": 5}],
                                        limits=health.thresholds(health.REMAP_FAILED_CHECK)),
    # health.no-critical-xid
    "xid: none": xid(xids(0, 0, 0)),
    "xid: a reset Xid": xid(xids(0, 119, 0)),
    "xid: two critical Xids, one action": xid(xids(79, 0, 79)),
    "xid: an isolate and a reset Xid": xid(xids(79, 119)),
    "xid: an application Xid is recorded": xid(xids(13, 0)),
    "xid: an unknown Xid": xid(xids(0, 0, 999)),
    "xid: unavailable": xid([], "no DCGM exporter pod on h100-0"),
    "xid: no GPU listed": xid([]),
    "xid: no GPU has the metric": xid(xids(None, None)),
    "xid: one GPU without the metric": xid(xids(None, 0, 0)),
    "xid: one GPU without the metric beside a critical one": xid(xids(None, 79)),
    "xid: a site's table": xid(xids(48, 0), table=CUSTOM_XIDS),
    "xid: two GPUs without the metric": xid(xids(None, 0, None)),
    "xid: two GPUs without the metric beside a critical one": xid(xids(None, 79, None)),
}


@pytest.mark.parametrize("case", CASES)
def test_the_verdict_is_the_recorded_one(case: str) -> None:
    check_recording("health", case, CASES[case])


# --- the thresholds' comparisons ---------------------------------------------------------------------


def limit(kind: str, above: int | None) -> Threshold:
    return Threshold("m", kind, above, "reset", "fail", None, "r", "s")


@pytest.mark.parametrize("kind, above, value, trips", [
    ("count", 0, 1, True), ("count", 0, 0, False), ("count", 2, 2, False), ("count", 2, 3, True),
    ("count", None, 1, True), ("count", None, 0, False), ("count", 1, None, False), ("count", 1, 1, False),
    ("flag", None, True, True), ("flag", None, False, False), ("flag", 1, True, True), ("flag", 1, None, False),
], ids=lambda x: repr(x))
def test_a_count_trips_above_its_limit_and_a_flag_when_set(kind: str, above: int | None, value: Any,
                                                           trips: bool) -> None:
    assert limit(kind, above).trips(value) is trips


def test_a_thresholds_rule_reads_as_the_message_says() -> None:
    assert limit("count", 3).rule == "> 3" and limit("flag", None).rule == "set"


def test_the_xid_table_is_keyed_by_each_rows_own_code() -> None:
    assert all(code == row.code for code, row in health.xid_table().items())


# --- last_xids: each GPU's last Xid from the exporter's scrape -----------------------------------------


def samples(uuid: str, index: int | None, value: float | None) -> GpuSamples:
    return GpuSamples(uuid, index, {}, {} if value is None else {health.XID_METRIC: value})


def test_last_xids_are_ordered_by_index_with_unindexed_gpus_last() -> None:
    scrape = ExporterScrape("n", "ns/exporter", {g.uuid: g for g in (
        samples("GPU-c", None, 0.0), samples("GPU-b", 2, 79.0), samples("GPU-a", None, 13.0),
        samples("GPU-z", 0, None), samples("GPU-y", 1, 0.0))})
    assert health.last_xids(scrape) == ([("GPU 0 GPU-z", None), ("GPU 1 GPU-y", 0), ("GPU 2 GPU-b", 79),
                                         ("GPU ? GPU-a", 13), ("GPU ? GPU-c", 0)], None)


def test_last_xids_of_a_scrape_without_answer_say_why() -> None:
    assert health.last_xids(ExporterScrape("n", None, error="no exporter pod on n")) == ([], "no exporter pod on n")
    assert health.last_xids(ExporterScrape("n", "ns/x", not_tested="pods/proxy is forbidden")) == (
        [], "pods/proxy is forbidden")
    assert health.last_xids(ExporterScrape("n", "ns/x")) == ([], None)
