"""Sharded runs (gpuconf.shards, --shard I/N) and their merge (gpuconf report merge): the partition's
rules, the shard's options, and, against one served simulated multi-pool cluster with a fault on a
node of each shard, three shards side by side whose merge is the unsharded run's sign-off (the same
per-node verdicts, cluster verdict and failures); a missing, duplicated, altered or foreign shard is
refused, never silently merged."""

from __future__ import annotations

import io
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from serving import in_parallel, run_suites, serve
from test_mutants_shards import MULTI_POOL

from gpuconf.cli import main
from gpuconf.shards import (
    COUNT_ENV,
    INDEX_ENV,
    RUN_ENV,
    ShardError,
    ShardPlan,
    ShardSpec,
    parse_shard,
    partition,
    plan,
    shard_spec,
)

ROOT = Path(__file__).resolve().parents[1]

# --- the partition -------------------------------------------------------------------------------

def test_pools_stay_whole_and_the_shards_are_balanced() -> None:
    assert partition(MULTI_POOL, 3) == {"h100-0": 0, "h100-1": 0, "a100-mig-0": 0, "t4-0": 2, "t4-1": 2,
                                        "l40s-0": 1, "l40s-1": 1}


def test_the_partition_does_not_depend_on_the_listing_order() -> None:
    shuffled = list(MULTI_POOL)
    random.Random(7).shuffle(shuffled)
    assert partition(shuffled, 3) == partition(MULTI_POOL, 3)


def test_a_pool_larger_than_a_share_is_never_cut() -> None:
    """A pool is one shard's whatever its size: its peer comparisons (the driver majority, the pool's
    GPU count, require-cuda-enforced's canaries, the NCCL pairs) are made over the whole pool."""
    nodes = [(f"gpu-{i:04d}", "NVIDIA-H100-80GB-HBM3") for i in range(1000)] + [("t4-0", "Tesla-T4")]
    got = partition(nodes, 4)
    assert {s for n, s in got.items() if n != "t4-0"} == {0} and got["t4-0"] == 1


def test_more_shards_than_pools_leaves_shards_empty() -> None:
    got = partition(MULTI_POOL, 9)
    assert [list(got.values()).count(s) for s in range(9)] == [2, 2, 2, 1, 0, 0, 0, 0, 0]
    assert partition([(f"h-{i}", "H100") for i in range(6)], 3) == {f"h-{i}": 0 for i in range(6)}


def test_a_pool_is_one_whether_gfd_or_the_dra_driver_names_its_product() -> None:
    """GFD spells the product with dashes, the DRA driver's productName with spaces, a time-sliced
    node's label ends in -SHARED: one pool, as driver.version-uniform-in-pool compares them."""
    got = partition([("a", "NVIDIA-H100-80GB-HBM3"), ("b", "NVIDIA H100 80GB HBM3"),
                     ("c", "NVIDIA-H100-80GB-HBM3-SHARED"), *((t, "Tesla-T4") for t in "defg")], 2)
    assert got == {"a": 1, "b": 1, "c": 1, "d": 0, "e": 0, "f": 0, "g": 0}


def test_a_node_joining_changes_the_plans_fingerprint() -> None:
    """Shards that saw different node lists are told apart (the merge refuses them), even when the new
    node changes no other node's shard."""
    before = plan(ShardSpec(0, 3, "r"), MULTI_POOL)
    after = plan(ShardSpec(0, 3, "r"), [*MULTI_POOL, ("t4-2", "Tesla-T4")])
    assert before.fingerprint != after.fingerprint and after.assignment["t4-2"] == after.assignment["t4-0"]


def test_nodes_of_unknown_product_are_one_pool() -> None:
    """driver.version-uniform-in-pool compares nodes of no known product as the "unknown" pool."""
    got = partition([("a", None), ("b", None), ("c", None), ("d", "X"), ("e", "X")], 2)
    assert got == {"a": 0, "b": 0, "c": 0, "d": 1, "e": 1}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.text("abcdefgh", min_size=1, max_size=4), st.sampled_from([None, "A", "B", "C"])),
                max_size=40, unique_by=lambda t: t[0]),
       st.integers(1, 12))
def test_every_node_is_in_exactly_one_shard(nodes: list[tuple[str, str | None]], count: int) -> None:
    got = partition(nodes, count)
    assert list(got) == [n for n, _ in nodes]
    assert all(0 <= s < count for s in got.values())
    for pool in {p for _, p in nodes}:  # a pool is one shard's, whatever its size
        assert len({got[n] for n, p in nodes if p == pool}) == 1, (pool, got)
    loads = [list(got.values()).count(s) for s in range(count)]
    pools = sorted(([n for n, p in nodes if p == pool] for pool in {p for _, p in nodes}), key=len, reverse=True)
    if len(pools) >= count:  # enough pools: nobody idle
        assert min(loads) >= 1, loads
    assert max(loads, default=0) <= max([len(pools[0]) if pools else 0, -(-len(nodes) // count) * 2])
    spec = ShardSpec(0, count, "r")
    plans = [plan(ShardSpec(i, count, "r"), nodes) for i in range(count)]
    assert sorted(n for p in plans for n in p.nodes) == sorted(n for n, _ in nodes)
    assert len({p.fingerprint for p in plans}) == 1 and plan(spec, nodes).fingerprint == plans[0].fingerprint


# --- --shard and the Indexed Job's environment ----------------------------------------------------

@pytest.mark.parametrize(("text", "why"), [
    ("3/3", "shard 3 of 3 does not exist (0 to 2)"), ("1/0", "must be 1 to 1000, not 0"),
    ("one/3", "give the shard as I/N"), ("-1/3", "give the shard as I/N"), ("2", "give the shard as I/N")])
def test_a_bad_shard_says_what_is_wrong(text: str, why: str) -> None:
    with pytest.raises(ShardError, match="^--shard .*" + why.replace("(", r"\(").replace(")", r"\)")):
        shard_spec(text, None, {})
    assert parse_shard(" 2 / 5 ") == (2, 5)


def test_the_indexed_job_environment_names_the_shard() -> None:
    assert shard_spec(None, None, {INDEX_ENV: "2", COUNT_ENV: "4", RUN_ENV: "0f3c9e0a-uid"}) == ShardSpec(
        2, 4, "0f3c9e0a-uid", f"{INDEX_ENV}/{COUNT_ENV}")
    assert shard_spec(None, None, {INDEX_ENV: "2"}) is None  # any Indexed Job has the index; the count says shard
    assert shard_spec("1/2", "night", {INDEX_ENV: "2", COUNT_ENV: "4"}) == ShardSpec(1, 2, "night", "--shard")
    with pytest.raises(ShardError, match=f"^{COUNT_ENV}=4 is set but {INDEX_ENV} is not"):
        shard_spec(None, None, {COUNT_ENV: "4"})
    with pytest.raises(ShardError, match=f"^{INDEX_ENV}=4 {COUNT_ENV}=4: '4/4': the index counts from 0"):
        shard_spec(None, None, {INDEX_ENV: "4", COUNT_ENV: "4"})
    with pytest.raises(ShardError, match="^--shard-run 'a b': a name of letters"):
        shard_spec("0/2", "a b", {})
    with pytest.raises(ShardError, match="^--shard-run night names a sharded run, but no shard is given"):
        shard_spec(None, "night", {})


def test_a_plan_records_what_the_merge_needs() -> None:
    p = plan(ShardSpec(1, 3, None), MULTI_POOL)
    doc = p.as_json()
    assert doc["nodes"] == ["l40s-0", "l40s-1"] and doc["fleet"] == [n for n, _ in MULTI_POOL]
    assert doc["run"] == f"fleet-{p.fingerprint[:12]}" and doc["run_given"] is False
    assert ShardPlan(ShardSpec(0, 3, "x"), p.fleet, p.assignment).fingerprint == p.fingerprint


def test_a_cluster_wide_check_runs_in_the_shard_holding_most_of_the_nodes_it_needs() -> None:
    """Shard 0 (a100-mig-0, h100-0, h100-1) has no T4: a check needing the T4s runs in shard 2, and
    every shard computes the same home from the same plan."""
    plans = [plan(ShardSpec(i, 3, None), MULTI_POOL) for i in range(3)]
    assert {p.home(["t4-0", "t4-1"]) for p in plans} == {2}
    assert plans[0].home(["h100-1", "l40s-0", "l40s-1"]) == 1  # most of them
    assert plans[0].home(["h100-0", "l40s-0"]) == 0  # a tie: the lowest index
    assert plans[0].home([]) == plans[0].home(["not-in-the-fleet"]) == 0  # nothing needed: shard 0


def test_a_dra_cluster_wide_check_leaves_a_shard_0_without_dra_gpus(tmp_path: Path) -> None:
    """plugin-and-dra as 2 shards: the device-plugin H100s and the DRA H200s, one pool each. The
    steering check needs DRA GPUs, so the H200s' shard runs it; shard 0 keeps the other cluster-wide
    checks (the over-ask, the RuntimeClass, the multi-node job across its H100s)."""
    with serve(tmp_path / "serve", "plugin-and-dra") as served:
        ran = in_parallel({i: (lambda i=i: run_suites(served.kubeconfig, tmp_path / f"s{i}", "--shard", f"{i}/2",
                                                      "--shard-run", "pd", "--collect-only",
                                                      suites=["suites/test_dra.py", "suites/test_nccl.py",
                                                              "suites/test_scheduling.py"]))
                           for i in range(2)})
    collected = {}
    for i, result in ran.items():
        assert result.returncode == 0, result.stdout[-2000:]
        collected[i] = [line.strip() for line in result.stdout.splitlines() if "::test_" in line]
    (dra,) = [i for i in range(2) if any(test.endswith("[h200-0]") for test in collected[i])]
    assert dra == 1  # shard 0 holds the device-plugin H100s only
    cluster_wide = {i: {test.split("::")[1] for test in collected[i] if "[" not in test} for i in range(2)}
    assert cluster_wide == {0: {"test_multinode_completes", "test_nvidia_runtime_class_present",
                                "test_over_asking_gpus_is_insufficient"}, 1: {"test_selector_steers_scheduling"}}

# --- the merge, against one served cluster ---------------------------------------------------------

#: A fault on a node of each shard (shard 0: h100-1, 1: l40s-0, 2: t4-1; test_pools_stay_whole...).
FAULTS = """
faults:
  - {id: driver-skew, pool: h100, node: 1}
  - {id: gpu-lost, pool: l40s, node: 0}
  - {id: xid-errors, pool: t4, node: 1}
"""


def _merge(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["report", "merge", *map(str, argv)], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _gpuconf(directory: Path) -> dict[str, Any]:
    return dict(json.loads((directory / "report.json").read_text())["extra"]["gpuconf"])


def _failures(directory: Path) -> set[tuple[str, str, str]]:
    tests = json.loads((directory / "report.json").read_text())["results"]["tests"]
    return {(t["extra"]["check"], t["extra"]["node"] or "", t["extra"]["outcome"]) for t in tests
            if t["extra"]["outcome"] in ("fail", "degraded")}


def _sign_off(text: str) -> list[str]:
    """The closing block's summary lines (gpuconf.report.closing): the verdict and headline, the
    coverage, scope and results, the exit status; not the failing lines (cut to the terminal's width)
    nor where the reports are. From a run's output (after its "gpuconf sign-off" rule) or a merge's
    (after its "merged ..." line)."""
    block = text.split("gpuconf sign-off", 1)[-1].splitlines()[1:]
    return [line for line in block if line.startswith("gpuconf: ") and not line.startswith(
        ("gpuconf:   FAIL ", "gpuconf:   DEGRADED ", "gpuconf: reports in ", "gpuconf: CNCF evidence in "))]


def _unsharded_and_shards(base: Path, profile: Path) -> dict[str, Any]:
    """The suites against one served cluster of ``profile``: unsharded (``all``), then as shards s0..s2 of
    run night-1 side by side."""
    return _unsharded_then_shards(base, profile, 3, ["suites/"], run="night-1")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("shards")
    text = (ROOT / "gpuconf" / "data" / "sim_profiles" / "multi-pool.yaml").read_text()
    profile = base / "faulty.yaml"
    profile.write_text(text.replace("faults: []", FAULTS.strip()))
    runs = _unsharded_and_shards(base, profile)
    merged = base / "merged"
    code, out, err = _merge(*(base / f"s{i}" for i in range(3)), "--out", merged, "--cncf-evidence",
                            base / "cncf")
    return {"base": base, "runs": runs, "merged": merged, "merge": (code, out, err)}


def test_each_shard_tests_its_share_in_its_own_run(runs: dict[str, Any]) -> None:
    base = runs["base"]
    shards = [_gpuconf(base / f"s{i}") for i in range(3)]
    assert [sorted(s["shard"]["nodes"]) for s in shards] == [["a100-mig-0", "h100-0", "h100-1"],
                                                             ["l40s-0", "l40s-1"], ["t4-0", "t4-1"]]
    assert [s["coverage"]["line"] for s in shards] == ["3 of 3 GPU nodes tested", "2 of 2 GPU nodes tested",
                                                      "2 of 2 GPU nodes tested"]
    assert len({s["run_id"] for s in shards}) == 3  # each its own run id, namespace and liveness mark
    assert {s["shard"]["run"] for s in shards} == {"night-1"}
    assert {k: r.returncode for k, r in runs["runs"].items()} == {"all": 1, "s0": 17, "s1": 1, "s2": 1}, {
        k: r.stdout[-2000:] for k, r in runs["runs"].items()}  # s0's only fault degrades (driver-skew): 17
    log = runs["runs"]["s1"].stdout
    assert ("gpuconf: shard 1 of 3 of run night-1: 2 of the 7 selected GPU nodes; cluster-wide checks are shard 0's"
            in log)
    cluster_wide = {t["extra"]["check"] for i in range(3) for t in json.loads(
        (base / f"s{i}" / "report.json").read_text())["results"]["tests"] if not t["extra"]["node"] and i}
    assert cluster_wide == set()  # only shard 0 runs them
    assert "merged from 3 shards" not in (base / "s0" / "report.md").read_text()
    assert "shard 0 of 3" in (base / "s0" / "report.md").read_text()


def test_the_merge_is_the_unsharded_sign_off(runs: dict[str, Any]) -> None:
    base, merged = runs["base"], runs["merged"]
    code, out, err = runs["merge"]
    lines = out.splitlines()
    assert code == 1 and lines[0] == f"merged 3 of 3 shards of run night-1 into {merged}: FAIL; 7 of 7 GPU nodes tested"
    assert err == ""
    # then the closing block the unsharded run ended with: its verdict, coverage and exit status (not its
    # results line: which of t4-1's GPUs, one raising Xids, a compat matrix pod is given differs run to run)
    assert [line for line in _sign_off(out) if not line.startswith("gpuconf: results: ")] == [
        line for line in _sign_off(runs["runs"]["all"].stdout) if not line.startswith("gpuconf: results: ")], out
    assert _sign_off(out)[0].startswith("gpuconf: FAIL: ") and lines[-1] == (
        "gpuconf: exit status 1: a check failed (do not hand the failing nodes over)")
    assert f"gpuconf: reports in {merged} (report.html, report.md, report.json, junit.xml)" in lines
    assert f"gpuconf: CNCF evidence in {base / 'cncf'}" in lines  # as the suite says where --cncf-evidence went
    whole, joined = _gpuconf(base / "all"), _gpuconf(merged)
    assert joined["nodes"] == whole["nodes"] and joined["verdict"] == whole["verdict"] == "fail"
    assert {n: v for n, v in joined["nodes"].items() if v != "pass"} == {
        "h100-1": "degraded", "l40s-0": "fail", "t4-1": "fail"}
    assert _failures(merged) == _failures(base / "all") and len(_failures(merged)) >= 3
    assert joined["coverage"]["line"] == whole["coverage"]["line"] == "7 of 7 GPU nodes tested"
    assert joined["exit_status"] == 1 and joined["run_id"] == "night-1"
    assert joined["shard"]["merged"] == [0, 1, 2] and joined["shard"]["missing"] == []
    assert all(s["verified"] for s in joined["shard"]["shards"])
    assert "merged from 3 shards" in (merged / "report.md").read_text()
    assert "merged from 3 shards" in (merged / "report.html").read_text()


def test_on_a_healthy_cluster_too(tmp_path: Path) -> None:
    """The healthy multi-pool cluster: the shards' merge passes as the unsharded run does."""
    runs = _unsharded_and_shards(tmp_path, ROOT / "gpuconf" / "data" / "sim_profiles" / "multi-pool.yaml")
    assert {name: r.returncode for name, r in runs.items()} == {"all": 0, "s0": 0, "s1": 0, "s2": 0}, {
        k: r.stdout[-2000:] for k, r in runs.items()}
    code, out, err = _merge(*(tmp_path / f"s{i}" for i in range(3)), "--out", tmp_path / "merged")
    assert (code, err) == (0, "") and out.splitlines()[0].endswith(": PASS; 7 of 7 GPU nodes tested"), out
    assert _sign_off(out) == _sign_off(runs["all"].stdout), out
    assert _sign_off(out)[0].startswith("gpuconf: PASS: All 7 of 7 GPU nodes tested and passed") and (
        _sign_off(out)[-1].startswith("gpuconf: exit status 0: ")), out
    whole, joined = _gpuconf(tmp_path / "all"), _gpuconf(tmp_path / "merged")
    assert joined["nodes"] == whole["nodes"] and set(joined["nodes"].values()) == {"pass"}
    assert joined["verdict"] == whole["verdict"] == "pass" and joined["exit_status"] == 0
    assert _failures(tmp_path / "merged") == _failures(tmp_path / "all") == set()


def test_the_merged_reports_are_complete_and_valid(runs: dict[str, Any]) -> None:
    import junitparser
    from cncf_shapes import read_stream

    merged, base = runs["merged"], runs["base"]
    assert {p.name for p in merged.iterdir()} == {"report.json", "report.md", "report.html", "junit.xml",
                                                   "manifest.json"}
    assert main(["report", "verify", str(merged)], stdout=io.StringIO(), stderr=io.StringIO()) == 0
    suite = next(iter(junitparser.JUnitXml.fromfile(str(merged / "junit.xml"))))
    doc = json.loads((merged / "report.json").read_text())
    tests = doc["results"]["tests"]
    # the checks and the sign-off, a failure as the merged verdict is FAIL (a single run's junit.xml)
    assert suite.tests == len(tests) + 1 and suite.failures == 1 + sum(
        t["extra"]["outcome"] in ("fail", "degraded") for t in tests)
    assert suite.name == f"gpuconf {doc['extra']['gpuconf']['provenance']}"
    props = {p.name: p.value for p in suite.properties()}
    assert props["gpuconf.coverage"] == "7 of 7 GPU nodes tested" and props["gpuconf.verdict"] == "FAIL"
    types = {case.name: {r.type for r in case.result} for case in suite if case.result}
    assert types["sign-off"] == {"fail"} and {"degraded", "fail"} <= set().union(*types.values())
    assert any(name.endswith("[h100-1]") and kinds == {"degraded"} for name, kinds in types.items())
    stream = read_stream((base / "cncf" / "results.json").read_text())
    assert stream.problems == [] and stream.package_verdict == "fail"
    drm = "TestAcceleratorDriverRuntimeManagement"
    assert stream.verdicts[f"{drm}/driver.version-uniform-in-pool/h100-1"] == "fail"
    assert main(["report", "verify", str(base / "cncf")], stdout=io.StringIO(), stderr=io.StringIO()) == 0


def test_a_missing_shard_is_refused_or_counted_never_merged_silently(runs: dict[str, Any], tmp_path: Path) -> None:
    base = runs["base"]
    code, out, err = _merge(base / "s0", base / "s2", "--out", tmp_path / "refused")
    assert code == 2 and out == "" and err == (
        "gpuconf report merge: shard 1 of 3 is missing (its 2 GPU nodes): give its report directory, or "
        "--allow-missing to sign off without them (their nodes then count as not tested)\n")
    assert not (tmp_path / "refused").exists()
    code, out, _ = _merge(base / "s0", base / "s2", "--out", tmp_path / "partial", "--allow-missing")
    assert code == 1 and out.splitlines()[0].endswith("FAIL; 5 of 7 GPU nodes tested; 2 in a missing shard"), out
    block = _sign_off(out)  # the nodes not given are named, and a failure elsewhere still fails the merge
    assert block[0].startswith("gpuconf: FAIL: 1 of 7 node(s) fail: t4-1; ") and block[1:4] == [
        "gpuconf: 5 of 7 GPU nodes tested; 2 in a missing shard",
        *(f"gpuconf:   {n} not tested: {n} is in shard 1 of 3, whose reports were not given to the merge (it did "
          "not finish, or its directory was left out)" for n in ("l40s-0", "l40s-1"))], out
    assert block[-1] == "gpuconf: exit status 1: a check failed (do not hand the failing nodes over)", out
    doc = _gpuconf(tmp_path / "partial")
    assert doc["nodes"]["l40s-0"] == doc["nodes"]["l40s-1"] == "not-tested"
    assert [u["reason"] for u in doc["coverage"]["untested"]] == [
        f"{n} is in shard 1 of 3, whose reports were not given to the merge (it did not finish, or its directory "
        "was left out)" for n in ("l40s-0", "l40s-1")]
    assert doc["shard"]["missing"] == [1]
    assert "2 in a missing shard" in (tmp_path / "partial" / "report.md").read_text()


def test_shards_that_do_not_make_one_run_are_refused(runs: dict[str, Any], tmp_path: Path) -> None:
    base = runs["base"]
    code, _, err = _merge(base / "s0", base / "s1", base / "s0", "--out", tmp_path / "twice")
    assert code == 2 and f"{base / 's0'} and {base / 's0'} are both shard 0 of 3: give each shard once" in err
    code, _, err = _merge(base / "s0", base / "all", "--out", tmp_path / "unsharded")
    assert code == 2 and f"{base / 'all'}: not a shard's report (its run was not given --shard I/N)" in err
    code, _, err = _merge(base / "s0", runs["merged"], "--out", tmp_path / "merged-again")
    assert code == 2 and "a merge's report" in err
    altered = tmp_path / "altered"
    shutil.copytree(base / "s1", altered)
    with (altered / "report.md").open("a") as f:
        f.write("x")
    code, _, err = _merge(base / "s0", altered, base / "s2", "--out", tmp_path / "a")
    assert code == 2 and f"{altered} does not match its manifest.json: altered file report.md" in err
    foreign = tmp_path / "foreign"
    shutil.copytree(base / "s1", foreign)
    (foreign / "manifest.json").unlink()
    doc = json.loads((foreign / "report.json").read_text())
    doc["extra"]["gpuconf"]["shard"]["run"] = "night-2"
    (foreign / "report.json").write_text(json.dumps(doc))
    code, _, err = _merge(base / "s0", foreign, base / "s2", "--out", tmp_path / "f")
    assert code == 2 and f"{base / 's0'} is of run night-1 but {foreign} of run night-2: shards of different runs" in (
        err)
    doc["extra"]["gpuconf"]["shard"].update(run="night-1", fingerprint="0" * 64)
    (foreign / "report.json").write_text(json.dumps(doc))
    code, _, err = _merge(base / "s0", foreign, base / "s2", "--out", tmp_path / "g")
    assert code == 2 and "split different node lists" in err
    doc["extra"]["gpuconf"]["shard"]["fingerprint"] = _gpuconf(base / "s0")["shard"]["fingerprint"]
    (foreign / "report.json").write_text(json.dumps(doc))
    code, out, err = _merge(base / "s0", foreign, base / "s2", "--out", tmp_path / "h")
    assert code == 1 and f"gpuconf: no manifest.json to check in {foreign}: merged as found" in err, (out, err)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "old.txt").write_text("x")
    code, _, err = _merge(base / "s0", base / "s1", base / "s2", "--out", tmp_path / "busy")
    assert code == 2 and "--out" in err and "not empty" in err
    code, _, err = _merge(tmp_path / "nowhere", "--out", tmp_path / "n")
    assert code == 2 and "no such directory" in err


def _altered(source: Path, where: Path, change: Any) -> Path:
    """A copy of a shard's directory with its report.json's ``extra.gpuconf`` changed by ``change``
    (its manifest.json dropped, so the merge reads it as found)."""
    shutil.copytree(source, where)
    (where / "manifest.json").unlink()
    doc = json.loads((where / "report.json").read_text())
    change(doc["extra"]["gpuconf"])
    (where / "report.json").write_text(json.dumps(doc))
    return where


def test_shards_that_selected_differently_are_refused(runs: dict[str, Any], tmp_path: Path) -> None:
    """Shard 1 ran -m security while the others ran every suite: its nodes' lost GPU would be reported
    nowhere, so the merge refuses, naming the difference, and writes nothing."""
    base = runs["base"]
    assert _gpuconf(base / "s0")["scope"]["selection"] == _gpuconf(base / "s1")["scope"]["selection"]
    narrow = _altered(base / "s1", tmp_path / "narrow", lambda g: g["scope"]["selection"].update(markexpr="security"))
    code, out, err = _merge(base / "s0", narrow, base / "s2", "--out", tmp_path / "refused")
    assert code == 2 and out == "" and err == (
        f"gpuconf report merge: shard 1 ran markexpr security, shard 0 ran no markexpr ({narrow}, {base / 's0'}): "
        "shards that selected different checks do not merge into one sign-off; run every shard with the same "
        "suites and options\n")
    assert not (tmp_path / "refused").exists()
    old = _altered(base / "s1", tmp_path / "old", lambda g: g.pop("scope"))
    code, _, err = _merge(base / "s0", old, base / "s2", "--out", tmp_path / "mixed")
    assert code == 2 and f"{old} (shard 1) does not record what it selected (a report from an older gpuconf)" in err
    assert not (tmp_path / "mixed").exists()
    olds = [_altered(base / f"s{i}", tmp_path / f"old{i}", lambda g: g.pop("scope")) for i in (0, 2)]
    code, out, err = _merge(olds[0], old, olds[1], "--out", tmp_path / "unchecked")
    assert code == 1 and "none of the shards records what it selected (reports from an older gpuconf)" in err, err


def test_a_missing_shards_cluster_wide_checks_are_named_not_tested(runs: dict[str, Any], tmp_path: Path) -> None:
    """Merged without shard 0 (--allow-missing): the cluster-wide checks it was home to are NOT TESTED,
    "in missing shard 0", beside its nodes; none is silently absent."""
    base = runs["base"]
    homes = _gpuconf(base / "s1")["shard"]["homes"]
    assert homes == _gpuconf(base / "s2")["shard"]["homes"]  # every shard records every cluster-wide check's shard
    ran = {(t["extra"]["check"], t["name"]) for t in json.loads((base / "s0" / "report.json").read_text())[
        "results"]["tests"] if not t["extra"]["node"]}
    assert ran and ran == {(h["check"], test) for test, h in homes.items() if h["shard"] == 0}
    code, out, _ = _merge(base / "s1", base / "s2", "--out", tmp_path / "partial", "--allow-missing")
    assert code == 1 and out.splitlines()[0].endswith("; 3 in a missing shard"), out
    assert "gpuconf: 4 of 7 GPU nodes tested; 3 in a missing shard" in _sign_off(out), out
    assert _sign_off(out)[-1].startswith("gpuconf: exit status 1: "), out
    tests = json.loads((tmp_path / "partial" / "report.json").read_text())["results"]["tests"]
    cluster_wide = {(t["extra"]["check"], t["name"]): (t["extra"]["outcome"], t.get("message")) for t in tests
                    if not t["extra"]["node"]}
    assert cluster_wide == {k: ("not-tested", "in missing shard 0 of 3 (its reports were not given to the merge)")
                            for k in ran}


def test_a_shard_given_no_node_runs_nothing_and_exits_0(tmp_path: Path) -> None:
    result = run_suites_simulated(tmp_path, "--shard", "7/8")
    assert result.returncode == 0, result.stdout[-3000:]
    doc = _gpuconf(tmp_path / "r")
    assert doc["shard"]["nodes"] == [] and doc["coverage"]["line"] == "0 of 0 GPU nodes tested"
    assert json.loads((tmp_path / "r" / "report.json").read_text())["results"]["tests"] == []


def test_a_bad_shard_ends_the_run_at_startup_with_one_line(tmp_path: Path) -> None:
    result = run_suites_simulated(tmp_path, "--shard", "3/3")
    assert result.returncode == 4
    assert "--shard '3/3': the index counts from 0, so shard 3 of 3 does not exist (0 to 2)" in result.stdout + (
        result.stderr or "")


def run_suites_simulated(tmp_path: Path, *options: str) -> Any:
    import forked
    from serving import NO_HYPOTHESIS

    return forked.run_pytest([*NO_HYPOTHESIS, "suites/test_inventory.py", "suites/test_scheduling.py", "-p",
                              "gpuconf.plugin", "--simulate", "multi-pool", "--report-dir", str(tmp_path / "r"), "-q",
                              "-p", "no:cacheprovider", *options], cwd=ROOT, timeout=300)


# --- a pool is never judged from part of itself --------------------------------------------------


def _verdicts(directory: Path) -> dict[tuple[str, str, str], str]:
    """Each result's outcome by (check, node, test name), the node "" for a cluster-wide check."""
    tests = json.loads((directory / "report.json").read_text())["results"]["tests"]
    return {(t["extra"]["check"], t["extra"]["node"] or "", t["name"]): t["extra"]["outcome"] for t in tests}


def _unsharded_then_shards(base: Path, profile: str | Path, count: int, suites: list[str],
                           run: str = "prop") -> dict[str, Any]:
    """The suites against one served cluster of ``profile``: unsharded (``all``), then as ``count``
    shards side by side (``s0``...) of run ``run``; the unsharded run first, so that no run's probes
    hold GPUs of a node another run is about to probe (it would be NOT TESTED there, busy)."""
    with serve(base / "serve", profile) as served:
        runs = {"all": run_suites(served.kubeconfig, base / "all", suites=suites, timeout=600)}
        runs.update(in_parallel({f"s{i}": (lambda i=i: run_suites(
            served.kubeconfig, base / f"s{i}", "--shard", f"{i}/{count}", "--shard-run", run, suites=suites,
            timeout=600)) for i in range(count)}))
    return runs


def _assert_merge_is_unsharded(base: Path, runs: dict[str, Any], count: int) -> tuple[int, str]:
    given = [base / f"s{i}" for i in range(count) if (base / f"s{i}" / "report.json").exists()]
    code, out, err = _merge(*given, "--out", base / "merged")
    assert code != 2, err
    whole, joined = _gpuconf(base / "all"), _gpuconf(base / "merged")
    assert _verdicts(base / "merged") == _verdicts(base / "all"), {k: r.stdout[-1500:] for k, r in runs.items()}
    assert joined["nodes"] == whole["nodes"] and joined["verdict"] == whole["verdict"]
    assert (code, joined["exit_status"]) == (runs["all"].returncode, runs["all"].returncode) == (
        whole["exit_status"], whole["exit_status"])
    return code, out


def test_a_pool_cut_across_shards_is_judged_whole(tmp_path: Path) -> None:
    """healthy-h100 with driver-skew on h100-1, as 2 shards: its pool of two is one shard's, so h100-1
    is DEGRADED against the pool's other node as unsharded (cut in two, each half passed alone: the
    merge said PASS, exit 0), and the merge exits as the unsharded run."""
    text = (ROOT / "gpuconf" / "data" / "sim_profiles" / "healthy-h100.yaml").read_text()
    profile = tmp_path / "skew.yaml"
    profile.write_text(text.replace("faults: []", "faults:\n  - {id: driver-skew, pool: h100, node: 1}"))
    runs = _unsharded_then_shards(tmp_path, profile, 2, ["suites/test_inventory.py"])
    code, out = _assert_merge_is_unsharded(tmp_path, runs, 2)
    assert _gpuconf(tmp_path / "merged")["nodes"] == {"h100-0": "pass", "h100-1": "degraded"}
    assert out.splitlines()[0].endswith(": DEGRADED; 2 of 2 GPU nodes tested"), out
    # the unsharded run's closing block: one suite of 15 is PARTIAL, but DEGRADED is the worse (exit 17)
    assert _sign_off(out) == _sign_off(runs["all"].stdout), out
    assert _sign_off(out)[0] == "gpuconf: DEGRADED: 1 of 2 node(s) degraded: h100-1" and _sign_off(out)[-1] == (
        "gpuconf: exit status 17: nothing failed, but something works below what it should"), out
    skew = {k: v for k, v in _verdicts(tmp_path / "merged").items() if k[0] == "driver.version-uniform-in-pool"}
    assert sorted(skew.values()) == ["degraded", "pass"]
    assert _gpuconf(tmp_path / "s0")["shard"]["assignment"] == {"h100-0": 0, "h100-1": 0}
    # Shard 1 was given no node and no cluster-wide check: merged without it, nothing is missing.
    code, out, err = _merge(tmp_path / "s0", "--out", tmp_path / "alone")
    assert (code, err) == (runs["all"].returncode, "") and "merged 1 of 2 shards" in out, (out, err)
    alone = _gpuconf(tmp_path / "alone")["shard"]
    assert alone["idle"] == [1] and alone["missing"] == []


#: Pools a random fleet is made of (gpuconf/sim/profile.py's pool fields), and node faults the
#: inventory and smoke suites catch.
_LEGACY = {"driver": "580.159.03", "toolkit": {"version": "1.19.1", "mode": "legacy"}}
POOLS = {"h100": {"gpu": "H100", "gpus_per_node": 8, **_LEGACY}, "l40s": {"gpu": "L40S", "gpus_per_node": 4, **_LEGACY},
         "a100": {"gpu": "A100-SXM4-80GB", "gpus_per_node": 8, **_LEGACY}}
PROPERTY_FAULTS = ["driver-skew", "gpu-lost", "uvm-missing", "plugin-not-registered", "node-cordoned"]


@st.composite
def fleets(draw: st.DrawFn) -> tuple[dict[str, Any], int]:
    """A profile of 1-3 pools of 1-3 nodes, 0-2 faults on random nodes, and a shard count of 1-5."""
    names = draw(st.lists(st.sampled_from(sorted(POOLS)), min_size=1, max_size=3, unique=True))
    counts = {name: draw(st.integers(1, 3)) for name in names}
    faults = draw(st.lists(st.tuples(st.sampled_from(PROPERTY_FAULTS), st.sampled_from(names), st.integers(0, 2)),
                           max_size=2, unique_by=lambda f: (f[1], f[2] % counts[f[1]])))
    profile = {"schema": 1, "name": "prop", "description": "a random fleet (tests/test_shards.py)",
               "kubernetes": "1.34", "operator": {"present": True},
               "runtime_classes": [{"name": "nvidia", "handler": "nvidia"}],
               "pools": [{"name": n, "count": counts[n], **POOLS[n]} for n in names],
               "faults": [{"id": f, "pool": p, "node": i % counts[p]} for f, p, i in faults]}
    return profile, draw(st.integers(1, 5))


@settings(max_examples=5, deadline=None, derandomize=True)
@given(fleets())
def test_the_merge_of_the_shards_is_the_unsharded_run(tmp_path_factory: pytest.TempPathFactory,
                                                      example: tuple[dict[str, Any], int]) -> None:
    """Random multi-pool fleets, random catalog faults, 1-5 shards: the merged verdicts, per node and
    check, the cluster verdict and the exit status are the unsharded run's."""
    import yaml

    profile, count = example
    base = tmp_path_factory.mktemp("prop")
    (base / "prop.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    runs = _unsharded_then_shards(base, base / "prop.yaml", count, ["suites/test_inventory.py", "suites/test_smoke.py"])
    _assert_merge_is_unsharded(base, runs, count)


def test_the_merge_keeps_a_simulated_runs_faults_and_says_its_verdict_in_junit(tmp_path: Path) -> None:
    """A shard's report.json read back keeps the faults its profile injected; the merged junit.xml is
    named for gpuconf and the cluster, carries the verdict, the faults and the untested node as a case."""
    import xml.etree.ElementTree as ET

    from gpuconf.report.merge import junit_document, read_run
    from gpuconf.report.model import CheckResult, Coverage, RunRecord, UntestedNode
    from gpuconf.report.writers import ctrf_document

    coverage = Coverage(("h100-0", "h100-1"), (UntestedNode("h100-1", "missing-shard", "h100-1 is in shard 1 of 2"),))
    record = RunRecord("simulated:broken.yaml", 1_700_000_000.0, 1_700_000_010.0, 15, coverage=coverage,
                       faults=("gpu-lost on h100-0 GPU 3",))
    results = [CheckResult("inventory.gpu-count", "h100-0", "pass", "suites/test_inventory.py::test_count[h100-0]")]
    run, read = read_run(json.loads(json.dumps(ctrf_document(record, results))), source="report.json")
    assert run.faults == ("gpu-lost on h100-0 GPU 3",) and run.provenance == "simulated:broken.yaml"
    root = ET.fromstring(junit_document(run, read))
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == root.get("name") == "gpuconf simulated:broken.yaml"
    props = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    assert (props["gpuconf.verdict"], props["gpuconf.faults"]) == ("INCOMPLETE", "gpu-lost on h100-0 GPU 3")
    cases = {(c.get("classname"), c.get("name")): c for c in suite.iter("testcase")}
    assert cases[("gpuconf", "sign-off")].find("error") is not None
    skipped = cases[("gpuconf.coverage", "h100-1")].find("skipped")
    assert skipped is not None and skipped.get("message") == "h100-1 is in shard 1 of 2"
    check = cases[("suites.test_inventory", "test_count[h100-0]")]
    assert {p.get("name"): p.get("value") for p in check.iter("property")} == {
        "gpuconf.check": "inventory.gpu-count", "gpuconf.node": "h100-0", "gpuconf.outcome": "pass"}
    assert read_run({**ctrf_document(RunRecord(None, 0.0, 1.0, 0), []), "extra": {"gpuconf": {}}},
                    source="old")[0].faults == ()  # a report from before faults were recorded
