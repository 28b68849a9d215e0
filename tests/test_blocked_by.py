"""One root cause, one failure, and only one: gpuconf.checks.probe_start.blocked_by folds a dependant's
failure behind an owner's only where the owner failed on the same node for a finding the dependant
declares it depends on (gpuconf/data/checks.yaml: the owner's ``findings``, the dependant's
``blocked_by``). An owner that passed, was not tested, was only selected, or fails for another finding
folds nothing: the dependant's own failure stands, so an independent finding is never hidden behind an
unrelated one (a forward-compat failure behind a 1 MiB memory-label disagreement)."""

from __future__ import annotations

import pytest

from gpuconf.checks.inventory import evaluate_cuda_device_nodes, evaluate_labels_match_hardware
from gpuconf.checks.probe_start import blocked_by
from gpuconf.nodes import NodeView
from gpuconf.verdict import Outcome, checks, failed, not_tested, passed
from tests.test_checks_inventory import h100_0, view, whole_node_probe

COMPAT = ("compat.outcome-matches-prediction", "compat.forward-compat-runs", "compat.current-cuda-major-runs")
LABELS = "labels.gfd-matches-hardware"


def relabelled(**labels: str) -> NodeView:
    n = h100_0()
    v = view(n)
    return NodeView.of(n.name, {**v.labels, **labels}, v.capacity, v.allocatable, v.dra_devices)


def forward_compat_failure() -> object:
    return failed("compat.forward-compat-runs", "h100-0", "13.0.2 ran on the host libcuda, not the image's cuda-compat")


def test_every_declared_dependency_names_an_owner_and_findings_the_owner_declares():
    catalog = checks()
    declared = [(c.id, owner, tags) for c in catalog.values() for owner, tags in c.blocked_by.items()]
    assert len(declared) >= 17  # compat x3, smoke, isolation x5, dra x6 behind their owners
    for dependant, owner, tags in declared:
        assert owner in catalog and owner != dependant, (dependant, owner)
        known = set(catalog[owner].findings)
        assert tags and tags <= known, (dependant, owner, sorted(tags - known))
    for c in catalog.values():  # a finding says what it means, in a sentence a reader of the reference acts on
        assert all(len(meaning) > 30 for meaning in c.findings.values()), c.id


def test_a_failure_naming_a_finding_its_check_does_not_declare_is_refused():
    with pytest.raises(ValueError, match=r"labels.gfd-matches-hardware declares no finding \['gpu.colour'\]"):
        failed(LABELS, "h100-0", "GFD labels disagree", causes={"gpu.colour"})


def test_a_label_disagreement_names_the_labels_it_found_wrong_as_findings():
    probe = whole_node_probe(h100_0())
    memory = evaluate_labels_match_hardware(relabelled(**{"nvidia.com/gpu.memory": "81558"}), probe)
    assert memory.outcome is Outcome.FAIL and "nvidia.com/gpu.memory says '81558'" in memory.summary
    assert memory.causes == {"gpu.memory"}
    product = evaluate_labels_match_hardware(relabelled(**{"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}), probe)
    assert product.outcome is Outcome.FAIL and product.causes == {"gpu.product"}
    both = evaluate_labels_match_hardware(relabelled(**{"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                                                        "nvidia.com/gpu.memory": "81558"}), probe)
    assert both.causes == {"gpu.product", "gpu.memory"}


def test_a_compat_failure_stands_beside_a_memory_label_disagreement_and_folds_behind_a_product_one():
    probe = whole_node_probe(h100_0())
    memory = evaluate_labels_match_hardware(relabelled(**{"nvidia.com/gpu.memory": "81558"}), probe)
    product = evaluate_labels_match_hardware(relabelled(**{"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}), probe)
    mine = forward_compat_failure()
    # the prediction reads the product and driver labels, never the memory one: an independent finding
    assert blocked_by(mine, memory) is mine
    folded = blocked_by(mine, product)
    assert (folded.outcome, folded.blocked_by, folded.kind) == (Outcome.NOT_TESTED, LABELS, "blocked")
    assert folded.summary == f"blocked by {LABELS}: {product.summary}"
    for cid in COMPAT:
        assert checks()[cid].blocked_by[LABELS] == {"gpu.product", "driver-version", "mixed-models", "mig-invalid"}


def test_an_owner_that_passed_was_not_tested_or_fails_on_another_node_folds_nothing():
    mine = forward_compat_failure()
    assert blocked_by(mine, passed(LABELS, "h100-0", "GFD labels match the hardware")) is mine
    assert blocked_by(mine, not_tested(LABELS, "h100-0", "the probe saw no GPU")) is mine
    elsewhere = failed(LABELS, "h100-1", "nvidia.com/gpu.product says 'x'", causes={"gpu.product"})
    assert blocked_by(mine, elsewhere) is mine
    untagged = failed(LABELS, "h100-0", "a finding no dependant shares")
    assert blocked_by(mine, untagged) is mine
    assert blocked_by(mine, None) is mine


def test_an_owner_the_dependant_declares_no_dependency_on_is_a_mistake_found_on_the_first_run():
    owner = failed("runtime.cuda-device-nodes-present", "h100-0", "lacks /dev/nvidia-uvm",
                   causes={"device-node-missing"})
    with pytest.raises(ValueError, match="compat.forward-compat-runs declares no dependency on "
                                         "runtime.cuda-device-nodes-present"):
        blocked_by(passed("compat.forward-compat-runs", "h100-0", "ran"), owner)


def test_the_isolation_owners_fold_only_the_injection_they_found():
    mine = failed("isolation.no-request-sees-no-gpu", "h100-0", "a pod that requests no GPU sees 8 GPUs")
    more = failed("isolation.sees-only-allocated", "h100-0", "a pod requesting 1 GPU sees 8", causes={"sees-more"})
    fewer = failed("isolation.sees-only-allocated", "h100-0", "a pod requesting 2 GPUs sees 1", causes={"sees-fewer"})
    assert blocked_by(mine, more).outcome is Outcome.NOT_TESTED
    assert blocked_by(mine, fewer) is mine  # a lost GPU is not why a pod without a request sees GPUs


def test_the_device_node_owner_tags_its_finding():
    probe = whole_node_probe(h100_0())
    healthy = evaluate_cuda_device_nodes("h100-0", probe)
    assert healthy.outcome is Outcome.PASS and healthy.causes == frozenset()
    from dataclasses import replace

    broken = evaluate_cuda_device_nodes("h100-0", replace(probe, device_nodes={**probe.device_nodes,
                                                                                "/dev/nvidia-uvm": False}))
    assert broken.outcome is Outcome.FAIL and broken.causes == {"device-node-missing"}
    smoke = failed("smoke.vector-add-every-gpu", "h100-0", "CUDA could not start: 999")
    assert blocked_by(smoke, broken).blocked_by == "runtime.cuda-device-nodes-present"
