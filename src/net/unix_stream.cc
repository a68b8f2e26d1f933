#include "net/unix_stream.h"

#include <sys/socket.h>

#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

namespace brine::net {

unix_stream::unix_stream(asio::local::stream_protocol::socket socket, std::string peer)
    : socket_(std::move(socket)), peer_(std::move(peer)) {}

asio::awaitable<std::error_code> unix_stream::read_into(proto::frame_decoder& decoder) {
  uint8_t buf[8192];
  std::error_code ec;
  size_t n = co_await socket_.async_read_some(asio::buffer(buf),
                                              asio::redirect_error(asio::use_awaitable, ec));
  if (!ec) decoder.feed({buf, n});
  if (ec == asio::error::eof) error_ = "connection closed by peer";
  co_return ec;
}

asio::awaitable<std::error_code> unix_stream::write_all(std::span<const uint8_t> bytes) {
  std::error_code ec;
  co_await asio::async_write(socket_, asio::buffer(bytes.data(), bytes.size()),
                             asio::redirect_error(asio::use_awaitable, ec));
  co_return ec;
}

size_t unix_stream::try_write(std::span<const uint8_t> bytes, std::error_code& ec) {
  // Nothing is written here: the writer coroutine gathers what queues up
  // meanwhile (a job's returns streaming to a CLI) into one write.
  (void)bytes;
  (void)ec;
  return 0;
}

void unix_stream::close() {
  std::error_code ec;
  socket_.shutdown(asio::local::stream_protocol::socket::shutdown_both, ec);
  socket_.close(ec);
}

long peer_uid(asio::local::stream_protocol::socket& socket) {
  struct ucred cred {};
  socklen_t len = sizeof cred;
  if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
  return static_cast<long>(cred.uid);
}

}  // namespace brine::net
