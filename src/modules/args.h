#pragma once

#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace brine::modules {

// A number from a function argument. Salt's CLI parses arguments as YAML, so
// a number may also arrive as text ("2", "0.5").
inline std::optional<double> as_number(const nlohmann::json& v) {
  if (v.is_number()) return v.get<double>();
  if (!v.is_string()) return std::nullopt;
  const auto& s = v.get_ref<const std::string&>();
  try {
    std::size_t used = 0;
    double d = std::stod(s, &used);
    if (used == s.size()) return d;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// Salt's salt.utils.data.is_true: a bool as it is, a number above 0, the
// text "True"/"true" or a number above 0 as text; anything else that is
// not None and not empty. (Both json flavours: modules' and states'.)
template <class Json>
bool is_true(const Json& v) {
  if (v.is_boolean()) return v.template get<bool>();
  if (v.is_number()) return v.template get<double>() > 0;
  if (v.is_string()) {
    const std::string s = v.template get<std::string>();
    if (s == "True" || s == "true") return true;
    try {
      return std::stod(s) > 0;
    } catch (const std::exception&) {
      return false;
    }
  }
  return !v.is_null() && !v.empty();
}

}  // namespace brine::modules
