#include "master/minion_sessions.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <asio/co_spawn.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/use_awaitable.hpp>

#include "base/clock.h"
#include "base/error.h"
#include "net/deadline.h"

namespace brine::master {

using nlohmann::json;
using proto::msg_type;
using store::key_state;

namespace {

// What this master takes beyond the first protocol, listed in every
// auth_reply accepted (docs/protocol.md).
// What an accepted minion may send beyond the first protocol: scheduled
// runs always, compile requests when this master compiles (state_compile).
json accepted_features(const base::master_config& cfg) {
  json f = json::array({std::string(proto::k_feature_schedule)});
  if (cfg.state_compile == "master") f.push_back(std::string(proto::k_feature_compile));
  return f;
}

// A minion id as Salt allows it: printable, no path separators, bounded.
bool valid_minion_id(const std::string& id) {
  if (id.empty() || id.size() > 255) return false;
  for (unsigned char c : id) {
    if (c <= 0x20 || c == 0x7f || c == '/' || c == '\\') return false;
  }
  return true;
}

std::string auth_message(key_state s) {
  switch (s) {
    case key_state::accepted:
      return "key accepted";
    case key_state::pending:
      return "key pending: accept it on the master with 'brine key accept ID'";
    case key_state::rejected:
      return "key rejected by the master";
    case key_state::denied:
      return "key denied: the master holds a different key for this id; delete the old key "
             "on the master ('brine key delete ID') if this minion was reinstalled";
  }
  return "";
}

// The request id under which admit() answers a connection's first auth; later
// auths of a pending minion carry the minion's own ids and are not logged.
constexpr uint64_t k_first_auth = 0;

// Descriptors kept back from minions: the store's files, the local API and its
// clients, logs, and the listening sockets must still open at the limit.
constexpr rlim_t k_reserved_descriptors = 64;

// Built outside coroutines: g++ 12 miscompiles brace-initialised json with
// string literals inside a coroutine body ("array used as initializer").
std::vector<uint8_t> error_frame(const std::string& message) {
  return proto::encode_frame({msg_type::error, 0, {{"message", message}}});
}

}  // namespace

minion_sessions::minion_sessions(asio::io_context& io, const base::master_config& cfg,
                                 const net::tls_context& tls, pki::key_registry& keys,
                                 store_worker& store, event_bus& events, figures& figures)
    : io_(io),
      cfg_(cfg),
      tls_(tls),
      keys_(keys),
      store_(store),
      events_(events),
      figures_(figures),
      acceptor_(io),
      handshakes_(cfg.max_concurrent_handshakes),
      keepalive_{cfg.tcp_keepalive, static_cast<int>(cfg.tcp_keepalive_idle),
                 static_cast<int>(cfg.tcp_keepalive_intvl),
                 static_cast<int>(cfg.tcp_keepalive_cnt)} {}

void minion_sessions::listen() {
  std::error_code ec;
  auto address = asio::ip::make_address(cfg_.interface, ec);
  if (ec) throw base::error("interface " + cfg_.interface + " is not an IP address");
  asio::ip::tcp::endpoint ep(address, cfg_.port);
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    throw base::error("cannot listen on " + cfg_.interface + ":" + std::to_string(cfg_.port) +
                      ": " + ec.message() + "; stop the process using it or set 'port' in " +
                      cfg_.source);
  }
}

uint16_t minion_sessions::port() const { return acceptor_.local_endpoint().port(); }

void minion_sessions::start() {
  struct rlimit rl {};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  max_connections_ = rl.rlim_cur > k_reserved_descriptors
                         ? static_cast<int64_t>(rl.rlim_cur - k_reserved_descriptors)
                         : 1;
  spdlog::info("descriptor limit {} allows {} connected minions", rl.rlim_cur, max_connections_);
  asio::co_spawn(io_, accept_loop(), net::logged("minion accept loop"));
}

void minion_sessions::stop() {
  stopping_ = true;
  std::error_code ec;
  acceptor_.close(ec);
}

void minion_sessions::clear() {
  std::lock_guard lock(mu_);
  sessions_.clear();
  calls_.clear();
}

minion_sessions::session_ptr minion_sessions::find_accepted(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || !it->second->accepted || it->second->returns_only) return nullptr;
  return it->second;
}

size_t minion_sessions::connected() {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [id, s] : sessions_) n += s->accepted && !s->returns_only ? 1 : 0;
  return n;
}

void minion_sessions::drop_all(const std::string& why) {
  std::vector<session_ptr> all;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, s] : sessions_) all.push_back(s);
  }
  for (const auto& s : all) {
    s->conn->send({proto::msg_type::error, 0, {{"message", why}}});
    s->conn->close_after_flush();
  }
}

size_t minion_sessions::shed(size_t n, const std::string& why) {
  std::vector<session_ptr> chosen;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, s] : sessions_) {
      if (chosen.size() >= n) break;
      if (s->accepted && !s->call && !s->returns_only) chosen.push_back(s);
    }
  }
  for (const auto& s : chosen) {
    s->conn->send({proto::msg_type::reconnect, 0, {{"reason", why}}});
    s->conn->close_after_flush();
  }
  return chosen.size();
}

asio::awaitable<void> minion_sessions::accept_loop() {
  for (;;) {
    // Accept as fast as connections come, so the kernel's accept queue never
    // overflows (dropped SYNs cost clients seconds of retransmission);
    // handle() then waits for a handshake slot.
    std::error_code ec;
    asio::ip::tcp::socket socket(asio::make_strand(io_));
    co_await acceptor_.async_accept(socket, asio::redirect_error(asio::use_awaitable, ec));
    if (stopping_) co_return;
    if (ec) {
      if (ec == asio::error::no_descriptors) {
        // Something else holds descriptors (the reserve ran out): the same
        // episode as below, said once.
        if (!std::exchange(at_limit_, true)) {
          spdlog::error(
              "descriptor limit reached: cannot accept a connection ({} minions "
              "connected); refusing new minion connections until descriptors free up "
              "(raise 'ulimit -n' to serve more)",
              connections_.load());
        }
        asio::steady_timer pause(io_, std::chrono::milliseconds(100));
        co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      }
      continue;
    }
    if (connections_.load() >= max_connections_) {
      // Refused at once rather than left in the backlog, with one line per
      // episode, not one per attempt.
      if (!std::exchange(at_limit_, true)) {
        spdlog::error(
            "descriptor limit reached: {} minions connected, the most that 'ulimit -n' "
            "allows; refusing new minion connections until some close (raise the "
            "limit to serve more)",
            connections_.load());
      }
      socket.close(ec);
      figures_.connections_refused.inc();
      continue;
    }
    if (std::exchange(at_limit_, false)) {
      spdlog::info("below the descriptor limit again: accepting minion connections");
    }
    ++connections_;
    std::shared_ptr<void> slot(nullptr, [this](void*) { --connections_; });
    auto executor = socket.get_executor();
    asio::co_spawn(executor, handle(std::move(socket), std::move(slot)),
                   net::logged("minion connection"));
  }
}

asio::awaitable<void> minion_sessions::handle(asio::ip::tcp::socket socket,
                                              std::shared_ptr<void> slot) {
  net::tune_socket(socket, keepalive_);
  auto executor = socket.get_executor();
  auto stream =
      std::make_unique<net::tls_stream>(std::move(socket), tls_, net::tls_context::role::server);
  const std::string peer = stream->peer();
  const auto limit = std::chrono::seconds(cfg_.handshake_timeout);

  figures_.handshakes_waiting.inc();
  co_await handshakes_.acquire();
  figures_.handshakes_waiting.dec();
  figures_.handshakes_in_flight.inc();
  auto hs = co_await net::with_deadline(stream->handshake(), limit);
  figures_.handshakes_in_flight.dec();
  handshakes_.release();
  (!hs || *hs ? figures_.handshakes_failed : figures_.handshakes_ok).inc();
  if (!hs || *hs) {
    std::string why = !hs ? "no handshake within " + std::to_string(cfg_.handshake_timeout) + " s"
                      : stream->last_error().empty() ? hs->message()
                                                     : stream->last_error();
    if (hs && *hs == base::errc::peer_closed) {
      spdlog::info("minion connection from {}: gone during the TLS handshake: {}", peer, why);
    } else {
      spdlog::warn("minion connection from {}: TLS handshake failed: {}", peer, why);
    }
    stream->close();
    co_return;
  }
  EVP_PKEY* key = stream->peer_key();
  if (!pki::is_ed25519(key)) {
    spdlog::warn("minion connection from {}: refused: its certificate key is not Ed25519", peer);
    stream->close();
    co_return;
  }
  const std::string fingerprint = pki::fingerprint(key);
  const std::string pubkey = pki::public_pem(key);

  // The first frame must be auth, within the same deadline.
  proto::frame_decoder decoder(cfg_.max_frame_bytes);
  proto::message first;
  bool have = false;
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!have) {
    auto st = decoder.next(first);
    if (st == proto::frame_decoder::status::ready) {
      have = true;
      break;
    }
    if (st == proto::frame_decoder::status::error) {
      spdlog::warn("minion connection from {}: {}; closing", peer, decoder.error_detail());
      co_await stream->write_all(error_frame(decoder.error_detail()));
      stream->close();
      co_return;
    }
    auto left = deadline - std::chrono::steady_clock::now();
    auto r = co_await net::with_deadline(stream->read_into(decoder),
                                         std::max(left, decltype(left)::zero()));
    if (!r || *r) {
      spdlog::warn("minion connection from {}: {} before authenticating", peer,
                   !r ? "no auth message in time" : "connection lost");
      stream->close();
      co_return;
    }
  }
  const auto id_field = first.body.find("id");
  std::string id = id_field != first.body.end() && id_field->is_string()
                       ? id_field->get<std::string>()
                       : std::string();
  if (first.type != msg_type::auth || !valid_minion_id(id)) {
    std::string why = first.type != msg_type::auth ? "first message must be auth, got " +
                                                         std::string(proto::to_string(first.type))
                                                   : "auth without a valid minion id";
    spdlog::warn("minion connection from {}: {}; closing", peer, why);
    co_await stream->write_all(error_frame(why));
    stream->close();
    co_return;
  }

  const auto purpose_field = first.body.find("purpose");
  std::string purpose = purpose_field != first.body.end() && purpose_field->is_string()
                            ? purpose_field->get<std::string>()
                            : std::string();
  if (purpose_field != first.body.end() && !purpose_field->is_null() &&
      purpose != proto::k_purpose_returns && purpose != proto::k_purpose_call) {
    // Never taken for a session: an unknown purpose must not replace the
    // minion's own connection.
    std::string why = "auth purpose '" +
                      (purpose_field->is_string() ? purpose : purpose_field->dump()) +
                      "' is not known (known: returns, call)";
    spdlog::warn("minion connection from {}: {}; closing", peer, why);
    co_await stream->write_all(error_frame(why));
    stream->close();
    co_return;
  }
  admit(executor, std::move(stream), std::move(decoder), id, fingerprint, pubkey, purpose,
        std::move(slot));
}

void minion_sessions::admit(asio::any_io_executor executor, std::unique_ptr<net::tls_stream> stream,
                            proto::frame_decoder decoder, const std::string& id,
                            const std::string& fingerprint, const std::string& pubkey,
                            std::string_view purpose, std::shared_ptr<void> slot) {
  const std::string peer = stream->peer();
  auto s = std::make_shared<session>();
  s->id = id;
  s->fingerprint = fingerprint;
  s->pubkey = pubkey;
  s->returns_only = purpose == proto::k_purpose_returns;
  s->call = purpose == proto::k_purpose_call;
  s->conn = std::make_shared<net::connection>(executor, std::move(stream), std::move(decoder));
  s->conn->attach(std::move(slot));
  if (s->call) {
    // Its handlers hold it weakly, as a session's: held here until it closes.
    std::lock_guard lock(mu_);
    calls_.insert(s);
  }
  auto weak = std::weak_ptr<session>(s);
  s->conn->start(
      [this, weak](proto::message&& m) {
        auto self = weak.lock();
        if (!self) return;
        if (self->call) {
          on_call_message(self, std::move(m));
        } else {
          on_message(self, std::move(m));
        }
      },
      [this, weak](std::error_code ec, const std::string& detail) {
        if (auto self = weak.lock()) on_closed(self, ec, detail);
      });
  auto d = keys_.present(id, pubkey, fingerprint, base::unix_now());
  if (d.new_key) figures_.key_signups.with({store::to_string(d.state)}).inc();
  persist(d.changes);
  events_.publish("brine/auth", {{"id", id},
                                 {"fingerprint", fingerprint},
                                 {"result", store::to_string(d.state)},
                                 {"peer", peer}});
  if (!d.changes.empty() && d.state != key_state::denied) {
    events_.publish("brine/key", {{"act", store::to_string(d.state)}, {"id", id}});
  }
  if (s->call) {
    authenticate_call(s, d.state, k_first_auth);
  } else {
    authenticate(s, d.state, k_first_auth);
  }
}

void minion_sessions::authenticate_call(const session_ptr& s, key_state state,
                                        uint64_t request_id) {
  // Never entered in sessions_: the minion's own session (the daemon may run
  // at the same time, with the same key) keeps its jobs, its connected state
  // and its place in the data cache.
  s->accepted = state == key_state::accepted;
  s->conn->send({msg_type::auth_reply,
                 request_id,
                 {{"status", store::to_string(state)}, {"message", auth_message(state)}}});
  if (state == key_state::accepted) {
    spdlog::info("brine call from minion {} at {}: key accepted", s->id, s->conn->peer());
    return;
  }
  // A pending key does not wait either: brine call fails and says why.
  spdlog::warn("brine call from minion {} at {} refused: {}", s->id, s->conn->peer(),
               auth_message(state));
  s->conn->close_after_flush();
}

void minion_sessions::on_call_message(const session_ptr& s, proto::message&& m) {
  std::string why;
  if (m.type == msg_type::ping) {
    s->conn->send({msg_type::pong, m.id, json::object()});
    return;
  }
  const bool files = m.type == msg_type::file_request;
  if (m.type != msg_type::pillar_request && !files) {
    why = "message " + std::string(proto::to_string(m.type)) +
          " on a brine call connection (only pillar_request, file_request and ping)";
  } else if (!s->accepted) {
    why = std::string(proto::to_string(m.type)) + " before the minion's key was accepted";
  } else if (auto g = m.body.find("grains");
             !files && (g == m.body.end() || !g->is_object())) {
    why = "pillar_request of a brine call without a grains map";
  } else if (!keys_.is_accepted(s->id, s->fingerprint)) {
    // Rejected or deleted since this connection authenticated.
    spdlog::info("brine call from minion {} at {}: its key is no longer accepted; closing", s->id,
                 s->conn->peer());
    s->conn->send({msg_type::auth_reply,
                   m.id,
                   {{"status", "rejected"}, {"message", "key no longer accepted by the master"}}});
    s->conn->close_after_flush();
    return;
  } else {
    if (handlers_.minion_message) handlers_.minion_message(s, std::move(m));
    return;
  }
  spdlog::warn("minion {} at {}: {}; closing", s->id, s->conn->peer(), why);
  s->conn->send({msg_type::error, m.id, {{"message", why}}});
  s->conn->close_after_flush();
}

void minion_sessions::authenticate(const session_ptr& s, key_state state, uint64_t request_id) {
  auto reply = [&] {
    json body = {{"status", store::to_string(state)}, {"message", auth_message(state)}};
    if (state == key_state::accepted) body["features"] = accepted_features(cfg_);
    s->conn->send({msg_type::auth_reply, request_id, std::move(body)});
  };
  if (state == key_state::accepted || state == key_state::pending) {
    session_ptr old;
    {
      std::lock_guard lock(mu_);
      auto& slot = sessions_[s->id];
      if (slot != s) old = std::exchange(slot, s);
      s->accepted = state == key_state::accepted;
    }
    // Accepted before the minion hears it: its first messages (grains) may
    // be read on another thread the moment the reply is out.
    reply();
    if (old) {
      spdlog::info("minion {} reconnected from {}; closing its previous connection {}", s->id,
                   s->conn->peer(), old->conn->peer());
      old->conn->close();
    }
    if (state == key_state::accepted && s->returns_only) {
      spdlog::info(
          "minion {} connected from {} to deliver the returns it owes this master (it "
          "serves another master)",
          s->id, s->conn->peer());
    } else if (state == key_state::accepted) {
      spdlog::info("minion {} connected from {}", s->id, s->conn->peer());
      events_.publish("brine/minion/" + s->id + "/start", {{"id", s->id}});
      if (handlers_.ready) handlers_.ready(s);
    } else if (request_id == k_first_auth) {
      spdlog::info("minion {} at {} is pending: accept its key with 'brine key accept {}'", s->id,
                   s->conn->peer(), s->id);
    }
    return;
  }
  reply();
  spdlog::warn("minion {} at {} refused: {}", s->id, s->conn->peer(), auth_message(state));
  s->conn->close_after_flush();
}

void minion_sessions::on_closed(const session_ptr& s, std::error_code ec,
                                const std::string& detail) {
  bool was_current = false;
  {
    std::lock_guard lock(mu_);
    calls_.erase(s);
    auto it = sessions_.find(s->id);
    if (it != sessions_.end() && it->second == s) {
      sessions_.erase(it);
      was_current = true;
    }
  }
  if (was_current && s->accepted && handlers_.gone) handlers_.gone(s);
  if (ec == base::errc::frame_too_large || ec == base::errc::frame_malformed ||
      ec == base::errc::unknown_message || ec == base::errc::protocol_violation) {
    spdlog::warn("minion {} at {}: {}: {}; connection closed", s->id, s->conn->peer(), ec.message(),
                 detail);
  } else if (was_current && !stopping_) {
    spdlog::info("minion {} at {} disconnected ({})", s->id, s->conn->peer(),
                 detail.empty() ? ec.message() : detail);
  }
}

void minion_sessions::on_message(const session_ptr& s, proto::message&& m) {
  switch (m.type) {
    case msg_type::ping:
      s->conn->send({msg_type::pong, m.id, json::object()});
      return;
    case msg_type::auth: {
      // A pending minion asks again every acceptance_wait_time.
      auto d = keys_.present(s->id, s->pubkey, s->fingerprint, base::unix_now());
      if (d.new_key) figures_.key_signups.with({store::to_string(d.state)}).inc();
      persist(d.changes);
      if (d.state == key_state::accepted && s->accepted) {
        s->conn->send({msg_type::auth_reply,
                       m.id,
                       {{"status", "accepted"},
                        {"message", auth_message(d.state)},
                        {"features", accepted_features(cfg_)}}});
        return;
      }
      authenticate(s, d.state, m.id);
      return;
    }
    default:
      break;
  }
  if (!s->accepted) {
    std::string why = "message " + std::string(proto::to_string(m.type)) +
                      " before the minion's key was accepted";
    spdlog::warn("minion {} at {}: {}; closing", s->id, s->conn->peer(), why);
    s->conn->send({msg_type::error, m.id, {{"message", why}}});
    s->conn->close_after_flush();
    return;
  }
  switch (m.type) {
    case msg_type::job_ack:
    case msg_type::job_return:
    case msg_type::job_refused:
    case msg_type::grains:
    case msg_type::pillar_request:
    case msg_type::file_request:
    case msg_type::schedule:
    case msg_type::run_request:
    case msg_type::compile_request:
      if (handlers_.minion_message) handlers_.minion_message(s, std::move(m));
      return;
    case msg_type::pong:
      return;
    default: {
      std::string why =
          "unexpected message " + std::string(proto::to_string(m.type)) + " from a minion";
      spdlog::warn("minion {} at {}: {}; closing", s->id, s->conn->peer(), why);
      s->conn->send({msg_type::error, m.id, {{"message", why}}});
      s->conn->close_after_flush();
    }
  }
}

void minion_sessions::persist(const std::vector<pki::key_change>& changes) {
  if (changes.empty()) return;
  std::vector<store::key_write> batch;
  batch.reserve(changes.size());
  for (const auto& c : changes) {
    batch.push_back({c.what == pki::key_change::kind::erase, c.record});
  }
  store_.post_until_done([this, batch = std::move(batch), changes](store::store& db) {
    db.write_keys(batch);
    keys_.written(changes);
  });
}

void minion_sessions::apply_key_changes(const pki::key_op_result& r, const std::string& act) {
  persist(r.changes);
  for (const auto& id : r.ids) act_on_key_change(id, act);
}

void minion_sessions::apply_remote_key_changes(const std::vector<std::string>& ids) {
  for (const auto& id : ids) {
    std::string act = "delete";
    for (const auto& k : keys_.list_of(id)) {
      if (k.state == key_state::accepted) act = "accept";
      if (k.state == key_state::rejected) act = "reject";
      if (k.state == key_state::pending) act = "pend";
    }
    if (act == "pend") {
      // A new pending key: nothing to push or cut, but `brine events` hears of it.
      events_.publish("brine/key", {{"act", "pend"}, {"id", id}});
      continue;
    }
    act_on_key_change(id, act);
  }
}

void minion_sessions::act_on_key_change(const std::string& id, const std::string& act) {
  events_.publish("brine/key", {{"act", act}, {"id", id}});
  session_ptr s;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(id);
    if (it != sessions_.end()) s = it->second;
  }
  if (!s) return;
  if (keys_.is_accepted(id, s->fingerprint)) {
    if (!s->accepted) {
      // Pushed at once, not left for the minion's next ask
      // (acceptance_wait_time).
      spdlog::info("minion {} at {}: key accepted; telling the waiting minion", id,
                   s->conn->peer());
      authenticate(s, key_state::accepted, 0);
    }
    return;
  }
  // Rejected, deleted or replaced: the connection goes at once.
  std::string why = act == "delete" ? "key deleted on the master" : "key " + act + "ed";
  spdlog::info("minion {} at {}: {}; closing its connection", id, s->conn->peer(), why);
  s->conn->send({msg_type::auth_reply,
                 0,
                 {{"status", act == "delete" ? "deleted" : "rejected"}, {"message", why}}});
  bool was_current = false;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(id);
    if (it != sessions_.end() && it->second == s) {
      sessions_.erase(it);
      was_current = true;
    }
  }
  if (was_current && s->accepted && handlers_.gone) handlers_.gone(s);
  s->conn->close_after_flush();
}

}  // namespace brine::master
