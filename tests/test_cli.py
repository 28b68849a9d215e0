"""The gpuconf command: answers, exit statuses, batch mode, and one clear line on bad input."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys

import pytest

from gpuconf.cli import main
from gpuconf.compat import tables


def run(argv: list[str], stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        code = main(argv, stdout=out, stderr=err)
    finally:
        sys.stdin = old
    return code, out.getvalue(), err.getvalue()


def test_require_reports_the_exact_cli_message_and_exit_1():
    code, out, _ = run(["require", "--cuda", "12.8", "--driver", "570.133.20", "--arch", "9.0", "--brand",
                        "GeForce", "cuda>=13.0 brand=nvidia,driver>=570,driver<571"])
    assert code == 1
    assert out.splitlines()[0] == (
        "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.0, please update your "
        "driver to a newer version, or use an earlier cuda container")


def test_require_satisfied_exits_0():
    code, out, _ = run(["require", "--cuda", "12.8", "--driver", "570.133.20", "--arch", "9.0", "--brand",
                        "Nvidia", "cuda>=13.0 brand=nvidia,driver>=570,driver<571"])
    assert (code, out.startswith("satisfied")) == (0, True)


def test_require_accepts_the_nvml_integer_form_of_cuda():
    code, out, _ = run(["require", "--cuda", "12080", "--json", "cuda>=12.8"])
    assert (code, json.loads(out)) == (0, {"ok": True, "error": None})


def test_jsonl_batch_answers_one_line_per_case():
    cases = [
        {"requirements": ["cuda>=13.0"], "cuda": "12.8", "driver": "570.133.20", "arch": "9.0", "brand": "Tesla"},
        {"env": ["NVIDIA_REQUIRE_CUDA=" + tables.image_require("12.8.1").require],
         "cuda": "12.2", "driver": "535.104.05", "gpus": [{"arch": "9.0", "brand": "Nvidia"},
                                                          {"arch": "8.9", "brand": "GeForce"}]},
        {"env": ["NVIDIA_REQUIRE_CUDA=" + tables.image_require("12.8.1").require],
         "cuda": "12.2", "driver": "535.104.05", "gpus": []},
        {"requirements": ["cuda>=12.8,foo>=1"], "cuda": "12.8"},
        {"requirements": ["brand<zzz"], "cuda": "12.8"},
        {"requirements": [], "env": ["NVIDIA_VISIBLE_DEVICES=void", "NVIDIA_REQUIRE_CUDA=cuda>=99"]},
        {"requirements": ["cuda>=1"] * 33},
    ]
    code, out, err = run(["require", "--jsonl"], "\n".join(json.dumps(c) for c in cases) + "\n")
    assert (code, err) == (0, "")
    suffix = ", please update your driver to a newer version, or use an earlier cuda container"
    assert [json.loads(line) for line in out.splitlines()] == [
        {"ok": False, "error": "unsatisfied condition: cuda>=13.0" + suffix},
        {"ok": False, "error": "unsatisfied condition: cuda>=12.8" + suffix},
        {"ok": True, "error": None},
        {"ok": False, "error": "invalid expression"},
        {"ok": True, "error": None},  # brand unknown: true before the operator is read
        {"ok": True, "error": None},
        {"ok": False, "error": "input error: too many requirements"},
    ]


def test_jsonl_keeps_lines_aligned_and_exits_2_on_a_bad_line():
    code, out, err = run(["require", "--jsonl"], '{"requirements": ["cuda>=1"]}\nnot json\n[1]\n')
    lines = out.splitlines()
    assert code == 2 and len(lines) == 3
    assert json.loads(lines[0]) == {"ok": True, "error": None}
    assert json.loads(lines[1])["ok"] is None and "bad input" in json.loads(lines[1])["error"]
    assert err.count("\n") == 2 and "line 2" in err and "Traceback" not in err


def test_predict_explains_the_seed_question_in_words():
    code, out, _ = run(["predict", "--driver", "570.133.20", "--gpu", "NVIDIA H100 80GB HBM3",
                        "--image", "nvidia/cuda:13.0.0-base-ubuntu24.04"])
    assert code == 0
    assert "Verdict: RUNS" in out
    assert "forward compatibility" in out
    assert "native CUDA 12.8" in out


def test_predict_json_lists_outcomes_with_conditions():
    code, out, _ = run(["predict", "--driver", "570.133.20", "--gpu", "NVIDIA GeForce RTX 4090",
                        "--image-cuda", "13.0", "--json"])
    data = json.loads(out)
    assert code == 1 and data["verdict"] == "fails"
    assert {o["result"] for o in data["outcomes"]} == {"rejected", "cuda-error"}
    assert all(o["when"] for o in data["outcomes"])


@pytest.mark.parametrize("argv,fragment", [
    (["require", "--driver", "5x.1", "cuda>=1"], "not a driver version"),
    (["require", "--bogus"], "unrecognized arguments: --bogus"),
    (["require"], "give at least one requirement"),
    (["predict", "--driver", "570.133.20"], "say which image"),
    (["predict", "--driver", "banana", "--image-cuda", "13.0"], "not a driver version"),
    (["predict", "--driver", "570.133.20", "--image-cuda", "13.x"], "not a CUDA version"),
    (["predict", "--driver", "570.133.20", "--image-cuda", "13.0", "--mode", "magic"], "invalid choice"),
    (["predict", "--driver", "570.133.20", "--image-cuda", "13.0", "--toolkit", "new"], "not a toolkit version"),
    (["predict", "--driver", "601.10.1", "--image-cuda", "13.0"], "--driver-cuda"),
    (["predict", "--driver", "570.133.20", "--image", "pytorch/pytorch:2.5"], "--image-cuda"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_input_is_one_line_and_exit_2(argv, fragment):
    code, out, err = run(argv)
    assert code == 2
    assert fragment in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_console_script_is_installed():
    exe = shutil.which("gpuconf") or str(__import__("pathlib").Path(sys.executable).with_name("gpuconf"))
    proc = subprocess.run([exe, "require", "--cuda", "12.4", "cuda>=12.4.1"], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "unsatisfied condition: cuda>=12.4.1, please update" in proc.stdout


def test_sim_faults_lists_every_fault_with_its_check_targeting_and_parameters():
    from gpuconf.sim.profile import fault_catalog

    code, out, err = run(["sim", "faults"])
    assert (code, err) == (0, "")
    for fault in fault_catalog().values():
        assert f"{fault.id:26s} {fault.summary}\n" in out
        assert f"caught by {fault.check} ({fault.suite}), {fault.severity}\n" in out
        for p in fault.parameters:
            assert f" {p.name}: {p.type}, default " in out
    assert ("plugin_strategy: string, default mixed; one of single, mixed: the MIG strategy the device plugin "
            "runs; must differ from the pool's declared one") in out
