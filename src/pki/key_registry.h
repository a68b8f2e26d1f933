#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "store/store.h"

namespace brine::pki {

// How unknown minions are treated (Salt's auto_accept, autosign_file,
// autoreject_file). The files hold one glob per line (# comments allowed) and
// are re-read when their modification time changes.
struct key_policy {
  bool auto_accept = false;
  std::string autosign_file;
  std::string autoreject_file;
};

// A change the caller must persist to the store, in order.
struct key_change {
  enum class kind { put, erase } what = kind::put;
  store::key_record record;
};

struct key_decision {
  store::key_state state = store::key_state::pending;
  std::vector<key_change> changes;
  // A key this registry had not seen: a new id's, or another key for a
  // known id (denied). The master counts these as sign-ups.
  bool new_key = false;
};

// How many keys are in each state (denied keys beside an id's main key
// included).
struct key_counts {
  size_t pending = 0;
  size_t accepted = 0;
  size_t rejected = 0;
  size_t denied = 0;
};

struct key_op_result {
  std::vector<std::string> ids;  // ids whose keys changed, sorted
  std::vector<key_change> changes;
};

// The minion key states with Salt's rules, held in memory and mirrored to a
// store by the caller through the returned changes:
//  - an unknown id becomes pending, or rejected (autoreject_file), or accepted
//    (auto_accept, autosign_file), in that order of precedence;
//  - a different key presented for an id that has a pending, accepted or
//    rejected key is denied (kept as a denied key beside the known one);
//  - a rejected key stays rejected when it is presented again.
//
// Threading: every method takes an internal mutex; safe from any thread.
class key_registry {
 public:
  explicit key_registry(key_policy policy) : policy_(std::move(policy)) {}

  void load(const std::vector<store::key_record>& keys);

  // Another master changed `id`'s keys in a shared store: `keys`, all of
  // id's keys read back from it, replace what is held. True when that
  // changed anything.
  bool replace(const std::string& id, const std::vector<store::key_record>& keys);
  // After the store's change feed was interrupted: `keys` (every key in the
  // store) replace everything held; returns the ids whose keys differed,
  // sorted.
  std::vector<std::string> reload(const std::vector<store::key_record>& keys);
  // Both keep what this registry decided and its caller has not written yet
  // (a read of the store cannot hold it): the caller says written() once
  // the changes a decision returned are in the store.
  void written(const std::vector<key_change>& changes);

  // A minion presents `pubkey` (PEM) with `fingerprint` for `id`.
  key_decision present(const std::string& id, const std::string& pubkey,
                       const std::string& fingerprint, int64_t now);

  // Pending keys matching `glob`; rejected and denied ones too when asked.
  key_op_result accept(const std::string& glob, bool include_rejected, bool include_denied,
                       int64_t now);
  // Pending keys matching `glob`; accepted and denied ones too when asked.
  key_op_result reject(const std::string& glob, bool include_accepted, bool include_denied,
                       int64_t now);
  // Every key (any state) of the ids matching `glob`.
  key_op_result remove(const std::string& glob);

  std::vector<store::key_record> list() const;
  key_counts counts() const;
  // Every key of `id` (its main key first, then denied ones).
  std::vector<store::key_record> list_of(const std::string& id) const;
  // The accepted key of `id`, if any.
  std::optional<store::key_record> accepted(const std::string& id) const;
  // Ids with an accepted key that match `glob`, sorted.
  std::vector<std::string> accepted_matching(const std::string& glob) const;
  bool is_accepted(const std::string& id, const std::string& fingerprint) const;
  // Calls `fn(id)` for every accepted id, in id order, holding the registry's
  // lock: `fn` must not call back into the registry.
  void for_each_accepted(const std::function<void(const std::string& id)>& fn) const;

 private:
  struct glob_file {
    std::string path;
    int64_t mtime_ns = -1;
    std::vector<std::string> globs;
    bool matches(const std::string& id);
  };

  // One id's keys: `main` is the pending, accepted or rejected one.
  struct entry {
    std::optional<store::key_record> main;
    std::vector<store::key_record> denied;
  };

  static std::map<std::string, entry> group(const std::vector<store::key_record>& keys);
  key_decision decide(const std::string& id, const std::string& pubkey,
                      const std::string& fingerprint, int64_t now);
  // Under mu_: `changes` are to be written.
  void unwritten(const std::vector<key_change>& changes);
  static bool same(const entry& a, const entry& b);

  key_policy policy_;
  glob_file autosign_{policy_.autosign_file};
  glob_file autoreject_{policy_.autoreject_file};
  mutable std::mutex mu_;
  // Ids with decisions not written yet, and how many (under mu_).
  std::map<std::string, uint32_t> unwritten_;
  std::map<std::string, entry> keys_;
};

bool glob_match(const std::string& glob, const std::string& text);

}  // namespace brine::pki
