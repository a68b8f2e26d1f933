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
#include "support/temp_dir.h"
#include "store/sqlite/sqlite_store.h"

namespace brine::store {
namespace {

using nlohmann::json;
using test::temp_dir;


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

job_record make_job(const std::string& jid, int64_t created) {
  job_record j;
  j.jid = jid;
  j.fun = "test.ping";
  j.args = json::array({"a", 1});
  j.kwargs = json::object({{"timeout", 5}});
  j.target = "web*";
  j.tgt_type = "glob";
  j.user = "root";
  j.minions = {"web1", "web2"};
  j.master = "master1";
  j.created = created;
  j.deliver_by = created + 60;
  return j;
}

return_record make_return(const std::string& jid, const std::string& minion, json ret,
                          int64_t stamp = 1000) {
  return_record r;
  r.jid = jid;
  r.minion = minion;
  r.fun = "test.ping";
  r.ret = std::move(ret);
  r.success = true;
  r.retcode = 0;
  r.stamp = stamp;
  return r;
}

key_record make_key(const std::string& id, const std::string& fp, key_state state,
                    int64_t updated = 1) {
  return key_record{id, state, "-----BEGIN PUBLIC KEY-----\n" + fp + "\n-----END PUBLIC KEY-----\n",
                    fp, updated};
}

void expect_job_eq(const job_record& a, const job_record& b) {
  EXPECT_EQ(a.jid, b.jid);
  EXPECT_EQ(a.fun, b.fun);
  EXPECT_EQ(a.args, b.args);
  EXPECT_EQ(a.kwargs, b.kwargs);
  EXPECT_EQ(a.target, b.target);
  EXPECT_EQ(a.tgt_type, b.tgt_type);
  EXPECT_EQ(a.user, b.user);
  EXPECT_EQ(a.minions, b.minions);
  EXPECT_EQ(a.master, b.master);
  EXPECT_EQ(a.created, b.created);
  EXPECT_EQ(a.deliver_by, b.deliver_by);
}

std::vector<std::string> jids_of(const std::vector<job_record>& jobs) {
  std::vector<std::string> out;
  out.reserve(jobs.size());
  for (const auto& j : jobs) out.push_back(j.jid);
  return out;
}

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

TEST_F(sqlite_store_test, keys_put_replace_delete_load) {
  auto s = open_sqlite(path_);
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

TEST_F(sqlite_store_test, job_add_get) {
  auto s = open_sqlite(path_);
  auto job = make_job("20240101000000000001", 1700000000);
  s->add_job(job);
  auto got = s->get_job(job.jid);
  ASSERT_TRUE(got.has_value());
  expect_job_eq(*got, job);
  EXPECT_FALSE(s->get_job("20240101000000000002").has_value());
}

TEST_F(sqlite_store_test, job_added_twice_keeps_the_first) {
  auto s = open_sqlite(path_);
  auto job = make_job("j1", 100);
  s->add_job(job);
  auto again = job;
  again.fun = "cmd.run";
  s->add_job(again);
  EXPECT_EQ(s->get_job("j1")->fun, "test.ping");
  EXPECT_EQ(s->list_jobs(10).size(), 1u);
}

TEST_F(sqlite_store_test, list_jobs_newest_first_with_limit) {
  auto s = open_sqlite(path_);
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

TEST_F(sqlite_store_test, first_return_wins) {
  auto s = open_sqlite(path_);
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

TEST_F(sqlite_store_test, return_fields_round_trip) {
  auto s = open_sqlite(path_);
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

TEST_F(sqlite_store_test, batch_of_ten_thousand_returns) {
  auto s = open_sqlite(path_);
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

TEST_F(sqlite_store_test, purge_removes_old_jobs_their_returns_and_old_orphans) {
  auto s = open_sqlite(path_);
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

TEST_F(sqlite_store_test, undelivered_and_returns_exclude_each_other) {
  auto s = open_sqlite(path_);
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

TEST_F(sqlite_store_test, new_jobs_are_unsettled_until_settled) {
  auto s = open_sqlite(path_);
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
  s = open_sqlite(path_);
  EXPECT_EQ(jids_of(s->unsettled_jobs()), (std::vector<std::string>{"j1", "j3"}));
}

TEST_F(sqlite_store_test, purge_takes_undelivered_records_along) {
  auto s = open_sqlite(path_);
  s->add_job(make_job("old", 100));
  s->add_job(make_job("new", 300));
  s->add_undelivered({{"old", "web1", "not connected", 110}, {"new", "web1", "not connected", 310}});
  EXPECT_EQ(s->purge_jobs_before(250), 1u);
  EXPECT_TRUE(s->get_undelivered("old").empty());
  EXPECT_EQ(s->get_undelivered("new").size(), 1u);
}

TEST_F(sqlite_store_test, minion_data_cache_round_trips_field_by_field) {
  {
    auto s = open_sqlite(path_);
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
  }
  auto s = open_sqlite(path_);  // survives a restart
  auto all = s->load_minion_data();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].id, "db1");
  EXPECT_EQ(all[0].grains, json({{"os", "Rocky"}}));
  EXPECT_EQ(all[0].pillar, json({{"role", "db"}}));
  EXPECT_EQ(all[0].last_seen, 0);
  EXPECT_EQ(all[1].id, "web1");
  EXPECT_EQ((*all[1].grains)["ipv4"][1], "10.0.0.5");
  EXPECT_FALSE(all[1].pillar.has_value());
  EXPECT_EQ(all[1].last_seen, 200);
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
PRAGMA application_id=)sql" + std::to_string(k_sqlite_application_id) + R"sql(;
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
}

TEST_F(sqlite_store_test, data_persists_across_reopen) {
  auto job = make_job("j1", 500);
  {
    auto s = open_sqlite(path_);
    s->put_key(make_key("web1", "aa:01", key_state::accepted, 7));
    s->add_job(job);
    s->add_returns({make_return("j1", "web1", "pong")});
  }
  auto s = open_sqlite(path_);
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

  raw_db raw(path_);
  EXPECT_EQ(raw.scalar("PRAGMA user_version"), std::to_string(k_sqlite_schema_version));
  EXPECT_EQ(raw.scalar("PRAGMA application_id"), std::to_string(k_sqlite_application_id));
  EXPECT_EQ(raw.scalar("PRAGMA journal_mode"), "wal");
}

TEST_F(sqlite_store_test, two_stores_on_one_file_see_each_other) {
  // A master and a CLI process, each with its own connection.
  auto master = open_sqlite(path_);
  auto cli = open_sqlite(path_);

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

TEST_F(sqlite_store_test, two_processes_write_at_once) {
  open_sqlite(path_);  // create the schema before the race
  constexpr size_t k_batches = 100;
  constexpr size_t k_per_batch = 50;
  auto write_all = [&](const std::string& jid) {
    const std::string other = jid == "parent" ? "child" : "parent";
    auto s = open_sqlite(path_);
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

  auto s = open_sqlite(path_);
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

TEST_F(sqlite_store_test, json_values_round_trip) {
  auto s = open_sqlite(path_);
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

TEST_F(sqlite_store_test, invalid_utf8_output_is_stored_not_refused) {
  auto s = open_sqlite(path_);
  // A command printing raw bytes: the batch must still be stored.
  std::string bytes = "ok \xff\xfe end";
  ASSERT_EQ(s->add_returns({make_return("j1", "m1", json::object({{"stdout", bytes}})),
                            make_return("j1", "m2", "fine")}),
            2u);
  auto rets = s->get_returns("j1");
  ASSERT_EQ(rets.size(), 2u);
  EXPECT_EQ(rets[0].ret["stdout"], json("ok \xEF\xBF\xBD\xEF\xBF\xBD end"));  // U+FFFD each
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

TEST(sqlite_memory_test, in_memory_database_works) {
  auto s = open_sqlite(":memory:");
  s->add_job(make_job("j1", 1));
  EXPECT_EQ(s->add_returns({make_return("j1", "m1", 1), make_return("j1", "m1", 2)}), 1u);
  EXPECT_EQ(s->list_jobs(5).size(), 1u);
}

}  // namespace
}  // namespace brine::store
