"""The fault-detection matrix, run by the project's CI: every suite under suites/, run with pytest
against simulated clusters, passes on every shipped healthy profile; and for each fault in the
catalog whose check lives in a suite that exists, the check named for that fault fails on the
faulty node, saying why, while every unrelated check stays green.

The verdicts are read from the run's own report.json (what a user gets), so the matrix also proves
the report: each failure carries its check id and node.

One root cause, one failure (issue 26): each fault case also counts the distinct checks failing on
the faulty node (a cluster-wide fault: on the node with the most; a failure of no node counts on
every node) and allows at most MAX_FAILING, or the fault's documented exception in
DISTINCT_FINDINGS. The checks NOT TESTED "blocked by" a failure there are counted and shown beside
them: a dependant folds only behind its owner's declared finding (gpuconf/data/checks.yaml), and the
table shows every fold. Each case writes its row where tests/conftest.py's terminal summary finds it, so a
run of the matrix prints the per-fault failure table (also under pytest-xdist) without a second pass
over the faults.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from healthy_outcomes import load, mismatches, observed
from serving import pytest_subprocess
from test_not_tested_kinds import kind_problems

from gpuconf.sim.profile import FaultDef, fault_catalog, load_profile
from gpuconf.verdict import checks

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
SUITES = sorted((ROOT / "suites").glob("test_*.py"))
PROFILES = ROOT / "gpuconf" / "data" / "sim_profiles"
#: The shipped profiles a healthy cluster looks like (scale-1000 is the benchmarks' profile).
HEALTHY = ["healthy-h100", "a100-mig-mixed", "h100-mig-single", "t4-timeslicing", "a100-mps", "h200-dra-only",
           "plugin-and-dra", "mixed-driver-570", "multi-pool", "geforce-workstation", "a100-mig-dra", "h200-gpucluster",
           "h200-dra-extended"]

#: Fleet states no check fails for (severity not-tested): a cordoned, tainted, NotReady or busy node.
# issue 25: the suite reports these NOT TESTED (tests/test_fleet_states.py)
NOT_TESTED = {f.id for f in fault_catalog().values() if f.severity == "not-tested"}
#: Not-tested faults that leave one check NOT TESTED on their node (nothing in the API shows what it
#: judges), not the whole node as a fleet state does (tests/test_fleet_states.py runs those): the
#: words its reason must have.
CHECK_NOT_TESTED = {
    "toolkit-version-unreadable": "NVIDIA Container Toolkit version not readable: no toolkit pod on {node}",
    "pod-traffic-blocked": "the two pods could not hold their GPUs at the same time: pod iso-one-{node}: peer split.",
}
#: Faults whose named check lives in a suite that exists (the others belong to suites still to come).
FAULTS = [f for f in fault_catalog().values() if f.check in checks() and (ROOT / checks()[f.check].suite).exists()
          and f.id not in NOT_TESTED]
#: Faults also run on another shipped profile than their catalog example, where the same check must
#: catch them through another mechanism (issue 27: MIG handed out by the DRA driver, not the device plugin).
MORE_EXAMPLES: dict[str, tuple[str, ...]] = {
    "mig-sibling-visible": ("a100-mig-dra",),
    "mig-layout-drift": ("a100-mig-dra",),
    # a device plugin left on beside a DRA-backed nvidia.com/gpu is still a double publication
    "dra-double-count": ("h200-dra-extended",),
    # the tainted GPU on a node whose nvidia.com/gpu DRA serves: the scheduler's own claim avoids it too
    "dra-device-taint": ("h200-dra-extended",),
}
#: Options a fault's run needs. extended-resource-stale keeps every probe asking nvidia.com/gpu Pending
#: with "cannot allocate all claims", which a campaign waits out to its --timeout (a claim's devices may
#: yet be freed by another pod): 30 s per campaign instead of 900.
OPTIONS: dict[str, tuple[str, ...]] = {"extended-resource-stale": ("--timeout", "30")}
#: (fault, example profile) of every fault case.
CASES = [(f, f.example_profile) for f in FAULTS] + [(f, p) for f in FAULTS for p in MORE_EXAMPLES.get(f.id, ())]

#: Checks a fault legitimately breaks besides its own, with the reason. Anything else failing is a bug
#: (a check that cannot tell its fault from another's). A check that fails for the same cause as the
#: fault's own is not listed here: it is NOT TESTED "blocked by" the owner (gpuconf.checks.probe_start
#: has the owners: a stale ResourceSlice, a missing RuntimeClass, a runtime or toolkit that injects
#: unallocated GPUs, a DRA driver preparing another GPU, GFD labels of another model).
CASCADES: dict[str, tuple[set[str], str]] = {
    "library-mismatch": ({"smoke.vector-add-every-gpu"}, "cudaFree(0) fails with 803: no kernel runs"),
    "gpu-lost": ({"nccl.preflight-gpus-free"}, "a node with 7 GPUs where its pool's nodes have 8 cannot take "
                 "the pool's all-GPU NCCL job: the preflight names it"),
    "gpu-unhealthy": ({"nccl.preflight-gpus-free"}, "a node with 7/8 GPUs allocatable cannot take an all-GPU NCCL "
                      "job: the preflight names it"),
    "compat-libs-broken": ({"compat.current-cuda-major-runs", "security.component-versions"},
                           "without the image's cuda-compat libcuda, the CUDA 13 images fail at CUDA init on a 570 "
                           "node: workloads of the current CUDA major cannot run there; and the toolkit release that "
                           "never selects cuda-compat (1.17.4) predates the toolkit's security fixes (NVIDIA "
                           "bulletins 5659, 5850)"),
    "xid-errors": ({"smoke.vector-add-every-gpu"}, "CUDA work on a GPU that raised a critical Xid fails until the GPU "
                   "is reset: its vector-add returns an error"),
    "pcie-link-degraded": ({"bandwidth.host-device-floor"}, "a GPU on a link trained down copies at that link's "
                           "rate: under its floor and its siblings"),
    "nccl-nvls-unavailable": ({"nccl.busbw-above-floor"}, "without NVLS the all-reduce runs over the NVLink ring, "
                              "whose busbw (about 370 GB/s on 8 x H100) is below the NVLS floor"),
    "mig-sibling-visible": ({"mig.layout-matches-config"}, "the faulty Allocate adds a sibling to every pod's "
                            "instances: the pod granted every 1g.10gb instance is also given the 2g/3g instance after "
                            "each one, more instances than it was granted (through DRA: CUDA enumerates that sibling, "
                            "of another profile than the pod's)"),
    "dra-mig-parent-published": ({"smoke.vector-add-every-gpu"}, "the whole-node probe's claim on gpu.nvidia.com is "
                                 "allocated the MIG-enabled GPU published whole, on which CUDA enumerates no device: "
                                 "its vector-add cannot run"),
    "dra-device-taint": ({"health.no-critical-xid"}, "the Xid that made NVIDIA's DRA driver taint the GPU is the GPU's "
                         "last Xid in DCGM: the exporter reports it for the same GPU (a health finding of its own, "
                         "with the Xid's remedy)"),
    "dra-attr-wrong": ({"labels.agree-with-dra"}, "the slice's wrong attribute also disagrees with GFD's label for "
                       "the same GPU: agree-with-dra names the two publishers, attributes-match-hardware the liar"),
    "dra-slice-stale": ({"labels.agree-with-dra"}, "the stale slice's device also disagrees with GFD's labels: "
                        "agree-with-dra names the pair, attributes-match-hardware which one the probe contradicts"),
    "ecc-uncorrectable": ({"health.no-pending-memory-repair"},
                          "an uncorrectable error on an Ampere-or-later GPU remaps its row, applied at the next reset: "
                          "the pending remap is reported beside the ECC counters"),
    "mig-apply-failed": ({"inventory.gpu-resource-advertised"},
                         "with MIG mode on and no instance on any GPU the device plugin advertises nothing: a GPU node "
                         "without a GPU resource, which the inventory names beside the failed layout"),
}

#: At most this many distinct checks fail on a faulty node: the fault's own, and at most one other.
MAX_FAILING = 2
#: Faults with more failing checks on their node, each because the failures are distinct findings a
#: platform engineer needs (each names a different requirement the node breaks, with its own remedy),
#: not one cause reported many times. Nothing else may exceed MAX_FAILING.
DISTINCT_FINDINGS: dict[str, str] = {
    "compat-libs-broken": "the only toolkit releases that never select the image's cuda-compat libcuda (1.17.4) "
                          "are below the toolkit's security floor: a vulnerable toolkit is a finding of its own, "
                          "with its own remedy (upgrade the toolkit), beside the broken forward compatibility",
}
#: Faults whose cause other checks used to report again, one of those checks each, and the owner it is
#: now NOT TESTED "blocked by" on the faulty node (every node, for a cluster-wide fault).
BLOCKED: dict[str, tuple[str, str]] = {
    "probe-images-rejected": ("health.no-uncorrectable-ecc", "smoke.vector-add-every-gpu"),
    "dra-slice-stale": ("health.no-uncorrectable-ecc", "dra.attributes-match-hardware"),
    "visible-devices-all": ("isolation.no-request-sees-no-gpu", "isolation.sees-only-allocated"),
    "envvar-leak": ("isolation.no-request-sees-no-gpu", "isolation.envvar-without-request-gets-no-gpu"),
    "dra-prepares-wrong-device": ("dra.distinct-claims-distinct-devices", "dra.claim-allocates-the-probed-device"),
    # without /dev/nvidia-uvm CUDA cannot initialise: smoke's failure would be the device nodes' again
    "uvm-missing": ("smoke.vector-add-every-gpu", "runtime.cuda-device-nodes-present"),
}
# Not here: mixed-gpu-models (its compat pod gets the odd GPU or an H100 by chance: the compat checks
# are blocked by labels.gfd-matches-hardware or pass) and no-runtimeclass (the example profile's
# default runtime is NVIDIA's, so nothing depends on the class; tests/test_runtime_class_by_handler.py
# runs the runc case).
#: Where the fault cases leave their rows for the table (under the session's base temporary directory).
ROWS = "fault-failures"

Failure = tuple[str, str | None]  # (check id, node); a test that failed before judging: (test name, None)

#: Where a failure message stops saying what was observed: the remedy and the diagnoses the run
#: appended (gpuconf.kit.evidence), which diagnose() must not be fed back.
_APPENDED = re.compile(r"^  (?:remediation|diagnosis): ", re.MULTILINE)


def observed_text(message: str) -> str:
    """A failing test's message up to its remedy: what the check observed, as a user pastes it."""
    found = _APPENDED.search(message)
    return message[:found.start()] if found else message


def unrecognised(tests: list[dict[str, Any]]) -> list[str]:
    """The failures `gpuconf diagnose` names no category for (issue 36: it recognises every failure
    text the suites print), each as its first line."""
    from gpuconf.diagnose import diagnose

    return [observed_text(t.get("message") or t["name"]).splitlines()[0] for t in tests
            if t["status"] == "failed" and not diagnose(observed_text(t.get("message") or ""))]


def run_suites(pytester: pytest.Pytester, profile: str, *options: str) -> tuple[pytest.RunResult, list[dict[str, Any]]]:
    suites = pytester.mkdir("suites")
    for suite in SUITES:
        (suites / suite.name).write_text(suite.read_text())
    reports = pytester.path / "reports"
    # A subprocess: the cluster (threads, TLS, the cryptography bindings) must not share this interpreter.
    result = pytest_subprocess(pytester, "suites", "-p", "gpuconf.plugin", "--simulate", profile, "--report-dir",
                               str(reports), "-rf", "-p", "no:cacheprovider", "-o", "junit_family=xunit1", *options)
    tests = json.loads((reports / "report.json").read_text())["results"]["tests"]
    return result, tests


def failures(tests: list[dict[str, Any]]) -> set[Failure]:
    out: set[Failure] = set()
    for t in tests:
        if t["status"] == "failed":
            extra = t.get("extra") or {}
            out.add((extra["check"], extra.get("node")) if extra.get("check") else (t["name"], None))
    return out


@pytest.mark.parametrize("profile", HEALTHY)
def test_a_healthy_profile_passes_every_suite(pytester: pytest.Pytester, profile: str):
    result, tests = run_suites(pytester, profile)
    assert not failures(tests), result.stdout.str()[-4000:]
    assert result.ret == 0 and sum(t["status"] == "passed" for t in tests) > 0
    # Each check's outcome there is pinned (tests/healthy_outcomes.py): a check drifting to NOT TESTED fails here.
    drift = mismatches(load(profile), observed(tests))
    regenerate = f"after a deliberate change: .venv/bin/python tests/healthy_outcomes.py {profile}"
    assert not drift, "\n".join([*drift, regenerate])
    # each NOT TESTED says why as data: none could-not-run but the known gaps (tests/test_not_tested_kinds.py)
    assert not (wrong := kind_problems(profile, tests)), "\n".join(wrong)
    for t in tests:  # the catalog says truly where each check lives
        check = (t.get("extra") or {}).get("check")
        if check:
            assert checks()[check].suite == t["filePath"], (check, t["filePath"])


def test_the_matrix_covers_every_fault_of_the_existing_suites():
    covered = {f.id for f in FAULTS}
    for f in fault_catalog().values():
        if f.id in NOT_TESTED:
            continue
        assert (f.id in covered) == (ROOT / f.suite).exists(), f"{f.id}: catalog suite {f.suite}"
        assert f.suite == checks()[f.check].suite if f.check in checks() else True, f.id


def target(fault: FaultDef, example: str | None = None) -> tuple[str, str | None]:
    """The profile text (``example``, else the fault's catalog example) with the fault injected on the
    first pool's first node, and that node."""
    example = example or fault.example_profile
    text = (PROFILES / f"{example}.yaml").read_text()
    if fault.scope == "cluster":
        spec, node = f"{{id: {fault.id}}}", None
    else:
        pool = load_profile(example).pools[0].name
        spec = f"{{id: {fault.id}, pool: {pool}, node: 0" + (", gpu: 3" if fault.scope == "gpu" else "") + "}"
        node = f"{pool}-0"
    return re.sub(r"^faults:.*$", "", text, flags=re.M) + f"\nfaults:\n  - {spec}\n", node


def blocked_on(tests: list[dict[str, Any]], node: str) -> list[str]:
    """The checks NOT TESTED "blocked by" another check's failure on ``node`` (or on no node), each as
    "check (by owner)": the fault's findings folded behind their owner, counted beside the failures so
    that "one root cause, one failure" is never met by hiding an independent finding."""
    return sorted(f"{t['extra']['check']} (by {t['extra']['blocked_by']})" for t in tests
                  if t["status"] == "skipped" and (t.get("extra") or {}).get("blocked_by")
                  and t["extra"].get("node") in (node, None))


def failing_on_node(failed: set[Failure], node: str | None) -> tuple[str, list[str]]:
    """The faulty node and the distinct checks failing on it; for a cluster-wide fault (``node`` None)
    the node with the most. A failure of no node (a cluster-wide check, a test that failed before
    judging) counts on every node."""
    anywhere = {c for c, n in failed if n is None}
    per_node = {n: {c for c, m in failed if m == n} | anywhere for _, n in failed if n is not None}
    if node is not None:
        return node, sorted(per_node.get(node, anywhere))
    if not per_node:
        return "(no node)", sorted(anywhere)
    worst = max(sorted(per_node), key=lambda n: len(per_node[n]))
    return worst, sorted(per_node[worst])


def rows_dir(factory: pytest.TempPathFactory) -> Path:
    """The run's directory for the table's rows: the base temporary directory the pytest-xdist
    controller made (each worker's own is a folder under it)."""
    import os

    base = factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / ROWS


def test_the_failing_check_count_rule_holds_on_crafted_failures():
    failed = {("a.one", "n-0"), ("a.two", "n-0"), ("a.three", "n-1"), ("a.cluster", None)}
    assert failing_on_node(failed, "n-0") == ("n-0", ["a.cluster", "a.one", "a.two"])
    assert failing_on_node(failed, "n-2") == ("n-2", ["a.cluster"])
    assert failing_on_node(failed, None) == ("n-0", ["a.cluster", "a.one", "a.two"])
    assert failing_on_node({("a.cluster", None)}, None) == ("(no node)", ["a.cluster"])


def test_the_blocked_count_reads_the_folded_checks_of_the_faulty_node():
    tests = [{"status": "skipped", "extra": {"check": "smoke.x", "node": "n-0", "blocked_by": "runtime.y"}},
             {"status": "skipped", "extra": {"check": "smoke.x", "node": "n-1", "blocked_by": "runtime.y"}},
             {"status": "skipped", "extra": {"check": "health.z", "node": "n-0", "not_tested": "could-not-run"}},
             {"status": "skipped", "extra": {"check": "dra.w", "node": None, "blocked_by": "dra.v"}},
             {"status": "failed", "extra": {"check": "runtime.y", "node": "n-0"}}]
    assert blocked_on(tests, "n-0") == ["dra.w (by dra.v)", "smoke.x (by runtime.y)"]
    assert blocked_on(tests, "n-2") == ["dra.w (by dra.v)"]


def test_the_diagnose_rule_reads_what_a_failure_observed_not_its_remedy():
    known = "smoke.vector-add-every-gpu on n-0: CUDA could not start in the probe pod: cudaErrorUnknown (999)"
    # only the remedy and an appended diagnosis would match: the observation itself is not recognised
    unknown = ("a.check on n-0: something nobody has seen\n  remediation: load it (modprobe nvidia-uvm)\n"
               "  diagnosis: /dev/nvidia-uvm is missing: the nvidia_uvm kernel module is not loaded")
    tests = [{"name": "t1", "status": "failed", "message": known},
             {"name": "t2", "status": "failed", "message": unknown},
             {"name": "t3", "status": "passed", "message": "nothing"}]
    assert unrecognised(tests) == ["a.check on n-0: something nobody has seen"]
    assert unrecognised(tests[:1]) == []


def test_every_exception_names_a_catalog_fault_with_its_reason():
    catalog = fault_catalog()
    assert all(fault in catalog and len(reason) > 40 for fault, reason in DISTINCT_FINDINGS.items()), DISTINCT_FINDINGS


@pytest.mark.parametrize(("fault", "example"), CASES, ids=[
    f"{f.id} fails {f.check}" + ("" if p == f.example_profile else f" on {p}") for f, p in CASES])
def test_a_fault_fails_its_check_on_its_node_and_nothing_unrelated(pytester: pytest.Pytester, fault: FaultDef,
                                                                    example: str,
                                                                    tmp_path_factory: pytest.TempPathFactory):
    text, node = target(fault, example)
    profile = pytester.path / f"{fault.id}.yaml"
    profile.write_text(text)
    # A DRA claim the kubelet cannot prepare is reported 5 s after its FailedPrepareDynamicResources,
    # not the default 20 (dra-slice-stale has three campaigns that wait it out).
    result, tests = run_suites(pytester, str(profile), "--prepare-timeout", "5", *OPTIONS.get(fault.id, ()))
    output = result.stdout.str()
    failed = failures(tests)
    # one root cause, one failure: the row of the per-fault table, checked here, printed at the end
    where, on_node = failing_on_node(failed, node)
    case = fault.id if example == fault.example_profile else f"{fault.id} on {example}"
    blocked = blocked_on(tests, where)
    row = {"fault": case, "node": where, "checks": on_node, "blocked": blocked,
           "exception": DISTINCT_FINDINGS.get(fault.id)}
    rows = rows_dir(tmp_path_factory)
    rows.mkdir(parents=True, exist_ok=True)
    (rows / f"{case.replace(' ', '-')}.json").write_text(json.dumps(row))
    print(f"{fault.id}: {len(on_node)} failing on {where}: {', '.join(on_node)}; {len(blocked)} blocked: "
          f"{', '.join(blocked)}")
    # a cluster-wide fault caught by a per-node check: on some node
    assert (fault.check, node) in failed or (node is None and any(c == fault.check for c, _ in failed)), \
        output[-4000:]
    allowed, _why = CASCADES.get(fault.id, (set(), ""))
    unexpected = {(c, n) for c, n in failed if c != fault.check and c not in allowed}
    assert not unexpected, output[-4000:]
    assert f"{fault.check}" + (f" on {node}" if node else "") in output and "remediation:" in output
    mine = [t for t in tests if (t.get("extra") or {}).get("check") == fault.check
            and (node is None or (t.get("extra") or {}).get("node") == node)]
    assert mine and all(t["extra"]["outcome"] == fault.severity for t in mine if t["status"] == "failed"), mine
    if fault.id in BLOCKED:  # the dependant names the owner, which fails on that node
        dependant, owner = BLOCKED[fault.id]
        theirs = [t for t in tests if (t.get("extra") or {}).get("check") == dependant
                  and (node is None or t["extra"].get("node") == node)]
        assert theirs and all(t["status"] == "skipped" and t["message"].startswith(f"blocked by {owner}: ")
                              for t in theirs), [(t["status"], t.get("message")) for t in theirs]
        assert owner in on_node, on_node
    # every failure this fault causes is one `gpuconf diagnose` explains (gpuconf/data/diagnoses.yaml)
    assert not unrecognised(tests), unrecognised(tests)
    if fault.id in DISTINCT_FINDINGS:
        assert len(on_node) > MAX_FAILING, f"{fault.id}: {on_node}: the exception is no longer needed"
    else:
        assert len(on_node) <= MAX_FAILING, f"{fault.id}: {len(on_node)} checks fail on {where}: {on_node}"


@pytest.mark.parametrize("fault_id", sorted(CHECK_NOT_TESTED))
def test_a_check_level_not_tested_fault_leaves_its_check_not_tested_on_its_node_only(pytester: pytest.Pytester,
                                                                                     fault_id: str):
    fault = fault_catalog()[fault_id]
    assert fault.severity == "not-tested"
    text, node = target(fault)
    profile = pytester.path / f"{fault.id}.yaml"
    profile.write_text(text)
    result, tests = run_suites(pytester, str(profile))
    assert not failures(tests), result.stdout.str()[-4000:]  # NOT TESTED, never a failure (nor a PASS)
    mine = [t for t in tests if (t.get("extra") or {}).get("check") == fault.check]
    on_node = [t for t in mine if t["extra"].get("node") == node]
    assert on_node and all(t["status"] == "skipped" and CHECK_NOT_TESTED[fault_id].format(node=node) in t["message"]
                           for t in on_node), [(t["status"], t.get("message")) for t in on_node]
    others = [t for t in mine if t["extra"].get("node") != node]
    assert others and all(t["status"] == "passed" for t in others), [(t["status"], t.get("message")) for t in others]
