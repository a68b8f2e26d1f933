#include "modules/registry.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <utility>

#include <asio/cancellation_state.hpp>
#include <asio/co_spawn.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/experimental/parallel_group.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

namespace brine::modules {
namespace {

// Turns whatever the function throws into an outcome, so that the race in
// execute() sees one kind of result.
asio::awaitable<outcome> guarded(function fn, call c) {
  try {
    co_return co_await fn(std::move(c));
  } catch (const std::exception& e) {
    co_return error_outcome(e.what());
  } catch (...) {
    co_return error_outcome("unknown exception");
  }
}

}  // namespace

void registry::add(const std::string& name, function fn, std::string doc, kind k) {
  // Registration happens once at start from code, so a clash is a bug in
  // brine, not something a user can cause or fix.
  if (!entries_.emplace(name, entry{std::move(fn), std::move(doc), k}).second) {
    std::fprintf(stderr, "brine: execution function %s registered twice\n", name.c_str());
    std::abort();
  }
}

bool registry::instant(const std::string& name) const {
  auto it = entries_.find(name);
  return it != entries_.end() && it->second.k == kind::instant;
}

const function* registry::find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second.fn;
}

std::vector<std::string> registry::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

const std::string& registry::doc(const std::string& name) const {
  static const std::string none;
  auto it = entries_.find(name);
  return it == entries_.end() ? none : it->second.doc;
}

outcome error_outcome(const std::string& message, int retcode) {
  return outcome{"ERROR: " + message, false, retcode};
}

void register_builtin_modules(registry& reg) {
  register_test_module(reg);
  register_cmd_module(reg);
  register_file_module(reg);
  register_pkg_module(reg);
  register_pkg_repo_module(reg);
  register_service_module(reg);
  register_user_module(reg);
  register_network_module(reg);
  register_grains_module(reg);
  register_pillar_module(reg);
  register_mine_module(reg);
  register_config_module(reg);
  register_sys_module(reg);
  register_slsutil_module(reg);
  register_cp_module(reg);
  register_alternatives_module(reg);
  register_hosts_module(reg);
  register_sysctl_module(reg);
  register_cron_module(reg);
  register_ssh_module(reg);
  register_shadow_module(reg);
  register_git_module(reg);
  register_archive_module(reg);
  register_postgres_module(reg);
  register_ini_module(reg);
  register_status_module(reg);
}

asio::awaitable<outcome> execute(const registry& reg, call c) {
  const function* fn = reg.find(c.fun);
  if (fn == nullptr) co_return outcome{"'" + c.fun + "' is not available.", false, 254};
  const std::string fun = c.fun;
  const auto limit = c.timeout;
  // A race against a timer costs a timer, a parallel group and two coroutine
  // frames per job; a function that cannot wait has nothing to race.
  if (limit <= std::chrono::seconds::zero() || reg.instant(c.fun)) {
    co_return co_await guarded(*fn, std::move(c));
  }

  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer deadline(ex, limit);
  // wait_for_one: whichever finishes first cancels the other, and the group
  // completes only when both have, so a timed-out function has already
  // killed and reaped its children when this returns.
  auto [order, fn_error, result, timer_error] =
      co_await asio::experimental::make_parallel_group(
          asio::co_spawn(ex, guarded(*fn, std::move(c)), asio::experimental::deferred),
          deadline.async_wait(asio::experimental::deferred))
          .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);

  if (order[0] == 1 && !timer_error) {
    co_return error_outcome("job " + fun + " timed out after " + std::to_string(limit.count()) +
                            " s and was killed");
  }
  asio::cancellation_state state = co_await asio::this_coro::cancellation_state;
  if (state.cancelled() != asio::cancellation_type::none) {
    co_return error_outcome("job " + fun + " was cancelled");
  }
  if (fn_error) {
    // guarded() catches everything; only a failure to start it lands here.
    try {
      std::rethrow_exception(fn_error);
    } catch (const std::exception& e) {
      co_return error_outcome(e.what());
    } catch (...) {
      co_return error_outcome("unknown exception");
    }
  }
  co_return std::move(result);
}

}  // namespace brine::modules
