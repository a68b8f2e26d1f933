#include "report/report.h"

#include <gtest/gtest.h>

#include <string>

namespace brine::report {
namespace {

using ojson = nlohmann::ordered_json;

// One state's return as the runner makes it; `result` null is Salt's None.
ojson state(ojson result, const std::string& id, ojson changes, double duration,
            const std::string& start, int run_num, const std::string& comment = "") {
  ojson s = ojson::object();
  s["name"] = id + "-name";
  s["changes"] = std::move(changes);
  s["result"] = std::move(result);
  s["comment"] = comment;
  s["__sls__"] = "web";
  s["__run_num__"] = run_num;
  s["start_time"] = start;
  s["duration"] = duration;
  s["__id__"] = id;
  return s;
}

run_facts facts(std::optional<bool> test = std::nullopt, int retcode = 0) {
  return run_facts{"20250101120000000000", "web1", "state.apply", retcode, 1'000'000, test};
}

std::string tag(const std::string& fun, const std::string& id) {
  auto dot = fun.find('.');
  return fun.substr(0, dot) + "_|-" + id + "_|-" + id + "-name_|-" + fun.substr(dot + 1);
}

TEST(report, changed_and_unchanged_states_make_a_changed_run) {
  ojson ret = ojson::object();
  ret[tag("file.managed", "conf")] =
      state(true, "conf", {{"diff", "New file"}}, 2.5, "10:00:00.000000", 0);
  ret[tag("cmd.run", "reload")] =
      state(true, "reload", ojson::object(), 10.0, "10:00:00.002500", 1);
  ret[tag("file.directory", "dir")] =
      state(true, "dir", ojson::object(), 0.5, "10:00:00.012500", 2);
  auto r = summarise(facts(), ret);
  EXPECT_EQ(r.status, run_status::changed);
  EXPECT_FALSE(r.test);
  EXPECT_EQ(r.counts, (tally{3, 0, 1, 0, 3}));
  EXPECT_DOUBLE_EQ(r.run_time_ms, 13.0);
  // First start 10:00:00.000, last end 10:00:00.013.
  EXPECT_NEAR(r.duration_ms, 13.0, 1e-6);
  EXPECT_EQ(r.started_ms, 1'000'000 - 13);
  ASSERT_EQ(r.timings.size(), 2u);
  EXPECT_EQ(r.timings.at("file"), (module_timing{2, 3.0}));
  EXPECT_EQ(r.timings.at("cmd"), (module_timing{1, 10.0}));
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.ret, ret);
  EXPECT_EQ(r.jid, "20250101120000000000");
  EXPECT_EQ(r.minion, "web1");
  EXPECT_EQ(r.fun, "state.apply");
}

TEST(report, a_run_without_changes_is_unchanged) {
  ojson ret = ojson::object();
  ret[tag("test.succeed_without_changes", "a")] =
      state(true, "a", ojson::object(), 1.0, "10:00:00", 0);
  ret[tag("cmd.run", "b")] = state(true, "b", nullptr, 1.0, "10:00:01", 1);
  auto r = summarise(facts(), ret);
  EXPECT_EQ(r.status, run_status::unchanged);
  EXPECT_EQ(r.counts, (tally{2, 0, 0, 0, 2}));
  // 10:00:00 to 10:00:01.001.
  EXPECT_NEAR(r.duration_ms, 1001.0, 1e-6);
}

TEST(report, one_failed_state_fails_the_run_whatever_changed) {
  ojson ret = ojson::object();
  ret[tag("test.succeed_with_changes", "a")] = state(
      true, "a", {{"testing", {{"old", "Unchanged"}, {"new", "Something pretended to change"}}}},
      1.0, "10:00:00", 0);
  ret[tag("test.fail_without_changes", "b")] =
      state(false, "b", ojson::object(), 1.0, "10:00:00.001", 1, "Failure!");
  auto r = summarise(facts(std::nullopt, 2), ret);
  EXPECT_EQ(r.status, run_status::failed);
  EXPECT_EQ(r.counts, (tally{1, 1, 1, 0, 2}));
  EXPECT_EQ(r.retcode, 2);
  auto lines = states_of(r.ret);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1].id, "b");
  EXPECT_EQ(lines[1].function, "test.fail_without_changes");
  EXPECT_EQ(lines[1].name, "b-name");
  EXPECT_EQ(lines[1].result, std::optional<bool>(false));
  EXPECT_FALSE(lines[1].changes);
  EXPECT_EQ(lines[1].comment, "Failure!");
  EXPECT_EQ(lines[1].sls, "web");
  EXPECT_EQ(lines[1].start_time, "10:00:00.001");
  EXPECT_TRUE(lines[0].changes);
}

TEST(report, a_nonzero_retcode_fails_a_run_whose_states_all_succeeded) {
  ojson ret = ojson::object();
  ret[tag("test.nop", "a")] = state(true, "a", ojson::object(), 1.0, "10:00:00", 0);
  EXPECT_EQ(summarise(facts(std::nullopt, 1), ret).status, run_status::failed);
  EXPECT_EQ(summarise(facts(std::nullopt, 0), ret).status, run_status::unchanged);
}

TEST(report, compile_errors_are_a_failed_run_with_the_errors) {
  ojson ret = ojson::array({"Rendering SLS 'base:web' failed: line 3", "Second error"});
  auto r = summarise(facts(std::nullopt, 1), ret);
  EXPECT_EQ(r.status, run_status::failed);
  EXPECT_EQ(r.errors,
            (std::vector<std::string>{"Rendering SLS 'base:web' failed: line 3", "Second error"}));
  EXPECT_EQ(r.counts, tally{});
  EXPECT_TRUE(r.timings.empty());
  EXPECT_EQ(r.duration_ms, 0);
  EXPECT_EQ(r.started_ms, 1'000'000);
  EXPECT_EQ(r.ret, ret);
  // Even with retcode 0 (what a minion would never send with errors).
  EXPECT_EQ(summarise(facts(), ret).status, run_status::failed);
}

TEST(report, a_string_return_is_a_failed_run) {
  auto r = summarise(facts(), "'state.apply' is not available.");
  EXPECT_EQ(r.status, run_status::failed);
  EXPECT_EQ(r.errors, (std::vector<std::string>{"'state.apply' is not available."}));
  EXPECT_EQ(summarise(facts(), nullptr).status, run_status::failed);
  EXPECT_EQ(summarise(facts(), ojson::array()).errors.size(), 1u);
}

TEST(report, test_mode_none_results_are_pending_changes) {
  ojson ret = ojson::object();
  ret[tag("test.succeed_with_changes", "a")] =
      state(nullptr, "a", {{"testing", {{"old", "Unchanged"}}}}, 1.0, "10:00:00", 0);
  ret[tag("cmd.run", "b")] = state(nullptr, "b", ojson::object(), 1.0, "10:00:00.001", 1);
  ret[tag("test.succeed_without_changes", "c")] =
      state(true, "c", ojson::object(), 1.0, "10:00:00.002", 2);
  // The job said nothing of test=: result None tells.
  auto r = summarise(facts(), ret);
  EXPECT_TRUE(r.test);
  EXPECT_EQ(r.status, run_status::changed);
  EXPECT_EQ(r.counts, (tally{3, 0, 1, 2, 3}));
  auto lines = states_of(ret);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_FALSE(lines[0].result.has_value());
  // The job's own test= wins either way.
  EXPECT_FALSE(summarise(facts(false), ret).test);
  ojson quiet = ojson::object();
  quiet[tag("test.succeed_without_changes", "c")] =
      state(true, "c", ojson::object(), 1.0, "10:00:00", 0);
  auto t = summarise(facts(true), quiet);
  EXPECT_TRUE(t.test);
  EXPECT_EQ(t.status, run_status::unchanged);
  EXPECT_FALSE(summarise(facts(), quiet).test);
}

TEST(report, timings_per_module_and_a_run_across_midnight) {
  ojson ret = ojson::object();
  ret[tag("file.managed", "a")] = state(true, "a", ojson::object(), 1000.0, "23:59:59.500000", 0);
  ret[tag("file.absent", "b")] = state(true, "b", ojson::object(), 250.0, "00:00:00.500000", 1);
  ret[tag("cmd.run", "c")] = state(true, "c", ojson::object(), 100.0, "00:00:00.750000", 2);
  ret[tag("pkg.installed", "d")] = state(true, "d", ojson::object(), 0, "00:00:00.850000", 3);
  ret[tag("pkg.installed", "d")]["duration"] = "2.5";  // read as a number all the same
  auto r = summarise(facts(), ret);
  EXPECT_EQ(r.timings.at("file"), (module_timing{2, 1250.0}));
  EXPECT_EQ(r.timings.at("cmd"), (module_timing{1, 100.0}));
  EXPECT_EQ(r.timings.at("pkg"), (module_timing{1, 2.5}));
  EXPECT_DOUBLE_EQ(r.run_time_ms, 1352.5);
  // 23:59:59.5 to 00:00:00.8525.
  EXPECT_NEAR(r.duration_ms, 1352.5, 1e-6);

  // Stored and read back.
  auto back = parse_timings(timings_text(r.timings));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, r.timings);
  EXPECT_FALSE(parse_timings("[]").has_value());
  EXPECT_FALSE(parse_timings("{\"file\": {\"states\": -1, \"ms\": 1}}").has_value());
  EXPECT_FALSE(parse_timings("not json").has_value());
}

TEST(report, parallel_states_overlap_in_wall_time) {
  ojson ret = ojson::object();
  ret[tag("cmd.run", "a")] = state(true, "a", ojson::object(), 1000.0, "10:00:00", 0);
  ret[tag("cmd.run", "b")] = state(true, "b", ojson::object(), 1000.0, "10:00:00.010", 1);
  auto r = summarise(facts(), ret);
  EXPECT_DOUBLE_EQ(r.run_time_ms, 2000.0);
  EXPECT_NEAR(r.duration_ms, 1010.0, 1e-6);
}

TEST(report, states_follow_run_num_and_odd_entries_fail) {
  ojson ret = ojson::object();
  ret[tag("test.nop", "second")] = state(true, "second", ojson::object(), 1, "10:00:00", 1);
  ret[tag("test.nop", "first")] = state(true, "first", ojson::object(), 1, "10:00:00", 0);
  ret["garbage"] = "not a state";
  auto lines = states_of(ret);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].id, "first");
  EXPECT_EQ(lines[1].id, "second");
  EXPECT_EQ(lines[2].tag, "garbage");
  EXPECT_EQ(lines[2].result, std::optional<bool>(false));
  auto r = summarise(facts(), ret);
  EXPECT_EQ(r.status, run_status::failed);
  EXPECT_EQ(r.counts.failed, 1u);
}

TEST(report, status_names_round_trip) {
  for (auto s : {run_status::unchanged, run_status::changed, run_status::failed}) {
    EXPECT_EQ(parse_status(to_string(s)), s);
  }
  EXPECT_FALSE(parse_status("FAILED").has_value());
  EXPECT_FALSE(parse_status("").has_value());
}

TEST(report, which_functions_are_state_runs) {
  for (const char* f : {"state.apply", "state.highstate", "state.sls", "state.sls_id",
                        "state.single", "state.test"}) {
    EXPECT_TRUE(is_state_run(f)) << f;
  }
  for (const char* f : {"state.low", "state.show_sls", "test.ping", "state.running", ""}) {
    EXPECT_FALSE(is_state_run(f)) << f;
  }
}

TEST(report, json_form_has_every_field) {
  ojson ret = ojson::object();
  ret[tag("test.nop", "a")] = state(true, "a", ojson::object(), 1.5, "10:00:00", 0);
  auto r = summarise(facts(), ret);
  auto j = to_json(r);
  EXPECT_EQ(j["status"], "unchanged");
  EXPECT_EQ(j["counts"]["total"], 1);
  EXPECT_EQ(j["timings"]["test"]["states"], 1);
  EXPECT_EQ(j["return"], ret);
  r.ret = nullptr;
  EXPECT_FALSE(to_json(r).contains("return"));
}

}  // namespace
}  // namespace brine::report
