"""The cuda-probe (probes/cuda-probe): built with its build.sh, run on this machine.

Without a GPU the probe must still print one valid document and the right exit code, quickly. A
fake libcuda (tests/fixtures/fake_libcuda/fake_libcuda.c) stands in for a driver that hangs in
cuInit, reports no device, or is too old, and a fake libnvidia-ml for NVML's answers, so the
watchdog, libcuda and NVML paths run here too. Skipped where nvcc is not on PATH.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from probe_build import build_probe, clean_env

from gpuconf.probes.cuda import parse_cuda_probe

ROOT = Path(__file__).resolve().parent.parent
PROBE_DIR = ROOT / "probes" / "cuda-probe"
BUILD_SH = PROBE_DIR / "build.sh"
FAKES = Path(__file__).resolve().parent / "fixtures" / "fake_libcuda"
SCHEMA = json.loads((ROOT / "gpuconf" / "probe_schemas" / "cuda-probe.v1.json").read_text(encoding="utf-8"))
VALIDATOR = Draft202012Validator(SCHEMA)

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None,
                                reason="nvcc (the CUDA toolkit) is not on PATH: the cuda-probe cannot be built")

#: The issue's product requirement: without a GPU the probe answers in under 10 s.
NO_GPU_BOUND_S = 10.0


def _driver_present() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


DRIVER_PRESENT = _driver_present()
needs_no_driver = pytest.mark.skipif(DRIVER_PRESENT, reason="a real libcuda is installed: the no-GPU answers differ")
needs_driver = pytest.mark.skipif(not DRIVER_PRESENT, reason="no NVIDIA driver (libcuda.so.1) on this machine")


class Run:
    def __init__(self, proc: subprocess.CompletedProcess[bytes], elapsed: float) -> None:
        self.code = proc.returncode
        self.stdout = proc.stdout.decode("utf-8")
        self.stderr = proc.stderr.decode("utf-8", "replace")
        self.elapsed = elapsed

    def doc(self) -> dict[str, Any]:
        """The one JSON document on stdout, validated against the schema."""
        text = self.stdout.strip()
        doc, end = json.JSONDecoder().raw_decode(text)
        assert text[end:].strip() == "", f"more than one document on stdout: {text[end:][:80]!r}"
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(doc)]
        assert errors == [], errors
        assert doc["exit_code"] == self.code
        return doc


def run_probe(binary: Path, *args: str, env: dict[Any, Any] | None = None, timeout: float = 60) -> Run:
    t0 = time.monotonic()
    proc = subprocess.run([str(binary), *args], capture_output=True, env=clean_env() if env is None else env,
                          timeout=timeout, check=False)
    return Run(proc, time.monotonic() - t0)


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The probe, built once by build.sh (one SASS target, to keep the suite fast)."""
    out = tmp_path_factory.mktemp("cuda-probe") / "bin" / "cuda-probe"
    env = clean_env(CUDA_ARCHS="75")
    return out, build_probe(BUILD_SH, out, env)


@pytest.fixture(scope="module")
def probe(build: tuple[Path, subprocess.CompletedProcess[str]]) -> Path:
    return build[0]


@pytest.fixture(scope="module")
def fakes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Directories holding the fake driver libraries, compiled with the C compiler here."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler (gcc/cc) to build the fake libcuda")
    base = tmp_path_factory.mktemp("fakes")
    dirs = {"lib": base / "lib", "compat": base / "usr" / "local" / "cuda" / "compat", "nvml": base / "nvml"}
    def compile_so(source: str, out: Path) -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([cc, "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-o", str(out), str(FAKES / source)],
                       check=True, capture_output=True)

    for name in ("lib", "compat"):
        compile_so("fake_libcuda.c", dirs[name] / "libcuda.so.580.65.06")
        (dirs[name] / "libcuda.so.1").symlink_to("libcuda.so.580.65.06")
    compile_so("fake_nvml.c", dirs["nvml"] / "libnvidia-ml.so.1")
    return dirs


def _nvcc_cuda_version() -> str:
    out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"release (\d+\.\d+)", out)
    assert match, out
    return match.group(1)


# ------------------------------------------------------------------------------------------------
# build.sh


def test_build_prints_only_the_output_path_and_no_warnings(build):
    out, proc = build
    assert proc.stdout == f"{out}\n"
    assert proc.stderr == ""  # warning-free with this nvcc
    assert os.access(out, os.X_OK)


def _fake_nvcc(tmp_path: Path, archs: str, fail: bool = False) -> tuple[Path, Path]:
    log = tmp_path / "nvcc.log"
    script = tmp_path / "nvcc"
    script.write_text(f"""#!/usr/bin/env bash
if [ "$1" = "--list-gpu-arch" ]; then printf '%s\\n' {archs}; exit 0; fi
echo "$*" >> {log}
{"echo 'probe.cu(1): error: something broke' >&2; exit 1" if fail else ""}
while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then : > "$2"; fi; shift; done
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, log


def test_build_targets_what_nvcc_supports_plus_ptx_for_the_highest(tmp_path):
    nvcc, log = _fake_nvcc(tmp_path, "compute_50 compute_75 compute_80 compute_90 compute_103 compute_121")
    out = tmp_path / "out" / "probe"
    proc = subprocess.run(["bash", str(BUILD_SH), str(out)], capture_output=True, text=True,
                          env=clean_env(NVCC=str(nvcc)), check=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"{out}\n", "")
    probe_cmd, jit_cmd, link_cmd = log.read_text().splitlines()
    assert re.findall(r"-gencode (\S+)", probe_cmd) == [
        "arch=compute_75,code=sm_75", "arch=compute_80,code=sm_80", "arch=compute_90,code=sm_90",
        "arch=compute_90,code=compute_90"]
    assert probe_cmd.endswith("probe.cu -o " + probe_cmd.split(" -o ")[-1]) and "-std=c++17" in probe_cmd
    assert re.findall(r"-gencode (\S+)", jit_cmd) == ["arch=compute_75,code=compute_75"]  # PTX only
    assert "jit_kernel.cu" in jit_cmd
    assert link_cmd.startswith(f"-cudart static -o {out} ") and link_cmd.endswith("-ldl -lpthread")


def test_build_honours_cuda_archs(tmp_path):
    nvcc, log = _fake_nvcc(tmp_path, "compute_75 compute_80 compute_90")
    out = tmp_path / "probe"
    proc = subprocess.run(["bash", str(BUILD_SH), str(out)], capture_output=True, text=True,
                          env=clean_env(NVCC=str(nvcc), CUDA_ARCHS="80;90a"), check=False)
    assert proc.returncode == 0, proc.stderr
    assert re.findall(r"-gencode (\S+)", log.read_text().splitlines()[0]) == [
        "arch=compute_80,code=sm_80", "arch=compute_90a,code=sm_90a", "arch=compute_80,code=compute_80"]


def test_build_failure_exits_nonzero_with_the_compilers_message(tmp_path):
    nvcc, _ = _fake_nvcc(tmp_path, "compute_75", fail=True)
    proc = subprocess.run(["bash", str(BUILD_SH), str(tmp_path / "probe")], capture_output=True, text=True,
                          env=clean_env(NVCC=str(nvcc)), check=False)
    assert proc.returncode != 0 and proc.stdout == ""
    assert "probe.cu(1): error: something broke" in proc.stderr


def test_build_without_arguments_is_a_usage_error():
    proc = subprocess.run(["bash", str(BUILD_SH)], capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "usage" in proc.stderr


# ------------------------------------------------------------------------------------------------
# Runs without a GPU


@needs_no_driver
def test_no_gpu_run_reports_insufficient_driver_within_the_bound(probe):
    r = run_probe(probe)
    assert r.elapsed < NO_GPU_BOUND_S
    assert r.code == 3
    assert r.stderr == ""  # diagnostics only with --verbose
    doc = r.doc()
    assert doc["schema"] == "gpuconf.cuda-probe/v1"
    assert doc["probe"]["version"] == "0.1.0"
    assert doc["probe"]["built_with_cuda"] == _nvcc_cuda_version()
    assert doc["probe"]["archs"] == "sm_75 compute_75"
    assert doc["probe"]["timeout_s"] == 30
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", doc["started_at"])
    assert doc["runtime"]["version"] == _nvcc_cuda_version()
    assert doc["driver"]["value"] == 0 and doc["driver"]["version"] is None
    assert doc["init"]["code"] == 35
    assert doc["init"]["name"] == "cudaErrorInsufficientDriver"
    assert doc["init"]["message"] == "CUDA driver version is insufficient for CUDA runtime version"
    assert doc["init"]["timed_out"] is False
    assert doc["device_count"]["value"] == 0 and doc["device_count"]["result"]["code"] == 35
    assert doc["devices"] == []
    assert doc["nvml"]["available"] is False and "libnvidia-ml.so.1" in doc["nvml"]["reason"]
    assert doc["libcuda"]["available"] is False and "libcuda.so.1" in doc["libcuda"]["reason"]
    assert "35 cudaErrorInsufficientDriver" in doc["exit_reason"]
    assert set(doc["env"]) == {"NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
                               "NVIDIA_REQUIRE_CUDA", "NVIDIA_DISABLE_REQUIRE"}
    assert all(v is None for v in doc["env"].values())


@needs_no_driver
def test_verbose_writes_diagnostics_to_stderr_only(probe):
    r = run_probe(probe, "--verbose")
    assert r.code == 3 and "cudaFree(0)" in r.stderr
    r.doc()


def test_env_values_are_reported_and_escaped(probe):
    tricky = 'cuda>=13.0 "quoted" back\\slash\ttab\nnewline\x01\x1f\x7f é 漢'
    env = clean_env(NVIDIA_REQUIRE_CUDA=tricky, NVIDIA_VISIBLE_DEVICES="GPU-1,GPU-2", CUDA_VERSION="13.0.2",
                     NVIDIA_REQUIRE_ARCH="arch>=7.5", GPUCONF_PROBE_TIMEOUT="7.5")
    env_bytes = {os.fsencode(k): os.fsencode(v) for k, v in env.items()}
    env_bytes[b"NVIDIA_DRIVER_CAPABILITIES"] = b"compute,\xff\xfeutility"  # not UTF-8
    r = run_probe(probe, env=env_bytes)
    for raw in ("\\u0001", "\\u001f", "\\u007f", "\\t", "\\n", '\\"quoted\\"', "back\\\\slash"):
        assert raw in r.stdout
    doc = r.doc()
    assert doc["env"]["NVIDIA_REQUIRE_CUDA"] == tricky
    assert doc["env"]["NVIDIA_VISIBLE_DEVICES"] == "GPU-1,GPU-2"
    assert doc["env"]["NVIDIA_DRIVER_CAPABILITIES"] == "compute,\ufffd\ufffdutility"
    assert doc["env"]["CUDA_VISIBLE_DEVICES"] is None
    assert doc["env"]["CUDA_VERSION"] == "13.0.2" and doc["env"]["NVIDIA_REQUIRE_ARCH"] == "arch>=7.5"
    assert doc["probe"]["timeout_s"] == 7.5  # from GPUCONF_PROBE_TIMEOUT


def test_timeout_flag_overrides_the_environment(probe):
    r = run_probe(probe, "--timeout=12", "--elements", "1024", env=clean_env(GPUCONF_PROBE_TIMEOUT="7.5"))
    assert r.doc()["probe"]["timeout_s"] == 12


def test_device_nodes_match_this_machine(probe):
    nodes = run_probe(probe).doc()["device_nodes"]
    assert nodes["/dev/nvidiactl"] == os.path.exists("/dev/nvidiactl")
    assert nodes["/dev/nvidia-uvm"] == os.path.exists("/dev/nvidia-uvm")
    expected = sorted((p for p in os.listdir("/dev") if re.fullmatch(r"nvidia\d+", p)), key=lambda p: int(p[6:]))
    assert nodes["gpus"] == [f"/dev/{p}" for p in expected]


# ------------------------------------------------------------------------------------------------
# A fake driver: hang (watchdog), no device, too old, from a compat directory


def test_watchdog_ends_a_hung_cuinit_with_exit_6(probe, fakes):
    env = clean_env(LD_LIBRARY_PATH=str(fakes["lib"]), FAKE_LIBCUDA_MODE="hang")
    r = run_probe(probe, "--timeout", "2", env=env, timeout=30)
    assert r.code == 6
    assert 2.0 <= r.elapsed < 5.0
    doc = r.doc()
    assert doc["init"]["timed_out"] is True
    assert doc["init"]["call"] == "cudaFree(0)" and doc["init"]["ms"] >= 2000
    assert doc["exit_reason"] == "watchdog: cudaFree(0) did not return within 2 s"
    assert doc["duration_ms"] >= 2000
    assert doc["devices"] == [] and doc["libcuda"]["available"] is False  # not reached: said so


def test_driver_without_a_device_exits_4_and_names_the_library(probe, fakes):
    r = run_probe(probe, env=clean_env(LD_LIBRARY_PATH=str(fakes["lib"]), FAKE_LIBCUDA_MODE="no_device"))
    assert r.code == 4
    doc = r.doc()
    assert (doc["init"]["code"], doc["init"]["name"]) == (100, "cudaErrorNoDevice")
    assert doc["driver"] == {"value": 13000, "version": "13.0", "result": doc["driver"]["result"]}
    assert doc["libcuda"] == {"available": True, "path": str((fakes["lib"] / "libcuda.so.580.65.06").resolve()),
                              "version": "580.65.06", "compat": False}
    assert doc["exit_reason"].startswith("no CUDA device: cudaFree(0) returned 100")


def test_driver_older_than_the_runtime_gives_35_with_the_compat_library_named(probe, fakes):
    env = clean_env(LD_LIBRARY_PATH=str(fakes["compat"]), FAKE_LIBCUDA_DRIVER_VERSION="12080")
    r = run_probe(probe, env=env)
    assert r.code == 3
    doc = r.doc()
    assert doc["init"]["code"] == 35
    assert (doc["driver"]["value"], doc["driver"]["version"]) == (12080, "12.8")
    assert doc["libcuda"]["compat"] is True and doc["libcuda"]["version"] == "580.65.06"
    assert doc["libcuda"]["path"].endswith("/usr/local/cuda/compat/libcuda.so.580.65.06")


def test_other_driver_errors_are_reported_as_init_failures(probe, fakes):
    env = clean_env(LD_LIBRARY_PATH=str(fakes["lib"]), FAKE_LIBCUDA_MODE="error", FAKE_LIBCUDA_INIT_ERROR="999")
    r = run_probe(probe, env=env)
    assert r.code == 3
    doc = r.doc()
    assert doc["init"]["code"] != 0 and doc["init"]["name"].startswith("cudaError")


# ------------------------------------------------------------------------------------------------
# NVML through a fake libnvidia-ml


def test_nvml_facts_are_read_or_absent_with_the_nvml_reason(probe, fakes):
    doc = run_probe(probe, env=clean_env(LD_LIBRARY_PATH=str(fakes["nvml"]))).doc()
    nvml = doc["nvml"]
    assert nvml["available"] is True
    assert nvml["library"] == str((fakes["nvml"] / "libnvidia-ml.so.1").resolve())
    assert (nvml["driver_version"], nvml["cuda_driver_version"]) == ("580.65.06", 13000)
    g0, g1 = nvml["gpus"]
    assert (g0["index"], g0["uuid"], g0["name"], g0["pci_bus_id"]) == (
        0, "GPU-11111111-2222-3333-4444-555555555555", "NVIDIA H100 80GB HBM3", "00000000:3B:00.0")
    assert g0["brand"] == {"enum": 2, "name": "Tesla"}
    assert g0["persistence_mode"] is True
    assert g0["mig_mode"] == {"current": False, "pending": True}
    assert g0["ecc"]["enabled"] is True
    assert g0["ecc"]["volatile"] == {"corrected": 3, "uncorrected": 0}
    assert g0["ecc"]["aggregate"] == {"corrected": 17, "uncorrected": {
        "available": False, "reason": "nvmlDeviceGetTotalEccErrors: Not Supported"}}
    assert g0["retired_pages"] == {"available": False, "reason": "nvmlDeviceGetRetiredPages: Not Supported"}
    assert g0["remapped_rows"] == {"correctable": 2, "uncorrectable": 0, "pending": False, "failure": False}
    assert g1["brand"] == {"enum": 15, "name": "GeForceRTX"}
    assert g1["persistence_mode"] == {"available": False, "reason": "nvmlDeviceGetPersistenceMode: Not Supported"}
    assert g1["mig_mode"] == {"available": False, "reason": "nvmlDeviceGetMigMode: Not Supported"}
    assert g1["ecc"] == {"available": False, "reason": "nvmlDeviceGetEccMode: Not Supported"}
    assert g1["retired_pages"] == {"single_bit": 2, "double_bit": 0, "pending": True}
    assert g1["remapped_rows"] == {"available": False, "reason": "nvmlDeviceGetRemappedRows: Not Supported"}


def test_nvml_pcie_links_are_read_and_not_claimed_under_load_without_copies(probe, fakes):
    g0, g1 = run_probe(probe, env=clean_env(LD_LIBRARY_PATH=str(fakes["nvml"]))).doc()["nvml"]["gpus"]
    no_copy = {"available": False, "reason": "not read: no copy ran on this GPU"}
    assert g0["pcie"] == {"link_gen_current": 1, "link_gen_max": 5, "link_gen_gpu_max": 5, "link_width_current": 16,
                          "link_width_max": 16, "replay_counter": 3, "replay_counter_after_load": no_copy,
                          "sampled_under_load": False, "load_window_ms": None}
    assert g1["pcie"]["link_gen_gpu_max"] == {"available": False,
                                              "reason": "nvmlDeviceGetGpuMaxPcieLinkGeneration: Not Supported"}
    assert g1["pcie"]["replay_counter"] == {"available": False,
                                            "reason": "nvmlDeviceGetPcieReplayCounter: Not Supported"}
    assert (g1["pcie"]["link_gen_current"], g1["pcie"]["link_width_current"]) == (4, 8)


def test_nvml_version_mismatch_is_absent_with_nvmls_message(probe, fakes):
    doc = run_probe(probe, env=clean_env(LD_LIBRARY_PATH=str(fakes["nvml"]), FAKE_NVML_MODE="mismatch")).doc()
    assert doc["nvml"] == {"available": False, "reason": "nvmlInit_v2: Driver/library version mismatch"}


def test_watchdog_covers_nvml_calls(probe, fakes):
    env = clean_env(LD_LIBRARY_PATH=str(fakes["nvml"]), FAKE_NVML_MODE="hang")
    r = run_probe(probe, "--timeout", "1.5", env=env, timeout=30)
    assert r.code == 6 and r.elapsed < 5.0
    doc = r.doc()
    assert doc["exit_reason"] == "watchdog: nvmlInit_v2 did not return within 1.5 s"
    assert doc["nvml"]["available"] is False and "watchdog" in doc["nvml"]["reason"]


# ------------------------------------------------------------------------------------------------
# Command line


@pytest.mark.parametrize("args", [["--bogus"], ["--timeout", "0"], ["--timeout", "abc"], ["--timeout"],
                                  ["--elements", "0"], ["--elements", "-5"], ["--verbose=yes"], ["extra"],
                                  ["--copy-mib", "4097"], ["--copy-mib", "-1"], ["--copy-mib"],
                                  ["--rendezvous"], ["--rendezvous-wait", "soon"]])
def test_bad_flags_exit_2_with_one_line_and_no_document(probe, args):
    r = run_probe(probe, *args)
    assert r.code == 2
    assert r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("cuda-probe: ")


def test_bad_copy_size_in_the_environment_is_a_usage_error(probe):
    r = run_probe(probe, env=clean_env(GPUCONF_PROBE_COPY_MIB="lots"))
    assert (r.code, r.stdout) == (2, "")
    assert r.stderr == ("cuda-probe: invalid GPUCONF_PROBE_COPY_MIB 'lots': expected an integer from 0 to 4096 "
                        "(try --help)\n")


def test_bad_timeout_in_the_environment_is_a_usage_error(probe):
    r = run_probe(probe, env=clean_env(GPUCONF_PROBE_TIMEOUT="soon"))
    assert (r.code, r.stdout, len(r.stderr.splitlines())) == (2, "", 1)
    assert "GPUCONF_PROBE_TIMEOUT" in r.stderr


def test_help_prints_usage_and_the_exit_codes(probe):
    r = run_probe(probe, "--help")
    assert r.code == 0 and r.stdout.startswith("usage: cuda-probe")
    assert "6 watchdog timeout" in r.stdout
    assert "--rendezvous PEER[,PEER...]" in r.stdout and "env GPUCONF_PROBE_RENDEZVOUS" in r.stdout


@pytest.mark.parametrize(("args", "env", "message"), [
    (["--rendezvous", "a,"], {}, "invalid --rendezvous 'a,': empty peer in 'a,'"),
    (["--rendezvous", "a:http"], {}, "invalid --rendezvous 'a:http': peer 'a:http' has a bad port"),
    (["--rendezvous", "[::1"], {}, "invalid --rendezvous '[::1': peer '[::1' has no closing ']'"),
    (["--rendezvous-port", "80"], {}, "invalid --rendezvous-port '80': expected a port from 1025 to 65535"),
    (["--rendezvous-wait", "3601"], {}, "invalid --rendezvous-wait '3601': expected seconds > 0 and <= 3600"),
    ([], {"GPUCONF_PROBE_RENDEZVOUS_PORT": "1024"},
     "invalid GPUCONF_PROBE_RENDEZVOUS_PORT '1024': expected a port from 1025 to 65535"),
    ([], {"GPUCONF_PROBE_RENDEZVOUS_WAIT": "0"},
     "invalid GPUCONF_PROBE_RENDEZVOUS_WAIT '0': expected seconds > 0 and <= 3600"),
], ids=["empty peer", "port not a number", "unclosed v6 bracket", "privileged port", "wait too long",
        "privileged port in the environment", "no wait in the environment"])
def test_bad_rendezvous_settings_are_usage_errors(probe, args, env, message):
    r = run_probe(probe, *args, env=clean_env(**env))
    assert (r.code, r.stdout) == (2, "")
    assert r.stderr == f"cuda-probe: {message} (try --help)\n"


# ------------------------------------------------------------------------------------------------
# Rendezvous: two real probes on 127.0.0.1 hold their devices until each has seen the other's


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _start(binary: Path, *args: str, env: dict[Any, Any]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([str(binary), "--copy-mib", "0", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)


def _document(proc: subprocess.Popen[bytes], t0: float, timeout: float = 60) -> tuple[dict[str, Any], float]:
    out, err = proc.communicate(timeout=timeout)
    elapsed = time.monotonic() - t0
    run = Run(subprocess.CompletedProcess(proc.args, proc.returncode, out, err), elapsed)
    return run.doc(), elapsed


def test_two_probes_meet_each_reading_the_others_gpus_and_measure_their_overlap(probe, fakes):
    """One probe sees the fake NVML's two GPUs, the other none: each reports the other's line, both
    release once they have met, long before the wait ends, with the overlap they proved."""
    pa, pb = _free_ports(2)
    t0 = time.monotonic()
    a = _start(probe, "--rendezvous", f"127.0.0.1:{pb}", "--rendezvous-port", str(pa), "--rendezvous-wait", "30",
               env=clean_env(LD_LIBRARY_PATH=str(fakes["nvml"])))
    time.sleep(0.5)  # b comes later: a retries until it answers
    b = _start(probe, "--rendezvous-wait", "30", env=clean_env(GPUCONF_PROBE_RENDEZVOUS=f"localhost:{pa}",
                                                               GPUCONF_PROBE_RENDEZVOUS_PORT=str(pb)))
    (da, ta), (db, tb) = _document(a, t0), _document(b, t0)
    ra, rb = da["rendezvous"], db["rendezvous"]
    host = socket.gethostname()
    assert (ra["met"], rb["met"], ra["reason"], rb["reason"]) == (True, True, None, None)
    assert max(ta, tb) < NO_GPU_BOUND_S + 5  # released when met, not at the end of the 30 s wait
    gpus = ["GPU-11111111-2222-3333-4444-555555555555", "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"]
    assert (ra["name"], ra["nvml_uuids"], ra["cuda_uuids"]) == (f"{host}:{pa}", gpus, [])
    assert (rb["name"], rb["nvml_uuids"], rb["peers"]) == (f"{host}:{pb}", [], [f"localhost:{pa}"])
    (la,), (lb,) = ra["peer_lines"], rb["peer_lines"]
    assert (la["peer"], la["answered"], la["name"], la["nvml_uuids"]) == (f"127.0.0.1:{pb}", True, f"{host}:{pb}", [])
    assert (lb["answered"], lb["name"], lb["nvml_uuids"], lb["cuda_uuids"]) == (True, f"{host}:{pa}", gpus, [])
    assert la["attempts"] >= 2  # a found no listener at first and tried again
    assert (ra["acknowledged_by"], rb["acknowledged_by"]) == ([f"{host}:{pb}"], [f"{host}:{pa}"])
    # b held for a while before a read its line (it enumerated first): a's overlap is at least that
    # much less the retry; b read a's line at once and a had held since before b started
    assert 0 <= ra["overlap_ms"] <= la["held_ms"] + 1 and rb["overlap_ms"] >= 0
    assert lb["held_ms"] >= 400 and ra["waited_ms"] >= 300
    # the parser gives the checks the same facts
    parsed = parse_cuda_probe(json.dumps(db)).rendezvous
    assert parsed is not None and (parsed.met, parsed.reason, parsed.overlap_ms) == (True, None, rb["overlap_ms"])
    assert (parsed.lines[0].name, parsed.lines[0].uuids, parsed.acknowledged_by) == (f"{host}:{pa}", tuple(gpus),
                                                                                   (f"{host}:{pa}",))
    assert parse_cuda_probe(json.dumps({k: v for k, v in db.items() if k != "rendezvous"})).rendezvous is None


def test_a_peer_that_never_comes_ends_the_bounded_wait_with_met_false_and_the_reason(probe):
    (port, absent) = _free_ports(2)
    t0 = time.monotonic()
    doc, elapsed = _document(_start(probe, "--rendezvous", f"127.0.0.1:{absent},nosuchhost.invalid",
                                    "--rendezvous-port", str(port), "--rendezvous-wait", "2", env=clean_env()), t0)
    r = doc["rendezvous"]
    assert r["met"] is False and r["overlap_ms"] is None
    assert r["reason"] == (f"peer 127.0.0.1:{absent} did not answer within 2 s: Connection refused; peer "
                           "nosuchhost.invalid did not answer within 2 s: name resolution failed: "
                           + r["peer_lines"][1]["error"].split(": ", 1)[1])
    assert r["peer_lines"][1]["error"].startswith("name resolution failed: ")
    assert [p["answered"] for p in r["peer_lines"]] == [False, False] and r["acknowledged_by"] == []
    assert 2.0 <= elapsed < 2.0 + NO_GPU_BOUND_S and 1900 < r["waited_ms"] < 4000
    # the rendezvous decides no exit code: the probe's own findings do (no driver here: 3)
    assert doc["exit_code"] == (0 if DRIVER_PRESENT else 3)
    parsed = parse_cuda_probe(json.dumps(doc)).rendezvous
    assert parsed is not None and (parsed.met, parsed.overlap_ms, parsed.reason) == (False, None, r["reason"])
    assert [(p.answered, p.error) for p in parsed.lines] == [(False, "Connection refused"),
                                                             (False, r["peer_lines"][1]["error"])]


def test_a_peer_that_answers_but_never_reads_our_line_is_not_a_meeting(probe):
    """A listener that prints a rendezvous line and closes (it never acknowledges): the probe read
    its line but cannot know the peer saw it hold, so they did not meet."""
    port, fake = _free_ports(2)
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", fake))
    server.listen(8)
    server.settimeout(10)
    t0 = time.monotonic()
    proc = _start(probe, "--rendezvous", f"127.0.0.1:{fake}", "--rendezvous-port", str(port),
                  "--rendezvous-wait", "2", env=clean_env())
    conn, _ = server.accept()
    conn.sendall(b"gpuconf-rendezvous/1 name=liar:1 held_ms=50 cuda=GPU-x nvml=-\n")
    try:
        doc, _ = _document(proc, t0)
    finally:
        conn.close()
        server.close()
    r = doc["rendezvous"]
    assert (r["met"], r["overlap_ms"]) == (False, None)
    assert r["reason"] == "1 of 1 peer(s) did not read this probe's line within 2 s"
    (line,) = r["peer_lines"]
    assert (line["answered"], line["name"], line["cuda_uuids"], line["nvml_uuids"]) == (True, "liar:1", ["GPU-x"], [])


# ------------------------------------------------------------------------------------------------
# On a machine with a GPU (not this project's CI)


@needs_driver
def test_with_a_gpu_every_device_runs_and_verifies_both_kernels(probe):
    r = run_probe(probe, "--timeout", "60")
    doc = r.doc()
    assert r.code == 0, doc["exit_reason"]
    assert doc["devices"] and doc["device_count"]["value"] == len(doc["devices"])
    for dev in doc["devices"]:
        assert dev["vector_add"]["ok"] and dev["vector_add"]["verified"] and dev["vector_add"]["mismatches"] == 0
        assert dev["ptx_jit"]["ok"] and dev["ptx_jit"]["ptx_target"] == "compute_75"
    assert doc["libcuda"]["available"] is True


@needs_driver
def test_with_a_gpu_copies_are_timed_and_the_link_is_read_under_load(probe):
    doc = run_probe(probe, "--timeout", "60", "--copy-mib", "64").doc()
    nvml = {g["uuid"]: g for g in doc["nvml"].get("gpus", [])}
    for dev in doc["devices"]:
        bw = dev["host_device_bw"]
        if dev["mig"]:
            assert bw["available"] is False and "MIG instance" in bw["reason"]
            continue
        assert bw["ok"] and bw["bytes"] == 64 << 20 and bw["iterations"] == 8, bw
        assert bw["h2d_gbps"] > 0.5 and bw["d2h_gbps"] > 0.5  # even a Gen1 x1 link moves more
        pcie = nvml[dev["uuid"]]["pcie"] if dev["uuid"] in nvml else None
        if pcie is not None and isinstance(pcie.get("link_gen_current"), int):
            assert pcie["sampled_under_load"] is True and pcie["load_window_ms"] > 0
    skipped = run_probe(probe, "--timeout", "60", "--copy-mib", "0").doc()
    assert all(d["host_device_bw"] == {"available": False, "reason": "not measured: --copy-mib 0"}
               for d in skipped["devices"])


# ------------------------------------------------------------------------------------------------
# --measure-alloc (an MPS client's memory limit) and the MPS client's environment


def test_measure_alloc_without_a_gpu_adds_nothing_and_mps_settings_are_reported_when_set(probe):
    plain = run_probe(probe).doc()
    env = clean_env(CUDA_MPS_PIPE_DIRECTORY="/mps/nvidia.com/gpu/pipe", CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="25")
    r = run_probe(probe, "--measure-alloc", env=env)
    doc = r.doc()
    assert r.code == plain["exit_code"] and doc["devices"] == plain["devices"]
    assert doc["env"]["CUDA_MPS_PIPE_DIRECTORY"] == "/mps/nvidia.com/gpu/pipe"
    assert doc["env"]["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"
    assert not any(k.startswith("CUDA_MPS_") for k in plain["env"])
    assert run_probe(probe, env=clean_env(GPUCONF_PROBE_MEASURE_ALLOC="1")).doc()["devices"] == plain["devices"]


@pytest.mark.parametrize(("args", "env"), [(["--measure-alloc=yes"], {}), ([], {"GPUCONF_PROBE_MEASURE_ALLOC": "yes"})])
def test_a_bad_measure_alloc_switch_is_a_usage_error(probe, args, env):
    r = run_probe(probe, *args, env=clean_env(**env))
    assert (r.code, r.stdout, len(r.stderr.splitlines())) == (2, "", 1)


@needs_driver
def test_with_a_gpu_measure_alloc_brackets_the_largest_allocation(probe):
    r = run_probe(probe, "--timeout", "60", "--measure-alloc")
    doc = r.doc()
    assert r.code == 0, doc["exit_reason"]
    for dev in doc["devices"]:
        la = dev["largest_alloc"]
        total = dev["total_memory_bytes"]
        assert la["ok"] and la["result"]["code"] == 0 and 1 <= la["steps"] <= 12
        assert la["resolution_bytes"] == max(2 << 20, total // 128)
        assert 0 < la["largest_ok_bytes"] <= total and la["mem_info"]["total_bytes"] == total
        if la["smallest_failed_bytes"] is not None:
            assert la["smallest_failed_bytes"] - la["largest_ok_bytes"] <= la["resolution_bytes"]
            assert la["last_failure"]["name"] == "cudaErrorMemoryAllocation"


@needs_driver
def test_with_a_gpu_measure_alloc_counts_the_sms_a_spinning_kernel_reaches(probe):
    plain = run_probe(probe, "--timeout", "60").doc()
    assert all("sm_occupancy" not in dev for dev in plain["devices"])
    r = run_probe(probe, "--timeout", "60", "--measure-alloc")
    doc = r.doc()
    assert r.code == 0, doc["exit_reason"]
    for dev in doc["devices"]:
        so = dev["sm_occupancy"]
        sms = dev["multiprocessors"]
        assert so["ok"] and so["result"]["code"] == 0 and so["unrecorded_blocks"] == 0, so
        assert (so["blocks"], so["threads_per_block"], so["multiprocessors"]) == (32 * sms, 32, sms)
        assert 0 < so["distinct_sms"] <= so["max_smid"] + 1 and so["kernel_ms"] > 0
        if "CUDA_MPS_PIPE_DIRECTORY" not in doc["env"]:
            assert so["distinct_sms"] == sms, so  # no MPS limit: the blocks reach every SM
