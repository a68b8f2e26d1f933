#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/config.h"

namespace brine::base {

// The jobs of a Salt `schedule` mapping that came as data (the minion's
// pillar key `schedule`), checked as the config file's option is (config.cc
// holds both); a top-level `enabled: false` sets `enabled` false. Throws
// base::error that names `source` and the fix.
std::vector<schedule_job> parse_schedule(const nlohmann::json& value, const std::string& source,
                                         bool& enabled);

// Whether two jobs are defined alike (the line they came from aside).
bool same_job(const schedule_job& a, const schedule_job& b);
bool same_jobs(const std::vector<schedule_job>& a, const std::vector<schedule_job>& b);

}  // namespace brine::base
