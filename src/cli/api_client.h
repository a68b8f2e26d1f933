#pragma once

#include <chrono>
#include <deque>
#include <optional>
#include <string>

#include "proto/frame.h"

namespace brine::cli {

// A blocking client of the master's local API (Unix socket). The CLI is one
// short-lived request at a time, so plain poll(2) with deadlines serves better
// than an event loop: nothing to start, nothing to tear down.
class api_client {
 public:
  // Connects to `<sock_dir>/master.sock`; nullopt when no master listens there
  // (no socket file, or nobody accepting). Throws base::error when a master is
  // there but refuses us (permissions).
  static std::optional<api_client> connect(const std::string& sock_dir);

  api_client(api_client&& other) noexcept;
  api_client& operator=(api_client&&) = delete;
  ~api_client();

  // Sends a request and returns its api_reply body. Throws base::error.
  nlohmann::json request(const std::string& op, nlohmann::json body,
                         std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // The next message (for any request), waiting until `deadline`; nullopt
  // when it passed. Throws base::error when the master goes away.
  std::optional<proto::message> next(std::chrono::steady_clock::time_point deadline);

 private:
  api_client(int fd, std::string path);
  void send(const proto::message& m);
  // The next message from the socket (pending_ aside).
  std::optional<proto::message> read(std::chrono::steady_clock::time_point deadline);

  int fd_ = -1;
  std::string path_;
  uint64_t next_id_ = 1;
  uint64_t last_id_ = 0;
  proto::frame_decoder decoder_{64 * 1024 * 1024};
  std::deque<proto::message> pending_;  // arrived while request() waited
};

}  // namespace brine::cli
