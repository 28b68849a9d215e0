"""The simulated API server (gpuconf.sim.server) answers as kube-apiserver v1.36 does: the same
request to both, the same status, reason and message."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpuconf.sim.server import FakeApiServer
from realk8s.support import RealCluster

NAMESPACE = "fidelity"


@pytest.fixture(scope="module")
def servers(real_cluster: RealCluster) -> Iterator[dict[str, client.CoreV1Api]]:
    with FakeApiServer() as fake, client.ApiClient(client.Configuration(host=fake.url)) as api:
        cores = {"simulated": client.CoreV1Api(api), "real": real_cluster.core}
        for core in cores.values():
            core.create_namespace({"metadata": {"name": NAMESPACE}})
        yield cores
        real_cluster.clear_workloads()


def answer(core: client.CoreV1Api, pod: dict[str, Any]) -> tuple[int, str, str]:
    try:
        core.create_namespaced_pod(NAMESPACE, pod)
    except ApiException as e:
        body = json.loads(e.body)
        return int(e.status), str(body.get("reason")), str(body.get("message"))
    return 201, "Created", ""


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}], **spec}}


@pytest.mark.parametrize("body", [
    pytest.param(pod("no-class", priorityClassName="does-not-exist"), id="missing PriorityClass (Priority admission)"),
    pytest.param(pod("no-containers", containers=[]), id="no containers (pod validation)"),
])
def test_the_same_request_gets_the_same_refusal(servers: dict[str, client.CoreV1Api], body: dict[str, Any]) -> None:
    real = answer(servers["real"], body)
    assert real[0] in (403, 422)
    assert answer(servers["simulated"], body) == real
