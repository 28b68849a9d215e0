"""API faults reach the official client as the exceptions a flaky real cluster would raise."""

from __future__ import annotations

import json

import pytest
import urllib3
from kubernetes import client, watch

from gpuconf.sim import FaultMode, FaultPlan, RequestInfo
from gpuconf.sim.faults import AGENT_USER_AGENT


def test_a_throttled_create_is_a_429_with_retry_after(apiserver, core, namespace, make_pod):
    apiserver.faults.throttle(times=1, retry_after=7)
    with pytest.raises(client.ApiException) as err:
        core.create_namespaced_pod(namespace, make_pod())
    assert err.value.status == 429 and err.value.headers["Retry-After"] == "7"
    # Priority and Fairness's answer: plain text, not a Status (tests/data/real/apf-429/)
    assert err.value.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert err.value.body == "Too many requests, please try again later.\n"
    core.create_namespaced_pod(namespace, make_pod())  # only the next request was throttled


def test_a_throttled_read_is_retried_by_urllib3_after_retry_after(apiserver, core, namespace):
    # urllib3's default Retry honours Retry-After on 429 for idempotent methods, so a GET never
    # surfaces the 429 unless throttling outlasts the retries.
    apiserver.faults.throttle(times=1, retry_after=1)
    assert core.list_namespaced_pod(namespace).items == []
    assert [i.mode for i in apiserver.faults.injected] == [FaultMode.THROTTLE]


def test_a_server_error_hits_only_the_chosen_verb_and_resource(apiserver, core, namespace, make_pod):
    apiserver.faults.server_error(verbs={"create"}, resources={"pods"})
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "fine"}})
    with pytest.raises(client.ApiException) as err:
        core.create_namespaced_pod(namespace, make_pod())
    body = json.loads(err.value.body)
    assert (err.value.status, body["reason"], body["message"]) == (500, "InternalError",
                                                                   "Internal error occurred: injected fault")
    assert core.list_namespaced_pod(namespace).items == []


def test_a_dropped_create_is_a_protocol_error(apiserver, core, namespace, make_pod):
    # urllib3 does not retry a POST whose connection died: the caller sees the ProtocolError.
    apiserver.faults.drop(verbs={"create"}, times=1)
    with pytest.raises(urllib3.exceptions.ProtocolError):
        core.create_namespaced_pod(namespace, make_pod())
    core.create_namespaced_pod(namespace, make_pod())


def test_dropped_reads_exhaust_the_clients_retries(apiserver, core, namespace):
    apiserver.faults.drop(verbs={"list"})
    with pytest.raises(urllib3.exceptions.MaxRetryError) as err:
        core.list_namespaced_pod(namespace)
    assert isinstance(err.value.reason, urllib3.exceptions.ProtocolError)
    apiserver.faults.clear()
    core.list_namespaced_pod(namespace)


def test_a_single_dropped_read_is_retried_transparently(apiserver, core, namespace):
    apiserver.faults.drop(verbs={"list"}, times=1)
    assert core.list_namespaced_pod(namespace).items == []
    assert [i.mode for i in apiserver.faults.injected] == [FaultMode.DROP]


def test_a_cleanly_cut_watch_is_resumed_by_the_client_without_duplicates(apiserver, core, namespace, make_pod):
    rv = core.list_namespaced_pod(namespace).metadata.resource_version
    for i in range(5):
        core.create_namespaced_pod(namespace, make_pod(f"p{i}"))
    apiserver.faults.cut_watch(after_events=2, times=2)
    w = watch.Watch()
    seen = []
    for event in w.stream(core.list_namespaced_pod, namespace, resource_version=rv):
        seen.append(event["object"].metadata.name)
        if len(seen) == 5:
            w.stop()
    assert seen == ["p0", "p1", "p2", "p3", "p4"]
    assert [i.mode for i in apiserver.faults.injected] == [FaultMode.CUT_WATCH] * 2


def test_a_cut_watch_with_a_timeout_just_ends_early(apiserver, core, namespace, make_pod):
    for i in range(3):
        core.create_namespaced_pod(namespace, make_pod(f"p{i}"))
    apiserver.faults.cut_watch(after_events=1)
    events = list(watch.Watch().stream(core.list_namespaced_pod, namespace, timeout_seconds=5))
    assert [e["object"].metadata.name for e in events] == ["p0"]


def test_an_abruptly_cut_watch_is_a_protocol_error(apiserver, core, namespace, make_pod):
    for i in range(3):
        core.create_namespaced_pod(namespace, make_pod(f"p{i}"))
    apiserver.faults.cut_watch(after_events=1, abrupt=True)
    seen = []
    with pytest.raises(urllib3.exceptions.ProtocolError):
        for event in watch.Watch().stream(core.list_namespaced_pod, namespace, timeout_seconds=5):
            seen.append(event["object"].metadata.name)
    assert seen == ["p0"]


def test_an_outage_refuses_connections_until_it_ends(apiserver, core, namespace):
    core.list_namespaced_pod(namespace)  # leaves a pooled keep-alive connection behind
    with apiserver.outage():
        with pytest.raises(urllib3.exceptions.MaxRetryError) as err:
            core.list_namespaced_pod(namespace)
        assert isinstance(err.value.reason, urllib3.exceptions.NewConnectionError)
    assert core.list_namespaced_pod(namespace).items == []


def test_a_rate_fault_is_repeatable_with_its_seed(apiserver, core, namespace):
    def failures(plan: FaultPlan) -> list[int]:
        plan.server_error(rate=0.2)
        out = []
        for i in range(50):
            if plan.decide(RequestInfo("get", "/api/v1/namespaces/x/pods/p", resource="pods")) is not None:
                out.append(i)
        return out

    first, second = failures(FaultPlan(seed=7)), failures(FaultPlan(seed=7))
    assert first == second and 0 < len(first) < 50
    assert failures(FaultPlan(seed=8)) != first

    apiserver.faults.server_error(rate=0.2, verbs={"get"})
    outcomes = []
    for _ in range(30):
        try:
            core.read_namespace(namespace)
            outcomes.append("ok")
        except client.ApiException as e:
            outcomes.append(e.status)
    assert set(outcomes) == {"ok", 500}


def test_a_steady_plan_splits_its_rate_between_every_mode():
    plan = FaultPlan(seed=3)
    plan.steady(0.3)
    reads = [plan.decide(RequestInfo("get", "/api/v1/nodes/n", resource="nodes")) for _ in range(3000)]
    faults = [f for f in reads if f is not None]
    assert 0.25 < len(faults) / len(reads) < 0.35
    shares = {mode: sum(f.mode is mode for f in faults) / len(faults)
              for mode in (FaultMode.THROTTLE, FaultMode.SERVER_ERROR, FaultMode.DROP)}
    assert all(0.25 < share < 0.42 for share in shares.values()), shares
    assert {f.retry_after for f in faults if f.mode is FaultMode.THROTTLE} == {1}
    for _ in range(400):
        plan.decide(RequestInfo("watch", "/api/v1/pods", resource="pods"))
    summary = plan.summary()
    assert set(summary) == {"throttle", "server-error", "drop", "cut-watch", "cut-watch-abrupt"}
    assert all(n > 0 for n in summary.values()), summary
    assert sum(summary.values()) == len(plan.injected)
    with pytest.raises(ValueError, match="rate"):
        FaultPlan().steady(1.0)


def test_a_steady_plan_spares_the_simulated_node_agents(apiserver, core, namespace):
    apiserver.faults.steady(0.9)
    agent = client.ApiClient(client.Configuration(host=apiserver.url))
    agent.user_agent = AGENT_USER_AGENT
    with agent:
        for _ in range(20):
            client.CoreV1Api(agent).list_namespaced_pod(namespace, _request_timeout=5)
    assert apiserver.faults.injected == []
    outcomes = set()
    for _ in range(10):
        try:
            core.read_namespace(namespace, _request_timeout=5)
            outcomes.add("ok")
        except client.ApiException as e:
            outcomes.add(e.status)
        except urllib3.exceptions.HTTPError:
            outcomes.add("dropped")
    assert outcomes - {"ok"}, "the client under test got no fault at a 90% rate"
    assert apiserver.faults.injected


def test_simulated_cluster_agents_send_their_user_agent():
    from gpuconf.sim.cluster import SimulatedCluster

    sim = SimulatedCluster("healthy-h100")
    with sim.api_client() as api:
        assert api.user_agent == AGENT_USER_AGENT
