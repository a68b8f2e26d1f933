#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_set>

namespace brine::minion {

// The jids this minion has taken on, so that it runs each at most once
// whichever master sends it and however often (a held publish delivered on
// reconnect, a restarted master re-sending what it could not confirm).
//
// Remembered for `retention` hours after it arrived and at most
// `max_entries` jids, the oldest forgotten first (after a restart, a jid's
// own time, its master's UTC clock YYYYMMDDhhmmssffffff, stands in for its
// arrival). With a file, the jids survive the minion's
// restart: appended one line each (no fsync: a killed process loses nothing,
// a power cut may lose the last few), compacted when loaded.
//
// Threading: safe from any thread.
class jid_history {
 public:
  // `path` empty: memory only (brine swarm).
  jid_history(std::string path, int retention_hours, size_t max_entries);
  ~jid_history();
  jid_history(const jid_history&) = delete;
  jid_history& operator=(const jid_history&) = delete;

  // True when `jid` is new (now remembered), false when seen before.
  bool insert(const std::string& jid);
  bool contains(const std::string& jid) const;
  size_t size() const;

  // The jid's time as unix seconds; -1 when it is not a jid.
  static int64_t jid_time(const std::string& jid);

 private:
  // A 20-digit jid as two numbers (its first 14 digits, the time to the
  // second, and its last 6): 16 bytes a set entry instead of a string.
  struct key {
    uint64_t seconds = 0;
    uint32_t micros = 0;
    bool operator==(const key&) const = default;
  };
  struct key_hash {
    size_t operator()(const key& k) const {
      return std::hash<uint64_t>()(k.seconds * 1000003u ^ k.micros);
    }
  };
  static bool to_key(const std::string& jid, key& out);
  void remember(key k, int64_t t);  // under mu_
  void prune(int64_t now);          // under mu_

  std::string path_;
  int64_t retention_s_;
  size_t max_entries_;
  int fd_ = -1;
  mutable std::mutex mu_;
  std::unordered_set<key, key_hash> set_;
  std::deque<std::pair<key, int64_t>> order_;  // arrival order, with the arrival time
};

}  // namespace brine::minion
