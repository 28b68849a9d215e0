// gpuconf cuda-probe: what a container really gets from the GPU stack, as one JSON document.
//
// Prints exactly one document of schema "gpuconf.cuda-probe/v1"
// (gpuconf/probe_schemas/cuda-probe.v1.json) on stdout and nothing else there; diagnostics go to
// stderr, and only with --verbose. Exit codes (also in the document's exit_code/exit_reason):
//   0 ok; 2 usage (no document); 3 CUDA init failed; 4 no CUDA device; 5 a device failed its
//   vector_add; 6 watchdog: a CUDA/NVML call did not return in time; 7 only ptx_jit failed;
//   8 internal probe error.
//
// Depends on nothing but the CUDA runtime (linked statically), libdl and pthreads. NVML is
// dlopen()ed, and its few types are declared below, so the probe builds without nvml.h.
//
// Threading: every CUDA/NVML call runs through guarded(), which registers the call (name, start,
// what to mark if it hangs) under g.mu and releases the mutex while the call runs. The watchdog
// thread wakes every 20 ms; when the registered call has run past the timeout it marks it
// timed_out in the document, prints the document built so far and _exit(6)s. All document updates
// happen under g.mu, and the main thread never holds g.mu inside a CUDA or NVML call.

#include <cuda_runtime.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "jit_kernel.h"
#include "json.h"

#ifdef GPUCONF_HAVE_BUILD_INFO
#include "gpuconf_build_info.h"  // written by build.sh: GPUCONF_ARCHS, GPUCONF_PTX_TARGET
#endif
#ifndef GPUCONF_ARCHS
#define GPUCONF_ARCHS "unknown (built without build.sh)"
#endif
#ifndef GPUCONF_PTX_TARGET
#define GPUCONF_PTX_TARGET "compute_75"
#endif

using gpuconf::Json;

namespace {

constexpr const char* kProbeVersion = "0.1.0";
constexpr const char* kSchema = "gpuconf.cuda-probe/v1";
constexpr double kDefaultTimeoutS = 30.0;
constexpr unsigned long long kDefaultElements = 1ull << 20;
constexpr unsigned long long kMaxElements = 1ull << 28;
constexpr int kJitElements = 4096;
constexpr unsigned long long kDefaultCopyMib = 256;
constexpr unsigned long long kMaxCopyMib = 4096;
constexpr int kCopyIterations = 8;
constexpr int kJitSeed = 7;

enum ExitCode {
  kExitOk = 0,
  kExitUsage = 2,
  kExitInit = 3,
  kExitNoDevice = 4,
  kExitVectorAdd = 5,
  kExitWatchdog = 6,
  kExitPtxJit = 7,
  kExitInternal = 8,
};

using Clock = std::chrono::steady_clock;
using TimeoutFn = std::function<void(double elapsed_ms)>;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// ---------------------------------------------------------------------------------------------
// Shared state (document + watchdog registration), all guarded by mu.

struct State {
  std::mutex mu;
  std::condition_variable cv;
  Json doc = Json::object();
  Clock::time_point start = Clock::now();
  double timeout_s = kDefaultTimeoutS;
  bool verbose = false;
  bool finished = false;
  bool inflight = false;
  std::string inflight_call;
  Clock::time_point inflight_start;
  TimeoutFn on_timeout;
};

State g;

void vlog(const char* fmt, const std::string& arg) {
  if (!g.verbose) return;
  std::fprintf(stderr, "[cuda-probe %8.1f ms] ", ms_between(g.start, Clock::now()));
  std::fprintf(stderr, fmt, arg.c_str());
  std::fputc('\n', stderr);
}

// Runs fn with `f` under the document lock (short updates only; never a CUDA/NVML call).
template <class F>
void locked(F&& f) {
  std::lock_guard<std::mutex> lk(g.mu);
  f();
}

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    off += static_cast<size_t>(n);
  }
}

// Caller holds g.mu.
void finish_document_locked(int code, const std::string& reason) {
  g.doc.set("duration_ms", ms_between(g.start, Clock::now()));
  g.doc.set("exit_code", code);
  g.doc.set("exit_reason", reason.empty() ? std::string("(no reason recorded)") : reason);
}

std::string format_seconds(double s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

void watchdog_main() {
  std::unique_lock<std::mutex> lk(g.mu);
  while (!g.finished) {
    g.cv.wait_for(lk, std::chrono::milliseconds(20));
    if (g.finished || !g.inflight) continue;
    const double elapsed = ms_between(g.inflight_start, Clock::now());
    if (elapsed <= g.timeout_s * 1000.0) continue;
    if (g.on_timeout) g.on_timeout(elapsed);
    finish_document_locked(kExitWatchdog, "watchdog: " + g.inflight_call + " did not return within " +
                                              format_seconds(g.timeout_s) + " s");
    write_all(1, g.doc.dump() + "\n");
    _exit(kExitWatchdog);  // the hung call still owns the main thread: no unwinding, no atexit
  }
}

// Runs one CUDA/NVML call under the watchdog. `on_timeout` runs on the watchdog thread, under
// g.mu, if the call does not return in time; it must only touch the document.
template <class F>
auto guarded(const std::string& call, TimeoutFn on_timeout, F&& fn, double* ms = nullptr) -> decltype(fn()) {
  Clock::time_point t0;
  {
    std::lock_guard<std::mutex> lk(g.mu);
    g.inflight = true;
    g.inflight_call = call;
    g.on_timeout = std::move(on_timeout);
    t0 = g.inflight_start = Clock::now();
  }
  vlog("call %s", call);
  auto r = fn();
  const Clock::time_point t1 = Clock::now();
  {
    std::lock_guard<std::mutex> lk(g.mu);
    g.inflight = false;
    g.on_timeout = nullptr;
  }
  if (ms) *ms = ms_between(t0, t1);
  return r;
}

// ---------------------------------------------------------------------------------------------
// Small helpers

std::string version_string(int v) {  // 13000 -> "13.0"
  char buf[32];
  std::snprintf(buf, sizeof buf, "%d.%d", v / 1000, (v % 1000) / 10);
  return buf;
}

Json cuda_result(const std::string& call, cudaError_t err, double ms) {
  Json r = Json::object();
  r.set("call", call);
  r.set("code", static_cast<int>(err));
  const char* name = cudaGetErrorName(err);
  const char* msg = cudaGetErrorString(err);
  r.set("name", name ? name : "unknown");
  r.set("message", msg ? msg : "unknown");
  r.set("ms", ms);
  r.set("timed_out", false);
  return r;
}

Json timeout_result(const std::string& call, double elapsed_ms) {
  Json r = Json::object();
  r.set("call", call);
  r.set("code", -1);
  r.set("name", "gpuconfWatchdogTimeout");
  r.set("message", call + " did not return within " + format_seconds(g.timeout_s) + " s");
  r.set("ms", elapsed_ms);
  r.set("timed_out", true);
  return r;
}

Json not_run_result(const std::string& call, const std::string& why) {
  Json r = Json::object();
  r.set("call", call);
  r.set("code", -1);
  r.set("name", "gpuconfNotRun");
  r.set("message", why);
  return r;
}

std::string describe(cudaError_t e) {
  const char* name = cudaGetErrorName(e);
  const char* msg = cudaGetErrorString(e);
  return std::to_string(static_cast<int>(e)) + " " + (name ? name : "?") + ": " + (msg ? msg : "?");
}

// Runs a CUDA call under the watchdog; when it hangs, `slot` (an object inside the document) gets
// result_key = the timeout result and, if given, ok = false.
template <class F>
cudaError_t cuda_call(const std::string& call, Json* slot, const char* result_key, F&& fn, double* ms = nullptr) {
  TimeoutFn on_timeout = [slot, result_key, call](double el) {
    if (!slot) return;
    slot->set(result_key, timeout_result(call, el));
    if (slot->find("ok")) slot->set("ok", false);
  };
  return guarded(call, std::move(on_timeout), std::forward<F>(fn), ms);
}

std::string utc_now_rfc3339() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const long long ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[80];
  std::snprintf(out, sizeof out, "%s.%03lldZ", buf, ms);
  return out;
}

std::string hostname() {
  char buf[HOST_NAME_MAX + 1] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

bool path_exists(const char* p) {
  struct stat st;
  return ::stat(p, &st) == 0;
}

std::string real_path(const std::string& p) {
  char buf[PATH_MAX];
  if (::realpath(p.c_str(), buf)) return buf;
  return p;
}

std::string format_uuid(const unsigned char* b, const char* prefix) {
  char buf[64];
  std::snprintf(buf, sizeof buf,
                "%s-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", prefix, b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return buf;
}

// ---------------------------------------------------------------------------------------------
// Facts that need no GPU

Json read_env(const char* original_module_loading) {
  Json env = Json::object();
  static const char* kRequired[] = {"NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
                                    "NVIDIA_REQUIRE_CUDA", "NVIDIA_DISABLE_REQUIRE"};
  for (const char* name : kRequired) {
    const char* v = std::getenv(name);
    env.set(name, v ? Json(v) : Json(nullptr));
  }
  // Optional, only when set: the image's CUDA_VERSION, every other NVIDIA_REQUIRE_* term (they are
  // ANDed with NVIDIA_REQUIRE_CUDA), what decides which libcuda loads, and the module-loading mode.
  std::vector<std::string> extra;
  for (char** e = ::environ; e && *e; ++e) {
    const std::string kv(*e);
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = kv.substr(0, eq);
    if (name.rfind("NVIDIA_REQUIRE_", 0) == 0 && name != "NVIDIA_REQUIRE_CUDA") extra.push_back(name);
  }
  std::sort(extra.begin(), extra.end());
  extra.insert(extra.begin(), "CUDA_VERSION");
  extra.push_back("LD_LIBRARY_PATH");
  // An MPS client's settings: the pipe to the control daemon the device plugin points the
  // container at, and the client-side overrides of the daemon's per-client limits.
  extra.push_back("CUDA_MPS_PIPE_DIRECTORY");
  extra.push_back("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
  extra.push_back("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT");
  for (const auto& name : extra) {
    const char* v = std::getenv(name.c_str());
    if (v) env.set(name, v);
  }
  if (original_module_loading) env.set("CUDA_MODULE_LOADING", original_module_loading);
  return env;
}

Json read_device_nodes() {
  Json nodes = Json::object();
  nodes.set("/dev/nvidiactl", path_exists("/dev/nvidiactl"));
  nodes.set("/dev/nvidia-uvm", path_exists("/dev/nvidia-uvm"));
  std::vector<std::pair<unsigned long, std::string>> gpus;
  if (DIR* d = ::opendir("/dev")) {
    while (dirent* e = ::readdir(d)) {
      const char* n = e->d_name;
      if (std::strncmp(n, "nvidia", 6) != 0) continue;
      const char* digits = n + 6;
      if (*digits == '\0' || std::strlen(digits) > 9) continue;
      bool all_digits = true;
      for (const char* p = digits; *p; ++p) all_digits = all_digits && (*p >= '0' && *p <= '9');
      if (!all_digits) continue;
      gpus.emplace_back(std::strtoul(digits, nullptr, 10), std::string("/dev/") + n);
    }
    ::closedir(d);
  }
  std::sort(gpus.begin(), gpus.end());
  Json list = Json::array();
  for (const auto& gpu : gpus) list.push(gpu.second);
  nodes.set("gpus", std::move(list));
  return nodes;
}

// "libcuda.so.570.133.20" -> "570.133.20"; "libcuda.so.1" or "libcuda.so" -> "" (no version).
std::string libcuda_version_from_name(const std::string& base) {
  const std::string prefix = "libcuda.so.";
  if (base.rfind(prefix, 0) != 0) return "";
  const std::string v = base.substr(prefix.size());
  int dots = 0;
  bool ok = !v.empty() && v.front() != '.' && v.back() != '.';
  for (char c : v) {
    if (c == '.') {
      ++dots;
    } else if (c < '0' || c > '9') {
      ok = false;
    }
  }
  return (ok && dots >= 1) ? v : "";
}

// The first mapping of a file named libcuda.so* in /proc/self/maps, or an empty path.
std::string mapped_libcuda(std::string* mapped_name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    const std::string deleted = " (deleted)";
    if (path.size() > deleted.size() && path.compare(path.size() - deleted.size(), deleted.size(), deleted) == 0)
      path.resize(path.size() - deleted.size());
    const std::string base = path.substr(path.rfind('/') + 1);
    if (base.rfind("libcuda.so", 0) != 0) continue;
    if (mapped_name) *mapped_name = base;
    return path;
  }
  return "";
}

Json libcuda_json(const std::string& path, const std::string& mapped_name) {
  const std::string real = real_path(path);
  std::string version = libcuda_version_from_name(real.substr(real.rfind('/') + 1));
  if (version.empty()) version = libcuda_version_from_name(mapped_name);
  Json lib = Json::object();
  lib.set("available", true);
  lib.set("path", real);
  lib.set("version", version.empty() ? Json(nullptr) : Json(version));
  lib.set("compat", real.rfind("/usr/local/cuda/compat/", 0) == 0 || real.find("/compat/") != std::string::npos);
  return lib;
}

// ---------------------------------------------------------------------------------------------
// CUDA device checks

__global__ void vector_add_kernel(const float* a, const float* b, float* c, unsigned long long n) {
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<unsigned long long>(gridDim.x) * blockDim.x) {
    c[i] = a[i] + b[i];
  }
}

struct DeviceOutcome {
  bool vector_ok = false;
  bool jit_ok = false;
  std::string vector_reason;
  std::string jit_reason;
};

// Runs `step` calls in order; the first failure is recorded into slot.result and stops the rest.
class StepRunner {
 public:
  StepRunner(Json* slot, std::string* reason) : slot_(slot), reason_(reason) {}

  template <class F>
  bool step(const std::string& call, F&& fn) {
    if (failed_) return false;
    double ms = 0;
    const cudaError_t e = cuda_call(call, slot_, "result", std::forward<F>(fn), &ms);
    if (e != cudaSuccess) {
      failed_ = true;
      locked([&] { slot_->set("result", cuda_result(call, e, ms)); });
      *reason_ = call + " returned " + describe(e);
      return false;
    }
    return true;
  }
  bool failed() const { return failed_; }

 private:
  Json* slot_;
  std::string* reason_;
  bool failed_ = false;
};

void run_vector_add(int dev, Json* va, unsigned long long n, DeviceOutcome* out) {
  const std::string sfx = "(device " + std::to_string(dev) + ")";
  std::vector<float> ha(n), hb(n), hc(n, -1.0f);
  for (unsigned long long i = 0; i < n; ++i) {
    ha[i] = static_cast<float>(i % 1024);        // small integers: every sum is exact in fp32
    hb[i] = static_cast<float>(2 * (i % 4099));
  }
  const size_t bytes = n * sizeof(float);
  float *da = nullptr, *db = nullptr, *dc = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  StepRunner r(va, &out->vector_reason);
  r.step("cudaMalloc" + sfx, [&] { return cudaMalloc(&da, bytes); });
  r.step("cudaMalloc" + sfx, [&] { return cudaMalloc(&db, bytes); });
  r.step("cudaMalloc" + sfx, [&] { return cudaMalloc(&dc, bytes); });
  r.step("cudaMemcpy(HostToDevice)" + sfx, [&] { return cudaMemcpy(da, ha.data(), bytes, cudaMemcpyHostToDevice); });
  r.step("cudaMemcpy(HostToDevice)" + sfx, [&] { return cudaMemcpy(db, hb.data(), bytes, cudaMemcpyHostToDevice); });
  r.step("cudaEventCreate" + sfx, [&] { return cudaEventCreate(&e0); });
  r.step("cudaEventCreate" + sfx, [&] { return cudaEventCreate(&e1); });
  r.step("cudaEventRecord" + sfx, [&] { return cudaEventRecord(e0); });
  r.step("cudaLaunchKernel(vector_add)" + sfx, [&] {
    const unsigned threads = 256;
    const unsigned long long want = (n + threads - 1) / threads;
    const unsigned blocks = static_cast<unsigned>(std::min<unsigned long long>(want, 65535ull));
    vector_add_kernel<<<blocks, threads>>>(da, db, dc, n);
    return cudaGetLastError();
  });
  r.step("cudaEventRecord" + sfx, [&] { return cudaEventRecord(e1); });
  r.step("cudaEventSynchronize" + sfx, [&] { return cudaEventSynchronize(e1); });
  float kernel_ms = 0;
  r.step("cudaEventElapsedTime" + sfx, [&] { return cudaEventElapsedTime(&kernel_ms, e0, e1); });
  r.step("cudaMemcpy(DeviceToHost)" + sfx, [&] { return cudaMemcpy(hc.data(), dc, bytes, cudaMemcpyDeviceToHost); });
  const bool ran = !r.failed();
  unsigned long long mismatches = 0;
  if (ran) {
    for (unsigned long long i = 0; i < n; ++i) {
      if (hc[i] != ha[i] + hb[i]) ++mismatches;
    }
  }
  // Cleanup: still under the watchdog; errors here do not change the verdict.
  if (e0) guarded("cudaEventDestroy" + sfx, nullptr, [&] { return cudaEventDestroy(e0); });
  if (e1) guarded("cudaEventDestroy" + sfx, nullptr, [&] { return cudaEventDestroy(e1); });
  for (float* p : {da, db, dc}) {
    if (p) guarded("cudaFree" + sfx, nullptr, [&] { return cudaFree(p); });
  }
  out->vector_ok = ran && mismatches == 0;
  if (ran && mismatches) {
    out->vector_reason = std::to_string(mismatches) + " of " + std::to_string(n) + " elements mismatched";
  }
  locked([&] {
    va->set("ok", out->vector_ok);
    va->set("verified", ran);
    va->set("elements", n);
    if (ran) {
      va->set("kernel_ms", static_cast<double>(kernel_ms));
      va->set("mismatches", mismatches);
      va->set("result", cuda_result("vector_add" + sfx, cudaSuccess, 0.0));
    }
  });
}

void run_ptx_jit(int dev, Json* pj, DeviceOutcome* out) {
  const std::string sfx = "(device " + std::to_string(dev) + ")";
  const size_t bytes = kJitElements * sizeof(int);
  std::vector<int> host(kJitElements, -1);
  int* d = nullptr;
  StepRunner r(pj, &out->jit_reason);
  r.step("cudaMalloc" + sfx, [&] { return cudaMalloc(&d, bytes); });
  r.step("cudaLaunchKernel(ptx_jit " GPUCONF_PTX_TARGET ")" + sfx,
         [&] { return gpuconf_launch_jit_kernel(d, kJitElements, kJitSeed); });
  r.step("cudaDeviceSynchronize" + sfx, [&] { return cudaDeviceSynchronize(); });
  r.step("cudaMemcpy(DeviceToHost)" + sfx, [&] { return cudaMemcpy(host.data(), d, bytes, cudaMemcpyDeviceToHost); });
  const bool ran = !r.failed();
  int mismatches = 0;
  if (ran) {
    for (int i = 0; i < kJitElements; ++i) {
      if (host[i] != gpuconf_jit_expected(i, kJitSeed)) ++mismatches;
    }
  }
  if (d) guarded("cudaFree" + sfx, nullptr, [&] { return cudaFree(d); });
  out->jit_ok = ran && mismatches == 0;
  if (ran && mismatches) {
    out->jit_reason = std::to_string(mismatches) + " of " + std::to_string(kJitElements) + " elements mismatched";
  }
  locked([&] {
    pj->set("ok", out->jit_ok);
    pj->set("verified", ran);
    if (ran) {
      pj->set("mismatches", mismatches);
      pj->set("result", cuda_result("ptx_jit" + sfx, cudaSuccess, 0.0));
    }
  });
}

// The largest single cudaMalloc that succeeds on the current device, by bisection between 0 and
// the device's total memory to kAllocResolutionDiv-ths of it (at most kAllocMaxSteps allocations,
// each freed at once). Under an MPS pinned device memory limit cudaMemGetInfo still reports the
// whole device, and an allocation beyond the limit fails with cudaErrorMemoryAllocation: the limit
// shows only by allocating. Any other error stops the search and is the result.
constexpr size_t kAllocGranule = size_t(2) << 20;
constexpr size_t kAllocResolutionDiv = 128;
constexpr int kAllocMaxSteps = 12;

void run_largest_alloc(int dev, size_t total, Json* la) {
  const std::string sfx = "(device " + std::to_string(dev) + ")";
  size_t free_b = 0, total_b = 0;
  double ms = 0;
  const cudaError_t me = cuda_call("cudaMemGetInfo" + sfx, la, "result",
                                   [&] { return cudaMemGetInfo(&free_b, &total_b); }, &ms);
  locked([&] {
    if (me == cudaSuccess) {
      Json info = Json::object();
      info.set("free_bytes", static_cast<unsigned long long>(free_b));
      info.set("total_bytes", static_cast<unsigned long long>(total_b));
      la->set("mem_info", std::move(info));
    } else {
      la->set("mem_info", Json::absent("cudaMemGetInfo returned " + describe(me)));
    }
  });
  const size_t resolution = std::max(kAllocGranule, total / kAllocResolutionDiv);
  size_t lo = 0;      // the largest size that succeeded (0: none yet)
  size_t hi = total;  // above every size that can succeed
  size_t failed_at = 0;
  int steps = 0;
  cudaError_t stop = cudaSuccess;
  double stop_ms = 0;
  while (hi - lo > resolution && steps < kAllocMaxSteps) {
    const size_t mid = (lo + (hi - lo) / 2) / kAllocGranule * kAllocGranule;
    if (mid <= lo) break;
    void* p = nullptr;
    double ams = 0;
    const cudaError_t e = cuda_call("cudaMalloc(" + std::to_string(mid) + ")" + sfx, la, "result",
                                    [&] { return cudaMalloc(&p, mid); }, &ams);
    ++steps;
    if (e == cudaSuccess) {
      if (p) guarded("cudaFree" + sfx, nullptr, [&] { return cudaFree(p); });
      lo = mid;
    } else if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky: clear it so the next call does not report it
      hi = failed_at = mid;
      locked([&] { la->set("last_failure", cuda_result("cudaMalloc(" + std::to_string(mid) + ")" + sfx, e, ams)); });
    } else {
      stop = e;
      stop_ms = ams;
      break;
    }
  }
  locked([&] {
    la->set("ok", stop == cudaSuccess);
    la->set("largest_ok_bytes", static_cast<unsigned long long>(lo));
    la->set("smallest_failed_bytes", failed_at ? Json(static_cast<unsigned long long>(failed_at)) : Json(nullptr));
    la->set("steps", steps);
    la->set("resolution_bytes", static_cast<unsigned long long>(resolution));
    la->set("result", cuda_result("largest_alloc" + sfx, stop, stop_ms));
  });
}

// Which SMs one client's kernels may occupy: a kernel of kSmBlocksPerSm x multiProcessorCount
// blocks, each spinning kSmSpinCycles clock cycles (tens of microseconds, so blocks overlap and
// every SM the client may use receives some) and recording the %smid it ran on. Under MPS the
// control daemon's active thread percentage (set_default_active_thread_percentage) confines a
// client's kernels to about that share of the SMs, while cudaDeviceProp.multiProcessorCount may
// still report the whole device: the distinct SM ids are the client-side view of the limit.
constexpr int kSmBlocksPerSm = 32;
constexpr int kSmThreads = 32;
constexpr long long kSmSpinCycles = 100000;

__global__ void sm_occupancy_kernel(unsigned* smids, long long spin_cycles) {
  if (threadIdx.x != 0) return;
  unsigned id = 0;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  const long long t0 = clock64();
  while (clock64() - t0 < spin_cycles) {
  }
  smids[blockIdx.x] = id;
}

void run_sm_occupancy(int dev, int multiprocessors, Json* so) {
  const std::string sfx = "(device " + std::to_string(dev) + ")";
  const int blocks = kSmBlocksPerSm * std::max(multiprocessors, 1);
  const size_t bytes = static_cast<size_t>(blocks) * sizeof(unsigned);
  std::vector<unsigned> ids(static_cast<size_t>(blocks), UINT_MAX);
  unsigned* d = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  std::string reason;
  StepRunner r(so, &reason);
  r.step("cudaMalloc" + sfx, [&] { return cudaMalloc(&d, bytes); });
  r.step("cudaMemset" + sfx, [&] { return cudaMemset(d, 0xff, bytes); });
  r.step("cudaEventCreate" + sfx, [&] { return cudaEventCreate(&e0); });
  r.step("cudaEventCreate" + sfx, [&] { return cudaEventCreate(&e1); });
  r.step("cudaEventRecord" + sfx, [&] { return cudaEventRecord(e0); });
  r.step("cudaLaunchKernel(sm_occupancy)" + sfx, [&] {
    sm_occupancy_kernel<<<blocks, kSmThreads>>>(d, kSmSpinCycles);
    return cudaGetLastError();
  });
  r.step("cudaEventRecord" + sfx, [&] { return cudaEventRecord(e1); });
  r.step("cudaEventSynchronize" + sfx, [&] { return cudaEventSynchronize(e1); });
  float kernel_ms = 0;
  r.step("cudaEventElapsedTime" + sfx, [&] { return cudaEventElapsedTime(&kernel_ms, e0, e1); });
  r.step("cudaMemcpy(DeviceToHost)" + sfx, [&] { return cudaMemcpy(ids.data(), d, bytes, cudaMemcpyDeviceToHost); });
  const bool ran = !r.failed();
  std::vector<unsigned> seen;
  long long unrecorded = 0;
  if (ran) {
    for (unsigned id : ids) {
      if (id == UINT_MAX) {
        ++unrecorded;
      } else {
        seen.push_back(id);
      }
    }
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  }
  if (e0) guarded("cudaEventDestroy" + sfx, nullptr, [&] { return cudaEventDestroy(e0); });
  if (e1) guarded("cudaEventDestroy" + sfx, nullptr, [&] { return cudaEventDestroy(e1); });
  if (d) guarded("cudaFree" + sfx, nullptr, [&] { return cudaFree(d); });
  locked([&] {
    so->set("ok", ran && unrecorded == 0);
    so->set("blocks", blocks);
    so->set("threads_per_block", kSmThreads);
    so->set("spin_cycles", kSmSpinCycles);
    so->set("multiprocessors", multiprocessors);
    if (ran) {
      so->set("distinct_sms", static_cast<int>(seen.size()));
      so->set("max_smid", seen.empty() ? Json(nullptr) : Json(static_cast<int>(seen.back())));
      so->set("unrecorded_blocks", unrecorded);
      so->set("kernel_ms", static_cast<double>(kernel_ms));
      so->set("result", cuda_result("sm_occupancy" + sfx, cudaSuccess, 0.0));
    }
  });
}

// Pinned host <-> device copy bandwidth on one device, the way nvbandwidth's copy-engine tests and
// bandwidthTest measure it: a pinned buffer, a warm-up copy each way (the link trains up from its
// idle state), then kCopyIterations cudaMemcpyAsync of `bytes` host-to-device on one stream timed
// with CUDA events, then the same device-to-host. `link` reads the GPU's PCIe link through NVML
// around the host-to-device copies (before, while they run, after); its parts may be empty.
struct LinkSampler {
  std::function<void()> before;
  std::function<void()> at_load;
  std::function<void()> after;
};

void run_host_device_bw(int dev, size_t bytes, Json* bw, const LinkSampler& link) {
  const std::string sfx = "(device " + std::to_string(dev) + ")";
  void* host = nullptr;
  void* d = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  std::string reason;
  StepRunner r(bw, &reason);
  r.step("cudaSetDevice" + sfx, [&] { return cudaSetDevice(dev); });
  r.step("cudaMallocHost(" + std::to_string(bytes) + ")" + sfx, [&] { return cudaMallocHost(&host, bytes); });
  r.step("cudaMalloc(" + std::to_string(bytes) + ")" + sfx, [&] { return cudaMalloc(&d, bytes); });
  r.step("cudaStreamCreate" + sfx, [&] { return cudaStreamCreate(&stream); });
  r.step("cudaEventCreate" + sfx, [&] { return cudaEventCreate(&e0); });
  r.step("cudaEventCreate" + sfx, [&] { return cudaEventCreate(&e1); });
  r.step("cudaMemcpyAsync(HostToDevice, warm-up)" + sfx,
         [&] { return cudaMemcpyAsync(d, host, bytes, cudaMemcpyHostToDevice, stream); });
  r.step("cudaMemcpyAsync(DeviceToHost, warm-up)" + sfx,
         [&] { return cudaMemcpyAsync(host, d, bytes, cudaMemcpyDeviceToHost, stream); });
  r.step("cudaStreamSynchronize" + sfx, [&] { return cudaStreamSynchronize(stream); });
  float ms[2] = {0.0f, 0.0f};
  bool sampled = false;
  for (int dir = 0; dir < 2 && !r.failed(); ++dir) {
    const bool h2d = dir == 0;
    if (h2d && link.before) {
      link.before();
      sampled = true;
    }
    const std::string what = std::string("cudaMemcpyAsync(") + (h2d ? "HostToDevice" : "DeviceToHost") + ")" + sfx;
    r.step("cudaEventRecord" + sfx, [&] { return cudaEventRecord(e0, stream); });
    for (int i = 0; i < kCopyIterations; ++i) {
      r.step(what, [&] {
        return h2d ? cudaMemcpyAsync(d, host, bytes, cudaMemcpyHostToDevice, stream)
                   : cudaMemcpyAsync(host, d, bytes, cudaMemcpyDeviceToHost, stream);
      });
    }
    r.step("cudaEventRecord" + sfx, [&] { return cudaEventRecord(e1, stream); });
    if (h2d && !r.failed() && link.at_load) link.at_load();  // the copies are still in flight
    r.step("cudaEventSynchronize" + sfx, [&] { return cudaEventSynchronize(e1); });
    r.step("cudaEventElapsedTime" + sfx, [&] { return cudaEventElapsedTime(&ms[dir], e0, e1); });
  }
  if (sampled && link.after) link.after();
  const bool ran = !r.failed();
  // Cleanup: still under the watchdog; errors here do not change the figures.
  if (e0) guarded("cudaEventDestroy" + sfx, nullptr, [&] { return cudaEventDestroy(e0); });
  if (e1) guarded("cudaEventDestroy" + sfx, nullptr, [&] { return cudaEventDestroy(e1); });
  if (stream) guarded("cudaStreamDestroy" + sfx, nullptr, [&] { return cudaStreamDestroy(stream); });
  if (d) guarded("cudaFree" + sfx, nullptr, [&] { return cudaFree(d); });
  if (host) guarded("cudaFreeHost" + sfx, nullptr, [&] { return cudaFreeHost(host); });
  const double total = static_cast<double>(bytes) * kCopyIterations;
  locked([&] {
    bw->set("ok", ran);
    bw->set("bytes", static_cast<unsigned long long>(bytes));
    bw->set("iterations", kCopyIterations);
    for (int dir = 0; dir < 2; ++dir) {
      const bool have = ran && ms[dir] > 0.0f;
      bw->set(dir == 0 ? "h2d_gbps" : "d2h_gbps", have ? Json(total / (static_cast<double>(ms[dir]) * 1e6)) : Json(nullptr));
      bw->set(dir == 0 ? "h2d_ms" : "d2h_ms", have ? Json(static_cast<double>(ms[dir])) : Json(nullptr));
    }
    if (ran) bw->set("result", cuda_result("host_device_bw" + sfx, cudaSuccess, 0.0));
  });
}

bool name_says_mig(const std::string& name) {
  return name.find(" MIG ") != std::string::npos || name.rfind("MIG ", 0) == 0;
}

// ---------------------------------------------------------------------------------------------
// NVML, through dlopen/dlsym only (nvml.h may be absent where the probe is built).

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
struct nvmlPciInfo_t {  // nvmlPciInfo_st as used by nvmlDeviceGetPciInfo_v3
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};

const char* const kBrandNames[] = {"Unknown",  "Quadro",      "Tesla",     "NVS",       "GRID",       "GeForce",
                                   "TITAN",    "VApps",       "VPC",       "VCS",       "VWS",        "CloudGaming",
                                   "QuadroRTX", "NvidiaRTX",  "Nvidia",    "GeForceRTX", "TitanRTX"};

class Nvml {
 public:
  ~Nvml() {
    if (handle_) ::dlclose(handle_);
  }

  std::string error_string(nvmlReturn_t r) const {
    const char* s = error_string_ ? error_string_(r) : nullptr;
    return s && *s ? std::string(s) : ("NVML error " + std::to_string(r));
  }
  std::string fail(const char* fn, nvmlReturn_t r) const { return std::string(fn) + ": " + error_string(r); }

  // Looks a symbol up; nullptr when libnvidia-ml lacks it.
  template <class T>
  T sym(const char* name) const {
    return reinterpret_cast<T>(::dlsym(handle_, name));
  }

  void* handle_ = nullptr;
  const char* (*error_string_)(nvmlReturn_t) = nullptr;
};

// Runs one NVML call under the watchdog; `slot[key]` becomes "absent (timed out)" if it hangs.
template <class F>
nvmlReturn_t nvml_call(const std::string& call, Json* slot, const std::string& key, F&& fn) {
  TimeoutFn on_timeout = [slot, key, call](double) {
    const std::string reason = call + ": did not return within " + format_seconds(g.timeout_s) + " s (watchdog)";
    if (slot) {
      slot->set(key, Json::absent(reason));
      return;
    }
    Json* nv = g.doc.find("nvml");
    Json* available = nv ? nv->find("available") : nullptr;
    if (!available || !available->is_true()) return;  // an "absent" object takes no extra keys
    Json* errs = nv->find("errors");
    if (!errs) errs = &nv->set("errors", Json::array());
    errs->push(reason);
  };
  return guarded(call, std::move(on_timeout), std::forward<F>(fn));
}

template <class T>
bool resolve(const Nvml& nv, const char* name, T* out, Json* slot, const std::string& key) {
  *out = nv.sym<T>(name);
  if (*out) return true;
  locked([&] { slot->set(key, Json::absent(std::string(name) + ": symbol not found in libnvidia-ml")); });
  return false;
}

struct CudaDeviceRef {
  Json* json;
  unsigned char uuid[16];
  std::string name;
  int index = -1;
  bool mig = false;       // a MIG instance (by name, then as NVML says)
  Json* bw = nullptr;     // its host_device_bw slot, when copies are to be measured
  bool measured = false;  // the copies ran (or were declined) already
};

// Fills root["nvml"] and, while NVML is initialised, tells which CUDA devices are MIG instances
// (a CUDA device whose UUID NVML knows as a MIG device handle).
void run_nvml(Json* root, std::vector<CudaDeviceRef>& cuda_devices, size_t copy_bytes,
              std::vector<std::string>* nvml_uuids) {
  Nvml nv;
  const std::string lib_name = "libnvidia-ml.so.1";
  std::string open_error;
  nv.handle_ = guarded("dlopen(" + lib_name + ")",
                       [root, lib_name](double) {
                         root->set("nvml", Json::absent("dlopen(" + lib_name + ") did not return in time (watchdog)"));
                       },
                       [&]() -> void* {
                         ::dlerror();
                         void* h = ::dlopen(lib_name.c_str(), RTLD_NOW | RTLD_LOCAL);
                         if (!h) {
                           const char* e = ::dlerror();
                           open_error = e ? e : "dlopen failed";
                         }
                         return h;
                       });
  if (!nv.handle_) {
    locked([&] { root->set("nvml", Json::absent(open_error)); });
    return;
  }
  nv.error_string_ = nv.sym<const char* (*)(nvmlReturn_t)>("nvmlErrorString");

  using InitFn = nvmlReturn_t (*)();
  using StrFn = nvmlReturn_t (*)(char*, unsigned);
  using IntFn = nvmlReturn_t (*)(int*);
  using UIntFn = nvmlReturn_t (*)(unsigned*);
  using ByIndexFn = nvmlReturn_t (*)(unsigned, nvmlDevice_t*);
  using ByUuidFn = nvmlReturn_t (*)(const char*, nvmlDevice_t*);
  using DevStrFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned);
  using DevUIntFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*);
  using DevIntFn = nvmlReturn_t (*)(nvmlDevice_t, int*);
  using DevPciFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t*);
  using DevTwoUIntFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*);
  using DevTwoIntFn = nvmlReturn_t (*)(nvmlDevice_t, int*, int*);
  using EccCountFn = nvmlReturn_t (*)(nvmlDevice_t, int, int, unsigned long long*);
  using RetiredFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned*, unsigned long long*);
  using RemapFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*, unsigned*, unsigned*);

  Json* nvml = nullptr;
  locked([&] { nvml = &root->set("nvml", Json::absent("NVML not initialised yet")); });

  InitFn init = nullptr;
  InitFn shutdown = nullptr;
  if (!resolve(nv, "nvmlInit_v2", &init, root, "nvml")) return;
  shutdown = nv.sym<InitFn>("nvmlShutdown");
  const nvmlReturn_t ir = nvml_call("nvmlInit_v2", root, "nvml", [&] { return init(); });
  if (ir != NVML_SUCCESS) {
    locked([&] { root->set("nvml", Json::absent(nv.fail("nvmlInit_v2", ir))); });
    return;
  }

  Dl_info info{};
  std::string library = lib_name;
  if (::dladdr(reinterpret_cast<void*>(init), &info) && info.dli_fname) library = real_path(info.dli_fname);

  Json errors = Json::array();
  bool have_errors = false;
  auto note = [&](const std::string& e) {
    errors.push(e);
    have_errors = true;
  };

  // Built locally, then published; each guarded call may still mark `root["nvml"]` on a hang.
  Json doc = Json::object();
  doc.set("available", true);
  doc.set("library", library);

  std::string driver_version;
  if (auto fn = nv.sym<StrFn>("nvmlSystemGetDriverVersion")) {
    char buf[96] = {0};
    const nvmlReturn_t r =
        nvml_call("nvmlSystemGetDriverVersion", root, "nvml", [&] { return fn(buf, sizeof buf - 1); });
    if (r == NVML_SUCCESS) driver_version = buf;
    else note(nv.fail("nvmlSystemGetDriverVersion", r));
  } else {
    note("nvmlSystemGetDriverVersion: symbol not found in libnvidia-ml");
  }
  doc.set("driver_version", driver_version.empty() ? Json(nullptr) : Json(driver_version));

  Json cuda_version(nullptr);
  {
    const char* which = "nvmlSystemGetCudaDriverVersion_v2";
    IntFn fn = nv.sym<IntFn>(which);
    if (!fn) {
      which = "nvmlSystemGetCudaDriverVersion";
      fn = nv.sym<IntFn>(which);
    }
    if (fn) {
      int v = 0;
      const nvmlReturn_t r = nvml_call(which, root, "nvml", [&] { return fn(&v); });
      if (r == NVML_SUCCESS) cuda_version = Json(v);
      else note(nv.fail(which, r));
    } else {
      note("nvmlSystemGetCudaDriverVersion_v2: symbol not found in libnvidia-ml");
    }
  }
  doc.set("cuda_driver_version", std::move(cuda_version));

  doc.set("gpus", Json::array());
  locked([&] { *nvml = std::move(doc); });
  Json* pub_gpus = nvml->find("gpus");

  unsigned count = 0;
  auto get_count = nv.sym<UIntFn>("nvmlDeviceGetCount_v2");
  auto by_index = nv.sym<ByIndexFn>("nvmlDeviceGetHandleByIndex_v2");
  if (!get_count || !by_index) {
    note(std::string(!get_count ? "nvmlDeviceGetCount_v2" : "nvmlDeviceGetHandleByIndex_v2") +
         ": symbol not found in libnvidia-ml");
  } else {
    const nvmlReturn_t r = nvml_call("nvmlDeviceGetCount_v2", root, "nvml", [&] { return get_count(&count); });
    if (r != NVML_SUCCESS) {
      note(nv.fail("nvmlDeviceGetCount_v2", r));
      count = 0;
    }
  }

  // One unsigned fact of a device (PCIe link generation, width, replay counter), or why not.
  auto read_uint = [&](const char* fn_name, nvmlDevice_t dev, const std::string& sfx, Json* slot) -> Json {
    auto fn = nv.sym<DevUIntFn>(fn_name);
    if (!fn) return Json::absent(std::string(fn_name) + ": symbol not found in libnvidia-ml");
    unsigned v = 0;
    const nvmlReturn_t r = nvml_call(fn_name + sfx, slot, "pcie", [&] { return fn(dev, &v); });
    return r == NVML_SUCCESS ? Json(v) : Json::absent(nv.fail(fn_name, r));
  };
  struct NvmlGpuRef {
    std::string uuid;
    Json* json;
    nvmlDevice_t dev;
    std::string sfx;
  };
  std::vector<NvmlGpuRef> nvml_gpus;

  auto get_uuid = nv.sym<DevStrFn>("nvmlDeviceGetUUID");
  auto get_name = nv.sym<DevStrFn>("nvmlDeviceGetName");
  for (unsigned i = 0; i < count; ++i) {
    const std::string sfx = "(" + std::to_string(i) + ")";
    nvmlDevice_t dev = nullptr;
    const nvmlReturn_t hr = nvml_call("nvmlDeviceGetHandleByIndex_v2" + sfx, nullptr, "", [&] { return by_index(i, &dev); });
    if (hr != NVML_SUCCESS) {
      note(nv.fail("nvmlDeviceGetHandleByIndex_v2", hr) + " (index " + std::to_string(i) + ")");
      continue;
    }
    Json* gpu = nullptr;
    locked([&] {
      Json obj = Json::object();
      obj.set("index", i);
      obj.set("uuid", nullptr);
      obj.set("name", nullptr);
      for (const char* k : {"brand", "persistence_mode", "mig_mode", "ecc", "retired_pages", "remapped_rows", "pcie"})
        obj.set(k, Json::absent("not read yet"));
      gpu = &pub_gpus->push(std::move(obj));
    });
    auto set = [&](const char* key, Json v) { locked([&] { gpu->set(key, std::move(v)); }); };
    std::string uuid_read;

    for (auto [fnp, fname, key] : {std::make_tuple(get_uuid, "nvmlDeviceGetUUID", "uuid"),
                                   std::make_tuple(get_name, "nvmlDeviceGetName", "name")}) {
      if (!fnp) {
        note(std::string(fname) + ": symbol not found in libnvidia-ml");
        continue;
      }
      char buf[128] = {0};
      const nvmlReturn_t r = nvml_call(std::string(fname) + sfx, gpu, std::string(key) + "_error",
                                       [&, fnp = fnp] { return fnp(dev, buf, sizeof buf - 1); });
      if (r == NVML_SUCCESS) {
        set(key, std::string(buf));
        if (std::string(key) == "uuid") uuid_read = buf;
      } else {
        note(nv.fail(fname, r) + " (index " + std::to_string(i) + ")");
      }
    }

    if (auto fn = nv.sym<DevPciFn>("nvmlDeviceGetPciInfo_v3")) {
      nvmlPciInfo_t pci;
      std::memset(&pci, 0, sizeof pci);
      const nvmlReturn_t r = nvml_call("nvmlDeviceGetPciInfo_v3" + sfx, gpu, "pci_bus_id_error", [&] { return fn(dev, &pci); });
      pci.busId[sizeof pci.busId - 1] = '\0';
      if (r == NVML_SUCCESS) set("pci_bus_id", std::string(pci.busId));
      else note(nv.fail("nvmlDeviceGetPciInfo_v3", r) + " (index " + std::to_string(i) + ")");
    } else {
      note("nvmlDeviceGetPciInfo_v3: symbol not found in libnvidia-ml");
    }

    // brand
    {
      DevIntFn fn = nullptr;
      if (resolve(nv, "nvmlDeviceGetBrand", &fn, gpu, "brand")) {
        int b = 0;
        const nvmlReturn_t r = nvml_call("nvmlDeviceGetBrand" + sfx, gpu, "brand", [&] { return fn(dev, &b); });
        if (r == NVML_SUCCESS) {
          Json brand = Json::object();
          brand.set("enum", b);
          const int n = static_cast<int>(sizeof kBrandNames / sizeof kBrandNames[0]);
          brand.set("name", (b >= 0 && b < n) ? kBrandNames[b] : "Unknown");
          set("brand", std::move(brand));
        } else {
          set("brand", Json::absent(nv.fail("nvmlDeviceGetBrand", r)));
        }
      }
    }
    // persistence mode
    {
      DevIntFn fn = nullptr;
      if (resolve(nv, "nvmlDeviceGetPersistenceMode", &fn, gpu, "persistence_mode")) {
        int m = 0;
        const nvmlReturn_t r =
            nvml_call("nvmlDeviceGetPersistenceMode" + sfx, gpu, "persistence_mode", [&] { return fn(dev, &m); });
        set("persistence_mode", r == NVML_SUCCESS ? Json(m != 0) : Json::absent(nv.fail("nvmlDeviceGetPersistenceMode", r)));
      }
    }
    // MIG mode
    {
      DevTwoUIntFn fn = nullptr;
      if (resolve(nv, "nvmlDeviceGetMigMode", &fn, gpu, "mig_mode")) {
        unsigned cur = 0, pend = 0;
        const nvmlReturn_t r = nvml_call("nvmlDeviceGetMigMode" + sfx, gpu, "mig_mode", [&] { return fn(dev, &cur, &pend); });
        if (r == NVML_SUCCESS) {
          Json m = Json::object();
          m.set("current", cur != 0);
          m.set("pending", pend != 0);
          set("mig_mode", std::move(m));
        } else {
          set("mig_mode", Json::absent(nv.fail("nvmlDeviceGetMigMode", r)));
        }
      }
    }
    // ECC mode and counters
    {
      DevTwoIntFn mode_fn = nullptr;
      EccCountFn count_fn = nullptr;
      if (resolve(nv, "nvmlDeviceGetEccMode", &mode_fn, gpu, "ecc")) {
        int cur = 0, pend = 0;
        const nvmlReturn_t r = nvml_call("nvmlDeviceGetEccMode" + sfx, gpu, "ecc", [&] { return mode_fn(dev, &cur, &pend); });
        if (r != NVML_SUCCESS) {
          set("ecc", Json::absent(nv.fail("nvmlDeviceGetEccMode", r)));
        } else {
          count_fn = nv.sym<EccCountFn>("nvmlDeviceGetTotalEccErrors");
          Json ecc = Json::object();
          ecc.set("enabled", cur != 0);
          ecc.set("pending", pend != 0);
          // counter type: 0 volatile, 1 aggregate; error type: 0 corrected, 1 uncorrected.
          for (int counter = 0; counter < 2; ++counter) {
            Json c = Json::object();
            for (int type = 0; type < 2; ++type) {
              const char* key = type == 0 ? "corrected" : "uncorrected";
              if (!count_fn) {
                c.set(key, Json::absent("nvmlDeviceGetTotalEccErrors: symbol not found in libnvidia-ml"));
                continue;
              }
              unsigned long long v = 0;
              const nvmlReturn_t cr = nvml_call("nvmlDeviceGetTotalEccErrors" + sfx, gpu, "ecc",
                                                [&] { return count_fn(dev, type, counter, &v); });
              c.set(key, cr == NVML_SUCCESS ? Json(v) : Json::absent(nv.fail("nvmlDeviceGetTotalEccErrors", cr)));
            }
            ecc.set(counter == 0 ? "volatile" : "aggregate", std::move(c));
          }
          set("ecc", std::move(ecc));
        }
      }
    }
    // Retired pages (pre-Ampere page retirement)
    {
      RetiredFn fn = nullptr;
      if (resolve(nv, "nvmlDeviceGetRetiredPages", &fn, gpu, "retired_pages")) {
        Json rp = Json::object();
        bool ok = true;
        for (int cause = 0; cause < 2 && ok; ++cause) {
          unsigned n = 0;  // count query: zero-sized buffer, NULL addresses
          const nvmlReturn_t r = nvml_call("nvmlDeviceGetRetiredPages" + sfx, gpu, "retired_pages",
                                           [&] { return fn(dev, cause, &n, nullptr); });
          if (r != NVML_SUCCESS && r != NVML_ERROR_INSUFFICIENT_SIZE) {
            set("retired_pages", Json::absent(nv.fail("nvmlDeviceGetRetiredPages", r)));
            ok = false;
            break;
          }
          rp.set(cause == 0 ? "single_bit" : "double_bit", n);
        }
        if (ok) {
          DevIntFn pend_fn = nullptr;
          if (resolve(nv, "nvmlDeviceGetRetiredPagesPendingStatus", &pend_fn, gpu, "retired_pages")) {
            int p = 0;
            const nvmlReturn_t r = nvml_call("nvmlDeviceGetRetiredPagesPendingStatus" + sfx, gpu, "retired_pages",
                                             [&] { return pend_fn(dev, &p); });
            if (r == NVML_SUCCESS) {
              rp.set("pending", p != 0);
              set("retired_pages", std::move(rp));
            } else {
              set("retired_pages", Json::absent(nv.fail("nvmlDeviceGetRetiredPagesPendingStatus", r)));
            }
          }
        }
      }
    }
    // Remapped rows (Ampere and later)
    {
      RemapFn fn = nullptr;
      if (resolve(nv, "nvmlDeviceGetRemappedRows", &fn, gpu, "remapped_rows")) {
        unsigned corr = 0, unc = 0, pend = 0, fail = 0;
        const nvmlReturn_t r = nvml_call("nvmlDeviceGetRemappedRows" + sfx, gpu, "remapped_rows",
                                         [&] { return fn(dev, &corr, &unc, &pend, &fail); });
        if (r == NVML_SUCCESS) {
          Json rr = Json::object();
          rr.set("correctable", corr);
          rr.set("uncorrectable", unc);
          rr.set("pending", pend != 0);
          rr.set("failure", fail != 0);
          set("remapped_rows", std::move(rr));
        } else {
          set("remapped_rows", Json::absent(nv.fail("nvmlDeviceGetRemappedRows", r)));
        }
      }
    }
    // PCIe link and replay counter. The current generation and width read here, with the GPU idle,
    // may be trained down to save power; they are read again while the copies run (below).
    {
      Json pcie = Json::object();
      for (auto [fname, key] : {std::make_pair("nvmlDeviceGetCurrPcieLinkGeneration", "link_gen_current"),
                                std::make_pair("nvmlDeviceGetMaxPcieLinkGeneration", "link_gen_max"),
                                std::make_pair("nvmlDeviceGetGpuMaxPcieLinkGeneration", "link_gen_gpu_max"),
                                std::make_pair("nvmlDeviceGetCurrPcieLinkWidth", "link_width_current"),
                                std::make_pair("nvmlDeviceGetMaxPcieLinkWidth", "link_width_max"),
                                std::make_pair("nvmlDeviceGetPcieReplayCounter", "replay_counter")}) {
        pcie.set(key, read_uint(fname, dev, sfx, gpu));
      }
      pcie.set("replay_counter_after_load", Json::absent("not read: no copy ran on this GPU"));
      pcie.set("sampled_under_load", false);
      pcie.set("load_window_ms", nullptr);
      set("pcie", std::move(pcie));
    }
    if (!uuid_read.empty()) nvml_gpus.push_back({uuid_read, gpu, dev, sfx});
    if (!uuid_read.empty()) nvml_uuids->push_back(uuid_read);
  }

  // MIG: a CUDA device is a MIG instance when NVML knows its UUID as a MIG device handle.
  auto by_uuid = nv.sym<ByUuidFn>("nvmlDeviceGetHandleByUUID");
  auto is_mig = nv.sym<DevUIntFn>("nvmlDeviceIsMigDeviceHandle");
  for (auto& cd : cuda_devices) {
    if (!by_uuid) break;
    for (const char* prefix : {"GPU", "MIG"}) {
      const std::string uuid = format_uuid(cd.uuid, prefix);
      nvmlDevice_t h = nullptr;
      const nvmlReturn_t r = nvml_call("nvmlDeviceGetHandleByUUID(" + uuid + ")", nullptr, "", [&] { return by_uuid(uuid.c_str(), &h); });
      if (r != NVML_SUCCESS) continue;
      unsigned mig = std::string(prefix) == "MIG" ? 1u : 0u;
      if (is_mig) {
        unsigned m = 0;
        if (nvml_call("nvmlDeviceIsMigDeviceHandle", nullptr, "", [&] { return is_mig(h, &m); }) == NVML_SUCCESS) mig = m;
      }
      cd.mig = mig != 0;
      locked([&] {
        cd.json->set("uuid", mig ? format_uuid(cd.uuid, "MIG") : uuid);
        cd.json->set("mig", mig != 0);
        cd.json->set("mig_source", "nvml");
      });
      break;
    }
  }

  // Host-device copies on every full GPU, one at a time, its PCIe link read while they run.
  for (auto& cd : cuda_devices) {
    if (!cd.bw || cd.measured || cd.mig) continue;
    cd.measured = true;
    const std::string uuid = format_uuid(cd.uuid, "GPU");
    const NvmlGpuRef* ng = nullptr;
    for (const auto& n : nvml_gpus)
      if (n.uuid == uuid) ng = &n;
    LinkSampler link;
    Clock::time_point t0;
    if (ng) {
      auto update = [ng](const char* key, Json v) {
        locked([&] {
          Json* p = ng->json->find("pcie");
          if (p && !p->find("available")) p->set(key, std::move(v));
        });
      };
      link.before = [&, ng, update] {
        t0 = Clock::now();
        update("replay_counter", read_uint("nvmlDeviceGetPcieReplayCounter", ng->dev, ng->sfx, ng->json));
      };
      link.at_load = [&, ng, update] {
        update("link_gen_current", read_uint("nvmlDeviceGetCurrPcieLinkGeneration", ng->dev, ng->sfx, ng->json));
        update("link_width_current", read_uint("nvmlDeviceGetCurrPcieLinkWidth", ng->dev, ng->sfx, ng->json));
        update("sampled_under_load", Json(true));
      };
      link.after = [&, ng, update] {
        update("replay_counter_after_load", read_uint("nvmlDeviceGetPcieReplayCounter", ng->dev, ng->sfx, ng->json));
        update("load_window_ms", Json(ms_between(t0, Clock::now())));
      };
    }
    run_host_device_bw(cd.index, copy_bytes, cd.bw, link);
  }

  if (shutdown) nvml_call("nvmlShutdown", nullptr, "", [&] { return shutdown(); });
  locked([&] {
    if (have_errors) nvml->set("errors", errors);
  });
}

// ---------------------------------------------------------------------------------------------
// Rendezvous (--rendezvous PEER,...): hold the GPUs until every peer has been seen holding its
// own, so two pods that must use their GPUs at the same time (isolation's concurrent pods,
// sharing's oversubscribed GPUs) overlap by construction, not by scheduling luck. Plain TCP
// between the pods (no API access, no host path or network, an unprivileged port): each probe
// listens on its port and answers every connection with one line naming itself, how long it has
// held its devices and their UUIDs; it connects to each peer, reads the peer's line, and only
// once it has read every peer's line acknowledges them ("ack NAME"). A probe releases (finishes
// its document and exits) when it has read every peer's line and every peer has acknowledged
// its own, or when the bounded wait has passed (met false, with why).
//
// Why the acknowledgements are deferred: when a probe has read its last peer's line, no peer
// can have released yet (each waits for this probe's acknowledgement), so at that moment every
// one of them holds its devices: the overlap is proven, and measured on this probe's clock as
// from the latest moment any of them (itself included) may have begun holding (the moment its
// line was read, less the time it said it had held) to that moment.

constexpr int kDefaultRendezvousPort = 7171;
constexpr double kDefaultRendezvousWaitS = 90.0;
constexpr double kMaxRendezvousWaitS = 3600.0;
constexpr const char* kRendezvousMagic = "gpuconf-rendezvous/1";
constexpr int kRendezvousRetryMs = 200;

struct RendezvousPeer {
  std::string spec;  // as given: HOST or HOST:PORT ([V6]:PORT)
  std::string host;
  int port = kDefaultRendezvousPort;
};

struct PeerLine {
  bool answered = false;
  std::string name;
  double held_ms = 0;   // how long the peer had held its devices when it answered
  double read_at = 0;   // this probe's clock (ms since its start) when the line was read
  std::string cuda, nvml;  // comma lists, as the peer reported them
  std::string error;    // the last failure while trying to reach it
  int attempts = 0;
};

struct RendezvousState {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<PeerLine> peers;
  size_t lines = 0;
  std::vector<std::string> acks;  // distinct names of the peers that read this probe's line
  size_t acks_sent = 0;  // peers this probe has acknowledged (it exits only after sending them)
  bool done = false;
  std::string self, cuda, nvml;
  Clock::time_point deadline;
};

double since_start_ms() { return ms_between(g.start, Clock::now()); }

std::string join_strings(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

bool parse_port(const std::string& s, int lowest, int* out) {
  if (s.empty() || s.size() > 5 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  const int v = std::atoi(s.c_str());
  if (v < lowest || v > 65535) return false;
  *out = v;
  return true;
}

// "a,b:7200,[::1]:7300" -> peers; false (with why) on an empty or malformed entry.
bool parse_peers(const std::string& s, int default_port, std::vector<RendezvousPeer>* out, std::string* why) {
  size_t pos = 0;
  out->clear();
  while (pos <= s.size()) {
    const size_t comma = s.find(',', pos);
    const std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? s.size() + 1 : comma + 1;
    RendezvousPeer p;
    p.spec = item;
    p.port = default_port;
    std::string port;
    if (!item.empty() && item[0] == '[') {
      const size_t close = item.find(']');
      if (close == std::string::npos) return *why = "peer '" + item + "' has no closing ']'", false;
      p.host = item.substr(1, close - 1);
      if (close + 1 < item.size()) {
        if (item[close + 1] != ':') return *why = "peer '" + item + "': expected ':PORT' after ']'", false;
        port = item.substr(close + 2);
        if (!parse_port(port, 1, &p.port)) return *why = "peer '" + item + "' has a bad port", false;
      }
    } else {
      const size_t colon = item.rfind(':');
      p.host = item.substr(0, colon);
      if (colon != std::string::npos && !parse_port(item.substr(colon + 1), 1, &p.port))
        return *why = "peer '" + item + "' has a bad port", false;
    }
    if (p.host.empty()) return *why = "empty peer in '" + s + "'", false;
    out->push_back(p);
  }
  return true;
}

bool write_line(int fd, const std::string& line) {
  size_t off = 0;
  while (off < line.size()) {
    const ssize_t n = ::send(fd, line.data() + off, line.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    off += static_cast<size_t>(n);
  }
  return true;
}

// One '\n'-terminated line (at most 4 KiB) before `deadline`; false with why otherwise.
bool read_line(int fd, Clock::time_point deadline, std::string* line, std::string* why) {
  line->clear();
  char c;
  while (line->size() < 4096) {
    const double left = ms_between(Clock::now(), deadline);
    if (left <= 0) return *why = "no line before the deadline", false;
    pollfd pfd{fd, POLLIN, 0};
    const int r = ::poll(&pfd, 1, static_cast<int>(std::min(left, 1000.0)) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return *why = std::string("poll: ") + std::strerror(errno), false;
    if (r == 0) continue;
    const ssize_t n = ::recv(fd, &c, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return *why = std::string("read: ") + std::strerror(errno), false;
    if (n == 0) return *why = "the connection closed before a full line", false;
    if (c == '\n') return true;
    line->push_back(c);
  }
  return *why = "a line longer than 4 KiB", false;
}

// "KEY=VALUE" among the space-separated words of `line` ("" when absent).
std::string line_field(const std::string& line, const std::string& key) {
  size_t pos = 0;
  while (pos < line.size()) {
    size_t end = line.find(' ', pos);
    if (end == std::string::npos) end = line.size();
    const std::string word = line.substr(pos, end - pos);
    if (word.rfind(key + "=", 0) == 0) return word.substr(key.size() + 1);
    pos = end + 1;
  }
  return "";
}

// A connected socket to host:port before `deadline` (each attempt bounded by 1 s), or -1 and why.
int connect_to(const RendezvousPeer& p, Clock::time_point deadline, std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int gai = ::getaddrinfo(p.host.c_str(), std::to_string(p.port).c_str(), &hints, &res);
  if (gai != 0) {
    *why = "name resolution failed: " + std::string(::gai_strerror(gai));
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      *why = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    const int flags = ::fcntl(fd, F_GETFL, 0);
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      const double left = std::min(1000.0, std::max(1.0, ms_between(Clock::now(), deadline)));
      pollfd pfd{fd, POLLOUT, 0};
      rc = ::poll(&pfd, 1, static_cast<int>(left));
      int err = 0;
      socklen_t len = sizeof err;
      if (rc == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
        rc = 0;
      } else {
        errno = rc == 0 ? ETIMEDOUT : (err ? err : errno);
        rc = -1;
      }
    }
    if (rc != 0) {
      *why = std::strerror(errno);
      ::close(fd);
      fd = -1;
      continue;
    }
    ::fcntl(fd, F_SETFL, flags);
  }
  ::freeaddrinfo(res);
  return fd;
}

// This probe's line for a peer: its name, how long it has held its devices, their UUIDs.
std::string own_line(RendezvousState* rv) {
  char held[32];
  std::snprintf(held, sizeof held, "%.0f", since_start_ms());
  return std::string(kRendezvousMagic) + " name=" + rv->self + " held_ms=" + held + " cuda=" +
         (rv->cuda.empty() ? "-" : rv->cuda) + " nvml=" + (rv->nvml.empty() ? "-" : rv->nvml) + "\n";
}

// Serves one connection: our line, then the peer's acknowledgement once it has read every line.
void serve_peer(RendezvousState* rv, int fd) {
  std::string line, why;
  if (write_line(fd, own_line(rv)) && read_line(fd, rv->deadline, &line, &why) && line.rfind("ack ", 0) == 0) {
    const std::string name = line.substr(4);
    std::lock_guard<std::mutex> lk(rv->mu);
    if (std::find(rv->acks.begin(), rv->acks.end(), name) == rv->acks.end()) rv->acks.push_back(name);
    rv->cv.notify_all();
  }
  ::close(fd);
}

void listen_loop(RendezvousState* rv, int server) {
  for (;;) {
    {
      std::lock_guard<std::mutex> lk(rv->mu);
      if (rv->done) break;
    }
    pollfd pfd{server, POLLIN, 0};
    if (::poll(&pfd, 1, 50) <= 0) continue;
    const int fd = ::accept4(server, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) std::thread(serve_peer, rv, fd).detach();
  }
  ::close(server);
}

// Reaches one peer (retrying until the deadline), reads its line, and acknowledges it once every
// peer's line is in.
void reach_peer(RendezvousState* rv, size_t i, RendezvousPeer p) {
  while (Clock::now() < rv->deadline) {
    std::string why, line;
    const int fd = connect_to(p, rv->deadline, &why);
    bool ok = false;
    if (fd >= 0) {
      if (!read_line(fd, rv->deadline, &line, &why)) {
        why = "connected, but " + why;
      } else if (line.rfind(std::string(kRendezvousMagic) + " ", 0) != 0) {
        why = "answered with something else than a rendezvous line: '" + line.substr(0, 80) + "'";
      } else {
        ok = true;
      }
    }
    if (ok) {
      std::unique_lock<std::mutex> lk(rv->mu);
      PeerLine& pl = rv->peers[i];
      pl.attempts++;
      pl.answered = true;
      pl.error.clear();
      pl.name = line_field(line, "name");
      pl.held_ms = std::atof(line_field(line, "held_ms").c_str());
      pl.read_at = since_start_ms();
      pl.cuda = line_field(line, "cuda");
      pl.nvml = line_field(line, "nvml");
      rv->lines++;
      rv->cv.notify_all();
      rv->cv.wait_until(lk, rv->deadline, [rv] { return rv->lines == rv->peers.size() || rv->done; });
      const bool all = rv->lines == rv->peers.size();
      lk.unlock();
      const bool sent = all && write_line(fd, "ack " + rv->self + "\n");
      ::close(fd);
      lk.lock();
      if (sent) rv->acks_sent++;
      rv->cv.notify_all();
      return;
    }
    if (fd >= 0) ::close(fd);
    {
      std::lock_guard<std::mutex> lk(rv->mu);
      rv->peers[i].attempts++;
      rv->peers[i].error = why;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kRendezvousRetryMs));
  }
}

Json uuid_list(const std::string& csv) {
  Json a = Json::array();
  size_t pos = 0;
  while (!csv.empty() && csv != "-" && pos <= csv.size()) {
    const size_t comma = csv.find(',', pos);
    a.push(csv.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    pos = comma == std::string::npos ? csv.size() + 1 : comma + 1;
  }
  return a;
}

// Runs the rendezvous and fills root["rendezvous"]. `cuda`/`nvml`: the UUIDs this probe holds.
void run_rendezvous(Json* root, const std::vector<RendezvousPeer>& peers, int port, double wait_s,
                    const std::vector<std::string>& cuda, const std::vector<std::string>& nvml) {
  // Never freed: a peer's late connection may still be served while the document is printed.
  auto* rv = new RendezvousState();
  rv->self = hostname() + ":" + std::to_string(port);
  rv->cuda = join_strings(cuda, ",");
  rv->nvml = join_strings(nvml, ",");
  rv->peers.resize(peers.size());
  const double began = since_start_ms();
  rv->deadline = Clock::now() + std::chrono::milliseconds(static_cast<long long>(wait_s * 1000));
  Json r = Json::object();
  Json names = Json::array();
  for (const auto& p : peers) names.push(p.spec);
  r.set("peers", std::move(names));
  r.set("name", rv->self);
  r.set("port", port);
  r.set("wait_s", wait_s);
  r.set("cuda_uuids", uuid_list(rv->cuda));
  r.set("nvml_uuids", uuid_list(rv->nvml));

  std::string reason;
  const int server = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1, zero = 0;
  int fd = server;
  sockaddr_in6 a6{};
  a6.sin6_family = AF_INET6;
  a6.sin6_port = htons(static_cast<uint16_t>(port));
  a6.sin6_addr = in6addr_any;
  bool listening = false;
  if (fd >= 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    listening = ::bind(fd, reinterpret_cast<sockaddr*>(&a6), sizeof a6) == 0 && ::listen(fd, 64) == 0;
  }
  if (!listening) {  // no IPv6 in this pod: IPv4 only
    if (fd >= 0) ::close(fd);
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a4{};
    a4.sin_family = AF_INET;
    a4.sin_port = htons(static_cast<uint16_t>(port));
    a4.sin_addr.s_addr = htonl(INADDR_ANY);
    if (fd >= 0) {
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      listening = ::bind(fd, reinterpret_cast<sockaddr*>(&a4), sizeof a4) == 0 && ::listen(fd, 64) == 0;
    }
    if (!listening) {
      reason = "could not listen on port " + std::to_string(port) + ": " + std::strerror(errno);
      if (fd >= 0) ::close(fd);
    }
  }
  vlog("rendezvous: %s", listening ? "listening, reaching the peers" : reason.c_str());
  bool met = false;
  double all_lines_at = -1;
  if (listening) {
    std::thread(listen_loop, rv, fd).detach();
    for (size_t i = 0; i < peers.size(); ++i) std::thread(reach_peer, rv, i, peers[i]).detach();
    std::unique_lock<std::mutex> lk(rv->mu);
    auto all = [rv] {
      return rv->lines == rv->peers.size() && rv->acks.size() >= rv->peers.size() &&
             rv->acks_sent == rv->peers.size();
    };
    rv->cv.wait_until(lk, rv->deadline, all);
    met = all();
    rv->done = true;
    rv->cv.notify_all();
    for (const auto& pl : rv->peers) all_lines_at = std::max(all_lines_at, pl.read_at);
  }
  std::lock_guard<std::mutex> lk(rv->mu);
  Json seen = Json::array();
  std::vector<std::string> missing;
  double latest_start = 0;  // this probe began holding at its start (0 on its clock)
  for (size_t i = 0; i < peers.size(); ++i) {
    const PeerLine& pl = rv->peers[i];
    Json p = Json::object();
    p.set("peer", peers[i].spec);
    p.set("answered", pl.answered);
    p.set("attempts", pl.attempts);
    if (pl.answered) {
      p.set("name", pl.name);
      p.set("held_ms", pl.held_ms);
      p.set("read_at_ms", pl.read_at);
      p.set("cuda_uuids", uuid_list(pl.cuda));
      p.set("nvml_uuids", uuid_list(pl.nvml));
      latest_start = std::max(latest_start, pl.read_at - pl.held_ms);
    } else {
      p.set("error", pl.error.empty() ? Json(nullptr) : Json(pl.error));
      if (listening)
        missing.push_back("peer " + peers[i].spec + " did not answer within " + format_seconds(wait_s) + " s" +
                          (pl.error.empty() ? "" : ": " + pl.error));
    }
    seen.push(std::move(p));
  }
  r.set("peer_lines", std::move(seen));
  Json acks = Json::array();
  for (const auto& n : rv->acks) acks.push(n);
  r.set("acknowledged_by", std::move(acks));
  if (listening && missing.empty() && rv->acks.size() < peers.size())
    missing.push_back(std::to_string(peers.size() - rv->acks.size()) + " of " + std::to_string(peers.size()) +
                      " peer(s) did not read this probe's line within " + format_seconds(wait_s) + " s");
  if (reason.empty()) reason = join_strings(missing, "; ");
  r.set("met", met);
  r.set("waited_ms", since_start_ms() - began);
  r.set("overlap_ms", met ? Json(std::max(0.0, all_lines_at - latest_start)) : Json(nullptr));
  r.set("reason", met ? Json(nullptr) : Json(reason));
  locked([&] { root->set("rendezvous", std::move(r)); });
}

// ---------------------------------------------------------------------------------------------
// Command line

struct Options {
  double timeout_s = kDefaultTimeoutS;
  unsigned long long elements = kDefaultElements;
  bool verbose = false;
  bool measure_alloc = false;
  unsigned long long copy_mib = kDefaultCopyMib;
  std::vector<RendezvousPeer> rendezvous;  // empty: no rendezvous
  int rendezvous_port = kDefaultRendezvousPort;
  double rendezvous_wait_s = kDefaultRendezvousWaitS;
};

const char* kUsage =
    "usage: cuda-probe [--timeout SECONDS] [--elements N] [--measure-alloc] [--copy-mib N]\n"
    "                  [--rendezvous PEER[,PEER...]] [--rendezvous-port N] [--rendezvous-wait SECONDS]\n"
    "                  [--verbose] [--help]\n"
    "\n"
    "Prints one JSON document (schema gpuconf.cuda-probe/v1) describing the CUDA runtime, driver,\n"
    "libcuda, device nodes, NVML and a verified vector-add and PTX-JIT kernel per device.\n"
    "\n"
    "  --timeout SECONDS  watchdog limit for any single CUDA/NVML call (default 30;\n"
    "                     env GPUCONF_PROBE_TIMEOUT)\n"
    "  --elements N       vector-add size in floats (default 1048576, at most 268435456)\n"
    "  --measure-alloc    also find each device's largest single allocation (an MPS client's\n"
    "                     memory limit) and the SMs a kernel of this client occupies (its\n"
    "                     active thread percentage); env GPUCONF_PROBE_MEASURE_ALLOC=1\n"
    "  --copy-mib N       pinned host<->device copy buffer in MiB, timed 8 times each way per\n"
    "                     full GPU with its PCIe link read under load (default 256, at most 4096;\n"
    "                     0 skips the copies); env GPUCONF_PROBE_COPY_MIB\n"
    "  --rendezvous PEER[,PEER...]\n"
    "                     after the checks, hold the devices until every peer (HOST or HOST:PORT,\n"
    "                     another cuda-probe started with --rendezvous) has been seen holding its\n"
    "                     own: serve this probe's name, time held and UUIDs on the port, read each\n"
    "                     peer's, and release when every peer's line was read and every peer read\n"
    "                     ours, or the wait passed; the document's \"rendezvous\" says whether they\n"
    "                     met, the peers' UUIDs and the overlap measured. Plain TCP between pods, no\n"
    "                     privileges; env GPUCONF_PROBE_RENDEZVOUS\n"
    "  --rendezvous-port N\n"
    "                     the port to listen on and the peers' default (default 7171, 1025 to\n"
    "                     65535); env GPUCONF_PROBE_RENDEZVOUS_PORT\n"
    "  --rendezvous-wait SECONDS\n"
    "                     how long to wait for the peers (default 90, at most 3600); its end is\n"
    "                     no failure of the probe: met is false with the reason, the exit code\n"
    "                     unchanged; env GPUCONF_PROBE_RENDEZVOUS_WAIT\n"
    "  --verbose          diagnostics on stderr\n"
    "  --help             this text\n"
    "\n"
    "exit codes: 0 ok; 2 usage; 3 CUDA init failed; 4 no CUDA device; 5 vector_add failed;\n"
    "            6 watchdog timeout; 7 only ptx_jit failed; 8 internal error\n";

bool parse_seconds(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end == s.c_str() || *end != '\0' || !(v > 0.0) || v > 86400.0) return false;
  *out = v;
  return true;
}

bool parse_count(const std::string& s, unsigned long long* out) {
  if (s.empty() || s[0] < '0' || s[0] > '9') return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < 1 || v > kMaxElements) return false;
  *out = v;
  return true;
}

bool parse_mib(const std::string& s, unsigned long long* out) {
  if (s.empty() || s[0] < '0' || s[0] > '9') return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v > kMaxCopyMib) return false;
  *out = v;
  return true;
}

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "cuda-probe: %s (try --help)\n", msg.c_str());
  std::fflush(stderr);
  _exit(kExitUsage);
}

bool parse_wait(const std::string& s, double* out) {
  return parse_seconds(s, out) && *out <= kMaxRendezvousWaitS;
}

Options parse_args(int argc, char** argv) {
  Options o;
  std::string peers;
  bool have_peers = false;
  if (const char* env = std::getenv("GPUCONF_PROBE_RENDEZVOUS")) {
    peers = env;
    have_peers = !peers.empty();
  }
  if (const char* env = std::getenv("GPUCONF_PROBE_RENDEZVOUS_PORT")) {
    if (!parse_port(env, 1025, &o.rendezvous_port))
      usage_error(std::string("invalid GPUCONF_PROBE_RENDEZVOUS_PORT '") + env + "': expected a port from 1025 to 65535");
  }
  if (const char* env = std::getenv("GPUCONF_PROBE_RENDEZVOUS_WAIT")) {
    if (!parse_wait(env, &o.rendezvous_wait_s))
      usage_error(std::string("invalid GPUCONF_PROBE_RENDEZVOUS_WAIT '") + env + "': expected seconds > 0 and <= 3600");
  }
  if (const char* env = std::getenv("GPUCONF_PROBE_TIMEOUT")) {
    if (!parse_seconds(env, &o.timeout_s))
      usage_error(std::string("invalid GPUCONF_PROBE_TIMEOUT '") + env + "': expected seconds > 0 and <= 86400");
  }
  if (const char* env = std::getenv("GPUCONF_PROBE_MEASURE_ALLOC")) {
    const std::string v = env;
    if (v != "0" && v != "1" && !v.empty())
      usage_error("invalid GPUCONF_PROBE_MEASURE_ALLOC '" + v + "': expected 1 or 0");
    o.measure_alloc = v == "1";
  }
  if (const char* env = std::getenv("GPUCONF_PROBE_COPY_MIB")) {
    if (!parse_mib(env, &o.copy_mib))
      usage_error(std::string("invalid GPUCONF_PROBE_COPY_MIB '") + env + "': expected an integer from 0 to " +
                  std::to_string(kMaxCopyMib));
  }
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string value;
    bool has_value = false;
    const size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_value = true;
    }
    auto take_value = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= argc) usage_error("option " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      if (has_value) usage_error("option " + a + " takes no value");
      std::fputs(kUsage, stdout);
      std::fflush(stdout);
      _exit(kExitOk);
    } else if (a == "--verbose") {
      if (has_value) usage_error("option --verbose takes no value");
      o.verbose = true;
    } else if (a == "--measure-alloc") {
      if (has_value) usage_error("option --measure-alloc takes no value");
      o.measure_alloc = true;
    } else if (a == "--timeout") {
      const std::string v = take_value();
      if (!parse_seconds(v, &o.timeout_s)) usage_error("invalid --timeout '" + v + "': expected seconds > 0 and <= 86400");
    } else if (a == "--copy-mib") {
      const std::string v = take_value();
      if (!parse_mib(v, &o.copy_mib))
        usage_error("invalid --copy-mib '" + v + "': expected an integer from 0 to " + std::to_string(kMaxCopyMib));
    } else if (a == "--rendezvous") {
      peers = take_value();
      have_peers = true;
    } else if (a == "--rendezvous-port") {
      const std::string v = take_value();
      if (!parse_port(v, 1025, &o.rendezvous_port))
        usage_error("invalid --rendezvous-port '" + v + "': expected a port from 1025 to 65535");
    } else if (a == "--rendezvous-wait") {
      const std::string v = take_value();
      if (!parse_wait(v, &o.rendezvous_wait_s))
        usage_error("invalid --rendezvous-wait '" + v + "': expected seconds > 0 and <= 3600");
    } else if (a == "--elements") {
      const std::string v = take_value();
      if (!parse_count(v, &o.elements))
        usage_error("invalid --elements '" + v + "': expected an integer from 1 to " + std::to_string(kMaxElements));
    } else {
      usage_error("unknown argument '" + a + "'");
    }
  }
  std::string why;
  if (have_peers && !parse_peers(peers, o.rendezvous_port, &o.rendezvous, &why))
    usage_error("invalid --rendezvous '" + peers + "': " + why);
  return o;
}

// ---------------------------------------------------------------------------------------------

std::pair<int, std::string> run(const Options& opt) {
  // The PTX-only kernel must be JIT-compiled when it is launched, not when the context is made
  // (eager loading would turn a 222 into an init failure). Record what the environment said.
  const char* ml = std::getenv("CUDA_MODULE_LOADING");
  const std::string original_ml = ml ? ml : "";
  if (!ml) ::setenv("CUDA_MODULE_LOADING", "LAZY", 1);

  Json* root = &g.doc;
  locked([&] {
    Json probe = Json::object();
    probe.set("version", kProbeVersion);
    probe.set("built_with_cuda", version_string(CUDART_VERSION));
    probe.set("archs", GPUCONF_ARCHS);
    probe.set("timeout_s", opt.timeout_s);
    root->set("schema", kSchema);
    root->set("probe", std::move(probe));
    root->set("started_at", utc_now_rfc3339());
    root->set("duration_ms", 0.0);
    root->set("exit_code", kExitInternal);
    root->set("exit_reason", "probe did not finish");
    root->set("hostname", hostname());
    root->set("env", read_env(ml ? original_ml.c_str() : nullptr));
    root->set("device_nodes", read_device_nodes());
    Json placeholder = Json::object();
    placeholder.set("value", 0);
    placeholder.set("version", nullptr);
    root->set("runtime", placeholder);
    root->set("driver", placeholder);
    root->set("libcuda", Json::absent("not read: the probe stopped before CUDA init returned"));
    root->set("init", not_run_result("cudaFree(0)", "not called yet"));
    Json dc = Json::object();
    dc.set("value", 0);
    dc.set("result", not_run_result("cudaGetDeviceCount", "not called: the probe stopped earlier"));
    root->set("device_count", std::move(dc));
    root->set("devices", Json::array());
    root->set("nvml", Json::absent("not read: the probe stopped before NVML was queried"));
  });

  // Layer 3: the cudart linked into this binary (needs no driver).
  int rt = 0;
  cudaError_t rte = cuda_call("cudaRuntimeGetVersion", nullptr, "", [&] { return cudaRuntimeGetVersion(&rt); });
  locked([&] {
    Json& r = root->set("runtime", Json::object());
    r.set("value", rt);
    r.set("version", rt ? Json(version_string(rt)) : Json(nullptr));
    if (rte != cudaSuccess) r.set("result", cuda_result("cudaRuntimeGetVersion", rte, 0));
  });

  // Context creation: where a version mismatch (35), a missing device (100) or a hung driver shows.
  double init_ms = 0;
  const cudaError_t init = cuda_call("cudaFree(0)", root, "init", [] { return cudaFree(nullptr); }, &init_ms);
  locked([&] { root->set("init", cuda_result("cudaFree(0)", init, init_ms)); });
  const std::string init_summary = "cudaFree(0) returned " + describe(init);

  // Layer 2: what the loaded libcuda supports (0 when none was loaded).
  Json* driver = nullptr;
  locked([&] { driver = root->find("driver"); });
  int dv = 0;
  double dv_ms = 0;
  const cudaError_t dve = cuda_call("cudaDriverGetVersion", driver, "result", [&] { return cudaDriverGetVersion(&dv); }, &dv_ms);
  locked([&] {
    driver->set("value", dv);
    driver->set("version", dv ? Json(version_string(dv)) : Json(nullptr));
    driver->set("result", cuda_result("cudaDriverGetVersion", dve, dv_ms));
  });

  // Which libcuda the process got. cudart unloads libcuda again when init fails, so then the probe
  // loads libcuda.so.1 itself, by the same name and search path cudart uses, to see which file
  // that resolves to (or why none does).
  {
    std::string name;
    std::string path = mapped_libcuda(&name);
    std::string why;
    if (path.empty()) {
      void* h = guarded("dlopen(libcuda.so.1)",
                        [root](double) { root->set("libcuda", Json::absent("dlopen(libcuda.so.1) did not return in time (watchdog)")); },
                        [&]() -> void* {
                          ::dlerror();
                          void* hh = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
                          if (!hh) {
                            const char* e = ::dlerror();
                            why = e ? e : "dlopen(libcuda.so.1) failed";
                          }
                          return hh;
                        });
      if (h) path = mapped_libcuda(&name);  // kept open: the mapping stays for the rest of the run
      else why = "no libcuda.so* mapped after " + init_summary + "; dlopen: " + why;
      if (h && path.empty()) why = "libcuda.so.1 loaded but not found in /proc/self/maps";
    }
    locked([&] { root->set("libcuda", path.empty() ? Json::absent(why) : libcuda_json(path, name)); });
  }

  int exit_code = kExitOk;
  std::string exit_reason;
  std::vector<CudaDeviceRef> cuda_devices;

  // Asked even when init failed, so the document holds the runtime's real answer.
  Json* dc = nullptr;
  locked([&] { dc = root->find("device_count"); });
  int count = 0;
  double cms = 0;
  const cudaError_t ce = cuda_call("cudaGetDeviceCount", dc, "result", [&] { return cudaGetDeviceCount(&count); }, &cms);
  if (ce != cudaSuccess) count = 0;  // cudaGetDeviceCount leaves it unset on error
  locked([&] {
    dc->set("value", count);
    dc->set("result", cuda_result("cudaGetDeviceCount", ce, cms));
  });

  if (init != cudaSuccess) {
    exit_code = init == cudaErrorNoDevice ? kExitNoDevice : kExitInit;
    exit_reason = (exit_code == kExitNoDevice ? "no CUDA device: " : "CUDA init failed: ") + init_summary;
  } else {
    if (ce != cudaSuccess) {
      exit_code = ce == cudaErrorNoDevice ? kExitNoDevice : kExitInit;
      exit_reason = std::string(exit_code == kExitNoDevice ? "no CUDA device: " : "CUDA init failed: ") +
                    "cudaGetDeviceCount returned " + describe(ce);
    } else if (count == 0) {
      exit_code = kExitNoDevice;
      exit_reason = "no CUDA device: cudaGetDeviceCount returned 0";
    }

    Json* devices = nullptr;
    locked([&] { devices = root->find("devices"); });
    std::vector<int> vector_failed, jit_failed;
    std::string first_vector_reason, first_jit_reason;
    for (int i = 0; i < count; ++i) {
      const std::string sfx = "(device " + std::to_string(i) + ")";
      Json* dev = nullptr;
      locked([&] {
        Json d = Json::object();
        d.set("index", i);
        // Unknown until cudaGetDeviceProperties answers: null, never a placeholder value.
        d.set("name", nullptr);
        d.set("uuid", nullptr);
        d.set("pci_bus_id", nullptr);
        d.set("total_memory_bytes", nullptr);
        d.set("compute_capability", nullptr);
        d.set("mig", nullptr);
        d.set("mig_source", "none");
        d.set("multiprocessors", nullptr);
        Json pending = Json::object();
        pending.set("ok", false);
        pending.set("result", not_run_result("", "not run yet"));
        d.set("vector_add", pending);
        d.set("ptx_jit", pending);
        d.set("properties", not_run_result("cudaGetDeviceProperties" + sfx, "not called yet"));
        dev = &devices->push(std::move(d));
      });
      cudaDeviceProp prop;
      std::memset(&prop, 0, sizeof prop);
      double pms = 0;
      const cudaError_t pe = cuda_call("cudaGetDeviceProperties" + sfx, dev, "properties",
                                       [&] { return cudaGetDeviceProperties(&prop, i); }, &pms);
      char bus[64] = {0};
      cudaError_t be = cudaErrorUnknown;
      if (pe == cudaSuccess) {
        be = cuda_call("cudaDeviceGetPCIBusId" + sfx, nullptr, "", [&] { return cudaDeviceGetPCIBusId(bus, sizeof bus - 1, i); });
      }
      CudaDeviceRef ref{dev, {0}, ""};
      ref.index = i;
      locked([&] {
        dev->set("properties", cuda_result("cudaGetDeviceProperties" + sfx, pe, pms));
        if (pe != cudaSuccess) return;
        prop.name[sizeof prop.name - 1] = '\0';
        const std::string name = prop.name;
        const bool mig_by_name = name_says_mig(name);
        std::memcpy(ref.uuid, prop.uuid.bytes, 16);
        ref.name = name;
        ref.mig = mig_by_name;
        dev->set("name", name);
        dev->set("uuid", format_uuid(ref.uuid, mig_by_name ? "MIG" : "GPU"));
        if (be == cudaSuccess) {
          dev->set("pci_bus_id", std::string(bus));
        } else {
          char fallback[64];
          std::snprintf(fallback, sizeof fallback, "%04x:%02x:%02x.0", prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
          dev->set("pci_bus_id", std::string(fallback));
        }
        dev->set("total_memory_bytes", static_cast<unsigned long long>(prop.totalGlobalMem));
        dev->set("compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor));
        // CUDA names a MIG instance "<GPU> MIG <profile>"; NVML, when loaded, confirms below.
        dev->set("mig", mig_by_name);
        dev->set("mig_source", "name");
        dev->set("multiprocessors", prop.multiProcessorCount);
      });
      // Host-device copies: measured after NVML has the device's handle (run_nvml), so its PCIe
      // link is read while they run; a MIG instance is not measured (a slice of the copy engines).
      if (opt.copy_mib == 0) {
        locked([&] { dev->set("host_device_bw", Json::absent("not measured: --copy-mib 0")); });
      } else if (pe != cudaSuccess) {
        locked([&] { dev->set("host_device_bw", Json::absent("not measured: cudaGetDeviceProperties returned " + describe(pe))); });
      } else {
        locked([&] {
          Json b = Json::object();
          b.set("ok", false);
          b.set("bytes", opt.copy_mib << 20);
          b.set("iterations", kCopyIterations);
          b.set("result", not_run_result("host_device_bw" + sfx, "not run yet"));
          ref.bw = &dev->set("host_device_bw", std::move(b));
        });
      }
      if (pe == cudaSuccess) cuda_devices.push_back(ref);

      Json* va = nullptr;
      Json* pj = nullptr;
      locked([&] {
        Json v = Json::object();
        v.set("ok", false);
        v.set("verified", false);
        v.set("elements", opt.elements);
        v.set("result", not_run_result("vector_add" + sfx, "not run yet"));
        va = &dev->set("vector_add", std::move(v));
        Json p = Json::object();
        p.set("ok", false);
        p.set("verified", false);
        p.set("ptx_target", GPUCONF_PTX_TARGET);
        p.set("result", not_run_result("ptx_jit" + sfx, "not run yet"));
        pj = &dev->set("ptx_jit", std::move(p));
      });
      DeviceOutcome out;
      double sms = 0;
      const cudaError_t se = cuda_call("cudaSetDevice" + sfx, va, "result", [&] { return cudaSetDevice(i); }, &sms);
      if (se != cudaSuccess) {
        out.vector_reason = "cudaSetDevice returned " + describe(se);
        out.jit_reason = out.vector_reason;
        locked([&] {
          va->set("result", cuda_result("cudaSetDevice" + sfx, se, sms));
          pj->set("result", cuda_result("cudaSetDevice" + sfx, se, sms));
        });
      } else {
        run_vector_add(i, va, opt.elements, &out);
        run_ptx_jit(i, pj, &out);
      }
      if (opt.measure_alloc) {
        // Measured last, after both kernels freed their buffers; it decides no exit code.
        Json* la = nullptr;
        locked([&] {
          Json l = Json::object();
          l.set("ok", false);
          l.set("result", not_run_result("largest_alloc" + sfx, "not run yet"));
          la = &dev->set("largest_alloc", std::move(l));
        });
        if (pe != cudaSuccess || se != cudaSuccess) {
          const std::string why = pe != cudaSuccess ? "cudaGetDeviceProperties returned " + describe(pe)
                                                    : "cudaSetDevice returned " + describe(se);
          locked([&] { dev->set("largest_alloc", Json::absent("not measured: " + why)); });
        } else {
          run_largest_alloc(i, prop.totalGlobalMem, la);
        }
        // Then which SMs this client's kernels may occupy (an MPS active thread percentage).
        Json* so = nullptr;
        locked([&] {
          Json o = Json::object();
          o.set("ok", false);
          o.set("result", not_run_result("sm_occupancy" + sfx, "not run yet"));
          so = &dev->set("sm_occupancy", std::move(o));
        });
        if (pe != cudaSuccess || se != cudaSuccess) {
          const std::string why = pe != cudaSuccess ? "cudaGetDeviceProperties returned " + describe(pe)
                                                    : "cudaSetDevice returned " + describe(se);
          locked([&] { dev->set("sm_occupancy", Json::absent("not measured: " + why)); });
        } else {
          run_sm_occupancy(i, prop.multiProcessorCount, so);
        }
      }
      if (!out.vector_ok) {
        vector_failed.push_back(i);
        if (first_vector_reason.empty()) first_vector_reason = "device " + std::to_string(i) + ": " + out.vector_reason;
      }
      if (!out.jit_ok) {
        jit_failed.push_back(i);
        if (first_jit_reason.empty()) first_jit_reason = "device " + std::to_string(i) + ": " + out.jit_reason;
      }
    }
    auto join = [](const std::vector<int>& v) {
      std::string s;
      for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
      return s;
    };
    if (exit_code == kExitOk) {
      if (!vector_failed.empty()) {
        exit_code = kExitVectorAdd;
        exit_reason = "vector_add failed on device(s) " + join(vector_failed) + "; first: " + first_vector_reason;
      } else if (!jit_failed.empty()) {
        exit_code = kExitPtxJit;
        exit_reason = "only ptx_jit failed, on device(s) " + join(jit_failed) + "; first: " + first_jit_reason;
      } else {
        exit_reason = "ok: " + std::to_string(count) + " device(s) passed vector_add and ptx_jit";
      }
    }
  }

  const size_t copy_bytes = static_cast<size_t>(opt.copy_mib) << 20;
  std::vector<std::string> nvml_uuids;
  run_nvml(root, cuda_devices, copy_bytes, &nvml_uuids);
  // Without NVML (or before it listed the device) the copies are measured all the same.
  for (auto& cd : cuda_devices) {
    if (!cd.bw || cd.measured) continue;
    cd.measured = true;
    if (cd.mig) {
      locked([&] {
        cd.json->set("host_device_bw",
                     Json::absent("not measured: a MIG instance (its copy engines are a slice of the GPU's)"));
      });
      continue;
    }
    run_host_device_bw(cd.index, copy_bytes, cd.bw, LinkSampler{});
  }
  if (!opt.rendezvous.empty()) {
    // The CUDA context is still held (it lives until the process exits): the devices are this
    // probe's while it waits.
    std::vector<std::string> cuda;
    for (const auto& cd : cuda_devices) cuda.push_back(format_uuid(cd.uuid, cd.mig ? "MIG" : "GPU"));
    run_rendezvous(root, opt.rendezvous, opt.rendezvous_port, opt.rendezvous_wait_s, cuda, nvml_uuids);
  }
  return {exit_code, exit_reason};
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse_args(argc, argv);  // exits 2 on a bad flag, 0 after --help
  g.timeout_s = opt.timeout_s;
  g.verbose = opt.verbose;

  int code = kExitInternal;
  std::string reason;
  std::thread watchdog;
  try {
    watchdog = std::thread(watchdog_main);
    std::tie(code, reason) = run(opt);
  } catch (const std::exception& e) {
    code = kExitInternal;
    reason = std::string("internal error: ") + e.what();
  } catch (...) {
    code = kExitInternal;
    reason = "internal error: unknown exception";
  }
  {
    std::lock_guard<std::mutex> lk(g.mu);
    g.finished = true;
    g.inflight = false;
    finish_document_locked(code, reason);
    write_all(1, g.doc.dump() + "\n");
  }
  g.cv.notify_all();
  if (watchdog.joinable()) watchdog.join();
  // _exit: skip cudart's atexit teardown, which can hang on a broken driver after the verdict is out.
  _exit(code);
}
