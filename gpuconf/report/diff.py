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
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpuconf.errors import EXIT_OK, EXIT_REJECTED, UsageError
from gpuconf.report.model import CLUSTER, DEGRADED, FAIL, NOT_TESTED, PASS, Coverage, worst

__all__ = ["ABSENT", "FAIL_ON", "LARGE_MESSAGE", "METRICS", "NOT_COMPARED", "Change", "CheckCount", "MetricChange",
           "MetricSpec", "NodeChange", "Report", "ReportDiff", "diff_reports", "exit_status", "large_message_busbw",
           "load_report", "parse_report", "render_json", "render_markdown", "render_text"]

#: The outcome of a check (or the verdict of a node) a report does not hold at all.
ABSENT = "absent"
#: Messages of at least this many bytes make the "large-message" busbw figure the diff compares.
LARGE_MESSAGE = 2**30
FAIL_ON = ("failures", "regressions", "any")


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

    @property
    def label(self) -> str:
        state = (f"NOT STARTED: {self.error}" if self.error else None, "INTERRUPTED" if self.interrupted else None,
                 self.coverage.line() if self.coverage is not None and self.coverage.missing() else None)
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


# --- reading ------------------------------------------------------------------------------------


def load_report(path: str | Path) -> Report:
    """A report.json file, or a run directory holding one; bad input raises UsageError (one line)."""
    given = Path(path)
    target = given / "report.json" if given.is_dir() else given
    if given.is_dir() and not target.is_file():
        raise UsageError(f"{given}: a directory without report.json")
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
    return parse_report(doc, source=str(target))


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
    return Report(source=source, run_id=_text(meta.get("run_id")), provenance=_text(meta.get("provenance")),
                  started=_text(meta.get("started")), outcomes={k: worst(v) for k, v in seen.items()},
                  messages=messages, curves=curves,
                  nodes={str(k): str(v) for k, v in nodes.items()} if isinstance(nodes, dict) else {},
                  error=_text(meta.get("error")), interrupted=meta.get("interrupted") is True, metrics=metrics,
                  coverage=Coverage.from_json(meta.get("coverage")))


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
    out = ReportDiff(old=old, new=new, tolerance=tolerance)
    old_checks, new_checks = {c for c, _ in old.outcomes}, {c for c, _ in new.outcomes}
    for key in sorted(set(old.outcomes) | set(new.outcomes), key=lambda k: (k[1], k[0])):
        before, after = old.outcomes.get(key, ABSENT), new.outcomes.get(key, ABSENT)
        change = Change(key[0], key[1], before, after, new.messages.get(key) or _untested_reason(new, key[1]))
        if after in _FAILING:
            (out.still_failing if before in _FAILING else out.new_failures).append(change)
        elif before in _FAILING and after == PASS:
            out.fixed.append(change)
        elif before in (PASS, *_FAILING) and after != PASS and key[0] in new_checks:
            # a lost verdict: skipped now, or its node gone (a check gone altogether is listed as disappeared)
            out.no_longer_tested.append(change)
    for check in sorted(new_checks - old_checks):
        out.checks_appeared.append(CheckCount(check, _counted(o for k, o in new.outcomes.items() if k[0] == check)))
    for check in sorted(old_checks - new_checks):
        out.checks_disappeared.append(CheckCount(check, _counted(o for k, o in old.outcomes.items() if k[0] == check)))
    for node in list(old.nodes) + [n for n in new.nodes if n not in old.nodes]:
        before, after = old.nodes.get(node, ABSENT), new.nodes.get(node, ABSENT)
        if before != after:
            out.node_changes.append(NodeChange(node, before, after, _untested_reason(new, node)))
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


def _worse(spec: MetricSpec, old: float, new: float, tolerance: float) -> bool:
    """Worse by more than the floor and by more than ``tolerance`` of the old figure (any amount beyond
    the floor from a baseline of 0, where a fraction of it says nothing)."""
    loss = new - old if spec.higher_is_worse else old - new
    if loss <= spec.floor:
        return False
    return old <= 0 or loss / old > tolerance


def exit_status(diff: ReportDiff, fail_on: str = "any") -> int:
    """0 nothing to gate on, 1 new failures (``failures``), metric regressions (``regressions``) or either (``any``)."""
    if fail_on not in FAIL_ON:
        raise UsageError(f"--fail-on must be one of {', '.join(FAIL_ON)}, not {fail_on!r}")
    failing = bool(diff.new_failures) and fail_on in ("failures", "any")
    regressed = bool(diff.regressions) and fail_on in ("regressions", "any")
    return EXIT_REJECTED if failing or regressed else EXIT_OK


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


def _groups(diff: ReportDiff) -> list[tuple[str, list[str]]]:
    tol = f"{diff.tolerance:.0%}" if round(diff.tolerance * 100, 6).is_integer() else f"{diff.tolerance:.1%}"
    return [
        ("new failures", [_change_line(c) for c in diff.new_failures]),
        ("fixed", [_change_line(c) for c in diff.fixed]),
        ("still failing", [_change_line(c) for c in diff.still_failing]),
        ("no longer tested", [_change_line(c) for c in diff.no_longer_tested]),
        ("checks appeared", [_count_line(c) for c in diff.checks_appeared]),
        ("checks disappeared", [_count_line(c, "was ") for c in diff.checks_disappeared]),
        ("node verdicts changed", [f"{n.node}: {_o(n.old)} -> {_o(n.new)}" + (f" ({n.reason})" if n.reason else "")
                                   for n in diff.node_changes]),
        (f"metric regressions (tolerance {tol})", [_metric_line(m) for m in diff.regressions]),
    ]


def _summary(diff: ReportDiff) -> str:
    def n(count: int, what: str) -> str:
        return f"{count} {what}{'' if count == 1 else 's'}"

    return (f"{n(len(diff.new_failures), 'new failure')}, {len(diff.fixed)} fixed, {len(diff.still_failing)} still "
            f"failing, {n(len(diff.regressions), 'metric regression')} ({diff.metrics_compared} compared)")


def render_text(diff: ReportDiff) -> str:
    """Grouped, one line per item; empty groups are left out."""
    lines = [f"old: {diff.old.label}", f"new: {diff.new.label}"]
    for title, items in _groups(diff):
        if items:
            lines.append(f"{title} ({len(items)}):")
            lines += [f"  {item}" for item in items]
    lines.append(f"summary: {_summary(diff)}")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render_markdown(diff: ReportDiff) -> str:
    """For CI job summaries ($GITHUB_STEP_SUMMARY, GitLab's report.md artifact)."""
    lines = ["## gpuconf report diff", "", f"- old: {_cell(diff.old.label)}", f"- new: {_cell(diff.new.label)}", "",
             f"**{_cell(_summary(diff))}**", ""]
    for title, items in _groups(diff):
        if items:
            lines += [f"### {title[0].upper()}{title[1:]} ({len(items)})", ""]
            lines += [f"- {_cell(item)}" for item in items] + [""]
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
        "checks_appeared": [{"check": c.check, "outcomes": dict(c.outcomes)} for c in diff.checks_appeared],
        "checks_disappeared": [{"check": c.check, "outcomes": dict(c.outcomes)} for c in diff.checks_disappeared],
        "node_changes": [{"node": n.node, "old": n.old, "new": n.new, "reason": n.reason} for n in diff.node_changes],
        "metrics_compared": diff.metrics_compared,
        "metric_regressions": [{"check": m.check, "node": m.node, "metric": m.metric, "unit": m.unit, "old": m.old,
                                "new": m.new, "change": round(m.change, 6) if math.isfinite(m.change) else None}
                               for m in diff.regressions],
        "not_compared": list(NOT_COMPARED) + [f"{name}: no known direction (not a figure the diff knows)"
                                               for name in diff.unknown_metrics],
        "exit_status": exit_status(diff, fail_on),
    }
