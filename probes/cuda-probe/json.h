// A tiny JSON value and writer for the cuda-probe (no third-party dependency).
//
// Objects keep insertion order. Children live in std::list so that a reference to a node stays
// valid while siblings are added: the probe hands such references to its watchdog, which may
// fill them in from another thread (always under the probe's state mutex).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <list>
#include <string>
#include <utility>

namespace gpuconf {

class Json {
 public:
  enum class Kind { Null, Bool, Int, UInt, Num, Str, Arr, Obj };

  Json() = default;
  Json(std::nullptr_t) {}
  Json(bool v) : kind_(Kind::Bool), b_(v) {}
  Json(int v) : kind_(Kind::Int), i_(v) {}
  Json(long v) : kind_(Kind::Int), i_(v) {}
  Json(long long v) : kind_(Kind::Int), i_(v) {}
  Json(unsigned v) : kind_(Kind::UInt), u_(v) {}
  Json(unsigned long v) : kind_(Kind::UInt), u_(v) {}
  Json(unsigned long long v) : kind_(Kind::UInt), u_(v) {}
  Json(double v) : kind_(Kind::Num), d_(v) {}
  Json(const char* v) : kind_(v ? Kind::Str : Kind::Null), s_(v ? v : "") {}
  Json(std::string v) : kind_(Kind::Str), s_(std::move(v)) {}

  static Json object() {
    Json j;
    j.kind_ = Kind::Obj;
    return j;
  }
  static Json array() {
    Json j;
    j.kind_ = Kind::Arr;
    return j;
  }

  Kind kind() const { return kind_; }
  bool is_true() const { return kind_ == Kind::Bool && b_; }

  // Object: replaces the value of an existing key in place (keeping its position) or appends.
  // Returns the stored value. Replacing a value invalidates references into the old value.
  Json& set(const std::string& key, Json v) {
    if (kind_ != Kind::Obj) {
      *this = object();
    }
    for (auto& kv : obj_) {
      if (kv.first == key) {
        kv.second = std::move(v);
        return kv.second;
      }
    }
    obj_.emplace_back(key, std::move(v));
    return obj_.back().second;
  }

  Json* find(const std::string& key) {
    for (auto& kv : obj_) {
      if (kv.first == key) return &kv.second;
    }
    return nullptr;
  }

  // Array: appends and returns the stored value.
  Json& push(Json v) {
    if (kind_ != Kind::Arr) {
      *this = array();
    }
    arr_.push_back(std::move(v));
    return arr_.back();
  }

  std::list<Json>& items() { return arr_; }

  std::string dump() const {
    std::string out;
    dump_to(out, 0);
    return out;
  }

 private:
  static void indent(std::string& out, int level) {
    out.push_back('\n');
    out.append(static_cast<size_t>(level) * 2, ' ');
  }

  void dump_to(std::string& out, int level) const {
    char buf[64];
    switch (kind_) {
      case Kind::Null:
        out += "null";
        break;
      case Kind::Bool:
        out += b_ ? "true" : "false";
        break;
      case Kind::Int:
        std::snprintf(buf, sizeof buf, "%lld", i_);
        out += buf;
        break;
      case Kind::UInt:
        std::snprintf(buf, sizeof buf, "%llu", u_);
        out += buf;
        break;
      case Kind::Num:
        out += format_number(d_);
        break;
      case Kind::Str:
        escape(out, s_);
        break;
      case Kind::Arr: {
        if (arr_.empty()) {
          out += "[]";
          break;
        }
        out.push_back('[');
        bool first = true;
        for (const auto& v : arr_) {
          if (!first) out.push_back(',');
          first = false;
          indent(out, level + 1);
          v.dump_to(out, level + 1);
        }
        indent(out, level);
        out.push_back(']');
        break;
      }
      case Kind::Obj: {
        if (obj_.empty()) {
          out += "{}";
          break;
        }
        out.push_back('{');
        bool first = true;
        for (const auto& kv : obj_) {
          if (!first) out.push_back(',');
          first = false;
          indent(out, level + 1);
          escape(out, kv.first);
          out += ": ";
          kv.second.dump_to(out, level + 1);
        }
        indent(out, level);
        out.push_back('}');
        break;
      }
    }
  }

  // Three decimals at most, trailing zeros dropped; NaN and infinities become null.
  static std::string format_number(double d) {
    if (!std::isfinite(d)) return "null";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", d);
    std::string s(buf);
    size_t dot = s.find('.');
    if (dot != std::string::npos) {
      while (!s.empty() && s.back() == '0') s.pop_back();
      if (!s.empty() && s.back() == '.') s.pop_back();
    }
    if (s == "-0") s = "0";
    return s;
  }

  // Length of a valid UTF-8 sequence starting at s[i], or 0 when the bytes there are not one.
  static size_t utf8_len(const std::string& s, size_t i) {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = b(i);
    size_t n;
    unsigned cp;
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) {
      n = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 4;
      cp = c & 0x07;
    } else {
      return 0;
    }
    if (i + n > s.size()) return 0;
    for (size_t k = 1; k < n; ++k) {
      if ((b(i + k) & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (b(i + k) & 0x3F);
    }
    // Reject overlong forms, UTF-16 surrogates and code points past U+10FFFF.
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000)) return 0;
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
  }

  // JSON string with every control character escaped (\n \t ... or \u00XX) and every byte that
  // is not part of valid UTF-8 replaced by U+FFFD, so the document always parses.
  static void escape(std::string& out, const std::string& s) {
    out.push_back('"');
    for (size_t i = 0; i < s.size();) {
      const unsigned char c = static_cast<unsigned char>(s[i]);
      switch (c) {
        case '"':
          out += "\\\"";
          ++i;
          continue;
        case '\\':
          out += "\\\\";
          ++i;
          continue;
        case '\b':
          out += "\\b";
          ++i;
          continue;
        case '\f':
          out += "\\f";
          ++i;
          continue;
        case '\n':
          out += "\\n";
          ++i;
          continue;
        case '\r':
          out += "\\r";
          ++i;
          continue;
        case '\t':
          out += "\\t";
          ++i;
          continue;
        default:
          break;
      }
      if (c < 0x20 || c == 0x7F) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
        ++i;
        continue;
      }
      const size_t n = utf8_len(s, i);
      if (n == 0) {
        out += "\\ufffd";
        ++i;
        continue;
      }
      out.append(s, i, n);
      i += n;
    }
    out.push_back('"');
  }

  Kind kind_ = Kind::Null;
  bool b_ = false;
  long long i_ = 0;
  unsigned long long u_ = 0;
  double d_ = 0.0;
  std::string s_;
  std::list<std::pair<std::string, Json>> obj_;
  std::list<Json> arr_;
};

}  // namespace gpuconf
