#include "fileserver/remote.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <asio/experimental/concurrent_channel.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
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

// ---- the cache ---------------------------------------------------------

struct file_cache::flight {
  using channel = asio::experimental::concurrent_channel<void(std::error_code, bool)>;
  std::mutex mu;
  bool done = false;
  std::string error;
  std::vector<std::shared_ptr<channel>> waiters;
};

file_cache::file_cache(std::string dir) : dir_(std::move(dir)) {}

std::shared_ptr<const manifest> file_cache::manifest_of(const std::string& saltenv) const {
  std::lock_guard lock(mu_);
  auto it = manifests_.find(saltenv);
  return it == manifests_.end() ? nullptr : it->second;
}

void file_cache::set_manifest(const std::string& saltenv, std::shared_ptr<const manifest> m) {
  std::lock_guard lock(mu_);
  manifests_[saltenv] = std::move(m);
}

bool file_cache::current(const std::string& saltenv, const entry& e) {
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

void file_cache::learned(const std::string& local, const std::string& hash) {
  struct stat st {};
  if (::stat(local.c_str(), &st) != 0) return;
  std::lock_guard lock(mu_);
  known_[local] = {hash, static_cast<uint64_t>(st.st_size), mtime_ns_of(st)};
}

void file_cache::forget(const std::string& local) {
  std::lock_guard lock(mu_);
  known_.erase(local);
}

std::string file_cache::part_path(const std::string& local) {
  std::lock_guard lock(mu_);
  return local + ".brine-part-" + std::to_string(++parts_);
}

std::shared_ptr<file_cache::flight> file_cache::claim(const std::string& saltenv, const entry& e) {
  std::string key = local_path(saltenv, e.path) + '\n' + e.hash;
  std::lock_guard lock(mu_);
  auto [it, fresh] = flights_.try_emplace(key);
  if (fresh) {
    it->second = std::make_shared<flight>();
    return nullptr;
  }
  return it->second;
}

void file_cache::landed(const std::string& saltenv, const entry& e, const std::string& error) {
  std::string key = local_path(saltenv, e.path) + '\n' + e.hash;
  std::shared_ptr<flight> f;
  {
    std::lock_guard lock(mu_);
    auto it = flights_.find(key);
    if (it == flights_.end()) return;
    f = std::move(it->second);
    flights_.erase(it);
  }
  std::vector<std::shared_ptr<flight::channel>> waiters;
  {
    std::lock_guard lock(f->mu);
    f->done = true;
    f->error = error;
    waiters.swap(f->waiters);
  }
  for (auto& w : waiters) w->try_send(std::error_code{}, true);
}

asio::awaitable<std::string> file_cache::wait(std::shared_ptr<flight> f) {
  auto ex = co_await asio::this_coro::executor;
  auto ch = std::make_shared<flight::channel>(ex, 1);
  {
    std::lock_guard lock(f->mu);
    if (f->done) co_return f->error;
    f->waiters.push_back(ch);
  }
  auto op = ch->async_receive(asio::use_awaitable);
  co_await std::move(op);
  std::lock_guard lock(f->mu);
  co_return f->error;
}

bool file_cache::swept(const std::string& saltenv, const std::string& revision) const {
  std::lock_guard lock(mu_);
  auto it = swept_.find(saltenv);
  return it != swept_.end() && it->second == revision;
}

void file_cache::set_swept(const std::string& saltenv, const std::string& revision) {
  std::lock_guard lock(mu_);
  swept_[saltenv] = revision;
}

// ---- remote ------------------------------------------------------------

shared_client::shared_client(std::shared_ptr<file_cache> cache, file_transport transport)
    : cache_(std::move(cache)), transport_(std::move(transport)) {}

client_stats shared_client::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

asio::awaitable<std::vector<std::string>> shared_client::envs() {
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

asio::awaitable<std::shared_ptr<const manifest>> shared_client::list(std::string saltenv) {
  if (!valid_saltenv(saltenv)) throw base::error("file server: invalid saltenv '" + saltenv + "'");
  json request = {{"op", "list"}, {"saltenv", saltenv}};
  std::shared_ptr<const manifest> have = cache_->manifest_of(saltenv);
  if (have) request["revision"] = have->revision;
  {
    std::lock_guard lock(mu_);
    ++stats_.requests;
  }
  json reply = co_await transport_(std::move(request));
  if (reply.contains("error")) throw base::error("file server: " + reply.value("error", "?"));
  if (have && reply.value("unchanged", false)) co_return have;
  auto m = detail::parse_manifest(reply, saltenv);
  cache_->set_manifest(saltenv, m);
  co_return m;
}

asio::awaitable<void> shared_client::fetch(std::string saltenv, std::vector<entry> wanted,
                                           std::map<std::string, std::string>* errors) {
  file_cache* cache = cache_.get();
  detail::fetch_target to{
      [cache, saltenv](const std::string& path) { return cache->local_path(saltenv, path); },
      [cache](const std::string& local) { return cache->part_path(local); },
      [cache](const std::string& local, const std::string& hash) { cache->learned(local, hash); },
      [this](uint64_t requests, uint64_t files, uint64_t bytes) {
        std::lock_guard lock(mu_);
        stats_.requests += requests;
        stats_.files_fetched += files;
        stats_.bytes_fetched += bytes;
      }};
  co_await detail::fetch_files(transport_, std::move(saltenv), std::move(wanted), k_batch_bytes,
                               std::move(to), errors);
}

asio::awaitable<std::vector<cached_file>> shared_client::cache(std::string saltenv,
                                                               std::vector<std::string> paths) {
  return cache_listed(std::move(saltenv), std::move(paths), nullptr);
}

asio::awaitable<std::vector<cached_file>> shared_client::cache_listed(
    std::string saltenv, std::vector<std::string> paths, std::shared_ptr<const manifest> m) {
  // With the caller's listing, every file is that listing's (a run reads
  // one revision); with none, a file that changed under the listing made
  // here is asked for again from a new one.
  const bool pinned = m != nullptr;
  std::vector<cached_file> out(paths.size());
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!m || attempt > 0) m = co_await list(saltenv);
    std::vector<entry> wanted;  // fetched here
    std::vector<std::pair<std::string, std::shared_ptr<file_cache::flight>>> others;  // elsewhere
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
      if (cache_->current(saltenv, *e)) {
        std::lock_guard lock(mu_);
        ++stats_.cache_hits;
      } else if (asked.insert(e->path).second) {
        if (auto f = cache_->claim(saltenv, *e)) {
          others.emplace_back(e->path, std::move(f));
        } else if (cache_->current(saltenv, *e)) {
          // Another client's fetch landed between the look and the claim.
          cache_->landed(saltenv, *e, "");
          std::lock_guard lock(mu_);
          ++stats_.cache_hits;
        } else {
          wanted.push_back(*e);
        }
      }
    }
    std::map<std::string, std::string> errors;
    if (!wanted.empty()) {
      // Every claimed file lands, fetched or not, so that no waiter waits
      // forever.
      std::exception_ptr failed;
      try {
        co_await fetch(saltenv, wanted, &errors);
      } catch (...) {
        failed = std::current_exception();
      }
      std::string why;
      if (failed) {
        try {
          std::rethrow_exception(failed);
        } catch (const std::exception& e) {
          why = e.what();
        } catch (...) {
          why = "the fetch failed";
        }
      }
      for (const auto& e : wanted) {
        auto err = errors.find(e.path);
        cache_->landed(saltenv, e, err != errors.end() ? err->second : why);
      }
      if (failed) std::rethrow_exception(failed);
    }
    for (auto& [path, f] : others) {
      std::string err = co_await file_cache::wait(f);
      if (!err.empty()) errors[path] = err;
    }
    bool retry = false;
    for (size_t i = 0; i < paths.size(); ++i) {
      if (!out[i].local.empty() || !out[i].error.empty()) continue;
      const entry* e = m->find(paths[i]);
      if (auto err = errors.find(paths[i]); err != errors.end()) {
        out[i].error = err->second;
        retry = retry || err->second == k_changed_on_master;
        continue;
      }
      out[i].local = cache_->local_path(saltenv, e->path);
      out[i].hash = e->hash;
      out[i].mode = e->mode;
    }
    if (!retry || pinned) break;
  }
  co_return out;
}

asio::awaitable<std::vector<std::string>> shared_client::tree(std::string saltenv) {
  return tree_listed(std::move(saltenv), nullptr);
}

asio::awaitable<std::vector<std::string>> shared_client::tree_listed(std::string saltenv,
                                                             std::shared_ptr<const manifest> m) {
  // As cache_listed(): pinned to the caller's listing; with none, listed
  // again once when a file changed under the listing made here.
  const bool pinned = m != nullptr;
  for (int attempt = 0;; ++attempt) {
    if (!m || (!pinned && attempt > 0)) m = co_await list(saltenv);
    std::vector<std::string> small;
    for (const auto& e : m->files) {
      if (e.size <= k_prefetch_limit) small.push_back(e.path);
    }
    auto got = co_await cache_listed(saltenv, std::move(small), m);
    const cached_file* failed = nullptr;
    bool moved = false;
    for (const auto& f : got) {
      if (f.error.empty() || moved) continue;
      moved = f.error == k_changed_on_master;
      if (failed == nullptr || moved) failed = &f;
    }
    if (failed == nullptr) break;
    if (moved && !pinned && attempt == 0) continue;
    std::string why =
        "file server: salt://" + failed->path + "?saltenv=" + saltenv + ": " + failed->error;
    if (moved) {
      throw listing_moved(why +
                          " (the master moved to a new revision of its files during this "
                          "run, which reads one revision only; run it again)");
    }
    throw base::error(why);
  }
  std::string root = cache_->dir() + "/" + saltenv;
  std::error_code ec;
  fs::create_directories(root, ec);
  if (cache_->swept(saltenv, m->revision)) co_return std::vector<std::string>{root};
  // Files the master no longer has leave the mirror (an sls removed there
  // must not be found here); once per revision, and never a file that
  // another client of the cache is fetching now.
  std::vector<fs::path> stale;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code fec;
    if (!it->is_regular_file(fec) && !it->is_symlink(fec)) continue;
    if (it->path().filename().string().find(".brine-part-") != std::string::npos) continue;
    std::string rel = it->path().lexically_relative(root).generic_string();
    const entry* e = m->find(rel);
    if (e == nullptr || (e->size > k_prefetch_limit && !it->is_regular_file(fec))) {
      stale.push_back(it->path());
    }
  }
  for (const auto& p : stale) {
    fs::remove(p, ec);
    cache_->forget(p.string());
  }
  cache_->set_swept(saltenv, m->revision);
  co_return std::vector<std::string>{root};
}

}  // namespace brine::fileserver
