"""NVIDIA_REQUIRE_* evaluation, modelled on libnvidia-container's C evaluator.

On NVML nodes in the toolkit's legacy mode, the prestart hook turns the container's environment
into ``--require`` arguments and ``nvidia-container-cli configure`` evaluates each one with the
small DSL of ``src/cli/dsl.c``; the rule callbacks and the per-GPU loop live in
``src/cli/configure.c``. This module reproduces that behaviour exactly, quirks included
(research/require-cuda.md §4, §11), because a platform engineer debugging "requirement error:
unsatisfied condition" needs the answer the node will give, not a tidier one:

* a requirement is split on single ASCII spaces into OR-terms, each term on commas into
  AND-factors; empty pieces are skipped;
* evaluation is lazy, left to right: text after a decided term or after a false factor is never
  parsed, so invalid text there is harmless;
* a term made only of commas ends the evaluation with the previous term's result;
* names and brands compare ignoring ASCII case; ``!`` is an alias of ``!=``;
* versions are digits and dots only, compared component-wise with zero extension;
* a fact the host does not know (no GPU visible, no brand) makes its factor true;
* the error names the requirement's first space-separated token, not the factor that failed.

The environment step (which variables become requirements) follows the Go hook,
``internal/config/image`` of nvidia-container-toolkit (research note §3).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "CLI_PREFIX",
    "CUDA_SUFFIX",
    "MAX_REQUIREMENTS",
    "ContainerEnv",
    "EnvError",
    "Gpu",
    "HostFacts",
    "Op",
    "RequireResult",
    "check",
    "check_container",
    "compare_version",
    "evaluate",
    "parse_env",
]

#: What nvidia-container-cli prints before the evaluator's message.
CLI_PREFIX = "nvidia-container-cli: requirement error: "
#: Appended when the failing requirement's first token starts with exactly ``cuda>=``.
CUDA_SUFFIX = ", please update your driver to a newer version, or use an earlier cuda container"
#: ``struct context.reqs`` in libnvidia-container's cli.h holds 32 entries.
MAX_REQUIREMENTS = 32
#: ``EXPR_MAX`` in dsl.c: a false factor whose "name op value" text does not fit is invalid.
_EXPR_MAX = 128
_UINTMAX = 2**64 - 1
_OPCHARS = "<>=!"
_INVALID = "invalid expression"


class Op(enum.Enum):
    EQUAL = "="
    NOT_EQUAL = "!="
    LESS = "<"
    LESS_EQUAL = "<="
    GREATER = ">"
    GREATER_EQUAL = ">="


# The order of dsl.c's operator table matters: a run of operator characters matches the first
# entry whose text starts with the run, which is how a lone ``!`` becomes ``!=``.
_OPERATORS: tuple[Op, ...] = (
    Op.EQUAL, Op.NOT_EQUAL, Op.LESS, Op.LESS_EQUAL, Op.GREATER, Op.GREATER_EQUAL,
)


@dataclass(frozen=True)
class Gpu:
    """One visible device as the evaluator sees it. ``None`` means the fact is unknown.

    For a MIG device, ``arch`` and ``brand`` are its parent GPU's, and ``mig`` is true: the CLI
    evaluates every full GPU first, then the MIG devices.
    """

    arch: str | None = None
    brand: str | None = None
    mig: bool = False


@dataclass(frozen=True)
class HostFacts:
    """The node facts the requirement DSL reads: ``cuda`` (M.m), ``driver``, visible GPUs."""

    cuda: str | None = None
    driver: str | None = None
    gpus: tuple[Gpu, ...] = ()


@dataclass(frozen=True)
class RequireResult:
    """The outcome of the requirement check.

    ``error`` is the text nvidia-container-cli prints after ``requirement error: `` (or, for
    failures outside the evaluator, the hook's or the CLI's own message, see ``stage``).
    """

    ok: bool
    error: str | None = None
    requirement: str | None = None
    gpu: int | None = None
    stage: str = "requirement"
    requirements: tuple[str, ...] = field(default=(), compare=False)

    @property
    def message(self) -> str | None:
        """The line a user sees in the pod's events, or None when the check passed."""
        if self.ok or self.error is None:
            return None
        if self.stage == "requirement":
            return CLI_PREFIX + self.error
        if self.stage == "input":
            return "nvidia-container-cli: input error: " + self.error
        return self.error


# --- the DSL -----------------------------------------------------------------------------------


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _case_equal(a: str, b: str) -> bool:
    # strcasecmp in the C locale: ASCII letters only.
    return _bytes(a).lower() == _bytes(b).lower()


def _strtoumax(text: str, pos: int) -> tuple[int, int]:
    end = pos
    while end < len(text) and text[end].isdigit():
        end += 1
    return (int(text[pos:end]) if end > pos else 0), end


def _skip(text: str, pos: int, chars: str) -> int:
    while pos < len(text) and text[pos] in chars:
        pos += 1
    return pos


def compare_version(host: str, op: Op, wanted: str) -> bool | None:
    """``dsl_compare_version``: True/False, or None when the C code returns -1 (invalid).

    Validation is as lazy as the C code's: a component is parsed only while both sides still
    have components, so ``12.4.99999999999999999999`` against ``12.4`` is merely greater.
    """
    digits_dots = set("0123456789.")
    if not set(host) <= digits_dots or not set(wanted) <= digits_dots:
        return None
    i = j = 0
    while i < len(host) and j < len(wanted):
        n1, e1 = _strtoumax(host, i)
        if e1 == i or n1 >= _UINTMAX:
            return None
        n2, e2 = _strtoumax(wanted, j)
        if e2 == j or n2 >= _UINTMAX:
            return None
        if n1 != n2:
            if op is Op.EQUAL:
                return False
            if op is Op.NOT_EQUAL:
                return True
            if op in (Op.LESS, Op.LESS_EQUAL):
                return n1 < n2
            return n1 > n2
        i, j = _skip(host, e1, "."), _skip(wanted, e2, ".")
    host_rest = len(host) > _skip(host, i, ".0")
    wanted_rest = len(wanted) > _skip(wanted, j, ".0")
    if op is Op.NOT_EQUAL:
        return host_rest or wanted_rest
    if op in (Op.EQUAL, Op.LESS_EQUAL, Op.GREATER_EQUAL) and not host_rest and not wanted_rest:
        return True
    if op is Op.EQUAL:
        return False
    if op in (Op.LESS, Op.LESS_EQUAL):
        return not host_rest and wanted_rest
    return host_rest and not wanted_rest


def _compare_brand(host: str, op: Op, wanted: str) -> bool | None:
    if op is Op.EQUAL:
        return _case_equal(host, wanted)
    if op is Op.NOT_EQUAL:
        return not _case_equal(host, wanted)
    return None


def _rule(name: str, op: Op, value: str, facts: HostFacts, gpu: Gpu | None) -> bool | None:
    """The four rule callbacks of configure.c. Unknown facts satisfy the factor *before* the
    operator or value is looked at, so ``brand<x`` is fine when no GPU is visible."""
    key = _bytes(name).lower()
    if key == b"cuda":
        return True if facts.cuda is None else compare_version(facts.cuda, op, value)
    if key == b"driver":
        return True if facts.driver is None else compare_version(facts.driver, op, value)
    if key == b"arch":
        if gpu is None or gpu.arch is None:
            return True
        return compare_version(gpu.arch, op, value)
    if key == b"brand":
        if gpu is None or gpu.brand is None:
            return True
        return _compare_brand(gpu.brand, op, value)
    return None


def _factor(text: str, facts: HostFacts, gpu: Gpu | None) -> bool | None:
    """``evaluate_rule``: parse NAME OP VALUE and apply the rule."""
    n = next((k for k, ch in enumerate(text) if ch in _OPCHARS), len(text))
    if n == 0:
        return None
    m = _skip(text, n, _OPCHARS) - n
    if m == 0:
        return None
    run = text[n:n + m]
    op = next((o for o in _OPERATORS if len(o.value) >= m and o.value[:m] == run), None)
    value = text[n + m:]
    if op is None or value == "":
        return None
    name = text[:n]
    result = _rule(name, op, value, facts, gpu)
    if result is False and len(_bytes(f"{name} {op.value} {value}")) >= _EXPR_MAX:
        return None
    return result


def evaluate(requirement: str, facts: HostFacts, gpu: Gpu | None = None) -> str | None:
    """Evaluate one requirement for one device (or none). Returns None when it is satisfied,
    else the message nvidia-container-cli prints after ``requirement error: ``."""
    predicate = requirement.split("\0", 1)[0]  # C strings end at NUL
    result = True
    for term in predicate.split(" "):
        if term == "":
            continue
        completed = True
        for factor in term.split(","):
            if factor == "":
                continue
            outcome = _factor(factor, facts, gpu)
            if outcome is None:
                return _INVALID
            result = outcome
            if not outcome:
                completed = False
                break
        if completed:
            break
    if result:
        return None
    token = predicate.split(" ", 1)[0]
    suffix = CUDA_SUFFIX if _bytes(token).startswith(b"cuda>=") else ""
    return f"unsatisfied condition: {token}{suffix}"


def _device_order(gpus: Sequence[Gpu]) -> list[tuple[int, Gpu]]:
    indexed = list(enumerate(gpus))
    return [p for p in indexed if not p[1].mig] + [p for p in indexed if p[1].mig]


def check(requirements: Iterable[str], facts: HostFacts) -> RequireResult:
    """configure.c's loop: every requirement must hold on every visible device (full GPUs first,
    then MIG devices); with no visible device, each requirement is evaluated once without one.
    The first failure stops the check."""
    reqs = tuple(requirements)
    if len(reqs) > MAX_REQUIREMENTS:
        return RequireResult(False, "too many requirements", stage="input", requirements=reqs)
    devices: list[tuple[int | None, Gpu | None]] = list(_device_order(facts.gpus)) or [(None, None)]
    for index, gpu in devices:
        for req in reqs:
            error = evaluate(req, facts, gpu)
            if error is not None:
                return RequireResult(False, error, req, index, requirements=reqs)
    return RequireResult(True, requirements=reqs)


# --- from container environment to requirement list (the Go hook) -----------------------------

_TRUE_SPELLINGS = frozenset({"1", "t", "T", "TRUE", "true", "True"})  # Go strconv.ParseBool


class EnvError(ValueError):
    """The hook cannot build the requirement list (the container is not created)."""


@dataclass(frozen=True)
class ContainerEnv:
    """What the hook derives from a container's environment."""

    requirements: tuple[str, ...]
    disabled: bool
    legacy: bool
    #: "void" (no GPU requested: the hook does nothing), "none" (no device), "all", a device
    #: list, or None when NVIDIA_VISIBLE_DEVICES is not in the environment at all.
    devices: str | tuple[str, ...] | None


def _env_map(env: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in env:
        if "=" not in entry:
            raise EnvError(f"invalid environment variable: {entry}")
        name, value = entry.split("=", 1)
        out[name] = value  # a later duplicate overrides an earlier one (insertion order kept)
    return out


# golang.org/x/mod/semver, which the hook (v1.10-v1.20) uses to read a legacy CUDA_VERSION.
_SEMVER_NUM = r"(0|[1-9][0-9]*)"
_SEMVER_IDENT = r"[0-9A-Za-z-]+"
_SEMVER_PRE = rf"(-(?:{_SEMVER_NUM}|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:{_SEMVER_NUM}|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*)"
_SEMVER = re.compile(
    rf"^v{_SEMVER_NUM}(?:\.{_SEMVER_NUM}(?:\.{_SEMVER_NUM}{_SEMVER_PRE}?(\+{_SEMVER_IDENT}(?:\.{_SEMVER_IDENT})*)?)?)?$"
)


def legacy_cuda_requirement(cuda_version: str) -> str:
    """``CUDA_VERSION=12.4.1`` → ``cuda>=12.4`` as the hook synthesizes it for legacy images."""
    text = "v" + (cuda_version[1:] if cuda_version.startswith("v") else cuda_version)
    match = _SEMVER.match(text)
    if not match:
        raise EnvError("failed to get requirements failed to get version: invalid CUDA version: "
                       "invalid version string")
    major = int(match.group(1))
    minor = int(match.group(2)) if match.group(2) is not None else 0
    if major > 2**32 - 1:
        raise EnvError("failed to get requirements failed to get version: invalid CUDA version: "
                       "invalid major version")
    if minor > 2**32 - 1:
        raise EnvError("failed to get requirements failed to get version: invalid CUDA version: "
                       "invalid minor version")
    return f"cuda>={match.group(1)}.{match.group(2) or '0'}"


def _visible_devices(env: Mapping[str, str]) -> str | tuple[str, ...] | None:
    if "NVIDIA_VISIBLE_DEVICES" not in env:
        return None
    ids = [d.strip() for d in env["NVIDIA_VISIBLE_DEVICES"].split(",")]
    ids = [d for d in ids if d]
    # Precedence of the special values: void > none > all (internal/config/image/devices.go).
    if not ids or "void" in ids:
        return "void"
    if "none" in ids:
        return "none"
    if "all" in ids:
        return "all"
    return tuple(ids)


def parse_env(env: Iterable[str]) -> ContainerEnv:
    """The hook's env → requirement list step (``image.CUDA.GetRequirements``).

    Every variable named ``NVIDIA_REQUIRE_*`` (case-sensitive, ``NVIDIA_REQUIRE_JETPACK*``
    excluded) is one requirement, empty ones included; a legacy image (``CUDA_VERSION`` set,
    ``NVIDIA_REQUIRE_CUDA`` unset or empty) adds ``cuda>=M.m``; ``NVIDIA_DISABLE_REQUIRE``
    spelled as a Go true (1 t T TRUE true True) empties the list. The real hook reads the
    variables in Go map order, which is random; here they keep their order in ``env``.
    """
    values = _env_map(env)
    legacy = bool(values.get("CUDA_VERSION")) and not values.get("NVIDIA_REQUIRE_CUDA")
    devices = _visible_devices(values)
    if values.get("NVIDIA_DISABLE_REQUIRE", "") in _TRUE_SPELLINGS:
        return ContainerEnv((), True, legacy, devices)
    reqs = [
        value for name, value in values.items()
        if name.startswith("NVIDIA_REQUIRE_") and not name.startswith("NVIDIA_REQUIRE_JETPACK")
    ]
    if legacy:
        reqs.append(legacy_cuda_requirement(values["CUDA_VERSION"]))
    return ContainerEnv(tuple(reqs), False, legacy, devices)


def check_container(
    facts: HostFacts, *, env: Iterable[str] = (), requirements: Iterable[str] = ()
) -> RequireResult:
    """The whole legacy-mode check for one container: env-derived requirements first, then
    ``requirements`` (extra ``--require`` arguments), judged against ``facts``.

    ``NVIDIA_VISIBLE_DEVICES`` gates the check only when the environment names it: ``void`` or
    empty means no GPU was requested and the hook does nothing; ``none`` means the CLI runs
    with no device, so ``arch``/``brand`` factors hold vacuously. When the variable is absent,
    the devices are those in ``facts`` (on Kubernetes the device plugin sets the variable).
    """
    try:
        container = parse_env(env)
    except EnvError as exc:
        return RequireResult(False, str(exc), stage="hook")
    if container.devices == "void":
        return RequireResult(True)
    if container.devices == "none":
        facts = HostFacts(cuda=facts.cuda, driver=facts.driver, gpus=())
    return check((*container.requirements, *requirements), facts)
