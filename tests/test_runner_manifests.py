"""The in-cluster runner's manifests (manifests/runner/) and image (Dockerfile): valid Kubernetes
objects by the API's own schema, a runner pod that passes the `restricted` Pod Security Standard
and needs no GPU, results on the volume, and the pieces agreeing with each other and with the code.

The schema is Kubernetes' OpenAPI, bundled offline by kubernetes-validate, in strict mode (an
unknown or misspelt field fails). The Dockerfile cannot be built here (no container engine): its
instructions are checked against the checkout instead.
"""

from __future__ import annotations

import copy
import re
import shlex
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from gpuconf.cluster import results
from gpuconf.cluster.campaign import make_priority_class
from gpuconf.rbac import Policy, load_manifests, load_policy

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "manifests" / "runner"
#: The Kubernetes version whose schema the manifests must satisfy (the suite's oldest supported
#: DRA GA release).
KUBERNETES = "1.34.0"
#: Applied on their own (kubectl apply -f), not by the Kustomization: one run, one run in shards and
#: its shards' probe namespaces, the schedule, the reader.
STANDALONE = {"job.yaml", "job-sharded.yaml", "probes-sharded.yaml", "cronjob.yaml", "results-reader.yaml"}

DOCS = load_manifests(RUNNER)


def by_kind(kind: str) -> list[dict[str, Any]]:
    return [d for d in DOCS if d["kind"] == kind]


def one(kind: str) -> dict[str, Any]:
    [doc] = by_kind(kind)
    return doc


def job(name: str) -> dict[str, Any]:
    [doc] = [d for d in by_kind("Job") if d["metadata"]["name"] == name]
    return doc


def schema_errors(doc: dict[str, Any], version: str = KUBERNETES) -> list[str]:
    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.ValidationError as e:
        return [f"{'.'.join(str(p) for p in e.path)}: {e.message}"]
    return []


def restricted_violations(spec: dict[str, Any]) -> list[str]:
    """What the `restricted` Pod Security Standard forbids in a pod spec (the parts a pod may get
    wrong: host namespaces, privilege, escalation, capabilities, non-root, seccomp, volume types)."""
    out = []
    pod_sc = spec.get("securityContext") or {}
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            out.append(f"{field} is set")
    allowed_volumes = {"configMap", "emptyDir", "persistentVolumeClaim", "projected", "secret", "downwardAPI",
                       "csi", "ephemeral", "name"}
    for volume in spec.get("volumes") or []:
        out += [f"volume {volume['name']}: {k} is not allowed" for k in volume if k not in allowed_volumes]
    pod_seccomp = (pod_sc.get("seccompProfile") or {}).get("type")
    for c in (spec.get("initContainers") or []) + spec["containers"]:
        sc = c.get("securityContext") or {}
        name = c["name"]
        if sc.get("privileged"):
            out.append(f"{name}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{name}: allowPrivilegeEscalation is not false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"{name}: capabilities do not drop ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            out.append(f"{name}: adds capabilities {caps['add']}")
        if not (sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))):
            out.append(f"{name}: runAsNonRoot is not true")
        if sc.get("runAsUser", pod_sc.get("runAsUser")) == 0:
            out.append(f"{name}: runs as user 0")
        if (sc.get("seccompProfile") or {}).get("type", pod_seccomp) not in ("RuntimeDefault", "Localhost"):
            out.append(f"{name}: seccompProfile is not RuntimeDefault or Localhost")
    return out


def runner_pods() -> list[tuple[str, dict[str, Any]]]:
    cron = one("CronJob")
    return [("job", job("gpuconf")["spec"]["template"]["spec"]),
            ("cronjob", cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]),
            ("job-sharded", job("gpuconf-sharded")["spec"]["template"]["spec"])]


RUNNER_PODS = runner_pods()
POD_IDS = [where for where, _ in RUNNER_PODS]


def runner_policy() -> Policy:
    [account] = by_kind("ServiceAccount")
    return load_policy(DOCS, account=account["metadata"]["name"], account_namespace=account["metadata"]["namespace"])


def runner_args(spec: dict[str, Any]) -> dict[str, str]:
    """The runner container's ``--option=value`` args as a mapping."""
    [container] = spec["containers"]
    return dict(str(a).removeprefix("--").split("=", 1) for a in container["args"])


# -------------------------------------------------------------------------------------------------
# Schema


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_every_manifest_is_valid_by_the_kubernetes_schema(doc: dict[str, Any]) -> None:
    assert schema_errors(doc) == []


def test_the_validator_rejects_a_misspelt_field() -> None:
    """The check above has teeth: strict mode names an unknown field and where it is."""
    job = yaml.safe_load((RUNNER / "job.yaml").read_text())
    job["spec"]["template"]["spec"]["containers"][0]["imagee"] = "x"
    assert schema_errors(job) == ["spec.template.spec.containers.0: Additional properties are not allowed "
                                  "('imagee' was unexpected)"]


def test_the_kustomization_lists_every_manifest_but_the_standalone_ones() -> None:
    kustomization = yaml.safe_load((RUNNER / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    files = {p.name for p in RUNNER.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == files - STANDALONE
    assert all((RUNNER / name).is_file() for name in listed)


def test_namespaced_objects_name_their_namespace() -> None:
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass"}
    namespaces = {d["metadata"]["name"] for d in by_kind("Namespace")}
    for doc in DOCS:
        if doc["kind"] not in cluster_scoped:
            assert doc["metadata"].get("namespace") in namespaces, f"{doc['kind']} {doc['metadata']['name']}"


# -------------------------------------------------------------------------------------------------
# The runner pod


@pytest.mark.parametrize("where, spec", RUNNER_PODS, ids=POD_IDS)
def test_the_runner_pod_passes_the_restricted_pod_security_standard(where: str, spec: dict[str, Any]) -> None:
    assert restricted_violations(spec) == []


def test_restricted_violations_names_what_is_wrong() -> None:
    spec = {"hostNetwork": True, "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
            "containers": [{"name": "c", "securityContext": {"privileged": True}}]}
    assert restricted_violations(spec) == [
        "hostNetwork is set", "volume h: hostPath is not allowed", "c: privileged",
        "c: allowPrivilegeEscalation is not false", "c: capabilities do not drop ALL", "c: runAsNonRoot is not true",
        "c: seccompProfile is not RuntimeDefault or Localhost"]


def test_the_job_and_the_cronjob_run_the_same_pod() -> None:
    pods = dict(runner_pods())
    assert pods["job"] == pods["cronjob"]


@pytest.mark.parametrize("where, spec", RUNNER_PODS, ids=POD_IDS)
def test_the_runner_needs_no_gpu_and_runs_as_the_runner_service_account(where: str, spec: dict[str, Any]) -> None:
    [sa] = by_kind("ServiceAccount")
    assert spec["serviceAccountName"] == sa["metadata"]["name"]
    [container] = spec["containers"]
    resources = container.get("resources") or {}
    asked = set(resources.get("requests") or {}) | set(resources.get("limits") or {})
    assert asked <= {"cpu", "memory", "ephemeral-storage"}
    assert "nodeSelector" not in spec and "resourceClaims" not in spec and "tolerations" not in spec


@pytest.mark.parametrize("where, spec", RUNNER_PODS, ids=POD_IDS)
def test_the_reports_go_to_the_results_volume(where: str, spec: dict[str, Any]) -> None:
    [pvc] = by_kind("PersistentVolumeClaim")
    volumes = {v["name"]: v for v in spec["volumes"]}
    [container] = spec["containers"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    report_dir = runner_args(spec)["report-dir"]
    mount = next(path for path in mounts if report_dir.startswith(path + "/") or report_dir == path)
    assert volumes[mounts[mount]]["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]
    if where == "job-sharded":  # one directory per run and one per shard in it: test_the_sharded_job_...
        return
    # One directory per run: $(POD_NAME) is expanded by the kubelet from the downward API.
    assert report_dir.endswith("/$(POD_NAME)")
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"


@pytest.mark.parametrize("where, spec", RUNNER_PODS, ids=POD_IDS)
def test_every_variable_the_args_name_is_the_container_s_own(where: str, spec: dict[str, Any]) -> None:
    """The kubelet expands $(VAR) in args from the container's env and leaves an unknown one as it is:
    a misspelt name would be a directory literally called ``$(POD_NAM)``."""
    [container] = spec["containers"]
    named = {v for a in container["args"] for v in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", str(a))}
    assert named <= {e["name"] for e in container["env"]}


@pytest.mark.parametrize("where, spec", RUNNER_PODS, ids=POD_IDS)
def test_the_runner_uses_the_shipped_kubeconfig_and_probe_namespace(where: str, spec: dict[str, Any]) -> None:
    """Its probe namespace (each shard's, for the sharded Job) exists, the runner may do there what
    role.yaml grants in gpuconf-probes, and may read it (the run checks that it exists)."""
    args = runner_args(spec)
    policy = runner_policy()
    shards = job("gpuconf-sharded")["spec"]["completions"] if where == "job-sharded" else 1
    probe_namespaces = {args["namespace"].replace("$(JOB_COMPLETION_INDEX)", str(i)) for i in range(shards)}
    assert len(probe_namespaces) == shards
    [read] = [r for r in policy.cluster_rules if r.resources == ("namespaces",)]
    for namespace in probe_namespaces:
        assert policy.namespace_rules[namespace] == policy.namespace_rules["gpuconf-probes"]
        assert namespace in {d["metadata"]["name"] for d in by_kind("Namespace")}
        assert namespace in read.resource_names
    [container] = spec["containers"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    kubeconfig = Path(args["kubeconfig"])
    volume = next(v for v in spec["volumes"] if v["name"] == mounts[str(kubeconfig.parent)])
    [configmap] = [c for c in by_kind("ConfigMap") if c["metadata"]["name"] == volume["configMap"]["name"]]
    config = yaml.safe_load(configmap["data"][kubeconfig.name])
    [user] = config["users"]
    [cluster] = config["clusters"]
    assert user["user"] == {"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}
    assert cluster["cluster"]["server"] == "https://kubernetes.default.svc"
    assert cluster["cluster"]["certificate-authority"] == "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
    assert spec.get("automountServiceAccountToken", True) is True


def test_the_runner_namespace_enforces_restricted() -> None:
    [runner] = [n for n in by_kind("Namespace") if n["metadata"]["name"] == job("gpuconf")["metadata"]["namespace"]]
    assert job("gpuconf-sharded")["metadata"]["namespace"] == runner["metadata"]["name"]
    assert runner["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_the_shipped_priority_class_is_the_one_a_run_would_create() -> None:
    shipped, made = one("PriorityClass"), make_priority_class()
    assert {k: v for k, v in shipped.items() if k != "metadata"} == {k: v for k, v in made.items() if k != "metadata"}
    assert shipped["metadata"] == made["metadata"]


# -------------------------------------------------------------------------------------------------
# One run in shards (job-sharded.yaml, issue 29)

#: What sharding may change in the runner pod: its args and env (the shard, the run, the report
#: directory, the probe namespace), its memory (a shard holds part of the nodes) and its placement (the shards share
#: the ReadWriteOnce results volume, so one node).
SHARD_ENV = {"GPUCONF_SHARDS", "GPUCONF_SHARD_RUN", "JOB_COMPLETION_INDEX"}
SHARD_ARGS = {"namespace", "shard", "shard-run", "report-dir"}


def sharded() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The sharded Job, its runner container and that container's env by name."""
    doc = job("gpuconf-sharded")
    [container] = doc["spec"]["template"]["spec"]["containers"]
    return doc, container, {e["name"]: e for e in container["env"]}


def test_the_sharded_job_runs_the_job_s_pod_but_for_what_sharding_changes() -> None:
    pods = dict(runner_pods())
    single, shard = copy.deepcopy(pods["job"]), copy.deepcopy(pods["job-sharded"])
    assert set(shard) - set(single) == {"affinity"}
    del shard["affinity"]
    [one_run], [one_shard] = single.pop("containers"), shard.pop("containers")
    assert single == shard
    for container in (one_run, one_shard):
        container["args"] = [a for a in container["args"] if a.removeprefix("--").split("=")[0] not in SHARD_ARGS]
        container["env"] = [e for e in container["env"] if e["name"] not in SHARD_ENV]
        del container["resources"]["requests"]["memory"], container["resources"]["limits"]["memory"]
    assert one_run == one_shard
    job_spec = {k: v for k, v in job("gpuconf")["spec"].items() if k not in ("template", "backoffLimit")}
    shard_spec = {k: v for k, v in job("gpuconf-sharded")["spec"].items()
                  if k not in ("template", "completionMode", "completions", "parallelism", "backoffLimitPerIndex")}
    assert job_spec == shard_spec
    assert job("gpuconf-sharded")["metadata"]["labels"] == job("gpuconf")["metadata"]["labels"]


def test_the_sharded_job_is_valid_by_the_schema_of_every_supported_kubernetes() -> None:
    """backoffLimitPerIndex and matchLabelKeys are GA from 1.33: the oldest supported DRA GA release
    (1.34) and the real-control-plane tier's (1.36) both know them."""
    for version in (KUBERNETES, "1.36.0"):
        assert schema_errors(job("gpuconf-sharded"), version) == [], version


def test_the_sharded_job_is_indexed_with_one_shard_per_index_none_retried() -> None:
    doc, container, env = sharded()
    spec = doc["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == int(env["GPUCONF_SHARDS"]["value"])
    # a failed shard is a verdict: not retried, and the other shards still run to their end
    assert spec["backoffLimitPerIndex"] == 0 and "maxFailedIndexes" not in spec and "backoffLimit" not in spec
    assert runner_args(doc["spec"]["template"]["spec"])["shard"] == "$(JOB_COMPLETION_INDEX)/$(GPUCONF_SHARDS)"


def test_each_shard_knows_its_index_and_its_run_from_the_downward_api() -> None:
    doc, _, env = sharded()
    assert env["JOB_COMPLETION_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.annotations['batch.kubernetes.io/job-completion-index']")
    assert env["GPUCONF_SHARD_RUN"]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.labels['batch.kubernetes.io/controller-uid']")
    assert runner_args(doc["spec"]["template"]["spec"])["shard-run"] == "$(GPUCONF_SHARD_RUN)"


def test_the_shards_of_one_run_write_under_one_run_directory_one_each() -> None:
    """/results/<run>/shard-<index>: the run directory names the Job's uid (the same in every shard,
    new each run) and is a run `gpuconf results fetch` accepts; the index only in the shard's."""
    doc, _, _ = sharded()
    report_dir = runner_args(doc["spec"]["template"]["spec"])["report-dir"]
    root, run, shard = report_dir.rsplit("/", 2)
    assert root == results.MOUNT_PATH
    assert "$(GPUCONF_SHARD_RUN)" in run and "$(JOB_COMPLETION_INDEX)" not in run
    assert shard == "shard-$(JOB_COMPLETION_INDEX)"
    uid = "0f5c7a9e-3b1d-4c2e-9a6f-1e2d3c4b5a69"
    assert results.validate_run_name(run.replace("$(GPUCONF_SHARD_RUN)", uid))


def test_the_shards_share_one_node_the_one_the_results_volume_is_on() -> None:
    """The results volume is ReadWriteOnce: the shards' pods must be on one node."""
    [pvc] = by_kind("PersistentVolumeClaim")
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"]
    doc, _, _ = sharded()
    affinity = doc["spec"]["template"]["spec"]["affinity"]
    [term] = affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"] == {"matchLabels": {"batch.kubernetes.io/job-name": doc["metadata"]["name"]}}
    assert term["matchLabelKeys"] == ["batch.kubernetes.io/controller-uid"]


def test_each_shard_has_a_probe_namespace_of_its_own_held_to_the_probe_namespace_s_standard() -> None:
    """probes-sharded.yaml: gpuconf-probes-0 ... N-1 for N completions, none more, each labelled as
    gpuconf-probes (namespace.yaml), each granting what role.yaml grants there (the test above)."""
    namespaces = {d["metadata"]["name"]: d["metadata"]["labels"] for d in by_kind("Namespace")}
    shards = job("gpuconf-sharded")["spec"]["completions"]
    sharded_namespaces = {name for name in namespaces if name.startswith("gpuconf-probes-")}
    assert sharded_namespaces == {f"gpuconf-probes-{i}" for i in range(shards)}
    assert all(namespaces[name] == namespaces["gpuconf-probes"] for name in sharded_namespaces)
    [read] = [r for r in runner_policy().cluster_rules if r.resources == ("namespaces",)]
    assert {n for n in read.resource_names if n.startswith("gpuconf-probes-")} == sharded_namespaces


def test_a_shard_asks_for_no_more_memory_than_the_single_run() -> None:
    def memory(where: str) -> tuple[int, int]:
        resources = dict(runner_pods())[where]["containers"][0]["resources"]
        return mebibytes(resources["requests"]["memory"]), mebibytes(resources["limits"]["memory"])

    shard_request, shard_limit = memory("job-sharded")
    run_request, run_limit = memory("job")
    assert shard_request <= shard_limit < run_limit and shard_request <= run_request


def mebibytes(quantity: str) -> int:
    number, unit = re.fullmatch(r"(\d+)(Mi|Gi)", quantity).groups()  # type: ignore[union-attr]
    return int(number) * (1024 if unit == "Gi" else 1)


# -------------------------------------------------------------------------------------------------
# `gpuconf results`: its reader pod and its Role


def reader_pod() -> dict[str, Any]:
    return results.make_reader_pod("gpuconf-results-fetch-x", mode="fetch", run="gpuconf-abcde")


def test_the_results_reader_pod_is_valid_and_passes_the_restricted_pod_security_standard() -> None:
    pod = reader_pod()
    assert schema_errors(pod) == []
    assert restricted_violations(pod["spec"]) == []
    assert pod["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_results_reader_reads_the_runner_volume_as_the_runner_with_the_runner_image() -> None:
    """Its defaults are the shipped runner's: namespace, PVC, image (nothing new to mirror) and user
    (the reports are written 0600 by the runner)."""
    [pvc] = by_kind("PersistentVolumeClaim")
    assert (results.DEFAULT_NAMESPACE, results.DEFAULT_PVC) == (pvc["metadata"]["namespace"], pvc["metadata"]["name"])
    spec = dict(runner_pods())["job"]
    [runner] = spec["containers"]
    pod = reader_pod()["spec"]
    [reader] = pod["containers"]
    assert reader["image"] == runner["image"] == results.RUNNER_IMAGE
    assert pod["securityContext"]["runAsUser"] == spec["securityContext"]["runAsUser"]
    [mount] = reader["volumeMounts"]
    [volume] = pod["volumes"]
    assert mount == {"name": volume["name"], "mountPath": results.MOUNT_PATH, "readOnly": True}
    assert volume["persistentVolumeClaim"] == {"claimName": pvc["metadata"]["name"], "readOnly": True}
    assert runner_args(spec)["report-dir"].startswith(results.MOUNT_PATH + "/")


def test_the_results_reader_role_is_in_the_runner_namespace_and_bound_to_nobody() -> None:
    [role] = [r for r in by_kind("Role") if r["metadata"]["name"] == "gpuconf-results-reader"]
    assert role["metadata"]["namespace"] == one("PersistentVolumeClaim")["metadata"]["namespace"]
    bindings = by_kind("RoleBinding") + by_kind("ClusterRoleBinding")
    assert all(b["roleRef"]["name"] != role["metadata"]["name"] for b in bindings)
    [pvc_rule] = [r for r in role["rules"] if r["resources"] == ["persistentvolumeclaims"]]
    assert pvc_rule["resourceNames"] == [results.DEFAULT_PVC]


# -------------------------------------------------------------------------------------------------
# The image


def dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            instruction, _, rest = line.partition(" ")
            out.append((instruction.upper(), rest.strip()))
    return out


def test_the_image_runs_the_suites_as_an_unprivileged_user() -> None:
    steps = dict(dockerfile())
    assert steps["FROM"] == "python:3.11-slim"
    assert yaml.safe_load(steps["ENTRYPOINT"])[:4] == ["python", "-m", "pytest", "suites/"]
    assert yaml.safe_load(steps["CMD"]) == ["--report-dir", "/results"]
    user, _, group = steps["USER"].partition(":")
    spec = dict(runner_pods())["job"]
    assert int(user) == spec["securityContext"]["runAsUser"] and int(group) == spec["securityContext"]["runAsGroup"]


def test_the_image_copies_what_exists_and_the_dockerignore_keeps() -> None:
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    copied = [src for instruction, args in dockerfile() if instruction == "COPY" for src in shlex.split(args)[:-1]]
    assert {"gpuconf/", "suites/", "probes/", "manifests/", "pyproject.toml", "conftest.py"} <= set(copied)
    for src in copied:
        assert (ROOT / src).exists(), src
        assert src.rstrip("/") not in ignored, f"{src} is copied but .dockerignore drops it"
