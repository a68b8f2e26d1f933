#include "ext_pillar/arguments.h"

#include "base/error.h"

namespace brine::ext_pillar::detail {

using nlohmann::ordered_json;

std::vector<ordered_json> bind(const ordered_json& config, const std::vector<parameter>& params,
                               ordered_json* rest) {
  std::vector<std::optional<ordered_json>> got(params.size());
  std::vector<ordered_json> positional;
  if (config.is_array()) {
    positional.assign(config.begin(), config.end());
  } else if (!config.is_object()) {
    positional.push_back(config);
  }
  if (positional.size() > params.size()) {
    size_t required = 0;
    for (const auto& p : params) required += p.fallback ? 0 : 1;
    std::string takes = required == params.size()
                            ? std::to_string(params.size() + 2)
                            : "from " + std::to_string(required + 2) + " to " +
                                  std::to_string(params.size() + 2);
    throw base::error("ext_pillar() takes " + takes + " positional arguments but " +
                      std::to_string(positional.size() + 2) + " were given");
  }
  for (size_t i = 0; i < positional.size(); ++i) got[i] = positional[i];
  if (config.is_object()) {
    if (rest != nullptr) *rest = ordered_json::object();
    for (const auto& [key, value] : config.items()) {
      size_t i = 0;
      while (i < params.size() && params[i].name != key) ++i;
      if (i < params.size()) {
        got[i] = value;
      } else if (rest != nullptr) {
        (*rest)[key] = value;
      } else {
        throw base::error("ext_pillar() got an unexpected keyword argument '" + key + "'");
      }
    }
  }
  std::vector<std::string> missing;
  std::vector<ordered_json> out;
  for (size_t i = 0; i < params.size(); ++i) {
    if (got[i]) {
      out.push_back(std::move(*got[i]));
    } else if (params[i].fallback) {
      out.push_back(*params[i].fallback);
    } else {
      missing.push_back("'" + params[i].name + "'");
      out.emplace_back();
    }
  }
  if (!missing.empty()) {
    std::string names;
    for (size_t i = 0; i < missing.size(); ++i) {
      if (i > 0) names += i + 1 == missing.size() ? (missing.size() > 2 ? ", and " : " and ") : ", ";
      names += missing[i];
    }
    throw base::error("ext_pillar() missing " + std::to_string(missing.size()) + " required " +
                      "positional argument" + (missing.size() > 1 ? "s" : "") + ": " + names);
  }
  return out;
}

std::string text_of(const ordered_json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

}  // namespace brine::ext_pillar::detail
