#include "store/postgres/postgres_store.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/error.h"
#include "pq/libpq.h"
#include "store/json_column.h"
#include "store/store.h"

namespace brine::store {

std::string postgres_schema_problem(int db_version, int code_version) {
  const std::string fix = "; run `brine store migrate`";
  if (db_version == code_version) return "";
  if (db_version == 0) return "the database has no brine schema yet" + fix;
  if (db_version < 0) {
    return "schema version " + std::to_string(db_version) +
           " was not written by brine (table brine_schema was edited)";
  }
  if (db_version < code_version) {
    return "schema version " + std::to_string(db_version) + " is behind this brine (" +
           std::to_string(code_version) + ")" + fix;
  }
  return "schema version " + std::to_string(db_version) + " is newer than this brine supports (" +
         std::to_string(code_version) + "); upgrade brine";
}

namespace {

using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

// libpq is loaded when the first PostgreSQL store is opened (pq/libpq.h).
using libpq = pq::api;

// Rows per multi-row statement: 500 returns are 3,500 parameters (the
// protocol allows 65,535), and one statement per 500 keeps round trips few.
constexpr size_t k_chunk_rows = 500;

constexpr milliseconds k_first_retry_delay{100};
// A failover takes seconds to a minute; a refused connection on the way
// costs a millisecond: tried every second, so a store that is back is
// found within one.
constexpr milliseconds k_max_retry_delay{1000};

// k_postgres_migrations[v] takes a database from version v to v + 1; append only, as
// for SQLite. Text columns compared or sorted by brine are COLLATE "C": byte
// order, as SQLite sorts, whatever the database's locale. Values are JSON
// text, not jsonb: brine never queries inside them, and text keeps the
// numbers and key order exactly as written.
constexpr std::array<const char*, k_postgres_schema_version> k_postgres_migrations = {
    // 0 -> 1: everything SQLite has at its version 3, and the master slots.
    R"sql(
CREATE TABLE keys (
  id          text COLLATE "C" NOT NULL,
  fingerprint text COLLATE "C" NOT NULL,
  state       text   NOT NULL,
  pubkey      text   NOT NULL,
  updated     bigint NOT NULL,
  PRIMARY KEY (id, fingerprint)
);
CREATE TABLE jobs (
  jid        text COLLATE "C" NOT NULL PRIMARY KEY,
  fun        text    NOT NULL,
  args       text    NOT NULL,
  kwargs     text    NOT NULL,
  target     text    NOT NULL,
  tgt_type   text    NOT NULL,
  "user"     text    NOT NULL,
  minions    text    NOT NULL,
  master     text    NOT NULL,
  created    bigint  NOT NULL,
  deliver_by bigint  NOT NULL DEFAULT 0,
  settled    boolean NOT NULL DEFAULT false
);
CREATE INDEX jobs_by_created ON jobs (created, jid);
CREATE INDEX jobs_unsettled ON jobs (created, jid) WHERE NOT settled;
-- No foreign key to jobs: a return can come before its job or after its purge
-- (see the SQLite schema).
CREATE TABLE returns (
  jid     text COLLATE "C" NOT NULL,
  minion  text COLLATE "C" NOT NULL,
  fun     text    NOT NULL,
  ret     text    NOT NULL,
  success boolean NOT NULL,
  retcode integer NOT NULL,
  stamp   bigint  NOT NULL,
  PRIMARY KEY (jid, minion)
);
CREATE INDEX returns_by_stamp ON returns (stamp);
CREATE TABLE undelivered (
  jid    text COLLATE "C" NOT NULL,
  minion text COLLATE "C" NOT NULL,
  reason text   NOT NULL,
  stamp  bigint NOT NULL,
  PRIMARY KEY (jid, minion)
);
CREATE TABLE minion_data (
  id        text COLLATE "C" NOT NULL PRIMARY KEY,
  grains    text,
  pillar    text,
  last_seen bigint NOT NULL DEFAULT 0,
  master    text   NOT NULL DEFAULT ''
);
CREATE TABLE masters (
  name    text    NOT NULL PRIMARY KEY,
  slot    integer NOT NULL UNIQUE CHECK (slot >= 0 AND slot < 100),
  claimed bigint  NOT NULL
);
)sql",
    // 1 -> 2: state-run reports and each minion's latest, as SQLite's
    // version 4 (see there).
    R"sql(
CREATE TABLE reports (
  jid       text COLLATE "C" NOT NULL,
  minion    text COLLATE "C" NOT NULL,
  fun       text             NOT NULL,
  started   bigint           NOT NULL,
  duration  double precision NOT NULL,
  run_time  double precision NOT NULL,
  status    text COLLATE "C" NOT NULL,
  test      boolean          NOT NULL,
  retcode   integer          NOT NULL,
  succeeded integer          NOT NULL,
  failed    integer          NOT NULL,
  changed   integer          NOT NULL,
  pending   integer          NOT NULL,
  total     integer          NOT NULL,
  timings   text             NOT NULL,
  errors    text             NOT NULL,
  ret       text             NOT NULL,
  PRIMARY KEY (jid, minion)
);
CREATE INDEX reports_by_started ON reports (started, jid, minion);
CREATE INDEX reports_by_minion ON reports (minion, started, jid);
CREATE INDEX reports_by_status ON reports (status, started, jid, minion);
CREATE TABLE last_reports (
  minion  text COLLATE "C" NOT NULL PRIMARY KEY,
  jid     text COLLATE "C" NOT NULL,
  started bigint           NOT NULL
);
CREATE INDEX last_reports_by_started ON last_reports (started, jid, minion);
)sql",
    // 2 -> 3: the pinned gitfs revisions, as SQLite's version 5.
    R"sql(
CREATE TABLE file_pins (
  remote    text COLLATE "C" NOT NULL,
  saltenv   text COLLATE "C" NOT NULL,
  ref       text   NOT NULL,
  commit_id text   NOT NULL,
  updated   bigint NOT NULL,
  PRIMARY KEY (remote, saltenv)
);
)sql",
    // 3 -> 4: what each master of a cluster says of itself (member_record).
    R"sql(
ALTER TABLE masters
  ADD COLUMN cluster_id     text    NOT NULL DEFAULT '',
  ADD COLUMN peer           text    NOT NULL DEFAULT '',
  ADD COLUMN cluster_finger text    NOT NULL DEFAULT '',
  ADD COLUMN finger         text    NOT NULL DEFAULT '',
  ADD COLUMN proof          text    NOT NULL DEFAULT '',
  ADD COLUMN seen           bigint  NOT NULL DEFAULT 0,
  ADD COLUMN stats          text    NOT NULL DEFAULT '{}',
  ADD COLUMN removed        boolean NOT NULL DEFAULT false;
)sql",
    // 4 -> 5: every state of every report by its state ID, as SQLite's
    // version 6 (see there). result NULL: None.
    R"sql(
CREATE TABLE report_states (
  state_id text COLLATE "C" NOT NULL,
  started  bigint           NOT NULL,
  jid      text COLLATE "C" NOT NULL,
  minion   text COLLATE "C" NOT NULL,
  tag      text COLLATE "C" NOT NULL,
  function text             NOT NULL,
  name     text             NOT NULL,
  sls      text             NOT NULL,
  result   boolean,
  changes  boolean          NOT NULL,
  PRIMARY KEY (state_id, started, jid, minion, tag)
);
CREATE INDEX report_states_by_report ON report_states (jid, minion);
)sql",
};

// The tables `brine store check` counts.
constexpr std::array<const char*, 8> k_tables = {"keys",        "jobs",    "returns", "undelivered",
                                                 "minion_data", "masters", "reports", "file_pins"};

// The length of the valid UTF-8 sequence at s[i] that PostgreSQL accepts
// (no NUL, no surrogate, no overlong form), or 0.
size_t utf8_sequence(std::string_view s, size_t i) {
  auto c = static_cast<unsigned char>(s[i]);
  if (c == 0) return 0;
  if (c < 0x80) return 1;
  size_t len = 0;
  uint32_t cp = 0;
  uint32_t min = 0;
  if ((c & 0xe0) == 0xc0) {
    len = 2, cp = c & 0x1f, min = 0x80;
  } else if ((c & 0xf0) == 0xe0) {
    len = 3, cp = c & 0x0f, min = 0x800;
  } else if ((c & 0xf8) == 0xf0) {
    len = 4, cp = c & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    auto next = static_cast<unsigned char>(s[i + k]);
    if ((next & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (next & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

// PostgreSQL refuses text that is not UTF-8 or holds a NUL byte, which
// SQLite stores as it is. A minion may send any bytes as a function name, and
// one such field must not make its whole batch fail forever (it would be
// re-sent and refused again), so each bad byte becomes U+FFFD.
std::string to_text(std::string s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t len = utf8_sequence(s, i);
    if (len == 0) break;
    i += len;
  }
  if (i == s.size()) return s;
  std::string out = s.substr(0, i);
  while (i < s.size()) {
    size_t len = utf8_sequence(s, i);
    if (len == 0) {
      out += "\xef\xbf\xbd";
      ++i;
    } else {
      out.append(s, i, len);
      i += len;
    }
  }
  return out;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// The URL for messages when it holds a password: user:secret@ loses
// ":secret", and a password= parameter goes.
std::string without_password(const std::string& url) {
  auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return "(a URL with a password)";
  size_t start = scheme_end + 3;
  size_t end = url.find_first_of("/?#", start);
  if (end == std::string::npos) end = url.size();
  std::string authority = url.substr(start, end - start);
  auto at = authority.rfind('@');
  if (at != std::string::npos) {
    auto colon = authority.find(':');
    if (colon < at) authority.erase(colon, at - colon);
  }
  std::string rest = url.substr(end);
  auto q = rest.find('?');
  if (q != std::string::npos) {
    std::string kept;
    std::string_view query(rest);
    query.remove_prefix(q + 1);
    while (!query.empty()) {
      auto amp = query.find('&');
      auto part = query.substr(0, amp);
      if (!starts_with(part, "password=") && part != "password") {
        kept += kept.empty() ? "" : "&";
        kept += part;
      }
      query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    }
    rest = rest.substr(0, q) + (kept.empty() ? "" : "?" + kept);
  }
  return url.substr(0, start) + authority + rest;
}

// Where a store connects and as whom; shared by the store and its feeds.
struct config {
  const libpq* pq = nullptr;
  std::string name;               // the URL as given (it holds no password)
  std::string endpoint;           // "host:port" for messages
  std::string origin;             // this writer's name in notifications
  milliseconds failover_wait{0};  // see options::failover_wait
  std::vector<std::pair<std::string, std::string>> params;  // libpq keyword, value

  config() = default;
  config(const config&) = delete;
  config& operator=(const config&) = delete;
  ~config() {
    for (auto& [key, value] : params) {
      if (key == "password") std::fill(value.begin(), value.end(), '\0');
    }
  }

  [[noreturn]] void fail(std::string_view message) const {
    throw base::error("store " + name + ": " + std::string(message));
  }
  // For a server that is down, starting, or not answering: worth waiting for.
  [[noreturn]] void fail_unreachable(std::string_view message) const {
    throw unreachable("store " + name + ": " + std::string(message));
  }
};

// Whether a failed connection attempt met no server (or one that cannot
// take sessions yet), rather than one that refused this user or database.
// libpq reports these as text only; brine never calls setlocale(), so
// libpq's own messages are in English.
bool is_unreachable(std::string_view message) {
  for (std::string_view sign :
       {"Connection refused", "timeout expired", "timed out", "No route to host",
        "Network is unreachable", "could not translate host name", "No such file or directory",
        "server closed the connection unexpectedly", "Connection reset by peer",
        "could not send startup packet", "the database system is starting up",
        "the database system is shutting down", "the database system is in recovery mode",
        "the database system is not yet accepting connections",
        "the database system is not accepting connections", "too many clients already",
        // target_session_attrs=read-write met only standbys: a failover is
        // under way, or the primary is down and none is promoted yet.
        "session is read-only", "server is in hot standby mode"}) {
    if (message.find(sign) != std::string_view::npos) return true;
  }
  return false;
}

// The password from `path`, which must be owner-only.
std::string read_password_file(const config& c, const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    c.fail("cannot read store_password_file " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    c.fail("store_password_file " + path + " is not a regular file");
  }
  if ((st.st_mode & 077) != 0) {
    ::close(fd);
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    c.fail("store_password_file " + path + " has mode " + mode + "; chmod 600 " + path);
  }
  std::string password;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      c.fail("cannot read store_password_file " + path + ": " + std::strerror(err));
    }
    if (n == 0) break;
    password.append(buf, static_cast<size_t>(n));
    if (password.size() > 65536) {
      ::close(fd);
      c.fail("store_password_file " + path + " is larger than 64 KiB; it should hold a password");
    }
  }
  ::close(fd);
  while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) {
    password.pop_back();
  }
  if (password.empty()) c.fail("store_password_file " + path + " is empty");
  return password;
}

// Reads postgresql://USER@HOST:PORT/DB?key=value&... into libpq's keywords.
std::shared_ptr<config> make_config(const options& o) {
  auto c = std::make_shared<config>();
  const std::string& url = o.url;
  bool has_password = false;
  if (auto scheme_end = url.find("://"); scheme_end == std::string::npos) {
    // Not a URL, so where a password might be is unclear: only the scheme
    // is shown when there is an '@' in it.
    auto at = url.find('@');
    c->name = at == std::string::npos ? url : url.substr(0, url.find(':')) + ":...";
    c->fail("is not a URL; write postgresql://USER@HOST:PORT/DATABASE");
  } else {
    size_t start = scheme_end + 3;
    size_t end = url.find_first_of("/?#", start);
    std::string_view authority = std::string_view(url).substr(start, end - start);
    auto at = authority.rfind('@');
    has_password = (at != std::string_view::npos &&
                    authority.substr(0, at).find(':') != std::string_view::npos) ||
                   url.find("?password") != std::string::npos ||
                   url.find("&password") != std::string::npos;
  }
  c->name = has_password ? without_password(url) : url;
  c->pq = &pq::load("store " + c->name);
  const std::string usage = "; write postgresql://USER@HOST:PORT/DATABASE";
  const std::string no_password =
      "holds a password; remove it from the URL and put it in a file of mode 0600 named by "
      "store_password_file";
  if (has_password) c->fail(no_password);

  auto scheme_end = url.find("://");
  std::string scheme = url.substr(0, scheme_end);
  if (scheme != "postgresql" && scheme != "postgres") {
    c->fail("unknown scheme '" + scheme + "'" + usage);
  }
  // libpq would read "db#x" as a database of that name; in a URL it is
  // far more likely a mistake.
  if (url.find('#', scheme_end) != std::string::npos) c->fail("has a '#' fragment" + usage);

  // What a valid URL is (several hosts, [IPv6], %-escapes, parameters) is
  // libpq's to say: its own parser reads it, as the connection will.
  char* parse_error = nullptr;
  PQconninfoOption* parsed = c->pq->PQconninfoParse(url.c_str(), &parse_error);
  if (parsed == nullptr) {
    std::string why = parse_error ? pq::first_line(parse_error) : "libpq cannot read it";
    if (parse_error) c->pq->PQfreemem(parse_error);
    const std::string prefix = "invalid URI query parameter: \"";
    if (why.rfind(prefix, 0) == 0 && why.size() > prefix.size() + 1) {
      std::string key = why.substr(prefix.size(), why.size() - prefix.size() - 1);
      c->fail("unknown parameter '" + key +
              "'; libpq's parameters are listed at "
              "https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-PARAMKEYWORDS");
    }
    c->fail("libpq cannot read it (" + why + ")" + usage);
  }
  std::map<std::string, std::string> params;
  for (PQconninfoOption* opt = parsed; opt->keyword != nullptr; ++opt) {
    if (opt->val != nullptr) params[opt->keyword] = opt->val;
  }
  if (auto pw = params.find("password"); pw != params.end()) {
    std::fill(pw->second.begin(), pw->second.end(), '\0');
    params.erase(pw);
    c->pq->PQconninfoFree(parsed);  // libpq's copy of it goes too
    c->fail(no_password);
  }
  c->pq->PQconninfoFree(parsed);

  if (params["dbname"].empty()) c->fail("has no database name" + usage);
  auto split = [](const std::string& list) {
    std::vector<std::string> out;
    size_t at = 0;
    for (;;) {
      auto comma = list.find(',', at);
      out.push_back(list.substr(at, comma == std::string::npos ? comma : comma - at));
      if (comma == std::string::npos) return out;
      at = comma + 1;
    }
  };
  std::vector<std::string> hosts = split(params.count("host") ? params["host"] : "");
  std::vector<std::string> ports = split(params.count("port") ? params["port"] : "");
  for (const auto& port : ports) {
    if (port.empty()) continue;  // that host's default
    int value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value < 1 || value > 65535) {
      c->fail("port must be 1..65535, got '" + port + "'" +
              (port.find(':') != std::string::npos
                   ? "; an IPv6 host needs brackets: postgresql://USER@[ADDRESS]:PORT/DATABASE"
                   : usage));
    }
  }
  if (auto e = params.find("client_encoding");
      e != params.end() && e->second != "UTF8" && e->second != "utf8") {
    c->fail("client_encoding must be UTF8: brine's text is UTF-8");
  }
  // Several hosts are a primary and its standbys: the store writes, so it
  // (and its change feed, whose notifications only the primary sends) must
  // reach the one that takes writes, whichever that is now.
  if (hosts.size() > 1) params.try_emplace("target_session_attrs", "read-write");
  // Every host for messages: "h1:5432, h2:5433".
  for (size_t i = 0; i < hosts.size(); ++i) {
    std::string port = ports.size() == hosts.size() ? ports[i] : ports.size() == 1 ? ports[0] : "";
    std::string shown = hosts[i].empty() ? "the local socket" : hosts[i];
    if (shown.find(':') != std::string::npos) shown = "[" + shown + "]";
    c->endpoint += (i ? ", " : "") + shown + ":" + (port.empty() ? "5432" : port);
  }
  // A dead server or a silent network is noticed within seconds rather than
  // at the kernel's two hours (the change feed only ever reads).
  params.try_emplace("application_name", "brine");
  params.try_emplace("connect_timeout", "5");
  params.try_emplace("keepalives_idle", "10");
  params.try_emplace("keepalives_interval", "5");
  params.try_emplace("keepalives_count", "3");
  params["client_encoding"] = "UTF8";

  for (auto& [key, value] : params) c->params.emplace_back(key, value);
  if (!o.password_file.empty()) {
    c->params.emplace_back("password", read_password_file(*c, o.password_file));
  }
  c->origin = o.origin;
  c->failover_wait = o.failover_wait;
  // A newline would end the origin's line in a payload early.
  std::replace(c->origin.begin(), c->origin.end(), '\n', ' ');
  return c;
}

void ignore_notice(void*, const char*) {}

// A new connection, or a base::error saying why there is none.
PGconn* connect(const config& c) {
  std::vector<const char*> keys;
  std::vector<const char*> values;
  for (const auto& [key, value] : c.params) {
    keys.push_back(key.c_str());
    values.push_back(value.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  // expand_dbname 0: a database name is never read as more parameters.
  PGconn* conn = c.pq->PQconnectdbParams(keys.data(), values.data(), 0);
  if (conn == nullptr) c.fail("cannot connect to " + c.endpoint + ": out of memory");
  if (c.pq->PQstatus(conn) != CONNECTION_OK) {
    // With several hosts libpq says why each failed, a line each (and a
    // line may go on over the next ones, indented): every host's reason.
    std::string message;
    {
      std::string_view raw = c.pq->PQerrorMessage(conn);
      while (!raw.empty()) {
        auto nl = raw.find('\n');
        std::string_view line = raw.substr(0, nl);
        raw = nl == std::string_view::npos ? std::string_view() : raw.substr(nl + 1);
        if (line.empty() || line[0] == ' ' || line[0] == '\t') continue;
        std::string cleaned = pq::clean_message(std::string(line).c_str());
        // 'connection to server at "h", port 5432 failed: why' -> "h:5432: why"
        // when there are several hosts to tell apart.
        if (c.endpoint.find(", ") != std::string::npos) {
          constexpr std::string_view k_at = "connection to server at \"";
          auto quote = line.find("\", port ");
          auto failed = line.find(" failed: ");
          if (line.rfind(k_at, 0) == 0 && quote != std::string_view::npos &&
              failed != std::string_view::npos && quote < failed) {
            cleaned = std::string(line.substr(k_at.size(), quote - k_at.size())) + ":" +
                      std::string(line.substr(quote + 8, failed - quote - 8)) + ": " + cleaned;
          }
        }
        if (message.find(cleaned) == std::string::npos)
          message += (message.empty() ? "" : "; ") + cleaned;
      }
      if (message.empty()) message = pq::clean_message(nullptr);
    }
    c.pq->PQfinish(conn);
    std::string fix;
    if (message.find("password authentication failed") != std::string::npos) {
      fix = "; check the password in store_password_file";
    } else if (message.find("no password supplied") != std::string::npos) {
      fix = "; name a file holding the password with store_password_file";
    } else if (message.find("Connection refused") != std::string::npos) {
      fix = "; check that PostgreSQL is running and listens there";
    }
    if (is_unreachable(message)) {
      c.fail_unreachable("cannot connect to " + c.endpoint + ": " + message + fix);
    }
    c.fail("cannot connect to " + c.endpoint + ": " + message + fix);
  }
  // Notices (a NOTICE from the server) would go to stderr.
  c.pq->PQsetNoticeProcessor(conn, ignore_notice, nullptr);
  return conn;
}

// The delay between attempts to reconnect: none before the first after a
// loss, then 100 ms doubling to 1 s after each failed one.
class backoff {
 public:
  // Throws when an attempt now would come before the delay has passed.
  void check(const config& c, std::string_view who) const {
    auto now = clock_type::now();
    if (now >= next_) return;
    auto left = std::chrono::ceil<milliseconds>(next_ - now).count();
    c.fail_unreachable(std::string(who) + "reconnecting after a lost connection; next attempt in " +
                       std::to_string(left) + " ms");
  }
  void failed() {
    delay_ = delay_.count() == 0 ? k_first_retry_delay : std::min(delay_ * 2, k_max_retry_delay);
    next_ = clock_type::now() + delay_;
  }
  void succeeded() {
    delay_ = milliseconds(0);
    next_ = {};
  }
  // When the next attempt may be made (the epoch: at once).
  clock_type::time_point next() const { return next_; }
  // Lets the next attempt be made now (the delay keeps growing).
  void allow_now() { next_ = {}; }

 private:
  milliseconds delay_{0};
  clock_type::time_point next_{};
};

// A query's result rows, read as text.
class result {
 public:
  result(const config& c, PGresult* r) : c_(&c), r_(r) {}
  ~result() {
    if (r_) c_->pq->PQclear(r_);
  }
  result(result&& o) noexcept : c_(o.c_), r_(std::exchange(o.r_, nullptr)) {}
  result& operator=(result&&) = delete;
  result(const result&) = delete;
  result& operator=(const result&) = delete;

  int rows() const { return c_->pq->PQntuples(r_); }
  bool is_null(int row, int col) const { return c_->pq->PQgetisnull(r_, row, col) != 0; }
  std::string text(int row, int col) const {
    return std::string(c_->pq->PQgetvalue(r_, row, col),
                       static_cast<size_t>(c_->pq->PQgetlength(r_, row, col)));
  }
  int64_t integer(int row, int col) const {
    const char* p = c_->pq->PQgetvalue(r_, row, col);
    const char* end = p + c_->pq->PQgetlength(r_, row, col);
    int64_t value = 0;
    auto [stop, ec] = std::from_chars(p, end, value);
    if (ec != std::errc() || stop != end) {
      c_->fail("expected an integer from the database, got '" + std::string(p, end) + "'");
    }
    return value;
  }
  bool boolean(int row, int col) const { return c_->pq->PQgetvalue(r_, row, col)[0] == 't'; }
  double real(int row, int col) const {
    const char* p = c_->pq->PQgetvalue(r_, row, col);
    const char* end = p + c_->pq->PQgetlength(r_, row, col);
    double value = 0;
    auto [stop, ec] = std::from_chars(p, end, value);
    if (ec != std::errc() || stop != end) {
      c_->fail("expected a number from the database, got '" + std::string(p, end) + "'");
    }
    return value;
  }
  // The rows an INSERT, UPDATE or DELETE touched.
  size_t affected() const {
    const char* p = c_->pq->PQcmdTuples(r_);
    size_t n = 0;
    std::from_chars(p, p + std::strlen(p), n);
    return n;
  }

 private:
  const config* c_;
  PGresult* r_;
};

// A statement's parameters, all sent in binary: text as its bytes (no
// escaping, no NUL terminator needed), integers big-endian.
class params {
 public:
  params& text(std::string s) {
    owned_.push_back(to_text(std::move(s)));
    return add(owned_.back().data(), owned_.back().size());
  }
  params& text_or_null(const std::optional<std::string>& s) { return s ? text(*s) : null(); }
  params& null() {
    values_.push_back(nullptr);
    lengths_.push_back(0);
    formats_.push_back(1);
    return *this;
  }
  params& int8(int64_t v) { return big_endian(static_cast<uint64_t>(v), 8); }
  // An array (text[], bigint[]: the cast in the statement says which) in
  // PostgreSQL's text form {"a","b"}, for unnest(): the one parameter here
  // not sent in binary, which would need the element type's OID.
  params& array(const std::vector<std::string>& items) {
    std::string a = "{";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) a += ',';
      a += '"';
      for (char ch : to_text(items[i])) {
        if (ch == '"' || ch == '\\') a += '\\';
        a += ch;
      }
      a += '"';
    }
    a += '}';
    owned_.push_back(std::move(a));
    values_.push_back(owned_.back().c_str());
    lengths_.push_back(0);
    formats_.push_back(0);
    return *this;
  }
  params& int4(int32_t v) { return big_endian(static_cast<uint32_t>(v), 4); }
  // float8 in binary: the IEEE 754 bits, big-endian.
  params& float8(double v) { return big_endian(std::bit_cast<uint64_t>(v), 8); }
  params& boolean(bool v) {
    owned_.emplace_back(1, v ? '\1' : '\0');
    return add(owned_.back().data(), 1);
  }

  int size() const { return static_cast<int>(values_.size()); }
  const char* const* values() const { return values_.data(); }
  const int* lengths() const { return lengths_.data(); }
  const int* formats() const { return formats_.data(); }

 private:
  params& big_endian(uint64_t v, size_t bytes) {
    std::string b(bytes, '\0');
    for (size_t i = 0; i < bytes; ++i) b[bytes - 1 - i] = static_cast<char>((v >> (8 * i)) & 0xff);
    owned_.push_back(std::move(b));
    return add(owned_.back().data(), bytes);
  }
  params& add(const char* p, size_t n) {
    values_.push_back(p);
    lengths_.push_back(static_cast<int>(n));
    formats_.push_back(1);
    return *this;
  }

  // A deque: adding an element leaves the others (and their bytes) in place.
  std::deque<std::string> owned_;
  std::vector<const char*> values_;
  std::vector<int> lengths_;
  std::vector<int> formats_;
};

std::string lock_sql(const char* function, int64_t key) {
  return std::string("SELECT ") + function + "(" + std::to_string(key) + ")";
}

struct statement {
  const char* name;
  const char* sql;
};

// The store's connection: connected again on the next call after it was
// lost, with its statements prepared again.
//
// Threading: one thread at a time (the store's).
class session {
 public:
  explicit session(std::shared_ptr<const config> c) : c_(std::move(c)) {}
  ~session() { close(); }
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  const config& cfg() const { return *c_; }

  // The live connection; connects when there is none (and the delay since a
  // failed attempt has passed), or throws.
  PGconn* get() {
    if (conn_) return conn_;
    deferred_ = true;
    backoff_.check(*c_, "");
    deferred_ = false;
    try {
      conn_ = connect(*c_);
    } catch (...) {
      backoff_.failed();
      throw;
    }
    backoff_.succeeded();
    lost_at_.reset();
    prepared_.clear();
    return conn_;
  }

  // Whether the connection was lost by a call less than failover_wait ago
  // and not made again since: a failover may be under way, worth waiting
  // for. A server down for longer fails calls at once again.
  bool riding_out() const { return lost_at_ && clock_type::now() < *lost_at_ + c_->failover_wait; }
  // When get() may try to connect again.
  clock_type::time_point next_attempt() const { return backoff_.next(); }
  // The next get() tries to connect, whatever the backoff says.
  void attempt_now() { backoff_.allow_now(); }
  // Whether the last get() failed without trying, the backoff's delay not
  // passed yet.
  bool deferred() const { return deferred_; }

  // Whether the last call failed because the server refused its write as
  // read-only (SQLSTATE 25006, a standby now) with the connection still up:
  // a statement that certainly did not commit.
  bool write_refused() const { return write_refused_; }

  void close() {
    if (conn_) c_->pq->PQfinish(conn_);
    conn_ = nullptr;
  }

  // Connects and prepares `s`, so that a lost connection after this is one
  // that `s` itself may have reached the server on.
  void ready_to_send(const statement& s, std::string_view what) {
    live();
    prepare(s, what);
  }

  // Runs a prepared statement (prepared on first use on this connection).
  result run(const statement& s, const params& p, std::string_view what) {
    PGconn* conn = live();
    prepare(s, what);
    return check(
        c_->pq->PQexecPrepared(conn, s.name, p.size(), p.values(), p.lengths(), p.formats(), 0),
        what);
  }
  result run(const statement& s, std::string_view what) { return run(s, params(), what); }

  // Runs SQL without parameters (transaction control, migrations).
  result exec(const char* sql, std::string_view what) {
    return check(c_->pq->PQexec(live(), sql), what);
  }

  // Ends a transaction that did not commit. Nothing to do when the
  // connection is gone: the server rolled it back.
  void rollback() {
    if (conn_ == nullptr || c_->pq->PQtransactionStatus(conn_) == PQTRANS_IDLE) return;
    PGresult* r = c_->pq->PQexec(conn_, "ROLLBACK");
    if (r) c_->pq->PQclear(r);
    if (c_->pq->PQstatus(conn_) != CONNECTION_OK) close();
  }

 private:
  void prepare(const statement& s, std::string_view what) {
    if (prepared_.count(s.name) != 0) return;
    check(c_->pq->PQprepare(get(), s.name, s.sql, 0, nullptr), what);
    prepared_.insert(s.name);
  }

  // The connection to send on: connected again, before anything is sent,
  // when the server closed it while it was idle outside a transaction (a
  // failover, a restart, a terminated backend: its end of file waits on
  // the socket), so that a statement is not lost with a connection that
  // was gone before it (and nothing is logged as lost that was not). In a
  // transaction, a lost connection is the transaction's failure.
  PGconn* live() {
    if (conn_ && c_->pq->PQtransactionStatus(conn_) == PQTRANS_IDLE) {
      pollfd p{c_->pq->PQsocket(conn_), POLLIN, 0};
      if (::poll(&p, 1, 0) > 0 &&
          (c_->pq->PQconsumeInput(conn_) == 0 || c_->pq->PQstatus(conn_) != CONNECTION_OK)) {
        close();
        lost_at_ = clock_type::now();
      }
    }
    return get();
  }

  result check(PGresult* r, std::string_view what) {
    auto status = r ? c_->pq->PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return result(*c_, r);
    std::string message;
    bool not_primary = false;
    write_refused_ = false;
    if (r) {
      // 25006: a write on a node that is a standby now (demoted after a
      // failover); 57P01..57P03: the server is shutting down or restarting.
      // Another host of the URL may take the writes: reconnect.
      const char* state = c_->pq->PQresultErrorField(r, PG_DIAG_SQLSTATE);
      not_primary = state != nullptr && (std::string_view(state) == "25006" ||
                                         std::string_view(state).substr(0, 4) == "57P0");
      // Not 57P0x: a backend terminated while it waited for its synchronous
      // standby has committed, and says 57P01.
      write_refused_ = state != nullptr && std::string_view(state) == "25006" &&
                       c_->pq->PQstatus(conn_) == CONNECTION_OK;
      const char* primary = c_->pq->PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
      message =
          primary ? pq::first_line(primary) : pq::clean_message(c_->pq->PQresultErrorMessage(r));
      c_->pq->PQclear(r);
    } else {
      message = pq::clean_message(c_->pq->PQerrorMessage(conn_));
    }
    if (c_->pq->PQstatus(conn_) != CONNECTION_OK) {
      close();
      lost_at_ = clock_type::now();
      c_->fail_unreachable(std::string(what) + ": lost the connection to " + c_->endpoint + " (" +
                           message + ")");
    }
    if (not_primary) {
      close();
      lost_at_ = clock_type::now();
      c_->fail_unreachable(std::string(what) + ": the server no longer takes writes (" + message +
                           "); reconnecting to whichever of " + c_->endpoint + " does");
    }
    c_->fail(std::string(what) + ": " + message);
  }

  std::shared_ptr<const config> c_;
  PGconn* conn_ = nullptr;
  backoff backoff_;
  std::optional<clock_type::time_point> lost_at_;
  bool write_refused_ = false;
  bool deferred_ = false;
  std::unordered_set<std::string> prepared_;
};

// BEGIN ... COMMIT, rolled back when left without commit().
class transaction {
 public:
  transaction(session& s, std::string what) : s_(s), what_(std::move(what)) {
    s_.exec("BEGIN", what_);
  }
  ~transaction() {
    if (!committed_) s_.rollback();
  }
  transaction(const transaction&) = delete;
  transaction& operator=(const transaction&) = delete;

  void commit() {
    s_.exec("COMMIT", what_);
    committed_ = true;
  }

 private:
  session& s_;
  std::string what_;
  bool committed_ = false;
};

// Calls f(first, count) for slices of [0, total): 500 rows, then the rest
// in powers of two, so that a connection prepares at most ten variants of a
// multi-row statement whatever the batch sizes.
template <class F>
void for_each_chunk(size_t total, F&& f) {
  size_t at = 0;
  while (at < total) {
    size_t left = total - at;
    size_t n = left >= k_chunk_rows ? k_chunk_rows : std::bit_floor(left);
    f(at, n);
    at += n;
  }
}

// "($1::text, $2::bigint), ($3::text, $4::bigint)" for `rows` rows.
std::string values_list(size_t rows, std::initializer_list<const char*> types) {
  std::string out;
  size_t n = 1;
  for (size_t r = 0; r < rows; ++r) {
    out += r == 0 ? "(" : ", (";
    bool first = true;
    for (const char* t : types) {
      out += first ? "$" : ", $";
      out += std::to_string(n++);
      out += "::";
      out += t;
      first = false;
    }
    out += ")";
  }
  return out;
}

enum class multi {
  add_returns,
  drop_undelivered,
  add_undelivered,
  minion_rows,
  minion_update,
  add_reports,
  last_reports,
  report_states
};

std::string multi_sql(multi kind, size_t rows) {
  switch (kind) {
    case multi::add_returns:
      return "INSERT INTO returns (jid, minion, fun, ret, success, retcode, stamp) VALUES " +
             values_list(rows, {"text", "text", "text", "text", "boolean", "integer", "bigint"}) +
             " ON CONFLICT (jid, minion) DO NOTHING RETURNING jid, minion";
    case multi::drop_undelivered:
      return "DELETE FROM undelivered u USING (VALUES " + values_list(rows, {"text", "text"}) +
             ") AS v (jid, minion) WHERE u.jid = v.jid AND u.minion = v.minion";
    case multi::add_undelivered:
      return "INSERT INTO undelivered (jid, minion, reason, stamp) "
             "SELECT v.jid, v.minion, v.reason, v.stamp FROM (VALUES " +
             values_list(rows, {"text", "text", "text", "bigint"}) +
             ") AS v (jid, minion, reason, stamp) WHERE NOT EXISTS "
             "(SELECT 1 FROM returns r WHERE r.jid = v.jid AND r.minion = v.minion) "
             "ON CONFLICT (jid, minion) DO NOTHING RETURNING jid, minion";
    case multi::minion_rows:
      return "INSERT INTO minion_data (id) VALUES " + values_list(rows, {"text"}) +
             " ON CONFLICT (id) DO NOTHING";
    case multi::minion_update:
      return "UPDATE minion_data m SET grains = coalesce(v.grains, m.grains), "
             "pillar = coalesce(v.pillar, m.pillar), last_seen = coalesce(v.seen, m.last_seen), "
             "master = CASE WHEN v.seen IS NULL THEN m.master WHEN NOT v.left_it THEN v.master "
             "WHEN m.master = v.master THEN '' ELSE m.master END FROM (VALUES " +
             values_list(rows, {"text", "text", "text", "bigint", "text", "boolean"}) +
             ") AS v (id, grains, pillar, seen, master, left_it) WHERE m.id = v.id";
    case multi::add_reports:
      return "INSERT INTO reports (jid, minion, fun, started, duration, run_time, status, test, "
             "retcode, succeeded, failed, changed, pending, total, timings, errors, ret) VALUES " +
             values_list(rows, {"text", "text", "text", "bigint", "float8", "float8", "text",
                                "boolean", "integer", "integer", "integer", "integer", "integer",
                                "integer", "text", "text", "text"}) +
             " ON CONFLICT (jid, minion) DO NOTHING RETURNING jid, minion, started";
    case multi::last_reports:
      // One row per minion (an upsert may touch a row once); the later
      // start wins, a tie the later jid.
      return "INSERT INTO last_reports (minion, jid, started) VALUES " +
             values_list(rows, {"text", "text", "bigint"}) +
             " ON CONFLICT (minion) DO UPDATE SET jid = EXCLUDED.jid, started = EXCLUDED.started "
             "WHERE (EXCLUDED.started, EXCLUDED.jid) > (last_reports.started, last_reports.jid)";
    case multi::report_states:
      return "INSERT INTO report_states (state_id, started, jid, minion, tag, function, name, sls, "
             "result, changes) VALUES " +
             values_list(rows, {"text", "bigint", "text", "text", "text", "text", "text", "text",
                                "boolean", "boolean"}) +
             " ON CONFLICT DO NOTHING";
  }
  return "";
}

const char* multi_name(multi kind) {
  switch (kind) {
    case multi::add_returns:
      return "add_returns";
    case multi::drop_undelivered:
      return "drop_undelivered";
    case multi::add_undelivered:
      return "add_undelivered";
    case multi::minion_rows:
      return "minion_rows";
    case multi::minion_update:
      return "minion_update";
    case multi::add_reports:
      return "add_reports";
    case multi::last_reports:
      return "last_reports";
    case multi::report_states:
      return "report_states";
  }
  return "";
}

#define BRINE_JOB_COLUMNS \
  "jid, fun, args, kwargs, target, tgt_type, \"user\", minions, master, created, deliver_by"

// Key changes are notified by the statement that makes them, so they are
// one round trip and one transaction.
constexpr statement k_put_key{
    "put_key",
    "WITH k AS (INSERT INTO keys (id, fingerprint, state, pubkey, updated) "
    "VALUES ($1::text, $2::text, $3::text, $4::text, $5::bigint) "
    "ON CONFLICT (id, fingerprint) DO UPDATE SET state = EXCLUDED.state, "
    "pubkey = EXCLUDED.pubkey, updated = EXCLUDED.updated RETURNING 1) "
    "SELECT pg_notify('brine_keys', $6::text) FROM k"};
// Many puts in one statement (brine key accept --all), one notification per id.
constexpr statement k_put_keys{
    "put_keys",
    "WITH k AS (INSERT INTO keys (id, fingerprint, state, pubkey, updated) "
    "SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[]) "
    "ON CONFLICT (id, fingerprint) DO UPDATE SET state = EXCLUDED.state, "
    "pubkey = EXCLUDED.pubkey, updated = EXCLUDED.updated RETURNING id) "
    "SELECT pg_notify('brine_keys', $6::text || chr(10) || id) "
    "FROM (SELECT DISTINCT id FROM k) AS changed"};
constexpr statement k_delete_key{
    "delete_key",
    "WITH d AS (DELETE FROM keys WHERE id = $1::text AND fingerprint = $2::text RETURNING 1) "
    "SELECT pg_notify('brine_keys', $3::text) WHERE EXISTS (SELECT 1 FROM d)"};
constexpr statement k_load_keys{
    "load_keys",
    "SELECT id, fingerprint, state, pubkey, updated FROM keys ORDER BY id, fingerprint"};
constexpr statement k_load_keys_of{"load_keys_of",
                                   "SELECT id, fingerprint, state, pubkey, updated FROM keys "
                                   "WHERE id = $1::text ORDER BY fingerprint"};
// A new job is notified with the insert (a jid stored already is not).
constexpr statement k_add_job{
    "add_job",
    "WITH j AS (INSERT INTO jobs (" BRINE_JOB_COLUMNS
    ", settled) VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, "
    "$8::text, $9::text, $10::bigint, $11::bigint, false) ON CONFLICT (jid) DO NOTHING "
    "RETURNING 1) SELECT pg_notify('brine_jobs', $12::text) FROM j"};
constexpr statement k_job_exists{"job_exists",
                                 "SELECT EXISTS (SELECT 1 FROM jobs WHERE jid = $1::text)"};
constexpr statement k_list_jobs{"list_jobs",
                                "SELECT " BRINE_JOB_COLUMNS
                                " FROM jobs ORDER BY created DESC, jid DESC LIMIT $1::bigint"};
constexpr statement k_get_job{"get_job",
                              "SELECT " BRINE_JOB_COLUMNS " FROM jobs WHERE jid = $1::text"};
constexpr statement k_unsettled_jobs{"unsettled_jobs",
                                     "SELECT " BRINE_JOB_COLUMNS
                                     " FROM jobs WHERE NOT settled ORDER BY created, jid"};
constexpr statement k_settle_job{"settle_job",
                                 "UPDATE jobs SET settled = true WHERE jid = $1::text AND NOT "
                                 "settled"};
constexpr statement k_get_returns{"get_returns",
                                  "SELECT jid, minion, fun, ret, success, retcode, stamp FROM "
                                  "returns WHERE jid = $1::text ORDER BY stamp, minion"};
// The minions as one parameter, one per line (no minion id holds a newline:
// the notifications rely on that too).
constexpr statement k_get_returns_of{
    "get_returns_of",
    "SELECT jid, minion, fun, ret, success, retcode, stamp FROM returns WHERE jid = $1::text "
    "AND minion = ANY (string_to_array($2::text, E'\\n')) ORDER BY minion"};
constexpr statement k_count_returns{"count_returns",
                                    "SELECT count(*) FROM returns WHERE jid = $1::text"};
constexpr statement k_returned_minions{
    "returned_minions", "SELECT minion FROM returns WHERE jid = $1::text ORDER BY minion"};
// Whether any of these jobs has an undelivered record at all: most batches
// of returns belong to jobs that have none, and skip the delete.
constexpr statement k_any_undelivered{
    "any_undelivered", "SELECT 1 FROM undelivered WHERE jid = ANY($1::text[]) LIMIT 1"};
constexpr statement k_notify_returns{"notify_returns",
                                     "SELECT pg_notify('brine_returns', $1::text)"};
constexpr statement k_get_undelivered{"get_undelivered",
                                      "SELECT jid, minion, reason, stamp FROM undelivered "
                                      "WHERE jid = $1::text ORDER BY minion"};
constexpr statement k_count_undelivered{"count_undelivered",
                                        "SELECT count(*) FROM undelivered WHERE jid = $1::text"};
constexpr statement k_purge_returns{
    "purge_returns",
    "DELETE FROM returns WHERE jid IN (SELECT jid FROM jobs WHERE created < $1::bigint)"};
constexpr statement k_purge_undelivered{
    "purge_undelivered",
    "DELETE FROM undelivered WHERE jid IN (SELECT jid FROM jobs WHERE created < $1::bigint)"};
constexpr statement k_purge_jobs{"purge_jobs", "DELETE FROM jobs WHERE created < $1::bigint"};
constexpr statement k_purge_orphans{"purge_orphans",
                                    "DELETE FROM returns r WHERE r.stamp < $1::bigint "
                                    "AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.jid = r.jid)"};
constexpr statement k_load_minion_data{
    "load_minion_data",
    "SELECT id, grains, pillar, last_seen, master FROM minion_data ORDER BY id"};
constexpr statement k_delete_minion_data{"delete_minion_data",
                                         "DELETE FROM minion_data WHERE id = $1::text"};
// A master that starts again is a member again, if it had been removed.
constexpr statement k_touch_slot{
    "touch_slot",
    "UPDATE masters SET claimed = $2::bigint, removed = false WHERE name = $1::text RETURNING "
    "slot"};
#define BRINE_MEMBER_COLUMNS \
  "name, slot, cluster_id, peer, cluster_finger, finger, proof, seen, stats, removed"
// One round trip: this master's row written (seen by the database's clock,
// so that masters' clocks need not agree), then every row.
constexpr statement k_heartbeat{
    "heartbeat",
    "WITH u AS (UPDATE masters SET cluster_id = $2::text, peer = $3::text, "
    "cluster_finger = $4::text, finger = $5::text, proof = $6::text, "
    "seen = (extract(epoch FROM clock_timestamp()) * 1000)::bigint, stats = $7::text "
    "WHERE name = $1::text RETURNING " BRINE_MEMBER_COLUMNS ") SELECT " BRINE_MEMBER_COLUMNS
    " FROM u UNION ALL SELECT " BRINE_MEMBER_COLUMNS " FROM masters WHERE name <> $1::text"};
constexpr statement k_members{"members",
                              "SELECT " BRINE_MEMBER_COLUMNS " FROM masters ORDER BY name"};
constexpr statement k_remove_member{
    "remove_member", "UPDATE masters SET removed = true WHERE name = $1::text RETURNING 1"};
#undef BRINE_MEMBER_COLUMNS
// Notifications that carry no row: several payloads (joined by U+001E) in one
// round trip.
constexpr statement k_notify_acks{
    "notify_acks",
    "SELECT pg_notify('brine_acks', p) FROM unnest(string_to_array($1::text, chr(30))) AS p"};
constexpr statement k_notify_undelivered{
    "notify_undelivered",
    "SELECT pg_notify('brine_undelivered', p) FROM unnest(string_to_array($1::text, chr(30))) "
    "AS p"};
constexpr statement k_notify_minions{
    "notify_minions",
    "SELECT pg_notify('brine_minions', p) FROM unnest(string_to_array($1::text, chr(30))) AS p"};
constexpr statement k_notify_reports{
    "notify_reports",
    "SELECT pg_notify('brine_reports', p) FROM unnest(string_to_array($1::text, chr(30))) AS p"};
constexpr statement k_notify_presence{
    "notify_presence",
    "SELECT pg_notify('brine_presence', p) FROM unnest(string_to_array($1::text, chr(30))) AS p"};
constexpr statement k_load_minion_data_of{
    "load_minion_data_of",
    "SELECT id, grains, pillar, last_seen, master FROM minion_data "
    "WHERE id = ANY (string_to_array($1::text, E'\\n')) ORDER BY id"};
constexpr statement k_taken_slots{"taken_slots", "SELECT slot, name FROM masters ORDER BY slot"};
constexpr statement k_claim_slot{
    "claim_slot",
    "INSERT INTO masters (name, slot, claimed) VALUES ($1::text, $2::integer, $3::bigint)"};

constexpr statement k_load_file_pins{
    "load_file_pins",
    "SELECT remote, saltenv, ref, commit_id, updated FROM file_pins ORDER BY remote, saltenv"};
constexpr statement k_drop_file_pins{"drop_file_pins",
                                     "DELETE FROM file_pins WHERE remote = $1::text"};
constexpr statement k_add_file_pin{
    "add_file_pin",
    "INSERT INTO file_pins (remote, saltenv, ref, commit_id, updated) VALUES ($1::text, "
    "$2::text, $3::text, $4::text, $5::bigint) ON CONFLICT (remote, saltenv) DO UPDATE SET "
    "ref = EXCLUDED.ref, commit_id = EXCLUDED.commit_id, updated = EXCLUDED.updated"};
// Sent inside the transaction: delivered when it commits, never before.
constexpr statement k_notify_file_pins{"notify_file_pins",
                                       "SELECT pg_notify('brine_file_pins', $1::text)"};

#undef BRINE_JOB_COLUMNS

#define BRINE_REPORT_COLUMNS                                                                 \
  "r.jid, r.minion, r.fun, r.started, r.duration, r.run_time, r.status, r.test, r.retcode, " \
  "r.succeeded, r.failed, r.changed, r.pending, r.total, r.timings, r.errors"

constexpr statement k_get_report{"get_report",
                                 "SELECT " BRINE_REPORT_COLUMNS
                                 ", r.ret FROM reports r WHERE r.jid = $1::text AND r.minion = "
                                 "$2::text"};
constexpr statement k_purge_reports{
    "purge_reports",
    "DELETE FROM reports r WHERE r.started < $1::bigint AND NOT EXISTS (SELECT 1 FROM "
    "last_reports l WHERE l.jid = r.jid AND l.minion = r.minion)"};
constexpr statement k_purge_report_states{
    "purge_report_states",
    "DELETE FROM report_states s WHERE s.started < $1::bigint AND NOT EXISTS (SELECT 1 FROM "
    "reports r WHERE r.jid = s.jid AND r.minion = s.minion)"};

// `header` then one line per item, split into payloads that each fit a
// notification (an item too long for any is left out: the rows stay the
// truth), joined by U+001E for one pg_notify statement over all of them.
std::string payloads(const std::string& header, const std::vector<std::string>& items) {
  std::string out;
  std::string payload = header;
  auto flush = [&] {
    if (payload.size() > header.size()) {
      if (!out.empty()) out += '\x1e';
      out += payload;
    }
    payload = header;
  };
  for (const auto& item : items) {
    if (header.size() + 1 + item.size() >= k_postgres_max_payload) continue;
    if (payload.size() + 1 + item.size() >= k_postgres_max_payload) flush();
    payload += "\n" + item;
  }
  flush();
  return out;
}

// A return as a notification carries it (one line: JSON escapes newlines).
std::string inline_return(const return_record& r) {
  nlohmann::ordered_json j = {
      {"fun", r.fun}, {"success", r.success}, {"retcode", r.retcode}, {"return", r.ret}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<return_record> return_from_inline(const std::string& jid, const std::string& minion,
                                                std::string_view text) {
  auto j = nlohmann::ordered_json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("return") ||
      !j.value("fun", nlohmann::ordered_json()).is_string() ||
      !j.value("success", nlohmann::ordered_json()).is_boolean() ||
      !j.value("retcode", nlohmann::ordered_json()).is_number_integer()) {
    return std::nullopt;
  }
  return_record r;
  r.jid = jid;
  r.minion = minion;
  r.fun = j["fun"].get<std::string>();
  r.success = j["success"].get<bool>();
  r.retcode = j["retcode"].get<int>();
  r.ret = std::move(j["return"]);
  return r;
}

// A job as a notification carries it: the record in JSON, when it fits.
nlohmann::json job_json(const job_record& job) {
  return {{"jid", job.jid},
          {"fun", job.fun},
          {"args", job.args},
          {"kwargs", job.kwargs},
          {"tgt", job.target},
          {"tgt_type", job.tgt_type},
          {"user", job.user},
          {"minions", job.minions},
          {"master", job.master},
          {"created", job.created},
          {"deliver_by", job.deliver_by}};
}

std::optional<job_record> job_from_json(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  try {
    job_record job;
    job.jid = j.at("jid").get<std::string>();
    job.fun = j.at("fun").get<std::string>();
    job.args = j.at("args");
    job.kwargs = j.at("kwargs");
    job.target = j.at("tgt").get<std::string>();
    job.tgt_type = j.at("tgt_type").get<std::string>();
    job.user = j.at("user").get<std::string>();
    job.minions = j.at("minions").get<std::vector<std::string>>();
    job.master = j.at("master").get<std::string>();
    job.created = j.at("created").get<int64_t>();
    job.deliver_by = j.at("deliver_by").get<int64_t>();
    return job;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

// The changes other writers make, heard on a connection of its own that
// LISTENs on both channels.
//
// Lifecycle: connected by the constructor; after the connection is lost,
// wait() throws and the next wait() connects again (with a growing delay
// between failed attempts), returning a resync first. Threading: wait() from
// one thread, interrupt() from any.
class postgres_feed final : public change_feed {
 public:
  explicit postgres_feed(std::shared_ptr<const config> c) : c_(std::move(c)) {
    event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (event_fd_ < 0) c_->fail(std::string("change feed: eventfd: ") + std::strerror(errno));
    try {
      listen();
    } catch (...) {
      ::close(event_fd_);
      throw;
    }
  }
  ~postgres_feed() override {
    if (conn_) c_->pq->PQfinish(conn_);
    ::close(event_fd_);
  }
  postgres_feed(const postgres_feed&) = delete;
  postgres_feed& operator=(const postgres_feed&) = delete;

  std::vector<change> wait(milliseconds timeout) override;
  void interrupt() override {
    uint64_t one = 1;
    // EAGAIN: the counter is full, so a wakeup is pending anyway.
    [[maybe_unused]] ssize_t n = ::write(event_fd_, &one, sizeof one);
  }

 private:
  void listen() {
    conn_ = connect(*c_);
    PGresult* r = c_->pq->PQexec(
        conn_,
        "LISTEN brine_keys; LISTEN brine_returns; LISTEN brine_jobs; LISTEN brine_acks; "
        "LISTEN brine_minions; LISTEN brine_undelivered; LISTEN brine_file_pins; "
        "LISTEN brine_presence; LISTEN brine_reports");
    bool ok = r && c_->pq->PQresultStatus(r) == PGRES_COMMAND_OK;
    if (r) c_->pq->PQclear(r);
    if (!ok) lost();
  }
  [[noreturn]] void lost() {
    std::string message = pq::clean_message(c_->pq->PQerrorMessage(conn_));
    c_->pq->PQfinish(conn_);
    conn_ = nullptr;
    c_->fail_unreachable("change feed: lost the connection to " + c_->endpoint + " (" + message +
                         ")");
  }
  void drain(std::vector<change>& out);

  std::shared_ptr<const config> c_;
  PGconn* conn_ = nullptr;
  int event_fd_ = -1;
  backoff backoff_;
  bool resync_ = false;
};

std::vector<change> postgres_feed::wait(milliseconds timeout) {
  if (conn_ == nullptr) {
    backoff_.check(*c_, "change feed: ");
    try {
      listen();
    } catch (...) {
      backoff_.failed();
      throw;
    }
    backoff_.succeeded();
    resync_ = true;
  }
  std::vector<change> out;
  if (resync_) {
    // Whatever was notified while no one listened is lost: the caller
    // reads everything again.
    out.push_back(change{change::kind::resync, c_->origin, "", "", {}});
    resync_ = false;
  }
  auto deadline = clock_type::now() + std::max(timeout, milliseconds(0));
  for (;;) {
    if (c_->pq->PQconsumeInput(conn_) == 0 || c_->pq->PQstatus(conn_) != CONNECTION_OK) lost();
    drain(out);
    if (!out.empty()) return out;
    auto left = std::chrono::ceil<milliseconds>(deadline - clock_type::now()).count();
    if (left <= 0) return out;
    std::array<pollfd, 2> fds{{{c_->pq->PQsocket(conn_), POLLIN, 0}, {event_fd_, POLLIN, 0}}};
    int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(left, INT_MAX)));
    if (n < 0 && errno != EINTR) {
      c_->fail(std::string("change feed: poll: ") + std::strerror(errno));
    }
    if (n > 0 && (fds[1].revents & POLLIN) != 0) {
      uint64_t count = 0;
      [[maybe_unused]] ssize_t r = ::read(event_fd_, &count, sizeof count);
      return out;
    }
  }
}

std::vector<std::string> split_lines(std::string_view s) {
  std::vector<std::string> out;
  for (;;) {
    auto nl = s.find('\n');
    out.emplace_back(s.substr(0, nl));
    if (nl == std::string_view::npos) return out;
    s.remove_prefix(nl + 1);
  }
}

// A brine_reports line (see postgres_store.h); nullopt when it is not one.
std::optional<report::report> run_from_line(std::string_view line) {
  std::vector<std::string_view> f;
  for (size_t at = 0;;) {
    size_t tab = line.find('\t', at);
    f.push_back(line.substr(at, tab == std::string_view::npos ? tab : tab - at));
    if (tab == std::string_view::npos) break;
    at = tab + 1;
  }
  if (f.size() != 6 || f[0].empty() || f[1].empty()) return std::nullopt;
  report::report r;
  auto [end, ec] = std::from_chars(f[2].data(), f[2].data() + f[2].size(), r.started_ms);
  auto status = report::parse_status(f[3]);
  if (ec != std::errc() || end != f[2].data() + f[2].size() || !status ||
      (f[4] != "0" && f[4] != "1")) {
    return std::nullopt;
  }
  r.minion = std::string(f[0]);
  r.jid = std::string(f[1]);
  r.status = *status;
  r.test = f[4] == "1";
  r.fun = std::string(f[5]);
  return r;
}

void postgres_feed::drain(std::vector<change>& out) {
  while (PGnotify* n = c_->pq->PQnotifies(conn_)) {
    std::string channel = n->relname ? n->relname : "";
    auto lines = split_lines(n->extra ? n->extra : "");
    c_->pq->PQfreemem(n);
    // A payload brine did not write (NOTIFY by hand, a newer brine) is
    // skipped: the rows stay the truth.
    if (channel == k_postgres_keys_channel && lines.size() == 2 && !lines[1].empty()) {
      out.push_back(change{change::kind::keys, lines[0], lines[1], "", {}});
    } else if (channel == k_postgres_presence_channel && lines.size() >= 2) {
      change ch{change::kind::presence, lines[0], "", "", {}};
      for (size_t i = 1; i < lines.size(); ++i) {
        if (lines[i].size() < 2) continue;
        (lines[i][0] == '+' ? ch.minions : ch.left).push_back(lines[i].substr(1));
      }
      out.push_back(std::move(ch));
    } else if (channel == k_postgres_reports_channel && lines.size() >= 2) {
      change ch{change::kind::reports, lines[0], "", "", {}};
      for (size_t i = 1; i < lines.size(); ++i) {
        if (auto r = run_from_line(lines[i])) ch.reports.push_back(std::move(*r));
      }
      if (!ch.reports.empty()) out.push_back(std::move(ch));
    } else if (channel == k_postgres_file_pins_channel && !lines.empty()) {
      out.push_back(change{change::kind::file_pins, lines[0], "", "", {}});
    } else if (channel == k_postgres_returns_channel && lines.size() >= 3 && !lines[1].empty()) {
      change ch{change::kind::returns, lines[0], "", lines[1], {}};
      for (size_t i = 2; i < lines.size(); ++i) {
        auto tab = lines[i].find('\t');
        std::string minion = lines[i].substr(0, tab);
        if (minion.empty()) continue;
        if (tab != std::string::npos) {
          // Unreadable: read back from the row instead.
          if (auto r =
                  return_from_inline(ch.jid, minion, std::string_view(lines[i]).substr(tab + 1))) {
            ch.rets.push_back(std::move(*r));
          }
        }
        ch.minions.push_back(std::move(minion));
      }
      if (!ch.minions.empty()) out.push_back(std::move(ch));
    } else if (channel == k_postgres_jobs_channel && lines.size() >= 2 && !lines[1].empty()) {
      change ch{change::kind::job, lines[0], "", lines[1], {}};
      // The rest is the job in JSON (it may hold newlines), when it fitted.
      if (lines.size() > 2) {
        std::string text;
        for (size_t i = 2; i < lines.size(); ++i) text += (i > 2 ? "\n" : "") + lines[i];
        ch.job = job_from_json(text);
        if (ch.job && ch.job->jid != ch.jid) ch.job.reset();
      }
      out.push_back(std::move(ch));
    } else if (channel == k_postgres_undelivered_channel && lines.size() >= 3 &&
               !lines[1].empty()) {
      change ch{change::kind::undelivered, lines[0], "", lines[1], {}};
      for (size_t i = 2; i < lines.size(); ++i) {
        if (!lines[i].empty()) ch.minions.push_back(std::move(lines[i]));
      }
      out.push_back(std::move(ch));
    } else if ((channel == k_postgres_acks_channel && lines.size() >= 3 && !lines[1].empty()) ||
               (channel == k_postgres_minions_channel && lines.size() >= 2)) {
      bool acks = channel == k_postgres_acks_channel;
      change ch{acks ? change::kind::acks : change::kind::minions,
                lines[0],
                "",
                acks ? lines[1] : std::string(),
                {}};
      for (size_t i = acks ? 2 : 1; i < lines.size(); ++i) {
        if (!lines[i].empty()) ch.minions.push_back(std::move(lines[i]));
      }
      if (!ch.minions.empty()) out.push_back(std::move(ch));
    }
  }
}

// One connection and its prepared statements.
//
// Lifecycle: connects (and migrates unless told not to) in the
// constructor; reconnects on the first call after the connection was lost.
// Threading: one thread at a time, as store says; a feed is independent.
class postgres_store final : public store {
 public:
  postgres_store(std::shared_ptr<config> c, bool migrate);

  std::string name() const override { return c_->name; }
  bool shared() const override { return true; }
  std::unique_ptr<change_feed> changes() override {
    ready();
    return std::make_unique<postgres_feed>(c_);
  }
  int claim_master_slot(const std::string& master) override;
  status check() override;

  std::vector<key_record> load_keys() override;
  std::vector<key_record> load_keys(const std::string& id) override;
  void put_key(const key_record& key) override;
  void delete_key(const std::string& id, const std::string& fingerprint) override;
  void write_keys(const std::vector<key_write>& batch) override;

  using store::add_job;
  void add_job(const job_record& job, clock_type::time_point until) override;
  std::vector<job_record> list_jobs(size_t limit) override;
  std::optional<job_record> get_job(const std::string& jid) override;

  size_t add_returns(const std::vector<return_record>& batch) override;
  std::vector<return_record> get_returns(const std::string& jid) override;
  std::vector<return_record> get_returns(const std::string& jid,
                                         const std::vector<std::string>& minions) override;
  size_t count_returns(const std::string& jid) override;

  void add_undelivered(const std::vector<undelivered_record>& batch) override;
  std::vector<undelivered_record> get_undelivered(const std::string& jid) override;
  size_t count_undelivered(const std::string& jid) override;
  std::vector<std::string> returned_minions(const std::string& jid) override;
  void settle_job(const std::string& jid) override;
  std::vector<job_record> unsettled_jobs() override;

  size_t purge_jobs_before(int64_t cutoff) override;

  void announce_acks(const std::map<std::string, std::vector<std::string>>& acks) override;
  void put_minion_data(const std::vector<minion_data_update>& batch) override;
  std::vector<minion_data_record> load_minion_data() override;
  std::vector<minion_data_record> load_minion_data(const std::vector<std::string>& ids) override;
  std::vector<minion_data_record> query_minion_data(const minion_data_query& q) override;
  std::vector<member_record> heartbeat(const member_record& me) override;
  std::vector<member_record> members() override;
  bool remove_member(const std::string& name) override;
  void delete_minion_data(const std::string& id) override;
  std::vector<file_pin> load_file_pins() override;
  void put_file_pins(const std::vector<std::string>& remotes,
                     const std::vector<file_pin>& pins) override;

  size_t add_reports(const std::vector<report::report>& batch) override;
  std::vector<report::report> list_reports(const report_query& q) override;
  std::vector<state_result_record> list_state_results(const state_query& q) override;
  std::optional<report::report> get_report(const std::string& jid,
                                           const std::string& minion) override;
  size_t purge_reports_before(int64_t cutoff_ms) override;

 private:
  // brief: without timings and errors (report_query::brief).
  report::report read_report(const result& r, int row, bool with_ret, bool brief = false) const;
  // A statement made at run time, prepared once per connection under `name`.
  const statement& dynamic(const std::string& name, std::string sql);
  int read_version();
  void migrate();
  // Throws unless the schema is this build's (checked again after a
  // `brine store migrate` ran meanwhile).
  void ready();
  const statement& multi_row(multi kind, size_t rows);
  void insert_job(const job_record& job);
  // Whether `jid` has its row (add_job's outcome after a lost answer).
  bool job_exists(const std::string& jid);
  // The writes that are the same when done twice, once; their public
  // versions run them through ride_out().
  void put_key_once(const key_record& key);
  void delete_key_once(const std::string& id, const std::string& fingerprint);
  void write_keys_once(const std::vector<key_write>& batch);
  void add_undelivered_once(const std::vector<undelivered_record>& batch);
  void settle_job_once(const std::string& jid);
  void put_minion_data_once(const std::vector<minion_data_update>& batch);
  void delete_minion_data_once(const std::string& id);
  // Runs `write` again while a lost connection may be a failover
  // (session::riding_out): the first attempt's outcome is unknown (the
  // connection may have gone during COMMIT), so only for writes that are
  // the same when done twice. With `until`, the call's own deadline:
  // tried again until then, whenever the connection was lost.
  template <class F>
  void ride_out(F&& write, std::optional<clock_type::time_point> until = std::nullopt) {
    // From the first failure: a server that keeps taking and dropping
    // connections (a session that is read-only) must not hold the call.
    bool last = false;
    for (;;) {
      try {
        write();
        return;
      } catch (const unreachable&) {
        if (last) throw;
        if (!until) {
          if (!db_.riding_out()) throw;
          until = clock_type::now() + c_->failover_wait;
        }
        // The next try when the reconnect backoff allows one, so that each
        // is a real attempt; at the deadline, when the last try was put off
        // by the backoff (the call may have waited its time behind others
        // on the store thread), one more past it, so that the error thrown
        // is the server's own.
        auto next = std::max(clock_type::now() + k_first_retry_delay, db_.next_attempt());
        if (next >= *until) {
          if (!db_.deferred()) throw;
          std::this_thread::sleep_until(std::max(clock_type::now(), *until));
          db_.attempt_now();
          last = true;
          continue;
        }
        std::this_thread::sleep_until(next);
      }
    }
  }
  template <class Json = nlohmann::json>
  Json parse_json(const std::string& text, std::string_view row, std::string_view column) const;
  job_record read_job(const result& r, int row) const;
  // The notification of a new job: ORIGIN, JID, and the job in JSON when
  // the whole fits in one.
  std::string job_payload(const job_record& job) const;
  std::vector<return_record> read_returns(const result& r) const;
  std::vector<job_record> read_jobs(const result& r) const;
  std::vector<key_record> read_keys(const result& r) const;
  std::vector<minion_data_record> read_minion_data(const result& r) const;
  std::vector<member_record> read_members(const result& r) const;

  std::shared_ptr<const config> c_;
  session db_;
  bool schema_ok_ = false;
  // Generated multi-row statements by name; nodes keep their strings in place.
  std::unordered_map<std::string, std::pair<std::string, statement>> multi_;
};

postgres_store::postgres_store(std::shared_ptr<config> c, bool migrate)
    : c_(std::move(c)), db_(c_) {
  db_.get();
  if (migrate) {
    this->migrate();
    schema_ok_ = true;
  } else {
    schema_ok_ = postgres_schema_problem(read_version(), k_postgres_schema_version).empty();
  }
}

int postgres_store::read_version() {
  const char* what = "cannot read the schema version";
  if (!db_.exec("SELECT to_regclass('brine_schema') IS NOT NULL", what).boolean(0, 0)) return 0;
  return static_cast<int>(
      db_.exec("SELECT coalesce(max(version), 0) FROM brine_schema", what).integer(0, 0));
}

void postgres_store::ready() {
  if (schema_ok_) return;
  auto problem = postgres_schema_problem(read_version(), k_postgres_schema_version);
  if (!problem.empty()) c_->fail(problem);
  schema_ok_ = true;
}

void postgres_store::migrate() {
  const int code = k_postgres_schema_version;
  int version = read_version();
  if (version == code) return;
  if (version > code || version < 0) c_->fail(postgres_schema_problem(version, code));

  // Masters starting together queue on the lock; the first migrates, the
  // others then find the current version. A session lock taken before BEGIN
  // rather than a transaction's: the transaction then starts after the
  // previous holder committed, so its catalog lookups see the tables that
  // one created.
  const std::string what = "cannot migrate the schema";
  db_.exec(lock_sql("pg_advisory_lock", k_postgres_schema_lock).c_str(), what);
  struct unlock {
    session& s;
    ~unlock() {
      try {
        s.exec(lock_sql("pg_advisory_unlock", k_postgres_schema_lock).c_str(), "");
      } catch (const base::error&) {
        // The connection is gone, and the lock with it.
      }
    }
  } release{db_};

  transaction txn(db_, what);
  version = read_version();
  if (version == code) return;
  if (version > code || version < 0) c_->fail(postgres_schema_problem(version, code));
  if (!db_.exec("SELECT to_regclass('brine_schema') IS NOT NULL", what).boolean(0, 0)) {
    db_.exec("CREATE TABLE brine_schema (version integer NOT NULL)", what);
  }
  for (auto v = static_cast<size_t>(version); v < k_postgres_migrations.size(); ++v) {
    db_.exec(k_postgres_migrations[v], "cannot migrate the schema from version " +
                                           std::to_string(v) + " to " + std::to_string(v + 1));
  }
  db_.exec(
      ("DELETE FROM brine_schema; INSERT INTO brine_schema VALUES (" + std::to_string(code) + ")")
          .c_str(),
      what);
  txn.commit();
}

const statement& postgres_store::multi_row(multi kind, size_t rows) {
  std::string name = std::string(multi_name(kind)) + "_" + std::to_string(rows);
  auto it = multi_.find(name);
  if (it == multi_.end()) {
    it = multi_.emplace(name, std::make_pair(multi_sql(kind, rows), statement{})).first;
    it->second.second = statement{it->first.c_str(), it->second.first.c_str()};
  }
  return it->second.second;
}

template <class Json>
Json postgres_store::parse_json(const std::string& text, std::string_view row,
                                std::string_view column) const {
  auto value = Json::parse(text, nullptr, false);
  if (value.is_discarded()) {
    c_->fail(std::string(row) + ": column " + std::string(column) +
             " is not valid JSON; the row was written by something other than brine");
  }
  return value;
}

status postgres_store::check() {
  status s;
  s.backend = "postgresql";
  s.name = c_->name;
  s.code_version = k_postgres_schema_version;
  s.schema_version = read_version();
  if (s.schema_version >= 1) {
    for (const char* table : k_tables) {
      s.rows[table] = db_.exec((std::string("SELECT count(*) FROM ") + table).c_str(),
                               std::string("cannot count the rows of ") + table)
                          .integer(0, 0);
    }
  }
  return s;
}

int postgres_store::claim_master_slot(const std::string& master) {
  ready();
  const std::string what = "cannot claim a master slot for " + master;
  auto now = static_cast<int64_t>(std::time(nullptr));
  // A master that has its slot (the usual start) needs no lock.
  if (auto r = db_.run(k_touch_slot, params().text(master).int8(now), what); r.rows() > 0) {
    return static_cast<int>(r.integer(0, 0));
  }
  transaction txn(db_, what);
  db_.exec(lock_sql("pg_advisory_xact_lock", k_postgres_slots_lock).c_str(), what);
  // Again under the lock: the same master may have claimed meanwhile.
  if (auto r = db_.run(k_touch_slot, params().text(master).int8(now), what); r.rows() > 0) {
    int slot = static_cast<int>(r.integer(0, 0));
    txn.commit();
    return slot;
  }
  auto taken = db_.run(k_taken_slots, what);
  int slot = 0;
  for (int row = 0; row < taken.rows() && taken.integer(row, 0) == slot; ++row) ++slot;
  if (slot >= k_master_slots) {
    std::string holders;
    for (int row = 0; row < std::min(taken.rows(), 3); ++row) {
      holders += (row ? ", " : "") + taken.text(row, 1);
    }
    c_->fail("cannot claim a master slot for " + master + ": all " +
             std::to_string(k_master_slots) + " are taken (by " + holders +
             ", ...); delete the rows of masters that are gone from table masters");
  }
  db_.run(k_claim_slot, params().text(master).int4(slot).int8(now), what);
  txn.commit();
  return slot;
}

std::vector<key_record> postgres_store::read_keys(const result& r) const {
  std::vector<key_record> keys;
  keys.reserve(static_cast<size_t>(r.rows()));
  for (int row = 0; row < r.rows(); ++row) {
    key_record k;
    k.id = r.text(row, 0);
    k.fingerprint = r.text(row, 1);
    std::string state = r.text(row, 2);
    auto parsed = parse_key_state(state);
    if (!parsed) {
      c_->fail("key " + k.id + " (" + k.fingerprint + ") has unknown state '" + state +
               "'; it was written by a newer brine or edited by hand");
    }
    k.state = *parsed;
    k.pubkey = r.text(row, 3);
    k.updated = r.integer(row, 4);
    keys.push_back(std::move(k));
  }
  return keys;
}

std::vector<key_record> postgres_store::load_keys() {
  ready();
  return read_keys(db_.run(k_load_keys, "cannot read keys"));
}

std::vector<key_record> postgres_store::load_keys(const std::string& id) {
  ready();
  return read_keys(db_.run(k_load_keys_of, params().text(id), "cannot read the keys of " + id));
}

void postgres_store::put_key(const key_record& key) {
  ride_out([&] { put_key_once(key); });
}

void postgres_store::put_key_once(const key_record& key) {
  ready();
  db_.run(k_put_key,
          params()
              .text(key.id)
              .text(key.fingerprint)
              .text(to_string(key.state))
              .text(key.pubkey)
              .int8(key.updated)
              .text(c_->origin + "\n" + key.id),
          "cannot store key " + key.id);
}

void postgres_store::delete_key(const std::string& id, const std::string& fingerprint) {
  ride_out([&] { delete_key_once(id, fingerprint); });
}

void postgres_store::delete_key_once(const std::string& id, const std::string& fingerprint) {
  ready();
  db_.run(k_delete_key, params().text(id).text(fingerprint).text(c_->origin + "\n" + id),
          "cannot delete key " + id);
}

void postgres_store::write_keys(const std::vector<key_write>& batch) {
  ride_out([&] { write_keys_once(batch); });
}

void postgres_store::write_keys_once(const std::vector<key_write>& batch) {
  if (batch.empty()) return;
  ready();
  std::string what = "cannot store " + std::to_string(batch.size()) + " key changes";
  transaction txn(db_, what);
  // Runs of puts go as one statement each (a row may appear once in an
  // upsert, so a repeated (id, fingerprint) starts the next run); deletes
  // one by one, in order with them.
  constexpr size_t k_max_run = 2000;
  std::vector<const key_record*> run;
  std::set<std::pair<std::string_view, std::string_view>> in_run;
  auto flush = [&] {
    if (run.empty()) return;
    std::vector<std::string> ids, fingerprints, states, pubkeys, updated;
    for (const auto* k : run) {
      ids.push_back(k->id);
      fingerprints.push_back(k->fingerprint);
      states.push_back(to_string(k->state));
      pubkeys.push_back(k->pubkey);
      updated.push_back(std::to_string(k->updated));
    }
    db_.run(k_put_keys,
            params()
                .array(ids)
                .array(fingerprints)
                .array(states)
                .array(pubkeys)
                .array(updated)
                .text(c_->origin),
            what);
    run.clear();
    in_run.clear();
  };
  for (const auto& w : batch) {
    if (w.erase) {
      flush();
      delete_key_once(w.record.id, w.record.fingerprint);
      continue;
    }
    if (run.size() >= k_max_run || in_run.contains({w.record.id, w.record.fingerprint})) flush();
    in_run.insert({w.record.id, w.record.fingerprint});
    run.push_back(&w.record);
  }
  flush();
  txn.commit();
}

std::string postgres_store::job_payload(const job_record& job) const {
  std::string header = c_->origin + "\n" + job.jid;
  std::string full = header + "\n" + job_json(job).dump();
  return full.size() < k_postgres_max_payload ? full : header;
}

void postgres_store::add_job(const job_record& job, clock_type::time_point until) {
  // ON CONFLICT DO NOTHING: a publish forwarded twice stores the job once.
  // An INSERT whose connection died after it was sent has an unknown
  // outcome: it is one autocommitted statement, so it may have committed,
  // and notified brine_jobs with it, and other members may be delivering
  // the job already. It is not undone: once the store answers (riding out
  // a failover until the call's deadline), the row says what happened. A
  // row that is not there did not commit (the session that ran the INSERT
  // is gone with its connection), so the INSERT is sent again. A
  // connection found gone before the INSERT was sent (ready_to_send) sent
  // nothing, so the INSERT is simply tried again.
  if (until == clock_type::time_point{}) until = clock_type::now() + c_->failover_wait;
  const std::string what = "cannot store job " + job.jid;
  std::optional<std::string> cut;  // why the outcome is unknown
  const std::string prefix = "store " + c_->name + ": ";
  try {
    ride_out(
        [&] {
          ready();
          if (cut) {
            if (job_exists(job.jid)) return;
            cut.reset();
          }
          db_.ready_to_send(k_add_job, what);
          try {
            insert_job(job);
          } catch (const unreachable& e) {
            if (db_.write_refused()) throw;  // not committed: sent again
            std::string_view message = e.what();
            if (message.starts_with(prefix)) message.remove_prefix(prefix.size());
            cut = std::string(message);
            throw;
          }
        },
        until);
  } catch (const unreachable& e) {
    if (!cut) throw;
    throw outcome_unknown(prefix + "whether job " + job.jid + " was recorded is unknown: " + *cut +
                          ", and the store has not answered again since; `brine job " + "show " +
                          job.jid + "` tells once it does (last error: " + e.what() + ")");
  }
}

bool postgres_store::job_exists(const std::string& jid) {
  return db_.run(k_job_exists, params().text(jid), "cannot read job " + jid).boolean(0, 0);
}

void postgres_store::insert_job(const job_record& job) {
  db_.run(k_add_job,
          params()
              .text(job.jid)
              .text(job.fun)
              .text(to_json_text(job.args))
              .text(to_json_text(job.kwargs))
              .text(job.target)
              .text(job.tgt_type)
              .text(job.user)
              .text(to_json_text(job.minions))
              .text(job.master)
              .int8(job.created)
              .int8(job.deliver_by)
              .text(job_payload(job)),
          "cannot store job " + job.jid);
}

job_record postgres_store::read_job(const result& r, int row) const {
  job_record j;
  j.jid = r.text(row, 0);
  std::string where = "job " + j.jid;
  j.fun = r.text(row, 1);
  j.args = parse_json(r.text(row, 2), where, "args");
  j.kwargs = parse_json(r.text(row, 3), where, "kwargs");
  j.target = r.text(row, 4);
  j.tgt_type = r.text(row, 5);
  j.user = r.text(row, 6);
  auto minions = parse_json(r.text(row, 7), where, "minions");
  if (!minions.is_array()) c_->fail(where + ": column minions is not a JSON array");
  for (const auto& m : minions) {
    if (!m.is_string()) c_->fail(where + ": column minions holds a non-string");
    j.minions.push_back(m.get<std::string>());
  }
  j.master = r.text(row, 8);
  j.created = r.integer(row, 9);
  j.deliver_by = r.integer(row, 10);
  return j;
}

std::vector<job_record> postgres_store::read_jobs(const result& r) const {
  std::vector<job_record> jobs;
  jobs.reserve(static_cast<size_t>(r.rows()));
  for (int row = 0; row < r.rows(); ++row) jobs.push_back(read_job(r, row));
  return jobs;
}

std::vector<job_record> postgres_store::list_jobs(size_t limit) {
  ready();
  auto bounded = static_cast<int64_t>(
      std::min<uint64_t>(limit, static_cast<uint64_t>(std::numeric_limits<int64_t>::max())));
  return read_jobs(db_.run(k_list_jobs, params().int8(bounded), "cannot list jobs"));
}

std::optional<job_record> postgres_store::get_job(const std::string& jid) {
  ready();
  auto r = db_.run(k_get_job, params().text(jid), "cannot read job " + jid);
  if (r.rows() == 0) return std::nullopt;
  return read_job(r, 0);
}

size_t postgres_store::add_returns(const std::vector<return_record>& batch) {
  if (batch.empty()) return 0;
  ready();
  const std::string what = "cannot store " + std::to_string(batch.size()) + " returns";
  // The first of a (jid, minion) in the batch wins, as against one already
  // stored. Sorted, so that two masters storing overlapping batches (a
  // minion re-sending to another master) lock rows in the same order and
  // queue rather than deadlock.
  std::vector<const return_record*> rows;
  rows.reserve(batch.size());
  for (const auto& r : batch) rows.push_back(&r);
  auto key_less = [](const return_record* a, const return_record* b) {
    return std::tie(a->jid, a->minion) < std::tie(b->jid, b->minion);
  };
  std::stable_sort(rows.begin(), rows.end(), key_less);
  rows.erase(std::unique(rows.begin(), rows.end(),
                         [](const return_record* a, const return_record* b) {
                           return a->jid == b->jid && a->minion == b->minion;
                         }),
             rows.end());

  transaction txn(db_, what);
  // Shared with every other batch of returns, exclusive against
  // add_undelivered: a return and an undelivered record of one minion are
  // never written at once, so one of them always sees the other.
  db_.exec(lock_sql("pg_advisory_xact_lock_shared", k_postgres_delivery_lock).c_str(), what);
  std::vector<std::pair<std::string, std::string>> added;
  for_each_chunk(rows.size(), [&](size_t at, size_t n) {
    params p;
    for (size_t i = at; i < at + n; ++i) {
      const return_record& r = *rows[i];
      p.text(r.jid)
          .text(r.minion)
          .text(r.fun)
          .text(to_json_text(r.ret))
          .boolean(r.success)
          .int4(r.retcode)
          .int8(r.stamp);
    }
    auto res = db_.run(multi_row(multi::add_returns, n), p, what);
    for (int row = 0; row < res.rows(); ++row)
      added.emplace_back(res.text(row, 0), res.text(row, 1));
  });
  std::sort(added.begin(), added.end());
  std::vector<std::string> jids;
  for (const auto& [jid, minion] : added) {
    if (jids.empty() || jids.back() != jid) jids.push_back(jid);
  }
  // Under the lock, so no undelivered record of these jobs can appear
  // between this look and the commit.
  if (!jids.empty() && db_.run(k_any_undelivered, params().array(jids), what).rows() > 0) {
    for_each_chunk(added.size(), [&](size_t at, size_t n) {
      params p;
      for (size_t i = at; i < at + n; ++i) p.text(added[i].first).text(added[i].second);
      db_.run(multi_row(multi::drop_undelivered, n), p, what);
    });
  }

  // One payload per job, split to stay under the limit of a notification;
  // small returns travel in it.
  std::map<std::pair<std::string_view, std::string_view>, const return_record*> by_key;
  for (const auto* r : rows)
    by_key.emplace(std::pair<std::string_view, std::string_view>(r->jid, r->minion), r);
  for (size_t i = 0; i < added.size();) {
    const std::string& jid = added[i].first;
    const std::string header = c_->origin + "\n" + jid;
    std::string payload = header;
    auto flush = [&] {
      if (payload.size() > header.size()) {
        db_.run(k_notify_returns, params().text(payload), what);
      }
      payload = header;
    };
    for (; i < added.size() && added[i].first == jid; ++i) {
      std::string line = added[i].second;
      if (header.size() + 1 + line.size() >= k_postgres_max_payload) continue;  // cannot fit
      if (auto r = by_key.find({added[i].first, added[i].second}); r != by_key.end()) {
        std::string inline_ret = inline_return(*r->second);
        if (inline_ret.size() <= k_postgres_inline_return) line += "\t" + inline_ret;
      }
      if (payload.size() + 1 + line.size() >= k_postgres_max_payload) flush();
      payload += "\n" + line;
    }
    flush();
  }
  txn.commit();
  return added.size();
}

std::vector<return_record> postgres_store::read_returns(const result& r) const {
  std::vector<return_record> out;
  out.reserve(static_cast<size_t>(r.rows()));
  for (int row = 0; row < r.rows(); ++row) {
    return_record ret;
    ret.jid = r.text(row, 0);
    ret.minion = r.text(row, 1);
    ret.fun = r.text(row, 2);
    ret.ret = parse_json<nlohmann::ordered_json>(
        r.text(row, 3), "return of " + ret.minion + " for job " + ret.jid, "ret");
    ret.success = r.boolean(row, 4);
    ret.retcode = static_cast<int>(r.integer(row, 5));
    ret.stamp = r.integer(row, 6);
    out.push_back(std::move(ret));
  }
  return out;
}

std::vector<return_record> postgres_store::get_returns(const std::string& jid) {
  ready();
  return read_returns(
      db_.run(k_get_returns, params().text(jid), "cannot read returns of job " + jid));
}

std::vector<return_record> postgres_store::get_returns(const std::string& jid,
                                                       const std::vector<std::string>& minions) {
  if (minions.empty()) return {};
  ready();
  std::string lines;
  for (const auto& m : minions) {
    if (m.find('\n') != std::string::npos) continue;  // no such minion
    lines += lines.empty() ? "" : "\n";
    lines += m;
  }
  return read_returns(db_.run(k_get_returns_of, params().text(jid).text(lines),
                              "cannot read returns of job " + jid));
}

size_t postgres_store::count_returns(const std::string& jid) {
  ready();
  return static_cast<size_t>(
      db_.run(k_count_returns, params().text(jid), "cannot count returns of job " + jid)
          .integer(0, 0));
}

void postgres_store::add_undelivered(const std::vector<undelivered_record>& batch) {
  ride_out([&] { add_undelivered_once(batch); });
}

void postgres_store::add_undelivered_once(const std::vector<undelivered_record>& batch) {
  if (batch.empty()) return;
  ready();
  const std::string what = "cannot record " + std::to_string(batch.size()) + " undelivered minions";
  std::vector<const undelivered_record*> rows;
  rows.reserve(batch.size());
  for (const auto& u : batch) rows.push_back(&u);
  std::stable_sort(rows.begin(), rows.end(), [](const auto* a, const auto* b) {
    return std::tie(a->jid, a->minion) < std::tie(b->jid, b->minion);
  });
  rows.erase(std::unique(rows.begin(), rows.end(),
                         [](const auto* a, const auto* b) {
                           return a->jid == b->jid && a->minion == b->minion;
                         }),
             rows.end());
  std::map<std::string, std::vector<std::string>> added;
  transaction txn(db_, what);
  db_.exec(lock_sql("pg_advisory_xact_lock", k_postgres_delivery_lock).c_str(), what);
  for_each_chunk(rows.size(), [&](size_t at, size_t n) {
    params p;
    for (size_t i = at; i < at + n; ++i) {
      p.text(rows[i]->jid).text(rows[i]->minion).text(rows[i]->reason).int8(rows[i]->stamp);
    }
    auto r = db_.run(multi_row(multi::add_undelivered, n), p, what);
    for (int row = 0; row < r.rows(); ++row) added[r.text(row, 0)].push_back(r.text(row, 1));
  });
  // Other masters' clients follow the job too.
  std::string all;
  for (const auto& [jid, minions] : added) {
    std::string p = payloads(c_->origin + "\n" + jid, minions);
    if (p.empty()) continue;
    if (!all.empty()) all += '\x1e';
    all += p;
  }
  if (!all.empty()) db_.run(k_notify_undelivered, params().text(all), what);
  txn.commit();
}

std::vector<undelivered_record> postgres_store::get_undelivered(const std::string& jid) {
  ready();
  auto r = db_.run(k_get_undelivered, params().text(jid),
                   "cannot read undelivered minions of job " + jid);
  std::vector<undelivered_record> out;
  out.reserve(static_cast<size_t>(r.rows()));
  for (int row = 0; row < r.rows(); ++row) {
    out.push_back({r.text(row, 0), r.text(row, 1), r.text(row, 2), r.integer(row, 3)});
  }
  return out;
}

size_t postgres_store::count_undelivered(const std::string& jid) {
  ready();
  return static_cast<size_t>(db_.run(k_count_undelivered, params().text(jid),
                                     "cannot count undelivered minions of job " + jid)
                                 .integer(0, 0));
}

std::vector<std::string> postgres_store::returned_minions(const std::string& jid) {
  ready();
  auto r = db_.run(k_returned_minions, params().text(jid), "cannot read returns of job " + jid);
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(r.rows()));
  for (int row = 0; row < r.rows(); ++row) out.push_back(r.text(row, 0));
  return out;
}

void postgres_store::settle_job(const std::string& jid) {
  ride_out([&] { settle_job_once(jid); });
}

void postgres_store::settle_job_once(const std::string& jid) {
  ready();
  db_.run(k_settle_job, params().text(jid), "cannot settle job " + jid);
}

std::vector<job_record> postgres_store::unsettled_jobs() {
  ready();
  return read_jobs(db_.run(k_unsettled_jobs, "cannot list unsettled jobs"));
}

size_t postgres_store::purge_jobs_before(int64_t cutoff) {
  ready();
  const std::string what = "cannot purge jobs";
  transaction txn(db_, what);
  // Returns first, while their jobs still say which jids are old.
  db_.run(k_purge_returns, params().int8(cutoff), what);
  db_.run(k_purge_undelivered, params().int8(cutoff), what);
  size_t purged = db_.run(k_purge_jobs, params().int8(cutoff), what).affected();
  db_.run(k_purge_orphans, params().int8(cutoff), what);
  txn.commit();
  return purged;
}

void postgres_store::put_minion_data(const std::vector<minion_data_update>& batch) {
  ride_out([&] { put_minion_data_once(batch); });
}

void postgres_store::put_minion_data_once(const std::vector<minion_data_update>& batch) {
  if (batch.empty()) return;
  ready();
  const std::string what = "cannot store the data of " + std::to_string(batch.size()) + " minions";
  // One row per minion, later updates in the batch over earlier ones (an
  // UPDATE ... FROM touches a row once), sorted so that concurrent writers
  // lock rows in the same order.
  struct merged {
    std::optional<std::string> grains;
    std::optional<std::string> pillar;
    std::optional<int64_t> last_seen;
    std::string master;
    bool left = false;
  };
  std::map<std::string, merged> by_id;
  for (const auto& u : batch) {
    merged& m = by_id[u.id];
    if (u.grains) m.grains = to_json_text(*u.grains);
    if (u.pillar) m.pillar = to_json_text(*u.pillar);
    if (u.last_seen) {
      m.last_seen = u.last_seen;
      m.master = u.master;
      m.left = u.left;
    }
  }
  std::vector<const std::pair<const std::string, merged>*> rows;
  rows.reserve(by_id.size());
  for (const auto& entry : by_id) rows.push_back(&entry);

  transaction txn(db_, what);
  for_each_chunk(rows.size(), [&](size_t at, size_t n) {
    params p;
    for (size_t i = at; i < at + n; ++i) p.text(rows[i]->first);
    db_.run(multi_row(multi::minion_rows, n), p, what);
  });
  for_each_chunk(rows.size(), [&](size_t at, size_t n) {
    params p;
    for (size_t i = at; i < at + n; ++i) {
      const merged& m = rows[i]->second;
      p.text(rows[i]->first).text_or_null(m.grains).text_or_null(m.pillar);
      if (m.last_seen) {
        p.int8(*m.last_seen);
      } else {
        p.null();
      }
      p.text(m.master).boolean(m.left);
    }
    db_.run(multi_row(multi::minion_update, n), p, what);
  });
  // Other masters target by grains and pillar: they read these rows again.
  std::vector<std::string> changed;
  for (const auto* row : rows) {
    if (row->second.grains || row->second.pillar) changed.push_back(row->first);
  }
  if (std::string p = payloads(c_->origin, changed); !p.empty()) {
    db_.run(k_notify_minions, params().text(p), what);
  }
  // Which master each minion is connected to: the other masters of a
  // cluster count it as connected.
  std::vector<std::string> presence;
  for (const auto* row : rows) {
    if (row->second.last_seen) presence.push_back((row->second.left ? "-" : "+") + row->first);
  }
  if (std::string p = payloads(c_->origin, presence); !p.empty()) {
    db_.run(k_notify_presence, params().text(p), what);
  }
  txn.commit();
}

std::vector<minion_data_record> postgres_store::load_minion_data() {
  ready();
  return read_minion_data(db_.run(k_load_minion_data, "cannot read the minion data cache"));
}

std::vector<minion_data_record> postgres_store::load_minion_data(
    const std::vector<std::string>& ids) {
  ready();
  std::string list;
  for (const auto& id : ids) list += (list.empty() ? "" : "\n") + id;
  return read_minion_data(
      db_.run(k_load_minion_data_of, params().text(list), "cannot read the minion data cache"));
}

std::vector<minion_data_record> postgres_store::read_minion_data(const result& r) const {
  std::vector<minion_data_record> out;
  out.reserve(static_cast<size_t>(r.rows()));
  for (int row = 0; row < r.rows(); ++row) {
    minion_data_record m;
    m.id = r.text(row, 0);
    std::string where = "minion data of " + m.id;
    if (!r.is_null(row, 1)) m.grains = parse_json(r.text(row, 1), where, "grains");
    if (!r.is_null(row, 2)) m.pillar = parse_json(r.text(row, 2), where, "pillar");
    m.last_seen = r.integer(row, 3);
    m.master = r.text(row, 4);
    out.push_back(std::move(m));
  }
  return out;
}

void postgres_store::announce_acks(const std::map<std::string, std::vector<std::string>>& acks) {
  if (acks.empty()) return;
  ready();
  std::string all;
  for (const auto& [jid, minions] : acks) {
    std::string p = payloads(c_->origin + "\n" + jid, minions);
    if (p.empty()) continue;
    if (!all.empty()) all += '\x1e';
    all += p;
  }
  if (!all.empty()) db_.run(k_notify_acks, params().text(all), "cannot announce acknowledgements");
}

std::vector<member_record> postgres_store::read_members(const result& r) const {
  std::vector<member_record> out;
  for (int row = 0; row < r.rows(); ++row) {
    member_record m;
    m.name = r.text(row, 0);
    m.slot = static_cast<int>(r.integer(row, 1));
    m.cluster_id = r.text(row, 2);
    m.peer = r.text(row, 3);
    m.cluster_finger = r.text(row, 4);
    m.finger = r.text(row, 5);
    m.proof = r.text(row, 6);
    m.seen_ms = r.integer(row, 7);
    auto stats = nlohmann::json::parse(r.text(row, 8), nullptr, false);
    if (stats.is_object()) m.stats = std::move(stats);
    m.removed = r.boolean(row, 9);
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(),
            [](const member_record& a, const member_record& b) { return a.name < b.name; });
  return out;
}

std::vector<member_record> postgres_store::heartbeat(const member_record& me) {
  ready();
  return read_members(db_.run(k_heartbeat,
                              params()
                                  .text(me.name)
                                  .text(me.cluster_id)
                                  .text(me.peer)
                                  .text(me.cluster_finger)
                                  .text(me.finger)
                                  .text(me.proof)
                                  .text(to_json_text(me.stats)),
                              "cannot write the heartbeat of master " + me.name));
}

std::vector<member_record> postgres_store::members() {
  ready();
  return read_members(db_.run(k_members, "cannot read the masters"));
}

bool postgres_store::remove_member(const std::string& name) {
  ready();
  return db_.run(k_remove_member, params().text(name), "cannot remove master " + name).rows() > 0;
}

void postgres_store::delete_minion_data(const std::string& id) {
  ride_out([&] { delete_minion_data_once(id); });
}

void postgres_store::delete_minion_data_once(const std::string& id) {
  ready();
  db_.run(k_delete_minion_data, params().text(id), "cannot forget the data of minion " + id);
}

const statement& postgres_store::dynamic(const std::string& name, std::string sql) {
  auto it = multi_.find(name);
  if (it == multi_.end()) {
    it = multi_.emplace(name, std::make_pair(std::move(sql), statement{})).first;
    it->second.second = statement{it->first.c_str(), it->second.first.c_str()};
  }
  return it->second.second;
}

size_t postgres_store::add_reports(const std::vector<report::report>& batch) {
  if (batch.empty()) return 0;
  ready();
  const std::string what = "cannot store " + std::to_string(batch.size()) + " reports";
  // The first of a (jid, minion) in the batch wins; sorted so that masters
  // writing overlapping batches lock rows in the same order.
  std::vector<const report::report*> rows;
  rows.reserve(batch.size());
  for (const auto& r : batch) rows.push_back(&r);
  std::stable_sort(rows.begin(), rows.end(), [](const auto* a, const auto* b) {
    return std::tie(a->jid, a->minion) < std::tie(b->jid, b->minion);
  });
  rows.erase(std::unique(rows.begin(), rows.end(),
                         [](const auto* a, const auto* b) {
                           return a->jid == b->jid && a->minion == b->minion;
                         }),
             rows.end());

  transaction txn(db_, what);
  // minion -> (started, jid) of its newest new report in this batch.
  std::map<std::string, std::pair<int64_t, std::string>> latest;
  std::set<std::pair<std::string, std::string>> fresh;  // (jid, minion) stored now
  size_t added = 0;
  for_each_chunk(rows.size(), [&](size_t at, size_t n) {
    params p;
    for (size_t i = at; i < at + n; ++i) {
      const report::report& r = *rows[i];
      p.text(r.jid)
          .text(r.minion)
          .text(r.fun)
          .int8(r.started_ms)
          .float8(r.duration_ms)
          .float8(r.run_time_ms)
          .text(report::to_string(r.status))
          .boolean(r.test)
          .int4(r.retcode)
          .int4(static_cast<int32_t>(r.counts.succeeded))
          .int4(static_cast<int32_t>(r.counts.failed))
          .int4(static_cast<int32_t>(r.counts.changed))
          .int4(static_cast<int32_t>(r.counts.pending))
          .int4(static_cast<int32_t>(r.counts.total))
          .text(report::timings_text(r.timings))
          .text(to_json_text(nlohmann::json(r.errors)))
          .text(to_json_text(r.ret));
    }
    auto res = db_.run(multi_row(multi::add_reports, n), p, what);
    for (int row = 0; row < res.rows(); ++row) {
      ++added;
      fresh.emplace(res.text(row, 0), res.text(row, 1));
      std::pair<int64_t, std::string> at_started{res.integer(row, 2), res.text(row, 0)};
      auto [it, inserted] = latest.try_emplace(res.text(row, 1), at_started);
      if (!inserted && at_started > it->second) it->second = std::move(at_started);
    }
  });
  std::vector<const std::pair<const std::string, std::pair<int64_t, std::string>>*> last;
  last.reserve(latest.size());
  for (const auto& entry : latest) last.push_back(&entry);
  for_each_chunk(last.size(), [&](size_t at, size_t n) {
    params p;
    for (size_t i = at; i < at + n; ++i) {
      p.text(last[i]->first).text(last[i]->second.second).int8(last[i]->second.first);
    }
    db_.run(multi_row(multi::last_reports, n), p, what);
  });
  // Other masters answer the inventory's last runs from memory: each
  // minion's newest new report here, which they keep if it is their latest.
  std::vector<std::string> runs;
  for (const auto* r : rows) {
    auto it = latest.find(r->minion);
    if (it == latest.end() || it->second.second != r->jid) continue;
    std::string line = r->minion + '\t' + r->jid + '\t' + std::to_string(r->started_ms) + '\t' +
                       report::to_string(r->status) + '\t' + (r->test ? "1" : "0") + '\t' + r->fun;
    // A name with a tab or a newline does not travel: the rows stay the truth.
    if (std::count(line.begin(), line.end(), '\t') == 5 && line.find('\n') == std::string::npos) {
      runs.push_back(std::move(line));
    }
  }
  if (std::string p = payloads(c_->origin, runs); !p.empty()) {
    db_.run(k_notify_reports, params().text(p), what);
  }
  // The states of the new reports, for list_state_results().
  struct indexed {
    const report::report* r;
    report::state_line s;
  };
  std::vector<indexed> states;
  for (const auto* r : rows) {
    if (!fresh.contains({r->jid, r->minion})) continue;
    for (auto& s : report::states_of(r->ret)) states.push_back({r, std::move(s)});
  }
  for_each_chunk(states.size(), [&](size_t at, size_t n) {
    params p;
    for (size_t i = at; i < at + n; ++i) {
      const auto& [r, s] = states[i];
      p.text(s.id).int8(r->started_ms).text(r->jid).text(r->minion).text(s.tag);
      p.text(s.function).text(s.name).text(s.sls);
      if (s.result) {
        p.boolean(*s.result);
      } else {
        p.null();
      }
      p.boolean(s.changes);
    }
    db_.run(multi_row(multi::report_states, n), p, what);
  });
  txn.commit();
  return added;
}

report::report postgres_store::read_report(const result& r, int row, bool with_ret,
                                           bool brief) const {
  report::report out;
  out.jid = r.text(row, 0);
  out.minion = r.text(row, 1);
  std::string where = "report of " + out.minion + " for job " + out.jid;
  out.fun = r.text(row, 2);
  out.started_ms = r.integer(row, 3);
  out.duration_ms = r.real(row, 4);
  out.run_time_ms = r.real(row, 5);
  std::string status = r.text(row, 6);
  auto parsed = report::parse_status(status);
  if (!parsed) {
    c_->fail(where + " has unknown status '" + status +
             "'; it was written by a newer brine or edited by hand");
  }
  out.status = *parsed;
  out.test = r.boolean(row, 7);
  out.retcode = static_cast<int>(r.integer(row, 8));
  out.counts = {static_cast<size_t>(r.integer(row, 9)), static_cast<size_t>(r.integer(row, 10)),
                static_cast<size_t>(r.integer(row, 11)), static_cast<size_t>(r.integer(row, 12)),
                static_cast<size_t>(r.integer(row, 13))};
  if (brief) return out;
  auto timings = report::parse_timings(r.text(row, 14));
  if (!timings) c_->fail(where + ": column timings is not a map of timings");
  out.timings = std::move(*timings);
  auto errors = parse_json(r.text(row, 15), where, "errors");
  if (!errors.is_array()) c_->fail(where + ": column errors is not a JSON array");
  for (const auto& e : errors) {
    out.errors.push_back(e.is_string() ? e.get<std::string>() : e.dump());
  }
  if (with_ret) out.ret = parse_json<nlohmann::ordered_json>(r.text(row, 16), where, "ret");
  return out;
}

std::vector<report::report> postgres_store::list_reports(const report_query& q) {
  ready();
  // One statement per combination of filters, so that each uses its index
  // (a glob's literal prefix becomes a range: the regular expression alone
  // would need the planner to see the parameter's value).
  std::string name = "list_reports";
  std::string sql = std::string("SELECT ") + BRINE_REPORT_COLUMNS;
  std::string col = q.last ? "l.minion" : "r.minion";
  if (q.last) {
    name += "_last";
    sql +=
        " FROM last_reports l JOIN reports r ON r.jid = l.jid AND r.minion = l.minion "
        "WHERE true";
  } else {
    sql += " FROM reports r WHERE true";
  }
  params p;
  int n = 0;
  auto param = [&](const char* type) { return "$" + std::to_string(++n) + "::" + type; };
  auto glob = split_glob(q.minion);
  if (!q.minion.empty()) {
    if (!glob.wildcard) {
      name += "_minion";
      sql += " AND " + col + " = " + param("text");
      p.text(glob.prefix);
    } else {
      if (!glob.prefix.empty()) {
        std::string end = prefix_end(glob.prefix);
        name += "_from";
        sql += " AND " + col + " >= " + param("text");
        p.text(glob.prefix);
        if (!end.empty()) {
          name += "_to";
          sql += " AND " + col + " < " + param("text");
          p.text(end);
        }
      }
      name += "_glob";
      sql += " AND " + col + " ~ " + param("text");
      p.text(posix_regex(q.minion));
    }
  }
  if (q.status) {
    name += "_status";
    sql += " AND r.status = " + param("text");
    p.text(report::to_string(*q.status));
  }
  if (q.since_ms) {
    name += "_since";
    sql += " AND r.started >= " + param("bigint");
    p.int8(*q.since_ms);
  }
  std::string order = q.last ? "l" : "r";
  sql += " ORDER BY " + order + ".started DESC, " + order + ".jid DESC, " + order +
         ".minion DESC LIMIT " + param("bigint");
  p.int8(static_cast<int64_t>(
      std::min<uint64_t>(q.limit, static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))));
  auto r = db_.run(dynamic(name, std::move(sql)), p, "cannot list reports");
  std::vector<report::report> out;
  out.reserve(static_cast<size_t>(r.rows()));
  for (int row = 0; row < r.rows(); ++row) out.push_back(read_report(r, row, false, q.brief));
  return out;
}

std::optional<report::report> postgres_store::get_report(const std::string& jid,
                                                         const std::string& minion) {
  ready();
  auto r = db_.run(k_get_report, params().text(jid).text(minion),
                   "cannot read the report of " + minion + " for job " + jid);
  if (r.rows() == 0) return std::nullopt;
  return read_report(r, 0, true);
}

size_t postgres_store::purge_reports_before(int64_t cutoff_ms) {
  ready();
  const std::string what = "cannot purge reports";
  transaction txn(db_, what);
  auto purged = db_.run(k_purge_reports, params().int8(cutoff_ms), what).affected();
  db_.run(k_purge_report_states, params().int8(cutoff_ms), what);
  txn.commit();
  return purged;
}

std::vector<state_result_record> postgres_store::list_state_results(const state_query& q) {
  ready();
  std::string name = "list_state_results";
  std::string sql =
      "SELECT s.jid, s.minion, r.fun, s.started, r.test, s.state_id, s.function, s.name, s.sls, "
      "s.result, s.changes FROM report_states s JOIN reports r ON r.jid = s.jid AND "
      "r.minion = s.minion";
  if (q.last) {
    name += "_last";
    sql += " JOIN last_reports l ON l.jid = s.jid AND l.minion = s.minion";
  }
  params p;
  int n = 0;
  auto param = [&](const char* type) { return "$" + std::to_string(++n) + "::" + type; };
  sql += " WHERE s.state_id = " + param("text");
  p.text(q.id);
  if (!q.minion.empty()) {
    name += "_glob";
    sql += " AND s.minion ~ " + param("text");
    p.text(posix_regex(q.minion));
  }
  if (q.since_ms) {
    name += "_since";
    sql += " AND s.started >= " + param("bigint");
    p.int8(*q.since_ms);
  }
  sql += " ORDER BY s.state_id DESC, s.started DESC, s.jid DESC, s.minion DESC, s.tag DESC LIMIT " +
         param("bigint");
  p.int8(static_cast<int64_t>(
      std::min<uint64_t>(q.limit, static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))));
  auto r = db_.run(dynamic(name, std::move(sql)), p, "cannot list the results of state " + q.id);
  std::vector<state_result_record> out;
  out.reserve(static_cast<size_t>(r.rows()));
  for (int row = 0; row < r.rows(); ++row) {
    state_result_record s;
    s.jid = r.text(row, 0);
    s.minion = r.text(row, 1);
    s.fun = r.text(row, 2);
    s.started_ms = r.integer(row, 3);
    s.test = r.boolean(row, 4);
    s.state_id = r.text(row, 5);
    s.function = r.text(row, 6);
    s.name = r.text(row, 7);
    s.sls = r.text(row, 8);
    if (!r.is_null(row, 9)) s.result = r.boolean(row, 9);
    s.changes = r.boolean(row, 10);
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<minion_data_record> postgres_store::query_minion_data(const minion_data_query& q) {
  if (!q.grains) return store::query_minion_data(q);
  ready();
  // The chosen top-level grains only, cut in the database: the rows that
  // travel are a few dozen bytes a minion, not the whole grains.
  std::string sql =
      std::string(
          "SELECT id, CASE WHEN grains IS NULL THEN NULL ELSE (SELECT "
          "coalesce(json_object_agg(e.key, e.value), '{}') FROM json_each(grains::json) e "
          "WHERE e.key = ANY ($1::text[]) AND json_typeof(e.value) <> 'null') END, ") +
      (q.pillar ? "pillar" : "NULL") + ", last_seen, master FROM minion_data ORDER BY id";
  auto r =
      db_.run(dynamic(q.pillar ? "query_minion_data_pillar" : "query_minion_data", std::move(sql)),
              params().array(*q.grains), "cannot read the minion data cache");
  return read_minion_data(r);
}

std::vector<file_pin> postgres_store::load_file_pins() {
  ready();
  auto r = db_.run(k_load_file_pins, "cannot read the pinned gitfs revisions");
  std::vector<file_pin> out;
  for (int row = 0; row < r.rows(); ++row) {
    out.push_back(
        {r.text(row, 0), r.text(row, 1), r.text(row, 2), r.text(row, 3), r.integer(row, 4)});
  }
  return out;
}

void postgres_store::put_file_pins(const std::vector<std::string>& remotes,
                                   const std::vector<file_pin>& pins) {
  ready();
  const std::string what = "cannot pin the gitfs revisions";
  transaction txn(db_, what);
  for (const auto& remote : remotes) db_.run(k_drop_file_pins, params().text(remote), what);
  for (const auto& p : pins) {
    db_.run(k_add_file_pin,
            params().text(p.remote).text(p.saltenv).text(p.ref).text(p.commit).int8(p.updated),
            what);
  }
  db_.run(k_notify_file_pins, params().text(c_->origin), what);
  txn.commit();
}

#undef BRINE_REPORT_COLUMNS

}  // namespace

std::unique_ptr<store> open_postgres(const options& o) {
  auto c = make_config(o);
  return std::make_unique<postgres_store>(std::move(c), o.migrate);
}

}  // namespace brine::store
