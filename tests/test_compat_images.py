"""--compat-images: the compat suite's probe matrix chosen by CUDA version, each resolved to the
newest official nvidia/cuda image of it that gpuconf/data/cuda_images.yaml knows (so every probe's
outcome stays predictable); anything else is one line."""

from __future__ import annotations

import pytest

from gpuconf.checks.compat import Target, plan_pods, resolve_compat_images
from gpuconf.compat import rules
from gpuconf.compat.versions import parse_driver


@pytest.mark.parametrize(("text", "images"), [
    ("12.4,12.8,13.1", ["12.4.1", "12.8.2", "13.1.1"]),
    ("13.0.1", ["13.0.1"]),
    (" 12.9 , 12.9.0 ", ["12.9.1", "12.9.0"]),
    ("13.2,13.2", ["13.2.0"]),
], ids=["major.minor: the newest image of each", "a full version: that image", "spaces and both forms",
        "a repeat counts once"])
def test_versions_resolve_to_official_images(text: str, images: list[str]) -> None:
    assert resolve_compat_images(text) == images


@pytest.mark.parametrize(("text", "said"), [
    ("9.9", "no official nvidia/cuda image of CUDA 9.9 in gpuconf/data/cuda_images.yaml (known: 11.8.0,"),
    ("13.1.0", "no official nvidia/cuda image of CUDA 13.1.0"),
    ("12.4,", "give CUDA versions separated by commas, e.g. 12.4,12.8,13.1"),
    ("latest", "'latest' is not a CUDA version"),
])
def test_anything_else_is_one_line_saying_why(text: str, said: str) -> None:
    with pytest.raises(ValueError) as info:
        resolve_compat_images(text)
    assert str(info.value).startswith(said) and "\n" not in str(info.value)


def test_the_chosen_images_are_the_matrix_the_campaign_plans() -> None:
    node = rules.Node(driver=parse_driver("580.95.05"), gpu_name="NVIDIA H100 80GB HBM3", gpu_class="data-center",
                      brand="Nvidia", arch="9.0")
    target = Target("h100-0", "NVIDIA-H100-80GB-HBM3", "580.95.05", "NVIDIA H100 80GB HBM3", node)
    plan = plan_pods([target], canary_cuda="13.0.2", cudas=resolve_compat_images("12.4,12.8,13.1"))
    probed = {p.cuda for p in plan} - {"13.0.2"}
    assert probed == {"12.4.1", "12.8.2", "13.1.1"}
