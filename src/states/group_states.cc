// Salt's group states: group.present and group.absent, on Linux, through the
// user module's group.* execution functions (groupadd, groupmod, gpasswd,
// groupdel), as Salt's state calls __salt__.

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "states/python_text.h"
#include "states/registry.h"

namespace brine::states {
namespace group_states {
namespace {

using plain_json = nlohmann::json;

// Salt's group.info keys in the order its dict has them.
const std::vector<std::string> k_info_order = {"name", "passwd", "gid", "members"};

plain_json plain(const json& v) { return plain_json(v); }

asio::awaitable<json> group_info(const state_call& c, std::string name) {
  plain_json args = plain_json::array();
  args.push_back(std::move(name));
  std::string fun = "group.info";
  json r = co_await c.run(std::move(fun), std::move(args));
  co_return r;
}

std::optional<std::vector<std::string>> user_list(const state_call& c, const std::string& key) {
  const json* v = c.arg(key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  std::vector<std::string> out;
  if (v->is_array()) {
    for (const auto& item : *v) out.push_back(py_text(item));
  } else {
    out.push_back(py_text(*v));
  }
  return out;
}

struct wanted {
  std::string name;
  std::optional<long long> gid;
  std::optional<std::vector<std::string>> addusers, delusers, members;
};

// Salt's _changes: what differs between the group and `w` (gid, members or
// delusers, addusers, delusers, in that order); nullopt when there is no such
// group.
asio::awaitable<std::optional<json>> changes_for(const state_call& c, wanted w) {
  json group = co_await group_info(c, w.name);
  if (!group.is_object() || group.empty()) co_return std::nullopt;
  json change = json::object();
  if (w.gid && *w.gid != 0 && group["gid"] != *w.gid) change["gid"] = *w.gid;
  std::vector<std::string> have = group["members"].get<std::vector<std::string>>();
  std::set<std::string> have_set(have.begin(), have.end());
  if (w.members && w.members->empty()) {
    // Salt keeps these in a set, which prints in hash order: sorted here.
    if (!have_set.empty()) change["delusers"] = have_set;
  } else if (w.members) {
    if (have_set != std::set<std::string>(w.members->begin(), w.members->end())) {
      change["members"] = *w.members;
    }
  }
  if (w.addusers && !w.addusers->empty()) {
    json add = json::array();
    for (const auto& u : *w.addusers) {
      if (!have_set.contains(u)) add.push_back(u);
    }
    if (!add.empty()) change["addusers"] = add;
  }
  if (w.delusers && !w.delusers->empty()) {
    json del = json::array();
    for (const auto& u : *w.delusers) {
      if (have_set.contains(u)) del.push_back(u);
    }
    if (!del.empty()) change["delusers"] = del;
  }
  co_return change;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

asio::awaitable<json> present(state_call c) {
  const std::string name = c.name();
  json ret = make_ret(name, true, "Group " + name + " is present and up to date");
  wanted w;
  w.name = name;
  if (const json* v = c.arg("gid"); v != nullptr && !v->is_null()) {
    std::string text = py_text(*v);
    if (text.empty() || text.size() > 10 ||
        !std::all_of(text.begin(), text.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      co_return failed_ret(ret, "Invalid gid");
    }
    w.gid = std::stoll(text);
  }
  w.addusers = user_list(c, "addusers");
  w.delusers = user_list(c, "delusers");
  w.members = user_list(c, "members");
  const bool system = c.flag("system");
  const bool non_unique = c.flag("non_unique");
  if (w.members && (w.addusers || w.delusers)) {
    ret["result"] = nullptr;
    ret["comment"] =
        "Error: Conflicting options \"members\" with \"addusers\" and/or \"delusers\" can not "
        "be used together. ";
    co_return ret;
  }
  if (w.addusers && w.delusers) {
    for (const auto& u : *w.addusers) {
      if (std::find(w.delusers->begin(), w.delusers->end(), u) != w.delusers->end()) {
        ret["result"] = nullptr;
        ret["comment"] = "Error. Same user(s) can not be added and deleted simultaneously";
        co_return ret;
      }
    }
  }

  std::optional<json> changes = co_await changes_for(c, w);
  if (changes && !changes->empty()) {
    std::string comment = "The following group attributes are set to be changed:\n";
    for (const auto& [key, val] : changes->items()) comment += key + ": " + py_text(val) + "\n";
    ret["comment"] = comment;
    if (c.test) {
      ret["result"] = nullptr;
      co_return ret;
    }
    for (const auto& [key, val] : changes->items()) {
      if (key == "gid") {
        plain_json args = plain_json::array({name, *w.gid});
        plain_json kwargs = {{"non_unique", non_unique}};
        std::string fun = "group.chgid";
        co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
      } else if (key == "addusers" || key == "delusers") {
        const std::string fun = key == "addusers" ? "group.adduser" : "group.deluser";
        for (const auto& user : val) {
          plain_json args = plain_json::array({name, plain(user)});
          std::string fn = fun;
          co_await c.run(std::move(fn), std::move(args));
        }
      } else if (key == "members") {
        plain_json args = plain_json::array({name, join(*w.members)});
        std::string fun = "group.members";
        co_await c.run(std::move(fun), std::move(args));
      }
    }
    std::optional<json> left = co_await changes_for(c, w);
    if (left && !left->empty()) {
      ret["result"] = false;
      ret["comment"] = comment + "Some changes could not be applied";
      ret["changes"] = json{{"Failed", *left}};
    } else {
      ret["changes"] = json{{"Final", "All changes applied successfully"}};
    }
    co_return ret;
  }
  if (changes) co_return ret;

  if (c.test) {
    ret["result"] = nullptr;
    ret["comment"] = "Group " + name + " set to be added";
    co_return ret;
  }
  if (w.gid && !non_unique) {
    std::string fun = "group.getent";
    plain_json none = plain_json::array();
    json all = co_await c.run(std::move(fun), std::move(none));
    for (const auto& g : all) {
      if (g["gid"] == *w.gid) {
        co_return failed_ret(ret, "Group " + name + " is not present but gid " + std::to_string(*w.gid) +
                                " is already taken by group " + g["name"].get<std::string>());
      }
    }
  }
  plain_json kwargs = {{"system", system}, {"non_unique", non_unique}};
  if (w.gid) kwargs["gid"] = *w.gid;
  bool added = true;
  try {
    plain_json args = plain_json::array({name});
    std::string fun = "group.add";
    co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
  } catch (const base::error&) {
    added = false;
  }
  if (!added) co_return failed_ret(ret, "Failed to create new group " + name);
  std::optional<std::vector<std::string>> members;
  if (w.members && !w.members->empty()) members = w.members;
  if (w.addusers && !w.addusers->empty()) members = w.addusers;
  if (members) {
    plain_json args = plain_json::array({name, join(*members)});
    std::string fun = "group.members";
    co_await c.run(std::move(fun), std::move(args));
  }
  ret["comment"] = "New group " + name + " created";
  json info = co_await group_info(c, name);
  ret["changes"] = in_order(info, k_info_order);
  std::optional<json> left = co_await changes_for(c, w);
  if (left && !left->empty()) {
    ret["result"] = false;
    ret["comment"] = "Group " + name + " has been created but, some changes could not be applied";
    ret["changes"] = json{{"Failed", *left}};
  }
  co_return ret;
}

asio::awaitable<json> absent(state_call c) {
  const std::string name = c.name();
  json ret = make_ret(name, true, "");
  json info = co_await group_info(c, name);
  if (!info.is_object() || info.empty()) {
    ret["comment"] = "Group not present";
    co_return ret;
  }
  if (c.test) {
    ret["result"] = nullptr;
    ret["comment"] = "Group " + name + " is set for removal";
    co_return ret;
  }
  bool removed = true;
  try {
    plain_json args = plain_json::array({name});
    std::string fun = "group.delete";
    co_await c.run(std::move(fun), std::move(args));
  } catch (const base::error&) {
    removed = false;
  }
  if (!removed) co_return failed_ret(ret, "Failed to remove group " + name);
  ret["changes"][name] = "";
  ret["comment"] = "Removed group " + name;
  co_return ret;
}

}  // namespace
}  // namespace group_states

void register_group_states(registry& reg) {
  using namespace group_states;
  reg.add("group.present", present, {"name"},
          "group.present name=GROUP [gid] [system=False] [addusers=[]] [delusers=[]] "
          "[members=[]] [non_unique=False]: the group exists with this gid and these members "
          "(groupadd, groupmod, gpasswd)");
  reg.add("group.absent", absent, {"name"},
          "group.absent name=GROUP: the group does not exist (groupdel)");
}

}  // namespace brine::states
