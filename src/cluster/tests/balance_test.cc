#include "cluster/balance.h"

#include <gtest/gtest.h>

namespace brine::cluster {
namespace {

member live(const std::string& name, int64_t connected) {
  member m;
  m.record.name = name;
  m.record.stats = {{"connected", connected}};
  m.verified = true;
  m.alive = true;
  return m;
}

// A balancer that has seen these members alive for long enough.
balancer settled(const std::vector<member>& members, const std::string& me, int64_t& now) {
  balancer b;
  b.after_heartbeat(members, me, now);
  now += balancer::k_settle_ms;
  return b;
}

TEST(ClusterBalance, AMemberOverItsShareShedsHalfTheExcessWhileAnotherIsShort) {
  int64_t now = 1'000'000;
  std::vector<member> ms = {live("a", 0), live("b", 15), live("c", 15)};
  balancer b = settled(ms, "b", now);
  auto p = b.after_heartbeat(ms, "b", now);
  EXPECT_EQ(p.total, 30u);
  EXPECT_EQ(p.members, 3u);
  EXPECT_EQ(p.share, 10u);
  EXPECT_EQ(p.shed, 2u);  // (15 - 10) / 2
  // Not again within the interval, then again.
  ms = {live("a", 2), live("b", 13), live("c", 15)};
  EXPECT_EQ(b.after_heartbeat(ms, "b", now + 1000).shed, 0u);
  EXPECT_EQ(b.after_heartbeat(ms, "b", now + balancer::k_shed_interval_ms).shed, 1u);
  // The short member does not shed; at 12/9/9 (within a tenth, one) nor the others.
  balancer a = settled(ms, "a", now);
  EXPECT_EQ(a.after_heartbeat(ms, "a", now).shed, 0u);
  ms = {live("a", 9), live("b", 12), live("c", 9)};
  balancer calm = settled(ms, "b", now);
  EXPECT_EQ(calm.after_heartbeat(ms, "b", now).shed, 0u);
}

TEST(ClusterBalance, NothingIsShedWhileAMemberIsNewOrNoneIsShort) {
  int64_t now = 5'000'000;
  std::vector<member> ms = {live("a", 20), live("b", 20)};
  balancer b = settled(ms, "a", now);
  EXPECT_EQ(b.after_heartbeat(ms, "a", now).shed, 0u);  // even
  // A member joins: nothing until it has been alive k_settle_ms.
  ms.push_back(live("c", 0));
  EXPECT_EQ(b.after_heartbeat(ms, "a", now).shed, 0u);
  EXPECT_EQ(b.after_heartbeat(ms, "a", now + balancer::k_settle_ms - 1).shed, 0u);
  auto p = b.after_heartbeat(ms, "a", now + balancer::k_settle_ms);
  EXPECT_EQ(p.share, 14u);
  EXPECT_EQ(p.shed, 3u);  // (20 - 14) / 2
  // A member that died and came back is new again.
  ms[2].alive = false;
  now += 10 * balancer::k_settle_ms;
  EXPECT_EQ(b.after_heartbeat(ms, "a", now).shed, 0u);  // 20/20: even among the live
  ms[2].alive = true;
  EXPECT_EQ(b.after_heartbeat(ms, "a", now + 1000).shed, 0u);
  EXPECT_GT(b.after_heartbeat(ms, "a", now + 1000 + balancer::k_settle_ms).shed, 0u);
}

TEST(ClusterBalance, DeadRemovedAndSilentMembersDoNotCountAndARoundIsBounded) {
  int64_t now = 9'000'000;
  std::vector<member> ms = {live("a", 100000), live("b", 0), live("gone", 0), live("old", 0)};
  ms[2].record.removed = true;
  ms[3].record.stats = nlohmann::json::object();  // no connected figure
  balancer b = settled(ms, "a", now);
  auto p = b.after_heartbeat(ms, "a", now);
  EXPECT_EQ(p.members, 2u);
  EXPECT_EQ(p.share, 50000u);
  EXPECT_EQ(p.shed, balancer::k_max_shed);
  // Alone, nothing to balance.
  balancer one;
  EXPECT_EQ(one.after_heartbeat({live("a", 10)}, "a", now).shed, 0u);
}

}  // namespace
}  // namespace brine::cluster
