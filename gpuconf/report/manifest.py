"""``manifest.json``: what a run wrote into its report directory, each file with its size and SHA-256,
and the run it came from; and the check that a directory still holds exactly that.

The run writes the manifest last (gpuconf.plugin.reports, at ``pytest_unconfigure``: after pytest's
junitxml plugin wrote junit.xml at session finish). Which files it lists is found, not named: every
regular file under the directory that is new or changed since the run started (a snapshot taken when
the run is configured), so files another writer adds (the CNCF evidence, a renamed file) are covered
and files an earlier run left there are not claimed for this one.

:func:`verify` reads a directory's manifest against the files there: each listed file present with
its size and hash, and no file the manifest does not list (``unlisted``: in a sign-off directory a
file nobody vouches for is suspicious). Signature files next to the manifest (``manifest.json.*``:
``cosign sign-blob --bundle manifest.json.sigstore.json``, ``openssl dgst -sign ... -out
manifest.json.sig``) are neither listed nor unlisted: their own tools check them.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from gpuconf.errors import UsageError

__all__ = ["MANIFEST", "SCHEMA_ID", "Problem", "Snapshot", "Verification", "changed_files", "manifest_document",
           "read_manifest", "snapshot", "verify", "write_manifest"]

#: The manifest's file name, in the directory it describes.
MANIFEST = "manifest.json"
#: The manifest's schema id (``gpuconf/data/schemas/manifest.schema.json``); a new major changes it.
SCHEMA_ID = "gpuconf.manifest/1"
#: Read 1 MiB at a time: a report directory may hold large logs.
_CHUNK = 1 << 20

#: A file's identity as the run sees it: (inode, size, mtime_ns, ctime_ns). A write changes the
#: mtime, a rename over the file (the report writers' atomic write) the inode, either the ctime.
Stat = tuple[int, int, int, int]
Snapshot = dict[str, Stat]


def _identity(st: os.stat_result) -> Stat:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _walk(directory: Path, *, strict: bool = False) -> Iterator[tuple[str, os.stat_result]]:
    """Every entry under ``directory`` that is not a directory (links not followed), as its path
    relative to ``directory`` in POSIX form, with its lstat; ``strict``: a directory that cannot be
    listed raises (verify must not miss what it cannot see), otherwise it is passed over."""
    def refuse(error: OSError) -> None:
        raise error

    for root, dirs, files in os.walk(directory, followlinks=False, onerror=refuse if strict else None):
        dirs.sort()
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue  # gone between listing and looking (a temporary file renamed away)
            yield Path(path).relative_to(directory).as_posix(), st


def snapshot(directory: Path) -> Snapshot:
    """The regular files under ``directory`` now (none if it does not exist yet)."""
    if not Path(directory).is_dir():
        return {}
    return {rel: _identity(st) for rel, st in _walk(Path(directory)) if stat.S_ISREG(st.st_mode)}


def _sidecar(rel: str) -> bool:
    """The manifest, or a signature kept next to it (manifest.json.sig, manifest.json.sigstore.json)."""
    return rel == MANIFEST or rel.startswith(MANIFEST + ".")


def changed_files(directory: Path, before: Snapshot) -> tuple[list[str], list[str]]:
    """(written, left): the regular files under ``directory`` new or changed since ``before``, and
    those unchanged (an earlier run's: not this run's to vouch for), each sorted; the manifest and
    its signature files are in neither."""
    written: list[str] = []
    left: list[str] = []
    for rel, st in _walk(Path(directory)) if Path(directory).is_dir() else ():
        if _sidecar(rel) or not stat.S_ISREG(st.st_mode):
            continue
        (written if before.get(rel) != _identity(st) else left).append(rel)
    return sorted(written), sorted(left)


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def manifest_document(directory: Path, files: list[str], *, run_id: str | None, provenance: str | None,
                      simulated: bool, cluster_uid: str | None, started: float, finished: float,
                      exit_status: int | None) -> dict[str, Any]:
    """The manifest of ``files`` (paths relative to ``directory``), hashed now."""
    from gpuconf import __version__

    entries = []
    for rel in files:
        path = Path(directory, rel)
        entries.append({"path": rel, "size": path.stat().st_size, "sha256": _sha256(path)})
    return {"schema": SCHEMA_ID, "gpuconf_version": __version__, "run_id": run_id,
            "cluster": {"provenance": provenance, "simulated": simulated, "kube_system_uid": cluster_uid},
            "started": _iso(started), "finished": _iso(finished), "exit_status": exit_status,
            "files": entries}


def write_manifest(directory: Path, document: Mapping[str, Any]) -> Path:
    """``directory/manifest.json``, written atomically as the reports are."""
    from gpuconf.report.writers import _atomic_write

    return _atomic_write(Path(directory) / MANIFEST, json.dumps(document, indent=2, ensure_ascii=False) + "\n")


# -- verify ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Problem:
    """A way the directory differs from its manifest: ``missing``, ``altered`` (with how) or ``unlisted``."""

    kind: str
    path: str
    detail: str = ""

    def line(self) -> str:
        return f"{self.kind} file {self.path}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True)
class Verification:
    directory: Path
    manifest: Mapping[str, Any]
    verified: int
    problems: tuple[Problem, ...]
    signatures: tuple[str, ...]  # manifest.json.* next to the manifest: checked by their own tools


def _safe_path(rel: Any) -> str:
    """A listed path as it must be: relative, POSIX, normalised, inside the directory."""
    if not isinstance(rel, str):
        raise UsageError(f"{MANIFEST} lists a path that is not a string: {rel!r}")
    parts = rel.split("/")
    if (not rel or rel.startswith("/") or "\\" in rel or PurePosixPath(rel).is_absolute() or ":" in parts[0]
            or any(p in ("", ".", "..") for p in parts)):
        raise UsageError(f"{MANIFEST} lists a path outside the directory or not normalised: {rel!r} (refused)")
    if _sidecar(rel):
        raise UsageError(f"{MANIFEST} lists {rel!r}, which is the manifest or its signature (refused)")
    return rel


def read_manifest(directory: Path) -> dict[str, Any]:
    """The manifest of ``directory``, validated against its schema; UsageError (one line) otherwise."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    from gpuconf.yamlschema import schema

    if not directory.exists():
        raise UsageError(f"no such directory: {directory}")
    if not directory.is_dir():
        raise UsageError(f"not a directory: {directory} (give the run's report directory)")
    path = directory / MANIFEST
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{directory} has no {MANIFEST} (a run writes one into its report directory)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not JSON: {exc}") from None
    if isinstance(doc, dict) and isinstance(doc.get("schema"), str) and doc["schema"] != SCHEMA_ID:
        raise UsageError(f"{path} is a {doc['schema']!r} manifest; this gpuconf reads {SCHEMA_ID!r}")
    error = best_match(Draft202012Validator(schema("manifest")).iter_errors(doc))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "the top level"
        raise UsageError(f"{path} is not a gpuconf manifest ({SCHEMA_ID}): at {where}: {error.message}")
    seen: set[str] = set()
    for entry in doc["files"]:
        rel = _safe_path(entry["path"])
        if rel in seen:
            raise UsageError(f"{MANIFEST} lists {rel!r} twice (refused)")
        seen.add(rel)
    return dict(doc)


def _check(directory: Path, entry: Mapping[str, Any]) -> Problem | None:
    rel = str(entry["path"])
    path = directory.joinpath(*rel.split("/"))
    try:
        st = path.lstat()
    except FileNotFoundError:
        return Problem("missing", rel)
    except OSError as exc:
        return Problem("missing", rel, f"cannot read it: {exc.strerror}")
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
        return Problem("altered", rel, "a link" if stat.S_ISLNK(st.st_mode) else "not a regular file")
    real = path.resolve()
    if not real.is_relative_to(directory.resolve()):
        return Problem("altered", rel, "reached through a link out of the directory")
    if st.st_size != entry["size"]:
        return Problem("altered", rel, f"{st.st_size} bytes, the manifest says {entry['size']}")
    try:
        digest = _sha256(path)
    except OSError as exc:
        return Problem("missing", rel, f"cannot read it: {exc.strerror}")
    if digest != entry["sha256"]:
        return Problem("altered", rel, "its SHA-256 differs from the manifest's")
    return None


def verify(directory: Path) -> Verification:
    """Check ``directory`` against its manifest: every listed file present with its size and SHA-256,
    no file under the directory unlisted. Bad input (no directory, no manifest, not a manifest, a
    path that leaves the directory) is a UsageError."""
    directory = Path(directory)
    doc = read_manifest(directory)
    problems = [p for entry in doc["files"] if (p := _check(directory, entry)) is not None]
    listed = {str(entry["path"]) for entry in doc["files"]}
    signatures = []
    try:
        for rel, _ in _walk(directory, strict=True):
            if rel == MANIFEST:
                continue
            if _sidecar(rel):
                signatures.append(rel)
            elif rel not in listed:
                problems.append(Problem("unlisted", rel))
    except OSError as exc:
        raise UsageError(f"cannot list {exc.filename or directory}: {exc.strerror or exc}") from None
    return Verification(directory, doc, len(listed) - sum(p.kind != "unlisted" for p in problems),
                        tuple(problems), tuple(signatures))
