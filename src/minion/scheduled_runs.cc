#include "minion/scheduled_runs.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <map>

namespace brine::minion {

using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// How long a master has to record a run and answer: it commits the job
// first, and its store may be slow for a moment.
constexpr auto k_run_request_limit = 30s;

// Built outside coroutines (g++ 12 and brace-initialised json in a
// coroutine body).
json run_request_body(const base::schedule_job& job, int64_t slot_ms, uint64_t timeout_s) {
  return {{"name", job.name}, {"fun", job.function}, {"args", job.args},
          {"kwargs", job.kwargs}, {"slot", slot_ms},  {"timeout", timeout_s}};
}

proto::message publish_of(const base::schedule_job& job, const std::string& jid) {
  return {proto::msg_type::publish,
          0,
          {{"jid", jid}, {"fun", job.function}, {"args", job.args}, {"kwargs", job.kwargs}}};
}

schedule::grant no_master(std::string why) {
  schedule::grant g;
  g.k = schedule::grant::kind::no_master;
  g.detail = std::move(why);
  return g;
}

asio::awaitable<schedule::grant> ask(master_set* masters, base::schedule_job job, int64_t slot_ms,
                                     uint64_t timeout_s) {
  auto link = masters->accepted_member(proto::k_feature_schedule);
  if (!link) co_return no_master("no connected master takes scheduled runs");
  auto reply = co_await link->request(proto::msg_type::run_request,
                                      run_request_body(job, slot_ms, timeout_s),
                                      k_run_request_limit);
  if (!reply) co_return no_master("master " + link->address() + " did not answer");
  schedule::grant g;
  if (auto jid = reply->body.find("jid"); jid != reply->body.end() && jid->is_string()) {
    g.k = schedule::grant::kind::run;
    g.jid = jid->get<std::string>();
    g.via = link;
    co_return g;
  }
  g.k = schedule::grant::kind::retry;
  double after = 10;
  if (auto r = reply->body.find("retry_after"); r != reply->body.end() && r->is_number()) {
    after = r->get<double>();
  }
  if (!std::isfinite(after) || after < 0.1) after = 0.1;
  if (after > 3600) after = 3600;
  g.retry_after = std::chrono::milliseconds(static_cast<int64_t>(after * 1000));
  g.detail = "master " + link->address() + ": " +
             reply->body.value("reason", reply->body.value("error", std::string("retry")));
  co_return g;
}

asio::awaitable<void> run(base::schedule_job job, schedule::grant g) {
  auto link = std::static_pointer_cast<agent>(g.via);
  co_await agent::run_scheduled(std::move(link), publish_of(job, g.jid));
}

}  // namespace

schedule::scheduler::hooks scheduled_run_hooks(master_set& masters,
                                               std::chrono::seconds job_timeout) {
  auto timeout = static_cast<uint64_t>(job_timeout.count());
  return {[m = &masters, timeout](const base::schedule_job& job, int64_t slot) {
            return ask(m, job, slot, timeout);
          },
          [](const base::schedule_job& job, schedule::grant g) { return run(job, std::move(g)); }};
}

std::vector<base::schedule_job> effective_schedule(const std::vector<base::schedule_job>& config,
                                                   bool config_enabled,
                                                   const std::vector<base::schedule_job>& pillar,
                                                   bool pillar_enabled) {
  if (!config_enabled || !pillar_enabled) return {};
  std::map<std::string, const base::schedule_job*> by_name;
  for (const auto& j : pillar) by_name[j.name] = &j;
  for (const auto& j : config) by_name[j.name] = &j;
  std::vector<base::schedule_job> out;
  for (const auto& [name, j] : by_name) out.push_back(*j);
  return out;
}

net::frame_ptr schedule_message(const std::vector<base::schedule_job>& jobs) {
  json list = json::array();
  for (const auto& j : jobs) {
    list.push_back({{"name", j.name},
                    {"fun", j.function},
                    {"seconds", j.seconds},
                    {"splay", {j.splay_start, j.splay_end}},
                    {"enabled", j.enabled}});
  }
  return net::make_frame({proto::msg_type::schedule, 0, {{"jobs", std::move(list)}}});
}

void apply_schedule_periods(schedule::scheduler& s, const json& body) {
  std::map<std::string, uint64_t> periods;
  if (auto p = body.find("periods"); p != body.end() && p->is_object()) {
    for (const auto& [name, v] : p->items()) {
      if (v.is_number_unsigned() && v.get<uint64_t>() > 0) periods[name] = v.get<uint64_t>();
    }
  }
  bool harmonic = body.value("harmonic_base", uint64_t{0}) > 0;
  s.set_periods(std::move(periods), harmonic);
}

}  // namespace brine::minion
