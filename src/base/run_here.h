#pragma once

#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <exception>
#include <functional>
#include <optional>
#include <utility>

namespace brine::base {

// Runs the awaitable that `make` gives to completion on a private
// io_context in this thread, and returns its value (or rethrows what it
// threw). For synchronous callers of asynchronous code on threads where
// blocking is their job: a pool thread, a compile, a renderer. The
// awaitable is made inside the io_context's run, so that Asio's frame
// recycling allocates and frees it on the same thread.
template <typename T>
T run_here(std::function<asio::awaitable<T>()> make) {
  asio::io_context io;
  std::optional<T> out;
  std::exception_ptr failure;
  auto outer = [&make]() -> asio::awaitable<T> { co_return co_await make(); };
  asio::co_spawn(io, outer, [&](std::exception_ptr e, T v) {
    failure = e;
    if (!e) out = std::move(v);
  });
  io.run();
  if (failure) std::rethrow_exception(failure);
  return std::move(*out);
}

}  // namespace brine::base
