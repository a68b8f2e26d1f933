#pragma once

#include <asio/thread_pool.hpp>
#include <atomic>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "catalog/cache.h"
#include "catalog/request.h"
#include "fileserver/backend.h"
#include "fileserver/remote.h"
#include "modules/registry.h"

namespace brine::catalog {

struct settings {
  // Where the master keeps the state tree it compiles from: every file of
  // the backends' saltenvs (up to shared_client::k_prefetch_limit bytes),
  // at the revision the backends serve, by path and hash as a minion does.
  std::string tree_dir;
  uint64_t cache_max_bytes = 256ull << 20;
  unsigned threads = 0;  // 0: one per core
  uint64_t max_reply_bytes = 4ull << 20;
};

// Compile masters (Puppet's idea, Salt's compiler): a minion's state run
// compiled on the master into low chunks, from the master's own file
// server at the revision it serves now and the minion's grains, pillar and
// options as the minion sent them, answered from the catalog cache when
// nothing of that changed.
//
// Templates see the `salt` functions a minion's would; those that only
// read data (grains, pillar, config, defaults, slsutil, match, hashutil,
// test's data functions) run here, and a template that calls any other
// (cmd.run, file.file_exists, pkg.version: they look at the minion's own
// machine) makes the answer "compile on the minion", cached like any
// other, so a tree that needs its minion always gets the minion's own
// compile and the same chunks.
//
// Threading: compile() returns at once and may be called from any thread;
// the compile runs on the service's pool (sized to the cores), never on
// the caller's I/O thread, and `done` is called there.
class service {
 public:
  // `files`: the master's file server backend (it must outlive this).
  service(settings s, fileserver::backend& files);
  ~service();

  struct answer {
    json body;  // the compile_reply body
    bool hit = false;
    double seconds = 0;  // the compile's, on a miss
  };
  void compile(std::string minion, request r, std::function<void(answer)> done);
  // Blocking: compile() on the calling thread (tests, benchmarks).
  answer compile_now(const std::string& minion, const request& r);

  // Compiles queued or running now.
  size_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }
  cache::figures cache_counts() const { return cache_.counts(); }
  void clear_cache() { cache_.clear(); }

 private:
  // The revision of every saltenv the backend serves now.
  std::map<std::string, std::string> revisions();
  // Brings tree_dir to `revs` (once per change), and answers the roots
  // to compile with; the caller then holds `tree_lock` shared.
  std::vector<std::pair<std::string, std::vector<std::string>>> tree_at(
      const std::map<std::string, std::string>& revs, std::shared_lock<std::shared_mutex>& lock);
  reply compile_miss(const std::string& minion, const request& r,
                     const std::vector<std::pair<std::string, std::vector<std::string>>>& roots);
  std::vector<file_ref> refs_of(const ordered_json& chunks);

  settings settings_;
  fileserver::backend& files_;
  // What templates call: the minion's function names, the ones that read
  // only data run here, the rest mark the compile as the minion's.
  modules::registry functions_;
  std::shared_ptr<fileserver::file_cache> tree_cache_;
  fileserver::shared_client tree_client_;
  std::shared_mutex tree_mu_;  // shared: compiling; unique: bringing tree_dir up to date
  std::mutex synced_mu_;
  std::map<std::string, std::string> synced_;  // the revisions tree_dir holds
  std::vector<std::pair<std::string, std::vector<std::string>>> roots_;
  cache cache_;
  std::atomic<size_t> in_flight_{0};
  std::unique_ptr<asio::thread_pool> pool_;  // last: joined first
};

// Whether the compile master runs `fun` itself when a template calls it:
// a function of data only, the same wherever it runs.
bool runs_on_master(const std::string& fun);

}  // namespace brine::catalog
