"""The nccl-probe (probes/nccl-probe): built with its build.sh, run on this machine.

Without a GPU the probe must still print one valid document with the honest exit code, quickly;
two processes on loopback must show how far the unique-id bootstrap got. A fake libcuda
(tests/fixtures/fake_libcuda/fake_libcuda.c, shared with the cuda-probe tests) stands in for a
driver that reports no device or hangs in cuInit, so exit 4 and the hard watchdog run here too.
Skipped where nvcc or nccl.h (NCCL_HOME, the nvidia-nccl-cu13 wheel, /usr/include) is missing.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from probe_build import build_probe, clean_env

ROOT = Path(__file__).resolve().parent.parent
PROBE_DIR = ROOT / "probes" / "nccl-probe"
BUILD_SH = PROBE_DIR / "build.sh"
FAKE_LIBCUDA = Path(__file__).resolve().parent / "fixtures" / "fake_libcuda" / "fake_libcuda.c"
SCHEMA = json.loads((ROOT / "gpuconf" / "probe_schemas" / "nccl-probe.v1.json").read_text(encoding="utf-8"))
VALIDATOR = Draft202012Validator(SCHEMA)

#: Without a GPU the probe answers in under 10 s.
NO_GPU_BOUND_S = 10.0


def _nvcc() -> str | None:
    return os.environ.get("NVCC") or shutil.which("nvcc") or next(
        (p for p in ("/usr/local/bin/nvcc", "/usr/local/cuda/bin/nvcc") if os.access(p, os.X_OK)), None)


def _nccl_header() -> Path | None:
    """Where build.sh will find nccl.h: NCCL_HOME, the wheel for this interpreter, /usr/include."""
    if os.environ.get("NCCL_HOME"):
        h = Path(os.environ["NCCL_HOME"]) / "include" / "nccl.h"
        return h if h.is_file() else None
    try:
        spec = importlib.util.find_spec("nvidia.nccl")  # a namespace package: no __file__, use its path
    except ImportError:
        spec = None
    for base in (spec.submodule_search_locations or []) if spec else []:
        if (Path(base) / "include" / "nccl.h").is_file():
            return Path(base) / "include" / "nccl.h"
    h = Path("/usr/include/nccl.h")
    return h if h.is_file() else None


NVCC = _nvcc()
NCCL_H = _nccl_header()
if NVCC is None:
    pytest.skip("nvcc (the CUDA toolkit) is not available: the nccl-probe cannot be built", allow_module_level=True)
if NCCL_H is None:
    pytest.skip("nccl.h not found (NCCL_HOME, pip install nvidia-nccl-cu13, or libnccl-dev): the nccl-probe cannot "
                "be built", allow_module_level=True)


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
    def __init__(self, code: int, stdout: bytes, stderr: bytes, elapsed: float) -> None:
        self.code = code
        self.stdout = stdout.decode("utf-8")
        self.stderr = stderr.decode("utf-8", "replace")
        self.elapsed = elapsed

    def doc(self) -> dict[str, Any]:
        """The one JSON document on stdout, validated against the schema."""
        text = self.stdout.strip()
        doc, end = json.JSONDecoder().raw_decode(text)
        assert text[end:].strip() == "", f"more than one document on stdout: {text[end:][:80]!r}"
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(doc)]
        assert errors == [], errors
        assert doc["exit_code"] == self.code
        assert isinstance(doc, dict)
        return doc


def run_probe(binary: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60) -> Run:
    t0 = time.monotonic()
    proc = subprocess.run([str(binary), *args], capture_output=True, env=clean_env() if env is None else env,
                          timeout=timeout, check=False)
    return Run(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t0)


def run_ranks(binary: Path, argvs: list[list[str]], timeout: float = 60, stagger_s: float = 0.2,
              env: dict[str, str] | None = None) -> list[Run]:
    """Start one process per argv (rank 0 first), wait for all."""
    procs = []
    t0 = time.monotonic()
    for k, argv in enumerate(argvs):
        if k:
            time.sleep(stagger_s)
        procs.append(subprocess.Popen([str(binary), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      env=clean_env() if env is None else env))
    runs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(1.0, timeout - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        runs.append(Run(p.returncode, out, err, time.monotonic() - t0))
    return runs


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def multi(rank: int, world: int, port: int, *extra: str, bootstrap_timeout: str = "5") -> list[str]:
    return ["--rank", str(rank), "--world-size", str(world), "--id-addr", f"127.0.0.1:{port}",
            "--bootstrap-timeout", bootstrap_timeout, *extra]


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The probe, built once by build.sh (one SASS target, to keep the suite fast)."""
    out = tmp_path_factory.mktemp("nccl-probe") / "bin" / "nccl-probe"
    env = clean_env(CUDA_ARCHS="90", PYTHON=sys.executable, NVCC=str(NVCC))
    if os.environ.get("NCCL_HOME"):
        env["NCCL_HOME"] = os.environ["NCCL_HOME"]
    return out, build_probe(BUILD_SH, out, env)


@pytest.fixture(scope="module")
def probe(build: tuple[Path, subprocess.CompletedProcess[str]]) -> Path:
    return build[0]


@pytest.fixture(scope="module")
def fake_libcuda(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the fake libcuda.so.1."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None or not FAKE_LIBCUDA.is_file():
        pytest.skip("no C compiler or no tests/fixtures/fake_libcuda/fake_libcuda.c")
    d = tmp_path_factory.mktemp("fake-libcuda")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(d / "libcuda.so.580.65.06"), str(FAKE_LIBCUDA)], check=True,
                   capture_output=True)
    (d / "libcuda.so.1").symlink_to("libcuda.so.580.65.06")
    return d


# ---------------------------------------------------------------------------------------------
# build and command line
# ---------------------------------------------------------------------------------------------
def test_build_is_warning_free_and_uses_the_nccl_it_found(build: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, proc = build
    assert "warning" not in (proc.stdout + proc.stderr).lower(), proc.stderr
    assert "build.sh: NCCL from" in proc.stderr
    ldd = subprocess.run(["ldd", str(out)], capture_output=True, text=True, check=False).stdout
    lib = next(line for line in ldd.splitlines() if "libnccl.so" in line)
    assert "not found" not in lib, "the rpath must point at the NCCL lib directory"


@pytest.mark.parametrize("args", [
    ["--bogus"],
    ["--rank", "0"],
    ["--rank", "2", "--world-size", "2", "--id-addr", "127.0.0.1:29500"],
    ["--rank", "0", "--world-size", "2", "--id-addr", "nohostport"],
    ["--min-bytes", "6"],
    ["--max-bytes", "4", "--min-bytes", "8"],
    ["--step-factor", "1"],
    ["--iters", "0"],
    ["--timeout", "-1"],
    ["--bootstrap-only"],
    ["--iters"],
])
def test_a_bad_command_line_exits_2_with_one_line_on_stderr_and_nothing_on_stdout(probe: Path,
                                                                                   args: list[str]) -> None:
    r = run_probe(probe, *args)
    assert r.code == 2
    assert r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("nccl-probe: "), r.stderr


def test_help_prints_usage_and_exits_0(probe: Path) -> None:
    r = run_probe(probe, "--help")
    assert r.code == 0 and r.stdout.startswith("usage: nccl-probe")


def test_busbw_arithmetic(probe: Path) -> None:
    r = run_probe(probe, "--self-test-busbw")
    assert r.code == 0
    cases = json.loads(r.stdout)["cases"]
    assert len(cases) >= 5
    for c in cases:
        n, nbytes, t = c["nranks"], c["bytes"], c["time_us"]
        alg = nbytes / (t * 1e-6) / 1e9
        assert c["algbw_gbps"] == pytest.approx(alg, rel=1e-9)
        assert c["busbw_factor"] == pytest.approx(2 * (n - 1) / n, rel=1e-12)
        assert c["busbw_gbps"] == pytest.approx(alg * 2 * (n - 1) / n, rel=1e-9)
    by_n = {(c["nranks"], c["bytes"]): c for c in cases}
    assert by_n[(1, 1024)]["busbw_gbps"] == 0  # one rank moves nothing over the bus
    assert by_n[(8, 4 * 2**30)]["busbw_factor"] == 1.75
    assert by_n[(8, 4 * 2**30)]["algbw_gbps"] == pytest.approx(274.877906944)  # 4 GiB in 15.625 ms


def test_the_schema_is_valid_draft_2020_12_and_lists_the_exit_codes() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["properties"]["schema"]["const"] == "gpuconf.nccl-probe/v1"
    assert SCHEMA["properties"]["exit_code"]["enum"] == [0, 3, 4, 5, 6, 7, 8]
    for phrase in ("0 ok", "2 usage", "3 a CUDA or NCCL call failed", "4 no GPU", "5 wrong all-reduce",
                   "6 a timeout", "7 bootstrap failed", "8 internal"):
        assert phrase in SCHEMA["description"]
    readme = (PROBE_DIR / "README.md").read_text(encoding="utf-8")
    for code in range(2, 9):
        assert f"\n| {code} |" in readme


# ---------------------------------------------------------------------------------------------
# single process, no GPU
# ---------------------------------------------------------------------------------------------
@needs_no_driver
def test_without_a_driver_a_single_process_run_exits_3_with_the_real_cuda_error(probe: Path, tmp_path: Path) -> None:
    r = run_probe(probe, env=clean_env(TMPDIR=str(tmp_path)), timeout=NO_GPU_BOUND_S + 5)
    assert r.elapsed < NO_GPU_BOUND_S
    doc = r.doc()
    assert r.code == 3 and doc["exit_code"] == 3
    assert doc["device_count"]["value"] == 0
    result = doc["device_count"]["result"]
    assert (result["code"], result["name"]) == (35, "cudaErrorInsufficientDriver")
    assert doc["failure"] == {"stage": "cudaGetDeviceCount", "api": "cuda", "result": result}
    assert "cudaErrorInsufficientDriver (35)" in doc["exit_reason"]
    assert doc["driver"] == {"value": 0, "version": None}
    assert doc["nccl"]["version"] == doc["probe"]["built_with_nccl"]
    assert doc["nccl"]["library"]["available"] is True
    assert doc["bootstrap"]["status"] == "not-run" and doc["bootstrap"]["role"] == "local"
    for key in ("comm_init", "memory", "sweep", "summary"):
        assert doc[key]["available"] is False
    assert doc["hung"] is False and doc["nranks"] is None and doc["local_gpus"] == []
    assert doc["nccl_debug"]["source"] == "probe" and doc["nccl_debug"]["captured"] is False
    assert list(tmp_path.iterdir()) == [], "the private NCCL debug directory must be removed"


def test_a_driver_without_devices_exits_4(probe: Path, fake_libcuda: Path) -> None:
    r = run_probe(probe, env=clean_env(LD_LIBRARY_PATH=str(fake_libcuda), FAKE_LIBCUDA_MODE="no_device"),
                  timeout=NO_GPU_BOUND_S)
    doc = r.doc()
    assert r.code == 4
    assert doc["device_count"]["result"]["name"] == "cudaErrorNoDevice"
    assert doc["driver"]["value"] == 13000


def test_a_driver_that_hangs_in_cuinit_is_caught_by_the_hard_watchdog(probe: Path, fake_libcuda: Path) -> None:
    env = clean_env(LD_LIBRARY_PATH=str(fake_libcuda), FAKE_LIBCUDA_MODE="hang", FAKE_LIBCUDA_SLEEP_S="60")
    r = run_probe(probe, "--timeout", "2", env=env, timeout=30)
    doc = r.doc()
    assert r.code == 6
    assert 2.5 < r.elapsed < 10  # 2 s step + 1 s grace
    assert doc["hung"] is True
    assert doc["watchdog"]["fired"] is True and doc["watchdog"]["hard"] is True
    assert doc["watchdog"]["step"] == "cudaDriverGetVersion"
    assert "did not return" in doc["exit_reason"]


# ---------------------------------------------------------------------------------------------
# multi-process bootstrap on loopback
# ---------------------------------------------------------------------------------------------
@needs_no_driver
def test_two_gpu_less_processes_complete_the_id_exchange_and_both_exit_3(probe: Path) -> None:
    """ncclGetUniqueId works without a GPU, so the TCP exchange runs to its end: rank 0 gets an
    id, rank 1 reports that CUDA failed (-1 GPUs), rank 0 refuses with no-usable-gpu (first
    offending rank: itself) and does not send the id; both exit 3 for their own CUDA failure."""
    port = free_port()
    r0, r1 = run_ranks(probe, [multi(0, 2, port, bootstrap_timeout="10"), multi(1, 2, port, bootstrap_timeout="10")],
                       timeout=30)
    d0, d1 = r0.doc(), r1.doc()
    assert (r0.code, r1.code) == (3, 3)
    assert r0.elapsed < NO_GPU_BOUND_S and r1.elapsed < NO_GPU_BOUND_S
    for d in (d0, d1):
        assert d["device_count"]["result"]["code"] == 35
        assert d["bootstrap"]["status"] == "no-usable-gpu"
        assert d["bootstrap"]["local_gpus_sent"] == -1
        assert d["bootstrap"]["id_fingerprint"] is None
        assert "bootstrap: " in d["exit_reason"]
    b0, b1 = d0["bootstrap"], d1["bootstrap"]
    assert b0["role"] == "server" and b1["role"] == "client"
    assert b0["unique_id"]["obtained"] is True and b0["unique_id"]["result"]["name"] == "ncclSuccess"
    assert b0["listen"]["ok"] is True and b0["listen"]["port"] == port
    assert b0["peers_reported"] == 1
    assert b0["peers"] == [{"rank": 1, "local_gpus": -1, "address": b0["peers"][0]["address"], "accepted": True}]
    assert b0["decision"]["status"] == "no-usable-gpu" and b0["decision"]["detail_rank"] == 0
    assert b0["replies_sent"] == 1 and b0["id_served"] is False
    assert b1["connect"]["connected"] is True and b1["connect"]["last_error"] is None
    assert b1["reply"] == {"status": "no-usable-gpu", "rank0_local_gpus": -1, "detail_rank": 0}
    assert b1["id_received"] is False
    assert b0["args_hash"] == b1["args_hash"]
    # rank 0 ran NCCL (ncclGetUniqueId): its debug output was captured and names the bootstrap interface
    dbg = d0["nccl_debug"]
    assert dbg["source"] == "probe" and dbg["captured"] is True
    assert any("Bootstrap" in line for line in dbg["excerpt"])


def test_bootstrap_only_hands_the_same_id_to_both_processes(probe: Path) -> None:
    port = free_port()
    r0, r1 = run_ranks(probe, [multi(0, 2, port, "--bootstrap-only"), multi(1, 2, port, "--bootstrap-only")])
    d0, d1 = r0.doc(), r1.doc()
    assert (r0.code, r1.code) == (0, 0)
    b0, b1 = d0["bootstrap"], d1["bootstrap"]
    assert b0["status"] == b1["status"] == "ok"
    assert b0["id_served"] is True and b1["id_received"] is True
    assert b0["id_fingerprint"] == b1["id_fingerprint"] == b0["unique_id"]["fingerprint"]
    assert b0["agreed_local_gpus"] == b1["agreed_local_gpus"] == 0
    for d in (d0, d1):
        assert d["device_count"]["available"] is False and d["driver"]["available"] is False
        assert d["comm_init"]["available"] is False


def test_a_peer_that_cannot_reach_rank_0_times_out_with_6(probe: Path) -> None:
    port = free_port()
    r = run_probe(probe, *multi(1, 2, port, "--bootstrap-only", bootstrap_timeout="1.5"), timeout=20)
    doc = r.doc()
    assert r.code == 6 and 1.4 < r.elapsed < 6
    b = doc["bootstrap"]
    assert b["status"] == "timeout" and b["reply"] is None and b["id_received"] is False
    assert b["connect"]["connected"] is False and b["connect"]["attempts"] >= 2
    assert "Connection refused" in b["connect"]["last_error"]


def test_rank_0_without_its_peers_times_out_with_6(probe: Path) -> None:
    port = free_port()
    r = run_probe(probe, *multi(0, 3, port, "--bootstrap-only", bootstrap_timeout="1.5"), timeout=20)
    doc = r.doc()
    assert r.code == 6 and 1.4 < r.elapsed < 6
    b = doc["bootstrap"]
    assert b["status"] == "peers-missing" and b["peers_reported"] == 0
    assert b["decision"]["detail_rank"] == 1 and "1,2" in b["decision"]["reason"]


def test_peers_that_disagree_on_the_sweep_fail_the_bootstrap_with_7(probe: Path) -> None:
    port = free_port()
    r0, r1 = run_ranks(probe, [multi(0, 2, port, "--bootstrap-only"),
                               multi(1, 2, port, "--bootstrap-only", "--iters", "7")])
    d0, d1 = r0.doc(), r1.doc()
    assert (r0.code, r1.code) == (7, 7)
    assert d0["bootstrap"]["status"] == "bad-request" and "argument hash" in d0["bootstrap"]["reason"]
    assert d1["bootstrap"]["reply"]["status"] == "bad-request" and d1["bootstrap"]["reply"]["detail_rank"] == 1


def test_rank_0_that_cannot_listen_exits_7(probe: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = run_probe(probe, *multi(0, 2, port, "--bootstrap-only"), timeout=20)
    doc = r.doc()
    assert r.code == 7 and r.elapsed < 5
    assert doc["bootstrap"]["listen"]["ok"] is False and "in use" in doc["bootstrap"]["listen"]["error"]


def test_a_stranger_on_the_id_port_is_ignored(probe: Path) -> None:
    port = free_port()
    p0 = subprocess.Popen([str(probe), *multi(0, 2, port, "--bootstrap-only")], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=clean_env())
    deadline = time.monotonic() + 5
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"GET / HTTP/1.0\r\n\r\n" + b"x" * 32)
            break
        except OSError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    r1 = run_probe(probe, *multi(1, 2, port, "--bootstrap-only"), timeout=20)
    out, err = p0.communicate(timeout=20)
    r0 = Run(p0.returncode, out, err, 0)
    d0 = r0.doc()
    assert (r0.code, r1.code) == (0, 0)
    ignored = d0["bootstrap"]["ignored_connections"]
    assert len(ignored) == 1 and "bad magic" in ignored[0]["reason"]


def test_a_user_nccl_debug_is_respected_and_stdout_stays_one_document(probe: Path) -> None:
    """NCCL_DEBUG without NCCL_DEBUG_FILE makes NCCL log to stdout; the probe keeps stdout for JSON."""
    port = free_port()
    env = clean_env(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,BOOTSTRAP")
    r = run_probe(probe, *multi(0, 1, port, "--bootstrap-only"), env=env)
    doc = r.doc()
    assert r.code == 0
    assert doc["env"]["NCCL_DEBUG"] == "INFO"
    dbg = doc["nccl_debug"]
    assert dbg["source"] == "user" and dbg["captured"] is False
    assert dbg["settings"]["NCCL_DEBUG_SUBSYS"] == "INIT,BOOTSTRAP"
    assert "NCCL INFO" in r.stderr


# ---------------------------------------------------------------------------------------------
# with a GPU (device machines only)
# ---------------------------------------------------------------------------------------------
@needs_driver
def test_with_gpus_a_short_sweep_is_correct_and_reports_bandwidth(probe: Path) -> None:
    r = run_probe(probe, "--max-bytes", "128M", "--iters", "5", "--warmup", "2", "--timeout", "120", timeout=600)
    doc = r.doc()
    assert r.code == 0, doc["exit_reason"]
    s = doc["summary"]
    n = doc["nranks"]
    assert s["all_correct"] is True and s["nranks"] == n == len(doc["local_gpus"])
    assert s["busbw_factor"] == pytest.approx(2 * (n - 1) / n)
    sizes = doc["sweep"]["sizes"]
    assert sizes[0]["bytes"] == 8 and sizes[-1]["bytes"] == 128 * 2**20
    assert s["large_message_sizes"] == 2 and s["large_message_avg_busbw_gbps"] is not None
    for e in sizes:
        assert e["mismatches"] == 0 and e["checked_elements"] == e["count"] * len(doc["local_gpus"])
        assert e["busbw_gbps"] == pytest.approx(e["algbw_gbps"] * 2 * (n - 1) / n, rel=1e-6)
    assert doc["nccl_debug"]["captured"] is True and doc["nccl_debug"]["nccl_version"]
