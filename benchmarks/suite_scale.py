"""The smoke, inventory and isolation suites against simulated clusters of 10, 100 and 1,000 nodes.

    .venv/bin/python benchmarks/suite_scale.py [--sizes 10 100 1000] [--json OUT] [--timeout S]
                                               [--cprofile DIR]

For each size, a copy of the scale-1000 profile (8 H100 per node) with that many nodes is served
by a separate process (the simulated cluster: API server, control plane, node agents) and the
suites run against its kubeconfig in another (``python -m pytest suites/... --kubeconfig F``), so
the runner's wall time and peak RSS are its own. The serving process counts every request whose
User-Agent is not the node agents' (those are the runner's) by verb and resource, and writes the
counts as JSON when it stops. Figures per size: nodes, GPUs, wall time, the runner's peak RSS, the
runner's API requests (total, per node, by verb and resource), the tests' outcomes, and the
targets (wall time at the largest size at most 5x that at the smallest; at most 20 requests per
node; the runner under 1 GiB at 1,000 nodes) met or missed. Prints figures and writes JSON;
asserts nothing. ``--cprofile DIR`` also runs the runner under cProfile (DIR/runner-<n>.prof; its
wall time and memory are then not comparable).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SUITES = ["suites/test_smoke.py", "suites/test_inventory.py", "suites/test_isolation.py"]
BASE_PROFILE = ROOT / "gpuconf" / "data" / "sim_profiles" / "scale-1000.yaml"
#: The node agents' User-Agent in the serving process: every other request is the runner's.
AGENT_USER_AGENT = "gpuconf-sim/node-agents"
WALL_RATIO_TARGET = 5.0
REQUESTS_PER_NODE_TARGET = 20.0
RSS_TARGET_MIB = 1024.0


def scaled_profile(nodes: int, directory: Path) -> Path:
    """A copy of the scale-1000 profile with ``nodes`` nodes, written as ``scale-<nodes>.yaml``."""
    doc = yaml.safe_load(BASE_PROFILE.read_text())
    doc["name"] = f"scale-{nodes}"
    doc["description"] = f"scale-1000 with {nodes} nodes (benchmarks/suite_scale.py)."
    doc["pools"][0]["count"] = nodes
    path = directory / f"scale-{nodes}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


class RequestCounts:
    """Requests counted by User-Agent kind ("runner" or "agents"), verb and resource."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_key: Counter[tuple[str, str, str]] = Counter()

    def observe(self, info: Any, user_agent: str) -> None:
        who = "agents" if user_agent == AGENT_USER_AGENT else "runner"
        resource = info.resource or info.path
        if info.subresource:
            resource = f"{resource}/{info.subresource}"
        with self._lock:
            self.by_key[(who, info.verb, resource)] += 1

    def as_json(self) -> dict[str, Any]:
        with self._lock:
            items = sorted(self.by_key.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1:]))
        out: dict[str, Any] = {"runner": {}, "agents": {}}
        for (who, verb, resource), count in items:
            out[who][f"{verb} {resource}"] = count
        return out


def serve(profile: Path, kubeconfig: Path, counts_out: Path) -> int:
    """Run the simulated cluster until SIGTERM, then write the request counts to ``counts_out``."""
    from kubernetes import client

    from gpuconf.sim.cluster import SimulatedCluster

    class Cluster(SimulatedCluster):
        def api_client(self) -> client.ApiClient:
            api = super().api_client()
            api.user_agent = AGENT_USER_AGENT
            return api

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    sim = Cluster(profile)
    counts = RequestCounts()
    sim.server.request_observers.append(counts.observe)
    sim.start()
    try:
        for name, plural in (("namespace.yaml", "namespaces"), ("priorityclass.yaml", "priorityclasses")):
            for doc in yaml.safe_load_all((ROOT / "manifests" / "runner" / name).read_text()):
                if doc:
                    sim.server.store.create(plural, doc)  # as after `kubectl apply -k manifests/runner/`
        sim.write_kubeconfig(kubeconfig)
        print(json.dumps({"ready": True, "startup_s": round(sim.startup_s or 0.0, 2)}), flush=True)
        stop.wait()
    finally:
        sim.stop()
        counts_out.write_text(json.dumps(counts.as_json(), indent=2) + "\n")
    return 0


def outcomes(output: str) -> dict[str, int]:
    """passed/failed/skipped/error counts from pytest's last summary line."""
    found = {"passed": 0, "failed": 0, "skipped": 0, "error": 0}
    lines = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed|skipped|errors?)", line)]
    if lines:
        for number, word in re.findall(r"(\d+) (passed|failed|skipped|errors?)", lines[-1]):
            found["error" if word.startswith("error") else word] += int(number)
    return found


def run_size(nodes: int, work: Path, timeout: float, cprofile: Path | None,
             runner_args: list[str]) -> dict[str, Any]:
    profile = scaled_profile(nodes, work)
    kubeconfig, counts_path = work / f"kubeconfig-{nodes}", work / f"counts-{nodes}.json"
    server = subprocess.Popen([sys.executable, __file__, "serve", str(profile), str(kubeconfig), str(counts_path)],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        ready = json.loads(server.stdout.readline() or "{}")
        if not ready.get("ready"):
            raise RuntimeError(f"the simulated cluster of {nodes} nodes did not start")
        command = [sys.executable]
        if cprofile is not None:
            cprofile.mkdir(parents=True, exist_ok=True)
            command += ["-m", "cProfile", "-o", str(cprofile / f"runner-{nodes}.prof")]
        command += ["-m", "pytest", *SUITES, "--kubeconfig", str(kubeconfig), "-q", "-p", "no:cacheprovider",
                    "--report-dir", str(work / f"report-{nodes}"), "--timeout", str(timeout), *runner_args]
        log = (work / f"runner-{nodes}.log").open("w+")
        began = time.perf_counter()
        runner = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        timer = threading.Timer(timeout, runner.kill)
        timer.start()
        _, status, usage = os.wait4(runner.pid, 0)  # this child's own rusage (not the server's)
        timer.cancel()
        runner.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - began
        log.seek(0)
        output = log.read()
        log.close()
    finally:
        server.send_signal(signal.SIGTERM)
        killer = threading.Timer(120, server.kill)
        killer.start()
        _, status, server_usage = os.wait4(server.pid, 0)
        killer.cancel()
        server.returncode = os.waitstatus_to_exitcode(status)
    counts = json.loads(counts_path.read_text()) if counts_path.exists() else {"runner": {}, "agents": {}}
    runner_total = sum(counts["runner"].values())
    by_resource: Counter[str] = Counter()
    for key, count in counts["runner"].items():
        by_resource[key.split(" ", 1)[1]] += count
    return {
        "nodes": nodes, "gpus": nodes * 8, "startup_s": ready.get("startup_s"),
        "wall_s": round(wall, 2), "user_cpu_s": round(usage.ru_utime, 2), "sys_cpu_s": round(usage.ru_stime, 2),
        "runner_peak_rss_mib": round(usage.ru_maxrss / 1024, 1), "exit_code": runner.returncode,
        "timed_out": runner.returncode == -signal.SIGKILL, "tests": outcomes(output),
        "api_requests_total": runner_total, "api_requests_per_node": round(runner_total / nodes, 2),
        "api_requests_by_verb_resource": counts["runner"], "api_requests_by_resource": dict(by_resource.most_common()),
        "agent_requests_total": sum(counts["agents"].values()),
        "cluster_cpu_s": round(server_usage.ru_utime + server_usage.ru_stime, 2),
        "cluster_peak_rss_mib": round(server_usage.ru_maxrss / 1024, 1),
        "cprofile": str(cprofile / f"runner-{nodes}.prof") if cprofile else None,
    }


def targets(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Each target: the figure, the limit, met or missed."""
    out: dict[str, Any] = {}
    smallest, largest = min(results, key=lambda r: r["nodes"]), max(results, key=lambda r: r["nodes"])
    if smallest is not largest:
        ratio = largest["wall_s"] / smallest["wall_s"] if smallest["wall_s"] else float("inf")
        out["wall_ratio"] = {"of": f"{largest['nodes']} vs {smallest['nodes']} nodes", "ratio": round(ratio, 2),
                             "limit": WALL_RATIO_TARGET, "met": ratio <= WALL_RATIO_TARGET}
    worst = max(results, key=lambda r: r["api_requests_per_node"])
    out["requests_per_node"] = {"worst": worst["api_requests_per_node"], "at_nodes": worst["nodes"],
                                "limit": REQUESTS_PER_NODE_TARGET,
                                "met": all(r["api_requests_per_node"] <= REQUESTS_PER_NODE_TARGET for r in results)}
    out["runner_rss"] = {"mib": largest["runner_peak_rss_mib"], "at_nodes": largest["nodes"],
                         "limit_mib": RSS_TARGET_MIB, "met": largest["runner_peak_rss_mib"] < RSS_TARGET_MIB}
    return out


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "serve":
        return serve(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--timeout", type=float, default=1800.0, help="cap on each runner (seconds)")
    parser.add_argument("--cprofile", type=Path, help="also profile the runner; write runner-<n>.prof here")
    parser.add_argument("--work-dir", type=Path, help="keep the profiles, kubeconfigs, runner logs and reports here "
                        "(default: a temporary directory, removed afterwards)")
    parser.add_argument("--runner-arg", action="append", default=[], metavar="ARG",
                        help="one more pytest argument for the runner (repeatable), e.g. -p PLUGIN")
    args = parser.parse_args()
    results, load_before = [], os.getloadavg()
    with contextlib.ExitStack() as stack:
        if args.work_dir is not None:
            args.work_dir.mkdir(parents=True, exist_ok=True)
            tmp = str(args.work_dir)
        else:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="gpuconf-suite-scale-"))
        for nodes in args.sizes:
            result = run_size(nodes, Path(tmp), args.timeout, args.cprofile, args.runner_arg)
            results.append(result)
            print(f"{nodes:>5} nodes: wall {result['wall_s']:8.2f} s  rss {result['runner_peak_rss_mib']:7.1f} MiB  "
                  f"requests {result['api_requests_total']:6d} ({result['api_requests_per_node']:.2f}/node)  "
                  f"tests {result['tests']}  runner cpu {result['user_cpu_s'] + result['sys_cpu_s']:.1f} s  "
                  f"cluster cpu {result['cluster_cpu_s']:.1f} s", flush=True)
            if result["exit_code"] not in (0, 1):
                print(f"      runner exit {result['exit_code']}; last lines:\n"
                      + "".join((Path(tmp) / f"runner-{nodes}.log").read_text().splitlines(True)[-15:]))
    figures = {"suites": SUITES, "runner_args": args.runner_arg, "cpus": os.cpu_count(),
               "load_before": load_before, "sizes": results, "targets": targets(results)}
    for name, target in figures["targets"].items():
        print(f"target {name:18s} {'met' if target['met'] else 'MISSED'}  {target}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
