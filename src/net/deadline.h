#pragma once

#include <chrono>
#include <optional>

#include <asio/awaitable.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

namespace brine::net {

// Awaits `op` for at most `limit`; nullopt when the limit passed first (op is
// then cancelled). Asio 1.22 has no cancel_after, hence the race.
template <typename T>
asio::awaitable<std::optional<T>> with_deadline(asio::awaitable<T> op,
                                                std::chrono::steady_clock::duration limit) {
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer timer(co_await asio::this_coro::executor, limit);
  auto result = co_await (std::move(op) || timer.async_wait(asio::use_awaitable));
  if (result.index() == 0) co_return std::get<0>(std::move(result));
  co_return std::nullopt;
}

// The same for an operation without a result: true when it finished in time.
inline asio::awaitable<bool> with_deadline(asio::awaitable<void> op,
                                           std::chrono::steady_clock::duration limit) {
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer timer(co_await asio::this_coro::executor, limit);
  auto result = co_await (std::move(op) || timer.async_wait(asio::use_awaitable));
  co_return result.index() == 0;
}

}  // namespace brine::net
