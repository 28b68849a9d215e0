"""Guards that keep the end of a run orderly: SIGTERM ends it as Ctrl-C does, an interrupt's
traceback always formats, an API server gone stops the run (exit 11), and one overloaded past
``--api-deadline`` makes a test NOT TESTED, never a FAIL."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from gpuconf.cluster import OverloadedError
from gpuconf.kit.state import SESSION


def register_guards(config: pytest.Config) -> None:
    """The two report guards below, registered for this run (they read its session state)."""
    config.pluginmanager.register(_StopWhenUnreachable(config), "gpuconf-unreachable")
    config.pluginmanager.register(_NotTestedWhenOverloaded(), "gpuconf-overloaded")


@pytest.hookimpl(tryfirst=True)
def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """A signal can surface as KeyboardInterrupt in a frame Python gives no line number (its
    traceback entry's tb_lineno is None); pytest's terminal reporter then fails formatting it and the
    run ends with an internal error instead of "interrupted". Such entries are dropped."""
    from _pytest._code.code import Traceback

    def has_line(entry: Any) -> bool:
        try:
            entry.lineno  # noqa: B018 - the property is what fails
        except TypeError:
            return False
        return True

    kept = [entry for entry in excinfo.traceback if has_line(entry)]
    if len(kept) != len(excinfo.traceback):
        excinfo.traceback = Traceback(kept)


def _on_sigterm(signum: int, frame: object) -> None:
    """SIGTERM (``kubectl delete`` of the runner's Job, a CI cancel) ends the run as Ctrl-C does:
    the run's objects are deleted, the reports are written, the exit status is 2. A second SIGTERM
    is ignored so that cleanup and reports can finish (the kubelet's SIGKILL after the grace period
    still ends it)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt("SIGTERM")


def interrupt_on_sigterm(config: pytest.Config) -> None:
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
        return  # an embedding program owns its signals
    previous = signal.signal(signal.SIGTERM, _on_sigterm)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    config.add_cleanup(restore)


class _NotTestedWhenOverloaded:
    """A test whose API calls were refused with 429 past ``--api-deadline`` (OverloadedError, in
    its fixtures or its body) is NOT TESTED, its reason the one line that says so ("API server
    overloaded: create pod ...: HTTP 429: ... (gave up after N attempts in S s)"): an overloaded API
    server says nothing about a node, so it is never a FAIL, and never a traceback. The run goes on;
    the next calls may get through."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
        report: Any = yield
        if call.excinfo is not None and call.excinfo.errisinstance(OverloadedError):
            _, line, _ = item.location
            report.outcome = "skipped"
            report.longrepr = (str(item.path), (line or 0) + 1, f"Skipped: {call.excinfo.value}")
        return report  # type: ignore[no-any-return]


class _StopWhenUnreachable:
    """A test that finds the API server gone (connection refused, reset, timed out past the retries)
    stops the run: its report is that one line (no traceback), the rest are not run, and the run
    ends with exit status 11 (README: exit statuses), as a run that cannot start does."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
        from gpuconf.cluster import UnreachableError

        report: Any = yield
        if call.excinfo is not None and call.excinfo.errisinstance(UnreachableError):
            why = f"gpuconf: {call.excinfo.value}"
            report.longrepr = why
            state = self.config.stash[SESSION]
            if state.unreachable is None:
                state.unreachable = why.removeprefix("gpuconf: ")
                item.session.shouldstop = f"{why} (the run stops)"
        return report  # type: ignore[no-any-return]

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from gpuconf.cluster.errors import EXIT_UNREACHABLE

        if self.config.stash[SESSION].unreachable is not None:
            session.exitstatus = EXIT_UNREACHABLE
