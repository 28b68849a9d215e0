"""Discovery documents, the DynamicClient and kubeconfig loading."""

from __future__ import annotations

import urllib3
from kubernetes import client, config
from kubernetes.dynamic import DynamicClient

from gpuconf.sim import FakeApiServer

GROUPS = {"coordination.k8s.io", "batch", "node.k8s.io", "scheduling.k8s.io", "events.k8s.io", "resource.k8s.io",
          "apiextensions.k8s.io"}


def test_version_has_every_field_the_client_requires(api_client):
    info = client.VersionApi(api_client).get_code()
    assert (info.git_version, info.major, info.minor, info.platform) == ("v1.34.0", "1", "34", "linux/amd64")


def test_the_core_group_lists_v1_and_an_address(apiserver, api_client):
    versions = client.CoreApi(api_client).get_api_versions()
    assert versions.versions == ["v1"]
    assert versions.server_address_by_client_cidrs[0].server_address == f"127.0.0.1:{apiserver.port}"


def test_every_group_is_listed_with_its_preferred_version(api_client):
    groups = {g.name: g for g in client.ApisApi(api_client).get_api_versions().groups}
    assert set(groups) == GROUPS
    assert groups["resource.k8s.io"].preferred_version.group_version == "resource.k8s.io/v1"


def test_resource_lists_name_kinds_verbs_short_names_and_subresources(api_client):
    core = {r.name: r for r in client.CoreV1Api(api_client).get_api_resources().resources}
    assert core["pods"].kind == "Pod" and core["pods"].namespaced and core["pods"].short_names == ["po"]
    assert "watch" in core["pods"].verbs and "deletecollection" in core["pods"].verbs
    assert core["pods/status"].verbs == ["get", "patch", "update"] and core["pods/log"].verbs == ["get"]
    assert not core["nodes"].namespaced and "nodes/status" in core
    dra = {r.name: r for r in client.ResourceV1Api(api_client).get_api_resources().resources}
    assert set(dra) == {"deviceclasses", "resourceslices", "resourceclaims", "resourceclaims/status",
                        "resourceclaimtemplates"}


def test_a_new_crd_shows_up_in_discovery(api_client):
    client.ApiextensionsV1Api(api_client).create_custom_resource_definition({
        "metadata": {"name": "clusterpolicies.nvidia.com"},
        "spec": {"group": "nvidia.com", "scope": "Cluster",
                 "names": {"plural": "clusterpolicies", "kind": "ClusterPolicy", "singular": "clusterpolicy"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}}}]}})
    groups = {g.name for g in client.ApisApi(api_client).get_api_versions().groups}
    assert "nvidia.com" in groups
    resources = client.CustomObjectsApi(api_client).get_api_resources("nvidia.com", "v1").resources
    assert [(r.name, r.namespaced) for r in resources] == [("clusterpolicies", False), ("clusterpolicies/status",
                                                                                        False)]


def test_the_dynamic_client_discovers_and_works(api_client, namespace, tmp_path):
    dynamic = DynamicClient(api_client, cache_file=str(tmp_path / "discovery.json"))
    pods = dynamic.resources.get(api_version="v1", kind="Pod")
    pods.create(namespace=namespace, body={"metadata": {"name": "p"},
                                           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    pods.patch(namespace=namespace, name="p", body={"metadata": {"labels": {"x": "y"}}},
               content_type="application/merge-patch+json")
    assert pods.get(namespace=namespace, name="p").metadata.labels.x == "y"
    assert [p.metadata.name for p in pods.get(namespace=namespace, label_selector="x=y").items] == ["p"]
    pods.delete(namespace=namespace, name="p")
    slices = dynamic.resources.get(api_version="resource.k8s.io/v1", kind="ResourceSlice")
    assert slices.get().items == []


def test_a_written_kubeconfig_loads_with_the_official_loader(apiserver, kubeconfig):
    api = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        assert "default" in {n.metadata.name for n in client.CoreV1Api(api).list_namespace().items}
    finally:
        api.close()


def test_health_endpoints_answer_ok(apiserver):
    for path in ("/healthz", "/livez", "/readyz"):
        response = urllib3.request("GET", apiserver.url + path)
        assert (response.status, response.data) == (200, b"ok")


def test_two_servers_are_independent():
    with FakeApiServer() as a, FakeApiServer() as b:
        a.store.create("configmaps", {"metadata": {"name": "only-in-a"}}, namespace="default")
        assert a.port != b.port
        assert [c["metadata"]["name"] for c in b.store.list("configmaps", namespace="default").items] == [
            "kube-root-ca.crt"]
