"""benchmarks/suite_scale.py's own logic: the scaled profile, the request counts its serving
process writes, and the figures it derives (its timings are never asserted)."""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

from kubernetes import client, config

from gpuconf.sim.faults import RequestInfo
from gpuconf.sim.profile import expand, load_profile

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "suite_scale.py"


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("suite_scale", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_scaled_profile_is_scale_1000_with_n_nodes(tmp_path: Path) -> None:
    path = bench().scaled_profile(3, tmp_path)
    cluster = expand(load_profile(path))
    assert cluster.profile.name == "scale-3" and path.name == "scale-3.yaml"
    assert [n.name for n in cluster.nodes] == ["h100-0", "h100-1", "h100-2"]
    assert {len(n.gpus) for n in cluster.nodes} == {8}


def test_requests_are_counted_by_who_verb_and_resource() -> None:
    mod = bench()
    counts = mod.RequestCounts()
    counts.observe(RequestInfo(verb="get", path="/api/v1/namespaces/a/pods/p/log", resource="pods",
                               subresource="log"), "OpenAPI-Generator/python")
    counts.observe(RequestInfo(verb="get", path="/api/v1/namespaces/a/pods/q/log", resource="pods",
                               subresource="log"), "")
    counts.observe(RequestInfo(verb="get", path="/version"), "OpenAPI-Generator/python")
    counts.observe(RequestInfo(verb="patch", path="/api/v1/nodes/n/status", resource="nodes",
                               subresource="status"), mod.AGENT_USER_AGENT)
    assert counts.as_json() == {"runner": {"get pods/log": 2, "get /version": 1},
                                "agents": {"patch nodes/status": 1}}


def test_the_serving_process_writes_the_runners_requests_on_sigterm(tmp_path: Path) -> None:
    profile = bench().scaled_profile(2, tmp_path)
    kubeconfig, counts = tmp_path / "kubeconfig", tmp_path / "counts.json"
    server = subprocess.Popen([sys.executable, str(SCRIPT), "serve", str(profile), str(kubeconfig), str(counts)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        assert json.loads(server.stdout.readline())["ready"] is True
        api = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))  # type: ignore[no-untyped-call]
        assert len(api.list_node().items) == 2
        namespace = api.read_namespace("gpuconf")  # the runner's manifests were applied
        assert namespace.metadata is not None and namespace.metadata.name == "gpuconf"
        time.sleep(0.5)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)
    written = json.loads(counts.read_text())
    assert written["runner"] == {"list nodes": 1, "get namespaces": 1}
    assert sum(written["agents"].values()) > 0


def test_pytest_outcomes_and_the_targets() -> None:
    mod = bench()
    assert mod.outcomes("...\n= 1290 passed, 8 skipped, 2 failed in 20.1s =\n") == {
        "passed": 1290, "failed": 2, "skipped": 8, "error": 0}
    assert mod.outcomes("1 error in 0.2s") == {"passed": 0, "failed": 0, "skipped": 0, "error": 1}
    sizes = [{"nodes": 10, "wall_s": 4.0, "api_requests_per_node": 18.8, "runner_peak_rss_mib": 100.0},
             {"nodes": 1000, "wall_s": 30.0, "api_requests_per_node": 16.0, "runner_peak_rss_mib": 900.0}]
    targets = mod.targets(sizes)
    assert targets["wall_ratio"]["ratio"] == 7.5 and targets["wall_ratio"]["met"] is False
    assert targets["requests_per_node"] == {"worst": 18.8, "at_nodes": 10, "limit": 20.0, "met": True}
    assert targets["runner_rss"]["met"] is True


def test_the_sharded_benchmark_gives_each_runner_its_shard() -> None:
    spec = importlib.util.spec_from_file_location("shard_scale", ROOT / "benchmarks" / "shard_scale.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.shard_args(None, 0) == []
    assert module.shard_args(4, 3) == ["--shard", "3/4", "--shard-run", "bench-4"]
    assert module.suite_scale().SUITES == bench().SUITES
