#pragma once

#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/config.h"
#include "fileserver/client.h"
#include "minion/agent.h"

namespace brine::minion {

// brine call's pillar, as salt-call gets it: compiled by the minion's master
// for this run, from the tree as it is now and the grains the call has just
// collected. The call connects with the minion's own key over the daemon's
// TLS and pinning (agent::fetch_pillar), as a one-shot `call` connection
// that leaves the daemon's session alone.

// The first answer among several tries.
struct race_result {
  std::optional<size_t> winner;
  // Per try: its reply; none for a try that never started.
  std::vector<std::optional<call_reply>> replies;
};

using pillar_try = std::function<asio::awaitable<call_reply>(size_t i)>;

// Runs tries 0..n-1 until one answers (status answered): try 0 at once, the
// next as soon as one fails (a master that is down costs nothing) or when
// `stagger` has passed since the last start without an answer (a master
// that hangs does not hold the others up). At the first answer, or at
// `deadline`, every try still running is cancelled through its cancellation
// slot and recorded as cancelled or timed_out; first_answer returns then, and
// the cancelled tries end on the executor soon after.
// Threading: on one strand (or a one-thread io_context); the tries are
// spawned on the same executor.
asio::awaitable<race_result> first_answer(size_t n, pillar_try start,
                                          std::chrono::steady_clock::duration stagger,
                                          std::chrono::steady_clock::time_point deadline);

// After this long without an answer from a master, the next is asked too.
inline constexpr std::chrono::seconds k_call_stagger{1};

struct master_pillar {
  std::optional<nlohmann::ordered_json> pillar;  // absent: no master answered; Salt's key order
  nlohmann::json tops = nlohmann::json::object();  // the answering master's master_tops
  std::string master;                    // "host:port" of the one that did
  // Every master asked that did not answer (or not first), with why.
  std::vector<std::pair<std::string, call_reply>> failed;
};

// brine call's link to its masters. fetch_pillar asks the masters of `cfg`
// (its `master` list in order, shuffled with random_master; or its SRV
// records in RFC 2782 order) for the minion's pillar, sending `grains` for
// the top file, within cfg.auth_timeout seconds. With `keep_open`, the
// connection of the master that answered stays open, and files() fetches
// the call's salt:// files over it (Salt's salt-call uses its master's file
// server) until stop() or destruction.
// Blocking: runs an io_context of its own (io()), which the caller runs the
// call's function on while the connection is open. Throws base::error for
// the minion's own key (pki_dir) or SRV records that cannot be looked up.
class master_call {
 public:
  explicit master_call(const base::minion_config& cfg);
  ~master_call();
  master_call(const master_call&) = delete;
  master_call& operator=(const master_call&) = delete;

  master_pillar fetch_pillar(const nlohmann::json& grains, bool keep_open);
  // The answering master's file server; throws when none answered.
  fileserver::file_transport files() const;
  // The links' io_context; null before fetch_pillar.
  asio::io_context* io();
  // Closes every connection and lets their handlers finish.
  void stop();

 private:
  struct links;
  const base::minion_config& cfg_;
  std::unique_ptr<links> links_;
};

// master_call::fetch_pillar without keeping a connection: the pillar alone.
master_pillar fetch_master_pillar(const base::minion_config& cfg, const nlohmann::json& grains);

// Whether a master refused the minion's key (and none answered).
bool key_not_accepted(const master_pillar& r);
// Why brine call has no pillar, master by master, and what to do.
std::string no_pillar_message(const base::minion_config& cfg, const master_pillar& r);

}  // namespace brine::minion
