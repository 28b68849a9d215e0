"""manifest.json and ``gpuconf report verify``: every run lists what it wrote in its report directory
(and its CNCF evidence directory), last; verify passes on a fresh run and names the file after one
byte of a report changes, a file goes or a file is added; bad input is one line and exit 2."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import forked
import jsonschema
import pytest
from serving import NO_HYPOTHESIS, in_parallel
from test_cluster_access import kubeconfig_for

from gpuconf.cli import main
from gpuconf.report.manifest import MANIFEST, SCHEMA_ID, changed_files, snapshot

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "gpuconf" / "data" / "schemas" / "manifest.schema.json").read_text())
REPORTS = ["junit.xml", "report.html", "report.json", "report.md"]

#: A suite stopped by Ctrl-C after its first test.
INTERRUPTED_TESTS = "def test_first(gpu_node):\n    pass\n\n\ndef test_ctrl_c():\n    raise KeyboardInterrupt\n"


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["report", "verify", *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _manifest(directory: Path) -> dict[str, Any]:
    return dict(json.loads((directory / MANIFEST).read_text()))


def _files(directory: Path) -> list[str]:
    """Every file under ``directory`` but the manifest, relative, sorted."""
    return sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*")
                  if p.is_file() and p.name != MANIFEST)


def _run(where: Path, *args: str) -> Any:
    return forked.run_pytest([*NO_HYPOTHESIS, "-p", "gpuconf.plugin", "-q", "-p", "no:cacheprovider", *args],
                             cwd=where, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}, timeout=300)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    """Each kind of run once, by kind: (its report directory, the finished process). A healthy run
    with its CNCF evidence elsewhere, one with the evidence inside its report directory, one stopped
    by Ctrl-C, one whose API server cannot be reached, and one into a directory an earlier run left a
    file in."""
    base = tmp_path_factory.mktemp("manifest")
    (base / "test_inventory.py").write_text((ROOT / "suites" / "test_inventory.py").read_text())
    stop = tmp_path_factory.mktemp("stop")
    (stop / "test_stop.py").write_text(INTERRUPTED_TESTS)
    stale = base / "stale"
    stale.mkdir()
    (stale / "old-notes.txt").write_text("left by an earlier run\n")
    (stale / "report.md").write_text("an earlier run's summary\n")
    unreachable = kubeconfig_for("http://127.0.0.1:9", base / "unreachable.kubeconfig")
    jobs: dict[str, tuple[Path, Path, tuple[str, ...], int]] = {
        "healthy": (base, base / "healthy", ("test_inventory.py", "--simulate", "healthy-h100",
                                             "--cncf-evidence", str(base / "evidence")), 0),
        "nested": (base, base / "nested", ("test_inventory.py", "--simulate", "healthy-h100",
                                           "--cncf-evidence", str(base / "nested" / "cncf")), 0),
        "interrupted": (stop, base / "interrupted", ("--simulate", "healthy-h100"), 2),
        "unreachable": (base, base / "unreachable", ("test_inventory.py", "--kubeconfig", str(unreachable)), 11),
        "stale": (base, stale, ("test_inventory.py", "--simulate", "healthy-h100"), 0),
    }
    done = in_parallel({kind: (lambda where=where, out=out, args=args: _run(where, *args, "--report-dir", str(out)))
                        for kind, (where, out, args, _) in jobs.items()})
    for kind, (_, _, _, status) in jobs.items():
        assert done[kind].returncode == status, f"{kind}: {(done[kind].stdout + done[kind].stderr)[-3000:]}"
    return {kind: (out, done[kind]) for kind, (_, out, _, _) in jobs.items()}


@pytest.fixture
def healthy_copy(runs: dict[str, tuple[Path, Any]], tmp_path: Path) -> Path:
    """The healthy run's report directory, copied (a test may alter it)."""
    return Path(shutil.copytree(runs["healthy"][0], tmp_path / "reports"))


# -- what a run writes ----------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["healthy", "nested", "interrupted", "unreachable", "stale"])
def test_every_kind_of_run_writes_a_manifest_that_verifies(runs: dict[str, tuple[Path, Any]], kind: str) -> None:
    out, _ = runs[kind]
    doc = _manifest(out)
    jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(doc)
    assert doc["schema"] == SCHEMA_ID
    assert {"junit.xml", "report.json", "report.md", "report.html"} <= {f["path"] for f in doc["files"]}
    report = json.loads((out / "report.json").read_text())["extra"]["gpuconf"]
    assert (doc["run_id"], doc["exit_status"], doc["cluster"]["provenance"]) == (
        report["run_id"], report["exit_status"], report["provenance"])
    if kind != "stale":
        code, stdout, stderr = _cli(str(out))
        assert (code, stderr) == (0, ""), stdout
        assert stdout == f"{len(doc['files'])} files verified in {out} against its manifest.json (run " \
            f"{doc['run_id'] or 'without a run id'}, gpuconf {doc['gpuconf_version']})\n"


def test_the_manifest_lists_every_file_of_the_run_with_its_size_and_hash_and_is_written_last(
        runs: dict[str, tuple[Path, Any]]) -> None:
    out, _ = runs["healthy"]
    doc = _manifest(out)
    assert [f["path"] for f in doc["files"]] == _files(out) == REPORTS
    import hashlib

    for entry in doc["files"]:
        data = (out / entry["path"]).read_bytes()
        assert (entry["size"], entry["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())
    last = max((out / f).stat().st_mtime_ns for f in REPORTS)
    assert (out / MANIFEST).stat().st_mtime_ns >= last  # after pytest's junit.xml, which it vouches for


def test_a_simulated_run_names_its_cluster_and_an_unreachable_one_does_not(runs: dict[str, tuple[Path, Any]]) -> None:
    import uuid

    healthy = _manifest(runs["healthy"][0])["cluster"]
    assert healthy["simulated"] is True and healthy["provenance"] == "simulated:healthy-h100"
    assert str(uuid.UUID(healthy["kube_system_uid"])) == healthy["kube_system_uid"]
    unreachable = _manifest(runs["unreachable"][0])
    kubeconfig = runs["unreachable"][0].parent / "unreachable.kubeconfig"
    assert unreachable["cluster"] == {"provenance": f"kubeconfig:{kubeconfig}", "simulated": False,
                                      "kube_system_uid": None}
    assert unreachable["run_id"] is None and unreachable["exit_status"] == 11


def test_evidence_outside_the_report_directory_gets_its_own_manifest(runs: dict[str, tuple[Path, Any]]) -> None:
    evidence = runs["healthy"][0].parent / "evidence"
    doc = _manifest(evidence)
    assert [f["path"] for f in doc["files"]] == _files(evidence) and doc["files"]
    assert doc["run_id"] == _manifest(runs["healthy"][0])["run_id"]
    code, stdout, _ = _cli(str(evidence))
    assert code == 0 and stdout.startswith(f"{len(doc['files'])} files verified in {evidence}")


def test_evidence_inside_the_report_directory_is_listed_in_the_report_s_manifest(
        runs: dict[str, tuple[Path, Any]]) -> None:
    out, _ = runs["nested"]
    assert not (out / "cncf" / MANIFEST).exists()
    listed = [f["path"] for f in _manifest(out)["files"]]
    assert listed == _files(out) and any(p.startswith("cncf/") for p in listed)


def test_an_earlier_run_s_file_is_not_claimed_and_the_run_says_so(runs: dict[str, tuple[Path, Any]]) -> None:
    out, process = runs["stale"]
    listed = [f["path"] for f in _manifest(out)["files"]]
    assert listed == REPORTS  # report.md rewritten by this run: listed; old-notes.txt: not this run's
    assert (f"gpuconf: {out} holds 1 file(s) this run did not write, left out of manifest.json (`gpuconf report "
            "verify` calls them unlisted): old-notes.txt") in process.stderr
    code, stdout, _ = _cli(str(out))
    assert code == 1 and "unlisted file old-notes.txt" in stdout


def test_snapshot_tells_written_from_left_files(tmp_path: Path) -> None:
    (tmp_path / "kept").write_text("a")
    (tmp_path / "replaced").write_text("b")
    (tmp_path / "rewritten").write_text("c")
    before = snapshot(tmp_path)
    (tmp_path / "new.tmp").write_text("b")
    os.replace(tmp_path / "new.tmp", tmp_path / "replaced")  # same content, a new file (an atomic write)
    with open(tmp_path / "rewritten", "w") as fh:
        fh.write("c")
    os.utime(tmp_path / "rewritten", ns=(1, 1))  # even with its old size and a time in the past
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "added").write_text("d")
    (tmp_path / MANIFEST).write_text("{}")
    (tmp_path / "manifest.json.sig").write_text("sig")
    assert changed_files(tmp_path, before) == (["replaced", "rewritten", "sub/added"], ["kept"])
    assert snapshot(tmp_path / "missing") == {} and changed_files(tmp_path / "missing", {}) == ([], [])


# -- verify: what it catches ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", REPORTS)
def test_one_changed_byte_fails_naming_the_file(healthy_copy: Path, name: str) -> None:
    path = healthy_copy / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    code, stdout, stderr = _cli(str(healthy_copy))
    run_id = _manifest(healthy_copy)["run_id"]
    assert (code, stderr) == (1, "")
    assert stdout == (f"{healthy_copy} does not match its manifest.json (run {run_id}): altered file {name} "
                      "(its SHA-256 differs from the manifest's)\n")


def test_a_deleted_a_grown_and_an_added_file_are_each_named(healthy_copy: Path) -> None:
    (healthy_copy / "junit.xml").unlink()
    with open(healthy_copy / "report.md", "a") as fh:
        fh.write("\nall good, trust me\n")
    size = _manifest(healthy_copy)["files"][3]["size"]
    (healthy_copy / "extra").mkdir()
    (healthy_copy / "extra" / "report-fixed.html").write_text("<p>PASS</p>")
    code, stdout, _ = _cli(str(healthy_copy))
    assert code == 1 and stdout.count("\n") == 1
    assert stdout.split(": ", 1)[1] == (f"missing file junit.xml; altered file report.md ({size + 20} bytes, the "
                                        f"manifest says {size}); unlisted file extra/report-fixed.html\n")


def test_a_file_replaced_by_a_link_is_altered_even_with_the_same_content(healthy_copy: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    shutil.move(healthy_copy / "report.json", elsewhere)
    (healthy_copy / "report.json").symlink_to(elsewhere)
    code, stdout, _ = _cli(str(healthy_copy))
    assert code == 1 and "altered file report.json (a link)" in stdout


def test_many_problems_are_one_line_naming_the_first_five(healthy_copy: Path) -> None:
    for i in range(7):
        (healthy_copy / f"added-{i}").write_text("x")
    code, stdout, _ = _cli(str(healthy_copy))
    assert code == 1 and stdout.count("\n") == 1
    assert "unlisted file added-4; and 2 more\n" in stdout and "added-5" not in stdout


def test_a_signature_next_to_the_manifest_is_left_to_its_tool(healthy_copy: Path) -> None:
    (healthy_copy / "manifest.json.sigstore.json").write_text("{}")
    code, stdout, _ = _cli(str(healthy_copy))
    assert code == 0 and stdout.endswith("; not checked here: manifest.json.sigstore.json\n")


# -- verify: bad input --------------------------------------------------------------------------------

def _with_manifest(directory: Path, doc: Any) -> Path:
    directory.mkdir()
    (directory / MANIFEST).write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return directory


def _doc(*paths: str, **changes: Any) -> dict[str, Any]:
    doc = {"schema": SCHEMA_ID, "gpuconf_version": "0.1.0", "run_id": "r", "exit_status": 0,
           "cluster": {"provenance": None, "simulated": False, "kube_system_uid": None},
           "started": "2026-01-01T00:00:00Z", "finished": "2026-01-01T00:00:01Z",
           "files": [{"path": p, "size": 0, "sha256": "0" * 64} for p in paths]}
    return {**doc, **changes}


BAD: list[tuple[str, Callable[[Path], Path], str]] = [
    ("no such directory", lambda d: d / "nope", "no such directory"),
    ("a file, not a directory", lambda d: Path(shutil.copy(__file__, d / "f")), "not a directory"),
    ("no manifest", lambda d: Path(os.makedirs(d / "r") or d / "r"), "has no manifest.json"),
    ("not JSON", lambda d: _with_manifest(d / "r", "{not json"), "is not JSON"),
    ("a list", lambda d: _with_manifest(d / "r", []), "not a gpuconf manifest"),
    ("no files key", lambda d: _with_manifest(d / "r", {k: v for k, v in _doc("a").items() if k != "files"}),
     "'files' is a required property"),
    ("another schema", lambda d: _with_manifest(d / "r", _doc("a", schema="gpuconf.manifest/2")),
     "is a 'gpuconf.manifest/2' manifest; this gpuconf reads 'gpuconf.manifest/1'"),
    ("no file listed", lambda d: _with_manifest(d / "r", _doc()), "at files: [] should be non-empty"),
    ("a hash that is not SHA-256", lambda d: _with_manifest(d / "r", {**_doc("a"), "files": [
        {"path": "a", "size": 1, "sha256": "abc"}]}), "at files/0/sha256"),
    ("a path up and out", lambda d: _with_manifest(d / "r", _doc("../outside")), "'../outside' (refused)"),
    ("an absolute path", lambda d: _with_manifest(d / "r", _doc("/etc/passwd")), "'/etc/passwd' (refused)"),
    ("a path out through the middle", lambda d: _with_manifest(d / "r", _doc("a/../../b")), "(refused)"),
    ("a path not normalised", lambda d: _with_manifest(d / "r", _doc("./report.json")), "(refused)"),
    ("a Windows path", lambda d: _with_manifest(d / "r", _doc("C:\\x")), "(refused)"),
    ("the manifest itself", lambda d: _with_manifest(d / "r", _doc(MANIFEST)), "the manifest or its signature"),
    ("a path twice", lambda d: _with_manifest(d / "r", _doc("a", "a")), "lists 'a' twice"),
]


@pytest.mark.parametrize("case,build,fragment", BAD, ids=[c[0] for c in BAD])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, case: str, build: Callable[[Path], Path],
                                          fragment: str) -> None:
    code, stdout, stderr = _cli(str(build(tmp_path)))
    assert (code, stdout) == (2, ""), stderr
    assert "Traceback" not in stderr and stderr.count("\n") == 1
    assert stderr.startswith("gpuconf report verify: ") and fragment in stderr, stderr


def test_a_missing_argument_is_a_usage_error() -> None:
    out, err = io.StringIO(), io.StringIO()
    assert main(["report", "verify"], stdout=out, stderr=err) == 2
    assert "the following arguments are required: DIR" in err.getvalue() and err.getvalue().count("\n") == 1


# -- signing the manifest with a standard tool (README: Report integrity) ------------------------------

def test_the_readme_s_openssl_signature_catches_a_report_and_manifest_altered_together(healthy_copy: Path,
                                                                                      tmp_path: Path) -> None:
    """verify alone trusts the manifest; a signature over it is what catches a report altered with its
    manifest rewritten to match. The README's OpenSSL commands, run as written."""
    import hashlib
    import subprocess

    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([openssl, *args], capture_output=True, text=True, check=False, timeout=60)

    key, pub = tmp_path / "key.pem", tmp_path / "pub.pem"
    assert run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(key)).returncode == 0
    assert run("pkey", "-in", str(key), "-pubout", "-out", str(pub)).returncode == 0
    manifest, sig = healthy_copy / MANIFEST, healthy_copy / "manifest.json.sig"
    assert run("dgst", "-sha256", "-sign", str(key), "-out", str(sig), str(manifest)).returncode == 0
    assert run("dgst", "-sha256", "-verify", str(pub), "-signature", str(sig), str(manifest)).stdout == "Verified OK\n"
    assert _cli(str(healthy_copy))[:2] == (0, f"4 files verified in {healthy_copy} against its manifest.json (run "
                                              f"{_manifest(healthy_copy)['run_id']}, gpuconf "
                                              f"{_manifest(healthy_copy)['gpuconf_version']}); not checked here: "
                                              "manifest.json.sig\n")

    original = (healthy_copy / "report.md").read_text()
    forged = original.replace("**PASS**", "**PASS** (re-checked by hand)")
    assert forged != original
    (healthy_copy / "report.md").write_text(forged)
    doc = _manifest(healthy_copy)
    [entry] = [f for f in doc["files"] if f["path"] == "report.md"]
    entry.update(size=len(forged.encode()), sha256=hashlib.sha256(forged.encode()).hexdigest())
    manifest.write_text(json.dumps(doc, indent=2) + "\n")
    assert _cli(str(healthy_copy))[0] == 0  # the manifest agrees with the forgery...
    check = run("dgst", "-sha256", "-verify", str(pub), "-signature", str(sig), str(manifest))
    assert check.returncode == 1 and check.stdout == "Verification failure\n"  # ...the signature does not


def test_a_run_stopped_while_it_connects_still_gets_a_manifest_that_verifies(tmp_path: Path) -> None:
    """Ctrl-C before the first test (the API server accepted the connection and never answered):
    the reports say NOT STARTED, and the manifest, written at unconfigure, covers them."""
    import select
    import signal
    import socket
    import subprocess
    import sys

    (tmp_path / "test_one.py").write_text("def test_one(gpu_node):\n    pass\n")
    with socket.socket() as silent:  # listens, never accepts: a request waits for an answer
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        config = kubeconfig_for(f"http://127.0.0.1:{silent.getsockname()[1]}", tmp_path / "kubeconfig")
        out = tmp_path / "reports"
        run = subprocess.Popen([sys.executable, "-m", "pytest", *NO_HYPOTHESIS, "-p", "gpuconf.plugin", "-q", "-p",
                                "no:cacheprovider", "--kubeconfig", str(config), "--report-dir", str(out)],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            assert select.select([silent], [], [], 60)[0], "the run never connected"
            run.send_signal(signal.SIGINT)
            output, _ = run.communicate(timeout=60)
        finally:
            run.kill()
    assert run.returncode == pytest.ExitCode.INTERRUPTED, output
    report = json.loads((out / "report.json").read_text())["extra"]["gpuconf"]
    assert report["verdict"] == "not-started" and report["error"] == "interrupted before the first test"
    doc = _manifest(out)
    assert [f["path"] for f in doc["files"]] == REPORTS and doc["exit_status"] == 2
    assert _cli(str(out))[:2] == (0, f"4 files verified in {out} against its manifest.json (run without a run id, "
                                     f"gpuconf {doc['gpuconf_version']})\n")


def _tree(directory: Path) -> dict[str, bytes | str]:
    """Everything under ``directory``: each file's bytes, each link's target."""
    return {p.relative_to(directory).as_posix(): os.readlink(p) if p.is_symlink() else p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_symlink() or p.is_file()}


#: A toy suite that opens the run's context (its namespace), so the run has a run id.
RUN_ID_SUITE = ("from gpuconf.kit import run_context\n\n\n"
                "def test_node(request, gpu_node):\n    run_context(request.config)\n")


def test_each_run_keeps_its_own_directory_and_reports_latest_points_at_the_newest(tmp_path: Path) -> None:
    """Without --report-dir: reports/<UTC start>-<run id>/ with junit.xml and a manifest that verifies
    (nothing unlisted), reports/latest a relative link to it; a second run leaves the first's directory
    byte-identical; `gpuconf report verify`, `diff` and `merge` take reports/latest."""
    (tmp_path / "test_suite.py").write_text(RUN_ID_SUITE)
    reports, link = tmp_path / "reports", tmp_path / "reports" / "latest"
    first = _run(tmp_path, "--simulate", "healthy-h100")
    assert first.returncode == 0, first.stdout + first.stderr
    assert link.is_symlink() and not os.path.isabs(os.readlink(link))
    one = link.resolve()
    run_id = json.loads((one / "report.json").read_text())["extra"]["gpuconf"]["run_id"]
    assert run_id and re.fullmatch(rf"\d{{8}}T\d{{6}}Z-{re.escape(run_id)}", one.name), one.name
    assert _files(one) == REPORTS and f"gpuconf: reports in {one} " in first.stdout
    assert _cli(str(link))[0] == 0
    kept = _tree(one)
    second = _run(tmp_path, "--simulate", "healthy-h100")
    assert second.returncode == 0, second.stdout + second.stderr
    two = link.resolve()
    assert two != one and _tree(one) == kept
    assert sorted(p.name for p in reports.iterdir()) == sorted([one.name, two.name, "latest"])
    out, err = io.StringIO(), io.StringIO()
    assert main(["report", "diff", str(one), str(link)], stdout=out, stderr=err) == 0, err.getvalue()
    assert f"new: {link / 'report.json'}, run " in out.getvalue()
    shard = _run(tmp_path, "--simulate", "healthy-h100", "--shard", "0/1", "--shard-run", "one")
    assert shard.returncode == 0, shard.stdout + shard.stderr
    out, err = io.StringIO(), io.StringIO()
    assert main(["report", "merge", str(link), "--out", str(tmp_path / "merged")], stdout=out, stderr=err) == 0, \
        err.getvalue()
    assert (tmp_path / "merged" / "report.json").is_file()


def test_a_preview_or_a_run_of_no_suite_check_writes_no_report(tmp_path: Path) -> None:
    """--collect-only, or tests that judge no cluster: the last sign-off stays byte-identical (the
    default directory and its latest link, or a --report-dir), and one line says why."""
    (tmp_path / "test_suite.py").write_text(RUN_ID_SUITE)
    (tmp_path / "test_own.py").write_text("def test_own():\n    pass\n")
    assert _run(tmp_path, "--simulate", "healthy-h100", "test_suite.py").returncode == 0
    assert _run(tmp_path, "--simulate", "healthy-h100", "test_suite.py", "--report-dir", "given").returncode == 0
    last = (tmp_path / "reports" / "latest").resolve()
    before = {d: _tree(tmp_path / d) for d in ("reports", "given")}
    for args, why in [(("test_suite.py", "--collect-only"), "--collect-only previews a run, it is not one"),
                      (("test_suite.py", "--collect-only", "--report-dir", "given"),
                       "--collect-only previews a run, it is not one"),
                      (("test_own.py",), "the run collected no suite check"),
                      (("test_own.py", "--report-dir", "given"), "the run collected no suite check"),
                      (("test_suite.py", "-k", "nothing"), "the run collected no suite check")]:
        run = _run(tmp_path, "--simulate", "healthy-h100", *args)
        assert run.returncode in (0, 5), run.stdout + run.stderr
        line = f"gpuconf: no reports written: {why}"
        assert (line + f" ({last} holds the last run's)" if "given" not in args else line) in run.stdout.splitlines(), \
            run.stdout
        assert {d: _tree(tmp_path / d) for d in ("reports", "given")} == before, args


@pytest.mark.parametrize("symlinks", [True, False], ids=["a relative link", "no symlinks: a LATEST file"])
def test_the_latest_pointer_is_replaced_in_one_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    symlinks: bool) -> None:
    from gpuconf.plugin.rundir import LATEST_FILE, latest_run, point_latest

    if not symlinks:
        def refuse(*_: object, **__: object) -> None:
            raise OSError("symbolic links are not supported here")
        monkeypatch.setattr(Path, "symlink_to", refuse)
    for name in ("20261207T100000Z-norun", "20261207T110000Z-20261207-110001-beef"):
        (tmp_path / name).mkdir()
        pointer = point_latest(tmp_path, tmp_path / name)
        assert latest_run(tmp_path) is not None and latest_run(tmp_path).resolve() == (tmp_path / name).resolve()
    assert pointer.name == ("latest" if symlinks else LATEST_FILE)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["20261207T100000Z-norun", "20261207T110000Z-20261207-110001-beef", pointer.name])
