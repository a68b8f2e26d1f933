#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <string>

// A small HTTP(S) client for what the master fetches (ext_pillar's
// http_json and http_yaml; later http sources of file states), through
// libcurl, loaded at run time (libcurl.so.4, dlopen) when first used, as
// the server loads libmicrohttpd: processes that fetch nothing never map it.
namespace brine::http {

struct get_options {
  // HTTP basic authentication when username is set. Never put in a message.
  std::string username;
  std::string password;
  std::map<std::string, std::string> headers;
  std::chrono::seconds timeout{60};
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

// `url` without a user:password@ part, for messages.
std::string redact_url(const std::string& url);

}  // namespace brine::http
