"""What simulated nodes publish: labels, capacity/allocatable, advertised devices, ResourceSlices —
healthy, and as each fault bends them."""

from __future__ import annotations

from gpuconf.sim.node_facts import advertised_devices, node_labels, node_resources, resource_slices
from gpuconf.sim.profile import SimNode, expand, load_profile, with_faults


def node(profile: str, name: str, faults: list[dict] | None = None) -> SimNode:
    p = load_profile(profile)
    return expand(with_faults(p, faults) if faults else p).node(name)


def test_a_healthy_h100_node_is_labelled_as_gfd_labels_it():
    labels = node_labels(node("healthy-h100", "h100-0"))
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.count"] == "8"
    assert labels["nvidia.com/gpu.family"] == "hopper"
    assert (labels["nvidia.com/gpu.compute.major"], labels["nvidia.com/gpu.compute.minor"]) == ("9", "0")
    assert labels["nvidia.com/cuda.driver-version.full"] == "580.159.03"
    assert labels["nvidia.com/cuda.driver.rev"] == "03"  # GFD keeps the driver's leading zero
    assert labels["nvidia.com/cuda.runtime-version.full"] == "13.0"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "none" and labels["nvidia.com/gpu.replicas"] == "1"
    assert labels["feature.node.kubernetes.io/pci-10de.present"] == "true"


def test_a_healthy_node_advertises_every_gpu_by_uuid():
    n = node("healthy-h100", "h100-0")
    assert node_resources(n) == ({"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "8"})
    assert [d.id for d in advertised_devices(n)] == [g.uuid for g in n.gpus]


def test_an_unhealthy_gpu_stays_in_capacity_and_leaves_allocatable():
    n = node("healthy-h100", "h100-0", [{"id": "gpu-unhealthy", "pool": "h100", "node": 0, "gpu": 2}])
    assert node_resources(n) == ({"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "7"})


def test_a_lost_gpu_leaves_both_while_gfd_still_counts_the_declared_eight():
    n = node("healthy-h100", "h100-0", [{"id": "gpu-lost", "pool": "h100", "node": 0, "gpu": 2}])
    assert node_resources(n) == ({"nvidia.com/gpu": "7"}, {"nvidia.com/gpu": "7"})


def test_an_unregistered_plugin_publishes_no_gpus_at_all():
    n = node("healthy-h100", "h100-0", [{"id": "plugin-not-registered", "pool": "h100", "node": 0}])
    assert node_resources(n) == ({}, {}) and advertised_devices(n) == []


def test_time_slicing_multiplies_the_gpus_and_marks_the_product_shared():
    n = node("t4-timeslicing", "t4-0")
    labels = node_labels(n)
    assert node_resources(n)[1] == {"nvidia.com/gpu": str(4 * len(n.gpus))}
    assert labels["nvidia.com/gpu.product"].endswith("-SHARED")
    assert (labels["nvidia.com/gpu.replicas"], labels["nvidia.com/gpu.sharing-strategy"]) == ("4", "time-slicing")
    ids = [d.id for d in advertised_devices(n)]
    assert len(set(ids)) == len(ids) and ids[0].endswith("::0")


def test_wrong_replicas_show_in_allocatable_but_not_in_the_labels():
    n = node("t4-timeslicing", "t4-0", [{"id": "timeslice-replicas-wrong", "pool": "t4", "node": 0}])
    assert node_resources(n)[1] == {"nvidia.com/gpu": str(8 * len(n.gpus))}
    assert node_labels(n)["nvidia.com/gpu.replicas"] == "4"


def test_mig_mixed_publishes_a_resource_and_labels_per_profile():
    n = node("a100-mig-mixed", "a100-0")
    capacity, _ = node_resources(n)
    labels = node_labels(n)
    mig_resources = {k: v for k, v in capacity.items() if k.startswith("nvidia.com/mig-")}
    assert mig_resources
    for resource, count in mig_resources.items():
        assert labels[f"{resource}.count"] == count
    assert all(d.id.startswith("MIG-") for d in advertised_devices(n) if d.mig)


def test_label_drift_overrides_exactly_the_label_it_names():
    clean = node_labels(node("healthy-h100", "h100-0"))
    drifted = node_labels(node("healthy-h100", "h100-0", [{"id": "label-drift", "pool": "h100", "node": 0}]))
    changed = {k for k in clean if clean[k] != drifted.get(k)}
    assert len(changed) == 1


def test_a_dra_only_node_publishes_slices_and_no_extended_resource():
    n = node("h200-dra-only", "h200-0")
    (s,) = resource_slices(n)
    devices = s["spec"]["devices"]
    assert node_resources(n) == ({}, {})
    assert len(devices) == len(n.gpus)
    attrs = devices[0]["attributes"]
    assert attrs["uuid"]["string"] == n.gpus[0].uuid and attrs["type"]["string"] == "gpu"
    parts = attrs["driverVersion"]["version"].split(".")
    assert len(parts) == 3 and all(p == str(int(p)) for p in parts)  # semver: no leading zeros


def test_double_counting_publishes_the_same_gpus_twice():
    n = node("h200-dra-only", "h200-0", [{"id": "dra-double-count", "pool": "h200", "node": 0}])
    (s,) = resource_slices(n)
    assert node_resources(n)[1]["nvidia.com/gpu"] == str(len(s["spec"]["devices"]))


def test_a_wrong_dra_attribute_is_published_for_that_gpu_only():
    n = node("h200-dra-only", "h200-0", [{"id": "dra-attr-wrong", "pool": "h200", "node": 0, "gpu": 1}])
    devices = resource_slices(n)[0]["spec"]["devices"]
    assert devices[1]["attributes"]["productName"] != devices[0]["attributes"]["productName"]
