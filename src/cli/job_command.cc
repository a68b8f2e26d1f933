#include <fnmatch.h>

#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "base/error.h"
#include "base/fs.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "proto/message.h"
#include "store/store.h"

namespace brine::cli {

using nlohmann::json;

namespace {

std::string utc(int64_t t) {
  time_t secs = static_cast<time_t>(t);
  struct tm tm {};
  ::gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

}  // namespace

int job_command(const base::master_config& cfg, const job_options& o) {
  auto db = open_store(cfg, true);
  if (o.action == "list") {
    // Filters over the newest jobs; the limit counts the jobs shown.
    size_t shown = 0;
    for (const auto& j :
         db->list_jobs(o.function.empty() && o.target.empty() ? o.limit : SIZE_MAX)) {
      if (shown >= o.limit) break;
      if (!o.function.empty() && ::fnmatch(o.function.c_str(), j.fun.c_str(), 0) != 0) continue;
      if (!o.target.empty() && ::fnmatch(o.target.c_str(), j.target.c_str(), 0) != 0) continue;
      ++shown;
      // Minions a greedy publish reached that their own grains turned down
      // were no targets.
      size_t targets = j.minions.size();
      size_t undelivered = 0;
      if (db->count_undelivered(j.jid) > 0) {
        for (const auto& u : db->get_undelivered(j.jid)) {
          if (u.reason == proto::k_not_targeted) {
            --targets;
          } else {
            ++undelivered;
          }
        }
      }
      std::cout << j.jid << "  " << utc(j.created) << "  " << j.fun << "  " << j.tgt_type << ":"
                << j.target << "  " << db->count_returns(j.jid) << "/" << targets << " returned";
      if (undelivered) std::cout << ", " << undelivered << " undelivered";
      std::cout << "\n";
    }
    return 0;
  }
  auto job = db->get_job(o.jid);
  if (!job) throw base::error("no job " + o.jid + " in the job cache (" + db->name() + ")");
  if (o.action == "kill") {
    // Salt's way: saltutil.kill_job published to the job's minions; each
    // answers whether it was running it.
    db.reset();
    std::string list;
    for (const auto& id : job->minions) {
      if (!list.empty()) list += ',';
      list += id;
    }
    cmd_options k;
    k.target = list;
    k.tgt_type = "list";
    k.fun = "saltutil.kill_job";
    k.words = {o.jid};
    k.timeout = o.timeout;
    k.out = o.out;
    k.progress = false;
    return cmd_command(cfg, k);
  }
  auto returns = db->get_returns(o.jid);
  std::set<std::string> returned;
  // Each return in the key order the minion made it, as the store keeps it.
  nlohmann::ordered_json rets = nlohmann::ordered_json::object();
  for (const auto& r : returns) {
    returned.insert(r.minion);
    rets[r.minion] = r.ret;
  }
  json undelivered = json::object();
  std::set<std::string> not_targeted;  // greedy publishes their grains turned down
  for (const auto& u : db->get_undelivered(o.jid)) {
    if (u.reason == proto::k_not_targeted) {
      not_targeted.insert(u.minion);
    } else if (!returned.count(u.minion)) {
      undelivered[u.minion] = u.reason;
    }
  }
  std::erase_if(job->minions, [&](const std::string& id) { return not_targeted.count(id) > 0; });
  // Neither returned nor recorded as undelivered: running, or (before the
  // delivery deadline) held for a minion that is not connected.
  std::vector<std::string> running;
  for (const auto& id : job->minions) {
    if (!returned.count(id) && !undelivered.contains(id)) running.push_back(id);
  }
  if (o.out == "json") {
    nlohmann::ordered_json out = {{"jid", job->jid},
                {"fun", job->fun},
                {"args", job->args},
                {"kwargs", job->kwargs},
                {"target", job->target},
                {"tgt_type", job->tgt_type},
                {"user", job->user},
                {"created", utc(job->created)},
                {"deliver_by", utc(job->deliver_by)},
                {"minions", job->minions},
                {"returns", rets},
                {"undelivered", undelivered},
                {"running", running}};
    std::cout << out.dump(4) << "\n";
    return 0;
  }
  std::cout << "jid: " << job->jid << "\nfunction: " << job->fun
            << "\narguments: " << job->args.dump() << " " << job->kwargs.dump()
            << "\ntarget: " << job->tgt_type << ":" << job->target
            << "\nstarted: " << utc(job->created) << " UTC\nminions: " << job->minions.size()
            << ", returned: " << returns.size() << ", undelivered: " << undelivered.size()
            << ", running: " << running.size() << "\n\n";
  for (const auto& r : returns) std::cout << nested(r.minion, json(r.ret));
  for (const auto& [id, reason] : undelivered.items()) {
    std::cout << nested(id,
                        "Minion did not return. [Undelivered: " + reason.get<std::string>() + "]");
  }
  for (const auto& id : running) std::cout << nested(id, "Minion did not return yet. [Running]");
  return 0;
}

}  // namespace brine::cli
