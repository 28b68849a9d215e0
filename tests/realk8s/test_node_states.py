"""Fleet states (issue 25) under a real control plane: the agents register a node cordoned, another
tainted and busy with a tenant's training pod, and the real node lifecycle controller and scheduler
do what they do to such nodes."""

from __future__ import annotations

from pathlib import Path

from kubernetes import client
from node_states import DEDICATED, UNSCHEDULABLE, eventually, gpu_pod, refusal, taints

from realk8s.support import ROOT, RealCluster

PROFILE = ROOT / "gpuconf" / "data" / "sim_profiles" / "healthy-h100.yaml"
FAULTS = """faults:
  - {id: node-cordoned, node: 0}
  - {id: node-tainted, node: 1}
  - {id: gpus-busy, node: 1}
"""


def test_cordoned_tainted_and_busy_nodes_under_the_real_controllers(real_cluster: RealCluster,
                                                                    tmp_path: Path) -> None:
    text = PROFILE.read_text().replace("faults: []", FAULTS)
    assert FAULTS in text
    profile = tmp_path / "healthy-h100.yaml"
    profile.write_text(text)
    core = real_cluster.core
    with real_cluster.agents(profile):
        # the real node lifecycle controller adds the cordon's taint
        cordoned = eventually("the unschedulable taint on h100-0", lambda: core.read_node("h100-0"),
                              lambda n: UNSCHEDULABLE in taints(n), timeout=60)
        assert cordoned.spec.unschedulable is True
        assert DEDICATED in taints(core.read_node("h100-1"))
        tenant = eventually("the tenant's pod Running", lambda: core.read_namespaced_pod("train-h100-1-0", "tenant-a"),
                            lambda p: p.status.phase == "Running")
        assert tenant.spec.containers[0].resources.limits == {"nvidia.com/gpu": "8"}

        core.create_namespace({"metadata": {"name": "suite"}})
        pod = lambda name: lambda: core.read_namespaced_pod(name, "suite")  # noqa: E731
        core.create_namespaced_pod("suite", gpu_pod("on-cordoned", gpus=1, command=["sleep", "1"], node="h100-0"))
        assert "1 node(s) were unschedulable" in refusal(eventually("a refusal", pod("on-cordoned"), refusal))
        core.create_namespaced_pod("suite", gpu_pod("on-tainted", gpus=1, command=["sleep", "1"], node="h100-1"))
        assert "1 node(s) had untolerated taint(s)" in refusal(eventually("a refusal", pod("on-tainted"), refusal))
        tolerant = [{"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"}]
        core.create_namespaced_pod("suite", gpu_pod("tolerant", gpus=8, command=["sleep", "1"], node="h100-1",
                                                    tolerations=tolerant))
        assert "1 Insufficient nvidia.com/gpu" in refusal(eventually("a refusal", pod("tolerant"), refusal))
        core.delete_namespaced_pod("train-h100-1-0", "tenant-a")  # the tenant's job ends: its GPUs are free
        eventually("the tolerant pod scheduled", pod("tolerant"), lambda p: p.spec.node_name == "h100-1", timeout=60)
        client.CoreV1Api(real_cluster.api).patch_node("h100-0", {"spec": {"unschedulable": False}})  # kubectl uncordon
        eventually("the unschedulable taint gone", lambda: core.read_node("h100-0"),
                   lambda n: UNSCHEDULABLE not in taints(n), timeout=60)


def test_an_unreachable_node_gets_the_real_controllers_taints(real_cluster: RealCluster, tmp_path: Path) -> None:
    """node-not-ready (Unknown): every condition Unknown since 600 s ago, the lease not renewed since;
    the real controller keeps the conditions and adds unreachable:NoSchedule and :NoExecute (the
    other node is Ready: with every node down it would enter full disruption and add no NoExecute
    taint, which the simulated controller models too)."""
    profile = tmp_path / "healthy-h100.yaml"
    profile.write_text(PROFILE.read_text().replace("faults: []", "faults:\n  - {id: node-not-ready, node: 0}\n"))
    core = real_cluster.core
    unreachable = {("node.kubernetes.io/unreachable", None, "NoSchedule"),
                   ("node.kubernetes.io/unreachable", None, "NoExecute")}
    with real_cluster.agents(profile):
        node = eventually("the unreachable taints", lambda: core.read_node("h100-0"),
                          lambda n: unreachable <= taints(n), timeout=60)
        assert taints(node) == unreachable and taints(core.read_node("h100-1")) == set()
        assert {(c.status, c.reason) for c in node.status.conditions} == {("Unknown", "NodeStatusUnknown")}
