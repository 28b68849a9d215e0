"""Issue 10, part 1: the suites under API faults.

With `gpuconf sim serve --api-faults 0.05` answering 5% of the suite's requests with a 429
(Retry-After 1), a 500 or a dropped connection, and cutting watches cleanly or abruptly (the
simulated node agents, the cluster's kubelets, are spared), a whole run gives the clean run's
verdicts and exit status. A permanent outage mid-run (the server killed) ends the run promptly with
exit status 11 and one line naming the unreachable server, reports written, no traceback.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from serving import outcomes, report, run_suites, serve, start_suites

#: healthy-h100: every suite's device-plugin path; plugin-and-dra: DRA's claim watches too.
PROFILES = ["healthy-h100", "plugin-and-dra"]
RATE = "0.05"
#: A run makes a few dozen watches: cut a third of them so both kinds of cut happen in every run.
WATCH_CUTS = "0.3"
#: The bound on a run's end once the API server is gone (measured: a few seconds; the retries of
#: a refused connection are immediate).
OUTAGE_END_S = 120


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Per profile, a clean and a faulty run of every suite: exit status, outcomes, faults injected."""
    base = tmp_path_factory.mktemp("api-faults")
    out: dict[str, dict[str, Any]] = {}
    for seed, profile in enumerate(PROFILES, start=1):
        for kind, options in (("clean", ()), ("faulty", ("--api-faults", RATE, "--watch-cuts", WATCH_CUTS,
                                                         "--seed", str(seed)))):
            where = base / profile / kind
            with serve(where / "serve", profile, *options) as served:
                began = time.monotonic()
                run = run_suites(served.kubeconfig, where / "reports")
                wall = time.monotonic() - began
            assert "Traceback" not in run.stdout + run.stderr, run.stdout[-4000:]
            messages = {(str((t.get("extra") or {}).get("check") or ""), str((t.get("extra") or {}).get("node") or ""),
                         str(t["name"])): str(t.get("message") or "")
                        for t in report(where / "reports")["results"]["tests"]}
            out.setdefault(profile, {})[kind] = {"status": run.returncode, "outcomes": outcomes(where / "reports"),
                                                 "messages": messages, "faults": served.summary(), "wall": wall,
                                                 "output": run.stdout}
    return out


@pytest.mark.parametrize("profile", PROFILES)
def test_a_run_under_api_faults_gives_the_clean_runs_verdicts(runs: dict[str, dict[str, Any]], profile: str) -> None:
    clean, faulty = runs[profile]["clean"], runs[profile]["faulty"]
    assert clean["status"] == 0, clean["output"][-3000:]
    assert faulty["status"] == clean["status"], faulty["output"][-3000:]
    assert clean["outcomes"], "the clean run reported no test"
    differ = {key: (clean["outcomes"].get(key), faulty["outcomes"].get(key))
              for key in clean["outcomes"].keys() | faulty["outcomes"].keys()
              if clean["outcomes"].get(key) != faulty["outcomes"].get(key)}
    # no exception for the concurrency checks: their pods hold their GPUs until each saw the other's (the
    # cuda-probe's rendezvous), so a create that waits out a 429 delays the meeting, it does not undo it
    assert not differ, f"{profile}: outcomes (clean, faulty) that differ: {differ}"
    assert sum(faulty["faults"].values()) > 0 and sum(clean["faults"].values()) == 0


def test_every_fault_mode_was_injected(runs: dict[str, dict[str, Any]]) -> None:
    total: dict[str, int] = {}
    for profile in PROFILES:
        for mode, n in runs[profile]["faulty"]["faults"].items():
            total[mode] = total.get(mode, 0) + n
    assert set(total) == {"throttle", "server-error", "drop", "cut-watch", "cut-watch-abrupt"}
    assert all(n > 0 for n in total.values()), f"modes never injected: {total}"


def _run_started(kubeconfig: Path) -> bool:
    """Whether the run made its first probe pod (its campaigns have begun)."""
    api = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    with api:
        pods = client.CoreV1Api(api).list_pod_for_all_namespaces(
            label_selector="app.kubernetes.io/managed-by=gpuconf", _request_timeout=5)
    return bool(pods.items)


def test_an_outage_mid_run_ends_the_run_with_one_line_and_status_11(tmp_path: Path) -> None:
    with serve(tmp_path / "serve", "healthy-h100") as served:
        run = start_suites(served.kubeconfig, tmp_path / "reports")
        try:
            deadline = time.monotonic() + 60
            while not _run_started(served.kubeconfig):
                assert run.poll() is None and time.monotonic() < deadline, "the run never launched a probe"
                time.sleep(0.2)
            served.process.send_signal(signal.SIGKILL)  # the API server is gone for good
            served.process.wait()
            cut = time.monotonic()
            output, _ = run.communicate(timeout=OUTAGE_END_S)
            ended_s = time.monotonic() - cut
        except subprocess.TimeoutExpired:
            run.kill()
            pytest.fail(f"the run did not end within {OUTAGE_END_S} s of the outage")
    print(f"the run ended {ended_s:.1f} s after the API server went away")
    assert run.returncode == 11, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    said = [line for line in output.splitlines() if "cannot reach the API server" in line]
    assert said and "Interrupted: gpuconf: cannot reach the API server at http://127.0.0.1:" in output, output[-3000:]
    written = report(tmp_path / "reports")["extra"]["gpuconf"]
    assert written["exit_status"] == 11 and written["run_id"]


@pytest.mark.parametrize("option", [["--api-faults", "1.5"], ["--api-faults", "0.1", "--watch-cuts", "-1"],
                                    ["--faults-summary", "/nonexistent/dir/f.json"], ["--throttle", ","]])
def test_serve_refuses_bad_fault_options_in_one_line(tmp_path: Path, option: list[str]) -> None:
    import io

    from gpuconf.cli import main

    out, err = io.StringIO(), io.StringIO()
    status = main(["sim", "serve", "--profile", "healthy-h100", "--kubeconfig-out", str(tmp_path / "k"), *option],
                  stdout=out, stderr=err)
    assert status == 2 and len(err.getvalue().strip().splitlines()) == 1, err.getvalue()
    assert option[-2] in err.getvalue()
