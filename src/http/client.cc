#include "http/client.h"

#include <curl/curl.h>
#include <dlfcn.h>

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

std::string redact_url(const std::string& url) {
  auto scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  auto host = scheme + 3;
  auto end = url.find_first_of("/?#", host);
  auto at = url.rfind('@', end == std::string::npos ? url.size() : end);
  if (at == std::string::npos || at < host) return url;
  return url.substr(0, host) + "***@" + url.substr(at + 1);
}

reply get(const std::string& url, const get_options& o) {
  using namespace client_impl;
  const curl_api& c = load_curl();
  std::unique_ptr<CURL, decltype(c.curl_easy_cleanup)> h(c.curl_easy_init(), c.curl_easy_cleanup);
  if (!h) throw base::error("GET " + redact_url(url) + ": curl_easy_init failed");
  struct slist_free {
    decltype(c.curl_slist_free_all) fn;
    void operator()(curl_slist* l) const { fn(l); }
  };
  std::unique_ptr<curl_slist, slist_free> headers(nullptr, slist_free{c.curl_slist_free_all});
  for (const auto& [name, value] : o.headers) {
    std::string line = name + ": " + value;
    headers.reset(c.curl_slist_append(headers.release(), line.c_str()));
  }
  sink s;
  s.limit = o.max_body;
  CURL* e = h.get();
  c.curl_easy_setopt(e, CURLOPT_URL, url.c_str());
  c.curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  c.curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  c.curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
  c.curl_easy_setopt(e, CURLOPT_MAXREDIRS, 10L);
  c.curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  c.curl_easy_setopt(e, CURLOPT_TIMEOUT, static_cast<long>(o.timeout.count()));
  c.curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &write_body);
  c.curl_easy_setopt(e, CURLOPT_WRITEDATA, &s);
  c.curl_easy_setopt(e, CURLOPT_USERAGENT, "brine");
  if (headers) c.curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers.get());
  if (!o.username.empty()) {
    c.curl_easy_setopt(e, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BASIC));
    c.curl_easy_setopt(e, CURLOPT_USERNAME, o.username.c_str());
    c.curl_easy_setopt(e, CURLOPT_PASSWORD, o.password.c_str());
  }
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

}  // namespace brine::http
