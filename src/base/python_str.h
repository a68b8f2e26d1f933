#pragma once

#include <string>

#include "base/python.h"

namespace brine::base {

// Python's repr() of decoded data, for either nlohmann json flavour, as
// Salt holds it: 'text', 4243, True, None, ['a', 'b'], {'k': 'v'} (keys in
// the json's own order).
template <class Json>
std::string python_repr_of(const Json& v) {
  if (v.is_string()) return python_repr(v.template get_ref<const typename Json::string_t&>());
  if (v.is_boolean()) return v.template get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  if (v.is_array()) {
    std::string out = "[";
    for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + python_repr_of(v[i]);
    return out + "]";
  }
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, item] : v.items()) {
      out += (first ? "" : ", ") + python_repr(k) + ": " + python_repr_of(item);
      first = false;
    }
    return out + "}";
  }
  return v.dump();
}

// Python's str(): text as it is, anything else as repr().
template <class Json>
std::string python_str_of(const Json& v) {
  return v.is_string() ? v.template get<std::string>() : python_repr_of(v);
}

}  // namespace brine::base
