// nccl-probe bootstrap: rank 0 hands the 128-byte NCCL unique id to the other processes over
// one TCP connection each, after checking that every process sees the same number of GPUs.
// No CUDA or NCCL here; the wire protocol is described in README.md ("Bootstrap protocol").
//
//   request, peer -> rank 0 (32 bytes, big-endian):
//     "GCNB" | u16 version=1 | u16 flags (bit 0: --bootstrap-only) | u32 rank | u32 world_size |
//     i32 local_gpus (-1: CUDA failed on that process) | u32 reserved=0 | u64 args_hash
//   reply, rank 0 -> peer (144 bytes, big-endian):
//     "GCNB" | u16 version=1 | u16 status | i32 rank0_local_gpus | i32 detail_rank | 128-byte id
//     (the id is all zeros unless status == 0)
#pragma once

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <sys/types.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "json.h"

namespace boot {

using gpuconf::Json;

constexpr size_t kIdBytes = 128;
constexpr size_t kRequestBytes = 32;
constexpr size_t kReplyBytes = 16 + kIdBytes;
constexpr uint16_t kVersion = 1;
constexpr const char kMagic[4] = {'G', 'C', 'N', 'B'};

enum Status : uint16_t {
  kOk = 0,
  kGpuCountMismatch = 1,  // processes see different numbers of GPUs
  kNoUsableGpu = 2,       // some process has no GPU or a failed CUDA (detail_rank says which)
  kPeersMissing = 3,      // rank 0's deadline passed before every peer reported
  kBadRequest = 4,        // world size, flags, argument hash, rank range or duplicate rank wrong
  kIdUnavailable = 5,     // ncclGetUniqueId failed on rank 0
};

inline const char* status_name(int s) {
  switch (s) {
    case kOk: return "ok";
    case kGpuCountMismatch: return "gpu-count-mismatch";
    case kNoUsableGpu: return "no-usable-gpu";
    case kPeersMissing: return "peers-missing";
    case kBadRequest: return "bad-request";
    case kIdUnavailable: return "id-unavailable";
    default: return "unknown-status";
  }
}

struct Config {
  int rank = 0;
  int world = 1;
  std::string host;
  int port = 0;
  double timeout_s = 120.0;
  bool bootstrap_only = false;
  int local_gpus = 0;  // -1: CUDA failed here
  uint64_t args_hash = 0;
};

// ok: the id was obtained and the GPU counts agree. timed_out: a deadline passed (exit 6).
// Otherwise failed (exit 7). status is the wire status, or -1 for a local failure
// (listen/connect/reply problems), described by reason.
struct Outcome {
  bool ok = false;
  bool timed_out = false;
  int status = -1;
  std::string reason;
  int agreed_local_gpus = -1;
  unsigned char id[kIdBytes] = {};
};

inline double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

inline void put16(unsigned char* p, uint16_t v) { p[0] = v >> 8; p[1] = v & 0xff; }
inline void put32(unsigned char* p, uint32_t v) { for (int k = 0; k < 4; ++k) p[k] = (v >> (24 - 8 * k)) & 0xff; }
inline void put64(unsigned char* p, uint64_t v) { for (int k = 0; k < 8; ++k) p[k] = (v >> (56 - 8 * k)) & 0xff; }
inline uint16_t get16(const unsigned char* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
inline uint32_t get32(const unsigned char* p) {
  uint32_t v = 0;
  for (int k = 0; k < 4; ++k) v = (v << 8) | p[k];
  return v;
}
inline uint64_t get64(const unsigned char* p) {
  uint64_t v = 0;
  for (int k = 0; k < 8; ++k) v = (v << 8) | p[k];
  return v;
}

inline uint64_t fnv1a64(const void* data, size_t n, uint64_t h = 1469598103934665603ULL) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t k = 0; k < n; ++k) {
    h ^= p[k];
    h *= 1099511628211ULL;
  }
  return h;
}

inline std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

inline std::string errno_text(const char* what, int err) { return std::string(what) + ": " + std::strerror(err); }

inline std::string sockaddr_text(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    port = ntohs(in6->sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return "?";
}

inline void set_nonblocking(int fd) {
  int fl = fcntl(fd, F_GETFL, 0);
  if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

// Writes all of buf before the deadline. false on error/timeout.
inline bool write_all(int fd, const unsigned char* buf, size_t n, double deadline, std::string* err) {
  size_t off = 0;
  while (off < n) {
    double left = deadline - now_s();
    if (left <= 0) { *err = "write timed out"; return false; }
    pollfd p{fd, POLLOUT, 0};
    int r = poll(&p, 1, static_cast<int>(left * 1000) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) { *err = r == 0 ? "write timed out" : errno_text("poll", errno); return false; }
    ssize_t w = send(fd, buf + off, n - off, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      *err = errno_text("send", errno);
      return false;
    }
    off += static_cast<size_t>(w);
  }
  return true;
}

// Reads exactly n bytes before the deadline. Returns 1 ok, 0 closed by peer, -1 timeout, -2 error.
inline int read_all(int fd, unsigned char* buf, size_t n, double deadline, std::string* err) {
  size_t off = 0;
  while (off < n) {
    double left = deadline - now_s();
    if (left <= 0) { *err = "no reply before the deadline"; return -1; }
    pollfd p{fd, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left * 1000) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) { *err = errno_text("poll", errno); return -2; }
    if (r == 0) continue;
    ssize_t got = recv(fd, buf + off, n - off, 0);
    if (got == 0) { *err = "connection closed by rank 0 before a full reply"; return 0; }
    if (got < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      *err = errno_text("recv", errno);
      return -2;
    }
    off += static_cast<size_t>(got);
  }
  return 1;
}

// ---------------------------------------------------------------------------------------------
// rank 0
// ---------------------------------------------------------------------------------------------
inline Outcome serve(const Config& cfg, const unsigned char* id, bool id_ok, Json& info) {
  Outcome out;
  const double t0 = now_s();
  const double deadline = t0 + cfg.timeout_s;
  info["role"] = "server";
  Json& listen_j = info["listen"];
  listen_j["address"] = "0.0.0.0";
  listen_j["port"] = cfg.port;
  info["peers_expected"] = cfg.world - 1;
  info["peers"] = Json::array();
  info["ignored_connections"] = Json::array();

  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  std::string lerr;
  if (lfd < 0) {
    lerr = errno_text("socket", errno);
  } else {
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(cfg.port));
    if (bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      lerr = errno_text("bind", errno);
    } else if (listen(lfd, 128) != 0) {
      lerr = errno_text("listen", errno);
    }
  }
  if (!lerr.empty()) {
    if (lfd >= 0) close(lfd);
    listen_j["ok"] = false;
    listen_j["error"] = lerr;
    out.reason = "rank 0 could not listen on port " + std::to_string(cfg.port) + " (" + lerr + ")";
    info["ms"] = (now_s() - t0) * 1000.0;
    return out;
  }
  listen_j["ok"] = true;
  listen_j["error"] = nullptr;
  set_nonblocking(lfd);

  struct Conn {
    int fd;
    std::string addr;
    unsigned char buf[kRequestBytes];
    size_t got;
    double accepted;
    int rank;  // >= 1 once registered as a peer
  };
  std::vector<Conn> conns;
  std::vector<int> peer_gpus(static_cast<size_t>(cfg.world), -2);  // -2: not reported
  peer_gpus[0] = cfg.local_gpus;
  int reported = 0;
  bool fatal = false;
  int fatal_rank = -1;
  std::string fatal_reason;
  size_t ignored = 0;
  auto ignore = [&](const std::string& addr, const std::string& why) {
    if (ignored++ < 10) {
      Json j = Json::object();
      j["address"] = addr;
      j["reason"] = why;
      info["ignored_connections"].push(j);
    }
  };

  while (reported < cfg.world - 1 && !fatal && now_s() < deadline) {
    std::vector<pollfd> pfds;
    pfds.push_back({lfd, POLLIN, 0});
    for (auto& c : conns) pfds.push_back({c.fd, static_cast<short>(c.rank < 0 ? POLLIN : 0), 0});
    int wait_ms = static_cast<int>(std::min(0.2, std::max(0.0, deadline - now_s())) * 1000) + 1;
    int r = poll(pfds.data(), pfds.size(), wait_ms);
    if (r < 0 && errno != EINTR) break;
    if (r > 0 && (pfds[0].revents & POLLIN)) {
      for (;;) {
        sockaddr_storage ss{};
        socklen_t sl = sizeof ss;
        int cfd = accept4(lfd, reinterpret_cast<sockaddr*>(&ss), &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (cfd < 0) break;
        int one = 1;
        setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conns.push_back(Conn{cfd, sockaddr_text(reinterpret_cast<sockaddr*>(&ss)), {}, 0, now_s(), -1});
      }
    }
    // read pending requests (conns may have grown; only the first pfds.size()-1 were polled)
    for (size_t k = 0; k < conns.size(); ++k) {
      Conn& c = conns[k];
      if (c.rank >= 0 || c.fd < 0) continue;
      ssize_t got = recv(c.fd, c.buf + c.got, kRequestBytes - c.got, 0);
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        ignore(c.addr, got == 0 ? "closed before a full request" : errno_text("recv", errno));
        close(c.fd);
        c.fd = -1;
        continue;
      }
      if (got > 0) c.got += static_cast<size_t>(got);
      if (c.got < kRequestBytes) {
        if (now_s() - c.accepted > 10.0) {
          ignore(c.addr, "no full request within 10 s");
          close(c.fd);
          c.fd = -1;
        }
        continue;
      }
      if (std::memcmp(c.buf, kMagic, 4) != 0) {
        ignore(c.addr, "not a nccl-probe bootstrap request (bad magic)");
        close(c.fd);
        c.fd = -1;
        continue;
      }
      const uint16_t ver = get16(c.buf + 4), flags = get16(c.buf + 6);
      const int prank = static_cast<int>(get32(c.buf + 8));
      const int pworld = static_cast<int>(get32(c.buf + 12));
      const int pgpus = static_cast<int32_t>(get32(c.buf + 16));
      const uint64_t phash = get64(c.buf + 24);
      Json pj = Json::object();
      pj["rank"] = prank;
      pj["local_gpus"] = pgpus;
      pj["address"] = c.addr;
      std::string bad;
      if (ver != kVersion) bad = "protocol version " + std::to_string(ver) + " != " + std::to_string(kVersion);
      else if (pworld != cfg.world) bad = "world size " + std::to_string(pworld) + " != " + std::to_string(cfg.world);
      else if (prank < 1 || prank >= cfg.world) bad = "rank " + std::to_string(prank) + " out of range";
      else if (peer_gpus[static_cast<size_t>(prank)] != -2) bad = "duplicate rank " + std::to_string(prank);
      else if (((flags & 1) != 0) != cfg.bootstrap_only) bad = "--bootstrap-only differs from rank 0";
      else if (phash != cfg.args_hash) bad = "sweep arguments differ from rank 0's (argument hash)";
      if (!bad.empty()) {
        pj["accepted"] = false;
        pj["error"] = bad;
        info["peers"].push(pj);
        c.rank = 0;  // keep the fd to send it the error
        fatal = true;
        fatal_rank = prank;
        fatal_reason = "rank " + std::to_string(prank) + " from " + c.addr + ": " + bad;
        break;
      }
      pj["accepted"] = true;
      info["peers"].push(pj);
      c.rank = prank;
      peer_gpus[static_cast<size_t>(prank)] = pgpus;
      ++reported;
    }
    // drop connections that did not register (closed ones already have fd -1)
    for (auto& c : conns) {
      if (c.rank < 0 && c.fd >= 0 && now_s() - c.accepted > 10.0) {
        ignore(c.addr, "no full request within 10 s");
        close(c.fd);
        c.fd = -1;
      }
    }
  }
  close(lfd);
  info["peers_reported"] = reported;

  // decide
  int status = kOk, detail = -1;
  std::string reason;
  if (fatal) {
    status = kBadRequest;
    detail = fatal_rank;
    reason = fatal_reason;
  } else if (reported < cfg.world - 1) {
    status = kPeersMissing;
    std::string missing;
    for (int r = 1; r < cfg.world; ++r) {
      if (peer_gpus[static_cast<size_t>(r)] == -2) {
        if (detail < 0) detail = r;
        if (missing.size() < 200) missing += (missing.empty() ? "" : ",") + std::to_string(r);
      }
    }
    reason = "peer rank(s) " + missing + " did not report within " + std::to_string(static_cast<int>(cfg.timeout_s)) + " s";
  } else if (!id_ok) {
    status = kIdUnavailable;
    detail = 0;
    reason = "ncclGetUniqueId failed on rank 0";
  } else {
    for (int r = 0; r < cfg.world; ++r) {
      int g = peer_gpus[static_cast<size_t>(r)];
      if (g < 0 || (g == 0 && !cfg.bootstrap_only)) {
        status = kNoUsableGpu;
        detail = r;
        reason = "rank " + std::to_string(r) + (g < 0 ? " could not use CUDA" : " sees no GPU");
        break;
      }
    }
    if (status == kOk) {
      for (int r = 1; r < cfg.world; ++r) {
        if (peer_gpus[static_cast<size_t>(r)] != peer_gpus[0]) {
          status = kGpuCountMismatch;
          detail = r;
          reason = "rank " + std::to_string(r) + " sees " + std::to_string(peer_gpus[static_cast<size_t>(r)]) +
                   " GPUs, rank 0 sees " + std::to_string(peer_gpus[0]);
          break;
        }
      }
    }
    if (status == kOk) reason = "all " + std::to_string(cfg.world) + " processes report " +
                                std::to_string(peer_gpus[0]) + " local GPUs";
  }

  unsigned char reply[kReplyBytes] = {};
  std::memcpy(reply, kMagic, 4);
  put16(reply + 4, kVersion);
  put16(reply + 6, static_cast<uint16_t>(status));
  put32(reply + 8, static_cast<uint32_t>(cfg.local_gpus));
  put32(reply + 12, static_cast<uint32_t>(detail));
  if (status == kOk) std::memcpy(reply + 16, id, kIdBytes);
  int sent = 0;
  for (auto& c : conns) {
    if (c.fd < 0) continue;
    if (c.rank >= 0) {
      std::string werr;
      if (write_all(c.fd, reply, sizeof reply, now_s() + 5.0, &werr)) ++sent;
    }
    close(c.fd);
    c.fd = -1;
  }
  Json& d = info["decision"];
  d["status"] = status_name(status);
  d["detail_rank"] = detail >= 0 ? Json(detail) : Json(nullptr);
  d["reason"] = reason;
  info["replies_sent"] = sent;
  info["id_served"] = status == kOk && sent == cfg.world - 1;
  info["ms"] = (now_s() - t0) * 1000.0;

  out.status = status;
  out.reason = reason;
  out.ok = status == kOk;
  out.timed_out = status == kPeersMissing;
  out.agreed_local_gpus = status == kOk ? cfg.local_gpus : -1;
  if (out.ok) std::memcpy(out.id, id, kIdBytes);
  return out;
}

// ---------------------------------------------------------------------------------------------
// ranks 1..W-1
// ---------------------------------------------------------------------------------------------
inline Outcome fetch(const Config& cfg, Json& info) {
  Outcome out;
  const double t0 = now_s();
  const double deadline = t0 + cfg.timeout_s;
  info["role"] = "client";
  Json& cj = info["connect"];
  int attempts = 0;
  std::string last_error;
  double backoff = 0.1;
  bool got_reply = false;
  unsigned char reply[kReplyBytes] = {};

  unsigned char req[kRequestBytes] = {};
  std::memcpy(req, kMagic, 4);
  put16(req + 4, kVersion);
  put16(req + 6, cfg.bootstrap_only ? 1 : 0);
  put32(req + 8, static_cast<uint32_t>(cfg.rank));
  put32(req + 12, static_cast<uint32_t>(cfg.world));
  put32(req + 16, static_cast<uint32_t>(cfg.local_gpus));
  put32(req + 20, 0);
  put64(req + 24, cfg.args_hash);

  bool connected_once = false;
  std::string connected_addr;
  bool reply_timeout = false;
  while (!got_reply && now_s() < deadline) {
    ++attempts;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    std::string port = std::to_string(cfg.port);
    int g = getaddrinfo(cfg.host.c_str(), port.c_str(), &hints, &res);
    int fd = -1;
    if (g != 0) {
      last_error = std::string("resolve ") + cfg.host + ": " + gai_strerror(g);
    } else {
      for (addrinfo* ai = res; ai && fd < 0; ai = ai->ai_next) {
        int s = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (s < 0) { last_error = errno_text("socket", errno); continue; }
        int rc = connect(s, ai->ai_addr, ai->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
          double left = std::min(5.0, deadline - now_s());
          pollfd p{s, POLLOUT, 0};
          int pr = left > 0 ? poll(&p, 1, static_cast<int>(left * 1000) + 1) : 0;
          int soerr = 0;
          socklen_t sl = sizeof soerr;
          if (pr > 0 && getsockopt(s, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0) {
            rc = 0;
          } else {
            errno = pr > 0 ? soerr : ETIMEDOUT;
            rc = -1;
          }
        }
        if (rc == 0) {
          fd = s;
          connected_addr = sockaddr_text(ai->ai_addr);
        } else {
          last_error = "connect " + sockaddr_text(ai->ai_addr) + ": " + std::strerror(errno);
          close(s);
        }
      }
      freeaddrinfo(res);
    }
    if (fd >= 0) {
      connected_once = true;
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      std::string err;
      if (!write_all(fd, req, sizeof req, deadline, &err)) {
        last_error = err;
      } else {
        int rr = read_all(fd, reply, sizeof reply, deadline, &err);
        if (rr == 1) {
          got_reply = true;
        } else {
          last_error = err;
          if (rr == -1) reply_timeout = true;
        }
      }
      close(fd);
      if (got_reply) break;
    }
    double left = deadline - now_s();
    if (left <= 0) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(backoff, left)));
    backoff = std::min(backoff * 2, 1.0);
  }
  cj["target"] = cfg.host + ":" + std::to_string(cfg.port);
  cj["attempts"] = attempts;
  cj["connected"] = connected_once;
  cj["address"] = connected_addr.empty() ? Json(nullptr) : Json(connected_addr);
  cj["last_error"] = got_reply || last_error.empty() ? Json(nullptr) : Json(last_error);
  info["id_received"] = false;
  info["ms"] = (now_s() - t0) * 1000.0;

  if (!got_reply) {
    info["reply"] = nullptr;
    out.timed_out = true;
    out.reason = (connected_once ? std::string(reply_timeout ? "connected to rank 0 but got no reply within "
                                                             : "no reply from rank 0 within ")
                                 : std::string("could not reach rank 0 within ")) +
                 std::to_string(static_cast<int>(cfg.timeout_s)) + " s (" + last_error + ")";
    return out;
  }
  if (std::memcmp(reply, kMagic, 4) != 0 || get16(reply + 4) != kVersion) {
    info["reply"] = nullptr;
    out.reason = "rank 0 answered with something that is not a nccl-probe v1 bootstrap reply";
    return out;
  }
  const int status = get16(reply + 6);
  const int r0gpus = static_cast<int32_t>(get32(reply + 8));
  const int detail = static_cast<int32_t>(get32(reply + 12));
  Json& rj = info["reply"];
  rj["status"] = status_name(status);
  rj["rank0_local_gpus"] = r0gpus;
  rj["detail_rank"] = detail >= 0 ? Json(detail) : Json(nullptr);
  out.status = status;
  if (status == kOk) {
    std::memcpy(out.id, reply + 16, kIdBytes);
    out.ok = true;
    out.agreed_local_gpus = r0gpus;
    info["id_received"] = true;
    out.reason = "unique id received from rank 0; all processes report " + std::to_string(r0gpus) + " local GPUs";
  } else {
    out.timed_out = status == kPeersMissing;
    out.reason = std::string("rank 0 refused: ") + status_name(status) +
                 (detail >= 0 ? " (rank " + std::to_string(detail) + ")" : std::string());
  }
  return out;
}

}  // namespace boot
