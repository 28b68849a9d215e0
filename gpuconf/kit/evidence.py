"""Acting on a check's verdict and recording its evidence: the JUnit properties the reports read
(``gpuconf.check``, ``gpuconf.outcome``, measured figures and series), the pass/skip/fail a verdict
means, and the probe pods' own figures (pull and start times)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, NoReturn

import pytest

from gpuconf import outcomes
from gpuconf.cluster import PodOutcome

__all__ = ["judge", "probe_pod_metrics", "pulled_seconds", "record_metrics", "record_series",
           "skip_not_tested"]

#: The JUnit properties that carry a result's record (gpuconf.report.model.from_test_report reads them):
#: the whole verdict as JSON where judge() saw one, else the NOT TESTED kind (and owner, node state) of a
#: skip raised before any verdict.
VERDICT_PROPERTY = "gpuconf.verdict"
KIND_PROPERTY, BLOCKED_BY_PROPERTY, STATE_PROPERTY = "gpuconf.not_tested", "gpuconf.blocked_by", "gpuconf.state"


def skip_not_tested(reason: str, kind: str, *, blocked_by: str | None = None, state: str | None = None) -> NoReturn:
    """End the test NOT TESTED with ``reason`` and why, as data: ``kind`` (gpuconf.outcomes.
    NOT_TESTED_KINDS), the failing check ``blocked_by`` names, the node ``state`` (cordoned, tainted...)
    that kept it off the node. pytest's own skip, carrying them as attributes: gpuconf.plugin.collection
    records them on the test's report, so no report reads the kind back out of the reason's words."""
    if kind not in outcomes.NOT_TESTED_KINDS:
        raise ValueError(f"not a NOT TESTED kind: {kind!r}")
    exc = pytest.skip.Exception(msg=reason, pytrace=False)
    exc.gpuconf_kind = outcomes.BLOCKED if blocked_by else kind  # type: ignore[attr-defined]
    exc.gpuconf_blocked_by = blocked_by  # type: ignore[attr-defined]
    exc.gpuconf_state = state  # type: ignore[attr-defined]
    raise exc


def require(ask: Any) -> Any:
    """A gpuconf.nodes request, or NOT TESTED (the test skips) with the node view's one line why the
    node cannot give it (an Unavailable): ``ask = require(node.whole_node())``."""
    from gpuconf.nodes import Unavailable

    if isinstance(ask, Unavailable):
        skip_not_tested(ask.reason, getattr(ask, "kind", None) or outcomes.NOT_APPLICABLE)
    return ask


def judge(verdict: Any, record_property: Any) -> None:
    """Act on a check's verdict: record it as evidence (JUnit properties: the whole record as
    ``gpuconf.verdict``, and its check, outcome and node on their own for JUnit readers), then pass, skip
    with the reason, or fail with the message (no Python traceback: the message is the evidence)."""
    import json

    from gpuconf.verdict import Outcome

    record_property(VERDICT_PROPERTY, json.dumps(verdict.record(), separators=(",", ":"), ensure_ascii=False))
    record_property("gpuconf.check", verdict.check)
    record_property("gpuconf.outcome", verdict.outcome.value)
    if verdict.node:
        record_property("gpuconf.node", verdict.node)
    # (a test declaring @pytest.mark.check has both recorded before its report is built, see
    # gpuconf.plugin.collection's pytest_runtest_makereport)
    if verdict.expected is not None:
        record_property("gpuconf.expected", verdict.expected)
    if verdict.observed is not None:
        record_property("gpuconf.observed", verdict.observed)
    if verdict.outcome is Outcome.NOT_TESTED:
        record = verdict.record()
        skip_not_tested(verdict.summary, record["kind"], blocked_by=verdict.blocked_by)
    if verdict.outcome in (Outcome.FAIL, Outcome.DEGRADED):
        prefix = "DEGRADED: " if verdict.outcome is Outcome.DEGRADED else ""
        pytest.fail(prefix + verdict.message() + _diagnosis(verdict, record_property), pytrace=False)


def _diagnosis(verdict: Any, record_property: Any) -> str:
    """What the failure-message classifier (gpuconf diagnose) recognises in the verdict's evidence:
    the category, recorded as a property, and its explanation, appended to the message."""
    from gpuconf.diagnose import diagnose

    text = "\n".join([verdict.summary, verdict.observed or "", *verdict.evidence])
    lines = []
    for d in diagnose(text):
        record_property("gpuconf.diagnosis", d.category)
        lines.append(f"\n  diagnosis: {d.title}: {d.explanation}")
    return "".join(lines)


def record_metrics(record_property: Any, **values: float | None) -> None:
    """Record measured figures as ``gpuconf.metric.<name>`` properties: report.json carries them and
    `gpuconf report diff` compares them run to run (gpuconf.report.diff.METRICS says which way is
    worse). A None value (not measured) is left out; the name carries the unit (kernel_ms, pull_s)."""
    import math

    from gpuconf.report.model import METRIC_PREFIX, format_metric

    for name, value in values.items():
        if value is not None and math.isfinite(value):
            record_property(METRIC_PREFIX + name, format_metric(value))


def record_series(record_property: Any, name: str, points: Iterable[tuple[float, float]], *, x: tuple[str, str],
                  y: tuple[str, str], floor: float | None = None, x_scale: str = "linear",
                  title: str | None = None) -> None:
    """Record a measured series as the ``gpuconf.series.<name>`` property: the reports draw it with
    its axes (``x``/``y``: quantity and unit), the floor as a line, and keep it in report.json.

    Example::

        record_series(record_property, "busbw", [(1024, 0.5), (1 << 30, 462.0)], x=("message size", "B"),
                      y=("bus bandwidth", "GB/s"), floor=400.0, x_scale="log2")
    """
    import json

    from gpuconf.report.model import SERIES_PREFIX, Series

    series = Series(name, tuple((float(px), float(py)) for px, py in points), x[0], x[1], y[0], y[1], floor,
                    x_scale, title)
    record_property(SERIES_PREFIX + name, json.dumps(series.as_json(), separators=(",", ":")))


#: The kubelet's Pulled event after a pull (pkg/kubelet/images/image_manager.go): the pull time is
#: the first duration, Go's time.Duration text ("1.234s", "1m2.5s", "850ms").
_PULLED = re.compile(r'Successfully pulled image "[^"]*" in ((?:\d+(?:\.\d+)?(?:ns|us|µs|μs|ms|h|m|s))+)')
_GO_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def pulled_seconds(message: str) -> float | None:
    """The pull time a Pulled event message gives, in seconds; None for "already present on machine"
    (no pull to time) and for a message in another wording."""
    match = _PULLED.search(message)
    if match is None:
        return None
    return sum(float(n) * _GO_UNIT[unit] for n, unit in re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|μs|ms|h|m|s)",
                                                                    match.group(1)))


def probe_pod_metrics(outcome: PodOutcome) -> dict[str, float | None]:
    """A probe pod's figures for the diff: ``pull_s``, the kubelet's pull times of its images summed
    (pulls on a node are serialized; None when every image was already present: nothing was pulled),
    and ``to_running_s``, creation to its first app container's start (None where it never started)."""
    pulls = [s for e in outcome.events if e.reason == "Pulled" and (s := pulled_seconds(e.message)) is not None]
    created, started = outcome.timings.created, outcome.timings.started
    return {"pull_s": round(sum(pulls), 6) if pulls else None,
            "to_running_s": (started - created).total_seconds() if created and started else None}
