#pragma once

// What Salt's file states share, for brine's file state modules
// (file_states.cc, file_path_states.cc, file_edit_states.cc): reading and
// replacing files, modes, Python's string functions as Salt's code leans on
// them, and Python's `re` on PCRE2 (modules/py_regex.h).

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "modules/diff.h"
#include "modules/path.h"
#include "modules/py_regex.h"

namespace brine::states {

// The file's bytes; nullopt when it cannot be read.
std::optional<std::string> read_file(const std::string& path);

// Replaces `path` with `data` through a temporary file beside it and a
// rename, keeping the old file's mode (or `mode` when given; else a new
// file gets 0666 less the umask). "" on success, else why not.
std::string write_file(const std::string& path, std::string_view data,
                       std::optional<mode_t> mode = std::nullopt);

// A mode as Salt takes it (644, "0644", "644") -> its value.
std::optional<mode_t> parse_mode(const nlohmann::ordered_json& v);
// "0644".
std::string mode_text(mode_t m);

// os.path.expanduser (one copy, the file module's).
using modules::expand_user;

// str() of a YAML value as Python prints it: strings as they are, True,
// False, None, integers, floats as repr(); lists and dicts as JSON.
std::string python_str(const nlohmann::ordered_json& v);
// type(v).__name__ as Python names it: str, int, float, bool, NoneType,
// list, dict.
std::string python_type(const nlohmann::ordered_json& v);

// Python's str.strip/lstrip/rstrip: with no chars, whitespace (Python's
// ASCII whitespace plus \x1c-\x1f); else any of `chars`.
std::string py_strip(std::string_view s, std::optional<std::string_view> chars = std::nullopt);
std::string py_lstrip(std::string_view s, std::optional<std::string_view> chars = std::nullopt);
std::string py_rstrip(std::string_view s, std::optional<std::string_view> chars = std::nullopt);

// Python's str.splitlines(keepends): ends at \n, \r\n, \r, \v, \f,
// \x1c-\x1e, and in UTF-8 U+0085, U+2028, U+2029.
std::vector<std::string> str_splitlines(std::string_view text, bool keepends);

// What a text-mode read gives (universal newlines): \r\n and \r as \n.
std::string universal_newlines(std::string_view text);

// Python's re on PCRE2 (modules/py_regex.h: one copy for the file module
// and the file states).
using modules::k_re_dotall;
using modules::k_re_ignorecase;
using modules::k_re_multiline;
using modules::k_re_verbose;
using modules::py_regex;
using modules::re_escape;
using modules::re_flags;

// Salt's unified diff (modules/diff.h).
using modules::diff_options;
using modules::get_diff;
using modules::read_lines;
using modules::split_lines;
using modules::unified_diff;

}  // namespace brine::states
