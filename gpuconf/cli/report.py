"""``gpuconf report diff OLD NEW``: what changed between two runs (a nightly's regression gate);
``gpuconf report verify DIR``: whether a report directory still holds what its run wrote.

diff's exit statuses: 0 nothing worse, 1 new failures or metric regressions (with lost coverage or
without), 15 lost coverage only (a node or check the old run tested that the new one did not), each as
``--fail-on`` selects, 2 bad input (a missing or unreadable file, not JSON, not a gpuconf report).
Runs of different clusters are compared with one warning line on stderr.

verify's: 0 every file the manifest lists is there with its size and SHA-256 and no other file is, 1 a
file missing, altered or unlisted (one line naming them), 2 bad input (no such directory, no
manifest.json, not JSON, not a gpuconf manifest, a listed path outside the directory).
"""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from gpuconf.errors import EXIT_OK, EXIT_REJECTED, UsageError
from gpuconf.report.diff import (
    diff_reports,
    exit_status,
    fail_on_gates,
    load_report,
    render_json,
    render_markdown,
    render_text,
    warning_line,
)

__all__ = ["add_report_parser"]


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"a fraction in [0, 1) such as 0.1 for 10%, not {text}")
    return value


def _fail_on(text: str) -> str:
    try:
        fail_on_gates(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--fail-on ")) from None
    return text


def add_report_parser(sub: Any) -> None:
    report = sub.add_parser("report", help="work with the reports a suite run writes",
                            description="Work with the reports a suite run writes: compare two runs (diff), check a "
                            "report directory against its manifest.json (verify), merge a sharded run's shards "
                            "(merge).")
    actions = report.add_subparsers(dest="report_command", required=True, metavar="{diff,verify,merge}",
                                    parser_class=type(report))
    p = actions.add_parser(
        "diff", help="compare two runs: new failures, fixes, lost coverage, node verdicts, metric regressions",
        description="Compare two suite runs' report.json (a file, the run directory holding it, or a report "
        "directory whose 'latest' link names the run): new failures (a check failing or degraded on a node where "
        "it passed, was not tested or did not run, or failing where it was degraded), fixed ones, those still "
        "failing, lost coverage (node by node, with the new run's reason: a node the old run tested that the new "
        "one did not, a check that ran on a node and is now not tested or absent there), checks that appeared "
        "or disappeared, node verdict changes, and metric regressions: NCCL busbw (the mean over messages >= 1 "
        "GiB) lower, and the smoke check's kernel_ms, pull_s and to_running_s higher, by more than the "
        "tolerance and an absolute floor (0.01 ms, 1 s). Runs of different clusters (the kube-system UIDs in "
        "their manifest.json, else their provenance) are compared with a warning on stderr. "
        "Exit 0 when nothing gates, 1 on new failures or metric regressions (lost coverage or not), 15 on lost "
        "coverage alone (see --fail-on), 2 on bad input.")
    p.add_argument("old", metavar="OLD", help="the baseline: report.json or its run directory")
    p.add_argument("new", metavar="NEW", help="the run to judge: report.json or its run directory (reports/latest)")
    p.add_argument("--tolerance", type=_tolerance, default=0.1, metavar="FRACTION",
                   help="how much worse a measured figure may get before it is a regression (default 0.1 = 10%%)")
    p.add_argument("--fail-on", type=_fail_on, default="any", metavar="GATES",
                   help="what gates, comma-separated: failures (new failures exit 1), regressions (metric "
                   "regressions exit 1), coverage (lost coverage exits 15 when nothing else gates); default any, "
                   "all three. What is not named is listed but exits 0: --fail-on failures ignores metrics and "
                   "lost coverage")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print the comparison as one JSON object")
    fmt.add_argument("--markdown", action="store_true", help="print Markdown (for CI job summaries)")
    p.set_defaults(func=_cmd_diff)
    v = actions.add_parser(
        "verify", help="check a report directory against its manifest.json: nothing missing, altered or added",
        description="Check a suite run's report directory (or its CNCF evidence directory) against the "
        "manifest.json the run wrote there last: every listed file present with its size and SHA-256, and no "
        "file the manifest does not list (an unlisted file in a sign-off directory is suspicious: it fails). "
        "Signature files next to the manifest (manifest.json.*, e.g. a cosign bundle) are left to their own "
        "tools. Exit 0 when everything matches, 1 naming each missing, altered or unlisted file, 2 on bad input "
        "(no such directory, no manifest.json, not JSON, not a gpuconf manifest, a listed path outside the "
        "directory).")
    v.add_argument("directory", metavar="DIR", help="the report directory holding manifest.json")
    v.set_defaults(func=_cmd_verify)
    m = actions.add_parser(
        "merge", help="one sign-off from the report directories of a sharded run's shards (--shard I/N)",
        description="Merge the report directories of a sharded run (each shard run with --shard I/N, e.g. the pods "
        "of manifests/runner/job-sharded.yaml) into one sign-off in --out: report.json, report.md, report.html, "
        "junit.xml and manifest.json, and the CNCF evidence with --cncf-evidence. Refused with one line (exit 2, "
        "nothing written): a directory that is not a shard's, shards of different runs, clusters or node lists, "
        "shards that selected differently (other suites, -m, -k, tiers or judgement options), a shard given twice, a "
        "shard that no longer matches its manifest.json, and a missing shard unless --allow-missing (its nodes and "
        "the cluster-wide checks it was home to are then NOT TESTED, in a missing shard). Exits as the suite would "
        "have: 0 PASS, 1 FAIL, 17 DEGRADED, 15 INCOMPLETE, 18 PARTIAL; 2 on bad input.")
    m.add_argument("shards", metavar="DIR", nargs="+", help="a shard's report directory (its --report-dir)")
    m.add_argument("--out", metavar="DIR", required=True, help="where the merged reports go (new or empty)")
    m.add_argument("--cncf-evidence", metavar="DIR", default=None,
                   help="also write the merged CNCF AI conformance evidence into DIR (as a run's --cncf-evidence)")
    m.add_argument("--allow-missing", action="store_true",
                   help="merge although some shards are missing: their nodes and the cluster-wide checks they "
                   "were home to count as not tested")
    m.set_defaults(func=_cmd_merge)


def _cmd_diff(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    try:
        old, new = load_report(args.old), load_report(args.new)
    except UsageError as exc:
        raise UsageError(f"gpuconf report diff: {exc}") from exc
    diff = diff_reports(old, new, tolerance=args.tolerance)
    if (warning := warning_line(diff)) is not None:
        stderr.write(warning + "\n")
    if args.json:
        stdout.write(json.dumps(render_json(diff, fail_on=args.fail_on), ensure_ascii=False) + "\n")
    elif args.markdown:
        stdout.write(render_markdown(diff))
    else:
        stdout.write(render_text(diff))
    return exit_status(diff, args.fail_on)


#: How many problems verify's one line names before it counts the rest.
_NAMED = 5


def _cmd_verify(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from pathlib import Path

    from gpuconf.report.manifest import MANIFEST, verify

    try:
        result = verify(Path(args.directory))
    except UsageError as exc:
        raise UsageError(f"gpuconf report verify: {exc}") from exc
    run = result.manifest.get("run_id") or "without a run id"
    if result.problems:
        named = "; ".join(p.line() for p in result.problems[:_NAMED])
        more = f"; and {len(result.problems) - _NAMED} more" if len(result.problems) > _NAMED else ""
        stdout.write(f"{args.directory} does not match its {MANIFEST} (run {run}): {named}{more}\n")
        return EXIT_REJECTED
    signed = f"; not checked here: {', '.join(result.signatures)}" if result.signatures else ""
    stdout.write(f"{result.verified} files verified in {args.directory} against its {MANIFEST} (run {run}, "
                 f"gpuconf {result.manifest.get('gpuconf_version')}){signed}\n")
    return EXIT_OK


def _empty_or_new(path: str, what: str) -> None:
    from pathlib import Path

    where = Path(path)
    if where.exists() and (not where.is_dir() or any(where.iterdir())):
        why = "not a directory" if not where.is_dir() else "not empty"
        raise UsageError(f"gpuconf report merge: {what} {path}: {why} (give a new or empty directory: its "
                         "manifest.json lists what the merge wrote)")


def _cmd_merge(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from pathlib import Path

    from gpuconf.report.merge import load_shard, merge_shards, selection_warning, write_merged
    from gpuconf.report.model import cluster_verdict
    from gpuconf.report.writers import verdict_word

    _empty_or_new(args.out, "--out")
    if args.cncf_evidence:
        _empty_or_new(args.cncf_evidence, "--cncf-evidence")
    try:
        shards = [load_shard(d) for d in args.shards]
        run, results = merge_shards(shards, allow_missing=args.allow_missing)
    except UsageError as exc:
        raise UsageError(f"gpuconf report merge: {exc}") from exc
    uids = {s.cluster_uid for s in shards if s.cluster_uid}
    try:
        write_merged(run, results, Path(args.out), cncf_evidence=Path(args.cncf_evidence) if args.cncf_evidence
                     else None, cluster_uid=uids.pop() if len(uids) == 1 else None)
    except OSError as exc:
        raise UsageError(f"gpuconf report merge: cannot write {args.out}: {exc}") from exc
    verdict = cluster_verdict(run, results)
    shard = run.shard or {}
    merged, count = len(shard.get("merged", [])), shard.get("count")
    coverage = f"; {run.coverage.line()}" if run.coverage is not None else ""
    stdout.write(f"merged {merged} of {count} shards of run {shard.get('run')} into {args.out}: "
                 f"{verdict_word(verdict)}{coverage}\n")
    from gpuconf.report.closing import closing_block  # the suite's closing block, for the merged run

    for line, _ in closing_block(run, results, Path(args.out), cncf=args.cncf_evidence):
        stdout.write(line + "\n")
    unverified = [str(s.directory) for s in shards if not s.verified]
    if unverified:
        stderr.write(f"gpuconf: no manifest.json to check in {', '.join(unverified)}: merged as found\n")
    if (warning := selection_warning(shards)) is not None:
        stderr.write(f"gpuconf: {warning}\n")
    return run.exit_status  # the merged run's, as the suite's exit status table (0, 1, 15, 17, 18)
