#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <asio/thread_pool.hpp>

#include "minion/spool.h"
#include "modules/registry.h"
#include "net/connection.h"
#include "net/tls.h"

namespace brine::minion {

// What one minion connection needs to know (a subset of minion_config, so
// that simulated minions can be made without a file each).
struct agent_settings {
  std::string id;
  std::string master;
  uint16_t master_port = 4506;
  std::string source;  // config file, for messages
  std::chrono::seconds acceptance_wait_time{10};
  std::chrono::seconds acceptance_wait_time_max{0};
  std::chrono::seconds master_alive_interval{30};
  std::chrono::seconds job_timeout{3600};
  size_t max_frame_bytes = 16 * 1024 * 1024;
  std::string source_address;  // bind to this local address first (swarm); empty: any
};

enum class agent_state { connecting, pending, accepted, refused };

// Decides whether the master's key is to be trusted (master_finger, or trust
// on first use); `where` is "host:port" for messages.
using master_trust = std::function<bool(EVP_PKEY* key, const std::string& where)>;

// One minion's life with its master: connect, pin, authenticate, serve jobs,
// reconnect with jittered exponential backoff (slowly when refused). The
// minion daemon runs one; `brine swarm` runs thousands on one io_context.
//
// Lifecycle: construct, start(), stop() to end it; the owner keeps the agent
// and everything it references alive until the io_context has stopped.
// Threading: run() and the connection on the agent's strand; instant jobs
// (test.ping…) there too, every other job on a strand of its own; state
// guarded by mu_.
class agent {
 public:
  struct deps {
    const net::tls_context& tls;
    const net::tls_identity* identity;  // null: the context's own
    const modules::registry& functions;
    return_spool& spool;
    asio::thread_pool* blocking;  // for a blocking spool; may be null
    master_trust trust;
    std::function<void(agent_state from, agent_state to)> on_state;  // may be empty
    std::function<void(const std::string& jid)> on_publish;  // may be empty (swarm metrics)
  };

  agent(asio::any_io_executor executor, agent_settings settings, deps d);

  // Runs the agent on its own strand until stop(). Everything of one agent
  // (its loop, connection handlers and timers) must share that strand.
  void start();
  void stop();
  agent_state state() const;
  // Jobs received since start (repeat publishes of a running job included).
  uint64_t jobs_received() const { return jobs_received_.load(std::memory_order_relaxed); }

 private:
  enum class outcome { lost, connect_failed, refused, untrusted_master };

  asio::awaitable<void> run();
  asio::awaitable<outcome> serve_once();
  void on_message(proto::message&& m);
  void on_accepted();
  asio::awaitable<void> run_job(proto::message m);
  void send_return(const encoded_return& body);
  void set_state(agent_state s);

  asio::any_io_executor executor_;
  agent_settings cfg_;
  deps deps_;

  mutable std::mutex mu_;
  std::shared_ptr<net::connection> conn_;
  agent_state state_ = agent_state::connecting;  // as others see it
  // The current connection's authentication, reset on each connect.
  enum class auth_state { waiting, pending, accepted, refused } auth_ = auth_state::waiting;
  std::chrono::steady_clock::time_point last_rx_;
  std::set<std::string> running_;
  bool said_pending_ = false;
  std::shared_ptr<asio::steady_timer> wake_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> jobs_received_{0};
};

}  // namespace brine::minion
