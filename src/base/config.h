#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

namespace brine::base {

// Relative paths in a config file are resolved against the directory of that
// file, so that a whole installation can live in one folder.
struct master_config {
  std::string source;                   // the file this came from
  std::string interface = "0.0.0.0";   // address to listen on for minions
  uint16_t port = 4506;                 // minion port (publish and requests multiplexed)
  std::string pki_dir = "/etc/brine/pki/master";
  std::string cachedir = "/var/cache/brine/master";
  std::string sock_dir = "/var/run/brine/master";
  bool auto_accept = false;
  std::string autosign_file;            // empty: none
  std::string autoreject_file;          // empty: none
  uint64_t max_frame_bytes = 16 * 1024 * 1024;
  std::string log_file;                 // empty: stderr
  spdlog::level::level_enum log_level = spdlog::level::info;
  uint32_t keep_jobs = 24;              // hours
  uint32_t worker_threads = 0;          // 0: one per core, at most 4
  uint32_t max_concurrent_handshakes = 256;
  uint32_t handshake_timeout = 10;      // seconds
  // Dead-minion detection (Salt's minion option names): after idle seconds of
  // silence, a probe every intvl seconds, dead after cnt unanswered probes.
  bool tcp_keepalive = true;
  uint32_t tcp_keepalive_idle = 60;
  uint32_t tcp_keepalive_cnt = 3;
  uint32_t tcp_keepalive_intvl = 20;
};

struct minion_config {
  std::string source;
  std::string id;                       // default: the host name
  std::string master = "salt";         // Salt's default master name is "salt"
  uint16_t master_port = 4506;
  std::string master_finger;            // empty: trust on first use
  std::string pki_dir = "/etc/brine/pki/minion";
  std::string cachedir = "/var/cache/brine/minion";
  uint32_t acceptance_wait_time = 10;   // seconds between retries while pending
  uint32_t acceptance_wait_time_max = 0;  // 0: no growth; else backoff cap while refused
  uint32_t master_alive_interval = 30;  // seconds; bound on detecting a dead master
  uint32_t job_timeout = 3600;          // seconds; default limit for a job without timeout=
  uint64_t max_frame_bytes = 16 * 1024 * 1024;
  std::string log_file;
  spdlog::level::level_enum log_level = spdlog::level::info;
};

// Parse and validate. Throw base::error with one line such as
//   config /etc/brine/minion: line 4: master_port must be an integer 1..65535, got 70000
// Unknown options are logged as warnings (spdlog::warn) and otherwise ignored.
master_config load_master_config(const std::string& path);
minion_config load_minion_config(const std::string& path);

// The same from YAML text; `source` names it in messages and anchors relative paths.
master_config parse_master_config(const std::string& yaml, const std::string& source);
minion_config parse_minion_config(const std::string& yaml, const std::string& source);

}  // namespace brine::base
