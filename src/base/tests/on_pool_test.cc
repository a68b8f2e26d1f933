// on_pool: blocking work on a thread pool, resumed on the caller's executor.

#include "base/on_pool.h"

#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace brine::base {
namespace {

asio::awaitable<void> twice(asio::thread_pool& pool, std::thread::id* resumed_on,
                            std::string* out) {
  std::function<std::string()> work = [] { return std::string("done"); };
  *out = co_await on_pool<std::string>(pool, std::move(work));
  *resumed_on = std::this_thread::get_id();
}

TEST(OnPool, ResumesOnTheCallersThreadWithTheResult) {
  asio::thread_pool pool(2);
  asio::io_context io;
  std::thread::id resumed_on;
  std::string out;
  asio::co_spawn(io, twice(pool, &resumed_on, &out), asio::detached);
  io.run();
  EXPECT_EQ(out, "done");
  EXPECT_EQ(resumed_on, std::this_thread::get_id());
  pool.join();
}

// `brine call` runs its io_context one handler at a time until the function
// is done, then destroys it. The pool thread must not touch that
// io_context after it posted the completion: releasing the work guard there
// raced with the destruction (UBSan at `brine call` exit: a member call on a
// destroyed scheduler; ASan here: a heap use after free).
TEST(OnPool, AnIoContextMayBeDestroyedAsSoonAsTheWorkIsDone) {
  asio::thread_pool pool(2);
  for (int i = 0; i < 2000; ++i) {
    std::string out;
    std::thread::id resumed_on;
    bool done = false;
    auto io = std::make_unique<asio::io_context>();
    asio::co_spawn(*io, twice(pool, &resumed_on, &out), [&](std::exception_ptr) { done = true; });
    while (!done && io->run_one() > 0) {
    }
    io.reset();
    ASSERT_EQ(out, "done") << "round " << i;
  }
  pool.join();
}

// A daemon stops its io_context while a job's work still runs on a pool:
// pool_work tells it when that work (and what its closure holds) is gone,
// so that it destroys what the work refers to only after.
TEST(OnPool, WorkInFlightIsCountedUntilItAndItsClosureAreGone) {
  asio::thread_pool pool(1);
  asio::io_context io;
  std::mutex mu;
  std::condition_variable cv;
  bool started = false, release = false;
  auto held = std::make_shared<int>(7);
  std::weak_ptr<int> watch = held;
  auto work_of = [&] {
    return [&, held]() {
      std::unique_lock lock(mu);
      started = true;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });
      return std::string("late");
    };
  };
  std::function<std::string()> work = work_of();
  held.reset();
  auto task = [](asio::thread_pool& p, std::function<std::string()> w) -> asio::awaitable<void> {
    co_await on_pool<std::string>(p, std::move(w));
  };
  asio::co_spawn(io, task(pool, std::move(work)), asio::detached);
  // Runs until the work is on the pool, then stops as a daemon does on
  // SIGTERM, with the coroutine still waiting.
  {
    std::unique_lock lock(mu);
    while (!started) {
      lock.unlock();
      io.run_one_for(std::chrono::milliseconds(10));
      lock.lock();
    }
  }
  io.stop();
  EXPECT_EQ(pool_work::in_flight(), 1);
  EXPECT_FALSE(pool_work::wait_idle(std::chrono::milliseconds(50)));
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  EXPECT_TRUE(pool_work::wait_idle(std::chrono::seconds(30)));
  EXPECT_EQ(pool_work::in_flight(), 0);
  // The closure's captures went with it.
  EXPECT_TRUE(watch.expired());
  pool.join();
}

}  // namespace
}  // namespace brine::base
