"""gpuconf nccl-probe output (schema ``gpuconf.nccl-probe/v1``) → a typed report.

A bandwidth number is only worth judging with the transport NCCL chose beside it, so the report
carries both; a floor check (issue: NCCL ladder) reads ``large_message_avg_busbw_gbps`` and
``transports`` together.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuconf.probes.errors import ProbeParseError
from gpuconf.probes.schema import parse_document

__all__ = ["EXIT_CODES", "SCHEMA_ID", "NcclProbeReport", "SizeResult", "parse_nccl_probe"]

SCHEMA_ID = "gpuconf.nccl-probe/v1"

EXIT_CODES = {
    0: "ok: every size all-reduced and verified",
    2: "usage error (bad flag)",
    3: "a CUDA or NCCL call failed (see failure)",
    4: "no GPU visible",
    5: "wrong all-reduce results",
    6: "timeout: a collective step, NCCL init or teardown, or the bootstrap did not finish in time",
    7: "bootstrap failed: no unique id, or the ranks disagree (world size, GPU count, sweep arguments)",
    8: "internal probe error",
}


@dataclass(frozen=True)
class SizeResult:
    bytes: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    mismatches: int
    correct: bool


@dataclass(frozen=True)
class NcclProbeReport:
    exit_code: int
    exit_reason: str
    hung: bool
    nranks: int | None
    local_gpu_uuids: tuple[str, ...]
    bootstrap_status: str | None
    failure: dict[str, Any] | None
    sizes: tuple[SizeResult, ...]
    sweep_completed: bool | None
    running_bytes: int | None  # the size in flight when a hang was detected
    peak_busbw_gbps: float | None
    large_message_avg_busbw_gbps: float | None
    all_correct: bool | None
    nccl_version: str | None
    transports: tuple[str, ...]
    nvls_used: bool | None
    gdr_enabled: bool | None
    network: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)


def _present(obj: Any) -> dict[str, Any] | None:
    return obj if isinstance(obj, dict) and obj.get("available") is not False else None


def parse_nccl_probe(stdout: str, *, exit_code: int | None = None, source: str = "nccl-probe") -> NcclProbeReport:
    """Parse one nccl-probe run. ``exit_code``, when known, must agree with the document."""
    doc = parse_document(stdout, SCHEMA_ID, source=source)
    if exit_code is not None and exit_code != doc["exit_code"]:
        raise ProbeParseError(f"the process exited {exit_code} but its document says {doc['exit_code']} "
                              f"({doc['exit_reason']})", source=source)
    sweep = _present(doc["sweep"])
    summary = _present(doc["summary"])
    bootstrap = _present(doc["bootstrap"])
    debug = doc["nccl_debug"]
    sizes = tuple(
        SizeResult(s["bytes"], s["time_us"], s["algbw_gbps"], s["busbw_gbps"], s["mismatches"], s["correct"])
        for s in (sweep["sizes"] if sweep else [])
    )
    if summary and sizes and summary["peak_busbw_gbps"] is not None:
        peak = max(s.busbw_gbps for s in sizes)
        if abs(peak - summary["peak_busbw_gbps"]) > 1e-3 * max(1.0, peak):
            raise ProbeParseError(f"summary peak busbw {summary['peak_busbw_gbps']} disagrees with the sweep's "
                                  f"{peak}", source=source)
    return NcclProbeReport(
        exit_code=doc["exit_code"], exit_reason=doc["exit_reason"], hung=doc["hung"], nranks=doc["nranks"],
        local_gpu_uuids=tuple(g["uuid"] for g in doc["local_gpus"]),
        bootstrap_status=bootstrap["status"] if bootstrap else None, failure=doc["failure"], sizes=sizes,
        sweep_completed=sweep["completed"] if sweep else None,
        running_bytes=sweep["running_bytes"] if sweep else None,
        peak_busbw_gbps=summary["peak_busbw_gbps"] if summary else None,
        large_message_avg_busbw_gbps=summary["large_message_avg_busbw_gbps"] if summary else None,
        all_correct=summary["all_correct"] if summary else None,
        nccl_version=debug.get("nccl_version") or doc["nccl"].get("version"),
        transports=tuple(debug.get("transports", [])),
        nvls_used=(debug.get("nvls") or {}).get("used"), gdr_enabled=(debug.get("gdr") or {}).get("enabled"),
        network=(debug.get("network") or {}).get("name"), raw=doc,
    )
