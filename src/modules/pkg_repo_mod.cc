// The pkg module's apt sources functions (Salt's aptpkg list_repos,
// get_repo, mod_repo, del_repo): one-line sources in the file apt names
// Dir::Etc::SourceList (/etc/apt/sources.list) and the *.list files of
// Dir::Etc::SourceParts (/etc/apt/sources.list.d). Salt reads those two
// paths; brine asks apt-config, so APT_CONFIG moves both, as it moves apt.

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "modules/apt.h"
#include "modules/apt_sources.h"
#include "modules/args.h"
#include "modules/arguments.h"
#include "modules/registry.h"

namespace brine::modules {
namespace pkg_repo_mod {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

struct source_paths {
  std::string list = "/etc/apt/sources.list";
  std::string parts = "/etc/apt/sources.list.d";
};

// apt-config shell prints "L='/etc/apt/sources.list'" lines, the /f and /d
// suffixes resolving a file and a directory against Dir and Dir::Etc.
asio::awaitable<source_paths> find_source_paths(std::chrono::seconds limit) {
  std::vector<std::string> argv = {"apt-config", "shell", "L", "Dir::Etc::SourceList/f",
                                   "P", "Dir::Etc::SourceParts/d"};
  process_result r = co_await apt::run_tool(limit, std::move(argv));
  source_paths out;
  if (r.retcode != 0) co_return out;
  std::istringstream lines(r.stdout_text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.size() < 4 || line[1] != '=' || line[2] != '\'' || line.back() != '\'') continue;
    std::string value = line.substr(3, line.size() - 4);
    if (value.empty()) continue;
    if (line[0] == 'L') out.list = value;
    if (line[0] == 'P') {
      while (value.size() > 1 && value.back() == '/') value.pop_back();
      out.parts = value;
    }
  }
  co_return out;
}

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every line of the sources files, the list file first, then the parts'
// *.list in name order.
struct sources {
  source_paths paths;
  std::vector<apt::source_entry> entries;
};

sources read_sources(const source_paths& paths) {
  sources out{paths, {}};
  auto add = [&out](const std::string& file) {
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) return;
    std::optional<std::string> text = read_text(file);
    if (!text) throw tool_failure("cannot read " + file + ": " + std::strerror(errno));
    for (auto& e : apt::parse_file(*text, file)) out.entries.push_back(std::move(e));
  };
  add(paths.list);
  std::vector<std::string> parts;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(paths.parts, ec)) {
    if (d.path().extension() == ".list") parts.push_back(d.path().string());
  }
  std::sort(parts.begin(), parts.end());
  for (const auto& p : parts) add(p);
  return out;
}

// Rewrites `file` from the entries that belong to it (Salt's
// SourcesList.save, limited to the files a change touched), atomically.
void save_file(const sources& s, const std::string& file) {
  std::string text;
  for (const auto& e : s.entries) {
    if (e.file != file) continue;
    text += (e.invalid ? e.line : e.render()) + "\n";
  }
  fs::path target(file);
  std::error_code ec;
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  std::string tmp = file + ".brine-tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) throw tool_failure("cannot write " + tmp + ": " + std::strerror(errno));
  }
  struct stat st {};
  ::chmod(tmp.c_str(), ::stat(file.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0644);
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw tool_failure("cannot replace " + file + ": " + std::strerror(err));
  }
}

std::string rstrip_slash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

json repo_json(const apt::source_entry& e) {
  return json{{"file", e.file},   {"comps", e.comps},           {"disabled", e.disabled},
              {"dist", e.dist},   {"type", e.type},             {"uri", e.uri},
              {"line", trim(e.line)}, {"architectures", e.architectures},
              {"signedby", e.signedby}};
}

asio::awaitable<outcome> list_repos(call c) {
  arguments a("pkg.list_repos", c, {});
  source_paths paths = co_await find_source_paths(c.timeout);
  sources s = read_sources(paths);
  json ret = json::object();
  for (const auto& e : s.entries) {
    if (e.invalid) continue;
    ret[e.uri].push_back(repo_json(e));
  }
  co_return outcome{std::move(ret)};
}

// Salt's get_repo: the first source of the same type, URI (trailing
// slashes aside) and dist that shares a component (any, when `repo` names
// none).
const apt::source_entry* find_repo(const sources& s, const apt::source_entry& want) {
  for (const auto& e : s.entries) {
    if (e.invalid || e.type != want.type || rstrip_slash(e.uri) != rstrip_slash(want.uri) ||
        e.dist != want.dist) {
      continue;
    }
    if (want.comps.empty()) return &e;
    for (const auto& comp : want.comps) {
      if (std::find(e.comps.begin(), e.comps.end(), comp) != e.comps.end()) return &e;
    }
  }
  return nullptr;
}

std::string repo_arg(const arguments& a) {
  std::string repo = a.text_of("repo", a.need("repo"));
  if (repo.find('\n') != std::string::npos) a.fail("repo must be one line, got '" + repo + "'");
  return repo;
}

asio::awaitable<outcome> get_repo(call c) {
  arguments a("pkg.get_repo", c, {"repo", "ppa_auth"});
  std::string repo = repo_arg(a);
  source_paths paths = co_await find_source_paths(c.timeout);
  sources s = read_sources(paths);
  const apt::source_entry* e = find_repo(s, apt::parse_line(repo));
  co_return outcome{e == nullptr ? json::object() : repo_json(*e)};
}

// A list argument: "a,b" (Salt's form) or a list.
std::vector<std::string> list_arg(const arguments& a, const std::string& what, const json& v) {
  if (v.is_array()) {
    std::vector<std::string> out;
    for (const auto& item : v) out.push_back(trim(a.text_of(what, item)));
    return out;
  }
  return apt::split_list(a.text_of(what, v));
}

// Salt's salt.utils.pkg.deb.combine_comments.
std::string combine_comments(const arguments& a, const json& v) {
  if (!v.is_array()) return trim(a.text_of("comments", v));
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    out += (i ? " " : "") + (v[i].is_string() ? v[i].get<std::string>() : v[i].dump());
  }
  return trim(out);
}

// A key from key_url (a local path or file://, the state having fetched
// salt:// with cp.cache_file): with apt-key when `aptkey`, else copied to
// the signed-by keyring path.
asio::awaitable<void> add_key(std::chrono::seconds limit, std::string key_url, bool aptkey,
                              std::string signedby) {
  std::string path = key_url.starts_with("file://") ? key_url.substr(7) : key_url;
  if (path.empty() || path.front() != '/') {
    throw tool_failure("Error: file not found: " + key_url +
                       " (brine takes keys from salt://, file:// or a local path)");
  }
  std::optional<std::string> key = read_text(path);
  if (!key) throw tool_failure("Error: file not found: " + key_url);
  if (aptkey) {
    std::vector<std::string> argv = {"apt-key", "add", path};
    process_result r = co_await apt::run_tool(limit, std::move(argv));
    if (!trim(r.stdout_text).starts_with("OK")) {
      throw tool_failure("Error: failed to add key from " + key_url);
    }
    co_return;
  }
  if (signedby.empty()) throw tool_failure("Error: Could not add key: " + path);
  std::optional<std::string> current = read_text(signedby);
  if (current && *current == *key) co_return;
  std::error_code ec;
  fs::create_directories(fs::path(signedby).parent_path(), ec);
  std::ofstream out(signedby, std::ios::binary | std::ios::trunc);
  out << *key;
  if (!out.flush()) throw tool_failure("Error: Could not add key: " + signedby);
  ::chmod(signedby.c_str(), 0644);
}

asio::awaitable<outcome> mod_repo(call c) {
  arguments a("pkg.mod_repo", c,
              {"repo", "saltenv", "aptkey", "comps", "architectures", "disabled", "enabled",
               "file", "comments", "refresh", "refresh_db", "key_url", "uri", "dist"});
  const std::string repo = repo_arg(a);
  bool aptkey = a.flag("aptkey", true);
  if (::access("/usr/bin/apt-key", X_OK) != 0) aptkey = false;
  const bool do_refresh =
      a.get("refresh_db") != nullptr ? a.flag("refresh_db", true) : a.flag("refresh", true);

  apt::source_entry want = apt::parse_line(repo);
  // (Salt's SaltInvocationError messages, which pkgrepo.managed quotes.)
  if (want.invalid) {
    throw tool_failure("Name " + repo +
                       " is not valid. This must be the complete repo entry as seen in the "
                       "sources file");
  }
  if (!aptkey && want.signedby.empty()) {
    throw tool_failure("missing 'signedby' option when apt-key is missing");
  }
  std::optional<std::string> file = a.text("file");
  if (file && (file->empty() || file->front() != '/')) {
    a.fail("file must be an absolute path, got '" + *file + "'");
  }
  std::vector<std::string> comps = want.comps;
  if (const json* v = a.get("comps")) comps = list_arg(a, "comps", *v);
  std::set<std::string> full_comps(want.comps.begin(), want.comps.end());
  full_comps.insert(comps.begin(), comps.end());
  std::vector<std::string> archs = want.architectures;
  if (const json* v = a.get("architectures")) archs = list_arg(a, "architectures", *v);
  std::optional<bool> disabled;
  if (const json* v = a.get("disabled")) {
    disabled = is_true(*v);
  } else if (const json* e = a.get("enabled")) {
    disabled = !is_true(*e);
  }
  std::optional<std::string> comments;
  if (const json* v = a.get("comments")) comments = combine_comments(a, *v);
  std::optional<std::string> uri = a.text("uri");
  std::optional<std::string> dist = a.text("dist");

  if (std::optional<std::string> key_url = a.text("key_url")) {
    co_await add_key(c.timeout, *key_url, aptkey, want.signedby);
  }

  source_paths paths = co_await find_source_paths(c.timeout);
  sources s = read_sources(paths);
  apt::source_entry* mod = nullptr;
  for (auto& e : s.entries) {
    if (e.invalid || e.type != want.type || rstrip_slash(e.uri) != rstrip_slash(want.uri) ||
        e.dist != want.dist) {
      continue;
    }
    for (const auto& comp : full_comps) {
      if (std::find(e.comps.begin(), e.comps.end(), comp) != e.comps.end()) mod = &e;
    }
    if (e.comps.empty() || archs != e.architectures) mod = &e;
    if (mod != nullptr) break;
  }
  std::set<std::string> touched;
  if (mod == nullptr) {
    apt::source_entry fresh = apt::parse_line(repo, paths.list);
    s.entries.push_back(std::move(fresh));
    mod = &s.entries.back();
  }
  touched.insert(mod->file);
  if (comments) mod->comment = *comments;
  mod->line = repo;
  mod->comps = comps;
  mod->architectures = archs;
  if (disabled) mod->disabled = *disabled;
  if (file) mod->file = *file;
  mod->signedby = want.signedby;
  mod->uri = uri.value_or(want.uri);
  if (dist) mod->dist = *dist;
  touched.insert(mod->file);
  const json ret_repo = {{"architectures", mod->architectures},
                         {"comps", mod->comps},
                         {"disabled", mod->disabled},
                         {"file", mod->file},
                         {"type", mod->type},
                         {"uri", mod->uri},
                         {"line", repo + "\n"},
                         {"signedby", want.signedby}};
  for (const auto& f : touched) save_file(s, f);
  if (do_refresh) co_await apt::refresh(c.timeout, 0, false);
  co_return outcome{json{{repo, ret_repo}}};
}

asio::awaitable<outcome> del_repo(call c) {
  arguments a("pkg.del_repo", c, {"repo", "refresh"});
  const std::string repo = repo_arg(a);
  const bool do_refresh = a.flag("refresh", true);
  apt::source_entry want = apt::parse_line(repo);
  source_paths paths = co_await find_source_paths(c.timeout);
  sources s = read_sources(paths);
  std::map<std::string, int> deleted_from;
  std::vector<apt::source_entry> kept;
  for (auto& e : s.entries) {
    if (!e.invalid && e.type == want.type && e.architectures == want.architectures &&
        rstrip_slash(e.uri) == rstrip_slash(want.uri) && e.dist == want.dist) {
      bool shared = std::any_of(want.comps.begin(), want.comps.end(), [&](const std::string& x) {
        return std::find(e.comps.begin(), e.comps.end(), x) != e.comps.end();
      });
      if (shared || (e.comps.empty() && want.comps.empty())) {
        deleted_from[e.file] = 0;
        std::erase_if(e.comps, [&](const std::string& x) {
          return std::find(want.comps.begin(), want.comps.end(), x) != want.comps.end();
        });
        if (e.comps.empty()) continue;
      }
    }
    kept.push_back(std::move(e));
  }
  if (deleted_from.empty()) throw tool_failure("Repo " + repo + " doesn't exist in the sources.list(s)");
  s.entries = std::move(kept);
  for (const auto& e : s.entries) {
    if (deleted_from.contains(e.file)) ++deleted_from[e.file];
  }
  std::string ret;
  for (const auto& [file, count] : deleted_from) {
    if (count == 0 && fs::path(file).parent_path() == fs::path(paths.parts)) {
      std::error_code ec;
      fs::remove(file, ec);
      ret += "File " + file + " containing repo '" + repo + "' has been removed.";
    } else {
      save_file(s, file);
      ret += "Repo '" + repo + "' has been removed from " + file + ".\n";
    }
  }
  if (do_refresh) co_await apt::refresh(c.timeout, 0, false);
  co_return outcome{ret};
}

}  // namespace
}  // namespace pkg_repo_mod

void register_pkg_repo_module(registry& reg) {
  using namespace pkg_repo_mod;
  reg.add("pkg.list_repos", failures_as_outcomes<list_repos>,
          "pkg.list_repos: the apt sources (sources.list and sources.list.d/*.list, where apt's "
          "configuration puts them) as {uri: [{file, comps, disabled, dist, type, uri, line, "
          "architectures, signedby}]}.\n"
          "CLI Example: brine cmd '*' pkg.list_repos");
  reg.add("pkg.get_repo", failures_as_outcomes<get_repo>,
          "pkg.get_repo REPO: the source matching the complete line REPO (type, URI, dist and a "
          "shared component), as list_repos describes one; {} when there is none.\n"
          "CLI Example: brine cmd '*' pkg.get_repo 'deb http://deb.debian.org/debian bookworm "
          "main'");
  reg.add("pkg.mod_repo", failures_as_outcomes<mod_repo>,
          "pkg.mod_repo REPO [file=] [comps=a,b] [architectures=a,b] [disabled=|enabled=] "
          "[comments=] [key_url=] [aptkey=True] [refresh=True]: adds the source line REPO, or "
          "changes the source it matches, writes its file and runs apt-get update; returns "
          "{REPO: {architectures, comps, disabled, file, type, uri, line, signedby}}.\n"
          "CLI Example: brine cmd '*' pkg.mod_repo 'deb http://deb.debian.org/debian "
          "bookworm-backports main' file=/etc/apt/sources.list.d/backports.list");
  reg.add("pkg.del_repo", failures_as_outcomes<del_repo>,
          "pkg.del_repo REPO [refresh=True]: removes the source line REPO (its components from "
          "a line that has others; a sources.list.d file left empty is deleted) and runs "
          "apt-get update; returns what was removed from where.\n"
          "CLI Example: brine cmd '*' pkg.del_repo 'deb http://deb.debian.org/debian "
          "bookworm-backports main'");
}

}  // namespace brine::modules
