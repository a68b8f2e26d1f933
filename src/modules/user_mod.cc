// The user module: Salt's useradd and groupadd, user.* and group.*. Reads
// go through NSS (getpwnam_r, getgrouplist, getpwent_r, getgrent_r), so they
// see LDAP or SSSD accounts as the system does; changes run the shadow
// tools (useradd, userdel, groupadd, groupdel).

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <asio/co_spawn.hpp>
#include <asio/thread_pool.hpp>
#include <asio/use_awaitable.hpp>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "modules/accounts.h"
#include "modules/args.h"
#include "modules/arguments.h"
#include "modules/process.h"
#include "modules/registry.h"

namespace brine::modules {
namespace user_mod {
namespace {

using json = nlohmann::json;
// NSS may ask LDAP or SSSD over the network, so lookups never run on the
// caller's executor. One thread: getpwent and getgrent enumerate through
// process-wide state, which one thread keeps unshared. Lives until exit.
asio::thread_pool& nss_pool() {
  static asio::thread_pool pool(1);
  return pool;
}

template <typename T>
asio::awaitable<T> run_work(std::function<T()> work) {
  co_return work();
}

// GCC 12 destroys a temporary lambda or std::function in a co_await
// expression twice, so callers pass a named std::function, moved.
template <typename T>
asio::awaitable<T> on_nss_thread(std::function<T()> work) {
  asio::awaitable<T> task = run_work<T>(std::move(work));
  T result = co_await asio::co_spawn(nss_pool(), std::move(task), asio::use_awaitable);
  co_return result;
}

struct user_entry {
  std::string name, passwd, gecos, home, shell;
  uid_t uid = 0;
  gid_t gid = 0;
};

struct group_entry {
  std::string name, passwd;
  gid_t gid = 0;
  std::vector<std::string> members;
};

user_entry to_user(const passwd& pw) {
  return user_entry{pw.pw_name ? pw.pw_name : "",
                    pw.pw_passwd ? pw.pw_passwd : "",
                    pw.pw_gecos ? pw.pw_gecos : "",
                    pw.pw_dir ? pw.pw_dir : "",
                    pw.pw_shell ? pw.pw_shell : "",
                    pw.pw_uid,
                    pw.pw_gid};
}

group_entry to_group(const group& gr) {
  group_entry g{gr.gr_name ? gr.gr_name : "", gr.gr_passwd ? gr.gr_passwd : "", gr.gr_gid, {}};
  for (char** m = gr.gr_mem; m != nullptr && *m != nullptr; ++m) g.members.emplace_back(*m);
  return g;
}

// Calls a reentrant NSS function, `lookup(key..., &entry, buffer, size,
// &result)` (getpwnam_r, getgrent_r, ...), doubling `buf` while the entry
// does not fit (ERANGE) up to a limit. The entry, its strings in `buf`; or
// nullopt, `rc` saying why.
template <typename Raw, typename Lookup, typename... Key>
std::optional<Raw> nss_call(std::vector<char>& buf, int& rc, Lookup lookup, Key... key) {
  constexpr std::size_t k_max_buffer = std::size_t{64} << 20;
  while (true) {
    Raw entry{};
    Raw* result = nullptr;
    rc = lookup(key..., &entry, buf.data(), buf.size(), &result);
    if (rc == ERANGE && buf.size() < k_max_buffer) {
      buf.resize(buf.size() * 2);
      continue;
    }
    if (result == nullptr) return std::nullopt;
    return entry;
  }
}

// The first buffer for the *_r calls of a database: its sysconf size hint.
std::vector<char> nss_buffer(int size_name) {
  long n = ::sysconf(size_name);
  return std::vector<char>(n > 0 ? static_cast<std::size_t>(n) : 16384);
}

// Not found is not an error; glibc says so with 0, some NSS modules with these.
bool not_found(int rc) {
  return rc == 0 || rc == ENOENT || rc == ESRCH || rc == EBADF || rc == EPERM;
}

// One user or group by name or id; nullopt when there is none.
template <typename Raw, typename Entry, typename Lookup, typename Key>
std::optional<Entry> find_entry(int size_name, Lookup lookup, Key key, Entry (*convert)(const Raw&),
                                const std::string& what) {
  std::vector<char> buf = nss_buffer(size_name);
  int rc = 0;
  if (std::optional<Raw> raw = nss_call<Raw>(buf, rc, lookup, key)) return convert(*raw);
  if (not_found(rc)) return std::nullopt;
  throw tool_failure("looking up " + what + ": " + std::strerror(rc));
}

std::optional<user_entry> find_user(const std::string& name) {
  return find_entry(_SC_GETPW_R_SIZE_MAX, ::getpwnam_r, name.c_str(), to_user, "user " + name);
}

std::optional<group_entry> find_group(const std::string& name) {
  return find_entry(_SC_GETGR_R_SIZE_MAX, ::getgrnam_r, name.c_str(), to_group, "group " + name);
}

std::optional<group_entry> find_group(gid_t gid) {
  return find_entry(_SC_GETGR_R_SIZE_MAX, ::getgrgid_r, gid, to_group,
                    "group " + std::to_string(gid));
}

// Salt's salt.utils.user.get_group_list: the names of every group the user
// is in, the primary one included, sorted.
std::vector<std::string> groups_of(const user_entry& u) {
  int count = 32;
  std::vector<gid_t> gids;
  while (true) {
    gids.resize(static_cast<std::size_t>(count));
    int wanted = count;
    if (::getgrouplist(u.name.c_str(), u.gid, gids.data(), &wanted) >= 0) {
      gids.resize(static_cast<std::size_t>(wanted));
      break;
    }
    if (wanted <= count)
      count *= 2;
    else
      count = wanted;
    if (count > 1 << 20) throw tool_failure("listing the groups of " + u.name + ": too many");
  }
  std::set<std::string> names;
  for (gid_t gid : gids) {
    if (std::optional<group_entry> g = find_group(gid)) names.insert(g->name);
  }
  return {names.begin(), names.end()};
}

// Every entry of the passwd or group database, enumerated with `next`
// (getpwent_r, getgrent_r) between `open` and `close`.
template <typename Raw, typename Entry, typename Next>
std::vector<Entry> all_entries(int size_name, void (*open)(), Next next, void (*close)(),
                               Entry (*convert)(const Raw&), const std::string& what) {
  std::vector<Entry> out;
  std::vector<char> buf = nss_buffer(size_name);
  int rc = 0;
  open();
  while (std::optional<Raw> raw = nss_call<Raw>(buf, rc, next)) out.push_back(convert(*raw));
  close();
  if (rc == 0 || rc == ENOENT) return out;
  throw tool_failure("listing " + what + ": " + std::strerror(rc));
}

std::vector<user_entry> all_users() {
  return all_entries(_SC_GETPW_R_SIZE_MAX, ::setpwent, ::getpwent_r, ::endpwent, to_user, "users");
}

std::vector<group_entry> all_groups() {
  return all_entries(_SC_GETGR_R_SIZE_MAX, ::setgrent, ::getgrent_r, ::endgrent, to_group,
                     "groups");
}

json user_json(const user_entry& u, std::vector<std::string> groups) {
  // GECOS: full name, room, work phone, home phone, and the rest as other.
  std::vector<std::string> gecos;
  std::size_t start = 0;
  while (gecos.size() < 4) {
    auto comma = u.gecos.find(',', start);
    if (comma == std::string::npos) break;
    gecos.push_back(u.gecos.substr(start, comma - start));
    start = comma + 1;
  }
  gecos.push_back(u.gecos.substr(std::min(start, u.gecos.size())));
  gecos.resize(5);
  return json{{"name", u.name},        {"passwd", u.passwd},     {"uid", u.uid},
              {"gid", u.gid},          {"home", u.home},         {"shell", u.shell},
              {"fullname", gecos[0]},  {"roomnumber", gecos[1]}, {"workphone", gecos[2]},
              {"homephone", gecos[3]}, {"other", gecos[4]},      {"groups", std::move(groups)}};
}

json group_json(const group_entry& g) {
  return json{{"name", g.name}, {"passwd", g.passwd}, {"gid", g.gid}, {"members", g.members}};
}

// Parameters brine recognizes but does not implement: refused unless left at
// Salt's default (None or False), rather than silently ignored.
void refuse(const arguments& a, const std::string& name) {
  const json* v = a.get(name);
  if (v == nullptr || (v->is_boolean() && !v->get<bool>())) return;
  a.fail(name + " is not supported by brine");
}

// A user or group name; a leading '-' would be read by the tools as an
// option, and ':' ',' or whitespace break /etc/passwd and /etc/group.
std::string account_name(const arguments& a, const std::string& what, const json* v) {
  if (v == nullptr) a.fail("needs the " + what + ": " + a.fun() + " NAME");
  std::string name = a.text_of(what, *v);
  if (name.empty() || name.front() == '-') {
    a.fail(what + " must not be empty or start with '-', got '" + name + "'");
  }
  for (char ch : name) {
    if (ch == ':' || ch == ',' || ch == '/' || std::isspace(static_cast<unsigned char>(ch)) ||
        std::iscntrl(static_cast<unsigned char>(ch))) {
      a.fail(what + " must not contain ':', ',', '/' or whitespace, got '" + name + "'");
    }
  }
  return name;
}

// The name looked up by info; any text is a harmless lookup.
std::string lookup_name(const arguments& a, const std::string& what) {
  const json* v = a.get("name");
  if (v == nullptr) a.fail("needs the " + what + ": " + a.fun() + " NAME");
  return a.text_of("name", *v);
}

// A uid or gid: a number or a string of digits (YAML may give either).
std::optional<std::string> id_argument(const arguments& a, const std::string& name,
                                       bool names_allowed) {
  const json* v = a.get(name);
  if (v == nullptr) return std::nullopt;
  const std::string expected = name + " must be a number from 0 to 4294967294" +
                               (names_allowed ? " or a group name" : "") + ", got " + v->dump();
  if (v->is_number_unsigned() || v->is_number_integer()) {
    if (v->is_number_integer() && v->get<long long>() < 0) a.fail(expected);
    if (v->get<unsigned long long>() > 4294967294ULL) a.fail(expected);
    return std::to_string(v->get<unsigned long long>());
  }
  if (!v->is_string()) a.fail(expected);
  std::string text = v->get<std::string>();
  if (text.empty()) return std::nullopt;  // Salt treats "" as not given
  bool digits = std::all_of(text.begin(), text.end(),
                            [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
  if (digits) {
    if (text.size() > 10 || std::stoull(text) > 4294967294ULL) a.fail(expected);
    return text;
  }
  if (!names_allowed) a.fail(expected);
  return account_name(a, name, v);
}

asio::awaitable<process_result> run_tool(std::chrono::seconds limit,
                                         std::vector<std::string> argv) {
  process_options opts;
  opts.argv = std::move(argv);
  opts.env = {{"LC_ALL", "C"}, {"LANGUAGE", "C"}};
  opts.timeout = child_limit(limit);
  process_result r = co_await run_process(std::move(opts));
  co_return r;
}

// A tool that failed or timed out fails the call: "user.add NAME: useradd
// exited 9: ...".
void check_tool(const process_result& r, const std::string& what, const std::string& tool) {
  if (r.retcode != 0 || r.timed_out) throw tool_failure(what + ": " + tool_error(tool, r));
}

asio::awaitable<outcome> user_info(call c) {
  arguments a("user.info", c, {"name", "root"});
  const std::string name = lookup_name(a, "user name");
  refuse(a, "root");
  std::function<json()> lookup = [name]() -> json {
    std::optional<user_entry> u = find_user(name);
    if (!u) return json::object();
    return user_json(*u, groups_of(*u));
  };
  json ret = co_await on_nss_thread(std::move(lookup));
  co_return outcome{std::move(ret)};
}

asio::awaitable<outcome> list_users(call c) {
  arguments a("user.list_users", c, {"root"});
  refuse(a, "root");
  std::function<std::vector<std::string>()> list = [] {
    std::set<std::string> sorted;
    for (const auto& u : all_users()) sorted.insert(u.name);
    return std::vector<std::string>(sorted.begin(), sorted.end());
  };
  std::vector<std::string> names = co_await on_nss_thread(std::move(list));
  co_return outcome{std::move(names)};
}

std::vector<std::string> group_list(const arguments& a) {
  std::vector<std::string> out;
  const json* v = a.get("groups");
  if (v == nullptr) return out;
  const std::string expected =
      "groups must be a list of group names or a comma-separated string, got ";
  if (v->is_string()) {
    std::string text = v->get<std::string>();
    std::size_t start = 0;
    while (!text.empty()) {
      auto comma = text.find(',', start);
      json item = text.substr(start, comma - start);
      out.push_back(account_name(a, "group name in groups", &item));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  } else if (v->is_array()) {
    for (const json& item : *v) {
      if (!item.is_string()) a.fail(expected + v->dump());
      out.push_back(account_name(a, "group name in groups", &item));
    }
  } else {
    a.fail(expected + v->dump());
  }
  return out;
}

std::string gecos_field(const arguments& a, const std::string& name) {
  std::string text = a.text(name).value_or("");
  for (char ch : text) {
    if (ch == ',' || ch == ':' || ch == '\n' || std::iscntrl(static_cast<unsigned char>(ch))) {
      a.fail(name + " must not contain ',', ':' or control characters, got '" + text + "'");
    }
  }
  return text;
}

asio::awaitable<outcome> user_add(call c) {
  arguments a("user.add", c,
              {"name", "uid", "gid", "groups", "home", "shell", "unique", "system", "fullname",
               "roomnumber", "workphone", "homephone", "other", "createhome", "loginclass",
               "nologinit", "root", "usergroup"});
  const std::string name = account_name(a, "user name", a.get("name"));
  std::optional<std::string> uid = id_argument(a, "uid", false);
  std::optional<std::string> gid = id_argument(a, "gid", true);
  std::vector<std::string> groups = group_list(a);
  std::optional<std::string> home = a.text("home");
  std::optional<std::string> shell = a.text("shell");
  const bool unique = a.flag("unique", true);
  const bool system = a.flag("system", false);
  const bool createhome = a.flag("createhome", true);
  const bool nologinit = a.flag("nologinit", false);
  std::optional<bool> usergroup;
  if (a.get("usergroup") != nullptr) usergroup = a.flag("usergroup", false);
  // Salt's _build_gecos: the five fields, trailing empty ones dropped.
  std::string gecos = gecos_field(a, "fullname") + "," + gecos_field(a, "roomnumber") + "," +
                      gecos_field(a, "workphone") + "," + gecos_field(a, "homephone") + "," +
                      gecos_field(a, "other");
  gecos.erase(gecos.find_last_not_of(',') + 1);  // npos + 1: all empty, erase all
  refuse(a, "loginclass");
  refuse(a, "root");
  if (home && home->empty()) a.fail("home must be a directory path, got ''");
  if (shell && shell->empty()) a.fail("shell must be a program path, got ''");
  if (!unique && !uid) a.fail("unique=False needs uid= (it allows a uid that is already used)");

  // Salt: when the user is to be in a group of its own name that already
  // exists, make it the primary group, or useradd refuses (USERGROUPS_ENAB).
  // One that does not exist yet is the group useradd creates for the user.
  if (std::find(groups.begin(), groups.end(), name) != groups.end()) {
    std::function<bool()> lookup = [name] { return find_group(name).has_value(); };
    bool exists = co_await on_nss_thread(std::move(lookup));
    if (!exists) {
      groups.erase(std::remove(groups.begin(), groups.end(), name), groups.end());
    } else if (!gid && usergroup != true) {
      gid = name;
    }
  }

  std::vector<std::string> argv = {"useradd"};
  if (shell) argv.insert(argv.end(), {"-s", *shell});
  if (uid) argv.insert(argv.end(), {"-u", *uid});
  if (gid) {
    argv.insert(argv.end(), {"-g", *gid});
  } else if (usergroup == true) {
    argv.push_back("-U");
  }
  if (usergroup == false) argv.push_back("-N");
  if (!groups.empty()) {
    std::string list;
    for (const auto& g : groups) list += (list.empty() ? "" : ",") + g;
    argv.insert(argv.end(), {"-G", list});
  }
  argv.push_back(createhome ? "-m" : "-M");
  if (nologinit) argv.push_back("-l");
  if (home) argv.insert(argv.end(), {"-d", *home});
  if (!unique) argv.push_back("-o");
  if (system) argv.push_back("-r");
  if (!gecos.empty()) argv.insert(argv.end(), {"-c", gecos});
  argv.push_back(name);
  process_result r = co_await run_tool(c.timeout, std::move(argv));
  check_tool(r, "user.add " + name, "useradd");
  co_return outcome{true};
}

asio::awaitable<outcome> user_delete(call c) {
  arguments a("user.delete", c, {"name", "remove", "force", "root", "local"});
  const std::string name = account_name(a, "user name", a.get("name"));
  const bool remove = a.flag("remove", false);
  const bool force = a.flag("force", false);
  refuse(a, "root");
  refuse(a, "local");
  std::vector<std::string> argv = {"userdel"};
  if (remove) argv.push_back("-r");
  if (force) argv.push_back("-f");
  argv.push_back(name);
  process_result r = co_await run_tool(c.timeout, std::move(argv));
  // Debian's userdel -r exits 12 when the user had no mail spool, after
  // deleting everything else (Salt treats that as success too).
  if (r.retcode == 12 && !r.timed_out &&
      (r.stderr_text.find("var/mail") != std::string::npos ||
       r.stderr_text.find("var/spool/mail") != std::string::npos)) {
    co_return outcome{true};
  }
  check_tool(r, "user.delete " + name, "userdel");
  co_return outcome{true};
}

asio::awaitable<outcome> group_info(call c) {
  arguments a("group.info", c, {"name", "root"});
  const std::string name = lookup_name(a, "group name");
  refuse(a, "root");
  std::function<json()> lookup = [name]() -> json {
    std::optional<group_entry> g = find_group(name);
    return g ? group_json(*g) : json::object();
  };
  json ret = co_await on_nss_thread(std::move(lookup));
  co_return outcome{std::move(ret)};
}

asio::awaitable<outcome> group_getent(call c) {
  arguments a("group.getent", c, {"refresh", "root"});
  a.flag("refresh", false);  // brine keeps no cache to refresh
  refuse(a, "root");
  std::function<json()> list = []() -> json {
    json out = json::array();
    for (const auto& g : all_groups()) out.push_back(group_json(g));
    return out;
  };
  json ret = co_await on_nss_thread(std::move(list));
  co_return outcome{std::move(ret)};
}

asio::awaitable<outcome> group_add(call c) {
  arguments a("group.add", c, {"name", "gid", "system", "root", "non_unique", "local"});
  const std::string name = account_name(a, "group name", a.get("name"));
  std::optional<std::string> gid = id_argument(a, "gid", false);
  const bool system = a.flag("system", false);
  const bool non_unique = a.flag("non_unique", false);
  refuse(a, "root");
  refuse(a, "local");
  std::vector<std::string> argv = {"groupadd"};
  if (gid) {
    argv.insert(argv.end(), {"-g", *gid});
    if (non_unique) argv.push_back("-o");
  }
  if (system) argv.push_back("-r");
  argv.push_back(name);
  process_result r = co_await run_tool(c.timeout, std::move(argv));
  check_tool(r, "group.add " + name, "groupadd");
  co_return outcome{true};
}

asio::awaitable<outcome> group_delete(call c) {
  arguments a("group.delete", c, {"name", "root", "local"});
  const std::string name = account_name(a, "group name", a.get("name"));
  refuse(a, "root");
  refuse(a, "local");
  std::vector<std::string> argv = {"groupdel", name};
  process_result r = co_await run_tool(c.timeout, std::move(argv));
  check_tool(r, "group.delete " + name, "groupdel");
  co_return outcome{true};
}

asio::awaitable<std::optional<user_entry>> lookup_user(std::string name) {
  std::function<std::optional<user_entry>()> lookup = [name] { return find_user(name); };
  std::optional<user_entry> u = co_await on_nss_thread(std::move(lookup));
  co_return u;
}

asio::awaitable<std::optional<group_entry>> lookup_group(std::string name) {
  std::function<std::optional<group_entry>()> lookup = [name] { return find_group(name); };
  std::optional<group_entry> g = co_await on_nss_thread(std::move(lookup));
  co_return g;
}

// The user's attribute `key` as text, the way user.info shows it.
std::string attribute(const user_entry& u, const std::string& key) {
  if (key == "uid") return std::to_string(u.uid);
  if (key == "gid") return std::to_string(u.gid);
  if (key == "shell") return u.shell;
  if (key == "home") return u.home;
  return "";
}

// Salt's _chattrib: `usermod FLAG VALUE NAME` unless the attribute already
// has the value; True when it has it afterwards.
asio::awaitable<outcome> change_attribute(call c, std::string fun, std::string key,
                                          std::string flag) {
  const bool home = key == "home";
  std::vector<std::string> params = {"name", key};
  if (home) params.push_back("persist");
  params.push_back("root");
  arguments a(fun, c, params);
  const std::string name = account_name(a, "user name", a.get("name"));
  refuse(a, "root");
  std::string value;
  if (key == "uid" || key == "gid") {
    std::optional<std::string> id = id_argument(a, key, key == "gid");
    if (!id) a.fail("needs the new " + key + ": " + fun + " NAME " + key.substr(0, 1) + "ID");
    value = *id;
  } else {
    std::optional<std::string> text = a.text(key);
    if (!text || text->empty()) a.fail("needs the new " + key + ": " + fun + " NAME VALUE");
    value = *text;
  }
  const bool persist = home && a.flag("persist", false);
  std::optional<user_entry> pre = co_await lookup_user(name);
  if (!pre) throw tool_failure("User '" + name + "' does not exist");
  if (key == "gid" && !std::all_of(value.begin(), value.end(), [](char ch) {
        return std::isdigit(static_cast<unsigned char>(ch));
      })) {
    std::optional<group_entry> g = co_await lookup_group(value);
    if (g) value = std::to_string(g->gid);
  }
  if (attribute(*pre, key) == value) co_return outcome{true};
  std::vector<std::string> argv = {"usermod"};
  if (persist) argv.push_back("-m");
  argv.insert(argv.end(), {flag, value, name});
  process_result r = co_await run_tool(c.timeout, std::move(argv));
  check_tool(r, fun + " " + name, "usermod");
  std::optional<user_entry> post = co_await lookup_user(name);
  co_return outcome{post && attribute(*post, key) == value};
}

// The five GECOS fields of a user, as user.info splits them.
std::vector<std::string> gecos_fields(const user_entry& u) {
  json info = user_json(u, {});
  return {info["fullname"], info["roomnumber"], info["workphone"], info["homephone"],
          info["other"]};
}

// Salt's _update_gecos: one GECOS field set with usermod -c; True when it
// reads back as set.
asio::awaitable<outcome> change_gecos(call c, std::string fun, std::string key) {
  static const std::vector<std::string> k_fields = {"fullname", "roomnumber", "workphone",
                                                     "homephone", "other"};
  arguments a(fun, c, {"name", key, "root"});
  const std::string name = account_name(a, "user name", a.get("name"));
  refuse(a, "root");
  const std::string value = gecos_field(a, key);
  const std::size_t index = static_cast<std::size_t>(
      std::find(k_fields.begin(), k_fields.end(), key) - k_fields.begin());
  std::optional<user_entry> pre = co_await lookup_user(name);
  if (!pre) co_return outcome{false};
  std::vector<std::string> fields = gecos_fields(*pre);
  if (fields[index] == value) co_return outcome{true};
  fields[index] = value;
  std::string gecos = fields[0];
  for (std::size_t i = 1; i < fields.size(); ++i) gecos += "," + fields[i];
  gecos.erase(gecos.find_last_not_of(',') + 1);
  std::vector<std::string> argv = {"usermod", "-c", gecos, name};
  process_result r = co_await run_tool(c.timeout, std::move(argv));
  check_tool(r, fun + " " + name, "usermod");
  std::optional<user_entry> post = co_await lookup_user(name);
  co_return outcome{post && gecos_fields(*post)[index] == value};
}

asio::awaitable<outcome> user_chgroups(call c) {
  arguments a("user.chgroups", c, {"name", "groups", "append", "root"});
  const std::string name = account_name(a, "user name", a.get("name"));
  refuse(a, "root");
  if (a.get("groups") == nullptr) a.fail("needs the groups: user.chgroups NAME GROUPS");
  std::vector<std::string> groups = group_list(a);
  const bool append = a.flag("append", false);
  std::function<std::optional<std::vector<std::string>>()> lookup =
      [name]() -> std::optional<std::vector<std::string>> {
    std::optional<user_entry> u = find_user(name);
    if (!u) return std::nullopt;
    return groups_of(*u);
  };
  std::optional<std::vector<std::string>> have = co_await on_nss_thread(std::move(lookup));
  if (!have) throw tool_failure("User '" + name + "' does not exist");
  if (std::set<std::string>(have->begin(), have->end()) ==
      std::set<std::string>(groups.begin(), groups.end())) {
    co_return outcome{true};
  }
  std::string list;
  for (const auto& g : groups) list += (list.empty() ? "" : ",") + g;
  std::vector<std::string> argv = {"usermod"};
  if (append) argv.push_back("-a");
  argv.insert(argv.end(), {"-G", list, name});
  process_result r = co_await run_tool(c.timeout, std::move(argv));
  co_return outcome{r.retcode == 0 && !r.timed_out};
}

asio::awaitable<outcome> user_list_groups(call c) {
  arguments a("user.list_groups", c, {"name"});
  const std::string name = lookup_name(a, "user name");
  std::function<std::vector<std::string>()> lookup = [name] {
    std::optional<user_entry> u = find_user(name);
    return u ? groups_of(*u) : std::vector<std::string>{};
  };
  std::vector<std::string> groups = co_await on_nss_thread(std::move(lookup));
  co_return outcome{std::move(groups)};
}

asio::awaitable<outcome> group_chgid(call c) {
  arguments a("group.chgid", c, {"name", "gid", "root", "non_unique"});
  const std::string name = account_name(a, "group name", a.get("name"));
  std::optional<std::string> gid = id_argument(a, "gid", false);
  if (!gid) a.fail("needs the new gid: group.chgid NAME GID");
  const bool non_unique = a.flag("non_unique", false);
  refuse(a, "root");
  std::optional<group_entry> pre = co_await lookup_group(name);
  if (!pre) throw tool_failure("Group '" + name + "' does not exist");
  if (std::to_string(pre->gid) == *gid) co_return outcome{true};
  std::vector<std::string> argv = {"groupmod", "-g", *gid};
  if (non_unique) argv.push_back("-o");
  argv.push_back(name);
  process_result r = co_await run_tool(c.timeout, std::move(argv));
  check_tool(r, "group.chgid " + name, "groupmod");
  std::optional<group_entry> post = co_await lookup_group(name);
  co_return outcome{post && std::to_string(post->gid) == *gid};
}

// gpasswd OPTION VALUE GROUP: true when it exited 0 (Salt's group.adduser,
// deluser and members).
asio::awaitable<outcome> gpasswd(call c, std::string fun, std::string option,
                                 std::string value_param) {
  arguments a(fun, c, {"name", value_param, "root"});
  const std::string name = account_name(a, "group name", a.get("name"));
  refuse(a, "root");
  std::string value;
  if (value_param == "members_list") {
    const json* v = a.get("members_list");
    if (v == nullptr) a.fail("needs the members: " + fun + " NAME 'user1,user2'");
    if (v->is_array()) {
      for (const json& m : *v) value += (value.empty() ? "" : ",") + a.text_of("member", m);
    } else {
      value = a.text_of("members_list", *v);
    }
    std::size_t start = 0;
    while (!value.empty() && start <= value.size()) {
      auto comma = value.find(',', start);
      json item = value.substr(start, comma - start);
      account_name(a, "user name in members_list", &item);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  } else {
    value = account_name(a, "user name", a.get(value_param));
  }
  if (option == "--delete") {
    // Salt: only a member is deleted; anyone else is already out.
    std::optional<group_entry> g = co_await lookup_group(name);
    if (!g || std::find(g->members.begin(), g->members.end(), value) == g->members.end()) {
      co_return outcome{true};
    }
  }
  std::vector<std::string> argv = {"gpasswd", option, value, name};
  process_result r = co_await run_tool(c.timeout, std::move(argv));
  co_return outcome{r.retcode == 0 && !r.timed_out};
}

// Salt's file.group_to_gid: a number stays as it is, a name is looked up; ""
// when there is no such group (or no group was given).
asio::awaitable<outcome> file_group_to_gid(call c) {
  arguments a("file.group_to_gid", c, {"group"});
  const json* v = a.get("group");
  if (v == nullptr) co_return outcome{""};
  if (v->is_number_integer()) co_return outcome{*v};
  std::string group = a.text_of("group", *v);
  std::optional<group_entry> g = co_await lookup_group(group);
  co_return g ? outcome{g->gid} : outcome{""};
}

// Salt's file.gid_to_group: the name of the group with this gid (a name is
// looked up first); the gid itself when no group has it, "" for a name that
// is no group.
asio::awaitable<outcome> file_gid_to_group(call c) {
  arguments a("file.gid_to_group", c, {"gid"});
  const json* v = a.get("gid");
  if (v == nullptr) co_return outcome{""};
  std::string text = v->is_number_integer() ? std::to_string(v->get<long long>())
                                            : a.text_of("gid", *v);
  bool digits = !text.empty() && text.size() <= 10 &&
                std::all_of(text.begin(), text.end(),
                            [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
  gid_t gid = 0;
  if (digits && std::stoull(text) <= 4294967294ULL) {
    gid = static_cast<gid_t>(std::stoull(text));
  } else {
    std::optional<group_entry> named = co_await lookup_group(text);
    if (!named) co_return outcome{""};
    gid = named->gid;
  }
  std::function<std::optional<group_entry>()> by_id = [gid] { return find_group(gid); };
  std::optional<group_entry> g = co_await on_nss_thread(std::move(by_id));
  co_return g ? outcome{g->name} : outcome{gid};
}

}  // namespace
}  // namespace user_mod

asio::awaitable<std::optional<account>> find_account(std::string name) {
  using namespace user_mod;
  std::optional<user_entry> u = co_await lookup_user(std::move(name));
  if (!u) co_return std::nullopt;
  co_return account{u->name, u->home, u->uid, u->gid};
}

void register_user_module(registry& reg) {
  using namespace user_mod;
  reg.add("user.info", failures_as_outcomes<user_info>,
          "user.info NAME: returns the account as {name, passwd, uid, gid, home, shell, "
          "fullname, roomnumber, workphone, homephone, other, groups (sorted, the primary one "
          "included)}, or {} when there is no such user.\n"
          "CLI Example: brine cmd '*' user.info root");
  reg.add("user.list_users", failures_as_outcomes<list_users>,
          "user.list_users: returns the sorted names of all users (local and from NSS).\n"
          "CLI Example: brine cmd '*' user.list_users");
  reg.add("user.add", failures_as_outcomes<user_add>,
          "user.add NAME [uid] [gid] [groups] [home] [shell] [unique=True] [system=False] "
          "[fullname=''] [roomnumber=''] [workphone=''] [homephone=''] [other=''] "
          "[createhome=True] [nologinit=False] [usergroup=]: creates the user with useradd, "
          "returns True; fails with useradd's message.\n"
          "CLI Example: brine cmd '*' user.add alice groups='[\"sudo\"]' fullname='Alice Liddell'");
  reg.add("user.delete", failures_as_outcomes<user_delete>,
          "user.delete NAME [remove=False] [force=False]: deletes the user with userdel "
          "(remove=True deletes the home directory and mail spool too), returns True; fails "
          "with userdel's message.\n"
          "CLI Example: brine cmd '*' user.delete alice remove=True");
  reg.add("group.info", failures_as_outcomes<group_info>,
          "group.info NAME: returns the group as {name, passwd, gid, members}, or {} when there "
          "is no such group.\n"
          "CLI Example: brine cmd '*' group.info sudo");
  reg.add("group.getent", failures_as_outcomes<group_getent>,
          "group.getent [refresh=False]: returns every group (local and from NSS) as a list of "
          "{name, passwd, gid, members}.\n"
          "CLI Example: brine cmd '*' group.getent");
  reg.add("group.add", failures_as_outcomes<group_add>,
          "group.add NAME [gid] [system=False] [non_unique=False]: creates the group with "
          "groupadd, returns True; fails with groupadd's message.\n"
          "CLI Example: brine cmd '*' group.add developers 4242");
  reg.add("group.delete", failures_as_outcomes<group_delete>,
          "group.delete NAME: deletes the group with groupdel, returns True; fails with "
          "groupdel's message.\n"
          "CLI Example: brine cmd '*' group.delete developers");
  reg.add("user.list_groups", failures_as_outcomes<user_list_groups>,
          "user.list_groups NAME: returns the sorted names of the user's groups, the primary one "
          "included ([] when there is no such user).\n"
          "CLI Example: brine cmd '*' user.list_groups alice");
  reg.add("user.chuid",
          [](call c) { return change_attribute(std::move(c), "user.chuid", "uid", "-u"); },
          "user.chuid NAME UID: sets the user's uid with usermod -u (file ownership is not "
          "changed); returns True when the user has it afterwards.\n"
          "CLI Example: brine cmd '*' user.chuid alice 4000");
  reg.add("user.chgid",
          [](call c) { return change_attribute(std::move(c), "user.chgid", "gid", "-g"); },
          "user.chgid NAME GID: sets the user's primary group (a gid or a group name) with "
          "usermod -g; returns True when the user has it afterwards.\n"
          "CLI Example: brine cmd '*' user.chgid alice 4000");
  reg.add("user.chshell",
          [](call c) { return change_attribute(std::move(c), "user.chshell", "shell", "-s"); },
          "user.chshell NAME SHELL: sets the user's login shell with usermod -s; returns True "
          "when the user has it afterwards.\n"
          "CLI Example: brine cmd '*' user.chshell alice /bin/zsh");
  reg.add("user.chhome",
          [](call c) { return change_attribute(std::move(c), "user.chhome", "home", "-d"); },
          "user.chhome NAME HOME [persist=False]: sets the user's home directory with usermod "
          "-d (persist=True moves the old home's files, usermod -m); returns True when the user "
          "has it afterwards.\n"
          "CLI Example: brine cmd '*' user.chhome alice /home/alice2 persist=True");
  reg.add("user.chgroups", failures_as_outcomes<user_chgroups>,
          "user.chgroups NAME GROUPS [append=False]: sets the user's supplementary groups (a "
          "list or 'a,b') with usermod -G (append=True: usermod -a -G adds them); returns True "
          "when usermod succeeded or nothing had to change.\n"
          "CLI Example: brine cmd '*' user.chgroups alice wheel,staff append=True");
  for (const char* field : {"fullname", "roomnumber", "workphone", "homephone", "other"}) {
    std::string fun = std::string("user.ch") + field;
    std::string key = field;
    reg.add(fun, [fun, key](call c) { return change_gecos(std::move(c), fun, key); },
            fun + " NAME VALUE: sets the " + key +
                " field of the user's GECOS with usermod -c; returns True when it reads back as "
                "set.\n"
                "CLI Example: brine cmd '*' " + fun + " alice 'Alice Liddell'");
  }
  reg.add("group.chgid", failures_as_outcomes<group_chgid>,
          "group.chgid NAME GID [non_unique=False]: sets the group's gid with groupmod -g; "
          "returns True when the group has it afterwards.\n"
          "CLI Example: brine cmd '*' group.chgid developers 4243");
  reg.add("group.adduser",
          [](call c) { return gpasswd(std::move(c), "group.adduser", "--add", "username"); },
          "group.adduser NAME USERNAME: adds the user to the group's members with gpasswd --add; "
          "returns True on success.\n"
          "CLI Example: brine cmd '*' group.adduser developers alice");
  reg.add("group.deluser",
          [](call c) { return gpasswd(std::move(c), "group.deluser", "--delete", "username"); },
          "group.deluser NAME USERNAME: removes the user from the group's members with gpasswd "
          "--delete (True at once when the user is not a member); returns True on success.\n"
          "CLI Example: brine cmd '*' group.deluser developers alice");
  reg.add("group.members",
          [](call c) { return gpasswd(std::move(c), "group.members", "--members", "members_list"); },
          "group.members NAME MEMBERS_LIST: replaces the group's members with the list ('a,b' or "
          "a list) with gpasswd --members; returns True on success.\n"
          "CLI Example: brine cmd '*' group.members developers alice,bob");
  reg.add("file.group_to_gid", failures_as_outcomes<file_group_to_gid>,
          "file.group_to_gid GROUP: returns the gid of the named group (a number is returned as "
          "it is), or '' when there is no such group.\n"
          "CLI Example: brine cmd '*' file.group_to_gid staff");
  reg.add("file.gid_to_group", failures_as_outcomes<file_gid_to_group>,
          "file.gid_to_group GID: returns the name of the group with this gid (or of the named "
          "group), the gid itself when no group has it, '' for a name that is no group.\n"
          "CLI Example: brine cmd '*' file.gid_to_group 50");
}

}  // namespace brine::modules
