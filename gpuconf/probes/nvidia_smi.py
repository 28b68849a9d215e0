"""Parse ``nvidia-smi`` text: ``-L``, ``--query-gpu=... --format=csv``, the default table, the MIG
listings (``nvidia-smi mig -lgip / -lgi / -lcip / -lci``) and the output of ``nvidia-smi -mig 0|1``.

Pure functions over captured stdout (stderr merged is fine); no subprocess here.

Three things nvidia-smi prints instead of its output are told apart (:class:`SmiCondition`):

* ``No devices were found``: the driver answered and there is no GPU. :func:`parse_list` and
  :func:`parse_query_csv` return an empty result with ``no_devices=True``; :func:`parse_table`
  raises :class:`NvidiaSmiFailure` (a table without GPUs has no driver or CUDA version to report).
* ``NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver``: the kernel
  module is not loaded (or not visible in the container). Every parser raises
  :class:`NvidiaSmiFailure` with ``condition=DRIVER_NOT_LOADED``.
* ``Failed to initialize NVML: Driver/library version mismatch`` (optionally followed by
  ``NVML library version: 570.124``): user-space library and kernel module differ, typically
  after a driver upgrade without a reboot. ``condition=VERSION_MISMATCH``.

Any other ``Failed to initialize NVML: <reason>`` (``Unknown Error`` is what a container prints
after losing its device cgroup, NVIDIA/nvidia-container-toolkit#48) is ``NVML_INIT_FAILED``.

The table is read in the R440 to R580 layouts, with GPUs whose memory reads ``Not Supported``
(unified-memory parts such as GB10: ``memory_*_mib`` None) and MIG sections where several compute
instances share one GPU instance (the memory cell spans their rows: ``memory_shared``).

Everything else that does not read as the expected output raises :class:`ProbeParseError` with a
line number; a truncated table (for instance without its Processes section), a MIG listing without
its closing border and ``-mig`` output without its final ``All done.`` are not returned.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from gpuconf.probes.errors import ProbeParseError

LIST_SOURCE = "nvidia-smi -L"
QUERY_SOURCE = "nvidia-smi --query-gpu"
TABLE_SOURCE = "nvidia-smi"


class SmiCondition(enum.Enum):
    """What nvidia-smi said instead of its output."""

    NO_DEVICES = "no-devices"
    DRIVER_NOT_LOADED = "driver-not-loaded"
    VERSION_MISMATCH = "driver-library-version-mismatch"
    NVML_INIT_FAILED = "nvml-init-failed"
    #: ``Failed to display compute instances: Insufficient Permissions`` (MIG listings without the
    #: MIG monitor/config capability).
    NO_PERMISSION = "insufficient-permissions"


class NvidiaSmiFailure(ProbeParseError):
    """nvidia-smi reported a condition instead of output; ``condition`` names it."""

    def __init__(
        self, condition: SmiCondition, detail: str, *, source: str, line: int | None,
        nvml_library_version: str | None = None,
    ) -> None:
        self.condition = condition
        self.detail = detail
        self.nvml_library_version = nvml_library_version
        super().__init__(f"{condition.value}: {detail}", source=source, line=line)


_NO_DEVICES = re.compile(r"^\s*No devices were found\s*$")
_DRIVER_NOT_LOADED = re.compile(r"NVIDIA-SMI has failed because it couldn.t communicate with the\s+NVIDIA driver")
_NVML_FAILED = re.compile(r"Failed to initialize NVML: (.+?)\s*$", re.IGNORECASE)
_NVML_VERSION = re.compile(r"^\s*NVML library version: (\S+)\s*$")


def _raise_on_failure(lines: Sequence[str], source: str) -> bool:
    """Raise :class:`NvidiaSmiFailure` for a driver/NVML failure; return True for 'no devices'."""
    for number, line in enumerate(lines, start=1):
        m = _NVML_FAILED.search(line)
        if m is None:
            continue
        if "version mismatch" in m.group(1).lower():
            version = next((v.group(1) for v in map(_NVML_VERSION.match, lines) if v), None)
            raise NvidiaSmiFailure(SmiCondition.VERSION_MISMATCH, line.strip(), source=source, line=number,
                                   nvml_library_version=version)
        raise NvidiaSmiFailure(SmiCondition.NVML_INIT_FAILED, line.strip(), source=source, line=number)
    # the message is one line, but pasted or wrapped copies split it; match across line ends
    joined = " ".join(line.strip() for line in lines)
    if _DRIVER_NOT_LOADED.search(joined):
        number = next(n for n, line in enumerate(lines, start=1) if "NVIDIA-SMI has failed" in line)
        raise NvidiaSmiFailure(SmiCondition.DRIVER_NOT_LOADED, joined.strip(), source=source, line=number)
    content = [(n, line) for n, line in enumerate(lines, start=1) if line.strip()]
    if not any(_NO_DEVICES.match(line) for _, line in content):
        return False
    for number, line in content:
        if not _NO_DEVICES.match(line):
            raise ProbeParseError(f"unexpected text next to 'No devices were found': {line!r}",
                                  source=source, line=number)
    return True


# --------------------------------------------------------------------------------------------- -L

_LIST_GPU = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[0-9A-Fa-f-]+)\)\s*$")
_LIST_MIG = re.compile(r"^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[0-9A-Fa-f-]+)\)\s*$")


@dataclass(frozen=True)
class ListedMigDevice:
    """A ``  MIG 1g.10gb     Device  0: (UUID: MIG-...)`` line under its GPU."""

    profile: str
    device: int
    uuid: str


@dataclass(frozen=True)
class ListedGpu:
    """A ``GPU 0: NAME (UUID: GPU-...)`` line with the MIG devices listed under it."""

    index: int
    name: str
    uuid: str
    mig_devices: tuple[ListedMigDevice, ...]


@dataclass(frozen=True)
class GpuList:
    """``nvidia-smi -L``. ``no_devices`` is True only for 'No devices were found' (gpus is empty)."""

    gpus: tuple[ListedGpu, ...]
    no_devices: bool


def parse_list(text: str) -> GpuList:
    """Parse ``nvidia-smi -L`` (``--list-gpus``) output."""
    lines = text.splitlines()
    if _raise_on_failure(lines, LIST_SOURCE):
        return GpuList(gpus=(), no_devices=True)
    gpus: list[ListedGpu] = []
    migs: list[ListedMigDevice] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if m := _LIST_GPU.match(line):
            if gpus:
                gpus[-1] = _with_migs(gpus[-1], migs)
            migs = []
            index = int(m.group(1))
            if index != len(gpus):
                raise ProbeParseError(f"GPU {index} listed where GPU {len(gpus)} was expected",
                                      source=LIST_SOURCE, line=number)
            gpus.append(ListedGpu(index=index, name=m.group(2), uuid=m.group(3), mig_devices=()))
        elif m := _LIST_MIG.match(line):
            if not gpus:
                raise ProbeParseError("MIG device listed before any GPU", source=LIST_SOURCE, line=number)
            migs.append(ListedMigDevice(profile=m.group(1), device=int(m.group(2)), uuid=m.group(3)))
        else:
            raise ProbeParseError(f"not an nvidia-smi -L line: {line.strip()!r}", source=LIST_SOURCE, line=number)
    if not gpus:
        raise ProbeParseError("no GPU lines (empty output)", source=LIST_SOURCE, line=None)
    gpus[-1] = _with_migs(gpus[-1], migs)
    return GpuList(gpus=tuple(gpus), no_devices=False)


def _with_migs(gpu: ListedGpu, migs: list[ListedMigDevice]) -> ListedGpu:
    return ListedGpu(index=gpu.index, name=gpu.name, uuid=gpu.uuid, mig_devices=tuple(migs))


# ---------------------------------------------------------------------------------- --query-gpu

# Short names nvidia-smi accepts and the names it prints in the CSV header (--help-query-gpu).
_ALIASES = {
    "gpu_name": "name",
    "gpu_serial": "serial",
    "gpu_uuid": "uuid",
    "gpu_bus_id": "pci.bus_id",
    "clocks.gr": "clocks.current.graphics",
    "clocks.sm": "clocks.current.sm",
    "clocks.mem": "clocks.current.memory",
    "clocks.video": "clocks.current.video",
    "clocks.applications.gr": "clocks.applications.graphics",
    "clocks.applications.mem": "clocks.applications.memory",
    "clocks.default_applications.gr": "clocks.default_applications.graphics",
    "clocks.default_applications.mem": "clocks.default_applications.memory",
    "clocks.max.gr": "clocks.max.graphics",
    "clocks.max.mem": "clocks.max.memory",
}
_INT_EXACT = {"index", "count", "fan.speed"}
_INT_PREFIXES = ("memory.", "utilization.", "temperature.", "clocks.", "pcie.link.", "ecc.errors.")
_FLOAT_PREFIXES = ("power.", "enforced.power.")
_INT_VALUE = re.compile(r"^(-?\d+)(?: ([A-Za-z%]+))?$")
_FLOAT_VALUE = re.compile(r"^(-?\d+(?:\.\d+)?)(?: ([A-Za-z%]+))?$")
_UNAVAILABLE = re.compile(r"^\[(.+)\]$")

QueryValue = int | float | str | None


def canonical_field(name: str) -> str:
    """The name nvidia-smi prints in the CSV header for a ``--query-gpu`` field."""
    name = name.strip()
    return _ALIASES.get(name, name)


def _kind(field: str) -> type:
    field = canonical_field(field)
    if field in _INT_EXACT or field.startswith(_INT_PREFIXES):
        return int
    if field.startswith(_FLOAT_PREFIXES):
        return float
    return str


@dataclass(frozen=True)
class QueryRow:
    """One CSV row. ``values[field]`` is None where nvidia-smi printed ``[N/A]``,
    ``[Not Supported]`` …; ``unavailable[field]`` keeps that reason (``N/A``, ``Not Supported``)."""

    line: int
    values: Mapping[str, QueryValue]
    unavailable: Mapping[str, str]

    def __getitem__(self, field: str) -> QueryValue:
        return self.values[field]


@dataclass(frozen=True)
class QueryResult:
    """``--query-gpu`` output; ``units`` comes from the header (``memory.total [MiB]``) when present."""

    fields: tuple[str, ...]
    header: bool
    units: Mapping[str, str]
    rows: tuple[QueryRow, ...]
    no_devices: bool


def _header_names(line: str) -> tuple[list[str], dict[int, str]]:
    names: list[str] = []
    units: dict[int, str] = {}
    for i, cell in enumerate(line.split(",")):
        m = re.fullmatch(r"\s*(\S+?)(?: \[([^\]]+)\])?\s*", cell)
        names.append(canonical_field(m.group(1)) if m else cell.strip())
        if m and m.group(2):
            units[i] = m.group(2)
    return names, units


def _typed(field: str, token: str, line: int) -> tuple[QueryValue, str | None]:
    if m := _UNAVAILABLE.match(token):
        return None, m.group(1)
    if token == "N/A":  # printed without brackets by some drivers under nounits
        return None, "N/A"
    kind = _kind(field)
    if kind is str:
        if not token:
            raise ProbeParseError(f"{field}: empty value", source=QUERY_SOURCE, line=line)
        return token, None
    pattern = _INT_VALUE if kind is int else _FLOAT_VALUE
    m = pattern.match(token)
    if m is None:
        raise ProbeParseError(f"{field}: cannot read {token!r} as {kind.__name__}", source=QUERY_SOURCE, line=line)
    return (int(m.group(1)) if kind is int else float(m.group(1))), None


def parse_query_csv(text: str, fields: Sequence[str], *, header: bool | None = None) -> QueryResult:
    """Parse ``nvidia-smi --query-gpu=FIELDS --format=csv[,noheader][,nounits]``.

    ``fields`` are the names passed to ``--query-gpu`` (aliases such as ``gpu_name`` allowed);
    ``header``: True when ``noheader`` was not given, False when it was, None to accept either.
    Values are int, float or str by field (``driver_version`` stays ``"440.64"``), with units
    stripped; unavailable values are None with their reason kept.
    """
    wanted = tuple(f.strip() for f in fields)
    if not wanted or any(not f for f in wanted):
        raise ValueError("parse_query_csv needs the list of queried fields")
    lines = text.splitlines()
    if _raise_on_failure(lines, QUERY_SOURCE):
        return QueryResult(fields=wanted, header=False, units={}, rows=(), no_devices=True)
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise ProbeParseError("empty output", source=QUERY_SOURCE, line=None)
    names, unit_at = _header_names(lines[0])
    has_header = names == [canonical_field(f) for f in wanted]
    if header is True and not has_header:
        raise ProbeParseError(f"expected the CSV header for {', '.join(wanted)}; found {lines[0].strip()!r}",
                              source=QUERY_SOURCE, line=1)
    if header is False and has_header:
        raise ProbeParseError("unexpected CSV header (the query asked for noheader)", source=QUERY_SOURCE, line=1)
    start = 1 if has_header else 0
    if start >= len(lines):
        raise ProbeParseError("header without any GPU row", source=QUERY_SOURCE, line=len(lines) + 1)
    rows = tuple(_query_row(lines[i], wanted, i + 1) for i in range(start, len(lines)))
    units = {wanted[i]: u for i, u in unit_at.items()} if has_header else {}
    return QueryResult(fields=wanted, header=has_header, units=units, rows=rows, no_devices=False)


def _query_row(line: str, fields: tuple[str, ...], number: int) -> QueryRow:
    tokens = [t.strip() for t in line.split(",")]
    if len(tokens) != len(fields):
        raise ProbeParseError(f"expected {len(fields)} columns, found {len(tokens)}: {line.strip()!r}",
                              source=QUERY_SOURCE, line=number)
    values: dict[str, QueryValue] = {}
    unavailable: dict[str, str] = {}
    for field, token in zip(fields, tokens, strict=True):
        value, reason = _typed(field, token, number)
        values[field] = value
        if reason is not None:
            unavailable[field] = reason
    return QueryRow(line=number, values=values, unavailable=unavailable)


# -------------------------------------------------------------------------------- default table

_TIMESTAMP = re.compile(r"^\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\s*$")
_BORDER = re.compile(r"^\+-+\+$")
_RULE = re.compile(r"^[|+]-+(?:\+-+)*[|+]$")
_DOUBLE_RULE = re.compile(r"^\|=+(?:\+=+)*\|$")
_BLOCK_END = re.compile(r"^\+-+(?:\+-+)+\+$")
# R610 renamed the banner's fields (``KMD Version:``, ``CUDA UMD Version:``; 610.43.02 prints CUDA UMD
# 13.3): both spellings are read (tests/data/real/nvidia-smi/table_610_b200_kmd_umd_banner.txt).
_SMI_HEADER = re.compile(
    r"^\|\s*NVIDIA-SMI (\S+)\s+(?:Driver|KMD) Version: (\S+)(?:\s+CUDA (?:UMD )?Version: (\S+))?\s*\|$"
)
_GPU_CELL = re.compile(r"^\s*(\d+)\s+(.+?)\s+(On|Off|N/A)\s*$")
_BUS_ID = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]"
_BUS_CELL = re.compile(rf"^\s*({_BUS_ID})\s+(On|Off|N/A)\s*$")
_MEMORY_CELL = re.compile(r"^\s*(\d+)MiB\s*/\s*(\d+)MiB\s*$")
# Unified-memory GPUs (GB10) print "Not Supported": NVML's memory query returns NOT_SUPPORTED.
_MEMORY_UNAVAILABLE = re.compile(r"^\s*(?:Not Supported|N/A)\s*$")
# A rule under a MIG device whose memory cell continues into the next device's rows (compute
# instances sharing one GPU instance): "+-----+          +-----+-----+".
_SPAN_RULE = re.compile(r"^\+-+\+ +\+-+(?:\+-+)*\+$")
_UTIL_CELL = re.compile(r"^\s*(?:(\d+)%|N/A)\s+(.+?)\s*$")
_MIG_MODE_CELL = re.compile(r"^\s*(N/A|Enabled|Disabled)(\*)?\s*$")
_MIG_IDS_CELL = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$")
_MIG_SM_CELL = re.compile(r"^\s*(\d+)\s+\S+\s*$")
_PROC_GI = re.compile(r"^\|\s*(\d+)\s+(\S+)\s+(\S+)\s+(\d+)\s+([CGM+]+)\s+(.*?)\s+(\d+MiB|N/A)\s*\|$")
_PROC_OLD = re.compile(r"^\|\s*(\d+)\s+(\d+)\s+([CGM+]+)\s+(.*?)\s+(\d+MiB|N/A)\s*\|$")


@dataclass(frozen=True)
class SmiGpu:
    """One GPU block of the table.

    ``name_truncated``: the table cuts long names to its column and ends them with ``...``
    (``Tesla P100-PCIE...``); take the full name from ``-L`` or ``--query-gpu=name``.
    ``mig_mode`` is None on drivers whose table has no ``MIG M.`` row (before R450);
    ``mig_mode_pending`` is the ``*`` shown while a MIG mode change waits for a GPU reset.
    ``memory_used_mib``/``memory_total_mib`` are None where nvidia-smi prints ``Not Supported``
    (unified memory, e.g. GB10: NVML cannot report a framebuffer).
    """

    index: int
    name: str
    name_truncated: bool
    persistence_mode: str
    bus_id: str
    display_active: str
    volatile_uncorrected_ecc: str
    memory_used_mib: int | None
    memory_total_mib: int | None
    utilization_percent: int | None
    compute_mode: str
    mig_mode: str | None
    mig_mode_pending: bool


@dataclass(frozen=True)
class SmiMigDevice:
    """A row of the ``MIG devices:`` section. Compute instances of one GPU instance share its memory:
    nvidia-smi prints the memory once, in a cell spanning their rows, and each of them carries that
    GPU instance's figures with ``memory_shared`` True."""

    gpu: int
    gpu_instance: int
    compute_instance: int
    mig_device: int
    memory_used_mib: int
    memory_total_mib: int
    sm_count: int
    memory_shared: bool = False


@dataclass(frozen=True)
class SmiProcess:
    """A row of the ``Processes:`` section; ``gpu_instance``/``compute_instance`` are None when
    printed ``N/A`` (no MIG) or absent (drivers before R450); ``memory_mib`` None when ``N/A``."""

    gpu: int
    gpu_instance: int | None
    compute_instance: int | None
    pid: int
    type: str
    process_name: str
    memory_mib: int | None


@dataclass(frozen=True)
class SmiTable:
    """The default ``nvidia-smi`` table. ``smi_version`` differs from ``driver_version`` under WSL."""

    timestamp: str | None
    smi_version: str
    driver_version: str
    cuda_version: str | None
    gpus: tuple[SmiGpu, ...]
    mig_devices: tuple[SmiMigDevice, ...]
    processes: tuple[SmiProcess, ...]


class _Cursor:
    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = lines
        self.i = 0

    @property
    def number(self) -> int:
        return self.i + 1

    def peek(self) -> str | None:
        return self.lines[self.i] if self.i < len(self.lines) else None

    def take(self, what: str) -> str:
        line = self.peek()
        if line is None:
            raise self.fail(f"output ends where {what} was expected (truncated?)")
        self.i += 1
        return line

    def expect(self, pattern: re.Pattern[str], what: str) -> re.Match[str]:
        line = self.take(what)
        m = pattern.match(line)
        if m is None:
            self.i -= 1
            raise self.fail(f"expected {what}, found {line.strip()!r}")
        return m

    def skip_blank(self) -> None:
        while (line := self.peek()) is not None and not line.strip():
            self.i += 1

    def fail(self, message: str) -> ProbeParseError:
        return ProbeParseError(message, source=TABLE_SOURCE, line=self.number)


def _cells(line: str, count: int, cur: _Cursor) -> list[str]:
    parts = line.split("|")
    if len(parts) != count + 2 or parts[0] or parts[-1].strip():
        cur.i -= 1
        raise cur.fail(f"expected a table row of {count} cells, found {line.strip()!r}")
    return parts[1:-1]


def _match(pattern: re.Pattern[str], cell: str, what: str, cur: _Cursor, line_offset: int) -> re.Match[str]:
    m = pattern.match(cell)
    if m is None:
        raise ProbeParseError(f"unreadable {what} {cell.strip()!r}", source=TABLE_SOURCE, line=cur.i + line_offset)
    return m


def _column_headers(cur: _Cursor) -> list[str]:
    headers: list[str] = []
    while (line := cur.peek()) is not None and not _DOUBLE_RULE.match(line):
        if not line.startswith("|"):
            raise cur.fail(f"expected the column headers, found {line.strip()!r}")
        headers.append(line)
        cur.i += 1
    cur.expect(_DOUBLE_RULE, "the '|====|' rule under the column headers")
    return headers


def _gpu_block(cur: _Cursor, rows: int) -> SmiGpu:
    first = _cells(cur.take("a GPU row"), 3, cur)
    second = _cells(cur.take("the GPU's second row"), 3, cur)
    third = _cells(cur.take("the GPU's MIG row"), 3, cur) if rows == 3 else None
    top = -rows + 1  # line number offset of the first row relative to cur.i
    gpu = _match(_GPU_CELL, first[0], "GPU index/name/persistence", cur, top)
    bus = _match(_BUS_CELL, first[1], "bus id", cur, top)
    unavailable = _MEMORY_UNAVAILABLE.match(second[1]) is not None
    mem = None if unavailable else _match(_MEMORY_CELL, second[1], "memory usage", cur, top + 1)
    util = _match(_UTIL_CELL, second[2], "utilization/compute mode", cur, top + 1)
    mig_mode: str | None = None
    pending = False
    if third is not None:
        mig = _match(_MIG_MODE_CELL, third[2], "MIG mode", cur, top + 2)
        mig_mode, pending = mig.group(1), mig.group(2) == "*"
    cur.expect(_BLOCK_END, "the '+---+' rule closing a GPU block")
    name = gpu.group(2)
    return SmiGpu(
        index=int(gpu.group(1)), name=name, name_truncated=name.endswith("..."),
        persistence_mode=gpu.group(3), bus_id=bus.group(1), display_active=bus.group(2),
        volatile_uncorrected_ecc=first[2].strip(), memory_used_mib=None if mem is None else int(mem.group(1)),
        memory_total_mib=None if mem is None else int(mem.group(2)),
        utilization_percent=None if util.group(1) is None else int(util.group(1)),
        compute_mode=util.group(2), mig_mode=mig_mode, mig_mode_pending=pending,
    )


def _section_title(cur: _Cursor) -> str | None:
    """After blank lines, the title of the next '+---+' / '| Title:' section, if any."""
    cur.skip_blank()
    line = cur.peek()
    if line is None:
        return None
    if not _BORDER.match(line) or cur.i + 1 >= len(cur.lines):
        raise cur.fail(f"expected a section border, found {line.strip()!r}")
    title = cur.lines[cur.i + 1].strip("| ")
    return title.split(":")[0] + ":" if ":" in title else title


def _mig_section(cur: _Cursor) -> list[SmiMigDevice]:
    cur.expect(_BORDER, "the MIG devices border")
    cur.take("the 'MIG devices:' title")
    cur.expect(_BLOCK_END, "the MIG devices column rule")
    _column_headers(cur)
    devices: list[SmiMigDevice] = []
    if (line := cur.peek()) is not None and "No MIG devices found" in line:
        cur.i += 1
        cur.expect(_BORDER, "the border closing 'No MIG devices found'")
        return devices
    spanning = False  # the previous device's memory cell continues into this device's rows
    while (line := cur.peek()) is not None and line.startswith("|"):
        cells = _cells(cur.take("a MIG device row"), 4, cur)
        ids = _match(_MIG_IDS_CELL, cells[0], "MIG ids", cur, 0)
        sm = _match(_MIG_SM_CELL, cells[2], "MIG SM count", cur, 0)
        gpu, gpu_instance = int(ids.group(1)), int(ids.group(2))
        if cells[1].strip():
            if spanning:
                raise cur.fail("a MIG device with its own memory inside a spanning memory cell")
            mem = _match(_MEMORY_CELL, cells[1], "MIG memory usage", cur, 0)
            used, total, shared = int(mem.group(1)), int(mem.group(2)), False
        else:
            if not spanning or (devices[-1].gpu, devices[-1].gpu_instance) != (gpu, gpu_instance):
                raise cur.fail("a MIG device row without memory that does not continue its GPU instance's cell")
            used, total, shared = devices[-1].memory_used_mib, devices[-1].memory_total_mib, True
            devices[-1] = replace(devices[-1], memory_shared=True)
        devices.append(SmiMigDevice(
            gpu=gpu, gpu_instance=gpu_instance, compute_instance=int(ids.group(3)),
            mig_device=int(ids.group(4)), memory_used_mib=used, memory_total_mib=total,
            sm_count=int(sm.group(1)), memory_shared=shared,
        ))
        while (line := cur.peek()) is not None and line.startswith("|"):
            _cells(cur.take("a MIG device continuation row"), 4, cur)
        rule = cur.take("the rule closing a MIG device")
        if _SPAN_RULE.match(rule):
            spanning = True
        elif _BLOCK_END.match(rule):
            spanning = False
        else:
            cur.i -= 1
            raise cur.fail(f"expected the rule closing a MIG device, found {rule.strip()!r}")
    if not devices:
        raise cur.fail("MIG devices section without rows")
    if spanning:
        raise cur.fail("the MIG devices section ends inside a shared memory cell (truncated?)")
    return devices


def _processes_section(cur: _Cursor) -> list[SmiProcess]:
    cur.expect(_BORDER, "the Processes border")
    title = cur.take("the 'Processes:' title")
    headers = [title, *_column_headers(cur)]
    with_instances = any(re.search(r"\bGI\b", h) for h in headers)
    processes: list[SmiProcess] = []
    while (line := cur.peek()) is not None and line.startswith("|"):
        cur.i += 1
        if "No running processes found" in line:
            continue
        processes.append(_process(line, with_instances, cur))
    cur.expect(_BORDER, "the border closing the Processes section")
    return processes


def _process(line: str, with_instances: bool, cur: _Cursor) -> SmiProcess:
    def instance(token: str) -> int | None:
        return None if token == "N/A" else int(token)

    def memory(token: str) -> int | None:
        return None if token == "N/A" else int(token.removesuffix("MiB"))

    if with_instances:
        m = _PROC_GI.match(line)
        if m is not None and re.fullmatch(r"\d+|N/A", m.group(2)) and re.fullmatch(r"\d+|N/A", m.group(3)):
            return SmiProcess(int(m.group(1)), instance(m.group(2)), instance(m.group(3)), int(m.group(4)),
                              m.group(5), m.group(6), memory(m.group(7)))
    else:
        m = _PROC_OLD.match(line)
        if m is not None:
            return SmiProcess(int(m.group(1)), None, None, int(m.group(2)), m.group(3), m.group(4),
                              memory(m.group(5)))
    raise ProbeParseError(f"unreadable process row {line.strip()!r}", source=TABLE_SOURCE, line=cur.i)


def parse_table(text: str) -> SmiTable:
    """Parse the default ``nvidia-smi`` table (R440 to R580 layouts, MIG sections included)."""
    lines = text.splitlines()
    if _raise_on_failure(lines, TABLE_SOURCE):
        raise NvidiaSmiFailure(SmiCondition.NO_DEVICES, "No devices were found", source=TABLE_SOURCE,
                               line=next(n for n, s in enumerate(lines, start=1) if s.strip()))
    cur = _Cursor(lines)
    cur.skip_blank()
    timestamp = None
    if (line := cur.peek()) is not None and _TIMESTAMP.match(line):
        timestamp = line.strip()
        cur.i += 1
    if cur.peek() is None:
        raise ProbeParseError("empty output", source=TABLE_SOURCE, line=None)
    cur.expect(_BORDER, "the '+---+' border opening the nvidia-smi table")
    header = cur.expect(_SMI_HEADER, "the 'NVIDIA-SMI ... Driver Version: ...' header")
    cur.expect(_RULE, "the rule under the version header")
    columns = _column_headers(cur)
    if not columns or "GPU" not in columns[0] or "Bus-Id" not in columns[0]:
        raise cur.fail("the column headers do not name GPU and Bus-Id")
    has_mig_row = any("MIG M." in c for c in columns)
    gpus = [_gpu_block(cur, 3 if has_mig_row else 2)]
    while (line := cur.peek()) is not None and line.startswith("|"):
        gpus.append(_gpu_block(cur, 3 if has_mig_row else 2))
    if [g.index for g in gpus] != list(range(len(gpus))):
        raise cur.fail("GPU indices are not 0..N-1 in order")
    mig_devices: list[SmiMigDevice] = []
    title = _section_title(cur)
    if title == "MIG devices:":
        mig_devices = _mig_section(cur)
        title = _section_title(cur)
    if title != "Processes:":
        raise cur.fail("no 'Processes:' section after the GPUs: the output is truncated or not nvidia-smi's"
                       if title is None else f"unexpected section {title!r}")
    processes = _processes_section(cur)
    cur.skip_blank()
    if cur.peek() is not None:
        raise cur.fail(f"unexpected text after the table: {cur.peek()!r}")
    return SmiTable(
        timestamp=timestamp, smi_version=header.group(1), driver_version=header.group(2),
        cuda_version=header.group(3), gpus=tuple(gpus), mig_devices=tuple(mig_devices),
        processes=tuple(processes),
    )


# ------------------------------------------------------------- nvidia-smi mig -lgip/-lgi/-lcip/-lci

MIG_SOURCE = "nvidia-smi mig"
_MIG_TITLES = {
    "GPU instance profiles:": "-lgip", "GPU instances:": "-lgi",
    "Compute instance profiles:": "-lcip", "Compute instances:": "-lci",
}
_MIG_FAILED = re.compile(r"^\s*Failed to display (.+?): (.+?)\s*$")
# A guess (no real capture found): the wording of an empty listing. A capture of `nvidia-smi mig -lgi`
# on a GPU in MIG mode without instances would settle it.
_MIG_NONE = re.compile(r"^\s*No (?:GPU|compute) instances? (?:profiles? )?found\b.*$", re.IGNORECASE)
_LGIP_ROW = re.compile(
    r"^\|\s*(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)/(\d+)\s+([\d.]+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s*\|$")
_LGIP_ROW2 = re.compile(r"^\|\s+(\d+)\s+(\d+)\s+(\d+)\s*\|$")
_LGI_ROW = re.compile(r"^\|\s*(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+):(\d+)\s*\|$")
_LCIP_ROW = re.compile(
    r"^\|\s*(\d+)\s+(\d+)\s+MIG\s+(\S+)\s+(\d+)(\*?)\s+(\d+)/(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*\|$")
_LCIP_ROW2 = re.compile(r"^\|\s+(\d+)\s+(\d+)\s*\|$")
_LCI_ROW = re.compile(r"^\|\s*(\d+)\s+(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)(?:\s+(\d+):(\d+))?\s*\|$")


@dataclass(frozen=True)
class MigGpuInstanceProfile:
    """A ``nvidia-smi mig -lgip`` entry: ``profile`` as the device plugin names it (``1g.10gb``,
    ``1g.10gb+me``), ``free``/``total`` instances that can still be / can be created."""

    gpu: int
    profile: str
    profile_id: int
    free: int
    total: int
    memory_gib: float
    p2p: str
    sm: int
    dec: int
    enc: int
    ce: int
    jpeg: int
    ofa: int


@dataclass(frozen=True)
class MigGpuInstance:
    """A ``nvidia-smi mig -lgi`` entry (placement ``start``:``size`` in memory slices)."""

    gpu: int
    profile: str
    profile_id: int
    instance_id: int
    placement_start: int
    placement_size: int


@dataclass(frozen=True)
class MigComputeInstanceProfile:
    """A ``nvidia-smi mig -lcip`` entry; ``default`` is the profile marked ``*`` (the whole GPU
    instance, what ``-cgi ... -C`` creates)."""

    gpu: int
    gpu_instance: int
    profile: str
    profile_id: int
    default: bool
    free: int
    total: int
    sm: int
    dec: int
    enc: int
    ofa: int
    ce: int
    jpeg: int


@dataclass(frozen=True)
class MigComputeInstance:
    """A ``nvidia-smi mig -lci`` entry (placement only where the driver prints it)."""

    gpu: int
    gpu_instance: int
    profile: str
    profile_id: int
    instance_id: int
    placement_start: int | None
    placement_size: int | None


MigListing = tuple[MigGpuInstanceProfile, ...] | tuple[MigGpuInstance, ...] | \
    tuple[MigComputeInstanceProfile, ...] | tuple[MigComputeInstance, ...]


def _mig_records(text: str, title: str) -> list[list[tuple[int, str]]]:
    """The rows of each record of a boxed ``nvidia-smi mig`` listing titled ``title`` (with line
    numbers); ``[]`` when the tool said there are none. Raises on anything that is not that listing."""
    lines = text.splitlines()
    content = [(n, line.rstrip()) for n, line in enumerate(lines, start=1) if line.strip()]
    for n, line in content:
        if m := _MIG_FAILED.match(line):
            condition = (SmiCondition.NO_PERMISSION if "insufficient permissions" in m.group(2).lower()
                         else SmiCondition.NVML_INIT_FAILED)
            raise NvidiaSmiFailure(condition, line.strip(), source=MIG_SOURCE, line=n)
    _raise_on_failure(lines, MIG_SOURCE)
    if content and all(_MIG_NONE.match(line) for _, line in content):
        return []
    if not content:
        raise ProbeParseError("empty output", source=MIG_SOURCE, line=None)

    def fail(message: str, number: int | None) -> ProbeParseError:
        return ProbeParseError(message, source=MIG_SOURCE, line=number)

    n, line = content[0]
    if not _BORDER.match(line):
        raise fail(f"expected the '+---+' border opening the listing, found {line.strip()!r}", n)
    if len(content) < 2 or content[1][1].strip("| ") != title:
        found = content[1][1].strip("| ") if len(content) > 1 else "nothing"
        raise fail(f"expected the title {title!r}, found {found!r}", content[1][0] if len(content) > 1 else None)
    i = 2
    while i < len(content) and not _DOUBLE_RULE.match(content[i][1]):
        if not content[i][1].startswith("|"):
            raise fail(f"expected the column headers, found {content[i][1].strip()!r}", content[i][0])
        i += 1
    if i >= len(content):
        raise fail("output ends in the column headers (truncated?)", None)
    i += 1
    records: list[list[tuple[int, str]]] = []
    rows: list[tuple[int, str]] = []
    for n, line in content[i:]:
        if _BORDER.match(line):
            if not rows:
                raise fail("an empty record", n)
            records.append(rows)
            rows = []
        elif line.startswith("|"):
            rows.append((n, line))
        else:
            raise fail(f"unexpected text in the listing: {line.strip()!r}", n)
    if rows:
        raise fail("the last record has no closing border: the output is truncated", rows[-1][0])
    if not records:
        raise fail("a listing without records", None)
    return records


def _rows(record: list[tuple[int, str]], patterns: Sequence[re.Pattern[str]], what: str) -> list[re.Match[str]]:
    if len(record) != len(patterns):
        raise ProbeParseError(f"a {what} record of {len(record)} rows, expected {len(patterns)}",
                              source=MIG_SOURCE, line=record[0][0])
    out = []
    for (n, line), pattern in zip(record, patterns, strict=True):
        m = pattern.match(line)
        if m is None:
            raise ProbeParseError(f"unreadable {what} row {line.strip()!r}", source=MIG_SOURCE, line=n)
        out.append(m)
    return out


def parse_mig_gpu_instance_profiles(text: str) -> tuple[MigGpuInstanceProfile, ...]:
    """Parse ``nvidia-smi mig -lgip``."""
    out = []
    for record in _mig_records(text, "GPU instance profiles:"):
        a, b = _rows(record, (_LGIP_ROW, _LGIP_ROW2), "GPU instance profile")
        out.append(MigGpuInstanceProfile(
            gpu=int(a[1]), profile=a[2], profile_id=int(a[3]), free=int(a[4]), total=int(a[5]),
            memory_gib=float(a[6]), p2p=a[7], sm=int(a[8]), dec=int(a[9]), enc=int(a[10]),
            ce=int(b[1]), jpeg=int(b[2]), ofa=int(b[3])))
    return tuple(out)


def parse_mig_gpu_instances(text: str) -> tuple[MigGpuInstance, ...]:
    """Parse ``nvidia-smi mig -lgi``; ``()`` when there are none."""
    out = []
    for record in _mig_records(text, "GPU instances:"):
        (a,) = _rows(record, (_LGI_ROW,), "GPU instance")
        out.append(MigGpuInstance(gpu=int(a[1]), profile=a[2], profile_id=int(a[3]), instance_id=int(a[4]),
                                  placement_start=int(a[5]), placement_size=int(a[6])))
    return tuple(out)


def parse_mig_compute_instance_profiles(text: str) -> tuple[MigComputeInstanceProfile, ...]:
    """Parse ``nvidia-smi mig -lcip``."""
    out = []
    for record in _mig_records(text, "Compute instance profiles:"):
        a, b = _rows(record, (_LCIP_ROW, _LCIP_ROW2), "compute instance profile")
        out.append(MigComputeInstanceProfile(
            gpu=int(a[1]), gpu_instance=int(a[2]), profile=a[3], profile_id=int(a[4]), default=a[5] == "*",
            free=int(a[6]), total=int(a[7]), sm=int(a[8]), dec=int(a[9]), enc=int(a[10]), ofa=int(a[11]),
            ce=int(b[1]), jpeg=int(b[2])))
    return tuple(out)


def parse_mig_compute_instances(text: str) -> tuple[MigComputeInstance, ...]:
    """Parse ``nvidia-smi mig -lci``; ``()`` when there are none."""
    out = []
    for record in _mig_records(text, "Compute instances:"):
        (a,) = _rows(record, (_LCI_ROW,), "compute instance")
        out.append(MigComputeInstance(
            gpu=int(a[1]), gpu_instance=int(a[2]), profile=a[3], profile_id=int(a[4]), instance_id=int(a[5]),
            placement_start=None if a[6] is None else int(a[6]),
            placement_size=None if a[7] is None else int(a[7])))
    return tuple(out)


def parse_mig_listing(text: str) -> tuple[str, MigListing]:
    """Any of the four listings, told apart by its title: ``("-lgip", profiles)`` and so on."""
    title = next((line.strip("| \t") for line in text.splitlines()[:3] if line.strip("| \t") in _MIG_TITLES), None)
    if title is None:
        _mig_records(text, "GPU instances:")  # raises the tool's failure, or says what it found instead
        raise ProbeParseError("not an nvidia-smi mig listing", source=MIG_SOURCE, line=None)
    kind = _MIG_TITLES[title]
    if kind == "-lgip":
        return kind, parse_mig_gpu_instance_profiles(text)
    if kind == "-lgi":
        return kind, parse_mig_gpu_instances(text)
    if kind == "-lcip":
        return kind, parse_mig_compute_instance_profiles(text)
    return kind, parse_mig_compute_instances(text)


# ------------------------------------------------------------------------ nvidia-smi -mig 0|1

MIG_MODE_SOURCE = "nvidia-smi -mig"
_MODE_DONE = re.compile(rf"^(Enabled|Disabled) MIG Mode for GPU ({_BUS_ID})\s*$")
_MODE_PENDING = re.compile(rf"^Warning: MIG mode is in pending (enable|disable) state for GPU ({_BUS_ID}):(.+?)\s*$")
_MODE_REBOOT = re.compile(r"^Reboot the system or try nvidia-smi --gpu-reset to make MIG mode effective on GPU (\S+)")
_MODE_IN_USE = re.compile(r"^(\S+) is currently being used by one or more other processes\b")


@dataclass(frozen=True)
class MigModeChange:
    """One GPU in the output of ``nvidia-smi -mig 0|1``. ``pending`` True means the new mode waits
    for a GPU reset or a reboot (nvidia-smi then shows the mode with ``*``); ``reason`` is what
    stopped the reset (``In use by another client``, ``Not Supported`` in VMs, ``Timeout``)."""

    bus_id: str
    mode: str  # enabled | disabled: the mode asked for
    pending: bool
    reason: str | None = None


def parse_mig_mode(text: str) -> tuple[MigModeChange, ...]:
    """Parse the output of ``nvidia-smi [-i N] -mig 0|1``; it must end with ``All done.``."""
    lines = text.splitlines()
    _raise_on_failure(lines, MIG_MODE_SOURCE)
    changes: list[MigModeChange] = []
    done = False
    for n, line in enumerate(lines, start=1):
        s = line.strip()
        if not s:
            continue
        if done:
            raise ProbeParseError(f"text after 'All done.': {s!r}", source=MIG_MODE_SOURCE, line=n)
        if s == "All done.":
            done = True
        elif m := _MODE_DONE.match(s):
            changes.append(MigModeChange(bus_id=m[2], mode=m[1].lower(), pending=False))
        elif m := _MODE_PENDING.match(s):
            changes.append(MigModeChange(bus_id=m[2], mode=f"{m[1]}d", pending=True, reason=m[3]))
        elif (m := _MODE_REBOOT.match(s) or _MODE_IN_USE.match(s)) is not None:
            if not changes or not changes[-1].pending or changes[-1].bus_id != m[1]:
                raise ProbeParseError(f"a reset/reboot note for a GPU without a pending change: {s!r}",
                                      source=MIG_MODE_SOURCE, line=n)
        else:
            raise ProbeParseError(f"not nvidia-smi -mig output: {s!r}", source=MIG_MODE_SOURCE, line=n)
    if not changes:
        raise ProbeParseError("no GPU in the output", source=MIG_MODE_SOURCE, line=None)
    if not done:
        raise ProbeParseError("no 'All done.' at the end: the output is truncated", source=MIG_MODE_SOURCE,
                              line=len(lines) or None)
    return tuple(changes)
