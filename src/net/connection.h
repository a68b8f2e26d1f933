#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>

#include "net/stream.h"
#include "proto/frame.h"

namespace brine::net {

using frame_ptr = std::shared_ptr<const std::vector<uint8_t>>;

// The completion of a detached coroutine: an exception that escapes it is
// logged instead of unwinding through io_context::run() and ending the daemon.
void log_exception(const char* what, std::exception_ptr e);
inline auto logged(const char* what) {
  return [what](std::exception_ptr e) { log_exception(what, e); };
}

inline frame_ptr make_frame(const proto::message& m) {
  return std::make_shared<const std::vector<uint8_t>>(proto::encode_frame(m));
}

// A framed, full-duplex connection: one reader coroutine that decodes frames
// and hands each message to the owner, and a writer coroutine that exists only
// while frames are queued (an idle connection holds no writer frame).
//
// Lifecycle: owned through shared_ptr; start() once; it lives while its
// reader runs or someone holds it. The close handler runs exactly once, with
// the reason. A malformed, oversized or unknown frame is answered with an
// error message and the connection is closed.
//
// Threading: all work runs on `executor` (a strand); send(), send_deferred(),
// flush() and close() may be called from any thread.
class connection : public std::enable_shared_from_this<connection> {
 public:
  using message_handler = std::function<void(proto::message&&)>;
  using close_handler = std::function<void(std::error_code, const std::string& detail)>;

  connection(asio::any_io_executor executor, std::unique_ptr<byte_stream> stream,
             proto::frame_decoder decoder);

  void start(message_handler on_message, close_handler on_close);
  void send(frame_ptr frame);
  void send(const proto::message& m) { send(make_frame(m)); }
  // Queues a frame that may wait: it goes out in the same write as the next
  // send(), or at the next flush(). For messages nobody waits on (a
  // return_ack), so that they share a TLS record and a TCP segment with the
  // next frame instead of costing both ends a write and a wakeup of their own.
  void send_deferred(frame_ptr frame);
  // Writes the deferred frames now, if any are still waiting.
  void flush();
  // Whether deferred frames wait (they may have gone out meanwhile).
  bool has_deferred() const { return has_deferred_.load(std::memory_order_relaxed); }
  // Sends what is queued, then closes.
  void close_after_flush();
  void close();

  // Something that lives exactly as long as this connection (the master's
  // descriptor slot, say).
  void attach(std::shared_ptr<void> thing) { attachment_ = std::move(thing); }

  const std::string& peer() const { return stream_->peer(); }
  const asio::any_io_executor& executor() const { return executor_; }
  bool closed() const { return closed_.load(std::memory_order_relaxed); }

 private:
  static asio::awaitable<void> reader(std::shared_ptr<connection> self);
  static asio::awaitable<void> writer(std::shared_ptr<connection> self);
  void drain();  // on the strand: writes what send() and send_deferred() queued
  void finish(std::error_code ec, const std::string& detail);
  void do_close();

  asio::any_io_executor executor_;
  std::unique_ptr<byte_stream> stream_;
  proto::frame_decoder decoder_;
  message_handler on_message_;
  close_handler on_close_;
  std::vector<frame_ptr> queue_;
  // Filled from any thread, emptied by drain() on the strand.
  std::mutex inbox_mu_;
  std::vector<frame_ptr> inbox_;
  std::vector<frame_ptr> deferred_;  // waiting for the next write
  bool drain_posted_ = false;
  std::atomic<bool> has_deferred_{false};
  size_t first_offset_ = 0;  // bytes of queue_[0] already written by try_write
  bool writing_ = false;
  bool close_when_flushed_ = false;
  std::atomic<bool> closed_{false};
  std::error_code close_ec_;
  std::string close_detail_;
  std::shared_ptr<void> attachment_;
};

}  // namespace brine::net
