#pragma once

#include <asio/io_context.hpp>
#include <atomic>
#include <functional>
#include <nlohmann/json.hpp>

#include "base/config.h"
#include "master/acl.h"
#include "master/delivery.h"
#include "master/event_bus.h"
#include "master/jid.h"
#include "master/minion_cache.h"
#include "master/minion_sessions.h"
#include "master/store_worker.h"
#include "pki/key_registry.h"
#include "target/target.h"

namespace brine::master {

// Jobs: resolves a target against the accepted keys, allocates the jid,
// records the job (committed before anything is sent, so that a job a
// minion runs is always in the job cache) and hands it to `delivery`, which
// sends one shared encoding of the publish to the targets connected now and
// holds it for the others until the job's delivery deadline.
//
// Threading: publish() from any thread; the reply comes from the store
// thread or an I/O thread.
class publisher {
 public:
  // Throws base::error for nodegroups in `cfg` that do not parse.
  publisher(asio::io_context& io, const base::master_config& cfg, pki::key_registry& keys,
            minion_cache& cache, delivery& deliveries, store_worker& store, event_bus& events);

  // The accepted minions `target` of `tgt_type` names now, as a publish
  // would send to them. Throws target::error for a malformed expression and
  // base::error for an unknown type.
  target::match_result resolve(const std::string& target, const std::string& tgt_type,
                               char delimiter = ':') const;

  // Called once with the reply for the client: {ok, jid, minions, connected,
  // deadline} or {ok: false, error}. For a job, it comes before any publish
  // frame goes out, so that the caller can subscribe to the job's returns
  // first.
  using recorded = std::function<void(const nlohmann::json& reply)>;

  // `body`: target, tgt_type (Salt's: glob, pcre, list, grain, grain_pcre,
  // pillar, pillar_pcre, ipcidr, nodegroup, compound), delimiter, fun, args,
  // kwargs, user, and
  // `timeout`: seconds from now until the delivery deadline (publish_hold
  // when absent).
  // `on_jid`, when given, runs with the job's jid before the job is
  // recorded: in a cluster, the other members may deliver it and their
  // minions return as soon as it is committed, before `on_recorded` runs,
  // so a client subscribes to its returns there.
  void publish(const nlohmann::json& body, recorded on_recorded,
               std::function<void(const std::string& jid)> on_jid = nullptr);

  // A minion's scheduled run (schedule_service): records a job for it alone
  // (target its id, tgt_type list, user "schedule:NAME"), settled at once,
  // as no publish goes out (the minion runs it when told the jid); its
  // return and report follow as a published job's do. `done` runs on the
  // store thread with the jid, or with "" and why not.
  void record_run(const std::string& minion, const std::string& name, const std::string& fun,
                  nlohmann::json args, nlohmann::json kwargs,
                  std::function<void(const std::string& jid, const std::string& error)> done);

  // Empty when publisher_acl lets `user` run `fun` on all of `minions`; else
  // why not.
  std::string acl_refusal(const std::string& user, const std::string& fun,
                          const std::vector<std::string>& minions) const {
    return acl_.refusal(user, fun, minions);
  }

  // The master's nodegroups, parsed.
  const target::nodegroups& nodegroups() const { return nodegroups_; }
  // A cluster member: whether another member is alive. Minions connected to
  // a live member count as connected (for the CLI's "[Not connected]" and
  // its batches).
  void set_member_alive(std::function<bool(const std::string&)> alive) {
    member_alive_ = std::move(alive);
  }
  // Which of `ids` are connected to another live member (none outside a
  // cluster).
  std::vector<std::string> connected_elsewhere(const std::vector<std::string>& ids) const;
  // Masters sharing a store end their jids with their slot (jid.h); a job
  // records the name of the master that published it.
  void set_identity(int jid_slot, std::string master_name) {
    jids_.set_slot(jid_slot);
    name_ = std::move(master_name);
  }
  // Jobs recorded and sent since the master started.
  uint64_t published() const { return published_; }
  // Publishes answered with an error (no target, publisher_acl, the store).
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  // Publishes whose job is not recorded yet: in the store thread's queue,
  // or waiting for a store that does not answer (up to store_failover_wait).
  int64_t unrecorded() const { return unrecorded_.load(std::memory_order_relaxed); }

  // The publish frame of a recorded job (also for jobs reloaded after a
  // restart).
  static net::frame_ptr frame_of(const store::job_record& job);
  // The data of a job's `brine/job/JID/new` event.
  static nlohmann::json new_job_event(const store::job_record& job);

 private:
  // A publish being recorded: what it needs to go on once the store says.
  struct recording {
    store::job_record job;
    net::frame_ptr frame;
    recorded on_recorded;
    std::vector<std::string> missing;
  };
  // On the store thread, the job recorded: announces it, answers the
  // client and sends it (on an I/O thread).
  void go_on(recording r);
  // add_job's answer was lost and the store did not answer again in time
  // (store::outcome_unknown; the client has been told so): asks the store
  // whether the job's row exists every 500 ms until it answers, keeping the
  // job reserved (nothing sent, nothing settled) meanwhile, then sends it
  // if it was recorded and drops it if not. At the job's delivery deadline
  // it stops asking: nothing more is sent from here, and a row that did
  // land is settled by whichever master reopens it.
  void ask_whether_recorded(recording r);

  asio::io_context& io_;
  const base::master_config& cfg_;
  pki::key_registry& keys_;
  minion_cache& cache_;
  target::nodegroups nodegroups_;
  publisher_acl acl_;
  delivery& deliveries_;
  store_worker& store_;
  event_bus& events_;
  jid_generator jids_;
  std::atomic<uint64_t> published_{0};
  std::atomic<uint64_t> refused_{0};
  std::atomic<int64_t> unrecorded_{0};
  std::function<bool(const std::string&)> member_alive_;
  std::string name_ = "local";
};

}  // namespace brine::master
