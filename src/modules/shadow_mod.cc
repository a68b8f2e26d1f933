// The shadow module: Salt's linux_shadow, as far as user.present needs it:
// shadow.info (getspnam), shadow.set_password (usermod -p: the tool keeps
// /etc/shadow's locking and last-change date, where Salt rewrites the file
// itself), shadow.default_hash, shadow.gen_password (crypt(3), Salt's
// pycrypto.gen_hash), shadow.lock_password/unlock_password (passwd -l/-u).

#include <crypt.h>
#include <openssl/rand.h>
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

// Salt's gen_hash through crypt: the algorithm's prefix ($6$ for sha512)
// and the salt given, or 16 random characters of crypt's alphabet (Python's
// crypt.mksalt); DES ("crypt") takes a two-character salt of its own.
asio::awaitable<outcome> gen_password(call c) {
  arguments a("shadow.gen_password", c, {"password", "crypt_salt", "algorithm"});
  std::optional<std::string> password = a.text("password");
  if (!password) a.fail("needs the clear text: shadow.gen_password PASSWORD");
  std::string algorithm = a.text("algorithm").value_or("sha512");
  struct method {
    const char* name;
    const char* ident;
  };
  static const method k_methods[] = {
      {"md5", "1"}, {"blowfish", "2b"}, {"sha256", "5"}, {"sha512", "6"}, {"crypt", ""}};
  const method* m = nullptr;
  for (const auto& each : k_methods)
    if (algorithm == each.name) m = &each;
  if (m == nullptr) a.fail("Algorithm '" + algorithm + "' is not supported");
  std::optional<std::string> salt = a.text("crypt_salt");
  if (salt && salt->find_first_of("$:\r\n") != std::string::npos) {
    a.fail("crypt_salt must not hold '$', ':' or newlines, got '" + *salt + "'");
  }
  std::string setting;
  if (!salt) {
    static const char k_chars[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789./";
    std::size_t length = *m->ident ? (std::string(m->ident) == "2b" ? 22 : 16) : 2;
    std::vector<unsigned char> bytes(length);
    if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
      throw tool_failure("shadow.gen_password: no random bytes from OpenSSL");
    }
    std::string random;
    for (unsigned char b : bytes) random += k_chars[b % 64];
    setting = *m->ident ? "$" + std::string(m->ident) + "$" +
                              (std::string(m->ident) == "2b" ? "12$" : "") + random
                        : random;
  } else if (*m->ident) {
    setting = "$" + std::string(m->ident) + "$" + *salt;
  } else {
    if (salt->size() != 2) a.fail("Invalid salt for hash, 'crypt' salt must be 2 characters.");
    setting = *salt;
  }
  crypt_data data{};
  const char* hashed = ::crypt_rn(password->c_str(), setting.c_str(), &data, sizeof data);
  if (hashed == nullptr || *hashed == '*') {
    throw tool_failure("shadow.gen_password: crypt(3) refused the " + algorithm + " setting '" +
                       setting + "' (this system's libcrypt lacks the method, or the salt is "
                       "not valid for it)");
  }
  co_return outcome{std::string(hashed)};
}

// Salt's lock_password/unlock_password: passwd -l/-u unless the hash
// already starts (or does not start) with '!'; False for a user without an
// entry, else whether the entry is now locked (unlocked).
asio::awaitable<outcome> set_lock(call c, bool lock) {
  const char* fun = lock ? "shadow.lock_password" : "shadow.unlock_password";
  arguments a(fun, c, {"name", "root"});
  std::string name = user_name(a);
  if (a.get("root") != nullptr) a.fail("root is not supported by brine");
  json pre = shadow_info(name);
  if (pre["name"] == "") co_return outcome{false};
  auto locked = [](const json& info) { return info["passwd"].get<std::string>().starts_with("!"); };
  if (locked(pre) == lock) co_return outcome{true};
  process_options opts;
  opts.argv = {"passwd", lock ? "-l" : "-u", name};
  opts.env = {{"LC_ALL", "C"}};
  opts.timeout = child_limit(c.timeout);
  co_await run_process(std::move(opts));
  co_return outcome{locked(shadow_info(name)) == lock};
}

asio::awaitable<outcome> lock_password(call c) { co_return co_await set_lock(std::move(c), true); }
asio::awaitable<outcome> unlock_password(call c) {
  co_return co_await set_lock(std::move(c), false);
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
  reg.add("shadow.gen_password", failures_as_outcomes<gen_password>,
          "shadow.gen_password PASSWORD [crypt_salt=SALT] [algorithm=sha512]: the crypt(3) hash "
          "of a clear-text password (md5, blowfish, sha256, sha512 or crypt), with the salt given "
          "or a random one; what user.present's password takes.\n"
          "CLI Example: brine cmd '*' shadow.gen_password 'I_am_password' crypt_salt=I_am_salt "
          "algorithm=sha256");
  reg.add("shadow.lock_password", failures_as_outcomes<lock_password>,
          "shadow.lock_password NAME: locks the user's password (passwd -l, a '!' before the "
          "hash); True when it is locked, False for a user without a shadow entry.\n"
          "CLI Example: brine cmd '*' shadow.lock_password alice");
  reg.add("shadow.unlock_password", failures_as_outcomes<unlock_password>,
          "shadow.unlock_password NAME: unlocks the user's password (passwd -u); True when it "
          "is unlocked, False for a user without a shadow entry.\n"
          "CLI Example: brine cmd '*' shadow.unlock_password alice");
  reg.add("shadow.default_hash", failures_as_outcomes<default_hash>,
          "shadow.default_hash: returns the hash of an account without a password ('!').\n"
          "CLI Example: brine cmd '*' shadow.default_hash");
}

}  // namespace brine::modules
