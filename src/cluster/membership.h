#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pki/keys.h"
#include "store/store.h"

namespace brine::cluster {

// How often a member writes its heartbeat row, and how long a member may
// miss them and still count as alive (a master killed mid-job is known gone
// after this; its jobs' undelivered minions are then recorded by the others).
inline constexpr std::chrono::milliseconds k_heartbeat_interval{1000};
inline constexpr int64_t k_dead_after_ms = 5000;

// This master as a member: what its row says and the keys that prove it.
struct self {
  std::string cluster_id;
  std::string name;  // host:port of its minion port (the store's master name)
  std::string peer;  // host:port of its peer port
  const pki::keypair* cluster_key = nullptr;
  const pki::keypair* own_key = nullptr;
};

// One master as the last heartbeat read it.
struct member {
  store::member_record record;
  bool verified = false;  // its proof was made with this cluster's key
  bool alive = false;     // verified and heard from within k_dead_after_ms
  int64_t age_ms = 0;     // since its last heartbeat, by the database's clock
};

// The masters of this cluster as the masters table shows them.
//
// Threading: every method is safe from any thread.
class membership {
 public:
  explicit membership(self me);

  // This master's row for the next heartbeat, with `stats` and its proof.
  store::member_record row(nlohmann::json stats) const;
  // Takes the rows a heartbeat (or, before the first, members()) read.
  // Returns why this master must not serve in this cluster, or "": another
  // master alive in the store presents another cluster key under this
  // cluster_id, or serves another cluster. `now_ms` is the database's time
  // (this master's row's seen, after a heartbeat).
  std::string update(std::vector<store::member_record> rows, int64_t now_ms);

  // A verified member heard from lately (this master included).
  bool alive(const std::string& name) const;
  // This master's row says `brine cluster remove-peer` removed it.
  bool removed() const;
  std::vector<member> members() const;

 private:
  self me_;
  std::string finger_;
  std::string cluster_finger_;
  mutable std::mutex mu_;
  std::vector<member> members_;
  bool removed_ = false;
  std::set<std::string> warned_;  // unverified rows already logged
};

}  // namespace brine::cluster
