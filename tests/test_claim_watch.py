"""gpuconf.cluster.claims.ClaimWatch: a claim is seen allocated only while its pod runs, so the
watch's last look after the campaign must not be lost to a cut stream (an API server under load
cuts watches: tests/test_api_faults.py found a claim "allocated 0 devices" that way)."""

from __future__ import annotations

import json
import threading
from typing import Any

import urllib3

from gpuconf.cluster.claims import ClaimWatch

ALLOCATED = {"metadata": {"name": "probe-0-gpu", "resourceVersion": "12",
                          "ownerReferences": [{"kind": "Pod", "name": "probe-0"}]},
             "status": {"allocation": {"devices": {"results": [{"device": "gpu-0"}]}}}}


class _Response:
    def __init__(self, lines: list[dict[str, Any]], cut: bool) -> None:
        self.lines, self.cut = lines, cut

    def stream(self, _size: int) -> Any:
        for line in self.lines:
            yield (json.dumps(line) + "\n").encode()
        if self.cut:
            raise urllib3.exceptions.ProtocolError("Connection broken: the server cut the watch")

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


class _Cluster:
    """A cluster whose claim watches the test scripts: each watch is (events, cut?)."""

    def __init__(self, watches: list[tuple[list[dict[str, Any]], bool]], stop: threading.Event,
                 then_cut: bool) -> None:
        self.watches, self.stop, self.then_cut = watches, stop, then_cut
        self.resource = type("Resource", (), {"list_namespaced_resource_claim": staticmethod(lambda *a, **k: None)})
        self.retry = type("Retry", (), {"request_timeout": 5})
        self.calls = 0

    def call_json(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return {"items": [], "metadata": {"resourceVersion": "10"}}

    def call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> _Response:
        self.stop.wait(5)  # the campaign is over: only the drain watches are scripted
        self.calls += 1
        events, cut = self.watches.pop(0) if self.watches else ([], self.then_cut)
        return _Response(events, cut)


def _watch(watches: list[tuple[list[dict[str, Any]], bool]], then_cut: bool = False) -> tuple[ClaimWatch, _Cluster]:
    stop = threading.Event()
    cluster = _Cluster(watches, stop, then_cut)
    watch = ClaimWatch(cluster, "gpuconf-run")  # type: ignore[arg-type]
    watch._stop = stop
    with watch:
        pass
    return watch, cluster


def test_a_drain_cut_before_the_allocation_arrives_is_tried_again() -> None:
    watch, cluster = _watch([([], True), ([{"type": "MODIFIED", "object": ALLOCATED}], False)])
    assert [c["metadata"]["name"] for c in watch.for_pod("probe-0")] == ["probe-0-gpu"]
    assert watch.error is None and cluster.calls in (2, 3)


def test_a_drain_cut_every_time_says_the_watch_is_incomplete() -> None:
    watch, cluster = _watch([], then_cut=True)
    assert watch.for_pod("probe-0") == ()
    assert watch.error == ("watching resourceclaims in gpuconf-run: the last watch was cut 5 times after the "
                           "campaign")
    assert cluster.calls in (ClaimWatch.DRAIN_ATTEMPTS, ClaimWatch.DRAIN_ATTEMPTS + 1)  # + the one the stop ended
