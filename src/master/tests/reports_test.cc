#include "master/reports.h"

#include <gtest/gtest.h>

#include <string>

#include "master/store_worker.h"
#include "support/temp_dir.h"

namespace brine::master {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

store::job_record job(const std::string& jid, const std::string& fun, json kwargs) {
  store::job_record j;
  j.jid = jid;
  j.fun = fun;
  j.kwargs = std::move(kwargs);
  j.target = "*";
  j.minions = {"web1", "web2"};
  j.created = 1700000000;
  return j;
}

store::return_record ret(const std::string& jid, const std::string& minion, const std::string& fun,
                         ojson value, int retcode = 0) {
  store::return_record r;
  r.jid = jid;
  r.minion = minion;
  r.fun = fun;
  r.ret = std::move(value);
  r.success = retcode == 0;
  r.retcode = retcode;
  r.stamp = 1700000001;
  r.received_ms = 1700000001500;
  return r;
}

ojson one_state(bool result, bool changed) {
  ojson s = ojson::object();
  s["name"] = "n";
  s["changes"] = changed ? ojson{{"x", 1}} : ojson::object();
  s["result"] = result;
  s["comment"] = "";
  s["__run_num__"] = 0;
  s["start_time"] = "10:00:00";
  s["duration"] = 500.0;
  s["__id__"] = "n";
  ojson out = ojson::object();
  out["test_|-n_|-n_|-nop"] = std::move(s);
  return out;
}

// Returns go through the store thread as the master sends them; every state
// run among them becomes a report, with its job's test= and none for other
// functions; a re-sent return makes no second report.
TEST(reports, state_runs_among_committed_returns_become_reports) {
  test::temp_dir dir;
  const std::string db = dir.file("master.db");
  {
    reports maker;
    store_worker worker(store::open_sqlite(db));
    worker.set_reporter([&maker](store::store& s, const std::vector<store::return_record>& b) {
      return maker.make(s, b);
    });
    worker.post([](store::store& s) {
      s.add_job(job("j1", "state.apply", json{{"test", true}}));
      s.add_job(job("j2", "state.sls", json{{"test", "False"}}));
      s.add_job(job("j3", "test.ping", json::object()));
    });
    int stored = 0;
    worker.add_return(ret("j1", "web1", "state.apply", one_state(true, false)), [&] { ++stored; });
    worker.add_return(ret("j2", "web1", "state.sls", one_state(false, true), 2), [&] { ++stored; });
    worker.add_return(ret("j2", "web2", "state.sls", ojson::array({"compile error"}), 1),
                      [&] { ++stored; });
    worker.add_return(ret("j3", "web1", "test.ping", true), [&] { ++stored; });
    // Re-sent: the first report stays.
    worker.add_return(ret("j1", "web1", "state.apply", one_state(false, false), 2),
                      [&] { ++stored; });
    worker.stop();
    EXPECT_EQ(stored, 5);
  }
  auto s = store::open_sqlite(db);
  auto all = s->list_reports({});
  ASSERT_EQ(all.size(), 3u);
  auto j1 = s->get_report("j1", "web1");
  ASSERT_TRUE(j1.has_value());
  EXPECT_TRUE(j1->test);  // the job's test=True, though no result was None
  EXPECT_EQ(j1->status, report::run_status::unchanged);
  EXPECT_EQ(j1->started_ms, 1700000001500 - 500);
  auto failed = s->get_report("j2", "web1");
  ASSERT_TRUE(failed.has_value());
  EXPECT_FALSE(failed->test);
  EXPECT_EQ(failed->status, report::run_status::failed);
  EXPECT_EQ(failed->counts.changed, 1u);
  auto broken = s->get_report("j2", "web2");
  ASSERT_TRUE(broken.has_value());
  EXPECT_EQ(broken->errors, (std::vector<std::string>{"compile error"}));
  EXPECT_FALSE(s->get_report("j3", "web1").has_value());
}

// A return whose job this store never saw (a re-send after the job was
// purged) still gets its report; test mode is then told by its results.
TEST(reports, a_return_without_its_job_is_reported_too) {
  auto s = store::open_sqlite(":memory:");
  reports maker;
  ojson pending = one_state(true, true);
  pending.begin().value()["result"] = nullptr;
  auto made = maker.make(*s, {ret("gone", "web1", "state.highstate", pending)});
  ASSERT_EQ(made.size(), 1u);
  EXPECT_TRUE(made[0].test);
  EXPECT_EQ(made[0].status, report::run_status::changed);
}

}  // namespace
}  // namespace brine::master
