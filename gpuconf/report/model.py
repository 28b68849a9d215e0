"""The report model: what a run was (RunRecord) and what each check said (CheckResult). Pure data
and pure rules; the plugin builds it from pytest reports, the writers render it."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BLOCKED", "BUSY", "CLUSTER", "CORDONED", "COULD_NOT_RUN", "CheckResult", "Coverage", "DEGRADED", "FAIL",
           "INCOMPLETE", "METRIC_PREFIX", "MISSING_SHARD", "NODE_UNAVAILABLE", "NOT_APPLICABLE", "NOT_READY",
           "NOT_SELECTED", "NOT_STARTED", "NOT_TESTED", "NOT_TESTED_KINDS", "OUTCOMES", "PARTIAL", "PASS", "Record",
           "RunRecord", "SERIES_PREFIX", "STATE_WORDS", "Series", "TAINTED", "UNKNOWN_HARDWARE", "UNPLACEABLE",
           "UNTESTED_STATES", "UntestedNode", "cluster_verdict", "format_metric", "from_test_report", "node_verdicts",
           "not_tested_kind", "parse_metrics", "parse_series", "remediation", "resolve_blocked", "result_remediation",
           "worst"]

from gpuconf.outcomes import (  # one vocabulary (gpuconf.outcomes), re-exported for the report readers
    BLOCKED,
    COULD_NOT_RUN,
    DEGRADED,
    FAIL,
    INCOMPLETE,
    NODE_UNAVAILABLE,
    NOT_APPLICABLE,
    NOT_SELECTED,
    NOT_STARTED,
    NOT_TESTED,
    NOT_TESTED_KINDS,
    OUTCOMES,
    PARTIAL,
    PASS,
)

#: The node a result without one is filed under (cluster-wide checks, or a run without nodes).
CLUSTER = "(cluster)"
_RANK = {FAIL: 3, DEGRADED: 2, PASS: 1}
#: A measured figure a test records for `gpuconf report diff`: ``gpuconf.metric.<name>`` = a number
#: (gpuconf.kit.record_metrics); the name carries the unit (kernel_ms, pull_s, to_running_s).
METRIC_PREFIX = "gpuconf.metric."
#: A measured series a test records for the reports: ``gpuconf.series.<name>`` = Series.as_json() as
#: JSON text (gpuconf.kit.record_series). The HTML draws each one with its axes, units and floor.
SERIES_PREFIX = "gpuconf.series."
#: Why a selected GPU node was not tested, in the order the coverage line names them (issue 25): a
#: fleet's nodes the probes cannot reach are counted, not passed over.
#: A merge of shards (gpuconf report merge) adds MISSING_SHARD: the node's shard was not merged, or
#: could not start.
CORDONED, TAINTED, BUSY, NOT_READY, UNKNOWN_HARDWARE, UNPLACEABLE, MISSING_SHARD = (
    "cordoned", "tainted", "busy", "not-ready", "unknown-hardware", "unplaceable", "missing-shard")
UNTESTED_STATES = (CORDONED, TAINTED, BUSY, NOT_READY, UNKNOWN_HARDWARE, UNPLACEABLE, MISSING_SHARD)
#: Each state as the coverage line says it (NotReady as kubectl shows the node's condition).
STATE_WORDS = {CORDONED: "cordoned", TAINTED: "tainted", BUSY: "busy", NOT_READY: "NotReady",
                UNKNOWN_HARDWARE: "unknown hardware", UNPLACEABLE: "unplaceable", MISSING_SHARD: "in a missing shard"}


@dataclass(frozen=True)
class UntestedNode:
    """A selected GPU node the run did not test, and why: ``state`` one of UNTESTED_STATES, ``reason``
    one line naming the node, the cause and what would get it tested."""

    node: str
    state: str
    reason: str


@dataclass(frozen=True)
class Coverage:
    """Which of the run's selected GPU nodes were tested. A selected node not tested is never PASS
    (node_verdicts) and keeps the run from PASS (cluster_verdict): a sign-off covers what it tested."""

    selected: tuple[str, ...]
    untested: tuple[UntestedNode, ...] = ()  # at most one entry per node
    #: How each selected node hands out whole GPUs (gpuconf.nodes.NodeView.kind: device plugin, DRA
    #: claims, DRA-backed extended resource nvidia.com/gpu, device plugin and DRA), for the reader.
    kinds: Mapping[str, str] = field(default_factory=dict, compare=False)

    def missing(self) -> dict[str, UntestedNode]:
        """The untested selected nodes by name, in selection order (an entry for a node not selected,
        or a second one for a node, is not counted)."""
        by_node: dict[str, UntestedNode] = {}
        for u in self.untested:
            by_node.setdefault(u.node, u)
        return {n: by_node[n] for n in dict.fromkeys(self.selected) if n in by_node}

    @property
    def tested(self) -> int:
        return len(dict.fromkeys(self.selected)) - len(self.missing())

    def line(self) -> str:
        """"3 of 8 GPU nodes tested; 2 cordoned, 1 tainted, 1 busy, 1 NotReady": the nonzero states
        in UNTESTED_STATES order (a state this version does not know last, by its own name)."""
        total = len(dict.fromkeys(self.selected))
        head = f"{self.tested} of {total} GPU node{'' if total == 1 else 's'} tested"
        states = [u.state for u in self.missing().values()]
        order = list(UNTESTED_STATES) + sorted({s for s in states if s not in UNTESTED_STATES})
        parts = [f"{states.count(s)} {STATE_WORDS.get(s, s)}" for s in order if s in states]
        return head + ("; " + ", ".join(parts) if parts else "")

    def reason(self, node: str) -> str | None:
        """Why ``node`` was not tested, or None when it was (or is not a node of this run)."""
        return next((u.reason for u in self.untested if u.node == node), None)

    def state(self, node: str) -> str | None:
        return next((u.state for u in self.untested if u.node == node), None)

    def as_json(self) -> dict[str, Any]:
        return {"selected": len(dict.fromkeys(self.selected)), "tested": self.tested, "line": self.line(),
                "untested": [{"node": u.node, "state": u.state, "reason": u.reason} for u in self.untested],
                "nodes": list(self.selected), **({"kinds": dict(self.kinds)} if self.kinds else {})}

    @classmethod
    def from_json(cls, doc: Any) -> Coverage | None:
        """A Coverage from its JSON form (as_json()); None for anything malformed (a report.json is
        read back whatever wrote it; ``selected``, ``tested`` and ``line`` are recomputed)."""
        if not isinstance(doc, Mapping) or not isinstance(doc.get("nodes"), list):
            return None
        untested = doc.get("untested", [])
        if not isinstance(untested, list) or not all(isinstance(n, str) for n in doc["nodes"]):
            return None
        entries = []
        for u in untested:
            if not isinstance(u, Mapping) or not all(isinstance(u.get(k), str) for k in ("node", "state", "reason")):
                return None
            entries.append(UntestedNode(u["node"], u["state"], u["reason"]))
        kinds = doc.get("kinds")  # absent from reports before issue 27
        kinds = {k: v for k, v in kinds.items() if isinstance(k, str) and isinstance(v, str)} \
            if isinstance(kinds, Mapping) else {}
        return cls(tuple(doc["nodes"]), tuple(entries), kinds)


@dataclass(frozen=True)
class RunRecord:
    provenance: str | None  # "simulated:<profile>" or "kubeconfig:<path>[@context]"; None without a cluster
    started: float  # epoch seconds
    finished: float
    exit_status: int
    interrupted: bool = False
    run_id: str | None = None
    error: str | None = None  # why the run could not start (bad kubeconfig, unreachable, ...); no checks ran
    #: Which selected GPU nodes were tested; None for a run without the accounting (one that never
    #: started, a report from before it).
    coverage: Coverage | None = None
    #: A sharded run's place (gpuconf.shards.ShardPlan.as_json()), or a merge's ("merged": the shards
    #: merged); None for an unsharded run.
    shard: Mapping[str, Any] | None = field(default=None, compare=False)
    #: The options the CNCF evidence depends on (``--kueue-queue``), kept so a merge writes the same.
    options: Mapping[str, Any] = field(default_factory=dict, compare=False)
    #: The API server's gitVersion (``/version``, read with the inventory): the CNCF evidence's
    #: kubernetesVersion; None where the run did not learn it.
    server_version: str | None = field(default=None, compare=False)
    #: What the run selected and whether that is the sign-off's whole scope (gpuconf.plugin.scope):
    #: {"selection": {...}, "full": bool, "narrowed": [why not full, ...], "tiers": [opt-in tiers run]};
    #: None for a report from before it (read as full).
    scope: Mapping[str, Any] | None = field(default=None, compare=False)
    #: The faults a simulated run's profile injected, as it placed them ("gpu-lost on h100-0 GPU 3");
    #: empty for a real cluster or a profile without faults.
    faults: tuple[str, ...] = ()

    @property
    def partial(self) -> bool:
        """The run selected less than the sign-off's scope (-m, -k, some suites only): never a PASS."""
        return self.scope is not None and self.scope.get("full") is False

    @property
    def simulated(self) -> bool:
        return bool(self.provenance and self.provenance.startswith("simulated:"))


@dataclass(frozen=True)
class Series:
    """A measured series: y against x, each axis with its quantity and unit, and optionally the floor
    (the least y that passes) drawn as a line. ``x_scale`` is "log2" (message and buffer sizes),
    "linear", or "category" (one bar per item, such as a GPU's index)."""

    name: str
    points: tuple[tuple[float, float], ...]
    x_label: str
    x_unit: str
    y_label: str
    y_unit: str
    floor: float | None = None
    x_scale: str = "linear"
    title: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title or self.name, "points": [[x, y] for x, y in self.points],
                "x": {"label": self.x_label, "unit": self.x_unit, "scale": self.x_scale},
                "y": {"label": self.y_label, "unit": self.y_unit}, "floor": self.floor}


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def parse_series(name: str, doc: Any) -> Series | None:
    """A Series from its JSON form (Series.as_json(), text or parsed); None for anything malformed
    (a report is written whatever a test recorded)."""
    import json

    if isinstance(doc, str):
        try:
            doc = json.loads(doc)
        except ValueError:
            return None
    if not isinstance(doc, Mapping) or not isinstance(doc.get("x"), Mapping) or not isinstance(doc.get("y"), Mapping):
        return None
    points = []
    for point in doc.get("points") or ():
        if not isinstance(point, (list, tuple)) or len(point) != 2:
            return None
        x, y = _finite(point[0]), _finite(point[1])
        if x is None or y is None:
            return None
        points.append((x, y))
    x, y = doc["x"], doc["y"]
    scale = str(x.get("scale")) if x.get("scale") in ("log2", "category") else "linear"
    return Series(str(doc.get("name") or name), tuple(points), str(x.get("label", "")), str(x.get("unit", "")),
                  str(y.get("label", "")), str(y.get("unit", "")), _finite(doc.get("floor")),
                  scale, str(doc.get("title") or name))


def busbw_series(curve: Sequence[tuple[int, float]], floor: float | None = None) -> Series:
    """The NCCL all-reduce curve (``gpuconf.curve``) as a Series: bus bandwidth by message size."""
    return Series("busbw", tuple((float(x), float(y)) for x, y in curve), "message size", "B", "bus bandwidth",
                  "GB/s", floor, "log2", "all-reduce bus bandwidth by message size")


@dataclass(frozen=True)
class Record:
    """What the check itself said, beyond its outcome (gpuconf.verdict.Verdict.record()): carried as data
    from the test to every report, the merge and the diff; nothing reads it back out of message text."""

    summary: str | None = None
    #: What a PASS did not judge (its fail-closed caveats): shown beside the PASS in every report.
    not_judged: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    #: The remedy for what a FAIL or DEGRADED observed (the verdict's own, else the check's).
    remediation: str | None = None
    #: NOT TESTED: why (gpuconf.outcomes.NOT_TESTED_KINDS); the failing check that blocked it; the node
    #: state that kept it off the node.
    kind: str | None = None
    blocked_by: str | None = None
    state: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"summary": self.summary, "not_judged": list(self.not_judged), "evidence": list(self.evidence),
                "blocked_by": self.blocked_by, "state": self.state}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Record:
        """From a report.json test's ``extra`` (as_json() plus ``remediation`` and ``not_tested``, the
        kind); what is malformed is left out. A kind this version does not know is could-not-run."""
        def text(key: str) -> str | None:
            value = doc.get(key)
            return value if isinstance(value, str) and value else None

        def texts(key: str) -> tuple[str, ...]:
            value = doc.get(key)
            return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()

        kind = text("not_tested")
        return cls(text("summary"), texts("not_judged"), texts("evidence"), text("remediation"),
                   kind if kind is None or kind in NOT_TESTED_KINDS else COULD_NOT_RUN, text("blocked_by"),
                   text("state"))


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
    #: Measured series (``gpuconf.series.*`` properties; a bare ``gpuconf.curve`` becomes a busbw one).
    series: tuple[Series, ...] = ()
    #: The CNCF AI conformance requirements the test gives evidence for (``gpuconf.cncf``).
    cncf: tuple[str, ...] = ()
    #: The verdict's record (summary, caveats, evidence, remedy, NOT TESTED kind).
    record: Record = field(default_factory=Record)

    @property
    def kind(self) -> str | None:
        """NOT TESTED only: why (gpuconf.outcomes.NOT_TESTED_KINDS; could-not-run where nothing said)."""
        return (self.record.kind or COULD_NOT_RUN) if self.outcome == NOT_TESTED else None

    @property
    def node_key(self) -> str:
        return self.node or CLUSTER


def resolve_blocked(results: Sequence[CheckResult]) -> list[CheckResult]:
    """A NOT TESTED "blocked" result whose owner (record.blocked_by) did not fail on its node is not
    blocked by a failure: it takes the owner's own NOT TESTED kind and state there (a node that took no
    probes: node unavailable), else could-not-run. One root cause, one failure: "blocked" is said only
    where the failure it names is in the run."""
    from dataclasses import replace

    by_key: dict[tuple[str, str | None], CheckResult] = {(r.check, r.node): r for r in results}
    out = []
    for r in results:
        owner = by_key.get((r.record.blocked_by, r.node)) if r.kind == BLOCKED and r.record.blocked_by else None
        if r.kind == BLOCKED and (owner is None or owner.outcome not in (FAIL, DEGRADED)):
            kind, state = ((owner.kind, owner.record.state) if owner is not None and owner.outcome == NOT_TESTED
                           and owner.kind != BLOCKED else (COULD_NOT_RUN, None))
            r = replace(r, record=replace(r.record, kind=kind, state=state or r.record.state))
        out.append(r)
    return out


def worst(outcomes: Iterable[str]) -> str:
    """FAIL > DEGRADED > PASS; nothing but skips (or nothing at all) is NOT-TESTED."""
    ranked = [o for o in outcomes if o in _RANK]
    return max(ranked, key=_RANK.__getitem__) if ranked else NOT_TESTED


def node_verdicts(results: Sequence[CheckResult], coverage: Coverage | None = None) -> dict[str, str]:
    """Each node's verdict: the worst of its checks, nodes in first-seen order. With ``coverage``, a
    node it lists as untested is NOT TESTED unless a check failed or degraded there (a label check
    can still fail on a cordoned node), and an untested selected node without results is listed too."""
    by_node: dict[str, list[str]] = {}
    for r in results:
        by_node.setdefault(r.node_key, []).append(r.outcome)
    verdicts = {node: worst(outcomes) for node, outcomes in by_node.items()}
    if coverage is None:
        return verdicts
    untested = {u.node for u in coverage.untested}
    for node in coverage.missing():
        verdicts.setdefault(node, NOT_TESTED)
    return {node: NOT_TESTED if node in untested and v == PASS else v for node, v in verdicts.items()}


def cluster_verdict(run: RunRecord, results: Sequence[CheckResult]) -> str:
    """The run's one word: NOT STARTED when no check could run, FAIL > DEGRADED over every check
    (cluster-wide ones too), INCOMPLETE for an interrupted run or one that left selected GPU nodes
    untested (run.coverage) without either, PARTIAL for a run that selected less than the sign-off's
    scope (run.scope), PASS when something passed, every selected node was tested and the whole scope
    selected, NOT TESTED when everything skipped."""
    if run.error:
        return NOT_STARTED
    verdict = worst(r.outcome for r in results)
    if verdict in (FAIL, DEGRADED):
        return verdict
    if run.interrupted or (run.coverage is not None and run.coverage.missing()):
        return INCOMPLETE
    if run.partial and verdict in (PASS, NOT_TESTED):
        return PARTIAL
    return verdict


def not_tested_kind(result: CheckResult) -> str:
    """Why a NOT TESTED result was not tested (gpuconf.outcomes.NOT_TESTED_KINDS), from its record: the
    kind the check or the plugin recorded; could-not-run where none was (never "not applicable" by guess)."""
    return result.kind or COULD_NOT_RUN


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
    curve = parse_curve(opt("gpuconf.curve"))
    series = [s for key, value in properties.items() if str(key).startswith(SERIES_PREFIX)
              if (s := parse_series(str(key).removeprefix(SERIES_PREFIX), value)) is not None]
    busbw = next((s for s in series if s.name == "busbw"), None)
    if curve and busbw is None:
        series.insert(0, busbw_series(curve))
    elif busbw is not None and not curve:  # what `gpuconf report diff` compares (report.json extra.curve)
        curve = tuple((int(x), y) for x, y in busbw.points)
    return CheckResult(check, str(node) if node is not None else None, outcome, nodeid, duration,
                       opt("gpuconf.expected"), opt("gpuconf.observed"), message or None,
                       curve, parse_metrics(properties), tuple(series),
                       tuple(i for i in str(properties.get("gpuconf.cncf") or "").split(",") if i),
                       _record(properties, outcome))


def _record(properties: Mapping[str, Any], outcome: str) -> Record:
    """The result's record from judge()'s ``gpuconf.verdict`` property (the whole verdict as JSON), and a
    skip's ``gpuconf.not_tested``/``gpuconf.blocked_by``/``gpuconf.state`` (gpuconf.kit.evidence); a
    verdict the plugin turned NOT TESTED afterwards (its pod never placed) keeps only its summary."""
    import json

    doc: dict[str, Any] = {}
    raw = properties.get("gpuconf.verdict")
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            doc = {**parsed, "not_tested": parsed.get("kind")}
    for key, prop in (("not_tested", "gpuconf.not_tested"), ("blocked_by", "gpuconf.blocked_by"),
                      ("state", "gpuconf.state")):
        if isinstance(properties.get(prop), str):
            doc[key] = properties[prop]
    if outcome not in (FAIL, DEGRADED):
        doc.pop("remediation", None)
    if outcome != NOT_TESTED:
        doc.pop("not_tested", None)
    return Record.from_json(doc)


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


def result_remediation(result: CheckResult) -> str | None:
    """The remedy for what a failed check observed: its record's (gpuconf.verdict.Verdict.remediation,
    specific to the cause), else the check's own from gpuconf/data/checks.yaml."""
    return result.record.remediation or remediation(result.check)


def remediation(check_id: str) -> str | None:
    """The remediation gpuconf/data/checks.yaml gives for a check, or None (unknown check, unreadable table)."""
    try:
        from gpuconf.verdict import checks

        entry = checks().get(check_id)
    except Exception:  # a report is written whatever state the tables are in
        return None
    return entry.remediation if entry is not None else None
