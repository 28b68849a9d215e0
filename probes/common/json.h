// A tiny JSON value and writer shared by the probes (cuda-probe, nccl-probe); no third-party
// dependency. Each probe's build.sh puts this directory (probes/common) on the include path, or
// finds this file next to the probe's own sources (zero-registry mode ships them flat).
//
// Objects keep insertion order. Children live in std::list so that a reference to a node stays
// valid while siblings are added: the probes hand such references to their watchdogs, which may
// fill them in from another thread (always under the probe's state mutex).
//
// Output always parses: control characters are escaped, bytes that are not valid UTF-8 become
// U+FFFD, NaN and infinities become null. How numbers and short arrays print is a JsonFormat.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <string>
#include <utility>

namespace gpuconf {

// How Json::dump prints. The default is the cuda-probe's: numbers with three decimals at most
// (trailing zeros dropped), every array item on its own line.
struct JsonFormat {
  // Doubles as the shortest of %.15g / %.17g that reads back exactly, instead of three decimals.
  bool exact_numbers = false;
  // Arrays of at most this many scalars print on one line as [a, b]; 0: never.
  size_t inline_scalar_arrays = 0;
};

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

  // {"available": false, "reason": why}: a fact that could not be read ("unknown" when why is empty).
  static Json absent(const std::string& why) {
    Json j = object();
    j.set("available", false);
    j.set("reason", why.empty() ? std::string("unknown") : why);
    return j;
  }

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::Null; }
  bool is_true() const { return kind_ == Kind::Bool && b_; }
  // Number of items (array) or members (object); 0 for anything else.
  size_t size() const { return kind_ == Kind::Arr ? arr_.size() : kind_ == Kind::Obj ? obj_.size() : 0; }

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

  // Object: the value of key, appending a null member when missing (a non-object becomes an
  // empty object first). The reference stays valid while other members are added.
  Json& operator[](const std::string& key) {
    if (Json* v = find(key)) return *v;
    return set(key, Json());
  }

  // Object: the value of key, or nullptr (also when this is not an object).
  Json* find(const std::string& key) {
    if (kind_ != Kind::Obj) return nullptr;
    for (auto& kv : obj_) {
      if (kv.first == key) return &kv.second;
    }
    return nullptr;
  }
  const Json* find(const std::string& key) const { return const_cast<Json*>(this)->find(key); }

  // Array: appends and returns the stored value.
  Json& push(Json v) {
    if (kind_ != Kind::Arr) {
      *this = array();
    }
    arr_.push_back(std::move(v));
    return arr_.back();
  }

  std::list<Json>& items() { return arr_; }

  // The document, indented by two spaces a level, without a trailing newline.
  std::string dump(const JsonFormat& format = JsonFormat()) const {
    std::string out;
    dump_to(out, 0, format);
    return out;
  }

 private:
  static void indent(std::string& out, int level) {
    out.push_back('\n');
    out.append(static_cast<size_t>(level) * 2, ' ');
  }

  bool is_scalar() const { return kind_ != Kind::Arr && kind_ != Kind::Obj; }

  void dump_to(std::string& out, int level, const JsonFormat& format) const {
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
        out += format.exact_numbers ? format_exact(d_) : format_number(d_);
        break;
      case Kind::Str:
        escape(out, s_);
        break;
      case Kind::Arr: {
        if (arr_.empty()) {
          out += "[]";
          break;
        }
        if (arr_.size() <= format.inline_scalar_arrays) {
          bool scalars = true;
          for (const auto& v : arr_) scalars = scalars && v.is_scalar();
          if (scalars) {
            out.push_back('[');
            bool first = true;
            for (const auto& v : arr_) {
              if (!first) out += ", ";
              first = false;
              v.dump_to(out, level + 1, format);
            }
            out.push_back(']');
            break;
          }
        }
        out.push_back('[');
        bool first = true;
        for (const auto& v : arr_) {
          if (!first) out.push_back(',');
          first = false;
          indent(out, level + 1);
          v.dump_to(out, level + 1, format);
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
          kv.second.dump_to(out, level + 1, format);
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

  // The shortest of %.15g / %.17g that reads back exactly; NaN and infinities become null.
  static std::string format_exact(double d) {
    if (!std::isfinite(d)) return "null";
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.15g", d);
    if (std::strtod(buf, nullptr) != d) std::snprintf(buf, sizeof buf, "%.17g", d);
    return buf;
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
