"""Probe pods pass the `restricted` Pod Security Standard, or declare each exception with its reason
(issue 10 part 5).

The checker (gpuconf.podsecurity) is proven rule by rule both ways; then every suite runs against
simulated clusters with the runner Job's options (tests/test_rbac.py's harness) while the simulated
API server keeps each pod the suite's client creates, and each such pod must pass. The probe
namespace those runs use is the runner's, which enforces restricted, and the simulated API server
admits pods there as Pod Security admission would (proven last).
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import pytest
from serving import in_parallel
from test_rbac import AGENT_USER_AGENT, RUNNER, copy_suites, record

from gpuconf.cluster.campaign import make_priority_class
from gpuconf.podsecurity import CONTROLS, EXCEPTIONS_ANNOTATION, assess, exceptions_annotation, violations
from gpuconf.probe_pods import make_cuda_probe_pod, make_nccl_probe_pod
from gpuconf.rbac import load_manifests
from gpuconf.sim.store import ApiError, Store

#: Every suite's every pod variant between them: whole-node and isolation probes, compat canaries,
#: DRA claims, MIG mixed, MPS, NCCL single- and multi-node.
PROFILES = ["healthy-h100", "a100-mps", "h200-dra-only", "a100-mig-mixed"]


def compliant() -> dict[str, Any]:
    """A pod that passes restricted: the pod-level context, one container with its own."""
    return {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
            "volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "src", "configMap": {"name": "c"}}],
            "containers": [{"name": "c", "ports": [{"containerPort": 80}], "securityContext": {
                "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}],
        },
    }


def changed(path: str, value: Any) -> dict[str, Any]:
    """compliant() with the value at dotted ``path`` set (list indexes as numbers); None deletes it."""
    pod = compliant()
    *parents, last = path.split(".")
    target: Any = pod
    for part in parents:
        target = target[int(part)] if part.isdigit() else target.setdefault(part, {})
    key: int | str = int(last) if last.isdigit() else last
    if value is None:
        del target[key]
    else:
        target[key] = value
    return pod


C = "spec.containers.0"
CS = f"{C}.securityContext"
PS = "spec.securityContext"


def test_a_compliant_pod_has_no_violation() -> None:
    assert violations(compliant()) == [] and assess(compliant()).passes


@pytest.mark.parametrize("path, value, line", [
    (f"{PS}.windowsOptions", {"hostProcess": True}, "pod: windowsOptions.hostProcess is true (hostProcess)"),
    (f"{CS}.windowsOptions", {"hostProcess": True}, "container c: windowsOptions.hostProcess is true (hostProcess)"),
    ("spec.hostNetwork", True, "pod: hostNetwork is true (hostNamespaces)"),
    ("spec.hostPID", True, "pod: hostPID is true (hostNamespaces)"),
    ("spec.hostIPC", True, "pod: hostIPC is true (hostNamespaces)"),
    (f"{CS}.privileged", True, "container c: privileged is true (privileged)"),
    (f"{CS}.capabilities", {"add": ["NET_BIND_SERVICE"]}, "container c: capabilities.drop does not include ALL "
                                                          "(capabilities)"),
    (f"{CS}.capabilities.add", ["SYS_ADMIN", "NET_BIND_SERVICE"], "container c: capabilities.add has SYS_ADMIN "
                                                                  "(capabilities)"),
    (f"{C}.ports", [{"containerPort": 80, "hostPort": 8080}], "container c: hostPort set for port 80 (hostPorts)"),
    (f"{PS}.appArmorProfile", {"type": "Unconfined"}, "pod: appArmorProfile type is Unconfined (appArmor)"),
    (f"{CS}.appArmorProfile", {"type": "Unconfined"}, "container c: appArmorProfile type is Unconfined (appArmor)"),
    ("metadata.annotations", {"container.apparmor.security.beta.kubernetes.io/c": "unconfined"},
     "pod: annotation container.apparmor.security.beta.kubernetes.io/c is unconfined (appArmor)"),
    (f"{PS}.seLinuxOptions", {"type": "spc_t"}, "pod: seLinuxOptions type is spc_t (seLinux)"),
    (f"{CS}.seLinuxOptions", {"user": "system_u"}, "container c: seLinuxOptions user is set (seLinux)"),
    (f"{CS}.seLinuxOptions", {"role": "sysadm_r"}, "container c: seLinuxOptions role is set (seLinux)"),
    (f"{CS}.procMount", "Unmasked", "container c: procMount is Unmasked (procMount)"),
    (f"{PS}.sysctls", [{"name": "kernel.msgmax", "value": "1"}], "pod: sysctl kernel.msgmax is not a safe sysctl "
                                                                  "(sysctls)"),
    (f"{PS}.seccompProfile", {"type": "Unconfined"}, ("pod: seccompProfile type is Unconfined (seccomp)",
                                                      "container c: no seccompProfile here or for the pod (seccomp)")),
    (f"{PS}.seccompProfile", None, "container c: no seccompProfile here or for the pod (seccomp)"),
    (f"{CS}.seccompProfile", {"type": "Unconfined"}, "container c: seccompProfile type is Unconfined (seccomp)"),
    (f"{CS}.allowPrivilegeEscalation", None, "container c: allowPrivilegeEscalation is not false "
                                             "(privilegeEscalation)"),
    (f"{CS}.allowPrivilegeEscalation", True, "container c: allowPrivilegeEscalation is not false "
                                             "(privilegeEscalation)"),
    (f"{PS}.runAsNonRoot", None, "container c: runAsNonRoot is not true here or for the pod (runAsNonRoot)"),
    (f"{PS}.runAsNonRoot", False, ("pod: runAsNonRoot is false (runAsNonRoot)",
                                   "container c: runAsNonRoot is not true here or for the pod (runAsNonRoot)")),
    (f"{CS}.runAsNonRoot", False, "container c: runAsNonRoot is false (runAsNonRoot)"),
    (f"{PS}.runAsUser", 0, "pod: runAsUser is 0 (runAsUser)"),
    (f"{CS}.runAsUser", 0, "container c: runAsUser is 0 (runAsUser)"),
    ("spec.volumes.0", {"name": "tmp", "nfs": {"server": "s", "path": "/"}}, "pod: volume tmp has type nfs "
                                                                              "(volumeTypes)"),
], ids=lambda v: v if isinstance(v, str) and " " in v else v[0] if isinstance(v, tuple) else "")
def test_each_restricted_control_names_what_breaks_it(path: str, value: Any, line: str | tuple[str, ...]) -> None:
    """One line per control broken; a pod-level value the containers inherit breaks them too."""
    found = [str(v) for v in violations(changed(path, value))]
    assert found == ([line] if isinstance(line, str) else list(line))


def test_a_host_path_volume_breaks_two_controls() -> None:
    pod = changed("spec.volumes.0", {"name": "host", "hostPath": {"path": "/dev"}})
    assert [str(v) for v in violations(pod)] == ["pod: volume host is a hostPath (hostPathVolumes)",
                                                 "pod: volume host has type hostPath (volumeTypes)"]


@pytest.mark.parametrize("path, value", [
    (f"{CS}.seccompProfile", {"type": "Localhost", "localhostProfile": "p.json"}),
    (f"{PS}.seccompProfile", None),  # given that every container sets its own, below
    (f"{PS}.runAsNonRoot", None),
    (f"{CS}.seLinuxOptions", {"type": "container_init_t", "level": "s0:c1"}),
    (f"{PS}.sysctls", [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}]),
    (f"{CS}.appArmorProfile", {"type": "Localhost", "localhostProfile": "p"}),
    (f"{CS}.procMount", "Default"),
], ids=["Localhost seccomp", "seccomp per container", "runAsNonRoot per container", "a container SELinux type",
        "a safe sysctl", "a Localhost AppArmor profile", "the default procMount"])
def test_what_restricted_allows_is_no_violation(path: str, value: Any) -> None:
    pod = changed(path, value)
    if value is None:  # the container carries what the pod no longer does
        pod["spec"]["containers"][0]["securityContext"].update(
            {"seccompProfile": {"type": "RuntimeDefault"}, "runAsNonRoot": True})
    assert violations(pod) == []


def test_init_and_ephemeral_containers_are_held_to_the_same_rules() -> None:
    pod = compliant()
    pod["spec"]["initContainers"] = [{"name": "i", "securityContext": {"allowPrivilegeEscalation": False}}]
    pod["spec"]["ephemeralContainers"] = [{"name": "e", "securityContext": {"privileged": True}}]
    assert [str(v) for v in violations(pod)] == [
        "container i: capabilities.drop does not include ALL (capabilities)",
        "container e: privileged is true (privileged)",
        "container e: capabilities.drop does not include ALL (capabilities)",
        "container e: allowPrivilegeEscalation is not false (privilegeEscalation)"]


def test_a_declared_exception_with_its_reason_excepts_that_control_only() -> None:
    pod = changed("spec.hostNetwork", True)
    pod["spec"]["containers"][0]["securityContext"]["privileged"] = True
    pod["metadata"]["annotations"] = exceptions_annotation({"hostNamespaces": "RDMA needs the host's network"})
    result = assess(pod)
    assert not result.passes
    assert result.lines() == ["ns/p: container c: privileged is true (privileged)"]
    assert [(str(v), why) for v, why in result.excepted] == [
        ("pod: hostNetwork is true (hostNamespaces)", "RDMA needs the host's network")]


@pytest.mark.parametrize("declared, error", [
    ('{"hostNamespaces": ""}', "exception for hostNamespaces gives no reason"),
    ('{"hostNamespaces": null}', "exception for hostNamespaces gives no reason"),
    ('{"hostNetwork": "why"}', "exception for unknown control 'hostNetwork'"),
    ('["hostNamespaces"]', "is not a JSON object of control -> reason"),
    ("hostNamespaces: why", "is not JSON"),
], ids=["an empty reason", "a null reason", "an unknown control", "a list", "not JSON"])
def test_an_exception_without_a_reason_is_rejected(declared: str, error: str) -> None:
    pod = changed("spec.hostNetwork", True)
    pod["metadata"]["annotations"] = {EXCEPTIONS_ANNOTATION: declared}
    result = assess(pod)
    assert not result.passes and result.excepted == ()
    assert [str(v) for v in result.violations] == ["pod: hostNetwork is true (hostNamespaces)"]
    [line] = result.declaration_errors
    assert error in line


def test_a_builder_cannot_declare_an_exception_without_a_reason() -> None:
    with pytest.raises(ValueError, match="an exception for privileged needs its reason"):
        exceptions_annotation({"privileged": " "})
    with pytest.raises(ValueError, match="unknown Pod Security control 'root'"):
        exceptions_annotation({"root": "why"})
    every = exceptions_annotation(dict.fromkeys(CONTROLS, "why"))
    assert set(json.loads(every[EXCEPTIONS_ANNOTATION])) == set(CONTROLS)


# -------------------------------------------------------------------------------------------------
# The pod builders


@pytest.mark.parametrize("pod", [
    make_cuda_probe_pod(name="p", namespace="ns", run_id="r", check="c", cuda="13.0.2"),
    make_cuda_probe_pod(name="p", namespace="ns", run_id="r", check="c", cuda="13.0.2", registry="reg.example/g"),
    make_cuda_probe_pod(name="p", namespace="ns", run_id="r", check="c", cuda="13.0.2", gpu_count=0,
                        resource_claims={"gpu": "t"}, sidecar_claims=["gpu"], bystander=True),
    make_nccl_probe_pod(name="p", namespace="ns", run_id="r", check="c", node="n", gpu_count=8, rank=0,
                        world_size=2, id_addr="a:1", hostname="h", subdomain="s"),
    make_nccl_probe_pod(name="p", namespace="ns", run_id="r", check="c", node="n", gpu_count=8,
                        registry="reg.example/g"),
], ids=["cuda zero-registry", "cuda registry", "cuda DRA with sidecar and bystander", "nccl multi-node rank",
        "nccl registry"])
def test_every_probe_pod_variant_passes_restricted_with_a_read_only_root(pod: dict[str, Any]) -> None:
    assert assess(pod).lines() == []
    spec = pod["spec"]
    assert spec["securityContext"] == {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                                       "seccompProfile": {"type": "RuntimeDefault"}}
    assert {"name": "tmp", "emptyDir": {}} in spec["volumes"]
    for container in spec.get("initContainers", []) + spec["containers"]:
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        # nvcc's and build.sh's scratch files and the nccl-probe's debug capture go to /tmp.
        assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]


# -------------------------------------------------------------------------------------------------
# Every pod the suites create


#: Appended to test_rbac's recorder: each pod the suite's client (not a node agent) creates is
#: written, as sent, to $GPUCONF_RBAC_LOG.pods. The request observer runs in the handling thread
#: just before the store is called, so a thread-local carries the request's User-Agent there.
CAPTURE = '''

import copy as _copy
_agent = threading.local()
_recording_start = SimulatedCluster.start


def _capturing_start(self):
    store = self.server.store
    create, out = store.create, open(os.environ["GPUCONF_RBAC_LOG"] + ".pods", "a")

    def observe(info, user_agent):
        _agent.value = user_agent

    def capture(resource, obj, *args, **kwargs):
        plural = getattr(resource, "plural", resource)
        if plural == "pods" and getattr(_agent, "value", AGENT) != AGENT:
            with _lock:
                out.write(json.dumps(obj) + "\\n")
                out.flush()
        return create(resource, obj, *args, **kwargs)

    store.create = capture
    self.server.request_observers.append(observe)
    return _recording_start(self)


SimulatedCluster.start = _capturing_start
'''.replace("AGENT", repr(AGENT_USER_AGENT))


@pytest.fixture(scope="module")
def created_pods(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Run every suite on each profile; the pods each run's client created, by profile."""
    base = tmp_path_factory.mktemp("pss")
    copy_suites(base)
    conftest = base / "suites" / "conftest.py"
    conftest.write_text(conftest.read_text() + CAPTURE)
    in_parallel({profile: functools.partial(record, base, profile) for profile in PROFILES})
    return {profile: [json.loads(line) for line in Path(f"{base / profile}.jsonl.pods").read_text().splitlines()]
            for profile in PROFILES}


@pytest.mark.parametrize("profile", PROFILES)
def test_every_pod_a_suite_creates_passes_restricted_or_declares_why(
        created_pods: dict[str, list[dict[str, Any]]], profile: str) -> None:
    pods = created_pods[profile]
    assert pods, f"{profile}: the suites created no pod"
    findings: list[str] = []
    for pod in pods:
        result = assess(pod)
        findings += result.lines()
        for violation, reason in result.excepted:  # shown with -s: what the run declares and why
            print(f"{profile}: {result.pod}: excepted {violation}: {reason}")
    assert not findings, f"{profile}: pods break the restricted Pod Security Standard:\n" + "\n".join(findings)


def test_the_capture_sees_every_kind_of_probe_pod(created_pods: dict[str, list[dict[str, Any]]]) -> None:
    """The test above has teeth: the runs created cuda-probe and nccl-probe pods, zero-registry ones
    with their build container, and DRA ones with claims."""
    pods = [p for ps in created_pods.values() for p in ps]
    probes = {p["metadata"]["labels"].get("gpuconf.io/probe") for p in pods}
    assert {"cuda-probe", "nccl-probe"} <= probes
    assert any(p["spec"].get("initContainers") for p in pods)
    assert any(p["spec"].get("resourceClaims") for p in pods)
    assert any(len(p["spec"]["containers"]) > 1 for p in pods)


def test_a_violating_pod_would_be_caught_by_the_capture() -> None:
    """What the suite-wide test reports when a builder loses a field: the pod and the control."""
    pod = copy.deepcopy(make_cuda_probe_pod(name="p", namespace="ns", run_id="r", check="c", cuda="13.0.2"))
    del pod["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"]
    assert assess(pod).lines() == ["ns/p: container probe: allowPrivilegeEscalation is not false (privilegeEscalation)"]



def probe_namespace_labels() -> dict[str, str]:
    [job] = [d for d in load_manifests(RUNNER) if d["kind"] == "Job" and d["metadata"]["name"] == "gpuconf"]
    [namespace] = [str(a).split("=", 1)[1] for a in job["spec"]["template"]["spec"]["containers"][0]["args"]
                   if str(a).startswith("--namespace=")]
    [doc] = [d for d in load_manifests(RUNNER) if d["kind"] == "Namespace" and d["metadata"]["name"] == namespace]
    return dict(doc["metadata"].get("labels") or {})


def test_the_probe_namespace_enforces_restricted_while_no_pod_declares_an_exception(
        created_pods: dict[str, list[dict[str, Any]]]) -> None:
    """Pod Security admission knows no gpuconf exception: a pod that declares one would be rejected
    where restricted is enforced."""
    declaring = sorted({p["metadata"]["name"] for ps in created_pods.values() for p in ps
                        if EXCEPTIONS_ANNOTATION in (p["metadata"].get("annotations") or {})})
    labels = probe_namespace_labels()
    if declaring:
        assert labels.get("pod-security.kubernetes.io/enforce") != "restricted", (
            f"pods declare Pod Security exceptions ({', '.join(declaring)}): the probe namespace "
            "(manifests/runner/namespace.yaml) cannot enforce restricted; warn instead")
    else:
        assert labels.get("pod-security.kubernetes.io/enforce") == "restricted"


# -------------------------------------------------------------------------------------------------
# Pod Security admission in the simulated API server


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


@pytest.fixture
def store() -> Store:
    store = Store()
    store.create("namespaces", namespace("enforced", **{"pod-security.kubernetes.io/enforce": "restricted"}))
    store.create("namespaces", namespace("warned", **{"pod-security.kubernetes.io/warn": "restricted"}))
    store.create("priorityclasses", make_priority_class())  # as a run creates it (Priority admission)
    return store


def test_a_namespace_enforcing_restricted_admits_a_compliant_probe_pod(store: Store) -> None:
    pod = make_cuda_probe_pod(name="p", namespace="enforced", run_id="r", check="c", cuda="13.0.2")
    assert store.create("pods", pod)["metadata"]["name"] == "p"


def test_a_namespace_enforcing_restricted_refuses_a_violating_pod_even_with_a_declared_exception(store: Store) -> None:
    """As on a real cluster: Pod Security admission knows nothing of gpuconf's declarations."""
    pod = make_cuda_probe_pod(name="p", namespace="enforced", run_id="r", check="c", cuda="13.0.2", registry="r.io")
    pod["spec"]["hostNetwork"] = True
    pod["metadata"]["annotations"] = exceptions_annotation({"hostNamespaces": "a reason"})
    with pytest.raises(ApiError) as info:
        store.create("pods", pod)
    assert info.value.code == 403
    assert info.value.message == ('pods "p" is forbidden: violates PodSecurity "restricted:latest": '
                                  "hostNamespaces (pod: hostNetwork is true)")


def test_a_namespace_that_only_warns_admits_a_violating_pod(store: Store) -> None:
    pod = make_cuda_probe_pod(name="p", namespace="warned", run_id="r", check="c", cuda="13.0.2")
    pod["spec"]["containers"][0]["securityContext"]["privileged"] = True
    assert store.create("pods", pod)["spec"]["containers"][0]["securityContext"]["privileged"] is True
