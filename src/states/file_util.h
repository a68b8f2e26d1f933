#pragma once

// What Salt's file states share, for brine's file state modules
// (file_states.cc, file_path_states.cc, file_edit_states.cc): reading and
// replacing files, modes, Python's string functions as Salt's code leans on
// them, and Python's `re` on PCRE2.
//
// Regular expressions: Salt's patterns are Python `re`. brine runs them on
// PCRE2 (already linked by modules and render), which reads Python's syntax
// ((?P<name>), (?P=name), lookarounds, (?i) ...); py_regex adds what
// differs: `^` under MULTILINE matches after a final newline
// (PCRE2_ALT_CIRCUMFLEX), `\Z` is PCRE's `\z`, and replacement templates
// are Python's (\1, \g<name>, \n, octal escapes). Patterns run on bytes, as
// Salt's file.replace/file.search do (to_bytes of the pattern): `\w`, `\s`,
// `\d` and IGNORECASE are ASCII; for file.comment's str patterns that is a
// difference only for non-ASCII text.

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "modules/path.h"

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

// re.escape (Python 3.7+).
std::string re_escape(std::string_view s);

// Python's re flags (re.I = 2, re.M = 8, re.S = 16, re.X = 64); from a
// number, a name ("MULTILINE", "M", "re.M") or a list of names.
constexpr long long k_re_ignorecase = 2, k_re_multiline = 8, k_re_dotall = 16,
                    k_re_verbose = 64;
long long re_flags(const nlohmann::ordered_json& v);

// A compiled Python pattern. Not thread-safe (one match state); cheap to
// make one per call. Throws base::error for a pattern PCRE2 rejects.
class py_regex {
 public:
  py_regex(std::string_view pattern, long long flags = 0);
  ~py_regex();
  py_regex(const py_regex&) = delete;
  py_regex& operator=(const py_regex&) = delete;

  // re.search from `start`; the match is [begin(), end()).
  bool search(std::string_view subject, std::size_t start = 0);
  // re.match: anchored at the start of `subject`.
  bool match(std::string_view subject);
  std::size_t begin() const;
  std::size_t end() const;
  // re.subn(pattern, repl, subject, count): Python's template in repl
  // (count 0: every match). Throws base::error for a bad template.
  std::pair<std::string, long long> subn(std::string_view repl, std::string_view subject,
                                         long long count = 0);

 private:
  bool run(std::string_view subject, std::size_t start, uint32_t options);
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace brine::states
