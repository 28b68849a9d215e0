"""Reports never contain credentials from the kubeconfig (issue 10 part 5).

A suite runs against the simulated cluster through a kubeconfig whose users carry a bearer token, a
client certificate and key, and a username with a password: a passing run, a failing one (a GPU
lost) and one whose API server cannot be reached, each writing report.json, report.md,
report.html, junit.xml and the CNCF evidence. No file of theirs may hold any of those secrets, raw
or base64-encoded.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import forked
import pytest
import yaml
from serving import NO_HYPOTHESIS

from gpuconf.sim.cluster import SimulatedCluster

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ROOT / "gpuconf" / "data" / "sim_profiles"

TOKEN = "gpuconf-secret-token-b7Qx2mLw9Tz4"
PASSWORD = "gpuconf-secret-password-Vn3kP8sJ"
CERT_BODY = base64.b64encode(b"gpuconf-secret-client-certificate-3Hd9").decode()
KEY_BODY = base64.b64encode(b"gpuconf-secret-client-key-Wq5rT1").decode()
CERT_PEM = f"-----BEGIN CERTIFICATE-----\n{CERT_BODY}\n-----END CERTIFICATE-----\n"
KEY_PEM = f"-----BEGIN PRIVATE KEY-----\n{KEY_BODY}\n-----END PRIVATE KEY-----\n"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


#: What no report may contain: each secret as written in the kubeconfig and as it would go on the wire.
SECRETS = {
    "the bearer token": TOKEN,
    "the password": PASSWORD,
    "the basic-auth header": b64(f"gpuconf-user:{PASSWORD}"),
    "the client certificate": CERT_BODY,
    "the client certificate data": b64(CERT_PEM),
    "the client key": KEY_BODY,
    "the client key data": b64(KEY_PEM),
}


def write_kubeconfig(path: Path, server: str) -> Path:
    """Two contexts on ``server``: "token" (a bearer token with a client certificate and key) and
    "basic" (a username and password); the current one is "token"."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "token",
        "clusters": [{"name": "sim", "cluster": {"server": server}}],
        "users": [
            {"name": "token", "user": {"token": TOKEN, "client-certificate-data": b64(CERT_PEM),
                                       "client-key-data": b64(KEY_PEM)}},
            {"name": "basic", "user": {"username": "gpuconf-user", "password": PASSWORD}},
        ],
        "contexts": [{"name": "token", "context": {"cluster": "sim", "user": "token"}},
                     {"name": "basic", "context": {"cluster": "sim", "user": "basic"}}],
    }))
    return path


def run_suite(tmp: Path, kubeconfig: Path, *options: str) -> tuple[int, Path, str]:
    """Run the inventory suite through ``kubeconfig``; its exit status, the directory holding every
    file it wrote (reports and CNCF evidence) and its output."""
    out = tmp / "out"
    # A subprocess: the suite's client must not share this interpreter with the simulated cluster.
    run = forked.run_pytest([*NO_HYPOTHESIS, str(ROOT / "suites" / "test_inventory.py"), "-p", "no:cacheprovider", "-q",
                             "--kubeconfig", str(kubeconfig), *options, "--report-dir", str(out / "reports"),
                             "--cncf-evidence", str(out / "cncf")], cwd=tmp, timeout=300)
    return run.returncode, out, run.stdout + run.stderr


def leaks(out: Path) -> list[str]:
    """Each (file, secret) where a file under ``out`` holds a secret."""
    found = []
    files = sorted(p for p in out.rglob("*") if p.is_file())
    for path in files:
        text = path.read_bytes().decode("utf-8", "replace")
        found += [f"{path.relative_to(out)}: {what}" for what, secret in SECRETS.items() if secret in text]
    return found


def written(out: Path) -> set[str]:
    return {p.name for p in (out / "reports").iterdir()} | ({"cncf"} if any((out / "cncf").rglob("*")) else set())


REPORTS = {"report.json", "report.md", "report.html", "junit.xml"}


@pytest.fixture(scope="module")
def faulted_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """healthy-h100 with one GPU lost on h100-0: the inventory suite fails."""
    doc = yaml.safe_load((PROFILES / "healthy-h100.yaml").read_text())
    doc["faults"] = [{"id": "gpu-lost", "pool": doc["pools"][0]["name"], "node": 0}]
    path = tmp_path_factory.mktemp("profile") / "h100-gpu-lost.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_a_passing_run_through_a_token_and_client_certificate_leaks_none(tmp_path: Path) -> None:
    with SimulatedCluster("healthy-h100") as cluster:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", cluster.server.url)
        status, out, output = run_suite(tmp_path, kubeconfig)
    assert status == 18, output[-3000:]  # the inventory suite alone: PARTIAL, all it ran passed
    assert REPORTS | {"cncf"} <= written(out)
    assert leaks(out) == []
    doc = json.loads((out / "reports" / "report.json").read_text())["extra"]["gpuconf"]
    assert doc["provenance"] == f"kubeconfig:{kubeconfig}"


def test_a_failing_run_through_a_password_leaks_none(tmp_path: Path, faulted_profile: Path) -> None:
    with SimulatedCluster(faulted_profile) as cluster:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", cluster.server.url)
        status, out, output = run_suite(tmp_path, kubeconfig, "--context", "basic")
    assert status == 1, output[-3000:]
    assert "inventory.gpu-count-matches-expected" in (out / "reports" / "report.md").read_text()
    assert REPORTS | {"cncf"} <= written(out)
    assert leaks(out) == []


@pytest.mark.parametrize("context", ["token", "basic"])
def test_a_run_whose_server_cannot_be_reached_leaks_none(tmp_path: Path, context: str) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")
    status, out, output = run_suite(tmp_path, kubeconfig, "--context", context)
    assert status == 11, output[-3000:]
    assert REPORTS <= written(out)
    assert leaks(out) == []
    assert [f"output: {what}" for what, secret in SECRETS.items() if secret in output] == []


def test_the_leak_finder_has_teeth(tmp_path: Path) -> None:
    """What a leak looks like: a report holding the kubeconfig it was given."""
    (tmp_path / "reports").mkdir()
    write_kubeconfig(tmp_path / "reports" / "report.md", "http://127.0.0.1:9")
    assert leaks(tmp_path) == [f"reports/report.md: the {what}" for what in (
        "bearer token", "password", "client certificate data", "client key data")]


def test_a_kubeconfig_broken_on_its_token_line_is_named_by_line_only(tmp_path: Path) -> None:
    """A YAML error message quotes the offending line; the report gives its number only."""
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")
    text = kubeconfig.read_text().replace(f"token: {TOKEN}", f'token: "{TOKEN}')
    assert text != kubeconfig.read_text()
    kubeconfig.write_text(text)
    status, out, output = run_suite(tmp_path, kubeconfig)
    assert status == 10, output[-3000:]
    assert "not YAML (line" in (out / "reports" / "report.md").read_text()
    assert leaks(out) == []
    assert [f"output: {what}" for what, secret in SECRETS.items() if secret in output] == []
