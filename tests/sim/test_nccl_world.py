"""Multi-process nccl-probe jobs on the simulated cluster: every rank's pod, bound by hand, meets
its peers through the --id-addr rendezvous, as the real probe's TCP bootstrap would."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

from gpuconf.probes.nccl import NcclProbeReport, parse_nccl_probe
from gpuconf.sim.agent import NodeAgents
from gpuconf.sim.nccl_world import rank_args
from gpuconf.sim.profile import expand, load_profile, with_faults

from .test_agent_support import finished, wait_pod

IMAGE = "registry.example/gpuconf/nccl-probe:0.1.0-cuda13.0.2"
SLOW_NIC = {"id": "nccl-slow-link", "pool": "h100", "node": 0, "link": "nic", "factor": 0.5}


@contextlib.contextmanager
def agents_for(server: Any, api: Any, *, nodes: int = 2, faults: list[dict[str, Any]] | None = None,
               **options: Any) -> Iterator[NodeAgents]:
    """NodeAgents for healthy-h100 with ``nodes`` nodes (and faults), serving logs."""
    p = load_profile("healthy-h100")
    p = dataclasses.replace(p, pools=tuple(dataclasses.replace(pool, count=nodes) for pool in p.pools))
    with NodeAgents(expand(with_faults(p, faults) if faults else p), api, **options) as agents:
        agents.serve_logs(server)
        agents.confirm_deletions(server)
        yield agents


def rank_pod(name: str, node: str, rank: int, world: int, addr: str, *, gpus: int = 8,
             extra: list[str] | None = None) -> dict[str, Any]:
    args = ["--rank", str(rank), "--world-size", str(world), "--id-addr", addr, *(extra or [])]
    return {"metadata": {"name": name, "labels": {"gpuconf.io/probe": "nccl-probe"}},
            "spec": {"nodeName": node, "restartPolicy": "Never", "runtimeClassName": "nvidia", "hostname": name,
                     "containers": [{"name": "probe", "image": IMAGE, "args": args,
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def run_job(core: Any, namespace: str, job: str, nodes: list[str], *, gpus: int = 8,
            extra: list[str] | None = None, timeout: float = 15.0) -> list[tuple[int, NcclProbeReport, str]]:
    """Start one rank per entry of ``nodes``; (exit code, report, raw log) of every rank, by rank."""
    addr = f"{job}-0.{job}:29500"
    for r, node in enumerate(nodes):
        core.create_namespaced_pod(namespace, rank_pod(f"{job}-{r}", node, r, len(nodes), addr, gpus=gpus,
                                                       extra=extra))
    out = []
    for r in range(len(nodes)):
        pod = wait_pod(core, namespace, f"{job}-{r}", finished, timeout=timeout)
        code = pod.status.container_statuses[0].state.terminated.exit_code
        text = core.read_namespaced_pod_log(f"{job}-{r}", namespace)
        out.append((code, parse_nccl_probe(text, exit_code=code, source=f"{job}-{r}"), text))
    return out


def large_busbw(report: NcclProbeReport) -> float:
    assert report.large_message_avg_busbw_gbps is not None
    return report.large_message_avg_busbw_gbps


def test_rank_args_read_the_probes_flags():
    assert rank_args(["--max-bytes", "1G"]) is None and rank_args(["--world-size", "1"]) is None
    got = rank_args(["--rank", "1", "--world-size=2", "--id-addr", "a:1", "--bootstrap-timeout", "5"])
    assert got is not None and (got.rank, got.world, got.id_addr, got.bootstrap_timeout_s) == (1, 2, "a:1", 5.0)


def test_two_ranks_across_two_nodes_agree_over_ib_with_gdr(apiserver, api_client, core, namespace):
    with agents_for(apiserver, api_client):
        ranks = run_job(core, namespace, "w2", ["h100-0", "h100-1"])
    assert [code for code, _, _ in ranks] == [0, 0]
    reports = [r for _, r, _ in ranks]
    assert {r.nranks for r in reports} == {16} and {r.bootstrap_status for r in reports} == {"ok"}
    assert len({large_busbw(r) for r in reports}) == 1
    assert 300 < large_busbw(reports[0]) <= 8 * 47  # eight NDR NICs at 47 GB/s each
    assert reports[0].local_gpu_uuids != reports[1].local_gpu_uuids
    for _, report, _ in ranks:
        assert (report.transports, report.network, report.gdr_enabled) == (("NET/IB/0/GDRDMA", "NVLS", "P2P/CUMEM"),
                                                                           "IB", True)
        assert report.sizes and all(s.correct for s in report.sizes) and report.all_correct


def test_four_ranks_two_per_node_see_their_peers_and_global_ranks(apiserver, api_client, core, namespace):
    import json

    with agents_for(apiserver, api_client):
        ranks = run_job(core, namespace, "w4", ["h100-0", "h100-0", "h100-1", "h100-1"], gpus=4)
    assert [code for code, _, _ in ranks] == [0, 0, 0, 0]
    docs = [json.loads(text) for _, _, text in ranks]
    assert [d["comm_init"]["global_ranks"] for d in docs] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11],
                                                               [12, 13, 14, 15]]
    assert [d["hostname"] for d in docs] == ["w4-0", "w4-1", "w4-2", "w4-3"]
    assert docs[0]["bootstrap"]["role"] == "server" and docs[0]["bootstrap"]["peers_reported"] == 3
    assert {d["bootstrap"]["role"] for d in docs[1:]} == {"client"}
    for d in docs:
        assert d["args"]["mode"] == "multi-process" and d["nranks"] == 16
        assert "NET/IB/0/GDRDMA" in d["nccl_debug"]["transports"] and "P2P/CUMEM" in d["nccl_debug"]["transports"]
    assert len({d["summary"]["large_message_avg_busbw_gbps"] for d in docs}) == 1
    assert len({d["bootstrap"]["id_fingerprint"] for d in docs}) == 1


def test_a_rank_whose_peer_never_starts_gives_up_after_its_bootstrap_timeout(apiserver, api_client, core,
                                                                              namespace):
    import json

    with agents_for(apiserver, api_client):
        addr = "lonely-0.lonely:29500"
        core.create_namespaced_pod(namespace, rank_pod("lonely-0", "h100-0", 0, 3, addr,
                                                       extra=["--bootstrap-timeout", "5"]))
        pod = wait_pod(core, namespace, "lonely-0", finished)
        text = core.read_namespaced_pod_log("lonely-0", namespace)
    code = pod.status.container_statuses[0].state.terminated.exit_code
    report = parse_nccl_probe(text, exit_code=code)
    # As the probe: a missing peer is a bootstrap timeout (exit 6, not hung), naming the ranks.
    assert (code, report.hung, report.bootstrap_status) == (6, False, "peers-missing")
    assert report.exit_reason == "bootstrap timed out: peer rank(s) 1,2 did not report within 5 s"
    doc = json.loads(text)
    assert doc["bootstrap"]["decision"]["detail_rank"] == 1 and doc["sweep"] == {"available": False,
                                                                                 "reason": "not reached"}


def test_a_peer_without_rank_0_cannot_reach_it(apiserver, api_client, core, namespace):
    with agents_for(apiserver, api_client):
        core.create_namespaced_pod(namespace, rank_pod("orphan-1", "h100-1", 1, 2, "orphan-0.orphan:29500",
                                                       extra=["--bootstrap-timeout", "5"]))
        pod = wait_pod(core, namespace, "orphan-1", finished)
        text = core.read_namespaced_pod_log("orphan-1", namespace)
    code = pod.status.container_statuses[0].state.terminated.exit_code
    report = parse_nccl_probe(text, exit_code=code)
    assert (code, report.bootstrap_status) == (6, "timeout")
    assert report.exit_reason.startswith("bootstrap timed out: could not reach rank 0 within 5 s")


def test_ranks_that_see_different_gpu_counts_are_refused(apiserver, api_client, core, namespace):
    with agents_for(apiserver, api_client):
        addr = "odd-0.odd:29500"
        core.create_namespaced_pod(namespace, rank_pod("odd-0", "h100-0", 0, 2, addr, gpus=8))
        core.create_namespaced_pod(namespace, rank_pod("odd-1", "h100-1", 1, 2, addr, gpus=4))
        codes, reports = [], []
        for name in ("odd-0", "odd-1"):
            pod = wait_pod(core, namespace, name, finished)
            codes.append(pod.status.container_statuses[0].state.terminated.exit_code)
            reports.append(parse_nccl_probe(core.read_namespaced_pod_log(name, namespace), exit_code=codes[-1]))
    assert codes == [7, 7]
    assert reports[0].exit_reason == "bootstrap failed: rank 1 sees 4 GPUs, rank 0 sees 8"
    assert reports[1].exit_reason == "bootstrap failed: rank 0 refused: gpu-count-mismatch (rank 1)"


def test_a_slow_nic_on_one_node_slows_only_the_jobs_that_include_it(apiserver, api_client, core, namespace):
    with agents_for(apiserver, api_client, nodes=3, faults=[SLOW_NIC]):
        with_slow = run_job(core, namespace, "a", ["h100-0", "h100-1"])
        without = run_job(core, namespace, "b", ["h100-1", "h100-2"])
        local = run_job(core, namespace, "c", ["h100-0", "h100-0"], gpus=4)
    assert [c for c, _, _ in with_slow + without + local] == [0] * 6
    slow, healthy = large_busbw(with_slow[0][1]), large_busbw(without[0][1])
    assert abs(slow / healthy - 0.5) < 1e-3, (slow, healthy)
    assert large_busbw(local[0][1]) > 400  # within the node: NVLink, not the NIC


def test_a_slow_nvlink_lowers_only_the_figures_within_a_node(apiserver, api_client, core, namespace):
    fault = {**SLOW_NIC, "link": "nvlink"}
    with agents_for(apiserver, api_client, faults=[fault]):
        across = run_job(core, namespace, "x", ["h100-0", "h100-1"])
        within = run_job(core, namespace, "y", ["h100-0", "h100-0"], gpus=4)
    assert 300 < large_busbw(across[0][1]) <= 8 * 47
    assert large_busbw(within[0][1]) < 470 * 0.5 + 1e-6


def test_a_hang_on_one_node_hangs_every_rank_of_its_jobs_only(apiserver, api_client, core, namespace):
    hang = {"id": "nccl-hang", "pool": "h100", "node": 0}
    with agents_for(apiserver, api_client, nodes=3, faults=[hang]):
        hung = run_job(core, namespace, "h", ["h100-0", "h100-1", "h100-0", "h100-1"], gpus=4,
                       extra=["--timeout", "30"])
        fine = run_job(core, namespace, "f", ["h100-1", "h100-2"])
    assert [c for c, _, _ in hung] == [6, 6, 6, 6] and [c for c, _, _ in fine] == [0, 0]
    for _, report, _ in hung:
        assert report.hung and report.sweep_completed is False and report.running_bytes == 1 << 20
        assert report.exit_reason == "all-reduce of 1048576 bytes did not complete within 30 s; communicators aborted"


# --- the rendezvous on its own (times are the agents' clock, speed 1) -----------------------------

def _join(world: Any, rank: int, size: int, at: float, *, node: str = "h100-0", bootstrap: float = 5.0) -> Any:
    from gpuconf.compat.versions import parse_cuda
    from gpuconf.sim.emulate import Visible
    from gpuconf.sim.nccl_world import RankArgs

    n = expand(load_profile("healthy-h100")).node(node)
    return world.join(RankArgs(rank, size, "job:29500", 300.0, bootstrap), n, visible=[Visible(g) for g in n.gpus],
                      image_cuda=parse_cuda("13.0.2"), env={}, started_at="2026-12-01T00:00:00.000Z",
                      hostname=f"r{rank}", ip=f"10.0.0.{rank + 1}", now=at)


def test_the_rendezvous_waits_for_late_peers_and_reuses_an_address_for_the_next_job():
    from gpuconf.sim.nccl_world import Outcome, Rendezvous

    world = Rendezvous(speed=1.0, run_seconds=60.0, floor_seconds=0.0)
    zero = _join(world, 0, 2, 100.0)
    assert world.poll(zero, 101.0) == 101.05  # undecided: ask again soon
    one = _join(world, 1, 2, 103.0, node="h100-1")  # within rank 0's 5 s
    done = [world.poll(t, 103.0) for t in (zero, one)]
    assert all(isinstance(o, Outcome) and o.code == 0 and o.finish_at == 163.0 for o in done)
    # the same address again: a new job, whose rank 1 comes too late for rank 0
    zero2 = _join(world, 0, 2, 200.0)
    assert zero2.job is not zero.job
    late = _join(world, 1, 2, 206.0, node="h100-1")
    got0, got1 = world.poll(zero2, 206.0), world.poll(late, 211.0)
    assert isinstance(got0, Outcome) and (got0.code, got0.finish_at) == (6, 205.0)
    assert isinstance(got1, Outcome) and got1.code == 6 and "could not reach rank 0" in got1.output


def test_the_suites_own_rank_pods_meet_through_a_build_init_container(apiserver, api_client, core, namespace):
    from gpuconf.probe_pods import make_nccl_probe_pod

    with agents_for(apiserver, api_client):
        for r, node in enumerate(("h100-0", "h100-1")):
            pod = make_nccl_probe_pod(name=f"suite-{r}", namespace=namespace, run_id="run-1", check="test", node=node,
                                      gpu_count=8, runtime_class="nvidia", rank=r, world_size=2,
                                      id_addr="suite-0.suite:29500", bootstrap_timeout_s=60)
            pod["spec"]["nodeName"] = node
            for c in pod["spec"]["containers"]:
                c["resources"]["limits"] = {k: str(v) for k, v in c["resources"]["limits"].items()}
            core.create_namespaced_pod(namespace, pod)
        reports = []
        for r in range(2):
            done = wait_pod(core, namespace, f"suite-{r}", finished)
            code = done.status.container_statuses[0].state.terminated.exit_code
            reports.append(parse_nccl_probe(core.read_namespaced_pod_log(f"suite-{r}", namespace, container="probe"),
                                            exit_code=code))
    assert [r.exit_code for r in reports] == [0, 0] and {r.nranks for r in reports} == {16}
