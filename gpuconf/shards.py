"""Sharded runs (``--shard I/N``): which of the selected GPU nodes a shard tests, so that N runner
processes (the pods of a Kubernetes Indexed Job, manifests/runner/job-sharded.yaml) test a fleet
side by side and ``gpuconf report merge`` makes one sign-off of their reports.

The partition is a function of the selected GPU nodes' names and pools alone, so every shard of a
run computes the same one from the same node list, without talking to the others:

- A pool (the GPU product, as gpuconf.checks.inventory.fact_product spells it: spaces as dashes,
  time-slicing's -SHARED suffix ignored) is never cut: all its nodes are one shard's, whatever its
  size. Nodes of no known product are one pool too (driver.version-uniform-in-pool compares them as
  the "unknown" pool).
- Pools go to shards largest first, each to the least loaded shard (ties: the lowest index). A shard
  may so be given no node (more shards than pools) or more than its share (a pool larger than
  ceil(nodes / N)); such a shard runs nothing, or takes longer.

Why pools are kept whole rather than cut for balance (issue 36): a check that compares a node with
its pool must see the pool it sees unsharded, and some of those comparisons are of what probes
observed, which a shard has only for its own nodes: runtime.require-cuda-enforced's majority (each
node's canary pods), the NCCL pairs and the like-pair floor (pods on two nodes at once). Label-only
comparisons (driver.version-uniform-in-pool, the GPU count its pool's nodes usually have) could read
the whole fleet from any shard, but those could not; cutting a pool judged h100-1's skewed driver
against itself (DEGRADED unsharded, PASS in each of two shards). Kept whole, every pool comparison is
made in one shard, over the pool it is made over unsharded, so the merge of the shards is the
unsharded run verdict for verdict. The cost: the largest pool bounds a shard's size (a fleet of one
GPU product is one shard's, whatever N; a runner holds ~0.77 MiB a node, benchmarks/README.md).

Stability: a node added to or removed from the fleet can move whole pools to other shards when it
changes the pools' size order. What matters within a run holds: shards that saw the same node list
agree, and shards of one run that saw different node lists (a node joined between their starts) carry
different plan fingerprints, which the merge refuses.

Cluster-wide checks (a test not parametrized over a GPU node) run in one shard: shard 0, or the
shard holding most of the nodes they need (``ShardPlan.home``); every shard records each one's shard
(``ShardPlan.homes``), so the merge names a missing shard's cluster-wide checks as not tested. NCCL
multi-node jobs stay within a shard (its nodes are its own).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["COUNT_ENV", "INDEX_ENV", "RUN_ENV", "ShardError", "ShardPlan", "ShardSpec", "parse_shard", "partition",
           "plan", "pool_name", "shard_spec"]

#: Set by Kubernetes in every pod of an Indexed Job (completionMode: Indexed): the pod's index.
INDEX_ENV = "JOB_COMPLETION_INDEX"
#: The shard count in an Indexed Job (the Job's completions; manifests/runner/job-sharded.yaml sets it).
COUNT_ENV = "GPUCONF_SHARDS"
#: The sharded run's name (--shard-run), in the Job its controller uid from the downward API.
RUN_ENV = "GPUCONF_SHARD_RUN"
#: At most this many shards (a fleet of 100,000 nodes in shards of 100).
MAX_SHARDS = 1000
_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


class ShardError(ValueError):
    """A bad --shard / --shard-run value or shard environment: one line saying what is wrong."""


@dataclass(frozen=True)
class ShardSpec:
    """Which shard this run is: ``index`` of ``count`` (0-based), the sharded run's name when given,
    and where the shard came from (``--shard`` or the Indexed Job's environment)."""

    index: int
    count: int
    run: str | None = None
    source: str = "--shard"


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` as (I, N): 0 <= I < N <= MAX_SHARDS; ShardError with one line otherwise."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if match is None:
        raise ShardError(f"{text!r}: give the shard as I/N, e.g. 0/4 for the first of four (I counts from 0)")
    index, count = int(match.group(1)), int(match.group(2))
    if not 1 <= count <= MAX_SHARDS:
        raise ShardError(f"{text!r}: the shard count must be 1 to {MAX_SHARDS}, not {count}")
    if index >= count:
        raise ShardError(f"{text!r}: the index counts from 0, so shard {index} of {count} does not exist "
                         f"(0 to {count - 1})")
    return index, count


def shard_spec(option: str | None, run: str | None, environ: Mapping[str, str]) -> ShardSpec | None:
    """The run's shard: ``--shard I/N``, else the Indexed Job's ``JOB_COMPLETION_INDEX`` with
    ``GPUCONF_SHARDS`` (both set; the index alone is any Indexed Job's and shards nothing); None for
    an unsharded run. ``--shard-run`` (else ``GPUCONF_SHARD_RUN``) names the sharded run."""
    run = run if run is not None else (environ.get(RUN_ENV) or None)
    if run is not None and not _RUN_NAME.fullmatch(run):
        raise ShardError(f"--shard-run {run!r}: a name of letters, digits, '.', '_' and '-', at most 63, "
                         "starting with a letter or digit (a Job's controller uid is one)")
    if option is not None:
        try:
            index, count = parse_shard(option)
        except ShardError as exc:
            raise ShardError(f"--shard {exc}") from None
        return ShardSpec(index, count, run, "--shard")
    index_text, count_text = environ.get(INDEX_ENV), environ.get(COUNT_ENV)
    if count_text is None:
        if run is not None:
            raise ShardError(f"--shard-run {run} names a sharded run, but no shard is given: add --shard I/N "
                             f"(or {INDEX_ENV} and {COUNT_ENV} in an Indexed Job)")
        return None
    if index_text is None:
        raise ShardError(f"{COUNT_ENV}={count_text} is set but {INDEX_ENV} is not: run the shards as an Indexed Job "
                         "(completionMode: Indexed), or give --shard I/N")
    try:
        index, count = parse_shard(f"{index_text}/{count_text}")
    except ShardError as exc:
        raise ShardError(f"{INDEX_ENV}={index_text} {COUNT_ENV}={count_text}: {exc}") from None
    return ShardSpec(index, count, run, f"{INDEX_ENV}/{COUNT_ENV}")


def pool_name(product: str | None) -> str:
    """The pool a node of GPU ``product`` is sharded with: the product as GFD spells it (spaces as
    dashes, as gpuconf.checks.inventory.fact_product), time-slicing's -SHARED suffix ignored;
    "unknown" without one, as driver.version-uniform-in-pool pools such nodes."""
    return product.replace(" ", "-").removesuffix("-SHARED") if product else "unknown"


def partition(nodes: Sequence[tuple[str, str | None]], count: int) -> dict[str, int]:
    """Each node's shard, for ``nodes`` as (name, pool) pairs (pool None: a node of unknown product)
    and ``count`` shards (the module docstring says how)."""
    names = list(dict.fromkeys(name for name, _ in nodes))
    if count < 1:
        raise ValueError(f"{count} shards")
    pools: dict[str, list[str]] = {}
    for name, pool in dict(nodes).items():
        pools.setdefault(pool_name(pool), []).append(name)
    load = [0] * count
    out: dict[str, int] = {}
    for _, members in sorted(pools.items(), key=lambda p: (-len(p[1]), p[0])):
        shard = min(range(count), key=lambda i: (load[i], i))
        load[shard] += len(members)
        out.update(dict.fromkeys(members, shard))
    return {name: out[name] for name in names}


@dataclass(frozen=True)
class ShardPlan:
    """A shard's place in its run: the spec, the fleet (every selected GPU node, selection order) and
    each node's shard; what the shard records in its report.json for the merge."""

    spec: ShardSpec
    fleet: tuple[str, ...]
    assignment: Mapping[str, int]
    #: Every cluster-wide test the run selected (its pytest node id) with its check and the shard that
    #: runs it (:meth:`home`), the same in every shard: the merge names a missing shard's as not tested.
    homes: Mapping[str, tuple[str | None, int]] = field(default_factory=dict, compare=False)

    @property
    def nodes(self) -> tuple[str, ...]:
        """This shard's nodes, in selection order."""
        return tuple(n for n in self.fleet if self.assignment.get(n) == self.spec.index)

    @property
    def fingerprint(self) -> str:
        """The same for every shard of one run that saw the same fleet: sha256 over the count and the
        assignment."""
        text = "\n".join([str(self.spec.count)] + [f"{n}\t{self.assignment[n]}" for n in sorted(self.assignment)])
        return hashlib.sha256(text.encode()).hexdigest()

    @property
    def run(self) -> str:
        """The sharded run's name: --shard-run, else one derived from the fleet (the same for every
        shard of a run, but also for another run of the same fleet: give --shard-run to tell them apart)."""
        return self.spec.run or f"fleet-{self.fingerprint[:12]}"

    def label(self) -> str:
        return f"shard {self.spec.index} of {self.spec.count}"

    def home(self, nodes: Iterable[str]) -> int:
        """The shard that runs a cluster-wide check needing some of ``nodes`` (a DRA GPU to steer to,
        nodes for a multi-node job): the shard holding most of them, the lowest index on a tie; shard 0
        when none is in the fleet. Every shard computes the same from the same plan."""
        held: dict[int, int] = {}
        for node in nodes:
            if (shard := self.assignment.get(node)) is not None:
                held[shard] = held.get(shard, 0) + 1
        return min(held, key=lambda shard: (-held[shard], shard)) if held else 0

    def as_json(self) -> dict[str, Any]:
        return {"index": self.spec.index, "count": self.spec.count, "run": self.run,
                "run_given": self.spec.run is not None, "source": self.spec.source, "fingerprint": self.fingerprint,
                "nodes": list(self.nodes), "fleet": list(self.fleet),
                "assignment": {n: self.assignment[n] for n in self.fleet},
                "homes": {test: {"check": check, "shard": shard} for test, (check, shard) in self.homes.items()}}


def plan(spec: ShardSpec, nodes: Sequence[tuple[str, str | None]]) -> ShardPlan:
    """The plan of shard ``spec`` over the selected GPU nodes ``nodes`` ((name, pool), selection order)."""
    return ShardPlan(spec, tuple(dict.fromkeys(n for n, _ in nodes)), partition(nodes, spec.count))
