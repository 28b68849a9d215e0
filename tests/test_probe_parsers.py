"""The cuda-probe parser: real output accepted, anything else rejected with what was wrong."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuconf.probes import ProbeParseError
from gpuconf.probes.cuda import EXIT_CODES, parse_cuda_probe

FIXTURES = Path(__file__).parent / "fixtures" / "probes"
NO_DRIVER = (FIXTURES / "cuda-probe-no-driver.json").read_text()


def healthy_two_gpu_document() -> str:
    """The real no-driver document, edited field by field into a healthy 2 x H100 run."""
    doc = json.loads(NO_DRIVER)
    ok = {"code": 0, "name": "cudaSuccess", "message": "no error"}
    doc.update(exit_code=0, exit_reason="ok")
    doc["driver"].update(value=12080, version="12.8")
    doc["init"].update(ok)
    doc["device_count"] = {"value": 2, "result": {"call": "cudaGetDeviceCount", **ok}}
    doc["libcuda"] = {"available": True, "path": "/usr/lib/x86_64-linux-gnu/libcuda.so.570.133.20",
                      "version": "570.133.20", "compat": False}
    doc["devices"] = [{
        "index": i, "name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-0000000{i}-1111-2222-3333-444444444444",
        "pci_bus_id": f"0000:{0x18 + i:02x}:00.0", "total_memory_bytes": 85520809984, "compute_capability": "9.0",
        "mig": False, "mig_source": "nvml", "multiprocessors": 132,
        "vector_add": {"ok": True, "verified": True, "elements": 1048576, "kernel_ms": 0.05, "mismatches": 0,
                       "result": {"call": "vector_add", **ok}},
        "ptx_jit": {"ok": True, "verified": True, "ptx_target": "compute_75", "result": {"call": "ptx_jit", **ok}},
        "properties": {"call": "cudaGetDeviceProperties", **ok},
    } for i in range(2)]
    absent = {"available": False, "reason": "NVML_ERROR_NOT_SUPPORTED"}
    doc["nvml"] = {"available": True, "library": "libnvidia-ml.so.1", "driver_version": "570.133.20",
                   "cuda_driver_version": 12080, "gpus": [{
                       "index": i, "uuid": f"GPU-0000000{i}-1111-2222-3333-444444444444",
                       "name": "NVIDIA H100 80GB HBM3", "brand": {"enum": 14, "name": "Nvidia"},
                       "persistence_mode": True, "mig_mode": {"current": False, "pending": False},
                       "ecc": {"enabled": True, "volatile": {"corrected": 0, "uncorrected": 0},
                               "aggregate": {"corrected": 3, "uncorrected": absent}},
                       "retired_pages": absent,
                       "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False},
                   } for i in range(2)]}
    return json.dumps(doc)


def test_the_real_no_driver_run_parses_into_the_facts_a_check_needs():
    report = parse_cuda_probe(NO_DRIVER, exit_code=3)
    assert report.exit_code == 3 and EXIT_CODES[3].startswith("CUDA init failed")
    assert (report.init.code, report.init.name) == (35, "cudaErrorInsufficientDriver")
    assert report.init.message == "CUDA driver version is insufficient for CUDA runtime version"
    assert not report.init.ok
    assert (report.runtime_cuda, report.driver_cuda, report.device_count, report.devices) == ("13.0", None, 0, ())
    assert report.libcuda_path is None and "libcuda" in report.libcuda_absent_reason
    assert report.nvml_driver_version is None and "libnvidia-ml" in report.nvml_absent_reason


def test_a_healthy_two_gpu_document_built_from_the_real_one_parses_every_device_and_nvml_fact():
    report = parse_cuda_probe(healthy_two_gpu_document(), exit_code=0)
    assert [d.uuid for d in report.devices] == [g.uuid for g in report.nvml_gpus]
    assert all(d.vector_add_ok and d.ptx_jit_ok and d.compute_capability == "9.0" for d in report.devices)
    gpu = report.nvml_gpus[0]
    assert (gpu.brand, gpu.persistence_mode, gpu.mig_enabled) == ("Nvidia", True, False)
    assert (gpu.ecc_volatile_uncorrected, gpu.ecc_aggregate_uncorrected) == (0, None)  # None: absent, not 0
    assert (gpu.retired_pages_pending, gpu.remapped_rows_pending, gpu.remapped_rows_failure) == (None, False, False)
    assert report.libcuda_compat is False and report.libcuda_version == "570.133.20"


def edited(change) -> str:
    doc = json.loads(NO_DRIVER)
    change(doc)
    return json.dumps(doc)


@pytest.mark.parametrize("text,message", [
    ("", "no output"),
    ("   \n", "no output"),
    ("runtime 13.0  driver-supports 12.8\ncudaFree(0): CUDA driver version is insufficient", "output starts with"),
    ("[1, 2]", "output starts with"),
    (NO_DRIVER[: len(NO_DRIVER) // 2], "ends before the JSON document is complete"),
    (NO_DRIVER.rstrip()[:-1], "ends before the JSON document is complete"),
    (NO_DRIVER + NO_DRIVER, "unexpected text after the JSON document"),
    (NO_DRIVER + "\nSegmentation fault", "unexpected text after the JSON document"),
    ('{"schema": "gpuconf.cuda-probe/v1", "exit_code": 3,, }', "garbled JSON at line 1"),
    ('{"schema": "gpuconf.nccl-probe/v1"}', "expected a gpuconf.cuda-probe/v1 document, got schema"),
    ('{"hello": 1}', "got schema None"),
    (edited(lambda d: d.update(exit_code=9)), "does not match gpuconf.cuda-probe/v1 at exit_code"),
    (edited(lambda d: d.pop("devices")), "'devices' is a required property"),
    (edited(lambda d: d["init"].pop("code")), "at init"),
    (edited(lambda d: d.update(surprise=True)), "Additional properties are not allowed"),
], ids=["empty", "blank", "the seed probe's text", "a JSON list", "cut in half", "missing the last brace",
        "two documents", "a crash message after", "garbled", "another probe's schema", "no schema",
        "an undocumented exit code", "a required field missing", "a cuda result without its code",
        "an unknown top-level field"])
def test_malformed_output_is_rejected_with_what_was_wrong(text, message):
    with pytest.raises(ProbeParseError, match=message) as info:
        parse_cuda_probe(text, source="pod cp-node-a")
    assert str(info.value).startswith("pod cp-node-a")


def test_a_process_exit_code_that_disagrees_with_the_document_is_an_error():
    with pytest.raises(ProbeParseError, match="the process exited 0 but its document says 3"):
        parse_cuda_probe(NO_DRIVER, exit_code=0)


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=len(NO_DRIVER.rstrip()) - 1))
def test_no_strict_prefix_of_a_document_is_accepted(cut):
    with pytest.raises(ProbeParseError):
        parse_cuda_probe(NO_DRIVER[:cut])


def test_a_document_read_again_is_validated_once_and_parses_to_an_equal_report(monkeypatch):
    from gpuconf.probes import schema

    text, validated = healthy_two_gpu_document() + "\n", []
    real = schema._fast_validator

    def counting(schema_id):
        validated.append(schema_id)
        return real(schema_id)

    monkeypatch.setattr(schema, "_fast_validator", counting)
    monkeypatch.setattr(schema, "_VALID", type(schema._VALID)())
    first, again = parse_cuda_probe(text, source="pod a"), parse_cuda_probe(text.strip(), source="pod b")
    assert first == again
    assert validated == ["gpuconf.cuda-probe/v1"]
    assert again.raw is not first.raw  # each read gets its own document


def test_an_invalid_document_is_rejected_however_often_it_is_read():
    text = edited(lambda d: d.update(exit_code=9))
    for _ in range(2):
        with pytest.raises(ProbeParseError, match="does not match"):
            parse_cuda_probe(text)


def broken_copies(doc, bad=(None, "x", -1, 2.5, [], {}, True)):
    """``doc`` with each of its values in turn replaced by a wrong one (cycling through ``bad``)."""
    paths = []

    def walk(node, path):
        for key, value in (node.items() if isinstance(node, dict) else enumerate(node)):
            paths.append((*path, key))
            if isinstance(value, dict | list):
                walk(value, (*path, key))

    walk(doc, ())
    for n, path in enumerate(paths):
        copied = copy.deepcopy(doc)
        parent = copied
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = bad[n % len(bad)]
        yield copied


def test_the_schemas_with_their_references_inlined_accept_exactly_the_documents_the_schemas_accept():
    from gpuconf.probes import schema

    for text in (healthy_two_gpu_document(), NO_DRIVER, (FIXTURES / "nccl-probe-no-driver.json").read_text()):
        doc = json.loads(text)
        slow, fast = schema.validator(doc["schema"]), schema._fast_validator(doc["schema"])
        assert "$ref" not in json.dumps({k: v for k, v in fast.schema.items() if k != "$defs"})
        verdicts = [(slow.is_valid(d), fast.is_valid(d)) for d in [doc, *broken_copies(doc)]]
        assert all(a == b for a, b in verdicts) and verdicts[0] == (True, True)
        assert sum(not a for a, _ in verdicts) > len(verdicts) / 2  # the wrong values mostly are wrong


def test_documents_are_not_mutated_by_parsing():
    doc = json.loads(healthy_two_gpu_document())
    before = copy.deepcopy(doc)
    parse_cuda_probe(json.dumps(doc))
    assert doc == before


def test_the_optional_largest_allocation_parses_measured_or_absent_and_defaults_to_none():
    doc = json.loads(healthy_two_gpu_document())
    ok = {"code": 0, "name": "cudaSuccess", "message": "no error"}
    oom = {"call": "cudaMalloc(21474836480)(device 0)", "code": 2, "name": "cudaErrorMemoryAllocation",
           "message": "out of memory"}
    doc["devices"][0]["largest_alloc"] = {
        "ok": True, "largest_ok_bytes": 20 << 30, "smallest_failed_bytes": 21 << 30, "steps": 7,
        "resolution_bytes": 85520809984 // 128, "mem_info": {"free_bytes": 84 << 30, "total_bytes": 85520809984},
        "last_failure": oom, "result": {"call": "largest_alloc(device 0)", **ok}}
    doc["devices"][1]["largest_alloc"] = {"available": False, "reason": "not measured: cudaSetDevice returned 46"}
    doc["env"]["CUDA_MPS_PIPE_DIRECTORY"] = "/mps/nvidia.com/gpu/pipe"
    report = parse_cuda_probe(json.dumps(doc), exit_code=0)
    la = report.devices[0].largest_alloc
    assert la is not None and (la.ok, la.largest_ok_bytes, la.smallest_failed_bytes, la.free_bytes) == (
        True, 20 << 30, 21 << 30, 84 << 30)
    absent = report.devices[1].largest_alloc
    assert absent is not None and absent.absent_reason == "not measured: cudaSetDevice returned 46"
    assert report.env["CUDA_MPS_PIPE_DIRECTORY"] == "/mps/nvidia.com/gpu/pipe"
    assert all(d.largest_alloc is None for d in parse_cuda_probe(healthy_two_gpu_document()).devices)


def test_the_optional_sm_census_parses_measured_or_absent_and_defaults_to_none() -> None:
    doc = json.loads(healthy_two_gpu_document())
    ok = {"code": 0, "name": "cudaSuccess", "message": "no error"}
    doc["devices"][0]["sm_occupancy"] = {
        "ok": True, "blocks": 4224, "threads_per_block": 32, "spin_cycles": 100000, "multiprocessors": 132,
        "distinct_sms": 34, "max_smid": 131, "unrecorded_blocks": 0, "kernel_ms": 0.31,
        "result": {"call": "sm_occupancy(device 0)", **ok}}
    doc["devices"][1]["sm_occupancy"] = {"available": False, "reason": "not measured: cudaSetDevice returned 46"}
    report = parse_cuda_probe(json.dumps(doc), exit_code=0)
    so = report.devices[0].sm_occupancy
    assert so is not None and (so.ok, so.blocks, so.multiprocessors, so.distinct_sms, so.kernel_ms) == (
        True, 4224, 132, 34, 0.31) and so.result is not None and so.result.ok
    absent = report.devices[1].sm_occupancy
    assert absent is not None and absent.absent_reason == "not measured: cudaSetDevice returned 46"
    assert not absent.ok and absent.distinct_sms is None
    assert all(d.sm_occupancy is None for d in parse_cuda_probe(healthy_two_gpu_document()).devices)
    doc["devices"][0]["sm_occupancy"]["smids"] = [0, 1]  # the schema allows no other fields
    with pytest.raises(ProbeParseError):
        parse_cuda_probe(json.dumps(doc))
