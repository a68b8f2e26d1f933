#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <system_error>

#include <asio/awaitable.hpp>

#include "proto/frame.h"

namespace brine::net {

// What a framed connection reads from and writes to: TLS over TCP for minions
// and peers, a plain Unix socket for the local API.
//
// Threading: used from one strand; read_into and write_all may be in flight
// at the same time (one reader, one writer).
class byte_stream {
 public:
  virtual ~byte_stream() = default;
  // Waits until bytes arrive and feeds them to `decoder`.
  virtual asio::awaitable<std::error_code> read_into(proto::frame_decoder& decoder) = 0;
  virtual asio::awaitable<std::error_code> write_all(std::span<const uint8_t> bytes) = 0;
  // Writes what the socket takes now without waiting; returns the byte count
  // (0 when it would block; the rest then goes through write_all with the
  // same bytes). Sets `ec` on failure.
  virtual size_t try_write(std::span<const uint8_t> bytes, std::error_code& ec) = 0;
  // Closes at once; operations in flight complete with an error.
  virtual void close() = 0;
  // "127.0.0.1:53412", for log lines.
  virtual const std::string& peer() const = 0;
  // What went wrong last, beyond the error code (OpenSSL's reason, say).
  virtual const std::string& last_error() const = 0;
};

}  // namespace brine::net
