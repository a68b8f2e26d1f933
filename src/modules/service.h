#pragma once

// The service module's two backends behind one set of `service.*` names
// (service_mod.cc registers them): Salt's systemd_service where systemd is
// the running init (service_systemd.cc), Salt's debian_service on Debian
// without it (service_initd.cc: /etc/init.d scripts driven by `service`,
// boot links by update-rc.d). Salt picks one of them when it loads its
// modules; brine asks at each call, which costs a stat.

#include <asio/awaitable.hpp>

#include "modules/registry.h"

namespace brine::modules::service {

enum class backend { systemd, initd, none };

// Salt's choice: systemd when booted with it (/run/systemd/system is a
// directory), else init.d on Debian, Raspbian and Devuan (ID in
// /etc/os-release), else none.
backend detect();
const char* backend_name(backend b);

// Salt's salt.utils.systemd.offline: systemd is installed (systemctl in
// PATH or a standard bin directory) but not running, as in a container or a
// chroot. Salt 3006 then also loads its systemd module beside the init.d one:
// service.running and service.dead do nothing ("Running in OFFLINE mode"),
// and the systemd-only functions (masked, mask, unmask) fail saying so.
bool offline();

using function_ptr = asio::awaitable<outcome> (*)(call);

namespace systemd {
asio::awaitable<outcome> start(call c);
asio::awaitable<outcome> stop(call c);
asio::awaitable<outcome> restart(call c);
asio::awaitable<outcome> reload(call c);
asio::awaitable<outcome> force_reload(call c);
asio::awaitable<outcome> status(call c);
asio::awaitable<outcome> enable(call c);
asio::awaitable<outcome> disable(call c);
asio::awaitable<outcome> enabled(call c);
asio::awaitable<outcome> disabled(call c);
asio::awaitable<outcome> available(call c);
asio::awaitable<outcome> missing(call c);
asio::awaitable<outcome> get_all(call c);
asio::awaitable<outcome> masked(call c);
asio::awaitable<outcome> mask(call c);
asio::awaitable<outcome> unmask(call c);
}  // namespace systemd

namespace initd {
asio::awaitable<outcome> start(call c);
asio::awaitable<outcome> stop(call c);
asio::awaitable<outcome> restart(call c);
asio::awaitable<outcome> reload(call c);
asio::awaitable<outcome> force_reload(call c);
asio::awaitable<outcome> status(call c);
asio::awaitable<outcome> enable(call c);
asio::awaitable<outcome> disable(call c);
asio::awaitable<outcome> enabled(call c);
asio::awaitable<outcome> disabled(call c);
asio::awaitable<outcome> available(call c);
asio::awaitable<outcome> missing(call c);
asio::awaitable<outcome> get_all(call c);
asio::awaitable<outcome> get_enabled(call c);
asio::awaitable<outcome> get_disabled(call c);
}  // namespace initd

}  // namespace brine::modules::service
