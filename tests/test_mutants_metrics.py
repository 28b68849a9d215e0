"""The accelerator-metrics checks' every branch, pinned where mutation testing (scripts/mutation-score)
found it unpinned: each case is one function of gpuconf.checks.metrics called on an exporter answer
rendered as the DCGM exporter writes it (tests/test_checks_metrics.py's, or the simulator's) with
one thing changed, and gives what tests/data/verdicts/metrics.json recorded, whole: a verdict's
outcome, summary, expected/observed, evidence and what a PASS did not judge; a parsed scrape."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from test_checks_health import probe as health_probe
from test_checks_health import report as health_report
from test_checks_health import run as health_run
from test_checks_metrics import H100, every, scrape, text, uuid
from verdict_record import check_recording, whole

from gpuconf.checks import metrics
from gpuconf.checks.metrics import AcceleratorMetrics, ExporterScrape, GpuSamples, MetricFamily, ProbeGpus
from gpuconf.sim.exporter import render_metrics
from gpuconf.sim.profile import expand, load_profile

NODE = "n0"
POD = "gpu-operator/nvidia-dcgm-exporter-abcde"
LINK = "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"
UTIL = "DCGM_FI_DEV_GPU_UTIL"
TEMP = "DCGM_FI_DEV_GPU_TEMP"
POWER = "DCGM_FI_DEV_POWER_USAGE"
FB_FREE = "DCGM_FI_DEV_FB_FREE"


def present(s: ExporterScrape, probe: ProbeGpus | None, reason: str | None = None,
            table: AcceleratorMetrics | None = None) -> Callable[[], Any]:
    return lambda: whole(metrics.evaluate_gpu_metrics_present(NODE, s, probe, probe_reason=reason, table=table))


def recommended(s: ExporterScrape, table: AcceleratorMetrics | None = None) -> Callable[[], Any]:
    return lambda: whole(metrics.evaluate_recommended_metrics_present(NODE, s, table=table))


def samples(*gpus: tuple[str, int | None, str | None, tuple[str, ...]]) -> ExporterScrape:
    """A scrape of GPUs (uuid, index, model, metrics published)."""
    return ExporterScrape(NODE, POD, {u: GpuSamples(u, i, {"modelName": m} if m else {}, dict.fromkeys(names, 1.0))
                                      for u, i, m, names in gpus})


REQUIRED = (UTIL, "DCGM_FI_DEV_FB_USED", FB_FREE)
ALL = (*REQUIRED, TEMP, POWER)
UNORDERED = samples(("GPU-b", None, H100, (UTIL,)), ("GPU-a", None, H100, (UTIL,)), ("GPU-z", 1, H100, ()),
                    ("GPU-y", 0, H100, (FB_FREE,)))
#: A site table: one required family, one recommended, no NVLink models.
SITE = AcceleratorMetrics((MetricFamily("util", "required", (UTIL,)), MetricFamily("temp", "recommended", (TEMP,)),
                           MetricFamily("link", "recommended", (LINK,), when="nvlink")), frozenset())
# Scrapes are built when a case runs (never at import), so that a mutant of the function building them
# is the one the case meets.


def forbidden() -> ExporterScrape:
    return metrics.exporter_scrape(NODE, POD, forbidden="the runner may not get pods/proxy; add the rule X")


def no_exporter() -> ExporterScrape:
    return metrics.exporter_scrape(NODE, None, error="no DCGM exporter pod runs on n0")


def no_uuid() -> ExporterScrape:
    return scrape("# TYPE DCGM_FI_DEV_GPU_UTIL gauge\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 1\n")


def probe_of(nvml: bool) -> Any:
    """The healthy node's probe with two CUDA devices, one of them a MIG device; NVML's 8 GPUs or none."""
    code, doc = health_run()
    doc["devices"] = doc["devices"][:3]
    doc["devices"][1]["uuid"] = "MIG-11111111-2222-3333-4444-555555555555"
    if not nvml:
        doc["nvml"] = {"available": False, "reason": "nvmlInit_v2: Driver Not Loaded"}
    return metrics.probe_gpus(health_report(code, doc), complete=False)


#: GPU index order opposite to UUID order
CROSSED = (("GPU-z0", 0, "Tesla T4", ()), ("GPU-a1", 1, "Tesla T4", ()))
MIG = expand(load_profile("h100-mig-single")).nodes[0]
OTHER_PARTS = f'gpu="x",UUID="GPU-x",modelName="{H100}"'
ODD = (f'# TYPE DCGM_FI_DEV_FB_FREE gauge\nDCGM_FI_DEV_FB_FREE{{{OTHER_PARTS},GPU_I_ID="1"}} 3\n'
       f'DCGM_FI_DEV_FB_FREE{{gpu="9",UUID="GPU-x",modelName="other",device="nvidia9",GPU_I_ID="2"}} 4\n'
       f'DCGM_FI_DEV_FB_FREE{{{OTHER_PARTS},GPU_I_ID="1"}} 5\n'
       f'# TYPE DCGM_FI_DEV_GPU_TEMP gauge\nDCGM_FI_DEV_GPU_TEMP{{{OTHER_PARTS},GPU_I_ID="1"}} 40\n'
       f'DCGM_FI_DEV_GPU_TEMP{{{OTHER_PARTS},GPU_I_ID="2"}} 60\nDCGM_FI_DEV_GPU_TEMP{{{OTHER_PARTS}}} 50\n'
       f'# TYPE DCGM_FI_PROF_X counter\nDCGM_FI_PROF_X{{{OTHER_PARTS}}} 7\n'
       f'# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge\nDCGM_FI_PROF_GR_ENGINE_ACTIVE{{{OTHER_PARTS},GPU_I_ID="1"}} 0.25\n'
       f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{OTHER_PARTS},GPU_I_ID="2"}} 0.5\n'
       'DCGM_FI_PROF_GR_ENGINE_ACTIVE{UUID="GPU-y",GPU_I_ID="3"} 0.75\n'
       f'# TYPE DCGM_FI_S summary\nDCGM_FI_S_count{{{OTHER_PARTS}}} 1\nDCGM_FI_S_sum{{{OTHER_PARTS}}} 2\n'
       '# TYPE DCGM_FI_DEV_GPU_UTIL gauge\nDCGM_FI_DEV_GPU_UTIL{UUID=""} 9\nDCGM_FI_DEV_GPU_UTIL{UUID="GPU-w"} 8\n')


def parsed(body: str) -> Callable[[], Any]:
    return lambda: metrics.parse_exporter_text(body)


CASES: dict[str, Callable[[], Any]] = {
    # reading the exporter's answer
    "parse: two GPUs": parsed(text(2)),
    "parse: MIG instances fold into their parent": parsed(render_metrics(MIG)),
    "parse: instances summed or the largest, the device's own, labels first seen, a counter": parsed(ODD),
    "scrape: forbidden": forbidden,
    "scrape: an error": no_exporter,
    "scrape: no answer": lambda: metrics.exporter_scrape(NODE, POD),
    "scrape: not the text format": lambda: metrics.exporter_scrape(NODE, POD, text="this is { not prometheus\n"),
    "scrape: an answer": lambda: metrics.exporter_scrape(NODE, POD, text=text(1)),
    "probe GPUs: a whole node": lambda: metrics.probe_gpus(health_probe(), complete=True),
    "probe GPUs: NVML's and CUDA's": lambda: probe_of(nvml=True),
    "probe GPUs: CUDA's alone": lambda: probe_of(nvml=False),
    "gpu names": lambda: [metrics.gpu_name(g) for g in UNORDERED.gpus.values()],
    # metrics.gpu-metrics-present
    "present: pass, the same GPUs": present(scrape(text(2)), every(2)),
    "present: pass, a partial probe": present(scrape(text(3)), ProbeGpus(frozenset({uuid(0)}), complete=False)),
    "present: pass, a partial probe that saw them all": present(scrape(text(2)), ProbeGpus(frozenset(
        {uuid(0), uuid(1)}), complete=False)),
    "present: forbidden": lambda: present(forbidden(), every(2))(),
    "present: no exporter": lambda: present(no_exporter(), every(2))(),
    "present: no per-GPU series": lambda: present(no_uuid(), every(2))(),
    "present: GPUs in index order, not UUID order": present(samples(*CROSSED), None),
    "present: a metric missing under the probe's own UUIDs": present(
        scrape(text(2, drop=(UTIL,))), every(2)),
    "present: required metrics missing on GPUs in index order": present(UNORDERED, None, "no probe ran on n0"),
    "present: a GPU the exporter misses": present(scrape(text(3, skip_gpu=1)), every(3)),
    "present: a GPU the probe did not see": present(scrape(text(3)), every(2)),
    "present: both ways": present(scrape(text(2, skip_gpu=0)), ProbeGpus(frozenset({uuid(0), "GPU-other"}), True)),
    "present: a partial probe's GPU the exporter misses": present(
        scrape(text(2, skip_gpu=0)), ProbeGpus(frozenset({uuid(0)}), complete=False)),
    "present: without a probe, its reason": present(scrape(text(2)), None, "no whole-node probe ran on n0"),
    "present: without a probe, no reason": present(scrape(text(2)), None),
    "present: a probe without UUIDs": present(scrape(text(2)), ProbeGpus(frozenset(), complete=True)),
    "present: a site table": present(scrape(text(2, drop=("DCGM_FI_DEV_FB_USED",))), every(2), table=SITE),
    # metrics.recommended-metrics-present
    "recommended: pass with NVLink": recommended(scrape(text(2))),
    "recommended: pass without NVLink": recommended(scrape(text(2, model="Tesla T4", drop=(LINK,)))),
    "recommended: forbidden": lambda: recommended(forbidden())(),
    "recommended: no exporter": lambda: recommended(no_exporter())(),
    "recommended: no per-GPU series": lambda: recommended(no_uuid())(),
    "recommended: GPUs in index order, not UUID order": recommended(samples(*CROSSED)),
    "recommended: NVLink on GPUs of a model without it": recommended(samples(
        ("GPU-a", 0, "Tesla T4", (*ALL, LINK)), ("GPU-b", 1, "Tesla T4", (*ALL, LINK)))),
    "recommended: an empty model name": lambda: recommended(ExporterScrape(NODE, POD, {"GPU-e": GpuSamples(
        "GPU-e", 0, {"modelName": ""}, dict.fromkeys(ALL, 1.0))}))(),
    "recommended: temperature and power missing": recommended(scrape(text(2, drop=(TEMP, POWER)))),
    "recommended: NVLink missing on an NVLink model": recommended(scrape(text(2, drop=(LINK,)))),
    "recommended: NVLink on one GPU is expected of all": recommended(samples(
        ("GPU-a", 0, "Tesla T4", (*ALL, LINK)), ("GPU-b", 1, "Tesla T4", ALL), ("GPU-c", None, None, ALL))),
    "recommended: a model unknown, no NVLink anywhere": recommended(samples(
        ("GPU-a", 0, "Tesla T4", ALL), ("GPU-c", None, None, ALL), ("GPU-b", 1, None, ALL))),
    "recommended: a site table": recommended(samples(("GPU-a", 0, H100, (UTIL,)), ("GPU-b", 1, None, (UTIL, TEMP))),
                                             table=SITE),
}


@pytest.mark.parametrize("case", CASES)
def test_the_result_is_the_recorded_one(case: str) -> None:
    check_recording("metrics", case, CASES[case])


def test_a_family_describes_itself_by_its_metrics() -> None:
    assert MetricFamily("f", "required", ("A", "B")).describe() == "f (A or B)"
    assert SITE.level("recommended") == SITE.families[1:]
