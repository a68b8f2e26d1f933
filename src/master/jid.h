#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace brine::master {

// Salt's job id form, YYYYMMDDhhmmssffffff (UTC, microseconds). Strictly
// increasing within one generator, so unique per master even when two jobs
// start in the same microsecond.
//
// Masters sharing a store each hold a slot in [0, 100) (store::
// claim_master_slot): their jids end with it, at a resolution of 100 us, so
// that two masters never mint the same jid. A burst of more than one jid per
// 100 us runs ahead of the clock by that much; order is kept.
class jid_generator {
 public:
  // Slot 0..99, or -1 (the default): a master alone on its store, full
  // microsecond resolution.
  void set_slot(int slot);
  std::string next();
  static std::string format(int64_t unix_micros);
  static bool valid(const std::string& jid);
  // format()'s inverse: when `jid` was minted, in microseconds since the
  // epoch; nullopt when it is not a valid jid.
  static std::optional<int64_t> unix_micros(std::string_view jid);

 private:
  std::mutex mu_;
  int64_t last_ = 0;
  int slot_ = -1;
};

}  // namespace brine::master
