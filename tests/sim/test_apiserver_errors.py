"""Error answers: ``kind: Status`` bodies with the real API server's codes, reasons and wording."""

from __future__ import annotations

import json

import pytest
import urllib3
from kubernetes import client

SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
             "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
         "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
         "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


def status_of(call) -> dict:
    with pytest.raises(client.ApiException) as err:
        call()
    body = json.loads(err.value.body)
    assert body["kind"] == "Status" and body["status"] == "Failure" and body["code"] == err.value.status
    return body


def test_reading_a_missing_pod_is_not_found(core, namespace):
    body = status_of(lambda: core.read_namespaced_pod("x", namespace))
    assert (body["code"], body["reason"], body["message"]) == (404, "NotFound", 'pods "x" not found')
    assert body["details"] == {"name": "x", "kind": "pods"}


def test_creating_twice_is_already_exists(core, namespace, make_pod):
    core.create_namespaced_pod(namespace, make_pod("x"))
    body = status_of(lambda: core.create_namespaced_pod(namespace, make_pod("x")))
    assert (body["code"], body["reason"], body["message"]) == (409, "AlreadyExists", 'pods "x" already exists')


def test_replacing_with_a_stale_resource_version_is_a_conflict(core, namespace):
    stale = core.create_namespaced_config_map(namespace, {"metadata": {"name": "x"}, "data": {"a": "1"}})
    fresh = core.read_namespaced_config_map("x", namespace)
    fresh.data = {"a": "2"}
    core.replace_namespaced_config_map("x", namespace, fresh)
    stale.data = {"a": "3"}
    body = status_of(lambda: core.replace_namespaced_config_map("x", namespace, stale))
    assert (body["code"], body["reason"]) == (409, "Conflict")
    assert body["message"] == ('Operation cannot be fulfilled on configmaps "x": the object has been modified; '
                               "please apply your changes to the latest version and try again")
    assert core.read_namespaced_config_map("x", namespace).data == {"a": "2"}


def test_a_grouped_resource_is_named_with_its_group(api_client, namespace):
    body = status_of(lambda: client.CoordinationV1Api(api_client).read_namespaced_lease("l", namespace))
    assert body["message"] == 'leases.coordination.k8s.io "l" not found'
    assert body["details"] == {"name": "l", "group": "coordination.k8s.io", "kind": "leases"}


def test_a_missing_name_is_invalid_with_a_cause(core, namespace):
    body = status_of(lambda: core.create_namespaced_config_map(namespace, {"metadata": {}}))
    assert (body["code"], body["reason"]) == (422, "Invalid")
    assert body["message"] == 'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required'
    assert body["details"]["causes"] == [{"reason": "FieldValueRequired", "field": "metadata.name",
                                          "message": "Required value: name or generateName is required"}]


@pytest.mark.parametrize(("kind", "create", "rule"), [
    ("ConfigMap", lambda core: core.create_namespaced_config_map("sim-test", {"metadata": {"name": "Bad_Name"}}),
     SUBDOMAIN),
    ("Namespace", lambda core: core.create_namespace({"metadata": {"name": "Bad_Name"}}), LABEL),
], ids=["a configmap name must be a DNS-1123 subdomain", "a namespace name must be a DNS-1123 label"])
def test_an_invalid_name_is_rejected_with_the_real_message(core, namespace, kind, create, rule):
    body = status_of(lambda: create(core))
    assert body["message"] == f'{kind} "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": {rule}'
    assert body["details"]["causes"][0]["reason"] == "FieldValueInvalid"


def test_creating_in_a_missing_namespace_is_not_found(core, make_pod):
    body = status_of(lambda: core.create_namespaced_pod("nowhere", make_pod()))
    assert (body["code"], body["message"]) == (404, 'namespaces "nowhere" not found')


def test_a_namespace_mismatch_between_url_and_body_is_a_bad_request(core, namespace):
    body = status_of(lambda: core.create_namespaced_config_map(namespace, {"metadata": {"name": "c",
                                                                                        "namespace": "other"}}))
    assert (body["code"], body["reason"]) == (400, "BadRequest")
    assert body["message"] == "the namespace of the provided object does not match the namespace sent on the request"


def test_an_unknown_resource_path_is_not_found(apiserver):
    response = urllib3.request("GET", apiserver.url + "/apis/nowhere.example.com/v1/things")
    body = json.loads(response.data)
    assert response.status == 404 and body["message"] == "the server could not find the requested resource"


def test_posting_to_a_named_object_is_method_not_allowed(apiserver):
    response = urllib3.request("POST", apiserver.url + "/api/v1/namespaces/default/configmaps/x", body=b"{}")
    body = json.loads(response.data)
    assert (response.status, body["reason"]) == (405, "MethodNotAllowed")
    assert body["message"] == "the server does not allow this method on the requested resource"


def test_server_side_apply_is_an_unsupported_media_type(apiserver):
    response = urllib3.request("PATCH", apiserver.url + "/apis/scheduling.k8s.io/v1/priorityclasses/x",
                               body=b"{}", headers={"Content-Type": "application/apply-patch+yaml"})
    body = json.loads(response.data)
    assert (response.status, body["reason"]) == (415, "UnsupportedMediaType")
    assert body["message"].startswith("the body of the request was in an unknown format - accepted media types")


def test_deleting_through_the_status_subresource_is_method_not_allowed(apiserver, core, namespace, make_pod):
    core.create_namespaced_pod(namespace, make_pod("p"))
    response = urllib3.request("DELETE", f"{apiserver.url}/api/v1/namespaces/{namespace}/pods/p/status")
    assert response.status == 405
    assert core.read_namespaced_pod("p", namespace).metadata.name == "p"


def test_a_pod_naming_a_missing_runtime_class_is_refused_by_admission(core, namespace, make_pod):
    pod = make_pod("x")
    pod["spec"]["runtimeClassName"] = "nvidia-missing"
    body = status_of(lambda: core.create_namespaced_pod(namespace, pod))
    assert (body["code"], body["reason"]) == (403, "Forbidden")
    assert body["message"] == 'pods "x" is forbidden: pod rejected: RuntimeClass "nvidia-missing" not found'
    assert core.list_namespaced_pod(namespace).items == []
