"""Bad input, as one table: every way a suite run or a ``gpuconf`` command can be started wrong ends
with one clear line and its documented exit status (README, "Exit statuses"), never a traceback.

Suite runs: 4 usage error (a bad option value, an unknown option or profile), 10 bad kubeconfig,
11 cluster unreachable, 12 forbidden, 13 no GPU nodes, 14 a malformed --expect file, 16 a --namespace
another live run holds. The commands:
2 bad input, 10-12 as above for those that reach a cluster.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from serving import pytest_subprocess, serve

from gpuconf.cli import main
from gpuconf.sim.server import FakeApiServer

pytest_plugins = ["pytester"]

#: Lines pytest's own argument parser adds around its one error line.
_ARGPARSE_NOISE = ("ERROR: usage:", "usage:", "inifile:", "rootdir:")


def kubeconfig(path: Path, server: str, *, context: str = "c", current: str | None = "c",
               cluster_ref: str = "c") -> Path:
    doc: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "not-a-real-token"}}],
        "contexts": [{"name": context, "context": {"cluster": cluster_ref, "user": "u"}}],
    }
    if current is not None:
        doc["current-context"] = current
    path.write_text(json.dumps(doc))
    return path


class _Refusing(BaseHTTPRequestHandler):
    """An API server that answers every request with one status (401 or 403)."""

    status = 403

    def do_GET(self) -> None:  # noqa: N802 - BaseHTTPRequestHandler's naming
        reason = "Forbidden" if self.status == 403 else "Unauthorized"
        body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
                           "code": self.status,
                           "message": 'nodes is forbidden: User "system:anonymous" cannot list resource "nodes"'
                           if self.status == 403 else "Unauthorized"}).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        pass


@pytest.fixture(scope="module")
def refusing() -> Iterator[Callable[[int], str]]:
    servers: dict[int, ThreadingHTTPServer] = {}

    def url(status: int) -> str:
        if status not in servers:
            handler = type(f"Refusing{status}", (_Refusing,), {"status": status})
            server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            servers[status] = server
        return f"http://127.0.0.1:{servers[status].server_address[1]}"

    yield url
    for server in servers.values():
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def gpu_less() -> Iterator[FakeApiServer]:
    server = FakeApiServer().start()
    yield server
    server.stop()


# (case, how to build the arguments from (tmp_path, fake servers), exit status, the line's fragment)
Build = Callable[[Path, Callable[[int], str], FakeApiServer], list[str]]
SUITE_CASES: list[tuple[str, Build, int, str]] = [
    # kubeconfig
    ("kubeconfig missing", lambda d, r, s: ["--kubeconfig", str(d / "none")], 10, "no such file"),
    ("kubeconfig not YAML", lambda d, r, s: ["--kubeconfig", str(_write(d / "k", "{{{ not: yaml"))], 10,
     "not YAML"),
    ("kubeconfig empty", lambda d, r, s: ["--kubeconfig", str(_write(d / "k", ""))], 10, "kubeconfig"),
    ("kubeconfig a list", lambda d, r, s: ["--kubeconfig", str(_write(d / "k", "- a\n- b\n"))], 10, "kubeconfig"),
    ("no current-context", lambda d, r, s: ["--kubeconfig", str(kubeconfig(d / "k", s.url, current=None))], 10,
     "no current-context"),
    ("unknown --context", lambda d, r, s: ["--kubeconfig", str(kubeconfig(d / "k", s.url)), "--context", "prod"],
     10, "unknown context"),
    ("context names no cluster", lambda d, r, s: ["--kubeconfig", str(kubeconfig(d / "k", s.url,
                                                                                 cluster_ref="gone"))], 10, "gone"),
    # the server
    ("connection refused", lambda d, r, s: ["--kubeconfig", str(kubeconfig(d / "k", "http://127.0.0.1:9"))], 11,
     "cannot reach the API server"),
    ("unknown host", lambda d, r, s: ["--kubeconfig", str(kubeconfig(d / "k", "https://api.gpuconf.invalid:6443"))],
     11, "cannot reach the API server"),
    ("TLS to a plain-HTTP server", lambda d, r, s: ["--kubeconfig", str(kubeconfig(
        d / "k", s.url.replace("http://", "https://")))], 11, "cannot reach the API server"),
    ("credentials rejected (401)", lambda d, r, s: ["--kubeconfig", str(kubeconfig(d / "k", r(401)))], 12,
     "Unauthorized"),
    ("RBAC forbids (403)", lambda d, r, s: ["--kubeconfig", str(kubeconfig(d / "k", r(403)))], 12,
     'cannot list resource "nodes"'),
    ("no GPU nodes", lambda d, r, s: ["--kubeconfig", str(s.write_kubeconfig(d / "k"))], 13,
     "the cluster has no GPU nodes"),
    ("--namespace that does not exist", lambda d, r, s: ["--simulate", "healthy-h100", "--namespace", "absent"], 4,
     "--namespace absent: no such namespace"),
    # --expect
    ("--expect missing", lambda d, r, s: ["--simulate", "healthy-h100", "--expect", str(d / "none.yaml")], 14,
     "cannot read"),
    ("--expect not YAML", lambda d, r, s: ["--simulate", "healthy-h100", "--expect",
                                           str(_write(d / "e.yaml", "pools: [\n"))], 14, "e.yaml:"),
    ("--expect breaks the schema", lambda d, r, s: ["--simulate", "healthy-h100", "--expect", str(_write(
        d / "e.yaml", "schema: 1\npools:\n  - name: h100\n    selector: {a: b}\n    gpu: {count: -1}\n"))], 14,
     "e.yaml:5:"),
    # options
    ("unknown option", lambda d, r, s: ["--simulate", "healthy-h100", "--bogus"], 4,
     "unrecognized arguments: --bogus"),
    ("unknown profile", lambda d, r, s: ["--simulate", "nope"], 4, "unknown simulated cluster profile 'nope'"),
    ("malformed profile file", lambda d, r, s: ["--simulate", str(_write(d / "p.yaml", "schema: 1\nname: x\n"))],
     4, "p.yaml"),
    ("--simulate and --kubeconfig", lambda d, r, s: ["--simulate", "healthy-h100", "--kubeconfig", str(d / "k")],
     4, "give either --simulate or --kubeconfig, not both"),
    ("--node-selector", lambda d, r, s: ["--simulate", "healthy-h100", "--node-selector", "a=b,,c"], 4,
     "--node-selector 'a=b,,c':"),
    ("--tolerate", lambda d, r, s: ["--simulate", "healthy-h100", "--tolerate", "dedicated=training:NoSchedul"], 4,
     "--tolerate 'dedicated=training:NoSchedul': the effect 'NoSchedul' is not one of NoSchedule, PreferNoSchedule, "
     "NoExecute"),
    ("--namespace", lambda d, r, s: ["--simulate", "healthy-h100", "--namespace", "Not_A_Name"], 4,
     "--namespace 'Not_A_Name': not a namespace name"),
    ("--registry", lambda d, r, s: ["--simulate", "healthy-h100", "--registry", "https://registry.example.com"], 4,
     "--registry 'https://registry.example.com': give a registry"),
    ("--timeout 0", lambda d, r, s: ["--simulate", "healthy-h100", "--timeout", "0"], 4,
     "--timeout 0: must be a positive number of seconds"),
    ("--api-deadline 0", lambda d, r, s: ["--simulate", "healthy-h100", "--api-deadline", "0"], 4,
     "--api-deadline 0: must be a positive number of seconds"),
    ("--prepare-timeout -1", lambda d, r, s: ["--simulate", "healthy-h100", "--prepare-timeout", "-1"], 4,
     "--prepare-timeout -1: must be a positive number of seconds"),
    ("--timeout soon", lambda d, r, s: ["--simulate", "healthy-h100", "--timeout", "soon"], 4,
     "invalid float value: 'soon'"),
    ("--burn-in 0", lambda d, r, s: ["--simulate", "healthy-h100", "--burn-in", "0"], 4,
     "--burn-in 0: give at least one round"),
    ("--nccl-nodes 1", lambda d, r, s: ["--simulate", "healthy-h100", "--nccl-nodes", "1"], 4,
     "--nccl-nodes 1: give 2 or more nodes"),
    ("--dcgm-diag 7", lambda d, r, s: ["--simulate", "healthy-h100", "--dcgm-diag", "7"], 4, "--dcgm-diag 7"),
    # a -m naming no marker would select nothing, silently, after starting the cluster: refused first
    ("-m unknown marker", lambda d, r, s: ["--simulate", "healthy-h100", "-m", "smoke and not gpu_smoke"], 4,
     "-m 'smoke and not gpu_smoke': no marker named gpu_smoke (known: "),
    ("--compat-images 12.4,9.9", lambda d, r, s: ["--simulate", "healthy-h100", "--compat-images", "12.4,9.9"], 4,
     "--compat-images 12.4,9.9: no official nvidia/cuda image of CUDA 9.9 in gpuconf/data/cuda_images.yaml"),
]


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _said(output: str) -> list[str]:
    """The lines a person reads: without blank lines and pytest's usage boilerplate."""
    return [line for line in output.splitlines() if line.strip() and not line.strip().startswith(_ARGPARSE_NOISE)]


@pytest.mark.parametrize("case,build,status,fragment", SUITE_CASES, ids=[c[0] for c in SUITE_CASES])
def test_a_suite_run_started_wrong_says_why_in_one_line(pytester: pytest.Pytester, refusing, gpu_less, case,
                                                        build, status, fragment):
    pytester.makepyfile(test_suite="def test_node(gpu_node):\n    pass\n")
    args = build(pytester.path, refusing, gpu_less)
    result = pytest_subprocess(pytester, "-p", "gpuconf.plugin", "-q", "-p", "no:cacheprovider", *args,
                               timeout=120)
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == status, output
    assert "Traceback" not in output, output
    said = _said(output)
    assert len(said) == 1 and fragment in said[0], said
    if status >= 10 or case == "--namespace that does not exist":  # started, then stopped: the reports say why
        doc = json.loads((pytester.path / "reports" / "latest" / "report.json").read_text())["extra"]["gpuconf"]
        assert doc["exit_status"] == status and fragment in doc["error"]


@pytest.mark.parametrize("kubeconfig_env,fragment", [
    (None, "gpuconf: no cluster to test: give --kubeconfig PATH or --simulate PROFILE (neither $KUBECONFIG nor "
     "~/.kube/config names a kubeconfig, and this is not a pod with a service account token)"),
    ("gone", "kubeconfig {d}/gone: no such file"),
    ("gone:also-gone", "kubeconfig:$KUBECONFIG={d}/gone:{d}/also-gone: none of its files exists"),
], ids=["nothing names a cluster", "$KUBECONFIG names a missing file", "$KUBECONFIG names missing files"])
def test_a_run_of_the_suites_without_a_cluster_says_so_in_one_line_and_exits_10(
        pytester: pytest.Pytester, monkeypatch, kubeconfig_env: str | None, fragment: str) -> None:
    """Never a green run of skips: a CI job that lost its kubeconfig fails. $KUBECONFIG is taken as set,
    as kubectl takes it (no falling back to ~/.kube/config). HOME is pytester's empty directory."""
    suites = pytester.mkdir("suites")
    (suites / "test_suite.py").write_text("def test_node(gpu_node):\n    pass\n")
    if kubeconfig_env is None:
        monkeypatch.delenv("KUBECONFIG", raising=False)
    else:
        monkeypatch.setenv("KUBECONFIG", ":".join(str(pytester.path / name) for name in kubeconfig_env.split(":")))
    result = pytest_subprocess(pytester, "-p", "gpuconf.plugin", "-q", "-p", "no:cacheprovider", "suites",
                               "--report-dir", "out", timeout=120)
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == 10, output
    said = _said(output)
    assert len(said) == 1 and fragment.format(d=pytester.path) in said[0], said
    doc = json.loads((pytester.path / "out" / "report.json").read_text())["extra"]["gpuconf"]
    assert doc["exit_status"] == 10 and fragment.format(d=pytester.path).removeprefix("gpuconf: ") in doc["error"]


def _cli(argv: list[str]) -> tuple[int, str, str]:
    import io

    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


CLI_CASES: list[tuple[str, Callable[[Path], list[str]], int, str]] = [
    ("unknown command", lambda d: ["frobnicate"], 2, "invalid choice: 'frobnicate'"),
    ("unknown option", lambda d: ["sim", "profiles", "--bogus"], 2, "unrecognized arguments: --bogus"),
    ("sim serve, unknown profile", lambda d: ["sim", "serve", "--profile", "nope", "--kubeconfig-out",
                                             str(d / "k")], 2, "unknown simulated cluster profile 'nope'"),
    ("report diff, missing report", lambda d: ["report", "diff", str(d / "a.json"), str(d / "b.json")], 2,
     "no such file"),
    ("report diff, not a report", lambda d: ["report", "diff", str(_write(d / "a.json", "[1, 2")),
                                             str(_write(d / "b.json", "{}"))], 2, "a.json"),
    ("report verify, no manifest", lambda d: ["report", "verify", str(d)], 2, "has no manifest.json"),
    ("report verify, not JSON", lambda d: ["report", "verify", str(_write(d / "manifest.json", "{").parent)], 2,
     "manifest.json is not JSON"),
    ("images build, bad registry", lambda d: ["images", "build", "--registry", ""], 2, "not a registry"),
    ("results, kubeconfig missing", lambda d: ["results", "list", "--kubeconfig", str(d / "none")], 10,
     "no such file"),
    ("results, kubeconfig not YAML", lambda d: ["results", "list", "--kubeconfig", str(_write(d / "k", "{{{"))], 10,
     "not YAML"),
    ("results, unreachable", lambda d: ["results", "list", "--kubeconfig", str(kubeconfig(d / "k",
                                                                                         "http://127.0.0.1:9"))],
     11, "cannot reach the API server"),
]  # predict and require: tests/test_cli.py (test_bad_input_is_one_line_and_exit_2)


@pytest.mark.parametrize("case,build,status,fragment", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_a_command_started_wrong_says_why_in_one_line(tmp_path: Path, case, build, status, fragment):
    code, out, err = _cli(build(tmp_path))
    assert code == status, out + err
    assert "Traceback" not in out + err
    assert err.count("\n") == 1 and fragment in err, err


@pytest.mark.parametrize("renewed_s_ago,status", [(1, 16), (120, 0)], ids=["live", "killed"])
def test_a_shared_namespace_with_a_live_run_refuses_a_second_run(pytester: pytest.Pytester, renewed_s_ago: int,
                                                                 status: int) -> None:
    """--namespace holding another run's current liveness mark: one line and exit status 16 (both runs
    would make probe objects under the same names); a killed run's expired mark does not stop the run."""
    from datetime import UTC, datetime, timedelta

    from kubernetes import client, config

    from gpuconf.cluster.campaign import make_run_lease

    pytester.makepyfile(test_suite="def test_node(gpu_node):\n    pass\n")
    # `gpuconf sim serve` in its own process: pytester restores sys.modules after each test, and the
    # simulator's TLS keys need cryptography's modules as first imported
    with serve(pytester.path / "serve", "healthy-h100") as served, \
            config.new_client_from_config(config_file=str(served.kubeconfig)) as api:
        client.CoreV1Api(api).create_namespace({"metadata": {"name": "shared"}})
        lease = make_run_lease("20261204-100000-beef", "shared", interval_s=10,
                               now=datetime.now(UTC) - timedelta(seconds=renewed_s_ago))
        client.CoordinationV1Api(api).create_namespaced_lease("shared", lease)
        result = pytest_subprocess(pytester, "-p", "gpuconf.plugin", "-q", "-p", "no:cacheprovider", "--kubeconfig",
                                   str(served.kubeconfig), "--namespace", "shared", timeout=120)
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == status, output
    doc = json.loads((pytester.path / "reports" / "latest" / "report.json").read_text())["extra"]["gpuconf"]
    assert doc["exit_status"] == status
    if status:
        said = _said(output)
        assert len(said) == 1 and said[0].endswith(
            "gpuconf: --namespace shared is in use by gpuconf run 20261204-100000-beef (its liveness mark is current): "
            "runs sharing a namespace collide on their probes' names; give this run its own --namespace, or start it "
            "after that run ends"), said
        assert "--namespace shared is in use by gpuconf run 20261204-100000-beef" in doc["error"]
    else:
        assert "Traceback" not in output
