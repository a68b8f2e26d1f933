#pragma once

#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <asio/thread_pool.hpp>
#include <atomic>
#include <memory>
#include <optional>

#include "base/config.h"
#include "http/server.h"
#include "master/cluster_node.h"
#include "master/compile_service.h"
#include "master/delivery.h"
#include "master/event_bus.h"
#include "master/figures.h"
#include "master/file_service.h"
#include "master/local_api.h"
#include "master/minion_cache.h"
#include "master/minion_sessions.h"
#include "master/pillar_service.h"
#include "master/publisher.h"
#include "master/reports.h"
#include "master/returns.h"
#include "master/schedule_service.h"
#include "master/store_sync.h"
#include "master/store_worker.h"
#include "metrics/metrics.h"
#include "net/tls.h"
#include "pki/key_registry.h"
#include "pki/keys.h"

namespace brine::master {

// The master daemon: wires the minion sessions (minion_sessions.h), jobs
// (publisher.h), returns (returns.h) and the local API (local_api.h) to one
// key registry, one store thread and one event bus.
//
// Lifecycle: the constructor sets everything up (directories, keys, store,
// listening sockets) and throws base::error with a fix-it message when it
// cannot; run() serves until SIGTERM/SIGINT, then stops cleanly.
// Threading: a small pool runs one io_context; each connection is on its own
// strand; the store has its own thread (store_worker).
class master {
 public:
  explicit master(base::master_config cfg);
  ~master();
  int run();

 private:
  asio::awaitable<void> purge_loop();
  void on_minion_message(const std::shared_ptr<session>& s, proto::message&& m);
  // The minion data cache and the jobs whose delivery was still open when
  // the master last stopped.
  void reopen();
  void stop();

  // The figures served on metrics_port; first, as every part counts into them.
  void serve_metrics();

  base::master_config cfg_;
  metrics::registry metrics_;
  figures figures_{metrics_};
  asio::io_context io_;
  pki::keypair identity_;
  // A cluster member presents the cluster's key to minions (cluster_pki_dir)
  // and keeps identity_ for itself.
  std::optional<pki::keypair> cluster_key_;
  std::unique_ptr<net::tls_context> tls_;
  pki::key_registry keys_;
  std::string name_;  // host:port: this master in the store and in jobs
  // Filled when the store opens: the feed of a shared store, the jid slot.
  std::unique_ptr<store::change_feed> feed_;
  int slot_ = -1;
  std::unique_ptr<store_worker> store_;  // opened after keys_, which it fills
  reports reports_;                      // used on the store thread only
  event_bus events_;
  minion_cache cache_;
  minion_sessions sessions_;
  returns returns_;
  delivery deliveries_;
  publisher jobs_;
  schedule_service schedules_;
  pillar_service pillar_;
  file_service files_;
  compile_service compiles_;
  local_api api_;
  // Local API queries that walk every minion (inventory), one at a time,
  // off the I/O threads; after what they read, so that it stops first.
  asio::thread_pool queries_{1};
  std::unique_ptr<cluster_node> cluster_;  // a cluster member only
  std::unique_ptr<store_sync> sync_;  // a shared store only
  std::atomic<bool> stopping_{false};
  // Last: stopped first, while everything its collectors read still lives.
  std::unique_ptr<http::server> metrics_server_;
};

}  // namespace brine::master
