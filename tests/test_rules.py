"""Outcome prediction: the seed's core question and the rules around it, as sentences."""

from __future__ import annotations

import pytest

from gpuconf.compat import tables
from gpuconf.compat.require import CUDA_SUFFIX
from gpuconf.compat.rules import Image, Mode, Node, Runtime, image_from_cuda, image_from_ref, predict
from gpuconf.compat.versions import parse_cuda, parse_driver

H100 = "NVIDIA H100 80GB HBM3"
RTX4090 = "NVIDIA GeForce RTX 4090"


def node(driver: str, gpu: str) -> Node:
    model = tables.find_gpu(gpu)
    assert model is not None, gpu
    return Node(parse_driver(driver), model.name, model.gpu_class, model.nvml_brand, model.compute_capability)


def image(ref_or_cuda: str, *, compat: bool | None = True, env: tuple[str, ...] | None = None) -> Image:
    if ":" in ref_or_cuda:
        img = image_from_ref(ref_or_cuda)
        assert img is not None
    else:
        img = image_from_cuda(parse_cuda(ref_or_cuda))
    return Image(img.cuda, img.ref, env if env is not None else img.env, compat, img.assumptions)


def rt(mode: str = "auto", toolkit: str | None = None, launcher: str = "runtime",
       strategy: str | None = None) -> Runtime:
    tk = tuple(int(p) for p in toolkit.split(".")) if toolkit else None
    return Runtime(toolkit=tk, mode=Mode(mode), launcher=launcher, device_list_strategy=strategy)


# (sentence, node, image, runtime, expected (result, rule, error code or message fragment))
CASES = [
    ("580 driver runs a 13.1 image by minor-version compatibility",
     node("580.65.06", H100), image("13.1", compat=False), rt(), ("runs", "minor-version", None)),
    ("580 driver runs a 13.1 image on a GeForce by minor-version compatibility when no compat libs ship",
     node("580.65.06", RTX4090), image("13.1", compat=False), rt("cdi"), ("runs", "minor-version", None)),
    ("with cuda-compat on a data-center GPU, 580 runs a 13.1 image through the compat libcuda",
     node("580.65.06", H100), image("13.1"), rt("jit-cdi", "1.18.0"), ("runs", "forward-compat", None)),
    ("570 driver runs a 13.0 image with cuda-compat on a data-center GPU, in every mode",
     node("570.133.20", H100), image("nvidia/cuda:13.0.0-base-ubuntu24.04"), rt(),
     ("runs", "forward-compat", None)),
    ("570 driver with a 13.0 image on a GeForce is rejected at creation in legacy mode",
     node("570.133.20", RTX4090), image("nvidia/cuda:13.0.0-base-ubuntu24.04"), rt("legacy"),
     ("rejected", "none", "requirement error: unsatisfied condition: cuda>=13.0" + CUDA_SUFFIX)),
    ("570 driver with a 13.0 image lacking cuda-compat fails with 35 in cdi mode",
     node("570.133.20", H100), image("13.0", compat=False), rt("cdi"), ("cuda-error", "none", 35)),
    ("a GeForce given compat libs fails with 804 (forward compat is data-center only)",
     node("570.133.20", RTX4090), image("nvidia/cuda:13.0.0-base-ubuntu24.04"), rt("cdi", "1.17.8"),
     ("cuda-error", "none", 804)),
    ("toolkit 1.18 with the nvidia runtime resolves auto to jit-cdi, so nothing is rejected at creation",
     node("570.133.20", RTX4090), image("nvidia/cuda:13.0.0-base-ubuntu24.04"), rt("auto", "1.18.0"),
     ("cuda-error", "none", 804)),
    ("the bare prestart hook on toolkit 1.18 still resolves auto to legacy and rejects",
     node("570.133.20", RTX4090), image("nvidia/cuda:13.0.0-base-ubuntu24.04"),
     rt("auto", "1.18.0", "hook"), ("rejected", "none", "unsatisfied condition: cuda>=13.0")),
    ("toolkit 1.17.4 injects no compat libs in legacy mode, so 570 + 13.0 passes the check and fails with 35",
     node("570.133.20", H100), image("nvidia/cuda:13.0.0-base-ubuntu24.04"), rt("legacy", "1.17.4"),
     ("cuda-error", "none", 35)),
    ("toolkit 1.13 mounts older-major compat libs on a GeForce: 804 (nvidia-container-toolkit#291)",
     node("535.104.05", RTX4090), image("nvidia/cuda:12.3.2-base-ubuntu22.04"), rt("legacy", "1.13.5"),
     ("cuda-error", "none", 804)),
    ("compat libs selected on an unsupported host branch fail with 803",
     node("545.29.06", H100), image("nvidia/cuda:12.8.1-base-ubuntu22.04"), rt("cdi", "1.18.0"),
     ("cuda-error", "none", 803)),
    ("toolkit 1.19 reads the compat library's supported branches and keeps the host libcuda on 545",
     node("545.29.06", H100), image("nvidia/cuda:12.8.1-base-ubuntu22.04"), rt("cdi", "1.19.0"),
     ("runs", "minor-version", None)),
    ("580 driver runs a 12.8 image by backward compatibility",
     node("580.65.06", RTX4090), image("nvidia/cuda:12.8.1-base-ubuntu22.04"), rt(), ("runs", "backward", None)),
    ("a legacy CUDA_VERSION-only image loses the forward-compat alternatives and is rejected on R535",
     node("535.104.05", H100), image("12.4", env=("CUDA_VERSION=12.4.1",)), rt("legacy", "1.17.8"),
     ("rejected", "none", "unsatisfied condition: cuda>=12.4" + CUDA_SUFFIX)),
    ("NVIDIA_DISABLE_REQUIRE=true lets a GeForce reach CUDA init in legacy mode, where compat fails with 804",
     node("570.133.20", RTX4090),
     image("13.0", env=("NVIDIA_REQUIRE_CUDA=cuda>=13.0", "NVIDIA_DISABLE_REQUIRE=true")),
     rt("legacy", "1.17.8"), ("cuda-error", "none", 804)),
    ("devices requested by CDI name (GPU Operator cdi-cri) skip the requirement check even on toolkit 1.17",
     node("570.133.20", RTX4090), image("nvidia/cuda:13.0.0-base-ubuntu24.04"),
     rt("auto", "1.17.8", strategy="cdi-cri"), ("cuda-error", "none", 804)),
    ("driver 470 cannot run a 12.8 image without compat: 35",
     node("470.256.02", H100), image("12.8", compat=False), rt("cdi"), ("cuda-error", "none", 35)),
]


@pytest.mark.parametrize("n,img,runtime,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_prediction(n, img, runtime, expected):
    p = predict(n, img, runtime)
    assert len(p.outcomes) == 1, [o.to_dict() for o in p.outcomes]
    o = p.outcomes[0]
    result, rule, err = expected
    assert (o.result, o.rule) == (result, rule)
    if isinstance(err, int):
        assert o.error_code == err
        assert o.error_name == tables.cuda_error(err).name
        assert o.error_message == tables.cuda_error(err).message
    elif err is not None:
        assert err in o.error_message
        assert "prestart hook" in o.seen
    else:
        assert o.error_message is None
    assert o.why, "every outcome explains itself"


def test_a_13_1_only_api_on_580_fails_with_36():
    p = predict(node("580.65.06", H100), image("13.1", compat=False), rt("cdi"))
    (o,) = p.outcomes
    assert any("cudaErrorCallRequiresNewerDriver (36)" in c for c in o.caveats)
    assert any("cudaErrorUnsupportedPtxVersion (222)" in c for c in o.caveats)


def test_unknown_toolkit_and_mode_give_every_possible_outcome_with_its_condition():
    p = predict(node("570.133.20", RTX4090), image("nvidia/cuda:13.0.0-base-ubuntu24.04"), rt())
    assert p.verdict == "fails"
    by_result = {o.result: o for o in p.outcomes}
    assert set(by_result) == {"rejected", "cuda-error"}
    assert "legacy" in by_result["rejected"].conditions[0][0]
    assert "jit-cdi" in by_result["cuda-error"].conditions[0][0]
    assert by_result["cuda-error"].error_code == 804


def test_an_unknown_gpu_is_judged_per_class_not_guessed():
    n = Node(parse_driver("570.133.20"))
    p = predict(n, image("nvidia/cuda:13.0.0-base-ubuntu24.04"), rt("cdi", "1.18.0"))
    assert p.verdict == "depends"
    runs = [o for o in p.outcomes if o.result == "runs"]
    assert runs and all("data-center" in " ".join(c) for c in runs[0].conditions)
    assert {o.error_code for o in p.outcomes if o.result != "runs"} == {804}


def test_unknown_cuda_compat_is_a_dimension():
    p = predict(node("570.133.20", H100), image("13.0", compat=None), rt("cdi", "1.18.0"))
    assert {(o.result, o.error_code) for o in p.outcomes} == {("runs", None), ("cuda-error", 35)}


def test_an_image_whose_requirement_is_unknown_shows_both_results_of_the_check():
    n = node("570.133.20", H100)
    p = predict(n, Image(parse_cuda("13.0"), env=None, compat=False), rt("legacy", "1.17.8"))
    assert {o.result for o in p.outcomes} == {"rejected", "cuda-error"}


@pytest.mark.parametrize("branch,cuda", [
    (470, "11.4"), (525, "12.0"), (535, "12.2"), (545, "12.3"), (550, "12.4"), (555, "12.5"), (560, "12.6"),
    (565, "12.7"), (570, "12.8"), (575, "12.9"), (580, "13.0"), (590, "13.1"),
])
def test_native_cuda_per_branch_matches_the_domain_brief(branch, cuda):
    assert tables.native_cuda(parse_driver(f"{branch}.1.1")) == parse_cuda(cuda)


@pytest.mark.parametrize("major,driver", [(11, "450.80.02"), (12, "525.60.13"), (13, "580.65.06")])
def test_minor_version_baselines(major, driver):
    assert tables.minor_version_baseline(major) == parse_driver(driver)


def test_an_unconfirmed_image_requirement_is_stated_as_an_assumption():
    unconfirmed = [v for v in tables.image_versions() if not tables.image_require(v).confirmed]
    assert unconfirmed, "the data has no unconfirmed image row to test with"
    img = image_from_ref(f"nvidia/cuda:{unconfirmed[0]}-base-ubuntu24.04")
    assert any("unconfirmed" in a for a in img.assumptions)
    confirmed = image_from_ref("nvidia/cuda:13.0.0-base-ubuntu24.04")
    assert confirmed.assumptions == ()
