// Salt's git states for configuration: git.config_set and git.config_unset
// (salt/states/git.py), through the execution functions git.config_get,
// git.config_get_regexp, git.config_set and git.config_unset.

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "states/file_util.h"
#include "states/python_text.h"
#include "states/registry.h"

namespace brine::states {
namespace git_states {
namespace {

using plain_json = nlohmann::json;

// Salt's invalid_kwargs: arguments the state does not take.
std::string invalid_kwargs(const state_call& c, const std::vector<std::string>& known) {
  static const std::vector<std::string> k_state = {
      "name", "fun", "state", "order", "require", "watch", "onchanges", "onfail", "prereq",
      "require_in", "watch_in", "onchanges_in", "onfail_in", "prereq_in", "listen",
      "listen_in", "unless", "onlyif", "creates", "check_cmd", "retry", "failhard",
      "parallel", "reload_modules", "reload_grains", "reload_pillar", "use", "use_in",
      "saltenv", "runas", "umask", "fire_event", "require_any", "watch_any",
      "onchanges_any", "onfail_any", "onfail_all", "onfail_stop", "sfun", "prerequired"};
  std::vector<std::string> bad;
  for (const auto& [k, v] : c.low.items()) {
    if (k.starts_with("__")) continue;
    if (std::find(known.begin(), known.end(), k) != known.end()) continue;
    if (std::find(k_state.begin(), k_state.end(), k) != k_state.end()) continue;
    bad.push_back(k + "=" + py_text(v));
  }
  if (bad.empty()) return "";
  std::string msg = "The following keyword arguments are not valid: ";
  for (std::size_t i = 0; i < bad.size(); ++i) msg += (i ? ", " : "") + bad[i];
  return msg;
}

// The keywords every call to the git module gets: where, as whom, which file.
plain_json where(const state_call& c, bool global) {
  plain_json kw = plain_json::object();
  if (const json* repo = c.arg("repo"); repo != nullptr && !repo->is_null()) {
    kw["cwd"] = plain_json::parse(repo->dump());
  }
  if (const json* user = c.arg("user"); user != nullptr && !user->is_null()) {
    kw["user"] = plain_json::parse(user->dump());
  }
  kw["global"] = global;
  return kw;
}

bool has_repo(const state_call& c) {
  const json* repo = c.arg("repo");
  return repo != nullptr && !repo->is_null() &&
         !(repo->is_string() && repo->get<std::string>().empty());
}

asio::awaitable<json> config_set(state_call c) {
  json ret = make_ret(c.name(), true, "");
  const json* value = c.arg("value");
  const json* multivar = c.arg("multivar");
  if (value != nullptr && value->is_null()) value = nullptr;
  if (multivar != nullptr && multivar->is_null()) multivar = nullptr;
  if (value != nullptr && multivar != nullptr) {
    co_return failed_ret(ret, "Only one of 'value' and 'multivar' is permitted");
  }
  std::string bad = invalid_kwargs(
      c, {"value", "multivar", "repo", "user", "password", "output_encoding", "global"});
  if (!bad.empty()) co_return failed_ret(ret, bad);
  const bool global = c.flag("global");
  if (!global && !has_repo(c)) {
    co_return failed_ret(ret, "Non-global config options require the 'repo' argument to be set");
  }
  if (value == nullptr && multivar == nullptr) {
    throw base::error("git.config_set: give value= or multivar=");
  }
  const std::string name = c.name();
  json desired = json::array();
  std::string value_comment;
  if (value != nullptr) {
    std::string text = py_text(*value);
    value_comment = "'" + text + "'";
    desired.push_back(text);
  } else if (multivar->is_array()) {
    for (const auto& item : *multivar) desired.push_back(py_text(item));
    value_comment = py_repr(desired);
  } else {
    std::string text = py_text(*multivar);
    std::size_t start = 0;
    for (;;) {
      std::size_t comma = text.find(',', start);
      desired.push_back(text.substr(start, comma == std::string::npos ? comma : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    value_comment = py_repr(desired);
  }
  const std::string global_key = global ? "Global key " : "";
  plain_json kw = where(c, global);
  kw["all"] = true;
  plain_json key_arg = plain_json::array({name});
  std::string get_fun = "git.config_get";
  json pre = co_await c.run(std::move(get_fun), key_arg, std::move(kw));
  if (desired == pre) {
    ret["comment"] = global_key + "'" + name + "' is already set to " + value_comment;
    co_return ret;
  }
  const std::string verb = pre.is_null() ? "added as" : "set to";
  if (c.test) {
    ret["changes"]["old"] = pre;
    ret["changes"]["new"] = desired;
    ret["result"] = nullptr;
    ret["comment"] = global_key + "'" + name + "' would be " + verb + " " + value_comment;
    co_return ret;
  }
  plain_json set_kw = where(c, global);
  if (value != nullptr) {
    set_kw["value"] = desired[0].get<std::string>();
  } else {
    set_kw["multivar"] = plain_json(desired);
  }
  json post;
  try {
    std::string set_fun = "git.config_set";
    post = co_await c.run(std::move(set_fun), key_arg, std::move(set_kw));
  } catch (const base::error& e) {
    std::string why = e.what();
    // Salt's _strip_exc: the message without "Command '...' failed: ".
    if (why.starts_with("Command '")) {
      if (auto at = why.find("' failed: "); at != std::string::npos) why = why.substr(at + 10);
    }
    co_return failed_ret(ret, "Failed to set " + std::string(global ? "global key " : "") + "'" + name +
                            "' to " + value_comment + ": " + why);
  }
  if (pre != post) {
    ret["changes"][name]["old"] = pre;
    ret["changes"][name]["new"] = post;
  }
  if (post != desired) {
    co_return failed_ret(ret, "Failed to set " + std::string(global ? "global key " : "") + "'" + name +
                            "' to " + value_comment);
  }
  ret["comment"] = global_key + "'" + name + "' was " + verb + " " + value_comment;
  co_return ret;
}

std::string join(const json& values, const std::string& sep) {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "" : sep) + v.get<std::string>();
  return out;
}

asio::awaitable<json> config_unset(state_call c) {
  json ret = make_ret(c.name(), true, "No matching keys are set");
  std::string bad = invalid_kwargs(
      c, {"value_regex", "repo", "user", "password", "output_encoding", "global", "all"});
  if (!bad.empty()) co_return failed_ret(ret, bad);
  const bool global = c.flag("global");
  const bool all = c.flag("all");
  if (!global && !has_repo(c)) {
    co_return failed_ret(ret, "Non-global config options require the 'repo' argument to be set");
  }
  const std::string name = c.name();
  std::optional<std::string> value_regex;
  if (const json* v = c.arg("value_regex"); v != nullptr && !v->is_null()) value_regex = py_text(*v);
  // The key expression must match the whole key name.
  std::string key = "^" + py_rstrip(py_lstrip(name, "^"), "$") + "$";
  auto get_regexp = [&](bool with_value) {
    plain_json kw = where(c, global);
    kw["value_regex"] = with_value && value_regex ? plain_json(*value_regex) : plain_json(nullptr);
    return kw;
  };
  plain_json key_arg = plain_json::array({key});
  const std::string regexp_fun = "git.config_get_regexp";
  plain_json pre_kw = get_regexp(true);
  json pre_matches = co_await c.run(regexp_fun, key_arg, std::move(pre_kw));
  if (pre_matches.empty()) co_return ret;
  if (!all) {
    std::vector<std::string> greedy;
    for (const auto& [k, values] : pre_matches.items()) {
      if (values.size() > 1) greedy.push_back(k + " (" + join(values, ", ") + ")");
    }
    if (!greedy.empty()) {
      std::string list;
      for (const auto& g : greedy) list += (list.empty() ? "" : "; ") + g;
      co_return failed_ret(ret, value_regex ? "Multiple values are matched by value_regex for the "
                                        "following keys (set 'all' to True to force removal): " +
                                            list
                                      : "Multivar(s) matched by the key expression (set 'all' "
                                        "to True to force removal): " +
                                            list);
    }
  }
  if (c.test) {
    ret["changes"] = pre_matches;
    ret["result"] = nullptr;
    ret["comment"] = std::to_string(pre_matches.size()) + " key(s) would have value(s) unset";
    co_return ret;
  }
  json pre = pre_matches;
  if (value_regex) {
    plain_json all_kw = get_regexp(false);
    pre = co_await c.run(regexp_fun, key_arg, std::move(all_kw));
  }
  std::vector<std::string> failed;
  for (const auto& [key_name, values] : pre_matches.items()) {
    plain_json kw = where(c, global);
    if (value_regex) kw["value_regex"] = *value_regex;
    kw["all"] = all;
    try {
      plain_json name_arg = plain_json::array({name});
      std::string unset_fun = "git.config_unset";
      co_await c.run(std::move(unset_fun), std::move(name_arg), std::move(kw));
    } catch (const base::error&) {
      failed.push_back(key_name);
    }
  }
  if (!failed.empty()) {
    std::string list;
    for (const auto& f : failed) list += (list.empty() ? "" : ", ") + f;
    co_return failed_ret(ret, "Error(s) occurred unsetting values for the following keys (see the "
                        "minion log for details): " + list);
  }
  plain_json post_kw = get_regexp(false);
  json post = co_await c.run(regexp_fun, key_arg, std::move(post_kw));
  for (const auto& [key_name, values] : pre.items()) {
    if (!post.contains(key_name)) {
      ret["changes"][key_name] = values;
      continue;
    }
    json unset = json::array();
    for (const auto& v : values) {
      if (std::find(post[key_name].begin(), post[key_name].end(), v) == post[key_name].end()) {
        unset.push_back(v);
      }
    }
    if (!unset.empty()) ret["changes"][key_name] = unset;
  }
  json post_matches = post;
  if (value_regex) {
    plain_json match_kw = get_regexp(true);
    post_matches = co_await c.run(regexp_fun, key_arg, std::move(match_kw));
  }
  if (!post_matches.empty()) {
    std::string list;
    for (const auto& [k, values] : post_matches.items()) {
      list += (list.empty() ? "" : "; ") + k + " (" + join(values, ", ") + ")";
    }
    co_return failed_ret(ret, "Failed to unset value(s): " + list);
  }
  ret["comment"] = "Value(s) successfully unset";
  co_return ret;
}

}  // namespace
}  // namespace git_states

void register_git_states(registry& reg) {
  using namespace git_states;
  reg.add("git.config_set", config_set, {"name"},
          "git.config_set name=KEY value=V|multivar=[...] repo=DIR|global=True [user=]: the git "
          "config key has the value(s)");
  reg.add("git.config_unset", config_unset, {"name"},
          "git.config_unset name=KEY [value_regex=] [all=False] repo=DIR|global=True [user=]: "
          "no git config key (matching the regex) is set");
}

}  // namespace brine::states
