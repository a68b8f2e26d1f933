#include "states/file_tree.h"

#include <dirent.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <set>

#include "modules/accounts.h"
#include "modules/data.h"
#include "states/file_util.h"

namespace brine::states {
namespace {

using json = nlohmann::ordered_json;

bool pattern_matches(std::string_view path, const json& pat) {
  std::string p = pat.is_string() ? pat.get<std::string>() : python_str(pat);
  if (p.starts_with("E@")) {
    py_regex re(std::string_view(p).substr(2));
    return re.search(path);
  }
  return modules::fnmatch(p, path);
}

// Python's truth of a pattern argument (None, "" and [] are no pattern).
bool given(const json* pat) {
  if (pat == nullptr || pat->is_null()) return false;
  if (pat->is_string() || pat->is_array()) return !pat->empty();
  return true;
}

void walk(const std::string& top, int depth, std::optional<long long> max_depth,
          std::vector<walk_level>& out) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(top.c_str()), ::closedir);
  if (!dir) return;
  walk_level level;
  level.root = top;
  while (struct dirent* d = ::readdir(dir.get())) {
    std::string n = d->d_name;
    if (n == "." || n == "..") continue;
    struct stat st {};
    bool is_dir = ::stat(path_join(top, n).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    (is_dir ? level.dirs : level.files).push_back(std::move(n));
  }
  dir.reset();
  std::vector<std::string> dirs = level.dirs;
  if (!max_depth || depth < *max_depth) out.push_back(std::move(level));
  // Salt walks on but yields nothing below max_depth: no need to go there.
  if (max_depth && depth + 1 >= *max_depth) return;
  for (const auto& d : dirs) {
    std::string sub = path_join(top, d);
    struct stat st {};
    if (::lstat(sub.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) continue;
    walk(sub, depth + 1, max_depth, out);
  }
}

struct current {
  std::string user, group, mode;
  uid_t uid = 0;
  gid_t gid = 0;
  bool link = false;
};

std::optional<current> stats_of(const std::string& path, bool follow_symlinks) {
  struct stat st {};
  if ((follow_symlinks ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) {
    return std::nullopt;
  }
  current c;
  c.uid = st.st_uid;
  c.gid = st.st_gid;
  if (auto u = modules::accounts::user_by_uid(st.st_uid)) c.user = u->name;
  if (auto g = modules::accounts::group_name(st.st_gid)) c.group = *g;
  c.mode = mode_text(st.st_mode & 07777);
  c.link = S_ISLNK(st.st_mode);
  return c;
}

// Salt's `user == stats["user"] or user == stats["uid"]` (Python: a str
// equals only the name, an int only the id).
bool same_owner(const json& want, const std::string& name, unsigned id) {
  if (want.is_string()) return want.get<std::string>() == name;
  if (want.is_number_integer()) return want.get<long long>() == static_cast<long long>(id);
  return false;
}

bool truthy_owner(const json& v) {
  if (v.is_null()) return false;
  if (v.is_string()) return !v.get<std::string>().empty();
  return true;
}

}  // namespace

std::optional<uid_t> uid_of(const json& user) {
  if (user.is_number_integer()) return static_cast<uid_t>(user.get<long long>());
  std::string name = python_str(user);
  if (auto u = modules::accounts::user_by_name(name)) return u->uid;
  return std::nullopt;
}

std::optional<gid_t> gid_of(const json& group) {
  if (group.is_number_integer()) return static_cast<gid_t>(group.get<long long>());
  std::string name = python_str(group);
  return modules::accounts::group_id(name);
}

std::string path_join(const std::string& a, const std::string& b) {
  if (b.starts_with('/')) return b;
  if (a.empty() || a.ends_with('/')) return a + b;
  return a + "/" + b;
}

std::optional<std::string> normalize_mode(const json& v) {
  if (v.is_null()) return std::nullopt;
  std::string m = python_str(v);
  for (size_t at = m.find("0o"); at != std::string::npos; at = m.find("0o", at + 1)) {
    m.replace(at, 2, "0");
  }
  m = py_strip(py_strip(m, "\""), "'");
  m = py_lstrip(m, "0");
  if (m.size() < 4) m.insert(0, 4 - m.size(), '0');
  return m;
}

bool check_include_exclude(std::string_view path, const json* include_pat,
                           const json* exclude_pat) {
  auto any = [&](const json& pat) {
    if (pat.is_array()) {
      for (const auto& p : pat) {
        if (pattern_matches(path, p)) return true;
      }
      return false;
    }
    return pattern_matches(path, pat);
  };
  bool inc = given(include_pat), exc = given(exclude_pat);
  if (inc && !any(*include_pat)) return false;
  if (exc && any(*exclude_pat)) return false;
  return true;
}

std::vector<walk_level> depth_limited_walk(const std::string& top,
                                           std::optional<long long> max_depth) {
  std::vector<walk_level> out;
  walk(top, 0, max_depth, out);
  return out;
}

std::string check_user(const wanted_perms& want, bool test) {
  std::string err;
  if (truthy_owner(want.user) && !uid_of(want.user)) {
    err += "User " + python_str(want.user) + " is not available ";
  }
  if (truthy_owner(want.group) && !gid_of(want.group)) {
    err += "Group " + python_str(want.group) + " is not available";
  }
  return test ? "" : err;
}

json dir_meta_changes(const std::string& path, const wanted_perms& want, bool follow_symlinks) {
  json changes = json::object();
  auto cur = stats_of(path, follow_symlinks);
  if (!cur) {
    changes["directory"] = "new";
    return changes;
  }
  if (!want.user.is_null() && !same_owner(want.user, cur->user, cur->uid)) {
    changes["user"] = want.user;
  }
  if (!want.group.is_null() && !same_owner(want.group, cur->group, cur->gid)) {
    changes["group"] = want.group;
  }
  if (want.mode && *want.mode != cur->mode && (follow_symlinks || !cur->link)) {
    changes["mode"] = *want.mode;
  }
  return changes;
}

void check_perms(const std::string& path, const wanted_perms& want, bool test,
                 bool follow_symlinks, json& changes, std::vector<std::string>& errors) {
  // A path gone since the walk listed it: Salt passes over its "Path not
  // found".
  auto cur = stats_of(path, follow_symlinks);
  if (!cur) return;
  bool user_wanted = truthy_owner(want.user), group_wanted = truthy_owner(want.group);
  bool cuser = user_wanted && !same_owner(want.user, cur->user, cur->uid);
  bool cgroup = group_wanted && !same_owner(want.group, cur->group, cur->gid);
  if ((cuser || cgroup) && !test) {
    auto uid = user_wanted ? uid_of(want.user) : std::optional<uid_t>(cur->uid);
    auto gid = group_wanted ? gid_of(want.group) : std::optional<gid_t>(cur->gid);
    if (!uid) {
      errors.push_back("User does not exist");
    } else if (!gid) {
      errors.push_back("Group does not exist");
    } else {
      bool link_only = cur->link && !follow_symlinks;
      int rc = link_only ? ::lchown(path.c_str(), *uid, *gid) : ::chown(path.c_str(), *uid, *gid);
      if (rc == 0 && !cur->link) {
        // chown clears setuid/setgid bits: Salt sets the old mode again.
        ::chmod(path.c_str(), *parse_mode(json(cur->mode)));
      }
    }
  }
  bool mode_applies = want.mode && !(cur->link && !follow_symlinks);
  bool cmode = false;
  if (mode_applies && !test && *want.mode != cur->mode) {
    cmode = true;
    if (auto m = parse_mode(json(*want.mode))) ::chmod(path.c_str(), *m);
  }
  auto post = stats_of(path, follow_symlinks);
  if (!post) post = cur;
  if (user_wanted) {
    if (!same_owner(want.user, post->user, post->uid)) {
      if (test) {
        changes["user"] = want.user;
      } else {
        errors.push_back("Failed to change user to " + python_str(want.user));
      }
    } else if (cuser) {
      changes["user"] = want.user;
    }
  }
  if (group_wanted) {
    if (!same_owner(want.group, post->group, post->gid)) {
      if (test) {
        changes["group"] = want.group;
      } else {
        errors.push_back("Failed to change group to " + python_str(want.group));
      }
    } else if (cgroup) {
      changes["group"] = want.group;
    }
  }
  if (mode_applies) {
    if (*want.mode != post->mode) {
      if (test) {
        changes["mode"] = *want.mode;
      } else {
        errors.push_back("Failed to change mode to " + *want.mode);
      }
    } else if (cmode) {
      changes["mode"] = *want.mode;
    }
  }
}

// Salt's _clean_dir: removes what is under `root` but neither kept (nor a
// parent of something kept) nor spared by exclude_pat; answers what went.
std::vector<std::string> clean_tree(const std::string& root, const std::set<std::string>& keep,
                                   const json* exclude_pat, bool test) {
  std::set<std::string> real_keep{root};
  for (const auto& k : keep) {
    if (k.empty() || k.front() != '/') continue;
    std::string p = std::filesystem::path(k).lexically_normal().string();
    while (true) {
      if (p.size() > 1 && p.back() == '/') p.pop_back();
      real_keep.insert(p);
      std::string parent = std::filesystem::path(p).parent_path().string();
      if (parent == p || parent.empty()) break;
      p = parent;
    }
  }
  std::vector<std::string> removed;
  // Top-down, each directory listed before its children are visited (as
  // os.walk does), so a removed directory's contents are not listed.
  std::function<void(const std::string&)> visit = [&](const std::string& dir) {
    std::vector<walk_level> level = depth_limited_walk(dir, 1);
    if (level.empty()) return;
    for (const auto* names : {&level[0].dirs, &level[0].files}) {
      for (const auto& n : *names) {
        std::string path = path_join(dir, n);
        if (real_keep.count(path)) continue;
        std::string rel = std::filesystem::path(path).lexically_relative(root).generic_string();
        if (!check_include_exclude(rel, nullptr, exclude_pat)) continue;
        removed.push_back(path);
        if (!test) {
          std::error_code ec;
          std::filesystem::remove_all(path, ec);
        }
      }
    }
    for (const auto& d : level[0].dirs) {
      std::string sub = path_join(dir, d);
      struct stat st {};
      if (::lstat(sub.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) visit(sub);
    }
  };
  visit(root);
  return removed;
}

}  // namespace brine::states
