// status.time and status.loadavg against the clock and /proc.

#include <gtest/gtest.h>

#include <ctime>
#include <fstream>
#include <string>

#include "modules/registry.h"
#include "modules/tests/test_util.h"

namespace brine::modules {
namespace {

using namespace testing;
using json = nlohmann::json;

class status_mod_test : public module_test {
 protected:
  status_mod_test() : module_test(register_status_module, 10s) {}
};

TEST_F(status_mod_test, time_formats_the_local_time_with_strftime) {
  std::time_t before = std::time(nullptr);
  json epoch = ret("status.time", {"%s"});
  std::time_t after = std::time(nullptr);
  ASSERT_TRUE(epoch.is_string()) << epoch;
  long long t = std::stoll(epoch.get<std::string>());
  EXPECT_GE(t, before);
  EXPECT_LE(t, after);
  // Salt's default format: "Friday, 27. November 2026 02:15PM".
  std::string text = ret("status.time").get<std::string>();
  EXPECT_NE(text.find(", "), std::string::npos) << text;
  EXPECT_TRUE(text.ends_with("AM") || text.ends_with("PM")) << text;
  EXPECT_EQ(ret("status.time", {"year %Y"}).get<std::string>().substr(0, 5), "year ");
}

TEST_F(status_mod_test, loadavg_is_procs_three_numbers) {
  json got = ret("status.loadavg");
  ASSERT_TRUE(got.is_object()) << got;
  for (const char* key : {"1-min", "5-min", "15-min"}) {
    ASSERT_TRUE(got.contains(key)) << got;
    EXPECT_TRUE(got[key].is_number()) << got;
    EXPECT_GE(got[key].get<double>(), 0.0);
  }
  EXPECT_CONTAINS(error_of("status.loadavg", {"extra"}), "at most 0 positional");
}

}  // namespace
}  // namespace brine::modules
