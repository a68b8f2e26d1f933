#pragma once

#include <libpq-fe.h>

#include <set>
#include <string>
#include <string_view>

// libpq, loaded at run time (dlopen) by the first user in the process: the
// PostgreSQL store and the postgres execution module share this one loader.
namespace brine::pq {

// libpq is loaded when first needed rather than linked: linking it makes
// every brine process (each CLI command, a master on SQLite) map libpq and
// its ~20 libraries (Kerberos, LDAP, GnuTLS) before main, 4 ms here against
// a 1 ms command, and Debian has no static libpq for BRINE_STATIC (its
// libpq.a needs Kerberos and LDAP, which exist only shared). Loaded
// RTLD_LOCAL, its OpenSSL stays apart from a static brine's.
// clang-format off
#define BRINE_LIBPQ_FUNCTIONS(X)                                                     \
  X(PQconnectdbParams) X(PQfinish) X(PQstatus) X(PQerrorMessage)                     \
  X(PQsetNoticeProcessor) X(PQtransactionStatus) X(PQsocket) X(PQconsumeInput)       \
  X(PQnotifies) X(PQfreemem) X(PQprepare) X(PQexecPrepared) X(PQexec)                \
  X(PQresultStatus) X(PQresultErrorField) X(PQresultErrorMessage) X(PQclear)         \
  X(PQntuples) X(PQgetvalue) X(PQgetlength) X(PQgetisnull) X(PQcmdTuples)            \
  X(PQconndefaults) X(PQconninfoFree) X(PQconninfoParse)                            \
  X(PQconnectStartParams) X(PQconnectPoll) X(PQsetnonblocking) X(PQsendQueryParams)  \
  X(PQsendQuery)                                                                     \
  X(PQflush) X(PQisBusy) X(PQgetResult) X(PQnfields) X(PQfname)                      \
  X(PQescapeIdentifier) X(PQescapeLiteral) X(PQserverVersion) X(PQparameterStatus)    \
  X(PQgetCancel) X(PQcancel) X(PQfreeCancel) X(PQexecParams) X(PQftype)
// clang-format on

// The functions brine calls, resolved from libpq.so.5. Immutable once
// loaded: safe to share between threads.
struct api {
#define BRINE_LIBPQ_MEMBER(f) decltype(&::f) f = nullptr;
  BRINE_LIBPQ_FUNCTIONS(BRINE_LIBPQ_MEMBER)
#undef BRINE_LIBPQ_MEMBER
  // The connection keywords this libpq knows (host, sslmode, ...).
  std::set<std::string> keywords;
};

// Loads libpq once per process (thread-safe). Throws base::error
// "<who>: cannot load libpq (...); install the libpq5 package" when it is
// not installed or too old.
const api& load(const std::string& who);

// The first line of `s`, without surrounding white space.
std::string first_line(std::string_view s);

// libpq's message, first line only, without what brine's own message
// already says ('connection to server at "h", port 5432 failed: ',
// "FATAL:  "); "no message from libpq" when empty.
std::string clean_message(const char* raw);

}  // namespace brine::pq
