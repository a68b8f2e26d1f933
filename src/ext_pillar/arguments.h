#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

// How Salt hands an ext_pillar entry's configuration to the interface's
// ext_pillar(minion_id, pillar, ...) (Pillar._external_pillar_data): a
// mapping as keyword arguments, a list as positional ones, anything else
// as one positional argument.
namespace brine::ext_pillar::detail {

struct parameter {
  std::string name;
  std::optional<nlohmann::ordered_json> fallback;  // none: required
};

// The arguments by parameter, in the parameters' order (null where a
// parameter without a default got nothing is impossible: that throws).
// `rest`: keyword arguments beyond the parameters, when the function takes
// **kwargs (nullptr: it does not). Throws base::error with Python's
// TypeError text ("ext_pillar() missing 1 required positional argument:
// 'command'", "ext_pillar() got an unexpected keyword argument 'x'").
std::vector<nlohmann::ordered_json> bind(const nlohmann::ordered_json& config,
                                         const std::vector<parameter>& params,
                                         nlohmann::ordered_json* rest = nullptr);

// Salt's text of a value in messages: a string as it is, anything else as JSON.
std::string text_of(const nlohmann::ordered_json& v);

}  // namespace brine::ext_pillar::detail
