"""Helpers of the real-control-plane tier: the agents of one profile at a time against the
control plane, the suites as a user runs them, and their verdicts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import forked
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from serving import NO_HYPOTHESIS, interrupt

from gpuconf.sim.realk8s import RealControlPlane, kubeconfig

ROOT = Path(__file__).resolve().parents[2]
GPUCONF = [sys.executable, "-m", "gpuconf.cli"]
SYSTEM_NAMESPACES = {"default", "kube-system", "kube-public", "kube-node-lease"}


class RealCluster:
    """A started control plane, an admin client, and the agents of one profile at a time."""

    def __init__(self, cp: RealControlPlane, workdir: Path) -> None:
        self.cp = cp
        self.kubeconfig = cp.kubeconfig
        self.workdir = workdir
        self.api = config.new_client_from_config(config_file=str(cp.kubeconfig))  # type: ignore[no-untyped-call]
        self.core = client.CoreV1Api(self.api)
        #: The profiles run as the runner's ServiceAccount so far, with their audit log marks.
        self.runner_runs: dict[str, tuple[int, int]] = {}

    @contextmanager
    def agents(self, profile: str | Path) -> Iterator[subprocess.Popen[str]]:
        """`gpuconf sim agents --profile PROFILE` against the control plane until the block ends;
        then every object they and the runs made is removed, so the next profile starts clean."""
        name = Path(str(profile)).stem
        log_path = self.workdir / f"agents-{name}.log"
        with log_path.open("w") as log:
            process = subprocess.Popen([*GPUCONF, "sim", "agents", "--kubeconfig", str(self.kubeconfig), "--profile",
                                        str(profile)], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True,
                                       env={**os.environ, "PYTHONUNBUFFERED": "1"})
            try:
                deadline = time.monotonic() + 90
                while "running" not in log_path.read_text():
                    assert process.poll() is None, f"gpuconf sim agents ended: {log_path.read_text()}"
                    assert time.monotonic() < deadline, "gpuconf sim agents did not register within 90 s"
                    time.sleep(0.2)
                yield process
            finally:
                self.clear_workloads()
                interrupt(process)
                self.clear_nodes()

    def _namespaces(self) -> list[str]:
        return [n.metadata.name for n in self.core.list_namespace().items
                if n.metadata.name not in SYSTEM_NAMESPACES]

    def clear_workloads(self) -> None:
        """Every namespace the agents or the runs made, with its pods (deleted at once: no kubelet
        may be left to confirm them); returns once they are gone."""
        for ns in self._namespaces():
            self.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
            try:
                self.core.delete_namespace(ns)
            except ApiException as e:
                if e.status != 404:
                    raise
        deadline = time.monotonic() + 60
        while self._namespaces():
            assert time.monotonic() < deadline, f"namespaces not deleted within 60 s: {self._namespaces()}"
            time.sleep(0.25)

    def clear_nodes(self) -> None:
        """The nodes and the cluster-scoped objects the agents registered."""
        custom = client.CustomObjectsApi(self.api)
        for node in self.core.list_node().items:
            self.core.delete_node(node.metadata.name)
        resource = client.ResourceV1Api(self.api)
        resource.delete_collection_resource_slice()
        resource.delete_collection_device_class()
        client.NodeV1Api(self.api).delete_collection_runtime_class()
        client.CoordinationV1Api(self.api).delete_collection_namespaced_lease("kube-node-lease")
        try:
            custom.delete_collection_cluster_custom_object("nvidia.com", "v1", "clusterpolicies")
        except ApiException as e:
            if e.status != 404:
                raise
        deadline = time.monotonic() + 30
        while self.core.list_node().items or resource.list_resource_slice().items:
            assert time.monotonic() < deadline, "nodes or ResourceSlices left after 30 s"
            time.sleep(0.2)

    def close(self) -> None:
        self.api.close()


def suite_run(kubeconfig: Path | None, report_dir: Path, *options: str, simulate: str | None = None,
              timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`pytest suites/` as a user runs it, against the kubeconfig or ``--simulate PROFILE``."""
    target = ["--simulate", simulate] if simulate else ["--kubeconfig", str(kubeconfig)]
    return forked.run_pytest([*NO_HYPOTHESIS, "suites/", *target, "--report-dir", str(report_dir), "-q", "-p",
                              "no:cacheprovider", *options], cwd=ROOT, timeout=timeout,
                             env={**os.environ, **(env or {})})


def verdicts(report: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    """Test id -> (status, outcome) from a report.json."""
    return {t["name"]: (t["status"], (t.get("extra") or {}).get("outcome")) for t in report["results"]["tests"]}


# --- the runner's identity -----------------------------------------------------------------------

RUNNER_NAMESPACE, RUNNER_SA, PROBE_NAMESPACE = "gpuconf", "gpuconf-runner", "gpuconf-probes"
RUNNER_USER = f"system:serviceaccount:{RUNNER_NAMESPACE}:{RUNNER_SA}"


def install_runner(cluster: RealCluster, out: Path) -> Path:
    """`kubectl apply -k manifests/runner/` as the admin, then a kubeconfig for the runner's
    ServiceAccount with a token from the TokenRequest API (what `kubectl create token` does)."""
    applied = subprocess.run(["kubectl", "--kubeconfig", str(cluster.kubeconfig), "apply", "-k",
                              str(ROOT / "manifests" / "runner")], capture_output=True, text=True, check=False)
    assert applied.returncode == 0, applied.stderr
    deadline = time.monotonic() + 30
    while True:  # the ServiceAccount admission needs the namespace's token controller state: retry briefly
        try:
            request = cluster.core.create_namespaced_service_account_token(
                RUNNER_SA, RUNNER_NAMESPACE, {"spec": {"expirationSeconds": 3600}})
            break
        except ApiException:
            assert time.monotonic() < deadline, "no token for the runner's ServiceAccount within 30 s"
            time.sleep(0.5)
    ca = out / "ca.crt"
    ca.write_bytes(cluster.cp.dir.joinpath("pki", "ca.crt").read_bytes())
    path = out / "runner.kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig(cluster.cp.url, ca, token=request.status.token, user=RUNNER_SA)))
    return path


def audit_mark(cluster: RealCluster) -> int:
    """Where the audit log ends now (its size): audit_events(since=) reads what came after."""
    assert cluster.cp.audit_log is not None
    return cluster.cp.audit_log.stat().st_size if cluster.cp.audit_log.exists() else 0


def audit_events(cluster: RealCluster, user: str, since: int = 0, until: int | None = None) -> list[dict[str, Any]]:
    """The audit log's ResponseComplete events of ``user`` between two marks."""
    assert cluster.cp.audit_log is not None
    with cluster.cp.audit_log.open("rb") as f:
        f.seek(since)
        text = f.read(None if until is None else max(0, until - since)).decode()
    events = []
    for line in text.splitlines():
        event = json.loads(line)
        if event.get("stage") == "ResponseComplete" and (event.get("user") or {}).get("username") == user:
            events.append(event)
    return events


def rule_used(rule: dict[str, Any], namespace: str | None, events: list[dict[str, Any]]) -> bool:
    """Whether an allowed request in ``events`` needed ``rule`` (a Role's rules are ``namespace``'s)."""
    for e in events:
        ref = e.get("objectRef") or {}
        resource = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        if (ref.get("apiGroup", "") in rule["apiGroups"] and resource in rule["resources"]
                and e.get("verb") in rule["verbs"]
                and (not rule.get("resourceNames") or ref.get("name") in rule["resourceNames"])
                and (namespace is None or ref.get("namespace") == namespace)
                and (e.get("responseStatus") or {}).get("code") != 403):
            return True
    return False
