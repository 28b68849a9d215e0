"""CRUD of every served resource through the official client's typed APIs, over real HTTP.

Responses are deserialised into the client's strict pydantic models, so a missing required field
in what the fake server returns fails here, as it would against a real cluster.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client

NS = "sim-test"


@dataclass(frozen=True)
class Case:
    api: type
    suffix: str  # the client's method suffix: create_<prefix><suffix>
    namespaced: bool
    body: dict[str, Any]
    qualified: str  # how the server names the resource in messages

    def call(self, api_client: client.ApiClient, verb: str, *args: Any, **kw: Any) -> Any:
        prefix = "namespaced_" if self.namespaced else ""
        method = getattr(self.api(api_client), f"{verb}_{prefix}{self.suffix}")
        if self.namespaced:
            kw.setdefault("namespace", NS)
        return method(*args, **kw)


SLICE_SPEC = {"driver": "gpu.nvidia.com", "nodeName": "node-a", "pool": {"name": "node-a", "generation": 1,
                                                                          "resourceSliceCount": 1},
              "devices": [{"name": "gpu-0", "attributes": {"index": {"int": 0}}}]}
CRD_BODY = {
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]},
}

CASES = {
    "a pod": Case(client.CoreV1Api, "pod", True, {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                  "pods"),
    "a node": Case(client.CoreV1Api, "node", False, {"status": {"capacity": {"nvidia.com/gpu": "8"}}}, "nodes"),
    "a namespace": Case(client.CoreV1Api, "namespace", False, {}, "namespaces"),
    "a core event": Case(client.CoreV1Api, "event", True,
                         {"involvedObject": {"kind": "Pod", "name": "x", "namespace": NS}, "reason": "Started",
                          "message": "started", "type": "Normal"}, "events"),
    "a configmap": Case(client.CoreV1Api, "config_map", True, {"data": {"k": "v"}}, "configmaps"),
    "a secret": Case(client.CoreV1Api, "secret", True, {"stringData": {"k": "v"}}, "secrets"),
    "a service": Case(client.CoreV1Api, "service", True, {"spec": {"ports": [{"port": 80}]}}, "services"),
    "a service account": Case(client.CoreV1Api, "service_account", True, {}, "serviceaccounts"),
    "a lease": Case(client.CoordinationV1Api, "lease", True, {"spec": {"holderIdentity": "me"}},
                    "leases.coordination.k8s.io"),
    "a job": Case(client.BatchV1Api, "job", True,
                  {"spec": {"template": {"spec": {"restartPolicy": "Never",
                                                  "containers": [{"name": "c", "image": "busybox"}]}}}},
                  "jobs.batch"),
    "a runtime class": Case(client.NodeV1Api, "runtime_class", False, {"handler": "nvidia"},
                            "runtimeclasses.node.k8s.io"),
    "a priority class": Case(client.SchedulingV1Api, "priority_class", False, {"value": 1000},
                             "priorityclasses.scheduling.k8s.io"),
    "an events.k8s.io event": Case(client.EventsV1Api, "event", True,
                                   {"eventTime": "2025-01-01T00:00:00.000000Z", "reason": "Scheduled",
                                    "action": "Binding", "note": "assigned", "type": "Normal",
                                    "reportingController": "default-scheduler", "reportingInstance": "s-1",
                                    "regarding": {"kind": "Pod", "name": "x", "namespace": NS}},
                                   "events.events.k8s.io"),
    "a device class": Case(client.ResourceV1Api, "device_class", False,
                           {"spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.nvidia.com"'}}]}},
                           "deviceclasses.resource.k8s.io"),
    "a resource slice": Case(client.ResourceV1Api, "resource_slice", False, {"spec": SLICE_SPEC},
                             "resourceslices.resource.k8s.io"),
    "a resource claim": Case(client.ResourceV1Api, "resource_claim", True,
                             {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                                 "deviceClassName": "gpu.nvidia.com"}}]}}},
                             "resourceclaims.resource.k8s.io"),
    "a resource claim template": Case(client.ResourceV1Api, "resource_claim_template", True,
                                      {"spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                                          "deviceClassName": "gpu.nvidia.com"}}]}}}},
                                      "resourceclaimtemplates.resource.k8s.io"),
    "a custom resource definition": Case(client.ApiextensionsV1Api, "custom_resource_definition", False, CRD_BODY,
                                         "customresourcedefinitions.apiextensions.k8s.io"),
}


@pytest.mark.parametrize("case", CASES.values(), ids=[f"{k} can be created, read, listed, replaced and deleted"
                                                       for k in CASES])
def test_crud(api_client, namespace, case: Case):
    body = json.loads(json.dumps(case.body))
    name = body.get("metadata", {}).get("name") or "thing-1"
    body.setdefault("metadata", {})["name"] = name
    created = case.call(api_client, "create", body=body)
    assert created.metadata.name == name and created.metadata.uid and created.metadata.resource_version
    if case.namespaced:
        assert created.metadata.namespace == NS

    read = case.call(api_client, "read", name)
    assert read.metadata.uid == created.metadata.uid
    assert name in [item.metadata.name for item in case.call(api_client, "list").items]

    read.metadata.labels = {"edited": "yes"}
    replaced = case.call(api_client, "replace", name, body=read)
    assert replaced.metadata.labels["edited"] == "yes"
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)

    case.call(api_client, "delete", name)
    if case.suffix == "namespace":  # Terminating first, removed by the namespace controller, as on a real server
        deadline = time.monotonic() + 10
        while (still := _read_or_none(case, api_client, name)) is not None:
            assert still.status.phase == "Terminating" and still.metadata.deletion_timestamp is not None
            assert time.monotonic() < deadline, "the deleted namespace was not removed within 10 s"
            time.sleep(0.05)
    with pytest.raises(client.ApiException) as err:
        case.call(api_client, "read", name)
    assert err.value.status == 404
    assert json.loads(err.value.body)["message"] == f'{case.qualified} "{name}" not found'


def _read_or_none(case: Case, api_client: client.ApiClient, name: str) -> Any:
    try:
        return case.call(api_client, "read", name)
    except client.ApiException as e:
        if e.status == 404:
            return None
        raise


def test_the_server_fills_in_metadata_like_a_real_one(core, namespace, make_pod):
    pod = core.create_namespaced_pod(namespace, {"metadata": {"generateName": "probe-"},
                                                 "spec": make_pod()["spec"]})
    assert re.fullmatch(r"probe-[bcdfghjklmnpqrstvwxz2456789]{5}", pod.metadata.name)
    assert pod.metadata.namespace == namespace and pod.metadata.generation == 1
    assert re.fullmatch(r"[0-9a-f-]{36}", pod.metadata.uid)
    assert pod.metadata.creation_timestamp is not None
    assert pod.api_version == "v1" and pod.kind == "Pod"
    assert pod.status.phase == "Pending" and pod.status.qos_class == "BestEffort"
    assert pod.spec.scheduler_name == "default-scheduler" and pod.spec.restart_policy == "Always"
    assert pod.spec.service_account_name == "default"


def test_resource_versions_come_from_one_increasing_counter(core, namespace):
    versions = [int(core.create_namespaced_config_map(namespace, {"metadata": {"name": f"c{i}"}})
                    .metadata.resource_version) for i in range(5)]
    assert versions == sorted(versions) and len(set(versions)) == 5
    listed = core.list_namespaced_config_map(namespace)
    assert int(listed.metadata.resource_version) >= versions[-1]


def test_a_namespace_is_active_and_labelled_with_its_name(core):
    ns = core.create_namespace({"metadata": {"name": "gpu-run"}})
    assert ns.status.phase == "Active"
    assert ns.metadata.labels == {"kubernetes.io/metadata.name": "gpu-run"}
    assert ns.spec.finalizers == ["kubernetes"]


def test_the_fresh_cluster_has_the_usual_namespaces_and_priority_classes(api_client, core):
    assert {n.metadata.name for n in core.list_namespace().items} >= {"default", "kube-system", "kube-public",
                                                                      "kube-node-lease"}
    names = {p.metadata.name for p in client.SchedulingV1Api(api_client).list_priority_class().items}
    assert names == {"system-cluster-critical", "system-node-critical"}


def test_a_secret_stores_string_data_as_base64_data(core, namespace):
    secret = core.create_namespaced_secret(namespace, {"metadata": {"name": "s"}, "stringData": {"token": "abc"}})
    assert secret.data == {"token": "YWJj"} and secret.string_data is None and secret.type == "Opaque"


def test_a_pods_limits_become_its_requests_so_gpus_are_requested(core, namespace):
    limits = {"nvidia.com/gpu": "1", "cpu": "1", "memory": "1Gi"}
    pod = core.create_namespaced_pod(namespace, {"metadata": {"name": "gpu"}, "spec": {"containers": [
        {"name": "c", "image": "cuda", "resources": {"limits": limits}}]}})
    assert pod.spec.containers[0].resources.requests == {"nvidia.com/gpu": "1", "cpu": "1", "memory": "1Gi"}
    assert pod.status.qos_class == "Guaranteed"


def test_a_job_gets_a_generated_selector_and_labelled_template(api_client, namespace):
    job = client.BatchV1Api(api_client).create_namespaced_job(namespace, {"metadata": {"name": "j"}, "spec": {
        "completions": 4, "parallelism": 4, "completionMode": "Indexed",
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}})
    uid = job.metadata.uid
    assert job.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}
    assert job.spec.template.metadata.labels["batch.kubernetes.io/job-name"] == "j"
    assert job.spec.backoff_limit == 6 and job.spec.completion_mode == "Indexed"


def test_events_written_through_either_events_api_are_one_resource(api_client, core, namespace):
    events_v1 = client.EventsV1Api(api_client)
    events_v1.create_namespaced_event(namespace, CASES["an events.k8s.io event"].body | {"metadata": {"name": "e1"}})
    core.create_namespaced_event(namespace, CASES["a core event"].body | {"metadata": {"name": "e2"}})
    as_core = {e.metadata.name: e for e in core.list_namespaced_event(namespace).items}
    as_new = {e.metadata.name: e for e in events_v1.list_namespaced_event(namespace).items}
    assert set(as_core) == set(as_new) == {"e1", "e2"}
    assert as_core["e1"].message == "assigned" and as_core["e1"].reporting_component == "default-scheduler"
    assert as_new["e2"].note == "started" and as_new["e2"].regarding.name == "x"


# --- custom resources --------------------------------------------------------------------------------

CLUSTER_POLICY_CRD = {
    "metadata": {"name": "clusterpolicies.nvidia.com"},
    "spec": {"group": "nvidia.com", "scope": "Cluster",
             "names": {"plural": "clusterpolicies", "singular": "clusterpolicy", "kind": "ClusterPolicy",
                       "listKind": "ClusterPolicyList"},
             "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]},
}


def test_creating_a_crd_serves_its_resource_with_status(api_client):
    crd = client.ApiextensionsV1Api(api_client).create_custom_resource_definition(CLUSTER_POLICY_CRD)
    assert {c.type for c in crd.status.conditions if c.status == "True"} == {"Established", "NamesAccepted"}
    custom = client.CustomObjectsApi(api_client)
    created = custom.create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", {
        "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
        "spec": {"driver": {"enabled": True}}, "status": {"state": "ignored on create"}})
    assert created["metadata"]["generation"] == 1 and "status" not in created
    custom.patch_cluster_custom_object_status("nvidia.com", "v1", "clusterpolicies", "cluster-policy",
                                              {"status": {"state": "ready"}})
    got = custom.get_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy")
    assert got["status"] == {"state": "ready"} and got["spec"] == {"driver": {"enabled": True}}
    listed = custom.list_cluster_custom_object("nvidia.com", "v1", "clusterpolicies")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["cluster-policy"]


def test_a_namespaced_custom_resource_has_crud(api_client, namespace):
    client.ApiextensionsV1Api(api_client).create_custom_resource_definition(CRD_BODY)
    custom = client.CustomObjectsApi(api_client)
    args = ("example.com", "v1", namespace, "widgets")
    custom.create_namespaced_custom_object(*args, {"apiVersion": "example.com/v1", "kind": "Widget",
                                                   "metadata": {"name": "w"}, "spec": {"size": 1}})
    custom.patch_namespaced_custom_object(*args, "w", {"spec": {"size": 2}})
    got = custom.get_namespaced_custom_object(*args, "w")
    assert got["spec"] == {"size": 2} and got["metadata"]["generation"] == 2
    custom.delete_namespaced_custom_object(*args, "w")
    assert custom.list_namespaced_custom_object(*args)["items"] == []


def test_deleting_a_crd_removes_its_objects_and_its_endpoint(api_client):
    ext = client.ApiextensionsV1Api(api_client)
    ext.create_custom_resource_definition(CLUSTER_POLICY_CRD)
    custom = client.CustomObjectsApi(api_client)
    custom.create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", {"metadata": {"name": "cp"}})
    ext.delete_custom_resource_definition("clusterpolicies.nvidia.com")
    with pytest.raises(client.ApiException) as err:
        custom.list_cluster_custom_object("nvidia.com", "v1", "clusterpolicies")
    assert err.value.status == 404


# --- concurrency ---------------------------------------------------------------------------------------


def test_fifty_threads_creating_pods_at_once_lose_nothing(api_client, core, namespace, make_pod):
    errors: list[BaseException] = []
    barrier = threading.Barrier(50)

    def worker(i: int) -> None:
        try:
            barrier.wait()
            for j in range(4):
                core.create_namespaced_pod(namespace, make_pod(f"p-{i}-{j}"))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    pods = core.list_namespaced_pod(namespace).items
    assert len(pods) == 200
    assert len({p.metadata.resource_version for p in pods}) == 200
