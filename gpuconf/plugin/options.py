"""The gpuconf command-line options, and their values checked at startup: a bad value (or a
simulated profile that does not load) ends the run before it touches a cluster, with one line
(pytest's usage error, exit 4)."""

from __future__ import annotations

import re

import pytest

from gpuconf.cluster.campaign import PREPARE_BUDGET_S
from gpuconf.kit.state import compat_cudas
from gpuconf.plugin.collection import check_mark_expression

#: Rounds of each burn-in check when --burn-in is given without a number.
BURN_IN_ROUNDS = 3


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpuconf", "gpuconf: GPU cluster conformance")
    group.addoption("--simulate", metavar="PROFILE", default=None,
                    help="run against a simulated GPU cluster started for this run (a shipped profile name, "
                    "see `gpuconf sim profiles`, or a profile YAML file)")
    group.addoption("--kubeconfig", metavar="PATH", default=None,
                    help="kubeconfig of the cluster under test (default for a run of suites/: $KUBECONFIG, else "
                    "~/.kube/config, else the pod's service account; none of them: exit status 10)")
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
    group.addoption("--include-cordoned", action="store_true", default=False,
                    help="test cordoned GPU nodes too: the probe pods tolerate node.kubernetes.io/unschedulable, so "
                    "the scheduler places them on nodes that take no other work (accepting new nodes before "
                    "they are uncordoned); without it a cordoned node is NOT TESTED")
    group.addoption("--tolerate", metavar="KEY[=VALUE][:EFFECT]", action="append", default=[],
                    help="the probe pods tolerate this taint (kubectl taint's syntax, e.g. "
                    "dedicated=training:NoSchedule; no value: any value; no effect: every effect); repeatable. "
                    "A GPU node with a NoSchedule/NoExecute taint the probes do not tolerate is NOT TESTED")
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
    group.addoption("--security-floor", dest="security_floor", metavar="FILE", default=None,
                    help="judge component versions against this security-floor table instead of the built-in "
                    "gpuconf/data/security_advisories.yaml (same schema: advisories with their CVEs, severities "
                    "and fixed versions per component and driver branch, and which severities fail)")
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
    group.addoption("--shard", metavar="I/N", default=None,
                    help="test shard I (from 0) of N: a deterministic share of the selected GPU nodes, pools kept "
                    "whole where they fit (cluster-wide checks run in shard 0 only); merge the shards' report "
                    "directories with `gpuconf report merge`. In an Indexed Job, JOB_COMPLETION_INDEX with "
                    "GPUCONF_SHARDS=N say the same (manifests/runner/job-sharded.yaml)")
    group.addoption("--shard-run", metavar="NAME", default=None,
                    help="the sharded run's name, the same for every shard of one run (default GPUCONF_SHARD_RUN; "
                    "the Indexed Job gives its controller uid): `gpuconf report merge` refuses shards of "
                    "different runs")
    group.addoption("--report-dir", metavar="DIR", default=None,
                    help="where runs against a cluster write junit.xml, report.json (CTRF), report.md and "
                    "report.html (default reports/, relative to the invocation directory)")
    group.addoption("--cncf-evidence", metavar="DIR", default=None,
                    help="also write CNCF AI conformance evidence into DIR in the reference suite's shapes: junit.xml "
                    "(gotestsum), results.json (go test -json), e2e.log (go test -v), with a test per requirement "
                    "named after the upstream test and subtests per check and node; PRODUCT.fragment.yaml and "
                    "gpuconf-cncf.json (gpuconf/report/cncf.py); a simulated run's evidence is marked SIMULATED and "
                    "is never written under a v1.xx/<product>/ submission directory")


def validate_options(config: pytest.Config) -> None:
    """Bad option values end the run at startup with one line (pytest's usage error, exit 4)."""
    from gpuconf.sim.selectors import SelectorError, parse_label_selector

    simulate = config.getoption("--simulate")
    if simulate and config.getoption("--kubeconfig"):
        raise pytest.UsageError("give either --simulate or --kubeconfig, not both")
    evidence = config.getoption("--cncf-evidence")
    if simulate and evidence:
        from pathlib import Path

        from gpuconf.report.cncf import simulated_refusal

        refused = simulated_refusal(Path(config.invocation_params.dir, evidence))
        if refused is not None:
            raise pytest.UsageError(f"--cncf-evidence {evidence}: {refused}")
    check_mark_expression(config)
    import os

    from gpuconf.kit.state import SESSION
    from gpuconf.shards import ShardError, shard_spec

    try:
        config.stash[SESSION].shard_spec = shard_spec(config.getoption("--shard"), config.getoption("--shard-run"),
                                                      os.environ)
    except ShardError as exc:
        raise pytest.UsageError(str(exc)) from exc
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
    from gpuconf.nodes import TolerationError, parse_toleration

    for given in config.getoption("--tolerate"):
        try:
            parse_toleration(given)
        except TolerationError as exc:
            raise pytest.UsageError(f"--tolerate {exc}") from exc
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
    floor = config.getoption("security_floor")
    if floor is not None:
        from gpuconf.checks.security import SecurityFloorError, load_floors

        try:
            load_floors(floor)
        except SecurityFloorError as exc:
            raise pytest.UsageError(f"--security-floor {exc}") from exc
    if simulate:
        from gpuconf.sim.profile import ProfileError, load_profile

        try:
            load_profile(simulate)  # fail at startup, with file:line:field, not in the first test
        except ProfileError as exc:
            raise pytest.UsageError(str(exc)) from exc
