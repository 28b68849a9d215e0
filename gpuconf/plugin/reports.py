"""The reports of a run against a cluster: every test's result gathered as it is logged, written
at session end (report.json, report.md, report.html; JUnit from pytest itself), also for a run that
was interrupted or could not start; the CNCF evidence with ``--cncf-evidence``; and last, at
unconfigure, manifest.json (gpuconf.report.manifest) over every file the run wrote there."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from gpuconf.kit.state import SESSION, simulated_faults
from gpuconf.plugin.fleet import run_coverage
from gpuconf.plugin.signoff import sign_off_nodes

if TYPE_CHECKING:
    from gpuconf.report.model import RunRecord

_WORSE = {"passed": 0, "skipped": 1, "failed": 2}


class ReportCollector:
    """The report hooks, registered for runs that write reports: gathers every test's result as it is
    logged (one entry per nodeid, in the order the tests ran) and writes the reports at session end."""

    def __init__(self, config: pytest.Config, report_dir: Path) -> None:
        import time

        self.config = config
        self.report_dir = report_dir
        self.started = time.time()
        self.tests: dict[str, dict[str, Any]] = {}
        self.record: RunRecord | None = None  # what the reports were written from
        self.results: list[Any] = []  # and the results (gpuconf.report.model.CheckResult)
        self.cluster_uid: str | None = None  # the kube-system namespace's UID, read at session finish
        # What the report and evidence directories held before the run: the manifest lists only
        # what the run wrote (an earlier run's file left there is not this run's to vouch for).
        from gpuconf.report.manifest import snapshot

        self.snapshots = {d: snapshot(d) for d in self._manifest_dirs()}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry = self.tests.setdefault(report.nodeid, {"outcome": "passed", "duration": 0.0, "properties": {},
                                                      "longrepr": None})
        entry["duration"] += report.duration
        entry["properties"].update({str(k): v for k, v in report.user_properties})
        if _WORSE.get(report.outcome, 2) > _WORSE.get(entry["outcome"], 2):
            entry["outcome"] = report.outcome
            if isinstance(report.longrepr, tuple):  # a skip: (path, line, "Skipped: reason")
                entry["longrepr"] = str(report.longrepr[2]).removeprefix("Skipped: ")
            else:
                entry["longrepr"] = report.longreprtext

    def write_not_started(self, error: str, exit_status: int) -> None:
        """The four reports of a run that ended before its first test."""
        import time

        from gpuconf.report.model import RunRecord
        from gpuconf.report.writers import write_not_started_junit, write_reports

        state = self.config.stash.get(SESSION, None)
        handle = state.handle if state is not None else None
        run = RunRecord(provenance=handle.provenance if handle is not None else self._intended(),
                        started=self.started, finished=time.time(), exit_status=exit_status, error=error,
                        shard=self._shard(), options=self._options(), faults=simulated_faults(self.config))
        self.record = run
        try:
            write_reports(run, [], self.report_dir)
            write_not_started_junit(run, Path(self.config.option.xmlpath or self.report_dir / "junit.xml"))
            self._write_cncf(run, {})
        except OSError:
            return  # the one line on stderr is the message that matters

    def _shard(self) -> dict[str, Any] | None:
        """The shard's place for report.json (gpuconf.shards): its plan once the inventory made it, else
        (a shard that could not start) what --shard said."""
        state = self.config.stash.get(SESSION, None)
        if state is None:
            return None
        if state.shard is not None:
            return dict(state.shard.as_json())
        spec = state.shard_spec
        if spec is None:
            return None
        return {"index": spec.index, "count": spec.count, "run": spec.run, "run_given": spec.run is not None,
                "source": spec.source}

    def _scope(self) -> dict[str, Any] | None:
        """What the run selected and whether it is the sign-off's whole scope (gpuconf.plugin.scope)."""
        from gpuconf.plugin.scope import SCOPE

        scope = self.config.stash.get(SCOPE, None)
        if scope is None:
            return None
        return scope.as_json(self.config, sum(1 for n in scope.collected if n in self.tests))

    def _server_version(self) -> str | None:
        """The cluster's Kubernetes version, read with the inventory (the CNCF evidence and a merge's)."""
        state = self.config.stash.get(SESSION, None)
        inventory = (state.fleet or state.inventory) if state is not None else None
        return getattr(inventory, "server_version", None)

    def _options(self) -> dict[str, Any]:
        """The options the CNCF evidence depends on, as given (a merge of shards writes the same evidence)."""
        queue = self.config.getoption("--kueue-queue")
        return {"--kueue-queue": queue} if queue else {}

    def _write_cncf(self, run: Any, results: Mapping[str, Any]) -> None:
        """The CNCF AI conformance evidence (--cncf-evidence DIR), from the results by nodeid."""
        given = self.config.getoption("--cncf-evidence")
        if not given:
            return
        import dataclasses
        import sys

        from gpuconf.errors import UsageError
        from gpuconf.report.cncf import from_properties, terminal_note, write_evidence

        state = self.config.stash.get(SESSION, None)
        inventory = (state.fleet or state.inventory) if state is not None else None
        if run.server_version is None and inventory is not None:  # the cluster's version, read with the inventory
            run = dataclasses.replace(run, server_version=inventory.server_version)
        evidence = [e for nodeid, result in results.items()
                    if (e := from_properties(result, self.tests[nodeid]["properties"])) is not None]
        directory = Path(self.config.invocation_params.dir, given)
        try:
            write_evidence(run, evidence, directory, options={"--kueue-queue": self.config.getoption("--kueue-queue")})
        except UsageError as exc:  # a simulated run into a submission's layout: refused at startup already
            sys.stderr.write(f"gpuconf: {exc}\n")
            return
        note = terminal_note(run, directory, given)
        if note is not None:
            sys.stderr.write(note + "\n")

    def _manifest_dirs(self) -> list[Path]:
        """The directories that get a manifest.json: the report directory, and the CNCF evidence
        directory unless it is the report directory or inside it (then the report's manifest lists it)."""
        dirs = [self.report_dir]
        given = self.config.getoption("--cncf-evidence")
        if given:
            evidence = Path(self.config.invocation_params.dir, given)
            if not evidence.resolve().is_relative_to(self.report_dir.resolve()):
                dirs.append(evidence)
        return dirs

    def _read_cluster_uid(self) -> None:
        """The cluster's identity for the manifest: the kube-system namespace's UID (every cluster has
        that namespace, its UID lives as long as the cluster). Not read when the API server stopped
        answering; a refusal (a role without the grant) leaves it unknown."""
        from gpuconf.cluster import ClusterError

        state = self.config.stash.get(SESSION, None)
        if state is None or state.handle is None or state.unreachable is not None:
            return
        cluster = state.handle.cluster
        try:
            namespace = cluster.call_json("read namespace kube-system", cluster.core.read_namespace, "kube-system")
        except ClusterError:
            return
        uid = (namespace.get("metadata") or {}).get("uid")
        self.cluster_uid = uid if isinstance(uid, str) and uid else None

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """manifest.json, the last file written: after pytest's junitxml plugin wrote junit.xml (at
        session finish) and after the reports, also for a run that could not start or was interrupted
        (pytest unconfigures every configured run). A directory the run wrote nothing into gets none."""
        import sys

        from gpuconf.report.manifest import MANIFEST, changed_files, manifest_document, write_manifest

        run = self.record
        if run is not None and run.error is None:  # pytest's junit.xml, written at session finish
            self._finish_junit(run)
        # the report directory first: an evidence directory around it then lists its manifest
        for directory in self._manifest_dirs():
            written, left = changed_files(directory, self.snapshots.get(directory, {}))
            if not written:
                continue  # nothing written there: the reports' own error line said why, if any
            try:
                write_manifest(directory, manifest_document(
                    directory, written, run_id=run.run_id if run is not None else None,
                    provenance=run.provenance if run is not None else self._intended(),
                    simulated=run.simulated if run is not None else bool(config.getoption("--simulate")),
                    cluster_uid=self.cluster_uid, started=self.started,
                    finished=run.finished if run is not None else self.started,
                    exit_status=run.exit_status if run is not None else None))
            except OSError as exc:
                sys.stderr.write(f"gpuconf: could not write {directory / MANIFEST}: {exc}\n")
                continue
            if left:
                shown = ", ".join(left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
                sys.stderr.write(f"gpuconf: {directory} holds {len(left)} file(s) this run did not write, left out of "
                                 f"{MANIFEST} (`gpuconf report verify` calls them unlisted): {shown}\n")
        if run is not None and run.error is None:  # last: the sign-off is what the terminal ends with
            from gpuconf.plugin.terminal import write_closing_block

            sys.stderr.flush()
            write_closing_block(config, run, self.results, self.report_dir)

    def _finish_junit(self, run: RunRecord) -> None:
        """pytest's junit.xml made a sign-off's (gpuconf.report.junit.finish_junit): named for gpuconf, the
        verdict, the sign-off and untested-node cases, DEGRADED told from FAIL; one line if it cannot be."""
        import os
        import sys

        from gpuconf.report.junit import finish_junit
        from gpuconf.report.model import from_test_report

        given = getattr(self.config.option, "xmlpath", None)  # as pytest's junitxml resolved it
        path = Path(self.config.invocation_params.dir, os.path.expanduser(os.path.expandvars(given or "")))
        if not given or not path.is_file():
            return  # no junit.xml this run (-p no:junitxml)
        results = [from_test_report(nodeid, t["outcome"], t["duration"], t["properties"], t["longrepr"])
                   for nodeid, t in self.tests.items()]
        try:
            finish_junit(path, run, results)
        except OSError as exc:
            sys.stderr.write(f"{exc}\n")

    def _intended(self) -> str | None:
        from gpuconf.kit.state import cluster_source

        source = cluster_source(self.config)
        context = self.config.getoption("--context")
        if source is None or source.provenance.startswith("simulated:"):
            return source.provenance if source is not None else None
        return source.provenance + (f"@{context}" if context else "")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
        """Write the reports, also after Ctrl-C (exit status 2): what was collected so far, marked interrupted."""
        import time

        from gpuconf.report.model import RunRecord, from_test_report, resolve_blocked
        from gpuconf.report.writers import write_reports

        state = self.config.stash.get(SESSION, None)
        handle = state.handle if state is not None else None
        if state is not None and state.unreachable is not None:
            from gpuconf.cluster.errors import EXIT_UNREACHABLE

            exitstatus = EXIT_UNREACHABLE
        coverage = run_coverage(self.config)
        plan = state.shard if state is not None else None
        if plan is not None and not plan.nodes and int(exitstatus) == int(pytest.ExitCode.NO_TESTS_COLLECTED):
            exitstatus = pytest.ExitCode.OK  # a shard the partition gave no node: nothing of its own to test
        by_nodeid = {nodeid: from_test_report(nodeid, t["outcome"], t["duration"], t["properties"], t["longrepr"])
                     for nodeid, t in self.tests.items()}
        by_nodeid = dict(zip(by_nodeid, resolve_blocked(list(by_nodeid.values())), strict=True))
        results = list(by_nodeid.values())
        scope = self._scope()
        if plan is None or plan.nodes:  # a shard the partition gave no node has no verdict of its own
            exitstatus = verdict_exit_status(RunRecord(
                provenance=None, started=self.started, finished=self.started, exit_status=int(exitstatus),
                interrupted=int(exitstatus) == int(pytest.ExitCode.INTERRUPTED), coverage=coverage, scope=scope),
                results, int(exitstatus))
        exitstatus = session.exitstatus = sign_off_nodes(
            self.config, results, int(exitstatus), self.config.pluginmanager.get_plugin("terminalreporter"),
            coverage, partial=bool(scope and scope.get("full") is False))  # before the cluster closes
        run = RunRecord(provenance=handle.provenance if handle is not None else None, started=self.started,
                        finished=time.time(), exit_status=int(exitstatus),
                        interrupted=int(exitstatus) == int(pytest.ExitCode.INTERRUPTED),
                        run_id=state.run.run_id if state is not None and state.run is not None else None,
                        coverage=coverage, shard=self._shard(), options=self._options(), scope=scope,
                        faults=simulated_faults(self.config), server_version=self._server_version())
        self.record = run
        self.results = results
        self._read_cluster_uid()  # before the cluster closes (at unconfigure)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        try:
            write_reports(run, results, self.report_dir)
            self._write_cncf(run, by_nodeid)
        except OSError as exc:
            if reporter is not None:
                reporter.write_line(str(exc), red=True)
            return
        if reporter is not None and plan is not None:
            reporter.write_line(f"gpuconf: {plan.label()} of run {plan.run}: {len(plan.nodes)} of the "
                                f"{len(plan.fleet)} selected GPU nodes" + (
                                    "" if plan.spec.index == 0 else "; cluster-wide checks are shard 0's"))


def verdict_exit_status(run: RunRecord, results: list[Any], exitstatus: int) -> int:
    """The exit status that says the run's verdict (gpuconf.outcomes.EXIT_STATUSES), where pytest's own
    says "tests failed" or "OK": DEGRADED (nothing failed) 17, INCOMPLETE 15, PARTIAL 18. Any other
    status (interrupted, usage error, unreachable...) is kept: it says why the run stopped."""
    from gpuconf.outcomes import EXIT_INCOMPLETE, NOT_TESTED, exit_status_for
    from gpuconf.report.model import cluster_verdict

    if exitstatus not in (int(pytest.ExitCode.OK), int(pytest.ExitCode.TESTS_FAILED)):
        return exitstatus
    verdict = cluster_verdict(run, results)
    if verdict == NOT_TESTED:  # nothing judged: never the exit status of a pass
        return EXIT_INCOMPLETE
    status = exit_status_for(verdict)
    return exitstatus if status is None or (status == 0 and exitstatus != 0) else status


def configure_reports(config: pytest.Config) -> None:
    """Reports are written for runs against a cluster, or wherever --report-dir says: without it into
    the run's own directory under reports/, which reports/latest then points at (gpuconf.plugin.rundir,
    which also keeps a run of no suite check, or a --collect-only preview, from writing any). JUnit
    comes from pytest itself (--junitxml), pointed at junit.xml in that directory unless the user gave one."""
    from gpuconf.kit.state import cluster_source
    from gpuconf.plugin.rundir import ReportPlace, reserve_run_directory

    given = config.getoption("--report-dir")
    if not (given or cluster_source(config) is not None or config.getoption("--cncf-evidence")):
        return
    if hasattr(config, "workerinput"):  # an xdist worker: the controller writes the reports
        return
    base = None if given else Path(config.invocation_params.dir, "reports")
    made_base = base is not None and not base.exists()
    try:
        directory = reserve_run_directory(base) if base is not None else Path(config.invocation_params.dir, given)
    except OSError as exc:
        raise pytest.UsageError(f"cannot make the run's report directory under {base}: {exc}") from exc
    collector = ReportCollector(config, directory)
    junit = not getattr(config.option, "xmlpath", None)
    if junit:
        config.option.xmlpath = str(collector.report_dir / "junit.xml")
    config.pluginmanager.register(ReportPlace(config, collector, base, junit=junit, made_base=made_base),
                                  "gpuconf-report-place")
    config.pluginmanager.register(collector, "gpuconf-reports")
