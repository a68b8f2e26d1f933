#include "render/python_json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

// Expected texts are what Python 3's json.dumps printed for the same data.
namespace brine::render {
namespace {

value dict(std::vector<std::pair<value, value>> entries) {
  value d = value::make_dict();
  for (auto& [k, v] : entries) d.dict().entries.emplace_back(std::move(k), std::move(v));
  return d;
}

TEST(PythonJson, SortsKeysAndEscapesAsEnsureAscii) {
  value v = dict({{"b", value::make_list({1, 2.5, nullptr, true,
                                          value::make_tuple({1, "x"})})},
                  {"a", "\xc3\xa9\x7f\xf0\x9f\x98\x80<\n\x01"}});
  json_dumps_options o;
  o.sort_keys = true;
  EXPECT_EQ(python_json_dumps(v, o),
            R"({"a": "\u00e9\u007f\ud83d\ude00<\n\u0001", "b": [1, 2.5, null, true, [1, "x"]]})");
}

TEST(PythonJson, IndentsDecodedJsonAsSaltCallOutJson) {
  auto doc = nlohmann::ordered_json::parse(
      R"({"local": {"x": {"result": true, "changes": {}, "list": [], "m": -0.0,
          "u": 18446744073709551615}}})");
  doc["local"]["x"]["n"] = std::numeric_limits<double>::infinity();
  json_dumps_options o;
  o.indent = "    ";
  EXPECT_EQ(python_json_dumps(doc, o),
            "{\n    \"local\": {\n        \"x\": {\n            \"result\": true,\n"
            "            \"changes\": {},\n            \"list\": [],\n"
            "            \"m\": -0.0,\n            \"u\": 18446744073709551615,\n"
            "            \"n\": Infinity\n        }\n    }\n}");
}

TEST(PythonJson, SeparatorsUtf8AndHtmlSafe) {
  value v = dict({{"k", "\xc3\xa9<&>'"}});
  json_dumps_options o;
  o.ensure_ascii = false;
  o.item_separator = ",";
  o.key_separator = ":";
  EXPECT_EQ(python_json_dumps(v, o), "{\"k\":\"\xc3\xa9<&>'\"}");
  o.html_safe = true;
  EXPECT_EQ(python_json_dumps(v, o), R"({"k":"é\u003c\u0026\u003e\u0027"})");
}

TEST(PythonJson, IndentArgumentAsPythonTakesIt) {
  value v = dict({{"k", value::make_list({"a", value::make_dict()})}});
  json_dumps_options o;
  o.indent = json_indent("\t");
  EXPECT_EQ(python_json_dumps(v, o), "{\n\t\"k\": [\n\t\t\"a\",\n\t\t{}\n\t]\n}");
  o.indent = json_indent(-1);
  EXPECT_EQ(python_json_dumps(v, o), "{\n\"k\": [\n\"a\",\n{}\n]\n}");
  EXPECT_FALSE(json_indent(nullptr).has_value());
}

TEST(PythonJson, ScalarKeysAsJsonText) {
  value v = dict({{1.5, 1}, {2, 2}, {nullptr, 3}, {false, 4}, {std::nan(""), 5}});
  EXPECT_EQ(python_json_dumps(v), R"({"1.5": 1, "2": 2, "null": 3, "false": 4, "NaN": 5})");
}

TEST(PythonJson, TypeErrorsAsPython) {
  value tuple_key = dict({{value::make_tuple({1, 2}), 1}});
  try {
    python_json_dumps(tuple_key);
    FAIL() << "a tuple key was written";
  } catch (const template_error& e) {
    EXPECT_STREQ(e.what(), "keys must be str, int, float, bool or None, not tuple");
  }
  json_dumps_options sorted;
  sorted.sort_keys = true;
  EXPECT_THROW(python_json_dumps(dict({{1, 1}, {"a", 2}}), sorted), template_error);
  EXPECT_THROW(python_json_dumps(value::undefined("'x' is undefined")), template_error);
}

}  // namespace
}  // namespace brine::render
