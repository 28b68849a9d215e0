"""The reports as their readers get them, from real runs of each kind (healthy, failing, interrupted,
not started): report.json passes the official CTRF validator (npm ``ctrf``, its ``validate()``) and
the CTRF JSON schema; report.html, rendered by headless Chromium at 1,400 px, shows the verdict and
every failure in the first screen; report.md and junit.xml say what the sign-off says.

The validator and the browser are installed by .ci/run (npm into .ci/node/, Debian's chromium);
where either is absent its tests skip and say how to get it."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import forked
import jsonschema
import pytest
from expecting import strict_expect
from serving import NO_HYPOTHESIS

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "tests" / "data" / "real" / "ctrf" / "ctrf-schema-0.0.json"
NODE_DIR = ROOT / ".ci" / "node"
CTRF_PACKAGE = NODE_DIR / "node_modules" / "ctrf"
CHECK = "inventory.allocatable-matches-capacity"
KINDS = ("healthy", "failing", "interrupted", "not-started")
#: The first screen: a 1,400 px wide window of a laptop's usual height.
SCREEN = (1400, 900)

INTERRUPTED_TESTS = """
def test_first(gpu_node):
    pass

def test_ctrl_c():
    raise KeyboardInterrupt

def test_never():
    pass
"""


def _run(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A suite run (forked: tests/forked.py), its temporary directory its own (``<report dir>-tmp``:
    what a run leaves there is found)."""
    tmp = Path(args[args.index("--report-dir") + 1] + "-tmp")
    tmp.mkdir()
    return forked.run_pytest([*NO_HYPOTHESIS, "-p", "gpuconf.plugin", "-q", "-p", "no:cacheprovider", *args], cwd=where,
                             env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": str(tmp)}, timeout=300)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each kind of run, once, with its report directory: the inventory suite against a healthy and
    a faulty simulated cluster, a run stopped by Ctrl-C, and one whose kubeconfig does not exist."""
    base = tmp_path_factory.mktemp("runs")
    for suite in ("test_inventory.py", "test_mig.py"):  # MIG: not applicable on these nodes, skips with reasons
        (base / suite).write_text((ROOT / "suites" / suite).read_text())
    profile = (ROOT / "gpuconf" / "data" / "sim_profiles" / "healthy-h100.yaml").read_text()
    (base / "faulty.yaml").write_text(profile.replace(
        "\nfaults: []\n", "\nfaults:\n  - {id: gpu-unhealthy, pool: h100, node: 0, gpu: 3}\n"))
    stop = tmp_path_factory.mktemp("stop")
    (stop / "test_stop.py").write_text(INTERRUPTED_TESTS)
    out = {kind: base / kind for kind in KINDS}
    jobs = {
        "healthy": (("test_inventory.py", "--simulate", "healthy-h100", "--report-dir", str(out["healthy"])), base, 0),
        "failing": (("test_inventory.py", "test_mig.py", "--simulate", "faulty.yaml", "--expect",
                     str(strict_expect(base)), "--report-dir", str(out["failing"])), base, 1),
        "interrupted": (("--simulate", "healthy-h100", "--report-dir", str(out["interrupted"])), stop, 2),
        "not-started": (("test_inventory.py", "--kubeconfig", str(base / "missing"), "--report-dir",
                         str(out["not-started"])), base, 10),
    }
    with ThreadPoolExecutor(len(jobs)) as pool:  # the four side by side
        done = {kind: pool.submit(_run, where, *args) for kind, (args, where, _) in jobs.items()}
    for kind, (_, _, status) in jobs.items():
        run = done[kind].result()
        assert run.returncode == status, f"{kind}: {(run.stdout + run.stderr)[-3000:]}"
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_leaves_nothing_in_the_temporary_directory(runs: dict[str, Path], kind: str) -> None:
    """A simulated cluster's kubeconfig (a token for a server that is gone) goes with the run, also
    when it failed or was interrupted."""
    assert sorted(p.name for p in Path(f"{runs[kind]}-tmp").iterdir()) == []


def _doc(runs: dict[str, Path], kind: str) -> dict[str, Any]:
    return dict(json.loads((runs[kind] / "report.json").read_text()))


# -- report.json is CTRF ------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_report_json_follows_the_ctrf_schema(runs: dict[str, Path], kind: str) -> None:
    doc = _doc(runs, kind)
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()), format_checker=jsonschema.FormatChecker())
    assert doc["results"]["tool"] == {"name": "gpuconf", "version": __import__("gpuconf").__version__}
    assert doc["extra"]["gpuconf"]["verdict"] == {"healthy": "pass", "failing": "fail", "interrupted": "incomplete",
                                                  "not-started": "not-started"}[kind]


def test_a_report_outside_ctrf_is_caught_by_the_schema(runs: dict[str, Path]) -> None:
    """The schema check can fail: the report.json shape before CTRF's extension points was refused."""
    doc = _doc(runs, "failing")
    doc["gpuconf"] = doc.pop("extra")["gpuconf"]
    doc["results"]["tests"][0]["suite"] = "suites/test_inventory.py"
    errors = sorted(e.message for e in jsonschema.Draft7Validator(json.loads(SCHEMA.read_text())).iter_errors(doc))
    assert errors == ["'suites/test_inventory.py' is not of type 'array'",
                      "Additional properties are not allowed ('gpuconf' was unexpected)"]


def _official_validate(paths: list[Path]) -> list[dict[str, Any]]:
    """The npm ``ctrf`` package's validate() on each file: [{valid, errors}]."""
    node = shutil.which("node")
    if node is None or not (CTRF_PACKAGE / "package.json").is_file():
        pytest.skip("the official CTRF validator is not installed: `bash .ci/run` installs it "
                    "(npm ci --prefix .ci/node; needs node and npm)")
    script = ("import { validate } from 'ctrf'; import { readFileSync } from 'node:fs';"
              "const read = f => JSON.parse(readFileSync(f, 'utf8'));"
              "console.log(JSON.stringify(process.argv.slice(1).map(f => validate(read(f)))))")
    proc = subprocess.run([node, "--input-type=module", "-e", script, *map(str, paths)], cwd=NODE_DIR,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stdout))


def test_the_official_ctrf_validator_accepts_every_report_kind(runs: dict[str, Path], tmp_path: Path) -> None:
    broken = _doc(runs, "healthy")
    broken["results"]["tests"][0]["suite"] = "a string"  # the validator can say no
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    answers = _official_validate([runs[kind] / "report.json" for kind in KINDS] + [tmp_path / "broken.json"])
    assert answers[:4] == [{"valid": True, "errors": []}] * 4
    assert answers[4]["valid"] is False and answers[4]["errors"][0]["path"] == "/results/tests/0/suite"


def test_the_kept_schema_is_the_one_the_validator_ships() -> None:
    installed = CTRF_PACKAGE / "dist" / "ctrf-schema-0.0.json"
    if not installed.is_file():
        pytest.skip("the official CTRF validator is not installed: `bash .ci/run` installs it")
    assert json.loads(installed.read_text()) == json.loads(SCHEMA.read_text())


def test_every_report_file_gets_the_same_mode(runs: dict[str, Path]) -> None:
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in runs["failing"].iterdir()}
    assert sorted(modes) == ["junit.xml", "manifest.json", "report.html", "report.json", "report.md"]
    assert len(set(modes.values())) == 1 and modes["report.json"] & stat.S_IRGRP, modes


# -- report.md and junit.xml ----------------------------------------------------------------------------

def test_markdown_gives_the_verdict_and_each_failure_once_with_its_remedy(runs: dict[str, Path]) -> None:
    md = (runs["failing"] / "report.md").read_text()
    assert "**FAIL**: 1 of 2 node(s) fail: h100-0" in md
    failures = [line for line in md.splitlines() if line.startswith("- **FAIL**")]
    assert len(failures) == 1 and f"h100-0 `{CHECK}`" in failures[0]
    assert failures[0].count(CHECK) == 1 and failures[0].count("h100-0") == 1  # no id said twice
    assert "  - remedy: Find the unhealthy GPU" in md
    assert "**PASS**" in (runs["healthy"] / "report.md").read_text()
    assert "**NOT STARTED**" in (runs["not-started"] / "report.md").read_text()


def test_junit_skipped_cases_carry_their_outcome_and_reason(runs: dict[str, Path]) -> None:
    root = ET.parse(runs["failing"] / "junit.xml").getroot()
    skipped = [case for case in root.iter("testcase") if case.find("skipped") is not None]
    assert skipped, "the faulty run skips checks that cannot apply"
    for case in skipped:
        properties = {p.get("name"): p.get("value") for p in case.iter("property")}
        reason = case.find("skipped").get("message")  # type: ignore[union-attr]
        assert properties.get("gpuconf.outcome") == "not-tested", case.get("name")
        assert reason and reason.strip() and reason != "skipped", case.get("name")


#: What each kind of run's junit.xml says to a dashboard: the gpuconf.verdict property, and the
#: gpuconf.sign-off case's outcome and type (a run that signed nothing off is an error, never green).
JUNIT_SIGN_OFF = {"healthy": ("PASS", "passed", None), "failing": ("FAIL", "failure", "fail"),
                  "interrupted": ("INCOMPLETE", "error", "incomplete"),
                  "not-started": ("NOT STARTED", "error", "exit status 10")}


@pytest.mark.parametrize("kind", KINDS)
def test_junit_is_named_for_gpuconf_and_carries_the_verdict_and_the_sign_off(runs: dict[str, Path], kind: str) -> None:
    import junitparser

    root = ET.parse(runs[kind] / "junit.xml").getroot()
    suite = root.find("testsuite")
    assert suite is not None and root.tag == "testsuites"
    provenance = _doc(runs, kind)["extra"]["gpuconf"]["provenance"]
    assert suite.get("name") == root.get("name") == f"gpuconf {provenance}"
    props = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    (case,) = [c for c in suite.iter("testcase") if (c.get("classname"), c.get("name")) == ("gpuconf", "sign-off")]
    child = next((c for c in case if c.tag in ("failure", "error", "skipped")), None)
    told = (child.tag, child.get("type")) if child is not None else ("passed", None)
    assert (props["gpuconf.verdict"], *told) == JUNIT_SIGN_OFF[kind]
    parsed = next(iter(junitparser.JUnitXml.fromfile(str(runs[kind] / "junit.xml"))))  # as a JUnit reader counts
    assert parsed.name == f"gpuconf {provenance}"
    assert (parsed.failures + parsed.errors > 0) is (kind != "healthy")  # only a PASS is all green


def test_junit_types_a_failed_check_fail(runs: dict[str, Path]) -> None:
    """A FAIL check's <failure> is typed "fail" and its message leads with FAIL (DEGRADED's: test_reports.py)."""
    root = ET.parse(runs["failing"] / "junit.xml").getroot()
    checks = [c.find("failure") for c in root.iter("testcase") if c.get("classname") != "gpuconf"]
    failures = [f for f in checks if f is not None]
    assert failures and all(f.get("type") == "fail" and str(f.get("message")).startswith("FAIL: ") for f in failures)


# -- report.html in a real browser -------------------------------------------------------------------

def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    pytest.skip("no headless Chromium: `bash .ci/run` installs Debian's (apt-get install -y chromium)")


def _browse(html: Path, tmp_path: Path, *extra: str) -> str:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}",
             f"--window-size={SCREEN[0]},{SCREEN[1]}", "--hide-scrollbars"]
    proc = subprocess.run([_chromium(), *flags, *extra, html.as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


#: Appended to a copy of the page (the report itself has no script): writes where the verdict and
#: each failure row sit into the DOM, which --dump-dom then prints.
MEASURE = """<script>
const box = e => { const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, right: r.right}; };
const out = {width: document.documentElement.scrollWidth, height: window.innerHeight,
  verdict: box(document.getElementById('verdict')),
  verdict_text: document.getElementById('verdict').innerText,
  failures: [...document.querySelectorAll('tr.failure')].map(box)};
const pre = document.createElement('pre'); pre.id = 'measured'; pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""


def _measure(runs: dict[str, Path], kind: str, tmp_path: Path) -> dict[str, Any]:
    page = tmp_path / f"{kind}.html"
    page.write_text((runs[kind] / "report.html").read_text().replace("</body>", MEASURE + "</body>"))
    dom = _browse(page, tmp_path, "--dump-dom")
    start = dom.index('<pre id="measured">') + len('<pre id="measured">')
    return dict(json.loads(dom[start:dom.index("</pre>", start)].replace("&quot;", '"').replace("&amp;", "&")))


@pytest.mark.parametrize(("kind", "word", "failures"), [
    ("healthy", "PASS", 0), ("failing", "FAIL", 1), ("not-started", "NOT STARTED", 0)])
def test_the_verdict_and_every_failure_are_in_the_first_screen_at_1400_px(
        runs: dict[str, Path], tmp_path: Path, kind: str, word: str, failures: int) -> None:
    seen = _measure(runs, kind, tmp_path)
    assert seen["width"] <= SCREEN[0], "nothing wider than the window (no sideways scrolling)"
    assert seen["verdict_text"].split("\n")[0] == word
    assert 0 <= seen["verdict"]["top"] and seen["verdict"]["bottom"] <= SCREEN[1]
    assert len(seen["failures"]) == failures
    assert all(f["bottom"] <= SCREEN[1] and f["right"] <= SCREEN[0] for f in seen["failures"]), seen


@pytest.mark.parametrize("kind", ["healthy", "failing", "not-started"])
def test_the_sign_off_renders_to_png_at_1400_px(runs: dict[str, Path], tmp_path: Path, kind: str) -> None:
    """The screenshots a person reviews (kept under $GPUCONF_SCREENSHOTS when it is set)."""
    png = tmp_path / f"{kind}.png"
    _browse(runs[kind] / "report.html", tmp_path, f"--screenshot={png}")
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(head[16:20], "big") == SCREEN[0]
    if keep := os.environ.get("GPUCONF_SCREENSHOTS"):
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(keep) / png.name)


def test_the_sign_off_prints_on_a4(runs: dict[str, Path], tmp_path: Path) -> None:
    pdf = tmp_path / "failing.pdf"
    _browse(runs["failing"] / "report.html", tmp_path, "--no-pdf-header-footer", f"--print-to-pdf={pdf}")
    boxes = re.findall(rb"/MediaBox\s*\[0 0 ([\d.]+) ([\d.]+)\]", pdf.read_bytes())
    assert boxes and all(round(float(w)) == 595 and round(float(h)) == 842 for w, h in boxes), boxes  # A4 in pt
    assert len(boxes) <= 2, f"{len(boxes)} pages for one failure on two nodes"


def test_every_capability_on_long_node_names_fits_1400_px(tmp_path: Path) -> None:
    """Thirteen suites' columns (all of suites/) on nodes with long names: no sideways scrolling."""
    from gpuconf.report.model import CheckResult, RunRecord
    from gpuconf.report.writers import write_html

    suites = sorted(p.stem.removeprefix("test_") for p in (ROOT / "suites").glob("test_*.py"))
    assert len(suites) >= 13
    results = [CheckResult(f"{suite}.x", node, outcome, f"suites/test_{suite}.py::test_x[{node}]",
                           message="the probe pod could not start" if outcome == "not-tested" else "x")
               for node in ("gpu-node-a100-pool-0001", "gpu-node-a100-pool-0002", "h100-2")
               for i, suite in enumerate(suites) for outcome in (("not-tested", "pass", "fail")[i % 3],)]
    page = write_html(RunRecord("simulated:x", 1.7e9, 1.7e9 + 1, 1), results, tmp_path / "runs" / "report.html")
    seen = _measure({"wide": page.parent}, "wide", tmp_path)
    assert seen["width"] <= SCREEN[0] and seen["verdict_text"].split("\n")[0] == "FAIL"
