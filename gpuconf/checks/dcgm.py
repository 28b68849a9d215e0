"""The DCGM diagnostics tier (opt-in, ``--dcgm-diag LEVEL``): ``dcgmi diag -r LEVEL --json`` on
each eligible node, in a pod that holds every GPU of the node, judged test by test and GPU by GPU
from the per-result JSON, never from a summary.

Why per result: a test's ``test_summary`` (4.x) or first result (what 3.x tools read) can say Pass
while one GPU's result failed or recorded an error; NVIDIA/DCGM issue #284 has the memory test
record DCGM_FR_MEMORY_ALLOC and still report Pass. Here any failed result, any result that records
an error while claiming Pass, and any failed summary fail ``dcgm.diag-passes``; warnings make
``dcgm.diag-no-warnings`` degraded; a run where every test skipped is not tested, with DCGM's own
reasons; a level passes only where each of its tests has a passing result for every GPU the pod was
given (a per-GPU ``Skip``, "GPU 1 is in use", or results for GPU 0 only on a 2-GPU node leave those
GPUs not tested: NOT TESTED naming them, never a pass on the GPUs that were). Both JSON generations
are read: 3.x (``"DCGM GPU Diagnostic"``, results with ``gpu_ids``/``gpu_id``) and 4.x (``"DCGM
Diagnostic"``, per-test ``test_summary``, results per entity with ``entity_group``/``entity_id``,
errors as ``warnings`` entries carrying ``error_id``).
The facts and their sources are in gpuconf/data/dcgm_diag.yaml.

The pod (:func:`make_dcgm_diag_pod`) runs NVIDIA's DCGM image with an embedded hostengine
(``nv-hostengine -n`` in the same container: dcgmi talks to a hostengine, and the node's own, if
any, would see GPUs other than the pod's), then ``dcgmi diag``; it asks for its GPUs through
nvidia.com/gpu like every probe, runs as non-root with every capability dropped (SYS_ADMIN is only
needed for profiling metrics, which a diagnostic does not read).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator

from gpuconf.compat import tables
from gpuconf.nodes import NodeView, Unavailable, Via
from gpuconf.outcomes import COULD_NOT_RUN, NOT_APPLICABLE
from gpuconf.probe_pods import DEFAULT_TOLERATIONS, PRIORITY_CLASS, probe_pod_name
from gpuconf.verdict import Outcome, Verdict, failed, not_tested, passed

__all__ = [
    "CHECK_PASSES",
    "CHECK_WARNINGS",
    "DiagDocument",
    "DiagError",
    "DiagLevel",
    "DiagParseError",
    "DiagResult",
    "DiagTest",
    "diag_image",
    "diag_level",
    "evaluate_dcgm_diag",
    "evaluate_dcgm_warnings",
    "exit_meaning",
    "make_dcgm_diag_pod",
    "not_a_diag_node",
    "not_a_diag_node_kind",
    "parse_diag",
    "pod_name",
]

CHECK_PASSES = "dcgm.diag-passes"
CHECK_WARNINGS = "dcgm.diag-no-warnings"
#: Our wrapper's own exit status when the embedded hostengine never answered (dcgmi's are >= 198).
EXIT_NO_HOSTENGINE = 3
#: dcgmi's refusal on a node with any MIG-enabled GPU (NVIDIA/DCGM issues #31, #70, #94).
_MIG_REFUSAL = "MIG configuration is incompatible with the diagnostic"


# -------------------------------------------------------------------------------------------------
# The data


@dataclass(frozen=True)
class DiagLevel:
    level: int
    name: str
    purpose: str
    tests: tuple[str, ...]
    typical_s: int
    budget_s: int


def _data() -> dict[str, Any]:
    return tables.load("dcgm_diag")


@cache
def diag_level(level: int) -> DiagLevel:
    for row in _data()["levels"]:
        if int(row["level"]) == level:
            return DiagLevel(level, str(row["name"]), str(row["purpose"]), tuple(str(t) for t in row["tests"]),
                             int(row["typical_s"]), int(row["budget_s"]))
    raise ValueError(f"no DCGM diagnostic level {level} (1-4)")


def diag_image(registry: str | None = None) -> str:
    """The DCGM image: NVIDIA's on NGC, or the same path under ``registry`` (a mirror)."""
    image = _data()["image"]
    if registry:
        return f"{registry.rstrip('/')}/{image['path']}:{image['tag']}"
    return f"{image['repository']}:{image['tag']}"


def exit_meaning(code: int | None) -> str:
    """What dcgmi's exit status says (its DCGM_ST_* name), or that it is not one of dcgmi's."""
    if code is None:
        return "no exit status"
    if code == EXIT_NO_HOSTENGINE:
        return f"exit {code}: the embedded nv-hostengine never answered"
    for row in _data()["exit_codes"]:
        if int(row["code"]) == code:
            return f"exit {code} {row['name']}: {row['meaning']}"
    return f"exit {code}"


# -------------------------------------------------------------------------------------------------
# The pod


def pod_name(node: str) -> str:
    return probe_pod_name("dcgm", "diag", node)


def _script(level: int, timeout_s: int, start_s: int) -> str:
    # The hostengine in the foreground of a background job (-n: no daemon), its log where a non-root
    # user can write; dcgmi diag only once it answers, and the diag's own exit status kept.
    return "\n".join([
        "nv-hostengine -n -f /tmp/nv-hostengine.log &",
        "hostengine=$!",
        "up=0",
        f"for _ in $(seq {start_s}); do dcgmi discovery -l >/dev/null 2>&1 && {{ up=1; break; }}; sleep 1; done",
        'if [ "$up" != 1 ]; then',
        f'  echo "gpuconf: nv-hostengine did not answer within {start_s} s" >&2',
        "  tail -n 20 /tmp/nv-hostengine.log >&2 || true",
        f"  exit {EXIT_NO_HOSTENGINE}",
        "fi",
        f"dcgmi diag -r {level} --json --timeout {timeout_s}",
        "status=$?",
        'kill "$hostengine" 2>/dev/null',
        'exit "$status"',
    ])


def make_dcgm_diag_pod(*, name: str, namespace: str, run_id: str, node: str, gpu_count: int, level: int,
                       timeout_s: int, registry: str | None = None, runtime_class: str | None = None,
                       tolerations: Sequence[Mapping[str, str]] = DEFAULT_TOLERATIONS,
                       gpu_resource: str = "nvidia.com/gpu",
                       resource_claims: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The diag pod for ``node``: every one of its ``gpu_count`` GPUs by ``gpu_resource`` (nvidia.com/gpu,
    from the device plugin or a DRA-backed extended resource), or through ``resource_claims`` (pod claim
    name -> ResourceClaimTemplate name, ``gpu_count`` 0), placed by nodeSelector (the scheduler still
    decides), dcgmi's budget ``timeout_s`` and the pod's deadline a minute beyond it."""
    if gpu_count < 1 and not resource_claims:
        raise ValueError("a DCGM diag pod asks for at least one GPU")
    diag_level(level)  # an unknown level is an error here, not a pod that fails on the node
    security = {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532, "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": int(timeout_s) + int(_data()["hostengine_start_s"]) + 60,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "priorityClassName": PRIORITY_CLASS,
        "nodeSelector": {"kubernetes.io/hostname": node},
        "tolerations": [dict(t) for t in tolerations],
        "containers": [{
            "name": "probe",
            "image": diag_image(registry),
            "command": ["bash", "-c", _script(level, int(timeout_s), int(_data()["hostengine_start_s"]))],
            "securityContext": security,
            "resources": {"limits": {gpu_resource: str(gpu_count)}} if gpu_count > 0 else {},
        }],
    }
    if resource_claims:
        spec["resourceClaims"] = [{"name": k, "resourceClaimTemplateName": v} for k, v in resource_claims.items()]
        spec["containers"][0]["resources"]["claims"] = [{"name": k} for k in resource_claims]
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    return {
        "apiVersion": "v1", "kind": "Pod",
        # no gpuconf.io/probe label: that names a gpuconf probe whose sources a campaign may ship
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"app.kubernetes.io/managed-by": "gpuconf", "gpuconf.io/run-id": run_id,
                                "gpuconf.io/check": "dcgm",
                                "gpuconf.io/dcgm-level": str(level)}},
        "spec": spec,
    }


def not_a_diag_node(node: NodeView) -> str | None:
    """Why the node gets no diag pod, or None: the diagnostic needs exclusive use of every whole GPU
    of the node (the node view's exclusive request, every GPU allocatable), and dcgmi refuses a node
    with any MIG-enabled GPU."""
    if node.mig != "none":
        mig = sorted(k for k in node.capacity if k.startswith("nvidia.com/mig-")) or [f"{node.mig} strategy"]
        return (f"{node.name} has MIG-enabled GPUs ({', '.join(mig)}): dcgmi diag refuses a node with any MIG-enabled "
                "GPU (\"MIG configuration is incompatible with the diagnostic\")")
    ask = node.exclusive(check="the diagnostic")
    if isinstance(ask, Unavailable):
        return ask.reason
    if ask.held_back and ask.via is Via.PLUGIN:  # DRA: the usable GPUs, the device-tainted ones named in the note
        return (f"only {ask.count - ask.held_back} of the {ask.count} GPUs of {node.name} are allocatable: the "
                "diagnostic needs all of them (inventory.allocatable-matches-capacity reports the rest)")
    return None


def not_a_diag_node_kind(node: NodeView) -> str:
    """The NOT TESTED kind of :func:`not_a_diag_node`'s reason: not applicable on a MIG node (dcgmi refuses
    it by design), the node view's kind where it cannot ask for the GPUs, could-not-run where some are
    not allocatable."""
    if node.mig != "none":
        return NOT_APPLICABLE
    ask = node.exclusive(check="the diagnostic")
    return ask.kind if isinstance(ask, Unavailable) else COULD_NOT_RUN


# -------------------------------------------------------------------------------------------------
# The document

#: The subset of both generations' JSON the evaluation relies on (DCGM's own testing/python3
#: dcgm_diag_schema.json for 4.x; NvvsJsonStrings.h keys for 3.x), validated before it is read.
_RESULT = {
    "type": "object",
    "required": ["status"],
    "properties": {
        "status": {"type": "string"},
        "entity_group": {"type": "string"},
        "entity_id": {"type": "integer"},
        "gpu_ids": {"type": ["string", "integer"]},
        "gpu_id": {"type": ["string", "integer"]},
        "warnings": {"type": "array", "items": {"type": "object", "required": ["warning"], "properties": {
            "warning": {"type": "string"}, "error_id": {"type": "integer"},
            "error_severity": {"type": "integer"}}}},
        "info": {"type": ["array", "string"], "items": {"type": "string"}},
    },
}
_BODY = {
    "type": "object",
    "properties": {
        "runtime_error": {"type": "string"},
        "version": {"type": "string"},
        "test_categories": {"type": "array", "items": {
            "type": "object", "required": ["tests"], "properties": {
                "category": {"type": "string"},
                "tests": {"type": "array", "items": {
                    "type": "object", "required": ["name"], "properties": {
                        "name": {"type": "string"},
                        "results": {"type": "array", "items": _RESULT},
                        "test_summary": {"type": "object", "required": ["status"], "properties": {
                            "status": {"type": "string"},
                            "warnings": _RESULT["properties"]["warnings"]}},  # type: ignore[index]
                    }}},
            }}},
    },
}
_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "oneOf": [{"required": ["DCGM Diagnostic"]}, {"required": ["DCGM GPU Diagnostic"]}],
    "properties": {
        "DCGM Diagnostic": _BODY,
        "DCGM GPU Diagnostic": _BODY,
        "entity_groups": {"type": "array", "items": {"type": "object", "properties": {
            "entity_group": {"type": "string"},
            "entities": {"type": "array", "items": {"type": "object", "required": ["entity_id"], "properties": {
                "entity_id": {"type": "integer"}, "serial_num": {"type": "string"}}}}}}},
        "metadata": {"type": "object", "properties": {"version": {"type": "string"}}},
    },
}
_VALIDATOR = Draft202012Validator(_SCHEMA)


class DiagParseError(ValueError):
    """The output holds no valid dcgmi diag JSON document."""


@dataclass(frozen=True)
class DiagError:
    """One entry a result records (4.x and 3.x name the list ``warnings``; it holds errors too)."""

    message: str
    error_id: int | None = None
    severity: int | None = None


@dataclass(frozen=True)
class DiagResult:
    """One test's outcome for one GPU (``gpus``: the GPU ids it covers; empty: not GPU-specific)."""

    status: str  # Pass | Fail | Warn | Skip | Not Run | ""
    gpus: tuple[str, ...] = ()
    errors: tuple[DiagError, ...] = ()
    info: tuple[str, ...] = ()


@dataclass(frozen=True)
class DiagTest:
    name: str
    category: str
    results: tuple[DiagResult, ...]
    summary: str | None = None  # 4.x test_summary.status
    summary_errors: tuple[DiagError, ...] = ()


@dataclass(frozen=True)
class DiagDocument:
    generation: str  # "4.x" | "3.x"
    tests: tuple[DiagTest, ...]
    version: str | None = None
    runtime_error: str | None = None
    serials: Mapping[str, str] | None = None  # GPU id -> serial number (4.x entity_groups)


def _json_object(text: str) -> Any:
    """The JSON object in ``text``: the whole text, else from its first '{' to its last '}' (the
    wrapper's and the hostengine's own lines may surround it in the pod's log)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            raise DiagParseError("no JSON object in the output") from None
        try:
            return json.loads(text[start:end + 1])
        except json.JSONDecodeError as exc:
            raise DiagParseError(f"the output's JSON does not parse: {exc}") from exc


def _errors(entries: Sequence[Mapping[str, Any]] | None) -> tuple[DiagError, ...]:
    return tuple(DiagError(str(e["warning"]), e.get("error_id"), e.get("error_severity")) for e in entries or ())


def _gpus(result: Mapping[str, Any]) -> tuple[str, ...]:
    if result.get("entity_group") not in (None, "GPU"):
        return ()
    if "entity_id" in result:
        return (str(result["entity_id"]),)
    raw = result.get("gpu_ids", result.get("gpu_id"))
    if raw is None:
        return ()
    return tuple(p.strip() for p in str(raw).split(",") if p.strip())


def parse_diag(text: str) -> DiagDocument:
    """The document ``dcgmi diag --json`` printed (3.x or 4.x), validated against the subset read."""
    doc = _json_object(text)
    problems = sorted(_VALIDATOR.iter_errors(doc), key=lambda e: list(e.absolute_path))
    if problems:
        where = "/".join(str(p) for p in problems[0].absolute_path) or "(top)"
        raise DiagParseError(f"not a dcgmi diag document: {where}: {problems[0].message}")
    generation = "4.x" if "DCGM Diagnostic" in doc else "3.x"
    body = doc["DCGM Diagnostic" if generation == "4.x" else "DCGM GPU Diagnostic"]
    tests = []
    for category in body.get("test_categories") or ():
        for test in category["tests"]:
            summary = test.get("test_summary")
            tests.append(DiagTest(
                str(test["name"]), str(category.get("category", "")),
                tuple(DiagResult(str(r["status"]), _gpus(r), _errors(r.get("warnings")),
                                 tuple([r["info"]] if isinstance(r.get("info"), str) else r.get("info") or ()))
                      for r in test.get("results") or ()),
                str(summary["status"]) if summary else None, _errors(summary.get("warnings") if summary else None)))
    serials = {str(e["entity_id"]): str(e["serial_num"]) for g in doc.get("entity_groups") or ()
               if g.get("entity_group") == "GPU" for e in g.get("entities") or () if e.get("serial_num")}
    version = (doc.get("metadata") or {}).get("version") or body.get("version")
    return DiagDocument(generation, tuple(tests), version, body.get("runtime_error"), serials or None)


# -------------------------------------------------------------------------------------------------
# The verdicts


def _gpu(doc: DiagDocument, gpus: Sequence[str]) -> str:
    if not gpus:
        return "the node (no GPU named)"
    serials = doc.serials or {}
    return ", ".join(f"GPU {g}" + (f" (serial {serials[g]})" if g in serials else "") for g in gpus)


def _why(errors: Sequence[DiagError]) -> str:
    return "; ".join(e.message + (f" [error {e.error_id}]" if e.error_id else "") for e in errors) or "no error text"


def _document(node: str, check: str, level: int, output: str | None, exit_code: int | None,
              failure: str | None) -> DiagDocument | Verdict:
    """The parsed document, or the verdict when there is none to judge."""
    run = f"dcgmi diag -r {level} on {node}"
    if not output or not output.strip():
        return failed(check, node, f"{run} printed nothing ({failure or exit_meaning(exit_code)})",
                      expected="a dcgmi diag JSON document", observed=failure or exit_meaning(exit_code))
    if _MIG_REFUSAL in output:
        line = next(x.strip() for x in output.splitlines() if _MIG_REFUSAL in x)
        return not_tested(check, node, f"{run} refused to run: {line}", kind=NOT_APPLICABLE)
    try:
        doc = parse_diag(output)
    except DiagParseError as exc:
        head = " | ".join(x.strip() for x in output.strip().splitlines()[:4])[:400]
        return failed(check, node, f"{run} printed no diag document ({exit_meaning(exit_code)}): {exc}; output: {head}",
                      expected="a dcgmi diag JSON document", observed=exit_meaning(exit_code))
    if doc.runtime_error:
        return failed(check, node, f"{run} could not run its tests ({exit_meaning(exit_code)}): {doc.runtime_error}",
                      expected="the diagnostic runs", observed=doc.runtime_error)
    return doc


def evaluate_dcgm_diag(node: str, output: str | None, level: int, *, exit_code: int | None,
                       failure: str | None = None, gpus: int | None = None) -> Verdict:
    """``dcgm.diag-passes``: every test that ran passed on every GPU. Fails on any failed result, any
    result or summary recording an error while claiming Pass, a failed summary, a nonzero exit
    with nothing failing, and output that is no document; not tested when every test skipped
    (DCGM's reasons) or dcgmi refused the node's MIG configuration, when a test of the level
    (gpuconf/data/dcgm_diag.yaml) is missing from the output or skipped, naming it: a level is passed
    only whole (a diag that left out its memory test is no pass), and when a test of the level has no
    passing result for a GPU of the node (skipped on it, "GPU 1 is in use", or no result for it at
    all), naming the GPUs and DCGM's reasons: a level is passed only on every GPU. ``gpus``: how many
    GPUs the diag pod was given (the hostengine's ids 0..gpus-1); None where not known, and then only
    the GPUs the document names are compared, the PASS saying so. ``failure``: why the pod has no
    output (its phase and reason) when it has none. A skip is not a fault: what kept a test off a GPU
    (another process on it, a SKU the plugin does not run on) is DCGM's to say, not a finding here."""
    got = _document(node, CHECK_PASSES, level, output, exit_code, failure)
    if isinstance(got, Verdict):
        return got
    doc = got
    problems: list[str] = []
    for test in doc.tests:
        said_pass = " although its test_summary said Pass" if test.summary == "Pass" else ""
        bad = [r for r in test.results if r.status == "Fail" or (r.status == "Pass" and r.errors)]
        for r in bad:
            kind = "failed" if r.status == "Fail" else "recorded an error but reported Pass"
            problems.append(f"{test.name} {kind} on {_gpu(doc, r.gpus)}: {_why(r.errors)}{said_pass}")
        if not bad and (test.summary == "Fail" or (test.summary == "Pass" and test.summary_errors)):
            problems.append(f"{test.name}: its test_summary says {test.summary}: {_why(test.summary_errors)}")
    ran = [t for t in doc.tests if any(r.status in _RAN for r in t.results) or t.summary in _RAN]
    skipped = [t for t in doc.tests if t not in ran]
    level_tests = diag_level(level).tests
    if problems:
        isolate = "; dcgmi exited 205: it asks for the GPU to be isolated" if exit_code == 205 else ""
        return failed(CHECK_PASSES, node, f"DCGM level {level} diagnostic ({doc.generation}) failed: "
                      + "; ".join(problems[:6]) + (f"; and {len(problems) - 6} more" if len(problems) > 6 else "")
                      + isolate, expected="every test passes on every GPU",
                      observed=f"{len(problems)} failing result(s), {exit_meaning(exit_code)}")
    if not ran:
        reasons = sorted({i for t in doc.tests for r in t.results for i in (*r.info, *(e.message for e in r.errors))})
        return not_tested(CHECK_PASSES, node, f"DCGM level {level} diagnostic skipped every test ("
                          + ", ".join(t.name for t in doc.tests) + ")" + (": " + "; ".join(reasons[:4]) if reasons
                                                                          else ": DCGM gave no reason"),
                          kind=COULD_NOT_RUN)
    if exit_code not in (0, None):
        return failed(CHECK_PASSES, node, f"dcgmi diag -r {level} reported {exit_meaning(exit_code)}, yet no result "
                      "in its document failed: the run is not a pass", expected="exit 0",
                      observed=exit_meaning(exit_code))
    # Fail closed: a level whose tests did not all run is not a pass of that level, whatever ran.
    done = {canonical_test(t) for t in ran}
    missing = [t for t in level_tests if t not in {canonical_test(x) for x in doc.tests}]
    unrun = [t for t in skipped if canonical_test(t) in level_tests and canonical_test(t) not in done]
    name = f"DCGM level {level} ({diag_level(level).name}) diagnostic"
    if missing or unrun:
        parts = ([f"not in its output: {', '.join(missing)}"] if missing else []) + [
            f"skipped {t.name}: {_skip_reason(t)}" for t in unrun]
        return not_tested(CHECK_PASSES, node, f"{name} did not run every test of the level ("
                          f"{', '.join(level_tests)}) on {node}: {'; '.join(parts)}; the "
                          f"{', '.join(t.name for t in ran)} that ran passed, so the level is not judged",
                          kind=COULD_NOT_RUN)
    # ... and a level is passed only on every GPU: each test of it, on each GPU of the node.
    node_gpus = _node_gpus(doc, gpus)
    gaps = [g for t in ran if canonical_test(t) in level_tests for g in _gaps(doc, t, node_gpus)]
    if gaps:
        untested = sorted({gpu for gap in gaps for gpu in gap.gpus}, key=_gpu_order)
        return not_tested(CHECK_PASSES, node, f"{name} did not test every GPU of {node} ("
                          f"{_count(node_gpus, gpus)}): " + "; ".join(str(g) for g in gaps)
                          + f"; every result it has passed, so the level is not judged on {_gpu(doc, untested)}",
                          kind=COULD_NOT_RUN)
    extra = [t for t in skipped if canonical_test(t) not in level_tests]
    return passed(CHECK_PASSES, node, f"{name} passed on {_count(node_gpus, gpus)}: " + ", ".join(t.name for t in ran)
                  + (f" (skipped, not of the level: {', '.join(t.name for t in extra)})" if extra else ""),
                  not_judged=_unknown_count(doc, node, gpus, node_gpus))


#: The statuses of a result (or test_summary) that ran its test.
_RAN = ("Pass", "Fail", "Warn")


@dataclass(frozen=True)
class _Gap:
    """GPUs a test of the level left untested: skipped on them (with DCGM's reasons) or no result at all."""

    gpus: tuple[str, ...]
    text: str

    def __str__(self) -> str:
        return self.text


def _gpu_order(gpu: str) -> tuple[bool, int, str]:
    return (not gpu.isdigit(), int(gpu) if gpu.isdigit() else 0, gpu)


def _node_gpus(doc: DiagDocument, gpus: int | None) -> tuple[str, ...]:
    """The GPUs every test must cover: the pod's (ids 0..gpus-1), else every GPU the document names."""
    if gpus is not None:
        return tuple(str(i) for i in range(gpus))
    named = {*(doc.serials or {}), *(g for t in doc.tests for r in t.results for g in r.gpus)}
    return tuple(sorted(named, key=_gpu_order))


def _count(node_gpus: Sequence[str], gpus: int | None) -> str:
    return f"the pod's {len(node_gpus)} GPU(s)" if gpus is not None else f"the {len(node_gpus)} GPU(s) its output names"


def _unknown_count(doc: DiagDocument, node: str, gpus: int | None, node_gpus: Sequence[str]) -> tuple[str, ...]:
    if gpus is not None:
        return ()
    return (f"whether dcgmi tested every GPU of {node}: how many GPUs the diag pod was given is not known, so "
            f"only the GPUs its output names were compared ({_gpu(doc, node_gpus)})",)


def _gaps(doc: DiagDocument, test: DiagTest, node_gpus: Sequence[str]) -> list[_Gap]:
    """Where ``test`` (one that ran) has no passing result for a GPU of the node. A result that names
    no GPU (3.x's deployment checks) covers the node."""
    ran = [r for r in test.results if r.status in _RAN]
    if any(not r.gpus for r in ran):
        return []
    covered = {g for r in ran for g in r.gpus}
    out = []
    for status in sorted({r.status for r in test.results if r.status not in _RAN}):
        results = [r for r in test.results if r.status == status]
        gpus = tuple(sorted({g for r in results for g in r.gpus if g in node_gpus and g not in covered},
                            key=_gpu_order))
        if gpus:
            reasons = sorted({i for r in results for i in (*r.info, *(e.message for e in r.errors))})
            out.append(_Gap(gpus, f"{test.name} {status or 'gave no status'} on {_gpu(doc, gpus)}: "
                            + ("; ".join(reasons[:3]) or "DCGM gave no reason")))
            covered.update(gpus)
    absent = tuple(g for g in node_gpus if g not in covered)
    if absent:
        out.append(_Gap(absent, f"{test.name} has no result for {_gpu(doc, absent)}"))
    return out


#: dcgmi 3.x's display names of the tests whose canonical 4.x name (dcgm_diag.yaml) differs from
#: the name lower-cased with spaces as underscores (NvvsJsonStrings.h; 3.x prints each deployment
#: check, "Denylist", "NVML Library", ..., as its own test of the Deployment category).
_3X_NAMES = {"gpu_memory": "memory"}


def canonical_test(test: DiagTest) -> str:
    """The test's name as dcgm_diag.yaml lists it (the 4.x name): 3.x's Deployment checks are the
    software test, its display names are lower-cased."""
    if test.category.lower() == "deployment":
        return "software"
    key = "_".join(test.name.lower().split())
    return _3X_NAMES.get(key, key)


def _skip_reason(test: DiagTest) -> str:
    reasons = sorted({i for r in test.results for i in (*r.info, *(e.message for e in r.errors))})
    return "; ".join(reasons[:3]) or "DCGM gave no reason"


def evaluate_dcgm_warnings(node: str, output: str | None, level: int, *, exit_code: int | None,
                           failure: str | None = None, gpus: int | None = None) -> Verdict:
    """``dcgm.diag-no-warnings`` (degraded): no test warned on any GPU. Output that is no
    document, or a run that skipped everything, is ``dcgm.diag-passes``' to report: not tested. A
    PASS names, as not judged, the GPUs a test that ran left untested (``gpus`` as for
    :func:`evaluate_dcgm_diag`)."""
    got = _document(node, CHECK_WARNINGS, level, output, exit_code, failure)
    if not isinstance(got, DiagDocument):
        if got.outcome is Outcome.NOT_TESTED:
            return got
        return not_tested(CHECK_WARNINGS, node, f"no diag document to read warnings from on {node} "
                          "(dcgm.diag-passes says why)", kind=COULD_NOT_RUN)
    warned = [f"{t.name} on {_gpu(got, r.gpus)}: {_why(r.errors)}" for t in got.tests for r in t.results
              if r.status == "Warn"]
    warned += [f"{t.name}: its test_summary warns: {_why(t.summary_errors)}" for t in got.tests
               if t.summary == "Warn" and not any(r.status == "Warn" for r in t.results)]
    if warned:
        return failed(CHECK_WARNINGS, node, f"DCGM level {level} diagnostic warned: " + "; ".join(warned[:6]),
                      expected="no warnings", observed=f"{len(warned)} warning(s)")
    if not any(r.status in _RAN for t in got.tests for r in t.results):
        return not_tested(CHECK_WARNINGS, node, f"DCGM level {level} diagnostic ran no test on {node}",
                          kind=COULD_NOT_RUN)
    node_gpus = _node_gpus(got, gpus)
    gaps = [str(g) for t in got.tests if any(r.status in _RAN for r in t.results) for g in _gaps(got, t, node_gpus)]
    return passed(CHECK_WARNINGS, node, f"no DCGM level {level} test warned on {_count(node_gpus, gpus)}",
                  not_judged=(*gaps, *_unknown_count(got, node, gpus, node_gpus)))

