"""Every NOT TESTED says why as data (gpuconf.outcomes.NOT_TESTED_KINDS), never guessed from its words.

On a healthy cluster no check is could-not-run, but for the known gaps below (each a finding of issue 36:
a check that cannot judge a healthy cluster), and the kinds a reader sorts a sign-off by are pinned:
what the run did not ask for is not selected, what the cluster does not have is not applicable.
tests/test_suite_fault_matrix.py's healthy runs call :func:`kind_problems` on each profile's report;
the rule is proven here on crafted results, and the check-level splits on plain facts.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuconf.checks import dcgm, dra, sharing
from gpuconf.checks.inventory import evaluate_allocatable_matches_capacity
from gpuconf.nodes import NodeView
from gpuconf.outcomes import COULD_NOT_RUN, NOT_APPLICABLE, NOT_SELECTED, NOT_TESTED_KINDS

#: A check of these (check id or its family) is, wherever it is NOT TESTED on a healthy profile, of
#: this kind: a tier the run did not ask for, or a capability the cluster does not have by design.
KINDS_BY_CHECK = {
    "dcgm.": NOT_SELECTED,  # no --dcgm-diag
    "expect.": NOT_SELECTED,  # no --expect
    "nccl.burn-in-stable": NOT_SELECTED,  # no --burn-in
    "mig.": NOT_APPLICABLE,  # a node without MIG
    "dra.": NOT_APPLICABLE,  # no NVIDIA DRA driver, or a node whose GPUs it does not manage
    "sharing.": NOT_APPLICABLE,  # a node that does not share its GPUs (through MPS)
}

#: NOT TESTED results each healthy profile must show with this kind (check -> kind), so the rules
#: above cannot hold by having nothing to look at.
EVERY_PROFILE = {"dcgm.diag-passes": NOT_SELECTED, "expect.node-in-a-pool": NOT_SELECTED,
                 "nccl.burn-in-stable": NOT_SELECTED}
EXAMPLES: dict[str, dict[str, str]] = {
    "healthy-h100": {"mig.layout-matches-config": NOT_APPLICABLE, "sharing.oversubscription-runs": NOT_APPLICABLE,
                     "dra.claim-reserved-then-deleted": NOT_APPLICABLE},
    "t4-timeslicing": {"nccl.allreduce-completes": NOT_APPLICABLE,
                       "isolation.concurrent-pods-disjoint": NOT_APPLICABLE},
    "a100-mig-mixed": {"smoke.vector-add-every-gpu": NOT_APPLICABLE, "bandwidth.host-device-floor": NOT_APPLICABLE},
    "h100-mig-single": {"smoke.vector-add-every-gpu": NOT_APPLICABLE, "bandwidth.host-device-floor": NOT_APPLICABLE},
    "h200-dra-only": {"runtime.require-cuda-enforced": NOT_APPLICABLE,
                      "inventory.allocatable-matches-capacity": NOT_APPLICABLE},
    "geforce-workstation": {"compat.forward-compat-runs": NOT_APPLICABLE, "nccl.pairwise-completes": NOT_APPLICABLE,
                            "health.no-uncorrectable-ecc": NOT_APPLICABLE},
    "a100-mig-dra": {"dra.distinct-claims-distinct-devices": NOT_APPLICABLE,
                     "scheduling.over-ask-is-insufficient": NOT_APPLICABLE},
}

_NO_NIC = "no NIC figure declared and no like pair to compare with"
_NO_FLOOR = "no floor for this hardware in gpuconf/data/nccl_floors.yaml"
_NO_TRANSPORT = "no expectation for this hardware in gpuconf/data/nccl_floors.yaml"
_NO_TOOLKIT = "NVIDIA Container Toolkit version not readable"
_MIG_COUNT = "fewer than two views of the GPU count to compare"
_MIG_UUIDS = "but their UUIDs are not compared"
#: The could-not-run a healthy profile still shows, (check, words of its reason): each a check that
#: cannot judge a healthy cluster, reported on issue 36; the fix removes its row (a row no longer seen
#: is named, so the list only shrinks).
KNOWN_GAPS: dict[str, set[tuple[str, str]]] = {
    # two nodes of a kind make one pair: no like pair to hold it against, and no NIC figure without --expect
    **{p: {("nccl.pairwise-busbw-above-floor", _NO_NIC)} for p in (
        "healthy-h100", "h200-dra-only", "h200-gpucluster", "h200-dra-extended", "plugin-and-dra",
        "mixed-driver-570")},
    "geforce-workstation": {("nccl.pairwise-busbw-above-floor", _NO_NIC), ("nccl.busbw-above-floor", _NO_FLOOR),
                            ("nccl.transport-expected", _NO_TRANSPORT)},
    "multi-pool": {("nccl.pairwise-busbw-above-floor", _NO_NIC),
                   ("nccl.pairwise-busbw-above-floor", "over TCP sockets (NCCL found no RDMA network)"),
                   ("nccl.busbw-above-floor", _NO_FLOOR), ("nccl.transport-expected", _NO_TRANSPORT),
                   ("inventory.gpu-count-matches-expected", _MIG_COUNT), ("metrics.gpu-metrics-present", _MIG_UUIDS)},
    # a toolkit installed by hand, or by GPUCluster mode: no pod and no ClusterPolicy says its version
    "t4-timeslicing": {("security.component-versions", _NO_TOOLKIT)},
    # MIG hides the physical GPU count from the device plugin and GFD; no whole-node probe to hold UUIDs against
    "a100-mig-mixed": {("inventory.gpu-count-matches-expected", _MIG_COUNT),
                       ("metrics.gpu-metrics-present", _MIG_UUIDS)},
    "h100-mig-single": {("inventory.gpu-count-matches-expected", _MIG_COUNT)},
    "a100-mig-dra": {("metrics.gpu-metrics-present", _MIG_UUIDS)},
}
for _profile in ("h200-gpucluster", "h200-dra-extended"):
    KNOWN_GAPS[_profile] = KNOWN_GAPS[_profile] | {("security.component-versions", _NO_TOOLKIT)}


def pinned(profile: str) -> dict[str, str]:
    """The NOT TESTED results ``profile`` must show, check -> kind."""
    return {**EVERY_PROFILE, **EXAMPLES.get(profile, {})}


def _not_tested(tests: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(check, kind, reason) of every NOT TESTED result of report.json's tests."""
    return [(str(extra.get("check")), str(extra.get("not_tested")), str(t.get("message") or ""))
            for t in tests if t["status"] == "skipped" and (extra := t.get("extra") or {}).get("check")]


def kind_problems(profile: str, tests: list[dict[str, Any]]) -> list[str]:
    """What breaks the rules above in the report.json tests of a run of healthy ``profile``."""
    problems: list[str] = []
    gaps = KNOWN_GAPS.get(profile, set())
    seen_gaps: set[tuple[str, str]] = set()
    for check, kind, reason in _not_tested(tests):
        if kind not in NOT_TESTED_KINDS:
            problems.append(f"{check}: no NOT TESTED kind ({kind}): {reason}")
            continue
        want = next((k for prefix, k in KINDS_BY_CHECK.items() if check.startswith(prefix)), None)
        if want is not None and kind != want:
            problems.append(f"{check}: {kind}, expected {want}: {reason}")
        elif kind == COULD_NOT_RUN:
            gap = next(((c, words) for c, words in gaps if c == check and words in reason), None)
            if gap is None:
                problems.append(f"{check}: could-not-run on healthy {profile}: {reason}")
            else:
                seen_gaps.add(gap)
    problems += [f"{check}: the known gap {words!r} is no longer seen on {profile}: remove it from KNOWN_GAPS"
                 for check, words in sorted(gaps - seen_gaps)]
    kinds = {(check, kind) for check, kind, _ in _not_tested(tests)}
    problems += [f"{check}: no NOT TESTED result of kind {kind} on {profile}"
                 for check, kind in pinned(profile).items() if (check, kind) not in kinds]
    return problems


# -- the rule on crafted results ---------------------------------------------------------------------


def skipped(check: str, kind: str | None, message: str) -> dict[str, Any]:
    return {"status": "skipped", "message": message, "extra": {"check": check, "node": "n-0", "not_tested": kind}}


def base(profile: str = "a-profile") -> list[dict[str, Any]]:
    """The NOT TESTED results ``profile`` is pinned to show (for a profile without examples: the opt-in
    tiers not asked for)."""
    return [skipped(check, kind, "pinned") for check, kind in pinned(profile).items()]


BASE = base()


def test_a_healthy_run_whose_not_tested_are_all_classified_has_no_problem():
    tests = [*BASE, skipped("mig.layout-matches-config", NOT_APPLICABLE, "n-0 does not use MIG"),
             {"status": "passed", "message": "", "extra": {"check": "smoke.vector-add-every-gpu"}}]
    assert kind_problems("a-profile", tests) == []


def test_a_could_not_run_on_a_healthy_profile_is_named_with_its_reason():
    tests = [*BASE, skipped("health.no-critical-xid", COULD_NOT_RUN, "no exporter scrape for n-0")]
    assert kind_problems("a-profile", tests) == [
        "health.no-critical-xid: could-not-run on healthy a-profile: no exporter scrape for n-0"]


def test_a_result_without_a_kind_is_named():
    assert kind_problems("a-profile", [*BASE, skipped("health.no-critical-xid", None, "why")]) == [
        "health.no-critical-xid: no NOT TESTED kind (None): why"]


@pytest.mark.parametrize(("check", "kind"), [
    ("dcgm.diag-no-warnings", COULD_NOT_RUN), ("expect.pool-populated", NOT_APPLICABLE),
    ("mig.instance-isolated", COULD_NOT_RUN), ("sharing.mps-client-limits", NOT_SELECTED)])
def test_a_check_not_tested_with_another_kind_than_its_family_s_is_named(check, kind):
    problems = kind_problems("a-profile", [*BASE, skipped(check, kind, "r")])
    assert problems == [f"{check}: {kind}, expected {KINDS_BY_CHECK[check.split('.')[0] + '.']}: r"]


def test_pods_that_did_not_overlap_in_time_are_a_finding_on_a_healthy_profile():
    """The concurrency checks' pods meet by construction (the probe's rendezvous): a decline on a
    healthy profile is a could-not-run to explain, not a pass's stand-in."""
    reason = "the 5 pods did not all hold their GPUs at the same time, so sharing was not exercised"
    declined = skipped("sharing.oversubscription-runs", COULD_NOT_RUN, reason)
    assert kind_problems("a-profile", [*BASE, declined]) == [
        f"sharing.oversubscription-runs: could-not-run, expected not-applicable: {reason}"]
    apart = "the two pods could not hold their GPUs at the same time: peer did not answer within 90 s"
    declined = skipped("isolation.concurrent-pods-disjoint", COULD_NOT_RUN, apart)
    assert kind_problems("a-profile", [*BASE, declined]) == [
        f"isolation.concurrent-pods-disjoint: could-not-run on healthy a-profile: {apart}"]


def test_a_known_gap_stands_on_its_profile_only_and_is_named_once_it_is_gone():
    gap = skipped("security.component-versions", COULD_NOT_RUN, f"{_NO_TOOLKIT}: no toolkit pod on t4-0")
    assert kind_problems("t4-timeslicing", [*base("t4-timeslicing"), gap]) == []
    assert kind_problems("a-profile", [*BASE, gap]) == [
        f"security.component-versions: could-not-run on healthy a-profile: {_NO_TOOLKIT}: no toolkit pod on t4-0"]
    assert kind_problems("t4-timeslicing", base("t4-timeslicing")) == [
        f"security.component-versions: the known gap {_NO_TOOLKIT!r} is no longer seen on t4-timeslicing: remove "
        "it from KNOWN_GAPS"]


def test_a_pinned_example_missing_from_the_run_is_named():
    assert kind_problems("a-profile", BASE[1:]) == ["dcgm.diag-passes: no NOT TESTED result of kind not-selected "
                                                    "on a-profile"]
    assert "mig.layout-matches-config: no NOT TESTED result of kind not-applicable on healthy-h100" in kind_problems(
        "healthy-h100", BASE)


# -- the checks' splits, on plain facts ------------------------------------------------------------


def test_a_node_without_nvidia_gpu_capacity_is_not_applicable_under_dra_and_could_not_run_otherwise():
    dra_node = evaluate_allocatable_matches_capacity(NodeView.of("h200-0", devices=8))
    bare = evaluate_allocatable_matches_capacity(NodeView.of("h100-0", {"nvidia.com/gpu.count": "8"}))
    assert (dra_node.summary, dra_node.kind) == ("no GPU resource advertised", NOT_APPLICABLE)
    assert (bare.summary, bare.kind) == ("no GPU resource advertised", COULD_NOT_RUN)


@pytest.mark.parametrize(("labels", "mps", "kind"), [
    ({}, False, NOT_APPLICABLE),
    ({"nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.replicas": "4"}, False, COULD_NOT_RUN),
    ({"nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.replicas": "4"}, True, NOT_APPLICABLE),
    ({"nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.replicas": "4"}, True, COULD_NOT_RUN),
])
def test_sharing_pods_not_planned_are_not_applicable_only_where_the_node_does_not_share(labels, mps, kind):
    facts = sharing.sharing_facts("t4-0", labels, {}, {})
    assert sharing.not_planned_kind(facts, mps=mps) == kind


def test_dcgm_on_a_mig_node_is_not_applicable_and_the_dra_suite_without_v1_could_not_run():
    mig = NodeView.of("a100-0", {"nvidia.com/mig.strategy": "mixed"}, {"nvidia.com/mig-1g.10gb": "7"},
                      {"nvidia.com/mig-1g.10gb": "7"})
    assert dcgm.not_a_diag_node(mig) is not None and dcgm.not_a_diag_node_kind(mig) == NOT_APPLICABLE
    assert dra.dra_skip_kind(serves_v1=False, served="v1beta1") == COULD_NOT_RUN
    assert dra.dra_skip_kind(serves_v1=True) == NOT_APPLICABLE
    assert dra.dra_skip_kind(serves_v1=False) == NOT_APPLICABLE
