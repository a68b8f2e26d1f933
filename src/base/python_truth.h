#pragma once

#include <cstdint>

namespace brine::base {

// Python's bool() of decoded data, for either nlohmann json flavour: None,
// False, 0, 0.0, "", [] and {} are false; everything else is true. This is
// how Salt tests an argument, a module's answer or `changes` (`if x:`). The
// deliberate variants have names of their own: salt.utils.data.is_true
// (modules/args.h is_true: "True"/"true" and numbers above 0 as text) and
// Salt's to_bool Jinja filter (render/salt_filters.cc: "yes"/"1"/"true").
template <class Json>
bool python_truth(const Json& v) {
  using kind = typename Json::value_t;
  switch (v.type()) {
    case kind::null:
    case kind::discarded:
      return false;
    case kind::boolean:
      return v.template get<bool>();
    case kind::number_integer:
      return v.template get<std::int64_t>() != 0;
    case kind::number_unsigned:
      return v.template get<std::uint64_t>() != 0;
    case kind::number_float:
      return v.template get<double>() != 0.0;
    case kind::string:
      return !v.template get_ref<const typename Json::string_t&>().empty();
    case kind::array:
    case kind::object:
      return !v.empty();
    default:
      return true;
  }
}

// The same for an argument that may be absent (nullptr: false).
template <class Json>
bool python_truth(const Json* v) {
  return v != nullptr && python_truth(*v);
}

}  // namespace brine::base
