// The shadow module: Salt's linux_shadow, as far as user.present needs it:
// shadow.info (getspnam), shadow.set_password (usermod -p: the tool keeps
// /etc/shadow's locking and last-change date, where Salt rewrites the file
// itself), shadow.default_hash.

#include <shadow.h>

#include <cerrno>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "modules/arguments.h"
#include "modules/process.h"
#include "modules/registry.h"

namespace brine::modules {
namespace shadow_mod {
namespace {

using json = nlohmann::json;

// Salt's shadow.info: the entry, or every field "" when there is none.
json shadow_info(const std::string& name) {
  std::vector<char> buf(16384);
  spwd entry{};
  spwd* found = nullptr;
  while (true) {
    int rc = ::getspnam_r(name.c_str(), &entry, buf.data(), buf.size(), &found);
    if (rc == ERANGE && buf.size() < (std::size_t{1} << 24)) {
      buf.resize(buf.size() * 2);
      continue;
    }
    break;
  }
  if (found == nullptr) {
    return json{{"name", ""}, {"passwd", ""}, {"lstchg", ""}, {"min", ""},
                {"max", ""},  {"warn", ""},   {"inact", ""},  {"expire", ""}};
  }
  return json{{"name", found->sp_namp ? found->sp_namp : ""},
              {"passwd", found->sp_pwdp ? found->sp_pwdp : ""},
              {"lstchg", found->sp_lstchg},
              {"min", found->sp_min},
              {"max", found->sp_max},
              {"warn", found->sp_warn},
              {"inact", found->sp_inact},
              {"expire", found->sp_expire}};
}

std::string user_name(const arguments& a) {
  std::optional<std::string> name = a.text("name");
  if (!name || name->empty() || name->front() == '-' ||
      name->find_first_of(":,/ \t\r\n") != std::string::npos) {
    a.fail("needs a user name: " + a.fun() + " NAME");
  }
  return *name;
}

asio::awaitable<outcome> info(call c) {
  arguments a("shadow.info", c, {"name", "root"});
  std::string name = user_name(a);
  if (a.get("root") != nullptr) a.fail("root is not supported by brine");
  co_return outcome{shadow_info(name)};
}

asio::awaitable<outcome> set_password(call c) {
  arguments a("shadow.set_password", c, {"name", "password", "use_usermod", "root"});
  std::string name = user_name(a);
  std::optional<std::string> password = a.text("password");
  if (!password) a.fail("needs the password hash: shadow.set_password NAME HASH");
  if (password->find_first_of(":\r\n") != std::string::npos) {
    a.fail("password must be a hash without ':' or newlines");
  }
  a.flag("use_usermod", false);  // brine always uses usermod
  if (a.get("root") != nullptr) a.fail("root is not supported by brine");
  if (shadow_info(name)["name"] == "") co_return outcome{false};
  process_options opts;
  opts.argv = {"usermod", "-p", *password, name};
  opts.env = {{"LC_ALL", "C"}};
  opts.timeout = child_limit(c.timeout);
  process_result r = co_await run_process(std::move(opts));
  if (r.retcode != 0 || r.timed_out) {
    throw tool_failure("shadow.set_password " + name + ": " + tool_error("usermod", r));
  }
  co_return outcome{shadow_info(name)["passwd"] == *password};
}

asio::awaitable<outcome> default_hash(call c) {
  arguments a("shadow.default_hash", c, {});
  co_return outcome{"!"};
}

}  // namespace
}  // namespace shadow_mod

void register_shadow_module(registry& reg) {
  using namespace shadow_mod;
  reg.add("shadow.info", failures_as_outcomes<info>,
          "shadow.info NAME: returns the user's shadow entry: {name, passwd, lstchg, min, max, "
          "warn, inact, expire} (every field '' when there is none; needs root).\n"
          "CLI Example: brine cmd '*' shadow.info root");
  reg.add("shadow.set_password", failures_as_outcomes<set_password>,
          "shadow.set_password NAME HASH: sets the user's password hash (as mkpasswd or "
          "openssl passwd make it) with usermod -p; returns True when the entry holds it.\n"
          "CLI Example: brine cmd '*' shadow.set_password alice '$6$salt$hash'");
  reg.add("shadow.default_hash", failures_as_outcomes<default_hash>,
          "shadow.default_hash: returns the hash of an account without a password ('!').\n"
          "CLI Example: brine cmd '*' shadow.default_hash");
}

}  // namespace brine::modules
