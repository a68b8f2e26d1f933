#pragma once

#include <asio/awaitable.hpp>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "master/store_worker.h"
#include "packed/packed.h"
#include "store/store.h"

namespace brine::master {

// The minion data cache: the grains (and pillar) of every minion the master
// has heard from, in memory for targeting, and in the store so that they
// survive a restart; with when each minion was last seen and on which
// master. Changes reach the store in one batch a flush (a master hears from
// thousands of minions at once after a restart).
//
// Grains and pillar are kept packed (src/packed): a tenth of the memory of
// nlohmann trees, and targeting reads them in place.
//
// Threading: every method is safe from any thread; readers (targeting) share
// a lock, writers take it alone. Documents are immutable once in: a reader
// keeps its copy while the minion sends new grains.
class minion_cache {
 public:
  using value = std::shared_ptr<const nlohmann::json>;

  minion_cache(store_worker& store, std::string master_name)
      : store_(store), master_(std::move(master_name)) {}

  // What the store held at start.
  void load(std::vector<store::minion_data_record> rows);
  void set_grains(const std::string& id, nlohmann::json grains);
  // Kept for pillar targets, and in the store (never logged). Minions handed
  // the same `pillar` object (the compiler shares one among minions that
  // match alike) share one packed copy of it.
  void set_pillar(const std::string& id, value pillar);
  // The minion connected to this master (or left it) now.
  void seen(const std::string& id, int64_t when, bool connected);
  // What another master of the store wrote (the feed's presence change):
  // `came` connected to `master`, `went` left it, at `when` (unix seconds,
  // as this master heard of it: the writer's own time is in the store).
  void presence(const std::string& master, const std::vector<std::string>& came,
                const std::vector<std::string>& went, int64_t when);
  // Its key was deleted: its data goes, here and in the store.
  void forget(const std::string& id);

  // A minion's latest state run as its report says (report/report.h): what
  // the inventory's last_run.* fields print, answered from memory.
  struct run_summary {
    std::string jid;
    std::string fun;
    int64_t started_ms = 0;
    report::run_status status = report::run_status::unchanged;
    bool test = false;
  };
  // Reports made here, heard of from another master, or read from the
  // store at start: each minion keeps its latest by start, then jid (as the
  // store's last report). Kept in memory only: the store has the reports.
  void ran(const std::vector<report::report>& reports);
  void ran(const std::string& minion, run_summary run);
  // Every minion's latest run as `db` holds it, for those `accepted` names
  // (a deleted key's reports stay in the store; its minion has no place
  // here): at start, and after a shared store's feed was interrupted.
  void load_runs(store::store& db, const std::function<bool(const std::string& id)>& accepted);

  // What a reader sees of one minion inside read(): views into the cached
  // documents, absent for what is not cached.
  struct view {
    packed::value grains;
    packed::value pillar;
    std::string_view master;  // the master it is connected to ("": none known)
    int64_t last_seen = 0;    // unix seconds it connected or left (0: never)
    const run_summary* last_run = nullptr;  // null: no run known
  };
  using lookup = std::function<view(const std::string& id)>;
  // Runs `fn` with a lookup valid until it returns, under the shared lock
  // (writers wait; targeting 100k minions takes one lock, not 100k).
  void read(const std::function<void(const lookup&)>& fn) const;

  // The cached document itself (empty: not cached), shared, not copied;
  // to_json() gives the tree back.
  packed::document packed_grains(const std::string& id) const;
  size_t size() const;

  // Writes what changed since the last flush (on the store thread).
  void flush();
  asio::awaitable<void> flush_loop(const std::atomic<bool>& stopping);

 private:
  struct entry {
    packed::document grains;
    packed::document pillar;
    std::string master;
    int64_t last_seen = 0;
    std::unique_ptr<const run_summary> last_run;  // a pointer: most minions of a master have none
  };
  store_worker& store_;
  const std::string master_;
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, entry> entries_;
  // The packed copy of each shared pillar object still alive (under mu_).
  struct shared_pack {
    std::weak_ptr<const nlohmann::json> source;
    packed::document doc;
  };
  std::unordered_map<const nlohmann::json*, shared_pack> packs_;
  size_t packs_pruned_at_ = 0;
  std::mutex dirty_mu_;
  // What changed since the last flush, as documents: the store thread
  // unpacks them a few at a time (a tree is five times a packed document,
  // and thousands of minions send grains at once after a restart).
  struct change {
    packed::document grains;
    packed::document pillar;
    std::optional<int64_t> last_seen;
    bool left = false;
  };
  std::unordered_map<std::string, change> dirty_;
};

}  // namespace brine::master
