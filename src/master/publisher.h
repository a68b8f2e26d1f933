#pragma once

#include <functional>
#include <nlohmann/json.hpp>

#include "base/config.h"
#include "master/event_bus.h"
#include "master/jid.h"
#include "master/minion_sessions.h"
#include "master/store_worker.h"
#include "pki/key_registry.h"

namespace brine::master {

// Jobs: resolves a target against the accepted keys, allocates the jid,
// records the job and sends one shared encoding of the publish to every
// targeted minion that is connected.
//
// Threading: publish() from any thread.
class publisher {
 public:
  publisher(pki::key_registry& keys, minion_sessions& sessions, store_worker& store,
            event_bus& events)
      : keys_(keys), sessions_(sessions), store_(store), events_(events) {}

  // Called with the reply for the client ({ok, jid, minions, connected} or
  // {ok: false, error}) before any publish frame goes out, so that the caller
  // can subscribe to the job's returns first.
  using recorded = std::function<void(const nlohmann::json& reply)>;

  // `body`: target, tgt_type (glob, list), fun, args, kwargs, user.
  void publish(const nlohmann::json& body, const recorded& on_recorded);

 private:
  pki::key_registry& keys_;
  minion_sessions& sessions_;
  store_worker& store_;
  event_bus& events_;
  jid_generator jids_;
};

}  // namespace brine::master
