// Salt's cron states: cron.present, cron.absent, cron.env_present and
// cron.env_absent, through the cron module's execution functions (cron.*);
// test mode reads cron.list_tab and judges with the module's own matching
// rules (modules/cron.h).

#include <algorithm>
#include <optional>
#include <string>

#include "modules/cron.h"
#include "states/python_text.h"
#include "states/registry.h"

namespace brine::states {
namespace cron_states {
namespace {

using plain_json = nlohmann::json;
namespace cron = modules::cron;

std::string trimmed(std::string s) {
  s.erase(0, s.find_first_not_of(" \t\r\n"));
  s.erase(s.find_last_not_of(" \t\r\n") + 1);
  return s;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

plain_json plain(const json& v) { return plain_json(v); }

std::string user_of(const state_call& c) {
  const json* v = c.arg("user");
  return v == nullptr || v->is_null() ? "root" : py_text(*v);
}

// identifier=False (the default) means the command is the identifier.
plain_json identifier_of(const state_call& c, const std::string& name) {
  const json* v = c.arg("identifier");
  if (v == nullptr || (v->is_boolean() && !v->get<bool>())) return name;
  if (v->is_null()) return nullptr;
  return py_text(*v);
}

asio::awaitable<json> list_tab(const state_call& c, std::string user) {
  std::string fun = "cron.list_tab";
  plain_json args = plain_json::array({std::move(user)});
  json tab = co_await c.run(std::move(fun), std::move(args));
  co_return tab;
}

// Salt's _check_cron: "absent", "present" or "update", for a job (times
// given) or an @special job.
std::string check(const json& tab, const std::string& cmd, const plain_json& want,
                  bool special) {
  std::optional<std::string> ident;
  if (want["identifier"].is_string()) ident = want["identifier"].get<std::string>();
  const json& entries = tab[special ? "special" : "crons"];
  for (const auto& e : entries) {
    plain_json entry = plain(e);
    if (!cron::matched(entry, cmd, ident)) continue;
    std::vector<std::string> keys = special ? std::vector<std::string>{"spec"}
                                            : std::vector<std::string>{"minute", "hour",
                                                                       "daymonth", "month",
                                                                       "dayweek"};
    for (const char* k : {"identifier", "cmd", "comment", "commented"}) keys.push_back(k);
    for (const auto& k : keys) {
      if (cron::needs_change(entry.value(k, plain_json()), want.value(k, plain_json()))) {
        return "update";
      }
    }
    return "present";
  }
  return "absent";
}

// The answers present/env_present and absent/env_absent share; `what` is
// "Cron" or "Cron env". Under test, from the crontab's status ("absent",
// "present", else "update"):
json tested_present(json ret, const std::string& what, const std::string& name,
                    const std::string& status) {
  ret["result"] = nullptr;
  if (status == "absent") {
    ret["comment"] = what + " " + name + " is set to be added";
  } else if (status == "present") {
    ret["result"] = true;
    ret["comment"] = what + " " + name + " already present";
  } else {
    ret["comment"] = what + " " + name + " is set to be updated";
  }
  return ret;
}

json tested_absent(json ret, const std::string& what, const std::string& name,
                   const std::string& status) {
  ret["result"] = nullptr;
  if (status == "absent") {
    ret["result"] = true;
    ret["comment"] = what + " " + name + " is absent";
  } else {
    ret["comment"] = what + " " + name + " is set to be removed";
  }
  return ret;
}

// And from what cron.set_* or cron.rm_* answered.
json set_answer(json ret, const std::string& what, const std::string& name, const std::string& user,
                const std::string& status) {
  if (status == "present") {
    ret["comment"] = what + " " + name + " already present";
  } else if (status == "new") {
    ret["comment"] = what + " " + name + " added to " + user + "'s crontab";
    ret["changes"] = json{{user, name}};
  } else if (status == "updated") {
    ret["comment"] = what + " " + name + " updated";
    ret["changes"] = json{{user, name}};
  } else {
    ret = failed_ret(
        ret, what + " " + name + " for user " + user + " failed to commit with error \n" + status);
  }
  return ret;
}

json removed_answer(json ret, const std::string& what, const std::string& name,
                    const std::string& user, const std::string& status) {
  if (status == "absent") {
    ret["comment"] = what + " " + name + " already absent";
  } else if (status == "removed") {
    ret["comment"] = what + " " + name + " removed from " + user + "'s crontab";
    ret["changes"] = json{{user, name}};
  } else {
    ret = failed_ret(ret,
               what + " " + name + " for user " + user + " failed to commit with error " + status);
  }
  return ret;
}

// A cron.* function that changes the crontab, and the status it answers.
asio::awaitable<std::string> change_tab(state_call c, std::string fun, plain_json args,
                                        plain_json kwargs) {
  json data = co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
  co_return data.is_string() ? data.get<std::string>() : data.dump();
}

asio::awaitable<json> present(state_call c) {
  const std::string name = trimmed(c.name());
  const std::string user = user_of(c);
  json ret = sorted_ret(name);  // Salt's present functions' order
  const json* special = c.arg("special");
  const bool is_special = special != nullptr && !special->is_null();
  plain_json kwargs = plain_json::object();
  kwargs["user"] = user;
  kwargs["cmd"] = name;
  if (is_special) {
    kwargs["special"] = py_text(*special);
  } else {
    for (const char* key : {"minute", "hour", "daymonth", "month", "dayweek"}) {
      const json* v = c.arg(key);
      kwargs[key] = v == nullptr ? std::string("*") : py_text(*v);
    }
  }
  const json* comment = c.arg("comment");
  kwargs["comment"] = comment == nullptr || comment->is_null() ? plain_json() : plain_json(py_text(*comment));
  kwargs["commented"] = c.flag("commented");
  kwargs["identifier"] = identifier_of(c, name);
  if (c.test) {
    // What _check_cron compares: the times lower-cased, commented a bool.
    plain_json want = kwargs;
    want["cmd"] = name;
    if (is_special) want["spec"] = kwargs["special"];
    for (const char* key : {"minute", "hour", "daymonth", "month", "dayweek"}) {
      if (want.contains(key)) want[key] = lower(want[key].get<std::string>());
    }
    json tab = co_await list_tab(c, user);
    co_return tested_present(std::move(ret), "Cron", name, check(tab, name, want, is_special));
  }
  std::string fun = is_special ? "cron.set_special" : "cron.set_job";
  plain_json none = plain_json::array();
  const std::string status =
      co_await change_tab(c, std::move(fun), std::move(none), std::move(kwargs));
  co_return set_answer(std::move(ret), "Cron", name, user, status);
}

asio::awaitable<json> absent(state_call c) {
  const std::string name = trimmed(c.name());
  const std::string user = user_of(c);
  json ret = result_first_ret(name);  // Salt's absent functions' order
  plain_json ident = identifier_of(c, name);
  const json* special = c.arg("special");
  const bool is_special = special != nullptr && !special->is_null();
  if (c.test) {
    json tab = co_await list_tab(c, user);
    plain_json want = {{"identifier", ident}};
    co_return tested_absent(std::move(ret), "Cron", name, check(tab, name, want, false));
  }
  plain_json kwargs = {{"user", user}, {"cmd", name}, {"identifier", ident}};
  if (is_special) kwargs["special"] = py_text(*special);
  std::string fun = is_special ? "cron.rm_special" : "cron.rm_job";
  plain_json none = plain_json::array();
  const std::string status =
      co_await change_tab(c, std::move(fun), std::move(none), std::move(kwargs));
  co_return removed_answer(std::move(ret), "Cron", name, user, status);
}

// Salt's _check_cron_env.
std::string check_env(const json& tab, const std::string& name, const std::string& value) {
  for (const auto& env : tab["env"]) {
    if (env["name"] != name) continue;
    return env["value"] != value ? "update" : "present";
  }
  return "absent";
}

asio::awaitable<json> env_present(state_call c) {
  const std::string name = c.name();
  const std::string user = user_of(c);
  json ret = sorted_ret(name);  // Salt's present functions' order
  const json* value = c.arg("value");
  const bool has_value = value != nullptr && !value->is_null();
  if (c.test) {
    json tab = co_await list_tab(c, user);
    std::string status = check_env(tab, name, has_value ? py_text(*value) : "");
    co_return tested_present(std::move(ret), "Cron env", name, status);
  }
  plain_json kwargs = {{"user", user}, {"name", name}};
  if (has_value) kwargs["value"] = py_text(*value);
  std::string fun = "cron.set_env";
  plain_json none = plain_json::array();
  const std::string status =
      co_await change_tab(c, std::move(fun), std::move(none), std::move(kwargs));
  co_return set_answer(std::move(ret), "Cron env", name, user, status);
}

asio::awaitable<json> env_absent(state_call c) {
  const std::string name = trimmed(c.name());
  const std::string user = user_of(c);
  json ret = result_first_ret(name);  // Salt's absent functions' order
  if (c.test) {
    json tab = co_await list_tab(c, user);
    co_return tested_absent(std::move(ret), "Cron env", name, check_env(tab, name, ""));
  }
  std::string fun = "cron.rm_env";
  plain_json args = plain_json::array({user, name});
  const std::string status =
      co_await change_tab(c, std::move(fun), std::move(args), plain_json::object());
  co_return removed_answer(std::move(ret), "Cron env", name, user, status);
}

}  // namespace
}  // namespace cron_states

void register_cron_states(registry& reg) {
  using namespace cron_states;
  reg.add("cron.present", present, {"name"},
          "cron.present name=COMMAND [user=root] [minute=*] [hour=*] [daymonth=*] [month=*] "
          "[dayweek=*] [comment] [commented=False] [identifier=COMMAND] [special=@hourly...]: "
          "the job is in the user's crontab, marked with Salt's SALT_CRON_IDENTIFIER comment "
          "(minute and friends may be 'random' or 'A:B')");
  reg.add("cron.absent", absent, {"name"},
          "cron.absent name=COMMAND [user=root] [identifier=COMMAND] [special]: the job is not in "
          "the user's crontab");
  reg.add("cron.env_present", env_present, {"name"},
          "cron.env_present name=VARIABLE [value] [user=root]: the crontab sets the variable");
  reg.add("cron.env_absent", env_absent, {"name"},
          "cron.env_absent name=VARIABLE [user=root]: the crontab does not set the variable");
}

}  // namespace brine::states
