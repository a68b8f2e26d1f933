#pragma once

#include <algorithm>
#include <cctype>
#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "modules/args.h"
#include "modules/process.h"
#include "modules/registry.h"

// The argument checks of functions with Python signatures (every module but
// test and cmd, whose calling conventions are their own), and the tools pkg,
// service, user and group run: limits, output, failures.
namespace brine::modules {

// The arguments of a function with a Python signature, checked as Salt
// calls it: positional arguments fill `params` in order (or, for a function
// taking *args, are all collected in rest()), keyword arguments go by name,
// and `__`-prefixed keys are Salt's bookkeeping. An unknown keyword, a name
// given twice or too many positional arguments is a base::error naming it.
// A null is Salt's None: get() and the typed readers take it for the
// parameter's default; given() shows it, for the few parameters where None
// means something of its own (file.replace's backup=None, a default=None).
class arguments {
 public:
  using json = nlohmann::json;

  arguments(std::string fun, const call& c, std::vector<std::string> params, bool varargs = false);

  // A base::error "<fun>: <message>".
  [[noreturn]] void fail(const std::string& message) const;
  const std::string& fun() const { return fun_; }
  const std::vector<json>& rest() const { return rest_; }

  // As given, a null included; nullptr when not given.
  const json* given(std::string_view name) const;
  // nullptr when not given or given as null.
  const json* get(std::string_view name) const;
  // Given, maybe as null; "missing argument 'name'" otherwise.
  const json& need(std::string_view name) const;

  // Strings, or numbers as YAML turned them (a version 1.2 arrives as 1.2);
  // "<what> must be a string" otherwise.
  std::string text_of(const std::string& what, const json& v) const;
  std::optional<std::string> text(std::string_view name) const;
  // Any scalar as text (true is "true"), `fallback` when not given or null;
  // "<name> must be text" for a list or a mapping.
  std::string scalar_text(std::string_view name, std::string fallback) const;
  bool flag(std::string_view name, bool fallback) const;
  // Seconds, >= 0; 0 when not given.
  double seconds(std::string_view name) const;

 private:
  std::string accepted() const;

  std::string fun_;
  std::vector<std::string> params_;
  std::map<std::string, json, std::less<>> values_;
  std::vector<json> rest_;
};

// A tool or lookup that ran and failed, or a host that cannot run it: the
// job fails with this message. Bad arguments are base::error instead, thrown
// before anything runs.
class tool_failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <asio::awaitable<outcome> (*F)(call)>
asio::awaitable<outcome> failures_as_outcomes(call c) {
  try {
    co_return co_await F(std::move(c));
  } catch (const tool_failure& e) {
    co_return error_outcome(e.what());
  }
}


// Python's shlex.split (POSIX mode, no comments): inside double quotes a
// backslash escapes only `"` and itself. A base::error "<what> has an
// unclosed quote: ..." (or "ends with an escape") where Python's raises
// ValueError (what: "cmd.script: args").
std::vector<std::string> shlex_split(const std::string& what, const std::string& line);

// One word for /bin/sh: always in single quotes, a ' inside as '\'' (what
// shlex_split reads back as the word).
std::string shell_quote(const std::string& word);

// Without surrounding whitespace.
inline std::string trim(std::string s) {
  auto end = s.find_last_not_of(" \t\r\n");
  s.erase(end == std::string::npos ? 0 : end + 1);
  auto begin = s.find_first_not_of(" \t\r\n");
  return begin == std::string::npos ? std::string() : s.substr(begin);
}

// The whitespace-separated words of a line of a tool's output.
inline std::vector<std::string> split_words(std::string_view line) {
  std::vector<std::string> words;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    std::size_t start = i;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i > start) words.emplace_back(line.substr(start, i - start));
  }
  return words;
}

// A child's time limit: the job's, or a year when the job has none.
inline std::chrono::milliseconds child_limit(std::chrono::seconds job_limit) {
  return job_limit > std::chrono::seconds::zero()
             ? std::chrono::duration_cast<std::chrono::milliseconds>(job_limit)
             : std::chrono::milliseconds(std::chrono::hours(24 * 365));
}

// "apt-get exited 100: E: Unable to locate package nope": stderr, or the end
// of stdout when the tool wrote nothing to stderr.
inline std::string tool_error(const std::string& tool, const process_result& r) {
  if (r.timed_out) return tool + " timed out and was killed";
  std::string detail = trim(r.stderr_text);
  if (detail.empty()) {
    detail = trim(r.stdout_text);
    if (detail.size() > 2000) detail = "..." + detail.substr(detail.size() - 2000);
  }
  return tool + " exited " + std::to_string(r.retcode) + (detail.empty() ? "" : ": " + detail);
}

}  // namespace brine::modules
