"""dra.devices-untainted and dra.tainted-device-not-allocated (gpuconf/checks/dra_taints.py), branch
by branch, where mutation testing (scripts/mutation-score) found them unpinned: which devices a
DeviceTaintRule selects (each of driver, pool and device, an empty selector, one this reading cannot
evaluate), how each taint is described (an Xid known, unknown or not a number, NVIDIA's other keys, a
foreign key; the GPU without UUID or PCI address), FAIL against DEGRADED against PASS, and every
verdict recorded whole (outcome, summary, expected, observed, evidence, a NOT TESTED's kind) in
tests/data/verdicts/dra_taints.json, on the simulated h200-dra-only node's slice with one thing
changed per case."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from test_checks_dra import NODE, claim
from test_checks_dra_first import devices
from verdict_record import check_recording, whole

from gpuconf.checks.dra import AllocatedDevice, Allocation
from gpuconf.checks.dra_taints import (
    NOT_ALLOCATED,
    UNTAINTED,
    TaintRule,
    device_taint_rules,
    evaluate_devices_untainted,
    evaluate_tainted_not_allocated,
    taints_of,
)
from gpuconf.checks.health import Xid
from gpuconf.nodes.devices import DeviceTaint, SliceDevice
from gpuconf.outcomes import COULD_NOT_RUN, NOT_APPLICABLE
from gpuconf.verdict import Outcome

XID48 = {"key": "gpu.nvidia.com/xid", "value": "48", "effect": "NoSchedule"}
XID13_NONE = {"key": "gpu.nvidia.com/xid", "value": "13", "effect": "None"}
LOST = {"key": "gpu.nvidia.com/gpu-lost", "effect": "NoSchedule"}
UNMONITORED = {"key": "gpu.nvidia.com/unmonitored", "effect": "None"}
FOREIGN_EXECUTE = {"key": "example.com/maintenance", "value": "drain", "effect": "NoExecute"}
CLEAN = devices()
POOL = CLEAN[0].pool
DRIVER = CLEAN[0].driver



def rule(name: str = "r", *, selector: Any = None, taint: Any = None, drop: Sequence[str] = ()) -> dict[str, Any]:
    """A DeviceTaintRule object: ``selector`` (default: device gpu-6 of the node's pool), ``taint``
    (default: NoExecute maintenance); ``drop`` names spec fields or "metadata" to leave out."""
    doc: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceTaintRule",
                           "metadata": {"name": name},
                           "spec": {"deviceSelector": {"driver": DRIVER, "pool": POOL, "device": "gpu-6"}
                                    if selector is None else selector,
                                    "taint": FOREIGN_EXECUTE if taint is None else taint}}
    for key in drop:
        if key == "metadata":
            del doc["metadata"]
        else:
            del doc["spec"][key]
    return doc


def rules(*objects: Mapping[str, Any]) -> Callable[[], Any]:
    return lambda: device_taint_rules(objects)


def selects(**fields: str | None) -> Callable[[], Any]:
    """Which of the node's first three devices a rule with ``fields`` selects."""
    r = TaintRule("r", DeviceTaint("k", "v", "NoSchedule"), **fields)
    return lambda: [d.name for d in CLEAN[:3] if r.selects(d)]


def untainted(taints: Mapping[int, Sequence[Mapping[str, str]]] | None = None, rs: Sequence[TaintRule] = (),
              ds: Sequence[SliceDevice] | None = None, **kw: Any) -> Callable[[], Any]:
    return lambda: whole(evaluate_devices_untainted(NODE, devices(taints) if ds is None else ds, rs, **kw))


def not_allocated(taints: Mapping[int, Sequence[Mapping[str, str]]] | None, allocations: Sequence[Allocation],
                  rs: Sequence[TaintRule] = (), ds: Sequence[SliceDevice] | None = None,
                  **kw: Any) -> Callable[[], Any]:
    return lambda: whole(evaluate_tainted_not_allocated(NODE, devices(taints) if ds is None else ds, allocations, rs,
                                                        **kw))


def bare(index: int, taints: Sequence[Mapping[str, str]]) -> list[SliceDevice]:
    """The node's devices with device ``index`` tainted and published without UUID or PCI address."""
    ds = list(devices({index: taints}))
    d = ds[index]
    ds[index] = dataclasses.replace(d, attributes={k: v for k, v in d.attributes.items()
                                                   if k not in ("uuid", "resource.kubernetes.io/pciBusID")})
    return ds


def rule_on(device: str, effect: str = "NoExecute", name: str = "drain") -> TaintRule:
    return TaintRule(name, DeviceTaint("example.com/maintenance", "drain", effect), DRIVER, POOL, device)


def elsewhere(name: str, device: str) -> Allocation:
    """A claim allocated a device of another node's pool, of the same name as one of this node's."""
    return Allocation(name, "p", "gpu", (AllocatedDevice("gpu", DRIVER, "h200-1", device),))


XIDS = {48: Xid(48, "Double Bit ECC Error", "isolate", "drain the node")}

CASES: dict[str, Callable[[], Any]] = {
    # which devices a rule selects
    "selects: everything": selects(),
    "selects: driver": selects(driver=DRIVER),
    "selects: another driver": selects(driver="other.example.com"),
    "selects: pool": selects(pool=POOL),
    "selects: another pool": selects(pool="h200-1"),
    "selects: device": selects(device="gpu-1"),
    "selects: device of another pool": selects(pool="h200-1", device="gpu-1"),
    "selects: device of another driver": selects(driver="other.example.com", device="gpu-1"),
    # DeviceTaintRule objects read as rules
    "rules: a device": rules(rule()),
    "rules: no name": rules(rule(drop=("metadata",))),
    "rules: no selector": rules(rule(drop=("deviceSelector",))),
    "rules: a null selector": rules(rule(selector=None) | {"spec": {"deviceSelector": None, "taint": XID48}}),
    "rules: an empty selector": rules(rule(selector={})),
    "rules: no spec": rules({"metadata": {"name": "x"}}, {"metadata": {"name": "y"}, "spec": None}),
    "rules: empty fields": rules(rule(selector={"driver": "", "pool": "", "device": ""})),
    "rules: a device class": rules(rule(selector={"deviceClassName": "gpu.nvidia.com"})),
    "rules: CEL selectors": rules(rule(selector={"selectors": [{"cel": {"expression": "true"}}]})),
    "rules: a device class naming a device": rules(rule(selector={"deviceClassName": "gpu.nvidia.com",
                                                                  "device": "gpu-2"})),
    "rules: CEL naming a device": rules(rule(selector={"selectors": [{"cel": {"expression": "x"}}],
                                                       "device": "gpu-2"})),
    "rules: no taint": rules(rule(drop=("taint",))),
    "rules: a taint without value or effect": rules(rule(taint={"key": "example.com/k"})),
    "rules: a null taint": rules(rule(taint={}) | {"spec": {"deviceSelector": {"device": "gpu-1"}, "taint": None}}),
    "rules: two, one skipped": rules(rule("a", selector={"deviceClassName": "x"}), rule("b")),
    "rules: two, the first without a selector": rules(rule("a", drop=("deviceSelector",)), rule("b")),
    # where each taint was read
    "taints: slice then rules": lambda: taints_of(devices({6: [XID48]})[6], [rule_on("gpu-6"), rule_on("gpu-5"),
                                                                             rule_on("gpu-6", "None", "second")]),
    "taints: none": lambda: taints_of(CLEAN[0], [rule_on("gpu-6")]),
    # dra.devices-untainted
    "untainted: passes": untainted(),
    "untainted: passes, rules read": untainted(rs=[rule_on("gpu-99")]),
    "untainted: no device": untainted(ds=()),
    "untainted: fatal xid": untainted({3: [XID48]}),
    "untainted: fatal xid, a table given": untainted({3: [XID48]}, xids=XIDS),
    "untainted: fatal xid, an empty table": untainted({3: [XID48]}, xids={}),
    "untainted: unknown xid": untainted({3: [{**XID48, "value": "9999"}]}),
    "untainted: xid not a number": untainted({3: [{**XID48, "value": "abc"}]}),
    "untainted: gpu lost": untainted({1: [LOST]}),
    "untainted: foreign NoExecute": untainted({1: [FOREIGN_EXECUTE]}),
    "untainted: a rule's taint": untainted(rs=[rule_on("gpu-6")]),
    "untainted: a rule's taint of effect None": untainted(rs=[rule_on("gpu-6", "None")]),
    "untainted: two out of service": untainted({1: [LOST], 4: [XID48]}),
    "untainted: three tainted, one of effect None": untainted({1: [LOST], 4: [XID48], 5: [UNMONITORED]}),
    "untainted: one out, one of effect None": untainted({5: [UNMONITORED], 1: [LOST]}),
    "untainted: two taints on one gpu": untainted({2: [XID13_NONE, LOST]}),
    "untainted: effect None": untainted({2: [XID13_NONE]}),
    "untainted: effect None on two": untainted({2: [XID13_NONE], 5: [UNMONITORED]}),
    "untainted: an empty effect": untainted({2: [{"key": "example.com/k"}]}),
    "untainted: no uuid, no pci": untainted(ds=bare(2, [LOST])),
    # dra.tainted-device-not-allocated
    "allocated: not applicable": not_allocated(None, [claim("c", "p", "g", "gpu-0")]),
    "allocated: effect None only": not_allocated({3: [UNMONITORED]}, [claim("c", "p", "g", "gpu-3")]),
    "allocated: passes": not_allocated({3: [XID48]}, [claim("c1", "p", "gpus", "gpu-0", "gpu-1"),
                                                      claim("c2", "q", "first", "gpu-4", "gpu-0")]),
    "allocated: passes, two tainted": not_allocated({3: [XID48], 6: [LOST]}, [claim("c1", "p", "g", "gpu-1")]),
    "allocated: passes, tainted by a rule": not_allocated(None, [claim("c1", "p", "g", "gpu-1")],
                                                          [rule_on("gpu-6")]),
    "allocated: tainted device allocated": not_allocated({3: [XID48]}, [claim("c1", "p", "g", "gpu-2", "gpu-3")]),
    "allocated: two claims on tainted devices": not_allocated(
        {3: [XID48], 6: [LOST]}, [claim("c1", "p", "g", "gpu-1"), claim("c2", "p", "g", "gpu-6"),
                                  claim("c3", "q", "g", "gpu-3")]),
    "allocated: the blocking taint after one of effect None": not_allocated(
        {3: [UNMONITORED, XID48]}, [claim("c1", "p", "g", "gpu-3")]),
    "allocated: a rule's device allocated": not_allocated(None, [claim("c1", "p", "g", "gpu-6")],
                                                          [rule_on("gpu-6", "None", "watch"), rule_on("gpu-6")]),
    "allocated: incomplete record": not_allocated({3: [XID48]}, [claim("c1", "p", "g", "gpu-0")],
                                                  unknown="watch closed"),
    "allocated: incomplete record, tainted allocated": not_allocated(
        {3: [XID48]}, [claim("c1", "p", "g", "gpu-3")], unknown="watch closed"),
    "allocated: nothing seen": not_allocated({3: [XID48], 5: [LOST]}, []),
    "allocated: only other nodes' devices": not_allocated({3: [XID48]}, [elsewhere("c9", "gpu-3")]),
    "allocated: no uuid, no pci": not_allocated(None, [claim("c1", "p", "g", "gpu-2")], ds=bare(2, [LOST])),
}


@pytest.mark.parametrize("case", CASES)
def test_the_verdict_is_the_recorded_one(case: str) -> None:
    check_recording("dra_taints", case, CASES[case])


def test_each_outcome_is_its_checks_and_a_not_tested_says_why() -> None:
    expected = {"untainted: passes": (UNTAINTED, Outcome.PASS, None),
                "untainted: no device": (UNTAINTED, Outcome.NOT_TESTED, NOT_APPLICABLE),
                "untainted: fatal xid": (UNTAINTED, Outcome.FAIL, None),
                "untainted: effect None": (UNTAINTED, Outcome.DEGRADED, None),
                "untainted: one out, one of effect None": (UNTAINTED, Outcome.FAIL, None),
                "allocated: not applicable": (NOT_ALLOCATED, Outcome.NOT_TESTED, NOT_APPLICABLE),
                "allocated: passes": (NOT_ALLOCATED, Outcome.PASS, None),
                "allocated: tainted device allocated": (NOT_ALLOCATED, Outcome.FAIL, None),
                "allocated: incomplete record": (NOT_ALLOCATED, Outcome.NOT_TESTED, COULD_NOT_RUN),
                "allocated: incomplete record, tainted allocated": (NOT_ALLOCATED, Outcome.FAIL, None),
                "allocated: nothing seen": (NOT_ALLOCATED, Outcome.NOT_TESTED, COULD_NOT_RUN),
                "allocated: only other nodes' devices": (NOT_ALLOCATED, Outcome.NOT_TESTED, COULD_NOT_RUN)}
    for case, (check, outcome, kind) in expected.items():
        v = CASES[case]()
        assert (v["check"], v["node"], v["outcome"], v["kind"]) == (check, NODE, outcome.value, kind), case


def test_a_rule_this_reading_cannot_evaluate_never_taints_every_device() -> None:
    assert device_taint_rules([rule(selector={"deviceClassName": "gpu.nvidia.com"})]) == ()
    (kept,) = device_taint_rules([rule(selector={"deviceClassName": "gpu.nvidia.com", "device": "gpu-2"})])
    assert [d.name for d in CLEAN if kept.selects(d)] == ["gpu-2"]
    (every,) = device_taint_rules([rule(selector={})])
    assert all(every.selects(d) for d in CLEAN)
