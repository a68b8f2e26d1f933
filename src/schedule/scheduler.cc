#include "schedule/scheduler.h"

#include <spdlog/spdlog.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/strand.hpp>
#include <asio/use_awaitable.hpp>
#include <random>


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
    : strand_(asio::make_strand(executor)),
      id_(std::move(id)),
      jobs_(std::move(jobs)),
      hooks_(std::move(h)),
      options_(o) {
  for (size_t i = 0; i < jobs_.size(); ++i) {
    auto st = std::make_unique<job_state>();
    st->index = i;
    st->timer = std::make_shared<asio::steady_timer>(strand_);
    states_.push_back(std::move(st));
  }
  replan();
}

void scheduler::replan() {
  std::vector<job_period> periods;
  for (const auto& j : jobs_) {
    if (!j.enabled) continue;
    auto a = assigned_.find(j.name);
    periods.push_back({j.name, a != assigned_.end() ? a->second : j.seconds});
  }
  auto t = schedule::timings(id_, periods, harmonic_);
  timings_.assign(jobs_.size(), job_timing{});
  size_t k = 0;
  for (size_t i = 0; i < jobs_.size(); ++i) {
    if (!jobs_[i].enabled) continue;
    timings_[i] = t[k++];
    if (!options_.spread) timings_[i].offset_ms = 0;
  }
}

std::vector<job_timing> scheduler::timings() const { return timings_; }

void scheduler::start() {
  for (size_t i = 0; i < jobs_.size(); ++i) {
    if (!jobs_[i].enabled) continue;
    asio::co_spawn(strand_, loop(shared_from_this(), i), [id = id_](std::exception_ptr e) {
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        spdlog::error("minion {}: schedule: {}", id, ex.what());
      }
    });
  }
}

void scheduler::stop() {
  if (stopping_.exchange(true)) return;
  asio::post(strand_, [self = shared_from_this()] {
    for (auto& st : self->states_) st->timer->cancel();
  });
}

void scheduler::set_periods(std::map<std::string, uint64_t> periods, bool harmonic) {
  asio::post(strand_, [self = shared_from_this(), periods = std::move(periods), harmonic] {
    if (periods == self->assigned_ && harmonic == self->harmonic_) return;
    self->assigned_ = periods;
    self->harmonic_ = harmonic;
    self->replan();
    for (auto& st : self->states_) {
      ++st->generation;
      st->timer->cancel();
    }
  });
}

asio::awaitable<bool> scheduler::sleep_for(job_state& st, std::chrono::milliseconds d,
                                           uint64_t generation) {
  st.timer->expires_after(d);
  std::error_code ec;
  co_await st.timer->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  co_return !stopping_ && st.generation == generation;
}

asio::awaitable<bool> scheduler::sleep_until(job_state& st, int64_t when_ms, uint64_t generation) {
  // The wall clock decides (slots are wall-clock times); a steady timer
  // waits, checked again on waking in case the clock was stepped.
  for (;;) {
    int64_t left = when_ms - unix_ms();
    if (left <= 0) co_return true;
    if (!co_await sleep_for(st, std::chrono::milliseconds(left), generation)) co_return false;
  }
}

asio::awaitable<void> scheduler::loop(std::shared_ptr<scheduler> self, size_t index) {
  scheduler& s = *self;
  job_state& st = *s.states_[index];
  const base::schedule_job& job = s.jobs_[index];
  bool first = true;
  while (!s.stopping_) {
    const uint64_t generation = st.generation;
    const job_timing t = s.timings_[index];
    int64_t slot;
    if (first && job.run_on_start) {
      slot = unix_ms();
    } else {
      slot = next_slot(std::max(unix_ms(), st.last_slot + 1), t.period_ms, t.offset_ms);
    }
    uint32_t splay = draw_splay(job.splay_start, job.splay_end);
    if (!co_await s.sleep_until(st, slot + int64_t{splay} * 1000, generation)) {
      if (s.stopping_) co_return;
      continue;  // re-planned: work the slot out again
    }
    first = false;
    st.last_slot = slot;
    if (st.running >= job.maxrunning) {
      ++s.skipped_;
      spdlog::info("minion {}: schedule job {}: {} run(s) still under way (maxrunning {}); this "
                   "run is skipped",
                   s.id_, job.name, st.running, job.maxrunning);
      continue;
    }
    grant g;
    bool said = false;
    while (!s.stopping_) {
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
      co_await s.sleep_for(st, wait, st.generation);
    }
    if (s.stopping_) co_return;
    ++st.running;
    ++s.started_;
    spdlog::debug("minion {}: schedule job {}: run {} ({})", s.id_, job.name, g.jid, job.function);
    asio::co_spawn(
        s.strand_, s.hooks_.run(job, std::move(g)),
        [self, &st](std::exception_ptr e) {
          // Back on the strand (the completion runs there).
          --st.running;
          if (!e) return;
          try {
            std::rethrow_exception(e);
          } catch (const std::exception& ex) {
            spdlog::warn("minion {}: schedule: a run failed: {}", self->id_, ex.what());
          }
        });
  }
}

}  // namespace brine::schedule
