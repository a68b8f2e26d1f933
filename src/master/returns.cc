#include "master/returns.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "base/clock.h"
#include "master/jid.h"
#include "proto/frame.h"

namespace brine::master {

using nlohmann::json;
using proto::msg_type;

namespace {

// Longest a return_ack waits for another frame to the same minion to ride
// with. The minion keeps the return in its spool that much longer.
constexpr std::chrono::milliseconds k_ack_delay{1000};

}  // namespace

void returns::on_return(const std::shared_ptr<session>& s, proto::message&& m) {
  std::string jid = m.body.value("jid", "");
  if (!jid_generator::valid(jid)) {
    spdlog::warn("minion {} at {}: return with invalid jid '{}' ignored", s->id, s->conn->peer(),
                 jid);
    return;
  }
  store::return_record r;
  r.jid = jid;
  r.minion = s->id;  // from the authenticated key, never from the body
  r.fun = m.body.value("fun", "");
  auto ret = m.body.find("ret");
  auto value = ret != m.body.end() ? proto::from_ordered_bytes(*ret) : nlohmann::ordered_json();
  if (!value) {
    spdlog::warn("minion {} at {}: job {}: its return's bytes are not MessagePack; stored as an "
                 "error", s->id, s->conn->peer(), jid);
    value = "ERROR: the minion sent a return that is not MessagePack";
  }
  r.ret = std::move(*value);
  r.success = m.body.value("success", false);
  r.retcode = m.body.value("retcode", 0);
  r.stamp = base::unix_now();
  r.received_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  json event = {{"id", r.minion},  {"jid", jid},           {"fun", r.fun},
                {"return", proto::ordered_bytes(r.ret)}, {"success", r.success},
                {"retcode", r.retcode}};
  auto conn = s->conn;
  std::string tag = "brine/job/" + jid + "/ret/" + s->id;
  store_.add_return(std::move(r), [this, conn, jid, tag, event = std::move(event)] {
    // Nobody waits on the ack but the minion's spool: it rides with the next
    // frame to this minion, or goes within k_ack_delay.
    conn->send_deferred(net::make_frame({msg_type::return_ack, 0, {{"jid", jid}}}));
    {
      std::lock_guard lock(mu_);
      waiting_.push_back({conn, std::chrono::steady_clock::now() + k_ack_delay});
    }
    events_.publish(tag, event);
  });
}

asio::awaitable<void> returns::flush_loop(const std::atomic<bool>& stopping) {
  // One timer for all minions: a tick a quarter of the delay, each tick
  // flushing the connections whose acks are due and still waiting (most
  // have gone out with a later frame by then).
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    timer.expires_after(k_ack_delay / 4);
    std::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec || stopping) co_return;
    std::vector<waiting_ack> due;
    {
      std::lock_guard lock(mu_);
      auto now = std::chrono::steady_clock::now();
      // Entries are appended with a constant delay, so they are in due order.
      auto end = std::find_if(waiting_.begin(), waiting_.end(),
                              [&](const waiting_ack& w) { return w.due > now; });
      due.assign(std::make_move_iterator(waiting_.begin()), std::make_move_iterator(end));
      waiting_.erase(waiting_.begin(), end);
    }
    for (const auto& w : due) {
      auto conn = w.conn.lock();
      if (conn && conn->has_deferred()) conn->flush();
    }
  }
}

}  // namespace brine::master
