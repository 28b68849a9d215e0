"""Every check that reads ResourceSlices, run over real slices NVIDIA's DRA driver published
(tests/data/real/dra/, sources in its SOURCES.md): the three API versions (v1, and v1beta1 with its
``basic`` wrapper), both names of the PCI attribute (``pcieBusID`` up to 25.8,
``resource.kubernetes.io/pciBusID`` from 25.12), and a driver installed with GPU allocation off."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from gpuconf.checks.dra import (
    dra_skip_reason,
    evaluate_attributes_match_hardware,
    evaluate_no_double_publication,
    memory_selector,
    node_skip_reason,
    selector_threshold_gib,
    slice_devices,
)
from gpuconf.checks.dra_labels import evaluate_labels_agree_with_dra
from gpuconf.cluster.access import Discovery
from gpuconf.cluster.inventory import build_inventory, load_inventory
from gpuconf.sim.cel import compile_selector, device_activation
from gpuconf.verdict import Outcome

REAL = Path(__file__).parent / "data" / "real" / "dra"


def load(name: str) -> list[Any]:
    return list(yaml.safe_load_all((REAL / name).read_text()))


def node_object(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {},
            "status": {"capacity": {"cpu": "8"}, "allocatable": {"cpu": "8"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


# (file, node, devices, product, PCI attribute as published (None: none), memory MiB)
SAMPLES = [
    ("v1-25.12-tesla-t4-openshift.yaml", "harpatil4220c-g9kfm-gpu-c-rd8r8", 2, "Tesla T4",
     ("resource.kubernetes.io/pciBusID", "0000:00:04.0"), 15 * 1024),
    ("v1-25.3.2-grid-a100-vks.yaml", "vks-cluster-0-np1-worker-njbp2-s2rvz-577zj", 1, "GRID A100-8C",
     ("pcieBusID", "0000:03:00.0"), 8192),
    ("v1beta1-25.3.2-b200.yaml", "b200-node", 1, "NVIDIA B200", None, 183359),
]


@pytest.mark.parametrize(("name", "node", "count", "product", "pci", "mib"), SAMPLES,
                         ids=["25.12 v1 slice of two T4s", "25.3.2 v1 slice with pcieBusID, index and minor",
                              "v1beta1 slice with attributes under basic"])
def test_every_real_slice_makes_its_node_a_dra_gpu_node_with_its_devices_read(
        name: str, node: str, count: int, product: str, pci: tuple[str, str] | None, mib: int) -> None:
    slice_ = load(name)[0]
    inventory = build_inventory([node_object(node)], [], [{"metadata": {"name": "gpu.nvidia.com"}}], [slice_], None,
                                dra_served=True)
    assert [n.name for n in inventory.gpu_nodes] == [node]  # a DRA-only node is a GPU node
    devices = slice_devices([s.raw for s in inventory.slices], node)
    assert len(devices) == count and node_skip_reason(node, devices) is None
    d = devices[0]
    assert d.kind == "gpu" and d.attributes["productName"] == product and (d.uuid or "").startswith("GPU-")
    assert d.pci_bus_id == pci
    assert d.memory_bytes == mib * 2**20
    # the suite's memory selector, evaluated as the scheduler would, matches every real GPU
    gib = selector_threshold_gib(devices)
    assert gib is not None
    for raw in inventory.slices[0].raw["spec"]["devices"]:
        assert compile_selector(memory_selector(gib)).matches(device_activation("gpu.nvidia.com", raw))
    # no device-plugin resource on the node: no double publication
    assert evaluate_no_double_publication(node, devices, {"cpu": "8"}, None).outcome is Outcome.PASS


def test_the_real_25_3_slice_agrees_with_the_real_gfd_labels_of_its_node() -> None:
    slice_, labels = load("v1-25.3.2-grid-a100-vks.yaml")
    node = slice_["spec"]["nodeName"]
    v = evaluate_labels_agree_with_dra(node, labels, slice_devices([slice_], node))
    assert v.outcome is Outcome.PASS, v.message()
    assert v.summary == ("GFD's labels agree with the DRA driver's attributes: product (1 GPU), driver (1 GPU), "
                         "cuda (1 GPU), compute (1 GPU), architecture (1 GPU), memory (1 GPU), GPU count")
    # labels are not dra.attributes-match-hardware's: without a probe it has nothing to judge
    assert evaluate_attributes_match_hardware(node, slice_devices([slice_], node), None).outcome is Outcome.NOT_TESTED


def test_a_real_slice_that_disagrees_with_its_labels_fails_naming_the_attribute() -> None:
    slice_, labels = load("v1-25.3.2-grid-a100-vks.yaml")
    node = slice_["spec"]["nodeName"]
    drifted = {**labels, "nvidia.com/cuda.driver-version.full": "580.95.06"}
    v = evaluate_labels_agree_with_dra(node, drifted, slice_devices([slice_], node))
    assert v.outcome is Outcome.FAIL
    assert ("gpu-0 (GPU-b8fe1770-6c2d-470f-905b-9ab700000000): label nvidia.com/cuda.driver-version.full=580.95.06, "
            "attribute driverVersion=580.65.6") in v.summary


def test_a_driver_installed_with_gpu_allocation_off_is_named_as_such() -> None:
    (real,) = load("deviceclasses-gpus-disabled.yaml")
    reason = dra_skip_reason(serves_v1=True, device_classes=real["deviceclasses"])
    assert reason is not None and reason.startswith(
        "NVIDIA's DRA driver is installed with GPU allocation disabled: it registers ComputeDomain DeviceClasses "
        "but no gpu.nvidia.com (DeviceClasses: compute-domain-daemon.nvidia.com, "
        "compute-domain-default-channel.nvidia.com)")
    assert "resources.gpus.enabled=true and gpuResourcesEnabledOverride=true" in reason
    # its only slices are ComputeDomain channels: the node publishes no GPU
    assert node_skip_reason("rockwei", slice_devices([{"spec": {
        "driver": s["driver"], "nodeName": s["node"], "devices": []}} for s in real["resourceslices"]], "rockwei"))


def test_a_cluster_serving_dra_in_v1beta1_only_has_its_slices_read_and_the_claim_checks_skip_saying_why() -> None:
    slice_ = load("v1beta1-25.3.2-b200.yaml")[0]
    listed: list[tuple[str, ...]] = []

    def list_custom(group: str, version: str, plural: str, **_: Any) -> dict[str, Any]:
        listed.append((group, version, plural))
        return {"items": [slice_] if plural == "resourceslices" else [{"metadata": {"name": "gpu.nvidia.com"}}]}

    discovery = Discovery("v1.32.4", {"resource.k8s.io": ("v1beta1",)},
                          {"resource.k8s.io/v1beta1": frozenset({"resourceslices", "deviceclasses"})})
    cluster = SimpleNamespace(
        discover=lambda: discovery, call_json=lambda what, fn, *a, **kw: fn(*a, **kw),
        core=SimpleNamespace(list_node=lambda **_: {"items": [node_object("b200-node")]}),
        node_api=SimpleNamespace(list_runtime_class=lambda **_: {"items": []}),
        custom=SimpleNamespace(list_cluster_custom_object=list_custom))
    inventory = load_inventory(cluster)  # type: ignore[arg-type]
    assert ("resource.k8s.io", "v1beta1", "resourceslices") in listed
    assert (inventory.dra_version, inventory.dra_served) == ("v1beta1", False)
    assert [n.name for n in inventory.gpu_nodes] == ["b200-node"]
    (d,) = slice_devices([s.raw for s in inventory.slices], "b200-node")
    assert d.uuid == "GPU-e8c94a15-28dc-6a61-ea67-626f02d315f0" and d.memory_bytes == 183359 * 2**20
    reason = dra_skip_reason(serves_v1=inventory.dra_served, device_classes=inventory.device_classes,
                             served=inventory.dra_version)
    assert reason is not None and reason.startswith(
        "the cluster serves DRA as resource.k8s.io/v1beta1 only (Kubernetes before 1.34): its ResourceSlices are read")
