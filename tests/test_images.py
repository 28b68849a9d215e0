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
