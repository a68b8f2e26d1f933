#include "store/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "base/error.h"
#include "store/postgres/postgres_store.h"
#include "store/sqlite/sqlite_store.h"
#include "store/tests/store_test_util.h"
#include "support/pg_server.h"
#include "support/temp_dir.h"

namespace brine::store {
namespace {

using nlohmann::json;
using test::temp_dir;
using namespace test_util;

// The binary's one PostgreSQL server (for postgres_store_test.cc too),
// stopped at the end of the run.
const auto* const k_pg_environment = ::testing::AddGlobalTestEnvironment(new test::pg_environment);

// A second, plain SQLite connection to look at the file from outside the
// store, as another tool (or another brine process) would.
class raw_db {
 public:
  explicit raw_db(const std::string& path) {
    if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) throw std::runtime_error("sqlite3_open");
    sqlite3_busy_timeout(db_, 5000);
  }
  ~raw_db() { sqlite3_close(db_); }
  raw_db(const raw_db&) = delete;
  raw_db& operator=(const raw_db&) = delete;

  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string message = err ? err : "?";
      sqlite3_free(err);
      throw std::runtime_error(sql + ": " + message);
    }
  }
  std::string scalar(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
      throw std::runtime_error(sql + ": " + sqlite3_errmsg(db_));
    }
    std::string out;
    if (sqlite3_step(stmt) == SQLITE_ROW) {
      auto* p = sqlite3_column_text(stmt, 0);
      out = p ? reinterpret_cast<const char*>(p) : "";
    }
    sqlite3_finalize(stmt);
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
};

mode_t file_mode(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

class sqlite_store_test : public ::testing::Test {
 protected:
  temp_dir dir_;
  std::string path_ = dir_.path() + "/master.db";
};

// Every test of store's contract, run against each backend ("sqlite",
// "postgresql"), each test on a database of its own.
class store_test : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "postgresql") use_fresh_postgres_database(pg_, db_);
  }

  options opts(const std::string& origin = "test") const {
    options o;
    o.origin = origin;
    if (pg_ != nullptr) {
      o.url = pg_->url(db_);
      o.password_file = pg_->password_file();
    } else {
      o.url = "sqlite";
      o.sqlite_path = path_;
    }
    return o;
  }
  // Another connection to the test's database, as another process would open it.
  std::unique_ptr<store> open_store(const std::string& origin = "test") const {
    return open(opts(origin));
  }

  temp_dir dir_;
  std::string path_ = dir_.path() + "/master.db";
  test::pg_server* pg_ = nullptr;
  std::string db_;
};

INSTANTIATE_TEST_SUITE_P(backends, store_test, ::testing::Values("sqlite", "postgresql"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(key_state_test, names_round_trip) {
  for (auto s : {key_state::pending, key_state::accepted, key_state::rejected, key_state::denied}) {
    auto parsed = parse_key_state(to_string(s));
    ASSERT_TRUE(parsed.has_value()) << to_string(s);
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_STREQ(to_string(key_state::denied), "denied");
  EXPECT_FALSE(parse_key_state("Accepted").has_value());
  EXPECT_FALSE(parse_key_state("").has_value());
  EXPECT_FALSE(parse_key_state("unaccepted").has_value());
}

TEST_P(store_test, keys_put_replace_delete_load) {
  auto s = open_store();
  EXPECT_TRUE(s->load_keys().empty());

  s->put_key(make_key("web1", "aa:01", key_state::pending, 10));
  // Two different keys presented later for the same id: both denied, both kept.
  s->put_key(make_key("web1", "bb:02", key_state::denied, 11));
  s->put_key(make_key("web1", "cc:03", key_state::denied, 12));
  s->put_key(make_key("db1", "dd:04", key_state::rejected, 13));

  auto keys = s->load_keys();
  ASSERT_EQ(keys.size(), 4u);
  EXPECT_EQ(keys[0].id, "db1");
  EXPECT_EQ(keys[0].state, key_state::rejected);
  EXPECT_EQ(keys[1].fingerprint, "aa:01");
  EXPECT_EQ(keys[1].state, key_state::pending);
  EXPECT_EQ(keys[1].updated, 10);
  EXPECT_EQ(keys[1].pubkey, make_key("web1", "aa:01", key_state::pending).pubkey);
  EXPECT_EQ(keys[2].state, key_state::denied);
  EXPECT_EQ(keys[3].state, key_state::denied);

  // Accepting replaces the row for (id, fingerprint), it does not add one.
  s->put_key(make_key("web1", "aa:01", key_state::accepted, 20));
  keys = s->load_keys();
  ASSERT_EQ(keys.size(), 4u);
  EXPECT_EQ(keys[1].fingerprint, "aa:01");
  EXPECT_EQ(keys[1].state, key_state::accepted);
  EXPECT_EQ(keys[1].updated, 20);

  // Deleting one denied key leaves the other and the accepted one.
  s->delete_key("web1", "cc:03");
  s->delete_key("web1", "no:such");  // not an error
  keys = s->load_keys();
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys[1].fingerprint, "aa:01");
  EXPECT_EQ(keys[2].fingerprint, "bb:02");
  EXPECT_EQ(keys[2].state, key_state::denied);
}

TEST_P(store_test, job_add_get) {
  auto s = open_store();
  auto job = make_job("20240101000000000001", 1700000000);
  s->add_job(job);
  auto got = s->get_job(job.jid);
  ASSERT_TRUE(got.has_value());
  expect_job_eq(*got, job);
  EXPECT_FALSE(s->get_job("20240101000000000002").has_value());
}

TEST_P(store_test, job_added_twice_keeps_the_first) {
  auto s = open_store();
  auto job = make_job("j1", 100);
  s->add_job(job);
  auto again = job;
  again.fun = "cmd.run";
  s->add_job(again);
  EXPECT_EQ(s->get_job("j1")->fun, "test.ping");
  EXPECT_EQ(s->list_jobs(10).size(), 1u);
}

TEST_P(store_test, list_jobs_newest_first_with_limit) {
  auto s = open_store();
  s->add_job(make_job("a", 100));
  s->add_job(make_job("b", 300));
  s->add_job(make_job("c", 200));
  s->add_job(make_job("d", 300));  // same second as b: the greater jid first

  EXPECT_EQ(jids_of(s->list_jobs(10)), (std::vector<std::string>{"d", "b", "c", "a"}));
  EXPECT_EQ(jids_of(s->list_jobs(2)), (std::vector<std::string>{"d", "b"}));
  EXPECT_TRUE(s->list_jobs(0).empty());
  EXPECT_EQ(s->list_jobs(std::numeric_limits<size_t>::max()).size(), 4u);
  expect_job_eq(s->list_jobs(1).at(0), make_job("d", 300));
}

TEST_P(store_test, first_return_wins) {
  auto s = open_store();
  EXPECT_EQ(s->add_returns({}), 0u);
  EXPECT_EQ(s->add_returns({make_return("j1", "m1", 1), make_return("j1", "m2", 2)}), 2u);
  // m1 re-sent with a different value, plus one new minion.
  EXPECT_EQ(s->add_returns({make_return("j1", "m1", 99), make_return("j1", "m3", 3)}), 1u);
  // The same pair twice in one batch: the first in the batch wins.
  EXPECT_EQ(s->add_returns({make_return("j1", "m4", "first"), make_return("j1", "m4", "second")}),
            1u);
  // Same minion, other job: a different key.
  EXPECT_EQ(s->add_returns({make_return("j2", "m1", 5)}), 1u);

  auto rets = s->get_returns("j1");
  ASSERT_EQ(rets.size(), 4u);
  EXPECT_EQ(rets[0].minion, "m1");
  EXPECT_EQ(rets[0].ret, json(1));
  EXPECT_EQ(rets[3].minion, "m4");
  EXPECT_EQ(rets[3].ret, json("first"));
  EXPECT_EQ(s->get_returns("j2").size(), 1u);
  EXPECT_TRUE(s->get_returns("j3").empty());
  EXPECT_EQ(s->count_returns("j1"), 4u);
  EXPECT_EQ(s->count_returns("j2"), 1u);
  EXPECT_EQ(s->count_returns("j3"), 0u);
}

TEST_P(store_test, return_fields_round_trip) {
  auto s = open_store();
  auto r = make_return("j1", "m1", json::object({{"stdout", "x"}}), 1234);
  r.fun = "cmd.run";
  r.success = false;
  r.retcode = -9;
  ASSERT_EQ(s->add_returns({r}), 1u);
  auto got = s->get_returns("j1").at(0);
  EXPECT_EQ(got.jid, "j1");
  EXPECT_EQ(got.minion, "m1");
  EXPECT_EQ(got.fun, "cmd.run");
  EXPECT_EQ(got.ret, r.ret);
  EXPECT_FALSE(got.success);
  EXPECT_EQ(got.retcode, -9);
  EXPECT_EQ(got.stamp, 1234);
}

// A return keeps the key order the minion made it in (Salt's dicts keep
// insertion order; `brine cmd --out json` prints it).
TEST_P(store_test, return_keeps_its_key_order) {
  auto s = open_store();
  auto r = make_return("j1", "m1", json(nullptr), 1);
  r.ret =
      nlohmann::ordered_json::parse(R"({"zeta": {"b": 1, "a": 2}, "alpha": [{"y": 0, "x": 1}]})");
  ASSERT_EQ(s->add_returns({r}), 1u);
  EXPECT_EQ(s->get_returns("j1").at(0).ret.dump(), r.ret.dump());
}

TEST_P(store_test, batch_of_ten_thousand_returns) {
  auto s = open_store();
  std::vector<return_record> batch;
  for (int j = 0; j < 10; ++j) {
    for (int m = 0; m < 1000; ++m) {
      batch.push_back(make_return("job" + std::to_string(j), "minion" + std::to_string(m),
                                  json::object({{"n", j * 1000 + m}})));
    }
  }
  EXPECT_EQ(s->add_returns(batch), 10000u);
  for (int j = 0; j < 10; ++j) {
    auto rets = s->get_returns("job" + std::to_string(j));
    ASSERT_EQ(rets.size(), 1000u);
    EXPECT_EQ(rets[0].minion, "minion0");  // same stamp: ordered by minion
    EXPECT_EQ(rets[0].ret["n"], j * 1000);
  }
  // Every one of them re-sent (a master restart): nothing new.
  EXPECT_EQ(s->add_returns(batch), 0u);
  batch.push_back(make_return("job10", "minion0", true));
  EXPECT_EQ(s->add_returns(batch), 1u);
}

TEST_P(store_test, purge_removes_old_jobs_their_returns_and_old_orphans) {
  auto s = open_store();
  s->add_job(make_job("old1", 100));
  s->add_job(make_job("old2", 200));
  s->add_job(make_job("new", 300));
  s->add_returns({
      make_return("old1", "m1", 1, 110),
      make_return("old2", "m1", 1, 400),  // a late return of an old job goes with it
      make_return("new", "m1", 1, 310),
      make_return("new", "m2", 1, 50),  // stamp before the cutoff, but its job is new
      make_return("orphan_old", "m1", 1, 150),
      make_return("orphan_new", "m1", 1, 250),  // at the cutoff: kept
  });

  EXPECT_EQ(s->purge_jobs_before(250), 2u);

  EXPECT_EQ(jids_of(s->list_jobs(10)), (std::vector<std::string>{"new"}));
  EXPECT_FALSE(s->get_job("old1").has_value());
  EXPECT_TRUE(s->get_returns("old1").empty());
  EXPECT_TRUE(s->get_returns("old2").empty());
  EXPECT_EQ(s->get_returns("new").size(), 2u);
  EXPECT_TRUE(s->get_returns("orphan_old").empty());
  EXPECT_EQ(s->get_returns("orphan_new").size(), 1u);

  EXPECT_EQ(s->purge_jobs_before(250), 0u);
  EXPECT_EQ(s->purge_jobs_before(301), 1u);
  EXPECT_TRUE(s->get_returns("new").empty());
  EXPECT_TRUE(s->get_returns("orphan_new").empty());
}

TEST_P(store_test, undelivered_and_returns_exclude_each_other) {
  auto s = open_store();
  s->add_job(make_job("j1", 100));
  s->add_returns({make_return("j1", "web1", true)});
  // web1 returned: recording it as undelivered is ignored; web2 is recorded.
  s->add_undelivered({{"j1", "web1", "not connected", 160}, {"j1", "web2", "not connected", 160}});
  auto u = s->get_undelivered("j1");
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].minion, "web2");
  EXPECT_EQ(u[0].reason, "not connected");
  EXPECT_EQ(u[0].stamp, 160);
  // Recorded twice: the first reason stays.
  s->add_undelivered({{"j1", "web2", "refused: spool full", 170}});
  EXPECT_EQ(s->get_undelivered("j1")[0].reason, "not connected");
  EXPECT_EQ(s->count_undelivered("j1"), 1u);
  // A late return of web2 replaces its undelivered record.
  EXPECT_EQ(s->add_returns({make_return("j1", "web2", true)}), 1u);
  EXPECT_TRUE(s->get_undelivered("j1").empty());
  EXPECT_EQ(s->count_undelivered("j1"), 0u);
  EXPECT_EQ(s->returned_minions("j1"), (std::vector<std::string>{"web1", "web2"}));
}

TEST_P(store_test, new_jobs_are_unsettled_until_settled) {
  auto s = open_store();
  s->add_job(make_job("j2", 200));
  s->add_job(make_job("j1", 100));
  s->add_job(make_job("j3", 300));
  EXPECT_EQ(jids_of(s->unsettled_jobs()), (std::vector<std::string>{"j1", "j2", "j3"}));
  expect_job_eq(s->unsettled_jobs()[0], make_job("j1", 100));
  s->settle_job("j2");
  s->settle_job("j2");  // twice: no harm
  s->settle_job("nope");
  EXPECT_EQ(jids_of(s->unsettled_jobs()), (std::vector<std::string>{"j1", "j3"}));
  // Settled state survives a reopen (a master restart).
  s.reset();
  s = open_store();
  EXPECT_EQ(jids_of(s->unsettled_jobs()), (std::vector<std::string>{"j1", "j3"}));
}

TEST_P(store_test, purge_takes_undelivered_records_along) {
  auto s = open_store();
  s->add_job(make_job("old", 100));
  s->add_job(make_job("new", 300));
  s->add_undelivered(
      {{"old", "web1", "not connected", 110}, {"new", "web1", "not connected", 310}});
  EXPECT_EQ(s->purge_jobs_before(250), 1u);
  EXPECT_TRUE(s->get_undelivered("old").empty());
  EXPECT_EQ(s->get_undelivered("new").size(), 1u);
}

TEST_P(store_test, minion_data_cache_round_trips_field_by_field) {
  {
    auto s = open_store();
    EXPECT_TRUE(s->load_minion_data().empty());
    s->put_minion_data({{"web1", std::nullopt, std::nullopt, 100, "master-a:4506"}});
    s->put_minion_data({
        {"web1", json{{"os", "Debian"}, {"ipv4", {"127.0.0.1", "10.0.0.5"}}}, std::nullopt,
         std::nullopt, ""},
        {"db1", json{{"os", "Rocky"}}, json{{"role", "db"}}, std::nullopt, ""},
    });
    // The last_seen of web1 changes, its grains stay.
    s->put_minion_data({{"web1", std::nullopt, std::nullopt, 200, "master-b:4506"}});
    // An empty map is data, not "never sent".
    s->put_minion_data({{"web2", json::object(), std::nullopt, std::nullopt, ""}});
    // master-a noticing late that web1 left it: web1 stays on master-b.
    s->put_minion_data({{"web1", std::nullopt, std::nullopt, 150, "master-a:4506", true}});
    // db1 connected to master-a and left it: connected nowhere.
    s->put_minion_data({{"db1", std::nullopt, std::nullopt, 0, "master-a:4506"},
                        {"db1", std::nullopt, std::nullopt, 0, "master-a:4506", true}});
  }
  auto s = open_store();  // survives a restart
  auto all = s->load_minion_data();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].id, "db1");
  EXPECT_EQ(all[0].grains, json({{"os", "Rocky"}}));
  EXPECT_EQ(all[0].pillar, json({{"role", "db"}}));
  EXPECT_EQ(all[0].last_seen, 0);
  EXPECT_EQ(all[0].master, "");
  EXPECT_EQ(all[1].id, "web1");
  EXPECT_EQ((*all[1].grains)["ipv4"][1], "10.0.0.5");
  EXPECT_FALSE(all[1].pillar.has_value());
  EXPECT_EQ(all[1].last_seen, 150);
  EXPECT_EQ(all[1].master, "master-b:4506");
  EXPECT_EQ(all[2].grains, json::object());
  s->delete_minion_data("web1");
  s->delete_minion_data("nobody");
  EXPECT_EQ(s->load_minion_data().size(), 2u);
}

TEST_F(sqlite_store_test, version_1_file_is_migrated_with_its_jobs_settled) {
  {
    // A job cache as the first brine wrote it.
    raw_db raw(path_);
    raw.exec(R"sql(
CREATE TABLE keys (id TEXT NOT NULL, fingerprint TEXT NOT NULL, state TEXT NOT NULL,
  pubkey TEXT NOT NULL, updated INTEGER NOT NULL, PRIMARY KEY (id, fingerprint));
CREATE TABLE jobs (jid TEXT NOT NULL PRIMARY KEY, fun TEXT NOT NULL, args TEXT NOT NULL,
  kwargs TEXT NOT NULL, target TEXT NOT NULL, tgt_type TEXT NOT NULL, user TEXT NOT NULL,
  minions TEXT NOT NULL, master TEXT NOT NULL, created INTEGER NOT NULL);
CREATE INDEX jobs_by_created ON jobs (created, jid);
CREATE TABLE returns (jid TEXT NOT NULL, minion TEXT NOT NULL, fun TEXT NOT NULL,
  ret TEXT NOT NULL, success INTEGER NOT NULL, retcode INTEGER NOT NULL, stamp INTEGER NOT NULL,
  PRIMARY KEY (jid, minion));
CREATE INDEX returns_by_stamp ON returns (stamp);
INSERT INTO jobs VALUES ('j1', 'test.ping', '[]', '{}', '*', 'glob', 'root', '["web1"]',
  'local', 100);
PRAGMA application_id=)sql" +
             std::to_string(k_sqlite_application_id) + R"sql(;
PRAGMA user_version=1;
)sql");
  }
  auto s = open_sqlite(path_);
  auto job = s->get_job("j1");
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(job->deliver_by, 0);
  EXPECT_TRUE(s->unsettled_jobs().empty());
  s->add_undelivered({{"j1", "web1", "not connected", 110}});
  EXPECT_EQ(s->count_undelivered("j1"), 1u);
  EXPECT_EQ(raw_db(path_).scalar("PRAGMA user_version"), std::to_string(k_sqlite_schema_version));
  // Every later step ran too: reports (version 4) work.
  report::report r;
  r.jid = "j1";
  r.minion = "web1";
  r.fun = "state.apply";
  EXPECT_EQ(s->add_reports({r}), 1u);
  EXPECT_EQ(s->list_reports({.last = true}).size(), 1u);
}

TEST_P(store_test, file_pins_are_replaced_per_remote) {
  auto s = open_store();
  EXPECT_TRUE(s->load_file_pins().empty());
  const std::string c1(40, '1'), c2(40, '2'), c3(40, '3');
  s->put_file_pins({"https://git.example/a.git", "/srv/b"},
                   {{"https://git.example/a.git", "base", "refs/heads/master", c1, 10},
                    {"https://git.example/a.git", "v1", "refs/tags/v1", c2, 10},
                    {"/srv/b", "base", "refs/heads/main", c3, 10}});
  auto pins = s->load_file_pins();
  ASSERT_EQ(pins.size(), 3u);
  EXPECT_EQ(pins[0].remote, "/srv/b");
  EXPECT_EQ(pins[1].saltenv, "base");
  EXPECT_EQ(pins[1].commit, c1);
  EXPECT_EQ(pins[2].ref, "refs/tags/v1");
  EXPECT_EQ(pins[2].updated, 10);
  // Pinning remote a again replaces all of its pins (v1 is gone) and
  // leaves b's alone.
  s->put_file_pins({"https://git.example/a.git"},
                   {{"https://git.example/a.git", "base", "refs/heads/master", c3, 20}});
  pins = open_store()->load_file_pins();
  ASSERT_EQ(pins.size(), 2u);
  EXPECT_EQ(pins[0].commit, c3);
  EXPECT_EQ(pins[1].remote, "https://git.example/a.git");
  EXPECT_EQ(pins[1].commit, c3);
  EXPECT_EQ(pins[1].updated, 20);
}

TEST_P(store_test, data_persists_across_reopen) {
  auto job = make_job("j1", 500);
  {
    auto s = open_store();
    s->put_key(make_key("web1", "aa:01", key_state::accepted, 7));
    s->add_job(job);
    s->add_returns({make_return("j1", "web1", "pong")});
  }
  auto s = open_store();
  auto keys = s->load_keys();
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys[0].state, key_state::accepted);
  EXPECT_EQ(keys[0].updated, 7);
  expect_job_eq(s->get_job("j1").value(), job);
  ASSERT_EQ(s->get_returns("j1").size(), 1u);
  EXPECT_EQ(s->get_returns("j1")[0].ret, json("pong"));
  // Reopening found the schema current and did not re-run the migration
  // (which would have failed on CREATE TABLE).
  EXPECT_EQ(s->add_returns({make_return("j1", "web1", "again")}), 0u);

  EXPECT_EQ(s->check().schema_version, s->check().code_version);
}

TEST_F(sqlite_store_test, file_is_marked_and_in_wal_mode) {
  open_sqlite(path_)->add_job(make_job("j1", 500));
  open_sqlite(path_);
  raw_db raw(path_);
  EXPECT_EQ(raw.scalar("PRAGMA user_version"), std::to_string(k_sqlite_schema_version));
  EXPECT_EQ(raw.scalar("PRAGMA application_id"), std::to_string(k_sqlite_application_id));
  EXPECT_EQ(raw.scalar("PRAGMA journal_mode"), "wal");
}

TEST_P(store_test, two_stores_on_one_database_see_each_other) {
  // A master and a CLI process, each with its own connection.
  auto master = open_store();
  auto cli = open_store();

  master->add_job(make_job("j1", 100));
  ASSERT_TRUE(cli->get_job("j1").has_value());

  cli->add_returns({make_return("j1", "m1", "from cli")});
  ASSERT_EQ(master->get_returns("j1").size(), 1u);
  EXPECT_EQ(master->add_returns({make_return("j1", "m1", "from master")}), 0u);
  EXPECT_EQ(cli->get_returns("j1").at(0).ret, json("from cli"));

  master->put_key(make_key("web1", "aa:01", key_state::pending));
  cli->put_key(make_key("web1", "aa:01", key_state::accepted));
  ASSERT_EQ(master->load_keys().size(), 1u);
  EXPECT_EQ(master->load_keys()[0].state, key_state::accepted);

  EXPECT_EQ(cli->purge_jobs_before(200), 1u);
  EXPECT_TRUE(master->list_jobs(10).empty());
}

TEST_P(store_test, two_processes_write_at_once) {
  open_store();  // create the schema before the race
  constexpr size_t k_batches = 100;
  constexpr size_t k_per_batch = 50;
  auto write_all = [&](const std::string& jid) {
    const std::string other = jid == "parent" ? "child" : "parent";
    auto s = open_store();
    for (size_t b = 0; b < k_batches; ++b) {
      std::vector<return_record> batch;
      batch.reserve(k_per_batch);
      for (size_t i = 0; i < k_per_batch; ++i) {
        batch.push_back(make_return(jid, "m" + std::to_string(b * k_per_batch + i), b));
      }
      if (s->add_returns(batch) != k_per_batch) return false;
      // Reading while the other process writes: a batch is seen whole or not at all.
      if (b % 10 == 0 && s->get_returns(other).size() % k_per_batch != 0) return false;
    }
    return true;
  };

  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    bool ok = false;
    try {
      ok = write_all("child");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
    }
    ::_exit(ok ? 0 : 1);
  }
  bool parent_ok = write_all("parent");
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(parent_ok);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);

  auto s = open_store();
  EXPECT_EQ(s->get_returns("parent").size(), k_batches * k_per_batch);
  EXPECT_EQ(s->get_returns("child").size(), k_batches * k_per_batch);
}

TEST_F(sqlite_store_test, files_are_owner_only) {
  // With umask 0 SQLite's default would be 0644; the mode must come from the store.
  mode_t old = ::umask(0);
  auto s = open_sqlite(path_);
  s->add_job(make_job("j1", 1));  // the -wal and -shm files exist while a connection is open
  ::umask(old);
  EXPECT_EQ(file_mode(path_), 0600u);
  EXPECT_EQ(file_mode(path_ + "-wal"), 0600u);
  EXPECT_EQ(file_mode(path_ + "-shm"), 0600u);
}

TEST_P(store_test, json_values_round_trip) {
  auto s = open_store();
  json nested = {
      {"a", {{"b", {{"c", json::array({1, 2, json::object({{"d", nullptr}})})}}}}},
      {"empty_obj", json::object()},
      {"empty_arr", json::array()},
      {"flags", {true, false}},
      {"ratio", 0.1},
      {"tiny", 5e-324},
  };
  json unicode = {{"greek", "αβγ"},
                  {"snowman", "☃"},
                  {"emoji", "😀"},
                  {"cjk", "日本語"},
                  {"escapes", "quote\" backslash\\ tab\t nl\n nul"}};
  unicode["escapes"] = unicode["escapes"].get<std::string>() + std::string(1, '\0') + "end";
  json big = {{"u64_max", std::numeric_limits<uint64_t>::max()},
              {"i64_min", std::numeric_limits<int64_t>::min()},
              {"i64_max", std::numeric_limits<int64_t>::max()}};

  auto job = make_job("j1", 1);
  job.args = json::array({nested, "ünïcödé", big});
  job.kwargs = unicode;
  job.minions = {"mínion-ü", "web1"};
  s->add_job(job);
  expect_job_eq(s->get_job("j1").value(), job);

  ASSERT_EQ(s->add_returns({make_return("j1", "mínion-ü", nested), make_return("j1", "m2", unicode),
                            make_return("j1", "m3", big)}),
            3u);
  auto rets = s->get_returns("j1");
  ASSERT_EQ(rets.size(), 3u);
  EXPECT_EQ(rets[0].ret, unicode);
  EXPECT_EQ(rets[1].ret, big);
  EXPECT_EQ(rets[1].ret["u64_max"].get<uint64_t>(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(rets[1].ret["i64_min"].get<int64_t>(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(rets[2].minion, "mínion-ü");
  EXPECT_EQ(rets[2].ret, nested);
}

TEST_P(store_test, invalid_utf8_output_is_stored_not_refused) {
  auto s = open_store();
  // A command printing raw bytes: the batch must still be stored.
  std::string bytes = "ok \xff\xfe end";
  ASSERT_EQ(s->add_returns({make_return("j1", "m1", json::object({{"stdout", bytes}})),
                            make_return("j1", "m2", "fine")}),
            2u);
  auto rets = s->get_returns("j1");
  ASSERT_EQ(rets.size(), 2u);
  EXPECT_EQ(rets[0].ret["stdout"], json("ok \xEF\xBF\xBD\xEF\xBF\xBD end"));  // U+FFFD each
}

TEST_P(store_test, bad_bytes_in_text_fields_do_not_fail_a_batch) {
  auto s = open_store();
  // A minion may send any bytes as a function name.
  auto odd = make_return("j1", "m1", 1);
  odd.fun =
      "cmd.\xff"
      "run";
  ASSERT_EQ(s->add_returns({odd, make_return("j1", "m2", 2)}), 2u);
  auto rets = s->get_returns("j1");
  ASSERT_EQ(rets.size(), 2u);
  // SQLite keeps the bytes; PostgreSQL, whose text is UTF-8, stores U+FFFD.
  EXPECT_EQ(rets[0].fun, pg_ ? std::string("cmd.\xEF\xBF\xBD"
                                           "run")
                             : odd.fun);
  // Re-sent as it was: still the same row, not a second one.
  EXPECT_EQ(s->add_returns({odd}), 0u);
}

TEST_P(store_test, returns_of_some_minions) {
  auto s = open_store();
  s->add_returns({make_return("j1", "web2", 2), make_return("j1", "web1", 1),
                  make_return("j1", "db1", 3), make_return("j2", "web1", 4)});
  auto got = s->get_returns("j1", {"web2", "web1", "nobody"});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].minion, "web1");
  EXPECT_EQ(got[0].ret, json(1));
  EXPECT_EQ(got[0].jid, "j1");
  EXPECT_EQ(got[1].minion, "web2");
  EXPECT_TRUE(s->get_returns("j1", {}).empty());
  EXPECT_TRUE(s->get_returns("j3", {"web1"}).empty());
  EXPECT_EQ(s->get_returns("j2", {"web1"}).at(0).ret, json(4));
}

TEST_P(store_test, load_keys_of_one_id) {
  auto s = open_store();
  s->put_key(make_key("web1", "bb:02", key_state::denied, 2));
  s->put_key(make_key("web1", "aa:01", key_state::accepted, 3));
  s->put_key(make_key("web10", "cc:03", key_state::pending));
  auto keys = s->load_keys("web1");
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0].fingerprint, "aa:01");
  EXPECT_EQ(keys[0].state, key_state::accepted);
  EXPECT_EQ(keys[0].updated, 3);
  EXPECT_EQ(keys[0].pubkey, make_key("web1", "aa:01", key_state::accepted).pubkey);
  EXPECT_EQ(keys[1].fingerprint, "bb:02");
  EXPECT_TRUE(s->load_keys("web").empty());
  s->delete_key("web1", "aa:01");
  EXPECT_EQ(s->load_keys("web1").size(), 1u);
  EXPECT_EQ(s->load_keys("web10").size(), 1u);
}

// brine key accept --all: thousands of changes in one transaction, in order.
TEST_P(store_test, write_keys_applies_a_batch_in_order) {
  auto s = open_store();
  s->write_keys({});
  std::vector<key_write> batch;
  for (int i = 0; i < 1500; ++i) {
    batch.push_back({false, make_key("m" + std::to_string(i), "fp", key_state::pending, 1)});
  }
  s->write_keys(batch);
  EXPECT_EQ(s->load_keys().size(), 1500u);
  // Accept one, delete another, then put the deleted one back as rejected.
  s->write_keys({{false, make_key("m1", "fp", key_state::accepted, 2)},
                 {true, make_key("m2", "fp", key_state::pending)},
                 {false, make_key("m2", "fp", key_state::rejected, 3)},
                 {true, make_key("m3", "fp", key_state::pending)}});
  auto m1 = s->load_keys("m1");
  ASSERT_EQ(m1.size(), 1u);
  EXPECT_EQ(m1[0].state, key_state::accepted);
  auto m2 = s->load_keys("m2");
  ASSERT_EQ(m2.size(), 1u);
  EXPECT_EQ(m2[0].state, key_state::rejected);
  EXPECT_TRUE(s->load_keys("m3").empty());
  EXPECT_EQ(s->load_keys().size(), 1499u);
  // The same key twice in one batch: the later write wins. Text that array
  // syntax would mistake survives.
  auto odd = make_key("odd \"id\"", "f{1},2", key_state::pending, 4);
  odd.pubkey = "a\"b\\c\nd{},'e NULL";
  auto accepted = odd;
  accepted.state = key_state::accepted;
  s->write_keys({{false, odd}, {false, accepted}});
  auto back = s->load_keys(odd.id);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].state, key_state::accepted);
  EXPECT_EQ(back[0].fingerprint, odd.fingerprint);
  EXPECT_EQ(back[0].pubkey, odd.pubkey);
}

TEST_P(store_test, duplicates_within_one_batch) {
  auto s = open_store();
  // Undelivered: the first record of a minion in the batch wins.
  s->add_undelivered({{"j1", "web3", "first", 1}, {"j1", "web3", "second", 2}});
  auto u = s->get_undelivered("j1");
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].reason, "first");
  // Minion data: every update applies, in order.
  s->put_minion_data({{"web1", json{{"v", 1}}, std::nullopt, 100, "master-a"},
                      {"web1", json{{"v", 2}}, json{{"p", 1}}, std::nullopt, ""},
                      {"web1", std::nullopt, std::nullopt, 200, "master-b"}});
  auto all = s->load_minion_data();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].grains, json({{"v", 2}}));
  EXPECT_EQ(all[0].pillar, json({{"p", 1}}));
  EXPECT_EQ(all[0].last_seen, 200);
  EXPECT_EQ(all[0].master, "master-b");
}

TEST_P(store_test, check_reports_backend_versions_and_rows) {
  auto s = open_store();
  s->put_key(make_key("web1", "aa:01", key_state::accepted));
  s->add_job(make_job("j1", 1));
  s->add_job(make_job("j2", 2));
  s->add_returns(
      {make_return("j1", "web1", 1), make_return("j1", "web2", 1), make_return("j2", "web1", 1)});
  s->add_undelivered({{"j2", "web2", "not connected", 3}});
  s->put_minion_data({{"web1", json::object(), std::nullopt, std::nullopt, ""},
                      {"web2", json::object(), std::nullopt, std::nullopt, ""}});
  auto st = s->check();
  EXPECT_EQ(st.backend, GetParam());
  EXPECT_EQ(st.code_version, pg_ ? k_postgres_schema_version : k_sqlite_schema_version);
  EXPECT_EQ(st.schema_version, st.code_version);
  EXPECT_EQ(st.name, pg_ ? pg_->url(db_) : path_);
  EXPECT_EQ(st.rows.at("keys"), 1);
  EXPECT_EQ(st.rows.at("jobs"), 2);
  EXPECT_EQ(st.rows.at("returns"), 3);
  EXPECT_EQ(st.rows.at("undelivered"), 1);
  EXPECT_EQ(st.rows.at("minion_data"), 2);
  if (pg_) {
    EXPECT_EQ(st.rows.at("masters"), 0);
  }
}

TEST_P(store_test, name_sharing_feed_and_master_slots) {
  auto s = open_store();
  if (pg_ == nullptr) {
    EXPECT_EQ(s->name(), "sqlite " + path_);
    EXPECT_FALSE(s->shared());
    EXPECT_EQ(s->changes(), nullptr);
    EXPECT_EQ(s->claim_master_slot("a:4506"), 0);
    EXPECT_EQ(s->claim_master_slot("b:4506"), 0);
    return;
  }
  EXPECT_EQ(s->name(), pg_->url(db_));
  EXPECT_TRUE(s->shared());
  EXPECT_NE(s->changes(), nullptr);
  EXPECT_EQ(s->claim_master_slot("a:4506"), 0);
  EXPECT_EQ(s->claim_master_slot("b:4506"), 1);
}

TEST_F(sqlite_store_test, locked_database_names_file_and_cause) {
  auto s = open_sqlite(path_);
  s->add_job(make_job("j1", 1));
  raw_db other(path_);
  other.exec("BEGIN IMMEDIATE");  // another process holding the write lock

  // Readers are not blocked by a writer in WAL mode: the CLI can still list jobs.
  EXPECT_EQ(s->list_jobs(10).size(), 1u);
  try {
    s->add_returns({make_return("j1", "m1", 1)});  // waits out the 5 s busy timeout
    FAIL() << "expected base::error";
  } catch (const base::error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(path_), std::string::npos) << what;
    EXPECT_NE(what.find("database is locked"), std::string::npos) << what;
    EXPECT_NE(what.find("another process"), std::string::npos) << what;
  }
  other.exec("ROLLBACK");
  // The failed batch left no transaction open behind it.
  EXPECT_EQ(s->add_returns({make_return("j1", "m1", 1)}), 1u);
}

TEST_F(sqlite_store_test, newer_schema_is_refused) {
  open_sqlite(path_);
  raw_db(path_).exec("PRAGMA user_version=" + std::to_string(k_sqlite_schema_version + 1));
  try {
    open_sqlite(path_);
    FAIL() << "expected base::error";
  } catch (const base::error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(path_), std::string::npos) << what;
    EXPECT_NE(what.find("newer than this brine"), std::string::npos) << what;
  }
}

TEST_F(sqlite_store_test, other_programs_database_is_refused) {
  raw_db(path_).exec("CREATE TABLE photos (id INTEGER PRIMARY KEY)");
  try {
    open_sqlite(path_);
    FAIL() << "expected base::error";
  } catch (const base::error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("not a brine database"), std::string::npos) << what;
  }
  // And nothing was added to it.
  EXPECT_EQ(raw_db(path_).scalar("SELECT count(*) FROM sqlite_master"), "1");
}

TEST_F(sqlite_store_test, garbage_file_is_refused) {
  {
    std::ofstream out(path_, std::ios::binary);
    for (int i = 0; i < 512; ++i) out << "not a database ";
  }
  try {
    open_sqlite(path_);
    FAIL() << "expected base::error";
  } catch (const base::error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(path_), std::string::npos) << what;
    EXPECT_NE(what.find("not a database"), std::string::npos) << what;
    EXPECT_NE(what.find("move it aside"), std::string::npos) << what;
  }
}

TEST_F(sqlite_store_test, missing_directory_says_so) {
  std::string path = dir_.path() + "/no/such/dir/master.db";
  try {
    open_sqlite(path);
    FAIL() << "expected base::error";
  } catch (const base::error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find("create its directory"), std::string::npos) << what;
  }
}

report::report make_report(const std::string& jid, const std::string& minion, int64_t started,
                           report::run_status status) {
  report::report r;
  r.jid = jid;
  r.minion = minion;
  r.fun = "state.apply";
  r.started_ms = started;
  r.duration_ms = 12.5;
  r.run_time_ms = 11.25;
  r.status = status;
  r.test = status == report::run_status::changed && minion == "db1";
  r.retcode = status == report::run_status::failed ? 2 : 0;
  r.counts = {3, status == report::run_status::failed ? 1u : 0u, 1, 0, 4};
  r.timings = {{"file", {2, 10.0}}, {"cmd", {2, 1.25}}};
  if (status == report::run_status::failed) r.errors = {"Rendering SLS failed: line 1"};
  r.ret = nlohmann::ordered_json::object();
  r.ret["test_|-b_|-b_|-nop"] = {{"result", true}, {"__run_num__", 0}};
  r.ret["test_|-a_|-a_|-nop"] = {{"result", true}, {"__run_num__", 1}};
  return r;
}

std::vector<std::string> keys_of(const std::vector<report::report>& reports) {
  std::vector<std::string> out;
  for (const auto& r : reports) out.push_back(r.minion + "@" + r.jid);
  return out;
}

TEST_P(store_test, reports_are_stored_once_and_shown_with_their_return) {
  auto s = open_store();
  using report::run_status;
  auto first = make_report("j1", "web1", 1000, run_status::failed);
  EXPECT_EQ(s->add_reports({first, make_report("j1", "web2", 1001, run_status::changed)}), 2u);
  // A re-sent return: the first report stays.
  auto again = make_report("j1", "web1", 5000, run_status::unchanged);
  EXPECT_EQ(s->add_reports({again}), 0u);

  auto got = s->get_report("j1", "web1");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->fun, "state.apply");
  EXPECT_EQ(got->started_ms, 1000);
  EXPECT_DOUBLE_EQ(got->duration_ms, 12.5);
  EXPECT_DOUBLE_EQ(got->run_time_ms, 11.25);
  EXPECT_EQ(got->status, run_status::failed);
  EXPECT_FALSE(got->test);
  EXPECT_EQ(got->retcode, 2);
  EXPECT_EQ(got->counts, (report::tally{3, 1, 1, 0, 4}));
  EXPECT_EQ(got->timings, first.timings);
  EXPECT_EQ(got->errors, first.errors);
  // The return in the minion's key order.
  EXPECT_EQ(got->ret.dump(), first.ret.dump());
  EXPECT_FALSE(s->get_report("j1", "web3").has_value());
  EXPECT_FALSE(s->get_report("j2", "web1").has_value());
  EXPECT_EQ(s->check().rows.at("reports"), 2);
  // Another process sees them (the CLI against a running master).
  EXPECT_EQ(open_store()->list_reports({}).size(), 2u);
}

TEST_P(store_test, report_list_filters_and_order) {
  auto s = open_store();
  using report::run_status;
  s->add_reports({make_report("j1", "web1", 1000, run_status::changed),
                  make_report("j1", "web2", 1010, run_status::failed),
                  make_report("j1", "db1", 1005, run_status::changed),
                  make_report("j2", "web1", 2000, run_status::unchanged),
                  make_report("j2", "web10", 2000, run_status::failed),
                  make_report("j3", "w*b", 3000, run_status::unchanged)});
  auto list = [&](report_query q) { return keys_of(s->list_reports(q)); };
  using v = std::vector<std::string>;
  // Newest first; a tie in start goes to the later jid, then the later minion.
  EXPECT_EQ(list({}), (v{"w*b@j3", "web10@j2", "web1@j2", "web2@j1", "db1@j1", "web1@j1"}));
  EXPECT_EQ(list({.limit = 2}), (v{"w*b@j3", "web10@j2"}));
  EXPECT_EQ(list({.limit = 0}), v{});
  EXPECT_EQ(list({.minion = "web1"}), (v{"web1@j2", "web1@j1"}));
  EXPECT_EQ(list({.minion = "web1*"}), (v{"web10@j2", "web1@j2", "web1@j1"}));
  EXPECT_EQ(list({.minion = "web?"}), (v{"web1@j2", "web2@j1", "web1@j1"}));
  EXPECT_EQ(list({.minion = "web[2-9]"}), (v{"web2@j1"}));
  EXPECT_EQ(list({.minion = "[!w]*"}), (v{"db1@j1"}));
  EXPECT_EQ(list({.minion = "*1"}), (v{"web1@j2", "db1@j1", "web1@j1"}));
  // Quoted wildcards are themselves; a glob of characters that regular
  // expressions read specially matches them literally.
  EXPECT_EQ(list({.minion = "w\\*b"}), (v{"w*b@j3"}));
  EXPECT_EQ(list({.minion = "w[*]b"}), (v{"w*b@j3"}));
  EXPECT_EQ(list({.minion = "we.1"}), v{});
  EXPECT_EQ(list({.minion = "nobody*"}), v{});
  EXPECT_EQ(list({.status = run_status::failed}), (v{"web10@j2", "web2@j1"}));
  EXPECT_EQ(list({.status = run_status::unchanged}), (v{"w*b@j3", "web1@j2"}));
  EXPECT_EQ(list({.since_ms = 2000}), (v{"w*b@j3", "web10@j2", "web1@j2"}));
  EXPECT_EQ(list({.minion = "web*", .status = run_status::failed, .since_ms = 1500}),
            (v{"web10@j2"}));
  // Listed without their returns; every other field is there.
  auto rows = s->list_reports({.minion = "db1"});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(rows[0].ret.is_null());
  EXPECT_TRUE(rows[0].test);
  EXPECT_EQ(rows[0].counts.total, 4u);
  EXPECT_EQ(rows[0].timings.at("cmd"), (report::module_timing{2, 1.25}));
}

TEST_P(store_test, last_report_per_minion) {
  auto s = open_store();
  using report::run_status;
  // Two of web1's in one batch, the later first; web2's later run is
  // unchanged after a failed one.
  s->add_reports({make_report("j3", "web1", 3000, run_status::changed),
                  make_report("j1", "web1", 1000, run_status::failed),
                  make_report("j1", "web2", 1000, run_status::failed)});
  s->add_reports({make_report("j2", "web2", 2000, run_status::unchanged)});
  // An older report arriving late (a minion re-sending after an outage)
  // does not replace the last one.
  s->add_reports({make_report("j0", "web2", 500, run_status::failed)});
  using v = std::vector<std::string>;
  auto last = [&](report_query q) {
    q.last = true;
    return keys_of(s->list_reports(q));
  };
  EXPECT_EQ(last({}), (v{"web1@j3", "web2@j2"}));
  EXPECT_EQ(last({.minion = "web2"}), (v{"web2@j2"}));
  EXPECT_EQ(last({.minion = "w*2"}), (v{"web2@j2"}));
  // Minions whose last run failed: none now (web2 failed before, not last).
  EXPECT_EQ(last({.status = run_status::failed}), v{});
  EXPECT_EQ(last({.status = run_status::changed}), (v{"web1@j3"}));
  EXPECT_EQ(last({.since_ms = 2500}), (v{"web1@j3"}));
  EXPECT_EQ(last({.limit = 1}), (v{"web1@j3"}));
  // A tie in start goes to the later jid.
  s->add_reports({make_report("j2b", "web2", 2000, run_status::failed)});
  EXPECT_EQ(last({.status = run_status::failed}), (v{"web2@j2b"}));
  // brief: the same reports without timings and errors.
  auto full = s->list_reports({.minion = "web2", .last = true});
  auto brief = s->list_reports({.minion = "web2", .last = true, .brief = true});
  ASSERT_EQ(full.size(), 1u);
  ASSERT_EQ(brief.size(), 1u);
  EXPECT_FALSE(full[0].errors.empty());
  EXPECT_FALSE(full[0].timings.empty());
  EXPECT_TRUE(brief[0].errors.empty());
  EXPECT_TRUE(brief[0].timings.empty());
  EXPECT_EQ(brief[0].status, full[0].status);
  EXPECT_EQ(brief[0].started_ms, full[0].started_ms);
  EXPECT_EQ(brief[0].counts.total, full[0].counts.total);
}

TEST_P(store_test, report_purge_keeps_each_minions_latest) {
  auto s = open_store();
  using report::run_status;
  s->add_reports({make_report("j1", "web1", 1000, run_status::changed),
                  make_report("j2", "web1", 2000, run_status::changed),
                  make_report("j3", "web1", 3000, run_status::changed),
                  make_report("j1", "web2", 1000, run_status::failed)});
  EXPECT_EQ(s->purge_reports_before(2500), 2u);
  using v = std::vector<std::string>;
  // web2's only report is its last run, older than the cutoff or not.
  EXPECT_EQ(keys_of(s->list_reports({})), (v{"web1@j3", "web2@j1"}));
  EXPECT_EQ(s->purge_reports_before(10000), 0u);
  EXPECT_FALSE(s->get_report("j2", "web1").has_value());
  // A newer run makes the old last one purgeable.
  s->add_reports({make_report("j4", "web2", 4000, run_status::unchanged)});
  EXPECT_EQ(s->purge_reports_before(3500), 1u);
  EXPECT_EQ(keys_of(s->list_reports({})), (v{"web2@j4", "web1@j3"}));
  EXPECT_EQ(keys_of(s->list_reports({.last = true})), (v{"web2@j4", "web1@j3"}));
}

// A run of two states under one ID (pkg and service) and one other.
report::report nginx_run(const std::string& jid, const std::string& minion, int64_t started,
                         std::optional<bool> service_result, bool changed) {
  auto r = make_report(jid, minion, started, report::run_status::changed);
  r.ret = nlohmann::ordered_json::object();
  r.ret["pkg_|-nginx_|-nginx_|-installed"] = {
      {"result", true},    {"changes", nlohmann::json::object()},
      {"__id__", "nginx"}, {"__sls__", "web"},
      {"name", "nginx"},   {"__run_num__", 0}};
  nlohmann::json service = {
      {"changes", changed ? nlohmann::json{{"nginx", true}} : nlohmann::json::object()},
      {"__id__", "nginx"},
      {"__sls__", "web"},
      {"name", "nginx"},
      {"__run_num__", 1}};
  service["result"] = service_result ? nlohmann::json(*service_result) : nlohmann::json();
  r.ret["service_|-nginx_|-nginx_|-running"] = service;
  r.ret["file_|-motd_|-/etc/motd_|-managed"] = {
      {"result", true}, {"__id__", "motd"}, {"__sls__", "base"}, {"__run_num__", 2}};
  return r;
}

TEST_P(store_test, state_results_by_state_id) {
  auto s = open_store();
  s->add_reports({nginx_run("j1", "web1", 1000, true, true),
                  nginx_run("j1", "web2", 1001, false, false),
                  nginx_run("j2", "web1", 2000, std::nullopt, true),
                  make_report("j2", "db1", 2000, report::run_status::unchanged)});
  // A re-sent return indexes nothing twice.
  s->add_reports({nginx_run("j1", "web1", 1000, false, false)});
  auto keys = [&](state_query q) {
    std::vector<std::string> out;
    for (const auto& r : s->list_state_results(q)) {
      out.push_back(r.minion + "@" + r.jid + ":" + r.function + "=" +
                    (r.result ? (*r.result ? "True" : "False") : "None") + (r.changes ? "+" : ""));
    }
    return out;
  };
  using v = std::vector<std::string>;
  // Newest run first; within a run, by tag (descending: the index's order).
  EXPECT_EQ(keys({.id = "nginx"}),
            (v{"web1@j2:service.running=None+", "web1@j2:pkg.installed=True",
               "web2@j1:service.running=False", "web2@j1:pkg.installed=True",
               "web1@j1:service.running=True+", "web1@j1:pkg.installed=True"}));
  EXPECT_EQ(keys({.id = "motd", .minion = "web2"}), (v{"web2@j1:file.managed=True"}));
  EXPECT_EQ(keys({.id = "nginx", .minion = "web[2-9]", .since_ms = 1001}),
            (v{"web2@j1:service.running=False", "web2@j1:pkg.installed=True"}));
  EXPECT_EQ(keys({.id = "nginx", .since_ms = 1500, .limit = 1}),
            (v{"web1@j2:service.running=None+"}));
  EXPECT_EQ(keys({.id = "nginx", .last = true}),
            (v{"web1@j2:service.running=None+", "web1@j2:pkg.installed=True",
               "web2@j1:service.running=False", "web2@j1:pkg.installed=True"}));
  // make_report's states are ids a and b; nobody ran "nope".
  EXPECT_EQ(keys({.id = "a"}), (v{"db1@j2:test.nop=True"}));
  EXPECT_EQ(keys({.id = "nope"}), v{});
  auto rows = s->list_state_results({.id = "nginx", .minion = "web2", .limit = 1});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].fun, "state.apply");
  EXPECT_EQ(rows[0].started_ms, 1001);
  EXPECT_EQ(rows[0].name, "nginx");
  EXPECT_EQ(rows[0].sls, "web");
  EXPECT_EQ(rows[0].state_id, "nginx");
  // Purged with their reports; each minion's latest stays.
  EXPECT_EQ(s->purge_reports_before(1500), 1u);  // web1@j1
  EXPECT_EQ(keys({.id = "nginx", .minion = "web1"}),
            (v{"web1@j2:service.running=None+", "web1@j2:pkg.installed=True"}));
  EXPECT_EQ(keys({.id = "nginx", .minion = "web2"}).size(), 2u);
}

TEST_P(store_test, minion_data_query_reads_chosen_grains) {
  auto s = open_store();
  json grains = {{"os", "Debian"},
                 {"osrelease", "12"},
                 {"nothing", nullptr},
                 {"ip4_interfaces", {{"eth0", {"10.0.0.1"}}}},
                 {"cpu_flags", {"fpu", "vme"}}};
  minion_data_update a;
  a.id = "a";
  a.grains = grains;
  a.pillar = json{{"secret", "x"}};
  a.last_seen = 100;
  a.master = "m1";
  minion_data_update b;  // never sent grains
  b.id = "b";
  b.last_seen = 50;
  b.master = "m1";
  s->put_minion_data({a, b});
  auto rows = s->query_minion_data(
      {.grains = std::vector<std::string>{"os", "ip4_interfaces", "nothing", "absent"},
       .pillar = false});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].id, "a");
  ASSERT_TRUE(rows[0].grains.has_value());
  EXPECT_EQ(*rows[0].grains,
            (json{{"os", "Debian"}, {"ip4_interfaces", {{"eth0", {"10.0.0.1"}}}}}));
  EXPECT_FALSE(rows[0].pillar.has_value());
  EXPECT_EQ(rows[0].last_seen, 100);
  EXPECT_EQ(rows[0].master, "m1");
  EXPECT_EQ(rows[1].id, "b");
  EXPECT_FALSE(rows[1].grains.has_value());
  // One key; none (grains cached but nothing asked: still cached).
  rows = s->query_minion_data({.grains = std::vector<std::string>{"osrelease"}});
  EXPECT_EQ(*rows[0].grains, (json{{"osrelease", "12"}}));
  EXPECT_EQ(*rows[0].pillar, (json{{"secret", "x"}}));
  rows = s->query_minion_data({.grains = std::vector<std::string>{}, .pillar = false});
  EXPECT_EQ(*rows[0].grains, json::object());
  EXPECT_FALSE(rows[1].grains.has_value());
  // A key the backend cannot name in a path still reads.
  rows = s->query_minion_data({.grains = std::vector<std::string>{"o\"s", "os"}});
  EXPECT_EQ(*rows[0].grains, (json{{"os", "Debian"}}));
  // Everything.
  rows = s->query_minion_data({});
  EXPECT_EQ(*rows[0].grains, grains);
  // New grains replace the old ones key by key; the same grains again
  // change nothing; a forgotten minion is gone.
  a.grains = json{{"os", "Ubuntu"}, {"kernel", "Linux"}};
  s->put_minion_data({a});
  s->put_minion_data({a});
  rows = s->query_minion_data({.grains = std::vector<std::string>{"os", "osrelease", "kernel"}});
  EXPECT_EQ(*rows[0].grains, (json{{"os", "Ubuntu"}, {"kernel", "Linux"}}));
  b.grains = json::object();
  s->put_minion_data({b});
  rows = s->query_minion_data({.grains = std::vector<std::string>{"os"}});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(*rows[1].grains, json::object());
  s->delete_minion_data("a");
  rows = s->query_minion_data({.grains = std::vector<std::string>{"os"}});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].id, "b");
}

TEST(store_glob, translations) {
  EXPECT_EQ(split_glob("web*").prefix, "web");
  EXPECT_TRUE(split_glob("web*").wildcard);
  EXPECT_EQ(split_glob("w\\*b").prefix, "w*b");
  EXPECT_FALSE(split_glob("w\\*b").wildcard);
  EXPECT_EQ(split_glob("[ab]x").prefix, "");
  EXPECT_EQ(prefix_end("web"), "wec");
  EXPECT_EQ(prefix_end("a\xff"), "b");
  EXPECT_EQ(prefix_end("\xff"), "");
  EXPECT_EQ(sqlite_glob("w?b[!0-3]*"), "w?b[^0-3]*");
  EXPECT_EQ(sqlite_glob("a\\*b["), "a[*]b[[]");
  EXPECT_EQ(posix_regex("w?b[!0-3]*"), "^w.b[^0-3].*$");
  EXPECT_EQ(posix_regex("a.b(c)+\\*["), "^a\\.b\\(c\\)\\+\\*\\[$");
}

TEST(sqlite_memory_test, in_memory_database_works) {
  auto s = open_sqlite(":memory:");
  s->add_job(make_job("j1", 1));
  EXPECT_EQ(s->add_returns({make_return("j1", "m1", 1), make_return("j1", "m1", 2)}), 1u);
  EXPECT_EQ(s->list_jobs(5).size(), 1u);
}

}  // namespace
}  // namespace brine::store
