#pragma once

#include <asio/awaitable.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "master/event_bus.h"
#include "master/session.h"
#include "master/store_worker.h"
#include "net/connection.h"

namespace brine::master {

// Where each targeted minion of each open job stands until the job's
// delivery deadline: `held` (not connected; the publish goes out when it
// connects) or `sent` (written to its connection, not yet acknowledged by a
// job_ack or a return). A minion leaves the job when it acknowledges, returns
// or refuses it. At the deadline the minions still waiting are recorded in the
// store as undelivered, with the reason, and the job is settled; a job whose
// minions all acknowledged is settled at once. So every (jid, targeted
// minion) ends in the job cache as a return, as undelivered, or running.
//
// A new connection of a minion gets every publish it still waits for, `sent`
// ones included (the old connection may have lost them): the minion runs a
// jid once however often it arrives, and acknowledges repeats.
//
// Time is the clock's (the system's in the daemon, a test's own in tests):
// deadlines are compared with it and undelivered records stamped by it.
//
// Threading: every method is safe from any thread; it takes minion_sessions'
// lock (through session_directory) after its own, never the other way round.
class delivery {
 public:
  struct job {
    std::string jid;
    net::frame_ptr frame;  // the publish, encoded once for every target
    std::chrono::system_clock::time_point deadline;
    // Empty: this master published it. Else the cluster member that did
    // (the publish reached this master through the store): at the deadline
    // that master records what was undelivered, unless it is gone.
    std::string origin = {};
  };
  using session_ptr = std::shared_ptr<session>;

  delivery(session_directory& sessions, store_worker& store, event_bus& events,
           base::wall_clock clock = base::system_wall_clock())
      : sessions_(sessions), store_(store), events_(events), clock_(std::move(clock)) {}

  // Takes on `j` for `targets` (every targeted minion of a new job; after a
  // restart, those with neither a return nor an undelivered record). Returns
  // the sessions of the targets connected now, marked sent: the caller sends
  // them the frame (after telling its client, so that no return is missed).
  std::vector<session_ptr> open(job j, std::vector<std::string> targets);

  // Publishing here: takes on `j` before it is recorded, so that what comes
  // as soon as the record commits (another member's minion acknowledging
  // it) finds it; nothing is sent, to a connecting minion either, until
  // release(). Then open()'s answer comes from release().
  void reserve(job j, std::vector<std::string> targets);
  std::vector<session_ptr> release(const std::string& jid);
  // The job could not be recorded: it is forgotten.
  void cancel(const std::string& jid);

  // A minion's key was accepted and its connection is live.
  void on_ready(const session_ptr& s);
  // A job_ack or a job_return: the minion has the job.
  void on_acknowledged(const std::string& id, const std::string& jid);
  // The minion answered the publish with job_refused.
  void on_refused(const std::string& id, const std::string& jid, const std::string& reason);
  // The minion's key was rejected or deleted: what it still waits for will
  // never reach it.
  void on_key_gone(const std::string& id, const std::string& why);

  // A cluster: whether a member is alive (membership.h). Without it every
  // job's undelivered minions are recorded here.
  void set_origin_alive(std::function<bool(const std::string&)> alive) {
    origin_alive_ = std::move(alive);
  }

  // Settles jobs whose deadline passed, until `stopping`.
  asio::awaitable<void> sweep_loop(const std::atomic<bool>& stopping);
  // Settles the jobs whose deadline is at or before the clock's now
  // (sweep_loop's work; public for tests).
  void sweep();

  // Whether `jid` is open here.
  bool holds(const std::string& jid) const;

  // (jid, minion) pairs waiting now, for tests and figures.
  size_t waiting() const;
  // Of those, the publishes held for minions that are not connected.
  size_t held() const;

 private:
  enum class state : uint8_t { held, sent };
  struct open_job {
    job j;
    std::vector<std::string> targets;  // owns the ids that `waiting` views
    std::unordered_map<std::string_view, state> waiting;
    bool reserved = false;  // not recorded yet: not sent to anyone
  };

  // Under mu_: drops `id` from `jid`; settles the job when none waits.
  void leave(const std::string& jid, const std::string& id);
  // Records `undelivered` (and then settles `jid` when asked) on the store
  // thread, then announces each record on the event bus.
  void record(const std::string& jid, std::vector<store::undelivered_record> undelivered,
              bool settle);

  session_directory& sessions_;
  store_worker& store_;
  event_bus& events_;
  base::wall_clock clock_;
  std::function<bool(const std::string&)> origin_alive_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<open_job>> jobs_;
};

}  // namespace brine::master
