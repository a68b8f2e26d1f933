#include "master/store_sync.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <set>

#include "base/clock.h"
#include "proto/frame.h"

namespace brine::master {

using namespace std::chrono_literals;

store_sync::store_sync(deps d, std::unique_ptr<store::change_feed> feed, std::string origin)
    : d_(d), feed_(std::move(feed)), origin_(std::move(origin)) {}

store_sync::~store_sync() { stop(); }

void store_sync::start() {
  thread_ = std::thread([this] { loop(); });
}

void store_sync::stop() {
  stopping_ = true;
  if (feed_) feed_->interrupt();
  if (thread_.joinable()) thread_.join();
}

void store_sync::loop() {
  bool lost = false;
  while (!stopping_) {
    std::vector<store::change> changes;
    try {
      changes = feed_->wait(1s);
    } catch (const std::exception& e) {
      if (!lost) {
        spdlog::warn(
            "store: the change feed is lost ({}); key decisions and returns of other "
            "masters reach this master when it is back",
            e.what());
      }
      lost = true;
      // The feed paces its reconnects; this only keeps the loop from spinning
      // on the refusals in between, and ends at stop().
      for (int i = 0; i < 5 && !stopping_; ++i) std::this_thread::sleep_for(50ms);
      continue;
    }
    if (lost && !changes.empty()) {
      spdlog::info("store: the change feed is back; reading every key again");
      lost = false;
    }
    if (!changes.empty()) apply(std::move(changes));
  }
}

void store_sync::apply(std::vector<store::change> changes) {
  bool again = false;
  bool pins = false;
  // The ids whose keys changed, each with the master that changed it last.
  std::map<std::string, std::string> ids;
  std::map<std::string, std::vector<std::string>> returns;
  std::map<std::string, std::vector<store::return_record>> rets;
  std::map<std::string, std::vector<std::string>> undelivered;
  std::set<std::string> minions;
  std::vector<report::report> runs;
  for (auto& c : changes) {
    switch (c.what) {
      case store::change::kind::resync:
        again = true;
        pins = true;
        break;
      case store::change::kind::file_pins:
        if (c.origin != origin_) pins = true;
        break;
      case store::change::kind::keys:
        if (c.origin != origin_) ids[std::move(c.id)] = std::move(c.origin);
        break;
      case store::change::kind::returns:
        if (c.origin != origin_) {
          auto& v = returns[c.jid];
          v.insert(v.end(), std::make_move_iterator(c.minions.begin()),
                   std::make_move_iterator(c.minions.end()));
          auto& r = rets[c.jid];
          r.insert(r.end(), std::make_move_iterator(c.rets.begin()),
                   std::make_move_iterator(c.rets.end()));
        }
        break;
      case store::change::kind::undelivered:
        if (c.origin != origin_) {
          auto& v = undelivered[c.jid];
          v.insert(v.end(), std::make_move_iterator(c.minions.begin()),
                   std::make_move_iterator(c.minions.end()));
        }
        break;
      case store::change::kind::minions:
        if (c.origin != origin_) minions.insert(c.minions.begin(), c.minions.end());
        break;
      case store::change::kind::job:
        if (d_.cluster) d_.cluster->on_job(std::move(c));
        break;
      case store::change::kind::presence:
        if (c.origin != origin_) {
          d_.cache.presence(c.origin, c.minions, c.left, base::unix_seconds(d_.clock()));
        }
        break;
      case store::change::kind::reports:
        if (c.origin != origin_) {
          runs.insert(runs.end(), std::make_move_iterator(c.reports.begin()),
                      std::make_move_iterator(c.reports.end()));
        }
        break;
      case store::change::kind::acks:
        if (d_.cluster && c.origin != origin_) {
          for (const auto& id : c.minions) d_.deliveries.on_acknowledged(id, c.jid);
        }
        break;
    }
  }
  // Thousands of ids at once (`brine key accept --all` on another master):
  // one read of every key beats a query per id.
  constexpr size_t k_reload_above = 64;
  if (again || ids.size() > k_reload_above) {
    resync();
  } else if (!ids.empty()) {
    keys_changed({std::make_move_iterator(ids.begin()), std::make_move_iterator(ids.end())});
  }
  if (again) {
    // Reports other masters made while the feed was down were not heard:
    // every last run is read again, after the keys (the store thread keeps
    // the order; a burst of key changes needs no such read).
    d_.store.post([this](store::store& db) {
      d_.cache.load_runs(
          db, [this](const std::string& id) { return d_.keys.accepted(id).has_value(); });
    });
  }
  for (auto& [jid, ids] : returns) returned(jid, std::move(ids), std::move(rets[jid]));
  for (auto& [jid, ids] : undelivered) this->undelivered(jid, std::move(ids));
  if (!minions.empty()) minions_changed({minions.begin(), minions.end()});
  // The inventory's last runs: those other masters reported (after an
  // interruption every one is read again, above).
  if (!runs.empty()) d_.cache.ran(runs);
  if (pins && on_file_pins_) on_file_pins_();
}

void store_sync::undelivered(const std::string& jid, std::vector<std::string> minions) {
  // Recorded by the master that held them (a refusal, a deadline): this
  // master holds them no longer either.
  for (const auto& id : minions) d_.deliveries.on_acknowledged(id, jid);
  std::string prefix = "brine/job/" + jid + "/undelivered/";
  if (!d_.events.wanted(prefix)) return;
  d_.store.post([this, jid, prefix, minions = std::move(minions)](store::store& db) {
    std::set<std::string> wanted(minions.begin(), minions.end());
    for (auto& u : db.get_undelivered(jid)) {
      if (!wanted.contains(u.minion)) continue;
      d_.events.publish(prefix + u.minion, {{"id", u.minion}, {"jid", jid}, {"reason", u.reason}});
    }
  });
}

void store_sync::minions_changed(std::vector<std::string> ids) {
  d_.store.post([this, ids = std::move(ids)](store::store& db) {
    auto rows = db.load_minion_data(ids);
    // A minion connected here sends its own grains: what another master
    // wrote of it before is older.
    std::erase_if(rows, [&](const store::minion_data_record& r) {
      return d_.sessions.find_accepted(r.id) != nullptr;
    });
    d_.cache.load(std::move(rows));
  });
}

void store_sync::resync() {
  d_.store.post([this](store::store& db) {
    auto changed = d_.keys.reload(db.load_keys());
    if (!changed.empty()) {
      spdlog::info("store: {} minions' keys changed on other masters meanwhile", changed.size());
    }
    d_.sessions.apply_remote_key_changes(changed);
    settle_keys(changed);
    // Jobs other members published while the feed was down were not heard:
    // take on the ones still open.
    if (d_.cluster) d_.cluster->catch_up(db);
  });
}

void store_sync::keys_changed(std::vector<std::pair<std::string, std::string>> ids) {
  d_.store.post([this, ids = std::move(ids)](store::store& db) {
    std::vector<std::string> changed;
    for (const auto& [id, by] : ids) {
      if (!d_.keys.replace(id, db.load_keys(id))) continue;
      changed.push_back(id);
      // What happened, as the master that did it would say: its keys now.
      std::string now;
      for (const auto& k : d_.keys.list_of(id)) {
        now += (now.empty() ? "" : " and ") + std::string(store::to_string(k.state));
      }
      spdlog::info("minion {}: key {} on master {}", id, now.empty() ? "deleted" : now, by);
    }
    d_.sessions.apply_remote_key_changes(changed);
    settle_keys(changed);
  });
}

void store_sync::settle_keys(const std::vector<std::string>& ids) {
  for (const auto& id : ids) {
    if (d_.keys.accepted(id)) continue;
    auto left = d_.keys.list_of(id);
    d_.deliveries.on_key_gone(
        id, left.empty() ? "key deleted on another master" : "key rejected on another master");
    // As on the master that decided: a deleted minion is forgotten, a
    // rejected one keeps its data for when it is accepted again.
    if (left.empty()) d_.cache.forget(id);
  }
}

void store_sync::returned(const std::string& jid, std::vector<std::string> minions,
                          std::vector<store::return_record> rets) {
  if (d_.feed_returns) d_.feed_returns->inc(minions.size());
  // The minions have the job: holds for them end here too.
  for (const auto& id : minions) d_.deliveries.on_acknowledged(id, jid);
  std::string prefix = "brine/job/" + jid + "/ret/";
  if (!d_.events.wanted(prefix)) return;
  auto publish = [this, prefix](const store::return_record& r) {
    d_.events.publish(prefix + r.minion, {{"id", r.minion},
                                          {"jid", r.jid},
                                          {"fun", r.fun},
                                          {"return", proto::ordered_bytes(r.ret)},
                                          {"success", r.success},
                                          {"retcode", r.retcode}});
  };
  // Those that came in the notification are published now; the others
  // (too big to travel) are read back.
  std::set<std::string_view> came;
  for (const auto& r : rets) {
    publish(r);
    came.insert(r.minion);
  }
  std::erase_if(minions, [&](const std::string& id) { return came.contains(id); });
  if (minions.empty()) return;
  d_.store.post([jid, publish, minions = std::move(minions)](store::store& db) {
    for (auto& r : db.get_returns(jid, minions)) publish(r);
  });
}

}  // namespace brine::master
