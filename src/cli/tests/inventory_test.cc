#include "cli/inventory.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace brine::cli::inventory {
namespace {

using nlohmann::json;
using strings = std::vector<std::string>;

std::string error_of(std::string_view fields) {
  try {
    parse_fields(fields);
  } catch (const usage_error& e) {
    return e.what();
  }
  return "";
}

TEST(inventory_fields, grain_paths_take_dots_or_salts_colons) {
  auto f = parse_fields("os,ip4_interfaces.eth0,ip4_interfaces:eth0:0,grains.id");
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0].from, source::grain);
  EXPECT_EQ(f[0].path, strings{"os"});
  EXPECT_EQ(f[1].path, (strings{"ip4_interfaces", "eth0"}));
  EXPECT_EQ(f[2].path, (strings{"ip4_interfaces", "eth0", "0"}));
  EXPECT_EQ(f[2].name, "ip4_interfaces:eth0:0");
  // grains.X reaches a grain whose name is a built-in's.
  EXPECT_EQ(f[3].from, source::grain);
  EXPECT_EQ(f[3].path, strings{"id"});
}

TEST(inventory_fields, builtins_and_pillar) {
  auto f = parse_fields("id,master,last_run.status,key,pillar.dns.servers");
  EXPECT_EQ(f[0].from, source::builtin);
  EXPECT_EQ(f[1].from, source::builtin);
  EXPECT_EQ(f[2].from, source::builtin);
  EXPECT_EQ(f[2].path, strings{"last_run.status"});
  EXPECT_EQ(f[3].from, source::builtin);
  EXPECT_EQ(f[4].from, source::pillar);
  EXPECT_EQ(f[4].path, (strings{"dns", "servers"}));
  // Every default field parses.
  EXPECT_EQ(parse_fields(k_default_fields).size(), 7u);
}

TEST(inventory_fields, mistakes_name_the_field_and_the_fix) {
  EXPECT_NE(error_of("id,last_run.bogus")
                .find("unknown field 'last_run.bogus'; the built-in "
                      "fields are: id, key"),
            std::string::npos)
      << error_of("id,last_run.bogus");
  EXPECT_NE(error_of("key.state").find("grains.key.state"), std::string::npos);
  EXPECT_NE(error_of("os..x").find("field 'os..x' has an empty key"), std::string::npos);
  EXPECT_NE(error_of(".os").find("empty key"), std::string::npos);
  EXPECT_NE(error_of("os:").find("empty key"), std::string::npos);
  EXPECT_NE(error_of("id,,os").find("--fields has an empty field"), std::string::npos);
  EXPECT_NE(error_of("").find("--fields has an empty field"), std::string::npos);
  EXPECT_NE(error_of("pillar").find("field 'pillar' needs a key: pillar.KEY"), std::string::npos);
  EXPECT_NE(error_of("grains").find("needs a key: grains.KEY"), std::string::npos);
  EXPECT_NE(error_of("os release").find("space"), std::string::npos);
}

TEST(inventory_lookup, walks_maps_and_lists) {
  json grains = {
      {"os", "Debian"}, {"ip4_interfaces", {{"eth0", {"10.0.0.1", "10.0.0.2"}}}}, {"num_cpus", 4}};
  EXPECT_EQ(lookup(grains, {"os"}), "Debian");
  EXPECT_EQ(lookup(grains, {"ip4_interfaces", "eth0"}), (json{"10.0.0.1", "10.0.0.2"}));
  EXPECT_EQ(lookup(grains, {"ip4_interfaces", "eth0", "1"}), "10.0.0.2");
  EXPECT_TRUE(lookup(grains, {"ip4_interfaces", "eth0", "2"}).is_null());
  EXPECT_TRUE(lookup(grains, {"ip4_interfaces", "eth0", "x"}).is_null());
  EXPECT_TRUE(lookup(grains, {"os", "x"}).is_null());
  EXPECT_TRUE(lookup(grains, {"absent"}).is_null());
  EXPECT_EQ(lookup(grains, {"num_cpus"}), 4);
}

TEST(inventory_pillar, only_keys_the_globs_allow) {
  strings globs = {"role", "dns.*"};
  EXPECT_TRUE(pillar_allowed({"role"}, globs));
  EXPECT_TRUE(pillar_allowed({"dns", "servers"}, globs));
  // A parent of allowed keys is not allowed: it would print its siblings.
  EXPECT_FALSE(pillar_allowed({"dns"}, globs));
  EXPECT_FALSE(pillar_allowed({"db", "password"}, globs));
  EXPECT_FALSE(pillar_allowed({"role"}, {}));
}

TEST(inventory_output, cells_and_csv_quoting) {
  EXPECT_EQ(cell_text("Debian"), "Debian");
  EXPECT_EQ(cell_text(nullptr), "");
  EXPECT_EQ(cell_text(11), "11");
  EXPECT_EQ(cell_text(true), "true");
  EXPECT_EQ(cell_text(json{"a", "b"}), "[\"a\",\"b\"]");
  EXPECT_EQ(csv_row({"id", "os"}), "id,os\r\n");
  EXPECT_EQ(csv_row({"a,b", "say \"hi\"", "two\nlines", " pad", ""}),
            "\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",\" pad\",\r\n");
  EXPECT_EQ(csv_row({cell_text(json{"a", "b"})}), "\"[\"\"a\"\",\"\"b\"\"]\"\r\n");
}

TEST(inventory_output, csv_cells_a_spreadsheet_would_run_are_text) {
  EXPECT_EQ(csv_row({"=HYPERLINK(\"http://x\")", "@SUM(A1)", "+cmd", "-2+3", "\tx"}),
            "\"'=HYPERLINK(\"\"http://x\"\")\",'@SUM(A1),'+cmd,'-2+3,'\tx\r\n");
  // Numbers and ordinary text stay as they are.
  EXPECT_EQ(csv_row({"-5", "+1.5e3", "-0.25", "web-1", "a=b"}), "-5,+1.5e3,-0.25,web-1,a=b\r\n");
}

TEST(inventory_output, table_pads_columns) {
  EXPECT_EQ(table({{"id", "os"}, {"web10", "Debian"}, {"db", ""}}),
            "id     os\nweb10  Debian\ndb\n");
}

}  // namespace
}  // namespace brine::cli::inventory
