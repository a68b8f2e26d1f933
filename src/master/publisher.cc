#include "master/publisher.h"

#include <algorithm>
#include <asio/post.hpp>
#include <cmath>

#include "base/clock.h"

namespace brine::master {

using nlohmann::json;
using proto::msg_type;

namespace {

json error_body(const std::string& message) { return {{"ok", false}, {"error", message}}; }

// A day: long enough for any client, and within what a minion remembers of
// the jids it ran (so a publish held that long still runs only once).
constexpr double k_max_timeout_s = 24 * 3600;

}  // namespace

net::frame_ptr publisher::frame_of(const store::job_record& job) {
  return net::make_frame({msg_type::publish,
                          0,
                          {{"jid", job.jid},
                           {"fun", job.fun},
                           {"args", job.args},
                           {"kwargs", job.kwargs},
                           {"tgt", job.target},
                           {"tgt_type", job.tgt_type}}});
}

void publisher::publish(const json& body, recorded on_recorded) {
  std::string target = body.value("target", "");
  std::string tgt_type = body.value("tgt_type", "glob");
  std::string fun = body.value("fun", "");
  if (fun.empty()) return on_recorded(error_body("publish needs a function name"));
  double timeout = cfg_.publish_hold;
  if (auto t = body.find("timeout"); t != body.end() && !t->is_null()) {
    if (!t->is_number() || !std::isfinite(t->get<double>()) || t->get<double>() <= 0 ||
        t->get<double>() > k_max_timeout_s) {
      return on_recorded(
          error_body("publish timeout must be a number of seconds above 0 and at "
                     "most a day (86400), got " +
                     t->dump()));
    }
    timeout = t->get<double>();
  }
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
  auto deadline = std::chrono::system_clock::now() +
                  std::chrono::duration_cast<std::chrono::system_clock::duration>(
                      std::chrono::duration<double>(timeout));
  store::job_record job;
  job.jid = jids_.next();
  job.fun = fun;
  job.args = body.value("args", json::array());
  job.kwargs = body.value("kwargs", json::object());
  job.target = target;
  job.tgt_type = tgt_type;
  job.user = body.value("user", "");
  job.minions = std::move(minions);
  job.master = "local";
  job.created = base::unix_now();
  // Rounded up: a restarted master holds the job no shorter than promised.
  job.deliver_by = std::chrono::ceil<std::chrono::seconds>(deadline.time_since_epoch()).count();

  store_.post([this, job = std::move(job), deadline, on_recorded](store::store& db) mutable {
    try {
      db.add_job(job);
    } catch (const std::exception& e) {
      on_recorded(error_body(std::string("the job could not be recorded, so it was not sent: ") +
                             e.what()));
      return;
    }
    events_.publish("brine/job/" + job.jid + "/new", {{"jid", job.jid},
                                                      {"fun", job.fun},
                                                      {"args", job.args},
                                                      {"kwargs", job.kwargs},
                                                      {"tgt", job.target},
                                                      {"tgt_type", job.tgt_type},
                                                      {"minions", job.minions},
                                                      {"user", job.user}});
    // Sending is I/O work: off the store thread.
    asio::post(io_, [this, job = std::move(job), deadline, on_recorded] {
      auto frame = frame_of(job);
      auto targets = deliveries_.open({job.jid, frame, deadline}, job.minions);
      json connected = json::array();
      for (const auto& s : targets) connected.push_back(s->id);
      on_recorded({{"ok", true},
                   {"jid", job.jid},
                   {"minions", job.minions},
                   {"connected", connected},
                   {"deliver_by", job.deliver_by}});
      for (const auto& s : targets) s->conn->send(frame);
    });
  });
}

}  // namespace brine::master
