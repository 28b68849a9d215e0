"""Other teams' workloads on a simulated node (gpus-busy): the pods a shared fleet already runs when
the suite arrives, holding GPUs through the device plugin as any training job does.

The pod is what a Kubeflow training-operator PyTorchJob worker looks like to someone listing pods
(its ``training.kubeflow.org/*`` labels), bound to its node and created by the node agents; no
ownerReference points at a PyTorchJob, which does not exist (a garbage collector would delete a pod
whose owner is missing). Its container runs ``sleep``, which the simulated kubelet runs for as long
as a real one would (:mod:`.agent_pods`).
"""

from __future__ import annotations

from typing import Any

from gpuconf.sim.profile import SimNode, TenantPod

__all__ = ["TENANT_IMAGE", "make_tenant_namespace", "make_tenant_pod"]

Obj = dict[str, Any]

#: NGC's PyTorch container, the usual base of a training job's image.
TENANT_IMAGE = "nvcr.io/nvidia/pytorch:25.01-py3"


def make_tenant_namespace(namespace: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}


def make_tenant_pod(node: SimNode, tenant: TenantPod, gpus: int) -> Obj:
    """The tenant's worker pod on ``node``, requesting ``gpus`` nvidia.com/gpu (limits only, as the
    device plugin requires), its container sleeping ``tenant.duration_s`` seconds or forever."""
    job = tenant.name.rsplit("-", 1)[0]
    sleep = "infinity" if tenant.duration_s is None else str(tenant.duration_s)
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": tenant.name, "namespace": tenant.namespace, "labels": {
            "training.kubeflow.org/job-name": job, "training.kubeflow.org/operator-name": "pytorchjob-controller",
            "training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": "0"}},
        "spec": {
            "nodeName": node.name,
            "restartPolicy": "Never",
            "containers": [{"name": "pytorch", "image": TENANT_IMAGE, "command": ["sleep", sleep],
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }
