"""The evaluator against answers recorded from NVIDIA's C evaluator (fixtures/README.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gpuconf.cli import evaluate_case, result_json

FIXTURE = Path(__file__).parent / "fixtures" / "dsl_reference.jsonl"
CASES = [json.loads(line) for line in FIXTURE.read_text().splitlines()]


def test_the_reference_corpus_covers_every_answer_kind():
    kinds = {("ok" if c["out"]["ok"] else c["out"]["error"].split(":")[0]) for c in CASES}
    assert kinds == {"ok", "unsatisfied condition", "invalid expression"}
    assert len(CASES) >= 2000


def test_every_reference_case_agrees_with_nvidias_evaluator():
    mismatches = [(c["in"], c["out"], got) for c in CASES
                  if (got := result_json(evaluate_case(c["in"]))) != c["out"]]
    assert not mismatches, mismatches[:5]


def test_the_batch_command_agrees_on_the_whole_corpus():
    stdin = "".join(json.dumps(c["in"]) + "\n" for c in CASES)
    proc = subprocess.run([sys.executable, "-m", "gpuconf.cli", "require", "--jsonl"], input=stdin,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(line) for line in proc.stdout.splitlines()] == [c["out"] for c in CASES]
