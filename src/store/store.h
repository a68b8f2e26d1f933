#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace brine::store {

enum class key_state { pending, accepted, rejected, denied };

const char* to_string(key_state s);
std::optional<key_state> parse_key_state(const std::string& s);

// One minion key. An id has at most one key that is pending, accepted or
// rejected, and any number of denied keys (each a different key that was
// presented for an id already known).
struct key_record {
  std::string id;
  key_state state = key_state::pending;
  std::string pubkey;       // PEM SubjectPublicKeyInfo
  std::string fingerprint;  // sha256 "aa:bb:..."
  int64_t updated = 0;      // unix seconds
};

struct job_record {
  std::string jid;
  std::string fun;
  nlohmann::json args = nlohmann::json::array();
  nlohmann::json kwargs = nlohmann::json::object();
  std::string target;
  std::string tgt_type = "glob";
  std::string user;
  std::vector<std::string> minions;  // the expected set
  std::string master;                // origin master
  int64_t created = 0;               // unix seconds
  // Unix seconds until which a publish to a targeted minion that is not
  // connected is held; then the minions it never reached are recorded as
  // undelivered and the job is settled.
  int64_t deliver_by = 0;
};

struct return_record {
  std::string jid;
  std::string minion;
  std::string fun;
  nlohmann::json ret;
  bool success = false;
  int retcode = 0;
  int64_t stamp = 0;  // unix seconds when stored
};

// What the master knows of a minion beyond its key: the minion data cache
// that grain and pillar targeting read.
struct minion_data_record {
  std::string id;
  std::optional<nlohmann::json> grains;  // nullopt: never sent
  std::optional<nlohmann::json> pillar;  // nullopt: never compiled
  int64_t last_seen = 0;                 // unix seconds: last connect or disconnect
  std::string master;                    // the master it was last connected to
};

// A change to one minion's cached data: the fields set are written.
struct minion_data_update {
  std::string id;
  std::optional<nlohmann::json> grains;
  std::optional<nlohmann::json> pillar;
  std::optional<int64_t> last_seen;  // with `master`
  std::string master;
};

// A targeted minion that a job never reached, and why ("not connected",
// "refused: ...").
struct undelivered_record {
  std::string jid;
  std::string minion;
  std::string reason;
  int64_t stamp = 0;  // unix seconds
};

// Everything a master persists, behind one interface so that the embedded
// SQLite file and a shared PostgreSQL serve alike.
//
// Threading: an implementation is used from one thread at a time; the master
// runs all calls on its store thread, never on an I/O thread. Every method
// throws base::error on failure, with a message naming the database.
class store {
 public:
  virtual ~store() = default;

  virtual std::vector<key_record> load_keys() = 0;
  // Insert or replace the row (id, fingerprint).
  virtual void put_key(const key_record& key) = 0;
  // Remove one key (id, fingerprint).
  virtual void delete_key(const std::string& id, const std::string& fingerprint) = 0;

  // A jid already stored is kept as it is (a publish forwarded twice is
  // stored once). A new job is not settled.
  virtual void add_job(const job_record& job) = 0;
  // Newest first, at most `limit`.
  virtual std::vector<job_record> list_jobs(size_t limit) = 0;
  virtual std::optional<job_record> get_job(const std::string& jid) = 0;

  // Stores the batch in one transaction. A (jid, minion) already stored is
  // kept as it is (the first return wins); returns how many were new. A
  // return replaces an undelivered record of its (jid, minion): the minion
  // got the job after all, so every targeted minion is in exactly one of
  // returns and undelivered.
  virtual size_t add_returns(const std::vector<return_record>& batch) = 0;
  virtual std::vector<return_record> get_returns(const std::string& jid) = 0;
  // How many minions returned for `jid`, without reading the returns.
  virtual size_t count_returns(const std::string& jid) = 0;

  // Records minions that a job never reached, in one transaction. A
  // (jid, minion) that has a return or is already recorded is left as it is.
  virtual void add_undelivered(const std::vector<undelivered_record>& batch) = 0;
  virtual std::vector<undelivered_record> get_undelivered(const std::string& jid) = 0;
  virtual size_t count_undelivered(const std::string& jid) = 0;
  // The ids that returned for `jid`, without their returns.
  virtual std::vector<std::string> returned_minions(const std::string& jid) = 0;

  // Marks the job's delivery as handled: nothing will be held for it again.
  virtual void settle_job(const std::string& jid) = 0;
  // Jobs not settled yet, oldest first: after a master restart, the ones
  // whose publishes may still wait for minions.
  virtual std::vector<job_record> unsettled_jobs() = 0;

  // Removes jobs created before `cutoff` (unix seconds) with their returns
  // and undelivered records; returns how many jobs went.
  virtual size_t purge_jobs_before(int64_t cutoff) = 0;

  // The minion data cache, written in batches (one transaction each): a
  // master hears from thousands of minions at once after a restart. Each
  // record replaces the fields it carries and keeps the others (a minion's
  // row is made by its first write).
  virtual void put_minion_data(const std::vector<minion_data_update>& batch) = 0;
  virtual std::vector<minion_data_record> load_minion_data() = 0;
  // Forgets a minion's data (its key was deleted).
  virtual void delete_minion_data(const std::string& id) = 0;
};

// Opens (creating if needed) the SQLite database at `path` in WAL mode.
// A new file is created with mode 0600; ":memory:" gives a private in-memory
// database (for tests).
std::unique_ptr<store> open_sqlite(const std::string& path);

}  // namespace brine::store
