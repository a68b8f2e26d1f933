#include "master/delivery.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "master/tests/fakes.h"

namespace brine::master {
namespace {

using namespace std::chrono_literals;
using fakes::on_store;

// A delivery over minions the test connects, the real SQLite store (in
// memory) and a clock that moves only when the test says.
class delivery_test : public ::testing::Test {
 protected:
  void SetUp() override {
    events_.subscribe("brine/job/", [this](const std::string& tag, const nlohmann::json&) {
      std::lock_guard lock(tags_mu_);
      tags_.push_back(tag);
    });
  }
  void TearDown() override { store_.stop(); }

  // A job recorded in the store (as the publisher does before release), due
  // `in` from now.
  delivery::job record(const std::string& jid, const std::vector<std::string>& minions,
                       std::chrono::seconds in = 10s, const std::string& origin = "") {
    auto deadline = clock_.now() + in;
    store::job_record r;
    r.jid = jid;
    r.fun = "test.ping";
    r.minions = minions;
    r.master = origin.empty() ? "m1" : origin;
    r.created = base::unix_seconds(clock_.now());
    r.deliver_by = base::unix_seconds(deadline);
    on_store(store_, [r](store::store& db) { db.add_job(r); });
    auto frame =
        net::make_frame({proto::msg_type::publish, 0, {{"jid", jid}, {"fun", "test.ping"}}});
    return {jid, frame, deadline, origin};
  }

  // What open() or release() answered, sent as their callers send it.
  static size_t send_all(const std::vector<delivery::session_ptr>& to, const delivery::job& j) {
    for (const auto& s : to) s->conn->send(j.frame);
    return to.size();
  }

  std::vector<std::string> sent_to(const std::string& id) {
    io_.restart();
    while (io_.poll() > 0) {
    }
    return sessions_.published_to(id);
  }

  // minion -> reason, as the store holds them.
  std::map<std::string, std::string> undelivered(const std::string& jid) {
    auto rows = on_store(store_, [jid](store::store& db) { return db.get_undelivered(jid); });
    std::map<std::string, std::string> out;
    for (const auto& u : rows) {
      EXPECT_EQ(u.stamp, base::unix_seconds(clock_.now())) << u.minion;
      out[u.minion] = u.reason;
    }
    return out;
  }

  bool settled(const std::string& jid) {
    auto open = on_store(store_, [](store::store& db) { return db.unsettled_jobs(); });
    return std::none_of(open.begin(), open.end(), [&](const auto& j) { return j.jid == jid; });
  }

  std::vector<std::string> tags() {
    EXPECT_TRUE(fakes::drain(store_));
    std::lock_guard lock(tags_mu_);
    return tags_;
  }

  asio::io_context io_;
  fakes::test_sessions sessions_{io_};
  store_worker store_{store::open_sqlite(":memory:")};
  event_bus events_;
  fakes::test_clock clock_;
  delivery d_{sessions_, store_, events_, clock_.fn()};
  std::mutex tags_mu_;
  std::vector<std::string> tags_;
};

const std::string k_not_acked =
    "no acknowledgement: the publish was sent but the minion did not confirm it before the "
    "delivery deadline";

TEST_F(delivery_test, a_publish_for_a_minion_not_connected_is_held_and_sent_when_it_connects) {
  sessions_.connect("web1");
  auto j = record("J1", {"web1", "web2"});
  auto now = d_.open(j, {"web1", "web2"});
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(now[0]->id, "web1");
  send_all(now, j);
  EXPECT_EQ(d_.waiting(), 2u);
  EXPECT_EQ(d_.held(), 1u);
  EXPECT_EQ(sent_to("web1"), std::vector<std::string>{"J1"});

  d_.on_ready(sessions_.connect("web2"));
  EXPECT_EQ(sent_to("web2"), std::vector<std::string>{"J1"});
  EXPECT_EQ(d_.held(), 0u);
  EXPECT_EQ(d_.waiting(), 2u) << "sent is not acknowledged";
  EXPECT_TRUE(d_.holds("J1"));
}

TEST_F(delivery_test, a_reserved_job_goes_to_no_one_until_release_and_survives_its_deadline) {
  auto web1 = sessions_.connect("web1");
  auto j = record("J1", {"web1", "web2", "web3"}, 5s);
  d_.reserve(j, {"web1", "web2", "web3"});
  EXPECT_TRUE(d_.holds("J1"));
  EXPECT_EQ(d_.held(), 3u);

  // A minion connecting meanwhile gets nothing yet; one acknowledging (a
  // member's minion, once the record committed) leaves it.
  d_.on_ready(web1);
  EXPECT_TRUE(sent_to("web1").empty());
  d_.on_acknowledged("web3", "J1");
  // The store stalled past the deadline: nothing is recorded while reserved.
  clock_.advance(6s);
  d_.sweep();
  EXPECT_TRUE(d_.holds("J1"));
  EXPECT_TRUE(undelivered("J1").empty());

  auto now = d_.release("J1");
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(now[0], web1);
  send_all(now, j);
  EXPECT_EQ(sent_to("web1"), std::vector<std::string>{"J1"});
  EXPECT_EQ(d_.held(), 1u);  // web2
  d_.sweep();
  EXPECT_FALSE(d_.holds("J1"));
  EXPECT_EQ(undelivered("J1"),
            (std::map<std::string, std::string>{{"web1", k_not_acked}, {"web2", "not connected"}}));
}

TEST_F(delivery_test, release_of_a_job_every_target_acknowledged_sends_nothing) {
  sessions_.connect("web1");
  auto j = record("J1", {"web1"});
  d_.reserve(j, {"web1"});
  d_.on_acknowledged("web1", "J1");
  EXPECT_FALSE(d_.holds("J1"));
  EXPECT_TRUE(d_.release("J1").empty());
  EXPECT_TRUE(settled("J1"));
}

TEST_F(delivery_test, a_cancelled_reservation_is_forgotten_without_a_record) {
  auto j = record("J1", {"web1"}, 1s);
  d_.reserve(j, {"web1"});
  d_.cancel("J1");
  EXPECT_FALSE(d_.holds("J1"));
  EXPECT_EQ(d_.waiting(), 0u);
  d_.on_ready(sessions_.connect("web1"));
  EXPECT_TRUE(sent_to("web1").empty());
  clock_.advance(2s);
  d_.sweep();
  EXPECT_TRUE(undelivered("J1").empty());
  EXPECT_FALSE(settled("J1"));
}

TEST_F(delivery_test, the_sweep_records_who_is_left_at_the_deadline_with_the_reason_and_settles) {
  sessions_.connect("web1");
  auto j = record("J1", {"web1", "web2", "web3"}, 30s);
  send_all(d_.open(j, {"web1", "web2", "web3"}), j);
  auto other = record("J2", {"web2"}, 60s);
  d_.open(other, {"web2"});
  d_.on_acknowledged("web3", "J1");

  clock_.advance(29s);
  d_.sweep();
  EXPECT_TRUE(d_.holds("J1"));
  EXPECT_TRUE(undelivered("J1").empty());

  clock_.advance(1s);  // exactly the deadline: due
  d_.sweep();
  EXPECT_FALSE(d_.holds("J1"));
  EXPECT_TRUE(d_.holds("J2"));
  EXPECT_EQ(undelivered("J1"),
            (std::map<std::string, std::string>{{"web1", k_not_acked}, {"web2", "not connected"}}));
  EXPECT_TRUE(settled("J1"));
  EXPECT_FALSE(settled("J2"));
  auto t = tags();
  std::sort(t.begin(), t.end());
  EXPECT_EQ(t, (std::vector<std::string>{"brine/job/J1/undelivered/web1",
                                         "brine/job/J1/undelivered/web2"}));
  // Swept once: a second sweep records nothing more.
  d_.sweep();
  EXPECT_EQ(tags().size(), 2u);
}

TEST_F(delivery_test, a_job_every_target_acknowledged_is_settled_at_once) {
  sessions_.connect("web1");
  sessions_.connect("web2");
  auto j = record("J1", {"web1", "web2"});
  EXPECT_EQ(send_all(d_.open(j, {"web1", "web2"}), j), 2u);
  d_.on_acknowledged("web1", "J1");
  EXPECT_TRUE(d_.holds("J1"));
  d_.on_acknowledged("web2", "J1");
  EXPECT_FALSE(d_.holds("J1"));
  EXPECT_TRUE(settled("J1"));
  clock_.advance(1h);
  d_.sweep();
  EXPECT_TRUE(undelivered("J1").empty());
  EXPECT_TRUE(tags().empty());
}

TEST_F(delivery_test, a_duplicate_acknowledgement_counts_once_and_touches_no_other_job) {
  auto j1 = record("J1", {"web1", "web2"});
  auto j2 = record("J2", {"web1"});
  d_.open(j1, {"web1", "web2"});
  d_.open(j2, {"web1"});
  EXPECT_EQ(d_.waiting(), 3u);

  d_.on_acknowledged("web1", "J1");
  d_.on_acknowledged("web1", "J1");  // a job_ack and then its return
  EXPECT_EQ(d_.waiting(), 2u);
  EXPECT_TRUE(d_.holds("J1")) << "web2 still waits";
  EXPECT_TRUE(d_.holds("J2")) << "web1's ack of J1 is not one of J2";

  d_.on_acknowledged("web2", "J1");
  d_.on_acknowledged("web2", "J1");  // after the job settled
  d_.on_acknowledged("web9", "J2");  // never targeted
  d_.on_acknowledged("web1", "J9");  // never opened
  EXPECT_FALSE(d_.holds("J1"));
  EXPECT_TRUE(d_.holds("J2"));
  EXPECT_EQ(d_.waiting(), 1u);

  clock_.advance(1h);
  d_.sweep();
  EXPECT_TRUE(undelivered("J1").empty());
  EXPECT_EQ(undelivered("J2"), (std::map<std::string, std::string>{{"web1", "not connected"}}));
}

TEST_F(delivery_test, another_members_job_is_recorded_by_it_while_alive_and_here_once_it_is_dead) {
  std::set<std::string> alive = {"m2"};
  d_.set_origin_alive([&](const std::string& name) { return alive.contains(name); });
  auto by_alive = record("J1", {"web1"}, 10s, "m2");
  auto by_dead = record("J2", {"web1"}, 10s, "m3");
  auto own = record("J3", {"web1"}, 10s);
  d_.open(by_alive, {"web1"});
  d_.open(by_dead, {"web1"});
  d_.open(own, {"web1"});

  clock_.advance(10s);
  d_.sweep();
  EXPECT_EQ(d_.waiting(), 0u);
  EXPECT_TRUE(undelivered("J1").empty()) << "m2 records its own job";
  EXPECT_FALSE(settled("J1"));
  EXPECT_EQ(undelivered("J2"), (std::map<std::string, std::string>{{"web1", "not connected"}}));
  EXPECT_TRUE(settled("J2"));
  EXPECT_EQ(undelivered("J3"), (std::map<std::string, std::string>{{"web1", "not connected"}}));
  EXPECT_TRUE(settled("J3"));
}

TEST_F(delivery_test, without_a_cluster_every_jobs_undelivered_minions_are_recorded_here) {
  auto j = record("J1", {"web1"}, 10s, "m2");
  d_.open(j, {"web1"});
  clock_.advance(10s);
  d_.sweep();
  EXPECT_EQ(undelivered("J1"), (std::map<std::string, std::string>{{"web1", "not connected"}}));
}

TEST_F(delivery_test, a_reconnect_with_a_thousand_open_jobs_gets_each_once) {
  constexpr int k_jobs = 1000;
  auto first = sessions_.connect("web1");
  std::vector<std::string> jids;
  for (int i = 0; i < k_jobs; ++i) {
    std::string jid = "J" + std::to_string(100000 + i);
    jids.push_back(jid);
    delivery::job j{jid, net::make_frame({proto::msg_type::publish, 0, {{"jid", jid}}}),
                    clock_.now() + 60s};
    send_all(d_.open(j, {"web1", "web2"}), j);
  }
  EXPECT_EQ(d_.waiting(), 2u * k_jobs);
  EXPECT_EQ(d_.held(), size_t{k_jobs});  // web2's
  EXPECT_EQ(sent_to("web1").size(), size_t{k_jobs});

  // The old connection may have lost them all: the new one gets every job
  // web1 has not acknowledged, once each.
  d_.on_ready(sessions_.connect("web1"));
  auto got = sent_to("web1");
  ASSERT_EQ(got.size(), 2u * k_jobs);  // both connections' tapes
  std::vector<std::string> second(got.begin() + k_jobs, got.end());
  std::sort(second.begin(), second.end());
  EXPECT_EQ(second, jids);

  for (int i = 0; i < k_jobs; i += 2) d_.on_acknowledged("web1", jids[i]);
  d_.on_ready(sessions_.connect("web1"));
  got = sent_to("web1");
  ASSERT_EQ(got.size(), 2u * k_jobs + k_jobs / 2);
  std::vector<std::string> third(got.begin() + 2 * k_jobs, got.end());
  std::sort(third.begin(), third.end());
  std::vector<std::string> odd;
  for (int i = 1; i < k_jobs; i += 2) odd.push_back(jids[i]);
  EXPECT_EQ(third, odd);
  EXPECT_EQ(d_.held(), size_t{k_jobs}) << "web1's reconnects leave web2's holds alone";
  EXPECT_EQ(d_.waiting(), size_t{k_jobs} + k_jobs / 2);
}

TEST_F(delivery_test, a_refusal_is_recorded_with_its_reason_and_not_targeted_as_it_is) {
  auto j = record("J1", {"web1", "web2", "web3"});
  d_.open(j, {"web1", "web2", "web3"});
  d_.on_refused("web1", "J1", "too many jobs");
  d_.on_refused("web2", "J1", std::string(proto::k_not_targeted));
  d_.on_refused("web2", "J1", "again");  // no longer waiting: not recorded twice
  EXPECT_TRUE(d_.holds("J1"));
  EXPECT_EQ(undelivered("J1"), (std::map<std::string, std::string>{
                                   {"web1", "refused: too many jobs"}, {"web2", "not targeted"}}));
  d_.on_refused("web3", "J1", "no");
  EXPECT_FALSE(d_.holds("J1"));
  EXPECT_TRUE(settled("J1"));
}

TEST_F(delivery_test, a_key_gone_ends_every_wait_of_that_minion_and_no_other) {
  auto j1 = record("J1", {"web1", "web2"});
  auto j2 = record("J2", {"web1"});
  d_.open(j1, {"web1", "web2"});
  d_.open(j2, {"web1"});
  d_.on_key_gone("web1", "key deleted on the master");
  EXPECT_TRUE(d_.holds("J1"));
  EXPECT_FALSE(d_.holds("J2"));
  EXPECT_EQ(d_.waiting(), 1u);
  EXPECT_EQ(undelivered("J1"),
            (std::map<std::string, std::string>{{"web1", "key deleted on the master"}}));
  EXPECT_EQ(undelivered("J2"),
            (std::map<std::string, std::string>{{"web1", "key deleted on the master"}}));
  EXPECT_TRUE(settled("J2"));
}

}  // namespace
}  // namespace brine::master
