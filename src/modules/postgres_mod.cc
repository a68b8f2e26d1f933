// The postgres module: Salt's salt/modules/postgres.py, postgres.*, for the
// postgres_user, postgres_database, postgres_schema and postgres_extension
// states. Salt runs psql; brine talks to the server through libpq (loaded at
// run time, pq/libpq.h), non-blocking on the caller's executor, so that a
// slow server never blocks other jobs and a cancelled job closes its
// connection. Names in SQL are quoted with PQescapeIdentifier and values
// with PQescapeLiteral (Salt pastes them between double quotes); passwords
// go into no log and no message.
//
// Connection options, as Salt's: the function's arguments (host, port,
// user, maintenance_db, password; the schema functions' db_host, db_port,
// db_user, db_password and dbname), else Salt's config.option of
// postgres.host, postgres.port, postgres.user, postgres.pass and
// postgres.maintenance_db (minion options, grains, pillar), else libpq's
// defaults (the local socket). As Salt, with no host (or a socket
// directory) the database user defaults to `runas`, itself 'postgres'.
// brine does not switch system users: peer authentication sees the minion's
// own user (a failure says so and how to connect instead).

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <array>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <chrono>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "base/error.h"
#include "modules/arguments.h"
#include "modules/context.h"
#include "modules/postgres.h"
#include "modules/registry.h"
#include "pq/libpq.h"

namespace brine::modules {

namespace postgres {
namespace postgres_mod {
namespace {

std::string base64(const unsigned char* data, std::size_t size) {
  std::string out(4 * ((size + 2) / 3), '\0');
  int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data, static_cast<int>(size));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::optional<std::string> unbase64(const std::string& text) {
  if (text.empty() || text.size() % 4 != 0) return std::nullopt;
  std::string out(text.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  std::size_t len = static_cast<std::size_t>(n);
  for (auto it = text.rbegin(); it != text.rend() && *it == '='; ++it) --len;
  out.resize(len);
  return out;
}

std::string md5_password(const std::string& role, const std::string& password) {
  std::string input = password + role;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(input.data(), input.size(), digest, &len, EVP_md5(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out = "md5";
  for (unsigned int i = 0; i < len; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

// PostgreSQL's scram_build_secret (Salt's _scram_sha_256). The password
// is taken as its bytes: Salt's SASLprep changes only non-ASCII text.
std::string scram_sha_256(const std::string& password, const std::string& salt, int iterations) {
  unsigned char salted[32];
  PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()),
                    reinterpret_cast<const unsigned char*>(salt.data()),
                    static_cast<int>(salt.size()), iterations, EVP_sha256(), sizeof salted, salted);
  auto hmac = [&](const char* text, unsigned char* out) {
    unsigned int len = 32;
    HMAC(EVP_sha256(), salted, sizeof salted, reinterpret_cast<const unsigned char*>(text),
         std::strlen(text), out, &len);
  };
  unsigned char client_key[32], stored_key[32], server_key[32];
  hmac("Client Key", client_key);
  unsigned int len = 32;
  EVP_Digest(client_key, sizeof client_key, stored_key, &len, EVP_sha256(), nullptr);
  hmac("Server Key", server_key);
  return "SCRAM-SHA-256$" + std::to_string(iterations) + ":" +
         base64(reinterpret_cast<const unsigned char*>(salt.data()), salt.size()) + "$" +
         base64(stored_key, sizeof stored_key) + ":" + base64(server_key, sizeof server_key);
}

// "md5", "scram-sha-256" or "plain" from Salt's encrypted argument.
std::string method_of(const nlohmann::json& encrypted) {
  if (encrypted.is_null()) return k_default_encryption;
  if (encrypted.is_boolean()) return encrypted.get<bool>() ? "md5" : "plain";
  if (encrypted.is_string()) {
    const auto& s = encrypted.get_ref<const std::string&>();
    if (s == "md5" || s == "scram-sha-256") return s;
  }
  std::string shown = encrypted.is_string() ? encrypted.get<std::string>() : encrypted.dump();
  throw base::error("Unknown password algorithm: " + shown +
                    " (encrypted must be md5, scram-sha-256, True or False)");
}

}  // namespace
}  // namespace postgres_mod

std::string maybe_encrypt_password(const std::string& role, const std::string& password,
                                   const nlohmann::json& encrypted) {
  using namespace postgres_mod;
  const std::string method = method_of(encrypted);
  if (method == "scram-sha-256" && !password.starts_with("SCRAM-SHA-256")) {
    std::string salt(16, '\0');
    if (RAND_bytes(reinterpret_cast<unsigned char*>(salt.data()), 16) != 1) {
      throw base::error("cannot draw a random salt for the SCRAM password (OpenSSL RAND_bytes)");
    }
    return scram_sha_256(password, salt, 4096);
  }
  if (method == "md5" && !password.starts_with("md5")) return md5_password(role, password);
  return password;
}

bool verify_password(const std::string& role, const std::string& password,
                     const std::string& verifier, const nlohmann::json& method_json) {
  using namespace postgres_mod;
  std::string method;
  try {
    method = method_of(method_json);
  } catch (const base::error&) {
    return false;
  }
  if (method == "md5") {
    return verifier == (password.starts_with("md5") ? password : md5_password(role, password));
  }
  if (method == "scram-sha-256") {
    if (password.starts_with("SCRAM-SHA-256")) return verifier == password;
    static const std::regex k_scram(R"(^SCRAM-SHA-256\$(\d+):([^\$]+?)\$)");
    std::smatch m;
    if (!std::regex_search(verifier, m, k_scram)) return false;
    std::optional<std::string> salt = unbase64(m[2].str());
    int iterations = 0;
    try {
      iterations = std::stoi(m[1].str());
    } catch (const std::exception&) {
      return false;
    }
    if (!salt || iterations <= 0) return false;
    return verifier == scram_sha_256(password, *salt, iterations);
  }
  return verifier == password;
}

}  // namespace postgres

namespace postgres_mod {
namespace {

using json = nlohmann::json;
using ordered = nlohmann::ordered_json;
using namespace std::chrono_literals;

// Connection keywords: a connect takes this long at most (libpq's own
// connect_timeout does not apply to its asynchronous connect).
constexpr auto k_connect_limit = 30s;

// Salt's config.option(key): the minion's options, its grains, its pillar,
// the pillar's `master` mapping; nullptr when none has it.
const json* config_option(const call& c, const std::string& key,
                          std::shared_ptr<const json>& keep) {
  if (c.context == nullptr) return nullptr;
  const json& opts = c.context->opts();
  if (auto it = opts.find(key); it != opts.end()) return &*it;
  for (auto data : {c.context->grains(), c.context->pillar()}) {
    if (data == nullptr || !data->is_object()) continue;
    if (auto it = data->find(key); it != data->end()) {
      keep = data;
      return &*it;
    }
  }
  std::shared_ptr<const json> pillar = c.context->pillar();
  if (pillar != nullptr && pillar->is_object()) {
    if (auto m = pillar->find("master"); m != pillar->end() && m->is_object()) {
      if (auto it = m->find(key); it != m->end()) {
        keep = pillar;
        return &*it;
      }
    }
  }
  return nullptr;
}

// Where and as whom to connect, and the function's name for messages.
struct target {
  std::string fun;
  std::string host;  // empty: libpq's default (the local socket)
  std::string port;
  std::string user;  // empty: libpq's default (the system user)
  std::string dbname;
  std::optional<std::string> password;
};

// The argument names a function takes its connection from: Salt's usual
// ones, or the schema functions' (db_host, ..., dbname, user=runas).
struct names {
  const char* host = "host";
  const char* port = "port";
  const char* user = "user";
  const char* db = "maintenance_db";
  const char* password = "password";
  const char* runas = "runas";
};
constexpr names k_usual{};
constexpr names k_schema{"db_host", "db_port", "db_user", "dbname", "db_password", "user"};

std::vector<std::string> params_with(std::vector<std::string> own, const names& n) {
  for (const char* p : {n.user, n.host, n.port, n.db, n.password, n.runas}) {
    if (std::find(own.begin(), own.end(), p) == own.end()) own.push_back(p);
  }
  return own;
}

// An argument or option given as text or a number (a port may be either).
std::optional<std::string> text_value(const arguments& a, const std::string& what, const json* v) {
  if (v == nullptr || v->is_null()) return std::nullopt;
  std::string s = a.text_of(what, *v);
  if (s.empty()) return std::nullopt;
  return s;
}

target connection(const arguments& a, const call& c, const names& n) {
  target t;
  t.fun = a.fun();
  std::shared_ptr<const json> keep;
  auto pick = [&](const char* arg, const char* option) -> std::optional<std::string> {
    if (auto v = text_value(a, arg, a.get(arg))) return v;
    return text_value(a, option, config_option(c, option, keep));
  };
  t.host = pick(n.host, "postgres.host").value_or("");
  t.port = pick(n.port, "postgres.port").value_or("");
  t.dbname = pick(n.db, "postgres.maintenance_db").value_or("postgres");
  std::optional<std::string> runas = text_value(a, n.runas, a.get(n.runas));
  if (!runas && (t.host.empty() || t.host.front() == '/')) runas = "postgres";
  t.user = pick(n.user, "postgres.user").value_or(runas.value_or(""));
  if (const json* p = a.get(n.password)) {
    t.password = a.text_of(n.password, *p);
  } else if (const json* o = config_option(c, "postgres.pass", keep); o && !o->is_null()) {
    t.password = o->is_string() ? o->get<std::string>() : o->dump();
  }
  if (!t.port.empty() && t.port.find_first_not_of("0123456789") != std::string::npos) {
    a.fail("port must be a number 1..65535, got '" + t.port + "'");
  }
  return t;
}

std::string where(const target& t) {
  std::string at = t.host.empty() ? "the local socket" : t.host;
  if (!t.port.empty()) at += (t.host.empty() ? " of port " : ":") + t.port;
  std::string as = t.user.empty() ? "" : " as " + t.user;
  return "PostgreSQL at " + at + as + " (database " + t.dbname + ")";
}


std::string connect_hint(const std::string& message) {
  if (message.find("password") != std::string::npos) {
    return "set the password in postgres.pass (minion config or pillar) or the password "
           "argument (db_password in states)";
  }
  if (message.find("Peer authentication") != std::string::npos ||
      message.find("Ident authentication") != std::string::npos) {
    return "brine connects in-process and does not switch system users (runas): connect over "
           "TCP with postgres.host, postgres.user and postgres.pass, or map this system user in "
           "pg_ident.conf";
  }
  if (message.find("database") != std::string::npos &&
      message.find("does not exist") != std::string::npos) {
    return "set postgres.maintenance_db (maintenance_db) to a database that exists";
  }
  if (message.find("role") != std::string::npos &&
      message.find("does not exist") != std::string::npos) {
    return "set postgres.user (db_user) to a role that exists";
  }
  return "check postgres.host and postgres.port (db_host and db_port in states) and that the "
         "server is running";
}

// Rows of a result as text; a NULL is "" (Salt reads psql's CSV, where
// they are the same).
struct rows {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> values;
  std::vector<std::vector<bool>> nulls;

  std::size_t col(const std::string& name) const {
    auto it = std::find(columns.begin(), columns.end(), name);
    if (it == columns.end()) throw base::error("postgres: no column " + name + " in the result");
    return static_cast<std::size_t>(it - columns.begin());
  }
  const std::string& at(std::size_t row, const std::string& name) const {
    return values[row][col(name)];
  }
  bool is_null(std::size_t row, const std::string& name) const { return nulls[row][col(name)]; }
  // Salt's psql_query rows: {column: text}.
  ordered objects() const {
    ordered out = ordered::array();
    for (const auto& row : values) {
      ordered o = ordered::object();
      for (std::size_t i = 0; i < columns.size(); ++i) o[columns[i]] = row[i];
      out.push_back(std::move(o));
    }
    return out;
  }
};

// Waits until the socket is readable (or writable) or `deadline` passes
// (throws then). A duplicate of the descriptor is watched, so that libpq
// keeps sole ownership of its own.
asio::awaitable<void> wait_socket(int fd, bool write,
                                  std::chrono::steady_clock::time_point deadline,
                                  std::string what) {
  using namespace asio::experimental::awaitable_operators;
  auto ex = co_await asio::this_coro::executor;
  int copy = ::dup(fd);
  if (copy < 0) throw tool_failure(what + ": cannot watch the connection: " + std::strerror(errno));
  asio::posix::stream_descriptor sd(ex, copy);
  asio::steady_timer timer(ex, deadline);
  auto ready = sd.async_wait(write ? asio::posix::stream_descriptor::wait_write
                                   : asio::posix::stream_descriptor::wait_read,
                             asio::use_awaitable);
  auto late = timer.async_wait(asio::use_awaitable);
  std::variant<std::monostate, std::monostate> which =
      co_await (std::move(ready) || std::move(late));
  if (which.index() == 1) throw tool_failure(what + ": no answer in time");
}

// One connection to the server, opened by connect(). Lifecycle: owned by
// the function that opened it, closed when destroyed (also when its
// coroutine is cancelled). One coroutine at a time.
class session {
 public:
  session(const pq::api& pq, PGconn* conn, target t)
      : pq_(pq), conn_(conn), target_(std::move(t)) {}
  ~session() {
    // A query still running (the job was cancelled or hit its limit) is
    // cancelled on the server too, which otherwise runs it to its end: the
    // cancel request is a connection of its own, sent from a thread of its
    // own so that a server that does not answer blocks no executor.
    if (busy_) {
      if (PGcancel* cancel = pq_.PQgetCancel(conn_)) {
        const pq::api* pq = &pq_;
        std::thread([pq, cancel] {
          char error[256];
          pq->PQcancel(cancel, error, sizeof error);
          pq->PQfreeCancel(cancel);
        }).detach();
      }
    }
    pq_.PQfinish(conn_);
  }
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  const target& where_to() const { return target_; }

  std::string ident(const std::string& name) const { return escape(name, true); }
  std::string literal(const std::string& value) const { return escape(value, false); }

  // Runs `sql` (several statements when `params` is empty: one implicit
  // transaction, as psql -c runs them) and answers the last result's rows.
  // A server error throws tool_failure "<fun>: <message>"; the statement is
  // never in it (it may hold a password).
  asio::awaitable<rows> exec(std::string sql) {
    return exec_with(std::move(sql), std::vector<std::string>());
  }
  // `sql` with $1... bound to `params` (one statement).
  asio::awaitable<rows> exec_with(std::string sql, std::vector<std::string> params) {
    std::vector<const char*> values;
    for (const auto& p : params) values.push_back(p.c_str());
    int sent = params.empty()
                   ? pq_.PQsendQuery(conn_, sql.c_str())
                   : pq_.PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(values.size()),
                                           nullptr, values.data(), nullptr, nullptr, 0);
    if (sent == 0) lost();
    busy_ = true;
    const auto forever = std::chrono::steady_clock::time_point::max();
    for (;;) {
      int f = pq_.PQflush(conn_);
      if (f < 0) lost();
      if (f == 0) break;
      co_await wait_socket(pq_.PQsocket(conn_), true, forever, target_.fun);
      if (pq_.PQconsumeInput(conn_) == 0) lost();
    }
    rows out;
    std::string error;
    for (;;) {
      while (pq_.PQisBusy(conn_) != 0) {
        co_await wait_socket(pq_.PQsocket(conn_), false, forever, target_.fun);
        if (pq_.PQconsumeInput(conn_) == 0) lost();
      }
      PGresult* r = pq_.PQgetResult(conn_);
      if (r == nullptr) break;
      ExecStatusType status = pq_.PQresultStatus(r);
      if (status == PGRES_TUPLES_OK) {
        out = rows{};
        int nf = pq_.PQnfields(r);
        for (int i = 0; i < nf; ++i) out.columns.emplace_back(pq_.PQfname(r, i));
        int nt = pq_.PQntuples(r);
        for (int row = 0; row < nt; ++row) {
          std::vector<std::string> line;
          std::vector<bool> nulls;
          for (int i = 0; i < nf; ++i) {
            bool null = pq_.PQgetisnull(r, row, i) != 0;
            nulls.push_back(null);
            line.emplace_back(
                null ? ""
                     : std::string(pq_.PQgetvalue(r, row, i),
                                   static_cast<std::size_t>(pq_.PQgetlength(r, row, i))));
          }
          out.values.push_back(std::move(line));
          out.nulls.push_back(std::move(nulls));
        }
      } else if (status != PGRES_COMMAND_OK && status != PGRES_EMPTY_QUERY && error.empty()) {
        const char* primary = pq_.PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
        error = primary ? primary : pq::clean_message(pq_.PQresultErrorMessage(r));
      }
      pq_.PQclear(r);
    }
    busy_ = false;
    if (!error.empty()) throw tool_failure(target_.fun + ": " + error);
    co_return out;
  }

 private:
  std::string escape(const std::string& s, bool identifier) const {
    char* e = identifier ? pq_.PQescapeIdentifier(conn_, s.c_str(), s.size())
                         : pq_.PQescapeLiteral(conn_, s.c_str(), s.size());
    if (e == nullptr) {
      throw tool_failure(target_.fun + ": cannot quote " +
                         (identifier ? "the name '" + s + "'" : std::string("a value")) + ": " +
                         pq::clean_message(pq_.PQerrorMessage(conn_)));
    }
    std::string out(e);
    pq_.PQfreemem(e);
    return out;
  }

  [[noreturn]] void lost() const {
    throw tool_failure(target_.fun + ": lost the connection to " + where(target_) + ": " +
                       pq::clean_message(pq_.PQerrorMessage(conn_)));
  }

  const pq::api& pq_;
  PGconn* conn_;
  target target_;
  bool busy_ = false;  // a query sent and its results not all read
};

// The schema functions' database (dbname) does not exist: for Salt, whose
// psql query then returns no rows, it has no schemas.
class missing_database : public tool_failure {
 public:
  using tool_failure::tool_failure;
};

asio::awaitable<std::unique_ptr<session>> connect(target t) {
  const pq::api& pq = pq::load(t.fun);
  std::vector<std::pair<std::string, std::string>> params = {
      {"dbname", t.dbname}, {"application_name", "brine"}, {"client_encoding", "UTF8"}};
  if (!t.host.empty()) params.emplace_back("host", t.host);
  if (!t.port.empty()) params.emplace_back("port", t.port);
  if (!t.user.empty()) params.emplace_back("user", t.user);
  if (t.password) params.emplace_back("password", *t.password);
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : params) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PGconn* conn = pq.PQconnectStartParams(keys.data(), values.data(), 0);
  if (conn == nullptr) throw tool_failure(t.fun + ": libpq is out of memory");
  auto s = std::make_unique<session>(pq, conn, t);
  auto fail = [&](const std::string& message) {
    return tool_failure(t.fun + ": cannot connect to " + where(t) + ": " + message + "; " +
                        connect_hint(message));
  };
  auto failed = [&]() {
    std::string message = pq::clean_message(pq.PQerrorMessage(conn));
    if (message == "database \"" + t.dbname + "\" does not exist") {
      throw missing_database(fail(message).what());
    }
    throw fail(message);
  };
  if (pq.PQstatus(conn) == CONNECTION_BAD) failed();
  const auto deadline = std::chrono::steady_clock::now() + k_connect_limit;
  PostgresPollingStatusType status = PGRES_POLLING_WRITING;
  for (;;) {
    if (status == PGRES_POLLING_OK) break;
    if (status == PGRES_POLLING_FAILED) failed();
    try {
      co_await wait_socket(pq.PQsocket(conn), status == PGRES_POLLING_WRITING, deadline, t.fun);
    } catch (const tool_failure&) {
      throw fail("no answer within " + std::to_string(k_connect_limit.count()) + " s");
    }
    status = pq.PQconnectPoll(conn);
  }
  if (pq.PQsetnonblocking(conn, 1) != 0) throw fail(pq::clean_message(pq.PQerrorMessage(conn)));
  co_return s;
}

// Salt's tri-state flags: None (not given), True, False.
std::optional<bool> tri(const arguments& a, const char* name) {
  const json* v = a.get(name);
  if (v == nullptr) return std::nullopt;
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_number()) return v->get<double>() != 0;
  a.fail(std::string(name) + " must be True or False, got " + v->dump());
}

std::string required_name(const arguments& a, const char* param, const std::string& usage) {
  std::optional<std::string> v = a.text(param);
  if (!v || v->empty()) a.fail("needs the " + std::string(param) + ": " + usage);
  return *v;
}

// --- queries the functions share ------------------------------------------

asio::awaitable<std::string> server_version(session& s) {
  rows r =
      co_await s.exec("SELECT setting FROM pg_catalog.pg_settings WHERE name = 'server_version'");
  co_return r.values.empty() ? std::string() : r.values[0][0];
}

asio::awaitable<ordered> db_list_of(session& s) {
  rows r = co_await s.exec(
      "SELECT datname as \"Name\", pga.rolname as \"Owner\", pg_encoding_to_char(encoding) as "
      "\"Encoding\", datcollate as \"Collate\", datctype as \"Ctype\", datacl as \"Access "
      "privileges\", spcname as \"Tablespace\" FROM pg_database pgd, pg_roles pga, pg_tablespace "
      "pgts WHERE pga.oid = pgd.datdba AND pgts.oid = pgd.dattablespace");
  ordered out = ordered::object();
  for (ordered row : r.objects()) {
    std::string name = row["Name"];
    row.erase("Name");
    out[name] = std::move(row);
  }
  co_return out;
}

// Salt's csv.reader over "{a,b}" with the braces stripped: the members.
json split_array(const std::string& text) {
  json out = json::array();
  std::string body = text;
  if (!body.empty() && body.front() == '{') body.erase(0, 1);
  if (!body.empty() && body.back() == '}') body.pop_back();
  if (body.empty()) return out;
  std::string cur;
  bool quoted = false;
  for (std::size_t i = 0; i < body.size(); ++i) {
    char ch = body[i];
    if (quoted) {
      if (ch == '\\' && i + 1 < body.size()) {
        cur += body[++i];
      } else if (ch == '"') {
        quoted = false;
      } else {
        cur += ch;
      }
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  out.push_back(cur);
  return out;
}

json bool_or_null(const std::string& v) {
  if (v == "t") return true;
  if (v == "f") return false;
  return nullptr;
}

// "YYYY-MM-DD HH:MM:SS" as Salt's strptime accepts it; null otherwise.
json timestamp_or_null(const std::string& v) {
  static const std::regex k_ts(R"(^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$)");
  if (std::regex_match(v, k_ts)) return v;
  return nullptr;
}

asio::awaitable<ordered> user_list_of(session& s, bool with_password) {
  std::string sql =
      "SELECT pg_roles.rolname as \"name\", pg_roles.rolsuper as \"superuser\", "
      "pg_roles.rolinherit as \"inherits privileges\", pg_roles.rolcreaterole as \"can create "
      "roles\", pg_roles.rolcreatedb as \"can create databases\", NULL as \"can update system "
      "catalogs\", pg_roles.rolcanlogin as \"can login\", pg_roles.rolreplication as "
      "\"replication\", pg_roles.rolconnlimit as \"connections\", (SELECT "
      "array_agg(pg_roles2.rolname) FROM pg_catalog.pg_auth_members JOIN pg_catalog.pg_roles "
      "pg_roles2 ON (pg_auth_members.roleid = pg_roles2.oid) WHERE pg_auth_members.member = "
      "pg_roles.oid) as \"groups\", pg_roles.rolvaliduntil::timestamp(0) as \"expiry time\", "
      "pg_roles.rolconfig as \"defaults variables\"";
  if (with_password) {
    sql += ", COALESCE(pg_shadow.passwd, pg_authid.rolpassword) as \"password\"";
  }
  sql += " FROM pg_roles";
  if (with_password) {
    sql +=
        " LEFT JOIN pg_authid ON pg_roles.oid = pg_authid.oid LEFT JOIN pg_shadow ON "
        "pg_roles.oid = pg_shadow.usesysid";
  }
  rows r = co_await s.exec(sql);
  ordered out = ordered::object();
  for (std::size_t i = 0; i < r.values.size(); ++i) {
    ordered row = ordered::object();
    // Salt's get_bool on each, the connection limit included (a number:
    // None).
    for (const char* key :
         {"superuser", "inherits privileges", "can create roles", "can create databases",
          "can update system catalogs", "can login", "replication", "connections"}) {
      row[key] = bool_or_null(r.at(i, key));
    }
    row["expiry time"] = timestamp_or_null(r.at(i, "expiry time"));
    row["defaults variables"] = r.at(i, "defaults variables");
    if (with_password) row["password"] = r.at(i, "password");
    row["groups"] = split_array(r.at(i, "groups"));
    out[r.at(i, "name")] = std::move(row);
  }
  co_return out;
}

asio::awaitable<ordered> role_of(session& s, std::string name, bool with_password) {
  ordered all = co_await user_list_of(s, with_password);
  auto it = all.find(name);
  co_return it == all.end() ? ordered(nullptr) : *it;
}

asio::awaitable<ordered> installed_of(session& s) {
  rows r = co_await s.exec(
      "select a.*, b.nspname as schema_name from pg_extension a,  pg_namespace b where "
      "a.extnamespace = b.oid;");
  ordered out = ordered::object();
  for (ordered row : r.objects()) {
    if (row.contains("extversion") && row.contains("extname")) {
      out[row["extname"].get<std::string>()] = row;
    }
  }
  co_return out;
}

asio::awaitable<ordered> available_of(session& s) {
  rows r = co_await s.exec("select * from pg_available_extensions();");
  ordered out = ordered::object();
  for (ordered row : r.objects()) {
    if (row.contains("default_version") && row.contains("name")) {
      out[row["name"].get<std::string>()] = row;
    }
  }
  co_return out;
}

// Salt's LooseVersion(a) < LooseVersion(b), for extension versions: runs
// of digits compare as numbers, other runs as text.
bool older_version(const std::string& a, const std::string& b) {
  auto parts = [](const std::string& v) {
    std::vector<std::variant<long long, std::string>> out;
    std::size_t i = 0;
    while (i < v.size()) {
      if (std::isdigit(static_cast<unsigned char>(v[i]))) {
        std::size_t j = i;
        while (j < v.size() && std::isdigit(static_cast<unsigned char>(v[j]))) ++j;
        out.emplace_back(std::stoll(v.substr(i, std::min<std::size_t>(j - i, 18))));
        i = j;
      } else if (std::isalpha(static_cast<unsigned char>(v[i]))) {
        std::size_t j = i;
        while (j < v.size() && std::isalpha(static_cast<unsigned char>(v[j]))) ++j;
        out.emplace_back(v.substr(i, j - i));
        i = j;
      } else {
        ++i;
      }
    }
    return out;
  };
  auto pa = parts(a);
  auto pb = parts(b);
  for (std::size_t i = 0; i < std::min(pa.size(), pb.size()); ++i) {
    if (pa[i].index() == pb[i].index()) {
      if (pa[i] != pb[i]) return pa[i] < pb[i];
    } else {
      // Python 3 cannot compare int and str; numbers first is the usual intent.
      return pa[i].index() == 0;
    }
  }
  return pa.size() < pb.size();
}

const char* k_not_installed = "EXTENSION NOT INSTALLED";
const char* k_installed = "EXTENSION INSTALLED";
const char* k_to_upgrade = "EXTENSION TO UPGRADE";
const char* k_to_move = "EXTENSION TO MOVE";

asio::awaitable<json> metadata_of(session& s, std::string name, std::optional<std::string> version,
                                  std::optional<std::string> schema) {
  ordered installed = co_await installed_of(s);
  json ret = json::array({k_not_installed});
  auto it = installed.find(name);
  if (it != installed.end()) {
    ret = json::array({k_installed});
    const ordered& ext = *it;
    if (version && older_version(ext.value("extversion", *version), *version)) {
      ret.push_back(k_to_upgrade);
    }
    if (schema && ext.value("extrelocatable", "f") == "t" &&
        ext.value("schema_name", *schema) != *schema) {
      ret.push_back(k_to_move);
    }
  }
  co_return ret;
}

bool has_flag(const json& meta, const char* flag) {
  return std::find(meta.begin(), meta.end(), json(flag)) != meta.end();
}

asio::awaitable<ordered> schema_list_of(session& s) {
  rows r = co_await s.exec(
      "SELECT pg_namespace.nspname as \"name\",pg_namespace.nspacl as \"acl\", "
      "pg_roles.rolname as \"owner\" FROM pg_namespace LEFT JOIN pg_roles ON pg_roles.oid = "
      "pg_namespace.nspowner");
  ordered out = ordered::object();
  for (std::size_t i = 0; i < r.values.size(); ++i) {
    out[r.at(i, "name")] = ordered{{"owner", r.at(i, "owner")}, {"acl", r.at(i, "acl")}};
  }
  co_return out;
}

// The schemas of the target's database; none when that database does not
// exist (Salt's psql query answers no rows then).
asio::awaitable<ordered> schemas_in(target t) {
  std::unique_ptr<session> s;
  try {
    s = co_await connect(t);
  } catch (const missing_database&) {
    co_return ordered::object();
  }
  ordered all = co_await schema_list_of(*s);
  co_return all;
}

outcome ordered_outcome(ordered v) {
  outcome o{json(v)};
  o.ordered_ret = std::make_shared<const ordered>(std::move(v));
  return o;
}

// --- the functions ----------------------------------------------------------

asio::awaitable<outcome> version_fn(call c) {
  arguments a("postgres.version", c, params_with({}, k_usual));
  target t = connection(a, c, k_usual);
  std::unique_ptr<session> s = co_await connect(t);
  std::string v = co_await server_version(*s);
  co_return outcome{v};
}

asio::awaitable<outcome> psql_query_fn(call c) {
  arguments a(
      "postgres.psql_query", c,
      params_with({"query", "user", "host", "port", "maintenance_db", "password", "runas", "write"},
                  k_usual));
  std::string query = required_name(a, "query", "postgres.psql_query 'SELECT 1 AS one'");
  // Salt wraps the query in COPY (...) TO STDOUT: one statement, its
  // trailing semicolons dropped.
  query = trim(query);
  while (!query.empty() && query.back() == ';') query = trim(query.substr(0, query.size() - 1));
  target t = connection(a, c, k_usual);
  // write=True: Salt's READ WRITE transaction around it.
  if (a.flag("write", false)) {
    query = "START TRANSACTION READ WRITE; " + query + "; COMMIT TRANSACTION;";
  }
  std::unique_ptr<session> s = co_await connect(t);
  rows r = co_await s->exec(query);
  co_return ordered_outcome(r.objects());
}

asio::awaitable<outcome> db_list_fn(call c) {
  arguments a("postgres.db_list", c, params_with({}, k_usual));
  std::unique_ptr<session> s = co_await connect(connection(a, c, k_usual));
  ordered dbs = co_await db_list_of(*s);
  co_return ordered_outcome(std::move(dbs));
}

asio::awaitable<outcome> db_exists_fn(call c) {
  arguments a("postgres.db_exists", c, params_with({"name"}, k_usual));
  std::string name = required_name(a, "name", "postgres.db_exists NAME");
  std::unique_ptr<session> s = co_await connect(connection(a, c, k_usual));
  ordered dbs = co_await db_list_of(*s);
  co_return outcome{dbs.contains(name)};
}

asio::awaitable<outcome> db_create_fn(call c) {
  arguments a(
      "postgres.db_create", c,
      params_with({"name", "user", "host", "port", "maintenance_db", "password", "tablespace",
                   "encoding", "lc_collate", "lc_ctype", "owner", "template", "runas"},
                  k_usual));
  std::string name = required_name(a, "name", "postgres.db_create NAME [owner=ROLE] ...");
  std::unique_ptr<session> s = co_await connect(connection(a, c, k_usual));
  std::string sql = "CREATE DATABASE " + s->ident(name);
  std::string with;
  auto add = [&](const char* key, const char* param, bool identifier) {
    if (auto v = a.text(param); v && !v->empty()) {
      with += std::string(" ") + key + " = " + (identifier ? s->ident(*v) : s->literal(*v));
    }
  };
  add("TABLESPACE", "tablespace", true);
  add("OWNER", "owner", true);
  add("TEMPLATE", "template", true);
  add("ENCODING", "encoding", false);
  add("LC_COLLATE", "lc_collate", false);
  add("LC_CTYPE", "lc_ctype", false);
  if (!with.empty()) sql += " WITH" + with;
  co_await s->exec(sql);
  co_return outcome{true};
}

// Salt's owner_to: the database and everything in it (schemas, tables,
// views, sequences, functions) owned by `owner`, in one transaction, run
// in the database itself.
asio::awaitable<void> owner_to(target t, std::string dbname, std::string owner) {
  t.dbname = dbname;
  std::unique_ptr<session> s = co_await connect(t);
  const std::string to = s->ident(owner);
  std::string sql = "BEGIN; ALTER DATABASE " + s->ident(dbname) + " OWNER TO " + to + ";";
  struct kind {
    const char* alter;
    const char* query;
  };
  static const kind k_kinds[] = {
      {"SCHEMA",
       "SELECT quote_ident(nspname) FROM pg_catalog.pg_namespace WHERE nspname NOT LIKE 'pg\\_%' "
       "AND nspname <> 'information_schema'"},
      {"TABLE",
       "SELECT quote_ident(table_schema)||'.'||quote_ident(table_name) FROM "
       "information_schema.tables WHERE table_schema NOT IN ('pg_catalog', "
       "'information_schema')"},
      {"FUNCTION",
       "SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace "
       "ns ON p.pronamespace = ns.oid WHERE ns.nspname NOT IN ('pg_catalog', "
       "'information_schema') AND p.prokind = 'f'"},
      {"AGGREGATE",
       "SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace "
       "ns ON p.pronamespace = ns.oid WHERE ns.nspname NOT IN ('pg_catalog', "
       "'information_schema') AND p.prokind = 'a'"},
      // Not those of identity or serial columns: they follow their table.
      {"SEQUENCE",
       "SELECT quote_ident(n.nspname)||'.'||quote_ident(c.relname) FROM pg_catalog.pg_class c "
       "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'S' AND "
       "n.nspname NOT IN ('pg_catalog', 'information_schema') AND NOT EXISTS (SELECT 1 FROM "
       "pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.objid = "
       "c.oid AND d.deptype IN ('a', 'i'))"},
  };
  for (const kind& k : k_kinds) {
    rows r = co_await s->exec(k.query);
    for (const auto& row : r.values) {
      sql += std::string(" ALTER ") + k.alter + " " + row[0] + " OWNER TO " + to + ";";
    }
  }
  sql += " COMMIT;";
  co_await s->exec(sql);
}

asio::awaitable<outcome> db_alter_fn(call c) {
  arguments a("postgres.db_alter", c,
              params_with({"name", "user", "host", "port", "maintenance_db", "password",
                           "tablespace", "owner", "owner_recurse", "runas"},
                          k_usual));
  std::string name = required_name(a, "name", "postgres.db_alter NAME [owner=ROLE] ...");
  std::optional<std::string> tablespace = a.text("tablespace");
  std::optional<std::string> owner = a.text("owner");
  if (tablespace && tablespace->empty()) tablespace.reset();
  if (owner && owner->empty()) owner.reset();
  const bool recurse = a.flag("owner_recurse", false);
  if (!tablespace && !owner) co_return outcome{true};
  target t = connection(a, c, k_usual);
  if (owner && recurse) {
    // As Salt: with owner_recurse the tablespace is left alone.
    co_await owner_to(t, name, *owner);
    co_return outcome{true};
  }
  std::unique_ptr<session> s = co_await connect(t);
  if (owner) {
    std::string sql = "ALTER DATABASE " + s->ident(name) + " OWNER TO " + s->ident(*owner);
    co_await s->exec(std::move(sql));
  }
  if (tablespace) {
    std::string sql =
        "ALTER DATABASE " + s->ident(name) + " SET TABLESPACE " + s->ident(*tablespace);
    co_await s->exec(std::move(sql));
  }
  co_return outcome{true};
}

asio::awaitable<outcome> db_remove_fn(call c) {
  arguments a("postgres.db_remove", c, params_with({"name"}, k_usual));
  std::string name = required_name(a, "name", "postgres.db_remove NAME");
  std::unique_ptr<session> s = co_await connect(connection(a, c, k_usual));
  std::string revoke = "REVOKE CONNECT ON DATABASE " + s->ident(name) + " FROM public";
  co_await s->exec(std::move(revoke));
  std::string terminate =
      "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid "
      "<> pg_backend_pid()";
  std::vector<std::string> params = {name};
  co_await s->exec_with(std::move(terminate), std::move(params));
  std::string drop = "DROP DATABASE " + s->ident(name);
  co_await s->exec(std::move(drop));
  co_return outcome{true};
}

asio::awaitable<outcome> user_list_fn(call c) {
  arguments a("postgres.user_list", c,
              params_with({"user", "host", "port", "maintenance_db", "password", "runas",
                           "return_password"},
                          k_usual));
  const bool with_password = a.flag("return_password", false);
  std::unique_ptr<session> s = co_await connect(connection(a, c, k_usual));
  ordered users = co_await user_list_of(*s, with_password);
  co_return ordered_outcome(std::move(users));
}

asio::awaitable<outcome> role_get_fn(call c) {
  arguments a("postgres.role_get", c,
              params_with({"name", "user", "host", "port", "maintenance_db", "password", "runas",
                           "return_password"},
                          k_usual));
  std::string name = required_name(a, "name", "postgres.role_get NAME");
  const bool with_password = a.flag("return_password", false);
  std::unique_ptr<session> s = co_await connect(connection(a, c, k_usual));
  ordered role = co_await role_of(*s, name, with_password);
  co_return ordered_outcome(std::move(role));
}

asio::awaitable<outcome> user_exists_fn(call c) {
  arguments a("postgres.user_exists", c, params_with({"name"}, k_usual));
  std::string name = required_name(a, "name", "postgres.user_exists NAME");
  std::unique_ptr<session> s = co_await connect(connection(a, c, k_usual));
  ordered role = co_await role_of(*s, name, false);
  co_return outcome{!role.is_null()};
}

// Salt's _role_cmd_args: the options of CREATE/ALTER ROLE, and the GRANTs
// of `groups` after them.
struct role_sql {
  std::string options;
  std::vector<std::string> grants;
};

role_sql role_options(const arguments& a, const session& s, const std::string& name, bool create,
                      const ordered& db_role) {
  std::optional<bool> inherit = tri(a, "inherit");
  std::optional<bool> login = tri(a, "login");
  if (create) {
    if (!inherit) inherit = true;
    if (!login) login = true;
  }
  json encrypted = a.get("encrypted") ? *a.get("encrypted") : json(postgres::k_default_encryption);
  std::optional<bool> superuser = tri(a, "superuser");
  std::string out;
  auto flag = [&](const char* word, std::optional<bool> v, const char* prefix = "NO") {
    if (v) out += std::string(" ") + (*v ? "" : prefix) + word;
  };
  flag("INHERIT", inherit);
  flag("CREATEDB", tri(a, "createdb"));
  flag("CREATEROLE", tri(a, "createroles"));
  const bool skip_superuser =
      !db_role.is_null() && superuser.value_or(false) == db_role.value("superuser", false);
  if (!skip_superuser) flag("SUPERUSER", superuser);
  flag("REPLICATION", tri(a, "replication"));
  flag("LOGIN", login);
  if (const json* limit = a.get("connlimit")) {
    if (!limit->is_number_integer())
      a.fail("connlimit must be a whole number, got " + limit->dump());
    out += " CONNECTION LIMIT " + std::to_string(limit->get<long long>());
  }
  if (const json* pw = a.get("rolepassword")) {
    if (pw->is_boolean()) {
      if (!pw->get<bool>()) out += " PASSWORD NULL";
    } else {
      std::string text = a.text_of("rolepassword", *pw);
      if (!text.empty()) {
        const bool plain = encrypted.is_boolean() && !encrypted.get<bool>();
        out += plain ? " UNENCRYPTED" : " ENCRYPTED";
        out += " PASSWORD " + s.literal(postgres::maybe_encrypt_password(name, text, encrypted));
      }
    }
  }
  if (const json* until = a.get("valid_until")) {
    std::string text = a.text_of("valid_until", *until);
    if (!text.empty()) out += " VALID UNTIL " + s.literal(text);
  }
  role_sql r{out, {}};
  if (const json* groups = a.get("groups")) {
    std::vector<std::string> list;
    if (groups->is_array()) {
      for (const auto& g : *groups) list.push_back(a.text_of("groups", g));
    } else {
      std::string text = a.text_of("groups", *groups);
      std::size_t start = 0;
      for (;;) {
        std::size_t comma = text.find(',', start);
        list.push_back(text.substr(start, comma - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    }
    for (const auto& g : list) {
      if (!g.empty()) r.grants.push_back("GRANT " + s.ident(g) + " TO " + s.ident(name));
    }
  }
  return r;
}

const std::vector<std::string> k_role_params = {
    "username",  "user",        "host",         "port",        "maintenance_db", "password",
    "createdb",  "createroles", "inherit",      "login",       "connlimit",      "encrypted",
    "superuser", "replication", "rolepassword", "valid_until", "groups",         "runas"};

asio::awaitable<outcome> user_create_fn(call c) {
  arguments a("postgres.user_create", c, params_with(k_role_params, k_usual));
  std::string name = required_name(a, "username", "postgres.user_create USERNAME [...]");
  std::unique_ptr<session> s = co_await connect(connection(a, c, k_usual));
  ordered existing = co_await role_of(*s, name, false);
  if (!existing.is_null()) co_return outcome{false};  // Salt: "User already exists"
  role_sql r = role_options(a, *s, name, true, ordered(nullptr));
  std::string sql =
      "CREATE ROLE " + s->ident(name) + (r.options.empty() ? "" : " WITH") + r.options;
  for (const auto& g : r.grants) sql += "; " + g;
  co_await s->exec(sql);
  co_return outcome{true};
}

asio::awaitable<outcome> user_update_fn(call c) {
  arguments a("postgres.user_update", c, params_with(k_role_params, k_usual));
  std::string name = required_name(a, "username", "postgres.user_update USERNAME [...]");
  std::unique_ptr<session> s = co_await connect(connection(a, c, k_usual));
  ordered role = co_await role_of(*s, name, false);
  if (role.is_null()) co_return outcome{false};  // Salt: "could not be found"
  role_sql r = role_options(a, *s, name, false, role);
  std::vector<std::string> statements;
  if (!r.options.empty())
    statements.push_back("ALTER ROLE " + s->ident(name) + " WITH" + r.options);
  statements.insert(statements.end(), r.grants.begin(), r.grants.end());
  std::string sql;
  for (const auto& st : statements) sql += (sql.empty() ? "" : "; ") + st;
  if (!sql.empty()) co_await s->exec(sql);
  co_return outcome{true};
}

asio::awaitable<outcome> user_remove_fn(call c) {
  arguments a("postgres.user_remove", c, params_with({"username"}, k_usual));
  std::string name = required_name(a, "username", "postgres.user_remove USERNAME");
  std::unique_ptr<session> s = co_await connect(connection(a, c, k_usual));
  ordered role = co_await role_of(*s, name, false);
  if (role.is_null()) co_return outcome{false};
  std::string drop = "DROP ROLE " + s->ident(name);
  co_await s->exec(std::move(drop));
  ordered after = co_await role_of(*s, name, false);
  co_return outcome{after.is_null()};
}

asio::awaitable<outcome> available_extensions_fn(call c) {
  arguments a("postgres.available_extensions", c, params_with({}, k_usual));
  std::unique_ptr<session> s = co_await connect(connection(a, c, k_usual));
  ordered exts = co_await available_of(*s);
  co_return ordered_outcome(std::move(exts));
}

asio::awaitable<outcome> installed_extensions_fn(call c) {
  arguments a("postgres.installed_extensions", c, params_with({}, k_usual));
  std::unique_ptr<session> s = co_await connect(connection(a, c, k_usual));
  ordered exts = co_await installed_of(*s);
  co_return ordered_outcome(std::move(exts));
}

asio::awaitable<outcome> get_available_extension_fn(call c) {
  arguments a("postgres.get_available_extension", c, params_with({"name"}, k_usual));
  std::string name = required_name(a, "name", "postgres.get_available_extension NAME");
  std::unique_ptr<session> s = co_await connect(connection(a, c, k_usual));
  ordered exts = co_await available_of(*s);
  auto it = exts.find(name);
  co_return ordered_outcome(it == exts.end() ? ordered(nullptr) : *it);
}

asio::awaitable<outcome> get_installed_extension_fn(call c) {
  arguments a("postgres.get_installed_extension", c, params_with({"name"}, k_usual));
  std::string name = required_name(a, "name", "postgres.get_installed_extension NAME");
  std::unique_ptr<session> s = co_await connect(connection(a, c, k_usual));
  ordered exts = co_await installed_of(*s);
  auto it = exts.find(name);
  co_return ordered_outcome(it == exts.end() ? ordered(nullptr) : *it);
}

asio::awaitable<outcome> is_available_extension_fn(call c) {
  arguments a("postgres.is_available_extension", c, params_with({"name"}, k_usual));
  std::string name = required_name(a, "name", "postgres.is_available_extension NAME");
  std::unique_ptr<session> s = co_await connect(connection(a, c, k_usual));
  ordered exts = co_await available_of(*s);
  auto lower = [](std::string v) {
    for (auto& ch : v) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return v;
  };
  bool found = false;
  for (const auto& [key, value] : exts.items()) found = found || lower(key) == lower(name);
  co_return outcome{found};
}

asio::awaitable<outcome> is_installed_extension_fn(call c) {
  arguments a("postgres.is_installed_extension", c, params_with({"name"}, k_usual));
  std::string name = required_name(a, "name", "postgres.is_installed_extension NAME");
  std::unique_ptr<session> s = co_await connect(connection(a, c, k_usual));
  ordered exts = co_await installed_of(*s);
  co_return outcome{exts.contains(name)};
}

asio::awaitable<outcome> create_metadata_fn(call c) {
  arguments a("postgres.create_metadata", c,
              params_with({"name", "ext_version", "schema"}, k_usual));
  std::string name = required_name(a, "name", "postgres.create_metadata NAME");
  std::unique_ptr<session> s = co_await connect(connection(a, c, k_usual));
  json meta = co_await metadata_of(*s, name, a.text("ext_version"), a.text("schema"));
  co_return outcome{meta};
}

asio::awaitable<outcome> create_extension_fn(call c) {
  arguments a(
      "postgres.create_extension", c,
      params_with({"name", "if_not_exists", "schema", "ext_version", "from_version"}, k_usual));
  std::string name = required_name(a, "name", "postgres.create_extension NAME");
  const bool if_not_exists = a.flag("if_not_exists", true);
  std::optional<std::string> schema = a.text("schema");
  std::optional<std::string> version = a.text("ext_version");
  std::optional<std::string> from = a.text("from_version");
  std::unique_ptr<session> s = co_await connect(connection(a, c, k_usual));
  json meta = co_await metadata_of(*s, name, version, schema);
  const bool installed = !has_flag(meta, k_not_installed);
  ordered available = co_await available_of(*s);
  bool installable = false;
  for (const auto& [key, value] : available.items()) {
    installable = installable || key == name;
  }
  if (installable) {
    std::string sql;
    if (!installed) {
      sql = std::string("CREATE EXTENSION ") + (if_not_exists ? "IF NOT EXISTS " : "") +
            s->ident(name);
      std::string with;
      if (schema && !schema->empty()) with += " SCHEMA " + s->ident(*schema);
      if (version && !version->empty()) with += " VERSION " + s->literal(*version);
      if (from && !from->empty()) with += " FROM " + s->literal(*from);
      if (!with.empty()) sql += " WITH" + with;
    } else {
      if (schema && has_flag(meta, k_to_move)) {
        sql += "ALTER EXTENSION " + s->ident(name) + " SET SCHEMA " + s->ident(*schema) + ";";
      }
      if (version && has_flag(meta, k_to_upgrade)) {
        sql += "ALTER EXTENSION " + s->ident(name) + " UPDATE TO " + s->literal(*version) + ";";
      }
    }
    if (!sql.empty()) co_await s->exec(sql);
  }
  json after = co_await metadata_of(*s, name, version, schema);
  bool ok = true;
  for (const char* flag : {k_not_installed, k_to_upgrade, k_to_move}) {
    if (has_flag(after, flag)) ok = false;
  }
  co_return outcome{ok};
}

asio::awaitable<outcome> drop_extension_fn(call c) {
  arguments a("postgres.drop_extension", c,
              params_with({"name", "if_exists", "restrict", "cascade"}, k_usual));
  std::string name = required_name(a, "name", "postgres.drop_extension NAME");
  const bool cascade = a.flag("cascade", true);
  const bool if_exists = a.flag("if_exists", false);
  const bool restrict = a.flag("restrict", false);
  std::unique_ptr<session> s = co_await connect(connection(a, c, k_usual));
  ordered before = co_await installed_of(*s);
  if (before.contains(name)) {
    std::string sql = std::string("DROP EXTENSION ") + (if_exists ? "IF EXISTS " : "") +
                      s->ident(name) + (cascade ? " CASCADE" : "") + (restrict ? " RESTRICT" : "");
    co_await s->exec(sql);
  }
  ordered after = co_await installed_of(*s);
  co_return outcome{!after.contains(name)};
}

asio::awaitable<outcome> schema_list_fn(call c) {
  arguments a("postgres.schema_list", c, params_with({"dbname"}, k_schema));
  required_name(a, "dbname", "postgres.schema_list DBNAME");
  ordered all = co_await schemas_in(connection(a, c, k_schema));
  co_return ordered_outcome(std::move(all));
}

asio::awaitable<outcome> schema_get_fn(call c) {
  arguments a("postgres.schema_get", c, params_with({"dbname", "name"}, k_schema));
  required_name(a, "dbname", "postgres.schema_get DBNAME NAME");
  std::string name = required_name(a, "name", "postgres.schema_get DBNAME NAME");
  ordered all = co_await schemas_in(connection(a, c, k_schema));
  auto it = all.find(name);
  co_return ordered_outcome(it == all.end() ? ordered(nullptr) : *it);
}

asio::awaitable<outcome> schema_exists_fn(call c) {
  arguments a("postgres.schema_exists", c, params_with({"dbname", "name"}, k_schema));
  required_name(a, "dbname", "postgres.schema_exists DBNAME NAME");
  std::string name = required_name(a, "name", "postgres.schema_exists DBNAME NAME");
  ordered all = co_await schemas_in(connection(a, c, k_schema));
  co_return outcome{all.contains(name)};
}

asio::awaitable<outcome> schema_create_fn(call c) {
  arguments a("postgres.schema_create", c, params_with({"dbname", "name", "owner"}, k_schema));
  required_name(a, "dbname", "postgres.schema_create DBNAME NAME [owner=ROLE]");
  std::string name = required_name(a, "name", "postgres.schema_create DBNAME NAME [owner=ROLE]");
  target t = connection(a, c, k_schema);
  ordered all = co_await schemas_in(t);
  if (all.contains(name)) co_return outcome{false};  // Salt: "already exists"
  std::unique_ptr<session> s = co_await connect(t);
  std::string sql = "CREATE SCHEMA " + s->ident(name);
  if (auto owner = a.text("owner")) sql += " AUTHORIZATION " + s->ident(*owner);
  co_await s->exec(sql);
  co_return outcome{true};
}

asio::awaitable<outcome> schema_remove_fn(call c) {
  arguments a("postgres.schema_remove", c, params_with({"dbname", "name"}, k_schema));
  required_name(a, "dbname", "postgres.schema_remove DBNAME NAME");
  std::string name = required_name(a, "name", "postgres.schema_remove DBNAME NAME");
  target t = connection(a, c, k_schema);
  ordered before = co_await schemas_in(t);
  if (!before.contains(name)) co_return outcome{false};
  std::unique_ptr<session> s = co_await connect(t);
  std::string drop = "DROP SCHEMA " + s->ident(name);
  co_await s->exec(std::move(drop));
  ordered after = co_await schema_list_of(*s);
  co_return outcome{!after.contains(name)};
}

}  // namespace
}  // namespace postgres_mod

void register_postgres_module(registry& reg) {
  using namespace postgres_mod;
  const std::string conn =
      " Connection: user, host, port, maintenance_db, password (else postgres.user, "
      "postgres.host, postgres.port, postgres.maintenance_db, postgres.pass from the minion "
      "config, grains or pillar; else the local socket as 'postgres').";
  const std::string schema_conn =
      " Connection: db_user, db_host, db_port, db_password in database DBNAME (else the "
      "postgres.* options).";
  auto add = [&](const char* name, function fn, std::string doc) {
    reg.add(name, std::move(fn), std::move(doc));
  };
  add("postgres.version", failures_as_outcomes<version_fn>,
      "postgres.version: returns the server's version (its server_version setting)." + conn +
          "\nCLI Example: brine cmd '*' postgres.version");
  add("postgres.psql_query", failures_as_outcomes<psql_query_fn>,
      "postgres.psql_query QUERY [write=False]: runs one statement, returns its rows as a list "
      "of {column: text} (NULL as '')." +
          conn +
          "\nCLI Example: brine cmd '*' postgres.psql_query 'SELECT datname FROM pg_database'");
  add("postgres.db_list", failures_as_outcomes<db_list_fn>,
      "postgres.db_list: returns {database: {Owner, Encoding, Collate, Ctype, Access privileges, "
      "Tablespace}}." +
          conn + "\nCLI Example: brine cmd '*' postgres.db_list");
  add("postgres.db_exists", failures_as_outcomes<db_exists_fn>,
      "postgres.db_exists NAME: returns whether the database exists." + conn +
          "\nCLI Example: brine cmd '*' postgres.db_exists dbname");
  add("postgres.db_create", failures_as_outcomes<db_create_fn>,
      "postgres.db_create NAME [tablespace] [encoding] [lc_collate] [lc_ctype] [owner] "
      "[template]: creates the database, returns True; fails with the server's message." +
          conn +
          "\nCLI Example: brine cmd '*' postgres.db_create dbname owner=app template=template0");
  add("postgres.db_alter", failures_as_outcomes<db_alter_fn>,
      "postgres.db_alter NAME [tablespace] [owner] [owner_recurse=False]: changes the database's "
      "owner (owner_recurse: of everything in it too) or tablespace, returns True." +
          conn + "\nCLI Example: brine cmd '*' postgres.db_alter dbname owner=app");
  add("postgres.db_remove", failures_as_outcomes<db_remove_fn>,
      "postgres.db_remove NAME: ends the database's sessions and drops it, returns True." + conn +
          "\nCLI Example: brine cmd '*' postgres.db_remove dbname");
  add("postgres.user_list", failures_as_outcomes<user_list_fn>,
      "postgres.user_list [return_password=False]: returns {role: {superuser, inherits "
      "privileges, can create roles, can create databases, can update system catalogs, can "
      "login, replication, connections, expiry time, defaults variables, [password], groups}}." +
          conn + "\nCLI Example: brine cmd '*' postgres.user_list");
  add("postgres.role_get", failures_as_outcomes<role_get_fn>,
      "postgres.role_get NAME [return_password=False]: returns the role as user_list shows it, "
      "or None." +
          conn + "\nCLI Example: brine cmd '*' postgres.role_get postgres");
  add("postgres.user_exists", failures_as_outcomes<user_exists_fn>,
      "postgres.user_exists NAME: returns whether the role exists." + conn +
          "\nCLI Example: brine cmd '*' postgres.user_exists app");
  add("postgres.user_create", failures_as_outcomes<user_create_fn>,
      "postgres.user_create USERNAME [createdb] [createroles] [inherit=True] [login=True] "
      "[connlimit] [encrypted=md5|scram-sha-256|True|False] [superuser] [replication] "
      "[rolepassword] [valid_until] [groups]: creates the role, returns True (False when it "
      "exists)." +
          conn +
          "\nCLI Example: brine cmd '*' postgres.user_create app rolepassword=secret "
          "encrypted=scram-sha-256");
  add("postgres.user_update", failures_as_outcomes<user_update_fn>,
      "postgres.user_update USERNAME [createdb] [createroles] [inherit] [login] [connlimit] "
      "[encrypted] [superuser] [replication] [rolepassword] [valid_until] [groups]: changes the "
      "given attributes and grants the groups, returns True (False when there is no such "
      "role)." +
          conn + "\nCLI Example: brine cmd '*' postgres.user_update app createdb=True");
  add("postgres.user_remove", failures_as_outcomes<user_remove_fn>,
      "postgres.user_remove USERNAME: drops the role, returns whether it is gone (False when "
      "there was none)." +
          conn + "\nCLI Example: brine cmd '*' postgres.user_remove app");
  add("postgres.available_extensions", failures_as_outcomes<available_extensions_fn>,
      "postgres.available_extensions: returns {name: {name, default_version, comment}}." + conn +
          "\nCLI Example: brine cmd '*' postgres.available_extensions");
  add("postgres.installed_extensions", failures_as_outcomes<installed_extensions_fn>,
      "postgres.installed_extensions: returns {extname: pg_extension's row and schema_name}." +
          conn + "\nCLI Example: brine cmd '*' postgres.installed_extensions");
  add("postgres.get_available_extension", failures_as_outcomes<get_available_extension_fn>,
      "postgres.get_available_extension NAME: returns the extension as available_extensions "
      "shows it, or None." +
          conn + "\nCLI Example: brine cmd '*' postgres.get_available_extension hstore");
  add("postgres.get_installed_extension", failures_as_outcomes<get_installed_extension_fn>,
      "postgres.get_installed_extension NAME: returns the extension as installed_extensions "
      "shows it, or None." +
          conn + "\nCLI Example: brine cmd '*' postgres.get_installed_extension plpgsql");
  add("postgres.is_available_extension", failures_as_outcomes<is_available_extension_fn>,
      "postgres.is_available_extension NAME: returns whether the extension can be installed." +
          conn + "\nCLI Example: brine cmd '*' postgres.is_available_extension hstore");
  add("postgres.is_installed_extension", failures_as_outcomes<is_installed_extension_fn>,
      "postgres.is_installed_extension NAME: returns whether the extension is installed." + conn +
          "\nCLI Example: brine cmd '*' postgres.is_installed_extension plpgsql");
  add("postgres.create_metadata", failures_as_outcomes<create_metadata_fn>,
      "postgres.create_metadata NAME [ext_version] [schema]: returns Salt's extension flags "
      "(EXTENSION NOT INSTALLED, EXTENSION INSTALLED, EXTENSION TO UPGRADE, EXTENSION TO "
      "MOVE)." +
          conn + "\nCLI Example: brine cmd '*' postgres.create_metadata hstore");
  add("postgres.create_extension", failures_as_outcomes<create_extension_fn>,
      "postgres.create_extension NAME [if_not_exists=True] [schema] [ext_version] "
      "[from_version]: installs, moves or upgrades the extension, returns whether it is then "
      "as asked." +
          conn + "\nCLI Example: brine cmd '*' postgres.create_extension hstore");
  add("postgres.drop_extension", failures_as_outcomes<drop_extension_fn>,
      "postgres.drop_extension NAME [if_exists=False] [restrict=False] [cascade=True]: drops "
      "the extension, returns whether it is gone." +
          conn + "\nCLI Example: brine cmd '*' postgres.drop_extension hstore");
  add("postgres.schema_list", failures_as_outcomes<schema_list_fn>,
      "postgres.schema_list DBNAME: returns {schema: {owner, acl}}." + schema_conn +
          "\nCLI Example: brine cmd '*' postgres.schema_list dbname");
  add("postgres.schema_get", failures_as_outcomes<schema_get_fn>,
      "postgres.schema_get DBNAME NAME: returns {owner, acl} of the schema, or None." +
          schema_conn + "\nCLI Example: brine cmd '*' postgres.schema_get dbname public");
  add("postgres.schema_exists", failures_as_outcomes<schema_exists_fn>,
      "postgres.schema_exists DBNAME NAME: returns whether the schema exists." + schema_conn +
          "\nCLI Example: brine cmd '*' postgres.schema_exists dbname app");
  add("postgres.schema_create", failures_as_outcomes<schema_create_fn>,
      "postgres.schema_create DBNAME NAME [owner]: creates the schema, returns True (False when "
      "it exists)." +
          schema_conn + "\nCLI Example: brine cmd '*' postgres.schema_create dbname app owner=app");
  add("postgres.schema_remove", failures_as_outcomes<schema_remove_fn>,
      "postgres.schema_remove DBNAME NAME: drops the schema, returns whether it is gone (False "
      "when there was none)." +
          schema_conn + "\nCLI Example: brine cmd '*' postgres.schema_remove dbname app");
}

}  // namespace brine::modules
