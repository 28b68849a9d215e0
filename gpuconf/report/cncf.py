"""CNCF Kubernetes AI Conformance evidence (``--cncf-evidence DIR``): which requirement each result
proves, each requirement's status, and the files a v1.37 submission attaches, in the shapes the
reference suite (kubernetes-sigs/ai-conformance) writes them.

Pure mapping and writers; the plugin hands in the run's results. A suite test names the requirement
it proves with ``@pytest.mark.cncf("<id>")`` (recorded as the ``gpuconf.cncf`` property); the
requirements, their categories, levels, descriptions and upstream test names are in
gpuconf/data/cncf_requirements.yaml.

The results become Go tests, three levels deep, as ``go test`` would name them:

* ``<Parent>``: one per v1.37 requirement, named after the reference suite's test for it
  (``TestSecureAcceleratorAccess``), or ``Test<CamelCase id>`` where it has none (``TestGpuSharing``);
* ``<Parent>/<check>``: one per gpuconf check behind it (``TestSecureAcceleratorAccess/isolation.sees-only-allocated``);
* ``<Parent>/<check>/<node>``: one per node the check ran on (``.../h100-0``; ``(cluster)`` for a
  cluster-wide check). Names are rewritten as Go rewrites subtest names (a space becomes ``_``, a
  non-printable character its escape) and a repeated name gets ``#01``, ``#02``... as Go does.

A leaf passes, fails (FAIL or DEGRADED) or is skipped (NOT TESTED); a check level fails if a leaf
failed, passes if one passed, is skipped otherwise; the parent's status is the requirement's (see
``evaluate``): as in Go, a failing subtest fails it, and a parent whose subtests all skipped, or whose
checks are no evidence without an option, calls t.Skip after them. The retired ``dra_support`` is not
a v1.37 requirement: it is only in gpuconf-cncf.json.

The files (shapes checked against a real v1.37 submission, tests/data/real/cncf/, in
tests/test_cncf_shapes.py):

* ``junit.xml``: gotestsum's shape (``gpuconf.report.junit.gotestsum_testsuites``): one testsuite named
  after gpuconf's suites as a Go package, ``gpuconf/suites`` (not the reference suite's
  ``github.com/kubernetes-sigs/ai-conformance/test``: these are not its tests), every level a flat
  testcase in the order the tests started, a parent before its subtests as in the GKE file
  (``TestSecureAcceleratorAccess/isolation.sees-only-allocated/h100-0``), so
  ``file://.../junit.xml#TestSecureAcceleratorAccess`` finds the parent. The suite's properties carry
  the cluster, run id and coverage (``gpuconf.coverage``, ``gpuconf.untested.<node>``).
* ``results.json``: the ``go test -json`` event stream of the same tests (cmd/test2json): one object per
  line, fields in Go's order ``Time, Action, Package, Test, Elapsed, Output``; ``start``, then per test
  ``run``, ``output`` and ``pass``/``fail``/``skip`` with ``Elapsed`` (0 included), then the package's
  ``output`` lines and its ``pass``/``fail``. gpuconf does not keep when each test started: an event's
  Time is the run's start plus the elapsed time of the tests before it (capped at the run's end);
  Elapsed is each test's own duration, rounded to the 0.01 s ``go test`` prints.
* ``e2e.log``: the ``go test -v`` text of the same tests (``=== RUN   T``, log lines indented four
  spaces, ``--- PASS: T (0.50s)`` with subtests' result lines indented four spaces a level, then
  ``PASS`` or ``FAIL`` and ``ok  \tgpuconf/suites\t12.345s`` or ``FAIL\tgpuconf/suites\t...``). It keeps
  that name because it is ``go test -v`` output: a submission whose e2e.log held Ginkgo output renamed
  it e2e-results.log so that the validator would not parse it as a Go test artifact
  (https://github.com/cncf/k8s-ai-conformance/pull/143); the stored scripts/validate.go only checks
  that a ``file://`` evidence path exists, so which parser a newer validator applies is not verified. The lines before
  the first test (the run, the coverage, the nodes not tested, a requirement's coming MUST) are output
  of the test binary, as a TestMain would print.
* ``PRODUCT.fragment.yaml``: the upstream PRODUCT.yaml template (docs/AIConformance-1.37.yaml) filled
  in as far as the run can: every requirement under its category with its description and level, its
  ``status`` from what the run saw on every node (``RequirementStatus.product_status``, issue 36):
  ``Implemented`` when each of its checks that ran passed on some node, the nodes where one failed named
  in its notes (``Implemented; failing on h100-0: smoke.vector-add-every-gpu``: a broken node is a
  finding to fix before submitting, not a capability the platform lacks), ``Not Implemented`` when one
  of its checks passed on no node (what the run saw of it does not work anywhere), and for a requirement
  the run did not prove (skipped) ``status: ""`` and no evidence: whether it is implemented, partially,
  or N/A is the submitter's to say. ``evidence`` ``file://<dir>/junit.xml#<Parent>``,
  ``file://<dir>/results.json#<Parent>`` and ``file://<dir>/e2e.log``, where ``<dir>`` is the evidence
  directory from its ``v<major>.<minor>`` component on in a submission's layout (``--cncf-evidence
  v1.37/acme`` in a checkout of cncf/k8s-ai-conformance gives ``file://v1.37/acme/junit.xml#...``, as
  submissions cite it); elsewhere the links are relative to the evidence directory itself
  (``file://junit.xml#...``, never an absolute or working-directory path), a NOTE says they must be
  re-made in the layout, and the terminal says so in one line. ``kubernetesVersion`` is the cluster's
  (its API server's gitVersion, major.minor: ``v1.34``), or ``[Kubernetes Version]`` (a placeholder
  the validator rejects) with a NOTE when the run did not learn it; a NOTE also says when the cluster's
  minor is not the checklist's (the requirements are always the table's, v1.37). ``notes`` say what
  gpuconf saw, the coverage, and a coming MUST. The other metadata keeps the template's placeholders
  (and adds ``k8sConformanceUrl``, which the validator requires): the submission validator rejects a
  ``[placeholder]``, so the fragment cannot be submitted unfilled. Not written as PRODUCT.yaml so that
  a run into a submission's directory never overwrites the submitter's file.
* ``gpuconf-cncf.json``: gpuconf's own per-requirement record (schema ``gpuconf.cncf-evidence/2``): id,
  category, level, ``must_in``, status (its Go test's), reason, ``product_status``, ``product_note``,
  ``failing`` (node -> checks), parent test, checks, nodes and each result with its Go test name and
  pytest node id; the run's ``simulated``, ``server_version``, ``kubernetes_version``, ``links_from``
  (null outside a submission's layout), ``notes`` and ``coverage`` (null without the accounting); the
  retired requirements apart.

Every file says which selected GPU nodes the run tested (issue 25). A requirement's Go test is its
checks' (a failing subtest fails it, as in Go); its PRODUCT.yaml status is per node as above (the
nodes left out are named, not judged).

A simulated run's evidence is marked SIMULATED (the first line of e2e.log and results.json's output,
the fragment's first comment, ``simulated`` in gpuconf-cncf.json) and is never written into a
submission's layout: ``--simulate`` with ``--cncf-evidence v1.37/acme`` is a usage error at startup
(gpuconf.plugin.options), and :func:`write_evidence` and ``gpuconf report merge`` refuse it too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any, Literal

from gpuconf.errors import UsageError
from gpuconf.report import junit
from gpuconf.report.model import CLUSTER, DEGRADED, FAIL, NOT_TESTED, PASS, CheckResult, RunRecord

__all__ = ["CncfResult", "GoTest", "Requirement", "RequirementStatus", "check_directory", "evaluate", "go_tests",
           "kubernetes_version", "link_base", "requirement_ids", "requirements", "terminal_note", "write_evidence"]

PROPERTY = "gpuconf.cncf"
RESULTS_SCHEMA = "gpuconf.cncf-evidence/2"
#: gpuconf's suites as the Go package the evidence files name (not the reference suite's package).
PACKAGE = "gpuconf/suites"
#: The evidence files, by role.
JUNIT, EVENTS, LOG, FRAGMENT, OWN = "junit.xml", "results.json", "e2e.log", "PRODUCT.fragment.yaml", "gpuconf-cncf.json"
#: The requirement statuses, and the JUnit element each maps to.
PASSED, FAILED, SKIPPED = "pass", "fail", "skip"
#: A requirement's status in PRODUCT.yaml: values of the validator's (scripts/validate.go validStatuses);
#: gpuconf writes the first two, and leaves the status blank where it proved nothing.
IMPLEMENTED, NOT_IMPLEMENTED = "Implemented", "Not Implemented"
#: At most this many failing nodes are named in a requirement's notes (gpuconf-cncf.json names them all).
_NAMED_NODES = 10


@dataclass(frozen=True)
class Requirement:
    id: str
    area: str  # the category under spec in the upstream PRODUCT.yaml
    level: str  # MUST | SHOULD (for a retired one: its level in the last version that had it)
    checks: tuple[str, ...]
    upstream_test: str | None = None
    description: str = ""
    must_in: str | None = None  # the version that makes this SHOULD a MUST
    must_source: str | None = None
    kar: str | None = None
    not_covered: str | None = None
    only_with: str | None = None  # the option without which our checks are no evidence for it
    only_with_reason: str | None = None
    retired_in: str | None = None

    @property
    def testcase(self) -> str:
        """The parent Go test: the reference suite's test, else Test<CamelCase id>."""
        return self.upstream_test or "Test" + "".join(part.capitalize() for part in self.id.split("_"))

    @property
    def must_note(self) -> str | None:
        return (f"{self.id} is {self.level} in v{version()} and becomes a MUST in v{self.must_in}: {self.must_source}"
                if self.must_in else None)


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

    @property
    def failing(self) -> dict[str, list[str]]:
        """The nodes (``(cluster)`` for a cluster-wide check) where a check of it failed or degraded, each
        with those checks, in the order seen."""
        out: dict[str, list[str]] = {}
        for r in self.results:
            if r.outcome in (FAIL, DEGRADED) and r.check not in out.setdefault(r.node_key, []):
                out[r.node_key].append(r.check)
        return out

    @property
    def passed_nowhere(self) -> list[str]:
        """The checks of it that failed where they ran and passed on no node: what the run saw of the
        capability is that it does not work."""
        passed = {r.check for r in self.results if r.outcome == PASS}
        return [c for c in dict.fromkeys(c for checks in self.failing.values() for c in checks) if c not in passed]

    @property
    def product_status(self) -> str:
        """Its status in PRODUCT.yaml, from what the run saw on every node: Implemented when each of its
        checks that ran passed on some node (the nodes where one failed are a finding to fix, named in
        the notes, not a capability the platform lacks); Not Implemented when one of them passed on no
        node; blank when the run proved nothing (the submitter's to answer)."""
        if self.status == SKIPPED:
            return ""
        return NOT_IMPLEMENTED if self.passed_nowhere else IMPLEMENTED

    def product_note(self) -> str | None:
        """What the status rests on, when a check of it failed: ``Implemented; failing on h100-0:
        smoke.vector-add-every-gpu`` (a node to fix before submitting), or which checks passed nowhere."""
        failing = self.failing
        if self.status == SKIPPED or not failing:
            return None
        named = [f"{'cluster-wide' if node == CLUSTER else 'on ' + node}: {', '.join(checks)}"
                 for node, checks in list(failing.items())[:_NAMED_NODES]]
        more = len(failing) - len(named)
        where = "; ".join(named) + (f"; and on {more} more node(s) (gpuconf-cncf.json names them)" if more else "")
        if self.passed_nowhere:
            return f"{NOT_IMPLEMENTED}: {', '.join(self.passed_nowhere)} passed on no node; failing {where}"
        return (f"{IMPLEMENTED}; failing {where} (each of these checks passed on other nodes: nodes to fix before "
                "submitting, not a capability the platform lacks)")


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
        only, must = row.get("only_with") or {}, row.get("must_in") or {}
        out.append(Requirement(str(row["id"]), str(row["area"]), str(row["level"]), tuple(row["checks"]),
                               row.get("upstream_test"), str(row["description"]), must.get("version"),
                               must.get("source"), row.get("kar"), row.get("not_covered"), only.get("option"),
                               only.get("reason")))
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


# --- the Go tests -----------------------------------------------------------------------------

_LEAF = {PASS: PASSED, FAIL: FAILED, DEGRADED: FAILED, NOT_TESTED: SKIPPED}
_WORD = {PASSED: "PASS", FAILED: "FAIL", SKIPPED: "SKIP"}
#: At most this many lines of a check's message in a test's output.
_MESSAGE_LINES = 20


@dataclass(frozen=True)
class GoTest:
    """One test as ``go test`` would report it: its full name (``Parent/check/node``), status, elapsed
    seconds (as go test prints them, to 0.01 s), what it logged (one entry a t.Log call, which may span
    lines), and its subtests."""

    name: str
    status: str  # PASSED | FAILED | SKIPPED
    elapsed: float
    output: tuple[str, ...] = ()
    subtests: tuple[GoTest, ...] = ()

    def walk(self) -> Iterator[GoTest]:
        yield self
        for sub in self.subtests:
            yield from sub.walk()


def go_name(name: str) -> str:
    """A subtest name as Go's testing package rewrites it: white space becomes ``_``, a non-printable
    character its escape (as strconv.QuoteRune writes it)."""
    out = []
    for ch in name:
        if ch.isspace():
            out.append("_")
        elif not ch.isprintable():
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(ch)
    return "".join(out)


def _unique(name: str, seen: dict[str, int]) -> str:
    """Go's answer to a repeated subtest name: the first keeps it, the next are ``name#01``, ``#02``..."""
    count = seen.get(name, 0)
    seen[name] = count + 1
    return name if count == 0 else f"{name}#{count:02d}"


def _elapsed(seconds: float) -> float:
    return round(max(seconds, 0.0), 2)


def _lines(text: str, limit: int = _MESSAGE_LINES) -> tuple[str, ...]:
    lines = text.splitlines() or [""]
    return tuple(lines[:limit]) + ((f"... ({len(lines) - limit} more lines)",) if len(lines) > limit else ())


def _leaf(name: str, r: CheckResult) -> GoTest:
    status = _LEAF.get(r.outcome, SKIPPED)
    head = f"{r.nodeid}: {r.outcome}"
    lines = _lines(r.message) if r.message and status != PASSED else ()
    entry = "\n".join((f"{head}: {lines[0]}",) + lines[1:]) if lines else head
    return GoTest(name, status, _elapsed(r.duration), (entry,))


def _check_level(name: str, leaves: Sequence[GoTest]) -> GoTest:
    statuses = {leaf.status for leaf in leaves}
    status = FAILED if FAILED in statuses else PASSED if PASSED in statuses else SKIPPED
    output = ("no node ran this check",) if status == SKIPPED else ()
    return GoTest(name, status, _elapsed(sum(leaf.elapsed for leaf in leaves)), output, tuple(leaves))


def _layout(s: RequirementStatus) -> list[tuple[str, list[tuple[str, CheckResult]]]]:
    """The requirement's subtests: per check (in the order first seen) its name and its results' names."""
    by_check: dict[str, list[CheckResult]] = {}
    for r in s.results:
        by_check.setdefault(r.check, []).append(r)
    out, seen = [], dict[str, int]()
    for check, results in by_check.items():
        name = _unique(f"{s.requirement.testcase}/{go_name(check)}", seen)
        nodes_seen: dict[str, int] = {}
        out.append((name, [(_unique(f"{name}/{go_name(r.node_key)}", nodes_seen), r) for r in results]))
    return out


def _parent(s: RequirementStatus) -> GoTest:
    req = s.requirement
    checks = [_check_level(name, [_leaf(leaf, r) for leaf, r in leaves]) for name, leaves in _layout(s)]
    head = f"requirement {req.id} ({req.area}, {req.level}{', ' + req.kar if req.kar else ''})"
    note = s.product_note()
    output = ((head,) + ((req.must_note,) if req.must_note else ()) + ((f"PRODUCT.yaml: {note}",) if note else ())
              + (f"{_WORD[s.status]}: {s.reason}",))
    return GoTest(req.testcase, s.status, _elapsed(sum(c.elapsed for c in checks)), output, tuple(checks))


def go_tests(statuses: Sequence[RequirementStatus]) -> list[GoTest]:
    """The current version's requirements as Go tests (the retired ones are not v1.37 tests)."""
    return [_parent(s) for s in statuses if not s.requirement.retired_in]


def _package_status(run: RunRecord, tests: Sequence[GoTest]) -> str:
    """The package fails when a test failed, or when the run could not start (nothing was tested:
    ``ok`` would say otherwise)."""
    return FAILED if run.error or any(t.status == FAILED for t in tests) else PASSED


def _preamble(run: RunRecord, statuses: Sequence[RequirementStatus], base: str | None) -> list[str]:
    """The lines before the first test: a simulated run's banner, the run, why it could not start, the
    coverage, the cluster's version against the checklist's, coming MUSTs."""
    lines = [f"gpuconf: {simulated_banner(run)}"] if run.simulated else []
    lines.append(f"gpuconf: CNCF Kubernetes AI Conformance v{version()} evidence; cluster: {run.provenance or 'none'}; "
                 f"run: {run.run_id or '-'}; started {_iso(run.started)}, finished {_iso(run.finished)}; "
                 f"exit status {run.exit_status}")
    if run.error:
        lines.append(f"gpuconf: the run could not start: {run.error}")
    if run.coverage is not None:
        lines.append(f"gpuconf: coverage: {run.coverage.line()}")
        lines += [f"gpuconf: not tested: {node} ({u.state}): {u.reason}" for node, u in run.coverage.missing().items()]
    lines += [f"gpuconf: {note}" for note in version_notes(run, base)]
    lines += [f"gpuconf: {s.requirement.must_note}" for s in statuses
              if s.requirement.must_note and not s.requirement.retired_in]
    return lines


# --- where the evidence comes from and goes --------------------------------------------------------

#: A directory of a submission in a checkout of cncf/k8s-ai-conformance: ``v<major>.<minor>/<product>/``.
_LAYOUT = re.compile(r"v\d+\.\d+")
#: kubernetesVersion when the run did not learn the cluster's: a placeholder the validator rejects.
UNKNOWN_VERSION = "[Kubernetes Version]"


def simulated_banner(run: RunRecord) -> str:
    return (f"SIMULATED: evidence from a simulated cluster ({run.provenance}), not from a product: "
            "no evidence for a CNCF submission")


def kubernetes_version(server_version: str | None) -> str | None:
    """A submission's kubernetesVersion (``v1.34``) from the API server's gitVersion (``v1.34.2``,
    ``v1.37.0-gke.3503000``); None when unknown or not a version."""
    found = re.match(r"v?(\d+)\.(\d+)(?=$|[.+-])", server_version or "")
    return f"v{int(found[1])}.{int(found[2])}" if found else None


def version_notes(run: RunRecord, base: str | None) -> list[str]:
    """What the files say of the cluster's version against the checklist's (gpuconf's requirements
    table): unknown, or another minor; and a directory in another version's layout."""
    table, cluster = f"v{version()}", kubernetes_version(run.server_version)
    notes = []
    if cluster is None:
        why = ("the run could not start" if run.error else f"the API server's version {run.server_version!r} is "
               "not vMAJOR.MINOR" if run.server_version else "the run did not record the API server's version")
        notes.append(f"kubernetesVersion is left as {UNKNOWN_VERSION}: the cluster's Kubernetes version is unknown "
                     f"({why}); fill in its vMAJOR.MINOR (kubectl version: Server Version)")
    elif cluster != table:
        notes.append(f"the cluster runs Kubernetes {run.server_version}, and this evidence is for the {table} "
                     f"checklist (gpuconf's requirements table): a {table} submission needs a {table} cluster, and a "
                     f"{cluster} cluster answers the {cluster} checklist")
    layout = base.split("/")[0] if base else None
    if layout is not None and layout != table:
        notes.append(f"the evidence is in a {layout}/ directory, and is for the {table} checklist")
    return notes


def link_base(directory: Path) -> str | None:
    """How PRODUCT.yaml names the evidence directory in a submission's layout: from its
    ``v<major>.<minor>`` component on (``--cncf-evidence v1.37/acme`` in a checkout of
    cncf/k8s-ai-conformance gives ``v1.37/acme``, as submissions cite their files); None for a directory
    elsewhere: the links are then relative to the directory itself (an absolute or working-directory path
    would put local directory names into a public pull request, and match no submission's layout)."""
    parts = directory.resolve().parts
    marks = [i for i, part in enumerate(parts[:-1]) if _LAYOUT.fullmatch(part)]
    return "/".join(parts[marks[-1]:]) if marks else None


def links_note() -> str:
    return (f"the evidence links are relative to the directory these files are in, which is not in a submission's "
            f"layout (v{version()}/<product>/ in a checkout of cncf/k8s-ai-conformance): once the files are there, "
            f"re-make each file://<file> link as file://v{version()}/<product>/<file>")


def simulated_refusal(directory: Path) -> str | None:
    """Why a simulated run's evidence may not go into ``directory``: it is a submission's layout."""
    base = link_base(directory)
    return (f"{base} is a submission's layout (v<major>.<minor>/<product>/): a simulated run's evidence is never "
            "written there; give a directory outside it" if base is not None else None)


def check_directory(run: RunRecord, directory: Path) -> None:
    """UsageError (one line) for a simulated run's evidence going into a submission's layout."""
    why = simulated_refusal(directory) if run.simulated else None
    if why is not None:
        raise UsageError(f"--cncf-evidence {directory}: {why}")


def terminal_note(run: RunRecord, directory: Path, given: str) -> str | None:
    """The one line the terminal shows after writing the evidence into ``directory`` (``given`` as the
    user wrote it), if any: a simulated run's evidence is no evidence; links to re-make elsewhere."""
    if run.simulated:
        return (f"gpuconf: the CNCF evidence in {given} is from a simulated cluster: marked SIMULATED, it is no "
                "evidence for a submission")
    if link_base(directory) is None:
        return (f"gpuconf: warning: --cncf-evidence {given} is not under a v{version()}/<product>/ directory: its "
                "evidence links are relative to it and must be re-made in the submission's layout")
    return None


def _notes(run: RunRecord, base: str | None) -> list[str]:
    """The notes PRODUCT.fragment.yaml and gpuconf-cncf.json carry: the version notes, and where the
    links are from when the directory is not in a submission's layout."""
    return version_notes(run, base) + ([links_note()] if base is None else [])


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _rfc3339_nano(epoch: float) -> str:
    """As Go encodes a time.Time in JSON (RFC 3339Nano: a fraction of up to nine digits, trailing zeros
    dropped); gpuconf's clock is read to the microsecond, so at most six of them are not zero."""
    micros = round(epoch * 1_000_000)
    stamp = datetime.fromtimestamp(micros // 1_000_000, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f"{micros % 1_000_000:06d}".rstrip("0")
    return f"{stamp}.{fraction}Z" if fraction else f"{stamp}Z"


# --- results.json and e2e.log ------------------------------------------------------------------

def events(run: RunRecord, tests: Sequence[GoTest], preamble: Sequence[str]) -> list[dict[str, Any]]:
    """The ``go test -json`` events of the tests (each a dict in Go's field order), from which
    results.json, e2e.log (the Output fields, in order) and junit.xml are written."""
    clock = run.started
    end = max(run.finished, run.started)
    out: list[dict[str, Any]] = []

    def event(action: str, test: str | None = None, *, output: str | None = None,
              elapsed: float | None = None) -> None:
        e: dict[str, Any] = {"Time": _rfc3339_nano(min(clock, end)), "Action": action, "Package": PACKAGE}
        if test is not None:
            e["Test"] = test
        if elapsed is not None:
            e["Elapsed"] = elapsed
        if output is not None:
            e["Output"] = output
        out.append(e)

    def log(test: GoTest, entries: Sequence[str]) -> None:
        """As t.Log prints in -v mode: an entry's first line indented four spaces, the rest eight."""
        for entry in entries:
            for i, line in enumerate(entry.split("\n")):
                event("output", test.name, output=("    " if i == 0 else "        ") + line + "\n")

    def run_test(test: GoTest) -> None:
        nonlocal clock
        event("run", test.name)
        event("output", test.name, output=f"=== RUN   {test.name}\n")
        if not test.subtests:
            log(test, test.output)
            clock += test.elapsed
            return
        log(test, test.output[:-1])
        for sub in test.subtests:
            run_test(sub)
        log(test, test.output[-1:])

    def report(test: GoTest, depth: int) -> None:
        event("output", test.name,
              output=f"{'    ' * depth}--- {_WORD[test.status]}: {test.name} ({test.elapsed:.2f}s)\n")
        for sub in test.subtests:
            report(sub, depth + 1)
        event(test.status, test.name, elapsed=test.elapsed)

    event("start")
    for line in preamble:
        event("output", output=line + "\n")
    for test in tests:
        run_test(test)
        report(test, 0)
    clock = end
    status = _package_status(run, tests)
    wall = round(end - run.started, 3)
    event("output", output=f"{_WORD[status]}\n")
    event("output", output=f"{'ok  ' if status == PASSED else 'FAIL'}\t{PACKAGE}\t{wall:.3f}s\n")
    event(status, elapsed=wall)
    return out


def results_json(stream: Sequence[Mapping[str, Any]]) -> str:
    """The event stream: one compact JSON object a line, as ``go test -json`` writes it."""
    return "".join(json.dumps(e, separators=(",", ":"), ensure_ascii=False) + "\n" for e in stream)


def e2e_log(stream: Sequence[Mapping[str, Any]]) -> str:
    """The ``go test -v`` text: the events' output, in order (what test2json read it from)."""
    return "".join(str(e["Output"]) for e in stream if e["Action"] == "output")


# --- junit.xml ---------------------------------------------------------------------------------

_CASE_KIND: dict[str, Literal["passed", "failure", "skipped"]] = {
    PASSED: "passed", FAILED: "failure", SKIPPED: "skipped"}


def junit_xml(run: RunRecord, stream: Sequence[Mapping[str, Any]]) -> bytes:
    """gotestsum's junit.xml of the events: every test at every level a flat testcase, in the order
    they started (a parent before its subtests, as in the GKE submission's junit.xml), a failure or
    skip holding the test's own output."""
    ended = {str(e["Test"]): e for e in stream if e["Action"] in _CASE_KIND and "Test" in e}
    cases = []
    for name in (str(e["Test"]) for e in stream if e["Action"] == "run"):
        kind = _CASE_KIND[str(ended[name]["Action"])]
        output = "".join(str(o["Output"]) for o in stream if o["Action"] == "output" and o.get("Test") == name)
        cases.append(junit.Case(name, PACKAGE, float(ended[name]["Elapsed"]), kind,
                                detail=output if kind != "passed" else None))
    return junit.gotestsum_testsuites(PACKAGE, cases, time=run.finished - run.started,
                                      timestamp=_rfc3339_nano(run.started),
                                      properties=(("gpuconf.provenance", run.provenance or ""),
                                                  ("gpuconf.run_id", run.run_id or ""),
                                                  *junit.junit_coverage_properties(run.coverage)))


# --- PRODUCT.fragment.yaml ---------------------------------------------------------------------

#: The template's metadata keys and placeholders (docs/AIConformance-1.37.yaml), then k8sConformanceUrl,
#: which scripts/validate.go requires of every product; kubernetesVersion is the cluster's (else
#: UNKNOWN_VERSION).
METADATA = {"kubernetesVersion": None, "platformName": "[Platform Name]", "platformVersion": "[Platform Version]",
            "vendorName": "[Vendor Name]", "websiteUrl": "[Website URL]", "repoUrl": "[Repository URL]",
            "documentationUrl": "[Documentation URL]", "productLogoUrl": "[Documentation URL]",
            "description": "[Description]", "contactEmailAddress": "[Contact Email Address]",
            "k8sConformanceUrl": "[k8s-conformance submission URL]"}


def product_fragment(run: RunRecord, statuses: Sequence[RequirementStatus], base: str | None) -> str:
    import yaml

    coverage = f"; coverage: {run.coverage.line()}" if run.coverage is not None else ""
    where = f"{base}/" if base is not None else ""
    spec: dict[str, list[dict[str, Any]]] = {}
    for s in statuses:
        req = s.requirement
        if req.retired_in:
            continue
        proven = s.status != SKIPPED
        note = s.product_note()
        notes = ([note] if note else []) + [f"gpuconf {_WORD[s.status]}: {s.reason}" + (coverage if proven else "")]
        if not proven:
            notes.append("gpuconf did not prove it: set Implemented, Partially Implemented, Not Implemented or N/A "
                         "(N/A with a note) on your own evidence")
        if req.must_note:
            notes.append(req.must_note)
        spec.setdefault(req.area, []).append({
            "id": req.id, "description": req.description, "level": req.level, "status": s.product_status,
            "evidence": [f"file://{where}{JUNIT}#{req.testcase}", f"file://{where}{EVENTS}#{req.testcase}",
                         f"file://{where}{LOG}"] if proven else [],
            "notes": ". ".join(notes)})
    cluster = kubernetes_version(run.server_version) or UNKNOWN_VERSION
    doc = {"metadata": {k: (cluster if v is None else v) for k, v in METADATA.items()}, "spec": spec}
    header = "".join(f"# {line}\n" for line in [
        *((simulated_banner(run),) if run.simulated else ()),
        f"Kubernetes AI Conformance Checklist - v{version()}: a fragment written by gpuconf --cncf-evidence",
        f"from run {run.run_id or '-'} on {run.provenance or 'no cluster'}, {_iso(run.started)}.",
        "Fill in every [placeholder], review each requirement, and merge it into your PRODUCT.yaml.",
        "status: Implemented = each of gpuconf's checks for it that ran passed on some node (the nodes where one",
        "failed are named in its notes: fix them before submitting); Not Implemented = one of them passed on no",
        "node; blank = gpuconf did not prove it (see its notes). The evidence links point into the files written",
        "next to this one.",
        *(f"NOTE: {note}" for note in _notes(run, base))])
    return header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)


# --- gpuconf-cncf.json -------------------------------------------------------------------------

def gpuconf_json(run: RunRecord, statuses: Sequence[RequirementStatus], base: str | None) -> dict[str, Any]:
    def entry(s: RequirementStatus) -> dict[str, Any]:
        req = s.requirement
        names = {id(r): leaf for _, leaves in _layout(s) for leaf, r in leaves} if not req.retired_in else {}
        return {"id": req.id, "area": req.area, "level": req.level, "must_in": req.must_in,
                "must_in_source": req.must_source, "status": s.status, "reason": s.reason,
                "product_status": s.product_status, "product_note": s.product_note(), "failing": s.failing,
                "testcase": req.testcase, "upstream_test": req.upstream_test, "kar": req.kar, "checks": s.checks,
                "nodes": s.nodes,
                "results": [{"check": r.check, "node": r.node_key, "outcome": r.outcome, "test": r.nodeid,
                             "go_test": names.get(id(r))} for r in s.results]}

    return {"schema": RESULTS_SCHEMA, "version": version(), "package": PACKAGE, "provenance": run.provenance,
            "simulated": run.simulated, "server_version": run.server_version,
            "kubernetes_version": kubernetes_version(run.server_version), "links_from": base,
            "notes": ([simulated_banner(run)] if run.simulated else []) + _notes(run, base),
            "run_id": run.run_id, "started": _iso(run.started), "finished": _iso(run.finished),
            "exit_status": run.exit_status, "error": run.error,
            "coverage": run.coverage.as_json() if run.coverage is not None else None,
            "requirements": [entry(s) for s in statuses if not s.requirement.retired_in],
            "retired": [dict(entry(s), removed_in=s.requirement.retired_in)
                        for s in statuses if s.requirement.retired_in]}


def write_evidence(run: RunRecord, results: Sequence[CncfResult], directory: Path, *,
                   options: Mapping[str, object]) -> list[RequirementStatus]:
    """Write junit.xml, results.json, e2e.log, PRODUCT.fragment.yaml and gpuconf-cncf.json into
    ``directory`` (created); the statuses. UsageError, before anything is written, for a simulated run's
    evidence going into a submission's layout (check_directory)."""
    check_directory(run, directory)
    base = link_base(directory)
    statuses = evaluate(results, options=options, error=run.error)
    tests = go_tests(statuses)
    stream = events(run, tests, _preamble(run, statuses, base))
    directory.mkdir(parents=True, exist_ok=True)
    (directory / JUNIT).write_bytes(junit_xml(run, stream))
    (directory / EVENTS).write_text(results_json(stream), encoding="utf-8")
    (directory / LOG).write_text(e2e_log(stream), encoding="utf-8")
    (directory / FRAGMENT).write_text(product_fragment(run, statuses, base), encoding="utf-8")
    (directory / OWN).write_text(json.dumps(gpuconf_json(run, statuses, base), indent=2) + "\n", encoding="utf-8")
    return statuses
