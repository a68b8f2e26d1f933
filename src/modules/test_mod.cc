// The test module: Salt's test.* functions that check the job pipeline end to
// end without touching the machine.

#include <sys/utsname.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <string>

#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "base/error.h"
#include "modules/args.h"
#include "modules/registry.h"

#ifndef BRINE_VERSION
#error "BRINE_VERSION must be defined by the build (src/modules/CMakeLists.txt)"
#endif

namespace brine::modules {
namespace test_mod {
namespace {

// The one argument of a function, given positionally or as `kwarg=`; nullptr
// when missing or when more than one was given.
const nlohmann::json* single_argument(const call& c, const char* kwarg) {
  bool has_kwarg = c.kwargs.is_object() && c.kwargs.contains(kwarg);
  std::size_t positional = c.args.is_array() ? c.args.size() : 0;
  if (positional == 1 && !has_kwarg) return &c.args[0];
  if (positional == 0 && has_kwarg) return &c.kwargs[kwarg];
  return nullptr;
}

asio::awaitable<outcome> ping(call) { co_return outcome{true}; }

asio::awaitable<outcome> echo(call c) {
  const nlohmann::json* text = single_argument(c, "text");
  if (text == nullptr) throw base::error("test.echo needs one argument: the text to echo");
  // Salt returns the text; a YAML-parsed `5` comes back as the text "5".
  co_return outcome{text->is_string() ? *text : nlohmann::json(text->dump())};
}

asio::awaitable<outcome> sleep(call c) {
  // A year: far beyond any job, and still representable as steady_clock ticks.
  constexpr double k_max_seconds = 365.0 * 24 * 3600;
  const nlohmann::json* length = single_argument(c, "length");
  if (length == nullptr) {
    throw base::error("test.sleep needs one argument: the number of seconds to sleep");
  }
  std::optional<double> seconds = as_number(*length);
  if (!seconds || !std::isfinite(*seconds) || *seconds < 0 || *seconds > k_max_seconds) {
    throw base::error("test.sleep: length must be a number of seconds from 0 to 31536000, got " +
                      length->dump());
  }
  asio::steady_timer timer(co_await asio::this_coro::executor,
                           std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(*seconds)));
  co_await timer.async_wait(asio::use_awaitable);
  co_return outcome{true};
}

asio::awaitable<outcome> version(call) { co_return outcome{BRINE_VERSION}; }

asio::awaitable<outcome> arg(call c) {
  co_return outcome{nlohmann::json{{"args", c.args}, {"kwargs", c.kwargs}}};
}

asio::awaitable<outcome> exception(call c) {
  const nlohmann::json* message = single_argument(c, "message");
  throw base::error(message != nullptr && message->is_string() ? message->get<std::string>()
                                                               : "Test Exception");
  co_return outcome{};
}

asio::awaitable<outcome> kwarg(call c) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [k, v] : c.kwargs.items()) out[k] = v;
  co_return outcome{std::move(out)};
}

// Salt's test.retcode: returns True and sets the job's retcode.
asio::awaitable<outcome> retcode(call c) {
  int code = 42;
  if (const nlohmann::json* v = single_argument(c, "code")) {
    std::optional<double> n = as_number(*v);
    if (!n || *n != std::floor(*n) || *n < 0 || *n > 255) {
      throw base::error("test.retcode: code must be an integer from 0 to 255, got " + v->dump());
    }
    code = static_cast<int>(*n);
  } else if (!c.args.empty() || !c.kwargs.empty()) {
    throw base::error("test.retcode takes one argument: code (default 42)");
  }
  co_return outcome{true, code == 0, code};
}

asio::awaitable<outcome> versions_report(call) {
  struct utsname u {};
  ::uname(&u);
  nlohmann::json lines = nlohmann::json::array();
  lines.push_back("Brine Version:");
  lines.push_back(std::string("           brine: ") + BRINE_VERSION);
  lines.push_back("");
  lines.push_back("System Versions:");
  lines.push_back(std::string("          kernel: ") + u.release);
  lines.push_back(std::string("         machine: ") + u.machine);
  lines.push_back(std::string("         release: ") + u.version);
  lines.push_back(std::string("        compiler: ") + __VERSION__);
  co_return outcome{std::move(lines)};
}

asio::awaitable<outcome> true_(call) { co_return outcome{true}; }

asio::awaitable<outcome> false_(call) { co_return outcome{false}; }

}  // namespace
}  // namespace test_mod

void register_test_module(registry& reg) {
  using namespace test_mod;
  constexpr auto instant = registry::kind::instant;
  reg.add("test.ping", ping, "Returns true: the minion is up and answering jobs.", instant);
  reg.add("test.echo", echo, "test.echo TEXT: returns TEXT as a string.", instant);
  reg.add("test.sleep", sleep,
          "test.sleep SECONDS (or length=): waits without blocking, returns true.");
  reg.add("test.version", version, "Returns the minion's brine version.", instant);
  reg.add("test.arg", arg, "Returns the positional and keyword arguments it was given.",
          instant);
  reg.add("test.exception", exception,
          "test.exception [MESSAGE]: fails with MESSAGE, to test error reporting.");
  reg.add("test.true", true_, "Returns true.", instant);
  reg.add("test.kwarg", kwarg, "Returns the keyword arguments it was given, as a map.", instant);
  reg.add("test.retcode", retcode,
          "test.retcode [CODE=42]: returns true with CODE as the job's retcode (non-zero fails "
          "the job).",
          instant);
  reg.add("test.versions_report", versions_report,
          "Returns the brine version and the system's, one line each.", instant);
  reg.add("test.false", false_, "Returns false (the job itself succeeds).", instant);
}

}  // namespace brine::modules
