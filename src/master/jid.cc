#include "master/jid.h"

#include <cctype>
#include <ctime>

namespace brine::master {

void jid_generator::set_slot(int slot) {
  std::lock_guard lock(mu_);
  slot_ = slot;
}

std::string jid_generator::next() {
  int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  std::lock_guard lock(mu_);
  if (slot_ < 0) {
    if (now <= last_) now = last_ + 1;
  } else {
    now = now / 100 * 100 + slot_;
    if (now <= last_) now = last_ + 100;
  }
  last_ = now;
  return format(now);
}

std::string jid_generator::format(int64_t unix_micros) {
  time_t secs = static_cast<time_t>(unix_micros / 1000000);
  struct tm tm {};
  ::gmtime_r(&secs, &tm);
  char buf[80];  // room for any int fields, so the compiler can prove no truncation
  std::snprintf(buf, sizeof buf, "%04d%02d%02d%02d%02d%02d%06lld", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<long long>(unix_micros % 1000000));
  return buf;
}

bool jid_generator::valid(const std::string& jid) {
  if (jid.size() != 20) return false;
  for (char c : jid) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace brine::master
