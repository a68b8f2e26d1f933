#pragma once

#include <string>
#include <vector>

#include "base/config.h"

namespace brine::base {

// The jobs of a Salt `schedule` mapping that came as data (the minion's
// pillar key `schedule`, as JSON text), checked as the config file's option
// is (config.cc holds both); a top-level `enabled: false` sets `enabled`
// false. Throws base::error that names `source` and the fix.
std::vector<schedule_job> parse_schedule(const std::string& json_text, const std::string& source,
                                         bool& enabled);

// Whether two jobs are defined alike (the line they came from aside).
bool same_job(const schedule_job& a, const schedule_job& b);
bool same_jobs(const std::vector<schedule_job>& a, const std::vector<schedule_job>& b);

}  // namespace brine::base
