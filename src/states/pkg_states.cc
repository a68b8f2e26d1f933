// Salt's pkg states for apt/dpkg: pkg.installed, latest, removed, purged,
// uptodate, held, unheld and mod_watch, through the pkg module's execution
// functions (pkg.list_pkgs, pkg.install, pkg.hold, ...) as Salt's
// salt/states/pkg.py goes through aptpkg.

#include <fnmatch.h>

#include <algorithm>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "modules/apt.h"
#include "states/python_text.h"
#include "states/registry.h"

namespace brine::states {
namespace pkg_states {
namespace {

using plain_json = nlohmann::json;

// Salt refreshes the package database once per state run that has a
// pkg.installed or pkg.latest (mod_init writes a flag file that the first
// refresh clears) unless refresh=False says otherwise. brine keeps the flag
// per job: the jids that already refreshed.
std::mutex refreshed_mutex;
std::deque<std::string> refreshed_jids;

bool refresh_pending(const state_call& c) {
  if (c.jid.empty()) return true;
  std::lock_guard lock(refreshed_mutex);
  return std::find(refreshed_jids.begin(), refreshed_jids.end(), c.jid) == refreshed_jids.end();
}

void mark_refreshed(const state_call& c) {
  if (c.jid.empty()) return;
  std::lock_guard lock(refreshed_mutex);
  if (std::find(refreshed_jids.begin(), refreshed_jids.end(), c.jid) != refreshed_jids.end()) {
    return;
  }
  refreshed_jids.push_back(c.jid);
  if (refreshed_jids.size() > 256) refreshed_jids.pop_front();
}

// Salt's salt.utils.pkg.check_refresh.
bool check_refresh(const state_call& c) {
  const json* v = c.arg("refresh");
  if (v != nullptr && !v->is_null()) {
    if (v->is_boolean() && !v->get<bool>()) return false;
    if (c.flag("refresh")) return true;
  }
  return refresh_pending(c);
}

asio::awaitable<json> call_fn(const state_call& c, std::string fun,
                              plain_json args = plain_json::array(),
                              plain_json kwargs = plain_json::object()) {
  json r = co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
  co_return r;
}

plain_json plain(const json& v) { return plain_json(v); }

std::string text(const json& v) { return v.is_null() ? "" : py_text(v); }

// The pkg module's {name: {old, new}} answers (also purge's {installed:
// {...}, removed: {...}}) in Salt's key order: old, then new.
json old_first(const json& changes) {
  if (!changes.is_object()) return changes;
  json out = json::object();
  for (const auto& [k, v] : changes.items()) {
    if (v.is_object() && v.contains("old") && v.contains("new") && v.size() == 2) {
      out[k] = json{{"old", v["old"]}, {"new", v["new"]}};
    } else if (v.is_object() && (k == "installed" || k == "removed")) {
      out[k] = old_first(v);
    } else {
      out[k] = v;
    }
  }
  return out;
}

std::string joined(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Salt's CommandExecutionError.strerror_without_changes for the pkg
// module's failures that carry info ("WHAT. Additional info follows:\n\n"
// then the info as the nested outputter prints it): the same text without
// its changes block; nullopt for any other error.
std::optional<std::string> without_changes(const std::string& msg) {
  const std::string marker = ". Additional info follows:\n\n";
  auto at = msg.find(marker);
  if (at == std::string::npos) return std::nullopt;
  std::string body = msg.substr(at + marker.size());
  if (body.starts_with("changes:\n")) {
    auto next = body.find("\nerrors:\n");
    body = next == std::string::npos ? "" : body.substr(next + 1);
  }
  // Only changes: Salt falls back to the bare message.
  if (body.empty()) return msg.substr(0, at);
  return msg.substr(0, at + marker.size()) + body;
}

// compare_dicts of two package lists: {name: {old, new}}.
json diff_lists(const std::map<std::string, std::vector<std::string>>& before,
                const std::map<std::string, std::vector<std::string>>& after) {
  auto joined_versions = [](const std::vector<std::string>& v) {
    std::string out;
    for (const auto& x : v) out += (out.empty() ? "" : ",") + x;
    return out;
  };
  std::set<std::string> names;
  for (const auto& [n, v] : before) names.insert(n);
  for (const auto& [n, v] : after) names.insert(n);
  json out = json::object();
  for (const auto& n : names) {
    auto b = before.find(n);
    auto a = after.find(n);
    std::string o = b == before.end() ? "" : joined_versions(b->second);
    std::string nv = a == after.end() ? "" : joined_versions(a->second);
    if (o != nv) out[n] = json{{"old", o}, {"new", nv}};
  }
  return out;
}

// A package and the version it should have (none: any), in the order given.
struct wanted {
  std::string name;
  std::optional<std::string> version;
};
using wanted_list = std::vector<wanted>;

wanted* find(wanted_list& list, const std::string& name) {
  for (auto& w : list) {
    if (w.name == name) return &w;
  }
  return nullptr;
}
const wanted* find(const wanted_list& list, const std::string& name) {
  for (const auto& w : list) {
    if (w.name == name) return &w;
  }
  return nullptr;
}

// Salt's _repack_pkgs: names or one-key {name: version} mappings; nullopt
// for a malformed list ("Invalidly formatted pkgs parameter").
std::optional<wanted_list> repack(const json& pkgs) {
  if (!pkgs.is_array()) return std::nullopt;
  wanted_list out;
  for (const auto& item : pkgs) {
    if (item.is_object()) {
      for (const auto& [k, v] : item.items()) {
        std::optional<std::string> version;
        if (!v.is_null()) version = text(v);
        if (wanted* w = find(out, k)) {
          w->version = version;
        } else {
          out.push_back({k, version});
        }
      }
    } else if (item.is_string() || item.is_number()) {
      std::string n = text(item);
      if (find(out, n) == nullptr) out.push_back({n, std::nullopt});
    } else {
      return std::nullopt;
    }
  }
  if (out.size() != pkgs.size()) {
    throw base::error(
        "You are passing a list of packages that contains duplicated packages names: " +
        py_repr(pkgs) +
        ". This cannot be processed. In case you are targeting different versions of the same "
        "package, please target them individually");
  }
  if (out.empty()) return std::nullopt;
  return out;
}

// name -> installed versions (pkg.list_pkgs versions_as_list=True).
using versions_map = std::map<std::string, std::vector<std::string>>;

asio::awaitable<versions_map> list_pkgs(const state_call& c, plain_json kwargs) {
  kwargs["versions_as_list"] = true;
  json r = co_await call_fn(c, "pkg.list_pkgs", plain_json::array(), std::move(kwargs));
  versions_map out;
  for (const auto& [name, versions] : r.items()) {
    for (const auto& v : versions) out[name].push_back(text(v));
  }
  co_return out;
}

// Salt's salt.utils.pkg.split_comparison after its strip().
std::pair<std::string, std::string> comparison(std::string spec) {
  auto b = spec.find_first_not_of(" \t\r\n");
  auto e = spec.find_last_not_of(" \t\r\n");
  spec = b == std::string::npos ? "" : spec.substr(b, e - b + 1);
  // A bare version (or none of Salt's forms) is equality.
  auto [oper, version] = modules::apt::split_comparison(spec);
  if (oper.empty() || oper == "=") oper = "==";
  return {oper, version};
}

// Salt's _fulfills_version_string: some installed version meets every
// comma-separated condition ("1.2", ">=1.0,<2.0", "1.*").
asio::awaitable<bool> fulfills(const state_call& c, std::vector<std::string> installed,
                               std::string conditions, std::optional<bool> ignore_epoch,
                               bool allow_updates) {
  std::vector<std::pair<std::string, std::string>> conds;
  std::string spec = conditions;
  if (spec.find_first_not_of(" \t\r\n") == std::string::npos) co_return false;
  std::size_t start = 0;
  while (true) {
    auto comma = spec.find(',', start);
    conds.push_back(comparison(spec.substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  for (const auto& have : installed) {
    bool all = true;
    for (auto [oper, want] : conds) {
      if (allow_updates && conds.size() == 1 && oper == "==") oper = ">=";
      bool ok = oper == "==" && ::fnmatch(want.c_str(), have.c_str(), 0) == 0;
      if (!ok) {
        // Salt's _check_ignore_epoch.
        bool no_epoch = ignore_epoch.value_or(oper.find('<') == std::string::npos &&
                                              oper.find('>') == std::string::npos &&
                                              want.find(':') == std::string::npos);
        plain_json pair = plain_json::array({have, want});
        plain_json options = plain_json{{"ignore_epoch", no_epoch}};
        json r = co_await call_fn(c, "pkg.version_cmp", std::move(pair), std::move(options));
        int cmp = r.is_number_integer() ? r.get<int>() : 99;
        if (oper == "!=") {
          ok = cmp != 0 && cmp != 99;
        } else if (oper == "<") {
          ok = cmp == -1;
        } else if (oper == "<=") {
          ok = cmp == -1 || cmp == 0;
        } else if (oper == "==") {
          ok = cmp == 0;
        } else if (oper == ">=") {
          ok = cmp == 0 || cmp == 1;
        } else if (oper == ">") {
          ok = cmp == 1;
        }
      }
      all = all && ok;
    }
    if (all) co_return true;
  }
  co_return false;
}

std::optional<bool> optional_flag(const state_call& c, const std::string& key) {
  const json* v = c.arg(key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  return c.flag(key);
}

// pkg.latest_version of `names` with the state's fromrepo; the refresh it
// makes counts as the job's.
asio::awaitable<json> latest_versions(state_call c, std::vector<std::string> names, bool refresh) {
  plain_json kwargs = {{"refresh", refresh}};
  if (const json* f = c.arg("fromrepo"); f != nullptr && !f->is_null()) {
    kwargs["fromrepo"] = plain(*f);
  }
  json versions = co_await call_fn(c, "pkg.latest_version", plain_json(names), std::move(kwargs));
  if (refresh) mark_refreshed(c);
  co_return versions;
}

// Salt's return with the changes made so far.
json ret_with(const std::string& name, bool result, const std::string& comment, json changes) {
  json ret = make_ret(name, result, comment);
  ret["changes"] = std::move(changes);
  return ret;
}

// Salt's _get_desired_pkg: "name=1.0", "name>=1.0" or "name".
std::string desired_text(const wanted& w) {
  if (!w.version || w.version->empty()) return w.name;
  const char f = w.version->front();
  return w.name + (f == '<' || f == '>' || f == '=' ? "" : "=") + *w.version;
}

// The pkg.install keyword arguments that a pkg state passes through
// (Salt passes its **kwargs; brine names the ones pkg.install knows).
plain_json install_passthrough(const state_call& c) {
  plain_json out = plain_json::object();
  for (const char* key : {"install_recommends", "only_upgrade", "force_conf_new",
                          "cache_valid_time", "downloadonly", "skip_verify", "fromrepo"}) {
    if (const json* v = c.arg(key); v != nullptr && !v->is_null()) out[key] = plain(*v);
  }
  return out;
}

// Every hold/unhold answer, split as Salt's installed splits them.
struct hold_results {
  std::vector<json> modified, not_modified, failed;
};

hold_results split_hold(const json& hold_ret) {
  hold_results out;
  for (const auto& [name, r] : hold_ret.items()) {
    const json& result = r["result"];
    const bool ok = result.is_boolean() && result.get<bool>();
    if (!r["changes"].empty()) out.modified.push_back(r);
    if (r["changes"].empty() && ok) out.not_modified.push_back(r);
    if (!ok) out.failed.push_back(r);
  }
  return out;
}

// What pkg.installed will do: Salt's _find_install_targets over the
// packages asked for (`desired`, "latest" resolved to a version) and those
// installed (`cur`); `early` is the return when there is nothing to do or
// the request is bad.
struct install_plan {
  versions_map cur;
  wanted_list desired;
  wanted_list targets;
  wanted_list to_reinstall;
  std::vector<std::string> to_unpurge;
  bool version_spec = false;
  bool refresh = false;
  std::optional<bool> ignore_epoch;
  std::optional<json> early;
};

asio::awaitable<void> find_install_targets(const state_call& c, const std::string& name,
                                           const json& pkgs, install_plan& p) {
  std::optional<wanted_list> desired;
  try {
    p.cur = co_await list_pkgs(c, plain_json::object());
    desired = repack(pkgs);
  } catch (const base::error& e) {
    p.early = make_ret(name, false, e.what());
    co_return;
  }
  if (!desired) {
    p.early = make_ret(name, false, "Invalidly formatted 'pkgs' parameter. See minion log.");
    co_return;
  }
  p.desired = std::move(*desired);
  plain_json which = plain_json{{"purge_desired", true}};
  versions_map purge_desired = co_await list_pkgs(c, std::move(which));
  for (const auto& w : p.desired) {
    if (purge_desired.contains(w.name)) p.to_unpurge.push_back(w.name);
  }
  std::vector<std::string> wants_latest;
  for (const auto& w : p.desired) {
    if (w.version == "latest") wants_latest.push_back(w.name);
  }
  if (!wants_latest.empty()) {
    json latest = co_await latest_versions(c, wants_latest, p.refresh);
    p.refresh = false;
    for (const auto& n : wants_latest) {
      std::string v = wants_latest.size() == 1 ? text(latest) : text(latest.value(n, json("")));
      wanted* w = find(p.desired, n);
      if (!v.empty()) {
        w->version = v;
      } else if (p.cur.contains(n)) {
        w->version = p.cur[n].back();
      } else {
        w->version.reset();
      }
    }
  }
  const bool reinstall = c.flag("reinstall");
  const bool allow_updates = c.flag("allow_updates");
  for (const auto& w : p.desired) {
    auto it = p.cur.find(w.name);
    if (it == p.cur.end() || it->second.empty()) {
      p.targets.push_back(w);
      continue;
    }
    if (reinstall) {
      p.to_reinstall.push_back(w);
      continue;
    }
    if (!w.version) continue;
    bool ok = co_await fulfills(c, it->second, *w.version, p.ignore_epoch, allow_updates);
    p.version_spec = true;
    if (!ok) p.targets.push_back(w);
  }
  if (p.targets.empty() && p.to_unpurge.empty() && p.to_reinstall.empty()) {
    p.early = make_ret(name, true,
                       std::string("All specified packages are already installed") +
                           (p.version_spec ? " and are at the desired version" : ""));
  }
}

// pkg.hold or pkg.unhold (hold=) of `kwargs`' packages, split as Salt's
// installed splits the answers.
asio::awaitable<hold_results> set_holds(const state_call& c, plain_json kwargs) {
  const char* fun = c.flag("hold") ? "pkg.hold" : "pkg.unhold";
  json hold_ret = co_await call_fn(c, fun, plain_json::array(), std::move(kwargs));
  co_return split_hold(hold_ret);
}

// The early return with hold= applied, as Salt applies it when nothing is
// installed: each hold's comment after it, its result the last one's.
asio::awaitable<json> early_with_holds(const state_call& c, const std::string& name,
                                       const json& pkgs, json result) {
  hold_results h;
  try {
    plain_json kwargs = {{"name", name}, {"test", c.test}};
    if (!pkgs.is_null()) kwargs["pkgs"] = plain(pkgs);
    h = co_await set_holds(c, std::move(kwargs));
  } catch (const base::error& e) {
    co_return make_ret(name, false, e.what());
  }
  std::string comment = text(result["comment"]);
  for (const auto& i : h.modified) {
    comment += ".\n" + text(i["comment"]);
    result["result"] = i["result"];
    result["changes"][text(i["name"])] = i["changes"];
  }
  for (const std::vector<json>* list : {&h.not_modified, &h.failed}) {
    for (const auto& i : *list) {
      comment += ".\n" + text(i["comment"]);
      result["result"] = i["result"];
    }
  }
  result["comment"] = comment;
  co_return result;
}

// Under test: what would be installed and reinstalled.
json test_plan_ret(const std::string& name, const install_plan& p) {
  std::vector<std::string> comment;
  json changes = json::object();
  if (!p.targets.empty()) {
    std::vector<std::string> names;
    for (const auto& t : p.targets) names.push_back(t.name);
    for (const auto& n : names) changes[n] = json{{"new", "installed"}, {"old", ""}};
    comment.push_back("The following packages would be installed/updated: " + joined(names));
  }
  if (!p.to_reinstall.empty()) {
    std::vector<std::string> shown;
    for (const auto& t : p.to_reinstall) {
      shown.push_back(desired_text(t));
      changes[shown.back()] = json{{"new", "installed"}, {"old", ""}};
    }
    comment.push_back("The following packages would be reinstalled: " + joined(shown));
  }
  json ret = ret_with(name, true, joined(comment, "\n"), changes);
  ret["result"] = nullptr;
  return ret;
}

// pkg.install of the targets and reinstalls: its answer in `pkg_ret`, or
// the state's return when it failed (what changed before the failure, from
// dpkg's own list, as Salt takes it from the error's info).
asio::awaitable<std::optional<json>> run_install(const state_call& c, const std::string& name,
                                                 const install_plan& p, json& pkg_ret) {
  plain_json install = install_passthrough(c);
  install["refresh"] = p.refresh;
  install["reinstall"] = !p.to_reinstall.empty();
  if (p.ignore_epoch) install["ignore_epoch"] = *p.ignore_epoch;
  plain_json list = plain_json::array();
  for (const wanted_list* l : {&p.targets, &p.to_reinstall}) {
    for (const auto& t : *l) {
      plain_json one = plain_json::object();
      one[t.name] = t.version ? plain_json(*t.version) : plain_json(nullptr);
      list.push_back(one);
    }
  }
  install["pkgs"] = list;
  std::optional<std::string> install_error;
  try {
    json answer = co_await call_fn(c, "pkg.install", plain_json::array(), std::move(install));
    pkg_ret = old_first(answer);
  } catch (const base::error& e) {
    install_error = e.what();
  }
  if (p.refresh) mark_refreshed(c);
  if (!install_error) co_return std::nullopt;
  json ret = json::object();
  ret["name"] = name;
  ret["result"] = false;
  versions_map now = co_await list_pkgs(c, plain_json::object());
  ret["changes"] = diff_lists(p.cur, now);
  std::optional<std::string> bare = without_changes(*install_error);
  ret["comment"] =
      bare ? *bare : "An error was encountered while installing package(s): " + *install_error;
  co_return ret;
}

// Salt's _verify_install: which desired packages are now installed at a
// version that fulfills the request.
struct verified {
  std::vector<std::string> ok;
  std::vector<std::string> failed;
};
asio::awaitable<verified> verify_install(const state_call& c, const install_plan& p) {
  versions_map now = co_await list_pkgs(c, plain_json::object());
  verified v;
  for (const auto& w : p.desired) {
    auto it = now.find(w.name.substr(0, w.name.find('=')));
    if (it == now.end() || it->second.empty()) {
      v.failed.push_back(w.name);
    } else if (!w.version || w.version->empty() || *w.version == "latest") {
      v.ok.push_back(w.name);
    } else if (w.version->ends_with('*') &&
               it->second.front().starts_with(w.version->substr(0, w.version->size() - 1))) {
      v.ok.push_back(w.name);
    } else if (co_await fulfills(c, it->second, *w.version, p.ignore_epoch, false)) {
      v.ok.push_back(w.name);
    } else {
      v.failed.push_back(w.name);
    }
  }
  co_return v;
}

// Salt's closing comment and result: installed/updated, holds, already
// installed, failures first, reinstalls.
json installed_ret(const std::string& name, const install_plan& p, const json& pkg_ret,
                   const verified& v, const std::optional<hold_results>& holds,
                   std::vector<std::string> comment, json changes) {
  auto in = [](const wanted_list& l, const std::string& n) {
    return std::any_of(l.begin(), l.end(), [&](const wanted& w) { return w.name == n; });
  };
  std::vector<std::string> modified, not_modified, failed_targets;
  for (const auto& n : v.ok) {
    if (in(p.targets, n)) modified.push_back(n);
    if (!in(p.targets, n) && !in(p.to_reinstall, n)) not_modified.push_back(n);
  }
  for (const auto& n : v.failed) {
    if (in(p.targets, n)) failed_targets.push_back(n);
  }
  auto summary = [&p](const std::vector<std::string>& names) {
    std::vector<std::string> shown;
    for (const auto& n : names) shown.push_back(desired_text(*find(p.desired, n)));
    return joined(shown);
  };
  auto count = [](std::size_t n, const char* what) {
    return std::to_string(n) + " targeted package" + (n > 1 ? "s" : "") + (n > 1 ? " were" : " was") +
           what;
  };
  if (!modified.empty()) {
    std::string s = summary(modified);
    comment.push_back(s.size() < 20 ? "The following packages were installed/updated: " + s
                                    : count(modified.size(), " installed/updated."));
  }
  if (holds) {
    for (const auto& i : holds->modified) {
      const std::string n = text(i["name"]);
      comment.push_back(text(i["comment"]));
      if (changes.contains(n)) {
        json& ch = changes[n];
        std::string nv = text(ch.value("new", json("")));
        std::string ov = text(ch.value("old", json("")));
        if (!nv.empty()) nv += "\n";
        nv += text(i["changes"]["new"]);
        if (!ov.empty()) ov += "\n";
        ov += text(i["changes"]["old"]);
        ch["new"] = nv;
        ch["old"] = ov;
      } else {
        changes[n] = json{{"new", text(i["changes"]["new"])}};
      }
    }
  }
  if (!not_modified.empty()) {
    comment.push_back(not_modified.size() <= 20
                          ? "The following packages were already installed: " + summary(not_modified)
                          : count(not_modified.size(), " already installed"));
  }
  if (holds) {
    for (const auto& i : holds->not_modified) comment.push_back(text(i["comment"]));
  }
  bool result = true;
  if (!failed_targets.empty()) {
    comment.insert(comment.begin(),
                   "The following packages failed to install/update: " + summary(failed_targets));
    result = false;
  }
  if (holds) {
    for (const auto& i : holds->failed) comment.push_back(text(i["comment"]));
    if (!holds->failed.empty()) result = false;
  }
  for (const auto& w : p.to_reinstall) {
    if (pkg_ret.contains(w.name)) {
      comment.push_back("Package " + desired_text(w) + " was reinstalled.");
    } else {
      comment.push_back("Reinstall was not successful for package " + desired_text(w) + ".");
      result = false;
    }
  }
  return ret_with(name, result, joined(comment, "\n"), std::move(changes));
}

asio::awaitable<json> installed(state_call c) {
  const std::string name = c.name();
  if (c.arg("sources") != nullptr && !c.arg("sources")->is_null()) {
    co_return make_ret(name, false,
                       "brine's pkg.installed does not support sources; install packages "
                       "from a repository with name or pkgs (pkgrepo.managed adds one)");
  }
  json pkgs = c.arg("pkgs") != nullptr ? *c.arg("pkgs") : json(nullptr);
  if (pkgs.is_array() && pkgs.empty()) {
    co_return make_ret(name, true, "No packages to install provided");
  }
  std::optional<std::string> version;
  if (const json* v = c.arg("version"); v != nullptr && !v->is_null()) version = text(*v);
  if (!name.empty() && (pkgs.is_null() || (pkgs.is_array() && pkgs.empty()))) {
    pkgs = json::array();
    if (version && !version->empty()) {
      json one = json::object();
      one[name] = *version;
      pkgs.push_back(one);
    } else {
      pkgs.push_back(name);
    }
  }
  install_plan p;
  p.refresh = check_refresh(c);
  p.ignore_epoch = optional_flag(c, "ignore_epoch");
  const bool has_hold = c.arg("hold") != nullptr;
  co_await find_install_targets(c, name, pkgs, p);
  if (p.early) {
    if (!has_hold) co_return *p.early;
    co_return co_await early_with_holds(c, name, pkgs, *p.early);
  }
  if (!p.to_unpurge.empty()) co_return make_ret(name, false, "lowpkg.unpurge not implemented");
  if (c.test) co_return test_plan_ret(name, p);

  json pkg_ret = json::object();
  if (std::optional<json> failed = co_await run_install(c, name, p, pkg_ret)) co_return *failed;
  json changes = json::object();
  for (const auto& [k, v] : pkg_ret.items()) changes[k] = v;

  std::vector<std::string> comment;
  std::optional<hold_results> holds;
  if (has_hold) {
    plain_json names = plain_json::array();
    for (const auto& w : p.desired) names.push_back(w.name);
    try {
      plain_json kwargs = {{"name", name}, {"pkgs", names}};
      holds = co_await set_holds(c, std::move(kwargs));
    } catch (const base::error& e) {
      comment.push_back(e.what());
      co_return ret_with(name, false, joined(comment, "\n"), changes);
    }
  }
  verified v = co_await verify_install(c, p);
  co_return installed_ret(name, p, pkg_ret, v, holds, std::move(comment), std::move(changes));
}

asio::awaitable<json> latest(state_call c) {
  const std::string name = c.name();
  bool refresh = check_refresh(c);
  if (const json* s = c.arg("sources"); s != nullptr && !s->is_null() && !s->empty()) {
    co_return make_ret(name, false, "The \"sources\" parameter is not supported.");
  }
  const json* pkgs = c.arg("pkgs");
  std::vector<std::string> desired;
  if (pkgs != nullptr && pkgs->is_array() && !pkgs->empty()) {
    std::optional<wanted_list> packed;
    try {
      packed = repack(*pkgs);
    } catch (const base::error& e) {
      co_return make_ret(name, false, e.what());
    }
    if (!packed) {
      co_return make_ret(name, false, "Invalidly formatted \"pkgs\" parameter. See minion log.");
    }
    for (const auto& w : *packed) desired.push_back(w.name);
  } else if (pkgs != nullptr && pkgs->is_array()) {
    co_return make_ret(name, true, "No packages to install provided");
  } else {
    desired.push_back(name);
  }

  json avail, cur;
  try {
    avail = co_await latest_versions(c, desired, refresh);
  } catch (const base::error& e) {
    co_return make_ret(name, false,
                       std::string("An error was encountered while checking the newest available "
                                   "version of package(s): ") +
                           e.what());
  }
  try {
    cur = co_await call_fn(c, "pkg.version", plain_json(desired));
  } catch (const base::error& e) {
    co_return make_ret(name, false, e.what());
  }
  if (avail.is_string()) avail = json{{desired.front(), avail}};
  if (cur.is_string()) cur = json{{desired.front(), cur}};

  std::map<std::string, std::string> targets;
  std::vector<std::string> problems;
  for (const auto& p : desired) {
    std::string a = text(avail.value(p, json("")));
    if (a.empty()) {
      if (text(cur.value(p, json(""))).empty()) problems.push_back("No information found for '" + p + "'.");
    } else {
      targets[p] = a;
    }
  }
  if (!problems.empty()) co_return make_ret(name, false, joined(problems, " "));

  std::vector<std::string> target_names;
  for (const auto& [n, v] : targets) target_names.push_back(n);
  if (targets.empty()) {
    std::string comment;
    if (desired.size() > 10) {
      comment = "All " + std::to_string(desired.size()) + " packages are up-to-date.";
    } else if (desired.size() > 1) {
      comment = "All packages are up-to-date (" + joined(sorted(desired)) + ").";
    } else {
      comment = "Package " + desired.front() + " is already up-to-date";
    }
    co_return make_ret(name, true, comment);
  }
  std::vector<std::string> up_to_date;
  if (pkgs != nullptr && pkgs->is_array()) {
    for (const auto& p : desired) {
      if (!targets.contains(p)) up_to_date.push_back(p);
    }
  }
  up_to_date = sorted(up_to_date);
  if (c.test) {
    std::vector<std::string> comments = {"The following packages would be installed/upgraded: " +
                                         joined(target_names)};
    if (!up_to_date.empty()) {
      if (up_to_date.size() <= 10) {
        std::vector<std::string> shown;
        for (const auto& p : up_to_date) shown.push_back(p + " (" + text(cur.value(p, json(""))) + ")");
        comments.push_back("The following packages are already up-to-date: " + joined(shown));
      } else {
        comments.push_back(std::to_string(up_to_date.size()) + " packages are already up-to-date");
      }
    }
    json ret = make_ret(name, true, joined(comments, "\n"));
    ret["result"] = nullptr;
    co_return ret;
  }
  json changes;
  try {
    plain_json install = install_passthrough(c);
    install["refresh"] = false;
    install["pkgs"] = plain_json(target_names);
    json answer = co_await call_fn(c, "pkg.install", plain_json::array(), std::move(install));
    changes = old_first(answer);
  } catch (const base::error& e) {
    co_return make_ret(
        name, false,
        std::string("An error was encountered while installing package(s): ") + e.what());
  }
  if (!changes.empty()) {
    std::vector<std::string> failed, successful;
    for (const auto& [p, want] : targets) {
      bool bad = !changes.contains(p) || changes[p].empty();
      if (!bad && changes[p].contains("new") && !changes[p]["new"].is_null()) {
        std::string nv = text(changes[p]["new"]);
        std::vector<std::string> parts;
        std::size_t start = 0;
        while (true) {
          auto comma = nv.find(',', start);
          parts.push_back(nv.substr(start, comma - start));
          if (comma == std::string::npos) break;
          start = comma + 1;
        }
        bad = !contains(parts, want) && want != "latest";
      }
      (bad ? failed : successful).push_back(p);
    }
    std::vector<std::string> comments;
    if (!failed.empty()) {
      comments.push_back("The following packages failed to update: " + joined(sorted(failed)));
    }
    if (!successful.empty()) {
      comments.push_back("The following packages were successfully installed/upgraded: " +
                         joined(sorted(successful)));
    }
    if (!up_to_date.empty()) {
      comments.push_back(up_to_date.size() <= 10
                             ? "The following packages were already up-to-date: " + joined(up_to_date)
                             : std::to_string(up_to_date.size()) +
                                   " packages were already up-to-date ");
    }
    co_return ret_with(name, failed.empty(), joined(comments, " "), changes);
  }
  std::string comment;
  if (targets.size() > 10) {
    comment = std::to_string(targets.size()) +
              " targeted packages failed to update. See debug log for details.";
  } else if (targets.size() > 1) {
    comment = "The following targeted packages failed to update. See debug log for details: (" +
              joined(target_names) + ").";
  } else {
    comment = "Package " + target_names.front() + " failed to update.";
  }
  if (!up_to_date.empty()) {
    comment += up_to_date.size() <= 10
                   ? " The following packages were already up-to-date: " + joined(up_to_date)
                   : std::to_string(up_to_date.size()) + " packages were already up-to-date";
  }
  co_return ret_with(name, false, comment, changes);
}

// Salt's _uninstall for pkg.removed ("remove") and pkg.purged ("purge").
asio::awaitable<json> uninstall(state_call c, std::string action) {
  const std::string name = c.name();
  std::optional<std::string> version;
  if (const json* v = c.arg("version"); v != nullptr && !v->is_null()) version = text(*v);
  const std::optional<bool> ignore_epoch = optional_flag(c, "ignore_epoch");
  const json* pkgs = c.arg("pkgs");
  const bool has_pkgs = pkgs != nullptr && pkgs->is_array() && !pkgs->empty();
  const std::string doing = action == "remove" ? "removing" : "purging";
  try {
    // pkg_resource.parse_targets: pkgs, else name split on commas.
    wanted_list params;
    std::optional<wanted_list> to_remove;
    if (has_pkgs) {
      to_remove = repack(*pkgs);
      if (!to_remove) {
        co_return make_ret(name, false, "Invalidly formatted pkgs parameter. See minion log.");
      }
      params = *to_remove;
    } else {
      std::size_t start = 0;
      while (true) {
        auto comma = name.find(',', start);
        params.push_back({name.substr(start, comma - start), version});
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
      to_remove = wanted_list{{name, version}};
    }
    versions_map cur = co_await list_pkgs(c, plain_json::object());
    std::vector<std::string> targets;
    bool version_spec = false;
    for (const auto& w : *to_remove) {
      auto it = cur.find(w.name);
      if (it == cur.end() || it->second.empty()) continue;
      if (!w.version) {
        targets.push_back(w.name);
        continue;
      }
      version_spec = true;
      if (co_await fulfills(c, it->second, *w.version, ignore_epoch, false)) {
        targets.push_back(w.name);
      }
    }
    if (targets.empty() && action == "remove") {
      co_return make_ret(name, true,
                         std::string("All specified packages") +
                             (version_spec ? " (matching specified versions)" : "") +
                             " are already absent");
    }
    versions_map removed_before;
    if (action == "purge") {
      plain_json which = plain_json{{"removed", true}};
      removed_before = co_await list_pkgs(c, std::move(which));
      for (const auto& p : params) {
        if (removed_before.contains(p.name)) targets.push_back(p.name);
      }
    }
    targets = sorted(targets);
    if (targets.empty()) {
      co_return make_ret(name, true,
                         std::string("None of the targeted packages are installed") +
                             (action == "purge" ? " or partially installed" : ""));
    }
    if (c.test) {
      json ret = make_ret(name, true,
                          "The following packages will be " + action + "d: " + joined(targets) + ".");
      for (const auto& t : targets) ret["changes"][t] = json{{"new", action + "d"}, {"old", ""}};
      ret["result"] = nullptr;
      co_return ret;
    }
    plain_json kwargs = plain_json::object();
    if (has_pkgs) {
      plain_json names = plain_json::array();
      for (const auto& p : params) names.push_back(p.name);
      kwargs["pkgs"] = names;
    } else {
      kwargs["name"] = name;
    }
    json answer;
    std::optional<std::string> failure;
    try {
      answer = co_await call_fn(c, "pkg." + action, plain_json::array(), std::move(kwargs));
    } catch (const base::error& e) {
      failure = e.what();
    }
    if (failure) {
      std::optional<std::string> bare = without_changes(*failure);
      if (!bare) throw base::error(*failure);
      // Salt takes the changes from the error's info; brine from dpkg.
      json ret = json::object();
      ret["name"] = name;
      ret["result"] = false;
      versions_map after = co_await list_pkgs(c, plain_json::object());
      json changes = diff_lists(cur, after);
      if (action == "purge") {
        plain_json which = plain_json{{"removed", true}};
        versions_map removed_after = co_await list_pkgs(c, std::move(which));
        changes = json{{"removed", diff_lists(removed_before, removed_after)},
                       {"installed", changes}};
      }
      ret["changes"] = changes;
      ret["comment"] = *bare;
      co_return ret;
    }
    json changes = old_first(answer);
    versions_map now = co_await list_pkgs(c, plain_json::object());
    std::vector<std::string> failed;
    for (const auto& p : params) {
      if (now.contains(p.name)) failed.push_back(p.name);
    }
    if (action == "purge") {
      plain_json which = plain_json{{"removed", true}};
      versions_map removed = co_await list_pkgs(c, std::move(which));
      for (const auto& p : params) {
        if (removed.contains(p.name)) failed.push_back(p.name);
      }
    }
    failed = sorted(failed);
    if (!failed.empty()) {
      json ret = make_ret(name, false,
                          "The following packages failed to " + action + ": " + joined(failed) + ".");
      ret["changes"] = changes;
      co_return ret;
    }
    std::vector<std::string> not_installed;
    for (const auto& p : params) {
      if (!contains(targets, p.name)) not_installed.push_back(p.name);
    }
    not_installed = sorted(not_installed);
    std::vector<std::string> comments;
    if (!not_installed.empty()) {
      comments.push_back("The following packages were not installed: " + joined(not_installed));
      comments.push_back("The following packages were " + action + "d: " + joined(targets) + ".");
    } else {
      comments.push_back("All targeted packages were " + action + "d.");
    }
    co_return ret_with(name, true, joined(comments, " "), changes);
  } catch (const base::error& e) {
    co_return make_ret(name, false,
                       "An error was encountered while " + doing + " package(s): " + e.what());
  }
}

asio::awaitable<json> removed(state_call c) { co_return co_await uninstall(std::move(c), "remove"); }
asio::awaitable<json> purged(state_call c) { co_return co_await uninstall(std::move(c), "purge"); }

asio::awaitable<json> uptodate(state_call c) {
  const std::string name = c.name();
  json ret = make_ret(name, false, "Failed to update");
  const json* r = c.arg("refresh");
  if (r != nullptr && !r->is_boolean()) {
    ret["comment"] = "refresh must be either True or False";
    co_return ret;
  }
  const bool refresh = r != nullptr && r->get<bool>();
  std::optional<std::vector<std::string>> pkgs;
  if (const json* p = c.arg("pkgs"); p != nullptr && p->is_array()) {
    pkgs.emplace();
    for (const auto& item : *p) pkgs->push_back(text(item));
  }
  plain_json passthrough = plain_json::object();
  for (const char* key : {"dist_upgrade", "cache_valid_time", "force_conf_new", "skip_verify",
                          "download_only", "downloadonly", "allow_downgrades"}) {
    if (const json* v = c.arg(key); v != nullptr && !v->is_null()) passthrough[key] = plain(*v);
  }
  json expected = json::object();
  try {
    plain_json kwargs = {{"refresh", refresh}};
    for (const char* key : {"dist_upgrade", "cache_valid_time"}) {
      if (passthrough.contains(key)) kwargs[key] = passthrough[key];
    }
    json packages = co_await call_fn(c, "pkg.list_upgrades", plain_json::array(), std::move(kwargs));
    for (const auto& [p, v] : packages.items()) {
      if (pkgs && !contains(*pkgs, p)) continue;
      plain_json one = plain_json::array({p});
      json old = co_await call_fn(c, "pkg.version", std::move(one));
      expected[p] = json{{"new", v}, {"old", old}};
    }
  } catch (const base::error& e) {
    ret["comment"] = e.what();
    co_return ret;
  }
  if (expected.empty()) {
    ret["comment"] = "System is already up-to-date";
    ret["result"] = true;
    co_return ret;
  }
  if (c.test) {
    ret["comment"] = "System update will be performed";
    ret["changes"] = expected;
    ret["result"] = nullptr;
    co_return ret;
  }
  try {
    plain_json kwargs = passthrough;
    kwargs["refresh"] = refresh;
    json answer = co_await call_fn(c, "pkg.upgrade", plain_json::array(), std::move(kwargs));
    ret["changes"] = old_first(answer);
  } catch (const base::error& e) {
    ret["comment"] = std::string("An error was encountered while updating packages: ") + e.what();
    co_return ret;
  }
  std::vector<std::string> missing;
  if (pkgs) {
    for (const auto& [p, v] : expected.items()) {
      if (!ret["changes"].contains(p)) missing.push_back(p);
    }
  }
  if (!missing.empty()) {
    ret["comment"] = "The following package(s) failed to update: " + joined(missing);
    ret["result"] = false;
  } else {
    ret["comment"] = "Upgrade ran successfully";
    ret["result"] = true;
  }
  co_return ret;
}

// The packages of pkg.held/unheld: pkgs, else name (with version).
wanted_list hold_list(const state_call& c) {
  const std::string name = c.name();
  const json* pkgs = c.arg("pkgs");
  wanted_list out;
  if (pkgs == nullptr || pkgs->is_null()) {
    std::optional<std::string> version;
    if (const json* v = c.arg("version"); v != nullptr && !v->is_null()) version = text(*v);
    if (!name.empty()) out.push_back({name, version});
    return out;
  }
  if (!pkgs->is_array()) throw base::error("pkgs must be a list, got " + pkgs->dump());
  for (const auto& item : *pkgs) {
    if (item.is_object() && !item.empty()) {
      out.push_back({item.begin().key(), item.begin().value().is_null()
                                             ? std::nullopt
                                             : std::optional<std::string>(text(item.begin().value()))});
    } else {
      out.push_back({text(item), std::nullopt});
    }
  }
  return out;
}

asio::awaitable<std::vector<std::string>> held_now(const state_call& c) {
  plain_json which = plain_json{{"state", "hold"}};
  json sel = co_await call_fn(c, "pkg.get_selections", plain_json::array(), std::move(which));
  std::vector<std::string> out;
  for (const auto& p : sel.value("hold", json::array())) out.push_back(text(p));
  co_return out;
}

// pkgs=[] (nothing to hold or unhold).
bool empty_pkgs(const state_call& c) {
  const json* pkgs = c.arg("pkgs");
  return pkgs != nullptr && pkgs->is_array() && pkgs->empty();
}

// held's and unheld's answer: what each package's hold or unhold said.
json hold_answer(json ret, const std::vector<std::string>& comments) {
  ret["comment"] = joined(comments, "\n");
  if (ret["changes"].empty() && comments.empty()) ret["comment"] = "No changes made";
  return ret;
}

// pkg.unhold of one held package (pkg.held with replace=True, pkg.unheld).
asio::awaitable<json> unhold(state_call c, std::string name, std::string lock) {
  plain_json kwargs = plain_json{{"name", name}, {"pkgs", {lock}}};
  json answer = co_await call_fn(c, "pkg.unhold", plain_json::array(), std::move(kwargs));
  co_return answer;
}

// What that pkg.unhold answered, into the state's return as Salt records
// it: False where it failed, its comment where it has one, its changes.
void record_unhold(const std::string& lock, const json& unhold_ret, json& ret,
                   std::vector<std::string>& comments) {
  const bool ok =
      unhold_ret.contains(lock) && unhold_ret[lock].value("result", json(false)) == true;
  if (!ok) ret["result"] = false;
  if (unhold_ret.contains(lock) && !text(unhold_ret[lock].value("comment", json(""))).empty()) {
    comments.push_back(text(unhold_ret[lock]["comment"]));
  }
  for (const auto& [k, v] : unhold_ret.items()) ret["changes"][k] = v;
}

asio::awaitable<json> held(state_call c) {
  const std::string name = c.name();
  if (empty_pkgs(c)) co_return make_ret(name, true, "No packages to be held provided");
  json ret = make_ret(name, true, "");
  std::vector<std::string> comments;
  try {
    wanted_list pkgs = hold_list(c);
    std::vector<std::string> locks = co_await held_now(c);
    std::set<std::string> held_pkgs;
    for (const auto& w : pkgs) {
      held_pkgs.insert(w.name);
      if (contains(locks, w.name)) continue;
      const std::string suffix = w.version ? " (version = " + *w.version + ")" : "";
      if (c.test) {
        comments.push_back("The following package would be held: " + w.name + suffix);
        continue;
      }
      plain_json kwargs = plain_json{{"name", name}, {"pkgs", {w.name}}};
      json hold_ret = co_await call_fn(c, "pkg.hold", plain_json::array(), std::move(kwargs));
      const bool ok = hold_ret.contains(w.name) && hold_ret[w.name].value("result", json(false)) == true;
      if (!ok) ret["result"] = false;
      comments.push_back(ok ? "Package " + w.name + " is now being held"
                            : "Package " + w.name + " was not held");
      for (const auto& [k, v] : hold_ret.items()) ret["changes"][k] = v;
    }
    if (c.flag("replace")) {
      for (const auto& lock : locks) {
        if (held_pkgs.contains(lock)) continue;
        if (c.test) {
          comments.push_back("The following package would be unheld: " + lock);
          continue;
        }
        json unhold_ret = co_await unhold(c, name, lock);
        record_unhold(lock, unhold_ret, ret, comments);
      }
    }
  } catch (const base::error& e) {
    co_return make_ret(name, false, e.what());
  }
  co_return hold_answer(std::move(ret), comments);
}

asio::awaitable<json> unheld(state_call c) {
  const std::string name = c.name();
  const bool all = c.flag("all");
  if (empty_pkgs(c) && !all) co_return make_ret(name, true, "No packages to be unheld provided");
  json ret = make_ret(name, true, "");
  std::vector<std::string> comments;
  try {
    wanted_list pkgs = hold_list(c);
    std::vector<std::string> locks = co_await held_now(c);
    for (const auto& lock : locks) {
      const wanted* w = find(pkgs, lock);
      if (!all && w == nullptr) continue;
      if (c.test) {
        // Salt prints the lock's version, which dpkg holds never have.
        comments.push_back("The following package would be unheld: " + lock +
                           (w != nullptr && w->version && !w->version->empty() ? " (version = None)"
                                                                              : ""));
        continue;
      }
      json unhold_ret = co_await unhold(c, name, lock);
      record_unhold(lock, unhold_ret, ret, comments);
    }
  } catch (const base::error& e) {
    co_return make_ret(name, false, e.what());
  }
  co_return hold_answer(std::move(ret), comments);
}

asio::awaitable<json> mod_watch(state_call c) {
  const std::string sfun = c.low.value("sfun", "");
  if (sfun == "installed") co_return co_await installed(std::move(c));
  if (sfun == "latest") co_return co_await latest(std::move(c));
  if (sfun == "removed") co_return co_await removed(std::move(c));
  if (sfun == "purged") co_return co_await purged(std::move(c));
  co_return make_ret(c.name(), false, "pkg." + sfun + " does not work with the watch requisite");
}

}  // namespace
}  // namespace pkg_states

void register_pkg_states(registry& reg) {
  using namespace pkg_states;
  reg.add("pkg.installed", installed, {"name"},
          "pkg.installed name=PKG | pkgs=[a, {b: '1.2-1'}] [version=1.2-1 | '>=1.0'] "
          "[refresh=] [fromrepo=] [reinstall=False] [hold=] [ignore_epoch=] "
          "[allow_updates=False]: installs what is missing or not at the wanted version");
  reg.add("pkg.latest", latest, {"name"},
          "pkg.latest name=PKG | pkgs=[a, b] [refresh=] [fromrepo=]: installs or upgrades to "
          "the newest version the repositories offer");
  reg.add("pkg.removed", removed, {"name"},
          "pkg.removed name=PKG | pkgs=[a, b] [version=]: removes the packages, leaving their "
          "configuration files");
  reg.add("pkg.purged", purged, {"name"},
          "pkg.purged name=PKG | pkgs=[a, b] [version=]: removes the packages and their "
          "configuration files");
  reg.add("pkg.uptodate", uptodate, {"name"},
          "pkg.uptodate name=ID [refresh=False] [pkgs=] [dist_upgrade=]: upgrades every "
          "package apt would upgrade");
  reg.add("pkg.held", held, {"name"},
          "pkg.held name=PKG | pkgs=[a, b] [replace=False]: holds the packages at their version");
  reg.add("pkg.unheld", unheld, {"name"},
          "pkg.unheld name=PKG | pkgs=[a, b] [all=False]: lets held packages be upgraded again");
  reg.add("pkg.mod_watch", mod_watch, {"name"},
          "pkg.mod_watch: what a watch requisite on pkg.installed, latest, removed or purged "
          "runs (the state function again)");
}

}  // namespace brine::states
