#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "store/store.h"
#include "support/pg_server.h"

// What the store tests share (store_test.cc: every backend and SQLite's file;
// postgres_store_test.cc: PostgreSQL only).
namespace brine::store::test_util {

using nlohmann::json;

inline job_record make_job(const std::string& jid, int64_t created) {
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

inline return_record make_return(const std::string& jid, const std::string& minion, json ret,
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

inline key_record make_key(const std::string& id, const std::string& fp, key_state state,
                           int64_t updated = 1) {
  return key_record{id, state, "-----BEGIN PUBLIC KEY-----\n" + fp + "\n-----END PUBLIC KEY-----\n",
                    fp, updated};
}

inline void expect_job_eq(const job_record& a, const job_record& b) {
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

inline std::vector<std::string> jids_of(const std::vector<job_record>& jobs) {
  std::vector<std::string> out;
  out.reserve(jobs.size());
  for (const auto& j : jobs) out.push_back(j.jid);
  return out;
}

// A fresh database on the test binary's PostgreSQL server for `pg` and `db`;
// a skip (or, with BRINE_REQUIRE_POSTGRES=1, a failure) when PostgreSQL is
// not installed, leaving `pg` null.
inline void use_fresh_postgres_database(test::pg_server*& pg, std::string& db) {
  static int databases = 0;
  std::string why;
  pg = test::pg_environment::server(&why);
  if (pg == nullptr) {
    if (test::postgres_required()) {
      FAIL() << why << " (BRINE_REQUIRE_POSTGRES=1 makes this a failure)";
    }
    GTEST_SKIP() << why;
  }
  db = "brine_test_" + std::to_string(++databases);
  pg->create_database(db);
}

// The message of the base::error that f() throws; a test failure when it
// throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const base::error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a base::error";
  return "";
}

}  // namespace brine::store::test_util
