#pragma once

#include <string>
#include <vector>

#include "base/python.h"
#include "states/registry.h"

// How Salt's state modules print values into their comments: Python's str()
// of what they hold ("key: val" lines, "These values could not be changed:
// {...}").
namespace brine::states {

// Python's repr() of a JSON value as Salt holds it: 'text', 4243, True,
// None, ['a', 'b'], {'k': 'v'}.
inline std::string py_repr(const json& v) {
  if (v.is_string()) return base::python_repr(v.get<std::string>());
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  if (v.is_array()) {
    std::string out = "[";
    for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + py_repr(v[i]);
    return out + "]";
  }
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, item] : v.items()) {
      out += (first ? "" : ", ") + base::python_repr(k) + ": " + py_repr(item);
      first = false;
    }
    return out + "}";
  }
  return v.dump();
}

// Python's str(): text as it is, anything else as repr().
inline std::string py_text(const json& v) {
  return v.is_string() ? v.get<std::string>() : py_repr(v);
}

// `v` (an execution function's answer, whose keys nlohmann::json sorts) with
// its keys in `order`, as Salt's function built the dict; keys not named
// follow in their own order.
inline json in_order(const json& v, const std::vector<std::string>& order) {
  json out = json::object();
  for (const auto& key : order) {
    if (v.contains(key)) out[key] = v[key];
  }
  for (const auto& [key, item] : v.items()) {
    if (!out.contains(key)) out[key] = item;
  }
  return out;
}

}  // namespace brine::states
