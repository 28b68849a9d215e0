"""The run's scope as data: what it selected (the suites it collected, ``-m``, ``-k``, the opt-in
tiers, the options that change judgement) and whether that is the sign-off's whole scope.

The sign-off's scope is every check of every suite in suites/ (the default set) plus the opt-in tiers
the run asked for (--dcgm-diag, --burn-in, --allow-disruptive). A run that deselected any of the
default set (``-m``, ``-k``, ``--deselect``, a subset of suite files) or stopped before running all it
collected (``-x``, ``--maxfail``) is PARTIAL: never PASS, never "can be handed over", its own exit
status, and ``--label-nodes`` labels none of its nodes pass. What a shard leaves to the other shards
is not a narrowing: the merge of the shards is the sign-off (gpuconf report merge compares their
selections and refuses shards that selected differently).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

import pytest

__all__ = ["SCOPE", "Scope", "suite_modules"]


class Scope:
    """What the session collected and deselected, gathered by the hooks below."""

    def __init__(self) -> None:
        self.deselected: list[str] = []  # deselected by the user's selection (-m, -k, --deselect)
        self.shard_dropped: set[str] = set()  # left to other shards (gpuconf.plugin.collection)
        self.collected: list[str] = []  # the items that remained, nodeids
        self.suites: set[str] = set()  # suite modules collected before any deselection

    def as_json(self, config: pytest.Config, ran: int) -> dict[str, Any]:
        """The scope for report.json (RunRecord.scope): ``selection`` (equal for runs that selected
        alike: what the merge compares), ``full``, and ``narrowed``, why it is not."""
        every = suite_modules()
        markexpr = config.getoption("markexpr", "") or None
        keyword = config.getoption("keyword", "") or None
        # The same in every shard of a run: the suites as collected before -m, -k and the shards (a shard
        # holding no node, or none of a suite's nodes, collects the same files), and --deselect as given
        # (how many items -m deselects depends on the shard's nodes; -m itself is recorded).
        selection = {"suites": sorted(self.suites & set(every)), "markexpr": markexpr, "keyword": keyword,
                     "deselect": sorted(config.getoption("deselect", None) or []), "tiers": tiers(config),
                     "judgement": judgement(config)}
        narrowed = []
        if self.deselected:
            by = " ".join(f"{flag} {value!r}" for flag, value in (("-m", markexpr), ("-k", keyword)) if value)
            narrowed.append(f"{by or 'the selection'} deselected {len(self.deselected)} of "
                            f"{len(self.deselected) + len(self.collected)} checks")
        missing = [m for m in every if m not in self.suites]
        if missing and self.collected:
            narrowed.append(f"{len(missing)} of {len(every)} suites not collected: "
                            + ", ".join(m.removeprefix("test_") for m in missing))
        if 0 <= ran < len(self.collected) and config.getoption("maxfail", 0):
            narrowed.append(f"stopped after {ran} of {len(self.collected)} checks (-x/--maxfail)")
        return {"selection": selection, "full": not narrowed, "narrowed": narrowed, "tiers": tiers(config)}


SCOPE = pytest.StashKey[Scope]()


@functools.cache
def _suites_dir() -> Path:
    import gpuconf

    return Path(gpuconf.__file__).resolve().parent.parent / "suites"


def suite_modules() -> list[str]:
    """The suites of the sign-off's default scope: suites/test_*.py beside the gpuconf package."""
    return sorted(p.stem for p in _suites_dir().glob("test_*.py"))


def _module(nodeid: str) -> str:
    return Path(nodeid.split("::", 1)[0]).stem


def _is_suite(item: pytest.Item) -> bool:
    """A test of a gpuconf suite: a module of suites/ (or a copy of one in a directory named suites)."""
    path = Path(str(item.path))
    return path.parent.name == "suites" and path.stem in _suite_names()


@functools.cache
def _suite_names() -> frozenset[str]:
    return frozenset(suite_modules())


def tiers(config: pytest.Config) -> list[str]:
    """The opt-in tiers the run asked for, as the reports name them."""
    out = []
    if config.getoption("dcgm_diag") is not None:
        out.append(f"DCGM diagnostics level {config.getoption('dcgm_diag')}")
    if config.getoption("burn_in") is not None:
        out.append(f"burn-in ({config.getoption('burn_in')} rounds)")
    if config.getoption("--allow-disruptive"):
        out.append("disruptive checks")
    return out


def _digest(path: str | None) -> str | None:
    if not path:
        return None
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return None


def judgement(config: pytest.Config) -> dict[str, Any]:
    """The options that change what a check judges, as given (files by content digest)."""
    return {"node_selector": config.getoption("--node-selector"),
            "include_cordoned": bool(config.getoption("--include-cordoned")),
            "tolerate": sorted(config.getoption("--tolerate") or []),
            "expect": _digest(config.getoption("--expect")),
            "security_floor": _digest(config.getoption("security_floor")),
            "compat_images": config.getoption("compat_images"),
            "nccl_nodes": config.getoption("--nccl-nodes")}


def pytest_configure(config: pytest.Config) -> None:
    config.stash[SCOPE] = Scope()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The suites collected, before anything deselects (tryfirst: before -m, -k and the shards)."""
    config.stash[SCOPE].suites = {_module(i.nodeid) for i in items if _is_suite(i)}


def pytest_deselected(items: list[pytest.Item]) -> None:
    if not items:
        return
    scope = items[0].config.stash[SCOPE]
    scope.deselected += [i.nodeid for i in items if i.nodeid not in scope.shard_dropped and _is_suite(i)]


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    session.config.stash[SCOPE].collected = [i.nodeid for i in session.items if _is_suite(i)]
