"""Reading the in-cluster runner's results volume without exec or kubectl.

The runner (manifests/runner/) writes each run's reports to the ``gpuconf-results`` PVC under
``/results/<pod name>/``; a sharded run (job-sharded.yaml) writes each shard's under
``/results/<run>/shard-<index>/``, listed as one run with its shards and fetched whole.
:func:`list_runs` and :func:`fetch_run` read them back with a short-lived *reader pod* in the
runner namespace: it mounts the PVC read-only, runs :data:`READER_SCRIPT` with the runner image's
Python, and prints what was asked to stdout, framed by ``gpuconf-results/1``
lines: a JSON listing of the runs, or the chosen run's directory as a gzipped tar, base64-encoded in
76-character lines, with its size and SHA-256. The pod is followed by :func:`run_campaign` (one
watch; its log read once, bounded) inside a :class:`RunContext` that creates nothing on entering and
deletes the pod on exit, on an error and on Ctrl-C/SIGTERM. Pure parts (the script, the pod, the
framing, the safe extraction) take no cluster and are tested on their own.

The calls, all in the runner namespace, are those ``manifests/runner/results-reader-role.yaml``
grants: get the PVC; create, list, watch and deletecollection pods; get pods/log; list events.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import re
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from gpuconf import __version__
from gpuconf.cluster.access import Cluster
from gpuconf.cluster.campaign import RunContext, run_campaign
from gpuconf.cluster.errors import ClusterError, NotFoundError
from gpuconf.cluster.outcomes import PodOutcome

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_NAMESPACE", "DEFAULT_PVC", "FRAME", "MOUNT_PATH", "READER_SCRIPT",
           "RUNNER_IMAGE", "Archive", "FetchedRun", "ResultsError", "RunInfo", "decode_output", "encode_archive",
           "fetch_run", "list_runs", "make_archive", "make_reader_pod", "parse_listing", "safe_extract",
           "validate_run_name"]

#: The runner's namespace and results volume as manifests/runner/ ships them.
DEFAULT_NAMESPACE = "gpuconf"
DEFAULT_PVC = "gpuconf-results"
#: The runner image (job.yaml's ``image:``): a site that mirrored it for the runner mirrors nothing new.
RUNNER_IMAGE = f"gpuconf-runner:{__version__}"
#: The runner's user (job.yaml's runAsUser): the reports are written 0600, only it can read them.
RUNNER_UID = 65532
MOUNT_PATH = "/results"
#: The most log bytes read from the reader pod by default (the base64 of the gzipped tar and its framing).
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
#: Room kept for the framing lines when telling the script its limit.
_FRAMING_BYTES = 4096
#: Uncompressed bytes an archive may expand to, whatever its compressed size (a gzip bomb stops here).
MAX_EXTRACTED_BYTES = 1024 * 1024 * 1024
FRAME = "gpuconf-results/1"
READER_LABEL = "gpuconf.io/results-reader"

#: Run directories are pod names: a DNS-1123 subdomain.
_RUN_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")

#: What the reader pod runs: ``python -c READER_SCRIPT list|fetch ROOT RUN|latest LIMIT``.
#: Standard library only (the runner image's Python 3.11); reads only; exit 0 done, 2 no such run,
#: 3 the volume unreadable, 4 over the limit. Every line it prints that is not base64 starts with FRAME.
READER_SCRIPT = r'''
import base64, hashlib, io, json, os, re, sys, tarfile
FRAME = "gpuconf-results/1"
SHARD = re.compile(r"^shard-([0-9]+)$")
mode, root, wanted, limit = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])


def say(frame, **fields):
    sys.stdout.write(FRAME + " " + frame + " " + json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()


def fail(code, kind, message):
    say("error", kind=kind, message=message)
    sys.exit(code)


def summary(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    meta = (doc.get("extra") or {}).get("gpuconf") or {}
    verdicts = {}
    for verdict in (meta.get("nodes") or {}).values():
        verdicts[str(verdict)] = verdicts.get(str(verdict), 0) + 1
    counts = ((doc.get("results") or {}).get("summary")) or {}
    coverage = meta.get("coverage")
    if isinstance(coverage, dict):
        coverage = {k: coverage.get(k) for k in ("selected", "tested", "line")}
    return {"run_id": meta.get("run_id"), "started": meta.get("started"), "finished": meta.get("finished"),
            "exit_status": meta.get("exit_status"), "interrupted": meta.get("interrupted"),
            "error": meta.get("error"), "verdicts": verdicts,
            "counts": {k: counts.get(k) for k in ("tests", "passed", "failed", "skipped")},
            "coverage": coverage if isinstance(coverage, dict) else None}


def directories(path):
    for name in sorted(os.listdir(path)):
        if not (name.startswith(".") or os.path.islink(os.path.join(path, name))
                or not os.path.isdir(os.path.join(path, name))):
            yield name


def describe(path, name):
    info = {"name": name, "mtime": os.stat(path).st_mtime, "files": sorted(os.listdir(path))}
    report = os.path.join(path, "report.json")
    if os.path.isfile(report):
        info["mtime"] = os.stat(report).st_mtime
        try:
            info["report"] = summary(report)
        except (OSError, ValueError, AttributeError) as e:
            info["report_error"] = type(e).__name__ + ": " + str(e)
    return info


def runs():
    try:
        names = list(directories(root))
    except OSError as e:
        fail(3, "volume", "cannot read " + root + ": " + str(e))
    out = []
    for name in names:
        path = os.path.join(root, name)
        info = describe(path, name)
        shards = [describe(os.path.join(path, s), s) for s in directories(path) if SHARD.match(s)]
        if "report.json" not in info["files"] and shards:  # a sharded run: one report per shard
            info["shards"] = sorted(shards, key=lambda s: int(SHARD.match(s["name"]).group(1)))
            info["mtime"] = max(s["mtime"] for s in shards)
        out.append(info)
    return out


class Capped(io.RawIOBase):
    def __init__(self, cap):
        self.buf, self.cap = bytearray(), cap

    def writable(self):
        return True

    def write(self, data):
        self.buf += data
        if len(self.buf) > self.cap:
            raise OverflowError(len(self.buf))
        return len(data)


def keep(info):
    return info if info.isfile() or info.isdir() else None


found = runs()
if mode == "list":
    say("list", runs=found)
    sys.exit(0)
if wanted == "latest":
    if not found:
        fail(2, "no-runs", "the volume holds no runs")
    chosen = max(found, key=lambda r: (r["mtime"], r["name"]))["name"]
else:
    chosen = wanted
    if chosen not in [r["name"] for r in found]:
        names = [r["name"] for r in sorted(found, key=lambda r: (r["mtime"], r["name"]))]
        fail(2, "no-run", "no run " + chosen + " on the volume (it has: " + (", ".join(names[-10:]) or "none") + ")")
path = os.path.join(root, chosen)
sink = Capped(limit * 3 // 4)
try:
    with tarfile.open(fileobj=sink, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for entry in sorted(os.listdir(path)):
            tar.add(os.path.join(path, entry), arcname=entry, filter=keep)
except OverflowError:
    fail(4, "too-large", "run " + chosen + " is more than " + str(limit * 3 // 4) + " bytes compressed")
except OSError as e:
    fail(3, "volume", "cannot read " + path + ": " + str(e))
data = bytes(sink.buf)
say("archive", run=chosen, bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
text = base64.b64encode(data)
for start in range(0, len(text), 76 * 1024):
    chunk = text[start:start + 76 * 1024]
    sys.stdout.write("\n".join(chunk[i:i + 76].decode() for i in range(0, len(chunk), 76)) + "\n")
say("end")
'''


class ResultsError(ClusterError):
    """Reading the results volume failed. ``kind``: ``no-volume`` (no such PVC in the namespace),
    ``no-runs`` (``latest`` on an empty volume), ``no-run`` (no such run), ``too-large`` (over the
    log limit), ``reader`` (the reader pod did not deliver), ``corrupt`` (its output failed the
    checks), ``unsafe`` (an archive member would land outside the output directory)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


#: A sharded run's verdict when a shard has no usable report (still running, killed, not started).
_SHARD_UNFINISHED = frozenset({"no report.json", "unreadable report.json", "not started", "incomplete"})


@dataclass(frozen=True)
class RunInfo:
    """One run directory on the volume, with its report.json's summary when it has one; a sharded
    run's directory (job-sharded.yaml) has none, its ``shard-<index>`` directories have one each."""

    name: str
    mtime: float
    files: tuple[str, ...]
    report: Mapping[str, Any] | None = None
    report_error: str | None = None
    shards: tuple[RunInfo, ...] = ()

    @property
    def verdicts(self) -> Mapping[str, int]:
        if self.shards:
            total: dict[str, int] = {}
            for shard in self.shards:
                for verdict, count in shard.verdicts.items():
                    total[verdict] = total.get(verdict, 0) + count
            return total
        return dict((self.report or {}).get("verdicts") or {})

    @property
    def coverage(self) -> str | None:
        """The report's coverage line ("1 of 2 GPU nodes tested; 1 cordoned") when some selected GPU
        node was not tested; None when every one was, or the report has no coverage. A sharded
        run's: each such shard's, named."""
        if self.shards:
            return "; ".join(f"{s.name}: {s.coverage}" for s in self.shards if s.coverage) or None
        coverage = (self.report or {}).get("coverage")
        if not isinstance(coverage, dict) or not isinstance(coverage.get("line"), str):
            return None
        selected, tested = coverage.get("selected"), coverage.get("tested")
        if isinstance(selected, int) and isinstance(tested, int) and tested >= selected:
            return None
        return str(coverage["line"])

    @property
    def verdict(self) -> str:
        """The run's worst node verdict (fail > degraded > pass > not-tested), or why there is none;
        "incomplete" for a run without failures that left selected GPU nodes untested (issue 25). A
        sharded run's: "fail" when a shard failed, else "incomplete" when a shard has no usable report
        or left nodes untested, else the worst of its shards'. How many shards there should be the
        listing cannot know: `gpuconf report merge` refuses a run with one missing."""
        if self.shards:
            verdicts = {s.verdict for s in self.shards}
            for verdict in ("fail", "incomplete", "degraded", "pass", "not-tested"):
                if verdict in verdicts or (verdict == "incomplete" and verdicts & _SHARD_UNFINISHED):
                    return verdict
            return "no results"
        if self.report is None:
            return "no report.json" if self.report_error is None else "unreadable report.json"
        if self.report.get("error"):
            return "not started"
        for verdict in ("fail", "degraded", "pass", "not-tested"):
            if self.verdicts.get(verdict):
                return "incomplete" if verdict in ("pass", "not-tested") and self.coverage else verdict
        return "incomplete" if self.coverage else "no results"


@dataclass(frozen=True)
class Archive:
    run: str
    data: bytes


@dataclass(frozen=True)
class FetchedRun:
    run: str
    directory: Path
    files: tuple[str, ...]  # relative paths of the regular files written
    archive_bytes: int


# -------------------------------------------------------------------------------------------------
# Pure: names, the reader pod, the framing


def validate_run_name(run: str) -> str:
    """``latest`` or a run directory's name (a pod name); anything else is bad input (ValueError)."""
    if run == "latest" or _RUN_NAME.match(run):
        return run
    raise ValueError(f"not a run name: {run!r} (a run directory is named after its runner pod, e.g. gpuconf-x7k2p; "
                     "or give 'latest')")


def make_reader_pod(name: str, *, mode: str, pvc: str = DEFAULT_PVC, run: str = "latest",
                    image: str = RUNNER_IMAGE, max_bytes: int = DEFAULT_MAX_BYTES,
                    deadline_s: int = 600) -> dict[str, Any]:
    """The reader pod: the restricted Pod Security profile (non-root as the runner's user, no
    privilege escalation, every capability dropped, RuntimeDefault seccomp, read-only root), the
    PVC mounted read-only, no service account token, no GPU; tolerates ``nvidia.com/gpu`` taints
    as the probes do (a cluster whose every node is a GPU node)."""
    if mode not in ("list", "fetch"):
        raise ValueError(f"reader mode must be list or fetch, not {mode!r}")
    limit = max(1, max_bytes - _FRAMING_BYTES)
    memory = f"{(128 * 1024 * 1024 + 2 * max_bytes) // (1024 * 1024)}Mi"  # the archive in memory, twice at most
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "gpuconf", READER_LABEL: mode}},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "activeDeadlineSeconds": deadline_s,
            "securityContext": {"runAsNonRoot": True, "runAsUser": RUNNER_UID, "runAsGroup": RUNNER_UID,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{
                "name": "reader",
                "image": image,
                "command": ["python", "-c", READER_SCRIPT],
                "args": [mode, MOUNT_PATH, run, str(limit)],
                "env": [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
                "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
                                    "seccompProfile": {"type": "RuntimeDefault"}},
                "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": memory}},
                "volumeMounts": [{"name": "results", "mountPath": MOUNT_PATH, "readOnly": True}],
            }],
            "volumes": [{"name": "results", "persistentVolumeClaim": {"claimName": pvc, "readOnly": True}}],
        },
    }


def make_archive(files: Mapping[str, bytes]) -> bytes:
    """A gzipped tar of ``files`` (relative path → content), as the reader script makes one."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name, content in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def encode_archive(run: str, data: bytes) -> str:
    """What the reader script prints for ``data``: the archive line, base64 in 76-character lines, the end line."""
    text = base64.b64encode(data).decode()
    lines = [f"{FRAME} archive " + json.dumps({"bytes": len(data), "run": run,
                                               "sha256": hashlib.sha256(data).hexdigest()}, sort_keys=True)]
    lines += [text[i:i + 76] for i in range(0, len(text), 76)]
    return "\n".join([*lines, f"{FRAME} end {{}}"]) + "\n"


def _frames(log: str) -> list[tuple[str, dict[str, Any], int]]:
    """(kind, fields, line index) of every framing line of a reader pod's log."""
    out = []
    for index, line in enumerate(log.splitlines()):
        if not line.startswith(FRAME + " "):
            continue
        kind, _, rest = line[len(FRAME) + 1:].partition(" ")
        try:
            fields = json.loads(rest) if rest.strip() else {}
        except ValueError as e:
            raise ResultsError("corrupt", f"reader output: unreadable {kind} line") from e
        out.append((kind, fields if isinstance(fields, dict) else {}, index))
    return out


def _raise_reported(frames: Sequence[tuple[str, dict[str, Any], int]]) -> None:
    for kind, fields, _ in frames:
        if kind == "error":
            what = str(fields.get("kind") or "reader")
            hint = " (the reader's output limit: raise it with --max-mib)" if what == "too-large" else ""
            raise ResultsError(what, str(fields.get("message") or "the reader failed") + hint)


def parse_listing(log: str) -> list[RunInfo]:
    """The runs a ``list`` reader printed, newest first."""
    frames = _frames(log)
    _raise_reported(frames)
    listing = next((fields for kind, fields, _ in frames if kind == "list"), None)
    if listing is None:
        raise ResultsError("corrupt", "reader output: no listing")
    runs = [_run_info(entry) for entry in listing.get("runs") or [] if isinstance(entry, dict)]
    return sorted(runs, key=lambda r: (r.mtime, r.name), reverse=True)


def _run_info(entry: Mapping[str, Any]) -> RunInfo:
    report = entry.get("report")
    return RunInfo(name=str(entry.get("name")), mtime=float(entry.get("mtime") or 0.0),
                   files=tuple(str(f) for f in entry.get("files") or ()),
                   report=report if isinstance(report, dict) else None, report_error=entry.get("report_error"),
                   shards=tuple(_run_info(s) for s in entry.get("shards") or () if isinstance(s, dict)))


def decode_output(log: str) -> Archive:
    """The archive a ``fetch`` reader printed, checked against its stated size and SHA-256."""
    frames = _frames(log)
    _raise_reported(frames)
    lines = log.splitlines()
    start = next(((fields, index) for kind, fields, index in frames if kind == "archive"), None)
    if start is None:
        raise ResultsError("corrupt", "reader output: no archive")
    fields, first = start
    end = next((index for kind, _, index in frames if kind == "end" and index > first), None)
    if end is None:
        raise ResultsError("corrupt", "reader output: the archive is cut short (no end line)")
    try:
        data = base64.b64decode("".join(line.strip() for line in lines[first + 1:end]), validate=True)
    except (binascii.Error, ValueError) as e:
        raise ResultsError("corrupt", f"reader output: not base64 ({e})") from e
    if len(data) != fields.get("bytes") or hashlib.sha256(data).hexdigest() != fields.get("sha256"):
        raise ResultsError("corrupt", f"reader output: the archive does not match its size and SHA-256 "
                                      f"({len(data)} bytes received, {fields.get('bytes')} sent)")
    return Archive(run=str(fields.get("run")), data=data)


def _member_path(member: tarfile.TarInfo) -> PurePosixPath:
    name = member.name
    path = PurePosixPath(name)
    if not name or name.startswith("/") or "\\" in name or re.match(r"^[A-Za-z]:", name):
        raise ResultsError("unsafe", f"archive member {name!r}: an absolute path")
    if ".." in path.parts:
        raise ResultsError("unsafe", f"archive member {name!r}: leaves the directory (..)")
    if not (member.isfile() or member.isdir()):
        raise ResultsError("unsafe", f"archive member {name!r}: not a regular file or directory")
    return path


def safe_extract(data: bytes, directory: Path, *, max_total: int = MAX_EXTRACTED_BYTES) -> list[str]:
    """Extract a gzipped tar into ``directory`` (created if missing; files there are replaced):
    regular files and directories only, each inside ``directory`` (no absolute paths, no ``..``,
    no links or devices), at most ``max_total`` bytes in all. Every member is checked before
    anything is written. Returns the relative paths of the files written."""
    try:
        tar = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")
    except (tarfile.TarError, OSError, EOFError) as e:
        raise ResultsError("corrupt", f"the archive is not a gzipped tar ({e})") from e
    with tar:
        try:
            members = tar.getmembers()
        except (tarfile.TarError, OSError, EOFError) as e:
            raise ResultsError("corrupt", f"the archive is damaged ({e})") from e
        paths = [(m, _member_path(m)) for m in members]
        total = sum(m.size for m, _ in paths if m.isfile())
        if total > max_total:
            raise ResultsError("too-large", f"the archive expands to {total} bytes, over {max_total}")
        root = directory.resolve()
        written = []
        for member, rel in paths:
            target = (root / rel).resolve()
            if target != root and root not in target.parents:  # a link already on disk points elsewhere
                raise ResultsError("unsafe", f"archive member {member.name!r}: leaves {directory}")
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            if source is None:
                raise ResultsError("corrupt", f"archive member {member.name!r}: no content")
            target.write_bytes(source.read())
            written.append(str(rel))
    return sorted(written)


# -------------------------------------------------------------------------------------------------
# The cluster part


class _ReaderContext(RunContext):
    """A RunContext in the runner's existing namespace that creates nothing on entering: the reader
    pod needs no run namespace, no PriorityClass and no liveness mark (a read lasts seconds and collects
    no other run's leftovers), so a namespaced Role is all it takes. What the read creates (the pod) is
    still deleted on exit, on errors and on SIGINT/SIGTERM."""

    def _create_namespace(self) -> None:
        return None

    def _ensure_priority_class(self) -> None:
        return None


def _check_pvc(cluster: Cluster, namespace: str, pvc: str) -> None:
    try:
        cluster.call_json(f"read persistentvolumeclaim {pvc}", cluster.core.read_namespaced_persistent_volume_claim,
                          pvc, namespace)
    except NotFoundError as e:
        raise ResultsError("no-volume", f"no PersistentVolumeClaim {pvc} in namespace {namespace}: is the "
                           "runner installed there (kubectl apply -k manifests/runner/)? Else give --namespace "
                           "and --pvc") from e


def _outcome_problem(outcome: PodOutcome, timeout: float) -> str:
    events = [e for e in outcome.events if e.type == "Warning"]
    last = f"; last warning: {events[-1].reason}: {events[-1].message}" if events else ""
    if outcome.phase == "Rejected":
        return f"the reader pod was refused: {outcome.message}"
    if outcome.timed_out:
        return (f"the reader pod did not finish within {timeout:.0f} s (phase {outcome.phase}{last}); the results "
                "volume is ReadWriteOnce: a run in progress on another node holds it until it ends")
    if outcome.unschedulable:
        return f"the reader pod cannot be scheduled: {outcome.message}"
    what = outcome.reason or outcome.phase
    code = f", exit code {outcome.exit_code}" if outcome.exit_code is not None else ""
    return f"the reader pod ended {what}{code}{': ' + outcome.message if outcome.message else ''}{last}"


def _read(cluster: Cluster, *, mode: str, namespace: str, pvc: str, run: str, image: str, max_bytes: int,
          timeout: float, handle_signals: bool) -> str:
    _check_pvc(cluster, namespace, pvc)
    with _ReaderContext(cluster, namespace=namespace, handle_signals=handle_signals,
                        liveness_interval_s=None) as ctx:
        name = f"gpuconf-results-{mode}-{ctx.run_id}"
        pod = make_reader_pod(name, mode=mode, pvc=pvc, run=run, image=image, max_bytes=max_bytes,
                              deadline_s=max(30, int(timeout)))
        outcome = run_campaign(ctx, [pod], timeout=timeout, schedule_budget=timeout, max_log_bytes=max_bytes)[name]
    log = outcome.logs.get("reader", "")
    if "reader" in outcome.truncated_logs:
        raise ResultsError("too-large", f"the reader's output reached the limit of {max_bytes} bytes: raise it "
                           "(--max-mib)")
    frames = _frames(log)
    _raise_reported(frames)
    if not outcome.succeeded or not frames:
        raise ResultsError("reader", _outcome_problem(outcome, timeout))
    return log


def list_runs(cluster: Cluster, *, namespace: str = DEFAULT_NAMESPACE, pvc: str = DEFAULT_PVC,
              image: str = RUNNER_IMAGE, max_bytes: int = DEFAULT_MAX_BYTES, timeout: float = 300.0,
              handle_signals: bool = True) -> list[RunInfo]:
    """The runs on the results volume, newest first."""
    return parse_listing(_read(cluster, mode="list", namespace=namespace, pvc=pvc, run="latest", image=image,
                               max_bytes=max_bytes, timeout=timeout, handle_signals=handle_signals))


def fetch_run(cluster: Cluster, run: str, out: Path, *, namespace: str = DEFAULT_NAMESPACE, pvc: str = DEFAULT_PVC,
              image: str = RUNNER_IMAGE, max_bytes: int = DEFAULT_MAX_BYTES, timeout: float = 300.0,
              handle_signals: bool = True) -> FetchedRun:
    """Copy run ``run`` (or the ``latest``) from the results volume into ``out``: its files land
    directly in ``out`` (report.json, report.md, report.html, junit.xml, any CNCF evidence; a
    sharded run's in ``out/shard-<index>/``)."""
    validate_run_name(run)
    log = _read(cluster, mode="fetch", namespace=namespace, pvc=pvc, run=run, image=image, max_bytes=max_bytes,
                timeout=timeout, handle_signals=handle_signals)
    archive = decode_output(log)
    if run != "latest" and archive.run != run:
        raise ResultsError("corrupt", f"asked for run {run}, the reader sent {archive.run}")
    files = safe_extract(archive.data, out)
    return FetchedRun(run=archive.run, directory=out, files=tuple(files), archive_bytes=len(archive.data))
