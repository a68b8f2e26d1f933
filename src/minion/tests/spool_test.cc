#include "minion/spool.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "minion/jid_history.h"
#include "support/temp_dir.h"

namespace brine::minion {
namespace {

using nlohmann::json;

encoded_return body(const std::string& jid, const std::string& origin, json ret = true) {
  return json::to_msgpack({{"jid", jid}, {"ret", std::move(ret)}, {"origin", origin}});
}

TEST(spool, survives_restart_until_forgotten) {
  test::temp_dir tmp("brine-spool");
  const std::string& dir = tmp.path();
  {
    spool s(dir);
    s.save("20261121180000000001", "m1:4506", body("20261121180000000001", "m1:4506"));
    s.save("20261121180000000002", "m2:4506", body("20261121180000000002", "m2:4506", "x"));
    EXPECT_TRUE(s.contains("20261121180000000001"));
  }
  spool again(dir);
  EXPECT_EQ(again.size(), 2u);
  auto all = again.load_all();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].jid, "20261121180000000001");
  EXPECT_EQ(all[0].origin, "m1:4506");
  EXPECT_EQ(all[1].origin, "m2:4506");
  EXPECT_EQ(json::from_msgpack(all[0].bytes)["jid"], "20261121180000000001");
  EXPECT_TRUE(again.owes("m2:4506"));
  again.forget("20261121180000000002");
  EXPECT_FALSE(again.owes("m2:4506"));
  EXPECT_FALSE(again.contains("20261121180000000002"));
  EXPECT_EQ(spool(dir).load_all().size(), 1u);
}

TEST(spool, loads_only_the_returns_asked_for_and_names_their_masters) {
  test::temp_dir tmp("brine-spool");
  spool s(tmp.path());
  s.save("20261121180000000001", "m1:4506", body("20261121180000000001", "m1:4506"));
  s.save("20261121180000000002", "m2:4506", body("20261121180000000002", "m2:4506"));
  s.save("20261121180000000003", "m1:4506", body("20261121180000000003", "m1:4506"));
  EXPECT_EQ(s.origins(), (std::set<std::string>{"m1:4506", "m2:4506"}));
  auto m1 = s.load([](const std::string& o) { return o == "m1:4506"; });
  ASSERT_EQ(m1.size(), 2u);
  EXPECT_EQ(m1[0].jid, "20261121180000000001");
  EXPECT_EQ(m1[1].jid, "20261121180000000003");
  EXPECT_TRUE(s.load([](const std::string&) { return false; }).empty());
  memory_spool mem;
  mem.save("20261121180000000002", "m2:4506", body("20261121180000000002", "m2:4506"));
  EXPECT_EQ(mem.origins(), (std::set<std::string>{"m2:4506"}));
  EXPECT_EQ(mem.load([](const std::string& o) { return o == "m2:4506"; }).size(), 1u);
}

TEST(spool, counts_bytes_across_restarts) {
  test::temp_dir tmp("brine-spool");
  auto a = body("20261121180000000001", "m1:4506", std::string(1000, 'a'));
  auto b = body("20261121180000000002", "m1:4506", std::string(500, 'b'));
  {
    spool s(tmp.path());
    EXPECT_EQ(s.bytes(), 0u);
    s.save("20261121180000000001", "m1:4506", a);
    s.save("20261121180000000002", "m1:4506", b);
    EXPECT_EQ(s.bytes(), a.size() + b.size());
    s.save("20261121180000000002", "m1:4506", b);  // saved again: counted once
    EXPECT_EQ(s.bytes(), a.size() + b.size());
  }
  spool again(tmp.path());
  EXPECT_EQ(again.bytes(), a.size() + b.size());
  again.forget("20261121180000000001");
  EXPECT_EQ(again.bytes(), b.size());
  again.forget("20261121180000000001");  // twice: no change
  EXPECT_EQ(again.bytes(), b.size());
}

TEST(spool, return_of_an_older_brine_has_no_origin) {
  test::temp_dir tmp("brine-spool");
  {
    std::ofstream f(tmp.path() + "/20261121180000000001.ret");
    auto old = json::to_msgpack({{"jid", "20261121180000000001"}, {"ret", true}});
    f.write(reinterpret_cast<const char*>(old.data()), static_cast<std::streamsize>(old.size()));
  }
  spool s(tmp.path());
  auto all = s.load_all();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].origin, "");
}

TEST(spool, damaged_file_is_dropped_not_sent) {
  test::temp_dir tmp("brine-spool");
  const std::string& dir = tmp.path();
  {
    spool s(dir);
    s.save("20261121180000000001", "m1:4506", body("20261121180000000001", "m1:4506"));
    s.save("20261121180000000002", "m1:4506", {0xc1});  // 0xc1: never used in MessagePack
  }
  spool again(dir);
  auto all = again.load_all();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(json::from_msgpack(all[0].bytes)["jid"], "20261121180000000001");
  EXPECT_EQ(again.size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(dir + "/20261121180000000002.ret"));
}

TEST(memory_spool, keeps_origin_bytes_and_count) {
  memory_spool s;
  auto a = body("20261121180000000001", "m1:4506");
  s.save("20261121180000000001", "m1:4506", a);
  EXPECT_TRUE(s.owes("m1:4506"));
  EXPECT_FALSE(s.owes("m2:4506"));
  EXPECT_EQ(s.bytes(), a.size());
  EXPECT_EQ(s.load_all()[0].origin, "m1:4506");
  s.forget("20261121180000000001");
  EXPECT_EQ(s.bytes(), 0u);
  EXPECT_EQ(s.size(), 0u);
}

std::string jid_at(int64_t unix_seconds, int micros) {
  time_t t = static_cast<time_t>(unix_seconds);
  struct tm tm {};
  ::gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d%02d%02d%02d%02d%02d%06d", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, micros);
  return buf;
}

TEST(jid_history, a_jid_is_taken_once) {
  jid_history h("", 24, 1000);
  EXPECT_TRUE(h.insert("20261121180000000001"));
  EXPECT_FALSE(h.insert("20261121180000000001"));
  EXPECT_TRUE(h.contains("20261121180000000001"));
  EXPECT_FALSE(h.contains("20261121180000000002"));
  EXPECT_TRUE(h.insert("20261121180000000002"));
  EXPECT_EQ(h.size(), 2u);
}

TEST(jid_history, bounded_by_count_oldest_first) {
  jid_history h("", 24, 3);
  for (int i = 1; i <= 5; ++i) h.insert("2026112118000000000" + std::to_string(i));
  EXPECT_EQ(h.size(), 3u);
  EXPECT_FALSE(h.contains("20261121180000000001"));
  EXPECT_FALSE(h.contains("20261121180000000002"));
  EXPECT_TRUE(h.contains("20261121180000000005"));
}

TEST(jid_history, survives_restart_and_forgets_old_jids) {
  test::temp_dir tmp("brine-jids");
  std::string path = tmp.path() + "/jids";
  int64_t now = std::time(nullptr);
  std::string recent = jid_at(now - 60, 1);
  std::string old = jid_at(now - 30 * 3600, 2);
  {
    jid_history h(path, 24, 1000);
    h.insert(old);
    h.insert(recent);
    h.insert("not a jid");  // ignored, never remembered
  }
  {
    // A torn line from a crash mid-write is skipped.
    std::ofstream f(path, std::ios::app);
    f << "2026112";
  }
  jid_history again(path, 24, 1000);
  EXPECT_TRUE(again.contains(recent));
  EXPECT_FALSE(again.contains(old));  // older than 24 h by its own time
  EXPECT_FALSE(again.insert(recent));
  EXPECT_EQ(again.size(), 1u);
}

TEST(jid_history, jid_time_reads_the_masters_clock) {
  EXPECT_EQ(jid_history::jid_time("19700101000001000000"), 1);
  EXPECT_EQ(jid_history::jid_time(jid_at(1795000000, 5)), 1795000000);
  EXPECT_EQ(jid_history::jid_time("x"), -1);
}

}  // namespace
}  // namespace brine::minion
