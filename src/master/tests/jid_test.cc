#include "master/jid.h"

#include <set>

#include <gtest/gtest.h>

namespace brine::master {
namespace {

TEST(jid, salt_form) {
  EXPECT_EQ(jid_generator::format(1795284000123456), "20261121180000123456");
  jid_generator g;
  EXPECT_TRUE(jid_generator::valid(g.next()));
  EXPECT_FALSE(jid_generator::valid("2026112118000012345"));
  EXPECT_FALSE(jid_generator::valid("2026112118000012345x"));
}

TEST(jid, strictly_increasing_and_unique) {
  jid_generator g;
  std::set<std::string> seen;
  std::string last;
  for (int i = 0; i < 100000; ++i) {
    std::string j = g.next();
    EXPECT_GT(j, last);
    last = j;
    seen.insert(j);
  }
  EXPECT_EQ(seen.size(), 100000u);
}

// Two masters sharing a store, minting as fast as they can at the same
// time: every jid ends with its master's slot, none is minted twice, and
// each master's stay in order.
TEST(jid, slots_keep_masters_apart) {
  jid_generator a, b;
  a.set_slot(7);
  b.set_slot(42);
  std::set<std::string> seen;
  std::string last_a, last_b;
  for (int i = 0; i < 20000; ++i) {
    std::string ja = a.next(), jb = b.next();
    EXPECT_EQ(ja.substr(18), "07");
    EXPECT_EQ(jb.substr(18), "42");
    EXPECT_GT(ja, last_a);
    EXPECT_GT(jb, last_b);
    last_a = ja;
    last_b = jb;
    seen.insert(ja);
    seen.insert(jb);
  }
  EXPECT_EQ(seen.size(), 40000u);
}

TEST(jid, time_read_back) {
  for (int64_t micros : {int64_t{0}, int64_t{1700000000123456}, int64_t{951782400000001}}) {
    EXPECT_EQ(jid_generator::unix_micros(jid_generator::format(micros)), micros);
  }
  EXPECT_EQ(jid_generator::unix_micros("20240229235959999999"), int64_t{1709251199999999});
  EXPECT_FALSE(jid_generator::unix_micros("2024022923595999999"));   // 19 digits
  EXPECT_FALSE(jid_generator::unix_micros("2024022923595999999x"));
  EXPECT_FALSE(jid_generator::unix_micros("20230229000000000000"));  // no 29 February
  EXPECT_FALSE(jid_generator::unix_micros("20240101250000000000"));  // hour 25
}

}  // namespace
}  // namespace brine::master
