#pragma once

#include <asio/awaitable.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fileserver/client.h"
#include "fileserver/roots.h"

// salt:// from a master: the minion's file client (remote_client), and the
// same for many minions in one process (brine swarm: one cache of the
// master's files on disk for all of them, each minion asking its own master).
namespace brine::fileserver {

// The master's files on this machine, keyed by path and hash:
// <dir>/<saltenv>/<path>, with the newest manifest of each saltenv. The
// simulated minions of `brine swarm` share one, so that a file is on disk
// (and fetched) once for all of them. However many clients want a file at
// once, one fetches it and the others wait for that fetch
// (claim/landed/wait).
//
// Threading: every method is safe from any thread.
class file_cache {
 public:
  explicit file_cache(std::string dir);

  const std::string& dir() const { return dir_; }
  std::string local_path(const std::string& saltenv, const std::string& path) const {
    return dir_ + "/" + saltenv + "/" + path;
  }
  // The newest manifest of `saltenv` any client listed; null if none did.
  std::shared_ptr<const manifest> manifest_of(const std::string& saltenv) const;
  void set_manifest(const std::string& saltenv, std::shared_ptr<const manifest> m);
  // Whether the cached copy of `e` is current (hashing it once if unknown).
  bool current(const std::string& saltenv, const entry& e);
  // A fetched file is at `local` with this hash.
  void learned(const std::string& local, const std::string& hash);
  void forget(const std::string& local);
  // A name for a file being fetched, unique in this process.
  std::string part_path(const std::string& local);

  // One fetch of one file (its local path and hash) that others may wait for.
  struct flight;
  // Null: the caller fetches `e` and calls landed() when done, whatever the
  // outcome. Otherwise another client is fetching it: wait() for that.
  std::shared_ptr<flight> claim(const std::string& saltenv, const entry& e);
  // The caller's fetch of `e` ended; `error` empty when the file is there.
  void landed(const std::string& saltenv, const entry& e, const std::string& error);
  // Until `f` has landed; its error (empty: the file is there).
  static asio::awaitable<std::string> wait(std::shared_ptr<flight> f);

  // Whether `revision` of `saltenv` was already swept of files the master
  // no longer has (tree() sweeps once per revision, not once per client).
  bool swept(const std::string& saltenv, const std::string& revision) const;
  void set_swept(const std::string& saltenv, const std::string& revision);

 private:
  struct known {
    std::string hash;
    uint64_t size = 0;
    int64_t mtime_ns = 0;
  };
  std::string dir_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const manifest>> manifests_;
  std::map<std::string, known> known_;                      // by local path
  std::map<std::string, std::shared_ptr<flight>> flights_;  // by local path and hash
  std::map<std::string, std::string> swept_;                // saltenv -> revision
  uint64_t parts_ = 0;
};

// A client of a master's file server over a file_cache that it may share
// with others (remote_client: a cache of its own, for one minion).
// Requests go through this client's `transport` (its minion's link); a
// file already in the cache at the manifest's hash is not asked for, and a
// file that another client is fetching is waited for, not fetched again.
// Small: a swarm holds one per minion.
class shared_client : public client {
 public:
  // Data per `get` request, and the largest file tree() brings in.
  static constexpr uint64_t k_batch_bytes = 4 * 1024 * 1024;
  static constexpr uint64_t k_prefetch_limit = 1024 * 1024;

  shared_client(std::shared_ptr<file_cache> cache, file_transport transport);
  asio::awaitable<std::vector<std::string>> envs() override;
  asio::awaitable<std::shared_ptr<const manifest>> list(std::string saltenv) override;
  asio::awaitable<std::vector<cached_file>> cache(std::string saltenv,
                                                  std::vector<std::string> paths) override;
  asio::awaitable<std::vector<std::string>> tree(std::string saltenv) override;
  asio::awaitable<std::vector<cached_file>> cache_listed(
      std::string saltenv, std::vector<std::string> paths,
      std::shared_ptr<const manifest> listed) override;
  asio::awaitable<std::vector<std::string>> tree_listed(
      std::string saltenv, std::shared_ptr<const manifest> listed) override;
  // What this client asked of its master; files another client fetched
  // count as cache hits.
  client_stats stats() const override;
  bool remote() const override { return true; }
  std::vector<std::string> dirs_of(const std::string& saltenv) const override {
    return {cache_->dir() + "/" + saltenv};
  }

 private:
  asio::awaitable<void> fetch(std::string saltenv, std::vector<entry> wanted,
                              std::map<std::string, std::string>* errors);

  std::shared_ptr<file_cache> cache_;
  file_transport transport_;
  mutable std::mutex mu_;
  client_stats stats_;
};

// With a master, for one minion: a shared_client over a cache of its own
// under `cache_dir` (<cache_dir>/<saltenv>/<path>), files checked by hash,
// fetched many per request.
class remote_client : public shared_client {
 public:
  remote_client(std::string cache_dir, file_transport transport)
      : shared_client(std::make_shared<file_cache>(std::move(cache_dir)), std::move(transport)) {}
};

}  // namespace brine::fileserver
