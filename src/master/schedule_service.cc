#include "master/schedule_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <random>

#include "report/report.h"
#include "schedule/plan.h"
#include "schedule/spread.h"

namespace brine::master {

using nlohmann::json;
using proto::msg_type;

namespace {

// A lease beyond the minion's own job timeout: its return may be slow to
// come (a spool, a reconnect).
constexpr auto k_lease_grace = std::chrono::seconds(60);
constexpr uint64_t k_default_lease_s = 3600;
constexpr uint64_t k_max_lease_s = 7 * 86400;

double jittered_retry(uint32_t seconds) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> d(seconds * 0.5, seconds * 1.5);
  return d(rng);
}

}  // namespace

schedule_service::schedule_service(const base::master_config& cfg, publisher& jobs)
    : cfg_(cfg), jobs_(jobs) {}

uint64_t schedule_service::period_of(uint64_t seconds) const {
  return cfg_.schedule_harmonic ? schedule::harmonic_period(seconds, cfg_.schedule_harmonic_base)
                                : seconds;
}

void schedule_service::on_schedule(const std::shared_ptr<session>& s, const proto::message& m) {
  std::vector<known_job> jobs;
  json periods = json::object();
  auto list = m.body.find("jobs");
  if (list != m.body.end() && list->is_array()) {
    for (const auto& j : *list) {
      if (!j.is_object()) continue;
      known_job k;
      k.name = j.value("name", "");
      k.fun = j.value("fun", "");
      k.seconds = j.value("seconds", uint64_t{0});
      k.enabled = j.value("enabled", true);
      if (k.name.empty() || k.seconds == 0) continue;
      periods[k.name] = period_of(k.seconds);
      jobs.push_back(std::move(k));
    }
  }
  spdlog::debug("minion {}: schedule of {} jobs", s->id, jobs.size());
  {
    std::lock_guard lock(mu_);
    if (jobs.empty()) {
      schedules_.erase(s->id);
    } else {
      schedules_[s->id] = std::move(jobs);
    }
  }
  s->conn->send({msg_type::schedule_periods,
                 0,
                 {{"harmonic_base", cfg_.schedule_harmonic ? cfg_.schedule_harmonic_base : 0},
                  {"periods", std::move(periods)}}});
}

void schedule_service::expire_places(std::chrono::steady_clock::time_point now) {
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    if (it->second.expires <= now) {
      spdlog::warn("schedule: run {} of minion {} held its place past its lease without a "
                   "return; the place is given back",
                   it->first, it->second.minion);
      it = in_flight_.erase(it);
    } else {
      ++it;
    }
  }
}

void schedule_service::on_run_request(const std::shared_ptr<session>& s, proto::message&& m) {
  const uint64_t request = m.id;
  std::string name = m.body.value("name", "");
  std::string fun = m.body.value("fun", "");
  auto answer_retry = [&](double seconds, const std::string& why) {
    s->conn->send(
        {msg_type::run_reply, request, {{"retry_after", seconds}, {"reason", why}}});
  };
  if (fun.empty() || name.empty()) {
    s->conn->send({msg_type::run_reply,
                   request,
                   {{"error", "run_request needs name and fun"}, {"retry_after", 60}}});
    return;
  }
  json args = m.body.value("args", json::array());
  json kwargs = m.body.value("kwargs", json::object());
  if (!args.is_array()) args = json::array();
  if (!kwargs.is_object()) kwargs = json::object();
  uint64_t lease_s = k_default_lease_s;
  if (auto t = m.body.find("timeout"); t != m.body.end() && t->is_number_unsigned()) {
    lease_s = std::clamp<uint64_t>(t->get<uint64_t>(), 1, k_max_lease_s);
  }
  const bool counted = cfg_.max_concurrent_runs > 0 && report::is_state_run(fun);
  if (counted) {
    std::lock_guard lock(mu_);
    expire_places(std::chrono::steady_clock::now());
    size_t busy = in_flight_.size() + reserved_ + (compiles_ ? compiles_() : 0);
    if (busy >= cfg_.max_concurrent_runs) {
      ++deferred_;
      double wait = jittered_retry(cfg_.run_retry_after);
      spdlog::debug(
          "schedule: minion {} job {}: {} state runs and compiles in flight "
          "(max_concurrent_runs); retry after {:.1f} s",
          s->id, name, busy, wait);
      answer_retry(wait, "max_concurrent_runs (" + std::to_string(cfg_.max_concurrent_runs) +
                             ") state runs and compiles in flight");
      return;
    }
    ++reserved_;
  }
  auto lease = std::chrono::seconds(lease_s) + k_lease_grace;
  jobs_.record_run(
      s->id, name, fun, std::move(args), std::move(kwargs),
      [this, s, request, counted, lease, name](const std::string& jid, const std::string& error) {
        if (counted) {
          std::lock_guard lock(mu_);
          --reserved_;
          if (!jid.empty()) {
            in_flight_[jid] = {s->id, std::chrono::steady_clock::now() + lease};
          }
        }
        if (jid.empty()) {
          spdlog::warn("schedule: minion {} job {}: {}; it will ask again", s->id, name, error);
          s->conn->send({msg_type::run_reply,
                         request,
                         {{"retry_after", jittered_retry(cfg_.run_retry_after)},
                          {"reason", error}}});
          return;
        }
        {
          std::lock_guard lock(mu_);
          ++granted_;
        }
        s->conn->send({msg_type::run_reply, request, {{"jid", jid}}});
      });
}

void schedule_service::on_return(const std::string& minion, const std::string& jid) {
  std::lock_guard lock(mu_);
  auto it = in_flight_.find(jid);
  if (it != in_flight_.end() && it->second.minion == minion) in_flight_.erase(it);
}

void schedule_service::on_gone(const std::string& minion) {
  std::lock_guard lock(mu_);
  std::erase_if(in_flight_, [&](const auto& kv) { return kv.second.minion == minion; });
}

bool schedule_service::holds(const std::string& jid) {
  std::lock_guard lock(mu_);
  return in_flight_.contains(jid);
}

size_t schedule_service::in_flight() {
  std::lock_guard lock(mu_);
  return in_flight_.size() + reserved_;
}

json schedule_service::plan(const std::vector<std::string>& ids, int64_t start_ms,
                            size_t minutes) {
  std::vector<std::vector<schedule::job_timing>> timings;
  struct job_summary {
    std::string fun;
    uint64_t seconds = 0;
    uint64_t period = 0;
    uint64_t minions = 0;
  };
  std::map<std::string, job_summary> per_job;
  size_t known = 0;
  size_t in_flight = 0;
  {
    std::lock_guard lock(mu_);
    in_flight = in_flight_.size() + reserved_;
    for (const auto& id : ids) {
      auto it = schedules_.find(id);
      if (it == schedules_.end()) continue;
      ++known;
      std::vector<schedule::job_period> periods;
      for (const auto& j : it->second) {
        if (!j.enabled) continue;
        uint64_t p = period_of(j.seconds);
        periods.push_back({j.name, p});
        auto& js = per_job[j.name];
        js.fun = j.fun;
        js.seconds = j.seconds;
        js.period = p;
        ++js.minions;
      }
      timings.push_back(schedule::timings(id, periods, cfg_.schedule_harmonic));
    }
  }
  auto runs = schedule::runs_per_bucket(timings, start_ms, 60000, minutes);
  auto sum = schedule::summarise(runs);
  json jobs = json::array();
  for (const auto& [name, j] : per_job) {
    jobs.push_back({{"name", name},
                    {"fun", j.fun},
                    {"seconds", j.seconds},
                    {"period", j.period},
                    {"minions", j.minions}});
  }
  return {{"ok", true},
          {"start", start_ms / 1000},
          {"bucket_seconds", 60},
          {"runs", runs},
          {"minions", known},
          {"targeted", ids.size()},
          {"jobs", std::move(jobs)},
          {"harmonic", cfg_.schedule_harmonic},
          {"harmonic_base", cfg_.schedule_harmonic_base},
          {"max_concurrent_runs", cfg_.max_concurrent_runs},
          {"in_flight", in_flight},
          {"peak", sum.peak},
          {"peak_at", sum.peak_at},
          {"mean", sum.mean},
          {"peak_over_mean", sum.peak_over_mean}};
}

}  // namespace brine::master
