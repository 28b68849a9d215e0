"""The cuda-probe's --rendezvous on the simulated cluster (gpuconf.sim.probe_meet): probes that name
each other under a headless Service meet and report what the real probe reports; a peer that never
comes, a name no Service publishes, or pod-to-pod traffic that is dropped ends the wait with the
real probe's reason. Driven on a hand clock, with the Service lookup the kubelet would make."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from gpuconf.compat.versions import parse_cuda
from gpuconf.probes.cuda import parse_cuda_probe
from gpuconf.sim.emulate import Visible, cuda_probe_run
from gpuconf.sim.probe_meet import Meetings, Outcome, Request, request
from gpuconf.sim.profile import expand, load_profile

ROOT = Path(__file__).resolve().parents[2]
VALIDATOR = Draft202012Validator(json.loads((ROOT / "gpuconf/probe_schemas/cuda-probe.v1.json").read_text()))
NS = "gpuconf-run"
GROUP = "iso-together-abc"
SERVICE = {"spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                    "selector": {"gpuconf.io/rendezvous": GROUP}}}
LABELS = {"gpuconf.io/rendezvous": GROUP, "gpuconf.io/run-id": "r"}


def services(found: dict[str, Any] | None = None):
    table = {GROUP: SERVICE} if found is None else found
    return lambda namespace, name: table.get(name) if namespace == NS else None


def probe_output(gpu: int) -> tuple[int, str]:
    node = expand(load_profile("healthy-h100")).node("h100-0")
    return cuda_probe_run(node, visible=[Visible(node.gpus[gpu])], image_cuda=parse_cuda("13.0.2"),
                          env={"NVIDIA_VISIBLE_DEVICES": node.gpus[gpu].uuid}, compat=True,
                          started_at="2026-12-08T00:00:00.000Z", hostname="x")


def join(m: Meetings, hostname: str, peers: list[str], at: float, *, gpu: int, blocked: bool = False,
         wait_s: float = 90.0):
    code, out = probe_output(gpu)
    return m.join(Request(tuple(peers), 7171, wait_s), namespace=NS, pod=f"iso-{hostname}-h100-0", hostname=hostname,
                  subdomain=GROUP, labels=LABELS, node="h100-0", blocked=blocked, code=code, output=out, now=at)


def name(host: str) -> str:
    return f"{host}.{GROUP}.{NS}.svc"


def doc_of(outcome: Outcome | float) -> dict[str, Any]:
    assert isinstance(outcome, Outcome), outcome
    doc = json.loads(outcome.output)
    assert [e.message for e in VALIDATOR.iter_errors(doc)] == []
    return doc


def meetings() -> Meetings:
    return Meetings(speed=10_000.0, work_ms=3000.0, floor_seconds=15.0)


def test_two_probes_that_name_each_other_meet_with_each_others_gpus_and_the_overlap():
    m = meetings()
    uuids = [g.uuid for g in expand(load_profile("healthy-h100")).node("h100-0").gpus]
    one = join(m, "one", [name("split")], 100.0, gpu=0)
    assert m.poll(one, 100.01, services()) == pytest.approx(100.06)  # alone: it waits (polls again)
    split = join(m, "split", [name("one")], 100.5, gpu=1)
    a, b = doc_of(m.poll(one, 100.6, services())), doc_of(m.poll(split, 100.6, services()))
    ra, rb = a["rendezvous"], b["rendezvous"]
    assert (ra["met"], rb["met"], ra["reason"], rb["reason"]) == (True, True, None, None)
    # one retried every 200 ms and read split's line at 100.6; split read one's at once (100.5)
    assert ra["peer_lines"] == [{"peer": name("split"), "answered": True, "attempts": 4, "name": "split:7171",
                                 "held_ms": 3100.0, "read_at_ms": 3600.0, "cuda_uuids": [uuids[1]],
                                 "nvml_uuids": [uuids[1]]}]
    assert (rb["peer_lines"][0]["name"], rb["peer_lines"][0]["cuda_uuids"]) == ("one:7171", [uuids[0]])
    assert (ra["overlap_ms"], rb["overlap_ms"]) == (3100.0, 3000.0)  # the latest starter held 3 s before listening
    assert (ra["acknowledged_by"], rb["acknowledged_by"]) == (["split:7171"], ["one:7171"])
    assert (ra["cuda_uuids"], rb["nvml_uuids"], ra["wait_s"]) == ([uuids[0]], [uuids[1]], 90.0)
    assert m.poll(one, 100.6, services()).finish_at == pytest.approx(100.6)  # type: ignore[union-attr]
    parsed = parse_cuda_probe(json.dumps(a)).rendezvous
    assert parsed is not None and parsed.met and parsed.lines[0].uuids == (uuids[1],)


@pytest.mark.parametrize(("blocked", "services_found", "error"), [
    (False, None, "name resolution failed: Name or service not known"),
    (True, None, "Connection timed out"),
], ids=["a peer that never starts", "pod-to-pod traffic dropped"])
def test_a_peer_not_reached_ends_the_wait_with_met_false_and_the_probes_reason(blocked, services_found, error):
    m = meetings()
    one = join(m, "one", [name("split")], 100.0, gpu=0, blocked=blocked)
    if blocked:
        join(m, "split", [name("one")], 100.2, gpu=1, blocked=blocked)
    assert m.poll(one, 114.9, services()) == pytest.approx(114.95)  # the floor: 15 s of real time
    r = doc_of(m.poll(one, 115.0, services()))["rendezvous"]
    assert (r["met"], r["overlap_ms"], r["acknowledged_by"]) == (False, None, [])
    assert r["reason"] == f"peer {name('split')} did not answer within 90 s: {error}"
    assert r["peer_lines"][0]["answered"] is False and r["peer_lines"][0]["error"] == error


def test_a_name_no_headless_service_publishes_does_not_resolve():
    m = meetings()
    plain = {GROUP: {"spec": {"clusterIP": "10.0.0.1", "selector": {"gpuconf.io/rendezvous": GROUP}}}}
    one = join(m, "one", [name("split")], 100.0, gpu=0)
    join(m, "split", [name("one")], 100.0, gpu=1)
    r = doc_of(m.poll(one, 116.0, services(plain)))["rendezvous"]
    assert r["reason"] == f"peer {name('split')} did not answer within 90 s: name resolution failed: Name or " \
                          "service not known"


def test_a_peer_that_came_too_late_answered_but_never_read_our_line():
    """split arrives after one gave up: one is gone, so split never reads one's line either."""
    m = meetings()
    one = join(m, "one", [name("split")], 100.0, gpu=0)
    late = join(m, "split", [name("one")], 116.0, gpu=1)
    assert doc_of(m.poll(one, 116.0, services()))["rendezvous"]["met"] is False
    r = doc_of(m.poll(late, 132.0, services()))["rendezvous"]
    assert r["met"] is False and r["reason"].endswith("did not answer within 90 s: Connection refused")


def test_the_probes_settings_come_from_its_flags_then_its_environment():
    env = {"GPUCONF_PROBE_RENDEZVOUS": "a.g.ns.svc,b.g.ns.svc", "GPUCONF_PROBE_RENDEZVOUS_WAIT": "30"}
    assert request(env, ["--timeout", "60"]) == Request(("a.g.ns.svc", "b.g.ns.svc"), 7171, 30.0)
    assert request(env, ["--rendezvous", "c:7200", "--rendezvous-port=7300"]) == Request(("c:7200",), 7300, 30.0)
    assert request({}, ["--timeout", "60"]) is None
    with pytest.raises(ValueError, match=r"^invalid --rendezvous-port '80': expected a port from 1025 to 65535$"):
        request({**env, "GPUCONF_PROBE_RENDEZVOUS_PORT": "80"}, [])
    with pytest.raises(ValueError, match=r"^invalid --rendezvous-wait 'soon': expected seconds > 0 and <= 3600$"):
        request(env, ["--rendezvous-wait", "soon"])
    with pytest.raises(ValueError, match=r"^invalid --rendezvous 'a,': empty peer in 'a,'$"):
        request({}, ["--rendezvous", "a,"])
