"""The nvidia-smi and nccl-tests parsers on real outputs kept under tests/data/real/ (SOURCES.md
names each file's public source): GB10's "Not Supported" memory, compute instances sharing a GPU
instance, the four `nvidia-smi mig` listings, `nvidia-smi -mig` with its pending-reboot warning,
nccl-tests under mpirun --tag-output, Ray/SkyPilot and srun --label; truncated copies fail with a
line and a reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuconf.probes.errors import ProbeParseError
from gpuconf.probes.nccl_tests import parse_nccl_tests
from gpuconf.probes.nvidia_smi import (
    NvidiaSmiFailure,
    SmiCondition,
    parse_mig_compute_instance_profiles,
    parse_mig_compute_instances,
    parse_mig_gpu_instance_profiles,
    parse_mig_gpu_instances,
    parse_mig_listing,
    parse_mig_mode,
    parse_table,
)

ROOT = Path(__file__).resolve().parent.parent
SMI = ROOT / "tests" / "data" / "real" / "nvidia-smi"
NCCL = ROOT / "tests" / "data" / "real" / "nccl-tests"


def smi(name: str) -> str:
    return (SMI / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("folder", [SMI, NCCL])
def test_every_file_has_a_source_row(folder):
    sources = (folder / "SOURCES.md").read_text(encoding="utf-8")
    for path in folder.glob("*.txt"):
        assert f"| `{path.name}` |" in sources, path.name


# --- nvidia-smi table -----------------------------------------------------------------------


def test_gb10_unified_memory_reads_not_supported_as_unknown():
    t = parse_table(smi("table_580_gb10_memory_not_supported.txt"))
    (gpu,) = t.gpus
    assert (t.driver_version, t.cuda_version, gpu.name) == ("580.95.05", "13.0", "NVIDIA GB10")
    assert gpu.memory_used_mib is None and gpu.memory_total_mib is None
    assert (gpu.bus_id, gpu.mig_mode, gpu.utilization_percent) == ("0000000F:01:00.0", "N/A", 0)
    assert t.processes == ()


def test_the_r610_banner_names_the_driver_kmd_and_the_cuda_umd():
    """R610 renamed Driver Version / CUDA Version to KMD Version / CUDA UMD Version (aicr#1667)."""
    from gpuconf.tool_outputs import read_outputs

    text = smi("table_610_b200_kmd_umd_banner.txt")
    t = parse_table(text)
    assert (t.smi_version, t.driver_version, t.cuda_version) == ("610.43.02", "610.43.02", "13.3")
    assert [g.name for g in t.gpus] == ["NVIDIA B200", "NVIDIA B200"]
    (found,) = read_outputs("pod log:\n" + text)
    assert found.error is None and found.parsed == t
    old = text.replace("KMD Version: 610.43.02     CUDA UMD Version: 13.3    ",
                       "Driver Version: 610.43.02     CUDA Version: 13.3        ")
    assert parse_table(old) == t  # the pre-R610 spelling of the same banner


def test_a_gb10_table_without_processes_is_truncated_not_misread():
    with pytest.raises(ProbeParseError, match="no 'Processes:' section") as err:
        parse_table(smi("table_580_gb10_no_processes_section.txt"))
    assert err.value.line is not None


def test_compute_instances_sharing_a_gpu_instance_share_its_memory():
    t = parse_table(smi("table_550_a100_two_ci_per_gpu_instance.txt"))
    got = [(d.gpu_instance, d.compute_instance, d.mig_device, d.memory_used_mib, d.memory_total_mib, d.sm_count,
            d.memory_shared) for d in t.mig_devices]
    assert got == [(1, 0, 0, 37, 40192, 14, True), (1, 1, 1, 37, 40192, 28, True),
                   (2, 0, 2, 49, 40192, 14, True), (2, 1, 3, 49, 40192, 28, True)]
    assert t.gpus[0].mig_mode == "Enabled" and t.driver_version == "550.54.14"


def test_a_table_cut_inside_a_shared_memory_cell_fails_clearly():
    lines = smi("table_550_a100_two_ci_per_gpu_instance.txt").splitlines(keepends=True)
    span = next(i for i, line in enumerate(lines) if line.startswith("+------------------+ "))
    with pytest.raises(ProbeParseError, match="shared memory cell"):
        parse_table("".join(lines[:span + 1]))
    # a compute instance without memory that does not continue a spanning cell
    broken = "".join(lines).replace("+------------------+                                  +", "+" + "-" * 18 + "+"
                                    + "-" * 34 + "+", 1)
    with pytest.raises(ProbeParseError, match="does not continue"):
        parse_table(broken)


# --- nvidia-smi mig listings ----------------------------------------------------------------


def test_lgip():
    profiles = parse_mig_gpu_instance_profiles(smi("mig_lgip_550_a100_80gb.txt"))
    assert [(p.profile, p.profile_id, p.free, p.total) for p in profiles] == [
        ("1g.10gb", 19, 0, 7), ("1g.10gb+me", 20, 0, 1), ("1g.20gb", 15, 0, 4), ("2g.20gb", 14, 0, 3),
        ("3g.40gb", 9, 0, 2), ("4g.40gb", 5, 0, 1), ("7g.80gb", 0, 0, 1)]
    me = profiles[1]
    assert (me.memory_gib, me.sm, me.dec, me.enc, me.ce, me.jpeg, me.ofa) == (9.5, 14, 1, 0, 1, 1, 1)


def test_lgi_lcip_lci():
    gis = parse_mig_gpu_instances(smi("mig_lgi_550_a100_80gb.txt"))
    assert [(g.profile, g.profile_id, g.instance_id, g.placement_start, g.placement_size) for g in gis] == [
        ("3g.40gb", 9, 1, 4, 4), ("4g.40gb", 5, 2, 0, 4)]
    cips = parse_mig_compute_instance_profiles(smi("mig_lcip_550_a100_80gb_two_gpu_instances.txt"))
    assert [(c.gpu_instance, c.profile, c.profile_id, c.default, c.free, c.total, c.sm) for c in cips] == [
        (1, "1c.3g.40gb", 0, False, 3, 3, 14), (1, "2c.3g.40gb", 1, False, 1, 1, 28), (1, "3g.40gb", 2, True, 1, 1, 42),
        (2, "1c.4g.40gb", 0, False, 4, 4, 14), (2, "2c.4g.40gb", 1, False, 2, 2, 28), (2, "4g.40gb", 3, True, 1, 1, 56)]
    cis = parse_mig_compute_instances(smi("mig_lci_mig_user_guide_a100_40gb.txt"))
    assert [(c.gpu_instance, c.profile, c.instance_id, c.placement_start) for c in cis] == [
        (1, "1c.3g.20gb", 0, None), (1, "1c.3g.20gb", 1, None), (1, "1c.3g.20gb", 2, None)]


@pytest.mark.parametrize("name,kind,count", [
    ("mig_lgip_550_a100_80gb.txt", "-lgip", 7), ("mig_lgi_550_a100_80gb.txt", "-lgi", 2),
    ("mig_lcip_550_a100_80gb_two_gpu_instances.txt", "-lcip", 6), ("mig_lci_mig_user_guide_a100_40gb.txt", "-lci", 3),
])
def test_a_listing_is_recognised_by_its_title_and_a_cut_copy_fails(name, kind, count):
    text = smi(name)
    got_kind, records = parse_mig_listing(text)
    assert (got_kind, len(records)) == (kind, count)
    lines = text.splitlines(keepends=True)
    with pytest.raises(ProbeParseError, match="truncated") as err:
        parse_mig_listing("".join(lines[:-1]))
    assert err.value.line == len(lines) - 1
    with pytest.raises(ProbeParseError, match="column headers"):
        parse_mig_listing("".join(lines[:3]))


def test_a_listing_refused_for_permissions_is_a_condition_not_a_parse_error():
    # the line of Project-HAMi/HAMi#1044 (tests/data/real/diagnose/nvidia-smi-mig-lci-insufficient-permissions.txt)
    with pytest.raises(NvidiaSmiFailure) as err:
        parse_mig_compute_instances("Failed to display compute instances: Insufficient Permissions\n")
    assert err.value.condition is SmiCondition.NO_PERMISSION
    with pytest.raises(ProbeParseError, match="title"):
        parse_mig_gpu_instances(smi("mig_lci_mig_user_guide_a100_40gb.txt"))


# --- nvidia-smi -mig ------------------------------------------------------------------------


def test_mig_mode_pending_reboot_warning():
    (vm,) = parse_mig_mode(smi("mig_mode_pending_not_supported_vm.txt"))
    assert (vm.bus_id, vm.mode, vm.pending, vm.reason) == ("00000000:00:03.0", "enabled", True, "Not Supported")
    (dgx,) = parse_mig_mode(smi("mig_mode_pending_in_use_dgx.txt"))
    assert (dgx.pending, dgx.reason) == (True, "In use by another client")
    (done,) = parse_mig_mode(smi("mig_mode_enabled_dgx.txt"))
    assert (done.mode, done.pending, done.reason) == ("enabled", False, None)


def test_mig_mode_without_all_done_is_truncated():
    text = smi("mig_mode_pending_in_use_dgx.txt").replace("All done.\n", "")
    with pytest.raises(ProbeParseError, match="truncated"):
        parse_mig_mode(text)
    with pytest.raises(ProbeParseError, match="not nvidia-smi -mig output"):
        parse_mig_mode("Enabled MIG Mode for GPU 00000000:07:00.0\nsomething else\nAll done.\n")


# --- nccl-tests under launchers -------------------------------------------------------------


@pytest.mark.parametrize("name,prefix,ranks,hosts,peak,avg", [
    ("all_reduce_mpirun_tag_output_2xRTX5090.txt", "[1,0]<stdout>:", 2, ("lab",), 2.31, 1.57614),
    ("all_reduce_skypilot_ray_mpirun_2x8xH200.txt", "(head, rank=0, pid=3808) [1,0]<stdout>:", 16,
     ("nc-d87e1263-head", "nc-d87e1263-worker1"), 332.58, 122.073),
    ("all_reduce_srun_label_2x8xH100_unchecked.txt", " 0: ", 16, ("node005", "node007"), 167.87, 142.735),
])
def test_prefixed_nccl_tests_output(name, prefix, ranks, hosts, peak, avg):
    run = parse_nccl_tests((NCCL / name).read_text(encoding="utf-8"))
    assert run.launcher_prefix == prefix
    assert (run.ranks, run.hosts, run.peak_busbw_gbps, run.avg_busbw_reported) == (ranks, hosts, peak, avg)
    assert run.avg_busbw_recomputed == pytest.approx(avg, abs=0.005)


def test_the_launcher_s_own_lines_and_other_ranks_are_skipped_and_line_numbers_kept():
    text = (NCCL / "all_reduce_mpirun_tag_output_2xRTX5090.txt").read_text(encoding="utf-8")
    assert parse_nccl_tests(text).program == "all_reduce_perf_mpi"
    lines = text.splitlines(keepends=True)
    bad = next(i for i, line in enumerate(lines) if "  4194304  " in line)
    lines[bad] = lines[bad].replace("4374.00", "4374.0x")
    with pytest.raises(ProbeParseError) as err:
        parse_nccl_tests("".join(lines))
    assert err.value.line == bad + 1


@pytest.mark.parametrize("name", sorted(p.name for p in NCCL.glob("*.txt")))
def test_a_prefixed_run_cut_before_its_summary_fails_clearly(name):
    lines = (NCCL / name).read_text(encoding="utf-8").splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if "# Out of bounds values" in line)
    with pytest.raises(ProbeParseError, match="did not finish"):
        parse_nccl_tests("".join(lines[:cut]))
