"""Probe pods and source ConfigMaps, as objects (no cluster): safe, schedulable, honest."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from gpuconf import images
from gpuconf import render as render_module
from gpuconf.paths import project_root
from gpuconf.probe_pods import make_cuda_probe_pod, make_probe_sources_configmap, sources_configmap_name
from gpuconf.probes.cuda import parse_cuda_probe
from gpuconf.render import RenderError, probe_sources, render

RESTRICTED = {"runAsNonRoot": True, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
              "seccompProfile": {"type": "RuntimeDefault"}}


def pod(**kw):
    base = {"name": "cp-node-a", "namespace": "gpuconf-run1", "run_id": "run1", "check": "smoke", "cuda": "13.0.2"}
    return make_cuda_probe_pod(**{**base, **kw})


def test_zero_registry_is_the_default_and_compiles_in_an_init_container_without_a_gpu():
    p = pod(node="node-a")
    (init,) = p["spec"]["initContainers"]
    assert init["image"] == images.devel_image("13.0.2") == p["spec"]["containers"][0]["image"]
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in init["env"]
    assert "resources" not in init
    assert init["command"][-1] == p["spec"]["containers"][0]["command"][0] == "/gpuconf/bin/cuda-probe"
    assert p["spec"]["volumes"][0]["configMap"]["name"] == sources_configmap_name("cuda-probe")


def test_registry_mode_runs_the_prebuilt_image():
    p = pod(registry="registry.example.com/ai")
    assert "initContainers" not in p["spec"]
    assert p["spec"]["containers"][0]["image"] == "registry.example.com/ai/gpuconf/cuda-probe:0.1.0-cuda13.0.2"


def test_a_cuda_version_outside_the_matrix_has_no_prebuilt_image():
    with pytest.raises(ValueError, match="no cuda-probe image for CUDA 11.0"):
        pod(cuda="11.0", registry="r.io")


def test_probe_pods_are_restricted_never_preempt_and_go_through_the_scheduler():
    p = pod(node="node-a", gpu_count=8)
    spec = p["spec"]
    for c in spec["containers"] + spec["initContainers"]:
        assert RESTRICTED.items() <= c["securityContext"].items()
    assert spec["priorityClassName"] == "gpuconf-probe"
    assert "nodeName" not in spec and spec["nodeSelector"] == {"kubernetes.io/hostname": "node-a"}
    assert spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8"}  # quantities are strings
    assert spec["automountServiceAccountToken"] is False
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    assert p["metadata"]["labels"]["gpuconf.io/run-id"] == "run1"


def test_env_and_mig_resources_pass_through_and_names_cannot_break_the_yaml():
    p = pod(env={"NVIDIA_DISABLE_REQUIRE": "1"}, gpu_resource="nvidia.com/mig-1g.10gb", check='x": y\n- z')
    assert p["spec"]["containers"][0]["env"] == [{"name": "NVIDIA_DISABLE_REQUIRE", "value": "1"}]
    assert p["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": "1"}
    assert p["metadata"]["labels"]["gpuconf.io/check"] == 'x": y\n- z'


def test_a_pod_asking_for_no_gpu_has_no_gpu_limits_at_all():
    (probe,) = pod(gpu_count=0, node="node-a")["spec"]["containers"]
    assert "resources" not in probe
    assert probe["securityContext"].items() >= RESTRICTED.items()


def test_a_sidecar_runs_the_same_probe_with_its_own_name_and_its_own_gpus():
    p = pod(gpu_count=1, sidecar_gpu_count=0, env={"NVIDIA_VISIBLE_DEVICES": "all"})
    probe, sidecar = p["spec"]["containers"]
    assert (probe["name"], sidecar["name"]) == ("probe", "sidecar")
    assert probe["resources"]["limits"] == {"nvidia.com/gpu": "1"} and "resources" not in sidecar
    assert probe["command"] == sidecar["command"] and probe["volumeMounts"] == sidecar["volumeMounts"]
    assert sidecar["env"] == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    assert RESTRICTED.items() <= sidecar["securityContext"].items()
    (init,) = p["spec"]["initContainers"]  # one compile serves both
    assert "resources" not in init
    both = pod(gpu_count=2, sidecar_gpu_count=3, registry="r.io")["spec"]["containers"]
    assert [c["resources"]["limits"]["nvidia.com/gpu"] for c in both] == ["2", "3"]
    assert both[0]["image"] == both[1]["image"] and both[1]["args"] == ["--timeout", "60"]


def test_a_negative_gpu_count_is_an_error():
    with pytest.raises(ValueError, match="cannot be negative"):
        pod(sidecar_gpu_count=-1)


def test_the_sources_configmap_carries_the_probe_and_its_build_script():
    cm = make_probe_sources_configmap("cuda-probe", namespace="ns", run_id="run1")
    assert {"probe.cu", "build.sh", "json.h"} <= set(cm["data"])  # json.h from probes/common, flat
    assert cm["metadata"]["name"] == sources_configmap_name("cuda-probe")
    assert sum(len(v) for v in cm["data"].values()) < 900 * 1024  # ConfigMaps hold at most 1 MiB


@pytest.mark.parametrize("probe", ["cuda-probe", "nccl-probe"])
def test_probe_sources_ship_the_shared_files_flat_next_to_the_probes_own(probe):
    files = probe_sources(probe)
    common = project_root() / "probes" / "common"
    assert files["json.h"] == (common / "json.h").read_text(encoding="utf-8")
    assert all("/" not in name for name in files)
    assert not (project_root() / "probes" / probe / "json.h").exists()


@pytest.fixture
def probe_tree(tmp_path, monkeypatch):
    """A probe ``p`` (build.sh only) and the shared directory (empty), where probe_sources looks."""
    probe, common = tmp_path / "p", tmp_path / "common"
    for d in (probe, common):
        d.mkdir()
    (probe / "build.sh").write_text("nvcc probe.cu\n")
    monkeypatch.setattr(render_module, "probe_dir", lambda name: probe)
    monkeypatch.setattr(render_module, "common_probe_dir", lambda: common)
    return probe, common


def test_a_probe_file_named_like_a_shared_file_is_an_error(probe_tree):
    for d in probe_tree:
        (d / "json.h").write_text("// one of two\n")
    with pytest.raises(ValueError, match="both have json.h"):
        probe_sources("p")


def test_the_sources_configmap_name_follows_every_edit_of_the_sources(probe_tree):
    probe, common = probe_tree
    (common / "json.h").write_text("// v1\n")
    first = sources_configmap_name("p")
    assert sources_configmap_name("p") == first
    (common / "json.h").write_text("// v2\n")  # same size: the modification time tells
    os.utime(common / "json.h", ns=(1, 1))
    second = sources_configmap_name("p")
    (probe / "probe.cu").write_text("int main() {}\n")
    third = sources_configmap_name("p")
    assert len({first, second, third}) == 3


def test_a_missing_value_or_a_bad_mode_is_a_render_error():
    with pytest.raises(RenderError, match="undefined"):
        render("cuda-probe-pod.yaml.j2", {"name": "x"})
    values = {"name": "n", "namespace": "ns", "run_id": "r", "check": "c", "mode": "magic", "image": "i",
              "sources_configmap": "", "node": None, "gpu_resource": "nvidia.com/gpu",
              "containers": [{"name": "probe", "gpu_count": 1}], "env": [],
              "tolerations": [], "runtime_class": None, "priority_class": "p", "call_timeout_s": 1,
              "deadline_s": 1, "cuda_archs": None, "probe": "cuda-probe", "args": [], "extra_labels": {},
              "annotations": {}, "hostname": None, "subdomain": None}
    with pytest.raises(RenderError, match="mode must be registry or zero-registry"):
        render("cuda-probe-pod.yaml.j2", values)


def test_the_compile_can_be_narrowed_to_the_nodes_architecture():
    (init,) = pod(cuda_archs="90")["spec"]["initContainers"]
    assert {"name": "CUDA_ARCHS", "value": "90"} in init["env"]
    (init,) = pod()["spec"]["initContainers"]
    assert all(e["name"] != "CUDA_ARCHS" for e in init["env"])


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_the_configmap_alone_is_enough_to_compile_and_run_the_probe_as_the_pod_does(tmp_path):
    """What the zero-registry pod does, here: sources from a read-only ConfigMap volume, the
    init container's command, then the probe from the shared emptyDir."""
    cm = make_probe_sources_configmap("cuda-probe", namespace="ns", run_id="run1")
    src, bin_dir = tmp_path / "src", tmp_path / "bin"
    src.mkdir()
    bin_dir.mkdir()
    for name, text in cm["data"].items():
        (src / name).write_text(text)
        (src / name).chmod(0o444)
    src.chmod(0o555)
    (init,) = pod(cuda_archs="75")["spec"]["initContainers"]
    command = [c.replace("/gpuconf/src", str(src)).replace("/gpuconf/bin", str(bin_dir)) for c in init["command"]]
    env = {**os.environ, **{e["name"]: e["value"] for e in init["env"]}}
    build = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(bin_dir / "cuda-probe"), "--timeout", "5"], capture_output=True, text=True, timeout=30)
    report = parse_cuda_probe(run.stdout, exit_code=run.returncode)
    assert report.init.code == 35  # this machine has no driver: the honest no-driver answer


def test_an_nccl_probe_pod_compiles_the_nccl_probe_and_runs_one_rank_of_a_job():
    from gpuconf.probe_pods import make_nccl_probe_pod

    pod = make_nccl_probe_pod(name="nccl-a", namespace="ns", run_id="r", check="nccl", node="h100-0", gpu_count=8,
                              rank=1, world_size=2, id_addr="nccl-a-0.ns:29500")
    (build,) = pod["spec"]["initContainers"]
    (probe,) = pod["spec"]["containers"]
    assert pod["metadata"]["labels"]["gpuconf.io/probe"] == "nccl-probe"
    assert build["command"] == ["bash", "/gpuconf/src/build.sh", "/gpuconf/bin/nccl-probe"]
    assert probe["command"] == ["/gpuconf/bin/nccl-probe", "--timeout", "300", "--rank", "1", "--world-size", "2",
                                "--id-addr", "nccl-a-0.ns:29500", "--bootstrap-timeout", "120"]
    assert probe["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    assert {"name": "NCCL_DEBUG", "value": "INFO"} in probe["env"]
    assert pod["spec"]["volumes"][0]["configMap"]["name"].startswith("gpuconf-nccl-probe-src-")
    with pytest.raises(ValueError, match="go together"):
        make_nccl_probe_pod(name="x", namespace="ns", run_id="r", check="nccl", node=None, gpu_count=1, rank=0)


def test_an_nccl_probe_pod_on_a_dra_only_node_gets_its_gpus_through_a_claim():
    from gpuconf.probe_pods import make_nccl_probe_pod

    pod = make_nccl_probe_pod(name="nccl-h200-0", namespace="ns", run_id="r", check="nccl", node="h200-0",
                              gpu_count=0, resource_claims={"gpus": "gpuconf-gpus-1"})
    (probe,) = pod["spec"]["containers"]
    assert pod["spec"]["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": "gpuconf-gpus-1"}]
    assert probe["resources"].get("claims") == [{"name": "gpus"}] and "limits" not in probe["resources"]
    assert pod["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "h200-0"}  # placed by the scheduler
    extended = make_nccl_probe_pod(name="nccl-x", namespace="ns", run_id="r", check="nccl", node="x", gpu_count=8,
                                   gpu_resource="example.com/gpu")
    assert extended["spec"]["containers"][0]["resources"]["limits"] == {"example.com/gpu": "8"}
    with pytest.raises(ValueError, match="at least one GPU"):
        make_nccl_probe_pod(name="x", namespace="ns", run_id="r", check="nccl", node="x", gpu_count=0)


def test_an_nccl_job_has_a_headless_service_naming_rank_0_and_rank_pods_under_it():
    from gpuconf.cluster import campaign
    from gpuconf.probe_pods import (
        NCCL_JOB_LABEL,
        SCHEDULE_BUDGET_ANNOTATION,
        make_cuda_probe_pod,
        make_nccl_job_service,
        make_nccl_probe_pod,
        nccl_rank0_address,
    )

    service = make_nccl_job_service(name="nccl-p1-0", namespace="ns", run_id="r", check="nccl", job="nccl-p1-0")
    assert service["kind"] == "Service" and service["metadata"]["name"] == "nccl-p1-0"
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == {"gpuconf.io/run-id": "r", NCCL_JOB_LABEL: "nccl-p1-0"}
    assert service["spec"]["ports"][0]["port"] == 29500
    address = nccl_rank0_address(job="nccl-p1-0", service="nccl-p1-0", namespace="ns")
    assert address == "nccl-p1-0-r0.nccl-p1-0.ns.svc:29500"
    pod = make_nccl_probe_pod(name="nccl-p1-0-r1", namespace="ns", run_id="r", check="nccl", node="h100-1",
                              gpu_count=8, rank=1, world_size=2, id_addr=address, hostname="nccl-p1-0-r1",
                              subdomain="nccl-p1-0", labels={NCCL_JOB_LABEL: "nccl-p1-0"}, schedule_budget_s=300,
                              bootstrap_timeout_s=300)
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("nccl-p1-0-r1", "nccl-p1-0")
    assert pod["metadata"]["labels"][NCCL_JOB_LABEL] == "nccl-p1-0"
    assert pod["metadata"]["labels"]["gpuconf.io/probe"] == "nccl-probe"
    # the campaign reads the same annotation: a rank that cannot be placed is reported after 300 s
    assert SCHEDULE_BUDGET_ANNOTATION == campaign.SCHEDULE_BUDGET_ANNOTATION
    assert pod["metadata"]["annotations"] == {SCHEDULE_BUDGET_ANNOTATION: "300"}
    assert pod["spec"]["containers"][0]["command"][-6:] == ["--world-size", "2", "--id-addr", address,
                                                            "--bootstrap-timeout", "300"]
    plain = make_cuda_probe_pod(name="p", namespace="ns", run_id="r", check="smoke", cuda="13.0.2")
    assert "hostname" not in plain["spec"] and "subdomain" not in plain["spec"]
    assert "annotations" not in plain["metadata"]


def test_nccl_ranks_submitted_to_kueue_form_one_pod_group():
    from gpuconf.probe_pods import make_nccl_probe_pod

    pods = [make_nccl_probe_pod(name=f"pair-r{r}", namespace="ns", run_id="r", check="nccl", node=f"n{r}",
                                gpu_count=8, rank=r, world_size=2, id_addr="pair-r0.pair.ns.svc:29500",
                                kueue_queue="gpu-acceptance", gang="pair") for r in (0, 1)]
    for pod in pods:
        assert pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-acceptance"
        assert pod["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] == "pair"
        assert pod["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] == "2"
    plain = make_nccl_probe_pod(name="solo", namespace="ns", run_id="r", check="nccl", node="n0", gpu_count=8)
    assert not any(k.startswith("kueue.x-k8s.io/") for k in {**plain["metadata"]["labels"],
                                                            **plain["metadata"].get("annotations", {})})
    with pytest.raises(ValueError, match="pod group needs"):
        make_nccl_probe_pod(name="x", namespace="ns", run_id="r", check="nccl", node=None, gpu_count=1,
                            kueue_queue="q")
