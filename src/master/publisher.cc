#include "master/publisher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <cmath>
#include <map>
#include <string_view>
#include <unordered_set>

#include "base/clock.h"
#include "base/error.h"
#include "master/accepted_view.h"
#include "proto/message.h"

namespace brine::master {

using nlohmann::json;
using proto::msg_type;

namespace {

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

json publisher::new_job_event(const store::job_record& job) {
  return {{"jid", job.jid},         {"fun", job.fun},    {"args", job.args},
          {"kwargs", job.kwargs},   {"tgt", job.target}, {"tgt_type", job.tgt_type},
          {"minions", job.minions}, {"user", job.user},  {"master", job.master}};
}

publisher::publisher(asio::io_context& io, const base::master_config& cfg, pki::key_registry& keys,
                     minion_cache& cache, delivery& deliveries, store_worker& store,
                     event_bus& events)
    : io_(io),
      cfg_(cfg),
      keys_(keys),
      cache_(cache),
      acl_(nlohmann::json::object()),
      deliveries_(deliveries),
      store_(store),
      events_(events) {
  try {
    acl_ = publisher_acl(cfg_.publisher_acl);
  } catch (const std::exception& e) {
    throw base::error("config " + cfg_.source + ": " + e.what());
  }
  try {
    nodegroups_ = target::nodegroups_from_json(cfg_.nodegroups);
    // A nodegroup that cannot be expanded (a cycle, a bad term) is a
    // configuration error now, not a surprise at the first publish.
    for (const auto& [name, group] : nodegroups_) {
      target::expression::parse(name, target::type::nodegroup, nodegroups_);
    }
  } catch (const std::exception& e) {
    throw base::error("config " + cfg_.source + ": nodegroups: " + e.what());
  }
}

target::match_result publisher::resolve(const std::string& text, const std::string& tgt_type,
                                        char delimiter) const {
  auto kind = target::parse_type(tgt_type);
  if (!kind) {
    throw base::error("unknown target type '" + tgt_type +
                      "' (glob, pcre, list, grain, grain_pcre, pillar, pillar_pcre, ipcidr, "
                      "nodegroup, compound)");
  }
  auto e = target::expression::parse(text, *kind, nodegroups_, delimiter);
  // Salt's publish is greedy: a minion whose grains are not cached yet is
  // sent the job and decides for itself.
  return target::match(e, accepted_view(keys_, cache_), true);
}

std::vector<std::string> publisher::connected_elsewhere(const std::vector<std::string>& ids) const {
  std::vector<std::string> out;
  if (!member_alive_ || ids.empty()) return out;
  cache_.read([&](const minion_cache::lookup& lookup) {
    for (const auto& id : ids) {
      auto master = lookup(id).master;
      if (!master.empty() && master != name_ && member_alive_(std::string(master))) {
        out.push_back(id);
      }
    }
  });
  return out;
}

void publisher::publish(const json& body, recorded on_recorded,
                        std::function<void(const std::string& jid)> on_jid) {
  on_recorded = [this, answer = std::move(on_recorded)](const json& r) {
    if (!r.value("ok", false)) refused_.fetch_add(1, std::memory_order_relaxed);
    answer(r);
  };
  std::string target = body.value("target", "");
  std::string tgt_type = body.value("tgt_type", "glob");
  std::string fun = body.value("fun", "");
  if (fun.empty()) return on_recorded(proto::api_error("publish needs a function name"));
  double timeout = cfg_.publish_hold;
  if (auto t = body.find("timeout"); t != body.end() && !t->is_null()) {
    if (!t->is_number() || !std::isfinite(t->get<double>()) || t->get<double>() <= 0 ||
        t->get<double>() > k_max_timeout_s) {
      return on_recorded(
          proto::api_error("publish timeout must be a number of seconds above 0 and at "
                           "most a day (86400), got " +
                           t->dump()));
    }
    timeout = t->get<double>();
  }
  std::string delimiter = body.value("delimiter", ":");
  if (delimiter.size() != 1) {
    return on_recorded(
        proto::api_error("delimiter must be one character, got '" + delimiter + "'"));
  }
  if (delimiter != ":") {
    // Recorded and published as the equivalent compound term (G%@a%b), so
    // that the job and a minion's own check need no delimiter of their own.
    static const std::map<std::string, char, std::less<>> letters = {
        {"grain", 'G'}, {"grain_pcre", 'P'}, {"pillar", 'I'}, {"pillar_pcre", 'J'}};
    if (auto l = letters.find(tgt_type); l != letters.end()) {
      target = std::string(1, l->second) + delimiter + "@" + target;
      tgt_type = "compound";
      delimiter = ":";
    }
  }
  target::match_result matched;
  try {
    matched = resolve(target, tgt_type, delimiter[0]);
  } catch (const std::exception& e) {
    return on_recorded({{"ok", false}, {"error", e.what()}, {"bad_target", true}});
  }
  std::vector<std::string> minions = std::move(matched.minions);
  if (body.value("restricted", false) && !minions.empty()) {
    std::string why = acl_.refusal(body.value("user", ""), fun, minions);
    if (!why.empty()) {
      spdlog::warn("publish refused: {}", why);
      return on_recorded(proto::api_error(why));
    }
  }
  if (minions.empty()) {
    return on_recorded(proto::api_error(
        "No minions matched the target. No command was sent, no jid was assigned."));
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
  job.master = name_;
  job.created = base::unix_now();
  // Rounded up: a restarted master holds the job no shorter than promised.
  job.deliver_by = std::chrono::ceil<std::chrono::seconds>(deadline.time_since_epoch()).count();
  if (on_jid) on_jid(job.jid);
  // Open before the record commits: a cluster member's minion may
  // acknowledge it as soon as it does.
  auto frame = frame_of(job);
  deliveries_.reserve({job.jid, frame, deadline}, job.minions);

  // The publish's own wait for a store that does not answer (failing over,
  // restarting), counted from its arrival, not from when the store thread
  // gets to it.
  const auto wait = std::chrono::seconds(cfg_.store_failover_wait);
  unrecorded_.fetch_add(1, std::memory_order_relaxed);
  store_.post([this, r = recording{std::move(job), frame, on_recorded, std::move(matched.missing)},
               wait, until = std::chrono::steady_clock::now() + wait](store::store& db) mutable {
    struct counted {
      std::atomic<int64_t>& n;
      ~counted() { n.fetch_sub(1, std::memory_order_relaxed); }
    } waiting{unrecorded_};
    try {
      db.add_job(r.job, until);
      std::chrono::duration<double> waited = std::chrono::steady_clock::now() - (until - wait);
      if (waited >= std::chrono::seconds(1)) {
        spdlog::info("publish: job {} recorded after waiting {:.1f} s for the store", r.job.jid,
                     waited.count());
      }
    } catch (const store::outcome_unknown& e) {
      // The store was waited for store_failover_wait already: the client
      // is answered now, before its own request times out, and the job goes
      // out later only if its row turns out to exist.
      spdlog::warn("publish: {}; asking the store again until it answers", e.what());
      r.on_recorded(proto::api_error(
          std::string("the job could not be recorded for certain, so it was not sent: ") +
          e.what() + "; if the store holds it once it answers again, it is sent then"));
      r.on_recorded = [](const json&) {};
      ask_whether_recorded(std::move(r));
      return;
    } catch (const store::unreachable& e) {
      deliveries_.cancel(r.job.jid);
      r.on_recorded(
          proto::api_error("the job could not be recorded, so it was not sent: the store did "
                           "not answer within store_failover_wait (" +
                           std::to_string(wait.count()) + " s): " + e.what()));
      return;
    } catch (const std::exception& e) {
      deliveries_.cancel(r.job.jid);
      r.on_recorded(proto::api_error(
          std::string("the job could not be recorded, so it was not sent: ") + e.what()));
      return;
    }
    go_on(std::move(r));
  });
}

void publisher::go_on(recording r) {
  ++published_;
  events_.publish("brine/job/" + r.job.jid + "/new", new_job_event(r.job));
  // Sending is I/O work: off the store thread.
  asio::post(io_, [this, r = std::move(r)] {
    auto targets = deliveries_.release(r.job.jid);
    json connected = json::array();
    std::unordered_set<std::string_view> here;
    for (const auto& s : targets) {
      connected.push_back(s->id);
      here.insert(s->id);
    }
    std::vector<std::string> others;
    for (const auto& id : r.job.minions) {
      if (!here.contains(id)) others.push_back(id);
    }
    for (auto& id : connected_elsewhere(others)) connected.push_back(std::move(id));
    r.on_recorded({{"ok", true},
                   {"jid", r.job.jid},
                   {"minions", r.job.minions},
                   {"connected", connected},
                   {"missing", r.missing},
                   {"deliver_by", r.job.deliver_by}});
    for (const auto& s : targets) s->conn->send(r.frame);
  });
}

void publisher::ask_whether_recorded(recording r) {
  auto timer = std::make_shared<asio::steady_timer>(io_, std::chrono::milliseconds(500));
  timer->async_wait([this, timer, r = std::move(r)](const std::error_code& ec) mutable {
    if (ec) return;  // the master is stopping
    store_.post([this, r = std::move(r)](store::store& db) mutable {
      const std::string jid = r.job.jid;
      try {
        if (db.get_job(jid)) {
          spdlog::info("publish: job {} was recorded after all; sending it", jid);
          return go_on(std::move(r));
        }
        spdlog::info("publish: job {} was not recorded after all; it is not sent", jid);
        deliveries_.cancel(jid);
        return;
      } catch (const std::exception& e) {
        if (base::unix_now() < r.job.deliver_by) return ask_whether_recorded(std::move(r));
        spdlog::error(
            "publish: whether job {} was recorded is still unknown at its delivery "
            "deadline ({}); it is not sent from here",
            jid, e.what());
      }
      deliveries_.cancel(jid);
    });
  });
}

void publisher::record_run(
    const std::string& minion, const std::string& name, const std::string& fun, json args,
    json kwargs, std::function<void(const std::string& jid, const std::string& error)> done) {
  store::job_record job;
  job.jid = jids_.next();
  job.fun = fun;
  job.args = std::move(args);
  job.kwargs = std::move(kwargs);
  job.target = minion;
  job.tgt_type = "list";
  job.user = "schedule:" + name;
  job.minions = {minion};
  job.master = name_;
  job.created = base::unix_now();
  job.deliver_by = job.created;
  store_.post([this, job = std::move(job), done = std::move(done)](store::store& db) {
    try {
      db.add_job(job);
      // Nothing to deliver: the minion asked for it.
      db.settle_job(job.jid);
    } catch (const store::outcome_unknown& e) {
      // Not run, then: a row that did land is settled when a master
      // reopens it (its deadline is its creation).
      return done("", std::string("the run was not started: ") + e.what());
    } catch (const std::exception& e) {
      return done("", std::string("the run could not be recorded: ") + e.what());
    }
    ++published_;
    events_.publish("brine/job/" + job.jid + "/new", new_job_event(job));
    done(job.jid, "");
  });
}

}  // namespace brine::master
