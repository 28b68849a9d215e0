"""security.component-versions' every branch, pinned where mutation testing (scripts/mutation-score)
found it unpinned: each case is one function of gpuconf.checks.security called on crafted pods, a
ClusterPolicy, a driver reading or a floor table, and gives what tests/data/verdicts/security.json
recorded, whole: a verdict's outcome, summary, expected/observed, evidence, facts and what a PASS did
not judge; a node's readings; an image's versions; a floor file's one-line error."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_checks_security import CURRENT, EXPORTER, TOOLKIT, driver, pod
from verdict_record import as_data, check_recording, whole

from gpuconf.checks import security as sec
from gpuconf.cluster.inventory import component_pods
from gpuconf.nodes.facts import Fact, Source

N = "n"
OPERATOR = "nvcr.io/nvidia/gpu-operator:v26.3.2"
PLUGIN = "nvcr.io/nvidia/k8s-device-plugin:v0.17.3"
DCGM = "nvcr.io/nvidia/cloud-native/dcgm:{}-1-ubuntu22.04"
DRA = "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.0"


def stack(*pods: dict[str, Any]) -> tuple[Any, ...]:
    return component_pods(list(pods))


def running(name: str, *images: str, node: str | None = N) -> dict[str, Any]:
    return pod(name, node, *images)


def phase(name: str, state: str, *images: str) -> dict[str, Any]:
    return pod(name, N, *images, phase=state)


#: every component current, each in its own Running pod on n
HEALTHY = tuple(running(f"p{i}", image) for i, image in enumerate(CURRENT))


def readings(*pods: dict[str, Any], drv: Fact | None = None, labels: dict[str, str] | None = None,
             policy: dict[str, Any] | None = None, nvml: str | None = None) -> dict[str, sec.Reading]:
    return sec.node_readings(node=N, driver=drv if drv is not None else driver("580.159.03"), labels=labels or {},
                             pods=stack(*pods), cluster_policy=policy, nvml_driver=nvml,
                             probe="gpuconf/inventory-n" if nvml else None)


def verdict(*pods: dict[str, Any], floors: Callable[[], sec.Floors] = sec.builtin_floors,
            problem: str | None = None, **kw: Any) -> Callable[[], Any]:
    def make() -> Any:
        v = sec.evaluate_component_versions(N, readings(*pods, **kw), floors(), pods_problem=problem)
        return {**whole(v), "facts": v.facts}
    return make


def read(*pods: dict[str, Any], **kw: Any) -> Callable[[], Any]:
    """Each reading as the evidence words it and as the data the verdict is judged from."""
    return lambda: {c: {"text": str(r), **as_data(r)} for c, r in readings(*pods, **kw).items()}


def table(*advisories: dict[str, Any], fail: tuple[str, ...] = ("critical", "high"),
          degraded: tuple[str, ...] = ("medium", "low")) -> sec.Floors:
    return sec.parse_floors({"policy": {"fail": list(fail), "degraded": list(degraded)},
                             "advisories": list(advisories)}, "site.yaml")


def advisory(aid: str, cves: list[dict[str, Any]], fixes: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"id": aid, "title": f"bulletin {aid}", "url": f"https://example.invalid/{aid}", "cves": cves,
            "fixes": fixes, **extra}


CVE_HIGH = {"id": "CVE-2099-0001", "severity": "high", "cvss": 7.5}
CVE_MEDIUM = {"id": "CVE-2099-0002", "severity": "medium"}
CVE_LOW = {"id": "CVE-2099-0003", "severity": "low", "cvss": 2.0}
CVE_CRITICAL = {"id": "CVE-2099-0004", "severity": "critical", "cvss": 9.8}
# Tables are parsed when a case runs (never at import), so that a mutant of parse_floors is the one met.


def driver_table() -> sec.Floors:
    """A driver bulletin: R570 and R580 fixed (listed in that order), unlisted branches affected up to R580."""
    return table(advisory("d1", [CVE_HIGH, CVE_MEDIUM], [
        {"component": "driver", "branch": 570, "fixed": "570.200.01", "cves": ["CVE-2099-0002"]},
        {"component": "driver", "branch": 580, "fixed": "580.100.01"}], unlisted_branches="affected"))


def mixed_table() -> sec.Floors:
    """Findings of every severity on one node, the exporter's with a condition."""
    return table(
    advisory("m1", [CVE_MEDIUM], [{"component": "dcgm-exporter", "fixed": "9.0.0", "condition": "only on Tuesdays"}]),
    advisory("m2", [CVE_LOW], [{"component": "device-plugin", "fixed": "9.0.0"}]),
    advisory("m3", [CVE_LOW, CVE_CRITICAL], [{"component": "container-toolkit", "fixed": "9.0.0",
                                              "cves": ["CVE-2099-0003"]}]),
    advisory("m0", [CVE_LOW], [{"component": "gpu-operator", "fixed": "9.0.0"}]),
    fail=("critical",), degraded=("high", "medium", "low"))


def low_only() -> sec.Floors:
    return table(advisory("l1", [CVE_LOW], [{"component": "dcgm", "fixed": "9.0.0"}]))
POLICY = {"toolkit": {"enabled": True, "version": "v1.19.1-ubuntu20.04"},
          "dcgmExporter": {"version": "4.5.3-4.8.2-ubuntu22.04"},
          "devicePlugin": {"enabled": False, "version": "v0.17.3"}}

CASES: dict[str, Callable[[], Any]] = {
    # an image's versions
    "images": lambda: [sec.parse_image(i) for i in (
        TOOLKIT.format("1.19.1"), "nvcr.io/nvidia/k8s/container-toolkit:1.19.1", EXPORTER.format("4.5.3-4.8.2"),
        "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2", "nvcr.io/nvidia/k8s/dcgm-exporter:v4.8.2",
        "nvcr.io/nvidia/k8s/dcgm-exporter:latest", DCGM.format("4.5.3"), OPERATOR, PLUGIN, DRA,
        "nvcr.io/nvidia/k8s-dra-driver:v0.1.0+dirty", "registry.local:5000/nvidia/k8s-device-plugin",
        "nvcr.io/nvidia/gpu-operator@sha256:" + "a" * 64, "docker.io/library/busybox:1.36", "gpu-operator:v1.2",
        "nvcr.io/nvidia/k8s-device-plugin:v0.17", "nvcr.io/nvidia/k8s-device-plugin:v0.17.3.1",
        "nvcr.io/nvidia/gpu-operator:v26.3.2@sha256:aa@bb")],
    "version tuples": lambda: [sec.version_tuple(v) for v in ("1.2.3", "580.159.03", "10")],
    "a parsed table": lambda: [driver_table(), mixed_table()],
    "read: a pod of another node listed first, an unknown image first": read(
        running("a-other", PLUGIN, node="other"), running("b", "docker.io/library/busybox:1.36",
                                                          TOOLKIT.format("1.19.1"))),
    "read: four running toolkits": read(*(running(f"t{v}", TOOLKIT.format(v)) for v in ("1.19.1", "1.17.8",
                                                                                           "1.18.0", "1.16.2"))),
    # a node's readings
    "read: healthy": read(*HEALTHY),
    "read: nothing on the node, the operator elsewhere": read(running("op", OPERATOR, node="other"),
                                                              running("tk", TOOLKIT.format("1.19.1"), node="other")),
    "read: a pod with two components, one unreadable": read(running("x", TOOLKIT.format("1.19.1"),
                                                                     "nvcr.io/nvidia/k8s-device-plugin:main")),
    "read: a standalone DCGM outranks the exporter's, worst of each": read(
        running("e1", EXPORTER.format("4.2.3-4.8.2")), running("d1", DCGM.format("4.5.3")),
        running("d2", DCGM.format("4.4.0")), running("e2", EXPORTER.format("4.5.3-4.1.3"))),
    "read: the exporter's DCGM where the standalone one is not running": read(
        running("e1", EXPORTER.format("4.2.3-4.8.2")), phase("d1", "Pending", DCGM.format("4.5.3"))),
    "read: three toolkits, two running": read(running("b", TOOLKIT.format("1.19.1")),
                                              running("a", TOOLKIT.format("1.17.8")),
                                              phase("c", "Failed", TOOLKIT.format("1.16.1"))),
    "read: equal versions in two pods": read(running("b", TOOLKIT.format("1.19.1")),
                                             running("a", TOOLKIT.format("1.19.1"))),
    "read: two unreadable running toolkits": read(running("a", "nvcr.io/nvidia/k8s/container-toolkit:latest"),
                                                  running("b", "nvcr.io/nvidia/k8s/container-toolkit@sha256:"
                                                          + "b" * 64)),
    "read: an unreadable pod that is not running": read(phase("a", "Pending",
                                                              "nvcr.io/nvidia/k8s/container-toolkit:latest")),
    "read: the ClusterPolicy where no pod runs": read(phase("tk", "Pending", TOOLKIT.format("1.17.3")),
                                                      policy=POLICY),
    "read: the ClusterPolicy, a node that opts out": read(policy=POLICY, labels={
        "nvidia.com/gpu.deploy.container-toolkit": "False", "nvidia.com/gpu.deploy.dcgm-exporter": "true"}),
    "read: the ClusterPolicy, odd operand specs": read(policy={"toolkit": "v1.19.1", "dcgmExporter": {
        "version": "4.5.3"}, "devicePlugin": {"version": ""}}),
    "read: the ClusterPolicy names no version": read(policy={"toolkit": {"enabled": True}}),
    "read: the driver by NVML, the label agreeing": read(*HEALTHY, nvml="580.159.03"),
    "read: the driver by NVML, a DRA attribute agreeing": read(drv=Fact("580.159.3", Source.SLICE, "driverVersion"),
                                                               nvml="580.159.03"),
    "read: the driver by NVML, no label": read(drv=Fact(None, Source.NONE), nvml="580.95.05"),
    "read: the driver by NVML, a label not a version": read(drv=Fact("580.x", Source.GFD, "k"), nvml="580.95.05"),
    "read: the driver by NVML, a label spelled alike": read(drv=Fact("580.95.5", Source.GFD, "k"), nvml="580.95.05"),
    "read: no driver at all": read(drv=Fact(None, Source.NONE)),
    "read: the driver by a DRA attribute": read(drv=Fact("580.159.3", Source.SLICE, "driverVersion")),
    # the verdict
    "verdict: healthy": verdict(*HEALTHY),
    "verdict: healthy, NVML read": verdict(*HEALTHY, nvml="580.159.03"),
    "verdict: the GPU stack's pods not listed": verdict(problem="listing the GPU stack's pods failed: 403"),
    "verdict: the pods not listed beside a finding": verdict(*HEALTHY, drv=driver("580.95.05"), problem="403"),
    "verdict: every severity, the fail policy critical only": verdict(*HEALTHY, floors=mixed_table),
    "verdict: degraded only": verdict(*HEALTHY, floors=low_only),
    "verdict: degraded beside an unread component": verdict(*HEALTHY[:3], running(
        "dp", "nvcr.io/nvidia/k8s-device-plugin:main"), floors=low_only),
    "verdict: no driver version": verdict(*HEALTHY, drv=Fact(None, Source.NONE)),
    "verdict: two unread": verdict(*HEALTHY[1:], running("dp", "nvcr.io/nvidia/k8s-device-plugin:main"),
                                   drv=Fact(None, Source.NONE)),
    "verdict: the toolkit only configured, an optional one too": verdict(*HEALTHY[2:], policy=POLICY,
                                                                         nvml="580.159.03"),
    "verdict: a configured toolkit that is vulnerable": verdict(policy={"toolkit": {"version": "v1.17.3"}}),
    "verdict: an optional component only configured": verdict(HEALTHY[0], HEALTHY[2], HEALTHY[3], policy=POLICY,
                                                              nvml="580.159.03"),
    "verdict: an optional configured version that is not one": verdict(
        *HEALTHY[:1], policy={"dcgmExporter": {"version": "latest"}}),
    "verdict: pods not running beside a pass": verdict(*HEALTHY, phase("old", "Pending", TOOLKIT.format("1.17.3")),
                                                       phase("dp", "Failed", "nvcr.io/nvidia/k8s-device-plugin:main")),
    "verdict: R580 below its fix": verdict(*HEALTHY, drv=driver("580.95.05"), floors=driver_table),
    "verdict: R580 at its fix": verdict(*HEALTHY, drv=driver("580.100.01"), floors=driver_table),
    "verdict: R570 below its fix, one CVE of two": verdict(*HEALTHY, drv=driver("570.100.01"), floors=driver_table),
    "verdict: R575 between the listed branches": verdict(*HEALTHY, drv=driver("575.1.1"), floors=driver_table),
    "verdict: R535 below every listed branch": verdict(*HEALTHY, drv=driver("535.1.1"), floors=driver_table),
    "verdict: R590 above every listed branch": verdict(*HEALTHY, drv=driver("590.1.1"), floors=driver_table),
    "verdict: the built-in table, R575": verdict(*HEALTHY, drv=driver("575.64.05")),
    "verdict: the built-in table, an old stack": verdict(
        running("tk", TOOLKIT.format("1.16.1")), running("op", "nvcr.io/nvidia/gpu-operator:v24.6.1"),
        running("dp", "nvcr.io/nvidia/k8s-device-plugin:v0.17.2"), running("ex", EXPORTER.format("4.2.3-4.1.3")),
        drv=driver("535.1.1")),
}


@pytest.mark.parametrize("case", CASES)
def test_the_result_is_the_recorded_one(case: str) -> None:
    check_recording("security", case, CASES[case])


# --- the floor file ----------------------------------------------------------------------------------


GOOD = ("schema: 1\nupdated: '2026-12-01'\npolicy: {fail: [critical], degraded: [high]}\nadvisories:\n"
        "  - {id: '1', title: t, url: 'https://x.invalid/1', cves: [{id: CVE-2099-0009, severity: high}], fixes: "
        "[{component: dcgm, fixed: '1.0.0'}]}\n")


@pytest.mark.parametrize("content, words", [
    (GOOD, None),
    (b"\xff\xfe not utf-8", "cannot read: not UTF-8 text (invalid start byte at byte 0)"),
    (None, "cannot read: No such file or directory"),
    (GOOD.replace("degraded: [high]", "degraded: [critical, high]"), "policy: critical is both fail and degraded"),
    (GOOD.replace("degraded: [high]", "degraded: [critical, low]").replace("fail: [critical]", "fail: [critical, low]"),
     "policy: critical, low is both fail and degraded"),
    ("", "1:1: empty file: a security floor is a mapping with schema: 1, policy and advisories (see "
         "gpuconf/data/security_advisories.yaml)"),
    (GOOD.replace("fixed: '1.0.0'", "fixed: 1.0"), '5:131: advisories[0].fixes[0].fixed: expected a string, got a '
     'number (1.0) (quote versions: "1.17.8")'),
], ids=["a good file", "not UTF-8", "missing", "a severity both ways", "two severities both ways", "empty",
        "an unquoted version"])
def test_a_floor_file_reads_or_fails_in_one_line(tmp_path: Path, content: str | bytes | None,
                                                 words: str | None) -> None:
    path = tmp_path / "floor.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    if words is None:
        floors = sec.load_floors(path)
        assert floors.source == str(path) and floors.fail == {"critical"} and floors.degraded == {"high"}
        assert [(a.id, a.cves[0].cvss, a.fixes[0].branch, a.unlisted_branches_affected) for a in floors.advisories] == [
            ("1", None, None, False)]
        return
    with pytest.raises(sec.SecurityFloorError) as e:
        sec.load_floors(path)
    assert str(e.value) == f"{path}:{'' if words[0].isdigit() else ' '}{words}", str(e.value)


def test_the_built_in_table_is_read_once_and_names_itself() -> None:
    assert sec.builtin_floors() is sec.builtin_floors()
    assert sec.builtin_floors().source == "gpuconf/data/security_advisories.yaml"
