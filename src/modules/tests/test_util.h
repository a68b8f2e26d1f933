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
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "modules/process.h"
#include "modules/registry.h"
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

// Runs a command without a shell, for facts checked independently of the
// module under test.
inline process_result run_argv(std::vector<std::string> argv,
                               std::chrono::seconds limit = std::chrono::seconds(120)) {
  process_options opts;
  opts.argv = std::move(argv);
  opts.env = {{"LC_ALL", "C"}};
  opts.timeout = limit;
  return run_sync(run_process(std::move(opts)), limit + std::chrono::seconds(10));
}

// A call as a job brings it; `timeout` is the job's limit.
inline call make_call(std::string fun, nlohmann::json args = nlohmann::json::array(),
                      nlohmann::json kwargs = nlohmann::json::object(),
                      std::chrono::seconds timeout = call{}.timeout) {
  call c;
  c.fun = std::move(fun);
  c.args = std::move(args);
  c.kwargs = std::move(kwargs);
  c.timeout = timeout;
  return c;
}

// The fixture of a module's tests: a registry with the module (or all of
// them) registered. Its calls carry the job limit `job_limit`; each is
// awaited at most `wait`, so that a hang fails the test. A test must leave
// no child process behind.
class module_test : public ::testing::Test {
 protected:
  using json = nlohmann::json;

  explicit module_test(void (*register_module)(registry&),
                       std::chrono::seconds job_limit = call{}.timeout,
                       std::chrono::steady_clock::duration wait = 30s)
      : job_limit_(job_limit), wait_(wait) {
    register_module(reg_);
  }
  void TearDown() override { EXPECT_TRUE(no_children_left()); }

  call make_call(std::string fun, json args = json::array(), json kwargs = json::object()) const {
    return testing::make_call(std::move(fun), std::move(args), std::move(kwargs), job_limit_);
  }

  // Direct call, without execute()'s guard: bad arguments surface as
  // base::error.
  outcome call_fn(call c) {
    const function* fn = reg_.find(c.fun);
    if (fn == nullptr) throw std::runtime_error(c.fun + " not registered");
    return run_sync((*fn)(std::move(c)), wait_);
  }
  outcome call_fn(std::string fun, json args = json::array(), json kwargs = json::object()) {
    return call_fn(make_call(std::move(fun), std::move(args), std::move(kwargs)));
  }
  // Through execute(): bad arguments surface as error outcomes.
  outcome execute_call(call c) { return run_sync(execute(reg_, std::move(c)), wait_); }

  // The base::error of a direct call, or "(no error: <what it returned>)".
  std::string error_of(call c) {
    try {
      outcome o = call_fn(std::move(c));
      return "(no error: " + o.ret.dump() + ")";
    } catch (const base::error& e) {
      return e.what();
    }
  }
  std::string error_of(std::string fun, json args = json::array(), json kwargs = json::object()) {
    return error_of(make_call(std::move(fun), std::move(args), std::move(kwargs)));
  }

  // What a direct call that must succeed returns.
  json ret(std::string fun, json args = json::array(), json kwargs = json::object()) {
    outcome o = call_fn(std::move(fun), std::move(args), std::move(kwargs));
    EXPECT_TRUE(o.success) << o.ret.dump();
    return o.ret;
  }

  registry reg_;

 private:
  std::chrono::seconds job_limit_;
  std::chrono::steady_clock::duration wait_;
};

}  // namespace brine::modules::testing

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)
