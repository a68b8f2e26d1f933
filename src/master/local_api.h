#pragma once

#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <asio/local/stream_protocol.hpp>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/config.h"
#include "master/cluster_node.h"
#include "master/delivery.h"
#include "master/event_bus.h"
#include "master/minion_cache.h"
#include "master/minion_sessions.h"
#include "master/publisher.h"
#include "net/connection.h"
#include "pki/key_registry.h"
#include "pki/keys.h"

namespace brine::master {

// The master's local API: the Unix socket `<sock_dir>/master.sock` (mode
// 0600: only the master's uid and root may connect; 0666 when the master
// config has a publisher_acl, and then other users may publish what it
// allows them, and nothing else) that `brine cmd`,
// `brine key` and the other client commands use; see docs/protocol.md for its
// operations.
//
// Lifecycle: listen() (throws base::error, e.g. when another master answers
// on the socket), start(); stop() closes the listener; the destructor
// removes the socket file. Threading: each client on its own strand.
class local_api {
 public:
  local_api(asio::io_context& io, const base::master_config& cfg, const pki::keypair& identity,
            pki::key_registry& keys, minion_sessions& sessions, delivery& deliveries,
            publisher& jobs, event_bus& events, minion_cache& cache);
  ~local_api();

  // A member of a cluster answers `cluster_status` and `cluster_remove_peer`.
  void set_cluster(cluster_node* c) { cluster_ = c; }
  // An operation answered elsewhere (`brine fileserver update` by the file
  // service): `h` gets the request body and a function that sends its reply,
  // callable from any thread. Privileged clients only. Before start().
  using handler =
      std::function<void(const nlohmann::json& body, std::function<void(nlohmann::json)> reply)>;
  void handle(const std::string& op, handler h) { handlers_[op] = std::move(h); }

  void listen();
  void start();
  void stop();
  const std::string& path() const { return path_; }

 private:
  using subscriptions = std::shared_ptr<std::vector<uint64_t>>;
  // Who is on the other end, from the socket's peer credentials.
  struct client {
    long uid = -1;
    std::string user;
    bool privileged = false;  // root or the master's own user
  };

  asio::awaitable<void> accept_loop();
  void on_message(const std::shared_ptr<net::connection>& c, const client& who,
                  proto::message&& m, const subscriptions& subs);
  void publish(const std::shared_ptr<net::connection>& c, const client& who, uint64_t request_id,
               nlohmann::json body, const subscriptions& subs);
  nlohmann::json keys(const std::string& op, const nlohmann::json& body);

  asio::io_context& io_;
  const base::master_config& cfg_;
  const pki::keypair& identity_;
  pki::key_registry& keys_;
  minion_sessions& sessions_;
  delivery& deliveries_;
  publisher& jobs_;
  event_bus& events_;
  minion_cache& cache_;
  cluster_node* cluster_ = nullptr;
  asio::local::stream_protocol::acceptor acceptor_;
  std::string path_;
  std::atomic<bool> stopping_{false};
  std::map<std::string, handler> handlers_;
};

}  // namespace brine::master
