#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace brine::swarm {

struct swarm_options {
  std::string master = "127.0.0.1:4506";  // HOST:PORT
  uint32_t count = 100;
  std::string id_prefix = "swarm-";
  std::string keys_dir;                   // required
  std::string master_finger;              // empty: trust the first key seen
  double connect_rate = 0;                // connections per second; 0: all at once
  std::vector<std::string> source_addresses;  // spread connections over these
  uint32_t threads = 0;                   // 0: one per core
  uint32_t acceptance_wait_time = 10;
  uint32_t master_alive_interval = 30;
  double seconds = 0;                     // stop after this long; 0: until a signal
  std::string log_level = "error";
};

// Runs `count` simulated minions in this process against a real master: each
// with its own Ed25519 key (cached in keys_dir, so a second run reuses them),
// its own TLS connection, the real minion protocol and the real test.*
// functions. Prints connected / pending / refused counts every second.
int run_swarm(const swarm_options& o);

}  // namespace brine::swarm
