"""DRA allocation with real CEL: selectors, counts, firstAvailable, matchAttribute, and the
failures a scheduler must tell apart (no fit on this node vs. an error in the claim itself)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gpuconf.sim.cel import CelError, compile_selector, device_activation, parse_quantity, parse_semver
from gpuconf.sim.dra import AllocationError, allocate

DRIVER = "gpu.nvidia.com"
CLASSES = {
    "gpu.nvidia.com": {"spec": {"selectors": [{"cel": {"expression":
                       "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}},
    "mig.nvidia.com": {"spec": {"selectors": [{"cel": {"expression":
                       "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"}}]}},
}


def gpu(i: int, product: str = "NVIDIA H100 80GB HBM3", memory: str = "80Gi", driver: str = "570.133.20") -> dict:
    return {"name": f"gpu-{i}", "attributes": {
        "type": {"string": "gpu"}, "uuid": {"string": f"GPU-{i:08x}-aaaa-bbbb-cccc-dddddddddddd"},
        "productName": {"string": product}, "brand": {"string": "Nvidia"}, "index": {"int": i},
        "cudaComputeCapability": {"version": "9.0.0"}, "driverVersion": {"version": driver},
        "cudaDriverVersion": {"version": "12.8.0"},
        "resource.kubernetes.io/pciBusID": {"string": f"0000:{0x18 + i:02x}:00.0"}},
        "capacity": {"memory": {"value": memory}}}


def slice_for(node: str, devices: list[dict]) -> dict:
    return {"metadata": {"name": f"{node}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}


SLICES = [slice_for("node-a", [gpu(i) for i in range(8)]),
          slice_for("node-b", [gpu(0, "NVIDIA A100-SXM4-40GB", "40Gi", "560.35.3")])]


def claim(*requests: dict, constraints: list | None = None, name: str = "c1") -> dict:
    return {"metadata": {"name": name}, "spec": {"devices": {"requests": list(requests),
                                                             "constraints": constraints or []}}}


def exactly(name: str = "gpu", count: int = 1, selectors: tuple[str, ...] = (), cls: str = "gpu.nvidia.com",
            mode: str = "ExactCount") -> dict:
    spec: dict = {"deviceClassName": cls, "allocationMode": mode, "count": count,
                  "selectors": [{"cel": {"expression": s}} for s in selectors]}
    return {"name": name, "exactly": spec}


MEM = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('{}')) >= 0"


@pytest.mark.parametrize("text,value", [
    ("80Gi", Decimal(80 * 2**30)), ("500m", Decimal("0.5")), ("1e3", Decimal(1000)), ("1.5Gi", Decimal(3 * 2**29)),
    ("40G", Decimal(40 * 10**9)), ("0", Decimal(0)),
])
def test_quantities_parse_as_kubernetes_does(text, value):
    assert parse_quantity(text).value == value


@pytest.mark.parametrize("text", ["abc", "1Gb", "", "Gi"])
def test_bad_quantities_are_errors(text):
    with pytest.raises(CelError, match="quantities must match"):
        parse_quantity(text)


def test_semver_orders_driver_versions_numerically_and_releases_after_prereleases():
    assert parse_semver("560.35.3").key() < parse_semver("570.133.20").key()
    assert parse_semver("1.0.0-rc.1").key() < parse_semver("1.0.0").key()
    with pytest.raises(CelError, match="invalid semver"):
        parse_semver("560.35.03")  # leading zeros: why the DRA driver publishes 560.35.3


@pytest.mark.parametrize("expression,expected", [
    (MEM.format("40Gi"), True),
    (MEM.format("200Gi"), False),
    ("device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')", True),
    ("device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('560.0.0'))", True),
    ("device.attributes['gpu.nvidia.com'].cudaDriverVersion.isLessThan(semver('13.0.0'))", True),
    ("device.attributes['resource.kubernetes.io'].pciBusID == '0000:18:00.0'", True),
    ("has(device.attributes['gpu.nvidia.com'].parentUUID)", False),
    ("device.capacity['gpu.nvidia.com'].memory.asInteger() == 85899345920", True),
], ids=["memory >= 40Gi", "memory >= 200Gi", "product prefix", "driver semver", "cuda semver", "pci bus id",
        "has() guards an optional attribute", "asInteger"])
def test_selectors_evaluate_on_a_published_device(expression, expected):
    assert compile_selector(expression).matches(device_activation(DRIVER, gpu(0))) is expected


def test_a_missing_attribute_is_a_runtime_error_not_a_silent_false():
    with pytest.raises(CelError, match="CEL runtime error: no such key: parentUUID"):
        compile_selector("device.attributes['gpu.nvidia.com'].parentUUID == 'x'").matches(
            device_activation(DRIVER, gpu(0)))


def test_a_selector_that_does_not_compile_says_so():
    with pytest.raises(CelError, match="compilation failed"):
        compile_selector("device.driver ==")


def test_one_gpu_with_enough_memory_is_allocated_on_the_node_that_has_it():
    a = allocate(claim(exactly(selectors=(MEM.format("40Gi"),))), "node-a", classes=CLASSES, slices=SLICES)
    assert [r.to_dict() for r in a.results] == [
        {"request": "gpu", "driver": DRIVER, "pool": "node-a", "device": "gpu-0"}]
    assert a.status("node-a")["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["node-a"]


def test_an_unsatisfiable_selector_fails_on_every_node_without_being_fatal():
    for node in ("node-a", "node-b"):
        with pytest.raises(AllocationError, match="no devices on node") as info:
            allocate(claim(exactly(selectors=(MEM.format("200Gi"),))), node, classes=CLASSES, slices=SLICES)
        assert not info.value.fatal


def test_count_n_gives_n_distinct_devices_and_too_many_fails():
    a = allocate(claim(exactly(count=3)), "node-a", classes=CLASSES, slices=SLICES)
    assert len({r.device for r in a.results}) == 3
    with pytest.raises(AllocationError):
        allocate(claim(exactly(count=9)), "node-a", classes=CLASSES, slices=SLICES)


def test_two_claims_get_two_distinct_devices():
    first = allocate(claim(exactly(), name="c1"), "node-a", classes=CLASSES, slices=SLICES)
    taken = [(r.driver, r.pool, r.device) for r in first.results]
    second = allocate(claim(exactly(), name="c2"), "node-a", classes=CLASSES, slices=SLICES, allocated=taken)
    assert first.results[0].device != second.results[0].device


def test_all_mode_takes_every_matching_device_and_fails_if_one_is_taken():
    a = allocate(claim(exactly(mode="All")), "node-a", classes=CLASSES, slices=SLICES)
    assert len(a.results) == 8
    with pytest.raises(AllocationError):
        allocate(claim(exactly(mode="All")), "node-a", classes=CLASSES, slices=SLICES,
                 allocated=[(DRIVER, "node-a", "gpu-3")])


def test_first_available_falls_back_to_the_next_sub_request():
    request = {"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu.nvidia.com",
         "selectors": [{"cel": {"expression": MEM.format("80Gi")}}]},
        {"name": "small", "deviceClassName": "gpu.nvidia.com"}]}
    assert allocate(claim(request), "node-b", classes=CLASSES, slices=SLICES).results[0].request == "gpu/small"
    assert allocate(claim(request), "node-a", classes=CLASSES, slices=SLICES).results[0].request == "gpu/big"


def test_match_attribute_keeps_devices_with_the_same_value_together():
    mixed = [slice_for("node-m", [gpu(0, "NVIDIA H100 80GB HBM3"), gpu(1, "NVIDIA A100-SXM4-40GB", "40Gi"),
                                  gpu(2, "NVIDIA H100 80GB HBM3")])]
    constraint = [{"requests": [], "matchAttribute": "gpu.nvidia.com/productName"}]
    a = allocate(claim(exactly(count=2), constraints=constraint), "node-m", classes=CLASSES, slices=mixed)
    assert sorted(r.device for r in a.results) == ["gpu-0", "gpu-2"]
    with pytest.raises(AllocationError, match="with the constraints"):
        allocate(claim(exactly(count=3), constraints=constraint), "node-m", classes=CLASSES, slices=mixed)
    missing = [{"requests": [], "matchAttribute": "gpu.nvidia.com/nvlinkDomain"}]
    with pytest.raises(AllocationError):
        allocate(claim(exactly(count=2), constraints=missing), "node-m", classes=CLASSES, slices=mixed)


def test_errors_in_the_claim_itself_are_fatal_with_the_reason():
    with pytest.raises(AllocationError, match="device class nope.example.com does not exist") as info:
        allocate(claim(exactly(cls="nope.example.com")), "node-a", classes=CLASSES, slices=SLICES)
    assert info.value.fatal
    with pytest.raises(AllocationError, match="no such key: parentUUID") as info:
        allocate(claim(exactly(selectors=("device.attributes['gpu.nvidia.com'].parentUUID == 'x'",))), "node-a",
                 classes=CLASSES, slices=SLICES)
    assert info.value.fatal


def test_the_mig_class_never_picks_a_full_gpu():
    with pytest.raises(AllocationError):
        allocate(claim(exactly(cls="mig.nvidia.com")), "node-a", classes=CLASSES, slices=SLICES)
