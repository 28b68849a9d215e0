"""A pytest plugin (``-p verdict_recorder``) that records, for each check, the first test in which a
FAIL or DEGRADED verdict of it was made, and writes them as JSON to the file GPUCONF_VERDICT_LOG names
when the session ends. tests/test_every_check_can_fail.py runs the checks' unit tests under it."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuconf.verdict import Outcome, Verdict

_failing: dict[str, str] = {}
_current: list[str] = [""]


def pytest_configure(config: pytest.Config) -> None:
    made = Verdict.__init__

    def recording(self: Verdict, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        if self.outcome in (Outcome.FAIL, Outcome.DEGRADED):
            _failing.setdefault(self.check, _current[0])

    Verdict.__init__ = recording  # type: ignore[method-assign]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    _current[0] = item.nodeid
    try:
        return (yield)
    finally:
        _current[0] = ""


def pytest_sessionfinish(session: pytest.Session) -> None:
    Path(os.environ["GPUCONF_VERDICT_LOG"]).write_text(json.dumps(_failing, indent=1, sort_keys=True))
