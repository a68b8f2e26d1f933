#pragma once

#include <asio/steady_timer.hpp>
#include <asio/thread_pool.hpp>
#include <atomic>
#include <set>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "base/backoff.h"
#include "base/config.h"
#include "fileserver/backend.h"
#include "fileserver/gitfs.h"
#include "fileserver/roots.h"
#include "master/figures.h"
#include "proto/message.h"
#include "store/store.h"

namespace brine::master {

struct session;
class store_worker;

// The salt:// file server of the master: the backends `fileserver_backend`
// lists (fileserver/roots.h over file_roots, fileserver/gitfs.h over
// gitfs_remotes), layered in that order, answering minions' file_request
// messages on their own connection. Walking the tree, hashing, reading and
// fetching happen on the service's own threads, never on the I/O thread
// that received the request.
//
// gitfs serves the commits pinned in the store: at start the pinned ones
// (fetched if this master lacks them; a remote with nothing pinned is
// fetched and pinned), after update() the ones it pinned, after
// pins_changed() (another master updated) the ones it reads. Each switch is
// one swap; a remote whose pinned commit cannot be fetched keeps serving
// what it served, and the master logs why, then tries again by itself
// (after 1 s, doubling to 60 s, jittered) until it serves the pinned
// commits: one line when a remote falls behind, one when it catches up.
//
// Threading: every method is safe from any thread and returns at once,
// except the constructor, which waits for the first pins.
class file_service {
 public:
  // Throws base::error when fileserver_backend lists gitfs without
  // gitfs_remotes, or a remote is malformed.
  // Counts requests and file bytes into `figures`.
  file_service(const base::master_config& cfg, store_worker& store, figures& figures);
  ~file_service();

  // Answers `request` (a file_request of the minion of `s`) with a
  // file_reply carrying the request's id.
  void serve(const std::shared_ptr<session>& s, proto::message request);

  // `brine fileserver update`: fetches every remote, pins its branches and
  // tags in the store, switches to them; `done` gets the local API reply
  // ({ok, pins: [{remote, saltenv, ref, commit}], errors}).
  void update(std::function<void(nlohmann::json)> done);
  // Another master pinned new revisions: read them and switch.
  void pins_changed();
  // What `brine cluster status` shows as served: the commit of the first
  // gitfs remote's base saltenv (12 digits) and how many refs are pinned;
  // "" without gitfs.
  std::string revision() const;
  // The backends in fileserver_backend's order, for the compile master
  // (thread-safe, as every backend).
  fileserver::backend& backend() { return *backend_; }

 private:
  // Reads the pins on the store thread, then applies them on the pool
  // (unless a later read was applied first); `then` runs after, with the
  // pins served and the problems.
  void reload(
      std::function<void(std::vector<fileserver::gitfs_pin>, std::vector<std::string>)> then);
  void apply(
      uint64_t seq, std::vector<fileserver::gitfs_pin> pins,
      std::function<void(std::vector<fileserver::gitfs_pin>, std::vector<std::string>)> then);
  // Serves `pins` (the caller holds apply_mu_): the pins wanted from now
  // on, or with `retry` the wanted ones again. While a remote is behind
  // them, a retry is due on the pool. Returns gitfs's problems.
  std::vector<std::string> serve_pins(std::vector<fileserver::gitfs_pin> pins, bool retry);
  void schedule_retry(std::chrono::milliseconds wait, uint64_t generation);
  void retry(uint64_t generation);

  store_worker& store_;
  std::unique_ptr<fileserver::roots> roots_;
  std::unique_ptr<fileserver::gitfs> gitfs_;
  std::unique_ptr<fileserver::layered> backend_;
  uint64_t max_reply_bytes_;
  std::atomic<uint64_t> read_seq_{0};  // advanced on the store thread
  std::mutex apply_mu_;
  uint64_t applied_seq_ = 0;
  // Under apply_mu_: the pins wanted, the remotes serving other ones (their
  // commits could not be fetched), and the waits between retries.
  std::vector<fileserver::gitfs_pin> wanted_;
  std::set<std::string> behind_;
  uint64_t generation_ = 0;  // of wanted_; a retry of an older one is dropped
  base::backoff retry_wait_{std::chrono::seconds(1), std::chrono::seconds(60)};
  std::mutex timer_mu_;  // retry_timer_ and stopping_
  bool stopping_ = false;
  figures& figures_;
  asio::thread_pool pool_{2};              // joined first, while the backends still live
  asio::steady_timer retry_timer_{pool_};  // after pool_: destroyed before it
};

// Between the store's rows and gitfs's pins.
std::vector<fileserver::gitfs_pin> to_gitfs_pins(const std::vector<store::file_pin>& rows);

}  // namespace brine::master

