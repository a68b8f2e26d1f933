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

std::optional<int64_t> jid_generator::unix_micros(std::string_view jid) {
  if (jid.size() != 20) return std::nullopt;
  int64_t f[7] = {};
  const int widths[7] = {4, 2, 2, 2, 2, 2, 6};
  size_t at = 0;
  for (int i = 0; i < 7; ++i) {
    for (int k = 0; k < widths[i]; ++k, ++at) {
      char c = jid[at];
      if (c < '0' || c > '9') return std::nullopt;
      f[i] = f[i] * 10 + (c - '0');
    }
  }
  using namespace std::chrono;
  year_month_day ymd{year{static_cast<int>(f[0])}, month{static_cast<unsigned>(f[1])},
                     day{static_cast<unsigned>(f[2])}};
  if (!ymd.ok() || f[3] > 23 || f[4] > 59 || f[5] > 60) return std::nullopt;
  int64_t secs = sys_days{ymd}.time_since_epoch().count() * 86400 + f[3] * 3600 + f[4] * 60 + f[5];
  return secs * 1000000 + f[6];
}

bool jid_generator::valid(const std::string& jid) {
  if (jid.size() != 20) return false;
  for (char c : jid) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace brine::master
