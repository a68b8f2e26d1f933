#include "master/master.h"

#include <algorithm>
#include <chrono>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/redirect_error.hpp>
#include <asio/signal_set.hpp>
#include <asio/strand.hpp>
#include <asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "base/error.h"
#include "base/fs.h"
#include "net/deadline.h"
#include "net/unix_stream.h"
#include "store/store.h"

namespace brine::master {

using nlohmann::json;
using proto::msg_type;
using store::key_state;

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
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
    case key_state::accepted: return "key accepted";
    case key_state::pending:
      return "key pending: accept it on the master with 'brine key accept ID'";
    case key_state::rejected: return "key rejected by the master";
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

// Longest a return_ack waits for another frame to the same minion to ride
// with. The minion keeps the return in its spool that much longer.
constexpr std::chrono::milliseconds k_ack_delay{1000};

proto::message api_reply(uint64_t id, json body) {
  return {msg_type::api_reply, id, std::move(body)};
}

json error_body(const std::string& message) { return {{"ok", false}, {"error", message}}; }

// Built outside coroutines: g++ 12 miscompiles brace-initialised json with
// string literals inside a coroutine body ("array used as initializer").
std::vector<uint8_t> error_frame(const std::string& message) {
  return proto::encode_frame({msg_type::error, 0, {{"message", message}}});
}

}  // namespace

master::master(base::master_config cfg)
    : cfg_(std::move(cfg)),
      identity_((base::ensure_dir(cfg_.pki_dir, 0700, "pki_dir"),
                 pki::keypair::load_or_create(cfg_.pki_dir, "master"))),
      keys_({cfg_.auto_accept, cfg_.autosign_file, cfg_.autoreject_file}),
      acceptor_(io_),
      api_acceptor_(io_),
      handshakes_(cfg_.max_concurrent_handshakes),
      keepalive_{cfg_.tcp_keepalive, static_cast<int>(cfg_.tcp_keepalive_idle),
                 static_cast<int>(cfg_.tcp_keepalive_intvl),
                 static_cast<int>(cfg_.tcp_keepalive_cnt)} {
  base::ensure_dir(cfg_.cachedir, 0700, "cachedir");
  base::ensure_dir(cfg_.sock_dir, 0700, "sock_dir");
  tls_ = std::make_unique<net::tls_context>(net::tls_context::role::server, identity_, "master");

  auto db = store::open_sqlite(cfg_.cachedir + "/jobs.db");
  keys_.load(db->load_keys());
  store_ = std::make_unique<store_worker>(std::move(db));

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
                      ": " + ec.message() +
                      "; stop the process using it or set 'port' in " + cfg_.source);
  }

  api_path_ = cfg_.sock_dir + "/master.sock";
  if (base::file_exists(api_path_)) {
    asio::local::stream_protocol::socket probe(io_);
    probe.connect(asio::local::stream_protocol::endpoint(api_path_), ec);
    if (!ec) {
      throw base::error("another master is running with sock_dir " + cfg_.sock_dir +
                        " (its socket " + api_path_ + " answers); stop it first");
    }
    ::unlink(api_path_.c_str());
  }
  api_acceptor_.open(asio::local::stream_protocol(), ec);
  if (!ec) api_acceptor_.bind(asio::local::stream_protocol::endpoint(api_path_), ec);
  if (!ec) ::chmod(api_path_.c_str(), 0600);
  if (!ec) api_acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw base::error("cannot listen on " + api_path_ + ": " + ec.message());
}

master::~master() {
  if (!api_path_.empty()) ::unlink(api_path_.c_str());
}

int master::run() {
  struct rlimit rl {};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  spdlog::info("master listening on {}:{} (fingerprint {}); local API {}", cfg_.interface,
               acceptor_.local_endpoint().port(), identity_.fingerprint(), api_path_);
  max_minion_connections_ =
      rl.rlim_cur > k_reserved_descriptors ? static_cast<int64_t>(rl.rlim_cur - k_reserved_descriptors)
                                           : 1;
  spdlog::info("descriptor limit {} allows {} connected minions", rl.rlim_cur,
               max_minion_connections_);

  asio::signal_set signals(io_, SIGINT, SIGTERM);
  signals.async_wait([this](std::error_code ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: stopping", sig);
    stop();
  });
  asio::co_spawn(io_, accept_minions(), net::logged("minion accept loop"));
  asio::co_spawn(io_, accept_api(), net::logged("local API accept loop"));
  asio::co_spawn(io_, purge_loop(), net::logged("job cache purge"));
  asio::co_spawn(io_, ack_flush_loop(), net::logged("return_ack flush"));

  unsigned n = cfg_.worker_threads;
  if (n == 0) n = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < n; ++i) threads.emplace_back([this] { io_.run(); });
  io_.run();
  for (auto& t : threads) t.join();
  {
    std::lock_guard lock(sessions_mu_);
    sessions_.clear();
  }
  store_->stop();
  spdlog::info("master stopped");
  return 0;
}

void master::stop() {
  if (stopping_.exchange(true)) return;
  std::error_code ec;
  acceptor_.close(ec);
  api_acceptor_.close(ec);
  io_.stop();
}

asio::awaitable<void> master::accept_minions() {
  for (;;) {
    // Accept as fast as connections come, so the kernel's accept queue never
    // overflows (dropped SYNs cost clients seconds of retransmission);
    // handle_minion then waits for a handshake slot.
    std::error_code ec;
    asio::ip::tcp::socket socket(asio::make_strand(io_));
    co_await acceptor_.async_accept(socket, asio::redirect_error(asio::use_awaitable, ec));
    if (stopping_) co_return;
    if (ec) {
      if (ec == asio::error::no_descriptors) {
        // Something else holds descriptors (the reserve ran out): the same
        // episode as above, said once.
        if (!std::exchange(at_limit_, true)) {
          spdlog::error("descriptor limit reached: cannot accept a connection ({} minions "
                        "connected); refusing new minion connections until descriptors free up "
                        "(raise 'ulimit -n' to serve more)",
                        minion_connections_.load());
        }
        asio::steady_timer pause(io_, std::chrono::milliseconds(100));
        co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      }
      continue;
    }
    if (minion_connections_.load() >= max_minion_connections_) {
      // Refused at once rather than left in the backlog, with one line per
      // episode, not one per attempt.
      if (!std::exchange(at_limit_, true)) {
        spdlog::error("descriptor limit reached: {} minions connected, the most that 'ulimit -n' "
                      "allows; refusing new minion connections until some close (raise the "
                      "limit to serve more)",
                      minion_connections_.load());
      }
      socket.close(ec);
      continue;
    }
    if (std::exchange(at_limit_, false)) {
      spdlog::info("below the descriptor limit again: accepting minion connections");
    }
    ++minion_connections_;
    std::shared_ptr<void> slot(nullptr, [this](void*) { --minion_connections_; });
    auto executor = socket.get_executor();
    asio::co_spawn(executor, handle_minion(std::move(socket), std::move(slot)),
                   net::logged("minion connection"));
  }
}

asio::awaitable<void> master::handle_minion(asio::ip::tcp::socket socket,
                                            std::shared_ptr<void> slot) {
  net::tune_socket(socket, keepalive_);
  auto executor = socket.get_executor();
  auto stream = std::make_unique<net::tls_stream>(std::move(socket), *tls_,
                                                  net::tls_context::role::server);
  const std::string peer = stream->peer();
  const auto limit = std::chrono::seconds(cfg_.handshake_timeout);

  co_await handshakes_.acquire();
  auto hs = co_await net::with_deadline(stream->handshake(), limit);
  handshakes_.release();
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
    std::string why = first.type != msg_type::auth
                          ? "first message must be auth, got " +
                                std::string(proto::to_string(first.type))
                          : "auth without a valid minion id";
    spdlog::warn("minion connection from {}: {}; closing", peer, why);
    co_await stream->write_all(error_frame(why));
    stream->close();
    co_return;
  }

  admit(executor, std::move(stream), std::move(decoder), id, k_first_auth, fingerprint, pubkey,
        std::move(slot));
}

void master::admit(asio::any_io_executor executor, std::unique_ptr<net::tls_stream> stream,
                   proto::frame_decoder decoder, const std::string& id, uint64_t request_id,
                   const std::string& fingerprint, const std::string& pubkey,
                   std::shared_ptr<void> slot) {
  const std::string peer = stream->peer();
  auto s = std::make_shared<session>();
  s->id = id;
  s->fingerprint = fingerprint;
  s->pubkey = pubkey;
  s->conn = std::make_shared<net::connection>(executor, std::move(stream), std::move(decoder));
  s->conn->attach(std::move(slot));
  auto weak = std::weak_ptr<session>(s);
  s->conn->start(
      [this, weak](proto::message&& m) {
        if (auto self = weak.lock()) on_minion_message(self, std::move(m));
      },
      [this, weak](std::error_code ec, const std::string& detail) {
        if (auto self = weak.lock()) on_minion_closed(self, ec, detail);
      });
  auto d = keys_.present(id, pubkey, fingerprint, unix_now());
  persist(d.changes);
  events_.publish("brine/auth", {{"id", id},
                                 {"fingerprint", fingerprint},
                                 {"result", store::to_string(d.state)},
                                 {"peer", peer}});
  if (!d.changes.empty() && d.state != key_state::denied) {
    events_.publish("brine/key", {{"act", store::to_string(d.state)}, {"id", id}});
  }
  authenticate(s, d.state, request_id);
}
void master::authenticate(const std::shared_ptr<session>& s, key_state state,
                          uint64_t request_id) {
  s->conn->send({msg_type::auth_reply, request_id,
                 {{"status", store::to_string(state)}, {"message", auth_message(state)}}});
  if (state == key_state::accepted || state == key_state::pending) {
    std::shared_ptr<session> old;
    {
      std::lock_guard lock(sessions_mu_);
      auto& slot = sessions_[s->id];
      if (slot != s) old = std::exchange(slot, s);
      s->accepted = state == key_state::accepted;
    }
    if (old) {
      spdlog::info("minion {} reconnected from {}; closing its previous connection {}", s->id,
                   s->conn->peer(), old->conn->peer());
      old->conn->close();
    }
    if (state == key_state::accepted) {
      spdlog::info("minion {} connected from {}", s->id, s->conn->peer());
      events_.publish("brine/minion/" + s->id + "/start", {{"id", s->id}});
    } else if (request_id == k_first_auth) {
      spdlog::info("minion {} at {} is pending: accept its key with 'brine key accept {}'",
                   s->id, s->conn->peer(), s->id);
    }
    return;
  }
  spdlog::warn("minion {} at {} refused: {}", s->id, s->conn->peer(), auth_message(state));
  s->conn->close_after_flush();
}

void master::on_minion_closed(const std::shared_ptr<session>& s, std::error_code ec,
                              const std::string& detail) {
  bool was_current = false;
  {
    std::lock_guard lock(sessions_mu_);
    auto it = sessions_.find(s->id);
    if (it != sessions_.end() && it->second == s) {
      sessions_.erase(it);
      was_current = true;
    }
  }
  if (ec == base::errc::frame_too_large || ec == base::errc::frame_malformed ||
      ec == base::errc::unknown_message || ec == base::errc::protocol_violation) {
    spdlog::warn("minion {} at {}: {}: {}; connection closed", s->id, s->conn->peer(),
                 ec.message(), detail);
  } else if (was_current && !stopping_) {
    spdlog::info("minion {} at {} disconnected ({})", s->id, s->conn->peer(),
                 detail.empty() ? ec.message() : detail);
  }
}

void master::on_minion_message(const std::shared_ptr<session>& s, proto::message&& m) {
  switch (m.type) {
    case msg_type::ping:
      s->conn->send({msg_type::pong, m.id, json::object()});
      return;
    case msg_type::auth: {
      // A pending minion asks again every acceptance_wait_time.
      auto d = keys_.present(s->id, s->pubkey, s->fingerprint, unix_now());
      persist(d.changes);
      if (d.state == key_state::accepted && s->accepted) {
        s->conn->send({msg_type::auth_reply, m.id,
                       {{"status", "accepted"}, {"message", auth_message(d.state)}}});
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
      spdlog::debug("minion {} received job {}", s->id, m.body.value("jid", ""));
      return;
    case msg_type::job_return:
      on_return(s, std::move(m));
      return;
    case msg_type::pong:
      return;
    default: {
      std::string why = "unexpected message " + std::string(proto::to_string(m.type)) +
                        " from a minion";
      spdlog::warn("minion {} at {}: {}; closing", s->id, s->conn->peer(), why);
      s->conn->send({msg_type::error, m.id, {{"message", why}}});
      s->conn->close_after_flush();
    }
  }
}

void master::on_return(const std::shared_ptr<session>& s, proto::message&& m) {
  std::string jid = m.body.value("jid", "");
  if (!jid_generator::valid(jid)) {
    spdlog::warn("minion {} at {}: return with invalid jid '{}' ignored", s->id,
                 s->conn->peer(), jid);
    return;
  }
  store::return_record r;
  r.jid = jid;
  r.minion = s->id;  // from the authenticated key, never from the body
  r.fun = m.body.value("fun", "");
  r.ret = m.body.contains("ret") ? std::move(m.body["ret"]) : json();
  r.success = m.body.value("success", false);
  r.retcode = m.body.value("retcode", 0);
  r.stamp = unix_now();
  json event = {{"id", r.minion},  {"jid", jid},          {"fun", r.fun},
                {"return", r.ret}, {"success", r.success}, {"retcode", r.retcode}};
  auto conn = s->conn;
  std::string tag = "brine/job/" + jid + "/ret/" + s->id;
  store_->add_return(std::move(r), [this, conn, jid, tag, event = std::move(event)] {
    // Nobody waits on the ack but the minion's spool: it rides with the next
    // frame to this minion, or goes within k_ack_delay.
    conn->send_deferred(net::make_frame({msg_type::return_ack, 0, {{"jid", jid}}}));
    {
      std::lock_guard lock(ack_mu_);
      acks_waiting_.push_back({conn, std::chrono::steady_clock::now() + k_ack_delay});
    }
    events_.publish(tag, event);
  });
}

void master::persist(const std::vector<pki::key_change>& changes) {
  if (changes.empty()) return;
  store_->post([changes](store::store& db) {
    for (const auto& c : changes) {
      if (c.what == pki::key_change::kind::put) {
        db.put_key(c.record);
      } else {
        db.delete_key(c.record.id, c.record.fingerprint);
      }
    }
  });
}

void master::apply_key_changes(const pki::key_op_result& r, const std::string& act) {
  persist(r.changes);
  for (const auto& id : r.ids) {
    events_.publish("brine/key", {{"act", act}, {"id", id}});
    std::shared_ptr<session> s;
    {
      std::lock_guard lock(sessions_mu_);
      auto it = sessions_.find(id);
      if (it != sessions_.end()) s = it->second;
    }
    if (!s) continue;
    if (keys_.is_accepted(id, s->fingerprint)) {
      if (!s->accepted) authenticate(s, key_state::accepted, 0);
      continue;
    }
    // Rejected, deleted or replaced: the connection goes at once.
    std::string why = act == "delete" ? "key deleted on the master" : "key " + act + "ed";
    spdlog::info("minion {} at {}: {}; closing its connection", id, s->conn->peer(), why);
    s->conn->send({msg_type::auth_reply, 0, {{"status", act == "delete" ? "deleted" : "rejected"},
                                             {"message", why}}});
    {
      std::lock_guard lock(sessions_mu_);
      auto it = sessions_.find(id);
      if (it != sessions_.end() && it->second == s) sessions_.erase(it);
    }
    s->conn->close_after_flush();
  }
}

asio::awaitable<void> master::ack_flush_loop() {
  // One timer for all minions: a tick a quarter of the delay, each tick
  // flushing the connections whose acks are due and still waiting (most
  // have gone out with a later frame by then).
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    timer.expires_after(k_ack_delay / 4);
    std::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec || stopping_) co_return;
    std::vector<waiting_ack> due;
    {
      std::lock_guard lock(ack_mu_);
      auto now = std::chrono::steady_clock::now();
      // Entries are appended with a constant delay, so they are in due order.
      auto end = std::find_if(acks_waiting_.begin(), acks_waiting_.end(),
                              [&](const waiting_ack& w) { return w.due > now; });
      due.assign(std::make_move_iterator(acks_waiting_.begin()), std::make_move_iterator(end));
      acks_waiting_.erase(acks_waiting_.begin(), end);
    }
    for (const auto& w : due) {
      auto conn = w.conn.lock();
      if (conn && conn->has_deferred()) conn->flush();
    }
  }
}

asio::awaitable<void> master::purge_loop() {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    int64_t cutoff = unix_now() - int64_t{cfg_.keep_jobs} * 3600;
    store_->post([cutoff](store::store& db) {
      size_t n = db.purge_jobs_before(cutoff);
      if (n > 0) spdlog::info("job cache: purged {} jobs older than keep_jobs", n);
    });
    timer.expires_after(std::chrono::minutes(10));
    std::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec || stopping_) co_return;
  }
}

asio::awaitable<void> master::accept_api() {
  for (;;) {
    std::error_code ec;
    asio::local::stream_protocol::socket socket(asio::make_strand(io_));
    co_await api_acceptor_.async_accept(socket, asio::redirect_error(asio::use_awaitable, ec));
    if (stopping_) co_return;
    if (ec) continue;
    long uid = net::peer_uid(socket);
    auto executor = socket.get_executor();
    auto stream = std::make_unique<net::unix_stream>(std::move(socket),
                                                     "local uid " + std::to_string(uid));
    if (uid != static_cast<long>(::geteuid()) && uid != 0) {
      spdlog::warn("local API: refused a client with uid {} (only uid {} and root may connect)",
                   uid, ::geteuid());
      stream->close();
      continue;
    }
    auto conn = std::make_shared<net::connection>(
        executor, std::move(stream), proto::frame_decoder(cfg_.max_frame_bytes));
    auto subs = std::make_shared<std::vector<uint64_t>>();
    std::weak_ptr<net::connection> weak = conn;
    conn->start(
        [this, weak, subs](proto::message&& m) {
          if (auto c = weak.lock()) on_api_message(c, std::move(m), subs);
        },
        [this, subs](std::error_code, const std::string&) {
          for (uint64_t t : *subs) events_.unsubscribe(t);
        });
  }
}

void master::on_api_message(const std::shared_ptr<net::connection>& c, proto::message&& m,
                            const std::shared_ptr<std::vector<uint64_t>>& subs) {
  if (m.type != msg_type::api_request) {
    c->send({msg_type::error, m.id, {{"message", "local API takes api_request messages only"}}});
    c->close_after_flush();
    return;
  }
  std::string op = m.body.value("op", "");
  json reply;
  try {
    if (op == "ping") {
      reply = {{"ok", true}, {"fingerprint", identity_.fingerprint()}};
    } else if (op == "publish") {
      reply = api_publish(c, m.id, m.body, subs);
      if (reply.is_null()) return;  // already replied
    } else if (op == "events") {
      std::string prefix = m.body.value("prefix", "brine/");
      std::weak_ptr<net::connection> weak = c;
      uint64_t id = m.id;
      subs->push_back(events_.subscribe(prefix, [weak, id](const std::string& tag,
                                                           const json& data) {
        if (auto conn = weak.lock()) {
          conn->send({msg_type::api_event, id, {{"tag", tag}, {"data", data}}});
        }
      }));
      reply = {{"ok", true}};
    } else if (op.rfind("key_", 0) == 0) {
      reply = api_keys(op, m.body);
    } else {
      reply = error_body("unknown local API op '" + op + "'");
    }
  } catch (const std::exception& e) {
    reply = error_body(e.what());
  }
  c->send(api_reply(m.id, std::move(reply)));
}

nlohmann::json master::api_publish(const std::shared_ptr<net::connection>& c,
                                   uint64_t request_id, const json& body,
                                   const std::shared_ptr<std::vector<uint64_t>>& subs) {
  std::string target = body.value("target", "");
  std::string tgt_type = body.value("tgt_type", "glob");
  std::string fun = body.value("fun", "");
  if (fun.empty()) return error_body("publish needs a function name");
  std::vector<std::string> minions;
  if (tgt_type == "glob") {
    minions = keys_.accepted_matching(target);
  } else if (tgt_type == "list") {
    std::string item;
    for (size_t i = 0; i <= target.size(); ++i) {
      if (i == target.size() || target[i] == ',') {
        if (!item.empty() && keys_.accepted(item)) minions.push_back(item);
        item.clear();
      } else if (target[i] != ' ') {
        item += target[i];
      }
    }
    std::sort(minions.begin(), minions.end());
    minions.erase(std::unique(minions.begin(), minions.end()), minions.end());
  } else {
    return error_body("target type '" + tgt_type + "' is not supported yet (glob, list)");
  }
  if (minions.empty()) {
    return error_body("No minions matched the target. No command was sent, no jid was assigned.");
  }
  std::string jid = jids_.next();
  store::job_record job;
  job.jid = jid;
  job.fun = fun;
  job.args = body.value("args", json::array());
  job.kwargs = body.value("kwargs", json::object());
  job.target = target;
  job.tgt_type = tgt_type;
  job.user = body.value("user", "");
  job.minions = minions;
  job.master = "local";
  job.created = unix_now();
  json job_event = {{"jid", jid},   {"fun", fun},        {"args", job.args},
                    {"kwargs", job.kwargs}, {"tgt", target}, {"tgt_type", tgt_type},
                    {"minions", minions}, {"user", job.user}};
  store_->post([job](store::store& db) { db.add_job(job); });
  events_.publish("brine/job/" + jid + "/new", job_event);

  std::vector<std::shared_ptr<session>> targets;
  std::vector<std::string> connected;
  {
    std::lock_guard lock(sessions_mu_);
    for (const auto& id : minions) {
      auto it = sessions_.find(id);
      if (it != sessions_.end() && it->second->accepted) {
        targets.push_back(it->second);
        connected.push_back(id);
      }
    }
  }
  c->send(api_reply(request_id, {{"ok", true},
                                 {"jid", jid},
                                 {"minions", minions},
                                 {"connected", connected}}));
  std::weak_ptr<net::connection> weak = c;
  subs->push_back(events_.subscribe(
      "brine/job/" + jid + "/ret/", [weak, request_id](const std::string& tag, const json& data) {
        if (auto conn = weak.lock()) {
          conn->send({msg_type::api_event, request_id, {{"tag", tag}, {"data", data}}});
        }
      }));
  // One encoding serves every target.
  auto frame = net::make_frame({msg_type::publish,
                                0,
                                {{"jid", jid},
                                 {"fun", fun},
                                 {"args", job.args},
                                 {"kwargs", job.kwargs},
                                 {"tgt", target},
                                 {"tgt_type", tgt_type}}});
  for (const auto& s : targets) s->conn->send(frame);
  return nullptr;
}

nlohmann::json master::api_keys(const std::string& op, const json& body) {
  std::string pattern = body.value("match", "*");
  int64_t now = unix_now();
  if (op == "key_list") {
    json keys = json::array();
    for (const auto& k : keys_.list()) {
      keys.push_back({{"id", k.id},
                      {"state", store::to_string(k.state)},
                      {"fingerprint", k.fingerprint}});
    }
    return {{"ok", true}, {"keys", keys}, {"master_fingerprint", identity_.fingerprint()}};
  }
  pki::key_op_result r;
  std::string act;
  if (op == "key_accept") {
    r = keys_.accept(pattern, body.value("include_rejected", false),
                     body.value("include_denied", false), now);
    act = "accept";
  } else if (op == "key_reject") {
    r = keys_.reject(pattern, body.value("include_accepted", false),
                     body.value("include_denied", false), now);
    act = "reject";
  } else if (op == "key_delete") {
    r = keys_.remove(pattern);
    act = "delete";
  } else {
    return error_body("unknown key operation '" + op + "'");
  }
  apply_key_changes(r, act);
  return {{"ok", true}, {"ids", r.ids}};
}

}  // namespace brine::master
