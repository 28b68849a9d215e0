"""The runner's RBAC (manifests/runner/) is exactly what the suites use.

Every suite runs against simulated clusters that exercise all of them, with the options the
runner Job passes (its probe namespace); the simulated API server records each request the
suite's client makes (the node agents' requests, which a real cluster's kubelets make with their
own identity, are told apart by their User-Agent). Then: every request must be allowed by the
ClusterRole and Role bound to the runner's ServiceAccount (a denied one is reported with the rule
to add), and every granted verb must be used by some run or be listed in
gpuconf.rbac.REAL_CLUSTER_ONLY with its reason.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import forked
import pytest
from kubernetes import client
from serving import NO_HYPOTHESIS, in_parallel

from gpuconf.rbac import (
    REAL_CLUSTER_ONLY,
    ApiRequest,
    Policy,
    Rule,
    allowed,
    load_manifests,
    load_policy,
    missing,
    rbac_verb,
    unused_grants,
)
from gpuconf.sim import FakeApiServer
from gpuconf.sim.faults import RequestInfo

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "manifests" / "runner"
#: Profiles that, together, run every suite's every API path (DRA with and without the device
#: plugin, MIG mixed and single with the GPU Operator's ClusterPolicy, time-slicing, NCCL).
PROFILES = ["healthy-h100", "plugin-and-dra", "a100-mig-mixed", "h100-mig-single", "t4-timeslicing", "h200-gpucluster"]
AGENT_USER_AGENT = "gpuconf-sim/node-agents"

#: Loaded into the run (suites/conftest.py): the node agents get their own User-Agent, the API
#: server reports every other request to $GPUCONF_RBAC_LOG, and the objects the runner's manifests
#: ship (its probe namespace, the PriorityClass) exist before the suite starts, as on a cluster
#: where `kubectl apply -k manifests/runner/` ran.
RECORDER = '''
import json, os, threading
from pathlib import Path
import yaml
from gpuconf.sim.cluster import SimulatedCluster

_api_client, _start, _lock = SimulatedCluster.api_client, SimulatedCluster.start, threading.Lock()


def api_client(self):
    api = _api_client(self)
    api.user_agent = AGENT
    return api


def start(self):
    out = open(os.environ["GPUCONF_RBAC_LOG"], "a")

    def observe(info, user_agent):
        if user_agent == AGENT:
            return
        with _lock:
            out.write(json.dumps([info.verb, info.group, info.resource, info.subresource, info.namespace,
                                  info.name, info.path]) + "\\n")
            out.flush()

    self.server.request_observers.append(observe)
    _start(self)
    for name, plural in (("namespace.yaml", "namespaces"), ("priorityclass.yaml", "priorityclasses")):
        for doc in yaml.safe_load_all(Path(RUNNER, name).read_text()):
            self.server.store.create(plural, doc)
    return self


SimulatedCluster.api_client, SimulatedCluster.start = api_client, start
'''.replace("AGENT", repr(AGENT_USER_AGENT)).replace("RUNNER", repr(str(RUNNER)))


def runner_policy() -> Policy:
    docs = load_manifests(RUNNER)
    [account] = [d for d in docs if d["kind"] == "ServiceAccount"]
    return load_policy(docs, account=account["metadata"]["name"], account_namespace=account["metadata"]["namespace"])


def job_args() -> list[str]:
    [job] = [d for d in load_manifests(RUNNER) if d["kind"] == "Job" and d["metadata"]["name"] == "gpuconf"]
    [container] = job["spec"]["template"]["spec"]["containers"]
    return [str(a) for a in container["args"] if not str(a).startswith(("--kubeconfig", "--report-dir"))]


def unrouted(path: str) -> bool:
    """A request under /api or /apis the simulated server could not route to a resource (discovery
    documents are /api, /api/v1, /apis, /apis/G, /apis/G/V)."""
    parts = [p for p in path.split("/") if p]
    return (parts[:1] == ["api"] and len(parts) > 2) or (parts[:1] == ["apis"] and len(parts) > 3)


def copy_suites(base: Path, names: str = "test_*.py") -> None:
    suites = base / "suites"
    suites.mkdir()
    for suite in sorted((ROOT / "suites").glob(names)):
        (suites / suite.name).write_text(suite.read_text())
    (suites / "conftest.py").write_text(RECORDER)


def record(base: Path, profile: str, *options: str) -> list[ApiRequest]:
    """Run base/suites on ``profile`` with the Job's options and ``options``; the resource requests it made."""
    log = base / f"{profile}.jsonl"
    log.touch()
    # A subprocess: the cluster (threads, TLS, the cryptography bindings) must not share this interpreter.
    run = forked.run_pytest([*NO_HYPOTHESIS, "suites", "-p", "gpuconf.plugin", "--simulate", profile, *job_args(),
                             *options, "--report-dir", str(base / profile), "-q", "-p", "no:cacheprovider"],
                            cwd=base, env={**os.environ, "GPUCONF_RBAC_LOG": str(log), "COLUMNS": "400"}, timeout=300)
    assert run.returncode == 0, f"{profile}: the suites failed:\n{run.stdout[-3000:]}\n{run.stderr[-2000:]}"
    requests: list[ApiRequest] = []
    for line in log.read_text().splitlines():
        verb, group, resource, subresource, namespace, name, path = json.loads(line)
        assert resource or not unrouted(path), f"{profile}: {verb} {path} reached no resource"
        if resource:
            requests.append(ApiRequest(verb, group, resource, subresource, namespace, name))
    assert requests, f"{profile}: no request recorded"
    return requests


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[ApiRequest]]:
    """Run every suite on each profile; the resource requests each run made, by profile."""
    base = tmp_path_factory.mktemp("rbac")
    copy_suites(base)
    return in_parallel({profile: functools.partial(record, base, profile) for profile in PROFILES})


@pytest.fixture(scope="module")
def signed_off(tmp_path_factory: pytest.TempPathFactory) -> list[ApiRequest]:
    """The node sign-off's requests: --label-nodes/--taint-failed are opt-in (not in the Job's args),
    so one run of every suite with them (a run of fewer suites is PARTIAL and signs no passing node
    off), where the sign-off's patches are the only writes to nodes."""
    base = tmp_path_factory.mktemp("rbac-signoff")
    copy_suites(base)
    return record(base, "healthy-h100", "--taint-failed")


# -------------------------------------------------------------------------------------------------
# The role against the suites


@pytest.mark.parametrize("profile", PROFILES)
def test_the_runner_role_allows_every_request_the_suites_make(recorded: dict[str, list[ApiRequest]],
                                                               profile: str) -> None:
    denied = missing(runner_policy(), recorded[profile])
    assert not denied, "the runner's RBAC lacks (add to manifests/runner/):\n" + "\n".join(
        f"  {request}: {rule}" for request, rule in denied)


def test_the_runner_role_allows_the_node_sign_off(signed_off: list[ApiRequest]) -> None:
    denied = missing(runner_policy(), signed_off)
    assert not denied, "the runner's RBAC lacks (add to manifests/runner/):\n" + "\n".join(
        f"  {request}: {rule}" for request, rule in denied)
    assert {r for r in signed_off if r.resource == "nodes" and r.verb not in ("get", "list", "watch")} == {
        ApiRequest("patch", "", "nodes", name="h100-0"), ApiRequest("patch", "", "nodes", name="h100-1")}


def test_every_granted_verb_is_used_or_explained(recorded: dict[str, list[ApiRequest]],
                                                 signed_off: list[ApiRequest]) -> None:
    everything = [r for requests in recorded.values() for r in requests] + signed_off
    # A sharded run's probe namespaces (probes-sharded.yaml) grant there what gpuconf-probes grants
    # (tests/test_runner_manifests.py keeps them equal); the recorded runs use gpuconf-probes.
    unused = [g for g in unused_grants(runner_policy(), everything) if not g.namespace.startswith("gpuconf-probes-")]
    assert not unused, ("granted but no run used it (remove it, or give the reason in "
                        "gpuconf.rbac.REAL_CLUSTER_ONLY):\n" + "\n".join(f"  {g}" for g in unused))


def test_the_explained_grants_are_still_granted() -> None:
    keys = {g.key for g in runner_policy().grants()}
    assert set(REAL_CLUSTER_ONLY) <= keys


def test_the_run_writes_only_in_the_probe_namespace(recorded: dict[str, list[ApiRequest]]) -> None:
    [namespace] = [a.split("=", 1)[1] for a in job_args() if a.startswith("--namespace=")]
    reads = {"get", "list", "watch"}
    writes = {r for requests in recorded.values() for r in requests if r.verb not in reads}
    assert {r.namespace for r in writes} == {namespace}


# -------------------------------------------------------------------------------------------------
# The matcher


POLICY = Policy(
    cluster_rules=(Rule(("",), ("nodes",), ("list",)),
                   Rule(("",), ("configmaps",), ("get",), ("default-mig-parted-config",))),
    namespace_rules={"gpuconf-probes": (Rule(("",), ("pods",), ("create", "list")),
                                        Rule(("",), ("pods/log",), ("get",)))},
)


@pytest.mark.parametrize("request_, ok", [
    (ApiRequest("list", "", "nodes"), True),
    (ApiRequest("get", "", "nodes", name="n1"), False),
    (ApiRequest("create", "", "pods", namespace="gpuconf-probes"), True),
    (ApiRequest("create", "", "pods", namespace="default"), False),
    (ApiRequest("list", "", "pods"), False),  # all namespaces: a Role never covers it
    (ApiRequest("get", "", "pods", "log", "gpuconf-probes", "p"), True),
    (ApiRequest("get", "", "pods", namespace="gpuconf-probes", name="p"), False),  # pods/log is not pods
    (ApiRequest("get", "", "configmaps", namespace="gpu-operator", name="default-mig-parted-config"), True),
    (ApiRequest("get", "", "configmaps", namespace="gpu-operator", name="other"), False),
    (ApiRequest("list", "", "configmaps", namespace="gpu-operator"), False),  # resourceNames: named requests only
    (ApiRequest("list", "apps", "nodes"), False),  # the group matters
], ids=str)
def test_the_matcher_decides_as_the_rbac_authorizer(request_: ApiRequest, ok: bool) -> None:
    assert allowed(POLICY, request_) is ok


def test_a_call_the_role_lacks_is_reported_with_the_rule_to_add() -> None:
    """What fails the role test when a suite starts a new call: the call and the rule it needs."""
    new = ApiRequest("patch", "", "nodes", name="h100-0")
    denied = missing(POLICY, [ApiRequest("list", "", "nodes"), new, new])
    assert denied == [(new, "ClusterRole: {apiGroups: [''], resources: [nodes], verbs: [patch], "
                            "resourceNames: [h100-0]}")]
    assert str(new) == "patch nodes 'h100-0' (group 'core') cluster-wide"


def test_a_namespaced_call_outside_the_probe_namespace_needs_its_own_role() -> None:
    new = ApiRequest("create", "resource.k8s.io", "resourceclaims", namespace="gpuconf-probes")
    assert missing(POLICY, [new]) == [(new, "Role in namespace gpuconf-probes: {apiGroups: ['resource.k8s.io'], "
                                            "resources: [resourceclaims], verbs: [create]}")]


def test_unused_grants_are_reported_unless_explained() -> None:
    used = [ApiRequest("list", "", "nodes"), ApiRequest("create", "", "pods", namespace="gpuconf-probes")]
    unused = [str(g) for g in unused_grants(POLICY, used, reasons={})]
    assert unused == ["ClusterRole: get configmaps ['default-mig-parted-config'] (group 'core')",
                      "Role in gpuconf-probes: list pods (group 'core')",
                      "Role in gpuconf-probes: get pods/log (group 'core')"]
    explained = {("", "pods/log", "get", "gpuconf-probes"): "why"}
    assert len(unused_grants(POLICY, used, reasons=explained)) == 2


def test_a_binding_to_a_role_not_shipped_is_an_error() -> None:
    binding = {"kind": "ClusterRoleBinding", "metadata": {"name": "b"},
               "roleRef": {"kind": "ClusterRole", "name": "missing"},
               "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]}
    with pytest.raises(ValueError, match="roleRef ClusterRole missing is not in the manifests"):
        load_policy([binding], account="sa", account_namespace="ns")


@pytest.mark.parametrize("method, named, watch, verb", [
    ("GET", True, False, "get"), ("GET", False, False, "list"), ("GET", False, True, "watch"),
    ("GET", True, True, "watch"), ("POST", False, False, "create"), ("PUT", True, False, "update"),
    ("PATCH", True, False, "patch"), ("DELETE", True, False, "delete"), ("DELETE", False, False, "deletecollection"),
])
def test_http_requests_map_to_rbac_verbs(method: str, named: bool, watch: bool, verb: str) -> None:
    assert rbac_verb(method, named=named, watch=watch) == verb


# -------------------------------------------------------------------------------------------------
# The simulated server's request observers


@pytest.fixture
def observed() -> Iterator[tuple[client.CoreV1Api, list[tuple[RequestInfo, str]]]]:
    seen: list[tuple[RequestInfo, str]] = []
    with FakeApiServer() as server:
        server.request_observers.append(lambda info, agent: seen.append((info, agent)))
        api = client.ApiClient(client.Configuration(host=server.url))
        api.user_agent = "rbac-test"
        with api:
            yield client.CoreV1Api(api), seen


def test_the_server_tells_observers_each_request_as_rbac_sees_it(
        observed: tuple[client.CoreV1Api, list[tuple[RequestInfo, str]]]) -> None:
    core: Any = observed[0]  # the client's annotations want model objects; the server takes dicts alike
    seen = observed[1]
    body: dict[str, Any] = {"metadata": {"name": "c"}, "data": {"a": "1"}}
    core.create_namespaced_config_map("default", body)
    core.read_namespaced_config_map("c", "default")
    core.list_namespaced_config_map("default")
    stream = core.list_namespaced_config_map("default", watch=True, timeout_seconds=1, _preload_content=False)
    stream.read()  # to its end, so the connection is clean for the next request
    stream.release_conn()
    core.patch_namespaced_config_map("c", "default", {"data": {"a": "2"}})
    core.replace_namespaced_config_map("c", "default", {**body, "data": {"a": "3"}})
    core.delete_namespaced_config_map("c", "default")
    core.delete_collection_namespaced_config_map("default")
    core.list_node()
    assert [(i.verb, i.resource, i.namespace, i.name) for i, _ in seen] == [
        ("create", "configmaps", "default", ""), ("get", "configmaps", "default", "c"),
        ("list", "configmaps", "default", ""), ("watch", "configmaps", "default", ""),
        ("patch", "configmaps", "default", "c"), ("update", "configmaps", "default", "c"),
        ("delete", "configmaps", "default", "c"), ("deletecollection", "configmaps", "default", ""),
        ("list", "nodes", "", "")]
    assert {agent for _, agent in seen} == {"rbac-test"}
