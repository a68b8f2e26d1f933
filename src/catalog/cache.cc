#include "catalog/cache.h"

#include <algorithm>

#include "fileserver/roots.h"

namespace brine::catalog {

cache::cache(uint64_t max_bytes) : max_bytes_(max_bytes) {}

std::shared_ptr<const std::string> cache::get(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = slots_.find(key);
  if (it == slots_.end()) {
    ++f_.misses;
    return nullptr;
  }
  ++f_.hits;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return blobs_.at(it->second.content).bytes;
}

void cache::put(const std::string& minion, const std::string& key, std::string catalog) {
  if (max_bytes_ == 0) return;
  std::string content = fileserver::hash_bytes(catalog);
  std::lock_guard lock(mu_);
  if (slots_.contains(key)) drop(key);
  auto [b, fresh] = blobs_.try_emplace(content);
  if (fresh) {
    f_.bytes += catalog.size();
    b->second.bytes = std::make_shared<const std::string>(std::move(catalog));
  }
  ++b->second.refs;
  lru_.push_front(key);
  slots_.emplace(key, slot{minion, std::move(content), lru_.begin()});
  f_.bytes += k_key_overhead;
  auto& keys = minions_[minion];
  keys.push_back(key);
  if (keys.size() > k_keys_per_minion) {
    std::string oldest = keys.front();
    drop(oldest);
  }
  fit();
}

void cache::drop(const std::string& key) {
  auto it = slots_.find(key);
  if (it == slots_.end()) return;
  lru_.erase(it->second.lru);
  auto b = blobs_.find(it->second.content);
  if (--b->second.refs == 0) {
    f_.bytes -= b->second.bytes->size();
    blobs_.erase(b);
  }
  auto m = minions_.find(it->second.minion);
  if (m != minions_.end()) {
    std::erase(m->second, key);
    if (m->second.empty()) minions_.erase(m);
  }
  f_.bytes -= k_key_overhead;
  slots_.erase(it);
}

void cache::fit() {
  while (f_.bytes > max_bytes_ && !lru_.empty()) {
    std::string victim = lru_.back();
    drop(victim);
    ++f_.evictions;
  }
}

void cache::clear() {
  std::lock_guard lock(mu_);
  lru_.clear();
  slots_.clear();
  blobs_.clear();
  minions_.clear();
  f_.bytes = 0;
}

cache::figures cache::counts() const {
  std::lock_guard lock(mu_);
  figures f = f_;
  f.keys = slots_.size();
  f.catalogs = blobs_.size();
  return f;
}

}  // namespace brine::catalog
