#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace brine::master {

// Salt's job id form, YYYYMMDDhhmmssffffff (UTC, microseconds). Strictly
// increasing within one generator, so unique per master even when two jobs
// start in the same microsecond.
class jid_generator {
 public:
  std::string next();
  static std::string format(int64_t unix_micros);
  static bool valid(const std::string& jid);

 private:
  std::mutex mu_;
  int64_t last_ = 0;
};

}  // namespace brine::master
