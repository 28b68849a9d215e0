"""DRA-first checks as pure decisions (issue 27): device taints on ResourceSlice devices and from
DeviceTaintRules, a tainted device never allocated, a DRA-backed extended resource (KEP-5004) served
through the scheduler's claim, the double-publication check telling that mode from a real double
count, and GFD's labels against the DRA driver's attributes. Slices and probes come from the
simulator's healthy H200 node; the faults are crafted here on the slice (the simulator's own
dra-device-taint and extended-resource-stale faults are proven by the fault matrix)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_checks_dra import CANNOT_ALLOCATE, NODE, claim, pod_outcome, run_probe, sim_node, whole_node

from gpuconf.checks.dra import evaluate_no_double_publication, slice_devices
from gpuconf.checks.dra_extended import EXTENDED_CLAIM_ANNOTATION, evaluate_extended_resource_served
from gpuconf.checks.dra_labels import evaluate_labels_agree_with_dra
from gpuconf.checks.dra_taints import device_taint_rules, evaluate_devices_untainted, evaluate_tainted_not_allocated
from gpuconf.checks.probe_start import EXTENDED_OWNER, SMOKE, whole_node_block
from gpuconf.cluster.outcomes import PodOutcome
from gpuconf.nodes.devices import SliceDevice
from gpuconf.sim.emulate import Visible
from gpuconf.sim.node_facts import node_labels, resource_slices
from gpuconf.verdict import Outcome, checks

REAL = Path(__file__).parent / "data" / "real" / "dra"
NEW = ("labels.agree-with-dra", "dra.devices-untainted", "dra.tainted-device-not-allocated",
       "dra.extended-resource-served")


def tainted_slices(taints: Mapping[int, Sequence[Mapping[str, str]]]) -> list[dict[str, Any]]:
    """The healthy node's slices with ``taints`` (device index -> taints) on its devices, as the DRA
    driver's health checking writes them (``spec.devices[].taints``)."""
    slices = [dict(s) for s in resource_slices(sim_node())]
    for s in slices:
        spec = s["spec"] = dict(s["spec"])
        spec["devices"] = [dict(d, taints=list(taints[i])) if i in taints else d
                           for i, d in enumerate(spec.get("devices") or [])]
    return slices


def devices(taints: Mapping[int, Sequence[Mapping[str, str]]] | None = None) -> tuple[SliceDevice, ...]:
    return slice_devices(tainted_slices(taints or {}), NODE)


XID48 = {"key": "gpu.nvidia.com/xid", "value": "48", "effect": "NoSchedule"}


def test_the_new_checks_are_in_the_catalog_in_the_dra_suite() -> None:
    assert all(checks()[c].suite == "suites/test_dra.py" for c in NEW)
    assert checks()["dra.devices-untainted"].reads == "api" and checks()["labels.agree-with-dra"].reads == "api"
    assert checks()["dra.extended-resource-served"].reads == "probe"


# -------------------------------------------------------------------------------------------------
# dra.devices-untainted


def test_a_node_without_taints_passes_counting_its_devices() -> None:
    v = evaluate_devices_untainted(NODE, devices())
    assert v.outcome is Outcome.PASS and v.summary.startswith("8 devices, none tainted")


def test_a_fatal_xid_taint_fails_naming_the_gpu_its_uuid_pci_address_and_the_xids_meaning() -> None:
    ds = devices({3: [XID48]})
    v = evaluate_devices_untainted(NODE, ds)
    assert v.outcome is Outcome.FAIL
    gpu = ds[3]
    assert f"gpu-3 ({gpu.uuid}, PCI {gpu.pci_bus_id[1]})" in v.summary  # type: ignore[index]
    assert "gpu.nvidia.com/xid=48:NoSchedule (Xid 48 Double Bit ECC Error (isolate: drain the node" in v.summary
    assert "1 of 8 GPUs" in v.summary and "from the ResourceSlice" in v.summary


def test_a_lost_gpu_fails_and_every_tainted_gpu_is_in_the_evidence() -> None:
    v = evaluate_devices_untainted(NODE, devices({1: [{"key": "gpu.nvidia.com/gpu-lost", "effect": "NoSchedule"}],
                                                  5: [{"key": "gpu.nvidia.com/unmonitored", "effect": "None"}]}))
    assert v.outcome is Outcome.FAIL and "gpu.nvidia.com/gpu-lost:NoSchedule (the driver lost the GPU" in v.summary
    assert "(and 1 more tainted)" in v.summary and len(v.evidence) == 2
    assert "gpu.nvidia.com/unmonitored:None (the driver's health checking cannot watch the GPU" in v.evidence[1]


def test_taints_of_effect_none_only_are_degraded_not_pass() -> None:
    v = evaluate_devices_untainted(NODE, devices({2: [{"key": "gpu.nvidia.com/xid", "value": "13",
                                                       "effect": "None"}]}))
    assert v.outcome is Outcome.DEGRADED
    assert "carry a taint of effect None" in v.summary and "Xid 13 Graphics Engine Exception" in v.summary


def test_an_xid_the_table_does_not_know_is_named_as_unknown() -> None:
    v = evaluate_devices_untainted(NODE, devices({0: [{"key": "gpu.nvidia.com/xid", "value": "9999",
                                                       "effect": "NoSchedule"}]}))
    assert v.outcome is Outcome.FAIL and "Xid 9999, not in gpuconf/data/xid_codes.yaml" in v.summary


def test_a_node_without_dra_devices_is_not_applicable() -> None:
    v = evaluate_devices_untainted(NODE, ())
    assert v.outcome is Outcome.NOT_TESTED and v.summary.startswith("not applicable")


RULE = """
apiVersion: resource.k8s.io/v1beta2
kind: DeviceTaintRule
metadata: {name: drain-gpu-6}
spec:
  deviceSelector: {driver: gpu.nvidia.com, pool: h200-0, device: gpu-6}
  taint: {key: example.com/maintenance, value: drain, effect: NoExecute}
"""


def test_a_device_taint_rule_naming_a_device_taints_it_and_the_verdict_says_where_from() -> None:
    rules = device_taint_rules([yaml.safe_load(RULE)])
    assert [r.name for r in rules] == ["drain-gpu-6"]
    v = evaluate_devices_untainted(NODE, devices(), rules)
    assert v.outcome is Outcome.FAIL and "gpu-6" in v.summary
    assert "example.com/maintenance=drain:NoExecute (a taint not of NVIDIA's driver; from the DeviceTaintRule " \
           "drain-gpu-6)" in v.summary
    other_pool = yaml.safe_load(RULE.replace("pool: h200-0", "pool: h200-1"))
    assert evaluate_devices_untainted(NODE, devices(), device_taint_rules([other_pool])).outcome is Outcome.PASS


def test_a_rule_whose_selector_cannot_be_evaluated_or_is_missing_taints_nothing() -> None:
    rule = yaml.safe_load(RULE)
    del rule["spec"]["deviceSelector"]
    assert device_taint_rules([rule]) == ()
    rule["spec"]["deviceSelector"] = {}  # empty: every device
    assert evaluate_devices_untainted(NODE, devices(), device_taint_rules([rule])).summary.startswith("8 of 8 GPUs")
    rule["spec"]["deviceSelector"] = {"deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {"expression": "x"}}]}
    assert device_taint_rules([rule]) == ()


# -------------------------------------------------------------------------------------------------
# dra.tainted-device-not-allocated


def test_a_tainted_device_never_allocated_while_siblings_were_passes_naming_both() -> None:
    ds = devices({3: [XID48]})
    v = evaluate_tainted_not_allocated(NODE, ds, [claim("c1", "dra-all-h200-0", "gpus", "gpu-0", "gpu-1", "gpu-2"),
                                                  claim("c2", "dra-two-h200-0", "first", "gpu-4")])
    assert v.outcome is Outcome.PASS
    assert v.summary.startswith(f"the tainted gpu-3 ({ds[3].uuid}")
    assert "untainted gpu-0, gpu-1, gpu-2, gpu-4" in v.summary


def test_a_tainted_device_allocated_fails_naming_the_claim_and_the_taint() -> None:
    v = evaluate_tainted_not_allocated(NODE, devices({3: [XID48]}), [claim("c1", "p", "gpus", "gpu-2", "gpu-3")])
    assert v.outcome is Outcome.FAIL
    assert v.summary.startswith("claim c1 was allocated gpu-3")
    assert "tainted gpu.nvidia.com/xid=48:NoSchedule" in v.summary


def test_no_allocation_seen_or_an_incomplete_record_is_not_tested() -> None:
    ds = devices({3: [XID48]})
    none = evaluate_tainted_not_allocated(NODE, ds, [])
    assert none.outcome is Outcome.NOT_TESTED and "no probe claim was seen allocated a device of h200-0" in none.summary
    broken = evaluate_tainted_not_allocated(NODE, ds, [claim("c1", "p", "g", "gpu-0")], unknown="watch closed")
    assert broken.outcome is Outcome.NOT_TESTED and "not all known: watch closed" in broken.summary


def test_taints_of_effect_none_do_not_make_the_check_applicable() -> None:
    v = evaluate_tainted_not_allocated(NODE, devices({3: [{"key": "gpu.nvidia.com/unmonitored", "effect": "None"}]}),
                                       [claim("c1", "p", "g", "gpu-3")])
    assert v.outcome is Outcome.NOT_TESTED and v.summary.startswith("not applicable")


# -------------------------------------------------------------------------------------------------
# dra.extended-resource-served and dra.no-double-publication


def extended_claim(pod: str, *devices: str, annotated: bool = True) -> dict[str, Any]:
    """The claim kube-scheduler creates for a DRA-backed extended resource (KEP-5004)."""
    return {"metadata": {"name": f"{pod}-extended-resources-abcde",
                         "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"} if annotated else {},
                         "ownerReferences": [{"kind": "Pod", "name": pod, "apiVersion": "v1"}]},
            "status": {"allocation": {"devices": {"results": [
                {"request": "container-0-request-0", "driver": "gpu.nvidia.com", "pool": NODE, "device": d}
                for d in devices]}}}}


def with_claims(outcome: PodOutcome, *claims: Mapping[str, Any], error: str | None = None) -> PodOutcome:
    from dataclasses import replace

    return replace(outcome, claims=tuple(claims), claims_error=error)


POD = "inventory-h200-0"


def test_the_scheduler_claim_allocated_on_the_node_and_seen_by_the_probe_passes() -> None:
    n = sim_node()
    ds = devices()
    outcome = with_claims(pod_outcome(POD, run_probe(n, [Visible(g) for g in n.present_gpus])),
                          extended_claim(POD, *(d.name for d in ds)))
    v = evaluate_extended_resource_served(NODE, resource="nvidia.com/gpu", outcome=outcome, devices=ds, requested=8)
    assert v.outcome is Outcome.PASS
    assert v.summary.startswith(f"8 x nvidia.com/gpu served through DRA: the scheduler's claim {POD}-extended")
    assert "(DeviceClass gpu.nvidia.com (spec.extendedResourceName: nvidia.com/gpu))" in v.summary


def test_a_probe_seeing_other_gpus_than_the_claim_or_a_short_allocation_fails() -> None:
    n = sim_node()
    ds = devices()
    seen_two = pod_outcome(POD, run_probe(n, [Visible(g) for g in n.present_gpus[:2]]))
    wrong = evaluate_extended_resource_served(NODE, resource="nvidia.com/gpu", requested=2, devices=ds,
                                              outcome=with_claims(seen_two, extended_claim(POD, "gpu-2", "gpu-3")))
    assert wrong.outcome is Outcome.FAIL and "but the probe sees" in wrong.summary
    short = evaluate_extended_resource_served(NODE, resource="nvidia.com/gpu", requested=8, devices=ds,
                                              outcome=with_claims(seen_two, extended_claim(POD, "gpu-0", "gpu-1")))
    assert short.outcome is Outcome.FAIL and "for 8 x nvidia.com/gpu was allocated gpu-0" in short.summary


def test_a_stale_mapping_fails_naming_the_device_class_and_its_extended_resource_name() -> None:
    pending = pod_outcome(POD, None, message=CANNOT_ALLOCATE)
    v = evaluate_extended_resource_served(NODE, resource="nvidia.com/gpu", outcome=pending, devices=devices(),
                                          requested=8)
    assert v.outcome is Outcome.FAIL
    assert "DeviceClass gpu.nvidia.com (spec.extendedResourceName: nvidia.com/gpu) maps the resource, but no " \
           "device it selects can be allocated there" in v.summary and "cannot allocate all claims" in v.summary


def test_without_the_schedulers_claim_it_is_not_tested() -> None:
    n = sim_node()
    ran = pod_outcome(POD, run_probe(n, [Visible(g) for g in n.present_gpus]))
    for outcome, said in [(ran, f"no claim annotated {EXTENDED_CLAIM_ANNOTATION}=true and owned by pod {POD}"),
                          (with_claims(ran, extended_claim(POD, "gpu-0", annotated=False)), "no claim annotated"),
                          (with_claims(ran, error="watch expired"), "not all known (watch expired)")]:
        v = evaluate_extended_resource_served(NODE, resource="nvidia.com/gpu", outcome=outcome, devices=devices(),
                                              requested=8)
        assert v.outcome is Outcome.NOT_TESTED and said in v.summary
    assert evaluate_extended_resource_served(NODE, resource="nvidia.com/gpu", outcome=None, devices=devices(),
                                             requested=8).outcome is Outcome.NOT_TESTED


def test_a_stale_mapping_blocks_the_whole_node_probes_dependants_on_the_extended_owner() -> None:
    pending = pod_outcome(POD, None, message=CANNOT_ALLOCATE)
    block = whole_node_block(NODE, pending, ["12.9"], extended="nvidia.com/gpu")
    assert block is not None and block.owner == EXTENDED_OWNER
    assert block.reason.startswith("blocked by dra.extended-resource-served: the whole-node probe asking for "
                                   "nvidia.com/gpu (served by DRA on h200-0) is unschedulable")
    # on a node not served that way the same pending probe stays smoke's
    plain = whole_node_block(NODE, pending, ["12.9"])
    assert plain is not None and plain.owner == SMOKE


def test_double_publication_tells_a_dra_backed_extended_resource_from_a_real_double_count() -> None:
    ds = devices()
    served = evaluate_no_double_publication(NODE, ds, {"cpu": "96"}, None, extended="nvidia.com/gpu")
    assert served.outcome is Outcome.PASS and "served to nvidia.com/gpu requests by DRA" in served.summary
    both = evaluate_no_double_publication(NODE, ds, {"nvidia.com/gpu": "8"}, whole_node(sim_node()),
                                          extended="nvidia.com/gpu")
    assert both.outcome is Outcome.FAIL and "published both by a device plugin (nvidia.com/gpu=8)" in both.summary


# -------------------------------------------------------------------------------------------------
# labels.agree-with-dra


def healthy_labels() -> dict[str, str]:
    return node_labels(sim_node(profile="plugin-and-dra"))


def test_healthy_labels_agree_with_every_attribute_and_the_verdict_lists_what_was_compared() -> None:
    n = sim_node(profile="plugin-and-dra")
    ds = slice_devices(resource_slices(n), NODE)
    v = evaluate_labels_agree_with_dra(NODE, node_labels(n), ds)
    assert v.outcome is Outcome.PASS, v.summary
    for fact in ("product (8 GPUs)", "driver (8 GPUs)", "cuda (8 GPUs)", "compute (8 GPUs)", "memory (8 GPUs)",
                 "GPU count"):
        assert fact in v.summary


@pytest.mark.parametrize("label,value,said", [
    ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3", "label nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3, "
     "attribute productName=NVIDIA H200"),
    ("nvidia.com/cuda.driver-version.full", "570.133.20", "label nvidia.com/cuda.driver-version.full=570.133.20, "
     "attribute driverVersion=580.159.3"),
    ("nvidia.com/cuda.runtime-version.full", "12.8", "label nvidia.com/cuda.runtime-version.full=12.8, "
     "attribute cudaDriverVersion="),
    ("nvidia.com/gpu.compute.minor", "9", "label nvidia.com/gpu.compute.major/minor=9.9, attribute "
     "cudaComputeCapability=9.0"),
    ("nvidia.com/gpu.memory", "81559", "label nvidia.com/gpu.memory=81559, attribute capacity memory="),
    ("nvidia.com/gpu.count", "7", "label nvidia.com/gpu.count=7, the ResourceSlices publish 8 GPUs (devices of "
     "type gpu"),
], ids=["a product of another model", "a driver of another branch", "a CUDA of another driver",
        "a compute capability of another architecture", "the memory of another GPU", "a GPU fewer"])
def test_one_label_drifting_from_its_attribute_fails_naming_both(label: str, value: str, said: str) -> None:
    n = sim_node(profile="plugin-and-dra")
    ds = slice_devices(resource_slices(n), NODE)
    v = evaluate_labels_agree_with_dra(NODE, {**node_labels(n), label: value}, ds)
    assert v.outcome is Outcome.FAIL and said in v.summary, v.summary
    if label != "nvidia.com/gpu.count":
        assert f"gpu-0 ({ds[0].uuid}): " in v.summary and "(and 7 more)" in v.summary


def test_gfds_sharing_suffix_and_dashes_are_not_a_disagreement() -> None:
    n = sim_node(profile="plugin-and-dra")
    labels = {**node_labels(n), "nvidia.com/gpu.product": "NVIDIA-H200-SHARED"}
    assert evaluate_labels_agree_with_dra(NODE, labels, slice_devices(resource_slices(n), NODE)).outcome is Outcome.PASS


def test_nothing_to_compare_is_not_applicable() -> None:
    ds = devices()
    no_labels = evaluate_labels_agree_with_dra(NODE, {"kubernetes.io/hostname": NODE}, ds)
    assert no_labels.outcome is Outcome.NOT_TESTED and no_labels.summary.startswith("not applicable: h200-0 carries "
                                                                                    "no GFD label")
    no_slice = evaluate_labels_agree_with_dra(NODE, healthy_labels(), ())
    assert no_slice.outcome is Outcome.NOT_TESTED and "publishes no GPU device" in no_slice.summary


def test_the_real_vks_node_labels_agree_with_its_real_slice() -> None:
    """The real pair: 580.65.06 / 580.65.6, 13 / 13.0.0, 8.0 / 8.0.0, 8192 MiB / 8Gi, GRID-A100-8C."""
    slice_doc, labels = yaml.safe_load_all((REAL / "v1-25.3.2-grid-a100-vks.yaml").read_text())
    node = slice_doc["spec"]["nodeName"]
    v = evaluate_labels_agree_with_dra(node, labels, slice_devices([slice_doc], node))
    assert v.outcome is Outcome.PASS
    assert v.summary == ("GFD's labels agree with the DRA driver's attributes: product (1 GPU), driver (1 GPU), "
                         "cuda (1 GPU), compute (1 GPU), architecture (1 GPU), memory (1 GPU), GPU count")


def test_a_gpu_tainted_out_of_service_is_left_out_of_the_attribute_comparison_and_named() -> None:
    """The DRA suite's all-devices claim asks for the usable GPUs only: the probe sees 7 of 8."""
    from gpuconf.checks.dra import evaluate_attributes_match_hardware

    n = sim_node()
    ds = devices({3: [XID48]})
    seven = pod_outcome("dra-all-h200-0", run_probe(n, [Visible(g) for g in n.present_gpus if g.index != 3]))
    from gpuconf.checks.isolation import sighting

    v = evaluate_attributes_match_hardware(NODE, ds, sighting(seven), held_back=[ds[3]])
    assert v.outcome is Outcome.PASS, v.message()
    assert v.summary == (f"8 published devices agree with the whole-node probe; not compared: gpu-3 ({ds[3].uuid}) "
                         "(tainted out of service, so the whole-node claim could not hold them: dra.devices-untainted "
                         "names them)")
    # without saying so, the GPU the probe could not be given reads as a published GPU it does not see
    assert evaluate_attributes_match_hardware(NODE, ds, sighting(seven)).outcome is Outcome.FAIL
