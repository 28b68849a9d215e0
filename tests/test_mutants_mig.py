"""The MIG checks' decisions, every branch with its verdict recorded in tests/data/verdicts/mig.json
(outcome, kind, the words a reader acts on and what a PASS did not judge), on facts from the simulated
a100-mig-mixed, h100-mig-single and a100-mig-dra nodes (what the simulated toolkit injects into each
probe pod) with one thing changed per case. Pinned where mutation testing (scripts/mutation-score)
found the module's branches and messages unpinned."""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from test_checks_mig import (
    DraObserved,
    Observed,
    _half_mig,
    blind_nvml,
    cluster,
    observe,
    observe_dra,
    outcome,
    run_probe,
)
from verdict_record import as_data, check_recording

from gpuconf.checks import mig as checks
from gpuconf.checks.isolation import Sighting, sighting
from gpuconf.nodes import DeviceTaint, SliceDevice
from gpuconf.probes.cuda import CudaProbeReport
from gpuconf.sim.emulate import Visible
from gpuconf.verdict import Verdict

A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100 80GB HBM3"


@cache
def mixed() -> Observed:
    return observe(cluster(), "a100-0")


@cache
def single() -> Observed:
    return observe(cluster("h100-mig-single"), "h100-mig-0")


@cache
def half() -> Observed:
    """a100-mig-mixed with GPUs 4-7 whole: nvidia.com/gpu beside the instances."""
    return observe(cluster(_half_mig(Path(tempfile.mkdtemp()))), "a100-0")


@cache
def drifted() -> Observed:
    return observe(cluster(faults=[{"id": "mig-layout-drift", "pool": "a100", "node": 0}]), "a100-0")


@cache
def failed_apply(profile: str) -> Observed:
    c = cluster(profile, [{"id": "mig-apply-failed"}])
    return observe(c, c.nodes[0].name)


@cache
def dra_node() -> DraObserved:
    return observe_dra(cluster("a100-mig-dra"), "a100-0")


def recorded(value: Any) -> Any:
    """A verdict with its NOT TESTED kind and what a PASS did not judge, or any result, as data."""
    if isinstance(value, Verdict):
        return {**as_data(value), "kind": value.kind, "not_judged": list(value.not_judged)}
    if isinstance(value, tuple):
        return [recorded(v) for v in value]
    return as_data(value)


def probe(o: Observed | DraObserved, name: str, given: list[Visible], env: str | None = None,
          edit: Callable[[dict[str, Any]], None] | None = None) -> Sighting:
    """What pod ``name`` on ``o``'s node sees when given ``given`` (``env``: NVIDIA_VISIBLE_DEVICES
    instead of the ids, ``void`` under CDI), its probe document edited by ``edit``."""
    code, out = run_probe(o.node, given, devices_env=env)
    if edit is not None:
        doc = json.loads(out)
        edit(doc)
        out = json.dumps(doc)
    return sighting(outcome(name, (code, out)))


def instances(o: Observed | DraObserved, profile: str | None = None, gpus: range | None = None) -> list[Visible]:
    n = o.node
    return [Visible(g, m) for i, g in enumerate(n.gpus) for m in g.mig
            if (profile is None or m.profile == profile) and (gpus is None or i in gpus)]


def whole(o: Observed | DraObserved, *indexes: int) -> list[Visible]:
    return [Visible(o.node.gpus[i]) for i in indexes]


def report_of(s: Sighting) -> CudaProbeReport:
    assert s.report is not None
    return s.report


def replace_report(s: Sighting, **changes: Any) -> Sighting:
    return Sighting(s.where, dataclasses.replace(report_of(s), **changes))


def mig_mode(value: bool | None) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        for g in doc["nvml"]["gpus"]:
            g["mig_mode"] = {"current": value, "pending": False} if value is not None else {
                "available": False, "reason": "nvmlDeviceGetMigMode: Not Supported"}
    return edit


def no_bus(s: Sighting) -> CudaProbeReport:
    """``s``'s report with NVML giving no PCI bus id."""
    return replace_report(s, nvml_gpus=tuple(dataclasses.replace(g, raw={**g.raw, "pci_bus_id": None})
                                             for g in report_of(s).nvml_gpus)).report  # type: ignore[return-value]


def no_uuids(doc: dict[str, Any]) -> None:
    for g in doc["nvml"]["gpus"]:
        g["uuid"] = None
    for d in doc["devices"]:
        d["uuid"] = None


def kernel_failed(doc: dict[str, Any]) -> None:
    for d in doc["devices"]:
        d["vector_add"]["ok"] = False


def cuda_failed(doc: dict[str, Any]) -> None:
    doc["init"] = {"call": "cudaFree(0)", "code": 999, "name": "cudaErrorUnknown", "message": "unknown error",
                   "ms": 0.05, "timed_out": False}
    doc["devices"] = []


def no_nvml(doc: dict[str, Any]) -> None:
    doc["nvml"] = {"available": False, "reason": "nvmlInit_v2: Unknown Error"}


def unnamed_cuda(doc: dict[str, Any]) -> None:
    for d in doc["devices"]:
        d["name"] = None


def failing(where: str = "pod mig-x") -> Sighting:
    return Sighting(where, None, f"{where} produced no probe output (Pending Unschedulable)")


def memory(s: Sighting, gib: float | None) -> Sighting:
    r = report_of(s)
    return replace_report(s, devices=tuple(
        dataclasses.replace(d, total_memory_bytes=None if gib is None else int(gib * (1 << 30))) for d in r.devices))


# -------------------------------------------------------------------------------------------------
# The node's facts


MIXED_LABELS = {"nvidia.com/mig.strategy": "mixed", "nvidia.com/mig-1g.10gb.count": "7",
                "nvidia.com/mig-2g.20gb.count": "0", "nvidia.com/gpu.count": "2"}
SINGLE_LABELS = {"nvidia.com/mig.strategy": "single", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb",
                 "nvidia.com/gpu.count": "7"}
INVALID = {"nvidia.com/mig.strategy": "single", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-INVALID"}


def fact_cases() -> dict[str, Callable[[], Any]]:
    shared = {**SINGLE_LABELS, "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED"}
    return {
        "fmt": lambda: (checks._fmt(None), checks._fmt({}), checks._fmt({"a": 0}),
                        checks._fmt({"2g.20gb": 2, "1g.10gb": 1, "3g.40gb": 0})),
        "and": lambda: (checks._and(["a"]), checks._and(["a", "b"]), checks._and(["a", "b", "c"])),
        "int": lambda: (checks._int(None), checks._int(" 7 "), checks._int("x"), checks._int("-1"), checks._int(""),
                        checks._int("07")),
        "strategy": lambda: (checks.strategy({}), checks.strategy({checks.STRATEGY_LABEL: ""}),
                             checks.strategy(MIXED_LABELS), checks.strategy(SINGLE_LABELS)),
        "mig invalid": lambda: (checks.mig_invalid(INVALID), checks.mig_invalid(SINGLE_LABELS), checks.mig_invalid({}),
                                checks.mig_invalid({**INVALID, "nvidia.com/gpu.product": "X-MIG-INVALID-SHARED"}),
                                checks.mig_invalid({"nvidia.com/gpu.product": "X-MIG-INVALIDY"})),
        "labelled instances": lambda: tuple(checks._labelled_instances(labels) for labels in (
            SINGLE_LABELS, shared, INVALID, MIXED_LABELS, {"nvidia.com/mig-2g.20gb.count": "0"},
            {"nvidia.com/mig-2g.20gb.count": "1"},
            {"nvidia.com/mig-2g.20gb.count": "x"}, {"nvidia.com/gpu.product": "NVIDIA-A100"}, {})),
        "published layout": lambda: (
            checks.published_layout(dra_node().devices), checks.published_layout(()),
            checks.published_layout([dataclasses.replace(d, attributes={}) for d in dra_node().devices[:2]]),
            checks.published_layout(tainted(), usable_only=True), checks.published_layout(tainted()),
            checks.published_layout([dataclasses.replace(dra_node().devices[0], attributes={"type": "gpu"})])),
        "skip reasons": lambda: tuple(checks.mig_skip_reason("n", labels, capacity, published) for labels, capacity,
                                      published in (
            ({}, {}, None), ({"nvidia.com/mig.capable": "true"}, {}, None),
            ({"nvidia.com/mig.strategy": "single", "nvidia.com/mig.capable": "true"}, {"nvidia.com/gpu": "8"}, None),
            ({"nvidia.com/mig.strategy": "mixed"}, {}, None),
            ({"nvidia.com/mig.strategy": "none"}, {}, None),
            ({}, {"nvidia.com/mig-1g.10gb": "1"}, None), ({}, {"nvidia.com/mig-1g.10gb": "0"}, None),
            ({}, {"nvidia.com/mig-1g.10gb": "x"}, None), ({}, {"nvidia.com/gpu": "1"}, None),
            (SINGLE_LABELS, {}, None), (INVALID, {}, None), ({}, {}, {"1g.10gb": 1}), ({}, {}, {}),
            ({"nvidia.com/mig.config.state": "failed"}, {}, None),
            ({"nvidia.com/mig.config.state": "success", "nvidia.com/mig.config": "all-disabled"}, {}, None),
            ({"nvidia.com/mig.config": "all-enabled", "nvidia.com/mig.strategy": "mixed"}, {}, None),
            ({"nvidia.com/mig.config": "all-balanced"}, {}, None), ({"nvidia.com/mig.config": "custom"}, {}, None),
            ({"nvidia.com/mig.config": ""}, {}, None))),
        "strategy disagreement": lambda: tuple(checks.strategy_disagreement(labels, capacity) for labels, capacity in (
            (SINGLE_LABELS, {"nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-2g.20gb": "1"}),
            (SINGLE_LABELS, {"nvidia.com/gpu": "7"}), (INVALID, {"nvidia.com/mig-1g.10gb": "7"}),
            (MIXED_LABELS, {"nvidia.com/gpu": "7"}), (MIXED_LABELS, {"nvidia.com/gpu": "0"}),
            (SINGLE_LABELS, {"nvidia.com/mig-1g.10gb": "0", "nvidia.com/mig-2g.20gb": "x"}),
            (MIXED_LABELS, {"nvidia.com/gpu": "2", "nvidia.com/mig-1g.10gb": "7"}),
            ({"nvidia.com/mig-1g.10gb.count": "0"}, {"nvidia.com/gpu": "2"}), ({}, {}))),
        "labelled layout": lambda: tuple(checks.labelled_layout(labels) for labels in (
            SINGLE_LABELS, shared, {**SINGLE_LABELS, "nvidia.com/gpu.count": "x"}, INVALID,
            {**INVALID, "nvidia.com/gpu.count": "7"}, {"nvidia.com/mig.strategy": "single"},
            MIXED_LABELS, {"nvidia.com/mig-1g.10gb.count": "x", "nvidia.com/mig.strategy": "mixed"}, {},
            {**MIXED_LABELS, "nvidia.com/mig.strategy": "single"})),
        "advertised layout": lambda: tuple(checks.advertised_layout(labels, amounts) for labels, amounts in (
            (SINGLE_LABELS, {"nvidia.com/gpu": "7"}), (SINGLE_LABELS, {}), (INVALID, {"nvidia.com/gpu": "7"}),
            ({"nvidia.com/mig.strategy": "single"}, {"nvidia.com/gpu": "x"}), (shared, {"nvidia.com/gpu": "7"}),
            (MIXED_LABELS, {"nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-2g.20gb": "x", "nvidia.com/gpu": "2"}),
            ({}, {"nvidia.com/gpu": "2"}))),
        "profiles": lambda: tuple(None if (t := checks.mig_profiles(name)) is None else sorted(t) for name in (
            None, "", A100, "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", "NVIDIA-A100-SXM4-80GB-SHARED",
            "nvidia a100 sxm4 80gb", "NVIDIA-H100-80GB-HBM3", "NVIDIA H100 NVL", "Tesla-T4", "Tesla-T4-SHARED",
            "NVIDIA Made-Up GPU", "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED", "A100-SXM4-80GB")),
        "a profile": lambda: checks.mig_profiles(A100)["1g.10gb"],  # type: ignore[index]
        "gpu model": lambda: (checks.gpu_model({"nvidia.com/gpu.product": "P"}, [None, mixed().one_pods[
            "1g.10gb"].report]), checks.gpu_model({"nvidia.com/gpu.product": "P"}, [None]),
            checks.gpu_model({}, []), checks.gpu_model({"nvidia.com/gpu.product": ""}),
            checks.gpu_model({"nvidia.com/gpu.product": "P"}, [replace_report(mixed().one_pods["1g.10gb"], nvml_gpus=(
                dataclasses.replace(report_of(mixed().one_pods["1g.10gb"]).nvml_gpus[0], name=None),)).report])),
        "asks by name": lambda: tuple(checks._asks_by_name(n) for n in (
            "all-disabled", "all-enabled", "all-balanced", "all-1g.10gb", "all-3g.40gb.me", "custom", "all-7g",
            "xall-balanced", "all-balancedx")),
        "node gpus": lambda: (checks.node_gpus(MIXED_LABELS, 1), checks.node_gpus(MIXED_LABELS, 3),
                              checks.node_gpus(SINGLE_LABELS, 1), checks.node_gpus({}, 2),
                              checks.node_gpus({"nvidia.com/mig.strategy": "mixed"}, 2), checks.node_gpus({}, 0)),
        "pod names": lambda: (checks.pod_name("all-1g.10gb", "n"), checks.pod_name("one", "x" * 300)),
        "bus": lambda: tuple(checks._bus(b) for b in (None, "", "18:00.0", "00000000:18:00.0", "0000:1A:00.0",
                                                      "zz:18:00.0", "0001:AB:00.1")),
        "listed": lambda: tuple(checks.listed_devices(dataclasses.replace(
            report_of(mixed().one_pods["1g.10gb"]), env={"NVIDIA_VISIBLE_DEVICES": v})) for v in (
            None, "", "all", "none", "void", "/var/run/nvidia-container-devices", "0:1,0:2,3", "MIG-a,GPU-b,MIG-a",
            " MIG-a , ,GPU-b ", "GPU-a,GPU-a", "0,1", "MIG-a,all", "1:x")),
    }


def tainted() -> tuple[SliceDevice, ...]:
    return tuple(dataclasses.replace(d, taints=(DeviceTaint("gpu.nvidia.com/xid", "79", "NoSchedule"),))
                 if d.name == "gpu-0-mig-3" else d for d in dra_node().devices)


# -------------------------------------------------------------------------------------------------
# mig-manager's config


CONFIG = """
version: v1
mig-configs:
  all-balanced:
    - {device-filter: ["0x20B010DE"], devices: all, mig-enabled: true,
       mig-devices: {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}}
    - {device-filter: ["0x20B210DE"], devices: all, mig-enabled: true,
       mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}
  half:
    - {devices: [0, 1], mig-enabled: true, mig-devices: {"7g.80gb": 1}}
    - {devices: [2, 3], mig-enabled: false}
  enabled-empty:
    - devices: all
      mig-enabled: true
      mig-devices: {}
  enabled-zero:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 0}
  disabled:
    - devices: all
      mig-enabled: false
      mig-devices: {"1g.10gb": 7}
  filter-no-devices:
    - device-filter: ["0x20B210DE"]
      devices: all
      mig-enabled: true
  second-wins:
    - devices: [1]
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
  not-a-dict:
    - just a string
    - devices: [0]
      mig-enabled: true
      mig-devices: {"1g.10gb": 1}
"""


def declared(config: str, gpus: int = 2, profiles: str | None = A100, text: str = CONFIG,
             state: str | None = None) -> checks.Declared:
    labels = {"nvidia.com/mig.config": config} if config else {}
    if state:
        labels["nvidia.com/mig.config.state"] = state
    configs = checks.parse_mig_parted(text) if text else None
    return checks.declared_layout(labels, configs, source="ConfigMap gpu-operator/cm", gpus=gpus,
                                  profiles=checks.mig_profiles(profiles))


def parsed(text: str) -> Any:
    try:
        return checks.parse_mig_parted(text)
    except ValueError as exc:
        return f"ValueError: {exc}"


def config_cases() -> dict[str, Callable[[], Any]]:
    cases: dict[str, Callable[[], Any]] = {
        f"declared: {name} over {gpus}": (lambda name=name, gpus=gpus: declared(name, gpus))
        for name in ("all-balanced", "half", "enabled-empty", "enabled-zero", "disabled", "filter-no-devices",
                     "second-wins", "not-a-dict", "nope") for gpus in (0, 2, 5)}
    cases.update({
        "declared: no label": lambda: declared("", state="success"),
        "declared: unreadable config": lambda: declared("all-balanced", text="", state="pending"),
        "declared: unreadable custom": lambda: declared("custom", text=""),
        "declared: no configs": lambda: declared("x", text="version: v1\nmig-configs: {}\n"),
        "declared: unknown model": lambda: declared("all-balanced", profiles=None),
        "declared: unknown model, no filter": lambda: declared("half", profiles=None),
        "declared: another model's filter": lambda: declared("all-balanced", profiles=H100),
        "declared: state": lambda: declared("half", state="failed"),
        "declared: a default name missing, with state": lambda: declared("all-1g.10gb", state="success"),
        "declared: unknown model, with state": lambda: declared("all-balanced", profiles=None, state="pending"),
        "parse": lambda: tuple(parsed(t) for t in (
            "version: v1\n", "[", "- a", "mig-configs: [1]", "mig-configs: {a: 1}", "mig-configs: {a: [1, {b: 2}]}",
            "mig-configs: {1: []}")),
        "entry applies": lambda: tuple(checks._entry_applies(e, p) for e, p in (
            ({}, None), ({"device-filter": "x"}, None), ({"device-filter": "x", "mig-devices": {"1g.10gb": 1}},
                                                          checks.mig_profiles(A100)),
            ({"device-filter": "x", "mig-devices": {"1g.5gb": 1}}, checks.mig_profiles(A100)),
            ({"device-filter": "x", "mig-devices": {"1g.10gb": 1, "1g.5gb": 1}}, checks.mig_profiles(A100)),
            ({"device-filter": "x", "mig-devices": {}}, checks.mig_profiles(A100)),
            ({"device-filter": "x"}, checks.mig_profiles(A100)))),
    })
    return cases


# -------------------------------------------------------------------------------------------------
# The plan


def plan_cases() -> dict[str, Callable[[], Any]]:
    return {
        "plan: mixed": lambda: checks.plan_node("a100-0", mixed().labels, mixed().allocatable),
        "plan: single": lambda: checks.plan_node("h100-mig-0", single().labels, single().allocatable),
        "plan: half": lambda: checks.plan_node("a100-0", half().labels, half().allocatable),
        "plan: invalid": lambda: checks.plan_node("n", INVALID, {"nvidia.com/gpu": "7"}),
        "plan: single unlabelled": lambda: checks.plan_node("n", {"nvidia.com/mig.strategy": "single"},
                                                            {"nvidia.com/gpu": "7"}),
        "plan: none left": lambda: checks.plan_node("n", MIXED_LABELS, {"nvidia.com/mig-1g.10gb": "0",
                                                                       "nvidia.com/mig-2g.20gb": "1"}),
        "plan: dra": lambda: checks.plan_node("a100-0", dra_node().labels, {}, dra_node().devices),
        "plan: dra tainted": lambda: checks.plan_node("a100-0", dra_node().labels, {}, tainted()),
        "plan: dra no profile": lambda: checks.plan_node("a100-0", {}, {}, [
            dataclasses.replace(d, attributes={k: v for k, v in d.attributes.items() if k != "profile"})
            for d in dra_node().devices[:2]]),
        "plan: dra, a profile after the unnamed": lambda: checks.plan_node("a100-0", {}, {}, [
            dataclasses.replace(d, attributes={k: v for k, v in d.attributes.items() if k != "profile"})
            for d in dra_node().devices[:2]] + [dataclasses.replace(d, attributes={**d.attributes, "profile": "z"})
                                                for d in dra_node().devices[2:4]]),
        "plan: advertised over dra": lambda: checks.plan_node("a100-0", mixed().labels, mixed().allocatable,
                                                              dra_node().devices),
        "plan: single over dra": lambda: checks.plan_node("h100-mig-0", single().labels, single().allocatable,
                                                          dra_node().devices),
    }


# -------------------------------------------------------------------------------------------------
# What a container saw


def seen_cases() -> dict[str, Callable[[], Any]]:
    o = mixed
    return {
        "devices: one instance": lambda: checks.mig_devices(report_of(o().one_pods["1g.10gb"])),
        "devices: unnamed": lambda: checks.mig_devices(report_of(probe(o(), "p", instances(o(), "2g.20gb")[:1],
                                                                       edit=unnamed_cuda))),
        "devices: no uuid": lambda: checks.mig_devices(report_of(probe(o(), "p", instances(o(), "2g.20gb")[:1],
                                                                       edit=no_uuids))),
        "devices: whole": lambda: checks.mig_devices(report_of(probe(half(), "p", whole(half(), 4)))),
        "devices: uuid only": lambda: checks.mig_devices(replace_report(o().one_pods["1g.10gb"], devices=tuple(
            dataclasses.replace(d, mig=None) for d in report_of(o().one_pods["1g.10gb"]).devices)).report),
        "devices: flag only": lambda: checks.mig_devices(replace_report(o().one_pods["1g.10gb"], devices=tuple(
            dataclasses.replace(d, uuid="X", mig=True) for d in report_of(o().one_pods["1g.10gb"]).devices)).report),
        "whole: mixed up": lambda: checks._whole(report_of(probe(half(), "p", [*instances(half(), "2g.20gb")[:1],
                                                                                *whole(half(), 4, 5)]))),
        "whole: cuda": lambda: checks._whole(report_of(probe(half(), "p", whole(half(), 4, 5)))),
        "whole: cuda without uuids": lambda: checks._whole(report_of(probe(half(), "p", whole(half(), 4, 5),
                                                                           edit=no_uuids))),
        "whole: indices": lambda: checks._whole(report_of(probe(half(), "p", whole(half(), 4), env="4,4,0:1"))),
        "whole: none": lambda: checks._whole(report_of(o().one_pods["1g.10gb"])),
        "where": lambda: (checks._where({"GPU-a": ["CUDA"]}),
                          checks._where({"GPU-b": ["NVML with MIG mode off", "CUDA"], "GPU-a": ["CUDA"]})),
        "parents": lambda: (checks._parents(report_of(probe(half(), "p", whole(half(), 0, 4)))),
                            checks._parents(no_bus(probe(half(), "p", whole(half(), 4)))),
                            checks._parents(report_of(probe(half(), "p", whole(half(), 4), edit=no_uuids)))),
        "instances anywhere": lambda: tuple(checks._instances_anywhere(labels, capacity, seen, published) for
                                            labels, capacity, seen, published in (
            ({}, {}, {}, None), ({}, {}, {}, {"1g.10gb": 0}), ({}, {}, {}, {"1g.10gb": 1}),
            (SINGLE_LABELS, {"nvidia.com/gpu": "1"}, {}, None), ({"nvidia.com/mig.strategy": "single"},
                                                                 {"nvidia.com/gpu": "1"}, {}, None),
            ({}, {"nvidia.com/mig-1g.10gb": "1"}, {}, None), (MIXED_LABELS, {}, {}, None),
            ({}, {}, {"x": o().all_pods["1g.10gb"]}, None), ({}, {}, {"x": failing()}, None),
            ({}, {}, {"x": probe(half(), "p", whole(half(), 4))}, None),
            ({}, {}, {"x": probe(o(), "p", instances(o(), "1g.10gb")[:2], edit=cuda_failed)}, None),
            ({}, {}, {"x": probe(o(), "p", instances(o(), "1g.10gb")[:2], env="void", edit=cuda_failed)}, None))),
        "no output": lambda: checks._no_output("mig.instance-isolated", "n", failing(), "the pod could not be seen"),
        "no output, no failure": lambda: checks._no_output("mig.not-also-full-gpu", "n", Sighting("pod p", None),
                                                           "what"),
        "bands": lambda: {f"{row['name']} {p}": checks.memory_band(spec)
                          for row in checks.tables.load("mig_profiles")["profile_sets"]
                          for p, spec in (checks.mig_profiles(row["gpus"][0]) or {}).items()},
        "name floor": lambda: checks.name_floor(),
        "tolerance": lambda: tuple(checks._tolerance(m, spec) for m in (None, 0, 9 << 30, int(9.5 * (1 << 30)),
                                                                        10 << 30, int(9.17 * (1 << 30)),
                                                                        int(9.84 * (1 << 30)))
                                   for spec in (checks.mig_profiles(A100)["1g.10gb"],  # type: ignore[index]
                                                checks.MigProfile("9g.90gb", 9, 90, 1),
                                                checks.MigProfile("1g.10gb", 1, 10, 7, 9.8, True)))
        + (checks._tolerance(0, checks.MigProfile("0g.0gb", 1, 0, 1, 0.0)),),
    }


# -------------------------------------------------------------------------------------------------
# mig.layout-matches-config


def layout(o: Observed, *, decl: checks.Declared | None = None, published: Mapping[str, int] | None = None,
           granted: Mapping[str, int] | None = None, **facts: Any) -> Verdict:
    """mig.layout-matches-config on ``o``'s facts, those named in ``facts`` (labels, capacity,
    allocatable, seen) replaced."""
    kw = {"labels": o.labels, "capacity": o.capacity, "allocatable": o.allocatable, "seen": o.all_pods, **facts}
    return checks.evaluate_layout_matches_config(o.node.name, declared=o.declared if decl is None else decl,
                                                 published=published, granted_by_dra=granted, **kw)


def dra_layout(**changes: Any) -> Verdict:
    o = dra_node()
    kw: dict[str, Any] = {"labels": o.labels, "capacity": {}, "allocatable": {}, "seen": o.all_pods,
                          "declared": o.declared, "published": checks.published_layout(o.devices),
                          "granted_by_dra": o.counts}
    kw.update(changes)
    return checks.evaluate_layout_matches_config("a100-0", **kw)


def without(labels: Mapping[str, str], *keys: str) -> dict[str, str]:
    return {k: v for k, v in labels.items() if k not in keys}


def all_void(o: Observed, profiles: tuple[str, ...] = ("1g.10gb", "2g.20gb", "3g.40gb")) -> dict[str, Sighting]:
    return {**o.all_pods, **{p: probe(o, f"mig-all-{p}-a100-0", instances(o, p), env="void") for p in profiles}}


def layout_cases() -> dict[str, Callable[[], Any]]:
    m, s = mixed, single
    counts = [k for k in mixed().labels if k.endswith(".count") and k.startswith("nvidia.com/mig-")]
    return {
        "layout: mixed": lambda: layout(m()),
        "layout: single": lambda: layout(s()),
        "layout: half": lambda: layout(half()),
        "layout: drift": lambda: layout(drifted()),
        "layout: drift, state pending": lambda: layout(drifted(), decl=dataclasses.replace(drifted().declared,
                                                                                           state="pending")),
        "layout: drift, state success": lambda: layout(drifted(), decl=dataclasses.replace(drifted().declared,
                                                                                           state="success")),
        "layout: drift, no state": lambda: layout(drifted(), decl=dataclasses.replace(drifted().declared, state=None)),
        "layout: no config label": lambda: layout(m(), labels=without(m().labels, "nvidia.com/mig.config"),
                                                  decl=checks.declared_layout(without(
                                                      m().labels, "nvidia.com/mig.config"), None, source="-", gpus=8,
                                                      profiles=None)),
        "layout: unreadable config": lambda: layout(m(), decl=checks.declared_layout(
            m().labels, None, source="ConfigMap gpu-operator/x not found", gpus=8, profiles=None)),
        "layout: labels disagree": lambda: layout(m(), labels={**m().labels, "nvidia.com/mig-2g.20gb.count": "3"}),
        "layout: capacity disagrees": lambda: layout(m(), capacity={**m().capacity, "nvidia.com/mig-2g.20gb": "5"},
                                                     allocatable={**m().allocatable, "nvidia.com/mig-2g.20gb": "5"}),
        "layout: two disagree alike": lambda: layout(m(), labels={**m().labels, "nvidia.com/mig-2g.20gb.count": "3"},
                                                     capacity={**m().capacity, "nvidia.com/mig-2g.20gb": "3"}),
        "layout: declared alone differs": lambda: layout(m(), decl=dataclasses.replace(
            m().declared, layout={"1g.10gb": 1})),
        "layout: declared zero profile": lambda: layout(m(), decl=dataclasses.replace(
            m().declared, layout={**(m().declared.layout or {}), "7g.80gb": 0})),
        "layout: no GFD counts": lambda: layout(m(), labels=without(m().labels, *counts)),
        "layout: no GFD counts, no config": lambda: layout(m(), labels=without(m().labels, *counts),
                                                           decl=checks.Declared(None, None, "no label")),
        "layout: invalid": lambda: layout(m(), labels={**m().labels, **INVALID}),
        "layout: invalid, no config": lambda: layout(m(), labels={**without(m().labels, "nvidia.com/mig.config"),
                                                                  **INVALID}, capacity={}),
        "layout: strategies": lambda: layout(s(), capacity={**s().capacity, "nvidia.com/mig-1g.10gb": "28"}),
        "layout: failed, nothing": lambda: layout(failed_apply("a100-mig-mixed")),
        "layout: failed single": lambda: layout(failed_apply("h100-mig-single")),
        "layout: failed, instances remain": lambda: layout(m(), decl=dataclasses.replace(m().declared, state="failed")),
        "layout: failed, instances remain, dra": lambda: dra_layout(declared=dataclasses.replace(
            dra_node().declared, state="failed")),
        "layout: asked, none": lambda: layout(failed_apply("a100-mig-mixed"), labels=without(
            failed_apply("a100-mig-mixed").labels, "nvidia.com/mig.config.state"), decl=dataclasses.replace(
            failed_apply("a100-mig-mixed").declared, state=None)),
        "layout: asked, none, no product": lambda: layout(failed_apply("a100-mig-mixed"), labels=without(
            failed_apply("a100-mig-mixed").labels, "nvidia.com/gpu.product")),
        "layout: failed, whole gpus under single": lambda: layout(failed_apply("h100-mig-single"), labels={
            **failed_apply("h100-mig-single").labels, "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            capacity={"nvidia.com/gpu": "4"}),
        "layout: asked, none, pending": lambda: layout(failed_apply("a100-mig-mixed"), decl=dataclasses.replace(
            failed_apply("a100-mig-mixed").declared, state="pending")),
        "layout: asked, no layout": lambda: layout(failed_apply("h100-mig-single"), decl=checks.Declared(
            "all-1g.10gb", None, "unreadable", None, True)),
        "layout: asked, none, invalid": lambda: layout(failed_apply("a100-mig-mixed"), labels={
            **failed_apply("a100-mig-mixed").labels, **INVALID}, decl=dataclasses.replace(
            failed_apply("a100-mig-mixed").declared, state=None)),
        "layout: not asked": lambda: layout(failed_apply("a100-mig-mixed"), decl=checks.Declared(
            "all-disabled", {}, "all-disabled in cm", "success", False)),
        "layout: may ask": lambda: layout(failed_apply("a100-mig-mixed"), decl=checks.Declared(
            "custom", None, "unreadable", None, None)),
        "layout: pod not observed": lambda: layout(m(), seen={**m().all_pods, "2g.20gb": failing()}),
        "layout: another profile": lambda: layout(m(), seen={**m().all_pods, "3g.40gb": probe(
            m(), "mig-all-3g.40gb-a100-0", [instances(m(), "1g.10gb")[0], *instances(m(), "3g.40gb")[1:]])}),
        "layout: unnamed profile": lambda: layout(m(), seen={**m().all_pods, "3g.40gb": probe(
            m(), "mig-all-3g.40gb-a100-0", instances(m(), "3g.40gb"), edit=unnamed_cuda)}),
        "layout: none through cuda": lambda: layout(m(), seen={**m().all_pods, "2g.20gb": replace_report(
            m().all_pods["2g.20gb"], devices=())}),
        "layout: none through cuda, none granted": lambda: layout(m(), seen={**m().all_pods, "7g.80gb": replace_report(
            m().all_pods["2g.20gb"], devices=(), env={"NVIDIA_VISIBLE_DEVICES": "void"})}),
        "layout: fewer listed": lambda: layout(m(), seen={**m().all_pods, "1g.10gb": probe(
            m(), "mig-all-1g.10gb-a100-0", instances(m(), "1g.10gb", range(1)))}),
        "layout: listed twice": lambda: layout(m(), seen={**m().all_pods, "3g.40gb": probe(
            m(), "mig-all-3g.40gb-a100-0", [*instances(m(), "3g.40gb")[:3], instances(m(), "1g.10gb")[0]])}),
        "layout: listed none": lambda: layout(m(), seen={**m().all_pods, "3g.40gb": probe(
            m(), "mig-all-3g.40gb-a100-0", instances(m(), "3g.40gb")[:1], env="GPU-x")}),
        "layout: void": lambda: layout(m(), seen=all_void(m())),
        "layout: void, one": lambda: layout(m(), seen=all_void(m(), ("2g.20gb",))),
        "layout: void drift": lambda: layout(drifted(), seen=all_void(drifted())),
        "layout: cuda counts all": lambda: layout(s(), seen={"1g.10gb": replace_report(
            s().all_pods["1g.10gb"], env={"NVIDIA_VISIBLE_DEVICES": "void"}, devices=tuple(
                dataclasses.replace(report_of(s().all_pods["1g.10gb"]).devices[0], uuid=f"MIG-{i}")
                for i in range(28)))}),
        "layout: cuda counts too many": lambda: layout(s(), seen={"1g.10gb": replace_report(
            s().all_pods["1g.10gb"], env={"NVIDIA_VISIBLE_DEVICES": "void"}, devices=tuple(
                dataclasses.replace(report_of(s().all_pods["1g.10gb"]).devices[0], uuid=f"MIG-{i}")
                for i in range(29)))}),
        "layout: below capacity": lambda: layout(m(), allocatable={**m().allocatable, "nvidia.com/mig-1g.10gb": "35"},
                                                 seen={**m().all_pods, "1g.10gb": probe(
                                                     m(), "mig-all-1g.10gb-a100-0", instances(m(), "1g.10gb")[:35])}),
        "layout: three layouts": lambda: layout(m(), labels={**m().labels, "nvidia.com/mig-2g.20gb.count": "3"},
                                                capacity={**m().capacity, "nvidia.com/mig-2g.20gb": "5"},
                                                allocatable={**m().allocatable, "nvidia.com/mig-2g.20gb": "5"},
                                                seen={}),
        "layout: labels only, nothing advertised": lambda: layout(m(), capacity={}, allocatable={}, seen={}),
        "layout: invalid, gpus advertised": lambda: layout(m(), labels={**m().labels, **INVALID},
                                                           capacity={"nvidia.com/gpu": "8"}),
        "layout: no pods": lambda: layout(m(), seen={}),
        "layout: published agrees": lambda: layout(m(), published={"1g.10gb": 36, "2g.20gb": 4, "3g.40gb": 4}),
        "layout: published disagrees": lambda: layout(m(), published={"1g.10gb": 35, "2g.20gb": 4, "3g.40gb": 4}),
        "layout: dra": lambda: dra_layout(),
        "layout: dra, no config": lambda: dra_layout(declared=checks.Declared(None, None, "no label")),
        "layout: dra, unusable": lambda: dra_layout(granted_by_dra={**dra_node().counts, "1g.10gb": 7}),
        "layout: dra, nothing granted": lambda: dra_layout(granted_by_dra=None, seen={}),
        "layout: dra disagrees": lambda: dra_layout(published={**(checks.published_layout(dra_node().devices) or {}),
                                                               "1g.10gb": 9}),
        "layout: dra void, cuda one": lambda: dra_layout(seen={"2g.20gb": dra_node().all_pods["2g.20gb"]},
                                                         granted_by_dra={"2g.20gb": 1}),
        "layout: dra nothing published": lambda: dra_layout(published={}, seen={}),
    }


# -------------------------------------------------------------------------------------------------
# mig.instance-isolated


def isolated(o: Observed, seen: Mapping[str, Sighting] | None = None, model: str | None = A100,
             **kw: Any) -> Verdict:
    return checks.evaluate_instance_isolated(o.node.name, o.one_pods if seen is None else seen, model=model, **kw)


def dra_isolated(**changes: Any) -> Verdict:
    o = dra_node()
    kw: dict[str, Any] = {"model": A100, "claimed": o.claimed, "node_devices": o.devices}
    kw.update(changes)
    return checks.evaluate_instance_isolated("a100-0", kw.pop("seen", o.one_pods), **kw)


def one(o: Observed, profile: str, given: list[Visible], env: str | None = None,
        edit: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Sighting]:
    return {**o.one_pods, profile: probe(o, f"mig-one-{profile}-{o.node.name}", given, env, edit)}


def mig_of(d: SliceDevice) -> Visible:
    n = dra_node().node
    g = next(g for g in n.gpus if g.uuid == d.attributes.get("parentUUID"))
    return Visible(g, next(i for i in g.mig if i.uuid == d.uuid))


def isolation_cases() -> dict[str, Callable[[], Any]]:
    m, h = mixed, half
    two = ("2g.20gb", "2g.20gb")
    dev = {d.name: d for d in dra_node().devices}
    return {
        "isolated: mixed": lambda: isolated(m()),
        "isolated: single": lambda: isolated(single(), model=H100),
        "isolated: unknown model": lambda: isolated(m(), model=None),
        "isolated: made-up model": lambda: isolated(m(), model="NVIDIA Made-Up GPU"),
        "isolated: profile not in table": lambda: isolated(m(), seen={"9g.90gb": m().one_pods["1g.10gb"]}),
        "isolated: nothing": lambda: isolated(m(), seen={}),
        "isolated: no output": lambda: isolated(m(), seen={**m().one_pods, "2g.20gb": failing("pod mig-one-2g")}),
        "isolated: siblings listed": lambda: isolated(m(), one(m(), "3g.40gb", [
            Visible(m().node.gpus[0], i) for i in sorted(m().node.gpus[0].mig, key=lambda i: i.profile != "3g.40gb")])),
        "isolated: one sibling listed": lambda: isolated(m(), one(m(), "2g.20gb", instances(m(), "2g.20gb")[:2])),
        "isolated: sibling listed first": lambda: isolated(m(), one(m(), "2g.20gb", instances(m(), "2g.20gb")[:2],
                                                                    env=",".join(v.mig.uuid for v in reversed(
                                                                        instances(m(), "2g.20gb")[:2]) if v.mig))),
        "isolated: own not listed": lambda: isolated(m(), one(m(), "2g.20gb", instances(m(), "2g.20gb")[:1],
                                                              env="MIG-a,MIG-b")),
        "isolated: indices listed": lambda: isolated(m(), one(m(), "2g.20gb", instances(m(), "2g.20gb")[:1],
                                                              env="0:1,0:2")),
        "isolated: other gpus": lambda: isolated(m(), one(m(), "1g.10gb", [
            instances(m(), "1g.10gb", range(1))[0], instances(m(), "1g.10gb", range(1, 2))[0]], env="void")),
        "isolated: other gpus, one device node": lambda: isolated(m(), one(m(), "1g.10gb", [
            instances(m(), "1g.10gb", range(1))[0], instances(m(), "1g.10gb", range(1, 2))[0]], env="void",
            edit=lambda d: d["device_nodes"].update(gpus=["/dev/nvidia0"]))),
        "isolated: four gpus": lambda: isolated(h(), one(h(), "2g.20gb", [*instances(h(), "2g.20gb")[:1],
                                                                         *whole(h(), 4, 5, 6)])),
        "isolated: unnamed, profile not in table": lambda: isolated(m(), seen={"9g.90gb": probe(
            m(), "mig-one-9g.90gb-a100-0", instances(m(), "1g.10gb")[:1], edit=unnamed_cuda)}),
        "isolated: whole beside": lambda: isolated(h(), one(h(), "2g.20gb", [*instances(h(), "2g.20gb")[:1],
                                                                            *whole(h(), 4)])),
        "isolated: whole beside, void": lambda: isolated(h(), one(h(), "2g.20gb", [*instances(h(), "2g.20gb")[:1],
                                                                                  *whole(h(), 4)], env="void")),
        "isolated: dev only": lambda: isolated(h(), one(h(), "2g.20gb", [*instances(h(), "2g.20gb")[:1],
                                                                        *whole(h(), 4)], env="void", edit=no_nvml)),
        "isolated: whole only": lambda: isolated(h(), one(h(), "2g.20gb", whole(h(), 4))),
        "isolated: two whole": lambda: isolated(h(), one(h(), "2g.20gb", whole(h(), 4, 5))),
        "isolated: no cuda devices": lambda: isolated(m(), {**m().one_pods, "2g.20gb": replace_report(
            m().one_pods["2g.20gb"], devices=())}),
        "isolated: cuda failed": lambda: isolated(m(), one(m(), "2g.20gb", instances(m(), "2g.20gb")[:1],
                                                           edit=cuda_failed)),
        "isolated: blind": lambda: isolated(m(), one(m(), "2g.20gb", instances(m(), "2g.20gb")[:1], env="void",
                                                     edit=lambda d: (cuda_failed(d), no_nvml(d)))),
        "isolated: nvml failed": lambda: isolated(m(), one(m(), "2g.20gb", instances(m(), "2g.20gb")[:1],
                                                           edit=no_nvml)),
        "isolated: two cuda devices": lambda: isolated(m(), {**m().one_pods, "2g.20gb": replace_report(
            m().one_pods["2g.20gb"], devices=report_of(m().one_pods["2g.20gb"]).devices * 2)}),
        "isolated: wrong profile": lambda: isolated(m(), seen={"2g.20gb": m().one_pods["3g.40gb"]}),
        "isolated: unnamed profile": lambda: isolated(m(), one(m(), "2g.20gb", instances(m(), "2g.20gb")[:1],
                                                               edit=unnamed_cuda)),
        "isolated: kernel failed": lambda: isolated(m(), one(m(), "2g.20gb", instances(m(), "2g.20gb")[:1],
                                                             edit=kernel_failed)),
        "isolated: small": lambda: isolated(m(), {**m().one_pods, "1g.10gb": memory(m().one_pods["1g.10gb"], 5)}),
        "isolated: big": lambda: isolated(m(), {**m().one_pods, "1g.10gb": memory(m().one_pods["1g.10gb"], 19.5)}),
        "isolated: memory unknown": lambda: isolated(m(), {**m().one_pods, "1g.10gb": memory(
            m().one_pods["1g.10gb"], None)}),
        "isolated: memory unknown, no table": lambda: isolated(m(), {**m().one_pods, "1g.10gb": memory(
            m().one_pods["1g.10gb"], None)}, model=None),
        "isolated: void": lambda: isolated(m(), one(m(), "2g.20gb", instances(m(), "2g.20gb")[:1], env="void")),
        "isolated: same twice": lambda: isolated(m(), {p: m().one_pods["2g.20gb"] for p in two}),
        "isolated: dra": lambda: dra_isolated(),
        "isolated: dra, unread": lambda: dra_isolated(claimed={**dra_node().claimed, "2g.20gb": None}),
        "isolated: dra, empty": lambda: dra_isolated(claimed={**dra_node().claimed, "2g.20gb": ()}),
        "isolated: dra, another": lambda: dra_isolated(claimed={**dra_node().claimed,
                                                               "2g.20gb": dra_node().claimed["3g.40gb"]}),
        "isolated: dra, two allocated": lambda: dra_isolated(claimed={**dra_node().claimed, "2g.20gb": (
            *(dra_node().claimed["2g.20gb"] or ()), *(dra_node().claimed["3g.40gb"] or ()))}),
        "isolated: dra, a gpu allocated": lambda: dra_isolated(claimed={**dra_node().claimed, "2g.20gb": (
            dataclasses.replace(dev["gpu-0-mig-1"], attributes={**dev["gpu-0-mig-1"].attributes, "type": "gpu"}),)}),
        "isolated: dra, sibling": lambda: dra_isolated(seen={**dra_node().one_pods, "1g.10gb": probe(
            dra_node(), "mig-one-1g.10gb-a100-0", [mig_of(dev["gpu-0-mig-4"]), mig_of(dev["gpu-0-mig-3"])],
            env="void")}),
        "isolated: dra, unpublished": lambda: dra_isolated(seen={**dra_node().one_pods, "1g.10gb": probe(
            dra_node(), "mig-one-1g.10gb-a100-0", [mig_of(dev["gpu-0-mig-4"])], env="void")},
            node_devices=[d for d in dra_node().devices if d.name != "gpu-0-mig-4"]),
        "isolated: dra, other gpu's": lambda: dra_isolated(seen={**dra_node().one_pods, "1g.10gb": probe(
            dra_node(), "mig-one-1g.10gb-a100-0", [mig_of(dev["gpu-1-mig-3"])], env="void")}),
        "isolated: dra, another parent": lambda: dra_isolated(seen={**dra_node().one_pods, "1g.10gb": probe(
            dra_node(), "mig-one-1g.10gb-a100-0", [mig_of(dev["gpu-0-mig-3"]), mig_of(dev["gpu-1-mig-1"])],
            env="void")}),
        "isolated: dra, cuda two": lambda: dra_isolated(seen={**dra_node().one_pods, "1g.10gb": replace_report(
            dra_node().one_pods["1g.10gb"], devices=tuple(
                dataclasses.replace(report_of(dra_node().one_pods["1g.10gb"]).devices[0], uuid=d.uuid)
                for d in (dev["gpu-0-mig-4"], dev["gpu-1-mig-3"])))}),
        "isolated: dra, no cuda": lambda: dra_isolated(seen={**dra_node().one_pods, "1g.10gb": replace_report(
            dra_node().one_pods["1g.10gb"], devices=())}),
        "isolated: dra, no nvml": lambda: dra_isolated(seen={**dra_node().one_pods, "1g.10gb": blind_nvml(
            dra_node().one_pods["1g.10gb"])}),
        "isolated: dra, no parent attribute": lambda: dra_isolated(claimed={**dra_node().claimed, "1g.10gb": (
            dataclasses.replace(dev["gpu-0-mig-3"], attributes=without(dev["gpu-0-mig-3"].attributes,
                                                                        "parentUUID")),)}),
        "isolated: dra, profile not claimed": lambda: dra_isolated(claimed={"3g.40gb": dra_node().claimed["3g.40gb"]}),
        "isolated: dra, listed": lambda: dra_isolated(seen={**dra_node().one_pods, "1g.10gb": probe(
            dra_node(), "mig-one-1g.10gb-a100-0", [mig_of(dev["gpu-0-mig-3"])])}),
    }


# -------------------------------------------------------------------------------------------------
# mig.not-also-full-gpu


def full(o: Observed, full_seen: Sighting | None = None, *, devices: tuple[SliceDevice, ...] = (),
         **facts: Any) -> Verdict:
    """mig.not-also-full-gpu on ``o``'s facts, those named in ``facts`` (labels, capacity, mig_seen) replaced."""
    kw = {"labels": o.labels, "capacity": o.capacity, "mig_seen": list(o.all_pods.values()), **facts}
    return checks.evaluate_not_also_full_gpu(o.node.name, full_seen=full_seen, devices=devices, **kw)


def dra_full(devices: tuple[SliceDevice, ...] | None = None, full_seen: Sighting | None = None,
             **kw: Any) -> Verdict:
    o = dra_node()
    return checks.evaluate_not_also_full_gpu("a100-0", labels=kw.get("labels", o.labels),
                                             capacity=kw.get("capacity", {}),
                                             mig_seen=kw.get("mig_seen", list(o.all_pods.values())),
                                             full_seen=full_seen, devices=o.devices if devices is None else devices)


def published_whole(*indexes: int) -> tuple[SliceDevice, ...]:
    """The DRA node's devices plus GPUs ``indexes`` published whole (type gpu)."""
    o = dra_node()
    extra = tuple(SliceDevice("a100-0", "gpu.nvidia.com", "a100-0", f"gpu-{i}", {
        "type": "gpu", "uuid": o.node.gpus[i].uuid, "productName": A100}) for i in indexes)
    return (*o.devices, *extra)


def full_cases() -> dict[str, Callable[[], Any]]:
    m, h, s = mixed, half, single
    dev = dra_node().node

    def dra_pod(*indexes: int, edit: Callable[[dict[str, Any]], None] | None = None,
                mig: bool = False) -> Sighting:
        given = [Visible(dev.gpus[i], dev.gpus[i].mig[0] if mig else None) for i in indexes]
        return probe(dra_node(), "smoke-a100-0", given, env="void", edit=edit)

    return {
        "full: mixed": lambda: full(m()),
        "full: mixed, no pods": lambda: full(m(), mig_seen=[]),
        "full: mixed, nvml failed": lambda: full(m(), mig_seen=[blind_nvml(x) for x in m().all_pods.values()]),
        "full: mixed, one nvml failed": lambda: full(m(), mig_seen=[blind_nvml(m().all_pods["1g.10gb"]),
                                                                     m().all_pods["2g.20gb"]]),
        "full: mixed, not observed": lambda: full(m(), mig_seen=[m().all_pods["1g.10gb"], failing("pod mig-all")]),
        "full: single": lambda: full(s()),
        "full: single, nothing": lambda: full(s(), capacity={"nvidia.com/gpu": "0"}, mig_seen=[]),
        "full: mixed, nothing advertised": lambda: full(m(), capacity={}, mig_seen=[]),
        "full: mixed, whole advertised, no pods": lambda: full(h(), mig_seen=[], full_seen=h().full),
        "full: single, whole listed": lambda: full(s(), mig_seen=[probe(s(), "mig-all-h100-mig-0", [
            *instances(s(), gpus=range(1)), *whole(s(), 1)])]),
        "full: single, whole in two pods": lambda: full(s(), mig_seen=[probe(s(), "mig-all-h100-mig-0", [
            *instances(s(), gpus=range(1)), *whole(s(), 1)]), probe(s(), "mig-one-h100-mig-0", [
                *instances(s(), gpus=range(1))[:1], *whole(s(), 1, 2)])]),
        "full: single, mig off": lambda: full(s(), mig_seen=[probe(s(), "mig-all-h100-mig-0", [
            *instances(s(), gpus=range(1)), *whole(s(), 1)], env="void", edit=mig_mode(False))]),
        "full: single, four mig off": lambda: full(s(), mig_seen=[probe(s(), "mig-all-h100-mig-0", [
            *instances(s(), gpus=range(1)), *whole(s(), 1, 2, 3)], env="void", edit=mig_mode(False))]),
        "full: single, no pods": lambda: full(s(), mig_seen=[]),
        "full: single, cuda whole": lambda: full(s(), mig_seen=[probe(s(), "mig-all-h100-mig-0", whole(s(), 1),
                                                                      env="void", edit=mig_mode(False))]),
        "full: single, void": lambda: full(s(), mig_seen=[probe(s(), "mig-all-h100-mig-0", instances(s()),
                                                                env="void")]),
        "full: single, void, nvml failed": lambda: full(s(), mig_seen=[probe(s(), "mig-all-h100-mig-0",
                                                                             instances(s()), env="void",
                                                                             edit=no_nvml)]),
        "full: single, listed, nvml failed": lambda: full(s(), mig_seen=[blind_nvml(s().all_pods["1g.10gb"])]),
        "full: single, second void pod blind": lambda: full(s(), mig_seen=[s().all_pods["1g.10gb"], probe(
            s(), "mig-one-h100-mig-0", instances(s())[:1], env="void", edit=no_nvml)]),
        "full: single, mode unread": lambda: full(s(), mig_seen=[probe(s(), "mig-all-h100-mig-0", instances(s()),
                                                                       env="void", edit=mig_mode(None))]),
        "full: half": lambda: full(h(), h().full),
        "full: half, no whole pod": lambda: full(h()),
        "full: half, whole pod not observed": lambda: full(h(), failing("pod inventory-a100-0")),
        "full: half, mig-enabled given": lambda: full(h(), probe(h(), "inventory-a100-0", whole(h(), 0, 4))),
        "full: half, two mig-enabled given": lambda: full(h(), probe(h(), "inventory-a100-0", whole(h(), 0, 1, 4))),
        "full: half, instance given": lambda: full(h(), probe(h(), "inventory-a100-0", [
            Visible(h().node.gpus[0], h().node.gpus[0].mig[0]), *whole(h(), 4)])),
        "full: half, instance listed": lambda: full(h(), probe(h(), "inventory-a100-0", whole(h(), 4),
                                                               env=f"{h().node.gpus[4].uuid},MIG-x")),
        "full: half, two instances listed": lambda: full(h(), probe(h(), "inventory-a100-0", whole(h(), 4),
                                                                    env=f"{h().node.gpus[4].uuid},MIG-x,MIG-y")),
        "full: half, instance on a whole gpu": lambda: full(h(), probe(h(), "inventory-a100-0", whole(h(), 4),
                                                                       env=f"{h().node.gpus[4].uuid},MIG-x",
                                                                       edit=mig_mode(False))),
        "full: half, parent with mode unread": lambda: full(h(), probe(h(), "inventory-a100-0", whole(h(), 0, 4),
                                                                       edit=mig_mode(None))),
        "full: half, mode unread": lambda: full(h(), probe(h(), "inventory-a100-0", whole(h(), 4, 5),
                                                           edit=mig_mode(None))),
        "full: half, void": lambda: full(h(), probe(h(), "inventory-a100-0", whole(h(), 4, 5, 6, 7), env="void")),
        "full: half, void, nvml failed": lambda: full(h(), probe(h(), "inventory-a100-0", whole(h(), 4, 5),
                                                                 env="void", edit=no_nvml)),
        "full: half, listed, nvml failed": lambda: full(h(), blind_nvml(h().full) if h().full else None),
        "full: half, blind, instance": lambda: full(h(), probe(h(), "inventory-a100-0", [
            Visible(h().node.gpus[0], h().node.gpus[0].mig[0])], env="void", edit=no_nvml)),
        "full: half, no gpu in nvml": lambda: full(h(), replace_report(h().full, nvml_gpus=()) if h().full else None),
        "full: half, mig pods blind": lambda: full(h(), h().full, mig_seen=[blind_nvml(x) for x in
                                                                             h().all_pods.values()]),
        "full: half, mig pods blind, parent unread": lambda: full(h(), probe(
            h(), "inventory-a100-0", whole(h(), 0, 4), edit=mig_mode(None)), mig_seen=[
            blind_nvml(x) for x in h().all_pods.values()]),
        "full: half, no mig pods": lambda: full(h(), h().full, mig_seen=[]),
        "full: dra": lambda: dra_full(),
        "full: dra, parent published": lambda: dra_full(published_whole(3)),
        "full: dra, two parents published": lambda: dra_full(published_whole(3, 5)),
        "full: dra, whole claim": lambda: dra_full(full_seen=dra_pod(3, edit=mig_mode(False))),
        "full: dra, whole claim given a parent": lambda: dra_full(full_seen=dra_pod(3)),
        "full: dra, whole claim given two parents": lambda: dra_full(full_seen=dra_pod(3, 4)),
        "full: dra, whole claim given a parent, mode unread": lambda: dra_full(full_seen=dra_pod(
            3, edit=mig_mode(None))),
        "full: dra, whole claim given an instance": lambda: dra_full(full_seen=dra_pod(3, mig=True,
                                                                                      edit=mig_mode(False))),
        "full: dra, whole claim given instances": lambda: dra_full(full_seen=dra_pod(3, 4, mig=True,
                                                                                    edit=mig_mode(False))),
        "full: dra, whole claim given four parents": lambda: dra_full(full_seen=dra_pod(0, 1, 2, 3)),
        "full: dra, whole claim blind, an instance": lambda: dra_full(full_seen=dra_pod(3, mig=True, edit=no_nvml)),
        "full: dra, whole claim blind, two instances": lambda: dra_full(full_seen=replace_report(
            dra_pod(3, mig=True, edit=no_nvml), devices=tuple(
                dataclasses.replace(report_of(dra_pod(3, mig=True)).devices[0], uuid=f"MIG-{i}") for i in (1, 2)))),
        "full: dra, whole claim given a whole gpu": lambda: dra_full(full_seen=dra_pod(
            3, edit=lambda d: (mig_mode(False)(d), d["nvml"]["gpus"][0].update(uuid="GPU-whole")))),
        "full: dra, whole claim given four whole gpus": lambda: dra_full(full_seen=dra_pod(
            0, 1, 2, 3, edit=lambda d: (mig_mode(False)(d), [g.update(uuid=f"GPU-whole-{i}") for i, g in enumerate(
                d["nvml"]["gpus"])]))),
        "full: dra, whole claim blind": lambda: dra_full(full_seen=dra_pod(3, edit=no_nvml)),
        "full: dra, whole claim not observed": lambda: dra_full(full_seen=failing("pod smoke-a100-0")),
        "full: dra, whole published": lambda: dra_full(published_whole()[:-1] + (dataclasses.replace(
            published_whole(3)[-1], attributes={"type": "gpu", "uuid": "GPU-other"}),)),
        "full: dra, devices but plugin advertises": lambda: full(m(), devices=dra_node().devices),
        "full: dra, no parent attribute": lambda: dra_full(tuple(dataclasses.replace(
            d, attributes=without(d.attributes, "parentUUID")) for d in dra_node().devices)),
    }


CASES: dict[str, Callable[[], Any]] = {**fact_cases(), **config_cases(), **plan_cases(), **seen_cases(),
                                       **layout_cases(), **isolation_cases(), **full_cases()}


@pytest.mark.parametrize("case", CASES)
def test_the_verdict_is_the_recorded_one(case: str) -> None:
    check_recording("mig", case, lambda: recorded(CASES[case]()))


def test_every_recorded_case_is_still_a_case() -> None:
    recording = json.loads((Path(__file__).parent / "data" / "verdicts" / "mig.json").read_text())
    assert sorted(set(recording) - set(CASES)) == []
