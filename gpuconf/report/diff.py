"""Compare two runs' report.json files: what newly fails, what was fixed, what still fails, which
checks appeared or disappeared, which node verdicts changed and which measured figures regressed.

Pure apart from :func:`load_report`: a report is read into a :class:`Report`, two of them are compared
by :func:`diff_reports` into a :class:`ReportDiff`, and the renderers turn that into text, JSON or
Markdown. The diff covers what report.json holds: outcomes per check and node, per-node verdicts, the
NCCL busbw curves and the measured figures of :data:`METRICS` (``extra.metrics``: the smoke check's
slowest-GPU kernel time, the whole-node probe pod's image pull time and time to Running, the bandwidth
check's slowest-GPU host-device copy bandwidth), each
compared in the direction that is worse, beyond a relative tolerance and an absolute floor. A run's
coverage (``extra.gpuconf.coverage``: which selected GPU nodes it tested) is read when present: a run
that left nodes untested says so in its line, and a node the new run did not test carries its reason.

Lost coverage (issue 36) gates as a regression does, with its own exit status: a node the old run tested
that the new one did not, and a check that ran on a node in the old run (pass, degraded or fail) and
is NOT TESTED or absent there in the new one. A node the new run does not know at all (not among its
selected GPU nodes, no result on it) has left the cluster or its selection: its verdict change is
listed, not gated. The cluster's identity comes from the manifest.json beside each report.json (the
kube-system namespace's UID), else from the provenance: runs of different clusters are compared with
a warning (:func:`different_clusters`).
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpuconf.errors import EXIT_OK, EXIT_REJECTED, UsageError
from gpuconf.outcomes import EXIT_INCOMPLETE
from gpuconf.report.manifest import MANIFEST
from gpuconf.report.model import CLUSTER, DEGRADED, FAIL, NOT_TESTED, PASS, Coverage, worst

__all__ = ["ABSENT", "EXIT_LOST_COVERAGE", "FAIL_ON", "LARGE_MESSAGE", "METRICS", "NOT_COMPARED", "Change",
           "CheckCount", "LostNode", "MetricChange", "MetricSpec", "NodeChange", "Report", "ReportDiff",
           "different_clusters", "diff_reports", "exit_status", "fail_on_gates", "large_message_busbw", "load_report",
           "parse_report", "render_json", "render_markdown", "render_text", "warning_line"]

#: The outcome of a check (or the verdict of a node) a report does not hold at all.
ABSENT = "absent"
#: Messages of at least this many bytes make the "large-message" busbw figure the diff compares.
LARGE_MESSAGE = 2**30
#: What --fail-on may name (comma-separated): new failures and metric regressions exit 1, lost
#: coverage exits EXIT_LOST_COVERAGE when nothing else selected gates; ``any`` is all three.
FAIL_ON = ("failures", "regressions", "coverage", "any")
#: The suite's INCOMPLETE status, with the same meaning here: something the old run tested was not tested.
EXIT_LOST_COVERAGE = EXIT_INCOMPLETE


@dataclass(frozen=True)
class MetricSpec:
    """How a measured figure of report.json (``extra.metrics``) is compared."""

    unit: str
    higher_is_worse: bool
    #: A change smaller than this (in ``unit``) is noise, whatever the tolerance says.
    floor: float
    digits: int  # decimals in a line of the diff
    #: Compared only when this other figure is present in both runs or in neither (else they measured different things).
    alike: str | None = None


#: The figures the diff compares (names as gpuconf.kit.record_metrics records them). NCCL busbw,
#: where lower is worse, is compared from the curves. The floors keep noise from gating CI:
#: - kernel_ms is the vector-add kernel of a few tens of microseconds on an idle GPU; launch jitter and
#:   clock ramp-up move it by microseconds run to run, so a change under 0.01 ms (10 us) is not a finding.
#: - pull_s and to_running_s: the API stamps creation and container start in whole seconds and a
#:   registry's latency wanders by a second or so, so a change under 1 s is below what can be measured.
#: to_running_s includes the pull: it is compared only between runs that both pulled the image or both
#: found it present (pull_s present in both or in neither), else a warm cache would pass for a speed-up.
#: - h2d_gbps and d2h_gbps: the node's slowest GPU on the whole-node probe's pinned copies (lower is
#:   worse); healthy siblings of one node differ by up to 2.5 GB/s in public samples (8 x RTX 4090:
#:   23.90-26.38 GB/s), so a change under 1 GB/s is not a finding.
METRICS: Mapping[str, MetricSpec] = {
    "kernel_ms": MetricSpec("ms", higher_is_worse=True, floor=0.01, digits=3),
    "pull_s": MetricSpec("s", higher_is_worse=True, floor=1.0, digits=2),
    "to_running_s": MetricSpec("s", higher_is_worse=True, floor=1.0, digits=2, alike="pull_s"),
    "h2d_gbps": MetricSpec("gbps", higher_is_worse=False, floor=1.0, digits=2),
    "d2h_gbps": MetricSpec("gbps", higher_is_worse=False, floor=1.0, digits=2),
}
#: What a nightly comparison might want but the diff does not compare (said in --json and the docs).
NOT_COMPARED = (
    "per-GPU kernel time: only each node's slowest GPU (kernel_ms) is compared; the per-GPU figures reach junit.xml "
    "(gpuconf.gpu properties)",
    "image pull time (pull_s) where either run found the image already present on the node: nothing was pulled",
    "time to Running (to_running_s) between a run that pulled the image and one that found it present",
    "pull time and time to Running of pods other than the whole-node probe: no suite records them",
    "changes below the absolute floors: 0.01 ms of kernel time, 1 s of pull time or time to Running",
)
_FAILING = (FAIL, DEGRADED)
Key = tuple[str, str]  # (check id, node key)


@dataclass(frozen=True)
class Report:
    """What one report.json says, reduced to what a comparison needs."""

    source: str
    run_id: str | None
    provenance: str | None
    started: str | None
    outcomes: Mapping[Key, str]  # the worst outcome of each (check, node)
    messages: Mapping[Key, str]  # the first line of a failing result's message
    curves: Mapping[Key, tuple[tuple[int, float], ...]]
    nodes: Mapping[str, str]  # per-node verdicts as the run wrote them
    error: str | None = None  # why the run could not start (then it holds no results)
    interrupted: bool = False
    metrics: Mapping[Key, Mapping[str, float]] = field(default_factory=dict)  # extra.metrics by (check, node)
    #: Which selected GPU nodes the run tested (extra.gpuconf.coverage); None in a report without it.
    coverage: Coverage | None = None
    #: The cluster's kube-system namespace UID, from the manifest.json of the run beside report.json.
    cluster_uid: str | None = None
    #: Why the run selected less than the sign-off's scope (extra.gpuconf.scope.narrowed: -m, -k, suites).
    narrowed: tuple[str, ...] = ()

    @property
    def simulated(self) -> bool:
        return bool(self.provenance and self.provenance.startswith("simulated:"))

    @property
    def label(self) -> str:
        state = (f"NOT STARTED: {self.error}" if self.error else None, "INTERRUPTED" if self.interrupted else None,
                 self.coverage.line() if self.coverage is not None and self.coverage.missing() else None,
                 f"PARTIAL: {'; '.join(self.narrowed)}" if self.narrowed else None)
        parts = [self.source] + [p for p in (self.run_id and f"run {self.run_id}", self.provenance, self.started,
                                             *state) if p]
        return ", ".join(" ".join(p.split()) for p in parts)


@dataclass(frozen=True)
class Change:
    """One (check, node) whose outcome is worth a line."""

    check: str
    node: str
    old: str
    new: str
    message: str | None = None


@dataclass(frozen=True)
class CheckCount:
    """A check id present in only one of the two reports, with its outcomes counted."""

    check: str
    outcomes: Mapping[str, int]


@dataclass(frozen=True)
class NodeChange:
    node: str
    old: str
    new: str
    reason: str | None = None  # why the new run did not test the node (its coverage), if it did not


@dataclass(frozen=True)
class LostNode:
    """A node (or the cluster's own checks) where the new run tested less than the old one did."""

    node: str
    old: str  # the node's verdict in the old run
    new: str  # in the new one (ABSENT where it has none)
    #: The new run did not test the node at all (NOT TESTED, untested in its coverage, or selected and
    #: without a result); else it tested the node but not every check that ran there before.
    untested: bool
    reason: str | None  # the new run's word on why (its coverage, or why it did not start)
    checks: tuple[Change, ...]  # each check that ran here in the old run and not in the new one


@dataclass(frozen=True)
class MetricChange:
    check: str
    node: str
    metric: str
    unit: str
    old: float
    new: float
    digits: int = 1  # decimals in a line of the diff

    @property
    def change(self) -> float:
        """Relative change, new against old (-0.2 = 20% lower); infinite from a baseline of 0."""
        if not self.old:
            return 0.0 if self.new == self.old else math.copysign(math.inf, self.new)
        return (self.new - self.old) / self.old


@dataclass(frozen=True)
class ReportDiff:
    old: Report
    new: Report
    tolerance: float
    new_failures: list[Change] = field(default_factory=list)
    fixed: list[Change] = field(default_factory=list)
    still_failing: list[Change] = field(default_factory=list)
    no_longer_tested: list[Change] = field(default_factory=list)
    checks_appeared: list[CheckCount] = field(default_factory=list)
    checks_disappeared: list[CheckCount] = field(default_factory=list)
    node_changes: list[NodeChange] = field(default_factory=list)
    metrics_compared: int = 0
    regressions: list[MetricChange] = field(default_factory=list)
    #: Figures both runs hold whose direction the diff does not know (not in METRICS): not compared.
    unknown_metrics: list[str] = field(default_factory=list)
    lost_coverage: list[LostNode] = field(default_factory=list)
    #: Why the two runs look like runs of different clusters (different_clusters), or None.
    different_clusters: str | None = None


# --- reading ------------------------------------------------------------------------------------


def load_report(path: str | Path) -> Report:
    """A report.json file, or a run directory holding one (through links: ``reports/latest``), or a
    report directory whose newest run its pointer names (the ``latest`` link, else the ``LATEST`` file
    gpuconf writes where links cannot be made); bad input raises UsageError (one line). The cluster's
    UID comes from the run's manifest.json beside report.json, where it names the same run."""
    given = Path(path)
    if given.is_symlink() and not given.exists():
        raise UsageError(f"{given}: a link to {os.readlink(given)}, which does not exist")
    target = given / "report.json" if given.is_dir() else given
    if given.is_dir() and not target.is_file():
        latest = _latest(given)
        if latest is None:
            raise UsageError(f"{given}: a directory without report.json")
        target = latest
    try:
        text = target.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise UsageError(f"{target}: no such file") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{target}: cannot read: {exc}") from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{target}: not JSON: {exc}") from exc
    report = parse_report(doc, source=str(target))
    return replace(report, cluster_uid=_cluster_uid(target.parent, report.run_id))


def _latest(directory: Path) -> Path | None:
    """The report.json of the newest run in a report directory that holds one directory per run
    (gpuconf.plugin.rundir): ``latest/``, else the run the ``LATEST`` file names."""
    if (directory / "latest" / "report.json").is_file():
        return directory / "latest" / "report.json"
    try:
        name = (directory / "LATEST").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    target = directory / name / "report.json"
    return target if name and "/" not in name and name not in (".", "..") and target.is_file() else None


def _cluster_uid(directory: Path, run_id: str | None) -> str | None:
    """The kube-system UID the run's manifest.json in ``directory`` names; None without a readable
    manifest of that run (then the provenance identifies the cluster; `report verify` judges manifests)."""
    from gpuconf.report.manifest import read_manifest

    if not (directory / MANIFEST).is_file():
        return None
    try:
        manifest = read_manifest(directory)
    except UsageError:
        return None
    if manifest.get("run_id") != run_id:
        return None  # a manifest of another run: report.json was copied beside it
    return _text((manifest.get("cluster") or {}).get("kube_system_uid"))


def _not_gpuconf(source: str, why: str) -> UsageError:
    return UsageError(f"{source}: not a gpuconf report ({why})")


def _curve(value: Any) -> tuple[tuple[int, float], ...]:
    if not isinstance(value, list):
        return ()
    out = []
    for point in value:
        if (not isinstance(point, list) or len(point) != 2
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in point)):
            return ()
        out.append((int(point[0]), float(point[1])))
    return tuple(out)


def _metrics(value: Any) -> dict[str, float]:
    if not isinstance(value, dict):
        return {}
    return {str(k): float(v) for k, v in value.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


def parse_report(doc: Any, *, source: str) -> Report:
    """A parsed report.json (CTRF with gpuconf's section in ``extra.gpuconf``, see gpuconf.report.writers)."""
    from gpuconf.report.writers import run_meta

    if not isinstance(doc, dict):
        raise _not_gpuconf(source, "not a JSON object")
    meta, results = run_meta(doc), doc.get("results")
    if meta is None:
        raise _not_gpuconf(source, "no 'extra.gpuconf' section")
    if not isinstance(results, dict) or not isinstance(results.get("tests"), list):
        raise _not_gpuconf(source, "no results.tests list")
    seen: dict[Key, list[str]] = {}
    messages: dict[Key, str] = {}
    curves: dict[Key, tuple[tuple[int, float], ...]] = {}
    metrics: dict[Key, dict[str, float]] = {}
    for index, test in enumerate(results["tests"]):
        if not isinstance(test, dict):
            raise _not_gpuconf(source, f"results.tests[{index}] is not an object")
        extra: dict[str, Any] = test["extra"] if isinstance(test.get("extra"), dict) else {}
        check = extra.get("check") or test.get("name")
        outcome = extra.get("outcome")
        if not isinstance(check, str) or outcome not in (PASS, DEGRADED, FAIL, NOT_TESTED):
            raise _not_gpuconf(source, f"results.tests[{index}] has no gpuconf check and outcome")
        node = extra.get("node")
        key = (check, str(node) if node else CLUSTER)
        seen.setdefault(key, []).append(outcome)
        message = test.get("message")
        if outcome != PASS and isinstance(message, str) and message.strip() and key not in messages:
            messages[key] = message.strip().splitlines()[0]
        curve = _curve(extra.get("curve"))
        if curve and key not in curves:
            curves[key] = curve
        for name, value in _metrics(extra.get("metrics")).items():
            metrics.setdefault(key, {}).setdefault(name, value)  # the first test of a (check, node) wins
    nodes = meta.get("nodes")
    scope = meta.get("scope")
    narrowed = scope.get("narrowed") if isinstance(scope, dict) else None
    narrowed = narrowed if isinstance(narrowed, list) else []
    return Report(source=source, run_id=_text(meta.get("run_id")), provenance=_text(meta.get("provenance")),
                  started=_text(meta.get("started")), outcomes={k: worst(v) for k, v in seen.items()},
                  messages=messages, curves=curves,
                  nodes={str(k): str(v) for k, v in nodes.items()} if isinstance(nodes, dict) else {},
                  error=_text(meta.get("error")), interrupted=meta.get("interrupted") is True, metrics=metrics,
                  coverage=Coverage.from_json(meta.get("coverage")), narrowed=tuple(str(n) for n in narrowed))


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


# --- comparing ----------------------------------------------------------------------------------


def large_message_busbw(curve: Sequence[tuple[int, float]]) -> tuple[float, str] | None:
    """The busbw figure a curve is compared on, and what it is: the mean over messages of at least
    1 GiB (where NCCL reaches its bus bandwidth), or the largest message's value when none is that big."""
    if not curve:
        return None
    large = [y for x, y in curve if x >= LARGE_MESSAGE]
    if large:
        return sum(large) / len(large), "busbw >= 1 GiB"
    size, value = max(curve)
    return value, f"busbw at {_size(size)}"


def _size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} B"


def _counted(outcomes: Iterable[str]) -> dict[str, int]:
    counts = Counter(outcomes)
    return {o: counts[o] for o in (FAIL, DEGRADED, PASS, NOT_TESTED) if counts[o]}


def diff_reports(old: Report, new: Report, *, tolerance: float = 0.1) -> ReportDiff:
    """Compare ``new`` against ``old``; a figure regresses when it is worse by more than ``tolerance``."""
    lost = _lost_coverage(old, new)
    out = ReportDiff(old=old, new=new, tolerance=tolerance, lost_coverage=lost,
                     no_longer_tested=[c for n in lost for c in n.checks],
                     different_clusters=different_clusters(old, new))
    old_checks, new_checks = {c for c, _ in old.outcomes}, {c for c, _ in new.outcomes}
    for key in sorted(set(old.outcomes) | set(new.outcomes), key=lambda k: (k[1], k[0])):
        before, after = old.outcomes.get(key, ABSENT), new.outcomes.get(key, ABSENT)
        change = Change(key[0], key[1], before, after, new.messages.get(key) or _untested_reason(new, key[1]))
        if after in _FAILING:
            # DEGRADED -> FAIL is a failure the old run did not have: it gates as a new one
            worse = before not in _FAILING or (before, after) == (DEGRADED, FAIL)
            (out.new_failures if worse else out.still_failing).append(change)
        elif before in _FAILING and after == PASS:
            out.fixed.append(change)
    for check in sorted(new_checks - old_checks):
        out.checks_appeared.append(CheckCount(check, _counted(o for k, o in new.outcomes.items() if k[0] == check)))
    for check in sorted(old_checks - new_checks):
        out.checks_disappeared.append(CheckCount(check, _counted(o for k, o in old.outcomes.items() if k[0] == check)))
    checks_by_node = _by_node(new)
    for node in list(old.nodes) + [n for n in new.nodes if n not in old.nodes]:
        before, after = old.nodes.get(node, ABSENT), new.nodes.get(node, ABSENT)
        if before != after:
            gone = "not among the new run's GPU nodes" if _unknown(new, checks_by_node.get(node, {}), node) else None
            out.node_changes.append(NodeChange(node, before, after, _untested_reason(new, node) or gone))
    compared = 0
    for key in sorted(set(old.curves) & set(new.curves), key=lambda k: (k[1], k[0])):
        if not key[0].startswith("nccl."):
            continue
        a, b = large_message_busbw(old.curves[key]), large_message_busbw(new.curves[key])
        if a is None or b is None or a[1] != b[1] or a[0] <= 0:
            continue  # different message ranges are not the same figure
        compared += 1
        metric = MetricChange(key[0], key[1], a[1], "GB/s", a[0], b[0])
        if metric.change < -tolerance:  # lower busbw is worse
            out.regressions.append(metric)
    unknown: set[str] = set()
    for key in sorted(set(old.metrics) & set(new.metrics), key=lambda k: (k[1], k[0])):
        was, now = old.metrics[key], new.metrics[key]
        for name in sorted(set(was) & set(now)):
            spec = METRICS.get(name)
            if spec is None:
                unknown.add(name)
                continue
            if spec.alike is not None and (spec.alike in was) != (spec.alike in now):
                continue
            compared += 1
            if _worse(spec, was[name], now[name], tolerance):
                out.regressions.append(MetricChange(key[0], key[1], name, spec.unit, was[name], now[name],
                                                    spec.digits))
    return replace(out, metrics_compared=compared, unknown_metrics=sorted(unknown))


def _untested_reason(report: Report, node: str) -> str | None:
    return report.coverage.reason(node) if report.coverage is not None else None


_RAN = (PASS, DEGRADED, FAIL)


def _by_node(report: Report) -> dict[str, dict[str, str]]:
    """Each node's checks and their outcomes."""
    out: dict[str, dict[str, str]] = {}
    for (check, node), outcome in report.outcomes.items():
        out.setdefault(node, {})[check] = outcome
    return out


def _verdict(report: Report, checks: Mapping[str, str], node: str) -> str:
    """The node's verdict as the run wrote it, else the worst of its checks (ABSENT without any)."""
    if node in report.nodes:
        return report.nodes[node]
    return worst(checks.values()) if checks else ABSENT


def _tested(report: Report, checks: Mapping[str, str], node: str) -> bool:
    """The run tested ``node``: its verdict is one a check gave, and its coverage does not list it untested."""
    if report.coverage is not None and node in report.coverage.missing():
        return False
    return _verdict(report, checks, node) in _RAN


def _unknown(report: Report, checks: Mapping[str, str], node: str) -> bool:
    """``node`` is not a node of the run at all: not among its selected GPU nodes, no verdict, no result.
    Only a run that recorded its selection (coverage) can say so: without it nothing is known of a node."""
    return (report.coverage is not None and node != CLUSTER and node not in report.coverage.selected
            and node not in report.nodes and not checks)


def _why_not_tested(report: Report, node: str) -> str | None:
    """The run's own word on why it did not test ``node``: its coverage, or why it never got that far."""
    if reason := _untested_reason(report, node):
        return reason
    if report.error:
        return f"the run did not start: {' '.join(report.error.split())}"
    return "the run was interrupted" if report.interrupted else None


def _lost_coverage(old: Report, new: Report) -> list[LostNode]:
    """Node by node (the old run's order), what the old run tested that the new one did not."""
    was, now = _by_node(old), _by_node(new)
    new_checks = {c for c, _ in new.outcomes}
    gone = (f"not selected by the new run ({'; '.join(new.narrowed)})" if new.narrowed
            else "the new run has no result of this check on any node")
    out = []
    for node in dict.fromkeys([*old.nodes, *sorted(was)]):
        before, after = was.get(node, {}), now.get(node, {})
        if _unknown(new, after, node):
            continue  # gone from the cluster or the run's selection: a node verdict change, not lost coverage
        untested = _tested(old, before, node) and not _tested(new, after, node)
        reason = _why_not_tested(new, node)
        checks = []
        for check in sorted(c for c, o in before.items() if o in _RAN and after.get(c, ABSENT) in (NOT_TESTED, ABSENT)):
            elsewhere = check in new_checks or untested  # else the check is gone from the run: say so
            why = new.messages.get((check, node)) or (reason if elsewhere else gone)
            checks.append(Change(check, node, before[check], after.get(check, ABSENT), why))
        if untested or checks:
            out.append(LostNode(node, _verdict(old, before, node), _verdict(new, after, node), untested, reason,
                                tuple(checks)))
    return out


def different_clusters(old: Report, new: Report) -> str | None:
    """Why the two runs look like runs of different clusters ("kube-system uid A vs B", or their
    provenances), or None. The kube-system namespace's UID lives as long as the cluster and decides
    where both runs' manifests name one; a simulated cluster lives one run (a new UID each time), so
    simulated runs are told apart by their provenance (profile and faults), as are runs without a UID."""
    if not old.simulated and not new.simulated and old.cluster_uid and new.cluster_uid:
        same = old.cluster_uid == new.cluster_uid
        return None if same else f"kube-system uid {old.cluster_uid} vs {new.cluster_uid}"
    if old.provenance and new.provenance and old.provenance != new.provenance:
        return f"{old.provenance} vs {new.provenance}"
    return None


def _worse(spec: MetricSpec, old: float, new: float, tolerance: float) -> bool:
    """Worse by more than the floor and by more than ``tolerance`` of the old figure (any amount beyond
    the floor from a baseline of 0, where a fraction of it says nothing)."""
    loss = new - old if spec.higher_is_worse else old - new
    if loss <= spec.floor:
        return False
    return old <= 0 or loss / old > tolerance


def fail_on_gates(fail_on: str) -> tuple[str, ...]:
    """What ``--fail-on`` gates on: "failures", "regressions" and "coverage", comma-separated, or "any"
    (all three); UsageError for anything else."""
    names = [n.strip() for n in fail_on.split(",")]
    unknown = [n for n in names if n not in FAIL_ON]
    if unknown:
        raise UsageError(f"--fail-on takes {', '.join(FAIL_ON)} (comma-separated), not {fail_on!r}")
    return tuple(g for g in FAIL_ON[:-1] if g in names or "any" in names)


def exit_status(diff: ReportDiff, fail_on: str = "any") -> int:
    """1 when something gated regressed: a new failure (``failures``: a check failing or degraded where
    it was not, or failing where it was degraded) or a metric regression (``regressions``), lost
    coverage or not; EXIT_LOST_COVERAGE when lost coverage (``coverage``) is all that gates; else 0."""
    gates = fail_on_gates(fail_on)
    failing = bool(diff.new_failures) and "failures" in gates
    regressed = bool(diff.regressions) and "regressions" in gates
    if failing or regressed:
        return EXIT_REJECTED
    return EXIT_LOST_COVERAGE if diff.lost_coverage and "coverage" in gates else EXIT_OK


# --- rendering ----------------------------------------------------------------------------------


def _o(outcome: str) -> str:
    return outcome.upper()


def _change_line(c: Change, *, with_was: bool = True) -> str:
    was = f" (was {_o(c.old)})" if with_was and c.old != c.new else ""
    return f"{_o(c.new)} {c.node} {c.check}{was}" + (f": {c.message}" if c.message else "")


def _count_line(c: CheckCount, verb: str = "") -> str:
    return f"{c.check}: {verb}" + ", ".join(f"{n} {o}" for o, n in c.outcomes.items())


def _metric_line(m: MetricChange) -> str:
    unit = "" if not m.unit or m.metric.endswith(f"_{m.unit}") else f" {m.unit}"  # kernel_ms says its unit
    change = f"{m.change:+.1%}" if math.isfinite(m.change) else "from 0"
    return f"{m.node} {m.check}: {m.metric} {m.old:.{m.digits}f} -> {m.new:.{m.digits}f}{unit} ({change})"


def _n(count: int, what: str) -> str:
    return f"{count} {what}{'' if count == 1 else 's'}"


def _lost_lines(lost: LostNode) -> list[str]:
    """The node's line (why the new run did not test it, or how many of its checks it left out), then
    each check indented by two spaces, without the node's reason again."""
    if lost.untested:
        head = f"{lost.node}: not tested (was {_o(lost.old)})" + (f": {lost.reason}" if lost.reason else "")
    else:
        head = f"{lost.node}: {_n(len(lost.checks), 'check')} no longer tested"
    return [head] + [f"  {_o(c.new)} {c.check} (was {_o(c.old)})"
                     + (f": {c.message}" if c.message and (c.message != lost.reason or not lost.untested) else "")
                     for c in lost.checks]


def _groups(diff: ReportDiff) -> list[tuple[str, list[str]]]:
    """Each group's title with its count, and its lines (a line indented by two spaces belongs to the one above)."""
    tol = f"{diff.tolerance:.0%}" if round(diff.tolerance * 100, 6).is_integer() else f"{diff.tolerance:.1%}"
    untested = sum(n.untested for n in diff.lost_coverage)
    nodes = f"{_n(untested, 'node')} untested, " if untested else ""
    lost = (f"lost coverage ({nodes}{_n(len(diff.no_longer_tested), 'check')} no longer tested)",
            [line for n in diff.lost_coverage for line in _lost_lines(n)])
    counted = [
        ("new failures", [_change_line(c) for c in diff.new_failures]),
        ("fixed", [_change_line(c) for c in diff.fixed]),
        ("still failing", [_change_line(c) for c in diff.still_failing]),
        ("checks appeared", [_count_line(c) for c in diff.checks_appeared]),
        ("checks disappeared", [_count_line(c, "was ") for c in diff.checks_disappeared]),
        ("node verdicts changed", [f"{n.node}: {_o(n.old)} -> {_o(n.new)}" + (f" ({n.reason})" if n.reason else "")
                                   for n in diff.node_changes]),
        (f"metric regressions (tolerance {tol})", [_metric_line(m) for m in diff.regressions]),
    ]
    groups = [(f"{title} ({len(items)})", items) for title, items in counted]
    return groups[:3] + [lost] + groups[3:]


def _summary(diff: ReportDiff) -> str:
    untested = sum(n.untested for n in diff.lost_coverage)
    return (f"{_n(len(diff.new_failures), 'new failure')}, {len(diff.fixed)} fixed, {len(diff.still_failing)} still "
            f"failing, {_n(len(diff.regressions), 'metric regression')} ({diff.metrics_compared} compared), "
            f"{_n(len(diff.no_longer_tested), 'check')} no longer tested"
            + (f" ({_n(untested, 'node')} untested)" if untested else ""))


def warning_line(diff: ReportDiff) -> str | None:
    """The one line `report diff` prints on stderr when the runs are of different clusters."""
    if diff.different_clusters is None:
        return None
    return (f"gpuconf report diff: warning: OLD and NEW are runs of different clusters ({diff.different_clusters}): "
            "compared anyway; a change listed may be the clusters' difference, not the new run's")


def render_text(diff: ReportDiff) -> str:
    """Grouped, one line per item (lost coverage: a line per node, its checks indented below it);
    empty groups are left out."""
    lines = [f"old: {diff.old.label}", f"new: {diff.new.label}"]
    for title, items in _groups(diff):
        if items:
            lines.append(f"{title}:")
            lines += [f"  {item}" for item in items]
    lines.append(f"summary: {_summary(diff)}")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render_markdown(diff: ReportDiff) -> str:
    """For CI job summaries ($GITHUB_STEP_SUMMARY, GitLab's report.md artifact)."""
    lines = ["## gpuconf report diff", "", f"- old: {_cell(diff.old.label)}", f"- new: {_cell(diff.new.label)}", ""]
    if diff.different_clusters is not None:
        lines += [f"> **Warning**: OLD and NEW are runs of different clusters ({_cell(diff.different_clusters)})", ""]
    lines += [f"**{_cell(_summary(diff))}**", ""]
    for title, items in _groups(diff):
        if items:
            lines += [f"### {title[0].upper()}{title[1:]}", ""]
            lines += [f"{'  ' if item.startswith('  ') else ''}- {_cell(item)}" for item in items] + [""]
    return "\n".join(lines)


def _change_json(c: Change) -> dict[str, Any]:
    return {"check": c.check, "node": c.node, "old": c.old, "new": c.new, "message": c.message}


def render_json(diff: ReportDiff, *, fail_on: str = "any") -> dict[str, Any]:
    def run(r: Report) -> dict[str, Any]:
        return {"source": r.source, "run_id": r.run_id, "provenance": r.provenance, "started": r.started,
                "error": r.error, "interrupted": r.interrupted,
                "coverage": r.coverage.as_json() if r.coverage is not None else None}

    return {
        "old": run(diff.old), "new": run(diff.new), "tolerance": diff.tolerance,
        "new_failures": [_change_json(c) for c in diff.new_failures],
        "fixed": [_change_json(c) for c in diff.fixed],
        "still_failing": [_change_json(c) for c in diff.still_failing],
        "no_longer_tested": [_change_json(c) for c in diff.no_longer_tested],
        "lost_coverage": [{"node": n.node, "old": n.old, "new": n.new, "untested": n.untested, "reason": n.reason,
                           "checks": [_change_json(c) for c in n.checks]} for n in diff.lost_coverage],
        "checks_appeared": [{"check": c.check, "outcomes": dict(c.outcomes)} for c in diff.checks_appeared],
        "checks_disappeared": [{"check": c.check, "outcomes": dict(c.outcomes)} for c in diff.checks_disappeared],
        "node_changes": [{"node": n.node, "old": n.old, "new": n.new, "reason": n.reason} for n in diff.node_changes],
        "metrics_compared": diff.metrics_compared,
        "metric_regressions": [{"check": m.check, "node": m.node, "metric": m.metric, "unit": m.unit, "old": m.old,
                                "new": m.new, "change": round(m.change, 6) if math.isfinite(m.change) else None}
                               for m in diff.regressions],
        "not_compared": list(NOT_COMPARED) + [f"{name}: no known direction (not a figure the diff knows)"
                                               for name in diff.unknown_metrics],
        "different_clusters": diff.different_clusters,
        "fail_on": list(fail_on_gates(fail_on)),
        "exit_status": exit_status(diff, fail_on),
    }
