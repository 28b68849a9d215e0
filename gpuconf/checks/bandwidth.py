"""Host-device bandwidth and PCIe links, read from the whole-node cuda-probe (launch once, assert
many: the inventory suite's probe measures the copies and reads the links; nothing new runs).

* ``bandwidth.pcie-link-at-max``: every GPU's PCIe link runs at the generation and width its model
  has (``gpuconf/data/host_bandwidth.yaml``, or the ``--expect`` pool's declared link, or else
  the GPU's own maximum generation as NVML reads it), read while the probe's copies ran, and its
  replay counter does not grow faster than DCGM's limit during them. A GPU trained down (a bad
  riser, a misplaced card, a slot of an older generation) is DEGRADED, named by index, bus id and
  the link seen and expected.
* ``bandwidth.host-device-floor``: every GPU's pinned host-to-device and device-to-host copies
  reach the floor of its link (DEGRADED below it, FAIL far below), and no GPU is far below its
  node's other GPUs of the same model (named even on hardware without a floor).

Decisions:

* **Current link only under load.** An idle GPU lowers its link generation and width to save
  power (nvidia-smi: "These may be reduced when the GPU is not in use"), so a current value read
  at rest says nothing; without a reading under load only the maximum is judged, and said so.
* **Unknown hardware has no floor.** A model missing from the table is measured and reported, and
  a GPU far below its siblings is still named; with nothing below, the check is NOT TESTED naming
  the model and the table to extend (siblings agreeing with each other is no floor).
* **NVLink-C2C is not PCIe.** Grace superchips reach the host over NVLink-C2C: no PCIe link to
  judge (not tested), a floor of their own.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from gpuconf.checks.inventory import NVML_CHECK, nvml_blocked
from gpuconf.compat import tables
from gpuconf.compat.links import TABLE as _TABLE
from gpuconf.compat.links import HostLink, Link, host_link, link_for
from gpuconf.outcomes import COULD_NOT_RUN, NOT_APPLICABLE
from gpuconf.probes.cuda import CudaProbeReport, DeviceReport, NvmlGpu, PcieLink
from gpuconf.verdict import Outcome, Verdict, failed, not_tested, passed

__all__ = ["FLOOR_CHECK", "LINK_CHECK", "evaluate_host_device_floor", "evaluate_pcie_link_at_max", "series"]

LINK_CHECK = "bandwidth.pcie-link-at-max"
FLOOR_CHECK = "bandwidth.host-device-floor"


def _floors(bus: str) -> tuple[float, float]:
    row = tables.load(_TABLE)["floors"][bus]
    return float(row["degraded_below"]), float(row["fail_below"])


def _label(index: int, bus_id: str | None) -> str:
    return f"GPU {index} {bus_id or '(no bus id)'}"


# --- bandwidth.pcie-link-at-max -------------------------------------------------------------------


def _replay_problem(gpu: NvmlGpu, label: str) -> str | None:
    """The replay counter's growth during the probe's copies, when faster than DCGM's limit."""
    link = gpu.pcie
    if link is None or link.replays is None or link.replays_after_load is None or not link.load_ms:
        return None
    grown = link.replays_after_load - link.replays
    limit = float(tables.load(_TABLE)["replays"]["max_per_minute"])
    rate = grown / (link.load_ms / 60000.0)
    if grown <= 0 or rate <= limit:
        return None
    return (f"{label}: {grown} PCIe replay(s) in {link.load_ms:g} ms of copies ({rate:.0f}/min, limit "
            f"{limit:g}/min; {link.replays_after_load} since the driver loaded)")


#: The widest PCIe link a GPU has: NVML's maximum width for GPU and slot at this width says the GPU's own.
_FULL_WIDTH = 16


def _wanted(gpu: NvmlGpu, link: PcieLink, row: HostLink | None,
            declared: tuple[int, int] | None) -> tuple[tuple[int, int | None], str] | None:
    """The (generation, width) the GPU's link must run at and where that comes from: the --expect
    pool, else the model's row in host_bandwidth.yaml, else the GPU's own maximum generation as NVML
    reads it (nvmlDeviceGetGpuMaxPcieLinkGeneration: the GPU's, whatever slot it sits in). NVML reads
    no GPU-only width: its maximum width is the GPU's and the slot's together, which says the GPU's
    own only at x16 (no GPU is wider); below it the width is None, not judged (an x16 GPU in an x8
    slot and an x8 GPU look alike). None: nothing but the link's own maximum would say, which is no
    expectation (it is what the link trained to)."""
    if declared is not None:
        return declared, "the --expect pool"
    if row is not None:
        return (row.link.gen or 0, row.link.width or 0), f"{row.gpu} in host_bandwidth.yaml"
    if link.gen_gpu_max is not None and link.width_max is not None:
        width = _FULL_WIDTH if link.width_max >= _FULL_WIDTH else None
        return (link.gen_gpu_max, width), (f"the GPU's own maximum Gen{link.gen_gpu_max} as NVML reads it, "
                                           f"{gpu.name or 'its model'} not being in host_bandwidth.yaml")
    return None


def _shown(want: tuple[int, int | None]) -> str:
    return f"Gen{want[0]} x{want[1]}" if want[1] is not None else f"Gen{want[0]} (width not known)"


def evaluate_pcie_link_at_max(node: str, probe: CudaProbeReport, *,
                              declared: tuple[int, int] | None = None) -> Verdict:
    """``bandwidth.pcie-link-at-max`` on ``node``; ``declared`` is the (generation, width) its
    ``--expect`` pool declares, which wins over the table; for a model the table lacks, the GPU's
    own maximum generation (``gen_gpu_max``). Never NVML's maximum for GPU and slot alone: that is
    what the link trained to, so comparing with it proves nothing.

    A GPU in a slot that cannot run its generation (NVML's maximum for GPU and slot below the GPU's
    own) is DEGRADED, as a link trained down is: the GPU works at reduced host bandwidth, and moving
    it to a slot of its generation fixes it. A PCIe GPU whose expected link nothing says (model not
    in the table, no GPU maximum from NVML) or whose link NVML could not read is not judged, nor is
    the width of a model the table lacks whose NVML maximum is below x16: the node is NOT TESTED
    naming them, unless another GPU already fails."""
    if (blocked := nvml_blocked(probe)) is not None:
        return not_tested(LINK_CHECK, node, blocked, blocked_by=NVML_CHECK)
    if not probe.nvml_gpus:
        return not_tested(LINK_CHECK, node, f"NVML lists no GPU in the probe on {node}", kind=COULD_NOT_RUN)
    evidence: list[str] = []
    problems: list[str] = []
    unjudged: list[str] = []
    narrow: dict[tuple[str, int], list[str]] = {}  # (model, NVML's width) -> its GPUs whose own width is unknown
    checked = 0
    for gpu in probe.nvml_gpus:
        label = _label(gpu.index, gpu.pci_bus_id)
        row = host_link(gpu.name or "")
        if row is not None and row.link.bus != "pcie":
            evidence.append(f"{label}: not tested, {row.gpu} reaches the host over {row.link}, not PCIe")
            continue
        link = gpu.pcie
        if link is None or link.gen_max is None or link.width_max is None:
            why = gpu.pcie_absent_reason or "; ".join(link.unread if link else ()) or "no PCIe section"
            evidence.append(f"{label}: not tested, NVML gave no PCIe link ({why})")
            unjudged.append(f"{label}: NVML gave no PCIe link ({why})")
            continue
        wanted = _wanted(gpu, link, row, declared)
        if wanted is None:
            why = (f"{gpu.name or 'the GPU'} is not in gpuconf/data/host_bandwidth.yaml and NVML gave no GPU maximum "
                   "generation: add the model to gpuconf/data/host_bandwidth.yaml")
            evidence.append(f"{label}: not tested, {why}")
            unjudged.append(f"{label}: {why}")
            continue
        want, source = wanted
        under_load = link.under_load and link.gen_current is not None and link.width_current is not None
        seen = (link.gen_current, link.width_current) if under_load else (link.gen_max, link.width_max)
        what = "under load" if under_load else "maximum (current not read under load)"
        evidence.append(f"{label}: Gen{seen[0]} x{seen[1]} {what}, max Gen{link.gen_max} x{link.width_max}"
                        + (f" (GPU Gen{link.gen_gpu_max})" if link.gen_gpu_max is not None else "")
                        + f", expected {_shown(want)} ({source}); replays {link.replays}")
        if (seen[0] or 0) < want[0] or (want[1] is not None and (seen[1] or 0) < want[1]):
            slot = (f"; the slot or platform allows at most Gen{link.gen_max}, the GPU can run Gen{link.gen_gpu_max}"
                    if link.gen_gpu_max is not None and link.gen_max < link.gen_gpu_max else "")
            problems.append(f"{label} ({gpu.name}) runs at Gen{seen[0]} x{seen[1]} {what}, "
                            f"expected {_shown(want)} ({source}){slot}")
            checked += 1
        elif want[1] is None:
            narrow.setdefault((gpu.name or "the GPU", link.width_max), []).append(f"{label} x{seen[1]} {what}")
        else:
            checked += 1
        if (replay := _replay_problem(gpu, label)) is not None:
            problems.append(replay)
    if not checked and not narrow:
        whys = {line.split(": not tested, ", 1)[-1] for line in evidence}
        detail = f"all {len(evidence)} GPU(s): {whys.pop()}" if len(whys) == 1 else "; ".join(evidence)
        return not_tested(LINK_CHECK, node, f"no GPU on {node} has a PCIe link to judge: {detail}",
                          kind=COULD_NOT_RUN if unjudged else NOT_APPLICABLE)
    skipped = len(unjudged) + sum(len(gpus) for gpus in narrow.values())
    unjudged += [f"the width of {', '.join(gpus)} (their generation the GPU's own maximum): {model} is not in "
                 f"gpuconf/data/host_bandwidth.yaml and NVML's maximum width x{width} is the GPU's and its "
                 "slot's together, so a slot narrower than the GPU cannot be told (add the model to "
                 "gpuconf/data/host_bandwidth.yaml)" for (model, width), gpus in narrow.items()]
    expected = "every GPU's PCIe link at its model's generation and width under load, replays within DCGM's limit"
    if problems:
        return failed(LINK_CHECK, node, f"{len(problems)} PCIe link problem(s) on {node}: " + "; ".join(problems)
                      + (f" (not judged: {'; '.join(unjudged)})" if unjudged else ""),
                      expected=expected, observed="; ".join(problems), evidence=tuple(evidence))
    if unjudged:
        return not_tested(LINK_CHECK, node, f"the PCIe link of {skipped} of {skipped + checked} GPU(s) on "
                          f"{node} is not judged: {'; '.join(unjudged)}"
                          + (f" ({checked} other GPU(s) at their link)" if checked else ""), kind=COULD_NOT_RUN)
    return passed(LINK_CHECK, node, f"{checked} GPU(s) on {node} run their PCIe link at its maximum",
                  expected=expected, observed=f"{checked} GPU(s) at their link", evidence=tuple(evidence))


# --- bandwidth.host-device-floor ------------------------------------------------------------------

_DIRECTIONS = (("h2d_gbps", "host-to-device"), ("d2h_gbps", "device-to-host"))


def _measured(device: DeviceReport) -> dict[str, float] | None:
    bw = device.host_device_bw
    if bw is None or bw.absent_reason is not None:
        return None
    return {key: float(v) for key, _ in _DIRECTIONS if (v := getattr(bw, key)) is not None}


def _link_of(device: DeviceReport, declared: tuple[int, int] | None) -> tuple[Link | None, str]:
    if declared is not None and (link := link_for(*declared)) is not None:
        return link, "the --expect pool's link"
    row = host_link(device.name or "")
    return (row.link, f"{row.gpu} in host_bandwidth.yaml") if row is not None else (None, "")


def series(probe: CudaProbeReport) -> dict[str, list[tuple[int, float]]]:
    """The per-GPU figures for the report: ``h2d_gbps`` and ``d2h_gbps`` by CUDA device index."""
    out: dict[str, list[tuple[int, float]]] = {key: [] for key, _ in _DIRECTIONS}
    for device in probe.devices:
        for key, value in (_measured(device) or {}).items():
            out[key].append((device.index, value))
    return {k: v for k, v in out.items() if v}


def evaluate_host_device_floor(node: str, probe: CudaProbeReport, *,
                               declared: tuple[int, int] | None = None) -> Verdict:
    """``bandwidth.host-device-floor`` on ``node``; ``declared``: the --expect pool's (gen, width)."""
    evidence: list[str] = []
    measured: dict[int, tuple[DeviceReport, dict[str, float]]] = {}
    unmeasured: list[str] = []  # whole GPUs without figures (MIG instances are not measured by design)
    for d in probe.devices:
        label = _label(d.index, d.pci_bus_id)
        figures = _measured(d)
        if figures is None:
            why = d.host_device_bw.absent_reason if d.host_device_bw else "the probe did not measure copies"
            evidence.append(f"{label}: not measured ({why})")
            if not d.mig:
                unmeasured.append(f"{label} ({why})")
            continue
        bw = d.host_device_bw
        if bw is not None and not bw.ok:
            evidence.append(f"{label}: copies did not complete: {bw.result}")
        measured[d.index] = (d, figures)
    if not measured:  # every device a MIG instance: not measured by design
        return not_tested(FLOOR_CHECK, node, f"no host-device copy was measured on {node}: " + "; ".join(evidence)
                          if evidence else f"the probe on {node} lists no CUDA device",
                          kind=NOT_APPLICABLE if evidence and not unmeasured else COULD_NOT_RUN)
    degraded: list[str] = []
    failing: list[str] = []
    no_floor: list[str] = []
    below: set[tuple[int, str]] = set()  # (GPU, direction) already under its floor
    for index, (d, figures) in measured.items():
        label = _label(index, d.pci_bus_id)
        link, source = _link_of(d, declared)
        text = ", ".join(f"{name} {figures[key]:.1f} GB/s" for key, name in _DIRECTIONS if key in figures)
        bw = d.host_device_bw
        if bw is not None and not bw.ok:
            degraded.append(f"{label}: copies did not complete ({bw.result})")
        if link is None:
            no_floor.append(d.name or "(unnamed)")
            evidence.append(f"{label}: {text} (no floor for {d.name})")
            continue
        warn, fail = _floors(link.bus)
        evidence.append(f"{label}: {text}; floor {warn * link.gbps:.1f} GB/s ({warn:g} of {link} "
                        f"{link.gbps:g} GB/s, {source})")
        for key, name in _DIRECTIONS:
            value = figures.get(key)
            if value is None:
                continue
            if value < warn * link.gbps:
                below.add((index, key))
            if value < fail * link.gbps:
                failing.append(f"{label} {name} {value:.1f} GB/s, far below the floor {warn * link.gbps:.1f} "
                               f"(under {fail * link.gbps:.1f}: {link} expected)")
            elif value < warn * link.gbps:
                degraded.append(f"{label} {name} {value:.1f} GB/s, below the floor {warn * link.gbps:.1f} "
                                f"({link} expected)")
    degraded += _inconsistent(measured, skip=below)
    if no_floor and not (failing or degraded):  # unknown hardware is unknown: siblings agreeing is no floor
        models = ", ".join(sorted(set(no_floor)))
        siblings = (f"its {len(no_floor)} GPU(s) agree with each other" if len(no_floor) > 1
                    else f"no sibling GPU on {node} to compare with")
        return not_tested(FLOOR_CHECK, node, f"no bandwidth floor for {models} in gpuconf/data/host_bandwidth.yaml "
                          f"(add the model there): {siblings}", kind=COULD_NOT_RUN)
    expected = ("every GPU's pinned copies at or above its link's floor (gpuconf/data/host_bandwidth.yaml) and "
                "within reach of its siblings")
    facts: dict[str, Any] = {"series": series(probe)}
    if failing or degraded:
        problems = failing + degraded
        outcome = Outcome.FAIL if failing else Outcome.DEGRADED
        return Verdict(FLOOR_CHECK, node, outcome, f"{len(problems)} host-device bandwidth problem(s) on {node}: "
                       + "; ".join(problems), expected=expected, observed="; ".join(problems),
                       evidence=tuple(evidence), facts=facts)
    if unmeasured:
        return not_tested(FLOOR_CHECK, node, f"{len(unmeasured)} GPU(s) on {node} were not measured, so they are not "
                          f"judged: {'; '.join(unmeasured)} ({len(measured)} other GPU(s) reach their floor)",
                          kind=COULD_NOT_RUN)
    return Verdict(FLOOR_CHECK, node, Outcome.PASS, f"{len(measured)} GPU(s) on {node} reach their host-device "
                   "floor", expected=expected, observed=f"{len(measured)} GPU(s) measured",
                   evidence=tuple(evidence), facts=facts)


def _inconsistent(measured: dict[int, tuple[DeviceReport, dict[str, float]]], *,
                  skip: set[tuple[int, str]]) -> list[str]:
    """GPUs far below the median of their node's other GPUs of the same model, per direction (those
    in ``skip``, already named under their floor, are not named twice)."""
    ratio = float(tables.load(_TABLE)["consistency"]["below_median"])
    out: list[str] = []
    for key, name in _DIRECTIONS:
        for index, (d, figures) in measured.items():
            value = figures.get(key)
            others: Sequence[float] = [f[key] for i, (o, f) in measured.items()
                                       if i != index and o.name == d.name and key in f]
            if value is None or not others or (index, key) in skip:
                continue
            median = statistics.median(others)
            if value < ratio * median:
                out.append(f"{_label(index, d.pci_bus_id)} {name} {value:.1f} GB/s, under {ratio:g} of its "
                           f"{len(others)} sibling(s)' median {median:.1f}")
    return out
