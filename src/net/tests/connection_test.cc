#include "net/connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <asio/io_context.hpp>
#include <asio/local/connect_pair.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/strand.hpp>
#include <gtest/gtest.h>

#include "net/tls.h"
#include "net/unix_stream.h"

namespace brine::net {
namespace {

// One end a connection, the other a plain socket read without blocking, so
// the test sees exactly which bytes have been written so far.
class deferred : public ::testing::Test {
 protected:
  void SetUp() override {
    asio::local::stream_protocol::socket a(io_), b(io_);
    asio::local::connect_pair(a, b);
    peer_fd_ = b.release();
    conn_ = std::make_shared<connection>(
        asio::make_strand(io_), std::make_unique<unix_stream>(std::move(a), "test"),
        proto::frame_decoder(1 << 20));
    conn_->start([](proto::message&&) {}, [](std::error_code, const std::string&) {});
  }
  void TearDown() override {
    conn_->close();
    settle();
    ::close(peer_fd_);
  }

  // Runs every handler that is ready, until none is.
  void settle() {
    io_.restart();
    while (io_.poll() > 0) {
    }
  }

  // Everything written so far; "eof" once the connection closed its end.
  std::vector<uint8_t> written(bool* eof = nullptr) {
    std::vector<uint8_t> out;
    uint8_t buf[4096];
    for (;;) {
      ssize_t n = ::recv(peer_fd_, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        out.insert(out.end(), buf, buf + n);
        continue;
      }
      if (eof) *eof = n == 0;
      return out;
    }
  }

  static frame_ptr frame(uint64_t id) { return make_frame({proto::msg_type::pong, id, {}}); }
  static std::vector<uint8_t> bytes(std::initializer_list<uint64_t> ids) {
    std::vector<uint8_t> out;
    for (uint64_t id : ids) {
      auto f = frame(id);
      out.insert(out.end(), f->begin(), f->end());
    }
    return out;
  }

  asio::io_context io_;
  int peer_fd_ = -1;
  std::shared_ptr<connection> conn_;
};

TEST_F(deferred, waits_for_the_next_frame_and_goes_first) {
  conn_->send_deferred(frame(1));
  settle();
  EXPECT_TRUE(written().empty());
  conn_->send(frame(2));
  settle();
  EXPECT_EQ(written(), bytes({1, 2}));
}

TEST_F(deferred, flush_sends_it_alone) {
  conn_->send_deferred(frame(1));
  conn_->send_deferred(frame(2));
  conn_->flush();
  settle();
  EXPECT_EQ(written(), bytes({1, 2}));
  conn_->flush();  // nothing waiting: nothing written
  settle();
  EXPECT_TRUE(written().empty());
}

TEST_F(deferred, close_after_flush_sends_it_before_closing) {
  conn_->send_deferred(frame(1));
  conn_->close_after_flush();
  settle();
  bool eof = false;
  EXPECT_EQ(written(&eof), bytes({1}));
  EXPECT_TRUE(eof);
}

}  // namespace
}  // namespace brine::net

namespace brine::net {
namespace {

int int_option(int fd, int level, int name) {
  int v = -1;
  socklen_t len = sizeof v;
  ::getsockopt(fd, level, name, &v, &len);
  return v;
}

TEST(tune_socket, keepalive_and_user_timeout_follow_the_settings) {
  asio::io_context io;
  asio::ip::tcp::socket s(io);
  s.open(asio::ip::tcp::v4());
  tune_socket(s, keepalive{true, 60, 20, 3});
  int fd = static_cast<int>(s.native_handle());
  EXPECT_EQ(int_option(fd, SOL_SOCKET, SO_KEEPALIVE), 1);
  EXPECT_EQ(int_option(fd, IPPROTO_TCP, TCP_KEEPIDLE), 60);
  EXPECT_EQ(int_option(fd, IPPROTO_TCP, TCP_KEEPINTVL), 20);
  EXPECT_EQ(int_option(fd, IPPROTO_TCP, TCP_KEEPCNT), 3);
  // The user timeout is the keepalive bound, not something shorter.
  EXPECT_EQ(int_option(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), 120000);
  EXPECT_EQ(int_option(fd, IPPROTO_TCP, TCP_NODELAY), 1);
}

TEST(tune_socket, disabled_keepalive_sets_no_probes_and_no_user_timeout) {
  asio::io_context io;
  asio::ip::tcp::socket s(io);
  s.open(asio::ip::tcp::v4());
  tune_socket(s, keepalive{false, 60, 20, 3});
  int fd = static_cast<int>(s.native_handle());
  EXPECT_EQ(int_option(fd, SOL_SOCKET, SO_KEEPALIVE), 0);
  EXPECT_EQ(int_option(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), 0);
  EXPECT_EQ(int_option(fd, IPPROTO_TCP, TCP_NODELAY), 1);
}

}  // namespace
}  // namespace brine::net
