#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>

#include "base/config.h"
#include "catalog/service.h"
#include "fileserver/backend.h"
#include "master/figures.h"
#include "master/minion_sessions.h"
#include "proto/message.h"
#include "target/target.h"

namespace brine::master {

// Compile masters, the master's side (state_compile: master): a minion's
// compile_request (docs/protocol.md, "Compile masters") is answered with a
// compile_reply from catalog::service: low chunks and the hashes of the
// files they name, compile errors, "no top", or "compile on the minion"
// (a minion that state_compile_target does not name, or a tree whose
// templates need the minion). Each catalog compiled observes
// brine_compile_duration_seconds{kind="state"}; lookups count in
// brine_catalog_cache_lookups_total{result}, answers for the minion in
// brine_catalogs_compiled_on_minion_total.
//
// Threading: serve() returns at once from the I/O thread; the compile runs
// on the catalog service's pool, which sends the reply.
// state_compile_target parsed (with the master's nodegroups); throws
// base::error naming the option, its value, the problem and an example.
target::expression compile_target(const base::master_config& cfg, const target::nodegroups& groups);

class compile_service {
 public:
  // Throws base::error naming state_compile_target when it does not parse.
  compile_service(const base::master_config& cfg, const target::nodegroups& groups,
                  fileserver::backend& files, figures& figures);

  bool enabled() const { return catalogs_ != nullptr; }
  void serve(const std::shared_ptr<session>& s, proto::message&& m);
  // Compiles queued or running that max_concurrent_runs counts: all but
  // those of scheduled runs already counted as runs (`scheduled(jid)`).
  size_t in_flight() const { return counted_.load(std::memory_order_relaxed); }
  void set_scheduled(std::function<bool(const std::string& jid)> scheduled) {
    scheduled_ = std::move(scheduled);
  }
  catalog::cache::figures cache_counts() const {
    return catalogs_ ? catalogs_->cache_counts() : catalog::cache::figures{};
  }

 private:
  const base::master_config& cfg_;
  std::optional<target::expression> target_;
  figures& figures_;
  metrics::histogram& compile_time_;
  metrics::counter& hits_;
  metrics::counter& misses_;
  std::function<bool(const std::string&)> scheduled_;
  std::atomic<size_t> counted_{0};
  std::unique_ptr<catalog::service> catalogs_;  // last: its pool joins first
};

}  // namespace brine::master
