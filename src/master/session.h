#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "net/connection.h"

namespace brine::master {

// One minion connection. `id`, `fingerprint` and `pubkey` come from the
// authenticated key and never change; `accepted` is set under
// minion_sessions' lock, from the session's strand or from a key operation
// of the local API, and read on the session's strand: atomic.
struct session {
  std::string id;
  std::string fingerprint;
  std::string pubkey;
  std::shared_ptr<net::connection> conn;
  std::atomic<bool> accepted{false};
  // The minion connected only to deliver returns it owes this master (a
  // failover minion serving another master): no jobs go to it, and it does
  // not count as connected.
  bool returns_only = false;
  // A one-shot connection of `brine call` (auth purpose `call`): it may only
  // ask for the pillar, with the grains it sends along. It is never the
  // minion's session: it does not replace the daemon's connection, gets no
  // jobs, and leaves the minion's connected state and data cache alone.
  bool call = false;
};

// The minion sessions as delivery, store_sync and cluster_node reach them:
// minion_sessions in the daemon; in their unit tests, a table of sessions
// over in-memory connections, without a minion port.
//
// Threading: every method is safe from any thread.
class session_directory {
 public:
  using session_ptr = std::shared_ptr<session>;
  virtual ~session_directory() = default;

  // The accepted session of `id`, if connected to take jobs.
  virtual session_ptr find_accepted(const std::string& id) = 0;
  // Accepted minion sessions open now (brine call connections not counted).
  virtual size_t connected() = 0;
  // Another master changed these ids' keys in the shared store (already in
  // the key registry): pushes an acceptance to a waiting minion and cuts off
  // rejected or deleted ones.
  virtual void apply_remote_key_changes(const std::vector<std::string>& ids) = 0;
  // Asks up to `n` accepted minions to connect again (`reconnect`, with
  // `why`) and closes their connections: a cluster member over its share
  // sheds them to the others. Returns how many.
  virtual size_t shed(size_t n, const std::string& why) = 0;
};

}  // namespace brine::master
