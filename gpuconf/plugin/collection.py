"""Collection: the marker registry, the ``-m`` check, ``gpu_node`` parametrization over the
cluster's GPU nodes, the tiers' gates (disruptive, slow), the check and cncf markers' validation,
and the check and node each test's report records."""

from __future__ import annotations

import gc
import re
from collections.abc import Iterable

import pytest

from gpuconf.cluster import OverloadedError
from gpuconf.kit.state import inventory, session

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
    "security": "security floors: component versions against NVIDIA's security bulletins (--security-floor)",
    "sharing": "time-slicing and MPS: replicas, oversubscription",
    "slow": "the burn-in tier: long-running checks; runs only with --burn-in",
    "smoke": "the quick tier: every GPU runs a verified kernel",
}


def register_markers(config: pytest.Config) -> None:
    """The registry above, and the markers that name what a test proves (``--strict-markers``)."""
    for name, what in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {what}")
    config.addinivalue_line("markers", "check(id): the check of gpuconf/data/checks.yaml the test proves (recorded "
                            "in the reports even when the test stops before its verdict)")
    config.addinivalue_line("markers", "shard_home(nodes): in a sharded run, a cluster-wide test runs in the shard "
                            "holding most of the nodes nodes(fleet views) names (shard 0 without the marker)")
    config.addinivalue_line("markers", "needs_probe: the test judges probes launched on its node; NOT TESTED where no "
                            "probe image can start there (gpuconf.checks.probe_start)")
    config.addinivalue_line("markers", "cncf(requirement_id): the CNCF AI conformance requirement the test gives "
                            "evidence for (gpuconf/data/cncf_requirements.yaml; --cncf-evidence)")


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


def check_mark_expression(config: pytest.Config) -> None:
    """A ``-m`` naming no registered marker ends the run at startup (exit 4), not after the cluster
    started with nothing selected."""
    markexpr = config.getoption("markexpr", "") or ""
    if unknown := unknown_markers(markexpr, config.getini("markers")):
        raise pytest.UsageError(f"-m {markexpr!r}: no marker named {', '.join(unknown)} (known: "
                                + ", ".join(sorted(MARKERS)) + "; pytest --markers lists all)")


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
    gates = [(name, reason) for name, reason, on in (
        ("disruptive", "disruptive (changes node state): give --allow-disruptive to run it",
         config.getoption("--allow-disruptive")),
        ("slow", "burn-in: give --burn-in to run it", config.getoption("burn_in") is not None)) if not on]
    for item in items:
        for name, reason in gates:
            if item.get_closest_marker(name) is not None:
                item.stash[_GATED] = reason
    _keep_the_shards_tests(config, items)


#: Why an item of an opt-in tier the run did not ask for is NOT TESTED (not selected).
_GATED = pytest.StashKey[str]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """An opt-in tier's test (disruptive, burn-in) the run did not ask for: NOT TESTED, not selected."""
    reason = item.stash.get(_GATED, None)
    if reason is not None:
        from gpuconf.kit.evidence import skip_not_tested
        from gpuconf.outcomes import NOT_SELECTED

        skip_not_tested(reason, NOT_SELECTED)


def _keep_the_shards_tests(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a sharded run (--shard), a cluster-wide test (not parametrized over a GPU node) runs in one
    shard: shard 0, or for a test marked ``shard_home(nodes)`` the shard holding most of the nodes it
    needs (the DRA GPUs a claim steers to, the nodes of the NCCL multi-node job), so a shard 0 without
    such nodes does not leave it NOT TESTED; and a shard holding no GPU node drops the per-node tests'
    placeholder: what a shard does not test is another shard's, not a NOT TESTED of its own."""
    import dataclasses

    from gpuconf.kit.state import SESSION, fleet_views

    plan = config.stash[SESSION].shard
    if plan is None:
        return

    def home(item: pytest.Item) -> int:
        marker = item.get_closest_marker("shard_home")
        return plan.home(marker.args[0](fleet_views(config))) if marker is not None else 0

    def node_param(item: pytest.Item) -> tuple[bool, object]:
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec is not None else {}
        return "gpu_node" in params, params.get("gpu_node")

    keep, dropped = [], []
    homes: dict[str, tuple[str | None, int]] = {}
    for item in items:
        per_node, node = node_param(item)
        if not per_node:
            check = item.get_closest_marker("check")
            homes[item.nodeid] = (str(check.args[0]) if check is not None and check.args else None, home(item))
        if (not per_node and homes[item.nodeid][1] != plan.spec.index) or (per_node and node is None):
            dropped.append(item)
        else:
            keep.append(item)
    # Every shard records every cluster-wide test's shard, so the merge can name a missing shard's.
    config.stash[SESSION].shard = dataclasses.replace(plan, homes=homes)
    if dropped:
        from gpuconf.plugin.scope import SCOPE

        config.stash[SCOPE].shard_dropped.update(i.nodeid for i in dropped)  # another shard's, not deselected
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


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
    recorded = {k for k, _ in item.user_properties}
    if marker is None:
        _record_kind(item, call, recorded)
    if marker is None or (call.when == "setup" and call.excinfo is None):  # judge() records it in the call
        return
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
    _record_kind(item, call, recorded)


def _record_kind(item: pytest.Item, call: pytest.CallInfo[None], recorded: set[str]) -> None:
    """A skip's NOT TESTED kind (and owner, node state) as properties, from gpuconf.kit.skip_not_tested;
    a bare pytest.skip is could-not-run (an unclassified NOT TESTED is never taken for "not applicable"),
    an API server that sheds load could-not-run."""
    from gpuconf.kit.evidence import BLOCKED_BY_PROPERTY, KIND_PROPERTY, STATE_PROPERTY
    from gpuconf.outcomes import COULD_NOT_RUN

    if call.excinfo is None or KIND_PROPERTY in recorded or not call.excinfo.errisinstance(
            (pytest.skip.Exception, OverloadedError)):
        return
    exc = call.excinfo.value
    item.user_properties.append((KIND_PROPERTY, getattr(exc, "gpuconf_kind", None) or COULD_NOT_RUN))
    for prop, attr in ((BLOCKED_BY_PROPERTY, "gpuconf_blocked_by"), (STATE_PROPERTY, "gpuconf_state")):
        if getattr(exc, attr, None):
            item.user_properties.append((prop, getattr(exc, attr)))
