"""Where the checkout's non-Python parts live (probe sources, manifest templates)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["common_probe_dir", "manifests_dir", "probe_dir", "project_root"]


def project_root() -> Path:
    """The repository root: gpuconf runs from a checkout (``pytest suites/``)."""
    return Path(__file__).resolve().parent.parent


def probe_dir(name: str) -> Path:
    path = project_root() / "probes" / name
    if not path.is_dir():
        raise FileNotFoundError(f"probe sources not found at {path}: gpuconf must run from a checkout of its "
                                "repository")
    return path


def common_probe_dir() -> Path:
    """``probes/common``: the sources every probe shares (json.h)."""
    return probe_dir("common")


def manifests_dir() -> Path:
    return project_root() / "manifests"
