"""The sharded runner Job (manifests/runner/job-sharded.yaml) on a real API server and Job
controller: accepted as written, admitted by the runner namespace's `restricted` Pod Security
admission, and turned into one pod per shard that knows its index and its run. There is no kubelet:
the pods stay Pending, with their ``$(...)`` args left for the kubelet to expand."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

from kubernetes import client

from realk8s.support import ROOT, RUNNER_NAMESPACE, RUNNER_USER, RealCluster, install_runner

RUNNER = ROOT / "manifests" / "runner"
JOB = "gpuconf-sharded"
#: What the API server gives a Job that sets backoffLimitPerIndex and no backoffLimit (MaxInt32).
NO_JOB_BACKOFF_LIMIT = 2**31 - 1


def kubectl(cluster: RealCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", "--kubeconfig", str(cluster.kubeconfig), *args], capture_output=True,
                          text=True, check=False, timeout=60)


def wait_for_shard_pods(core: client.CoreV1Api, count: int, timeout: float = 60) -> list[Any]:
    deadline = time.monotonic() + timeout
    while True:
        pods = core.list_namespaced_pod(RUNNER_NAMESPACE, label_selector=f"batch.kubernetes.io/job-name={JOB}").items
        if len(pods) >= count:
            return sorted(pods, key=lambda p: int(p.metadata.annotations["batch.kubernetes.io/job-completion-index"]))
        if time.monotonic() > deadline:
            events = core.list_namespaced_event(RUNNER_NAMESPACE).items
            raise AssertionError(f"{len(pods)} of {count} shard pods within {timeout:.0f} s; events: "
                                 + "; ".join(f"{e.reason}: {e.message}" for e in events))
        time.sleep(0.25)


def test_the_sharded_job_makes_one_pending_pod_per_shard_that_knows_its_index_and_run(
        real_cluster: RealCluster, tmp_path: Path) -> None:
    install_runner(real_cluster, tmp_path)
    try:
        applied = kubectl(real_cluster, "apply", "--server-side", "-f", str(RUNNER / "probes-sharded.yaml"),
                          "-f", str(RUNNER / "job-sharded.yaml"))
        assert applied.returncode == 0, applied.stderr
        job = client.BatchV1Api(real_cluster.api).read_namespaced_job(JOB, RUNNER_NAMESPACE)
        spec = job.spec
        assert (spec.completion_mode, spec.completions, spec.parallelism) == ("Indexed", 4, 4)
        assert (spec.backoff_limit_per_index, spec.max_failed_indexes) == (0, None)
        assert spec.backoff_limit == NO_JOB_BACKOFF_LIMIT  # per index only: a failed shard fails alone
        assert spec.template.metadata.labels["batch.kubernetes.io/controller-uid"] == job.metadata.uid

        pods = wait_for_shard_pods(real_cluster.core, 4)
        assert [p.metadata.annotations["batch.kubernetes.io/job-completion-index"] for p in pods] == [
            "0", "1", "2", "3"]
        for pod in pods:
            [container] = pod.spec.containers
            env = [e for e in container.env if e.name == "JOB_COMPLETION_INDEX"]
            # the controller adds the variable only where missing: the manifest's is the one
            assert len(env) == 1
            assert env[0].value_from.field_ref.field_path == (
                "metadata.annotations['batch.kubernetes.io/job-completion-index']")
            assert pod.metadata.labels["batch.kubernetes.io/controller-uid"] == job.metadata.uid
            # expanded by the kubelet, from the pod's own env, when it starts the container
            assert ("--report-dir=/results/gpuconf-sharded-$(GPUCONF_SHARD_RUN)/shard-$(JOB_COMPLETION_INDEX)"
                    in container.args)
            assert "--namespace=gpuconf-probes-$(JOB_COMPLETION_INDEX)" in container.args
            assert pod.status.phase == "Pending"

        # each shard's probe namespace: the runner may work there, and nowhere else it was not given
        for namespace, allowed in (("gpuconf-probes-0", "yes"), ("gpuconf-probes-3", "yes"), ("default", "no")):
            asked = kubectl(real_cluster, "auth", "can-i", "create", "pods", "-n", namespace, "--as", RUNNER_USER)
            assert asked.stdout.strip() == allowed, (namespace, asked.stdout, asked.stderr)
        asked = kubectl(real_cluster, "auth", "can-i", "get", "namespace/gpuconf-probes-3", "--as", RUNNER_USER)
        assert asked.stdout.strip() == "yes", asked.stderr
    finally:
        kubectl(real_cluster, "delete", "-f", str(RUNNER / "job-sharded.yaml"), "--wait=false")
        real_cluster.clear_workloads()
