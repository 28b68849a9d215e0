"""Sharded runs (``--shard I/N``): which of the selected GPU nodes a shard tests, so that N runner
processes (the pods of a Kubernetes Indexed Job, manifests/runner/job-sharded.yaml) test a fleet
side by side and ``gpuconf report merge`` makes one sign-off of their reports.

The partition is a function of the selected GPU nodes' names and pools alone, so every shard of a
run computes the same one from the same node list, without talking to the others:

- A pool (the GPU product, gpuconf.checks.compat.pool_of) stays in one shard while it is no larger
  than a shard's fair share (ceil(nodes / N)): checks that compare a node with its pool
  (driver.version-uniform-in-pool, runtime.require-cuda-enforced's majority, the GPU count its pool's
  nodes usually have) see the pool they would see unsharded. A larger pool is cut into parts of at
  most the fair share, its nodes in name order (neighbours by name, often neighbours in a rack, stay
  together); each part is then compared within itself. A node without a known product is its own unit.
- When there are fewer units than shards, the largest unit is cut in two until every shard gets one
  (while there are at least N nodes): a shard with nothing to test is waste in an Indexed Job.
- Units go to shards largest first, each to the least loaded shard (ties: the lowest index).

Stability: the packing favours balance (a shard's wall time is its load) over stability, so a node
added to or removed from the fleet can move whole pools to other shards when it changes the pools'
size order; the nodes of a cut pool move only at the cuts' edges. What matters within a run holds:
shards that saw the same node list agree, and shards of one run that saw different node lists (a node
joined between their starts) carry different plan fingerprints, which the merge refuses.

Cluster-wide checks (a test not parametrized over a GPU node) run in shard 0 only; NCCL multi-node
jobs stay within a shard (its nodes are its own).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["COUNT_ENV", "INDEX_ENV", "RUN_ENV", "ShardError", "ShardPlan", "ShardSpec", "parse_shard", "partition",
           "plan", "shard_spec"]

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


def partition(nodes: Sequence[tuple[str, str | None]], count: int) -> dict[str, int]:
    """Each node's shard, for ``nodes`` as (name, pool) pairs (pool None: a node of unknown product)
    and ``count`` shards (the module docstring says how)."""
    names = list(dict.fromkeys(name for name, _ in nodes))
    if count < 1:
        raise ValueError(f"{count} shards")
    pools: dict[str, list[str]] = {}
    for name, pool in dict(nodes).items():
        pools.setdefault(f"pool:{pool}" if pool else f"node:{name}", []).append(name)
    share = max(1, math.ceil(len(names) / count))
    units: list[tuple[str, list[str]]] = []
    for key, members in sorted(pools.items()):
        members = sorted(members)
        parts = math.ceil(len(members) / share)
        for part in range(parts):
            units.append((f"{key}#{part}" if parts > 1 else key, members[part * share:(part + 1) * share]))
    while len(units) < min(count, len(names)):  # fewer units than shards: cut the largest in two
        units.sort(key=lambda u: (-len(u[1]), u[0]))
        key, members = units.pop(0)
        half = (len(members) + 1) // 2
        units += [(f"{key}a", members[:half]), (f"{key}b", members[half:])]
    load = [0] * count
    out: dict[str, int] = {}
    for _, members in sorted(units, key=lambda u: (-len(u[1]), u[0])):
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
                "assignment": {n: self.assignment[n] for n in self.fleet}}


def plan(spec: ShardSpec, nodes: Sequence[tuple[str, str | None]]) -> ShardPlan:
    """The plan of shard ``spec`` over the selected GPU nodes ``nodes`` ((name, pool), selection order)."""
    return ShardPlan(spec, tuple(dict.fromkeys(n for n, _ in nodes)), partition(nodes, spec.count))
