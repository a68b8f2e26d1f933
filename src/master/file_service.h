#pragma once

#include <asio/thread_pool.hpp>
#include <memory>

#include "base/config.h"
#include "fileserver/roots.h"
#include "proto/message.h"

namespace brine::master {

struct session;

// The salt:// file server of the master (fileserver/roots.h over the
// master's file_roots): answers minions' file_request messages on their own
// connection. Walking the tree, hashing and reading happen on the service's
// own threads, never on the I/O thread that received the request.
//
// Threading: serve() is safe from any thread and returns at once.
class file_service {
 public:
  explicit file_service(const base::master_config& cfg);
  ~file_service();

  // Answers `request` (a file_request of the minion of `s`) with a
  // file_reply carrying the request's id.
  void serve(const std::shared_ptr<session>& s, proto::message request);

 private:
  fileserver::roots roots_;
  uint64_t max_reply_bytes_;
  asio::thread_pool pool_{2};  // last: joined first, while roots_ still lives
};

}  // namespace brine::master
