#pragma once

#include <cstdint>
#include <vector>

#include "schedule/spread.h"

namespace brine::schedule {

// The runs that minions' jobs start in each of `buckets` buckets of
// `bucket_ms`, from `start_ms` (unix ms) on: what `brine schedule plan`
// shows per minute. Splay is left out (it is random).
std::vector<uint32_t> runs_per_bucket(const std::vector<std::vector<job_timing>>& minions,
                                      int64_t start_ms, int64_t bucket_ms, size_t buckets);

// Peak and mean of a histogram, and the peak over the mean (0 when empty).
struct load_summary {
  uint32_t peak = 0;
  size_t peak_at = 0;
  double mean = 0;
  double peak_over_mean = 0;
};
load_summary summarise(const std::vector<uint32_t>& histogram);

}  // namespace brine::schedule
