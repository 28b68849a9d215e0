"""kubectl against the fake API server, through a kubeconfig the server wrote."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: from-kubectl
  namespace: default
data:
  driver: "{driver}"
"""


@pytest.fixture
def kubectl(kubeconfig, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update(HOME=str(tmp_path), KUBECACHEDIR=str(tmp_path / "cache"))

    def run(*args: str) -> str:
        proc = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                              env=env, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    return run


def test_kubectl_gets_nodes_as_json(apiserver, kubectl):
    apiserver.store.create("nodes", {"metadata": {"name": "gpu-node-0"},
                                     "status": {"allocatable": {"nvidia.com/gpu": "8"}}})
    listed = json.loads(kubectl("get", "nodes", "-o", "json"))
    (node,) = listed["items"]
    assert node["metadata"]["name"] == "gpu-node-0" and node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert "gpu-node-0" in kubectl("get", "nodes")  # the server-side table kubectl asks for


def test_kubectl_apply_creates_then_updates(apiserver, kubectl, tmp_path):
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(CONFIGMAP.format(driver="570"))
    assert "created" in kubectl("apply", "-f", str(manifest))
    manifest.write_text(CONFIGMAP.format(driver="580"))
    assert "configured" in kubectl("apply", "-f", str(manifest))
    stored = apiserver.store.get("configmaps", "from-kubectl", namespace="default")
    assert stored["data"] == {"driver": "580"}
    assert "kubectl.kubernetes.io/last-applied-configuration" in stored["metadata"]["annotations"]
