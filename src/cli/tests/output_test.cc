#include "cli/output.h"

#include <gtest/gtest.h>

#include <ctime>
#include <limits>

namespace brine::cli {
namespace {

TEST(output, utc_times_to_the_unit_asked_for) {
  // 2025-01-31 14:05:09.123 UTC
  int64_t ms = 1738332309123;
  EXPECT_EQ(utc_time(ms, time_unit::minutes), "2025-01-31 14:05");
  EXPECT_EQ(utc_time(ms, time_unit::seconds), "2025-01-31 14:05:09");
  EXPECT_EQ(utc_time(ms, time_unit::milliseconds), "2025-01-31 14:05:09.123");
  // Before 1970 the milliseconds still count forward from the second.
  EXPECT_EQ(utc_time(-1, time_unit::milliseconds), "1969-12-31 23:59:59.999");
  EXPECT_EQ(utc_time(951782400000, time_unit::seconds), "2000-02-29 00:00:00");  // leap day
  EXPECT_EQ(utc_time(253402300799999, time_unit::milliseconds), "9999-12-31 23:59:59.999");
  // Beyond year 9999 (and before year 1): as gmtime_r gives it, no overflow.
  EXPECT_EQ(utc_time(253402300800000, time_unit::minutes), "10000-01-01 00:00");
  EXPECT_FALSE(utc_time(std::numeric_limits<int64_t>::max(), time_unit::milliseconds).empty());
  EXPECT_FALSE(utc_time(std::numeric_limits<int64_t>::min(), time_unit::milliseconds).empty());
}

// The digits written by hand agree with gmtime_r over four centuries of
// days and every kind of second.
TEST(output, utc_times_agree_with_gmtime_r) {
  auto libc = [](int64_t unix_ms) {
    int64_t ms = ((unix_ms % 1000) + 1000) % 1000;
    auto secs = static_cast<time_t>((unix_ms - ms) / 1000);
    struct tm tm {};
    ::gmtime_r(&secs, &tm);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d.%03d", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<int>(ms));
    return std::string(buf);
  };
  uint64_t x = 88172645463325252ULL;  // xorshift: the same values every run
  for (int i = 0; i < 200000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    // 1800..2200
    int64_t ms = -5364662400000 + static_cast<int64_t>(x % 12623040000000ULL);
    ASSERT_EQ(utc_time(ms, time_unit::milliseconds), libc(ms)) << ms;
  }
}

TEST(output, nested_scalars_like_salt) {
  EXPECT_EQ(nested("m1", true), "m1:\n    True\n");
  EXPECT_EQ(nested("m1", nullptr), "m1:\n    None\n");
  EXPECT_EQ(nested("m1", "a\nb"), "m1:\n    a\n    b\n");
  EXPECT_EQ(nested("m1", 3), "m1:\n    3\n");
}

TEST(output, nested_maps_and_lists) {
  nlohmann::json v = {{"pid", 12}, {"stdout", "hi"}};
  EXPECT_EQ(nested("m1", v), "m1:\n    ----------\n    pid:\n        12\n    stdout:\n        hi\n");
  EXPECT_EQ(nested("m1", nlohmann::json::array({"a", 1})), "m1:\n    - a\n    - 1\n");
}

TEST(output, args_are_yaml_like_salt) {
  EXPECT_EQ(parse_arg("1"), 1);
  EXPECT_EQ(parse_arg("1.5"), 1.5);
  EXPECT_EQ(parse_arg("true"), true);
  EXPECT_EQ(parse_arg("echo hi"), "echo hi");
  EXPECT_EQ(parse_arg("'quoted 1'"), "quoted 1");
  EXPECT_EQ(parse_arg("{A: '1'}"), (nlohmann::json{{"A", "1"}}));
  EXPECT_EQ(parse_arg("sleep 100"), "sleep 100");
  EXPECT_EQ(parse_arg(""), "");
}

// Salt 3006's salt.utils.args.yamlify_arg gave each expected value.
TEST(output, args_keep_text_where_salts_yamlify_does) {
  struct row {
    std::string word;
    nlohmann::json want;
  };
  for (const row& r : {row{"^root:", "^root:"}, row{"- x", "- x"}, row{"a: b", "a: b"},
                       row{"{a: b}", {{"a", "b"}}}, row{"[1, 2]", {1, 2}}, row{"a#b", "a#b"},
                       row{"#x", "#x"}, row{"1_000", "1_000"}, row{"   ", "   "},
                       row{"None", nullptr}, row{"|", "|"}, row{"!", "!"}, row{"a\tb", "a\tb"},
                       row{"x: [1]", "x: [1]"}, row{"on", true}, row{"~", nullptr},
                       row{"null", nullptr}, row{"# c", "# c"}, row{"1 # n", 1},
                       row{"[1] # c", {1}}}) {
    EXPECT_EQ(parse_arg(r.word), r.want) << r.word;
  }
}

TEST(output, split_args_and_kwargs) {
  nlohmann::json args, kwargs;
  split_args({"echo a=b", "timeout=2", "cwd=/tmp", "x"}, args, kwargs);
  EXPECT_EQ(args, (nlohmann::json{"echo a=b", "x"}));
  EXPECT_EQ(kwargs, (nlohmann::json{{"timeout", 2}, {"cwd", "/tmp"}}));
}

}  // namespace
}  // namespace brine::cli
