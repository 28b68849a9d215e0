"""The project's tests run on every core: `pytest tests -n auto --dist loadgroup` (pytest-xdist).

Tests that share a costly module-, package- or session-scoped fixture of the project's own (a recorded
suite run per profile, a simulated API server, the real control plane of tests/realk8s) are kept on one
worker, as one xdist group named after where the broadest such fixture is defined, so each is made once
per run; every other test goes to whichever worker is free. Without xdist the markers change nothing."""

from __future__ import annotations

import os

import pytest

# A run of the suites takes its cluster from $KUBECONFIG, ~/.kube/config or a pod's service account
# (gpuconf.kit.state.cluster_source): the cluster of the machine running the tests never leaks into
# them, nor into the runs they start. Tests of that lookup set these themselves (pytester's runs get
# an empty HOME from pytester).
for _name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
    os.environ.pop(_name, None)

#: Fixture scopes that outlive a test, broadest first.
SHARED = ("session", "package", "module")


def shared_fixture_home(item: pytest.Item) -> str | None:
    """Where the broadest costly shared fixture this test uses is defined (its node id), or None.
    Fixtures of pytest and its plugins (an empty base id) are cheap or made per worker anyway."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    homes: list[tuple[int, str]] = []
    for name in info.names_closure:
        definitions = info.name2fixturedefs.get(name) or ()
        if definitions and definitions[-1].scope in SHARED and definitions[-1].baseid:
            homes.append((SHARED.index(definitions[-1].scope), str(definitions[-1].baseid)))
    return min(homes)[1] if homes else None


# Per item as it is collected: pytest-xdist's worker reads the groups in pytest_collection_modifyitems,
# before a conftest's implementation of that hook runs.
def pytest_itemcollected(item: pytest.Item) -> None:
    home = shared_fixture_home(item)
    if home is not None:
        item.add_marker(pytest.mark.xdist_group(home))


def _by_owner(blocked: list[str]) -> str:
    """"3 by smoke.x, 1 by runtime.y" from the rows' "check (by owner)" entries."""
    from collections import Counter

    owners = Counter(entry.rpartition(" (by ")[2].rstrip(")") for entry in blocked)
    return ", ".join(f"{n} by {owner}" for owner, n in sorted(owners.items()))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """The per-fault failure table of tests/test_suite_fault_matrix.py, from the rows its fault cases
    wrote (on whichever worker ran them): fault, node, how many checks failed there and how many were
    NOT TESTED blocked by a failure there, which, and the documented exception where there is one."""
    import json

    factory = getattr(config, "_tmp_path_factory", None)
    rows_dir = factory.getbasetemp() / "fault-failures" if factory is not None else None
    rows = sorted(rows_dir.glob("*.json")) if rows_dir is not None and rows_dir.is_dir() else []
    if not rows:
        return
    terminalreporter.section("failing checks per fault, on the faulty node")
    for path in rows:
        row = json.loads(path.read_text())
        blocked = row.get("blocked", [])
        terminalreporter.write_line(f"{row['fault']:<28} {row['node']:<14} {len(row['checks']):>2} failing "
                                    f"{len(blocked):>2} blocked  {', '.join(row['checks'])}"
                                    + (f"; blocked: {_by_owner(blocked)}" if blocked else ""))
        if row.get("exception"):
            terminalreporter.write_line(f"{'':<28} exception: {row['exception']}")
