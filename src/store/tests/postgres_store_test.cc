// What only the PostgreSQL store has: URLs and passwords, its schema
// version, master slots, the change feed, and losing the server. Every
// method's contract is tested against both backends in store_test.cc.
#include "store/postgres/postgres_store.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <latch>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "store/store.h"
#include "store/tests/store_test_util.h"
#include "support/pg_server.h"
#include "support/temp_dir.h"

namespace brine::store {
namespace {

using namespace test_util;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// Whether f() throws store::unreachable (a server to wait for) rather than
// another base::error (a setting to fix).
template <class F>
bool throws_unreachable(F&& f) {
  try {
    f();
  } catch (const unreachable&) {
    return true;
  } catch (const base::error&) {
    return false;
  }
  ADD_FAILURE() << "expected a base::error";
  return false;
}

void write_file(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
}

// Calls f() until it returns without throwing (its last error is reported
// when `timeout` passes first).
template <class F>
auto eventually(F&& f, std::chrono::milliseconds timeout, const std::string& what) {
  auto deadline = clock_type::now() + timeout;
  for (;;) {
    try {
      return f();
    } catch (const base::error& e) {
      if (clock_type::now() > deadline) {
        throw std::runtime_error("timed out waiting for " + what + "; last error: " + e.what());
      }
    }
    std::this_thread::sleep_for(20ms);
  }
}

// The changes a feed delivers until `done` holds for all of them so far;
// fails the test after 10 s.
std::vector<change> collect(change_feed& feed,
                            const std::function<bool(const std::vector<change>&)>& done) {
  std::vector<change> all;
  auto deadline = clock_type::now() + 10s;
  while (!done(all)) {
    if (clock_type::now() > deadline) {
      ADD_FAILURE() << "timed out after 10 s with " << all.size() << " changes";
      break;
    }
    for (auto& c : feed.wait(500ms)) all.push_back(std::move(c));
  }
  return all;
}

// Collects until a keys change for `id` arrives.
std::vector<change> until_key(change_feed& feed, const std::string& id) {
  return collect(feed, [&](const std::vector<change>& all) {
    return std::any_of(all.begin(), all.end(),
                       [&](const change& c) { return c.what == change::kind::keys && c.id == id; });
  });
}

class postgres_test : public ::testing::Test {
 protected:
  void SetUp() override { use_fresh_postgres_database(pg_, db_); }

  options opts(const std::string& origin = "test") const {
    options o;
    o.url = pg_->url(db_);
    o.password_file = pg_->password_file();
    o.origin = origin;
    // A lost connection here is a server stopped on purpose, not a failover.
    o.failover_wait = 1s;
    return o;
  }
  std::unique_ptr<store> open_store(const std::string& origin = "test") const {
    return open(opts(origin));
  }
  std::string psql(const std::string& sql) { return pg_->psql(sql, db_); }

  test::temp_dir dir_;
  test::pg_server* pg_ = nullptr;
  std::string db_;
};

TEST(postgres_schema_problem_test, says_what_to_run) {
  EXPECT_EQ(postgres_schema_problem(1, 1), "");
  EXPECT_EQ(postgres_schema_problem(0, 1),
            "the database has no brine schema yet; run `brine store migrate`");
  EXPECT_EQ(postgres_schema_problem(1, 3),
            "schema version 1 is behind this brine (3); run `brine store migrate`");
  EXPECT_EQ(postgres_schema_problem(7, 1),
            "schema version 7 is newer than this brine supports (1); upgrade brine");
}

TEST_F(postgres_test, password_file_readable_by_others_is_refused) {
  std::string path = dir_.file("pw");
  write_file(path, pg_->password() + "\n", 0644);
  auto o = opts();
  o.password_file = path;
  std::string what = error_of([&] { open(o); });
  EXPECT_NE(what.find("store_password_file " + path + " has mode 0644; chmod 600 " + path),
            std::string::npos)
      << what;
  EXPECT_NE(what.find(o.url), std::string::npos) << what;
  EXPECT_EQ(what.find(pg_->password()), std::string::npos) << what;

  ::chmod(path.c_str(), 0640);
  EXPECT_NE(error_of([&] { open(o); }).find("has mode 0640"), std::string::npos);
  // Owner-only, it works; a trailing newline (or none) is not part of it.
  ::chmod(path.c_str(), 0600);
  EXPECT_TRUE(open(o)->shared());
  write_file(path, pg_->password(), 0600);
  EXPECT_TRUE(open(o)->shared());
}

TEST_F(postgres_test, missing_or_empty_password_file_is_refused) {
  auto o = opts();
  o.password_file = dir_.file("nope");
  std::string what = error_of([&] { open(o); });
  EXPECT_NE(what.find("cannot read store_password_file " + o.password_file), std::string::npos)
      << what;
  EXPECT_NE(what.find("No such file"), std::string::npos) << what;
  write_file(o.password_file, "\n", 0600);
  what = error_of([&] { open(o); });
  EXPECT_NE(what.find("is empty"), std::string::npos) << what;
}

TEST_F(postgres_test, password_in_the_url_is_refused_and_never_shown) {
  const std::string secret = "hunter2-" + pg_->password();
  const std::string base = "postgresql://brine";
  const std::string at = "@127.0.0.1:" + std::to_string(pg_->port()) + "/" + db_;
  for (const std::string& url :
       {base + ":" + secret + at, base + ":" + secret + at + "?sslmode=disable",
        base + at + "?password=" + secret, base + at + "?sslmode=disable&password=" + secret,
        "postgres://brine:" + secret + at}) {
    auto o = opts();
    o.url = url;
    std::string what = error_of([&] { open(o); });
    EXPECT_NE(what.find("store_password_file"), std::string::npos) << what;
    EXPECT_EQ(what.find(secret), std::string::npos) << what;
    EXPECT_EQ(what.find("hunter2"), std::string::npos) << what;
    // The URL without its password still says which database.
    EXPECT_NE(what.find("127.0.0.1:" + std::to_string(pg_->port()) + "/" + db_), std::string::npos)
        << what;
  }
}

TEST_F(postgres_test, wrong_password_names_user_and_url) {
  const std::string wrong = "not-the-password-4711";
  std::string path = dir_.file("pw");
  write_file(path, wrong + "\n", 0600);
  auto o = opts();
  o.password_file = path;
  std::string what = error_of([&] { open(o); });
  EXPECT_NE(what.find("password authentication failed for user \"brine\""), std::string::npos)
      << what;
  EXPECT_NE(what.find(o.url), std::string::npos) << what;
  EXPECT_NE(what.find("store_password_file"), std::string::npos) << what;
  EXPECT_EQ(what.find(wrong), std::string::npos) << what;
  EXPECT_EQ(what.find(pg_->password()), std::string::npos) << what;
  EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  EXPECT_FALSE(throws_unreachable([&] { open(o); }));  // a setting to fix, not a wait
}

TEST_F(postgres_test, errors_never_hold_the_password) {
  std::vector<options> failing;
  auto o = opts();
  o.url = pg_->url("no_such_database");
  failing.push_back(o);
  o = opts();
  o.url = "postgresql://nobody@127.0.0.1:" + std::to_string(pg_->port()) + "/" + db_ +
          "?sslmode=disable";
  failing.push_back(o);
  for (const auto& f : failing) {
    std::string what = error_of([&] { open(f); });
    EXPECT_NE(what.find(f.url), std::string::npos) << what;
    EXPECT_EQ(what.find(pg_->password()), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  EXPECT_NE(
      error_of([&] { open(failing[0]); }).find("database \"no_such_database\" does not exist"),
      std::string::npos);
  // A statement that fails on a live connection.
  auto s = open_store();
  psql("DROP TABLE jobs");
  std::string what = error_of([&] { s->list_jobs(1); });
  EXPECT_NE(what.find("cannot list jobs"), std::string::npos) << what;
  EXPECT_NE(what.find("relation \"jobs\" does not exist"), std::string::npos) << what;
  EXPECT_NE(what.find(pg_->url(db_)), std::string::npos) << what;
  EXPECT_EQ(what.find(pg_->password()), std::string::npos) << what;
}

TEST_F(postgres_test, broken_urls_say_what_is_wrong) {
  const std::string host = "postgresql://brine@127.0.0.1:";
  struct bad {
    std::string url;
    std::string says;
  };
  const std::vector<bad> cases = {
      {host + "99999/db", "port must be 1..65535, got '99999'"},
      {host + "0/db", "port must be 1..65535, got '0'"},
      {host + "port/db", "port must be 1..65535, got 'port'"},
      {host + "5432/", "has no database name"},
      {host + "5432", "has no database name"},
      {host + "5432/db?bogus=1", "unknown parameter 'bogus'"},
      {host + "5432/db?sslmode", "missing key/value separator"},
      {host + "5432/d%zzb", "invalid percent-encoded token"},
      {host + "5432/db#x", "fragment"},
      {host + "5432/db?client_encoding=LATIN1", "client_encoding must be UTF8"},
      {"postgresql://brine@[::1/db", "matching \"]\" in IPv6 host address"},
      {"postgresql://brine@::1:5432/db", "an IPv6 host needs brackets"},
      {"postgresql://brine@h1:5432,h2:99999/db", "port must be 1..65535, got '99999'"},
      {"mysql://brine@127.0.0.1:5432/db", "unknown scheme 'mysql'"},
      {"postgresql:127.0.0.1/db", "is not a URL"},
  };
  for (const auto& c : cases) {
    auto o = opts();
    o.url = c.url;
    std::string what = error_of([&] { open_postgres(o); });
    EXPECT_NE(what.find(c.says), std::string::npos) << c.url << " -> " << what;
    EXPECT_NE(what.find("store " + c.url + ": "), std::string::npos) << what;
  }
  // Not a URL, with an '@' that may follow a password: only the scheme is shown.
  auto o_at = opts();
  o_at.url = "postgresql:brine:secret@127.0.0.1/db";
  EXPECT_EQ(error_of([&] { open_postgres(o_at); }),
            "store postgresql:...: is not a URL; write postgresql://USER@HOST:PORT/DATABASE");
  // The usage is shown where the form is wrong.
  EXPECT_NE(error_of([&] {
              auto o = opts();
              o.url = host + "5432";
              open(o);
            }).find("write postgresql://USER@HOST:PORT/DATABASE"),
            std::string::npos);
  // postgres:// is a synonym; a known libpq parameter passes through.
  auto o = opts();
  o.url = "postgres://brine@127.0.0.1:" + std::to_string(pg_->port()) + "/" + db_ +
          "?sslmode=disable&connect_timeout=3&application_name=brine-test";
  auto s = open(o);
  EXPECT_EQ(s->name(), o.url);
  EXPECT_EQ(psql("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'brine-test'"),
            "1");
}

TEST_F(postgres_test, several_hosts_reach_the_one_that_takes_writes) {
  // libpq tries the hosts in order: a dead first one is skipped.
  int dead = test::unused_port();
  auto o = opts();
  o.url = "postgresql://brine@127.0.0.1:" + std::to_string(dead) +
          ",127.0.0.1:" + std::to_string(pg_->port()) + "/" + db_ + "?sslmode=disable";
  auto s = open(o);
  EXPECT_EQ(s->name(), o.url);
  s->add_job(make_job("j1", 1));
  EXPECT_TRUE(s->get_job("j1").has_value());
  // target_session_attrs=read-write is added for several hosts: a database
  // whose sessions are read-only (as a standby's) is passed over, and that
  // is worth waiting for (a failover under way), naming every host.
  psql("ALTER DATABASE " + db_ + " SET default_transaction_read_only = on");
  std::string what = error_of([&] { open(o); });
  EXPECT_NE(what.find("cannot connect to 127.0.0.1:" + std::to_string(dead) +
                      ", 127.0.0.1:" + std::to_string(pg_->port())),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("session is read-only"), std::string::npos) << what;
  EXPECT_TRUE(throws_unreachable([&] { open(o); }));
  // With one host and no target_session_attrs, the session opens read-only;
  // its first write finds out, and the store reconnects rather than stays.
  auto one = opts();
  one.url = pg_->url(db_);
  auto ro = open(one);
  EXPECT_TRUE(
      throws_unreachable([&] { ro->put_key(make_key("k1", "aa:01", key_state::pending)); }));
  pg_->psql("ALTER DATABASE " + db_ + " RESET default_transaction_read_only", "postgres");
  ro->put_key(make_key("k1", "aa:01", key_state::pending));
  EXPECT_EQ(ro->load_keys("k1").size(), 1u);
}

TEST_F(postgres_test, a_write_rides_out_a_lost_connection) {
  auto s = open_store();
  const std::string others =
      "SELECT count(*) FROM (SELECT pg_terminate_backend(pid, 5000) FROM "
      "pg_stat_activity WHERE datname = '" +
      db_ + "' AND pid <> pg_backend_pid()) t";
  // The connection dies while idle: it connects again (a failover's
  // promoted standby, here the same server) and the write is done; a job
  // whose INSERT was never sent is simply sent on the new connection.
  EXPECT_EQ(psql(others), "1");
  s->add_job(make_job("j1", 1));
  s->settle_job("j1");
  EXPECT_EQ(psql(others), "1");
  s->put_key(make_key("k1", "aa:01", key_state::pending));
  EXPECT_TRUE(s->get_job("j1").has_value());
  EXPECT_EQ(s->load_keys("k1").size(), 1u);
}

// The backend of this database waiting on `wait_event` (the store's, in
// the middle of a statement), terminated; fails the test after 10 s.
void terminate_waiting(test::pg_server& pg, const std::string& db, const std::string& wait_event) {
  const std::string find = "SELECT pid FROM pg_stat_activity WHERE datname = '" + db +
                           "' AND wait_event = '" + wait_event + "'";
  auto deadline = clock_type::now() + 10s;
  std::string pid;
  while ((pid = pg.psql(find, db)).empty()) {
    ASSERT_LT(clock_type::now(), deadline) << "no backend waited on " << wait_event;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(pg.psql("SELECT pg_terminate_backend(" + pid + ", 5000)", db), "t");
}

TEST_F(postgres_test, a_job_whose_answer_was_lost_is_what_its_row_says_once_the_store_answers) {
  auto o = opts();
  o.failover_wait = 10s;
  auto other = open_store("other");
  auto feed = other->changes();

  // Committed, answer lost: a synchronous standby that never comes holds
  // the COMMIT after it is on disk; terminating the backend then ends the
  // wait (the transaction has committed locally) and the connection. (The
  // test server turns synchronous_commit off; this database's sessions
  // turn it on.)
  psql("ALTER DATABASE " + db_ + " SET synchronous_commit = on");
  struct reset_sync {
    test::pg_server& pg;
    ~reset_sync() {
      pg.psql("ALTER SYSTEM RESET synchronous_standby_names");
      pg.psql("SELECT pg_reload_conf()");
    }
  } reset{*pg_};
  pg_->psql("ALTER SYSTEM SET synchronous_standby_names = 'brine_test_nobody'");
  pg_->psql("SELECT pg_reload_conf()");
  auto deadline = clock_type::now() + 10s;
  while (pg_->psql("SHOW synchronous_standby_names") != "brine_test_nobody") {
    ASSERT_LT(clock_type::now(), deadline) << "the server did not reload its configuration";
    std::this_thread::sleep_for(20ms);
  }
  auto s = open(o);
  std::string error;
  std::thread committed([&] {
    try {
      s->add_job(make_job("j1", 1));
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  terminate_waiting(*pg_, db_, "SyncRep");
  // (Before the join: should nothing have been terminated, this ends the
  // wait.)
  pg_->psql("ALTER SYSTEM RESET synchronous_standby_names");
  pg_->psql("SELECT pg_reload_conf()");
  committed.join();
  // The row is there: the publish was recorded, and the caller is told so.
  EXPECT_EQ(error, "");
  EXPECT_TRUE(s->get_job("j1").has_value());

  // Cut off before its COMMIT: a trigger holds the first INSERT of stall1
  // (a sequence's odd values: nextval is not rolled back) until the
  // backend is terminated. The row is not there once the store answers, so
  // the INSERT did not commit: it is sent again, and the job is recorded.
  psql("CREATE SEQUENCE brine_test_stall_seq");
  psql("GRANT USAGE ON SEQUENCE brine_test_stall_seq TO PUBLIC");
  psql(
      "CREATE FUNCTION brine_test_stall() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
      "IF NEW.jid LIKE 'stall%' AND nextval('brine_test_stall_seq') % 2 = 1 THEN "
      "PERFORM pg_sleep(60); END IF; RETURN NEW; END $$");
  psql(
      "CREATE TRIGGER brine_test_stall BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION "
      "brine_test_stall()");
  std::thread cut([&] {
    try {
      s->add_job(make_job("stall1", 2));
      error = "";
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  terminate_waiting(*pg_, db_, "PgSleep");
  cut.join();
  EXPECT_EQ(error, "");
  EXPECT_TRUE(s->get_job("stall1").has_value());
  EXPECT_EQ(psql("SELECT last_value FROM brine_test_stall_seq"), "2");  // inserted twice

  // With no wait for the store to answer again, the outcome stays unknown:
  // said so, and nothing is undone (get_job tells later).
  auto quick = opts();
  quick.failover_wait = 0ms;
  auto q = open(quick);
  std::thread unknown([&] {
    try {
      q->add_job(make_job("stall2", 3));
      error = "";
    } catch (const outcome_unknown& e) {
      error = e.what();
    } catch (const std::exception& e) {
      error = std::string("not outcome_unknown: ") + e.what();
    }
  });
  terminate_waiting(*pg_, db_, "PgSleep");
  unknown.join();
  EXPECT_NE(error.find("whether job stall2 was recorded is unknown"), std::string::npos) << error;
  EXPECT_NE(error.find("brine job show stall2"), std::string::npos) << error;
  EXPECT_FALSE(q->get_job("stall2").has_value());

  // The other members heard of j1 once: its row's notification, and none
  // for the jobs that were not recorded.
  s->add_job(make_job("j3", 4));
  auto got = collect(*feed, [](const std::vector<change>& all) {
    return std::any_of(all.begin(), all.end(), [](const change& c) {
      return c.what == change::kind::job && c.jid == "j3";
    });
  });
  std::vector<std::string> jobs;
  for (const auto& c : got) {
    if (c.what == change::kind::job) jobs.push_back(c.jid);
  }
  EXPECT_EQ(jobs, (std::vector<std::string>{"j1", "stall1", "j3"}));
}

TEST_F(postgres_test, connection_refused_names_host_and_port) {
  int port = test::unused_port();
  auto o = opts();
  o.url = "postgresql://brine@127.0.0.1:" + std::to_string(port) + "/db?sslmode=disable";
  auto start = clock_type::now();
  std::string what = error_of([&] { open(o); });
  EXPECT_NE(what.find("store " + o.url + ": cannot connect to 127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("Connection refused"), std::string::npos) << what;
  EXPECT_LT(clock_type::now() - start, 5s);
  // A master waits for such a database rather than stopping.
  EXPECT_TRUE(throws_unreachable([&] { open(o); }));
  o = opts();
  o.url = pg_->url("no_such_database");
  EXPECT_FALSE(throws_unreachable([&] { open(o); }));
}

TEST_F(postgres_test, newer_schema_is_refused) {
  open_store();
  psql("UPDATE brine_schema SET version = 7");
  std::string what = error_of([&] { open_store(); });
  EXPECT_NE(what.find("store " + pg_->url(db_) +
                      ": schema version 7 is newer than this brine supports (" +
                      std::to_string(k_postgres_schema_version) + "); upgrade brine"),
            std::string::npos)
      << what;
  // Without migrating, check() still reports it and the rest refuses.
  auto o = opts();
  o.migrate = false;
  auto s = open(o);
  auto st = s->check();
  EXPECT_EQ(st.schema_version, 7);
  EXPECT_EQ(st.code_version, k_postgres_schema_version);
  EXPECT_NE(error_of([&] { s->load_keys(); }).find("upgrade brine"), std::string::npos);
}

TEST_F(postgres_test, without_migrate_an_empty_database_is_left_alone) {
  auto o = opts();
  o.migrate = false;
  auto s = open(o);
  auto st = s->check();
  EXPECT_EQ(st.backend, "postgresql");
  EXPECT_EQ(st.schema_version, 0);
  EXPECT_EQ(st.code_version, k_postgres_schema_version);
  EXPECT_TRUE(st.rows.empty());
  const std::string says = "store " + pg_->url(db_) +
                           ": the database has no brine schema yet; run `brine store migrate`";
  EXPECT_NE(error_of([&] { s->load_keys(); }).find(says), std::string::npos);
  EXPECT_NE(error_of([&] { s->add_job(make_job("j1", 1)); }).find(says), std::string::npos);
  EXPECT_NE(error_of([&] { s->add_returns({make_return("j1", "m1", 1)}); }).find(says),
            std::string::npos);
  EXPECT_NE(error_of([&] { s->claim_master_slot("m"); }).find(says), std::string::npos);
  EXPECT_NE(error_of([&] { s->changes(); }).find(says), std::string::npos);
  EXPECT_EQ(psql("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"), "0");

  // Once migrated (`brine store migrate`), the same store works.
  open_store();
  EXPECT_EQ(s->check().schema_version, k_postgres_schema_version);
  s->add_job(make_job("j1", 1));
  EXPECT_TRUE(s->get_job("j1").has_value());
}

TEST_F(postgres_test, without_migrate_a_database_behind_is_refused_and_migrate_fixes_it) {
  // A version table saying 0: behind this build (which has nothing older
  // than version 1 to migrate from yet).
  psql(
      "SET ROLE brine; CREATE TABLE brine_schema (version integer NOT NULL); "
      "INSERT INTO brine_schema VALUES (0)");
  auto o = opts();
  o.migrate = false;
  auto s = open(o);
  EXPECT_EQ(s->check().schema_version, 0);
  EXPECT_NE(error_of([&] { s->list_jobs(1); }).find("run `brine store migrate`"),
            std::string::npos);
  auto migrated = open_store();
  EXPECT_EQ(migrated->check().schema_version, k_postgres_schema_version);
  EXPECT_EQ(psql("SELECT count(*) FROM brine_schema"), "1");
  EXPECT_TRUE(s->list_jobs(1).empty());
}

TEST_F(postgres_test, a_version_1_database_gets_the_report_tables) {
  // What the brine before reports left: its rows stay, the report tables
  // are added.
  open_store()->add_job(make_job("j1", 1));
  psql(
      "SET ROLE brine; DROP TABLE reports; DROP TABLE last_reports; DROP TABLE file_pins; "
      "DROP TABLE report_states; "
      "ALTER TABLE masters DROP COLUMN cluster_id, DROP COLUMN peer, DROP COLUMN "
      "cluster_finger, DROP COLUMN finger, DROP COLUMN proof, DROP COLUMN seen, DROP COLUMN "
      "stats, DROP COLUMN removed; UPDATE brine_schema SET version = 1");
  auto o = opts();
  o.migrate = false;
  EXPECT_NE(error_of([&] { open(o)->list_reports({}); })
                .find("schema version 1 is behind this brine (" +
                      std::to_string(k_postgres_schema_version) + "); run `brine store migrate`"),
            std::string::npos);
  auto s = open_store();
  EXPECT_EQ(s->check().schema_version, k_postgres_schema_version);
  EXPECT_TRUE(s->get_job("j1").has_value());
  report::report r;
  r.jid = "j1";
  r.minion = "web1";
  r.fun = "state.apply";
  r.started_ms = 5;
  EXPECT_EQ(s->add_reports({r}), 1u);
  EXPECT_EQ(s->list_reports({.last = true}).size(), 1u);
}

TEST_F(postgres_test, masters_starting_together_migrate_once) {
  constexpr int k_masters = 4;
  std::latch go(k_masters);
  std::atomic<int> opened{0};
  std::vector<std::string> errors(k_masters);
  std::vector<std::thread> threads;
  for (int i = 0; i < k_masters; ++i) {
    threads.emplace_back([&, i] {
      go.arrive_and_wait();
      try {
        auto s = open_store("master-" + std::to_string(i));
        s->add_job(make_job("j" + std::to_string(i), i));
        ++opened;
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(opened.load(), k_masters);
  EXPECT_EQ(psql("SELECT version FROM brine_schema"), std::to_string(k_postgres_schema_version));
  EXPECT_EQ(open_store()->list_jobs(10).size(), static_cast<size_t>(k_masters));
}

TEST_F(postgres_test, cluster_members_write_heartbeats_and_are_removed) {
  auto a = open_store("a:1");
  auto b = open_store("b:1");
  a->claim_master_slot("a:1");
  b->claim_master_slot("b:1");
  member_record ra{.name = "a:1",
                   .cluster_id = "c1",
                   .peer = "a:4520",
                   .cluster_finger = "cf",
                   .finger = "fa",
                   .proof = "00",
                   .stats = {{"connected", 3}}};
  auto rows = a->heartbeat(ra);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "a:1");
  EXPECT_GT(rows[0].seen_ms, 0);
  EXPECT_EQ(rows[0].stats["connected"], 3);
  EXPECT_EQ(rows[0].peer, "a:4520");
  EXPECT_EQ(rows[1].name, "b:1");
  EXPECT_EQ(rows[1].seen_ms, 0);  // never beat
  member_record rb = ra;
  rb.name = "b:1";
  rows = b->heartbeat(rb);
  EXPECT_GE(rows[1].seen_ms, rows[0].seen_ms);  // the database's clock
  EXPECT_TRUE(a->remove_member("b:1"));
  EXPECT_FALSE(a->remove_member("nobody:1"));
  auto all = a->members();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_TRUE(all[1].removed);
  b->claim_master_slot("b:1");  // started again: a member again
  EXPECT_FALSE(a->members()[1].removed);
}

TEST_F(postgres_test, the_feed_carries_jobs_acks_grains_presence_and_undelivered_records) {
  auto a = open_store("a:1");
  auto feed = a->changes();
  auto big = make_job("j-big", 1);
  for (int i = 0; i < 2000; ++i) big.minions.push_back("minion-" + std::to_string(i));
  a->add_job(make_job("j1", 1));
  a->add_job(big);
  a->add_job(make_job("j1", 1));  // stored already: not announced again
  a->announce_acks({{"j1", {"m1", "m2"}}});
  a->put_minion_data({{.id = "m1", .grains = json{{"os", "Debian"}}}});
  a->put_minion_data({{.id = "m2", .last_seen = 5, .master = "a:1"}});  // presence only
  a->put_minion_data({{.id = "m4", .last_seen = 5, .master = "b:1"}});
  // m4 moved to b:1: a:1 noticing it gone later leaves it there.
  a->put_minion_data({{.id = "m4", .last_seen = 6, .master = "a:1", .left = true}});
  a->put_minion_data({{.id = "m2", .last_seen = 7, .master = "a:1", .left = true}});
  a->add_undelivered({{"j1", "m3", "not connected", 1}});
  auto got = collect(*feed, [](const std::vector<change>& all) {
    return std::any_of(all.begin(), all.end(),
                       [](const change& c) { return c.what == change::kind::undelivered; });
  });
  int jobs = 0;
  std::vector<std::string> came, went;
  for (const auto& c : got) {
    EXPECT_EQ(c.origin, "a:1");
    switch (c.what) {
      case change::kind::job:
        ++jobs;
        if (c.jid == "j1") {
          ASSERT_TRUE(c.job.has_value());  // small enough to travel whole
          EXPECT_EQ(c.job->kwargs, (json{{"timeout", 5}}));
        } else {
          EXPECT_EQ(c.jid, "j-big");
          EXPECT_FALSE(c.job.has_value());  // read from its row
        }
        break;
      case change::kind::acks:
        EXPECT_EQ(c.jid, "j1");
        EXPECT_EQ(c.minions, (std::vector<std::string>{"m1", "m2"}));
        break;
      case change::kind::minions:
        EXPECT_EQ(c.minions, (std::vector<std::string>{"m1"}));
        break;
      case change::kind::undelivered:
        EXPECT_EQ(c.jid, "j1");
        EXPECT_EQ(c.minions, (std::vector<std::string>{"m3"}));
        break;
      case change::kind::presence:
        came.insert(came.end(), c.minions.begin(), c.minions.end());
        went.insert(went.end(), c.left.begin(), c.left.end());
        break;
      default:
        break;
    }
  }
  EXPECT_EQ(jobs, 2);
  // Each write says so, with the master that wrote it (the origin).
  EXPECT_EQ(came, (std::vector<std::string>{"m2", "m4"}));
  EXPECT_EQ(went, (std::vector<std::string>{"m4", "m2"}));
  auto m = a->load_minion_data({"m1", "m2", "m4", "nobody"});
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ((*m[0].grains)["os"], "Debian");
  EXPECT_EQ(m[1].master, "");  // left a:1
  EXPECT_EQ(m[1].last_seen, 7);
  EXPECT_EQ(m[2].master, "b:1");  // still connected there
  EXPECT_EQ(m[2].last_seen, 6);
}

TEST_F(postgres_test, the_feed_carries_each_minions_newest_stored_report) {
  auto a = open_store("a:1");
  auto feed = a->changes();
  using report::run_status;
  auto run = [](const char* jid, const char* minion, int64_t started, run_status status) {
    return report::report{.jid = jid,
                          .minion = minion,
                          .fun = "state.apply",
                          .started_ms = started,
                          .status = status};
  };
  auto test_run = run("j3", "db1", 3000, run_status::unchanged);
  test_run.fun = "state.test";
  test_run.test = true;
  ASSERT_EQ(a->add_reports({run("j1", "web1", 1000, run_status::changed),
                            run("j2", "web1", 2000, run_status::failed), test_run}),
            3u);
  // Stored already: nothing new, nothing announced.
  ASSERT_EQ(a->add_reports({run("j2", "web1", 2000, run_status::failed)}), 0u);
  // Older than web1's latest: announced (the hearer keeps its latest).
  ASSERT_EQ(a->add_reports({run("j0", "web1", 500, run_status::changed)}), 1u);
  std::vector<report::report> heard;
  collect(*feed, [&](const std::vector<change>& all) {
    heard.clear();
    for (const auto& c : all) {
      if (c.what != change::kind::reports) continue;
      EXPECT_EQ(c.origin, "a:1");
      heard.insert(heard.end(), c.reports.begin(), c.reports.end());
    }
    return heard.size() >= 3;
  });
  ASSERT_EQ(heard.size(), 3u);
  std::sort(heard.begin(), heard.end(),
            [](const auto& x, const auto& y) { return x.started_ms < y.started_ms; });
  EXPECT_EQ(heard[0].jid, "j0");
  EXPECT_EQ(heard[1].jid, "j2");  // web1's newest of its batch, not j1
  EXPECT_EQ(heard[1].minion, "web1");
  EXPECT_EQ(heard[1].status, run_status::failed);
  EXPECT_EQ(heard[1].fun, "state.apply");
  EXPECT_FALSE(heard[1].test);
  EXPECT_EQ(heard[2].minion, "db1");
  EXPECT_EQ(heard[2].started_ms, 3000);
  EXPECT_TRUE(heard[2].test);
  EXPECT_EQ(heard[2].fun, "state.test");
}

TEST_F(postgres_test, master_slots_are_distinct_and_kept) {
  auto a = open_store("a");
  auto b = open_store("b");
  EXPECT_EQ(a->claim_master_slot("m0:4506"), 0);
  EXPECT_EQ(b->claim_master_slot("m1:4506"), 1);
  EXPECT_EQ(a->claim_master_slot("m0:4506"), 0);
  EXPECT_EQ(b->claim_master_slot("m0:4506"), 0);  // by name, whoever asks
  a.reset();
  EXPECT_EQ(open_store()->claim_master_slot("m1:4506"), 1);  // across restarts

  // Masters claiming at once get distinct slots.
  constexpr int k_masters = 6;
  std::latch go(k_masters);
  std::vector<int> slots(k_masters, -1);
  std::vector<std::thread> threads;
  for (int i = 0; i < k_masters; ++i) {
    threads.emplace_back([&, i] {
      auto s = open_store();
      go.arrive_and_wait();
      slots[i] = s->claim_master_slot("racer" + std::to_string(i));
    });
  }
  for (auto& t : threads) t.join();
  std::set<int> distinct(slots.begin(), slots.end());
  EXPECT_EQ(distinct.size(), static_cast<size_t>(k_masters));
  EXPECT_EQ(*distinct.begin(), 2);
  EXPECT_EQ(*distinct.rbegin(), 2 + k_masters - 1);

  for (int i = 2 + k_masters; i < k_master_slots; ++i) {
    EXPECT_EQ(b->claim_master_slot("m" + std::to_string(i)), i);
  }
  std::string what = error_of([&] { b->claim_master_slot("one-too-many"); });
  EXPECT_NE(what.find("all 100 are taken"), std::string::npos) << what;
  EXPECT_NE(what.find(pg_->url(db_)), std::string::npos) << what;
  // A master that is gone gives its slot back by hand.
  psql("DELETE FROM masters WHERE name = 'm1:4506'");
  EXPECT_EQ(b->claim_master_slot("one-too-many"), 1);
}

TEST_F(postgres_test, feed_hears_file_pins_when_they_commit) {
  auto a = open_store("master-a:4506");
  auto b = open_store("master-b:4506");
  auto feed = a->changes();
  ASSERT_NE(feed, nullptr);
  b->put_file_pins({"/srv/repo"},
                   {{"/srv/repo", "base", "refs/heads/master", std::string(40, 'a'), 1}});
  std::vector<change> got;
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (got.empty() && std::chrono::steady_clock::now() < deadline) {
    for (auto& c : feed->wait(1s)) {
      if (c.what == change::kind::file_pins) got.push_back(std::move(c));
    }
  }
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].origin, "master-b:4506");
  EXPECT_EQ(a->load_file_pins().size(), 1u);
}

TEST_F(postgres_test, feed_hears_keys_and_returns_of_other_writers) {
  auto a = open_store("master-a:4506");
  auto b = open_store("master-b:4506");
  auto feed = a->changes();
  ASSERT_NE(feed, nullptr);

  b->put_key(make_key("web1", "aa:01", key_state::pending));
  auto got = until_key(*feed, "web1");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].what, change::kind::keys);
  EXPECT_EQ(got[0].origin, "master-b:4506");

  // A delete that deletes nothing says nothing: the next change is web2's.
  b->delete_key("web1", "no:such");
  b->put_key(make_key("web2", "bb:02", key_state::pending));
  got = until_key(*feed, "web2");
  ASSERT_EQ(got.size(), 1u);
  b->delete_key("web1", "aa:01");
  got = until_key(*feed, "web1");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].origin, "master-b:4506");

  // Returns: one change per job, naming the minions whose returns were new.
  a->add_returns({make_return("j1", "m1", 1)});
  b->add_returns({make_return("j1", "m1", 1), make_return("j1", "m3", 1),
                  make_return("j1", "m2", 1), make_return("j2", "m1", 1)});
  got = collect(*feed, [](const std::vector<change>& all) {
    return std::count_if(all.begin(), all.end(),
                         [](const change& c) { return c.origin == "master-b:4506"; }) == 2;
  });
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].what, change::kind::returns);
  EXPECT_EQ(got[0].origin, "master-a:4506");  // its own writes too
  EXPECT_EQ(got[0].minions, (std::vector<std::string>{"m1"}));
  EXPECT_EQ(got[1].jid, "j1");
  EXPECT_EQ(got[1].minions, (std::vector<std::string>{"m2", "m3"}));
  EXPECT_EQ(got[2].jid, "j2");
  EXPECT_EQ(got[2].minions, (std::vector<std::string>{"m1"}));
  // Small returns travel in the notification: the hearer need not read them.
  ASSERT_EQ(got[1].rets.size(), 2u);
  EXPECT_EQ(got[1].rets[0].minion, "m2");
  EXPECT_EQ(got[1].rets[0].jid, "j1");
  EXPECT_EQ(got[1].rets[0].fun, "test.ping");
  EXPECT_EQ(got[1].rets[0].ret, 1);
  EXPECT_TRUE(got[1].rets[0].success);

  // A big one is named only (read back from its row); one whose inline
  // JSON is unreadable is named too.
  auto small = make_return("j3", "small", 0);
  small.ret = nlohmann::ordered_json::parse(R"({"b":1,"a":2})");
  b->add_returns({small, make_return("j3", "big", std::string(2000, 'x'))});
  psql("SELECT pg_notify('brine_returns', E'master-c:4506\\nj4\\nm9\\t{bad')");
  got = collect(*feed, [](const std::vector<change>& all) {
    return std::any_of(all.begin(), all.end(), [](const change& c) { return c.jid == "j4"; });
  });
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].minions, (std::vector<std::string>{"big", "small"}));
  ASSERT_EQ(got[0].rets.size(), 1u);
  EXPECT_EQ(got[0].rets[0].ret.dump(), R"({"b":1,"a":2})");  // the function's key order
  EXPECT_EQ(got[1].minions, (std::vector<std::string>{"m9"}));
  EXPECT_TRUE(got[1].rets.empty());

  // A batch with nothing new says nothing.
  EXPECT_EQ(b->add_returns({make_return("j1", "m2", 1)}), 0u);
  b->put_key(make_key("web3", "cc:03", key_state::pending));
  got = until_key(*feed, "web3");
  EXPECT_EQ(got.size(), 1u);
}

// brine key accept --all on another master: every id changed is heard once,
// whether its write came in a run of puts or as a delete (PostgreSQL sends
// a payload repeated within one transaction once).
TEST_F(postgres_test, feed_hears_every_id_of_a_key_batch) {
  auto a = open_store("master-a:4506");
  auto b = open_store("master-b:4506");
  auto feed = a->changes();
  ASSERT_NE(feed, nullptr);
  std::vector<key_write> batch;
  for (int i = 0; i < 300; ++i) {
    batch.push_back({false, make_key("k" + std::to_string(i), "fp", key_state::accepted)});
  }
  batch.push_back({true, make_key("k7", "fp", key_state::accepted)});
  batch.push_back({false, make_key("k7", "fp", key_state::rejected)});
  b->write_keys(batch);
  auto got = collect(*feed, [](const std::vector<change>& all) { return all.size() >= 300; });
  std::set<std::string> ids;
  for (const auto& c : got) {
    EXPECT_EQ(c.what, change::kind::keys);
    EXPECT_EQ(c.origin, "master-b:4506");
    ids.insert(c.id);
  }
  EXPECT_EQ(ids.size(), 300u);
  EXPECT_EQ(a->load_keys("k7").at(0).state, key_state::rejected);
}

TEST_F(postgres_test, feed_splits_big_batches_over_notifications) {
  auto s = open_store("master-a:4506");
  auto feed = s->changes();
  std::vector<return_record> batch;
  std::set<std::string> expected;
  for (int i = 0; i < 3000; ++i) {
    std::string minion = "minion-with-a-rather-long-name-" + std::to_string(100000 + i);
    expected.insert(minion);
    batch.push_back(make_return("20240101000000000001", minion, i));
  }
  ASSERT_EQ(s->add_returns(batch), batch.size());
  std::set<std::string> heard;
  size_t notifications = 0;
  collect(*feed, [&](const std::vector<change>& all) {
    for (size_t i = notifications; i < all.size(); ++i) {
      const change& c = all[i];
      EXPECT_EQ(c.what, change::kind::returns);
      EXPECT_EQ(c.jid, "20240101000000000001");
      size_t payload = c.origin.size() + 1 + c.jid.size();
      for (const auto& m : c.minions) {
        payload += 1 + m.size();
        EXPECT_TRUE(heard.insert(m).second) << m << " twice";
      }
      EXPECT_LT(payload, k_postgres_max_payload);
    }
    notifications = all.size();
    return heard.size() >= expected.size();
  });
  EXPECT_EQ(heard, expected);
  // 3000 names of 37 bytes: about 111 KB, at most 7.9 KB each.
  EXPECT_GE(notifications, 15u);
}

TEST_F(postgres_test, feed_skips_payloads_it_cannot_read) {
  auto s = open_store("a");
  auto feed = s->changes();
  for (const char* keys : {"'no newline'", "E'too\\nmany\\nlines'", "''", "E'origin\\n'"}) {
    psql(std::string("SELECT pg_notify('brine_keys', ") + keys + ")");
  }
  for (const char* returns : {"E'origin\\njid'", "E'origin\\n\\nminion'", "E'\\n\\n\\n'", "''"}) {
    psql(std::string("SELECT pg_notify('brine_returns', ") + returns + ")");
  }
  s->put_key(make_key("web1", "aa:01", key_state::pending));
  auto got = until_key(*feed, "web1");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].origin, "a");
}

TEST_F(postgres_test, feed_interrupt_ends_a_wait) {
  auto s = open_store();
  auto feed = s->changes();
  // Before a wait: the next wait returns at once.
  feed->interrupt();
  auto start = clock_type::now();
  EXPECT_TRUE(feed->wait(30s).empty());
  EXPECT_LT(clock_type::now() - start, 5s);

  std::atomic<bool> returned{false};
  start = clock_type::now();
  std::thread waiter([&] {
    feed->wait(30s);
    returned = true;
  });
  feed->interrupt();
  waiter.join();
  EXPECT_TRUE(returned);
  EXPECT_LT(clock_type::now() - start, 5s);
  // A timeout with nothing to hear returns empty.
  EXPECT_TRUE(feed->wait(50ms).empty());
}

TEST_F(postgres_test, lost_connection_fails_the_call_and_the_next_reconnects) {
  auto s = open_store();
  auto feed = s->changes();
  std::vector<return_record> batch = {make_return("j1", "m1", 1), make_return("j1", "m2", 2)};
  // Every connection to the test's database, the store's and the feed's.
  EXPECT_EQ(psql("SELECT count(*) FROM (SELECT pg_terminate_backend(pid, 5000) FROM "
                 "pg_stat_activity WHERE datname = '" +
                 db_ + "' AND pid <> pg_backend_pid()) t"),
            "2");
  std::string what = error_of([&] { s->add_returns(batch); });
  EXPECT_NE(what.find("store " + pg_->url(db_) + ": cannot store 2 returns: lost the connection"),
            std::string::npos)
      << what;
  EXPECT_EQ(s->add_returns(batch), 2u);
  EXPECT_EQ(s->add_returns(batch), 0u);  // never stored twice
  psql("SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = '" + db_ +
       "' AND pid <> pg_backend_pid() AND application_name = 'brine' AND query NOT LIKE "
       "'LISTEN%'");
  EXPECT_TRUE(throws_unreachable([&] { s->add_returns(batch); }));
  EXPECT_EQ(s->count_returns("j1"), 2u);

  what = error_of([&] { feed->wait(5s); });
  EXPECT_NE(what.find("store " + pg_->url(db_) + ": change feed: lost the connection"),
            std::string::npos)
      << what;
  auto got = feed->wait(1s);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got[0].what, change::kind::resync);
  s->put_key(make_key("web1", "aa:01", key_state::pending));
  got = until_key(*feed, "web1");
  EXPECT_EQ(got.size(), 1u);  // no second resync
}

TEST_F(postgres_test, failed_batch_of_returns_is_not_half_stored) {
  auto s = open_store("a");
  auto feed = s->changes();
  // A server-side failure in the last of the statements of a 1,200-row batch.
  psql(R"sql(
CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.minion = 'zz-poison' THEN RAISE EXCEPTION 'poison refused'; END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER poison BEFORE INSERT ON returns FOR EACH ROW EXECUTE FUNCTION refuse_poison();
)sql");
  s->add_undelivered({{"j1", "m0001", "not connected", 1}});
  std::vector<return_record> batch;
  for (int i = 0; i < 1199; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "m%04d", i);
    batch.push_back(make_return("j1", name, i));
  }
  batch.push_back(make_return("j1", "zz-poison", 0));
  std::string what = error_of([&] { s->add_returns(batch); });
  EXPECT_NE(what.find("store " + pg_->url(db_) + ": cannot store 1200 returns: poison refused"),
            std::string::npos)
      << what;
  EXPECT_EQ(s->count_returns("j1"), 0u);
  EXPECT_EQ(s->count_undelivered("j1"), 1u);  // its removal was undone too

  psql("DROP TRIGGER poison ON returns");
  EXPECT_EQ(s->add_returns(batch), 1200u);
  EXPECT_EQ(s->count_returns("j1"), 1200u);
  EXPECT_EQ(s->count_undelivered("j1"), 0u);
  // The feed heard the stored batch only, not the failed one.
  size_t heard = 0;
  collect(*feed, [&](const std::vector<change>& all) {
    heard = 0;
    for (const auto& c : all) {
      if (c.what == change::kind::returns) heard += c.minions.size();
    }
    return heard >= 1200;
  });
  EXPECT_EQ(heard, 1200u);
}

// A publish waits for a store that is down until its own deadline, however
// long the store has been down and whatever the calls before it met: a
// failover with pg_auto_failover's default timings takes about a minute,
// and every publish meanwhile waits rather than being refused at once.
TEST_F(postgres_test, a_publish_waits_for_the_store_until_its_own_deadline) {
  auto s = open_store("a");
  s->add_job(make_job("before", 1));
  pg_->stop();
  // Down for longer than the store's failover_wait (1 s here): calls
  // without a deadline of their own fail, the reconnect backoff grows.
  EXPECT_TRUE(throws_unreachable([&] { s->list_jobs(1); }));
  std::this_thread::sleep_for(1200ms);  // past failover_wait: the old code refused at once
  EXPECT_TRUE(throws_unreachable([&] { s->list_jobs(1); }));
  // A deadline that passes: unreachable, with the server's own error (each
  // try a real connection attempt, the last within the reconnect backoff's
  // longest delay, 1 s, of the deadline), not the backoff's refusal.
  auto start = clock_type::now();
  std::string what;
  try {
    s->add_job(make_job("short", 2), start + 2500ms);
  } catch (const unreachable& e) {
    what = e.what();
  }
  EXPECT_GE(clock_type::now() - start, 1500ms);
  EXPECT_NE(what.find("cannot connect to"), std::string::npos) << what;
  EXPECT_EQ(what.find("next attempt in"), std::string::npos) << what;
  // One with time to spare rides out the restart and is recorded.
  std::string error = "not finished";
  std::thread waits([&] {
    try {
      s->add_job(make_job("during", 3), clock_type::now() + 60s);
      error = "";
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(300ms);  // the call is waiting (not a timing assertion)
  pg_->start();
  waits.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(jids_of(s->list_jobs(10)), (std::vector<std::string>{"during", "before"}));
}

TEST_F(postgres_test, server_restart_fails_calls_then_reconnects_with_a_resync) {
  auto s = open_store("a");
  auto feed = s->changes();
  s->add_job(make_job("before", 1));
  // The job's own notification first (a cluster's members deliver it).
  collect(*feed, [](const std::vector<change>& all) {
    return std::any_of(all.begin(), all.end(), [](const change& c) {
      return c.what == change::kind::job && c.jid == "before" && c.job && c.job->fun == "test.ping";
    });
  });

  pg_->stop();
  const std::string name = "store " + pg_->url(db_) + ": ";
  std::string what = error_of([&] { s->add_job(make_job("during", 2)); });
  EXPECT_EQ(what.rfind(name, 0), 0u) << what;
  what = error_of([&] { feed->wait(5s); });
  EXPECT_EQ(what.rfind(name + "change feed: ", 0), 0u) << what;
  EXPECT_TRUE(throws_unreachable([&] { s->list_jobs(1); }));
  EXPECT_TRUE(throws_unreachable([&] { feed->wait(1s); }));
  EXPECT_TRUE(throws_unreachable([&] { open_store(); }));
  // Attempts while it is down fail at once, naming the database (and, soon
  // after a failed one, that it is reconnecting).
  bool reconnecting = false;
  for (int i = 0; i < 5; ++i) {
    auto start = clock_type::now();
    what = error_of([&] { s->list_jobs(1); });
    EXPECT_EQ(what.rfind(name, 0), 0u) << what;
    EXPECT_LT(clock_type::now() - start, 5s);
    reconnecting =
        reconnecting ||
        what.find("reconnecting after a lost connection; next attempt in") != std::string::npos;
  }
  EXPECT_TRUE(reconnecting);

  pg_->start();
  eventually([&] { s->add_job(make_job("after", 3)); }, 15s, "the store to reconnect");
  EXPECT_EQ(jids_of(s->list_jobs(10)), (std::vector<std::string>{"after", "before"}));

  auto got = eventually([&] { return feed->wait(100ms); }, 15s, "the feed to reconnect");
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got[0].what, change::kind::resync);
  EXPECT_EQ(std::count_if(got.begin(), got.end(),
                          [](const change& c) { return c.what == change::kind::resync; }),
            1);
  auto other = open_store("b");
  other->put_key(make_key("web1", "aa:01", key_state::pending));
  got = until_key(*feed, "web1");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].origin, "b");
}

}  // namespace
}  // namespace brine::store
