#include "minion/agent.h"

#include <spdlog/spdlog.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/co_spawn.hpp>
#include <asio/connect.hpp>
#include <asio/experimental/concurrent_channel.hpp>
#include <asio/redirect_error.hpp>
#include <asio/strand.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <algorithm>
#include <optional>
#include <string_view>

#include "base/backoff.h"
#include "base/config.h"
#include "net/deadline.h"
#include "report/report.h"

namespace brine::minion {

using nlohmann::json;
using proto::msg_type;
using namespace std::chrono_literals;

namespace {

// A state run's status from its return, as the master's reports say it:
// failed when the run or any state failed, changed when a state changed
// something, else unchanged.
const char* state_run_status(const modules::outcome& out) {
  if (!out.success || out.retcode != 0 || !out.ret.is_object()) return "failed";
  bool changed = false;
  for (const auto& [key, state] : out.ret.items()) {
    if (!state.is_object()) return "failed";
    auto result = state.find("result");
    if (result != state.end() && result->is_boolean() && !result->get<bool>()) return "failed";
    auto changes = state.find("changes");
    if (changes != state.end() && !changes->empty()) changed = true;
  }
  return changed ? "changed" : "unchanged";
}

void count_job(figures& f, const std::string& fun, const modules::outcome& out,
               std::chrono::steady_clock::time_point started) {
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  f.jobs_run.inc();
  f.job_seconds.observe(seconds);
  if (report::is_state_run(fun)) f.state_run_seconds.with({state_run_status(out)}).observe(seconds);
}


constexpr auto k_connect_timeout = 10s;
// Longer than the connect: in an auth storm a master queues handshakes, and a
// minion that gives up and reconnects only adds to the queue.
constexpr auto k_handshake_timeout = 30s;

// Built outside coroutines: g++ 12 miscompiles brace-initialised json with
// string literals inside a coroutine body ("array used as initializer").
proto::message auth_request(const std::string& id, std::string_view purpose) {
  proto::message m{msg_type::auth, 1, {{"id", id}, {"version", BRINE_VERSION}}};
  if (!purpose.empty()) m.body["purpose"] = std::string(purpose);
  return m;
}

proto::message auth_request(const std::string& id, bool returns_only) {
  return auth_request(id, returns_only ? proto::k_purpose_returns : std::string_view());
}

net::frame_ptr call_pillar_request(nlohmann::json grains) {
  return net::make_frame({msg_type::pillar_request, 2, {{"grains", std::move(grains)}}});
}

// A brine call connection's progress, shared by its handlers and the
// coroutine that waits for the answer (all on the agent's strand).
struct call_state {
  explicit call_state(const asio::any_io_executor& ex) : wake(ex) {}
  asio::steady_timer wake;
  bool done = false;
  bool asked = false;
  call_reply reply;

  void finish(call_reply::status st, std::string detail,
              nlohmann::ordered_json pillar = nlohmann::ordered_json()) {
    if (done) return;
    done = true;
    reply.st = st;
    reply.detail = std::move(detail);
    reply.pillar = std::move(pillar);
    wake.cancel();
  }
};

void on_call_message(call_state& st, net::connection& conn, const net::frame_ptr& request,
                     proto::message&& m) {
  using status = call_reply::status;
  switch (m.type) {
    case msg_type::auth_reply: {
      std::string result = m.body.value("status", "");
      if (result == "accepted") {
        if (!std::exchange(st.asked, true)) conn.send(request);
      } else {
        st.finish(status::not_accepted, result + ": " + m.body.value("message", ""));
      }
      return;
    }
    case msg_type::pillar: {
      std::string why;
      if (auto p = proto::read_pillar(m.body, why)) {
        st.reply.tops = proto::read_tops(m.body);
        st.finish(status::answered, "", std::move(*p));
      } else {
        st.finish(status::failed, "the master sent a pillar message without a pillar: " + why);
      }
      return;
    }
    case msg_type::ping:
      conn.send({msg_type::pong, m.id, json::object()});
      return;
    case msg_type::error:
      st.finish(status::failed, "the master reported an error: " + m.body.value("message", "?"));
      return;
    default:
      return;  // nothing else is meant for a call connection
  }
}

call_reply failed_call(call_reply::status st, std::string detail) {
  call_reply r;
  r.st = st;
  r.detail = std::move(detail);
  return r;
}

json return_body(const modules::call& c, const std::string& id, const std::string& origin,
                 modules::outcome out) {
  // A return made in Salt's key order travels in it.
  json ret = out.ordered_ret ? proto::ordered_bytes(*out.ordered_ret) : std::move(out.ret);
  return {{"jid", c.jid},           {"id", id},
          {"fun", c.fun},           {"ret", std::move(ret)},
          {"success", out.success}, {"retcode", out.retcode},
          {"origin", origin}};
}

// Room a return frame needs beside its `ret` (ids, jid, function, framing).
constexpr size_t k_return_overhead = 64 * 1024;

// A return that would not fit a frame (max_frame_bytes) would be refused by
// the master, and re-sent and refused for ever: a text return is cut to fit
// with a note, anything else is replaced by an error; either way the job is
// marked failed. Returns the encoded body.
encoded_return fit_return(json body, size_t max_frame_bytes, const std::string& id) {
  encoded_return bytes = json::to_msgpack(body);
  if (bytes.size() + 16 <= max_frame_bytes) return bytes;
  size_t limit = max_frame_bytes > 2 * k_return_overhead ? max_frame_bytes - k_return_overhead
                                                         : max_frame_bytes / 2;
  std::string note = "[brine: the return of " + std::to_string(bytes.size()) +
                     " bytes exceeds max_frame_bytes (" + std::to_string(max_frame_bytes) +
                     "); ";
  json& ret = body["ret"];
  if (ret.is_string() && limit > note.size() + 128) {
    std::string& text = ret.get_ref<std::string&>();
    size_t keep = limit - note.size() - 128;
    // Cut on a UTF-8 character boundary.
    while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;
    text.resize(keep);
    text += "\n" + note + "truncated to its first " + std::to_string(keep) + " bytes]";
  } else {
    ret = "ERROR: " + note + "refused; return less, or raise max_frame_bytes on the master "
          "and the minion]";
  }
  body["success"] = false;
  if (body.value("retcode", 0) == 0) body["retcode"] = 1;
  spdlog::warn("minion {}: job {}: {}", id, body.value("jid", ""),
               note + (ret.is_string() && ret.get_ref<const std::string&>().starts_with("ERROR")
                           ? "refused]"
                           : "truncated]"));
  return json::to_msgpack(body);
}

asio::awaitable<void> save_return(return_spool* s, std::string jid, std::string origin,
                                  const encoded_return* body) {
  s->save(jid, origin, *body);
  co_return;
}

}  // namespace

agent::agent(asio::any_io_executor executor, agent_settings settings, deps d)
    : executor_(std::move(executor)),
      cfg_(std::move(settings)),
      deps_(std::move(d)),
      address_(base::master_address{cfg_.master, cfg_.master_port}.text()) {}

agent_state agent::state() const {
  std::lock_guard lock(mu_);
  return state_;
}

std::chrono::steady_clock::time_point agent::last_contact() const {
  std::lock_guard lock(mu_);
  return last_rx_;
}

void agent::set_state(agent_state s) {
  agent_state old;
  {
    std::lock_guard lock(mu_);
    old = std::exchange(state_, s);
  }
  if (deps_.figures && old != s && s == agent_state::accepted) {
    deps_.figures->master_connections.inc();
  }
  if (old != s && deps_.on_state) deps_.on_state(*this, old, s);
}

void agent::stop() {
  if (stopping_.exchange(true)) return;
  std::shared_ptr<net::connection> c;
  {
    std::lock_guard lock(mu_);
    c = conn_;
  }
  // The close handler wakes serve_once on its strand.
  if (c) c->close();
}

// One request's answer: a channel the link's strand sends to and the
// requester (on any executor) receives from.
struct agent::pending_reply {
  explicit pending_reply(asio::any_io_executor ex) : ch(ex, 1) {}
  asio::experimental::concurrent_channel<void(std::error_code, proto::message)> ch;
};

asio::awaitable<std::optional<proto::message>> agent::request(
    proto::msg_type type, nlohmann::json body, std::chrono::steady_clock::duration limit) {
  constexpr uint64_t k_first_request_id = 1000;
  auto ex = co_await asio::this_coro::executor;
  auto pending = std::make_shared<pending_reply>(ex);
  std::shared_ptr<net::connection> conn;
  uint64_t id = 0;
  {
    std::lock_guard lock(mu_);
    if (!conn_ || auth_ != auth_state::accepted) co_return std::nullopt;
    conn = conn_;
    id = k_first_request_id + next_request_++;
    pending_[id] = pending;
  }
  conn->send({type, id, std::move(body)});
  auto receive = pending->ch.async_receive(asio::use_awaitable);
  std::optional<proto::message> reply;
  try {
    reply = co_await net::with_deadline(std::move(receive), limit);
  } catch (const std::system_error&) {
    reply.reset();
  }
  {
    std::lock_guard lock(mu_);
    pending_.erase(id);
  }
  if (reply && reply->type == msg_type::error && reply->id == 0) reply.reset();  // closed
  co_return reply;
}

void agent::deliver_reply(proto::message&& m) {
  std::shared_ptr<pending_reply> p;
  {
    std::lock_guard lock(mu_);
    auto it = pending_.find(m.id);
    if (it != pending_.end()) p = it->second;
  }
  // An answer nobody waits for any more (its deadline passed) is dropped.
  if (p) p->ch.try_send(std::error_code{}, std::move(m));
}

asio::awaitable<nlohmann::json> agent::file_request(std::shared_ptr<agent> link,
                                                    nlohmann::json request,
                                                    std::chrono::steady_clock::duration limit) {
  auto reply = co_await link->request(msg_type::file_request, std::move(request), limit);
  if (!reply) {
    auto seconds = std::chrono::duration_cast<std::chrono::seconds>(limit).count();
    throw base::error("master " + link->address() + " did not answer a salt:// file request" +
                      " (connection lost, or no answer within " + std::to_string(seconds) +
                      " s)");
  }
  co_return std::move(reply->body);
}

void agent::fail_pending() {
  std::unordered_map<uint64_t, std::shared_ptr<pending_reply>> failed;
  {
    std::lock_guard lock(mu_);
    failed.swap(pending_);
  }
  for (auto& [id, p] : failed) p->ch.try_send(std::error_code{}, proto::message{});
}

asio::awaitable<bool> agent::run_persistent() {
  auto backoff = k_recon_default;
  const auto first_refused_wait =
      std::chrono::duration_cast<std::chrono::milliseconds>(cfg_.acceptance_wait_time);
  auto refused_wait = first_refused_wait;
  const auto refused_cap = std::chrono::duration_cast<std::chrono::milliseconds>(
      cfg_.acceptance_wait_time_max.count() > 0 ? cfg_.acceptance_wait_time_max
                                                : 10 * cfg_.acceptance_wait_time);
  asio::steady_timer timer(executor_);
  int64_t failures = 0;
  while (!stopping_) {
    outcome o = co_await serve_once(k_connect_timeout);
    if (stopping_ || o == outcome::stopped) break;
    if (deps_.figures) {
      if (o == outcome::lost || o == outcome::silent) {
        deps_.figures->master_disconnects.with({o == outcome::lost ? "lost" : "silent"}).inc();
      } else if (o == outcome::connect_failed) {
        deps_.figures->connect_failures.inc();
      }
    }
    std::chrono::milliseconds wait;
    switch (o) {
      case outcome::lost:
      case outcome::silent:
      case outcome::pending_closed:
        backoff = k_recon_default;
        refused_wait = first_refused_wait;
        failures = 0;
        wait = base::equal_jitter(k_recon_default);
        set_state(agent_state::connecting);
        break;
      case outcome::unresolved:
        if (cfg_.retry_dns.count() == 0) {
          spdlog::error(
              "minion {}: giving up on master {}: its name does not resolve and "
              "retry_dns is 0",
              cfg_.id, address_);
          co_return false;
        }
        wait = std::chrono::duration_cast<std::chrono::milliseconds>(cfg_.retry_dns);
        set_state(agent_state::connecting);
        break;
      case outcome::connect_failed:
        wait = base::equal_jitter(backoff);
        backoff = std::min(backoff * 2, k_recon_max);
        set_state(agent_state::connecting);
        break;
      case outcome::refused:
      case outcome::untrusted_master:
      case outcome::stopped:
        // Refused minions retry slowly, growing to the cap, so they never
        // hammer a master that said no.
        wait = base::equal_jitter(refused_wait) + refused_wait / 2;
        refused_wait = std::min(refused_wait * 2, refused_cap);
        set_state(agent_state::refused);
        spdlog::info("minion {}: retrying master {} in {:.1f} s", cfg_.id, address_,
                     static_cast<double>(wait.count()) / 1000);
        break;
    }
    if (o != outcome::lost && o != outcome::silent && o != outcome::pending_closed &&
        cfg_.master_tries > 0 && ++failures >= cfg_.master_tries) {
      spdlog::error("minion {}: giving up on master {} after {} failed attempts (master_tries)",
                    cfg_.id, address_, failures);
      co_return false;
    }
    timer.expires_after(wait);
    std::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  co_return true;
}

asio::awaitable<bool> agent::probe(std::chrono::steady_clock::duration timeout) {
  asio::ip::tcp::socket socket(executor_);
  outcome why = outcome::connect_failed;
  auto ep = co_await connect(socket, timeout, why, false);
  std::error_code ec;
  socket.close(ec);
  co_return ep.has_value();
}

asio::awaitable<std::optional<asio::ip::tcp::endpoint>> agent::connect(
    asio::ip::tcp::socket& socket, std::chrono::steady_clock::duration timeout, outcome& why,
    bool say, std::string* error) {
  std::error_code ec;
  std::vector<asio::ip::tcp::endpoint> targets = cfg_.endpoints;
  if (targets.empty()) {
    asio::ip::tcp::resolver resolver(executor_);
    auto resolved = co_await net::with_deadline(
        resolver.async_resolve(cfg_.master, std::to_string(cfg_.master_port),
                               asio::redirect_error(asio::use_awaitable, ec)),
        timeout);
    if (!resolved || ec) {
      if (say) {
        spdlog::warn("minion {}: cannot resolve master {}: {}", cfg_.id, cfg_.master,
                     ec ? ec.message() : "timed out");
      }
      if (error) {
        *error =
            "cannot resolve " + cfg_.master + ": " + (ec ? ec.message() : std::string("timed out"));
      }
      why = outcome::unresolved;
      co_return std::nullopt;
    }
    for (const auto& e : *resolved) targets.push_back(e.endpoint());
  }
  std::optional<asio::ip::tcp::endpoint> connected;
  if (cfg_.source_address.empty()) {
    connected = co_await net::with_deadline(
        asio::async_connect(socket, targets, asio::redirect_error(asio::use_awaitable, ec)),
        timeout);
  } else {
    // Many simulated minions spread over several source addresses, so that
    // their count is not capped by one address pair's ephemeral ports.
    asio::ip::tcp::endpoint target = targets.front();
    socket.open(target.protocol(), ec);
    if (!ec) socket.bind({asio::ip::make_address(cfg_.source_address, ec), 0}, ec);
    if (!ec) {
      auto done = co_await net::with_deadline(
          socket.async_connect(target, asio::redirect_error(asio::use_awaitable, ec)), timeout);
      if (done) connected = target;
    }
  }
  if (!connected || ec) {
    if (say && !stopping_) {
      // Said once per outage, not at every retry of a master that is down.
      auto level = failures_++ == 0 ? spdlog::level::warn : spdlog::level::debug;
      spdlog::log(level, "minion {}: cannot connect to master {}: {}", cfg_.id, address_,
                  ec ? ec.message() : "timed out");
    }
    if (error) *error = "cannot connect: " + (ec ? ec.message() : std::string("timed out"));
    why = outcome::connect_failed;
    co_return std::nullopt;
  }
  co_return connected;
}

asio::awaitable<agent::opened> agent::open(std::chrono::steady_clock::duration connect_timeout,
                                           std::chrono::steady_clock::duration handshake_timeout,
                                           bool say) {
  opened o;
  asio::ip::tcp::socket socket(executor_);
  if (!co_await connect(socket, connect_timeout, o.failed, say, &o.error)) co_return o;
  // The agent's pings notice a dead master within master_alive_interval and
  // keep a live connection from ever being idle that long, so keepalive
  // probes are a backstop that live connections never send;
  // TCP_USER_TIMEOUT bounds a master that stops acknowledging.
  const int alive_s = static_cast<int>(cfg_.master_alive_interval.count());
  net::tune_socket(socket, net::keepalive{true, alive_s, std::max(1, alive_s / 3), 3});
  auto stream = std::make_unique<net::tls_stream>(std::move(socket), deps_.tls,
                                                  net::tls_context::role::client, deps_.identity);
  auto hs = co_await net::with_deadline(stream->handshake(), handshake_timeout);
  if (!hs || *hs) {
    o.error = "TLS handshake failed: " + (hs ? stream->last_error() : std::string("timed out"));
    if (say && !stopping_) spdlog::warn("minion {}: {} with master {}", cfg_.id, o.error, address_);
    stream->close();
    o.failed = outcome::connect_failed;
    co_return o;
  }
  if (!deps_.trust(stream->peer_key(), address_)) {
    stream->close();
    o.failed = outcome::untrusted_master;
    o.error = "its key is not the pinned master key";
    co_return o;
  }
  o.stream = std::move(stream);
  co_return o;
}

asio::awaitable<call_reply> agent::fetch_pillar(nlohmann::json grains,
                                                std::chrono::steady_clock::time_point deadline,
                                                bool keep_open) {
  using status = call_reply::status;
  auto left = [deadline] {
    return std::max<std::chrono::steady_clock::duration>(
        deadline - std::chrono::steady_clock::now(), std::chrono::steady_clock::duration::zero());
  };
  if (stopping_) co_return failed_call(status::cancelled, "stopped");
  opened o = co_await open(left(), left(), false);
  if (!o.stream) {
    if (stopping_) co_return failed_call(status::cancelled, "stopped");
    status st = o.failed == outcome::untrusted_master ? status::untrusted : status::unreachable;
    co_return failed_call(st, o.error);
  }
  auto conn = std::make_shared<net::connection>(executor_, std::move(o.stream),
                                                proto::frame_decoder(cfg_.max_frame_bytes));
  auto st = std::make_shared<call_state>(executor_);
  {
    std::lock_guard lock(mu_);
    conn_ = conn;
  }
  // stop() may have come before conn_ was set.
  if (stopping_) conn->close();
  net::frame_ptr request = call_pillar_request(std::move(grains));
  std::weak_ptr<net::connection> weak = conn;
  std::weak_ptr<agent> self = weak_from_this();
  // Both handlers run on this coroutine's strand (the connection's executor).
  conn->start(
      [st, weak, self, request](proto::message&& m) {
        if (m.type == msg_type::file_reply) {
          if (auto a = self.lock()) a->deliver_reply(std::move(m));
          return;
        }
        if (auto c = weak.lock()) on_call_message(*st, *c, request, std::move(m));
      },
      [st, self](std::error_code e, const std::string& detail) {
        st->finish(status::failed,
                   "the connection closed (" + (detail.empty() ? e.message() : detail) + ")");
        if (auto a = self.lock()) a->fail_pending();
      });
  conn->send(auth_request(cfg_.id, proto::k_purpose_call));
  try {
    while (!st->done) {
      if (left() == std::chrono::steady_clock::duration::zero()) {
        st->finish(status::timed_out, "no answer in time");
        break;
      }
      std::error_code ec;
      st->wake.expires_at(deadline);
      co_await st->wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      auto cs = co_await asio::this_coro::cancellation_state;
      if (cs.cancelled() != asio::cancellation_type::none) {
        st->finish(status::cancelled, "another master answered first");
      }
    }
  } catch (const std::system_error&) {
    // Cancelled while waiting: the connection must still be closed.
    st->finish(status::cancelled, "another master answered first");
  }
  if (stopping_) st->finish(status::cancelled, "stopped");
  if (keep_open && st->reply.st == status::answered) {
    // The call's salt:// requests follow on this connection (request()).
    std::lock_guard lock(mu_);
    auth_ = auth_state::accepted;
    co_return std::move(st->reply);
  }
  {
    std::lock_guard lock(mu_);
    conn_.reset();
  }
  conn->close();
  co_return std::move(st->reply);
}

asio::awaitable<agent::outcome> agent::serve_once(
    std::chrono::steady_clock::duration connect_timeout) {
  if (stopping_) co_return outcome::stopped;
  // Every connection starts from here, so that an acceptance on the next
  // one is reported again (its owner re-sends the spool then).
  set_state(agent_state::connecting);
  const std::string& where = address_;
  opened o = co_await open(connect_timeout, k_handshake_timeout, true);
  if (!o.stream) co_return stopping_ ? outcome::stopped : o.failed;
  auto stream = std::move(o.stream);
  if (failures_ > 0) {
    spdlog::info("minion {}: master {} answers again after {} failed attempts", cfg_.id, where,
                 std::exchange(failures_, 0));
  }

  auto conn = std::make_shared<net::connection>(executor_, std::move(stream),
                                                proto::frame_decoder(cfg_.max_frame_bytes));
  auto wake = std::make_shared<asio::steady_timer>(executor_);
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
  // stop() may have come between the check above and conn_ being set.
  if (stopping_) conn->close();
  // Both handlers run on this coroutine's strand (the connection's executor).
  conn->start(
      [weak = weak_from_this()](proto::message&& m) {
        if (auto self = weak.lock()) self->on_message(std::move(m));
      },
      [cs, wake](std::error_code e, const std::string& detail) {
        cs->closed = true;
        cs->reason = detail.empty() ? e.message() : detail;
        wake->cancel();
      });
  conn->send(auth_request(cfg_.id, cfg_.returns_only));

  bool was_accepted = false;
  bool refused = false;
  bool was_pending = false;
  bool silent = false;
  std::error_code ec;
  auto auth_sent = std::chrono::steady_clock::now();
  const auto alive = cfg_.master_alive_interval;
  // A ping goes after half the interval without traffic, at most one per
  // half interval: a live master has the other half to answer, and a master
  // with 10,000 idle minions answers 10,000 pings per half interval, not
  // more (at a third, its idle CPU was half as much again).
  const auto ping_after = std::max<std::chrono::steady_clock::duration>(1000ms, alive / 2);
  auto last_ping = std::chrono::steady_clock::time_point{};
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
      if (now - last_rx >= alive) {
        spdlog::warn(
            "minion {}: master {} sent nothing for {} s (master_alive_interval); "
            "closing the connection",
            cfg_.id, where, alive.count());
        silent = true;
        break;
      }
      if (now - last_rx >= ping_after && now - last_ping >= ping_after) {
        conn->send({msg_type::ping, 0, json::object()});
        last_ping = now;
      }
      // The next moment a ping may be due, or the end of the interval,
      // whichever comes first, so that a dead master is noticed right at
      // master_alive_interval.
      wake->expires_at(std::min(std::max(last_rx, last_ping) + ping_after, last_rx + alive));
    } else if (st == auth_state::pending) {
      was_pending = true;
      if (now - auth_sent >= cfg_.acceptance_wait_time) {
        conn->send(auth_request(cfg_.id, cfg_.returns_only));
        auth_sent = now;
      }
      wake->expires_after(cfg_.acceptance_wait_time);
    } else if (st == auth_state::refused) {
      refused = true;
      break;
    } else {
      if (now - auth_sent > k_connect_timeout) {
        spdlog::warn("minion {}: master {} did not answer authentication in time; reconnecting",
                     cfg_.id, where);
        break;
      }
      wake->expires_after(k_connect_timeout);
    }
    co_await wake->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  {
    std::lock_guard lock(mu_);
    conn_.reset();
    wake_.reset();
  }
  fail_pending();
  conn->close();
  // No longer serving from the moment the connection is gone, not from the
  // next attempt.
  if (!refused) set_state(agent_state::connecting);
  if (stopping_) co_return outcome::stopped;
  if (refused) co_return outcome::refused;
  if (was_accepted) {
    if (!silent) {
      spdlog::warn("minion {}: connection to master {} lost ({})", cfg_.id, where, cs->reason);
    }
    co_return silent ? outcome::silent : outcome::lost;
  }
  if (was_pending) co_return outcome::pending_closed;
  spdlog::warn("minion {}: connection to master {} closed before authentication ({})", cfg_.id,
               where, cs->reason);
  co_return outcome::connect_failed;
}

void agent::on_message(proto::message&& m) {
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
          bool schedules = false;
          {
            std::lock_guard lock(mu_);
            auth_ = auth_state::accepted;
            said_pending_ = false;
            features_.clear();
            if (auto f = m.body.find("features"); f != m.body.end() && f->is_array()) {
              for (const auto& x : *f) {
                if (x.is_string()) features_.push_back(x.get<std::string>());
              }
            }
            schedules = std::find(features_.begin(), features_.end(),
                                  proto::k_feature_schedule) != features_.end();
          }
          spdlog::info("minion {}: authenticated with master {}", cfg_.id, address_);
          // Grains first: the master targets by them.
          if (deps_.grains) {
            if (auto frame = deps_.grains()) conn->send(std::move(frame));
          }
          // Then the schedule, to a master that takes it (an older one
          // would close the connection on the unknown type).
          if (deps_.schedule && !cfg_.returns_only) {
            if (auto frame = deps_.schedule(); frame && schedules) conn->send(std::move(frame));
          }
          set_state(agent_state::accepted);
        }
      } else if (status == "pending") {
        bool say;
        {
          std::lock_guard lock(mu_);
          auth_ = auth_state::pending;
          say = !std::exchange(said_pending_, true);
        }
        set_state(agent_state::pending);
        if (say) {
          spdlog::warn("minion {}: master {}: {}; asking again every {} s", cfg_.id, address_,
                       message, cfg_.acceptance_wait_time.count());
        }
      } else {
        {
          std::lock_guard lock(mu_);
          auth_ = auth_state::refused;
          said_pending_ = false;
        }
        spdlog::error("minion {}: master {} refused this minion ({}): {}", cfg_.id, address_,
                      status, message);
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
      spdlog::error("minion {}: master {} reported an error: {}", cfg_.id, address_,
                    m.body.value("message", "?"));
      return;
    default:
      break;
  }
  if (st != auth_state::accepted) {
    spdlog::warn("minion {}: master sent {} before accepting this minion; ignored", cfg_.id,
                 proto::to_string(m.type));
    return;
  }
  switch (m.type) {
    case msg_type::publish:
      on_publish(conn, std::move(m));
      return;
    case msg_type::file_reply:
    case msg_type::run_reply:
    case msg_type::compile_reply:
      deliver_reply(std::move(m));
      return;
    case msg_type::schedule_periods:
      if (deps_.on_schedule_periods) deps_.on_schedule_periods(m.body);
      return;
    case msg_type::reconnect:
      // The master closes the connection next; serve_once then ends as
      // lost, and the minion connects again at once (with jitter).
      spdlog::info("minion {}: master {} asks it to connect again: {}", cfg_.id, address_,
                   m.body.value("reason", "?"));
      return;
    case msg_type::return_ack:
      deps_.spool.forget(m.body.value("jid", ""));
      if (deps_.figures) deps_.figures->returns_acknowledged.inc();
      if (deps_.on_acked) deps_.on_acked(*this);
      return;
    case msg_type::pillar: {
      std::string why;
      if (auto p = proto::read_pillar(m.body, why)) {
        if (deps_.on_pillar) deps_.on_pillar(std::move(*p), proto::read_tops(m.body));
      } else {
        spdlog::warn("minion {}: master {} sent a pillar message without a pillar ({}); ignored",
                     cfg_.id, address_, why);
      }
      return;
    }
    default:
      spdlog::warn("minion {}: master sent unexpected {}; ignored", cfg_.id,
                   proto::to_string(m.type));
  }
}

void agent::on_publish(const std::shared_ptr<net::connection>& conn, proto::message&& m) {
  std::string jid = m.body.value("jid", "");
  jobs_received_.fetch_add(1, std::memory_order_relaxed);
  if (deps_.figures) deps_.figures->jobs_received.inc();
  if (deps_.on_publish) deps_.on_publish(jid);
  if (deps_.history.contains(jid)) {
    // A repeat (a held publish delivered again, another master, a
    // restarted one): acknowledged, so the master stops waiting, never run
    // twice.
    conn->send({msg_type::job_ack, 0, {{"jid", jid}}});
    return;
  }
  if (uint64_t held = deps_.spool.bytes(); held >= cfg_.spool_max_bytes) {
    std::string why = "return spool full: " + std::to_string(deps_.spool.size()) + " returns (" +
                      std::to_string(held) +
                      " bytes) wait for a master to acknowledge them; spool_max_bytes is " +
                      std::to_string(cfg_.spool_max_bytes);
    bool say;
    {
      std::lock_guard lock(mu_);
      say = !std::exchange(said_spool_full_, true);
    }
    if (say) {
      spdlog::error(
          "minion {}: {}; refusing new jobs until masters acknowledge returns "
          "(raise spool_max_bytes in {}, or bring the masters they belong to back)",
          cfg_.id, why, cfg_.source);
    }
    conn->send({msg_type::job_refused, 0, {{"jid", jid}, {"reason", why}}});
    if (deps_.figures) deps_.figures->job_refusals.with({"spool_full"}).inc();
    return;
  }
  {
    std::lock_guard lock(mu_);
    said_spool_full_ = false;
  }
  if (deps_.targeted && !deps_.targeted(m.body)) {
    // The master had no grains of this minion when it published: its own
    // grains say the job is not for it. Not run, and not an error.
    conn->send({msg_type::job_refused,
                0,
                {{"jid", jid}, {"reason", std::string(proto::k_not_targeted)}}});
    if (deps_.figures) deps_.figures->job_refusals.with({"not_targeted"}).inc();
    return;
  }
  if (!deps_.history.insert(jid)) {
    conn->send({msg_type::job_ack, 0, {{"jid", jid}}});  // another link took it meanwhile
    return;
  }
  // An instant function's return follows at once and acknowledges the job
  // itself; one that may take time is acknowledged now.
  const bool instant = deps_.functions.instant(m.body.value("fun", ""));
  if (!instant) conn->send({msg_type::job_ack, 0, {{"jid", jid}}});
  // A job that may wait gets a strand of its own; an instant one runs on the
  // agent's, right after this handler, with no thread woken.
  if (instant || deps_.jobs == nullptr) {
    asio::co_spawn(instant ? executor_ : asio::make_strand(executor_),
                   run_job(shared_from_this(), std::move(m)), net::logged("job"));
    return;
  }
  // A job that may take time can be listed and killed while it runs.
  auto strand = asio::make_strand(executor_);
  modules::running_job info{jid, m.body.value("fun", ""), m.body.value("args", json::array()),
                            m.body.value("kwargs", json::object()),
                            std::chrono::duration<double>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count()};
  auto signal = deps_.jobs->add(std::move(info), strand);
  // The signal outlives the coroutine its slot is bound to: the completion
  // handler holds it (the table lets go when the job ends).
  asio::co_spawn(strand, run_job(shared_from_this(), std::move(m)),
                 asio::bind_cancellation_slot(signal->slot(), [signal](std::exception_ptr e) {
                   net::log_exception("job", e);
                 }));
}

bool agent::supports(std::string_view feature) const {
  std::lock_guard lock(mu_);
  return auth_ == auth_state::accepted &&
         std::find(features_.begin(), features_.end(), feature) != features_.end();
}

asio::awaitable<void> agent::run_scheduled(std::shared_ptr<agent> self, proto::message m) {
  std::string jid = m.body.value("jid", "");
  // Recorded as taken on, so that a publish of the same jid (a restarted
  // master reopening it) is acknowledged and not run again.
  if (!self->deps_.history.insert(jid)) co_return;
  auto strand = asio::make_strand(self->executor_);
  if (self->deps_.jobs == nullptr || self->deps_.functions.instant(m.body.value("fun", ""))) {
    co_await asio::co_spawn(strand, run_job(self, std::move(m)), asio::use_awaitable);
    co_return;
  }
  modules::running_job info{jid, m.body.value("fun", ""), m.body.value("args", json::array()),
                            m.body.value("kwargs", json::object()),
                            std::chrono::duration<double>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count()};
  auto signal = self->deps_.jobs->add(std::move(info), strand);
  try {
    co_await asio::co_spawn(strand, run_job(self, std::move(m)),
                            asio::bind_cancellation_slot(signal->slot(), asio::use_awaitable));
  } catch (const std::system_error& e) {
    // Killed (saltutil.kill_job): as a published job's kill, nothing more.
    spdlog::info("minion {}: scheduled job {} ended: {}", self->cfg_.id, jid, e.what());
  }
}

bool agent::send(const net::frame_ptr& frame) {
  std::shared_ptr<net::connection> conn;
  {
    std::lock_guard lock(mu_);
    if (auth_ == auth_state::accepted) conn = conn_;
  }
  if (!conn) return false;
  conn->send(frame);
  return true;
}

bool agent::send_return(const encoded_return& bytes) {
  std::shared_ptr<net::connection> conn;
  {
    std::lock_guard lock(mu_);
    if (auth_ == auth_state::accepted) conn = conn_;
  }
  if (!conn) return false;
  conn->send(std::make_shared<const std::vector<uint8_t>>(
      proto::encode_frame(msg_type::job_return, 0, bytes)));
  if (deps_.figures) deps_.figures->returns_sent.inc();
  return true;
}

asio::awaitable<void> agent::run_job(std::shared_ptr<agent> self, proto::message m) {
  // A job outlives its link if it must (failover moved on): it still
  // returns, through deps.on_return, to the master that sent it.
  agent& a = *self;
  modules::call c;
  c.jid = m.body.value("jid", "");
  c.fun = m.body.value("fun", "");
  c.args = m.body.value("args", json::array());
  c.kwargs = m.body.value("kwargs", json::object());
  c.timeout = a.cfg_.job_timeout;
  spdlog::debug("minion {}: job {} from {}: {}", a.cfg_.id, c.jid, a.address_, c.fun);
  c.context = a.deps_.context;
  const auto started = std::chrono::steady_clock::now();
  modules::outcome out = co_await modules::execute(a.deps_.functions, c);
  if (a.deps_.figures) count_job(*a.deps_.figures, c.fun, out, started);
  if (a.deps_.jobs) a.deps_.jobs->remove(c.jid);
  // Encoded once: the spool keeps these bytes and the frame carries them.
  spooled_return r{c.jid, a.address_,
                   fit_return(return_body(c, a.cfg_.id, a.address_, std::move(out)),
                              a.cfg_.max_frame_bytes, a.cfg_.id)};
  try {
    if (a.deps_.spool.blocking() && a.deps_.blocking) {
      co_await asio::co_spawn(*a.deps_.blocking,
                              save_return(&a.deps_.spool, c.jid, a.address_, &r.bytes),
                              asio::use_awaitable);
    } else {
      a.deps_.spool.save(c.jid, a.address_, r.bytes);
    }
  } catch (const std::exception& e) {
    spdlog::error("minion {}: job {}: cannot keep its return ({}); sending it anyway", a.cfg_.id,
                  c.jid, e.what());
  }
  if (a.deps_.on_return) {
    a.deps_.on_return(*self, r);
  } else {
    self->send_return(r.bytes);
  }
}

}  // namespace brine::minion

