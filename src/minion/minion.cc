#include "minion/minion.h"

#include <random>
#include <thread>

#include <asio/co_spawn.hpp>
#include <asio/connect.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/redirect_error.hpp>
#include <asio/signal_set.hpp>
#include <asio/strand.hpp>
#include <asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "base/error.h"
#include "base/fs.h"
#include "net/deadline.h"

namespace brine::minion {

using nlohmann::json;
using proto::msg_type;
using namespace std::chrono_literals;

namespace {

// Salt's recon_default and recon_max.
constexpr auto k_recon_default = 1000ms;
constexpr auto k_recon_max = 10000ms;
constexpr auto k_connect_timeout = 10s;

std::chrono::milliseconds jittered(std::chrono::milliseconds base) {
  thread_local std::mt19937 rng{std::random_device{}()};
  std::uniform_int_distribution<long> d(base.count() / 2, base.count());
  return std::chrono::milliseconds(d(rng));
}

// Built outside coroutines: g++ 12 miscompiles brace-initialised json with
// string literals inside a coroutine body.
proto::message auth_request(const std::string& id) {
  return {msg_type::auth, 1, {{"id", id}, {"version", BRINE_VERSION}}};
}

asio::awaitable<void> write_spool(spool* s, std::string jid, json body) {
  s->save(jid, body);
  co_return;
}

json return_body(const modules::call& c, const std::string& id, modules::outcome out) {
  return {{"jid", c.jid},          {"id", id},
          {"fun", c.fun},          {"ret", std::move(out.ret)},
          {"success", out.success}, {"retcode", out.retcode}};
}

}  // namespace

minion::minion(base::minion_config cfg)
    : cfg_(std::move(cfg)),
      identity_((base::ensure_dir(cfg_.pki_dir, 0700, "pki_dir"),
                 pki::keypair::load_or_create(cfg_.pki_dir, "minion"))),
      spool_((base::ensure_dir(cfg_.cachedir, 0700, "cachedir"),
              base::ensure_dir(cfg_.cachedir + "/returns", 0700, "cachedir"),
              cfg_.cachedir + "/returns")) {
  tls_ = std::make_unique<net::tls_context>(net::tls_context::role::client, identity_, cfg_.id);
  modules::register_builtin_modules(functions_);
}

int minion::run() {
  spdlog::info("minion {} starting (fingerprint {}), master {}:{}", cfg_.id,
               identity_.fingerprint(), cfg_.master, cfg_.master_port);
  asio::signal_set signals(io_, SIGINT, SIGTERM);
  signals.async_wait([this](std::error_code ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: stopping", sig);
    stop();
  });
  asio::co_spawn(asio::make_strand(io_), main_loop(), net::logged("minion main loop"));
  std::thread second([this] { io_.run(); });
  io_.run();
  second.join();
  blocking_.join();
  spdlog::info("minion stopped");
  return 0;
}

void minion::stop() {
  if (stopping_.exchange(true)) return;
  std::shared_ptr<net::connection> c;
  {
    std::lock_guard lock(mu_);
    c = conn_;
  }
  if (c) c->close();
  io_.stop();
}

asio::awaitable<void> minion::main_loop() {
  auto backoff = k_recon_default;
  auto refused_wait = std::chrono::milliseconds(std::chrono::seconds(cfg_.acceptance_wait_time));
  const auto refused_cap = std::chrono::milliseconds(std::chrono::seconds(
      cfg_.acceptance_wait_time_max > 0 ? cfg_.acceptance_wait_time_max
                                        : 10 * cfg_.acceptance_wait_time));
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!stopping_) {
    outcome o = co_await serve_once();
    if (stopping_) break;
    std::chrono::milliseconds wait;
    switch (o) {
      case outcome::lost:
        backoff = k_recon_default;
        refused_wait = std::chrono::seconds(cfg_.acceptance_wait_time);
        wait = jittered(k_recon_default);
        break;
      case outcome::connect_failed:
        wait = jittered(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(k_recon_max));
        break;
      case outcome::refused:
      case outcome::untrusted_master:
        // Refused minions retry slowly, growing to the cap, so they never
        // hammer a master that said no.
        wait = jittered(refused_wait) + refused_wait / 2;
        refused_wait = std::min(refused_wait * 2, refused_cap);
        spdlog::info("retrying in {:.1f} s", static_cast<double>(wait.count()) / 1000);
        break;
    }
    timer.expires_after(wait);
    std::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

bool minion::trust_master(EVP_PKEY* key, const std::string& where) {
  if (!pki::is_ed25519(key)) {
    spdlog::error("master at {} presented a non-Ed25519 key; refusing it", where);
    return false;
  }
  std::string fp = pki::fingerprint(key);
  if (!cfg_.master_finger.empty()) {
    if (fp != cfg_.master_finger) {
      spdlog::error("master at {} presented key fingerprint {}, but master_finger in {} is {}; "
                    "refusing to talk to it",
                    where, fp, cfg_.source, cfg_.master_finger);
      return false;
    }
    return true;
  }
  std::string saved = cfg_.pki_dir + "/minion_master.pub";
  if (!base::file_exists(saved)) {
    base::write_file_atomic(saved, pki::public_pem(key), 0644);
    spdlog::info("trusting master at {} on first use: fingerprint {} (saved to {})", where, fp,
                 saved);
    return true;
  }
  auto pinned = pki::parse_public_pem(base::read_file(saved));
  std::string pinned_fp = pinned ? pki::fingerprint(pinned.get()) : "unreadable";
  if (pinned_fp != fp) {
    spdlog::error("master at {} presented key fingerprint {}, but the master key saved in {} has "
                  "fingerprint {}; refusing to talk to it (if the master's key really changed, "
                  "delete {} or set master_finger)",
                  where, fp, saved, pinned_fp, saved);
    return false;
  }
  return true;
}

asio::awaitable<minion::outcome> minion::serve_once() {
  auto executor = co_await asio::this_coro::executor;
  const std::string where = cfg_.master + ":" + std::to_string(cfg_.master_port);

  asio::ip::tcp::resolver resolver(executor);
  std::error_code ec;
  auto endpoints = co_await net::with_deadline(
      resolver.async_resolve(cfg_.master, std::to_string(cfg_.master_port),
                             asio::redirect_error(asio::use_awaitable, ec)),
      k_connect_timeout);
  if (!endpoints || ec) {
    spdlog::warn("cannot resolve master {}: {}", cfg_.master, ec ? ec.message() : "timed out");
    co_return outcome::connect_failed;
  }
  asio::ip::tcp::socket socket(executor);
  auto connected = co_await net::with_deadline(
      asio::async_connect(socket, *endpoints, asio::redirect_error(asio::use_awaitable, ec)),
      k_connect_timeout);
  if (!connected || ec) {
    spdlog::warn("cannot connect to master {}: {}", where, ec ? ec.message() : "timed out");
    co_return outcome::connect_failed;
  }
  net::tune_socket(socket, static_cast<int>(cfg_.master_alive_interval));
  auto stream = std::make_unique<net::tls_stream>(std::move(socket), *tls_,
                                                  net::tls_context::role::client);
  auto hs = co_await net::with_deadline(stream->handshake(), k_connect_timeout);
  if (!hs || *hs) {
    spdlog::warn("TLS handshake with master {} failed: {}", where,
                 hs ? stream->last_error() : "timed out");
    stream->close();
    co_return outcome::connect_failed;
  }
  if (!trust_master(stream->peer_key(), where)) {
    stream->close();
    co_return outcome::untrusted_master;
  }

  auto conn = std::make_shared<net::connection>(executor, std::move(stream),
                                                proto::frame_decoder(cfg_.max_frame_bytes));
  auto wake = std::make_shared<asio::steady_timer>(executor);
  // Shared with the close handler, which may run after this coroutine ends.
  struct close_state {
    bool closed = false;
    std::string reason;
  };
  auto cs = std::make_shared<close_state>();
  {
    std::lock_guard lock(mu_);
    conn_ = conn;
    auth_ = auth_state::waiting;
    last_rx_ = std::chrono::steady_clock::now();
    wake_ = wake;
  }
  // Both handlers run on this coroutine's strand (the connection's executor).
  conn->start([this](proto::message&& m) { on_message(std::move(m)); },
              [cs, wake](std::error_code e, const std::string& detail) {
                cs->closed = true;
                cs->reason = detail.empty() ? e.message() : detail;
                wake->cancel();
              });
  conn->send(auth_request(cfg_.id));

  bool was_accepted = false;
  auto auth_sent = std::chrono::steady_clock::now();
  const auto alive = std::chrono::seconds(cfg_.master_alive_interval);
  const auto tick = std::max<std::chrono::milliseconds>(1000ms, alive / 3);
  while (!cs->closed && !stopping_) {
    auth_state st;
    std::chrono::steady_clock::time_point last_rx;
    {
      std::lock_guard lock(mu_);
      st = auth_;
      last_rx = last_rx_;
    }
    auto now = std::chrono::steady_clock::now();
    if (st == auth_state::accepted) {
      was_accepted = true;
      if (now - last_rx > alive) {
        spdlog::warn("master {} sent nothing for {} s (master_alive_interval); reconnecting",
                     where, cfg_.master_alive_interval);
        conn->close();
        break;
      }
      if (now - last_rx >= tick) conn->send({msg_type::ping, 0, json::object()});
      wake->expires_after(tick);
    } else if (st == auth_state::pending) {
      if (now - auth_sent >= std::chrono::seconds(cfg_.acceptance_wait_time)) {
        conn->send(auth_request(cfg_.id));
        auth_sent = now;
      }
      wake->expires_after(std::chrono::seconds(cfg_.acceptance_wait_time));
    } else if (st == auth_state::waiting) {
      if (now - auth_sent > k_connect_timeout) {
        spdlog::warn("master {} did not answer authentication in time; reconnecting", where);
        conn->close();
        break;
      }
      wake->expires_after(k_connect_timeout);
    } else {
      conn->close();
      break;
    }
    co_await wake->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  auth_state final_state;
  {
    std::lock_guard lock(mu_);
    final_state = auth_;
    conn_.reset();
    wake_.reset();
  }
  conn->close();
  if (final_state == auth_state::refused) co_return outcome::refused;
  if (was_accepted) {
    if (!stopping_) spdlog::warn("connection to master {} lost ({})", where, cs->reason);
    co_return outcome::lost;
  }
  if (final_state == auth_state::pending) co_return outcome::lost;
  spdlog::warn("connection to master {} closed before authentication ({})", where, cs->reason);
  co_return outcome::connect_failed;
}

void minion::on_message(proto::message&& m) {
  std::shared_ptr<net::connection> conn;
  std::shared_ptr<asio::steady_timer> wake;
  auth_state st;
  {
    std::lock_guard lock(mu_);
    last_rx_ = std::chrono::steady_clock::now();
    conn = conn_;
    wake = wake_;
    st = auth_;
  }
  if (!conn) return;
  switch (m.type) {
    case msg_type::auth_reply: {
      std::string status = m.body.value("status", "");
      std::string message = m.body.value("message", "");
      if (status == "accepted") {
        if (st != auth_state::accepted) {
          {
            std::lock_guard lock(mu_);
            auth_ = auth_state::accepted;
            said_pending_ = false;
          }
          spdlog::info("authenticated with master {}:{}", cfg_.master, cfg_.master_port);
          on_accepted();
        }
      } else if (status == "pending") {
        bool say;
        {
          std::lock_guard lock(mu_);
          auth_ = auth_state::pending;
          say = !std::exchange(said_pending_, true);
        }
        if (say) {
          spdlog::warn("master {}:{}: {}; asking again every {} s", cfg_.master,
                       cfg_.master_port, message, cfg_.acceptance_wait_time);
        }
      } else {
        {
          std::lock_guard lock(mu_);
          auth_ = auth_state::refused;
          said_pending_ = false;
        }
        spdlog::error("master {}:{} refused this minion ({}): {}", cfg_.master,
                      cfg_.master_port, status, message);
        conn->close();
      }
      if (wake) wake->cancel();
      return;
    }
    case msg_type::ping:
      conn->send({msg_type::pong, m.id, json::object()});
      return;
    case msg_type::pong:
      return;
    case msg_type::error:
      spdlog::error("master {}:{} reported an error: {}", cfg_.master, cfg_.master_port,
                    m.body.value("message", "?"));
      return;
    default:
      break;
  }
  if (st != auth_state::accepted) {
    spdlog::warn("master sent {} before accepting this minion; ignored", proto::to_string(m.type));
    return;
  }
  switch (m.type) {
    case msg_type::publish: {
      std::string jid = m.body.value("jid", "");
      conn->send({msg_type::job_ack, 0, {{"jid", jid}}});
      {
        std::lock_guard lock(mu_);
        if (running_.count(jid) || spool_.contains(jid)) return;  // a repeat publish
        running_.insert(jid);
      }
      asio::co_spawn(asio::make_strand(io_), run_job(std::move(m)), net::logged("job"));
      return;
    }
    case msg_type::return_ack:
      spool_.forget(m.body.value("jid", ""));
      return;
    default:
      spdlog::warn("master sent unexpected {}; ignored", proto::to_string(m.type));
  }
}

void minion::on_accepted() {
  // Everything spooled and not acknowledged goes again; the master's job
  // cache keeps the first copy of each (jid, minion).
  auto pending = spool_.load_all();
  if (!pending.empty()) spdlog::info("re-sending {} unacknowledged returns", pending.size());
  for (auto& body : pending) send_return(body);
}

void minion::send_return(const json& body) {
  std::shared_ptr<net::connection> conn;
  {
    std::lock_guard lock(mu_);
    if (auth_ == auth_state::accepted) conn = conn_;
  }
  if (conn) conn->send({msg_type::job_return, 0, body});
}

asio::awaitable<void> minion::run_job(proto::message m) {
  modules::call c;
  c.jid = m.body.value("jid", "");
  c.fun = m.body.value("fun", "");
  c.args = m.body.value("args", json::array());
  c.kwargs = m.body.value("kwargs", json::object());
  c.timeout = std::chrono::seconds(cfg_.job_timeout);
  spdlog::debug("job {}: {}", c.jid, c.fun);
  modules::outcome out = co_await modules::execute(functions_, c);
  json body = return_body(c, cfg_.id, std::move(out));
  try {
    co_await asio::co_spawn(blocking_, write_spool(&spool_, c.jid, body), asio::use_awaitable);
  } catch (const std::exception& e) {
    spdlog::error("job {}: cannot keep its return on disk ({}); sending it anyway", c.jid,
                  e.what());
  }
  {
    std::lock_guard lock(mu_);
    running_.erase(c.jid);
  }
  send_return(body);
}

}  // namespace brine::minion
