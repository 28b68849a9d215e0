"""gpuconf.cluster: connecting (and failing to, with one clear line per kind), retries, discovery, inventory."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpuconf.cluster import (
    ApiCallError,
    ClusterError,
    ForbiddenError,
    KubeconfigError,
    OverloadedError,
    RetryPolicy,
    UnreachableError,
    build_inventory,
    connect,
    load_inventory,
)
from gpuconf.sim.cluster import SimulatedCluster
from gpuconf.sim.server import FakeApiServer


@pytest.fixture(scope="module")
def h100(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimulatedCluster, Path]]:
    with SimulatedCluster("healthy-h100") as sim:
        yield sim, sim.write_kubeconfig(tmp_path_factory.mktemp("h100") / "kubeconfig")


def kubeconfig_for(url: str, path: Path) -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": url}}], "users": [{"name": "c", "user": {}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "c"}}]}))
    return path


class _Forbidding(BaseHTTPRequestHandler):
    """An API server whose RBAC allows nothing."""

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's naming
        body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
                           "code": 403, "message": 'nodes is forbidden: User "ci" cannot list resource "nodes" '
                                                   'in API group "" at the cluster scope'}).encode()
        self.send_response(403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's signature
        pass


@pytest.fixture
def forbidding_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Forbidding)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -------------------------------------------------------------------------------------------------
# Connecting


def test_connect_uses_the_kubeconfig_the_simulated_cluster_writes(h100: tuple[SimulatedCluster, Path]) -> None:
    sim, kubeconfig = h100
    cluster = connect(kubeconfig, "gpuconf-sim")
    assert cluster.host == sim.server.url
    assert cluster.source == f"kubeconfig:{kubeconfig}@gpuconf-sim"


def test_connect_without_a_kubeconfig_uses_KUBECONFIG(h100: tuple[SimulatedCluster, Path],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(h100[1]))
    assert connect().host == h100[0].server.url


@pytest.mark.parametrize("have,provenance", [
    ({"option", "env", "home", "pod"}, "kubeconfig:{d}/given"),
    ({"env", "home", "pod"}, "kubeconfig:$KUBECONFIG={d}/env-a:{d}/env-b"),
    ({"home", "pod"}, "kubeconfig:~/.kube/config"),
    ({"pod"}, "in-cluster"),
    ({"pod-without-token"}, None),
    (set(), None),
], ids=["--kubeconfig first", "then $KUBECONFIG, every file", "then ~/.kube/config",
        "then the pod's service account", "a pod without a token is no source", "none"])
def test_a_cluster_is_found_where_kubectl_looks_for_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       have: set[str], provenance: str | None) -> None:
    """One resolver for the suite run and `gpuconf results`: its provenance says which source it took."""
    from gpuconf.cluster import access, cluster_source

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setattr(access, "SERVICE_ACCOUNT_TOKEN", tmp_path / "token")
    if "env" in have:
        monkeypatch.setenv("KUBECONFIG", f"{tmp_path}/env-a:{tmp_path}/env-b")
    if "home" in have:
        (tmp_path / ".kube").mkdir()
        (tmp_path / ".kube" / "config").write_text(_GOOD)
    if have & {"pod", "pod-without-token"}:
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    if "pod" in have:
        (tmp_path / "token").write_text("t")
    found = cluster_source(str(tmp_path / "given") if "option" in have else None)
    assert (found.provenance if found is not None else None) == (provenance and provenance.format(d=tmp_path))
    if found is None:
        with pytest.raises(KubeconfigError, match=r"no kubeconfig: give one \(--kubeconfig\); neither \$KUBECONFIG "
                           "nor ~/.kube/config names a kubeconfig, and this is not a pod with a service account token"):
            connect()


_GOOD = json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                    "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
                    "users": [{"name": "c", "user": {}}],
                    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "c"}}]})


@pytest.mark.parametrize("content,context,fragment", [
    ("clusters: [\n  - {name: a\n", None, "not YAML (line 2)"),
    ("- a\n- b\n", None, "not a kubeconfig (no contexts list)"),
    (None, None, "no such file"),
    (_GOOD, "prod", "unknown context 'prod' (it has: c)"),
], ids=["a file that is not YAML", "YAML that is not a kubeconfig", "a missing file", "an unknown context"])
def test_a_bad_kubeconfig_is_a_kubeconfig_error_in_one_line(content: str | None, context: str | None, fragment: str,
                                                           tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_text(content)
    with pytest.raises(KubeconfigError) as info:
        connect(path, context)
    assert str(info.value) == f"kubeconfig {path}: {fragment}"
    assert info.value.kind == "kubeconfig"


def test_a_port_with_nothing_listening_is_unreachable_in_one_line(tmp_path: Path) -> None:
    port = free_port()
    with pytest.raises(UnreachableError) as info:
        connect(kubeconfig_for(f"http://127.0.0.1:{port}", tmp_path / "kc"), retry=RetryPolicy(deadline=2))
    assert str(info.value) == f"cannot reach the API server at http://127.0.0.1:{port}: connection refused"
    assert info.value.kind == "unreachable"


def test_a_server_that_answers_403_is_forbidden_in_one_line(forbidding_server: str, tmp_path: Path) -> None:
    with pytest.raises(ForbiddenError) as info:
        connect(kubeconfig_for(forbidding_server, tmp_path / "kc"))
    message = str(info.value)
    assert message.startswith("forbidden: get /version: nodes is forbidden: User \"ci\"") and "\n" not in message
    assert (info.value.kind, info.value.status) == ("forbidden", 403)
    assert isinstance(info.value.__cause__, Exception)  # the client's exception, kept as the cause


# -------------------------------------------------------------------------------------------------
# Retries


def test_a_429_is_retried_after_the_retry_after_it_names(tmp_path: Path) -> None:
    with FakeApiServer() as server:
        cluster = connect(server.write_kubeconfig(tmp_path / "kc"))
        server.faults.throttle(times=1, retry_after=1, resources=["nodes"])
        began = time.monotonic()
        cluster.call_json("list nodes", cluster.core.list_node)
        assert 0.9 <= time.monotonic() - began < 5


def test_5xx_and_dropped_connections_are_retried_until_they_pass(tmp_path: Path) -> None:
    with FakeApiServer() as server:
        cluster = connect(server.write_kubeconfig(tmp_path / "kc"), retry=RetryPolicy(initial_wait=0.01))
        server.faults.server_error(times=2, resources=["namespaces"])
        server.faults.drop(times=1, resources=["namespaces"])
        assert cluster.call_json("list namespaces", cluster.core.list_namespace)["items"]
        assert len(server.faults.injected) == 3


def test_retries_stop_at_the_deadline_and_say_how_many_attempts(tmp_path: Path) -> None:
    with FakeApiServer() as server:
        cluster = connect(server.write_kubeconfig(tmp_path / "kc"), retry=RetryPolicy(deadline=0.5, initial_wait=0.05))
        server.faults.server_error(resources=["namespaces"], message="etcdserver: request timed out")
        began = time.monotonic()
        with pytest.raises(ApiCallError) as info:
            cluster.call_json("list namespaces", cluster.core.list_namespace)
        assert time.monotonic() - began < 3
        assert "list namespaces: HTTP 500: Internal error occurred: etcdserver: request timed out" in str(info.value)
        assert "gave up after" in str(info.value) and info.value.status == 500


def test_429s_past_the_deadline_are_the_api_server_overloaded(tmp_path: Path) -> None:
    with FakeApiServer() as server:
        cluster = connect(server.write_kubeconfig(tmp_path / "kc"), retry=RetryPolicy(deadline=1.5))
        server.faults.throttle(resources=["namespaces"], retry_after=1)
        with pytest.raises(OverloadedError) as info:
            cluster.call_json("list namespaces", cluster.core.list_namespace)
        assert info.value.kind == "overloaded" and info.value.status == 429
        assert str(info.value).startswith("API server overloaded: list namespaces: HTTP 429: Too many requests")


def test_every_cluster_error_is_one_line() -> None:
    assert str(ClusterError("a\n  b")) == "a b"


# -------------------------------------------------------------------------------------------------
# Discovery and inventory


def test_discovery_sees_dra_v1_and_the_cluster_policy_on_h200_dra_only(tmp_path: Path) -> None:
    with SimulatedCluster("h200-dra-only") as sim:
        discovery = connect(sim.write_kubeconfig(tmp_path / "kc")).discover()
    assert discovery.serves("resource.k8s.io/v1") and discovery.serves("v1")
    assert discovery.dra_version == "v1"
    assert discovery.cluster_policy
    assert not discovery.serves("nvidia.com/v2")
    assert discovery.server_version.startswith("v1.34")


def test_inventory_of_healthy_h100_has_two_gpu_nodes_with_8_allocatable(h100: tuple[SimulatedCluster, Path]) -> None:
    inventory = load_inventory(connect(h100[1]))
    assert [n.name for n in inventory.gpu_nodes] == ["h100-0", "h100-1"]
    assert all(n.gpu_allocatable == {"nvidia.com/gpu": 8} and n.ready for n in inventory.gpu_nodes)
    assert [r.name for r in inventory.runtime_classes] == ["nvidia"]
    assert inventory.cluster_policy is not None and inventory.cluster_policy.state == "ready"


def test_inventory_of_a100_mig_mixed_shows_mig_resources(tmp_path: Path) -> None:
    with SimulatedCluster("a100-mig-mixed") as sim:
        inventory = load_inventory(connect(sim.write_kubeconfig(tmp_path / "kc")))
    for node in inventory.gpu_nodes:
        assert node.gpu_allocatable and all(k.startswith("nvidia.com/mig-") for k in node.gpu_allocatable)


def test_inventory_of_h200_dra_only_has_a_slice_per_node_and_the_device_classes(tmp_path: Path) -> None:
    with SimulatedCluster("h200-dra-only") as sim:
        inventory = load_inventory(connect(sim.write_kubeconfig(tmp_path / "kc")))
    assert [n.name for n in inventory.gpu_nodes] == ["h200-0", "h200-1"]
    for node in inventory.gpu_nodes:
        assert node.gpu_allocatable == {}  # no device plugin: the GPUs are only in the slices
        assert [s.node for s in node.slices] == [node.name] and node.slices[0].devices
    assert "gpu.nvidia.com" in inventory.device_classes


def _node(name: str, *, labels: dict[str, str] | None = None, allocatable: dict[str, str] | None = None) -> dict:
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
            "status": {"allocatable": allocatable or {"cpu": "8"}, "capacity": allocatable or {"cpu": "8"},
                       "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]}}


@pytest.mark.parametrize("node,gpu", [
    (_node("cpu"), False),
    (_node("labelled", labels={"nvidia.com/gpu.present": "true"}), True),
    (_node("shared", allocatable={"nvidia.com/gpu.shared": "16"}), True),
    (_node("mig", allocatable={"nvidia.com/mig-1g.10gb": "7"}), True),
    (_node("sliced"), True),
], ids=["a node with no GPU sign is not a GPU node", "the gpu.present label makes a GPU node",
        "a renamed shared resource makes a GPU node", "a MIG resource makes a GPU node",
        "a ResourceSlice for the node makes a GPU node"])
def test_build_inventory_decides_what_a_gpu_node_is(node: dict, gpu: bool) -> None:
    slices = [{"metadata": {"name": "s"}, "spec": {"nodeName": "sliced", "driver": "gpu.nvidia.com",
                                                    "pool": {"name": "sliced"}, "devices": [{"name": "gpu-0"}]}}]
    inventory = build_inventory([node], [{"metadata": {"name": "nvidia"}, "handler": "nvidia"}], [], slices, None)
    name = node["metadata"]["name"]
    assert ([n.name for n in inventory.gpu_nodes] == [name]) is gpu
    assert (inventory.other_nodes == (name,)) is not gpu
    if gpu:
        found = inventory.node(name)
        assert not found.ready and found.taints[0].key == "nvidia.com/gpu"
    assert inventory.cluster_policy is None


@pytest.mark.parametrize("message, kind", [
    ('pods is forbidden: User "ci" cannot create resource "pods" in API group "" in the namespace "x"', "forbidden"),
    ('nodes is forbidden: User "system:serviceaccount:gpuconf:runner" cannot list resource "nodes" in API group "" '
     'at the cluster scope', "forbidden"),
    ('pods "p" is forbidden: pod rejected: RuntimeClass "nvidia" not found', "admission"),
    ('pods "p" is forbidden: violates PodSecurity "restricted:latest": privileged (container "c" must not set '
     'securityContext.privileged=true)', "admission"),
    ('pods "p" is forbidden: exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=8, used: '
     'requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=4', "admission"),
])
def test_a_403_is_a_missing_permission_only_when_rbac_says_so(message: str, kind: str) -> None:
    from kubernetes.client.exceptions import ApiException

    from gpuconf.cluster.access import wrap_error

    exc = ApiException(status=403, reason="Forbidden")
    exc.body = json.dumps({"kind": "Status", "code": 403, "reason": "Forbidden", "message": message})
    error = wrap_error(exc, "create pod p", "https://k8s")
    assert (error.kind, error.status) == (kind, 403)
    assert message in str(error)
