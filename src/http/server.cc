#include "http/server.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <utility>

#include "base/error.h"

namespace brine::http {

namespace {

// clang-format off
#define BRINE_MHD_FUNCTIONS(X)                                                       \
  X(MHD_start_daemon) X(MHD_stop_daemon) X(MHD_create_response_from_buffer)          \
  X(MHD_add_response_header) X(MHD_queue_response) X(MHD_destroy_response)
// clang-format on

struct api {
#define BRINE_MHD_MEMBER(f) decltype(&::f) f = nullptr;
  BRINE_MHD_FUNCTIONS(BRINE_MHD_MEMBER)
#undef BRINE_MHD_MEMBER
};

// Loads libmicrohttpd once per process (thread-safe); throws base::error
// naming the package when it is missing.
const api& load() {
  struct loaded {
    api functions;
    std::string error;
  };
  static const loaded lib = [] {
    loaded l;
    void* handle = ::dlopen("libmicrohttpd.so.12", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* e = ::dlerror();
      l.error = e ? e : "libmicrohttpd.so.12: cannot load";
      return l;
    }
#define BRINE_MHD_RESOLVE(f)                                             \
  l.functions.f = reinterpret_cast<decltype(&::f)>(::dlsym(handle, #f)); \
  if (l.functions.f == nullptr && l.error.empty()) {                     \
    l.error = "libmicrohttpd.so.12 has no " #f;                          \
  }
    BRINE_MHD_FUNCTIONS(BRINE_MHD_RESOLVE)
#undef BRINE_MHD_RESOLVE
    return l;
  }();
  if (!lib.error.empty()) {
    throw base::error("cannot load libmicrohttpd (" + lib.error +
                      "); install the libmicrohttpd12 package");
  }
  return lib.functions;
}

// An open socket, closed unless handed over.
struct socket_fd {
  int fd = -1;
  ~socket_fd() {
    if (fd >= 0) ::close(fd);
  }
  int release() { return std::exchange(fd, -1); }
};

void log_mhd(void*, const char* format, va_list ap) {
  char buf[512];
  std::vsnprintf(buf, sizeof buf, format, ap);
  std::string line(buf);
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  spdlog::debug("http: {}", line);
}

}  // namespace

struct server::impl {
  const api* mhd = nullptr;
  handler answer;
  MHD_Daemon* daemon = nullptr;

  static MHD_Result on_request(void* cls, MHD_Connection* connection, const char* url,
                               const char* method, const char*, const char*,
                               size_t* upload_data_size, void** state) {
    auto* self = static_cast<impl*>(cls);
    // A request with a body comes in several calls; brine answers from its
    // head, on the first, and the body is discarded.
    (void)state;
    (void)upload_data_size;
    std::string_view path(url ? url : "/");
    if (auto q = path.find('?'); q != std::string_view::npos) path = path.substr(0, q);
    response r;
    try {
      r = self->answer(request{method ? method : "", path});
    } catch (const std::exception& e) {
      spdlog::error("http: {} {}: {}", method ? method : "", path, e.what());
      r = response{500, "text/plain; charset=utf-8",
                   std::string("internal error: ") + e.what() + "\n"};
    }
    MHD_Response* resp = self->mhd->MHD_create_response_from_buffer(r.body.size(), r.body.data(),
                                                                    MHD_RESPMEM_MUST_COPY);
    if (resp == nullptr) return MHD_NO;
    self->mhd->MHD_add_response_header(resp, "Content-Type", r.content_type.c_str());
    if (!r.allow.empty()) self->mhd->MHD_add_response_header(resp, "Allow", r.allow.c_str());
    MHD_Result ok = self->mhd->MHD_queue_response(connection, r.status, resp);
    self->mhd->MHD_destroy_response(resp);
    return ok;
  }
};

server::server(const std::string& address, uint16_t port, handler h, const std::string& fix)
    : impl_(std::make_unique<impl>()) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (::inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    len = sizeof *v4;
  } else if (::inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    len = sizeof *v6;
  } else {
    throw base::error(address + " is not an IP address; " + fix);
  }
  const std::string where =
      (ss.ss_family == AF_INET6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
  // brine binds the socket itself, so that a port in use is reported with
  // its reason (libmicrohttpd would only fail to start).
  socket_fd s;
  s.fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (s.fd < 0 || ::setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      ::bind(s.fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(s.fd, 64) != 0) {
    throw base::error("cannot listen on " + where + ": " + std::strerror(errno) + "; " + fix);
  }
  if (::getsockname(s.fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
    port_ = ntohs(ss.ss_family == AF_INET6 ? v6->sin6_port : v4->sin_port);
  }
  impl_->mhd = &load();
  impl_->answer = std::move(h);
  // One thread of libmicrohttpd's own on epoll; a few concurrent scrapers
  // at most, each given 10 s of silence before it is dropped.
  impl_->daemon = impl_->mhd->MHD_start_daemon(
      MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, nullptr, nullptr, &impl::on_request,
      impl_.get(), MHD_OPTION_EXTERNAL_LOGGER, &log_mhd, nullptr, MHD_OPTION_LISTEN_SOCKET, s.fd,
      MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
  if (impl_->daemon == nullptr) {
    throw base::error("cannot serve HTTP on " + where + ": libmicrohttpd did not start; " + fix);
  }
  s.release();  // the daemon's now; MHD_stop_daemon closes it
}

server::~server() {
  if (impl_ && impl_->daemon) impl_->mhd->MHD_stop_daemon(impl_->daemon);
}

}  // namespace brine::http
