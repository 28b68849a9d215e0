"""An API storm: the API server answers the suite's calls with 429 for longer than a call may
retry (``--api-deadline``). The checks whose calls were refused are NOT TESTED, each with one
line that says "API server overloaded" and what was refused; no node fails for it, no report holds
a traceback, and the checks whose calls got through keep their verdicts.

`gpuconf sim serve --throttle pods` is the storm (every request of the suite on pods gets the 429 that
kube-apiserver's Priority and Fairness sends, plain text with Retry-After 1 (tests/data/real/apf-429/),
for as long as the cluster runs; the node agents, the cluster's kubelets, are spared). The same storm
through a real kube-apiserver (a throttling proxy in front of it) is tests/realk8s/test_storm.py, which
wants this run's verdicts and messages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from serving import outcomes, report, run_suites, serve

SUITE = "suites/test_inventory.py"
#: One node: half the probes, and still checks that need a probe pod and checks that do not.
OPTIONS = ("--node-selector", "kubernetes.io/hostname=h100-0", "--api-deadline", "2")


@pytest.fixture(scope="module")
def storm(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("api-storm")
    with serve(base / "serve", "healthy-h100", "--throttle", "pods") as served:
        run = run_suites(served.kubeconfig, base / "reports", *OPTIONS, suites=[SUITE])
    return {"run": run, "outcomes": outcomes(base / "reports"), "report": report(base / "reports"),
            "dir": base / "reports", "faults": served.summary()}  # the summary is written when the server stops


def test_checks_refused_past_the_deadline_are_not_tested_with_one_line(storm: dict[str, Any]) -> None:
    """healthy-h100 passes every check of the suite when nothing is refused (the fault matrix's
    healthy runs): here each check passes or, when a call of its was refused, is not tested."""
    run = storm["run"]
    output = run.stdout + run.stderr
    assert storm["faults"]["throttle"] > 0, output[-3000:]
    # One suite is PARTIAL (18); FAIL (1) or an untested node (15) would win over it
    assert run.returncode == 18, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    tests = storm["report"]["results"]["tests"]
    refused = [t for t in tests if t["status"] == "skipped"]
    assert refused and len(refused) < len(tests), [(t["name"], t["status"]) for t in tests]
    for t in refused:
        message = str(t["message"])
        assert message.startswith("API server overloaded: ") and "HTTP 429" in message and "\n" not in message
        assert (t.get("extra") or {}).get("outcome") == "not-tested"
    assert {t["status"] for t in tests} == {"passed", "skipped"}, [(t["name"], t["status"]) for t in tests]


def test_a_storm_from_the_first_call_ends_the_run_with_one_line_and_status_11(tmp_path: Path) -> None:
    with serve(tmp_path / "serve", "healthy-h100", "--throttle", "nodes") as served:
        run = run_suites(served.kubeconfig, tmp_path / "reports", "--api-deadline", "2",
                         suites=["suites/test_smoke.py"])
    output = run.stdout + run.stderr
    assert run.returncode == 11, output[-3000:]
    assert "Traceback" not in output
    assert [line for line in output.splitlines() if "overloaded" in line] == [
        "Exit: gpuconf: API server overloaded: list nodes: HTTP 429: Too many requests, please try again later."]


def test_no_report_of_the_storm_holds_a_traceback(storm: dict[str, Any]) -> None:
    directory: Path = storm["dir"]
    for path in directory.iterdir():
        if path.is_file():
            text = path.read_text(errors="replace")
            assert "Traceback" not in text and "gpuconf/cluster/access.py" not in text, path.name
            # manifest.json lists the report files, it reports no check
            if path.suffix in (".json", ".xml", ".md", ".html") and path.name != "manifest.json":
                assert "API server overloaded" in text, path.name
