"""tests/conftest.py keeps the tests that share a costly fixture on one pytest-xdist worker, so the
fixture is made once per run (the real control plane, a module's recorded suite runs). pytest-xdist's
loadgroup has stopped grouping silently before (pytest-dev/pytest-xdist#1386): this runs a small
tree as `pytest -n 2 --dist loadgroup` does and reads which worker ran what."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]

RECORD = '''
import json, os

def record(kind, value):
    with open(os.environ["XDIST_GROUPS_LOG"], "a") as out:
        out.write(json.dumps([kind, value, os.environ.get("PYTEST_XDIST_WORKER")]) + "\\n")
'''


def test_tests_sharing_a_package_or_module_fixture_run_on_one_worker(pytester: pytest.Pytester,
                                                                       tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "groups.jsonl"
    monkeypatch.setenv("XDIST_GROUPS_LOG", str(log))
    pytester.makepyfile(record=RECORD)
    tests = pytester.mkdir("tests")
    (tests / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    plane = tests / "plane"
    plane.mkdir()
    (plane / "__init__.py").write_text("")
    (plane / "conftest.py").write_text(
        "import itertools, pytest\nfrom record import record\n_made = itertools.count()\n\n"
        "@pytest.fixture(scope='package')\ndef plane():\n    n = next(_made)\n"
        "    record('plane made', n)\n    yield n\n")
    for name in ("a", "b"):
        (plane / f"test_{name}.py").write_text(
            "import pytest, time\nfrom record import record\n\n"
            f"@pytest.mark.parametrize('i', range(4))\ndef test_{name}(plane, i):\n"
            f"    time.sleep(0.05)\n    record('plane', '{name}')\n")
    (tests / "test_module.py").write_text(
        "import pytest, time\nfrom record import record\n\n@pytest.fixture(scope='module')\ndef runs():\n"
        "    record('runs made', 0)\n    return 1\n\n@pytest.mark.parametrize('i', range(6))\n"
        "def test_m(runs, i):\n    time.sleep(0.05)\n    record('runs', i)\n")
    (tests / "test_free.py").write_text(
        "import pytest, time\nfrom record import record\n\n@pytest.mark.parametrize('i', range(8))\n"
        "def test_f(i):\n    time.sleep(0.2)\n    record('free', i)\n")
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    result = pytester.runpytest_subprocess("tests", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()[-3000:]
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    workers = {kind: {w for k, _, w in rows if k == kind} for kind in ("plane", "runs", "free")}
    assert len(workers["plane"]) == 1 and len(workers["runs"]) == 1, rows
    assert [k for k, _, _ in rows].count("plane made") == 1 and [k for k, _, _ in rows].count("runs made") == 1
    assert {w for _, _, w in rows} == {"gw0", "gw1"}, rows  # both workers ran tests: the run was distributed
