#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace brine::catalog {

// Compiled catalogs by key (see key.h: the file tree's revisions, the
// minion's grains, pillar and options, and what was asked), bounded by
// bytes, least recently used out first.
//
// Catalogs are interned by content: minions of one role usually compile to
// the same low chunks even though their keys differ (grains hold the id),
// so a thousand web servers hold one copy of their catalog and a key each.
// A minion keeps at most `k_keys_per_minion` keys (its highstate and a few
// state.sls runs); a new one pushes its oldest out.
//
// Threading: every method is safe from any thread (one mutex).
class cache {
 public:
  static constexpr size_t k_keys_per_minion = 4;
  // What one key costs besides its catalog: the key, the minion's id and
  // the maps' nodes (measured by the catalog bench, rounded up).
  static constexpr uint64_t k_key_overhead = 256;

  // `max_bytes` 0: nothing is kept.
  explicit cache(uint64_t max_bytes);

  // The catalog of `key` (a hit), or null (a miss). Counted either way.
  std::shared_ptr<const std::string> get(const std::string& key);
  // Keeps `catalog` under `key` for `minion`.
  void put(const std::string& minion, const std::string& key, std::string catalog);
  void clear();

  struct figures {
    uint64_t hits = 0;
    uint64_t misses = 0;
    uint64_t evictions = 0;
    uint64_t keys = 0;
    uint64_t catalogs = 0;  // distinct contents
    uint64_t bytes = 0;     // catalogs once each, plus k_key_overhead per key
  };
  figures counts() const;

 private:
  struct blob {
    std::shared_ptr<const std::string> bytes;
    uint64_t refs = 0;
  };
  struct slot {
    std::string minion;
    std::string content;  // the blob's hash
    std::list<std::string>::iterator lru;
  };
  void drop(const std::string& key);  // mu_ held
  void fit();                         // mu_ held

  const uint64_t max_bytes_;
  mutable std::mutex mu_;
  std::list<std::string> lru_;  // keys, most recently used first
  std::unordered_map<std::string, slot> slots_;
  std::unordered_map<std::string, blob> blobs_;                        // by content hash
  std::unordered_map<std::string, std::vector<std::string>> minions_;  // id -> keys, oldest first
  figures f_;
};

}  // namespace brine::catalog
