// The sys and saltutil modules: what the minion can run (sys.*), and its jobs
// and data (saltutil.*).

#include <set>

#include "base/error.h"
#include "modules/arguments.h"
#include "modules/context.h"
#include "modules/data.h"
#include "modules/registry.h"

namespace brine::modules {
namespace sys_mod {
namespace {

constexpr auto instant = registry::kind::instant;

// Salt's sys.* take module or function globs; `mod` alone means `mod.*`.
bool wanted(const std::vector<nlohmann::json>& globs, const std::string& fun) {
  if (globs.empty()) return true;
  std::string mod = fun.substr(0, fun.find('.'));
  for (const auto& g : globs) {
    std::string glob = g.is_string() ? g.get<std::string>() : g.dump();
    if (fnmatch(glob, fun) || fnmatch(glob, mod) || (glob.ends_with(".") && fun.starts_with(glob))) {
      return true;
    }
  }
  return false;
}

asio::awaitable<outcome> list_functions(call c) {
  arguments s("sys.list_functions", c, {}, true);
  nlohmann::json out = nlohmann::json::array();
  for (const auto& name : need_context(c).functions().names()) {
    if (wanted(s.rest(), name)) out.push_back(name);
  }
  co_return outcome{std::move(out)};
}

asio::awaitable<outcome> list_modules(call c) {
  arguments s("sys.list_modules", c, {}, true);
  std::set<std::string> mods;
  for (const auto& name : need_context(c).functions().names()) {
    std::string mod = name.substr(0, name.find('.'));
    bool ok = s.rest().empty();
    for (const auto& g : s.rest()) ok |= fnmatch(g.is_string() ? g.get<std::string>() : g.dump(), mod);
    if (ok) mods.insert(mod);
  }
  co_return outcome{nlohmann::json(mods)};
}

asio::awaitable<outcome> doc(call c) {
  arguments s("sys.doc", c, {}, true);
  const registry& reg = need_context(c).functions();
  nlohmann::json out = nlohmann::json::object();
  for (const auto& name : reg.names()) {
    if (wanted(s.rest(), name)) out[name] = reg.doc(name);
  }
  co_return outcome{std::move(out)};
}

nlohmann::json job_entry(const running_job& j) {
  return {{"jid", j.jid}, {"fun", j.fun}, {"arg", j.args}, {"kwargs", j.kwargs},
          {"started", j.started}};
}

asio::awaitable<outcome> running(call c) {
  arguments s("saltutil.running", c, {});
  nlohmann::json out = nlohmann::json::array();
  for (const auto& j : need_context(c).running()) {
    if (j.jid != c.jid) out.push_back(job_entry(j));  // not this very call
  }
  co_return outcome{std::move(out)};
}

asio::awaitable<outcome> find_job(call c) {
  arguments s("saltutil.find_job", c, {"jid"});
  std::string jid = s.scalar_text("jid", "");
  if (jid.empty()) throw base::error("saltutil.find_job needs a jid");
  for (const auto& j : need_context(c).running()) {
    if (j.jid == jid) co_return outcome{job_entry(j)};
  }
  co_return outcome{nlohmann::json::object()};
}

asio::awaitable<outcome> kill_job(call c) {
  arguments s("saltutil.kill_job", c, {"jid"});
  std::string jid = s.scalar_text("jid", "");
  if (jid.empty()) throw base::error("saltutil.kill_job needs a jid");
  if (!need_context(c).kill_job(jid)) co_return outcome{""};  // Salt: nothing to kill
  co_return outcome{"Signal 9 sent to job " + jid};
}

asio::awaitable<outcome> refresh_grains(call c) {
  arguments s("saltutil.refresh_grains", c, {"refresh_pillar"});
  need_context(c).refresh_grains();
  co_return outcome{true};
}

asio::awaitable<outcome> refresh_pillar(call c) {
  arguments s("saltutil.refresh_pillar", c, {"wait", "timeout", "clean_cache"});
  std::string why;
  if (!need_context(c).refresh_pillar(why)) co_return error_outcome(why);
  co_return outcome{true};
}

asio::awaitable<outcome> sync_all(call c) {
  arguments s("saltutil.sync_all", c,
              {"saltenv", "refresh", "extmod_whitelist", "extmod_blacklist"});
  // Salt copies custom modules from the file server; brine's modules are
  // built in, so there is nothing to copy.
  co_return outcome{nlohmann::json{{"beacons", nlohmann::json::array()},
                                   {"modules", nlohmann::json::array()},
                                   {"states", nlohmann::json::array()},
                                   {"grains", nlohmann::json::array()},
                                   {"renderers", nlohmann::json::array()},
                                   {"returners", nlohmann::json::array()},
                                   {"utils", nlohmann::json::array()},
                                   {"note", "brine's modules are built in; nothing to sync"}}};
}

}  // namespace
}  // namespace sys_mod

void register_sys_module(registry& reg) {
  using namespace sys_mod;
  reg.add("sys.list_functions", list_functions,
          "sys.list_functions [GLOB...]: the functions this minion has (a module name stands "
          "for all of its functions).\n\nCLI example: brine cmd '*' sys.list_functions file",
          instant);
  reg.add("sys.list_modules", list_modules,
          "sys.list_modules [GLOB...]: the modules this minion has.\n\nCLI example: brine cmd '*' "
          "sys.list_modules",
          instant);
  reg.add("sys.doc", doc,
          "sys.doc [FUNCTION|MODULE...]: the documentation of functions.\n\nCLI example: brine "
          "'*' sys.doc grains.get",
          instant);
  reg.add("saltutil.running", running,
          "saltutil.running: the jobs this minion is running now (jid, fun, arg, started).\n\nCLI "
          "example: brine cmd '*' saltutil.running",
          instant);
  reg.add("saltutil.find_job", find_job,
          "saltutil.find_job JID: the running job JID, or {} if it is not running.\n\nCLI example: "
          "brine cmd '*' saltutil.find_job 20261123120000123456",
          instant);
  reg.add("saltutil.kill_job", kill_job,
          "saltutil.kill_job JID: stops the running job JID (its processes are killed).\n\nCLI "
          "example: brine cmd '*' saltutil.kill_job 20261123120000123456",
          instant);
  reg.add("saltutil.refresh_grains", refresh_grains,
          "saltutil.refresh_grains: collects the grains again and sends them to the "
          "masters.\n\nCLI example: brine cmd '*' saltutil.refresh_grains",
          instant);
  reg.add("saltutil.refresh_pillar", refresh_pillar,
          "saltutil.refresh_pillar: asks the masters to compile this minion's pillar "
          "again.\n\nCLI example: brine cmd '*' saltutil.refresh_pillar",
          instant);
  reg.add("saltutil.sync_all", sync_all,
          "saltutil.sync_all: a no-op kept for Salt's habits: brine's modules are built in, so "
          "nothing is synced.\n\nCLI example: brine cmd '*' saltutil.sync_all",
          instant);
}

}  // namespace brine::modules
