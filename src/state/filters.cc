#include "state/filters.h"

#include <algorithm>
#include <cmath>
#include <cstdio>


namespace brine::state {

namespace {

using render::call_args;
using render::value;

// The code points of UTF-8 text (a bad byte stands for itself).
std::vector<char32_t> code_points(const std::string& s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + n > s.size()) n = 1;
    char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    out.push_back(cp);
    i += n;
  }
  return out;
}

std::string hex_lower(unsigned v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%0*x", digits, v);
  return buf;
}

void json_string(const std::string& s, std::string& out) {
  out += '"';
  for (char32_t c : code_points(s)) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20 || c > 0x7e) {
          if (c > 0xffff) {
            char32_t v = c - 0x10000;
            out += "\\u" + hex_lower(0xd800 + (v >> 10), 4);
            out += "\\u" + hex_lower(0xdc00 + (v & 0x3ff), 4);
          } else {
            out += "\\u" + hex_lower(c, 4);
          }
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

std::string key_text(const value& k) {
  if (k.is_string()) return k.as_string();
  if (k.is_bool()) return k.as_bool() ? "true" : "false";
  if (k.is_none()) return "null";
  return k.str();
}

void dump(const value& v, bool sort_keys, std::string& out) {
  switch (v.type()) {
    case value::kind::none:
      out += "null";
      return;
    case value::kind::boolean:
      out += v.as_bool() ? "true" : "false";
      return;
    case value::kind::integer:
      out += std::to_string(v.as_int());
      return;
    case value::kind::floating: {
      double d = v.as_float();
      if (std::isnan(d)) {
        out += "NaN";
      } else if (std::isinf(d)) {
        out += d > 0 ? "Infinity" : "-Infinity";
      } else {
        out += render::float_repr(d);
      }
      return;
    }
    case value::kind::string:
      json_string(v.as_string(), out);
      return;
    case value::kind::list:
    case value::kind::tuple: {
      out += '[';
      bool first = true;
      for (const auto& e : v.items()) {
        if (!first) out += ", ";
        first = false;
        dump(e, sort_keys, out);
      }
      out += ']';
      return;
    }
    case value::kind::dict: {
      std::vector<std::pair<std::string, const value*>> entries;
      for (const auto& [k, e] : v.dict().entries) entries.emplace_back(key_text(k), &e);
      if (sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      out += '{';
      bool first = true;
      for (const auto& [k, e] : entries) {
        if (!first) out += ", ";
        first = false;
        json_string(k, out);
        out += ": ";
        dump(*e, sort_keys, out);
      }
      out += '}';
      return;
    }
    default:
      throw render::template_error("Object of type " + render::type_name(v) +
                                   " is not JSON serializable");
  }
}

}  // namespace

std::string python_json(const value& v, bool sort_keys) {
  std::string out;
  dump(v, sort_keys, out);
  return out;
}

value traverse(const value& data, const std::string& key, const value& fallback,
               const std::string& delimiter) {
  value ptr = data;
  size_t start = 0;
  for (;;) {
    size_t at = delimiter.empty() ? std::string::npos : key.find(delimiter, start);
    std::string each = key.substr(start, at == std::string::npos ? std::string::npos : at - start);
    if (ptr.is_sequence_like()) {
      bool numeric = !each.empty();
      size_t b = (each[0] == '-' || each[0] == '+') ? 1 : 0;
      if (b >= each.size()) numeric = false;
      for (size_t i = b; i < each.size() && numeric; ++i) numeric = std::isdigit(static_cast<unsigned char>(each[i]));
      bool found = false;
      value key_v = numeric ? value(static_cast<std::int64_t>(std::stoll(each))) : value(each);
      for (const auto& e : ptr.items()) {
        if (!e.is_dict()) continue;
        if (value* got = e.dict().find(key_v)) {
          ptr = *got;
          found = true;
          break;
        }
      }
      if (!found) {
        if (!numeric) return fallback;
        auto idx = std::stoll(each);
        auto n = static_cast<long long>(ptr.items().size());
        if (idx < 0) idx += n;
        if (idx < 0 || idx >= n) return fallback;
        ptr = ptr.items()[static_cast<size_t>(idx)];
      }
    } else if (ptr.is_dict()) {
      value* got = ptr.dict().find(value(each));
      if (!got) return fallback;
      ptr = *got;
    } else {
      return fallback;
    }
    if (at == std::string::npos) break;
    start = at + delimiter.size();
  }
  return ptr;
}

}  // namespace brine::state
