// Salt's host states: host.present, host.absent and host.only, over the
// hosts file through the hosts module's execution functions (hosts.*), whose
// file is Salt's `hosts.file` option.

#include <algorithm>
#include <arpa/inet.h>
#include <string>
#include <utility>
#include <vector>

#include "states/python_text.h"
#include "base/python_truth.h"
#include "states/registry.h"

namespace brine::states {
namespace host_states {
namespace {

using plain_json = nlohmann::json;

std::vector<std::string> as_list(const json* v) {
  std::vector<std::string> out;
  if (v == nullptr || v->is_null()) return out;
  if (v->is_array()) {
    for (const auto& item : *v) out.push_back(py_text(item));
  } else {
    out.push_back(py_text(*v));
  }
  return out;
}

bool valid_ip(const std::string& addr) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, addr.c_str(), buf) == 1 || ::inet_pton(AF_INET6, addr.c_str(), buf) == 1;
}

// hosts.FUN(args...) -> its answer; named arguments, as GCC 12 wants them in
// a co_await.
asio::awaitable<json> hosts(const state_call& c, std::string fun, plain_json args) {
  std::string name = "hosts." + fun;
  json r = co_await c.run(std::move(name), std::move(args));
  co_return r;
}

void add_change(json& ret, const std::string& kind, const std::string& addr,
                const std::string& what) {
  json& changes = ret["changes"];
  if (!changes.contains(kind)) changes[kind] = json::object();
  if (!changes[kind].contains(addr)) changes[kind][addr] = json::array();
  changes[kind][addr].push_back(what);
}

asio::awaitable<json> present(state_call c) {
  const std::string name = c.name();
  json ret = make_ret(name, true, "");
  std::vector<std::string> ips = as_list(c.arg("ip"));
  std::string comment;
  if (const json* v = c.arg("comment"); v != nullptr && !v->is_null()) comment = py_text(*v);
  const bool clean = c.flag("clean");
  plain_json all_args = plain_json::array();
  std::string all_fun = "list_hosts";
  json all = co_await hosts(c, std::move(all_fun), std::move(all_args));
  auto listed = [&](const std::string& addr) { return all.contains(addr); };
  std::vector<std::string> comments;
  // Salt keeps these in sets; brine in the order the addresses were given.
  std::vector<std::pair<std::string, std::string>> to_add, to_remove, update_comment;
  auto add_unique = [](auto& v, std::pair<std::string, std::string> p) {
    if (std::find(v.begin(), v.end(), p) == v.end()) v.push_back(std::move(p));
  };
  for (const auto& addr : ips) {
    if (!listed(addr)) add_unique(to_add, {addr, name});
  }
  if (!comment.empty()) {
    for (const auto& addr : ips) {
      if (!listed(addr)) add_unique(update_comment, {addr, comment});
    }
  }
  for (const auto& [addr, info] : all.items()) {
    if (!info.is_object()) continue;
    const json& aliases = info.contains("aliases") ? info["aliases"] : json::array();
    bool named = std::find(aliases.begin(), aliases.end(), name) != aliases.end();
    if (std::find(ips.begin(), ips.end(), addr) == ips.end()) {
      if (!named) continue;
      if (clean) {
        add_unique(to_remove, {addr, name});
      } else {
        if (!ret.contains("warnings")) ret["warnings"] = json::array();
        ret["warnings"].push_back("Host " + name + " present for IP address " + addr +
                                  ". To get rid of this warning, either run this state with "
                                  "'clean' set to True to remove " + name + " from " + addr +
                                  ", or add " + addr + " to the 'ip' argument.");
      }
    } else if (named) {
      if (!comment.empty() && info.contains("comment") && info["comment"] != comment) {
        add_unique(update_comment, {addr, comment});
      } else if (!comment.empty() && !info.contains("comment")) {
        add_unique(update_comment, {addr, comment});
      } else {
        comments.push_back("Host " + name + " (" + addr + ") already present");
      }
    } else if (valid_ip(addr)) {
      add_unique(to_add, {addr, name});
      if (!comment.empty()) add_unique(update_comment, {addr, comment});
    } else {
      ret["result"] = false;
      comments.push_back("Invalid IP Address for " + name + " (" + addr + ")");
    }
  }
  for (const auto& [addr, host] : to_add) {
    if (c.test) {
      ret["result"] = nullptr;
      comments.push_back("Host " + host + " (" + addr + ") would be added");
    } else {
      plain_json done_args = plain_json::array({addr, host});
      std::string done_fun = "add_host";
      json done = co_await hosts(c, std::move(done_fun), std::move(done_args));
      if (!base::python_truth(done)) {
        ret["result"] = false;
        comments.push_back("Failed to add host " + host + " (" + addr + ")");
        continue;
      }
      comments.push_back("Added host " + host + " (" + addr + ")");
    }
    add_change(ret, "added", addr, host);
  }
  for (const auto& [addr, note] : update_comment) {
    if (c.test) {
      comments.push_back("Comment for " + addr + " (" + note + ") would be added");
    } else {
      plain_json done_args = plain_json::array({addr, note});
      std::string done_fun = "set_comment";
      json done = co_await hosts(c, std::move(done_fun), std::move(done_args));
      if (!base::python_truth(done)) {
        ret["result"] = false;
        comments.push_back("Failed to add comment for host " + addr + " (" + note + ")");
        continue;
      }
      comments.push_back("Set comment for host " + addr + " (" + note + ")");
    }
    add_change(ret, "comment_added", addr, note);
  }
  for (const auto& [addr, host] : to_remove) {
    if (c.test) {
      ret["result"] = nullptr;
      comments.push_back("Host " + host + " (" + addr + ") would be removed");
    } else {
      plain_json done_args = plain_json::array({addr, host});
      std::string done_fun = "rm_host";
      json done = co_await hosts(c, std::move(done_fun), std::move(done_args));
      if (!base::python_truth(done)) {
        ret["result"] = false;
        comments.push_back("Failed to remove host " + host + " (" + addr + ")");
        continue;
      }
      comments.push_back("Removed host " + host + " (" + addr + ")");
    }
    add_change(ret, "removed", addr, host);
  }
  std::string text;
  for (std::size_t i = 0; i < comments.size(); ++i) text += (i ? "\n" : "") + comments[i];
  ret["comment"] = text;
  co_return ret;
}

asio::awaitable<json> absent(state_call c) {
  const std::string name = c.name();
  json ret = make_ret(name, true, "");
  ret["result"] = nullptr;
  std::vector<std::string> comments;
  for (const auto& addr : as_list(c.arg("ip"))) {
    plain_json has_args = plain_json::array({addr, name});
    std::string has_fun = "has_pair";
    json has = co_await hosts(c, std::move(has_fun), std::move(has_args));
    if (!base::python_truth(has)) {
      ret["result"] = true;
      comments.push_back("Host " + name + " (" + addr + ") already absent");
    } else if (c.test) {
      comments.push_back("Host " + name + " (" + addr + ") needs to be removed");
    } else {
      plain_json done_args = plain_json::array({addr, name});
      std::string done_fun = "rm_host";
      json done = co_await hosts(c, std::move(done_fun), std::move(done_args));
      if (base::python_truth(done)) {
        ret["changes"] = json{{"host", name}};
        ret["result"] = true;
        comments.push_back("Removed host " + name + " (" + addr + ")");
      } else {
        ret["result"] = false;
        comments.push_back("Failed to remove host");
      }
    }
  }
  std::string text;
  for (std::size_t i = 0; i < comments.size(); ++i) text += (i ? "\n" : "") + comments[i];
  ret["comment"] = text;
  co_return ret;
}

asio::awaitable<json> only(state_call c) {
  const std::string name = c.name();
  json ret = make_ret(name, true, "");
  ret["result"] = nullptr;
  plain_json have_args = plain_json::array({name});
  std::string have_fun = "get_alias";
  json have = co_await hosts(c, std::move(have_fun), std::move(have_args));
  std::string old;
  for (const auto& a : have) old += (old.empty() ? "" : " ") + a.get<std::string>();
  std::string now;
  bool first = true;
  for (auto h : as_list(c.arg("hostnames"))) {
    h.erase(0, h.find_first_not_of(" \t\r\n"));
    h.erase(h.find_last_not_of(" \t\r\n") + 1);
    now += (first ? "" : " ") + h;
    first = false;
  }
  if (old == now) {
    ret["comment"] = "IP address " + name + " already set to \"" + now + "\"";
    ret["result"] = true;
    co_return ret;
  }
  if (c.test) {
    ret["comment"] = "Would change " + name + " from \"" + old + "\" to \"" + now + "\"";
    co_return ret;
  }
  plain_json done_args = plain_json::array({name, now});
  std::string done_fun = "set_host";
  json done = co_await hosts(c, std::move(done_fun), std::move(done_args));
  ret["result"] = base::python_truth(done);
  if (!base::python_truth(done)) {
    ret["comment"] = "hosts.set_host failed to change " + name + " from \"" + old + "\" to \"" +
                     now + "\"";
    co_return ret;
  }
  ret["comment"] = "successfully changed " + name + " from \"" + old + "\" to \"" + now + "\"";
  ret["changes"] = json{{name, json{{"old", old}, {"new", now}}}};
  co_return ret;
}

}  // namespace
}  // namespace host_states

void register_host_states(registry& reg) {
  using namespace host_states;
  reg.add("host.present", present, {"name", "ip"},
          "host.present name=HOSTNAME ip=ADDRESS|[ADDRESS...] [comment] [clean=False]: the hosts "
          "file gives each address the name (clean=True removes the name from other addresses)");
  reg.add("host.absent", absent, {"name", "ip"},
          "host.absent name=HOSTNAME ip=ADDRESS|[ADDRESS...]: the hosts file does not give the "
          "addresses the name");
  reg.add("host.only", only, {"name", "hostnames"},
          "host.only name=ADDRESS hostnames=NAME|[NAME...]: the address has exactly these names, "
          "on one line");
}

}  // namespace brine::states
