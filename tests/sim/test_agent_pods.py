"""Node agents, the pod side: a kubelet with the NVIDIA device plugin and container toolkit running
pods bound to simulated nodes, seen only through the Kubernetes API (status, events, logs)."""

from __future__ import annotations

import logging
import re
import ssl
import threading
import urllib.error
import urllib.request

import pytest
from kubernetes import client

from gpuconf.probes.cuda import parse_cuda_probe
from gpuconf.probes.nccl import parse_nccl_probe
from gpuconf.sim import FakeApiServer

from .conftest import client_for
from .test_agent_support import (
    finished,
    plain_pod,
    pod_events,
    probe_pod,
    running_agents,
    wait_for,
    wait_gone,
    wait_pod,
)

IMAGE = "nvidia/cuda:13.0.2-devel-ubuntu24.04"
BASE = "nvidia/cuda:13.0.2-base-ubuntu24.04"


def probe_report(core, namespace, name, exit_code):
    return parse_cuda_probe(core.read_namespaced_pod_log(name, namespace, container="probe"), exit_code=exit_code)


def terminated(pod, container="probe"):
    status = next(s for s in pod.status.container_statuses if s.name == container)
    return status.state.terminated


def test_a_cuda_probe_bound_by_hand_runs_on_exactly_its_allocated_gpus(apiserver, api_client, core, namespace):
    with running_agents(apiserver, api_client, "healthy-h100") as agents:
        core.create_namespaced_pod(namespace, probe_pod("probe-a", namespace, "h100-0", gpus=2))
        pod = wait_pod(core, namespace, "probe-a", finished)
        assert pod.status.phase == "Succeeded"
        (build,) = pod.status.init_container_statuses
        assert (build.state.terminated.reason, build.state.terminated.exit_code) == ("Completed", 0)
        done = terminated(pod)
        assert (done.reason, done.exit_code) == ("Completed", 0)
        assert done.container_id.startswith("containerd://") and pod.status.pod_ip.startswith("127.")
        report = probe_report(core, namespace, "probe-a", done.exit_code)
        run = agents.pod_run(namespace, "probe-a")
        allocated = [d.gpu.uuid for d in run.allocations["probe"]]
        assert report.exit_code == 0 and len(allocated) == 2
        assert [d.uuid for d in report.devices] == allocated
        assert core.read_namespaced_pod_log("probe-a", namespace, container="build") == "/gpuconf/bin/cuda-probe\n"
        conditions = {c.type: (c.status, c.reason) for c in pod.status.conditions}
        assert conditions["Ready"] == ("False", "PodCompleted") and conditions["PodScheduled"][0] == "True"


def test_the_kubelet_events_come_in_order_with_the_kubelets_words(apiserver, api_client, core, namespace):
    with running_agents(apiserver, api_client, "healthy-h100"):
        core.create_namespaced_pod(namespace, probe_pod("probe-b", namespace, "h100-1"))
        wait_pod(core, namespace, "probe-b", finished)
        events = pod_events(core, namespace, "probe-b")
    build, probe = "spec.initContainers{build}", "spec.containers{probe}"
    assert [(t, r, f) for t, r, f, _ in events] == [
        ("Normal", "Pulling", build), ("Normal", "Pulled", build), ("Normal", "Created", build),
        ("Normal", "Started", build), ("Normal", "Pulled", probe), ("Normal", "Created", probe),
        ("Normal", "Started", probe)]
    messages = [m for *_, m in events]
    assert messages[0] == f'Pulling image "{IMAGE}"'
    assert re.fullmatch(rf'Successfully pulled image "{re.escape(IMAGE)}" in (\d+ms|0s) \((\d+ms|0s) including '
                        r'waiting\)\. Image size: \d+ bytes\.', messages[1]), messages[1]
    assert messages[2:4] == ["Created container: build", "Started container build"]
    assert messages[4:] == [f'Container image "{IMAGE}" already present on machine', "Created container: probe",
                            "Started container probe"]
    source = core.list_namespaced_event(namespace).items[0].source
    assert (source.component, source.host) == ("kubelet", "h100-1")


def test_logs_are_served_on_the_kubelet_style_endpoint_too(apiserver, api_client, core, namespace):
    with running_agents(apiserver, api_client, "healthy-h100") as agents:
        core.create_namespaced_pod(namespace, plain_pod("talk", "h100-0", annotations={
            "gpuconf.io/sim-logs": "one\ntwo\nthree\n"}))
        wait_pod(core, namespace, "talk", finished)
        # HTTPS, with the kubelet-style self-signed certificate (verified here against itself).
        tls = ssl.create_default_context(cadata=agents.log_certificate.decode())
        assert agents.log_url.startswith("https://")
        with urllib.request.urlopen(f"{agents.log_url}/containerLogs/{namespace}/talk/main?tailLines=2",
                                    context=tls) as resp:
            assert resp.read() == b"two\nthree\n"
        try:
            urllib.request.urlopen(f"{agents.log_url}/containerLogs/{namespace}/nope/main", context=tls)
            raise AssertionError("an unknown pod must be a 404")
        except urllib.error.HTTPError as e:
            assert e.code == 404


def test_a_legacy_mode_node_rejects_an_unsatisfiable_require_at_container_start(apiserver, api_client, core,
                                                                                 namespace):
    with running_agents(apiserver, api_client, "healthy-h100"):
        pod = probe_pod("canary", namespace, "h100-0", env={"NVIDIA_REQUIRE_CUDA": "cuda>=99.0"})
        core.create_namespaced_pod(namespace, pod)
        pod = wait_pod(core, namespace, "canary", finished)
        events = pod_events(core, namespace, "canary")
    assert pod.status.phase == "Failed"
    state = terminated(pod)
    assert (state.reason, state.exit_code) == ("StartError", 128)
    expected = ("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=99.0, please update your "
                "driver to a newer version, or use an earlier cuda container")
    assert expected in state.message
    (failed,) = [e for e in events if e[1] == "Failed"]
    assert failed[0] == "Warning" and failed[3].startswith("Error: failed to create containerd task: ")
    assert expected in failed[3]
    assert [e[1] for e in events if e[2] == "spec.containers{probe}"] == ["Pulled", "Created", "Failed"]


def test_a_jit_cdi_node_ignores_the_require_and_starts_the_canary(apiserver, api_client, core, namespace):
    with running_agents(apiserver, api_client, "t4-timeslicing"):
        core.create_namespaced_pod(namespace, probe_pod("canary", namespace, "t4-0", runtime_class=None,
                                                        env={"NVIDIA_REQUIRE_CUDA": "cuda>=99.0"}))
        pod = wait_pod(core, namespace, "canary", finished)
        assert pod.status.phase == "Succeeded"
        assert len(probe_report(core, namespace, "canary", 0).devices) == 1


def test_visible_devices_all_shows_every_gpu_to_a_one_gpu_pod(apiserver, api_client, core, namespace):
    faults = [{"id": "visible-devices-all", "pool": "h100", "node": 0}]
    with running_agents(apiserver, api_client, "healthy-h100", faults=faults):
        for node in ("h100-0", "h100-1"):
            core.create_namespaced_pod(namespace, probe_pod(f"iso-{node}", namespace, node, gpus=1))
        seen = {}
        for node in ("h100-0", "h100-1"):
            pod = wait_pod(core, namespace, f"iso-{node}", finished)
            seen[node] = len(probe_report(core, namespace, f"iso-{node}", terminated(pod).exit_code).devices)
    assert seen == {"h100-0": 8, "h100-1": 1}


def leak_pod(name: str, node: str) -> dict:
    """Requests no GPU, runs with the nvidia runtime and asks for all GPUs through the env."""
    return {"metadata": {"name": name, "labels": {"gpuconf.io/probe": "cuda-probe"}},
            "spec": {"nodeName": node, "restartPolicy": "Never", "runtimeClassName": "nvidia",
                     "containers": [{"name": "probe", "image": BASE,
                                     "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]}}


def test_envvar_leak_gives_every_gpu_to_a_pod_that_requested_none(apiserver, api_client, core, namespace):
    faults = [{"id": "envvar-leak", "pool": "h100", "node": 0}]
    with running_agents(apiserver, api_client, "healthy-h100", faults=faults):
        for node in ("h100-0", "h100-1"):
            core.create_namespaced_pod(namespace, leak_pod(f"leak-{node}", node))
        reports = {}
        for node in ("h100-0", "h100-1"):
            pod = wait_pod(core, namespace, f"leak-{node}", finished)
            reports[node] = probe_report(core, namespace, f"leak-{node}", terminated(pod).exit_code)
    assert (reports["h100-0"].exit_code, len(reports["h100-0"].devices)) == (0, 8)
    assert (reports["h100-1"].exit_code, len(reports["h100-1"].devices)) == (3, 0)  # no driver injected at all


def test_without_the_nvidia_runtime_an_allocated_gpu_is_never_injected(apiserver, api_client, core, namespace):
    runc_default = [{"id": "runtime-not-default", "pool": "h100", "node": 0}]  # containerd's own default: runc
    with running_agents(apiserver, api_client, "healthy-h100", faults=runc_default) as agents:
        core.create_namespaced_pod(namespace, probe_pod("bare", namespace, "h100-0", runtime_class=None))
        pod = wait_pod(core, namespace, "bare", finished)
        report = probe_report(core, namespace, "bare", terminated(pod).exit_code)
        (device,) = agents.pod_run(namespace, "bare").allocations["probe"]
    assert report.exit_code == 3 and report.devices == ()
    assert report.env["NVIDIA_VISIBLE_DEVICES"] == device.gpu.uuid  # allocated, but not injected


def test_a_runtime_class_deleted_after_admission_fails_the_sandbox_like_a_kubelet(apiserver, api_client, core,
                                                                                  namespace):
    # Admission refuses a pod naming a missing RuntimeClass; one deleted after the pod was admitted
    # reaches the kubelet, which cannot create the sandbox.
    node_api = client.NodeV1Api(api_client)
    node_api.create_runtime_class({"metadata": {"name": "nvidia"}, "handler": "nvidia"})
    core.create_namespaced_pod(namespace, probe_pod("stuck", namespace, "h100-0"))
    node_api.delete_runtime_class("nvidia")
    faults = [{"id": "no-runtimeclass"}]
    with running_agents(apiserver, api_client, "healthy-h100", faults=faults):
        event = wait_for(core.list_namespaced_event, lambda e: e.reason == "FailedCreatePodSandBox", namespace)
        assert (event.type, event.message) == (
            "Warning", 'Failed to create pod sandbox: runtimeclass.node.k8s.io "nvidia" not found')
        pod = wait_pod(core, namespace, "stuck", lambda p: bool(p.status.init_container_statuses))
        assert pod.status.phase == "Pending"
        assert pod.status.init_container_statuses[0].state.waiting.reason == "ContainerCreating"


def test_admission_rejects_more_gpus_than_the_node_has_free(apiserver, api_client, core, namespace):
    with running_agents(apiserver, api_client, "healthy-h100"):
        core.create_namespaced_pod(namespace, plain_pod("hog", "h100-0", restart="Always",
                                                        limits={"nvidia.com/gpu": "8"}))
        wait_pod(core, namespace, "hog", lambda p: p.status.phase == "Running")
        core.create_namespaced_pod(namespace, plain_pod("late", "h100-0", limits={"nvidia.com/gpu": "1"}))
        pod = wait_pod(core, namespace, "late", finished)
        events = pod_events(core, namespace, "late")
    message = ("Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 1, "
               "Available: 0, which is unexpected")
    assert (pod.status.phase, pod.status.reason, pod.status.message) == (
        "Failed", "UnexpectedAdmissionError", f"Pod was rejected: {message}")
    assert events == [("Warning", "UnexpectedAdmissionError", None, message)]


def test_deletion_stops_the_pod_and_the_agent_confirms_it(apiserver, api_client, core, namespace):
    with running_agents(apiserver, api_client, "healthy-h100"):
        core.create_namespaced_pod(namespace, plain_pod("server", "h100-0", restart="Always",
                                                        limits={"nvidia.com/gpu": "8"}))
        wait_pod(core, namespace, "server", lambda p: p.status.phase == "Running")
        deleting = core.delete_namespaced_pod("server", namespace)
        assert deleting.metadata.deletion_timestamp is not None  # the server waits for the kubelet
        wait_gone(core, namespace, "server")
        assert ("Normal", "Killing", "spec.containers{main}", "Stopping container main") in \
            pod_events(core, namespace, "server")
        core.create_namespaced_pod(namespace, plain_pod("next", "h100-0", limits={"nvidia.com/gpu": "8"}))
        assert wait_pod(core, namespace, "next", finished).status.phase == "Succeeded"  # the GPUs were freed


def test_active_deadline_seconds_fails_the_pod_with_deadline_exceeded(apiserver, api_client, core, namespace):
    with running_agents(apiserver, api_client, "healthy-h100"):
        core.create_namespaced_pod(namespace, plain_pod("slow", "h100-0", activeDeadlineSeconds=1, annotations={
            "gpuconf.io/sim-run-seconds": "30"}))
        pod = wait_pod(core, namespace, "slow", finished, timeout=5)
        events = pod_events(core, namespace, "slow")
    message = "Pod was active on the node longer than the specified deadline"
    assert (pod.status.phase, pod.status.reason, pod.status.message) == ("Failed", "DeadlineExceeded", message)
    assert ("Normal", "DeadlineExceeded", None, message) in events
    assert terminated(pod, "main").exit_code == 143


def test_plain_containers_follow_the_exit_code_and_log_hooks(apiserver, api_client, core, namespace):
    with running_agents(apiserver, api_client, "healthy-h100"):
        core.create_namespaced_pod(namespace, plain_pod("fails", "h100-1", annotations={
            "gpuconf.io/sim-exit-code": "3", "gpuconf.io/sim-logs": "boom\n"}))
        pod = wait_pod(core, namespace, "fails", finished)
        assert pod.status.phase == "Failed"
        assert (terminated(pod, "main").reason, terminated(pod, "main").exit_code) == ("Error", 3)
        assert core.read_namespaced_pod_log("fails", namespace) == "boom\n"


def test_a_dra_pod_sees_exactly_the_devices_of_its_allocated_claim(apiserver, api_client, core, namespace):
    resource = client.ResourceV1Api(api_client)
    with running_agents(apiserver, api_client, "h200-dra-only") as agents:
        resource.create_namespaced_resource_claim(namespace, {
            "metadata": {"name": "two"},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 2}}]}}})
        results = [{"request": "gpus", "driver": "gpu.nvidia.com", "pool": "h200-0", "device": f"gpu-{i}"}
                   for i in (3, 5)]
        resource.patch_namespaced_resource_claim_status("two", namespace, {"status": {"allocation": {
            "devices": {"results": results}}}}, _content_type="application/merge-patch+json")
        core.create_namespaced_pod(namespace, {
            "metadata": {"name": "dra", "labels": {"gpuconf.io/probe": "cuda-probe"}},
            "spec": {"nodeName": "h200-0", "restartPolicy": "Never",
                     "resourceClaims": [{"name": "gpus", "resourceClaimName": "two"}],
                     "containers": [{"name": "probe", "image": BASE, "resources": {"claims": [{"name": "gpus"}]}}]}})
        pod = wait_pod(core, namespace, "dra", finished)
        report = probe_report(core, namespace, "dra", terminated(pod).exit_code)
        gpus = agents.cluster.node("h200-0").gpus
    assert report.exit_code == 0
    assert [d.uuid for d in report.devices] == [gpus[3].uuid, gpus[5].uuid]


def test_the_agents_recover_from_cut_watches(apiserver, api_client, core, namespace):
    apiserver.faults.cut_watch(resources=["pods"], after_events=0, abrupt=True, times=2)
    with running_agents(apiserver, api_client, "healthy-h100"):
        core.create_namespaced_pod(namespace, plain_pod("after-cut", "h100-0"))
        assert wait_pod(core, namespace, "after-cut", finished).status.phase == "Succeeded"
    assert len(apiserver.faults.injected) == 2


def test_a_mig_pod_sees_exactly_its_instance(apiserver, api_client, core, namespace):
    with running_agents(apiserver, api_client, "a100-mig-mixed") as agents:
        pod = probe_pod("mig", namespace, "a100-0")
        pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/mig-3g.40gb": "1"}
        core.create_namespaced_pod(namespace, pod)
        done = wait_pod(core, namespace, "mig", finished)
        report = probe_report(core, namespace, "mig", terminated(done).exit_code)
        (device,) = agents.pod_run(namespace, "mig").allocations["probe"]
    assert device.mig is not None and device.mig.profile == "3g.40gb"
    assert [(d.uuid, d.mig) for d in report.devices] == [(device.mig.uuid, True)]


def test_time_sliced_pods_share_a_physical_gpu(apiserver, api_client, core, namespace):
    with running_agents(apiserver, api_client, "t4-timeslicing") as agents:
        for i in range(5):  # 4 GPUs x 4 replicas: the plugin spreads four pods, the fifth shares a GPU
            core.create_namespaced_pod(namespace, plain_pod(f"ts-{i}", "t4-0", restart="Always",
                                                            limits={"nvidia.com/gpu": "1"}))
            wait_pod(core, namespace, f"ts-{i}", lambda p: p.status.phase == "Running")
        uuids = [agents.pod_run(namespace, f"ts-{i}").allocations["main"][0].gpu.uuid for i in range(5)]
    assert len(set(uuids[:4])) == 4 and uuids[4] in uuids[:4]


def test_a_single_process_nccl_probe_reports_the_node_interconnect(apiserver, api_client, core, namespace):
    with running_agents(apiserver, api_client, "healthy-h100"):
        core.create_namespaced_pod(namespace, {
            "metadata": {"name": "nccl", "labels": {"gpuconf.io/probe": "nccl-probe"}},
            "spec": {"nodeName": "h100-0", "restartPolicy": "Never", "runtimeClassName": "nvidia",
                     "containers": [{"name": "probe", "image": "registry.example/gpuconf/nccl-probe:0.1.0-cuda13.0.2",
                                     "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}})
        pod = wait_pod(core, namespace, "nccl", finished)
        report = parse_nccl_probe(core.read_namespaced_pod_log("nccl", namespace), exit_code=terminated(pod).exit_code)
    assert report.exit_code == 0 and len(report.local_gpu_uuids) == 8
    assert report.large_message_avg_busbw_gbps is not None and report.large_message_avg_busbw_gbps > 300


class LogSignal(logging.Handler):
    """Set when a record containing ``text`` is logged: lets a test wait for an agent's reaction."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text, self.seen = text, threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.seen.set()


def test_after_an_outage_too_long_for_the_watch_history_the_agents_relist(caplog):
    caplog.set_level(logging.INFO, logger="gpuconf.sim.agent")
    broken, relisted = LogSignal("pod watch failed"), LogSignal("410 Gone")
    logger = logging.getLogger("gpuconf.sim.agent")
    logger.addHandler(broken)
    logger.addHandler(relisted)
    try:
        with FakeApiServer(history=10) as server, client_for(server) as api:
            core = client.CoreV1Api(api)
            core.create_namespace({"metadata": {"name": "ns"}})
            with running_agents(server, api, "healthy-h100") as agents:
                core.create_namespaced_pod("ns", plain_pod("held", "h100-0", restart="Always",
                                                           limits={"nvidia.com/gpu": "8"}))
                wait_pod(core, "ns", "held", lambda p: p.status.phase == "Running")
                with server.outage():  # no reconnecting while 30 changes push the agents out of the history
                    agents._watch_resp.shutdown()  # the connection of the agents' watch breaks
                    assert broken.seen.wait(5)
                    server.store.delete("pods", "held", namespace="ns", grace_period_seconds=0)
                    for i in range(30):
                        server.store.create("configmaps", {"metadata": {"name": f"cm-{i}"}}, namespace="ns")
                    server.store.create("pods", plain_pod("fresh", "h100-0", limits={"nvidia.com/gpu": "8"}),
                                        namespace="ns")
                # "fresh" needs the 8 GPUs "held" had: it runs only if the relist noticed that deletion too.
                assert wait_pod(core, "ns", "fresh", finished).status.phase == "Succeeded"
                assert relisted.seen.is_set()
    finally:
        logger.removeHandler(broken)
        logger.removeHandler(relisted)


def test_an_mps_pod_gets_the_daemons_pipe_and_two_replicas_are_refused_with_the_plugins_text(
        apiserver, api_client, core, namespace):
    with running_agents(apiserver, api_client, "a100-mps"):
        core.create_namespaced_pod(namespace, probe_pod("mps-one", namespace, "a100-0",
                                                        env={"GPUCONF_PROBE_MEASURE_ALLOC": "1"}))
        core.create_namespaced_pod(namespace, plain_pod("mps-two", "a100-0", limits={"nvidia.com/gpu": "2"}))
        one = wait_pod(core, namespace, "mps-one", finished)
        two = wait_pod(core, namespace, "mps-two", finished)
        report = probe_report(core, namespace, "mps-one", terminated(one).exit_code)
        events = pod_events(core, namespace, "mps-two")
    assert report.env["CUDA_MPS_PIPE_DIRECTORY"] == "/mps/nvidia.com/gpu/pipe"
    la = report.devices[0].largest_alloc
    assert la is not None and la.largest_ok_bytes <= 20480 << 20
    message = ("Allocate failed due to rpc error: code = Unknown desc = request for 'nvidia.com/gpu: 2' too large: "
               "maximum request size for shared resources is 1, which is unexpected")
    assert (two.status.phase, two.status.reason, two.status.message) == (
        "Failed", "UnexpectedAdmissionError", f"Pod was rejected: {message}")
    assert events == [("Warning", "UnexpectedAdmissionError", None, message)]


def test_time_slicing_refuses_two_replicas_only_with_fail_requests_greater_than_one():
    from dataclasses import replace

    from gpuconf.sim.agent_model import AdmissionError, DeviceBook
    from gpuconf.sim.profile import expand, load_profile

    n = expand(load_profile("t4-timeslicing")).node("t4-0")
    two = [("main", False, {"nvidia.com/gpu": "2"})]
    assert len(DeviceBook(n).allocate("ns/a", two)["main"]) == 2
    strict = replace(n, device_plugin=replace(n.device_plugin, sharing=replace(
        n.device_plugin.sharing, fail_requests_greater_than_one=True)))
    with pytest.raises(AdmissionError, match=r"request for 'nvidia.com/gpu: 2' too large: maximum request size"):
        DeviceBook(strict).allocate("ns/b", two)
    assert len(DeviceBook(strict).allocate("ns/c", [("main", False, {"nvidia.com/gpu": "1"})])["main"]) == 1
