"""CNCF Kubernetes AI Conformance evidence (``--cncf-evidence DIR``): which requirement each result
proves, each requirement's status, and the three files v1.37's hybrid verification attaches.

Pure mapping and writers; the plugin hands in the run's results. A suite test names the requirement
it proves with ``@pytest.mark.cncf("<id>")`` (recorded as the ``gpuconf.cncf`` property); the
requirements, their levels and upstream test names are in gpuconf/data/cncf_requirements.yaml.

What the files are:

* ``e2e.log``: one line per test (outcome, requirement, check, node, test id), then one line per
  requirement; for a person reading the submission.
* ``junit.xml``: one testcase per v1.37 requirement, named after the reference suite's test
  (kubernetes-sigs/ai-conformance, e.g. ``TestSecureAcceleratorAccess``) so evidence can point at
  ``file://results/junit.xml#TestSecureAcceleratorAccess``; a requirement that suite has no test for
  is named by its id. A failure if any of our checks behind it failed, skipped if none ran.
* ``results.json``: per requirement its id, level, status and the checks and nodes behind it. The
  layout is gpuconf's own (schema ``gpuconf.cncf-evidence/1``): the reference suite's results.json is
  ``go test -json`` output, which we do not imitate.
* All three say which selected GPU nodes the run tested (issue 25): e2e.log a ``coverage:`` line and
  one ``not tested:`` line per node left out, junit.xml the ``gpuconf.coverage`` and
  ``gpuconf.untested.<node>`` suite properties, results.json a ``coverage`` object (null without
  the accounting). A requirement's status is still its checks' (the nodes left out are named, not judged).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from gpuconf.report import junit
from gpuconf.report.model import DEGRADED, FAIL, NOT_TESTED, PASS, CheckResult, RunRecord

__all__ = ["CncfResult", "Requirement", "RequirementStatus", "evaluate", "requirement_ids", "requirements",
           "write_evidence"]

PROPERTY = "gpuconf.cncf"
RESULTS_SCHEMA = "gpuconf.cncf-evidence/1"
#: The requirement statuses, and the JUnit element each maps to.
PASSED, FAILED, SKIPPED = "pass", "fail", "skip"


@dataclass(frozen=True)
class Requirement:
    id: str
    area: str
    level: str  # MUST | SHOULD (for a retired one: its level in the last version that had it)
    checks: tuple[str, ...]
    upstream_test: str | None = None
    kar: str | None = None
    not_covered: str | None = None
    only_with: str | None = None  # the option without which our checks are no evidence for it
    only_with_reason: str | None = None
    retired_in: str | None = None

    @property
    def testcase(self) -> str:
        return self.upstream_test or self.id


@dataclass(frozen=True)
class CncfResult:
    """One test's result and the requirements it names."""

    requirements: tuple[str, ...]
    result: CheckResult


@dataclass(frozen=True)
class RequirementStatus:
    requirement: Requirement
    status: str  # PASSED | FAILED | SKIPPED
    reason: str
    results: tuple[CheckResult, ...] = field(default_factory=tuple)

    @property
    def checks(self) -> list[str]:
        return list(dict.fromkeys(r.check for r in self.results))

    @property
    def nodes(self) -> list[str]:
        return list(dict.fromkeys(r.node_key for r in self.results))


def _table() -> dict[str, Any]:
    from gpuconf.compat import tables

    return tables.load("cncf_requirements")


def version() -> str:
    return str(_table()["version"])


@cache
def requirements() -> tuple[Requirement, ...]:
    """The current version's requirements in table order, then the retired ones."""
    data = _table()
    out = []
    for row in data["requirements"]:
        only = row.get("only_with") or {}
        out.append(Requirement(str(row["id"]), str(row["area"]), str(row["level"]), tuple(row["checks"]),
                               row.get("upstream_test"), row.get("kar"), row.get("not_covered"),
                               only.get("option"), only.get("reason")))
    for row in data["retired"]:
        last = max(row["levels"], key=lambda v: tuple(int(p) for p in str(v).split(".")))
        out.append(Requirement(str(row["id"]), str(row["area"]), str(row["levels"][last]), tuple(row["checks"]),
                               retired_in=str(row["removed_in"])))
    return tuple(out)


def requirement_ids() -> set[str]:
    return {r.id for r in requirements()}


def from_properties(result: CheckResult, properties: Mapping[str, Any]) -> CncfResult | None:
    """The result as evidence, if its test named requirements (``gpuconf.cncf``: ids, comma-separated)."""
    ids = tuple(i for i in str(properties.get(PROPERTY) or "").split(",") if i)
    return CncfResult(ids, result) if ids else None


def evaluate(results: Iterable[CncfResult], *, options: Mapping[str, object], error: str | None = None
             ) -> list[RequirementStatus]:
    """Each requirement's status: fail if any check behind it failed (degraded included: the evidence
    shows a fault), pass if some passed and none failed, skip if none ran, the table says we have no
    check for it, the run could not start (``error``), or an option it needs was not given."""
    by_req: dict[str, list[CheckResult]] = {}
    for r in results:
        for rid in r.requirements:
            by_req.setdefault(rid, []).append(r.result)
    out = []
    for req in requirements():
        mine = tuple(by_req.get(req.id, ()))
        outcomes = {r.outcome for r in mine}
        if error is not None:
            out.append(RequirementStatus(req, SKIPPED, f"the run could not start: {error}", mine))
        elif req.not_covered and not mine:
            out.append(RequirementStatus(req, SKIPPED, f"not covered: {req.not_covered}"))
        elif not mine:
            out.append(RequirementStatus(req, SKIPPED, "not run: this run selected none of its checks ("
                                         + ", ".join(req.checks) + ")"))
        elif req.only_with and not options.get(req.only_with):
            out.append(RequirementStatus(req, SKIPPED, f"not evidence: {req.only_with_reason}", mine))
        elif outcomes & {FAIL, DEGRADED}:
            bad = [r for r in mine if r.outcome in (FAIL, DEGRADED)]
            out.append(RequirementStatus(req, FAILED, f"{len(bad)} of {len(mine)} checks failed: "
                                         + "; ".join(f"{r.check} on {r.node_key}" for r in bad), mine))
        elif PASS in outcomes:
            ran = [r for r in mine if r.outcome == PASS]
            out.append(RequirementStatus(req, PASSED, f"{len(ran)} checks passed on "
                                         f"{len({r.node_key for r in ran})} node(s)", mine))
        else:
            why = next((r.message for r in mine if r.message), None)
            out.append(RequirementStatus(req, SKIPPED, "no check ran" + (f": {why}" if why else ""), mine))
    return out


# --- writers ---------------------------------------------------------------------------------

_LOG_WORD = {PASS: "PASS", FAIL: "FAIL", DEGRADED: "FAIL", NOT_TESTED: "SKIP"}


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def e2e_log(run: RunRecord, results: Sequence[CncfResult], statuses: Sequence[RequirementStatus]) -> str:
    lines = [f"gpuconf CNCF Kubernetes AI Conformance v{version()} evidence",
             f"cluster: {run.provenance or 'none'}; run: {run.run_id or '-'}; started {_iso(run.started)}, "
             f"finished {_iso(run.finished)}; exit status {run.exit_status}"]
    if run.error:
        lines.append(f"the run could not start: {run.error}")
    if run.coverage is not None:
        lines.append(f"coverage: {run.coverage.line()}")
        lines += [f"not tested: {node} ({u.state}): {u.reason}" for node, u in run.coverage.missing().items()]
    lines.append("")
    for r in results:
        c = r.result
        lines.append(f"{_LOG_WORD.get(c.outcome, 'SKIP')}  {','.join(r.requirements)}  {c.check}  {c.node_key}  "
                     f"({c.nodeid})")
        if c.outcome != PASS and c.message:
            lines.extend(f"      {line}" for line in c.message.splitlines()[:6])
    lines.append("")
    for s in statuses:
        req = s.requirement
        tag = f"retired in {req.retired_in}" if req.retired_in else req.level
        lines.append(f"{s.status.upper():4}  {req.testcase} ({req.id}, {tag}): {s.reason}")
    return "\n".join(lines) + "\n"


def junit_xml(run: RunRecord, statuses: Sequence[RequirementStatus]) -> bytes:
    # Written by gpuconf.report.junit, not the junit-xml package (no longer a dependency), because
    # junit-xml cannot say three things this file says: the suite's time is the run's wall time
    # (junit-xml sums the cases' times, and a check proving two requirements would count twice); every
    # testcase has a time (junit-xml drops a time of 0, every skipped requirement's); <testsuites>
    # repeats the suite's name and skipped count (junit-xml writes neither there). It would also add
    # disabled= and type= attributes this file never had.
    def case(s: RequirementStatus) -> junit.Case:
        req = s.requirement
        out = (f"requirement {req.id} ({req.level}{', ' + req.kar if req.kar else ''})\n"
               + "".join(f"{r.outcome} {r.check} {r.node_key}\n" for r in s.results))
        time = sum(r.duration for r in s.results)
        if s.status == FAILED:
            return junit.Case(req.testcase, "gpuconf.cncf", time, "failure", s.reason, system_out=out,
                              detail="\n\n".join(f"{r.check} on {r.node_key}: {r.message or r.outcome}"
                                                  for r in s.results if r.outcome in (FAIL, DEGRADED)))
        if s.status == SKIPPED:
            return junit.Case(req.testcase, "gpuconf.cncf", time, "skipped", s.reason, system_out=out)
        return junit.Case(req.testcase, "gpuconf.cncf", time, system_out=out)

    return junit.testsuites(f"cncf-ai-conformance-v{version()}",
                            [case(s) for s in statuses if not s.requirement.retired_in],
                            time=run.finished - run.started, timestamp=_iso(run.started),
                            properties=(("gpuconf.provenance", run.provenance or ""),
                                        ("gpuconf.run_id", run.run_id or ""),
                                        *junit.junit_coverage_properties(run.coverage)))


def results_json(run: RunRecord, statuses: Sequence[RequirementStatus]) -> dict[str, Any]:
    def entry(s: RequirementStatus) -> dict[str, Any]:
        req = s.requirement
        return {"id": req.id, "area": req.area, "level": req.level, "status": s.status, "reason": s.reason,
                "testcase": req.testcase, "upstream_test": req.upstream_test, "kar": req.kar,
                "checks": s.checks, "nodes": s.nodes,
                "results": [{"check": r.check, "node": r.node_key, "outcome": r.outcome, "test": r.nodeid}
                            for r in s.results]}

    return {"schema": RESULTS_SCHEMA, "version": version(), "provenance": run.provenance, "run_id": run.run_id,
            "started": _iso(run.started), "finished": _iso(run.finished), "exit_status": run.exit_status,
            "error": run.error, "coverage": run.coverage.as_json() if run.coverage is not None else None,
            "requirements": [entry(s) for s in statuses if not s.requirement.retired_in],
            "retired": [dict(entry(s), removed_in=s.requirement.retired_in)
                        for s in statuses if s.requirement.retired_in]}


def write_evidence(run: RunRecord, results: Sequence[CncfResult], directory: Path, *,
                   options: Mapping[str, object]) -> list[RequirementStatus]:
    """Write e2e.log, junit.xml and results.json into ``directory`` (created); the statuses."""
    statuses = evaluate(results, options=options, error=run.error)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "e2e.log").write_text(e2e_log(run, results, statuses), encoding="utf-8")
    (directory / "junit.xml").write_bytes(junit_xml(run, statuses))
    (directory / "results.json").write_text(json.dumps(results_json(run, statuses), indent=2) + "\n",
                                            encoding="utf-8")
    return statuses
