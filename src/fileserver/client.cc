#include "fileserver/client.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "base/error.h"
#include "fileserver/fetch.h"
#include "fileserver/path.h"
#include "fileserver/serve.h"

namespace brine::fileserver {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

int64_t mtime_ns_of(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

}  // namespace

asio::awaitable<std::vector<cached_file>> client::cache_listed(
    std::string saltenv, std::vector<std::string> paths, std::shared_ptr<const manifest>) {
  return cache(std::move(saltenv), std::move(paths));
}

asio::awaitable<std::vector<std::string>> client::tree_listed(std::string saltenv,
                                                              std::shared_ptr<const manifest>) {
  return tree(std::move(saltenv));
}

// ---- local -------------------------------------------------------------

local_client::local_client(std::map<std::string, std::vector<std::string>> file_roots)
    : dirs_(file_roots), roots_(std::move(file_roots), std::chrono::milliseconds(0)) {}

asio::awaitable<std::vector<std::string>> local_client::envs() { co_return roots_.envs(); }

asio::awaitable<std::shared_ptr<const manifest>> local_client::list(std::string saltenv) {
  co_return roots_.list(saltenv);
}

asio::awaitable<std::vector<cached_file>> local_client::cache(std::string saltenv,
                                                              std::vector<std::string> paths) {
  std::vector<cached_file> out;
  for (const auto& p : paths) {
    cached_file f;
    f.path = p;
    if (auto real = roots_.locate(saltenv, p)) {
      f.local = *real;
      struct stat st {};
      if (::stat(real->c_str(), &st) == 0) f.mode = st.st_mode & 07777u;
      f.hash = hash_file(*real).value_or("");
    } else {
      f.error = "no such file in saltenv " + saltenv;
    }
    out.push_back(std::move(f));
  }
  co_return out;
}

asio::awaitable<std::vector<std::string>> local_client::tree(std::string saltenv) {
  auto it = dirs_.find(saltenv);
  co_return it == dirs_.end() ? std::vector<std::string>{} : it->second;
}

std::vector<std::string> local_client::dirs_of(const std::string& saltenv) const {
  auto it = dirs_.find(saltenv);
  return it == dirs_.end() ? std::vector<std::string>{} : it->second;
}

// ---- remote ------------------------------------------------------------

remote_client::remote_client(std::string cache_dir, file_transport transport)
    : dir_(std::move(cache_dir)), transport_(std::move(transport)) {}

client_stats remote_client::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::string remote_client::local_path(const std::string& saltenv, const std::string& path) const {
  return dir_ + "/" + saltenv + "/" + path;
}

asio::awaitable<std::vector<std::string>> remote_client::envs() {
  {
    std::lock_guard lock(mu_);
    ++stats_.requests;
  }
  json request = {{"op", "envs"}};
  json reply = co_await transport_(std::move(request));
  std::vector<std::string> out;
  if (reply.contains("envs") && reply["envs"].is_array()) {
    for (const auto& e : reply["envs"]) {
      if (e.is_string() && valid_saltenv(e.get<std::string>())) out.push_back(e);
    }
  }
  co_return out;
}

asio::awaitable<std::shared_ptr<const manifest>> remote_client::list(std::string saltenv) {
  if (!valid_saltenv(saltenv)) throw base::error("file server: invalid saltenv '" + saltenv + "'");
  json request = {{"op", "list"}, {"saltenv", saltenv}};
  std::shared_ptr<const manifest> have;
  {
    std::lock_guard lock(mu_);
    ++stats_.requests;
    auto it = manifests_.find(saltenv);
    if (it != manifests_.end()) {
      have = it->second;
      request["revision"] = have->revision;
    }
  }
  json reply = co_await transport_(std::move(request));
  if (reply.contains("error")) throw base::error("file server: " + reply.value("error", "?"));
  if (have && reply.value("unchanged", false)) co_return have;
  auto m = detail::parse_manifest(reply, saltenv);
  std::lock_guard lock(mu_);
  manifests_[saltenv] = m;
  co_return m;
}

bool remote_client::current(const std::string& saltenv, const entry& e) {
  std::string local = local_path(saltenv, e.path);
  struct stat st {};
  if (::stat(local.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size != e.size) return false;
  {
    std::lock_guard lock(mu_);
    auto it = known_.find(local);
    if (it != known_.end() && it->second.size == size && it->second.mtime_ns == mtime_ns_of(st)) {
      return it->second.hash == e.hash;
    }
  }
  auto h = hash_file(local);
  if (!h) return false;
  std::lock_guard lock(mu_);
  known_[local] = {*h, size, mtime_ns_of(st)};
  return *h == e.hash;
}

asio::awaitable<void> remote_client::fetch(std::string saltenv, std::vector<entry> wanted,
                                           std::map<std::string, std::string>* errors) {
  detail::fetch_target to{
      [this, saltenv](const std::string& path) { return local_path(saltenv, path); },
      [](const std::string& local) { return local + ".brine-part"; },
      [this](const std::string& local, const std::string& hash) {
        struct stat st {};
        ::stat(local.c_str(), &st);
        std::lock_guard lock(mu_);
        known_[local] = {hash, static_cast<uint64_t>(st.st_size), mtime_ns_of(st)};
      },
      [this](uint64_t requests, uint64_t files, uint64_t bytes) {
        std::lock_guard lock(mu_);
        stats_.requests += requests;
        stats_.files_fetched += files;
        stats_.bytes_fetched += bytes;
      }};
  co_await detail::fetch_files(transport_, std::move(saltenv), std::move(wanted), k_batch_bytes,
                               std::move(to), errors);
}

asio::awaitable<std::vector<cached_file>> remote_client::cache(std::string saltenv,
                                                               std::vector<std::string> paths) {
  return cache_listed(std::move(saltenv), std::move(paths), nullptr);
}

asio::awaitable<std::vector<cached_file>> remote_client::cache_listed(
    std::string saltenv, std::vector<std::string> paths, std::shared_ptr<const manifest> m) {
  std::vector<cached_file> out(paths.size());
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!m || attempt > 0) m = co_await list(saltenv);
    std::vector<entry> wanted;
    std::set<std::string> asked;
    for (size_t i = 0; i < paths.size(); ++i) {
      if (!out[i].local.empty()) continue;
      out[i].path = paths[i];
      out[i].error.clear();
      const entry* e = m->find(paths[i]);
      if (e == nullptr) {
        out[i].error = "no such file in saltenv " + saltenv;
        continue;
      }
      if (current(saltenv, *e)) {
        std::lock_guard lock(mu_);
        ++stats_.cache_hits;
      } else if (asked.insert(e->path).second) {
        wanted.push_back(*e);
      }
    }
    std::map<std::string, std::string> errors;
    if (!wanted.empty()) co_await fetch(saltenv, std::move(wanted), &errors);
    bool retry = false;
    for (size_t i = 0; i < paths.size(); ++i) {
      if (!out[i].local.empty() || !out[i].error.empty()) continue;
      const entry* e = m->find(paths[i]);
      if (auto err = errors.find(paths[i]); err != errors.end()) {
        out[i].error = err->second;
        retry = retry || err->second.starts_with("changed on the master");
        continue;
      }
      out[i].local = local_path(saltenv, e->path);
      out[i].hash = e->hash;
      out[i].mode = e->mode;
    }
    if (!retry) break;
  }
  co_return out;
}

asio::awaitable<std::vector<std::string>> remote_client::tree(std::string saltenv) {
  return tree_listed(std::move(saltenv), nullptr);
}

asio::awaitable<std::vector<std::string>> remote_client::tree_listed(std::string saltenv,
                                                             std::shared_ptr<const manifest> m) {
  if (!m) m = co_await list(saltenv);
  std::vector<std::string> small;
  for (const auto& e : m->files) {
    if (e.size <= k_prefetch_limit) small.push_back(e.path);
  }
  auto got = co_await cache_listed(saltenv, std::move(small), m);
  for (const auto& f : got) {
    if (!f.error.empty()) {
      throw base::error("file server: salt://" + f.path + "?saltenv=" + saltenv + ": " + f.error);
    }
  }
  // Files the master no longer has leave the mirror (an sls removed there
  // must not be found here).
  std::string root = dir_ + "/" + saltenv;
  std::error_code ec;
  fs::create_directories(root, ec);
  std::vector<fs::path> stale;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code fec;
    if (!it->is_regular_file(fec) && !it->is_symlink(fec)) continue;
    std::string rel = it->path().lexically_relative(root).generic_string();
    const entry* e = m->find(rel);
    if (e == nullptr || (e->size > k_prefetch_limit && !it->is_regular_file(fec))) {
      stale.push_back(it->path());
    }
  }
  for (const auto& p : stale) {
    fs::remove(p, ec);
    std::lock_guard lock(mu_);
    known_.erase(p.string());
  }
  co_return std::vector<std::string>{root};
}

}  // namespace brine::fileserver
