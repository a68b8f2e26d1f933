#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <asio/awaitable.hpp>
#include <nlohmann/json.hpp>

namespace brine::modules {

class minion_context;

// One invocation of an execution function, as a minion received it.
struct call {
  std::string fun;                                   // "cmd.run"
  nlohmann::json args = nlohmann::json::array();     // positional
  nlohmann::json kwargs = nlohmann::json::object();  // keyword
  std::string jid;
  std::chrono::seconds timeout{3600};                // the job's limit
  // The minion running it; null outside one (functions that need it fail
  // with a message saying so).
  minion_context* context = nullptr;
};

// What a function produced. `success` false marks a failed job (the CLI exits
// non-zero); `retcode` is Salt's retcode.
struct outcome {
  nlohmann::json ret;
  bool success = true;
  int retcode = 0;
  // `ret` in the key order the function made it (Salt's dicts keep
  // insertion order; nlohmann::json sorts): set by functions whose output
  // Salt prints in its own order (state.show_*), printed by brine call
  // in place of `ret`. Null for the rest.
  std::shared_ptr<const nlohmann::ordered_json> ordered_ret;
};

// A function runs on the caller's executor and must not block it: child
// processes and sleeps are awaited. Cancellation (asio's per-operation
// cancellation, as `||` or a cancellation slot delivers) must stop the work:
// a child process group is killed and reaped.
using function = std::function<asio::awaitable<outcome>(call)>;

// Functions by name. Filled once at start by explicit registration, then only
// read (safe to share between threads after that).
class registry {
 public:
  // `instant`: the function never waits (no child, no timer, no I/O), so it
  // needs no time limit and execute() spares it the deadline race.
  enum class kind { may_block, instant };
  void add(const std::string& name, function fn, std::string doc, kind k = kind::may_block);
  const function* find(const std::string& name) const;
  bool instant(const std::string& name) const;
  std::vector<std::string> names() const;
  const std::string& doc(const std::string& name) const;

 private:
  struct entry {
    function fn;
    std::string doc;
    kind k = kind::may_block;
  };
  std::map<std::string, entry> entries_;
};

// Salt's failed return: ret is "ERROR: " + message, success false.
outcome error_outcome(const std::string& message, int retcode = 1);

// Every built-in function (test.*, cmd.*), each with a one-line doc.
void register_builtin_modules(registry& reg);
// One module each; register_builtin_modules calls them all.
void register_test_module(registry& reg);
void register_cmd_module(registry& reg);
void register_file_module(registry& reg);
void register_pkg_module(registry& reg);
// pkg.list_repos, get_repo, mod_repo, del_repo (pkg_repo_mod.cc).
void register_pkg_repo_module(registry& reg);
void register_service_module(registry& reg);
void register_user_module(registry& reg);  // user.* and group.*
void register_network_module(registry& reg);
void register_status_module(registry& reg);
void register_grains_module(registry& reg);
void register_pillar_module(registry& reg);
void register_mine_module(registry& reg);
void register_config_module(registry& reg);  // config.* (config_mod.cc)
void register_sys_module(registry& reg);     // sys.* and saltutil.*
// slsutil.*, defaults.*, log.*, cp.list_*, file.join/dirname/basename
void register_slsutil_module(registry& reg);
void register_cp_module(registry& reg);  // salt:// through the file client
// alternatives.* over /etc/alternatives (alternatives.h: the paths, for tests)
void register_alternatives_module(registry& reg);
// hosts.* over Salt's hosts.file (/etc/hosts by default)
void register_hosts_module(registry& reg);
void register_sysctl_module(registry& reg);
// cron.* over crontab -l / crontab - (cron.h: the matching rules)
void register_cron_module(registry& reg);
// ssh.*: authorized_keys and known_hosts (ssh_keys.h: Salt's key line split)
void register_ssh_module(registry& reg);
void register_shadow_module(registry& reg);  // shadow.info, set_password
// git.config_get, config_get_regexp, config_set, config_unset, current_branch,
// revision, checkout via the git binary
void register_git_module(registry& reg);
// archive.list, archive.tar, archive.unzip for archive.extracted
void register_archive_module(registry& reg);
// postgres.*: users, databases, schemas, extensions through libpq (postgres_mod.cc)
void register_postgres_module(registry& reg);
// ini.set_option, get_option, remove_option, get_section, remove_section, get_ini.
void register_ini_module(registry& reg);

// Runs `c` with `c.timeout` as its limit. An unknown function, an exception,
// a bad argument or the limit each give an outcome with success == false and a
// message in `ret` that says what went wrong; execute never throws for them.
// Retcodes: 254 for an unknown function, 1 for the rest (Salt's). A function
// signals a bad argument by throwing base::error with a message for the user.
// A limit of zero or less means none. When the caller cancels execute, the
// function is cancelled (its children killed and reaped) before it returns an
// outcome saying so.
asio::awaitable<outcome> execute(const registry& reg, call c);

}  // namespace brine::modules
