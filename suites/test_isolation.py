"""Isolation (secure accelerator access): on every GPU node, a pod sees the GPUs it was allocated
and no others. One campaign launches every isolation pod of every node together (launch once,
assert many): pods that request no GPU (one of them setting NVIDIA_VISIBLE_DEVICES=all), pods
requesting one and two GPUs, and a two-container pod where only one container requests a GPU (it
is also the second of the two one-GPU pods that run at the same time: the two hold their GPUs until
each probe saw the other hold its own, a rendezvous by name under a headless Service, so they
overlap by construction). The decisions are in gpuconf.checks.isolation."""

from __future__ import annotations

import pytest

from gpuconf.checks import isolation as checks
from gpuconf.checks.probe_start import blocked_by
from gpuconf.cluster import Inventory, PodOutcome, run_campaign
from gpuconf.cluster.campaign import SCHEDULE_BUDGET_ANNOTATION
from gpuconf.kit import cuda_probe_pod, judge, rendezvous_group, require, run_context
from gpuconf.nodes import GpuRequest, NodeView
from gpuconf.verdict import Verdict

pytestmark = pytest.mark.isolation

Observations = dict[str, dict[str, PodOutcome]]  # node -> role -> outcome


def gpu_request(gpu_nodes: dict[str, NodeView], node: str) -> GpuRequest:
    """How the node's isolation pods ask for one GPU (NOT TESTED with the node view's reason where
    they cannot: MIG instances only, no DeviceClass to claim DRA GPUs with, none allocatable)."""
    return require(gpu_nodes[node].one_gpu())


@pytest.fixture(scope="module")
def isolation_probes(request: pytest.FixtureRequest, gpu_nodes: dict[str, NodeView]) -> Observations:
    """Every isolation pod of every GPU node, pinned by nodeSelector, in one campaign."""
    timeout = request.config.getoption("--probe-timeout")
    pods, roles = [], {}
    for node in gpu_nodes.values():
        if node.blocked() is not None:  # NotReady, cordoned, an untolerated taint: its checks say so
            continue
        ask = node.one_gpu()
        plan = checks.plan_node(node.name, node.offered(ask) if ask else 0,
                                max_request=ask.per_container if ask else None,
                                shared=bool(ask) and ask.replicas > 1)
        # the two concurrent pods hold their GPUs until each saw the other's (the probe's rendezvous)
        group = [p.role for p in plan if p.together]
        meet = rendezvous_group(request.config, check="isolation", prefix="iso-together", key=node.name,
                                hostnames=group) if group else {}
        for planned in plan:
            # N GPUs as the node view asks for N: the device plugin's resource, a DRA-backed extended
            # resource, or one claim for N devices; a pod that requests none gets neither limits nor claim
            sized = node.gpus(planned.gpu_count, check="the isolation pods") if planned.gpu_count else None
            pod = cuda_probe_pod(request.config, name=planned.name, check="isolation", node=node.name,
                                 ask=sized or None, gpu_count=planned.gpu_count,
                                 gpu_resource=ask.resource if ask and ask.resource else "nvidia.com/gpu",
                                 sidecar_gpu_count=planned.sidecar_gpu_count, env=dict(planned.env),
                                 rendezvous=meet.get(planned.role))
            if planned.waits:  # queued behind the node's other GPU pods: it may be Pending a while
                pod["metadata"].setdefault("annotations", {})[SCHEDULE_BUDGET_ANNOTATION] = str(int(timeout))
            pods.append(pod)
            roles[planned.name] = (node.name, planned.role)
    # GPUs through DRA: which devices each claim got is read from the claims while the pods run
    dra = any((ask := n.one_gpu()) and ask.dra for n in gpu_nodes.values() if n.blocked() is None)
    outcomes = run_campaign(run_context(request.config), pods, timeout=timeout, record_claims=dra)
    observed: Observations = {}
    for name, outcome in outcomes.items():
        node, role = roles[name]
        observed.setdefault(node, {})[role] = outcome
    return observed


def seen(probes: Observations, node: str, role: str, container: str = "probe") -> checks.Sighting | None:
    outcome = probes.get(node, {}).get(role)
    return checks.sighting(outcome, container) if outcome is not None else None


# One root cause, one failure (gpuconf.checks.probe_start.blocked_by): a runtime that injects GPUs
# a pod was not allocated fails sees-only-allocated, a toolkit that honours NVIDIA_VISIBLE_DEVICES
# from unprivileged containers fails envvar-without-request; the checks that observe the same
# mechanism through their own pods are NOT TESTED, blocked by them, when they fail too.


def grants(gpu_nodes: dict[str, NodeView], probes: Observations, node: str) -> dict[str, checks.ClaimGrant] | None:
    """What each GPU pod of ``node`` was allocated through its claims (by sighting), where the node view
    asks through DRA; None where the device plugin allocates."""
    ask = gpu_nodes[node].one_gpu()
    if not (ask and ask.dra):
        return None
    return {checks.sighting(outcome).where: checks.claim_grant(outcome, gpu_nodes[node].devices)
            for role, outcome in probes.get(node, {}).items() if role in ("one", "split", "two")}


@pytest.fixture(scope="module")
def claim_owners(request: pytest.FixtureRequest, gpu_inventory: Inventory, gpu_nodes: dict[str, NodeView],
                 selected_check_ids: frozenset[str]) -> dict[str, Verdict | None]:
    """dra.claim-allocates-the-probed-device's verdict on each node whose isolation pods get their GPUs
    through DRA claims: sees-only-allocated defers a claim mismatch to it only where it failed on the
    same node. Computed from the DRA suite's own campaigns (launched once per session, by whichever
    suite needs them first), so it does not depend on the order the suites run in; empty where that
    check is not part of the run."""
    if checks.CLAIM_OWNER not in selected_check_ids:
        return {}
    owner = next((item.module for item in request.session.items if (mark := item.get_closest_marker("check"))
                  is not None and mark.args[0] == checks.CLAIM_OWNER), None)
    if owner is None:
        return {}
    return {name: owner.claim_owner(request.config, gpu_inventory, gpu_nodes, name)
            for name, view in gpu_nodes.items() if view.blocked() is None and (ask := view.one_gpu()) and ask.dra}


def sees_only_allocated(node: str, gpu_nodes: dict[str, NodeView], probes: Observations,
                        owners: dict[str, Verdict | None]) -> Verdict | None:
    ask = gpu_nodes[node].one_gpu()
    if not isinstance(ask, GpuRequest):
        return None
    observed = [(n, s) for n, role in ((1, "one"), (2, "two")) if (s := seen(probes, node, role)) is not None]
    return checks.evaluate_sees_only_allocated(node, observed, replicas=ask.replicas,
                                               allocatable=gpu_nodes[node].offered(ask),
                                               one_per_container=ask.per_container == 1,
                                               grants=grants(gpu_nodes, probes, node), owner=owners.get(node))


def envvar_honoured(node: str, probes: Observations) -> Verdict | None:
    sighting = seen(probes, node, "envvar")
    return checks.evaluate_envvar_without_request(node, sighting) if sighting is not None else None


@pytest.mark.cncf("secure_accelerator_access")
@pytest.mark.check("isolation.no-request-sees-no-gpu")
def test_no_request_sees_no_gpu(gpu_node, gpu_nodes, isolation_probes, claim_owners, record_property):
    sighting = seen(isolation_probes, gpu_node, "none")
    assert sighting is not None
    judge(blocked_by(checks.evaluate_no_request_sees_no_gpu(gpu_node, sighting),
                     sees_only_allocated(gpu_node, gpu_nodes, isolation_probes, claim_owners),
                     envvar_honoured(gpu_node, isolation_probes)), record_property)


@pytest.mark.cncf("secure_accelerator_access")
@pytest.mark.check("isolation.envvar-without-request-gets-no-gpu")
def test_envvar_without_request_gets_no_gpu(gpu_node, gpu_nodes, isolation_probes, claim_owners, record_property):
    sighting = seen(isolation_probes, gpu_node, "envvar")
    assert sighting is not None
    judge(blocked_by(checks.evaluate_envvar_without_request(gpu_node, sighting),
                     sees_only_allocated(gpu_node, gpu_nodes, isolation_probes, claim_owners)), record_property)


@pytest.mark.cncf("secure_accelerator_access")
@pytest.mark.needs_probe
@pytest.mark.check("isolation.sees-only-allocated")
def test_sees_only_allocated(gpu_node, gpu_nodes, isolation_probes, claim_owners, record_property):
    gpu_request(gpu_nodes, gpu_node)  # NOT TESTED with the node view's reason where it cannot ask for one GPU
    judge(sees_only_allocated(gpu_node, gpu_nodes, isolation_probes, claim_owners), record_property)


@pytest.mark.cncf("secure_accelerator_access")
@pytest.mark.needs_probe
@pytest.mark.check("isolation.concurrent-pods-disjoint")
def test_concurrent_pods_disjoint(gpu_node, gpu_nodes, isolation_probes, claim_owners, record_property):
    ask = gpu_request(gpu_nodes, gpu_node)
    pods = isolation_probes.get(gpu_node, {})
    together = checks.held_together(pods["one"], pods["split"]) if {"one", "split"} <= set(pods) else None
    judge(blocked_by(checks.evaluate_concurrent_pods_disjoint(
        gpu_node, seen(isolation_probes, gpu_node, "one"), seen(isolation_probes, gpu_node, "split"),
        allocatable=gpu_nodes[gpu_node].offered(ask), replicas=ask.replicas, together=together,
        grants=grants(gpu_nodes, isolation_probes, gpu_node)),
        sees_only_allocated(gpu_node, gpu_nodes, isolation_probes, claim_owners)), record_property)


@pytest.mark.cncf("secure_accelerator_access")
@pytest.mark.needs_probe
@pytest.mark.check("isolation.only-requesting-container-sees-gpu")
def test_only_requesting_container_sees_gpu(gpu_node, gpu_nodes, isolation_probes, claim_owners,
                                            record_property):
    gpu_request(gpu_nodes, gpu_node)  # NOT TESTED with the node view's reason where it cannot ask for one GPU
    requester, other = seen(isolation_probes, gpu_node, "split"), seen(isolation_probes, gpu_node, "split", "sidecar")
    assert requester is not None and other is not None
    judge(blocked_by(checks.evaluate_only_requesting_container(gpu_node, requester, other),
                     sees_only_allocated(gpu_node, gpu_nodes, isolation_probes, claim_owners),
                     envvar_honoured(gpu_node, isolation_probes)), record_property)
