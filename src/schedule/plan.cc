#include "schedule/plan.h"

namespace brine::schedule {

std::vector<uint32_t> runs_per_bucket(const std::vector<std::vector<job_timing>>& minions,
                                      int64_t start_ms, int64_t bucket_ms, size_t buckets) {
  std::vector<uint32_t> out(buckets, 0);
  if (bucket_ms <= 0 || buckets == 0) return out;
  const int64_t end = start_ms + bucket_ms * static_cast<int64_t>(buckets);
  for (const auto& jobs : minions) {
    for (const auto& j : jobs) {
      if (j.period_ms <= 0) continue;
      for (int64_t t = next_slot(start_ms, j.period_ms, j.offset_ms); t < end; t += j.period_ms) {
        ++out[static_cast<size_t>((t - start_ms) / bucket_ms)];
      }
    }
  }
  return out;
}

load_summary summarise(const std::vector<uint32_t>& histogram) {
  load_summary s;
  if (histogram.empty()) return s;
  uint64_t total = 0;
  for (size_t i = 0; i < histogram.size(); ++i) {
    total += histogram[i];
    if (histogram[i] > s.peak) {
      s.peak = histogram[i];
      s.peak_at = i;
    }
  }
  s.mean = static_cast<double>(total) / static_cast<double>(histogram.size());
  s.peak_over_mean = s.mean > 0 ? s.peak / s.mean : 0;
  return s;
}

}  // namespace brine::schedule
