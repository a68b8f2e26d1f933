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

}  // namespace
}  // namespace brine::master
