#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

// A small HTTP server for brine's daemons (the master's Prometheus
// endpoint; later its HTTP API), served by GNU libmicrohttpd: its own thread
// and epoll loop, connection limits and timeouts, HTTP parsing. libmicrohttpd
// is loaded at run time (libmicrohttpd.so.12, dlopen), when a server is
// first started: brine processes that serve no HTTP never map it, and a
// static brine stays static (Debian's libmicrohttpd.a needs GnuTLS, whose
// p11-kit and libunistring exist only shared).
namespace brine::http {

struct request {
  std::string_view method;  // GET, HEAD, ...
  std::string_view path;    // without the query string
};

struct response {
  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  // Sent as an Allow header when set (a 405's methods).
  std::string allow = {};
};

// Answers every request, on the server's thread: keep it short and never
// wait on brine's I/O threads.
using handler = std::function<response(const request&)>;

// Lifecycle: the constructor binds and starts serving (throws base::error
// naming the address, the reason and `fix`); the destructor stops the
// server's thread and closes every connection.
// Threading: `handler` runs on libmicrohttpd's one thread, one request at a
// time.
class server {
 public:
  // `address`: an IPv4 or IPv6 literal; `port` 0 takes a free one (tests).
  // `fix` ends an error message: what the user should change, naming the
  // option ("set metrics_port in /etc/brine/master to a free port").
  server(const std::string& address, uint16_t port, handler h, const std::string& fix);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  uint16_t port() const { return port_; }

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
  uint16_t port_ = 0;
};

}  // namespace brine::http
