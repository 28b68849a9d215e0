"""Nodes the probes cannot run on: a per-node finding every check that judges a probe on the node
consults, so one cause is reported once.

A GeForce GPU on an R570 driver (CUDA 12.8) under a toolkit that checks requirements (legacy mode)
refuses every probe image: each is CUDA 12.9 or later, and from the 12.5 images on NVIDIA_REQUIRE_CUDA
lists no forward-compatibility term for GeForce (research/require-cuda.md, cases 6, 13, 16). Each pod
then dies at container creation with ``nvidia-container-cli: requirement error: unsatisfied
condition: cuda>=12.9, please update your driver ...`` (real wordings:
tests/fixtures/diagnose/docker-legacy-mode-cuda12.8.txt and its README). Without this finding every
suite's checks on the node fail with "no output".

Decisions:

* **Read from the whole-node probe.** It is the run's baseline probe (inventory, smoke, health and
  bandwidth read it), and it runs the least demanding image the node may start: the newest probe its
  driver supports natively, else the oldest of the matrix (gpuconf.kit.native_probe_cuda). When
  that image is rejected for its CUDA requirement, and its CUDA is no newer than any probe image of
  the run, every other probe image (a newer ``cuda>=``) is refused too: the node runs no probe.
  A rejection of a newer image (labels that do not say the node's CUDA) is not such a finding: an
  older image might start.
* **One owner.** ``smoke.vector-add-every-gpu`` (every GPU runs a kernel, the quick tier) fails with
  the requirement error and the remedy; every other check that needs a probe on the node is NOT
  TESTED with :attr:`ProbeBlock.reason`.
* **Only the requirement error.** Other creation failures (a hook error, a missing runtime handler)
  may be image-specific or have their own checks; they stay with them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpuconf.cluster import PodOutcome
from gpuconf.compat import tables
from gpuconf.compat.versions import VersionError, parse_cuda
from gpuconf.verdict import Verdict, failed

__all__ = ["ProbeBlock", "evaluate_probe_block", "probe_block"]

#: Container states of a container that was never created or never started (kubelet reasons; a
#: prestart hook failure under containerd is a terminated StartError, exit code 128).
_NOT_STARTED = frozenset({"StartError", "CreateContainerError", "RunContainerError", "ContainerCannotRun"})
#: The runtime's wrapper around nvidia-container-cli's message ends in ": unknown" (containerd/runc).
_WRAPPER_TAIL = re.compile(r":\s*unknown\s*$")


@dataclass(frozen=True)
class ProbeBlock:
    """No probe image can start on ``node``: the ``cuda`` probe image, the run's least demanding,
    was rejected at container creation with ``error``."""

    node: str
    cuda: str  # the rejected image's CUDA (12.9.1)
    required: str  # the CUDA its requirement names (12.9)
    error: str  # nvidia-container-cli: requirement error: unsatisfied condition: ...

    @property
    def reason(self) -> str:
        """What every check that needs a probe on the node says (NOT TESTED)."""
        return f"no probe image could start on {self.node}: {self.error}"


def probe_block(node: str, outcome: PodOutcome | None, probe_cudas: Iterable[str]) -> ProbeBlock | None:
    """The finding for ``node`` from its whole-node probe ``outcome``, or None: the probe container
    was refused at creation with a CUDA requirement error, for an image no newer than every probe
    image of the run (``probe_cudas``)."""
    from gpuconf.diagnose import diagnose

    if outcome is None:
        return None
    try:
        probe = outcome.container("probe")
    except KeyError:
        return None
    if probe.reason not in _NOT_STARTED or outcome.logs.get("probe"):
        return None
    texts = [probe.message or "", *(e.message for e in outcome.events)]
    found = next((d for d in diagnose("\n".join(texts)) if d.category == "requirement-unsatisfied"), None)
    required = found.facts.get("required_cuda") if found is not None else None
    cuda = _image_cuda(probe.image)
    if found is None or required is None or cuda is None:
        return None
    try:
        rejected = parse_cuda(required).major_minor
        oldest = min(parse_cuda(c).major_minor for c in probe_cudas)
    except (VersionError, ValueError):
        return None
    if rejected > oldest:
        return None  # an older probe image might start
    return ProbeBlock(node, cuda, required, _WRAPPER_TAIL.sub("", found.excerpt).strip())


_IMAGE_CUDA = re.compile(r"(?:cuda-probe:[^:@]*-cuda|nvidia/cuda:)(\d+\.\d+(?:\.\d+)?)")


def _image_cuda(image: str) -> str | None:
    """The CUDA of a probe image reference: ``nvidia/cuda:12.9.1-devel-ubuntu24.04`` (compiled in
    place) or ``R/gpuconf/cuda-probe:<probe>-cuda12.9.1`` (prebuilt)."""
    match = _IMAGE_CUDA.search(image)
    return match.group(1) if match else None


def evaluate_probe_block(block: ProbeBlock, labels: Mapping[str, str], *, check: str) -> Verdict:
    """The one failure of a node no probe can start on, for the check that owns it (smoke): the
    requirement error, what the node has (its GFD labels) and what it needs."""
    from gpuconf.checks.compat import make_target

    target = make_target(block.node, labels)
    facts = target.model
    branch = tables.branch_for_cuda(parse_cuda(block.required))
    has = f"driver {target.driver}" if target.driver else "driver"
    native = tables.native_cuda(facts.driver) if facts is not None else None
    if native is not None:
        has += f" (CUDA {native.major}.{native.minor})"
    gpu_class = facts.gpu_class if facts is not None else None
    on = f"its {target.gpu} ({gpu_class}) GPUs" if target.gpu and gpu_class else "its GPUs"
    compat = ("forward compatibility (cuda-compat) works on data-center GPUs only (no image of CUDA 12.5 or "
              "later lists a forward-compatibility branch for GeForce)") if gpu_class == "consumer" else \
        "no forward-compatibility branch the images list matches this driver and GPU"
    remedy = (f"Every probe image (CUDA {block.required} and later) is refused at container creation on {block.node}: "
              f"its {has} is older than their CUDA, the toolkit checks NVIDIA_REQUIRE_CUDA (legacy mode), and "
              f"{compat}. Upgrade the driver on {block.node} to branch R{branch or '?'} or later (CUDA "
              f"{block.required}); until then no current CUDA image runs on {on}, only images of CUDA up to the "
              "driver's own.")
    return failed(check, block.node, f"{block.reason} (the CUDA {block.cuda} probe image, the run's least demanding, "
                  "was rejected at container creation)",
                  expected=f"a probe container created on {block.node}", observed=block.error,
                  evidence=(f"probe image CUDA {block.cuda} rejected: {block.error}",), remedy=remedy)
