"""The pin of every check's healthy outcome (tests/healthy_outcomes.py) catches drift both ways."""

from __future__ import annotations

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


def test_a_check_declining_because_its_pods_did_not_overlap_in_time_stands_for_its_pinned_pass():
    """A loaded machine may run two pods meant to overlap one after the other: the check says NOT
    TESTED with that reason, which is no drift; any other skip of a pinned pass still is."""
    declined = observed([result(CHECK, "skipped", "the two pods did not hold their GPUs at the same time "
                                "(one finished before the other started)")])
    assert not mismatches(pinned(["pass"]), declined)
    assert mismatches(pinned(["pass"]), observed([result(CHECK, "skipped", "gpu-0: ECC counters not readable")]))


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
