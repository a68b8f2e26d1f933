#pragma once

#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/config.h"
#include "cluster/balance.h"
#include "cluster/membership.h"
#include "cluster/peer_links.h"
#include "master/delivery.h"
#include "master/event_bus.h"
#include "master/session.h"
#include "master/store_worker.h"
#include "pki/keys.h"
#include "store/store.h"

namespace brine::master {

// This master as a member of a cluster (docs/architecture.md, "The master
// cluster"): its heartbeat in the store, the jobs other members publish
// delivered to the minions connected here, and the acknowledgements of
// minions connected here announced to the others. Returns, undelivered
// records, key decisions and minion data travel through the store's change
// feed already (store_sync).
//
// Lifecycle: built by the master when cluster_id is set; join() before the
// master serves (throws when it must not join); heartbeat_loop and
// relay_loop until stopping.
// Threading: on_job and on_acks come from the feed thread, acknowledged()
// from I/O threads; every method is safe from any thread.
class cluster_node {
 public:
  struct deps {
    asio::io_context& io;
    store_worker& store;
    delivery& deliveries;
    session_directory& sessions;
    event_bus& events;
    // Against which a job of another member is past its delivery deadline.
    base::wall_clock clock = base::system_wall_clock();
  };
  // Figures for the heartbeat's stats, read each beat.
  struct counters {
    std::function<uint64_t()> published;  // jobs published here, since start
    std::function<uint64_t()> returns;    // returns received here, since start
    std::function<std::string()> revision;  // the file tree served ("" if none)
  };

  cluster_node(deps d, const base::master_config& cfg, std::string name,
               const pki::keypair& cluster_key, const pki::keypair& own_key, counters c);

  // The key every master of the cluster presents to minions.
  const std::string& cluster_id() const { return cfg_.cluster_id; }
  // Writes the first heartbeat and checks the others: throws base::error
  // when another live master holds another cluster key or cluster id; then
  // listens on cluster_port and links to the other members.
  void join();
  void stop();
  // Every k_heartbeat_interval until `stopping`; `removed` runs (on an I/O
  // thread) when `brine cluster remove-peer` removed this master.
  asio::awaitable<void> heartbeat_loop(const std::atomic<bool>& stopping,
                                       std::function<void()> removed);
  // Announces the acknowledgements gathered since the last round.
  asio::awaitable<void> relay_loop(const std::atomic<bool>& stopping);

  // A job another member published (a change of kind job).
  void on_job(store::change c);
  // After the change feed was interrupted (on the store thread): the open
  // jobs of other members that this master does not hold yet are taken on,
  // for the targets that have neither returned nor been recorded undelivered.
  void catch_up(store::store& db);
  // A minion connected here acknowledged `jid`.
  void acknowledged(const std::string& id, const std::string& jid);

  bool alive(const std::string& name) const { return members_.alive(name); }
  // `brine cluster remove-peer NAME`: marks the member removed in the
  // store; `answer` gets the API reply (on the store thread).
  void remove(const std::string& name, std::function<void(nlohmann::json)> answer);
  // `brine cluster status`: every member, as this master sees it.
  nlohmann::json status() const;
  // Whether the store answered the last heartbeat.
  bool store_reachable() const { return store_ok_; }

 private:
  void deliver(store::job_record job);
  // Keeps a peer link to every live member.
  void link_members();
  // After a heartbeat (on the store thread, `now_ms` the database's time):
  // over its even share while another member is short, this member asks
  // some of its minions to connect again through the balancer
  // (cluster::balancer).
  void rebalance(int64_t now_ms);
  nlohmann::json stats();

  deps d_;
  const base::master_config& cfg_;
  std::string name_;
  const pki::keypair& cluster_key_;
  const pki::keypair& own_key_;
  counters counters_;
  cluster::membership members_;
  cluster::balancer balancer_;  // on the store thread
  std::unique_ptr<cluster::peer_links> links_;
  std::atomic<bool> store_ok_{true};
  std::atomic<bool> beat_queued_{false};
  std::string last_problem_;  // on the store thread
  std::atomic<bool> removed_told_{false};
  std::atomic<double> store_ms_{0};
  // For rates: the counters at the previous beat.
  std::chrono::steady_clock::time_point last_beat_{};
  uint64_t last_published_ = 0;
  uint64_t last_returns_ = 0;
  std::mutex acks_mu_;
  std::map<std::string, std::vector<std::string>> acks_;  // jid -> minions
};

// The address the other masters reach this one's peer port at.
std::string peer_address(const base::master_config& cfg);

}  // namespace brine::master
