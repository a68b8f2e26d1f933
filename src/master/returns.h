#pragma once

#include <asio/awaitable.hpp>
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>

#include "master/event_bus.h"
#include "master/minion_sessions.h"
#include "master/store_worker.h"

namespace brine::master {

// Returns from minions: each goes to the store (batched by store_worker);
// once committed, its event goes out and the minion gets a return_ack, which
// rides with the next frame to that minion or goes within a second.
//
// Lifecycle: owned by the master; flush_loop() runs until `stopping`.
// Threading: on_return() from any connection's strand; acks are queued from
// the store thread; safe from any thread.
class returns {
 public:
  returns(store_worker& store, event_bus& events) : store_(store), events_(events) {}

  void on_return(const std::shared_ptr<session>& s, proto::message&& m);
  // Sends the return_acks still waiting for a frame to ride with.
  asio::awaitable<void> flush_loop(const std::atomic<bool>& stopping);

 private:
  store_worker& store_;
  event_bus& events_;
  // Connections holding deferred return_acks (see on_return).
  struct waiting_ack {
    std::weak_ptr<net::connection> conn;
    std::chrono::steady_clock::time_point due;
  };
  std::mutex mu_;
  std::deque<waiting_ack> waiting_;
};

}  // namespace brine::master
