// Salt's file.managed (contents, pillar/grains, salt://, local and remote sources,
// jinja templates with the run's accumulators, mode, owner, check_cmd),
// file.directory (owner and modes, recurse, clean with the required states'
// files kept, force, backupname) and file.accumulated. Salt's comments and
// changes; under test nothing is written.

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <cstring>
#include <filesystem>
#include <algorithm>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>

#include "base/error.h"
#include "base/python_truth.h"
#include "fileserver/client.h"
#include "fileserver/path.h"
#include "modules/accounts.h"
#include "modules/context.h"
#include "modules/data.h"
#include "modules/registry.h"
#include "modules/diff.h"
#include "states/file_source.h"
#include "states/file_states.h"
#include "states/file_tree.h"
#include "states/file_util.h"
#include "states/registry.h"
#include "states/templates.h"

namespace brine::states {
namespace file_states {
namespace {

namespace fs = std::filesystem;

// The `diff` change of a file whose text changes: Salt's unified diff, or
// Salt's placeholder with show_changes: False.
std::string diff_of(const state_call& c, const std::string& before, const std::string& after) {
  if (!c.flag("show_changes", true)) return "<show_changes=False>";
  return get_diff(read_lines(before), read_lines(after));
}

// The text `contents` declares: a string, or a list of lines; Salt ends it
// with a newline unless contents_newline is false.
std::optional<std::string> declared_contents(const state_call& c) {
  const json* v = c.arg("contents");
  if (v == nullptr || v->is_null()) return std::nullopt;
  std::string text;
  if (v->is_array()) {
    for (const auto& line : *v) {
      if (!text.empty()) text += "\n";
      text += line.is_string() ? line.get<std::string>() : line.dump();
    }
  } else if (v->is_string()) {
    text = v->get<std::string>();
  } else if (v->is_boolean()) {
    text = v->get<bool>() ? "True" : "False";
  } else {
    text = v->dump();
  }
  if (c.flag("contents_newline", true) && (text.empty() || text.back() != '\n')) text += "\n";
  return text;
}

// The saltenv of the state's sls (Salt's __env__), base outside one.
std::string saltenv_of(const state_call& c) {
  for (const char* key : {"saltenv", "__env__"}) {
    if (const json* e = c.arg(key); e != nullptr && e->is_string() && !e->get<std::string>().empty()) {
      return e->get<std::string>();
    }
  }
  return "base";
}

std::string as_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  return v.dump();
}

// What file.managed declares the file holds: `text` (nullopt: no content
// declared, the file only has to exist), or `error` (Salt's comment).
struct declared {
  std::optional<std::string> text;
  std::string error;
  bool from_source = false;
};

// file.managed's parameters in Salt 3006's signature, and get_managed's:
// any other keyword argument of the state reaches the template as a
// variable of its own (get_managed's **kwargs).
const std::set<std::string>& managed_parameters() {
  static const std::set<std::string> k_named = {
      "name", "source", "source_hash", "source_hash_name", "keep_source", "user", "group",
      "mode", "attrs", "template", "makedirs", "dir_mode", "context", "replace", "defaults",
      "backup", "show_changes", "create", "contents", "tmp_dir", "tmp_ext", "contents_pillar",
      "contents_grains", "contents_newline", "contents_delimiter", "encoding",
      "encoding_errors", "allow_empty", "follow_symlinks", "check_cmd", "skip_verify",
      "selinux", "win_owner", "win_perms", "win_deny_perms", "win_inheritance",
      "win_perms_reset", "verify_ssl", "use_etag", "env"};
  return k_named;
}

// The context Salt renders a file.managed template with (file.get_managed,
// then salt.utils.templates.render_tmpl): the state's name, the source the
// source list chose (file.recurse: the salt:// URL of the file), user,
// group, mode (normalized, as managed() does), attrs and saltenv, the
// state's other keyword arguments, and `defaults` updated by `context` over
// all of them. salt, grains, pillar and opts come from the compiler.
json managed_template_context(const state_call& c, const std::string& source,
                              const std::string& saltenv) {
  json ctx = json::object();
  ctx["name"] = c.name();
  if (const json* url = c.arg("__source_url__"); url != nullptr && url->is_string()) {
    ctx["source"] = *url;
  } else {
    ctx["source"] = source;
  }
  for (const char* key : {"user", "group", "attrs"}) {
    const json* v = c.arg(key);
    ctx[key] = v == nullptr ? json() : *v;
  }
  const json* mode = c.arg("mode");
  std::optional<std::string> normal = mode == nullptr ? std::nullopt : normalize_mode(*mode);
  ctx["mode"] = normal ? json(*normal) : json();
  ctx["saltenv"] = saltenv;
  json extra = extra_kwargs(c, managed_parameters());
  for (const auto& [k, v] : extra.items()) ctx[k] = v;
  if (const json* d = c.arg("defaults"); d != nullptr && d->is_object()) {
    for (const auto& [k, v] : d->items()) ctx[k] = v;
  }
  if (const json* x = c.arg("context"); x != nullptr && x->is_object()) {
    for (const auto& [k, v] : x->items()) ctx[k] = v;
  }
  return ctx;
}

// template: jinja over a source, in Salt's template context.
asio::awaitable<declared> render_template(const state_call& c, std::string local,
                                          std::string source, std::string saltenv) {
  declared out;
  json ctx = managed_template_context(c, source, saltenv);
  rendered_template r = co_await render_template_file(c, std::move(local), std::move(saltenv),
                                                      std::move(ctx));
  if (!r.error.empty()) {
    out.error = r.error == "template: jinja needs a minion" ? r.error
                                                            : "Unable to manage file: " + r.error;
  } else {
    out.text = std::move(r.text);
  }
  co_return out;
}

asio::awaitable<declared> declared_text(state_call c) {
  declared out;
  if (auto text = declared_contents(c)) {
    out.text = std::move(text);
    co_return out;
  }
  for (const char* key : {"contents_pillar", "contents_grains"}) {
    const json* want = c.arg(key);
    if (want == nullptr || want->is_null()) continue;
    bool pillar = std::string(key) == "contents_pillar";
    if (c.context == nullptr) {
      out.error = std::string(key) + " needs a minion";
      co_return out;
    }
    auto data = pillar ? c.context->pillar() : c.context->grains();
    std::string path = as_text(*want);
    // The grains and pillar are plain json: walk them as they are (a
    // pointer into a converted copy would dangle).
    const nlohmann::json* v = modules::traverse(*data, path);
    if (v == nullptr) {
      out.error = std::string(pillar ? "Pillar " : "Grain ") + path + " does not exist";
      co_return out;
    }
    std::string text = as_text(*v);
    if (c.flag("contents_newline", true) && (text.empty() || text.back() != '\n')) text += "\n";
    out.text = std::move(text);
    co_return out;
  }
  const json* source = c.arg("source");
  if (source == nullptr || source->is_null()) co_return out;
  // source_list: each item with its own source_hash ({url: hash}) or the
  // state's.
  std::string state_hash;
  if (const json* h = c.arg("source_hash"); h != nullptr && !h->is_null()) state_hash = as_text(*h);
  std::vector<source_ref> sources;
  if (source->is_array()) {
    for (const auto& s : *source) {
      if (s.is_object() && !s.empty()) {
        const json& own = s.begin().value();
        sources.push_back({s.begin().key(), base::python_truth(&own) ? as_text(own) : state_hash});
      } else {
        sources.push_back({as_text(s), state_hash});
      }
    }
  } else {
    sources.push_back({as_text(*source), state_hash});
  }
  std::string saltenv = saltenv_of(c);
  const json* tmpl = c.arg("template");
  bool templated = base::python_truth(tmpl);
  fetched got;
  bool found = false;
  std::string chosen;
  for (const auto& s : sources) {
    got = co_await fetch_source(c, s, saltenv, sources.size() > 1, templated);
    if (got.text) {
      found = true;
      chosen = s.source;
      break;
    }
    if (!got.missing || sources.size() == 1) {
      out.error = got.error;
      co_return out;
    }
  }
  if (!found) {
    out.error = "none of the specified sources were found";
    co_return out;
  }
  out.from_source = true;
  // Salt's `if template:`: None, "" and False render nothing.
  if (!templated) {
    out.text = std::move(got.text);
    co_return out;
  }
  std::string kind = as_text(*tmpl);
  if (kind != "jinja") {
    out.error = "Specified template format " + kind + " is not supported";
    co_return out;
  }
  declared r = co_await render_template(c, got.local, chosen, saltenv);
  r.from_source = true;
  co_return r;
}

// user= and group= as ids (nullopt: not given, or no such account yet,
// which check_user lets pass only under test).
struct owner {
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
};

owner owner_of(const state_call& c) {
  owner o;
  if (const json* u = c.arg("user"); u != nullptr && !u->is_null()) o.uid = uid_of(*u);
  if (const json* g = c.arg("group"); g != nullptr && !g->is_null()) o.gid = gid_of(*g);
  return o;
}

// Salt's backup: minion (salt.utils.files.backup_minion): the old file
// copied with its owner and mode to
// <cachedir>/file_backup/<its directory>/<name>_<Day_Mon_DD_HH:MM:SS_uuuuuu_YYYY>
// before it is replaced, when `backup` (or else the minion's backup_mode
// option) is "minion" or "both".
void backup_minion(const state_call& c, const std::string& path) {
  if (c.context == nullptr) return;
  const auto& opts = c.context->opts();
  std::string mode_name;
  if (const json* b = c.arg("backup"); b != nullptr && b->is_string()) mode_name = b->get<std::string>();
  if (mode_name.empty() && opts.contains("backup_mode") && opts["backup_mode"].is_string()) {
    mode_name = opts["backup_mode"];
  }
  if (mode_name != "minion" && mode_name != "both") return;
  if (!opts.contains("cachedir") || !opts["cachedir"].is_string()) return;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  std::time_t secs = now.tv_sec;
  struct tm tm {};
  ::localtime_r(&secs, &tm);
  char stamp[64];
  std::strftime(stamp, sizeof stamp, "%a_%b_%d_%H:%M:%S_", &tm);
  char year[8];
  std::strftime(year, sizeof year, "%Y", &tm);
  std::string micros = std::to_string(static_cast<long long>(now.tv_sec) * 1000000 + now.tv_nsec / 1000);
  fs::path p(path);
  std::string dest = opts["cachedir"].get<std::string>() + "/file_backup/" +
                     p.parent_path().string().substr(1) + "/" + p.filename().string() + "_" +
                     stamp + micros.substr(micros.size() - 6) + "_" + year;
  std::error_code ec;
  fs::create_directories(fs::path(dest).parent_path(), ec);
  fs::copy_file(path, dest, fs::copy_options::overwrite_existing, ec);
  if (ec) return;
  if (::chown(dest.c_str(), st.st_uid, st.st_gid) != 0) {
    // Not ours to give away (not root): the copy stays ours.
  }
  ::chmod(dest.c_str(), st.st_mode & 07777);
}

// cmd.run_all of check_cmd: its retcode, stdout and stderr (a failing
// command is an answer here, not an error).
asio::awaitable<json> run_check_cmd(const modules::registry* functions,
                                    modules::minion_context* context, std::string jid,
                                    std::chrono::seconds timeout, std::string command) {
  modules::call mc;
  mc.fun = "cmd.run_all";
  mc.kwargs = {{"cmd", command}, {"python_shell", true}};
  mc.jid = std::move(jid);
  mc.timeout = timeout;
  mc.context = context;
  modules::outcome o = co_await modules::execute(*functions, std::move(mc));
  if (!o.ret.is_object()) co_return json{{"retcode", 1}};
  co_return json(o.ret);
}

// rename() across filesystems (a tmp_dir elsewhere): copy, then remove.
bool move_across(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec) return false;
  fs::remove(from, ec);
  return true;
}

}  // namespace
}  // namespace file_states

asio::awaitable<json> file_managed(state_call c) {
  using namespace file_states;
  std::string name = c.name();
  json ret = sorted_ret(name);
  if (name.empty()) co_return failed_ret(ret, "Destination file name is required");
  std::error_code ec;
  if (!c.flag("create", true) && !fs::is_regular_file(name, ec)) {
    ret["comment"] = "File " + name + " is not present and is not set for creation";
    co_return ret;
  }
  if (name.front() != '/') co_return failed_ret(ret, "Specified file " + name + " is not an absolute path");
  // Salt's _check_user (one text for both; under test only a warning, so
  // that a user a package creates later in the run is no failure).
  wanted_perms who;
  if (const json* u = c.arg("user")) who.user = *u;
  if (const json* g = c.arg("group")) who.group = *g;
  if (std::string err = check_user(who, c.test); !err.empty()) co_return failed_ret(ret, err);
  owner own = owner_of(c);
  // follow_symlinks (default): a symlink's target is the file managed;
  // else the link is replaced by a regular file.
  std::string path = name;
  bool link = fs::is_symlink(fs::symlink_status(name, ec));
  bool follow = c.flag("follow_symlinks", true);
  if (link && follow) path = fs::weakly_canonical(name, ec).string();
  if (ec) path = name;
  bool replace_link = link && !follow;
  bool exists = fs::exists(path, ec);
  // replace: False leaves an existing file's contents alone (its mode and
  // owner are still managed).
  if (exists && !c.flag("replace", true) && !fs::is_directory(path, ec)) {
    ret["comment"] = c.test ? "File " + name + " not updated"
                            : "File " + name + " exists with proper permissions. No changes made.";
    co_return ret;
  }
  // file.accumulated's texts for this file reach its template as
  // `accumulator` (Salt's _load_accumulators).
  if (c.per_run != nullptr && c.per_run->accumulators.contains(name)) {
    if (!c.low.contains("context") || !c.low["context"].is_object()) c.low["context"] = json::object();
    c.low["context"]["accumulator"] = c.per_run->accumulators[name];
  }
  declared d = co_await declared_text(c);
  if (!d.error.empty()) co_return failed_ret(ret, d.error);
  if (!d.text) {
    // Neither contents nor source: the file only has to exist.
    if (exists) {
      ret["comment"] = "File " + name + " exists with proper permissions. No changes made.";
      co_return ret;
    }
    d.text = std::string();
  }
  std::optional<std::string> want = std::move(d.text);
  std::optional<mode_t> mode;
  if (const json* m = c.arg("mode"); m != nullptr && !m->is_null()) {
    mode = parse_mode(*m);
    if (!mode) co_return failed_ret(ret, "Invalid mode " + (m->is_string() ? m->get<std::string>() : m->dump()));
  }
  if (exists && fs::is_directory(path, ec)) {
    co_return failed_ret(ret, "Specified target " + name + " is a directory");
  }
  std::optional<std::string> have = exists ? read_file(path) : std::nullopt;
  bool same = have && *have == *want;
  std::optional<mode_t> have_mode;
  struct stat st {};
  bool have_stat = exists && ::stat(path.c_str(), &st) == 0;
  if (have_stat) have_mode = st.st_mode & 07777;
  bool mode_differs = mode && have_mode && *have_mode != *mode;
  // An owner that does not exist yet (only under test) differs from any.
  bool user_wanted = base::python_truth(c.arg("user"));
  bool group_wanted = base::python_truth(c.arg("group"));
  bool user_differs = user_wanted && have_stat && (!own.uid || st.st_uid != *own.uid);
  bool group_differs = group_wanted && have_stat && (!own.gid || st.st_gid != *own.gid);
  auto note_owner = [&] {
    if (user_differs) ret["changes"]["user"] = as_text(*c.arg("user"));
    if (group_differs) ret["changes"]["group"] = as_text(*c.arg("group"));
  };
  if (c.test) {
    if (!exists) {
      ret["changes"]["newfile"] = name;
      ret["result"] = nullptr;
      ret["comment"] = "The file " + name +
                       " is set to be changed\nNote: No changes made, actual changes may\nbe "
                       "different due to other states.";
    } else if (same && !mode_differs && !user_differs && !group_differs) {
      ret["comment"] = "The file " + name + " is in the correct state";
    } else {
      if (!same) ret["changes"]["diff"] = diff_of(c, *have, *want);
      note_owner();
      if (mode_differs) ret["changes"]["mode"] = mode_text(*mode);
      ret["result"] = nullptr;
      ret["comment"] = "The file " + name +
                       " is set to be changed\nNote: No changes made, actual changes may\nbe "
                       "different due to other states.";
    }
    co_return ret;
  }
  if (same && !mode_differs && !user_differs && !group_differs) {
    ret["comment"] = "File " + name + " is in the correct state";
    co_return ret;
  }
  fs::path parent = fs::path(path).parent_path();
  if (!fs::is_directory(parent, ec)) {
    if (!c.flag("makedirs")) co_return failed_ret(ret, "Parent directory not present");
    std::vector<fs::path> missing;
    for (fs::path p = parent; !p.empty() && !fs::is_directory(p, ec); p = p.parent_path()) {
      missing.push_back(p);
      if (p == p.parent_path()) break;
    }
    std::optional<mode_t> dir_mode;
    if (const json* m = c.arg("dir_mode"); m != nullptr && !m->is_null()) {
      dir_mode = parse_mode(*m);
    } else if (mode) {
      // Salt: the file's mode with the execute bit added to each digit
      // that is not 0, so the directories can be listed.
      dir_mode = *mode & 0777;
      for (int shift = 0; shift < 9; shift += 3) {
        if ((*dir_mode >> shift) & 07) *dir_mode |= (1u << shift);
      }
    }
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
      if (::mkdir(it->c_str(), 0777) != 0 && errno != EEXIST) {
        co_return failed_ret(ret, "Failed to create directory " + it->string() + ": " + std::strerror(errno));
      }
      if (dir_mode) ::chmod(it->c_str(), *dir_mode);
      if (own.uid || own.gid) {
        if (::chown(it->c_str(), own.uid ? *own.uid : static_cast<uid_t>(-1),
                    own.gid ? *own.gid : static_cast<gid_t>(-1)) != 0) {
          co_return failed_ret(ret, "Failed to change ownership of " + it->string() + ": " + std::strerror(errno));
        }
      }
    }
  }
  if (!same) {
    // Written beside the file and checked (check_cmd) before it replaces it.
    std::string tmp = path + ".brine-tmp-" + std::to_string(::getpid());
    if (const json* t = c.arg("tmp_dir"); t != nullptr && t->is_string() && !t->get<std::string>().empty()) {
      tmp = t->get<std::string>() + "/" + fs::path(path).filename().string() + ".brine-tmp-" +
            std::to_string(::getpid());
    }
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << *want;
      if (!out) {
        std::error_code rm;
        fs::remove(tmp, rm);
        co_return failed_ret(ret, "Unable to write " + name + ": " + std::strerror(errno));
      }
    }
    if (const json* check = c.arg("check_cmd"); check != nullptr && !check->is_null()) {
      std::string command = (check->is_string() ? check->get<std::string>() : check->dump()) + " " + tmp;
      if (c.functions == nullptr) co_return failed_ret(ret, "check_cmd needs the minion's execution functions");
      json out = co_await run_check_cmd(c.functions, c.context, c.jid, c.timeout, std::move(command));
      if (out.value("retcode", 1) != 0) {
        std::error_code rm;
        fs::remove(tmp, rm);
        // Salt's mod_run_check_cmd: the command's output follows.
        std::string comment = "check_cmd execution failed";
        for (const char* stream : {"stdout", "stderr"}) {
          if (out.contains(stream) && out[stream].is_string() && !out[stream].get<std::string>().empty()) {
            comment += "\n" + out[stream].get<std::string>();
          }
        }
        ret["changes"] = json::object();
        ret["comment"] = comment;
        ret["skip_watch"] = true;
        ret["result"] = false;
        co_return ret;
      }
    }
    // A new file keeps the mode it was created with (0666 less the umask),
    // a replaced one its old mode, unless mode= says otherwise.
    if (mode || have_mode) ::chmod(tmp.c_str(), mode ? *mode : *have_mode);
    if (exists && !replace_link) backup_minion(c, path);
    if (::rename(tmp.c_str(), path.c_str()) != 0 && !move_across(tmp, path)) {
      std::error_code rm;
      fs::remove(tmp, rm);
      co_return failed_ret(ret, "Unable to replace " + name + ": " + std::strerror(errno));
    }
    if (own.uid || own.gid) {
      if (::chown(path.c_str(), own.uid ? *own.uid : static_cast<uid_t>(-1),
                  own.gid ? *own.gid : static_cast<gid_t>(-1)) != 0) {
        co_return failed_ret(ret, "Failed to change ownership of " + name + ": " + std::strerror(errno));
      }
    }
    ret["changes"]["diff"] = exists ? diff_of(c, have.value_or(""), *want) : "New file";
    note_owner();
    if (exists && mode_differs) {
      ret["changes"]["mode"] = mode_text(*mode);
    } else if (!exists && (mode || d.from_source)) {
      // Salt makes a new file 0600 (mkstemp) and then sets the mode wanted
      // (for a source without mode=, 0666 less the umask): the mode shows
      // as a change unless it is 0600.
      struct stat now {};
      if (::stat(path.c_str(), &now) == 0 && (now.st_mode & 07777) != 0600) {
        ret["changes"]["mode"] = mode_text(now.st_mode & 07777);
      }
    }
  } else {
    if (own.uid || own.gid) {
      if (::chown(path.c_str(), own.uid ? *own.uid : static_cast<uid_t>(-1),
                  own.gid ? *own.gid : static_cast<gid_t>(-1)) != 0) {
        co_return failed_ret(ret, "Failed to change ownership of " + name + ": " + std::strerror(errno));
      }
      note_owner();
    }
    if (mode_differs) {
      ::chmod(path.c_str(), *mode);
      ret["changes"]["mode"] = mode_text(*mode);
    }
  }
  ret["comment"] = "File " + name + " updated";
  co_return ret;
}

namespace file_states {
namespace {

// Salt's _get_recurse_set: the recurse list as a set; `error` when it is
// malformed.
struct recurse_set {
  std::set<std::string> items;
  std::string error;
};

recurse_set recurse_set_of(const json* v) {
  recurse_set out;
  if (v == nullptr || v->is_null() || (v->is_array() && v->empty()) ||
      (v->is_string() && v->get<std::string>().empty()) || (v->is_boolean() && !v->get<bool>())) {
    return out;
  }
  if (!v->is_array()) {
    out.error = "\"recurse\" must be formed as a list of strings";
    return out;
  }
  static const std::vector<std::string> k_types = {"user",         "group",       "mode",
                                                   "ignore_files", "ignore_dirs", "silent"};
  bool bad = false;
  for (const auto& item : *v) {
    if (!item.is_string() ||
        std::find(k_types.begin(), k_types.end(), item.get<std::string>()) == k_types.end()) {
      bad = true;
      continue;
    }
    out.items.insert(item.get<std::string>());
  }
  if (bad) {
    std::string list;
    for (const auto& t : k_types) list += (list.empty() ? "\"" : ", \"") + t + "\"";
    out.error = "Types for \"recurse\" limited to " + list + ".";
  } else if (out.items.count("ignore_files") && out.items.count("ignore_dirs")) {
    out.error =
        "Must not specify \"recurse\" options \"ignore_files\" and \"ignore_dirs\" at the same "
        "time.";
  }
  return out;
}

bool is_child(const std::string& path, const std::string& dir) {
  std::string rel = fs::path(path).lexically_normal().lexically_relative(fs::path(dir).lexically_normal()).generic_string();
  return !rel.empty() && !rel.starts_with("..");
}

// Everything at and below `dir` (Salt's _process / _process_by_walk_d).
void add_tree(const std::string& dir, std::set<std::string>& keep) {
  for (const auto& level : depth_limited_walk(dir)) {
    keep.insert(level.root);
    for (const auto& f : level.files) keep.insert(path_join(level.root, f));
    for (const auto& d : level.dirs) keep.insert(path_join(level.root, d));
  }
}

}  // namespace
}  // namespace file_states

asio::awaitable<std::set<std::string>> keep_from_requires(state_call c, std::string name) {
  using namespace file_states;
  std::set<std::string> keep;
  const json* require = c.arg("require");
  if (require == nullptr || !require->is_array() || c.per_run == nullptr ||
      c.per_run->lowstate == nullptr) {
    co_return keep;
  }
  json lowstate = *c.per_run->lowstate;
  for (const auto& req : *require) {
    if (!req.is_object() || !req.contains("file")) continue;
    std::string want = python_str(req["file"]);
    for (const auto& low : lowstate) {
      if (python_str(low.value("name", json())) != want &&
          python_str(low.value("__id__", json())) != want) {
        continue;
      }
      std::string fn = python_str(low.value("name", json()));
      std::error_code ec;
      if (!fs::is_directory(fn, ec)) {
        keep.insert(fn);
      } else if (is_child(fn, name)) {
        if (low.value("fun", json()) == json("recurse")) {
          state_call rc = c;
          rc.low = low;
          std::set<std::string> managed = co_await recurse_keep(std::move(rc));
          keep.insert(managed.begin(), managed.end());
        } else {
          add_tree(fn, keep);
        }
      }
    }
  }
  co_return keep;
}

namespace file_states {
namespace {

// Salt's _check_directory: what file.directory would change, as
// {path: {key: value}}; result None with the list of them as the comment,
// or True with "in the correct state".
struct dir_check {
  json result = true;
  std::string comment;
  json changes = json::object();
};

dir_check check_directory(const state_call& c, const std::string& name, wanted_perms want,
                          std::optional<std::string> file_mode, const recurse_set& rs,
                          bool clean, const std::set<std::string>& keep,
                          std::optional<long long> max_depth, bool follow, bool children_only) {
  dir_check out;
  std::vector<walk_level> walk;
  if (!rs.items.empty() || clean) walk = depth_limited_walk(name, max_depth);
  if (!rs.items.empty()) {
    wanted_perms sub = want;
    if (!rs.items.count("user")) sub.user = nullptr;
    if (!rs.items.count("group")) sub.group = nullptr;
    if (!rs.items.count("mode")) {
      sub.mode.reset();
      file_mode.reset();
    }
    bool check_files = !rs.items.count("ignore_files");
    bool check_dirs = !rs.items.count("ignore_dirs");
    for (const auto& level : walk) {
      if (check_files) {
        wanted_perms fw = sub;
        fw.mode = file_mode;
        for (const auto& f : level.files) {
          std::string path = path_join(level.root, f);
          json ch = dir_meta_changes(path, fw, follow);
          ch.erase("directory");
          if (!ch.empty()) out.changes[path] = ch;
        }
      }
      if (check_dirs) {
        for (const auto& d : level.dirs) {
          std::string path = path_join(level.root, d);
          json ch = dir_meta_changes(path, sub, follow);
          if (!ch.empty()) out.changes[path] = ch;
        }
      }
    }
    want = sub;
  }
  if (!children_only) {
    json ch = dir_meta_changes(name, want, follow);
    if (!ch.empty()) out.changes[name] = ch;
  }
  if (clean) {
    // Under test Salt keeps only the exact paths of required states (their
    // parents show as removed; the real run keeps them).
    const json* exclude_pat = c.arg("exclude_pat");
    auto note = [&](const std::string& path) {
      if (keep.count(path)) return;
      std::string rel = fs::path(path).lexically_relative(name).generic_string();
      if (!check_include_exclude(rel, nullptr, exclude_pat)) return;
      out.changes[path] = json{{"removed", "Removed due to clean"}};
    };
    for (const auto& level : walk) {
      for (const auto& f : level.files) note(path_join(level.root, f));
      for (const auto& d : level.dirs) note(path_join(level.root, d));
    }
  }
  std::error_code ec;
  if (!fs::is_directory(name, ec)) out.changes[name] = json{{"directory", "new"}};
  if (!out.changes.empty()) {
    std::string comment = "The following files will be changed:\n";
    for (const auto& [path, ch] : out.changes.items()) {
      for (const auto& [k, v] : ch.items()) comment += path + ": " + k + " - " + python_str(v) + "\n";
    }
    out.result = nullptr;
    out.comment = comment;
    return out;
  }
  out.comment = "The directory " + name + " is in the correct state";
  return out;
}

json fail_dir(json ret, const std::string& comment) {
  ret["result"] = false;
  ret["comment"] = comment;
  return ret;
}

}  // namespace
}  // namespace file_states

asio::awaitable<json> file_directory(state_call c) {
  using namespace file_states;
  std::string name = expand_user(c.name());
  json ret = make_ret(name, true, "");
  if (name.empty()) co_return fail_dir(ret, "Must provide name to file.directory");
  // The return keeps the name as given (Salt strips the slash after
  // making its return).
  if (name.back() == '/' && name != "/") name.pop_back();
  bool clean = c.flag("clean");
  std::optional<long long> max_depth;
  if (const json* m = c.arg("max_depth"); m != nullptr && !m->is_null()) {
    if (!m->is_number_integer()) co_return fail_dir(ret, "max_depth must be an integer, got " + python_str(*m));
    max_depth = m->get<long long>();
  }
  if (max_depth && clean) co_return fail_dir(ret, "Cannot specify both max_depth and clean");
  wanted_perms want;
  if (const json* u = c.arg("user"); u != nullptr && base::python_truth(*u)) {
    want.user = *u;
  } else if (const json* o = c.arg("owner"); o != nullptr) {
    want.user = *o;
  }
  if (const json* g = c.arg("group")) want.group = *g;
  json dir_mode = c.low.value("dir_mode", json());
  if (c.arg("mode") != nullptr && !base::python_truth(dir_mode)) dir_mode = *c.arg("mode");
  json file_mode = c.low.value("file_mode", json());
  if (!base::python_truth(file_mode)) file_mode = dir_mode;
  want.mode = normalize_mode(dir_mode);
  std::optional<std::string> fmode = normalize_mode(file_mode);
  if (std::string err = check_user(want, c.test); !err.empty()) co_return fail_dir(ret, err);
  if (name.front() != '/') co_return fail_dir(ret, "Specified file " + name + " is not an absolute path");
  bool force = c.flag("force");
  bool follow = c.flag("follow_symlinks");
  bool children_only = c.flag("children_only");
  std::error_code ec;
  bool is_link = fs::is_symlink(fs::symlink_status(name, ec));
  bool is_file = fs::is_regular_file(name, ec);
  if (is_file || (!c.flag("allow_symlink", true) && is_link) || (force && is_link)) {
    const json* backup = c.arg("backupname");
    if (backup != nullptr && !backup->is_null()) {
      std::string backupname = python_str(*backup);
      if (fs::exists(fs::symlink_status(backupname, ec))) {
        if (!force) co_return fail_dir(ret, "File exists where the backup target " + backupname + " should go");
        if (c.test) {
          ret["changes"]["forced"] = "Existing file at backup path " + backupname + " would be removed";
        } else {
          fs::remove_all(backupname, ec);
        }
      }
      if (c.test) {
        ret["changes"]["backup"] = name + " would be renamed to " + backupname;
        ret["changes"][name] = json{{"directory", "new"}};
        ret["comment"] = name + " would be backed up and replaced with a new directory";
        ret["result"] = nullptr;
        co_return ret;
      }
      if (::rename(name.c_str(), backupname.c_str()) != 0) {
        co_return fail_dir(ret, "Failed to rename " + name + " to " + backupname + ": " + std::strerror(errno));
      }
    } else if (force) {
      const char* what = is_file ? "File" : is_link ? "Symlink" : "Directory";
      if (c.test) {
        ret["changes"]["forced"] = std::string(what) + " would be forcibly replaced";
      } else {
        fs::remove_all(name, ec);
        ret["changes"]["forced"] = std::string(what) + " was forcibly replaced";
      }
    } else if (is_file) {
      co_return fail_dir(ret, "Specified location " + name + " exists and is a file");
    } else {
      co_return fail_dir(ret, "Specified location " + name + " exists and is a symlink");
    }
  }
  recurse_set rs = recurse_set_of(c.arg("recurse"));
  dir_check check;
  if (!rs.error.empty()) {
    check.result = false;
    check.comment = rs.error;
  } else {
    std::set<std::string> keep;
    if (clean) keep = co_await keep_from_requires(c, name);
    check = check_directory(c, name, want, fmode, rs, clean, keep, max_depth, follow, children_only);
  }
  for (const auto& [k, v] : check.changes.items()) ret["changes"][k] = v;
  if (c.test || ret["changes"].empty()) {
    ret["result"] = check.result;
    ret["comment"] = check.comment;
    co_return ret;
  }
  if (!fs::is_directory(name, ec)) {
    fs::path parent = fs::path(name).parent_path();
    if (!fs::is_directory(parent, ec)) {
      if (!c.flag("makedirs")) co_return fail_dir(ret, "No directory to create " + name + " in");
      std::vector<std::string> missing;
      for (fs::path d = parent; !d.empty() && !fs::is_directory(d, ec); d = d.parent_path()) {
        missing.push_back(d.string());
        if (d == d.parent_path()) break;
      }
      for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
        if (::mkdir(it->c_str(), 0777) != 0 && errno != EEXIST) {
          co_return fail_dir(ret, "Failed to create directory " + *it + ": " + std::strerror(errno));
        }
        json ignored = json::object();
        std::vector<std::string> errs;
        check_perms(*it, want, false, false, ignored, errs);
      }
    }
    if (::mkdir(name.c_str(), 0777) != 0) co_return fail_dir(ret, "Failed to create directory " + name);
    json ignored = json::object();
    std::vector<std::string> errs;
    check_perms(name, want, false, false, ignored, errs);
    ret["changes"][name] = json{{"directory", "new"}};
    co_return ret;
  }
  std::vector<std::string> errors;
  if (!children_only) check_perms(name, want, false, follow, ret["changes"], errors);
  if (!rs.items.empty()) {
    wanted_perms sub = want;
    if (rs.items.count("user")) {
      if (!base::python_truth(want.user) && !want.user.is_number_integer()) {
        ret["result"] = false;
        ret["comment"] = "user not specified, but configured as a target for recursive ownership management";
      }
    } else {
      sub.user = nullptr;
    }
    if (rs.items.count("group")) {
      if (!base::python_truth(want.group) && !want.group.is_number_integer()) {
        ret["result"] = false;
        ret["comment"] = "group not specified, but configured as a target for recursive ownership management";
      }
    } else {
      sub.group = nullptr;
    }
    if (!rs.items.count("mode")) {
      sub.mode.reset();
      fmode.reset();
    }
    if (rs.items.count("silent")) ret["changes"] = json{{"recursion", "Changes silenced"}};
    bool check_files = !rs.items.count("ignore_files");
    bool check_dirs = !rs.items.count("ignore_dirs");
    wanted_perms fw = sub;
    fw.mode = fmode;
    for (const auto& level : depth_limited_walk(name, max_depth)) {
      if (check_files) {
        for (const auto& f : level.files) check_perms(path_join(level.root, f), fw, false, follow, ret["changes"], errors);
      }
      if (check_dirs) {
        for (const auto& d : level.dirs) check_perms(path_join(level.root, d), sub, false, follow, ret["changes"], errors);
      }
    }
  }
  if (clean) {
    std::set<std::string> keep = co_await keep_from_requires(c, name);
    std::vector<std::string> removed = clean_tree(name, keep, c.arg("exclude_pat"), false);
    if (!removed.empty()) {
      ret["changes"]["removed"] = removed;
      ret["comment"] = "Files cleaned from directory " + name;
    }
  }
  if (ret["comment"].get<std::string>().empty()) {
    if (children_only) {
      ret["comment"] = "Directory " + name + "/* updated";
    } else if (!ret["changes"].empty()) {
      ret["comment"] = "Directory " + name + " updated";
    }
  }
  if (ret["changes"].empty() && ret["result"] == json(true)) {
    std::string orig = ret["comment"].get<std::string>();
    ret["comment"] = "Directory " + name + " is in the correct state" + (orig.empty() ? "" : "\n" + orig);
  }
  if (!errors.empty()) {
    ret["result"] = false;
    std::string comment = ret["comment"].get<std::string>() + "\n\nThe following errors were encountered:\n";
    for (const auto& e : errors) comment += "\n- " + e;
    ret["comment"] = comment;
  }
  co_return ret;
}

namespace file_states {
namespace {

// Salt's file.accumulated: charges the run's accumulator `name` for
// `filename` with `text`, for that file's file.managed template or
// file.blockreplace, which must require it (require_in/watch_in).
asio::awaitable<json> accumulated(state_call c) {
  std::string name = c.name();
  json ret = make_ret(name, true, "");
  if (name.empty()) co_return fail_dir(ret, "Must provide name to file.accumulated");
  const json* text = c.arg("text");
  if (text == nullptr || text->is_null()) co_return fail_dir(ret, "No text supplied for accumulator");
  json deps = json::array();
  for (const char* key : {"require_in", "watch_in"}) {
    const json* v = c.arg(key);
    if (v == nullptr) continue;
    if (v->is_array()) {
      for (const auto& d : *v) deps.push_back(d);
    } else {
      deps.push_back(*v);
    }
  }
  bool to_file = false;
  for (const auto& d : deps) {
    if ((d.is_object() && d.contains("file")) || (d.is_string() && d.get<std::string>().find("file") != std::string::npos)) {
      to_file = true;
    }
  }
  if (!to_file) {
    co_return fail_dir(ret, "Orphaned accumulator " + name + " in " + python_str(c.low.value("__sls__", json())) + ":" +
                                python_str(c.low.value("__id__", json())));
  }
  if (c.per_run == nullptr) co_return fail_dir(ret, "file.accumulated runs only within a state run");
  std::string filename = python_str(c.low.value("filename", json()));
  json& data = c.per_run->accumulators;
  json& dep_data = c.per_run->accumulator_deps;
  if (!data.contains(filename)) data[filename] = json::object();
  if (!dep_data.contains(filename)) dep_data[filename] = json::object();
  if (!dep_data[filename].contains(name)) dep_data[filename][name] = json::array();
  for (const auto& d : deps) {
    if (d.is_object()) {
      for (const auto& [k, v] : d.items()) dep_data[filename][name].push_back(v);
    } else if (d.is_string()) {
      for (char ch : d.get<std::string>()) dep_data[filename][name].push_back(std::string(1, ch));
    }
  }
  if (!data[filename].contains(name)) data[filename][name] = json::array();
  json& texts = data[filename][name];
  json chunks = text->is_array() ? *text : json::array({*text});
  for (const auto& chunk : chunks) {
    if (std::find(texts.begin(), texts.end(), chunk) != texts.end()) continue;
    texts.push_back(chunk);
    ret["comment"] = "Accumulator " + name + " for file " + filename + " was charged by text";
  }
  co_return ret;
}

// file.managed runs check_cmd itself, on the new text before it lands.
asio::awaitable<json> mod_run_check_cmd(state_call c) { co_return make_ret(c.name()); }

}  // namespace
}  // namespace file_states

void register_file_states(registry& reg) {
  using namespace file_states;
  reg.add("file.managed", file_managed, {"name"},
          "file.managed name=PATH contents=TEXT|source=URL [template=jinja] [mode=0644] "
          "[user=] [group=] [makedirs=False] [replace=True] [contents_newline=True] "
          "[check_cmd=CMD]: the file holds exactly TEXT");
  reg.add("file.directory", file_directory, {"name"},
          "file.directory name=PATH [user=] [group=] [dir_mode=] [file_mode=] [makedirs=False] "
          "[recurse=[user,group,mode,ignore_files,ignore_dirs,silent]] [max_depth=] "
          "[clean=False] [exclude_pat=] [force=False] [backupname=] [allow_symlink=True] "
          "[children_only=False] [follow_symlinks=False]: the directory exists as declared");
  reg.add("file.accumulated", accumulated, {"name", "filename", "text"},
          "file.accumulated name=NAME filename=PATH text=TEXT|[TEXT...] (require_in: the file's "
          "state): TEXT reaches PATH's file.managed template as accumulator[NAME]");
  reg.add("file.mod_run_check_cmd", mod_run_check_cmd, {"name"},
          "file.mod_run_check_cmd: file.managed runs check_cmd on the new text itself");
}

}  // namespace brine::states
