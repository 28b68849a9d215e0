"""Every check that reads GFD labels, run over label sets real nodes published
(tests/data/real/gfd/, sources in its SOURCES.md): each must read them right and find what the
node really shows, where the simulator's own labels could only agree with the checks' beliefs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuconf.checks import mig
from gpuconf.checks.compat import make_target
from gpuconf.checks.expect import compare_node
from gpuconf.checks.inventory import (
    NodeView,
    evaluate_driver_uniform,
    evaluate_gpu_count,
    evaluate_gpu_resource_advertised,
    evaluate_labels_match_hardware,
    label_cuda_version,
    label_driver_version,
    pool_gpu_count,
)
from gpuconf.compat.versions import parse_cuda
from gpuconf.expect import load_expect
from gpuconf.probes.cuda import CudaProbeReport, parse_cuda_probe
from gpuconf.sim.emulate import Visible, cuda_probe_run
from gpuconf.sim.profile import expand, load_profile
from gpuconf.verdict import Outcome

REAL = Path(__file__).parent / "data" / "real" / "gfd"
SAMPLES = sorted(p.stem for p in REAL.glob("*.yaml"))


def sample(name: str) -> dict[str, Any]:
    data = yaml.safe_load((REAL / f"{name}.yaml").read_text())
    assert all(isinstance(v, str) for v in data["labels"].values()), name  # label values are strings
    return data


def node(name: str, **labels: str) -> NodeView:
    data = sample(name)
    return NodeView.of(data["node"], {**data["labels"], **labels}, data.get("capacity", {}),
                       data.get("allocatable", {}))


def test_every_sample_names_its_source():
    sources = (REAL / "SOURCES.md").read_text()
    assert SAMPLES and all(f"`{name}.yaml`" in sources for name in SAMPLES)


def probe_on(tmp_path: Path, gpu: str, gpus: int, driver: str, cuda: str) -> CudaProbeReport:
    """What the cuda-probe prints on that hardware (the sample's own nvidia-smi says which), as the
    simulator emulates it: the hardware side of the label comparison."""
    profile = tmp_path / "hw.yaml"
    profile.write_text(f"""schema: 1
name: hw
description: the sample's hardware
pools:
  - {{name: hw, count: 1, gpu: "{gpu}", gpus_per_node: {gpus}, driver: "{driver}", toolkit: {{version: "1.17.8"}}}}
""")
    n = expand(load_profile(profile)).nodes[0]
    code, out = cuda_probe_run(n, visible=[Visible(g) for g in n.gpus], image_cuda=parse_cuda(cuda), env={},
                               compat=False, started_at="2026-12-01T00:00:00.000Z", hostname=n.name)
    return parse_cuda_probe(out, exit_code=code)


# --- GFD releases that publish the driver only as cuda.driver.major/minor/rev ---------------------


def test_the_driver_is_read_from_the_deprecated_labels_older_gfd_publishes_alone():
    labels = sample("t4-operator-gfd-old-labels")["labels"]
    assert "nvidia.com/cuda.driver-version.full" not in labels
    assert label_driver_version(labels) == ("530.41.03", "nvidia.com/cuda.driver.major/minor/rev")
    assert label_cuda_version(labels) == "12.1"
    target = make_target("eksworker3", labels)
    assert target.driver == "530.41.03" and target.problem is None


def test_one_driver_per_pool_is_judged_on_old_gfd_labels():
    old = node("t4-operator-gfd-old-labels")
    upgraded = NodeView.of("eksworker4", {**old.labels, "nvidia.com/cuda.driver.minor": "54",
                                       "nvidia.com/cuda.driver.rev": "15"})
    third = NodeView.of("eksworker5", dict(old.labels))
    verdicts = {v.node: v for v in evaluate_driver_uniform([old, upgraded, third])}
    assert verdicts["eksworker3"].outcome is Outcome.PASS
    assert verdicts["eksworker4"].outcome is Outcome.DEGRADED
    assert verdicts["eksworker4"].summary == ("driver 530.54.15 (label nvidia.com/cuda.driver.major/minor/rev) while "
                                              "the Tesla-T4 pool runs 530.41.03")


def test_the_labels_of_an_old_gfd_match_the_hardware_its_nvidia_smi_shows(tmp_path):
    hw = sample("t4-operator-gfd-old-labels")["nvidia_smi"]
    probe = probe_on(tmp_path, hw["name"], hw["gpus"], hw["driver"], hw["cuda"])
    verdict = evaluate_labels_match_hardware(node("t4-operator-gfd-old-labels"), probe)
    assert verdict.outcome is Outcome.PASS, verdict.message()
    other = probe_on(tmp_path, hw["name"], hw["gpus"], "535.54.03", "12.2")  # the labels now lag the driver
    verdict = evaluate_labels_match_hardware(node("t4-operator-gfd-old-labels"), other)
    assert verdict.outcome is Outcome.FAIL
    assert "nvidia.com/cuda.driver.major/minor/rev says '530.41.03', the GPU says '535.54.03'" in verdict.summary


# --- mig.strategy on nodes without MIG --------------------------------------------------------------


def test_mig_strategy_single_on_a_gpu_without_mig_is_no_mig_layout(tmp_path):
    t4 = node("t4-operator-gfd-old-labels")
    assert t4.labels["nvidia.com/mig.strategy"] == "single" and t4.labels["nvidia.com/mig.capable"] == "false"
    assert mig.mig_skip_reason(t4.name, t4.labels, {"nvidia.com/gpu": "2"}) == (
        "eksworker3 has no GPU with MIG enabled (nvidia.com/mig.strategy=single is the device plugin's configured "
        "strategy, nvidia.com/mig.capable=false; no MIG instance is labelled or advertised): no MIG layout to check")
    declaration = tmp_path / "expect.yaml"
    declaration.write_text("""schema: 1
name: t4
pools:
  - {name: t4, selector: {nvidia.com/gpu.product: Tesla-T4}, nodes: 1, mig: {strategy: none}}
""")
    pool = load_expect(declaration).pools[0]
    node_view = NodeView.of(t4.name, t4.labels, {"nvidia.com/gpu": "2"}, {"nvidia.com/gpu": "2"})
    (field,) = [f for f in compare_node(pool, node_view) if f.field == "mig.strategy"]
    assert not field.mismatches, field.line()
    assert field.line() == ("mig.strategy: declared none, observed single (label nvidia.com/mig.strategy (no GPU "
                            "MIG-enabled))")


def test_an_h100_with_mig_off_is_not_a_mig_node():
    h100 = node("h100-xe9680-no-mig")
    assert mig.mig_skip_reason(h100.name, h100.labels, {"nvidia.com/gpu": "8"}) == (
        "xe9680 does not use MIG (nvidia.com/mig.strategy=unlabelled, nvidia.com/mig.capable=true)")


# --- gpu.count: GFD relabels after a GPU is lost; the pool remembers ---------------------------------


def test_a_node_relabelled_after_losing_a_gpu_is_caught_by_its_pool():
    healthy = node("h100-xe9680-no-mig")
    peer = NodeView.of("xe9680-b", dict(healthy.labels))
    lost = NodeView.of("xe9680-c", {**healthy.labels, "nvidia.com/gpu.count": "7"},
                    {"nvidia.com/gpu": "7"}, {"nvidia.com/gpu": "7"})
    pools = pool_gpu_count([healthy, peer, lost])
    assert pools["xe9680-c"] == (8, "the 3 nodes of its pool (NVIDIA-H100-80GB-HBM3 on PowerEdge-XE9680)")
    verdict = evaluate_gpu_count(lost, pool=pools["xe9680-c"])
    assert verdict.outcome is Outcome.FAIL
    assert verdict.summary.startswith(
        "GPU count disagrees between views: GFD label nvidia.com/gpu.count: 7; device plugin (capacity, replicas "
        "removed): 7; the 3 nodes of its pool (NVIDIA-H100-80GB-HBM3 on PowerEdge-XE9680): 8 (1 GPU(s) missing")
    assert evaluate_gpu_count(healthy, pool=pools["xe9680"]).outcome is Outcome.PASS
    assert evaluate_gpu_count(lost, expected=8).outcome is Outcome.FAIL  # --expect says so too


def test_vm_flavors_of_one_product_are_separate_pools():
    """GFD's gpu.machine is the DMI product name: OpenStack-Nova for every OpenStack VM (see
    gpu-operator#442's A30 node), so the instance type tells a 1-GPU flavor from a 4-GPU one."""
    a30 = {"nvidia.com/gpu.product": "NVIDIA-A30", "nvidia.com/gpu.machine": "OpenStack-Nova"}
    flavors = [NodeView.of(f"vm-{i}", {**a30, "nvidia.com/gpu.count": str(n),
                                    "node.kubernetes.io/instance-type": f"gpu.a30.{n}x"})
               for i, n in enumerate((4, 4, 1))]
    pools = pool_gpu_count(flavors)
    assert "vm-2" not in pools  # alone in its flavor: no pool to compare with
    assert pools["vm-0"] == (4, "the 2 nodes of its pool (NVIDIA-A30 on OpenStack-Nova gpu.a30.4x)")


def test_gpu_resource_advertised_reads_gfd_count_on_a_node_without_resources():
    verdict = evaluate_gpu_resource_advertised(node("h100-xe9680-no-mig"))
    assert verdict.outcome is Outcome.FAIL
    assert verdict.expected == "8 GPUs as nvidia.com/gpu (or a DRA ResourceSlice)"


# --- MIG: INVALID products, and labels that disagree with the device plugin --------------------------


def test_a_mig_invalid_product_is_a_finding_not_a_profile_named_invalid():
    n = node("a100-sxm4-80gb-mig-invalid")
    labels = n.labels
    assert mig.mig_invalid(labels) and mig.labelled_layout(labels) is None
    assert mig.mig_skip_reason(n.name, labels, {}) is None  # judged, never skipped
    declared = mig.declared_layout(labels, None, source="no ConfigMap read", gpus=8, profiles=None)
    verdict = mig.evaluate_layout_matches_config(n.name, labels=labels, capacity={}, allocatable={}, seen={},
                                                 declared=declared)
    assert verdict.outcome is Outcome.FAIL
    assert verdict.summary.startswith(
        "GFD labels nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB-MIG-INVALID: the MIG layout all-balanced does not "
        "fit nvidia.com/mig.strategy=single")
    assert "INVALID x" not in verdict.message()
    no_gpu = (Path(__file__).parent / "fixtures" / "probes" / "cuda-probe-no-driver.json").read_text()
    labels_verdict = evaluate_labels_match_hardware(n, parse_cuda_probe(no_gpu, exit_code=3))
    assert labels_verdict.outcome is Outcome.FAIL
    assert labels_verdict.summary.startswith("GFD labels the product NVIDIA-A100-SXM4-80GB-MIG-INVALID: the node's "
                                             "MIG layout does not fit mig.strategy=single")


def test_gfd_naming_another_profile_than_the_device_plugin_is_reported():
    n = node("a100-mig-mixed-gfd-v0.3")
    assert mig.mig_skip_reason(n.name, n.labels, n.capacity) is None
    assert mig.strategy_disagreement(n.labels, n.capacity) is None  # both are mixed
    declared = mig.declared_layout(n.labels, None, source="no ConfigMap read", gpus=8, profiles=None)
    verdict = mig.evaluate_layout_matches_config(n.name, labels=n.labels, capacity=n.capacity,
                                                 allocatable=n.allocatable, seen={}, declared=declared)
    assert verdict.outcome is Outcome.DEGRADED
    assert "advertised capacity: 3g.20gb x16; GFD labels: 3g.21gb x16" in verdict.message()


# --- GB200/GB300 NVLink cliques ---------------------------------------------------------------------


def test_the_nvlink_clique_is_read_and_shown(tmp_path):
    labels = {**sample("h100-xe9680-no-mig")["labels"], **sample("gb300-clique")["labels"]}
    probe = probe_on(tmp_path, "H100", 8, "580.95.05", "13.0")
    verdict = evaluate_labels_match_hardware(NodeView.of("gb300-worker", labels), probe)
    assert "NVLink clique a2221497-dbce-4964-8826-684c3694fd45.2478" in verdict.summary
    assert verdict.evidence == ("NVLink clique a2221497-dbce-4964-8826-684c3694fd45.2478",)


@pytest.mark.parametrize("name", SAMPLES)
def test_no_label_check_raises_on_a_real_label_set(name):
    """Partial label sets (what the sources show) are read without an exception by every check."""
    n = node(name)
    evaluate_gpu_resource_advertised(n)
    evaluate_gpu_count(n)
    evaluate_driver_uniform([n])
    mig.mig_skip_reason(n.name, n.labels, n.capacity)
    mig.labelled_layout(n.labels)
    make_target(n.name, n.labels)


# --- products GFD writes that name a known model ------------------------------------------------------


def test_a_mig_invalid_product_with_one_gpu_advertised_is_judged_not_skipped():
    """GFD's -MIG-INVALID product names the base model (known: the A100-SXM4-80GB) and no profile: no MIG pod
    is planned for the nvidia.com/gpu the plugin still advertises, so the layout check fails with the state."""
    from gpuconf.plugin.fleet import unknown_model

    n = node("a100-sxm4-80gb-mig-invalid")
    one = {"nvidia.com/gpu": "1"}
    assert mig.plan_node(n.name, n.labels, one) == ()  # was an "all" and a "one" pod for profile "?"
    assert mig.mig_skip_reason(n.name, n.labels, one) is None
    declared = mig.declared_layout(n.labels, None, source="no ConfigMap read", gpus=1, profiles=None)
    verdict = mig.evaluate_layout_matches_config(n.name, labels=n.labels, capacity=one, allocatable=one, seen={},
                                                 declared=declared)
    assert verdict.outcome is Outcome.FAIL
    assert "NVIDIA-A100-SXM4-80GB-MIG-INVALID" in verdict.summary and "all-balanced" in verdict.summary
    target = make_target(n.name, {**n.labels, "nvidia.com/cuda.driver-version.full": "550.54.15"})
    assert target.model is not None and target.model.gpu_name == "NVIDIA A100-SXM4-80GB", target.notes
    assert mig.mig_profiles(n.labels["nvidia.com/gpu.product"]) is not None
    view = type("View", (), {"name": n.name, "facts": type("F", (), {"product": type("P", (), {
        "value": n.labels["nvidia.com/gpu.product"]})()})()})()
    assert unknown_model(view) is None


def test_a_v100_sxm2_16gb_n_is_the_v100_sxm2_16gb():
    n = node("v100-sxm2-16gb-n")
    target = make_target(n.name, {**n.labels, "nvidia.com/cuda.driver-version.full": "535.129.03"})
    assert target.model is not None and target.model.gpu_name == "Tesla V100-SXM2-16GB", target.notes
    assert not any("not in gpuconf/data/gpus.yaml" in note for note in target.notes)
    assert target.model.gpu_class == "data-center" and target.model.arch == "7.0"
