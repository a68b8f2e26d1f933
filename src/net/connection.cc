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

void connection::send(frame_ptr frame) {
  asio::post(executor_, [self = shared_from_this(), frame = std::move(frame)]() mutable {
    if (self->closed()) return;
    if (!self->writing_) {
      // Most frames fit the socket buffer at once: write them here and spare
      // a writer coroutine (a frame allocation) per frame.
      std::error_code ec;
      size_t n = self->stream_->try_write(*frame, ec);
      if (ec) {
        self->finish(ec, self->stream_->last_error());
        self->do_close();
        return;
      }
      if (n == frame->size()) {
        if (self->close_when_flushed_) self->do_close();
        return;
      }
      self->first_offset_ = n;
      self->queue_.push_back(std::move(frame));
      self->writing_ = true;
      asio::co_spawn(self->executor_, writer(self), asio::detached);
      return;
    }
    self->queue_.push_back(std::move(frame));
  });
}

asio::awaitable<void> connection::writer(std::shared_ptr<connection> self) {
  size_t next = 0;
  while (next < self->queue_.size() && !self->closed()) {
    size_t offset = next == 0 ? std::exchange(self->first_offset_, 0) : 0;
    frame_ptr f = self->queue_[next++];
    std::error_code ec =
        co_await self->stream_->write_all(std::span<const uint8_t>(*f).subspan(offset));
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
