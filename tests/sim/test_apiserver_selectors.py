"""List with label selectors, field selectors (per-resource whitelists) and pagination."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client

from gpuconf.sim import ApiError, Store
from gpuconf.sim.selectors import SelectorError, parse_field_selector, parse_label_selector

PODS = {
    "a": {"app": "probe", "tier": "gpu", "gpus": "8"},
    "b": {"app": "probe", "tier": "cpu", "gpus": "0"},
    "c": {"app": "other"},
    "d": {},
}

LABEL_CASES = {
    "app=probe selects by equality": ("app=probe", {"a", "b"}),
    "app==probe is equality too": ("app==probe", {"a", "b"}),
    "app!=probe also selects pods without the label": ("app!=probe", {"c", "d"}),
    "tier in (gpu,cpu) selects either": ("tier in (gpu, cpu)", {"a", "b"}),
    "tier notin (gpu) also selects pods without the label": ("tier notin (gpu)", {"b", "c", "d"}),
    "a bare key selects pods that have it": ("tier", {"a", "b"}),
    "!key selects pods that lack it": ("!tier", {"c", "d"}),
    "terms are ANDed": ("app=probe,tier!=cpu", {"a"}),
    "gpus>4 compares numbers": ("gpus>4", {"a"}),
    "gpus<4 compares numbers": ("gpus<4", {"b"}),
    "an empty selector selects everything": ("", {"a", "b", "c", "d"}),
}


@pytest.fixture
def labelled_pods(core, namespace, make_pod):
    for name, labels in PODS.items():
        core.create_namespaced_pod(namespace, make_pod(name, labels=labels))
    return namespace


@pytest.mark.parametrize(("selector", "expected"), LABEL_CASES.values(), ids=LABEL_CASES.keys())
def test_label_selector(core, labelled_pods, selector, expected):
    items = core.list_namespaced_pod(labelled_pods, label_selector=selector).items
    assert {p.metadata.name for p in items} == expected


def test_a_malformed_label_selector_is_a_bad_request(core, labelled_pods):
    with pytest.raises(client.ApiException) as err:
        core.list_namespaced_pod(labelled_pods, label_selector="tier in (gpu")
    assert err.value.status == 400 and json.loads(err.value.body)["reason"] == "BadRequest"


# --- field selectors -----------------------------------------------------------------------------------


def test_pod_field_selectors(core, namespace, make_pod):
    core.create_namespaced_pod(namespace, make_pod("on-a", node="node-a"))
    core.create_namespaced_pod(namespace, make_pod("on-b", node="node-b", restartPolicy="Never"))
    core.create_namespaced_pod(namespace, make_pod("unscheduled"))

    def names(selector: str) -> set[str]:
        return {p.metadata.name for p in core.list_namespaced_pod(namespace, field_selector=selector).items}

    assert names("spec.nodeName=node-a") == {"on-a"}
    assert names("spec.nodeName=") == {"unscheduled"}
    assert names("spec.nodeName!=node-a") == {"on-b", "unscheduled"}
    assert names("spec.restartPolicy=Never") == {"on-b"}
    assert names("status.phase=Pending,metadata.name=on-a") == {"on-a"}
    assert names("spec.schedulerName=default-scheduler") == {"on-a", "on-b", "unscheduled"}
    assert names("spec.serviceAccountName=default,status.podIP=") == {"on-a", "on-b", "unscheduled"}
    assert names("status.nominatedNodeName=x") == set()
    all_namespaces = core.list_pod_for_all_namespaces(field_selector=f"metadata.namespace={namespace}").items
    assert len(all_namespaces) == 3


def test_event_field_selectors(core, namespace):
    for name, pod, reason in (("e1", "p1", "Started"), ("e2", "p2", "Failed")):
        core.create_namespaced_event(namespace, {
            "metadata": {"name": name}, "involvedObject": {"kind": "Pod", "name": pod, "namespace": namespace,
                                                           "uid": f"uid-{pod}", "apiVersion": "v1"},
            "reason": reason, "type": "Warning" if reason == "Failed" else "Normal", "source": {"component": "kubelet"},
            "reportingComponent": "kubelet"})

    def names(selector: str) -> set[str]:
        return {e.metadata.name for e in core.list_namespaced_event(namespace, field_selector=selector).items}

    assert names("involvedObject.name=p1") == {"e1"}
    assert names("involvedObject.kind=Pod,reason=Failed") == {"e2"}
    assert names("involvedObject.uid=uid-p2,type=Warning") == {"e2"}
    assert names("source=kubelet,reportingComponent=kubelet,involvedObject.apiVersion=v1") == {"e1", "e2"}
    assert names(f"involvedObject.namespace={namespace},involvedObject.fieldPath=") == {"e1", "e2"}


def test_cluster_scoped_field_selectors(api_client, core):
    core.create_node({"metadata": {"name": "cordoned"}, "spec": {"unschedulable": True}})
    core.create_node({"metadata": {"name": "open"}})
    assert [n.metadata.name for n in core.list_node(field_selector="spec.unschedulable=true").items] == ["cordoned"]
    assert [n.metadata.name for n in core.list_node(field_selector="spec.unschedulable!=true").items] == ["open"]
    assert "default" in {n.metadata.name for n in core.list_namespace(field_selector="status.phase=Active").items}

    dra = client.ResourceV1Api(api_client)
    for node, driver in (("node-a", "gpu.nvidia.com"), ("node-b", "gpu.nvidia.com"), ("node-a", "other.example")):
        dra.create_resource_slice({"metadata": {"generateName": f"{node}-"}, "spec": {
            "driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}})
    slices = dra.list_resource_slice(field_selector="spec.nodeName=node-a,spec.driver=gpu.nvidia.com").items
    assert [(s.spec.node_name, s.spec.driver) for s in slices] == [("node-a", "gpu.nvidia.com")]


def test_secret_type_and_job_success_field_selectors(api_client, core, namespace):
    core.create_namespaced_secret(namespace, {"metadata": {"name": "tls"}, "type": "kubernetes.io/tls",
                                              "data": {"tls.crt": "", "tls.key": ""}})
    core.create_namespaced_secret(namespace, {"metadata": {"name": "plain"}})
    assert [s.metadata.name for s in core.list_namespaced_secret(
        namespace, field_selector="type=kubernetes.io/tls").items] == ["tls"]
    batch = client.BatchV1Api(api_client)
    batch.create_namespaced_job(namespace, {"metadata": {"name": "j"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}})
    batch.patch_namespaced_job_status("j", namespace, {"status": {"succeeded": 1}})
    assert [j.metadata.name for j in batch.list_namespaced_job(namespace, field_selector="status.successful=1")
            .items] == ["j"]


@pytest.mark.parametrize(("lister", "field"), [
    (lambda core, ns: core.list_namespaced_pod(ns, field_selector="spec.containers=x"), "spec.containers"),
    (lambda core, ns: core.list_namespaced_config_map(ns, field_selector="data.k=v"), "data.k"),
    (lambda core, ns: core.list_node(field_selector="status.phase=Ready"), "status.phase"),
], ids=["pods do not index spec.containers", "configmaps index only metadata", "nodes do not index status.phase"])
def test_an_unsupported_field_is_a_bad_request(core, namespace, lister, field):
    with pytest.raises(client.ApiException) as err:
        lister(core, namespace)
    body = json.loads(err.value.body)
    assert (err.value.status, body["reason"], body["message"]) == (400, "BadRequest",
                                                                   f"field label not supported: {field}")


# --- pagination ----------------------------------------------------------------------------------------


def test_limit_and_continue_page_through_a_list_in_name_order(core, namespace):
    for i in range(7):  # labelled: the namespace holds kube-root-ca.crt too
        core.create_namespaced_config_map(namespace, {"metadata": {"name": f"cm-{i}", "labels": {"page": "yes"}}})
    seen, token, pages = [], None, 0
    while True:
        page = core.list_namespaced_config_map(namespace, limit=3, _continue=token, label_selector="page=yes")
        seen += [c.metadata.name for c in page.items]
        pages += 1
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count == 7 - len(seen)
    assert pages == 3 and seen == [f"cm-{i}" for i in range(7)]


# --- the parsers on their own ----------------------------------------------------------------------------


def test_field_selector_values_may_escape_commas_and_equals():
    selector = parse_field_selector(r"metadata.name=a\,b\=c,spec.nodeName!=x")
    assert [(r.field, r.op, r.value) for r in selector.requirements] == [("metadata.name", "=", "a,b=c"),
                                                                         ("spec.nodeName", "!=", "x")]


@pytest.mark.parametrize("text", ["a in (b", "a notin b", "=b", "a=b,,c", "a>b"],
                         ids=["an unclosed set", "a set without parentheses", "a missing key", "an empty term",
                              "a non-numeric bound"])
def test_malformed_label_selectors_are_rejected(text):
    with pytest.raises(SelectorError):
        parse_label_selector(text)


# --- the spec.nodeName index agrees with a full scan ------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["create", "bind", "move", "delete"]), st.integers(0, 5),
                          st.sampled_from(["", "node-a", "node-b"])), max_size=25))
def test_the_node_name_index_agrees_with_a_full_scan(ops):
    store = Store()
    for op, i, node in ops:
        name = f"p{i}"
        try:
            if op == "create":
                spec = {"containers": [{"name": "c", "image": "x"}], **({"nodeName": node} if node else {})}
                store.create("pods", {"metadata": {"name": name}, "spec": spec}, namespace="default")
            elif op == "bind" and node:
                store.bind_pod("default", name, node)
            elif op == "move":
                store.patch("pods", name, {"spec": {"nodeName": node or None}}, namespace="default")
            elif op == "delete":
                store.delete("pods", name, namespace="default")
        except ApiError:
            pass
    everything = store.list("pods").items
    for node in ("", "node-a", "node-b"):
        indexed = [p["metadata"]["name"] for p in store.list("pods", field_selector=f"spec.nodeName={node}").items]
        scanned = [p["metadata"]["name"] for p in everything if p["spec"].get("nodeName", "") == node]
        assert indexed == scanned


def test_a_watch_on_one_node_sees_pods_bound_to_it(apiserver, core, namespace, make_pod):
    store = apiserver.store
    with store.watch("pods", field_selector="spec.nodeName=node-a", resource_version=store.resource_version) as w:
        core.create_namespaced_pod(namespace, make_pod("mine"))
        core.create_namespaced_pod(namespace, make_pod("theirs"))
        store.bind_pod(namespace, "theirs", "node-b")
        store.bind_pod(namespace, "mine", "node-a")
        core.delete_namespaced_pod("mine", namespace)
        events = [w.next(timeout=5) for _ in range(2)]
        assert [(e.type, e.object["metadata"]["name"]) for e in events if e] == [("ADDED", "mine"),
                                                                                 ("DELETED", "mine")]
        assert w.next(timeout=0.05) is None
