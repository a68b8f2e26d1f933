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

}  // namespace
}  // namespace brine::master
