#include "http/client.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>

#include "base/error.h"

namespace brine::http {

namespace client_impl {
namespace {

// clang-format off
#define BRINE_CURL_FUNCTIONS(X)                                                      \
  X(curl_global_init) X(curl_easy_init) X(curl_easy_setopt) X(curl_easy_perform)     \
  X(curl_easy_getinfo) X(curl_easy_cleanup) X(curl_easy_strerror)                    \
  X(curl_slist_append) X(curl_slist_free_all)
// clang-format on

struct curl_api {
#define BRINE_CURL_MEMBER(f) decltype(&::f) f = nullptr;
  BRINE_CURL_FUNCTIONS(BRINE_CURL_MEMBER)
#undef BRINE_CURL_MEMBER
};

// Loads libcurl once per process and initialises it (thread-safe); throws
// base::error naming the package when it is missing.
const curl_api& load_curl() {
  struct loaded {
    curl_api functions;
    std::string error;
  };
  static const loaded lib = [] {
    loaded l;
    void* handle = ::dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* e = ::dlerror();
      l.error = e ? e : "libcurl.so.4: cannot load";
      return l;
    }
#define BRINE_CURL_RESOLVE(f)                                            \
  l.functions.f = reinterpret_cast<decltype(&::f)>(::dlsym(handle, #f)); \
  if (l.functions.f == nullptr && l.error.empty()) {                     \
    l.error = "libcurl.so.4 has no " #f;                                 \
  }
    BRINE_CURL_FUNCTIONS(BRINE_CURL_RESOLVE)
#undef BRINE_CURL_RESOLVE
    if (l.error.empty() && l.functions.curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
      l.error = "curl_global_init failed";
    }
    return l;
  }();
  if (!lib.error.empty()) {
    throw base::error("cannot load libcurl (" + lib.error + "); install the libcurl4 package");
  }
  return lib.functions;
}

struct sink {
  std::string body;
  std::size_t limit = 0;
  bool over = false;
};

size_t write_body(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<sink*>(user);
  size_t bytes = size * n;
  if (s->body.size() + bytes > s->limit) {
    s->over = true;
    return 0;  // libcurl stops with CURLE_WRITE_ERROR
  }
  s->body.append(data, bytes);
  return bytes;
}

}  // namespace
}  // namespace client_impl

void preload() { client_impl::load_curl(); }

std::string redact_url(const std::string& url) {
  auto scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  auto host = scheme + 3;
  auto end = url.find_first_of("/?#", host);
  auto at = url.rfind('@', end == std::string::npos ? url.size() : end);
  if (at == std::string::npos || at < host) return url;
  return url.substr(0, host) + "<redacted>@" + url.substr(at + 1);
}

namespace client_impl {
namespace {

struct easy_handle {
  const curl_api& c;
  std::unique_ptr<CURL, decltype(&::curl_easy_cleanup)> h;
  struct slist_free {
    decltype(&::curl_slist_free_all) fn;
    void operator()(curl_slist* l) const { fn(l); }
  };
  std::unique_ptr<curl_slist, slist_free> headers;

  easy_handle(const curl_api& api, const std::string& url, const get_options& o,
              const char* protocols)
      : c(api), h(api.curl_easy_init(), api.curl_easy_cleanup),
        headers(nullptr, slist_free{api.curl_slist_free_all}) {
    if (!h) throw base::error("GET " + redact_url(url) + ": curl_easy_init failed");
    for (const auto& [name, value] : o.headers) {
      std::string line = name + ": " + value;
      headers.reset(c.curl_slist_append(headers.release(), line.c_str()));
    }
    CURL* e = h.get();
    c.curl_easy_setopt(e, CURLOPT_URL, url.c_str());
    c.curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, protocols);
    c.curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    c.curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    c.curl_easy_setopt(e, CURLOPT_MAXREDIRS, 10L);
    c.curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    c.curl_easy_setopt(e, CURLOPT_TIMEOUT, static_cast<long>(o.timeout.count()));
    c.curl_easy_setopt(e, CURLOPT_USERAGENT, "brine");
    if (headers) c.curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers.get());
    if (!o.verify_tls) {
      c.curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
      c.curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (!o.username.empty()) {
      c.curl_easy_setopt(e, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BASIC));
      c.curl_easy_setopt(e, CURLOPT_USERNAME, o.username.c_str());
      c.curl_easy_setopt(e, CURLOPT_PASSWORD, o.password.c_str());
    }
  }
  CURL* get() const { return h.get(); }
};

// The host of `url` (no user, port or brackets), for the resolver's answer.
std::string host_of(const std::string& url) {
  auto scheme = url.find("://");
  std::string rest = scheme == std::string::npos ? url : url.substr(scheme + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (auto at = rest.rfind('@'); at != std::string::npos) rest = rest.substr(at + 1);
  if (rest.starts_with("[")) return rest.substr(1, rest.find(']') - 1);
  return rest.substr(0, rest.find(':'));
}

// Why a transfer got no answer, as Python's socket errors read.
std::string failure_of(const curl_api& c, CURL* e, CURLcode rc, const std::string& url) {
  if (rc == CURLE_COULDNT_RESOLVE_HOST) {
    struct addrinfo hints {};
    hints.ai_socktype = SOCK_STREAM;
    struct addrinfo* res = nullptr;
    int code = ::getaddrinfo(host_of(url).c_str(), nullptr, &hints, &res);
    if (res != nullptr) ::freeaddrinfo(res);
    if (code != 0) return "[Errno " + std::to_string(code) + "] " + ::gai_strerror(code);
  }
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    double connected = 0;
    c.curl_easy_getinfo(e, CURLINFO_CONNECT_TIME, &connected);
    return connected > 0 ? "HTTP 599: Timeout during request" : "HTTP 599: Timeout while connecting";
  }
  long os_errno = 0;
  c.curl_easy_getinfo(e, CURLINFO_OS_ERRNO, &os_errno);
  if (rc == CURLE_COULDNT_CONNECT && os_errno != 0) {
    return "[Errno " + std::to_string(os_errno) + "] " + std::strerror(static_cast<int>(os_errno));
  }
  return c.curl_easy_strerror(rc);
}

size_t write_file(char* data, size_t size, size_t n, void* user) {
  return std::fwrite(data, size, n, static_cast<std::FILE*>(user)) * size;
}

}  // namespace
}  // namespace client_impl

reply get(const std::string& url, const get_options& o) {
  using namespace client_impl;
  const curl_api& c = load_curl();
  easy_handle h(c, url, o, "http,https");
  sink s;
  s.limit = o.max_body;
  CURL* e = h.get();
  c.curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &write_body);
  c.curl_easy_setopt(e, CURLOPT_WRITEDATA, &s);
  CURLcode rc = c.curl_easy_perform(e);
  if (s.over) {
    throw base::error("GET " + redact_url(url) + ": the body is larger than " +
                      std::to_string(o.max_body) + " bytes");
  }
  if (rc != CURLE_OK) {
    throw base::error("GET " + redact_url(url) + ": " + c.curl_easy_strerror(rc));
  }
  reply r;
  c.curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r.status);
  r.body = std::move(s.body);
  return r;
}

transfer download(const std::string& url, const std::string& path, const get_options& o) {
  using namespace client_impl;
  const curl_api& c = load_curl();
  easy_handle h(c, url, o, "http,https,ftp");
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> out(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!out) throw base::error("cannot write " + path + ": " + std::strerror(errno));
  CURL* e = h.get();
  c.curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &write_file);
  c.curl_easy_setopt(e, CURLOPT_WRITEDATA, out.get());
  CURLcode rc = c.curl_easy_perform(e);
  bool flushed = std::fflush(out.get()) == 0;
  transfer t;
  if (rc == CURLE_WRITE_ERROR || !flushed) {
    throw base::error("cannot write " + path + ": " + std::strerror(errno));
  }
  if (rc != CURLE_OK) {
    t.error = failure_of(c, e, rc, url);
    return t;
  }
  c.curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &t.status);
  return t;
}

transfer head(const std::string& url, const get_options& o) {
  using namespace client_impl;
  const curl_api& c = load_curl();
  easy_handle h(c, url, o, "http,https,ftp");
  CURL* e = h.get();
  c.curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  CURLcode rc = c.curl_easy_perform(e);
  transfer t;
  if (rc != CURLE_OK) {
    t.error = failure_of(c, e, rc, url);
    return t;
  }
  c.curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &t.status);
  return t;
}

std::string reason_phrase(long status) {
  // Python's http.HTTPStatus phrases.
  static const std::map<long, const char*> k_phrases = {
      {100, "Continue"}, {101, "Switching Protocols"}, {200, "OK"}, {201, "Created"},
      {202, "Accepted"}, {203, "Non-Authoritative Information"}, {204, "No Content"},
      {205, "Reset Content"}, {206, "Partial Content"}, {300, "Multiple Choices"},
      {301, "Moved Permanently"}, {302, "Found"}, {303, "See Other"}, {304, "Not Modified"},
      {305, "Use Proxy"}, {307, "Temporary Redirect"}, {308, "Permanent Redirect"},
      {400, "Bad Request"}, {401, "Unauthorized"}, {402, "Payment Required"},
      {403, "Forbidden"}, {404, "Not Found"}, {405, "Method Not Allowed"},
      {406, "Not Acceptable"}, {407, "Proxy Authentication Required"},
      {408, "Request Timeout"}, {409, "Conflict"}, {410, "Gone"}, {411, "Length Required"},
      {412, "Precondition Failed"}, {413, "Request Entity Too Large"},
      {414, "Request-URI Too Long"}, {415, "Unsupported Media Type"},
      {416, "Requested Range Not Satisfiable"}, {417, "Expectation Failed"},
      {418, "I'm a Teapot"}, {421, "Misdirected Request"}, {422, "Unprocessable Entity"},
      {423, "Locked"}, {424, "Failed Dependency"}, {425, "Too Early"},
      {426, "Upgrade Required"}, {428, "Precondition Required"}, {429, "Too Many Requests"},
      {431, "Request Header Fields Too Large"}, {451, "Unavailable For Legal Reasons"},
      {500, "Internal Server Error"}, {501, "Not Implemented"}, {502, "Bad Gateway"},
      {503, "Service Unavailable"}, {504, "Gateway Timeout"},
      {505, "HTTP Version Not Supported"}, {506, "Variant Also Negotiates"},
      {507, "Insufficient Storage"}, {508, "Loop Detected"}, {510, "Not Extended"},
      {511, "Network Authentication Required"}};
  auto it = k_phrases.find(status);
  return it == k_phrases.end() ? "Unknown" : it->second;
}

}  // namespace brine::http
