"""The report model: what a run was (RunRecord) and what each check said (CheckResult). Pure data
and pure rules; the plugin builds it from pytest reports, the writers render it."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CLUSTER", "METRIC_PREFIX", "SERIES_PREFIX", "CheckResult", "OUTCOMES", "RunRecord", "format_metric",
           "from_test_report", "node_verdicts", "parse_metrics", "parse_series", "remediation", "worst"]

PASS, DEGRADED, FAIL, NOT_TESTED = "pass", "degraded", "fail", "not-tested"
OUTCOMES = (PASS, DEGRADED, FAIL, NOT_TESTED)
#: The node a result without one is filed under (cluster-wide checks, or a run without nodes).
CLUSTER = "(cluster)"
_RANK = {FAIL: 3, DEGRADED: 2, PASS: 1}
#: A measured figure a test records for `gpuconf report diff`: ``gpuconf.metric.<name>`` = a number
#: (gpuconf.plugin.record_metrics); the name carries the unit (kernel_ms, pull_s, to_running_s).
METRIC_PREFIX = "gpuconf.metric."
#: A measured series a test records (gpuconf.plugin.record_series): ``gpuconf.series.<name>`` =
#: ``x:y`` pairs as the curve has them, x an item (a GPU index), y its figure (the name carries the unit).
SERIES_PREFIX = "gpuconf.series."


@dataclass(frozen=True)
class RunRecord:
    provenance: str | None  # "simulated:<profile>" or "kubeconfig:<path>[@context]"; None without a cluster
    started: float  # epoch seconds
    finished: float
    exit_status: int
    interrupted: bool = False
    run_id: str | None = None
    error: str | None = None  # why the run could not start (bad kubeconfig, unreachable, ...); no checks ran

    @property
    def simulated(self) -> bool:
        return bool(self.provenance and self.provenance.startswith("simulated:"))


@dataclass(frozen=True)
class CheckResult:
    check: str
    node: str | None
    outcome: str  # one of OUTCOMES
    nodeid: str
    duration: float = 0.0  # seconds
    expected: str | None = None
    observed: str | None = None
    message: str | None = None
    #: A measured curve (the NCCL suite's busbw per message size): ((bytes, GB/s), ...).
    curve: tuple[tuple[int, float], ...] = ()
    #: Measured figures by name (``gpuconf.metric.*`` properties): {"kernel_ms": 0.04, "pull_s": 12.5, ...}.
    metrics: Mapping[str, float] = field(default_factory=dict, hash=False)
    #: Measured series by name (``gpuconf.series.*``): {"h2d_gbps": ((0, 55.1), (1, 54.9), ...), ...}.
    series: Mapping[str, tuple[tuple[int, float], ...]] = field(default_factory=dict, hash=False)

    @property
    def node_key(self) -> str:
        return self.node or CLUSTER


def worst(outcomes: Iterable[str]) -> str:
    """FAIL > DEGRADED > PASS; nothing but skips (or nothing at all) is NOT-TESTED."""
    ranked = [o for o in outcomes if o in _RANK]
    return max(ranked, key=_RANK.__getitem__) if ranked else NOT_TESTED


def node_verdicts(results: Sequence[CheckResult]) -> dict[str, str]:
    """Each node's verdict: the worst of its checks, nodes in first-seen order."""
    by_node: dict[str, list[str]] = {}
    for r in results:
        by_node.setdefault(r.node_key, []).append(r.outcome)
    return {node: worst(outcomes) for node, outcomes in by_node.items()}


def _test_name(nodeid: str) -> str:
    return nodeid.rsplit("::", 1)[-1].split("[", 1)[0]


def _param(nodeid: str) -> str | None:
    name = nodeid.rsplit("::", 1)[-1]
    return name[name.index("[") + 1:-1] if "[" in name and name.endswith("]") else None


def from_test_report(nodeid: str, pytest_outcome: str, duration: float, properties: Mapping[str, Any],
                     longrepr: str | None) -> CheckResult:
    """One test's result: the gpuconf.* properties judge() recorded when there are some, else pytest's
    outcome (passed/failed/skipped) and the test's own name and parameter."""
    outcome = str(properties.get("gpuconf.outcome", "")).lower()
    if outcome not in OUTCOMES:
        outcome = {"passed": PASS, "failed": FAIL}.get(pytest_outcome, NOT_TESTED)
    elif pytest_outcome == "failed" and outcome == PASS:  # e.g. a teardown error after a passing verdict
        outcome = FAIL
    check = str(properties.get("gpuconf.check") or _test_name(nodeid))
    node = properties.get("gpuconf.node") or _param(nodeid)
    if node == "no-cluster":
        node = None

    def opt(key: str) -> str | None:
        value = properties.get(key)
        return None if value is None else str(value)

    message = longrepr.strip() if longrepr else None
    return CheckResult(check, str(node) if node is not None else None, outcome, nodeid, duration,
                       opt("gpuconf.expected"), opt("gpuconf.observed"), message or None,
                       parse_curve(opt("gpuconf.curve")), parse_metrics(properties), parse_series(properties))


def format_metric(value: float) -> str:
    """A ``gpuconf.metric.*`` property value: the number in full (repr keeps every digit)."""
    return repr(float(value))


def parse_metrics(properties: Mapping[str, Any]) -> dict[str, float]:
    """The ``gpuconf.metric.<name>`` properties as numbers; a value that is not a finite number (or a
    property without a name) is left out rather than guessed at."""
    out: dict[str, float] = {}
    for key, value in properties.items():
        name = str(key).removeprefix(METRIC_PREFIX)
        if not str(key).startswith(METRIC_PREFIX) or not name or isinstance(value, bool):
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(number):
            out[name] = number
    return out


def parse_series(properties: Mapping[str, Any]) -> dict[str, tuple[tuple[int, float], ...]]:
    """The ``gpuconf.series.<name>`` properties; one that does not parse is left out."""
    out: dict[str, tuple[tuple[int, float], ...]] = {}
    for key, value in properties.items():
        name = str(key).removeprefix(SERIES_PREFIX)
        if str(key).startswith(SERIES_PREFIX) and name and (points := parse_curve(str(value))):
            out[name] = points
    return out


def format_curve(points: Iterable[tuple[int, float]]) -> str:
    """The ``gpuconf.curve`` property: ``bytes:value`` pairs separated by spaces."""
    return " ".join(f"{int(x)}:{float(y):g}" for x, y in points)


def parse_curve(text: str | None) -> tuple[tuple[int, float], ...]:
    out: list[tuple[int, float]] = []
    for pair in (text or "").split():
        x, _, y = pair.partition(":")
        try:
            out.append((int(x), float(y)))
        except ValueError:
            return ()
    return tuple(out)


def remediation(check_id: str) -> str | None:
    """The remediation gpuconf/data/checks.yaml gives for a check, or None (unknown check, unreadable table)."""
    try:
        from gpuconf.verdict import checks

        entry = checks().get(check_id)
    except Exception:  # a report is written whatever state the tables are in
        return None
    return entry.remediation if entry is not None else None
