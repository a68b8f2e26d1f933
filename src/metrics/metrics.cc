#include "metrics/metrics.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

namespace brine::metrics {

namespace detail {

size_t shard_index() noexcept {
  static std::atomic<size_t> next{0};
  thread_local const size_t index = next.fetch_add(1, std::memory_order_relaxed) % k_shards;
  return index;
}

}  // namespace detail

namespace {

[[noreturn]] void misuse(const std::string& what) {
  std::fprintf(stderr, "brine: metrics: %s\n", what.c_str());
  std::abort();
}

bool valid_name(std::string_view n, bool label) {
  if (n.empty()) return false;
  auto first = [&](char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || (!label && c == ':');
  };
  auto rest = [&](char c) { return first(c) || std::isdigit(static_cast<unsigned char>(c)); };
  if (!first(n.front())) return false;
  return std::all_of(n.begin() + 1, n.end(), rest);
}

// Counts per shard: the buckets and +Inf, padded by a cache line on each
// side so that no two shards' counts share a line.
constexpr size_t k_pad = 64 / sizeof(std::atomic<uint64_t>);

}  // namespace

uint64_t counter::value() const noexcept {
  uint64_t sum = 0;
  for (const auto& s : shards_) sum += s.v.load(std::memory_order_relaxed);
  return sum;
}

histogram::histogram(std::vector<double> bounds) : bounds_(std::move(bounds)) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (!std::isfinite(bounds_[i]) || (i > 0 && bounds_[i] <= bounds_[i - 1])) {
      misuse("histogram bounds must be finite and strictly increasing");
    }
  }
  for (auto& s : shards_) {
    s.counts = std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1 + 2 * k_pad);
  }
}

void histogram::observe(double v) noexcept {
  // The first bound at or above v (Prometheus buckets are `le`); NaN counts
  // in +Inf only.
  size_t i =
      static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  if (std::isnan(v)) i = bounds_.size();
  shard& s = shards_[detail::shard_index()];
  s.counts[k_pad + i].fetch_add(1, std::memory_order_relaxed);
  s.sum.fetch_add(v, std::memory_order_relaxed);
}

histogram::snapshot histogram::read() const {
  snapshot out;
  out.bounds = bounds_;
  out.cumulative.assign(bounds_.size() + 1, 0);
  for (const auto& s : shards_) {
    for (size_t i = 0; i <= bounds_.size(); ++i) {
      out.cumulative[i] += s.counts[k_pad + i].load(std::memory_order_relaxed);
    }
    out.sum += s.sum.load(std::memory_order_relaxed);
  }
  for (size_t i = 1; i < out.cumulative.size(); ++i) out.cumulative[i] += out.cumulative[i - 1];
  return out;
}

std::vector<double> exponential_buckets(double start, double factor, size_t n) {
  std::vector<double> out;
  double b = start;
  for (size_t i = 0; i < n; ++i, b *= factor) out.push_back(b);
  return out;
}

std::vector<double> seconds_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
          2.5,   5,      10,    30,   60,    120,  300, 900,  3600};
}

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string escape_help(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

struct registry::entry {
  std::string name;
  std::string help;
  kind k;
  std::vector<std::string> labels;
  std::vector<double> bounds;  // histograms
  // Exactly one of these holds the figures.
  std::unique_ptr<family<counter>> counters;
  std::unique_ptr<family<gauge>> gauges;
  std::unique_ptr<family<histogram>> histograms;
  collector collect;
};

registry::registry() = default;
registry::~registry() = default;

registry::entry& registry::add(std::string name, std::string help, kind k,
                               std::vector<std::string> labels) {
  if (!valid_name(name, false)) misuse("bad metric name '" + name + "'");
  for (const auto& l : labels) {
    if (!valid_name(l, true) || l.rfind("__", 0) == 0 || (k == kind::histogram && l == "le")) {
      misuse("bad label name '" + l + "' of " + name);
    }
  }
  std::lock_guard lock(mu_);
  for (const auto& e : entries_) {
    if (e->name == name) misuse("metric " + name + " registered twice");
  }
  auto e = std::make_unique<entry>();
  e->name = std::move(name);
  e->help = std::move(help);
  e->k = k;
  e->labels = std::move(labels);
  entries_.push_back(std::move(e));
  return *entries_.back();
}

family<counter>& registry::add_counter_family(std::string name, std::string help,
                                              std::vector<std::string> labels) {
  entry& e = add(std::move(name), std::move(help), kind::counter, labels);
  e.counters = std::make_unique<family<counter>>(std::move(labels),
                                                 [] { return std::make_unique<counter>(); });
  return *e.counters;
}

family<gauge>& registry::add_gauge_family(std::string name, std::string help,
                                          std::vector<std::string> labels) {
  entry& e = add(std::move(name), std::move(help), kind::gauge, labels);
  e.gauges =
      std::make_unique<family<gauge>>(std::move(labels), [] { return std::make_unique<gauge>(); });
  return *e.gauges;
}

family<histogram>& registry::add_histogram_family(std::string name, std::string help,
                                                  std::vector<std::string> labels,
                                                  std::vector<double> bounds) {
  entry& e = add(std::move(name), std::move(help), kind::histogram, labels);
  // Checked now, not at the first child.
  histogram check(bounds);
  e.bounds = bounds;
  e.histograms = std::make_unique<family<histogram>>(
      std::move(labels), [bounds] { return std::make_unique<histogram>(bounds); });
  return *e.histograms;
}

counter& registry::add_counter(std::string name, std::string help) {
  return add_counter_family(std::move(name), std::move(help), {}).with(std::vector<std::string>{});
}

gauge& registry::add_gauge(std::string name, std::string help) {
  return add_gauge_family(std::move(name), std::move(help), {}).with(std::vector<std::string>{});
}

histogram& registry::add_histogram(std::string name, std::string help, std::vector<double> bounds) {
  return add_histogram_family(std::move(name), std::move(help), {}, std::move(bounds))
      .with(std::vector<std::string>{});
}

void registry::add_collector(std::string name, std::string help, kind k,
                             std::vector<std::string> labels, collector fn) {
  if (k == kind::histogram) misuse("a collector answers counters or gauges");
  entry& e = add(std::move(name), std::move(help), k, std::move(labels));
  e.collect = std::move(fn);
}

namespace {

// {a="x",b="y"}, with `extra` (a histogram's le) last; nothing when empty.
std::string label_set(const std::vector<std::string>& names, const std::vector<std::string>& values,
                      std::string_view extra_name = {}, std::string_view extra_value = {}) {
  if (names.empty() && extra_name.empty()) return {};
  std::string out = "{";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    out += names[i];
    out += "=\"";
    out += escape_label_value(i < values.size() ? values[i] : std::string());
    out += '"';
  }
  if (!extra_name.empty()) {
    if (!names.empty()) out += ',';
    out += extra_name;
    out += "=\"";
    out += extra_value;
    out += '"';
  }
  out += '}';
  return out;
}

const char* type_name(kind k) {
  switch (k) {
    case kind::counter:
      return "counter";
    case kind::gauge:
      return "gauge";
    case kind::histogram:
      return "histogram";
  }
  return "untyped";
}

nlohmann::json labels_json(const std::vector<std::string>& names,
                           const std::vector<std::string>& values) {
  nlohmann::json out = nlohmann::json::object();
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) out[names[i]] = values[i];
  return out;
}

nlohmann::json histogram_json(const histogram::snapshot& h) {
  nlohmann::json buckets = nlohmann::json::object();
  for (size_t i = 0; i < h.bounds.size(); ++i) buckets[format_value(h.bounds[i])] = h.cumulative[i];
  buckets["+Inf"] = h.count();
  return {{"count", h.count()}, {"sum", h.sum}, {"buckets", std::move(buckets)}};
}

}  // namespace

std::string registry::expose() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& e : entries_) {
    out += "# HELP " + e->name + " " + escape_help(e->help) + "\n";
    out += "# TYPE " + e->name + " " + type_name(e->k) + "\n";
    auto line = [&](const std::string& name, const std::string& labels, double v) {
      out += name;
      out += labels;
      out += ' ';
      out += format_value(v);
      out += '\n';
    };
    if (e->collect) {
      for (const auto& s : e->collect()) {
        line(e->name, label_set(e->labels, s.label_values), s.value);
      }
    } else if (e->counters) {
      e->counters->each([&](const std::vector<std::string>& values, const counter& c) {
        line(e->name, label_set(e->labels, values), static_cast<double>(c.value()));
      });
    } else if (e->gauges) {
      e->gauges->each([&](const std::vector<std::string>& values, const gauge& g) {
        line(e->name, label_set(e->labels, values), g.value());
      });
    } else if (e->histograms) {
      e->histograms->each([&](const std::vector<std::string>& values, const histogram& h) {
        auto snap = h.read();
        for (size_t i = 0; i < snap.bounds.size(); ++i) {
          line(e->name + "_bucket",
               label_set(e->labels, values, "le", format_value(snap.bounds[i])),
               static_cast<double>(snap.cumulative[i]));
        }
        line(e->name + "_bucket", label_set(e->labels, values, "le", "+Inf"),
             static_cast<double>(snap.count()));
        line(e->name + "_sum", label_set(e->labels, values), snap.sum);
        line(e->name + "_count", label_set(e->labels, values), static_cast<double>(snap.count()));
      });
    }
  }
  return out;
}

nlohmann::json registry::snapshot() const {
  std::lock_guard lock(mu_);
  nlohmann::json out = nlohmann::json::object();
  for (const auto& e : entries_) {
    nlohmann::json samples = nlohmann::json::array();
    auto add = [&](const std::vector<std::string>& values, nlohmann::json v) {
      samples.push_back({{"labels", labels_json(e->labels, values)}, {"value", std::move(v)}});
    };
    if (e->collect) {
      for (const auto& s : e->collect()) add(s.label_values, s.value);
    } else if (e->counters) {
      e->counters->each([&](const std::vector<std::string>& values, const counter& c) {
        add(values, c.value());
      });
    } else if (e->gauges) {
      e->gauges->each(
          [&](const std::vector<std::string>& values, const gauge& g) { add(values, g.value()); });
    } else if (e->histograms) {
      e->histograms->each([&](const std::vector<std::string>& values, const histogram& h) {
        add(values, histogram_json(h.read()));
      });
    }
    if (e->labels.empty()) {
      out[e->name] = samples.empty() ? nlohmann::json(0) : samples[0]["value"];
    } else {
      out[e->name] = std::move(samples);
    }
  }
  return out;
}

}  // namespace brine::metrics
