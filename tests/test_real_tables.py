"""gpuconf/data/gpus.yaml against real GFD label sets and nvidia-smi captures (tests/data/real/tables/,
sources in its SOURCES.md): every real product is found, or named as unknown by the check that reads
the table; where a real sample states memory, family or compute capability, the table agrees."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuconf.checks.compat import make_target
from gpuconf.compat import tables

REAL = Path(__file__).parent / "data" / "real" / "tables"
LABEL_SETS: list[dict[str, Any]] = yaml.safe_load((REAL / "gfd-labels.yaml").read_text())
#: Real products gpus.yaml does not hold on purpose: vGPU profiles are not hardware models.
UNLISTED = {"GRID-A100-8C"}


@pytest.mark.parametrize("sample", LABEL_SETS, ids=[s["source"] for s in LABEL_SETS])
def test_every_real_gfd_product_is_in_the_table_and_agrees_with_what_its_labels_state(sample: dict[str, Any]) -> None:
    labels: dict[str, str] = sample["labels"]
    product = labels["nvidia.com/gpu.product"]
    model = tables.find_gpu(product)
    target = make_target("n", {**labels, "nvidia.com/cuda.driver-version.full": "580.65.06"})
    if product in UNLISTED:
        assert model is None
        assert f"GPU {product!r} is not in gpuconf/data/gpus.yaml: its class and brand are unknown" in target.notes
        return
    assert model is not None, f"{product} (real GFD label, {sample['source']}) is not in gpuconf/data/gpus.yaml"
    assert model.gfd_product == product
    assert target.model is not None
    assert (target.model.gpu_name, target.model.gpu_class) == (model.name, model.gpu_class)
    if "nvidia.com/gpu.memory" in labels:
        assert model.memory_mib == int(labels["nvidia.com/gpu.memory"])
    if "nvidia.com/gpu.family" in labels:
        assert model.architecture == labels["nvidia.com/gpu.family"]
    if "nvidia.com/gpu.compute.major" in labels:
        cc = f"{labels['nvidia.com/gpu.compute.major']}.{labels['nvidia.com/gpu.compute.minor']}"
        assert model.compute_capability == cc


def test_the_memory_nvidia_smi_reports_for_each_real_capture_is_the_tables() -> None:
    lines = [line for line in (REAL / "smi-memory.csv").read_text().splitlines() if not line.startswith("#")]
    rows = list(csv.DictReader(lines))
    assert rows
    for row in rows:
        model = tables.find_gpu(row["name"])
        assert model is not None and model.name == row["name"], row
        assert model.memory_mib == int(row["memory_mib"]), row
