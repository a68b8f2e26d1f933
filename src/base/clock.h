#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

namespace brine::base {

// Unix seconds of `t`: what the job cache stores.
inline int64_t unix_seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

// Wall-clock seconds since the epoch: what the job cache stores.
inline int64_t unix_now() { return unix_seconds(std::chrono::system_clock::now()); }

// The wall clock as a class that keeps deadlines or stamps records holds it,
// so that its tests set the time instead of waiting for it (master/delivery).
// Called from any thread the holder calls it from.
using wall_clock = std::function<std::chrono::system_clock::time_point()>;
inline wall_clock system_wall_clock() {
  return [] { return std::chrono::system_clock::now(); };
}

}  // namespace brine::base
