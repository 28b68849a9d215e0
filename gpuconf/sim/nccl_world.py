"""Multi-process nccl-probe jobs on a simulated cluster (``--rank R --world-size W --id-addr HOST:PORT``).

Every rank's container joins a :class:`Rendezvous` keyed by its ``--id-addr`` (one per simulated
cluster, shared by all its nodes). The bootstrap follows probes/nccl-probe/bootstrap.h: rank 0
listens from its start until every peer reported or its ``--bootstrap-timeout`` passed; a peer
tries to reach rank 0 from its own start until its own bootstrap timeout. A peer reports when
those two windows overlap. Then rank 0 decides (``ok``, ``peers-missing``, ``no-usable-gpu``,
``gpu-count-mismatch``) and every reported peer gets that reply; a peer that never reached rank 0
gives up with "could not reach rank 0". As in the probe, a bootstrap that timed out exits 6 with
hung false; a refusal for any other reason exits 7.

After an ``ok`` bootstrap every rank runs the same all-reduce sweep over ``W x local`` ranks:
within one node at the node's ``interconnect.busbw_gbps`` (P2P/NVLink, NVLS), across nodes at
the slowest node's NIC figure (``nic_busbw_gbps`` per NIC, times the NICs its GPUs in the job
use) over NET/IB with GDR, or NET/Socket where a node has no NIC. ``nccl-hang`` on any node of
the job hangs the first large all-reduce on every rank: each one's watchdog aborts after its
``--timeout`` (exit 6, hung true).

Times are wall-clock seconds of the agents' clock; the nominal durations are divided by the
timings' speed. A bootstrap window is never shorter than ``floor_seconds`` of real time: the
ranks' pods are created by separate API calls whose latency is not scaled by the speed.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpuconf.compat.versions import CudaVersion
from gpuconf.sim import emulate
from gpuconf.sim.profile import SimNode

__all__ = ["Outcome", "RankArgs", "Rendezvous", "Ticket", "rank_args"]

#: Multi-node busbw where a node has no NIC figure at all: TCP sockets over the pod network.
_SOCKET_BUSBW_GBPS = 2.5
#: A NIC's all-reduce busbw when the profile gives only its line rate (Gb/s -> GB/s, ~94 % usable).
_NIC_EFFICIENCY = 0.94
_HANG_FROM = 1 << 20  # like the single-process emulation: large messages never complete
_ARGS_HASH = "9a3c5e1f00d2b4c7"


@dataclass(frozen=True)
class RankArgs:
    rank: int
    world: int
    id_addr: str
    timeout_s: float = 300.0
    bootstrap_timeout_s: float = 120.0


def _value(args: Sequence[str], flag: str) -> str | None:
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def rank_args(args: Sequence[str]) -> RankArgs | None:
    """The multi-process arguments of an nccl-probe command line; None for a single-process run
    (no --world-size, or 1). Raises ValueError on the probe's usage errors."""
    world = _value(args, "--world-size")
    if world in (None, "", "1"):
        return None
    rank, addr = _value(args, "--rank"), _value(args, "--id-addr")
    if rank is None or addr is None or world is None:
        raise ValueError("--rank, --world-size and --id-addr go together")
    try:
        r, w = int(rank), int(world)
        timeout = float(_value(args, "--timeout") or 300.0)
        boot = float(_value(args, "--bootstrap-timeout") or 120.0)
    except ValueError as e:
        raise ValueError(f"bad number: {e}") from None
    if not 0 <= r < w:
        raise ValueError(f"--rank {r} is not in 0..{w - 1}")
    return RankArgs(r, w, addr, timeout, boot)


@dataclass
class _Rank:
    args: RankArgs
    node: SimNode
    hostname: str
    ip: str
    arrived: float  # real clock
    window: float  # real seconds the bootstrap waits
    local: int  # usable GPUs (0: none)
    base: dict[str, Any]  # the single-process document of its GPUs, the starting point
    base_code: int
    limit: int  # the largest message its GPUs' memory allows (0: no GPU)


@dataclass
class _Job:
    id_addr: str
    world: int
    ranks: dict[int, _Rank] = field(default_factory=dict)
    closed: bool = False  # rank 0 decided: later arrivals start a new job
    serial: int = 0

    @property
    def fingerprint(self) -> str:
        """Stands for the FNV-1a of the job's unique id: the same on every rank, new for each job."""
        return hashlib.sha256(f"{self.id_addr}#{self.serial}".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Outcome:
    code: int
    output: str
    finish_at: float  # real clock


@dataclass(frozen=True)
class Ticket:
    """One rank's place in one job (kept by its container)."""

    job: _Job
    rank: int


class Rendezvous:
    """Every multi-process nccl-probe job of one simulated cluster, by ``--id-addr``."""

    def __init__(self, *, speed: float, run_seconds: float, floor_seconds: float = 2.0,
                 poll_seconds: float = 0.05) -> None:
        self.speed = speed
        self.run_seconds = run_seconds
        self.floor_seconds = floor_seconds
        self.poll_seconds = poll_seconds
        self._lock = threading.Lock()
        self._jobs: dict[str, list[_Job]] = {}
        self._serial = 0

    def join(self, args: RankArgs, node: SimNode, *, visible: Sequence[emulate.Visible], image_cuda: CudaVersion,
             env: Mapping[str, str], started_at: str, hostname: str, ip: str, now: float) -> Ticket:
        """Rank ``args.rank`` starts now on ``node``."""
        calm = replace(node, interconnect=replace(node.interconnect, hang=False))
        code, out = emulate.nccl_probe_run(calm, visible=visible, image_cuda=image_cuda, env=env,
                                           started_at=started_at, hostname=hostname)
        base = json.loads(out)
        local = len(base["local_gpus"])
        window = max(args.bootstrap_timeout_s / self.speed, self.floor_seconds)
        memory = base["memory"]
        limit = int(memory["local_limit_bytes"]) if memory.get("available") is not False else 0
        me = _Rank(args, node, hostname, ip, now, window, local, base, code, limit)
        with self._lock:
            jobs = self._jobs.setdefault(args.id_addr, [])
            job = jobs[-1] if jobs else None
            if job is None or job.closed or args.rank in job.ranks or job.world != args.world or \
                    (0 in job.ranks and now > job.ranks[0].arrived + job.ranks[0].window):
                self._serial += 1
                job = _Job(args.id_addr, args.world, serial=self._serial)
                jobs.append(job)
                del jobs[:-8]  # finished jobs are not needed once their ranks resolved
            job.ranks[args.rank] = me
        return Ticket(job, args.rank)

    def poll(self, ticket: Ticket, now: float) -> Outcome | float:
        """The rank's outcome once it is decided, else the time to ask again."""
        with self._lock:
            return self._resolve(ticket.job, ticket.rank, now)

    # The bootstrap ---------------------------------------------------------------------------

    def _reported(self, job: _Job, r: int) -> float | None:
        """When peer ``r`` reported to rank 0 (None: never, as far as is known)."""
        zero, peer = job.ranks.get(0), job.ranks.get(r)
        if zero is None or peer is None:
            return None
        t = max(peer.arrived, zero.arrived)
        return t if t <= min(zero.arrived + zero.window, peer.arrived + peer.window) else None

    def _decision(self, job: _Job, now: float) -> tuple[float, str, int | None, str] | None:
        """Rank 0's decision (time, status, detail rank, reason) once it is made."""
        zero = job.ranks.get(0)
        if zero is None:
            return None
        times = {r: self._reported(job, r) for r in range(1, job.world)}
        deadline = zero.arrived + zero.window
        if all(t is not None for t in times.values()):
            at = max([zero.arrived, *(t for t in times.values() if t is not None)])
        elif now >= deadline:
            missing = ",".join(str(r) for r, t in times.items() if t is None)
            first = next(r for r, t in times.items() if t is None)
            job.closed = True
            return deadline, "peers-missing", first, (f"peer rank(s) {missing} did not report within "
                                                      f"{int(zero.args.bootstrap_timeout_s)} s")
        else:
            return None
        job.closed = True
        gpus = [job.ranks[r].local for r in range(job.world)]
        for r, g in enumerate(gpus):
            if g == 0:
                return at, "no-usable-gpu", r, f"rank {r} sees no GPU"
        for r, g in enumerate(gpus[1:], start=1):
            if g != gpus[0]:
                return at, "gpu-count-mismatch", r, f"rank {r} sees {g} GPUs, rank 0 sees {gpus[0]}"
        return at, "ok", None, f"all {job.world} processes report {gpus[0]} local GPUs"

    def _resolve(self, job: _Job, r: int, now: float) -> Outcome | float:
        me = job.ranks[r]
        give_up = me.arrived + me.window
        decision = self._decision(job, now)
        zero = job.ranks.get(0)
        if r != 0:
            reported = self._reported(job, r)
            if reported is None:  # with rank 0 there, final; without, it may still come
                if now < give_up:
                    return min(give_up, now + self.poll_seconds) if zero is None else give_up
                return self._client_gave_up(job, me, connected=False)
            if decision is None:
                return min(give_up, now + self.poll_seconds) if now < give_up else \
                    self._client_gave_up(job, me, connected=True)
            if decision[0] > give_up:
                return self._client_gave_up(job, me, connected=True)
        elif decision is None:
            return min(give_up, now + self.poll_seconds)
        assert decision is not None
        at, status, detail, reason = decision
        if status == "ok":
            return self._run(job, me, at, reason)
        return self._refused(job, me, at, status, detail, reason)

    # The documents ---------------------------------------------------------------------------

    def _args(self, me: _Rank) -> dict[str, Any]:
        doc = me.base
        doc["args"].update(mode="multi-process", rank=me.args.rank, world_size=me.args.world,
                           id_addr=me.args.id_addr, timeout_s=me.args.timeout_s,
                           bootstrap_timeout_s=me.args.bootstrap_timeout_s)
        doc["watchdog"]["timeout_s"] = me.args.timeout_s
        return doc

    def _bootstrap(self, job: _Job, me: _Rank, status: str, reason: str, *, ok: bool,
                   detail: int | None = None, at: float | None = None, reply: bool = True,
                   connected: bool = True) -> dict[str, Any]:
        port = me.args.id_addr.rsplit(":", 1)[-1]
        b: dict[str, Any] = {"mode": "multi-process", "rank": me.args.rank, "world_size": me.args.world,
                             "local_gpus_sent": me.local, "id_addr": me.args.id_addr, "args_hash": _ARGS_HASH}
        ms = round(((at if at is not None else me.arrived + me.window) - me.arrived) * self.speed * 1000, 3)
        if me.args.rank == 0:
            peers = [{"rank": r, "local_gpus": p.local, "address": f"{p.ip}:{40000 + r}", "accepted": True}
                     for r, p in sorted(job.ranks.items()) if r != 0 and self._reported(job, r) is not None]
            b.update(role="server", unique_id={"obtained": True, "fingerprint": job.fingerprint,
                                               "result": {"call": "ncclGetUniqueId", "code": 0,
                                                          "name": "ncclSuccess", "message": "no error",
                                                          "last_error": None}},
                     listen={"address": f"0.0.0.0:{port}", "port": int(port) if port.isdigit() else 0, "ok": True,
                             "error": None},
                     peers_expected=me.args.world - 1, peers=peers, ignored_connections=[],
                     peers_reported=len(peers),
                     decision={"status": status, "detail_rank": detail, "reason": reason},
                     replies_sent=len(peers), id_served=ok and len(peers) == me.args.world - 1, ms=ms)
            own_reason = reason
        else:
            zero = job.ranks.get(0)
            b.update(role="client", unique_id={"available": False, "reason": "only rank 0 creates the unique id"},
                     connect={"target": me.args.id_addr, "attempts": 1 if connected else max(1, int(me.window * 10)),
                              "connected": connected,
                              "address": f"{zero.ip}:{port}" if connected and zero is not None else None,
                              "last_error": None},
                     reply={"status": status, "rank0_local_gpus": zero.local if zero else 0, "detail_rank": detail}
                     if reply else None, id_received=ok, ms=ms)
            own_reason = (f"unique id received from rank 0; all processes report {me.local} local GPUs" if ok
                          else f"rank 0 refused: {status}" + (f" (rank {detail})" if detail is not None else ""))
        b.update(status=status, reason=own_reason, id_fingerprint=job.fingerprint if ok else None,
                 agreed_local_gpus=me.local if ok else None)
        return b

    def _not_reached(self, doc: dict[str, Any], *, rank0: bool) -> None:
        absent = {"available": False, "reason": "not reached"}
        doc.update(comm_init=absent, nranks=None, memory=absent, sweep=absent, summary=absent)
        settings = doc["nccl_debug"]["settings"]
        if rank0:  # ncclGetUniqueId logs the version and the bootstrap interface
            runtime = doc["runtime"]["version"]
            doc["nccl_debug"] = {"source": "probe", "settings": settings, "captured": True, "lines_total": 3,
                                 "nccl_version": f"2.27.7+cuda{runtime}", "transports": [], "transport_kinds": [],
                                 "channel_lines": 0, "network": {"name": None, "plugin": None, "lines": []},
                                 "nvls": {"supported": None, "channels": None, "used": None, "lines": []},
                                 "gdr": {"enabled": None, "lines": []}, "warnings": [], "excerpt": [],
                                 "excerpt_truncated": False}
        else:
            doc["nccl_debug"] = {"source": "probe", "settings": settings, "captured": False,
                                 "reason": "NCCL wrote no debug output (no NCCL call that logs was made)"}

    def _done(self, me: _Rank, doc: dict[str, Any], code: int, reason: str, at: float) -> Outcome:
        doc["duration_ms"] = round((at - me.arrived) * self.speed * 1000, 3)
        c, out = emulate._finish(doc, code, reason)
        return Outcome(c, out, at)

    def _client_gave_up(self, job: _Job, me: _Rank, *, connected: bool) -> Outcome:
        doc = self._args(me)
        bt = int(me.args.bootstrap_timeout_s)
        if connected:
            why = f"connected to rank 0 but got no reply within {bt} s (read: timed out)"
        else:
            zero = job.ranks.get(0)
            target = f"{zero.ip if zero else me.args.id_addr.rsplit(':', 1)[0]}:{me.args.id_addr.rsplit(':', 1)[-1]}"
            why = f"could not reach rank 0 within {bt} s (connect {target}: Connection refused)"
        b = self._bootstrap(job, me, "timeout", why, ok=False, reply=False, connected=connected)
        b["reason"] = why
        b["connect"]["last_error"] = why[why.index("(") + 1:-1]
        doc["bootstrap"] = b
        self._not_reached(doc, rank0=False)
        at = me.arrived + me.window
        if me.local == 0:
            return self._done(me, doc, 4, f"no GPU visible; bootstrap: {why}", at)
        return self._done(me, doc, 6, f"bootstrap timed out: {why}", at)

    def _refused(self, job: _Job, me: _Rank, at: float, status: str, detail: int | None, reason: str) -> Outcome:
        doc = self._args(me)
        b = self._bootstrap(job, me, status, reason, ok=False, detail=detail, at=at)
        doc["bootstrap"] = b
        self._not_reached(doc, rank0=me.args.rank == 0)
        own = b["reason"]
        if me.local == 0:
            return self._done(me, doc, 4, f"no GPU visible; bootstrap: {own}", at)
        if status == "peers-missing":
            return self._done(me, doc, 6, f"bootstrap timed out: {own}", at)
        return self._done(me, doc, 7, f"bootstrap failed: {own}", at)

    def _run(self, job: _Job, me: _Rank, at: float, reason: str) -> Outcome:
        doc = self._args(me)
        doc["bootstrap"] = self._bootstrap(job, me, "ok", reason, ok=True, at=at)
        ranks = [job.ranks[r] for r in range(job.world)]
        local = me.local
        n = job.world * local
        first = me.args.rank * local
        for g in doc["local_gpus"]:
            g["global_rank"] = first + g["index"]
        per_node: dict[str, tuple[SimNode, int]] = {}
        for p in ranks:
            node, gpus = per_node.get(p.node.name, (p.node, 0))
            per_node[p.node.name] = (node, gpus + p.local)
        peak, transports, network, gdr = _interconnect(list(per_node.values()), me.ip)
        limit = min(p.limit for p in ranks)
        max_bytes = doc["args"]["max_bytes"]
        hang = any(node.interconnect.hang for node, _ in per_node.values())
        factor = 2 * (n - 1) / n
        sizes: list[dict[str, Any]] = []
        size, hung_at = 8, None
        while size <= limit:
            if hang and size >= _HANG_FROM:
                hung_at = size
                break
            busbw = emulate._nccl_curve(peak, size)
            algbw = busbw / factor
            count = max(size // 4, 1)
            time_us = round(size / (algbw * 1e3), 3)
            sizes.append({"bytes": size, "count": count, "warmup": 5, "iters": 20 if size < (256 << 20) else 5,
                          "time_us": time_us, "time_us_per_gpu": [time_us] * local, "algbw_gbps": round(algbw, 3),
                          "busbw_gbps": round(busbw, 3), "checked_elements": count, "mismatches": 0,
                          "correct": True})
            size *= 2
        doc["nranks"] = n
        doc["comm_init"].update(nranks=n, global_ranks=list(range(first, first + local)))
        doc["memory"].update(agreed_max_bytes=limit, reduced=limit < max_bytes)
        doc["sweep"].update(completed=hung_at is None, running_bytes=hung_at, sizes=sizes)
        large = [s["busbw_gbps"] for s in sizes if s["bytes"] >= emulate._LARGE]
        top = max(sizes, key=lambda s: s["busbw_gbps"]) if sizes else None
        doc["summary"].update(
            nranks=n, local_gpus=local, sizes_run=len(sizes), busbw_factor=factor,
            peak_busbw_gbps=top["busbw_gbps"] if top else None, peak_algbw_gbps=top["algbw_gbps"] if top else None,
            peak_at_bytes=top["bytes"] if top else None, large_message_sizes=len(large),
            large_message_avg_busbw_gbps=round(sum(large) / len(large), 3) if large else None)
        debug = doc["nccl_debug"]
        nvls = "NVLS" in transports
        debug.update(transports=transports, transport_kinds=sorted({t.split("/")[0] for t in transports}),
                     channel_lines=16 * local * job.world, network=network, gdr=gdr,
                     excerpt=_excerpt(me, local, n, transports))
        debug["nvls"].update(used=nvls, channels=16 if nvls else 0)
        if hung_at is not None:
            what = f"all-reduce of {hung_at} bytes"
            doc["hung"] = True
            doc["watchdog"].update(fired=True, step=what, abort={"attempted": True, "completed": True, "ms": 120.0})
            return self._done(me, doc, 6, f"{what} did not complete within {int(me.args.timeout_s)} s; "
                                          "communicators aborted", at + me.args.timeout_s / self.speed)
        return self._done(me, doc, 0, "ok", at + self.run_seconds / self.speed)


def _nic_figure(node: SimNode, gpus: int) -> float | None:
    ic = node.interconnect
    if ic.nics <= 0 or not (ic.nic_busbw_gbps or ic.nic_gbps):
        return None
    per_nic = ic.nic_busbw_gbps if ic.nic_busbw_gbps is not None else ic.nic_gbps / 8 * _NIC_EFFICIENCY
    return per_nic * min(ic.nics, max(gpus, 1))


def _interconnect(nodes: list[tuple[SimNode, int]], ip: str) -> tuple[float, list[str], dict[str, Any],
                                                                      dict[str, Any]]:
    """(peak busbw, transports, nccl_debug.network, nccl_debug.gdr) of a job over ``nodes``
    (each with its GPUs in the job), as the rank at pod address ``ip`` logs them."""
    intra: list[str] = []
    for node, gpus in nodes:
        if gpus > 1:
            nvls = emulate.nvls_usable(node, gpus)
            intra += (["NVLS", "P2P/CUMEM"] if nvls else ["P2P/CUMEM"]) if node.interconnect.nvlink \
                else ["SHM/direct/direct"]
    no_net: dict[str, Any] = {"name": None, "plugin": None, "lines": []}
    if len(nodes) == 1:
        node, _ = nodes[0]
        peak = node.interconnect.busbw_gbps or emulate._PCIE_BUSBW_GBPS
        return peak, sorted(set(intra)), no_net, {"enabled": None, "lines": []}
    figures = [_nic_figure(node, gpus) for node, gpus in nodes]
    if any(f is None for f in figures):
        lines = [f"NET/Socket : Using [0]eth0:{ip}<0>"]
        return (_SOCKET_BUSBW_GBPS, sorted({*intra, "NET/Socket/0"}), {"name": "Socket", "plugin": None,
                                                                       "lines": lines},
                {"enabled": None, "lines": []})
    peak = min(f for f in figures if f is not None)
    nics = min(node.interconnect.nics for node, _ in nodes)
    hcas = " ".join(f"[{i}]mlx5_{i}:1/IB" for i in range(min(nics, 8)))
    return (peak, sorted({*intra, "NET/IB/0/GDRDMA"}),
            {"name": "IB", "plugin": None, "lines": [f"NET/IB : Using {hcas} ; OOB eth0:{ip}<0>"]},
            {"enabled": True, "lines": ["NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'"]})


def _excerpt(me: _Rank, local: int, n: int, transports: list[str]) -> list[str]:
    first = me.args.rank * local
    out = []
    if local > 1:
        intra = next((t for t in transports if not t.startswith(("NET", "NVLS"))), transports[0])
        out.append(f"NCCL INFO Channel 00/0 : {first}[0] -> {first + 1}[1] via {intra}")
    net = next((t for t in transports if t.startswith("NET")), None)
    if net is not None:
        last = first + local - 1
        out.append(f"NCCL INFO Channel 00/0 : {last}[{local - 1}] -> {(last + 1) % n}[0] [send] via {net}")
    return out
