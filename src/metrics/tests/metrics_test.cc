#include "metrics/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

namespace brine::metrics {
namespace {

TEST(Metrics, CounterExposition) {
  registry r;
  counter& c = r.add_counter("brine_things_total", "Things counted.");
  c.inc();
  c.inc(41);
  EXPECT_EQ(c.value(), 42u);
  EXPECT_EQ(r.expose(),
            "# HELP brine_things_total Things counted.\n"
            "# TYPE brine_things_total counter\n"
            "brine_things_total 42\n");
}

TEST(Metrics, CounterSumsEveryThreadsShard) {
  registry r;
  counter& c = r.add_counter("brine_c_total", "c");
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&c] {
      for (int i = 0; i < 10000; ++i) c.inc();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.value(), 160000u);
}

TEST(Metrics, GaugeGoesBothWays) {
  registry r;
  gauge& g = r.add_gauge("brine_in_flight", "In flight.");
  g.inc();
  g.inc();
  g.dec();
  g.add(0.5);
  EXPECT_EQ(r.expose(),
            "# HELP brine_in_flight In flight.\n"
            "# TYPE brine_in_flight gauge\n"
            "brine_in_flight 1.5\n");
  g.set(-3);
  EXPECT_DOUBLE_EQ(g.value(), -3);
}

TEST(Metrics, HistogramBucketsAreCumulativeAndLeInclusive) {
  registry r;
  histogram& h = r.add_histogram("brine_latency_seconds", "Latency.", {0.1, 1, 2.5});
  h.observe(0.05);
  h.observe(0.1);  // le: on the bound counts in that bucket
  h.observe(0.7);
  h.observe(3);
  h.observe(100);
  EXPECT_EQ(r.expose(),
            "# HELP brine_latency_seconds Latency.\n"
            "# TYPE brine_latency_seconds histogram\n"
            "brine_latency_seconds_bucket{le=\"0.1\"} 2\n"
            "brine_latency_seconds_bucket{le=\"1\"} 3\n"
            "brine_latency_seconds_bucket{le=\"2.5\"} 3\n"
            "brine_latency_seconds_bucket{le=\"+Inf\"} 5\n"
            "brine_latency_seconds_sum 103.85\n"
            "brine_latency_seconds_count 5\n");
  auto s = h.read();
  EXPECT_EQ(s.count(), 5u);
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{2, 3, 3, 5}));
}

TEST(Metrics, HistogramFamilyPutsLeLast) {
  registry r;
  auto& f = r.add_histogram_family("brine_run_seconds", "Runs.", {"status"}, {1});
  f.with({"failed"}).observe(2);
  f.with({"changed"}).observe(0.5);
  EXPECT_EQ(r.expose(),
            "# HELP brine_run_seconds Runs.\n"
            "# TYPE brine_run_seconds histogram\n"
            "brine_run_seconds_bucket{status=\"changed\",le=\"1\"} 1\n"
            "brine_run_seconds_bucket{status=\"changed\",le=\"+Inf\"} 1\n"
            "brine_run_seconds_sum{status=\"changed\"} 0.5\n"
            "brine_run_seconds_count{status=\"changed\"} 1\n"
            "brine_run_seconds_bucket{status=\"failed\",le=\"1\"} 0\n"
            "brine_run_seconds_bucket{status=\"failed\",le=\"+Inf\"} 1\n"
            "brine_run_seconds_sum{status=\"failed\"} 2\n"
            "brine_run_seconds_count{status=\"failed\"} 1\n");
}

TEST(Metrics, HistogramCountsFromManyThreads) {
  histogram h(seconds_buckets());
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&h] {
      for (int i = 0; i < 5000; ++i) h.observe(0.003);
    });
  }
  for (auto& t : threads) t.join();
  auto s = h.read();
  EXPECT_EQ(s.count(), 40000u);
  EXPECT_EQ(s.cumulative[1], 0u);      // le 0.0025
  EXPECT_EQ(s.cumulative[2], 40000u);  // le 0.005
  EXPECT_NEAR(s.sum, 120, 1e-6);
}

TEST(Metrics, LabelValuesAreEscaped) {
  registry r;
  auto& f = r.add_counter_family("brine_x_total", "Help with \\ and\nnewline.", {"path"});
  f.with({"a\"b\\c\nd"}).inc();
  EXPECT_EQ(r.expose(),
            "# HELP brine_x_total Help with \\\\ and\\nnewline.\n"
            "# TYPE brine_x_total counter\n"
            "brine_x_total{path=\"a\\\"b\\\\c\\nd\"} 1\n");
  EXPECT_EQ(escape_label_value("plain é"), "plain é");
}

TEST(Metrics, FamilyChildIsStable) {
  registry r;
  auto& f = r.add_counter_family("brine_y_total", "y", {"a", "b"});
  counter& one = f.with({"1", "2"});
  for (int i = 0; i < 100; ++i) f.with({std::to_string(i), "x"});
  EXPECT_EQ(&one, &f.with({"1", "2"}));
}

TEST(Metrics, CollectorAnswersWhenScraped) {
  registry r;
  int calls = 0;
  r.add_collector("brine_keys", "Keys.", kind::gauge, {"state"}, [&calls] {
    ++calls;
    return std::vector<sample>{{{"accepted"}, 3}, {{"pending"}, 0}};
  });
  EXPECT_EQ(r.expose(),
            "# HELP brine_keys Keys.\n"
            "# TYPE brine_keys gauge\n"
            "brine_keys{state=\"accepted\"} 3\n"
            "brine_keys{state=\"pending\"} 0\n");
  EXPECT_EQ(calls, 1);
}

TEST(Metrics, ValuesFormatAsPrometheusReadsThem) {
  EXPECT_EQ(format_value(0), "0");
  EXPECT_EQ(format_value(12345678901234.0), "12345678901234");
  EXPECT_EQ(format_value(0.1), "0.1");
  EXPECT_EQ(format_value(2.5e-7), "2.5e-07");
  EXPECT_EQ(format_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_value(std::nan("")), "NaN");
  EXPECT_EQ(std::stod(format_value(1.0 / 3)), 1.0 / 3);
}

TEST(Metrics, SnapshotAsJson) {
  registry r;
  r.add_counter("brine_a_total", "a").inc(2);
  r.add_histogram_family("brine_h_seconds", "h", {"status"}, {1}).with({"ok"}).observe(0.5);
  auto j = r.snapshot();
  EXPECT_EQ(j["brine_a_total"], 2);
  ASSERT_EQ(j["brine_h_seconds"].size(), 1u);
  EXPECT_EQ(j["brine_h_seconds"][0]["labels"]["status"], "ok");
  EXPECT_EQ(j["brine_h_seconds"][0]["value"]["count"], 1);
  EXPECT_EQ(j["brine_h_seconds"][0]["value"]["buckets"]["1"], 1);
  EXPECT_EQ(j["brine_h_seconds"][0]["value"]["buckets"]["+Inf"], 1);
}

TEST(MetricsDeath, BadOrRepeatedNamesAbort) {
  EXPECT_DEATH(registry().add_counter("brine-bad", "x"), "bad metric name");
  EXPECT_DEATH(registry().add_counter_family("brine_x_total", "x", {"__reserved"}), "bad label");
  EXPECT_DEATH(registry().add_histogram_family("brine_h", "x", {"le"}, {1}), "bad label");
  EXPECT_DEATH(
      {
        registry r;
        r.add_counter("brine_x_total", "x");
        r.add_gauge("brine_x_total", "x");
      },
      "registered twice");
  EXPECT_DEATH(registry().add_histogram("brine_h", "x", {1, 1}), "strictly increasing");
  EXPECT_DEATH(registry().add_counter_family("brine_x_total", "x", {"a"}).with({"1", "2"}),
               "labelled with 2 values for 1 labels");
}

}  // namespace
}  // namespace brine::metrics
