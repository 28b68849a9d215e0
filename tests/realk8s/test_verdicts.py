"""The suites against a real kube-apiserver, scheduler and controller-manager (v1.36) with
`gpuconf sim agents` playing the nodes give the same verdicts as the `--simulate` run of the same
profile, check by check and node by node.

One exception, a fact of the real API server: its pod proxy refuses any pod address that is not
global unicast (``IsProxyableIP`` in kubernetes/pkg/util/proxy: ``address not allowed``, HTTP 400),
and the simulated pods publish loopback addresses only (nothing else may be dialled from these
machines). So the checks that scrape the DCGM exporter through ``pods/proxy`` (metrics, Xid) cannot
read it through a real API server here; for them the test asserts that refusal is what the report
says, word for word as the API server sends it."""

from __future__ import annotations

import io
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuconf.sim.profile import fault_catalog
from realk8s.support import (
    PROBE_NAMESPACE,
    ROOT,
    RUNNER_USER,
    RealCluster,
    audit_events,
    audit_mark,
    install_runner,
    rule_used,
    suite_run,
    verdicts,
)

PROFILE_DIR = ROOT / "gpuconf" / "data" / "sim_profiles"

#: Checks read through the API server's pod proxy (the DCGM exporter's /metrics).
PROXY_CHECKS = ("metrics.", "health.no-critical-xid")
PROXY_REFUSAL = "HTTP 400: address not allowed"

#: A fault per suite, on the profile whose hardware it needs (pool/node/gpu as in gpuconf/data/faults.yaml).
FAULTS: dict[str, tuple[str, list[dict[str, object]]]] = {
    "faults-h100": ("healthy-h100", [
        {"id": "gpu-lost", "pool": "h100", "node": 0, "gpu": 3},        # inventory (and the NCCL preflight)
        {"id": "toolkit-cdi-mode", "pool": "h100", "node": 1},         # compat
        {"id": "ecc-uncorrectable", "pool": "h100", "node": 1, "gpu": 2},  # health
        {"id": "envvar-leak", "pool": "h100", "node": 1},              # isolation
        {"id": "nccl-slow-link", "pool": "h100", "node": 1},           # nccl (node 0 fails the preflight)
    ]),
    "faults-dra": ("h200-dra-only", [{"id": "dra-attr-wrong", "pool": "h200", "node": 0, "gpu": 1}]),
    "faults-mig": ("a100-mig-mixed", [{"id": "mig-layout-drift", "pool": "a100", "node": 0, "gpu": 0}]),
    # MIG through DRA: claims on mig.nvidia.com allocated by the real scheduler (issue 27 item 5)
    "faults-mig-dra": ("a100-mig-dra", [
        {"id": "mig-sibling-visible", "pool": "a100", "node": 0},               # mig.instance-isolated
        {"id": "dra-mig-parent-published", "pool": "a100", "node": 1, "gpu": 3},  # mig.not-also-full-gpu
        {"id": "mig-layout-drift", "pool": "a100", "node": 1, "gpu": 0},         # mig.layout-matches-config
    ]),
    "faults-sharing": ("t4-timeslicing", [{"id": "timeslice-replicas-wrong", "pool": "t4", "node": 0}]),
    # DRA-first (issue 27): a device-tainted GPU under the real scheduler's taint rules, on a node whose
    # nvidia.com/gpu the real scheduler serves through its own claim (KEP-5004)
    "faults-dra-first": ("h200-dra-extended", [{"id": "dra-device-taint", "pool": "h200", "node": 0, "gpu": 3}]),
}

#: Profiles run as the in-cluster runner's ServiceAccount (manifests/runner, `kubectl apply -k`), with
#: `--namespace gpuconf-probes --label-nodes`: real RBAC and real Pod Security admission
#: (`restricted`). Between them (device plugin, DRA, MIG, the exporters, the GPUCluster) they need every rule.
RUNNER_PROFILES = ("plugin-and-dra", "a100-mig-mixed", "h200-gpucluster")

PROFILES = ["healthy-h100", "plugin-and-dra", "h200-dra-only", "t4-timeslicing", "a100-mig-mixed", "a100-mig-dra",
            "h200-gpucluster", "h200-dra-extended", *FAULTS]


def profile_file(name: str, directory: Path) -> Path:
    """A shipped profile's file, or a fault profile written from its base."""
    if name not in FAULTS:
        return PROFILE_DIR / f"{name}.yaml"
    base, faults = FAULTS[name]
    doc = yaml.safe_load((PROFILE_DIR / f"{base}.yaml").read_text())
    doc["name"], doc["faults"] = name, faults
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _by_proxy(check: str | None) -> bool:
    return bool(check) and str(check).startswith(PROXY_CHECKS)


def assert_same_verdicts(sim_report: dict[str, Any], real_report: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    """The real run's verdicts are the simulated run's, test by test, but for the checks read through
    the pod proxy (refused by a real API server for loopback pod addresses: the report says so); the
    real run's verdicts. The concurrency checks are compared like any other: their pods meet through the
    probes' rendezvous (a headless Service the real API server serves), never by timing luck."""
    checks = {t["name"]: (t.get("extra") or {}).get("check") for t in sim_report["results"]["tests"]}
    messages = {t["name"]: t.get("message") or "" for t in real_report["results"]["tests"]}
    want, got = verdicts(sim_report), verdicts(real_report)
    assert sorted(got) == sorted(want)
    differ = {test: (want[test], got[test]) for test in want if want[test] != got[test]}
    by_proxy = {test for test in differ if _by_proxy(checks[test])}
    unexplained = {t: differ[t] for t in differ if t not in by_proxy}
    # Each differing test's whole message (the first line names the cause): a dict's repr is cut short.
    assert unexplained == {}, "\n".join(f"{t}: {differ[t]}: {messages[t].splitlines()[0] if messages[t] else ''}"
                                         for t in sorted(unexplained))
    for test in by_proxy:  # the API server refused to proxy to the loopback pod address, as it must
        assert PROXY_REFUSAL in messages[test], (test, messages[test])
    return got


@pytest.mark.parametrize("name", PROFILES)
def test_the_real_control_plane_gives_the_simulated_verdicts(name: str, real_cluster: RealCluster,
                                                              tmp_path: Path) -> None:
    profile = profile_file(name, tmp_path)
    with ThreadPoolExecutor(1) as pool:  # the --simulate run meanwhile
        options = ("--label-nodes",) if name in RUNNER_PROFILES else ()
        simulation = pool.submit(suite_run, None, tmp_path / "sim", *options, simulate=str(profile))
        with real_cluster.agents(profile):
            if name in RUNNER_PROFILES:
                runner = install_runner(real_cluster, tmp_path)
                since = audit_mark(real_cluster)
                real = suite_run(runner, tmp_path / "real", "--namespace", PROBE_NAMESPACE, "--label-nodes")
                real_cluster.runner_runs[name] = (since, audit_mark(real_cluster))
            else:
                real = suite_run(real_cluster.kubeconfig, tmp_path / "real")
        simulated = simulation.result()
    # PASS, FAIL or DEGRADED only (17): every node tested, every suite run
    assert simulated.returncode in (0, 1, 17), simulated.stdout[-3000:]
    assert real.returncode in (0, 1, 17), real.stdout[-3000:]
    sim_report = json.loads((tmp_path / "sim" / "report.json").read_text())
    real_report = json.loads((tmp_path / "real" / "report.json").read_text())
    got = assert_same_verdicts(sim_report, real_report)
    checks = {t["name"]: (t.get("extra") or {}).get("check") for t in sim_report["results"]["tests"]}
    if name in RUNNER_PROFILES:
        refused = [(e["verb"], e.get("objectRef")) for e in audit_events(real_cluster, RUNNER_USER,
                                                                         *real_cluster.runner_runs[name])
                   if (e.get("responseStatus") or {}).get("code") == 403]
        assert refused == []
    if name in FAULTS:  # each fault is caught on the real control plane too, by its own check
        failed = {checks[t] for t, (status, _) in got.items() if status == "failed"}
        caught = {fault_catalog()[str(f["id"])].check for f in FAULTS[name][1]}
        assert caught <= failed, (caught - failed, real.stdout[-3000:])


def test_the_runner_used_every_rule_of_its_roles(real_cluster: RealCluster) -> None:
    """Over the runner's runs above, every rule of its ClusterRole and Role allowed a request the
    suites made (the roles hold nothing the suites do not use), and none was refused."""
    missing = set(RUNNER_PROFILES) - set(real_cluster.runner_runs)
    if missing:
        pytest.skip(f"the runner's runs did not all run here: {sorted(missing)}")
    runs = real_cluster.runner_runs
    events = [e for run in RUNNER_PROFILES for e in audit_events(real_cluster, RUNNER_USER, *runs[run])]
    unused = []
    for path, namespace in (("clusterrole.yaml", None), ("role.yaml", PROBE_NAMESPACE)):
        for rule in yaml.safe_load((ROOT / "manifests" / "runner" / path).read_text())["rules"]:
            if not rule_used(rule, namespace, events):
                unused.append((path, rule))
    assert unused == []
    assert [e for e in events if (e.get("responseStatus") or {}).get("code") == 403] == []


#: Fleet states (issue 25) on healthy-h100's second node, with the options that test such a node: the
#: real kube-scheduler v1.36's NodeUnschedulable and TaintToleration plugins and the real node
#: lifecycle controller meet the probe pods, and the verdicts, the coverage and the exit status are the
#: simulated run's.
FLEET_STATES: dict[str, tuple[str, tuple[str, ...]]] = {
    "cordoned": ("node-cordoned", ()),
    "cordoned-included": ("node-cordoned", ("--include-cordoned",)),
    "tainted": ("node-tainted", ()),
    "tainted-tolerated": ("node-tainted", ("--tolerate", "dedicated=training:NoSchedule")),
    "busy": ("gpus-busy", ()),
    "not-ready": ("node-not-ready", ()),
}


@pytest.mark.parametrize("state", FLEET_STATES)
def test_fleet_states_meet_the_real_scheduler_with_the_simulated_verdicts(state: str, real_cluster: RealCluster,
                                                                          tmp_path: Path) -> None:
    from node_states import eventually

    fault, options = FLEET_STATES[state]
    doc = yaml.safe_load((PROFILE_DIR / "healthy-h100.yaml").read_text())
    doc["name"], doc["faults"] = f"fleet-{state}", [{"id": fault, "pool": "h100", "node": 1}]
    profile = tmp_path / f"fleet-{state}.yaml"
    profile.write_text(yaml.safe_dump(doc, sort_keys=False))
    with ThreadPoolExecutor(1) as pool:
        simulation = pool.submit(suite_run, None, tmp_path / "sim", *options, simulate=str(profile))
        with real_cluster.agents(profile):
            core = real_cluster.core
            if fault == "gpus-busy":  # the tenant's pod runs before the suite looks
                eventually("the tenant's pod Running", lambda: core.read_namespaced_pod("train-h100-1-0", "tenant-a"),
                           lambda p: p.status.phase == "Running", timeout=60)
            if fault == "node-cordoned":  # the real node lifecycle controller's taint follows the cordon
                eventually("the unschedulable taint", lambda: core.read_node("h100-1"), lambda n: any(
                    t.key == "node.kubernetes.io/unschedulable" for t in n.spec.taints or ()), timeout=60)
            real = suite_run(real_cluster.kubeconfig, tmp_path / "real", *options)
        simulated = simulation.result()
    tested = state.endswith(("-included", "-tolerated"))
    assert simulated.returncode == (0 if tested else 15), simulated.stdout[-3000:]
    sim_report = json.loads((tmp_path / "sim" / "report.json").read_text())
    real_report = json.loads((tmp_path / "real" / "report.json").read_text())
    assert_same_verdicts(sim_report, real_report)
    # the exit status too, but where the pod proxy's refusal (above) is the real run's only failure
    proxy_only = all(_by_proxy((t.get("extra") or {}).get("check")) for t in real_report["results"]["tests"]
                     if t["status"] == "failed")
    assert real.returncode == simulated.returncode or (real.returncode == 1 and proxy_only), real.stdout[-3000:]
    sim_cov, real_cov = (r["extra"]["gpuconf"]["coverage"] for r in (sim_report, real_report))
    assert real_cov["line"] == sim_cov["line"] == ("2 of 2 GPU nodes tested" if tested else
                                                   f"1 of 2 GPU nodes tested; 1 {FLEET_WORDS[fault]}")
    assert [(u["node"], u["state"]) for u in real_cov["untested"]] == \
        [(u["node"], u["state"]) for u in sim_cov["untested"]]


FLEET_WORDS = {"node-cordoned": "cordoned", "node-tainted": "tainted", "gpus-busy": "busy",
               "node-not-ready": "NotReady"}


def test_two_shards_on_the_real_control_plane_merge_into_the_unsharded_simulated_verdicts(
        real_cluster: RealCluster, tmp_path: Path) -> None:
    """A sharded run (--shard, gpuconf report merge) against the real scheduler and controllers:
    plugin-and-dra's two pools (device plugin, DRA) as two shards side by side, each in its own run
    namespace with its own liveness mark, merged into one sign-off that gives the unsharded simulated
    run's verdicts test by test (the pod proxy's refusal excepted, as above) and counts every node."""
    from gpuconf.cli import main

    profile = PROFILE_DIR / "plugin-and-dra.yaml"
    with ThreadPoolExecutor(3) as pool:
        simulation = pool.submit(suite_run, None, tmp_path / "sim", simulate=str(profile))
        with real_cluster.agents(profile):
            shards = [pool.submit(suite_run, real_cluster.kubeconfig, tmp_path / f"s{i}", "--shard", f"{i}/2",
                                  "--shard-run", "real-1") for i in range(2)]
            ran = [shard.result() for shard in shards]
        simulated = simulation.result()
    assert simulated.returncode in (0, 1, 17), simulated.stdout[-3000:]
    assert all(r.returncode in (0, 1, 17) for r in ran), [r.stdout[-3000:] for r in ran]
    plans = [json.loads((tmp_path / f"s{i}" / "report.json").read_text())["extra"]["gpuconf"]["shard"]
             for i in range(2)]
    assert sorted(sorted(p["nodes"]) for p in plans) == [["h100-0", "h100-1"], ["h200-0", "h200-1"]]  # pools whole
    out, err = io.StringIO(), io.StringIO()
    code = main(["report", "merge", str(tmp_path / "s0"), str(tmp_path / "s1"), "--out", str(tmp_path / "merged")],
                stdout=out, stderr=err)
    assert code in (0, 1, 17) and err.getvalue() == "", (out.getvalue(), err.getvalue())
    assert "merged 2 of 2 shards of run real-1" in out.getvalue() and "4 of 4 GPU nodes tested" in out.getvalue()
    sim_report = json.loads((tmp_path / "sim" / "report.json").read_text())
    merged_report = json.loads((tmp_path / "merged" / "report.json").read_text())
    assert_same_verdicts(sim_report, merged_report)
    merged = merged_report["extra"]["gpuconf"]
    assert merged["coverage"]["line"] == sim_report["extra"]["gpuconf"]["coverage"]["line"] == "4 of 4 GPU nodes tested"
    assert merged["shard"]["merged"] == [0, 1] and merged["shard"]["missing"] == []
