"""Issue 10, part 2: no object the suite created outlives its run.

Against `gpuconf sim serve`, :func:`leftovers` lists, cluster-wide, everything a run could have
created: namespaces labelled ``app.kubernetes.io/managed-by=gpuconf`` or named ``gpuconf-*``; in
every namespace the pods, Services, ConfigMaps, ResourceClaims, ResourceClaimTemplates, Jobs and
Leases labelled as gpuconf's or in a gpuconf-* namespace; gpuconf's labels and taints on nodes
(written only with --label-nodes/--taint-failed, which these runs do not give). Not listed: the
PriorityClass ``gpuconf-probe``, cluster configuration that manifests/runner/ ships and a run creates
only when missing and never deletes (a concurrent run's pods would be refused without it; it is
harmless: value 0, preemptionPolicy Never).

Cases: a normal run, a failing run, SIGINT and SIGTERM at seeded-random points (before, during and
after the campaigns: the run must end promptly and leave nothing), and a SIGKILL mid-run followed by
a new run that removes the killed run's objects once its liveness mark expired, with the run's own
namespace and with a shared --namespace.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from serving import Served, run_suites, serve, start_suites

from gpuconf.cluster.campaign import lease_expired, make_run_lease, select_dead_runs, select_leftovers

MANAGED = "app.kubernetes.io/managed-by"
#: How long a run may take to end after SIGINT/SIGTERM (measured: about a second; the bound leaves room
#: for a loaded machine, where the tests run beside each other).
SIGNAL_END_S = 60
SEED = 20261201


def _listers(api: client.ApiClient) -> dict[str, Any]:
    core, resource = client.CoreV1Api(api), client.ResourceV1Api(api)
    return {"pod": core.list_pod_for_all_namespaces, "service": core.list_service_for_all_namespaces,
            "configmap": core.list_config_map_for_all_namespaces,
            "resourceclaim": resource.list_resource_claim_for_all_namespaces,
            "resourceclaimtemplate": resource.list_resource_claim_template_for_all_namespaces,
            "job": client.BatchV1Api(api).list_job_for_all_namespaces,
            "lease": client.CoordinationV1Api(api).list_lease_for_all_namespaces}


def _items(lister: Any) -> list[dict[str, Any]]:
    """A list call's items as the server's JSON (dicts)."""
    return list(json.loads(lister(_preload_content=False).data).get("items") or [])


def _ours(meta: dict[str, Any]) -> bool:
    labels = meta.get("labels") or {}
    return bool(labels.get(MANAGED) == "gpuconf" or "gpuconf.io/run-id" in labels
                or str(meta.get("namespace") or "").startswith("gpuconf-"))


def leftovers(kubeconfig: Path) -> list[str]:
    """Everything a run could have created that is still there, as ``kind namespace/name``."""
    api = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    with api:
        core = client.CoreV1Api(api)
        found = [f"namespace {ns['metadata']['name']}" for ns in _items(core.list_namespace)
                 if _ours(ns["metadata"]) or str(ns["metadata"]["name"]).startswith("gpuconf-")]
        for kind, lister in _listers(api).items():
            found += [f"{kind} {o['metadata'].get('namespace')}/{o['metadata']['name']}" for o in _items(lister)
                      if _ours(o["metadata"])]
        for node in _items(core.list_node):
            name = node["metadata"]["name"]
            found += [f"node {name} label {k}" for k in node["metadata"].get("labels") or {}
                      if k.startswith("gpuconf.io/")]
            found += [f"node {name} taint {t.get('key')}" for t in (node.get("spec") or {}).get("taints") or ()
                      if str(t.get("key")).startswith("gpuconf.io/")]
    return sorted(found)


def nothing_left(kubeconfig: Path, wait_s: float = 15) -> list[str]:
    """:func:`leftovers`, after waiting up to ``wait_s`` for deletions in progress (a namespace
    being finalized, pods ending their grace period)."""
    deadline = time.monotonic() + wait_s
    while (left := leftovers(kubeconfig)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def _pod_exists(kubeconfig: Path) -> bool:
    api = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    with api:
        return bool(client.CoreV1Api(api).list_pod_for_all_namespaces(label_selector=f"{MANAGED}=gpuconf").items)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve(tmp_path_factory.mktemp("cleanup-serve"), "healthy-h100") as running:
        yield running


@pytest.fixture(scope="module")
def normal_run_s(served: Served, tmp_path_factory: pytest.TempPathFactory) -> float:
    """A normal run of every suite (it must leave nothing); how long it took."""
    began = time.monotonic()
    run = run_suites(served.kubeconfig, tmp_path_factory.mktemp("normal"))
    took = time.monotonic() - began
    assert run.returncode == 0, run.stdout[-3000:]
    return took


def test_a_normal_run_leaves_nothing(served: Served, normal_run_s: float) -> None:
    assert nothing_left(served.kubeconfig) == []


def test_a_failing_run_leaves_nothing(tmp_path: Path) -> None:
    profile = yaml.safe_load(Path("gpuconf/data/sim_profiles/healthy-h100.yaml").read_text())
    profile["faults"] = [{"id": "gpu-lost", "pool": "h100", "node": 0}]
    path = tmp_path / "gpu-lost.yaml"
    path.write_text(yaml.safe_dump(profile))
    with serve(tmp_path / "serve", path) as running:
        run = run_suites(running.kubeconfig, tmp_path / "reports")
        assert run.returncode == 1, run.stdout[-3000:]
        assert "inventory" in run.stdout and "FAILED" in run.stdout
        assert nothing_left(running.kubeconfig) == []


_rng = random.Random(SEED)
#: (signal, when, delay): "start" a seeded 0.3-1.5 s after launch (pytest starting, the cluster being
#: read), "campaign" a seeded 0-1 s after the first probe pod exists, "late" a seeded 0-0.5 s after
#: pytest's first progress mark (80 of the run's tests done, most campaigns over).
SIGNAL_CASES = [(sig, when, round(_rng.uniform(*span), 2))
                for sig in (signal.SIGINT, signal.SIGTERM)
                for when, span in (("start", (0.3, 1.5)), ("campaign", (0.0, 1.0)), ("late", (0.0, 0.5)))]


@pytest.mark.parametrize(("sig", "when", "delay"), SIGNAL_CASES,
                         ids=[f"{s.name}-{w}-{d}" for s, w, d in SIGNAL_CASES])
def test_a_signal_at_any_point_ends_the_run_promptly_and_leaves_nothing(
        served: Served, normal_run_s: float, tmp_path: Path, sig: signal.Signals, when: str, delay: float) -> None:
    run = start_suites(served.kubeconfig, tmp_path / "reports")
    lines: list[str] = []
    progressed = threading.Event()

    def read() -> None:
        assert run.stdout is not None
        for line in run.stdout:
            lines.append(line)
            if "%]" in line:
                progressed.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 60
    if when == "campaign":
        while not _pod_exists(served.kubeconfig) and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
    elif when == "late":
        progressed.wait(60)
    time.sleep(delay)
    if run.poll() is not None:
        pytest.skip(f"the run ended ({run.returncode}) before the signal")
    run.send_signal(sig)
    sent = time.monotonic()
    try:
        run.wait(timeout=SIGNAL_END_S)
    except subprocess.TimeoutExpired:
        run.kill()
        pytest.fail(f"the run did not end within {SIGNAL_END_S} s of {sig.name}")
    ended_s = time.monotonic() - sent
    reader.join(5)
    output = "".join(lines)
    print(f"{sig.name} {when} +{delay}: ended {ended_s:.2f} s later with status {run.returncode}")
    # Before the plugin is configured a signal ends the process by Python's default; after, both end the
    # run as an interrupt: status 2 and the reports written
    expected = {2, -sig}
    assert run.returncode in expected, output[-3000:]
    assert "Traceback" not in output or when == "start", output[-3000:]
    if run.returncode == 2:
        assert (tmp_path / "reports" / "report.json").is_file(), output[-3000:]
    assert nothing_left(served.kubeconfig) == []


@pytest.mark.parametrize("shared", [False, True], ids=["run-namespace", "shared-namespace"])
def test_a_killed_runs_objects_are_removed_by_the_next_run(served: Served, normal_run_s: float, tmp_path: Path,
                                                            shared: bool) -> None:
    options = ["--liveness-interval", "1"]
    if shared:
        api = config.new_client_from_config(config_file=str(served.kubeconfig))  # type: ignore[no-untyped-call]
        with api:
            client.CoreV1Api(api).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
                name="probes-shared")))
        options += ["--namespace", "probes-shared"]
    run = start_suites(served.kubeconfig, tmp_path / "killed", *options)
    deadline = time.monotonic() + 60
    while not _pod_exists(served.kubeconfig):
        assert run.poll() is None and time.monotonic() < deadline, "the run never launched a probe"
        time.sleep(0.05)
    run.send_signal(signal.SIGKILL)
    run.communicate()
    left = leftovers(served.kubeconfig)
    assert any(item.startswith("pod ") for item in left) and any(item.startswith("lease ") for item in left), left
    time.sleep(3.5)  # the mark (3 renewal periods) expires
    again = run_suites(served.kubeconfig, tmp_path / "next", *options, suites=["suites/test_smoke.py"])
    assert again.returncode == 18, again.stdout[-3000:]  # one suite: PARTIAL, and nothing failed
    assert nothing_left(served.kubeconfig) == []


# The pure rules ----------------------------------------------------------------------------------

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _obj(run: str, age_s: float, **extra: Any) -> dict[str, Any]:
    created = (NOW - timedelta(seconds=age_s)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"metadata": {"name": f"x-{run}", "creationTimestamp": created,
                         "labels": {MANAGED: "gpuconf", "gpuconf.io/run-id": run}}, **extra}


def _lease(run: str, renewed_s_ago: float, interval_s: float = 10) -> dict[str, Any]:
    lease: dict[str, Any] = make_run_lease(run, "ns", interval_s=interval_s, now=NOW - timedelta(seconds=renewed_s_ago))
    lease["metadata"]["creationTimestamp"] = "2026-12-01T00:00:00Z"
    return lease


def test_a_run_is_over_when_its_mark_expired_or_without_one_after_the_grace() -> None:
    objects = [_obj("fresh-mark", 3600), _lease("fresh-mark", 5),
               _obj("expired-mark", 10), _lease("expired-mark", 31),
               _obj("no-mark-young", 60), _obj("no-mark-old", 7 * 3600),
               _obj("me", 9 * 3600), _lease("me", 999)]
    assert select_dead_runs(objects, current_run_id="me", now=NOW, grace_s=6 * 3600) == ["expired-mark",
                                                                                          "no-mark-old"]
    assert lease_expired(_lease("r", 31), NOW) and not lease_expired(_lease("r", 29), NOW)
    assert not lease_expired({"spec": {}}, NOW)


def test_a_run_namespace_goes_with_its_expired_mark() -> None:
    ns = _obj("killed", 60)
    ns["metadata"]["name"] = "gpuconf-killed"
    live = _obj("live", 60)
    live["metadata"]["name"] = "gpuconf-live"
    lease_killed, lease_live = _lease("killed", 40), _lease("live", 2)
    lease_killed["metadata"]["namespace"], lease_live["metadata"]["namespace"] = "gpuconf-killed", "gpuconf-live"
    leases = [{**lease_killed, "kind": "Lease"}, {**lease_live, "kind": "Lease"}]
    assert select_leftovers([ns, live], current_run_id=None, now=NOW, grace_s=6 * 3600, leases=leases) == [
        "gpuconf-killed"]
