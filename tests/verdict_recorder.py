"""A pytest plugin (``-p verdict_recorder``) that finds, for each check, a test that asserts its failure.

While a test runs, every FAIL or DEGRADED verdict a check function of the product makes is noted (a
verdict the test builds itself, ``failed(...)`` in the test's own code, is not: it proves nothing about
the check). When the test has passed, it is run again once per check it saw fail and no test has proven
yet, with that check sabotaged: each FAIL or DEGRADED verdict of it the product makes is turned into a
PASS with the same words. A test that then fails its assertions asserted that failure: it is the check's
proof. A test that still passes only watched the failure happen (a FAIL recorded in passing).

The re-run calls the test function again with the fixture values of its first run, so only an
assertion failure (AssertionError, pytest.fail) counts as the proof: an error of state (a file the first
run wrote) does not. When the session ends, GPUCONF_VERDICT_LOG gets JSON: ``proven`` (check -> the test
that asserts its failure) and ``seen`` (check -> the first test in which the product failed it)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuconf.verdict import Outcome, Verdict

PRODUCT = str(Path(__file__).resolve().parent.parent / "gpuconf") + os.sep
#: Frames between a check's code and Verdict.__init__ that say nothing about who made the verdict.
_PLUMBING = ("gpuconf/verdict.py", "dataclasses.py", "<string>")
_FAILING = (Outcome.FAIL, Outcome.DEGRADED)

_seen: dict[str, str] = {}
_proven: dict[str, str] = {}
_this_test: set[str] = set()
_sabotaged: list[str | None] = [None]


def made_by_product() -> bool:
    """Whether the verdict being built comes from the product's code (not from a test's own)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.endswith(_PLUMBING):
        frame = frame.f_back
    return frame is not None and frame.f_code.co_filename.startswith(PRODUCT)


def pytest_configure(config: pytest.Config) -> None:
    made = Verdict.__init__

    def recording(self: Verdict, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        if self.outcome not in _FAILING or not made_by_product():
            return
        if self.check == _sabotaged[0]:
            object.__setattr__(self, "outcome", Outcome.PASS)
        elif _sabotaged[0] is None:
            _this_test.add(self.check)

    Verdict.__init__ = recording  # type: ignore[method-assign]


def _asserts_failure(item: pytest.Function, check: str) -> bool:
    _sabotaged[0] = check
    try:
        item.runtest()
    except (AssertionError, pytest.fail.Exception):
        return True
    except Exception:  # noqa: BLE001 - a state error of the re-run proves nothing either way
        return False
    finally:
        _sabotaged[0] = None
    return False


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    _this_test.clear()
    result = yield  # raises when the test failed: nothing is proven by a failing test
    for check in sorted(_this_test):
        _seen.setdefault(check, item.nodeid)
    if isinstance(item, pytest.Function):
        for check in sorted(_this_test - set(_proven)):
            if _asserts_failure(item, check):
                _proven[check] = item.nodeid
    return result


def pytest_sessionfinish(session: pytest.Session) -> None:
    Path(os.environ["GPUCONF_VERDICT_LOG"]).write_text(
        json.dumps({"proven": _proven, "seen": _seen}, indent=1, sort_keys=True))
