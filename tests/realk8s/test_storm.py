"""An API storm through a real kube-apiserver: the checks whose calls get 429 past ``--api-deadline``
are NOT TESTED with one line ("API server overloaded"), no node fails for it, no report or output
holds a traceback, and the run gives the verdicts and messages the simulated storm gives
(``gpuconf sim serve --throttle pods``, tests/test_api_storm.py).

The storm comes from :class:`realk8s.throttle.ThrottlingProxy` between the suite and the real
apiserver: every request of the suite on pods is answered with the 429 kube-apiserver's Priority and
Fairness sends (plain text, ``Retry-After: 1``; tests/data/real/apf-429/), everything else reaches the
real server. The agents playing the nodes and the real scheduler and controller-manager talk to the
apiserver directly, so only the suite is throttled, as in the simulated storm."""

from __future__ import annotations

import http.client
import json
import re
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config, watch
from serving import report, run_suites, serve

from realk8s.support import ROOT, RealCluster, verdicts
from realk8s.throttle import ThrottlingProxy, resource_names

PROFILE = "healthy-h100"
#: The simulated storm's suite and options (one node: checks that need a probe pod and checks that do not).
SUITE = "suites/test_inventory.py"
#: One suite of the sign-off's scope, nothing failed: PARTIAL (docs/exit-statuses.md).
PARTIAL = 18
OPTIONS = ("--node-selector", "kubernetes.io/hostname=h100-0", "--api-deadline", "2")
#: How long a refused call kept trying: timing, not the verdict.
GAVE_UP = re.compile(r" \(gave up after [^)]*\)$")


def _simulated(directory: Path) -> dict[str, Any]:
    with serve(directory / "serve", PROFILE, "--throttle", "pods") as served:
        run = run_suites(served.kubeconfig, directory / "reports", *OPTIONS, suites=[SUITE])
    assert run.returncode == PARTIAL, (run.stdout + run.stderr)[-3000:]
    return report(directory / "reports")


def _proxy_kubeconfig(url: str, path: Path) -> Path:
    """A kubeconfig naming the proxy, with no credentials: the proxy authenticates upstream."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "storm",
        "clusters": [{"name": "storm", "cluster": {"server": url}}],
        "users": [{"name": "storm", "user": {}}],
        "contexts": [{"name": "storm", "context": {"cluster": "storm", "user": "storm"}}]}))
    return path


def _messages(doc: dict[str, Any]) -> dict[str, str]:
    return {t["name"]: GAVE_UP.sub("", str(t.get("message") or "")) for t in doc["results"]["tests"]
            if t["status"] == "skipped"}


def test_a_storm_through_a_real_apiserver_gives_the_simulated_storms_verdicts(real_cluster: RealCluster,
                                                                            tmp_path: Path) -> None:
    pki = real_cluster.cp.dir / "pki"
    with ThreadPoolExecutor(1) as pool:  # the simulated storm meanwhile
        simulation = pool.submit(_simulated, tmp_path / "sim")
        with real_cluster.agents(ROOT / "gpuconf" / "data" / "sim_profiles" / f"{PROFILE}.yaml"), \
                ThrottlingProxy(real_cluster.cp.url, pki / "ca.crt", pki / "admin.crt", pki / "admin.key",
                                throttle={"pods"}) as proxy:
            kubeconfig = _proxy_kubeconfig(proxy.url, tmp_path / "proxy.kubeconfig")
            run = run_suites(kubeconfig, tmp_path / "real", *OPTIONS, suites=[SUITE])
        simulated = simulation.result()
    output = run.stdout + run.stderr
    assert proxy.throttled > 0 and proxy.forwarded > 0, (proxy.throttled, proxy.forwarded)
    assert run.returncode == PARTIAL, output[-3000:]
    assert "Traceback" not in output, output[-3000:]

    real = report(tmp_path / "real")
    tests = real["results"]["tests"]
    refused = [t for t in tests if t["status"] == "skipped"]
    assert refused and len(refused) < len(tests), [(t["name"], t["status"]) for t in tests]
    assert {t["status"] for t in tests} == {"passed", "skipped"}, [(t["name"], t["status"]) for t in tests]
    for t in refused:  # the one-line reason, as the client words Priority and Fairness's plain-text answer
        message = str(t["message"])
        assert message.startswith("API server overloaded: ") and "\n" not in message, message
        assert "HTTP 429: Too many requests, please try again later." in message, message
        assert (t.get("extra") or {}).get("outcome") == "not-tested"

    assert verdicts(real) == verdicts(simulated)
    assert _messages(real) == _messages(simulated)

    junit = ET.parse(tmp_path / "real" / "junit.xml").getroot()
    skipped = {case.get("name"): (case.find("skipped").get("message") or "")  # type: ignore[union-attr]
               for case in junit.iter("testcase") if case.find("skipped") is not None}
    # the checks' cases: the refused ones skipped, none failed; the one error is the sign-off's (PARTIAL)
    checks = [case for case in junit.iter("testcase") if case.get("classname") != "gpuconf"]
    assert not any(case.find("failure") is not None or case.find("error") is not None for case in checks)
    assert [c.get("name") for c in junit.iter("testcase") if c.find("error") is not None] == ["sign-off"]
    assert len(skipped) == len(refused)
    assert all("API server overloaded: " in message for message in skipped.values()), skipped
    for path in (tmp_path / "real").iterdir():
        if path.is_file():
            text = path.read_text(errors="replace")
            assert "Traceback" not in text and "gpuconf/cluster/access.py" not in text, path.name
    assert json.loads((tmp_path / "real" / "report.json").read_text())["extra"]["gpuconf"]["exit_status"] == PARTIAL


def test_the_proxy_forwards_faithfully_and_throttles_as_priority_and_fairness(real_cluster: RealCluster,
                                                                            tmp_path: Path) -> None:
    """What the storm above rests on: through the proxy a write with a body and a watch's events
    (streamed as they come) reach the real apiserver and back, and a throttled request gets exactly
    the answer kube-apiserver's Priority and Fairness gives (tests/data/real/apf-429/)."""
    pki = real_cluster.cp.dir / "pki"
    name = "storm-proxy-check"
    with ThrottlingProxy(real_cluster.cp.url, pki / "ca.crt", pki / "admin.crt", pki / "admin.key",
                         throttle={"pods"}) as proxy:
        api = config.new_client_from_config(config_file=str(_proxy_kubeconfig(proxy.url, tmp_path / "kc")))  # type: ignore[no-untyped-call]
        core = client.CoreV1Api(api)
        try:
            with ThreadPoolExecutor(1) as pool:
                def first_added() -> str:
                    for event in watch.Watch().stream(core.list_namespace, timeout_seconds=60,
                                                      field_selector=f"metadata.name={name}"):
                        if event["type"] == "ADDED":
                            return str(event["object"].metadata.name)
                    return ""
                added = pool.submit(first_added)
                time.sleep(1)  # the watch is open: the namespace's ADDED comes as an event, not in a list
                core.create_namespace({"metadata": {"name": name}})
                assert added.result(timeout=15) == name  # long before the watch ends: streamed
            core.create_namespaced_config_map(name, {"metadata": {"name": "c"}, "data": {"k": "v" * 70_000}})
            assert real_cluster.core.read_namespaced_config_map("c", name).data == {"k": "v" * 70_000}

            connection = http.client.HTTPConnection("127.0.0.1", int(proxy.url.rsplit(":", 1)[1]), timeout=10)
            connection.request("GET", f"/api/v1/namespaces/{name}/pods")
            answer = connection.getresponse()
            body = answer.read().decode()
            connection.close()
        finally:
            api.close()
            real_cluster.clear_workloads()  # the namespace gone before the next test's agents register
    assert (answer.status, body) == (429, "Too many requests, please try again later.\n")
    assert {k: answer.getheader(k) for k in ("Retry-After", "Content-Type", "X-Content-Type-Options")} == {
        "Retry-After": "1", "Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff"}
    assert proxy.throttled == 1 and proxy.forwarded >= 3


@pytest.mark.parametrize(("path", "names"), [
    ("/api/v1/namespaces/p/pods?watch=1", {"pods"}),
    ("/api/v1/namespaces/p/pods/x/log?follow=true", {"pods", "pods/log"}),
    ("/api/v1/pods", {"pods"}),
    ("/api/v1/namespaces/p", {"namespaces"}),
    ("/api/v1/nodes/h100-0/status", {"nodes", "nodes/status"}),
    ("/apis/resource.k8s.io/v1/namespaces/p/resourceclaims/c",
     {"resourceclaims", "resourceclaims.resource.k8s.io"}),
    ("/apis/resource.k8s.io/v1/resourceslices", {"resourceslices", "resourceslices.resource.k8s.io"}),
    ("/version", set()), ("/apis/resource.k8s.io/v1", set()), ("/api/v1", set()),
])
def test_the_proxy_names_resources_as_gpuconf_sim_serve_throttle_does(path: str, names: set[str]) -> None:
    assert resource_names(path) == names
