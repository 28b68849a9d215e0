"""The knowledge tables under ``gpuconf/data``, loaded once and exposed as plain lookups.

Each YAML file names its sources; a new driver branch, image or GPU is a data change, not a
code change. Loading is the only I/O the compatibility engine does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import Any

import yaml

from gpuconf.compat.versions import CudaVersion, DriverVersion, parse_cuda, parse_driver

__all__ = [
    "Branch",
    "CudaError",
    "GpuModel",
    "ImageRequire",
    "branch",
    "CompatPackage",
    "compat_package",
    "cuda_error",
    "find_gpu",
    "image_require",
    "load",
    "minor_version_baseline",
    "native_cuda",
    "branch_for_cuda",
]


@cache
def load(name: str) -> dict[str, Any]:
    """One data file, parsed (``load("driver_branches")``)."""
    text = resources.files("gpuconf.data").joinpath(f"{name}.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError(f"gpuconf/data/{name}.yaml is not a mapping")
    return data


# --- driver branches -----------------------------------------------------------------------


@dataclass(frozen=True)
class Branch:
    branch: int
    cuda: CudaVersion
    kind: str
    forward_compat: bool


@cache
def _branches() -> dict[int, Branch]:
    return {
        int(row["branch"]): Branch(int(row["branch"]), parse_cuda(str(row["cuda"])),
                                   str(row.get("kind", "")), bool(row.get("forward_compat", False)))
        for row in load("driver_branches")["branches"]
    }


def branch(number: int) -> Branch | None:
    return _branches().get(number)


def native_cuda(driver: DriverVersion) -> CudaVersion | None:
    """The CUDA version a driver supports natively (nvidia-smi's "CUDA Version"), by branch."""
    row = branch(driver.branch)
    return row.cuda if row else None


def branch_for_cuda(cuda: CudaVersion) -> int | None:
    """The driver branch that ships with a CUDA major.minor (whose cuda-compat carries it)."""
    want = cuda.major_minor
    matches = [b.branch for b in _branches().values() if b.cuda == want]
    return min(matches) if matches else None


def minor_version_baseline(major: int) -> DriverVersion | None:
    """The minimum driver for CUDA minor-version compatibility within ``major``."""
    value = load("toolkits").get("baselines", {}).get(str(major))
    return parse_driver(str(value)) if value else None


@dataclass(frozen=True)
class CompatPackage:
    """``cuda-compat-<major>-<minor>``: which driver branch its libcuda comes from, and the host
    branches on which NVIDIA supports forward compatibility with it."""

    cuda: CudaVersion
    built_from_branch: int | None
    host_branches: frozenset[int]


def compat_package(cuda: CudaVersion) -> CompatPackage | None:
    for row in load("forward_compat").get("compat", []):
        version = parse_cuda(str(row["cuda_major_minor"]))
        if version == cuda.major_minor:
            built = row.get("built_from_branch")
            return CompatPackage(version, int(built) if built is not None else branch_for_cuda(version),
                                 frozenset(int(b) for b in row.get("host_branches", [])))
    return None


# --- official nvidia/cuda images -----------------------------------------------------------


@dataclass(frozen=True)
class ImageRequire:
    cuda: str
    require: str
    cuda_version_env: str
    confirmed: bool
    #: distro (``ubuntu18.04``) -> the NVIDIA_REQUIRE_CUDA its images carry where it differs
    distros: Mapping[str, str] = field(default_factory=dict)


@cache
def _images() -> dict[str, ImageRequire]:
    data = load("cuda_images")
    orders = data["brand_orders"]
    out = {}
    for row in data["images"]:
        brands = orders[row["brand_order"]]
        terms = [str(row["head"])] + [
            f"brand={b},driver>={n},driver<{int(n) + 1}" for n in row["branches"] for b in brands
        ]
        cuda = str(row["cuda"])
        out[cuda] = ImageRequire(cuda, " ".join(terms), str(row.get("cuda_version_env", cuda)),
                                 bool(row.get("confirmed", True)),
                                 {str(d): str(v["require"]) for d, v in (row.get("distros") or {}).items()})
    return out


def image_require(cuda: str, distro: str | None = None) -> ImageRequire | None:
    """NVIDIA_REQUIRE_CUDA of ``nvidia/cuda:<cuda>-*`` (full version, e.g. ``12.8.1``), as the images
    of ``distro`` (``ubuntu18.04``) carry it where they differ from the version's other images."""
    row = _images().get(cuda)
    if row is not None and distro is not None and distro in row.distros:
        return replace(row, require=row.distros[distro])
    return row


def image_versions() -> list[str]:
    return sorted(_images(), key=parse_cuda)


# --- GPUs ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuModel:
    name: str
    gfd_product: str
    architecture: str
    compute_capability: str
    memory_mib: int | None
    gpu_class: str
    nvml_brand: str
    mig_capable: bool


def _norm(text: str) -> str:
    return " ".join(text.replace("-", " ").replace("_", " ").lower().split())


@cache
def _gpus() -> dict[str, GpuModel]:
    index: dict[str, GpuModel] = {}
    for row in load("gpus")["gpus"]:
        model = GpuModel(
            name=row["name"], gfd_product=row.get("gfd_product", row["name"].replace(" ", "-")),
            architecture=row.get("architecture", "unknown"),
            compute_capability=str(row["compute_capability"]),
            memory_mib=row.get("memory_mib"), gpu_class=row["class"],
            nvml_brand=row["nvml_brand"], mig_capable=bool(row.get("mig_capable", False)),
        )
        for key in (row["name"], model.gfd_product, *row.get("aliases", [])):
            index.setdefault(_norm(key), model)
    return index


#: What GFD appends to the product label: ``-SHARED`` (time-slicing, MPS) after ``-MIG-<profile>``
#: (strategy single) or ``-MIG-INVALID`` (a layout single cannot express); the model is what precedes.
_GFD_SUFFIX = re.compile(r"(?:-MIG-.+|-SHARED)$", re.I)


def find_gpu(name: str) -> GpuModel | None:
    """A GPU by product name as nvidia-smi or GFD print it (GFD's ``-MIG-...`` and ``-SHARED``
    suffixes cut off: ``NVIDIA-A100-SXM4-80GB-MIG-INVALID`` is an A100-SXM4-80GB), or by a short
    alias ("H100"). None: not in gpus.yaml, i.e. unknown hardware (the run's coverage counts it so,
    gpuconf/plugin/fleet.py)."""
    gpu = _gpus().get(_norm(name))
    if gpu is None and (base := _GFD_SUFFIX.sub("", name)) != name:
        gpu = _gpus().get(_norm(base))
    return gpu


def gpu_names() -> list[str]:
    return sorted({g.name for g in _gpus().values()})


# --- CUDA errors ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CudaError:
    code: int
    name: str
    message: str

    def __str__(self) -> str:
        return f"{self.name} ({self.code}): {self.message}"


@cache
def _errors() -> dict[int, CudaError]:
    return {int(r["code"]): CudaError(int(r["code"]), r["name"], r["message"])
            for r in load("cuda_errors")["errors"]}


def cuda_error(code: int) -> CudaError:
    return _errors()[code]


# --- NCCL all-reduce floors -------------------------------------------------------------------


@dataclass(frozen=True)
class NcclFloor:
    """A busbw floor (GB/s, messages of 1 GiB and more): ``figure_gbps`` published, accepted down to
    ``minimum_gbps``; ``transport`` is what NCCL must report for the figure to apply."""

    key: str  # what it is for, in words ("8 x NVIDIA H100 80GB HBM3 over nvswitch, nvls")
    figure_gbps: float
    tolerance: float
    transport: str
    source: str
    gdr: bool = False

    @property
    def minimum_gbps(self) -> float:
        return self.figure_gbps * (1 - self.tolerance)


def intra_node_floor(gpu: str, gpus: int, fabric: str, algorithm: str) -> NcclFloor | None:
    """The floor of one node's all-GPU all-reduce, or None when the hardware is not in the data."""
    model = find_gpu(gpu)
    name = model.name if model is not None else gpu
    for row in load("nccl_floors")["intra_node"]:
        if (row["gpu"], row["gpus"], row["fabric"], row["algorithm"]) == (name, gpus, fabric, algorithm):
            return NcclFloor(f"{gpus} x {name} over {fabric}, {algorithm}", float(row["figure_gbps"]),
                             float(row["tolerance"]), str(row["transport"]), str(row["source"]))
    return None


def inter_node_floor(nic_gbps: int, nics: int) -> NcclFloor | None:
    """The floor of an all-reduce across nodes that each contribute ``nics`` ports of ``nic_gbps``."""
    for row in load("nccl_floors")["inter_node"]:
        if int(row["nic_gbps"]) == nic_gbps:
            return NcclFloor(f"{nics} x {row['nic']} {nic_gbps}G per node", float(row["figure_gbps"]) * nics,
                             float(row["tolerance"]), str(row["transport"]), str(row["source"]), bool(row["gdr"]))
    return None
