"""Find nvidia-smi and nccl-tests output inside a pasted text (a pod's log, ``kubectl describe``,
a user's paste) and read it with the parsers of :mod:`gpuconf.probes`.

``read_outputs(text)`` returns one :class:`ToolOutput` per output found, in input order, each with
the line where it starts, a one-line summary and its facts, or the parser's error when the output
cannot be read (a truncated table, a run cut before its summary). :mod:`gpuconf.diagnose` turns
what the outputs say into diagnoses (a MIG mode change left pending) and adds the node's driver to
a requirement error's facts, so the suites' failure hints and ``gpuconf diagnose`` read tool
output through the same parsers.

Recognised:

* the default ``nvidia-smi`` table (its ``| NVIDIA-SMI ... Driver Version:`` header, ``KMD Version:``
  from R610 on), also indented
  as ``kubectl describe`` prints logs;
* ``nvidia-smi -L`` lines;
* ``nvidia-smi mig -lgip / -lgi / -lcip / -lci`` listings (by their titles);
* the output of ``nvidia-smi -mig 0|1`` (``Enabled MIG Mode for GPU`` / the pending warning);
* one nccl-tests ``*_perf`` run (its ``# nThread`` header, plain or behind a launcher prefix).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuconf.probes.errors import ProbeParseError
from gpuconf.probes.nccl_tests import parse_nccl_tests
from gpuconf.probes.nvidia_smi import (
    NvidiaSmiFailure,
    SmiTable,
    parse_list,
    parse_mig_listing,
    parse_mig_mode,
    parse_table,
)

__all__ = ["ToolOutput", "read_outputs"]

_SMI_HEADER = re.compile(r"^(\s*)\|\s*NVIDIA-SMI \S+\s+(?:Driver|KMD) Version:")  # KMD: R610 onwards
_TIMESTAMP = re.compile(r"^\s*\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\s*$")
_BORDER = re.compile(r"^\s*\+-+\+\s*$")
_MIG_TITLE = re.compile(r"^(\s*)\|\s*(GPU instance profiles|GPU instances|Compute instance profiles|"
                        r"Compute instances):\s*\|\s*$")
_MIG_MODE = re.compile(r"^\s*(?:Warning: MIG mode is in pending (?:enable|disable) state for GPU |"
                       r"(?:Enabled|Disabled) MIG Mode for GPU )")
_LIST_LINE = re.compile(r"^\s*GPU \d+: .+ \(UUID: GPU-[0-9A-Fa-f-]+\)\s*$|^\s+MIG \S+\s+Device\s+\d+: \(UUID: MIG-")
_NCCL_HEADER = re.compile(r"# nThread \d+ nGpus \d+ ")


@dataclass(frozen=True)
class ToolOutput:
    """An nvidia-smi or nccl-tests output found in a text. ``parsed`` is the parser's result (None
    when ``error`` says why it could not be read); ``line`` is where the output starts."""

    kind: str
    line: int
    summary: str
    facts: Mapping[str, str] = field(default_factory=dict)
    error: str | None = None
    parsed: Any = None
    text: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "line": self.line, "summary": self.summary, "facts": dict(self.facts),
                "error": self.error}


def _box(lines: Sequence[str], start: int, indent: int) -> list[str]:
    """The run of table lines from ``start`` (borders, rows, blank lines), de-indented by ``indent``."""
    out: list[str] = []
    for line in lines[start:]:
        body = line[indent:] if line[:indent].strip() == "" else line
        if body.strip() and not body.lstrip().startswith(("|", "+")):
            break
        out.append(body)
    while out and not out[-1].strip():
        out.pop()
    return out


def _table_start(lines: Sequence[str], header: int) -> int:
    """The first line of the table whose version header is ``lines[header]``: its border, and the
    timestamp above it when there is one."""
    start = header - 1 if header > 0 and _BORDER.match(lines[header - 1]) else header
    if start > 0 and _TIMESTAMP.match(lines[start - 1]):
        start -= 1
    return start


def _smi_summary(t: SmiTable) -> tuple[str, dict[str, str]]:
    names = sorted({g.name for g in t.gpus})
    facts = {"driver": t.driver_version, "gpus": str(len(t.gpus))}
    if t.cuda_version:
        facts["cuda"] = t.cuda_version
    parts = [f"driver {t.driver_version}", f"CUDA {t.cuda_version or 'not shown'}",
             f"{len(t.gpus)} GPU(s): {', '.join(names)}"]
    unknown = [g.index for g in t.gpus if g.memory_total_mib is None]
    if unknown:
        parts.append(f"memory not reported for GPU {', '.join(map(str, unknown))} (unified memory)")
    pending = [g.index for g in t.gpus if g.mig_mode_pending]
    if pending:
        facts["mig_pending_gpus"] = ",".join(map(str, pending))
        parts.append(f"MIG mode change pending on GPU {', '.join(map(str, pending))}")
    if t.mig_devices:
        parts.append(f"{len(t.mig_devices)} MIG device(s)")
    return "; ".join(parts), facts


def _read(kind: str, line: int, body: str, parse: Callable[[str], Any],
          summarize: Callable[[Any], tuple[str, dict[str, str]]], base: int | None = None) -> ToolOutput:
    """Parse ``body`` (which starts at input line ``base``, default ``line``) into a ToolOutput."""
    base = line if base is None else base
    try:
        parsed = parse(body)
    except NvidiaSmiFailure as exc:
        return ToolOutput(kind, line, f"{kind} reported {exc.condition.value}: {exc.detail}",
                          {"condition": exc.condition.value}, error=None, parsed=exc, text=body)
    except ProbeParseError as exc:
        prefix = f"{exc.source}, line {exc.line}: " if exc.line is not None else f"{exc.source}: "
        message = str(exc).removeprefix(prefix)
        where = f" (line {base + exc.line - 1})" if exc.line is not None else ""
        return ToolOutput(kind, line, f"{kind} output that cannot be read{where}: {message}", {},
                          error=message, text=body)
    summary, facts = summarize(parsed)
    return ToolOutput(kind, line, summary, facts, parsed=parsed, text=body)


def _nccl_summary(run: Any) -> tuple[str, dict[str, str]]:
    facts = {"ranks": str(run.ranks), "peak_busbw_gbps": f"{run.peak_busbw_gbps:g}",
             "avg_busbw_gbps": f"{run.avg_busbw_reported:g}", "wrong": str(run.wrong_total)}
    if run.launcher_prefix:
        facts["launcher_prefix"] = run.launcher_prefix
    text = (f"{run.program or 'nccl-tests'}: {run.ranks} rank(s) on {', '.join(run.hosts)}, peak busbw "
            f"{run.peak_busbw_gbps:g} GB/s, average {run.avg_busbw_reported:g} GB/s")
    if run.wrong_total:
        text += f"; {run.wrong_total} wrong result(s): the collective corrupted data"
    if run.out_of_bounds:
        text += f"; {run.out_of_bounds} out-of-bounds value(s)"
    return text, facts


def read_outputs(text: str) -> list[ToolOutput]:
    """Every nvidia-smi / nccl-tests output in ``text``, read by its parser (see the module doc)."""
    lines = text.replace("\r\n", "\n").split("\n")
    found: list[ToolOutput] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if m := _SMI_HEADER.match(line):
            start = _table_start(lines, i)
            body = _box(lines, start + (1 if _TIMESTAMP.match(lines[start]) else 0), len(m.group(1)))
            if _TIMESTAMP.match(lines[start]):
                body.insert(0, lines[start].strip())
            found.append(_read("nvidia-smi", start + 1, "\n".join(body) + "\n", parse_table, _smi_summary))
            i = start + max(len(body), 1)
        elif m := _MIG_TITLE.match(line):
            start = i - 1 if i > 0 and _BORDER.match(lines[i - 1]) else i
            body = _box(lines, start, len(m.group(1)))
            kind = {"GPU instance profiles": "-lgip", "GPU instances": "-lgi", "Compute instance profiles": "-lcip",
                    "Compute instances": "-lci"}[m.group(2)]
            found.append(_read(f"nvidia-smi mig {kind}", start + 1, "\n".join(body) + "\n",
                               lambda t: parse_mig_listing(t)[1], _listing_summary(kind)))
            i = start + max(len(body), 1)
        elif _MIG_MODE.match(line):
            end = i
            while end < len(lines) and lines[end].strip() != "All done.":
                end += 1
            body = [s.strip() for s in lines[i:end + 1]]
            found.append(_read("nvidia-smi -mig", i + 1, "\n".join(body) + "\n", parse_mig_mode, _mode_summary))
            i = end + 1
        elif _LIST_LINE.match(line) and line.lstrip().startswith("GPU "):
            end = i
            while end < len(lines) and _LIST_LINE.match(lines[end]):
                end += 1
            body = [s.strip() if s.lstrip().startswith("GPU ") else s for s in lines[i:end]]
            found.append(_read("nvidia-smi -L", i + 1, "\n".join(body) + "\n", parse_list,
                               lambda r: (f"nvidia-smi -L: {len(r.gpus)} GPU(s), "
                                          f"{sum(len(g.mig_devices) for g in r.gpus)} MIG device(s)",
                                          {"gpus": str(len(r.gpus))})))
            i = end
        elif _NCCL_HEADER.search(line) and not any(o.kind == "nccl-tests" for o in found):
            found.append(_read("nccl-tests", i + 1, "\n".join(lines), parse_nccl_tests, _nccl_summary, base=1))
            i += 1
        else:
            i += 1
    return found


def _listing_summary(kind: str) -> Callable[[Any], tuple[str, dict[str, str]]]:
    def summary(records: Any) -> tuple[str, dict[str, str]]:
        return f"nvidia-smi mig {kind}: {len(records)} entr{'y' if len(records) == 1 else 'ies'}", {
            "entries": str(len(records))}
    return summary


def _mode_summary(changes: Any) -> tuple[str, dict[str, str]]:
    parts = [f"GPU {c.bus_id} {c.mode}" + (f" pending ({c.reason}): needs a GPU reset or a reboot" if c.pending else "")
             for c in changes]
    pending = [c.bus_id for c in changes if c.pending]
    facts = {"pending_gpus": ",".join(pending)} if pending else {}
    return "nvidia-smi -mig: " + "; ".join(parts), facts
