#include "minion/spool.h"

#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/temp_dir.h"

namespace brine::minion {
namespace {

TEST(spool, survives_restart_until_forgotten) {
  test::temp_dir tmp("brine-spool");
  const std::string& dir = tmp.path();
  {
    spool s(dir);
    s.save("20261121180000000001",
           nlohmann::json::to_msgpack({{"jid", "20261121180000000001"}, {"ret", true}}));
    s.save("20261121180000000002",
           nlohmann::json::to_msgpack({{"jid", "20261121180000000002"}, {"ret", "x"}}));
    EXPECT_TRUE(s.contains("20261121180000000001"));
  }
  spool again(dir);
  auto all = again.load_all();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(nlohmann::json::from_msgpack(all[0])["jid"], "20261121180000000001");
  again.forget("20261121180000000001");
  EXPECT_FALSE(again.contains("20261121180000000001"));
  EXPECT_EQ(spool(dir).load_all().size(), 1u);
}

TEST(spool, damaged_file_is_dropped_not_sent) {
  test::temp_dir tmp("brine-spool");
  const std::string& dir = tmp.path();
  {
    spool s(dir);
    s.save("20261121180000000001", nlohmann::json::to_msgpack({{"jid", "20261121180000000001"}}));
    s.save("20261121180000000002", {0xc1});  // 0xc1: never used in MessagePack
  }
  spool again(dir);
  auto all = again.load_all();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(nlohmann::json::from_msgpack(all[0])["jid"], "20261121180000000001");
  EXPECT_FALSE(std::filesystem::exists(dir + "/20261121180000000002.ret"));
}

}  // namespace
}  // namespace brine::minion
