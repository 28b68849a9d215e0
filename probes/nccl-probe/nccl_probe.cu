// nccl-probe: all-reduce (sum, float32) bandwidth and correctness over every GPU the process sees,
// in one process or across several (--rank/--world-size/--id-addr, unique id shared over TCP).
// Prints exactly one JSON document on stdout (gpuconf/probe_schemas/nccl-probe.v1.json).
//
// Exit codes: 0 ok; 2 usage (one line on stderr, no JSON); 3 a CUDA or NCCL call failed (init or
// later); 4 no GPU visible; 5 wrong all-reduce results; 6 a collective, NCCL init or the bootstrap
// timed out (watchdog); 7 bootstrap failed (unique id not obtained, peers disagree); 8 internal.
//
// Build: probes/nccl-probe/build.sh OUT_BINARY. See README.md next to this file.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <fstream>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <csignal>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "bootstrap.h"
#include "json.h"

#ifndef PROBE_ARCHS
#define PROBE_ARCHS "unknown"
#endif

using gpuconf::Json;

namespace {

// Exact doubles (the busbw arithmetic is checked to 1e-9) and short scalar arrays on one line.
constexpr gpuconf::JsonFormat kJsonFormat{true, 16};

constexpr const char* kProbeVersion = "0.1.0";  // gpuconf/data/probe_images.yaml probe_version
constexpr const char* kSchemaId = "gpuconf.nccl-probe/v1";

enum ExitCode {
  kExitOk = 0,
  kExitUsage = 2,
  kExitCudaNccl = 3,
  kExitNoGpu = 4,
  kExitWrongResult = 5,
  kExitTimeout = 6,
  kExitBootstrap = 7,
  kExitInternal = 8,
};

constexpr unsigned long long kKiB = 1024ULL, kMiB = kKiB * 1024, kGiB = kMiB * 1024;
constexpr unsigned long long kLargeMessageBytes = 64 * kMiB;  // summary average threshold
constexpr unsigned long long kFewerItersBytes = 256 * kMiB;   // sizes >= this run iters/4
constexpr double kAbortWaitS = 20.0;                          // bound on ncclCommAbort
constexpr size_t kExcerptMax = 60;
constexpr size_t kMaxLineChars = 300;

// ---------------------------------------------------------------------------------------------
// options
// ---------------------------------------------------------------------------------------------
struct Options {
  bool multi = false;
  int rank = 0;
  int world = 1;
  std::string id_host;
  int id_port = 0;
  std::string id_addr;
  double bootstrap_timeout_s = 120.0;
  double timeout_s = 300.0;
  unsigned long long min_bytes = 8;
  unsigned long long max_bytes = 4 * kGiB;
  unsigned long long step_factor = 2;
  int warmup = 5;
  int iters = 20;
  bool bootstrap_only = false;
  bool self_test_busbw = false;
  bool help = false;
};

const char* kUsage =
    "usage: nccl-probe [--min-bytes N] [--max-bytes N] [--step-factor F] [--warmup N] [--iters N]\n"
    "                  [--timeout S] [--rank R --world-size W --id-addr HOST:PORT [--bootstrap-timeout S]]\n"
    "                  [--bootstrap-only] [--self-test-busbw] [--help]\n"
    "  sizes take K/M/G/T suffixes (binary). Defaults: 8 .. 4G, factor 2, warmup 5, iters 20,\n"
    "  timeout 300 s per collective step, bootstrap timeout 120 s.\n"
    "  One JSON document on stdout. Exit: 0 ok, 2 usage, 3 CUDA/NCCL failure, 4 no GPU,\n"
    "  5 wrong results, 6 timeout, 7 bootstrap failed, 8 internal.\n";

[[noreturn]] void usage_error(const std::string& msg) {
  std::string line = "nccl-probe: " + msg + " (see --help)\n";
  ssize_t w = write(2, line.data(), line.size());
  (void)w;
  _exit(kExitUsage);
}

bool parse_u64(const std::string& s, unsigned long long* out, bool allow_suffix) {
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno != 0) return false;
  std::string rest(end);
  unsigned long long mul = 1;
  if (!rest.empty()) {
    if (!allow_suffix) return false;
    char c = static_cast<char>(std::toupper(static_cast<unsigned char>(rest[0])));
    std::string tail = rest.substr(1);
    if (c == 'K') mul = kKiB;
    else if (c == 'M') mul = kMiB;
    else if (c == 'G') mul = kGiB;
    else if (c == 'T') mul = kGiB * 1024;
    else return false;
    if (!(tail.empty() || tail == "B" || tail == "b" || tail == "iB")) return false;
  }
  if (mul != 1 && v > ~0ULL / mul) return false;
  *out = v * mul;
  return true;
}

bool parse_double(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || *end != '\0' || !(v > 0) || v > 1e7) return false;
  *out = v;
  return true;
}

Options parse_args(int argc, char** argv) {
  Options o;
  bool have_rank = false, have_world = false, have_addr = false;
  for (int k = 1; k < argc; ++k) {
    std::string a = argv[k], val;
    bool has_eq = false;
    if (a.rfind("--", 0) == 0) {
      size_t eq = a.find('=');
      if (eq != std::string::npos) {
        val = a.substr(eq + 1);
        a = a.substr(0, eq);
        has_eq = true;
      }
    }
    auto need = [&](void) -> std::string {
      if (has_eq) return val;
      if (k + 1 >= argc) usage_error(a + " needs a value");
      return argv[++k];
    };
    auto flag_only = [&](void) {
      if (has_eq) usage_error(a + " takes no value");
    };
    unsigned long long u = 0;
    if (a == "--help" || a == "-h") { flag_only(); o.help = true; }
    else if (a == "--bootstrap-only") { flag_only(); o.bootstrap_only = true; }
    else if (a == "--self-test-busbw") { flag_only(); o.self_test_busbw = true; }
    else if (a == "--rank") {
      std::string v = need();
      if (!parse_u64(v, &u, false) || u > 1000000) usage_error("--rank: not a rank: " + v);
      o.rank = static_cast<int>(u);
      have_rank = true;
    } else if (a == "--world-size") {
      std::string v = need();
      if (!parse_u64(v, &u, false) || u < 1 || u > 1000000) usage_error("--world-size: not a world size: " + v);
      o.world = static_cast<int>(u);
      have_world = true;
    } else if (a == "--id-addr") {
      std::string v = need();
      std::string host, port;
      if (!v.empty() && v[0] == '[') {
        size_t rb = v.find(']');
        if (rb == std::string::npos || rb + 1 >= v.size() || v[rb + 1] != ':') usage_error("--id-addr: expected HOST:PORT, got " + v);
        host = v.substr(1, rb - 1);
        port = v.substr(rb + 2);
      } else {
        size_t c = v.rfind(':');
        if (c == std::string::npos || c == 0) usage_error("--id-addr: expected HOST:PORT, got " + v);
        host = v.substr(0, c);
        port = v.substr(c + 1);
      }
      if (!parse_u64(port, &u, false) || u < 1 || u > 65535) usage_error("--id-addr: bad port in " + v);
      o.id_host = host;
      o.id_port = static_cast<int>(u);
      o.id_addr = v;
      have_addr = true;
    } else if (a == "--bootstrap-timeout") {
      std::string v = need();
      if (!parse_double(v, &o.bootstrap_timeout_s)) usage_error("--bootstrap-timeout: not a positive number of seconds: " + v);
    } else if (a == "--timeout") {
      std::string v = need();
      if (!parse_double(v, &o.timeout_s)) usage_error("--timeout: not a positive number of seconds: " + v);
    } else if (a == "--min-bytes") {
      std::string v = need();
      if (!parse_u64(v, &o.min_bytes, true)) usage_error("--min-bytes: not a size: " + v);
    } else if (a == "--max-bytes") {
      std::string v = need();
      if (!parse_u64(v, &o.max_bytes, true)) usage_error("--max-bytes: not a size: " + v);
    } else if (a == "--step-factor") {
      std::string v = need();
      if (!parse_u64(v, &o.step_factor, false) || o.step_factor < 2 || o.step_factor > 1024)
        usage_error("--step-factor: expected an integer 2..1024, got " + v);
    } else if (a == "--warmup") {
      std::string v = need();
      if (!parse_u64(v, &u, false) || u > 100000) usage_error("--warmup: expected 0..100000, got " + v);
      o.warmup = static_cast<int>(u);
    } else if (a == "--iters") {
      std::string v = need();
      if (!parse_u64(v, &u, false) || u < 1 || u > 100000) usage_error("--iters: expected 1..100000, got " + v);
      o.iters = static_cast<int>(u);
    } else {
      usage_error("unknown argument: " + std::string(argv[k]));
    }
  }
  if (o.help || o.self_test_busbw) return o;
  if (have_rank || have_world || have_addr) {
    if (!(have_rank && have_world && have_addr)) usage_error("--rank, --world-size and --id-addr go together");
    if (o.rank >= o.world) usage_error("--rank must be below --world-size");
    o.multi = true;
  } else if (o.bootstrap_only) {
    usage_error("--bootstrap-only needs --rank, --world-size and --id-addr");
  }
  if (o.min_bytes < 4 || o.min_bytes % 4 != 0) usage_error("--min-bytes must be a positive multiple of 4 (float32)");
  if (o.max_bytes < o.min_bytes) usage_error("--max-bytes is below --min-bytes");
  return o;
}

// ---------------------------------------------------------------------------------------------
// arithmetic
// ---------------------------------------------------------------------------------------------
// algbw in GB/s (1e9 bytes/s): bytes moved per rank / time. busbw = algbw * 2(n-1)/n (all-reduce).
double algbw_gbps(unsigned long long bytes, double time_us) {
  return time_us > 0 ? static_cast<double>(bytes) / (time_us * 1e-6) / 1e9 : 0.0;
}
double busbw_factor(int nranks) { return nranks > 0 ? 2.0 * (nranks - 1) / nranks : 0.0; }
double busbw_gbps(unsigned long long bytes, double time_us, int nranks) {
  return algbw_gbps(bytes, time_us) * busbw_factor(nranks);
}

// ---------------------------------------------------------------------------------------------
// global report state (the hard watchdog thread may print it)
// ---------------------------------------------------------------------------------------------
struct Global {
  std::mutex mu;
  Json root;
  std::atomic<bool> emitted{false};
  int out_fd = 1;
  double t0 = 0;
  // watchdog: the step now running and when it must be over (0: none)
  std::string step;
  double step_deadline = 0;
  double step_timeout = 0;
  double grace_s = 15.0;  // the hard watchdog fires this long after a step's deadline
  // NCCL debug capture
  bool debug_by_probe = false;
  bool debug_by_user = false;
  std::string debug_dir;
  std::string debug_file;  // the file to parse (probe's own, or the user's plain path)
  std::vector<ncclComm_t> comms;
};
Global G;

double now_s() { return boot::now_s(); }

void write_out(const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t w = write(G.out_fd, s.data() + off, s.size() - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    off += static_cast<size_t>(w);
  }
}

template <class F>
void with_root(F f) {
  std::lock_guard<std::mutex> lock(G.mu);
  f(G.root);
}

Json cuda_result(const char* call, cudaError_t e) {
  Json j = Json::object();
  j["call"] = call;
  j["code"] = static_cast<int>(e);
  j["name"] = cudaGetErrorName(e);
  j["message"] = cudaGetErrorString(e);
  return j;
}

const char* nccl_result_name(int r) {
  switch (r) {
    case 0: return "ncclSuccess";
    case 1: return "ncclUnhandledCudaError";
    case 2: return "ncclSystemError";
    case 3: return "ncclInternalError";
    case 4: return "ncclInvalidArgument";
    case 5: return "ncclInvalidUsage";
    case 6: return "ncclRemoteError";
    case 7: return "ncclInProgress";
    case 8: return "ncclTimeout";
    default: return "ncclUnknownResult";
  }
}

Json nccl_result(const char* call, ncclResult_t r, ncclComm_t comm = nullptr) {
  Json j = Json::object();
  j["call"] = call;
  j["code"] = static_cast<int>(r);
  j["name"] = nccl_result_name(static_cast<int>(r));
  j["message"] = ncclGetErrorString(r);
  const char* last = r == ncclSuccess ? nullptr : ncclGetLastError(comm);
  j["last_error"] = (last && *last) ? Json(last) : Json(nullptr);
  return j;
}

std::string version_text(int v) {
  if (v <= 0) return "";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string rfc3339_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// ---------------------------------------------------------------------------------------------
// NCCL debug output
// ---------------------------------------------------------------------------------------------
const char* kEnvReported[] = {
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE",
    "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_DISABLE", "NCCL_NET", "NCCL_NET_PLUGIN", "NCCL_NET_GDR_LEVEL",
    "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE", "NCCL_NVLS_ENABLE", "NCCL_CUMEM_ENABLE",
    "NCCL_ALGO", "NCCL_PROTO", "NCCL_TOPO_FILE", "NCCL_MNNVL_ENABLE"};

void setup_debug_capture() {
  Json& d = G.root["nccl_debug"];
  d = Json::object();
  const char* user = std::getenv("NCCL_DEBUG");
  if (user != nullptr) {
    d["source"] = "user";
    G.debug_by_user = true;
    const char* f = std::getenv("NCCL_DEBUG_FILE");
    if (f != nullptr && std::strchr(f, '%') == nullptr) G.debug_file = f;
    return;
  }
  d["source"] = "probe";
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/nccl-probe-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    // Without a private file NCCL would print to stdout (which is redirected to stderr anyway);
    // keep NCCL quiet instead and say why nothing was captured.
    d["setup_error"] = boot::errno_text("mkdtemp", errno);
    setenv("NCCL_DEBUG", "WARN", 1);
    return;
  }
  G.debug_dir = buf.data();
  G.debug_file = G.debug_dir + "/nccl-debug.log";
  G.debug_by_probe = true;
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT,NET,GRAPH,ENV,BOOTSTRAP", 1);
  setenv("NCCL_DEBUG_FILE", G.debug_file.c_str(), 1);
}

std::string strip_prefix(const std::string& line) {
  // "host:pid:tid [dev] NCCL INFO text" -> "NCCL INFO text" is kept whole; only trim length.
  std::string s = line;
  if (!s.empty() && s.back() == '\r') s.pop_back();
  if (s.size() > kMaxLineChars) s = s.substr(0, kMaxLineChars) + "...";
  return s;
}

bool contains(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

// Reads the NCCL debug file and extracts what the suite needs to judge the transport.
Json parse_debug(Json base) {
  Json d = std::move(base);
  d["settings"] = Json::object();
  for (const char* k : {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"}) {
    const char* v = std::getenv(k);
    d["settings"][k] = v ? Json(v) : Json(nullptr);
  }
  if (G.debug_file.empty()) {
    d["captured"] = false;
    d["reason"] = G.debug_by_user
                      ? "NCCL_DEBUG was set by the user without a plain NCCL_DEBUG_FILE; NCCL's output went to stderr"
                      : "no private debug file could be created";
    return d;
  }
  std::ifstream in(G.debug_file);
  if (!in) {
    d["captured"] = false;
    d["reason"] = "NCCL wrote no debug output (no NCCL call that logs was made)";
    return d;
  }
  std::vector<std::string> lines;
  std::string line;
  size_t bytes = 0;
  while (std::getline(in, line) && bytes < 64 * kMiB) {
    bytes += line.size() + 1;
    lines.push_back(line);
  }
  d["captured"] = true;
  d["lines_total"] = static_cast<long long>(lines.size());

  static const std::regex chan_re(
      R"(Channel (\d+)(?:/(\d+))? : (\d+)\[(\d+)\](?: -> (\d+)\[(\d+)\])?(?: \[(send|receive)\])? via (\S+))");
  static const std::regex nvls_ch_re(R"((\d+) nvls channels)");
  std::string version_line;
  std::set<std::string> transports, kinds;
  std::vector<std::string> net_lines, gdr_lines, nvls_lines, warn_lines;
  std::string network, plugin;
  long long channel_lines = 0;
  int nvls_support = -1, nvls_channels = -1, gdr = -1;
  bool nvls_connected = false;
  std::vector<size_t> pick;            // line indexes for the excerpt
  std::set<std::string> seen_transport_in_excerpt;

  for (size_t k = 0; k < lines.size(); ++k) {
    const std::string& l = lines[k];
    bool key = false;
    if (contains(l, " WARN ")) {
      if (warn_lines.size() < 10) warn_lines.push_back(strip_prefix(l));
      key = true;
    }
    size_t vp = l.find("NCCL version ");
    if (vp != std::string::npos && version_line.empty()) {
      std::string rest = l.substr(vp + 13);
      version_line = rest.substr(0, rest.find_first_of(" \t"));
      key = true;
    }
    size_t np = l.find("Using network ");
    if (np != std::string::npos) {
      network = l.substr(np + 14);
      while (!network.empty() && (network.back() == '\r' || network.back() == ' ')) network.pop_back();
      key = true;
    }
    if (contains(l, "NET/Plugin") || contains(l, "net plugin") || contains(l, "Loaded net plugin")) {
      if (plugin.empty() || contains(l, "Loaded")) plugin = strip_prefix(l);
      key = true;
    }
    if ((contains(l, "NET/") && (contains(l, " : Using ") || contains(l, "No device found"))) ||
        contains(l, "NET/IB : ") || contains(l, "NET/Socket : ")) {
      if (net_lines.size() < 8) net_lines.push_back(strip_prefix(l));
      key = true;
    }
    if (contains(l, "GPU Direct RDMA Enabled") || contains(l, "GPU Direct RDMA Disabled") ||
        contains(l, "DMA-BUF")) {
      if (contains(l, "Enabled")) gdr = 1;
      else if (contains(l, "Disabled") && gdr < 0) gdr = 0;
      if (gdr_lines.size() < 4) gdr_lines.push_back(strip_prefix(l));
      key = true;
    }
    if (contains(l, "NVLS multicast support is")) {
      if (contains(l, "is not available")) { if (nvls_support < 0) nvls_support = 0; }
      else nvls_support = 1;
      if (nvls_lines.size() < 4) nvls_lines.push_back(strip_prefix(l));
      key = true;
    }
    std::smatch m;
    if (contains(l, "nvls channels") && std::regex_search(l, m, nvls_ch_re)) {
      nvls_channels = std::max(nvls_channels, std::atoi(m[1].str().c_str()));
      key = true;
    }
    if (contains(l, "Connected NVLS") || contains(l, "NVLS comm ")) {
      nvls_connected = true;
      if (nvls_lines.size() < 4) nvls_lines.push_back(strip_prefix(l));
      key = true;
    }
    if (contains(l, "Init COMPLETE") || contains(l, "Bootstrap") || contains(l, "MNNVL") ||
        contains(l, "set by environment") || contains(l, "CollNet")) {
      key = true;
    }
    if (contains(l, " via ") && contains(l, "Channel ") && std::regex_search(l, m, chan_re)) {
      ++channel_lines;
      std::string t = m[8].str();
      transports.insert(t);
      std::string kind = t.substr(0, t.find('/'));
      kinds.insert(kind);
      if (contains(t.c_str(), "GDRDMA")) gdr = 1;
      if (seen_transport_in_excerpt.insert(t).second) key = true;
    }
    if (key) pick.push_back(k);
  }
  // excerpt: WARN lines first in priority, then the rest in file order, at most kExcerptMax
  std::vector<size_t> chosen;
  for (size_t k : pick) if (contains(lines[k], " WARN ") && chosen.size() < 10) chosen.push_back(k);
  for (size_t k : pick) {
    if (chosen.size() >= kExcerptMax) break;
    if (!contains(lines[k], " WARN ")) chosen.push_back(k);
  }
  std::sort(chosen.begin(), chosen.end());
  Json ex = Json::array();
  for (size_t k : chosen) ex.push(strip_prefix(lines[k]));

  d["nccl_version"] = version_line.empty() ? Json(nullptr) : Json(version_line);
  Json tj = Json::array();
  for (const auto& t : transports) tj.push(t);
  d["transports"] = tj;
  Json kj = Json::array();
  for (const auto& t : kinds) kj.push(t);
  d["transport_kinds"] = kj;
  d["channel_lines"] = channel_lines;
  Json& net = d["network"];
  net["name"] = network.empty() ? Json(nullptr) : Json(network);
  net["plugin"] = plugin.empty() ? Json(nullptr) : Json(plugin);
  Json nl = Json::array();
  for (const auto& s : net_lines) nl.push(s);
  net["lines"] = nl;
  Json& nv = d["nvls"];
  nv["supported"] = nvls_support < 0 ? Json(nullptr) : Json(nvls_support == 1);
  nv["channels"] = nvls_channels < 0 ? Json(nullptr) : Json(nvls_channels);
  nv["used"] = (nvls_channels < 0 && !nvls_connected) ? Json(nullptr) : Json(nvls_channels > 0 || nvls_connected);
  Json nvl = Json::array();
  for (const auto& s : nvls_lines) nvl.push(s);
  nv["lines"] = nvl;
  Json& g = d["gdr"];
  g["enabled"] = gdr < 0 ? Json(nullptr) : Json(gdr == 1);
  Json gl = Json::array();
  for (const auto& s : gdr_lines) gl.push(s);
  g["lines"] = gl;
  Json wl = Json::array();
  for (const auto& s : warn_lines) wl.push(s);
  d["warnings"] = wl;
  d["excerpt"] = ex;
  d["excerpt_truncated"] = pick.size() > chosen.size();
  return d;
}

void remove_debug_file() {
  if (!G.debug_by_probe) return;
  unlink(G.debug_file.c_str());
  rmdir(G.debug_dir.c_str());
}

// ---------------------------------------------------------------------------------------------
// emitting the document (exactly once, from whichever thread gets there first)
// ---------------------------------------------------------------------------------------------
void emit(int code, const std::string& reason, bool hung) {
  std::lock_guard<std::mutex> lock(G.mu);
  bool expected = false;
  if (!G.emitted.compare_exchange_strong(expected, true)) return;
  Json& r = G.root;
  r["duration_ms"] = (now_s() - G.t0) * 1000.0;
  r["exit_code"] = code;
  r["exit_reason"] = reason.empty() ? std::string("unspecified") : reason;
  r["hung"] = hung;
  r["watchdog"]["step"] = G.step.empty() ? Json(nullptr) : Json(G.step);
  Json base = r["nccl_debug"];
  try {
    r["nccl_debug"] = parse_debug(base);
  } catch (const std::exception& e) {
    base["captured"] = false;
    base["reason"] = std::string("parsing the debug output failed: ") + e.what();
    r["nccl_debug"] = base;
  }
  remove_debug_file();
  write_out(r.dump(kJsonFormat) + "\n");
}

[[noreturn]] void finish(int code, const std::string& reason, bool hung = false) {
  emit(code, reason, hung);
  std::fflush(stdout);  // NCCL's own lines when the user set NCCL_DEBUG without a file (fd 1 is stderr)
  std::fflush(stderr);
  _exit(code);
}

void begin_step(const std::string& name, double timeout_s) {
  std::lock_guard<std::mutex> lock(G.mu);
  G.step = name;
  G.step_timeout = timeout_s;
  G.step_deadline = now_s() + timeout_s;
}
void end_step() {
  std::lock_guard<std::mutex> lock(G.mu);
  G.step.clear();
  G.step_deadline = 0;
}
double step_deadline() {
  std::lock_guard<std::mutex> lock(G.mu);
  return G.step_deadline;
}

void watchdog_loop() {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::string step;
    double timeout = 0;
    {
      std::lock_guard<std::mutex> lock(G.mu);
      if (G.emitted) return;
      if (G.step_deadline <= 0 || now_s() <= G.step_deadline + G.grace_s) continue;
      step = G.step;
      timeout = G.step_timeout;
      G.root["watchdog"]["fired"] = true;
      G.root["watchdog"]["hard"] = true;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f", timeout + G.grace_s);
    emit(kExitTimeout,
         "watchdog: step '" + step + "' did not return within " + buf + " s (a CUDA/NCCL/system call blocked)", true);
    std::fflush(stderr);
    _exit(kExitTimeout);
  }
}

// ncclCommAbort on every communicator, bounded: a stuck abort must not hide the report.
void abort_comms() {
  if (G.comms.empty()) return;
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::vector<ncclComm_t> comms = G.comms;
  G.comms.clear();
  double t = now_s();
  std::thread th([comms, done]() {
    for (ncclComm_t c : comms) {
      if (c) ncclCommAbort(c);
    }
    done->store(true);
  });
  th.detach();
  while (!done->load() && now_s() - t < kAbortWaitS) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  with_root([&](Json& r) {
    Json& a = r["watchdog"]["abort"];
    a["attempted"] = true;
    a["completed"] = done->load();
    a["ms"] = (now_s() - t) * 1000.0;
  });
}

[[noreturn]] void fail(int code, const std::string& stage, Json result, const std::string& reason) {
  with_root([&](Json& r) {
    Json& f = r["failure"];
    f = Json::object();
    f["stage"] = stage;
    f["api"] = result.find("last_error") ? "nccl" : "cuda";
    f["result"] = result;
  });
  abort_comms();
  finish(code, reason);
}

[[noreturn]] void timed_out(const std::string& what) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f", G.step_timeout);
  with_root([&](Json& r) { r["watchdog"]["fired"] = true; });
  abort_comms();
  finish(kExitTimeout, what + " did not complete within " + buf + " s; communicators aborted", true);
}

std::string nccl_error_reason(const char* call, ncclResult_t r, ncclComm_t comm) {
  std::string s = std::string(call) + " failed: " + nccl_result_name(r) + " (" + ncclGetErrorString(r) + ")";
  const char* last = ncclGetLastError(comm);
  if (last && *last) s += ": " + std::string(last);
  return s;
}

std::string cuda_error_reason(const char* call, cudaError_t e) {
  return std::string(call) + " failed: " + cudaGetErrorName(e) + " (" + std::to_string(static_cast<int>(e)) +
         "): " + cudaGetErrorString(e);
}

#define CUDA_OR_FAIL(stage, call)                                                                   \
  do {                                                                                              \
    cudaError_t e_ = (call);                                                                        \
    if (e_ != cudaSuccess) fail(kExitCudaNccl, stage, cuda_result(#call, e_), cuda_error_reason(#call, e_)); \
  } while (0)

// Waits until no communicator is ncclInProgress; fails on an error, times out at the step deadline.
void wait_comms(const char* what) {
  const double deadline = step_deadline();
  for (;;) {
    bool busy = false;
    for (size_t i = 0; i < G.comms.size(); ++i) {
      ncclResult_t st = ncclSuccess;
      ncclResult_t r = ncclCommGetAsyncError(G.comms[i], &st);
      if (r != ncclSuccess) fail(kExitCudaNccl, what, nccl_result("ncclCommGetAsyncError", r, G.comms[i]),
                                 nccl_error_reason("ncclCommGetAsyncError", r, G.comms[i]));
      if (st == ncclInProgress) busy = true;
      else if (st != ncclSuccess)
        fail(kExitCudaNccl, what, nccl_result(what, st, G.comms[i]), nccl_error_reason(what, st, G.comms[i]));
    }
    if (!busy) return;
    if (now_s() > deadline) timed_out(what);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Waits for one event per GPU, watching the communicators for asynchronous errors.
void wait_events(const std::vector<cudaEvent_t>& evs, const char* what) {
  const double deadline = step_deadline();
  std::vector<bool> done(evs.size(), false);
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < evs.size(); ++i) {
      if (done[i]) continue;
      cudaError_t e = cudaEventQuery(evs[i]);
      if (e == cudaSuccess) { done[i] = true; continue; }
      if (e != cudaErrorNotReady) fail(kExitCudaNccl, what, cuda_result("cudaEventQuery", e), cuda_error_reason("cudaEventQuery", e));
      all = false;
    }
    if (all) return;
    for (size_t i = 0; i < G.comms.size(); ++i) {
      ncclResult_t st = ncclSuccess;
      if (ncclCommGetAsyncError(G.comms[i], &st) == ncclSuccess && st != ncclSuccess && st != ncclInProgress)
        fail(kExitCudaNccl, what, nccl_result(what, st, G.comms[i]), nccl_error_reason(what, st, G.comms[i]));
    }
    if (now_s() > deadline) timed_out(what);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// ---------------------------------------------------------------------------------------------
// kernels
// ---------------------------------------------------------------------------------------------
__global__ void fill_kernel(float* p, size_t n, float base, int mult) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    p[i] = base * static_cast<float>(i % static_cast<size_t>(mult) + 1);
  }
}

__global__ void check_kernel(const float* p, size_t n, float sum, int mult, unsigned long long* bad) {
  unsigned long long c = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    if (p[i] != sum * static_cast<float>(i % static_cast<size_t>(mult) + 1)) ++c;
  }
  if (c) atomicAdd(bad, c);
}

unsigned grid_for(size_t n) {
  size_t blocks = (n + 255) / 256;
  return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(blocks, 4096)));
}

// ---------------------------------------------------------------------------------------------
// pieces of the report
// ---------------------------------------------------------------------------------------------
std::string uuid_text(const cudaUUID_t& u) {
  const unsigned char* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char buf[48];
  std::snprintf(buf, sizeof buf, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return buf;
}

Json nccl_library() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    size_t p = line.find('/');
    if (p == std::string::npos) continue;
    std::string path = line.substr(p);
    std::string base = path.substr(path.rfind('/') + 1);
    if (base.rfind("libnccl.so", 0) == 0) {
      Json j = Json::object();
      j["available"] = true;
      j["path"] = path;
      return j;
    }
  }
  return Json::absent("libnccl.so is not mapped in /proc/self/maps");
}

Json self_test_busbw() {
  struct Case { int n; unsigned long long bytes; double time_us; };
  const Case cases[] = {{1, 1024, 10.0},          {2, 1ULL << 20, 100.0},     {4, 64 * kMiB, 1000.0},
                        {8, 1ULL << 30, 10000.0}, {8, 4 * kGiB, 15625.0},     {16, 8, 20.0},
                        {3, 3 * kMiB, 77.5}};
  Json j = Json::object();
  j["self_test"] = "busbw";
  j["formula"] = "algbw_gbps = bytes / (time_us * 1e-6) / 1e9; busbw_gbps = algbw_gbps * 2 * (nranks - 1) / nranks";
  Json arr = Json::array();
  for (const Case& c : cases) {
    Json e = Json::object();
    e["nranks"] = c.n;
    e["bytes"] = c.bytes;
    e["time_us"] = c.time_us;
    e["algbw_gbps"] = algbw_gbps(c.bytes, c.time_us);
    e["busbw_factor"] = busbw_factor(c.n);
    e["busbw_gbps"] = busbw_gbps(c.bytes, c.time_us, c.n);
    arr.push(e);
  }
  j["cases"] = arr;
  return j;
}

uint64_t args_hash(const Options& o) {
  std::string s = std::to_string(o.min_bytes) + "," + std::to_string(o.max_bytes) + "," +
                  std::to_string(o.step_factor) + "," + std::to_string(o.warmup) + "," + std::to_string(o.iters);
  return boot::fnv1a64(s.data(), s.size());
}

// ---------------------------------------------------------------------------------------------
// the run
// ---------------------------------------------------------------------------------------------
void init_report(const Options& o, int argc, char** argv) {
  (void)argc;
  (void)argv;
  Json& r = G.root;
  r = Json::object();
  r["schema"] = kSchemaId;
  Json& p = r["probe"];
  p["version"] = kProbeVersion;
  p["built_with_cuda"] = version_text(CUDART_VERSION);
  p["built_with_nccl"] = std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." + std::to_string(NCCL_PATCH);
  p["archs"] = PROBE_ARCHS;
  r["started_at"] = rfc3339_now();
  r["duration_ms"] = 0.0;
  r["exit_code"] = kExitInternal;
  r["exit_reason"] = "not finished";
  r["hung"] = false;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) r["hostname"] = host;
  Json& a = r["args"];
  a["mode"] = o.multi ? "multi-process" : "single-process";
  a["rank"] = o.rank;
  a["world_size"] = o.world;
  a["id_addr"] = o.multi ? Json(o.id_addr) : Json(nullptr);
  a["bootstrap_only"] = o.bootstrap_only;
  a["min_bytes"] = o.min_bytes;
  a["max_bytes"] = o.max_bytes;
  a["step_factor"] = o.step_factor;
  a["warmup"] = o.warmup;
  a["iters"] = o.iters;
  a["iters_large"] = std::max(1, o.iters / 4);
  a["iters_large_from_bytes"] = kFewerItersBytes;
  a["op"] = "sum";
  a["dtype"] = "float32";
  a["timeout_s"] = o.timeout_s;
  a["bootstrap_timeout_s"] = o.bootstrap_timeout_s;
  Json& env = r["env"];
  env = Json::object();
  for (const char* k : kEnvReported) {
    const char* v = std::getenv(k);
    env[k] = v ? Json(v) : Json(nullptr);
  }
  r["runtime"] = Json::absent("not reached");
  r["driver"] = Json::absent("not reached");
  r["nccl"] = Json::absent("not reached");
  r["nccl_debug"] = Json::object();
  r["nccl_debug"]["source"] = std::getenv("NCCL_DEBUG") ? "user" : "probe";
  r["failure"] = nullptr;
  r["device_count"] = Json::absent("not reached");
  r["local_gpus"] = Json::array();
  r["bootstrap"] = Json::absent("not reached");
  r["comm_init"] = Json::absent("not reached");
  r["nranks"] = nullptr;
  r["memory"] = Json::absent("not reached");
  r["sweep"] = Json::absent("not reached");
  r["summary"] = Json::absent("not reached");
  Json& w = r["watchdog"];
  w["timeout_s"] = o.timeout_s;
  // grace: --timeout/10, within 1..15 s
  G.grace_s = std::min(15.0, std::max(1.0, o.timeout_s / 10.0));
  w["grace_s"] = G.grace_s;
  w["fired"] = false;
  w["hard"] = false;
  w["step"] = nullptr;
  w["abort"] = nullptr;
}

void run(const Options& o) {
  {
    std::lock_guard<std::mutex> lock(G.mu);
    setup_debug_capture();
    int v = 0;
    ncclResult_t r = ncclGetVersion(&v);
    Json& n = G.root["nccl"];
    n = Json::object();
    n["version_code"] = v;
    n["version"] = r == ncclSuccess && v > 0
                       ? Json(std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." + std::to_string(v % 100))
                       : Json(nullptr);
    n["library"] = nccl_library();
  }

  // ---- versions (cudaDriverGetVersion already runs cuInit in cudart 13, so it is a bounded step)
  {
    int rv = 0, dv = 0;
    cudaRuntimeGetVersion(&rv);
    Json rj = Json::object(), dj = Json::absent("--bootstrap-only: CUDA is not used");
    rj["value"] = rv;
    rj["version"] = rv > 0 ? Json(version_text(rv)) : Json(nullptr);
    if (!o.bootstrap_only) {
      begin_step("cudaDriverGetVersion", o.timeout_s);
      cudaDriverGetVersion(&dv);
      end_step();
      dj = Json::object();
      dj["value"] = dv;
      dj["version"] = dv > 0 ? Json(version_text(dv)) : Json(nullptr);
    }
    with_root([&](Json& r) {
      r["runtime"] = rj;
      r["driver"] = dj;
    });
  }

  // ---- local GPUs
  int local = 0;
  bool cuda_failed = false;
  cudaError_t count_err = cudaSuccess;
  if (o.bootstrap_only) {
    with_root([](Json& r) { r["device_count"] = Json::absent("--bootstrap-only: CUDA is not used"); });
  } else {
    begin_step("cudaGetDeviceCount", o.timeout_s);
    count_err = cudaGetDeviceCount(&local);
    end_step();
    if (count_err != cudaSuccess) local = 0;
    cuda_failed = count_err != cudaSuccess && count_err != cudaErrorNoDevice;
    with_root([&](Json& r) {
      r["device_count"] = Json::object();
      r["device_count"]["value"] = local;
      r["device_count"]["result"] = cuda_result("cudaGetDeviceCount", count_err);
      if (count_err != cudaSuccess) {
        Json& f = r["failure"];
        f = Json::object();
        f["stage"] = "cudaGetDeviceCount";
        f["api"] = "cuda";
        f["result"] = cuda_result("cudaGetDeviceCount", count_err);
      }
    });
    for (int i = 0; i < local; ++i) {
      cudaDeviceProp prop{};
      begin_step("cudaGetDeviceProperties", o.timeout_s);
      CUDA_OR_FAIL("cudaGetDeviceProperties", cudaGetDeviceProperties(&prop, i));
      char bus[64] = {};
      CUDA_OR_FAIL("cudaDeviceGetPCIBusId", cudaDeviceGetPCIBusId(bus, sizeof bus, i));
      end_step();
      with_root([&](Json& r) {
        Json g = Json::object();
        g["index"] = i;
        g["name"] = prop.name;
        g["uuid"] = uuid_text(prop.uuid);
        g["pci_bus_id"] = bus;
        g["total_memory_bytes"] = static_cast<unsigned long long>(prop.totalGlobalMem);
        g["compute_capability"] = std::to_string(prop.major) + "." + std::to_string(prop.minor);
        g["global_rank"] = o.rank * local + i;
        r["local_gpus"].push(g);
      });
    }
  }
  const std::string cuda_reason = cuda_error_reason("cudaGetDeviceCount", count_err);

  // ---- unique id and bootstrap
  ncclUniqueId id{};
  bool id_ok = false;
  Json id_j = Json::object();
  const bool need_id_here = !o.multi ? (!cuda_failed && local > 0) : o.rank == 0;
  if (need_id_here) {
    begin_step("ncclGetUniqueId", o.timeout_s);
    ncclResult_t r = ncclGetUniqueId(&id);
    end_step();
    id_ok = r == ncclSuccess;
    id_j["obtained"] = id_ok;
    id_j["result"] = nccl_result("ncclGetUniqueId", r);
    if (id_ok) id_j["fingerprint"] = boot::hex64(boot::fnv1a64(&id, sizeof id));
  }

  Json b = Json::object();
  b["mode"] = o.multi ? "multi-process" : "single-process";
  b["rank"] = o.rank;
  b["world_size"] = o.world;
  if (o.multi) b["local_gpus_sent"] = o.bootstrap_only ? 0 : (cuda_failed ? -1 : local);
  if (!o.multi) {
    b["role"] = "local";
    b["status"] = (cuda_failed || local == 0) ? "not-run" : (id_ok ? "ok" : "id-unavailable");
    b["reason"] = (cuda_failed || local == 0) ? "no usable GPU: NCCL unique id not created"
                                              : "one process: the unique id is created and used locally";
    b["unique_id"] = need_id_here ? id_j : Json::absent("not created: no usable GPU");
    with_root([&](Json& r) { r["bootstrap"] = b; });
    if (cuda_failed) finish(kExitCudaNccl, cuda_reason);
    if (local == 0) {
      finish(kExitNoGpu, count_err == cudaErrorNoDevice ? cuda_reason : "cudaGetDeviceCount reports 0 GPUs");
    }
    if (!id_ok) {
      fail(kExitCudaNccl, "ncclGetUniqueId", id_j["result"], "ncclGetUniqueId failed: " +
           std::string(ncclGetLastError(nullptr) ? ncclGetLastError(nullptr) : ""));
    }
  } else {
    boot::Config cfg;
    cfg.rank = o.rank;
    cfg.world = o.world;
    cfg.host = o.id_host;
    cfg.port = o.id_port;
    cfg.timeout_s = o.bootstrap_timeout_s;
    cfg.bootstrap_only = o.bootstrap_only;
    cfg.local_gpus = o.bootstrap_only ? 0 : (cuda_failed ? -1 : local);
    cfg.args_hash = args_hash(o);
    b["id_addr"] = o.id_addr;
    b["args_hash"] = boot::hex64(cfg.args_hash);
    b["unique_id"] = o.rank == 0 ? id_j : Json::absent("only rank 0 creates the unique id");
    with_root([&](Json& r) { r["bootstrap"] = b; });
    begin_step("bootstrap", o.bootstrap_timeout_s + 10.0);
    boot::Outcome out;
    if (o.rank == 0) {
      out = boot::serve(cfg, reinterpret_cast<const unsigned char*>(&id), id_ok, b);
    } else {
      out = boot::fetch(cfg, b);
    }
    end_step();
    if (out.ok) {
      std::memcpy(&id, out.id, sizeof id);
      b["id_fingerprint"] = boot::hex64(boot::fnv1a64(&id, sizeof id));
    } else {
      b["id_fingerprint"] = nullptr;
    }
    b["status"] = out.ok ? "ok" : (out.status >= 0 ? boot::status_name(out.status) : (out.timed_out ? "timeout" : "failed"));
    b["reason"] = out.reason;
    b["agreed_local_gpus"] = out.ok ? Json(out.agreed_local_gpus) : Json(nullptr);
    with_root([&](Json& r) { r["bootstrap"] = b; });
    // Local causes first: a process whose own CUDA failed says so even when the bootstrap failed too.
    if (cuda_failed) finish(kExitCudaNccl, cuda_reason + "; bootstrap: " + out.reason);
    if (!o.bootstrap_only && local == 0) finish(kExitNoGpu, "no GPU visible; bootstrap: " + out.reason);
    if (!out.ok) {
      if (o.rank == 0 && !id_ok && out.status == boot::kIdUnavailable) {
        with_root([&](Json& r) {
          Json& f = r["failure"];
          f = Json::object();
          f["stage"] = "ncclGetUniqueId";
          f["api"] = "nccl";
          f["result"] = id_j["result"];
        });
      }
      if (out.timed_out) finish(kExitTimeout, "bootstrap timed out: " + out.reason, false);
      finish(kExitBootstrap, "bootstrap failed: " + out.reason);
    }
    if (o.bootstrap_only) finish(kExitOk, "bootstrap completed (--bootstrap-only: no CUDA, no collectives)");
  }

  // ---- communicators (non-blocking, so every step can be bounded and aborted)
  const int nranks = o.world * local;
  const int first_rank = o.rank * local;
  with_root([&](Json& r) { r["nranks"] = nranks; });
  G.comms.assign(static_cast<size_t>(local), nullptr);
  std::vector<cudaStream_t> streams(static_cast<size_t>(local));
  begin_step("comm-init", o.timeout_s);
  double t_init = now_s();
  for (int i = 0; i < local; ++i) {
    CUDA_OR_FAIL("cudaSetDevice", cudaSetDevice(i));
    CUDA_OR_FAIL("cudaStreamCreate", cudaStreamCreateWithFlags(&streams[static_cast<size_t>(i)], cudaStreamNonBlocking));
  }
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclResult_t gr = ncclGroupStart();
  if (gr != ncclSuccess) fail(kExitCudaNccl, "comm-init", nccl_result("ncclGroupStart", gr), nccl_error_reason("ncclGroupStart", gr, nullptr));
  for (int i = 0; i < local; ++i) {
    cudaSetDevice(i);
    ncclResult_t r = ncclCommInitRankConfig(&G.comms[static_cast<size_t>(i)], nranks, id, first_rank + i, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
      ncclGroupEnd();
      fail(kExitCudaNccl, "comm-init", nccl_result("ncclCommInitRankConfig", r, G.comms[static_cast<size_t>(i)]),
           nccl_error_reason("ncclCommInitRankConfig", r, G.comms[static_cast<size_t>(i)]));
    }
  }
  gr = ncclGroupEnd();
  if (gr != ncclSuccess && gr != ncclInProgress)
    fail(kExitCudaNccl, "comm-init", nccl_result("ncclGroupEnd", gr, G.comms[0]), nccl_error_reason("ncclCommInitRankConfig", gr, G.comms[0]));
  wait_comms("ncclCommInitRankConfig");
  end_step();
  with_root([&](Json& r) {
    Json c = Json::object();
    c["result"] = nccl_result("ncclCommInitRankConfig", ncclSuccess);
    c["ms"] = (now_s() - t_init) * 1000.0;
    c["nranks"] = nranks;
    Json gr_j = Json::array();
    for (int i = 0; i < local; ++i) gr_j.push(first_rank + i);
    c["global_ranks"] = gr_j;
    c["blocking"] = false;
    r["comm_init"] = c;
  });

  std::vector<cudaEvent_t> ev_start(static_cast<size_t>(local)), ev_stop(static_cast<size_t>(local));
  for (int i = 0; i < local; ++i) {
    CUDA_OR_FAIL("cudaSetDevice", cudaSetDevice(i));
    CUDA_OR_FAIL("cudaEventCreate", cudaEventCreate(&ev_start[static_cast<size_t>(i)]));
    CUDA_OR_FAIL("cudaEventCreate", cudaEventCreate(&ev_stop[static_cast<size_t>(i)]));
  }

  // ---- memory budget, agreed across all ranks with an ncclMin all-reduce (also the first collective)
  begin_step("agree-max-bytes", o.timeout_s);
  unsigned long long free_min = ~0ULL, total_min = ~0ULL, local_limit = ~0ULL, headroom_max = 0;
  std::vector<unsigned long long*> lim(static_cast<size_t>(local), nullptr);
  for (int i = 0; i < local; ++i) {
    CUDA_OR_FAIL("cudaSetDevice", cudaSetDevice(i));
    size_t fr = 0, tot = 0;
    CUDA_OR_FAIL("cudaMemGetInfo", cudaMemGetInfo(&fr, &tot));
    unsigned long long headroom = std::max<unsigned long long>(kGiB, tot / 10);
    unsigned long long limit = fr > headroom ? (fr - headroom) / 2 : 0;
    limit -= limit % 4;
    free_min = std::min<unsigned long long>(free_min, fr);
    total_min = std::min<unsigned long long>(total_min, tot);
    headroom_max = std::max(headroom_max, headroom);
    local_limit = std::min(local_limit, limit);
    CUDA_OR_FAIL("cudaMalloc", cudaMalloc(reinterpret_cast<void**>(&lim[static_cast<size_t>(i)]), 2 * sizeof(unsigned long long)));
  }
  const unsigned long long wanted = std::min(o.max_bytes, local_limit);
  for (int i = 0; i < local; ++i) {
    CUDA_OR_FAIL("cudaSetDevice", cudaSetDevice(i));
    // stream-ordered, so the all-reduce on the same stream sees the value
    CUDA_OR_FAIL("cudaMemcpyAsync", cudaMemcpyAsync(lim[static_cast<size_t>(i)], &wanted, sizeof wanted,
                                                    cudaMemcpyHostToDevice, streams[static_cast<size_t>(i)]));
  }
  double t_agree = now_s();
  gr = ncclGroupStart();
  for (int i = 0; i < local && (gr == ncclSuccess || gr == ncclInProgress); ++i) {
    gr = ncclAllReduce(lim[static_cast<size_t>(i)], lim[static_cast<size_t>(i)] + 1, 1, ncclUint64, ncclMin,
                       G.comms[static_cast<size_t>(i)], streams[static_cast<size_t>(i)]);
  }
  ncclResult_t ge = ncclGroupEnd();
  if (gr == ncclSuccess || gr == ncclInProgress) gr = ge;
  if (gr == ncclInProgress) wait_comms("ncclAllReduce(ncclMin, max bytes)");
  else if (gr != ncclSuccess) fail(kExitCudaNccl, "agree-max-bytes", nccl_result("ncclAllReduce", gr, G.comms[0]), nccl_error_reason("ncclAllReduce", gr, G.comms[0]));
  for (int i = 0; i < local; ++i) {
    CUDA_OR_FAIL("cudaSetDevice", cudaSetDevice(i));
    CUDA_OR_FAIL("cudaEventRecord", cudaEventRecord(ev_stop[static_cast<size_t>(i)], streams[static_cast<size_t>(i)]));
  }
  wait_events(ev_stop, "ncclAllReduce(ncclMin, max bytes)");
  unsigned long long agreed = ~0ULL;
  for (int i = 0; i < local; ++i) {
    unsigned long long v = 0;
    CUDA_OR_FAIL("cudaSetDevice", cudaSetDevice(i));
    CUDA_OR_FAIL("cudaMemcpy", cudaMemcpy(&v, lim[static_cast<size_t>(i)] + 1, sizeof v, cudaMemcpyDeviceToHost));
    agreed = std::min(agreed, v);
    cudaFree(lim[static_cast<size_t>(i)]);
  }
  end_step();
  with_root([&](Json& r) {
    Json m = Json::object();
    m["requested_max_bytes"] = o.max_bytes;
    m["local_limit_bytes"] = local_limit;
    m["agreed_max_bytes"] = agreed;
    m["reduced"] = agreed < o.max_bytes;
    m["reason"] = agreed < o.max_bytes
                      ? "send+recv buffers must fit in free GPU memory minus headroom on every rank (min over ranks)"
                      : "requested maximum fits";
    m["free_bytes_min"] = free_min;
    m["total_bytes_min"] = total_min;
    m["headroom_bytes"] = headroom_max;
    m["headroom_rule"] = "max(1 GiB, 10% of total) per GPU, after NCCL init; each buffer <= (free - headroom) / 2";
    m["agree_ms"] = (now_s() - t_agree) * 1000.0;
    r["memory"] = m;
  });
  if (agreed < o.min_bytes) {
    abort_comms();
    finish(kExitCudaNccl, "not enough free GPU memory for --min-bytes on some rank (agreed max " +
                              std::to_string(agreed) + " bytes)");
  }

  // ---- buffers and inputs: element i of global rank g is (g+1)*(i%mult+1); the exact sum is
  // S*(i%mult+1) with S = nranks(nranks+1)/2, exact in float32 while S*mult < 2^24.
  const double S = static_cast<double>(nranks) * (nranks + 1) / 2.0;
  const int mult = S * 7 < 16777216.0 ? 7 : 1;
  const bool exact = S * mult < 16777216.0;
  const size_t max_count = static_cast<size_t>(agreed / 4);
  std::vector<float*> sendb(static_cast<size_t>(local), nullptr), recvb(static_cast<size_t>(local), nullptr);
  std::vector<unsigned long long*> badc(static_cast<size_t>(local), nullptr);
  begin_step("allocate", o.timeout_s);
  for (int i = 0; i < local; ++i) {
    size_t k = static_cast<size_t>(i);
    CUDA_OR_FAIL("cudaSetDevice", cudaSetDevice(i));
    CUDA_OR_FAIL("cudaMalloc", cudaMalloc(reinterpret_cast<void**>(&sendb[k]), max_count * sizeof(float)));
    CUDA_OR_FAIL("cudaMalloc", cudaMalloc(reinterpret_cast<void**>(&recvb[k]), max_count * sizeof(float)));
    CUDA_OR_FAIL("cudaMalloc", cudaMalloc(reinterpret_cast<void**>(&badc[k]), sizeof(unsigned long long)));
    fill_kernel<<<grid_for(max_count), 256, 0, streams[k]>>>(sendb[k], max_count, static_cast<float>(first_rank + i + 1), mult);
    CUDA_OR_FAIL("fill_kernel", cudaGetLastError());
    CUDA_OR_FAIL("cudaEventRecord", cudaEventRecord(ev_stop[k], streams[k]));
  }
  wait_events(ev_stop, "input fill");
  end_step();

  Json sweep = Json::object();
  sweep["pattern"] = "input element i of global rank g = (g+1)*(i%" + std::to_string(mult) + "+1)";
  sweep["expected"] = "output element i = nranks*(nranks+1)/2*(i%" + std::to_string(mult) + "+1), checked exactly on every local GPU";
  sweep["exact_in_float32"] = exact;
  sweep["completed"] = false;
  sweep["running_bytes"] = nullptr;
  sweep["sizes"] = Json::array();
  with_root([&](Json& r) { r["sweep"] = sweep; });

  std::vector<unsigned long long> sizes;
  for (unsigned long long bsz = o.min_bytes; bsz <= agreed;) {
    sizes.push_back(bsz);
    if (bsz > agreed / o.step_factor) break;
    bsz *= o.step_factor;
  }

  unsigned long long total_bad = 0;
  double peak_bus = -1, peak_alg = -1, large_sum = 0;
  unsigned long long peak_at = 0;
  int large_n = 0;
  for (unsigned long long bytes : sizes) {
    const size_t count = static_cast<size_t>(bytes / 4);
    const int iters = bytes >= kFewerItersBytes ? std::max(1, o.iters / 4) : o.iters;
    with_root([&](Json& r) { r["sweep"]["running_bytes"] = bytes; });
    const std::string what = "all-reduce of " + std::to_string(bytes) + " bytes";
    begin_step(what, o.timeout_s);
    for (int i = 0; i < local; ++i) {
      size_t k = static_cast<size_t>(i);
      CUDA_OR_FAIL("cudaSetDevice", cudaSetDevice(i));
      CUDA_OR_FAIL("cudaMemsetAsync", cudaMemsetAsync(recvb[k], 0xff, count * sizeof(float), streams[k]));  // NaN
    }
    auto enqueue = [&](void) {
      // Inside a group the calls are only recorded; a non-blocking communicator may still answer
      // ncclInProgress, which is not an error: every GPU's call must be issued before ncclGroupEnd.
      ncclResult_t r = ncclGroupStart();
      for (int i = 0; i < local && (r == ncclSuccess || r == ncclInProgress); ++i) {
        size_t k = static_cast<size_t>(i);
        r = ncclAllReduce(sendb[k], recvb[k], count, ncclFloat, ncclSum, G.comms[k], streams[k]);
      }
      ncclResult_t e = ncclGroupEnd();
      if (r == ncclSuccess || r == ncclInProgress) r = e;
      if (r == ncclInProgress) wait_comms(what.c_str());
      else if (r != ncclSuccess) fail(kExitCudaNccl, what, nccl_result("ncclAllReduce", r, G.comms[0]), nccl_error_reason("ncclAllReduce", r, G.comms[0]));
      if (now_s() > step_deadline()) timed_out(what);
    };
    for (int w = 0; w < o.warmup; ++w) enqueue();
    // finish the warmup (and the NaN fill) before timing, so rank skew is not measured
    for (int i = 0; i < local; ++i) {
      CUDA_OR_FAIL("cudaSetDevice", cudaSetDevice(i));
      CUDA_OR_FAIL("cudaEventRecord", cudaEventRecord(ev_stop[static_cast<size_t>(i)], streams[static_cast<size_t>(i)]));
    }
    wait_events(ev_stop, what.c_str());
    for (int i = 0; i < local; ++i) {
      CUDA_OR_FAIL("cudaSetDevice", cudaSetDevice(i));
      CUDA_OR_FAIL("cudaEventRecord", cudaEventRecord(ev_start[static_cast<size_t>(i)], streams[static_cast<size_t>(i)]));
    }
    for (int it = 0; it < iters; ++it) enqueue();
    for (int i = 0; i < local; ++i) {
      CUDA_OR_FAIL("cudaSetDevice", cudaSetDevice(i));
      CUDA_OR_FAIL("cudaEventRecord", cudaEventRecord(ev_stop[static_cast<size_t>(i)], streams[static_cast<size_t>(i)]));
    }
    wait_events(ev_stop, what.c_str());
    double time_us = 0;
    Json per_gpu = Json::array();
    for (int i = 0; i < local; ++i) {
      float ms = 0;
      CUDA_OR_FAIL("cudaSetDevice", cudaSetDevice(i));
      CUDA_OR_FAIL("cudaEventElapsedTime", cudaEventElapsedTime(&ms, ev_start[static_cast<size_t>(i)], ev_stop[static_cast<size_t>(i)]));
      double us = static_cast<double>(ms) * 1000.0 / iters;
      per_gpu.push(us);
      time_us = std::max(time_us, us);
    }
    // exact check of every element on every local GPU
    for (int i = 0; i < local; ++i) {
      size_t k = static_cast<size_t>(i);
      CUDA_OR_FAIL("cudaSetDevice", cudaSetDevice(i));
      CUDA_OR_FAIL("cudaMemsetAsync", cudaMemsetAsync(badc[k], 0, sizeof(unsigned long long), streams[k]));
      check_kernel<<<grid_for(count), 256, 0, streams[k]>>>(recvb[k], count, static_cast<float>(S), mult, badc[k]);
      CUDA_OR_FAIL("check_kernel", cudaGetLastError());
      CUDA_OR_FAIL("cudaEventRecord", cudaEventRecord(ev_stop[k], streams[k]));
    }
    wait_events(ev_stop, "result check");
    unsigned long long bad = 0;
    for (int i = 0; i < local; ++i) {
      unsigned long long v = 0;
      CUDA_OR_FAIL("cudaSetDevice", cudaSetDevice(i));
      CUDA_OR_FAIL("cudaMemcpy", cudaMemcpy(&v, badc[static_cast<size_t>(i)], sizeof v, cudaMemcpyDeviceToHost));
      bad += v;
    }
    end_step();
    total_bad += bad;
    const double alg = algbw_gbps(bytes, time_us), bus = busbw_gbps(bytes, time_us, nranks);
    if (bus > peak_bus) { peak_bus = bus; peak_alg = alg; peak_at = bytes; }
    if (bytes >= kLargeMessageBytes) { large_sum += bus; ++large_n; }
    Json e = Json::object();
    e["bytes"] = bytes;
    e["count"] = static_cast<unsigned long long>(count);
    e["warmup"] = o.warmup;
    e["iters"] = iters;
    e["time_us"] = time_us;
    e["time_us_per_gpu"] = per_gpu;
    e["algbw_gbps"] = alg;
    e["busbw_gbps"] = bus;
    e["checked_elements"] = static_cast<unsigned long long>(count) * static_cast<unsigned long long>(local);
    e["mismatches"] = bad;
    e["correct"] = bad == 0;
    with_root([&](Json& r) { r["sweep"]["sizes"].push(e); });
  }
  with_root([&](Json& r) {
    r["sweep"]["completed"] = true;
    r["sweep"]["running_bytes"] = nullptr;
    Json s = Json::object();
    s["nranks"] = nranks;
    s["local_gpus"] = local;
    s["sizes_run"] = static_cast<long long>(sizes.size());
    s["busbw_factor"] = busbw_factor(nranks);
    s["peak_busbw_gbps"] = peak_bus < 0 ? Json(nullptr) : Json(peak_bus);
    s["peak_algbw_gbps"] = peak_alg < 0 ? Json(nullptr) : Json(peak_alg);
    s["peak_at_bytes"] = peak_bus < 0 ? Json(nullptr) : Json(peak_at);
    s["large_message_threshold_bytes"] = kLargeMessageBytes;
    s["large_message_sizes"] = large_n;
    s["large_message_avg_busbw_gbps"] = large_n ? Json(large_sum / large_n) : Json(nullptr);
    s["mismatches_total"] = total_bad;
    s["all_correct"] = total_bad == 0;
    r["summary"] = s;
  });

  // ---- teardown: finalize (flushes outstanding work) then destroy, bounded
  begin_step("teardown", std::min(o.timeout_s, 60.0));
  double t_td = now_s();
  for (size_t k = 0; k < G.comms.size(); ++k) {
    ncclResult_t r = ncclCommFinalize(G.comms[k]);
    if (r != ncclSuccess && r != ncclInProgress)
      fail(kExitCudaNccl, "teardown", nccl_result("ncclCommFinalize", r, G.comms[k]), nccl_error_reason("ncclCommFinalize", r, G.comms[k]));
  }
  wait_comms("ncclCommFinalize");
  for (size_t k = 0; k < G.comms.size(); ++k) ncclCommDestroy(G.comms[k]);
  G.comms.clear();
  end_step();
  with_root([&](Json& r) { r["teardown_ms"] = (now_s() - t_td) * 1000.0; });

  if (total_bad) {
    finish(kExitWrongResult, std::to_string(total_bad) + " output elements differ from the exact sum");
  }
  char buf[160];
  std::snprintf(buf, sizeof buf, "all-reduce over %d ranks correct at %zu sizes; peak busbw %.2f GB/s", nranks,
                sizes.size(), peak_bus < 0 ? 0.0 : peak_bus);
  finish(kExitOk, buf);
}

}  // namespace

int main(int argc, char** argv) {
  G.t0 = now_s();
  std::signal(SIGPIPE, SIG_IGN);
  // stdout carries the JSON only: keep the real stdout for it and point fd 1 at stderr so that
  // anything else (NCCL with a user-set NCCL_DEBUG, library chatter) cannot corrupt it.
  G.out_fd = dup(1);
  if (G.out_fd < 0) G.out_fd = 1;
  else dup2(2, 1);
  setvbuf(stdout, nullptr, _IOLBF, 0);

  Options o = parse_args(argc, argv);
  if (o.help) {
    write_out(kUsage);
    return 0;
  }
  if (o.self_test_busbw) {
    write_out(self_test_busbw().dump(kJsonFormat) + "\n");
    return 0;
  }
  try {
    {
      std::lock_guard<std::mutex> lock(G.mu);
      init_report(o, argc, argv);
    }
    std::thread(watchdog_loop).detach();
    run(o);
  } catch (const std::exception& e) {
    finish(kExitInternal, std::string("internal error: ") + e.what());
  } catch (...) {
    finish(kExitInternal, "internal error: unknown exception");
  }
  finish(kExitInternal, "internal error: run() returned");
}
