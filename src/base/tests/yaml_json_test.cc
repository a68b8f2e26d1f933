#include "base/yaml_json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "base/error.h"

namespace brine::base {
namespace {

using nlohmann::json;

json load(const std::string& text) { return yaml_to_json(YAML::Load(text)); }

TEST(yaml_json, plain_scalars_resolve_as_yaml_1_1) {
  struct row {
    const char* text;
    json want;
  };
  for (const auto& r : std::initializer_list<row>{
           {"~", nullptr},       {"null", nullptr},  {"Null", nullptr},
           {"true", true},       {"yes", true},      {"On", true},
           {"NO", false},        {"off", false},     {"False", false},
           {"42", 42},           {"-7", -7},         {"+3", 3},
           {"1_000", 1000},      {"0x1F", 31},       {"0b101", 5},
           {"017", 15},          {"0", 0},           {"1.5", 1.5},
           {"-2.5e+3", -2500.0}, {".5", 0.5},        {"3.", 3.0},
           {"1e3", "1e3"},       {"2.5e3", "2.5e3"}, {"0o17", "0o17"},
           {"web1", "web1"},     {"1.2.3", "1.2.3"}, {"0x", "0x"},
           {"09", "09"},         {".", "."},         {"yes please", "yes please"},
           {"12abc", "12abc"},   {"-", "-"},
       }) {
    EXPECT_EQ(yaml_scalar(r.text), r.want) << r.text;
  }
  EXPECT_TRUE(std::isinf(yaml_scalar(".inf").get<double>()));
  EXPECT_LT(yaml_scalar("-.inf").get<double>(), 0);
  EXPECT_TRUE(std::isnan(yaml_scalar(".nan").get<double>()));
  EXPECT_EQ(yaml_scalar("18446744073709551615"), json(18446744073709551615ull));
  EXPECT_EQ(yaml_scalar("99999999999999999999"), "99999999999999999999");
}

TEST(yaml_json, quoted_scalars_stay_strings_and_keys_become_strings) {
  EXPECT_EQ(load("'yes'"), "yes");
  EXPECT_EQ(load("\"42\""), "42");
  EXPECT_EQ(load("!!str 42"), "42");
  EXPECT_EQ(load("{roles: [web, db], rack: 13, 1: one, dc: null}"),
            (json{{"roles", {"web", "db"}}, {"rack", 13}, {"1", "one"}, {"dc", nullptr}}));
  EXPECT_EQ(load("- [1, 'two', 3.0]\n- {a: {b: off}}"),
            json::parse(R"([[1, "two", 3.0], {"a": {"b": false}}])"));
}

TEST(yaml_json, aliases_are_expanded_within_a_budget) {
  EXPECT_EQ(load("a: &x [1, 2]\nb: *x"), json::parse(R"({"a": [1, 2], "b": [1, 2]})"));
  // Eight levels of ten aliases each: 10^8 values from nine lines.
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 8; ++i) {
    std::string prev = "*a" + std::to_string(i - 1);
    bomb += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) bomb += (k ? ", " : "") + prev;
    bomb += "]\n";
  }
  try {
    load(bomb);
    FAIL() << "an alias bomb was expanded";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("more than 1000000 values"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace brine::base
