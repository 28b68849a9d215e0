"""The fleet states made by hand on `gpuconf sim serve`, with kubectl as an administrator makes them:
``kubectl cordon``, ``kubectl taint``, a pod that sleeps holding every GPU of a node, and a node's
Ready condition patched through the status subresource. The simulated cluster must answer as it
does when a profile declares the state (tests/sim/test_node_states.py): the node lifecycle taints
follow, the scheduler and the kubelet refuse what real ones refuse, and no agent undoes the change."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from kubernetes import client, config
from node_states import DEDICATED, UNSCHEDULABLE, eventually, gpu_pod, refusal, taints
from serving import serve

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

NOT_READY = {("node.kubernetes.io/not-ready", None, "NoSchedule"), ("node.kubernetes.io/not-ready", None, "NoExecute")}


def test_cordon_taint_busy_and_not_ready_made_through_the_api(tmp_path: Path) -> None:
    with serve(tmp_path / "serve", "healthy-h100") as served:
        def kubectl(*args: str) -> str:
            done = subprocess.run(["kubectl", "--kubeconfig", str(served.kubeconfig), *args], capture_output=True,
                                  text=True, check=False, timeout=60)
            assert done.returncode == 0, done.stderr
            return done.stdout

        core = client.CoreV1Api(config.new_client_from_config(config_file=str(served.kubeconfig)))
        core.create_namespace({"metadata": {"name": "suite"}})
        pods = lambda name: lambda: core.read_namespaced_pod(name, "suite")  # noqa: E731

        # kubectl cordon: the lifecycle taint follows, stamped; the scheduler says "unschedulable"
        kubectl("cordon", "h100-0")
        node = eventually("the cordon's taint", lambda: core.read_node("h100-0"), lambda n: UNSCHEDULABLE in taints(n))
        assert node.spec.unschedulable is True and node.spec.taints[0].time_added is not None
        assert "SchedulingDisabled" in kubectl("get", "node", "h100-0")
        core.create_namespaced_pod("suite", gpu_pod("on-cordoned", gpus=1, command=["sleep", "1"], node="h100-0"))
        assert "1 node(s) were unschedulable" in refusal(eventually("a refusal", pods("on-cordoned"), refusal))

        # kubectl taint: spec.taints as given; the scheduler says "untolerated taint(s)"
        kubectl("taint", "nodes", "h100-1", "dedicated=training:NoSchedule")
        assert taints(core.read_node("h100-1")) == {DEDICATED}
        core.create_namespaced_pod("suite", gpu_pod("on-tainted", gpus=1, command=["sleep", "1"], node="h100-1"))
        assert "1 node(s) had untolerated taint(s)" in refusal(eventually("a refusal", pods("on-tainted"), refusal))
        for name in ("on-cordoned", "on-tainted"):
            core.delete_namespaced_pod(name, "suite")

        # kubectl uncordon: the taint goes; the administrator's taint on h100-1 is left alone
        kubectl("uncordon", "h100-0")
        eventually("the cordon's taint gone", lambda: core.read_node("h100-0"), lambda n: not taints(n))

        # a pod that sleeps forever holding all 8 GPUs of h100-0: a pod asking for one is refused
        core.create_namespaced_pod("suite", gpu_pod("tenant", gpus=8, command=["sleep", "infinity"], node="h100-0"))
        eventually("the tenant Running", pods("tenant"), lambda p: p.status.phase == "Running")
        core.create_namespaced_pod("suite", gpu_pod("one-more", gpus=1, command=["sleep", "1"], node="h100-0"))
        assert "1 Insufficient nvidia.com/gpu" in refusal(eventually("a refusal", pods("one-more"), refusal))
        core.delete_namespaced_pod("tenant", "suite")
        eventually("the waiting pod scheduled once the tenant is gone", pods("one-more"),
                   lambda p: p.spec.node_name == "h100-0")

        # Ready False through the status subresource: the lifecycle taints follow, the kubelet starts nothing
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 600))
        condition = {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "lastTransitionTime": since,
                     "lastHeartbeatTime": since, "message": "container runtime network not ready: NetworkReady=false"}
        kubectl("patch", "node", "h100-1", "--subresource=status", "-p",
                json.dumps({"status": {"conditions": [condition]}}))
        node = eventually("the not-ready taints", lambda: core.read_node("h100-1"), lambda n: NOT_READY <= taints(n))
        assert taints(node) == NOT_READY | {DEDICATED}
        assert "NotReady" in kubectl("get", "node", "h100-1")
        tolerating = [{"key": "dedicated", "operator": "Exists"}]
        core.create_namespaced_pod("suite", gpu_pod("bound", gpus=1, command=["sleep", "1"], bind="h100-1",
                                                    tolerations=tolerating))
        eventually("the NetworkNotReady event", lambda: core.list_namespaced_event(
            "suite", field_selector="involvedObject.name=bound").items, lambda items: any(
            e.reason == "NetworkNotReady" for e in items))
        time.sleep(2.5)  # what no agent does meanwhile: heal the node, or start the pod
        node = core.read_node("h100-1")
        assert next(c.status for c in node.status.conditions if c.type == "Ready") == "False"
        assert taints(node) == NOT_READY | {DEDICATED}
        assert core.read_namespaced_pod("bound", "suite").status.phase == "Pending"

        # Ready again: the taints go, and the pod it holds starts
        condition.update(status="True", reason="KubeletReady", message="kubelet is posting ready status")
        kubectl("patch", "node", "h100-1", "--subresource=status", "-p",
                json.dumps({"status": {"conditions": [condition]}}))
        eventually("the not-ready taints gone", lambda: core.read_node("h100-1"), lambda n: taints(n) == {DEDICATED})
        eventually("the bound pod run", pods("bound"), lambda p: p.status.phase == "Succeeded", timeout=20)
