#pragma once

#include <asio/io_context.hpp>
#include <functional>
#include <nlohmann/json.hpp>

#include "base/config.h"
#include "master/delivery.h"
#include "master/event_bus.h"
#include "master/jid.h"
#include "master/minion_sessions.h"
#include "master/store_worker.h"
#include "pki/key_registry.h"

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
  publisher(asio::io_context& io, const base::master_config& cfg, pki::key_registry& keys,
            delivery& deliveries, store_worker& store, event_bus& events)
      : io_(io), cfg_(cfg), keys_(keys), deliveries_(deliveries), store_(store), events_(events) {}

  // Called once with the reply for the client: {ok, jid, minions, connected,
  // deadline} or {ok: false, error}. For a job, it comes before any publish
  // frame goes out, so that the caller can subscribe to the job's returns
  // first.
  using recorded = std::function<void(const nlohmann::json& reply)>;

  // `body`: target, tgt_type (glob, list), fun, args, kwargs, user, and
  // `timeout`: seconds from now until the delivery deadline (publish_hold
  // when absent).
  void publish(const nlohmann::json& body, recorded on_recorded);

  // The publish frame of a recorded job (also for jobs reloaded after a
  // restart).
  static net::frame_ptr frame_of(const store::job_record& job);

 private:
  asio::io_context& io_;
  const base::master_config& cfg_;
  pki::key_registry& keys_;
  delivery& deliveries_;
  store_worker& store_;
  event_bus& events_;
  jid_generator jids_;
};

}  // namespace brine::master
