#pragma once

#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "support/temp_dir.h"

namespace brine::modules::testing {

using namespace std::chrono_literals;

// Runs `aw` on a fresh io_context. The deadline turns a hang into a failure;
// tearing down the io_context then destroys the frames, which kills children.
template <typename T>
T run_sync(asio::awaitable<T> aw, std::chrono::steady_clock::duration limit = 30s) {
  asio::io_context ctx;
  std::optional<T> value;
  std::exception_ptr error;
  bool done = false;
  asio::co_spawn(ctx, std::move(aw), [&](std::exception_ptr e, T v) {
    done = true;
    error = e;
    if (!e) value.emplace(std::move(v));
  });
  ctx.run_for(limit);
  if (!done) throw std::runtime_error("coroutine did not finish within the test's deadline");
  if (error) std::rethrow_exception(error);
  return std::move(*value);
}

inline asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  co_await timer.async_wait(asio::use_awaitable);
}

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Gone, or a zombie: an orphan is reparented to init, and whether init reaps
// it promptly is not ours to test.
inline bool process_gone(pid_t pid) {
  if (::kill(pid, 0) < 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  auto paren = line.rfind(") ");
  if (paren == std::string::npos || paren + 2 >= line.size()) return false;
  char state = line[paren + 2];
  return state == 'Z' || state == 'X';
}

// Kill delivery to the group is asynchronous; a short bounded poll.
inline bool wait_gone(pid_t pid, std::chrono::milliseconds limit = 3000ms) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!process_gone(pid)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

inline bool no_children_left() { return ::waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD; }

using test::temp_dir;

inline pid_t read_pid(const std::string& path) {
  std::ifstream in(path);
  long pid = 0;
  in >> pid;
  return static_cast<pid_t>(pid);
}


}  // namespace brine::modules::testing
