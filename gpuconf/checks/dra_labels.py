"""``labels.agree-with-dra``: where GFD's label and NVIDIA's DRA driver's ResourceSlice attribute both
say a fact about a node's GPUs, they say the same (issue 27: "where both exist and disagree, that is a
finding naming both").

Compared, per GPU device of the slice (type gpu; a MIG instance is not the GPU GFD describes):

============================  ===============================================  ===========================
GFD label                     DRA attribute                                    normalisation
============================  ===============================================  ===========================
nvidia.com/gpu.product        productName                                      spaces as dashes; GFD's
                                                                               -SHARED and -MIG-<profile>
                                                                               suffixes dropped
nvidia.com/cuda.driver-       driverVersion                                    as versions: DRA drops
version.full (or cuda.                                                         leading zeros (580.65.06 is
driver.major/minor/rev)                                                        580.65.6)
nvidia.com/cuda.runtime-      cudaDriverVersion                                as versions (13.0 is 13.0.0)
version.full (or cuda.
runtime.major/minor)
nvidia.com/gpu.compute.       cudaComputeCapability                            as versions (8.0 is 8.0.0)
major/minor
nvidia.com/gpu.family         architecture                                     case ignored (ampere, Ampere)
nvidia.com/gpu.memory (MiB)   capacity memory                                  within 1 % (MEMORY_TOLERANCE)
============================  ===============================================  ===========================

and per node: ``nvidia.com/gpu.count`` against the physical GPUs the slice publishes (devices of type gpu
and the parents of MIG devices).

The normalisations are those of the real pair in tests/data/real/dra/v1-25.3.2-grid-a100-vks.yaml (the
slice and the GFD labels of one node: 580.65.06 / 580.65.6, 13/0 / 13.0.0, 8/0 / 8.0.0, 8192 / 8Gi,
GRID-A100-8C / GRID A100-8C, ampere / Ampere). The memory tolerance is the DRA checks' own: no real sample has shown
the two differ; a node where they do would settle it.

Not compared: the count under ``mig.strategy=single`` with a MIG product (GFD then counts MIG devices),
every label of a ``-MIG-INVALID`` product (GFD zeroes them; labels.gfd-matches-hardware reports it).
Nothing to compare (no GFD label, or no slice): NOT TESTED, not applicable, with the reason.

Pure: no pytest, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from gpuconf.checks.dra import MEMORY_TOLERANCE, _version_key
from gpuconf.nodes.devices import SliceDevice
from gpuconf.nodes.facts import label_cuda_version, label_driver_version
from gpuconf.outcomes import COULD_NOT_RUN, NOT_APPLICABLE
from gpuconf.verdict import Verdict, failed, not_tested, passed

__all__ = ["AGREE", "evaluate_labels_agree_with_dra", "gfd_product"]

AGREE = "labels.agree-with-dra"


def gfd_product(label: str) -> str:
    """GFD's product as the DRA driver's productName would read it after dashes: without GFD's
    sharing and MIG suffixes."""
    return re.sub(r"-SHARED$|-MIG-.*$", "", label.removesuffix("-SHARED"))


def _same_product(label: str, attribute: str) -> bool:
    return gfd_product(label).lower() == attribute.replace(" ", "-").lower()


def _same_version(label: str, attribute: str) -> bool:
    return _version_key(label) is not None and _version_key(label) == _version_key(attribute)


def _same_memory(label: str, attribute: str) -> bool:
    a, b = int(label) * 2**20, int(attribute)
    return abs(a - b) <= MEMORY_TOLERANCE * max(a, b)


def _label_facts(labels: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """The GFD facts a slice attribute can be compared with: fact -> (label key(s), value)."""
    out: dict[str, tuple[str, str]] = {}
    if product := labels.get("nvidia.com/gpu.product"):
        out["product"] = ("nvidia.com/gpu.product", product)
    driver, key = label_driver_version(labels)
    if driver:
        out["driver"] = (key, driver)
    if cuda := label_cuda_version(labels):
        full = "nvidia.com/cuda.runtime-version.full"
        out["cuda"] = (full if labels.get(full) else "nvidia.com/cuda.runtime.major/minor", cuda)
    major, minor = labels.get("nvidia.com/gpu.compute.major"), labels.get("nvidia.com/gpu.compute.minor")
    if major and minor:
        out["compute"] = ("nvidia.com/gpu.compute.major/minor", f"{major}.{minor}")
    if family := labels.get("nvidia.com/gpu.family"):
        out["architecture"] = ("nvidia.com/gpu.family", family)
    memory = labels.get("nvidia.com/gpu.memory", "")
    if memory.isdigit() and int(memory) > 0:
        out["memory"] = ("nvidia.com/gpu.memory", memory)
    return out


#: fact -> the attribute, how to read it from a device, how to compare, how to show the attribute.
_ATTRIBUTES: dict[str, tuple[str, Callable[[SliceDevice], str | None], Callable[[str, str], bool]]] = {
    "product": ("productName", lambda d: d.attributes.get("productName"), _same_product),
    "driver": ("driverVersion", lambda d: d.attributes.get("driverVersion"), _same_version),
    "cuda": ("cudaDriverVersion", lambda d: d.attributes.get("cudaDriverVersion"), _same_version),
    "compute": ("cudaComputeCapability", lambda d: d.attributes.get("cudaComputeCapability"), _same_version),
    "architecture": ("architecture", lambda d: d.attributes.get("architecture"),
                     lambda a, b: a.strip().lower() == b.strip().lower()),
    "memory": ("capacity memory", lambda d: None if d.memory_bytes is None else str(d.memory_bytes), _same_memory),
}


def _shown(fact: str, value: str) -> str:
    return f"{value} ({int(value) >> 20} MiB)" if fact == "memory" else value


def evaluate_labels_agree_with_dra(node: str, labels: Mapping[str, str], devices: Sequence[SliceDevice]) -> Verdict:
    """``labels.agree-with-dra`` on ``node`` (module docstring)."""
    gpus = [d for d in devices if d.kind == "gpu"]
    if not gpus:
        return not_tested(AGREE, node, f"not applicable: {node} publishes no GPU device of NVIDIA's DRA driver in a "
                          "ResourceSlice, so there is no attribute to compare GFD's labels with", kind=NOT_APPLICABLE)
    product = labels.get("nvidia.com/gpu.product", "")
    if product.endswith("-MIG-INVALID"):
        return not_tested(AGREE, node, f"nvidia.com/gpu.product={product}: GFD withdrew the GPU labels "
                          "(labels.gfd-matches-hardware reports the MIG layout)", kind=COULD_NOT_RUN)
    facts = _label_facts(labels)
    count = labels.get("nvidia.com/gpu.count", "")
    mig_single = labels.get("nvidia.com/mig.strategy") == "single" and "-MIG-" in product
    if not facts and not count.isdigit():
        return not_tested(AGREE, node, f"not applicable: {node} carries no GFD label (nvidia.com/gpu.product, "
                          "gpu.memory, gpu.compute.*, gpu.family, cuda.driver*, cuda.runtime*, gpu.count) to compare "
                          f"with its {len(gpus)} DRA devices", kind=NOT_APPLICABLE)
    problems: list[str] = []
    compared: dict[str, int] = {}
    for d in gpus:
        for fact, (key, value) in facts.items():
            attribute, read, same = _ATTRIBUTES[fact]
            published = read(d)
            if published is None:
                continue
            compared[fact] = compared.get(fact, 0) + 1
            if not same(value, published):
                problems.append(f"{d.describe()}: label {key}={value}, attribute {attribute}="
                                f"{_shown(fact, published)}")
    if count.isdigit() and not mig_single:
        # physical GPUs: each published whole, or as the parent of its MIG devices (a MIG-enabled GPU is
        # published as its instances only, or also whole: mig.not-also-full-gpu's finding, not a count)
        physical = sorted({u for d in devices if d.kind in ("gpu", "mig") and (u := d.gpu_uuid)})
        compared["count"] = 1
        if int(count) != len(physical):
            problems.append(f"label nvidia.com/gpu.count={count}, the ResourceSlices publish {len(physical)} GPUs "
                            f"(devices of type gpu, and the parents of MIG devices: {', '.join(physical)})")
    if not compared:
        keys = ", ".join(k for k, _ in facts.values())
        return not_tested(AGREE, node, f"not applicable: the GFD labels of {node} ({keys}) "
                          "have no attribute of its DRA devices to compare with", kind=NOT_APPLICABLE)
    what = ", ".join(f"{f} ({n} GPU{'s' if n > 1 else ''})" if f != "count" else "GPU count"
                     for f, n in compared.items())
    if problems:
        return failed(AGREE, node, f"GFD's labels and the DRA driver's attributes disagree on {node}: {problems[0]}"
                      + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
                      expected="each GFD label equal to the DRA attribute for the same fact",
                      observed=f"{len(problems)} disagreement(s)", evidence=tuple(problems))
    return passed(AGREE, node, f"GFD's labels agree with the DRA driver's attributes: {what}")
