#pragma once

#include "master/minion_cache.h"
#include "pki/key_registry.h"
#include "target/target.h"

namespace brine::master {

// The accepted minions with what the cache holds of them, for
// target::match: walked under one shared lock of each (targeting 100k
// minions takes two locks, not 100k).
class accepted_view : public target::cache_view {
 public:
  accepted_view(const pki::key_registry& keys, const minion_cache& cache)
      : keys_(keys), cache_(cache) {}
  void for_each(const visitor& fn) const override {
    cache_.read([&](const minion_cache::lookup& lookup) {
      keys_.for_each_accepted([&](const std::string& id) {
        auto v = lookup(id);
        fn(id, target::minion_data{v.grains, v.pillar});
      });
    });
  }

 private:
  const pki::key_registry& keys_;
  const minion_cache& cache_;
};

}  // namespace brine::master
