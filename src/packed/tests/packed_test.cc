#include "packed/packed.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace brine::packed {
namespace {

using nlohmann::json;

json sample() {
  return json::parse(R"({
    "id": "web01", "num_cpus": 4, "neg": -7, "big": 18446744073709551615, "pi": 3.25,
    "virtual": null, "ok": true, "off": false, "empty_s": "", "empty_l": [], "empty_d": {},
    "ipv4": ["10.0.0.1", "127.0.0.1"],
    "ip_interfaces": {"eth0": ["10.0.0.1", "fd00::1"], "lo": ["127.0.0.1", "::1"]},
    "nested": [{"a": 1}, [2, [3]], "x"]
  })");
}

TEST(packed, round_trips_every_kind) {
  json j = sample();
  document d(j);
  EXPECT_EQ(d.to_json(), j);
  EXPECT_EQ(d.root().bytes(), d.bytes());
  // Numbers keep their kind.
  EXPECT_TRUE(d.to_json()["big"].is_number_unsigned());
  EXPECT_TRUE(d.to_json()["neg"].is_number_integer());
  EXPECT_TRUE(d.to_json()["pi"].is_number_float());
}

TEST(packed, scalars_of_every_kind) {
  for (const json& j : std::vector<json>{nullptr, true, false, 0, -1, 42u, 1.5, "", "text",
                                         json::array(), json::object()}) {
    document d(j);
    EXPECT_EQ(d.to_json(), j) << j.dump();
  }
}

TEST(packed, finds_every_key) {
  const json j = sample();
  document d(j);
  value r = d.root();
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r.size(), j.size());
  for (const auto& [k, v] : j.items()) {
    value f = r.find(k);
    ASSERT_TRUE(f) << k;
    EXPECT_EQ(f.to_json(), v) << k;
  }
  EXPECT_FALSE(r.find("absent"));
  EXPECT_FALSE(r.find(""));
  EXPECT_FALSE(r.find("zzzz"));
  EXPECT_FALSE(r.find("id").find("x"));  // find on a string: absent
  EXPECT_EQ(r.find("id").string(), "web01");
  EXPECT_EQ(r.find("num_cpus").integer(), 4);
  EXPECT_EQ(r.find("big").unsigned_integer(), 18446744073709551615u);
  EXPECT_EQ(r.find("pi").floating(), 3.25);
  EXPECT_TRUE(r.find("ok").boolean());
  EXPECT_FALSE(r.find("off").boolean());
  EXPECT_TRUE(r.find("virtual").is_null());
  EXPECT_EQ(r.find("ip_interfaces").find("lo").at(1).string(), "::1");
}

TEST(packed, iterates_arrays_and_objects_in_order) {
  const json j = sample();
  document d(j);
  std::vector<std::string> keys;
  for (auto it = d.root().begin(); it != d.root().end(); ++it) keys.emplace_back(it.key());
  std::vector<std::string> want;
  for (const auto& [k, v] : j.items()) want.push_back(k);
  EXPECT_EQ(keys, want);

  std::vector<std::string> ips;
  for (value v : d.root().find("ipv4")) ips.emplace_back(v.string());
  EXPECT_EQ(ips, (std::vector<std::string>{"10.0.0.1", "127.0.0.1"}));

  value nested = d.root().find("nested");
  EXPECT_EQ(nested.size(), 3u);
  EXPECT_EQ(nested.at(1).at(1).at(0).integer(), 3);
  EXPECT_EQ(nested.at(2).string(), "x");
  EXPECT_FALSE(nested.at(3));
  // Scalars have no elements.
  EXPECT_FALSE(d.root().find("id").begin() != d.root().find("id").end());
}

TEST(packed, finds_keys_among_thousands) {
  json j = json::object();
  for (int i = 0; i < 5000; ++i) j["k" + std::to_string(i * 7919)] = i;
  document d(j);
  for (int i = 0; i < 5000; ++i) {
    value v = d.root().find("k" + std::to_string(i * 7919));
    ASSERT_TRUE(v) << i;
    EXPECT_EQ(v.integer(), i);
  }
  EXPECT_FALSE(d.root().find("k1"));
  EXPECT_EQ(d.to_json(), j);
}

TEST(packed, long_strings_and_keys) {
  std::string long_text(70000, 'x');
  std::string long_key(300, 'k');
  json j = {{long_key, long_text}, {"a", std::string(254, 'y')}, {"b", std::string(255, 'z')}};
  document d(j);
  EXPECT_EQ(d.to_json(), j);
  EXPECT_EQ(d.root().find(long_key).string(), long_text);
  EXPECT_EQ(d.root().find("b").string().size(), 255u);
}

TEST(packed, absent_and_empty_documents) {
  document none;
  EXPECT_FALSE(none);
  EXPECT_FALSE(none.root());
  EXPECT_TRUE(none.to_json().is_null());
  value absent;
  EXPECT_FALSE(absent.find("x"));
  EXPECT_FALSE(absent.at(0));
  EXPECT_TRUE(absent.to_json().is_null());
}

TEST(packed, copies_share_the_block) {
  document a(sample());
  document b = a;
  EXPECT_EQ(a.root().find("id").string().data(), b.root().find("id").string().data());
}

TEST(packed, smaller_than_the_tree) {
  // A realistic grains document packs into a few KiB.
  json g = sample();
  for (int i = 0; i < 40; ++i) g["grain" + std::to_string(i)] = "value number " + std::to_string(i);
  document d(g);
  EXPECT_LT(d.bytes(), g.dump().size() + 16 * g.size());
}

}  // namespace
}  // namespace brine::packed
