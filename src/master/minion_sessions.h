#pragma once

#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/config.h"
#include "master/event_bus.h"
#include "master/figures.h"
#include "master/session.h"
#include "master/store_worker.h"
#include "net/async_semaphore.h"
#include "net/connection.h"
#include "net/tls.h"
#include "pki/key_registry.h"

namespace brine::master {

// The minion side of the master: the accept loop, TLS handshakes (bounded in
// number), authentication against the key registry, and one session per
// minion id. Messages about jobs from accepted minions, and minions becoming
// ready or going away, are handed to the handlers; everything else (auth,
// ping, protocol violations) is dealt with here. Delivery, store_sync and
// cluster_node see it as their session_directory.
//
// Lifecycle: construct, listen() (throws base::error), set_handlers(),
// start(); stop() closes the listener; clear() drops every session at exit.
// Threading: each connection on its own strand; the session map under a
// mutex; every public method is safe from any thread.
class minion_sessions final : public session_directory {
 public:
  struct handlers {
    // A minion's key is accepted and its connection live (a new connection,
    // or a pending one just accepted).
    std::function<void(const session_ptr&)> ready;
    // The session that was current for its id has ended.
    std::function<void(const session_ptr&)> gone;
    // job_ack, job_return, job_refused, grains, pillar_request and file_request from an
    // accepted minion; a call connection's pillar_request (s->call) too.
    std::function<void(const session_ptr&, proto::message&&)> minion_message;
  };

  minion_sessions(asio::io_context& io, const base::master_config& cfg, const net::tls_context& tls,
                  pki::key_registry& keys, store_worker& store, event_bus& events,
                  figures& figures);

  // Binds the minion port; throws base::error naming the fix.
  void listen();
  void set_handlers(handlers h) { handlers_ = std::move(h); }
  // Starts accepting; logs the descriptor limit.
  void start();
  void stop();
  // Drops every session (at exit, after the io_context stopped).
  void clear();
  uint16_t port() const;

  session_ptr find_accepted(const std::string& id) override;
  size_t connected() override;
  // Closes every minion connection, telling each why (this master leaves a
  // cluster: its minions move to the others through the load balancer).
  void drop_all(const std::string& why);

  // Persists key changes (in order) through the store thread.
  void persist(const std::vector<pki::key_change>& changes);
  // After `brine key`: persists the changes, announces them, pushes an
  // acceptance to a waiting minion and cuts off rejected or deleted ones.
  void apply_key_changes(const pki::key_op_result& r, const std::string& act);
  // Another master changed these ids' keys in the shared store (already in
  // the key registry): the same as apply_key_changes, without persisting.
  void apply_remote_key_changes(const std::vector<std::string>& ids) override;
  size_t shed(size_t n, const std::string& why) override;

 private:
  asio::awaitable<void> accept_loop();
  asio::awaitable<void> handle(asio::ip::tcp::socket socket, std::shared_ptr<void> slot);
  void admit(asio::any_io_executor executor, std::unique_ptr<net::tls_stream> stream,
             proto::frame_decoder decoder, const std::string& id, const std::string& fingerprint,
             const std::string& pubkey, std::string_view purpose, std::shared_ptr<void> slot);
  void authenticate_call(const session_ptr& s, store::key_state state, uint64_t request_id);
  // Acts on one id whose keys changed by `act` (accept, reject, delete).
  void act_on_key_change(const std::string& id, const std::string& act);
  void on_call_message(const session_ptr& s, proto::message&& m);
  void authenticate(const session_ptr& s, store::key_state state, uint64_t request_id);
  void on_message(const session_ptr& s, proto::message&& m);
  void on_closed(const session_ptr& s, std::error_code ec, const std::string& detail);

  asio::io_context& io_;
  const base::master_config& cfg_;
  const net::tls_context& tls_;
  pki::key_registry& keys_;
  store_worker& store_;
  event_bus& events_;
  figures& figures_;
  handlers handlers_;
  asio::ip::tcp::acceptor acceptor_;
  // Bounds concurrent TLS handshakes: an auth storm queues (accepted sockets
  // waiting their turn) instead of collapsing.
  net::async_semaphore handshakes_;
  net::keepalive keepalive_;  // from the tcp_keepalive* options
  // Minion connections open now, and how many the descriptor limit allows
  // while keeping room for the store, the local API and the CLI.
  std::atomic<int64_t> connections_{0};
  int64_t max_connections_ = 0;
  bool at_limit_ = false;  // accept loop only
  std::atomic<bool> stopping_{false};

  std::mutex mu_;
  std::unordered_map<std::string, session_ptr> sessions_;
  // brine call connections, held here until they close (never in sessions_).
  std::unordered_set<session_ptr> calls_;
};

}  // namespace brine::master
