"""The whole simulated cluster end to end, and the `gpuconf sim` commands."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes import client, watch

from gpuconf.cli import main
from gpuconf.cluster.campaign import make_priority_class
from gpuconf.probe_pods import make_cuda_probe_pod
from gpuconf.probes.cuda import parse_cuda_probe
from gpuconf.sim.cluster import SimulatedCluster
from gpuconf.sim.server import FakeApiServer


def wait_finished(api: client.CoreV1Api, namespace: str, names: set[str], timeout: int = 30) -> None:
    done: set[str] = set()
    w = watch.Watch()
    for event in w.stream(api.list_namespaced_pod, namespace, timeout_seconds=timeout):
        pod = event["object"]
        if pod.status.phase in ("Succeeded", "Failed"):
            done.add(pod.metadata.name)
        if done >= names:
            w.stop()
            return
    raise AssertionError(f"pods not finished within {timeout} s: {sorted(names - done)}")


def test_probe_pods_are_scheduled_run_and_answer_as_the_compatibility_rules_say():
    with SimulatedCluster("mixed-driver-570") as sim:
        api = client.CoreV1Api(sim.api_client())
        api.create_namespace({"metadata": {"name": "run1"}})
        client.SchedulingV1Api(api.api_client).create_priority_class(make_priority_class())  # as a run does
        cases = {"native": ("h100-580-0", "13.0.2"), "compat": ("a100-570-0", "13.0.2")}
        for name, (node, cuda) in cases.items():
            api.create_namespaced_pod("run1", make_cuda_probe_pod(
                name=name, namespace="run1", run_id="run1", check="smoke", cuda=cuda, node=node, gpu_count=2,
                runtime_class="nvidia"))
        wait_finished(api, "run1", set(cases))
        native = parse_cuda_probe(api.read_namespaced_pod_log("native", "run1", container="probe"), exit_code=0)
        compat = parse_cuda_probe(api.read_namespaced_pod_log("compat", "run1", container="probe"), exit_code=0)
        assert (native.driver_cuda, native.libcuda_compat, len(native.devices)) == ("13.0", False, 2)
        assert (compat.driver_cuda, compat.libcuda_compat) == ("13.0", True)
        gpus = {g.uuid for g in sim.cluster.node("h100-580-0").gpus}
        assert {d.uuid for d in native.devices} <= gpus
        events = api.list_namespaced_event("run1", field_selector="involvedObject.name=native").items
        reasons = [e.reason for e in sorted(events, key=lambda e: int(e.metadata.resource_version))]
        assert reasons[0] == "Scheduled" and "Started" in reasons


def test_sim_serve_writes_a_kubeconfig_serves_until_interrupted_and_exits_0(tmp_path: Path):
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen([sys.executable, "-m", "gpuconf.cli", "sim", "serve", "--profile", "t4-timeslicing",
                             "--kubeconfig-out", str(kubeconfig)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        banner = [proc.stdout.readline() for _ in range(2)]
        assert banner[0].startswith("simulated cluster t4-timeslicing: 2 nodes, 8 GPUs"), banner
        from kubernetes import config as kconfig

        api = client.CoreV1Api(kconfig.new_client_from_config(config_file=str(kubeconfig)))
        allocatable = {n.metadata.name: n.status.allocatable["nvidia.com/gpu"] for n in api.list_node().items}
        assert allocatable == {"t4-0": "16", "t4-1": "16"}
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


def test_sim_agents_register_nodes_on_another_api_server(tmp_path: Path):
    with FakeApiServer() as server:
        kubeconfig = tmp_path / "kubeconfig"
        server.write_kubeconfig(kubeconfig)
        proc = subprocess.Popen([sys.executable, "-m", "gpuconf.cli", "sim", "agents", "--kubeconfig", str(kubeconfig),
                                 "--profile", "h200-dra-only"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        try:
            assert proc.stdout is not None
            assert "node agents for 2 nodes of h200-dra-only running" in proc.stdout.readline()
            assert {n["metadata"]["name"] for n in server.store.list("nodes").items} == {"h200-0", "h200-1"}
            assert len(server.store.list("resourceslices").items) == 2
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)
        assert proc.returncode == 0


@pytest.mark.parametrize("argv,fragment", [
    (["sim", "serve", "--profile", "nope", "--kubeconfig-out", "/tmp/kc"], "unknown simulated cluster profile 'nope'"),
    (["sim", "serve", "--profile", "healthy-h100", "--kubeconfig-out", "/nonexistent/dir/kc"], "no such directory"),
    (["sim", "serve", "--profile", "healthy-h100", "--port", "70000", "--kubeconfig-out", "/tmp/kc"], "--port"),
    (["sim", "agents", "--kubeconfig", "/nonexistent", "--profile", "healthy-h100"], "no such file"),
    (["sim", "agents", "--kubeconfig", __file__, "--profile", "healthy-h100"], "not a usable kubeconfig"),
    (["sim"], "required"),
])
def test_bad_sim_input_is_one_line_and_exit_2(argv, fragment):
    out, err = io.StringIO(), io.StringIO()
    handlers = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    assert main(argv, stdout=out, stderr=err) == 2
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers  # left as found
    assert fragment in err.getvalue() and err.getvalue().count("\n") == 1


def test_profiles_and_faults_are_listed():
    out = io.StringIO()
    assert main(["sim", "profiles"], stdout=out, stderr=io.StringIO()) == 0
    assert "healthy-h100" in out.getvalue() and "scale-1000" in out.getvalue()
    out = io.StringIO()
    assert main(["sim", "faults"], stdout=out, stderr=io.StringIO()) == 0
    assert "gpu-lost" in out.getvalue() and "caught by" in out.getvalue()
    listed = out.getvalue()
    assert "    kernel_driver: driver-version, default 580.82.07: the version of the loaded kernel module" in listed
    assert "    layout: mig-layout, default null: " in out.getvalue()


def test_each_faults_listed_example_is_a_fault_its_example_profile_accepts():
    from gpuconf.sim.profile import expand, fault_catalog, load_profile, with_faults

    out = io.StringIO()
    main(["sim", "faults"], stdout=out, stderr=io.StringIO())
    examples = [line.split("in a profile: ", 1)[1] for line in out.getvalue().splitlines() if "in a profile: " in line]
    catalog = fault_catalog()
    assert len(examples) == len(catalog)
    for fault, example in zip(catalog.values(), examples, strict=True):
        profile = load_profile(fault.example_profile)
        faults = yaml.safe_load(example.replace("POOL", profile.pools[0].name))["faults"]
        assert faults[0]["id"] == fault.id
        expand(with_faults(profile, faults))  # raises on an unknown parameter or a bad value


@pytest.mark.parametrize("profile", ["healthy-h100", "a100-mig-mixed", "t4-timeslicing", "h200-dra-only",
                                     "mixed-driver-570", "multi-pool"])
def test_every_shipped_profile_starts_and_publishes_its_nodes(profile):
    with SimulatedCluster(profile) as sim:
        api = client.CoreV1Api(sim.api_client())
        nodes = api.list_node().items
        assert {n.metadata.name for n in nodes} == {n.name for n in sim.cluster.nodes}
        assert all(c.status == "True" for n in nodes for c in n.status.conditions if c.type == "Ready")


def test_the_1000_node_profile_starts_and_answers():
    """Its timings are measured by benchmarks/sim_scale.py, not asserted here."""
    with SimulatedCluster("scale-1000") as sim:
        api = client.CoreV1Api(sim.api_client())
        node = api.read_node("h100-999")
        assert node.status.allocatable["nvidia.com/gpu"] == "8"
        assert len(api.list_node(_preload_content=False).data) > 1000 * 1000  # every node, over HTTP


def test_an_api_server_fetches_logs_from_separately_run_agents_over_https(tmp_path: Path):
    """gpuconf sim agents in another process, as against a real control plane: the API server
    finds the pod's kubelet by the node's InternalIP and kubeletEndpoint port and reads the logs
    over HTTPS, as kube-apiserver does."""
    from gpuconf.sim.controllers import ControlPlane

    with FakeApiServer() as server, ControlPlane(server.store):
        kubeconfig = tmp_path / "kubeconfig"
        server.write_kubeconfig(kubeconfig)
        proc = subprocess.Popen([sys.executable, "-m", "gpuconf.cli", "sim", "agents", "--kubeconfig", str(kubeconfig),
                                 "--profile", "healthy-h100"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        try:
            assert proc.stdout is not None and "running" in proc.stdout.readline()
            api = client.CoreV1Api(client.ApiClient(client.Configuration(host=server.url)))
            api.create_namespace({"metadata": {"name": "run2"}})
            client.SchedulingV1Api(api.api_client).create_priority_class(make_priority_class())  # as a run does
            api.create_namespaced_pod("run2", make_cuda_probe_pod(
                name="p", namespace="run2", run_id="run2", check="smoke", cuda="13.0.2", node="h100-1",
                runtime_class="nvidia"))
            wait_finished(api, "run2", {"p"})
            report = parse_cuda_probe(api.read_namespaced_pod_log("p", "run2", container="probe"), exit_code=0)
            assert report.devices and report.driver_cuda == "13.0"
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)


def test_sim_agents_rejects_an_address_that_is_not_an_ip():
    out, err = io.StringIO(), io.StringIO()
    assert main(["sim", "agents", "--kubeconfig", __file__, "--profile", "healthy-h100", "--address", "node.local"],
                stdout=out, stderr=err) == 2
    assert "--address: not an IP address" in err.getvalue()
