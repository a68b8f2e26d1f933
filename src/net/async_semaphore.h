#pragma once

#include <deque>
#include <memory>
#include <mutex>

#include <asio/awaitable.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

namespace brine::net {

// A counting semaphore for coroutines: acquire() waits, first come first
// served, until one of `limit` slots is free; release() hands the slot to the
// oldest waiter.
//
// Threading: safe from any thread. A waiter must run on a strand (or a
// single-threaded executor): the wake-up is posted to the waiter's executor,
// so it cannot arrive between queueing and waiting.
class async_semaphore {
 public:
  explicit async_semaphore(size_t limit) : limit_(limit) {}

  asio::awaitable<void> acquire() {
    auto executor = co_await asio::this_coro::executor;
    std::shared_ptr<asio::steady_timer> wake;
    {
      std::lock_guard lock(mu_);
      if (used_ < limit_) {
        ++used_;
        co_return;
      }
      wake = std::make_shared<asio::steady_timer>(executor,
                                                  asio::steady_timer::time_point::max());
      waiters_.push_back(wake);
    }
    std::error_code ec;
    co_await wake->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }

  void release() {
    std::shared_ptr<asio::steady_timer> next;
    {
      std::lock_guard lock(mu_);
      if (waiters_.empty()) {
        --used_;
        return;
      }
      next = std::move(waiters_.front());
      waiters_.pop_front();
    }
    asio::post(next->get_executor(), [next] { next->cancel(); });
  }

  size_t waiting() {
    std::lock_guard lock(mu_);
    return waiters_.size();
  }

 private:
  std::mutex mu_;
  size_t limit_;
  size_t used_ = 0;
  std::deque<std::shared_ptr<asio::steady_timer>> waiters_;
};

}  // namespace brine::net
