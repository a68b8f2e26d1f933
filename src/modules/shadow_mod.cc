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

#include "base/python_str.h"
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

// Salt's _set_attrib (validate=False, as every caller of it here passes):
// chage FLAG VALUE NAME unless the entry's `key` already holds VALUE; True
// when chage printed nothing, False for a user without an entry.
asio::awaitable<outcome> set_attrib(call c, const char* fun, const char* param, const char* key,
                                    const char* flag) {
  arguments a(fun, c, {"name", param, "root"});
  std::string name = user_name(a);
  if (a.get("root") != nullptr) a.fail("root is not supported by brine");
  const nlohmann::json& value = a.need(param);
  if (!value.is_primitive() || value.is_null()) a.fail(std::string(param) + " must be a number or a date");
  std::string text = base::python_str_of(value);
  if (text.find_first_of("\r\n") != std::string::npos) a.fail(std::string(param) + " must be one line");
  json pre = shadow_info(name);
  if (pre["name"] == "") co_return outcome{false};
  if (value == pre[key]) co_return outcome{true};
  process_options opts;
  opts.argv = {"chage", flag, text, name};
  opts.env = {{"LC_ALL", "C"}};
  opts.timeout = child_limit(c.timeout);
  process_result r = co_await run_process(std::move(opts));
  co_return outcome{r.stdout_text.empty() && !r.timed_out};
}

asio::awaitable<outcome> set_date(call c) {
  co_return co_await set_attrib(std::move(c), "shadow.set_date", "date", "lstchg", "-d");
}
asio::awaitable<outcome> set_mindays(call c) {
  co_return co_await set_attrib(std::move(c), "shadow.set_mindays", "mindays", "min", "-m");
}
asio::awaitable<outcome> set_maxdays(call c) {
  co_return co_await set_attrib(std::move(c), "shadow.set_maxdays", "maxdays", "max", "-M");
}
asio::awaitable<outcome> set_inactdays(call c) {
  co_return co_await set_attrib(std::move(c), "shadow.set_inactdays", "inactdays", "inact", "-I");
}
asio::awaitable<outcome> set_warndays(call c) {
  co_return co_await set_attrib(std::move(c), "shadow.set_warndays", "warndays", "warn", "-W");
}
asio::awaitable<outcome> set_expire(call c) {
  co_return co_await set_attrib(std::move(c), "shadow.set_expire", "expire", "expire", "-E");
}

// Salt's del_password: passwd -d NAME; True when the entry is left with no
// password.
asio::awaitable<outcome> del_password(call c) {
  arguments a("shadow.del_password", c, {"name", "root"});
  std::string name = user_name(a);
  if (a.get("root") != nullptr) a.fail("root is not supported by brine");
  process_options opts;
  opts.argv = {"passwd", "-d", name};
  opts.env = {{"LC_ALL", "C"}};
  opts.timeout = child_limit(c.timeout);
  co_await run_process(std::move(opts));
  json after = shadow_info(name);
  co_return outcome{after["passwd"] == "" && after["name"] == name};
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
  struct setter {
    const char* name;
    function fn;
    const char* what;
    const char* example;
  };
  for (const setter& st : {
           setter{"shadow.set_date", failures_as_outcomes<set_date>, "DATE: the date of the last password change (days since 1970-01-01, or YYYY-MM-DD)", "shadow.set_date alice 2026-01-01"},
           setter{"shadow.set_mindays", failures_as_outcomes<set_mindays>, "DAYS: the days before the password may be changed", "shadow.set_mindays alice 7"},
           setter{"shadow.set_maxdays", failures_as_outcomes<set_maxdays>, "DAYS: the days the password stays valid", "shadow.set_maxdays alice 90"},
           setter{"shadow.set_inactdays", failures_as_outcomes<set_inactdays>, "DAYS: the days after expiry before the account locks", "shadow.set_inactdays alice 14"},
           setter{"shadow.set_warndays", failures_as_outcomes<set_warndays>, "DAYS: the days of warning before the password expires", "shadow.set_warndays alice 7"},
           setter{"shadow.set_expire", failures_as_outcomes<set_expire>, "DATE: the day the account expires (days since 1970-01-01, YYYY-MM-DD, or -1 for never)", "shadow.set_expire alice 2027-01-01"}}) {
    reg.add(st.name, st.fn,
            std::string(st.name) + " NAME " + st.what + ", with chage; True when chage had "
            "nothing to say (False for a user without a shadow entry).\nCLI Example: brine cmd '*' " +
            st.example);
  }
  reg.add("shadow.del_password", failures_as_outcomes<del_password>,
          "shadow.del_password NAME: removes the user's password (passwd -d), so the account "
          "has none; True when the entry is left without one.\n"
          "CLI Example: brine cmd '*' shadow.del_password alice");
  reg.add("shadow.default_hash", failures_as_outcomes<default_hash>,
          "shadow.default_hash: returns the hash of an account without a password ('!').\n"
          "CLI Example: brine cmd '*' shadow.default_hash");
}

}  // namespace brine::modules
