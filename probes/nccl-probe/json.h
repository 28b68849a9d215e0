// Minimal ordered JSON value for nccl-probe: enough to build one document and print it.
// Keys keep insertion order; non-finite numbers print as null; strings are escaped and
// invalid UTF-8 bytes are replaced by '?', so the output always parses.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

class Json {
 public:
  enum Kind { kNull, kBool, kInt, kNum, kStr, kArr, kObj };

  Json() : kind_(kNull) {}
  Json(std::nullptr_t) : kind_(kNull) {}
  Json(bool b) : kind_(kBool), b_(b) {}
  Json(int v) : kind_(kInt), i_(v) {}
  Json(long v) : kind_(kInt), i_(v) {}
  Json(long long v) : kind_(kInt), i_(v) {}
  Json(unsigned v) : kind_(kInt), i_(static_cast<long long>(v)) {}
  Json(unsigned long v) : kind_(kInt), i_(static_cast<long long>(v)) {}
  Json(unsigned long long v) : kind_(kInt), i_(static_cast<long long>(v)) {}
  Json(double v) : kind_(kNum), d_(v) {}
  Json(const char* s) : kind_(s ? kStr : kNull), s_(s ? s : "") {}
  Json(const std::string& s) : kind_(kStr), s_(s) {}

  static Json object() { Json j; j.kind_ = kObj; return j; }
  static Json array() { Json j; j.kind_ = kArr; return j; }
  // {"available": false, "reason": why}: a fact that could not be read.
  static Json absent(const std::string& why) {
    Json j = object();
    j["available"] = false;
    j["reason"] = why.empty() ? std::string("unknown") : why;
    return j;
  }

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == kNull; }

  // Object member access; turns a null into an object, appends a missing key.
  Json& operator[](const std::string& key) {
    if (kind_ != kObj) { *this = object(); }
    for (auto& kv : o_) {
      if (kv.first == key) return kv.second;
    }
    o_.emplace_back(key, Json());
    return o_.back().second;
  }
  const Json* find(const std::string& key) const {
    if (kind_ != kObj) return nullptr;
    for (const auto& kv : o_) {
      if (kv.first == key) return &kv.second;
    }
    return nullptr;
  }
  Json& push(Json v) {
    if (kind_ != kArr) { *this = array(); }
    a_.push_back(std::move(v));
    return a_.back();
  }
  size_t size() const { return kind_ == kArr ? a_.size() : (kind_ == kObj ? o_.size() : 0); }

  std::string dump() const {
    std::string out;
    dump_to(out, 0);
    out += '\n';
    return out;
  }

 private:
  static void indent(std::string& out, int level) { out.append(static_cast<size_t>(level) * 2, ' '); }

  static void escape(std::string& out, const std::string& s) {
    out += '"';
    size_t i = 0;
    const size_t n = s.size();
    while (i < n) {
      unsigned char c = static_cast<unsigned char>(s[i]);
      if (c < 0x80) {
        switch (c) {
          case '"': out += "\\\""; break;
          case '\\': out += "\\\\"; break;
          case '\n': out += "\\n"; break;
          case '\r': out += "\\r"; break;
          case '\t': out += "\\t"; break;
          default:
            if (c < 0x20 || c == 0x7f) {
              char buf[8];
              std::snprintf(buf, sizeof buf, "\\u%04x", c);
              out += buf;
            } else {
              out += static_cast<char>(c);
            }
        }
        ++i;
        continue;
      }
      // Validate one UTF-8 sequence; replace anything malformed by '?'.
      size_t len = (c >= 0xc2 && c <= 0xdf) ? 2 : (c >= 0xe0 && c <= 0xef) ? 3 : (c >= 0xf0 && c <= 0xf4) ? 4 : 0;
      bool ok = len != 0 && i + len <= n;
      for (size_t k = 1; ok && k < len; ++k) {
        ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
      }
      if (ok) {
        out.append(s, i, len);
        i += len;
      } else {
        out += '?';
        ++i;
      }
    }
    out += '"';
  }

  void dump_to(std::string& out, int level) const {
    switch (kind_) {
      case kNull: out += "null"; break;
      case kBool: out += b_ ? "true" : "false"; break;
      case kInt: out += std::to_string(i_); break;
      case kNum: {
        if (!std::isfinite(d_)) { out += "null"; break; }
        // shortest of %.15g / %.17g that reads back exactly
        char buf[40];
        std::snprintf(buf, sizeof buf, "%.15g", d_);
        if (std::strtod(buf, nullptr) != d_) std::snprintf(buf, sizeof buf, "%.17g", d_);
        out += buf;
        break;
      }
      case kStr: escape(out, s_); break;
      case kArr: {
        if (a_.empty()) { out += "[]"; break; }
        bool scalars = true;
        for (const auto& v : a_) scalars = scalars && v.kind_ != kArr && v.kind_ != kObj;
        if (scalars && a_.size() <= 16) {
          out += '[';
          for (size_t k = 0; k < a_.size(); ++k) {
            if (k) out += ", ";
            a_[k].dump_to(out, level + 1);
          }
          out += ']';
          break;
        }
        out += "[\n";
        for (size_t k = 0; k < a_.size(); ++k) {
          indent(out, level + 1);
          a_[k].dump_to(out, level + 1);
          out += (k + 1 < a_.size()) ? ",\n" : "\n";
        }
        indent(out, level);
        out += ']';
        break;
      }
      case kObj: {
        if (o_.empty()) { out += "{}"; break; }
        out += "{\n";
        for (size_t k = 0; k < o_.size(); ++k) {
          indent(out, level + 1);
          escape(out, o_[k].first);
          out += ": ";
          o_[k].second.dump_to(out, level + 1);
          out += (k + 1 < o_.size()) ? ",\n" : "\n";
        }
        indent(out, level);
        out += '}';
        break;
      }
    }
  }

  Kind kind_;
  bool b_ = false;
  long long i_ = 0;
  double d_ = 0.0;
  std::string s_;
  std::vector<Json> a_;
  std::vector<std::pair<std::string, Json>> o_;
};
