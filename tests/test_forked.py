"""The forked suite runs (tests/forked.py) are what a fresh `python -m pytest` is: the same exit
status, output streams, working directory, environment, sys.path head, temporary directory, and
assertion rewriting of the gpuconf plugin and the test modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import forked
import pytest

FACTS = '''
import atexit, json, os, sys, tempfile
import pytest

atexit.register(lambda: open("exited", "a").write("ran its exit handlers\\n"))

def test_facts():
    import gpuconf.plugin
    parts = {name: type(m.__loader__).__name__ == "AssertionRewritingHook" for name, m in list(sys.modules.items())
             if name.startswith(("gpuconf.plugin.", "gpuconf.kit"))}
    facts = {"cwd": os.getcwd(), "path0": sys.path[0], "env": os.environ.get("FORKED_PROBE"),
             "tmp": tempfile.gettempdir(), "argv_tail": sys.argv[1:3],
             "plugin_rewritten": type(gpuconf.plugin.__loader__).__name__ == "AssertionRewritingHook",
             "parts_rewritten": sorted(name for name, rewritten in parts.items() if rewritten),
             "parts_not_rewritten": sorted(name for name, rewritten in parts.items() if not rewritten)}
    print("FACTS " + json.dumps(facts))
    sys.stderr.write("to stderr\\n")

def test_rewritten():
    left = [1, 2]
    assert left == [1, 3]
'''


def _facts(stdout: str) -> dict[str, object]:
    [line] = [x for x in stdout.splitlines() if x.startswith("FACTS ")]
    return dict(json.loads(line.removeprefix("FACTS ")))


def test_a_forked_run_is_a_fresh_interpreters_run(tmp_path: Path) -> None:
    (tmp_path / "test_probe.py").write_text(FACTS)
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "FORKED_PROBE": "yes", "TMPDIR": str(tmp_path / "tmp")}
    args = ["-p", "gpuconf.plugin", "-p", "no:cacheprovider", "-s", "-q", "test_probe.py"]
    fresh = subprocess.run([sys.executable, "-m", "pytest", *args], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=120, check=False)
    fork = forked.run_pytest(args, cwd=tmp_path, env=env, timeout=120)
    assert fork.returncode == fresh.returncode == 1, fork.stdout + fork.stderr
    facts = _facts(fork.stdout)
    assert facts == _facts(fresh.stdout)
    assert facts["cwd"] == facts["path0"] == str(tmp_path) and facts["env"] == "yes"
    assert facts["tmp"] == str(tmp_path / "tmp") and facts["plugin_rewritten"] is True
    # the plugin's modules and the suites' kit too (gpuconf.plugin registers the kit for rewriting)
    assert {"gpuconf.plugin.session", "gpuconf.plugin.fixtures", "gpuconf.kit.state"} <= set(facts["parts_rewritten"])
    assert facts["parts_not_rewritten"] == []
    for out in (fork.stdout, fresh.stdout):  # the test module's asserts are rewritten: the values are shown
        assert "assert [1, 2] == [1, 3]" in out and "1 failed, 1 passed" in out
    assert fork.stderr == fresh.stderr == "to stderr\n"  # -s: the test's stderr is the run's, apart
    assert "cannot be rewritten" not in fork.stdout + fork.stderr  # the plugin was not imported before pytest
    assert (tmp_path / "exited").read_text() == "ran its exit handlers\n" * 2  # each run, at its end


def test_a_forked_run_past_its_timeout_is_killed(tmp_path: Path) -> None:
    (tmp_path / "test_slow.py").write_text("import time\n\ndef test_slow():\n    time.sleep(60)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        forked.run_pytest(["-q", "-p", "no:cacheprovider", "test_slow.py"], cwd=tmp_path, timeout=3)
