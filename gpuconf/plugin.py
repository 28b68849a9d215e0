"""The gpuconf pytest plugin (loaded by the root conftest.py).

Cluster options: ``--simulate PROFILE`` runs the very same suites against a simulated GPU cluster
started in-process for the run (torn down after it); ``--kubeconfig``/``--context`` point them at
a real one. The cluster is opened lazily, once per session, at collection (suites parametrize per
GPU node) and closed in ``pytest_unconfigure``; everything the run creates lives in one run
namespace, deleted at the end, on failure and on Ctrl-C. Without a cluster option, suites skip
with the reason. State lives in ``config.stash`` (style.md), never in globals.
"""

from __future__ import annotations

import gc
import re
import signal
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, NoReturn

import pytest

from gpuconf.cluster import (
    ClusterError,
    Inventory,
    OverloadedError,
    PodOutcome,
)
from gpuconf.cluster.campaign import PREPARE_BUDGET_S
from gpuconf.kit.probes import (
    DRA_GPU_CLASS,
    cuda_probe_pod,
    dra_whole_gpus,
    native_probe_cuda,
    probe_block,
    whole_node_claim_template,
    whole_node_request,
)
from gpuconf.kit.state import SESSION, ClusterHandle, Session, compat_cudas, inventory, run_context, session

__all__ = ["ClusterHandle", "Session"]


#: The marker registry, one place (``pytest -m smoke`` for the quick tier): what each selects.
MARKERS = {
    "bandwidth": "host-device copy bandwidth and PCIe links, from the whole-node probe",
    "compat": "the deliberate driver/toolkit mismatch: requirement enforcement, image matrix vs gpuconf predict",
    "dcgm": "the DCGM diagnostics tier (dcgmi diag per node); runs only with --dcgm-diag LEVEL",
    "disruptive": "changes node state (MIG layout, drains); runs only with --allow-disruptive",
    "dra": "Dynamic Resource Allocation: ResourceSlices, claims, CEL selectors",
    "expect": "the cluster against the declared profile given with --expect",
    "health": "device health: Xid, ECC, accelerator metrics, DCGM diagnostics",
    "inventory": "the node inventory checks (labels, capacity, probe views)",
    "isolation": "GPU isolation between pods and containers (secure accelerator access)",
    "mig": "MIG layouts, advertised profiles and instance isolation",
    "nccl": "multi-GPU and multi-node NCCL all-reduce",
    "scheduling": "what the scheduler does with GPU requests; the RuntimeClass",
    "sharing": "time-slicing and MPS: replicas, oversubscription",
    "slow": "the burn-in tier: long-running checks; runs only with --burn-in",
    "smoke": "the quick tier: every GPU runs a verified kernel",
}
#: Rounds of each burn-in check when --burn-in is given without a number.
BURN_IN_ROUNDS = 3

#: Exit statuses beyond pytest's own (0-5), one per reason a run cannot start (README: exit statuses);
#: 10-12 (kubeconfig, unreachable, forbidden) are every cluster command's, from gpuconf.cluster.errors.
EXIT_NO_GPU_NODES = 13
EXIT_BAD_EXPECT = 14


def _exit_for(exc: ClusterError) -> int:
    from gpuconf.cluster.errors import access_exit_status

    status = access_exit_status(exc)
    return int(pytest.ExitCode.USAGE_ERROR) if status is None else status


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpuconf", "gpuconf: GPU cluster conformance")
    group.addoption("--simulate", metavar="PROFILE", default=None,
                    help="run against a simulated GPU cluster started for this run (a shipped profile name, "
                    "see `gpuconf sim profiles`, or a profile YAML file)")
    group.addoption("--kubeconfig", metavar="PATH", default=None, help="kubeconfig of the cluster under test")
    group.addoption("--context", metavar="NAME", default=None, help="kubeconfig context to use")
    group.addoption("--timeout", "--probe-timeout", dest="gpuconf_timeout", metavar="SECONDS", type=float,
                    default=900.0, help="budget for each probe campaign, image pulls and the probe's compile "
                    "included (default 900)")
    group.addoption("--prepare-timeout", dest="prepare_timeout", metavar="SECONDS", type=float,
                    default=PREPARE_BUDGET_S,
                    help="how long a probe pod with ResourceClaims may stay bound, no container started, after "
                    "the kubelet reported FailedPrepareDynamicResources and nothing later, before it is "
                    f"reported as not prepared instead of waited for until --timeout (default {PREPARE_BUDGET_S:g})")
    group.addoption("--api-deadline", dest="api_deadline", metavar="SECONDS", type=float, default=60.0,
                    help="how long one API call may retry what the API server does transiently (429 with its "
                    "Retry-After, 5xx, a reset connection) before the check it serves is reported not tested "
                    "(default 60)")
    group.addoption("--expect", metavar="FILE", default=None,
                    help="a declared cluster profile (YAML, see examples/expect/): node pools by selector with "
                    "their expected GPUs, driver, CUDA, MIG, sharing and runtime mode")
    group.addoption("--namespace", metavar="NAME", default=None,
                    help="run the probes in this existing namespace (created beforehand, kept afterwards) instead "
                    "of a gpuconf-<run-id> namespace created and deleted by the run")
    group.addoption("--liveness-interval", metavar="SECONDS", type=float, default=10.0,
                    help="renew the run's liveness mark (a Lease in its namespace) this often; a later run deletes "
                    "the objects of a run whose mark went unrenewed for three periods (default 10)")
    group.addoption("--node-selector", metavar="SELECTOR", default=None,
                    help="test only the GPU nodes matching this label selector (key=value,key!=value,key,!key)")
    group.addoption("--registry", metavar="REGISTRY", default=None,
                    help="run the prebuilt probe images from this registry (see `gpuconf images list`) instead of "
                    "compiling the probe in the public nvidia/cuda devel image")
    group.addoption("--nccl-nodes", metavar="N", type=int, default=0,
                    help="nodes in the NCCL multi-node job (default 0: every eligible node, at most 16)")
    group.addoption("--kueue-queue", metavar="LOCALQUEUE", default=None,
                    help="submit multi-node NCCL jobs to this Kueue LocalQueue as pod groups (all ranks admitted "
                    "together); without it they are plain pods that meet at a bootstrap barrier")
    group.addoption("--compat-images", dest="compat_images", metavar="VERSIONS", default=None,
                    help="the CUDA versions of the compat suite's probe matrix, comma-separated (e.g. "
                    "12.4,12.8,13.1; each the newest official nvidia/cuda image of that version; default "
                    "gpuconf/data/probe_images.yaml's matrix)")
    group.addoption("--allow-disruptive", action="store_true", default=False,
                    help="also run checks marked disruptive (they change node state, e.g. a MIG layout)")
    group.addoption("--dcgm-diag", dest="dcgm_diag", metavar="LEVEL", type=int, default=None,
                    help="also run the DCGM diagnostics tier: dcgmi diag -r LEVEL on every idle node with whole GPUs "
                    "(1 smoke, 2 acceptance, 3 and 4 burn-in; see gpuconf/data/dcgm_diag.yaml for durations)")
    group.addoption("--burn-in", dest="burn_in", metavar="ROUNDS", nargs="?", type=int, const=BURN_IN_ROUNDS,
                    default=None, help="also run the burn-in tier, the checks marked slow: ROUNDS consecutive "
                    f"rounds of each (default {BURN_IN_ROUNDS}); give it after the paths, or as --burn-in=N")
    group.addoption("--label-nodes", action="store_true", default=False,
                    help="after the run, label each tested node gpuconf.io/verdict=pass|degraded|fail|not-tested and "
                    "annotate it with the run id, the verdict time and its failed checks (nodes not tested: untouched)")
    group.addoption("--taint-failed", action="store_true", default=False,
                    help="with the labels, taint FAIL nodes gpuconf.io/verdict=fail:NoSchedule and untaint nodes that "
                    "pass or are degraded (implies --label-nodes)")
    group.addoption("--report-dir", metavar="DIR", default=None,
                    help="where runs against a cluster write junit.xml, report.json (CTRF), report.md and "
                    "report.html (default reports/, relative to the invocation directory)")
    group.addoption("--cncf-evidence", metavar="DIR", default=None,
                    help="also write CNCF AI conformance evidence into DIR: e2e.log, junit.xml (one testcase per "
                    "requirement, named after the upstream test) and results.json (gpuconf/report/cncf.py)")


def pytest_configure(config: pytest.Config) -> None:
    for name, what in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {what}")
    config.addinivalue_line("markers", "check(id): the check of gpuconf/data/checks.yaml the test proves (recorded "
                            "in the reports even when the test stops before its verdict)")
    config.addinivalue_line("markers", "needs_probe: the test judges probes launched on its node; NOT TESTED where no "
                            "probe image can start there (gpuconf.checks.probe_start)")
    config.addinivalue_line("markers", "cncf(requirement_id): the CNCF AI conformance requirement the test gives "
                            "evidence for (gpuconf/data/cncf_requirements.yaml; --cncf-evidence)")
    config.stash[SESSION] = Session()
    config.pluginmanager.register(_StopWhenUnreachable(config), "gpuconf-unreachable")
    config.pluginmanager.register(_NotTestedWhenOverloaded(), "gpuconf-overloaded")
    _configure_reports(config)
    simulate = config.getoption("--simulate")
    if simulate and config.getoption("--kubeconfig"):
        raise pytest.UsageError("give either --simulate or --kubeconfig, not both")
    _validate_options(config)
    if simulate:
        from gpuconf.sim.profile import ProfileError, load_profile

        try:
            load_profile(simulate)  # fail at startup, with file:line:field, not in the first test
        except ProfileError as exc:
            raise pytest.UsageError(str(exc)) from exc

    if simulate or config.getoption("--kubeconfig"):
        _interrupt_on_sigterm(config)


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


def _interrupt_on_sigterm(config: pytest.Config) -> None:
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
        return  # an embedding program owns its signals
    previous = signal.signal(signal.SIGTERM, _on_sigterm)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    config.add_cleanup(restore)


#: pytest's own markers (registered by its plugins, maybe after this one's pytest_configure).
_BUILTIN_MARKERS = frozenset({"filterwarnings", "parametrize", "skip", "skipif", "tryfirst", "trylast", "usefixtures",
                              "xfail"})
#: The names in a -m expression: pytest's identifier characters (_pytest/mark/expression.py), less
#: the operators.
_MARK_IDENT = re.compile(r"(?:\w|:|\+|-|\.|\[|\]|\\|/)+")


def unknown_markers(expression: str, registered: Iterable[str]) -> list[str]:
    """The names a ``-m`` expression uses that no marker is registered under (pytest would select
    nothing by them, silently, after the cluster started)."""
    known = {line.split(":", 1)[0].split("(", 1)[0].strip() for line in registered} | _BUILTIN_MARKERS
    names = [n for n in _MARK_IDENT.findall(expression) if n not in ("and", "or", "not")]
    return sorted({n for n in names if n not in known})


def _validate_options(config: pytest.Config) -> None:
    """Bad option values end the run at startup with one line (pytest's usage error, exit 4)."""
    import re

    from gpuconf.sim.selectors import SelectorError, parse_label_selector

    markexpr = config.getoption("markexpr", "") or ""
    if unknown := unknown_markers(markexpr, config.getini("markers")):
        raise pytest.UsageError(f"-m {markexpr!r}: no marker named {', '.join(unknown)} (known: "
                                + ", ".join(sorted(MARKERS)) + "; pytest --markers lists all)")

    selector = config.getoption("--node-selector")
    if selector is not None:
        try:
            parse_label_selector(selector)
        except SelectorError as exc:
            raise pytest.UsageError(f"--node-selector {selector!r}: {exc}") from exc
    namespace = config.getoption("--namespace")
    if namespace is not None and not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", namespace):
        raise pytest.UsageError(f"--namespace {namespace!r}: not a namespace name (lowercase letters, digits and "
                                "'-', at most 63)")
    if config.getoption("--liveness-interval") <= 0:
        raise pytest.UsageError(f"--liveness-interval must be positive, not {config.getoption('--liveness-interval')}")
    registry = config.getoption("--registry")
    if registry is not None and (not registry or any(ch.isspace() for ch in registry) or "://" in registry):
        raise pytest.UsageError(f"--registry {registry!r}: give a registry host and path, e.g. "
                                "registry.example.com/gpuconf (no scheme)")
    deadline = config.getoption("api_deadline")
    if not deadline > 0:
        raise pytest.UsageError(f"--api-deadline {deadline:g}: must be a positive number of seconds")
    prepare = config.getoption("prepare_timeout")
    if not prepare > 0:
        raise pytest.UsageError(f"--prepare-timeout {prepare:g}: must be a positive number of seconds")
    timeout = config.getoption("gpuconf_timeout")
    if timeout <= 0:
        raise pytest.UsageError(f"--timeout {timeout:g}: must be a positive number of seconds")
    rounds = config.getoption("burn_in")
    if rounds is not None and rounds < 1:
        raise pytest.UsageError(f"--burn-in {rounds}: give at least one round")
    nccl_nodes = config.getoption("--nccl-nodes")
    if nccl_nodes < 0 or nccl_nodes == 1:
        raise pytest.UsageError(f"--nccl-nodes {nccl_nodes}: give 2 or more nodes (0: every eligible node, "
                                "at most 16)")
    level = config.getoption("dcgm_diag")
    if level is not None and level not in (1, 2, 3, 4):
        raise pytest.UsageError(f"--dcgm-diag {level}: give a level from 1 to 4 (1 short, 2 medium, 3 long, 4 xlong)")
    try:
        compat_cudas(config)
    except ValueError as exc:
        raise pytest.UsageError(f"--compat-images {config.getoption('compat_images')}: {exc}") from exc


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
    if not (config.getoption("--simulate") or config.getoption("--kubeconfig")):
        return
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
    if state.handle is not None and inv is not None and inv.gpu_nodes:
        from gpuconf.cluster.campaign import ensure_priority_class

        try:  # before any test: a refusal here would otherwise end every probe test in a traceback
            ensure_priority_class(state.handle.cluster)
        except ClusterError as exc:
            _cannot_start(config, f"gpuconf: {exc}", _exit_for(exc))
    if inv is not None and not inv.gpu_nodes:
        selector = config.getoption("--node-selector")
        _cannot_start(config, "gpuconf: the cluster has no GPU nodes (no node advertises nvidia.com/gpu, "
                      "nvidia.com/mig-*, a DRA ResourceSlice, or the nvidia.com/gpu.present label)"
                      + (f" matching --node-selector {selector}" if selector else ""), EXIT_NO_GPU_NODES)


def _cannot_start(config: pytest.Config, message: str, status: int) -> NoReturn:
    """End the run before any test with one line and its exit status, leaving reports that say why
    (pytest does not run pytest_sessionfinish for a session that did not start)."""
    collector = config.pluginmanager.get_plugin("gpuconf-reports")
    if isinstance(collector, ReportCollector):
        collector.write_not_started(message.removeprefix("gpuconf: "), status)
    config.stash[SESSION].cannot_start = True
    pytest.exit(message, returncode=status)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``gpu_node`` parametrizes a test over the cluster's GPU nodes, ids = node names."""
    if "gpu_node" not in metafunc.fixturenames:
        return
    inv = inventory(metafunc.config)
    names = [n.name for n in inv.gpu_nodes] if inv is not None else []
    metafunc.parametrize("gpu_node", names or [pytest.param(None, marks=pytest.mark.skip(
        reason=session(metafunc.config).skip_reason or "no GPU nodes"))], ids=names or ["no-cluster"])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A check marker must name a catalogued check; checks marked disruptive change node state: they
    run only with --allow-disruptive; checks marked slow are the burn-in tier: they run only with
    --burn-in."""
    from gpuconf.verdict import checks

    for item in items:
        marker = item.get_closest_marker("check")
        if marker is not None and (len(marker.args) != 1 or marker.args[0] not in checks()):
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.check{marker.args!r} names no check of "
                                    "gpuconf/data/checks.yaml")
        _validate_cncf(item)
    gates = [(name, pytest.mark.skip(reason=reason)) for name, reason, on in (
        ("disruptive", "disruptive (changes node state): give --allow-disruptive to run it",
         config.getoption("--allow-disruptive")),
        ("slow", "burn-in: give --burn-in to run it", config.getoption("burn_in") is not None)) if not on]
    for item in items:
        for name, skip in gates:
            if item.get_closest_marker(name) is not None:
                item.add_marker(skip)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """What exists once the tests are collected (the imported modules, the client's model classes, the
    cluster's inventory, the simulated cluster itself) lives until the run ends: freezing it keeps the
    garbage collector from walking it again at every full collection and at pytest's exit (about a
    sixth of a simulated run's CPU time, measured on plugin-and-dra)."""
    gc.freeze()


def _validate_cncf(item: pytest.Item) -> None:
    from gpuconf.report.cncf import requirement_ids

    for marker in item.iter_markers("cncf"):
        if len(marker.args) != 1 or marker.args[0] not in requirement_ids():
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.cncf{marker.args!r} names no requirement of "
                                    "gpuconf/data/cncf_requirements.yaml")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    """Before each phase's report is built: a test that declares its check (and runs per node) has
    both recorded, also when it skipped or failed before judge() could record them."""
    marker = item.get_closest_marker("check")
    if marker is None or (call.when == "setup" and call.excinfo is None):  # judge() records it in the call
        return
    recorded = {k for k, _ in item.user_properties}
    if "gpuconf.check" not in recorded:
        item.user_properties.append(("gpuconf.check", marker.args[0]))
    callspec = getattr(item, "callspec", None)
    node = callspec.params.get("gpu_node") if callspec is not None else None
    if node and "gpuconf.node" not in recorded:
        item.user_properties.append(("gpuconf.node", node))
    cncf = [str(m.args[0]) for m in item.iter_markers("cncf")]
    if cncf and "gpuconf.cncf" not in recorded:  # the requirements it gives evidence for (--cncf-evidence)
        item.user_properties.append(("gpuconf.cncf", ",".join(cncf)))
    if "gpuconf.outcome" not in recorded and call.excinfo is not None and call.excinfo.errisinstance(
            (pytest.skip.Exception, OverloadedError)):  # a skip before judge(): NOT TESTED, as judge() would say
        item.user_properties.append(("gpuconf.outcome", "not-tested"))


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
                        started=self.started, finished=time.time(), exit_status=exit_status, error=error)
        try:
            write_reports(run, [], self.report_dir)
            write_not_started_junit(run, Path(self.config.option.xmlpath or self.report_dir / "junit.xml"))
            self._write_cncf(run, {})
        except OSError:
            return  # the one line on stderr is the message that matters

    def _write_cncf(self, run: Any, results: Mapping[str, Any]) -> None:
        """The CNCF AI conformance evidence (--cncf-evidence DIR), from the results by nodeid."""
        given = self.config.getoption("--cncf-evidence")
        if not given:
            return
        from gpuconf.report.cncf import from_properties, write_evidence

        evidence = [e for nodeid, result in results.items()
                    if (e := from_properties(result, self.tests[nodeid]["properties"])) is not None]
        write_evidence(run, evidence, Path(self.config.invocation_params.dir, given),
                       options={"--kueue-queue": self.config.getoption("--kueue-queue")})

    def _intended(self) -> str | None:
        simulate, kubeconfig = self.config.getoption("--simulate"), self.config.getoption("--kubeconfig")
        return f"simulated:{simulate}" if simulate else f"kubeconfig:{kubeconfig}" if kubeconfig else None

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
        """Write the reports, also after Ctrl-C (exit status 2): what was collected so far, marked interrupted."""
        import time

        from gpuconf.report.model import RunRecord, from_test_report
        from gpuconf.report.writers import write_reports

        state = self.config.stash.get(SESSION, None)
        handle = state.handle if state is not None else None
        if state is not None and state.unreachable is not None:
            from gpuconf.cluster.errors import EXIT_UNREACHABLE

            exitstatus = EXIT_UNREACHABLE
        exitstatus = session.exitstatus = _sign_off(self.config, [from_test_report(
            nodeid, t["outcome"], t["duration"], t["properties"], t["longrepr"]) for nodeid, t in self.tests.items()],
            int(exitstatus), self.config.pluginmanager.get_plugin("terminalreporter"))  # before the cluster closes
        run = RunRecord(provenance=handle.provenance if handle is not None else None, started=self.started,
                        finished=time.time(), exit_status=int(exitstatus),
                        interrupted=int(exitstatus) == int(pytest.ExitCode.INTERRUPTED),
                        run_id=state.run.run_id if state is not None and state.run is not None else None)
        by_nodeid = {nodeid: from_test_report(nodeid, t["outcome"], t["duration"], t["properties"], t["longrepr"])
                     for nodeid, t in self.tests.items()}
        results = list(by_nodeid.values())
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        try:
            write_reports(run, results, self.report_dir)
            self._write_cncf(run, by_nodeid)
        except OSError as exc:
            if reporter is not None:
                reporter.write_line(str(exc), red=True)
            return
        if reporter is not None:
            reporter.write("\n")
            reporter.write_line(f"gpuconf: reports in {self.report_dir}")
            if self.config.getoption("--cncf-evidence"):
                reporter.write_line(f"gpuconf: CNCF evidence in {self.config.getoption('--cncf-evidence')}")


def _sign_off(config: pytest.Config, results: list[Any], exitstatus: int, reporter: Any) -> int:
    """--label-nodes/--taint-failed: sign off each node of the run's inventory that has a check result
    (gpuconf.cluster.signoff). Only a run that finished (all passed, or some failed) signs off; the
    exit status becomes 12/11 when RBAC refused the patches or the API server was gone."""
    from datetime import UTC, datetime

    from gpuconf.cluster import ForbiddenError, UnreachableError
    from gpuconf.cluster.errors import access_exit_status
    from gpuconf.cluster.signoff import NodeSignOff, sign_off
    from gpuconf.report.model import DEGRADED, FAIL, node_verdicts

    taint = bool(config.getoption("--taint-failed"))
    state = config.stash.get(SESSION, None)
    if not (taint or config.getoption("--label-nodes")) or state is None or state.handle is None:
        return exitstatus

    def say(line: str, red: bool = False) -> None:
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(line, red=red)

    if exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        say(f"gpuconf: nodes not signed off: the run did not finish (exit status {exitstatus})", red=True)
        return exitstatus
    tested = {n.name for n in state.inventory.gpu_nodes} if state.inventory is not None else set()
    signoffs = [NodeSignOff(node, verdict, tuple(r.check for r in results
                                                 if r.node == node and r.outcome in (FAIL, DEGRADED)))
                for node, verdict in node_verdicts(results).items() if node in tested]
    done = sign_off(state.handle.cluster, signoffs, run_id=state.run.run_id if state.run is not None else None,
                    when=datetime.now(UTC), taint_failed=taint)
    say("gpuconf: nodes signed off: " + (", ".join(
        f"{r.node} {r.verdict}" + (f" (taint {r.taint})" if r.taint else "") for r in done if r.error is None)
        or "none"))
    for r in done:
        if r.error is not None:
            say(f"gpuconf: {r.node} not signed off: {r.error}", red=True)
            if isinstance(r.error, ForbiddenError | UnreachableError) and exitstatus in (0, 1):
                exitstatus = access_exit_status(r.error) or exitstatus
    return exitstatus


def _configure_reports(config: pytest.Config) -> None:
    """Reports are written for runs against a cluster, or wherever --report-dir says; JUnit comes from
    pytest itself (--junitxml), pointed at <report-dir>/junit.xml unless the user gave one."""
    given = config.getoption("--report-dir")
    if not (given or config.getoption("--simulate") or config.getoption("--kubeconfig")
            or config.getoption("--cncf-evidence")):
        return
    if hasattr(config, "workerinput"):  # an xdist worker: the controller writes the reports
        return
    directory = Path(config.invocation_params.dir, given or "reports")
    config.pluginmanager.register(ReportCollector(config, directory), "gpuconf-reports")
    if not getattr(config.option, "xmlpath", None):
        config.option.xmlpath = str(directory / "junit.xml")


@pytest.fixture(scope="session")
def gpu_cluster(request: pytest.FixtureRequest) -> Iterator[ClusterHandle]:
    """The cluster under test for the whole session."""
    state = session(request.config)
    if state.handle is None:
        pytest.skip(state.skip_reason or "no cluster")
    yield state.handle


@pytest.fixture(scope="session")
def gpu_inventory(request: pytest.FixtureRequest, gpu_cluster: ClusterHandle) -> Inventory:
    inv = inventory(request.config)
    assert inv is not None
    return inv


@pytest.fixture(scope="session")
def whole_node_probes(request: pytest.FixtureRequest, gpu_inventory: Inventory) -> dict[str, PodOutcome]:
    """One cuda-probe per GPU node asking for every allocatable nvidia.com/gpu, launched together; on a
    node that publishes its GPUs through DRA only, one ResourceClaim for all of them (allocation mode
    All), so inventory, smoke, health and metrics cover DRA nodes too."""
    from gpuconf.cluster import run_campaign

    state = session(request.config)
    if state.probes:
        return state.probes
    ctx = run_context(request.config)
    pods = []
    template: str | None = None
    for node in gpu_inventory.gpu_nodes:
        count = whole_node_request(node)
        claims: dict[str, str] = {}
        if count < 1:
            if not dra_whole_gpus(node) or DRA_GPU_CLASS not in gpu_inventory.device_classes:
                continue
            template = template or whole_node_claim_template(ctx)
            claims = {"gpus": template}
        pods.append(cuda_probe_pod(request.config, name=f"inventory-{node.name}", check="inventory", node=node.name,
                                   gpu_count=count if not claims else 0, resource_claims=claims or None,
                                   cuda=native_probe_cuda(node.labels)))
    outcomes = run_campaign(ctx, pods, timeout=request.config.getoption("gpuconf_timeout"))
    state.probes = {o.node or name.removeprefix("inventory-"): o for name, o in outcomes.items()}
    return state.probes


@pytest.fixture(scope="session")
def expect_profile(request: pytest.FixtureRequest) -> Any:
    """The declared cluster profile given with --expect (gpuconf.expect.ExpectProfile), or None."""
    return request.config.stash[SESSION].expect


@pytest.fixture(scope="session")
def exporter_scrapes(gpu_cluster: ClusterHandle, gpu_inventory: Inventory) -> dict[str, Any]:
    """Every GPU node's DCGM exporter, found by one cluster-wide pod list and scraped once through
    the API server's pod proxy, all nodes at once: node name -> gpuconf.checks.metrics.ExporterScrape
    (per GPU UUID its labels and values, or the error / not-tested reason)."""
    from gpuconf.checks.metrics import exporter_scrape
    from gpuconf.cluster.metrics import scrape_nodes

    scrapes = scrape_nodes(gpu_cluster.cluster, [n.name for n in gpu_inventory.gpu_nodes])
    return {node: exporter_scrape(node, s.pod.ref if s.pod is not None else None, text=s.text, error=s.error,
                                  forbidden=s.forbidden) for node, s in scrapes.items()}


@pytest.fixture(autouse=True)
def _probe_can_start(request: pytest.FixtureRequest) -> None:
    """A test marked ``needs_probe`` judges probes launched on its node (``gpu_node``): where no probe
    image can start there (the whole-node probe's finding), it is NOT TESTED with that reason; the
    smoke check reports the cause once."""
    if request.node.get_closest_marker("needs_probe") is None:
        return
    callspec = getattr(request.node, "callspec", None)
    node = callspec.params.get("gpu_node") if callspec is not None else None
    if not node:
        return
    block = probe_block(request.getfixturevalue("whole_node_probes"), node)
    if block is not None:
        pytest.skip(block.reason)
