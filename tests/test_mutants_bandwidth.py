"""The bandwidth checks' decisions, every branch, with what each says recorded whole in
tests/data/verdicts/bandwidth.json (tests/verdict_record.py): the outcome, summary, expected and
observed line, evidence, remedy, NOT TESTED kind and blocker, on the simulator's healthy h100-0
whole-node probe edited the way real hardware differs, one thing per case. The boundaries the
recording holds are stated as rules below."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from test_checks_bandwidth import doc, edited, every_bw, gpu3_bw, gpu3_pcie, report
from verdict_record import check_recording, whole

from gpuconf.checks.bandwidth import evaluate_host_device_floor, evaluate_pcie_link_at_max, series
from gpuconf.compat.versions import parse_cuda
from gpuconf.sim.emulate import Visible, cuda_probe_run
from gpuconf.sim.profile import expand, load_profile
from gpuconf.verdict import Outcome

Edit = Callable[[dict[str, Any]], None]


def each(*edits: Edit) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        for e in edits:
            e(d)
    return edit


def gpu_pcie(index: int, **values: Any) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        d["nvml"]["gpus"][index]["pcie"].update(values)
    return edit


def every_pcie(**values: Any) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        for g in d["nvml"]["gpus"]:
            g["pcie"].update(values)
    return edit


def named(name: str, *indexes: int, devices: bool = False) -> Edit:
    """GPUs ``indexes`` (every GPU when none) renamed ``name``: in NVML's list, or CUDA's devices."""
    def edit(d: dict[str, Any]) -> None:
        gpus = d["devices"] if devices else d["nvml"]["gpus"]
        for i, g in enumerate(gpus):
            if not indexes or i in indexes:
                g["name"] = name
    return edit


def no_pcie(*indexes: int, reason: str = "nvmlDeviceGetCurrPcieLinkGeneration: Unknown Error") -> Edit:
    def edit(d: dict[str, Any]) -> None:
        for i, g in enumerate(d["nvml"]["gpus"]):
            if not indexes or i in indexes:
                g["pcie"] = {"available": False, "reason": reason}
    return edit


def unread(index: int, *fields: str) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        for f in fields:
            d["nvml"]["gpus"][index]["pcie"][f] = {"available": False, "reason": "Not Supported"}
    return edit


def gpu_bw(index: int, **values: Any) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        d["devices"][index]["host_device_bw"].update(values)
    return edit


def no_bw(*indexes: int, reason: str = "cudaMallocHost failed: out of memory") -> Edit:
    def edit(d: dict[str, Any]) -> None:
        for i, dev in enumerate(d["devices"]):
            if not indexes or i in indexes:
                dev["host_device_bw"] = {"available": False, "reason": reason}
    return edit


def only(n: int) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        d["devices"] = d["devices"][:n]
        d["device_count"]["value"] = n
    return edit


def link(edit: Edit | None = None, **kw: Any) -> Any:
    return evaluate_pcie_link_at_max("h100-0", edited(edit or (lambda d: None)), **kw)


def floor(edit: Edit | None = None, **kw: Any) -> Any:
    return evaluate_host_device_floor("h100-0", edited(edit or (lambda d: None)), **kw)


def mig_probe() -> Any:
    """The whole-node probe of the simulator's a100-mig-mixed node, every GPU a set of MIG instances."""
    n = expand(load_profile("a100-mig-mixed")).node("a100-0")
    visible = [Visible(g, m) for g in n.gpus for m in g.mig]
    code, out = cuda_probe_run(n, visible=visible, image_cuda=parse_cuda("13.0.2"), env={}, compat=True,
                               started_at="2026-12-01T00:00:00.000Z", hostname=n.name)
    return report(code, json.loads(out))


MIG_PROBE = mig_probe()

#: A PCIe fact NVML could not read, as the probe writes it.
NA = {"available": False, "reason": "Not Supported"}

CASES: dict[str, Callable[[], Any]] = {
    # bandwidth.pcie-link-at-max
    "link: healthy": lambda: link(),
    "link: nvml blocked": lambda: link(lambda d: d.update(nvml={"available": False, "reason": "no lib"})),
    "link: nvml lists no gpu": lambda: link(lambda d: d["nvml"].update(gpus=[])),
    "link: every gpu over c2c": lambda: link(named("NVIDIA GH200 480GB")),
    "link: one gpu over c2c": lambda: link(named("NVIDIA GH200 480GB", 0)),
    "link: no pcie section anywhere": lambda: link(no_pcie()),
    "link: no pcie section on one": lambda: link(no_pcie(6)),
    "link: no pcie section beside a slow gpu": lambda: link(each(no_pcie(6), gpu3_pcie(link_gen_current=4))),
    "link: maximum generation unread": lambda: link(unread(2, "link_gen_max")),
    "link: maximum width unread": lambda: link(unread(2, "link_width_max", "link_gen_gpu_max")),
    "link: current generation unread": lambda: link(unread(2, "link_gen_current")),
    "link: current width unread": lambda: link(unread(2, "link_width_current")),
    "link: c2c and no pcie": lambda: link(each(named("NVIDIA GH200 480GB", 0), no_pcie(1, 2, 3, 4, 5, 6, 7))),
    "link: unknown model, no gpu maximum": lambda: link(each(named("NVIDIA Future GPU"),
                                                             every_pcie(link_gen_gpu_max=NA))),
    "link: unknown model on one gpu, no gpu maximum": lambda: link(each(named("NVIDIA Future GPU", 5),
                                                                        gpu_pcie(5, link_gen_gpu_max=NA))),
    "link: unnamed gpu, no gpu maximum": lambda: link(each(named("", 5), gpu_pcie(5, link_gen_gpu_max=NA))),
    "link: unknown model at x16": lambda: link(named("NVIDIA Future GPU")),
    "link: unknown model at x16 trained to x8": lambda: link(each(named("NVIDIA Future GPU"),
                                                                  gpu3_pcie(link_width_current=8))),
    "link: unknown model in x8 slots": lambda: link(each(named("NVIDIA Future GPU"),
                                                         every_pcie(link_width_max=8, link_width_current=8))),
    "link: unknown model in one x8 slot": lambda: link(each(named("NVIDIA Future GPU"),
                                                            gpu3_pcie(link_width_max=8, link_width_current=8))),
    "link: two unknown models in x8 and x4 slots": lambda: link(each(
        named("NVIDIA Future GPU"), named("NVIDIA Other GPU", 1), gpu_pcie(1, link_width_max=4, link_width_current=4),
        gpu3_pcie(link_width_max=8, link_width_current=8))),
    "link: unknown model at x8, idle": lambda: link(each(named("NVIDIA Future GPU"), gpu3_pcie(
        link_width_max=8, link_width_current=2, sampled_under_load=False))),
    "link: unknown model at x8 below its generation": lambda: link(each(
        named("NVIDIA Future GPU"), every_pcie(link_width_max=8, link_width_current=8),
        gpu3_pcie(link_gen_current=3))),
    "link: unknown model at x8, replays": lambda: link(each(
        named("NVIDIA Future GPU"), every_pcie(link_width_max=8, link_width_current=8),
        gpu3_pcie(replay_counter=10, replay_counter_after_load=13, load_window_ms=100.0))),
    "link: trained to gen4": lambda: link(gpu3_pcie(link_gen_current=4, link_gen_max=4)),
    "link: trained to x8": lambda: link(gpu3_pcie(link_width_current=8)),
    "link: trained to gen3 x4": lambda: link(gpu3_pcie(link_gen_current=3, link_width_current=4)),
    "link: in a gen4 slot": lambda: link(gpu3_pcie(link_gen_current=4, link_gen_max=4, link_gen_gpu_max=5)),
    "link: gpu maximum unknown": lambda: link(every_pcie(link_gen_gpu_max=NA)),
    "link: idle at gen1": lambda: link(gpu3_pcie(link_gen_current=1, sampled_under_load=False)),
    "link: idle, maximum gen4": lambda: link(gpu3_pcie(link_gen_current=1, link_gen_max=4, sampled_under_load=False)),
    "link: under load, current unread": lambda: link(gpu3_pcie(link_gen_current=NA, link_gen_max=4)),
    "link: under load, width unread": lambda: link(gpu3_pcie(link_width_current=NA, link_width_max=8)),
    "link: replays grew fast": lambda: link(gpu3_pcie(replay_counter=10, replay_counter_after_load=13,
                                                      load_window_ms=100.0)),
    "link: replays at the limit": lambda: link(gpu3_pcie(replay_counter=10, replay_counter_after_load=18,
                                                         load_window_ms=60000.0)),
    "link: replays just over the limit": lambda: link(gpu3_pcie(replay_counter=10, replay_counter_after_load=19,
                                                                load_window_ms=60000.0)),
    "link: replays did not grow": lambda: link(gpu3_pcie(replay_counter=500, replay_counter_after_load=500,
                                                         load_window_ms=100.0)),
    "link: replays fell": lambda: link(gpu3_pcie(replay_counter=500, replay_counter_after_load=400,
                                                 load_window_ms=100.0)),
    "link: replays after the load unread": lambda: link(gpu3_pcie(replay_counter=10, replay_counter_after_load=NA,
                                                                  load_window_ms=100.0)),
    "link: replays before the load unread": lambda: link(gpu3_pcie(replay_counter=NA, replay_counter_after_load=13,
                                                                   load_window_ms=100.0)),
    "link: replays without a window": lambda: link(gpu3_pcie(replay_counter=10, replay_counter_after_load=13,
                                                             load_window_ms=0.0)),
    "link: replays and a slow link": lambda: link(gpu3_pcie(link_gen_current=4, replay_counter=10,
                                                            replay_counter_after_load=13, load_window_ms=100.0)),
    "link: declared, met": lambda: link(declared=(5, 16)),
    "link: declared gen4, met": lambda: link(every_pcie(link_gen_current=4, link_gen_max=4), declared=(4, 16)),
    "link: declared, not met": lambda: link(gpu3_pcie(link_width_current=8, link_width_max=8), declared=(5, 16)),
    "link: declared for an unknown model in x8 slots": lambda: link(each(
        named("NVIDIA Future GPU"), every_pcie(link_width_max=8, link_width_current=8)), declared=(5, 8)),
    # bandwidth.host-device-floor
    "floor: healthy": lambda: floor(),
    "floor: below": lambda: floor(gpu3_bw(h2d_gbps=26.8)),
    "floor: far below": lambda: floor(gpu3_bw(d2h_gbps=13.4)),
    "floor: both directions below": lambda: floor(gpu3_bw(h2d_gbps=26.8, d2h_gbps=13.4)),
    "floor: at the floor": lambda: floor(gpu3_bw(h2d_gbps=44.107)),
    "floor: at the fail line": lambda: floor(gpu3_bw(h2d_gbps=22.0535)),
    "floor: copies did not complete": lambda: floor(gpu3_bw(ok=False, h2d_gbps=None, d2h_gbps=None)),
    "floor: copies did not complete, figures kept": lambda: floor(gpu3_bw(ok=False)),
    "floor: one direction": lambda: floor(gpu3_bw(h2d_gbps=None)),
    "floor: one gpu unmeasured": lambda: floor(no_bw(5)),
    "floor: one gpu unmeasured beside a slow one": lambda: floor(each(no_bw(5), gpu3_bw(h2d_gbps=26.8))),
    "floor: none measured": lambda: floor(no_bw()),
    "floor: no copies section": lambda: floor(lambda d: [dev.pop("host_device_bw") for dev in d["devices"]]),
    "floor: no device": lambda: floor(only(0)),
    "floor: unknown model agreeing": lambda: floor(named("NVIDIA Future GPU", devices=True)),
    "floor: unknown model, one at half": lambda: floor(each(named("NVIDIA Future GPU", devices=True),
                                                            gpu3_bw(h2d_gbps=27.0))),
    "floor: unknown model, one at 0.6 of the median": lambda: floor(each(named("NVIDIA Future GPU", devices=True),
                                                                         every_bw(h2d_gbps=50.0),
                                                                         gpu3_bw(h2d_gbps=30.0))),
    "floor: unknown model alone": lambda: floor(each(only(1), named("NVIDIA Future GPU", devices=True))),
    "floor: unnamed gpus": lambda: floor(named("", devices=True)),
    "floor: one unknown beside known": lambda: floor(named("NVIDIA Future GPU", 3, devices=True)),
    "floor: declared gen4 link": lambda: floor(every_bw(h2d_gbps=26.8, d2h_gbps=27.0), declared=(4, 16)),
    "floor: declared link no table has": lambda: floor(declared=(6, 16)),
    "floor: below its siblings, above a declared floor": lambda: floor(gpu3_bw(h2d_gbps=25.0), declared=(4, 16)),
    "floor: siblings of two models": lambda: floor(each(named("NVIDIA Future GPU", 0, 1, devices=True),
                                                        gpu_bw(0, h2d_gbps=20.0))),
    "floor: grace": lambda: floor(each(named("NVIDIA GH200 480GB", devices=True), every_bw(h2d_gbps=400.0,
                                                                                          d2h_gbps=120.0))),
    "link: no pcie key": lambda: link(lambda d: d["nvml"]["gpus"][2].pop("pcie")),
    "link: one replay in a short window": lambda: link(gpu3_pcie(replay_counter=10, replay_counter_after_load=11,
                                                                 load_window_ms=1.0)),
    "link: an unnamed unknown gpu trained down": lambda: link(each(named("", 3), gpu3_pcie(link_width_current=8))),
    "link: an unnamed unknown gpu in an x8 slot": lambda: link(each(named("", 3), gpu3_pcie(link_width_max=8,
                                                                                           link_width_current=8))),
    "link: two unjudged beside a slow gpu": lambda: link(each(no_pcie(5, 6), gpu3_pcie(link_gen_current=4))),
    "floor: two unknown models agreeing": lambda: floor(each(named("NVIDIA Future GPU", devices=True),
                                                             named("NVIDIA Other GPU", 0, 1, devices=True))),
    "floor: two unknown gpus": lambda: floor(each(only(2), named("NVIDIA Future GPU", devices=True))),
    "floor: two gpus unmeasured": lambda: floor(no_bw(5, 6)),
    "floor: mig instances only": lambda: evaluate_host_device_floor("a100-0", MIG_PROBE),
    "floor: one direction unmeasured, the other far below": lambda: floor(gpu3_bw(h2d_gbps=None, d2h_gbps=13.4)),
    "floor: below a declared floor and another below its siblings": lambda: floor(
        each(gpu_bw(0, h2d_gbps=20.0), gpu3_bw(h2d_gbps=25.0)), declared=(4, 16)),
    "floor: exactly at a declared floor, below its siblings": lambda: floor(gpu3_bw(h2d_gbps=0.70 * 31.51),
                                                                            declared=(4, 16)),
    "floor: a gpu without a bus id": lambda: floor(each(lambda d: d["devices"][3].update(pci_bus_id=None),
                                                        gpu3_bw(h2d_gbps=26.8))),
    "series": lambda: series(edited(each(no_bw(2), gpu3_bw(h2d_gbps=None)))),
}


@pytest.mark.parametrize("case", CASES)
def test_each_bandwidth_decision_is_recorded(case: str) -> None:
    value = CASES[case]()
    check_recording("bandwidth", case, lambda: value if case == "series" else whole(value))


# -------------------------------------------------------------------------------------------------
# Rules the recording holds, stated


def test_a_copy_exactly_at_its_floor_passes_and_just_under_it_degrades() -> None:
    at = floor(gpu3_bw(h2d_gbps=0.70 * 63.02))
    under = floor(gpu3_bw(h2d_gbps=0.70 * 63.02 - 0.01))
    assert (at.outcome, under.outcome) == (Outcome.PASS, Outcome.DEGRADED)
    fail_line = floor(gpu3_bw(h2d_gbps=0.35 * 63.02))
    under_fail = floor(gpu3_bw(h2d_gbps=0.35 * 63.02 - 0.01))
    assert (fail_line.outcome, under_fail.outcome) == (Outcome.DEGRADED, Outcome.FAIL)


def test_replays_at_dcgm_s_limit_pass_and_one_more_degrades() -> None:
    assert CASES["link: replays at the limit"]().outcome is Outcome.PASS
    assert CASES["link: replays just over the limit"]().outcome is Outcome.DEGRADED


def test_a_gpu_below_its_siblings_is_named_only_below_their_share() -> None:
    at = floor(each(named("NVIDIA Future GPU", devices=True), every_bw(h2d_gbps=50.0), gpu3_bw(h2d_gbps=30.0)))
    under = floor(each(named("NVIDIA Future GPU", devices=True), every_bw(h2d_gbps=50.0), gpu3_bw(h2d_gbps=29.9)))
    assert (at.outcome, under.outcome) == (Outcome.NOT_TESTED, Outcome.DEGRADED)


def test_the_width_of_an_unknown_model_is_judged_only_at_x16() -> None:
    x16 = link(each(named("NVIDIA Future GPU"), gpu3_pcie(link_width_current=8)))
    x8 = link(each(named("NVIDIA Future GPU"), gpu3_pcie(link_width_max=8, link_width_current=8)))
    assert (x16.outcome, x8.outcome) == (Outcome.DEGRADED, Outcome.NOT_TESTED)


def test_the_healthy_probe_is_read_from_the_simulator() -> None:
    code, d = doc()
    assert code == 0 and len(report(code, d).nvml_gpus) == 8
