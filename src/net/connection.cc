#include "net/connection.h"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/post.hpp>
#include <spdlog/spdlog.h>

namespace brine::net {

void log_exception(const char* what, std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    spdlog::error("{}: unexpected error: {}", what, x.what());
  }
}

connection::connection(asio::any_io_executor executor, std::unique_ptr<byte_stream> stream,
                       proto::frame_decoder decoder)
    : executor_(std::move(executor)), stream_(std::move(stream)), decoder_(std::move(decoder)) {}

void connection::start(message_handler on_message, close_handler on_close) {
  on_message_ = std::move(on_message);
  on_close_ = std::move(on_close);
  asio::co_spawn(executor_, reader(shared_from_this()), asio::detached);
}

asio::awaitable<void> connection::reader(std::shared_ptr<connection> self) {
  proto::message m;
  for (;;) {
    // Frames may already be buffered (the first read happened before start).
    for (;;) {
      auto st = self->decoder_.next(m);
      if (st == proto::frame_decoder::status::need_more) break;
      if (st == proto::frame_decoder::status::error) {
        std::string detail = self->decoder_.error_detail();
        self->send(proto::message{proto::msg_type::error, 0, {{"message", detail}}});
        self->finish(self->decoder_.error(), detail);
        self->close_after_flush();
        co_return;
      }
      if (self->closed()) co_return;
      // A handler throws on a body whose fields have the wrong types (json's
      // type_error): untrusted input, so the peer is told and cut off.
      auto type = m.type;
      try {
        self->on_message_(std::move(m));
      } catch (const std::exception& e) {
        std::string detail =
            "bad " + std::string(proto::to_string(type)) + " message: " + e.what();
        self->send(proto::message{proto::msg_type::error, 0, {{"message", detail}}});
        self->finish(base::errc::protocol_violation, detail);
        self->close_after_flush();
        co_return;
      }
      m = proto::message{};
    }
    if (self->closed()) co_return;
    std::error_code ec = co_await self->stream_->read_into(self->decoder_);
    if (ec) {
      self->finish(ec, self->stream_->last_error());
      self->do_close();
      co_return;
    }
  }
}

namespace {

// The frames' bytes, one after the other, into `out` (first `skip` bytes of
// the first frame left out): one buffer, so one TLS record and one write.
void join_frames(const std::vector<frame_ptr>& frames, size_t skip, std::vector<uint8_t>& out) {
  size_t size = 0;
  for (const auto& f : frames) size += f->size();
  out.clear();
  out.reserve(size - skip);
  out.insert(out.end(), frames.front()->begin() + static_cast<ptrdiff_t>(skip),
             frames.front()->end());
  for (size_t i = 1; i < frames.size(); ++i) {
    out.insert(out.end(), frames[i]->begin(), frames[i]->end());
  }
}

}  // namespace

void connection::send(frame_ptr frame) {
  bool post_drain = false;
  {
    std::lock_guard lock(inbox_mu_);
    inbox_.push_back(std::move(frame));
    post_drain = !std::exchange(drain_posted_, true);
  }
  // One handler per burst: frames sent while it is pending join it.
  if (post_drain) asio::post(executor_, [self = shared_from_this()] { self->drain(); });
}

void connection::send_deferred(frame_ptr frame) {
  // No handler at all: the frame waits for the next drain.
  std::lock_guard lock(inbox_mu_);
  deferred_.push_back(std::move(frame));
  has_deferred_.store(true, std::memory_order_relaxed);
}

void connection::flush() {
  if (!has_deferred()) return;
  {
    std::lock_guard lock(inbox_mu_);
    if (std::exchange(drain_posted_, true)) return;
  }
  asio::post(executor_, [self = shared_from_this()] { self->drain(); });
}

void connection::drain() {
  std::vector<frame_ptr> frames;
  {
    std::lock_guard lock(inbox_mu_);
    drain_posted_ = false;
    frames.swap(deferred_);  // deferred frames go first
    frames.insert(frames.end(), std::make_move_iterator(inbox_.begin()),
                  std::make_move_iterator(inbox_.end()));
    inbox_.clear();
    has_deferred_.store(false, std::memory_order_relaxed);
  }
  if (frames.empty() || closed()) return;
  if (writing_) {
    // A writer is running (backpressure): they join its queue.
    queue_.insert(queue_.end(), std::make_move_iterator(frames.begin()),
                  std::make_move_iterator(frames.end()));
    return;
  }
  frame_ptr frame;
  if (frames.size() == 1) {
    frame = std::move(frames.front());
  } else {
    auto joined = std::make_shared<std::vector<uint8_t>>();
    join_frames(frames, 0, *joined);
    frame = std::move(joined);
  }
  // Most frames fit the socket buffer at once: write them here and spare a
  // writer coroutine (a frame allocation) per frame.
  std::error_code ec;
  size_t n = stream_->try_write(*frame, ec);
  if (ec) {
    finish(ec, stream_->last_error());
    do_close();
    return;
  }
  if (n == frame->size()) {
    if (close_when_flushed_) do_close();
    return;
  }
  first_offset_ = n;
  queue_.push_back(std::move(frame));
  writing_ = true;
  asio::co_spawn(executor_, writer(shared_from_this()), asio::detached);
}

asio::awaitable<void> connection::writer(std::shared_ptr<connection> self) {
  // Each round writes everything queued so far as one buffer: a burst of
  // frames (events streaming to a CLI, frames held up by backpressure)
  // costs one write instead of one each.
  size_t offset = std::exchange(self->first_offset_, 0);
  std::vector<frame_ptr> batch;
  std::vector<uint8_t> joined;
  while (!self->queue_.empty() && !self->closed()) {
    batch.swap(self->queue_);
    std::span<const uint8_t> bytes;
    if (batch.size() == 1) {
      bytes = std::span<const uint8_t>(*batch.front()).subspan(offset);
    } else {
      join_frames(batch, offset, joined);
      bytes = joined;
    }
    offset = 0;
    std::error_code ec = co_await self->stream_->write_all(bytes);
    batch.clear();
    if (ec) {
      self->finish(ec, self->stream_->last_error());
      self->do_close();
      break;
    }
  }
  self->queue_.clear();
  self->queue_.shrink_to_fit();
  self->writing_ = false;
  if (self->close_when_flushed_) self->do_close();
}

void connection::close_after_flush() {
  asio::post(executor_, [self = shared_from_this()] {
    self->close_when_flushed_ = true;
    self->drain();  // what was sent or deferred before goes first
    if (!self->writing_) self->do_close();
  });
}

void connection::close() {
  asio::post(executor_, [self = shared_from_this()] {
    self->finish(asio::error::operation_aborted, "closed locally");
    self->do_close();
  });
}

void connection::finish(std::error_code ec, const std::string& detail) {
  if (close_ec_ || !on_close_) return;
  close_ec_ = ec ? ec : asio::error::operation_aborted;
  close_detail_ = detail;
  auto handler = std::move(on_close_);
  on_close_ = nullptr;
  handler(close_ec_, close_detail_);
}

void connection::do_close() {
  if (closed_.exchange(true)) return;
  finish(asio::error::operation_aborted, "closed locally");
  stream_->close();
  // Break the cycle handlers may hold to their owner.
  on_message_ = nullptr;
}

}  // namespace brine::net
