"""Driver and CUDA versions, compared the way NVIDIA compares them.

NVIDIA's tools compare versions as dotted numeric sequences: components are unsigned integers
(so ``535.104.05`` == ``535.104.5``), and a shorter version is padded with zeros (``12`` ==
``12.0`` and ``535`` < ``535.104.05``). That is what libnvidia-container's requirement DSL does
(research/require-cuda.md §4.3) and what the CUDA release notes mean by "driver >= 570.26".

CUDA versions also travel as integers: ``cudaDriverGetVersion``, ``cudaRuntimeGetVersion`` and
NVML's ``nvmlSystemGetCudaDriverVersion`` report ``1000 * major + 10 * minor`` (12080 → 12.8).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import total_ordering

__all__ = [
    "CudaVersion",
    "DriverVersion",
    "VersionError",
    "cuda_from_int",
    "nvc_cuda_string",
    "parse_cuda",
    "parse_driver",
]

_DOTTED = re.compile(r"^[0-9]+(\.[0-9]+)*$")


class VersionError(ValueError):
    """A version string that NVIDIA's tools would not accept."""


@total_ordering
@dataclass(frozen=True)
class _Dotted:
    parts: tuple[int, ...]
    text: str = field(compare=False)

    @property
    def _key(self) -> tuple[int, ...]:
        parts = list(self.parts)
        while parts and parts[-1] == 0:
            parts.pop()
        return tuple(parts)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Dotted):
            return NotImplemented
        return self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, _Dotted):
            return NotImplemented
        return self._key < other._key

    def __str__(self) -> str:
        return self.text


def _split(text: str, what: str) -> tuple[int, ...]:
    if not isinstance(text, str) or not _DOTTED.match(text):
        raise VersionError(f"not a {what} version: {text!r} (expected dotted numbers, e.g. "
                           f"{'570.133.20' if what == 'driver' else '12.8'})")
    return tuple(int(p) for p in text.split("."))


class DriverVersion(_Dotted):
    """An NVIDIA driver version such as ``570.133.20`` (the branch is the first number)."""

    @property
    def branch(self) -> int:
        return self.parts[0]


class CudaVersion(_Dotted):
    """A CUDA version such as ``12.8`` or ``13.0.1``."""

    @property
    def major(self) -> int:
        return self.parts[0]

    @property
    def minor(self) -> int:
        return self.parts[1] if len(self.parts) > 1 else 0

    @property
    def major_minor(self) -> CudaVersion:
        return CudaVersion((self.major, self.minor), f"{self.major}.{self.minor}")

    def as_int(self) -> int:
        """The integer form CUDA and NVML report (12.8 → 12080)."""
        return self.major * 1000 + self.minor * 10


def parse_driver(text: str) -> DriverVersion:
    """Parse a driver version as nvidia-smi prints it (``535.104.05``)."""
    parts = _split(text.strip() if isinstance(text, str) else text, "driver")
    if len(parts) < 2:
        raise VersionError(f"not a driver version: {text!r} (expected e.g. 570.133.20)")
    return DriverVersion(parts, text.strip())


def cuda_from_int(value: int) -> CudaVersion:
    """``cudaDriverGetVersion``-style integer → version (12080 → 12.8, 13000 → 13.0)."""
    if value < 1000:
        raise VersionError(f"not a CUDA version integer: {value} (expected e.g. 12080)")
    major, minor = value // 1000, (value % 1000) // 10
    return CudaVersion((major, minor), f"{major}.{minor}")


def nvc_cuda_string(value: int) -> str:
    """The host ``cuda`` fact exactly as libnvidia-container formats it.

    It prints ``v / 1000`` "." ``(v % 100) / 10`` (research/require-cuda.md §4.5), which equals
    the true minor for every CUDA release so far and would wrap for a minor >= 10.
    """
    return f"{value // 1000}.{(value % 100) // 10}"


def parse_cuda(text: str | int) -> CudaVersion:
    """Parse ``12.8``, ``13.0.1`` or the integer form ``12080`` (also as a string)."""
    if isinstance(text, int):
        return cuda_from_int(text)
    stripped = text.strip()
    if stripped.isdigit() and len(stripped) >= 4:
        return cuda_from_int(int(stripped))
    parts = _split(stripped, "CUDA")
    if len(parts) == 1:
        parts = (parts[0], 0)
    return CudaVersion(parts, stripped if "." in stripped else f"{parts[0]}.0")
