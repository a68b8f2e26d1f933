#pragma once

#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "net/tls.h"
#include "pki/keys.h"
#include "proto/message.h"
#include "store/store.h"

namespace brine::cluster {

// Links between the members of a cluster (docs/architecture.md, "The master
// cluster"): mutual TLS on each member's peer port (`cluster_port`), each
// side identified by its own key and admitted only with a hello proved by
// the cluster key; then a ping a second from the dialing side. They say
// which members this one reaches directly and how fast (`brine cluster
// status`); jobs and returns travel through the store.
//
// Each member dials every other member's peer address (those in the store,
// and cluster_peers), so a pair has a link each way. A link that fails is
// dialed again after a jittered delay doubling from 0.5 s to 10 s.
//
// Lifecycle: listen() (throws base::error naming cluster_port), start(),
// stop(). Threading: coroutines on the io_context; set_targets() and
// states() from any thread.
class peer_links {
 public:
  struct settings {
    std::string cluster_id;
    std::string name;       // this member's name
    std::string interface;  // where the peer port listens
    uint16_t port = 4520;
    std::vector<std::string> static_peers;  // cluster_peers, host:port
    uint64_t max_frame_bytes = 1 << 20;
  };
  struct state {
    std::string name;  // the member at that address, once it said hello
    bool up = false;
    double rtt_ms = 0;
    std::string error;  // why the last attempt failed
  };

  peer_links(asio::io_context& io, settings s, const pki::keypair& own,
             const pki::keypair& cluster_key, store::member_record hello);
  ~peer_links();

  void listen();
  void start();
  void stop();
  // The addresses to keep links to, besides cluster_peers (the live
  // members' peer addresses); links to others end.
  void set_targets(std::set<std::string> addresses);
  // By peer address.
  std::map<std::string, state> states() const;

 private:
  asio::awaitable<void> accept_loop();
  asio::awaitable<void> serve(asio::ip::tcp::socket socket);
  asio::awaitable<void> dial_loop(std::string address);
  // One link's life: connect, hello both ways, pings until it fails;
  // returns why it ended.
  asio::awaitable<std::string> link_once(std::string address);
  bool wanted(const std::string& address) const;
  void set_state(const std::string& address, state s);

  asio::io_context& io_;
  settings s_;
  const pki::keypair& own_;
  const pki::keypair& cluster_key_;
  nlohmann::json hello_;
  net::tls_context server_tls_;
  net::tls_context client_tls_;
  asio::ip::tcp::acceptor acceptor_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  std::set<std::string> targets_;  // from the store
  std::set<std::string> dialing_;  // a dial_loop runs for each
  std::set<std::string> self_;     // addresses that turned out to be this member
  std::map<std::string, state> states_;
};

}  // namespace brine::cluster
