"""The image matrix, `gpuconf images list|build`, and what a run pulls."""

from __future__ import annotations

import io
import json

from gpuconf import images
from gpuconf.cli import main
from gpuconf.compat import tables
from gpuconf.compat.versions import parse_cuda
from gpuconf.paths import project_root

ROOT = project_root()


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(argv, stdout=out, stderr=err), out.getvalue(), err.getvalue()


def test_the_matrix_covers_the_previous_major_the_current_majors_newest_minor_and_the_newest_cuda():
    cudas = sorted(parse_cuda(p.cuda) for p in images.matrix() if p.probe == "cuda-probe")
    confirmed = [parse_cuda(v) for v in tables.image_versions() if tables.image_require(v).confirmed]
    newest = max(confirmed)
    previous_major_newest = max(c for c in confirmed if c.major == newest.major - 1)
    assert cudas[-1] == newest  # the newest CUDA, which is also the current major's newest minor
    assert previous_major_newest in cudas


def test_every_matrix_cuda_is_an_official_image_with_a_confirmed_requirement():
    for probe in images.matrix():
        row = tables.image_require(probe.cuda)
        assert row is not None and row.confirmed, probe


def test_zero_registry_list_is_the_public_devel_images():
    code, out, err = run(["images", "list"])
    lines = out.split()
    assert code == 0 and lines
    assert all(line.startswith("nvidia/cuda:") and "-devel-" in line for line in lines)
    assert len(lines) == len(set(lines))
    assert {f"nvidia/cuda:{p.cuda}-devel-ubuntu24.04" for p in images.matrix()} == set(lines)
    assert "no known digest" in err


def test_registry_list_names_every_probe_image_and_json_says_why():
    code, out, _ = run(["images", "list", "--registry", "registry.example.com/ai/", "--json"])
    data = json.loads(out)
    assert code == 0
    refs = [d["image"] for d in data]
    assert "registry.example.com/ai/gpuconf/nccl-probe:0.1.0-cuda13.0.2" in refs
    assert sum(r.split("/")[-1].startswith("cuda-probe:") for r in refs) == len(
        [p for p in images.matrix() if p.probe == "cuda-probe"])
    assert all(d["purpose"] and d["pinned"] == d["image"] for d in data)


def test_a_known_digest_pins_the_image(monkeypatch):
    data = dict(tables.load("probe_images"))
    data["images"] = {k: dict(v) for k, v in data["images"].items()}
    data["images"]["nccl-probe"]["digests"] = {"0.1.0-cuda13.0.2": "sha256:" + "a" * 64}
    monkeypatch.setattr(images, "_data", lambda: data)
    pinned = [i.pinned for i in images.list_images("r.io")]
    assert "r.io/gpuconf/nccl-probe:0.1.0-cuda13.0.2@sha256:" + "a" * 64 in pinned


def test_build_dry_run_prints_a_build_and_push_per_image():
    code, out, _ = run(["images", "build", "--registry", "r.io", "--push", "--dry-run"])
    lines = out.splitlines()
    assert code == 0
    assert len(lines) == 2 * len(images.matrix())
    assert lines[0].startswith("docker build --build-arg CUDA_VERSION=")
    # the context is probes/ (the probe and the shared probes/common/), the Dockerfile the probe's own
    assert lines[0].endswith(f"-f {ROOT}/probes/cuda-probe/Dockerfile {ROOT}/probes")
    assert lines[1].startswith("docker push r.io/gpuconf/cuda-probe:")


def test_build_commands_use_probes_as_the_context_and_each_probes_dockerfile():
    for command, probe in zip(images.build_commands("r.io"), images.matrix(), strict=True):
        dockerfile = command[command.index("-f") + 1]
        assert dockerfile == str(ROOT / "probes" / probe.probe / "Dockerfile")
        assert command[-1] == str(ROOT / "probes")
        assert (ROOT / "probes" / "common").is_dir() and (ROOT / dockerfile).is_file()


def test_build_without_docker_is_one_line_and_exit_3(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    code, out, err = run(["images", "build", "--registry", "r.io"])
    assert (code, out) == (3, "")
    assert err.count("\n") == 1 and "docker is not on PATH" in err


def test_images_without_a_subcommand_is_a_usage_error():
    code, _, err = run(["images"])
    assert code == 2 and "required" in err


# --- gpuconf images mirror ---------------------------------------------------------------------

DEVEL = ["12.9.1", "13.0.2", "13.2.0"]  # the devel images a zero-registry run pulls (probe_images.yaml)


def test_the_matrix_cudas_are_the_devel_images_these_tests_expect():
    assert sorted({p.cuda for p in images.matrix()}) == DEVEL


def test_mirror_prints_one_skopeo_copy_per_public_devel_image_keeping_its_path():
    code, out, err = run(["images", "mirror", "--registry", "reg.example.com/ai/"])
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"skopeo copy --all docker://docker.io/nvidia/cuda:{v}-devel-ubuntu24.04 "
        f"docker://reg.example.com/ai/nvidia/cuda:{v}-devel-ubuntu24.04" for v in DEVEL]


def test_mirror_with_crane_from_a_registry_copies_the_prebuilt_probe_images():
    code, out, _ = run(["images", "mirror", "--registry", "reg.example.com/ai", "--tool", "crane",
                        "--from", "build.example.com:5000/ci"])
    assert code == 0
    assert out.splitlines() == [
        *(f"crane copy build.example.com:5000/ci/gpuconf/cuda-probe:0.1.0-cuda{v} "
          f"reg.example.com/ai/gpuconf/cuda-probe:0.1.0-cuda{v}" for v in DEVEL),
        "crane copy build.example.com:5000/ci/gpuconf/nccl-probe:0.1.0-cuda13.0.2 "
        "reg.example.com/ai/gpuconf/nccl-probe:0.1.0-cuda13.0.2"]


def test_mirror_copies_a_pinned_image_by_its_digest(monkeypatch):
    data = dict(tables.load("probe_images"))
    data["images"] = {k: dict(v) for k, v in data["images"].items()}
    data["images"]["nccl-probe"]["digests"] = {"0.1.0-cuda13.0.2": "sha256:" + "a" * 64}
    monkeypatch.setattr(images, "_data", lambda: data)
    commands = images.mirror_commands("dst.io", tool="skopeo", source_registry="src.io")
    assert commands[-1] == ["skopeo", "copy", "--all", "docker://src.io/gpuconf/nccl-probe@sha256:" + "a" * 64,
                            "docker://dst.io/gpuconf/nccl-probe:0.1.0-cuda13.0.2"]


def test_mirror_run_without_the_tool_is_one_line_and_exit_3(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    code, out, err = run(["images", "mirror", "--registry", "r.io", "--tool", "crane", "--run"])
    assert (code, out) == (3, "")
    assert err == "gpuconf images mirror: crane is not on PATH (without --run the commands are printed)\n"


def test_mirror_run_runs_every_command_with_the_tool_on_path(monkeypatch, tmp_path):
    calls = tmp_path / "calls"
    tool = tmp_path / "skopeo"
    tool.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    code, out, _ = run(["images", "mirror", "--registry", "r.io", "--run"])
    assert code == 0
    assert calls.read_text().splitlines() == [
        f"copy --all docker://docker.io/nvidia/cuda:{v}-devel-ubuntu24.04 docker://r.io/nvidia/cuda:{v}-devel-ubuntu24.04"
        for v in DEVEL]
    assert out.count("+ skopeo copy") == len(DEVEL)


def test_mirror_with_a_failing_copy_stops_and_names_it(monkeypatch, tmp_path):
    tool = tmp_path / "crane"
    tool.write_text("#!/bin/sh\nexit 1\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    code, out, err = run(["images", "mirror", "--registry", "r.io", "--tool", "crane", "--run"])
    assert code == 3 and out.count("+ crane copy") == 1
    assert err.startswith("gpuconf images mirror: failed: crane copy docker.io/nvidia/cuda:12.9.1-devel-ubuntu24.04")


def test_mirror_rejects_a_registry_with_a_scheme():
    code, _, err = run(["images", "mirror", "--registry", "https://r.io"])
    assert code == 2 and "no scheme" in err
