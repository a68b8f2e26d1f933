#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace brine::cli {

// How much of a time utc_time() prints.
enum class time_unit { minutes, seconds, milliseconds };

// A UTC time of unix milliseconds as the CLI prints it: "2025-01-31 14:00",
// "2025-01-31 14:00:00" or "2025-01-31 14:00:00.123".
std::string utc_time(int64_t unix_ms, time_unit shown);

// Salt's "nested" outputter: `id:` then the value indented by four spaces;
// maps as `----------` and `key:` lines, lists as `- item`, booleans as
// True/False, None for null.
std::string nested(const std::string& id, const nlohmann::json& value);

// The same, without the `id:` line, every line indented by `indent`
// (Salt's nested_indent).
std::string nested_at(const nlohmann::json& value, int indent);

// Salt's "yaml" outputter: `id: value` as a YAML document fragment (block
// style; strings quoted where YAML would read them as something else).
std::string yaml_out(const std::string& id, const nlohmann::json& value);

// Python's repr() of a value as Salt's "raw" outputter prints it: {'id': value}.
std::string python_repr(const nlohmann::json& value);

// Salt's "txt" outputter: `id: line` for each line of a string, else
// `id: repr(value)`.
std::string txt_out(const std::string& id, const nlohmann::json& value);

// An ordered value as the outputters take it: keys sorted (as Salt's yaml
// and nested outputters print them), invalid UTF-8 replaced by U+FFFD.
nlohmann::json plain_json(const nlohmann::ordered_json& value);

// A command-line argument as Salt reads it: YAML, so "1" is an integer,
// "true" a boolean, "{a: 1}" a map, and anything else the string itself.
nlohmann::json parse_arg(const std::string& text);

// Splits ARG and KEY=VALUE words into positional args and kwargs.
void split_args(const std::vector<std::string>& words, nlohmann::json& args,
                nlohmann::json& kwargs);

}  // namespace brine::cli
