"""Fixtures for the fake API server: a server per test, a client for it, a kubeconfig pointing at it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from gpuconf.sim import FakeApiServer


@pytest.fixture
def apiserver() -> Iterator[FakeApiServer]:
    """A fresh fake API server on 127.0.0.1 (a free port), stopped after the test.

    Bookmarks come every 0.2 s (a real server: about a minute) so tests can see them quickly.
    """
    with FakeApiServer(bookmark_interval=0.2) as server:
        yield server


def client_for(server: FakeApiServer, *, pool: int = 16) -> client.ApiClient:
    """An official-client ApiClient talking to ``server`` (the caller closes it)."""
    configuration = client.Configuration(host=server.url)
    configuration.connection_pool_maxsize = pool
    return client.ApiClient(configuration)


@pytest.fixture
def api_client(apiserver: FakeApiServer) -> Iterator[client.ApiClient]:
    with client_for(apiserver, pool=64) as api:
        yield api


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def namespace(api_client: client.ApiClient, core: client.CoreV1Api) -> str:
    """A namespace to work in (the fake server starts with default, kube-system, kube-public, kube-node-lease),
    and the probes' PriorityClass, as a run creates it (Priority admission refuses pods naming a missing one)."""
    from gpuconf.cluster.campaign import make_priority_class

    core.create_namespace({"metadata": {"name": "sim-test"}})
    client.SchedulingV1Api(api_client).create_priority_class(make_priority_class())
    return "sim-test"


@pytest.fixture
def kubeconfig(apiserver: FakeApiServer, tmp_path: Path) -> Path:
    return apiserver.write_kubeconfig(tmp_path / "kubeconfig")


def pod_body(name: str = "p", *, labels: dict[str, str] | None = None, containers: tuple[str, ...] = ("main",),
             node: str | None = None, **spec: object) -> dict[str, object]:
    """A minimal valid pod manifest (tests get it as the ``make_pod`` fixture)."""
    body_spec: dict[str, object] = {"containers": [{"name": c, "image": "busybox:1.36"} for c in containers], **spec}
    if node:
        body_spec["nodeName"] = node
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": body_spec}


@pytest.fixture
def make_pod() -> object:
    return pod_body
