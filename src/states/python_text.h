#pragma once

#include <string>
#include <vector>

#include "base/python_str.h"
#include "states/registry.h"

// How Salt's state modules print values into their comments: Python's str()
// of what they hold ("key: val" lines, "These values could not be changed:
// {...}").
namespace brine::states {

// Python's repr() and str() of a value as Salt holds it (base/python_str.h).
inline std::string py_repr(const json& v) { return base::python_repr_of(v); }
inline std::string py_text(const json& v) { return base::python_str_of(v); }

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
