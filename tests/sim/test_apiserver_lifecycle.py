"""Deletion (finalizers, graceful pod deletion, namespaces), pod logs, binding, collections, dry run."""

from __future__ import annotations

import json
import time

import pytest
from kubernetes import client, watch


def missing(read) -> bool:
    try:
        read()
    except client.ApiException as e:
        if e.status == 404:
            return True
        raise
    return False


# --- finalizers ------------------------------------------------------------------------------------------


def test_an_object_with_finalizers_stays_until_they_are_removed(core, namespace):
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "c", "finalizers": ["example.com/hold"]}})
    answer = core.delete_namespaced_config_map("c", namespace)
    assert answer["metadata"]["deletionTimestamp"]  # the object itself, not a Success Status
    held = core.read_namespaced_config_map("c", namespace)
    assert held.metadata.deletion_timestamp is not None
    with pytest.raises(client.ApiException) as err:
        core.patch_namespaced_config_map("c", namespace, {"metadata": {"finalizers": ["example.com/new"]}})
    assert err.value.status == 422  # no new finalizers once deletion started
    core.patch_namespaced_config_map("c", namespace, [{"op": "remove", "path": "/metadata/finalizers"}])
    assert missing(lambda: core.read_namespaced_config_map("c", namespace))


def test_deleting_without_finalizers_answers_success_with_the_uid(core, namespace):
    cm = core.create_namespaced_config_map(namespace, {"metadata": {"name": "c"}})
    answer = core.delete_namespaced_config_map("c", namespace)
    assert answer["status"] == "Success"
    assert answer["details"] == {"name": "c", "kind": "configmaps", "uid": cm.metadata.uid}


def test_a_precondition_on_the_uid_guards_a_delete(core, namespace):
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "c"}})
    with pytest.raises(client.ApiException) as err:
        core.delete_namespaced_config_map("c", namespace, body={"preconditions": {"uid": "not-it"}})
    assert err.value.status == 409 and "Precondition failed: UID in precondition: not-it" in err.value.body


# --- graceful pod deletion ---------------------------------------------------------------------------------


def test_without_node_agents_a_bound_pod_is_deleted_at_once(core, namespace, make_pod):
    core.create_namespaced_pod(namespace, make_pod("p", node="node-a"))
    core.delete_namespaced_pod("p", namespace)
    assert missing(lambda: core.read_namespaced_pod("p", namespace))


def test_a_bound_pod_waits_for_its_node_agent_to_confirm(apiserver, core, namespace, make_pod):
    asked = []
    apiserver.store.set_pod_termination_hook(lambda pod: asked.append(pod["metadata"]["name"]) or True)
    core.create_namespaced_pod(namespace, make_pod("bound", node="node-a", terminationGracePeriodSeconds=10))
    core.create_namespaced_pod(namespace, make_pod("pending"))

    core.delete_namespaced_pod("pending", namespace)  # never scheduled: nothing to wait for
    terminating = core.delete_namespaced_pod("bound", namespace)
    assert asked == ["bound"]
    assert terminating.metadata.deletion_grace_period_seconds == 10
    assert core.read_namespaced_pod("bound", namespace).metadata.deletion_timestamp is not None
    assert missing(lambda: core.read_namespaced_pod("pending", namespace))

    core.delete_namespaced_pod("bound", namespace, grace_period_seconds=0)  # the kubelet's confirmation
    assert missing(lambda: core.read_namespaced_pod("bound", namespace))


def test_a_terminal_pod_is_removed_at_once_even_with_node_agents(apiserver, core, namespace, make_pod):
    apiserver.store.set_pod_termination_hook(lambda pod: True)
    core.create_namespaced_pod(namespace, make_pod("done", node="node-a"))
    core.patch_namespaced_pod_status("done", namespace, {"status": {"phase": "Succeeded"}})
    core.delete_namespaced_pod("done", namespace)
    assert missing(lambda: core.read_namespaced_pod("done", namespace))


# --- namespaces --------------------------------------------------------------------------------------------------


def gone(read, within_s: float = 10) -> bool:
    """Whether ``read`` answers 404 within ``within_s`` seconds (a controller finishes the deletion)."""
    deadline = time.monotonic() + within_s
    while not missing(read):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_new_namespace_gets_the_default_serviceaccount_and_the_root_ca_configmap(core, namespace):
    """As kube-controller-manager's serviceaccount and root-ca-cert-publisher controllers do
    (tests/realk8s/test_mock_fidelity.py finds the same on a real control plane)."""
    assert [sa.metadata.name for sa in core.list_namespaced_service_account(namespace).items] == ["default"]
    cm = core.read_namespaced_config_map("kube-root-ca.crt", namespace)
    assert list(cm.data) == ["ca.crt"]
    assert "kubernetes.default.svc" in cm.metadata.annotations["kubernetes.io/description"]
    for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
        assert core.read_namespaced_service_account("default", ns) and core.read_namespaced_config_map(
            "kube-root-ca.crt", ns)


def test_deleting_a_namespace_removes_its_contents_then_itself(core, namespace, make_pod):
    rv = core.list_namespace().metadata.resource_version
    core.create_namespaced_pod(namespace, make_pod("p"))
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "c"}})
    answer = core.delete_namespace(namespace)  # the namespace, Terminating, as the real server answers
    assert (answer["status"]["phase"], answer["spec"]["finalizers"]) == ("Terminating", ["kubernetes"])
    assert answer["metadata"]["deletionTimestamp"] and "deletionGracePeriodSeconds" not in answer["metadata"]
    assert gone(lambda: core.read_namespace(namespace))
    assert core.list_pod_for_all_namespaces(field_selector=f"metadata.namespace={namespace}").items == []
    assert core.list_config_map_for_all_namespaces(field_selector=f"metadata.namespace={namespace}").items == []
    events = [(e["type"], e["object"].status.phase, [c.reason for c in e["object"].status.conditions or []])
              for e in watch.Watch().stream(core.list_namespace, resource_version=rv, timeout_seconds=1,
                                            field_selector=f"metadata.name={namespace}")]
    removed = ["ResourcesDiscovered", "ParsedGroupVersions", "ContentDeleted", "ContentRemoved",
               "ContentHasNoFinalizers"]
    assert events == [("MODIFIED", "Terminating", []), ("MODIFIED", "Terminating", removed),
                      ("DELETED", "Terminating", removed)]


def test_a_terminating_namespace_refuses_new_content(core, namespace, make_pod):
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "held", "finalizers": ["example.com/x"]}})
    core.delete_namespace(namespace)
    assert core.read_namespace(namespace).status.phase == "Terminating"
    with pytest.raises(client.ApiException) as err:
        core.create_namespaced_pod(namespace, make_pod("late"))
    body = json.loads(err.value.body)
    assert (err.value.status, body["reason"]) == (403, "Forbidden")
    assert body["message"] == (f'pods "late" is forbidden: unable to create new content in namespace {namespace} '
                               "because it is being terminated")
    core.patch_namespaced_config_map("held", namespace, {"metadata": {"finalizers": None}})
    assert gone(lambda: core.read_namespace(namespace))


# --- pod logs -------------------------------------------------------------------------------------------------------


def test_pod_logs_are_plain_text_per_container_with_tail_lines(apiserver, core, namespace, make_pod):
    core.create_namespaced_pod(namespace, make_pod("p", containers=("probe", "sidecar")))
    apiserver.logs.set(namespace, "p", "probe", "line 1\nline 2\nline 3\n")
    apiserver.logs.set(namespace, "p", "probe", "crashed\n", previous=True)
    assert core.read_namespaced_pod_log("p", namespace, container="probe") == "line 1\nline 2\nline 3\n"
    assert core.read_namespaced_pod_log("p", namespace, container="probe", tail_lines=2) == "line 2\nline 3\n"
    assert core.read_namespaced_pod_log("p", namespace, container="probe", previous=True) == "crashed\n"
    response = core.read_namespaced_pod_log("p", namespace, container="probe", _preload_content=False)
    assert response.headers["Content-Type"] == "text/plain"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({}, "a container name must be specified for pod p, choose one of: [probe sidecar]"),
    ({"container": "nope"}, "container nope is not valid for pod p"),
    ({"container": "probe"}, 'container "probe" in pod "p" is waiting to start: ContainerCreating'),
], ids=["a pod with two containers needs a container name", "an unknown container is a bad request",
        "a pending container has no log yet"])
def test_pod_log_errors(core, namespace, make_pod, kwargs, message):
    core.create_namespaced_pod(namespace, make_pod("p", containers=("probe", "sidecar")))
    with pytest.raises(client.ApiException) as err:
        core.read_namespaced_pod_log("p", namespace, **kwargs)
    assert err.value.status == 400 and json.loads(err.value.body)["message"] == message


def test_a_node_agent_can_serve_logs(apiserver, core, namespace, make_pod):
    apiserver.set_log_provider(lambda req: f"{req.pod['spec']['nodeName']}:{req.container}\n")
    core.create_namespaced_pod(namespace, make_pod("p", node="node-a"))
    assert core.read_namespaced_pod_log("p", namespace) == "node-a:main\n"


# --- binding, collections, dry run -----------------------------------------------------------------------------------


def test_binding_assigns_a_node_once(apiserver, core, namespace, make_pod):
    core.create_namespaced_pod(namespace, make_pod("p"))
    body = {"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "node-a"}}
    # The real server answers a binding with a Status, which the generated client cannot read as a
    # V1Binding; skip deserialisation as callers against real clusters must.
    response = core.create_namespaced_pod_binding("p", namespace, body, _preload_content=False)
    assert response.status == 201
    pod = core.read_namespaced_pod("p", namespace)
    assert pod.spec.node_name == "node-a" and pod.status.conditions[0].type == "PodScheduled"
    with pytest.raises(client.ApiException) as err:
        core.create_namespaced_pod_binding("p", namespace, body, _preload_content=False)
    assert err.value.status == 409 and 'pod p is already assigned to node \\"node-a\\"' in err.value.body


def test_delete_collection_removes_what_the_selector_selects(core, namespace, make_pod):
    for name, tier in (("a", "gpu"), ("b", "gpu"), ("c", "cpu")):
        core.create_namespaced_pod(namespace, make_pod(name, labels={"tier": tier}))
    core.delete_collection_namespaced_pod(namespace, label_selector="tier=gpu")
    assert [p.metadata.name for p in core.list_namespaced_pod(namespace).items] == ["c"]


def test_dry_run_validates_but_stores_nothing(core, namespace):
    created = core.create_namespaced_config_map(namespace, {"metadata": {"name": "c"}}, dry_run="All")
    assert created.metadata.uid and missing(lambda: core.read_namespaced_config_map("c", namespace))
