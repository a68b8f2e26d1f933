#include "master/delivery.h"

#include <spdlog/spdlog.h>

#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "base/clock.h"

namespace brine::master {

using nlohmann::json;

namespace {

// How often deadlines are checked: the precision of a job's deadline.
constexpr std::chrono::milliseconds k_sweep_interval{100};

const char* reason_for(bool sent) {
  return sent ? "no acknowledgement: the publish was sent but the minion did not confirm it "
                "before the delivery deadline"
              : "not connected";
}

}  // namespace

std::vector<delivery::session_ptr> delivery::open(job j, std::vector<std::string> targets) {
  auto entry = std::make_unique<open_job>();
  entry->j = std::move(j);
  entry->targets = std::move(targets);
  std::vector<session_ptr> now;
  std::lock_guard lock(mu_);
  entry->waiting.reserve(entry->targets.size());
  for (const auto& id : entry->targets) {
    auto s = sessions_.find_accepted(id);
    entry->waiting.emplace(id, s ? state::sent : state::held);
    if (s) now.push_back(std::move(s));
  }
  if (!entry->targets.empty()) {
    std::string jid = entry->j.jid;
    jobs_[jid] = std::move(entry);
  }
  return now;
}

void delivery::reserve(job j, std::vector<std::string> targets) {
  auto entry = std::make_unique<open_job>();
  entry->j = std::move(j);
  entry->targets = std::move(targets);
  entry->reserved = true;
  entry->waiting.reserve(entry->targets.size());
  for (const auto& id : entry->targets) entry->waiting.emplace(id, state::held);
  if (entry->targets.empty()) return;
  std::string jid = entry->j.jid;
  std::lock_guard lock(mu_);
  jobs_[jid] = std::move(entry);
}

std::vector<delivery::session_ptr> delivery::release(const std::string& jid) {
  std::vector<session_ptr> now;
  std::lock_guard lock(mu_);
  auto it = jobs_.find(jid);
  // Gone: every target acknowledged it already.
  if (it == jobs_.end()) return now;
  it->second->reserved = false;
  for (auto& [id, st] : it->second->waiting) {
    auto s = sessions_.find_accepted(std::string(id));
    if (!s) continue;
    st = state::sent;
    now.push_back(std::move(s));
  }
  return now;
}

void delivery::cancel(const std::string& jid) {
  std::lock_guard lock(mu_);
  jobs_.erase(jid);
}

void delivery::on_ready(const session_ptr& s) {
  std::vector<net::frame_ptr> frames;
  {
    std::lock_guard lock(mu_);
    for (auto& [jid, entry] : jobs_) {
      if (entry->reserved) continue;
      auto it = entry->waiting.find(s->id);
      if (it == entry->waiting.end()) continue;
      it->second = state::sent;
      frames.push_back(entry->j.frame);
    }
  }
  if (!frames.empty()) {
    spdlog::debug("minion {}: delivering {} held publishes", s->id, frames.size());
  }
  for (auto& f : frames) s->conn->send(std::move(f));
}

void delivery::on_acknowledged(const std::string& id, const std::string& jid) {
  std::lock_guard lock(mu_);
  leave(jid, id);
}

void delivery::leave(const std::string& jid, const std::string& id) {
  auto it = jobs_.find(jid);
  if (it == jobs_.end()) return;
  it->second->waiting.erase(id);
  if (!it->second->waiting.empty()) return;
  // Every target has it: nothing left to hold or to record.
  jobs_.erase(it);
  store_.post([jid](store::store& db) { db.settle_job(jid); });
}

void delivery::on_refused(const std::string& id, const std::string& jid,
                          const std::string& reason) {
  {
    std::lock_guard lock(mu_);
    auto it = jobs_.find(jid);
    if (it == jobs_.end() || !it->second->waiting.contains(id)) return;
    leave(jid, id);
  }
  // A greedy publish that the minion's own grains do not target is no
  // failure: the CLI leaves such minions out.
  record(jid,
         {{jid, id, reason == proto::k_not_targeted ? reason : "refused: " + reason,
           base::unix_seconds(clock_())}},
         false);
}

void delivery::on_key_gone(const std::string& id, const std::string& why) {
  std::vector<std::string> jids;
  {
    std::lock_guard lock(mu_);
    for (const auto& [jid, entry] : jobs_) {
      if (entry->waiting.contains(id)) jids.push_back(jid);
    }
    for (const auto& jid : jids) leave(jid, id);
  }
  int64_t now = base::unix_seconds(clock_());
  for (const auto& jid : jids) record(jid, {{jid, id, why, now}}, false);
}

void delivery::sweep() {
  std::vector<std::pair<std::string, std::vector<store::undelivered_record>>> due;
  auto now = clock_();
  {
    std::lock_guard lock(mu_);
    int64_t stamp = base::unix_seconds(now);
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      // Not recorded yet (a store that stalls): what to record comes later.
      if (it->second->j.deadline > now || it->second->reserved) {
        ++it;
        continue;
      }
      const std::string& origin = it->second->j.origin;
      if (!origin.empty() && origin_alive_ && origin_alive_(origin)) {
        // Another member's job: it records what its cluster did not deliver.
        it = jobs_.erase(it);
        continue;
      }
      if (!origin.empty()) {
        spdlog::info("job {}: its master {} is gone; recording what was not delivered", it->first,
                     origin);
      }
      std::vector<store::undelivered_record> left;
      left.reserve(it->second->waiting.size());
      for (const auto& [id, st] : it->second->waiting) {
        left.push_back({it->first, std::string(id), reason_for(st == state::sent), stamp});
      }
      due.emplace_back(it->first, std::move(left));
      it = jobs_.erase(it);
    }
  }
  for (auto& [jid, left] : due) record(jid, std::move(left), true);
}

void delivery::record(const std::string& jid, std::vector<store::undelivered_record> undelivered,
                      bool settle) {
  store_.post([this, jid, undelivered = std::move(undelivered), settle](store::store& db) {
    db.add_undelivered(undelivered);
    if (settle) db.settle_job(jid);
    for (const auto& u : undelivered) {
      events_.publish("brine/job/" + jid + "/undelivered/" + u.minion,
                      {{"id", u.minion}, {"jid", jid}, {"reason", u.reason}});
    }
  });
}

bool delivery::holds(const std::string& jid) const {
  std::lock_guard lock(mu_);
  return jobs_.contains(jid);
}

size_t delivery::waiting() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [jid, entry] : jobs_) n += entry->waiting.size();
  return n;
}

size_t delivery::held() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [jid, entry] : jobs_) {
    for (const auto& [id, st] : entry->waiting) n += st == state::held ? 1 : 0;
  }
  return n;
}

asio::awaitable<void> delivery::sweep_loop(const std::atomic<bool>& stopping) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    timer.expires_after(k_sweep_interval);
    std::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec || stopping) co_return;
    sweep();
  }
}

}  // namespace brine::master
