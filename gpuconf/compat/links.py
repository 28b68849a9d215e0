"""GPU models' links to the host (gpuconf/data/host_bandwidth.yaml): the PCIe generation and width,
or NVLink-C2C, and each link's per-direction rate. Pure data access: the bandwidth checks judge
against it and the simulated probe reports from it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from gpuconf.compat import tables

__all__ = ["TABLE", "HostLink", "Link", "host_link", "link_for"]

TABLE = "host_bandwidth"


@dataclass(frozen=True)
class Link:
    """One link kind of host_bandwidth.yaml: its bus, PCIe generation and width, per-direction GB/s."""

    key: str
    bus: str  # pcie | c2c
    gen: int | None
    width: int | None
    gbps: float
    source: str

    def __str__(self) -> str:
        return f"Gen{self.gen} x{self.width}" if self.bus == "pcie" else "NVLink-C2C"


@dataclass(frozen=True)
class HostLink:
    """A GPU model's link to the host and where that comes from."""

    gpu: str
    form: str  # sxm | pcie | c2c
    link: Link
    source: str


@cache
def _links() -> dict[str, Link]:
    return {key: Link(key, row["bus"], row.get("gen"), row.get("width"), float(row["gbps"]), row["source"])
            for key, row in tables.load(TABLE)["links"].items()}


def link_for(gen: int, width: int) -> Link | None:
    """The PCIe link of generation ``gen`` and ``width`` lanes (a x16 row of the table scaled to the
    width), or None for a generation the table does not know."""
    for link in _links().values():
        if link.bus == "pcie" and link.gen == gen:
            return Link(f"pcie-gen{gen}-x{width}", "pcie", gen, width, link.gbps * width / (link.width or 16),
                        link.source)
    return None


@cache
def host_link(gpu: str) -> HostLink | None:
    """The host link of the GPU model named ``gpu`` (as NVML or gpus.yaml spells it), or None."""
    model = tables.find_gpu(gpu)
    names = {gpu, model.name} if model is not None else {gpu}
    for row in tables.load(TABLE)["gpus"]:
        if row["name"] in names:
            return HostLink(row["name"], row["form"], _links()[row["link"]], row["source"])
    return None
