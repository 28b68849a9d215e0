"""security.component-versions: versions read from real pod images, the floor table held at least as
strict as ClusterMAX's published minimums, each severity's outcome, the driver's branch logic, fail
closed on what cannot be read, --security-floor, and the suite on a multi-pool simulated cluster
with a vulnerable toolkit on one pool and a vulnerable driver on another."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuconf.checks import security as sec
from gpuconf.cluster.inventory import component_pods
from gpuconf.nodes.facts import Fact, Source
from gpuconf.verdict import Outcome

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "data" / "real" / "security"


def driver(version: str | None) -> Fact:
    return Fact(version, Source.GFD, "nvidia.com/cuda.driver-version.full") if version else Fact(None, Source.NONE)


def pod(name: str, node: str | None, *images: str, namespace: str = "gpu-operator",
        phase: str = "Running") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"nodeName": node, "containers": [
        {"name": f"c{i}", "image": image} for i, image in enumerate(images)]}, "status": {"phase": phase}}


TOOLKIT = "nvcr.io/nvidia/k8s/container-toolkit:v{}-ubuntu20.04"
EXPORTER = "nvcr.io/nvidia/k8s/dcgm-exporter:{}-ubuntu22.04"


def readings(drv: str | None = "580.159.03", *images: str, policy: dict[str, Any] | None = None,
             labels: dict[str, str] | None = None) -> dict[str, sec.Reading]:
    pods = component_pods([pod(f"p{i}", "n", image) for i, image in enumerate(images)])
    return sec.node_readings(node="n", driver=driver(drv), labels=labels or {}, pods=pods, cluster_policy=policy)


def verdict(drv: str | None = "580.159.03", *images: str, floors: sec.Floors | None = None,
            **kw: Any) -> Any:
    return sec.evaluate_component_versions("n", readings(drv, *images, **kw), floors or sec.builtin_floors())


# --- reading versions from real samples ----------------------------------------------------------


@pytest.mark.parametrize("row", yaml.safe_load((REAL / "image-tags.yaml").read_text()), ids=lambda r: r["image"])
def test_each_published_image_reference_gives_its_components_versions(row: dict[str, Any]) -> None:
    component, versions, problem = sec.parse_image(row["image"])
    assert (component, versions, problem) == (row["component"], row["versions"], None)


def test_the_real_toolkit_pod_of_gpu_operator_24_6_1_reads_as_toolkit_1_16_1_and_fails_on_cve_2024_0132() -> None:
    sample = yaml.safe_load((REAL / "toolkit-daemonset-pod-v1.16.1.yaml").read_text())
    sample["spec"]["nodeName"] = "n"
    sample["status"] = {"phase": "Running"}  # the excerpt prints no status: a pod that is not Running runs nothing
    pods = component_pods([sample])
    assert [p.images for p in pods] == [("nvcr.io/nvidia/k8s/container-toolkit:v1.16.1-ubuntu20.04",)]  # no init
    got = sec.node_readings(node="n", driver=driver("580.159.03"), labels={}, pods=pods, cluster_policy=None)
    assert got["container-toolkit"].version == "1.16.1"
    assert "pod gpu-operator/nvidia-container-toolkit-daemonset-h2d95" in got["container-toolkit"].source
    v = sec.evaluate_component_versions("n", got, sec.builtin_floors())
    assert v.outcome is Outcome.FAIL
    assert "NVIDIA Container Toolkit 1.16.1: NVIDIA bulletin 5582 CVE-2024-0132 (critical 9)" in v.summary
    assert "fixed in 1.16.2" in v.summary


@pytest.mark.parametrize("image, problem", [
    ("nvcr.io/nvidia/k8s/container-toolkit@sha256:" + "a" * 64, "named by digest"),
    ("nvcr.io/nvidia/k8s/container-toolkit:latest", "tag 'latest'"),
    ("registry.local:5000/nvidia/k8s-device-plugin:main", "tag 'main'"),
    ("registry.local:5000/nvidia/k8s-device-plugin", "has no tag (it runs whatever latest is), so no version"),
], ids=["by digest", "latest", "a branch tag behind a registry port", "no tag behind a registry port"])
def test_an_image_whose_tag_carries_no_version_is_a_problem_not_a_version(image: str, problem: str) -> None:
    component, versions, why = sec.parse_image(image)
    assert component is not None and versions == {} and why is not None and problem in why


def test_an_image_by_tag_and_digest_reads_the_tag() -> None:
    assert sec.parse_image("nvcr.io/nvidia/gpu-operator:v25.3.2@sha256:" + "b" * 64)[1] == {"gpu-operator": "25.3.2"}


# --- the table against ClusterMAX's published floors ---------------------------------------------


def max_fixed(component: str, branch: int | None = None) -> tuple[int, ...]:
    fixes = [f for a in sec.builtin_floors().advisories for f in a.fixes
             if f.component == component and (branch is None or f.branch == branch)]
    return max(sec.version_tuple(f.fixed) for f in fixes)


def test_our_floors_are_at_least_as_strict_as_clustermax_minimum_versions() -> None:
    cmax = json.loads((REAL / "clustermax-minimum-versions-50ecb6fb.json").read_text())["components"]
    for branch, floor in cmax["nvidiaDriver"]["branches"].items():
        assert max_fixed("driver", int(branch)) >= sec.version_tuple(floor), (branch, floor)
    for ours, theirs in (("container-toolkit", "nvidiaContainerToolkit"), ("dcgm", "dcgm"),
                         ("dcgm-exporter", "dcgmExporter")):
        assert max_fixed(ours) >= sec.version_tuple(cmax[theirs]["minimum"]), (ours, cmax[theirs]["minimum"])


def test_every_advisory_links_nvidias_bulletin_and_the_copy_read() -> None:
    table = yaml.safe_load((ROOT / "gpuconf/data/security_advisories.yaml").read_text())
    for row in table["advisories"]:
        assert row["url"] == f"https://nvidia.custhelp.com/app/answers/detail/a_id/{row['id']}", row["id"]
        assert f"/{row['id']}/{row['id']}.md" in row["source"] and row["note"], row["id"]


# --- the judgement ---------------------------------------------------------------------------------


CURRENT = (TOOLKIT.format("1.19.1"), EXPORTER.format("4.5.3-4.8.2"), "nvcr.io/nvidia/gpu-operator:v26.3.2",
           "nvcr.io/nvidia/k8s-device-plugin:v0.17.3")


def test_a_node_at_every_current_release_passes_and_lists_what_it_read() -> None:
    v = verdict("580.159.03", *CURRENT)
    assert v.outcome is Outcome.PASS, v.message()
    assert v.summary == ("no component below a security floor: GPU driver 580.159.03, NVIDIA Container Toolkit "
                         "1.19.1, GPU Operator 26.3.2, NVIDIA device plugin 0.17.3, DCGM 4.5.3, DCGM exporter 4.8.2")
    assert "read: NVIDIA DRA driver: not deployed (no pod on n runs its image)" in v.evidence


@pytest.mark.parametrize("drv, images, bulletins, fixed", [
    ("580.159.03", (TOOLKIT.format("1.17.7"), *CURRENT[1:]), ["5659", "5850"], ["1.17.8", "1.19.1"]),
    ("580.159.03", (TOOLKIT.format("1.19.0"), *CURRENT[1:]), ["5850"], ["1.19.1"]),
    ("580.159.03", (*CURRENT[:1], EXPORTER.format("4.2.3-4.1.3"), *CURRENT[2:]), ["5857", "5857"], ["4.5.3", "4.8.2"]),
    ("580.159.03", (*CURRENT[:2], "nvcr.io/nvidia/gpu-operator:v25.3.1", CURRENT[3]), ["5659", "5850"],
     ["25.3.2", "26.3.2"]),
    ("580.126.09", CURRENT, ["5821"], ["580.159.03"]),
    ("535.288.01", CURRENT, ["5821"], ["535.309.01"]),
    ("570.195.03", CURRENT, ["5747"], ["570.211.01"]),
], ids=["NVIDIAScape toolkit 1.17.7 (critical)", "toolkit 1.19.0 (high)", "DCGM 4.2.3 and exporter 4.1.3 (high)",
        "operator 25.3.1", "R580 fixed in January, not in May", "R535 below its May floor", "R570 below its floor"])
def test_a_component_below_a_floor_fails_naming_advisory_and_fixed_version(drv: str, images: tuple[str, ...],
                                                                         bulletins: list[str], fixed: list[str]):
    v = verdict(drv, *images)
    assert v.outcome is Outcome.FAIL, v.message()
    assert [f["advisory"] for f in v.facts["findings"]] == bulletins
    assert [f["fixed"] for f in v.facts["findings"]] == fixed
    for f in v.facts["findings"]:
        assert f"< {f['fixed']} (bulletin {f['advisory']}, {f['severity']})" in (v.observed or "")


@pytest.mark.parametrize("drv", ["570.211.01", "590.48.01", "595.71.05", "610.43.02"],
                         ids=["R570 at its floor (May lists no R570)", "R590 at its floor", "R595 at its floor",
                              "a branch newer than every bulletin's"])
def test_a_driver_at_its_branchs_floor_passes(drv: str) -> None:
    assert verdict(drv, *CURRENT).outcome is Outcome.PASS


def test_a_branch_a_bulletin_leaves_without_an_update_is_a_finding() -> None:
    v = verdict("575.64.05", *CURRENT)
    assert v.outcome is Outcome.FAIL
    (finding,) = v.facts["findings"]
    assert finding["advisory"] == "5747" and finding["fixed"].startswith("a branch with an update (R575 gets none: ")
    assert "R590 590.48.01, R580 580.126.09, R570 570.211.01, R535 535.288.01" in finding["fixed"]


def floors_of(severity: str, *, cvss: float = 5.0) -> sec.Floors:
    return sec.parse_floors({"policy": {"fail": ["critical", "high"], "degraded": ["medium", "low"]}, "advisories": [
        {"id": "9001", "title": "t", "url": "https://example.invalid/9001",
         "cves": [{"id": "CVE-2099-0001", "severity": severity, "cvss": cvss}],
         "fixes": [{"component": "dcgm-exporter", "fixed": "9.0.0"}]}]}, "site.yaml")


@pytest.mark.parametrize("severity, outcome", [("critical", Outcome.FAIL), ("high", Outcome.FAIL),
                                               ("medium", Outcome.DEGRADED), ("low", Outcome.DEGRADED)])
def test_the_policy_decides_each_severitys_outcome(severity: str, outcome: Outcome) -> None:
    v = verdict("580.159.03", *CURRENT, floors=floors_of(severity))
    assert v.outcome is outcome
    assert f"DCGM exporter 4.8.2: NVIDIA bulletin 9001 CVE-2099-0001 ({severity} 5); fixed in 9.0.0" in v.summary
    assert "judged against site.yaml" in v.evidence


# --- fail closed -----------------------------------------------------------------------------------


def test_a_node_without_a_driver_version_is_not_tested_naming_the_driver() -> None:
    v = verdict(None, *CURRENT)
    assert v.outcome is Outcome.NOT_TESTED and v.summary.startswith("GPU driver version not readable: the node "
                                                                     "publishes no driver version")


def test_a_node_without_a_toolkit_pod_or_clusterpolicy_version_is_not_tested_naming_the_toolkit() -> None:
    v = verdict("580.159.03", *CURRENT[1:])
    assert v.outcome is Outcome.NOT_TESTED
    assert v.summary.startswith("NVIDIA Container Toolkit version not readable: no toolkit pod on n")


def test_the_clusterpolicy_names_the_toolkit_where_no_pod_shows_it_unless_the_node_opts_out() -> None:
    policy = {"toolkit": {"enabled": True, "version": "v1.17.8-ubuntu20.04"}}
    got = readings("580.159.03", *CURRENT[1:], policy=policy)["container-toolkit"]
    assert got.version == "1.17.8" and got.source.startswith("ClusterPolicy spec.toolkit.version")
    v = verdict("580.159.03", *CURRENT[1:], policy=policy)
    assert v.outcome is Outcome.FAIL and [f["advisory"] for f in v.facts["findings"]] == ["5850"]
    opted_out = readings("580.159.03", *CURRENT[1:], policy=policy,
                         labels={"nvidia.com/gpu.deploy.container-toolkit": "false"})["container-toolkit"]
    assert opted_out.version is None and opted_out.deployed
    assert readings("580.159.03", *CURRENT[1:], policy={"toolkit": {"enabled": False, "version": "v1.17.8"}})[
        "container-toolkit"].version is None


def test_a_present_component_without_a_version_is_not_tested_and_a_finding_outranks_it() -> None:
    by_digest = "nvcr.io/nvidia/k8s-device-plugin@sha256:" + "c" * 64
    v = verdict("580.159.03", *CURRENT[:3], by_digest)
    assert v.outcome is Outcome.NOT_TESTED and "NVIDIA device plugin version not readable" in v.summary
    v = verdict("580.126.09", *CURRENT[:3], by_digest)
    assert v.outcome is Outcome.FAIL  # a vulnerable driver whatever the unread plugin is
    assert any("NVIDIA device plugin: version not readable" in e for e in v.evidence)


def test_a_standalone_dcgm_outranks_the_one_the_exporter_image_embeds() -> None:
    got = readings("580.159.03", *CURRENT, "nvcr.io/nvidia/cloud-native/dcgm:4.5.3-1-ubuntu22.04")
    assert got["dcgm"].version == "4.5.3" and "cloud-native/dcgm" in got["dcgm"].source
    got = readings("580.159.03", EXPORTER.format("4.5.3-4.8.2"), "nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04")
    assert got["dcgm"].version == "4.2.3"


def test_another_nodes_pods_say_nothing_of_this_node_but_the_operators_pod_counts_anywhere() -> None:
    pods = component_pods([pod("tk", "other", TOOLKIT.format("1.19.1")),
                           pod("op", "other", "nvcr.io/nvidia/gpu-operator:v26.3.2")])
    got = sec.node_readings(node="n", driver=driver("580.159.03"), labels={}, pods=pods, cluster_policy=None)
    assert got["container-toolkit"].version is None and got["gpu-operator"].version == "26.3.2"


# --- every pod of a component, Running pods only ----------------------------------------------------

TK = "nvidia-container-toolkit-daemonset-"
OTHERS = tuple(CURRENT[1:])


def judged(*pods: dict[str, Any], drv: str | None = "580.159.03", policy: dict[str, Any] | None = None,
           nvml: str | None = None) -> Any:
    """The verdict on node n with these pods (beside the current exporter, operator and plugin, each Running)."""
    stack = [pod(f"other-{i}", "n", image) for i, image in enumerate(OTHERS)]
    got = sec.node_readings(node="n", driver=driver(drv), labels={}, pods=component_pods([*stack, *pods]),
                            cluster_policy=policy, nvml_driver=nvml, probe="gpuconf/inventory-n" if nvml else None)
    return sec.evaluate_component_versions("n", got, sec.builtin_floors())


@pytest.mark.parametrize("running, pending", [("zq9x2", "ab12c"), ("ab12c", "zq9x2")],
                         ids=["the Running pod sorts last", "the Running pod sorts first"])
def test_a_rollout_with_the_old_toolkit_running_and_the_new_one_pending_fails_on_the_running_one(
        running: str, pending: str) -> None:
    v = judged(pod(TK + running, "n", TOOLKIT.format("1.17.3")),
               pod(TK + pending, "n", TOOLKIT.format("1.19.1"), phase="Pending"))
    assert v.outcome is Outcome.FAIL, v.message()
    assert v.summary.startswith("2 security advisories (critical, high) affect NVIDIA Container Toolkit 1.17.3: ")
    assert v.observed == ("NVIDIA Container Toolkit 1.17.3 < 1.17.8 (bulletin 5659, critical); NVIDIA Container "
                          "Toolkit 1.17.3 < 1.19.1 (bulletin 5850, high)")
    assert (f"read: NVIDIA Container Toolkit 1.17.3 (image {TOOLKIT.format('1.17.3')} of pod gpu-operator/{TK}"
            f"{running})") in v.evidence
    assert (f"not judged: NVIDIA Container Toolkit 1.19.1 in the image {TOOLKIT.format('1.19.1')} of pod "
            f"gpu-operator/{TK}{pending}, which is Pending: not running, not judged") in v.evidence


@pytest.mark.parametrize("old, new", [("zq9x2", "ab12c"), ("ab12c", "zq9x2")],
                         ids=["the old pod sorts last", "the old pod sorts first"])
def test_two_running_toolkit_pods_are_judged_by_the_worst_version(old: str, new: str) -> None:
    v = judged(pod(TK + old, "n", TOOLKIT.format("1.17.3")), pod(TK + new, "n", TOOLKIT.format("1.19.1")))
    assert v.outcome is Outcome.FAIL, v.message()
    assert [f["version"] for f in v.facts["findings"]] == ["1.17.3", "1.17.3"]
    assert (f"read: NVIDIA Container Toolkit 1.17.3 (image {TOOLKIT.format('1.17.3')} of pod gpu-operator/{TK}{old}; "
            f"also running: 1.19.1 (image {TOOLKIT.format('1.19.1')} of pod gpu-operator/{TK}{new}))") in v.evidence


@pytest.mark.parametrize("phase", ["Failed", "Pending", "Succeeded", "Unknown"])
def test_a_toolkit_pod_that_is_not_running_is_no_pass_however_fixed_its_tag(phase: str) -> None:
    v = judged(pod(TK + "ab12c", "n", TOOLKIT.format("1.19.1"), phase=phase))
    assert v.outcome is Outcome.NOT_TESTED and v.kind == "could-not-run", v.message()
    assert v.summary == ("NVIDIA Container Toolkit version not readable: no toolkit pod on n (a Running "
                         "app=nvidia-container-toolkit-daemonset in any namespace; 1 not Running, named in the "
                         "evidence) and no ClusterPolicy spec.toolkit.version for it: a toolkit installed on the host "
                         "shows its version only there (nvidia-ctk --version)")
    assert (f"not judged: NVIDIA Container Toolkit 1.19.1 in the image {TOOLKIT.format('1.19.1')} of pod "
            f"gpu-operator/{TK}ab12c, which is {phase}: not running, not judged") in v.evidence


def test_the_clusterpolicys_toolkit_version_alone_is_what_is_configured_not_a_pass() -> None:
    policy = {"toolkit": {"enabled": True, "version": "v1.19.1-ubuntu20.04"}}
    v = judged(policy=policy)
    assert v.outcome is Outcome.NOT_TESTED and v.kind == "could-not-run", v.message()
    assert v.summary == ("NVIDIA Container Toolkit 1.19.1 is only what the ClusterPolicy spec.toolkit.version "
                         "'v1.19.1-ubuntu20.04' configures: no pod of it runs on n, so what n runs is not known")
    assert ("read: NVIDIA Container Toolkit 1.19.1 (ClusterPolicy spec.toolkit.version 'v1.19.1-ubuntu20.04': "
            "configured, no pod of it runs on the node)") in v.evidence
    # a Pending toolkit pod beside it changes nothing: the configured version is still not what runs
    v = judged(pod(TK + "ab12c", "n", TOOLKIT.format("1.19.1"), phase="Pending"), policy=policy)
    assert v.outcome is Outcome.NOT_TESTED and v.summary.startswith("NVIDIA Container Toolkit 1.19.1 is only what")
    # a Running pod is what the node runs, whatever the ClusterPolicy says
    assert judged(pod(TK + "zq9x2", "n", TOOLKIT.format("1.19.1")), policy={"toolkit": {"version": "v1.17.3"}}
                  ).outcome is Outcome.PASS


def test_an_optional_component_only_configured_passes_naming_it_not_judged() -> None:
    stack = [pod("tk", "n", TOOLKIT.format("1.19.1")), pod("op", "n", CURRENT[2]), pod("dp", "n", CURRENT[3])]
    got = sec.node_readings(node="n", driver=driver("580.159.03"), labels={}, pods=component_pods(stack),
                            cluster_policy={"dcgmExporter": {"version": "4.5.3-4.8.2-ubuntu22.04"}},
                            nvml_driver="580.159.03", probe="gpuconf/inventory-n")
    v = sec.evaluate_component_versions("n", got, sec.builtin_floors())
    assert v.outcome is Outcome.PASS, v.message()
    assert v.not_judged == ("DCGM exporter 4.8.2 (ClusterPolicy spec.dcgmExporter.version '4.5.3-4.8.2-ubuntu22.04': "
                            "configured, no pod of it runs on the node)",)


def test_a_pending_optional_component_is_not_deployed_and_named_beside_the_pass() -> None:
    stack = [pod("tk", "n", TOOLKIT.format("1.19.1")), pod("dp", "n", "nvcr.io/nvidia/k8s-device-plugin:v0.14.0",
                                                          phase="Pending")]
    got = sec.node_readings(node="n", driver=driver("580.159.03"), labels={}, pods=component_pods(stack),
                            cluster_policy=None, nvml_driver="580.159.03", probe="gpuconf/inventory-n")
    assert not got["device-plugin"].deployed
    v = sec.evaluate_component_versions("n", got, sec.builtin_floors())
    assert v.outcome is Outcome.PASS, v.message()
    assert v.not_judged == ("NVIDIA device plugin 0.14.0 in the image nvcr.io/nvidia/k8s-device-plugin:v0.14.0 of pod "
                            "gpu-operator/dp, which is Pending: not running, not judged",)


def test_a_running_pod_whose_version_cannot_be_read_is_not_hidden_by_a_readable_one() -> None:
    v = judged(pod(TK + "zq9x2", "n", TOOLKIT.format("1.19.1")),
               pod(TK + "ab12c", "n", "nvcr.io/nvidia/k8s/container-toolkit:latest"))
    assert v.outcome is Outcome.NOT_TESTED, v.message()
    assert v.summary == ("NVIDIA Container Toolkit version not readable: the image tag 'latest' of "
                         "nvcr.io/nvidia/k8s/container-toolkit:latest carries no version gpuconf can read")


# --- the driver from the most direct reading ----------------------------------------------------------


def test_the_driver_is_judged_as_nvml_reads_it_and_a_stale_label_is_named_not_judged() -> None:
    v = judged(pod(TK + "zq9x2", "n", TOOLKIT.format("1.19.1")), drv="580.95.05", nvml="580.159.03")
    assert v.outcome is Outcome.PASS, v.message()
    assert "read: GPU driver 580.159.03 (NVML in the probe pod gpuconf/inventory-n on n)" in v.evidence
    assert v.not_judged == ("the node's GFD label nvidia.com/cuda.driver-version.full says 580.95.05, NVML on the node "
                            "580.159.03: judged as NVML reads it (a stale label is labels.gfd-matches-hardware's "
                            "finding)",)
    v = judged(pod(TK + "zq9x2", "n", TOOLKIT.format("1.19.1")), drv="580.159.03", nvml="580.95.05")
    assert v.outcome is Outcome.FAIL and "GPU driver 580.95.05 < 580.159.03 (bulletin 5821, high)" in (v.observed or "")


def test_a_driver_read_from_the_label_alone_says_nvml_was_not_read() -> None:
    v = judged(pod(TK + "zq9x2", "n", TOOLKIT.format("1.19.1")))
    assert v.outcome is Outcome.PASS, v.message()
    assert v.not_judged == ("the driver version NVML reports on n: no probe of this run read it, the GFD label "
                            "nvidia.com/cuda.driver-version.full was judged",)
    dra = sec.node_readings(node="n", driver=Fact("580.159.3", Source.SLICE, "driverVersion"), labels={},
                            pods=(), cluster_policy=None, nvml_driver="580.159.03", probe="p")["driver"]
    assert dra.notes == () and dra.version == "580.159.03"  # one version, spelled as semver by the DRA driver


# --- --security-floor ------------------------------------------------------------------------------


def test_a_site_floor_file_replaces_the_table(tmp_path: Path) -> None:
    path = tmp_path / "floor.yaml"
    path.write_text(yaml.safe_dump({"schema": 1, "updated": "2026-12-01", "policy": {"fail": ["critical"],
                                    "degraded": ["high", "medium", "low"]},
                                    "advisories": [{"id": "1", "title": "t", "url": "https://x.invalid/1",
                                                    "cves": [{"id": "CVE-2099-0002", "severity": "high"}],
                                                    "fixes": [{"component": "container-toolkit", "fixed": "2.0.0"}]}]}))
    floors = sec.load_floors(path)
    v = verdict("580.95.05", *CURRENT, floors=floors)  # the built-in driver rows are gone
    assert v.outcome is Outcome.DEGRADED and [f["advisory"] for f in v.facts["findings"]] == ["1"]


@pytest.mark.parametrize("text, problem", [
    ("", "empty file"),
    ("schema: 1\nupdated: '2026-12-01'\npolicy: {fail: [high], degraded: []}\nadvisories:\n  - {id: '1', title: t, "
     "url: 'https://x.invalid', cves: [{id: CVE-2099-0003, severity: high}], fixes: [{component: kubelet, "
     "fixed: '1.0.0'}]}\n", "5:"),
    ("schema: 1\nupdated: '2026-12-01'\npolicy: {fail: [high], degraded: [high]}\nadvisories:\n  - {id: '1', "
     "title: t, url: 'https://x.invalid', cves: [{id: CVE-2099-0003, severity: high}], fixes: [{component: dcgm, "
     "fixed: '1.0.0'}]}\n", "high is both fail and degraded"),
    ("schema: 1\nupdated: '2026-12-01'\npolicy: {fail: [high], degraded: []}\nadvisories:\n  - {id: '1', title: t, "
     "url: 'https://x.invalid', cves: [{id: CVE-2099-0003, severity: high}], fixes: [{component: driver, "
     "fixed: '580.1'}]}\n", "branch"),
], ids=["empty", "an unknown component", "a severity both ways", "a driver fix without its branch"])
def test_a_bad_floor_file_is_one_line_naming_where(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "floor.yaml"
    path.write_text(text)
    with pytest.raises(sec.SecurityFloorError) as e:
        sec.load_floors(path)
    assert str(e.value).startswith(str(path)) and problem in str(e.value) and "\n" not in str(e.value)


def run_suite(tmp_path: Path, profile: Path | str, *options: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    reports = tmp_path / "reports"
    done = subprocess.run([sys.executable, "-m", "pytest", "suites/test_security.py", "--simulate", str(profile),
                           "--report-dir", str(reports), "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *options],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    return done, reports


def test_a_bad_security_floor_option_ends_the_run_with_a_usage_error(tmp_path: Path) -> None:
    done, _ = run_suite(tmp_path, "healthy-h100", "--security-floor", str(tmp_path / "missing.yaml"))
    assert done.returncode == 4, done.stdout[-2000:]
    assert f"--security-floor {tmp_path / 'missing.yaml'}: cannot read" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


# --- the suite on a simulated cluster --------------------------------------------------------------


def test_each_vulnerable_pool_fails_on_every_node_naming_each_finding_and_the_other_pools_pass(tmp_path: Path) -> None:
    text = (ROOT / "gpuconf/data/sim_profiles/multi-pool.yaml").read_text().replace("faults: []", (
        "faults:\n  - {id: toolkit-vulnerable, pool: l40s, node: all}\n"
        "  - {id: driver-skew, pool: t4, node: all, driver: '580.95.05'}\n"
        "  - {id: dcgm-vulnerable, pool: a100-mig, node: all}\n"))
    profile = tmp_path / "multi-pool.yaml"
    profile.write_text(text)
    done, reports = run_suite(tmp_path, profile)
    assert done.returncode == 1, done.stdout[-3000:]
    tests = json.loads((reports / "report.json").read_text())["results"]["tests"]
    by_node = {t["extra"]["node"]: t for t in tests if t["extra"].get("check") == "security.component-versions"}
    assert sorted(by_node) == ["a100-mig-0", "h100-0", "h100-1", "l40s-0", "l40s-1", "t4-0", "t4-1"]
    for node in ("h100-0", "h100-1"):
        assert by_node[node]["status"] == "passed", by_node[node].get("message")
    message = by_node["a100-mig-0"]["message"]
    assert by_node["a100-mig-0"]["status"] == "failed"
    for words in ("DCGM 4.2.3 < 4.5.3 (bulletin 5857, high)", "DCGM exporter 4.1.3 < 4.8.2 (bulletin 5857, high)",
                  "CVE-2026-47483 (high 8.2)", "image nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04"):
        assert words in message, (words, message)
    for node in ("l40s-0", "l40s-1"):
        message = by_node[node]["message"]
        assert by_node[node]["status"] == "failed" and f"security.component-versions on {node}" in message
        for words in ("NVIDIA Container Toolkit 1.16.1: NVIDIA bulletin 5582 CVE-2024-0132 (critical 9)",
                      "fixed in 1.16.2", "NVIDIA Container Toolkit 1.16.1 < 1.17.8 (bulletin 5659, critical)",
                      "NVIDIA Container Toolkit 1.16.1 < 1.19.1 (bulletin 5850, high)",
                      "of pod gpu-operator/nvidia-container-toolkit-daemonset-"):
            assert words in message, (words, message)
    for node in ("t4-0", "t4-1"):
        message = by_node[node]["message"]
        assert by_node[node]["status"] == "failed"
        assert "GPU driver 580.95.05 < 580.159.03 (bulletin 5821, high)" in message, message
        assert "GPU driver 580.95.05 < 580.126.09 (bulletin 5747, high)" in message, message
        assert "NVIDIA Container Toolkit" not in message.split("evidence:")[0]  # the toolkit is current there
