"""The `restricted` Pod Security Standard over a pod object (pure: no API calls).

Issue 10 asks that every pod the suite creates pass the `restricted` profile where the check allows,
and that each exception be declared with its reason. :func:`assess` answers that for one pod: the
controls of the upstream standard (https://kubernetes.io/docs/concepts/security/pod-security-standards/,
the Baseline controls plus the Restricted ones, as Pod Security Admission evaluates them at the
`latest` version) each yield a :class:`Violation`; a pod may except controls through the
``gpuconf.io/pss-exceptions`` annotation, a JSON object of control -> reason, and an exception
without a reason is itself a finding.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CONTROLS", "EXCEPTIONS_ANNOTATION", "Assessment", "Violation", "assess", "exceptions_annotation",
           "violations"]

#: The pod annotation that declares exceptions: ``{"<control>": "<reason>", ...}`` as JSON.
EXCEPTIONS_ANNOTATION = "gpuconf.io/pss-exceptions"

#: The controls, by the names used here, each with what the standard allows.
CONTROLS: Mapping[str, str] = {
    "hostProcess": "windowsOptions.hostProcess unset or false",
    "hostNamespaces": "hostNetwork, hostPID and hostIPC unset or false",
    "privileged": "securityContext.privileged unset or false",
    "capabilities": "capabilities.drop includes ALL; capabilities.add only NET_BIND_SERVICE",
    "hostPathVolumes": "no hostPath volume",
    "hostPorts": "no container port with a non-zero hostPort",
    "appArmor": "AppArmor profile unset, RuntimeDefault or Localhost",
    "seLinux": "seLinuxOptions.type unset or a container type; user and role unset",
    "procMount": "procMount unset or Default",
    "seccomp": "seccompProfile RuntimeDefault or Localhost, for the pod or for every container",
    "sysctls": "only the safe sysctls",
    "volumeTypes": "only configMap, csi, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected, secret",
    "privilegeEscalation": "allowPrivilegeEscalation false in every container",
    "runAsNonRoot": "runAsNonRoot true, for the pod or for every container, and never false",
    "runAsUser": "runAsUser unset or non-zero",
}

_ALLOWED_VOLUMES = frozenset({"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                              "projected", "secret"})
_SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
_SAFE_SYSCTLS = frozenset({
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes"})
_APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
_CONFINED = ("RuntimeDefault", "Localhost")


@dataclass(frozen=True)
class Violation:
    """One control a pod breaks: ``where`` is "pod" or "container <name>"."""

    control: str
    where: str
    detail: str

    def __str__(self) -> str:
        return f"{self.where}: {self.detail} ({self.control})"


@dataclass(frozen=True)
class Assessment:
    """A pod against the restricted profile: what it breaks undeclared, what it breaks with a
    declared reason, and what is wrong with its declaration."""

    pod: str
    violations: tuple[Violation, ...]
    excepted: tuple[tuple[Violation, str], ...]
    declaration_errors: tuple[str, ...]

    @property
    def passes(self) -> bool:
        return not self.violations and not self.declaration_errors

    def lines(self) -> list[str]:
        """Each finding as one line naming the pod (empty when it passes)."""
        return ([f"{self.pod}: {v}" for v in self.violations]
                + [f"{self.pod}: {e}" for e in self.declaration_errors])


def _containers(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(key) or ()


def violations(pod: Mapping[str, Any]) -> list[Violation]:
    """Every restricted-profile control ``pod`` (a Pod object) breaks, pod-level ones first."""
    spec: Mapping[str, Any] = pod.get("spec") or {}
    annotations: Mapping[str, str] = (pod.get("metadata") or {}).get("annotations") or {}
    psc: Mapping[str, Any] = spec.get("securityContext") or {}
    out: list[Violation] = []

    def add(control: str, where: str, detail: str) -> None:
        out.append(Violation(control, where, detail))

    if (psc.get("windowsOptions") or {}).get("hostProcess"):
        add("hostProcess", "pod", "windowsOptions.hostProcess is true")
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            add("hostNamespaces", "pod", f"{field} is true")
    for volume in spec.get("volumes") or ():
        kinds = [k for k in volume if k != "name"]
        if "hostPath" in kinds:
            add("hostPathVolumes", "pod", f"volume {volume.get('name')} is a hostPath")
        for kind in kinds:
            if kind not in _ALLOWED_VOLUMES:
                add("volumeTypes", "pod", f"volume {volume.get('name')} has type {kind}")
    out += _selinux("pod", psc.get("seLinuxOptions") or {})
    pod_apparmor = (psc.get("appArmorProfile") or {}).get("type")
    if pod_apparmor is not None and pod_apparmor not in _CONFINED:
        add("appArmor", "pod", f"appArmorProfile type is {pod_apparmor}")
    for key, value in annotations.items():
        if key.startswith(_APPARMOR_ANNOTATION) and value != "runtime/default" and not value.startswith("localhost/"):
            add("appArmor", "pod", f"annotation {key} is {value}")
    for sysctl in psc.get("sysctls") or ():
        if sysctl.get("name") not in _SAFE_SYSCTLS:
            add("sysctls", "pod", f"sysctl {sysctl.get('name')} is not a safe sysctl")
    pod_seccomp = (psc.get("seccompProfile") or {}).get("type")
    if pod_seccomp is not None and pod_seccomp not in _CONFINED:
        add("seccomp", "pod", f"seccompProfile type is {pod_seccomp}")
    if psc.get("runAsNonRoot") is False:
        add("runAsNonRoot", "pod", "runAsNonRoot is false")
    if psc.get("runAsUser") == 0:
        add("runAsUser", "pod", "runAsUser is 0")
    for container in _containers(spec):
        out += _container(container, pod_seccomp=pod_seccomp, pod_non_root=psc.get("runAsNonRoot") is True)
    return out


def _selinux(where: str, options: Mapping[str, Any]) -> list[Violation]:
    out = []
    if options.get("type", "") not in _SELINUX_TYPES:
        out.append(Violation("seLinux", where, f"seLinuxOptions type is {options['type']}"))
    for field in ("user", "role"):
        if options.get(field):
            out.append(Violation("seLinux", where, f"seLinuxOptions {field} is set"))
    return out


def _container(container: Mapping[str, Any], *, pod_seccomp: str | None, pod_non_root: bool) -> list[Violation]:
    where = f"container {container.get('name')}"
    sc: Mapping[str, Any] = container.get("securityContext") or {}
    out: list[Violation] = []

    def add(control: str, detail: str) -> None:
        out.append(Violation(control, where, detail))

    if (sc.get("windowsOptions") or {}).get("hostProcess"):
        add("hostProcess", "windowsOptions.hostProcess is true")
    if sc.get("privileged"):
        add("privileged", "privileged is true")
    caps: Mapping[str, Any] = sc.get("capabilities") or {}
    if "ALL" not in (caps.get("drop") or ()):
        add("capabilities", "capabilities.drop does not include ALL")
    extra = [c for c in caps.get("add") or () if c != "NET_BIND_SERVICE"]
    if extra:
        add("capabilities", f"capabilities.add has {', '.join(extra)}")
    ports = [str(p.get("containerPort")) for p in container.get("ports") or () if p.get("hostPort")]
    if ports:
        add("hostPorts", f"hostPort set for port {', '.join(ports)}")
    apparmor = (sc.get("appArmorProfile") or {}).get("type")
    if apparmor is not None and apparmor not in _CONFINED:
        add("appArmor", f"appArmorProfile type is {apparmor}")
    out += _selinux(where, sc.get("seLinuxOptions") or {})
    if sc.get("procMount", "Default") != "Default":
        add("procMount", f"procMount is {sc['procMount']}")
    seccomp = (sc.get("seccompProfile") or {}).get("type")
    if seccomp is not None and seccomp not in _CONFINED:
        add("seccomp", f"seccompProfile type is {seccomp}")
    elif seccomp is None and pod_seccomp not in _CONFINED:
        add("seccomp", "no seccompProfile here or for the pod")
    if sc.get("allowPrivilegeEscalation") is not False:
        add("privilegeEscalation", "allowPrivilegeEscalation is not false")
    non_root = sc.get("runAsNonRoot")
    if non_root is False:
        add("runAsNonRoot", "runAsNonRoot is false")
    elif non_root is None and not pod_non_root:
        add("runAsNonRoot", "runAsNonRoot is not true here or for the pod")
    if sc.get("runAsUser") == 0:
        add("runAsUser", "runAsUser is 0")
    return out


def _declared(pod: Mapping[str, Any]) -> tuple[dict[str, str], list[str]]:
    """The pod's declared exceptions (control -> reason) and what is wrong with the declaration."""
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(EXCEPTIONS_ANNOTATION)
    if raw is None:
        return {}, []
    try:
        parsed = json.loads(raw)
    except ValueError as e:
        return {}, [f"annotation {EXCEPTIONS_ANNOTATION} is not JSON: {e}"]
    if not isinstance(parsed, dict):
        return {}, [f"annotation {EXCEPTIONS_ANNOTATION} is not a JSON object of control -> reason"]
    declared: dict[str, str] = {}
    errors: list[str] = []
    for control, reason in parsed.items():
        if control not in CONTROLS:
            errors.append(f"exception for unknown control {control!r} (known: {', '.join(CONTROLS)})")
        elif not isinstance(reason, str) or not reason.strip():
            errors.append(f"exception for {control} gives no reason")
        else:
            declared[control] = reason.strip()
    return declared, errors


def assess(pod: Mapping[str, Any]) -> Assessment:
    """``pod`` against the restricted profile, its declared exceptions applied (an exception that
    gives no reason excepts nothing)."""
    declared, errors = _declared(pod)
    found = violations(pod)
    meta = pod.get("metadata") or {}
    name = f"{meta.get('namespace', '')}/{meta.get('name', '')}".lstrip("/")
    return Assessment(
        pod=name,
        violations=tuple(v for v in found if v.control not in declared),
        excepted=tuple((v, declared[v.control]) for v in found if v.control in declared),
        declaration_errors=tuple(errors),
    )


def exceptions_annotation(reasons: Mapping[str, str]) -> dict[str, str]:
    """The annotation that declares ``reasons`` (control -> why the pod cannot meet it), for a pod
    builder; a reason must be given for each control."""
    for control, reason in reasons.items():
        if control not in CONTROLS:
            raise ValueError(f"unknown Pod Security control {control!r} (known: {', '.join(CONTROLS)})")
        if not reason.strip():
            raise ValueError(f"an exception for {control} needs its reason")
    return {EXCEPTIONS_ANNOTATION: json.dumps(dict(sorted(reasons.items())))}
