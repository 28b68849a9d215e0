"""Parse the text output of nccl-tests ``all_reduce_perf`` and the other ``*_perf`` binaries.

The binaries share one report (``src/common.cu``, ``src/util.cu`` in NVIDIA/nccl-tests): a run
header, one ``#  Rank`` line per rank, a results table with an out-of-place and an in-place half,
then ``# Out of bounds values`` and ``# Avg bus bandwidth``. The average is the mean busbw over
every row *and both placements* (``bw[0] += busBw; bw_count[0]++`` once per placement), so it is
not the peak: the peak is recomputed here from the rows (docs/domain.md §7).

Layouts read, each seen in real output (tests/fixtures/nccl_tests/README.md):

* 2019-2020 (nccl-tests 2.0-2.10): no ``agg iters``/``graph`` in the header, ranks without
  ``Group``, optional ``redop``/``root`` columns, an ``error`` column holding the largest
  deviation (``2e-07``) or ``N/A`` when run with ``-c 0``;
* 2021 on (2.11+): ``redop`` and ``root`` always present, ``#wrong`` counts (``N/A`` when
  unchecked), ``# Collective test starting/concluded`` and ``# nccl-tests version`` lines in 2.17+.

Layouts *not* read (no real example found): per-iteration columns (``i_min`` …), the timestamp
column and the 2017 layout with times in milliseconds; their headers are rejected by name.

Launchers that prefix every line are read too: Open MPI's ``mpirun --tag-output``
(``[1,0]<stdout>:``), Ray / SkyPilot (``(head, rank=0, pid=3808) ``), Slurm's ``srun --label``
(``0: ``) and ``kubectl logs --prefix`` (``[pod/name/container] ``), alone or nested. The prefix is
taken from the line holding the run header (``# nThread``); only lines with that exact prefix are
read (the reporting rank's stdout), everything else (other ranks, stderr, the launcher's own lines)
is skipped, and line numbers stay those of the text as given.

A run without its ``# Avg bus bandwidth`` line did not finish: that, a table with no rows, and a
row that does not parse all raise :class:`ProbeParseError` with the line number.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from gpuconf.probes.errors import ProbeParseError

SOURCE = "nccl-tests output"

_VERSION = re.compile(r"^# nccl-tests version (\S+)")
_STARTING = re.compile(r"^# Collective test starting: (\S+)\s*$")
_RUN_HEADER = re.compile(
    r"^# nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+) step: (\d+)\((factor|bytes)\)"
    r" warmup iters: (\d+) iters: (\d+)(?: agg iters: (\d+))? validation: (\d+)"
    r"(?: graph: (\d+))?(?: unalign: (\d+))?\s*$"
)
_RANK = re.compile(
    r"^#\s+Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)"
    r"\s+\[([^\]]+)\]\s+(.+?)\s*$"
)
_OUT_OF_BOUNDS = re.compile(r"^# Out of bounds values\s*: (\d+) (OK|FAILED)\s*$")
_AVG = re.compile(r"^# Avg bus bandwidth\s*: (\S+)(?: (OK|FAILED))?\s*$")
# NCCL_DEBUG=INFO interleaves lines like "host:1234:1234 [0] NCCL INFO ..." with the table.
_NCCL_LOG = re.compile(r"^\S+:\d+:\d+ \[\d+\] NCCL ")

# One launcher tag: Open MPI --tag-output, Ray/SkyPilot, srun --label, kubectl logs --prefix.
_LAUNCHER_TAG = r"(?:\[\d+,\d+\]<stdout>:|\([^()\n]*\) |\s*\d+: |\[pod/[^\]\s]+\] )"
_PREFIXED_HEADER = re.compile(rf"^(?P<prefix>{_LAUNCHER_TAG}+)# nThread ")

_LEADING = ("size", "count", "type", "redop", "root")
_PLACEMENT = ("time", "algbw", "busbw")


@dataclass(frozen=True)
class RunHeader:
    """The ``# nThread ...`` line: how the run was launched."""

    n_threads: int
    n_gpus: int
    min_bytes: int
    max_bytes: int
    step: int
    step_is_factor: bool
    warmup_iters: int
    iters: int
    agg_iters: int | None
    validation: bool
    graph: int | None
    unalign: int | None


@dataclass(frozen=True)
class RankDevice:
    """One ``#  Rank`` line: where a rank ran."""

    rank: int
    group: int | None
    pid: int
    host: str
    device: int
    bus_id: str
    name: str


@dataclass(frozen=True)
class Placement:
    """One half of a result row (out-of-place or in-place).

    ``wrong`` is the ``#wrong`` element count; ``max_error`` is the older ``error`` column (the
    largest deviation seen); both are ``None`` when the run did not check results (``N/A``).
    ``error_exceeded`` is the ``*`` nccl-tests appends to an ``error`` above its threshold.
    """

    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None
    max_error: float | None
    error_exceeded: bool

    @property
    def checked(self) -> bool:
        return self.wrong is not None or self.max_error is not None


@dataclass(frozen=True)
class SizeResult:
    """One results row: a message size measured out-of-place and in-place."""

    line: int
    size_bytes: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    out_of_place: Placement
    in_place: Placement

    @property
    def peak_busbw_gbps(self) -> float:
        return max(self.out_of_place.busbw_gbps, self.in_place.busbw_gbps)


@dataclass(frozen=True)
class NcclTestsRun:
    """A finished nccl-tests run.

    ``avg_busbw_reported`` is the tool's own ``# Avg bus bandwidth`` (mean over all sizes and both
    placements, rounded in print); ``avg_busbw_recomputed`` is the same mean from the printed rows.
    """

    program: str | None
    nccl_tests_version: str | None
    header: RunHeader
    devices: tuple[RankDevice, ...]
    rows: tuple[SizeResult, ...]
    out_of_bounds: int
    avg_busbw_reported: float
    avg_check: str | None
    #: The launcher's per-line prefix that was stripped (``[1,0]<stdout>:``), None for plain output.
    launcher_prefix: str | None = None

    @property
    def ranks(self) -> int:
        return len(self.devices)

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(d.host for d in self.devices))

    @property
    def peak_row(self) -> SizeResult:
        return max(self.rows, key=lambda r: r.peak_busbw_gbps)

    @property
    def peak_busbw_gbps(self) -> float:
        return self.peak_row.peak_busbw_gbps

    @property
    def avg_busbw_recomputed(self) -> float:
        values = [p.busbw_gbps for r in self.rows for p in (r.out_of_place, r.in_place)]
        return math.fsum(values) / len(values)

    @property
    def wrong_total(self) -> int:
        """Wrong elements over every checked placement (0 says nothing about unchecked ones)."""
        return sum(p.wrong or 0 for r in self.rows for p in (r.out_of_place, r.in_place))

    @property
    def unchecked_placements(self) -> int:
        return sum(not p.checked for r in self.rows for p in (r.out_of_place, r.in_place))

    @property
    def errors_exceeded(self) -> int:
        return sum(p.error_exceeded for r in self.rows for p in (r.out_of_place, r.in_place))


@dataclass(frozen=True)
class _Layout:
    leading: tuple[str, ...]
    error_column: str  # "#wrong" or "error"


def _fail(message: str, line: int | None) -> ProbeParseError:
    return ProbeParseError(message, source=SOURCE, line=line)


def _parse_run_header(text: str, line: int) -> RunHeader:
    m = _RUN_HEADER.match(text)
    if m is None:
        raise _fail(f"unreadable run header {text.strip()!r}", line)
    g = m.groups()

    def opt(value: str | None) -> int | None:
        return None if value is None else int(value)

    return RunHeader(
        n_threads=int(g[0]), n_gpus=int(g[1]), min_bytes=int(g[2]), max_bytes=int(g[3]),
        step=int(g[4]), step_is_factor=g[5] == "factor", warmup_iters=int(g[6]), iters=int(g[7]),
        agg_iters=opt(g[8]), validation=g[9] != "0", graph=opt(g[10]), unalign=opt(g[11]),
    )


def _parse_rank(text: str, line: int) -> RankDevice:
    m = _RANK.match(text)
    if m is None:
        raise _fail(f"unreadable rank line {text.strip()!r}", line)
    rank, group, pid, host, device, bus_id, name = m.groups()
    return RankDevice(
        rank=int(rank), group=None if group is None else int(group), pid=int(pid), host=host,
        device=int(device), bus_id=bus_id, name=name,
    )


def _parse_layout(text: str, line: int) -> _Layout:
    """Read the column header: size/count/type, optional redop/root, then two placement halves."""
    columns = text.lstrip("#").split()
    split = next((i for i, c in enumerate(columns) if c in ("time", "cputime")), len(columns))
    leading, halves = tuple(columns[:split]), ["time" if c == "cputime" else c for c in columns[split:]]
    error_column = halves[3] if len(halves) > 3 else ""
    half = [*_PLACEMENT, error_column]
    if (leading[:3] != _LEADING[:3] or list(leading) != [c for c in _LEADING if c in leading]
            or error_column not in ("#wrong", "error") or halves != half + half):
        raise _fail(f"unsupported results table layout: {' '.join(columns)}", line)
    return _Layout(leading=leading, error_column=error_column)


def _number(token: str, what: str, line: int) -> float:
    try:
        value = float(token)
    except ValueError:
        raise _fail(f"{what} {token!r} is not a number", line) from None
    if not math.isfinite(value) or value < 0:
        raise _fail(f"{what} {token!r} is not a finite non-negative number", line)
    return value


def _integer(token: str, what: str, line: int) -> int:
    if not re.fullmatch(r"-?\d+", token):
        raise _fail(f"{what} {token!r} is not an integer", line)
    return int(token)


def _parse_placement(tokens: Sequence[str], layout: _Layout, line: int) -> Placement:
    time_us = _number(tokens[0], "time", line)
    algbw = _number(tokens[1], "algbw", line)
    busbw = _number(tokens[2], "busbw", line)
    check = tokens[3]
    wrong: int | None = None
    max_error: float | None = None
    exceeded = False
    if check != "N/A":
        if layout.error_column == "#wrong":
            # printed with %6g, so a large count can read 1.23457e+06
            count = _number(check, "#wrong", line)
            if count != int(count):
                raise _fail(f"#wrong {check!r} is not a whole count", line)
            wrong = int(count)
        else:
            exceeded = check.endswith("*")
            max_error = _number(check.rstrip("*"), "error", line)
    return Placement(time_us, algbw, busbw, wrong, max_error, exceeded)


def _parse_row(text: str, layout: _Layout, line: int) -> SizeResult:
    tokens = text.split()
    width = len(layout.leading)
    if not tokens[0].isdigit():
        raise _fail(f"the results table stops at {text.strip()!r} without its summary: the run did not finish "
                    "(truncated or interrupted)", line)
    if len(tokens) != width + 8:
        raise _fail(f"result row has {len(tokens)} columns, expected {width + 8}: {text.strip()!r}", line)
    lead = dict(zip(layout.leading, tokens[:width], strict=True))
    root = lead.get("root")
    return SizeResult(
        line=line,
        size_bytes=_integer(lead["size"], "size", line),
        count=_integer(lead["count"], "count", line),
        dtype=lead["type"],
        redop=lead.get("redop"),
        root=None if root is None else _integer(root, "root", line),
        out_of_place=_parse_placement(tokens[width:width + 4], layout, line),
        in_place=_parse_placement(tokens[width + 4:], layout, line),
    )


@dataclass
class _State:
    program: str | None = None
    version: str | None = None
    header: RunHeader | None = None
    devices: list[RankDevice] | None = None
    layout: _Layout | None = None
    rows: list[SizeResult] | None = None
    out_of_bounds: int | None = None
    avg: float | None = None
    avg_check: str | None = None


def _read_devices(lines: Sequence[str], start: int, state: _State) -> int:
    """Read '#', '# Using devices' and the rank lines after the run header; return the next index."""
    devices: list[RankDevice] = []
    i = start
    while i < len(lines) and lines[i].strip() in ("#", ""):
        i += 1
    if i >= len(lines) or lines[i].strip() != "# Using devices":
        raise _fail("expected '# Using devices' after the run header", i + 1)
    i += 1
    while i < len(lines) and (re.match(r"^#\s+Rank\b", lines[i]) or not lines[i].strip()):
        if lines[i].strip():
            devices.append(_parse_rank(lines[i], i + 1))
        i += 1
    if not devices:
        raise _fail("no '#  Rank' lines under '# Using devices'", i + 1)
    if [d.rank for d in devices] != list(range(len(devices))):
        raise _fail("rank lines are not ranks 0..N-1 in order", start + 1)
    state.devices = devices
    return i


def _summary(text: str, number: int, state: _State, newline: bool) -> None:
    m = _OUT_OF_BOUNDS.match(text)
    if m is not None:
        state.out_of_bounds = int(m.group(1))
        return
    m = _AVG.match(text)
    if m is None:
        return
    if state.out_of_bounds is None:
        raise _fail("'# Avg bus bandwidth' before '# Out of bounds values'", number)
    if not newline:
        raise _fail("'# Avg bus bandwidth' line is cut off (no line end): the output is truncated", number)
    state.avg = _number(m.group(1), "average bus bandwidth", number)
    state.avg_check = m.group(2)


def _strip_launcher(raw: list[str]) -> tuple[list[str], str | None]:
    """The reporting rank's lines without the launcher's prefix; other lines become blank so that
    line numbers stay those of the input."""
    prefix = next((m["prefix"] for m in map(_PREFIXED_HEADER.match, raw) if m is not None), None)
    if prefix is None:
        return raw, None
    return [r[len(prefix):] if r.startswith(prefix) else ("\n" if r.endswith("\n") else "") for r in raw], prefix


def parse_nccl_tests(text: str) -> NcclTestsRun:
    """Parse one finished ``*_perf`` run; raise :class:`ProbeParseError` on anything less."""
    raw, prefix = _strip_launcher(text.splitlines(keepends=True))
    lines = [r.rstrip("\r\n") for r in raw]
    state = _State()
    i = 0
    while i < len(lines) and state.avg is None:
        line, number = lines[i], i + 1
        if _NCCL_LOG.match(line):
            i += 1
            continue
        if line.startswith("# nThread") and state.header is not None:
            raise _fail("a second run header: the output holds more than one run", number)
        if state.header is None:
            if line.startswith("# nThread"):
                state.header = _parse_run_header(line, number)
                i = _read_devices(lines, i + 1, state)
                continue
            if m := _VERSION.match(line):
                state.version = m.group(1)
            elif m := _STARTING.match(line):
                state.program = m.group(1)
        elif state.layout is None:
            if line.startswith("#") and re.search(r"\bsize\b", line) and "algbw" in line:
                state.layout = _parse_layout(line, number)
                state.rows = []
        elif line.startswith("#"):
            _summary(line, number, state, raw[i].endswith("\n"))
        elif line.strip():
            assert state.rows is not None
            if state.out_of_bounds is not None:
                raise _fail(f"result row after the summary: {line.strip()!r}", number)
            state.rows.append(_parse_row(line, state.layout, number))
        i += 1
    run = _finish(state, len(lines) + 1)
    return run if prefix is None else replace(run, launcher_prefix=prefix)


def _finish(state: _State, end: int) -> NcclTestsRun:
    if state.header is None or state.devices is None:
        raise _fail("no '# nThread' run header: not nccl-tests output", end if end > 1 else None)
    if state.layout is None or state.rows is None:
        raise _fail("no results table header (the run stopped before measuring)", end)
    if state.avg is None or state.out_of_bounds is None:
        raise _fail("no '# Avg bus bandwidth' line: the run did not finish", end)
    if not state.rows:
        raise _fail("the results table has no rows", end)
    return NcclTestsRun(
        program=state.program,
        nccl_tests_version=state.version,
        header=state.header,
        devices=tuple(state.devices),
        rows=tuple(state.rows),
        out_of_bounds=state.out_of_bounds,
        avg_busbw_reported=state.avg,
        avg_check=state.avg_check,
    )
