// State modules called directly, as the runner calls them: Salt's returns,
// comments and changes, for real and under test.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "states/tests/state_fixture.h"
#include "support/temp_dir.h"

namespace brine::states {
namespace {

class states_test : public state_fixture {
 protected:
  // The test states answer with the name they are given.
  json call(const std::string& fun, json low, bool test = false) {
    if (!low.contains("name")) low["name"] = "x";
    return state_fixture::call(fun, std::move(low), test);
  }
};

TEST_F(states_test, test_states_answer_as_salts_do) {
  EXPECT_EQ(call("test.succeed_without_changes", json::object()).dump(),
            R"({"name":"x","changes":{},"result":true,"comment":"Success!"})");
  EXPECT_EQ(call("test.fail_without_changes", json::object())["result"], false);
  json changed = call("test.succeed_with_changes", json::object());
  EXPECT_EQ(changed["changes"].dump(),
            R"({"testing":{"old":"Unchanged","new":"Something pretended to change"}})");
  json tested = call("test.succeed_with_changes", json::object(), true);
  EXPECT_TRUE(tested["result"].is_null());
  EXPECT_EQ(tested["comment"], "If we weren't testing, this would be successful with changes");
  EXPECT_EQ(call("test.fail_with_changes", json::object(), true)["comment"],
            "If we weren't testing, this would be failed with changes");
}

TEST_F(states_test, configurable_test_state_gives_what_it_is_told) {
  json r = call("test.configurable_test_state",
                {{"changes", false}, {"result", false}, {"comment", "told"}});
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["changes"], json::object());
  EXPECT_EQ(r["comment"], "told");
  json t = call("test.configurable_test_state", {{"changes", true}}, true);
  EXPECT_TRUE(t["result"].is_null());
  EXPECT_EQ(t["comment"], "This is a test");
  EXPECT_THROW(call("test.configurable_test_state", {{"changes", "maybe"}}), std::exception);
}

TEST_F(states_test, cmd_run_reports_the_command_and_its_output) {
  json r = call("cmd.run", {{"name", "echo out; echo err >&2; exit 3"}});
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"], "Command \"echo out; echo err >&2; exit 3\" run");
  EXPECT_EQ(r["changes"]["retcode"], 3);
  EXPECT_EQ(r["changes"]["stdout"], "out");
  EXPECT_EQ(r["changes"]["stderr"], "err");
  std::vector<std::string> keys;
  for (const auto& [k, v] : r["changes"].items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"pid", "retcode", "stdout", "stderr"}));
  json t = call("cmd.run", {{"name", "rm -rf /nonexistent"}}, true);
  EXPECT_TRUE(t["result"].is_null());
  EXPECT_EQ(t["comment"], "Command \"rm -rf /nonexistent\" would have been executed");
}

TEST_F(states_test, cmd_run_stateful_reads_the_last_line) {
  json r = call("cmd.run", {{"name", "echo working; echo \"changed=no comment='all fine'\""},
                            {"stateful", true}});
  EXPECT_EQ(r["result"], true);
  EXPECT_EQ(r["comment"], "all fine");
  EXPECT_EQ(r["changes"], json::object());
  json c = call("cmd.run", {{"name", "echo changed=yes comment=done extra=1"}, {"stateful", true}});
  EXPECT_EQ(c["comment"], "done");
  EXPECT_EQ(c["changes"]["extra"], "1");
}

TEST_F(states_test, cmd_run_refuses_a_missing_cwd) {
  json r = call("cmd.run", {{"name", "true"}, {"cwd", "/nonexistent/dir"}});
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"], "Desired working directory \"/nonexistent/dir\" is not available");
}

TEST_F(states_test, cmd_mod_watch_runs_the_command) {
  json r = call("cmd.mod_watch", {{"name", "echo fired"}, {"sfun", "wait"}});
  EXPECT_EQ(r["changes"]["stdout"], "fired");
  json bad = call("cmd.mod_watch", {{"name", "true"}, {"sfun", "script"}});
  EXPECT_EQ(bad["result"], false);
}

TEST_F(states_test, file_managed_writes_contents_once) {
  test::temp_dir dir;
  std::string path = dir.file("a.txt");
  json tested = call("file.managed", {{"name", path}, {"contents", "hello"}}, true);
  EXPECT_TRUE(tested["result"].is_null());
  EXPECT_EQ(tested["changes"].dump(), R"({"newfile":")" + path + R"("})");
  EXPECT_FALSE(std::filesystem::exists(path));
  json made = call("file.managed", {{"name", path}, {"contents", "hello"}, {"mode", "0600"}});
  // Salt makes a new file 0600 and reports the mode it then sets only when
  // that differs (fixtures file_basic: 0640 shows, file_directory: 0600
  // does not).
  EXPECT_EQ(made.dump(), R"({"changes":{"diff":"New file"},"comment":"File )" + path +
                             R"( updated","name":")" + path + R"(","result":true})");
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "hello\n");
  EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  json again = call("file.managed", {{"name", path}, {"contents", "hello"}, {"mode", "0600"}});
  EXPECT_EQ(again["comment"], "File " + path + " is in the correct state");
  EXPECT_EQ(again["changes"], json::object());
  json relative = call("file.managed", {{"name", "x.txt"}, {"contents", "x"}});
  EXPECT_EQ(relative["comment"], "Specified file x.txt is not an absolute path");
  json failed_check =
      call("file.managed", {{"name", dir.file("b.txt")}, {"contents", "b"}, {"check_cmd", "false"}});
  EXPECT_EQ(failed_check["comment"], "check_cmd execution failed");
  EXPECT_FALSE(std::filesystem::exists(dir.file("b.txt")));
}

TEST_F(states_test, file_directory_makes_it_once) {
  test::temp_dir dir;
  std::string path = dir.file("d");
  EXPECT_EQ(call("file.directory", {{"name", path}}, true)["comment"],
            "The following files will be changed:\n" + path + ": directory - new\n");
  json made = call("file.directory", {{"name", path}});
  EXPECT_EQ(made["changes"][path]["directory"], "new");
  EXPECT_TRUE(std::filesystem::is_directory(path));
  EXPECT_EQ(call("file.directory", {{"name", path}})["comment"],
            "The directory " + path + " is in the correct state");
}

}  // namespace
}  // namespace brine::states
