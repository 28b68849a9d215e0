"""gpuconf/data/gpus.yaml against real GFD label sets and nvidia-smi captures (tests/data/real/tables/,
sources in its SOURCES.md): every real product is found, or named as unknown by the check that reads
the table; where a real sample states memory, family or compute capability, the table agrees. And
gpuconf/data/mig_profiles.yaml against real nvidia-smi mig -lgip outputs (tests/data/real/mig/):
the same profiles and instance counts, and memory the MIG suite's tolerance accepts."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuconf.checks.compat import make_target
from gpuconf.checks.mig import _tolerance as mig_memory_problem  # the MIG suite's memory judgement
from gpuconf.checks.mig import mig_profiles
from gpuconf.compat import rules, tables
from gpuconf.compat.require import Gpu, HostFacts, check_container

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
        # unknown hardware gets no prediction (never the union of every class): NOT TESTED, named
        assert target.model is None and target.problem is not None
        assert f"GPU model {product} is not in gpuconf/data/gpus.yaml" in target.problem
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


# --- MIG profiles against real nvidia-smi mig -lgip outputs ---------------------------------------

MIG = Path(__file__).parent / "data" / "real" / "mig"
#: One profile row of nvidia-smi mig -lgip: GPU, name, profile id, free/total instances, memory GiB.
LGIP_ROW = re.compile(r"^\|\s+(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)/(\d+)\s+([\d.]+)\s", re.M)
LGIP_SAMPLES = {"h100-nvl-lgip.txt": "NVIDIA H100 NVL",
                "rtx-pro-6000-lgip.txt": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                "../nvidia-smi/mig_lgip_550_a100_80gb.txt": "NVIDIA A100-SXM4-80GB"}


@pytest.mark.parametrize(("name", "gpu"), sorted(LGIP_SAMPLES.items()))
def test_the_mig_table_and_tolerance_agree_with_a_real_lgip_output(name: str, gpu: str) -> None:
    rows = LGIP_ROW.findall((MIG / name).read_text())
    assert rows, name
    table = mig_profiles(gpu)
    assert table is not None, gpu
    assert {r[1] for r in rows} == set(table), "profiles: real vs table"
    for _gpu, profile, _id, _free, total, gib in rows:
        assert table[profile].max_instances == int(total), profile
        assert table[profile].lgip_gib == float(gib) and not table[profile].lgip_guess, (profile, gib)
        memory = int(float(gib) * (1 << 30))
        assert mig_memory_problem(memory, table[profile]) is None, (profile, gib)
        # an instance that shows the name's GiB (or 5% less than lgip) is not this profile's; other drivers'
        # figures, up to 2.1% off (tests/data/real/mig/instance-memory.csv), are
        for wrong in (table[profile].memory_gib * 1.04, float(gib) * 0.95):
            assert mig_memory_problem(int(wrong * (1 << 30)), table[profile]) is not None, (profile, wrong)


def test_a_model_without_an_lgip_output_is_judged_by_a_band_the_real_outputs_give() -> None:
    from gpuconf.checks.mig import LGIP_MARGIN, LGIP_SPREAD, MigProfile, memory_band, name_floor

    # the lowest real lgip/name ratio: GB200 1g.24gb, 20.00 GiB of 24 (gpu-operator#1303)
    assert name_floor() == pytest.approx(20.0 / 24 * (1 - LGIP_SPREAD))
    h200 = mig_profiles("NVIDIA H200")
    assert h200 is not None and h200["1g.18gb"].lgip_gib is None
    low, high, source = memory_band(h200["1g.18gb"])
    assert low == pytest.approx(18 * name_floor()) and "no real nvidia-smi mig -lgip figure" in source
    # GB200 1g.24gb: a guess (about 20 GiB) until a real -lgip settled it at 20.00
    gb200 = mig_profiles("NVIDIA GB200")
    assert gb200 is not None and not gb200["1g.24gb"].lgip_guess and gb200["1g.24gb"].lgip_gib == 20.0
    # a figure no output backs: the band spans both the guess and the name-based band until one settles it
    low, high, source = memory_band(MigProfile("1g.24gb", 1, 24, 7, 20.0, lgip_guess=True))
    assert low <= 20 * (1 - LGIP_MARGIN) and high >= 24 and "guessed" in source


# --- MIG profiles against NVIDIA's MIG User Guide tables and mig-parted entries ------------------

#: The MIG User Guide's table caption -> a GPU product of that table (mig_profiles.yaml set it belongs to).
GUIDE_PRODUCTS = {"A30-24GB": "NVIDIA A30", "A100-SXM4-40GB": "NVIDIA A100-SXM4-40GB",
                  "H100 80GB": "NVIDIA H100 80GB HBM3", "H100 94GB": "NVIDIA H100 NVL",
                  "H100 96GB (H100 on GH200)": "NVIDIA GH200 480GB", "H200 141GB": "NVIDIA H200",
                  "B200 180 GB": "NVIDIA B200",
                  "RTX PRO 6000 Blackwell 96GB": "NVIDIA RTX PRO 6000 Blackwell Server Edition"}


def _guide_rows() -> dict[str, dict[str, int]]:
    lines = [line for line in (MIG / "mig-user-guide-profiles.csv").read_text().splitlines()
             if not line.startswith("#")]
    out: dict[str, dict[str, int]] = {}
    for row in csv.DictReader(lines):
        out.setdefault(row["product"], {})[row["profile"]] = int(row["instances"])
    return out


def test_the_guide_fixture_names_every_product_it_holds() -> None:
    assert set(_guide_rows()) == set(GUIDE_PRODUCTS)


@pytest.mark.parametrize(("product", "gpu"), sorted(GUIDE_PRODUCTS.items()))
def test_every_row_of_a_mig_user_guide_table_is_the_profile_tables(product: str, gpu: str) -> None:
    real = _guide_rows()[product]
    table = mig_profiles(gpu)
    assert table is not None, gpu
    assert {name: p.max_instances for name, p in table.items()} == real


def _mig_parted(configs: list[str], device: str) -> dict[str, int]:
    """{profile: most instances} from the kept mig-parted entries: ``all-<profile>`` entries, and the
    ``all-balanced`` entry of ``device`` for the profiles it names (at most, not the most)."""
    raw = yaml.safe_load((MIG / "mig-parted-config-default.yaml").read_text())["mig-configs"]
    out: dict[str, int] = {}
    for name in configs:
        (entry,) = raw[name]
        out.update(entry["mig-devices"])
    for entry in raw["all-balanced"]:
        if device in entry["device-filter"]:
            for profile, n in entry["mig-devices"].items():
                assert profile in out and n <= out[profile], (device, profile)
    return out


def test_gh200_144gb_profiles_are_nvidias_mig_parted_entries_for_it() -> None:
    real = _mig_parted(["all-1g.18gb", "all-1g.18gb.me", "all-1g.36gb", "all-2g.36gb", "all-3g.72gb",
                        "all-4g.72gb", "all-7g.144gb"], "0x234810DE")
    table = mig_profiles("NVIDIA GH200 144G HBM3e")
    assert table is not None and mig_profiles("NVIDIA-GH200-144G-HBM3e") == table
    assert {name: p.max_instances for name, p in table.items()} == real


def test_gb200_holds_nvidias_newer_mig_parted_names_with_its_me_profile() -> None:
    real = _mig_parted(["all-1g.23gb", "all-1g.23gb.me", "all-1g.47gb", "all-2g.47gb", "all-3g.93gb",
                        "all-4g.93gb", "all-7g.186gb"], "0x294110DE")
    table = mig_profiles("NVIDIA GB200")
    assert table is not None
    assert {name: table[name].max_instances for name in real} == real
    assert table["1g.23gb+me"].max_instances == 1
    # the older names (mig-parted@1400787) stay until an nvidia-smi mig -lgip shows which drivers print them
    assert {"1g.24gb", "3g.95gb", "4g.95gb", "7g.189gb"} <= set(table)


# --- the toolkit/driver table against NVIDIA's Table 3 --------------------------------------------


def test_every_row_of_nvidia_s_table_3_is_in_the_toolkit_table_with_its_driver() -> None:
    lines = [line for line in (REAL / "cuda-toolkit-driver-table3.csv").read_text().splitlines()
             if not line.startswith("#")]
    real = {row["label"]: row["min_driver"] for row in csv.DictReader(lines)}
    ours = {t["label"]: t["min_driver"] for t in tables.load("toolkits")["toolkits"]}
    assert len(real) > 60
    missing = sorted(set(real) - set(ours))
    assert not missing, f"Table 3 rows not in gpuconf/data/toolkits.yaml: {missing}"
    assert {label: ours[label] for label in real} == real


# --- NVIDIA_REQUIRE_CUDA per image tag and distro -------------------------------------------------

IMAGES = Path(__file__).parent / "data" / "real" / "images"


def _real_require(name: str) -> str:
    return next(line for line in (IMAGES / name).read_text().splitlines() if not line.startswith("#"))


#: (version, ubuntu18.04 tag, ubuntu22.04 tag, a GeForce host only the ubuntu18.04 image accepts: native CUDA,
#: driver). R510 is in 11.8.0's longer list, R520 in 12.0.1's; the 22.04 images list R470 only.
UBUNTU18_IMAGES = [
    ("11.8", "11.8.0-cudnn8-devel-ubuntu18.04", "11.8.0-devel-ubuntu22.04", "11.6", "510.108.03"),
    ("12.0", "12.0.1-runtime-ubuntu18.04", "12.0.1-runtime-ubuntu22.04", "11.8", "520.61.05"),
]


@pytest.mark.parametrize(("cuda", "old_tag", "new_tag", "host_cuda", "driver"), UBUNTU18_IMAGES,
                         ids=[row[1] for row in UBUNTU18_IMAGES])
def test_an_ubuntu18_04_image_carries_its_own_longer_requirement_and_is_judged_by_it(
        cuda: str, old_tag: str, new_tag: str, host_cuda: str, driver: str) -> None:
    real = _real_require(f"nvidia-cuda-{old_tag.split('-')[0]}-ubuntu18.04.require")
    old = rules.image_from_ref(f"nvidia/cuda:{old_tag}")
    new = rules.image_from_ref(f"nvidia/cuda:{new_tag}")
    assert old is not None and new is not None
    assert old.env is not None and f"NVIDIA_REQUIRE_CUDA={real}" in old.env
    assert new.env is not None and f"NVIDIA_REQUIRE_CUDA={real}" not in new.env
    facts = HostFacts(cuda=host_cuda, driver=driver, gpus=(Gpu(arch="8.6", brand="geforce"),))
    assert check_container(facts, env=old.env).ok
    rejected = check_container(facts, env=new.env)
    assert not rejected.ok and f"unsatisfied condition: cuda>={cuda}" in str(rejected.error)
