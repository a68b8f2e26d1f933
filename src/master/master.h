#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/steady_timer.hpp>

#include "base/config.h"
#include "master/event_bus.h"
#include "master/jid.h"
#include "master/store_worker.h"
#include "net/async_semaphore.h"
#include "net/connection.h"
#include "net/tls.h"
#include "pki/key_registry.h"
#include "pki/keys.h"

namespace brine::master {

// The master daemon: accepts minions over mutual TLS, decides their keys,
// publishes jobs to targeted minions, stores returns, and serves the CLI on a
// Unix socket.
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
  struct session {
    std::string id;
    std::string fingerprint;
    std::string pubkey;
    std::shared_ptr<net::connection> conn;
    bool accepted = false;
  };

  asio::awaitable<void> accept_minions();
  asio::awaitable<void> handle_minion(asio::ip::tcp::socket socket,
                                      std::shared_ptr<void> slot);
  asio::awaitable<void> accept_api();
  asio::awaitable<void> purge_loop();
  // Sends the return_acks still waiting for a frame to ride with.
  asio::awaitable<void> ack_flush_loop();

  void admit(asio::any_io_executor executor, std::unique_ptr<net::tls_stream> stream,
             proto::frame_decoder decoder, const std::string& id, uint64_t request_id,
             const std::string& fingerprint, const std::string& pubkey,
             std::shared_ptr<void> slot);
  void on_minion_message(const std::shared_ptr<session>& s, proto::message&& m);
  void on_minion_closed(const std::shared_ptr<session>& s, std::error_code ec,
                        const std::string& detail);
  void authenticate(const std::shared_ptr<session>& s, store::key_state state,
                    uint64_t request_id);
  void on_return(const std::shared_ptr<session>& s, proto::message&& m);

  void on_api_message(const std::shared_ptr<net::connection>& c, proto::message&& m,
                      const std::shared_ptr<std::vector<uint64_t>>& subscriptions);
  nlohmann::json api_publish(const std::shared_ptr<net::connection>& c, uint64_t request_id,
                             const nlohmann::json& body,
                             const std::shared_ptr<std::vector<uint64_t>>& subscriptions);
  nlohmann::json api_keys(const std::string& op, const nlohmann::json& body);
  void apply_key_changes(const pki::key_op_result& r, const std::string& act);
  void persist(const std::vector<pki::key_change>& changes);

  void stop();

  base::master_config cfg_;
  asio::io_context io_;
  pki::keypair identity_;
  std::unique_ptr<net::tls_context> tls_;
  std::unique_ptr<store_worker> store_;
  pki::key_registry keys_;
  event_bus events_;
  jid_generator jids_;
  asio::ip::tcp::acceptor acceptor_;
  asio::local::stream_protocol::acceptor api_acceptor_;
  std::string api_path_;
  // Bounds concurrent TLS handshakes: an auth storm queues (accepted sockets
  // waiting their turn) instead of collapsing.
  net::async_semaphore handshakes_;
  net::keepalive keepalive_;  // from the tcp_keepalive* options
  // Minion connections open now, and how many the descriptor limit allows
  // while keeping room for the store, the local API and the CLI.
  std::atomic<int64_t> minion_connections_{0};
  int64_t max_minion_connections_ = 0;
  bool at_limit_ = false;  // accept loop only

  std::mutex sessions_mu_;
  std::unordered_map<std::string, std::shared_ptr<session>> sessions_;
  std::mutex api_mu_;
  std::vector<std::weak_ptr<net::connection>> api_conns_;
  std::atomic<bool> stopping_{false};
  // Connections holding deferred return_acks (see on_return).
  struct waiting_ack {
    std::weak_ptr<net::connection> conn;
    std::chrono::steady_clock::time_point due;
  };
  std::mutex ack_mu_;
  std::deque<waiting_ack> acks_waiting_;
};

}  // namespace brine::master
