"""Every check's outcome on every shipped healthy profile, pinned (tests/data/healthy_outcomes.yaml).

A check that drifts from PASS to NOT TESTED on a healthy cluster passes "no failures" unnoticed; the
pin catches it. For each profile and each check of gpuconf/data/checks.yaml the table lists what its
tests must show across the profile's nodes:

* ``pass``: a test that passed;
* ``"not tested: <phrase>"``: a test skipped with ``<phrase>`` in its reason (node names in a reason
  read ``{node}``);
* ``absent``: no test of the check ran (its suite has nothing to parametrise on that profile).

Every observed outcome must match an entry and every entry must match an observed outcome, so a node
that starts passing a check it used to skip, or the reverse, changes the table. Failures are never
pinned: tests/test_suite_fault_matrix.py asserts a healthy profile has none.

Regenerate after a deliberate change and review the diff (each new ``not tested`` must be a reason a
platform engineer would accept on a healthy cluster)::

    .venv/bin/python tests/healthy_outcomes.py [PROFILE ...]
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "tests" / "data" / "healthy_outcomes.yaml"
#: How much of a skip reason the generator pins: enough to name the cause, not the figures after it.
PHRASE_CHARS = 90


def _check_ids() -> list[str]:
    from gpuconf.verdict import checks

    return sorted(checks())


def observed(tests: list[dict[str, Any]]) -> dict[str, list[tuple[str, str]]]:
    """(status, reason with node names as {node}) of every test of each check, from report.json's tests."""
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for t in tests:
        extra = t.get("extra") or {}
        if not extra.get("check"):
            continue
        reason = str(t.get("message") or "")
        if t["status"] == "skipped":
            reason = reason or str(extra.get("observed") or "")
        node = extra.get("node")
        if node:
            reason = re.sub(rf"\b{re.escape(node)}\b", "{node}", reason)
        # A DaemonSet pod's generated suffix (namespace/name-abcde) differs between runs.
        reason = re.sub(r"(\b[a-z0-9-]+/[a-z0-9-]+)-[a-z0-9]{5}\b", r"\1-*", reason)
        out[extra["check"]].append((t["status"], " ".join(reason.split())))
    return out


def _matches(entry: str, outcome: tuple[str, str]) -> bool:
    """Whether one observed outcome is what ``entry`` pins. A pinned pass is a pass and nothing else:
    the concurrency checks (isolation.concurrent-pods-disjoint, sharing.oversubscription-runs) no longer
    decline on a loaded machine, their pods holding their GPUs until each saw the others hold theirs
    (the cuda-probe's rendezvous), so no decline stands for a pass."""
    status, reason = outcome
    if entry == "pass":
        return status == "passed"
    if entry.startswith("not tested: "):
        return status == "skipped" and entry.removeprefix("not tested: ") in reason
    return False


def mismatches(pinned: dict[str, list[str]], seen: dict[str, list[tuple[str, str]]]) -> list[str]:
    """What differs between a profile's pinned entries and what its run showed, one line each."""
    problems = []
    for check in _check_ids():
        entries = pinned.get(check)
        outcomes = seen.get(check, [])
        if entries is None:
            problems.append(f"{check}: not in the table (observed {sorted(set(outcomes))})")
            continue
        if entries == ["absent"]:
            if outcomes:
                problems.append(f"{check}: pinned absent, observed {sorted(set(outcomes))}")
            continue
        for outcome in outcomes:
            if not any(_matches(e, outcome) for e in entries):
                problems.append(f"{check}: observed {outcome[0]} {outcome[1]!r}, pinned {entries}")
        for entry in entries:
            if not any(_matches(entry, o) for o in outcomes):
                problems.append(f"{check}: pinned {entry!r}, observed {sorted(set(outcomes)) or 'no test'}")
    problems += [f"{check}: in the table but not in gpuconf/data/checks.yaml" for check in pinned
                 if check not in _check_ids()]
    return problems


def load(profile: str) -> dict[str, list[str]]:
    table = yaml.safe_load(TABLE.read_text()) or {}
    return {check: list(entries) for check, entries in (table.get(profile) or {}).items()}


def _phrase(reasons: list[str]) -> str:
    """The reasons' common start, cut at a word, at most PHRASE_CHARS long."""
    common = os.path.commonprefix(reasons)[:PHRASE_CHARS]
    if len(common) < min(len(r) for r in reasons):
        common = common.rsplit(" ", 1)[0] if " " in common else common
    return common.strip(" :,;(")


def entries_of(outcomes: list[tuple[str, str]]) -> list[str]:
    """The table entries a run's outcomes of one check give (the generator's side of :func:`mismatches`)."""
    if not outcomes:
        return ["absent"]
    out = []
    if any(s == "passed" for s, _ in outcomes):
        out.append("pass")
    skipped = sorted({r for s, r in outcomes if s == "skipped"})
    # Group the skip reasons by their first five words, one phrase per group.
    groups: dict[str, list[str]] = defaultdict(list)
    for reason in skipped:
        groups[" ".join(reason.split()[:5])].append(reason)
    out += [f"not tested: {_phrase(group)}" for group in groups.values()]
    other = sorted({s for s, _ in outcomes if s not in ("passed", "skipped")})
    out += [f"unexpected {s}" for s in other]
    return out


def _run(profile: str, reports: Path) -> list[dict[str, Any]]:
    subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "suites"), "-p", "gpuconf.plugin", "--simulate", profile,
                    "--report-dir", str(reports), "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                    "-p", "no:hypothesispytest"], cwd=ROOT, check=False, capture_output=True)
    tests: list[dict[str, Any]] = json.loads((reports / "report.json").read_text())["results"]["tests"]
    return tests


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_suite_fault_matrix import HEALTHY

    table = yaml.safe_load(TABLE.read_text()) if TABLE.exists() else {}
    for profile in argv or HEALTHY:
        with tempfile.TemporaryDirectory() as tmp:
            seen = observed(_run(profile, Path(tmp)))
        table[profile] = {check: entries_of(seen.get(check, [])) for check in _check_ids()}
        print(f"{profile}: {sum(e == ['pass'] for e in table[profile].values())} checks pass everywhere")
    header = "".join(f"# {line}\n".replace("# \n", "#\n") for line in (__doc__ or "").strip().splitlines())
    TABLE.write_text(header + yaml.safe_dump({p: table[p] for p in HEALTHY if p in table}, sort_keys=False, width=120))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
