// Salt's unified diff against Python's: every case of diff_cases.json (what
// Python 3.11's difflib.unified_diff printed, recorded by
// gen_diff_cases.py) must come out byte for byte.

#include "modules/diff.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace brine::modules {
namespace {

std::vector<std::string> strings(const nlohmann::json& v) {
  return v.get<std::vector<std::string>>();
}

TEST(diff_test, every_recorded_difflib_case_matches) {
  std::ifstream in(BRINE_DIFF_CASES);
  ASSERT_TRUE(in) << BRINE_DIFF_CASES;
  nlohmann::json cases = nlohmann::json::parse(in);
  ASSERT_GT(cases.size(), 50U);
  for (const auto& c : cases) {
    diff_options o;
    const auto& kw = c["kw"];
    o.fromfile = kw.value("fromfile", "");
    o.tofile = kw.value("tofile", "");
    o.fromfiledate = kw.value("fromfiledate", "");
    o.tofiledate = kw.value("tofiledate", "");
    o.n = kw.value("n", 3);
    o.lineterm = kw.value("lineterm", "\n");
    std::string got;
    for (const auto& line : unified_diff(strings(c["a"]), strings(c["b"]), o)) got += line;
    EXPECT_EQ(got, c["diff"].get<std::string>()) << c["name"];
  }
}

TEST(diff_test, get_diff_is_salts_join) {
  EXPECT_EQ(get_diff({"first line\n", "version v1\n", "last line\n"},
                     {"first line\n", "version v2\n", "last line\n"}),
            "--- \n+++ \n@@ -1,3 +1,3 @@\n first line\n-version v1\n+version v2\n last line\n");
  EXPECT_EQ(get_diff({"same\n"}, {"same\n"}), "");
}

// file.append's own join: lines without ends, joined with "\n", so the
// header lines' "\n" doubles (Salt 3006's recorded file.append change).
TEST(diff_test, append_style_join_doubles_header_newlines) {
  std::vector<std::string> lines = unified_diff(
      {"# edit target", "color = red", "enable_feature = yes", "#disabled_option = 1",
       "anchor line"},
      {"# edit target", "color = red", "enable_feature = yes", "#disabled_option = 1",
       "anchor line", "appended one", "appended two"});
  std::string joined;
  for (std::size_t i = 0; i < lines.size(); ++i) joined += (i ? "\n" : "") + lines[i];
  EXPECT_EQ(joined,
            "--- \n\n+++ \n\n@@ -3,3 +3,5 @@\n\n enable_feature = yes\n #disabled_option = 1\n "
            "anchor line\n+appended one\n+appended two");
}

TEST(diff_test, line_splitting_as_python) {
  EXPECT_EQ(read_lines("a\nb\r\nc\rd"), (std::vector<std::string>{"a\n", "b\r\n", "c\rd"}));
  EXPECT_EQ(split_lines("a\nb\r\nc\rd"), (std::vector<std::string>{"a\n", "b\r\n", "c\r", "d"}));
  EXPECT_TRUE(read_lines("").empty());
  EXPECT_TRUE(split_lines("").empty());
}

TEST(diff_test, opcodes_as_sequence_matcher) {
  auto ops = diff_opcodes({"a", "b", "c"}, {"a", "x", "c", "d"});
  ASSERT_EQ(ops.size(), 4U);
  EXPECT_EQ(ops[1].tag, diff_opcode::replace);
  EXPECT_EQ(ops[3].tag, diff_opcode::insert);
  EXPECT_EQ(ops[3].j1, 3U);
}

}  // namespace
}  // namespace brine::modules
