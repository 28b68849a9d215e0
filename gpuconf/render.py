"""Render ``manifests/*.j2`` into Kubernetes objects (plain dicts). Pure: no API calls.

Templates render with StrictUndefined, so a missing value is an error at render time rather
than an empty field on the cluster; every string is inserted with ``tojson`` (YAML is a superset
of JSON), so user-supplied names cannot break the document's structure.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, NoReturn

import jinja2
import jinja2.meta
import yaml

from gpuconf.paths import common_probe_dir, manifests_dir, probe_dir

__all__ = ["RenderError", "probe_sources", "probe_sources_stamp", "render"]


class RenderError(ValueError):
    """A template could not be rendered into objects (a value is missing or wrong)."""


def _raise(message: str) -> NoReturn:
    raise RenderError(message)


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(manifests_dir())),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )
    env.globals["raise"] = _raise
    return env


@cache
def _required(template: str) -> frozenset[str]:
    env = _environment()
    try:
        source = env.loader.get_source(env, template)[0]  # type: ignore[union-attr]
    except jinja2.TemplateNotFound as exc:
        raise RenderError(f"no such template: {template}") from exc
    return frozenset(jinja2.meta.find_undeclared_variables(env.parse(source)) - set(env.globals))


#: libyaml's safe loader when PyYAML has it (a probe pod renders in a fraction of the pure-Python
#: loader's time: at 1,000 nodes rendering was a third of the runner's CPU), else the pure one;
#: both accept exactly safe YAML.
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def render(template: str, values: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Render one template into the objects it defines; every value it names must be given."""
    missing = sorted(_required(template) - set(values))
    if missing:
        raise RenderError(f"{template}: missing values: {', '.join(missing)} (undefined)")
    try:
        text = _environment().get_template(template).render(**values)
    except jinja2.UndefinedError as exc:
        raise RenderError(f"{template}: {exc.message}") from exc
    try:
        docs = [d for d in yaml.load_all(text, Loader=_LOADER) if d is not None]
    except yaml.YAMLError as exc:
        raise RenderError(f"{template} rendered invalid YAML: {exc}") from exc
    if not all(isinstance(d, dict) for d in docs):
        raise RenderError(f"{template} rendered something other than objects")
    return docs


#: The files of each probe (and of probes/common) that zero-registry mode ships in a ConfigMap.
_SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".cpp", ".sh")


def _source_files(directory: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(directory.iterdir())
            if p.is_file() and p.suffix in _SOURCE_SUFFIXES}


def probe_sources_stamp(probe: str) -> tuple[tuple[str, int, int], ...]:
    """The files probe_sources(probe) reads, each as (path, size, mtime in ns): equal stamps, equal
    sources (what make and rsync assume), at the cost of a directory listing instead of ~100 kB read."""
    return tuple((e.path, st.st_size, st.st_mtime_ns) for d in (probe_dir(probe), common_probe_dir())
                 for e in sorted(os.scandir(d), key=lambda e: e.name)
                 if e.is_file() and os.path.splitext(e.name)[1] in _SOURCE_SUFFIXES for st in (e.stat(),))


def probe_sources(probe: str) -> dict[str, str]:
    """The sources (and build script) of ``probes/<probe>`` and the shared ``probes/common``, as
    ConfigMap data: one flat directory, where build.sh finds the shared headers next to its own
    files. A name in both directories is an error (the volume could hold only one of them)."""
    directory = probe_dir(probe)
    files = _source_files(directory)
    if "build.sh" not in files:
        raise FileNotFoundError(f"{directory}/build.sh is missing")
    common = common_probe_dir()
    shared = _source_files(common)
    clash = sorted(set(files) & set(shared))
    if clash:
        raise ValueError(f"{directory} and {common} both have {', '.join(clash)}: the probe's ConfigMap ships "
                         "them flat in one directory")
    return {**files, **shared}
