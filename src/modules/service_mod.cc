// The service module: one registration of the `service.*` names, each
// calling the backend that manages this host's services (service.h):
// systemd where it is the running init, Debian's init.d scripts elsewhere.

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "modules/arguments.h"
#include "modules/registry.h"
#include "modules/service.h"

namespace brine::modules {
namespace service {

namespace service_mod {
namespace {

// Salt's salt.utils.systemd.booted.
constexpr const char* k_systemd_marker = "/run/systemd/system";

// ID= of /etc/os-release, unquoted.
std::string os_release_id() {
  std::ifstream in("/etc/os-release");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("ID=")) continue;
    std::string id = line.substr(3);
    if (id.size() >= 2 && (id.front() == '"' || id.front() == '\''))
      id = id.substr(1, id.size() - 2);
    return id;
  }
  return "";
}

}  // namespace
}  // namespace service_mod

backend detect() {
  using namespace service_mod;
  struct stat st {};
  if (::stat(k_systemd_marker, &st) == 0 && S_ISDIR(st.st_mode)) return backend::systemd;
  const std::string id = os_release_id();
  // Salt's debian_service loads on the grains os Debian, Raspbian, Devuan.
  if (id == "debian" || id == "raspbian" || id == "devuan") return backend::initd;
  return backend::none;
}

backend chosen() {
  using namespace service_mod;
  static const backend b = detect();
  return b;
}

bool offline() {
  using namespace service_mod;
  if (chosen() == backend::systemd) return false;
  std::string dirs;
  if (const char* path = std::getenv("PATH"); path != nullptr) dirs = path;
  // salt.utils.path.which also looks in the standard directories.
  dirs += ":/sbin:/bin:/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = dirs.substr(start, end - start);
    struct stat st {};
    const std::string file = dir + "/systemctl";
    if (!dir.empty() && ::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(file.c_str(), X_OK) == 0) {
      return true;
    }
    start = end + 1;
  }
  return false;
}

const char* backend_name(backend b) {
  using namespace service_mod;
  switch (b) {
    case backend::systemd:
      return "systemd";
    case backend::initd:
      return "Debian's init.d scripts";
    case backend::none:
      break;
  }
  return "nothing brine knows";
}

namespace service_mod {
namespace {

// The table of the backend chosen for this host; null where there is none.
const operations* chosen_operations() {
  switch (chosen()) {
    case backend::systemd:
      return &systemd_operations();
    case backend::initd:
      return &initd_operations();
    case backend::none:
      break;
  }
  return nullptr;
}

// The function `op` of this host's backend, or a failure saying why there
// is none (Salt: "'service.X' is not available").
template <function_ptr operations::*op>
asio::awaitable<outcome> dispatch(call c) {
  const operations* ops = chosen_operations();
  function_ptr fn = ops != nullptr ? ops->*op : nullptr;
  if (fn != nullptr) co_return co_await fn(std::move(c));
  const backend b = chosen();
  if (b == backend::none) {
    throw tool_failure(c.fun +
                       ": no service manager brine knows runs on this host: systemd is "
                       "not running (" +
                       std::string(k_systemd_marker) +
                       " is missing) and this is not Debian (init.d scripts and update-rc.d)");
  }
  throw tool_failure("'" + c.fun + "' is not available where services are managed by " +
                     backend_name(b));
}

// The systemd-only functions where systemd is installed but not running
// fail as Salt's offline systemd module does.
asio::awaitable<outcome> systemd_offline(call c) {
  std::string unit;
  if (!c.args.empty() && c.args[0].is_string()) unit = c.args[0].get<std::string>();
  if (auto it = c.kwargs.find("name"); it != c.kwargs.end() && it->is_string()) {
    unit = it->get<std::string>();
  }
  throw tool_failure("Cannot run in offline mode. Failed to get information on unit '" + unit +
                     "'");
  co_return outcome{};
}

template <function_ptr operations::*op>
asio::awaitable<outcome> dispatch_systemd_only(call c) {
  if (chosen() == backend::initd && offline()) co_return co_await systemd_offline(std::move(c));
  co_return co_await dispatch<op>(std::move(c));
}

asio::awaitable<outcome> offline_fn(call c) {
  arguments a("service.offline", c, {});
  co_return outcome{offline()};
}

template <function_ptr operations::*op>
void add(registry& reg, const char* name, const char* doc) {
  reg.add(name, failures_as_outcomes<dispatch<op>>, doc);
}

}  // namespace
}  // namespace service_mod
}  // namespace service

void register_service_module(registry& reg) {
  using namespace service::service_mod;
  using service::operations;
  add<&operations::start>(
      reg, "service.start",
      "service.start NAME [no_block=False] [unmask=False] [unmask_runtime=False]: starts the "
      "service, returns True. With systemd: systemctl start (NAME without a type is "
      "NAME.service), failing with systemctl's message; on Debian without systemd: "
      "`service NAME start`, False when the script fails (no_block and unmask are systemd's).\n"
      "CLI Example: brine cmd '*' service.start nginx");
  add<&operations::stop>(
      reg, "service.stop",
      "service.stop NAME [no_block=False]: stops the service (systemctl stop, or `service NAME "
      "stop`), returns True; False or systemctl's message when it fails.\n"
      "CLI Example: brine cmd '*' service.stop nginx");
  add<&operations::restart>(
      reg, "service.restart",
      "service.restart NAME [no_block=False] [unmask=False] [unmask_runtime=False]: restarts "
      "the service (systemctl restart, or `service NAME restart`), returns True; False or "
      "systemctl's message when it fails.\n"
      "CLI Example: brine cmd '*' service.restart nginx");
  add<&operations::reload>(
      reg, "service.reload",
      "service.reload NAME [no_block=False] [unmask=False] [unmask_runtime=False]: reloads the "
      "service's configuration (systemctl reload, or `service NAME reload`), returns True; "
      "False or systemctl's message when it fails.\n"
      "CLI Example: brine cmd '*' service.reload nginx");
  add<&operations::force_reload>(
      reg, "service.force_reload",
      "service.force_reload NAME [no_block=True] [unmask=False] [unmask_runtime=False]: "
      "systemctl force-reload, or `service NAME force-reload`; returns True, False or "
      "systemctl's message when it fails.\n"
      "CLI Example: brine cmd '*' service.force_reload nginx");
  add<&operations::status>(
      reg, "service.status",
      "service.status NAME [sig]: returns True when the service runs (systemctl is-active, or "
      "the exit code of `service NAME status`), False otherwise; a glob NAME returns {service: "
      "bool}. Without systemd, sig (a regular expression) asks `ps -efHww` instead.\n"
      "CLI Example: brine cmd '*' service.status nginx");
  add<&operations::enable>(
      reg, "service.enable",
      "service.enable NAME [no_block=False] [unmask=False] [unmask_runtime=False]: starts the "
      "service at boot (systemctl enable, or `insserv NAME && update-rc.d NAME enable`), "
      "returns True; False or systemctl's message when it fails.\n"
      "CLI Example: brine cmd '*' service.enable nginx");
  add<&operations::disable>(
      reg, "service.disable",
      "service.disable NAME [no_block=False]: no start at boot (systemctl disable, or "
      "`update-rc.d NAME disable`), returns True; False or systemctl's message when it fails.\n"
      "CLI Example: brine cmd '*' service.disable nginx");
  add<&operations::enabled>(
      reg, "service.enabled",
      "service.enabled NAME: returns True when the service starts at boot (systemctl "
      "is-enabled succeeds: enabled, static, indirect...; without systemd: an S link in "
      "/etc/rcS.d or the runlevel's rc directory), False otherwise.\n"
      "CLI Example: brine cmd '*' service.enabled nginx");
  add<&operations::disabled>(
      reg, "service.disabled",
      "service.disabled NAME: the opposite of service.enabled (without systemd: a known "
      "service that is not enabled).\n"
      "CLI Example: brine cmd '*' service.disabled nginx");
  add<&operations::available>(
      reg, "service.available",
      "service.available NAME: returns True when the service exists (a unit systemd knows, or "
      "a script in /etc/init.d), running or not; False otherwise.\n"
      "CLI Example: brine cmd '*' service.available nginx");
  add<&operations::missing>(reg, "service.missing",
                            "service.missing NAME: the opposite of service.available.\n"
                            "CLI Example: brine cmd '*' service.missing nginx");
  add<&operations::get_all>(
      reg, "service.get_all",
      "service.get_all: returns the sorted names of all services (service units without "
      ".service, from systemctl list-unit-files and list-units; or the scripts in "
      "/etc/init.d and the enabled services).\n"
      "CLI Example: brine cmd '*' service.get_all");
  add<&operations::get_enabled>(
      reg, "service.get_enabled",
      "service.get_enabled: returns the sorted names of the services that start at boot (S "
      "links in /etc/rcS.d and the runlevel's rc directory); Debian without systemd only.\n"
      "CLI Example: brine cmd '*' service.get_enabled");
  add<&operations::get_disabled>(
      reg, "service.get_disabled",
      "service.get_disabled: returns the sorted names of the services in service.get_all that "
      "do not start at boot; Debian without systemd only.\n"
      "CLI Example: brine cmd '*' service.get_disabled");
  reg.add("service.offline", failures_as_outcomes<service::service_mod::offline_fn>,
          "service.offline: returns True when systemd is installed (systemctl found) but is not "
          "this host's running init, as in a container; service.running and service.dead then "
          "do nothing, as Salt's do.\n"
          "CLI Example: brine cmd '*' service.offline");
  reg.add("service.masked",
          failures_as_outcomes<service::service_mod::dispatch_systemd_only<&operations::masked>>,
          "service.masked NAME [runtime=False]: returns True when the unit is masked (its file in "
          "/etc/systemd/system, or /run/systemd/system for runtime, links to /dev/null); systemd "
          "only.\n"
          "CLI Example: brine cmd '*' service.masked nginx");
  reg.add("service.mask",
          failures_as_outcomes<service::service_mod::dispatch_systemd_only<&operations::mask>>,
          "service.mask NAME [runtime=False]: masks the unit (systemctl mask [--runtime]), returns "
          "True; systemd only.\n"
          "CLI Example: brine cmd '*' service.mask nginx");
  reg.add("service.unmask",
          failures_as_outcomes<service::service_mod::dispatch_systemd_only<&operations::unmask>>,
          "service.unmask NAME [runtime=False]: removes the unit's mask (systemctl unmask "
          "[--runtime]) when it has one, returns True; systemd only.\n"
          "CLI Example: brine cmd '*' service.unmask nginx");
}

}  // namespace brine::modules
