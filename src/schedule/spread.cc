#include "schedule/spread.h"

#include <algorithm>
#include <cmath>

namespace brine::schedule {

uint64_t fqdn_rand(std::string_view id, std::string_view seed, uint64_t max) {
  if (max == 0) return 0;
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
  };
  mix(id);
  mix(std::string_view("\0", 1));
  mix(seed);
  // splitmix64's finaliser: FNV alone leaves the low bits of similar ids
  // (web0001, web0002, ...) too close together.
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h % max;
}

int64_t next_slot(int64_t now_ms, int64_t period_ms, int64_t offset_ms) {
  if (period_ms <= 0) return now_ms;
  offset_ms = ((offset_ms % period_ms) + period_ms) % period_ms;
  int64_t base = now_ms - (((now_ms - offset_ms) % period_ms) + period_ms) % period_ms;
  return base < now_ms ? base + period_ms : base;
}

uint64_t harmonic_period(uint64_t period_s, uint64_t base_s) {
  if (base_s == 0 || period_s == 0) return period_s;
  // The candidates: base * 2^k, and base / 2^k while it stays a whole number
  // of seconds (else the periods would not divide each other).
  std::vector<uint64_t> candidates;
  for (uint64_t q = base_s;; q /= 2) {
    candidates.push_back(q);
    if (q % 2 != 0) break;
  }
  for (uint64_t q = base_s * 2; q <= (uint64_t{1} << 40); q *= 2) candidates.push_back(q);
  uint64_t best = base_s;
  double best_distance = 1e300;
  const double want = std::log2(static_cast<double>(period_s));
  for (uint64_t q : candidates) {
    double d = std::abs(std::log2(static_cast<double>(q)) - want);
    // Ties go to the longer period: fewer runs, never more load.
    if (d < best_distance - 1e-12 || (std::abs(d - best_distance) <= 1e-12 && q > best)) {
      best = q;
      best_distance = d;
    }
  }
  return best;
}

std::vector<job_timing> timings(std::string_view id, const std::vector<job_period>& jobs,
                                bool harmonic) {
  std::vector<job_timing> out;
  out.reserve(jobs.size());
  for (const auto& j : jobs) {
    out.push_back({j.name, static_cast<int64_t>(j.seconds) * 1000, 0});
  }
  if (out.empty()) return out;
  int64_t shortest = out.front().period_ms;
  for (const auto& t : out) shortest = std::min(shortest, t.period_ms);
  bool divides = harmonic;
  for (const auto& t : out) divides = divides && t.period_ms % shortest == 0;
  if (!divides) {
    for (auto& t : out) {
      t.offset_ms = static_cast<int64_t>(fqdn_rand(id, t.name, static_cast<uint64_t>(t.period_ms)));
    }
    return out;
  }
  std::vector<size_t> order(out.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return out[a].name < out[b].name; });
  int64_t phase = static_cast<int64_t>(fqdn_rand(id, "", static_cast<uint64_t>(shortest)));
  int64_t n = static_cast<int64_t>(out.size());
  for (int64_t rank = 0; rank < n; ++rank) {
    auto& t = out[order[static_cast<size_t>(rank)]];
    int64_t turn = (phase + rank * shortest / n) % shortest;
    int64_t cycles = t.period_ms / shortest;
    t.offset_ms = turn + shortest * static_cast<int64_t>(
                                        fqdn_rand(id, t.name, static_cast<uint64_t>(cycles)));
  }
  return out;
}

}  // namespace brine::schedule
