"""``gpuconf report merge``: one sign-off from the report directories of a sharded run's shards
(gpuconf.shards; the pods of manifests/runner/job-sharded.yaml).

Each shard's report.json (CTRF, gpuconf's data in ``extra.gpuconf``) holds its results and its plan:
the sharded run's name, the shard count, its index and every selected GPU node's shard. The merge
refuses, with one line, what would make a false sign-off: a directory that is not a shard's, shards of
different runs or clusters or of different fleets (a node joined between their starts), shards that
selected differently (report.json's ``extra.gpuconf.scope.selection``), one shard given twice, a shard
whose manifest.json no longer matches it, and a missing shard unless ``--allow-missing`` (then each of
its nodes and each cluster-wide check it was home to is NOT TESTED, "in a missing shard", and the
sign-off cannot PASS); a shard the plan gave nothing (no node, no cluster-wide check) may be absent.
The merged reports are what a single run writes: report.json, report.md, report.html,
junit.xml, the CNCF evidence (``--cncf-evidence DIR``) and manifest.json.
"""

from __future__ import annotations

import calendar
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuconf.errors import UsageError
from gpuconf.report.model import (
    DEGRADED,
    FAIL,
    MISSING_SHARD,
    NOT_TESTED,
    OUTCOMES,
    CheckResult,
    Coverage,
    Record,
    RunRecord,
    UntestedNode,
    parse_series,
)

__all__ = ["Shard", "load_shard", "merge_shards", "read_run", "write_merged"]

#: The merged run's exit statuses, as the suite's (docs/exit-statuses.md): 1 a check failed (or a shard
#: of a gpuconf that ended a degraded run with 1 says so), else 17 degraded, else 15 when nodes went
#: untested, a shard was interrupted or could not start (10-14, 16: its nodes are not tested), else 18
#: when the shards selected less than the sign-off's scope, else 0.
_FAILED, _UNTESTED, _DEGRADED, _PARTIAL = 1, 15, 17, 18


@dataclass(frozen=True)
class Shard:
    """One shard's report directory as read: its run, results and plan (``extra.gpuconf.shard``)."""

    directory: Path
    run: RunRecord
    results: tuple[CheckResult, ...]
    plan: Mapping[str, Any]
    verified: bool  # its manifest.json was there and matched
    cluster_uid: str | None = None  # the kube-system namespace's UID its manifest names
    #: What the run selected (report.json ``extra.gpuconf.scope.selection``: suites, -m, -k, tiers,
    #: judgement options); None in a report from before gpuconf recorded it (``scoped`` False).
    selection: Any = None
    scoped: bool = False

    @property
    def index(self) -> int:
        return int(self.plan["index"])

    @property
    def count(self) -> int:
        return int(self.plan["count"])

    @property
    def assignment(self) -> Mapping[str, int] | None:
        """Every selected GPU node's shard; None for a shard that could not start (it never listed nodes)."""
        value = self.plan.get("assignment")
        return value if isinstance(value, Mapping) else None


def _epoch(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def read_run(doc: Any, *, source: str) -> tuple[RunRecord, list[CheckResult]]:
    """A report.json's run and results, as the writers wrote them (gpuconf.report.writers.ctrf_document);
    UsageError (one line) for what is not a gpuconf report."""
    from gpuconf.report.diff import _curve, _metrics
    from gpuconf.report.writers import run_meta

    if not isinstance(doc, dict):
        raise UsageError(f"{source}: not a gpuconf report (not a JSON object)")
    meta, body = run_meta(doc), doc.get("results")
    if meta is None or not isinstance(body, dict) or not isinstance(body.get("tests"), list):
        raise UsageError(f"{source}: not a gpuconf report (no 'extra.gpuconf' section or no results.tests list)")
    results = []
    for index, test in enumerate(body["tests"]):
        extra = test.get("extra") if isinstance(test, dict) else None
        if not isinstance(extra, dict) or extra.get("outcome") not in OUTCOMES or not isinstance(
                extra.get("check"), str):
            raise UsageError(f"{source}: not a gpuconf report (results.tests[{index}] has no gpuconf check and "
                             "outcome)")
        duration = test.get("duration")
        series = tuple(s for doc_ in extra.get("series") or () if (s := parse_series("", doc_)) is not None)
        results.append(CheckResult(
            extra["check"], _text(extra.get("node")), extra["outcome"], str(test.get("name") or extra["check"]),
            float(duration) / 1000 if isinstance(duration, (int, float)) and not isinstance(duration, bool) else 0.0,
            _text(extra.get("expected")), _text(extra.get("observed")), _text(test.get("message")),
            _curve(extra.get("curve")), _metrics(extra.get("metrics")), series,
            tuple(str(r) for r in extra.get("cncf") or () if isinstance(r, str)), Record.from_json(extra)))
    started, finished = _epoch(meta.get("started")), _epoch(meta.get("finished"))
    status = meta.get("exit_status")
    shard = meta.get("shard")
    options = meta.get("options")
    run = RunRecord(_text(meta.get("provenance")), started or 0.0, finished or started or 0.0,
                    status if isinstance(status, int) and not isinstance(status, bool) else _FAILED,
                    meta.get("interrupted") is True, _text(meta.get("run_id")), _text(meta.get("error")),
                    Coverage.from_json(meta.get("coverage")), shard if isinstance(shard, Mapping) else None,
                    options if isinstance(options, Mapping) else {},
                    scope=meta["scope"] if isinstance(meta.get("scope"), Mapping) else None,
                    faults=tuple(f for f in meta.get("faults") or () if isinstance(f, str)),
                    server_version=_text(meta.get("server_version")))
    return run, results


def load_shard(directory: str | Path) -> Shard:
    """A shard's report directory: report.json read, its manifest.json checked where there is one."""
    from gpuconf.report.manifest import MANIFEST, verify

    where = Path(directory)
    path = where / "report.json"
    if not where.is_dir():
        raise UsageError(f"{where}: no such directory (give each shard's report directory)")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{where}: no report.json (give each shard's report directory)") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{path}: cannot read it as JSON: {exc}") from None
    run, results = read_run(doc, source=str(path))
    scope = doc["extra"]["gpuconf"].get("scope")
    scoped = isinstance(scope, Mapping) and "selection" in scope
    plan = run.shard
    if plan is None or "merged" in plan or not all(isinstance(plan.get(k), int) for k in ("index", "count")):
        what = "a merge's report" if plan is not None and "merged" in plan else "not a shard's report"
        raise UsageError(f"{where}: {what} (its run was not given --shard I/N); merge the shards' own directories")
    verified, uid = False, None
    if (where / MANIFEST).is_file():
        check = verify(where)
        if check.problems:
            named = "; ".join(p.line() for p in check.problems[:3])
            raise UsageError(f"{where} does not match its {MANIFEST}: {named}; a changed shard is not merged")
        verified = True
        uid = _text((check.manifest.get("cluster") or {}).get("kube_system_uid"))
    return Shard(where, run, tuple(results), plan, verified, uid, scope["selection"] if scoped else None, scoped)


def _refuse_mixed(shards: Sequence[Shard]) -> None:
    first = shards[0]
    for other in shards[1:]:
        a, b = first, other
        if a.count != b.count:
            raise UsageError(f"{a.directory} is shard {a.index} of {a.count} but {b.directory} is shard {b.index} of "
                             f"{b.count}: shards of different runs")
        runs = (a.plan.get("run"), b.plan.get("run"))
        if None not in runs and runs[0] != runs[1]:
            raise UsageError(f"{a.directory} is of run {runs[0]} but {b.directory} of run {runs[1]}: shards of "
                             "different runs")
        if a.run.provenance != b.run.provenance:
            raise UsageError(f"{a.directory} tested {a.run.provenance} but {b.directory} tested {b.run.provenance}: "
                             "shards of different clusters")
        if None not in (a.cluster_uid, b.cluster_uid) and a.cluster_uid != b.cluster_uid:
            raise UsageError(f"{a.directory} tested the cluster whose kube-system namespace is {a.cluster_uid} but "
                             f"{b.directory} the one whose is {b.cluster_uid} (their manifest.json): shards of "
                             "different clusters")
        prints = (a.plan.get("fingerprint"), b.plan.get("fingerprint"))
        if None not in prints and prints[0] != prints[1]:
            raise UsageError(f"{a.directory} and {b.directory} split different node lists (a GPU node joined or left "
                             "between their starts, or their --node-selector differs): merged, some nodes would be "
                             "tested twice or not at all; run the shards again")
    _refuse_other_selections(shards)
    seen: dict[int, Path] = {}
    for s in shards:
        if s.index in seen:
            raise UsageError(f"{seen[s.index]} and {s.directory} are both shard {s.index} of {s.count}: give each "
                             "shard once")
        seen[s.index] = s.directory


def _refuse_other_selections(shards: Sequence[Shard]) -> None:
    """Shards that selected different checks (other suites, -m, -k, tiers or judgement options) are
    not one run: merged, the sign-off would claim checks some nodes never ran. A report from before
    gpuconf recorded the selection merges only with others like it (:func:`selection_warning`)."""
    scoped = [s for s in shards if s.scoped]
    if scoped and len(scoped) < len(shards):
        old = next(s for s in shards if not s.scoped)
        raise UsageError(f"{old.directory} (shard {old.index}) does not record what it selected (a report from an "
                         f"older gpuconf) but {scoped[0].directory} (shard {scoped[0].index}) does: shards of one run "
                         "are run by one gpuconf; run the shards again")
    for other in scoped[1:]:
        if other.selection != scoped[0].selection:
            raise UsageError(f"{_selection_difference(scoped[0], other)}: shards that selected different checks do "
                             "not merge into one sign-off; run every shard with the same suites and options")


def _selection_difference(a: Shard, b: Shard) -> str:
    """One line naming the first thing two shards selected differently."""
    first, second = a.selection, b.selection
    if isinstance(first, Mapping) and isinstance(second, Mapping):
        key = next(k for k in sorted({*first, *second}, key=str) if first.get(k) != second.get(k))
        first, second = _selected(key, first.get(key)), _selected(key, second.get(key))
    else:
        first, second = f"selection {json.dumps(first)}", f"selection {json.dumps(second)}"
    return f"shard {b.index} ran {second}, shard {a.index} ran {first} ({b.directory}, {a.directory})"


def _selected(key: Any, value: Any) -> str:
    if value in (None, "", [], {}, False):
        return f"no {key}"
    if value is True:
        return str(key)
    return f"{key} {value if isinstance(value, str) else json.dumps(value, sort_keys=True)}"


def selection_warning(shards: Sequence[Shard]) -> str | None:
    """The warning for shards none of which records its selection (reports from an older gpuconf): the
    merge cannot tell whether they ran the same checks."""
    if shards and not any(s.scoped for s in shards):
        return ("none of the shards records what it selected (reports from an older gpuconf): merged without "
                "checking that they ran the same suites and options")
    return None


def merge_shards(shards: Sequence[Shard], *, allow_missing: bool = False) -> tuple[RunRecord, list[CheckResult]]:
    """One run of the shards' results and coverage; UsageError (one line) for shards that do not make
    one run, or a missing shard without ``allow_missing``."""
    if not shards:
        raise UsageError("no shard directories given")
    shards = sorted(shards, key=lambda s: s.index)
    _refuse_mixed(shards)
    count = shards[0].count
    planned = next((s for s in shards if s.assignment is not None), None)
    given = {s.index for s in shards}
    idle = _idle(planned, [i for i in range(count) if i not in given])
    missing = [i for i in range(count) if i not in given and i not in idle]
    if missing and not allow_missing:
        names = ", ".join(str(i) for i in missing)
        nodes = "" if planned is None or planned.assignment is None else (
            f" (its {sum(v in missing for v in planned.assignment.values())} GPU nodes)" if len(missing) == 1 else
            f" (their {sum(v in missing for v in planned.assignment.values())} GPU nodes)")
        raise UsageError(f"shard{'s' if len(missing) > 1 else ''} {names} of {count} "
                         f"{'are' if len(missing) > 1 else 'is'} missing{nodes}: give "
                         f"{'their' if len(missing) > 1 else 'its'} report director{'ies' if len(missing) > 1 else 'y'}"
                         ", or --allow-missing to sign off without them (their nodes then count as not tested)")
    results = [r for s in shards for r in s.results] + _absent_homes(shards, missing, count)
    run_name = next((s.plan["run"] for s in shards if isinstance(s.plan.get("run"), str)), None)
    coverage = _coverage(shards, planned, missing, count)
    runs = [s.run for s in shards]
    errors = [s for s in shards if s.run.error]
    error = errors[0].run.error if len(errors) == len(shards) else None
    interrupted = any(r.interrupted for r in runs)
    status = _status(runs, results, coverage, missing)
    plan = {"merged": [s.index for s in shards], "count": count, "run": run_name, "missing": missing, "idle": idle,
            "fingerprint": planned.plan.get("fingerprint") if planned is not None else None,
            "shards": [{"index": s.index, "directory": str(s.directory), "run_id": s.run.run_id,
                        "exit_status": s.run.exit_status, "verified": s.verified, "error": s.run.error}
                       for s in shards]}
    record = RunRecord(runs[0].provenance, min(r.started for r in runs), max(r.finished for r in runs), status,
                       interrupted, run_name, error, coverage, plan, dict(shards[0].run.options),
                       faults=shards[0].run.faults, server_version=next(
                           (r.server_version for r in runs if r.server_version), None),
                       scope=_scope(runs))
    return record, results


def _scope(runs: Sequence[RunRecord]) -> dict[str, Any] | None:
    """The merged run's scope: the shards' selection (one, or the merge refused them), full only when
    every shard's was (a shard stopped by -x narrows the whole run); None when no shard records one."""
    scopes = [r.scope for r in runs if r.scope is not None]
    if not scopes:
        return None
    narrowed = list(dict.fromkeys(str(why) for s in scopes for why in s.get("narrowed") or ()))
    return {**scopes[0], "full": all(s.get("full") is not False for s in scopes), "narrowed": narrowed}


def _idle(planned: Shard | None, absent: Sequence[int]) -> list[int]:
    """The absent shards the plan gave nothing: no GPU node and no cluster-wide check (its ``homes``,
    recorded by every shard). Such a shard tested nothing, so a merge without it misses nothing (a
    shard left with nothing to test may write no report)."""
    homes = planned.plan.get("homes") if planned is not None else None
    if planned is None or planned.assignment is None or not isinstance(homes, Mapping):
        return []
    busy = {int(v) for v in planned.assignment.values()} | {
        h.get("shard") for h in homes.values() if isinstance(h, Mapping)}
    return [i for i in absent if i not in busy]


def _absent_homes(shards: Sequence[Shard], missing: Sequence[int], count: int) -> list[CheckResult]:
    """The cluster-wide checks a missing shard, or one that could not start, was home to (its plan's
    ``homes``, the same in every shard): each NOT TESTED, "in missing shard I", never silently absent."""
    absent = {i: f"in missing shard {i} of {count} (its reports were not given to the merge)" for i in missing}
    absent.update({s.index: f"in shard {s.index} of {count}, which could not start: {s.run.error}" for s in shards
                   if s.run.error})
    homes: Mapping[str, Any] = next((s.plan["homes"] for s in shards if isinstance(s.plan.get("homes"), Mapping)), {})
    out = []
    for test, home in homes.items():
        shard = home.get("shard") if isinstance(home, Mapping) else None
        if shard in absent and isinstance(home.get("check"), str):
            out.append(CheckResult(home["check"], None, NOT_TESTED, str(test), message=absent[shard]))
    return out


def _coverage(shards: Sequence[Shard], planned: Shard | None, missing: Sequence[int], count: int) -> Coverage | None:
    """The shards' coverage as one: every selected GPU node of the plan, each shard's untested nodes, and
    the nodes of a shard that is missing or could not start as not tested, saying which."""
    if planned is None or planned.assignment is None:
        return None
    fleet = [str(n) for n in planned.plan.get("fleet") or planned.assignment]
    untested: list[UntestedNode] = []
    kinds: dict[str, str] = {}
    absent = {i: "whose reports were not given to the merge (it did not finish, or its directory was left out)"
              for i in missing}
    for s in shards:
        if s.run.coverage is not None:
            untested += s.run.coverage.untested
            kinds.update(s.run.coverage.kinds)
        elif s.assignment is None or s.run.error:
            absent[s.index] = f"which could not start: {s.run.error or 'no results'}"
    for node in fleet:
        shard = int(planned.assignment[node])
        if shard in absent:
            untested.append(UntestedNode(node, MISSING_SHARD,
                                         f"{node} is in shard {shard} of {count}, {absent[shard]}"))
    return Coverage(tuple(fleet), tuple(untested), kinds)


def _status(runs: Sequence[RunRecord], results: Sequence[CheckResult], coverage: Coverage | None,
            missing: Sequence[int] = ()) -> int:
    """The merged run's exit status, as one run over the same nodes would have ended. A missing shard
    (merged with --allow-missing) never signs off: its nodes, or the cluster-wide checks it was home to,
    were not tested."""
    statuses = [r.exit_status for r in runs]
    if _FAILED in statuses or any(r.outcome == FAIL for r in results):
        return _FAILED
    if any(r.outcome == DEGRADED for r in results):
        return _DEGRADED
    if any(r.interrupted for r in runs) or any(s not in (0, _PARTIAL) for s in statuses) or missing or (
            coverage is not None and coverage.missing()):
        return _UNTESTED
    return _PARTIAL if _PARTIAL in statuses else 0


def junit_document(run: RunRecord, results: Sequence[CheckResult]) -> bytes:
    """The merged run's junit.xml, as a single run's (gpuconf.report.junit.finish_junit): named for
    gpuconf and the cluster, the run's properties (its verdict first) and the shards, the sign-off and
    untested-node cases, then a testcase per result as pytest names them, with its check, node and
    outcome as properties: FAIL and DEGRADED as failures typed "fail" and "degraded", NOT TESTED skipped."""
    from gpuconf.report.junit import (
        Case,
        case_id,
        failure_message,
        failure_type,
        run_properties,
        signoff_cases,
        suite_name,
        testsuites,
    )
    from gpuconf.report.model import cluster_verdict
    from gpuconf.report.writers import _iso

    cases = signoff_cases(run, results)
    for r in results:
        classname, name = case_id(r.nodeid)
        message = (r.message or "").strip()
        first = message.splitlines()[0] if message else ""
        said = tuple((k, v) for k, v in (("gpuconf.check", r.check), ("gpuconf.node", r.node),
                                         ("gpuconf.outcome", r.outcome)) if v is not None)
        if r.outcome in (FAIL, DEGRADED):
            cases.append(Case(name, classname, r.duration, "failure", failure_message(r.outcome, first),
                              failure_type(r.outcome), detail=message, properties=said))
        elif r.outcome == NOT_TESTED:
            cases.append(Case(name, classname, r.duration, "skipped", first, properties=said))
        else:
            cases.append(Case(name, classname, r.duration, properties=said))
    shard = run.shard or {}
    props = run_properties(run, cluster_verdict(run, results)) + [
        ("gpuconf.shards", f"merged {len(shard.get('merged', []))} of {shard.get('count')} shards of run "
                           f"{shard.get('run')}")]
    return testsuites(suite_name(run), cases, time=run.finished - run.started, timestamp=_iso(run.started),
                      properties=props)


def write_merged(run: RunRecord, results: Sequence[CheckResult], out: Path, *,
                 cncf_evidence: Path | None = None, cluster_uid: str | None = None) -> list[Path]:
    """The merged reports in ``out`` (created): report.json, report.md, report.html, junit.xml, the CNCF
    evidence where asked, then manifest.json over what was written (the evidence's own where it is
    outside ``out``)."""
    from gpuconf.report.manifest import manifest_document, write_manifest
    from gpuconf.report.writers import _atomic_write, write_reports

    if cncf_evidence is not None:  # before anything is written: no simulated evidence in a submission's layout
        from gpuconf.report.cncf import check_directory

        try:
            check_directory(run, cncf_evidence)
        except UsageError as exc:
            raise UsageError(f"gpuconf report merge: {exc}") from exc
    out.mkdir(parents=True, exist_ok=True)
    written = write_reports(run, results, out)
    written.append(_atomic_write(out / "junit.xml", junit_document(run, results).decode()))
    dirs = [out]
    if cncf_evidence is not None:
        import sys

        from gpuconf.report.cncf import CncfResult, terminal_note, write_evidence

        write_evidence(run, [CncfResult(r.cncf, r) for r in results if r.cncf], cncf_evidence,
                       options=dict(run.options))
        if (note := terminal_note(run, cncf_evidence, str(cncf_evidence))) is not None:
            sys.stderr.write(note + "\n")
        if not cncf_evidence.resolve().is_relative_to(out.resolve()):
            dirs.append(cncf_evidence)
    for directory in dirs:
        files = sorted(str(p.relative_to(directory)) for p in directory.rglob("*")
                       if p.is_file() and p.name != "manifest.json")
        write_manifest(directory, manifest_document(
            directory, files, run_id=run.run_id, provenance=run.provenance, simulated=run.simulated,
            cluster_uid=cluster_uid, started=run.started, finished=run.finished, exit_status=run.exit_status))
    return written
