"""Security floors (check ``security.component-versions``): each GPU node's components, at the
versions the cluster shows, judged against NVIDIA's security bulletins
(gpuconf/data/security_advisories.yaml, or a site's own table given with ``--security-floor``).

Where each version is read, per node, from the most direct reading the run has (reads: api), the
verdict naming it:

* the GPU driver: NVML's driver version in the run's whole-node probe on the node, where this run
  launched one (the inventory suite); else the node's facts (GFD's
  ``nvidia.com/cuda.driver-version.full``, else the DRA driver's ``driverVersion`` attribute;
  gpuconf.nodes.facts). A label that disagrees with NVML is named in the evidence, never judged: a stale
  label is labels.gfd-matches-hardware's finding;
* the Container Toolkit: the image tag of the toolkit pod on the node (the GPU Operator's
  ``nvidia-container-toolkit-daemonset``: ``nvcr.io/nvidia/k8s/container-toolkit:v1.17.4-ubuntu20.04``);
* the device plugin, the DCGM exporter (``dcgm-exporter:4.1.1-4.0.4-ubuntu22.04``: DCGM 4.1.1,
  exporter 4.0.4), a standalone DCGM and NVIDIA's DRA driver: their pods' image tags on the node;
* the GPU Operator: its own pod's image tag (one for the cluster).

What a node runs is what its Running pods run: every Running pod of a component is judged and the
worst version decides (two toolkit pods, a second install or a rollout's surge, give the same verdict
whatever their names). A pod in any other phase (Pending, Failed, Succeeded, Unknown) runs nothing:
its version is named in the evidence (and beside a PASS, as not judged), never judged. So a rollout
with the old pod still Running and the new one Pending reads as the old version: what runs until the
new pod does. Where no pod of a component runs on the node, the ClusterPolicy's ``spec.<operand>.version``
is what the operator is told to deploy, not what runs: a floor it is below is a finding (the operator
deploys that version), but it never makes a PASS: for the toolkit the node is NOT TESTED naming the
configured version, for an optional component a PASS names it as not judged.

The driver and the toolkit are required: a node where either cannot be read is NOT TESTED naming
it (never PASS). The others are optional: absent, they are "not deployed" in the evidence. A
component present but whose version cannot be read (an image by digest, a ``latest`` tag) is NOT
TESTED too. Findings decide the outcome by NVIDIA's severity: the table's ``policy`` says which
FAIL (critical, high) and which leave the node DEGRADED (medium, low); a finding outranks an
unreadable component (the node is vulnerable whatever the unread one is).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any, cast

from gpuconf.cluster.inventory import ComponentPod
from gpuconf.compat import tables
from gpuconf.nodes.facts import Fact
from gpuconf.outcomes import COULD_NOT_RUN
from gpuconf.verdict import Outcome, Verdict, not_tested, passed
from gpuconf.yamlschema import Document, DocumentError, read, schema, validate

__all__ = ["COMPONENTS", "REQUIRED", "Advisory", "Finding", "Floors", "Reading", "SecurityFloorError",
           "builtin_floors", "evaluate_component_versions", "judge", "load_floors", "node_readings", "parse_floors",
           "parse_image", "version_tuple"]

CHECK = "security.component-versions"

#: Every component the table may name, in the order the evidence lists them, with its name in words.
COMPONENTS: Mapping[str, str] = {
    "driver": "GPU driver",
    "container-toolkit": "NVIDIA Container Toolkit",
    "gpu-operator": "GPU Operator",
    "device-plugin": "NVIDIA device plugin",
    "dra-driver": "NVIDIA DRA driver",
    "dcgm": "DCGM",
    "dcgm-exporter": "DCGM exporter",
}
#: Without these a node cannot be judged: a GPU node always runs a driver and a toolkit.
REQUIRED = ("driver", "container-toolkit")

#: An image's repository name (the last path element) -> the component it ships.
IMAGE_COMPONENTS: Mapping[str, str] = {
    "container-toolkit": "container-toolkit",
    "k8s-device-plugin": "device-plugin",
    "dcgm-exporter": "dcgm-exporter",
    "dcgm": "dcgm",
    "gpu-operator": "gpu-operator",
    "k8s-dra-driver-gpu": "dra-driver",
    "k8s-dra-driver": "dra-driver",
}
#: The ClusterPolicy operand whose ``spec.<key>.version`` names a component's image tag, and the
#: ``nvidia.com/gpu.deploy.<operand>`` label that keeps the operator from deploying it on a node.
POLICY_OPERANDS: Mapping[str, tuple[str, str]] = {
    "container-toolkit": ("toolkit", "container-toolkit"),
    "device-plugin": ("devicePlugin", "device-plugin"),
    "dcgm-exporter": ("dcgmExporter", "dcgm-exporter"),
}

_SEMVER = re.compile(r"v?(\d+\.\d+\.\d+)(?:[-+_.].*)?")
#: dcgm-exporter's tags: <DCGM>-<exporter>[-<base image>] (NVIDIA/dcgm-exporter releases).
_EXPORTER_TAG = re.compile(r"(\d+\.\d+\.\d+)-(\d+\.\d+\.\d+)(?:-.*)?")


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def _tag(image: str) -> tuple[str, str | None]:
    """(repository name, tag) of an image reference; tag None when it is named by digest only."""
    ref = image.split("@", 1)[0]
    path, _, last = ref.rpartition("/")
    name, sep, tag = last.partition(":")
    return name, (tag if sep else None)


def parse_image(image: str) -> tuple[str | None, dict[str, str], str | None]:
    """(component, {component: version}, problem) of one container image: component None for an
    image of no known component; a problem when the image is a component's but its tag carries
    no version (``latest``, a digest)."""
    name, tag = _tag(image)
    component = IMAGE_COMPONENTS.get(name)
    if component is None:
        return None, {}, None
    if tag is None:
        if "@" not in image:
            return component, {}, f"the image {image} has no tag (it runs whatever latest is), so no version"
        return component, {}, f"the image {image} is named by digest, with no version tag"
    if component == "dcgm-exporter":
        m = _EXPORTER_TAG.fullmatch(tag)
        if m:
            return component, {"dcgm": m.group(1), "dcgm-exporter": m.group(2)}, None
    else:
        m = _SEMVER.fullmatch(tag)
        if m:
            return component, {component: m.group(1)}, None
    return component, {}, f"the image tag {tag!r} of {image} carries no version gpuconf can read"


# --- what each node runs -------------------------------------------------------------------------


#: The one pod phase in which a pod's images run on its node (every other phase runs nothing).
RUNNING = "Running"


@dataclass(frozen=True)
class Reading:
    """One component on one node: its version and where it was read, or why it could not be."""

    component: str
    version: str | None
    source: str  # where it was read (or looked for)
    problem: str | None = None  # present, but a version (or one of its Running pods' versions) cannot be read
    deployed: bool = True  # False: an optional component that is not there
    #: read from the ClusterPolicy: the version the operator is told to deploy, not one a pod runs
    configured: bool = False
    #: what was seen but not judged: pods of it that are not Running, a label NVML contradicts
    notes: tuple[str, ...] = ()

    def __str__(self) -> str:
        name = COMPONENTS[self.component]
        if not self.deployed:
            return f"{name}: not deployed ({self.source})"
        if self.version is None:
            return f"{name}: version not readable: {self.problem}"
        unread = f"; version not readable: {self.problem}" if self.problem else ""
        configured = ": configured, no pod of it runs on the node" if self.configured else ""
        return f"{name} {self.version} ({self.source}{configured}){unread}"


def _policy_version(policy: Mapping[str, Any] | None, labels: Mapping[str, str], component: str) -> Reading | None:
    """The version the ClusterPolicy deploys a component at on this node, or None where it does not
    deploy it (no ClusterPolicy, the operand disabled, the node's deploy label false, no version)."""
    if policy is None or component not in POLICY_OPERANDS:
        return None
    key, operand = POLICY_OPERANDS[component]
    spec = (policy.get(key) or {}) if isinstance(policy.get(key), Mapping) else {}
    if spec.get("enabled") is False or labels.get(f"nvidia.com/gpu.deploy.{operand}", "true").lower() == "false":
        return None
    version = str(spec.get("version") or "")
    if not version:
        return None
    m = _EXPORTER_TAG.fullmatch(version) if component == "dcgm-exporter" else _SEMVER.fullmatch(version)
    where = f"ClusterPolicy spec.{key}.version {version!r}"
    if m is None:
        return Reading(component, None, where, problem=f"ClusterPolicy spec.{key}.version {version!r} is not a version",
                       configured=True)
    return Reading(component, m.group(2) if component == "dcgm-exporter" else m.group(1), where, configured=True)


@dataclass(frozen=True)
class _Seen:
    """One component's version (or why it has none) in one image of one pod."""

    version: str | None
    where: str
    problem: str | None
    phase: str
    own: bool  # the component's own image (a standalone DCGM), not one that embeds it (the exporter's DCGM)


def _seen(node: str, pods: Iterable[ComponentPod]) -> dict[str, list[_Seen]]:
    """Every version of every component the pods on ``node`` (and the GPU Operator's, wherever it runs)
    carry, whatever their phase."""
    found: dict[str, list[_Seen]] = {}
    for pod in pods:
        if pod.node != node and not any(parse_image(i)[0] == "gpu-operator" for i in pod.images):
            continue
        for image in pod.images:
            component, versions, problem = parse_image(image)
            if component is None:
                continue
            where = f"image {image} of pod {pod.ref}"
            if problem is not None:
                found.setdefault(component, []).append(_Seen(None, where, problem, pod.phase, True))
            for name, version in versions.items():
                found.setdefault(name, []).append(_Seen(version, where, None, pod.phase, component == name))
    return found


def _from_pods(component: str, seen: Sequence[_Seen]) -> Reading | None:
    """The component's reading from its Running pods, the worst version deciding, or None where none runs."""
    running = [s for s in seen if s.phase == RUNNING]
    # a standalone DCGM pod's version outranks the one the exporter image embeds (the exporter uses the
    # node's hostengine where one runs)
    running = [s for s in running if s.own] or running
    if not running:
        return None
    readable = sorted((s for s in running if s.version is not None),
                      key=lambda s: (version_tuple(str(s.version)), s.where))
    problem = "; ".join(str(s.problem) for s in running if s.version is None) or None
    if not readable:
        return Reading(component, None, running[0].where, problem=problem)
    worst, others = readable[0], readable[1:]
    also = "; also running: " + ", ".join(f"{s.version} ({s.where})" for s in others) if others else ""
    return Reading(component, worst.version, worst.where + also, problem=problem)


def _same(a: str, b: str) -> bool:
    """One version however it is spelled (the DRA driver's semver 580.159.3 is NVML's 580.159.03)."""
    try:
        return version_tuple(a) == version_tuple(b)
    except ValueError:
        return a == b


def _driver(node: str, facts: Fact, nvml: str | None, probe: str | None) -> Reading:
    """The driver's reading: NVML's in the run's whole-node probe, else the node's label or attribute
    (a note says NVML was not read)."""
    label = f"{facts.source.value} {facts.key}"
    if nvml is not None:
        stale = facts.value is not None and not _same(facts.value, nvml)
        return Reading("driver", nvml, f"NVML in the probe pod {probe} on {node}", notes=(
            f"the node's {label} says {facts.value}, NVML on the node {nvml}: judged as NVML reads it (a stale "
            "label is labels.gfd-matches-hardware's finding)",) if stale else ())
    if facts.value is None:
        return Reading("driver", None, "node facts", problem="the node publishes no driver version (GFD label "
                       "nvidia.com/cuda.driver-version.full, DRA attribute driverVersion) and no probe of this run "
                       "read NVML's")
    return Reading("driver", facts.value, label, notes=(
        f"the driver version NVML reports on {node}: no probe of this run read it, the {label} was judged",))


def node_readings(*, node: str, driver: Fact, labels: Mapping[str, str], pods: Iterable[ComponentPod],
                  cluster_policy: Mapping[str, Any] | None, nvml_driver: str | None = None,
                  probe: str | None = None) -> dict[str, Reading]:
    """Every component's reading on ``node``: ``pods`` are the GPU stack's pods of the whole cluster
    (those Running on the node give its versions; the GPU Operator's own pod may run anywhere);
    ``cluster_policy`` the ClusterPolicy's spec, None when there is none; ``nvml_driver`` the driver
    version NVML reported in this run's whole-node probe pod ``probe`` on the node, None where the run
    has none (the node's ``driver`` fact is read then)."""
    seen = _seen(node, pods)
    out: dict[str, Reading] = {"driver": _driver(node, driver, nvml_driver, probe)}
    for component in list(COMPONENTS)[1:]:
        pods_of = seen.get(component, [])
        idle = tuple(f"{COMPONENTS[component]} {s.version or 'of no readable version'} in the {s.where}, which is "
                     f"{s.phase}: not running, not judged" for s in pods_of if s.phase != RUNNING)
        reading = _from_pods(component, pods_of)
        if reading is None:
            reading = _policy_version(cluster_policy, labels, component)
        if reading is not None:
            out[component] = replace(reading, notes=idle)
        elif component in REQUIRED:
            out[component] = Reading(component, None, "looked for", notes=idle, problem=(
                f"no toolkit pod on {node} (a Running app=nvidia-container-toolkit-daemonset in any namespace"
                + (f"; {len(idle)} not Running, named in the evidence" if idle else "")
                + ") and no ClusterPolicy spec.toolkit.version for it: a toolkit installed on the host shows its "
                "version only there (nvidia-ctk --version)"))
        else:
            out[component] = Reading(component, None, f"no pod on {node} runs its image", deployed=False, notes=idle)
    return out


# --- the table -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cve:
    id: str
    severity: str
    cvss: float | None


@dataclass(frozen=True)
class Fix:
    component: str
    fixed: str
    branch: int | None = None
    cves: tuple[str, ...] = ()  # empty: every CVE of the advisory
    condition: str | None = None


@dataclass(frozen=True)
class Advisory:
    id: str
    title: str
    url: str
    cves: tuple[Cve, ...]
    fixes: tuple[Fix, ...]
    unlisted_branches_affected: bool = False


@dataclass(frozen=True)
class Floors:
    """A security-floor table: the advisories and which severities FAIL (the others DEGRADE)."""

    advisories: tuple[Advisory, ...]
    fail: frozenset[str]
    degraded: frozenset[str]
    source: str  # the file, as evidence names it


_RANK = {"critical": 4, "high": 3, "medium": 2, "low": 1}


class SecurityFloorError(DocumentError):
    """A ``--security-floor`` file that cannot be used: ``<file>:<line>:<col>: <field>: <problem>``."""


class _Where(Document):
    error_type = SecurityFloorError


def parse_floors(data: Mapping[str, Any], source: str) -> Floors:
    advisories = []
    for row in data["advisories"]:
        cves = tuple(Cve(c["id"], c["severity"], float(c["cvss"]) if "cvss" in c else None) for c in row["cves"])
        fixes = tuple(Fix(f["component"], str(f["fixed"]), f.get("branch"), tuple(f.get("cves", ())),
                          f.get("condition")) for f in row["fixes"])
        advisories.append(Advisory(str(row["id"]), row["title"], row["url"], cves, fixes,
                                   row.get("unlisted_branches") == "affected"))
    policy = data["policy"]
    return Floors(tuple(advisories), frozenset(policy["fail"]), frozenset(policy["degraded"]), source)


@cache
def builtin_floors() -> Floors:
    return parse_floors(tables.load("security_advisories"), "gpuconf/data/security_advisories.yaml")


def load_floors(path: str | Path) -> Floors:
    """A ``--security-floor`` file, checked against the built-in table's schema; every problem is a
    :class:`SecurityFloorError` (one line)."""
    display = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise SecurityFloorError(display, "", f"cannot read: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise SecurityFloorError(display, "", f"cannot read: not UTF-8 text ({e.reason} at byte {e.start})") from e
    data, where = read(text, display, _Where, empty="a security floor is a mapping with schema: 1, policy and "
                       "advisories (see gpuconf/data/security_advisories.yaml)")
    validate(data, where, schema("security_advisories"), quote_hint='quote versions: "1.17.8"')
    floors = parse_floors(cast(dict[str, Any], data), display)
    both = floors.fail & floors.degraded
    if both:
        raise SecurityFloorError(display, "policy", f"{', '.join(sorted(both))} is both fail and degraded")
    return floors


# --- the judgement ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    component: str
    version: str
    advisory: Advisory
    cves: tuple[Cve, ...]
    fixed: str  # the version to move to (for the driver: of the node's branch)
    condition: str | None = None

    @property
    def severity(self) -> str:
        return max((c.severity for c in self.cves), key=lambda s: _RANK[s])

    def __str__(self) -> str:
        cves = ", ".join(f"{c.id} ({c.severity}{f' {c.cvss:g}' if c.cvss is not None else ''})" for c in self.cves)
        when = f"; where affected: {self.condition}" if self.condition else ""
        return (f"{COMPONENTS[self.component]} {self.version}: NVIDIA bulletin {self.advisory.id} {cves}; "
                f"fixed in {self.fixed} ({self.advisory.url}{when})")


def _findings(reading: Reading, advisory: Advisory) -> list[Finding]:
    if reading.version is None:
        return []
    have = version_tuple(reading.version)
    fixes = [f for f in advisory.fixes if f.component == reading.component]
    out = []
    for fix in fixes:
        if reading.component == "driver" and fix.branch != have[0]:
            continue
        if have < version_tuple(fix.fixed):
            cves = tuple(c for c in advisory.cves if not fix.cves or c.id in fix.cves)
            out.append(Finding(reading.component, reading.version, advisory, cves, fix.fixed, fix.condition))
    branches = sorted({f.branch for f in fixes if f.branch is not None}, reverse=True)
    if (reading.component == "driver" and advisory.unlisted_branches_affected and branches
            and have[0] not in branches and have[0] < branches[0]):
        listed = ", ".join(f"R{f.branch} {f.fixed}" for f in sorted(fixes, key=lambda f: -(f.branch or 0)))
        out.append(Finding("driver", reading.version, advisory, advisory.cves,
                           f"a branch with an update (R{have[0]} gets none: {listed})"))
    return out


def judge(readings: Iterable[Reading], floors: Floors) -> list[Finding]:
    """Every advisory finding of the readings, most severe first."""
    found = [f for r in readings for a in floors.advisories for f in _findings(r, a)]
    return sorted(found, key=lambda f: (-_RANK[f.severity], list(COMPONENTS).index(f.component), f.advisory.id))


def evaluate_component_versions(node: str, readings: Mapping[str, Reading], floors: Floors, *,
                                pods_problem: str | None = None) -> Verdict:
    """The node's verdict: FAIL on a finding of a FAIL severity, DEGRADED on findings of DEGRADED
    severities only, NOT TESTED where a required component (or a present one) cannot be read, where
    the toolkit is only what the ClusterPolicy configures (no pod runs it on the node), or the GPU
    stack's pods could not be listed (``pods_problem``), PASS otherwise, naming as not judged what
    it saw and did not judge (pods not Running, an optional component only configured, a driver
    version NVML did not read)."""
    ordered: Sequence[Reading] = [readings[c] for c in COMPONENTS if c in readings]
    findings = judge(ordered, floors)
    notes = [n for r in ordered for n in r.notes]
    evidence = tuple([*(f"finding: {f}" for f in findings), *(f"read: {r}" for r in ordered),
                      *(f"not judged: {n}" for n in notes), f"judged against {floors.source}"])
    facts = {"components": {r.component: r.version for r in ordered if r.version is not None},
             "findings": [{"component": f.component, "version": f.version, "advisory": f.advisory.id,
                           "cves": [c.id for c in f.cves], "severity": f.severity, "fixed": f.fixed}
                          for f in findings]}
    failing = [f for f in findings if f.severity in floors.fail]
    counted = failing or [f for f in findings if f.severity in floors.degraded]
    if counted:
        outcome = Outcome.FAIL if failing else Outcome.DEGRADED
        named = sorted({f"{COMPONENTS[f.component]} {f.version}" for f in counted})
        summary = (f"{len(counted)} security advisor{'y' if len(counted) == 1 else 'ies'} "
                   f"({', '.join(sorted({f.severity for f in counted}, key=lambda s: -_RANK[s]))}) affect "
                   f"{'; '.join(named)}: {counted[0]}")
        return Verdict(CHECK, node, outcome, summary, expected="every component at or above its fixed version",
                       observed="; ".join(f"{COMPONENTS[f.component]} {f.version} < {f.fixed} (bulletin "
                                          f"{f.advisory.id}, {f.severity})" for f in counted),
                       evidence=evidence, facts=facts)
    if pods_problem is not None:
        return not_tested(CHECK, node, f"the component versions could not be read: {pods_problem}", kind=COULD_NOT_RUN)
    unread = [f"{COMPONENTS[r.component]} version not readable: {r.problem}"
              for r in ordered if r.deployed and r.problem is not None]
    unread += [f"{COMPONENTS[r.component]} {r.version} is only what the {r.source} configures: no pod of it runs "
               f"on {node}, so what {node} runs is not known" for r in ordered
               if r.configured and r.component in REQUIRED and r.problem is None]
    if unread:
        return Verdict(CHECK, node, Outcome.NOT_TESTED, "; ".join(unread), evidence=evidence, facts=facts,
                       kind=COULD_NOT_RUN)
    configured = [f"{r}" for r in ordered if r.configured]
    return passed(CHECK, node, "no component below a security floor: " + ", ".join(
        f"{COMPONENTS[r.component]} {r.version}" for r in ordered if r.version is not None),
        evidence=evidence, facts=facts, not_judged=tuple(notes + configured))
