"""Watch over HTTP (``kubernetes.watch.Watch``), and the in-process seam controllers use."""

from __future__ import annotations

import json
import queue
import threading

import pytest
import urllib3
from kubernetes import client, watch

from gpuconf.sim import ApiError, FakeApiServer


def names_and_types(events):
    return [(e["type"], e["object"].metadata.name) for e in events]


def test_a_watch_sees_added_modified_deleted_live(core, namespace, make_pod):
    core.create_namespaced_pod(namespace, make_pod("a"))
    seen = []
    w = watch.Watch()
    for event in w.stream(core.list_namespaced_pod, namespace, timeout_seconds=10):
        seen.append((event["type"], event["object"].metadata.name))
        if event["type"] == "ADDED":
            core.patch_namespaced_pod("a", namespace, {"metadata": {"labels": {"x": "y"}}})
        elif event["type"] == "MODIFIED":
            core.delete_namespaced_pod("a", namespace)
        else:
            w.stop()
    assert seen == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]


def test_a_watch_from_a_list_resource_version_replays_exactly_what_happened_since(core, namespace, make_pod):
    core.create_namespaced_pod(namespace, make_pod("before"))
    rv = core.list_namespaced_pod(namespace).metadata.resource_version
    core.create_namespaced_pod(namespace, make_pod("a"))
    core.patch_namespaced_pod("a", namespace, {"metadata": {"labels": {"x": "y"}}})
    core.delete_namespaced_pod("a", namespace)
    events = list(watch.Watch().stream(core.list_namespaced_pod, namespace, resource_version=rv, timeout_seconds=1))
    assert names_and_types(events) == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]


def test_resuming_from_the_last_seen_version_gives_no_duplicates(core, namespace, make_pod):
    rv = core.list_namespaced_pod(namespace).metadata.resource_version
    for i in range(3):
        core.create_namespaced_pod(namespace, make_pod(f"first-{i}"))
    w = watch.Watch()
    first = list(w.stream(core.list_namespaced_pod, namespace, resource_version=rv, timeout_seconds=1))
    for i in range(2):
        core.create_namespaced_pod(namespace, make_pod(f"second-{i}"))
    second = list(watch.Watch().stream(core.list_namespaced_pod, namespace, resource_version=w.resource_version,
                                       timeout_seconds=1))
    assert [e["object"].metadata.name for e in first] == ["first-0", "first-1", "first-2"]
    assert [e["object"].metadata.name for e in second] == ["second-0", "second-1"]


def test_a_watch_without_a_version_starts_with_the_current_objects_as_added(core, namespace, make_pod):
    for name in ("x", "y"):
        core.create_namespaced_pod(namespace, make_pod(name))
    events = list(watch.Watch().stream(core.list_namespaced_pod, namespace, timeout_seconds=1))
    assert names_and_types(events) == [("ADDED", "x"), ("ADDED", "y")]


def test_a_label_selector_turns_label_changes_into_added_and_deleted(core, namespace, make_pod):
    rv = core.list_namespaced_pod(namespace).metadata.resource_version
    core.create_namespaced_pod(namespace, make_pod("p", labels={"gpu": "no"}))
    core.create_namespaced_pod(namespace, make_pod("other", labels={"gpu": "no"}))
    for value in ("yes", "yes-still", "no"):
        core.patch_namespaced_pod("p", namespace, {"metadata": {"labels": {"gpu": value}}})
    events = list(watch.Watch().stream(core.list_namespaced_pod, namespace, resource_version=rv, timeout_seconds=1,
                                       label_selector="gpu in (yes, yes-still)"))
    assert names_and_types(events) == [("ADDED", "p"), ("MODIFIED", "p"), ("DELETED", "p")]


def test_a_field_selector_narrows_a_watch_to_one_node(core, namespace, make_pod):
    rv = core.list_namespaced_pod(namespace).metadata.resource_version
    core.create_namespaced_pod(namespace, make_pod("here", node="node-a"))
    core.create_namespaced_pod(namespace, make_pod("there", node="node-b"))
    events = list(watch.Watch().stream(core.list_pod_for_all_namespaces, resource_version=rv, timeout_seconds=1,
                                       field_selector="spec.nodeName=node-a"))
    assert names_and_types(events) == [("ADDED", "here")]


def test_a_watch_ends_after_its_timeout(core, namespace):
    rv = core.list_namespaced_config_map(namespace).metadata.resource_version  # after kube-root-ca.crt
    events = list(watch.Watch().stream(core.list_namespaced_config_map, namespace, timeout_seconds=1,
                                       resource_version=rv))
    assert events == []


def test_a_version_older_than_the_history_is_gone():
    with FakeApiServer(history=5) as server, client.ApiClient(client.Configuration(host=server.url)) as api:
        core = client.CoreV1Api(api)
        for i in range(20):
            core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
        with pytest.raises(client.ApiException) as err:
            list(watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version="3",
                                      timeout_seconds=1))
        assert err.value.status == 410
        oldest_gone = int(core.list_namespaced_config_map("default").metadata.resource_version) - 5
        assert err.value.reason == f"Expired: too old resource version: 3 ({oldest_gone})"

        # On the wire: 200, then one ERROR event carrying the 410 Status, as the real server sends it.
        response = urllib3.request("GET", server.url + "/api/v1/namespaces/default/configmaps"
                                   "?watch=true&resourceVersion=3&timeoutSeconds=1")
        (line,) = response.data.decode().splitlines()
        event = json.loads(line)
        assert response.status == 200 and event["type"] == "ERROR"
        assert (event["object"]["code"], event["object"]["reason"]) == (410, "Expired")


def test_bookmarks_carry_the_current_resource_version(apiserver, core, namespace):
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "c"}})
    events = list(watch.Watch().stream(core.list_namespaced_config_map, namespace, timeout_seconds=1,
                                       allow_watch_bookmarks=True))
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert events[0]["type"] == "ADDED" and bookmarks
    assert bookmarks[-1]["raw_object"]["metadata"]["resourceVersion"] == apiserver.store.resource_version


# --- the in-process seam ---------------------------------------------------------------------------------


def test_a_subscriber_sees_http_writes_after_the_lock_is_released(apiserver, core, namespace, make_pod):
    seen: queue.Queue[tuple[str, str, str]] = queue.Queue()

    def on_event(kind: str, pod: dict) -> None:
        # Reading the store from the callback would deadlock if callbacks ran under its lock.
        phase = apiserver.store.get("namespaces", namespace)["status"]["phase"]
        seen.put((kind, pod["metadata"]["name"], pod["status"]["phase"] + "/" + phase))

    subscription = apiserver.store.subscribe("pods", on_event, namespace=namespace)
    try:
        core.create_namespaced_pod(namespace, make_pod("p"))
        core.delete_namespaced_pod("p", namespace)
        assert [seen.get(timeout=5) for _ in range(2)] == [("ADDED", "p", "Pending/Active"),
                                                           ("DELETED", "p", "Pending/Active")]
    finally:
        subscription.close()


def test_in_process_writes_reach_http_watchers(apiserver, core, namespace, make_pod):
    store = apiserver.store
    rv = core.list_namespaced_pod(namespace).metadata.resource_version
    store.create("pods", make_pod("p"), namespace=namespace)
    store.bind_pod(namespace, "p", "node-a")
    store.patch_status("pods", "p", {"status": {"phase": "Running"}}, namespace=namespace)
    events = list(watch.Watch().stream(core.list_namespaced_pod, namespace, resource_version=rv, timeout_seconds=1))
    assert [(e["type"], e["object"].spec.node_name, e["object"].status.phase) for e in events] == [
        ("ADDED", None, "Pending"), ("MODIFIED", "node-a", "Pending"), ("MODIFIED", "node-a", "Running")]
    assert [c.type for c in events[-1]["object"].status.conditions] == ["PodScheduled"]


def test_a_store_watcher_is_a_queue_a_controller_can_drain(apiserver, namespace, make_pod):
    store = apiserver.store
    with store.watch("pods", namespace=namespace, resource_version=store.resource_version) as watcher:
        threading.Thread(target=store.create, args=("pods", make_pod("p")), kwargs={"namespace": namespace}).start()
        event = watcher.next(timeout=5)
        assert event is not None and (event.type, event.object["metadata"]["name"]) == ("ADDED", "p")
        assert watcher.next(timeout=0.05) is None


def test_in_process_updates_follow_the_same_rules_as_http(apiserver, namespace):
    store = apiserver.store
    cm = store.create("configmaps", {"metadata": {"name": "c"}, "data": {"a": "1"}}, namespace=namespace)
    cm["data"]["a"] = "2"
    updated = store.update("configmaps", cm)
    assert int(updated["metadata"]["resourceVersion"]) > int(cm["metadata"]["resourceVersion"])
    cm["data"]["a"] = "3"  # still carries the old resourceVersion
    with pytest.raises(ApiError) as err:
        store.update("configmaps", cm)
    assert err.value.code == 409 and err.value.reason == "Conflict"
    with pytest.raises(ApiError) as err:
        store.get("configmaps", "missing", namespace=namespace)
    assert err.value.message == 'configmaps "missing" not found'
