"""MIG checks as pure decisions, fed with what the simulated node publishes (labels, capacity,
mig-manager's config) and what the simulated toolkit injects into each of the suite's probe pods:
healthy mixed and single nodes pass, the mig-layout-drift fault degrades mig.layout-matches-config
with a message naming the node, the declared and the observed layouts, and hand-made breakages
fail the other two checks. CUDA enumerates one MIG device per process however many a container
is given, so every breakage is shown where a real node shows it: NVIDIA_VISIBLE_DEVICES, NVML's
GPUs and their MIG mode, /dev/nvidiaN."""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from gpuconf.checks import dra
from gpuconf.checks import mig as checks
from gpuconf.checks.isolation import Sighting, sighting
from gpuconf.cluster.outcomes import PodOutcome, make_outcome
from gpuconf.compat import tables
from gpuconf.compat.versions import parse_cuda
from gpuconf.nodes import DeviceTaint, SliceDevice, slice_devices
from gpuconf.probes.cuda import parse_cuda_probe
from gpuconf.sim.agent_model import MIG_PARTED_CONFIG, DeviceBook, as_visible, make_mig_parted_config, plugin_env
from gpuconf.sim.agent_pods import _stale_sibling
from gpuconf.sim.emulate import Visible, cuda_probe_run
from gpuconf.sim.node_facts import advertised_devices, node_labels, node_resources, resource_slices
from gpuconf.sim.profile import (
    ProfileError,
    SimCluster,
    SimNode,
    expand,
    fault_catalog,
    load_profile,
    with_faults,
)
from gpuconf.verdict import Outcome, Verdict
from gpuconf.verdict import checks as catalog

MIG_CHECKS = {"mig.layout-matches-config", "mig.instance-isolated", "mig.not-also-full-gpu"}


def cluster(profile: str | Path = "a100-mig-mixed", faults: Sequence[Mapping[str, object]] = ()) -> SimCluster:
    p = load_profile(profile)
    return expand(with_faults(p, faults) if faults else p)


def run_probe(n: SimNode, allocated: Sequence[Visible], devices_env: str | None = None) -> tuple[int, str]:
    """The cuda-probe in a container given ``allocated`` (what the toolkit injects for the device
    plugin's NVIDIA_VISIBLE_DEVICES; ``devices_env`` instead: another strategy's value, ``void``
    under CDI)."""
    ids = ",".join(v.mig.uuid if v.mig else v.gpu.uuid for v in allocated)
    env = {"NVIDIA_VISIBLE_DEVICES": ids if devices_env is None else devices_env}
    return cuda_probe_run(n, visible=list(allocated), image_cuda=parse_cuda("13.0.2"), env=env, compat=True,
                          started_at="2026-11-29T00:00:00.000Z", hostname=n.name)


def outcome(name: str, run: tuple[int, str]) -> PodOutcome:
    code, out = run
    pod = {"metadata": {"name": name}, "spec": {"nodeName": "n", "containers": [{"name": "probe"}]},
           "status": {"phase": "Succeeded" if code == 0 else "Failed", "containerStatuses": [
               {"name": "probe", "state": {"terminated": {"exitCode": code, "reason": "Completed",
                                                          "startedAt": "2026-11-29T00:00:00Z",
                                                          "finishedAt": "2026-11-29T00:00:05Z"}}}]}}
    return make_outcome(pod, [], logs={"probe": out}, missing_logs={})


@dataclasses.dataclass
class Observed:
    node: SimNode
    labels: dict[str, str]
    capacity: dict[str, str]
    allocatable: dict[str, str]
    all_pods: dict[str, Sighting]
    one_pods: dict[str, Sighting]
    full: Sighting | None
    declared: checks.Declared


def observe(c: SimCluster, name: str) -> Observed:
    """Every pod plan_node plans on the node, given the instances the device plugin advertises."""
    n = c.node(name)
    labels = node_labels(n)
    capacity, allocatable = node_resources(n)
    devices = advertised_devices(n)
    all_pods: dict[str, Sighting] = {}
    one_pods: dict[str, Sighting] = {}
    for planned in checks.plan_node(name, labels, allocatable):
        mine = [Visible(d.gpu, d.mig) for d in devices if d.resource == planned.resource and d.healthy]
        seen = sighting(outcome(planned.name, run_probe(n, mine[:planned.count])))
        (all_pods if planned.role == "all" else one_pods)[planned.profile] = seen
    whole = [Visible(d.gpu) for d in devices if d.resource == "nvidia.com/gpu" and d.mig is None]
    full = sighting(outcome(f"inventory-{name}", run_probe(n, whole))) if whole else None
    config = make_mig_parted_config(c)
    configs = checks.parse_mig_parted(config["data"]["config.yaml"]) if config else None
    reports = [s.report for s in all_pods.values()]
    parents = {g.uuid for r in reports if r for g in r.nvml_gpus}
    declared = checks.declared_layout(labels, configs, source=f"ConfigMap gpu-operator/{MIG_PARTED_CONFIG}",
                                      gpus=checks.node_gpus(labels, len(parents) + len(whole)),
                                      profiles=checks.mig_profiles(checks.gpu_model(labels, reports)))
    return Observed(n, labels, capacity, allocatable, all_pods, one_pods, full, declared)


def verdicts(o: Observed) -> dict[str, Verdict]:
    name = o.node.name
    model = checks.gpu_model(o.labels, [s.report for s in o.one_pods.values()])
    return {v.check: v for v in (
        checks.evaluate_layout_matches_config(name, labels=o.labels, capacity=o.capacity, allocatable=o.allocatable,
                                              seen=o.all_pods, declared=o.declared),
        checks.evaluate_instance_isolated(name, o.one_pods, model=model),
        checks.evaluate_not_also_full_gpu(name, labels=o.labels, capacity=o.capacity,
                                          mig_seen=list(o.all_pods.values()), full_seen=o.full),
    )}


def drift(pool: str) -> list[dict[str, object]]:
    return [{"id": "mig-layout-drift", "pool": pool, "node": 0}]


# -------------------------------------------------------------------------------------------------
# The catalog


def test_the_mig_checks_are_catalogued_and_the_drift_fault_names_the_layout_check() -> None:
    assert MIG_CHECKS <= set(catalog())
    assert {catalog()[c].suite for c in MIG_CHECKS} == {"suites/test_mig.py"}
    fault = fault_catalog()["mig-layout-drift"]
    assert (fault.check, fault.severity) == ("mig.layout-matches-config", "degraded")
    assert catalog()["mig.layout-matches-config"].severity == "degraded"


# -------------------------------------------------------------------------------------------------
# Healthy nodes pass, the drift degrades the layout check


def test_a_healthy_mixed_node_passes_every_mig_check_comparing_the_declared_layout() -> None:
    results = verdicts(observe(cluster(), "a100-0"))
    bad = {k: v.message() for k, v in results.items() if v.outcome is not Outcome.PASS}
    assert not bad, bad
    layout = results["mig.layout-matches-config"].summary
    assert layout.startswith("1g.10gb x36, 2g.20gb x4, 3g.40gb x4 in nvidia.com/mig.config=custom-a100, advertised "
                             "capacity, GFD labels, the MIG instances the probes are given")
    assert "declared layout not compared" not in layout
    assert "3g.40gb: MIG-" in results["mig.instance-isolated"].summary
    assert "no whole nvidia.com/gpu; its MIG instances sit on 8 MIG-enabled GPUs" in results[
        "mig.not-also-full-gpu"].summary


def test_mig_layout_drift_degrades_the_layout_check_naming_declared_and_observed() -> None:
    o = observe(cluster(faults=drift("a100")), "a100-0")
    results = verdicts(o)
    v = results["mig.layout-matches-config"]
    assert v.outcome is Outcome.DEGRADED
    assert v.node == "a100-0"
    assert v.summary == ("nvidia.com/mig.config=custom-a100 says 1g.10gb x36, 2g.20gb x4, 3g.40gb x4, but advertised "
                         "capacity, GFD labels and the MIG instances the probes are given: 1g.10gb x35, 2g.20gb x4, "
                         "3g.40gb x4")
    assert "remediation: The GPUs carry another MIG layout than declared" in v.message()
    assert {k for k, r in results.items() if r.outcome is not Outcome.PASS} == {"mig.layout-matches-config"}


def test_the_peer_node_of_a_drifted_node_still_passes() -> None:
    results = verdicts(observe(cluster(faults=drift("a100")), "a100-1"))
    assert all(v.outcome is Outcome.PASS for v in results.values())


def test_a_healthy_single_strategy_node_passes_and_the_drift_degrades_it() -> None:
    healthy = verdicts(observe(cluster("h100-mig-single"), "h100-mig-0"))
    assert all(v.outcome is Outcome.PASS for v in healthy.values()), {k: v.message() for k, v in healthy.items()}
    assert healthy["mig.layout-matches-config"].summary.startswith("1g.10gb x28 in nvidia.com/mig.config=all-1g.10gb")
    assert "all 28 nvidia.com/gpu on h100-mig-0 are MIG instances" in healthy["mig.not-also-full-gpu"].summary
    v = verdicts(observe(cluster("h100-mig-single", drift("h100-mig")),
                         "h100-mig-0"))["mig.layout-matches-config"]
    assert v.outcome is Outcome.DEGRADED
    assert v.summary.startswith("nvidia.com/mig.config=all-1g.10gb says 1g.10gb x28, but advertised capacity, "
                                "GFD labels and the MIG instances the probes are given: 1g.10gb x27")


def test_without_a_mig_config_label_the_views_are_compared_and_the_gap_is_said() -> None:
    o = observe(cluster(), "a100-0")
    labels = {k: v for k, v in o.labels.items() if k != "nvidia.com/mig.config"}
    declared = checks.declared_layout(labels, None, source="unused", gpus=8, profiles=None)
    v = checks.evaluate_layout_matches_config("a100-0", labels=labels, capacity=o.capacity,
                                              allocatable=o.allocatable, seen=o.all_pods, declared=declared)
    assert v.outcome is Outcome.PASS
    assert v.summary.endswith("declared layout not compared: no nvidia.com/mig.config label (mig-manager does not "
                              "manage this node)")


def test_labels_that_disagree_with_the_advertised_instances_degrade() -> None:
    o = observe(cluster(), "a100-0")
    labels = {**o.labels, "nvidia.com/mig-2g.20gb.count": "3"}
    v = checks.evaluate_layout_matches_config("a100-0", labels=labels, capacity=o.capacity,
                                              allocatable=o.allocatable, seen=o.all_pods, declared=o.declared)
    assert v.outcome is Outcome.DEGRADED
    assert "but GFD labels: 1g.10gb x36, 2g.20gb x3, 3g.40gb x4" in v.summary


def test_instances_advertised_without_any_gfd_count_label_fail_the_layout_check() -> None:
    o = observe(cluster(), "a100-0")
    labels = {k: v for k, v in o.labels.items() if not (k.startswith("nvidia.com/mig-") and k.endswith(".count"))}
    v = checks.evaluate_layout_matches_config("a100-0", labels=labels, capacity=o.capacity,
                                              allocatable=o.allocatable, seen=o.all_pods, declared=o.declared)
    assert v.outcome is Outcome.DEGRADED
    assert v.summary == ("GFD labels no MIG layout (mixed strategy) while a100-0 advertises 1g.10gb x36, 2g.20gb x4, "
                         "3g.40gb x4")
    assert (v.expected, v.observed) == ("GFD MIG count labels", "none")


def test_cuda_enumerates_one_instance_and_the_granted_ones_are_counted_from_the_device_list() -> None:
    o = observe(cluster(), "a100-0")
    report = o.all_pods["1g.10gb"].report
    assert report is not None and len(report.devices) == 1 and (report.devices[0].uuid or "").startswith("MIG-")
    listed = checks.listed_devices(report)
    assert listed is not None and len(listed.mig) == 36 and not listed.whole
    assert report.devices[0].uuid in listed.mig
    v = verdicts(o)["mig.layout-matches-config"]
    assert v.outcome is Outcome.PASS and "the MIG instances the probes are given" in v.summary


def test_a_pod_whose_device_list_names_fewer_instances_than_it_was_granted_degrades() -> None:
    o = observe(cluster(), "a100-0")
    n = o.node
    two = [Visible(g, m) for g in n.gpus[:1] for m in g.mig if m.profile == "1g.10gb"]
    seen = {**o.all_pods, "1g.10gb": sighting(outcome("mig-all-1g.10gb-a100-0", run_probe(n, two)))}
    v = checks.evaluate_layout_matches_config("a100-0", labels=o.labels, capacity=o.capacity,
                                              allocatable=o.allocatable, seen=seen, declared=o.declared)
    assert v.outcome is Outcome.DEGRADED
    assert v.summary == "a pod granted every allocatable 1g.10gb instance (36) is given 1g.10gb x2 in " \
                        "NVIDIA_VISIBLE_DEVICES"


def test_an_instance_listed_for_two_pods_is_counted_once_and_degrades() -> None:
    o = observe(cluster(), "a100-0")
    n = o.node
    ones = [Visible(g, m) for g in n.gpus for m in g.mig if m.profile == "1g.10gb"]
    threes = [Visible(g, m) for g in n.gpus for m in g.mig if m.profile == "3g.40gb"]
    reused = [*threes[:3], ones[0]]  # the 3g.40gb pod's list repeats an instance of the 1g.10gb pod
    seen = {**o.all_pods, "3g.40gb": sighting(outcome("mig-all-3g.40gb-a100-0", run_probe(n, reused)))}
    v = checks.evaluate_layout_matches_config("a100-0", labels=o.labels, capacity=o.capacity,
                                              allocatable=o.allocatable, seen=seen, declared=o.declared)
    assert v.outcome is Outcome.DEGRADED
    assert v.summary == "a pod granted every allocatable 3g.40gb instance (4) is given 3g.40gb x3 in " \
                        "NVIDIA_VISIBLE_DEVICES"


def test_a_pod_whose_cuda_enumerates_another_profile_degrades() -> None:
    o = observe(cluster(), "a100-0")
    n = o.node
    one = next(Visible(g, m) for g in n.gpus for m in g.mig if m.profile == "1g.10gb")
    threes = [Visible(g, m) for g in n.gpus for m in g.mig if m.profile == "3g.40gb"]
    seen = {**o.all_pods, "3g.40gb": sighting(outcome("mig-all-3g.40gb-a100-0", run_probe(n, [one, *threes[1:]])))}
    v = checks.evaluate_layout_matches_config("a100-0", labels=o.labels, capacity=o.capacity,
                                              allocatable=o.allocatable, seen=seen, declared=o.declared)
    assert v.outcome is Outcome.DEGRADED
    assert v.summary == "a pod granted every allocatable 3g.40gb instance enumerates a 1g.10gb instance " \
                        f"({one.mig.uuid if one.mig else ''}) through CUDA"


def test_a_pod_granted_instances_whose_cuda_enumerates_none_degrades() -> None:
    o = observe(cluster(), "a100-0")
    s = o.all_pods["2g.20gb"]
    assert s.report is not None
    blank = dataclasses.replace(s.report, devices=())
    v = checks.evaluate_layout_matches_config("a100-0", labels=o.labels, capacity=o.capacity,
                                              allocatable=o.allocatable, seen={**o.all_pods, "2g.20gb": Sighting(
                                                  s.where, blank)}, declared=o.declared)
    assert v.outcome is Outcome.DEGRADED
    assert v.summary.startswith("a pod granted every allocatable 2g.20gb instance (4) enumerates no MIG device "
                                "through CUDA")


def test_without_a_device_list_the_probes_count_is_left_out_and_the_drift_still_degrades() -> None:
    def blind(o: Observed) -> dict[str, Sighting]:
        n = o.node
        out = {}
        for planned in checks.plan_node(n.name, o.labels, o.allocatable):
            if planned.role == "all":
                mine = [Visible(g, m) for g in n.gpus for m in g.mig if m.profile == planned.profile]
                out[planned.profile] = sighting(outcome(planned.name, run_probe(n, mine, devices_env="void")))
        return out

    o = observe(cluster(), "a100-0")
    v = checks.evaluate_layout_matches_config("a100-0", labels=o.labels, capacity=o.capacity,
                                              allocatable=o.allocatable, seen=blind(o), declared=o.declared)
    assert v.outcome is Outcome.PASS and "the MIG instances the probes are given" not in v.summary
    assert any("CUDA enumerates one MIG device per process and NVIDIA_VISIBLE_DEVICES lists no device ids" in e
               for e in v.evidence)
    d = observe(cluster(faults=drift("a100")), "a100-0")
    v = checks.evaluate_layout_matches_config("a100-0", labels=d.labels, capacity=d.capacity,
                                              allocatable=d.allocatable, seen=blind(d), declared=d.declared)
    assert v.outcome is Outcome.DEGRADED
    assert v.summary == ("nvidia.com/mig.config=custom-a100 says 1g.10gb x36, 2g.20gb x4, 3g.40gb x4, but advertised "
                         "capacity and GFD labels: 1g.10gb x35, 2g.20gb x4, 3g.40gb x4")


def test_device_lists_by_index_and_without_ids() -> None:
    o = observe(cluster(), "a100-0")
    report = o.one_pods["1g.10gb"].report
    assert report is not None

    def listed(value: str) -> checks.Listed | None:
        return checks.listed_devices(dataclasses.replace(report, env={"NVIDIA_VISIBLE_DEVICES": value}))

    assert listed("0:1,0:2,3") == checks.Listed(("0:1", "0:2"), ("3",))
    assert listed("MIG-a,GPU-b,MIG-a") == checks.Listed(("MIG-a",), ("GPU-b",))
    assert listed("all") is None and listed("void") is None and listed("") is None
    assert listed("/var/run/nvidia-container-devices") is None


# -------------------------------------------------------------------------------------------------
# mig.instance-isolated


def test_a_pod_given_one_instance_whose_device_list_names_its_siblings_fails() -> None:
    o = observe(cluster(), "a100-0")
    n = o.node
    siblings = [Visible(n.gpus[0], m) for m in sorted(n.gpus[0].mig, key=lambda m: m.profile != "3g.40gb")]
    s = sighting(outcome("mig-one-3g.40gb-a100-0", run_probe(n, siblings)))
    assert s.report is not None and len(s.report.devices) == 1  # CUDA shows the first instance only
    v = checks.evaluate_instance_isolated("a100-0", {**o.one_pods, "3g.40gb": s}, model="NVIDIA A100-SXM4-80GB")
    assert v.outcome is Outcome.FAIL
    own, *extra = [v.mig.uuid for v in siblings if v.mig]
    assert v.summary == ("pod mig-one-3g.40gb-a100-0, requesting one 3g.40gb instance, sees 4 MIG instances in "
                         f"NVIDIA_VISIBLE_DEVICES: its own {own} and 3 extra instances {', '.join(extra)}")


def one_pod_through_the_plugin(c: SimCluster, name: str, profile: str) -> Sighting:
    """The suite's one-instance pod on node ``name`` as the node's device plugin allocates it: its
    Allocate answer (NVIDIA_VISIBLE_DEVICES) and what the toolkit injects for it."""
    n = c.node(name)
    pod = checks.pod_name(f"one-{profile}", name)
    got = DeviceBook(n).allocate(pod, [("probe", False, {f"nvidia.com/mig-{profile}": "1"})])["probe"]
    env = plugin_env(got)["NVIDIA_VISIBLE_DEVICES"]
    return sighting(outcome(pod, run_probe(n, as_visible(got), devices_env=env)))


@pytest.mark.parametrize("faults", [(), ({"id": "mig-sibling-visible", "pool": "a100", "node": 0},)],
                         ids=["healthy", "mig-sibling-visible"])
def test_a_plugin_that_hands_out_a_sibling_instance_fails_isolation_naming_pod_and_extra_uuid(faults) -> None:
    c = cluster(faults=faults)
    o = observe(c, "a100-0")
    s = one_pod_through_the_plugin(c, "a100-0", "3g.40gb")
    assert s.report is not None and len(s.report.devices) == 1  # CUDA enumerates one MIG device either way
    v = checks.evaluate_instance_isolated("a100-0", {**o.one_pods, "3g.40gb": s}, model="NVIDIA A100-SXM4-80GB")
    if not faults:
        assert v.outcome is Outcome.PASS, v.summary
        return
    own = s.report.devices[0].uuid
    gpu = next(g for g in c.node("a100-0").gpus if any(m.uuid == own for m in g.mig))
    after = gpu.mig[[m.uuid for m in gpu.mig].index(own) + 1]  # the next instance on the same GPU
    assert v.outcome is Outcome.FAIL and v.check == "mig.instance-isolated" and v.node == "a100-0"
    assert v.summary == (f"pod {checks.pod_name('one-3g.40gb', 'a100-0')}, requesting one 3g.40gb instance, sees 2 "
                         f"MIG instances in NVIDIA_VISIBLE_DEVICES: its own {own} and the extra instance {after.uuid}")
    assert c.node("a100-1").mig_sibling_visible is False  # the fault is the node's


def test_siblings_on_other_gpus_show_in_nvml_and_dev_without_a_device_list() -> None:
    o = observe(cluster(), "a100-0")
    n = o.node
    ones = [Visible(g, m) for g in n.gpus[:2] for m in g.mig if m.profile == "1g.10gb"][1:3]
    assert ones[0].gpu != ones[1].gpu
    s = sighting(outcome("mig-one-1g.10gb-a100-0", run_probe(n, ones, devices_env="void")))
    v = checks.evaluate_instance_isolated("a100-0", {**o.one_pods, "1g.10gb": s}, model="NVIDIA A100-SXM4-80GB")
    assert v.outcome is Outcome.FAIL
    assert v.summary == ("pod mig-one-1g.10gb-a100-0, requesting one 1g.10gb instance, sees 2 GPUs through NVML or "
                         f"/dev ({n.gpus[0].uuid}, "
                         f"{n.gpus[1].uuid})")


def test_a_healthy_instance_pod_without_a_device_list_passes_and_says_what_it_cannot_see() -> None:
    o = observe(cluster(), "a100-0")
    n = o.node
    inst = next(Visible(g, m) for g in n.gpus for m in g.mig if m.profile == "2g.20gb")
    s = sighting(outcome("mig-one-2g.20gb-a100-0", run_probe(n, [inst], devices_env="void")))
    v = checks.evaluate_instance_isolated("a100-0", {**o.one_pods, "2g.20gb": s}, model="NVIDIA A100-SXM4-80GB")
    assert v.outcome is Outcome.PASS
    assert any("a sibling instance on the same GPU would not show" in e for e in v.evidence)


def test_a_pod_given_one_instance_that_also_gets_a_whole_gpu_fails(tmp_path: Path) -> None:
    o = observe(cluster(_half_mig(tmp_path)), "a100-0")
    n = o.node
    inst = next(m for m in n.gpus[0].mig if m.profile == "2g.20gb")
    both = [Visible(n.gpus[0], inst), Visible(n.gpus[4])]
    s = sighting(outcome("mig-one-2g.20gb-a100-0", run_probe(n, both)))
    assert s.report is not None and [d.uuid for d in s.report.devices] == [inst.uuid]  # CUDA hides the GPU
    v = checks.evaluate_instance_isolated("a100-0", {**o.one_pods, "2g.20gb": s}, model="NVIDIA A100-SXM4-80GB")
    assert v.outcome is Outcome.FAIL
    assert v.summary == (f"pod mig-one-2g.20gb-a100-0, requesting one 2g.20gb instance, sees the whole GPU "
                         f"{n.gpus[4].uuid} (in NVIDIA_VISIBLE_DEVICES, NVML with MIG mode off); 2 GPUs through "
                         f"NVML or /dev ({n.gpus[0].uuid}, {n.gpus[4].uuid})")


def test_a_second_gpu_shown_only_as_a_device_node_fails_isolation(tmp_path: Path) -> None:
    """NVML failing and no device list (CDI): CUDA shows the pod's one instance and hides the whole
    GPU beside it; /dev/nvidiaN is the one view left that shows the second GPU."""
    o = observe(cluster(_half_mig(tmp_path)), "a100-0")
    n = o.node
    inst = next(m for m in n.gpus[0].mig if m.profile == "2g.20gb")
    s = blind_nvml(sighting(outcome("mig-one-2g.20gb-a100-0", run_probe(n, [Visible(n.gpus[0], inst),
                                                                            Visible(n.gpus[4])], devices_env="void"))))
    assert s.report is not None and [d.uuid for d in s.report.devices] == [inst.uuid]
    v = checks.evaluate_instance_isolated("a100-0", {**o.one_pods, "2g.20gb": s}, model="NVIDIA A100-SXM4-80GB")
    assert v.outcome is Outcome.FAIL
    dev = [f"/dev/nvidia{n.gpus[0].minor}", f"/dev/nvidia{n.gpus[4].minor}"]
    assert v.summary == (f"pod mig-one-2g.20gb-a100-0, requesting one 2g.20gb instance, sees 2 GPUs through NVML or "
                         f"/dev ({', '.join(dev)})")
    assert v.expected == "exactly one MIG-2g.20gb device and only its parent GPU"


def test_an_instance_with_the_wrong_memory_fails_and_an_unknown_model_is_not_judged() -> None:
    o = observe(cluster(), "a100-0")
    s = o.one_pods["1g.10gb"]
    assert s.report is not None
    small = dataclasses.replace(s.report, devices=tuple(
        dataclasses.replace(d, total_memory_bytes=5 << 30) for d in s.report.devices))
    seen = {**o.one_pods, "1g.10gb": Sighting(s.where, small)}
    v = checks.evaluate_instance_isolated("a100-0", seen, model="NVIDIA A100-SXM4-80GB")
    assert v.outcome is Outcome.FAIL
    assert "has 5.00 GiB, outside 9.17-9.83 GiB (nvidia-smi mig -lgip 9.50 GiB +- 3.5%)" in v.summary
    unknown = checks.evaluate_instance_isolated("a100-0", o.one_pods, model="NVIDIA Made-Up GPU")
    assert unknown.outcome is Outcome.NOT_TESTED
    assert unknown.summary.startswith("instance memory not judged: GPU model NVIDIA Made-Up GPU has no MIG profile "
                                      "table in gpuconf/data/mig_profiles.yaml")


REAL_MEMORY = Path(__file__).parent / "data" / "real" / "mig" / "instance-memory.csv"


def real_memory() -> list[dict[str, str]]:
    lines = [line for line in REAL_MEMORY.read_text().splitlines() if not line.startswith("#")]
    return list(csv.DictReader(lines))


@pytest.mark.parametrize("row", real_memory(), ids=lambda r: f"{r['gpu']} {r['profile']} at {r['gib']} GiB")
def test_every_real_instance_memory_is_its_profile_s(row: dict[str, str]) -> None:
    """Real figures of one profile differ by driver and host (RTX PRO 6000 1g.24gb: 23.12 and 23.62 GiB):
    each is accepted, and none sits further from the table's lgip figure than LGIP_SPREAD allows."""
    table = checks.mig_profiles(row["gpu"])
    assert table is not None and row["profile"] in table, row
    spec = table[row["profile"]]
    low, high, _ = checks.memory_band(spec)
    assert low <= float(row["gib"]) <= high, (row, low, high)
    assert spec.lgip_gib is not None and abs(float(row["gib"]) / spec.lgip_gib - 1) <= (
        checks.LGIP_SPREAD - checks.LGIP_MARGIN), row


def test_the_two_real_instances_the_old_band_rejected_are_accepted() -> None:
    for gpu, profile, gib in (("NVIDIA H100 NVL", "1g.12gb", 10.75),
                              ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "1g.24gb", 23.12)):
        table = checks.mig_profiles(gpu)
        assert table is not None
        low, high, _ = checks.memory_band(table[profile])
        assert low <= gib <= high, (gpu, profile, low, high)


def test_no_band_reaches_another_profile_s_memory_on_the_same_gpu() -> None:
    """The fault the band exists for, an instance with a bigger (or smaller) profile's memory, stays
    outside it for every profile set: distinct memories are at least 1.9 x apart (GB200's 1g.23gb and
    1g.24gb are one size under two generations of names)."""
    for row in tables.load("mig_profiles")["profile_sets"]:
        table = checks.mig_profiles(row["gpus"][0])
        assert table is not None
        for spec in table.values():
            low, high, _ = checks.memory_band(spec)
            for other in table.values():
                figure = other.lgip_gib or other.memory_gib
                if max(other.memory_gib, spec.memory_gib) >= 1.5 * min(other.memory_gib, spec.memory_gib):
                    assert not low <= figure <= high, (row["name"], spec.name, other.name)


def test_an_instance_showing_a_bigger_profile_s_memory_fails() -> None:
    o = observe(cluster(), "a100-0")
    s = o.one_pods["1g.10gb"]
    assert s.report is not None
    bigger = dataclasses.replace(s.report, devices=tuple(
        dataclasses.replace(d, total_memory_bytes=int(19.5 * (1 << 30))) for d in s.report.devices))
    v = checks.evaluate_instance_isolated("a100-0", {**o.one_pods, "1g.10gb": Sighting(s.where, bigger)},
                                          model="NVIDIA A100-SXM4-80GB")
    assert v.outcome is Outcome.FAIL
    assert "has 19.50 GiB, outside 9.17-9.83 GiB (nvidia-smi mig -lgip 9.50 GiB +- 3.5%)" in v.summary


def test_a_pod_given_the_wrong_profile_fails() -> None:
    o = observe(cluster(), "a100-0")
    v = checks.evaluate_instance_isolated("a100-0", {"2g.20gb": o.one_pods["3g.40gb"]}, model="NVIDIA A100-SXM4-80GB")
    assert v.outcome is Outcome.FAIL
    assert v.summary.startswith("a pod requesting one 2g.20gb instance got a 3g.40gb (MIG-")


def test_a_pod_without_output_fails_with_its_reason() -> None:
    v = checks.evaluate_instance_isolated("a100-0", {"1g.10gb": Sighting("pod x", None, "pod x produced no output")},
                                          model=None)
    assert v.outcome is Outcome.FAIL and "pod x produced no output" in v.summary


# -------------------------------------------------------------------------------------------------
# mig.not-also-full-gpu


def _half_mig(tmp_path: Path) -> Path:
    """a100-mig-mixed with GPUs 4-7 left whole (MIG off): they are advertised as nvidia.com/gpu."""
    text = (Path(__file__).parents[1] / "gpuconf/data/sim_profiles/a100-mig-mixed.yaml").read_text()
    text = text.replace('layout: {"1g.10gb": 7}', "layout: {}").replace("name: a100-mig-mixed", "name: a100-half")
    path = tmp_path / "a100-half.yaml"
    path.write_text(text)
    return path


def test_whole_gpus_beside_mig_pass_and_a_mig_enabled_gpu_handed_out_whole_fails(tmp_path: Path) -> None:
    o = observe(cluster(_half_mig(tmp_path)), "a100-0")
    results = verdicts(o)
    assert all(v.outcome is Outcome.PASS for v in results.values()), {k: v.message() for k, v in results.items()}
    assert o.capacity["nvidia.com/gpu"] == "4"
    assert results["mig.not-also-full-gpu"].summary.startswith(
        "the 4 whole GPUs behind nvidia.com/gpu have MIG disabled and none is a parent of the instances on 4 ")
    n = o.node
    wrong = sighting(outcome("inventory-a100-0", run_probe(n, [Visible(n.gpus[0]), Visible(n.gpus[4])])))
    v = checks.evaluate_not_also_full_gpu("a100-0", labels=o.labels, capacity=o.capacity,
                                          mig_seen=list(o.all_pods.values()), full_seen=wrong)
    assert v.outcome is Outcome.FAIL
    assert v.summary == f"nvidia.com/gpu hands out MIG-enabled GPU {n.gpus[0].uuid}"
    inst = n.gpus[0].mig[0]
    given = sighting(outcome("inventory-a100-0", run_probe(n, [Visible(n.gpus[0], inst), Visible(n.gpus[4])])))
    v = checks.evaluate_not_also_full_gpu("a100-0", labels=o.labels, capacity=o.capacity,
                                          mig_seen=list(o.all_pods.values()), full_seen=given)
    assert v.outcome is Outcome.FAIL
    assert v.summary == (f"nvidia.com/gpu hands out MIG-enabled GPU {n.gpus[0].uuid} (instances {inst.uuid} through "
                         "CUDA or NVIDIA_VISIBLE_DEVICES)")


def test_single_strategy_with_a_whole_gpu_in_the_device_list_fails() -> None:
    o = observe(cluster("h100-mig-single"), "h100-mig-0")
    n = o.node
    mixed = [Visible(n.gpus[0], m) for m in n.gpus[0].mig] + [Visible(n.gpus[1])]
    seen = sighting(outcome("mig-all-h100-mig-0", run_probe(n, mixed)))
    v = checks.evaluate_not_also_full_gpu("h100-mig-0", labels=o.labels, capacity=o.capacity, mig_seen=[seen],
                                          full_seen=None)
    assert v.outcome is Outcome.FAIL
    assert v.summary == (f"with the single strategy, nvidia.com/gpu hands out the whole GPU {n.gpus[1].uuid} (in "
                         "NVIDIA_VISIBLE_DEVICES) beside MIG instances")


def test_single_strategy_with_a_gpu_whose_mig_mode_is_off_fails_without_a_device_list() -> None:
    o = observe(cluster("h100-mig-single"), "h100-mig-0")
    n = o.node
    off = dataclasses.replace(n.gpus[1], mig=(), mig_mode=False)  # mig-manager left this GPU whole
    mixed = [Visible(n.gpus[0], m) for m in n.gpus[0].mig] + [Visible(off)]
    seen = sighting(outcome("mig-all-h100-mig-0", run_probe(n, mixed, devices_env="void")))
    v = checks.evaluate_not_also_full_gpu("h100-mig-0", labels=o.labels, capacity=o.capacity, mig_seen=[seen],
                                          full_seen=None)
    assert v.outcome is Outcome.FAIL
    assert v.summary == (f"with the single strategy, nvidia.com/gpu hands out the whole GPU {off.uuid} (in NVML with "
                         "MIG mode off) beside MIG instances")


def blind_nvml(s: Sighting, reason: str = "nvmlInit_v2: Unknown Error") -> Sighting:
    """``s`` with NVML failing in its container (CUDA and NVIDIA_VISIBLE_DEVICES as they were)."""
    assert s.report is not None
    return Sighting(s.where, dataclasses.replace(s.report, nvml_absent_reason=reason, nvml_gpus=()))


def test_a_whole_gpu_pod_whose_nvml_fails_under_cdi_is_not_tested_naming_what_was_unread(tmp_path: Path) -> None:
    """Under CDI (NVIDIA_VISIBLE_DEVICES=void) NVML alone shows the MIG mode of the GPUs behind
    nvidia.com/gpu: with it failing nothing was judged, never "the 0 whole GPUs ... have MIG disabled"."""
    o = observe(cluster(_half_mig(tmp_path)), "a100-0")
    n = o.node
    full = blind_nvml(sighting(outcome("inventory-a100-0", run_probe(n, [Visible(g) for g in n.gpus[4:]],
                                                                      devices_env="void"))))
    v = checks.evaluate_not_also_full_gpu("a100-0", labels=o.labels, capacity=o.capacity,
                                          mig_seen=list(o.all_pods.values()), full_seen=full)
    assert v.outcome is Outcome.NOT_TESTED and v.kind == "could-not-run", v.message()
    assert v.summary == ("whether nvidia.com/gpu on a100-0 hands out a MIG-enabled GPU could not be read: NVML did "
                         "not load in pod inventory-a100-0 (nvmlInit_v2: Unknown Error), the only view of the MIG "
                         "mode of the GPUs it holds (NVIDIA_VISIBLE_DEVICES='void'; CUDA never enumerates a "
                         "MIG-enabled GPU)")
    # the same pod with a readable device list but NVML failing: the MIG mode is still unread
    listed = blind_nvml(o.full) if o.full is not None else None
    v = checks.evaluate_not_also_full_gpu("a100-0", labels=o.labels, capacity=o.capacity,
                                          mig_seen=list(o.all_pods.values()), full_seen=listed)
    assert v.outcome is Outcome.NOT_TESTED and "NVML did not load in pod inventory-a100-0" in v.summary


def test_a_single_strategy_pod_whose_nvml_fails_under_cdi_is_not_tested_naming_what_was_unread() -> None:
    o = observe(cluster("h100-mig-single"), "h100-mig-0")
    n = o.node
    every = [Visible(g, m) for g in n.gpus for m in g.mig]
    seen = blind_nvml(sighting(outcome("mig-all-h100-mig-0", run_probe(n, every, devices_env="void"))))
    v = checks.evaluate_not_also_full_gpu("h100-mig-0", labels=o.labels, capacity=o.capacity, mig_seen=[seen],
                                          full_seen=None)
    assert v.outcome is Outcome.NOT_TESTED and v.kind == "could-not-run", v.message()
    assert v.summary == ("whether nvidia.com/gpu on h100-mig-0 hands out a whole GPU beside MIG instances could not "
                         "be read: NVML did not load in pod mig-all-h100-mig-0 (nvmlInit_v2: Unknown Error), and "
                         "NVIDIA_VISIBLE_DEVICES='void' names no device (CDI or volume-mounts), while CUDA enumerates "
                         "one MIG device and no whole GPU beside it")


def test_with_nvml_failing_a_device_list_still_judges_single_and_says_the_parents_were_not_counted() -> None:
    o = observe(cluster("h100-mig-single"), "h100-mig-0")
    seen = blind_nvml(o.all_pods["1g.10gb"])
    v = checks.evaluate_not_also_full_gpu("h100-mig-0", labels=o.labels, capacity=o.capacity, mig_seen=[seen],
                                          full_seen=None)
    assert v.outcome is Outcome.PASS
    assert v.summary == ("all 28 nvidia.com/gpu on h100-mig-0 are MIG instances (single strategy), on MIG-enabled "
                         "GPUs NVML could not count (NVML did not load in pod mig-all-h100-mig-0 (nvmlInit_v2: "
                         "Unknown Error))")


def test_a_dra_whole_gpu_claim_whose_nvml_fails_passes_on_the_slice_naming_what_was_not_judged() -> None:
    o = observe_dra(cluster("a100-mig-dra"), "a100-0")
    n = o.node
    given = blind_nvml(sighting(outcome("smoke-a100-0", run_probe(n, [Visible(n.gpus[3])], devices_env="void"))))
    v = dra_verdicts(o, full=given)["mig.not-also-full-gpu"]
    assert v.outcome is Outcome.PASS
    assert v.summary == ("the DRA driver publishes the 8 MIG-enabled GPUs as their 24 MIG devices only, none also as "
                         "type gpu (0 whole GPUs published)")
    assert v.not_judged == ("the MIG mode of the GPUs a whole-GPU claim is given: NVML did not load in pod "
                            "smoke-a100-0 (nvmlInit_v2: Unknown Error)",)


def test_a_whole_gpu_that_is_a_mig_parent_fails_even_with_its_mig_mode_unread(tmp_path: Path) -> None:
    """NVML may give no MIG mode for a GPU: one that is the parent of the MIG pods' instances is
    still a MIG-enabled GPU handed out whole."""
    o = observe(cluster(_half_mig(tmp_path)), "a100-0")
    n = o.node
    full = sighting(outcome("inventory-a100-0", run_probe(n, [Visible(n.gpus[0]), Visible(n.gpus[4])])))
    assert full.report is not None
    unread = tuple(dataclasses.replace(g, mig_enabled=None) for g in full.report.nvml_gpus)
    full = Sighting(full.where, dataclasses.replace(full.report, nvml_gpus=unread))
    v = checks.evaluate_not_also_full_gpu("a100-0", labels=o.labels, capacity=o.capacity,
                                          mig_seen=list(o.all_pods.values()), full_seen=full)
    assert v.outcome is Outcome.FAIL
    assert v.summary == f"nvidia.com/gpu hands out MIG-enabled GPU {n.gpus[0].uuid}"
    assert v.observed == "MIG enabled on 0, parent of an instance: 1, instances: 0"
    # a whole GPU whose MIG mode is unread and that is no parent passes, naming what was not judged
    whole = sighting(outcome("inventory-a100-0", run_probe(n, [Visible(n.gpus[4])])))
    assert whole.report is not None
    whole = Sighting(whole.where, dataclasses.replace(whole.report, nvml_gpus=tuple(
        dataclasses.replace(g, mig_enabled=None) for g in whole.report.nvml_gpus)))
    v = checks.evaluate_not_also_full_gpu("a100-0", labels=o.labels, capacity=o.capacity,
                                          mig_seen=list(o.all_pods.values()), full_seen=whole)
    assert v.outcome is Outcome.PASS
    assert v.not_judged == (f"whether {n.gpus[4].uuid} has MIG enabled: NVML gave no MIG mode for it (it is no "
                            "parent of the instances seen)",)


# -------------------------------------------------------------------------------------------------
# Facts: which nodes, which pods, which declared layout


@pytest.mark.parametrize(("profile", "node", "reason"), [
    ("healthy-h100", "h100-0", "h100-0 has no GPU with MIG enabled (nvidia.com/mig.strategy=single is the device "
                               "plugin's configured strategy, nvidia.com/mig.capable=true; no MIG instance is labelled "
                               "or advertised): no MIG layout to check"),
    ("t4-timeslicing", "t4-0", "t4-0 does not use MIG (nvidia.com/mig.strategy=unlabelled, "
                               "nvidia.com/mig.capable=false)"),
    ("a100-mig-mixed", "a100-0", None),
    ("h100-mig-single", "h100-mig-0", None),
], ids=["an H100 without MIG is skipped", "a T4 cannot do MIG", "a mixed node is checked", "a single node is checked"])
def test_which_nodes_the_suite_checks(profile: str, node: str, reason: str | None) -> None:
    n = cluster(profile).node(node)
    assert checks.mig_skip_reason(node, node_labels(n), node_resources(n)[0]) == reason


def test_a_strategy_label_without_any_mig_instance_is_skipped_with_the_reason() -> None:
    reason = checks.mig_skip_reason("n", {"nvidia.com/mig.strategy": "mixed"}, {"nvidia.com/gpu": "8"})
    assert reason == ("n has no GPU with MIG enabled (nvidia.com/mig.strategy=mixed is the device plugin's "
                      "configured strategy, nvidia.com/mig.capable=unlabelled; no MIG instance is labelled or "
                      "advertised): no MIG layout to check")


@pytest.mark.parametrize(("labels", "capacity", "found"), [
    ({"nvidia.com/mig.strategy": "mixed", "nvidia.com/mig-1g.10gb.count": "7"}, {"nvidia.com/gpu": "7"},
     "GFD labels MIG instances per profile (1g.10gb x7; nvidia.com/mig.strategy=mixed) while the device plugin "
     "advertises no nvidia.com/mig-<profile> resource but nvidia.com/gpu: 7 (strategy single or none)"),
    ({"nvidia.com/mig.strategy": "single", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb",
      "nvidia.com/gpu.count": "7"}, {"nvidia.com/mig-1g.10gb": "7", "nvidia.com/gpu": "0"},
     "GFD labels nvidia.com/mig.strategy=single (nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3-MIG-1g.10gb) while the "
     "device plugin advertises nvidia.com/mig-1g.10gb: 7 (strategy mixed)"),
], ids=["GFD mixed, plugin single", "GFD single, plugin mixed"])
def test_labels_and_plugin_with_different_strategies_are_judged_not_skipped(labels, capacity, found) -> None:
    assert checks.mig_skip_reason("n", labels, capacity) is None
    assert checks.strategy_disagreement(labels, capacity) == found
    declared = checks.declared_layout(labels, None, source="none", gpus=1, profiles=None)
    verdict = checks.evaluate_layout_matches_config("n", labels=labels, capacity=capacity, allocatable=capacity,
                                                    seen={}, declared=declared)
    assert verdict.outcome is Outcome.FAIL
    assert verdict.summary.startswith(f"GFD and the device plugin run different MIG strategies: {found}")


def test_the_plan_has_an_all_and_a_one_pod_per_profile_with_valid_names() -> None:
    o = observe(cluster(), "a100-0")
    plan = checks.plan_node("a100-0", o.labels, o.allocatable)
    assert [(p.role, p.resource, p.count) for p in plan] == [
        ("all", "nvidia.com/mig-1g.10gb", 36), ("one", "nvidia.com/mig-1g.10gb", 1),
        ("all", "nvidia.com/mig-2g.20gb", 4), ("one", "nvidia.com/mig-2g.20gb", 1),
        ("all", "nvidia.com/mig-3g.40gb", 4), ("one", "nvidia.com/mig-3g.40gb", 1)]
    assert plan[0].name == "mig-all-1g.10gb-a100-0"
    assert checks.pod_name("one-1g.5gb+me", "n") == "mig-one-1g.5gb-me-n"
    assert len(checks.pod_name("all", "x" * 300)) == 253


def test_declared_layouts_from_a_mig_parted_config() -> None:
    configs = checks.parse_mig_parted("""
version: v1
mig-configs:
  all-balanced:
    - device-filter: ["0x20B010DE"]
      devices: all
      mig-enabled: true
      mig-devices: {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}
    - device-filter: ["0x20B210DE"]
      devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
  half:
    - devices: [0, 1]
      mig-enabled: true
      mig-devices: {"7g.80gb": 1}
    - devices: [2, 3]
      mig-enabled: false
""")
    a100_80 = checks.mig_profiles("NVIDIA A100-SXM4-80GB")
    balanced = checks.declared_layout({"nvidia.com/mig.config": "all-balanced"}, configs, source="cm", gpus=2,
                                      profiles=a100_80)
    assert balanced.layout == {"1g.10gb": 4, "2g.20gb": 2, "3g.40gb": 2}
    half = checks.declared_layout({"nvidia.com/mig.config": "half"}, configs, source="cm", gpus=1, profiles=None)
    assert half.layout == {"7g.80gb": 2} and half.why == "nvidia.com/mig.config=half in cm, over 4 GPUs"
    unknown = checks.declared_layout({"nvidia.com/mig.config": "all-balanced"}, configs, source="cm", gpus=2,
                                     profiles=None)
    assert unknown.layout is None and "cannot be told" in unknown.why
    missing = checks.declared_layout({"nvidia.com/mig.config": "nope"}, configs, source="cm", gpus=2, profiles=None)
    assert missing.why == "nvidia.com/mig.config=nope is not a config in cm (configs: all-balanced, half)"
    with pytest.raises(ValueError, match="no mig-configs"):
        checks.parse_mig_parted("version: v1\n")


def test_mig_profile_tables_are_found_by_nvml_name_and_gfd_product() -> None:
    assert checks.mig_profiles("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb") == checks.mig_profiles("NVIDIA A100-SXM4-80GB")
    assert checks.mig_profiles("NVIDIA-H100-80GB-HBM3")["7g.80gb"].memory_gib == 80  # type: ignore[index]
    assert checks.mig_profiles("Tesla-T4-SHARED") is None and checks.mig_profiles(None) is None


# -------------------------------------------------------------------------------------------------
# The simulated mig-manager these checks read


def test_the_simulated_mig_manager_labels_its_config_and_publishes_the_layouts() -> None:
    c = cluster()
    labels = node_labels(c.node("a100-0"))
    assert (labels["nvidia.com/mig.config"], labels["nvidia.com/mig.config.state"]) == ("custom-a100", "success")
    config = make_mig_parted_config(c)
    assert config is not None and config["metadata"] == {"name": "default-mig-parted-config",
                                                         "namespace": "gpu-operator"}
    configs = checks.parse_mig_parted(config["data"]["config.yaml"])
    assert configs["custom-a100"] == [
        {"devices": [0, 1, 2, 3], "mig-enabled": True, "mig-devices": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}},
        {"devices": [4, 5, 6, 7], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]
    single = make_mig_parted_config(cluster("h100-mig-single"))
    assert single is not None
    assert checks.parse_mig_parted(single["data"]["config.yaml"])["all-1g.10gb"] == [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]
    assert make_mig_parted_config(cluster("healthy-h100")) is None
    assert "nvidia.com/mig.config" not in node_labels(cluster("healthy-h100").node("h100-0"))


def test_the_drift_leaves_the_declared_config_and_changes_the_instances() -> None:
    clean, drifted = cluster(), cluster(faults=drift("a100"))
    assert node_labels(drifted.node("a100-0"))["nvidia.com/mig.config"] == "custom-a100"
    assert make_mig_parted_config(drifted) == make_mig_parted_config(clean)
    assert node_resources(drifted.node("a100-0"))[0]["nvidia.com/mig-1g.10gb"] == "35"


@pytest.mark.parametrize(("profile", "pool", "plugin", "found"), [
    ("h100-mig-single", "h100-mig", "mixed",
     "GFD labels nvidia.com/mig.strategy=single (nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3-MIG-1g.10gb) while the "
     "device plugin advertises nvidia.com/mig-1g.10gb: 28 (strategy mixed)"),
], ids=["GFD single, plugin mixed"])
def test_the_strategy_mismatch_fault_fails_the_layout_check_naming_both_strategies(profile, pool, plugin, found):
    c = cluster(profile, [{"id": "mig-strategy-mismatch", "pool": pool, "node": 0, "plugin_strategy": plugin}])
    results = verdicts(observe(c, f"{pool}-0"))
    layout = results["mig.layout-matches-config"]
    assert layout.outcome is Outcome.FAIL
    assert layout.summary.startswith(f"GFD and the device plugin run different MIG strategies: {found}")
    others = {k: v.outcome for k, v in results.items() if k != "mig.layout-matches-config"}
    assert Outcome.FAIL not in others.values() and Outcome.DEGRADED not in others.values(), others
    healthy = verdicts(observe(cluster(profile), f"{pool}-0"))  # the twin without the fault
    assert all(v.outcome is Outcome.PASS for v in healthy.values()), {k: v.message() for k, v in healthy.items()}


def test_a_plugin_running_single_under_a_multi_profile_layout_registers_nothing_and_gfd_says_invalid() -> None:
    """GFD's labels under single for a layout of several profiles, and the plugin's refusal."""
    c = cluster("a100-mig-mixed", [{"id": "mig-strategy-mismatch", "pool": "a100", "node": 0,
                                    "plugin_strategy": "single"}])
    n = c.node("a100-0")
    assert advertised_devices(n) == []
    assert node_labels(n)["nvidia.com/mig.strategy"] == "mixed"  # GFD still reads the pool's mixed config


# -------------------------------------------------------------------------------------------------
# Desired vs actual: mig-manager told to cut the GPUs, and no instance exists


def apply_failed(profile: str) -> Observed:
    c = cluster(profile, [{"id": "mig-apply-failed"}])
    return observe(c, c.nodes[0].name)


@pytest.mark.parametrize(("profile", "config", "gpus"), [
    ("h100-mig-single", "all-1g.10gb", "GPUs"),
    ("a100-mig-mixed", "custom-a100", "8 GPUs (GFD counts them)"),
], ids=["single strategy", "mixed strategy"])
def test_a_failed_mig_apply_fails_the_layout_check_once_naming_config_and_state(profile: str, config: str,
                                                                                 gpus: str) -> None:
    """MIG mode on, no instance, nvidia.com/mig.config.state=failed: before, the node was skipped as having no
    MIG ("no MIG layout to check"); now the layout check fails and the other two say why they judge nothing."""
    o = apply_failed(profile)
    assert o.labels["nvidia.com/mig.config.state"] == "failed"
    assert checks.mig_skip_reason(o.node.name, o.labels, o.capacity) is None
    results = verdicts(o)
    layout = results["mig.layout-matches-config"]
    assert layout.outcome is Outcome.FAIL
    assert layout.summary.startswith(
        f"mig-manager could not apply nvidia.com/mig.config={config} (nvidia.com/mig.config.state=failed): no view "
        f"shows a MIG instance on any of its {gpus}")
    assert "read the nvidia-mig-manager pod's log" in layout.summary
    others = {k: v.outcome for k, v in results.items() if k != "mig.layout-matches-config"}
    assert others == {"mig.instance-isolated": Outcome.NOT_TESTED, "mig.not-also-full-gpu": Outcome.NOT_TESTED}
    assert results["mig.not-also-full-gpu"].summary.startswith(f"{o.node.name} hands out no MIG instance to look at")


def test_a_config_asking_for_instances_none_of_which_exists_fails_without_a_failed_state() -> None:
    o = apply_failed("a100-mig-mixed")
    labels = {**o.labels, "nvidia.com/mig.config.state": "success"}  # mig-manager said nothing
    config = make_mig_parted_config(cluster("a100-mig-mixed"))
    assert config is not None
    configs = checks.parse_mig_parted(config["data"]["config.yaml"])
    declared = checks.declared_layout(labels, configs, source="the ConfigMap", gpus=checks.node_gpus(labels, 0),
                                      profiles=checks.mig_profiles("NVIDIA A100-SXM4-80GB"))
    assert declared.asks and declared.layout == {"3g.40gb": 4, "2g.20gb": 4, "1g.10gb": 36}
    v = checks.evaluate_layout_matches_config(o.node.name, labels=labels, capacity=o.capacity,
                                              allocatable=o.allocatable, seen={}, declared=declared)
    assert v.outcome is Outcome.FAIL
    assert v.summary.startswith(
        "nvidia.com/mig.config=custom-a100 asks for 1g.10gb x36, 2g.20gb x4, 3g.40gb x4, but no view shows a MIG "
        "instance on any of its 8 GPUs (GFD counts them)")
    # an unreadable config: all-<profile> still asks for instances by mig-parted's own naming
    named = {**labels, "nvidia.com/mig.config": "all-1g.10gb"}
    unread = checks.declared_layout(named, None, source="no ConfigMap", gpus=0, profiles=None)
    assert unread.asks is True and unread.layout is None
    v = checks.evaluate_layout_matches_config(o.node.name, labels=named, capacity=o.capacity,
                                              allocatable=o.allocatable, seen={}, declared=unread)
    assert v.outcome is Outcome.FAIL and v.summary.startswith("nvidia.com/mig.config=all-1g.10gb asks for MIG "
                                                              "instances, but no view shows")


@pytest.mark.parametrize(("config", "judged"), [("all-disabled", False), ("all-enabled", False),
                                                ("all-1g.10gb", True), ("all-balanced", True), ("custom", True)])
def test_only_a_config_that_may_ask_for_instances_keeps_a_node_without_any_in_the_mig_suite(config: str,
                                                                                             judged: bool) -> None:
    labels = {"nvidia.com/mig.strategy": "single", "nvidia.com/mig.capable": "true", "nvidia.com/mig.config": config,
              "nvidia.com/mig.config.state": "success", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert (checks.mig_skip_reason("n", labels, {"nvidia.com/gpu": "8"}) is None) is judged
    failed_state = {**labels, "nvidia.com/mig.config.state": "failed"}
    assert checks.mig_skip_reason("n", failed_state, {"nvidia.com/gpu": "8"}) is None


def test_a_custom_config_asking_for_nothing_is_not_tested_when_nothing_exists() -> None:
    labels = {"nvidia.com/mig.strategy": "mixed", "nvidia.com/mig.config": "custom",
              "nvidia.com/mig.config.state": "success", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    configs = {"custom": [{"devices": "all", "mig-enabled": False}]}
    declared = checks.declared_layout(labels, configs, source="cm", gpus=8, profiles=None)
    assert declared.asks is False
    v = checks.evaluate_layout_matches_config("n", labels=labels, capacity={"nvidia.com/gpu": "8"},
                                              allocatable={"nvidia.com/gpu": "8"}, seen={}, declared=declared)
    assert v.outcome is Outcome.NOT_TESTED
    assert v.summary == ("nvidia.com/mig.config=custom asks for no MIG instance, and no GPU of n has one: no MIG "
                         "layout to compare")


def test_the_simulated_failed_apply_is_what_a_real_gpu_shows() -> None:
    """MIG mode on with no instance: NVML says enabled, CUDA enumerates nothing (cudaErrorNoDevice), the device
    plugin advertises nothing for it (single: nothing at all, GFD says -MIG-INVALID; mixed: no mig-* and no
    nvidia.com/gpu), mig-manager's state is failed; the catalog names the layout check."""
    fault = fault_catalog()["mig-apply-failed"]
    assert (fault.check, fault.severity, fault.scope) == ("mig.layout-matches-config", "fail", "node")
    single = apply_failed("h100-mig-single")
    n = single.node
    assert all(g.mig_enabled and not g.mig for g in n.gpus)
    assert advertised_devices(n) == [] and single.capacity == {}
    assert single.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-INVALID"
    code, out = run_probe(n, [Visible(g) for g in n.gpus], devices_env="all")
    report = parse_cuda_probe(out, exit_code=code)
    assert code == 4 and report.exit_reason == "no CUDA device: cudaFree(0) returned 100 cudaErrorNoDevice"
    assert not report.devices and [g.mig_enabled for g in report.nvml_gpus] == [True] * len(n.gpus)
    mixed = apply_failed("a100-mig-mixed")
    assert not any(k.startswith("nvidia.com/mig-") or k == "nvidia.com/gpu" for k in mixed.capacity)
    assert mixed.labels["nvidia.com/gpu.count"] == str(len(mixed.node.gpus))
    healthy = cluster("h100-mig-single").nodes[0]
    assert node_labels(healthy)["nvidia.com/mig.config.state"] == "success"


# -------------------------------------------------------------------------------------------------
# MIG through DRA (issue 27 item 5): a100-mig-dra, the device plugin off, the instances published by
# NVIDIA's DRA driver as devices of type mig and handed out by claims on mig.nvidia.com (CDI, so
# NVIDIA_VISIBLE_DEVICES is void in the container)


@dataclasses.dataclass
class DraObserved:
    node: SimNode
    labels: dict[str, str]
    devices: tuple[SliceDevice, ...]
    all_pods: dict[str, Sighting]
    one_pods: dict[str, Sighting]
    claimed: dict[str, tuple[SliceDevice, ...] | None]
    counts: dict[str, int]
    declared: checks.Declared


def injected(n: SimNode, devices: Sequence[SliceDevice]) -> list[Visible]:
    """What the DRA driver's CDI spec injects for claimed slice devices (the sim's own mechanism,
    mig-sibling-visible's stale sibling included)."""
    out: list[Visible] = []
    for d in devices:
        gpu = next(g for g in n.gpus if g.uuid == d.attributes.get("parentUUID"))
        mine = Visible(gpu, next(i for i in gpu.mig if i.uuid == d.uuid))
        out += [v for v in (*_stale_sibling(n, mine), mine) if v not in out]
    return out


def observe_dra(c: SimCluster, name: str) -> DraObserved:
    """Every pod plan_node plans from the node's slice, each given the first usable devices of its profile."""
    n = c.node(name)
    labels = node_labels(n)
    capacity, allocatable = node_resources(n)
    assert not capacity and not allocatable  # no device plugin
    devices = slice_devices(resource_slices(n), name)
    all_pods: dict[str, Sighting] = {}
    one_pods: dict[str, Sighting] = {}
    claimed: dict[str, tuple[SliceDevice, ...] | None] = {}
    counts: dict[str, int] = {}
    for planned in checks.plan_node(name, labels, allocatable, devices):
        assert planned.resource == "mig.nvidia.com"
        mine = tuple(d for d in devices if d.kind == "mig" and d.attributes["profile"] == planned.profile)
        mine = mine[:planned.count]
        seen = sighting(outcome(planned.name, run_probe(n, injected(n, mine), devices_env="void")))
        if planned.role == "all":
            all_pods[planned.profile], counts[planned.profile] = seen, planned.count
        else:
            one_pods[planned.profile], claimed[planned.profile] = seen, mine
    config = make_mig_parted_config(c)
    configs = checks.parse_mig_parted(config["data"]["config.yaml"]) if config else None
    parents = {d.gpu_uuid for d in devices if d.kind == "mig"}
    declared = checks.declared_layout(labels, configs, source=f"ConfigMap gpu-operator/{MIG_PARTED_CONFIG}",
                                      gpus=checks.node_gpus(labels, len(parents)),
                                      profiles=checks.mig_profiles(n.model.name))
    return DraObserved(n, labels, devices, all_pods, one_pods, claimed, counts, declared)


def dra_verdicts(o: DraObserved, full: Sighting | None = None) -> dict[str, Verdict]:
    name = o.node.name
    model = checks.gpu_model(o.labels, [s.report for s in o.one_pods.values()])
    return {v.check: v for v in (
        checks.evaluate_layout_matches_config(name, labels=o.labels, capacity={}, allocatable={}, seen=o.all_pods,
                                              declared=o.declared, published=checks.published_layout(o.devices),
                                              granted_by_dra=o.counts),
        checks.evaluate_instance_isolated(name, o.one_pods, model=model, claimed=o.claimed, node_devices=o.devices),
        checks.evaluate_not_also_full_gpu(name, labels=o.labels, capacity={}, mig_seen=list(o.all_pods.values()),
                                          full_seen=full, devices=o.devices),
    )}


def test_the_dra_driver_publishes_a_mig_enabled_gpu_as_its_instances_only() -> None:
    n = cluster("a100-mig-dra").node("a100-0")
    devices = slice_devices(resource_slices(n), "a100-0")
    assert {d.kind for d in devices} == {"mig"} and len(devices) == 4 * 4 + 4 * 2
    first = next(d for d in devices if d.name == "gpu-0-mig-1")
    assert (first.attributes["parentUUID"], first.attributes["profile"]) == (n.gpus[0].uuid, "3g.40gb")
    labels = node_labels(n)  # GFD under the plugin's strategy none: no MIG instance labelled
    assert "nvidia.com/mig.strategy" not in labels and not checks.labelled_layout(labels)
    assert labels["nvidia.com/mig.config"] == "custom-a100"


def test_a_healthy_dra_mig_node_passes_every_mig_check_reading_the_layout_from_the_slice() -> None:
    o = observe_dra(cluster("a100-mig-dra"), "a100-0")
    results = dra_verdicts(o)
    bad = {k: v.message() for k, v in results.items() if v.outcome is not Outcome.PASS}
    assert not bad, bad
    layout = results["mig.layout-matches-config"]
    assert layout.summary == ("1g.10gb x8, 2g.20gb x4, 3g.40gb x12 in nvidia.com/mig.config=custom-a100, the DRA "
                              "driver's ResourceSlice (read from the DRA driver's ResourceSlice: GFD labels no MIG "
                              "instance)")
    source = "source: the DRA driver's ResourceSlice (GFD labels no MIG instance"
    assert any(e.startswith(source) for e in layout.evidence)
    isolated = results["mig.instance-isolated"]
    own = o.claimed["1g.10gb"]
    assert own and f"1g.10gb: {own[0].uuid}" in isolated.summary
    assert any("CDI injection (NVIDIA_VISIBLE_DEVICES='void')" in e for e in isolated.evidence)
    assert results["mig.not-also-full-gpu"].summary == (
        "the DRA driver publishes the 8 MIG-enabled GPUs as their 24 MIG devices only, none also as type gpu (0 whole "
        "GPUs published)")


def test_mig_layout_drift_on_a_dra_node_degrades_the_layout_check_naming_the_slice() -> None:
    o = observe_dra(cluster("a100-mig-dra", [{"id": "mig-layout-drift", "pool": "a100", "node": 0, "gpu": 3}]),
                    "a100-0")
    v = dra_verdicts(o)["mig.layout-matches-config"]
    assert v.outcome is Outcome.DEGRADED
    assert v.summary == ("nvidia.com/mig.config=custom-a100 says 1g.10gb x8, 2g.20gb x4, 3g.40gb x12, but the DRA "
                         "driver's ResourceSlice: 1g.10gb x7, 2g.20gb x4, 3g.40gb x12")


def test_a_dra_mig_node_whose_config_asks_for_instances_none_of_which_is_published_fails() -> None:
    o = observe_dra(cluster("a100-mig-dra"), "a100-0")
    v = checks.evaluate_layout_matches_config("a100-0", labels=o.labels, capacity={}, allocatable={}, seen={},
                                              declared=o.declared, published={})
    assert v.outcome is Outcome.FAIL
    assert "no view shows a MIG instance" in v.summary and "the DRA driver's ResourceSlice publishes no " \
        "instances" in v.summary


def test_a_sibling_injected_through_dra_fails_isolation_naming_it_and_the_allocated_device() -> None:
    o = observe_dra(cluster("a100-mig-dra", [{"id": "mig-sibling-visible", "pool": "a100", "node": 0}]), "a100-0")
    v = dra_verdicts(o)["mig.instance-isolated"]
    assert v.outcome is Outcome.FAIL
    own = o.claimed["1g.10gb"]
    assert own is not None
    sibling = next(d for d in o.devices if d.name == "gpu-0-mig-4")  # the instance after gpu-0-mig-3 on GPU 0
    assert own[0].name == "gpu-0-mig-3"
    assert v.summary == (f"pod mig-one-1g.10gb-a100-0, given one 1g.10gb instance by a DRA claim, sees something "
                         f"else: CUDA enumerates the sibling gpu-0-mig-4 ({sibling.uuid}) on the same GPU "
                         f"{o.node.gpus[0].uuid}, not the allocated device gpu-0-mig-3 ({own[0].uuid})")


def test_an_instance_claim_whose_allocation_cannot_be_read_is_not_tested() -> None:
    o = observe_dra(cluster("a100-mig-dra"), "a100-0")
    v = checks.evaluate_instance_isolated("a100-0", o.one_pods, model="NVIDIA A100-SXM4-80GB",
                                          claimed={**o.claimed, "2g.20gb": None}, node_devices=o.devices)
    assert v.outcome is Outcome.NOT_TESTED
    assert v.summary == ("the allocation of the claim of pod mig-one-2g.20gb-a100-0 (2g.20gb) could not be read, so "
                         "whether it sees the instance it was allocated is not known")
    wrong = {**o.claimed, "2g.20gb": o.claimed["3g.40gb"]}  # allocated another instance than the pod sees
    v = checks.evaluate_instance_isolated("a100-0", o.one_pods, model="NVIDIA A100-SXM4-80GB", claimed=wrong,
                                          node_devices=o.devices)
    assert v.outcome is Outcome.FAIL and "not the allocated device gpu-0-mig-1" in v.summary


def test_a_mig_parent_also_published_whole_fails_and_a_whole_claim_given_it_fails() -> None:
    o = observe_dra(cluster("a100-mig-dra", [{"id": "dra-mig-parent-published", "pool": "a100", "node": 0,
                                              "gpu": 3}]), "a100-0")
    parent = o.node.gpus[3]
    v = dra_verdicts(o)["mig.not-also-full-gpu"]
    assert v.outcome is Outcome.FAIL
    assert v.summary == (f"the DRA driver publishes the MIG-enabled GPU gpu-3 ({parent.uuid}) also whole, as a "
                         "device of type gpu beside its MIG devices: a claim on gpu.nvidia.com can be given a GPU "
                         "whose instances other pods hold")
    healthy = observe_dra(cluster("a100-mig-dra"), "a100-0")
    given = sighting(outcome("smoke-a100-0", run_probe(healthy.node, [Visible(parent)], devices_env="void")))
    v = dra_verdicts(healthy, full=given)["mig.not-also-full-gpu"]
    assert v.outcome is Outcome.FAIL
    assert v.summary == f"a claim for whole GPUs on gpu.nvidia.com is given MIG-enabled GPU {parent.uuid}"


def test_the_dra_mig_node_is_planned_from_its_usable_slice_devices_and_never_skipped() -> None:
    o = observe_dra(cluster("a100-mig-dra"), "a100-0")
    assert checks.mig_skip_reason("a100-0", o.labels, {}, checks.published_layout(o.devices)) is None
    plan = checks.plan_node("a100-0", o.labels, {}, o.devices)
    assert [(p.role, p.profile, p.count) for p in plan] == [
        ("all", "1g.10gb", 8), ("one", "1g.10gb", 1), ("all", "2g.20gb", 4), ("one", "2g.20gb", 1),
        ("all", "3g.40gb", 12), ("one", "3g.40gb", 1)]
    tainted = tuple(dataclasses.replace(d, taints=(DeviceTaint("gpu.nvidia.com/xid", "79", "NoSchedule"),))
                    if d.name == "gpu-0-mig-3" else d for d in o.devices)
    assert checks.published_layout(tainted, usable_only=True) == {"3g.40gb": 12, "2g.20gb": 4, "1g.10gb": 7}
    assert checks.plan_node("a100-0", o.labels, {}, tainted)[0].count == 7


def test_the_dra_attribute_check_expects_one_mig_device_through_cuda() -> None:
    o = observe_dra(cluster("a100-mig-dra"), "a100-0")
    n = o.node
    every = sighting(outcome("dra-all-a100-0", run_probe(n, injected(n, o.devices), devices_env="void")))
    v = dra.evaluate_attributes_match_hardware("a100-0", o.devices, every, o.labels)
    assert v.outcome is Outcome.PASS, v.message()
    assert "23 of the 24 MIG instances (CUDA enumerates one MIG device per process)" in v.summary
    seen = every.report.devices[0].uuid if every.report else None  # the one instance CUDA enumerates
    unpublished = tuple(d for d in o.devices if d.uuid != seen)
    v = dra.evaluate_attributes_match_hardware("a100-0", unpublished, every, o.labels)
    assert v.outcome is Outcome.FAIL
    assert f"CUDA in the whole-node probe sees MIG instance {seen}, which no device publishes" in v.message()
    shared = dra.evaluate_shared_claim("a100-0", None, None, None, [], o.devices)
    assert shared.outcome is Outcome.NOT_TESTED
    assert shared.summary == "a100-0 publishes no full GPU (only 24 MIG devices): the shared claim asks for one"


def test_a_mig_layout_without_a_strategy_needs_the_device_plugin_off(tmp_path: Path) -> None:
    """mig-manager's layout under strategy none is only MIG through DRA: a device plugin in strategy
    none would hand the MIG-enabled GPUs out whole, which no shipped profile models."""
    text = (Path(checks.__file__).parents[1] / "data" / "sim_profiles" / "a100-mig-dra.yaml").read_text()
    assert load_profile("a100-mig-dra").pools[0].device_plugin.mig.enabled
    plugin_on = tmp_path / "plugin-on.yaml"
    plugin_on.write_text(text.replace("      enabled: false\n      mig:", "      enabled: true\n      mig:"))
    with pytest.raises(ProfileError, match=r"a MIG layout needs strategy single or mixed \(or no device plugin\)"):
        load_profile(plugin_on)
