#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

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

}  // namespace brine::modules
