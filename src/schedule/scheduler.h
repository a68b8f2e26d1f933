#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/config.h"
#include "schedule/spread.h"

namespace brine::schedule {

// A master's answer to a request for a run.
struct grant {
  enum class kind {
    run,        // go: `jid` is the run's job id, `via` the link it came on
    retry,      // admission refused for now: ask again after `retry_after`
    no_master,  // no master to ask (or it did not answer): ask again soon
  };
  kind k = kind::no_master;
  std::string jid;
  std::chrono::milliseconds retry_after{0};
  std::string detail;           // for the log
  std::shared_ptr<void> via;    // opaque to the scheduler, handed back to run
};

// One minion's scheduled jobs (Salt's `schedule`).
//
// Each enabled job waits for its next slot (spread.h: its offset within its
// period comes from the minion's id, on the wall clock), plus a random splay,
// then: if `maxrunning` runs of it are under way the run is skipped (Salt's
// rule); otherwise it asks for a run through `hooks.ask` until it is granted
// — waiting the master's retry-after, jittered, when refused, and a second
// when no master answers — and hands the grant to `hooks.run`, which it does
// not wait for. Slots that pass while a run waits for admission are not
// made up: the next run is the next slot after the granted one. Nothing is
// dropped but the runs maxrunning skips.
//
// Lifecycle: make_shared, start(), stop(); hooks and what they reference
// must outlive the io_context's run. Threading: every job loop on one strand
// of its own; set_periods() and stop() from any thread.
class scheduler : public std::enable_shared_from_this<scheduler> {
 public:
  struct hooks {
    // Asks for admission and a jid for `job`'s run of `slot_ms`.
    std::function<asio::awaitable<grant>(const base::schedule_job& job, int64_t slot_ms)> ask;
    // Runs `job` as granted; returns once the run's return is handed on.
    std::function<asio::awaitable<void>(const base::schedule_job& job, grant g)> run;
  };
  struct options {
    // false: every job's offset is 0, slots at whole multiples of the
    // period on the clock (how an unspread fleet lines up; for benchmarks).
    bool spread = true;
  };

  scheduler(asio::any_io_executor executor, std::string id, std::vector<base::schedule_job> jobs,
            hooks h, options o);
  scheduler(asio::any_io_executor executor, std::string id, std::vector<base::schedule_job> jobs,
            hooks h)
      : scheduler(std::move(executor), std::move(id), std::move(jobs), std::move(h), options{}) {}

  void start();
  void stop();
  // The periods a master assigned (seconds, by job name; jobs not named keep
  // their own), and whether they are harmonic: the slots are worked out
  // again and waiting jobs wake to them.
  void set_periods(std::map<std::string, uint64_t> periods, bool harmonic);

  const std::vector<base::schedule_job>& jobs() const { return jobs_; }
  // The jobs' places on the clock now.
  std::vector<job_timing> timings() const;

  uint64_t runs_started() const { return started_.load(); }
  uint64_t runs_skipped() const { return skipped_.load(); }
  uint64_t runs_deferred() const { return deferred_.load(); }

 private:
  struct job_state {
    size_t index = 0;
    uint32_t running = 0;
    uint64_t generation = 0;  // bumped by set_periods
    int64_t last_slot = -1;
    std::shared_ptr<asio::steady_timer> timer;
  };
  static asio::awaitable<void> loop(std::shared_ptr<scheduler> self, size_t index);
  // Sleeps until unix ms `when`; false when stopped or re-planned meanwhile.
  asio::awaitable<bool> sleep_until(job_state& st, int64_t when_ms, uint64_t generation);
  asio::awaitable<bool> sleep_for(job_state& st, std::chrono::milliseconds d,
                                  uint64_t generation);
  void replan();

  asio::any_io_executor strand_;
  std::string id_;
  std::vector<base::schedule_job> jobs_;
  hooks hooks_;
  options options_;
  // The strand's: the timings and each job's state.
  std::vector<job_timing> timings_;
  std::map<std::string, uint64_t> assigned_;
  bool harmonic_ = false;
  std::vector<std::unique_ptr<job_state>> states_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> started_{0};
  std::atomic<uint64_t> skipped_{0};
  std::atomic<uint64_t> deferred_{0};
};

// Unix milliseconds now (the scheduler's clock).
int64_t unix_ms();

}  // namespace brine::schedule
