// The service module's init.d backend: Salt's debian_service, for Debian
// hosts not booted with systemd (containers, sysvinit). A service is a
// script in /etc/init.d run through `service NAME ACTION` (the script's exit
// code is the answer); it starts at boot when the current runlevel's rc
// directory (or rcS.d) holds an S link to it, which update-rc.d manages.

#include <fnmatch.h>
#include <glob.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "modules/arguments.h"
#include "modules/process.h"
#include "modules/registry.h"
#include "modules/service.h"

namespace brine::modules::service::initd {
namespace {

using json = nlohmann::json;

// The script argument: a file name in /etc/init.d. A leading '-' would be
// read by `service` as an option, a '/' would leave /etc/init.d.
std::string script_argument(const arguments& a) {
  const json* v = a.get("name");
  if (v == nullptr) a.fail("needs the name of a service, e.g. " + a.fun() + " ssh");
  std::string name = a.text_of("name", *v);
  if (name.empty() || name.front() == '-' || name.find('/') != std::string::npos) {
    a.fail("name must be the name of a script in /etc/init.d such as ssh, got '" + name + "'");
  }
  for (char ch : name) {
    if (std::isspace(static_cast<unsigned char>(ch)) ||
        std::iscntrl(static_cast<unsigned char>(ch))) {
      a.fail("name must be a script name without spaces, got '" + name + "'");
    }
  }
  return name;
}

asio::awaitable<process_result> run(std::chrono::seconds limit, std::vector<std::string> argv) {
  process_options opts;
  opts.argv = std::move(argv);
  opts.env = {{"LC_ALL", "C"}, {"LANGUAGE", "C"}};
  opts.timeout = child_limit(limit);
  process_result r = co_await run_process(std::move(opts));
  co_return r;
}

// Salt's `not cmd.retcode("service NAME ACTION")`: the script succeeded. A
// script that hangs past the job's limit is killed and fails the call.
asio::awaitable<bool> service_action(std::chrono::seconds limit, std::string fun, std::string name,
                                     std::string action) {
  std::vector<std::string> argv = {"service", name, action};
  process_result r = co_await run(limit, std::move(argv));
  if (r.timed_out) throw tool_failure(fun + " " + name + ": service " + action + " timed out");
  co_return r.retcode == 0;
}

// Salt's _get_runlevel: the second word of `runlevel`, or Debian's default 2
// where there is no init to ask (it prints "unknown" in a container). Where
// `runlevel` is not installed at all (a container without systemd-sysv or
// sysvinit) Salt's cmd.run fails and every function with it; brine takes
// that for the same container case.
asio::awaitable<std::string> current_runlevel(std::chrono::seconds limit, std::string fun) {
  process_result r;
  try {
    std::vector<std::string> argv = {"runlevel"};
    r = co_await run(limit, std::move(argv));
  } catch (const base::error&) {
    co_return "2";
  }
  const std::string out = r.stdout_text + r.stderr_text;
  if (out.find("unknown") != std::string::npos) co_return "2";
  std::vector<std::string> words = split_words(out);
  if (words.size() < 2 || r.timed_out) {
    throw tool_failure(fun + ": cannot read the runlevel from `runlevel`: '" + trim(out) + "'");
  }
  co_return words[1];
}

std::vector<std::string> glob_paths(const std::string& pattern) {
  glob_t g{};
  std::vector<std::string> out;
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  }
  ::globfree(&g);
  return out;
}

// Salt's get_enabled: the S links of rcS.d and the runlevel's rc directory,
// each named by what follows the last run of digits (S01ssh is ssh).
asio::awaitable<std::set<std::string>> enabled_services(std::chrono::seconds limit,
                                                        std::string fun) {
  const std::string level = co_await current_runlevel(limit, fun);
  std::set<std::string> out;
  for (const auto& path : glob_paths("/etc/rc[S" + level + "].d/S*")) {
    std::string base = path.substr(path.rfind('/') + 1);
    auto last_digit = base.find_last_of("0123456789");
    out.insert(last_digit == std::string::npos ? base : base.substr(last_digit + 1));
  }
  co_return out;
}

// Salt's get_all: the scripts in /etc/init.d but README, and the enabled ones.
asio::awaitable<std::set<std::string>> all_services(std::chrono::seconds limit, std::string fun) {
  std::set<std::string> out = co_await enabled_services(limit, fun);
  for (const auto& path : glob_paths("/etc/init.d/*")) {
    std::string base = path.substr(std::string("/etc/init.d/").size());
    if (base != "README") out.insert(base);
  }
  co_return out;
}

std::vector<std::string> sorted(const std::set<std::string>& s) { return {s.begin(), s.end()}; }

// Salt's status.pid(sig) as status uses it: whether a line of `ps -efHww`
// other than one naming this process matches the regular expression.
asio::awaitable<bool> signature_running(std::chrono::seconds limit, std::string fun,
                                        std::string sig) {
  int err = 0;
  PCRE2_SIZE at = 0;
  std::unique_ptr<pcre2_code, decltype(&pcre2_code_free)> code(
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(sig.data()), sig.size(), PCRE2_UTF, &err, &at,
                    nullptr),
      &pcre2_code_free);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw base::error(fun + ": sig is not a valid regular expression at offset " +
                      std::to_string(at) + ": " + reinterpret_cast<const char*>(msg));
  }
  std::vector<std::string> argv = {"ps", "-efHww"};
  process_result r = co_await run(limit, std::move(argv));
  if (r.retcode != 0 || r.timed_out) throw tool_failure(fun + ": " + tool_error("ps", r));
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(code.get(), nullptr), &pcre2_match_data_free);
  const std::string self = std::to_string(::getpid());
  std::string_view text = r.stdout_text;
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.find(self) != std::string_view::npos) continue;
    if (pcre2_match(code.get(), reinterpret_cast<PCRE2_SPTR>(line.data()), line.size(), 0, 0,
                    match.get(), nullptr) >= 0 &&
        split_words(line).size() > 1) {
      co_return true;
    }
  }
  co_return false;
}

asio::awaitable<outcome> action(call c, const char* fun_name, const char* action_name) {
  arguments a(std::string("service.") + fun_name, c, {"name"});
  const std::string name = script_argument(a);
  bool ok = co_await service_action(c.timeout, a.fun(), name, action_name);
  co_return outcome{ok};
}

asio::awaitable<outcome> start(call c) {
  co_return co_await action(std::move(c), "start", "start");
}
asio::awaitable<outcome> stop(call c) { co_return co_await action(std::move(c), "stop", "stop"); }
asio::awaitable<outcome> restart(call c) {
  co_return co_await action(std::move(c), "restart", "restart");
}
asio::awaitable<outcome> reload(call c) {
  co_return co_await action(std::move(c), "reload", "reload");
}
asio::awaitable<outcome> force_reload(call c) {
  co_return co_await action(std::move(c), "force_reload", "force-reload");
}

// Salt's status: with sig, whether a process matches it; else the script's
// `status` exit code, per service for a glob NAME ({service: bool}).
asio::awaitable<outcome> status(call c) {
  arguments a("service.status", c, {"name", "sig"});
  const std::string name = script_argument(a);
  const std::string sig = a.text("sig").value_or("");
  if (!sig.empty()) {
    bool running = co_await signature_running(c.timeout, a.fun(), sig);
    co_return outcome{running};
  }
  // Salt's test: re.search(r"\*|\?|\[.+\]", name).
  const auto open = name.find('[');
  const bool glob = name.find_first_of("*?") != std::string::npos ||
                    (open != std::string::npos && name.find(']', open + 2) != std::string::npos);
  if (!glob) {
    bool running = co_await service_action(c.timeout, a.fun(), name, "status");
    co_return outcome{running};
  }
  json ret = json::object();
  std::set<std::string> services = co_await all_services(c.timeout, a.fun());
  for (const auto& service : services) {
    if (::fnmatch(name.c_str(), service.c_str(), 0) == 0) {
      ret[service] = co_await service_action(c.timeout, a.fun(), service, "status");
    }
  }
  co_return outcome{std::move(ret)};
}

// Salt's enable: insserv orders the script's links, then update-rc.d turns
// them on. Without insserv (Debian 12 installs it only with sysvinit) this
// fails as Salt's does: update-rc.d alone cannot enable a script that has
// no links yet.
asio::awaitable<outcome> enable(call c) {
  arguments a("service.enable", c, {"name"});
  const std::string name = script_argument(a);
  if (name.find('\'') != std::string::npos) a.fail("name must not contain a quote");
  const std::string quoted = "'" + name + "'";
  process_options opts;
  opts.shell_command = "insserv " + quoted + " && update-rc.d " + quoted + " enable";
  opts.env = {{"LC_ALL", "C"}, {"LANGUAGE", "C"}};
  opts.timeout = child_limit(c.timeout);
  process_result r = co_await run_process(std::move(opts));
  if (r.timed_out) throw tool_failure(a.fun() + " " + name + ": insserv/update-rc.d timed out");
  co_return outcome{r.retcode == 0};
}

asio::awaitable<outcome> disable(call c) {
  arguments a("service.disable", c, {"name"});
  const std::string name = script_argument(a);
  std::vector<std::string> argv = {"update-rc.d", name, "disable"};
  process_result r = co_await run(c.timeout, std::move(argv));
  if (r.timed_out) throw tool_failure(a.fun() + " " + name + ": update-rc.d timed out");
  co_return outcome{r.retcode == 0};
}

asio::awaitable<outcome> enabled(call c) {
  arguments a("service.enabled", c, {"name"});
  const std::string name = script_argument(a);
  std::set<std::string> on = co_await enabled_services(c.timeout, a.fun());
  co_return outcome{on.contains(name)};
}

// Salt's disabled: in get_all but not in get_enabled.
asio::awaitable<outcome> disabled(call c) {
  arguments a("service.disabled", c, {"name"});
  const std::string name = script_argument(a);
  std::set<std::string> on = co_await enabled_services(c.timeout, a.fun());
  std::set<std::string> all = co_await all_services(c.timeout, a.fun());
  co_return outcome{all.contains(name) && !on.contains(name)};
}

asio::awaitable<outcome> available(call c) {
  arguments a("service.available", c, {"name"});
  const std::string name = script_argument(a);
  std::set<std::string> all = co_await all_services(c.timeout, a.fun());
  co_return outcome{all.contains(name)};
}

asio::awaitable<outcome> missing(call c) {
  arguments a("service.missing", c, {"name"});
  const std::string name = script_argument(a);
  std::set<std::string> all = co_await all_services(c.timeout, a.fun());
  co_return outcome{!all.contains(name)};
}

asio::awaitable<outcome> get_all(call c) {
  arguments a("service.get_all", c, {});
  std::set<std::string> all = co_await all_services(c.timeout, a.fun());
  co_return outcome{sorted(all)};
}

asio::awaitable<outcome> get_enabled(call c) {
  arguments a("service.get_enabled", c, {});
  std::set<std::string> on = co_await enabled_services(c.timeout, a.fun());
  co_return outcome{sorted(on)};
}

asio::awaitable<outcome> get_disabled(call c) {
  arguments a("service.get_disabled", c, {});
  std::set<std::string> on = co_await enabled_services(c.timeout, a.fun());
  std::set<std::string> all = co_await all_services(c.timeout, a.fun());
  std::vector<std::string> off;
  std::set_difference(all.begin(), all.end(), on.begin(), on.end(), std::back_inserter(off));
  co_return outcome{std::move(off)};
}

}  // namespace
}  // namespace brine::modules::service::initd

namespace brine::modules::service {

const operations& initd_operations() {
  static const operations table = {
      .start = initd::start,
      .stop = initd::stop,
      .restart = initd::restart,
      .reload = initd::reload,
      .force_reload = initd::force_reload,
      .status = initd::status,
      .enable = initd::enable,
      .disable = initd::disable,
      .enabled = initd::enabled,
      .disabled = initd::disabled,
      .available = initd::available,
      .missing = initd::missing,
      .get_all = initd::get_all,
      .get_enabled = initd::get_enabled,
      .get_disabled = initd::get_disabled,
  };
  return table;
}

}  // namespace brine::modules::service
