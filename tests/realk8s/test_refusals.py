"""What a real API server refuses, and how a run says so: one line, a documented exit status, no
traceback (the README's exit statuses)."""

from __future__ import annotations

import json
from pathlib import Path

from kubernetes import client

from realk8s.support import PROBE_NAMESPACE, ROOT, RealCluster, install_runner, suite_run

PROFILE = ROOT / "gpuconf" / "data" / "sim_profiles" / "t4-timeslicing.yaml"


def test_a_refused_priorityclass_create_ends_the_run_with_one_line_and_exit_12(real_cluster: RealCluster,
                                                                               tmp_path: Path) -> None:
    """The runner's ClusterRole may only get the gpuconf-probe PriorityClass (manifests/runner ships
    it); with it deleted, the run's create is refused by real RBAC before any test runs."""
    with real_cluster.agents(PROFILE):
        runner = install_runner(real_cluster, tmp_path)
        client.SchedulingV1Api(real_cluster.api).delete_priority_class("gpuconf-probe")
        run = suite_run(runner, tmp_path / "report", "--namespace", PROBE_NAMESPACE)
    output = run.stdout + run.stderr
    assert run.returncode == 12, output[-3000:]
    assert "Traceback" not in output and "Error" not in output.replace("gpuconf: forbidden", "")
    lines = [line for line in output.splitlines() if "priorityclasses" in line]
    assert lines == [
        'Exit: gpuconf: forbidden: create priorityclass: priorityclasses.scheduling.k8s.io is forbidden: User '
        '"system:serviceaccount:gpuconf:gpuconf-runner" cannot create resource "priorityclasses" in API group '
        '"scheduling.k8s.io" at the cluster scope (RBAC: grant the suite\'s identity this verb)'], output[-3000:]
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["extra"]["gpuconf"]["exit_status"] == 12
    assert "create priorityclass" in report["extra"]["gpuconf"]["error"]
