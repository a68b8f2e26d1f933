#include "states/registry.h"

#include <filesystem>

#include "base/error.h"
#include "base/python_truth.h"
#include "modules/registry.h"
#include "modules/shell_test.h"

namespace brine::states {

std::string state_call::name() const {
  auto it = low.find("name");
  if (it == low.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

const json* state_call::arg(const std::string& key) const {
  auto it = low.find(key);
  return it == low.end() ? nullptr : &*it;
}

bool state_call::flag(const std::string& key, bool fallback) const {
  const json* v = arg(key);
  return v == nullptr ? fallback : base::python_truth(*v);
}

bool is_internal_keyword(const std::string& key) {
  static const std::set<std::string> k_internal = {
      "onchanges", "onchanges_any", "onfail", "onfail_any", "onfail_all", "onfail_stop",
      "prereq", "prerequired", "watch", "watch_any", "require", "require_any", "listen",
      "onchanges_in", "onfail_in", "prereq_in", "watch_in", "require_in", "listen_in",
      "fun", "state", "check_cmd", "cmd_opts_exclude", "failhard", "onlyif", "unless",
      "creates", "retry", "order", "parallel", "reload_modules", "reload_grains",
      "reload_pillar", "runas", "runas_password", "fire_event", "saltenv", "umask", "use",
      "use_in"};
  if (key == "__reqs__") return false;
  return key.starts_with("__") || k_internal.contains(key);
}

json extra_kwargs(const state_call& c, const std::set<std::string>& named) {
  json out = json::object();
  for (const auto& [k, v] : c.low.items()) {
    if (!is_internal_keyword(k) && !named.contains(k)) out[k] = v;
  }
  return out;
}

asio::awaitable<int> state_call::retcode(std::string command, json options, int failed) const {
  if (functions == nullptr) throw base::error("no execution functions to run '" + command + "' with");
  // `test -e /path` and its like, as the shell's builtin answers them
  // (modules/shell_test.h), unless the command was to run as another user
  // or in a directory of its own.
  auto absent = [&options](const char* key) {
    auto it = options.find(key);
    return it == options.end() || it->is_null() || (it->is_string() && it->get<std::string>().empty());
  };
  if (absent("runas") && absent("cwd")) {
    if (auto rc = modules::shell_test(command)) co_return *rc;
  }
  modules::call c;
  c.fun = "cmd.run_all";
  c.kwargs = nlohmann::json::object();
  c.kwargs["cmd"] = command;
  // Salt's POSSIBLE_CMD_ARGS that brine's cmd.run_all takes (umask is not
  // among them: Salt moves it to __umask__ before the checks run).
  for (const char* key : {"cwd", "env", "timeout", "runas"}) {
    if (auto it = options.find(key); it != options.end() && !it->is_null()) {
      c.kwargs[key] = nlohmann::json::parse(it->dump());
    }
  }
  c.jid = jid;
  c.timeout = timeout;
  c.context = context;
  modules::outcome o = co_await modules::execute(*functions, std::move(c));
  if (!o.ret.is_object() || !o.ret.contains("retcode")) co_return failed;
  co_return o.ret["retcode"].get<int>();
}

asio::awaitable<json> state_call::run(std::string fun, nlohmann::json args,
                                     nlohmann::json kwargs) const {
  if (functions == nullptr) throw base::error("no execution functions to run " + fun + " with");
  modules::call c;
  c.fun = fun;
  c.args = std::move(args);
  c.kwargs = std::move(kwargs);
  c.jid = jid;
  c.timeout = timeout;
  c.context = context;
  modules::outcome o = co_await modules::execute(*functions, std::move(c));
  if (!o.success) {
    std::string text = o.ret.is_string() ? o.ret.get<std::string>() : o.ret.dump();
    if (text.starts_with("ERROR: ")) text.erase(0, 7);
    throw base::error(text);
  }
  if (o.ordered_ret) co_return *o.ordered_ret;
  co_return json(o.ret);
}

json make_ret(const std::string& name, bool result, const std::string& comment) {
  json r = json::object();
  r["name"] = name;
  r["changes"] = json::object();
  r["result"] = result;
  r["comment"] = comment;
  return r;
}

json failed_ret(json ret, const std::string& comment) {
  ret["result"] = false;
  ret["comment"] = comment;
  return ret;
}

json sorted_ret(const std::string& name, bool result) {
  json r = json::object();
  r["changes"] = json::object();
  r["comment"] = "";
  r["name"] = name;
  r["result"] = result;
  return r;
}

json result_first_ret(const std::string& name, bool result) {
  json r = json::object();
  r["name"] = name;
  r["result"] = result;
  r["changes"] = json::object();
  r["comment"] = "";
  return r;
}

void registry::add(const std::string& name, state_function fn, std::vector<std::string> required,
                   std::string doc) {
  if (name.find('.') == std::string::npos) {
    throw base::error("state function " + name + " needs a module: module.function");
  }
  entries_[name] = entry{std::move(fn), std::move(required), std::move(doc)};
}

const registry::entry* registry::find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

std::string missing_fun_string(const std::string& full, const registry& states,
                               const modules::registry* functions,
                               const std::vector<std::string>& file_dirs) {
  const std::string mod = full.substr(0, full.find('.'));
  if (!states.has_module(mod)) {
    for (const auto& dir : file_dirs) {
      std::error_code ec;
      if (std::filesystem::is_regular_file(dir + "/_states/" + mod + ".py", ec)) {
        return "'" + mod + "' is a custom state module in Python (salt://_states/" + mod +
               ".py), which brine does not run: write these states with brine's own (cmd.run, "
               "file.*, module.run)";
      }
    }
  }
  // State modules brine has no code for, with the execution function their
  // __virtual__ asks for and the reason Salt gives without it.
  struct gate {
    const char* module;
    const char* function;
    const char* reason;
  };
  static const gate k_gates[] = {
      {"iptables", "iptables.version", "iptables module could not be loaded"},
      {"mysql_database", "mysql.db_exists", "mysql module could not be loaded"},
      {"mysql_user", "mysql.user_exists", "mysql module could not be loaded"},
      {"mysql_grants", "mysql.grant_exists", "mysql module could not be loaded"},
      {"mysql_query", "mysql.query", "mysql module could not be loaded"},
      {"chocolatey", "chocolatey.install", "chocolatey module could not be loaded"},
  };
  if (!states.has_module(mod)) {
    for (const auto& g : k_gates) {
      if (mod != g.module) continue;
      if (functions != nullptr && functions->find(g.function) != nullptr) break;
      return "'" + mod + "' __virtual__ returned False: " + g.reason;
    }
  }
  return "'" + full + "' is not available.";
}

bool registry::has_module(const std::string& module) const {
  auto it = entries_.lower_bound(module + ".");
  return it != entries_.end() && it->first.starts_with(module + ".");
}

std::vector<std::string> registry::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

void register_builtin_states(registry& reg) {
  register_test_states(reg);
  register_cmd_states(reg);
  register_file_states(reg);
  register_file_cache_states(reg);
  register_file_recurse_states(reg);
  register_file_path_states(reg);
  register_file_edit_states(reg);
  register_user_states(reg);
  register_group_states(reg);
  register_host_states(reg);
  register_sysctl_states(reg);
  register_cron_states(reg);
  register_ssh_auth_states(reg);
  register_ssh_known_hosts_states(reg);
  register_service_states(reg);
  register_pkg_states(reg);
  register_pkgrepo_states(reg);
  register_module_states(reg);
  register_git_states(reg);
  register_alternatives_states(reg);
  register_ini_states(reg);
  register_archive_states(reg);
  register_postgres_user_states(reg);
  register_postgres_database_states(reg);
  register_postgres_schema_states(reg);
  register_postgres_extension_states(reg);
}

}  // namespace brine::states
