"""Where a run's reports go, and whether it writes any.

A run writes reports only when it ran suite checks: a run that collected none (``pytest tests/
--simulate ...``, a selection that matched nothing) and a ``--collect-only`` preview write nothing,
so they never replace the last sign-off. Without ``--report-dir`` each run gets its own directory,
``reports/<UTC start>-<run id or norun>/``, and ``reports/latest`` then points at it: the previous
run's directory stays as it was, and a run's manifest lists everything in its directory. Registered
by gpuconf.plugin.reports.configure_reports next to the report collector.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from gpuconf.kit.state import SESSION

__all__ = ["LATEST", "LATEST_FILE", "ReportPlace", "is_suite_check", "latest_run", "point_latest",
           "reserve_run_directory", "run_directory_name", "stop_writers"]

#: The link to the newest run's directory, relative, in the default report directory.
LATEST = "latest"
#: Where symlinks cannot be made (a Windows account without the right, some mounted filesystems):
#: a text file holding the newest run's directory name.
LATEST_FILE = "LATEST"
#: The fixtures through which a test asks for the cluster under test (gpuconf.plugin.fixtures).
_CLUSTER_FIXTURES = frozenset({"gpu_node", "gpu_cluster"})


def is_suite_check(item: pytest.Item) -> bool:
    """A test that judges the cluster: it declares its check (``@pytest.mark.check``, every test of
    suites/ does) or asks for the cluster (the ``gpu_node`` or ``gpu_cluster`` fixture, directly or
    through another). The project's own tests do neither."""
    return item.get_closest_marker("check") is not None or bool(
        _CLUSTER_FIXTURES.intersection(getattr(item, "fixturenames", ())))


def _left_to_other_shards(config: pytest.Config) -> bool:
    """A shard that collected suite checks, every one another shard's (the plan gave it no node and no
    cluster-wide check): its report is its part of the merge, so it is written."""
    from gpuconf.plugin.scope import SCOPE

    scope = config.stash.get(SCOPE, None)
    return scope is not None and bool(scope.shard_dropped)


def run_directory_name(started: float, run_id: str | None) -> str:
    """``<UTC start YYYYmmddTHHMMSSZ>-<run id or norun>``: sorted by name, runs sort by start."""
    return f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(started))}-{run_id or 'norun'}"


def reserve_run_directory(base: Path) -> Path:
    """The run's directory under ``base``, made empty for it alone, named for a run without a run id
    (``ReportPlace`` renames it once the run has one)."""
    return _reserve(base, run_directory_name(time.time(), None))


def _reserve(base: Path, name: str) -> Path:
    """``base/name`` made, empty, for this run alone (``-2``, ``-3``... where a run that started in
    the same second without a run id holds the name)."""
    base.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        candidate = base / (name if n == 1 else f"{name}-{n}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(f"{base / name}: taken, and 999 names after it")


def point_latest(base: Path, directory: Path) -> Path:
    """``base/latest`` made a relative symlink to ``directory`` (a child of ``base``), replacing the
    last one in one rename, so a reader sees the old run or the new one, never neither. Where no
    symlink can be made, ``base/LATEST`` holds the directory's name (written the same way). The
    pointer's path is returned."""
    link, tmp = base / LATEST, base / f".{LATEST}.{os.getpid()}"
    try:
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(directory.name, target_is_directory=True)
    except (OSError, NotImplementedError):
        pointer, text = base / LATEST_FILE, base / f".{LATEST_FILE}.{os.getpid()}"
        text.write_text(directory.name + "\n", encoding="utf-8")
        os.replace(text, pointer)
        return pointer
    os.replace(tmp, link)
    return link


def latest_run(base: Path) -> Path | None:
    """The newest run's directory under ``base`` as its pointer names it (the link, else LATEST); None
    where neither names an existing directory."""
    link = base / LATEST
    if link.is_dir():
        return link
    try:
        name = (base / LATEST_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return base / name if name and "/" not in name and (base / name).is_dir() else None


def stop_writers(config: pytest.Config, collector: Any, *, junit: bool, manifest: bool) -> None:
    """Stop the report collector (and, with ``junit``, pytest's JUnit writer) from writing at session
    finish; with ``manifest`` the collector still writes manifest.json over what was written already
    (a run that could not start, ended after collection: pytest finishes such a session)."""
    from _pytest.junitxml import xml_key

    if config.pluginmanager.is_registered(collector):
        config.pluginmanager.unregister(collector)
        if manifest:
            config.pluginmanager.register(_ManifestOnly(collector), "gpuconf-reports-manifest")
    xml = config.stash.get(xml_key, None)
    if junit and xml is not None:
        del config.stash[xml_key]
        config.pluginmanager.unregister(xml)


class _ManifestOnly:
    """The collector's manifest, written at unconfigure, without its session-finish reports."""

    def __init__(self, collector: Any) -> None:
        self.collector = collector

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.collector.pytest_unconfigure(config)


class ReportPlace:
    """Where the collector writes, and whether it writes: ``base`` is the default report directory
    (None with --report-dir: the run writes there, as given); ``junit`` says whether JUnit's path is
    gpuconf's (no --junitxml given)."""

    def __init__(self, config: pytest.Config, collector: Any, base: Path | None, *, junit: bool,
                 made_base: bool = False) -> None:
        self.config, self.collector, self.base, self.junit = config, collector, base, junit
        self.made_base = made_base  # the run made the default report directory: removed again if left empty
        self.note: str | None = None
        config.add_cleanup(self._finish)  # after every pytest_unconfigure: the manifest is written then

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """A preview, or a run of no suite check, writes no report (the last sign-off stays)."""
        if self.config.option.collectonly:
            why = "--collect-only previews a run, it is not one"
        elif not any(is_suite_check(item) for item in session.items) and not _left_to_other_shards(self.config):
            why = "the run collected no suite check"
        else:
            return
        stop_writers(self.config, self.collector, junit=self.junit, manifest=False)
        kept = latest_run(self.base) if self.base is not None else None
        self.note = f"gpuconf: no reports written: {why}" + (
            f" ({kept.resolve()} holds the last run's)" if kept is not None else "")

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """The run's directory named after its run id, before anything is written into it."""
        state = self.config.stash.get(SESSION, None)
        run_id = state.run.run_id if state is not None and state.run is not None else None
        reserved = Path(self.collector.report_dir)
        if self.base is None or run_id is None or self.note is not None or not reserved.is_dir() \
                or any(reserved.iterdir()):
            return
        target = reserved.with_name(reserved.name.replace("-norun", f"-{run_id}", 1))
        try:
            reserved.rename(target)
        except OSError:
            return  # the reserved name stays: still this run's alone
        self.collector.report_dir = target
        if self.junit:
            from _pytest.junitxml import xml_key

            xml = self.config.stash.get(xml_key, None)
            if xml is not None:
                xml.logfile = str(target / "junit.xml")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.note is not None:
            terminalreporter.write_line(self.note, yellow=True)

    def _finish(self) -> None:
        """Point reports/latest at the run's directory once it is complete; a directory the run wrote
        nothing into is removed."""
        if self.base is None:
            return
        directory = Path(self.collector.report_dir)
        try:
            if not directory.is_dir():
                return
            if not any(directory.iterdir()):
                directory.rmdir()
                if self.made_base and not any(self.base.iterdir()):
                    self.base.rmdir()
                return
            point_latest(self.base, directory)
        except OSError as exc:
            import sys

            sys.stderr.write(f"gpuconf: could not point {self.base / LATEST} at {directory.name}: {exc}\n")
