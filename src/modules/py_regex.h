#pragma once

// Python's `re` as Salt's file functions use it: Salt's patterns are
// Python `re`. brine runs them on
// PCRE2 (already linked by modules and render), which reads Python's syntax
// ((?P<name>), (?P=name), lookarounds, (?i) ...); py_regex adds what
// differs: `^` under MULTILINE matches after a final newline
// (PCRE2_ALT_CIRCUMFLEX), `\Z` is PCRE's `\z`, and replacement templates
// are Python's (\1, \g<name>, \n, octal escapes). Patterns run on bytes, as
// Salt's file.replace/file.search do (to_bytes of the pattern): `\w`, `\s`,
// `\d` and IGNORECASE are ASCII; for file.comment's str patterns that is a
// difference only for non-ASCII text.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

namespace brine::modules {

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
  // Group `n` of the last match as text of `subject`; nullopt when it did
  // not take part (Python's None).
  std::optional<std::string> group(std::string_view subject, int n) const;
  // re.subn(pattern, repl, subject, count): Python's template in repl
  // (count 0: every match). Throws base::error for a bad template.
  std::pair<std::string, long long> subn(std::string_view repl, std::string_view subject,
                                         long long count = 0);

 private:
  bool run(std::string_view subject, std::size_t start, uint32_t options);
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace brine::modules
