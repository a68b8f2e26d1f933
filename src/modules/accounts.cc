#include "modules/accounts.h"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <map>
#include <mutex>
#include <vector>

namespace brine::modules::accounts {
namespace {

constexpr auto k_max_age = std::chrono::seconds(1);

// What identifies a version of a file: a rewrite (useradd writes a new file
// and renames it) changes the inode, an edit in place the times or size.
struct file_version {
  ino_t ino = 0;
  off_t size = -1;
  timespec mtime{};
  timespec ctime{};
  bool operator==(const file_version& o) const {
    return ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec && ctime.tv_sec == o.ctime.tv_sec &&
           ctime.tv_nsec == o.ctime.tv_nsec;
  }
};

file_version version_of(const char* path) {
  file_version v;
  struct stat st {};
  if (::stat(path, &st) == 0) {
    v.ino = st.st_ino;
    v.size = st.st_size;
    v.mtime = st.st_mtim;
    v.ctime = st.st_ctim;
  }
  return v;
}

struct cache {
  std::mutex mu;
  file_version passwd, group;
  std::chrono::steady_clock::time_point filled{};
  std::map<std::string, std::optional<user_entry>> users_by_name;
  std::map<uid_t, std::optional<user_entry>> users_by_uid;
  std::map<std::string, std::optional<gid_t>> groups_by_name;
  std::map<gid_t, std::optional<std::string>> groups_by_gid;

  // Drops every answer when the files changed or the answers are old.
  // Called with mu held.
  void check() {
    auto now = std::chrono::steady_clock::now();
    file_version p = version_of("/etc/passwd");
    file_version g = version_of("/etc/group");
    if (p == passwd && g == group && now - filled < k_max_age) return;
    passwd = p;
    group = g;
    filled = now;
    users_by_name.clear();
    users_by_uid.clear();
    groups_by_name.clear();
    groups_by_gid.clear();
  }
};

cache& the_cache() {
  static cache c;
  return c;
}

// Calls a getpw*_r/getgr*_r `fn(key, &entry, buf, size, &result)`, growing
// the buffer while NSS says it is too small.
template <typename Entry, typename Key, typename Fn>
bool lookup(Fn fn, Key key, Entry& entry, std::vector<char>& buf) {
  buf.resize(1024);
  for (;;) {
    Entry* result = nullptr;
    int rc = fn(key, &entry, buf.data(), buf.size(), &result);
    if (rc == ERANGE && buf.size() < (std::size_t{1} << 24)) {
      buf.resize(buf.size() * 2);
      continue;
    }
    return rc == 0 && result != nullptr;
  }
}

std::optional<user_entry> to_user(const passwd& pw) {
  user_entry u;
  u.name = pw.pw_name;
  u.uid = pw.pw_uid;
  u.gid = pw.pw_gid;
  u.home = pw.pw_dir != nullptr ? pw.pw_dir : "";
  u.shell = pw.pw_shell != nullptr ? pw.pw_shell : "";
  return u;
}

}  // namespace

namespace {

// The cached answer for `key` in `table`, or fetch()'s (cached, found or not).
template <typename Key, typename Value, typename Fetch>
std::optional<Value> cached(std::map<Key, std::optional<Value>> cache::*table, const Key& key,
                            Fetch fetch) {
  cache& c = the_cache();
  std::lock_guard lock(c.mu);
  c.check();
  auto& answers = c.*table;
  if (auto it = answers.find(key); it != answers.end()) return it->second;
  std::optional<Value> found = fetch();
  answers.emplace(key, found);
  return found;
}

}  // namespace

std::optional<user_entry> user_by_name(const std::string& name) {
  return cached(&cache::users_by_name, name, [&]() -> std::optional<user_entry> {
    passwd pw{};
    std::vector<char> buf;
    if (lookup(::getpwnam_r, name.c_str(), pw, buf)) return to_user(pw);
    return std::nullopt;
  });
}

std::optional<user_entry> user_by_uid(uid_t uid) {
  return cached(&cache::users_by_uid, uid, [&]() -> std::optional<user_entry> {
    passwd pw{};
    std::vector<char> buf;
    if (lookup(::getpwuid_r, uid, pw, buf)) return to_user(pw);
    return std::nullopt;
  });
}

std::optional<gid_t> group_id(const std::string& name) {
  return cached(&cache::groups_by_name, name, [&]() -> std::optional<gid_t> {
    group gr{};
    std::vector<char> buf;
    if (lookup(::getgrnam_r, name.c_str(), gr, buf)) return gr.gr_gid;
    return std::nullopt;
  });
}

std::optional<std::string> group_name(gid_t gid) {
  return cached(&cache::groups_by_gid, gid, [&]() -> std::optional<std::string> {
    group gr{};
    std::vector<char> buf;
    if (lookup(::getgrgid_r, gid, gr, buf)) return std::string(gr.gr_name);
    return std::nullopt;
  });
}

std::string user_name_or_number(uid_t uid) {
  auto u = user_by_uid(uid);
  return u ? u->name : std::to_string(uid);
}

std::string group_name_or_number(gid_t gid) {
  auto g = group_name(gid);
  return g ? *g : std::to_string(gid);
}

}  // namespace brine::modules::accounts
