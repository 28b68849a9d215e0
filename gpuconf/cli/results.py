"""``gpuconf results list|fetch``: the in-cluster runner's reports, read from its results volume.

A short-lived reader pod in the runner namespace mounts the ``gpuconf-results`` PVC read-only and
prints what was asked (:mod:`gpuconf.cluster.results`); no exec, no kubectl. The identity needs
``manifests/runner/results-reader-role.yaml`` in that namespace.

Exit statuses: 0 done; 2 bad input (a bad run name, no such run on the volume, an output path that
is a file); 3 the reader pod did not deliver (refused, failed, not finished in ``--timeout``, output
over ``--max-mib``, damaged or unsafe archive); and as a suite run that cannot start: 10 bad
kubeconfig, 11 cluster unreachable, 12 forbidden (RBAC), 13 nothing to read (no results PVC in the
namespace, or ``latest`` on a volume with no runs).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, TextIO

from gpuconf import __version__
from gpuconf.errors import EXIT_ENVIRONMENT, EXIT_OK, EXIT_USAGE, UsageError

__all__ = ["EXIT_NOTHING_TO_READ", "add_results_parser", "exit_status_for"]

#: 10-12 as a suite run's (kubeconfig, unreachable, forbidden: gpuconf.cluster.errors.access_exit_status).
#: No results PVC in the namespace, or ``latest`` on an empty volume (a run's 13 is "no GPU nodes":
#: in both, the cluster lacks what the command reads).
EXIT_NOTHING_TO_READ = 13

#: gpuconf.cluster.results' defaults, repeated so that building the parser imports no Kubernetes client
#: (tests/test_results.py keeps them equal).
DEFAULT_NAMESPACE = "gpuconf"
DEFAULT_PVC = "gpuconf-results"
RUNNER_IMAGE = f"gpuconf-runner:{__version__}"
DEFAULT_MAX_MIB = 64

_BAD_INPUT_KINDS = frozenset({"no-run"})
_NOTHING_KINDS = frozenset({"no-volume", "no-runs"})


def exit_status_for(exc: Exception) -> int:
    """The exit status of a :mod:`gpuconf.cluster` error (see the module docstring)."""
    from gpuconf.cluster.errors import access_exit_status
    from gpuconf.cluster.results import ResultsError

    status = access_exit_status(exc)
    if status is not None:
        return status
    if isinstance(exc, ResultsError) and exc.kind in _BAD_INPUT_KINDS:
        return EXIT_USAGE
    if isinstance(exc, ResultsError) and exc.kind in _NOTHING_KINDS:
        return EXIT_NOTHING_TO_READ
    return EXIT_ENVIRONMENT


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, not {text}")
    return value


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig (default $KUBECONFIG, ~/.kube/config)")
    p.add_argument("--context", metavar="NAME", help="kubeconfig context to use")
    p.add_argument("--namespace", default=DEFAULT_NAMESPACE,
                   help=f"the runner's namespace, where the results PVC is (default {DEFAULT_NAMESPACE})")
    p.add_argument("--pvc", default=DEFAULT_PVC, help=f"the results PersistentVolumeClaim (default {DEFAULT_PVC})")
    p.add_argument("--image", default=RUNNER_IMAGE,
                   help=f"the reader pod's image: the runner image you pushed, as in job.yaml (default "
                   f"{RUNNER_IMAGE}); any image with python3 works")
    p.add_argument("--timeout", type=_positive, default=300.0, metavar="SECONDS",
                   help="how long the reader pod may take, image pull included (default 300)")
    p.add_argument("--max-mib", type=_positive, default=float(DEFAULT_MAX_MIB), metavar="MIB",
                   help=f"the most the reader may print, base64 of the gzipped run (default "
                   f"{DEFAULT_MAX_MIB})")


def add_results_parser(sub: Any) -> None:
    results = sub.add_parser(
        "results", help="list and fetch the in-cluster runner's reports from its results volume",
        description="List and fetch the reports the in-cluster runner (manifests/runner/) wrote to its results "
        "volume, through a short-lived read-only reader pod in the runner namespace (no exec, no kubectl). "
        "Needs manifests/runner/results-reader-role.yaml bound to you. Exit 0 done, 2 bad input or no such "
        "run, 3 the reader pod did not deliver, 10 bad kubeconfig, 11 unreachable, 12 forbidden, 13 no "
        "results volume or no runs.")
    actions = results.add_subparsers(dest="results_command", required=True, metavar="list|fetch",
                                     parser_class=type(results))
    ls = actions.add_parser("list", help="the runs on the volume, newest first, with their verdicts",
                            description="The runs on the results volume, newest first: directory, when it "
                            "finished, the suite's exit status and the node verdicts from its report.json (with its "
                            "coverage line when some selected GPU node was not tested; the run is then "
                            "incomplete unless something failed). A sharded run (job-sharded.yaml) is one line: "
                            "its shards' latest finish, each shard's exit status, their verdicts together.")
    _common(ls)
    ls.add_argument("--json", action="store_true", help="print the runs as one JSON array")
    ls.set_defaults(func=_cmd_list)
    fetch = actions.add_parser("fetch", help="copy one run's reports into a directory",
                               description="Copy one run's directory (report.json, report.md, report.html, "
                               "junit.xml, any CNCF evidence) from the results volume into --out; a sharded "
                               "run's whole, its shards in --out/shard-<index>/.")
    fetch.add_argument("run", nargs="?", default="latest", metavar="RUN",
                       help="the run directory's name (see 'gpuconf results list'), or latest (default)")
    fetch.add_argument("--out", required=True, metavar="DIR",
                       help="where the run's files go (created if missing; files of the same name are replaced)")
    _common(fetch)
    fetch.set_defaults(func=_cmd_fetch)


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _finished_and_exit(run: Any) -> tuple[str, str]:
    """The FINISHED and EXIT cells: a sharded run's latest finish and each shard's exit status in
    index order ("0,1,-,0": "-" where a shard has no report)."""
    reports = [s.report or {} for s in run.shards] if run.shards else [run.report or {}]
    finished = max((str(r["finished"]) for r in reports if r.get("finished")), default=_iso(run.mtime))
    statuses = ["-" if r.get("exit_status") is None else str(r["exit_status"]) for r in reports]
    return finished, ",".join(statuses)


def _verdicts(counts: dict[str, int]) -> str:
    order = ("fail", "degraded", "pass", "not-tested")
    keys = [k for k in order if counts.get(k)] + sorted(k for k in counts if k not in order and counts[k])
    return ", ".join(f"{counts[k]} {k}" for k in keys)


def _run(args: argparse.Namespace, stderr: TextIO, action: Any) -> int:
    from gpuconf.cluster import ClusterError, connect

    try:
        cluster = connect(args.kubeconfig, args.context)
    except ClusterError as e:
        print(f"gpuconf results: {e}", file=stderr)
        return exit_status_for(e)
    try:
        return int(action(cluster))
    except ClusterError as e:
        print(f"gpuconf results: {e}", file=stderr)
        return exit_status_for(e)
    finally:
        cluster.close()


def _options(args: argparse.Namespace) -> dict[str, Any]:
    return {"namespace": args.namespace, "pvc": args.pvc, "image": args.image, "timeout": args.timeout,
            "max_bytes": int(args.max_mib * 2**20)}


def _as_json(run: Any) -> dict[str, Any]:
    return {"run": run.name, "time": _iso(run.mtime), "verdict": run.verdict, "coverage": run.coverage,
            "verdicts": dict(run.verdicts), "files": list(run.files), "report": run.report,
            "report_error": run.report_error}


def _cmd_list(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from gpuconf.cluster.results import RunInfo, list_runs

    def action(cluster: Any) -> int:
        runs: list[RunInfo] = list_runs(cluster, **_options(args))
        if args.json:
            stdout.write(json.dumps([{**_as_json(r), "shards": [_as_json(s) for s in r.shards]} for r in runs],
                                    indent=2) + "\n")
            return EXIT_OK
        if not runs:
            stdout.write(f"no runs on {args.namespace}/{args.pvc}\n")
            return EXIT_OK
        rows = [("RUN", "FINISHED", "EXIT", "VERDICT", "NODES")]
        for r in runs:
            finished, status = _finished_and_exit(r)
            shards = f"; {len(r.shards)} shards: " + ", ".join(s.name for s in r.shards) if r.shards else ""
            rows.append((r.name, finished, status, r.verdict,
                         _verdicts(dict(r.verdicts)) + (f" ({r.coverage})" if r.coverage else "") + shards))
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        for row in rows:
            stdout.write("  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True))
                         + "  " + row[4] + "\n")
        return EXIT_OK

    return _run(args, stderr, action)


def _cmd_fetch(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from gpuconf.cluster.results import fetch_run, validate_run_name

    try:
        validate_run_name(args.run)
    except ValueError as e:
        raise UsageError(f"gpuconf results fetch: {e}") from e
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"gpuconf results fetch: --out {out} exists and is not a directory")

    def action(cluster: Any) -> int:
        fetched = fetch_run(cluster, args.run, out, **_options(args))
        stdout.write(f"run {fetched.run}: {len(fetched.files)} files ({fetched.archive_bytes} bytes compressed) "
                     f"in {fetched.directory}\n")
        for name in fetched.files:
            stdout.write(f"  {name}\n")
        return EXIT_OK

    return _run(args, stderr, action)
