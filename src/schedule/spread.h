#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace brine::schedule {

// Puppet's fqdn_rand: a number in [0, max) from a minion's id and a seed,
// the same on every host, at every start, for ever (FNV-1a over the bytes,
// then splitmix64's finaliser, so that ids that differ in one digit land
// far apart). max 0 gives 0.
uint64_t fqdn_rand(std::string_view id, std::string_view seed, uint64_t max);

// The first slot at or after `now_ms` of a job whose slots are the wall
// clock times t (unix ms) with t mod period == offset.
int64_t next_slot(int64_t now_ms, int64_t period_ms, int64_t offset_ms);

// `period_s` rounded to the nearest base_s * 2^k (k of either sign; nearest
// on a log scale, ties up), not below one second: periods that divide each
// other, so the waves of different intervals cannot drift into each other.
uint64_t harmonic_period(uint64_t period_s, uint64_t base_s);

// One job's place on the clock: its period and its offset in it.
struct job_timing {
  std::string name;
  int64_t period_ms = 0;
  int64_t offset_ms = 0;
};

struct job_period {
  std::string name;
  uint64_t seconds = 0;
};

// Where the jobs of minion `id` run. Each job's offset is fqdn_rand(id,
// job name) within its period. With `harmonic` (every period divides the
// longer ones), the minion's jobs instead share one phase within the
// shortest period, fqdn_rand(id), and take turns after it, in name order,
// spaced by shortest/n: no two of its jobs ever start together, and over the
// fleet each job is still spread evenly over its own period. The result is
// in the order of `jobs`.
std::vector<job_timing> timings(std::string_view id, const std::vector<job_period>& jobs,
                                bool harmonic);

}  // namespace brine::schedule
