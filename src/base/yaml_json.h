#pragma once

#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

namespace brine::base {

// A YAML node as the data Salt's loader (PyYAML, YAML 1.1) makes of it:
// plain scalars resolve to null (`~`, `null`, empty), booleans (`true`,
// `yes`, `on` and their `false` counterparts, in lower, Title or UPPER case),
// integers (decimal, `0b`, `0x`, leading-0 octal, `_` separators) and floats
// (a `.` is needed: `1.5`, `.5`, `1.0e+3`, `.inf`, `.nan`), exactly PyYAML's
// implicit resolvers but for sexagesimal numbers; anything else, and any
// quoted scalar, is a string; mapping keys become strings. Used for config values (`grains:`) and
// command-line arguments. Throws base::error for data of more than a million
// values (aliases expanding exponentially) or nested over 1,000 levels.
nlohmann::json yaml_to_json(const YAML::Node& node);

// One plain scalar resolved as above.
nlohmann::json yaml_scalar(const std::string& text);

}  // namespace brine::base
