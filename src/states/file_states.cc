// Salt's file states, as far as brine has them: file.managed from
// contents (with mode, makedirs, check_cmd) and file.directory (makedirs,
// mode). Salt's comments and changes; under test nothing is written.

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "base/error.h"
#include "fileserver/client.h"
#include "fileserver/path.h"
#include "modules/context.h"
#include "modules/registry.h"
#include "state/bridge.h"
#include "state/highstate.h"
#include "state/state_mod.h"
#include "states/diff.h"
#include "states/file_util.h"
#include "states/registry.h"

namespace brine::states {
namespace {

namespace fs = std::filesystem;

// The `diff` change of a file whose text changes: Salt's unified diff, or
// Salt's placeholder with show_changes: False.
std::string diff_of(const state_call& c, const std::string& before, const std::string& after) {
  if (!c.flag("show_changes", true)) return "<show_changes=False>";
  return get_diff(read_lines(before), read_lines(after));
}

// Salt's file.managed return skeleton: changes, comment, name, result.
json managed_ret(const std::string& name) {
  json r = json::object();
  r["changes"] = json::object();
  r["comment"] = "";
  r["name"] = name;
  r["result"] = true;
  return r;
}

json fail(json ret, const std::string& comment) {
  ret["result"] = false;
  ret["comment"] = comment;
  return ret;
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

// `key` looked up with ':' as Salt's traverse_dict_and_list does.
const json* traverse(const json& data, const std::string& key) {
  const json* at = &data;
  size_t start = 0;
  while (start <= key.size()) {
    size_t colon = key.find(':', start);
    std::string part = key.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (at->is_object()) {
      auto it = at->find(part);
      if (it == at->end()) return nullptr;
      at = &*it;
    } else if (at->is_array()) {
      char* end = nullptr;
      long i = std::strtol(part.c_str(), &end, 10);
      if (end == part.c_str() || *end != '\0' || i < 0 || static_cast<size_t>(i) >= at->size()) return nullptr;
      at = &(*at)[static_cast<size_t>(i)];
    } else {
      return nullptr;
    }
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return at;
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

// A source's text: salt:// through the minion's file client, a local path
// or file://; `missing` when it is not there.
struct fetched {
  std::optional<std::string> text;
  std::string local;
  bool missing = false;
  std::string error;
};

asio::awaitable<fetched> fetch_source(const state_call& c, std::string source, std::string saltenv) {
  fetched out;
  if (auto u = fileserver::parse_url(source)) {
    auto checked = fileserver::check_path(u->path);
    if (!checked.error.empty()) {
      out.error = "Source file " + source + ": " + checked.error;
      co_return out;
    }
    std::string env = u->saltenv.value_or(saltenv);
    if (c.context == nullptr) {
      out.error = "Source file " + source + ": salt:// needs a minion";
      co_return out;
    }
    std::vector<std::string> paths{checked.path};
    auto got = co_await c.context->files().cache(env, std::move(paths));
    if (!got[0].error.empty()) {
      out.missing = true;
      out.error = "Source file " + source + " not found in saltenv '" + env + "'";
      co_return out;
    }
    out.local = got[0].local;
  } else if (source.starts_with("file://") || source.starts_with("/")) {
    out.local = source.starts_with("file://") ? source.substr(7) : source;
    std::error_code ec;
    if (!fs::is_regular_file(out.local, ec)) {
      out.missing = true;
      out.error = "Local file source " + out.local + " does not exist";
      co_return out;
    }
  } else {
    out.error = "Source file " + source +
                ": brine fetches salt://, file:// and local paths; other schemes are not "
                "supported yet";
    co_return out;
  }
  out.text = read_file(out.local);
  if (!out.text) out.error = "Source file " + source + " cannot be read";
  co_return out;
}

// template: jinja over a source, with the state's defaults and context.
asio::awaitable<declared> render_template(const state_call& c, std::string local, std::string saltenv) {
  declared out;
  json ctx = json::object();
  if (const json* d = c.arg("defaults"); d != nullptr && d->is_object()) {
    for (const auto& [k, v] : d->items()) ctx[k] = v;
  }
  if (const json* x = c.arg("context"); x != nullptr && x->is_object()) {
    for (const auto& [k, v] : x->items()) ctx[k] = v;
  }
  std::string sls;
  if (const json* v = c.arg("__sls__"); v != nullptr && v->is_string()) sls = v->get<std::string>();
  if (c.context == nullptr || c.functions == nullptr) {
    out.error = "template: jinja needs a minion";
    co_return out;
  }
  modules::minion_context* mc = c.context;
  const modules::registry* functions = c.functions;
  std::vector<std::string> dirs = mc->files().dirs_of(saltenv);
  auto rendered = std::make_shared<declared>();
  std::function<modules::outcome()> work = [rendered, mc, functions, local, saltenv, sls, ctx,
                                            dirs]() {
    try {
      state::options o = state::options::from_opts(mc->opts());
      if (mc->files().remote()) o.file_roots = {{saltenv, dirs}};
      auto comp = std::make_unique<state::compiler>(o, state::minion_of(*mc));
      comp->set_salt(state::make_salt(*comp, *functions, mc));
      rendered->text = comp->render_file(local, saltenv, sls, nlohmann::json::parse(ctx.dump()));
    } catch (const std::exception& e) {
      rendered->error = std::string("Unable to manage file: ") + e.what();
    }
    return modules::outcome{};
  };
  co_await state::on_pool(std::move(work));
  out = std::move(*rendered);
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
    const json* v = traverse(*data, path);
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
  std::vector<std::string> sources;
  if (source->is_array()) {
    for (const auto& s : *source) {
      // A source list item may be {url: source_hash}.
      if (s.is_object() && !s.empty()) {
        sources.push_back(s.begin().key());
      } else {
        sources.push_back(as_text(s));
      }
    }
  } else {
    sources.push_back(as_text(*source));
  }
  std::string saltenv = saltenv_of(c);
  fetched got;
  bool found = false;
  for (const auto& s : sources) {
    got = co_await fetch_source(c, s, saltenv);
    if (got.text) {
      found = true;
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
  const json* tmpl = c.arg("template");
  if (tmpl == nullptr || tmpl->is_null()) {
    out.text = std::move(got.text);
    co_return out;
  }
  std::string kind = as_text(*tmpl);
  if (kind != "jinja") {
    out.error = "Specified template format " + kind + " is not supported";
    co_return out;
  }
  declared r = co_await render_template(c, got.local, saltenv);
  r.from_source = true;
  co_return r;
}

// user= and group= as ids; `error` names one that does not exist.
struct owner {
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  std::string error;
};

owner owner_of(const state_call& c) {
  owner o;
  if (const json* u = c.arg("user"); u != nullptr && !u->is_null()) {
    std::string name = as_text(*u);
    if (struct passwd* pw = ::getpwnam(name.c_str())) {
      o.uid = pw->pw_uid;
    } else {
      o.error = "User " + name + " is not available";
    }
  }
  if (const json* g = c.arg("group"); g != nullptr && !g->is_null()) {
    std::string name = as_text(*g);
    if (struct group* gr = ::getgrnam(name.c_str())) {
      o.gid = gr->gr_gid;
    } else {
      if (!o.error.empty()) o.error += "\n";
      o.error += "Group " + name + " is not available";
    }
  }
  return o;
}

asio::awaitable<json> managed(state_call c) {
  std::string name = c.name();
  json ret = managed_ret(name);
  if (name.empty()) co_return fail(ret, "Destination file name is required");
  if (name.front() != '/') co_return fail(ret, "Specified file " + name + " is not an absolute path");
  for (const char* unsupported : {"backup"}) {
    const json* v = c.arg(unsupported);
    if (v != nullptr && !v->is_null() && !(v->is_string() && v->get<std::string>().empty())) {
      co_return fail(ret, std::string("file.managed: ") + unsupported + " is not supported by brine yet");
    }
  }
  owner own = owner_of(c);
  if (!own.error.empty()) co_return fail(ret, own.error);
  std::error_code ec;
  bool exists = fs::exists(name, ec);
  // replace: False leaves an existing file's contents alone (its mode and
  // owner are still managed).
  if (exists && !c.flag("replace", true) && !fs::is_directory(name, ec)) {
    ret["comment"] = c.test ? "File " + name + " not updated"
                            : "File " + name + " exists with proper permissions. No changes made.";
    co_return ret;
  }
  declared d = co_await declared_text(c);
  if (!d.error.empty()) co_return fail(ret, d.error);
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
    if (!mode) co_return fail(ret, "Invalid mode " + (m->is_string() ? m->get<std::string>() : m->dump()));
  }
  if (exists && fs::is_directory(name, ec)) {
    co_return fail(ret, "Specified target " + name + " is a directory");
  }
  std::optional<std::string> have = exists ? read_file(name) : std::nullopt;
  bool same = have && *have == *want;
  std::optional<mode_t> have_mode;
  struct stat st {};
  bool have_stat = exists && ::stat(name.c_str(), &st) == 0;
  if (have_stat) have_mode = st.st_mode & 07777;
  bool mode_differs = mode && have_mode && *have_mode != *mode;
  bool user_differs = own.uid && have_stat && st.st_uid != *own.uid;
  bool group_differs = own.gid && have_stat && st.st_gid != *own.gid;
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
  fs::path parent = fs::path(name).parent_path();
  if (!fs::is_directory(parent, ec)) {
    if (!c.flag("makedirs")) co_return fail(ret, "Parent directory not present");
    fs::create_directories(parent, ec);
    if (ec) co_return fail(ret, "Failed to create directory " + parent.string() + ": " + ec.message());
  }
  if (!same) {
    // Written beside the file and checked (check_cmd) before it replaces it.
    std::string tmp = name + ".brine-tmp-" + std::to_string(::getpid());
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << *want;
      if (!out) {
        std::error_code rm;
        fs::remove(tmp, rm);
        co_return fail(ret, "Unable to write " + name + ": " + std::strerror(errno));
      }
    }
    if (const json* check = c.arg("check_cmd"); check != nullptr && !check->is_null()) {
      std::string command = (check->is_string() ? check->get<std::string>() : check->dump()) + " " + tmp;
      int rc = co_await c.retcode(command, json::object(), 1);
      if (rc != 0) {
        std::error_code rm;
        fs::remove(tmp, rm);
        ret["comment"] = "check_cmd execution failed";
        ret["skip_watch"] = true;
        ret["result"] = false;
        co_return ret;
      }
    }
    // A new file keeps the mode it was created with (0666 less the umask),
    // a replaced one its old mode, unless mode= says otherwise.
    if (mode || have_mode) ::chmod(tmp.c_str(), mode ? *mode : *have_mode);
    if (::rename(tmp.c_str(), name.c_str()) != 0) {
      std::error_code rm;
      fs::remove(tmp, rm);
      co_return fail(ret, "Unable to replace " + name + ": " + std::strerror(errno));
    }
    if (own.uid || own.gid) {
      if (::chown(name.c_str(), own.uid ? *own.uid : static_cast<uid_t>(-1),
                  own.gid ? *own.gid : static_cast<gid_t>(-1)) != 0) {
        co_return fail(ret, "Failed to change ownership of " + name + ": " + std::strerror(errno));
      }
    }
    ret["changes"]["diff"] = exists ? diff_of(c, have.value_or(""), *want) : "New file";
    note_owner();
    if (mode && (!exists || mode_differs)) {
      ret["changes"]["mode"] = mode_text(*mode);
    } else if (!exists && d.from_source) {
      // Salt reports the mode a new file from a source got (0644 under
      // the usual umask).
      struct stat now {};
      if (::stat(name.c_str(), &now) == 0) ret["changes"]["mode"] = mode_text(now.st_mode & 07777);
    }
  } else {
    if (own.uid || own.gid) {
      if (::chown(name.c_str(), own.uid ? *own.uid : static_cast<uid_t>(-1),
                  own.gid ? *own.gid : static_cast<gid_t>(-1)) != 0) {
        co_return fail(ret, "Failed to change ownership of " + name + ": " + std::strerror(errno));
      }
      note_owner();
    }
    if (mode_differs) {
      ::chmod(name.c_str(), *mode);
      ret["changes"]["mode"] = mode_text(*mode);
    }
  }
  ret["comment"] = "File " + name + " updated";
  co_return ret;
}

asio::awaitable<json> directory(state_call c) {
  std::string name = c.name();
  json ret = make_ret(name, true, "");
  if (name.empty() || name.front() != '/') {
    ret["result"] = false;
    ret["comment"] = "Specified file " + name + " is not an absolute path";
    co_return ret;
  }
  std::error_code ec;
  if (fs::is_directory(name, ec)) {
    ret["comment"] = "The directory " + name + " is in the correct state";
    co_return ret;
  }
  if (fs::exists(name, ec)) {
    ret["result"] = false;
    ret["comment"] = "Specified location " + name + " exists and is a file";
    co_return ret;
  }
  json change = json::object();
  change["directory"] = "new";
  if (c.test) {
    ret["changes"][name] = change;
    ret["result"] = nullptr;
    ret["comment"] = "The following files will be changed:\n" + name + ": directory - new\n";
    co_return ret;
  }
  fs::path parent = fs::path(name).parent_path();
  if (!fs::is_directory(parent, ec) && !c.flag("makedirs")) {
    ret["result"] = false;
    ret["comment"] = "No directory to create " + name + " in";
    co_return ret;
  }
  fs::create_directories(name, ec);
  if (ec) {
    ret["result"] = false;
    ret["comment"] = "Failed to create directory " + name + ": " + ec.message();
    co_return ret;
  }
  if (const json* m = c.arg("dir_mode"); m != nullptr && !m->is_null()) {
    if (auto mode = parse_mode(*m)) ::chmod(name.c_str(), *mode);
  }
  ret["changes"][name] = change;
  co_return ret;
}

// file.managed runs check_cmd itself, on the new text before it lands.
asio::awaitable<json> mod_run_check_cmd(state_call c) { co_return make_ret(c.name()); }

}  // namespace

void register_file_states(registry& reg) {
  reg.add("file.managed", managed, {"name"},
          "file.managed name=PATH contents=TEXT [mode=0644] [makedirs=False] "
          "[contents_newline=True] [check_cmd=CMD]: the file holds exactly TEXT (source= and "
          "template= are not in brine yet)");
  reg.add("file.directory", directory, {"name"},
          "file.directory name=PATH [makedirs=False] [dir_mode=]: the directory exists");
  reg.add("file.mod_run_check_cmd", mod_run_check_cmd, {"name"},
          "file.mod_run_check_cmd: file.managed runs check_cmd on the new text itself");
}

}  // namespace brine::states
