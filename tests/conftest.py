"""The project's tests run on every core: `pytest tests -n auto --dist loadgroup` (pytest-xdist).

Tests that share a costly module-, package- or session-scoped fixture of the project's own (a recorded
suite run per profile, a simulated API server, the real control plane) are kept on one worker, as one
xdist group named after where that fixture is defined, so each such fixture is made once per run; every
other test goes to whichever worker is free. Without xdist the markers change nothing."""

from __future__ import annotations

import pytest

SHARED = ("module", "package", "session")


def shared_fixture_home(item: pytest.Item) -> str | None:
    """Where the first costly shared fixture this test uses is defined (its node id), or None. Fixtures
    of pytest and its plugins (an empty base id) are cheap or per worker anyway."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for name in info.names_closure:
        definitions = info.name2fixturedefs.get(name) or ()
        if definitions and definitions[-1].scope in SHARED and definitions[-1].baseid:
            return str(definitions[-1].baseid)
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        home = shared_fixture_home(item)
        if home is not None:
            item.add_marker(pytest.mark.xdist_group(home))
