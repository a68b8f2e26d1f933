#include "minion/spool.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace brine::minion {
namespace {

TEST(spool, survives_restart_until_forgotten) {
  test::temp_dir tmp("brine-spool");
  const std::string& dir = tmp.path();
  {
    spool s(dir);
    s.save("20261121180000000001", {{"jid", "20261121180000000001"}, {"ret", true}});
    s.save("20261121180000000002", {{"jid", "20261121180000000002"}, {"ret", "x"}});
    EXPECT_TRUE(s.contains("20261121180000000001"));
  }
  spool again(dir);
  auto all = again.load_all();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0]["jid"], "20261121180000000001");
  again.forget("20261121180000000001");
  EXPECT_FALSE(again.contains("20261121180000000001"));
  EXPECT_EQ(spool(dir).load_all().size(), 1u);
}

}  // namespace
}  // namespace brine::minion
