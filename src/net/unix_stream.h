#pragma once

#include <asio/local/stream_protocol.hpp>

#include "net/stream.h"

namespace brine::net {

// A plain Unix-domain stream for the local API (CLI ↔ master); trust comes
// from the socket file's mode and the peer's uid (SO_PEERCRED).
class unix_stream final : public byte_stream {
 public:
  explicit unix_stream(asio::local::stream_protocol::socket socket, std::string peer);

  asio::awaitable<std::error_code> read_into(proto::frame_decoder& decoder) override;
  asio::awaitable<std::error_code> write_all(std::span<const uint8_t> bytes) override;
  size_t try_write(std::span<const uint8_t> bytes, std::error_code& ec) override;
  void close() override;
  const std::string& peer() const override { return peer_; }
  const std::string& last_error() const override { return error_; }

  asio::local::stream_protocol::socket& socket() { return socket_; }

 private:
  asio::local::stream_protocol::socket socket_;
  std::string peer_;
  std::string error_;
};

// The uid of the process at the other end, or -1.
long peer_uid(asio::local::stream_protocol::socket& socket);

}  // namespace brine::net
