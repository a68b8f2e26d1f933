#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "base/config.h"
#include "minion/master_set.h"
#include "net/connection.h"
#include "schedule/scheduler.h"

namespace brine::minion {

// The glue between a minion's scheduler (schedule/) and its masters: a run
// is asked of the first member master that takes scheduled runs
// (run_request over its link; run_reply grants a jid or says when to ask
// again), and a granted run runs on that link as a published job does
// (agent::run_scheduled), its return going to that master.
schedule::scheduler::hooks scheduled_run_hooks(master_set& masters,
                                               std::chrono::seconds job_timeout);
// The jobs in effect (Salt's merge): the pillar's, then the config's by the
// same name in their place, in name order; none when either side says
// `enabled: false`.
std::vector<base::schedule_job> effective_schedule(const std::vector<base::schedule_job>& config,
                                                   bool config_enabled,
                                                   const std::vector<base::schedule_job>& pillar,
                                                   bool pillar_enabled);
// The `schedule` message: the minion's jobs as the master plans with them.
net::frame_ptr schedule_message(const std::vector<base::schedule_job>& jobs);
// A master's schedule_periods, applied to `s`.
void apply_schedule_periods(schedule::scheduler& s, const nlohmann::json& body);

}  // namespace brine::minion
