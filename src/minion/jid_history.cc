#include "minion/jid_history.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <sstream>

#include "base/clock.h"
#include "base/error.h"
#include "base/fs.h"

namespace brine::minion {

bool jid_history::to_key(const std::string& jid, key& out) {
  if (jid.size() != 20) return false;
  key k;
  for (size_t i = 0; i < jid.size(); ++i) {
    char c = jid[i];
    if (c < '0' || c > '9') return false;
    if (i < 14) {
      k.seconds = k.seconds * 10 + static_cast<uint64_t>(c - '0');
    } else {
      k.micros = k.micros * 10 + static_cast<uint32_t>(c - '0');
    }
  }
  out = k;
  return true;
}

int64_t jid_history::jid_time(const std::string& jid) {
  key k;
  if (!to_key(jid, k)) return -1;
  struct tm tm {};
  auto num = [&](size_t pos, size_t len) { return std::stoi(jid.substr(pos, len)); };
  tm.tm_year = num(0, 4) - 1900;
  tm.tm_mon = num(4, 2) - 1;
  tm.tm_mday = num(6, 2);
  tm.tm_hour = num(8, 2);
  tm.tm_min = num(10, 2);
  tm.tm_sec = num(12, 2);
  return static_cast<int64_t>(::timegm(&tm));
}

jid_history::jid_history(std::string path, int retention_hours, size_t max_entries)
    : path_(std::move(path)),
      retention_s_(int64_t{retention_hours} * 3600),
      max_entries_(max_entries) {
  if (path_.empty()) return;
  std::string kept;
  if (base::file_exists(path_)) {
    std::istringstream in(base::read_file(path_));
    std::string line;
    while (std::getline(in, line)) {
      key k;
      if (!to_key(line, k)) continue;  // a torn last line after a crash
      // Arrival times are not kept on disk; the jid's time stands in.
      remember(k, jid_time(line));
    }
    prune(base::unix_now());
    for (const auto& [k, t] : order_) {
      char buf[32];
      int n = std::snprintf(buf, sizeof buf, "%014llu%06u\n",
                            static_cast<unsigned long long>(k.seconds), k.micros);
      kept.append(buf, static_cast<size_t>(n));
    }
  }
  // Compacted through rename, so a crash here leaves the old file whole.
  base::write_file_atomic(path_, kept, 0600);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) throw base::error(path_ + ": cannot open: " + std::strerror(errno));
}

jid_history::~jid_history() {
  if (fd_ >= 0) ::close(fd_);
}

void jid_history::remember(key k, int64_t t) {
  if (!set_.insert(k).second) return;
  order_.emplace_back(k, t);
}

void jid_history::prune(int64_t now) {
  while (!order_.empty() &&
         (order_.size() > max_entries_ || order_.front().second < now - retention_s_)) {
    set_.erase(order_.front().first);
    order_.pop_front();
  }
}

bool jid_history::insert(const std::string& jid) {
  key k;
  if (!to_key(jid, k)) {
    // Not a jid: nothing to remember it by; the master refuses such jids anyway.
    return true;
  }
  {
    std::lock_guard lock(mu_);
    if (set_.contains(k)) return false;
    // By when it arrived, not by the jid's time: a master whose clock is
    // behind must not have its jids forgotten at once.
    int64_t now = base::unix_now();
    remember(k, now);
    prune(now);
  }
  if (fd_ >= 0) {
    std::string line = jid + "\n";
    // O_APPEND: one write is one line, whatever other threads write.
    if (::write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      spdlog::warn(
          "{}: cannot record job {} ({}); after a restart of this minion it could run "
          "again if a master re-sends it",
          path_, jid, std::strerror(errno));
    }
  }
  return true;
}

bool jid_history::contains(const std::string& jid) const {
  key k;
  if (!to_key(jid, k)) return false;
  std::lock_guard lock(mu_);
  return set_.contains(k);
}

size_t jid_history::size() const {
  std::lock_guard lock(mu_);
  return order_.size();
}

}  // namespace brine::minion
