"""The three patch types, the /status subresource, and generation."""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from gpuconf.sim.patch import PatchError, json_patch, merge_patch, strategic_merge_patch

TWO_CONTAINERS = {
    "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "finalizers": ["x/keep"]},
    "spec": {
        "containers": [
            {"name": "main", "image": "cuda:12", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
            {"name": "side", "image": "busybox"},
        ],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    },
}


@pytest.fixture
def pod(core, namespace):
    return core.create_namespaced_pod(namespace, TWO_CONTAINERS)


def test_strategic_merge_patches_containers_by_name(core, namespace, pod):
    # A dict body is sent as application/strategic-merge-patch+json by the client.
    patched = core.patch_namespaced_pod("p", namespace, {"spec": {"containers": [
        {"name": "side", "image": "busybox:2"},
        {"name": "main", "env": [{"name": "B", "value": "changed"}, {"name": "C", "value": "3"}]},
    ]}})
    main, side = patched.spec.containers
    assert (main.name, main.image, side.image) == ("main", "cuda:12", "busybox:2")
    assert [(e.name, e.value) for e in main.env] == [("A", "1"), ("B", "changed"), ("C", "3")]


def test_strategic_merge_deletes_by_key_and_null(core, namespace, pod):
    patched = core.patch_namespaced_pod("p", namespace, {
        "metadata": {"labels": {"a": None}},
        "spec": {"containers": [{"name": "main", "env": [{"name": "A", "$patch": "delete"}]}]}})
    assert patched.metadata.labels == {"b": "2"}
    assert [e.name for e in patched.spec.containers[0].env] == ["B"]


def test_strategic_merge_replaces_lists_without_a_merge_key(core, namespace, pod):
    patched = core.patch_namespaced_pod("p", namespace, {"spec": {"tolerations": [
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]}})
    assert [t.key for t in patched.spec.tolerations] == ["dedicated"]


def test_strategic_merge_unions_finalizers(core, namespace, pod):
    patched = core.patch_namespaced_pod("p", namespace, {"metadata": {"finalizers": ["x/keep", "y/also"]}})
    assert patched.metadata.finalizers == ["x/keep", "y/also"]


def test_merge_patch_replaces_lists_whole(core, namespace, pod):
    patched = core.patch_namespaced_pod("p", namespace, {"metadata": {"labels": {"c": "3"}}, "spec": {
        "containers": [{"name": "only", "image": "x"}]}}, _content_type="application/merge-patch+json")
    assert [c.name for c in patched.spec.containers] == ["only"]
    assert patched.metadata.labels == {"a": "1", "b": "2", "c": "3"}


def test_json_patch_applies_operations_in_order(core, namespace, pod):
    patched = core.patch_namespaced_pod("p", namespace, [
        {"op": "test", "path": "/spec/containers/1/name", "value": "side"},
        {"op": "replace", "path": "/spec/containers/1/image", "value": "busybox:3"},
        {"op": "add", "path": "/metadata/labels/new~1key", "value": "v"},
        {"op": "remove", "path": "/metadata/labels/a"},
    ])
    assert patched.spec.containers[1].image == "busybox:3"
    assert patched.metadata.labels == {"b": "2", "new/key": "v"}


def test_a_failing_json_patch_test_is_unprocessable(core, namespace, pod):
    with pytest.raises(client.ApiException) as err:
        core.patch_namespaced_pod("p", namespace, [{"op": "test", "path": "/spec/nodeName", "value": "x"}])
    assert err.value.status == 422


def test_node_conditions_merge_by_type_through_status(core):
    core.create_node({"metadata": {"name": "n"}, "status": {"conditions": [
        {"type": "Ready", "status": "False"}, {"type": "MemoryPressure", "status": "False"}]}})
    patched = core.patch_node_status("n", {"status": {"conditions": [{"type": "Ready", "status": "True",
                                                                      "reason": "KubeletReady"}]}})
    assert [(c.type, c.status) for c in patched.status.conditions] == [("Ready", "True"), ("MemoryPressure", "False")]


def test_a_patch_with_a_stale_resource_version_conflicts(core, namespace, pod):
    core.patch_namespaced_pod("p", namespace, {"metadata": {"labels": {"bump": "1"}}})
    with pytest.raises(client.ApiException) as err:
        core.patch_namespaced_pod("p", namespace, {"metadata": {"resourceVersion": pod.metadata.resource_version,
                                                                "labels": {"bump": "2"}}})
    assert err.value.status == 409


def test_strategic_merge_on_a_custom_resource_is_an_unsupported_media_type(api_client):
    client.ApiextensionsV1Api(api_client).create_custom_resource_definition({
        "metadata": {"name": "things.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster", "names": {"plural": "things", "kind": "Thing"},
                 "versions": [{"name": "v1", "served": True, "storage": True}]}})
    custom = client.CustomObjectsApi(api_client)
    custom.create_cluster_custom_object("example.com", "v1", "things", {"metadata": {"name": "t"}})
    with pytest.raises(client.ApiException) as err:
        custom.patch_cluster_custom_object("example.com", "v1", "things", "t", {"spec": {}},
                                           _content_type="application/strategic-merge-patch+json")
    assert err.value.status == 415
    assert json.loads(err.value.body)["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json")


# --- status subresource ------------------------------------------------------------------------------------


def test_the_main_endpoint_ignores_status_and_status_ignores_the_rest(core, namespace, pod):
    via_main = core.patch_namespaced_pod("p", namespace, {"metadata": {"labels": {"m": "1"}},
                                                          "status": {"phase": "Running"}})
    assert via_main.status.phase == "Pending" and via_main.metadata.labels["m"] == "1"
    via_status = core.patch_namespaced_pod_status("p", namespace, {"metadata": {"labels": {"s": "1"}},
                                                                   "spec": {"nodeName": "x"},
                                                                   "status": {"phase": "Running"}})
    assert via_status.status.phase == "Running"
    assert "s" not in via_status.metadata.labels and via_status.spec.node_name is None
    current = core.read_namespaced_pod_status("p", namespace)
    current.status.phase = "Succeeded"
    assert core.replace_namespaced_pod_status("p", namespace, current).status.phase == "Succeeded"


def test_generation_counts_spec_changes_only(api_client, core, namespace):
    batch = client.BatchV1Api(api_client)
    job = batch.create_namespaced_job(namespace, {"metadata": {"name": "j"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}})
    assert job.metadata.generation == 1
    assert batch.patch_namespaced_job("j", namespace, {"metadata": {"labels": {"x": "y"}}}).metadata.generation == 1
    assert batch.patch_namespaced_job_status("j", namespace, {"status": {"active": 1}}).metadata.generation == 1
    assert batch.patch_namespaced_job("j", namespace, {"spec": {"suspend": True}}).metadata.generation == 2


def test_a_no_op_patch_keeps_the_resource_version(core, namespace, pod):
    again = core.patch_namespaced_pod("p", namespace, {"metadata": {"labels": {"a": "1"}}})
    assert again.metadata.resource_version == pod.metadata.resource_version


# --- the patch functions on their own ------------------------------------------------------------------------

SMP_CASES = {
    "$patch: replace on a map replaces it": (
        {"spec": {"nodeSelector": {"a": "1", "b": "2"}}},
        {"spec": {"nodeSelector": {"$patch": "replace", "c": "3"}}},
        {"spec": {"nodeSelector": {"c": "3"}}}),
    "$patch: replace in a list replaces the list": (
        {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}},
        {"spec": {"containers": [{"name": "c"}, {"$patch": "replace"}]}},
        {"spec": {"containers": [{"name": "c"}]}}),
    "$retainKeys drops the keys it does not list": (
        {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}},
        {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}},
        {"spec": {"strategy": {"type": "Recreate"}}}),
    "$deleteFromPrimitiveList removes finalizers": (
        {"metadata": {"finalizers": ["a", "b", "c"]}},
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}},
        {"metadata": {"finalizers": ["a", "c"]}}),
    "$setElementOrder reorders merged items": (
        {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}},
        {"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}], "containers": [{"name": "b"}]}},
        {"spec": {"containers": [{"name": "b"}, {"name": "a"}]}}),
    "owner references merge by uid": (
        {"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}]}},
        {"metadata": {"ownerReferences": [{"uid": "2", "name": "b"}]}},
        {"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}, {"uid": "2", "name": "b"}]}}),
    "container ports merge by containerPort, volume mounts by mountPath": (
        {"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}],
                                  "volumeMounts": [{"mountPath": "/a", "name": "x"}]}]}},
        {"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 81}],
                                  "volumeMounts": [{"mountPath": "/a", "name": "y"}]}]}},
        {"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}, {"containerPort": 81}],
                                  "volumeMounts": [{"mountPath": "/a", "name": "y"}]}]}}),
}


@pytest.mark.parametrize(("doc", "patch", "expected"), SMP_CASES.values(), ids=SMP_CASES.keys())
def test_strategic_merge_directive(doc, patch, expected):
    before = json.dumps(doc)
    assert strategic_merge_patch(doc, patch) == expected
    assert json.dumps(doc) == before  # the input is never modified


def test_a_merge_list_item_without_its_key_is_an_error():
    with pytest.raises(PatchError):
        strategic_merge_patch({"spec": {"containers": []}}, {"spec": {"containers": [{"image": "x"}]}})


def test_merge_patch_is_rfc_7386():
    assert merge_patch({"a": "b", "c": {"d": "e", "f": "g"}}, {"a": "z", "c": {"f": None}}) == {"a": "z",
                                                                                               "c": {"d": "e"}}


def test_json_patch_move_copy_and_append():
    doc = {"a": [1, 2], "b": {"c": 1}}
    out = json_patch(doc, [{"op": "move", "from": "/b/c", "path": "/d"}, {"op": "copy", "from": "/a", "path": "/e"},
                           {"op": "add", "path": "/a/-", "value": 3}])
    assert out == {"a": [1, 2, 3], "b": {}, "d": 1, "e": [1, 2]} and doc == {"a": [1, 2], "b": {"c": 1}}
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "test", "path": "/a/0", "value": True}])
