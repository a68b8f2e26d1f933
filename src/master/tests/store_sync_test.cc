#include "master/store_sync.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "master/tests/fakes.h"

namespace brine::master {
namespace store_sync_test {
namespace {

using namespace std::chrono_literals;
using fakes::on_store;
using nlohmann::json;

// The change feed of a shared store, fed by the test. deliver() hands a
// batch to store_sync's thread and returns once store_sync has applied it
// (its next wait began), so a test needs no sleep to see the effects.
class test_feed final : public store::change_feed {
 public:
  std::vector<store::change> wait(std::chrono::milliseconds timeout) override {
    std::unique_lock lock(mu_);
    if (std::exchange(handed_, false)) {
      ++applied_;
      cv_.notify_all();
    }
    cv_.wait_for(lock, timeout, [&] { return !pending_.empty() || interrupted_; });
    interrupted_ = false;
    handed_ = !pending_.empty();
    return std::exchange(pending_, {});
  }
  void interrupt() override {
    std::lock_guard lock(mu_);
    interrupted_ = true;
    cv_.notify_all();
  }

  // False if store_sync did not apply `changes` within 10 s.
  bool deliver(std::vector<store::change> changes) {
    std::unique_lock lock(mu_);
    size_t target = applied_ + 1;
    pending_ = std::move(changes);
    cv_.notify_all();
    return cv_.wait_for(lock, 10s, [&] { return applied_ >= target; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<store::change> pending_;
  bool interrupted_ = false;
  bool handed_ = false;  // the last wait() returned changes
  size_t applied_ = 0;
};

store::key_record key(const std::string& id, store::key_state state) {
  return {id, state, "PEM " + id, "fp:" + id, 1700000000};
}

store::change change(store::change::kind what, std::string origin = "m2") {
  store::change c;
  c.what = what;
  c.origin = std::move(origin);
  return c;
}

// store_sync between the real SQLite store (in memory; what other masters
// wrote is written into it by the test) and a delivery, a key registry and
// a minion data cache of this master, "m1".
class store_sync_test : public ::testing::Test {
 protected:
  void SetUp() override {
    events_.subscribe("brine/", [this](const std::string& tag, const json& data) {
      std::lock_guard lock(events_mu_);
      seen_[tag] = data;
    });
  }
  void TearDown() override {
    if (sync_) sync_->stop();
    store_.stop();
  }

  void start(cluster_node* cluster = nullptr) {
    auto feed = std::make_unique<test_feed>();
    feed_ = feed.get();
    sync_ = std::make_unique<store_sync>(
        store_sync::deps{store_, keys_, sessions_, deliveries_, cache_, events_, cluster,
                         &feed_returns_, clock_.fn()},
        std::move(feed), "m1");
    sync_->on_file_pins([this] { ++pins_told_; });
    sync_->start();
  }

  // Hands `changes` to store_sync and waits for all it set off.
  void apply(std::vector<store::change> changes) {
    ASSERT_TRUE(feed_->deliver(std::move(changes)));
    ASSERT_TRUE(fakes::drain(store_));
    io_.restart();
    while (io_.poll() > 0) {
    }
  }

  void open(const std::string& jid, const std::vector<std::string>& minions) {
    store::job_record r;
    r.jid = jid;
    r.fun = "test.ping";
    r.minions = minions;
    r.master = "m1";
    r.deliver_by = base::unix_seconds(clock_.now() + 60s);
    on_store(store_, [r](store::store& db) { db.add_job(r); });
    deliveries_.open(
        {jid, net::make_frame({proto::msg_type::publish, 0, {{"jid", jid}}}), clock_.now() + 60s},
        minions);
  }

  std::map<std::string, json> events() {
    std::lock_guard lock(events_mu_);
    return seen_;
  }

  std::map<std::string, std::string> undelivered(const std::string& jid) {
    auto rows = on_store(store_, [jid](store::store& db) { return db.get_undelivered(jid); });
    std::map<std::string, std::string> out;
    for (const auto& u : rows) out[u.minion] = u.reason;
    return out;
  }

  asio::io_context io_;
  fakes::test_sessions sessions_{io_};
  store_worker store_{store::open_sqlite(":memory:")};
  event_bus events_;
  fakes::test_clock clock_;
  pki::key_registry keys_{pki::key_policy{}};
  minion_cache cache_{store_, "m1"};
  delivery deliveries_{sessions_, store_, events_, clock_.fn()};
  metrics::counter feed_returns_;
  std::unique_ptr<store_sync> sync_;
  test_feed* feed_ = nullptr;
  int pins_told_ = 0;
  std::mutex events_mu_;
  std::map<std::string, json> seen_;
};

TEST_F(store_sync_test, returns_another_master_received_end_holds_and_reach_subscribers) {
  start();
  open("J1", {"web1", "web2", "web3"});
  // web2's return was too big for the notification: it is read back.
  store::return_record big{"J1", "web2", "test.ping", nlohmann::ordered_json("big"), true, 0};
  on_store(store_, [big](store::store& db) { db.add_returns({big}); });

  auto c = change(store::change::kind::returns);
  c.jid = "J1";
  c.minions = {"web1", "web2"};
  c.rets = {{"J1", "web1", "test.ping", nlohmann::ordered_json(true), true, 0}};
  // This master's own notification is no news to it.
  auto own = change(store::change::kind::returns, "m1");
  own.jid = "J1";
  own.minions = {"web3"};
  apply({c, own});

  EXPECT_EQ(deliveries_.waiting(), 1u) << "web3 still waits";
  EXPECT_EQ(feed_returns_.value(), 2u);
  auto e = events();
  ASSERT_TRUE(e.contains("brine/job/J1/ret/web1"));
  EXPECT_EQ(proto::from_ordered_bytes(e["brine/job/J1/ret/web1"]["return"]),
            nlohmann::ordered_json(true));
  ASSERT_TRUE(e.contains("brine/job/J1/ret/web2"));
  EXPECT_EQ(proto::from_ordered_bytes(e["brine/job/J1/ret/web2"]["return"]),
            nlohmann::ordered_json("big"));
  EXPECT_FALSE(e.contains("brine/job/J1/ret/web3"));
}

TEST_F(store_sync_test, undelivered_records_of_another_master_end_holds_and_are_announced) {
  start();
  open("J1", {"web1", "web2"});
  on_store(store_, [](store::store& db) {
    db.add_undelivered({{"J1", "web1", "refused: busy", 1700000000}});
  });
  auto c = change(store::change::kind::undelivered);
  c.jid = "J1";
  c.minions = {"web1"};
  apply({c});
  EXPECT_EQ(deliveries_.waiting(), 1u);
  auto e = events();
  ASSERT_TRUE(e.contains("brine/job/J1/undelivered/web1"));
  EXPECT_EQ(e["brine/job/J1/undelivered/web1"]["reason"], "refused: busy");
}

TEST_F(store_sync_test, key_decisions_of_another_master_reach_sessions_and_end_waits) {
  keys_.load({key("web1", store::key_state::accepted), key("web2", store::key_state::accepted),
              key("web3", store::key_state::accepted)});
  // On m2: web1 rejected, web2 deleted; web3 unchanged.
  on_store(store_, [](store::store& db) {
    db.put_key(key("web1", store::key_state::rejected));
    db.put_key(key("web3", store::key_state::accepted));
  });
  cache_.set_grains("web1", {{"os", "Debian"}});
  cache_.set_grains("web2", {{"os", "Debian"}});
  start();
  open("J1", {"web1", "web2", "web3"});

  std::vector<store::change> changes;
  for (const char* id : {"web1", "web2", "web3"}) {
    auto c = change(store::change::kind::keys);
    c.id = id;
    changes.push_back(c);
  }
  apply(changes);

  EXPECT_FALSE(keys_.accepted("web1"));
  EXPECT_FALSE(keys_.accepted("web2"));
  EXPECT_TRUE(keys_.accepted("web3"));
  EXPECT_EQ(sessions_.remote_key_changes(),
            (std::vector<std::vector<std::string>>{{"web1", "web2"}}));
  EXPECT_EQ(undelivered("J1"),
            (std::map<std::string, std::string>{{"web1", "key rejected on another master"},
                                                {"web2", "key deleted on another master"}}));
  EXPECT_EQ(deliveries_.waiting(), 1u);
  EXPECT_TRUE(cache_.packed_grains("web1")) << "a rejected minion keeps its data";
  EXPECT_FALSE(cache_.packed_grains("web2")) << "a deleted one is forgotten";
}

TEST_F(store_sync_test, a_burst_of_key_changes_reads_every_key_once) {
  std::vector<store::key_record> before;
  for (int i = 0; i < 70; ++i) {
    before.push_back(key("m" + std::to_string(i), store::key_state::pending));
  }
  before.push_back(key("quiet", store::key_state::pending));
  keys_.load(before);
  on_store(store_, [before](store::store& db) {
    for (auto k : before) {
      k.state = store::key_state::accepted;
      db.put_key(k);
    }
  });
  start();
  std::vector<store::change> changes;
  for (int i = 0; i < 70; ++i) {
    auto c = change(store::change::kind::keys);
    c.id = "m" + std::to_string(i);
    changes.push_back(c);
  }
  apply(changes);
  // Read as a whole: "quiet", whose change was not heard, is caught up too.
  EXPECT_TRUE(keys_.accepted("quiet"));
  auto told = sessions_.remote_key_changes();
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].size(), 71u);
}

TEST_F(store_sync_test, a_resync_reads_every_key_and_last_run_again_and_the_file_pins) {
  keys_.load({key("web1", store::key_state::accepted), key("web2", store::key_state::accepted)});
  // While the feed was down: web1 rejected, web3 accepted, and a run of web2
  // reported by another master.
  on_store(store_, [](store::store& db) {
    db.put_key(key("web1", store::key_state::rejected));
    db.put_key(key("web2", store::key_state::accepted));
    db.put_key(key("web3", store::key_state::accepted));
    report::report r;
    r.jid = "J7";
    r.minion = "web2";
    r.fun = "state.apply";
    r.started_ms = 1700000000000;
    r.status = report::run_status::changed;
    db.add_reports({r});
  });
  start();
  open("J1", {"web1", "web2"});
  apply({change(store::change::kind::resync, "")});

  EXPECT_FALSE(keys_.accepted("web1"));
  EXPECT_TRUE(keys_.accepted("web3"));
  EXPECT_EQ(sessions_.remote_key_changes(),
            (std::vector<std::vector<std::string>>{{"web1", "web3"}}));
  EXPECT_EQ(undelivered("J1"),
            (std::map<std::string, std::string>{{"web1", "key rejected on another master"}}));
  EXPECT_EQ(pins_told_, 1);
  std::string last;
  cache_.read([&](const minion_cache::lookup& lookup) {
    if (auto* run = lookup("web2").last_run) last = run->jid;
  });
  EXPECT_EQ(last, "J7");
}

TEST_F(store_sync_test, file_pins_of_another_master_are_told_and_its_own_are_not) {
  start();
  apply({change(store::change::kind::file_pins, "m1")});
  EXPECT_EQ(pins_told_, 0);
  apply({change(store::change::kind::file_pins)});
  EXPECT_EQ(pins_told_, 1);
}

TEST_F(store_sync_test, presence_on_another_master_is_stamped_by_this_masters_clock) {
  start();
  auto came = change(store::change::kind::presence);
  came.minions = {"web1", "web2"};
  auto own = change(store::change::kind::presence, "m1");
  own.minions = {"web3"};
  apply({came, own});
  int64_t t0 = base::unix_seconds(clock_.now());
  clock_.advance(5s);
  auto left = change(store::change::kind::presence);
  left.left = {"web2"};
  apply({left});

  std::map<std::string, std::pair<std::string, int64_t>> seen;
  cache_.read([&](const minion_cache::lookup& lookup) {
    for (const char* id : {"web1", "web2", "web3"}) {
      auto v = lookup(id);
      seen[id] = {std::string(v.master), v.last_seen};
    }
  });
  EXPECT_EQ(seen["web1"], (std::pair<std::string, int64_t>{"m2", t0}));
  EXPECT_EQ(seen["web2"], (std::pair<std::string, int64_t>{"", t0 + 5}));
  EXPECT_EQ(seen["web3"], (std::pair<std::string, int64_t>{"", 0})) << "its own news";
}

TEST_F(store_sync_test, grains_from_another_master_fill_the_cache_but_not_over_a_minion_here) {
  on_store(store_, [](store::store& db) {
    db.put_minion_data({{"web1", json{{"os", "m2's"}}, std::nullopt, std::nullopt, "", false},
                        {"web2", json{{"os", "m2's"}}, std::nullopt, std::nullopt, "", false}});
  });
  sessions_.connect("web1");
  cache_.set_grains("web1", {{"os", "its own"}});
  start();
  auto c = change(store::change::kind::minions);
  c.minions = {"web1", "web2"};
  apply({c});
  EXPECT_EQ(cache_.packed_grains("web1").to_json()["os"], "its own");
  ASSERT_TRUE(cache_.packed_grains("web2"));
  EXPECT_EQ(cache_.packed_grains("web2").to_json()["os"], "m2's");
}

TEST_F(store_sync_test, without_a_cluster_acknowledgements_and_jobs_of_others_are_not_taken) {
  start();
  open("J1", {"web1"});
  auto ack = change(store::change::kind::acks);
  ack.jid = "J1";
  ack.minions = {"web1"};
  auto job = change(store::change::kind::job);
  job.jid = "J2";
  apply({ack, job});
  EXPECT_TRUE(deliveries_.holds("J1"));
  EXPECT_FALSE(deliveries_.holds("J2"));
}

}  // namespace
}  // namespace store_sync_test
}  // namespace brine::master
