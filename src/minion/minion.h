#pragma once

#include <asio/io_context.hpp>
#include <asio/thread_pool.hpp>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "base/config.h"
#include "metrics/metrics.h"
#include "minion/context.h"
#include "minion/figures.h"
#include "minion/jid_history.h"
#include "minion/master_set.h"
#include "minion/spool.h"
#include "schedule/scheduler.h"
#include "modules/registry.h"
#include "states/registry.h"
#include "net/tls.h"
#include "pki/keys.h"

namespace brine::minion {

// The minion daemon: its masters (master_set.h: one, several at once, or one
// at a time with failover), with the minion's own key, a disk spool, the
// jids it has run, and the master key pinned in pki_dir.
//
// Lifecycle: the constructor prepares directories and keys (throws
// base::error); run() serves until SIGTERM/SIGINT, or until no master can be
// reached any more (master_tries, retry_dns 0): then it returns 1.
// Threading: an io_context run by two threads; spool writes on a one-thread
// pool.
class minion {
 public:
  explicit minion(base::minion_config cfg);
  int run();

 private:
  bool trust_master(EVP_PKEY* key, const std::string& where);
  void forget_kept_pillar();
  // The message every master gets on acceptance and after a refresh.
  asio::awaitable<std::shared_ptr<const nlohmann::json>> fetch_pillar();
  static net::frame_ptr grains_message(const std::shared_ptr<const nlohmann::json>& grains);
  asio::awaitable<void> trim_when_idle();
  asio::awaitable<void> keep_figures();

  base::minion_config cfg_;
  // The daemon's figures (status.metrics), and every k_figures_interval a
  // copy in cachedir/metrics.json for brine call, which runs apart.
  metrics::registry metrics_;
  figures figures_{metrics_};
  asio::io_context io_;
  asio::thread_pool blocking_{1};
  pki::keypair identity_;
  net::tls_context tls_;
  // State functions first: the execution functions (state.apply) refer to them.
  states::registry states_;
  modules::registry functions_;
  spool spool_;
  jid_history history_;
  std::unique_ptr<master_set> masters_;
  // The jobs of the `schedule` option and the pillar's `schedule` key;
  // null when masterless.
  std::shared_ptr<schedule::scheduler> scheduler_;
  // A pillar arrived: its schedule, merged with the config's, becomes the
  // scheduler's jobs, and the masters are told.
  void schedule_from_pillar(const nlohmann::ordered_json& pillar);
  std::mutex schedule_mu_;
  std::vector<base::schedule_job> schedule_;         // in effect
  std::vector<base::schedule_job> pillar_schedule_;  // as the pillar last gave it
  bool pillar_schedule_enabled_ = true;
  net::frame_ptr schedule_frame_;  // for each master on connecting; null: none
  // Salt's minion-side check of a greedy publish against its own grains.
  bool targeted(const nlohmann::json& publish) const;

  std::unique_ptr<context> context_;  // grains, pillar, running jobs
  mutable std::mutex grains_mu_;
  net::frame_ptr grains_frame_;
  std::atomic<int> exit_code_{0};
  // Links to several masters may meet their first master key at once.
  std::mutex trust_mu_;
};

master_set_settings settings_from(const base::minion_config& cfg);

// Whether the key a master presented is to be trusted: one of master_finger,
// or else the key saved in pki_dir/minion_master.pub, saved there at first
// contact (trust on first use). Logs why not. The daemon and brine call both
// decide with it; callers that may meet a first master from several threads
// serialise the calls.
bool trust_master_key(const base::minion_config& cfg, EVP_PKEY* key, const std::string& where);

}  // namespace brine::minion
