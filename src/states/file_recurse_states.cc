// Salt's file.recurse: a directory of the file server copied to the minion,
// each file through file.managed and each directory through file.directory
// (Salt's changes keyed by path, its "#### path ####" comments). The source
// is listed once; only files whose destination differs from the server's
// hash (or that are templates) are fetched, all in one cache() call.

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fileserver/client.h"
#include "base/python_truth.h"
#include "fileserver/path.h"
#include "fileserver/roots.h"
#include "modules/context.h"
#include "states/file_states.h"
#include "states/file_tree.h"
#include "states/file_util.h"
#include "states/registry.h"

namespace brine::states {
namespace file_recurse_states {
namespace {

namespace fs = std::filesystem;

std::string saltenv_of(const state_call& c) {
  for (const char* key : {"saltenv", "__env__"}) {
    if (const json* e = c.arg(key); e != nullptr && e->is_string() && !e->get<std::string>().empty()) {
      return e->get<std::string>();
    }
  }
  return "base";
}

// The low chunk of a file.managed or file.directory call for one path: the
// recurse's own arguments that Salt passes on (its **kwargs and the named
// ones), without those only recurse knows.
json sub_low(const state_call& c, const std::string& path) {
  static const std::set<std::string> k_recurse_only = {
      "name",        "source",      "clean",        "require",       "dir_mode",
      "file_mode",   "sym_mode",    "include_pat",  "exclude_pat",   "maxdepth",
      "include_empty", "keep_symlinks", "force_symlinks", "mode", "makedirs",
      "keep_source", "watch",       "onchanges",    "prereq",        "onfail"};
  json low = json::object();
  for (const auto& [k, v] : c.low.items()) {
    if (!k_recurse_only.count(k)) low[k] = v;
  }
  low["name"] = path;
  return low;
}

struct recursion {
  json ret;
  std::map<std::string, std::vector<std::string>> comments;
  std::vector<std::string> comment_order;

  void add_comment(const std::string& path, const json& comment) {
    if (!comments.count(path)) comment_order.push_back(path);
    auto& list = comments[path];
    if (comment.is_array()) {
      for (const auto& line : comment) list.push_back(python_str(line));
    } else {
      list.push_back(python_str(comment));
    }
  }
  // Salt's merge_ret: the most negative result; comments of what is not
  // in order; changes under the path.
  void merge(const std::string& path, const json& sub) {
    const json& result = sub.contains("result") ? sub["result"] : json(true);
    if (result == json(false) || ret["result"] == json(true)) ret["result"] = result;
    bool has_comment = sub.contains("comment") && !sub["comment"].empty() &&
                       !(sub["comment"].is_string() && sub["comment"].get<std::string>().empty());
    if (result != json(true) && has_comment) add_comment(path, sub["comment"]);
    if (sub.contains("changes") && !sub["changes"].empty()) ret["changes"][path] = sub["changes"];
  }
};

// What a file.recurse manages (Salt's _gen_recurse_managed_files): the
// source's files and (include_empty) directories below `name`, or Salt's
// comment why the source is no directory of the server.
struct recurse_plan {
  std::string error;
  std::string senv;
  std::shared_ptr<const fileserver::manifest> m;
  std::set<std::string> keep;
  std::set<std::string> managed_dirs;
  std::vector<std::pair<std::string, const fileserver::entry*>> managed_files;
};

asio::awaitable<recurse_plan> plan_recurse(state_call c, std::string name) {
  recurse_plan out;
  std::vector<std::string> sources;
  if (const json* s = c.arg("source"); s != nullptr && s->is_array()) {
    for (const auto& item : *s) sources.push_back(python_str(item));
  } else if (s != nullptr && !s->is_null()) {
    sources.push_back(python_str(*s));
  }
  for (auto& s : sources) {
    while (!s.empty() && s.back() == '/') s.pop_back();
  }
  for (const auto& s : sources) {
    if (!s.starts_with("salt://")) {
      out.error = "Invalid source '" + s + "' (must be a salt:// URI)";
      co_return out;
    }
  }
  if (c.context == nullptr) {
    out.error = "file.recurse needs a minion (its file client)";
    co_return out;
  }
  // file.source_list: the first source that is a file or directory of the
  // server.
  std::string env = saltenv_of(c);
  std::string srcpath;
  for (const auto& s : sources) {
    auto u = fileserver::parse_url(s);
    if (!u) continue;
    std::string e = u->saltenv.value_or(env);
    auto checked = fileserver::check_path(u->path);
    if (!checked.error.empty()) continue;
    auto listed = co_await c.context->files().list(e);
    bool is_dir = std::binary_search(listed->dirs.begin(), listed->dirs.end(), checked.path);
    if (is_dir || listed->find(checked.path) != nullptr) {
      if (!is_dir) {
        out.error = "The directory '" + checked.path +
                    "' does not exist on the salt fileserver in saltenv '" + e + "'";
        co_return out;
      }
      srcpath = checked.path;
      out.senv = e;
      out.m = listed;
      break;
    }
  }
  if (!out.m) {
    out.error = "Recurse failed: none of the specified sources were found";
    co_return out;
  }
  std::optional<long long> maxdepth;
  if (const json* d = c.arg("maxdepth"); d != nullptr && d->is_number_integer()) {
    maxdepth = d->get<long long>();
  }
  const json* include_pat = c.arg("include_pat");
  const json* exclude_pat = c.arg("exclude_pat");
  auto wanted = [&](const std::string& rel) {
    if (maxdepth && static_cast<long long>(std::count(rel.begin(), rel.end(), '/')) > *maxdepth) {
      return false;
    }
    return check_include_exclude(rel, include_pat, exclude_pat);
  };
  std::string prefix = srcpath + "/";
  for (const auto& e : out.m->files) {
    if (!e.path.starts_with(prefix)) continue;
    std::string rel = e.path.substr(prefix.size());
    if (!wanted(rel)) continue;
    std::string dest = path_join(name, rel);
    out.keep.insert(dest);
    out.managed_dirs.insert(fs::path(dest).parent_path().string());
    out.managed_files.emplace_back(dest, &e);
  }
  if (c.flag("include_empty")) {
    for (const auto& d : out.m->dirs) {
      if (!d.starts_with(prefix)) continue;
      std::string rel = d.substr(prefix.size());
      if (!wanted(rel)) continue;
      std::string dest = path_join(name, rel);
      out.managed_dirs.insert(dest);
      out.keep.insert(dest);
    }
  }
  co_return out;
}

asio::awaitable<json> recurse(state_call c) {
  std::string name = expand_user(c.name());
  recursion r;
  r.ret = make_ret(name, true, "");
  json& ret = r.ret;
  if (c.arg("mode") != nullptr) {
    co_return failed_ret(ret, "'mode' is not allowed in 'file.recurse'. Please use 'file_mode' and 'dir_mode'.");
  }
  wanted_perms want;
  if (const json* u = c.arg("user"); base::python_truth(u)) {
    want.user = *u;
  } else if (const json* o = c.arg("owner")) {
    want.user = *o;
  }
  if (const json* g = c.arg("group")) want.group = *g;
  json dir_mode = c.low.value("dir_mode", json());
  json file_mode = c.low.value("file_mode", json());
  bool keep_mode = file_mode.is_string() && file_mode.get<std::string>() == "keep";
  if (keep_mode) file_mode = nullptr;
  if (!dir_mode.is_null()) dir_mode = *normalize_mode(dir_mode);
  if (!file_mode.is_null()) file_mode = *normalize_mode(file_mode);
  want.mode = normalize_mode(dir_mode);
  if (std::string err = check_user(want, c.test); !err.empty()) co_return failed_ret(ret, err);
  if (name.empty() || name.front() != '/') {
    co_return failed_ret(ret, "Specified file " + name + " is not an absolute path");
  }
  if (c.flag("keep_symlinks")) {
    co_return failed_ret(ret, "file.recurse: keep_symlinks is not supported by brine yet (the file "
                         "server does not list symlinks); leave it out to copy what they point to");
  }

  recurse_plan plan = co_await plan_recurse(c, name);
  if (!plan.error.empty()) co_return failed_ret(ret, plan.error);
  const std::string& senv = plan.senv;
  std::set<std::string>& keep = plan.keep;
  const auto& managed_dirs = plan.managed_dirs;
  const auto& managed_files = plan.managed_files;

  std::error_code ec;
  if (!fs::is_directory(name, ec)) {
    if (fs::exists(fs::symlink_status(name, ec))) {
      co_return failed_ret(ret, "The path " + name + " exists and is not a directory");
    }
    if (!c.test) {
      // file.makedirs_perms: each missing level with the owner and dir_mode.
      std::vector<std::string> missing;
      for (fs::path d = name; !d.empty() && !fs::is_directory(d, ec); d = d.parent_path()) {
        missing.push_back(d.string());
        if (d == d.parent_path()) break;
      }
      for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
        if (::mkdir(it->c_str(), 0777) != 0 && errno != EEXIST) {
          co_return failed_ret(ret, "Failed to create directory " + *it + ": " + std::strerror(errno));
        }
        json ignored = json::object();
        std::vector<std::string> errs;
        check_perms(*it, want, false, false, ignored, errs);
      }
    }
  }

  // What must come from the server: files whose destination differs from
  // the server's hash, and every template (its output is not the source).
  bool templated = base::python_truth(c.arg("template"));
  bool replace = c.flag("replace", true);
  std::vector<std::string> fetch;
  std::vector<bool> needs(managed_files.size(), false);
  for (size_t i = 0; i < managed_files.size(); ++i) {
    const auto& [dest, e] = managed_files[i];
    if (!templated) {
      struct stat st {};
      if (::stat(dest.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
          static_cast<uint64_t>(st.st_size) == e->size && fileserver::hash_file(dest) == e->hash) {
        continue;
      }
      if (!replace && fs::exists(dest, ec)) continue;
    }
    needs[i] = true;
    fetch.push_back(e->path);
  }
  std::map<std::string, fileserver::cached_file> got;
  if (!fetch.empty()) {
    auto cached = co_await c.context->files().cache(senv, fetch);
    for (auto& f : cached) got[f.path] = std::move(f);
  }

  for (const auto& dir : managed_dirs) {
    if (fs::path(dir).filename() == "..") continue;
    if (c.flag("clean") && fs::exists(fs::symlink_status(dir, ec)) && !fs::is_directory(dir, ec)) {
      json sub = make_ret(name, true, "");
      if (c.test) {
        sub["comment"] = "Replacing " + dir + " with a directory";
        sub["result"] = nullptr;
        r.merge(dir, sub);
        continue;
      }
      fs::remove_all(dir, ec);
      sub["changes"] = json{{"diff", "Replaced file with a directory"}};
      r.merge(dir, sub);
    }
    state_call dc = c;
    dc.low = sub_low(c, dir);
    dc.low["user"] = want.user;
    dc.low["group"] = want.group;
    dc.low["dir_mode"] = dir_mode;
    dc.low["makedirs"] = true;
    dc.low.erase("recurse");
    dc.low.erase("clean");
    json sub = co_await file_directory(std::move(dc));
    r.merge(dir, sub);
  }
  for (size_t i = 0; i < managed_files.size(); ++i) {
    const auto& [dest, e] = managed_files[i];
    if (c.flag("clean") && fs::is_directory(dest, ec) && replace) {
      json sub = make_ret(name, true, "");
      if (c.test) {
        sub["comment"] = "Replacing directory " + dest + " with a file";
        sub["result"] = nullptr;
        r.merge(dest, sub);
        continue;
      }
      fs::remove_all(dest, ec);
      sub["changes"] = json{{"diff", "Replaced directory with a new file"}};
      r.merge(dest, sub);
    }
    state_call fc = c;
    fc.low = sub_low(c, dest);
    if (needs[i]) {
      auto it = got.find(e->path);
      if (it == got.end() || !it->second.error.empty()) {
        json sub = make_ret(dest, false,
                            "Source file salt://" + e->path + " not found in saltenv '" + senv + "'");
        r.merge(dest, sub);
        continue;
      }
      fc.low["source"] = it->second.local;
      // What the template sees as `source`: the file's URL, as Salt's
      // recurse passes it to managed (salt.utils.url.create).
      fc.low["__source_url__"] = "salt://" + e->path + "?saltenv=" + senv;
    } else {
      // The destination already holds the server's bytes: nothing to fetch,
      // only owner and mode to check.
      fc.low["source"] = dest;
    }
    fc.low["saltenv"] = senv;
    fc.low["user"] = want.user;
    fc.low["group"] = want.group;
    if (keep_mode) {
      fc.low["mode"] = mode_text(e->mode & 07777);
    } else {
      fc.low["mode"] = file_mode;
    }
    fc.low["makedirs"] = true;
    fc.low["replace"] = replace;
    json sub = co_await file_managed(std::move(fc));
    r.merge(dest, sub);
  }
  if (c.flag("clean")) {
    for (const auto& k : co_await keep_from_requires(c, name)) keep.insert(k);
    std::vector<std::string> removed = clean_tree(name, keep, c.arg("exclude_pat"), c.test);
    if (!removed.empty()) {
      if (c.test) {
        if (ret["result"] == json(true)) ret["result"] = nullptr;
        r.add_comment("removed", json(removed));
      } else {
        ret["changes"]["removed"] = removed;
      }
    }
  }
  std::string comment;
  for (const auto& path : r.comment_order) {
    std::string body;
    for (const auto& line : r.comments[path]) body += (body.empty() ? "" : "\n") + line;
    comment += (comment.empty() ? "" : "\n") + ("\n#### " + path + " ####\n" + body);
  }
  comment = py_strip(comment);
  if (comment.empty()) comment = "Recursively updated " + name;
  if (ret["changes"].empty() && ret["result"] == json(true)) {
    comment = "The directory " + name + " is in the correct state";
  }
  ret["comment"] = comment;
  co_return ret;
}

}  // namespace
}  // namespace file_recurse_states

asio::awaitable<std::set<std::string>> recurse_keep(state_call c) {
  using namespace file_recurse_states;
  recurse_plan plan = co_await plan_recurse(c, expand_user(c.name()));
  co_return std::move(plan.keep);
}

void register_file_recurse_states(registry& reg) {
  using namespace file_recurse_states;
  reg.add("file.recurse", recurse, {"name", "source"},
          "file.recurse name=DIR source=salt://DIR [clean=False] [include_pat=] [exclude_pat=] "
          "[maxdepth=] [include_empty=False] [user=] [group=] [dir_mode=] [file_mode=|keep] "
          "[template=jinja defaults= context=] [replace=True]: DIR holds the server's directory");
}

}  // namespace brine::states
