"""The runner sharded: the smoke, inventory and isolation suites against one simulated cluster, run
unsharded and as N shards side by side (``--shard I/N``), then ``gpuconf report merge``.

    .venv/bin/python benchmarks/shard_scale.py [--nodes 1000] [--shards 4 ...] [--json OUT] [--timeout S]
                                               [--work-dir DIR]

For each form (unsharded, then each N of ``--shards``) a fresh copy of scale-1000 with ``--nodes``
nodes is served by its own process (benchmarks/suite_scale.py's ``serve``), and the runners start
together against its kubeconfig. Figures per form: each runner's wall time, CPU (user + system) and
peak RSS (os.wait4 on that child), the slowest shard's wall (the form's wall), the sum of the
runners' CPU, the largest RSS, the tests' outcomes, the cluster's CPU; for a sharded form the
merge's wall, CPU and peak RSS, and whether the merged sign-off's per-node verdicts and cluster
verdict are the unsharded run's. Prints figures and writes JSON; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def suite_scale() -> ModuleType:
    spec = importlib.util.spec_from_file_location("suite_scale", ROOT / "benchmarks" / "suite_scale.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _wait(process: subprocess.Popen[Any], began: float, timeout: float) -> dict[str, Any]:
    """The child's exit code, wall time and its own rusage (CPU, peak RSS)."""
    timer = threading.Timer(timeout, process.kill)
    timer.start()
    _, status, usage = os.wait4(process.pid, 0)
    timer.cancel()
    process.returncode = os.waitstatus_to_exitcode(status)
    return {"exit_code": process.returncode, "wall_s": round(time.perf_counter() - began, 2),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 2), "peak_rss_mib": round(usage.ru_maxrss / 1024, 1)}


def shard_args(shards: int | None, index: int) -> list[str]:
    """The runner's sharding options: none for the unsharded form."""
    return [] if shards is None else ["--shard", f"{index}/{shards}", "--shard-run", f"bench-{shards}"]


def run_form(nodes: int, shards: int | None, work: Path, timeout: float) -> dict[str, Any]:
    bench = suite_scale()
    name = "unsharded" if shards is None else f"{shards}-shards"
    where = work / name
    where.mkdir(parents=True, exist_ok=True)
    profile = bench.scaled_profile(nodes, where)
    kubeconfig, counts = where / "kubeconfig", where / "counts.json"
    server = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "suite_scale.py"), "serve", str(profile),
                               str(kubeconfig), str(counts)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    runners: list[dict[str, Any]] = []
    try:
        assert server.stdout is not None
        if not json.loads(server.stdout.readline() or "{}").get("ready"):
            raise RuntimeError(f"the simulated cluster of {nodes} nodes did not start")
        began, started = time.perf_counter(), []
        for index in range(shards or 1):
            log = (where / f"runner-{index}.log").open("w+")
            command = [sys.executable, "-m", "pytest", *bench.SUITES, "--kubeconfig", str(kubeconfig), "-q", "-p",
                       "no:cacheprovider", "--report-dir", str(where / f"shard-{index}"), "--timeout", str(timeout),
                       *shard_args(shards, index)]
            started.append((index, subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT), log))
        for index, process, log in started:
            figures = _wait(process, began, timeout)
            log.seek(0)
            figures.update(index=index, tests=bench.outcomes(log.read()))
            log.close()
            runners.append(figures)
    finally:
        server.send_signal(signal.SIGTERM)
        _, _, server_usage = os.wait4(server.pid, 0)
    form: dict[str, Any] = {
        "form": name, "nodes": nodes, "shards": shards or 1, "runners": runners,
        "wall_s": max(r["wall_s"] for r in runners), "runner_cpu_s": round(sum(r["cpu_s"] for r in runners), 2),
        "largest_rss_mib": max(r["peak_rss_mib"] for r in runners),
        "cluster_cpu_s": round(server_usage.ru_utime + server_usage.ru_stime, 2)}
    if shards is not None:
        out = where / "merged"
        began = time.perf_counter()
        merge = subprocess.Popen([sys.executable, "-m", "gpuconf.cli", "report", "merge",
                                  *(str(where / f"shard-{i}") for i in range(shards)), "--out", str(out)],
                                 cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        figures = _wait(merge, began, timeout)
        assert merge.stdout is not None
        form["merge"] = {**figures, "said": merge.stdout.read().strip()}
        form["report"] = str(out / "report.json")
    else:
        form["report"] = str(where / "shard-0" / "report.json")
    return form


def _verdicts(path: str) -> tuple[Any, Any] | None:
    try:
        meta = json.loads(Path(path).read_text())["extra"]["gpuconf"]
    except (OSError, ValueError, KeyError):
        return None
    return meta.get("verdict"), meta.get("nodes")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--shards", type=int, nargs="+", default=[4])
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--timeout", type=float, default=1800.0, help="cap on each runner and the merge (seconds)")
    parser.add_argument("--work-dir", type=Path, help="keep the runners' logs and reports here (default: a "
                        "temporary directory, removed afterwards)")
    args = parser.parse_args()
    forms, load_before = [], os.getloadavg()
    with contextlib.ExitStack() as stack:
        if args.work_dir is not None:
            args.work_dir.mkdir(parents=True, exist_ok=True)
            work = args.work_dir
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gpuconf-shard-scale-")))
        for shards in [None, *args.shards]:
            form = run_form(args.nodes, shards, work, args.timeout)
            forms.append(form)
            for r in form["runners"]:
                print(f"{form['form']:>10} runner {r['index']}: wall {r['wall_s']:8.2f} s  cpu {r['cpu_s']:7.1f} s  "
                      f"rss {r['peak_rss_mib']:7.1f} MiB  exit {r['exit_code']}  tests {r['tests']}", flush=True)
            line = (f"{form['form']:>10}: wall {form['wall_s']:8.2f} s  runner cpu {form['runner_cpu_s']:7.1f} s  "
                    f"largest rss {form['largest_rss_mib']:7.1f} MiB  cluster cpu {form['cluster_cpu_s']:.1f} s")
            if "merge" in form:
                m = form["merge"]
                line += f"  merge: wall {m['wall_s']:.2f} s cpu {m['cpu_s']:.1f} s rss {m['peak_rss_mib']:.1f} MiB"
            print(line, flush=True)
        whole = _verdicts(forms[0]["report"])
        for form in forms[1:]:
            form["same_verdicts_as_unsharded"] = whole is not None and _verdicts(form["report"]) == whole
            same = form["same_verdicts_as_unsharded"]
            print(f"{form['form']:>10}: merged verdicts equal the unsharded run's: {same}")
    figures = {"suites": suite_scale().SUITES, "cpus": os.cpu_count(), "load_before": load_before, "forms": forms}
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
