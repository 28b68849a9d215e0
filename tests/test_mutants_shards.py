"""The shard partition and the shard's identity (gpuconf/shards.py), as pure functions, where mutation
testing (scripts/mutation-score) found them unpinned: --shard I/N at its bounds, the Indexed Job's
environment (each variable alone, a bad pair, a run name at its bounds), the pool a product names,
the partition's order (largest pool first, ties by name, the least loaded shard, ties by index; a
node listed twice), a plan's nodes, fingerprint, run name, home and JSON. Each case's result, or the
one line it refuses with, is recorded in tests/data/verdicts/shards.json; a property compares the
partition with the rule the module docstring states."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from verdict_record import check_recording

from gpuconf.shards import (
    COUNT_ENV,
    INDEX_ENV,
    MAX_SHARDS,
    RUN_ENV,
    ShardError,
    ShardPlan,
    ShardSpec,
    parse_shard,
    partition,
    plan,
    pool_name,
    shard_spec,
)

#: The multi-pool profile's nodes and pools (gpuconf/data/sim_profiles/multi-pool.yaml).
MULTI_POOL = [("h100-0", "NVIDIA-H100-80GB-HBM3"), ("h100-1", "NVIDIA-H100-80GB-HBM3"),
              ("a100-mig-0", "NVIDIA-A100-SXM4-80GB"), ("t4-0", "Tesla-T4"), ("t4-1", "Tesla-T4"),
              ("l40s-0", "NVIDIA-L40S"), ("l40s-1", "NVIDIA-L40S")]


def said(call: Callable[[], Any]) -> Callable[[], Any]:
    """What ``call`` returns, or the line it refuses with (its exception's type and text)."""
    def run() -> Any:
        try:
            return {"returns": call()}
        except (ShardError, ValueError) as exc:
            return {"raises": type(exc).__name__, "line": str(exc)}
    return run


def parsed(text: str) -> Callable[[], Any]:
    return said(lambda: parse_shard(text))


def spec(option: str | None = None, run: str | None = None, **environ: str) -> Callable[[], Any]:
    env = {{"job_index": INDEX_ENV, "job_count": COUNT_ENV, "job_run": RUN_ENV}[k]: v for k, v in environ.items()}
    return said(lambda: shard_spec(option, run, env))


def parts(nodes: Sequence[tuple[str, str | None]], count: int) -> Callable[[], Any]:
    return said(lambda: partition(nodes, count))


def planned(index: int, count: int, nodes: Sequence[tuple[str, str | None]] = MULTI_POOL, run: str | None = None,
            homes: Mapping[str, tuple[str | None, int]] | None = None) -> Callable[[], Any]:
    def make() -> Any:
        p = plan(ShardSpec(index, count, run, "--shard" if run else f"{INDEX_ENV}/{COUNT_ENV}"), nodes)
        if homes is not None:
            p = ShardPlan(p.spec, p.fleet, p.assignment, homes)
        return {"nodes": p.nodes, "fingerprint": p.fingerprint, "run": p.run, "label": p.label(), "json": p.as_json()}
    return make


def homes(needs: Sequence[Sequence[str]], count: int = 3) -> Callable[[], Any]:
    p = plan(ShardSpec(0, count), MULTI_POOL)
    return lambda: [p.home(n) for n in needs]


CASES: dict[str, Callable[[], Any]] = {
    # --shard I/N
    "parse: first of four": parsed("0/4"),
    "parse: last of four": parsed("3/4"),
    "parse: spaces": parsed(" 2 / 5 "),
    "parse: one shard": parsed("0/1"),
    "parse: the most shards": parsed(f"{MAX_SHARDS - 1}/{MAX_SHARDS}"),
    "parse: one too many shards": parsed(f"0/{MAX_SHARDS + 1}"),
    "parse: no shards": parsed("0/0"),
    "parse: index equal to the count": parsed("4/4"),
    "parse: index past the count": parsed("5/4"),
    "parse: one number": parsed("2"),
    "parse: words": parsed("one/three"),
    "parse: negative": parsed("-1/3"),
    "parse: trailing text": parsed("1/3x"),
    "parse: leading text": parsed("x1/3"),
    "parse: zero-padded": parsed("01/03"),
    # --shard, --shard-run and the Indexed Job's environment
    "spec: unsharded": spec(),
    "spec: --shard": spec("1/3"),
    "spec: --shard and a run": spec("1/3", "night-1"),
    "spec: --shard over the environment": spec("1/3", job_index="2", job_count="4"),
    "spec: --shard, the run from the environment": spec("1/3", job_run="uid-1"),
    "spec: --shard-run over the environment's": spec("1/3", "given", job_run="uid-1"),
    "spec: an empty run in the environment": spec("1/3", job_run=""),
    "spec: --shard bad": spec("3/3"),
    "spec: --shard words": spec("a/b"),
    "spec: the environment": spec(job_index="2", job_count="4"),
    "spec: the environment with a run": spec(job_index="2", job_count="4", job_run="0f3c9e0a-1b2c"),
    "spec: the index alone": spec(job_index="2"),
    "spec: the count alone": spec(job_count="4"),
    "spec: the environment out of range": spec(job_index="4", job_count="4"),
    "spec: the environment not numbers": spec(job_index="x", job_count="4"),
    "spec: a run without a shard": spec(None, "night"),
    "spec: the environment's run without a shard": spec(job_run="uid-1"),
    "spec: the index and a run, no count": spec(None, "night", job_index="1"),
    "spec: a run of 63 characters": spec("0/2", "a" * 63),
    "spec: a run of 64 characters": spec("0/2", "a" * 64),
    "spec: a run of one character": spec("0/2", "a"),
    "spec: a run with dots and underscores": spec("0/2", "a.b_c-9"),
    "spec: a run starting with a dash": spec("0/2", "-a"),
    "spec: a run starting with a dot": spec("0/2", ".a"),
    "spec: a run with a space": spec("0/2", "a b"),
    "spec: an empty run": spec("0/2", ""),
    "spec: a run with a trailing newline": spec("0/2", "a\n"),
    # pools
    "pool names": lambda: [pool_name(p) for p in (
        None, "", "NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3-SHARED",
        "NVIDIA H100 SHARED", "Tesla-T4-SHARED-SHARED", "SHARED", "NVIDIA-SHARED-H100")],
    # the partition
    "partition: multi-pool in 3": parts(MULTI_POOL, 3),
    "partition: multi-pool in 1": parts(MULTI_POOL, 1),
    "partition: multi-pool in 2": parts(MULTI_POOL, 2),
    "partition: multi-pool in 9": parts(MULTI_POOL, 9),
    "partition: no shard": parts(MULTI_POOL, 0),
    "partition: negative": parts(MULTI_POOL, -1),
    "partition: no node": parts([], 3),
    "partition: equal pools, by name": parts([("z-0", "Z"), ("a-0", "A"), ("m-0", "M"), ("z-1", "Z"), ("a-1", "A"),
                                              ("m-1", "M")], 2),
    "partition: a big pool then small ones": parts([*((f"b-{i}", "B") for i in range(5)), ("c-0", "C"),
                                                    ("a-0", "A"), ("d-0", "D"), ("d-1", "D")], 3),
    "partition: ties of load by index": parts([("a", "A"), ("b", "B"), ("c", "C"), ("d", "D")], 4),
    "partition: a node listed twice": parts([("x", "A"), ("y", "B"), ("x", "B"), ("z", "B")], 2),
    "partition: unknown products": parts([("a", None), ("b", ""), ("c", "unknown"), ("d", "X")], 2),
    "partition: spelled three ways": parts([("a", "NVIDIA-H100"), ("b", "NVIDIA H100"), ("c", "NVIDIA-H100-SHARED"),
                                            ("d", "T4"), ("e", "T4")], 2),
    # a plan
    "plan: shard 0 of 3": planned(0, 3),
    "plan: shard 1 of 3, named": planned(1, 3, run="night"),
    "plan: shard 2 of 3": planned(2, 3),
    "plan: an empty shard": planned(5, 9),
    "plan: a node listed twice": planned(0, 2, [("x", "A"), ("y", "B"), ("x", "A")]),
    "plan: with homes": planned(1, 3, homes={"suites/test_dra.py::test_steer": ("dra.selector-steers", 1),
                                             "suites/test_nccl.py::test_multinode": (None, 0)}),
    "home": homes([["t4-0", "t4-1"], ["h100-1", "l40s-0", "l40s-1"], ["h100-0", "l40s-0"], ["l40s-0", "h100-0"],
                   [], ["not-in-the-fleet"], ["t4-0", "nowhere", "nowhere-else"], ["t4-0", "t4-0", "l40s-0"]]),
    "home, 9 shards": homes([["t4-0", "l40s-1"], ["a100-mig-0"], ["l40s-0", "t4-1"]], 9),
}


@pytest.mark.parametrize("case", CASES)
def test_the_result_is_the_recorded_one(case: str) -> None:
    check_recording("shards", case, CASES[case])


def test_every_refusal_is_one_line_naming_the_value() -> None:
    for case, make in CASES.items():
        got = make()
        if isinstance(got, dict) and "raises" in got:
            assert "\n" not in got["line"], case
            if case.startswith("parse:"):
                assert got["raises"] == "ShardError" and got["line"].startswith("'"), case


def test_the_shard_count_is_bounded_on_both_sides() -> None:
    assert parse_shard(f"0/{MAX_SHARDS}") == (0, MAX_SHARDS)
    for text in (f"0/{MAX_SHARDS + 1}", "0/0"):
        with pytest.raises(ShardError, match="the shard count must be 1 to 1000"):
            parse_shard(text)
    assert MAX_SHARDS == 1000


def reference(nodes: Sequence[tuple[str, str | None]], count: int) -> dict[str, int]:
    """The partition as the module docstring states it, written again: pools (product, spaces as dashes,
    -SHARED dropped, none "unknown") largest first, ties by name, each to the least loaded shard, ties by
    the lowest index; a node listed twice is in the pool of its last listing."""
    pool_of: dict[str, str] = {}
    for name, product in nodes:
        pool_of[name] = product.replace(" ", "-").removesuffix("-SHARED") if product else "unknown"
    pools: dict[str, list[str]] = {}
    for name, pool in pool_of.items():
        pools.setdefault(pool, []).append(name)
    load, out = [0] * count, {}
    for pool in sorted(pools, key=lambda p: (-len(pools[p]), p)):
        shard = min(range(count), key=lambda i: (load[i], i))
        load[shard] += len(pools[pool])
        for name in pools[pool]:
            out[name] = shard
    return {name: out[name] for name in dict.fromkeys(n for n, _ in nodes)}


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.text("abcdef", min_size=1, max_size=3),
                          st.sampled_from([None, "", "A", "B", "C D", "C-D-SHARED", "E"])), max_size=30),
       st.integers(1, 8))
def test_the_partition_is_the_stated_rule(nodes: list[tuple[str, str | None]], count: int) -> None:
    got = partition(nodes, count)
    assert got == reference(nodes, count)
    assert list(got) == list(dict.fromkeys(n for n, _ in nodes))
    plans = [plan(ShardSpec(i, count), nodes) for i in range(count)]
    assert [n for p in plans for n in p.nodes] == sorted((n for n in got), key=lambda n: (got[n], list(got).index(n)))
