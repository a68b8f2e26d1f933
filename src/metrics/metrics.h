#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

// Counters, gauges and histograms, and their Prometheus text exposition.
// The hot paths of a master (a return, a publish, a handshake) count here,
// hundreds of thousands of times a second at 100k minions: an increment is
// one relaxed atomic add on a cache line of the calling thread's shard, never
// a lock and never a line that another thread writes. Reading (a scrape)
// adds the shards up; it may see one shard's increment before another's, so
// figures read while they move are each exact at some instant of the read.
namespace brine::metrics {

namespace detail {
// Shards per metric: threads are spread over them round robin (brine's
// daemons run a handful of threads, so two rarely share one).
inline constexpr size_t k_shards = 8;
// This thread's shard, chosen once.
size_t shard_index() noexcept;
struct alignas(64) padded_count {
  std::atomic<uint64_t> v{0};
};
}  // namespace detail

// Only goes up (Prometheus `counter`). Thread-safe.
class counter {
 public:
  void inc(uint64_t n = 1) noexcept {
    shards_[detail::shard_index()].v.fetch_add(n, std::memory_order_relaxed);
  }
  uint64_t value() const noexcept;

 private:
  std::array<detail::padded_count, detail::k_shards> shards_;
};

// Goes up and down, or is set (Prometheus `gauge`). Thread-safe; meant for
// figures that change at most a few thousand times a second (handshakes in
// flight), not for per-message paths.
class gauge {
 public:
  void set(double v) noexcept { v_.store(v, std::memory_order_relaxed); }
  void add(double d) noexcept { v_.fetch_add(d, std::memory_order_relaxed); }
  void inc() noexcept { add(1); }
  void dec() noexcept { add(-1); }
  double value() const noexcept { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> v_{0};
};

// Observations counted into buckets by upper bound (Prometheus `histogram`),
// with their sum. Thread-safe; observe() is a search among the bounds and
// two relaxed atomic adds on the calling thread's shard.
class histogram {
 public:
  // `bounds`: strictly increasing upper bounds (finite); +Inf is implied.
  explicit histogram(std::vector<double> bounds);

  void observe(double v) noexcept;

  struct snapshot {
    std::vector<double> bounds;        // without +Inf
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf: the count
    double sum = 0;
    uint64_t count() const { return cumulative.back(); }
  };
  snapshot read() const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  struct alignas(64) shard {
    std::atomic<double> sum{0};
    // bounds_.size() + 1 counts (the last for +Inf), each bucket alone
    // (not cumulative); padded so that no other shard's counts share a line.
    std::unique_ptr<std::atomic<uint64_t>[]> counts;
  };
  std::vector<double> bounds_;
  std::array<shard, detail::k_shards> shards_;
};

// Bucket bounds: `start`, start * factor, ... (`n` of them).
std::vector<double> exponential_buckets(double start, double factor, size_t n);
// Seconds, from a millisecond to an hour: for latencies and durations.
std::vector<double> seconds_buckets();

// One metric name with labels: a child per combination of label values,
// made on first use and kept (its address never changes, so a hot path
// looks it up once and keeps the reference). Thread-safe.
template <class M>
class family {
 public:
  using factory = std::function<std::unique_ptr<M>()>;
  family(std::vector<std::string> label_names, factory make)
      : label_names_(std::move(label_names)), make_(std::move(make)) {}

  // The child for these label values, in the order of the label names
  // (aborts on a count that does not match them: a programming error).
  M& with(const std::vector<std::string>& values);
  M& with(std::initializer_list<std::string_view> values) {
    return with(std::vector<std::string>(values.begin(), values.end()));
  }

  const std::vector<std::string>& label_names() const { return label_names_; }
  // Every child, in label-value order, for exposition.
  template <class Fn>
  void each(Fn&& fn) const {
    std::lock_guard lock(mu_);
    for (const auto& [values, child] : children_) fn(values, *child);
  }

 private:
  std::vector<std::string> label_names_;
  factory make_;
  mutable std::mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<M>> children_;
};

// A figure read when scraped (keys per state, connected minions): each call
// answers its samples, one per combination of label values.
struct sample {
  std::vector<std::string> label_values;
  double value = 0;
};
using collector = std::function<std::vector<sample>()>;

enum class kind { counter, gauge, histogram };

// The metrics of one process, in registration order, and their exposition.
// Names follow Prometheus' rules ([a-zA-Z_:][a-zA-Z0-9_:]*; label names
// without `:`, not starting with `__`, never `le`); a bad or repeated name
// is a programming error and aborts. Registration is thread-safe but
// belongs to start-up; the references it answers live as long as the
// registry.
class registry {
 public:
  registry();
  ~registry();
  registry(const registry&) = delete;
  registry& operator=(const registry&) = delete;

  counter& add_counter(std::string name, std::string help);
  gauge& add_gauge(std::string name, std::string help);
  histogram& add_histogram(std::string name, std::string help, std::vector<double> bounds);
  family<counter>& add_counter_family(std::string name, std::string help,
                                      std::vector<std::string> labels);
  family<gauge>& add_gauge_family(std::string name, std::string help,
                                  std::vector<std::string> labels);
  family<histogram>& add_histogram_family(std::string name, std::string help,
                                          std::vector<std::string> labels,
                                          std::vector<double> bounds);
  // A figure computed when scraped, as a gauge or a counter.
  void add_collector(std::string name, std::string help, kind k, std::vector<std::string> labels,
                     collector fn);

  // The Prometheus text exposition format (version 0.0.4): for each metric
  // `# HELP`, `# TYPE`, then its samples.
  std::string expose() const;
  // The same figures as JSON: name -> value (no labels), or a list of
  // {labels: {name: value}, value} (histograms: {count, sum, buckets: {le:
  // cumulative count}} in place of a value).
  nlohmann::json snapshot() const;

 private:
  struct entry;
  entry& add(std::string name, std::string help, kind k, std::vector<std::string> labels);

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<entry>> entries_;
};

// The media type of expose()'s text.
inline constexpr std::string_view k_content_type = "text/plain; version=0.0.4; charset=utf-8";

// Escapes a label value for the text format: backslash, double quote and
// line feed as \\, \" and \n.
std::string escape_label_value(std::string_view v);
// Escapes a HELP text: backslash and line feed.
std::string escape_help(std::string_view v);
// A sample value as the text format writes it: the shortest decimal that
// reads back to the same double, integers without a fraction, +Inf, -Inf
// and NaN spelled so.
std::string format_value(double v);

template <class M>
M& family<M>::with(const std::vector<std::string>& values) {
  if (values.size() != label_names_.size()) {
    std::fprintf(stderr, "brine: metric labelled with %zu values for %zu labels\n", values.size(),
                 label_names_.size());
    std::abort();
  }
  std::lock_guard lock(mu_);
  auto it = children_.find(values);
  if (it == children_.end()) it = children_.emplace(values, make_()).first;
  return *it->second;
}

}  // namespace brine::metrics
