#include "state/filters.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "render/yaml.h"

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

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

std::string hex(unsigned v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%0*X", digits, v);
  return buf;
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

// PyYAML's Emitter.write_double_quoted without line breaks (Salt sets the
// width to sys.maxsize) and without allow_unicode.
std::string yaml_dquote(const std::string& text) {
  std::string out = "\"";
  for (char32_t c : code_points(text)) {
    const char* rep = nullptr;
    switch (c) {
      case 0: rep = "0"; break;
      case 0x07: rep = "a"; break;
      case 0x08: rep = "b"; break;
      case 0x09: rep = "t"; break;
      case 0x0a: rep = "n"; break;
      case 0x0b: rep = "v"; break;
      case 0x0c: rep = "f"; break;
      case 0x0d: rep = "r"; break;
      case 0x1b: rep = "e"; break;
      case '"': rep = "\""; break;
      case '\\': rep = "\\"; break;
      case 0x85: rep = "N"; break;
      case 0xa0: rep = "_"; break;
      case 0x2028: rep = "L"; break;
      case 0x2029: rep = "P"; break;
      default: break;
    }
    if (rep) {
      out += '\\';
      out += rep;
    } else if (c >= 0x20 && c <= 0x7e) {
      out += static_cast<char>(c);
    } else if (c <= 0xff) {
      out += "\\x" + hex(c, 2);
    } else if (c <= 0xffff) {
      out += "\\u" + hex(c, 4);
    } else {
      out += "\\U" + hex(c, 8);
    }
  }
  out += '"';
  return out;
}

const value* keyword(call_args& a, const std::string& name) {
  for (auto& [k, v] : a.keyword) {
    if (k == name) return &v;
  }
  return nullptr;
}

// Positional argument `i` or keyword `name`, else `fallback`.
value arg(call_args& a, size_t i, const std::string& name, value fallback) {
  if (i < a.positional.size()) return a.positional[i];
  if (const value* v = keyword(a, name)) return *v;
  return fallback;
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

void add_salt_filters(render::environment& env) {
  env.filters["json"] = [](const value& in, call_args& a) {
    value sort = arg(a, 0, "sort_keys", value(true));
    return value(python_json(in, sort.truthy()));
  };
  env.filters["yaml"] = [](const value& in, call_args& a) {
    value flow = arg(a, 0, "flow_style", value(true));
    render::yaml_dump_options o;
    o.flow_style = flow.is_none()   ? render::yaml_dump_options::flow::leaves
                   : flow.truthy() ? render::yaml_dump_options::flow::always
                                   : render::yaml_dump_options::flow::never;
    std::string text = render::dump_yaml(in, o);
    if (text.ends_with("\n...")) text = text.substr(0, text.size() - 4);
    return value(text);
  };
  // Salt's tojson: json.dumps in insertion order, HTML-safe.
  env.filters["tojson"] = [](const value& in, call_args&) {
    std::string text = python_json(in, false), out;
    for (char c : text) {
      switch (c) {
        case '<': out += "\\u003c"; break;
        case '>': out += "\\u003e"; break;
        case '&': out += "\\u0026"; break;
        case '\'': out += "\\u0027"; break;
        default: out += c;
      }
    }
    return value(out);
  };
  env.filters["yaml_dquote"] = [](const value& in, call_args&) {
    return value(yaml_dquote(in.str()));
  };
  env.filters["yaml_squote"] = [](const value& in, call_args&) {
    std::string out = "'";
    for (char c : in.str()) {
      if (c == '\'') out += '\'';
      out += c;
    }
    return value(out + "'");
  };
  env.filters["yaml_encode"] = [](const value& in, call_args&) {
    switch (in.type()) {
      case value::kind::none:
        return value("null");
      case value::kind::boolean:
        return value(in.as_bool() ? "true" : "false");
      case value::kind::integer:
        return value(in.str());
      case value::kind::floating:
        return value(in.str());
      case value::kind::string:
        return value(yaml_dquote(in.as_string()));
      default:
        throw render::template_error("yaml_encode() only works with YAML scalar data; failed for <class '" +
                                     render::type_name(in) + "'>");
    }
  };
  env.filters["traverse"] = [](const value& in, call_args& a) {
    value key = arg(a, 0, "key", value(""));
    value fallback = arg(a, 1, "default", value(nullptr));
    value delim = arg(a, 2, "delimiter", value(":"));
    return traverse(in, key.str(), fallback, delim.str());
  };
}

}  // namespace brine::state
