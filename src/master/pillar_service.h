#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <asio/thread_pool.hpp>
#include <nlohmann/json.hpp>

#include "base/config.h"
#include "master/minion_cache.h"
#include "master/minion_sessions.h"
#include "metrics/metrics.h"
#include "modules/registry.h"
#include "pillar/pillar.h"

namespace brine::master {

// Pillar: compiled on the master for one minion from its cached grains and
// sent to that minion alone over its own connection (never broadcast, never
// logged), and kept in the minion data cache for pillar targets (I@, J@).
// A minion gets its pillar when its grains arrive and when it asks
// (saltutil.refresh_pillar); the tree on disk is read again for a request
// unless a read started after it arrived.
//
// Threading: every method is safe from any thread, and returns at once:
// reading the tree and compiling happen on a worker thread of the service's
// own, never on the I/O thread that received the request.
class pillar_service {
 public:
  // Throws base::error for bad pillar options in `cfg`.
  // `compile_time` observes each compile's seconds.
  pillar_service(const base::master_config& cfg, const target::nodegroups& groups,
                 minion_cache& cache, metrics::histogram& compile_time);
  ~pillar_service();

  // Compiles the pillar of the minion of `s` and sends it. `reload`: read the
  // tree again first.
  void serve(const std::shared_ptr<session>& s, bool reload);
  // A brine call's pillar_request: compiles the pillar of the minion of `s`
  // (a call connection) from the tree as it is now, matching the top file
  // with the `grains` the call sent, and answers on that connection only
  // (`request_id`). The data cache is left alone: it holds what the minion's
  // daemon has, which targeting and the daemon's own checks agree on.
  void serve_call(const std::shared_ptr<session>& s, const nlohmann::json& grains,
                  uint64_t request_id);

 private:
  std::shared_ptr<const pillar::compiler> current(bool reload);
  void compile_and_send(const std::shared_ptr<session>& s, bool reload);

  const base::master_config& cfg_;
  // What pillar templates call as salt['mod.fun'](...): the built-in
  // execution functions, run here on the master as Salt's Pillar runs its
  // own minion modules.
  modules::registry functions_;
  pillar::options options_;
  // Salt's master_tops, sent with each pillar; empty when none is configured.
  std::function<nlohmann::json(std::string_view, const nlohmann::json&)> tops_;
  minion_cache& cache_;
  std::mutex mu_;
  std::shared_ptr<const pillar::compiler> compiler_;
  std::chrono::steady_clock::time_point loaded_;
  metrics::histogram& compile_time_;
  // Compiles run here. One thread serves a tree of files (CPU work on
  // parsed data); with ext_pillar each compile waits on commands, HTTP or
  // SQL, as Salt's master workers wait, and several run at once.
  static constexpr int k_ext_pillar_threads = 8;
  asio::thread_pool worker_;  // last: joined first, while the rest still lives
};

}  // namespace brine::master
