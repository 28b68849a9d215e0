"""Each GPU node's kind in the reports (issue 27): how it hands out whole GPUs (gpuconf.nodes.NodeView.kind:
device plugin, DRA claims, DRA-backed extended resource nvidia.com/gpu, device plugin and DRA) in
report.json's per-node data, report.md's node table and report.html's node rows, from real runs of the
API-only inventory check against a DRA-only and a device-plugin simulated cluster; and read back from an
older report.json without it."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import forked
import pytest
from serving import NO_HYPOTHESIS

from gpuconf.report.model import Coverage

ROOT = Path(__file__).resolve().parent.parent


def _run(tmp: Path, profile: str) -> Path:
    (tmp / "test_inventory.py").write_text((ROOT / "suites" / "test_inventory.py").read_text())
    out = tmp / "report"
    (scratch := tmp / "tmp").mkdir()
    run = forked.run_pytest([*NO_HYPOTHESIS, "-p", "gpuconf.plugin", "-q", "-p", "no:cacheprovider",
                             "test_inventory.py", "-k", "gpu_resource_advertised", "--simulate", profile,
                             "--report-dir", str(out)], cwd=tmp,
                            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": str(scratch)}, timeout=300)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    return out


@pytest.mark.parametrize(("profile", "kinds"), [
    ("h200-dra-only", {"h200-0": "DRA claims", "h200-1": "DRA claims"}),
    ("plugin-and-dra", {"h100-0": "device plugin", "h100-1": "device plugin", "h200-0": "DRA claims",
                        "h200-1": "DRA claims"}),
], ids=["a DRA-only cluster", "a cluster in migration, device plugin beside DRA"])
def test_every_report_names_each_nodes_kind(tmp_path: Path, profile: str, kinds: dict[str, str]) -> None:
    out = _run(tmp_path, profile)
    gpuconf = json.loads((out / "report.json").read_text())["extra"]["gpuconf"]
    assert gpuconf["node_kinds"] == kinds and gpuconf["coverage"]["kinds"] == kinds
    markdown = (out / "report.md").read_text()
    assert "| node | GPUs through | verdict |" in markdown
    for node, kind in kinds.items():
        assert f"| {node} | {kind} | PASS |" in markdown
    html = (out / "report.html").read_text()
    assert dict(re.findall(r'class="meta nodekind" data-node="([^"]+)">([^<]+)<', html)) == kinds


def test_a_report_without_kinds_reads_back_with_none() -> None:
    old = {"selected": 1, "tested": 1, "line": "1 of 1 GPU node tested", "untested": [], "nodes": ["n"]}
    coverage = Coverage.from_json(old)
    assert coverage is not None and coverage.kinds == {}
    assert Coverage.from_json({**old, "kinds": {"n": "DRA claims", "m": 3}}).kinds == {"n": "DRA claims"}  # type: ignore[union-attr]
    assert Coverage(("n",), (), {"n": "device plugin"}).as_json()["kinds"] == {"n": "device plugin"}
