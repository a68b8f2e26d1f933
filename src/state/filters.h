#pragma once

#include <string>

#include "render/render.h"

// Salt's own Jinja filters that SLS files use (salt.utils.jinja and its
// SerializerExtension): json, yaml, yaml_dquote, yaml_squote, yaml_encode,
// traverse, and the `python_json` helper they share.
namespace brine::state {

// Adds the filters to `env` (they take precedence over the engine's own).
void add_salt_filters(render::environment& env);

// Python's json.dumps(v, sort_keys=...) with its default separators and
// ensure_ascii.
std::string python_json(const render::value& v, bool sort_keys);

// salt.utils.data.traverse_dict_and_list on engine values: `key` split on
// `delimiter` walks dicts, list indexes and dicts inside lists; `fallback`
// when the path is not there.
render::value traverse(const render::value& data, const std::string& key,
                       const render::value& fallback, const std::string& delimiter = ":");

}  // namespace brine::state
