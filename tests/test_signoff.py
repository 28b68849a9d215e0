"""Node sign-off (--label-nodes, --taint-failed): the planning rules, the patches against a simulated
cluster, and whole runs (every suite, or the inventory suite alone) that read the node objects after
the sign-off."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from expecting import strict_expect
from serving import pytest_subprocess

from gpuconf.cluster import Cluster, connect
from gpuconf.cluster import signoff as so
from gpuconf.cluster.signoff import (
    FAIL_TAINT,
    NodeSignOff,
    failed_checks_value,
    make_node_patch,
    plan_taints,
    rfc3339,
    sign_off,
)
from gpuconf.sim.cluster import SimulatedCluster
from gpuconf.sim.faults import FaultPlan

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
OURS = dict(FAIL_TAINT)
FOREIGN = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
STALE = {"key": "gpuconf.io/verdict", "value": "fail", "effect": "NoExecute"}

# -------------------------------------------------------------------------------------------------
# Planning (pure)


@pytest.mark.parametrize("taints, verdict, taint_failed, expected", [
    ([], "fail", True, [OURS]),
    ([FOREIGN], "fail", True, [FOREIGN, OURS]),
    ([OURS, FOREIGN], "fail", True, None),
    ([STALE], "fail", True, [OURS]),
    ([OURS, FOREIGN], "pass", True, [FOREIGN]),
    ([OURS], "degraded", True, []),
    ([FOREIGN], "pass", True, None),
    ([OURS], "not-tested", True, None),
    ([], "fail", False, None),
    ([OURS], "pass", False, None),
], ids=[
    "a FAIL node gets the NoSchedule taint",
    "a FAIL node keeps the taints others put there",
    "a FAIL node already tainted is left as it is",
    "a taint with gpuconf's key but another effect is replaced by the FAIL taint",
    "a node that passes loses gpuconf's taint and keeps the others",
    "a degraded node loses gpuconf's taint: the taint is for FAIL nodes",
    "a node that passes without gpuconf's taint is left as it is",
    "a not-tested node keeps its taint: the run says nothing either way",
    "without --taint-failed a FAIL node is not tainted",
    "without --taint-failed a node that passes keeps its taint: only --taint-failed touches taints",
])
def test_taint_rules(taints: list[dict[str, str]], verdict: str, taint_failed: bool,
                     expected: list[dict[str, str]] | None) -> None:
    assert plan_taints(taints, verdict, taint_failed=taint_failed) == expected


def test_a_verdict_outside_the_vocabulary_is_refused() -> None:
    with pytest.raises(ValueError, match="h100-0: verdict 'passed' is not one of pass, degraded, fail, not-tested"):
        NodeSignOff("h100-0", "passed")


def test_failed_checks_are_distinct_sorted_and_absent_when_there_are_none() -> None:
    assert failed_checks_value(["smoke.b", "inventory.a", "smoke.b"]) == "inventory.a,smoke.b"
    assert failed_checks_value([]) is None


@pytest.mark.parametrize("limit", [5, 12, 30, 60, 100, 1024])
def test_failed_checks_stay_within_their_bound_and_say_how_many_they_left_out(limit: int) -> None:
    ids = [f"suite.check-{i:02d}" for i in range(40)]
    value = failed_checks_value(ids, limit)
    assert value is not None and len(value) <= limit
    shown = [v for v in value.split(",") if not v.startswith("+")]
    assert shown == ids[:len(shown)]
    if len(shown) < len(ids) and limit >= len("+40 more"):
        assert value.endswith(f"+{len(ids) - len(shown)} more")


def test_the_verdict_time_is_rfc3339_in_utc() -> None:
    when = datetime(2026, 12, 1, 15, 11, 9, 500000, tzinfo=timezone(timedelta(hours=1)))
    assert rfc3339(when) == "2026-12-01T14:11:09Z"


NODE = {"metadata": {"name": "h100-0", "resourceVersion": "42"}, "spec": {"taints": [FOREIGN]}}


def test_the_patch_sets_the_label_and_annotations_and_removes_a_stale_failed_checks_list() -> None:
    patch = make_node_patch(NODE, NodeSignOff("h100-0", "pass"), run_id="r1", verdict_time="T", taint_failed=False)
    assert patch == {"metadata": {"labels": {"gpuconf.io/verdict": "pass"},
                                  "annotations": {"gpuconf.io/run-id": "r1", "gpuconf.io/verdict-time": "T",
                                                  "gpuconf.io/failed-checks": None}}}


def test_a_patch_that_changes_the_taints_is_conditional_on_the_node_it_was_planned_from() -> None:
    patch = make_node_patch(NODE, NodeSignOff("h100-0", "fail", ("inventory.a",)), run_id="r1", verdict_time="T",
                            taint_failed=True)
    assert patch["metadata"]["resourceVersion"] == "42"
    assert patch["spec"] == {"taints": [FOREIGN, OURS]}
    assert patch["metadata"]["annotations"]["gpuconf.io/failed-checks"] == "inventory.a"
    unchanged = make_node_patch(NODE, NodeSignOff("h100-0", "pass"), run_id="r1", verdict_time="T", taint_failed=True)
    assert "spec" not in unchanged and "resourceVersion" not in unchanged["metadata"]


# -------------------------------------------------------------------------------------------------
# The patches against a simulated cluster


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[tuple[SimulatedCluster, Cluster]]:
    with SimulatedCluster("healthy-h100") as cluster:
        api = connect(cluster.write_kubeconfig(tmp_path / "kubeconfig"))
        try:
            yield cluster, api
        finally:
            api.close()


def node(sim: SimulatedCluster, name: str) -> dict[str, Any]:
    return sim.server.store.get("nodes", name)


def test_a_failed_node_is_tainted_and_untainted_when_a_later_run_passes_it(
        sim: tuple[SimulatedCluster, Cluster]) -> None:
    cluster, api = sim
    cluster.server.store.patch("nodes", "h100-0", {"spec": {"taints": [FOREIGN]}})
    before_h100_1 = node(cluster, "h100-1")
    when = datetime(2026, 12, 1, 14, 0, tzinfo=UTC)
    done = sign_off(api, [NodeSignOff("h100-0", "fail", ("inventory.allocatable-matches-capacity",))],
                    run_id="run1", when=when, taint_failed=True)
    assert [(r.node, r.verdict, r.taint, r.error) for r in done] == [("h100-0", "fail", "added", None)]
    n = node(cluster, "h100-0")
    assert n["metadata"]["labels"]["gpuconf.io/verdict"] == "fail"
    assert {k: v for k, v in n["metadata"]["annotations"].items() if k.startswith("gpuconf.io/")} == {
        "gpuconf.io/run-id": "run1", "gpuconf.io/verdict-time": "2026-12-01T14:00:00Z",
        "gpuconf.io/failed-checks": "inventory.allocatable-matches-capacity"}
    assert n["spec"]["taints"] == [FOREIGN, OURS]
    assert node(cluster, "h100-1") == before_h100_1  # not in this run: never touched

    done = sign_off(api, [NodeSignOff("h100-0", "pass")], run_id="run2", when=when + timedelta(hours=1),
                    taint_failed=True)
    assert [(r.taint, r.error) for r in done] == [("removed", None)]
    n = node(cluster, "h100-0")
    assert n["metadata"]["labels"]["gpuconf.io/verdict"] == "pass"
    assert n["metadata"]["annotations"]["gpuconf.io/run-id"] == "run2"
    assert "gpuconf.io/failed-checks" not in n["metadata"]["annotations"]
    assert n["spec"]["taints"] == [FOREIGN]


def test_a_node_changed_between_the_read_and_the_patch_is_read_again_and_keeps_the_change(
        sim: tuple[SimulatedCluster, Cluster], monkeypatch: pytest.MonkeyPatch) -> None:
    """The taint list is replaced whole: a taint someone added meanwhile must not be lost."""
    cluster, api = sim
    read = so._read_node
    reads: list[str] = []

    def racing_read(c: Cluster, name: str) -> dict[str, Any]:
        seen = read(c, name)
        reads.append(name)
        if len(reads) == 1:  # someone taints the node right after our first read
            cluster.server.store.patch("nodes", name, {"spec": {"taints": [FOREIGN]}})
        return seen

    monkeypatch.setattr(so, "_read_node", racing_read)
    [result] = sign_off(api, [NodeSignOff("h100-0", "fail")], run_id="r", when=datetime.now(UTC), taint_failed=True)
    assert result.error is None and reads == ["h100-0", "h100-0"]
    assert node(cluster, "h100-0")["spec"]["taints"] == [FOREIGN, OURS]


def test_a_patch_the_server_fails_transiently_is_retried(tmp_path: Path) -> None:
    faults = FaultPlan()
    faults.server_error(verbs=["patch"], resources=["nodes"], times=2)
    with SimulatedCluster("healthy-h100", faults=faults) as cluster:
        api = connect(cluster.write_kubeconfig(tmp_path / "kubeconfig"))
        with closing(api):
            [result] = sign_off(api, [NodeSignOff("h100-1", "pass")], run_id="r", when=datetime.now(UTC),
                                taint_failed=False)
        assert result.error is None and len(faults.injected) == 2
        assert node(cluster, "h100-1")["metadata"]["labels"]["gpuconf.io/verdict"] == "pass"


def test_a_node_that_is_gone_is_reported_and_the_others_are_signed_off(sim: tuple[SimulatedCluster, Cluster]) -> None:
    cluster, api = sim
    done = sign_off(api, [NodeSignOff("gone-0", "pass"), NodeSignOff("h100-1", "degraded", ("smoke.x",))],
                    run_id="r", when=datetime.now(UTC), taint_failed=False)
    assert [r.node for r in done if r.error is not None] == ["gone-0"]
    assert "gone-0" in str(done[0].error)
    assert node(cluster, "h100-1")["metadata"]["labels"]["gpuconf.io/verdict"] == "degraded"


# -------------------------------------------------------------------------------------------------
# Whole runs: the inventory suite, then the node objects as the sign-off left them

#: Loaded into the run: optionally gives the nodes a state beforehand (as an earlier run and other
#: controllers left them), and writes every node object to nodes.json after the sign-off, before the
#: plugin stops the simulated cluster (conftest hooks run before the plugin's).
RECORDER = '''
import json, os
import pytest
from gpuconf.kit import SESSION


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    sim = session.config.stash[SESSION].sim
    for name, patch in json.loads(os.environ.get("SIGNOFF_BEFORE", "{}")).items():
        sim.server.store.patch("nodes", name, patch)


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config):
    sim = config.stash[SESSION].sim
    nodes = {n["metadata"]["name"]: n for n in sim.server.store.list("nodes").items}
    with open("nodes.json", "w") as out:
        json.dump(nodes, out)
'''


def run_inventory(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, profile: str, *args: str,
                  before: dict[str, Any] | None = None,
                  every_suite: bool = False) -> tuple[pytest.RunResult, dict[str, Any], str | None]:
    """The run, its nodes after the sign-off, and its run id (report.json). The inventory suite alone is
    a PARTIAL run (exit 18, no node labelled pass); ``every_suite`` copies all of suites/, a full run,
    the only one that signs a node off as pass."""
    if every_suite:
        shutil.copytree(ROOT / "suites", pytester.path / "suites", ignore=shutil.ignore_patterns("__pycache__"))
    else:
        suites = pytester.mkdir("suites")
        (suites / "test_inventory.py").write_text((ROOT / "suites" / "test_inventory.py").read_text())
    pytester.makeconftest(RECORDER)
    monkeypatch.setenv("SIGNOFF_BEFORE", json.dumps(before or {}))
    reports = pytester.path / "reports"
    # A subprocess: the cluster (threads, TLS, the cryptography bindings) must not share this interpreter.
    result = pytest_subprocess(pytester, "suites", "-p", "gpuconf.plugin", "--simulate", profile, "--report-dir",
                               str(reports), "-p", "no:cacheprovider", *args)
    nodes = json.loads((pytester.path / "nodes.json").read_text())
    run_id = json.loads((reports / "report.json").read_text())["extra"]["gpuconf"]["run_id"]
    return result, nodes, run_id


def gpuconf_marks(n: dict[str, Any]) -> dict[str, Any]:
    meta = n["metadata"]
    return {"labels": {k: v for k, v in (meta.get("labels") or {}).items() if k.startswith("gpuconf.io/")},
            "annotations": {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith("gpuconf.io/")},
            "taints": (n.get("spec") or {}).get("taints") or []}


def test_label_nodes_labels_every_tested_node_with_its_verdict_and_the_run_id(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result, nodes, run_id = run_inventory(pytester, monkeypatch, "healthy-h100", "--label-nodes", every_suite=True)
    assert result.ret == 0 and run_id
    result.stdout.fnmatch_lines(["*gpuconf: nodes signed off: h100-0 pass, h100-1 pass*"])
    for name in ("h100-0", "h100-1"):
        marks = gpuconf_marks(nodes[name])
        assert marks["labels"] == {"gpuconf.io/verdict": "pass"}
        assert marks["annotations"]["gpuconf.io/run-id"] == run_id
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", marks["annotations"]["gpuconf.io/verdict-time"])
        assert "gpuconf.io/failed-checks" not in marks["annotations"] and marks["taints"] == []


def test_taint_failed_taints_the_failed_node_only(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "gpuconf" / "data" / "sim_profiles" / "healthy-h100.yaml").read_text()
    profile = pytester.path / "gpu-unhealthy.yaml"
    profile.write_text(re.sub(r"^faults:.*$", "", text, flags=re.M)
                       + "\nfaults:\n  - {id: gpu-unhealthy, pool: h100, node: 0, gpu: 3}\n")
    # Every suite: the node that passed is signed off too (pass), and keeps no taint.
    result, nodes, run_id = run_inventory(pytester, monkeypatch, str(profile), "--taint-failed", "--expect",
                                          str(strict_expect(pytester.path)), every_suite=True)
    assert result.ret == 1
    failed, passed = gpuconf_marks(nodes["h100-0"]), gpuconf_marks(nodes["h100-1"])
    assert failed["labels"] == {"gpuconf.io/verdict": "fail"}
    assert "inventory.allocatable-matches-capacity" in failed["annotations"]["gpuconf.io/failed-checks"].split(",")
    assert failed["annotations"]["gpuconf.io/run-id"] == run_id
    assert failed["taints"] == [OURS]
    assert passed["labels"] == {"gpuconf.io/verdict": "pass"} and passed["taints"] == []


#: Nodes as an earlier --taint-failed run (h100-0) and another controller (both) left them.
EARLIER_META = {"labels": {"gpuconf.io/verdict": "fail"},
                "annotations": {"gpuconf.io/failed-checks": "inventory.allocatable-matches-capacity"}}
EARLIER: dict[str, Any] = {"h100-0": {"metadata": EARLIER_META, "spec": {"taints": [FOREIGN, OURS]}},
                           "h100-1": {"spec": {"taints": [FOREIGN]}}}
#: The same, without gpuconf's taint (which keeps the probes off h100-0 until they tolerate it).
EARLIER_UNTAINTED: dict[str, Any] = {**EARLIER, "h100-0": {"metadata": EARLIER_META, "spec": {"taints": [FOREIGN]}}}


def test_a_later_passing_run_removes_the_taint_and_keeps_the_others(pytester: pytest.Pytester,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    result, nodes, _ = run_inventory(pytester, monkeypatch, "healthy-h100", "--taint-failed", "--timeout", "5",
                                     before=EARLIER, every_suite=True)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*gpuconf: nodes signed off: h100-0 pass (taint removed), h100-1 pass*"])
    for name in ("h100-0", "h100-1"):
        marks = gpuconf_marks(nodes[name])
        assert marks["labels"] == {"gpuconf.io/verdict": "pass"} and marks["taints"] == [FOREIGN]
        assert "gpuconf.io/failed-checks" not in marks["annotations"]


def test_without_the_flags_no_node_changes(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # The inventory suite alone (PARTIAL, 18): with either flag it would still say which nodes it signed
    # off ("none") and which it left unlabelled; without them it says neither.
    result, nodes, _ = run_inventory(pytester, monkeypatch, "healthy-h100", before=EARLIER_UNTAINTED)
    assert result.ret == 18
    assert "gpuconf: nodes signed off" not in result.stdout.str() and "not labelled" not in result.stdout.str()
    assert gpuconf_marks(nodes["h100-0"]) == {"labels": {"gpuconf.io/verdict": "fail"}, "annotations": {
        "gpuconf.io/failed-checks": "inventory.allocatable-matches-capacity"}, "taints": [FOREIGN]}
    assert gpuconf_marks(nodes["h100-1"]) == {"labels": {}, "annotations": {}, "taints": [FOREIGN]}


def test_nodes_outside_the_node_selector_are_untouched(pytester: pytest.Pytester,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    result, nodes, _ = run_inventory(pytester, monkeypatch, "healthy-h100", "--taint-failed", "--node-selector",
                                     "kubernetes.io/hostname=h100-1", before=EARLIER, every_suite=True)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*gpuconf: nodes signed off: h100-1 pass"])
    assert gpuconf_marks(nodes["h100-0"]) == {"labels": {"gpuconf.io/verdict": "fail"}, "annotations": {
        "gpuconf.io/failed-checks": "inventory.allocatable-matches-capacity"}, "taints": [FOREIGN, OURS]}
    assert gpuconf_marks(nodes["h100-1"])["labels"] == {"gpuconf.io/verdict": "pass"}


def test_a_run_that_did_not_finish_signs_nothing_off(pytester: pytest.Pytester,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A collection error ends the run with exit status 2 (interrupted): its verdicts are partial."""
    pytester.makepyfile(test_broken="import nowhere_to_be_found\n")
    result, nodes, _ = run_inventory(pytester, monkeypatch, "healthy-h100", "--label-nodes", "suites",
                                     "test_broken.py")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*gpuconf: nodes not signed off: the run did not finish (exit status 2)*"])
    assert all(gpuconf_marks(n)["labels"] == {} for n in nodes.values())
