"""Throughput of the fake API server through the official client, and list cost at 1,000 nodes x 8 GPUs.

Run by hand: ``.venv/bin/python benchmarks/sim_apiserver.py [--pairs N] [--json PATH]``. Prints
figures (and writes them as JSON with --json); never asserts a timing. Client and server share the
machine's cores, so the figures are a floor for what a suite's own calls cost.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubernetes import client  # noqa: E402

from gpuconf.sim import FakeApiServer  # noqa: E402

POD_SPEC = {"containers": [{"name": "probe", "image": "nvcr.io/nvidia/cuda:12.9.0-base-ubuntu24.04",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def create_get_pairs(server: FakeApiServer, namespace: str, pairs: int, threads: int) -> dict[str, float]:
    """``pairs`` create+get pairs spread over ``threads`` client threads sharing one ApiClient."""
    configuration = client.Configuration(host=server.url)
    configuration.connection_pool_maxsize = max(threads, 4)
    with client.ApiClient(configuration) as api:
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": namespace}})
        per_thread = pairs // threads

        def work(t: int) -> None:
            for i in range(per_thread):
                name = f"p-{t}-{i}"
                core.create_namespaced_pod(namespace, {"metadata": {"name": name}, "spec": POD_SPEC})
                core.read_namespaced_pod(name, namespace)

        workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        before = server.requests_served
        start = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        elapsed = time.perf_counter() - start
        requests = server.requests_served - before
    return {"threads": threads, "pairs": per_thread * threads, "seconds": round(elapsed, 3),
            "objects_per_s": round(per_thread * threads / elapsed, 1), "requests_per_s": round(requests / elapsed, 1)}


def scale_lists(server: FakeApiServer) -> dict[str, Any]:
    """1,000 GPU nodes with a ResourceSlice each, 8,000 pods, then list them the ways a suite would."""
    store = server.store
    populate, _ = timed(lambda: populate_cluster(server))
    configuration = client.Configuration(host=server.url)
    with client.ApiClient(configuration) as api:
        core, dra = client.CoreV1Api(api), client.ResourceV1Api(api)
        core.list_node(limit=1)  # warm the connection
        figures: dict[str, Any] = {"nodes": store.count("nodes"), "pods": store.count("pods"),
                                   "resourceslices": store.count("resourceslices"),
                                   "populate_in_process_s": round(populate, 2)}
        for label, call in {
            "list all nodes (HTTP, typed)": lambda: core.list_node(),
            "list all resourceslices (HTTP, typed)": lambda: dra.list_resource_slice(),
            "list all pods, all namespaces (HTTP, typed)": lambda: core.list_pod_for_all_namespaces(),
            "list pods on one node, field selector (HTTP)": lambda: core.list_pod_for_all_namespaces(
                field_selector="spec.nodeName=gpu-node-0500"),
            "list pods in a small namespace (HTTP)": lambda: core.list_namespaced_pod("small"),
            "list all pods, all namespaces (HTTP, raw JSON)": lambda: core.list_pod_for_all_namespaces(
                _preload_content=False).data,
            "list pods on one node (in process)": lambda: store.list(
                "pods", field_selector="spec.nodeName=gpu-node-0500", copy=False),
        }.items():
            seconds, _ = timed(call)
            figures[label] = round(seconds * 1000, 1)
    return figures


def populate_cluster(server: FakeApiServer) -> None:
    store = server.store
    store.create("namespaces", {"metadata": {"name": "gpu-jobs"}})
    store.create("namespaces", {"metadata": {"name": "small"}})
    for i in range(5):
        store.create("pods", {"metadata": {"name": f"s-{i}"}, "spec": POD_SPEC}, namespace="small", copy=False)
    for n in range(1000):
        node = f"gpu-node-{n:04d}"
        store.create("nodes", {"metadata": {"name": node, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100"}},
                               "status": {"allocatable": {"nvidia.com/gpu": "8"}}}, copy=False)
        store.create("resourceslices", {"metadata": {"name": f"{node}-gpu.nvidia.com"}, "spec": {
            "driver": "gpu.nvidia.com", "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{g}", "attributes": {"index": {"int": g}}} for g in range(8)]}}, copy=False)
        for g in range(8):
            store.create("pods", {"metadata": {"name": f"probe-{n:04d}-{g}"},
                                  "spec": {**POD_SPEC, "nodeName": node}}, namespace="gpu-jobs", copy=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2000, help="create+get pairs per measurement")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    results: dict[str, Any] = {"python": platform.python_version(), "cpus": os.cpu_count()}
    with FakeApiServer() as server:
        results["create_get"] = [create_get_pairs(server, f"bench-{t}", args.pairs, t) for t in (1, 8)]
    with FakeApiServer(history=100_000) as server:
        results["scale"] = scale_lists(server)

    print(f"fake API server, Python {results['python']}, {results['cpus']} CPUs (client and server together)")
    for row in results["create_get"]:
        print(f"  create+get, {row['threads']} client thread(s): {row['objects_per_s']:7.1f} objects/s "
              f"({row['requests_per_s']:7.1f} requests/s, {row['pairs']} pairs in {row['seconds']} s)")
    scale = results["scale"]
    print(f"  scale: {scale['nodes']} nodes, {scale['resourceslices']} resourceslices, {scale['pods']} pods "
          f"(populated in process in {scale['populate_in_process_s']} s)")
    for key, value in scale.items():
        if isinstance(value, float) and key != "populate_in_process_s":
            print(f"    {key:50s} {value:8.1f} ms")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
