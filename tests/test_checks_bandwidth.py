"""The bandwidth checks' decisions (bandwidth.pcie-link-at-max, bandwidth.host-device-floor) and
their table, on emulated probe output edited the way real hardware differs, and the table's floors
against the public measurements kept under tests/data/real/bandwidth/."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from gpuconf.checks.bandwidth import FLOOR_CHECK, LINK_CHECK, evaluate_host_device_floor, evaluate_pcie_link_at_max
from gpuconf.compat import tables
from gpuconf.compat.links import host_link, link_for
from gpuconf.compat.versions import parse_cuda
from gpuconf.probes.cuda import CudaProbeReport, parse_cuda_probe
from gpuconf.sim.emulate import Visible, cuda_probe_run
from gpuconf.sim.profile import expand, load_profile, with_faults
from gpuconf.verdict import Outcome

REAL = Path(__file__).resolve().parent / "data" / "real" / "bandwidth"
#: The PCI bus ids of the simulated h100-0's eight GPUs, as NVML writes them.
BUS_IDS = ("00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0", "00000000:9A:00.0",
           "00000000:AB:00.0", "00000000:BA:00.0", "00000000:DB:00.0")


def doc(profile: str = "healthy-h100", node: str = "h100-0",
        faults: list[dict[str, Any]] | None = None) -> tuple[int, dict[str, Any]]:
    p = load_profile(profile)
    n = expand(with_faults(p, faults) if faults else p).node(node)
    code, out = cuda_probe_run(n, visible=[Visible(g) for g in n.gpus], image_cuda=parse_cuda("13.0.2"), env={},
                               compat=True, started_at="2026-12-01T00:00:00.000Z", hostname=n.name)
    return code, json.loads(out)


def report(code: int, d: dict[str, Any]) -> CudaProbeReport:
    return parse_cuda_probe(json.dumps(d), exit_code=code)


def edited(edit: Any, profile: str = "healthy-h100", node: str = "h100-0") -> CudaProbeReport:
    code, d = doc(profile, node)
    d = copy.deepcopy(d)
    edit(d)
    return report(code, d)


def gpu3_pcie(**values: Any) -> Any:
    def edit(d: dict[str, Any]) -> None:
        d["nvml"]["gpus"][3]["pcie"].update(values)
    return edit


def gpu3_bw(**values: Any) -> Any:
    def edit(d: dict[str, Any]) -> None:
        d["devices"][3]["host_device_bw"].update(values)
    return edit


def every_bw(**values: Any) -> Any:
    def edit(d: dict[str, Any]) -> None:
        for dev in d["devices"]:
            dev["host_device_bw"].update(values)
    return edit


# --- the table ------------------------------------------------------------------------------------


def test_every_link_rate_is_the_pci_sig_arithmetic():
    per_lane = {1: 2.5 * 8 / 10, 2: 5 * 8 / 10, 3: 8 * 128 / 130, 4: 16 * 128 / 130, 5: 32 * 128 / 130}  # Gb/s
    for key, row in tables.load("host_bandwidth")["links"].items():
        if row["bus"] == "pcie":
            assert row["gbps"] == pytest.approx(per_lane[row["gen"]] * row["width"] / 8, abs=0.01), key
    assert link_for(5, 8).gbps == pytest.approx(31.51) and link_for(6, 16) is None


def test_every_gpu_row_names_a_known_link_a_source_and_a_catalogued_or_superchip_model():
    data = tables.load("host_bandwidth")
    for row in data["gpus"]:
        assert row["link"] in data["links"] and row["source"].startswith("https://"), row
        assert tables.find_gpu(row["name"]) is not None or row["form"] == "c2c", row
        assert (row["form"] == "c2c") == (data["links"][row["link"]]["bus"] == "c2c"), row
    assert host_link("H100").link.gen == 5 and host_link("NVIDIA GH200 480GB").link.bus == "c2c"
    assert host_link("NVIDIA B200") is None


#: Healthy public measurements (tests/data/real/bandwidth/SOURCES.md): link, direction, the figure as
#: printed, GB/s, sample. The lowest healthy figure of each sample is the one taken.
HEALTHY_REAL = [
    ("pcie-gen5-x16", "h2d", "56.68", 56.68, "nvbandwidth-h100-vm-one-gpu-degraded.txt"),
    ("pcie-gen5-x16", "d2h", "52.76", 52.76, "nvbandwidth-h100-sm-h2d-d2h.txt"),
    ("pcie-gen4-x16", "h2d", "25.13", 25.13, "nvbandwidth-a100-h2d-sm.txt"),
    ("pcie-gen4-x16", "h2d", "23.90", 23.90, "nvbandwidth-rtx4090-gen4-ce.txt"),
    ("pcie-gen4-x16", "d2h", "26.25", 26.25, "nvbandwidth-rtx4090-gen4-ce.txt"),
    ("pcie-gen3-x16", "h2d", "12150.7", 12.1507, "bandwidthtest-p100-pcie-gen3.txt"),
    ("nvlink-c2c", "h2d", "346 GB/s", 346.0, "nvbandwidth-gh200-c2c.txt"),
]


@pytest.mark.parametrize("link,direction,printed,gbps,sample", HEALTHY_REAL,
                         ids=[f"a healthy {k} at {v:g} GB/s {d} ({s}) is above its floor"
                              for k, d, _, v, s in HEALTHY_REAL])
def test_public_healthy_measurements_clear_their_floor(link, direction, printed, gbps, sample):
    assert printed in (REAL / sample).read_text(), f"{printed} not in {sample}"
    data = tables.load("host_bandwidth")
    row = data["links"][link]
    assert gbps > data["floors"][row["bus"]]["degraded_below"] * row["gbps"]


def test_the_public_degraded_h100_is_far_below_the_floor_and_its_siblings():
    text = (REAL / "nvbandwidth-h100-vm-one-gpu-degraded.txt").read_text()
    figures = [float(x) for x in re.findall(r"\d+\.\d+", text.split("bandwidths between")[1].split("respectively")[0])]
    assert figures == [14.2, 57.06, 56.68, 57.07]
    link = host_link("H100").link
    floors = tables.load("host_bandwidth")["floors"]["pcie"]
    assert figures[0] < floors["fail_below"] * link.gbps < floors["degraded_below"] * link.gbps < min(figures[1:])


# --- bandwidth.pcie-link-at-max ---------------------------------------------------------------------


LINK_CASES = [
    ("every H100 at Gen5 x16 under load passes", gpu3_pcie(), Outcome.PASS, None),
    ("a GPU trained at Gen4 under load is degraded, named with its bus id",
     gpu3_pcie(link_gen_current=4, link_gen_max=4), Outcome.DEGRADED,
     "GPU 3 00000000:5D:00.0 (NVIDIA H100 80GB HBM3) runs at Gen4 x16 under load, expected Gen5 x16"),
    ("a GPU at x8 is degraded", gpu3_pcie(link_width_current=8), Outcome.DEGRADED, "runs at Gen5 x8 under load"),
    ("an idle reading (Gen1) is not judged: only the maximum, said so",
     gpu3_pcie(link_gen_current=1, sampled_under_load=False), Outcome.PASS, None),
    ("an idle reading with a maximum below the model is degraded",
     gpu3_pcie(link_gen_current=1, link_gen_max=4, sampled_under_load=False), Outcome.DEGRADED,
     "runs at Gen4 x16 maximum (current not read under load)"),
    ("replays during the copies above DCGM's 8 per minute are degraded",
     gpu3_pcie(replay_counter=10, replay_counter_after_load=13, load_window_ms=100.0), Outcome.DEGRADED,
     "3 PCIe replay(s) in 100 ms of copies (1800/min, limit 8/min; 13 since the driver loaded)"),
    ("old replays that did not grow during the copies pass",
     gpu3_pcie(replay_counter=500, replay_counter_after_load=500), Outcome.PASS, None),
]


@pytest.mark.parametrize("edit,outcome,message", [c[1:] for c in LINK_CASES], ids=[c[0] for c in LINK_CASES])
def test_pcie_link_at_max(edit, outcome, message):
    v = evaluate_pcie_link_at_max("h100-0", edited(edit))
    assert v.check == LINK_CHECK and v.outcome is outcome, v.message()
    if message:
        assert message in v.summary
    if outcome is Outcome.PASS:
        assert "8 GPU(s) on h100-0 run their PCIe link at its maximum" in v.summary


def test_the_declared_link_of_the_expect_pool_wins_over_the_table():
    v = evaluate_pcie_link_at_max("h100-0", edited(gpu3_pcie()), declared=(5, 16))
    assert v.outcome is Outcome.PASS
    v = evaluate_pcie_link_at_max("h100-0", edited(gpu3_pcie(link_gen_current=4, link_gen_max=4)), declared=(4, 16))
    assert v.outcome is Outcome.PASS, v.message()


def test_an_unknown_model_is_judged_against_the_gpus_own_maximum():
    def edit(d: dict[str, Any]) -> None:
        for g in d["nvml"]["gpus"]:
            g["name"] = "NVIDIA Future GPU"
        d["nvml"]["gpus"][3]["pcie"].update(link_gen_current=3)
    v = evaluate_pcie_link_at_max("h100-0", edited(edit))
    assert v.outcome is Outcome.DEGRADED and ("expected Gen5 x16 (the GPU's own maximum Gen5 as NVML reads it, NVIDIA "
                                              "Future GPU not being in host_bandwidth.yaml)") in v.summary


def future_gpus(width_max: int, width_current: int) -> Any:
    """Every GPU renamed to a model host_bandwidth.yaml lacks (a Gen5 GPU), NVML's maximum width for
    GPU and slot ``width_max``, each link at ``width_current`` under load."""
    def edit(d: dict[str, Any]) -> None:
        for g in d["nvml"]["gpus"]:
            g["name"] = "NVIDIA Future GPU"
            g["pcie"].update(link_width_max=width_max, link_width_current=width_current)
    return edit


def test_an_unknown_model_s_width_below_x16_is_not_judged_against_the_slot_s():
    """A Gen5 GPU of an unknown model in x8 slots passed "run their PCIe link at its maximum": NVML's
    maximum width is the GPU's and the slot's together, so an x16 GPU in an x8 slot looks like an x8 GPU."""
    v = evaluate_pcie_link_at_max("h100-0", edited(future_gpus(8, 8)))
    assert (v.outcome, v.kind) == (Outcome.NOT_TESTED, "could-not-run")
    assert v.summary == ("the PCIe link of 8 of 8 GPU(s) on h100-0 is not judged: the width of "
                         + ", ".join(f"GPU {i} {bus} x8 under load" for i, bus in enumerate(BUS_IDS))
                         + " (their generation the GPU's own maximum): NVIDIA Future GPU is not in "
                         "gpuconf/data/host_bandwidth.yaml and NVML's maximum width x8 is the GPU's and its slot's "
                         "together, so a slot narrower than the GPU cannot be told (add the model to "
                         "gpuconf/data/host_bandwidth.yaml)")
    # at x16, NVML's maximum is the GPU's own too: an x8 link under load is judged, and degraded
    x16 = evaluate_pcie_link_at_max("h100-0", edited(future_gpus(16, 8)))
    assert x16.outcome is Outcome.DEGRADED
    assert x16.summary.startswith(f"8 PCIe link problem(s) on h100-0: GPU 0 {BUS_IDS[0]} (NVIDIA Future GPU) runs at "
                                  "Gen5 x8 under load, expected Gen5 x16 (the GPU's own maximum Gen5 as NVML reads it, "
                                  "NVIDIA Future GPU not being in host_bandwidth.yaml)")
    assert evaluate_pcie_link_at_max("h100-0", edited(future_gpus(16, 16))).outcome is Outcome.PASS
    # a generation below the GPU's own is still a finding, its width named as not judged
    def slow(d: dict[str, Any]) -> None:
        future_gpus(8, 8)(d)
        d["nvml"]["gpus"][3]["pcie"].update(link_gen_current=3)
    low = evaluate_pcie_link_at_max("h100-0", edited(slow))
    assert low.outcome is Outcome.DEGRADED
    assert low.summary.startswith(f"1 PCIe link problem(s) on h100-0: GPU 3 {BUS_IDS[3]} (NVIDIA Future GPU) runs at "
                                  "Gen3 x8 under load, expected Gen5 (width not known) (the GPU's own maximum Gen5")
    assert f" (not judged: the width of GPU 0 {BUS_IDS[0]} x8 under load, " in low.summary
    # the declared link of the --expect pool says the width: judged
    assert evaluate_pcie_link_at_max("h100-0", edited(future_gpus(8, 8)), declared=(5, 16)).outcome \
        is Outcome.DEGRADED


def in_a_gen4_slot(d: dict[str, Any], gpu: int = 3) -> None:
    """GPU ``gpu`` (a Gen5 GPU) seated in a Gen4 slot: NVML's maximum for GPU and slot is 4, the
    GPU's own 5, and the link trains to Gen4 under load."""
    d["nvml"]["gpus"][gpu]["pcie"].update(link_gen_current=4, link_gen_max=4, link_gen_gpu_max=5)


def test_an_unknown_model_in_a_slot_below_its_generation_is_degraded_not_passed_against_the_slot():
    def edit(d: dict[str, Any]) -> None:
        for g in d["nvml"]["gpus"]:
            g["name"] = "NVIDIA Future GPU"
        in_a_gen4_slot(d)
    v = evaluate_pcie_link_at_max("h100-0", edited(edit))
    assert v.outcome is Outcome.DEGRADED
    assert v.summary.endswith("runs at Gen4 x16 under load, expected Gen5 x16 (the GPU's own maximum Gen5 as NVML "
                              "reads it, NVIDIA Future GPU not being in host_bandwidth.yaml); the slot or platform "
                              "allows at most Gen4, the GPU can run Gen5")


def test_a_known_model_in_a_slot_below_its_generation_says_the_slot_caps_it():
    v = evaluate_pcie_link_at_max("h100-0", edited(in_a_gen4_slot))
    assert v.outcome is Outcome.DEGRADED and "(NVIDIA H100 80GB HBM3 in host_bandwidth.yaml); the slot or platform " \
        "allows at most Gen4, the GPU can run Gen5" in v.summary


def test_an_unknown_model_without_the_gpus_own_maximum_is_not_tested_naming_the_table():
    def edit(d: dict[str, Any]) -> None:
        for g in d["nvml"]["gpus"]:
            g["name"] = "NVIDIA Future GPU"
            g["pcie"]["link_gen_gpu_max"] = {"available": False, "reason": "nvmlDeviceGetGpuMaxPcieLinkGeneration: "
                                                                            "Not Supported"}
    v = evaluate_pcie_link_at_max("h100-0", edited(edit))
    assert v.outcome is Outcome.NOT_TESTED
    assert v.summary == ("no GPU on h100-0 has a PCIe link to judge: all 8 GPU(s): NVIDIA Future GPU is not in "
                         "gpuconf/data/host_bandwidth.yaml and NVML gave no GPU maximum generation: add the model to "
                         "gpuconf/data/host_bandwidth.yaml")


def test_one_gpu_whose_link_is_not_judged_leaves_the_node_not_tested_naming_it():
    def edit(d: dict[str, Any]) -> None:
        d["nvml"]["gpus"][6]["pcie"] = {"available": False, "reason": "nvmlDeviceGetCurrPcieLinkGeneration: "
                                                                      "Unknown Error"}
    v = evaluate_pcie_link_at_max("h100-0", edited(edit))
    assert v.outcome is Outcome.NOT_TESTED
    assert v.summary.startswith("the PCIe link of 1 of 8 GPU(s) on h100-0 is not judged: GPU 6 ")
    assert v.summary.endswith("NVML gave no PCIe link (nvmlDeviceGetCurrPcieLinkGeneration: Unknown Error) (7 other "
                              "GPU(s) at their link)")


def test_no_nvml_or_no_pcie_section_is_not_tested_with_the_reason():
    v = evaluate_pcie_link_at_max("h100-0", edited(lambda d: d.update(nvml={"available": False, "reason": "no lib"})))
    assert v.outcome is Outcome.NOT_TESTED and v.summary == ("blocked by driver.nvml-initializes: NVML did not "
                                                  "initialise in the probe (no lib)")

    def absent(d: dict[str, Any]) -> None:
        for g in d["nvml"]["gpus"]:
            g["pcie"] = {"available": False, "reason": "nvmlDeviceGetCurrPcieLinkGeneration: Not Supported"}
    v = evaluate_pcie_link_at_max("h100-0", edited(absent))
    assert v.outcome is Outcome.NOT_TESTED
    assert "all 8 GPU(s): NVML gave no PCIe link (nvmlDeviceGetCurrPcieLinkGeneration: Not Supported)" in v.summary


def test_a_grace_superchip_has_no_pcie_link_to_judge():
    def edit(d: dict[str, Any]) -> None:
        for g in d["nvml"]["gpus"]:
            g["name"] = "NVIDIA GH200 480GB"
    v = evaluate_pcie_link_at_max("h100-0", edited(edit))
    assert v.outcome is Outcome.NOT_TESTED and "reaches the host over NVLink-C2C, not PCIe" in v.summary


# --- bandwidth.host-device-floor --------------------------------------------------------------------


FLOOR_CASES = [
    ("eight H100 at about 54 GB/s pass", gpu3_bw(), Outcome.PASS, None),
    ("a GPU at Gen4's rate is degraded: below the floor", gpu3_bw(h2d_gbps=26.8), Outcome.DEGRADED,
     "GPU 3 0000:5d:00.0 host-to-device 26.8 GB/s, below the floor 44.1 (Gen5 x16 expected)"),
    ("a GPU at Gen3's rate fails: far below", gpu3_bw(d2h_gbps=13.4), Outcome.FAIL,
     "GPU 3 0000:5d:00.0 device-to-host 13.4 GB/s, far below the floor 44.1 (under 22.1: Gen5 x16 expected)"),
    ("copies that did not complete are degraded", gpu3_bw(ok=False, h2d_gbps=None, d2h_gbps=None), Outcome.DEGRADED,
     "copies did not complete"),
]


@pytest.mark.parametrize("edit,outcome,message", [c[1:] for c in FLOOR_CASES], ids=[c[0] for c in FLOOR_CASES])
def test_host_device_floor(edit, outcome, message):
    v = evaluate_host_device_floor("h100-0", edited(edit))
    assert v.check == FLOOR_CHECK and v.outcome is outcome, v.message()
    if message:
        assert message in v.summary
    measured = 7 if "did not complete" in (message or "") else 8
    assert [i for i, _ in v.facts["series"]["h2d_gbps"]] == [i for i in range(8) if measured == 8 or i != 3]


def unknown_model(**gpu3: Any) -> Any:
    def edit(d: dict[str, Any]) -> None:
        for dev in d["devices"]:
            dev["name"] = "NVIDIA Future GPU"
        d["devices"][3]["host_device_bw"].update(gpu3)
    return edit


def test_unknown_hardware_has_no_floor_but_one_gpu_at_half_its_siblings_is_named():
    v = evaluate_host_device_floor("h100-0", edited(unknown_model()))
    assert v.outcome is Outcome.NOT_TESTED
    assert v.summary == ("no bandwidth floor for NVIDIA Future GPU in gpuconf/data/host_bandwidth.yaml (add the model "
                         "there): its 8 GPU(s) agree with each other")
    v = evaluate_host_device_floor("h100-0", edited(unknown_model(h2d_gbps=27.0)))
    assert v.outcome is Outcome.DEGRADED
    assert "GPU 3 0000:5d:00.0 host-to-device 27.0 GB/s, under 0.6 of its 7 sibling(s)' median 53.4" in v.summary


def test_one_unknown_gpu_alone_is_not_tested_with_the_reason():
    def edit(d: dict[str, Any]) -> None:
        d["devices"] = d["devices"][:1]
        d["devices"][0]["name"] = "NVIDIA Future GPU"
        d["device_count"]["value"] = 1
    v = evaluate_host_device_floor("h100-0", edited(edit))
    assert v.outcome is Outcome.NOT_TESTED
    assert v.summary == ("no bandwidth floor for NVIDIA Future GPU in gpuconf/data/host_bandwidth.yaml (add the model "
                         "there): no sibling GPU on h100-0 to compare with")


def test_mig_instances_are_not_measured_and_the_idle_link_is_not_judged_as_current():
    n = expand(load_profile("a100-mig-mixed")).node("a100-0")
    visible = [Visible(g, m) for g in n.gpus for m in g.mig]
    code, out = cuda_probe_run(n, visible=visible, image_cuda=parse_cuda("13.0.2"), env={}, compat=True,
                               started_at="2026-12-01T00:00:00.000Z", hostname=n.name)
    probe = report(code, json.loads(out))
    v = evaluate_host_device_floor("a100-0", probe)
    assert v.outcome is Outcome.NOT_TESTED
    assert "not measured (not measured: a MIG instance (its copy engines are a slice of the GPU's))" in v.summary
    v = evaluate_pcie_link_at_max("a100-0", probe)
    assert v.outcome is Outcome.PASS, v.message()
    assert "Gen4 x16 maximum (current not read under load)" in v.evidence[0]


def test_a_declared_link_sets_the_floor():
    v = evaluate_host_device_floor("h100-0", edited(every_bw(h2d_gbps=26.8, d2h_gbps=27.0)), declared=(4, 16))
    assert v.outcome is Outcome.PASS, v.message()
    assert "floor 22.1 GB/s (0.7 of Gen4 x16 31.51 GB/s, the --expect pool's link)" in v.evidence[0]


def test_a_probe_without_copies_is_not_tested():
    def edit(d: dict[str, Any]) -> None:
        for dev in d["devices"]:
            del dev["host_device_bw"]
    v = evaluate_host_device_floor("h100-0", edited(edit))
    assert v.outcome is Outcome.NOT_TESTED and "the probe did not measure copies" in v.summary


@pytest.mark.parametrize("fault,check,outcome", [
    ({"id": "pcie-link-degraded", "pool": "h100", "node": 0, "gpu": 3}, "link", Outcome.DEGRADED),
    ({"id": "pcie-link-degraded", "pool": "h100", "node": 0, "gpu": 3, "gen": 3}, "floor", Outcome.FAIL),
    ({"id": "pcie-link-degraded", "pool": "h100", "node": 0, "gpu": 3, "gen": 5, "width": 8}, "floor",
     Outcome.DEGRADED),
    ({"id": "pcie-replays", "pool": "h100", "node": 0, "gpu": 3}, "link", Outcome.DEGRADED),
    ({"id": "pcie-replays", "pool": "h100", "node": 0, "gpu": 3}, "floor", Outcome.PASS),
], ids=["the simulated Gen4 link degrades the link check", "a Gen3 link fails the floor",
        "a Gen5 x8 link degrades the floor", "replays degrade the link check", "replays leave the floor passing"])
def test_simulated_faults_reach_the_checks(fault, check, outcome):
    probe = report(*doc(faults=[fault]))
    evaluate = evaluate_pcie_link_at_max if check == "link" else evaluate_host_device_floor
    v = evaluate("h100-0", probe)
    assert v.outcome is outcome, v.message()
    if outcome is not Outcome.PASS:
        assert "GPU 3 " in v.summary


def test_a_whole_gpu_whose_copies_were_not_measured_leaves_the_floor_not_tested_naming_it():
    def edit(d: dict[str, Any]) -> None:
        d["devices"][5]["host_device_bw"] = {"available": False, "reason": "cudaMallocHost failed: out of memory"}
    v = evaluate_host_device_floor("h100-0", edited(edit))
    assert v.outcome is Outcome.NOT_TESTED
    assert v.summary.startswith("1 GPU(s) on h100-0 were not measured, so they are not judged: GPU 5 ")
    assert v.summary.endswith("(cudaMallocHost failed: out of memory) (7 other GPU(s) reach their floor)")
