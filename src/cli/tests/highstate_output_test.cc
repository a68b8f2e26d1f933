// Salt's highstate outputter: the per-state block, the name line only when
// it differs from the ID, comments indented, changes nested at 14, the
// summary's widths, terse/mixed/changes forms and state_verbose.

#include "cli/highstate_output.h"

#include <gtest/gtest.h>

namespace brine::cli {
namespace {

using json = nlohmann::ordered_json;

json two_states() {
  return json::parse(R"({
    "test_|-a_|-a_|-succeed_with_changes": {"name": "a", "changes": {"testing": {"old": "Unchanged", "new": "Something pretended to change"}}, "result": true, "comment": "Success!", "__sls__": "s", "__run_num__": 0, "start_time": "10:00:00.000001", "duration": 1.5, "__id__": "a"},
    "cmd_|-b_|-false_|-run": {"name": "false", "changes": {}, "result": false, "comment": "Command \"false\" run\nsecond line", "__sls__": "s", "__run_num__": 1, "start_time": "10:00:00.100000", "duration": 2.25, "__id__": "b"}
  })");
}

TEST(highstate_output, full) {
  std::string out = highstate_out("local", two_states(), {});
  EXPECT_EQ(out,
            "local:\n"
            "----------\n"
            "          ID: a\n"
            "    Function: test.succeed_with_changes\n"
            "      Result: True\n"
            "     Comment: Success!\n"
            "     Started: 10:00:00.000001\n"
            "    Duration: 1.5 ms\n"
            "     Changes:   \n"
            "              ----------\n"
            "              testing:\n"
            "                  ----------\n"
            "                  new:\n"
            "                      Something pretended to change\n"
            "                  old:\n"
            "                      Unchanged\n"
            "----------\n"
            "          ID: b\n"
            "    Function: cmd.run\n"
            "        Name: false\n"
            "      Result: False\n"
            "     Comment: Command \"false\" run\n"
            "              second line\n"
            "     Started: 10:00:00.100000\n"
            "    Duration: 2.25 ms\n"
            "     Changes:   \n"
            "\n"
            "Summary for local\n"
            "------------\n"
            "Succeeded: 1 (changed=1)\n"
            "Failed:    1\n"
            "------------\n"
            "Total states run:     2\n"
            "Total run time:   3.750 ms\n");
}

TEST(highstate_output, terse_and_not_verbose) {
  highstate_options o;
  o.state_output = "terse";
  std::string out = highstate_out("m1", two_states(), o);
  EXPECT_NE(out.find("\n  Name: a - Function: test.succeed_with_changes - Result: Changed - "
                     "Started: 10:00:00.000001 - Duration: 1.5 ms\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(" Name: false - Function: cmd.run - Result: Failed"), std::string::npos);
  json quiet = json::parse(R"({"test_|-q_|-q_|-nop": {"name": "q", "changes": {}, "result": true,
      "comment": "Success!", "__run_num__": 0, "start_time": "1", "duration": 1, "__id__": "q"}})");
  highstate_options v;
  v.state_verbose = false;
  std::string hidden = highstate_out("m1", quiet, v);
  EXPECT_EQ(hidden.find("ID: q"), std::string::npos) << hidden;
  EXPECT_NE(hidden.find("Succeeded: 1\n"), std::string::npos) << hidden;
}

TEST(highstate_output, compile_errors_and_test_runs) {
  std::string errs = highstate_out("local", json::array({"Rendering SLS 'base:x' failed: boom"}), {});
  EXPECT_EQ(errs, "local:\n    Data failed to compile:\n----------\n    Rendering SLS 'base:x' failed: boom\n");
  json tested = json::parse(R"({"test_|-a_|-a_|-succeed_with_changes": {"name": "a", "changes": {"testing": {}},
      "result": null, "comment": "would", "__run_num__": 0, "start_time": "1", "duration": 1, "__id__": "a"}})");
  std::string t = highstate_out("local", tested, {});
  EXPECT_NE(t.find("      Result: None\n"), std::string::npos);
  EXPECT_NE(t.find("Succeeded: 1 (unchanged=1, changed=1)\n"), std::string::npos) << t;
}

}  // namespace
}  // namespace brine::cli
