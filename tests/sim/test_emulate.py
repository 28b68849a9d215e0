"""Probe emulation: on each simulated node the cuda-probe prints what the real one would, a
document the real parser accepts, with the CUDA outcome the compatibility rules predict."""

from __future__ import annotations

import dataclasses

import pytest

from gpuconf.compat import tables
from gpuconf.compat.versions import parse_cuda
from gpuconf.probes.cuda import parse_cuda_probe
from gpuconf.sim.emulate import Visible, create_container, cuda_probe_run
from gpuconf.sim.profile import SimNode, expand, load_profile, with_faults


def node(profile: str, name: str, faults: list[dict] | None = None) -> SimNode:
    p = load_profile(profile)
    return expand(with_faults(p, faults) if faults else p).node(name)


def official_env(version: str) -> dict[str, str]:
    row = tables.image_require(version)
    assert row is not None
    return {"NVIDIA_REQUIRE_CUDA": row.require, "CUDA_VERSION": row.cuda_version_env}


def run(n: SimNode, *, gpus: int = 1, image: str = "13.0.2", compat: bool = True, env: dict | None = None,
        visible: list[Visible] | None = None):
    env = dict(official_env(image) if env is None else env)
    devices = visible if visible is not None else [Visible(g) for g in n.gpus[:gpus]]
    created = create_container(n, env=[f"{k}={v}" for k, v in env.items()], visible=devices)
    if not created.ok:
        return created, None
    code, stdout = cuda_probe_run(n, visible=devices, image_cuda=parse_cuda(image), env=env, compat=compat,
                                  started_at="2026-11-29T00:00:00.000Z", hostname=n.name)
    return created, parse_cuda_probe(stdout, exit_code=code, source=n.name)


def test_a_healthy_h100_runs_the_13_0_probe_on_its_own_driver():
    n = node("healthy-h100", "h100-0")
    _, report = run(n, gpus=8)
    assert report.exit_code == 0 and report.init.ok
    assert report.driver_cuda == "13.0" and report.libcuda_compat is False
    assert [d.uuid for d in report.devices] == [g.uuid for g in n.gpus]
    assert report.nvml_driver_version == str(n.driver)


def test_a_570_data_center_node_runs_13_0_through_the_compat_libcuda():
    _, report = run(node("mixed-driver-570", "a100-570-0"))
    assert report.exit_code == 0
    assert report.libcuda_compat is True and report.libcuda_path.startswith("/usr/local/cuda/compat/")
    assert report.driver_cuda == "13.0"


def test_without_cuda_compat_the_570_node_fails_13_0_with_35():
    _, report = run(node("mixed-driver-570", "a100-570-0"), compat=False)
    assert (report.exit_code, report.init.code, report.driver_cuda) == (3, 35, "12.8")
    assert report.devices == ()


def test_minor_version_compatibility_runs_but_the_ptx_kernel_fails_with_222():
    _, report = run(node("healthy-h100", "h100-0"), image="13.1.1", compat=False)
    assert report.exit_code == 7
    assert all(d.vector_add_ok and not d.ptx_jit_ok and d.ptx_jit.code == 222 for d in report.devices)


def test_legacy_mode_rejects_an_unsatisfied_requirement_at_creation_with_the_runtime_text():
    created, report = run(node("healthy-h100", "h100-0"), env={"NVIDIA_REQUIRE_CUDA": "cuda>=99.0"})
    assert report is None and not created.ok
    assert "error running prestart hook #0" in created.message
    assert ("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=99.0, please update"
            in created.message)


def test_a_node_whose_toolkit_runs_in_cdi_mode_does_not_check_requirements():
    n = node("healthy-h100", "h100-0", [{"id": "toolkit-cdi-mode", "pool": "h100", "node": 0}])
    created, report = run(n, env={"NVIDIA_REQUIRE_CUDA": "cuda>=99.0"})
    assert created.ok and report.exit_code == 0


@pytest.mark.parametrize("fault,code,nvml_absent", [
    ("uvm-missing", 999, False),
    ("library-mismatch", 803, True),
])
def test_driver_faults_fail_cuda_init_with_their_error(fault, code, nvml_absent):
    n = node("healthy-h100", "h100-0", [{"id": fault, "pool": "h100", "node": 0}])
    _, report = run(n)
    assert (report.exit_code, report.init.code) == (3, code)
    assert (report.nvml_absent_reason is not None) is nvml_absent
    if nvml_absent:
        assert "Driver/library version mismatch" in report.nvml_absent_reason


def test_a_lost_gpu_that_is_still_injected_is_not_seen_by_the_probe():
    n = node("healthy-h100", "h100-0", [{"id": "gpu-lost", "pool": "h100", "node": 0, "gpu": 3}])
    _, report = run(n, gpus=8)
    assert report.exit_code == 0 and len(report.devices) == 7
    assert n.gpus[3].uuid not in {d.uuid for d in report.devices}


def test_uncorrectable_ecc_shows_in_nvml_with_a_pending_row_remap():
    n = node("healthy-h100", "h100-0", [{"id": "ecc-uncorrectable", "pool": "h100", "node": 0, "gpu": 0}])
    _, report = run(n)
    gpu = report.nvml_gpus[0]
    assert gpu.ecc_volatile_uncorrected and gpu.ecc_volatile_uncorrected > 0 and gpu.remapped_rows_pending


def test_a_container_given_no_gpu_sees_no_driver():
    _, report = run(node("healthy-h100", "h100-0"), visible=[])
    assert (report.exit_code, report.init.code, report.driver_cuda) == (3, 35, None)


def test_a_mig_instance_is_seen_as_that_instance():
    n = node("a100-mig-mixed", "a100-0")
    gpu = next(g for g in n.gpus if g.mig)
    _, report = run(n, visible=[Visible(gpu, gpu.mig[0])])
    (device,) = report.devices
    assert device.mig and device.uuid == gpu.mig[0].uuid and device.uuid.startswith("MIG-")
    # what nvidia-smi mig -lgip shows for an A100-80GB 3g.40gb (tests/data/real/nvidia-smi/), not the name's 40 GiB
    assert gpu.mig[0].profile == "3g.40gb" and device.total_memory_bytes == int(39.25 * (1 << 30))
    assert "MIG " + gpu.mig[0].profile in device.name


def test_one_cuda_process_enumerates_one_mig_device_and_no_whole_gpu_beside_it():
    # MIG User Guide, "CUDA Device Enumeration": the first MIG device only; NVML still sees every GPU.
    n = node("a100-mig-mixed", "a100-0")
    mig_gpu = next(g for g in n.gpus if g.mig)
    # a GPU with MIG off given whole (as a misconfigured plugin would)
    whole = dataclasses.replace(n.gpus[-1], mig=(), mig_mode=False)
    _, report = run(n, visible=[Visible(whole), *(Visible(mig_gpu, m) for m in mig_gpu.mig)])
    (device,) = report.devices
    assert device.uuid == mig_gpu.mig[0].uuid
    assert {g.uuid for g in report.nvml_gpus} == {mig_gpu.uuid, whole.uuid}
    _, plain = run(n, visible=[Visible(whole)])
    assert [d.uuid for d in plain.devices] == [whole.uuid]
    # MIG mode on and given whole: CUDA has nothing to run on, NVML lists it with MIG enabled
    _, bare = run(n, visible=[Visible(n.gpus[-1])])
    assert not bare.devices and [g.mig_enabled for g in bare.nvml_gpus] == [True]


# --- nccl-probe -----------------------------------------------------------------------------------

from gpuconf.probes.nccl import parse_nccl_probe  # noqa: E402
from gpuconf.sim.emulate import nccl_probe_run  # noqa: E402


def nccl(n: SimNode, gpus: int = 8):
    code, stdout = nccl_probe_run(n, visible=[Visible(g) for g in n.gpus[:gpus]], image_cuda=parse_cuda("13.0.2"),
                                  env={}, started_at="2026-11-29T00:00:00.000Z", hostname=n.name)
    return parse_nccl_probe(stdout, exit_code=code, source=n.name)


def test_an_8x_h100_node_reaches_its_nvlink_busbw_over_nvls():
    n = node("healthy-h100", "h100-0")
    report = nccl(n)
    assert report.exit_code == 0 and report.all_correct and report.nranks == 8
    assert report.nvls_used is True and "NVLS" in report.transports
    assert report.large_message_avg_busbw_gbps == pytest.approx(n.interconnect.busbw_gbps, rel=0.1)


def test_a_slow_link_shows_as_lower_busbw():
    healthy = nccl(node("healthy-h100", "h100-0")).large_message_avg_busbw_gbps
    slow = nccl(node("healthy-h100", "h100-0", [{"id": "nccl-slow-link", "pool": "h100", "node": 0}]))
    assert slow.exit_code == 0 and slow.large_message_avg_busbw_gbps < 0.8 * healthy


def test_a_hung_interconnect_is_reported_as_a_hang_with_the_size_in_flight():
    report = nccl(node("healthy-h100", "h100-0", [{"id": "nccl-hang", "pool": "h100", "node": 0}]))
    assert report.exit_code == 6 and report.hung and report.running_bytes == 1 << 20
    assert report.sweep_completed is False


def test_a_pod_without_gpus_gets_no_device():
    report = nccl(node("healthy-h100", "h100-0"), gpus=0)
    assert report.exit_code == 4 and report.nranks is None


# --- MPS clients and the largest-allocation bisection --------------------------------------------

from gpuconf.sim.emulate import largest_alloc_doc, sm_occupancy_doc  # noqa: E402

_MIB = 1 << 20
_MPS_PIPE = {"CUDA_MPS_PIPE_DIRECTORY": "/mps/nvidia.com/gpu/pipe"}
_MEASURE = {"GPUCONF_PROBE_MEASURE_ALLOC": "1"}


def test_the_bisection_brackets_the_threshold_to_its_resolution_in_bounded_steps():
    total = 81920 * _MIB
    doc = largest_alloc_doc(total, 20416 * _MIB, "(device 0)")
    assert doc["resolution_bytes"] == total // 128 and doc["steps"] <= 12
    assert doc["largest_ok_bytes"] <= 20416 * _MIB < doc["smallest_failed_bytes"]
    assert doc["smallest_failed_bytes"] - doc["largest_ok_bytes"] <= doc["resolution_bytes"]
    assert doc["last_failure"]["name"] == "cudaErrorMemoryAllocation"
    assert largest_alloc_doc(total, total, "(device 0)")["smallest_failed_bytes"] is None


def test_an_mps_client_is_held_to_memory_over_replicas_and_cudamemgetinfo_does_not_show_it():
    n = node("a100-mps", "a100-0")
    _, report = run(n, env={**official_env("13.0.2"), **_MPS_PIPE, **_MEASURE})
    la = report.devices[0].largest_alloc
    limit = (81920 // 4 - 64) * _MIB  # the daemon's limit, less the client's context
    assert la is not None and la.ok and la.largest_ok_bytes <= limit < (la.smallest_failed_bytes or 0)
    assert la.free_bytes == (81920 - 512) * _MIB and la.total_bytes == 81920 * _MIB
    assert report.env["CUDA_MPS_PIPE_DIRECTORY"] == "/mps/nvidia.com/gpu/pipe"


def test_without_the_pipe_or_the_daemons_limit_a_client_reaches_the_whole_gpu():
    free = (81920 - 512) * _MIB
    for n, env in [(node("a100-mps", "a100-0"), _MEASURE),
                   (node("a100-mps", "a100-0", [{"id": "mps-memory-limit-unset"}]), {**_MPS_PIPE, **_MEASURE}),
                   (node("healthy-h100", "h100-0"), _MEASURE)]:
        _, report = run(n, env={**official_env("13.0.2"), **env})
        la = report.devices[0].largest_alloc
        assert la is not None and free - la.resolution_bytes < la.largest_ok_bytes <= free, n.name


def test_an_mps_clients_kernel_reaches_its_thread_percentage_of_the_sms_and_others_every_sm() -> None:
    _, report = run(node("a100-mps", "a100-0"), env={**official_env("13.0.2"), **_MPS_PIPE, **_MEASURE})
    so = report.devices[0].sm_occupancy
    sms = report.raw["devices"][0]["multiprocessors"]  # multiProcessorCount: the whole device's
    assert so is not None and so.ok and (so.multiprocessors, so.distinct_sms, so.blocks) == (sms, 33, 32 * sms)
    # the memory fault is about memory: the daemon still sets the thread percentage
    client = {**_MPS_PIPE, **_MEASURE}
    for n, env, want in [(node("a100-mps", "a100-0"), _MEASURE, sms),
                         (node("a100-mps", "a100-0", [{"id": "mps-memory-limit-unset"}]), client, 33),
                         (node("healthy-h100", "h100-0"), client, sms)]:
        _, report = run(n, env={**official_env("13.0.2"), **env})
        so = report.devices[0].sm_occupancy
        assert so is not None and so.distinct_sms == want, n.name


def test_the_sm_census_rounds_the_share_up_and_never_exceeds_the_device() -> None:
    assert sm_occupancy_doc(132, 6, "(device 0)")["distinct_sms"] == 8  # 16 replicas: 7.92 SMs
    assert sm_occupancy_doc(108, 33, "(device 0)")["distinct_sms"] == 36  # 3 replicas: 35.64 SMs
    assert sm_occupancy_doc(40, None, "(device 0)")["distinct_sms"] == 40
    assert sm_occupancy_doc(40, 100, "(device 0)")["distinct_sms"] == 40


def test_without_the_switch_the_document_is_unchanged():
    _, report = run(node("a100-mps", "a100-0"))
    assert report.devices[0].largest_alloc is None and "largest_alloc" not in report.raw["devices"][0]
    assert report.devices[0].sm_occupancy is None and "sm_occupancy" not in report.raw["devices"][0]
    assert not any(k.startswith("CUDA_MPS_") for k in report.env)
