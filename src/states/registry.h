#pragma once

#include <asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace brine::modules {
class minion_context;
class registry;
}  // namespace brine::modules
namespace brine::state {
class compiler;
}  // namespace brine::state

// State modules: Salt's salt/states/*, in C++. A state function looks at the
// machine, changes it where it differs from what the low chunk declares (or,
// under test, says what it would change), and answers with Salt's return
// dict. The runner (src/apply) calls them; this folder knows nothing of
// requisites or order.
namespace brine::states {

using json = nlohmann::ordered_json;

// What the states of one run share, as Salt keeps it beside the State
// object: the run's low chunks (Salt's __lowstate__, which file.directory's
// clean reads to keep the files of the states it requires) and the file
// accumulators (file.accumulated charges them; file.managed's templates and
// file.blockreplace read them). The runner makes one per run and hands each
// state call a pointer; states of one run share its executor, so only what
// the compile pool touches (the template compilers) is under a lock.
struct run_data {
  // The run's chunks (owned by the runner, alive while the run is).
  const json* lowstate = nullptr;
  // target file -> accumulator name -> texts, in the order they came.
  json accumulators = json::object();
  // target file -> accumulator name -> ids of the states it is required by.
  json accumulator_deps = json::object();
  // Templates render with one compiler per run (templates.h): the one that
  // compiled the run when there is one, serving every saltenv; otherwise one
  // per saltenv, made at its first template. Templates render on the
  // compile pool, so these are under templates_mu.
  std::mutex templates_mu;
  std::shared_ptr<state::compiler> compiler;
  std::map<std::string, std::shared_ptr<state::compiler>> env_compilers;
};

// What a state function gets: the low chunk (its arguments by name, and
// Salt's bookkeeping keys __id__, __sls__, ...), whether this is a test run,
// and what it may use of the minion.
struct state_call {
  json low = json::object();
  bool test = false;
  // The minion running the state, and its execution functions (what
  // module.run and the global `unless`/`onlyif` call); null outside one.
  modules::minion_context* context = nullptr;
  const modules::registry* functions = nullptr;
  std::string jid;
  // The run this call belongs to; null outside a runner (unit tests, a
  // state function called by another).
  run_data* per_run = nullptr;
  // The limit of the whole run: child processes a state starts get no more.
  std::chrono::seconds timeout{3600};

  // low["name"] as text (Salt's name argument).
  std::string name() const;
  // low[key], or nullptr when absent.
  const json* arg(const std::string& key) const;
  // low[key] as Python's truth, `fallback` when absent.
  bool flag(const std::string& key, bool fallback = false) const;
  // Runs `command` with the shell through cmd.run_all, with the cwd, env
  // and timeout that `options` (a low chunk) gives, and answers its exit
  // code; `failed` when it could not be run (Salt's unless/onlyif/check_cmd).
  asio::awaitable<int> retcode(std::string command, json options = json::object(),
                               int failed = 100) const;
  // Runs the execution function `fun` (Salt's __salt__[fun](*args,
  // **kwargs)) with this call's job, limit and minion, and answers what it
  // returned, in the function's own key order where it keeps one (Salt's
  // OrderedDicts, e.g. hosts.list_hosts); a function that failed throws
  // base::error with its message (the runner reports it as Salt reports a
  // state's exception).
  asio::awaitable<json> run(std::string fun,
                                      nlohmann::json args = nlohmann::json::array(),
                                      nlohmann::json kwargs = nlohmann::json::object()) const;
};

// Salt's STATE_INTERNAL_KEYWORDS (requisites and runtime keywords such as
// onlyif, order, saltenv) and the "__" bookkeeping of Salt and brine, but
// for __reqs__, which Salt passes on: what format_call keeps out of a state
// function's **kwargs.
bool is_internal_keyword(const std::string& key);
// The low chunk's keyword arguments that a state function does not name in
// its signature (`named`, Salt's argspec): the function's **kwargs as
// format_call builds them, in the chunk's order.
json extra_kwargs(const state_call& c, const std::set<std::string>& named = {});

// A state function's answer in Salt's shape and key order, as the module
// builds it: at least name, changes, result (true, false, or null for "would
// change" under test) and comment (a string, or a list of strings). Extra
// keys (skip_watch, warnings, ...) ride along.
using state_function = std::function<asio::awaitable<json>(state_call)>;

// Salt's usual return skeleton: {"name", "changes", "result", "comment"}.
json make_ret(const std::string& name, bool result = true, const std::string& comment = "");
// The same in the key orders other modules write it (the order shows in
// the output): {"changes", "comment", "name", "result"} (Salt's sorted
// literal: cron.present, file.managed, file.serialize) and {"name",
// "result", "changes", "comment"} (cron.absent, sysctl.present,
// archive.extracted).
json sorted_ret(const std::string& name, bool result = true);
// Salt's _error(ret, msg): `ret` with result False and `comment`.
json failed_ret(json ret, const std::string& comment);
json result_first_ret(const std::string& name, bool result = true);

// State functions by "module.function". Filled once by explicit
// registration, then only read (safe to share between threads after that).
class registry {
 public:
  struct entry {
    state_function fn;
    // Parameters without a default, in order: Salt's verify_data reports
    // "Missing parameter X for state Y" for each one the low chunk lacks.
    std::vector<std::string> required;
    std::string doc;
  };
  void add(const std::string& name, state_function fn, std::vector<std::string> required,
           std::string doc);
  const entry* find(const std::string& name) const;
  // Whether any function of `module` (e.g. "file") is registered.
  bool has_module(const std::string& module) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, entry> entries_;
};

// Salt's missing_fun_string for a state function brine does not register:
// "'mod' __virtual__ returned False: <reason>" where Salt's module gates on
// an execution function that `functions` lacks too (mysql_* on
// mysql.db_exists, iptables on iptables.version ...), else "'mod.fun' is
// not available.".
// A module that the state tree ships as Salt's custom Python code
// (_states/MOD.py in `file_dirs`, the saltenv's roots) is named as such:
// brine does not run Python.
std::string missing_fun_string(const std::string& full, const registry& states,
                               const modules::registry* functions,
                               const std::vector<std::string>& file_dirs = {});

// Every built-in state module.
void register_builtin_states(registry& reg);
// One module each; register_builtin_states calls them all.
void register_test_states(registry& reg);
void register_cmd_states(registry& reg);
void register_file_states(registry& reg);
void register_file_cache_states(registry& reg);
// file.recurse (file_recurse_states.cc).
void register_file_recurse_states(registry& reg);
// file.absent, symlink, touch, exists, missing, copy (file_path_states.cc).
void register_file_path_states(registry& reg);
// file.append, prepend, replace, line, blockreplace, comment, uncomment,
// keyvalue, serialize (file_edit_states.cc).
void register_file_edit_states(registry& reg);
void register_user_states(registry& reg);
void register_group_states(registry& reg);
void register_host_states(registry& reg);
void register_sysctl_states(registry& reg);
void register_cron_states(registry& reg);
void register_ssh_auth_states(registry& reg);
void register_ssh_known_hosts_states(registry& reg);
// service.running, dead, enabled, disabled, masked, unmasked, mod_watch.
void register_service_states(registry& reg);
// pkg.installed, latest, removed, purged, uptodate, held, unheld (apt/dpkg).
void register_pkg_states(registry& reg);
// pkgrepo.managed, pkgrepo.absent (apt sources).
void register_pkgrepo_states(registry& reg);
// module.run, module.wait (module_states.cc).
void register_module_states(registry& reg);
// ini.options_present (ini_states.cc).
void register_ini_states(registry& reg);
// alternatives.install, remove, auto, set (alternatives_states.cc).
void register_alternatives_states(registry& reg);
// git.config_set, git.config_unset (git_states.cc).
void register_git_states(registry& reg);
// archive.extracted (archive_states.cc).
void register_archive_states(registry& reg);
// postgres_user, postgres_database, postgres_schema, postgres_extension
// (postgres_*_states.cc), through the postgres execution functions.
void register_postgres_user_states(registry& reg);
void register_postgres_database_states(registry& reg);
void register_postgres_schema_states(registry& reg);
void register_postgres_extension_states(registry& reg);

}  // namespace brine::states
