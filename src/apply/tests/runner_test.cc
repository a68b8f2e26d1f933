// The state runner on hand-made low chunks (as src/state compiles them):
// requisites, mod_watch, onchanges, onfail, prereq, listen, failhard, the
// global arguments and parallel states, with Salt 3006's comments and keys.

#include "apply/runner.h"

#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <filesystem>
#include <fstream>

#include "modules/registry.h"
#include "states/registry.h"
#include "support/temp_dir.h"

namespace brine::apply {
namespace {

using test::temp_dir;

class runner_test : public ::testing::Test {
 protected:
  runner_test() {
    states::register_builtin_states(states_);
    modules::register_builtin_modules(functions_);
  }

  // A low chunk: state.fun for ID (name defaults to ID), in sls "s", with
  // extra arguments.
  static json chunk(const std::string& id, const std::string& fun, json extra = json::object(),
                    int order = 0) {
    json low = json::object();
    low["state"] = fun.substr(0, fun.find('.'));
    low["name"] = extra.contains("name") ? extra["name"] : json(id);
    low["__sls__"] = "s";
    low["__env__"] = "base";
    low["__id__"] = id;
    for (auto& [k, v] : extra.items()) {
      if (k != "name") low[k] = v;
    }
    low["order"] = 10000 + order;
    low["fun"] = fun.substr(fun.find('.') + 1);
    return low;
  }

  static json req(const std::string& state, const std::string& id) {
    json r = json::object();
    r[state] = id;
    return json::array({r});
  }

  json run(json chunks, bool test_mode = false, bool failhard = false) {
    settings s;
    s.states = &states_;
    s.functions = &functions_;
    s.test = test_mode;
    s.failhard = failhard;
    runner r(s);
    asio::io_context io;
    json out;
    asio::co_spawn(io, r.run(std::move(chunks)), [&](std::exception_ptr e, json ret) {
      if (e) std::rethrow_exception(e);
      out = std::move(ret);
    });
    io.run();
    return out;
  }

  static const json& at(const json& ret, const std::string& tag) {
    static const json missing;
    auto it = ret.find(tag);
    EXPECT_NE(it, ret.end()) << tag << " not in " << ret.dump(2);
    return it == ret.end() ? missing : *it;
  }

  states::registry states_;
  modules::registry functions_;
};

TEST_F(runner_test, a_state_return_has_salts_keys_in_salts_order) {
  json ret = run(json::array({chunk("a", "test.succeed_without_changes")}));
  const json& a = at(ret, "test_|-a_|-a_|-succeed_without_changes");
  std::vector<std::string> keys;
  for (const auto& [k, v] : a.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"name", "changes", "result", "comment", "__sls__",
                                            "__run_num__", "start_time", "duration", "__id__"}));
  EXPECT_EQ(a["result"], true);
  EXPECT_EQ(a["comment"], "Success!");
  EXPECT_EQ(a["__run_num__"], 0);
  EXPECT_TRUE(a["duration"].is_number());
}

TEST_F(runner_test, require_runs_the_requisite_first_and_a_failure_stops_the_dependent) {
  json chunks = json::array({chunk("b", "test.nop", {{"require", req("test", "a")}}, 0),
                             chunk("a", "test.succeed_with_changes", {}, 1),
                             chunk("c", "test.nop", {{"require", req("test", "f")}}, 2),
                             chunk("f", "test.fail_without_changes", {}, 3)});
  json ret = run(chunks);
  std::vector<std::string> order;
  for (const auto& [tag, r] : ret.items()) order.push_back(tag);
  EXPECT_EQ(order[0], "test_|-a_|-a_|-succeed_with_changes");  // run before b, which needs it
  EXPECT_EQ(at(ret, "test_|-b_|-b_|-nop")["result"], true);
  EXPECT_EQ(at(ret, "test_|-b_|-b_|-nop")["__run_num__"], 1);
  const json& c = at(ret, "test_|-c_|-c_|-nop");
  EXPECT_EQ(c["result"], false);
  EXPECT_EQ(c["comment"], "One or more requisite failed: s.f");
  // Salt 3006's key order for a state that did not run.
  std::vector<std::string> keys;
  for (const auto& [k, v] : c.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"changes", "result", "duration", "start_time", "comment",
                                            "__run_num__", "__sls__", "__id__", "name"}));
  EXPECT_TRUE(any_failed(ret));
}

TEST_F(runner_test, a_missing_requisite_is_listed) {
  json ret = run(json::array({chunk("a", "test.nop", {{"require", req("test", "nope")}})}));
  EXPECT_EQ(at(ret, "test_|-a_|-a_|-nop")["comment"],
            "The following requisites were not found:\n                   require:\n"
            "                       test: nope\n");
}

TEST_F(runner_test, a_requisite_cycle_is_reported) {
  json ret = run(json::array({chunk("a", "test.nop", {{"require", req("test", "b")}}, 0),
                              chunk("b", "test.nop", {{"require", req("test", "a")}}, 1)}));
  bool found = false;
  for (const auto& [tag, r] : ret.items()) {
    if (r["comment"] == "Recursive requisite found") found = true;
  }
  EXPECT_TRUE(found) << ret.dump(2);
}

TEST_F(runner_test, watch_calls_mod_watch_only_when_the_watched_state_changed) {
  json ret = run(json::array({chunk("changed", "test.succeed_with_changes", {}, 0),
                              chunk("same", "test.succeed_without_changes", {}, 1),
                              chunk("w1", "test.succeed_without_changes",
                                    {{"watch", req("test", "changed")}}, 2),
                              chunk("w2", "test.succeed_without_changes",
                                    {{"watch", req("test", "same")}}, 3)}));
  const json& w1 = at(ret, "test_|-w1_|-w1_|-succeed_without_changes");
  EXPECT_EQ(w1["comment"], "Watch statement fired.");
  EXPECT_EQ(w1["changes"].dump(), R"({"Requisites with changes":["test: changed"]})");
  EXPECT_EQ(at(ret, "test_|-w2_|-w2_|-succeed_without_changes")["comment"], "Success!");
}

TEST_F(runner_test, onchanges_runs_only_after_a_change) {
  json ret = run(json::array({chunk("changed", "test.succeed_with_changes", {}, 0),
                              chunk("same", "test.succeed_without_changes", {}, 1),
                              chunk("on1", "test.succeed_with_changes",
                                    {{"onchanges", req("test", "changed")}}, 2),
                              chunk("on2", "test.succeed_with_changes",
                                    {{"onchanges", req("test", "same")}}, 3)}));
  EXPECT_EQ(at(ret, "test_|-on1_|-on1_|-succeed_with_changes")["comment"], "Success!");
  const json& on2 = at(ret, "test_|-on2_|-on2_|-succeed_with_changes");
  EXPECT_EQ(on2["comment"], "State was not run because none of the onchanges reqs changed");
  EXPECT_EQ(on2["__state_ran__"], false);
  EXPECT_EQ(on2["result"], true);
}

TEST_F(runner_test, onfail_runs_only_after_a_failure) {
  json ret = run(json::array({chunk("bad", "test.fail_without_changes", {}, 0),
                              chunk("good", "test.succeed_without_changes", {}, 1),
                              chunk("f1", "test.succeed_without_changes",
                                    {{"onfail", req("test", "bad")}}, 2),
                              chunk("f2", "test.succeed_without_changes",
                                    {{"onfail", req("test", "good")}}, 3)}));
  EXPECT_EQ(at(ret, "test_|-f1_|-f1_|-succeed_without_changes")["comment"], "Success!");
  EXPECT_EQ(at(ret, "test_|-f2_|-f2_|-succeed_without_changes")["comment"],
            "State was not run because onfail req did not change");
}

TEST_F(runner_test, prereq_runs_first_only_when_the_other_state_would_change) {
  // "before" prereqs "changes" (which would change) and "quiet" (which would not).
  json before = chunk("before", "test.succeed_with_changes", {{"prereq", req("test", "changes")}}, 0);
  json changes = chunk("changes", "test.succeed_with_changes",
                       {{"prerequired", req("test", "before")}}, 1);
  json before2 = chunk("before2", "test.succeed_with_changes", {{"prereq", req("test", "quiet")}}, 2);
  json quiet = chunk("quiet", "test.succeed_without_changes",
                     {{"prerequired", req("test", "before2")}}, 3);
  json ret = run(json::array({before, changes, before2, quiet}));
  EXPECT_EQ(at(ret, "test_|-before_|-before_|-succeed_with_changes")["comment"], "Success!");
  const json& b2 = at(ret, "test_|-before2_|-before2_|-succeed_with_changes");
  EXPECT_EQ(b2["comment"], "No changes detected");
  EXPECT_EQ(b2["result"], true);
  // The prereq'd states still run, for real, after.
  EXPECT_EQ(at(ret, "test_|-changes_|-changes_|-succeed_with_changes")["comment"], "Success!");
  EXPECT_EQ(at(ret, "test_|-quiet_|-quiet_|-succeed_without_changes")["comment"], "Success!");
}


// A hand-written list (state.low, or chunks from elsewhere) can prereq a
// state that already ran and has no matching prerequired: the prereq is never
// met. Salt gives up after 20 rounds with "Recursive requisite found"; brine
// recursed without end (found by state_args_fuzz).
TEST_F(runner_test, a_prereq_that_cannot_be_met_ends_as_a_recursive_requisite) {
  json ret = run(json::array({chunk("target", "test.succeed_with_changes", {}, 0),
                              chunk("before", "test.nop", {{"prereq", req("test", "target")}}, 1)}),
                 true);
  const json& b = at(ret, "test_|-before_|-before_|-nop");
  EXPECT_EQ(b["comment"], "Recursive requisite found");
  EXPECT_EQ(b["result"], false);
  EXPECT_EQ(at(ret, "test_|-target_|-target_|-succeed_with_changes")["result"], nullptr);
}

// Chunks come from whoever wrote them: a state that is not text must fail
// that state with Salt's error, not end the run (state_args_fuzz found a
// requisite lookup throwing on `state: true`).
TEST_F(runner_test, a_chunk_whose_state_is_not_text_fails_only_itself) {
  json odd = chunk("odd", "test.nop", {}, 0);
  odd["state"] = true;
  json ret = run(json::array({odd, chunk("after", "test.succeed_without_changes",
                                         {{"require", req("test", "odd")}}, 1)}));
  const json& o = at(ret, "True_|-odd_|-odd_|-nop");
  EXPECT_EQ(o["result"], false) << ret.dump(2);
  EXPECT_EQ(o["comment"], "State 'True.nop' was not found in SLS 's'\nReason: 'True.nop' is not available.\n")
      << ret.dump(2);
  // "odd" is no test state: the requisite is not found.
  EXPECT_EQ(at(ret, "test_|-after_|-after_|-succeed_without_changes")["result"], false);
}

// Marking a requisite __prereq__ adds a key to that chunk; when a state
// prereqs itself, that chunk is the one whose requisites are being read
// (a use after free that state_args_fuzz found).
TEST_F(runner_test, a_state_that_prereqs_itself_is_reported_not_crashed) {
  json ret = run(json::array({chunk("self", "test.succeed_with_changes",
                                    {{"prereq", req("test", "self")}}, 0)}));
  EXPECT_EQ(ret.size(), 1u) << ret.dump(2);
  EXPECT_EQ(ret.begin().value()["result"], false) << ret.dump(2);
}
TEST_F(runner_test, listen_runs_mod_watch_at_the_end) {
  json ret = run(json::array({chunk("listener", "test.succeed_without_changes",
                                    {{"listen", req("test", "changed")}}, 0),
                              chunk("changed", "test.succeed_with_changes", {}, 1)}));
  const json& l = at(ret, "test_|-listener_listener_|-listener_|-mod_watch");
  EXPECT_EQ(l["comment"], "Watch statement fired.");
  EXPECT_EQ(l["__run_num__"], 2);
}

TEST_F(runner_test, failhard_stops_the_run) {
  json chunks = json::array({chunk("bad", "test.fail_without_changes", {{"failhard", true}}, 0),
                             chunk("after", "test.nop", {}, 1)});
  json ret = run(chunks);
  EXPECT_TRUE(ret.contains("test_|-bad_|-bad_|-fail_without_changes"));
  EXPECT_FALSE(ret.contains("test_|-after_|-after_|-nop"));
  // The minion's failhard option does the same for every state.
  json all = run(json::array({chunk("bad", "test.fail_without_changes", {}, 0),
                              chunk("after", "test.nop", {}, 1)}),
                 false, true);
  EXPECT_FALSE(all.contains("test_|-after_|-after_|-nop"));
  // Under test, failhard stops nothing.
  json tested = run(chunks, true);
  EXPECT_TRUE(tested.contains("test_|-after_|-after_|-nop"));
}

TEST_F(runner_test, test_mode_reports_what_would_change) {
  json ret = run(json::array({chunk("a", "test.succeed_with_changes"),
                              chunk("c", "cmd.run", {{"name", "touch /nonexistent/x"}})}),
                 true);
  EXPECT_TRUE(at(ret, "test_|-a_|-a_|-succeed_with_changes")["result"].is_null());
  const json& c = at(ret, "cmd_|-c_|-touch /nonexistent/x_|-run");
  EXPECT_TRUE(c["result"].is_null());
  EXPECT_EQ(c["comment"], "Command \"touch /nonexistent/x\" would have been executed");
}

TEST_F(runner_test, unless_onlyif_and_creates_decide_whether_a_state_runs) {
  temp_dir dir;
  std::ofstream(dir.file("there")) << "x";
  json ret = run(json::array(
      {chunk("u", "test.succeed_with_changes", {{"unless", "true"}}, 0),
       chunk("o", "test.succeed_with_changes", {{"onlyif", json::array({"true", "false"})}}, 1),
       chunk("c", "test.succeed_with_changes", {{"creates", dir.file("there")}}, 2),
       chunk("r", "test.succeed_with_changes", {{"unless", "false"}}, 3)}));
  const json& u = at(ret, "test_|-u_|-u_|-succeed_with_changes");
  EXPECT_EQ(u["comment"], "unless condition is true");
  EXPECT_EQ(u["result"], true);
  EXPECT_EQ(u["changes"], json::object());
  EXPECT_EQ(u["skip_watch"], true);
  EXPECT_EQ(at(ret, "test_|-o_|-o_|-succeed_with_changes")["comment"], "onlyif condition is false");
  EXPECT_EQ(at(ret, "test_|-c_|-c_|-succeed_with_changes")["comment"], dir.file("there") + " exists");
  EXPECT_EQ(at(ret, "test_|-r_|-r_|-succeed_with_changes")["comment"], "Success!");
}

TEST_F(runner_test, unless_and_onlyif_take_function_calls) {
  // test.arg answers {args: [...], kwargs: {...}}; get_return picks the part
  // whose truth decides.
  json zero = {{"fun", "test.arg"}, {"args", json::array({0})}, {"get_return", "args:0"}};
  json one = {{"fun", "test.arg"}, {"args", json::array({1})}, {"get_return", "args:0"}};
  json ret = run(json::array(
      {chunk("o", "test.succeed_with_changes", {{"onlyif", json::array({zero})}}, 0),
       chunk("u", "test.succeed_with_changes", {{"unless", json::array({one})}}, 1),
       chunk("r", "test.succeed_with_changes", {{"onlyif", json::array({one})}}, 2)}));
  EXPECT_EQ(at(ret, "test_|-o_|-o_|-succeed_with_changes")["comment"], "onlyif condition is false");
  EXPECT_EQ(at(ret, "test_|-u_|-u_|-succeed_with_changes")["comment"], "unless condition is true");
  EXPECT_EQ(at(ret, "test_|-r_|-r_|-succeed_with_changes")["comment"], "Success!");
}

TEST_F(runner_test, check_cmd_decides_the_result) {
  json ret = run(json::array({chunk("a", "test.succeed_with_changes", {{"check_cmd", json::array({"false"})}})}));
  const json& a = at(ret, "test_|-a_|-a_|-succeed_with_changes");
  EXPECT_EQ(a["result"], false);
  EXPECT_EQ(a["comment"], "check_cmd determined the state failed");
}

TEST_F(runner_test, retry_runs_again_until_the_result) {
  temp_dir dir;
  std::string flag = dir.file("flag");
  // Fails the first time (making the flag), succeeds the second.
  std::string cmd = "test -e " + flag + " || { touch " + flag + "; exit 1; }";
  json retry = {{"attempts", 3}, {"interval", 0}, {"until", true}};
  json ret = run(json::array({chunk("r", "cmd.run", {{"name", cmd}, {"retry", retry}})}));
  const json& r = at(ret, "cmd_|-r_|-" + cmd + "_|-run");
  EXPECT_EQ(r["result"], true);
  EXPECT_TRUE(r["comment"].get<std::string>().starts_with(
      "Attempt 1: Returned a result of \"False\", with the following comment: \"Command \""))
      << r["comment"];
}

TEST_F(runner_test, parallel_states_run_at_the_same_time) {
  // Each waits for the other's mark: both succeed only if they overlap.
  temp_dir dir;
  auto barrier = [&](const std::string& me, const std::string& other) {
    return "touch " + dir.file(me) + "; i=0; until [ -e " + dir.file(other) +
           " ]; do i=$((i+1)); [ $i -gt 1200 ] && exit 1; sleep 0.05; done";
  };
  json ret = run(json::array(
      {chunk("a", "cmd.run", {{"name", barrier("a", "b")}, {"parallel", true}}, 0),
       chunk("b", "cmd.run", {{"name", barrier("b", "a")}, {"parallel", true}}, 1),
       chunk("after", "test.nop", {{"require", json::array({{{"cmd", "a"}}, {{"cmd", "b"}}})}}, 2)}));
  for (const auto& [tag, r] : ret.items()) {
    EXPECT_EQ(r["result"], true) << tag << ": " << r.dump(2);
    EXPECT_FALSE(r.contains("proc"));
  }
  EXPECT_EQ(ret.size(), 3u);
}

TEST_F(runner_test, an_unknown_function_fails_that_state_only) {
  json ret = run(json::array({chunk("x", "test.nosuch", {}, 0), chunk("y", "nosuchmod.thing", {}, 1),
                              chunk("z", "test.nop", {}, 2)}));
  EXPECT_EQ(at(ret, "test_|-x_|-x_|-nosuch")["comment"],
            "State 'test.nosuch' was not found in SLS 's'\nReason: 'test.nosuch' is not available.\n");
  EXPECT_EQ(at(ret, "nosuchmod_|-y_|-y_|-thing")["result"], false);
  EXPECT_EQ(at(ret, "test_|-z_|-z_|-nop")["result"], true);
}

// Salt's missing_fun_string: a state module whose __virtual__ needs an
// execution function that is not there says so, with Salt's reason.
TEST_F(runner_test, a_module_salt_would_hide_gives_salts_virtual_reason) {
  json ret = run(json::array({chunk("i", "iptables.append", {}, 0),
                              chunk("m", "mysql_user.present", {}, 1)}));
  EXPECT_EQ(at(ret, "iptables_|-i_|-i_|-append")["comment"],
            "State 'iptables.append' was not found in SLS 's'\nReason: 'iptables' __virtual__ "
            "returned False: iptables module could not be loaded\n");
  EXPECT_EQ(at(ret, "mysql_user_|-m_|-m_|-present")["comment"],
            "State 'mysql_user.present' was not found in SLS 's'\nReason: 'mysql_user' "
            "__virtual__ returned False: mysql module could not be loaded\n");
}

TEST_F(runner_test, states_of_one_run_share_its_chunks_and_accumulators) {
  temp_dir dir;
  std::string d = dir.file("d"), block = dir.file("block.txt");
  std::filesystem::create_directories(d);
  std::ofstream(d + "/kept.txt") << "kept";
  std::ofstream(d + "/junk.txt") << "junk";
  std::ofstream(block) << "# START\n# END\n";
  json chunks = json::array({
      chunk("kept", "file.managed", {{"name", d + "/kept.txt"}, {"replace", false}}, 1),
      // clean keeps what the states it requires manage (the run's chunks).
      chunk("d", "file.directory", {{"name", d}, {"clean", true}, {"require", req("file", "kept")}}, 2),
      chunk("acc", "file.accumulated",
            {{"filename", block}, {"text", "from the accumulator"},
             {"require_in", req("file", "block")}}, 3),
      chunk("block", "file.blockreplace",
            {{"name", block}, {"marker_start", "# START"}, {"marker_end", "# END"},
             {"content", "own"}, {"require", req("file", "acc")}}, 4),
  });
  json ret = run(chunks);
  EXPECT_EQ(at(ret, "file_|-d_|-" + d + "_|-directory")["changes"]["removed"],
            json::array({d + "/junk.txt"}));
  EXPECT_TRUE(std::filesystem::exists(d + "/kept.txt"));
  EXPECT_EQ(at(ret, "file_|-block_|-" + block + "_|-blockreplace")["result"], true);
  std::ifstream in(block);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "# START\nown\nfrom the accumulator\n# END\n");
}

}  // namespace
}  // namespace brine::apply
