#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

// Salt's cron matching rules, shared by the cron module (cron.set_job, ...)
// and the cron state's test mode, which reads cron.list_tab and decides what
// would change the way set_job would.
namespace brine::modules::cron {

// The identifier of an entry without one (Salt's SALT_CRON_NO_IDENTIFIER).
inline constexpr const char* k_no_identifier = "NO ID SET";

// Salt's _cron_matched: whether the entry (a crons or special item of
// cron.list_tab) is the one of `cmd` / `identifier` (nullopt or "": none).
bool matched(const nlohmann::json& entry, const std::string& cmd,
             const std::optional<std::string>& identifier);

// Salt's _needs_change: `want` differs from `have` and says something (null
// says nothing; "random" only replaces "*").
bool needs_change(const nlohmann::json& have, const nlohmann::json& want);

}  // namespace brine::modules::cron
