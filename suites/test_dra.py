"""DRA (resource.k8s.io/v1): on every node where NVIDIA's DRA driver publishes GPUs, the published
devices are the hardware, published once, and ResourceClaims get the devices they were allocated.

Runs when the cluster serves resource.k8s.io/v1 and has the DeviceClass gpu.nvidia.com; skips with
the reason otherwise. Two campaigns (launch once, assert many): every node's whole-node claim pod
(allocationMode All) and unsatisfiable-selector pod together, then every node's selector-claim,
two-claim, shared-claim (two containers, one claim, and a third container without it) and
matched-pair (count 2, matchAttribute productName) pods, with one pod of no node selection whose
claim selects an attribute value only some nodes' GPUs have. The campaigns record each pod's
claims as seen allocated while it runs (a generated claim is deallocated and deleted once its pod
is done); after them, a list and a short watch tell whether the generated claims are gone. Pods are
placed by nodeSelector, never nodeName. The decisions are in gpuconf.checks.dra."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from gpuconf.checks import dra as checks
from gpuconf.checks import dra_extended, dra_labels, dra_taints
from gpuconf.checks.isolation import Sighting, sighting
from gpuconf.checks.probe_start import blocked_by, claim_prepare_block
from gpuconf.cluster import ClusterError, Inventory, OverloadedError, PodOutcome, RunContext, run_campaign
from gpuconf.cluster.access import stream_lines
from gpuconf.cluster.campaign import SCHEDULE_BUDGET_ANNOTATION
from gpuconf.kit import cuda_probe_pod, judge, native_probe_cuda, run_context, session, skip_not_tested
from gpuconf.nodes import NodeView, Via
from gpuconf.outcomes import BLOCKED, COULD_NOT_RUN, NOT_APPLICABLE
from gpuconf.probe_pods import ClaimRequest, make_resource_claim_template
from gpuconf.verdict import Verdict, not_tested

pytestmark = pytest.mark.dra

Record = Callable[[str, object], None]  # pytest's record_property

#: How long the unsatisfiable-claim pod may stay unschedulable before the campaign stops following
#: it: the scheduler reports FailedScheduling within its first cycle, well under this.
UNSATISFIABLE_BUDGET_S = 5.0
#: How long, after a campaign's pods are deleted, their generated claims may take to disappear.
CLAIM_DELETION_S = 30.0
#: The GPUs a node's second-campaign pods ask for together: selector 1, two 2, shared 1, pair 2.
SECOND_CAMPAIGN_GPUS = 6


# -------------------------------------------------------------------------------------------------
# Cluster facts: is DRA there, and what do the ResourceSlices publish


@dataclass(frozen=True)
class DraFacts:
    devices: dict[str, tuple[checks.SliceDevice, ...]]  # node -> its published devices
    device_classes: tuple[str, ...]


@pytest.fixture(scope="module")
def dra_facts(gpu_inventory: Inventory) -> DraFacts:
    reason = checks.dra_skip_reason(serves_v1=gpu_inventory.dra_served, device_classes=gpu_inventory.device_classes,
                                    served=gpu_inventory.dra_version)
    if reason is not None:
        skip_not_tested(reason, checks.dra_skip_kind(serves_v1=gpu_inventory.dra_served,
                                                     served=gpu_inventory.dra_version))
    return facts_of(gpu_inventory)


def facts_of(gpu_inventory: Inventory) -> DraFacts:
    slices = [s.raw for s in gpu_inventory.slices]
    return DraFacts({n.name: checks.slice_devices(slices, n.name) for n in gpu_inventory.gpu_nodes},
                    gpu_inventory.device_classes)


def node_devices(facts: DraFacts, node: str) -> tuple[checks.SliceDevice, ...]:
    devices = facts.devices.get(node, ())
    reason = checks.node_skip_reason(node, devices)
    if reason is not None:  # its GPUs are not DRA-managed
        skip_not_tested(reason, NOT_APPLICABLE)
    return devices


# -------------------------------------------------------------------------------------------------
# The campaigns


@dataclass
class DraRun:
    outcomes: dict[str, dict[str, PodOutcome]] = field(default_factory=dict)  # node -> role -> outcome
    allocations: dict[str, list[checks.Allocation]] = field(default_factory=dict)  # pod -> its claims
    thresholds: dict[str, int] = field(default_factory=dict)  # node -> the selector's GiB
    claim_errors: dict[str, str | None] = field(default_factory=dict)  # pod -> why its claims may be unseen
    pods: dict[str, list[str]] = field(default_factory=dict)  # node -> its pods that claim devices
    steering: checks.Steering | None = None
    steer: PodOutcome | None = None  # the pod with no node selection
    left: tuple[str, ...] = ()  # generated claims still there after the campaigns
    left_error: str | None = None  # why that is unknown
    held: dict[str, tuple[checks.SliceDevice, ...]] = field(default_factory=dict)  # node -> tainted out of service

    def outcome(self, node: str, role: str) -> PodOutcome | None:
        return self.outcomes.get(node, {}).get(role)

    def sighting(self, node: str, role: str) -> Sighting | None:
        outcome = self.outcome(node, role)
        return sighting(outcome) if outcome is not None else None

    def claims(self, node: str, role: str) -> list[checks.Allocation]:
        """The pod's claims as last seen allocated; when none was seen because the watch on the
        claims broke, the test errors with that (no verdict from missing evidence)."""
        name = checks.pod_name(role, node)
        found = self.allocations.get(name, [])
        error = self.claim_errors.get(name)
        if not found and error and role != "none":
            pytest.fail(f"the allocations of {name}'s claims are unknown: {error}", pytrace=False)
        return found


def _create_template(config: pytest.Config, name: str, requests: list[ClaimRequest],
                     match_attributes: list[str] | None = None) -> str:
    ctx = run_context(config)
    body = make_resource_claim_template(name=name, namespace=ctx.namespace, run_id=ctx.run_id, check="dra",
                                        requests=requests, match_attributes=match_attributes or ())
    api = ctx.cluster.resource
    return ctx.create("resourceclaimtemplate", api.create_namespaced_resource_claim_template,
                      api.delete_namespaced_resource_claim_template, body)


def out_of_service(devices: tuple[checks.SliceDevice, ...],
                   rules: tuple[dra_taints.TaintRule, ...]) -> tuple[checks.SliceDevice, ...]:
    """The devices a NoSchedule/NoExecute taint (the slice's, or a DeviceTaintRule's) keeps from any claim."""
    return tuple(d for d in devices if any(t.blocks_allocation for t, _ in dra_taints.taints_of(d, rules)))


def _all_devices_template(config: pytest.Config, devices: tuple[checks.SliceDevice, ...],
                          classes: tuple[str, ...], held: tuple[checks.SliceDevice, ...] = ()) -> str:
    """Every device of the node in one claim: allocationMode All, or, where some are tainted out of
    service (``held``), ExactCount of the usable rest: the scheduler fails an All request over a
    device whose taint the claim does not tolerate (KEP-5055), and one tainted GPU must not keep the
    node's other devices from being judged (dra.devices-untainted names it)."""
    kinds = sorted({d.kind for d in devices} & {"gpu", "mig"})
    if "mig" in kinds and checks.MIG_CLASS not in classes:
        kinds.remove("mig")
    requests = []
    for kind in kinds or ["gpu"]:
        usable = sum(d.kind == kind and d not in held for d in devices)
        if not any(d.kind == kind for d in held):
            requests.append(ClaimRequest(kind, checks.GPU_CLASS if kind == "gpu" else checks.MIG_CLASS, mode="All"))
        elif usable:
            requests.append(ClaimRequest(kind, checks.GPU_CLASS if kind == "gpu" else checks.MIG_CLASS, count=usable))
    sized = "-".join(f"{r.name}{r.count}" if r.mode != "All" else r.name for r in requests)
    return _create_template(config, f"dra-{'usable' if held else 'all'}-{sized or 'gpu'}", requests)


#: The session's DRA campaigns: launched once, by this suite or by the first check of another suite
#: that needs its owner's verdict (the isolation suite's sees-only-allocated), whichever runs first.
DRA_RUN = pytest.StashKey[DraRun]()


@pytest.fixture(scope="module")
def dra_run(request: pytest.FixtureRequest, gpu_inventory: Inventory, gpu_nodes: dict[str, NodeView],
            dra_facts: DraFacts) -> DraRun:
    return shared_run(request.config, gpu_inventory, gpu_nodes, dra_facts)


def shared_run(config: pytest.Config, gpu_inventory: Inventory, gpu_nodes: dict[str, NodeView],
               dra_facts: DraFacts) -> DraRun:
    """The DRA campaigns, launched on the first call of the session and kept for the rest of it."""
    if (run := config.stash.get(DRA_RUN, None)) is None:
        run = config.stash[DRA_RUN] = _launch(config, gpu_inventory, gpu_nodes, dra_facts)
    return run


def claim_owner(config: pytest.Config, gpu_inventory: Inventory, gpu_nodes: dict[str, NodeView],
                node: str) -> Verdict | None:
    """dra.claim-allocates-the-probed-device's verdict on ``node``, from the session's DRA campaigns (launched
    here when this suite has not run yet), for a check of another suite whose pods' claims it owns; None
    where DRA is not served or the node's GPUs are not DRA-managed."""
    if checks.dra_skip_reason(serves_v1=gpu_inventory.dra_served, device_classes=gpu_inventory.device_classes,
                              served=gpu_inventory.dra_version) is not None:
        return None
    facts = facts_of(gpu_inventory)
    devices = facts.devices.get(node, ())
    if checks.node_skip_reason(node, devices) is not None:
        return None
    return probed_device(shared_run(config, gpu_inventory, gpu_nodes, facts), node, devices)


def _launch(config: pytest.Config, gpu_inventory: Inventory, gpu_nodes: dict[str, NodeView],
            dra_facts: DraFacts) -> DraRun:
    ctx = run_context(config)
    timeout = config.getoption("gpuconf_timeout")
    nodes = [n for n in gpu_inventory.gpu_nodes if dra_facts.devices.get(n.name)]
    run = DraRun()
    roles: dict[str, tuple[str, str]] = {}
    first: list[dict[str, Any]] = []
    second: list[dict[str, Any]] = []
    unsatisfiable = _create_template(config, "dra-unsatisfiable", [ClaimRequest(
        "gpu", checks.GPU_CLASS, (checks.UNSATISFIABLE_SELECTOR,))])
    one_gpu = _create_template(config, "dra-one-gpu", [ClaimRequest("gpu", checks.GPU_CLASS)])

    def pod(node: Any, role: str, claims: dict[str, str], budget: float | None = None,
            **kw: Any) -> dict[str, Any]:
        name = checks.pod_name(role, node.name)
        roles[name] = (node.name, role)
        if role != "none":
            run.pods.setdefault(node.name, []).append(name)
        body = cuda_probe_pod(config, name=name, check="dra", node=node.name, gpu_count=0, resource_claims=claims,
                              cuda=native_probe_cuda(gpu_nodes[node.name]), **kw)
        if budget is not None:
            body["metadata"].setdefault("annotations", {})[SCHEDULE_BUDGET_ANNOTATION] = str(int(budget))
        return body

    pair = _create_template(config, "dra-pair", [ClaimRequest("gpus", checks.GPU_CLASS, count=2)],
                            match_attributes=[f"{checks.GPU_DRIVER}/{checks.PAIR_ATTRIBUTE}"])
    for node in nodes:
        devices = dra_facts.devices[node.name]
        held = out_of_service(devices, taint_rules(gpu_inventory))
        run.held[node.name] = held
        first.append(pod(node, "all", {"gpus": _all_devices_template(config, devices, dra_facts.device_classes,
                                                                     held)}))
        first.append(pod(node, "none", {"gpu": unsatisfiable}, UNSATISFIABLE_BUDGET_S))
        gib = checks.selector_threshold_gib(devices)
        gpus = sum(d.kind == "gpu" for d in devices)
        # The node's claim pods (and perhaps the steered one) queue for its GPUs when too few.
        waits = timeout if gpus <= SECOND_CAMPAIGN_GPUS else None
        if gib is not None:
            run.thresholds[node.name] = gib
            template = _create_template(config, f"dra-mem-{gib}gi", [ClaimRequest(
                "gpu", checks.GPU_CLASS, (checks.memory_selector(gib),))])
            second.append(pod(node, "selector", {"gpu": template}, waits))
        if gpus >= 1:
            second.append(pod(node, "shared", {"gpu": one_gpu}, waits, sidecar_claims=["gpu"], bystander=True))
        if gpus >= 2:
            second.append(pod(node, "two", {"first": one_gpu, "second": one_gpu}, waits))
            second.append(pod(node, "pair", {"gpus": pair}, waits))

    run.steering = checks.steering_attribute({n.name: dra_facts.devices[n.name] for n in nodes})
    steer_name = checks.pod_name("steer", "cluster")
    if run.steering is not None:
        steering = run.steering
        template = _create_template(config, "dra-steer", [ClaimRequest("gpu", checks.GPU_CLASS,
                                                                       (steering.selector,))])
        like = gpu_nodes[steering.matching[0]]
        body = cuda_probe_pod(config, name=steer_name, check="dra", node=None, gpu_count=0,
                              resource_claims={"gpu": template}, cuda=native_probe_cuda(like))
        body["metadata"].setdefault("annotations", {})[SCHEDULE_BUDGET_ANNOTATION] = str(int(timeout))
        if session(config).shard is not None:  # a shard steers among its own nodes (another's are not probed here)
            # one term per node (terms are ORed): a node field selector takes exactly one value
            body["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}
                                      for name in sorted(dra_facts.devices)]}}}
        second.append(body)

    for pods in (first, second):
        if pods:
            for name, outcome in run_campaign(ctx, pods, timeout=timeout, record_claims=True).items():
                seen = [a for a in map(checks.allocation_of, outcome.claims) if a is not None]
                run.allocations[name] = sorted(seen, key=lambda a: a.pod_claim or a.claim)
                run.claim_errors[name] = outcome.claims_error
                if name == steer_name:
                    run.steer = outcome
                    continue
                node_name, role = roles[name]
                run.outcomes.setdefault(node_name, {})[role] = outcome
    generated = {a.claim for allocs in run.allocations.values() for a in allocs if a.pod_claim is not None}
    run.left, run.left_error = _claims_left(ctx, generated, CLAIM_DELETION_S)
    return run


def _claims_left(ctx: RunContext, names: set[str], wait_s: float) -> tuple[tuple[str, ...], str | None]:
    """Which of the claims ``names`` still exist: one list, then a watch for their deletion that
    ends when all are gone or after ``wait_s``. The error says why that is unknown."""
    c = ctx.cluster
    try:
        listing = c.call_json("list resourceclaims", c.resource.list_namespaced_resource_claim, ctx.namespace)
        left = {str((i.get("metadata") or {}).get("name")) for i in listing.get("items") or []} & names
        version = str((listing.get("metadata") or {}).get("resourceVersion") or "")
        deadline = time.monotonic() + wait_s
        while left and (remaining := deadline - time.monotonic()) > 0:
            response: Any = c.call("watch resourceclaims", c.resource.list_namespaced_resource_claim, ctx.namespace,
                                   watch=True, resource_version=version, allow_watch_bookmarks=True,
                                   timeout_seconds=max(1, int(remaining)), _preload_content=False,
                                   _request_timeout=(c.retry.request_timeout, remaining + 5))
            try:
                for line in stream_lines(response):
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        return tuple(sorted(left)), f"watching resourceclaims: {obj.get('message') or obj}"
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    if event.get("type") == "DELETED":
                        left.discard(str((obj.get("metadata") or {}).get("name")))
                    if not left:
                        break
            finally:
                response.close()
                response.release_conn()
    except OverloadedError:  # the API server's state, not the node's: the check is not tested
        raise
    except (ClusterError, OSError, ValueError) as e:
        return tuple(sorted(names)), f"following the claims' deletion: {e}"
    return tuple(sorted(left)), None


def blocked_by_prepare(run: DraRun, node: str | None, outcome: PodOutcome | None, what: str) -> None:
    """NOT TESTED "blocked by dra.attributes-match-hardware: ..." where ``outcome``'s pod never
    started because the DRA driver could not prepare a device of ``node`` that the node's all-devices
    claim could not have prepared either: that check fails for it, once (one root cause, one
    failure; gpuconf.checks.probe_start). A pod that fails to prepare a device the all-devices claim
    prepared is this check's own finding."""
    whole = run.outcome(node, "all") if node else None
    if outcome is None or whole is None or node is None:
        return
    owner = claim_prepare_block(node, whole, what="the all-devices claim")
    mine = claim_prepare_block(node, outcome, what=what)
    if owner is None or mine is None:
        return
    gone = checks.prepare_failures(owner.evidence)
    if set(checks.prepare_failures(mine.evidence)) <= set(gone):
        skip_not_tested(mine.reason, BLOCKED, blocked_by=mine.owner)


def probed_device(run: DraRun, node: str | None, devices: tuple[checks.SliceDevice, ...]) -> Verdict | None:
    """dra.claim-allocates-the-probed-device's verdict on ``node``: where it fails (the pod sees
    another GPU than its claim was allocated), the checks that compare another pod's allocation with
    what it sees fail for the same reason and are NOT TESTED, blocked by it
    (gpuconf.checks.probe_start.blocked_by); None where it does not judge the node."""
    if node is None or node not in run.thresholds or not devices:
        return None
    name = checks.pod_name("selector", node)
    if not run.allocations.get(name) and run.claim_errors.get(name):
        return None  # it fails for the unknown allocation, not for a device
    return checks.evaluate_claim_allocates_probed_device(node, run.sighting(node, "selector"),
                                                         run.claims(node, "selector"), devices,
                                                         min_gib=run.thresholds[node])


# -------------------------------------------------------------------------------------------------
# The checks


@pytest.mark.cncf("driver_runtime_management")
@pytest.mark.check("dra.attributes-match-hardware")
def test_attributes_match_hardware(request: pytest.FixtureRequest, gpu_node: str, gpu_inventory: Inventory,
                                   dra_facts: DraFacts, dra_run: DraRun, record_property: Record) -> None:
    devices = node_devices(dra_facts, gpu_node)
    whole = dra_run.outcomes.get(gpu_node, {}).get("all")
    prepare = [e.message for e in whole.events if e.reason == "FailedPrepareDynamicResources"] if whole else []
    # the run's whole-node probe claims every device of a DRA-only node too: its prepare failure is this
    # check's finding, which that probe's dependants are blocked by (gpuconf.checks.probe_start)
    probe = request.getfixturevalue("whole_node_probes").get(gpu_node)
    prepare += [e.message for e in probe.events if e.reason == "FailedPrepareDynamicResources"] if probe else []
    judge(checks.evaluate_attributes_match_hardware(gpu_node, devices, dra_run.sighting(gpu_node, "all"), prepare,
                                                    held_back=dra_run.held.get(gpu_node, ())), record_property)


@pytest.mark.cncf("dra_support")
@pytest.mark.check("dra.no-double-publication")
def test_no_double_publication(request: pytest.FixtureRequest, gpu_node: str, gpu_nodes: dict[str, NodeView],
                               dra_facts: DraFacts, record_property: Record) -> None:
    devices = node_devices(dra_facts, gpu_node)
    capacity = gpu_nodes[gpu_node].capacity
    plugin_view = None
    if (ask := gpu_nodes[gpu_node].one_gpu()) and ask.via is Via.PLUGIN:  # the whole-node probe asked the plugin
        outcome = request.getfixturevalue("whole_node_probes").get(gpu_node)
        plugin_view = sighting(outcome) if outcome is not None else None
    judge(checks.evaluate_no_double_publication(gpu_node, devices, capacity, plugin_view,
                                                extended=gpu_nodes[gpu_node].extended), record_property)


@pytest.mark.cncf("dra_support")
@pytest.mark.check("dra.claim-allocates-the-probed-device")
def test_claim_allocates_the_probed_device(request: pytest.FixtureRequest, gpu_node: str, dra_facts: DraFacts,
                                           dra_run: DraRun, record_property: Record) -> None:
    devices = node_devices(dra_facts, gpu_node)
    if gpu_node not in dra_run.thresholds:  # not applicable where it publishes MIG devices only
        skip_not_tested(f"{gpu_node} publishes no GPU with a memory capacity: no memory selector to try",
                        COULD_NOT_RUN if any(d.kind == "gpu" for d in devices) else NOT_APPLICABLE)
    blocked_by_prepare(dra_run, gpu_node, dra_run.outcome(gpu_node, "selector"), "the selector claim")
    judge(blocked_by(checks.evaluate_claim_allocates_probed_device(
        gpu_node, dra_run.sighting(gpu_node, "selector"), dra_run.claims(gpu_node, "selector"), devices,
        min_gib=dra_run.thresholds[gpu_node]), stale_mapping(request, [gpu_node])), record_property)


@pytest.mark.cncf("dra_support")
@pytest.mark.check("dra.unsatisfiable-selector-pending")
def test_unsatisfiable_selector_pending(gpu_node: str, dra_facts: DraFacts, dra_run: DraRun,
                                       record_property: Record) -> None:
    node_devices(dra_facts, gpu_node)
    judge(checks.evaluate_unsatisfiable_pending(gpu_node, dra_run.outcome(gpu_node, "none"),
                                                dra_run.claims(gpu_node, "none"), budget_s=UNSATISFIABLE_BUDGET_S),
          record_property)


@pytest.mark.cncf("dra_support")
@pytest.mark.check("dra.distinct-claims-distinct-devices")
def test_distinct_claims_distinct_devices(request: pytest.FixtureRequest, gpu_node: str, dra_facts: DraFacts,
                                          dra_run: DraRun, record_property: Record) -> None:
    devices = node_devices(dra_facts, gpu_node)
    blocked_by_prepare(dra_run, gpu_node, dra_run.outcome(gpu_node, "two"), "a claim of the two-claim pod")
    judge(blocked_by(checks.evaluate_distinct_claims(gpu_node, dra_run.sighting(gpu_node, "two"),
                                                     dra_run.claims(gpu_node, "two"), devices),
                     stale_mapping(request, [gpu_node]), probed_device(dra_run, gpu_node, devices)),
          record_property)


def steerable_nodes(views: Mapping[str, NodeView]) -> tuple[str, ...]:
    """The nodes whose DRA GPUs a steering selector chooses among: in a sharded run the shard holding
    most of them steers (``shard_home``), not a shard 0 that may have none."""
    steering = checks.steering_attribute({view.name: view.devices for view in views.values()})
    return steering.nodes if steering is not None else ()


@pytest.mark.cncf("dra_support")
@pytest.mark.check("dra.selector-steers-scheduling")
@pytest.mark.shard_home.with_args(steerable_nodes)
def test_selector_steers_scheduling(request: pytest.FixtureRequest, dra_facts: DraFacts, dra_run: DraRun,
                                    record_property: Record) -> None:
    if dra_run.steering is None:  # not applicable where the nodes publish MIG devices only
        whole = any(d.kind == "gpu" for ds in dra_facts.devices.values() for d in ds)
        skip_not_tested("no published GPU carries a productName or driverVersion attribute to select on",
                        COULD_NOT_RUN if whole else NOT_APPLICABLE)
    if dra_run.steer is not None and not dra_run.steer.claims and dra_run.steer.claims_error:
        pytest.fail(f"the allocation of the steered pod's claim is unknown: {dra_run.steer.claims_error}",
                    pytrace=False)
    outcome = dra_run.steer
    blocked_by_prepare(dra_run, outcome.node if outcome is not None else None, outcome, "the steered pod's claim")
    landed = outcome.node if outcome is not None else None
    judge(blocked_by(checks.evaluate_selector_steers_scheduling(
        dra_run.steering, outcome, sighting(outcome) if outcome is not None else None,
        dra_run.allocations.get(outcome.name, []) if outcome is not None else [], dra_facts.devices),
        stale_mapping(request, list(dra_run.steering.matching)),
        probed_device(dra_run, landed, dra_facts.devices.get(landed or "", ()))), record_property)


@pytest.mark.cncf("secure_accelerator_access")
@pytest.mark.check("dra.shared-claim-same-device")
def test_shared_claim_same_device(request: pytest.FixtureRequest, gpu_node: str, dra_facts: DraFacts,
                                  dra_run: DraRun, record_property: Record) -> None:
    devices = node_devices(dra_facts, gpu_node)
    outcome = dra_run.outcome(gpu_node, "shared")
    blocked_by_prepare(dra_run, gpu_node, outcome, "the shared claim")
    probe, sidecar, bystander = (sighting(outcome, c) if outcome is not None else None
                                 for c in ("probe", "sidecar", "bystander"))
    judge(blocked_by(checks.evaluate_shared_claim(gpu_node, probe, sidecar, bystander,
                                                  dra_run.claims(gpu_node, "shared"), devices),
                     stale_mapping(request, [gpu_node]), probed_device(dra_run, gpu_node, devices)),
          record_property)


@pytest.mark.cncf("dra_support")
@pytest.mark.check("dra.claim-reserved-then-deleted")
def test_claim_reserved_then_deleted(gpu_node: str, dra_facts: DraFacts, dra_run: DraRun,
                                     record_property: Record) -> None:
    node_devices(dra_facts, gpu_node)
    claims = {pod: dra_run.allocations.get(pod, []) for pod in dra_run.pods.get(gpu_node, [])}
    judge(checks.evaluate_claim_lifecycle(gpu_node, claims, dra_run.left, dra_run.left_error), record_property)


@pytest.mark.cncf("dra_support")
@pytest.mark.check("dra.count-with-match-attribute")
def test_count_with_match_attribute(request: pytest.FixtureRequest, gpu_node: str, dra_facts: DraFacts,
                                    dra_run: DraRun, record_property: Record) -> None:
    devices = node_devices(dra_facts, gpu_node)
    blocked_by_prepare(dra_run, gpu_node, dra_run.outcome(gpu_node, "pair"), "the matched-pair claim")
    judge(blocked_by(checks.evaluate_matched_pair(gpu_node, dra_run.sighting(gpu_node, "pair"),
                                                  dra_run.claims(gpu_node, "pair"), devices),
                     stale_mapping(request, [gpu_node]), probed_device(dra_run, gpu_node, devices)),
          record_property)


@pytest.mark.cncf("driver_runtime_management")
@pytest.mark.check("labels.agree-with-dra")
def test_labels_agree_with_dra(gpu_node: str, gpu_inventory: Inventory, dra_facts: DraFacts,
                               record_property: Record) -> None:
    judge(dra_labels.evaluate_labels_agree_with_dra(gpu_node, gpu_inventory.node(gpu_node).labels,
                                                    dra_facts.devices.get(gpu_node, ())), record_property)


def taint_rules(inventory: Inventory) -> tuple[dra_taints.TaintRule, ...]:
    """The cluster's DeviceTaintRules, where it serves them (none otherwise: the slices' taints stand)."""
    return dra_taints.device_taint_rules(inventory.device_taint_rules or ())


@pytest.mark.cncf("dra_support")
@pytest.mark.check("dra.devices-untainted")
def test_devices_untainted(gpu_node: str, gpu_inventory: Inventory, dra_facts: DraFacts,
                           record_property: Record) -> None:
    devices = node_devices(dra_facts, gpu_node)
    judge(dra_taints.evaluate_devices_untainted(gpu_node, devices, taint_rules(gpu_inventory)), record_property)


@pytest.mark.cncf("dra_support")
@pytest.mark.check("dra.tainted-device-not-allocated")
def test_tainted_device_not_allocated(request: pytest.FixtureRequest, gpu_node: str, gpu_inventory: Inventory,
                                      dra_facts: DraFacts, record_property: Record) -> None:
    devices = node_devices(dra_facts, gpu_node)
    rules = taint_rules(gpu_inventory)
    if not any(t.blocks_allocation for d in devices for t, _ in dra_taints.taints_of(d, rules)):
        judge(dra_taints.evaluate_tainted_not_allocated(gpu_node, devices, (), rules), record_property)
        return
    run: DraRun = request.getfixturevalue("dra_run")
    # every claim the run's probe pods on the node got: the DRA suite's campaigns, and the whole-node
    # probe's where it asked through a claim and recorded it
    pods = run.pods.get(gpu_node, [])
    allocations = [a for pod in pods for a in run.allocations.get(pod, [])]
    errors = [e for pod in pods if (e := run.claim_errors.get(pod))]
    probe = request.getfixturevalue("whole_node_probes").get(gpu_node)
    if probe is not None:
        allocations += [a for a in map(checks.allocation_of, probe.claims) if a is not None]
        if probe.claims_error:
            errors.append(probe.claims_error)
    judge(dra_taints.evaluate_tainted_not_allocated(gpu_node, devices, allocations, rules,
                                                    unknown="; ".join(errors) or None), record_property)


def extended_verdict(request: pytest.FixtureRequest, node: NodeView, devices: tuple[checks.SliceDevice, ...]
                     ) -> Verdict:
    """dra.extended-resource-served's verdict on ``node``: NOT TESTED where it does not apply there or
    the node cannot be asked for its GPUs."""
    if node.extended is None:
        return not_tested(dra_extended.SERVED, node.name, f"not applicable: no DeviceClass maps an extended resource "
                          f"onto the GPUs of {node.name} (or a device plugin advertises it there)", kind=NOT_APPLICABLE)
    ask = node.whole_node()
    if not ask:
        return not_tested(dra_extended.SERVED, node.name, ask.reason, kind=ask.kind)
    outcome = request.getfixturevalue("whole_node_probes").get(node.name)
    return dra_extended.evaluate_extended_resource_served(node.name, resource=node.extended, outcome=outcome,
                                                          devices=devices, requested=ask.count)


def stale_mapping(request: pytest.FixtureRequest, nodes: list[str]) -> Verdict | None:
    """dra.extended-resource-served failing on one of ``nodes`` because the DeviceClass mapping the
    extended resource selects no device (the extended-resource-stale fault): the class is the one
    every claim of this suite names, so each claim pod stays unschedulable for that one cause, which
    that check reports once; the claim checks failing beside it are NOT TESTED, blocked by it."""
    views: dict[str, NodeView] = request.getfixturevalue("gpu_nodes")
    facts: DraFacts = request.getfixturevalue("dra_facts")
    for name in nodes:
        if name in views and views[name].extended is not None:
            verdict = extended_verdict(request, views[name], facts.devices.get(name, ()))
            if isinstance(verdict, Verdict) and verdict.outcome.value == "fail":
                return verdict  # gpuconf.checks.probe_start.blocked_by folds only its class-selects-no-device finding
    return None


@pytest.mark.cncf("dra_support")
@pytest.mark.check("dra.extended-resource-served")
def test_extended_resource_served(request: pytest.FixtureRequest, gpu_node: str, gpu_nodes: dict[str, NodeView],
                                  dra_facts: DraFacts, record_property: Record) -> None:
    judge(extended_verdict(request, gpu_nodes[gpu_node], dra_facts.devices.get(gpu_node, ())), record_property)
