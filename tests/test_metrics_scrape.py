"""Finding and scraping the DCGM exporters (gpuconf.cluster.metrics) against the simulated cluster:
its exporter pods, the API server's pod proxy, and the ways a scrape comes back empty."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

from gpuconf.checks.metrics import parse_exporter_text
from gpuconf.cluster import Cluster, OverloadedError, connect
from gpuconf.cluster.metrics import ExporterPod, exporter_pods, list_exporter_pods, scrape, scrape_nodes
from gpuconf.sim.cluster import SimulatedCluster
from gpuconf.sim.faults import RequestInfo
from gpuconf.sim.profile import load_profile, with_faults


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimulatedCluster, Cluster]]:
    profile = with_faults(load_profile("healthy-h100"), [{"id": "metrics-exporter-absent", "node": 1}])
    with SimulatedCluster(profile) as cluster:
        path = cluster.write_kubeconfig(tmp_path_factory.mktemp("kc") / "kubeconfig")
        client = connect(str(path))
        yield cluster, client
        client.close()


def test_each_node_has_one_running_exporter_pod_of_the_gpu_operator(sim):
    cluster, client = sim
    pods = list_exporter_pods(client)
    assert sorted(pods) == ["h100-0"]  # h100-1 runs none (metrics-exporter-absent)
    pod = pods["h100-0"]
    assert (pod.namespace, pod.phase, pod.port, pod.deployed_by) == ("gpu-operator", "Running", 9400, "GPU Operator")
    raw = client.core.read_namespaced_pod(pod.name, pod.namespace)
    assert raw.metadata.labels == {"app": "nvidia-dcgm-exporter"} and raw.status.pod_ip == "127.100.0.2"
    assert raw.spec.containers[0].ports[0].name == "metrics"


def test_the_scrape_through_the_pod_proxy_lists_every_gpu_of_the_node(sim):
    cluster, client = sim
    seen: list[RequestInfo] = []
    cluster.server.request_observers.append(lambda info, agent: seen.append(info))
    try:
        result = scrape_nodes(client, ["h100-0", "h100-1"])
    finally:
        cluster.server.request_observers.clear()
    assert result["h100-0"].error is None and result["h100-0"].text is not None
    gpus = parse_exporter_text(result["h100-0"].text)
    assert sorted(gpus) == sorted(g.uuid for g in cluster.cluster.node("h100-0").gpus)
    assert "no DCGM exporter pod runs on h100-1" in (result["h100-1"].error or "")
    proxied = [i for i in seen if i.subresource == "proxy"]
    assert [(i.verb, i.resource, i.namespace) for i in proxied] == [("get", "pods", "gpu-operator")]


def test_an_exporter_nothing_answers_for_is_the_503_a_real_api_server_gives(sim):
    cluster, client = sim
    pod = list_exporter_pods(client)["h100-0"]
    previous = cluster.server.proxy_provider
    cluster.server.set_proxy_provider(None)
    try:
        result = scrape(client, "h100-0", pod)
    finally:
        cluster.server.set_proxy_provider(previous)
    assert result.text is None and result.error is not None
    assert f"the DCGM exporter pod gpu-operator/{pod.name} on h100-0 did not answer on port 9400" in result.error
    assert "HTTP 503: error trying to reach service: dial tcp 127.100.0.2:9400: connect: connection refused" \
        in result.error


def test_a_proxy_refused_with_429_is_the_api_server_overloaded_not_the_nodes_finding(sim, monkeypatch):
    _, client = sim
    body = json.dumps({"kind": "Status", "message": "Too many requests, please try again later.", "code": 429})

    def throttle(*args, **kwargs):
        raise ApiException(status=429, reason="Too Many Requests", body=body)

    monkeypatch.setattr(client.core, "connect_get_namespaced_pod_proxy_with_path", throttle)
    monkeypatch.setattr("gpuconf.cluster.metrics.time.sleep", lambda s: None)
    with pytest.raises(OverloadedError) as info:
        scrape(client, "h100-0", ExporterPod("gpu-operator", "x", "h100-0", "Running", 9400, "GPU Operator"))
    assert str(info.value) == ("API server overloaded: get pods/proxy gpu-operator/x:9400/metrics: HTTP 429: Too many "
                               "requests, please try again later. (gave up after 3 attempts)")


def test_a_forbidden_proxy_is_the_runners_problem_with_the_rule_to_add(sim, monkeypatch):
    _, client = sim
    body = json.dumps({"kind": "Status", "message": 'pods "x" is forbidden: User "u" cannot get resource "pods/proxy" '
                       'in API group "" in the namespace "gpu-operator"'})

    def refuse(*args, **kwargs):
        raise ApiException(status=403, reason="Forbidden", body=body)

    monkeypatch.setattr(client.core, "connect_get_namespaced_pod_proxy_with_path", refuse)
    result = scrape(client, "h100-0", ExporterPod("gpu-operator", "x", "h100-0", "Running", 9400, "GPU Operator"))
    assert result.error is None and result.forbidden is not None
    assert 'add the rule apiGroups: [""], resources: [pods/proxy], verbs: [get]' in result.forbidden


def test_a_pending_exporter_is_not_scraped():
    result = scrape(None, "n0", ExporterPod("gpu-operator", "x", "n0", "Pending", 9400, "GPU Operator"))  # type: ignore[arg-type]
    assert result.error == "the DCGM exporter pod gpu-operator/x on n0 is Pending, not Running"


def _pod(name: str, node: str | None, phase: str, created: str, ports: list[dict] | None = None) -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "creationTimestamp": created},
            "spec": {"nodeName": node, "containers": [{"ports": ports or []}]}, "status": {"phase": phase}}


def test_one_exporter_per_node_prefers_a_running_pod_and_reads_its_metrics_port():
    port = [{"name": "metrics", "containerPort": 9500}]
    found = [("Helm", _pod("old", "n0", "Running", "2026-01-01T00:00:00Z", port)),
             ("Helm", _pod("new", "n0", "Pending", "2026-02-01T00:00:00Z")),
             ("Helm", _pod("unbound", None, "Pending", "2026-02-01T00:00:00Z"))]
    pods = exporter_pods(found)
    assert list(pods) == ["n0"] and (pods["n0"].name, pods["n0"].port) == ("old", 9500)


def test_the_standalone_chart_is_found_where_there_is_no_operator(tmp_path: Path):
    with SimulatedCluster("t4-timeslicing") as cluster:
        client = connect(str(cluster.write_kubeconfig(tmp_path / "kubeconfig")))
        try:
            pods = list_exporter_pods(client)
            result = scrape_nodes(client, list(pods))
        finally:
            client.close()
    assert pods and {p.deployed_by for p in pods.values()} == {"dcgm-exporter Helm chart"}
    assert all(s.text and "DCGM_FI_DEV_GPU_UTIL" in s.text for s in result.values())
    assert all("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL" not in (s.text or "") for s in result.values())  # T4: no NVLink
