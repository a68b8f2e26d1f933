// Tests of the ini module against Salt's ini_manage.py: what it reads from a
// file with comments, continuation lines, a commented-out option and a line
// it cannot parse, the changes set_option reports, and the file it writes
// back (Salt's flush: "key = value", a blank line before each section).

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "modules/registry.h"
#include "modules/tests/test_util.h"
#include "support/temp_dir.h"

namespace brine::modules {
namespace {

using namespace testing;
using json = nlohmann::json;

class ini_mod_test : public module_test {
 protected:
  ini_mod_test() : module_test(register_ini_module) {}
  std::string file(const std::string& text) {
    std::string path = dir_.file("app.ini");
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  std::string contents() {
    std::ifstream in(dir_.file("app.ini"), std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string ordered(const outcome& o) { return o.ordered_ret ? o.ordered_ret->dump() : o.ret.dump(); }
  test::temp_dir dir_{"brine-ini"};
};

constexpr const char* k_ini =
    "# top comment\nname=old\n#port = 80\n\n[main]\nkey1 = v1\n  continued\n; semi\nkey2: x\n\n"
    "[other]\na=1\n";

TEST_F(ini_mod_test, reads_as_salts_ini_does) {
  std::string path = file(k_ini);
  EXPECT_EQ(ordered(call_fn("ini.get_ini", {path})),
            R"({"name":"old","main":{"key1":"v1\n  continued"},"other":{"a":"1"}})");
  EXPECT_EQ(call_fn("ini.get_option", {path, "main", "key1"}).ret, "v1\n  continued");
  EXPECT_EQ(call_fn("ini.get_option", {path, "", "name"}).ret, "old");
  EXPECT_TRUE(call_fn("ini.get_option", {path, "main", "nope"}).ret.is_null());
  EXPECT_EQ(call_fn("ini.get_section", {path, "other"}).ret, (json{{"a", "1"}}));
  EXPECT_EQ(call_fn("ini.get_section", {path, "nope"}).ret, json::object());
  EXPECT_EQ(call_fn("ini.get_ini", {dir_.file("missing.ini")}).ret, json::object());
}

TEST_F(ini_mod_test, set_option_reports_changes_and_writes_salts_layout) {
  std::string path = file(k_ini);
  json sections = {{"name", "new"}, {"port", 8080}, {"main", {{"key1", "v2"}, {"key3", true}}},
                   {"fresh", {{"z", 1}}}};
  outcome o = call_fn("ini.set_option", {path, sections});
  // nlohmann::json sorts the caller's keys; the changes follow them.
  EXPECT_EQ(ordered(o),
            R"({"fresh":{"before":null,"after":{"z":"1"}},"main":{"key1":{"before":"v1\n  continued","after":"v2"},)"
            R"("key3":{"before":null,"after":"True"}},"name":{"before":"old","after":"new"},)"
            R"("port":{"before":null,"after":"8080"}})");
  // The commented-out option gives its place to the option; a line the
  // separator does not parse stays as it was.
  EXPECT_EQ(contents(),
            "# top comment\nname = new\nport = 8080\n\n[main]\nkey1 = v2\n; semi\nkey2: x\n"
            "key3 = True\n\n[other]\na = 1\n\n[fresh]\nz = 1\n");
  o = call_fn("ini.set_option", {path, sections});
  EXPECT_EQ(o.ret, json::object());
  o = call_fn("ini.set_option", {path, json{{"main", {{"key1", "v3"}}}}}, {{"no_spaces", true}});
  EXPECT_NE(contents().find("\nkey1=v3\n"), std::string::npos) << contents();
}

TEST_F(ini_mod_test, remove_option_and_section) {
  std::string path = file(k_ini);
  EXPECT_EQ(call_fn("ini.remove_option", {path, "other", "a"}).ret, "1");
  EXPECT_TRUE(call_fn("ini.remove_option", {path, "other", "a"}).ret.is_null());
  EXPECT_EQ(call_fn("ini.remove_section", {path, "main"}).ret, (json{{"key1", "v1\n  continued"}}));
  EXPECT_TRUE(call_fn("ini.remove_section", {path, "main"}).ret.is_null());
  EXPECT_EQ(contents(), "# top comment\nname = old\n#port = 80\n\n[other]\n");
}

}  // namespace
}  // namespace brine::modules
