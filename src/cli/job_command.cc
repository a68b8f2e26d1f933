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

std::string utc(int64_t t) { return utc_time(t * 1000, time_unit::seconds); }

// Where a job stands: each return in the key order the minion made it (as the
// store keeps it; values only when asked for), the minions it never reached
// with the reason, and those neither returned nor undelivered: running, or
// (before the delivery deadline) held for a minion that is not connected.
// Minions a greedy publish reached that their own grains turned down were no
// targets: they leave job.minions.
struct settlement {
  nlohmann::ordered_json returns = nlohmann::ordered_json::object();
  json undelivered = json::object();
  std::vector<std::string> running;
};

settlement settle(store::store& db, store::job_record& job, bool values) {
  settlement st;
  std::set<std::string> returned;
  for (auto& r : db.get_returns(job.jid)) {
    returned.insert(r.minion);
    st.returns[r.minion] = values ? std::move(r.ret) : nlohmann::ordered_json();
  }
  std::set<std::string> not_targeted;
  for (const auto& u : db.get_undelivered(job.jid)) {
    if (u.reason == proto::k_not_targeted) {
      not_targeted.insert(u.minion);
    } else if (!returned.count(u.minion)) {
      st.undelivered[u.minion] = u.reason;
    }
  }
  std::erase_if(job.minions, [&](const std::string& id) { return not_targeted.count(id) > 0; });
  for (const auto& id : job.minions) {
    if (!returned.count(id) && !st.undelivered.contains(id)) st.running.push_back(id);
  }
  return st;
}

}  // namespace

int job_command(const base::master_config& cfg, const job_options& o) {
  auto db = open_store(cfg, true);
  if (o.action == "list") {
    // Filters over the newest jobs; the limit counts the jobs shown.
    size_t shown = 0;
    json listed = json::array();
    for (auto& j : db->list_jobs(o.function.empty() && o.target.empty() ? o.limit : SIZE_MAX)) {
      if (shown >= o.limit) break;
      if (!o.function.empty() && ::fnmatch(o.function.c_str(), j.fun.c_str(), 0) != 0) continue;
      if (!o.target.empty() && ::fnmatch(o.target.c_str(), j.target.c_str(), 0) != 0) continue;
      ++shown;
      if (o.out == "json") {
        // Every job's settlement in one read, for scripts (and tests) that
        // follow many jobs: who returned, who was not reached and why, who
        // is still running. The return values are `job show`'s.
        auto st = settle(*db, j, false);
        json returned = json::array();
        for (const auto& [id, ret] : st.returns.items()) returned.push_back(id);
        listed.push_back({{"jid", j.jid},
                          {"fun", j.fun},
                          {"target", j.target},
                          {"tgt_type", j.tgt_type},
                          {"created", utc(j.created)},
                          {"user", j.user},
                          {"minions", j.minions},
                          {"returned", std::move(returned)},
                          {"undelivered", st.undelivered},
                          {"running", st.running}});
        continue;
      }
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
      // A minion's scheduled run: which of its schedule's jobs.
      if (j.user.starts_with("schedule:")) std::cout << "  (schedule " << j.user.substr(9) << ")";
      std::cout << "\n";
    }
    if (o.out == "json") std::cout << listed.dump(4) << "\n";
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
  auto st = settle(*db, *job, true);
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
                {"returns", st.returns},
                {"undelivered", st.undelivered},
                {"running", st.running}};
    std::cout << out.dump(4) << "\n";
    return 0;
  }
  std::cout << "jid: " << job->jid << "\nfunction: " << job->fun
            << "\narguments: " << job->args.dump() << " " << job->kwargs.dump()
            << "\ntarget: " << job->tgt_type << ":" << job->target
            << "\nstarted: " << utc(job->created) << " UTC\nminions: " << job->minions.size()
            << ", returned: " << st.returns.size() << ", undelivered: " << st.undelivered.size()
            << ", running: " << st.running.size() << "\n\n";
  for (const auto& [id, ret] : st.returns.items()) std::cout << nested(id, json(ret));
  for (const auto& [id, reason] : st.undelivered.items()) {
    std::cout << nested(id,
                        "Minion did not return. [Undelivered: " + reason.get<std::string>() + "]");
  }
  for (const auto& id : st.running) {
    std::cout << nested(id, "Minion did not return yet. [Running]");
  }
  return 0;
}

}  // namespace brine::cli
