#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <string>

// A small HTTP(S) client for what the master fetches (ext_pillar's
// http_json and http_yaml) and what a minion caches (http, https and ftp
// sources of file and archive states, cp.cache_file), through
// libcurl, loaded at run time (libcurl.so.4, dlopen) when first used, as
// the server loads libmicrohttpd: processes that fetch nothing never map it.
namespace brine::http {

struct get_options {
  // HTTP basic authentication when username is set. Never put in a message.
  std::string username;
  std::string password;
  std::map<std::string, std::string> headers;
  std::chrono::seconds timeout{60};
  // false: a server's TLS certificate is not checked (Salt's verify_ssl).
  bool verify_tls = true;
  // A body beyond this is an error, not an allocation.
  std::size_t max_body = std::size_t{64} << 20;
};

struct reply {
  long status = 0;
  std::string body;
};

// GET `url` (http or https; TLS verified against the system's CAs),
// following redirects. Throws base::error for what keeps the request from
// an answer, naming the URL without its credentials and libcurl's reason,
// or the package to install when libcurl is missing. Thread-safe.
reply get(const std::string& url, const get_options& o = {});

// What a transfer ended with: the status of the answer, or `error` when
// none came, in the words Python's socket module uses, as Salt reports
// them ("[Errno -2] Name or service not known", "[Errno 111] Connection
// refused"; else libcurl's reason).
struct transfer {
  long status = 0;
  std::string error;
};

// GET `url` (http, https or ftp; TLS verified; redirects followed) into the
// file `path`, created or truncated; the user's credentials in the URL are
// sent as basic authentication. An error status leaves what the server sent
// in `path`. Throws base::error only when libcurl is missing or `path`
// cannot be written. Thread-safe; blocks until done or `o.timeout`.
transfer download(const std::string& url, const std::string& path, const get_options& o = {});

// HEAD `url` (http or https; ftp: whether the file is there), as download.
transfer head(const std::string& url, const get_options& o = {});

// The reason phrase of an HTTP status as Python's http.client.responses
// has it ("Not Found"), "Unknown" for others (tornado's words).
std::string reason_phrase(long status);

// Loads and initializes libcurl now (throws as get does when it is
// missing). A thread pool that will fetch calls it before its threads
// start: at exit its threads then end before libcurl's and OpenSSL's
// cleanup, which frees what each thread holds.
void preload();

// `url` with its user:password@ part as <redacted>@, for messages (Salt's
// redact_http_basic_auth).
std::string redact_url(const std::string& url);

}  // namespace brine::http
