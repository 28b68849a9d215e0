"""The sign-off contract: for each shape a run can take, the exit status, the terminal's closing
block, report.json's verdict, junit.xml's, report.md's and report.html's headline and the node labels
all say the same thing, and never more than the run saw (issue 36).

Each shape is a whole run as a user makes it (a subprocess of `python -m pytest`, forked: tests/
forked.py) against a simulated cluster; the sharded shapes are in tests/test_shards.py, which pins
the merge's verdicts against the unsharded run's with the same `signoff_views` reader.
"""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from serving import pytest_subprocess

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.xdist_group("signoff-contract")

ROOT = Path(__file__).resolve().parents[1]

#: Patches the simulated cluster's nodes before the run (SIGNOFF_BEFORE) and dumps them after the
#: sign-off (nodes.json): the node labels a run leaves are part of the contract.
RECORDER = '''
import json, os
import pytest
from gpuconf.kit.state import SESSION


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    state = session.config.stash[SESSION]
    if state.sim is not None:
        for name, patch in json.loads(os.environ.get("SIGNOFF_BEFORE", "{}")).items():
            state.sim.server.store.patch("nodes", name, patch)


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config):
    state = config.stash[SESSION]
    if state.sim is not None:
        nodes = {n["metadata"]["name"]: n for n in state.sim.server.store.list("nodes").items}
        with open("nodes.json", "w") as out:
            json.dump(nodes, out)
'''


@dataclass(frozen=True)
class Views:
    """What each view of one run says."""

    exit_status: int
    terminal: str | None  # the closing block's verdict word
    terminal_exit: int | None  # the closing block's "exit status N"
    last_line: str
    json_verdict: str | None
    json_exit: int | None
    junit: str | None  # the testsuite property gpuconf.verdict
    md: str | None  # report.md's bold verdict word
    html: str | None  # report.html's verdict word
    md_headline: str | None
    html_headline: str | None
    labels: dict[str, str | None]  # gpuconf.io/verdict by node (None: unlabelled)


_WORD = {"pass": "PASS", "fail": "FAIL", "degraded": "DEGRADED", "incomplete": "INCOMPLETE", "partial": "PARTIAL",
         "not-tested": "NOT TESTED", "not-started": "NOT STARTED"}


def signoff_views(exit_status: int, output: str, report_dir: Path, nodes: dict[str, Any] | None = None) -> Views:
    """Read every view of a run's sign-off (terminal output, reports, node objects)."""
    block = output.split("gpuconf sign-off", 1)[1] if "gpuconf sign-off" in output else ""
    verdict = re.search(r"^gpuconf: ([A-Z][A-Z ]+): ", block, re.M)
    status = re.search(r"^gpuconf: exit status (\d+): ", block, re.M)
    doc = json.loads((report_dir / "report.json").read_text()) if (report_dir / "report.json").exists() else {}
    meta = (doc.get("extra") or {}).get("gpuconf") or {}
    junit = None
    if (report_dir / "junit.xml").exists():
        root = ET.parse(report_dir / "junit.xml").getroot()
        junit = next((p.get("value") for p in root.iter("property") if p.get("name") == "gpuconf.verdict"), None)
    md = (report_dir / "report.md").read_text() if (report_dir / "report.md").exists() else ""
    md_match = re.search(r"^\*\*([A-Z ]+)\*\*: (.*)$", md, re.M)
    html = (report_dir / "report.html").read_text() if (report_dir / "report.html").exists() else ""
    html_word = re.search(r'<div class="word">([^<]+)</div>', html)
    html_headline = re.search(r'<div class="headline">([^<]*)</div>', html)
    labels = {name: ((n["metadata"].get("labels") or {}).get("gpuconf.io/verdict"))
              for name, n in (nodes or {}).items()}
    lines = [line for line in output.splitlines() if line.strip()]
    return Views(exit_status, verdict.group(1) if verdict else None, int(status.group(1)) if status else None,
                 lines[-1] if lines else "", _WORD.get(meta.get("verdict", ""), meta.get("verdict")),
                 meta.get("exit_status"), junit, md_match.group(1) if md_match else None,
                 html_word.group(1) if html_word else None, md_match.group(2) if md_match else None,
                 _unescape(html_headline.group(1)) if html_headline else None, labels)


def _unescape(text: str) -> str:
    import html

    return html.unescape(text)


def assert_agree(views: Views, word: str, status: int) -> None:
    """Every view says ``word`` and the run exits ``status``; the terminal's last line is the exit
    status with its meaning, and the headlines are one text."""
    assert views.exit_status == status, views
    assert (views.terminal, views.json_verdict, views.junit, views.md, views.html) == (word,) * 5, views
    assert views.terminal_exit == views.json_exit == status, views
    assert views.last_line.startswith(f"gpuconf: exit status {status}: "), views.last_line
    assert views.md_headline == views.html_headline, views


def _profile(where: Path, faults: str) -> Path:
    text = (ROOT / "gpuconf" / "data" / "sim_profiles" / "healthy-h100.yaml").read_text()
    assert "\nfaults: []\n" in text
    path = where / "profile.yaml"
    path.write_text(text.replace("\nfaults: []\n", f"\nfaults: {faults}\n"))
    return path


def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, profile: str | Path, *args: str,
        before: dict[str, Any] | None = None) -> tuple[Views, pytest.RunResult]:
    """Every suite (copied as suites/, so the run's scope is the whole default set) against ``profile``."""
    shutil.copytree(ROOT / "suites", pytester.path / "suites", ignore=shutil.ignore_patterns("__pycache__"))
    pytester.makeini("[pytest]\njunit_family = xunit1\naddopts = -ra\n")  # as the project's pyproject.toml
    pytester.makeconftest(RECORDER)
    monkeypatch.setenv("SIGNOFF_BEFORE", json.dumps(before or {}))
    reports = pytester.path / "reports"
    result = pytest_subprocess(pytester, "suites", "-p", "gpuconf.plugin", "--simulate", str(profile),
                               "--report-dir", str(reports), "-p", "no:cacheprovider", *args)
    nodes_file = pytester.path / "nodes.json"
    nodes = json.loads(nodes_file.read_text()) if nodes_file.exists() else None
    output = result.stdout.str() + "\n" + result.stderr.str()
    return signoff_views(result.ret, output, reports, nodes), result


def test_a_healthy_full_run_is_a_pass_everywhere(pytester, monkeypatch):
    views, _ = run(pytester, monkeypatch, "healthy-h100", "--label-nodes")
    assert_agree(views, "PASS", 0)
    assert views.md_headline.endswith("they can be handed over")
    assert views.labels == {"h100-0": "pass", "h100-1": "pass"}


def test_a_failure_is_a_fail_everywhere(pytester, monkeypatch):
    views, result = run(pytester, monkeypatch, _profile(pytester.path, "[{id: gpu-lost, pool: h100, node: 0, gpu: 3}]"),
                        "--label-nodes")
    assert_agree(views, "FAIL", 1)
    result.stdout.re_match_lines([r"gpuconf:   FAIL h100-0 inventory\.gpu-count-matches-expected: .*"])
    assert views.labels == {"h100-0": "fail", "h100-1": "pass"}


def test_degraded_only_is_told_from_a_failure(pytester, monkeypatch):
    views, result = run(pytester, monkeypatch, _profile(pytester.path, "[{id: driver-skew, pool: h100, node: 1}]"),
                        "--label-nodes")
    assert_agree(views, "DEGRADED", 17)
    result.stdout.re_match_lines([r"gpuconf:   DEGRADED h100-1 driver\.version-uniform-in-pool: .*",
                                  r"gpuconf: exit status 17: nothing failed, but something works below .*"])
    assert views.labels == {"h100-0": "pass", "h100-1": "degraded"}


def test_a_cordoned_node_leaves_the_run_incomplete(pytester, monkeypatch):
    views, result = run(pytester, monkeypatch, _profile(pytester.path, "[{id: node-cordoned, pool: h100, node: 1}]"),
                        "--label-nodes")
    assert_agree(views, "INCOMPLETE", 15)
    result.stdout.re_match_lines([r"gpuconf: 1 of 2 GPU nodes tested; 1 cordoned",
                                  r"gpuconf:   h100-1 not tested: h100-1 is cordoned .*"])
    # the skip lines fold the node's probe checks into one, naming it
    result.stdout.re_match_lines([r"SKIPPED \[\d+\] every probe check on h100-1: h100-1 is cordoned .*"])
    assert views.labels["h100-0"] == "pass" and views.labels["h100-1"] != "pass"


@pytest.mark.parametrize("selection, narrowed", [
    (("-m", "smoke"), r"-m 'smoke' deselected \d+ of \d+ checks"),
    (("-k", "vector_add"), r"-k 'vector_add' deselected \d+ of \d+ checks"),
], ids=["-m smoke", "-k"])
def test_a_narrowed_run_is_partial_and_signs_nothing_off(pytester, monkeypatch, selection, narrowed):
    views, result = run(pytester, monkeypatch, "healthy-h100", "--label-nodes", *selection)
    assert_agree(views, "PARTIAL", 18)
    assert views.md_headline.startswith("Not a sign-off: the run selected part of the sign-off's scope")
    assert "handed over" not in views.md_headline
    result.stdout.re_match_lines([r"gpuconf: not labelled: h100-0, h100-1: a partial run .*",
                                  rf"gpuconf: scope: {narrowed}"])
    assert views.labels == {"h100-0": None, "h100-1": None}
    doc = json.loads((pytester.path / "reports" / "report.json").read_text())
    scope = doc["extra"]["gpuconf"]["scope"]
    assert scope["full"] is False and re.fullmatch(narrowed, scope["narrowed"][0])
    ran = doc["extra"]["gpuconf"]["checks_by_node"]["h100-0"]
    assert "smoke.vector-add-every-gpu" in ran["ran"] and "inventory.gpu-count-matches-expected" not in ran["ran"]


def test_a_partial_run_labels_the_nodes_it_saw_fail(pytester, monkeypatch):
    views, _ = run(pytester, monkeypatch, _profile(pytester.path, "[{id: gpu-lost, pool: h100, node: 0, gpu: 3}]"),
                   "--label-nodes", "-m", "inventory")
    assert_agree(views, "FAIL", 1)
    assert views.labels == {"h100-0": "fail", "h100-1": None}


def test_a_suite_subset_is_partial(pytester, monkeypatch):
    shutil.copytree(ROOT / "suites", pytester.path / "suites", ignore=shutil.ignore_patterns("__pycache__"))
    reports = pytester.path / "reports"
    result = pytest_subprocess(pytester, "suites/test_smoke.py", "suites/test_inventory.py", "-p", "gpuconf.plugin",
                               "--simulate", "healthy-h100", "--report-dir", str(reports), "-p", "no:cacheprovider")
    views = signoff_views(result.ret, result.stdout.str(), reports)
    assert_agree(views, "PARTIAL", 18)
    result.stdout.re_match_lines([r"gpuconf: scope: 13 of 15 suites not collected: bandwidth, compat, .*"])


def test_the_record_survives_report_json_and_the_merge_reader():
    """What a check knows travels as data: report.json written and read back (as `report merge` and
    `report diff` read it) gives the same record, the run's scope and the cluster's version."""
    from gpuconf.report.merge import read_run
    from gpuconf.report.model import CheckResult, Record, RunRecord
    from gpuconf.report.writers import ctrf_document

    results = [
        CheckResult("expect.node-matches-pool", "h100-0", "pass", "suites/test_expect.py::t[h100-0]",
                    record=Record("matches pool 'h100' on 3 declared fields", ("runtime.mode: not observed",))),
        CheckResult("smoke.vector-add-every-gpu", "h100-1", "fail", "suites/test_smoke.py::t[h100-1]",
                    message="smoke... on h100-1: CUDA could not start", record=Record(
                        "CUDA could not start", (), ("cudaErrorUnknown (999)",), "load nvidia_uvm")),
        CheckResult("mig.layout-matches-config", "h100-0", "not-tested", "suites/test_mig.py::t[h100-0]",
                    record=Record("h100-0 has no GPU with MIG enabled", kind="not-applicable")),
        CheckResult("sharing.replicas-match-config", "h100-1", "not-tested", "suites/test_sharing.py::t[h100-1]",
                    record=Record("blocked by smoke", kind="blocked", blocked_by="smoke.vector-add-every-gpu")),
    ]
    scope = {"selection": {"suites": ["test_smoke"], "markexpr": "smoke"}, "full": False,
             "narrowed": ["-m 'smoke' deselected 121 of 123 checks"], "tiers": []}
    run = RunRecord("simulated:healthy-h100", 1.0, 2.0, 1, scope=scope, server_version="v1.34.0")
    back_run, back = read_run(json.loads(json.dumps(ctrf_document(run, results))), source="report.json")
    assert [r.record for r in back] == [r.record for r in results]
    assert [r.kind for r in back] == [None, None, "not-applicable", "blocked"]
    assert back_run.scope == scope and back_run.partial and back_run.server_version == "v1.34.0"


def _in_a_terminal(args: list[str], cwd: Path) -> str:
    """`python -m pytest ARGS` with a pseudo-terminal as its stdout and stderr: what a user at a
    terminal sees, carriage returns included."""
    import os
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=cwd, stdin=subprocess.DEVNULL,
                               stdout=follower, stderr=follower, env={**os.environ, "COLUMNS": "120"})
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the run ended
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=300)
    os.close(leader)
    return b"".join(chunks).decode(errors="replace")


def test_a_terminal_shows_a_waiting_campaign_and_a_log_does_not(tmp_path):
    args = ["suites/test_smoke.py", "-p", "no:hypothesispytest", "--simulate", "healthy-h100", "--report-dir",
            str(tmp_path / "r"), "-p", "no:cacheprovider"]
    shown = _in_a_terminal(args, ROOT)
    waiting = r"\r\S*suites/test_smoke.py  \[2 probe pods: \d pending, \d running, \d done; \d+ s\]"
    assert re.search(waiting, shown), shown
    assert "gpuconf sign-off" in shown  # the closing block is there as without a terminal
    quiet = _in_a_terminal([*args, "-q"], ROOT)
    assert "probe pods:" not in quiet and "gpuconf: exit status 18: " in quiet
    import forked

    logged = forked.run_pytest(args, cwd=ROOT, timeout=300)
    assert "probe pods:" not in logged.stdout + logged.stderr and "gpuconf: exit status 18: " in logged.stdout


def test_a_pass_with_caveats_shows_them_in_every_report(tmp_path):
    """expect.node-matches-pool passes on the fields it could observe and says which it could not: the
    caveat is in report.json's record, report.md and report.html, not lost on the way."""
    import forked

    reports = tmp_path / "r"
    done = forked.run_pytest(["suites/test_expect.py", "-p", "no:hypothesispytest", "--simulate", "healthy-h100",
                              "--expect", "examples/expect/healthy-h100.yaml", "--report-dir", str(reports),
                              "-p", "no:cacheprovider"], cwd=ROOT, timeout=300)
    assert done.returncode == 18, done.stdout  # the expect suite alone: PARTIAL
    caveat = "runtime.mode: not observed on this node"
    doc = json.loads((reports / "report.json").read_text())
    test = next(t for t in doc["results"]["tests"] if t["extra"]["check"] == "expect.node-matches-pool"
                and t["extra"]["node"] == "h100-0")
    assert test["extra"]["outcome"] == "pass" and caveat in test["extra"]["not_judged"]
    assert test["extra"]["summary"].startswith("matches pool 'h100' on ")
    md = (reports / "report.md").read_text()
    assert "## Passed with caveats" in md
    assert re.search(r"^- `expect\.node-matches-pool` on h100-0: .*runtime\.mode: not observed on this node", md, re.M)
    html = (reports / "report.html").read_text()
    assert re.search(r'<li data-node="h100-0"><code>expect\.node-matches-pool</code> on h100-0: [^<]*'
                     + re.escape(caveat), html)


def assert_not_started(views: Views, status: int, line: str) -> None:
    """A run that could not start: one line says why, its exit status, and every report says NOT STARTED
    with the same reason (no closing block: no check ran)."""
    assert views.exit_status == status, views
    assert views.terminal is None and line in views.last_line, views.last_line
    assert (views.json_verdict, views.junit, views.md, views.html) == ("NOT STARTED",) * 4, views
    assert views.json_exit == status and line.removeprefix("gpuconf: ") in (views.md_headline or ""), views


def test_no_cluster_is_one_line_and_exit_10_never_a_green_run(pytester, monkeypatch):
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(pytester.path / "home"))  # no ~/.kube/config
    shutil.copytree(ROOT / "suites", pytester.path / "suites", ignore=shutil.ignore_patterns("__pycache__"))
    reports = pytester.path / "reports"
    result = pytest_subprocess(pytester, "suites", "-p", "gpuconf.plugin", "--report-dir", str(reports),
                               "-p", "no:cacheprovider")
    views = signoff_views(result.ret, result.stdout.str() + "\n" + result.stderr.str(), reports)
    assert_not_started(views, 10, "gpuconf: no cluster to test: give --kubeconfig PATH or --simulate PROFILE")


def test_a_preview_never_writes_over_the_last_sign_off(pytester, monkeypatch):
    views, _ = run(pytester, monkeypatch, "healthy-h100")
    assert_agree(views, "PASS", 0)
    reports = pytester.path / "reports"
    before = {p: p.read_bytes() for p in reports.rglob("*") if p.is_file()}
    preview = pytest_subprocess(pytester, "suites", "-p", "gpuconf.plugin", "--simulate", "healthy-h100",
                                "--report-dir", str(reports), "-p", "no:cacheprovider", "--collect-only", "-q")
    assert preview.ret == 0
    preview.stdout.fnmatch_lines(["gpuconf: no reports written: --collect-only previews a run, it is not one*"])
    assert {p: p.read_bytes() for p in reports.rglob("*") if p.is_file()} == before


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from serving import serve

    with serve(tmp_path_factory.mktemp("served"), "healthy-h100") as cluster:
        yield cluster


def test_kubeconfig_from_the_environment_is_the_cluster_and_the_reports_say_so(served, tmp_path):
    import os

    import forked

    reports = tmp_path / "r"
    env = {k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")}
    env.update(KUBECONFIG=str(served.kubeconfig), HOME=str(tmp_path / "home"))
    done = forked.run_pytest(["suites/", "-p", "no:hypothesispytest", "--report-dir", str(reports), "-q",
                              "-p", "no:cacheprovider"], cwd=ROOT, env=env, timeout=300)
    views = signoff_views(done.returncode, done.stdout + "\n" + done.stderr, reports)
    assert_agree(views, "PASS", 0)
    provenance = json.loads((reports / "report.json").read_text())["extra"]["gpuconf"]["provenance"]
    assert provenance == f"kubeconfig:$KUBECONFIG={served.kubeconfig}"


def test_a_busy_namespace_is_refused_in_one_line_everywhere(served, pytester):
    from datetime import UTC, datetime

    from kubernetes import client, config

    from gpuconf.cluster.campaign import make_run_lease

    with config.new_client_from_config(config_file=str(served.kubeconfig)) as api:
        client.CoreV1Api(api).create_namespace({"metadata": {"name": "contract-shared"}})
        client.CoordinationV1Api(api).create_namespaced_lease("contract-shared", make_run_lease(
            "20261207-100000-cafe", "contract-shared", interval_s=10, now=datetime.now(UTC)))
    shutil.copytree(ROOT / "suites", pytester.path / "suites", ignore=shutil.ignore_patterns("__pycache__"))
    reports = pytester.path / "reports"
    result = pytest_subprocess(pytester, "suites", "-p", "gpuconf.plugin", "--kubeconfig", str(served.kubeconfig),
                               "--namespace", "contract-shared", "--report-dir", str(reports), "-p",
                               "no:cacheprovider", timeout=120)
    views = signoff_views(result.ret, result.stdout.str() + "\n" + result.stderr.str(), reports)
    assert_not_started(views, 16, "gpuconf: --namespace contract-shared is in use by gpuconf run 20261207-100000-cafe")


# -- sharded runs: the merge is the sign-off, saying what one run would (tests/test_shards.py pins the
# merged verdicts against the unsharded run's; here, that every view of the merge agrees) -------------


def _merge(*argv: str | Path) -> tuple[int, str, str]:
    import io

    from gpuconf.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = main(["report", "merge", *map(str, argv)], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _shard(kubeconfig: Path, where: Path, index: int, count: int, *options: str) -> Path:
    import forked

    reports = where / f"shard-{index}"
    done = forked.run_pytest(["suites/", "-p", "no:hypothesispytest", "--kubeconfig", str(kubeconfig),
                              "--shard", f"{index}/{count}", "--shard-run", "contract", "--report-dir", str(reports),
                              "-q", "-p", "no:cacheprovider", *options], cwd=ROOT, timeout=600)
    assert (reports / "report.json").exists(), done.stdout + done.stderr
    return reports


def merged_views(code: int, out: str, err: str, merged: Path) -> Views:
    return signoff_views(code, "gpuconf sign-off\n" + out + err, merged)


@pytest.fixture(scope="module")
def multi_pool(tmp_path_factory):
    from serving import serve

    base = tmp_path_factory.mktemp("multi-pool")
    with serve(base / "serve", "multi-pool") as cluster:
        shards = [_shard(cluster.kubeconfig, base, i, 3) for i in range(3)]
        yield cluster, base, shards


def test_three_shards_merge_into_one_sign_off(multi_pool, tmp_path):
    _, _, shards = multi_pool
    code, out, err = _merge(*shards, "--out", tmp_path / "merged")
    views = merged_views(code, out, err, tmp_path / "merged")
    assert_agree(views, "PASS", 0)
    assert out.startswith("merged 3 of 3 shards of run contract into ")
    assert "gpuconf: 7 of 7 GPU nodes tested\n" in out


def test_a_missing_shard_is_refused_or_named_not_tested(multi_pool, tmp_path):
    _, _, shards = multi_pool
    code, out, err = _merge(shards[0], shards[2], "--out", tmp_path / "refused")
    assert (code, out) == (2, "") and err.count("\n") == 1 and "shard 1" in err, err
    assert not (tmp_path / "refused").exists() or not any((tmp_path / "refused").iterdir())
    code, out, err = _merge(shards[0], shards[2], "--allow-missing", "--out", tmp_path / "merged")
    views = merged_views(code, out, err, tmp_path / "merged")
    assert_agree(views, "INCOMPLETE", 15)
    assert re.search(r"gpuconf: \d of 7 GPU nodes tested; \d in a missing shard", out), out


def test_a_shard_that_ran_other_markers_is_refused(multi_pool, tmp_path):
    cluster, base, shards = multi_pool
    other = _shard(cluster.kubeconfig, base / "other", 1, 3, "-m", "security")
    code, out, err = _merge(shards[0], other, shards[2], "--out", tmp_path / "merged")
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert "shard 1 ran markexpr security, shard 0 ran no markexpr" in err


def test_a_pool_cut_across_shards_is_judged_whole(tmp_path):
    """healthy-h100 with driver-skew on h100-1, as 2 shards merged: DEGRADED, as the unsharded run."""
    from serving import serve

    profile = _profile(tmp_path, "[{id: driver-skew, pool: h100, node: 1}]")
    with serve(tmp_path / "serve", profile) as cluster:
        shards = [_shard(cluster.kubeconfig, tmp_path, i, 2) for i in range(2)]
    code, out, err = _merge(*shards, "--out", tmp_path / "merged")
    views = merged_views(code, out, err, tmp_path / "merged")
    assert_agree(views, "DEGRADED", 17)
    assert "gpuconf:   DEGRADED h100-1 driver.version-uniform-in-pool: " in out


def test_the_short_summary_names_what_matters_and_counts_the_rest(pytester, monkeypatch):
    """pytest's skip lines (-ra) name the check and node; what does not apply or was not asked for is
    counted in one line, not listed (a healthy run had 25-87 lines naming an internal helper)."""
    views, result = run(pytester, monkeypatch, _profile(pytester.path, "[{id: node-cordoned, pool: h100, node: 1}]"))
    assert_agree(views, "INCOMPLETE", 15)
    out = result.stdout.str()
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED [")]
    assert skipped and not any("gpuconf/kit/" in line or ".py:" in line for line in skipped), skipped
    assert len(skipped) < 10, skipped
    result.stdout.re_match_lines([r"\(\d+ skipped as not applicable here or not asked for: the reports list them\)"])
