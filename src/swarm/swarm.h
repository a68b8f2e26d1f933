#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace brine::swarm {

struct swarm_options {
  std::vector<std::string> masters = {"127.0.0.1:4506"};  // HOST:PORT each
  std::string master_type = "str";                        // str (every master at once) or failover
  bool random_master = false;
  bool master_failback = false;
  uint32_t master_failback_interval = 0;  // 0: master_alive_interval
  uint32_t count = 100;
  std::string id_prefix = "swarm-";
  std::string keys_dir;                       // required
  std::string master_finger;                  // empty: trust the first key seen
  double connect_rate = 0;                    // connections per second; 0: all at once
  std::vector<std::string> source_addresses;  // spread connections over these
  uint32_t threads = 0;                       // 0: one per core
  uint32_t acceptance_wait_time = 10;
  uint32_t master_alive_interval = 30;
  double seconds = 0;  // stop after this long; 0: until a signal
  std::string log_level = "error";
  // YAML map of grains every minion sends (with its own `id`); empty: just
  // the id.
  std::string grains_file;
  // The minions apply states: every execution function of a real minion
  // (state.apply, state.sls, state.highstate, file.*, cmd.*, ...), with the
  // grains above, the pillar their masters send, and salt:// from the
  // masters' file servers into one cache for the whole swarm
  // (<keys_dir>/<id_prefix>files). Off: only test.* (nothing touches this
  // machine).
  bool states = false;
  // Scheduled runs: every minion has one schedule job, `swarm`, running
  // schedule_function every schedule_seconds, spread over the interval by
  // its id (schedule_spread false: every minion at offset 0, all at once, as
  // minions started together run unspread). state.apply and
  // state.highstate without `states` are simulated: a Salt-shaped return of
  // one state after schedule_run_ms, so the master grants, records and
  // reports them as real state runs.
  std::string schedule_function;
  uint32_t schedule_seconds = 0;
  bool schedule_spread = true;
  uint32_t schedule_run_ms = 0;
};

// Runs `count` simulated minions in this process against real masters: each
// with its own Ed25519 key (cached in keys_dir, so a second run reuses them),
// its own TLS connections, the real minion protocol (with the daemon's
// multi-master and failover logic) and the real test.* functions (or, with
// `states`, every function of a real minion, state.apply included). Prints the
// counts every second, and when all minions are served again after losing a
// master, how long that took.
int run_swarm(const swarm_options& o);

}  // namespace brine::swarm
