"""``gpuconf report merge`` (gpuconf/report/merge.py) on crafted shard reports, where mutation testing
(scripts/mutation-score) found it unpinned: a report.json read back field by field (and what is
malformed in it), a directory that is not a shard's, every refusal of shards that do not make one run
(count, run, cluster, fleet, selection, an index twice, a changed shard), a missing, idle or
unstarted shard, the merged run's exit status from each cause, its coverage, scope and junit.xml, and
the reports written. Every case's result, or the one line it refuses with, is recorded in
tests/data/verdicts/merge.json (the temporary directory written as TMP).

The shards are report.json documents written by gpuconf.report.writers.ctrf_document from a
RunRecord and CheckResults whose plan is gpuconf.shards.plan over the multi-pool fleet in 3 shards
(shard 0: h100-0, h100-1, a100-mig-0; 1: l40s-0, l40s-1; 2: t4-0, t4-1): no cluster is run."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from test_mutants_shards import MULTI_POOL
from verdict_record import as_data, check_recording

from gpuconf.errors import UsageError
from gpuconf.report.manifest import manifest_document, write_manifest
from gpuconf.report.merge import (
    Shard,
    junit_document,
    load_shard,
    merge_shards,
    read_run,
    selection_warning,
    write_merged,
)
from gpuconf.report.model import (
    DEGRADED,
    FAIL,
    NOT_TESTED,
    PASS,
    CheckResult,
    Coverage,
    Record,
    RunRecord,
    UntestedNode,
)
from gpuconf.report.writers import ctrf_document
from gpuconf.shards import ShardPlan, ShardSpec, plan

#: The cluster-wide tests of the run and their shards (every shard records them all).
HOMES: dict[str, tuple[str | None, int]] = {
    "suites/test_scheduling.py::test_over_asking_gpus_is_insufficient": ("scheduling.over-ask-insufficient", 0),
    "suites/test_nccl.py::test_multinode_completes": ("nccl.multinode-completes", 2),
    "suites/test_dra.py::test_selector_steers_scheduling": ("dra.selector-steers-scheduling", 2),
    "suites/test_scheduling.py::test_untyped": (None, 1),
}
SELECTION = {"suites": ["suites/test_smoke.py"], "markers": None, "keywords": None, "tiers": [], "dcgm_diag": False}
START = 1_796_000_000.0
KUBECONFIG = "kubeconfig:/etc/kube/config@prod"


def the_plan(index: int, count: int = 3, run: str | None = "night",
             nodes: Sequence[tuple[str, str | None]] = MULTI_POOL,
             homes: Mapping[str, tuple[str | None, int]] = HOMES) -> ShardPlan:
    p = plan(ShardSpec(index, count, run), nodes)
    return ShardPlan(p.spec, p.fleet, p.assignment, dict(homes))


def results_of(p: ShardPlan, outcomes: Mapping[str, str] | None = None) -> list[CheckResult]:
    """A smoke check per node of the shard and each cluster-wide check it is home to; ``outcomes``
    (node or check -> outcome) changes some."""
    outcomes = outcomes or {}
    out = []
    for node in p.nodes:
        outcome = outcomes.get(node, PASS)
        out.append(CheckResult("smoke.vector-add-every-gpu", node, outcome,
                               f"suites/test_smoke.py::test_vector_add_every_gpu[{node}]", 1.5,
                               "every GPU adds vectors" if outcome != PASS else None,
                               f"{node} GPU 3: cudaErrorLaunchFailure" if outcome != PASS else None,
                               f"smoke on {node}: {outcome}\n  second line" if outcome != PASS else None,
                               record=Record(f"{node}: {outcome}", kind="could-not-run" if outcome == NOT_TESTED
                                             else None)))
    for test, (check, shard) in p.homes.items():
        if shard == p.spec.index and check is not None:
            out.append(CheckResult(check, None, outcomes.get(check, PASS), test, 0.25,
                                   cncf=("gang_scheduling",) if check.startswith("nccl.") else ()))
    return out


def run_of(p: ShardPlan | None, index: int, **changes: Any) -> RunRecord:
    nodes = p.nodes if p is not None else ()
    run = RunRecord(KUBECONFIG, START + index, START + 100 + 10 * index, 0, run_id=f"run-{index}",
                    coverage=Coverage(tuple(nodes), (), {n: "device plugin" for n in nodes}),
                    shard=p.as_json() if p is not None else None, options={"--kueue-queue": "q"},
                    server_version="v1.36.1", scope={"selection": SELECTION, "full": True, "narrowed": []},
                    faults=())
    return dataclasses.replace(run, **changes)


def document(index: int, count: int = 3, *, outcomes: Mapping[str, str] | None = None,
             plan_changes: Mapping[str, Any] | None = None, drop_plan: Sequence[str] = (),
             p: ShardPlan | None = None, **changes: Any) -> dict[str, Any]:
    """Shard ``index``'s report.json as gpuconf writes it; ``plan_changes``/``drop_plan`` edit its
    recorded plan, ``changes`` its RunRecord."""
    p = p or the_plan(index, count)
    run = run_of(p, index, **changes)
    shard = {k: v for k, v in {**p.as_json(), **(plan_changes or {})}.items() if k not in drop_plan}
    run = dataclasses.replace(run, shard=shard)
    return ctrf_document(run, results_of(p, outcomes))


def write(directory: Path, doc: Any, *, text: str | None = None, manifest_uid: str | None | bool = False) -> Path:
    """``doc`` as ``directory``/report.json (``text`` instead where given), with a manifest naming
    ``manifest_uid`` as the cluster (False: no manifest)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "report.json").write_text(json.dumps(doc) if text is None else text)
    if manifest_uid is not False:
        write_manifest(directory, manifest_document(
            directory, ["report.json"], run_id="r", provenance=KUBECONFIG, simulated=False,
            cluster_uid=manifest_uid if isinstance(manifest_uid, str) else None, started=START, finished=START,
            exit_status=0))
    return directory


def shards(tmp: Path, *docs: dict[str, Any], uids: Sequence[str | None | bool] = ()) -> list[Shard]:
    """The shards of ``docs`` (each written to tmp/s<i>), loaded as the merge loads them."""
    out = []
    for i, doc in enumerate(docs):
        uid = uids[i] if i < len(uids) else False
        out.append(load_shard(write(tmp / f"s{i}", doc, manifest_uid=uid)))
    return out


def all_three(**per_shard: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The three shards' documents; ``per_shard``: "s0"/"s1"/"s2" -> document() keywords."""
    return [document(i, **per_shard.get(f"s{i}", {})) for i in range(3)]


def said(call: Callable[[], Any]) -> Any:
    try:
        return {"returns": call()}
    except UsageError as exc:
        return {"refused": str(exc)}


def merged(tmp: Path, docs: Sequence[dict[str, Any]], *, allow_missing: bool = False,
           uids: Sequence[str | None | bool] = ()) -> Any:
    def run() -> Any:
        given = shards(tmp, *docs, uids=uids)
        # the keyword only where it is given: the default is the refusal
        record, results = merge_shards(given, allow_missing=True) if allow_missing else merge_shards(given)
        return {"run": record, "results": [(r.check, r.node, r.outcome, r.nodeid, r.message) for r in results]}
    return said(run)


def loaded(tmp: Path, doc: Any = None, *, text: str | None = None, manifest_uid: str | None | bool = False,
           edit: Callable[[Path], None] | None = None) -> Any:
    def run() -> Any:
        where = write(tmp / "shard", doc, text=text, manifest_uid=manifest_uid)
        if edit is not None:
            edit(where)
        return load_shard(where)
    return said(run)


def read(doc: Any) -> Any:
    return said(lambda: read_run(doc, source="report.json"))


def with_meta(doc: dict[str, Any], **meta: Any) -> dict[str, Any]:
    """``doc`` with extra.gpuconf fields set (a value of ... removes one)."""
    gpuconf = {k: v for k, v in {**doc["extra"]["gpuconf"], **meta}.items() if v is not ...}
    return {**doc, "extra": {**doc["extra"], "gpuconf": gpuconf}}


def with_test(doc: dict[str, Any], index: int, **fields: Any) -> dict[str, Any]:
    """``doc`` with results.tests[index] changed: ``extra_<key>`` sets its extra's key (... removes it)."""
    tests = [dict(t) for t in doc["results"]["tests"]]
    test = tests[index]
    extra = dict(test.get("extra") or {})
    for key, value in fields.items():
        if key.startswith("extra_"):
            extra[key[6:]] = value
            if value is ...:
                del extra[key[6:]]
        elif value is ...:
            test.pop(key, None)
        else:
            test[key] = value
    test["extra"] = extra
    tests[index] = test
    return {**doc, "results": {**doc["results"], "tests": tests}}


def selection(**changes: Any) -> dict[str, Any]:
    return {"scope": {"selection": {**SELECTION, **changes}, "full": True, "narrowed": []}}


def unscoped(index: int) -> dict[str, Any]:
    return with_meta(document(index), scope=...)


def junit(tmp: Path, docs: Sequence[dict[str, Any]], *, allow_missing: bool = False) -> Any:
    record, results = merge_shards(shards(tmp, *docs), allow_missing=allow_missing)
    return junit_document(record, results).decode()


def written(tmp: Path, docs: Sequence[dict[str, Any]], *, into: Path | None = None, old_manifest: bool = False,
            **kw: Any) -> Any:
    def run() -> Any:
        record, results = merge_shards(shards(tmp, *docs))
        out = tmp / "merged" if into is None else into
        if old_manifest:
            out.mkdir(parents=True)
            (out / "manifest.json").write_text("{}")
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            paths = write_merged(record, results, out, **kw)
        evidence = kw.get("cncf_evidence")
        gang = None if evidence is None else next(
            {k: r[k] for k in ("status", "reason", "results")}
            for r in json.loads((evidence / "gpuconf-cncf.json").read_text())["requirements"]
            if r["id"] == "gang_scheduling")
        files = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file() and (
            p.is_relative_to(out) or p.parent.name == "evidence"))
        manifest = json.loads((out / "manifest.json").read_text())
        files = [f.replace(str(out.relative_to(tmp)), "OUT") for f in files]
        report = json.loads((out / "report.json").read_text())["extra"]["gpuconf"]
        return {"written": [str(p.relative_to(out)) for p in paths], "files": files, "stderr": stderr.getvalue(),
                "gang_scheduling": gang,
                "manifest": {k: manifest[k] for k in ("run_id", "cluster", "exit_status", "started", "finished")}
                | {"files": sorted(f["path"] for f in manifest["files"])},
                "report": {k: report.get(k) for k in ("verdict", "exit_status", "shard", "coverage", "scope")}}
    return said(run)


def remove(name: str) -> Callable[[Path], None]:
    return lambda where: (where / name).unlink()


def altered(where: Path) -> None:
    (where / "report.json").write_text((where / "report.json").read_text() + " ")


def nine(tmp: Path, given: Sequence[int], **kw: Any) -> Any:
    """Multi-pool in 9 shards (shards 4 to 8 given nothing; shard 4 home to a cluster-wide check)."""
    homes = {"suites/test_scheduling.py::test_over_asking_gpus_is_insufficient": ("scheduling.over-ask", 4),
             "suites/test_x.py::test_untyped": ("x.untyped", 6)}
    docs = [document(i, 9, p=the_plan(i, 9, homes=homes)) for i in given]
    return merged(tmp, docs, **kw)


def unstarted(index: int) -> dict[str, Any]:
    """A shard that could not start: its error, no node listed (no assignment), no coverage, exit 10."""
    return with_meta(document(index, drop_plan=("assignment", "fleet", "nodes"), coverage=None,
                              error=f"cannot reach the API server from shard {index}: connection refused",
                              exit_status=10),
                     verdict="NOT STARTED")


CASES: dict[str, Callable[[Path], Any]] = {
    # a report.json read back
    "read: a shard": lambda tmp: read(document(1, outcomes={"l40s-0": FAIL})),
    "read: not an object": lambda tmp: read([1, 2]),
    "read: no gpuconf section": lambda tmp: read({"results": {"tests": []}}),
    "read: no results": lambda tmp: read(with_meta(document(0)) | {"results": None}),
    "read: tests not a list": lambda tmp: read(document(0) | {"results": {"tests": {}}}),
    "read: a test not an object": lambda tmp: read(document(0) | {"results": {"tests": [1]}}),
    "read: a test without outcome": lambda tmp: read(with_test(document(0), 1, extra_outcome=...)),
    "read: a test of an unknown outcome": lambda tmp: read(with_test(document(0), 1, extra_outcome="maybe")),
    "read: a test without check": lambda tmp: read(with_test(document(0), 2, extra_check=None)),
    "read: a test without extra": lambda tmp: read(document(0) | {"results": {"tests": [{"name": "x"}]}}),
    "read: durations": lambda tmp: read(with_test(with_test(with_test(document(0), 0, duration=True), 1,
                                                            duration="12"), 2, duration=2500)),
    "read: a test without name or message": lambda tmp: read(with_test(document(1, outcomes={"l40s-0": FAIL}), 0,
                                                                       name=..., message=...)),
    "read: empty texts": lambda tmp: read(with_test(document(0), 0, extra_node="", extra_expected="",
                                                    extra_observed=7, message="")),
    "read: series, cncf and curve": lambda tmp: read(with_test(document(0), 3, extra_cncf=["a", 2, "b"],
                                                               extra_curve=[[1024, 1.5], [2048, 3.0]],
                                                               extra_metrics={"busbw": 3.0},
                                                               extra_series=[
        {"name": "busbw", "points": [[1, 2.0]], "x": {"label": "size", "unit": "B", "scale": "log2"},
         "y": {"label": "busbw", "unit": "GB/s"}, "floor": None}, "garbage"])),
    "read: times unparseable": lambda tmp: read(with_meta(document(0), started="yesterday", finished=...)),
    "read: finished missing": lambda tmp: read(with_meta(document(0), finished=...)),
    "read: started missing": lambda tmp: read(with_meta(document(0), started=None)),
    "read: exit status a bool": lambda tmp: read(with_meta(document(0), exit_status=False)),
    "read: exit status text": lambda tmp: read(with_meta(document(0), exit_status="0")),
    "read: exit status missing": lambda tmp: read(with_meta(document(0), exit_status=...)),
    "read: interrupted not true": lambda tmp: read(with_meta(document(0), interrupted="yes")),
    "read: interrupted": lambda tmp: read(with_meta(document(0), interrupted=True)),
    "read: malformed meta": lambda tmp: read(with_meta(document(0), shard=[1], options="x", scope="all",
                                                       faults=["gpu-lost on h100-0", 3], provenance="",
                                                       run_id=5, error="", server_version=None)),
    # a shard's directory
    "load: a shard": lambda tmp: loaded(tmp, document(2)),
    "load: no directory": lambda tmp: said(lambda: load_shard(tmp / "nowhere")),
    "load: no report.json": lambda tmp: loaded(tmp, document(2), edit=remove("report.json")),
    "load: not JSON": lambda tmp: loaded(tmp, text="{not json"),
    "load: not UTF-8": lambda tmp: loaded(tmp, edit=lambda w: (w / "report.json").write_bytes(b"\xff\xfe{")),
    "load: not a report": lambda tmp: loaded(tmp, {"results": {"tests": []}}),
    "load: unsharded": lambda tmp: loaded(tmp, with_meta(document(0), shard=...)),
    "load: a merge's report": lambda tmp: loaded(tmp, with_meta(document(0), shard={"merged": [0, 1], "index": 0,
                                                                                   "count": 3})),
    "load: index not a number": lambda tmp: loaded(tmp, document(0, plan_changes={"index": "0"})),
    "load: count missing": lambda tmp: loaded(tmp, document(0, drop_plan=("count",))),
    "load: unscoped": lambda tmp: loaded(tmp, unscoped(0)),
    "load: scope without selection": lambda tmp: loaded(tmp, with_meta(document(0), scope={"full": True})),
    "load: with its manifest": lambda tmp: loaded(tmp, document(1), manifest_uid="uid-a"),
    "load: a manifest without the cluster's uid": lambda tmp: loaded(tmp, document(1), manifest_uid=None),
    "load: changed after its manifest": lambda tmp: loaded(tmp, document(1), manifest_uid="uid-a", edit=altered),
    "load: a file beside its manifest": lambda tmp: loaded(
        tmp, document(1), manifest_uid="uid-a", edit=lambda w: [(w / f"extra-{i}.txt").write_text("x")
                                                                for i in range(4)]),
    # the merge
    "merge: three shards pass": lambda tmp: merged(tmp, all_three()),
    "merge: given in another order": lambda tmp: merged(tmp, [document(2), document(0), document(1)]),
    "merge: one shard of one": lambda tmp: merged(tmp, [document(0, 1, p=the_plan(0, 1))]),
    "merge: none": lambda tmp: said(lambda: merge_shards([])),
    "merge: a failure": lambda tmp: merged(tmp, all_three(s1={"outcomes": {"l40s-1": FAIL}})),
    "merge: a cluster-wide failure": lambda tmp: merged(tmp, all_three(s2={"outcomes": {
        "nccl.multinode-completes": FAIL}})),
    "merge: degraded": lambda tmp: merged(tmp, all_three(s2={"outcomes": {"t4-0": DEGRADED}})),
    "merge: degraded and failed": lambda tmp: merged(tmp, all_three(s2={"outcomes": {"t4-0": DEGRADED}},
                                                                     s0={"outcomes": {"h100-0": FAIL}})),
    "merge: a shard exited 1 without a failure": lambda tmp: merged(tmp, all_three(s1={"exit_status": 1})),
    "merge: a shard exited 17, degraded elsewhere": lambda tmp: merged(tmp, all_three(
        s1={"exit_status": 17}, s0={"outcomes": {"h100-1": DEGRADED}})),
    "merge: not tested only": lambda tmp: merged(tmp, all_three(s1={"outcomes": {"l40s-1": NOT_TESTED}})),
    "merge: a shard interrupted": lambda tmp: merged(tmp, all_three(s0={"interrupted": True})),
    "merge: a shard partial": lambda tmp: merged(tmp, all_three(s1={"exit_status": 18})),
    "merge: a shard partial, another untested": lambda tmp: merged(tmp, all_three(s1={"exit_status": 18},
                                                                                 s2={"exit_status": 15})),
    "merge: a shard exited 16": lambda tmp: merged(tmp, all_three(s2={"exit_status": 16})),
    "merge: a node untested": lambda tmp: merged(tmp, all_three(s1={"coverage": Coverage(
        ("l40s-0", "l40s-1"), (UntestedNode("l40s-1", "cordoned", "l40s-1 is cordoned: uncordon it"),),
        {"l40s-0": "dra"})})),
    "merge: a node untested outside the fleet": lambda tmp: merged(tmp, all_three(s1={"coverage": Coverage(
        ("l40s-0", "l40s-1"), (UntestedNode("other-0", "cordoned", "other-0 is cordoned"),))})),
    "merge: one shard without coverage": lambda tmp: merged(tmp, all_three(s1={"coverage": None})),
    "merge: scopes narrowed": lambda tmp: merged(tmp, all_three(
        s0={"scope": {"selection": SELECTION, "full": False, "narrowed": ["-x stopped the run", "b"]}},
        s2={"scope": {"selection": SELECTION, "full": True, "narrowed": ["b", "c"]}})),
    "merge: no scope anywhere": lambda tmp: merged(tmp, [unscoped(i) for i in range(3)]),
    "merge: one scope full unsaid": lambda tmp: merged(tmp, all_three(
        s1={"scope": {"selection": SELECTION}})),
    "merge: server version from a later shard": lambda tmp: merged(tmp, all_three(
        s0={"server_version": None}, s1={"server_version": "v1.36.2"})),
    "merge: no server version": lambda tmp: merged(tmp, all_three(
        s0={"server_version": None}, s1={"server_version": None}, s2={"server_version": None})),
    "merge: no run name recorded": lambda tmp: merged(tmp, [document(i, drop_plan=("run",)) for i in range(3)]),
    "merge: no run name": lambda tmp: merged(tmp, [document(i, p=the_plan(i, run=None)) for i in range(3)]),
    "merge: the run name from a later shard": lambda tmp: merged(tmp, all_three(s0={"plan_changes": {"run": None}})),
    "merge: faults and options of the first": lambda tmp: merged(tmp, all_three(
        s0={"faults": ("gpu-lost on h100-0 GPU 3",), "options": {"kueue_queue": "a"}},
        s1={"faults": ("other",), "options": {"kueue_queue": "b"}})),
    "merge: a shard missing": lambda tmp: merged(tmp, [document(0), document(2)]),
    "merge: two shards missing": lambda tmp: merged(tmp, [document(1)]),
    "merge: a shard missing, allowed": lambda tmp: merged(tmp, [document(0), document(2)], allow_missing=True),
    "merge: shard 2 missing, allowed": lambda tmp: merged(tmp, [document(0), document(1)], allow_missing=True),
    "merge: a shard that could not start": lambda tmp: merged(tmp, [document(0), unstarted(1), document(2)]),
    "merge: a shard that could not start, another missing": lambda tmp: merged(tmp, [unstarted(1), document(2)],
                                                                               allow_missing=True),
    "merge: every shard could not start": lambda tmp: merged(tmp, [unstarted(0), unstarted(1), unstarted(2)]),
    "merge: a shard without its plan's assignment, no error": lambda tmp: merged(tmp, [
        document(0), document(1, drop_plan=("assignment",), coverage=None), document(2)]),
    "merge: the first shard without its plan's assignment": lambda tmp: merged(tmp, [
        document(0, drop_plan=("assignment",)), document(1), document(2)]),
    "merge: no homes recorded": lambda tmp: merged(tmp, [document(0, drop_plan=("homes",)),
                                                         document(2, drop_plan=("homes",))], allow_missing=True),
    "merge: homes recorded by a later shard": lambda tmp: merged(tmp, [document(0, drop_plan=("homes",)),
                                                                       document(1)], allow_missing=True),
    "merge: malformed homes": lambda tmp: merged(tmp, [document(0, plan_changes={"homes": {
        "t::a": "x", "t::b": {"shard": 2}, "t::c": {"shard": 2, "check": 5}, "t::d": {"shard": 2, "check": "d.ok"},
        "t::e": {"shard": 1, "check": "e.ok"}}})], allow_missing=True),
    "merge: homes not a mapping": lambda tmp: merged(tmp, [document(0, plan_changes={"homes": ["x"]}),
                                                           document(1, plan_changes={"homes": ["x"]})]),
    "merge: the fleet in another order": lambda tmp: merged(tmp, [document(i, plan_changes={"fleet": [
        n for n, _ in reversed(MULTI_POOL)]}) for i in (0, 1)], allow_missing=True),
    "merge: the fleet unrecorded": lambda tmp: merged(tmp, [document(0, drop_plan=("fleet",)), document(1)],
                                                      allow_missing=True),
    "merge: idle shards absent": lambda tmp: nine(tmp, [0, 1, 2, 3, 4, 6]),
    "merge: an idle shard's home absent": lambda tmp: nine(tmp, [0, 1, 2, 3, 6]),
    "merge: the shards of 9, several missing": lambda tmp: nine(tmp, [0, 3]),
    # refusals
    "refuse: missing shards, none planned": lambda tmp: merged(tmp, [unstarted(0)]),
    "refuse: another count": lambda tmp: merged(tmp, [document(0), document(1, 4, p=the_plan(1, 4))]),
    "refuse: another run": lambda tmp: merged(tmp, [document(0), document(1, plan_changes={"run": "day"})]),
    "refuse: another run, third shard": lambda tmp: merged(tmp, [document(0), document(1),
                                                                 document(2, plan_changes={"run": "day"})]),
    "refuse: a run unnamed in one": lambda tmp: merged(tmp, [document(0), document(1, drop_plan=("run",)),
                                                             document(2)]),
    "refuse: another cluster": lambda tmp: merged(tmp, all_three(s2={"provenance": "kubeconfig:/other"})),
    "refuse: another kube-system": lambda tmp: merged(tmp, all_three(), uids=["uid-a", "uid-a", "uid-b"]),
    "refuse: one kube-system unknown": lambda tmp: merged(tmp, all_three(), uids=["uid-a", None, "uid-a"]),
    "refuse: another fleet": lambda tmp: merged(tmp, [document(0), document(1, plan_changes={"fingerprint": "f"})]),
    "refuse: one fingerprint unrecorded": lambda tmp: merged(tmp, [document(0), document(1, drop_plan=(
        "fingerprint",)), document(2)]),
    "refuse: a shard twice": lambda tmp: merged(tmp, [document(0), document(1), document(1)]),
    "refuse: another selection": lambda tmp: merged(tmp, all_three(s2=selection(suites=["suites/test_dra.py"]))),
    "refuse: a keyword more": lambda tmp: merged(tmp, all_three(s1=selection(keywords="h100"))),
    "refuse: a tier more": lambda tmp: merged(tmp, all_three(s1=selection(dcgm_diag=True))),
    "refuse: a key fewer": lambda tmp: merged(tmp, all_three(s1={"scope": {"selection": {
        k: v for k, v in SELECTION.items() if k != "tiers"} | {"tiers": ["burn-in"]}, "full": True}})),
    "refuse: a key of its own": lambda tmp: merged(tmp, all_three(s1=selection(expect={"pool": "x",
                                                                                     "file": "e.yaml"}))),
    "refuse: an empty value against another": lambda tmp: merged(tmp, all_three(s0=selection(markers=""),
                                                                                 s1=selection(markers="not slow"))),
    "refuse: an empty list against a flag": lambda tmp: merged(tmp, all_three(s0=selection(tiers={}),
                                                                              s1=selection(tiers=True))),
    "refuse: selections not mappings": lambda tmp: merged(tmp, all_three(
        s0={"scope": {"selection": ["a"]}}, s1={"scope": {"selection": "b"}})),
    "refuse: one selection not a mapping": lambda tmp: merged(tmp, all_three(s1={"scope": {"selection": None}})),
    "refuse: one unscoped": lambda tmp: merged(tmp, [document(0), unscoped(1), document(2)]),
    "refuse: the first unscoped": lambda tmp: merged(tmp, [unscoped(0), document(1), unscoped(2)]),
    "warn: none scoped": lambda tmp: selection_warning(shards(tmp, *[unscoped(i) for i in range(3)])),
    "warn: some scoped": lambda tmp: selection_warning(shards(tmp, document(0), document(1))),
    "warn: no shard": lambda tmp: selection_warning([]),
    # junit.xml
    "junit: outcomes": lambda tmp: junit(tmp, all_three(s0={"outcomes": {"h100-0": FAIL, "h100-1": NOT_TESTED}},
                                                        s2={"outcomes": {"t4-1": DEGRADED,
                                                                         "nccl.multinode-completes": FAIL}})),
    "junit: a shard missing": lambda tmp: junit(tmp, [document(0), document(1)], allow_missing=True),
    # the reports written
    "write: merged": lambda tmp: written(tmp, all_three()),
    "write: over an old manifest": lambda tmp: written(tmp, all_three(), old_manifest=True),
    "write: into a directory not yet made": lambda tmp: written(tmp, all_three(), into=tmp / "a" / "b" / "merged"),
    "write: with the cluster's uid": lambda tmp: written(tmp, all_three(), cluster_uid="uid-a"),
    "write: with the CNCF evidence inside": lambda tmp: written(tmp, all_three(),
                                                                cncf_evidence=tmp / "merged" / "evidence"),
    "write: with the CNCF evidence outside": lambda tmp: written(tmp, all_three(), cncf_evidence=tmp / "evidence"),
    "write: simulated evidence into a submission": lambda tmp: written(
        tmp, all_three(s0={"provenance": "simulated:multi-pool"}, s1={"provenance": "simulated:multi-pool"},
                       s2={"provenance": "simulated:multi-pool"}), cncf_evidence=tmp / "v1.36" / "acme" / "ev"),
}


def clean(data: Any, tmp: Path) -> Any:
    """``data`` as JSON data, the temporary directory written as TMP, the report's random id dropped."""
    text = json.dumps(as_data(data), default=str, sort_keys=True).replace(str(tmp), "TMP")
    return json.loads(text)


@pytest.mark.parametrize("case", CASES)
def test_the_result_is_the_recorded_one(case: str, tmp_path: Path) -> None:
    check_recording("merge", case, lambda: clean(CASES[case](tmp_path), tmp_path))


def test_a_missing_shard_home_only_to_a_cluster_wide_check_never_signs_off(tmp_path: Path) -> None:
    """A shard with no GPU node, home to a cluster-wide check, merged away with --allow-missing: its check
    is NOT TESTED "in missing shard", so the merge is not a PASS (15), as one run that did not test it."""
    two = MULTI_POOL[:2]
    homes = {"suites/test_nccl.py::test_multinode_completes": ("nccl.multinode-completes", 2)}
    docs = [document(i, p=the_plan(i, 3, nodes=two, homes=homes)) for i in (0, 1)]
    assert not the_plan(2, 3, nodes=two, homes=homes).nodes  # the missing shard had no node to test
    record, results = merge_shards(shards(tmp_path, *docs), allow_missing=True)
    absent = [r for r in results if r.check == "nccl.multinode-completes"]
    assert [(r.outcome, r.node) for r in absent] == [(NOT_TESTED, None)]
    assert record.exit_status == 15 and record.shard is not None and record.shard["missing"] == [2]
