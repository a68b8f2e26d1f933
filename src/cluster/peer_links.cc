#include "cluster/peer_links.h"

#include <spdlog/spdlog.h>

#include <asio/co_spawn.hpp>
#include <asio/connect.hpp>
#include <asio/detached.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include "base/backoff.h"
#include "base/config.h"
#include "base/error.h"
#include "cluster/identity.h"
#include "net/deadline.h"
#include "proto/frame.h"

namespace brine::cluster {

using nlohmann::json;
using proto::msg_type;
using namespace std::chrono_literals;

namespace {

constexpr auto k_handshake_limit = 10s;
constexpr auto k_ping_every = 1s;
constexpr auto k_pong_limit = 3s;
// The dialed side closes a link that sent nothing (not even a ping) this long.
constexpr auto k_idle_limit = 10s;
constexpr auto k_first_retry = 500ms;
constexpr auto k_max_retry = 10s;

// The next message on `stream` within `limit`; nullopt (and `why`) when the
// link failed, sent garbage or stayed silent.
asio::awaitable<std::optional<proto::message>> read_message(net::tls_stream& stream,
                                                            proto::frame_decoder& decoder,
                                                            std::chrono::steady_clock::duration limit,
                                                            std::string& why) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    proto::message m;
    auto st = decoder.next(m);
    if (st == proto::frame_decoder::status::ready) co_return m;
    if (st == proto::frame_decoder::status::error) {
      why = decoder.error_detail();
      co_return std::nullopt;
    }
    auto left = deadline - std::chrono::steady_clock::now();
    if (left <= decltype(left)::zero()) {
      why = "nothing received in time";
      co_return std::nullopt;
    }
    auto r = co_await net::with_deadline(stream.read_into(decoder), left);
    if (!r) {
      why = "nothing received in time";
      co_return std::nullopt;
    }
    if (*r) {
      why = stream.last_error().empty() ? r->message() : stream.last_error();
      co_return std::nullopt;
    }
  }
}

asio::awaitable<bool> write_message(net::tls_stream& stream, proto::message m) {
  auto bytes = proto::encode_frame(m);
  auto ec = co_await stream.write_all(bytes);
  co_return !ec;
}

}  // namespace

peer_links::peer_links(asio::io_context& io, settings s, const pki::keypair& own,
                       const pki::keypair& cluster_key, store::member_record hello)
    : io_(io),
      s_(std::move(s)),
      own_(own),
      cluster_key_(cluster_key),
      hello_(hello_body(hello)),
      server_tls_(net::tls_context::role::server, own, "brine-peer"),
      client_tls_(net::tls_context::role::client, own, "brine-peer"),
      acceptor_(io) {}

peer_links::~peer_links() = default;

void peer_links::listen() {
  asio::ip::tcp::endpoint ep(asio::ip::make_address(s_.interface), s_.port);
  std::error_code ec;
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    throw base::error("cluster " + s_.cluster_id + ": cannot listen for peers on " +
                      s_.interface + ":" + std::to_string(s_.port) + ": " + ec.message() +
                      "; set cluster_port to a free port");
  }
}

void peer_links::start() {
  asio::co_spawn(io_, accept_loop(), asio::detached);
  std::set<std::string> initial(s_.static_peers.begin(), s_.static_peers.end());
  std::lock_guard lock(mu_);
  for (const auto& a : initial) {
    if (dialing_.insert(a).second) asio::co_spawn(io_, dial_loop(a), asio::detached);
  }
}

void peer_links::stop() {
  stopping_ = true;
  std::error_code ec;
  acceptor_.close(ec);
}

void peer_links::set_targets(std::set<std::string> addresses) {
  std::lock_guard lock(mu_);
  targets_ = std::move(addresses);
  if (stopping_) return;
  for (const auto& a : targets_) {
    if (self_.contains(a)) continue;
    if (dialing_.insert(a).second) asio::co_spawn(io_, dial_loop(a), asio::detached);
  }
}

std::map<std::string, peer_links::state> peer_links::states() const {
  std::lock_guard lock(mu_);
  return states_;
}

bool peer_links::wanted(const std::string& address) const {
  std::lock_guard lock(mu_);
  if (stopping_ || self_.contains(address)) return false;
  return targets_.contains(address) ||
         std::find(s_.static_peers.begin(), s_.static_peers.end(), address) !=
             s_.static_peers.end();
}

void peer_links::set_state(const std::string& address, state st) {
  std::lock_guard lock(mu_);
  states_[address] = std::move(st);
}

asio::awaitable<void> peer_links::accept_loop() {
  for (;;) {
    std::error_code ec;
    auto socket = co_await acceptor_.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (stopping_) co_return;
    if (ec) {
      if (ec == asio::error::operation_aborted) co_return;
      spdlog::warn("cluster {}: accepting a peer connection: {}", s_.cluster_id, ec.message());
      continue;
    }
    asio::co_spawn(io_, serve(std::move(socket)), asio::detached);
  }
}

asio::awaitable<void> peer_links::serve(asio::ip::tcp::socket socket) {
  net::tune_socket(socket, net::keepalive{true, 10, 5, 3});
  net::tls_stream stream(std::move(socket), server_tls_, net::tls_context::role::server);
  const std::string from = stream.peer();
  auto hs = co_await net::with_deadline(stream.handshake(), k_handshake_limit);
  if (!hs || *hs) {
    spdlog::warn("cluster {}: peer connection from {}: TLS handshake failed: {}", s_.cluster_id,
                 from, hs ? stream.last_error() : std::string("timed out"));
    stream.close();
    co_return;
  }
  proto::frame_decoder decoder(s_.max_frame_bytes);
  std::string why;
  auto hello = co_await read_message(stream, decoder, k_handshake_limit, why);
  if (hello && hello->type != msg_type::peer_hello) {
    why = "the first message must be peer_hello, got " + std::string(proto::to_string(hello->type));
  } else if (hello) {
    why = check_hello(hello->body, stream.peer_key(), cluster_key_, s_.cluster_id);
  }
  if (!why.empty()) {
    spdlog::warn("cluster {}: peer connection from {} refused: {}", s_.cluster_id, from, why);
    proto::message refusal{msg_type::error, 0, {{"message", "refused: " + why}}};
    co_await write_message(stream, std::move(refusal));
    stream.close();
    co_return;
  }
  std::string name = hello->body.value("name", "");
  proto::message mine{msg_type::peer_hello, 0, hello_};
  if (!co_await write_message(stream, std::move(mine))) {
    stream.close();
    co_return;
  }
  spdlog::info("cluster {}: peer {} linked from {}", s_.cluster_id, name, from);
  while (!stopping_) {
    auto m = co_await read_message(stream, decoder, k_idle_limit, why);
    if (!m) break;
    if (m->type == msg_type::ping) {
      proto::message pong{msg_type::pong, m->id, json::object()};
      if (!co_await write_message(stream, std::move(pong))) break;
    }
  }
  stream.close();
}

asio::awaitable<void> peer_links::dial_loop(std::string address) {
  base::backoff delay(std::chrono::duration_cast<std::chrono::milliseconds>(k_first_retry),
                      std::chrono::duration_cast<std::chrono::milliseconds>(k_max_retry));
  bool warned = false;
  asio::steady_timer timer(io_);
  while (wanted(address)) {
    auto started = std::chrono::steady_clock::now();
    std::string why = co_await link_once(address);
    if (!wanted(address)) break;
    // A link that lived a while starts its backoff afresh.
    if (std::chrono::steady_clock::now() - started > k_max_retry) delay.reset();
    state st;
    {
      std::lock_guard lock(mu_);
      st = states_[address];
    }
    st.up = false;
    st.error = why;
    set_state(address, st);
    if (!warned) {
      spdlog::warn("cluster {}: peer {}: {}; trying again with backoff", s_.cluster_id, address,
                   why);
      warned = true;
    }
    timer.expires_after(delay.next());
    std::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  std::lock_guard lock(mu_);
  dialing_.erase(address);
  if (!self_.contains(address)) states_.erase(address);
}

asio::awaitable<std::string> peer_links::link_once(std::string address) {
  auto parsed = base::parse_master_address(address, s_.port);
  if (!parsed) co_return "not a host:port address";
  asio::ip::tcp::resolver resolver(io_);
  std::error_code ec;
  auto endpoints = co_await resolver.async_resolve(
      parsed->host, std::to_string(parsed->port), asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return "cannot resolve " + parsed->host + ": " + ec.message();
  asio::ip::tcp::socket socket(io_);
  auto connected = co_await net::with_deadline(
      asio::async_connect(socket, endpoints, asio::redirect_error(asio::use_awaitable, ec)),
      k_handshake_limit);
  if (!connected) co_return "connect timed out";
  if (ec) co_return "connect: " + ec.message();
  net::tune_socket(socket, net::keepalive{true, 10, 5, 3});
  net::tls_stream stream(std::move(socket), client_tls_, net::tls_context::role::client);
  auto hs = co_await net::with_deadline(stream.handshake(), k_handshake_limit);
  if (!hs || *hs) {
    stream.close();
    co_return "TLS handshake: " + (hs ? stream.last_error() : std::string("timed out"));
  }
  proto::message mine{msg_type::peer_hello, 0, hello_};
  if (!co_await write_message(stream, std::move(mine))) {
    stream.close();
    co_return "the link closed before the hello";
  }
  proto::frame_decoder decoder(s_.max_frame_bytes);
  std::string why;
  auto reply = co_await read_message(stream, decoder, k_handshake_limit, why);
  if (!reply) {
    stream.close();
    co_return "no hello: " + why;
  }
  if (reply->type == msg_type::error) {
    stream.close();
    co_return "it refused this master: " + reply->body.value("message", "");
  }
  why = reply->type == msg_type::peer_hello
            ? check_hello(reply->body, stream.peer_key(), cluster_key_, s_.cluster_id)
            : "its first message was not peer_hello";
  if (!why.empty()) {
    stream.close();
    co_return "refused it: " + why;
  }
  state st;
  st.name = reply->body.value("name", "");
  if (st.name == s_.name) {
    std::lock_guard lock(mu_);
    self_.insert(address);
    states_.erase(address);
    stream.close();
    co_return "this master itself";
  }
  st.up = true;
  set_state(address, st);
  spdlog::info("cluster {}: linked to peer {} at {}", s_.cluster_id, st.name, address);
  asio::steady_timer timer(io_);
  uint64_t n = 0;
  while (wanted(address)) {
    auto sent = std::chrono::steady_clock::now();
    proto::message ping{msg_type::ping, ++n, json::object()};
    if (!co_await write_message(stream, std::move(ping))) {
      why = "the link closed";
      break;
    }
    auto pong = co_await read_message(stream, decoder, k_pong_limit, why);
    if (!pong) {
      why = "no answer to a ping: " + why;
      break;
    }
    st.rtt_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - sent)
                    .count();
    set_state(address, st);
    timer.expires_after(k_ping_every);
    std::error_code ignored;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  }
  stream.close();
  co_return why.empty() ? "no longer a member" : why;
}

}  // namespace brine::cluster
