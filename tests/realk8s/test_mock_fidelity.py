"""The simulated API server (gpuconf.sim.server) answers as kube-apiserver v1.36 does: the same
request to both, the same status, reason and message."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpuconf.sim.server import FakeApiServer
from realk8s.support import RealCluster

NAMESPACE = "fidelity"


@pytest.fixture(scope="module")
def clients(real_cluster: RealCluster) -> Iterator[dict[str, client.ApiClient]]:
    with FakeApiServer() as fake, client.ApiClient(client.Configuration(host=fake.url)) as api:
        apis = {"simulated": api, "real": real_cluster.api}
        for each in apis.values():
            client.CoreV1Api(each).create_namespace({"metadata": {"name": NAMESPACE}})
        yield apis
        real_cluster.clear_workloads()


@pytest.fixture(scope="module")
def servers(clients: dict[str, client.ApiClient]) -> dict[str, client.CoreV1Api]:
    return {name: client.CoreV1Api(api) for name, api in clients.items()}


def answer(core: client.CoreV1Api, pod: dict[str, Any]) -> tuple[int, str, str]:
    try:
        core.create_namespaced_pod(NAMESPACE, pod)
    except ApiException as e:
        body = json.loads(e.body)
        return int(e.status), str(body.get("reason")), str(body.get("message"))
    return 201, "Created", ""


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}], **spec}}


@pytest.mark.parametrize("body", [
    pytest.param(pod("no-class", priorityClassName="does-not-exist"), id="missing PriorityClass (Priority admission)"),
    pytest.param(pod("no-containers", containers=[]), id="no containers (pod validation)"),
    pytest.param(pod("two-names", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}]}}}),
        id="a node field selector with two values (pod validation)"),
    pytest.param(pod("one-name-a-term", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}
                              for name in ("a", "b")]}}}), id="one node name per term (accepted)"),
])
def test_the_same_request_gets_the_same_refusal(servers: dict[str, client.CoreV1Api], body: dict[str, Any]) -> None:
    real = answer(servers["real"], body)
    assert real[0] in ((201,) if body["metadata"]["name"] == "one-name-a-term" else (403, 422))
    assert answer(servers["simulated"], body) == real


# --- DRA: a CEL selector that does not compile ---------------------------------------------------

CEL_SAMPLES = json.loads((Path(__file__).parents[1] / "data" / "real" / "dra-cel" / "refusals.json").read_text())


def _create_dra(api: client.ApiClient, kind: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    resource = client.ResourceV1Api(api)
    create: Callable[[], Any] = {
        "ResourceClaim": lambda: resource.create_namespaced_resource_claim(NAMESPACE, body),
        "ResourceClaimTemplate": lambda: resource.create_namespaced_resource_claim_template(NAMESPACE, body),
        "DeviceClass": lambda: resource.create_device_class(body)}[kind]
    try:
        create()
    except ApiException as e:
        return int(e.status), json.loads(e.body)
    return 201, {}


@pytest.mark.parametrize("sample", CEL_SAMPLES,
                         ids=[f"{s['kind']}-{s['body']['metadata']['name']}" for s in CEL_SAMPLES])
def test_a_selector_that_does_not_compile_is_refused_alike(clients: dict[str, client.ApiClient],
                                                         sample: dict[str, Any]) -> None:
    """The requests of tests/data/real/dra-cel/ (recorded from v1.36.2) against the live server and
    the simulated one: the same Status, but for the syntax errors cel-go reports after the first."""
    from sim.test_apiserver_cel import same_refusal

    real = _create_dra(clients["real"], sample["kind"], sample["body"])
    simulated = _create_dra(clients["simulated"], sample["kind"], sample["body"])
    assert real[0] == simulated[0] == 422
    assert real[1] == sample["answer"], "the live server's answer differs from the recorded one"
    assert same_refusal(simulated[1], real[1])


# --- a new namespace, and one being deleted ----------------------------------------------------------


def _eventually(read: Callable[[], Any], within_s: float = 60) -> Any:
    deadline = time.monotonic() + within_s
    while True:
        try:
            return read()
        except ApiException as e:
            if e.status != 404 or time.monotonic() > deadline:
                raise
        time.sleep(0.05)


def test_a_new_namespace_gets_the_default_serviceaccount_and_kube_root_ca(servers: dict[str, client.CoreV1Api]) -> None:
    seen = {}
    for name, core in servers.items():
        core.create_namespace({"metadata": {"name": "fidelity-new"}})
        sa = _eventually(lambda c=core: c.read_namespaced_service_account("default", "fidelity-new"))
        cm = _eventually(lambda c=core: c.read_namespaced_config_map("kube-root-ca.crt", "fidelity-new"))
        seen[name] = (sa.metadata.labels, sa.secrets, cm.metadata.labels, cm.metadata.annotations, sorted(cm.data))
        core.delete_namespace("fidelity-new")
    assert seen["simulated"] == seen["real"]


def _namespace_events(core: client.CoreV1Api, name: str, since: str) -> list[tuple[str, str, list[str]]]:
    stream = core.list_namespace(watch=True, resource_version=since, field_selector=f"metadata.name={name}",
                                 timeout_seconds=60, _preload_content=False)
    events = []
    for line in stream:
        event = json.loads(line)
        status = event["object"].get("status") or {}
        events.append((event["type"], status.get("phase"), [c["reason"] for c in status.get("conditions") or []]))
        if event["type"] == "DELETED":
            break
    stream.close()
    return events


def test_a_namespace_being_deleted_refuses_new_content_then_goes(servers: dict[str, client.CoreV1Api]) -> None:
    """Deletion takes time on both: the namespace goes Terminating with the "kubernetes" finalizer,
    a create in it is refused (403, NamespaceTerminating), a finalizer on its content holds it, and
    once that is removed the namespace controller empties it, reports so, and it is gone."""
    seen: dict[str, Any] = {}
    for name, core in servers.items():
        core.create_namespace({"metadata": {"name": "fidelity-gone"}})
        core.create_namespaced_config_map("fidelity-gone", {"metadata": {"name": "held",
                                                                         "finalizers": ["example.com/hold"]}})
        since = core.list_namespace().metadata.resource_version
        answer = core.delete_namespace("fidelity-gone", _preload_content=False)
        deleted = json.loads(answer.data)
        refused = answer_of(core, pod("late"), "fidelity-gone")
        time.sleep(1)  # the namespace controller has had its go: the finalizer holds the namespace
        held = core.read_namespace("fidelity-gone")
        core.patch_namespaced_config_map("held", "fidelity-gone", {"metadata": {"finalizers": None}})
        events = _namespace_events(core, "fidelity-gone", since)
        seen[name] = {"status": answer.status, "phase": deleted["status"]["phase"],
                      "finalizers": deleted["spec"]["finalizers"], "marked": "deletionTimestamp" in deleted["metadata"],
                      "grace": deleted["metadata"].get("deletionGracePeriodSeconds"), "refused": refused,
                      "held": held.status.phase, "events": [events[0], events[-1]],
                      "conditions": events[-1][2]}
    assert seen["simulated"] == seen["real"]
    assert seen["real"]["refused"][:2] == (403, "Forbidden")


def answer_of(core: client.CoreV1Api, body: dict[str, Any], namespace: str) -> tuple[int, str, str, Any]:
    try:
        core.create_namespaced_pod(namespace, body)
    except ApiException as e:
        status = json.loads(e.body)
        return int(e.status), str(status.get("reason")), str(status.get("message")), status.get("details")
    return 201, "Created", "", None
