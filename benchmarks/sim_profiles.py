"""How long loading and expanding simulated cluster profiles takes (scale-1000: 1,000 nodes x 8 GPUs).

Run by hand: ``.venv/bin/python benchmarks/sim_profiles.py [--repeat N] [--json PATH]``. Prints
figures (and writes them as JSON with --json); never asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpuconf.sim.profile import expand, load_profile, with_faults  # noqa: E402


def measure(fn: Callable[[], Any], repeat: int) -> dict[str, float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return {"min_ms": round(min(times), 2), "median_ms": round(statistics.median(times), 2),
            "max_ms": round(max(times), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    start = time.perf_counter()
    profile = load_profile("scale-1000")
    cold_load = (time.perf_counter() - start) * 1000  # includes parsing the knowledge tables once
    faulty = with_faults(profile, [{"id": "gpu-lost", "node": "all", "gpu": 3},
                                   {"id": "label-drift", "node": "all"}, {"id": "nccl-hang", "node": 7}])
    cluster = expand(profile)
    results = {
        "profile": profile.name, "nodes": len(cluster.nodes), "gpus": sum(len(n.gpus) for n in cluster.nodes),
        "python": platform.python_version(), "repeat": args.repeat,
        "load_cold_ms": round(cold_load, 2),
        "load_warm": measure(lambda: load_profile("scale-1000"), args.repeat),
        "expand": measure(lambda: expand(profile), args.repeat),
        "expand_with_2001_fault_applications": measure(lambda: expand(faulty), args.repeat),
    }
    print(f"{results['profile']}: {results['nodes']} nodes, {results['gpus']} GPUs (Python {results['python']}, "
          f"{args.repeat} runs)")
    print(f"  load, cold (tables parsed once)      {results['load_cold_ms']:8.1f} ms")
    for key in ("load_warm", "expand", "expand_with_2001_fault_applications"):
        r = results[key]
        print(f"  {key.replace('_', ' '):36s} {r['min_ms']:8.1f} ms min  {r['median_ms']:8.1f} ms median  "
              f"{r['max_ms']:8.1f} ms max")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        print(f"  written to {args.json}")


if __name__ == "__main__":
    main()
