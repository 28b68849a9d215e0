"""``gpuconf results list|fetch``: the reader script, the framing, the safe extraction, and the
whole path against a simulated cluster.

The simulated node agents cannot mount a PVC or run the script; they print a pod's
``gpuconf.io/sim-logs`` annotation as its output. So the script is run here, with this
interpreter, against a directory laid out as the runner lays out the volume, and what it printed
becomes the reader pod's annotation: the simulated pod's log stands for the real pod's output.
"""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuconf.cli import main
from gpuconf.cli import results as results_cli
from gpuconf.cluster import Cluster, campaign, connect
from gpuconf.cluster import results as results_mod
from gpuconf.cluster.results import (
    FRAME,
    ResultsError,
    decode_output,
    encode_archive,
    fetch_run,
    list_runs,
    make_archive,
    make_reader_pod,
    parse_listing,
    safe_extract,
    validate_run_name,
)
from gpuconf.rbac import ApiRequest, load_manifests, load_policy, missing, unused_grants
from gpuconf.sim.agent_pods import ANNOTATION_EXIT_CODE, ANNOTATION_LOGS
from gpuconf.sim.cluster import SimulatedCluster
from gpuconf.sim.resources import ResourceType

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "manifests" / "runner"
USER_AGENT = "gpuconf-results-test"

META: dict[str, Any] = {"run_id": "20261201-030000-abcd", "started": "2026-12-01T03:00:00Z",
                        "finished": "2026-12-01T03:10:00Z", "exit_status": 1, "interrupted": False, "error": None,
                        "nodes": {"h100-0": "fail", "h100-1": "pass", "(cluster)": "pass"}}
REPORT: dict[str, Any] = {"results": {"summary": {"tests": 4, "passed": 3, "failed": 1, "skipped": 0}},
                          "extra": {"gpuconf": META}}


@pytest.fixture
def volume(tmp_path: Path) -> Path:
    """The results volume as two runs left it: an older one, and the newest with CNCF evidence."""
    root = tmp_path / "volume"
    old = root / "gpuconf-nightly-29000000-aaaaa"
    old.mkdir(parents=True)
    (old / "report.json").write_text(json.dumps({**REPORT, "extra": {"gpuconf": {
        **META, "exit_status": 0, "nodes": {"h100-0": "pass"}}}}))
    new = root / "gpuconf-x7k2p"
    (new / "cncf").mkdir(parents=True)
    (new / "report.json").write_text(json.dumps(REPORT))
    (new / "report.md").write_text("# gpuconf\n")
    (new / "report.html").write_text("<html></html>\n")
    (new / "junit.xml").write_text("<testsuites/>\n")
    (new / "cncf" / "e2e.log").write_text("e2e\n")
    os.utime(old / "report.json", (1_700_000_000, 1_700_000_000))
    os.utime(new / "report.json", (1_800_000_000, 1_800_000_000))
    return root


def reader(mode: str, root: Path, run: str = "latest", limit: int = 1 << 20) -> tuple[int, str]:
    """The reader pod's command, run here: (exit code, stdout)."""
    pod = make_reader_pod("p", mode=mode, run=run, max_bytes=limit)
    [container] = pod["spec"]["containers"]
    assert container["command"][:2] == ["python", "-c"]
    args = [root if a == results_mod.MOUNT_PATH else a for a in container["args"]]
    done = subprocess.run([sys.executable, *container["command"][1:], *map(str, args)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert not done.stderr, done.stderr
    return done.returncode, done.stdout


def tar_of(*members: tarfile.TarInfo) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for m in members:
            tar.addfile(m, io.BytesIO(b"x" * m.size) if m.isfile() else None)
    return buffer.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, size: int = 1, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.linkname = kind, size if kind == tarfile.REGTYPE else 0, link
    return info


# -------------------------------------------------------------------------------------------------
# Pure: names, framing, extraction


@pytest.mark.parametrize("name", ["latest", "gpuconf-x7k2p", "gpuconf-nightly-29000000-aaaaa"])
def test_run_names_are_pod_names_or_latest(name: str) -> None:
    assert validate_run_name(name) == name


@pytest.mark.parametrize("name", ["", "../etc", "/etc", "a/b", "Upper", "-x", "x" * 254])
def test_anything_else_is_not_a_run_name(name: str) -> None:
    with pytest.raises(ValueError, match="not a run name"):
        validate_run_name(name)


def test_the_archive_survives_the_round_trip(tmp_path: Path) -> None:
    files = {"report.json": b"{}", "cncf/e2e.log": b"line\n" * 1000, "report.html": bytes(range(256))}
    data = make_archive(files)
    text = encode_archive("gpuconf-x7k2p", data)
    assert all(len(line) <= 76 for line in text.splitlines() if not line.startswith(FRAME))
    archive = decode_output("kubelet noise\n" + text)
    assert (archive.run, archive.data) == ("gpuconf-x7k2p", data)
    assert safe_extract(archive.data, tmp_path / "out") == sorted(files)
    assert {p: (tmp_path / "out" / p).read_bytes() for p in files} == files


def test_damaged_output_is_refused() -> None:
    text = encode_archive("r", make_archive({"a": b"hello" * 100}))
    lines = text.splitlines()
    flipped = lines[1][:-1] + ("A" if lines[1][-1] != "A" else "B")
    with pytest.raises(ResultsError, match="does not match its size and SHA-256"):
        decode_output("\n".join([lines[0], flipped, *lines[2:]]))
    with pytest.raises(ResultsError, match="cut short"):
        decode_output("\n".join(lines[:-1]))
    with pytest.raises(ResultsError, match="not base64"):
        decode_output("\n".join([lines[0], "!!!", *lines[1:]]))
    with pytest.raises(ResultsError, match="no archive"):
        decode_output("nothing\n")


@pytest.mark.parametrize("bad, why", [
    (member("../x"), "leaves the directory"),
    (member("a/../../x"), "leaves the directory"),
    (member("/etc/x"), "an absolute path"),
    (member("evil", tarfile.SYMTYPE, link="/etc/passwd"), "not a regular file or directory"),
    (member("hard", tarfile.LNKTYPE, link="report.json"), "not a regular file or directory"),
    (member("dev", tarfile.CHRTYPE), "not a regular file or directory"),
])
def test_unsafe_members_are_refused_before_anything_is_written(tmp_path: Path, bad: tarfile.TarInfo,
                                                               why: str) -> None:
    data = tar_of(member("report.json"), bad)
    with pytest.raises(ResultsError, match=why) as caught:
        safe_extract(data, tmp_path / "out")
    assert caught.value.kind == "unsafe"
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "x").exists()


def test_an_archive_that_expands_too_far_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="expands to 2000 bytes, over 1000") as caught:
        safe_extract(tar_of(member("a", size=1000), member("b", size=1000)), tmp_path / "out", max_total=1000)
    assert caught.value.kind == "too-large"


def test_an_existing_link_out_of_the_directory_is_not_followed(tmp_path: Path) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "cncf").symlink_to(elsewhere)
    with pytest.raises(ResultsError, match="leaves"):
        safe_extract(make_archive({"cncf/e2e.log": b"x"}), out)
    assert list(elsewhere.iterdir()) == []


# -------------------------------------------------------------------------------------------------
# Pure: the reader pod and its script


def test_the_reader_pod_is_read_only_restricted_and_tokenless() -> None:
    pod = make_reader_pod("gpuconf-results-fetch-1", mode="fetch", pvc="vol", run="gpuconf-x7k2p",
                          image="registry.local/gpuconf-runner:0.1.0", max_bytes=8 << 20)
    spec = pod["spec"]
    [container] = spec["containers"]
    assert container["args"] == ["fetch", "/results", "gpuconf-x7k2p", str((8 << 20) - 4096)]
    assert container["image"] == "registry.local/gpuconf-runner:0.1.0"
    assert container["volumeMounts"] == [{"name": "results", "mountPath": "/results", "readOnly": True}]
    assert spec["volumes"] == [{"name": "results", "persistentVolumeClaim": {"claimName": "vol", "readOnly": True}}]
    assert spec["automountServiceAccountToken"] is False and spec["restartPolicy"] == "Never"
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
                                            "seccompProfile": {"type": "RuntimeDefault"}}
    assert set(container["resources"]["limits"]) == {"memory"}
    with pytest.raises(ValueError, match="list or fetch"):
        make_reader_pod("p", mode="exec")


def test_the_cli_defaults_are_the_library_s() -> None:
    assert results_cli.DEFAULT_NAMESPACE == results_mod.DEFAULT_NAMESPACE
    assert results_cli.DEFAULT_PVC == results_mod.DEFAULT_PVC
    assert results_cli.RUNNER_IMAGE == results_mod.RUNNER_IMAGE
    assert results_cli.DEFAULT_MAX_MIB * 2**20 == results_mod.DEFAULT_MAX_BYTES


def test_the_script_lists_the_runs_newest_first_with_their_verdicts(volume: Path) -> None:
    code, out = reader("list", volume)
    assert code == 0
    runs = parse_listing(out)
    assert [r.name for r in runs] == ["gpuconf-x7k2p", "gpuconf-nightly-29000000-aaaaa"]
    assert runs[0].files == ("cncf", "junit.xml", "report.html", "report.json", "report.md")
    assert (runs[0].verdict, dict(runs[0].verdicts)) == ("fail", {"fail": 1, "pass": 2})
    assert runs[0].report is not None and runs[0].report["exit_status"] == 1
    assert runs[1].verdict == "pass"


def test_the_script_sends_the_latest_run_whole(volume: Path, tmp_path: Path) -> None:
    code, out = reader("fetch", volume)
    assert code == 0
    archive = decode_output(out)
    assert archive.run == "gpuconf-x7k2p"
    files = safe_extract(archive.data, tmp_path / "out")
    assert files == ["cncf/e2e.log", "junit.xml", "report.html", "report.json", "report.md"]
    assert json.loads((tmp_path / "out" / "report.json").read_text()) == REPORT


def test_the_script_skips_links_on_the_volume(volume: Path, tmp_path: Path) -> None:
    (volume / "gpuconf-x7k2p" / "passwd").symlink_to("/etc/passwd")
    code, out = reader("fetch", volume, "gpuconf-x7k2p")
    assert code == 0
    assert "passwd" not in safe_extract(decode_output(out).data, tmp_path / "out")


def test_the_script_names_what_is_wrong(volume: Path, tmp_path: Path) -> None:
    code, out = reader("fetch", volume, "gpuconf-nope")
    assert code == 2
    with pytest.raises(ResultsError, match=r"no run gpuconf-nope on the volume \(it has: "
                                           r"gpuconf-nightly-29000000-aaaaa, gpuconf-x7k2p\)") as caught:
        decode_output(out)
    assert caught.value.kind == "no-run"
    code, out = reader("fetch", volume, "gpuconf-x7k2p", limit=4096 + 100)
    assert code == 4
    with pytest.raises(ResultsError, match="more than 75 bytes compressed.*raise it with --max-mib"):
        decode_output(out)
    (tmp_path / "empty").mkdir()
    code, out = reader("fetch", tmp_path / "empty")
    assert code == 2
    with pytest.raises(ResultsError, match="the volume holds no runs"):
        decode_output(out)
    assert parse_listing(reader("list", tmp_path / "empty")[1]) == []


# -------------------------------------------------------------------------------------------------
# Against a simulated cluster

PVC_TYPE = ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, has_status=True)


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimulatedCluster, Path]]:
    """A simulated cluster with the runner's namespace and its results PVC (the simulated API server
    does not ship PersistentVolumeClaims: the type is registered here, as a real cluster serves it)."""
    with SimulatedCluster("healthy-h100") as cluster:
        store = cluster.server.store
        store.table.register([PVC_TYPE])
        store.create("namespaces", {"metadata": {"name": "gpuconf"}})
        [pvc] = [d for d in load_manifests(RUNNER) if d["kind"] == "PersistentVolumeClaim"]
        store.create("persistentvolumeclaims", pvc)
        yield cluster, cluster.write_kubeconfig(tmp_path_factory.mktemp("results") / "kubeconfig")


@pytest.fixture
def requests(sim: tuple[SimulatedCluster, Path]) -> Iterator[list[ApiRequest]]:
    """The resource requests the command's client makes (told apart from the node agents' by User-Agent)."""
    seen: list[ApiRequest] = []

    def observe(info: Any, user_agent: str | None) -> None:
        if user_agent == USER_AGENT and info.resource:
            seen.append(ApiRequest(info.verb, info.group, info.resource, info.subresource, info.namespace,
                                   info.name))

    observers = sim[0].server.request_observers
    observers.append(observe)
    yield seen
    observers.remove(observe)


def client(kubeconfig: Path) -> Cluster:
    cluster = connect(kubeconfig)
    cluster.api_client.user_agent = USER_AGENT
    return cluster


def pods_left(sim: SimulatedCluster) -> list[str]:
    """Reader pods not deleted (a running pod's deletion is graceful: marked now, gone once its kubelet
    confirms, so a deletionTimestamp counts as deleted)."""
    return [str(p["metadata"]["name"]) for p in sim.server.store.list("pods", namespace="gpuconf").items
            if not p["metadata"].get("deletionTimestamp")]


def simulate_output(monkeypatch: pytest.MonkeyPatch, output: str, exit_code: int = 0) -> list[dict[str, Any]]:
    """Give every reader pod ``output`` as what it prints (the script's real output, see the module
    docstring) and ``exit_code``; the pods made, for inspection."""
    made: list[dict[str, Any]] = []
    real = results_mod.make_reader_pod

    def annotated(*args: Any, **kwargs: Any) -> dict[str, Any]:
        pod = real(*args, **kwargs)
        pod["metadata"]["annotations"] = {ANNOTATION_LOGS: output, ANNOTATION_EXIT_CODE: str(exit_code)}
        made.append(pod)
        return pod

    monkeypatch.setattr(results_mod, "make_reader_pod", annotated)
    return made


def test_fetch_copies_the_run_and_deletes_the_reader_pod(sim: tuple[SimulatedCluster, Path], volume: Path,
                                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         requests: list[ApiRequest]) -> None:
    code, out = reader("fetch", volume, "gpuconf-x7k2p")
    made = simulate_output(monkeypatch, out, code)
    cluster = client(sim[1])
    try:
        fetched = fetch_run(cluster, "gpuconf-x7k2p", tmp_path / "out", timeout=60, handle_signals=False)
    finally:
        cluster.close()
    assert fetched.run == "gpuconf-x7k2p"
    assert list(fetched.files) == ["cncf/e2e.log", "junit.xml", "report.html", "report.json", "report.md"]
    assert (tmp_path / "out" / "cncf" / "e2e.log").read_text() == "e2e\n"
    [pod] = made
    assert pod["spec"]["containers"][0]["args"][:3] == ["fetch", "/results", "gpuconf-x7k2p"]
    assert pods_left(sim[0]) == []
    assert any(r.verb == "deletecollection" and r.resource == "pods" for r in requests)


def test_list_and_the_cli(sim: tuple[SimulatedCluster, Path], volume: Path, tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = reader("list", volume)
    simulate_output(monkeypatch, out, code)
    cluster = client(sim[1])
    try:
        runs = list_runs(cluster, timeout=60, handle_signals=False)
    finally:
        cluster.close()
    assert [(r.name, r.verdict) for r in runs] == [("gpuconf-x7k2p", "fail"), ("gpuconf-nightly-29000000-aaaaa",
                                                                                 "pass")]
    stdout, stderr = io.StringIO(), io.StringIO()
    assert main(["results", "list", "--kubeconfig", str(sim[1]), "--timeout", "60"], stdout=stdout,
                stderr=stderr) == 0, stderr.getvalue()
    lines = stdout.getvalue().splitlines()
    assert lines[0].split() == ["RUN", "FINISHED", "EXIT", "VERDICT", "NODES"]
    assert lines[1].split() == ["gpuconf-x7k2p", "2026-12-01T03:10:00Z", "1", "fail", "1", "fail,", "2", "pass"]
    assert pods_left(sim[0]) == []


def test_fetch_latest_through_the_cli(sim: tuple[SimulatedCluster, Path], volume: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = reader("fetch", volume)
    simulate_output(monkeypatch, out, code)
    stdout, stderr = io.StringIO(), io.StringIO()
    status = main(["results", "fetch", "--out", str(tmp_path / "last"), "--kubeconfig", str(sim[1]),
                   "--timeout", "60"], stdout=stdout, stderr=stderr)
    assert status == 0, stderr.getvalue()
    assert stdout.getvalue().startswith("run gpuconf-x7k2p: 5 files (")
    assert (tmp_path / "last" / "report.json").is_file()


@pytest.mark.parametrize("args, output_of, status, message", [
    (["fetch", "gpuconf-nope"], ("fetch", "gpuconf-nope"), 2, "no run gpuconf-nope on the volume"),
    (["fetch", "gpuconf-x7k2p", "--max-mib", "0.004"], ("fetch", "gpuconf-x7k2p", 4096 + 64), 3,
     "more than 48 bytes compressed"),
    (["list", "--pvc", "other"], None, 13, "no PersistentVolumeClaim other in namespace gpuconf"),
    (["list", "--namespace", "elsewhere"], None, 13, "no PersistentVolumeClaim gpuconf-results in namespace "
                                                     "elsewhere"),
])
def test_errors_are_one_line_with_their_status(sim: tuple[SimulatedCluster, Path], volume: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch, args: list[str],
                                               output_of: tuple[Any, ...] | None, status: int, message: str) -> None:
    if output_of is not None:
        code, out = reader(output_of[0], volume, *output_of[1:])
        simulate_output(monkeypatch, out, code)
    extra = ["--out", str(tmp_path / "o")] if args[0] == "fetch" else []
    stdout, stderr = io.StringIO(), io.StringIO()
    got = main(["results", *args, *extra, "--kubeconfig", str(sim[1]), "--timeout", "60"], stdout=stdout,
               stderr=stderr)
    assert (got, len(stderr.getvalue().splitlines())) == (status, 1), stderr.getvalue()
    assert message in stderr.getvalue()
    assert pods_left(sim[0]) == []


def test_a_truncated_log_is_over_the_limit(sim: tuple[SimulatedCluster, Path], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """An output longer than the limit (a reader that ignored it) is cut by the API server: refused whole."""
    data = make_archive({"report.html": random.Random(0).randbytes(20_000)})  # incompressible
    assert len(encode_archive("gpuconf-x7k2p", data)) > 8192
    simulate_output(monkeypatch, encode_archive("gpuconf-x7k2p", data))
    cluster = client(sim[1])
    try:
        with pytest.raises(ResultsError, match="reached the limit of 8192 bytes") as caught:
            fetch_run(cluster, "latest", tmp_path / "o", max_bytes=8192, timeout=60, handle_signals=False)
    finally:
        cluster.close()
    assert caught.value.kind == "too-large"
    assert not (tmp_path / "o").exists()


def test_ctrl_c_while_following_deletes_the_reader_pod(sim: tuple[SimulatedCluster, Path], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C (KeyboardInterrupt, which the RunContext's SIGINT handler raises after its cleanup)
    while the pod runs: the registered cleanup deletes it on the way out."""
    made = simulate_output(monkeypatch, "")
    seen: list[str] = []

    def interrupt(*args: Any, **kwargs: Any) -> None:
        seen.extend(pods_left(sim[0]))
        raise KeyboardInterrupt

    monkeypatch.setattr(campaign, "_follow", interrupt)
    cluster = client(sim[1])
    try:
        with pytest.raises(KeyboardInterrupt):
            fetch_run(cluster, "latest", tmp_path / "o", timeout=60, handle_signals=False)
    finally:
        cluster.close()
    assert seen == [made[0]["metadata"]["name"]]
    assert pods_left(sim[0]) == []


def test_bad_input_and_no_cluster_never_reach_the_api(tmp_path: Path) -> None:
    stderr = io.StringIO()
    assert main(["results", "fetch", "../x", "--out", str(tmp_path)], stdout=io.StringIO(), stderr=stderr) == 2
    assert "not a run name" in stderr.getvalue()
    (tmp_path / "file").write_text("")
    stderr = io.StringIO()
    assert main(["results", "fetch", "--out", str(tmp_path / "file")], stdout=io.StringIO(), stderr=stderr) == 2
    assert "is not a directory" in stderr.getvalue()
    stderr = io.StringIO()
    assert main(["results", "list", "--kubeconfig", str(tmp_path / "missing")], stdout=io.StringIO(),
                stderr=stderr) == 10
    assert stderr.getvalue() == f"gpuconf results: kubeconfig {tmp_path / 'missing'}: no such file\n"


def test_the_reader_role_grants_exactly_what_the_command_uses(sim: tuple[SimulatedCluster, Path], volume: Path,
                                                              tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              requests: list[ApiRequest]) -> None:
    code, out = reader("fetch", volume)
    simulate_output(monkeypatch, out, code)
    cluster = client(sim[1])
    try:
        fetch_run(cluster, "latest", tmp_path / "out", timeout=60, handle_signals=False)
    finally:
        cluster.close()
    namespaced = [r for r in requests if r.namespace]
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "someone", "namespace": "gpuconf"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "gpuconf-results-reader"},
               "subjects": [{"kind": "ServiceAccount", "name": "someone", "namespace": "gpuconf"}]}
    policy = load_policy([*load_manifests(RUNNER), binding], account="someone", account_namespace="gpuconf")
    assert missing(policy, namespaced) == []
    assert [str(g) for g in unused_grants(policy, namespaced, {})] == []
    # Outside the namespace only what connecting does (the same check a suite run makes).
    assert {(r.verb, r.resource) for r in requests if not r.namespace} <= {("list", "nodes")}


def test_a_run_that_left_gpu_nodes_untested_is_listed_incomplete_with_its_coverage(
        sim: tuple[SimulatedCluster, Path], volume: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 25: a run whose nodes passed but that left a selected GPU node untested is not a PASS in
    the listing; its coverage line says what is missing."""
    from gpuconf.report.model import CORDONED, CheckResult, Coverage, RunRecord, UntestedNode
    from gpuconf.report.writers import write_json

    why = "h100-1 is cordoned (spec.unschedulable): give --include-cordoned to test it"
    record = RunRecord("kubeconfig:/k", 1_800_000_100.0, 1_800_000_200.0, 0, run_id="r-cov",
                       coverage=Coverage(("h100-0", "h100-1"), (UntestedNode("h100-1", CORDONED, why),)))
    report = write_json(record, [CheckResult("inventory.gpu-count", "h100-0", "pass", "t::x[h100-0]")],
                        volume / "gpuconf-cov12" / "report.json")
    os.utime(report, (1_900_000_000, 1_900_000_000))
    code, out = reader("list", volume)
    runs = parse_listing(out)
    assert (runs[0].name, runs[0].verdict, runs[0].coverage) == (
        "gpuconf-cov12", "incomplete", "1 of 2 GPU nodes tested; 1 cordoned")
    assert runs[0].report is not None and runs[0].report["coverage"] == {
        "selected": 2, "tested": 1, "line": "1 of 2 GPU nodes tested; 1 cordoned"}
    assert (runs[1].verdict, runs[1].coverage) == ("fail", None)  # a report without coverage, as before
    simulate_output(monkeypatch, out, code)
    stdout, stderr = io.StringIO(), io.StringIO()
    assert main(["results", "list", "--kubeconfig", str(sim[1]), "--timeout", "60"], stdout=stdout,
                stderr=stderr) == 0, stderr.getvalue()
    row = stdout.getvalue().splitlines()[1]
    assert row.split()[:4] == ["gpuconf-cov12", "2027-01-15T08:03:20Z", "0", "incomplete"]
    assert row.endswith("1 pass, 1 not-tested (1 of 2 GPU nodes tested; 1 cordoned)")


# -------------------------------------------------------------------------------------------------
# A sharded run (job-sharded.yaml): /results/<run>/shard-<index>/, one report each

SHARDED = "gpuconf-sharded-0f5c7a9e-3b1d-4c2e-9a6f-1e2d3c4b5a69"


def shard_report(nodes: dict[str, str], exit_status: int, finished: str) -> str:
    return json.dumps({**REPORT, "extra": {"gpuconf": {**META, "nodes": nodes, "exit_status": exit_status,
                                                       "finished": finished}}})


@pytest.fixture
def sharded(volume: Path) -> Path:
    """The volume with a sharded run after the older ones: shard 0 passed, shard 1 failed, shard 10
    passed (indexes sort as numbers), shard 2 has written no report yet."""
    run = volume / SHARDED
    for index, nodes, status, finished in ((0, {"h100-0": "pass", "(cluster)": "pass"}, 0, "2026-12-02T03:09:00Z"),
                                           (1, {"h100-1": "fail"}, 1, "2026-12-02T03:11:00Z"),
                                           (10, {"h100-10": "pass"}, 0, "2026-12-02T03:10:00Z")):
        (run / f"shard-{index}" / "cncf").mkdir(parents=True)
        (run / f"shard-{index}" / "report.json").write_text(shard_report(nodes, status, finished))
        (run / f"shard-{index}" / "cncf" / "e2e.log").write_text(f"e2e {index}\n")
        os.utime(run / f"shard-{index}" / "report.json", (1_900_000_000 + index, 1_900_000_000 + index))
    (run / "shard-2").mkdir()
    (run / "shard-2" / "junit.xml").write_text("<testsuites/>\n")
    return volume


def test_a_sharded_run_is_listed_once_with_its_shards_in_index_order(sharded: Path) -> None:
    code, out = reader("list", sharded)
    assert code == 0
    runs = parse_listing(out)
    assert [r.name for r in runs] == [SHARDED, "gpuconf-x7k2p", "gpuconf-nightly-29000000-aaaaa"]
    run = runs[0]
    assert run.report is None and run.mtime == 1_900_000_010  # its newest shard report
    assert [s.name for s in run.shards] == ["shard-0", "shard-1", "shard-2", "shard-10"]
    assert [s.verdict for s in run.shards] == ["pass", "fail", "no report.json", "pass"]
    assert (run.verdict, dict(run.verdicts)) == ("fail", {"pass": 3, "fail": 1})
    assert all(not r.shards for r in runs[1:])


@pytest.mark.parametrize("shards, verdict", [
    (["pass", "pass"], "pass"),
    (["pass", "degraded"], "degraded"),
    (["pass", "fail", None], "fail"),
    (["pass", None], "incomplete"),
    (["pass", "not started"], "incomplete"),
    (["not-tested", "not-tested"], "not-tested"),
], ids=["every shard passed", "a degraded shard degrades the run", "a failed shard fails it, whatever is missing",
        "a shard without its report leaves it incomplete", "a shard that did not start leaves it incomplete",
        "nothing tested in any shard"])
def test_a_sharded_run_s_verdict_is_its_shards_together(shards: list[str | None], verdict: str) -> None:
    def shard(index: int, node_verdict: str | None) -> results_mod.RunInfo:
        if node_verdict is None:
            return results_mod.RunInfo(f"shard-{index}", 0.0, ())
        if node_verdict == "not started":
            return results_mod.RunInfo(f"shard-{index}", 0.0, (), {"error": "unreachable", "verdicts": {}})
        return results_mod.RunInfo(f"shard-{index}", 0.0, (), {"verdicts": {node_verdict: 1}})

    run = results_mod.RunInfo(SHARDED, 0.0, (), shards=tuple(shard(i, v) for i, v in enumerate(shards)))
    assert run.verdict == verdict


def test_a_sharded_run_is_fetched_whole_each_shard_in_its_directory(sharded: Path, tmp_path: Path) -> None:
    code, out = reader("fetch", sharded, SHARDED)
    assert code == 0
    files = safe_extract(decode_output(out).data, tmp_path / "out")
    assert files == ["shard-0/cncf/e2e.log", "shard-0/report.json", "shard-1/cncf/e2e.log", "shard-1/report.json",
                     "shard-10/cncf/e2e.log", "shard-10/report.json", "shard-2/junit.xml"]
    assert (tmp_path / "out" / "shard-1" / "report.json").read_text() == (
        sharded / SHARDED / "shard-1" / "report.json").read_text()
    assert decode_output(reader("fetch", sharded)[1]).run == SHARDED  # the latest


def test_the_cli_lists_a_sharded_run_on_one_line(sim: tuple[SimulatedCluster, Path], sharded: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = reader("list", sharded)
    simulate_output(monkeypatch, out, code)
    stdout, stderr = io.StringIO(), io.StringIO()
    assert main(["results", "list", "--kubeconfig", str(sim[1]), "--timeout", "60"], stdout=stdout,
                stderr=stderr) == 0, stderr.getvalue()
    row = stdout.getvalue().splitlines()[1]
    assert row.split()[:4] == [SHARDED, "2026-12-02T03:11:00Z", "0,1,-,0", "fail"]
    assert row.endswith("1 fail, 3 pass; 4 shards: shard-0, shard-1, shard-2, shard-10")
    stdout = io.StringIO()
    assert main(["results", "list", "--json", "--kubeconfig", str(sim[1]), "--timeout", "60"], stdout=stdout,
                stderr=stderr) == 0, stderr.getvalue()
    [run, *others] = json.loads(stdout.getvalue())
    assert [(s["run"], s["verdict"]) for s in run["shards"]] == [
        ("shard-0", "pass"), ("shard-1", "fail"), ("shard-2", "no report.json"), ("shard-10", "pass")]
    assert all(o["shards"] == [] for o in others)
