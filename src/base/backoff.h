#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>

namespace brine::base {

// `d` drawn at random from its upper half, [d/2, d] ("equal jitter"): what
// backoff does to each wait, for waits that do not double.
inline std::chrono::milliseconds equal_jitter(std::chrono::milliseconds d) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<int64_t> half(d.count() / 2, d.count());
  return std::chrono::milliseconds(half(rng));
}

// Waits between retries of something that failed: they double from `first`
// up to `cap`, and each is drawn at random from its upper half ([d/2, d],
// "equal jitter") so that many processes retrying one server spread out.
// reset() after a success starts again from `first`.
//
// Not thread-safe: one per retry loop, used under that loop's lock.
class backoff {
 public:
  backoff(std::chrono::milliseconds first, std::chrono::milliseconds cap)
      : first_(first), cap_(std::max(cap, first)), next_(first) {}

  // The wait before the next try.
  std::chrono::milliseconds next() {
    std::chrono::milliseconds d = next_;
    next_ = std::min(next_ * 2, cap_);
    ++tries_;
    return equal_jitter(d);
  }
  void reset() {
    next_ = first_;
    tries_ = 0;
  }
  // How many waits next() gave since the last reset().
  uint32_t tries() const { return tries_; }

 private:
  std::chrono::milliseconds first_;
  std::chrono::milliseconds cap_;
  std::chrono::milliseconds next_;
  uint32_t tries_ = 0;
};

}  // namespace brine::base
