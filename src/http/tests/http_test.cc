#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "base/error.h"
#include "http/client.h"
#include "http/server.h"

namespace brine::http {
namespace {

// One request over a new connection; the whole answer, head and body.
std::string fetch(uint16_t port, const std::string& request) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(::send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
    out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

handler answer_metrics(std::atomic<int>& calls) {
  return [&calls](const request& r) {
    ++calls;
    if (r.path != "/metrics") return response{404, "text/plain", "not found\n"};
    if (r.method != "GET" && r.method != "HEAD") {
      return response{405, "text/plain", "GET only\n", "GET, HEAD"};
    }
    return response{200, "text/plain; version=0.0.4", "brine_up 1\n"};
  };
}

TEST(HttpServer, AnswersGet) {
  std::atomic<int> calls{0};
  server s("127.0.0.1", 0, answer_metrics(calls), "fix it");
  ASSERT_NE(s.port(), 0);
  std::string got =
      fetch(s.port(), "GET /metrics?x=1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(got.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << got;
  EXPECT_NE(got.find("Content-Type: text/plain; version=0.0.4\r\n"), std::string::npos) << got;
  EXPECT_EQ(got.substr(got.size() - 11), "brine_up 1\n");
  EXPECT_EQ(calls, 1);
}

TEST(HttpServer, AnswersOtherPathsAndMethods) {
  std::atomic<int> calls{0};
  server s("127.0.0.1", 0, answer_metrics(calls), "fix it");
  std::string nf = fetch(s.port(), "GET /nope HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(nf.rfind("HTTP/1.1 404", 0), 0u) << nf;
  std::string post =
      fetch(s.port(),
            "POST /metrics HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(post.rfind("HTTP/1.1 405", 0), 0u) << post;
  EXPECT_NE(post.find("Allow: GET, HEAD\r\n"), std::string::npos) << post;
  std::string head =
      fetch(s.port(), "HEAD /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
  EXPECT_EQ(head.find("brine_up"), std::string::npos) << head;
}

TEST(HttpServer, PortInUseNamesTheFix) {
  std::atomic<int> calls{0};
  server first("127.0.0.1", 0, answer_metrics(calls), "fix it");
  try {
    server second("127.0.0.1", first.port(), answer_metrics(calls),
                  "set metrics_port in master.conf to a free port");
    FAIL() << "a second server on the same port started";
  } catch (const base::error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("cannot listen on 127.0.0.1:" + std::to_string(first.port())),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("Address already in use"), std::string::npos) << m;
    EXPECT_NE(m.find("set metrics_port in master.conf"), std::string::npos) << m;
  }
}

TEST(HttpServer, RefusesWhatIsNotAnAddress) {
  std::atomic<int> calls{0};
  EXPECT_THROW(server("localhost", 0, answer_metrics(calls), "fix"), base::error);
}

TEST(HttpServer, ServesIpv6Loopback) {
  int probe = ::socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  bool have_v6 = probe >= 0 && ::bind(probe, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  if (probe >= 0) ::close(probe);
  if (!have_v6) GTEST_SKIP() << "no IPv6 loopback here";
  std::atomic<int> calls{0};
  server s("::1", 0, answer_metrics(calls), "fix");
  EXPECT_NE(s.port(), 0);
}

// A port on loopback nothing listens on: bound, then closed.
uint16_t unused_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

handler answer_files() {
  return [](const request& r) {
    if (r.path == "/pkg.tar.gz") return response{200, "application/octet-stream", "archive bytes\n"};
    return response{404, "text/plain", "not here\n"};
  };
}

TEST(HttpClient, DownloadsToAFile) {
  server s("127.0.0.1", 0, answer_files(), "fix");
  std::string path = ::testing::TempDir() + "brine_http_download";
  transfer t = download("http://127.0.0.1:" + std::to_string(s.port()) + "/pkg.tar.gz", path);
  EXPECT_EQ(t.error, "");
  EXPECT_EQ(t.status, 200);
  EXPECT_EQ(slurp(path), "archive bytes\n");
  std::filesystem::remove(path);
}

TEST(HttpClient, AnErrorStatusIsAStatusNotAnError) {
  server s("127.0.0.1", 0, answer_files(), "fix");
  std::string base = "http://127.0.0.1:" + std::to_string(s.port());
  std::string path = ::testing::TempDir() + "brine_http_missing";
  transfer t = download(base + "/missing", path);
  EXPECT_EQ(t.error, "");
  EXPECT_EQ(t.status, 404);
  EXPECT_EQ(reason_phrase(t.status), "Not Found");
  std::filesystem::remove(path);
  transfer h = head(base + "/pkg.tar.gz");
  EXPECT_EQ(h.error, "");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(head(base + "/missing").status, 404);
}

TEST(HttpClient, NamesARefusedConnectionAsPythonDoes) {
  std::string path = ::testing::TempDir() + "brine_http_refused";
  transfer t = download("http://127.0.0.1:" + std::to_string(unused_port()) + "/x", path);
  EXPECT_EQ(t.status, 0);
  EXPECT_EQ(t.error, "[Errno 111] Connection refused");
  std::filesystem::remove(path);
}

TEST(HttpClient, ReasonPhrasesArePythons) {
  EXPECT_EQ(reason_phrase(200), "OK");
  EXPECT_EQ(reason_phrase(403), "Forbidden");
  EXPECT_EQ(reason_phrase(500), "Internal Server Error");
  EXPECT_EQ(reason_phrase(599), "Unknown");
  EXPECT_EQ(redact_url("https://u:secret@example.org/a"), "https://<redacted>@example.org/a");
}

}  // namespace
}  // namespace brine::http
