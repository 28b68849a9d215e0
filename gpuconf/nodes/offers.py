"""How one container asks for GPUs on one node, or why it cannot: the answers the node view gives.

Pure (no pytest, no I/O). A request names the path (device plugin, MIG resource, DRA claim, a
DRA-backed extended resource), how many units, and what the container should then see; an
:class:`Unavailable` is the one line a check that needed the request says as its NOT TESTED reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from gpuconf import outcomes
from gpuconf.probe_pods import ClaimRequest

__all__ = ["GpuRequest", "Unavailable", "Via", "Why"]


class Via(Enum):
    PLUGIN = "device plugin"  # nvidia.com/gpu (or nvidia.com/gpu.shared) in the container's limits
    MIG = "MIG resource"  # nvidia.com/mig-<profile> (mixed strategy)
    CLAIM = "DRA claim"  # a ResourceClaimTemplate on gpu.nvidia.com / mig.nvidia.com
    EXTENDED = "DRA-backed extended resource"  # KEP-5004: a DeviceClass's extendedResourceName


class Why(Enum):
    NO_GPU = "no GPU"  # nothing advertised or published
    MIG_ONLY = "MIG only"  # only MIG instances where whole GPUs are asked for
    SHARED = "shared"  # time-slicing or MPS where exclusive use is asked for
    UNHEALTHY = "unhealthy"  # advertised, none allocatable
    NO_PATH = "no path"  # the GPUs are there, but not through a path the caller can use
    TOO_FEW = "too few"  # fewer GPUs than asked for
    BLOCKED = "blocked"  # the node takes no probe now: NotReady, cordoned, or a taint not tolerated
    BUSY = "busy"  # other pods hold the GPUs the request needs


@dataclass(frozen=True)
class Unavailable:
    why: Why
    reason: str  # the one line a NOT TESTED verdict says

    def __bool__(self) -> bool:  # `if ask := node.one_gpu():` reads as "if the node can"
        return False

    @property
    def kind(self) -> str:
        """The NOT TESTED kind it means (gpuconf.outcomes): the node's state for a node that takes no
        probe now or whose GPUs others hold; could-not-run for GPUs advertised and none allocatable (a
        fault another check reports); not applicable for what the node does not have by design."""
        if self.why in (Why.BLOCKED, Why.BUSY):
            return outcomes.NODE_UNAVAILABLE
        return outcomes.COULD_NOT_RUN if self.why is Why.UNHEALTHY else outcomes.NOT_APPLICABLE


@dataclass(frozen=True)
class GpuRequest:
    """How one container asks for GPUs on one node, and what it should then see."""

    via: Via
    count: int  # units asked for: GPUs, replicas or MIG instances (for a claim: devices it gets)
    resource: str | None = None  # the extended resource (PLUGIN, MIG, EXTENDED)
    claims: tuple[ClaimRequest, ...] = ()  # CLAIM: the template's requests
    replicas: int = 1  # time-slicing replicas behind each unit (what the container sees is count/replicas)
    physical: int | None = None  # physical GPUs the request spans, when a fact says so
    held_back: int = 0  # GPUs the node advertises but does not offer (unhealthy: capacity - allocatable)
    complete: bool = False  # every physical GPU once: unshared, no MIG, none held back
    mig_units: bool = False  # the units are MIG instances (strategy single: nvidia.com/gpu is a MIG device)
    per_container: int | None = None  # the most units one container may ask for (1 under MPS), None: no limit
    note: str = ""  # evidence for the verdict: " (every GPU through one DRA claim)"

    def __bool__(self) -> bool:
        return True

    @property
    def dra(self) -> bool:
        """The GPUs come through DRA (a claim, or a DRA-backed extended resource the scheduler serves with a
        claim it makes): which device the container got is in that claim's allocation, and the DRA driver
        injects it through CDI."""
        return self.via in (Via.CLAIM, Via.EXTENDED)

    def describe(self) -> str:
        """What the container is given, for evidence: ``1 nvidia.com/gpu``, ``2 GPUs through a DRA claim on
        gpu.nvidia.com``, ``1 nvidia.com/gpu served through DRA``."""
        if self.via is Via.CLAIM:
            classes = ", ".join(dict.fromkeys(c.device_class for c in self.claims))
            return f"{self.count} {'GPU' if self.count == 1 else 'GPUs'} through a DRA claim on {classes}"
        if self.via is Via.EXTENDED:
            return f"{self.count} {self.resource} served through DRA"
        return f"{self.count} {self.resource}"

    @property
    def limits(self) -> dict[str, int]:
        """The container's resource limits for this request (none for a claim)."""
        return {self.resource: self.count} if self.resource is not None and self.count > 0 else {}
