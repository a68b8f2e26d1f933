// The service module's systemd backend: Salt's systemd_service. Units are
// driven with systemctl; a name without a unit type is a service ("nginx"
// is nginx.service). service_mod.cc calls these only where systemd runs.

#include <fnmatch.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "base/error.h"
#include "modules/args.h"
#include "modules/arguments.h"
#include "modules/process.h"
#include "modules/registry.h"
#include "modules/service.h"

namespace brine::modules::service::systemd {
namespace {

using json = nlohmann::json;

asio::awaitable<process_result> systemctl(std::chrono::seconds limit,
                                          std::vector<std::string> args) {
  process_options opts;
  opts.argv = {"systemctl"};
  opts.argv.insert(opts.argv.end(), args.begin(), args.end());
  // Output is parsed in English.
  opts.env = {{"LC_ALL", "C"}, {"LANGUAGE", "C"}};
  opts.timeout = child_limit(limit);
  process_result r = co_await run_process(std::move(opts));
  co_return r;
}

std::string failure_text(const process_result& r) {
  if (r.timed_out) return "systemctl timed out and was killed";
  std::string err = trim(r.stderr_text);
  if (err.empty()) err = trim(r.stdout_text);
  return err.empty() ? "systemctl exited " + std::to_string(r.retcode) : err;
}

constexpr std::string_view k_unit_types[] = {"service", "socket", "device", "mount", "automount",
                                             "swap",    "target", "path",   "timer"};

// Salt's _canonical_unit_name: a name without a unit type is a service.
std::string canonical_unit(const std::string& name) {
  for (std::string_view type : k_unit_types) {
    if (name.size() > type.size() && name.ends_with(type) &&
        name[name.size() - type.size() - 1] == '.') {
      return name;
    }
  }
  return name + ".service";
}

// The unit argument; a leading '-' would be read by systemctl as an option.
std::string unit_argument(const arguments& a) {
  const json* v = a.get("name");
  if (v == nullptr) a.fail("needs the name of a service, e.g. " + a.fun() + " nginx");
  std::string name = a.text_of("name", *v);
  if (name.empty() || name.front() == '-') {
    a.fail("name must be a unit name such as nginx or nginx.service, got '" + name + "'");
  }
  for (char ch : name) {
    if (std::isspace(static_cast<unsigned char>(ch)) ||
        std::iscntrl(static_cast<unsigned char>(ch))) {
      a.fail("name must be a unit name without spaces, got '" + name + "'");
    }
  }
  return name;
}

// systemctl [--no-block] ACTION UNIT: true, or a failure carrying
// systemctl's message (Salt raises with its stderr for start, restart,
// reload and enable).
asio::awaitable<bool> change(std::chrono::seconds limit, std::string fun, std::string action,
                             std::string name, bool no_block) {
  std::vector<std::string> args;
  if (no_block) args.push_back("--no-block");
  args.push_back(action);
  args.push_back(canonical_unit(name));
  process_result r = co_await systemctl(limit, std::move(args));
  if (r.retcode != 0 || r.timed_out) throw tool_failure(fun + " " + name + ": " + failure_text(r));
  co_return true;
}

asio::awaitable<void> unmask_if_asked(std::chrono::seconds limit, std::string fun, std::string name,
                                      bool unmask, bool unmask_runtime) {
  for (bool runtime : {false, true}) {
    if (!(runtime ? unmask_runtime : unmask)) continue;
    std::vector<std::string> args = {"unmask"};
    if (runtime) args.push_back("--runtime");
    args.push_back(canonical_unit(name));
    process_result r = co_await systemctl(limit, std::move(args));
    if (r.retcode != 0 || r.timed_out) {
      throw tool_failure(fun + ": failed to unmask service '" + name + "': " + failure_text(r));
    }
  }
}

// start, restart, reload, enable: name, no_block, unmask, unmask_runtime.
asio::awaitable<outcome> unmasking_change(call c, const char* fun_name, const char* action_name,
                                          bool no_block_default) {
  const std::string action = action_name;
  arguments a(std::string("service.") + fun_name, c,
              {"name", "no_block", "unmask", "unmask_runtime"});
  const std::string name = unit_argument(a);
  const bool no_block = a.flag("no_block", no_block_default);
  const bool unmask = a.flag("unmask", false);
  const bool unmask_runtime = a.flag("unmask_runtime", false);
  co_await unmask_if_asked(c.timeout, a.fun(), name, unmask, unmask_runtime);
  // (co_await inside a braced co_return operand is miscompiled by GCC 12.)
  bool done = co_await change(c.timeout, a.fun(), action, name, no_block);
  co_return outcome{done};
}

// stop, disable: name, no_block.
asio::awaitable<outcome> plain_change(call c, const char* action_name) {
  const std::string action = action_name;
  arguments a("service." + action, c, {"name", "no_block"});
  const std::string name = unit_argument(a);
  const bool no_block = a.flag("no_block", false);
  // (co_await inside a braced co_return operand is miscompiled by GCC 12.)
  bool done = co_await change(c.timeout, a.fun(), action, name, no_block);
  co_return outcome{done};
}

// Service names (without .service) from list-unit-files and list-units
// output: the first word of a line that names a service, past the "●" that
// marks failed or missing units.
void collect_services(const std::string& output, std::set<std::string>& out) {
  std::string_view text = output;
  while (!text.empty()) {
    auto nl = text.find('\n');
    for (const auto& word : split_words(text.substr(0, nl))) {
      if (word.size() > 8 && word.ends_with(".service")) {
        out.insert(word.substr(0, word.size() - 8));
        break;
      }
      if (word.find('.') != std::string::npos) break;  // another unit type
    }
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

asio::awaitable<std::vector<std::string>> all_services(std::chrono::seconds limit) {
  std::set<std::string> services;
  std::vector<std::string> files_args = {"--full", "--no-legend", "--no-pager", "list-unit-files",
                                         "--type=service"};
  process_result files = co_await systemctl(limit, std::move(files_args));
  if (files.retcode != 0 || files.timed_out) {
    throw tool_failure("service.get_all: systemctl list-unit-files: " + failure_text(files));
  }
  collect_services(files.stdout_text, services);
  // Units loaded without a unit file of their own (generated, transient).
  std::vector<std::string> units_args = {"--full",     "--no-legend",    "--no-pager",
                                         "list-units", "--type=service", "--all"};
  process_result units = co_await systemctl(limit, std::move(units_args));
  if (units.retcode != 0 || units.timed_out) {
    throw tool_failure("service.get_all: systemctl list-units: " + failure_text(units));
  }
  collect_services(units.stdout_text, services);
  co_return std::vector<std::string>(services.begin(), services.end());
}

asio::awaitable<bool> is_active(std::chrono::seconds limit, std::string name) {
  std::vector<std::string> args = {"is-active", canonical_unit(name)};
  process_result r = co_await systemctl(limit, std::move(args));
  if (r.timed_out) throw tool_failure("service.status " + name + ": " + failure_text(r));
  co_return r.retcode == 0;
}

asio::awaitable<outcome> start(call c) {
  co_return co_await unmasking_change(std::move(c), "start", "start", false);
}
asio::awaitable<outcome> restart(call c) {
  co_return co_await unmasking_change(std::move(c), "restart", "restart", false);
}
asio::awaitable<outcome> reload(call c) {
  co_return co_await unmasking_change(std::move(c), "reload", "reload", false);
}
// Salt's force_reload defaults to --no-block.
asio::awaitable<outcome> force_reload(call c) {
  co_return co_await unmasking_change(std::move(c), "force_reload", "force-reload", true);
}
asio::awaitable<outcome> enable(call c) {
  co_return co_await unmasking_change(std::move(c), "enable", "enable", false);
}
asio::awaitable<outcome> stop(call c) { co_return co_await plain_change(std::move(c), "stop"); }
asio::awaitable<outcome> disable(call c) {
  co_return co_await plain_change(std::move(c), "disable");
}

asio::awaitable<outcome> get_all(call c) {
  arguments a("service.get_all", c, {});
  std::vector<std::string> services = co_await all_services(c.timeout);
  co_return outcome{std::move(services)};
}

// Salt's status: a bool, or {service: bool} when the name is a glob.
asio::awaitable<outcome> status(call c) {
  arguments a("service.status", c, {"name", "sig"});
  const std::string name = unit_argument(a);
  a.text("sig");  // Salt's API keeps it; systemd needs no process signature
  const bool glob = name.find_first_of("*?") != std::string::npos ||
                    (name.find('[') != std::string::npos && name.find(']') != std::string::npos);
  if (!glob) {
    bool active = co_await is_active(c.timeout, name);
    co_return outcome{active};
  }
  json ret = json::object();
  std::vector<std::string> services = co_await all_services(c.timeout);
  for (const auto& service : services) {
    if (::fnmatch(name.c_str(), service.c_str(), 0) == 0) {
      ret[service] = co_await is_active(c.timeout, service);
    }
  }
  co_return outcome{std::move(ret)};
}

// Salt's enabled: `systemctl is-enabled` succeeds (enabled, static,
// indirect, generated...), following an alias to the unit behind it.
asio::awaitable<bool> is_enabled(call c, std::string fun) {
  arguments a(fun, c, {"name"});
  const std::string name = unit_argument(a);
  std::vector<std::string> args = {"is-enabled", canonical_unit(name)};
  process_result r = co_await systemctl(c.timeout, std::move(args));
  if (r.timed_out) throw tool_failure(a.fun() + " " + name + ": " + failure_text(r));
  if (trim(r.stdout_text) != "alias") co_return r.retcode == 0;
  std::vector<std::string> show_args = {"show", canonical_unit(name), "-P", "Id"};
  process_result id = co_await systemctl(c.timeout, std::move(show_args));
  const std::string target = trim(id.stdout_text);
  if (id.retcode != 0 || target.empty() || target.front() == '-') co_return false;
  std::vector<std::string> target_args = {"is-enabled", target};
  process_result t = co_await systemctl(c.timeout, std::move(target_args));
  co_return t.retcode == 0 && !t.timed_out;
}

// Salt's _check_available on systemd >= 231: `systemctl status` exits 4 for
// a unit that does not exist, 0-3 for one that does (running or not).
asio::awaitable<bool> is_available(call c, std::string fun) {
  arguments a(fun, c, {"name"});
  const std::string name = unit_argument(a);
  std::vector<std::string> args = {"status", canonical_unit(name), "-n", "0", "--no-pager"};
  process_result r = co_await systemctl(c.timeout, std::move(args));
  if (r.timed_out) throw tool_failure(a.fun() + " " + name + ": " + failure_text(r));
  co_return r.retcode >= 0 && r.retcode < 4;
}

// Salt's masked: the unit file in /etc/systemd/system (/run/systemd/system
// for a runtime mask) is a link to /dev/null.
bool is_masked(const std::string& name, bool runtime) {
  const std::string link =
      std::string(runtime ? "/run" : "/etc") + "/systemd/system/" + canonical_unit(name);
  std::error_code ec;
  return std::filesystem::read_symlink(link, ec) == "/dev/null" && !ec;
}

asio::awaitable<outcome> mask_change(call c, const char* action_name) {
  const std::string action = action_name;
  arguments a("service." + action, c, {"name", "runtime"});
  const std::string name = unit_argument(a);
  const bool runtime = a.flag("runtime", false);
  // Salt's unmask does nothing for a unit that is not masked.
  if (action == "unmask" && !is_masked(name, runtime)) co_return outcome{true};
  std::vector<std::string> args = {action};
  if (runtime) args.push_back("--runtime");
  args.push_back(canonical_unit(name));
  process_result r = co_await systemctl(c.timeout, std::move(args));
  if (r.retcode != 0 || r.timed_out) {
    throw tool_failure("Failed to " + action + " service '" + name + "': " + failure_text(r));
  }
  co_return outcome{true};
}

asio::awaitable<outcome> enabled(call c) {
  bool on = co_await is_enabled(std::move(c), "service.enabled");
  co_return outcome{on};
}
asio::awaitable<outcome> disabled(call c) {
  bool on = co_await is_enabled(std::move(c), "service.disabled");
  co_return outcome{!on};
}
asio::awaitable<outcome> available(call c) {
  bool known = co_await is_available(std::move(c), "service.available");
  co_return outcome{known};
}
asio::awaitable<outcome> missing(call c) {
  bool known = co_await is_available(std::move(c), "service.missing");
  co_return outcome{!known};
}

asio::awaitable<outcome> masked(call c) {
  arguments a("service.masked", c, {"name", "runtime"});
  const std::string name = unit_argument(a);
  co_return outcome{is_masked(name, a.flag("runtime", false))};
}
asio::awaitable<outcome> mask(call c) { co_return co_await mask_change(std::move(c), "mask"); }
asio::awaitable<outcome> unmask(call c) { co_return co_await mask_change(std::move(c), "unmask"); }

}  // namespace
}  // namespace brine::modules::service::systemd

namespace brine::modules::service {

const operations& systemd_operations() {
  static const operations table = {
      .start = systemd::start,
      .stop = systemd::stop,
      .restart = systemd::restart,
      .reload = systemd::reload,
      .force_reload = systemd::force_reload,
      .status = systemd::status,
      .enable = systemd::enable,
      .disable = systemd::disable,
      .enabled = systemd::enabled,
      .disabled = systemd::disabled,
      .available = systemd::available,
      .missing = systemd::missing,
      .get_all = systemd::get_all,
      .masked = systemd::masked,
      .mask = systemd::mask,
      .unmask = systemd::unmask,
  };
  return table;
}

}  // namespace brine::modules::service
