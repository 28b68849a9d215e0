"""The accelerator-metrics decisions (gpuconf.checks.metrics) as rules, on exporter texts rendered
the way the DCGM exporter writes them, and the table they read (accelerator_metrics.yaml)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from gpuconf.checks import metrics
from gpuconf.checks.metrics import ExporterScrape, ProbeGpus, evaluate_gpu_metrics_present, parse_exporter_text
from gpuconf.checks.metrics import evaluate_recommended_metrics_present as recommended
from gpuconf.sim.exporter import render_metrics
from gpuconf.sim.profile import expand, load_profile, with_faults
from gpuconf.verdict import Outcome

DATA = Path(__file__).resolve().parent.parent / "gpuconf" / "data"

H100 = "NVIDIA H100 80GB HBM3"
LABELS = 'pci_bus_id="00000000:18:00.0",device="nvidia{i}",modelName="{model}",Hostname="n0",' \
         'DCGM_FI_DRIVER_VERSION="580.95.05"'


def uuid(i: int) -> str:
    return f"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd"


def text(gpus: int = 2, *, model: str = H100, drop: tuple[str, ...] = (), skip_gpu: int | None = None) -> str:
    """An exporter answer for ``gpus`` GPUs with every family, ``drop`` left out, ``skip_gpu`` missing."""
    families = {"DCGM_FI_DEV_GPU_UTIL": "gauge", "DCGM_FI_DEV_FB_USED": "gauge", "DCGM_FI_DEV_FB_FREE": "gauge",
                "DCGM_FI_DEV_GPU_TEMP": "gauge", "DCGM_FI_DEV_POWER_USAGE": "gauge",
                "DCGM_FI_DEV_XID_ERRORS": "gauge", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": "counter"}
    lines = []
    for name, kind in families.items():
        if name in drop:
            continue
        lines += [f"# HELP {name} help", f"# TYPE {name} {kind}"]
        lines += [f'{name}{{gpu="{i}",UUID="{uuid(i)}",{LABELS.format(i=i, model=model)}}} 1'
                  for i in range(gpus) if i != skip_gpu]
    return "\n".join(lines) + "\n"


def scrape(body: str, node: str = "n0") -> ExporterScrape:
    return metrics.exporter_scrape(node, "gpu-operator/nvidia-dcgm-exporter-abcde", text=body)


def every(n: int = 2) -> ProbeGpus:
    return ProbeGpus(frozenset(uuid(i) for i in range(n)), complete=True)


# --- parsing ----------------------------------------------------------------------------------


def test_the_exporter_text_parses_into_gpus_keyed_by_uuid():
    gpus = parse_exporter_text(text(2))
    assert sorted(gpus) == [uuid(0), uuid(1)]
    g = gpus[uuid(1)]
    assert g.index == 1 and g.model == H100 and g.labels["device"] == "nvidia1"
    assert g.values["DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"] == 1.0  # a counter keeps the exporter's name


def test_mig_instances_fold_into_their_parent_gpu():
    node = expand(load_profile("h100-mig-single")).nodes[0]
    gpus = parse_exporter_text(render_metrics(node))
    g = gpus[node.gpus[0].uuid]
    assert g.instances == tuple(str(i.gi) for i in node.gpus[0].mig)
    assert "DCGM_FI_DEV_GPU_UTIL" not in g.values and "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in g.values
    assert g.values["DCGM_FI_DEV_FB_FREE"] == sum(i.memory_gib * 1024 for i in node.gpus[0].mig)


def test_an_answer_that_is_not_the_text_format_is_the_nodes_failure():
    s = scrape("this is { not prometheus\n")
    assert s.error is not None and "not the Prometheus text format" in s.error


# --- metrics.gpu-metrics-present ------------------------------------------------------------


def test_every_gpu_with_the_required_metrics_under_the_probes_uuids_passes():
    v = evaluate_gpu_metrics_present("n0", scrape(text(2)), every(2))
    assert v.outcome is Outcome.PASS, v.message()


def test_a_gpu_the_probe_saw_but_the_exporter_misses_fails_naming_both_sets():
    v = evaluate_gpu_metrics_present("n0", scrape(text(2, skip_gpu=1)), every(2))
    assert v.outcome is Outcome.FAIL
    assert f"the probe saw {uuid(1)}, which the exporter pod gpu-operator/nvidia-dcgm-exporter-abcde on n0 does " \
           "not publish" in v.summary
    assert f"the exporter publishes: {uuid(0)}" in v.evidence
    assert f"the probe saw: {uuid(0)}, {uuid(1)}" in v.evidence


def test_a_gpu_the_exporter_publishes_but_the_whole_node_probe_did_not_see_fails():
    v = evaluate_gpu_metrics_present("n0", scrape(text(3)), every(2))
    assert v.outcome is Outcome.FAIL and f"publishes {uuid(2)}, which the whole-node probe did not see" in v.summary


def test_a_probe_that_held_only_some_gpus_is_only_checked_one_way_and_the_pass_says_so():
    partial = ProbeGpus(frozenset({uuid(0)}), complete=False)
    v = evaluate_gpu_metrics_present("n0", scrape(text(3)), partial)
    assert v.outcome is Outcome.PASS
    assert v.summary == ("the exporter pod gpu-operator/nvidia-dcgm-exporter-abcde on n0 publishes the required "
                         "metrics for 3 GPU(s), every GPU of the whole-node probe")
    assert v.not_judged == (f"whether {uuid(1)}, {uuid(2)}, published beyond the probe's GPUs, are GPUs of n0: the "
                            "probe did not hold every GPU of the node",)
    assert evaluate_gpu_metrics_present("n0", scrape(text(2)), every(2)).not_judged == ()


def test_a_gpu_without_utilisation_fails_naming_the_metric():
    v = evaluate_gpu_metrics_present("n0", scrape(text(2, drop=("DCGM_FI_DEV_GPU_UTIL",))), every(2))
    assert v.outcome is Outcome.FAIL
    assert f"{uuid(0)} (gpu 0) lacks utilization (DCGM_FI_DEV_GPU_UTIL or DCGM_FI_PROF_GR_ENGINE_ACTIVE)" in v.summary


def test_no_exporter_on_the_node_fails_with_the_reason():
    s = metrics.exporter_scrape("n0", None, error="no DCGM exporter pod runs on n0")
    v = evaluate_gpu_metrics_present("n0", s, every(2))
    assert v.outcome is Outcome.FAIL and v.summary == "no DCGM exporter pod runs on n0"


def test_an_exporter_that_does_not_answer_fails_naming_the_pod():
    s = metrics.exporter_scrape("n0", "gpu-operator/x", error="the DCGM exporter pod gpu-operator/x on n0 did not "
                                "answer on port 9400: HTTP 503: error trying to reach service")
    v = evaluate_gpu_metrics_present("n0", s, every(2))
    assert v.outcome is Outcome.FAIL and "gpu-operator/x" in v.summary


def test_a_runner_without_pods_proxy_is_not_tested_with_the_rule_to_add():
    s = metrics.exporter_scrape("n0", "gpu-operator/x", forbidden="the runner may not get pods/proxy; add the rule X")
    assert evaluate_gpu_metrics_present("n0", s, every(2)).outcome is Outcome.NOT_TESTED
    assert recommended("n0", s).outcome is Outcome.NOT_TESTED


def test_without_a_probe_the_metrics_are_checked_and_the_uuid_match_is_not_tested():
    v = evaluate_gpu_metrics_present("n0", scrape(text(2)), None, probe_reason="no whole-node probe ran on n0")
    assert v.outcome is Outcome.NOT_TESTED and "not compared: no whole-node probe ran on n0" in v.summary
    bad = evaluate_gpu_metrics_present("n0", scrape(text(2, drop=("DCGM_FI_DEV_FB_FREE",))), None,
                                       probe_reason="none")
    assert bad.outcome is Outcome.FAIL


# --- metrics.recommended-metrics-present ----------------------------------------------------


def test_temperature_power_and_nvlink_on_an_nvlink_gpu_pass():
    assert recommended("n0", scrape(text(2))).outcome is Outcome.PASS


def test_a_missing_temperature_degrades():
    v = recommended("n0", scrape(text(2, drop=("DCGM_FI_DEV_GPU_TEMP",))))
    assert v.outcome is Outcome.DEGRADED and "lacks temperature (DCGM_FI_DEV_GPU_TEMP)" in v.summary


def test_nvlink_is_expected_of_an_nvlink_model_only():
    no_link = text(2, drop=("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",))
    assert recommended("n0", scrape(no_link)).outcome is Outcome.DEGRADED
    assert recommended("n0", scrape(text(2, model="Tesla T4", drop=("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",)))
                       ).outcome is Outcome.PASS


def test_a_gpu_of_unknown_model_on_a_node_without_nvlink_passes_saying_nvlink_was_not_judged():
    v = recommended("n0", scrape(text(2, model="Tesla T4", drop=("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",))
                                 .replace('modelName="Tesla T4",', "")))
    assert v.outcome is Outcome.PASS, v.message()
    assert v.summary == "all 2 GPU(s) publish the recommended metrics"
    assert v.not_judged == (f"whether {uuid(0)} (gpu 0), {uuid(1)} (gpu 1) should publish NVLink bandwidth: the "
                            "exporter names no model (modelName label)",)
    # a known model, or a node that publishes NVLink for some GPU, leaves nothing unjudged
    assert recommended("n0", scrape(text(2, model="Tesla T4", drop=("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",)))
                       ).not_judged == ()
    assert recommended("n0", scrape(text(2).replace(f'modelName="{H100}",', ""))).not_judged == ()


def test_no_exporter_answer_leaves_the_recommended_check_not_tested():
    s = metrics.exporter_scrape("n0", None, error="no DCGM exporter pod runs on n0")
    assert recommended("n0", s).outcome is Outcome.NOT_TESTED


# --- the simulated exporter under the catalog's faults ----------------------------------------


def test_the_simulated_exporter_publishes_every_gpu_of_a_healthy_node():
    node = expand(load_profile("healthy-h100")).nodes[0]
    s = scrape(render_metrics(node), node.name)
    probe = ProbeGpus(frozenset(g.uuid for g in node.gpus), complete=True)
    assert evaluate_gpu_metrics_present(node.name, s, probe).outcome is Outcome.PASS
    assert recommended(node.name, s).outcome is Outcome.PASS


def test_metrics_gpu_missing_fails_naming_the_missing_uuid():
    profile = with_faults(load_profile("healthy-h100"), [{"id": "metrics-gpu-missing", "gpu": 3}])
    node = expand(profile).nodes[0]
    probe = ProbeGpus(frozenset(g.uuid for g in node.gpus), complete=True)
    v = evaluate_gpu_metrics_present(node.name, scrape(render_metrics(node), node.name), probe)
    assert v.outcome is Outcome.FAIL and f"the probe saw {node.gpus[3].uuid}, which" in v.summary


def test_the_xid_metric_carries_the_gpus_last_xid():
    profile = with_faults(load_profile("healthy-h100"), [{"id": "xid-errors", "gpu": 2, "xid": 79}])
    node = expand(profile).nodes[0]
    gpus = parse_exporter_text(render_metrics(node))
    assert gpus[node.gpus[2].uuid].values["DCGM_FI_DEV_XID_ERRORS"] == 79
    assert gpus[node.gpus[0].uuid].values["DCGM_FI_DEV_XID_ERRORS"] == 0


# --- the table ----------------------------------------------------------------------------------


def test_the_table_matches_its_schema_and_names_required_families():
    data = yaml.safe_load((DATA / "accelerator_metrics.yaml").read_text(encoding="utf-8"))
    schema = json.loads((DATA / "schemas" / "accelerator_metrics.schema.json").read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    errors = [e.message for e in Draft202012Validator(schema).iter_errors(data)]
    assert not errors
    table = metrics.metrics_table()
    assert {f.id for f in table.level("required")} == {"utilization", "memory-used", "memory-free"}


@pytest.mark.parametrize("model", ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA H200"])
def test_nvlink_models_are_names_of_the_gpu_table(model):
    names = {row["name"] for row in yaml.safe_load((DATA / "gpus.yaml").read_text(encoding="utf-8"))["gpus"]}
    assert model in metrics.metrics_table().nvlink_models and model in names
