"""Which images a run pulls, and how the probe images are built (pure: no Docker, no cluster).

Two ways to get probes onto nodes:

* **registry mode** (``--registry R``): prebuilt images ``R/gpuconf/cuda-probe:<probe>-cuda<ver>``
  and ``R/gpuconf/nccl-probe:<probe>-cuda<ver>``, built from ``probes/*/Dockerfile``;
* **zero-registry mode** (the default): the probe sources travel in a ConfigMap and the pod
  compiles them with nvcc inside the public ``nvidia/cuda:<ver>-devel-<distro>`` image, so
  nothing has to be built or pushed; the cost is the devel image's size on first pull.

``list_images`` is what an air-gapped site mirrors: every image a full run needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuconf.compat import tables
from gpuconf.paths import project_root

__all__ = ["MIRROR_TOOLS", "Image", "ProbeImage", "build_commands", "list_images", "matrix", "mirror_commands",
           "mirror_plan", "probe_image"]

PUBLIC_BASE = "nvidia/cuda"


@dataclass(frozen=True)
class Image:
    """One image reference a run may pull, and why."""

    ref: str
    purpose: str
    digest: str | None = None

    @property
    def pinned(self) -> str:
        return f"{self.ref}@{self.digest}" if self.digest else self.ref

    def to_dict(self) -> dict[str, Any]:
        return {"image": self.ref, "digest": self.digest, "pinned": self.pinned, "purpose": self.purpose}


@dataclass(frozen=True)
class ProbeImage:
    probe: str  # cuda-probe | nccl-probe
    cuda: str
    role: str
    context: str  # the build context, relative to the repository root (probes/, with common/)
    dockerfile: str  # relative to the repository root


def _data() -> dict[str, Any]:
    return tables.load("probe_images")


def matrix() -> list[ProbeImage]:
    """Every probe build: the cuda-probe for each CUDA in the matrix, and the nccl-probe."""
    data = _data()
    def build(probe: str, cuda: str, role: str) -> ProbeImage:
        spec = data["images"][probe]
        return ProbeImage(probe, cuda, role, str(spec["context"]), str(spec["dockerfile"]))

    out = [build("cuda-probe", str(row["cuda"]), str(row["role"])) for row in data["cuda_matrix"]]
    out.append(build("nccl-probe", str(data["nccl_cuda"]), "nccl"))
    return out


def _distro() -> str:
    return str(_data()["distro"])


def devel_image(cuda: str) -> str:
    return f"{PUBLIC_BASE}:{cuda}-devel-{_distro()}"


def probe_image(probe: ProbeImage, registry: str) -> Image:
    tag = f"{_data()['probe_version']}-cuda{probe.cuda}"
    ref = f"{registry.rstrip('/')}/gpuconf/{probe.probe}:{tag}"
    digest = _data()["images"][probe.probe].get("digests", {}).get(tag)
    return Image(ref, f"{probe.probe} built with CUDA {probe.cuda} ({probe.role})", digest)


def list_images(registry: str | None = None) -> list[Image]:
    """Every image a full run pulls: the prebuilt probes with ``registry``, else the public devel
    images the zero-registry mode compiles in."""
    if registry:
        return [probe_image(p, registry) for p in matrix()]
    seen: dict[str, Image] = {}
    for p in matrix():
        ref = devel_image(p.cuda)
        prior = seen.get(ref)
        purpose = f"compile and run {p.probe} (CUDA {p.cuda}, {p.role}) in zero-registry mode"
        seen[ref] = Image(ref, f"{prior.purpose}; {purpose}" if prior else purpose)
    return list(seen.values())


def build_commands(registry: str, *, push: bool = False) -> list[list[str]]:
    """The docker commands that build (and push) every probe image of the matrix."""
    commands: list[list[str]] = []
    for p in matrix():
        image = probe_image(p, registry)
        commands.append(["docker", "build", "--build-arg", f"CUDA_VERSION={p.cuda}",
                         "--build-arg", f"BASE_DISTRO={_distro()}", "-t", image.ref,
                         "-f", str(project_root() / p.dockerfile), str(project_root() / p.context)])
        if push:
            commands.append(["docker", "push", image.ref])
    return commands


#: The copy tools ``gpuconf images mirror`` writes commands for.
MIRROR_TOOLS = ("skopeo", "crane")
#: Where an image reference without a registry host is pulled from.
DEFAULT_REGISTRY = "docker.io"


def _split(ref: str) -> tuple[str, str]:
    """``repo:tag`` as (repo, tag); a ``:`` before the last ``/`` is a registry port, not a tag."""
    slash = ref.rfind("/")
    colon = ref.rfind(":")
    return (ref[:colon], ref[colon + 1:]) if colon > slash else (ref, "latest")


def _has_host(ref: str) -> bool:
    first = ref.split("/", 1)[0]
    return "/" in ref and ("." in first or ":" in first or first == "localhost")


def mirror_plan(registry: str, source_registry: str | None = None) -> list[tuple[str, str]]:
    """(source, destination) for every image a full run pulls, copied into ``registry``.

    Without ``source_registry``: the public devel images of the zero-registry mode, from Docker Hub,
    to the same repository path under ``registry`` (``R/nvidia/cuda:<tag>``, what a containerd
    registry mirror for docker.io serves). With it: the prebuilt probe images, from there to
    ``registry`` (what ``--registry`` then names). A known digest pins the source (``repo@digest``:
    the copy is of exactly that image); the destination keeps the tag a run asks for."""
    dest_root = registry.rstrip("/")
    plan: list[tuple[str, str]] = []
    for image in list_images(source_registry):
        repo, tag = _split(image.ref)
        source_repo = repo if _has_host(repo) else f"{DEFAULT_REGISTRY}/{repo}"
        source = f"{source_repo}@{image.digest}" if image.digest else f"{source_repo}:{tag}"
        if source_registry:
            dest = f"{dest_root}{image.ref[len(source_registry.rstrip('/')):]}"
        else:
            dest = f"{dest_root}/{image.ref}"
        plan.append((source, dest))
    return plan


def mirror_commands(registry: str, *, tool: str = "skopeo", source_registry: str | None = None) -> list[list[str]]:
    """The commands that copy every image a full run pulls into ``registry`` (all platforms)."""
    if tool not in MIRROR_TOOLS:
        raise ValueError(f"unknown mirror tool {tool!r} (one of {', '.join(MIRROR_TOOLS)})")
    if tool == "skopeo":
        return [["skopeo", "copy", "--all", f"docker://{src}", f"docker://{dst}"]
                for src, dst in mirror_plan(registry, source_registry)]
    return [["crane", "copy", src, dst] for src, dst in mirror_plan(registry, source_registry)]
