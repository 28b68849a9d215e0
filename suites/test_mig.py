"""MIG: on every node whose labels and resources show MIG instances, or whose mig-manager was told
to create some (``nvidia.com/mig.config``), the layout is the declared one, each instance is
isolated, and no MIG-enabled GPU is also advertised whole. Observation only: nothing here changes a
MIG layout. One campaign launches, per MIG node and advertised profile, a pod holding every
allocatable instance and a pod holding one; mig-manager's declared layouts are read from the GPU
Operator's mig-parted ConfigMap. CUDA enumerates one MIG device per process, so what a pod holds is
read from NVIDIA_VISIBLE_DEVICES, NVML and /dev/nvidiaN. The decisions are in gpuconf.checks.mig."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from gpuconf.checks import mig as checks
from gpuconf.checks.dra import allocation_of
from gpuconf.checks.isolation import Sighting, sighting
from gpuconf.cluster import ClusterError, GpuNode, Inventory, OverloadedError, PodOutcome, run_campaign
from gpuconf.cluster.campaign import SCHEDULE_BUDGET_ANNOTATION
from gpuconf.kit import cuda_probe_pod, judge, run_context
from gpuconf.nodes import NodeView, SliceDevice, Via
from gpuconf.outcomes import COULD_NOT_RUN, NOT_APPLICABLE
from gpuconf.verdict import not_tested

pytestmark = pytest.mark.mig

#: Where the GPU Operator keeps mig-manager's layouts unless its ClusterPolicy says otherwise.
DEFAULT_CONFIGMAP = "default-mig-parted-config"
DEFAULT_NAMESPACE = "gpu-operator"

MigConfigs = tuple[dict[str, list[dict[str, Any]]] | None, str]  # (mig-configs or None, source or why not)


@dataclass
class MigRun:
    skipped: dict[str, str] = field(default_factory=dict)  # node -> why it has no MIG to check
    kinds: dict[str, str] = field(default_factory=dict)  # node -> that NOT TESTED's kind
    all_pods: dict[str, dict[str, Sighting]] = field(default_factory=dict)  # node -> profile -> sighting
    one_pods: dict[str, dict[str, Sighting]] = field(default_factory=dict)
    #: node -> profile -> instances asked for by the ``all`` pod's DRA claim (MIG through DRA)
    claim_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    #: node -> profile -> the slice devices the ``one`` pod's DRA claim was allocated (None: unreadable)
    one_claimed: dict[str, dict[str, tuple[SliceDevice, ...] | None]] = field(default_factory=dict)


def _claimed(outcome: PodOutcome, devices: tuple[SliceDevice, ...]) -> tuple[SliceDevice, ...] | None:
    """The slice devices a pod's ResourceClaims were allocated (None: none recorded, or a device the
    slice does not publish)."""
    by_key = {d.key: d for d in devices}
    allocated = [a for claim in outcome.claims if (alloc := allocation_of(claim)) is not None for a in alloc.devices]
    found = [by_key.get(a.key) for a in allocated]
    return tuple(d for d in found if d is not None) if allocated and all(found) else None


@pytest.fixture(scope="module")
def mig_run(request: pytest.FixtureRequest, gpu_inventory: Inventory, gpu_nodes: dict[str, NodeView]) -> MigRun:
    """Every MIG probe pod of every MIG node, pinned by nodeSelector, in one campaign."""
    config = request.config
    run = MigRun()
    pods, roles = [], {}
    timeout = config.getoption("--probe-timeout")
    claims = False
    for node in gpu_inventory.gpu_nodes:
        devices = gpu_nodes[node.name].devices
        reason = checks.mig_skip_reason(node.name, node.labels, node.capacity, checks.published_layout(devices))
        if reason is not None:  # no MIG on the node: not applicable
            run.skipped[node.name], run.kinds[node.name] = reason, NOT_APPLICABLE
            continue
        for planned in checks.plan_node(node.name, node.labels, node.allocatable, devices):
            # how to ask for the profile's instances is the node view's (MIG resource, nvidia.com/gpu
            # under strategy single, or a claim); the plan says which profiles and how many
            ask = gpu_nodes[node.name].mig_instances(planned.profile, planned.count)
            if not ask:
                run.skipped[node.name], run.kinds[node.name] = ask.reason, ask.kind
                continue
            pod = cuda_probe_pod(config, name=planned.name, check="mig", node=node.name, ask=ask)
            # The all and one pods of a profile queue for the same instances.
            pod["metadata"].setdefault("annotations", {})[SCHEDULE_BUDGET_ANNOTATION] = str(int(timeout))
            pods.append(pod)
            by_claim = ask.via is Via.CLAIM
            claims = claims or by_claim
            roles[planned.name] = (node.name, planned.role, planned.profile, by_claim)
            if by_claim and planned.role == "all":
                run.claim_counts.setdefault(node.name, {})[planned.profile] = planned.count
    outcomes = run_campaign(run_context(config), pods, timeout=timeout, record_claims=claims) if pods else {}
    for name, outcome in outcomes.items():
        node_name, role, profile, by_claim = roles[name]
        target = run.all_pods if role == "all" else run.one_pods
        target.setdefault(node_name, {})[profile] = sighting(outcome)
        if by_claim and role == "one":
            run.one_claimed.setdefault(node_name, {})[profile] = _claimed(outcome, gpu_nodes[node_name].devices)
    return run


@pytest.fixture(scope="module")
def mig_parted(request: pytest.FixtureRequest, gpu_inventory: Inventory) -> MigConfigs:
    """(mig-parted's ``mig-configs``, or None, and where they came from or why they did not)."""
    if not any(checks.CONFIG_LABEL in n.labels for n in gpu_inventory.gpu_nodes):
        return None, f"no node carries {checks.CONFIG_LABEL}"
    policy = gpu_inventory.cluster_policy
    if policy is None:
        return None, "no GPU Operator ClusterPolicy, so no mig-manager config to read"
    manager = policy.spec.get("migManager") or {}
    name = (manager.get("config") or {}).get("name") or DEFAULT_CONFIGMAP
    cluster = run_context(request.config).cluster
    try:
        status = cluster.get_json(f"/apis/nvidia.com/v1/clusterpolicies/{policy.name}").get("status") or {}
        namespace = status.get("namespace") or DEFAULT_NAMESPACE
        where = f"ConfigMap {namespace}/{name}"
        cm = cluster.get_json(f"/api/v1/namespaces/{namespace}/configmaps/{name}")
    except OverloadedError:  # the API server's state, not the node's: the check is not tested
        raise
    except ClusterError as exc:
        return None, f"ConfigMap {name}: {exc.message}"
    text = (cm.get("data") or {}).get("config.yaml")
    if not text:
        return None, f"{where} has no config.yaml"
    try:
        return checks.parse_mig_parted(text), where
    except ValueError as exc:
        return None, f"{where}: {exc}"


def skip_unless_mig(run: MigRun, check: str, node: str, record_property: Callable[[str, object], None]) -> None:
    if node in run.skipped:
        judge(not_tested(check, node, run.skipped[node], kind=run.kinds.get(node, COULD_NOT_RUN)), record_property)


def observed_gpus(run: MigRun, node: GpuNode, devices: tuple[SliceDevice, ...] = ()) -> int:
    """GPUs on the node as observed: MIG parents the probes saw (NVML lists every GPU a container is
    given, where CUDA enumerates one instance) or the DRA driver publishes, plus whole GPUs advertised
    or published."""
    parents = {g.uuid for s in run.all_pods.get(node.name, {}).values() if s.report is not None
               for g in s.report.nvml_gpus if g.mig_enabled is not False}
    parents |= {d.gpu_uuid for d in devices if d.kind == "mig" and d.gpu_uuid}
    whole = 0 if checks.strategy(node.labels) == "single" else int(node.capacity.get("nvidia.com/gpu", "0") or 0)
    published = {d.uuid for d in devices if d.kind == "gpu" and d.uuid} - parents
    return len(parents) + max(whole, len(published))


@pytest.mark.cncf("gpu_sharing")
@pytest.mark.check("mig.layout-matches-config")
def test_layout_matches_config(gpu_node: str, gpu_inventory: Inventory, gpu_nodes: dict[str, NodeView],
                               mig_run: MigRun, mig_parted: MigConfigs,
                               record_property: Callable[[str, object], None]) -> None:
    skip_unless_mig(mig_run, "mig.layout-matches-config", gpu_node, record_property)
    node = gpu_inventory.node(gpu_node)
    devices = gpu_nodes[gpu_node].devices
    configs, source = mig_parted
    reports = [s.report for s in mig_run.all_pods.get(gpu_node, {}).values()]
    gpus = checks.node_gpus(node.labels, observed_gpus(mig_run, node, devices))
    model = checks.gpu_model(node.labels, reports) or next((d.attributes.get("productName") for d in devices), None)
    declared = checks.declared_layout(node.labels, configs, source=source, gpus=gpus,
                                      profiles=checks.mig_profiles(model))
    judge(checks.evaluate_layout_matches_config(gpu_node, labels=node.labels, capacity=node.capacity,
                                                allocatable=node.allocatable, seen=mig_run.all_pods.get(gpu_node, {}),
                                                declared=declared, published=checks.published_layout(devices),
                                                granted_by_dra=mig_run.claim_counts.get(gpu_node)), record_property)


@pytest.mark.cncf("gpu_sharing")
@pytest.mark.check("mig.instance-isolated")
def test_instance_isolated(gpu_node: str, gpu_inventory: Inventory, gpu_nodes: dict[str, NodeView], mig_run: MigRun,
                           record_property: Callable[[str, object], None]) -> None:
    skip_unless_mig(mig_run, "mig.instance-isolated", gpu_node, record_property)
    node = gpu_inventory.node(gpu_node)
    seen = mig_run.one_pods.get(gpu_node, {})
    model = checks.gpu_model(node.labels, [s.report for s in seen.values()])
    judge(checks.evaluate_instance_isolated(gpu_node, seen, model=model, claimed=mig_run.one_claimed.get(gpu_node),
                                            node_devices=gpu_nodes[gpu_node].devices), record_property)


@pytest.mark.cncf("gpu_sharing")
@pytest.mark.check("mig.not-also-full-gpu")
def test_not_also_full_gpu(request: pytest.FixtureRequest, gpu_node: str, gpu_inventory: Inventory,
                           gpu_nodes: dict[str, NodeView], mig_run: MigRun,
                           record_property: Callable[[str, object], None]) -> None:
    skip_unless_mig(mig_run, "mig.not-also-full-gpu", gpu_node, record_property)
    node = gpu_inventory.node(gpu_node)
    full = None
    view = gpu_nodes[gpu_node]
    if view.mig in ("mixed", "dra") and view.one_gpu():  # whole GPUs beside the instances
        outcome = request.getfixturevalue("whole_node_probes").get(gpu_node)
        full = sighting(outcome) if outcome is not None else None
    judge(checks.evaluate_not_also_full_gpu(gpu_node, labels=node.labels, capacity=node.capacity,
                                            mig_seen=list(mig_run.all_pods.get(gpu_node, {}).values()),
                                            full_seen=full, devices=view.devices), record_property)
