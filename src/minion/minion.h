#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/thread_pool.hpp>

#include "base/config.h"
#include "minion/spool.h"
#include "modules/registry.h"
#include "net/connection.h"
#include "net/tls.h"
#include "pki/keys.h"

namespace brine::minion {

// The minion daemon: keeps one authenticated connection to its master,
// reconnecting with jittered exponential backoff; runs published jobs
// concurrently, each on its own strand with a time limit; keeps every return
// on disk until the master acknowledges it.
//
// Lifecycle: the constructor prepares directories and keys (throws
// base::error); run() serves until SIGTERM/SIGINT.
// Threading: an io_context run by two threads; the connection and each job
// on their own strands; spool writes on a one-thread pool.
class minion {
 public:
  explicit minion(base::minion_config cfg);
  int run();

 private:
  enum class outcome { lost, connect_failed, refused, untrusted_master };

  asio::awaitable<void> main_loop();
  asio::awaitable<outcome> serve_once();
  bool trust_master(EVP_PKEY* key, const std::string& where);
  void on_message(proto::message&& m);
  void on_accepted();
  asio::awaitable<void> run_job(proto::message m);
  void send_return(const nlohmann::json& body);
  void stop();

  base::minion_config cfg_;
  asio::io_context io_;
  asio::thread_pool blocking_{1};
  pki::keypair identity_;
  std::unique_ptr<net::tls_context> tls_;
  modules::registry functions_;
  spool spool_;

  // State of the current connection; guarded by mu_.
  std::mutex mu_;
  std::shared_ptr<net::connection> conn_;
  enum class auth_state { waiting, pending, accepted, refused } auth_ = auth_state::waiting;
  std::chrono::steady_clock::time_point last_rx_;
  std::set<std::string> running_;
  bool said_pending_ = false;

  std::atomic<bool> stopping_{false};
  std::shared_ptr<asio::steady_timer> wake_;
};

}  // namespace brine::minion
