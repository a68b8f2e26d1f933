// Salt's cp module: salt:// files through the minion's file client (the
// master's file server, or file_roots when masterless): list_states,
// list_master, list_master_dirs, envs, hash_file, cache_file, cache_files,
// is_cached, get_file, get_file_str, get_dir. Many files travel in one
// request; a file already cached with the master's hash is not fetched.

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "fileserver/client.h"
#include "fileserver/path.h"
#include "fileserver/roots.h"
#include "modules/arguments.h"
#include "modules/context.h"
#include "modules/data.h"
#include "modules/registry.h"
#include "modules/url_cache.h"

namespace brine::modules {

namespace cp_mod {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Salt 3005+: saltenv defaults to the minion's `saltenv` option, else base.
std::string saltenv_of(const arguments& a, const call& c) {
  if (auto v = a.text("saltenv"); v && !v->empty()) return *v;
  const json& opts = need_context(c).opts();
  if (auto it = opts.find("saltenv"); it != opts.end() && it->is_string() && !it->empty()) {
    return it->get<std::string>();
  }
  return "base";
}

// A salt:// source (its saltenv query wins over `saltenv`), checked.
struct source {
  std::string path;
  std::string saltenv;
};
source source_of(const arguments& a, const std::string& what, const json& v,
                 const std::string& saltenv) {
  std::string text = a.text_of(what, v);
  auto u = fileserver::parse_url(text);
  if (!u) {
    throw base::error(a.fun() + ": " + what + " must be a salt:// URL, got '" + text + "'");
  }
  auto checked = fileserver::check_path(u->path);
  if (!checked.error.empty()) {
    throw base::error(a.fun() + ": " + text + ": " + checked.error);
  }
  std::string env = u->saltenv.value_or(saltenv);
  if (!fileserver::valid_saltenv(env)) throw base::error(a.fun() + ": invalid saltenv '" + env + "'");
  return {checked.path, env};
}

void refuse_template(const arguments& a) {
  if (const json* t = a.get("template"); t != nullptr && !t->is_null()) {
    throw base::error(a.fun() + ": template= is not supported by brine yet; render with "
                                "file.managed's template: jinja instead");
  }
}

// Copies `from` to `dest` unless dest already holds the same bytes (by
// hash); false when it cannot be written.
bool put_file(const std::string& from, const std::string& hash, const std::string& dest) {
  if (fileserver::hash_file(dest).value_or("") == hash) return true;
  std::string part = dest + ".brine-part";
  std::error_code ec;
  fs::copy_file(from, part, fs::copy_options::overwrite_existing, ec);
  if (ec) return false;
  if (::rename(part.c_str(), dest.c_str()) != 0) {
    ::unlink(part.c_str());
    return false;
  }
  return true;
}

asio::awaitable<outcome> cp_envs(call c) {
  arguments a("cp.envs", c, {});
  auto envs = co_await need_context(c).files().envs();
  co_return outcome{json(envs)};
}

asio::awaitable<outcome> cp_list_master(call c) {
  arguments a("cp.list_master", c, {"saltenv", "prefix"});
  std::string env = saltenv_of(a, c);
  std::string prefix = a.scalar_text("prefix", "");
  auto m = co_await need_context(c).files().list(env);
  json out = json::array();
  for (const auto& e : m->files) {
    if (e.path.starts_with(prefix)) out.push_back(e.path);
  }
  co_return outcome{out};
}

asio::awaitable<outcome> cp_list_master_dirs(call c) {
  arguments a("cp.list_master_dirs", c, {"saltenv", "prefix"});
  std::string env = saltenv_of(a, c);
  std::string prefix = a.scalar_text("prefix", "");
  auto m = co_await need_context(c).files().list(env);
  json out = json::array();
  for (const auto& d : m->dirs) {
    if (d.starts_with(prefix)) out.push_back(d);
  }
  co_return outcome{out};
}

asio::awaitable<outcome> cp_list_states(call c) {
  arguments a("cp.list_states", c, {"saltenv"});
  std::string env = saltenv_of(a, c);
  auto m = co_await need_context(c).files().list(env);
  std::set<std::string> states;
  for (const auto& e : m->files) {
    if (!e.path.ends_with(".sls")) continue;
    std::string dotted = e.path;
    std::replace(dotted.begin(), dotted.end(), '/', '.');
    states.insert(e.path.ends_with("/init.sls") ? dotted.substr(0, dotted.size() - 9)
                                                : dotted.substr(0, dotted.size() - 4));
  }
  co_return outcome{json(states)};
}

asio::awaitable<outcome> cp_hash_file(call c) {
  arguments a("cp.hash_file", c, {"path", "saltenv"});
  std::string text = a.text_of("path", a.need("path"));
  if (!text.starts_with("salt://")) {
    // Salt hashes a local path in place.
    auto h = fileserver::hash_file(text);
    co_return outcome{h ? json{{"hsum", *h}, {"hash_type", "sha256"}} : json::object()};
  }
  source s = source_of(a, "path", a.need("path"), saltenv_of(a, c));
  auto m = co_await need_context(c).files().list(s.saltenv);
  const fileserver::entry* e = m->find(s.path);
  co_return outcome{e ? json{{"hsum", e->hash}, {"hash_type", "sha256"}} : json::object()};
}

asio::awaitable<outcome> cp_cache_files(call c) {
  arguments a("cp.cache_files", c, {"paths", "saltenv"});
  const json& given = a.need("paths");
  std::vector<json> items;
  if (given.is_array()) {
    items.assign(given.begin(), given.end());
  } else {
    // Salt takes a comma-separated string too.
    std::stringstream in(a.text_of("paths", given));
    for (std::string p; std::getline(in, p, ',');) items.emplace_back(p);
  }
  std::string env = saltenv_of(a, c);
  // One saltenv per request: group by it, keep the order of the answer.
  std::map<std::string, std::vector<std::pair<size_t, std::string>>> by_env;
  json out = json::array();
  for (size_t i = 0; i < items.size(); ++i) {
    source s = source_of(a, "paths", items[i], env);
    by_env[s.saltenv].emplace_back(i, s.path);
    out.push_back(false);
  }
  auto& files = need_context(c).files();
  for (auto& [e, wanted] : by_env) {
    std::vector<std::string> paths;
    for (const auto& w : wanted) paths.push_back(w.second);
    auto got = co_await files.cache(e, std::move(paths));
    for (size_t k = 0; k < got.size(); ++k) {
      if (got[k].error.empty()) out[wanted[k].first] = got[k].local;
    }
  }
  co_return outcome{out};
}

asio::awaitable<outcome> cp_cache_file(call c) {
  arguments a("cp.cache_file", c, {"path", "saltenv", "source_hash", "verify_ssl", "use_etag"});
  std::string text = a.text_of("path", a.need("path"));
  if (is_remote_url(text)) {
    const json* hash = a.get("source_hash");
    std::string want = hash != nullptr && !hash->is_null() ? a.text_of("source_hash", *hash) : "";
    std::string env = saltenv_of(a, c);
    std::string local = co_await cache_url(need_context(c).opts(), text, env, want,
                                           a.flag("verify_ssl", true));
    co_return outcome{local};
  }
  if (!text.starts_with("salt://")) {
    // Salt answers a local path as it is when the file is there.
    std::error_code ec;
    std::string local = text.starts_with("file://") ? text.substr(7) : text;
    co_return outcome{fs::is_regular_file(local, ec) ? json(local) : json(false)};
  }
  source s = source_of(a, "path", a.need("path"), saltenv_of(a, c));
  std::vector<std::string> paths{s.path};
  auto got = co_await need_context(c).files().cache(s.saltenv, std::move(paths));
  co_return outcome{got[0].error.empty() ? json(got[0].local) : json(false)};
}

asio::awaitable<outcome> cp_is_cached(call c) {
  arguments a("cp.is_cached", c, {"path", "saltenv"});
  if (std::string text = a.text_of("path", a.need("path")); is_remote_url(text)) {
    co_return outcome{cached_url(need_context(c).opts(), saltenv_of(a, c), text)};
  }
  source s = source_of(a, "path", a.need("path"), saltenv_of(a, c));
  auto& files = need_context(c).files();
  if (!files.remote()) {
    // Masterless: the roots are the cache.
    std::vector<std::string> paths{s.path};
    auto got = co_await files.cache(s.saltenv, std::move(paths));
    co_return outcome{got[0].error.empty() ? json(got[0].local) : json("")};
  }
  std::string local = need_context(c).opts().value("cachedir", "") + "/files/" + s.saltenv + "/" +
                      s.path;
  std::error_code ec;
  co_return outcome{fs::is_regular_file(local, ec) ? json(local) : json("")};
}

asio::awaitable<outcome> cp_get_file_str(call c) {
  arguments a("cp.get_file_str", c, {"path", "saltenv"});
  source s = source_of(a, "path", a.need("path"), saltenv_of(a, c));
  std::vector<std::string> paths{s.path};
  auto got = co_await need_context(c).files().cache(s.saltenv, std::move(paths));
  if (!got[0].error.empty()) co_return outcome{false};
  std::ifstream in(got[0].local, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  std::string bytes = std::move(text).str();
  // The cache holds one copy per path: another job may have put a newer
  // revision's bytes there since the listing this call (or its state run)
  // works from. Those bytes are never given as this listing's.
  if (need_context(c).files().remote() && fileserver::hash_bytes(bytes) != got[0].hash) {
    throw base::error("cp.get_file_str: salt://" + s.path + "?saltenv=" + s.saltenv +
                      " changed in this minion's file cache while it was read (another job "
                      "fetched a newer revision of the master's files); run it again");
  }
  co_return outcome{std::move(bytes)};
}

asio::awaitable<outcome> cp_get_file(call c) {
  arguments a("cp.get_file", c, {"path", "dest", "saltenv", "makedirs", "template", "gzip"});
  refuse_template(a);
  source s = source_of(a, "path", a.need("path"), saltenv_of(a, c));
  std::string dest = a.text_of("dest", a.need("dest"));
  std::error_code ec;
  // Salt 2018.3: a directory as dest gets the file under its own name.
  if (fs::is_directory(dest, ec)) dest = (fs::path(dest) / fs::path(s.path).filename()).string();
  fs::path parent = fs::path(dest).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec)) {
    if (!a.flag("makedirs", false)) co_return outcome{""};
    fs::create_directories(parent, ec);
  }
  std::vector<std::string> paths{s.path};
  auto got = co_await need_context(c).files().cache(s.saltenv, std::move(paths));
  if (!got[0].error.empty() || !put_file(got[0].local, got[0].hash, dest)) co_return outcome{""};
  co_return outcome{dest};
}

asio::awaitable<outcome> cp_get_dir(call c) {
  arguments a("cp.get_dir", c, {"path", "dest", "saltenv", "template", "gzip"});
  refuse_template(a);
  source s = source_of(a, "path", a.need("path"), saltenv_of(a, c));
  std::string dest = a.text_of("dest", a.need("dest"));
  // Salt: the last directory of `path` is created under dest, with what
  // it holds.
  std::string dir = s.path;
  while (dir.ends_with("/")) dir.pop_back();
  std::string prefix = dir.find('/') == std::string::npos ? "" : dir.substr(0, dir.rfind('/'));
  auto& files = need_context(c).files();
  auto m = co_await files.list(s.saltenv);
  std::vector<std::string> wanted;
  for (const auto& e : m->files) {
    if (e.path.size() > dir.size() && e.path.starts_with(dir) && e.path[dir.size()] == '/') {
      wanted.push_back(e.path);
    }
  }
  auto got = co_await files.cache(s.saltenv, wanted);
  json out = json::array();
  for (size_t i = 0; i < got.size(); ++i) {
    if (!got[i].error.empty()) continue;
    std::string rel = wanted[i].substr(prefix.size());
    while (rel.starts_with("/")) rel.erase(0, 1);
    std::string target = dest + "/" + rel;
    std::error_code ec;
    fs::create_directories(fs::path(target).parent_path(), ec);
    if (put_file(got[i].local, got[i].hash, target)) out.push_back(target);
  }
  std::sort(out.begin(), out.end());
  co_return outcome{out};
}

}  // namespace
}  // namespace cp_mod

void register_cp_module(registry& reg) {
  using namespace cp_mod;
  reg.add("cp.envs", cp_envs, "cp.envs: the saltenvs the file server has");
  reg.add("cp.list_states", cp_list_states,
          "cp.list_states [saltenv=base]: the sls names of the file server's saltenv");
  reg.add("cp.list_master", cp_list_master,
          "cp.list_master [saltenv=base] [prefix=]: the files of the file server's saltenv");
  reg.add("cp.list_master_dirs", cp_list_master_dirs,
          "cp.list_master_dirs [saltenv=base] [prefix=]: the directories of the file server's "
          "saltenv");
  reg.add("cp.hash_file", cp_hash_file,
          "cp.hash_file PATH [saltenv=base]: {hsum, hash_type: sha256} of a salt:// file (or a "
          "local path); {} when there is none");
  reg.add("cp.cache_file", cp_cache_file,
          "cp.cache_file PATH [saltenv=base] [source_hash=] [verify_ssl=True]: the local path of a "
          "salt:// file, fetched into the minion's cache if its hash changed (False when the file "
          "server has no such file), or of an http(s):// or ftp:// URL, fetched to "
          "CACHEDIR/extrn_files/SALTENV/HOST/PATH unless the copy there has source_hash");
  reg.add("cp.cache_files", cp_cache_files,
          "cp.cache_files PATHS [saltenv=base]: cp.cache_file of each (a list or comma-separated), "
          "fetched together");
  reg.add("cp.is_cached", cp_is_cached,
          "cp.is_cached PATH [saltenv=base]: the local path of a salt:// file or a URL in the "
          "cache, or \"\"");
  reg.add("cp.get_file_str", cp_get_file_str,
          "cp.get_file_str PATH [saltenv=base]: the text of a salt:// file; False when there is none");
  reg.add("cp.get_file", cp_get_file,
          "cp.get_file PATH DEST [saltenv=base] [makedirs=False]: copies a salt:// file to DEST "
          "(a directory: DEST/name); the destination, or \"\" on failure");
  reg.add("cp.get_dir", cp_get_dir,
          "cp.get_dir PATH DEST [saltenv=base]: copies a salt:// directory (its last component "
          "and below) into DEST; the files written");
}

}  // namespace brine::modules
