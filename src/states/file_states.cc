// Salt's file states, as far as brine has them: file.managed from
// contents (with mode, makedirs, check_cmd) and file.directory (makedirs,
// mode). Salt's comments and changes; under test nothing is written.

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "base/error.h"
#include "modules/registry.h"
#include "states/registry.h"

namespace brine::states {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A mode as Salt takes it (644, "0644", "644") -> its octal value.
std::optional<mode_t> parse_mode(const json& v) {
  std::string text = v.is_string() ? v.get<std::string>() : v.is_number_integer() ? std::to_string(v.get<long long>()) : "";
  if (text.empty() || text.size() > 5) return std::nullopt;
  mode_t m = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '7') return std::nullopt;
    m = m * 8 + static_cast<mode_t>(ch - '0');
  }
  return m;
}

std::string mode_text(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
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

asio::awaitable<json> managed(state_call c) {
  std::string name = c.name();
  json ret = managed_ret(name);
  if (name.empty()) co_return fail(ret, "Destination file name is required");
  if (name.front() != '/') co_return fail(ret, "Specified file " + name + " is not an absolute path");
  for (const char* unsupported : {"source", "template", "contents_pillar", "contents_grains",
                                  "user", "group", "backup", "replace"}) {
    const json* v = c.arg(unsupported);
    if (v != nullptr && !v->is_null() && !(std::string(unsupported) == "replace" && v->is_boolean() && v->get<bool>())) {
      co_return fail(ret, std::string("file.managed: ") + unsupported + " is not supported by brine yet");
    }
  }
  std::optional<std::string> want = declared_contents(c);
  if (!want) co_return fail(ret, "file.managed: brine needs contents= (source= is not supported yet)");
  std::optional<mode_t> mode;
  if (const json* m = c.arg("mode"); m != nullptr && !m->is_null()) {
    mode = parse_mode(*m);
    if (!mode) co_return fail(ret, "Invalid mode " + (m->is_string() ? m->get<std::string>() : m->dump()));
  }
  std::error_code ec;
  bool exists = fs::exists(name, ec);
  if (exists && fs::is_directory(name, ec)) {
    co_return fail(ret, "Specified target " + name + " is a directory");
  }
  std::optional<std::string> have = exists ? read_file(name) : std::nullopt;
  bool same = have && *have == *want;
  std::optional<mode_t> have_mode;
  if (exists) {
    struct stat st {};
    if (::stat(name.c_str(), &st) == 0) have_mode = st.st_mode & 07777;
  }
  bool mode_differs = mode && have_mode && *have_mode != *mode;
  if (c.test) {
    if (!exists) {
      ret["changes"]["newfile"] = name;
      ret["result"] = nullptr;
      ret["comment"] = "The file " + name +
                       " is set to be changed\nNote: No changes made, actual changes may\nbe "
                       "different due to other states.";
    } else if (same && !mode_differs) {
      ret["comment"] = "The file " + name + " is in the correct state";
    } else {
      if (!same) ret["changes"]["diff"] = "<show_changes=False>";
      if (mode_differs) ret["changes"]["mode"] = mode_text(*mode);
      ret["result"] = nullptr;
      ret["comment"] = "The file " + name +
                       " is set to be changed\nNote: No changes made, actual changes may\nbe "
                       "different due to other states.";
    }
    co_return ret;
  }
  if (same && !mode_differs) {
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
    ret["changes"]["diff"] = exists ? "<show_changes=False>" : "New file";
    if (mode && exists && mode_differs) ret["changes"]["mode"] = mode_text(*mode);
  } else if (mode_differs) {
    ::chmod(name.c_str(), *mode);
    ret["changes"]["mode"] = mode_text(*mode);
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
