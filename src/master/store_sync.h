#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "master/cluster_node.h"
#include "master/delivery.h"
#include "master/event_bus.h"
#include "master/minion_cache.h"
#include "master/session.h"
#include "master/store_worker.h"
#include "metrics/metrics.h"
#include "pki/key_registry.h"
#include "store/store.h"

namespace brine::master {

// Keeps this master in step with the other masters of a shared store, from
// the store's change feed (PostgreSQL LISTEN/NOTIFY; the rows stay the
// truth, a change only says which to read again):
//  - key decisions made on another master (or by `brine key` with every
//    master down) take effect here: a rejected or deleted minion's
//    connection is cut, an accepted one waiting here is served;
//  - returns that minions delivered to another master reach this master's
//    CLI clients and `brine events` as if they had come here, and end the
//    delivery holds this master keeps for them; so do undelivered records;
//  - grains and pillar that minions of other masters sent are read into the
//    minion data cache, for targeting; so are the last state runs that other
//    masters reported (the inventory's last_run.*);
//  - in a cluster, jobs other members published are delivered to the
//    minions connected here, and acknowledgements made on other members
//    end the holds here (cluster_node).
// After the feed was interrupted, every key and last run is read again.
//
// Lifecycle: start() runs the feed on its own thread; stop() (or the
// destructor) ends it. Threading: rows are read on the store thread, and
// what they change is applied from there (every call it makes is safe from
// any thread).
class store_sync {
 public:
  struct deps {
    store_worker& store;
    pki::key_registry& keys;
    session_directory& sessions;
    delivery& deliveries;
    minion_cache& cache;
    event_bus& events;
    cluster_node* cluster = nullptr;  // set for a member of a cluster
    // Counts the returns other masters received (brine_feed_returns_total).
    metrics::counter* feed_returns = nullptr;
    // Stamps when this master heard that a minion came to or left another.
    base::wall_clock clock = base::system_wall_clock();
  };
  store_sync(deps d, std::unique_ptr<store::change_feed> feed, std::string origin);
  ~store_sync();
  store_sync(const store_sync&) = delete;
  store_sync& operator=(const store_sync&) = delete;

  // Called on the feed's thread when another master pinned new gitfs
  // revisions, and after the feed was interrupted. Before start().
  void on_file_pins(std::function<void()> f) { on_file_pins_ = std::move(f); }

  void start();
  void stop();

 private:
  void loop();
  void apply(std::vector<store::change> changes);
  // `ids`: each minion id with the master that changed its key.
  void keys_changed(std::vector<std::pair<std::string, std::string>> ids);
  void resync();
  void returned(const std::string& jid, std::vector<std::string> minions,
                std::vector<store::return_record> rets);
  void undelivered(const std::string& jid, std::vector<std::string> minions);
  void minions_changed(std::vector<std::string> ids);
  void settle_keys(const std::vector<std::string>& ids);

  deps d_;
  std::unique_ptr<store::change_feed> feed_;
  std::string origin_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  std::function<void()> on_file_pins_;
};

}  // namespace brine::master
