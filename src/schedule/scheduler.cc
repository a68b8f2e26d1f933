#include "schedule/scheduler.h"

#include <spdlog/spdlog.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/strand.hpp>
#include <asio/use_awaitable.hpp>
#include <random>

#include "base/schedule_option.h"

namespace brine::schedule {

using namespace std::chrono_literals;

namespace {

// Between asks while no master answers: short, so a run goes soon after a
// master is back, and cheap (nothing is sent while there is no link).
constexpr auto k_no_master_wait = 1000ms;

uint32_t draw_splay(uint32_t start, uint32_t end) {
  if (end <= start) return start;
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_int_distribution<uint32_t>(start, end)(rng);
}

}  // namespace

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

scheduler::scheduler(asio::any_io_executor executor, std::string id,
                     std::vector<base::schedule_job> jobs, hooks h, options o)
    : strand_(asio::make_strand(executor)), id_(std::move(id)), hooks_(std::move(h)), options_(o) {
  std::lock_guard lock(mu_);
  for (auto& j : jobs) entries_.push_back(make_entry(std::move(j)));
  replan();
}

std::shared_ptr<scheduler::entry> scheduler::make_entry(base::schedule_job job) {
  auto e = std::make_shared<entry>();
  e->job = std::move(job);
  e->timer = std::make_shared<asio::steady_timer>(strand_);
  return e;
}

void scheduler::replan() {
  std::vector<job_period> periods;
  for (const auto& e : entries_) {
    if (!e->job.enabled) continue;
    auto a = assigned_.find(e->job.name);
    periods.push_back({e->job.name, a != assigned_.end() ? a->second : e->job.seconds});
  }
  auto t = schedule::timings(id_, periods, harmonic_);
  size_t k = 0;
  for (auto& e : entries_) {
    e->timing = job_timing{};
    if (!e->job.enabled) continue;
    e->timing = t[k++];
    if (!options_.spread) e->timing.offset_ms = 0;
  }
}

std::vector<base::schedule_job> scheduler::jobs() const {
  std::lock_guard lock(mu_);
  std::vector<base::schedule_job> out;
  for (const auto& e : entries_) out.push_back(e->job);
  return out;
}

std::vector<job_timing> scheduler::timings() const {
  std::lock_guard lock(mu_);
  std::vector<job_timing> out;
  for (const auto& e : entries_) out.push_back(e->timing);
  return out;
}

void scheduler::spawn(const std::shared_ptr<entry>& e) {
  asio::co_spawn(strand_, loop(shared_from_this(), e), [id = id_](std::exception_ptr ex) {
    if (!ex) return;
    try {
      std::rethrow_exception(ex);
    } catch (const std::exception& what) {
      spdlog::error("minion {}: schedule: {}", id, what.what());
    }
  });
}

void scheduler::start() {
  asio::post(strand_, [self = shared_from_this()] {
    if (self->stopping_ || std::exchange(self->started_loops_, true)) return;
    for (const auto& e : self->entries_) {
      if (e->job.enabled) self->spawn(e);
    }
  });
}

void scheduler::stop() {
  if (stopping_.exchange(true)) return;
  asio::post(strand_, [self = shared_from_this()] {
    for (auto& e : self->entries_) e->timer->cancel();
  });
}

void scheduler::set_jobs(std::vector<base::schedule_job> jobs) {
  asio::post(strand_, [self = shared_from_this(), jobs = std::move(jobs)]() mutable {
    std::map<std::string, std::shared_ptr<entry>> old;
    for (auto& e : self->entries_) old.emplace(e->job.name, e);
    std::vector<std::shared_ptr<entry>> next;
    std::vector<std::shared_ptr<entry>> fresh;
    for (auto& j : jobs) {
      auto it = old.find(j.name);
      if (it != old.end() && base::same_job(it->second->job, j)) {
        next.push_back(it->second);
        old.erase(it);
        continue;
      }
      auto e = self->make_entry(std::move(j));
      // A changed definition of the same name: its runs under way still
      // count against maxrunning.
      if (it != old.end()) e->running = it->second->running;
      next.push_back(e);
      if (e->job.enabled) fresh.push_back(e);
    }
    // What is left was removed or changed: its loop stops waiting; runs
    // of it under way finish.
    for (auto& [name, e] : old) {
      e->retired = true;
      e->timer->cancel();
    }
    {
      std::lock_guard lock(self->mu_);
      self->entries_ = std::move(next);
      // A new job takes its phase among the others: with harmonic
      // periods they are worked out together, so the ones that stay are
      // woken to theirs.
      self->replan();
    }
    for (auto& e : self->entries_) {
      ++e->generation;
      e->timer->cancel();
    }
    if (self->started_loops_ && !self->stopping_) {
      for (auto& e : fresh) self->spawn(e);
    }
  });
}

void scheduler::set_periods(std::map<std::string, uint64_t> periods, bool harmonic) {
  asio::post(strand_, [self = shared_from_this(), periods = std::move(periods), harmonic] {
    if (periods == self->assigned_ && harmonic == self->harmonic_) return;
    self->assigned_ = periods;
    self->harmonic_ = harmonic;
    {
      std::lock_guard lock(self->mu_);
      self->replan();
    }
    for (auto& e : self->entries_) {
      ++e->generation;
      e->timer->cancel();
    }
  });
}

asio::awaitable<bool> scheduler::sleep_for(entry& e, std::chrono::milliseconds d,
                                           uint64_t generation) {
  e.timer->expires_after(d);
  std::error_code ec;
  co_await e.timer->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  co_return !stopping_ && !e.retired && e.generation == generation;
}

asio::awaitable<bool> scheduler::sleep_until(entry& e, int64_t when_ms, uint64_t generation) {
  // The wall clock decides (slots are wall-clock times); a steady timer
  // waits, checked again on waking in case the clock was stepped.
  for (;;) {
    int64_t left = when_ms - unix_ms();
    if (left <= 0) co_return true;
    if (!co_await sleep_for(e, std::chrono::milliseconds(left), generation)) co_return false;
  }
}

asio::awaitable<void> scheduler::loop(std::shared_ptr<scheduler> self, std::shared_ptr<entry> e) {
  scheduler& s = *self;
  const base::schedule_job& job = e->job;
  auto gone = [&] { return s.stopping_ || e->retired; };
  bool first = true;
  while (!gone()) {
    const uint64_t generation = e->generation;
    const job_timing t = e->timing;
    int64_t slot;
    if (first && job.run_on_start) {
      slot = unix_ms();
    } else {
      slot = next_slot(std::max(unix_ms(), e->last_slot + 1), t.period_ms, t.offset_ms);
    }
    uint32_t splay = draw_splay(job.splay_start, job.splay_end);
    if (!co_await s.sleep_until(*e, slot + int64_t{splay} * 1000, generation)) {
      if (gone()) co_return;
      continue;  // re-planned: work the slot out again
    }
    first = false;
    e->last_slot = slot;
    if (*e->running >= job.maxrunning) {
      ++s.skipped_;
      spdlog::info(
          "minion {}: schedule job {}: {} run(s) still under way (maxrunning {}); this "
          "run is skipped",
          s.id_, job.name, *e->running, job.maxrunning);
      continue;
    }
    grant g;
    bool said = false;
    while (!gone()) {
      g = co_await s.hooks_.ask(job, slot);
      if (g.k == grant::kind::run) break;
      std::chrono::milliseconds wait = k_no_master_wait;
      if (g.k == grant::kind::retry) {
        ++s.deferred_;
        // The master drew it at random ([N/2, 3N/2]): the minions it turned
        // away come back spread, not as one wave.
        wait = std::max<std::chrono::milliseconds>(g.retry_after, 100ms);
        spdlog::log(std::exchange(said, true) ? spdlog::level::debug : spdlog::level::info,
                    "minion {}: schedule job {}: run deferred by the master ({}); asking again "
                    "in {:.1f} s",
                    s.id_, job.name, g.detail, wait.count() / 1000.0);
      } else if (!std::exchange(said, true)) {
        spdlog::info("minion {}: schedule job {}: run due, waiting for a master to grant it "
                     "({})",
                     s.id_, job.name, g.detail);
      }
      // A re-plan does not drop a run that is due: it still asks.
      co_await s.sleep_for(*e, wait, e->generation);
    }
    // Stopped while it waited. A run the master granted is run even if its
    // job was removed or changed meanwhile: the master recorded it, and
    // its record is to end with a return.
    if (s.stopping_ || g.k != grant::kind::run) co_return;
    ++*e->running;
    ++s.started_;
    spdlog::debug("minion {}: schedule job {}: run {} ({})", s.id_, job.name, g.jid, job.function);
    asio::co_spawn(s.strand_, s.hooks_.run(job, std::move(g)), [self, e](std::exception_ptr ex) {
      // Back on the strand (the completion runs there).
      --*e->running;
      if (!ex) return;
      try {
        std::rethrow_exception(ex);
      } catch (const std::exception& what) {
        spdlog::warn("minion {}: schedule: a run failed: {}", self->id_, what.what());
      }
    });
  }
}

}  // namespace brine::schedule
