#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
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
// The jobs may change while it runs (set_jobs: the minion's pillar holds a
// `schedule` too): a job whose definition is unchanged keeps its place and
// its runs; a changed or removed one stops waiting (runs under way finish,
// and a changed one's count against its new definition's maxrunning), and
// a new or changed one starts.
//
// Lifecycle: make_shared, start(), stop(); hooks and what they reference
// must outlive the io_context's run. Threading: every job loop on one strand
// of its own; set_jobs(), set_periods(), jobs(), timings() and stop() from
// any thread.
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
  // Replaces the jobs (by name: unchanged ones keep running as they are).
  void set_jobs(std::vector<base::schedule_job> jobs);
  // The periods a master assigned (seconds, by job name; jobs not named keep
  // their own), and whether they are harmonic: the slots are worked out
  // again and waiting jobs wake to them.
  void set_periods(std::map<std::string, uint64_t> periods, bool harmonic);

  // The jobs now, and their places on the clock (one each, in the same
  // order; a disabled job's timing is empty).
  std::vector<base::schedule_job> jobs() const;
  std::vector<job_timing> timings() const;

  uint64_t runs_started() const { return started_.load(); }
  uint64_t runs_skipped() const { return skipped_.load(); }
  uint64_t runs_deferred() const { return deferred_.load(); }

 private:
  // One job and its loop's state; the loop (and its runs under way) hold
  // it, so a job removed by set_jobs outlives its last run.
  struct entry {
    base::schedule_job job;
    job_timing timing;  // the strand's (read by timings() under mu_)
    // Runs of the job's name under way: shared with the entry that
    // replaces a changed definition, so that maxrunning counts them too
    // (Salt counts a schedule's running jobs by its name).
    std::shared_ptr<uint32_t> running = std::make_shared<uint32_t>(0);
    uint64_t generation = 0;  // bumped by set_periods
    int64_t last_slot = -1;
    bool retired = false;  // removed or changed by set_jobs
    std::shared_ptr<asio::steady_timer> timer;
  };
  static asio::awaitable<void> loop(std::shared_ptr<scheduler> self, std::shared_ptr<entry> e);
  // Sleeps until unix ms `when`; false when stopped, retired or re-planned
  // meanwhile.
  asio::awaitable<bool> sleep_until(entry& e, int64_t when_ms, uint64_t generation);
  asio::awaitable<bool> sleep_for(entry& e, std::chrono::milliseconds d, uint64_t generation);
  std::shared_ptr<entry> make_entry(base::schedule_job job);
  void spawn(const std::shared_ptr<entry>& e);
  // On the strand (or before start), with mu_ held.
  void replan();

  asio::any_io_executor strand_;
  std::string id_;
  hooks hooks_;
  options options_;
  // Written on the strand under mu_; read there freely, elsewhere under mu_.
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<entry>> entries_;
  // The strand's.
  std::map<std::string, uint64_t> assigned_;
  bool harmonic_ = false;
  bool started_loops_ = false;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> started_{0};
  std::atomic<uint64_t> skipped_{0};
  std::atomic<uint64_t> deferred_{0};
};

// Unix milliseconds now (the scheduler's clock).
int64_t unix_ms();

}  // namespace brine::schedule
