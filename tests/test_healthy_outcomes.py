"""The pin of every check's healthy outcome (tests/healthy_outcomes.py) catches drift both ways."""

from __future__ import annotations

import pytest
import yaml
from healthy_outcomes import TABLE, entries_of, mismatches, observed
from test_suite_fault_matrix import HEALTHY

from gpuconf.verdict import checks


def result(check: str, status: str, message: str = "", node: str = "gpu-0") -> dict[str, object]:
    """One test of report.json's results."""
    return {"status": status, "message": message, "extra": {"check": check, "node": node}}

CHECK = "health.no-uncorrectable-ecc"


def pinned(entries: list[str] | None = None) -> dict[str, list[str]]:
    """A profile's table: CHECK pinned to ``entries`` (when given), every other check absent."""
    table = {cid: ["absent"] for cid in checks()}
    if entries is not None:
        table[CHECK] = entries
    return table


def test_every_shipped_healthy_profile_pins_every_check():
    table = yaml.safe_load(TABLE.read_text())
    assert list(table) == HEALTHY
    for profile, rows in table.items():
        assert set(rows) == set(checks()), profile


def test_a_check_drifting_from_pass_to_not_tested_is_named():
    seen = observed([result(CHECK, "skipped", "gpu-0: ECC counters not readable")])
    problems = mismatches(pinned(["pass"]), seen)
    assert problems == [f"{CHECK}: observed skipped '{{node}}: ECC counters not readable', pinned ['pass']",
                        f"{CHECK}: pinned 'pass', observed [('skipped', '{{node}}: ECC counters not readable')]"]


@pytest.mark.parametrize(("check", "reason"), [
    ("isolation.concurrent-pods-disjoint", "the two pods did not hold their GPUs at the same time (one finished before "
     "the other was scheduled), so reusing a GPU was legitimate"),
    ("isolation.concurrent-pods-disjoint", "both pods see GPU-aaaa, but whether they held it at the same time is "
     "unknown: their times meet within a second"),
    ("isolation.concurrent-pods-disjoint", "the two pods could not hold their GPUs at the same time: pod "
     "iso-one-gpu-0: peer split.g.ns.svc did not answer within 180 s: Connection timed out"),
    ("sharing.oversubscription-runs", "the 5 pods did not all hold their GPUs at the same time, so sharing was not "
     "exercised"),
    ("isolation.only-requesting-container-sees-gpu", "blocked by isolation.sees-only-allocated: pods see GPUs at the "
     "same time"),
    (CHECK, "the two pods did not hold their GPUs at the same time (one finished before the other started)"),
], ids=["concurrent pods apart", "concurrent pods unknown", "concurrent pods could not meet", "sharing pods apart",
        "another check's skip that says at the same time", "the ECC check"])
def test_no_decline_stands_for_a_pinned_pass(check: str, reason: str):
    """The concurrency checks' pods overlap by construction now (the probe's rendezvous): a decline
    on a healthy profile is drift like any other skip, whatever its words and whichever the check."""
    seen = observed([result(check, "skipped", reason)])
    table = {**pinned(), check: ["pass"]}
    assert mismatches(table, seen) == [f"{check}: observed skipped {seen[check][0][1]!r}, pinned ['pass']",
                                       f"{check}: pinned 'pass', observed [('skipped', {seen[check][0][1]!r})]"]


def test_a_check_pinned_pass_that_declines_on_every_node_fails_its_pin_even_beside_a_pinned_decline():
    """A pinned pass needs a pass on at least one node: a check declining everywhere is not its pass,
    even where the table also pins that decline for some nodes."""
    cid = "isolation.concurrent-pods-disjoint"
    apart = "the two pods could not hold their GPUs at the same time: peer did not answer"
    seen = observed([result(cid, "skipped", apart), result(cid, "skipped", apart, node="gpu-1")])
    table = {**pinned(), cid: ["pass", "not tested: the two pods could not hold their GPUs"]}
    assert mismatches(table, seen) == [f"{cid}: pinned 'pass', observed [('skipped', {apart!r})]"]
    mixed = observed([result(cid, "passed"), result(cid, "skipped", apart, node="gpu-1")])
    assert mismatches(table, mixed) == []


def test_a_not_tested_reason_matches_by_phrase_with_node_names_read_as_node():
    seen = observed([result(CHECK, "skipped", "no GPU on gpu-0 has ECC enabled: all 2 GPU(s)"),
                     result(CHECK, "skipped", "no GPU on gpu-1 has ECC enabled: all 4 GPU(s)", node="gpu-1")])
    assert entries_of(seen[CHECK]) == ["not tested: no GPU on {node} has ECC enabled: all"]
    assert not mismatches(pinned(["not tested: no GPU on {node} has ECC enabled"]), seen)
    assert mismatches(pinned(["not tested: ECC disabled"]), seen)


def test_a_check_that_stops_running_or_starts_running_is_named():
    assert mismatches(pinned(["pass"]), {}) == [
        f"{CHECK}: pinned 'pass', observed no test"]
    assert mismatches(pinned(), observed([result(CHECK, "passed")])) == [
        f"{CHECK}: pinned absent, observed [('passed', '')]"]


def test_a_check_missing_from_the_table_or_unknown_to_the_catalog_is_named():
    table = pinned()
    del table[CHECK]
    table["health.retired"] = ["pass"]
    problems = mismatches(table, {})
    assert f"{CHECK}: not in the table (observed [])" in problems
    assert "health.retired: in the table but not in gpuconf/data/checks.yaml" in problems
