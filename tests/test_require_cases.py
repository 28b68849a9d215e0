"""The requirement evaluator against the worked cases of research/require-cuda.md §8 and the
semantic probe matrix of §7, whose answers come from NVIDIA's C evaluator (libnvidia-container
``dsl.c``) run on the same inputs."""

from __future__ import annotations

import pytest

from gpuconf.compat import tables
from gpuconf.compat.require import CUDA_SUFFIX, Gpu, HostFacts, check_container, evaluate

SUFFIX = CUDA_SUFFIX


def req(version: str) -> str:
    row = tables.image_require(version)
    assert row is not None, f"nvidia/cuda:{version} is missing from gpuconf/data/cuda_images.yaml"
    return row.require


def host(driver: str, cuda: str, arch: str | None = None, brand: str | None = None,
         gpus: tuple[Gpu, ...] | None = None) -> HostFacts:
    if gpus is None:
        gpus = (Gpu(arch, brand),)
    return HostFacts(cuda=cuda, driver=driver, gpus=gpus)


UNSAT = "unsatisfied condition: "

# (id, host facts, env, requirements, expected error or None)
CASES = [
    ("12.4.1 image on R550 native 12.4 runs", host("550.54.15", "12.4", "8.0", "Tesla"),
     [], ["@12.4.1"], None),
    ("12.4.1 image on R535 data-center passes through its forward-compat term",
     host("535.104.05", "12.2", "9.0", "Nvidia"), [], ["@12.4.1"], None),
    ("12.4.1 image on R535 GeForce passes (12.1-12.4 images still list geforce)",
     host("535.104.05", "12.2", "8.9", "GeForce"), [], ["@12.4.1"], None),
    ("12.4.1 image on R545 Tesla is rejected (545 is not a listed branch)",
     host("545.29.06", "12.3", "8.0", "Tesla"), [], ["@12.4.1"], UNSAT + "cuda>=12.4" + SUFFIX),
    ("12.4.1 image on R470 brand Nvidia runs", host("470.256.02", "11.4", "8.0", "Nvidia"),
     [], ["@12.4.1"], None),
    ("12.8.1 image on R535 GeForce is rejected (geforce dropped from 12.5+ images)",
     host("535.104.05", "12.2", "8.6", "GeForce"), [], ["@12.8.1"], UNSAT + "cuda>=12.8" + SUFFIX),
    ("12.8.1 image on R535 data-center runs", host("535.104.05", "12.2", "9.0", "Nvidia"),
     [], ["@12.8.1"], None),
    ("12.8.1 image on R570 GeForce runs natively", host("570.133.20", "12.8", "12.0", "GeForce"),
     [], ["@12.8.1"], None),
    ("12.8.1 image on R555 Tesla is rejected (555 not listed)",
     host("555.42.06", "12.5", "9.0", "Tesla"), [], ["@12.8.1"], UNSAT + "cuda>=12.8" + SUFFIX),
    ("12.8.1 image on R525 Tesla is rejected (525 not listed in 12.5+ images)",
     host("525.147.05", "12.0", "8.0", "Tesla"), [], ["@12.8.1"], UNSAT + "cuda>=12.8" + SUFFIX),
    ("12.9.1 image on R470 Tesla is rejected (470 dropped from 12.9 images)",
     host("470.256.02", "11.4", "8.0", "Tesla"), [], ["@12.9.1"], UNSAT + "cuda>=12.9" + SUFFIX),
    ("12.9.1 image on R570 NvidiaRTX passes through brand=nvidiartx",
     host("570.133.20", "12.8", "8.9", "NvidiaRTX"), [], ["@12.9.1"], None),
    ("12.9.1 image on R570 GeForce is rejected", host("570.133.20", "12.8", "8.9", "GeForce"),
     [], ["@12.9.1"], UNSAT + "cuda>=12.9" + SUFFIX),
    ("13.0.0 image on R580 GeForce runs natively", host("580.65.06", "13.0", "12.0", "GeForce"),
     [], ["@13.0.0"], None),
    ("13.0.0 image on R575 Tesla runs", host("575.57.08", "12.9", "9.0", "Tesla"),
     [], ["@13.0.0"], None),
    ("13.0.0 image on R570 GeForce is rejected", host("570.133.20", "12.8", "8.9", "GeForce"),
     [], ["@13.0.0"], UNSAT + "cuda>=13.0" + SUFFIX),
    ("13.0.0 image on R560 Tesla is rejected (560 not in the 13.0 list)",
     host("560.35.03", "12.6", "9.0", "Tesla"), [], ["@13.0.0"], UNSAT + "cuda>=13.0" + SUFFIX),
    ("13.0.0 image on R535 Quadro runs", host("535.261.03", "12.2", "8.6", "Quadro"),
     [], ["@13.0.0"], None),
    ("12.2.2 image on R525 GeForce runs", host("525.147.05", "12.0", "8.6", "GeForce"),
     [], ["@12.2.2"], None),
    ("11.8.0 image on R470 GeForce runs", host("470.256.02", "11.4", "8.6", "GeForce"),
     [], ["@11.8.0"], None),
    ("NVIDIA_VISIBLE_DEVICES=none makes brand terms vacuous",
     host("535.104.05", "12.2", "8.6", "GeForce"),
     ["NVIDIA_VISIBLE_DEVICES=none", "NVIDIA_REQUIRE_CUDA=@12.8.1"], [], None),
    ("every visible GPU must pass: one GeForce among H100s fails the 12.8 image on R535",
     host("535.104.05", "12.2", gpus=(Gpu("9.0", "Nvidia"), Gpu("8.9", "GeForce"))),
     [], ["@12.8.1"], UNSAT + "cuda>=12.8" + SUFFIX),
    ("a legacy CUDA_VERSION image gets cuda>=M.m with no forward-compat alternatives",
     host("535.104.05", "12.2", "8.0", "Tesla"), ["CUDA_VERSION=12.4.1"], [],
     UNSAT + "cuda>=12.4" + SUFFIX),
    ("NVIDIA_DISABLE_REQUIRE=true disables every requirement",
     host("470.256.02", "11.4", "8.6", "GeForce"),
     ["NVIDIA_REQUIRE_CUDA=@13.0.0", "NVIDIA_DISABLE_REQUIRE=true"], [], None),
    ("NVIDIA_DISABLE_REQUIRE=yes is not a Go bool, so the check still runs",
     host("470.256.02", "11.4", "8.6", "GeForce"),
     ["NVIDIA_REQUIRE_CUDA=@13.0.0", "NVIDIA_DISABLE_REQUIRE=yes"], [], UNSAT + "cuda>=13.0" + SUFFIX),
    ("an extra NVIDIA_REQUIRE_ARCH is ANDed with the CUDA requirement",
     host("550.54.15", "12.4", "8.0", "Nvidia"),
     ["NVIDIA_REQUIRE_CUDA=@12.4.1", "NVIDIA_REQUIRE_ARCH=arch>=9.0"], [], UNSAT + "arch>=9.0"),
    ("uppercase names are accepted, and the message then has no suffix",
     host("570.133.20", "12.8", "9.0", "Tesla"), [], ["CUDA>=13.0"], UNSAT + "CUDA>=13.0"),
    ("a leading space makes the first token, and so the message, empty",
     host("570.133.20", "12.8", "9.0", "Tesla"), [], [" cuda>=13.0"], UNSAT),
    ("an unknown property inside an evaluated term is an invalid expression",
     host("570.133.20", "12.8", "9.0", "Tesla"), [], ["cuda>=12.8,foo>=1"], "invalid expression"),
    ("a patch-level requirement never matches the host's major.minor",
     host("550.54.15", "12.4", "8.0", "Tesla"), [], ["cuda>=12.4.1"], UNSAT + "cuda>=12.4.1" + SUFFIX),
]


def _expand(items: list[str]) -> list[str]:
    out = []
    for item in items:
        name, sep, value = item.partition("=")
        if sep and value.startswith("@"):
            out.append(f"{name}={req(value[1:])}")
        elif item.startswith("@"):
            out.append(req(item[1:]))
        else:
            out.append(item)
    return out


@pytest.mark.parametrize("facts,env,requirements,expected", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_research_case(facts, env, requirements, expected):
    result = check_container(facts, env=_expand(env), requirements=_expand(requirements))
    assert result.error == expected
    assert result.ok is (expected is None)


MATRIX_HOST = HostFacts(cuda="12.4", driver="550.54.14", gpus=(Gpu("8.0", "Tesla"),))
OK, INVALID = None, "invalid expression"

# (requirement, host overrides, C answer: OK / UNSAT / INVALID)
MATRIX = [
    ("cuda>=12.4", {}, OK), ("cuda>=12.4.0", {}, OK), ("cuda>=12.4.1", {}, "UNSAT"),
    ("cuda=12.4.0.0", {}, OK), ("cuda>12.4", {}, "UNSAT"), ("cuda<=12.4", {}, OK),
    ("cuda>=12", {}, OK), ("cuda=12", {}, "UNSAT"), ("cuda>=12.04", {}, OK),
    ("cuda>=v12.4", {}, INVALID), ("cuda>=12.4-rc1", {}, INVALID), ("cuda>=12..4", {}, OK),
    ("cuda>=12.", {}, OK), ("cuda>=.4", {}, INVALID), ("cuda>=1.2.3.4", {}, OK),
    ("cuda>=12.4+b", {}, INVALID), ("cuda>= 12.4", {}, INVALID), ("cuda >=12.4", {}, INVALID),
    ("CUDA>=12.4", {}, OK), ("CUDA>=99", {}, "UNSAT"), ("Cuda>=99", {}, "UNSAT"),
    ("cuda==12.4", {}, INVALID), ("cuda=>12.4", {}, INVALID), ("cuda!12.4", {}, "UNSAT"),
    ("cuda!12.5", {}, OK), ("cuda<>12.5", {}, INVALID), ("cuda=<12.5", {}, INVALID),
    ("cuda>=", {}, INVALID), ("cuda", {}, INVALID), ("=12.4", {}, INVALID), ("foo>=1", {}, INVALID),
    ("foo>=1 cuda>=99", {}, INVALID), ("cuda>=99 foo>=1", {}, INVALID), ("cuda>=1 garbage", {}, OK),
    ("garbage cuda>=1", {}, INVALID), ("cuda>=99,garbage", {}, "UNSAT"),
    ("cuda>=1,garbage", {}, INVALID), ("driver>=550", {}, OK), ("driver=550", {}, "UNSAT"),
    ("driver<551", {}, OK), ("driver>=550.54.14", {}, OK), ("driver>=550.54.15", {}, "UNSAT"),
    ("driver=550.54.14.0", {}, OK), ("driver>=550.54.014", {}, OK),
    ("driver>=535.104.05", {"driver": "535.104.05"}, OK),
    ("driver=535.104.5", {"driver": "535.104.05"}, OK), ("driver<536", {"driver": "535.104.05"}, OK),
    ("brand=tesla", {}, OK), ("brand=TESLA", {}, OK), ("brand=Tesla", {}, OK),
    ("brand!=tesla", {}, "UNSAT"), ("brand!tesla", {}, "UNSAT"), ("brand>tesla", {}, INVALID),
    ("brand<zzz", {}, INVALID), ("brand=", {}, INVALID), ("brand=nvidia", {"brand": "Nvidia"}, OK),
    ("brand=geforce", {"brand": "GeForce"}, OK), ("brand=nvidiartx", {"brand": "NvidiaRTX"}, OK),
    ("arch>=8.0", {}, OK), ("arch>=8", {}, OK), ("arch=8.0", {}, OK), ("arch<9.0", {"arch": "8.9"}, OK),
    ("arch>=10.0", {"arch": "9.0"}, "UNSAT"), ("arch>=12.0", {"arch": "12.0"}, OK),
    ("", {}, OK), (" ", {}, OK), (",", {}, OK), ("cuda>=99 ,", {}, "UNSAT"), (", cuda>=99", {}, OK),
    ("cuda>=99  cuda>=1", {}, OK), (" cuda>=99", {}, "UNSAT"), ("cuda>=99 ", {}, "UNSAT"),
    ("cuda>=99,cuda>=1", {}, "UNSAT"), ("cuda>=1,cuda>=99 cuda>=2", {}, OK),
    ("brand=tesla,driver>=550,driver<551 cuda>=99", {}, OK),
    ("cuda>=99 brand=tesla,driver>=550,driver<551", {}, OK),
    ("cuda>=99999999999999999999999", {}, INVALID), ("cuda>=18446744073709551615", {}, INVALID),
    ("cuda<18446744073709551614", {}, OK),
]


@pytest.mark.parametrize("requirement,overrides,answer", MATRIX, ids=[repr(m[0]) for m in MATRIX])
def test_probe_matrix(requirement, overrides, answer):
    gpu = Gpu(overrides.get("arch", "8.0"), overrides.get("brand", "Tesla"))
    facts = HostFacts(cuda=overrides.get("cuda", "12.4"), driver=overrides.get("driver", "550.54.14"),
                      gpus=(gpu,))
    got = evaluate(requirement, facts, gpu)
    if answer == "UNSAT":
        token = requirement.split(" ", 1)[0]
        assert got == UNSAT + token + (SUFFIX if token.startswith("cuda>=") else "")
    else:
        assert got == answer
