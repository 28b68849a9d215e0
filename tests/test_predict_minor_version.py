"""A cuda>=13.1 image on a 580 (CUDA 13.0) driver, the case issue 16 asked about: predict says it
runs by minor-version compatibility where the requirement is not checked, that newer APIs (36) and
PTX JIT (222) are the exceptions, and that cuda-compat on a GeForce fails with 804;
--uses-new-apis and --ptx-jit turn the caveats into the verdict. The diagnosis of the requirement
error says the same, for both libnvidia-container message formats."""

from __future__ import annotations

import io
import json

from gpuconf.cli import main
from gpuconf.compat import tables
from gpuconf.compat.rules import Image, Mode, Node, Runtime, predict
from gpuconf.compat.versions import parse_cuda, parse_driver
from gpuconf.diagnose import diagnose


def h100_580() -> Node:
    model = tables.find_gpu("NVIDIA H100 80GB HBM3")
    assert model is not None
    return Node(parse_driver("580.65.06"), model.name, model.gpu_class, model.nvml_brand, model.compute_capability)


def only(mode: str, **image: bool) -> tuple[str, str, int | None, str | None]:
    p = predict(h100_580(), Image(parse_cuda("13.1"), env=("NVIDIA_REQUIRE_CUDA=cuda>=13.1",), compat=False, **image),
                Runtime(toolkit=(1, 18, 0), mode=Mode(mode)))
    (o,) = p.outcomes
    return o.result, o.rule, o.error_code, o.stage


def test_the_caveats_become_the_verdict():
    assert only("cdi") == ("runs", "minor-version", None, None)
    assert only("cdi", uses_new_apis=True) == ("cuda-error", "minor-version", 36, "a CUDA call")
    assert only("cdi", ptx_jit=True) == ("cuda-error", "minor-version", 222, "kernel load")
    # the legacy check rejects before any of that matters
    assert only("legacy", uses_new_apis=True)[:2] == ("rejected", "none")


def test_new_apis_do_not_matter_where_the_driver_is_new_enough():
    p = predict(h100_580(), Image(parse_cuda("13.0"), compat=False, uses_new_apis=True, ptx_jit=True),
                Runtime(toolkit=(1, 18, 0), mode=Mode("cdi")))
    assert [(o.result, o.rule) for o in p.outcomes] == [("runs", "backward")]


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(argv, stdout=out, stderr=err), out.getvalue(), err.getvalue()


def test_cli_words_and_verdicts():
    base = ["predict", "--driver", "580.65.06", "--image-cuda", "13.1", "--gpu-class", "consumer",
            "--brand", "GeForce", "--mode", "cdi", "--toolkit", "1.18.0"]
    code, out, _ = run(base + ["--compat", "no"])
    assert code == 0 and "Verdict: RUNS" in out and "minor-version compatibility" in out
    assert "(36)" in out and "(222)" in out and "--uses-new-apis makes this the verdict" in out
    code, out, _ = run(base + ["--compat", "no", "--uses-new-apis"])
    assert code == 1 and "Verdict: FAILS" in out and "fails at a CUDA call (minor-version compatibility)" in out
    assert "cudaErrorCallRequiresNewerDriver (36)" in out and "older APIs work" in out
    code, out, _ = run(base + ["--compat", "no", "--ptx-jit", "--json"])
    doc = json.loads(out)
    assert code == 1 and doc["verdict"] == "fails"
    assert [(o["stage"], o["error"]["code"]) for o in doc["outcomes"]] == [("kernel load", 222)]
    # with cuda-compat on a GeForce: 804 at CUDA init, whatever the program calls
    code, out, _ = run(base + ["--compat", "yes", "--uses-new-apis"])
    assert code == 1 and "cudaErrorCompatNotSupportedOnDevice (804)" in out


def test_the_diagnosis_explains_minor_version_compatibility_for_both_formats():
    for text in ("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.1, please update your "
                 "driver to a newer version, or use an earlier cuda container",
                 "nvidia-container-cli: requirement error: unsatisfied condition: cuda >= 13.1"):
        (d,) = diagnose(text)
        assert d.category == "requirement-unsatisfied" and d.facts["required_cuda"] == "13.1"
        words = d.explanation
        assert "minor-version compatibility" in words and "(36)" in words and "(222)" in words
        assert "(804)" in words and "(35)" in words
        assert "--uses-new-apis" in d.remediation
