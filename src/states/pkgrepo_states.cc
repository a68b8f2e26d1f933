// Salt's pkgrepo states for apt: pkgrepo.managed and pkgrepo.absent over
// one-line sources, through the pkg module's repo functions (pkg.get_repo,
// pkg.mod_repo, pkg.del_repo, pkg.list_repos) as Salt goes through aptpkg.
//
// Where Salt 3006 compares a repo line word by word (so a line with an
// option other than arch= and signed-by=, or with its options in another
// order, is reconfigured on every run), brine compares what the line
// means: type, options, URI, dist and components, in any order.

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "modules/apt_sources.h"
#include "modules/args.h"
#include "states/python_text.h"
#include "states/registry.h"

namespace brine::states {
namespace pkgrepo_states {
namespace {

using plain_json = nlohmann::json;
using modules::is_true;
namespace apt = modules::apt;

asio::awaitable<json> call_fn(const state_call& c, std::string fun,
                              plain_json args = plain_json::array(),
                              plain_json kwargs = plain_json::object()) {
  json r = co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
  co_return r;
}

std::string text(const json& v) { return v.is_null() ? "" : py_text(v); }

std::vector<std::string> list_arg(const json& v) {
  if (!v.is_array()) return apt::split_list(text(v));
  std::vector<std::string> out;
  for (const auto& item : v) out.push_back(text(item));
  return out;
}

// Salt's salt.utils.pkg.deb.combine_comments.
std::string combine_comments(const json& v) {
  std::string out;
  if (v.is_array()) {
    for (std::size_t i = 0; i < v.size(); ++i) out += (i ? " " : "") + text(v[i]);
  } else {
    out = text(v);
  }
  auto b = out.find_first_not_of(" \t\r\n");
  auto e = out.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : out.substr(b, e - b + 1);
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// What a source line means, order aside.
std::string meaning(const apt::source_entry& e) {
  std::vector<std::string> opts;
  for (const auto& o : e.options) {
    if (o.key != "arch" && o.key != "signed-by") opts.push_back(o.full);
  }
  std::string uri = e.uri;
  while (!uri.empty() && uri.back() == '/') uri.pop_back();
  std::string out = e.type + "|" + uri + "|" + e.dist + "|";
  for (const auto& x : sorted(e.comps)) out += x + ",";
  out += "|";
  for (const auto& x : sorted(e.architectures)) out += x + ",";
  out += "|" + e.signedby + "|";
  for (const auto& x : sorted(opts)) out += x + " ";
  return out;
}

// Salt's pkgrepo return before anything is known (result None).
json undecided(const std::string& name) {
  json ret = json::object();
  ret["name"] = name;
  ret["changes"] = json::object();
  ret["result"] = nullptr;
  ret["comment"] = "";
  return ret;
}

// The configured source that pkg.get_repo finds for `repo` ({} for none);
// throws base::error where it cannot look.
asio::awaitable<json> get_repo(state_call c, std::string repo) {
  plain_json which = plain_json{{"repo", std::move(repo)}};
  json found = co_await call_fn(c, "pkg.get_repo", plain_json::array(), std::move(which));
  co_return found;
}

// Salt's changes of a reconfigured repo: each key of `keys` whose value in
// `after` differs from `before`'s (a key either lacks counts as None).
json changed_keys(const json& keys, const json& before, const json& after) {
  json changes = json::object();
  for (const auto& [key, value] : keys.items()) {
    json n = after.contains(key) ? after[key] : json(nullptr);
    json o = before.contains(key) ? before[key] : json(nullptr);
    if (n != o) changes[key] = json{{"new", n}, {"old", o}};
  }
  return changes;
}

asio::awaitable<json> managed(state_call c) {
  const std::string name = c.name();
  json ret = undecided(name);
  if (c.arg("repo") != nullptr) {
    ret["result"] = false;
    ret["comment"] =
        "'repo' is not a supported argument for this state. The 'name' argument is probably "
        "what was intended.";
    co_return ret;
  }
  const json* enabled = c.arg("enabled");
  const json* disabled_arg = c.arg("disabled");
  if (enabled != nullptr && disabled_arg != nullptr) {
    ret["result"] = false;
    ret["comment"] = "Only one of enabled/disabled is allowed";
    co_return ret;
  }
  for (const char* key : {"keyid", "keyserver", "key_text", "ppa", "consolidate"}) {
    if (c.arg(key) != nullptr) {
      ret["result"] = false;
      ret["comment"] = std::string("brine's pkgrepo.managed does not support ") + key +
                       "; put the keyring on the machine (key_url: salt://... with "
                       "signed-by= in the name)";
      co_return ret;
    }
  }
  // Salt takes enabled/disabled on Ubuntu and Mint only; brine on Debian too.
  const bool disabled = disabled_arg != nullptr ? is_true(*disabled_arg)
                        : enabled != nullptr    ? !is_true(*enabled)
                                                : false;
  bool aptkey = c.arg("aptkey") == nullptr || c.flag("aptkey", true);
  if (::access("/usr/bin/apt-key", X_OK) != 0) aptkey = false;

  // Salt's _expand_repo_def: what the source should look like.
  apt::source_entry want = apt::parse_line(name);
  if (const json* v = c.arg("comps"); v != nullptr && !v->is_null()) want.comps = list_arg(*v);
  if (const json* v = c.arg("architectures"); v != nullptr && !v->is_null()) {
    want.architectures = list_arg(*v);
  }
  if (const json* v = c.arg("uri"); v != nullptr && !v->is_null()) want.uri = text(*v);
  if (const json* v = c.arg("dist"); v != nullptr && !v->is_null()) want.dist = text(*v);
  want.disabled = disabled;
  want.comment.clear();
  json sanitized = json::object();
  sanitized["comps"] = want.comps;
  sanitized["disabled"] = want.disabled;
  sanitized["dist"] = want.dist;
  sanitized["type"] = want.type;
  sanitized["uri"] = want.uri;
  {
    std::string line = want.render();
    while (!line.empty() && line.back() == ' ') line.pop_back();
    sanitized["line"] = line;
  }
  sanitized["architectures"] = want.architectures;
  sanitized["signedby"] = want.signedby;

  json pre;
  try {
    pre = co_await get_repo(c, name);
  } catch (const base::error& e) {
    ret["result"] = false;
    ret["comment"] = "Failed to examine repo '" + name + "': " + e.what();
    co_return ret;
  }
  std::optional<std::string> comments;
  if (const json* v = c.arg("comments"); v != nullptr && !v->is_null()) {
    comments = combine_comments(*v);
  }

  if (!pre.empty()) {
    apt::source_entry have = apt::parse_line(text(pre.value("line", json(""))));
    bool same = sorted(want.comps) == sorted(list_arg(pre.value("comps", json::array()))) &&
                want.disabled == pre.value("disabled", json(false)).get<bool>() &&
                want.dist == text(pre.value("dist", json(""))) &&
                want.type == text(pre.value("type", json(""))) &&
                want.uri == text(pre.value("uri", json(""))) &&
                want.signedby == text(pre.value("signedby", json("")));
    if (same && !want.architectures.empty()) {
      same = sorted(want.architectures) ==
             sorted(list_arg(pre.value("architectures", json::array())));
    }
    if (same && !want.disabled) {
      same = meaning(want) == meaning(have);
      if (same && comments) same = *comments == combine_comments(json(have.comment));
    }
    if (same) {
      ret["result"] = true;
      ret["comment"] = "Package repo '" + name + "' already configured";
      co_return ret;
    }
  }

  if (c.test) {
    ret["comment"] = "Package repo '" + name +
                     "' would be configured. This may cause pkg states to behave differently "
                     "than stated if this action is repeated without test=True, due to the "
                     "differences in the configured repositories.";
    if (!pre.empty()) {
      ret["changes"] = changed_keys(sanitized, pre, sanitized);
    } else {
      ret["changes"]["repo"] = name;
    }
    co_return ret;
  }

  std::optional<std::string> file;
  if (const json* v = c.arg("file"); v != nullptr && !v->is_null()) file = text(*v);
  if (c.flag("clean_file")) {
    if (!file) {
      ret["result"] = false;
      ret["comment"] = "clean_file empties the file that `file` names: give file too";
      co_return ret;
    }
    std::ofstream truncate(*file, std::ios::trunc);
  }
  try {
    plain_json kwargs = {{"repo", name}, {"aptkey", aptkey}, {"disabled", disabled}};
    if (file) kwargs["file"] = *file;
    if (const json* v = c.arg("comps"); v != nullptr && !v->is_null()) {
      kwargs["comps"] = plain_json(want.comps);
    }
    if (const json* v = c.arg("architectures"); v != nullptr && !v->is_null()) {
      kwargs["architectures"] = plain_json(want.architectures);
    }
    if (comments) kwargs["comments"] = *comments;
    for (const char* key : {"uri", "dist", "refresh", "refresh_db"}) {
      if (const json* v = c.arg(key); v != nullptr && !v->is_null()) {
        kwargs[key] = plain_json::parse(v->dump());
      }
    }
    if (const json* v = c.arg("key_url"); v != nullptr && !v->is_null()) {
      std::string url = text(*v);
      if (url.starts_with("salt://")) {
        plain_json source = plain_json::array({url});
        json cached = co_await call_fn(c, "cp.cache_file", std::move(source));
        if (!cached.is_string() || text(cached).empty()) {
          throw base::error("Error: file not found: " + url);
        }
        url = text(cached);
      }
      kwargs["key_url"] = url;
    }
    co_await call_fn(c, "pkg.mod_repo", plain_json::array(), std::move(kwargs));
  } catch (const base::error& e) {
    ret["result"] = false;
    ret["comment"] = "Failed to configure repo '" + name + "': " + e.what();
    co_return ret;
  }
  try {
    json post = co_await get_repo(c, name);
    if (!pre.empty()) {
      ret["changes"] = changed_keys(sanitized, pre, post);
    } else {
      ret["changes"] = json{{"repo", name}};
    }
    ret["result"] = true;
    ret["comment"] = "Configured package repo '" + name + "'";
  } catch (const base::error& e) {
    ret["result"] = false;
    ret["comment"] = "Failed to confirm config of repo '" + name + "': " + e.what();
  }
  co_return ret;
}

asio::awaitable<json> absent(state_call c) {
  const std::string name = c.name();
  json ret = undecided(name);
  for (const char* key : {"keyid", "keyid_ppa"}) {
    if (const json* v = c.arg(key); v != nullptr && !v->is_null()) {
      ret["result"] = false;
      ret["comment"] = "Repo key management is not implemented for this platform";
      co_return ret;
    }
  }
  const std::string stripname = apt::strip_uri(name);
  json repo;
  try {
    repo = co_await get_repo(c, stripname);
  } catch (const base::error& e) {
    ret["result"] = false;
    ret["comment"] = "Failed to configure repo '" + name + "': " + e.what();
    co_return ret;
  }
  if (!repo.empty()) {
    // get_repo matches whatever the architectures; absent does not.
    std::vector<std::string> want = sorted(apt::parse_line(stripname).architectures);
    want.erase(std::unique(want.begin(), want.end()), want.end());
    std::vector<std::string> have = sorted(list_arg(repo.value("architectures", json::array())));
    have.erase(std::unique(have.begin(), have.end()), have.end());
    if (want != have) repo = json::object();
  }
  if (repo.empty()) {
    ret["comment"] = "Package repo " + name + " is absent";
    ret["result"] = true;
    co_return ret;
  }
  if (c.test) {
    ret["comment"] = "Package repo '" + name +
                     "' will be removed. This may cause pkg states to behave differently than "
                     "stated if this action is repeated without test=True, due to the "
                     "differences in the configured repositories.";
    co_return ret;
  }
  try {
    plain_json kwargs = {{"repo", stripname}};
    if (const json* v = c.arg("refresh"); v != nullptr && !v->is_null()) {
      kwargs["refresh"] = plain_json::parse(v->dump());
    }
    co_await call_fn(c, "pkg.del_repo", plain_json::array(), std::move(kwargs));
  } catch (const base::error& e) {
    ret["result"] = false;
    ret["comment"] = e.what();
    co_return ret;
  }
  // (Salt looks the line up among list_repos' URIs, which never hold it.)
  ret["changes"]["repo"] = name;
  ret["comment"] = "Removed repo " + name;
  ret["result"] = true;
  co_return ret;
}

}  // namespace
}  // namespace pkgrepo_states

void register_pkgrepo_states(registry& reg) {
  using namespace pkgrepo_states;
  reg.add("pkgrepo.managed", managed, {"name"},
          "pkgrepo.managed name='deb [signed-by=KEYRING] URI DIST COMP...' [file=] [comps=] "
          "[architectures=] [enabled=|disabled=] [comments=] [key_url=] [aptkey=True] "
          "[refresh=True] [clean_file=False]: the apt source line, in `file`");
  reg.add("pkgrepo.absent", absent, {"name"},
          "pkgrepo.absent name='deb URI DIST COMP...': removes the apt source line (and a "
          "sources.list.d file it leaves empty)");
}

}  // namespace brine::states
