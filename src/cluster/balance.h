#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cluster/membership.h"

namespace brine::cluster {

// Minions hold long-lived connections, so a load balancer spreads only new
// ones: a member that joins or comes back would stay empty. After each
// heartbeat every member reads the others' connected counts and, when it
// holds more than its even share while another member holds less, closes
// some of its minions' connections (asking them to connect again): they
// come back through the balancer, and the member that was short takes them
// (at once with HAProxy's leastconn, over a few rounds with roundrobin).
//
// Gradual and calm: nothing is shed while any member has been alive for
// less than k_settle_ms (its balancer's health check, its count still
// moving), at most once per k_shed_interval_ms, half the excess at a time
// and at most k_max_shed per round (an auth storm of its own is what a
// rebalance must not be), and only beyond a tolerance of a tenth of the
// share (at least one minion), so that 11/10/9 stays as it is.
//
// Threading: one thread at a time (the store thread's heartbeat).
class balancer {
 public:
  static constexpr int64_t k_settle_ms = 3000;
  static constexpr int64_t k_shed_interval_ms = 2000;
  static constexpr size_t k_max_shed = 500;

  struct plan {
    size_t total = 0;    // minions connected to the live members
    size_t members = 0;  // live members counted
    size_t share = 0;    // each member's even share, rounded up
    size_t shed = 0;     // of this member's minions, to ask to connect again now
  };

  // After a heartbeat: `members` as the store read them, `me` this member's
  // name, `now_ms` the database's time (its own row's seen).
  plan after_heartbeat(const std::vector<member>& members, const std::string& me, int64_t now_ms);

 private:
  std::map<std::string, int64_t> alive_since_;  // by the database's clock
  int64_t last_shed_ms_ = 0;
};

}  // namespace brine::cluster
