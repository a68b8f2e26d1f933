#pragma once

#include <string>

#include "render/render.h"

// Helpers of the salt[...] bridge on template values (Salt's own Jinja
// filters are the engine's: render::use_salt_dialect).
namespace brine::state {

// Python's json.dumps(v, sort_keys=...) with its default separators and
// ensure_ascii.
std::string python_json(const render::value& v, bool sort_keys);

// salt.utils.data.traverse_dict_and_list on engine values: `key` split on
// `delimiter` walks dicts, list indexes and dicts inside lists; `fallback`
// when the path is not there.
render::value traverse(const render::value& data, const std::string& key,
                       const render::value& fallback, const std::string& delimiter = ":");

}  // namespace brine::state
