"""Health checks NVML cannot answer on consumer GPUs are not tested, never passed or failed.

Real GeForce `nvidia-smi -q` captures (tests/data/real/nvidia-smi/SOURCES.md: an RTX 3090 on 535, an
RTX 5090 on 570) print `N/A` (NVML: Not Supported) for the ECC mode and counters, retired pages and
remapped rows, while the PCIe replay counter, temperature and power read. The simulator's consumer-class
NVML section must report exactly that, and the three health checks that read those counters must be
NOT TESTED on such GPUs with NVML's answer as the reason."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from gpuconf.checks.health import evaluate_no_pending_repair, evaluate_no_uncorrectable_ecc, evaluate_row_remapping
from gpuconf.compat.versions import parse_cuda
from gpuconf.probes.cuda import CudaProbeReport, parse_cuda_probe
from gpuconf.sim.emulate import Visible, cuda_probe_run
from gpuconf.sim.profile import expand, load_profile
from gpuconf.verdict import Outcome

REAL = Path(__file__).parent / "data" / "real" / "nvidia-smi"
SAMPLES = ["q_535_geforce_rtx_3090.txt", "q_570_geforce_rtx_5090_excerpt.txt"]
#: The probe's NVML section for each nvidia-smi -q field (path of headings, then the key).
FIELDS = {
    "ecc": ("ECC Mode", "Current"),
    "retired_pages": ("Retired Pages", "Pending Page Blacklist"),
    "remapped_rows": ("Remapped Rows",),
    "pcie": ("PCI", "Replays Since Reset"),
}


def smi_q(text: str) -> dict[tuple[str, ...], str]:
    """``nvidia-smi -q`` as {path of headings + key: value}, read by indentation (4 spaces a level)."""
    out: dict[tuple[str, ...], str] = {}
    stack: list[tuple[int, str]] = []
    for line in text.splitlines():
        if not line.startswith("    ") or not line.strip():
            continue
        depth = (len(line) - len(line.lstrip(" "))) // 4
        key, sep, value = line.strip().partition(" : ") if " : " in line else (line.strip().rstrip(":"), "", "")
        key = key.strip()
        stack = [(d, k) for d, k in stack if d < depth]
        if sep:
            out[(*(k for _, k in stack), key)] = value.strip()
        else:
            stack.append((depth, key))
    return out


@pytest.mark.parametrize("sample", SAMPLES)
def test_a_real_geforce_answers_not_supported_for_ecc_retired_pages_and_remapped_rows(sample):
    fields = smi_q((REAL / sample).read_text())
    assert fields[("Product Brand",)] == "GeForce"
    assert all(fields[path] == "N/A" for name, path in FIELDS.items() if name != "pcie"), fields
    assert fields[FIELDS["pcie"]].isdigit()  # the replay counter reads
    assert not [p for p in fields if p[0] == "ECC Errors" and fields[p] != "N/A"]  # no ECC counter at all


@cache
def consumer_probe() -> CudaProbeReport:
    node = expand(load_profile("geforce-workstation")).node("rtx-0")
    assert node.model.gpu_class == "consumer" and node.model.nvml_brand == "GeForce"
    code, out = cuda_probe_run(node, visible=[Visible(g) for g in node.gpus], image_cuda=parse_cuda("13.2.0"), env={},
                               compat=False, started_at="2026-12-02T00:00:00.000Z", hostname=node.name)
    return parse_cuda_probe(json.dumps(json.loads(out)), exit_code=code)


def test_the_simulated_geforce_reports_what_the_real_ones_do():
    real = [smi_q((REAL / s).read_text()) for s in SAMPLES]
    for gpu in consumer_probe().nvml_gpus:
        for name, path in FIELDS.items():
            unsupported = all(r[path] == "N/A" for r in real)
            section = gpu.raw[name]
            assert (section.get("available") is False) == unsupported, (name, section)
            if unsupported:
                assert section["reason"].endswith(": Not Supported"), section


@pytest.mark.parametrize(("evaluate", "reason"), [
    (evaluate_no_uncorrectable_ecc, "no GPU on rtx-0 has ECC enabled: all 2 GPU(s): ECC not supported "
     "(nvmlDeviceGetEccMode: Not Supported)"),
    (evaluate_row_remapping, "no GPU on rtx-0 reads row remapping: all 2 GPU(s): remapped rows not readable "
     "(nvmlDeviceGetRemappedRows: Not Supported)"),
    (evaluate_no_pending_repair, "no GPU on rtx-0 reads row remapping or page retirement: all 2 GPU(s): remapped rows "
     "and retired pages not readable (nvmlDeviceGetRemappedRows: Not Supported; nvmlDeviceGetRetiredPages: Not "
     "Supported)"),
], ids=["uncorrectable ECC", "row remapping failed", "pending memory repair"])
def test_health_checks_are_not_tested_on_a_geforce_with_nvmls_answer(evaluate, reason):
    verdict = evaluate("rtx-0", consumer_probe())
    assert verdict.outcome is Outcome.NOT_TESTED
    assert verdict.summary == reason
