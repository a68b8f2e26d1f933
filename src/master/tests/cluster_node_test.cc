#include "master/cluster_node.h"

#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/error.h"
#include "cluster/membership.h"
#include "master/tests/fakes.h"

namespace brine::master {
namespace {

using namespace std::chrono_literals;
using fakes::on_store;
// Inside a class derived from store::store, `store` names that class.
namespace st = ::brine::store;

// The real SQLite store, with what only a shared store has in its place: the
// masters table (the rows of the other members are the test's, each heard
// from `age` ago by the database's clock) and the announcement of
// acknowledgements (recorded).
class members_store final : public st::store {
 public:
  explicit members_store(std::unique_ptr<st::store> inner) : db_(std::move(inner)) {}

  void set_member(st::member_record r, std::chrono::milliseconds age) {
    std::lock_guard lock(mu_);
    std::string name = r.name;
    others_[name] = {std::move(r), age};
  }
  std::vector<std::map<std::string, std::vector<std::string>>> announced() {
    std::lock_guard lock(mu_);
    return announced_;
  }

  std::vector<st::member_record> heartbeat(const st::member_record& me) override {
    constexpr int64_t k_now_ms = 1'700'000'000'000;
    std::lock_guard lock(mu_);
    std::vector<st::member_record> rows{me};
    rows[0].seen_ms = k_now_ms;
    for (const auto& [name, other] : others_) {
      rows.push_back(other.first);
      rows.back().seen_ms = k_now_ms - other.second.count();
    }
    return rows;
  }
  void announce_acks(const std::map<std::string, std::vector<std::string>>& acks) override {
    std::lock_guard lock(mu_);
    announced_.push_back(acks);
  }

  std::string name() const override { return db_->name(); }
  bool shared() const override { return true; }
  std::unique_ptr<st::change_feed> changes() override { return nullptr; }
  int claim_master_slot(const std::string& m) override { return db_->claim_master_slot(m); }
  st::status check() override { return db_->check(); }
  std::vector<st::key_record> load_keys() override { return db_->load_keys(); }
  std::vector<st::key_record> load_keys(const std::string& id) override {
    return db_->load_keys(id);
  }
  void put_key(const st::key_record& k) override { db_->put_key(k); }
  void delete_key(const std::string& id, const std::string& f) override { db_->delete_key(id, f); }
  void write_keys(const std::vector<st::key_write>& b) override { db_->write_keys(b); }
  using st::store::add_job;
  void add_job(const st::job_record& j, std::chrono::steady_clock::time_point until) override {
    db_->add_job(j, until);
  }
  std::vector<st::job_record> list_jobs(size_t n) override { return db_->list_jobs(n); }
  std::optional<st::job_record> get_job(const std::string& jid) override {
    return db_->get_job(jid);
  }
  size_t add_returns(const std::vector<st::return_record>& b) override {
    return db_->add_returns(b);
  }
  std::vector<st::return_record> get_returns(const std::string& jid) override {
    return db_->get_returns(jid);
  }
  std::vector<st::return_record> get_returns(const std::string& jid,
                                             const std::vector<std::string>& m) override {
    return db_->get_returns(jid, m);
  }
  size_t count_returns(const std::string& jid) override { return db_->count_returns(jid); }
  void add_undelivered(const std::vector<st::undelivered_record>& b) override {
    db_->add_undelivered(b);
  }
  std::vector<st::undelivered_record> get_undelivered(const std::string& jid) override {
    return db_->get_undelivered(jid);
  }
  size_t count_undelivered(const std::string& jid) override { return db_->count_undelivered(jid); }
  std::vector<std::string> returned_minions(const std::string& jid) override {
    return db_->returned_minions(jid);
  }
  void settle_job(const std::string& jid) override { db_->settle_job(jid); }
  std::vector<st::job_record> unsettled_jobs() override { return db_->unsettled_jobs(); }
  size_t purge_jobs_before(int64_t c) override { return db_->purge_jobs_before(c); }
  size_t add_reports(const std::vector<report::report>& b) override { return db_->add_reports(b); }
  std::vector<report::report> list_reports(const st::report_query& q) override {
    return db_->list_reports(q);
  }
  std::vector<st::state_result_record> list_state_results(const st::state_query& q) override {
    return db_->list_state_results(q);
  }
  std::optional<report::report> get_report(const std::string& jid, const std::string& m) override {
    return db_->get_report(jid, m);
  }
  size_t purge_reports_before(int64_t c) override { return db_->purge_reports_before(c); }
  void put_minion_data(const std::vector<st::minion_data_update>& b) override {
    db_->put_minion_data(b);
  }
  std::vector<st::minion_data_record> load_minion_data() override {
    return db_->load_minion_data();
  }
  std::vector<st::minion_data_record> load_minion_data(
      const std::vector<std::string>& ids) override {
    return db_->load_minion_data(ids);
  }
  std::vector<st::minion_data_record> query_minion_data(const st::minion_data_query& q) override {
    return db_->query_minion_data(q);
  }
  void delete_minion_data(const std::string& id) override { db_->delete_minion_data(id); }
  std::vector<st::file_pin> load_file_pins() override { return db_->load_file_pins(); }
  void put_file_pins(const std::vector<std::string>& r,
                     const std::vector<st::file_pin>& p) override {
    db_->put_file_pins(r, p);
  }

 private:
  std::unique_ptr<st::store> db_;
  std::mutex mu_;
  std::map<std::string, std::pair<st::member_record, std::chrono::milliseconds>> others_;
  std::vector<std::map<std::string, std::vector<std::string>>> announced_;
};

// Another master of the cluster, as its heartbeat row says.
store::member_record member(const std::string& name, const pki::keypair& cluster_key,
                            const pki::keypair& own, const std::string& cluster_id = "c1") {
  // No peer address: the rows are read, never dialed.
  cluster::membership m(cluster::self{cluster_id, name, "", &cluster_key, &own});
  return m.row({});
}

store::job_record job(const std::string& jid, const std::string& master,
                      std::vector<std::string> minions, int64_t deliver_by) {
  store::job_record j;
  j.jid = jid;
  j.fun = "test.ping";
  j.master = master;
  j.minions = std::move(minions);
  j.deliver_by = deliver_by;
  return j;
}

store::change job_change(store::job_record j) {
  store::change c;
  c.what = store::change::kind::job;
  c.origin = j.master;
  c.jid = j.jid;
  c.job = std::move(j);
  return c;
}

// cluster_node "m1" of cluster "c1" with a delivery over minions the test
// connects, the real SQLite store (in memory) and a clock of the test's.
class cluster_node_test : public ::testing::Test {
 protected:
  cluster_node_test() {
    cfg_.cluster_id = "c1";
    cfg_.interface = "127.0.0.1";
    cfg_.cluster_port = 0;
    auto db = std::make_unique<members_store>(store::open_sqlite(":memory:"));
    db_ = db.get();
    store_ = std::make_unique<store_worker>(std::move(db));
    deliveries_ = std::make_unique<delivery>(sessions_, *store_, events_, clock_.fn());
    node_ = std::make_unique<cluster_node>(
        cluster_node::deps{io_, *store_, *deliveries_, sessions_, events_, clock_.fn()}, cfg_, "m1",
        cluster_key_, own_key_, cluster_node::counters{});
    events_.subscribe("brine/job/", [this](const std::string& tag, const nlohmann::json& data) {
      std::lock_guard lock(events_mu_);
      events_seen_[tag] = data;
    });
  }
  ~cluster_node_test() override {
    node_->stop();
    store_->stop();
  }

  int64_t in(std::chrono::seconds s) { return base::unix_seconds(clock_.now() + s); }

  void run_ready() {
    io_.restart();
    while (io_.poll() > 0) {
    }
  }

  asio::io_context io_;
  fakes::test_sessions sessions_{io_};
  fakes::test_clock clock_;
  event_bus events_;
  base::master_config cfg_;
  pki::keypair cluster_key_ = pki::keypair::generate();
  pki::keypair own_key_ = pki::keypair::generate();
  members_store* db_ = nullptr;
  std::unique_ptr<store_worker> store_;
  std::unique_ptr<delivery> deliveries_;
  std::unique_ptr<cluster_node> node_;
  std::mutex events_mu_;
  std::map<std::string, nlohmann::json> events_seen_;
};

TEST_F(cluster_node_test, a_job_of_another_member_goes_to_the_minions_connected_here) {
  sessions_.connect("web1");
  node_->on_job(job_change(job("J1", "m2", {"web1", "web2"}, in(60s))));
  run_ready();
  EXPECT_EQ(sessions_.published_to("web1"), std::vector<std::string>{"J1"});
  EXPECT_TRUE(deliveries_->holds("J1"));
  EXPECT_EQ(deliveries_->held(), 1u) << "web2, until it connects here";
  std::lock_guard lock(events_mu_);
  ASSERT_TRUE(events_seen_.contains("brine/job/J1/new"));
  EXPECT_EQ(events_seen_["brine/job/J1/new"]["master"], "m2");
}

TEST_F(cluster_node_test, its_own_jobs_and_jobs_past_their_deadline_are_not_taken) {
  sessions_.connect("web1");
  node_->on_job(job_change(job("J1", "m1", {"web1"}, in(60s))));
  node_->on_job(job_change(job("J2", "m2", {"web1"}, in(0s))));  // due now, by the clock
  node_->on_job(job_change(job("J3", "m2", {"web1"}, in(1s))));
  run_ready();
  EXPECT_FALSE(deliveries_->holds("J1"));
  EXPECT_FALSE(deliveries_->holds("J2"));
  EXPECT_TRUE(deliveries_->holds("J3"));
  EXPECT_EQ(sessions_.published_to("web1"), std::vector<std::string>{"J3"});
}

TEST_F(cluster_node_test, a_job_too_big_for_its_notification_is_read_from_its_row) {
  sessions_.connect("web1");
  on_store(*store_, [j = job("J1", "m2", {"web1"}, in(60s))](store::store& db) { db.add_job(j); });
  store::change c;
  c.what = store::change::kind::job;
  c.origin = "m2";
  c.jid = "J1";
  node_->on_job(c);
  c.jid = "J9";  // purged before it was read
  node_->on_job(c);
  ASSERT_TRUE(fakes::drain(*store_));
  run_ready();
  EXPECT_TRUE(deliveries_->holds("J1"));
  EXPECT_FALSE(deliveries_->holds("J9"));
  EXPECT_EQ(sessions_.published_to("web1"), std::vector<std::string>{"J1"});
}

TEST_F(cluster_node_test, catching_up_takes_the_open_jobs_of_others_for_targets_not_yet_resolved) {
  on_store(*store_, [this](store::store& db) {
    db.add_job(job("A", "m2", {"web1", "web2", "web3"}, in(60s)));
    db.add_returns({{"A", "web1", "test.ping", nlohmann::ordered_json(true), true, 0}});
    db.add_undelivered({{"A", "web2", "not connected", 0}});
    db.add_job(job("B", "m1", {"web1"}, in(60s)));  // this master's own
    db.add_job(job("C", "m2", {"web1", "web2"}, in(60s)));
    db.add_job(job("D", "m2", {"web1"}, in(60s)));
    db.add_returns({{"D", "web1", "test.ping", nlohmann::ordered_json(true), true, 0}});
    db.add_job(job("E", "m2", {"web1"}, in(60s)));
    db.settle_job("E");
  });
  // C is held here already (for web1 alone): it is not taken again.
  deliveries_->open({"C", net::make_frame({proto::msg_type::publish, 0, {{"jid", "C"}}}),
                     clock_.now() + 60s, "m2"},
                    {"web1"});
  on_store(*store_, [this](store::store& db) { node_->catch_up(db); });
  run_ready();
  EXPECT_TRUE(deliveries_->holds("A"));
  EXPECT_FALSE(deliveries_->holds("B"));
  EXPECT_FALSE(deliveries_->holds("D"));
  EXPECT_FALSE(deliveries_->holds("E"));
  EXPECT_EQ(deliveries_->waiting(), 2u) << "A for web3, C for web1";
  // A's web1 and web2 are resolved: web1 connecting now gets nothing of A.
  deliveries_->on_ready(sessions_.connect("web1"));
  deliveries_->on_ready(sessions_.connect("web3"));
  run_ready();
  EXPECT_EQ(sessions_.published_to("web1"), std::vector<std::string>{"C"});
  EXPECT_EQ(sessions_.published_to("web3"), std::vector<std::string>{"A"});
}

TEST_F(cluster_node_test, acknowledgements_here_are_announced_together_once) {
  node_->acknowledged("web1", "J1");
  node_->acknowledged("web2", "J1");
  node_->acknowledged("web1", "J2");
  std::atomic<bool> stopping{false};
  bool ended = false;
  asio::co_spawn(io_, node_->relay_loop(stopping), [&](std::exception_ptr) { ended = true; });
  // The relay round is 10 ms of real time; this waits for it, with a deadline.
  auto give_up = std::chrono::steady_clock::now() + 10s;
  while (db_->announced().empty() && std::chrono::steady_clock::now() < give_up) {
    io_.run_one_for(20ms);
    ASSERT_TRUE(fakes::drain(*store_));
  }
  stopping = true;
  while (!ended && std::chrono::steady_clock::now() < give_up) io_.run_one_for(20ms);
  EXPECT_TRUE(ended);
  ASSERT_TRUE(fakes::drain(*store_));
  auto told = db_->announced();
  ASSERT_EQ(told.size(), 1u) << "one notification for the round, none for the empty ones";
  EXPECT_EQ(told[0], (std::map<std::string, std::vector<std::string>>{{"J1", {"web1", "web2"}},
                                                                      {"J2", {"web1"}}}));
}

TEST_F(cluster_node_test, a_member_alive_records_its_own_jobs_and_a_dead_ones_are_recorded_here) {
  auto m2_key = pki::keypair::generate();
  auto m3_key = pki::keypair::generate();
  db_->set_member(member("m2", cluster_key_, m2_key), 1s);
  db_->set_member(member("m3", cluster_key_, m3_key),
                  std::chrono::milliseconds(cluster::k_dead_after_ms + 1));
  node_->join();
  EXPECT_TRUE(node_->alive("m1"));
  EXPECT_TRUE(node_->alive("m2"));
  EXPECT_FALSE(node_->alive("m3")) << "silent for longer than k_dead_after_ms";
  EXPECT_FALSE(node_->alive("m4")) << "never heard of";
  auto status = node_->status();
  ASSERT_EQ(status["members"].size(), 3u);
  for (const auto& m : status["members"]) {
    EXPECT_EQ(m["alive"], m["name"] != "m3") << m.dump();
  }

  deliveries_->set_origin_alive([this](const std::string& name) { return node_->alive(name); });
  on_store(*store_, [this](store::store& db) {
    db.add_job(job("J2", "m2", {"web1"}, in(10s)));
    db.add_job(job("J3", "m3", {"web1"}, in(10s)));
  });
  node_->on_job(job_change(job("J2", "m2", {"web1"}, in(10s))));
  node_->on_job(job_change(job("J3", "m3", {"web1"}, in(10s))));
  clock_.advance(10s);
  deliveries_->sweep();
  auto undelivered = [this](const std::string& jid) {
    return on_store(*store_, [jid](store::store& db) { return db.get_undelivered(jid); });
  };
  EXPECT_TRUE(undelivered("J2").empty()) << "m2 records what its job did not reach";
  auto j3 = undelivered("J3");
  ASSERT_EQ(j3.size(), 1u);
  EXPECT_EQ(j3[0].minion, "web1");
  EXPECT_EQ(j3[0].reason, "not connected");
}

TEST_F(cluster_node_test, join_is_refused_while_a_live_master_presents_another_cluster_key) {
  auto stranger_key = pki::keypair::generate();
  auto stranger_own = pki::keypair::generate();
  db_->set_member(member("m9", stranger_key, stranger_own), 1s);
  try {
    node_->join();
    FAIL() << "joined beside a master with another cluster key";
  } catch (const base::error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("cluster c1"), std::string::npos) << what;
    EXPECT_NE(what.find("m9"), std::string::npos) << what;
  }
}

TEST_F(cluster_node_test, a_master_with_another_key_that_is_long_gone_does_not_keep_this_one_out) {
  auto stranger_key = pki::keypair::generate();
  auto stranger_own = pki::keypair::generate();
  db_->set_member(member("m9", stranger_key, stranger_own), 60s);
  EXPECT_NO_THROW(node_->join());
  EXPECT_FALSE(node_->alive("m9"));
}

}  // namespace
}  // namespace brine::master
