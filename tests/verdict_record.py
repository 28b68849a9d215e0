"""Recorded verdicts: a table of named cases, each a check called on crafted facts, and the verdict
it gave, whole (outcome, node, summary, expected, observed, evidence), kept in
tests/data/verdicts/<name>.json.

What a check says is the product as much as its outcome: a reader acts on the summary, the
expected/observed line and the evidence. Comparing the whole verdict kills the mutants of
scripts/mutation-score that change a message, drop an argument or pick another branch with the
same outcome. A wording change shows as a reviewed diff of the recording:
``GPUCONF_RECORD_VERDICTS=1 pytest -n 0 tests/test_mutants_<name>.py`` rewrites it (and the test then
fails once, saying so, so that a recording never silently replaces the assertion)."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gpuconf.verdict import Verdict

RECORDINGS = Path(__file__).parent / "data" / "verdicts"
RECORD = "GPUCONF_RECORD_VERDICTS"


def as_data(value: Any) -> Any:
    """A verdict, or any result of a pure function, as JSON data (enums by value, tuples as lists)."""
    if isinstance(value, Verdict):
        return {"check": value.check, "node": value.node, "outcome": value.outcome.value, "summary": value.summary,
                "expected": value.expected, "observed": value.observed, "evidence": list(value.evidence),
                "remedy": value.remedy}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: as_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): as_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [as_data(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    if hasattr(value, "value") and not isinstance(value, (str, int, float, bool)):
        return as_data(value.value)
    return value


def check_recording(name: str, case: str, make: Callable[[], Any]) -> None:
    """``make()`` gives what the recording says for ``case`` of ``name``; with GPUCONF_RECORD_VERDICTS
    set, record it instead (and fail, so that a run that recorded is never taken for a passing one)."""
    path = RECORDINGS / f"{name}.json"
    recorded: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    got = as_data(make())
    if os.environ.get(RECORD):
        recorded[case] = got
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(dict(sorted(recorded.items())), indent=1, ensure_ascii=False) + "\n")
        raise AssertionError(f"recorded {case} in {path}: review the diff, then run again without {RECORD}")
    assert case in recorded, f"{case} is not recorded in {path}: run with {RECORD}=1 and review the diff"
    assert got == recorded[case]


def shape(verdict: Verdict) -> dict[str, Any]:
    """What a verdict says beside its wording: which check, which node, the outcome, whether it
    says what was expected and observed, and how many lines of evidence it carries."""
    return {"check": verdict.check, "node": verdict.node, "outcome": verdict.outcome.value,
            "expected": verdict.expected is not None, "observed": verdict.observed is not None,
            "evidence": len(verdict.evidence)}


def whole(verdict: Verdict) -> dict[str, Any]:
    """A verdict with what :func:`as_data` leaves out that a reader still acts on: what a PASS did not
    judge, a NOT TESTED's kind and the check it is blocked by."""
    return {**as_data(verdict), "not_judged": list(verdict.not_judged), "kind": verdict.kind,
            "blocked_by": verdict.blocked_by}
