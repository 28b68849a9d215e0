"""The node view (gpuconf.nodes): how a container asks for GPUs on each node, or why it cannot;
which RuntimeClass runs GPUs there; where each fact comes from. Read as rules, on every shipped
simulated profile (the requests the suites made before the view existed, pinned), on real GFD label
sets and on real ResourceSlices (tests/data/real/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuconf.cluster.inventory import build_inventory
from gpuconf.nodes import (
    GpuRequest,
    NodeView,
    RuntimeClassRef,
    Source,
    Unavailable,
    Via,
    Why,
    build_views,
    gpu_runtime_class,
)
from gpuconf.sim.agent_model import make_device_classes
from gpuconf.sim.node_facts import node_labels, node_resources, resource_slices
from gpuconf.sim.profile import expand, load_profile, shipped_profiles

REAL = Path(__file__).parent / "data" / "real"


def profile_views(name: str) -> dict[str, NodeView]:
    cluster = expand(load_profile(name))
    objs = make_device_classes({n.dra.driver for n in cluster.nodes if n.dra.enabled},
                               extended_resource=cluster.extended_resource)
    classes = [c["metadata"]["name"] for c in objs]
    extended = {c["spec"]["extendedResourceName"]: c["metadata"]["name"] for c in objs
                if c["spec"].get("extendedResourceName")}
    refs = [RuntimeClassRef(rc.name, rc.handler) for rc in cluster.runtime_classes]
    return {n.name: NodeView.of(n.name, node_labels(n), *node_resources(n), slices=resource_slices(n),
                                runtime_classes=refs, device_classes=classes, extended_resources=extended)
            for n in cluster.nodes}


def shape(ask: GpuRequest | Unavailable) -> tuple[Any, ...]:
    if isinstance(ask, Unavailable):
        return (ask.why.name,)
    return (ask.via.name, ask.count, ask.replicas, ask.physical, ask.complete)


#: Per shipped profile and node, what the suites asked for before the view answered for them:
#: the whole-node probe (plugin.whole_node_request, else every DRA GPU through one claim, with
#: smoke's replicas, physical count and the metrics suite's "holds every GPU"); whether the compat
#: and isolation probes' one nvidia.com/gpu could be asked for; whether NCCL (whole, unshared,
#: two or more) and DCGM (whole, unshared, every one allocatable) took the node; the RuntimeClass.
#: DRA-only nodes are the exception: before the view asked through DRA, only the whole-node probe ran
#: there (allocation mode All, physical count unknown); now every check asks through claims.
BEFORE = {
    ("a100-mig-mixed", "a100-0"): (("MIG_ONLY",), False, False, False),
    # MIG through DRA only: no whole GPU to claim
    ("a100-mig-dra", "a100-0"): (("MIG_ONLY",), False, False, False),
    ("a100-mps", "a100-0"): (("PLUGIN", 1, 1, None, False), True, False, False),
    ("geforce-workstation", "rtx-0"): (("PLUGIN", 2, 1, 2, True), True, True, True),
    ("geforce-workstation", "h100-0"): (("PLUGIN", 8, 1, 8, True), True, True, True),
    ("h100-mig-single", "h100-mig-0"): (("PLUGIN", 28, 1, 28, False), True, False, False),
    ("h200-dra-only", "h200-0"): (("CLAIM", 8, 1, 8, True), True, True, True),
    ("h200-dra-extended", "h200-0"): (("EXTENDED", 8, 1, 8, True), True, True, True),
    ("h200-gpucluster", "h200-0"): (("CLAIM", 8, 1, 8, True), True, True, True),
    ("healthy-h100", "h100-0"): (("PLUGIN", 8, 1, 8, True), True, True, True),
    ("healthy-h100", "h100-1"): (("PLUGIN", 8, 1, 8, True), True, True, True),
    ("mixed-driver-570", "a100-570-0"): (("PLUGIN", 8, 1, 8, True), True, True, True),
    ("mixed-driver-570", "h100-580-0"): (("PLUGIN", 8, 1, 8, True), True, True, True),
    ("multi-pool", "h100-0"): (("PLUGIN", 8, 1, 8, True), True, True, True),
    ("multi-pool", "a100-mig-0"): (("MIG_ONLY",), False, False, False),
    ("multi-pool", "t4-0"): (("PLUGIN", 16, 4, 4, False), True, False, False),
    ("multi-pool", "l40s-0"): (("PLUGIN", 4, 1, 4, True), True, True, True),
    ("plugin-and-dra", "h100-0"): (("PLUGIN", 8, 1, 8, True), True, True, True),
    ("plugin-and-dra", "h200-0"): (("CLAIM", 8, 1, 8, True), True, True, True),
    ("t4-timeslicing", "t4-0"): (("PLUGIN", 16, 4, 4, False), True, False, False),
}


def test_the_table_covers_every_shipped_profile():
    assert {p for p, _ in BEFORE} == set(shipped_profiles()) - {"scale-1000"}


@pytest.mark.parametrize(("profile", "node"), sorted(BEFORE), ids=[f"{p} {n}" for p, n in sorted(BEFORE)])
def test_every_shipped_profile_node_gets_the_request_the_suites_made_before(profile, node):
    view = profile_views(profile)[node]
    whole, one_gpu, nccl, dcgm = BEFORE[(profile, node)]
    assert shape(view.whole_node()) == whole
    assert bool(view.one_gpu()) is one_gpu
    assert bool(view.exclusive(min_gpus=2)) is nccl
    ask = view.exclusive()
    assert (bool(ask) and view.mig == "none" and ask.held_back == 0) is dcgm
    assert view.runtime_class == "nvidia"  # every shipped profile names its class after the handler


def test_an_mps_node_gives_the_whole_node_probe_one_replica_and_says_why():
    ask = profile_views("a100-mps")["a100-0"].whole_node()
    assert isinstance(ask, GpuRequest) and ask.count == 1 and "MPS: a container gets one replica" in ask.note
    assert ask.per_container == 1
    assert profile_views("a100-mps")["a100-0"].gpus(2) == Unavailable(
        Why.SHARED, "a100-0 shares its GPUs through MPS: the device plugin gives a container one replica at most, "
        "and this check asks for 2")


def test_a_dra_only_node_is_asked_through_one_claim_for_every_gpu_and_not_through_the_plugin():
    view = profile_views("h200-dra-only")["h200-0"]
    ask = view.whole_node()
    assert isinstance(ask, GpuRequest) and ask.via is Via.CLAIM and ask.limits == {}
    # ExactCount of the usable GPUs, not allocation mode All (which would wait for a tainted one too)
    assert [(c.device_class, c.mode, c.count) for c in ask.claims] == [("gpu.nvidia.com", "ExactCount", 8)]
    assert ask.note == " (every GPU through one DRA claim)" and ask.complete and ask.physical == 8
    one = view.one_gpu()
    assert isinstance(one, GpuRequest) and one.via is Via.CLAIM and one.limits == {} and one.count == 1
    assert [(c.name, c.device_class, c.mode, c.count) for c in one.claims] == [("gpus", "gpu.nvidia.com",
                                                                                "ExactCount", 1)]
    assert view.offered(one) == 8 and view.kind == "DRA claims"
    two = view.gpus(2)
    assert isinstance(two, GpuRequest) and [c.count for c in two.claims] == [2]
    assert view.gpus(9) == Unavailable(Why.TOO_FEW, "h200-0 has 8 usable DRA GPUs, and this check asks for 9")
    nccl = view.exclusive(min_gpus=2, check="an all-GPU NCCL job")
    assert isinstance(nccl, GpuRequest) and shape(nccl) == ("CLAIM", 8, 1, 8, True) and nccl.held_back == 0
    # forcing the device plugin's path still says why it cannot
    assert view.gpus(1, via=Via.PLUGIN) == Unavailable(
        Why.NO_PATH, "h200-0 advertises no nvidia.com/gpu: its 8 GPUs are published through DRA ResourceSlices "
        "only, and this check asks for nvidia.com/gpu")
    no_class = NodeView.of("h200-0", devices=8, device_classes=())
    reason = ("h200-0 publishes 8 GPUs through DRA ResourceSlices only, and the cluster has no DeviceClass "
              "gpu.nvidia.com to claim them with")
    assert no_class.whole_node() == Unavailable(Why.NO_PATH, f"{reason} (the whole-node probe)")
    assert no_class.one_gpu() == Unavailable(Why.NO_PATH, f"{reason} (this check)")
    assert no_class.exclusive(check="the diagnostic") == Unavailable(Why.NO_PATH, f"{reason} (the diagnostic)")


def test_a_node_publishing_only_mig_devices_through_dra_has_no_whole_gpu_and_says_so():
    view = profile_views("a100-mig-dra")["a100-0"]
    reason = ("a100-0 publishes only MIG devices through DRA (24 of them, no whole GPU), and {} asks for whole "
              "GPUs")
    assert view.whole_node() == Unavailable(Why.MIG_ONLY, reason.format("the whole-node probe"))
    assert view.one_gpu() == Unavailable(Why.MIG_ONLY, reason.format("this check"))
    assert view.exclusive(min_gpus=2, check="an all-GPU NCCL job") == Unavailable(
        Why.MIG_ONLY, reason.format("an all-GPU NCCL job"))
    assert view.dra_via() is None and view.dra_sharing() is None and view.mig == "dra"
    # a MIG-enabled GPU the driver also publishes whole (dra-mig-parent-published) runs no CUDA work whole:
    # no probe claims it (mig.not-also-full-gpu reports it), the node stays MIG only
    parent = {"spec": {"nodeName": "a", "driver": "gpu.nvidia.com", "pool": {"name": "a"}, "devices": [
        {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}, "uuid": {"string": "GPU-0"}}},
        {"name": "gpu-0-mig-0", "attributes": {"type": {"string": "mig"}, "parentUUID": {"string": "GPU-0"}}},
        {"name": "gpu-1", "attributes": {"type": {"string": "gpu"}, "uuid": {"string": "GPU-1"}}}]}}
    both = NodeView.of("a", slices=[parent])
    assert both.dra_gpus == 1 and [d.name for d in both.usable_gpus] == ["gpu-1"]
    alone = NodeView.of("a", slices=[{"spec": {**parent["spec"], "devices": parent["spec"]["devices"][:2]}}])
    assert alone.dra_gpus == 0 and alone.one_gpu() == Unavailable(
        Why.MIG_ONLY, "a publishes only MIG devices through DRA (1 of them, no whole GPU), and this check asks for "
        "whole GPUs")


def test_a_node_with_device_plugin_and_dra_keeps_asking_through_the_plugin():
    view = NodeView.of("both", {}, {"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "8"}, 8,
                       extended_resources={"nvidia.com/gpu": "gpu.nvidia.com"})
    for ask in (view.whole_node(), view.one_gpu(), view.exclusive(min_gpus=2)):
        assert isinstance(ask, GpuRequest) and ask.via is Via.PLUGIN and not ask.claims
    assert view.extended is None and view.kind == "device plugin and DRA"
    assert view.gpus(1, via=Via.CLAIM) == Unavailable(
        Why.NO_PATH, "both does not serve its GPUs through DRA alone, and this check asks for a DRA claim")


def test_a_dra_backed_extended_resource_is_asked_for_in_the_limits_as_users_do():
    view = NodeView.of("h200", devices=8, extended_resources={
        "nvidia.com/gpu": "gpu.nvidia.com", "deviceclass.resource.kubernetes.io/gpu.nvidia.com": "gpu.nvidia.com"})
    assert view.extended == "nvidia.com/gpu" and view.kind == "DRA-backed extended resource nvidia.com/gpu"
    one = view.one_gpu()
    assert isinstance(one, GpuRequest) and one.via is Via.EXTENDED and not one.claims
    assert one.limits == {"nvidia.com/gpu": 1} and view.offered(one) == 8
    whole = view.whole_node()
    assert isinstance(whole, GpuRequest) and shape(whole) == ("EXTENDED", 8, 1, 8, True)
    assert whole.limits == {"nvidia.com/gpu": 8}
    assert whole.note == " (every GPU as nvidia.com/gpu, served through DRA)"
    dcgm = view.exclusive(check="the diagnostic")
    assert isinstance(dcgm, GpuRequest) and dcgm.via is Via.EXTENDED and dcgm.count == 8
    assert view.gpus(1, via=Via.CLAIM) == Unavailable(
        Why.NO_PATH, "h200 serves its DRA GPUs as nvidia.com/gpu, not through a DRA claim, which this check asks for")
    # only the implicit name (no spec.extendedResourceName): nobody asks for it as users do, so claims
    implicit = NodeView.of("h200", devices=8, extended_resources={
        "deviceclass.resource.kubernetes.io/gpu.nvidia.com": "gpu.nvidia.com"})
    assert implicit.extended is None and getattr(implicit.one_gpu(), "via", None) is Via.CLAIM


def tainted_slice(node: str, taints: dict[int, list[dict[str, str]]], gpus: int = 8) -> dict[str, Any]:
    return {"spec": {"nodeName": node, "driver": "gpu.nvidia.com", "pool": {"name": node}, "devices": [
        {"name": f"gpu-{i}", "attributes": {"type": {"string": "gpu"}, "uuid": {"string": f"GPU-{i}"}},
         **({"taints": taints[i]} if i in taints else {})} for i in range(gpus)]}}


def test_a_device_tainted_gpu_is_left_out_of_whole_node_asks_which_name_it():
    xid = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}
    unmonitored = {"key": "gpu.nvidia.com/unmonitored", "effect": "None"}
    view = NodeView.of("h200", slices=[tainted_slice("h200", {3: [xid], 5: [unmonitored]})])
    assert [d.name for d in view.tainted_gpus] == ["gpu-3"] and len(view.usable_gpus) == 7
    left_out = "; 1 device-tainted GPU left out (gpu-3 (GPU-3): gpu.nvidia.com/xid=79:NoSchedule)"
    for ask in (view.whole_node(), view.exclusive(min_gpus=2, check="an all-GPU NCCL job")):
        assert isinstance(ask, GpuRequest) and shape(ask) == ("CLAIM", 7, 1, 7, False) and ask.held_back == 1
        assert [(c.mode, c.count) for c in ask.claims] == [("ExactCount", 7)]
        assert ask.note == f" (7 of 8 GPUs through one DRA claim{left_out})"
    one = view.one_gpu()
    assert isinstance(one, GpuRequest) and view.offered(one) == 7 and one.held_back == 1
    assert view.gpus(8) == Unavailable(Why.TOO_FEW, f"h200 has 7 usable DRA GPUs{left_out}, and this check asks for 8")


def test_a_node_whose_every_dra_gpu_is_tainted_asks_for_none_and_says_why():
    lost = {"key": "gpu.nvidia.com/gpu-lost", "effect": "NoExecute"}
    view = NodeView.of("h200", slices=[tainted_slice("h200", {0: [lost], 1: [lost]}, gpus=2)])
    reason = ("every one of the 2 DRA GPUs of h200 carries a NoSchedule/NoExecute device taint, so no claim gets one "
              "({check}); 2 device-tainted GPUs left out (gpu-0 (GPU-0): gpu.nvidia.com/gpu-lost:NoExecute; "
              "gpu-1 (GPU-1): gpu.nvidia.com/gpu-lost:NoExecute)")
    assert view.whole_node() == Unavailable(Why.UNHEALTHY, reason.format(check="the whole-node probe"))
    assert view.one_gpu() == Unavailable(Why.UNHEALTHY, reason.format(check="this check"))
    assert view.exclusive(check="the diagnostic") == Unavailable(Why.UNHEALTHY, reason.format(check="the diagnostic"))
    one_left = NodeView.of("h200", slices=[tainted_slice("h200", {0: [lost]}, gpus=2)])
    assert one_left.exclusive(min_gpus=2, check="an all-GPU NCCL job") == Unavailable(
        Why.TOO_FEW, "h200 has 1 usable DRA GPU; 1 device-tainted GPU left out (gpu-0 (GPU-0): "
        "gpu.nvidia.com/gpu-lost:NoExecute): an all-GPU NCCL job needs 2 or more")


@pytest.mark.parametrize(("allocatable", "capacity", "devices", "why", "reason"), [
    ({"nvidia.com/mig-1g.10gb": "36"}, {"nvidia.com/mig-1g.10gb": "36"}, 0, Why.MIG_ONLY,
     "n advertises no nvidia.com/gpu, only MIG instances (nvidia.com/mig-1g.10gb: mixed strategy), and this check "
     "asks for whole GPUs"),
    ({"nvidia.com/gpu": "0"}, {"nvidia.com/gpu": "8"}, 0, Why.UNHEALTHY,
     "none of the 8 nvidia.com/gpu on n is allocatable (all unhealthy; inventory.allocatable-matches-capacity "
     "reports it)"),
    ({}, {}, 0, Why.NO_GPU,
     "n advertises no nvidia.com/gpu, MIG instance or DRA device (inventory.gpu-resource-advertised says whether it "
     "should)"),
], ids=["mixed MIG only", "every GPU unhealthy", "nothing at all"])
def test_why_one_gpu_cannot_be_asked_for_is_one_line(allocatable, capacity, devices, why, reason):
    assert NodeView.of("n", {}, capacity, allocatable, devices).one_gpu() == Unavailable(why, reason)


def test_a_renamed_shared_resource_is_asked_for_under_its_new_name():
    view = NodeView.of("t4", {"nvidia.com/gpu.replicas": "4"}, {"nvidia.com/gpu.shared": "8"},
                       {"nvidia.com/gpu.shared": "8"})
    ask = view.one_gpu()
    assert isinstance(ask, GpuRequest) and ask.limits == {"nvidia.com/gpu.shared": 1} and ask.replicas == 4
    assert view.offered(ask) == 8


@pytest.mark.parametrize(("labels", "capacity", "allocatable", "devices", "min_gpus", "expected"), [
    ({"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"}, {"nvidia.com/gpu": "16"},
     {"nvidia.com/gpu": "16"}, 0, 2, (Why.SHARED, "n shares its GPUs (time-slicing, 4 replicas): a pod cannot get "
                                      "exclusive use of a whole GPU, which this check needs")),
    ({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"}, {"nvidia.com/gpu": "28"},
     {"nvidia.com/gpu": "28"}, 0, 2, (Why.MIG_ONLY, "n advertises no whole GPUs as nvidia.com/gpu, only MIG "
                                      "instances (single strategy), and this check needs whole GPUs")),
    ({}, {"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"}, 0, 2, (Why.TOO_FEW, "n has 1 GPU: this check needs 2 or "
                                                                  "more")),
], ids=["time-sliced", "MIG single", "one GPU where two are needed"])
def test_exclusive_use_of_whole_gpus_is_refused_with_the_reason(labels, capacity, allocatable, devices, min_gpus,
                                                                 expected):
    assert NodeView.of("n", labels, capacity, allocatable, devices).exclusive(min_gpus=min_gpus) == \
        Unavailable(*expected)


def test_exclusive_use_counts_every_advertised_gpu_and_says_how_many_are_held_back():
    ask = NodeView.of("n", {}, {"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "7"}).exclusive(min_gpus=2)
    assert isinstance(ask, GpuRequest) and (ask.count, ask.held_back, ask.complete) == (8, 1, False)
    mixed = NodeView.of("n", {}, {"nvidia.com/gpu": "4", "nvidia.com/mig-1g.10gb": "28"},
                        {"nvidia.com/gpu": "4", "nvidia.com/mig-1g.10gb": "28"})
    ask = mixed.exclusive(min_gpus=2)
    assert isinstance(ask, GpuRequest) and ask.count == 4 and not ask.complete and mixed.mig == "mixed"


@pytest.mark.parametrize(("view", "profile", "n", "expected"), [
    (NodeView.of("a", {}, {"nvidia.com/mig-1g.10gb": "14"}, {"nvidia.com/mig-1g.10gb": "14"}), "1g.10gb", 2,
     ("MIG", "nvidia.com/mig-1g.10gb", 2)),
    (NodeView.of("a", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"}, {"nvidia.com/gpu": "56"},
                 {"nvidia.com/gpu": "56"}), "1g.5gb", 1, ("PLUGIN", "nvidia.com/gpu", 1)),
    (NodeView.of("a", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"}, {"nvidia.com/gpu": "56"},
                 {"nvidia.com/gpu": "56"}), "3g.20gb", 1, Why.TOO_FEW),
    (NodeView.of("a", {}, {"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "8"}), "1g.10gb", 1, Why.NO_GPU),
], ids=["mixed: the profile's resource", "single: nvidia.com/gpu of that profile", "single: another profile",
        "no MIG"])
def test_mig_instances_of_a_profile(view, profile, n, expected):
    ask = view.mig_instances(profile, n)
    if isinstance(expected, Why):
        assert isinstance(ask, Unavailable) and ask.why is expected and profile in ask.reason
    else:
        assert isinstance(ask, GpuRequest) and (ask.via.name, ask.resource, ask.count) == expected and ask.mig_units


def test_mig_instances_through_dra_select_the_profile_on_mig_nvidia_com():
    slice_ = {"spec": {"nodeName": "a", "driver": "gpu.nvidia.com", "pool": {"name": "a"}, "devices": [
        {"name": f"gpu-0-mig-{i}", "attributes": {"type": {"string": "mig"}, "profile": {"string": "1g.10gb"}}}
        for i in range(3)]}}
    view = NodeView.of("a", slices=[slice_])
    ask = view.mig_instances("1g.10gb", 2)
    assert view.mig == "dra" and isinstance(ask, GpuRequest) and ask.via is Via.CLAIM
    assert [(c.device_class, c.selectors, c.count) for c in ask.claims] == [
        ("mig.nvidia.com", ("device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",), 2)]
    assert not view.mig_instances("1g.10gb", 4)


# -- the RuntimeClass, by handler ------------------------------------------------------------------

@pytest.mark.parametrize(("classes", "labels", "expected"), [
    ([RuntimeClassRef("nvidia", "nvidia")], {}, "nvidia"),
    ([RuntimeClassRef("nvidia-gpu", "nvidia"), RuntimeClassRef("runc", "runc")], {}, "nvidia-gpu"),
    ([RuntimeClassRef("nvidia", "nvidia-cdi"), RuntimeClassRef("gpu", "nvidia")], {}, "gpu"),
    ([RuntimeClassRef("nvidia", "runc")], {}, None),
    ([RuntimeClassRef("nvidia-a", "nvidia", {"pool": "a"}), RuntimeClassRef("nvidia-b", "nvidia", {"pool": "b"})],
     {"pool": "b"}, "nvidia-b"),
    ([RuntimeClassRef("nvidia-a", "nvidia", {"pool": "a"})], {"pool": "b"}, None),
], ids=["named after its handler", "called nvidia-gpu", "a class called nvidia with another handler is not it",
        "no class with the NVIDIA handler", "the class whose nodeSelector the node satisfies",
        "a class whose nodeSelector the node lacks would keep the pod off it"])
def test_the_gpu_runtime_class_is_found_by_handler_honouring_its_node_selector(classes, labels, expected):
    assert gpu_runtime_class(classes, labels) == expected


def test_views_built_from_an_inventory_read_runtime_class_scheduling_and_device_classes():
    node = {"metadata": {"name": "g", "labels": {"pool": "b"}}, "spec": {},
            "status": {"capacity": {"nvidia.com/gpu": "2"}, "allocatable": {"nvidia.com/gpu": "2"}}}
    classes = [{"metadata": {"name": "nvidia-a"}, "handler": "nvidia", "scheduling": {"nodeSelector": {"pool": "a"}}},
               {"metadata": {"name": "nvidia-b"}, "handler": "nvidia", "scheduling": {"nodeSelector": {"pool": "b"}}}]
    views = build_views(build_inventory([node], classes, [{"metadata": {"name": "gpu.nvidia.com"}}], [], None))
    assert views["g"].runtime_class == "nvidia-b" and views["g"].claimable and not views["g"].mig_claimable
    assert views["g"].node.name == "g"


# -- real label sets and slices --------------------------------------------------------------------

def real_gfd(name: str, capacity: dict[str, str] | None = None) -> NodeView:
    data = yaml.safe_load((REAL / "gfd" / name).read_text())
    capacity = data.get("capacity") or capacity or {}
    return NodeView.of(data["node"], data["labels"], capacity, data.get("allocatable") or capacity)


def test_real_gfd_label_sets_give_the_requests_their_nodes_take():
    h100 = real_gfd("h100-xe9680-no-mig.yaml", {"nvidia.com/gpu": "8"})
    assert shape(h100.whole_node()) == ("PLUGIN", 8, 1, 8, True) and h100.mig == "none"
    assert h100.facts.product.value == "NVIDIA-H100-80GB-HBM3" and h100.facts.product.source is Source.GFD
    t4 = real_gfd("t4-operator-gfd-old-labels.yaml", {"nvidia.com/gpu": "2"})
    assert shape(t4.whole_node()) == ("PLUGIN", 2, 1, 2, True)  # mig.strategy=single on GPUs without MIG: no MIG
    assert (t4.facts.driver.value, t4.facts.cuda.value) == ("530.41.03", "12.1")
    mixed = real_gfd("a100-mig-mixed-gfd-v0.3.yaml")
    assert mixed.mig == "mixed" and shape(mixed.whole_node()) == ("MIG_ONLY",)
    assert isinstance(mixed.mig_instances("3g.20gb", 16), GpuRequest)  # the plugin's name, not GFD's 3g.21gb
    invalid = real_gfd("a100-sxm4-80gb-mig-invalid.yaml", {"nvidia.com/gpu": "0"})
    assert invalid.mig == "single" and isinstance(invalid.whole_node(), Unavailable)


@pytest.mark.parametrize(("name", "node", "gpus", "product", "driver", "cuda"), [
    ("v1-25.12-tesla-t4-openshift.yaml", "harpatil4220c-g9kfm-gpu-c-rd8r8", 2, "Tesla T4", "580.126.20", "13.0.0"),
    ("v1beta1-25.3.2-b200.yaml", "b200-node", 1, "NVIDIA B200", None, None),
], ids=["25.12 v1 slice", "v1beta1 slice"])
def test_real_slices_make_a_dra_only_node_claimable_and_its_facts_read_from_attributes(name, node, gpus, product,
                                                                                       driver, cuda):
    slice_ = next(iter(yaml.safe_load_all((REAL / "dra" / name).read_text())))
    bare = {"metadata": {"name": node, "labels": {}}, "spec": {}, "status": {
        "capacity": {"cpu": "8"}, "conditions": [{"type": "Ready", "status": "True"}]}}
    view = build_views(build_inventory([bare], [], [{"metadata": {"name": "gpu.nvidia.com"}}], [slice_], None))[node]
    assert shape(view.whole_node()) == ("CLAIM", gpus, 1, gpus, True)
    assert getattr(view.one_gpu(), "via", None) is Via.CLAIM
    facts = view.facts
    assert (facts.product.value, facts.product.source) == (product, Source.SLICE)
    assert facts.gpus.value == str(gpus) and facts.gpus.source is Source.SLICE
    if driver is not None:
        assert (facts.driver.value, facts.cuda.value) == (driver, cuda)
