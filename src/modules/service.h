#pragma once

// The service module's two backends behind one set of `service.*` names
// (service_mod.cc registers them): Salt's systemd_service where systemd is
// the running init (service_systemd.cc), Salt's debian_service on Debian
// without it (service_initd.cc: /etc/init.d scripts driven by `service`,
// boot links by update-rc.d). Each backend is a table of its functions;
// like Salt, which picks one when it loads its modules, brine picks the
// table once, at the first service call.

#include <asio/awaitable.hpp>

#include "modules/registry.h"

namespace brine::modules::service {

enum class backend { systemd, initd, none };

// Salt's choice: systemd when booted with it (/run/systemd/system is a
// directory), else init.d on Debian, Raspbian and Devuan (ID in
// /etc/os-release), else none.
backend detect();
// detect()'s answer, asked once per process (thread-safe): what the
// service module and states go by.
backend chosen();
const char* backend_name(backend b);

// Salt's salt.utils.systemd.offline: systemd is installed (systemctl in
// PATH or a standard bin directory) but not running, as in a container or a
// chroot. Salt 3006 then also loads its systemd module beside the init.d one:
// service.running and service.dead do nothing ("Running in OFFLINE mode"),
// and the systemd-only functions (masked, mask, unmask) fail saying so.
bool offline();

using function_ptr = asio::awaitable<outcome> (*)(call);

// What a backend does for each `service.*` name; null where it has no such
// function (Salt: "'service.X' is not available").
struct operations {
  function_ptr start = nullptr;
  function_ptr stop = nullptr;
  function_ptr restart = nullptr;
  function_ptr reload = nullptr;
  function_ptr force_reload = nullptr;
  function_ptr status = nullptr;
  function_ptr enable = nullptr;
  function_ptr disable = nullptr;
  function_ptr enabled = nullptr;
  function_ptr disabled = nullptr;
  function_ptr available = nullptr;
  function_ptr missing = nullptr;
  function_ptr get_all = nullptr;
  // init.d alone.
  function_ptr get_enabled = nullptr;
  function_ptr get_disabled = nullptr;
  // systemd alone.
  function_ptr masked = nullptr;
  function_ptr mask = nullptr;
  function_ptr unmask = nullptr;
};

// The backends' tables (service_systemd.cc, service_initd.cc).
const operations& systemd_operations();
const operations& initd_operations();

}  // namespace brine::modules::service
