#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/config.h"
#include "master/minion_sessions.h"
#include "master/publisher.h"

namespace brine::master {

// Minions' scheduled runs, the master's side (docs/protocol.md, "Scheduled
// runs"):
//
// - each minion's schedule, as it reports it after its grains, kept in
//   memory (a restarted master hears it again as its minions reconnect) and
//   answered with the periods it is to run at: its own, or with
//   schedule_harmonic the nearest schedule_harmonic_base * 2^k;
// - admission: a run_request is granted (the job recorded through the
//   publisher, so it has a jid, shows in brine job list and makes a report
//   like a published one) unless it is a state run and max_concurrent_runs
//   granted state runs are in flight; then the answer is "retry after N s",
//   N drawn from [run_retry_after / 2, 3 * run_retry_after / 2]. A granted
//   state run is in flight until its return arrives, its minion's session
//   ends, or its lease (the minion's job timeout and a minute) runs out;
// - the plan: the runs the known schedules start per minute.
//
// Threading: every method from any thread (one mutex); the reply to a
// granted run goes out from the store thread once the job is committed.
class schedule_service {
 public:
  schedule_service(const base::master_config& cfg, publisher& jobs);

  void on_schedule(const std::shared_ptr<session>& s, const proto::message& m);
  void on_run_request(const std::shared_ptr<session>& s, proto::message&& m);
  // A return arrived: a state run it ends frees its place.
  void on_return(const std::string& minion, const std::string& jid);
  // The minion's session ended: its runs no longer hold places.
  void on_gone(const std::string& minion);

  // `brine schedule plan`: the runs the schedules of `ids` (those this
  // master knows) start in each minute of `minutes` from `start_ms`.
  nlohmann::json plan(const std::vector<std::string>& ids, int64_t start_ms, size_t minutes);
  size_t in_flight();
  // Whether `jid` is a scheduled state run this master granted that is
  // still in flight (its compile is already counted as that run).
  bool holds(const std::string& jid);
  // Compiles on this master that count as runs in flight for admission
  // (compile masters: those of published state runs).
  void set_compiles(std::function<size_t()> in_flight) { compiles_ = std::move(in_flight); }

 private:
  struct known_job {
    std::string name;
    std::string fun;
    uint64_t seconds = 0;  // as the minion configured it
    bool enabled = true;
  };
  struct place {
    std::string minion;
    std::chrono::steady_clock::time_point expires;
  };
  uint64_t period_of(uint64_t seconds) const;
  void expire_places(std::chrono::steady_clock::time_point now);

  const base::master_config& cfg_;
  publisher& jobs_;
  std::mutex mu_;
  std::unordered_map<std::string, std::vector<known_job>> schedules_;  // by minion id
  std::unordered_map<std::string, place> in_flight_;                  // by jid
  size_t reserved_ = 0;  // granted, not recorded yet
  std::function<size_t()> compiles_;
  uint64_t granted_ = 0;
  uint64_t deferred_ = 0;
};

}  // namespace brine::master
