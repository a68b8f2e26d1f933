// on_pool: blocking work on a thread pool, resumed on the caller's executor.

#include "base/on_pool.h"

#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <memory>
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

}  // namespace
}  // namespace brine::base
