"""DRA-backed extended resources (KEP-5004, DRAExtendedResource: beta and on by default in Kubernetes
1.36): a DeviceClass with ``spec.extendedResourceName`` (NVIDIA's ``gpu.nvidia.com`` naming
``nvidia.com/gpu``) lets a plain ``nvidia.com/gpu: N`` request be served by DRA on a node whose
allocatable does not carry that resource. The scheduler creates a ResourceClaim for the pod, owned
by it and annotated ``resource.kubernetes.io/extended-resource-claim: "true"``, allocates it N devices
of the class, and records the mapping in ``pod.status.extendedResourceClaimStatus``.

``dra.extended-resource-served``, per node whose GPUs DRA serves that way (gpuconf.nodes.NodeView.extended):
the whole-node probe asked for the resource as users do; its pod got the scheduler's claim, allocated
on this node with the count asked, and the probe saw exactly those devices (slice UUIDs vs the
probe's). The pod left unschedulable because the mapped DeviceClass selects no device (a stale
mapping: the class names the resource, its selectors match nothing the node publishes) FAILs naming
the DeviceClass and its extendedResourceName. Anything else is NOT TESTED with the reason.

The claim is read from PodOutcome.claims (run_campaign(record_claims=True)), not from the pod's
``extendedResourceClaimStatus``, which the campaign does not keep: the claim carries the allocation,
the status only its name. A real scheduler's claim of this kind is what tests/realk8s proves
(the annotation's name is the scheduler's: kubernetes pkg/scheduler/framework/plugins/dynamicresources,
``resource.kubernetes.io/extended-resource-claim``).

Pure: no pytest, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpuconf.checks.dra import UNSCHEDULABLE_REASON, _probe_uuids, allocation_of
from gpuconf.checks.isolation import sighting
from gpuconf.cluster import PodOutcome
from gpuconf.nodes.devices import GPU_CLASS, SliceDevice
from gpuconf.outcomes import COULD_NOT_RUN
from gpuconf.verdict import Verdict, failed, not_tested, passed

__all__ = ["EXTENDED_CLAIM_ANNOTATION", "SERVED", "evaluate_extended_resource_served", "extended_claim",
           "stale_mapping"]

SERVED = "dra.extended-resource-served"
#: The annotation the scheduler puts on the claim it creates for a DRA-backed extended resource.
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


def extended_claim(outcome: PodOutcome) -> Mapping[str, Any] | None:
    """The claim the scheduler created for ``outcome``'s extended-resource request: annotated as such
    and owned by the pod."""
    for claim in outcome.claims:
        meta = claim.get("metadata") or {}
        if str((meta.get("annotations") or {}).get(EXTENDED_CLAIM_ANNOTATION, "")).lower() != "true":
            continue
        if any(o.get("kind") == "Pod" and o.get("name") == outcome.name for o in meta.get("ownerReferences") or ()):
            return claim
    return None


def stale_mapping(outcome: PodOutcome, resource: str) -> str | None:
    """The scheduler's message where the pod asking for ``resource`` stayed unschedulable because no
    device could be allocated for it (``cannot allocate all claims``; an ``Insufficient <resource>``
    where the scheduler counts the mapped devices), or None."""
    if not (outcome.unschedulable or (outcome.phase == "Pending" and not outcome.node)):
        return None
    texts = [outcome.message or "", *(e.message for e in outcome.events if e.reason == "FailedScheduling")]
    return next((t for t in texts if UNSCHEDULABLE_REASON in t or f"Insufficient {resource}" in t), None)


def evaluate_extended_resource_served(node: str, *, resource: str, outcome: PodOutcome | None,
                                      devices: Sequence[SliceDevice], requested: int,
                                      device_class: str = GPU_CLASS) -> Verdict:
    """``dra.extended-resource-served`` on ``node`` (module docstring): ``outcome`` is the whole-node
    probe that asked for ``requested`` x ``resource``, which ``device_class`` maps."""
    mapping = f"DeviceClass {device_class} (spec.extendedResourceName: {resource})"
    if outcome is None:
        return not_tested(SERVED, node, f"no whole-node probe asked for {resource} on {node}", kind=COULD_NOT_RUN)
    stale = stale_mapping(outcome, resource)
    if stale is not None:
        gpus = [d for d in devices if d.kind == "gpu"]
        return failed(SERVED, node, f"a pod asking for {requested} x {resource} on {node} is unschedulable: {mapping} "
                      f"maps the resource, but no device it selects can be allocated there ({len(gpus)} GPUs "
                      "published); the scheduler said: " + stale,
                      expected=f"{requested} device(s) of {device_class} allocated through the scheduler's claim",
                      observed=stale, evidence=(f"published: {', '.join(d.describe() for d in gpus) or 'none'}",),
                      remedy=f"Compare DeviceClass {device_class}'s selectors with the node's ResourceSlice "
                      "(kubectl get deviceclass -o yaml; kubectl get resourceslices --field-selector "
                      f"spec.nodeName={node} -o yaml): fix the selector, or point extendedResourceName at a class "
                      "that selects the node's GPUs.", causes={"class-selects-no-device"})
    claim = extended_claim(outcome)
    if claim is None:
        why = (f"the pod's claims are not all known ({outcome.claims_error})" if outcome.claims_error
               else f"no claim annotated {EXTENDED_CLAIM_ANNOTATION}=true and owned by pod {outcome.name} was seen "
               f"({outcome.phase})")
        return not_tested(SERVED, node, f"{why}: which devices served {resource} is not known", kind=COULD_NOT_RUN)
    allocation = allocation_of(claim)
    name = str((claim.get("metadata") or {}).get("name"))
    keys = {d.key: d for d in devices}
    got = [keys.get(a.key) for a in (allocation.devices if allocation is not None else ())]
    shown = ", ".join(d.describe() if d else "a device not published on this node" for d in got) or "nothing"
    evidence = [f"claim {name}: {shown}"]
    if allocation is None or len(got) != requested or None in got:
        return failed(SERVED, node, f"the scheduler's claim {name} for {requested} x {resource} was allocated "
                      f"{shown}", expected=f"{requested} device(s) of {node}", observed=shown, evidence=tuple(evidence))
    seen = sighting(outcome)
    if seen.report is None:
        return not_tested(SERVED, node, f"claim {name} was allocated {shown}, but the probe did not report what it "
                          f"saw: {seen.failure}", kind=COULD_NOT_RUN)
    uuids, how = _probe_uuids(seen.report)
    allocated = {d.gpu_uuid for d in got if d is not None and d.gpu_uuid}
    evidence.append(f"the probe ({how}) sees: {', '.join(sorted(uuids)) or 'no GPU'}")
    if uuids != allocated:
        return failed(SERVED, node, f"claim {name} was allocated {shown} but the probe sees "
                      f"{', '.join(sorted(uuids)) or 'no GPU'}", expected=", ".join(sorted(allocated)),
                      observed=", ".join(sorted(uuids)) or "none", evidence=tuple(evidence))
    return passed(SERVED, node, f"{requested} x {resource} served through DRA: the scheduler's claim {name} got "
                  f"{shown}, the GPUs the probe sees ({mapping})", evidence=tuple(evidence))
