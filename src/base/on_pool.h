#pragma once

#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/awaitable.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <asio/thread_pool.hpp>
#include <asio/use_awaitable.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

namespace brine::base {

// Work that on_pool handed to a pool and that has not finished, counted
// process-wide. The pools may outlive their callers' io_context: a daemon
// that stops its io_context while a job's work runs on a pool (a state
// compile calling back into the minion's context) waits for that work
// before it destroys what the work refers to.
class pool_work {
 public:
  static void begin() {
    std::lock_guard lock(mu());
    ++count();
  }
  static void end() {
    std::lock_guard lock(mu());
    if (--count() == 0) cv().notify_all();
  }
  // True once no work is in flight; false if some still is after `limit`.
  static bool wait_idle(std::chrono::milliseconds limit) {
    std::unique_lock lock(mu());
    return cv().wait_for(lock, limit, [] { return count() == 0; });
  }
  static int in_flight() {
    std::lock_guard lock(mu());
    return count();
  }

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::condition_variable& cv() {
    static std::condition_variable c;
    return c;
  }
  static int& count() {
    static int n = 0;
    return n;
  }
};

// Runs blocking `work` on `pool` and resumes the calling coroutine on its
// own executor with the result: the caller's executor (an I/O thread) stays
// free. Only a plain closure crosses threads; the coroutine frame stays with
// its executor. Every object is named: GCC 12 copies temporaries of a
// co_await expression into the coroutine frame bitwise, which breaks
// strings and shared_ptrs.
template <class T>
asio::awaitable<T> on_pool(asio::thread_pool& pool, std::function<T()> work) {
  auto result = std::make_shared<T>();
  auto init = [&pool, result](auto handler, std::function<T()> w) {
    auto guard = asio::make_work_guard(asio::get_associated_executor(handler));
    pool_work::begin();
    asio::post(pool, [result, w = std::move(w), handler = std::move(handler),
                      guard = std::move(guard)]() mutable {
      *result = w();
      // Counted done once the work and what it holds are gone.
      w = nullptr;
      pool_work::end();
      // The guard goes back with the handler and is released on the
      // caller's executor: released here, the last work of an io_context
      // would end its run() from this thread, and the owner could destroy
      // it while this thread is still inside the scheduler's stop() (UBSan
      // saw a member call on a destroyed scheduler at `brine call` exit).
      auto ex = guard.get_executor();
      asio::post(ex, [handler = std::move(handler), guard = std::move(guard)]() mutable {
        std::move(handler)();
      });
    });
  };
  auto op = asio::async_initiate<decltype(asio::use_awaitable), void()>(init, asio::use_awaitable,
                                                                        std::move(work));
  co_await std::move(op);
  T r = std::move(*result);
  co_return r;
}

}  // namespace brine::base
