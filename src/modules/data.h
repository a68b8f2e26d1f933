#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "modules/registry.h"

// Salt's data helpers that several modules share (salt.utils.data,
// salt.utils.dictupdate), and the argument checks of functions that take
// named arguments.
namespace brine::modules {

// Salt's traverse_dict_and_list: walks `key` split on `delimiter` through
// maps, list indexes and maps inside lists; null when the path is not there.
const nlohmann::json* traverse(const nlohmann::json& data, std::string_view key,
                               std::string_view delimiter = ":");

// Salt's dictupdate.update: maps merged recursively into `dest`, anything
// else replaced; with `merge_lists`, a list extends the list it lands on.
void dict_update(nlohmann::json& dest, const nlohmann::json& upd, bool merge_lists = false);

// Python's fnmatch.fnmatchcase.
bool fnmatch(std::string_view pattern, std::string_view text);

// The arguments of a function with a Python signature: positional ones fill
// the names in order, then keywords; Salt's __pub_* keywords are dropped. An
// unknown keyword, a name given twice or too many positional arguments is a
// base::error naming it. `varargs`: extra positional arguments are kept
// (args() returns them).
class signature {
 public:
  signature(std::string fun, std::vector<std::string> names, const call& c, bool varargs = false);
  // The argument `name`, or null when not given.
  const nlohmann::json* get(std::string_view name) const;
  // The argument, required: a base::error names it when missing.
  const nlohmann::json& need(std::string_view name) const;
  std::string text(std::string_view name, std::string fallback) const;
  bool flag(std::string_view name, bool fallback) const;
  const std::vector<nlohmann::json>& rest() const { return rest_; }
  const std::string& fun() const { return fun_; }

 private:
  std::string fun_;
  std::vector<std::string> names_;
  std::map<std::string, nlohmann::json, std::less<>> given_;
  std::vector<nlohmann::json> rest_;
};

// The minion context of a function that needs one, or a base::error saying
// that `fun` runs only on a minion.
minion_context& need_context(const call& c);

}  // namespace brine::modules
