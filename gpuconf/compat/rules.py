"""The three CUDA compatibility rules and outcome prediction.

``predict`` answers the question a platform engineer asks before scheduling an image on a node:
will it run, and if not, where does it fail and with what message? The answer depends on:

* the driver (its branch's native CUDA, and the minor-version baselines);
* the image's CUDA version, its ``NVIDIA_REQUIRE_CUDA`` and whether it carries cuda-compat;
* the GPU (forward compatibility is for data-center parts only);
* the container toolkit: which runtime mode it runs (only ``legacy`` checks requirements, and
  since toolkit 1.18 ``auto`` means ``jit-cdi`` for the ``nvidia`` runtime), and which rule
  decides whether the image's compat libcuda replaces the host's.

Rules (domain.md §2, research/require-cuda.md §2, §10):

1. **backward**: the driver's native CUDA >= the image's → runs.
2. **minor-version**: same CUDA major and driver >= that major's baseline → runs, except PTX
   that needs JIT (222) and APIs newer than the driver (36).
3. **forward-compat**: the image's cuda-compat libcuda is selected, the GPU is data-center and
   the host branch is supported by that compat package → runs. Selected on a consumer GPU →
   804; on an unsupported host branch → 803. Not selected across majors → 35 at CUDA init.

Whatever the input leaves open (toolkit version, mode, GPU class, whether the image has
cuda-compat) becomes a dimension: ``predict`` enumerates every possibility and returns the
distinct outcomes with the conditions under which each happens, never a silent guess.
"""

from __future__ import annotations

import enum
import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from gpuconf.compat import tables
from gpuconf.compat.require import CLI_PREFIX, Gpu, HostFacts, check_container
from gpuconf.compat.versions import CudaVersion, DriverVersion, VersionError, parse_cuda

__all__ = [
    "Image",
    "Mode",
    "Node",
    "Outcome",
    "Prediction",
    "Runtime",
    "Scenario",
    "image_from_ref",
    "outcome",
    "predict",
    "resolve_modes",
]


class Mode(enum.Enum):
    LEGACY = "legacy"
    CDI = "cdi"
    JIT_CDI = "jit-cdi"
    AUTO = "auto"


GPU_CLASSES = ("data-center", "workstation", "consumer")
#: A representative NVML brand per class, used only when the GPU is unknown.
_CLASS_BRAND = {"data-center": "Nvidia", "workstation": "NvidiaRTX", "consumer": "GeForce"}


@dataclass(frozen=True)
class Node:
    driver: DriverVersion
    gpu_name: str | None = None
    gpu_class: str | None = None  # data-center | workstation | consumer, None = unknown
    brand: str | None = None  # NVML brand as libnvidia-container prints it
    arch: str | None = None  # compute capability
    driver_cuda: CudaVersion | None = None  # native CUDA, when the branch is not in the table


@dataclass(frozen=True)
class Image:
    cuda: CudaVersion
    ref: str | None = None
    #: The container env the hook reads (NVIDIA_REQUIRE_CUDA, CUDA_VERSION...); None = unknown.
    env: tuple[str, ...] | None = None
    compat: bool | None = None  # carries /usr/local/cuda/compat (cuda-compat), None = unknown
    assumptions: tuple[str, ...] = ()
    #: The program calls CUDA APIs introduced after the driver's native CUDA (e.g. a 13.1 API on a
    #: 13.0 driver): under minor-version compatibility that call fails with 36, not just a caveat.
    uses_new_apis: bool = False
    #: The program ships PTX only for this GPU (no SASS), so the driver must JIT it: PTX from a
    #: newer toolkit than the driver's fails with 222 under minor-version compatibility.
    ptx_jit: bool = False


@dataclass(frozen=True)
class Runtime:
    toolkit: tuple[int, ...] | None = None
    mode: Mode = Mode.AUTO
    #: "runtime" (the nvidia RuntimeClass / nvidia-container-runtime) or "hook" (the bare
    #: prestart hook, e.g. CRI-O's OCI hook or docker --gpus): they resolve "auto" differently.
    launcher: str = "runtime"
    #: The device plugin's deviceListStrategy: with cdi-annotations / cdi-cri every device is
    #: requested by its CDI name, so "auto" resolves to cdi on every toolkit (no requirement
    #: check). None = unknown, treated as the plugin's default (envvar).
    device_list_strategy: str | None = None


@dataclass(frozen=True)
class Scenario:
    """Every open question answered: one concrete world in which to apply the rules."""

    node: Node
    image: Image
    mode: Mode  # effective: legacy, cdi or jit-cdi
    compat_rule: str  # none | mount | newer | note: how the image's compat libcuda is chosen
    compat: bool
    gpu_class: str
    brand: str | None
    require_ok: bool | None = None  # only when the image's NVIDIA_REQUIRE_CUDA is unknown
    conditions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Outcome:
    result: str  # runs | rejected | cuda-error
    rule: str  # backward | minor-version | forward-compat | none
    stage: str | None  # None when it runs; "container creation", "CUDA init", "a CUDA call", "kernel load"
    error_code: int | None = None
    error_name: str | None = None
    error_message: str | None = None
    seen: str = ""  # what the user sees, in words
    libcuda: str = "host"
    caveats: tuple[str, ...] = ()
    why: tuple[str, ...] = ()
    conditions: tuple[tuple[str, ...], ...] = ()

    def key(self) -> tuple[Any, ...]:
        return (self.result, self.rule, self.stage, self.error_code, self.error_message, self.libcuda)

    def to_dict(self) -> dict[str, Any]:
        return {
            "result": self.result, "rule": self.rule, "stage": self.stage,
            "error": None if self.error_message is None else {
                "code": self.error_code, "name": self.error_name, "message": self.error_message},
            "seen": self.seen, "libcuda": self.libcuda, "caveats": list(self.caveats),
            "why": list(self.why), "when": [list(c) for c in self.conditions],
        }


@dataclass(frozen=True)
class Prediction:
    node: Node
    image: Image
    runtime: Runtime
    outcomes: tuple[Outcome, ...]
    facts: tuple[str, ...] = ()
    assumptions: tuple[str, ...] = field(default=())

    @property
    def verdict(self) -> str:
        results = {o.result for o in self.outcomes}
        if results == {"runs"}:
            return "runs"
        if "runs" in results:
            return "depends"
        return "fails"

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "node": {"driver": str(self.node.driver), "gpu": self.node.gpu_name,
                     "gpu_class": self.node.gpu_class, "brand": self.node.brand, "arch": self.node.arch,
                     "native_cuda": str(native_cuda(self.node))},
            "image": {"ref": self.image.ref, "cuda": str(self.image.cuda),
                      "env": list(self.image.env) if self.image.env is not None else None,
                      "compat": self.image.compat},
            "runtime": {"toolkit": ".".join(map(str, self.runtime.toolkit)) if self.runtime.toolkit
                        else None, "mode": self.runtime.mode.value, "launcher": self.runtime.launcher,
                        "device_list_strategy": self.runtime.device_list_strategy},
            "facts": list(self.facts), "assumptions": list(self.assumptions),
            "outcomes": [o.to_dict() for o in self.outcomes],
        }


# --- inputs --------------------------------------------------------------------------------

_IMAGE_REF = re.compile(r"^(?:.*/)?cuda:(?P<ver>\d+\.\d+(?:\.\d+)?)(?:-(?P<rest>.*))?$")


def image_from_ref(ref: str) -> Image | None:
    """``nvidia/cuda:13.0.0-base-ubuntu24.04`` → the official image's CUDA, env and compat."""
    match = _IMAGE_REF.match(ref.strip())
    if not match or "nvidia/cuda" not in ref and not ref.startswith("cuda:"):
        return None
    version = match.group("ver")
    # The tag's last part is the distro (11.8.0-cudnn8-devel-ubuntu18.04): some distros' images
    # carry a different NVIDIA_REQUIRE_CUDA (gpuconf/data/cuda_images.yaml ``distros``).
    distro = (match.group("rest") or "").rsplit("-", 1)[-1] or None
    row = tables.image_require(version, distro)
    cuda = parse_cuda(version)
    if row is None:
        return Image(cuda=cuda, ref=ref, env=None, compat=True, assumptions=(
            f"NVIDIA_REQUIRE_CUDA of {ref} is not in gpuconf/data/cuda_images.yaml: both results of "
            "the requirement check are shown (pass --require to settle it)",))
    notes = () if row.confirmed else (
        f"NVIDIA_REQUIRE_CUDA of nvidia/cuda:{version} comes from an unconfirmed source (see "
        "gpuconf/data/cuda_images.yaml); pass --require with the image's real value to be sure",)
    return Image(cuda=cuda, ref=ref, compat=True, assumptions=notes,
                 env=(f"NVIDIA_REQUIRE_CUDA={row.require}", f"CUDA_VERSION={row.cuda_version_env}"))


def image_from_cuda(cuda: CudaVersion) -> Image:
    """An image known only by its CUDA version: assume it is built on the official base."""
    candidates = [v for v in tables.image_versions() if parse_cuda(v).major_minor == cuda.major_minor]
    if len(cuda.parts) >= 3 and str(cuda) in candidates:
        candidates = [str(cuda)]
    if not candidates:
        return Image(cuda=cuda, env=None, compat=True, assumptions=(
            f"image assumed built on the official nvidia/cuda:{cuda}.x base (with cuda-compat); its "
            "NVIDIA_REQUIRE_CUDA is not in the data, so both results of the requirement check are shown",))
    base = candidates[-1]
    image = image_from_ref(f"nvidia/cuda:{base}-base")
    assert image is not None
    return replace(image, cuda=cuda, ref=None, assumptions=(
        f"image assumed built on the official nvidia/cuda:{base} base, with its NVIDIA_REQUIRE_CUDA and "
        "cuda-compat unless --require / --compat say otherwise", *image.assumptions))


def native_cuda(node: Node) -> CudaVersion | None:
    return node.driver_cuda or tables.native_cuda(node.driver)


# --- scenarios -----------------------------------------------------------------------------


def resolve_modes(runtime: Runtime) -> list[tuple[Mode, str]]:
    """The effective runtime modes ``runtime`` may run in, each with why: one when the toolkit
    version (or an explicit mode) settles it, legacy and jit-cdi when it does not."""
    if runtime.mode is not Mode.AUTO:
        return [(runtime.mode, f"runtime mode {runtime.mode.value}")]
    if runtime.device_list_strategy in ("cdi-annotations", "cdi-cri"):
        return [(Mode.CDI, f"devices are requested by CDI name (deviceListStrategy "
                           f"{runtime.device_list_strategy}), so the container is set up in cdi mode")]
    tk = runtime.toolkit
    if tk is not None:
        if tk < (1, 18) or runtime.launcher == "hook":
            why = "toolkit < 1.18" if tk < (1, 18) else "the bare prestart hook"
            return [(Mode.LEGACY, f"mode auto resolves to legacy ({why})")]
        return [(Mode.JIT_CDI, "mode auto resolves to jit-cdi (toolkit >= 1.18, nvidia runtime)")]
    if runtime.launcher == "hook":
        return [(Mode.LEGACY, "mode auto resolves to legacy (the bare prestart hook)")]
    return [(Mode.LEGACY, "toolkit <= 1.17.x or mode = \"legacy\" (requirements are checked)"),
            (Mode.JIT_CDI, "toolkit >= 1.18 with mode auto, or mode cdi/jit-cdi (requirements "
                           "are not checked)")]


def _compat_rule(mode: Mode, toolkit: tuple[int, ...] | None) -> str:
    """How the image's /usr/local/cuda/compat libcuda is chosen (research note §10.4)."""
    if toolkit is None:
        return "newer"
    if mode is Mode.LEGACY:
        if toolkit < (1, 17, 4):
            return "mount"
        if toolkit < (1, 17, 5):
            return "none"
        return "newer"
    if toolkit < (1, 17, 5):
        return "none"
    if toolkit < (1, 19):
        return "newer"
    return "note"


def scenarios(node: Node, image: Image, runtime: Runtime) -> Iterable[Scenario]:
    classes = [node.gpu_class] if node.gpu_class else list(GPU_CLASSES)
    compat_options = [image.compat] if image.compat is not None else [True, False]
    for (mode, mode_why), gpu_class, compat in itertools.product(resolve_modes(runtime), classes, compat_options):
        brand = node.brand or (_CLASS_BRAND[gpu_class] if not node.gpu_class else None)
        conditions = [mode_why]
        if not node.gpu_class:
            conditions.append(f"if the GPU is {gpu_class} (brand {brand})")
        if image.compat is None:
            conditions.append("if the image carries cuda-compat" if compat else
                              "if the image has no cuda-compat")
        rule = _compat_rule(mode, runtime.toolkit)
        base = Scenario(node, image, mode, rule, compat, gpu_class, brand, None, tuple(conditions))
        if mode is Mode.LEGACY and image.env is None:
            yield replace(base, require_ok=True,
                          conditions=(*conditions, "if the image's NVIDIA_REQUIRE_CUDA accepts this node"))
            yield replace(base, require_ok=False,
                          conditions=(*conditions, "if the image's NVIDIA_REQUIRE_CUDA rejects this node"))
        else:
            yield base


# --- one scenario → one outcome ------------------------------------------------------------


def _err(code: int) -> tables.CudaError:
    return tables.cuda_error(code)


def _cuda_error(code: int, rule: str, seen: str, why: list[str], stage: str = "CUDA init", **kw: Any) -> Outcome:
    err = _err(code)
    return Outcome("cuda-error", rule, stage, err.code, err.name, err.message,
                   seen=seen.format(err=err), why=tuple(why), **kw)


def outcome(s: Scenario) -> Outcome:
    node, image = s.node, s.image
    native = native_cuda(node)
    if native is None:
        raise VersionError(f"driver branch {node.driver.branch} is not in gpuconf/data/driver_branches.yaml; "
                           "give its native CUDA (nvidia-smi's 'CUDA Version') with --driver-cuda")
    want = image.cuda.major_minor
    branch = node.driver.branch
    why = [f"driver {node.driver} (branch {branch}) supports CUDA {native} natively; the image needs "
           f"CUDA {want}"]

    # 1. Container creation: only the legacy path evaluates NVIDIA_REQUIRE_*.
    if s.mode is Mode.LEGACY:
        if image.env is not None:
            facts = HostFacts(cuda=f"{native.major}.{native.minor}", driver=str(node.driver),
                              gpus=(Gpu(node.arch, s.brand),))
            check = check_container(facts, env=image.env)
            rejected, message = (not check.ok), check.message
        else:
            rejected = s.require_ok is False
            message = (CLI_PREFIX + f"unsatisfied condition: cuda>={want}, please update your driver to a "
                       "newer version, or use an earlier cuda container") if rejected else None
        if rejected:
            why.append("legacy mode: nvidia-container-cli evaluates the image's NVIDIA_REQUIRE_* at "
                       "container creation and this node does not satisfy it")
            return Outcome(
                "rejected", "none", "container creation", None, None, message,
                seen="the container is never started: the pod shows RunContainerError/StartError and an "
                     f"event 'failed to create containerd task: ... error running prestart hook #0 ... "
                     f"{message}'", why=tuple(why))
        why.append("legacy mode: the requirement check at container creation passes")
    else:
        why.append(f"{s.mode.value} mode: NVIDIA_REQUIRE_* is not checked, the container starts")

    # 2. Which libcuda the process loads: the host's, or the image's cuda-compat one.
    package = tables.compat_package(want)
    compat_branch = package.built_from_branch if package else tables.branch_for_cuda(want)
    used = False
    if s.compat and compat_branch is not None:
        used = {
            "none": False,
            "mount": compat_branch != branch,
            "newer": compat_branch > branch,
            "note": compat_branch > branch and (package is None or branch in package.host_branches),
        }[s.compat_rule]
        if used:
            why.append(f"the image's cuda-compat libcuda (branch {compat_branch}) replaces the host's "
                       f"(branch {branch}) ({_RULE_TEXT[s.compat_rule]})")
        else:
            why.append(f"the image's cuda-compat libcuda (branch {compat_branch}) is not used "
                       f"({_RULE_TEXT[s.compat_rule]})")
    elif not s.compat:
        why.append("the image carries no cuda-compat, so the host libcuda is used")

    if used:
        libcuda = f"/usr/local/cuda/compat/libcuda.so.{compat_branch}.*"
        if compat_branch is not None and compat_branch < branch:
            why.append("an older compat libcuda over a newer kernel driver is an unsupported combination")
            return _cuda_error(803, "none", _SEEN_INIT, why, libcuda=libcuda)
        if s.gpu_class != "data-center":
            why.append(f"forward compatibility is supported on data-center GPUs only; this GPU is "
                       f"{s.gpu_class}" + (" (select NGC Server Ready RTX SKUs are the exception)"
                                           if s.gpu_class == "workstation" else ""))
            return _cuda_error(804, "none", _SEEN_INIT, why, libcuda=libcuda)
        if package is not None and branch not in package.host_branches:
            why.append(f"cuda-compat {want} does not support host branch {branch} (supported: "
                       f"{', '.join(map(str, sorted(package.host_branches))) or 'none'})")
            return _cuda_error(803, "none", _SEEN_INIT, why, libcuda=libcuda)
        why.append(f"forward compatibility: cuda-compat {want} on a data-center GPU with host branch {branch}")
        return Outcome("runs", "forward-compat", None, seen=f"runs, with the compat libcuda ({libcuda})",
                       libcuda=libcuda, why=tuple(why))

    # 3. The host libcuda: backward, then minor-version compatibility.
    if native >= want:
        why.append(f"backward compatibility: native CUDA {native} >= {want}")
        return Outcome("runs", "backward", None, seen="runs", why=tuple(why))
    baseline = tables.minor_version_baseline(want.major)
    if native.major == want.major and baseline is not None and node.driver >= baseline:
        why.append(f"minor-version compatibility: same CUDA major {want.major} and driver >= {baseline}")
        if image.uses_new_apis:
            why.append(f"the program calls CUDA APIs newer than CUDA {native}, which this driver does not "
                       "implement (minor-version compatibility covers only the driver's own CUDA API)")
            return _cuda_error(36, "minor-version", _SEEN_NEW_API.replace("{native}", str(native)), why,
                               stage="a CUDA call")
        if image.ptx_jit:
            why.append(f"the program's kernels are PTX from CUDA {want}; the CUDA {native} driver's JIT "
                       "cannot compile PTX from a newer toolkit (the exception to minor-version compatibility)")
            return _cuda_error(222, "minor-version", _SEEN_PTX, why, stage="kernel load")
        return Outcome("runs", "minor-version", None, seen="runs", why=tuple(why), caveats=(
            f"PTX-only kernels that need JIT fail with {_err(222).name} (222): {_err(222).message} "
            "(--ptx-jit makes this the verdict)",
            f"CUDA APIs newer than CUDA {native} fail with {_err(36).name} (36): {_err(36).message} "
            "(--uses-new-apis makes this the verdict)",
        ))
    if native.major == want.major:
        why.append(f"minor-version compatibility needs driver >= {baseline} for CUDA {want.major}.x")
    else:
        why.append(f"CUDA {want.major}.x on a CUDA {native.major}.x driver needs forward compatibility, "
                   "which is not in effect")
    return _cuda_error(35, "none", _SEEN_INIT, why)


_SEEN_INIT = ("the container starts, then the first CUDA call (context creation, e.g. cudaFree(0)) "
              "fails: {err}; frameworks report no usable GPU (torch.cuda.is_available() is False)")
_SEEN_NEW_API = ("the container starts and CUDA initialises; older APIs work, and the first call to an API "
                 "newer than CUDA {native} fails: {err}")
_SEEN_PTX = ("the container starts and CUDA initialises; loading the PTX-only kernels fails: {err} "
             "(frameworks: 'no kernel image is available' or a JIT error at the first launch)")
_RULE_TEXT = {
    "none": "this toolkit does not inject compat libraries in this mode",
    "mount": "toolkit <= 1.17.3 mounts compat libraries whose branch differs from the host's",
    "newer": "the toolkit uses compat libraries only when their branch is newer than the host's",
    "note": "toolkit >= 1.19: newer branch and the host branch listed in the library's ELF note",
}


def predict(node: Node, image: Image, runtime: Runtime | None = None) -> Prediction:
    """All distinct outcomes of running ``image`` on ``node``, each with the conditions under
    which it happens (a single outcome when the input settles every question)."""
    runtime = runtime or Runtime()
    grouped: dict[tuple[Any, ...], Outcome] = {}
    for scenario in scenarios(node, image, runtime):
        out = outcome(scenario)
        prior = grouped.get(out.key())
        conditions = (prior.conditions if prior else ()) + (scenario.conditions,)
        grouped[out.key()] = replace(prior or out, conditions=conditions)
    native = native_cuda(node)
    facts = (
        f"driver {node.driver}: branch {node.driver.branch}, native CUDA {native}",
        f"GPU: {node.gpu_name or 'unknown'} ({node.gpu_class or 'class unknown'}, brand "
        f"{node.brand or 'unknown'}, compute capability {node.arch or 'unknown'})",
        f"image: {image.ref or 'CUDA ' + str(image.cuda)} (CUDA {image.cuda})",
    )
    assumptions = list(image.assumptions)
    if runtime.toolkit is None:
        assumptions.append("toolkit version unknown: cuda-compat handled as by toolkit >= 1.17.5 (compat "
                           "libcuda used when its branch is newer than the host's)")
    return Prediction(node, image, runtime, tuple(grouped.values()), facts, tuple(assumptions))
