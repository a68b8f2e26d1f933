#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "report/report.h"

namespace brine::store {

enum class key_state { pending, accepted, rejected, denied };

const char* to_string(key_state s);

// A glob over minion ids as list_reports() reads it: the characters before
// its first wildcard (`\` quoting undone), and whether it has any wildcard.
struct glob_parts {
  std::string prefix;
  bool wildcard = false;
};
glob_parts split_glob(const std::string& glob);
// The smallest string greater than every string starting with `prefix`;
// empty when there is none (a prefix of 0xff bytes only).
std::string prefix_end(std::string prefix);
// The glob as SQLite's GLOB operator reads it, and as a POSIX regular
// expression anchored at both ends (PostgreSQL's `~`).
std::string sqlite_glob(const std::string& glob);
std::string posix_regex(const std::string& glob);
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
  // In the key order the function made it (Salt's dicts keep insertion
  // order): the text column keeps it, and `brine cmd --out json` prints it.
  nlohmann::ordered_json ret;
  bool success = false;
  int retcode = 0;
  int64_t stamp = 0;  // unix seconds when stored
  // Unix milliseconds when the master received it; not stored (a report's
  // start is reckoned from it).
  int64_t received_ms = 0;
};

// What the master knows of a minion beyond its key: the minion data cache
// that grain and pillar targeting read.
struct minion_data_record {
  std::string id;
  std::optional<nlohmann::json> grains;  // nullopt: never sent
  std::optional<nlohmann::json> pillar;  // nullopt: never compiled
  int64_t last_seen = 0;                 // unix seconds: last connect or disconnect
  std::string master;                    // the master it is connected to ("": none)
};

// Which reports list_reports() gives: those matching every filter set,
// newest first (by start, then jid, then minion, each descending: one
// index's order, so that a limit ends the read).
struct report_query {
  // A glob over minion ids (fnmatch: `*`, `?`, `[...]`, `[!...]`, `\`
  // quoting); empty: every minion. Its literal prefix narrows an index range.
  std::string minion;
  std::optional<report::run_status> status;
  std::optional<int64_t> since_ms;  // started at or after (unix milliseconds)
  size_t limit = 1000;
  // Only each minion's latest report (the inventory's "last run"); the
  // other filters then apply to that one report.
  bool last = false;
  // Without timings and errors (left empty): the inventory's last run needs
  // neither, and parsing them was most of reading 10,000 reports.
  bool brief = false;
};

// Which of the minion data cache query_minion_data() reads: the inventory
// asks for the few grains it prints or targets on, not for every minion's
// whole grains (about 4 KiB each).
struct minion_data_query {
  // The top-level grain keys to read: each record's grains hold those of
  // them that the minion has (a key whose value is null counts as absent);
  // nullopt: the whole grains. A minion whose grains were never sent has
  // none either way.
  std::optional<std::vector<std::string>> grains;
  bool pillar = true;  // false: every record's pillar is nullopt
};

// One state of a stored report, as the report_states index holds it (the
// states of a report are indexed when the report is added).
struct state_result_record {
  std::string jid;
  std::string minion;
  std::string fun;  // the run's function (state.apply, ...)
  int64_t started_ms = 0;
  bool test = false;
  std::string state_id;  // __id__
  std::string function;  // "pkg.installed"
  std::string name;
  std::string sls;
  std::optional<bool> result;  // nullopt: None (test=True: would change)
  bool changes = false;
};

// Which states list_state_results() gives: those of state ID `id` in the
// reports matching the other filters, newest run first (then jid, minion
// descending; within a run, by tag).
struct state_query {
  std::string id;
  std::string minion;  // a glob over minion ids, as report_query's
  std::optional<int64_t> since_ms;
  size_t limit = 1000;
  bool last = false;  // only in each minion's latest report
};

// A change to one minion's cached data: the fields set are written.
struct minion_data_update {
  std::string id;
  std::optional<nlohmann::json> grains;
  std::optional<nlohmann::json> pillar;
  std::optional<int64_t> last_seen;  // with `master`
  std::string master;
  // With last_seen: the minion left `master` (which is cleared, unless the
  // minion has connected to another master since).
  bool left = false;
};

// A targeted minion that a job never reached, and why ("not connected",
// "refused: ...").
struct undelivered_record {
  std::string jid;
  std::string minion;
  std::string reason;
  int64_t stamp = 0;  // unix seconds
};

// One write of write_keys(): the record put, or its (id, fingerprint) erased.
struct key_write {
  bool erase = false;
  key_record record;
};

// The commit a gitfs remote serves for a saltenv (fileserver/gitfs.h): every
// master of a store serves the pinned ones.
struct file_pin {
  std::string remote;  // the remote's URL as gitfs_remotes gives it
  std::string saltenv;
  std::string ref;      // refs/heads/NAME or refs/tags/NAME
  std::string commit;   // 40 hex digits
  int64_t updated = 0;  // unix seconds when pinned
};

// A change that a writer of a shared store made, as other masters hear of it
// (PostgreSQL LISTEN/NOTIFY). The rows stay the truth: a change only says
// which rows to read again.
struct change {
  enum class kind {
    keys,         // `id`'s keys changed (accepted, rejected, deleted, new)
    returns,      // `minions` returned for `jid` (some of them in `rets`)
    resync,       // the feed was interrupted: anything may have changed meanwhile
    job,          // `jid` was published (by `origin`); `job` holds it when it fitted
    acks,         // `minions` acknowledged `jid` on master `origin` (announce_acks)
    minions,      // the cached data of `minions` changed (put_minion_data)
    undelivered,  // `minions` were recorded undelivered for `jid`
    file_pins,    // the pinned gitfs revisions changed (`brine fileserver update`)
    presence,     // `minions` connected to master `origin`, `left` left it
    reports,      // `origin` stored new reports, the latest of their minions in `reports`
  };
  kind what = kind::keys;
  std::string origin;  // the writer's name (options::origin)
  std::string id;
  std::string jid;
  std::vector<std::string> minions;
  std::optional<job_record> job;
  std::vector<std::string> left;
  // returns: the returns that travelled in the notification (a few hundred
  // bytes each), so that the hearer need not read them back; the other
  // minions' are read from their rows.
  std::vector<return_record> rets;
  // reports: brief (jid, minion, fun, started, status, test): each minion's
  // newest new report of the batch.
  std::vector<report::report> reports;
};

// One master of a shared store as the masters table holds it: its jid slot,
// and for a cluster member what it last said of itself (membership.h).
struct member_record {
  std::string name;  // host:port of its minion port
  int slot = -1;
  std::string cluster_id;      // empty: not a cluster member
  std::string peer;            // host:port of its peer port
  std::string cluster_finger;  // the cluster key it presents to minions
  std::string finger;          // its own key (peer links)
  std::string proof;           // its name and keys signed with the cluster key (hex)
  int64_t seen_ms = 0;         // unix milliseconds of its last heartbeat
  nlohmann::json stats = nlohmann::json::object();
  bool removed = false;  // `brine cluster remove-peer`: leave the cluster
};

// The changes every writer of a shared store makes, this one's included
// (callers skip their own by origin).
//
// Threading: wait() from one thread; interrupt() from any thread.
class change_feed {
 public:
  virtual ~change_feed() = default;
  // Waits up to `timeout` for changes and returns what arrived (possibly
  // nothing). After the connection was lost and is back, the first result is
  // one resync change. Throws base::error naming the database when it cannot
  // reach it; the next call tries again, with a growing delay (at most 1 s).
  virtual std::vector<change> wait(std::chrono::milliseconds timeout) = 0;
  // Makes a wait() in another thread return now.
  virtual void interrupt() = 0;
};

// What `brine store check` reports.
struct status {
  std::string backend;                  // "sqlite" or "postgresql"
  std::string name;                     // the file or the URL, never a password
  int schema_version = 0;               // of the database
  int code_version = 0;                 // this build's
  std::map<std::string, int64_t> rows;  // table -> row count
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

  // The database, for messages: "sqlite /path/jobs.db" or the URL without
  // its password.
  virtual std::string name() const = 0;
  // True when other masters may share this store (PostgreSQL).
  virtual bool shared() const = 0;
  // A feed of the changes writers make to a shared store, on a connection of
  // its own; nullptr when the store is not shared.
  virtual std::unique_ptr<change_feed> changes() = 0;
  // A number in [0, 100) that no other master of this store holds, kept for
  // `master` across restarts: masters sharing a store end their jids with it,
  // so that two never mint the same jid. Always 0 when not shared. Throws
  // when 100 masters already hold one.
  virtual int claim_master_slot(const std::string& master) = 0;
  virtual status check() = 0;

  virtual std::vector<key_record> load_keys() = 0;
  // The keys of one id (after a change says they changed).
  virtual std::vector<key_record> load_keys(const std::string& id) = 0;
  // Insert or replace the row (id, fingerprint).
  virtual void put_key(const key_record& key) = 0;
  // Remove one key (id, fingerprint).
  virtual void delete_key(const std::string& id, const std::string& fingerprint) = 0;
  // Several puts and deletes, in order, in one transaction (`brine key
  // accept --all` of thousands of pending keys).
  virtual void write_keys(const std::vector<key_write>& batch) = 0;

  // A jid already stored is kept as it is (a publish forwarded twice is
  // stored once). A new job is not settled.
  //
  // A store that cannot be reached (PostgreSQL failing over, restarting)
  // is waited for until `until`, this call's own deadline, whatever
  // happened to the calls before it; past it, unreachable. When the write
  // reached the server but its answer was lost (the connection died during
  // the COMMIT), the row, read once the store answers again, says whether
  // the job was recorded; a row that is not there did not commit, and is
  // written again. outcome_unknown: the store did not answer again by
  // `until` to tell (get_job() tells later).
  virtual void add_job(const job_record& job, std::chrono::steady_clock::time_point until) = 0;
  // Waits options::failover_wait from now (the epoch as `until` says so).
  void add_job(const job_record& job) { add_job(job, std::chrono::steady_clock::time_point{}); }
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
  // The returns of these minions for `jid` (those stored), in minion order.
  // The default reads them all; a backend shared by masters, which read
  // other masters' returns as they arrive, does better.
  virtual std::vector<return_record> get_returns(const std::string& jid,
                                                 const std::vector<std::string>& minions);
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

  // Tells the other masters of a shared store that minions acknowledged
  // jobs (jid -> minions), as a change of kind acks; nothing is stored.
  // Nothing to do when the store is not shared.
  virtual void announce_acks(const std::map<std::string, std::vector<std::string>>& acks);

  // Removes jobs created before `cutoff` (unix seconds) with their returns
  // and undelivered records; returns how many jobs went.
  virtual size_t purge_jobs_before(int64_t cutoff) = 0;

  // State-run reports (report/report.h). Stores the batch in one
  // transaction; a (jid, minion) already stored is kept as it is (a return
  // re-sent). Each minion's latest report (by start) is tracked for
  // list_reports() with `last`. Returns how many were new.
  virtual size_t add_reports(const std::vector<report::report>& batch) = 0;
  // Without their returns (`ret` null), newest first, at most q.limit.
  virtual std::vector<report::report> list_reports(const report_query& q) = 0;
  // The states of ID q.id in the stored reports: read from an index of
  // (state ID, start), not by parsing the reports' returns. Reports stored
  // by a brine before that index are not in it.
  virtual std::vector<state_result_record> list_state_results(const state_query& q) = 0;
  // One report with its return.
  virtual std::optional<report::report> get_report(const std::string& jid,
                                                   const std::string& minion) = 0;
  // Removes reports that started before `cutoff_ms` (unix milliseconds),
  // except each minion's latest, which stays until a newer one replaces it
  // (so the last run of a minion that stopped running states is still
  // known). Returns how many went.
  virtual size_t purge_reports_before(int64_t cutoff_ms) = 0;

  // The minion data cache, written in batches (one transaction each): a
  // master hears from thousands of minions at once after a restart. Each
  // record replaces the fields it carries and keeps the others (a minion's
  // row is made by its first write).
  virtual void put_minion_data(const std::vector<minion_data_update>& batch) = 0;
  virtual std::vector<minion_data_record> load_minion_data() = 0;
  // The records of these ids (those stored); the default reads them all.
  virtual std::vector<minion_data_record> load_minion_data(const std::vector<std::string>& ids);
  // What q asks for of every minion (the inventory); the default reads
  // everything and cuts it down.
  virtual std::vector<minion_data_record> query_minion_data(const minion_data_query& q);
  // Forgets a minion's data (its key was deleted).
  virtual void delete_minion_data(const std::string& id) = 0;

  // Cluster membership, in the masters table of a shared store. Writes
  // what `me` says of itself (its row was made by claim_master_slot), with
  // seen_ms now by the database's clock, and returns every master's row,
  // `me` included. The default (a store that is not shared) returns `me`.
  virtual std::vector<member_record> heartbeat(const member_record& me);
  // Every master's row.
  virtual std::vector<member_record> members();
  // Marks `name` removed (it leaves the cluster at its next heartbeat);
  // false when no master has that name. Throws for a store that is not
  // shared.
  virtual bool remove_member(const std::string& name);
  // The pinned gitfs revisions, by remote and saltenv.
  virtual std::vector<file_pin> load_file_pins() = 0;
  // Replaces every pin of the `remotes` with those of `pins` (of these
  // remotes), in one transaction; a shared store then tells the other
  // masters (change::kind::file_pins), which switch to them.
  virtual void put_file_pins(const std::vector<std::string>& remotes,
                             const std::vector<file_pin>& pins) = 0;
};

// Thrown when the database server cannot be reached at all (refused, timed
// out, starting up or shutting down): worth waiting for, unlike a wrong
// password or a schema from a newer brine.
class unreachable : public base::error {
 public:
  using base::error::error;
};

// add_job's write reached the server and its answer was lost, and the
// server did not answer again within the failover wait: the job may be
// recorded (and other masters may be delivering it) or not. Never undone:
// whether its row exists, once the store answers, is the outcome.
class outcome_unknown : public unreachable {
 public:
  using unreachable::unreachable;
};

// Where a store is and who writes to it.
struct options {
  // "sqlite" (the default) or "postgresql://USER@HOST:PORT/DB?sslmode=...".
  std::string url = "sqlite";
  std::string sqlite_path;    // the file for "sqlite"
  std::string password_file;  // PostgreSQL: the password, in a file of mode 0600
  // This writer's name in the changes it makes: "host:port" for a master,
  // "cli" for brine commands.
  std::string origin;
  // PostgreSQL: create or migrate the schema. false: a database behind this
  // build is reported by check() and refused by everything else. (A SQLite
  // file is always migrated on open: it has one master.)
  bool migrate = true;
  // PostgreSQL: how long a write whose connection was lost keeps trying to
  // reach the server again (a failover: the standby promoted), rather than
  // fail at once. Only writes that are the same when done twice.
  std::chrono::milliseconds failover_wait{15000};
};

// Opens the store `o` names. Throws base::error with a message naming the
// database (never a password) and the fix.
std::unique_ptr<store> open(const options& o);

// The schema version of a PostgreSQL database created by this build.
inline constexpr int k_postgres_schema_version = 5;

// Opens (creating if needed) the SQLite database at `path` in WAL mode.
// A new file is created with mode 0600; ":memory:" gives a private in-memory
// database (for tests).
std::unique_ptr<store> open_sqlite(const std::string& path);

// Connects to PostgreSQL (store/postgres/); open() calls it for a
// postgresql:// URL.
std::unique_ptr<store> open_postgres(const options& o);

}  // namespace brine::store
