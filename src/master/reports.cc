#include "master/reports.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>

namespace brine::master {

namespace {

constexpr size_t k_recent_jobs = 64;

// test= as Salt reads a keyword argument: YAML made it a boolean, but a
// string or a number may come from an API client.
bool test_flag(const nlohmann::json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s == "true" || s == "yes" || s == "on" || s == "1";
  }
  return false;
}

}  // namespace

std::optional<bool> reports::test_of(store::store& db, const std::string& jid) {
  for (const auto& [known, test] : recent_) {
    if (known == jid) return test;
  }
  std::optional<bool> test;
  try {
    if (auto job = db.get_job(jid)) {
      if (job->fun == "state.test") {
        test = true;
      } else if (job->kwargs.is_object() && job->kwargs.contains("test") &&
                 !job->kwargs["test"].is_null()) {
        test = test_flag(job->kwargs["test"]);
      }
    }
  } catch (const std::exception& e) {
    // The report still tells a test run by its None results.
    spdlog::warn("reports: cannot read job {} for its test= argument: {}", jid, e.what());
    return std::nullopt;
  }
  recent_.emplace_back(jid, test);
  if (recent_.size() > k_recent_jobs) recent_.pop_front();
  return test;
}

std::vector<report::report> reports::make(store::store& db,
                                          const std::vector<store::return_record>& batch) {
  std::vector<report::report> out;
  for (const auto& r : batch) {
    if (!report::is_state_run(r.fun)) continue;
    report::run_facts facts{r.jid,
                            r.minion,
                            r.fun,
                            r.retcode,
                            r.received_ms != 0 ? r.received_ms : r.stamp * 1000,
                            test_of(db, r.jid)};
    out.push_back(report::summarise(facts, r.ret));
  }
  return out;
}

}  // namespace brine::master
