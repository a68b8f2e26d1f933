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

// The argument handling of functions with Python signatures (pkg, service,
// user and group), and the tools they run: limits, output, failures.
namespace brine::modules {


// Salt's calling convention, checked: positional arguments fill `params` in
// order (or, for a function taking *names, are all collected in rest()),
// keyword arguments go by name, and `__`-prefixed keys are Salt's bookkeeping.
// A null is Salt's None: the parameter's default. Anything else is refused
// with a message naming the argument.
class arguments {
 public:
  using json = nlohmann::json;

  arguments(std::string fun, const call& c, std::vector<std::string> params, bool varargs = false)
      : fun_(std::move(fun)), params_(std::move(params)) {
    if (!c.args.is_array() || !c.kwargs.is_object()) {
      fail("malformed call: args must be a list and kwargs a mapping");
    }
    if (varargs) {
      rest_.assign(c.args.begin(), c.args.end());
    } else {
      if (c.args.size() > params_.size()) {
        fail("takes at most " + std::to_string(params_.size()) + " positional argument(s)" +
             accepted() + ", got " + std::to_string(c.args.size()));
      }
      for (std::size_t i = 0; i < c.args.size(); ++i) values_[params_[i]] = c.args[i];
    }
    for (const auto& [key, value] : c.kwargs.items()) {
      if (key.starts_with("__")) continue;
      if (std::find(params_.begin(), params_.end(), key) == params_.end()) {
        fail("unknown keyword argument '" + key + "'" + accepted());
      }
      if (values_.contains(key)) fail(key + " was given twice: positionally and as " + key + "=");
      values_[key] = value;
    }
  }

  [[noreturn]] void fail(const std::string& message) const {
    throw base::error(fun_ + ": " + message);
  }
  const std::string& fun() const { return fun_; }
  const std::vector<json>& rest() const { return rest_; }

  // nullptr when not given or given as null.
  const json* get(const std::string& name) const {
    auto it = values_.find(name);
    return it == values_.end() || it->second.is_null() ? nullptr : &it->second;
  }
  // Strings, or numbers as YAML turned them (a version 1.2 arrives as 1.2).
  std::string text_of(const std::string& what, const json& v) const {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number()) return v.dump();
    fail(what + " must be a string, got " + v.dump());
  }
  std::optional<std::string> text(const std::string& name) const {
    const json* v = get(name);
    if (v == nullptr) return std::nullopt;
    return text_of(name, *v);
  }
  bool flag(const std::string& name, bool fallback) const {
    const json* v = get(name);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) fail(name + " must be true or false, got " + v->dump());
    return v->get<bool>();
  }
  // Seconds, >= 0.
  double seconds(const std::string& name) const {
    const json* v = get(name);
    if (v == nullptr) return 0;
    std::optional<double> s = as_number(*v);
    if (!s || !(*s >= 0)) fail(name + " must be a number of seconds >= 0, got " + v->dump());
    return *s;
  }

 private:
  std::string accepted() const {
    if (params_.empty()) return " (it takes no keyword arguments)";
    std::string out = " (accepted: ";
    for (std::size_t i = 0; i < params_.size(); ++i) out += (i ? ", " : "") + params_[i];
    return out + ")";
  }

  std::string fun_;
  std::vector<std::string> params_;
  std::map<std::string, json> values_;
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
