"""DRA checks (resource.k8s.io/v1): what NVIDIA's DRA driver publishes in a node's ResourceSlices is
the node's hardware, published once, and a ResourceClaim gets the device it was allocated.

The suite reads the ResourceSlices and runs two campaigns per node that publishes GPUs (domain.md
§5): first a **whole-node** pod whose claim asks for every GPU of the node (``allocationMode: All``)
and a pod whose claim's CEL selector nothing can match; then a **selector** pod (one GPU, chosen by
a memory selector every GPU of the node satisfies) and a **two-claim** pod (two claims of one GPU
each). While they run the suite records each claim's ``status.allocation``: a generated claim is
deallocated and deleted once its pod is done. Every pod is placed by nodeSelector, never nodeName,
which would bypass the scheduler's DRA allocation.

The checks:

* ``dra.attributes-match-hardware``: the node's published GPUs are the GPUs the whole-node probe
  sees (by UUID), and each device's attributes (productName, brand, cudaComputeCapability,
  driverVersion, cudaDriverVersion, the PCI address (``resource.kubernetes.io/pciBusID``, or ``pcieBusID``
  before 25.12), memory capacity) agree with the probe (GFD's labels against the attributes are
  ``labels.agree-with-dra``'s, gpuconf.checks.dra_labels);
* ``dra.no-double-publication``: no GPU of the node is also advertised as nvidia.com/gpu by a
  device plugin (the scheduler would give it to a claim and to a device-plugin pod at once);
* ``dra.claim-allocates-the-probed-device``: the selector pod runs, sees exactly one GPU, and it is
  the device its claim was allocated, with the memory the selector asked for;
* ``dra.unsatisfiable-selector-pending``: a claim nothing matches leaves its pod Pending with the
  scheduler's ``cannot allocate all claims``;
* ``dra.distinct-claims-distinct-devices``: two claims of one pod are allocated two different
  devices, and the pod sees exactly those two.
* ``dra.selector-steers-scheduling``: a pod with no node selection whose claim's CEL selector
  names an attribute value only some nodes' GPUs have (productName, else driverVersion; on a
  cluster with one of each, every node matches and the verdict says so) lands on a matching node,
  allocated a matching device, and sees it: the scheduler, not the suite, chose the node;
* ``dra.shared-claim-same-device``: one claim used by two containers of a pod: both see its one
  device, and a third container using no claim sees no GPU;
* ``dra.claim-reserved-then-deleted``: while a pod ran, each claim generated for it named it in
  ``status.reservedFor``; once the pod is gone, the claim is deleted;
* ``dra.count-with-match-attribute``: a claim for two GPUs (``count: 2``) constrained by
  ``matchAttribute`` on productName gets two devices of the node with one productName, and the
  pod sees both.

Decisions: a version attribute is compared as a version (DRA drops leading zeros: 580.95.05 is
580.95.5); memory is compared within 1 % (a driver may publish NVML's total and CUDA report
its own); a GFD label that is absent is no evidence, and a view that could not be read leaves the
comparison to the other view; with neither view the check is NOT_TESTED, never PASS.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuconf.checks.isolation import GpuView, Sighting
from gpuconf.cluster import PodOutcome
from gpuconf.cluster.claims import claim_pod
from gpuconf.nodes.devices import (  # noqa: F401 - re-exported: the DRA checks' vocabulary
    GPU_CLASS,
    GPU_DRIVER,
    MIG_CLASS,
    PCI_ATTRIBUTES,
    SliceDevice,
    parse_quantity,
    slice_devices,
)
from gpuconf.outcomes import COULD_NOT_RUN, NOT_APPLICABLE
from gpuconf.probe_pods import probe_pod_name
from gpuconf.probes.cuda import CudaProbeReport
from gpuconf.verdict import Verdict, failed, not_tested, passed

__all__ = [
    "GPU_CLASS",
    "GPU_DRIVER",
    "MIG_CLASS",
    "PCI_ATTRIBUTES",
    "PAIR_ATTRIBUTE",
    "UNSATISFIABLE_SELECTOR",
    "UNSCHEDULABLE_REASON",
    "Allocation",
    "AllocatedDevice",
    "SliceDevice",
    "Steering",
    "allocation_of",
    "dra_skip_kind",
    "dra_skip_reason",
    "evaluate_attributes_match_hardware",
    "evaluate_claim_allocates_probed_device",
    "evaluate_claim_lifecycle",
    "evaluate_distinct_claims",
    "evaluate_matched_pair",
    "evaluate_no_double_publication",
    "evaluate_selector_steers_scheduling",
    "evaluate_shared_claim",
    "evaluate_unsatisfiable_pending",
    "memory_selector",
    "node_skip_reason",
    "parse_quantity",
    "pod_name",
    "prepare_failures",
    "selector_threshold_gib",
    "slice_devices",
    "steering_attribute",
]

#: The stable core of the scheduler's message when no device satisfies a claim (domain.md §4).
UNSCHEDULABLE_REASON = "cannot allocate all claims"
#: A selector no GPU satisfies: a device with more than an exbibyte of memory.
UNSATISFIABLE_SELECTOR = f"device.capacity['{GPU_DRIVER}'].memory.compareTo(quantity('1Ei')) >= 0"
#: How far published and observed memory may differ (NVML's total and CUDA's totalGlobalMem).
MEMORY_TOLERANCE = 0.01

#: resource.k8s.io/v1 ``PodResourceClaimAnnotation``: which pod claim a generated claim is for.
POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"

#: DeviceClasses NVIDIA's DRA driver registers for ComputeDomains: with these and no gpu.nvidia.com,
#: the driver is installed with GPU allocation off (Helm ``resources.gpus.enabled=false``, or without
#: ``gpuResourcesEnabledOverride=true``; kubernetes-sigs/dra-driver-nvidia-gpu#438).
COMPUTE_DOMAIN_CLASSES = ("compute-domain-daemon.nvidia.com", "compute-domain-default-channel.nvidia.com")


def pod_name(role: str, node: str) -> str:
    """``dra-<role>-<node>``, cut and made unique by a hash of the node name when too long."""
    return probe_pod_name("dra", role, node)


# -------------------------------------------------------------------------------------------------
# What the ResourceSlices publish


def dra_skip_reason(*, serves_v1: bool, device_classes: Sequence[str], served: str | None = None) -> str | None:
    """Why the DRA suite cannot run on this cluster, or None when it can. ``served``: the newest
    resource.k8s.io version the cluster serves ResourceSlices in (v1beta1 and v1beta2 are read too,
    so DRA-only nodes are found and counted, but the suite's claims are resource.k8s.io/v1)."""
    if not serves_v1 and served:
        return (f"the cluster serves DRA as resource.k8s.io/{served} only (Kubernetes before 1.34): its "
                "ResourceSlices are read (GPU nodes, double publication), but the claim checks need "
                "resource.k8s.io/v1: upgrade the control plane to 1.34 or later to run them")
    if not serves_v1:
        return ("the cluster does not serve resource.k8s.io/v1 ResourceSlices (DRA is GA from Kubernetes 1.34; "
                "older or DRA-disabled control planes have no v1 API): nothing to check")
    if GPU_CLASS not in device_classes and any(c in device_classes for c in COMPUTE_DOMAIN_CLASSES):
        shown = ", ".join(device_classes)
        return (f"NVIDIA's DRA driver is installed with GPU allocation disabled: it registers ComputeDomain "
                f"DeviceClasses but no {GPU_CLASS} (DeviceClasses: {shown}); to allocate GPUs through DRA, "
                "install it with resources.gpus.enabled=true and gpuResourcesEnabledOverride=true")
    if GPU_CLASS not in device_classes:
        shown = ", ".join(device_classes) or "none"
        return (f"resource.k8s.io/v1 is served but there is no DeviceClass {GPU_CLASS} (DeviceClasses: {shown}): "
                "NVIDIA's DRA driver is not installed")
    return None


def dra_skip_kind(*, serves_v1: bool, served: str | None = None) -> str:
    """The NOT TESTED kind of :func:`dra_skip_reason`'s reason: could-not-run where the cluster serves DRA
    in an older API version only (the claim checks need resource.k8s.io/v1), not applicable where it
    has no DRA or no NVIDIA DRA driver allocating GPUs."""
    return COULD_NOT_RUN if not serves_v1 and served else NOT_APPLICABLE


def node_skip_reason(node: str, devices: Sequence[SliceDevice]) -> str | None:
    """Why a node has nothing for the DRA checks, or None when it publishes GPUs."""
    if not devices:
        return f"{node} publishes no device of driver {GPU_DRIVER} in a ResourceSlice: its GPUs are not DRA-managed"
    return None


def selector_threshold_gib(devices: Sequence[SliceDevice]) -> int | None:
    """The memory, in whole GiB, every published full GPU of the node has (so a selector for it is
    satisfiable by any of them), or None when no GPU publishes memory."""
    sizes = [d.memory_bytes for d in devices if d.kind == "gpu" and d.memory_bytes]
    return max(1, min(sizes) // 2**30) if sizes else None


def memory_selector(gib: int) -> str:
    """The CEL selector for a GPU with at least ``gib`` GiB (domain.md §5)."""
    return f"device.capacity['{GPU_DRIVER}'].memory.compareTo(quantity('{gib}Gi')) >= 0"


# -------------------------------------------------------------------------------------------------
# Claims as the scheduler allocated them


@dataclass(frozen=True)
class AllocatedDevice:
    request: str
    driver: str
    pool: str
    device: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device)


@dataclass(frozen=True)
class Allocation:
    """One claim as last seen allocated: its pod, the pod's name for it, the devices."""

    claim: str
    pod: str | None
    pod_claim: str | None
    devices: tuple[AllocatedDevice, ...]
    reserved_for: tuple[str, ...] = ()  # the pods in status.reservedFor


def allocation_of(claim: Mapping[str, Any]) -> Allocation | None:
    """The allocation of a ResourceClaim object (``status.allocation.devices.results``), or None."""
    meta = claim.get("metadata") or {}
    allocation = (claim.get("status") or {}).get("allocation")
    if not allocation:
        return None
    results = (allocation.get("devices") or {}).get("results") or []
    reserved = tuple(str(r.get("name")) for r in (claim.get("status") or {}).get("reservedFor") or ()
                     if r.get("resource") == "pods" and not r.get("apiGroup"))
    return Allocation(str(meta.get("name")), claim_pod(claim),
                      (meta.get("annotations") or {}).get(POD_CLAIM_ANNOTATION),
                      tuple(AllocatedDevice(str(r.get("request")), str(r.get("driver")), str(r.get("pool")),
                                            str(r.get("device"))) for r in results), reserved)


# -------------------------------------------------------------------------------------------------
# Comparisons


def _version_key(text: str | None) -> tuple[int, ...] | None:
    """``580.95.05`` and ``580.95.5`` alike: numeric parts, trailing zeros dropped."""
    if not text:
        return None
    parts = re.findall(r"\d+", text)
    if not parts:
        return None
    key = [int(p) for p in parts]
    while len(key) > 1 and key[-1] == 0:
        key.pop()
    return tuple(key)


def _pci_key(text: str | None) -> tuple[int, ...] | None:
    """``00000000:18:00.0`` and ``0000:18:00.0`` alike."""
    if not text:
        return None
    parts = re.split(r"[:.]", text.strip().lower())
    try:
        return tuple(int(p, 16) for p in parts)
    except ValueError:
        return None


def _memory_close(a: int, b: int) -> bool:
    return abs(a - b) <= MEMORY_TOLERANCE * max(a, b)


def _mib(n: int) -> str:
    return f"{n / 2**20:.0f} MiB"


@dataclass
class _Comparison:
    problems: list[str] = field(default_factory=list)
    compared: set[str] = field(default_factory=set)  # which views said something
    unjudged: list[str] = field(default_factory=list)  # what a view could not say, and why (a PASS names it)

    def text(self, what: str, device: SliceDevice, published: str | None, view: str, seen: str | None,
             *, same: bool | None = None) -> None:
        """Record a disagreement between ``published`` (the slice) and what ``view`` says."""
        if published is None or seen is None:
            return
        self.compared.add(view)
        equal = same if same is not None else published.strip().lower() == seen.strip().lower()
        if not equal:
            self.problems.append(f"{device.name} publishes {what}={published!r} but {view} says {seen!r}")


def _probe_uuids(report: CudaProbeReport) -> tuple[set[str], str]:
    """The physical GPUs the probe sees: NVML's UUIDs, else CUDA's (MIG instances left out)."""
    if report.nvml_absent_reason is None:
        return {g.uuid for g in report.nvml_gpus if g.uuid}, "NVML"
    return {d.uuid for d in report.devices if d.uuid and not d.mig}, "CUDA"


def _compare_migs(cmp: _Comparison, devices: Sequence[SliceDevice], report: CudaProbeReport) -> None:
    """The published MIG instances against CUDA's: one CUDA process enumerates a single MIG device
    however many it is given (MIG User Guide, "CUDA Device Enumeration";
    kubernetes-sigs/dra-driver-nvidia-gpu#1364 shows it through DRA), so CUDA must see one of them and
    no other; the rest are named as not compared."""
    migs = [d for d in devices if d.kind == "mig" and d.uuid]
    if not migs or not report.init.ok:
        return
    published = {d.uuid for d in migs}
    seen = [d.uuid for d in report.devices if d.uuid and (d.mig or d.uuid.startswith("MIG-"))]
    if not seen:
        cmp.problems.append(f"the DRA driver publishes {len(migs)} MIG instances ({', '.join(d.name for d in migs)}), "
                            "of which CUDA in the whole-node probe sees none")
    for uuid in seen:
        if uuid not in published:
            cmp.problems.append(f"CUDA in the whole-node probe sees MIG instance {uuid}, which no device publishes")
    if len(migs) > 1:
        cmp.unjudged.append(f"{len(migs) - 1} of the {len(migs)} MIG instances (CUDA enumerates one MIG device per "
                            "process)")


def _compare_probe(cmp: _Comparison, devices: Sequence[SliceDevice], report: CudaProbeReport) -> None:
    _compare_migs(cmp, devices, report)
    published = {d.gpu_uuid for d in devices if d.gpu_uuid}
    seen, how = _probe_uuids(report)
    cmp.compared.add("the probe")
    for uuid in sorted(published - seen):
        names = ", ".join(d.name for d in devices if d.gpu_uuid == uuid)
        cmp.problems.append(f"{names} publishes GPU {uuid}, which the whole-node probe ({how}) does not see")
    for uuid in sorted(seen - published):
        cmp.problems.append(f"the whole-node probe ({how}) sees GPU {uuid}, which no ResourceSlice device publishes")
    cuda = {d.uuid: d for d in report.devices if d.uuid}
    nvml = {g.uuid: g for g in report.nvml_gpus if g.uuid}
    if not report.init.ok:
        cmp.unjudged.append(f"compute capability, PCI address, memory and MIG instances (CUDA did not initialise in "
                            f"the whole-node probe: {report.init.name} {report.init.message})")
    if report.libcuda_compat is not False and any(d.attributes.get("cudaDriverVersion") for d in devices):
        cmp.unjudged.append("cudaDriverVersion (the probe's libcuda is " + (
            "the image's cuda-compat one, whose CUDA is not the driver's)" if report.libcuda_compat
            else "of unknown origin, so its CUDA may not be the driver's)"))
    for d in devices:
        if d.uuid is None:
            cmp.problems.append(f"{d.name} publishes no uuid attribute: it cannot be told from the node's other GPUs")
            continue
        c, g = cuda.get(d.uuid), nvml.get(d.gpu_uuid or "")
        if d.kind == "mig":
            continue  # below: CUDA enumerates one of them

        where = f"the probe for {d.uuid}"
        cmp.text("productName", d, d.attributes.get("productName"), where, (g.name if g else None) or
                 (c.name if c else None))
        cmp.text("brand", d, d.attributes.get("brand"), where, g.brand if g else None)
        if c is not None:
            cmp.text("cudaComputeCapability", d, d.attributes.get("cudaComputeCapability"), where,
                     c.compute_capability, same=_version_key(d.attributes.get("cudaComputeCapability"))
                     == _version_key(c.compute_capability))
            pci_name, pci = d.pci_bus_id or (PCI_ATTRIBUTES[0], None)
            cmp.text(pci_name, d, pci, where, c.pci_bus_id, same=_pci_key(pci) == _pci_key(c.pci_bus_id))
            if d.memory_bytes is not None and c.total_memory_bytes:
                cmp.text("memory", d, _mib(d.memory_bytes), where, _mib(c.total_memory_bytes),
                         same=_memory_close(d.memory_bytes, c.total_memory_bytes))
        driver = d.attributes.get("driverVersion")
        cmp.text("driverVersion", d, driver, "NVML in the probe", report.nvml_driver_version,
                 same=_version_key(driver) == _version_key(report.nvml_driver_version))
        if report.libcuda_compat is False:  # the driver's own libcuda: its version is the driver's CUDA
            cuda_driver = d.attributes.get("cudaDriverVersion")
            cmp.text("cudaDriverVersion", d, cuda_driver, "cudaDriverGetVersion in the probe", report.driver_cuda,
                     same=_version_key(cuda_driver) == _version_key(report.driver_cuda))


#: Where NVIDIA's DRA kubelet plugin names the device it could not prepare (tests/data/real/dra/
#: prepare-errors.txt): building its CDI spec (``unable to get device spec for <claim uid>-<device>``),
#: a device it does not hold (``requested device is not allocatable: <device>``), a MIG device it could
#: not create (``error creating GPU instance for '<device>'``).
_PREPARE_DEVICE = re.compile(r"unable to get device spec for [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-"
                             r"[0-9a-f]{12}-(?P<a>[\w-]+)|requested device is not allocatable: (?P<b>[\w-]+)"
                             r"|error creating GPU instance for '(?P<c>[\w-]+)'")
_PREPARE_CLAIM = re.compile(r"^.*?error preparing devices for claim [^:\s]+:[\w-]+: ")


def prepare_failures(messages: Iterable[str]) -> dict[str, str]:
    """Device name -> the plugin's error, from the kubelet's FailedPrepareDynamicResources messages."""
    out: dict[str, str] = {}
    for message in messages:
        for m in _PREPARE_DEVICE.finditer(message):
            out.setdefault(m.group("a") or m.group("b") or m.group("c"), _PREPARE_CLAIM.sub("", message))
    return out


def _compare_prepares(cmp: _Comparison, devices: Sequence[SliceDevice], prepare_errors: Iterable[str]) -> None:
    failures = prepare_failures(prepare_errors)
    for d in devices:
        if d.name in failures:
            cmp.compared.add("the DRA driver's prepare step")
            cmp.problems.append(f"{d.name} ({d.uuid or 'no uuid'}) is published, but the DRA driver cannot prepare it "
                                f"({failures[d.name]}): the GPU is gone from the node or unusable, and the "
                                "ResourceSlice still offers it")


def evaluate_attributes_match_hardware(node: str, devices: Sequence[SliceDevice], whole_node: Sighting | None,
                                       prepare_errors: Sequence[str] = (), *,
                                       held_back: Sequence[SliceDevice] = ()) -> Verdict:
    """The node's published devices are the GPUs the whole-node DRA probe sees, and their attributes
    agree with what the probe reads of the hardware. ``prepare_errors``: the kubelet's
    FailedPrepareDynamicResources messages for that probe's pod; a published device the driver
    cannot prepare (a GPU gone since the slice was published) is named first. GFD's labels are not
    this check's: labels.agree-with-dra compares them with the attributes (gpuconf.checks.dra_labels),
    so a lying label fails there and in labels.gfd-matches-hardware, not here as well. ``held_back``:
    devices tainted out of service, which the whole-node claim could not be given: not compared with
    the probe, and named as such (dra.devices-untainted reports them)."""
    check = "dra.attributes-match-hardware"
    cmp = _Comparison()
    _compare_prepares(cmp, devices, prepare_errors)
    evidence = [f"published: {', '.join(d.describe() for d in devices)}"]
    if whole_node is not None and whole_node.report is not None:
        held = {d.key for d in held_back}
        _compare_probe(cmp, [d for d in devices if d.key not in held], whole_node.report)
        if held_back:
            cmp.unjudged.append(f"{', '.join(d.describe() for d in held_back)} (tainted out of service, so the "
                                "whole-node claim could not hold them: dra.devices-untainted names them)")
    elif whole_node is not None:
        evidence.append(f"no whole-node probe to compare with: {whole_node.failure}")
    if not cmp.compared:
        return not_tested(check, node, f"{node}: no whole-node probe says what its GPUs are"
                          + (f" ({whole_node.failure})" if whole_node is not None and whole_node.failure else ""),
                          kind=COULD_NOT_RUN)
    views = " and ".join(sorted({"the DRA driver's prepare step" if v.startswith("the DRA") else "the whole-node probe"
                                 for v in cmp.compared}))
    if cmp.problems:
        return failed(check, node, f"the DRA driver publishes devices that are not the node's hardware: "
                      f"{cmp.problems[0]}" + (f" (and {len(cmp.problems) - 1} more)" if len(cmp.problems) > 1 else ""),
                      expected=f"the {len(devices)} published devices agree with {views}",
                      observed=f"{len(cmp.problems)} disagreement(s)", evidence=(*cmp.problems, *evidence))
    unjudged = f"; not compared: {'; '.join(cmp.unjudged)}" if cmp.unjudged else ""
    return passed(check, node, f"{len(devices)} published devices agree with {views}{unjudged}",
                  expected=f"the published devices agree with {views}", observed="no disagreement",
                  evidence=(*evidence, *(f"not compared: {u}" for u in cmp.unjudged)),
                  not_judged=tuple(f"not compared: {u}" for u in cmp.unjudged))


def evaluate_no_double_publication(node: str, devices: Sequence[SliceDevice], capacity: Mapping[str, str],
                                   plugin_view: Sighting | None, *, extended: str | None = None) -> Verdict:
    """No GPU the DRA driver publishes on ``node`` is also advertised by a device plugin.
    ``plugin_view``: what a pod given every nvidia.com/gpu of the node saw (names the shared GPUs).
    ``extended``: the DRA-backed extended resource serving the node's GPUs (KEP-5004,
    gpuconf.nodes.NodeView.extended): a plain nvidia.com/gpu request there is served by DRA, one
    allocator, not a double publication (the node's capacity does not carry the resource then)."""
    check = "dra.no-double-publication"
    advertised = {k: v for k, v in capacity.items()
                  if k.startswith(("nvidia.com/gpu", "nvidia.com/mig-")) and str(v).isdigit() and int(v) > 0}
    published = {d.gpu_uuid for d in devices if d.gpu_uuid}
    expected = "GPUs published by the DRA driver or advertised by a device plugin, not both"
    if not advertised and extended is not None:
        return passed(check, node, f"{len(devices)} DRA devices, served to {extended} requests by DRA (a DRA-backed "
                      f"extended resource, KEP-5004), no device plugin advertising GPUs: one allocator",
                      expected=expected, observed=f"capacity has no {extended}; DeviceClass {GPU_CLASS} maps it")
    if not advertised:
        return passed(check, node, f"{len(devices)} DRA devices and no device-plugin GPU resource",
                      expected=expected, observed=f"capacity has no nvidia.com/gpu; {len(published)} GPUs in DRA")
    shown = ", ".join(f"{k}={v}" for k, v in sorted(advertised.items()))
    evidence = [f"node capacity: {shown}", f"DRA devices: {', '.join(d.describe() for d in devices)}"]
    both: set[str] = set()
    if plugin_view is not None and plugin_view.report is not None:
        seen, how = _probe_uuids(plugin_view.report)
        both = seen & published
        evidence.append(f"{plugin_view.where} ({how}) sees: {', '.join(sorted(seen)) or 'none'}")
        if not both and seen:
            return passed(check, node, f"the device plugin's GPUs ({shown}) and the {len(published)} DRA GPUs are "
                          "different GPUs", expected=expected, observed="no GPU in both", evidence=tuple(evidence))
    elif plugin_view is not None:
        evidence.append(f"no device-plugin probe to tell which GPUs: {plugin_view.failure}")
    which = (f"{len(both)} GPUs ({', '.join(sorted(both)[:3])}{' ...' if len(both) > 3 else ''}) are"
             if both else "its GPUs are")
    return failed(check, node, f"{which} published both by a device plugin ({shown}) and by the DRA driver "
                  f"{GPU_DRIVER} ({len(devices)} devices): the scheduler can give one GPU to a claim and to a "
                  "device-plugin pod at once", expected=expected,
                  observed=f"{shown} and {len(devices)} DRA devices", evidence=tuple(evidence))


def _seen_uuids(report: CudaProbeReport) -> tuple[str, ...]:
    """The devices a claim pod sees: CUDA's (MIG-aware), else NVML's."""
    if report.init.ok:
        return tuple(d.uuid or f"CUDA device {d.index}" for d in report.devices)
    return tuple(g.uuid or f"NVML GPU {g.index}" for g in report.nvml_gpus)


def _allocated(allocations: Sequence[Allocation], devices: Sequence[SliceDevice]
               ) -> tuple[list[tuple[AllocatedDevice, SliceDevice | None]], list[str]]:
    by_key = {d.key: d for d in devices}
    pairs = [(a, by_key.get(a.key)) for alloc in allocations for a in alloc.devices]
    return pairs, [f"claim {alloc.claim}: " + ", ".join(f"{a.request} -> {a.driver}/{a.pool}/{a.device}"
                                                         for a in alloc.devices) for alloc in allocations]


def _ran(check: str, node: str | None, what: str, sighting: Sighting | None) -> Verdict | CudaProbeReport:
    if sighting is None:
        return failed(check, node, f"the {what} pod was not observed", expected="the pod runs", observed="nothing")
    if sighting.report is None:
        return failed(check, node, f"the {what} pod did not run to a probe report: {sighting.failure}",
                      expected="the pod is scheduled, its claim allocated, and the probe reports",
                      observed=sighting.failure)
    return sighting.report


def evaluate_claim_allocates_probed_device(node: str, sighting: Sighting | None, allocations: Sequence[Allocation],
                                           devices: Sequence[SliceDevice], *, min_gib: int) -> Verdict:
    """The pod whose claim asks for one GPU with at least ``min_gib`` GiB (CEL) runs, sees exactly
    one GPU, and it is the device ``status.allocation.devices.results`` names."""
    check = "dra.claim-allocates-the-probed-device"
    report = _ran(check, node, "selector-claim", sighting)
    if isinstance(report, Verdict):
        return report
    pairs, shown = _allocated(allocations, devices)
    seen = _seen_uuids(report)
    evidence = [*shown, f"the pod sees: {', '.join(seen) or 'no GPU'}"]
    if len(pairs) != 1:
        return failed(check, node, f"the claim for one GPU was allocated {len(pairs)} devices", expected="1 device",
                      observed=f"{len(pairs)}", evidence=tuple(evidence), causes={"allocation-count"})
    result, device = pairs[0]
    if device is None:
        return failed(check, node, f"the claim was allocated {result.driver}/{result.pool}/{result.device}, which no "
                      f"ResourceSlice of {node} publishes", expected="a published device",
                      observed=result.device, evidence=tuple(evidence), causes={"unpublished-device"})
    if tuple(seen) != (device.uuid,):
        return failed(check, node, f"the claim was allocated {device.describe()} but the pod sees "
                      f"{', '.join(seen) or 'no GPU'}", expected=f"exactly {device.uuid}",
                      observed=", ".join(seen) or "none", evidence=tuple(evidence),
                      causes={"sees-another-device"})
    memory = next((d.total_memory_bytes for d in report.devices if d.uuid == device.uuid), None)
    if memory is not None and memory < min_gib * 2**30 * (1 - MEMORY_TOLERANCE):
        return failed(check, node, f"the selector asked for at least {min_gib} GiB but {device.describe()} has "
                      f"{_mib(memory)}", expected=f">= {min_gib} GiB", observed=_mib(memory), evidence=tuple(evidence),
                      causes={"memory-below-selector"})
    # The device's identity came from NVML when CUDA failed in the pod: its memory was not read.
    why = f"CUDA did not initialise in the pod: {report.init.name}" if not report.init.ok else "CUDA gave none"
    unread = "" if memory is not None else (
        f"; its memory was not read ({why}), so the >= {min_gib} GiB selector was not judged")
    return passed(check, node, f"the claim (memory >= {min_gib}Gi) got {device.describe()}, the GPU the pod sees"
                  f"{unread}", expected=device.uuid, observed=", ".join(seen), evidence=tuple(evidence))


def evaluate_distinct_claims(node: str, sighting: Sighting | None, allocations: Sequence[Allocation],
                             devices: Sequence[SliceDevice]) -> Verdict:
    """Two claims of one pod get two different devices, and the pod sees exactly those two."""
    check = "dra.distinct-claims-distinct-devices"
    gpus = [d for d in devices if d.kind == "gpu"]
    if len(gpus) < 2:
        return not_tested(check, node, f"{node} publishes {len(gpus)} full GPU: two claims need two",
                          kind=NOT_APPLICABLE)
    report = _ran(check, node, "two-claim", sighting)
    if isinstance(report, Verdict):
        return report
    pairs, shown = _allocated(allocations, devices)
    seen = _seen_uuids(report)
    evidence = [*shown, f"the pod sees: {', '.join(seen) or 'no GPU'}"]
    keys = [a.key for a, _ in pairs]
    if len(allocations) != 2 or len(keys) != 2 or len(set(keys)) != 2:
        got = ", ".join(k[2] for k in keys) or "nothing"
        return failed(check, node, f"two claims of one GPU each were allocated {got}",
                      expected="two claims, two different devices", observed=f"{len(allocations)} claims, "
                      f"{len(set(keys))} distinct devices", evidence=tuple(evidence))
    uuids = {d.uuid for _, d in pairs if d is not None}
    if set(seen) != uuids or len(seen) != 2:
        return failed(check, node, f"the claims were allocated {', '.join(sorted(u or '?' for u in uuids))} but the "
                      f"pod sees {', '.join(seen) or 'no GPU'}", expected="exactly the two allocated GPUs",
                      observed=", ".join(seen) or "none", evidence=tuple(evidence))
    return passed(check, node, f"two claims got two devices ({', '.join(k[2] for k in keys)}), both and only them seen",
                  evidence=tuple(evidence))


def evaluate_unsatisfiable_pending(node: str, outcome: PodOutcome | None, allocations: Sequence[Allocation],
                                   *, budget_s: float) -> Verdict:
    """A claim whose selector no device matches leaves the pod Pending, with the scheduler's
    ``cannot allocate all claims``, within ``budget_s``."""
    check = "dra.unsatisfiable-selector-pending"
    if outcome is None:
        return failed(check, node, "the unsatisfiable-claim pod was not observed", expected="Pending",
                      observed="nothing")
    events = [f"{e.reason}: {e.message}" for e in outcome.events]
    evidence = (f"selector: {UNSATISFIABLE_SELECTOR}", *events)
    if outcome.node or any(a.devices for a in allocations):
        got = ", ".join(f"{a.driver}/{a.pool}/{a.device}" for al in allocations for a in al.devices) or "no device"
        return failed(check, node, f"a claim no device can satisfy was allocated ({got}) and the pod was placed on "
                      f"{outcome.node or '?'} ({outcome.phase})", expected="Pending, unschedulable",
                      observed=outcome.phase, evidence=evidence)
    text = "\n".join([outcome.message or "", *events])
    if outcome.unschedulable and UNSCHEDULABLE_REASON in text:
        return passed(check, node, f"the pod stays Pending: {UNSCHEDULABLE_REASON}", observed=outcome.message,
                      evidence=evidence)
    return failed(check, node, f"the pod with an unsatisfiable claim is {outcome.phase} without the scheduler saying "
                  f"'{UNSCHEDULABLE_REASON}' within {budget_s:.0f} s", expected=f"FailedScheduling: ... "
                  f"{UNSCHEDULABLE_REASON}", observed=outcome.message or outcome.reason or outcome.phase,
                  evidence=evidence)


# -------------------------------------------------------------------------------------------------
# Attribute-aware scheduling, shared claims, the claim's lifecycle, matched pairs

#: The attributes a steering selector may name, most telling first: a product splits a mixed
#: cluster, a driver version a cluster mid-upgrade. (productName is a string, driverVersion a version.)
STEERING_ATTRIBUTES = ("productName", "driverVersion")
#: The attribute every GPU of one node shares, for the pair's matchAttribute constraint.
PAIR_ATTRIBUTE = "productName"


@dataclass(frozen=True)
class Steering:
    """A selector naming ``attribute == value``, and the nodes having a GPU that matches it."""

    attribute: str
    value: str
    matching: tuple[str, ...]
    nodes: tuple[str, ...]  # every node publishing GPUs

    @property
    def selector(self) -> str:
        ref = f"device.attributes['{GPU_DRIVER}'].{self.attribute}"
        if self.attribute == "driverVersion":
            return f"{ref}.compareTo(semver({json.dumps(self.value)})) == 0"
        return f"{ref} == {json.dumps(self.value)}"

    @property
    def splits(self) -> bool:
        return len(self.matching) < len(self.nodes)


def steering_attribute(devices: Mapping[str, Sequence[SliceDevice]]) -> Steering | None:
    """The (attribute, value) a claim selects on to steer a pod with no node selection: one that
    only some nodes' GPUs have when there is one (productName, then driverVersion), else the
    driverVersion of the first node's GPUs (a single-product, single-driver cluster: every node
    matches). None when no GPU publishes either attribute."""
    nodes = tuple(sorted(n for n, ds in devices.items() if any(d.kind == "gpu" for d in ds)))
    fallback: Steering | None = None
    for attribute in STEERING_ATTRIBUTES:
        having: dict[str, set[str]] = {}
        for node in nodes:
            for d in devices[node]:
                value = d.attributes.get(attribute)
                if d.kind == "gpu" and value is not None:
                    having.setdefault(value, set()).add(node)
        for value in sorted(having, key=lambda v: (len(having[v]), v)):
            choice = Steering(attribute, value, tuple(sorted(having[value])), nodes)
            if choice.splits:
                return choice
            if fallback is None or (fallback.attribute != "driverVersion" and attribute == "driverVersion"):
                fallback = choice
    return fallback


def evaluate_selector_steers_scheduling(steering: Steering, outcome: PodOutcome | None, sighting: Sighting | None,
                                        allocations: Sequence[Allocation],
                                        devices: Mapping[str, Sequence[SliceDevice]]) -> Verdict:
    """A pod with no node selection whose claim selects ``attribute == value`` lands on a node whose
    GPUs match, is allocated a matching device there, and sees it."""
    check = "dra.selector-steers-scheduling"
    matching = ", ".join(steering.matching)
    scope = (f"only {matching} of {len(steering.nodes)} nodes match" if steering.splits
             else f"every node matches ({matching}): the cluster has one {steering.attribute}")
    evidence = [f"selector: {steering.selector}", f"matching nodes: {matching}"]
    expected = f"the pod lands on one of {matching}, allocated a device with {steering.attribute}={steering.value}"
    report = _ran(check, None, "attribute-selector", sighting)
    if isinstance(report, Verdict):
        return report
    landed = outcome.node if outcome is not None else None
    by_key = {d.key: d for ds in devices.values() for d in ds}
    pairs = [(a, by_key.get(a.key)) for alloc in allocations for a in alloc.devices]
    evidence += [f"the pod ran on {landed or '?'}",
                 *(f"claim {al.claim}: {a.device} on {d.node if d else '?'}" for al in allocations for a, d in
                   ((x, by_key.get(x.key)) for x in al.devices))]
    if landed not in steering.matching:
        return failed(check, landed, f"the pod whose claim selects {steering.attribute}={steering.value} ran on "
                      f"{landed or 'no node'}, whose GPUs do not match ({scope})", expected=expected,
                      observed=f"ran on {landed}", evidence=tuple(evidence))
    if len(pairs) != 1 or pairs[0][1] is None:
        got = ", ".join(a.device for a, _ in pairs) or "nothing"
        return failed(check, landed, f"the claim for one GPU with {steering.attribute}={steering.value} was allocated "
                      f"{got}", expected="one published device", observed=got, evidence=tuple(evidence))
    result, device = pairs[0]
    assert device is not None
    if device.node != landed or device.attributes.get(steering.attribute) != steering.value:
        return failed(check, landed, f"the claim was allocated {device.describe()} on {device.node} with "
                      f"{steering.attribute}={device.attributes.get(steering.attribute)}, but the pod ran on {landed} "
                      f"and selected {steering.attribute}={steering.value}", expected=expected,
                      observed=f"{device.node}/{device.name}", evidence=tuple(evidence))
    seen = _seen_uuids(report)
    if tuple(seen) != (device.uuid,):
        return failed(check, landed, f"the claim was allocated {device.describe()} but the pod sees "
                      f"{', '.join(seen) or 'no GPU'}", expected=f"exactly {device.uuid}",
                      observed=", ".join(seen) or "none", evidence=tuple(evidence))
    return passed(check, landed, f"the scheduler placed the pod selecting {steering.attribute}={steering.value} "
                  f"on {landed} ({scope}) with {device.describe()}", expected=expected,
                  observed=f"{landed}/{device.name}", evidence=tuple(evidence))


def evaluate_shared_claim(node: str, probe: Sighting | None, sidecar: Sighting | None, bystander: Sighting | None,
                          allocations: Sequence[Allocation], devices: Sequence[SliceDevice]) -> Verdict:
    """One claim used by two containers of a pod: both see its one device; the pod's third
    container, which uses no claim, sees no GPU."""
    check = "dra.shared-claim-same-device"
    if devices and not any(d.kind == "gpu" for d in devices):  # MIG only: the shared pod asks for a whole GPU
        return not_tested(check, node, f"{node} publishes no full GPU (only {len(devices)} MIG devices): the shared "
                          "claim asks for one", kind=NOT_APPLICABLE)
    views: list[tuple[str, CudaProbeReport]] = []
    for who, container in (("probe", probe), ("sidecar", sidecar), ("bystander", bystander)):
        report = _ran(check, node, f"shared-claim ({who} container)", container)
        if isinstance(report, Verdict):
            return report
        views.append((who, report))
    pairs, shown = _allocated(allocations, devices)
    evidence = [*shown, *(f"the {who} container sees: {', '.join(_seen_uuids(r)) or 'no GPU'}" for who, r in views)]
    if len(pairs) != 1 or pairs[0][1] is None:
        got = ", ".join(a.device for a, _ in pairs) or "nothing"
        return failed(check, node, f"the shared claim for one GPU was allocated {got}", expected="one published device",
                      observed=got, evidence=tuple(evidence))
    device = pairs[0][1]
    assert device is not None
    for who, report in views[:2]:
        seen = _seen_uuids(report)
        if tuple(seen) != (device.uuid,):
            return failed(check, node, f"the claim both containers use was allocated {device.describe()} but the "
                          f"{who} container sees {', '.join(seen) or 'no GPU'}",
                          expected=f"both see exactly {device.uuid}", observed=", ".join(seen) or "none",
                          evidence=tuple(evidence))
    view = GpuView.of(views[2][1])
    leaked = view.nvml or view.cuda or view.dev
    if leaked or view.cuda is None and view.nvml is None:
        what = (f"sees {len(leaked)} GPU{'s' if len(leaked) != 1 else ''}: {', '.join(leaked)}" if leaked
                else f"cannot be read ({'; '.join(view.unreadable)})")
        return failed(check, node, f"the container without the claim {what}", expected="no GPU",
                      observed=view.describe(), evidence=(*evidence, f"bystander: {view.describe(full=True)}"))
    return passed(check, node, f"both containers using the claim see {device.describe()}; the one without sees no GPU",
                  expected=device.uuid or device.name, observed=device.uuid or device.name, evidence=tuple(evidence))


def evaluate_claim_lifecycle(node: str, claims: Mapping[str, Sequence[Allocation]], left: Sequence[str],
                             error: str | None = None) -> Verdict:
    """Each claim generated for a pod (``claims``: pod -> its claims as seen allocated) named the pod
    in ``status.reservedFor`` while it ran, and is deleted once the pod is gone (``left``: those
    still there after the campaign's pods were deleted and a short watch)."""
    check = "dra.claim-reserved-then-deleted"
    seen = [(pod, a) for pod, allocs in sorted(claims.items()) for a in allocs]
    if not seen:
        return not_tested(check, node, f"no claim of a pod on {node} was seen allocated", kind=COULD_NOT_RUN)
    evidence = tuple(f"claim {a.claim} of pod {pod}: reservedFor {', '.join(a.reserved_for) or 'nobody'}"
                     for pod, a in seen)
    unreserved = [(pod, a) for pod, a in seen if pod not in a.reserved_for]
    if unreserved:
        pod, a = unreserved[0]
        return failed(check, node, f"claim {a.claim} was allocated while pod {pod} ran but status.reservedFor named "
                      f"{', '.join(a.reserved_for) or 'nobody'}" + (f" (and {len(unreserved) - 1} more)"
                                                                     if len(unreserved) > 1 else ""),
                      expected="reservedFor names the pod", observed=", ".join(a.reserved_for) or "empty",
                      evidence=evidence)
    ours = {a.claim for _, a in seen}
    stale = sorted(set(left) & ours)
    if stale:
        return failed(check, node, f"{len(stale)} generated claim(s) outlived their pods: {', '.join(stale[:3])}"
                      + (" ..." if len(stale) > 3 else ""), expected="each generated claim deleted with its pod",
                      observed=f"{len(stale)} left", evidence=evidence)
    if error is not None:
        return not_tested(check, node, f"{len(seen)} claims were reserved for their pods, but whether they were "
                          f"deleted is unknown: {error}", kind=COULD_NOT_RUN)
    return passed(check, node, f"{len(seen)} claims were reserved for their pods while they ran and deleted with them",
                  expected="reservedFor names the pod; the claim deleted after", observed="so", evidence=evidence)


def evaluate_matched_pair(node: str, sighting: Sighting | None, allocations: Sequence[Allocation],
                          devices: Sequence[SliceDevice], *, attribute: str = PAIR_ATTRIBUTE) -> Verdict:
    """A claim for two GPUs with ``constraints[].matchAttribute`` on ``attribute`` is allocated two
    devices of the node with one value of it, and the pod sees both."""
    check = "dra.count-with-match-attribute"
    gpus = [d for d in devices if d.kind == "gpu"]
    if len(gpus) < 2:
        return not_tested(check, node, f"{node} publishes {len(gpus)} full GPU: a claim for two needs two",
                          kind=NOT_APPLICABLE)
    report = _ran(check, node, "matched-pair", sighting)
    if isinstance(report, Verdict):
        return report
    pairs, shown = _allocated(allocations, devices)
    seen = _seen_uuids(report)
    evidence = [*shown, f"the pod sees: {', '.join(seen) or 'no GPU'}"]
    keys = {a.key for a, _ in pairs}
    if len(pairs) != 2 or len(keys) != 2:
        got = ", ".join(a.device for a, _ in pairs) or "nothing"
        return failed(check, node, f"the claim for two GPUs (count 2) was allocated {got}",
                      expected="two different devices", observed=got, evidence=tuple(evidence))
    foreign = [a for a, d in pairs if d is None]
    if foreign:
        where = f"{foreign[0].driver}/{foreign[0].pool}/{foreign[0].device}"
        return failed(check, node, f"the claim was allocated {where}, which no ResourceSlice of {node} publishes",
                      expected=f"two devices of {node}",
                      observed=foreign[0].device, evidence=tuple(evidence))
    chosen = [d for _, d in pairs if d is not None]
    values = {d.name: d.attributes.get(attribute) for d in chosen}
    if None in values.values() or len(set(values.values())) != 1:
        shown_values = ", ".join(f"{k}={v}" for k, v in values.items())
        return failed(check, node, f"the constraint matchAttribute {GPU_DRIVER}/{attribute} did not hold: "
                      f"{shown_values}",
                      expected=f"one {attribute}", observed=shown_values, evidence=tuple(evidence))
    uuids = {d.uuid for d in chosen}
    if set(seen) != uuids or len(seen) != 2:
        return failed(check, node, f"the claim was allocated {', '.join(sorted(u or '?' for u in uuids))} but the pod "
                      f"sees {', '.join(seen) or 'no GPU'}", expected="exactly the two allocated GPUs",
                      observed=", ".join(seen) or "none", evidence=tuple(evidence))
    value = next(iter(values.values()))
    return passed(check, node, f"two devices ({', '.join(values)}) with {attribute}={value}, both seen by the pod",
                  expected=f"2 devices, one {attribute}", observed=f"{', '.join(values)}", evidence=tuple(evidence))
