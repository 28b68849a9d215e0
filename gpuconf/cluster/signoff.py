"""Node sign-off (``--label-nodes``, ``--taint-failed``): each node a run tested carries its verdict.

After a run, every node with at least one check result gets the label ``gpuconf.io/verdict`` (its
worst outcome: pass, degraded, fail, or not-tested when every one of its checks skipped) and the
annotations ``gpuconf.io/run-id``, ``gpuconf.io/verdict-time`` (RFC 3339, UTC) and
``gpuconf.io/failed-checks`` (the ids of its failed and degraded checks, comma-separated, at most
:data:`FAILED_CHECKS_LIMIT` characters; removed when there are none). A node none of whose checks
ran is labelled ``not-tested``, never ``pass``: a stale ``pass`` from an earlier run must not
survive a run that could not vouch for the node.

With ``--taint-failed`` a FAIL node also gets the taint ``gpuconf.io/verdict=fail:NoSchedule``, and
a node that passes (or is only degraded) loses every taint with that key, which only gpuconf adds.
A not-tested node keeps its taints: the run says nothing either way. Nodes the run did not test
are never touched.

Planning is pure (:func:`plan_taints`, :func:`make_node_patch`); :func:`sign_off` makes the calls:
JSON merge patches (RFC 7386) through :meth:`Cluster.call` and its retry policy. Labels and
annotations are maps, merged key by key; the taint list is replaced whole (it has no merge key), so
a patch that changes it carries the node's resourceVersion and is re-planned on a conflict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gpuconf.cluster.access import Cluster
from gpuconf.cluster.errors import ClusterError, ConflictError, NotFoundError

__all__ = ["FAILED_CHECKS_ANNOTATION", "FAILED_CHECKS_LIMIT", "FAIL_TAINT", "RUN_ID_ANNOTATION", "VERDICTS",
           "VERDICT_LABEL", "VERDICT_TIME_ANNOTATION", "NodeSignOff", "SignOffResult", "failed_checks_value",
           "make_node_patch", "plan_taints", "rfc3339", "sign_off"]

VERDICT_LABEL = "gpuconf.io/verdict"
RUN_ID_ANNOTATION = "gpuconf.io/run-id"
VERDICT_TIME_ANNOTATION = "gpuconf.io/verdict-time"
FAILED_CHECKS_ANNOTATION = "gpuconf.io/failed-checks"
#: The label values (gpuconf.report.model's outcomes, all valid label values).
VERDICTS = ("pass", "degraded", "fail", "not-tested")
#: The taint a FAIL node gets; its key is the label's, so any taint with this key is gpuconf's.
FAIL_TAINT: Mapping[str, str] = {"key": VERDICT_LABEL, "value": "fail", "effect": "NoSchedule"}
#: The failed-checks annotation's length bound: enough for dozens of ids, far below the API server's
#: 256 KiB for all of an object's annotations, and short enough for `kubectl describe node`.
FAILED_CHECKS_LIMIT = 1024
MERGE_PATCH = "application/merge-patch+json"
#: Re-plans of one node's patch after a conflict (someone else changed the node in between).
CONFLICT_ATTEMPTS = 3


@dataclass(frozen=True)
class NodeSignOff:
    """What one tested node is signed off with: its verdict and the checks that failed or degraded."""

    node: str
    verdict: str  # one of VERDICTS
    failed_checks: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"{self.node}: verdict {self.verdict!r} is not one of {', '.join(VERDICTS)}")


@dataclass(frozen=True)
class SignOffResult:
    """What the sign-off did to one node: ``taint`` is "added", "removed" or None (unchanged);
    ``error`` the reason the node was not signed off, None when it was."""

    node: str
    verdict: str
    taint: str | None = None
    error: ClusterError | None = None


def rfc3339(when: datetime) -> str:
    """``when`` in UTC, to the second, as Kubernetes writes times (2026-12-01T14:11:09Z)."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def failed_checks_value(checks: Iterable[str], limit: int = FAILED_CHECKS_LIMIT) -> str | None:
    """The failed-checks annotation: distinct ids, sorted, comma-separated; None when there are none.
    Past ``limit`` characters it keeps the ids that fit and says how many it left out (",+3 more")."""
    ids = sorted(set(checks))
    if not ids:
        return None
    whole = ",".join(ids)
    if len(whole) <= limit:
        return whole
    for kept in range(len(ids) - 1, -1, -1):
        suffix = f"+{len(ids) - kept} more"
        text = ",".join([*ids[:kept], suffix])
        if len(text) <= limit:
            return text
    return f"+{len(ids)} more"[:limit]


def plan_taints(taints: Sequence[Mapping[str, Any]], verdict: str, *,
                taint_failed: bool) -> list[dict[str, Any]] | None:
    """The node's new taint list, or None to leave it as it is. Only taints with gpuconf's key are
    added or removed; the others stay, in their order."""
    if not taint_failed or verdict == "not-tested":
        return None
    ours = [t for t in taints if t.get("key") == FAIL_TAINT["key"]]
    others = [dict(t) for t in taints if t.get("key") != FAIL_TAINT["key"]]
    if verdict == "fail":
        current = [{k: t.get(k) for k in ("key", "value", "effect")} for t in ours]
        return None if current == [dict(FAIL_TAINT)] else [*others, dict(FAIL_TAINT)]
    return others if ours else None


def make_node_patch(node: Mapping[str, Any], signoff: NodeSignOff, *, run_id: str | None, verdict_time: str,
                    taint_failed: bool) -> dict[str, Any]:
    """The JSON merge patch that signs ``node`` (the API object, as served) off. A null removes an
    annotation (no failed checks; no run id when the run launched no probe)."""
    metadata: dict[str, Any] = {
        "labels": {VERDICT_LABEL: signoff.verdict},
        "annotations": {RUN_ID_ANNOTATION: run_id, VERDICT_TIME_ANNOTATION: verdict_time,
                        FAILED_CHECKS_ANNOTATION: failed_checks_value(signoff.failed_checks)},
    }
    patch: dict[str, Any] = {"metadata": metadata}
    taints = plan_taints((node.get("spec") or {}).get("taints") or [], signoff.verdict, taint_failed=taint_failed)
    if taints is not None:
        # The list is replaced whole: only if nobody changed the node since it was read.
        metadata["resourceVersion"] = (node.get("metadata") or {}).get("resourceVersion")
        patch["spec"] = {"taints": taints}
    return patch


def _taint_change(before: Mapping[str, Any], patch: Mapping[str, Any]) -> str | None:
    if "spec" not in patch:
        return None
    had = any(t.get("key") == FAIL_TAINT["key"] for t in (before.get("spec") or {}).get("taints") or [])
    has = any(t.get("key") == FAIL_TAINT["key"] for t in patch["spec"]["taints"])
    return "added" if has and not had else "removed" if had and not has else "replaced"


def _read_node(cluster: Cluster, name: str) -> dict[str, Any]:
    """The node as served, read with a list by name (the runner's role lists nodes; it does not get them)."""
    listing = cluster.call_json(f"list node {name}", cluster.core.list_node, field_selector=f"metadata.name={name}")
    items = listing.get("items") or []
    if not items:
        raise NotFoundError(f"not found: node {name} no longer exists", status=404, reason="NotFound")
    node = items[0]
    assert isinstance(node, dict)
    return node


def _sign_off_node(cluster: Cluster, signoff: NodeSignOff, *, run_id: str | None, verdict_time: str,
                   taint_failed: bool) -> SignOffResult:
    name = signoff.node
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        # Without --taint-failed the patch touches maps only: no read, no precondition.
        node = _read_node(cluster, name) if taint_failed else {}
        patch = make_node_patch(node, signoff, run_id=run_id, verdict_time=verdict_time, taint_failed=taint_failed)
        try:
            cluster.call_json(f"patch node {name}", cluster.core.patch_node, name, patch, _content_type=MERGE_PATCH)
        except ConflictError:
            if attempt == CONFLICT_ATTEMPTS:
                raise
            continue
        return SignOffResult(name, signoff.verdict, _taint_change(node, patch))
    raise AssertionError("unreachable")  # the loop returns or raises


def sign_off(cluster: Cluster, signoffs: Iterable[NodeSignOff], *, run_id: str | None, when: datetime,
             taint_failed: bool) -> list[SignOffResult]:
    """Label (and with ``taint_failed`` taint or untaint) each node of ``signoffs``; one node's error
    does not stop the others: it is in that node's result."""
    verdict_time = rfc3339(when)
    out = []
    for signoff in signoffs:
        try:
            out.append(_sign_off_node(cluster, signoff, run_id=run_id, verdict_time=verdict_time,
                                      taint_failed=taint_failed))
        except ClusterError as exc:
            out.append(SignOffResult(signoff.node, signoff.verdict, error=exc))
    return out
