"""Start a simulated cluster and measure it: startup time, API latency, requests, memory.

    .venv/bin/python benchmarks/sim_scale.py [PROFILE] [--json OUT]

Prints figures and optionally writes them as JSON; asserts nothing (timings are measured here,
never in tests). Default profile: scale-1000 (1,000 nodes x 8 GPUs).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpuconf.sim.cluster import SimulatedCluster  # noqa: E402


def timed(fn: Callable[[], Any], repeat: int) -> dict[str, float]:
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - began) * 1000)
    p95 = sorted(samples)[int(0.95 * (len(samples) - 1))]
    return {"median_ms": round(statistics.median(samples), 2), "p95_ms": round(p95, 2),
            "max_ms": round(max(samples), 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("profile", nargs="?", default="scale-1000")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    sim = SimulatedCluster(args.profile).start()
    try:
        api = client.CoreV1Api(sim.api_client())
        node = sim.cluster.nodes[len(sim.cluster.nodes) // 2].name
        requests_before = sim.server.requests_served
        figures: dict[str, Any] = {
            "profile": args.profile, "nodes": len(sim.cluster.nodes), "gpus": sim.gpus,
            "startup_s": round(sim.startup_s or 0.0, 2),
            "get_node": timed(lambda: api.read_node(node), args.repeat),
            "list_pods_on_one_node": timed(
                lambda: api.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}"), args.repeat),
            "list_nodes_raw_json": timed(lambda: api.list_node(_preload_content=False).data, max(3, args.repeat // 5)),
        }
        figures["requests_during_measurement"] = sim.server.requests_served - requests_before
        idle_before = sim.server.requests_served
        time.sleep(10)
        figures["idle_requests_per_s"] = round((sim.server.requests_served - idle_before) / 10, 1)
        figures["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    finally:
        sim.stop()
    for key, value in figures.items():
        print(f"{key:32s} {value}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
