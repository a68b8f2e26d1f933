#include "store/sqlite/sqlite_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "base/error.h"
#include "store/json_column.h"
#include "store/store.h"

namespace brine::store {
namespace {

constexpr int k_busy_timeout_ms = 5000;

// k_sqlite_migrations[v] takes a file from user_version v to v + 1, so a later
// version adds a step (minion data, state reports) and every existing file
// walks the same path. Append only: a step that has shipped never changes.
//
// No foreign key from returns to jobs: a return can arrive before its job
// (forwarded by a cluster peer) or after the job was purged (a minion
// re-sending after a long outage), and the first return must still win.
// purge_jobs_before() removes such orphans once they are old.
constexpr std::array<const char*, k_sqlite_schema_version> k_sqlite_migrations = {
    // 0 -> 1: keys, jobs, returns.
    R"sql(
CREATE TABLE keys (
  id          TEXT    NOT NULL,
  fingerprint TEXT    NOT NULL,
  state       TEXT    NOT NULL,
  pubkey      TEXT    NOT NULL,
  updated     INTEGER NOT NULL,
  PRIMARY KEY (id, fingerprint)
);
CREATE TABLE jobs (
  jid      TEXT    NOT NULL PRIMARY KEY,
  fun      TEXT    NOT NULL,
  args     TEXT    NOT NULL,
  kwargs   TEXT    NOT NULL,
  target   TEXT    NOT NULL,
  tgt_type TEXT    NOT NULL,
  user     TEXT    NOT NULL,
  minions  TEXT    NOT NULL,
  master   TEXT    NOT NULL,
  created  INTEGER NOT NULL
);
-- (created, jid) rather than (created) alone: list_jobs() orders by both and
-- then reads the index backwards instead of sorting the whole table.
CREATE INDEX jobs_by_created ON jobs (created, jid);
CREATE TABLE returns (
  jid     TEXT    NOT NULL,
  minion  TEXT    NOT NULL,
  fun     TEXT    NOT NULL,
  ret     TEXT    NOT NULL,
  success INTEGER NOT NULL,
  retcode INTEGER NOT NULL,
  stamp   INTEGER NOT NULL,
  PRIMARY KEY (jid, minion)
);
-- For purging orphan returns by age without a full scan.
CREATE INDEX returns_by_stamp ON returns (stamp);
)sql",
    // 1 -> 2: delivery deadlines, settled jobs, undelivered minions. Jobs of
    // version 1 were never held, so they count as settled.
    R"sql(
ALTER TABLE jobs ADD COLUMN deliver_by INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN settled INTEGER NOT NULL DEFAULT 1;
-- Only the few jobs whose delivery is still open are in this index.
CREATE INDEX jobs_unsettled ON jobs (created) WHERE settled = 0;
CREATE TABLE undelivered (
  jid    TEXT    NOT NULL,
  minion TEXT    NOT NULL,
  reason TEXT    NOT NULL,
  stamp  INTEGER NOT NULL,
  PRIMARY KEY (jid, minion)
);
)sql",
    // 2 -> 3: the minion data cache. NULL grains or pillar: never sent or
    // compiled (which targeting tells apart from an empty map).
    R"sql(
CREATE TABLE minion_data (
  id        TEXT    NOT NULL PRIMARY KEY,
  grains    TEXT,
  pillar    TEXT,
  last_seen INTEGER NOT NULL DEFAULT 0,
  master    TEXT    NOT NULL DEFAULT ''
);
)sql",
    // 3 -> 4: state-run reports, and each minion's latest. A report keeps
    // its own copy of the return: it outlives the job's (keep_reports
    // against keep_jobs). started is unix milliseconds; durations are
    // milliseconds.
    R"sql(
CREATE TABLE reports (
  jid       TEXT    NOT NULL,
  minion    TEXT    NOT NULL,
  fun       TEXT    NOT NULL,
  started   INTEGER NOT NULL,
  duration  REAL    NOT NULL,
  run_time  REAL    NOT NULL,
  status    TEXT    NOT NULL,
  test      INTEGER NOT NULL,
  retcode   INTEGER NOT NULL,
  succeeded INTEGER NOT NULL,
  failed    INTEGER NOT NULL,
  changed   INTEGER NOT NULL,
  pending   INTEGER NOT NULL,
  total     INTEGER NOT NULL,
  timings   TEXT    NOT NULL,
  errors    TEXT    NOT NULL,
  ret       TEXT    NOT NULL,
  PRIMARY KEY (jid, minion)
);
-- Each list filter has an index that yields its rows newest first: none
-- (and --since, and purging by age), --minion, --status.
CREATE INDEX reports_by_started ON reports (started, jid, minion);
CREATE INDEX reports_by_minion ON reports (minion, started, jid);
CREATE INDEX reports_by_status ON reports (status, started, jid, minion);
-- The inventory's "last run": one row per minion, so that reading every
-- minion's latest report reads as many rows as there are minions.
CREATE TABLE last_reports (
  minion  TEXT    NOT NULL PRIMARY KEY,
  jid     TEXT    NOT NULL,
  started INTEGER NOT NULL
);
CREATE INDEX last_reports_by_started ON last_reports (started, jid, minion);
)sql",
    // 4 -> 5: the gitfs revisions the master serves (fileserver/gitfs.h).
    R"sql(
CREATE TABLE file_pins (
  remote  TEXT    NOT NULL,
  saltenv TEXT    NOT NULL,
  ref     TEXT    NOT NULL,
  commit_id TEXT  NOT NULL,
  updated INTEGER NOT NULL,
  PRIMARY KEY (remote, saltenv)
);
)sql",
    // 5 -> 6: every state of every report by its state ID, so that "which
    // minions ran state X, and with what result" reads an index range, not
    // every report's return. result: 1, 0, or NULL for None. Reports of
    // earlier versions are not indexed (they age out with keep_reports).
    R"sql(
CREATE TABLE report_states (
  state_id TEXT    NOT NULL,
  started  INTEGER NOT NULL,
  jid      TEXT    NOT NULL,
  minion   TEXT    NOT NULL,
  tag      TEXT    NOT NULL,
  function TEXT    NOT NULL,
  name     TEXT    NOT NULL,
  sls      TEXT    NOT NULL,
  result   INTEGER,
  changes  INTEGER NOT NULL,
  PRIMARY KEY (state_id, started, jid, minion, tag)
) WITHOUT ROWID;
-- Purging goes by report.
CREATE INDEX report_states_by_report ON report_states (jid, minion);
-- Each minion's top-level grains one row each, (key '' marks a minion whose
-- grains are cached), rewritten when its grains change: the inventory reads
-- the few grains it needs of every minion without parsing anyone's whole
-- grains (~4 KiB). And presence without the grains: last_seen and master
-- lie after the grains in a row, on its overflow pages.
CREATE TABLE minion_grains (
  key   TEXT NOT NULL,
  id    TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (key, id)
) WITHOUT ROWID;
CREATE INDEX minion_grains_by_id ON minion_grains (id);
CREATE INDEX minion_data_presence ON minion_data (id, last_seen, master);
INSERT INTO minion_grains (key, id, value)
  SELECT '', id, '' FROM minion_data WHERE grains IS NOT NULL;
INSERT INTO minion_grains (key, id, value)
  SELECT e.key, m.id, CASE e.type WHEN 'text' THEN json_quote(e.value)
                                  WHEN 'true' THEN 'true' WHEN 'false' THEN 'false'
                                  WHEN 'null' THEN 'null' ELSE e.value END
  FROM minion_data m, json_each(m.grains) e
  WHERE m.grains IS NOT NULL AND json_type(m.grains) = 'object' AND e.key <> '';
)sql",
};

// What to do about a failure, for the codes where the cause is usually outside
// brine. Keyed on the primary code; the extended code only refines the message.
const char* hint_for(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
      return "another process (a running master or a brine command) has held it locked for "
             "more than 5 s; stop that process or retry when it is done";
    case SQLITE_READONLY:
      return "this user cannot write the file, its -wal/-shm files or its directory; run as "
             "the master's user or fix their ownership";
    case SQLITE_CANTOPEN:
      return "check that the directory exists and that this user may create files in it "
             "(SQLite adds -wal and -shm files beside the database)";
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      return "the file is damaged or not a brine database; move it aside and a new one is "
             "created on the next start";
    case SQLITE_FULL:
      return "the filesystem is full; free space or keep jobs for a shorter time";
    case SQLITE_IOERR:
      return "the filesystem reported an I/O error; check the disk and the kernel log";
    case SQLITE_PROTOCOL:
      return "WAL mode needs a local filesystem with working locks (not NFS); move the "
             "database to a local disk";
    default:
      return nullptr;
  }
}

struct stmt_deleter {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using stmt_ptr = std::unique_ptr<sqlite3_stmt, stmt_deleter>;

// One sqlite3 handle and its prepared statements.
//
// Lifecycle: opened (and the schema migrated) by the constructor, closed by
// the destructor. Threading: one thread at a time, as store promises, so the
// handle is opened without SQLite's own mutexes. Other processes may open the
// same file at the same time; WAL lets readers and the one writer proceed
// together, and the busy timeout makes writers queue rather than fail.
class connection {
 public:
  explicit connection(std::string path);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  // Throws base::error naming the file, the operation, SQLite's message and,
  // when one is known, the fix. Call it right after the failing call, before
  // anything else on this handle replaces the message.
  [[noreturn]] void fail(int rc, std::string_view what) const;
  [[noreturn]] void fail_message(std::string_view message) const;

  // A cached statement. `sql` must have static storage (a literal): the
  // cache keys on it without copying.
  sqlite3_stmt* prepare(std::string_view sql, std::string_view what);

  // For statements run once (pragmas, migrations), not worth caching.
  void exec(const std::string& sql, std::string_view what);
  int64_t query_int(const std::string& sql, std::string_view what);

  sqlite3* handle() const { return db_; }

 private:
  void configure();
  void migrate();

  std::string path_;
  sqlite3* db_ = nullptr;
  std::unordered_map<std::string_view, stmt_ptr> stmts_;
};

// One run of a cached statement. Resetting on every exit (an exception, a
// read that stops early) matters: a statement left mid-step keeps a read
// transaction open, which in WAL mode stops checkpoints from ever resetting
// the log, so it grows without bound.
class query {
 public:
  query(connection& conn, std::string_view sql, std::string what)
      : conn_(conn), stmt_(conn.prepare(sql, what)), what_(std::move(what)) {}
  ~query() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  query(const query&) = delete;
  query& operator=(const query&) = delete;

  // Text is bound without a copy: the caller keeps it alive until step()
  // has run, which every use here does by binding locals.
  query& bind(int index, std::string_view text) {
    check(sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_STATIC, SQLITE_UTF8));
    return *this;
  }
  query& bind(int index, int64_t value) {
    check(sqlite3_bind_int64(stmt_, index, value));
    return *this;
  }
  query& bind(int index, double value) {
    check(sqlite3_bind_double(stmt_, index, value));
    return *this;
  }
  query& bind_null(int index) {
    check(sqlite3_bind_null(stmt_, index));
    return *this;
  }

  // True while a row is available.
  bool step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    conn_.fail(rc, what_);
  }

  // Runs a statement that returns no rows; ready to be bound and run again.
  void run() {
    while (step()) {
    }
    sqlite3_reset(stmt_);
  }

  int changes() const { return sqlite3_changes(conn_.handle()); }

  std::string text(int col) const {
    auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col)))
             : std::string();
  }
  int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }
  double real(int col) const { return sqlite3_column_double(stmt_, col); }
  bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

 private:
  void check(int rc) const {
    if (rc != SQLITE_OK) conn_.fail(rc, what_);
  }

  connection& conn_;
  sqlite3_stmt* stmt_;
  std::string what_;
};

// BEGIN IMMEDIATE takes the write lock up front. A deferred transaction that
// reads and then writes can hit SQLITE_BUSY on the upgrade without the busy
// handler ever waiting (SQLite cannot wait there without risking deadlock),
// so a master and a CLI writing together would fail instead of queueing.
class write_transaction {
 public:
  write_transaction(connection& conn, std::string what) : conn_(conn), what_(std::move(what)) {
    query(conn_, "BEGIN IMMEDIATE", what_).run();
  }
  ~write_transaction() {
    // After some errors (SQLITE_FULL, SQLITE_IOERR) SQLite has already rolled
    // back; a second ROLLBACK would only fail.
    if (!committed_ && sqlite3_get_autocommit(conn_.handle()) == 0) {
      sqlite3_exec(conn_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
    }
  }
  write_transaction(const write_transaction&) = delete;
  write_transaction& operator=(const write_transaction&) = delete;

  void commit() {
    query(conn_, "COMMIT", what_).run();
    committed_ = true;
  }

 private:
  connection& conn_;
  std::string what_;
  bool committed_ = false;
};

connection::connection(std::string path) : path_(std::move(path)) {
  // The job cache holds command output (and the key table the fleet's
  // identities), so the file is created owner-only. SQLite would create it
  // 0644 less the umask; creating it first, empty (which SQLite reads as an
  // empty database), fixes the mode, and SQLite gives its -wal and -shm files
  // the database's mode. An existing file keeps the mode its admin chose.
  if (path_ != ":memory:") {
    int fd = ::open(path_.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
      int err = errno;
      std::string fix = err == ENOENT   ? "; create its directory first"
                        : err == EACCES ? "; run as the master's user or fix the directory's "
                                          "ownership"
                                        : "";
      fail_message(std::string("cannot create: ") + std::strerror(err) + fix);
    }
    ::close(fd);
  }

  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  int rc = sqlite3_open_v2(path_.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    // On most failures SQLite still hands back a handle that carries the
    // message and must be closed.
    std::string message = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    const char* hint = hint_for(rc);
    fail_message("cannot open: " + message + (hint ? std::string("; ") + hint : ""));
  }
  try {
    configure();
    migrate();
  } catch (...) {
    stmts_.clear();
    sqlite3_close(db_);
    throw;
  }
}

connection::~connection() {
  // Statements first: sqlite3_close() refuses while any is alive.
  stmts_.clear();
  sqlite3_close(db_);
}

void connection::fail(int rc, std::string_view what) const {
  std::string message = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  const char* hint = hint_for(rc);
  fail_message(std::string(what) + ": " + message + (hint ? std::string("; ") + hint : ""));
}

void connection::fail_message(std::string_view message) const {
  throw base::error("sqlite database " + path_ + ": " + std::string(message));
}

sqlite3_stmt* connection::prepare(std::string_view sql, std::string_view what) {
  auto it = stmts_.find(sql);
  if (it != stmts_.end()) return it->second.get();
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
  if (rc != SQLITE_OK) fail(rc, what);
  stmts_.emplace(sql, stmt_ptr(raw));
  return raw;
}

void connection::exec(const std::string& sql, std::string_view what) {
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail(rc, what);
}

int64_t connection::query_int(const std::string& sql, std::string_view what) {
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.c_str(), -1, &raw, nullptr);
  if (rc != SQLITE_OK) fail(rc, what);
  stmt_ptr stmt(raw);
  rc = sqlite3_step(stmt.get());
  if (rc == SQLITE_ROW) return sqlite3_column_int64(stmt.get(), 0);
  if (rc == SQLITE_DONE) return 0;
  fail(rc, what);
}

void connection::configure() {
  sqlite3_extended_result_codes(db_, 1);
  // Before anything that locks: switching to WAL itself waits for other
  // processes that have the file open.
  sqlite3_busy_timeout(db_, k_busy_timeout_ms);

  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v2(db_, "PRAGMA journal_mode=WAL", -1, &raw, nullptr);
  if (rc != SQLITE_OK) fail(rc, "cannot switch to WAL mode");
  stmt_ptr stmt(raw);
  rc = sqlite3_step(stmt.get());
  if (rc != SQLITE_ROW) fail(rc, "cannot switch to WAL mode");
  std::string mode = reinterpret_cast<const char*>(sqlite3_column_text(stmt.get(), 0));
  // An in-memory database (tests, fakes) has no WAL; anything else that
  // refuses WAL would lose the reader-while-writing guarantee the CLI needs.
  if (mode != "wal" && !(path_ == ":memory:" && mode == "memory")) {
    fail_message("cannot switch to WAL mode (journal_mode is " + mode +
                 "); the filesystem must support shared memory and locks (a local disk, not "
                 "NFS)");
  }

  // NORMAL in WAL mode never corrupts the file; a power cut (not a crash of
  // the process) may lose the last transactions. Minions re-send returns
  // that a master did not acknowledge, so the cache can afford that for the
  // fsync it saves on every batch.
  exec("PRAGMA synchronous=NORMAL", "cannot set synchronous=NORMAL");
  // Nothing in version 1 declares a foreign key; enabled so that later
  // tables (minion data, reports) can rely on ON DELETE CASCADE.
  exec("PRAGMA foreign_keys=ON", "cannot enable foreign keys");
}

void connection::migrate() {
  const std::string what = "cannot read the schema version";
  auto check_owner = [&] {
    int64_t app_id = query_int("PRAGMA application_id", what);
    if (app_id == k_sqlite_application_id) return;
    // A file nobody has written to yet is ours to claim.
    int64_t objects = query_int("SELECT count(*) FROM sqlite_master", what);
    if (app_id == 0 && objects == 0) return;
    fail_message("is not a brine database (application_id " + std::to_string(app_id) + ", " +
                 std::to_string(objects) +
                 " schema objects); point the store at a new file or another path");
  };

  // Read without a transaction first: the usual open finds the schema
  // current and so never takes the write lock, which would make a CLI wait
  // behind a busy master just to start.
  check_owner();
  int64_t version = query_int("PRAGMA user_version", what);
  if (version == k_sqlite_schema_version) return;

  // One process migrates; any other opening the file at the same moment
  // waits on the lock, then finds the new version and has nothing to do.
  write_transaction txn(*this, "cannot migrate the schema");
  check_owner();
  version = query_int("PRAGMA user_version", what);
  if (version > k_sqlite_schema_version) {
    fail_message("schema version " + std::to_string(version) +
                 " is newer than this brine supports (" + std::to_string(k_sqlite_schema_version) +
                 "); upgrade brine or point the store at another file");
  }
  if (version < 0) fail_message("has a negative schema version; it was not written by brine");
  for (auto v = static_cast<size_t>(version); v < k_sqlite_migrations.size(); ++v) {
    exec(k_sqlite_migrations[v], "cannot migrate the schema from version " + std::to_string(v) +
                                     " to " + std::to_string(v + 1));
  }
  exec("PRAGMA application_id=" + std::to_string(k_sqlite_application_id),
       "cannot migrate the schema");
  exec("PRAGMA user_version=" + std::to_string(k_sqlite_schema_version),
       "cannot migrate the schema");
  txn.commit();
}

class sqlite_store final : public store {
 public:
  explicit sqlite_store(std::string path) : conn_path_(path), conn_(std::move(path)) {}

  std::string name() const override { return "sqlite " + conn_path_; }
  bool shared() const override { return false; }
  std::unique_ptr<change_feed> changes() override { return nullptr; }
  int claim_master_slot(const std::string&) override { return 0; }
  status check() override;

  std::vector<key_record> load_keys() override;
  std::vector<key_record> load_keys(const std::string& id) override;
  using store::get_returns;
  void put_key(const key_record& key) override;
  void delete_key(const std::string& id, const std::string& fingerprint) override;
  void write_keys(const std::vector<key_write>& batch) override;

  using store::add_job;
  // One master's file, never failing over: `until` is not needed.
  void add_job(const job_record& job, std::chrono::steady_clock::time_point until) override;
  std::vector<job_record> list_jobs(size_t limit) override;
  std::optional<job_record> get_job(const std::string& jid) override;

  size_t add_returns(const std::vector<return_record>& batch) override;
  std::vector<return_record> get_returns(const std::string& jid) override;
  size_t count_returns(const std::string& jid) override;

  void add_undelivered(const std::vector<undelivered_record>& batch) override;
  std::vector<undelivered_record> get_undelivered(const std::string& jid) override;
  size_t count_undelivered(const std::string& jid) override;
  std::vector<std::string> returned_minions(const std::string& jid) override;
  void settle_job(const std::string& jid) override;
  std::vector<job_record> unsettled_jobs() override;

  size_t purge_jobs_before(int64_t cutoff) override;

  void put_minion_data(const std::vector<minion_data_update>& batch) override;
  std::vector<file_pin> load_file_pins() override;
  void put_file_pins(const std::vector<std::string>& remotes,
                     const std::vector<file_pin>& pins) override;
  std::vector<minion_data_record> load_minion_data() override;
  std::vector<minion_data_record> query_minion_data(const minion_data_query& q) override;
  void delete_minion_data(const std::string& id) override;

  size_t add_reports(const std::vector<report::report>& batch) override;
  std::vector<report::report> list_reports(const report_query& q) override;
  std::vector<state_result_record> list_state_results(const state_query& q) override;
  std::optional<report::report> get_report(const std::string& jid,
                                           const std::string& minion) override;
  size_t purge_reports_before(int64_t cutoff_ms) override;

 private:
  // brief: without timings and errors (report_query::brief).
  report::report read_report(const query& q, bool with_ret, bool brief = false) const;
  template <class Json = nlohmann::json>
  Json parse_json(const std::string& text, std::string_view row, std::string_view column) const;
  job_record read_job(const query& q) const;
  std::vector<key_record> read_keys(query& q);

  std::string conn_path_;
  // The text of statements made at run time (list_reports' filters), kept
  // here because the connection's statement cache keys on it without a
  // copy; declared before conn_ so that it outlives the cache.
  std::set<std::string, std::less<>> dynamic_sql_;
  connection conn_;
};

template <class Json>
Json sqlite_store::parse_json(const std::string& text, std::string_view row,
                              std::string_view column) const {
  auto value = Json::parse(text, nullptr, false);
  if (value.is_discarded()) {
    conn_.fail_message(std::string(row) + ": column " + std::string(column) +
                       " is not valid JSON; the row was written by something other than brine");
  }
  return value;
}

std::vector<key_record> sqlite_store::load_keys() {
  query q(conn_,
          "SELECT id, fingerprint, state, pubkey, updated FROM keys ORDER BY id, fingerprint",
          "cannot read keys");
  return read_keys(q);
}

std::vector<key_record> sqlite_store::load_keys(const std::string& id) {
  query q(conn_,
          "SELECT id, fingerprint, state, pubkey, updated FROM keys WHERE id = ?1 "
          "ORDER BY fingerprint",
          "cannot read the keys of " + id);
  q.bind(1, id);
  return read_keys(q);
}

status sqlite_store::check() {
  status s;
  s.backend = "sqlite";
  s.name = conn_path_;
  s.code_version = k_sqlite_schema_version;
  s.schema_version =
      static_cast<int>(conn_.query_int("PRAGMA user_version", "cannot read the schema version"));
  for (const char* table :
       {"keys", "jobs", "returns", "undelivered", "minion_data", "reports", "file_pins"}) {
    s.rows[table] = conn_.query_int(std::string("SELECT count(*) FROM ") + table,
                                    std::string("cannot count the rows of ") + table);
  }
  return s;
}

std::vector<key_record> sqlite_store::read_keys(query& q) {
  std::vector<key_record> keys;
  while (q.step()) {
    key_record k;
    k.id = q.text(0);
    k.fingerprint = q.text(1);
    std::string state = q.text(2);
    auto parsed = parse_key_state(state);
    if (!parsed) {
      conn_.fail_message("key " + k.id + " (" + k.fingerprint + ") has unknown state '" + state +
                         "'; it was written by a newer brine or edited by hand");
    }
    k.state = *parsed;
    k.pubkey = q.text(3);
    k.updated = q.integer(4);
    keys.push_back(std::move(k));
  }
  return keys;
}

void sqlite_store::put_key(const key_record& key) {
  query(conn_,
        "INSERT OR REPLACE INTO keys (id, fingerprint, state, pubkey, updated) "
        "VALUES (?1, ?2, ?3, ?4, ?5)",
        "cannot store key " + key.id)
      .bind(1, key.id)
      .bind(2, key.fingerprint)
      .bind(3, to_string(key.state))
      .bind(4, key.pubkey)
      .bind(5, key.updated)
      .run();
}

void sqlite_store::delete_key(const std::string& id, const std::string& fingerprint) {
  query(conn_, "DELETE FROM keys WHERE id = ?1 AND fingerprint = ?2", "cannot delete key " + id)
      .bind(1, id)
      .bind(2, fingerprint)
      .run();
}

void sqlite_store::write_keys(const std::vector<key_write>& batch) {
  if (batch.empty()) return;
  write_transaction txn(conn_, "cannot store " + std::to_string(batch.size()) + " key changes");
  for (const auto& w : batch) {
    if (w.erase) {
      delete_key(w.record.id, w.record.fingerprint);
    } else {
      put_key(w.record);
    }
  }
  txn.commit();
}

void sqlite_store::add_job(const job_record& job, std::chrono::steady_clock::time_point) {
  std::string args = to_json_text(job.args);
  std::string kwargs = to_json_text(job.kwargs);
  std::string minions = to_json_text(job.minions);
  // OR IGNORE: a publish forwarded twice (a peer reconnecting) stores the job
  // once; the jid is unique across the cluster, so the rows are the same.
  query(conn_,
        "INSERT OR IGNORE INTO jobs "
        "(jid, fun, args, kwargs, target, tgt_type, user, minions, master, created, deliver_by, "
        "settled) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 0)",
        "cannot store job " + job.jid)
      .bind(1, job.jid)
      .bind(2, job.fun)
      .bind(3, args)
      .bind(4, kwargs)
      .bind(5, job.target)
      .bind(6, job.tgt_type)
      .bind(7, job.user)
      .bind(8, minions)
      .bind(9, job.master)
      .bind(10, job.created)
      .bind(11, job.deliver_by)
      .run();
}

job_record sqlite_store::read_job(const query& q) const {
  job_record j;
  j.jid = q.text(0);
  std::string row = "job " + j.jid;
  j.fun = q.text(1);
  j.args = parse_json(q.text(2), row, "args");
  j.kwargs = parse_json(q.text(3), row, "kwargs");
  j.target = q.text(4);
  j.tgt_type = q.text(5);
  j.user = q.text(6);
  auto minions = parse_json(q.text(7), row, "minions");
  if (!minions.is_array()) conn_.fail_message(row + ": column minions is not a JSON array");
  for (const auto& m : minions) {
    if (!m.is_string()) conn_.fail_message(row + ": column minions holds a non-string");
    j.minions.push_back(m.get<std::string>());
  }
  j.master = q.text(8);
  j.created = q.integer(9);
  j.deliver_by = q.integer(10);
  return j;
}

std::vector<job_record> sqlite_store::list_jobs(size_t limit) {
  // LIMIT takes a signed 64-bit integer; anything above is "all of them".
  auto bounded = static_cast<int64_t>(
      std::min<uint64_t>(limit, static_cast<uint64_t>(std::numeric_limits<int64_t>::max())));
  query q(conn_,
          "SELECT jid, fun, args, kwargs, target, tgt_type, user, minions, master, created, "
          "deliver_by FROM jobs ORDER BY created DESC, jid DESC LIMIT ?1",
          "cannot list jobs");
  q.bind(1, bounded);
  std::vector<job_record> jobs;
  while (q.step()) jobs.push_back(read_job(q));
  return jobs;
}

std::optional<job_record> sqlite_store::get_job(const std::string& jid) {
  query q(conn_,
          "SELECT jid, fun, args, kwargs, target, tgt_type, user, minions, master, created, "
          "deliver_by FROM jobs WHERE jid = ?1",
          "cannot read job " + jid);
  q.bind(1, jid);
  if (!q.step()) return std::nullopt;
  return read_job(q);
}

size_t sqlite_store::add_returns(const std::vector<return_record>& batch) {
  if (batch.empty()) return 0;
  const std::string what = "cannot store " + std::to_string(batch.size()) + " returns";
  // One transaction for the batch: a commit (and its WAL append) per return
  // would cap the master at a few thousand returns a second.
  write_transaction txn(conn_, what);
  query q(conn_,
          "INSERT OR IGNORE INTO returns (jid, minion, fun, ret, success, retcode, stamp) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
          what);
  // A primary-key probe of a table that is nearly always empty: cheap next to
  // the insert.
  query gone(conn_, "DELETE FROM undelivered WHERE jid = ?1 AND minion = ?2", what);
  size_t added = 0;
  for (const auto& r : batch) {
    std::string ret = to_json_text(r.ret);
    q.bind(1, r.jid)
        .bind(2, r.minion)
        .bind(3, r.fun)
        .bind(4, ret)
        .bind(5, int64_t{r.success ? 1 : 0})
        .bind(6, int64_t{r.retcode})
        .bind(7, r.stamp);
    q.run();
    // 0 when the (jid, minion) was already there: a re-sent return.
    added += static_cast<size_t>(q.changes());
    gone.bind(1, r.jid).bind(2, r.minion);
    gone.run();
  }
  txn.commit();
  return added;
}

std::vector<return_record> sqlite_store::get_returns(const std::string& jid) {
  query q(conn_,
          "SELECT jid, minion, fun, ret, success, retcode, stamp FROM returns "
          "WHERE jid = ?1 ORDER BY stamp, minion",
          "cannot read returns of job " + jid);
  q.bind(1, jid);
  std::vector<return_record> returns;
  while (q.step()) {
    return_record r;
    r.jid = q.text(0);
    r.minion = q.text(1);
    r.fun = q.text(2);
    r.ret = parse_json<nlohmann::ordered_json>(
        q.text(3), "return of " + r.minion + " for job " + r.jid, "ret");
    r.success = q.integer(4) != 0;
    r.retcode = static_cast<int>(q.integer(5));
    r.stamp = q.integer(6);
    returns.push_back(std::move(r));
  }
  return returns;
}

size_t sqlite_store::count_returns(const std::string& jid) {
  query q(conn_, "SELECT count(*) FROM returns WHERE jid = ?1",
          "cannot count returns of job " + jid);
  q.bind(1, jid);
  return q.step() ? static_cast<size_t>(q.integer(0)) : 0;
}

void sqlite_store::add_undelivered(const std::vector<undelivered_record>& batch) {
  if (batch.empty()) return;
  const std::string what = "cannot record " + std::to_string(batch.size()) + " undelivered minions";
  write_transaction txn(conn_, what);
  query q(conn_,
          "INSERT OR IGNORE INTO undelivered (jid, minion, reason, stamp) "
          "SELECT ?1, ?2, ?3, ?4 WHERE NOT EXISTS "
          "(SELECT 1 FROM returns WHERE jid = ?1 AND minion = ?2)",
          what);
  for (const auto& u : batch) {
    q.bind(1, u.jid).bind(2, u.minion).bind(3, u.reason).bind(4, u.stamp);
    q.run();
  }
  txn.commit();
}

std::vector<undelivered_record> sqlite_store::get_undelivered(const std::string& jid) {
  query q(conn_,
          "SELECT jid, minion, reason, stamp FROM undelivered WHERE jid = ?1 ORDER BY minion",
          "cannot read undelivered minions of job " + jid);
  q.bind(1, jid);
  std::vector<undelivered_record> out;
  while (q.step()) out.push_back({q.text(0), q.text(1), q.text(2), q.integer(3)});
  return out;
}

size_t sqlite_store::count_undelivered(const std::string& jid) {
  query q(conn_, "SELECT count(*) FROM undelivered WHERE jid = ?1",
          "cannot count undelivered minions of job " + jid);
  q.bind(1, jid);
  return q.step() ? static_cast<size_t>(q.integer(0)) : 0;
}

std::vector<std::string> sqlite_store::returned_minions(const std::string& jid) {
  query q(conn_, "SELECT minion FROM returns WHERE jid = ?1 ORDER BY minion",
          "cannot read returns of job " + jid);
  q.bind(1, jid);
  std::vector<std::string> out;
  while (q.step()) out.push_back(q.text(0));
  return out;
}

void sqlite_store::settle_job(const std::string& jid) {
  query(conn_, "UPDATE jobs SET settled = 1 WHERE jid = ?1 AND settled = 0",
        "cannot settle job " + jid)
      .bind(1, jid)
      .run();
}

std::vector<job_record> sqlite_store::unsettled_jobs() {
  query q(conn_,
          "SELECT jid, fun, args, kwargs, target, tgt_type, user, minions, master, created, "
          "deliver_by FROM jobs WHERE settled = 0 ORDER BY created, jid",
          "cannot list unsettled jobs");
  std::vector<job_record> jobs;
  while (q.step()) jobs.push_back(read_job(q));
  return jobs;
}

size_t sqlite_store::purge_jobs_before(int64_t cutoff) {
  const std::string what = "cannot purge jobs";
  write_transaction txn(conn_, what);
  // Returns first, while their jobs still say which jids are old: a return
  // can be newer than the cutoff although its job is not.
  query(conn_, "DELETE FROM returns WHERE jid IN (SELECT jid FROM jobs WHERE created < ?1)", what)
      .bind(1, cutoff)
      .run();
  query(conn_, "DELETE FROM undelivered WHERE jid IN (SELECT jid FROM jobs WHERE created < ?1)",
        what)
      .bind(1, cutoff)
      .run();
  query jobs(conn_, "DELETE FROM jobs WHERE created < ?1", what);
  jobs.bind(1, cutoff).run();
  auto purged = static_cast<size_t>(jobs.changes());
  // Returns whose job this store never saw or already purged go by their own age.
  query(conn_,
        "DELETE FROM returns WHERE stamp < ?1 "
        "AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.jid = returns.jid)",
        what)
      .bind(1, cutoff)
      .run();
  txn.commit();
  return purged;
}

void sqlite_store::put_minion_data(const std::vector<minion_data_update>& batch) {
  if (batch.empty()) return;
  const std::string what = "cannot store the data of " + std::to_string(batch.size()) + " minions";
  write_transaction txn(conn_, what);
  query row(conn_, "INSERT OR IGNORE INTO minion_data (id) VALUES (?1)", what);
  // Unchanged grains (a minion reconnecting) rewrite nothing.
  query grains(conn_, "UPDATE minion_data SET grains = ?2 WHERE id = ?1 AND grains IS NOT ?2",
               what);
  query drop_keys(conn_, "DELETE FROM minion_grains WHERE id = ?1", what);
  query add_key(conn_, "INSERT OR REPLACE INTO minion_grains (key, id, value) VALUES (?1, ?2, ?3)",
                what);
  query pillar(conn_, "UPDATE minion_data SET pillar = ?2 WHERE id = ?1", what);
  query seen(conn_, "UPDATE minion_data SET last_seen = ?2, master = ?3 WHERE id = ?1", what);
  // Gone from this master: unless it went to another meanwhile.
  query left(conn_,
             "UPDATE minion_data SET last_seen = ?2, master = CASE WHEN master = ?3 THEN '' "
             "ELSE master END WHERE id = ?1",
             what);
  for (const auto& u : batch) {
    row.bind(1, u.id);
    row.run();
    if (u.grains) {
      std::string text = to_json_text(*u.grains);
      grains.bind(1, u.id).bind(2, text);
      grains.run();
      if (grains.changes() > 0) {
        drop_keys.bind(1, u.id).run();
        add_key.bind(1, std::string_view("")).bind(2, u.id).bind(3, std::string_view(""));
        add_key.run();
        if (u.grains->is_object()) {
          for (const auto& [key, value] : u.grains->items()) {
            if (key.empty()) continue;
            std::string value_text = to_json_text(value);
            add_key.bind(1, key).bind(2, u.id).bind(3, value_text);
            add_key.run();
          }
        }
      }
    }
    if (u.pillar) {
      std::string text = to_json_text(*u.pillar);
      pillar.bind(1, u.id).bind(2, text);
      pillar.run();
    }
    if (u.last_seen) {
      query& q = u.left ? left : seen;
      q.bind(1, u.id).bind(2, *u.last_seen).bind(3, u.master);
      q.run();
    }
  }
  txn.commit();
}

std::vector<minion_data_record> sqlite_store::load_minion_data() {
  query q(conn_, "SELECT id, grains, pillar, last_seen, master FROM minion_data ORDER BY id",
          "cannot read the minion data cache");
  std::vector<minion_data_record> out;
  while (q.step()) {
    minion_data_record r;
    r.id = q.text(0);
    std::string row = "minion data of " + r.id;
    if (!q.is_null(1)) r.grains = parse_json(q.text(1), row, "grains");
    if (!q.is_null(2)) r.pillar = parse_json(q.text(2), row, "pillar");
    r.last_seen = q.integer(3);
    r.master = q.text(4);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<minion_data_record> sqlite_store::query_minion_data(const minion_data_query& q) {
  if (!q.grains) {
    auto rows = load_minion_data();
    if (!q.pillar) {
      for (auto& r : rows) r.pillar.reset();
    }
    return rows;
  }
  const std::string what = "cannot read the minion data cache";
  // One snapshot for the three reads.
  query(conn_, "BEGIN", what).run();
  struct end_read {
    connection& c;
    ~end_read() { sqlite3_exec(c.handle(), "COMMIT", nullptr, nullptr, nullptr); }
  } end{conn_};
  std::vector<minion_data_record> out;
  std::unordered_map<std::string, size_t> at;
  {
    // minion_data_presence covers it: no grains are read.
    query rows(conn_, "SELECT id, last_seen, master FROM minion_data ORDER BY id", what);
    while (rows.step()) {
      minion_data_record r;
      r.id = rows.text(0);
      r.last_seen = rows.integer(1);
      r.master = rows.text(2);
      at.emplace(r.id, out.size());
      out.push_back(std::move(r));
    }
  }
  {
    // The chosen keys and the '' marker of cached grains, from
    // minion_grains' primary key.
    nlohmann::json keys = nlohmann::json::array({""});
    for (const auto& k : *q.grains) keys.push_back(k);
    std::string keys_text = keys.dump();
    query rows(conn_,
               "SELECT key, id, value FROM minion_grains WHERE key IN (SELECT value FROM "
               "json_each(?1))",
               what);
    rows.bind(1, keys_text);
    while (rows.step()) {
      auto it = at.find(rows.text(1));
      if (it == at.end()) continue;
      minion_data_record& r = out[it->second];
      if (!r.grains) r.grains = nlohmann::json::object();
      std::string key = rows.text(0);
      if (key.empty()) continue;
      auto value = parse_json(rows.text(2), "minion data of " + r.id, "grains");
      if (!value.is_null()) (*r.grains)[key] = std::move(value);
    }
  }
  if (q.pillar) {
    query rows(conn_, "SELECT id, pillar FROM minion_data WHERE pillar IS NOT NULL", what);
    while (rows.step()) {
      auto it = at.find(rows.text(0));
      if (it == at.end()) continue;
      out[it->second].pillar = parse_json(rows.text(1), "minion data of " + rows.text(0), "pillar");
    }
  }
  return out;
}

void sqlite_store::delete_minion_data(const std::string& id) {
  const std::string what = "cannot forget the data of minion " + id;
  write_transaction txn(conn_, what);
  query(conn_, "DELETE FROM minion_data WHERE id = ?1", what).bind(1, id).run();
  query(conn_, "DELETE FROM minion_grains WHERE id = ?1", what).bind(1, id).run();
  txn.commit();
}

std::vector<file_pin> sqlite_store::load_file_pins() {
  query q(conn_,
          "SELECT remote, saltenv, ref, commit_id, updated FROM file_pins ORDER BY remote, saltenv",
          "cannot read the pinned gitfs revisions");
  std::vector<file_pin> out;
  while (q.step()) out.push_back({q.text(0), q.text(1), q.text(2), q.text(3), q.integer(4)});
  return out;
}

void sqlite_store::put_file_pins(const std::vector<std::string>& remotes,
                                 const std::vector<file_pin>& pins) {
  const std::string what = "cannot pin the gitfs revisions";
  write_transaction txn(conn_, what);
  for (const auto& remote : remotes) {
    query(conn_, "DELETE FROM file_pins WHERE remote = ?1", what).bind(1, remote).run();
  }
  query add(conn_,
            "INSERT OR REPLACE INTO file_pins (remote, saltenv, ref, commit_id, updated) "
            "VALUES (?1, ?2, ?3, ?4, ?5)",
            what);
  for (const auto& p : pins) {
    add.bind(1, p.remote).bind(2, p.saltenv).bind(3, p.ref).bind(4, p.commit).bind(5, p.updated);
    add.run();
  }
  txn.commit();
}

#define BRINE_REPORT_COLUMNS                                                                 \
  "r.jid, r.minion, r.fun, r.started, r.duration, r.run_time, r.status, r.test, r.retcode, " \
  "r.succeeded, r.failed, r.changed, r.pending, r.total, r.timings, r.errors"

size_t sqlite_store::add_reports(const std::vector<report::report>& batch) {
  if (batch.empty()) return 0;
  const std::string what = "cannot store " + std::to_string(batch.size()) + " reports";
  write_transaction txn(conn_, what);
  query add(conn_,
            "INSERT OR IGNORE INTO reports (jid, minion, fun, started, duration, run_time, status, "
            "test, retcode, succeeded, failed, changed, pending, total, timings, errors, ret) "
            "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
            what);
  // The later start wins; a tie goes to the later jid, as list order has it.
  query last(conn_,
             "INSERT INTO last_reports (minion, jid, started) VALUES (?1, ?2, ?3) "
             "ON CONFLICT (minion) DO UPDATE SET jid = excluded.jid, started = excluded.started "
             "WHERE (excluded.started, excluded.jid) > (last_reports.started, last_reports.jid)",
             what);
  query state(conn_,
              "INSERT OR IGNORE INTO report_states (state_id, started, jid, minion, tag, "
              "function, name, sls, result, changes) "
              "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
              what);
  size_t added = 0;
  for (const auto& r : batch) {
    std::string timings = report::timings_text(r.timings);
    std::string errors = to_json_text(nlohmann::json(r.errors));
    std::string ret = to_json_text(r.ret);
    add.bind(1, r.jid)
        .bind(2, r.minion)
        .bind(3, r.fun)
        .bind(4, r.started_ms)
        .bind(5, r.duration_ms)
        .bind(6, r.run_time_ms)
        .bind(7, report::to_string(r.status))
        .bind(8, int64_t{r.test ? 1 : 0})
        .bind(9, int64_t{r.retcode})
        .bind(10, static_cast<int64_t>(r.counts.succeeded))
        .bind(11, static_cast<int64_t>(r.counts.failed))
        .bind(12, static_cast<int64_t>(r.counts.changed))
        .bind(13, static_cast<int64_t>(r.counts.pending))
        .bind(14, static_cast<int64_t>(r.counts.total))
        .bind(15, timings)
        .bind(16, errors)
        .bind(17, ret);
    add.run();
    if (add.changes() == 0) continue;  // re-sent: the first one stays
    ++added;
    last.bind(1, r.minion).bind(2, r.jid).bind(3, r.started_ms);
    last.run();
    for (const auto& st : report::states_of(r.ret)) {
      state.bind(1, st.id)
          .bind(2, r.started_ms)
          .bind(3, r.jid)
          .bind(4, r.minion)
          .bind(5, st.tag)
          .bind(6, st.function)
          .bind(7, st.name)
          .bind(8, st.sls);
      if (st.result) {
        state.bind(9, int64_t{*st.result ? 1 : 0});
      } else {
        state.bind_null(9);
      }
      state.bind(10, int64_t{st.changes ? 1 : 0});
      state.run();
    }
  }
  txn.commit();
  return added;
}

report::report sqlite_store::read_report(const query& q, bool with_ret, bool brief) const {
  report::report r;
  r.jid = q.text(0);
  r.minion = q.text(1);
  std::string row = "report of " + r.minion + " for job " + r.jid;
  r.fun = q.text(2);
  r.started_ms = q.integer(3);
  r.duration_ms = q.real(4);
  r.run_time_ms = q.real(5);
  std::string status = q.text(6);
  auto parsed = report::parse_status(status);
  if (!parsed) {
    conn_.fail_message(row + " has unknown status '" + status +
                       "'; it was written by a newer brine or edited by hand");
  }
  r.status = *parsed;
  r.test = q.integer(7) != 0;
  r.retcode = static_cast<int>(q.integer(8));
  r.counts = {static_cast<size_t>(q.integer(9)), static_cast<size_t>(q.integer(10)),
              static_cast<size_t>(q.integer(11)), static_cast<size_t>(q.integer(12)),
              static_cast<size_t>(q.integer(13))};
  if (brief) return r;
  auto timings = report::parse_timings(q.text(14));
  if (!timings) conn_.fail_message(row + ": column timings is not a map of timings");
  r.timings = std::move(*timings);
  auto errors = parse_json(q.text(15), row, "errors");
  if (!errors.is_array()) conn_.fail_message(row + ": column errors is not a JSON array");
  for (const auto& e : errors) r.errors.push_back(e.is_string() ? e.get<std::string>() : e.dump());
  if (with_ret) r.ret = parse_json<nlohmann::ordered_json>(q.text(16), row, "ret");
  return r;
}

std::vector<report::report> sqlite_store::list_reports(const report_query& q) {
  // The statement depends on which filters are set, so that each can use
  // its index; one text per combination, prepared once.
  std::string sql = std::string("SELECT ") + BRINE_REPORT_COLUMNS;
  std::string_view minion_col = q.last ? "l.minion" : "r.minion";
  if (q.last) {
    // CROSS JOIN: SQLite then reads last_reports (a row per minion) and
    // looks each report up, rather than walking every report to find the
    // minions' latest.
    sql +=
        " FROM last_reports l CROSS JOIN reports r ON r.jid = l.jid AND r.minion = l.minion "
        "WHERE 1";
  } else {
    sql += " FROM reports r WHERE 1";
  }
  auto glob = split_glob(q.minion);
  std::string end = prefix_end(glob.prefix);
  std::string pattern = sqlite_glob(q.minion);
  if (!q.minion.empty()) {
    if (!glob.wildcard) {
      sql += " AND " + std::string(minion_col) + " = ?1";
    } else {
      if (!glob.prefix.empty()) {
        sql += " AND " + std::string(minion_col) + " >= ?2";
        if (!end.empty()) sql += " AND " + std::string(minion_col) + " < ?3";
      }
      sql += " AND " + std::string(minion_col) + " GLOB ?4";
    }
  }
  if (q.status) sql += " AND r.status = ?5";
  if (q.since_ms) sql += " AND r.started >= ?6";
  // Exactly an index's order read backwards, so that LIMIT stops the read.
  sql += q.last ? " ORDER BY l.started DESC, l.jid DESC, l.minion DESC LIMIT ?7"
                : " ORDER BY r.started DESC, r.jid DESC, r.minion DESC LIMIT ?7";
  auto interned = dynamic_sql_.insert(std::move(sql)).first;

  auto bounded = static_cast<int64_t>(
      std::min<uint64_t>(q.limit, static_cast<uint64_t>(std::numeric_limits<int64_t>::max())));
  std::string status = q.status ? report::to_string(*q.status) : "";
  query stmt(conn_, *interned, "cannot list reports");
  // Parameters the text does not use are ignored by SQLite.
  stmt.bind(1, glob.prefix).bind(2, glob.prefix).bind(3, end).bind(4, pattern).bind(5, status);
  stmt.bind(6, q.since_ms.value_or(0)).bind(7, bounded);
  std::vector<report::report> out;
  while (stmt.step()) out.push_back(read_report(stmt, false, q.brief));
  return out;
}

std::optional<report::report> sqlite_store::get_report(const std::string& jid,
                                                       const std::string& minion) {
  query q(conn_,
          "SELECT " BRINE_REPORT_COLUMNS
          ", r.ret FROM reports r WHERE r.jid = ?1 AND r.minion = ?2",
          "cannot read the report of " + minion + " for job " + jid);
  q.bind(1, jid).bind(2, minion);
  if (!q.step()) return std::nullopt;
  return read_report(q, true);
}

size_t sqlite_store::purge_reports_before(int64_t cutoff_ms) {
  const std::string what = "cannot purge reports";
  write_transaction txn(conn_, what);
  query q(conn_,
          "DELETE FROM reports WHERE started < ?1 AND NOT EXISTS (SELECT 1 FROM last_reports l "
          "WHERE l.jid = reports.jid AND l.minion = reports.minion)",
          what);
  q.bind(1, cutoff_ms).run();
  auto purged = static_cast<size_t>(q.changes());
  query(conn_,
        "DELETE FROM report_states WHERE started < ?1 AND NOT EXISTS (SELECT 1 FROM reports r "
        "WHERE r.jid = report_states.jid AND r.minion = report_states.minion)",
        what)
      .bind(1, cutoff_ms)
      .run();
  txn.commit();
  return purged;
}

std::vector<state_result_record> sqlite_store::list_state_results(const state_query& q) {
  std::string sql =
      "SELECT s.jid, s.minion, r.fun, s.started, r.test, s.state_id, s.function, s.name, s.sls, "
      "s.result, s.changes FROM report_states s JOIN reports r ON r.jid = s.jid AND "
      "r.minion = s.minion";
  if (q.last) {
    sql += " JOIN last_reports l ON l.jid = s.jid AND l.minion = s.minion";
  }
  sql += " WHERE s.state_id = ?1";
  if (!q.minion.empty()) sql += " AND s.minion GLOB ?2";
  if (q.since_ms) sql += " AND s.started >= ?3";
  // The primary key's order read backwards: LIMIT stops the read.
  sql += " ORDER BY s.state_id DESC, s.started DESC, s.jid DESC, s.minion DESC, s.tag DESC "
         "LIMIT ?4";
  auto interned = dynamic_sql_.insert(std::move(sql)).first;
  query stmt(conn_, *interned, "cannot list the results of state " + q.id);
  auto bounded = static_cast<int64_t>(
      std::min<uint64_t>(q.limit, static_cast<uint64_t>(std::numeric_limits<int64_t>::max())));
  std::string pattern = sqlite_glob(q.minion);
  stmt.bind(1, q.id).bind(2, pattern).bind(3, q.since_ms.value_or(0));
  stmt.bind(4, bounded);
  std::vector<state_result_record> out;
  while (stmt.step()) {
    state_result_record r;
    r.jid = stmt.text(0);
    r.minion = stmt.text(1);
    r.fun = stmt.text(2);
    r.started_ms = stmt.integer(3);
    r.test = stmt.integer(4) != 0;
    r.state_id = stmt.text(5);
    r.function = stmt.text(6);
    r.name = stmt.text(7);
    r.sls = stmt.text(8);
    if (!stmt.is_null(9)) r.result = stmt.integer(9) != 0;
    r.changes = stmt.integer(10) != 0;
    out.push_back(std::move(r));
  }
  return out;
}

#undef BRINE_REPORT_COLUMNS

}  // namespace

std::unique_ptr<store> open_sqlite(const std::string& path) {
  return std::make_unique<sqlite_store>(path);
}

}  // namespace brine::store
