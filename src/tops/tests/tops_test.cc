// Salt's master_tops ext_nodes (salt/tops/ext_nodes.py, 3006) and its
// option.
#include "tops/tops.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "base/error.h"
#include "support/temp_dir.h"

namespace brine::tops {
namespace {

using nlohmann::json;

std::string script(const test::temp_dir& d, const std::string& body) {
  std::string path = d.file("classify");
  std::ofstream(path) << "#!/bin/sh\n" << body;
  ::chmod(path.c_str(), 0755);
  return path;
}

TEST(ExtNodes, ClassesAndEnvironmentAsSaltReadsThem) {
  test::temp_dir d("brine-tops");
  std::string cmd = script(d,
                           "echo \"environment: $1\"\n"
                           "echo \"classes: [web, \\\"id-$2\\\"]\"\n");
  // The command's own words, then the id.
  EXPECT_EQ(ext_nodes(cmd + " prod", "m1"), json::parse(R"({"prod": ["web", "id-m1"]})"));
  cmd = script(d, "printf 'classes:\\n  ntp: {}\\n  base: {a: 1}\\n'\n");
  EXPECT_EQ(ext_nodes(cmd, "m1"), json::parse(R"({"base": ["base", "ntp"]})"));
  cmd = script(d, "echo 'parameters: {a: 1}'\n");
  EXPECT_EQ(ext_nodes(cmd, "m1"), json::object());
  cmd = script(d, "exit 3\n");
  EXPECT_THROW(ext_nodes(cmd, "m1"), base::error);
}

TEST(MasterTops, TheOptionAndFailures) {
  EXPECT_FALSE(from_option(json::object()));
  EXPECT_FALSE(from_option(json()));
  try {
    from_option(json::parse(R"({"cobbler": {}})"));
    FAIL();
  } catch (const base::error& e) {
    EXPECT_STREQ(e.what(), "master_tops: module 'cobbler' is unavailable in brine; use ext_nodes");
  }
  EXPECT_THROW(from_option(json::parse(R"({"ext_nodes": ""})")), base::error);
  test::temp_dir d("brine-tops");
  auto fn = from_option(json{{"ext_nodes", script(d, "echo \"classes: [c-$1]\"\n")}});
  ASSERT_TRUE(fn);
  EXPECT_EQ(fn("m1", json::object()), json::parse(R"({"base": ["c-m1"]})"));
  // A failing command: logged, nothing.
  auto broken = from_option(json{{"ext_nodes", "/nonexistent/classifier"}});
  EXPECT_EQ(broken("m1", json::object()), json::object());
}

}  // namespace
}  // namespace brine::tops
