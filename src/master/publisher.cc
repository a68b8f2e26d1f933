#include "master/publisher.h"

#include <algorithm>

#include "base/clock.h"

namespace brine::master {

using nlohmann::json;
using proto::msg_type;

namespace {

json error_body(const std::string& message) { return {{"ok", false}, {"error", message}}; }

}  // namespace

void publisher::publish(const json& body, const recorded& on_recorded) {
  std::string target = body.value("target", "");
  std::string tgt_type = body.value("tgt_type", "glob");
  std::string fun = body.value("fun", "");
  if (fun.empty()) return on_recorded(error_body("publish needs a function name"));
  std::vector<std::string> minions;
  if (tgt_type == "glob") {
    minions = keys_.accepted_matching(target);
  } else if (tgt_type == "list") {
    std::string item;
    for (size_t i = 0; i <= target.size(); ++i) {
      if (i == target.size() || target[i] == ',') {
        if (!item.empty() && keys_.accepted(item)) minions.push_back(item);
        item.clear();
      } else if (target[i] != ' ') {
        item += target[i];
      }
    }
    std::sort(minions.begin(), minions.end());
    minions.erase(std::unique(minions.begin(), minions.end()), minions.end());
  } else {
    return on_recorded(
        error_body("target type '" + tgt_type + "' is not supported yet (glob, list)"));
  }
  if (minions.empty()) {
    return on_recorded(
        error_body("No minions matched the target. No command was sent, no jid was assigned."));
  }
  std::string jid = jids_.next();
  store::job_record job;
  job.jid = jid;
  job.fun = fun;
  job.args = body.value("args", json::array());
  job.kwargs = body.value("kwargs", json::object());
  job.target = target;
  job.tgt_type = tgt_type;
  job.user = body.value("user", "");
  job.minions = minions;
  job.master = "local";
  job.created = base::unix_now();
  json job_event = {{"jid", jid},           {"fun", fun},      {"args", job.args},
                    {"kwargs", job.kwargs}, {"tgt", target},   {"tgt_type", tgt_type},
                    {"minions", minions},   {"user", job.user}};
  store_.post([job](store::store& db) { db.add_job(job); });
  events_.publish("brine/job/" + jid + "/new", job_event);

  std::vector<std::shared_ptr<session>> targets;
  std::vector<std::string> connected;
  for (const auto& id : minions) {
    if (auto s = sessions_.find_accepted(id)) {
      targets.push_back(std::move(s));
      connected.push_back(id);
    }
  }
  on_recorded({{"ok", true}, {"jid", jid}, {"minions", minions}, {"connected", connected}});
  // One encoding serves every target.
  auto frame = net::make_frame({msg_type::publish,
                                0,
                                {{"jid", jid},
                                 {"fun", fun},
                                 {"args", job.args},
                                 {"kwargs", job.kwargs},
                                 {"tgt", target},
                                 {"tgt_type", tgt_type}}});
  for (const auto& s : targets) s->conn->send(frame);
}

}  // namespace brine::master
