// Salt's user states: user.present and user.absent, on Linux. The machine is
// read and changed through the user module's execution functions (user.info,
// user.add, user.ch*, user.delete, group.info), as Salt's state calls
// __salt__, so the state and `brine cmd '*' user.*` share one implementation.

#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "base/error.h"
#include "base/python_truth.h"
#include "states/python_text.h"
#include "states/registry.h"

namespace brine::states {
namespace user_states {
namespace {

using plain_json = nlohmann::json;

// Salt's user.info keys in the order its dict has them.
const std::vector<std::string> k_info_order = {
    "gid", "groups", "home", "name", "passwd", "shell", "uid",
    "fullname", "roomnumber", "workphone", "homephone", "other"};

const std::vector<std::string> k_gecos = {"fullname", "roomnumber", "workphone", "homephone",
                                          "other"};

plain_json plain(const json& v) { return plain_json(v); }

bool is_dir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// An argument given and not None.
const json* given(const state_call& c, const std::string& key) {
  const json* v = c.arg(key);
  return v == nullptr || v->is_null() ? nullptr : v;
}

// What the state declares, read once from the low chunk.
struct wanted {
  std::string name;
  std::optional<json> uid, gid;
  std::optional<std::vector<std::string>> groups;  // None: keep what the user has
  std::vector<std::string> optional_groups;
  bool remove_groups = true;
  std::optional<std::string> home, shell;
  bool createhome = true;
  bool persist_home = false;
  std::map<std::string, std::string> gecos;  // fields given (Salt's str() of them)
  bool allow_uid_change = false;
  bool allow_gid_change = false;
  std::string password;  // a hash; "" when not given
  bool password_given = false;
  bool enforce_password = true;
  bool empty_password = false;
  // The shadow ageing arguments given: date, mindays, maxdays, inactdays,
  // warndays, expire (Salt's names), in that order.
  std::vector<std::pair<std::string, json>> ageing;
};

// Salt's shadow ageing arguments: the shadow.info field each is compared
// with and the shadow function that sets it; `truthy`: compared only when
// true (Salt's `if mindays:` after useradd, `if expire and ...` always).
struct ageing_field {
  const char* arg;
  const char* field;
  const char* setter;
  const char* words;  // "User X created but failed to set <words> to V"
};
const ageing_field k_ageing[] = {
    {"date", "lstchg", "shadow.set_date", "last change date"},
    {"mindays", "min", "shadow.set_mindays", "minimum days"},
    {"maxdays", "max", "shadow.set_maxdays", "maximum days"},
    {"inactdays", "inact", "shadow.set_inactdays", "inactive days"},
    {"warndays", "warn", "shadow.set_warndays", "warn days"},
    {"expire", "expire", "shadow.set_expire", "expire days"},
};

std::optional<std::vector<std::string>> name_list(const state_call& c, const std::string& key,
                                                  std::string& error) {
  const json* v = given(c, key);
  if (v == nullptr) return std::nullopt;
  std::vector<std::string> out;
  if (!v->is_array()) {
    error = "user.present: " + key + " must be a list of group names, got " + v->dump();
    return out;
  }
  for (const auto& item : *v) out.push_back(py_text(item));
  return out;
}

// A number as Salt compares uids: 4242 and "4242" are the same uid here
// (Salt would see an int and a str differ, and refuse the "change").
std::optional<long long> as_id(const json& v) {
  if (v.is_number_integer()) return v.get<long long>();
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (!s.empty() && s.size() <= 10 &&
        std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      return std::stoll(s);
    }
  }
  return std::nullopt;
}

bool same_id(const json& have, const json& want) {
  std::optional<long long> w = as_id(want);
  return w && have.is_number_integer() && have.get<long long>() == *w;
}

// Salt's file.group_to_gid and file.gid_to_group, through the user module.
asio::awaitable<json> group_to_gid(const state_call& c, plain_json group) {
  plain_json args = plain_json::array();
  args.push_back(std::move(group));
  std::string fun = "file.group_to_gid";
  json r = co_await c.run(std::move(fun), std::move(args));
  co_return r;
}

asio::awaitable<json> gid_to_group(const state_call& c, plain_json gid) {
  plain_json args = plain_json::array();
  args.push_back(std::move(gid));
  std::string fun = "file.gid_to_group";
  json r = co_await c.run(std::move(fun), std::move(args));
  co_return r;
}

asio::awaitable<json> user_info(const state_call& c, std::string name) {
  plain_json args = plain_json::array();
  args.push_back(std::move(name));
  std::string fun = "user.info";
  json r = co_await c.run(std::move(fun), std::move(args));
  co_return r;
}

asio::awaitable<json> shadow_info(const state_call& c, std::string name) {
  plain_json args = plain_json::array();
  args.push_back(std::move(name));
  std::string fun = "shadow.info";
  json r = co_await c.run(std::move(fun), std::move(args));
  co_return r;
}

asio::awaitable<json> group_info(const state_call& c, std::string name) {
  plain_json args = plain_json::array();
  args.push_back(std::move(name));
  std::string fun = "group.info";
  json r = co_await c.run(std::move(fun), std::move(args));
  co_return r;
}

void erase(std::vector<std::string>& v, const std::string& item) {
  v.erase(std::remove(v.begin(), v.end(), item), v.end());
}

bool contains(const std::vector<std::string>& v, const std::string& item) {
  return std::find(v.begin(), v.end(), item) != v.end();
}

// Salt's _group_changes: whether the supplementary groups must change,
// groups sharing a gid with another counting as the same group.
asio::awaitable<bool> group_changes(const state_call& c, std::vector<std::string> cur,
                                    std::vector<std::string> want, bool remove) {
  std::set<std::string> have(cur.begin(), cur.end());
  std::set<std::string> need(want.begin(), want.end());
  if (have == need ||
      (!remove && std::includes(have.begin(), have.end(), need.begin(), need.end()))) {
    co_return false;
  }
  std::set<std::string> all = have;
  all.insert(need.begin(), need.end());
  std::map<std::string, json> gids;
  for (const auto& g : all) {
    json info = co_await group_info(c, g);
    gids[g] = info.is_object() && info.contains("gid") ? info["gid"] : json();
  }
  std::set<std::string> diff;
  for (const auto& g : need) {
    if (!have.contains(g)) diff.insert(g);
  }
  if (remove) {
    for (const auto& g : have) {
      if (!need.contains(g)) diff.insert(g);
    }
  }
  for (const auto& g : diff) {
    bool dupe = false;
    for (const auto& [other, gid] : gids) {
      if (other != g && gids[g] == gid) dupe = true;
    }
    if (!dupe) co_return true;
  }
  co_return false;
}

// Salt's _changes: what differs between the user and `w`, in Salt's order
// (uid, gid, groups, home, homeDoesNotExist, shell, then the GECOS fields);
// nullopt when there is no such user. A uid or gid change not allowed fills
// `refused` instead.
asio::awaitable<std::optional<json>> changes_for(const state_call& c, wanted w,
                                                 std::optional<json> gid, bool allow_uid,
                                                 bool allow_gid, std::vector<std::string>* refused) {
  json user = co_await user_info(c, w.name);
  if (!user.is_object() || user.empty()) co_return std::nullopt;
  json change = json::object();
  std::vector<std::string> have_groups = user["groups"].get<std::vector<std::string>>();
  std::set<std::string> want_set;
  if (w.groups) want_set.insert(w.groups->begin(), w.groups->end());
  want_set.insert(w.optional_groups.begin(), w.optional_groups.end());
  // Groups that share a gid with another of the user's groups.
  std::map<long long, std::vector<std::string>> by_gid;
  for (const auto& g : have_groups) {
    plain_json group = g;
    json id = co_await group_to_gid(c, std::move(group));
    if (id.is_number_integer()) by_gid[id.get<long long>()].push_back(g);
  }
  std::map<std::string, long long> dupe_gid;
  for (const auto& [id, names] : by_gid) {
    if (names.size() > 1) {
      for (const auto& n : names) dupe_gid[n] = id;
    }
  }
  if (!w.remove_groups || (!w.groups && w.optional_groups.empty())) {
    want_set.insert(have_groups.begin(), have_groups.end());
  }
  std::vector<std::string> want_groups(want_set.begin(), want_set.end());
  // Drops `group` (or every group sharing its gid) from the comparison.
  auto drop = [&](const std::string& group, bool from_wanted) {
    if (auto it = dupe_gid.find(group); it != dupe_gid.end()) {
      for (const auto& n : by_gid[it->second]) {
        erase(have_groups, n);
        if (from_wanted) erase(want_groups, n);
      }
    } else {
      erase(have_groups, group);
      if (from_wanted) erase(want_groups, group);
    }
  };
  if (w.uid && !same_id(user["uid"], *w.uid)) change["uid"] = *w.uid;
  if (gid) {
    plain_json wanted_gid = plain(*gid);
    json resolved = co_await group_to_gid(c, std::move(wanted_gid));
    if (!same_id(user["gid"], *gid) && resolved != user["gid"]) change["gid"] = *gid;
  }
  plain_json primary = gid ? plain(*gid) : plain(user["gid"]);
  json default_grp = co_await gid_to_group(c, std::move(primary));
  plain_json old_primary = plain(user["gid"]);
  json old_default_grp = co_await gid_to_group(c, std::move(old_primary));
  std::string default_name = default_grp.is_string() ? default_grp.get<std::string>() : "";
  std::string old_default_name =
      old_default_grp.is_string() ? old_default_grp.get<std::string>() : "";
  if (contains(have_groups, default_name) || contains(want_groups, default_name)) {
    drop(default_name, true);
  }
  if (old_default_name != default_name && contains(have_groups, old_default_name)) {
    drop(old_default_name, false);
  }
  if (contains(have_groups, w.name) && !contains(want_groups, w.name)) drop(w.name, false);
  bool differ = co_await group_changes(c, have_groups, want_groups, w.remove_groups);
  if (differ && (!want_groups.empty() || w.remove_groups)) {
    change["groups"] = want_groups;
  }
  if (w.home && user["home"] != *w.home) change["home"] = *w.home;
  if (w.createhome) {
    std::string newhome = w.home ? *w.home : user["home"].get<std::string>();
    if (!is_dir(newhome)) change["homeDoesNotExist"] = newhome;
  }
  if (w.shell && user["shell"] != *w.shell) change["shell"] = *w.shell;
  if ((!w.password.empty() && !w.empty_password) || w.empty_password || !w.ageing.empty()) {
    json shadow = co_await shadow_info(c, w.name);
    const json& have = shadow["passwd"];
    // Salt: a locked or password-less account ("!") always gets the hash;
    // another one only with enforce_password.
    if (!w.password.empty() && !w.empty_password && (have == "!" || w.enforce_password) &&
        have != w.password) {
      change["passwd"] = w.password;
    }
    if (w.empty_password && have != "") change["empty_password"] = true;
    for (const auto& [arg, value] : w.ageing) {
      const char* field = "";
      for (const auto& f : k_ageing)
        if (arg == f.arg) field = f.field;
      // Salt: `date is not None`, the others likewise, but `if expire and`.
      if (arg == "expire" && !base::python_truth(value)) continue;
      if (shadow[field] != value) change[arg] = value;
    }
  }
  for (const auto& field : k_gecos) {
    auto it = w.gecos.find(field);
    if (it != w.gecos.end() && user[field] != it->second) change[field] = it->second;
  }
  if (!allow_uid && change.contains("uid")) {
    refused->push_back("Changing uid (" + user["uid"].dump() + " -> " + py_text(*w.uid) +
                       ") not permitted, set allow_uid_change to True to force this change. "
                       "Note that this will not change file ownership.");
  }
  if (!allow_gid && change.contains("gid")) {
    refused->push_back("Changing gid (" + user["gid"].dump() + " -> " + py_text(*gid) +
                       ") not permitted, set allow_gid_change to True to force this change. "
                       "Note that this will not change file ownership.");
  }
  co_return change;
}

bool is_ageing(const std::string& key) {
  for (const auto& f : k_ageing)
    if (key == f.arg) return true;
  return false;
}

// Salt's order of applying the ageing changes of an existing user: the
// date before the home directory, the others after it.
asio::awaitable<void> set_ageing(const state_call& c, const std::string& name, json& todo,
                                 bool date_only) {
  for (const auto& f : k_ageing) {
    if ((std::string(f.arg) == "date") != date_only || !todo.contains(f.arg)) continue;
    plain_json args = plain_json::array({name, plain(todo[f.arg])});
    todo.erase(f.arg);
    std::string fun = f.setter;
    co_await c.run(std::move(fun), std::move(args));
  }
}

// Salt's hash_password: the clear text hashed with the salt and algorithm
// of the hash the user has now ("$6$SALT$HASH" splits into four at '$'), so
// the same password gives the same hash run after run; with no such hash,
// sha512 and a random salt.
asio::awaitable<std::string> hash_password(const state_call& c, const std::string& name,
                                           const std::string& clear) {
  json shadow = co_await shadow_info(c, name);
  std::string current = shadow["passwd"].is_string() ? shadow["passwd"].get<std::string>() : "";
  std::vector<std::string> parts;
  for (std::size_t at = 0;;) {
    std::size_t next = current.find('$', at);
    if (next == std::string::npos || parts.size() == 4) {
      parts.push_back(current.substr(at));
      break;
    }
    parts.push_back(current.substr(at, next - at));
    at = next + 1;
  }
  plain_json kwargs = plain_json::object();
  if (parts.size() == 4) {
    static const std::map<std::string, std::string> k_algorithms = {
        {"1", "md5"}, {"2a", "blowfish"}, {"5", "sha256"}, {"6", "sha512"}};
    auto algo = k_algorithms.find(parts[1]);
    kwargs["crypt_salt"] = parts[2];
    if (algo != k_algorithms.end()) kwargs["algorithm"] = algo->second;
    if (parts[1] == "1") spdlog::warn("Using MD5 for hashing passwords is considered insecure!");
  }
  plain_json args = plain_json::array({clear});
  std::string fun = "shadow.gen_password";
  json hashed = co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
  co_return hashed.get<std::string>();
}

// Arguments of Salt's user.present that brine does not implement: refused
// (when given a value other than Salt's default) rather than ignored.
const char* const k_unsupported[] = {"password_lock", "win_homedrive",
                                     "win_profile",   "win_logonscript", "win_description"};

// The arguments as user.present reads them (the password as given: the
// caller hashes it for hash_password); an error text for a bad one.
std::string read_wanted(const state_call& c, const std::string& name, wanted& w) {
  w.name = name;
  if (const json* v = given(c, "uid")) w.uid = *v;
  if (const json* v = given(c, "gid")) w.gid = *v;
  std::string error;
  w.groups = name_list(c, "groups", error);
  if (auto opt = name_list(c, "optional_groups", error)) w.optional_groups = *opt;
  if (!error.empty()) return error;
  w.remove_groups = c.flag("remove_groups", true);
  if (const json* v = given(c, "home")) w.home = py_text(*v);
  if (const json* v = given(c, "shell")) w.shell = py_text(*v);
  w.createhome = c.flag("createhome", true);
  w.persist_home = c.flag("persist_home", false);
  for (const auto& field : k_gecos) {
    if (const json* v = given(c, field)) w.gecos[field] = py_text(*v);
  }
  w.allow_uid_change = c.flag("allow_uid_change", false);
  w.allow_gid_change = c.flag("allow_gid_change", false);
  if (const json* v = given(c, "password")) {
    w.password = py_text(*v);
    w.password_given = true;
  }
  w.enforce_password = c.flag("enforce_password", true);
  w.empty_password = c.flag("empty_password", false);
  for (const auto& f : k_ageing) {
    if (const json* v = given(c, f.arg)) w.ageing.emplace_back(f.arg, *v);
  }
  // A comma would split the GECOS field and be added again on every run.
  for (const char* field : {"fullname", "roomnumber", "workphone"}) {
    auto it = w.gecos.find(field);
    if (it != w.gecos.end() && it->second.find(',') != std::string::npos) {
      return "Unsupported char ',' in " + it->second;
    }
  }
  return "";
}

// Salt's changes to an existing user, applied in its order (the password,
// the date, the home directory, the other ageing fields, the ch* functions,
// groups last), then what changed, and what still differs.
asio::awaitable<void> update_user(const state_call& c, const wanted& w, const wanted& have_opt,
                                  const json& changes, json& ret) {
  const std::string& name = w.name;
  json shadow_pre = co_await shadow_info(c, name);
  json pre = co_await user_info(c, name);
  json todo = changes;
  if (todo.contains("passwd")) {
    todo.erase("passwd");
    if (!w.empty_password) {
      plain_json args = plain_json::array({name, w.password});
      std::string fun = "shadow.set_password";
      co_await c.run(std::move(fun), std::move(args));
    }
  }
  if (todo.contains("empty_password")) {
    todo.erase("empty_password");
    plain_json args = plain_json::array({name});
    std::string fun = "shadow.del_password";
    co_await c.run(std::move(fun), std::move(args));
  }
  co_await set_ageing(c, name, todo, true);
  bool home_changed = false;
  if (todo.contains("home")) {
    json home = todo["home"];
    todo.erase("home");
    if (!todo.contains("homeDoesNotExist")) {
      plain_json args = plain_json::array({name, plain(home)});
      plain_json kwargs = {{"persist", w.persist_home}};
      std::string fun = "user.chhome";
      co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
      home_changed = true;
    }
  }
  if (todo.contains("homeDoesNotExist")) {
    json home = todo["homeDoesNotExist"];
    todo.erase("homeDoesNotExist");
    if (!home_changed) {
      plain_json args = plain_json::array({name, plain(home)});
      plain_json kwargs = {{"persist", w.persist_home}};
      std::string fun = "user.chhome";
      co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
    }
    std::string dir = home.get<std::string>();
    if (!is_dir(dir)) {
      // Salt's file.mkdir: the directory and its parents, owned by the
      // user as it was before this run, mode 0755.
      plain_json args = plain_json::array({dir, plain(pre["uid"]), plain(pre["gid"]), "0755"});
      std::string fun = "file.mkdir";
      co_await c.run(std::move(fun), std::move(args));
    }
  }
  co_await set_ageing(c, name, todo, false);
  // The ch* functions, groups last: a new primary group first.
  for (const auto& [key, val] : changes.items()) {
    if (key == "groups" || key == "home" || key == "homeDoesNotExist" || key == "passwd" ||
        key == "empty_password" || is_ageing(key)) {
      continue;
    }
    plain_json args = plain_json::array({name, plain(val)});
    std::string fn = "user.ch" + key;
    co_await c.run(std::move(fn), std::move(args));
  }
  if (changes.contains("groups")) {
    plain_json args = plain_json::array({name, plain(changes["groups"])});
    plain_json kwargs = {{"append", !w.remove_groups}};
    std::string fun = "user.chgroups";
    co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
  }
  json post = co_await user_info(c, name);
  for (const auto& key : k_info_order) {
    if (post.contains(key) && post[key] != pre[key]) ret["changes"][key] = post[key];
  }
  if (!w.password_given || shadow_pre["passwd"] != w.password) {
    json shadow_post = co_await shadow_info(c, name);
    for (const auto& [key, val] : shadow_post.items()) {
      if (shadow_pre[key] == val) continue;
      ret["changes"][key] = key == "passwd" ? json("XXX-REDACTED-XXX") : val;
    }
  }
  if (!ret["changes"].empty()) ret["comment"] = "Updated user " + name;
  std::vector<std::string> ignored;
  std::optional<json> left =
      co_await changes_for(c, have_opt, w.gid, true, true, &ignored);
  if (left && !left->empty()) {
    ret["comment"] = "These values could not be changed: " + py_repr(*left);
    ret["result"] = false;
  }
}

// Salt's user.add for a new user, then its password, empty password and
// ageing fields, each checked ("created but failed to set ...").
asio::awaitable<void> add_user(const state_call& c, const wanted& w,
                               const std::vector<std::string>& present_optional, json& ret) {
  const std::string& name = w.name;
  plain_json kwargs = plain_json::object();
  kwargs["name"] = name;
  if (w.uid) kwargs["uid"] = plain(*w.uid);
  if (w.gid) kwargs["gid"] = plain(*w.gid);
  std::vector<std::string> groups = w.groups.value_or(std::vector<std::string>{});
  groups.insert(groups.end(), present_optional.begin(), present_optional.end());
  if (w.groups || !present_optional.empty()) kwargs["groups"] = groups;
  if (w.home) kwargs["home"] = *w.home;
  if (w.shell) kwargs["shell"] = *w.shell;
  kwargs["unique"] = c.flag("unique", true);
  kwargs["system"] = c.flag("system", false);
  for (const auto& [field, value] : w.gecos) kwargs[field] = value;
  kwargs["createhome"] = w.createhome;
  kwargs["nologinit"] = c.flag("nologinit", false);
  if (const json* v = given(c, "usergroup")) kwargs["usergroup"] = plain(*v);
  bool added = true;
  try {
    plain_json args = plain_json::array();
    std::string fun = "user.add";
    co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
  } catch (const base::error&) {
    added = false;
  }
  if (!added) {
    failed_ret(ret, "Failed to create new user " + name);
    co_return;
  }
  ret["comment"] = "New user " + name + " created";
  json info = co_await user_info(c, name);
  ret["changes"] = in_order(info, k_info_order);
  // pwd reports a home that createhome=False did not make.
  if (!w.createhome) ret["changes"]["home"] = "";
  if (!w.password.empty()) {
    plain_json args = plain_json::array({name, w.password});
    std::string fun = "shadow.set_password";
    co_await c.run(std::move(fun), std::move(args));
    json shadow = co_await shadow_info(c, name);
    if (shadow["passwd"] != w.password) {
      ret["comment"] = "User " + name + " created but failed to set password to XXX-REDACTED-XXX";
      ret["result"] = false;
    }
    ret["changes"]["password"] = "XXX-REDACTED-XXX";
  }
  if (w.empty_password && w.password.empty()) {
    plain_json args = plain_json::array({name});
    std::string fun = "shadow.del_password";
    co_await c.run(std::move(fun), std::move(args));
    json shadow = co_await shadow_info(c, name);
    if (shadow["passwd"] != "") {
      ret["comment"] = "User " + name + " created but failed to empty password";
      ret["result"] = false;
    }
    ret["changes"]["password"] = "";
  }
  for (const auto& [arg, value] : w.ageing) {
    // Salt: `if date is not None`, then `if mindays:` ... `if expire:`.
    if (arg != "date" && !base::python_truth(value)) continue;
    const ageing_field* f = nullptr;
    for (const auto& each : k_ageing)
      if (arg == each.arg) f = &each;
    plain_json args = plain_json::array({name, plain(value)});
    std::string fun = f->setter;
    co_await c.run(std::move(fun), std::move(args));
    json shadow = co_await shadow_info(c, name);
    if (shadow[f->field] != value) {
      ret["comment"] = "User " + name + " created but failed to set " + f->words + " to " +
                       py_text(value);
      ret["result"] = false;
    }
    ret["changes"][arg] = value;
  }
}

asio::awaitable<json> present(state_call c) {
  const std::string name = c.name();
  json ret = make_ret(name, true, "User " + name + " is present and up to date");
  for (const char* key : k_unsupported) {
    const json* v = given(c, key);
    if (v != nullptr && !(v->is_boolean() && !v->get<bool>())) {
      co_return failed_ret(ret, std::string("user.present: ") + key + " is not supported by brine yet");
    }
  }
  wanted w;
  if (std::string error = read_wanted(c, name, w); !error.empty()) co_return failed_ret(ret, error);
  if (w.password_given && !w.password.empty() && c.flag("hash_password", false)) {
    w.password = co_await hash_password(c, name, w.password);
  }
  // Under test a missing group may be one an earlier state creates (Salt
  // 69438): it is left out of the comparison and reported as pending.
  std::string pending;
  if (w.groups && !w.groups->empty()) {
    std::vector<std::string> present;
    for (const auto& g : *w.groups) {
      json info = co_await group_info(c, g);
      if (info.is_object() && !info.empty()) {
        present.push_back(g);
      } else {
        pending += (pending.empty() ? "" : ",") + g;
      }
    }
    if (!pending.empty() && !c.test) {
      co_return failed_ret(ret, "The following group(s) are not present: " + pending);
    }
    w.groups = present;
  }
  const std::string pending_line = pending.empty() ? "" : "pending groups: " + pending + "\n";
  std::vector<std::string> present_optional;
  for (const auto& g : w.optional_groups) {
    json info = co_await group_info(c, g);
    if (info.is_object() && !info.empty()) present_optional.push_back(g);
  }
  wanted have_opt = w;
  have_opt.optional_groups = present_optional;

  // usergroup=True: the group named as the user is the primary one.
  std::optional<json> changes_gid = w.gid;
  if (c.flag("usergroup")) {
    plain_json own_name = name;
    json own = co_await group_to_gid(c, std::move(own_name));
    if (own != "") changes_gid = json(name);
  }

  std::vector<std::string> refused;
  std::optional<json> changes = co_await changes_for(c, have_opt, changes_gid, w.allow_uid_change,
                                                     w.allow_gid_change, &refused);
  if (!refused.empty()) {
    // Salt's CommandExecutionError with info: the list as its nested outputter prints it.
    std::string comment =
        "Encountered error checking for needed changes. Additional info follows:\n";
    for (const auto& r : refused) comment += "\n- " + r;
    co_return failed_ret(ret, comment);
  }

  if (changes && (!changes->empty() || !pending.empty())) {
    if (c.test) {
      ret["result"] = nullptr;
      std::string comment = "The following user attributes are set to be changed:\n";
      for (const auto& [key, val] : changes->items()) {
        comment += key + ": " + (key == "passwd" ? std::string("XXX-REDACTED-XXX") : py_text(val)) +
                   "\n";
      }
      ret["comment"] = comment + pending_line;
      co_return ret;
    }
    co_await update_user(c, w, have_opt, *changes, ret);
    co_return ret;
  }

  if (!changes) {
    if (c.test) {
      ret["result"] = nullptr;
      ret["comment"] = "User " + name + " set to be added" +
                       (pending.empty() ? "" : "\n" + pending_line);
      co_return ret;
    }
    co_await add_user(c, w, present_optional, ret);
  }
  co_return ret;
}

asio::awaitable<json> absent(state_call c) {
  const std::string name = c.name();
  json ret = make_ret(name, true, "");
  json user = co_await user_info(c, name);
  if (!user.is_object() || user.empty()) {
    ret["comment"] = "User " + name + " is not present";
    co_return ret;
  }
  if (c.test) {
    ret["result"] = nullptr;
    ret["comment"] = "User " + name + " set for removal";
    co_return ret;
  }
  std::vector<std::string> before = user["groups"].get<std::vector<std::string>>();
  plain_json args = plain_json::array({name, c.flag("purge"), c.flag("force")});
  bool removed = true;
  try {
    std::string fun = "user.delete";
    co_await c.run(std::move(fun), std::move(args));
  } catch (const base::error&) {
    removed = false;
  }
  if (!removed) co_return failed_ret(ret, "Failed to remove user " + name);
  // userdel also deletes the user's own group; Salt reports each group gone.
  for (const auto& g : before) {
    json info = co_await group_info(c, g);
    if (!info.is_object() || info.empty()) ret["changes"][g + " group"] = "removed";
  }
  ret["changes"][name] = "removed";
  ret["comment"] = "Removed user " + name;
  co_return ret;
}

}  // namespace
}  // namespace user_states

void register_user_states(registry& reg) {
  using namespace user_states;
  reg.add("user.present", present, {"name"},
          "user.present name=USER [uid] [gid] [usergroup] [groups] [optional_groups] "
          "[remove_groups=True] [home] [createhome=True] [persist_home=False] [shell] "
          "[unique=True] [system=False] [fullname] [roomnumber] [workphone] [homephone] [other] "
          "[nologinit=False] [allow_uid_change=False] [allow_gid_change=False] [password=HASH] "
          "[enforce_password=True] [empty_password=False] [date] [mindays] [maxdays] [inactdays] "
          "[warndays] [expire]: the user exists with these attributes (useradd, usermod, chage); "
          "hash_password and password_lock are not in brine yet");
  reg.add("user.absent", absent, {"name"},
          "user.absent name=USER [purge=False] [force=False]: the user does not exist (userdel; "
          "purge=True removes the home directory too)");
}

}  // namespace brine::states
