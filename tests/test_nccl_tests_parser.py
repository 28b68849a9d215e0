"""The nccl-tests parser against real all_reduce_perf/broadcast_perf outputs (tests/fixtures/nccl_tests,
sources in its README) and against truncated, garbled and foreign text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuconf.probes.errors import ProbeParseError
from gpuconf.probes.nccl_tests import NcclTestsRun, parse_nccl_tests

FIXTURES = Path(__file__).parent / "fixtures" / "nccl_tests"
SMI_TABLE = (Path(__file__).parent / "fixtures" / "smi" / "table_570_2xV100_xorg.txt").read_text()


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def parse(name: str) -> NcclTestsRun:
    return parse_nccl_tests(fixture(name))


COMPLETE = [
    "all_reduce_2019_8xV100_nvlink_error_column.txt",
    "all_reduce_2020_8xA100_nvlink_unchecked.txt",
    "broadcast_2020_8xA100_nvlink_unchecked.txt",
    "all_reduce_2x8xH100_multinode.txt",
    "all_reduce_2x8xH100_roce_large.txt",
    "all_reduce_8xA100_single_size_concluded.txt",
]

# (id, file, ranks, hosts, rows, peak busbw, size at peak, reported avg, wrong total, unchecked placements)
CASES = [
    ("2019 8xV100 NVLink run peaks at 129.14 GB/s on 128 MiB and averages 25.96",
     "all_reduce_2019_8xV100_nvlink_error_column.txt", 8, 1, 25, 129.14, 134217728, 25.9598, 0, 0),
    ("2020 8xA100 run without validation peaks at 235.26 and leaves all 68 placements unchecked",
     "all_reduce_2020_8xA100_nvlink_unchecked.txt", 8, 1, 34, 235.26, 8589934592, 68.4048, 0, 68),
    ("broadcast_perf shares the format: root column, no redop, peak 234.70 in-place",
     "broadcast_2020_8xA100_nvlink_unchecked.txt", 8, 1, 34, 234.70, 8589934592, 64.8653, 0, 68),
    ("two-node 16xH100 run peaks at 338.82 on 8 GiB while its average is 70.742",
     "all_reduce_2x8xH100_multinode.txt", 16, 2, 31, 338.82, 8589934592, 70.742, 0, 0),
    ("two-node 16xH100 RoCE run over 1-16 GiB peaks at 464.79 in-place on 16 GiB",
     "all_reduce_2x8xH100_roce_large.txt", 16, 2, 5, 464.79, 17179869184, 458.452, 0, 0),
    ("single-size 8xA100 run reads its one 10 GiB row at 232.20",
     "all_reduce_8xA100_single_size_concluded.txt", 8, 1, 1, 232.20, 10737418240, 232.167, 0, 0),
]


@pytest.mark.parametrize(
    ("file", "ranks", "hosts", "rows", "peak", "peak_size", "avg", "wrong", "unchecked"),
    [pytest.param(*c[1:], id=c[0]) for c in CASES],
)
def test_real_runs(file: str, ranks: int, hosts: int, rows: int, peak: float, peak_size: int,
                   avg: float, wrong: int, unchecked: int) -> None:
    run = parse(file)
    assert run.ranks == ranks
    assert len(run.hosts) == hosts
    assert len(run.rows) == rows
    assert run.peak_busbw_gbps == pytest.approx(peak)
    assert run.peak_row.size_bytes == peak_size
    assert run.avg_busbw_reported == pytest.approx(avg)
    assert run.wrong_total == wrong
    assert run.unchecked_placements == unchecked
    assert run.out_of_bounds == 0


@pytest.mark.parametrize("file", COMPLETE)
def test_recomputed_average_matches_the_reported_one_to_print_rounding(file: str) -> None:
    run = parse(file)
    assert run.avg_busbw_recomputed == pytest.approx(run.avg_busbw_reported, abs=0.01)


def test_the_reported_average_is_the_mean_over_sizes_not_the_peak() -> None:
    run = parse("all_reduce_2x8xH100_multinode.txt")
    assert run.avg_busbw_reported < run.peak_busbw_gbps / 4


def test_multinode_run_names_both_hosts_and_each_rank_device() -> None:
    run = parse("all_reduce_2x8xH100_multinode.txt")
    assert run.hosts == ("ztan-mig-235z", "ztan-mig-gq73")
    eight = run.devices[8]
    assert (eight.rank, eight.group, eight.pid, eight.host, eight.device, eight.bus_id, eight.name) == (
        8, 0, 6733, "ztan-mig-gq73", 0, "0000:04:00", "NVIDIA H100 80GB HBM3")
    assert run.header.n_gpus == 1 and run.header.agg_iters == 1 and run.header.graph == 0
    assert run.header.max_bytes == 8589934592 and run.header.step_is_factor


def test_2019_layout_reads_error_column_as_max_deviation_without_root() -> None:
    run = parse("all_reduce_2019_8xV100_nvlink_error_column.txt")
    first = run.rows[0]
    assert (first.size_bytes, first.count, first.dtype, first.redop, first.root) == (8, 2, "float", "sum", None)
    assert first.out_of_place.max_error == pytest.approx(1e-07)
    assert first.out_of_place.wrong is None and first.out_of_place.checked
    assert run.header.agg_iters is None and run.header.graph is None and run.header.validation
    assert run.devices[0].group is None and run.devices[0].bus_id == "0x4f"


def test_unchecked_run_keeps_n_a_as_unchecked_not_as_zero_wrong() -> None:
    run = parse("all_reduce_2020_8xA100_nvlink_unchecked.txt")
    assert not run.header.validation
    assert all(not r.out_of_place.checked and not r.in_place.checked for r in run.rows)
    assert [r.size_bytes for r in run.rows[:2]] == [0, 0]


def test_broadcast_rows_carry_root_and_no_redop() -> None:
    row = parse("broadcast_2020_8xA100_nvlink_unchecked.txt").rows[-1]
    assert (row.redop, row.root) == (None, 0)
    assert row.in_place.busbw_gbps == pytest.approx(234.70)


def test_newer_run_names_its_program_and_single_row_placements() -> None:
    run = parse("all_reduce_8xA100_single_size_concluded.txt")
    assert run.program == "all_reduce_perf"
    row = run.rows[0]
    assert (row.out_of_place.time_us, row.out_of_place.algbw_gbps, row.out_of_place.wrong) == (80922.0, 132.69, 0)
    assert row.in_place.busbw_gbps == pytest.approx(232.13)
    assert run.header.step == 1048576 and not run.header.step_is_factor


def test_published_gh200_run_with_corrupted_rows_but_no_summary_is_rejected() -> None:
    with pytest.raises(ProbeParseError, match="no '# Avg bus bandwidth' line: the run did not finish") as info:
        parse("all_reduce_4x4xGH200_corrupted_truncated.txt")
    assert info.value.line == 54


def test_gh200_rows_are_readable_when_the_summary_is_there() -> None:
    # the same real rows, completed with a summary line, expose its #wrong counts
    text = fixture("all_reduce_4x4xGH200_corrupted_truncated.txt") + (
        "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 17.8617 \n")
    run = parse_nccl_tests(text)
    assert run.nccl_tests_version == "2.17.9" and run.program == "all_reduce_perf"
    assert run.rows[21].out_of_place.wrong == 18134 and run.rows[21].in_place.wrong == 9609
    assert run.wrong_total == sum((18134, 9609, 96817, 124342, 763876, 530181, 404221, 103664,
                                   951005, 820604, 113492))


# ------------------------------------------------------------------------------------------ malformed


def lines_of(name: str) -> list[str]:
    return fixture(name).splitlines(keepends=True)


MULTINODE = "all_reduce_2x8xH100_multinode.txt"


def replace_line(name: str, number: int, new: str) -> str:
    lines = lines_of(name)
    lines[number - 1] = new
    return "".join(lines)


@pytest.mark.parametrize(
    ("text", "message", "line"),
    [
        pytest.param("", "no '# nThread' run header: not nccl-tests output", None, id="an empty string"),
        pytest.param("\x00\x01garbage\n%%%%\n", "not nccl-tests output", 3, id="binary garbage"),
        pytest.param(SMI_TABLE, "not nccl-tests output", SMI_TABLE.count("\n") + 1,
                     id="an nvidia-smi table is another command's output"),
        pytest.param(replace_line(MULTINODE, 1, "# nThread one nGpus 1\n"), "unreadable run header", 1,
                     id="a garbled run header"),
        pytest.param(replace_line(MULTINODE, 5, "#  Rank  1 Group  0 Pid 6900 on\n"), "unreadable rank line", 5,
                     id="a cut rank line"),
        pytest.param(replace_line(MULTINODE, 5, "#  Rank  2 Group  0 Pid   6900 on ztan-mig-235z device  1 "
                                                "[0000:05:00] NVIDIA H100 80GB HBM3\n"),
                     "not ranks 0..N-1", 2, id="a skipped rank"),
        pytest.param(replace_line(MULTINODE, 3, "#\n"), "expected '# Using devices'", 4, id="no device list"),
        pytest.param(replace_line(MULTINODE, 22, "#  size count type redop root time algbw busbw #wrong i_min "
                                                 "time algbw busbw #wrong i_min\n"),
                     "unsupported results table layout", 22, id="per-iteration columns are refused by name"),
        pytest.param(replace_line(MULTINODE, 40, "   268435456      67108864     float     sum      -1   2360.9  "
                                                 "113.70  2l3.19      0   2359.9  113.75  213.28      0\n"),
                     "busbw '2l3.19' is not a number", 40, id="a garbled busbw"),
        pytest.param(replace_line(MULTINODE, 40, "   268435456      67108864     float     sum      -1   2360.9  "
                                                 "113.70  213.19      0   2359.9  113.75\n"),
                     "result row has 11 columns, expected 13", 40, id="a row cut mid-way"),
        pytest.param(replace_line(MULTINODE, 40, "   268435456      67108864     float     sum      -1   2360.9  "
                                                 "113.70  213.19    2.5   2359.9  113.75  213.28      0\n"),
                     "#wrong '2.5' is not a whole count", 40, id="a fractional wrong count"),
        pytest.param(replace_line(MULTINODE, 40, "   268435456      67108864     float     sum      -1   -236.9  "
                                                 "113.70  213.19      0   2359.9  113.75  213.28      0\n"),
                     "not a finite non-negative number", 40, id="a negative time"),
        pytest.param("".join(lines_of(MULTINODE)[:23]) + "".join(lines_of(MULTINODE)[-2:]),
                     "the results table has no rows", 26, id="a table with no rows"),
        pytest.param("".join(lines_of(MULTINODE)[:-2]) + "# Avg bus bandwidth    : 70.742 \n",
                     "before '# Out of bounds values'", 55, id="an average without the out-of-bounds line"),
        pytest.param("".join(lines_of(MULTINODE)[:-1]) + "# Avg bus bandwidth    : 70.742",
                     "cut off (no line end)", 56, id="an average line without its line end"),
        pytest.param("".join(lines_of(MULTINODE)[:-1]) + lines_of(MULTINODE)[40] + lines_of(MULTINODE)[-1],
                     "result row after the summary", 56, id="a row after the out-of-bounds summary"),
        pytest.param("".join(lines_of(MULTINODE)[:30]) + "".join(lines_of(MULTINODE)[:3]),
                     "a second run header: the output holds more than one run", 31, id="two runs interleaved"),
    ],
)
def test_malformed_output_is_rejected_with_its_line(text: str, message: str, line: int | None) -> None:
    with pytest.raises(ProbeParseError, match=re.escape(message)) as info:
        parse_nccl_tests(text)
    assert info.value.line == line
    assert info.value.source == "nccl-tests output"


@pytest.mark.parametrize("file", COMPLETE)
def test_truncated_at_each_line_no_prefix_is_a_result(file: str) -> None:
    lines = lines_of(file)
    end = next(i for i, s in enumerate(lines) if s.startswith("# Avg bus bandwidth")) + 1
    for cut in range(end):
        with pytest.raises(ProbeParseError):
            parse_nccl_tests("".join(lines[:cut]))
    parse_nccl_tests("".join(lines[:end]))


def test_nccl_info_lines_inside_the_table_are_skipped() -> None:
    lines = lines_of(MULTINODE)
    noise = "gpu-st-ml-1:78499:78499 [0] NCCL INFO TUNER/Plugin: Closing tuner: 'nccl_ofi_tuner'\n"
    run = parse_nccl_tests("".join([*lines[:40], noise, *lines[40:]]))
    assert len(run.rows) == 31


@settings(max_examples=300, deadline=None)
@given(data=st.data(), file=st.sampled_from(COMPLETE))
def test_truncating_anywhere_before_the_final_summary_never_yields_a_result(data: st.DataObject, file: str) -> None:
    text = fixture(file)
    start = text.index("# Avg bus bandwidth")
    end = text.index("\n", start)  # the summary counts as written once its line ends
    cut = data.draw(st.integers(min_value=0, max_value=end), label="cut")
    with pytest.raises(ProbeParseError):
        parse_nccl_tests(text[:cut])
