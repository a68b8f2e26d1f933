#include "proto/msgpack.h"

#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

namespace brine::proto::msgpack {
namespace {

using nlohmann::json;

// What the writer wrote, as a generic MessagePack reader (nlohmann's) sees it.
json decoded(const std::vector<uint8_t>& s) { return json::from_msgpack(s); }

TEST(msgpack, the_writer_gives_what_a_generic_reader_reads_at_every_width) {
  const std::vector<int64_t> ints = {0,
                                     1,
                                     127,
                                     128,
                                     255,
                                     256,
                                     65535,
                                     65536,
                                     -1,
                                     -32,
                                     -33,
                                     -128,
                                     -129,
                                     -32768,
                                     -32769,
                                     INT32_MIN,
                                     int64_t{INT32_MIN} - 1,
                                     INT64_MIN,
                                     INT64_MAX};
  for (int64_t v : ints) {
    std::vector<uint8_t> out;
    writer(out).integer(v);
    EXPECT_EQ(decoded(out), json(v)) << v;
  }
  std::vector<uint8_t> u;
  writer(u).unsigned_integer(std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(decoded(u), json(std::numeric_limits<uint64_t>::max()));
  for (size_t n : {0, 31, 32, 255, 256, 65535, 65536}) {
    std::vector<uint8_t> out;
    writer(out).string(std::string(n, 'x'));
    EXPECT_EQ(decoded(out), json(std::string(n, 'x'))) << n;
  }
  std::vector<uint8_t> doc;
  writer w(doc);
  w.array(3);
  w.map(1);
  w.string("os");
  w.string("Debian");
  w.floating(2.5);
  w.array(20);
  for (int i = 0; i < 19; ++i) w.boolean(i % 2 == 0);
  w.nil();
  json want = json::array({{{"os", "Debian"}}, 2.5, json::array()});
  for (int i = 0; i < 19; ++i) want[2].push_back(i % 2 == 0);
  want[2].push_back(nullptr);
  EXPECT_EQ(decoded(doc), want);
}

TEST(msgpack, the_reader_reads_what_a_generic_writer_wrote) {
  json doc = {{"a", {1, -1, 300, -300, 70000, -70000, 5000000000LL, -5000000000LL}},
              {"b", {1.5, true, false, nullptr, std::string(40, 'y'), std::string(300, 'z')}},
              {"c", json::binary({1, 2, 3})}};
  auto bytes = json::to_msgpack(doc);
  reader r(bytes);
  item top = r.next();
  ASSERT_EQ(top.type, kind::map);
  ASSERT_EQ(top.count, 3u);
  EXPECT_EQ(r.next().bytes, "a");
  item a = r.next();
  ASSERT_EQ(a.type, kind::array);
  ASSERT_EQ(a.count, 8u);
  std::vector<int64_t> got;
  for (uint32_t i = 0; i < a.count; ++i) {
    item it = r.next();
    got.push_back(it.type == kind::integer ? it.integer
                                           : static_cast<int64_t>(it.unsigned_integer));
  }
  EXPECT_EQ(got,
            (std::vector<int64_t>{1, -1, 300, -300, 70000, -70000, 5000000000LL, -5000000000LL}));
  EXPECT_EQ(r.next().bytes, "b");
  ASSERT_EQ(r.next().count, 6u);
  EXPECT_EQ(r.next().floating, 1.5);
  EXPECT_TRUE(r.next().boolean);
  EXPECT_FALSE(r.next().boolean);
  EXPECT_EQ(r.next().type, kind::nil);
  EXPECT_EQ(r.next().bytes, std::string(40, 'y'));
  EXPECT_EQ(r.next().bytes, std::string(300, 'z'));
  EXPECT_EQ(r.next().bytes, "c");
  item bin = r.next();
  EXPECT_EQ(bin.type, kind::binary);
  EXPECT_EQ(bin.bytes, std::string("\x01\x02\x03", 3));
  EXPECT_TRUE(r.done());
}

TEST(msgpack, skip_passes_a_whole_value_however_deep_and_gives_its_bytes) {
  json inner = {{"k", {1, 2, {{"x", "y"}}}}};
  auto bytes = json::to_msgpack(json::array({inner, "after"}));
  reader r(bytes);
  ASSERT_EQ(r.next().count, 2u);
  auto skipped = r.skip();
  EXPECT_EQ(json::from_msgpack(skipped.begin(), skipped.end()), inner);
  EXPECT_EQ(r.next().bytes, "after");

  // 100,000 nested arrays: skipped without a stack frame per level.
  std::vector<uint8_t> deep(100000, 0x91);
  deep.push_back(0xc0);
  reader d(deep);
  EXPECT_EQ(d.skip().size(), deep.size());
  EXPECT_TRUE(d.done());
}

TEST(msgpack, truncated_or_malformed_input_is_an_error_not_a_read_past_the_end) {
  auto bytes = json::to_msgpack(json::array({"a string of some length", 70000}));
  for (size_t n = 1; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    reader r(cut);
    EXPECT_THROW(r.skip(), base::error) << n;
  }
  std::vector<uint8_t> never = {0xc1};
  reader r(never);
  EXPECT_THROW(r.next(), base::error);
  // An array that claims more elements than there are bytes.
  std::vector<uint8_t> liar = {0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0};
  reader l(liar);
  EXPECT_THROW(l.skip(), base::error);
}

}  // namespace
}  // namespace brine::proto::msgpack
