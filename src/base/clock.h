#pragma once

#include <chrono>
#include <cstdint>

namespace brine::base {

// Wall-clock seconds since the epoch: what the job cache stores.
inline int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace brine::base
