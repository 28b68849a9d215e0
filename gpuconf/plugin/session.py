"""The run's session: configured (markers, state, guards, reports, options), the cluster opened
at session start (suites parametrize over its GPU nodes, so a run that cannot start ends there with
one line and its own exit status), and closed at unconfigure with the run's namespace and the
simulated cluster."""

from __future__ import annotations

from typing import NoReturn

import pytest

from gpuconf.cluster import Cluster, ClusterError
from gpuconf.cluster.errors import EXIT_BAD_KUBECONFIG
from gpuconf.kit.state import SESSION, Session, aims_at_suites, cluster_source, inventory
from gpuconf.plugin.collection import register_markers
from gpuconf.plugin.guards import interrupt_on_sigterm, register_guards
from gpuconf.plugin.options import validate_options
from gpuconf.plugin.reports import ReportCollector, configure_reports

#: Exit statuses beyond pytest's own (0-5), one per reason a run cannot start (README: exit statuses);
#: 10-12 (kubeconfig, unreachable, forbidden) are every cluster command's, from gpuconf.cluster.errors;
#: 15 (finished, nothing failed, GPU nodes left untested) is gpuconf.plugin.fleet's.
EXIT_NO_GPU_NODES = 13
EXIT_BAD_EXPECT = 14
#: The --namespace holds a live run's liveness mark: two runs in one namespace collide on object names.
EXIT_NAMESPACE_BUSY = 16


def _exit_for(exc: ClusterError) -> int:
    from gpuconf.cluster.errors import access_exit_status

    status = access_exit_status(exc)
    return int(pytest.ExitCode.USAGE_ERROR) if status is None else status


def pytest_configure(config: pytest.Config) -> None:
    """The markers first (the ``-m`` check reads them), the session's state, the guards, the reports,
    then the options; SIGTERM is caught as Ctrl-C only in runs against a cluster."""
    register_markers(config)
    config.stash[SESSION] = Session()
    register_guards(config)
    configure_reports(config)
    validate_options(config)
    if cluster_source(config) is not None:
        interrupt_on_sigterm(config)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Open the cluster before collection (suites parametrize over its GPU nodes), so a run that
    cannot start ends here with one line and its own exit status, not with collection errors. An
    interrupt here (Ctrl-C, SIGTERM) still leaves reports saying so (pytest runs no sessionfinish
    for a session that did not start)."""
    try:
        _start(session.config)
    except KeyboardInterrupt:
        collector = session.config.pluginmanager.get_plugin("gpuconf-reports")
        if isinstance(collector, ReportCollector):
            collector.write_not_started("interrupted before the first test", pytest.ExitCode.INTERRUPTED)
        raise


def _start(config: pytest.Config) -> None:
    expect = config.getoption("--expect")
    if expect:
        from gpuconf.expect import ExpectError, load_expect

        try:
            config.stash[SESSION].expect = load_expect(expect)
        except ExpectError as exc:  # before connecting: a typo in the file costs no cluster round trip
            _cannot_start(config, f"gpuconf: --expect: {exc}", EXIT_BAD_EXPECT)
    if cluster_source(config) is None:
        if aims_at_suites(config) and not config.option.collectonly:
            _cannot_start(config, _no_cluster(), EXIT_BAD_KUBECONFIG)
        return  # suite checks collected from elsewhere end the run then (pytest_collection_modifyitems)
    try:
        inv = inventory(config)
    except ClusterError as exc:
        _cannot_start(config, f"gpuconf: {exc}", _exit_for(exc))
    namespace = config.getoption("--namespace")
    state = config.stash[SESSION]
    if namespace and state.handle is not None:
        from gpuconf.cluster.errors import NotFoundError

        c = state.handle.cluster
        try:
            c.call("read namespace", c.core.read_namespace, namespace)
        except NotFoundError:
            _cannot_start(config, f"gpuconf: --namespace {namespace}: no such namespace (give an existing one, or "
                          "leave --namespace out and the run creates its own)", pytest.ExitCode.USAGE_ERROR)
        except ClusterError:
            pass  # not allowed to read it, say: the run context reports what it cannot do when it gets there
        _refuse_a_busy_namespace(config, c, namespace)
    if state.handle is not None and inv is not None and inv.gpu_nodes:
        from gpuconf.cluster.campaign import ensure_priority_class

        try:  # before any test: a refusal here would otherwise end every probe test in a traceback
            ensure_priority_class(state.handle.cluster)
        except ClusterError as exc:
            _cannot_start(config, f"gpuconf: {exc}", _exit_for(exc))
    fleet = state.fleet or inv
    if fleet is not None and not fleet.gpu_nodes:
        selector = config.getoption("--node-selector")
        _cannot_start(config, "gpuconf: the cluster has no GPU nodes (no node advertises nvidia.com/gpu, "
                      "nvidia.com/mig-*, a DRA ResourceSlice, or the nvidia.com/gpu.present label)"
                      + (f" matching --node-selector {selector}" if selector else ""), EXIT_NO_GPU_NODES)


def _refuse_a_busy_namespace(config: pytest.Config, c: Cluster, namespace: str) -> None:
    """End the run with one line and exit status 16 where another gpuconf run is live in the shared
    ``namespace`` (its liveness mark current): both would create probe pods, Services, claim templates
    and ConfigMaps under the same names, and each would delete the other's at its end. A killed run's
    expired mark does not count (the run collects its objects). An identity that may not list Leases
    is not refused (the run context says what it could not do). Two runs starting within the same
    second can both pass: the check reads, it does not lock."""
    from gpuconf.cluster.campaign import live_runs

    try:
        runs = live_runs(c, namespace)
    except ClusterError:
        return
    if runs:
        _cannot_start(config, f"gpuconf: --namespace {namespace} is in use by gpuconf run {', '.join(runs)} (its "
                      "liveness mark is current): runs sharing a namespace collide on their probes' names; give this "
                      "run its own --namespace, or start it after that run ends", EXIT_NAMESPACE_BUSY)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, items: list[pytest.Item]) -> None:
    """A run that collected suite checks (gpuconf.plugin.rundir.is_suite_check) from outside suites/ but
    has no cluster to test ends here, with one line and exit status 10, as a run of suites/ does at its
    start: never a green run of skips (a CI job that lost its kubeconfig). A --collect-only preview is
    not refused: it runs nothing (and writes no reports, gpuconf.plugin.rundir). Last of the collection
    hooks: after a bad check marker's usage error, and after -m and -k deselected."""
    from gpuconf.plugin.rundir import is_suite_check

    config = session.config
    if config.option.collectonly or cluster_source(config) is not None \
            or not any(is_suite_check(item) for item in items):
        return
    _cannot_start(config, _no_cluster(), EXIT_BAD_KUBECONFIG, collected=True)


def _no_cluster() -> str:
    from gpuconf.cluster import cluster_source as find_cluster
    from gpuconf.cluster.access import NO_CLUSTER

    why = NO_CLUSTER if find_cluster() is None else (
        "the run's test paths are not in a suites/ directory: it takes no cluster from $KUBECONFIG, "
        "~/.kube/config or the pod's service account")
    return f"gpuconf: no cluster to test: give --kubeconfig PATH or --simulate PROFILE ({why})"


def _cannot_start(config: pytest.Config, message: str, status: int, *, collected: bool = False) -> NoReturn:
    """End the run before any test with one line and its exit status, leaving reports that say why
    (pytest does not run pytest_sessionfinish for a session that did not start). Once ``collected``,
    pytest finishes the session: its report writers are stopped, the manifest kept, and the line is
    written here (pytest prints an exit during collection only as the terminal's closing banner)."""
    collector = config.pluginmanager.get_plugin("gpuconf-reports")
    if isinstance(collector, ReportCollector):
        collector.write_not_started(message.removeprefix("gpuconf: "), status)
        if collected:
            from gpuconf.plugin.rundir import stop_writers

            stop_writers(config, collector, junit=True, manifest=True)
    config.stash[SESSION].cannot_start = True
    if collected:
        import sys

        sys.stderr.write(f"{message}\n")
    pytest.exit(message, returncode=status)


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(SESSION, None)
    if state is None:
        return
    if state.cannot_start:
        # pytest printed "Exit: <why>" already; the terminal reporter would repeat it as its closing
        # banner: one line says why a run cannot start
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and hasattr(reporter, "_keyboardinterrupt_memo"):
            reporter._keyboardinterrupt_memo = None
    if state.run is not None:
        import sys

        run = state.run
        if run.collected:
            sys.stderr.write(f"gpuconf: deleted what killed runs left: {', '.join(run.collected)}\n")
        if run.collect_error:
            sys.stderr.write(f"gpuconf: what killed runs left was not collected: {run.collect_error}\n")
        try:
            run.__exit__(None, None, None)
        except ClusterError as exc:  # one line, not a traceback: what is left and who removes it
            sys.stderr.write(f"gpuconf: {exc}\n")
    if state.sim is not None:
        state.sim.stop()
    if state.sim_dir is not None:  # the simulated cluster's kubeconfig dies with it
        import shutil

        shutil.rmtree(state.sim_dir, ignore_errors=True)
