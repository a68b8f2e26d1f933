#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "cli/commands.h"

namespace brine::cli {
namespace {

constexpr int64_t k_now = 1'700'000'000'000;  // 2023-11-14 22:13:20 UTC

std::string error_of(const std::string& text) {
  try {
    since_ms(text, k_now);
  } catch (const base::error& e) {
    return e.what();
  }
  return "";
}

TEST(report_since, durations_back_from_now) {
  EXPECT_EQ(since_ms("30s", k_now), k_now - 30'000);
  EXPECT_EQ(since_ms("30m", k_now), k_now - 30 * 60'000);
  EXPECT_EQ(since_ms("2h", k_now), k_now - 2 * 3'600'000);
  EXPECT_EQ(since_ms("7d", k_now), k_now - 7 * 86'400'000LL);
  EXPECT_EQ(since_ms("1w", k_now), k_now - 7 * 86'400'000LL);
  EXPECT_EQ(since_ms("1h30m", k_now), k_now - 90 * 60'000);
}

TEST(report_since, utc_times) {
  EXPECT_EQ(since_ms("2023-11-14", k_now), 1'699'920'000'000);
  EXPECT_EQ(since_ms("2023-11-14T22:13", k_now), 1'700'000'000'000 - 20'000);
  EXPECT_EQ(since_ms("2023-11-14 22:13:20", k_now), 1'700'000'000'000);
}

TEST(report_since, anything_else_names_both_forms) {
  for (const char* bad : {"", "90", "2h-", "5x", "h", "yesterday", "2023-11", "2023-13-01",
                          "2023-11-14T25:00", "2023-11-14T22", "2023-11-14X22:13"}) {
    std::string what = error_of(bad);
    EXPECT_NE(what.find("--since takes a duration back from now (30m, 2h, 7d, 1w, 1h30m) or a "
                        "UTC time"),
              std::string::npos)
        << bad << ": " << what;
    EXPECT_NE(what.find(std::string("got '") + bad + "'"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace brine::cli
