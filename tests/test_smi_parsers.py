"""nvidia-smi parsers against real outputs (tests/fixtures/smi, sources in its README) and against
truncated, garbled and foreign text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuconf.probes.errors import ProbeParseError
from gpuconf.probes.nvidia_smi import (
    NvidiaSmiFailure,
    SmiCondition,
    canonical_field,
    parse_list,
    parse_query_csv,
    parse_table,
)

FIXTURES = Path(__file__).parent / "fixtures" / "smi"
NCCL_RUN = (Path(__file__).parent / "fixtures" / "nccl_tests" / "all_reduce_2x8xH100_multinode.txt").read_text()


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# ---------------------------------------------------------------------------------------- tables

# (id, file, smi version, driver, cuda, gpus, first GPU name, truncated, used MiB, total MiB, MIG mode,
#  MIG devices, processes)
TABLES = [
    ("440 table has no MIG row and reads processes without GI/CI", "table_440_rtx2070_before_mig_column.txt",
     "440.100", "440.100", "10.2", 1, "GeForce RTX 207...", True, 246, 7973, None, 0, 4),
    ("450 table with MIG enabled on seven of eight A100s lists one MIG device", "table_450_8xA100_mig_mixed.txt",
     "450.80.02", "450.80.02", "11.0", 8, "A100-SXM4-40GB", False, 0, 40537, "Disabled", 1, 0),
    ("455 table says the P100 name is cut to its column", "table_455_p100_truncated_name.txt",
     "455.32.00", "455.32.00", "11.1", 1, "Tesla P100-PCIE...", True, 0, 16280, "N/A", 0, 0),
    ("470 table reads six graphics processes", "table_470_geforce_processes.txt",
     "470.63.01", "470.63.01", "11.4", 1, "NVIDIA GeForce ...", True, 393, 16116, "N/A", 0, 6),
    ("515 table reads a TITAN V with no processes", "table_515_titanv.txt",
     "515.65.01", "515.65.01", "11.7", 1, "NVIDIA TITAN V", False, 0, 12288, "N/A", 0, 0),
    ("530 WSL table keeps nvidia-smi 530.47 apart from driver 531.68", "table_530_wsl_rtx3070.txt",
     "530.47", "531.68", "12.1", 1, "NVIDIA GeForce RTX 3070", False, 1029, 8192, "N/A", 0, 1),
    ("535 table with MIG enabled on one A100 lists its 9856 MiB instance", "table_535_a100_mig_enabled.txt",
     "535.161.08", "535.161.08", "12.2", 1, "NVIDIA A100-SXM4-40GB", False, 75, 40960, "Enabled", 1, 0),
    ("550 table reads two V100s and their Xorg processes", "table_550_2xV100_xorg.txt",
     "550.144.03", "550.144.03", "12.4", 2, "Tesla V100-SXM2-16GB", False, 8, 16384, "N/A", 0, 2),
    ("570 table reads driver 570.133.20 and CUDA 12.8 with the wider PID column", "table_570_2xV100_xorg.txt",
     "570.133.20", "570.133.20", "12.8", 2, "Tesla V100-SXM2-16GB", False, 5, 16384, "N/A", 0, 2),
    ("570 table from kubectl logs starts with a blank line and no timestamp", "table_570_t4_kubectl_logs.txt",
     "570.133.20", "570.133.20", "12.8", 1, "Tesla T4", False, 0, 15360, "N/A", 0, 0),
    ("580 table with the +---+ rule under its header reads CUDA 13.0", "table_580_t4_kubectl_logs.txt",
     "580.105.08", "580.105.08", "13.0", 1, "Tesla T4", False, 0, 15360, "N/A", 0, 0),
]


@pytest.mark.parametrize(
    ("file", "smi", "driver", "cuda", "gpus", "name", "truncated", "used", "total", "mig", "migs", "procs"),
    [pytest.param(*t[1:], id=t[0]) for t in TABLES],
)
def test_real_tables(file: str, smi: str, driver: str, cuda: str, gpus: int, name: str, truncated: bool,
                     used: int, total: int, mig: str | None, migs: int, procs: int) -> None:
    table = parse_table(fixture(file))
    assert (table.smi_version, table.driver_version, table.cuda_version) == (smi, driver, cuda)
    assert len(table.gpus) == gpus
    first = table.gpus[0]
    assert (first.name, first.name_truncated) == (name, truncated)
    assert (first.memory_used_mib, first.memory_total_mib, first.mig_mode) == (used, total, mig)
    assert len(table.mig_devices) == migs
    assert len(table.processes) == procs


def test_570_table_reads_bus_ids_persistence_and_process_rows() -> None:
    table = parse_table(fixture("table_570_2xV100_xorg.txt"))
    assert table.timestamp == "Wed May 21 09:56:31 2025"
    assert [g.bus_id for g in table.gpus] == ["00000000:08:00.0", "00000000:85:00.0"]
    assert [g.persistence_mode for g in table.gpus] == ["Off", "Off"]
    assert (table.gpus[1].utilization_percent, table.gpus[1].compute_mode) == (0, "Default")
    proc = table.processes[1]
    assert (proc.gpu, proc.gpu_instance, proc.compute_instance, proc.pid, proc.type, proc.process_name,
            proc.memory_mib) == (1, None, None, 3486, "G", "/usr/lib/xorg/Xorg", 4)


def test_mig_table_reads_each_gpu_mode_and_the_mig_device_under_gpu_7() -> None:
    table = parse_table(fixture("table_450_8xA100_mig_mixed.txt"))
    assert [g.mig_mode for g in table.gpus] == ["Disabled"] + ["Enabled"] * 7
    assert [g.utilization_percent for g in table.gpus[:2]] == [0, None]
    assert table.gpus[1].volatile_uncorrected_ecc == "On"
    device = table.mig_devices[0]
    assert (device.gpu, device.gpu_instance, device.compute_instance, device.mig_device) == (7, 13, 0, 0)
    assert (device.memory_used_mib, device.memory_total_mib, device.sm_count) == (3, 4864, 14)


def test_535_mig_table_reads_the_wider_memory_column() -> None:
    device = parse_table(fixture("table_535_a100_mig_enabled.txt")).mig_devices[0]
    assert (device.gpu_instance, device.memory_used_mib, device.memory_total_mib, device.sm_count) == (5, 25, 9856, 28)


def test_wsl_process_memory_n_a_is_none() -> None:
    proc = parse_table(fixture("table_530_wsl_rtx3070.txt")).processes[0]
    assert (proc.pid, proc.process_name, proc.memory_mib) == (22, "/Xwayland", None)


def test_table_published_without_processes_is_rejected_as_truncated() -> None:
    with pytest.raises(ProbeParseError, match="no 'Processes:' section after the GPUs") as info:
        parse_table(fixture("table_550_8xH100_no_processes_section.txt"))
    assert info.value.line == 40


@pytest.mark.parametrize("file", [t[1] for t in TABLES])
def test_a_table_truncated_at_any_line_is_never_a_result(file: str) -> None:
    lines = fixture(file).splitlines(keepends=True)
    for cut in range(len(lines)):
        with pytest.raises(ProbeParseError):
            parse_table("".join(lines[:cut]))


@pytest.mark.parametrize("file", [t[1] for t in TABLES])
def test_a_table_cut_inside_its_last_line_is_rejected(file: str) -> None:
    text = fixture(file).rstrip("\n")
    with pytest.raises(ProbeParseError, match="the border closing the Processes section"):
        parse_table(text[:-5])


def replace(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


T570 = fixture("table_570_2xV100_xorg.txt")


@pytest.mark.parametrize(
    ("text", "message", "line"),
    [
        pytest.param("", "empty output", None, id="an empty string"),
        pytest.param("garbage\n\x00\x01\n", "expected the '+---+' border opening the nvidia-smi table", 1,
                     id="garbage"),
        pytest.param(NCCL_RUN, "expected the '+---+' border opening the nvidia-smi table", 1,
                     id="nccl-tests output is another command's"),
        pytest.param(fixture("list_2xA100_pcie.txt"), "expected the '+---+' border", 1,
                     id="nvidia-smi -L output is not the table"),
        pytest.param(replace(T570, "Driver Version: 570.133.20", "Driver Vers1on: 570.133.20"),
                     "expected the 'NVIDIA-SMI ... Driver Version: ...' header", 3, id="a garbled version header"),
        pytest.param(replace(T570, "00000000:85:00.0", "00000000:85:00"), "unreadable bus id", 13,
                     id="a cut bus id"),
        pytest.param(replace(T570, "5MiB /  16384MiB", "5MiB /  16384M1B"), "unreadable memory usage", 10,
                     id="a garbled memory cell"),
        pytest.param(replace(T570, "|   1  Tesla V100-SXM2-16GB", "|   2  Tesla V100-SXM2-16GB"),
                     "GPU indices are not 0..N-1", 17, id="GPU indices out of order"),
        pytest.param(replace(T570, "3486      G   /usr/lib/xorg/Xorg", "3486      Q   /usr/lib/xorg/Xorg"),
                     "unreadable process row", 23, id="a process row with an unknown type"),
        pytest.param(T570 + "wuk::host_reduce_add_strided_batched: 27.999231 ms\n",
                     "unexpected text after the table", 26, id="text after the table"),
        pytest.param(replace(T570, "| Processes:", "| Procezzes:"), "unexpected section 'Procezzes:'", 18,
                     id="an unknown section"),
    ],
)
def test_malformed_tables_are_rejected_with_their_line(text: str, message: str, line: int | None) -> None:
    with pytest.raises(ProbeParseError, match=re.escape(message)) as info:
        parse_table(text)
    assert info.value.line == line
    assert info.value.source == "nvidia-smi"


# ------------------------------------------------------------------------------------------ -L

LISTS = [
    ("two A100 PCIe without MIG", "list_2xA100_pcie.txt",
     ["NVIDIA A100-PCIE-40GB"] * 2, [0, 0]),
    ("a mixed A10 and T4 host", "list_2xA10_2xT4_host.txt",
     ["NVIDIA A10", "NVIDIA A10", "Tesla T4", "Tesla T4"], [0, 0, 0, 0]),
    ("one A100 split in seven 1g.10gb instances", "list_a100_7x1g10gb_mig.txt",
     ["NVIDIA A100-SXM4-80GB"], [7]),
    ("MIG devices attach to GPU 0 only when GPUs 1-3 are whole", "list_4xA100_one_gpu_mig.txt",
     ["NVIDIA A100-SXM4-80GB"] * 4, [4, 0, 0, 0]),
    ("an A100 PCIe in two 3g.40gb instances", "list_a100_2x3g40gb_mig.txt",
     ["NVIDIA A100 80GB PCIe"], [2]),
]


@pytest.mark.parametrize(("file", "names", "migs"), [pytest.param(*c[1:], id=c[0]) for c in LISTS])
def test_real_lists(file: str, names: list[str], migs: list[int]) -> None:
    listing = parse_list(fixture(file))
    assert not listing.no_devices
    assert [g.name for g in listing.gpus] == names
    assert [len(g.mig_devices) for g in listing.gpus] == migs
    assert [g.index for g in listing.gpus] == list(range(len(names)))


def test_mig_devices_keep_profile_device_and_uuid_under_their_parent() -> None:
    listing = parse_list(fixture("list_4xA100_one_gpu_mig.txt"))
    gpu0 = listing.gpus[0]
    assert gpu0.uuid == "GPU-513536b6-7d19-9063-b049-1e69664bb298"
    last = gpu0.mig_devices[-1]
    assert (last.profile, last.device, last.uuid) == ("1g.20gb", 3, "MIG-930574a9-d43a-5d2b-95da-3e68384c8d6b")
    assert listing.gpus[1].uuid == "GPU-d8594bd4-0fc3-8595-e355-7c98138f3b95"


def test_no_devices_is_an_empty_list_with_its_flag() -> None:
    listing = parse_list(fixture("fail_no_devices.txt"))
    assert listing.no_devices and listing.gpus == ()


LIST_TEXT = fixture("list_4xA100_one_gpu_mig.txt")


@pytest.mark.parametrize(
    ("text", "message", "line"),
    [
        pytest.param("", "no GPU lines (empty output)", None, id="an empty string"),
        pytest.param("\n\n", "no GPU lines (empty output)", None, id="only blank lines"),
        pytest.param("Segmentation fault\n", "not an nvidia-smi -L line: 'Segmentation fault'", 1, id="garbage"),
        pytest.param(T570, "not an nvidia-smi -L line", 1, id="the table is another command's output"),
        pytest.param(LIST_TEXT[:LIST_TEXT.index("GPU 1")], "", None, id="a cut at a line end is a shorter list"),
        pytest.param(LIST_TEXT[:LIST_TEXT.index("GPU 1") + 30], "not an nvidia-smi -L line", 6,
                     id="a cut inside a GPU line"),
        pytest.param(LIST_TEXT[:LIST_TEXT.index("MIG-f00d") + 4], "not an nvidia-smi -L line", 4,
                     id="a cut inside a MIG line"),
        pytest.param(LIST_TEXT[LIST_TEXT.index("  MIG 1g.20gb"):], "MIG device listed before any GPU", 1,
                     id="MIG lines without their GPU"),
        pytest.param(LIST_TEXT.replace("GPU 1:", "GPU 7:"), "GPU 7 listed where GPU 1 was expected", 6,
                     id="a skipped GPU index"),
        pytest.param("No devices were found\nGPU 0: x\n", "unexpected text next to 'No devices were found'", 2,
                     id="no-devices with other text"),
    ],
)
def test_malformed_lists(text: str, message: str, line: int | None) -> None:
    if not message:
        # a listing cut exactly at a line end cannot be told from a shorter real one
        assert len(parse_list(text).gpus) == 1
        return
    with pytest.raises(ProbeParseError, match=re.escape(message)) as info:
        parse_list(text)
    assert info.value.line == line


# ----------------------------------------------------------------------------------- --query-gpu

HPE_FIELDS = ["gpu_name", "gpu_bus_id", "vbios_version", "temperature.gpu", "utilization.gpu", "memory.total",
              "memory.free", "memory.used", "clocks.applications.graphics", "clocks.applications.memory"]
GTX770_FIELDS = ["gpu_name", "utilization.gpu", "utilization.memory", "temperature.gpu", "power.draw",
                 "power.limit", "fan.speed", "pstate", "clocks.current.graphics", "clocks.current.memory",
                 "power.max_limit", "power.default_limit"]
I3_FIELDS = ["memory.total", "memory.free", "memory.used", "temperature.gpu", "fan.speed", "utilization.gpu",
             "utilization.memory"]
RTX2080_FIELDS = ["power.limit", "power.min_limit", "power.max_limit", "memory.total", "vbios_version",
                  "driver_version", "name", "gpu_uuid", "power.draw", "temperature.gpu", "temperature.memory",
                  "clocks.current.graphics", "clocks.sm", "clocks.mem", "utilization.gpu", "utilization.memory",
                  "fan.speed", "pcie.link.width.current", "pstate"]


def test_query_with_header_and_units_types_every_value() -> None:
    result = parse_query_csv(fixture("query_header_units_2xA100.csv"), HPE_FIELDS, header=True)
    assert result.header and not result.no_devices
    assert result.units["memory.total"] == "MiB" and result.units["utilization.gpu"] == "%"
    row = result.rows[1]
    assert row.line == 3
    assert row["gpu_name"] == "NVIDIA A100-PCIE-40GB"
    assert row["gpu_bus_id"] == "00000000:8A:00.0"
    assert row["vbios_version"] == "92.00.25.00.08"
    assert (row["temperature.gpu"], row["utilization.gpu"], row["memory.total"]) == (37, 0, 40960)
    assert (row["memory.free"], row["memory.used"]) == (40447, 1)
    assert (row["clocks.applications.graphics"], row["clocks.applications.memory"]) == (765, 1215)


def test_query_header_is_detected_when_not_told() -> None:
    assert parse_query_csv(fixture("query_header_units_2xA100.csv"), HPE_FIELDS).header


def test_query_not_supported_keeps_its_reason() -> None:
    result = parse_query_csv(fixture("query_header_units_not_supported.csv"), ["utilization.memory"], header=True)
    row = result.rows[0]
    assert row["utilization.memory"] is None
    assert row.unavailable == {"utilization.memory": "Not Supported"}


def test_noheader_query_with_units_reads_percent_and_not_supported() -> None:
    row = parse_query_csv(fixture("query_noheader_units_gtx770_not_supported.csv"), GTX770_FIELDS,
                          header=False).rows[0]
    assert (row["gpu_name"], row["temperature.gpu"], row["fan.speed"], row["pstate"]) == (
        "GeForce GTX 770", 52, 52, "P0")
    assert row["power.draw"] is None and row.unavailable["power.draw"] == "Not Supported"
    assert len(row.unavailable) == 8


def test_noheader_nounits_query_marks_fan_n_a() -> None:
    row = parse_query_csv(fixture("query_noheader_nounits_fan_na.csv"), I3_FIELDS, header=False).rows[0]
    assert [row[f] for f in I3_FIELDS] == [2004, 2004, 0, 44, None, 0, 0]
    assert row.unavailable == {"fan.speed": "N/A"}


def test_nounits_query_keeps_versions_as_text_and_reads_bare_n_a() -> None:
    row = parse_query_csv(fixture("query_noheader_nounits_rtx2080_bare_na.csv"), RTX2080_FIELDS).rows[0]
    assert row["driver_version"] == "440.64"
    assert row["vbios_version"] == "90.04.23.00.5F"
    assert (row["power.limit"], row["power.draw"]) == (200.0, 176.98)
    assert (row["memory.total"], row["clocks.sm"], row["clocks.mem"], row["pcie.link.width.current"]) == (
        7979, 1965, 7199, 8)
    assert row["temperature.memory"] is None and row.unavailable == {"temperature.memory": "N/A"}
    assert row["gpu_uuid"] == "GPU-22b2c6ac-2d49-4863-197c-9c469071178a"


def test_query_aliases_match_the_printed_header_names() -> None:
    assert [canonical_field(f) for f in ("gpu_name", "gpu_bus_id", "clocks.sm", "memory.used")] == [
        "name", "pci.bus_id", "clocks.current.sm", "memory.used"]


HPE = fixture("query_header_units_2xA100.csv")
I3 = fixture("query_noheader_nounits_fan_na.csv")


@pytest.mark.parametrize(
    ("text", "fields", "header", "message", "line"),
    [
        pytest.param("", I3_FIELDS, None, "empty output", None, id="an empty string"),
        pytest.param(I3, I3_FIELDS, True, "expected the CSV header for memory.total", 1,
                     id="a missing header when one was asked for"),
        pytest.param(HPE, HPE_FIELDS, False, "unexpected CSV header (the query asked for noheader)", 1,
                     id="a header under noheader"),
        pytest.param(HPE.splitlines()[0] + "\n", HPE_FIELDS, True, "header without any GPU row", 2,
                     id="a header and no rows"),
        pytest.param(I3, I3_FIELDS[:-1], False, "expected 6 columns, found 7", 1, id="a wrong column count"),
        pytest.param(I3[:8], I3_FIELDS, False, "expected 7 columns, found 2", 1, id="a row cut mid-way"),
        pytest.param("2004, 2004, 0, 44, fast, 0, 0\n", I3_FIELDS, False, "fan.speed: cannot read 'fast' as int",
                     1, id="text in a numeric column"),
        pytest.param(HPE.replace("40447 MiB, 1 MiB", "40447 MiB, , 1 MiB", 1), HPE_FIELDS, True,
                     "expected 10 columns, found 11", 2, id="an extra empty column"),
        pytest.param(T570, I3_FIELDS, None, "expected 7 columns, found 1", 1, id="the table is not CSV"),
        pytest.param(I3 + "\n" + I3, I3_FIELDS, False, "expected 7 columns, found 1", 2,
                     id="a blank line between rows"),
    ],
)
def test_malformed_queries(text: str, fields: list[str], header: bool | None, message: str, line: int | None) -> None:
    with pytest.raises(ProbeParseError, match=re.escape(message)) as info:
        parse_query_csv(text, fields, header=header)
    assert info.value.line == line
    assert info.value.source == "nvidia-smi --query-gpu"


def test_query_needs_its_field_list() -> None:
    with pytest.raises(ValueError, match="list of queried fields"):
        parse_query_csv(I3, [])


def test_no_devices_query_is_empty_with_its_flag() -> None:
    result = parse_query_csv(fixture("fail_no_devices.txt"), I3_FIELDS, header=False)
    assert result.no_devices and result.rows == ()


# -------------------------------------------------------------------------------------- failures

FAILURES = [
    ("couldn't communicate with the driver means the driver is not loaded", "fail_driver_not_loaded.txt",
     SmiCondition.DRIVER_NOT_LOADED, None),
    ("a version mismatch names the NVML library version 570.124", "fail_version_mismatch_with_nvml_version.txt",
     SmiCondition.VERSION_MISMATCH, "570.124"),
    ("a version mismatch without the library line", "fail_version_mismatch.txt",
     SmiCondition.VERSION_MISMATCH, None),
    ("NVML Unknown Error in a container is a generic NVML init failure", "fail_nvml_unknown_error.txt",
     SmiCondition.NVML_INIT_FAILED, None),
]


@pytest.mark.parametrize(("file", "condition", "nvml"), [pytest.param(*f[1:], id=f[0]) for f in FAILURES])
def test_failure_texts_name_their_condition_for_every_parser(file: str, condition: SmiCondition,
                                                             nvml: str | None) -> None:
    text = fixture(file)
    for parse in (parse_list, parse_table, lambda t: parse_query_csv(t, I3_FIELDS)):
        with pytest.raises(NvidiaSmiFailure) as info:
            parse(text)
        assert info.value.condition is condition
        assert info.value.nvml_library_version == nvml
        assert info.value.line == 1
        assert isinstance(info.value, ProbeParseError)


def test_driver_message_wrapped_over_two_lines_is_still_recognised() -> None:
    text = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure\n"
            " that the latest NVIDIA driver is installed and running.\n")
    with pytest.raises(NvidiaSmiFailure) as info:
        parse_list(text)
    assert info.value.condition is SmiCondition.DRIVER_NOT_LOADED


def test_no_devices_is_a_named_failure_for_the_table() -> None:
    with pytest.raises(NvidiaSmiFailure, match="no-devices") as info:
        parse_table(fixture("fail_no_devices.txt"))
    assert info.value.condition is SmiCondition.NO_DEVICES
