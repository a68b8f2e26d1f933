// The file module: Salt's salt.modules.file for the functions people call
// from the CLI. Plain POSIX and std::filesystem, no shell. Patterns are
// Python `re` in Salt; here they are PCRE2 through py_regex (modules/
// py_regex.h, shared with the file states), and diffs are difflib's
// (modules/diff.h). Functions that may read
// a lot (get_hash, find) give the executor back now and then, so a big file or
// tree neither starves other jobs nor outlives its job's cancellation.

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>


#include <algorithm>
#include <asio/post.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "modules/accounts.h"
#include "modules/args.h"
#include "modules/arguments.h"
#include "modules/data.h"
#include "modules/diff.h"
#include "modules/digest.h"
#include "modules/path.h"
#include "modules/py_regex.h"
#include "modules/registry.h"

namespace brine::modules {
namespace file_mod {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr std::size_t k_chunk = std::size_t{1} << 20;
// Bytes read between two yields to the executor.
constexpr std::size_t k_yield_bytes = std::size_t{8} << 20;
constexpr std::size_t k_find_limit = 100000;

[[noreturn]] void fail(const std::string& fun, const std::string& message) {
  throw base::error(fun + ": " + message);
}

std::string errno_text(int err) { return std::strerror(err); }

// Lets other coroutines run; throws if the job was cancelled meanwhile.
asio::awaitable<void> yield_now() {
  auto ex = co_await asio::this_coro::executor;
  co_await asio::post(ex, asio::use_awaitable);
}


std::string text_arg(const arguments& sig, std::string_view name, const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number()) return v.dump();
  sig.fail(std::string(name) + " must be text, got " + v.dump());
}

std::string path_arg(const arguments& sig, std::string_view name) {
  const json& v = sig.need(name);
  std::string p = expand_user(text_arg(sig, name, v));
  if (p.empty()) sig.fail(std::string(name) + " must not be empty");
  return p;
}

void need_absolute(const arguments& sig, const std::string& path, const std::string& what) {
  if (path.empty() || path[0] != '/') sig.fail(what + " must be absolute: " + path);
}

std::optional<long long> int_arg(const arguments& sig, std::string_view name) {
  const json* v = sig.get(name);
  if (v == nullptr) return std::nullopt;
  if (v->is_number_integer()) return v->get<long long>();
  if (auto d = as_number(*v); d && *d == static_cast<double>(static_cast<long long>(*d))) {
    return static_cast<long long>(*d);
  }
  sig.fail(std::string(name) + " must be an integer, got " + v->dump());
}

// A mode as Salt takes it: the digits are octal, whether they came as text
// ("0644", "755") or as a number YAML made of them (644).
mode_t mode_arg(const arguments& sig, std::string_view name, const json& v) {
  std::string s = v.is_number_integer() ? std::to_string(v.get<long long>())
                  : v.is_string()       ? v.get<std::string>()
                                        : std::string();
  if (s.starts_with("0o")) s = s.substr(2);
  bool ok = !s.empty() && s.size() <= 5 &&
            std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '7'; });
  unsigned long m = ok ? std::stoul(s, nullptr, 8) : 0;
  if (!ok || m > 07777) {
    sig.fail(std::string(name) + " must be an octal mode such as '0644', got " + v.dump());
  }
  return static_cast<mode_t>(m);
}

// Salt's normalize_mode(oct(S_IMODE(mode))): '0644', '4755', '0000'.
std::string mode_text(mode_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%o", static_cast<unsigned>(mode & 07777));
  std::string s = buf;
  s.erase(0, s.find_first_not_of('0') == std::string::npos ? s.size() : s.find_first_not_of('0'));
  while (s.size() < 4) s.insert(s.begin(), '0');
  return s;
}

bool all_digits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

// A user or group by name or number; nullopt when there is no such one.
std::optional<uid_t> lookup_uid(const std::string& user) {
  if (auto u = accounts::user_by_name(user)) return u->uid;
  if (all_digits(user)) {
    return static_cast<uid_t>(std::stoul(user));
  }
  return std::nullopt;
}
std::optional<gid_t> lookup_gid(const std::string& group) {
  if (auto gid = accounts::group_id(group)) return *gid;
  if (all_digits(group)) {
    return static_cast<gid_t>(std::stoul(group));
  }
  return std::nullopt;
}

// Salt's uid_to_user: the name, or the number when it has none.
json user_name(uid_t uid) {
  if (auto u = accounts::user_by_uid(uid)) return u->name;
  return uid;
}
json group_name(gid_t gid) {
  if (auto g = accounts::group_name(gid)) return *g;
  return gid;
}

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xbf;  // the range of the byte after the lead
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      n = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;
    auto c1 = static_cast<unsigned char>(s[i + 1]);
    if (c1 < lo || c1 > hi) return false;
    for (std::size_t k = 2; k <= n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    }
    i += n + 1;
  }
  return true;
}

class fd_guard {
 public:
  explicit fd_guard(int fd) : fd_(fd) {}
  ~fd_guard() {
    if (fd_ >= 0) ::close(fd_);
  }
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string read_file(const std::string& fun, const std::string& path) {
  fd_guard fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) fail(fun, path + ": " + errno_text(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) == 0 && S_ISDIR(st.st_mode)) fail(fun, path + ": Is a directory");
  std::string out;
  std::string buf(k_chunk, '\0');
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(fun, path + ": " + errno_text(errno));
    if (n == 0) break;
    out.append(buf.data(), static_cast<std::size_t>(n));
  }
  return out;
}

void write_all(const std::string& fun, int fd, const std::string& path, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(fun, path + ": " + errno_text(errno));
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

// Replaces `path` with `data` through a temporary file and a rename, so that a
// reader sees the old or the new content, never half; mode and owner are
// those of `like`.
void write_atomic(const std::string& fun, const std::string& path, std::string_view data,
                  const struct stat& like) {
  fs::path p(path);
  std::string tmpl = (p.parent_path() / ("." + p.filename().string() + ".brine-XXXXXX")).string();
  int raw = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (raw < 0)
    fail(fun, "cannot create a temporary file beside " + path + ": " + errno_text(errno));
  fd_guard fd(raw);
  try {
    write_all(fun, fd.get(), tmpl, data);
    if (::fchmod(fd.get(), like.st_mode & 07777) != 0) fail(fun, tmpl + ": " + errno_text(errno));
    // Only root may give a file away; for others the owner is already theirs.
    if ((like.st_uid != ::geteuid() || like.st_gid != ::getegid()) &&
        ::fchown(fd.get(), like.st_uid, like.st_gid) != 0 && ::geteuid() == 0) {
      fail(fun, tmpl + ": " + errno_text(errno));
    }
    if (::fsync(fd.get()) != 0) fail(fun, tmpl + ": " + errno_text(errno));
    if (::rename(tmpl.c_str(), path.c_str()) != 0) fail(fun, path + ": " + errno_text(errno));
  } catch (...) {
    ::unlink(tmpl.c_str());
    throw;
  }
}

// Salt's is_text, in short: a NUL in the first block means binary.
bool looks_binary(std::string_view data) {
  return data.substr(0, 512).find('\0') != std::string_view::npos;
}

// ---- regular expressions (Python re flags on PCRE2) -----------------------


// Salt's _get_flags: a number, or names of re's flags (a list, or one name).
long long re_flags(const arguments& sig, std::string_view name, long long fallback) {
  const json* v = sig.get(name);
  if (v == nullptr) return fallback;
  if (auto n = as_number(*v); n && *n == static_cast<double>(static_cast<long long>(*n))) {
    return static_cast<long long>(*n);
  }
  std::vector<std::string> names;
  if (v->is_string()) {
    std::string s = v->get<std::string>();
    std::size_t start = 0;
    for (;;) {
      auto sep = s.find_first_of(",|", start);
      names.push_back(s.substr(start, sep == std::string::npos ? sep : sep - start));
      if (sep == std::string::npos) break;
      start = sep + 1;
    }
  } else if (v->is_array()) {
    for (const auto& item : *v) {
      if (!item.is_string()) sig.fail("flags must be names of re flags, got " + v->dump());
      names.push_back(item.get<std::string>());
    }
  } else {
    sig.fail("flags must be a number or a list of re flag names, got " + v->dump());
  }
  static const std::vector<std::pair<std::string, long long>> known = {
      {"T", 1},      {"TEMPLATE", 1}, {"I", 2},         {"IGNORECASE", 2}, {"L", 4},
      {"LOCALE", 4}, {"M", 8},        {"MULTILINE", 8}, {"S", 16},         {"DOTALL", 16},
      {"U", 32},     {"UNICODE", 32}, {"X", 64},        {"VERBOSE", 64},   {"DEBUG", 128},
      {"A", 256},    {"ASCII", 256}};
  long long out = 0;
  for (std::string n : names) {
    n.erase(0, n.find_first_not_of(" \t"));
    n.erase(n.find_last_not_of(" \t") + 1);
    for (char& ch : n) ch = (ch >= 'a' && ch <= 'z') ? static_cast<char>(ch - 'a' + 'A') : ch;
    if (n.starts_with("RE.")) n = n.substr(3);
    auto it = std::find_if(known.begin(), known.end(), [&](const auto& k) { return k.first == n; });
    if (it == known.end()) sig.fail("invalid re flag given: " + n);
    out |= it->second;
  }
  return out;
}

// ---- the functions -----------------------------------------------------------

outcome ok(json ret) { return outcome{std::move(ret)}; }

outcome file_exists(const call& c) {
  arguments sig("file.file_exists", c, {"path"});
  std::error_code ec;
  return ok(fs::is_regular_file(path_arg(sig, "path"), ec));
}

outcome directory_exists(const call& c) {
  arguments sig("file.directory_exists", c, {"path"});
  std::error_code ec;
  return ok(fs::is_directory(path_arg(sig, "path"), ec));
}

// Salt's file.readdir: ".", "..", then the entries in the directory's own
// order (os.listdir's, readdir's), unsorted.
outcome readdir(const call& c) {
  arguments sig("file.readdir", c, {"path"});
  std::string path = path_arg(sig, "path");
  if (path[0] != '/') sig.fail("Dir path must be absolute.");
  std::error_code ec;
  if (!fs::is_directory(path, ec)) sig.fail("A valid directory was not specified.");
  json out = json::array({".", ".."});
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) sig.fail("cannot read " + path + ": " + std::strerror(errno));
  while (const dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name != "." && name != "..") out.push_back(std::string(name));
  }
  ::closedir(d);
  return ok(std::move(out));
}

outcome read(const call& c) {
  arguments sig("file.read", c, {"path", "binary"});
  std::string path = path_arg(sig, "path");
  sig.flag("binary", false);
  std::string data = read_file(sig.fun(), path);
  if (!valid_utf8(data)) sig.fail(path + " is not UTF-8 text, which a job's return cannot carry");
  return ok(std::move(data));
}

// Python's str() of an argument, as Salt writes it into a file.
std::string python_str(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  return v.dump();
}

// file.write and file.append: (path, *args), or args=[...] (Salt's kwarg).
struct path_and_lines {
  std::string path;
  std::vector<std::string> lines;
};

path_and_lines lines_call(const call& c, const std::string& fun) {
  arguments sig(fun, c, {"path", "args"}, true);
  std::vector<json> rest = sig.rest();
  path_and_lines out;
  if (sig.given("path") != nullptr) {
    out.path = path_arg(sig, "path");
  } else {
    if (rest.empty()) fail(fun, "missing argument 'path'");
    out.path = expand_user(text_arg(sig, "path", rest.front()));
    rest.erase(rest.begin());
    if (out.path.empty()) fail(fun, "path must not be empty");
  }
  if (const json* a = sig.get("args"); a != nullptr) {
    if (a->is_array()) {
      rest.insert(rest.end(), a->begin(), a->end());
    } else {
      rest.push_back(*a);
    }
  }
  for (const auto& line : rest) out.lines.push_back(python_str(line));
  return out;
}

std::string wrote(std::size_t n, const std::string& path) {
  return "Wrote " + std::to_string(n) + " lines to \"" + path + "\"";
}

outcome write(const call& c) {
  auto [path, lines] = lines_call(c, "file.write");
  std::string data;
  for (const auto& line : lines) data += line + "\n";
  fd_guard fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666));
  if (fd.get() < 0) fail("file.write", path + ": " + errno_text(errno));
  write_all("file.write", fd.get(), path, data);
  return ok(wrote(lines.size(), path));
}

outcome append(const call& c) {
  auto [path, lines] = lines_call(c, "file.append");
  // Salt opens it "rb+": the file must exist.
  fd_guard fd(::open(path.c_str(), O_RDWR | O_APPEND | O_CLOEXEC));
  if (fd.get() < 0) fail("file.append", path + ": " + errno_text(errno));
  std::string data;
  struct stat st {};
  if (::fstat(fd.get(), &st) == 0 && st.st_size > 0) {
    char last = '\n';
    if (::pread(fd.get(), &last, 1, st.st_size - 1) == 1 && last != '\n') data += '\n';
  }
  for (const auto& line : lines) data += line + "\n";
  write_all("file.append", fd.get(), path, data);
  return ok(wrote(lines.size(), path));
}

outcome touch(const call& c) {
  arguments sig("file.touch", c, {"name", "atime", "mtime"});
  std::string path = path_arg(sig, "name");
  std::optional<long long> atime = int_arg(sig, "atime"), mtime = int_arg(sig, "mtime");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    fd_guard fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY, 0666));
    if (fd.get() < 0) sig.fail(path + ": " + errno_text(errno));
  }
  timespec times[2];
  times[0].tv_sec = atime.value_or(0);
  times[0].tv_nsec = atime ? 0 : UTIME_NOW;
  times[1].tv_sec = mtime.value_or(0);
  times[1].tv_nsec = mtime ? 0 : UTIME_NOW;
  if (::utimensat(AT_FDCWD, path.c_str(), times, 0) != 0) {
    sig.fail(path + ": " + errno_text(errno));
  }
  return ok(true);
}

outcome remove(const call& c) {
  arguments sig("file.remove", c, {"path"});
  std::string path = path_arg(sig, "path");
  need_absolute(sig, path, "File path");
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return ok(false);
  std::error_code ec;
  if (S_ISDIR(st.st_mode)) {
    fs::remove_all(path, ec);
  } else if (::unlink(path.c_str()) != 0) {
    ec.assign(errno, std::generic_category());
  }
  if (ec) sig.fail("Could not remove '" + path + "': " + ec.message());
  return ok(true);
}

struct owner_change {
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
};

outcome mkdir(const call& c) {
  arguments sig("file.mkdir", c, {"dir_path", "user", "group", "mode"});
  std::string path = fs::path(path_arg(sig, "dir_path")).lexically_normal().string();
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  owner_change owner;
  if (const json* u = sig.get("user"); u != nullptr) {
    auto uid = lookup_uid(text_arg(sig, "user", *u));
    if (!uid) sig.fail("User does not exist: " + text_arg(sig, "user", *u));
    owner.uid = *uid;
  }
  if (const json* g = sig.get("group"); g != nullptr) {
    auto gid = lookup_gid(text_arg(sig, "group", *g));
    if (!gid) sig.fail("Group does not exist: " + text_arg(sig, "group", *g));
    owner.gid = *gid;
  }
  std::optional<mode_t> mode;
  if (const json* m = sig.get("mode"); m != nullptr) mode = mode_arg(sig, "mode", *m);
  std::error_code ec;
  if (fs::is_directory(path, ec)) return ok(true);
  // Salt's makedirs_perms: every directory it creates gets the owner and mode.
  std::vector<std::string> missing;
  for (fs::path p = path; !p.empty() && !fs::exists(fs::symlink_status(p, ec));
       p = p.parent_path()) {
    missing.push_back(p.string());
    if (p == p.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (::mkdir(it->c_str(), 0777) != 0 && errno != EEXIST) {
      sig.fail(*it + ": " + errno_text(errno));
    }
    if ((owner.uid != static_cast<uid_t>(-1) || owner.gid != static_cast<gid_t>(-1)) &&
        ::chown(it->c_str(), owner.uid, owner.gid) != 0) {
      sig.fail("chown " + *it + ": " + errno_text(errno));
    }
    if (mode && ::chmod(it->c_str(), *mode) != 0) {
      sig.fail("chmod " + *it + ": " + errno_text(errno));
    }
  }
  if (!fs::is_directory(path, ec)) sig.fail(path + " exists and is not a directory");
  return ok(true);
}

std::string lower(std::string s) {
  for (char& ch : s) ch = (ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch - 'A' + 'a') : ch;
  return s;
}

// The hex digest of a file, read in chunks with yields between them.
asio::awaitable<std::string> hash_file(std::string fun, std::string path, std::string form) {
  form = lower(form);
  std::optional<digester> d;
  try {
    d.emplace(form);
  } catch (const base::error& e) {
    fail(fun, e.what());
  }
  fd_guard fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) fail(fun, path + ": " + errno_text(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) == 0 && S_ISDIR(st.st_mode)) fail(fun, path + ": Is a directory");
  std::vector<char> buf(k_chunk);
  std::size_t since_yield = 0;
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(fun, path + ": " + errno_text(errno));
    if (n == 0) break;
    d->update(buf.data(), static_cast<std::size_t>(n));
    since_yield += static_cast<std::size_t>(n);
    if (since_yield >= k_yield_bytes) {
      since_yield = 0;
      co_await yield_now();
    }
  }
  co_return d->hex();
}

asio::awaitable<outcome> get_hash(call c) {
  arguments sig("file.get_hash", c, {"path", "form", "chunk_size"});
  std::string path = path_arg(sig, "path");
  std::string form = sig.scalar_text("form", "sha256");
  int_arg(sig, "chunk_size");
  std::string digest = co_await hash_file(sig.fun(), path, form);
  outcome o;
  o.ret = digest;
  co_return o;
}

double seconds_of(const timespec& t) {
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

// Python's os.path.realpath: resolved as far as the path exists.
std::string real_path(const std::string& path) {
  if (char* r = ::realpath(path.c_str(), nullptr)) {
    std::string out = r;
    ::free(r);
    return out;
  }
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  return ec ? path : p.string();
}

// What Salt's file.stats reads: the target of a symlink when `follow`
// (a broken one's own), else the path itself; "Path not found" otherwise.
struct stat stat_of(const arguments& sig, const std::string& path, bool follow) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    // A broken symlink has an owner too.
    if (::lstat(path.c_str(), &st) != 0) sig.fail("Path not found: " + path);
  } else if (!follow && ::lstat(path.c_str(), &st) != 0) {
    sig.fail("Path not found: " + path);
  }
  return st;
}

asio::awaitable<outcome> stats(call c) {
  arguments sig("file.stats", c, {"path", "hash_type", "follow_symlinks"});
  std::string path = path_arg(sig, "path");
  std::string hash_type = sig.scalar_text("hash_type", "");
  bool follow = sig.flag("follow_symlinks", true);
  struct stat st = stat_of(sig, path, follow);
  json ret = json::object();
  ret["inode"] = static_cast<unsigned long long>(st.st_ino);
  ret["uid"] = st.st_uid;
  ret["gid"] = st.st_gid;
  ret["group"] = group_name(st.st_gid);
  ret["user"] = user_name(st.st_uid);
  ret["atime"] = seconds_of(st.st_atim);
  ret["mtime"] = seconds_of(st.st_mtim);
  ret["ctime"] = seconds_of(st.st_ctim);
  ret["size"] = static_cast<long long>(st.st_size);
  ret["mode"] = mode_text(st.st_mode);
  if (!hash_type.empty()) {
    std::string digest = co_await hash_file(sig.fun(), path, hash_type);
    ret["sum"] = digest;
  }
  std::string type = "file";
  if (S_ISDIR(st.st_mode)) type = "dir";
  if (S_ISCHR(st.st_mode)) type = "char";
  if (S_ISBLK(st.st_mode)) type = "block";
  if (S_ISLNK(st.st_mode)) type = "link";
  if (S_ISFIFO(st.st_mode)) type = "pipe";
  if (S_ISSOCK(st.st_mode)) type = "socket";
  ret["type"] = type;
  ret["target"] = real_path(path);
  outcome o;
  o.ret = std::move(ret);
  co_return o;
}

outcome chmod(const call& c) {
  arguments sig("file.chmod", c, {"path", "mode"});
  std::string path = path_arg(sig, "path");
  mode_t mode = mode_arg(sig, "mode", sig.need("mode"));
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) sig.fail(path + " does not exist");
  if (::chmod(path.c_str(), mode) != 0) sig.fail(path + ": " + errno_text(errno));
  if (::stat(path.c_str(), &st) != 0) sig.fail(path + ": " + errno_text(errno));
  return ok(mode_text(st.st_mode));
}

outcome chown(const call& c) {
  arguments sig("file.chown", c, {"path", "user", "group"});
  std::string path = path_arg(sig, "path");
  const json& user = sig.need("user");
  const json& group = sig.need("group");
  owner_change owner;
  std::string err;
  if (!user.is_null() && !(user.is_string() && user.get<std::string>().empty())) {
    auto uid = lookup_uid(text_arg(sig, "user", user));
    if (uid)
      owner.uid = *uid;
    else
      err += "User does not exist\n";
  }
  if (!group.is_null() && !(group.is_string() && group.get<std::string>().empty())) {
    auto gid = lookup_gid(text_arg(sig, "group", group));
    if (gid)
      owner.gid = *gid;
    else
      err += "Group does not exist\n";
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    // A broken symlink still has an owner to change.
    if (err.empty() && ::lchown(path.c_str(), owner.uid, owner.gid) == 0) return ok(nullptr);
    err += "File not found";
  }
  if (!err.empty()) return outcome{err, false, 1};
  if (::chown(path.c_str(), owner.uid, owner.gid) != 0) {
    sig.fail(path + ": " + errno_text(errno));
  }
  return ok(nullptr);
}

std::string norm(const std::string& p) {
  std::string out = fs::path(p).lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

std::optional<std::string> read_link(const std::string& path) {
  std::string buf(4096, '\0');
  ssize_t n = ::readlink(path.c_str(), buf.data(), buf.size());
  if (n < 0) return std::nullopt;
  buf.resize(static_cast<std::size_t>(n));
  return buf;
}

outcome symlink(const call& c) {
  arguments sig("file.symlink", c, {"src", "path", "force", "atomic"});
  std::string src = text_arg(sig, "src", sig.need("src"));
  std::string path = path_arg(sig, "path");
  bool force = sig.flag("force", false);
  bool atomic = sig.flag("atomic", false);
  need_absolute(sig, path, "Link path");
  struct stat lst {
  }, st{};
  bool is_link = ::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode);
  if (is_link) {
    if (auto target = read_link(path); target && norm(*target) == norm(src)) return ok(true);
    if (!force && !atomic) sig.fail("Found existing symlink: " + path);
  }
  bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && !force && !atomic) sig.fail("Existing path is not a symlink: " + path);
  if (is_link || exists) {
    // Replaced through a rename, so the path never goes missing meanwhile.
    if (!is_link && S_ISDIR(st.st_mode)) {
      sig.fail("Could not create '" + path + "': it is a directory");
    }
    fs::path p(path);
    std::string tmp =
        (p.parent_path() / ("." + p.filename().string() + ".brine-" + std::to_string(::getpid())))
            .string();
    ::unlink(tmp.c_str());
    if (::symlink(src.c_str(), tmp.c_str()) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      sig.fail("Could not create '" + path + "': " + errno_text(err));
    }
    return ok(true);
  }
  if (::symlink(src.c_str(), path.c_str()) != 0) {
    sig.fail("Could not create '" + path + "': " + errno_text(errno));
  }
  return ok(true);
}

outcome readlink(const call& c) {
  arguments sig("file.readlink", c, {"path", "canonicalize"});
  std::string path = path_arg(sig, "path");
  bool canonicalize = sig.flag("canonicalize", false);
  need_absolute(sig, path, "Path to link");
  struct stat lst {};
  if (::lstat(path.c_str(), &lst) != 0 || !S_ISLNK(lst.st_mode)) {
    sig.fail("A valid link was not specified: " + path);
  }
  if (canonicalize) return ok(real_path(path));
  auto target = read_link(path);
  if (!target) sig.fail(path + ": " + errno_text(errno));
  return ok(*target);
}

// A regex/iregex of file.find; a bad one fails the call naming it.
std::unique_ptr<py_regex> compile_find_pattern(const arguments& sig, const std::string& pattern,
                                               long long flags) {
  try {
    return std::make_unique<py_regex>(pattern, flags);
  } catch (const base::error& e) {
    sig.fail("bad pattern '" + pattern + "': " + e.what());
  }
}

struct find_criteria {
  std::optional<std::string> name, iname;
  std::unique_ptr<py_regex> re;
  std::set<mode_t> types;
  bool print_name = false;

  bool match(const std::string& base, mode_t mode) {
    if (name && !fnmatch(*name, base)) return false;
    if (iname && !fnmatch(*iname, lower(base))) return false;
    if (re && !re->match(base)) return false;
    if (!types.empty() && !types.contains(mode & S_IFMT)) return false;
    return true;
  }
};

asio::awaitable<outcome> find(call c) {
  arguments sig(
      "file.find", c,
      {"path", "name", "iname", "regex", "iregex", "type", "maxdepth", "mindepth", "print"});
  std::string root = path_arg(sig, "path");
  find_criteria crit;
  if (const json* v = sig.get("name"); v != nullptr) {
    crit.name = text_arg(sig, "name", *v);
  }
  if (const json* v = sig.get("iname"); v != nullptr) {
    crit.iname = lower(text_arg(sig, "iname", *v));
  }
  const json* rx = sig.get("regex");
  const json* irx = sig.get("iregex");
  if (rx != nullptr && irx != nullptr) sig.fail("give regex or iregex, not both");
  if (rx != nullptr) {
    crit.re = compile_find_pattern(sig, text_arg(sig, "regex", *rx), 0);
  } else if (irx != nullptr) {
    crit.re = compile_find_pattern(sig, text_arg(sig, "iregex", *irx), k_re_ignorecase);
  }
  if (const json* v = sig.get("type"); v != nullptr) {
    static const std::map<char, mode_t> k_types = {{'b', S_IFBLK}, {'c', S_IFCHR}, {'d', S_IFDIR},
                                                   {'f', S_IFREG}, {'l', S_IFLNK}, {'p', S_IFIFO},
                                                   {'s', S_IFSOCK}};
    for (char ch : text_arg(sig, "type", *v)) {
      if (ch == ',' || ch == ' ') continue;
      auto it = k_types.find(ch);
      if (it == k_types.end()) {
        sig.fail(std::string("invalid file type \"") + ch + "\" (type takes b c d f l p s)");
      }
      crit.types.insert(it->second);
    }
  }
  long long maxdepth = int_arg(sig, "maxdepth").value_or(-1);
  long long mindepth = int_arg(sig, "mindepth").value_or(0);
  std::string print = sig.scalar_text("print", "path");
  if (print != "path" && print != "name") {
    sig.fail("print must be 'path' or 'name' (others are not supported), got " + print);
  }
  crit.print_name = print == "name";

  std::vector<std::string> found;
  std::size_t visited = 0;
  struct pending {
    std::string dir;
    long long depth;
  };
  std::vector<pending> stack;
  auto consider = [&](const std::string& full, const std::string& base, mode_t mode,
                      long long depth) {
    if (depth >= mindepth && crit.match(base, mode)) found.push_back(crit.print_name ? base : full);
  };
  struct stat st {};
  if (::lstat(root.c_str(), &st) == 0) {
    std::string top = root.size() > 1 && root.back() == '/' ? norm(root) : root;
    consider(root, fs::path(top).filename().string(), st.st_mode, 0);
    struct stat followed {};
    if (maxdepth != 0 && ::stat(root.c_str(), &followed) == 0 && S_ISDIR(followed.st_mode)) {
      stack.push_back({top, 0});
    }
  }
  while (!stack.empty()) {
    pending dir = std::move(stack.back());
    stack.pop_back();
    std::vector<std::string> names;
    if (DIR* d = ::opendir(dir.dir.c_str())) {
      while (const dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") names.push_back(std::move(n));
      }
      ::closedir(d);
    }
    for (const auto& n : names) {
      if (++visited > k_find_limit) {
        sig.fail("more than " + std::to_string(k_find_limit) + " entries under " + root +
                 "; narrow the search (a deeper path or maxdepth)");
      }
      if (visited % 1000 == 0) co_await yield_now();
      std::string full = dir.dir == "/" ? "/" + n : dir.dir + "/" + n;
      if (::lstat(full.c_str(), &st) != 0) continue;
      consider(full, n, st.st_mode, dir.depth + 1);
      if (S_ISDIR(st.st_mode) && (maxdepth < 0 || dir.depth + 1 < maxdepth)) {
        stack.push_back({full, dir.depth + 1});
      }
    }
  }
  std::sort(found.begin(), found.end());
  outcome o;
  o.ret = found;
  co_return o;
}

struct replace_request {
  std::string path, pattern, repl;
  long long count = 0, flags = k_re_multiline;
  bool append_if_not_found = false, prepend_if_not_found = false;
  std::optional<std::string> not_found_content;
  std::string backup = ".bak";
  bool dry_run = false, search_only = false, show_changes = true, ignore_if_missing = false;
  bool backslash_literal = false;
};

json do_replace(const std::string& fun, const replace_request& r) {
  if (r.search_only && (r.append_if_not_found || r.prepend_if_not_found)) {
    fail(fun, "search_only cannot be used with append/prepend_if_not_found");
  }
  if (r.append_if_not_found && r.prepend_if_not_found) {
    fail(fun, "Only one of append and prepend_if_not_found is permitted");
  }
  struct stat st {};
  if (::stat(r.path.c_str(), &st) != 0) {
    if (r.ignore_if_missing) return false;
    fail(fun, "File not found: " + r.path);
  }
  if (!S_ISREG(st.st_mode)) fail(fun, r.path + " is not a regular file");
  // A symlink's target is what changes.
  const std::string path = real_path(r.path);
  const std::string data = read_file(fun, path);
  if (looks_binary(data))
    fail(fun, "Cannot perform string replacements on a binary file: " + r.path);
  std::unique_ptr<py_regex> compiled;
  try {
    compiled = std::make_unique<py_regex>(r.pattern, r.flags);
  } catch (const base::error& e) {
    fail(fun, "bad pattern '" + r.pattern + "': " + e.what());
  }
  py_regex& re = *compiled;
  if (r.search_only) return re.search(data, 0);

  std::string repl = r.repl;
  if (r.backslash_literal) {
    std::string escaped;
    for (char ch : repl) escaped += ch == '\\' ? std::string("\\\\") : std::string(1, ch);
    repl = escaped;
  }
  std::pair<std::string, long long> replaced;
  try {
    replaced = re.subn(repl, data, r.count);
  } catch (const base::error& e) {
    fail(fun, std::string(e.what()) + " in repl");
  }
  auto [result, nrepl] = std::move(replaced);
  bool found = nrepl > 0;
  bool has_changes = result != data;
  if (r.append_if_not_found || r.prepend_if_not_found) {
    const std::string content = r.not_found_content.value_or(r.repl);
    // Content a previous run added counts as found.
    py_regex added("^" + re_escape(content) + "($|(?=\r\n))", r.flags);
    if (added.search(data, 0)) found = true;
    if (!found) {
      if (r.prepend_if_not_found) {
        result = content + "\n" + result;
      } else {
        if (!result.empty() && result.back() != '\n') result += '\n';
        result += content + "\n";
      }
      has_changes = true;
    }
  }
  if (has_changes && !r.dry_run) {
    if (!r.backup.empty()) {
      const std::string backup_path = path + r.backup;
      write_atomic(fun, backup_path, data, st);
      timespec times[2] = {st.st_atim, st.st_mtim};
      ::utimensat(AT_FDCWD, backup_path.c_str(), times, 0);
    }
    write_atomic(fun, path, result, st);
  }
  // Salt: difflib over bytes.splitlines(True) of both.
  std::string diff = get_diff(split_lines(data), split_lines(result));
  if (r.show_changes) return diff;
  return has_changes && !diff.empty();
}

outcome replace(const call& c) {
  arguments sig("file.replace", c,
                {"path", "pattern", "repl", "count", "flags", "bufsize", "append_if_not_found",
                 "prepend_if_not_found", "not_found_content", "backup", "dry_run", "search_only",
                 "show_changes", "ignore_if_missing", "preserve_inode", "backslash_literal"});
  replace_request r;
  r.path = path_arg(sig, "path");
  r.pattern = text_arg(sig, "pattern", sig.need("pattern"));
  r.repl = text_arg(sig, "repl", sig.need("repl"));
  r.count = int_arg(sig, "count").value_or(0);
  r.flags = re_flags(sig, "flags", k_re_multiline);
  r.append_if_not_found = sig.flag("append_if_not_found", false);
  r.prepend_if_not_found = sig.flag("prepend_if_not_found", false);
  if (const json* v = sig.get("not_found_content"); v != nullptr) {
    r.not_found_content = text_arg(sig, "not_found_content", *v);
  }
  if (const json* v = sig.given("backup"); v != nullptr) {
    if (v->is_null() || (v->is_boolean() && !v->get<bool>())) {
      r.backup.clear();
    } else if (v->is_string()) {
      r.backup = v->get<std::string>();
    } else {
      sig.fail("backup must be a suffix such as '.bak' or false, got " + v->dump());
    }
  }
  r.dry_run = sig.flag("dry_run", false);
  r.search_only = sig.flag("search_only", false);
  r.show_changes = sig.flag("show_changes", true);
  r.ignore_if_missing = sig.flag("ignore_if_missing", false);
  sig.flag("preserve_inode", true);
  r.backslash_literal = sig.flag("backslash_literal", false);
  return ok(do_replace(sig.fun(), r));
}

outcome search(const call& c) {
  arguments sig("file.search", c,
                {"path", "pattern", "flags", "bufsize", "ignore_if_missing", "multiline"});
  replace_request r;
  r.path = path_arg(sig, "path");
  r.pattern = text_arg(sig, "pattern", sig.need("pattern"));
  r.flags = re_flags(sig, "flags", k_re_multiline);
  if (sig.flag("multiline", false)) r.flags |= k_re_multiline;
  r.ignore_if_missing = sig.flag("ignore_if_missing", false);
  r.dry_run = true;
  r.search_only = true;
  r.show_changes = false;
  return ok(do_replace(sig.fun(), r));
}

outcome contains(const call& c) {
  arguments sig("file.contains", c, {"path", "text"});
  std::string path = path_arg(sig, "path");
  std::string text = python_str(sig.need("text"));
  text.erase(0, text.find_first_not_of(" \t\n\r\v\f"));
  text.erase(text.find_last_not_of(" \t\n\r\v\f") + 1);
  fd_guard fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ok(false);
  // Chunks overlap by the text's length, so a match across a boundary counts.
  std::string window;
  std::string buf(k_chunk, '\0');
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ok(false);
    window.append(buf.data(), static_cast<std::size_t>(n));
    if (window.find(text) != std::string::npos) return ok(true);
    if (window.size() > text.size()) window.erase(0, window.size() - text.size());
  }
}

// Salt's file.get_user, get_group, get_uid, get_gid and get_mode: one
// field of file.stats.
enum class stat_field { user, group, uid, gid, mode };

template <stat_field F>
outcome stat_one(const call& c) {
  static constexpr const char* names[] = {"file.get_user", "file.get_group", "file.get_uid",
                                          "file.get_gid", "file.get_mode"};
  arguments sig(names[static_cast<int>(F)], c, {"path", "follow_symlinks"});
  std::string path = path_arg(sig, "path");
  struct stat st = stat_of(sig, path, sig.flag("follow_symlinks", true));
  switch (F) {
    case stat_field::user: return ok(user_name(st.st_uid));
    case stat_field::group: return ok(group_name(st.st_gid));
    case stat_field::uid: return ok(st.st_uid);
    case stat_field::gid: return ok(st.st_gid);
    case stat_field::mode: break;
  }
  return ok(mode_text(st.st_mode));
}

outcome is_link(const call& c) {
  arguments sig("file.is_link", c, {"path"});
  std::string path = path_arg(sig, "path");
  struct stat st {};
  return ok(::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode));
}

// Salt's file.contains_regex: whether a line of the file (its line break
// kept, `lchar`'s characters stripped from its front) has a match of
// `regex`; False for a file that is not there or cannot be read.
outcome contains_regex(const call& c) {
  arguments sig("file.contains_regex", c, {"path", "regex", "lchar"});
  std::string path = path_arg(sig, "path");
  std::string regex = text_arg(sig, "regex", sig.need("regex"));
  std::string lchar = sig.scalar_text("lchar", "");
  py_regex re(regex);
  std::string data;
  {
    fd_guard fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return ok(false);
    std::string buf(k_chunk, '\0');
    for (;;) {
      ssize_t n = ::read(fd.get(), buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ok(false);
      if (n == 0) break;
      data.append(buf.data(), static_cast<std::size_t>(n));
    }
  }
  // Python's text mode: "\r\n" and "\r" read as "\n".
  std::string text;
  text.reserve(data.size());
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (data[i] == '\r') {
      text += '\n';
      if (i + 1 < data.size() && data[i + 1] == '\n') ++i;
    } else {
      text += data[i];
    }
  }
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t nl = text.find('\n', at);
    std::size_t end = nl == std::string::npos ? text.size() : nl + 1;
    std::string_view line(text.data() + at, end - at);
    if (!lchar.empty()) {
      std::size_t keep = line.find_first_not_of(lchar);
      line.remove_prefix(keep == std::string_view::npos ? line.size() : keep);
    }
    if (re.search(line)) return ok(true);
    at = end;
  }
  return ok(false);
}

// Salt's file.check_hash: whether the file's digest is `file_hash`, given
// as "type:value", "type=value" or a bare value whose length names the type.
asio::awaitable<outcome> check_hash(call c) {
  arguments sig("file.check_hash", c, {"path", "file_hash"});
  std::string path = path_arg(sig, "path");
  const json& given = sig.need("file_hash");
  if (!given.is_string()) sig.fail("hash must be a string");
  std::string file_hash = given.get<std::string>();
  std::string type, value;
  auto sep = file_hash.find(':');
  if (sep == std::string::npos) sep = file_hash.find('=');
  if (sep != std::string::npos) {
    type = file_hash.substr(0, sep);
    value = file_hash.substr(sep + 1);
  } else {
    static const std::pair<std::size_t, const char*> by_length[] = {
        {32, "md5"}, {40, "sha1"}, {56, "sha224"}, {64, "sha256"}, {96, "sha384"}, {128, "sha512"}};
    for (const auto& [len, name] : by_length) {
      if (file_hash.size() == len) type = name;
    }
    if (type.empty()) {
      sig.fail("Hash " + file_hash + " (length: " + std::to_string(file_hash.size()) +
               ") could not be matched to a supported hash type. The supported hash types and "
               "lengths are: md5 (32), sha1 (40), sha224 (56), sha256 (64), sha384 (96), sha512 "
               "(128)");
    }
    value = file_hash;
  }
  std::string digest = co_await hash_file(sig.fun(), path, type);
  co_return ok(digest == value);
}

template <outcome (*F)(const call&)>
asio::awaitable<outcome> now(call c) {
  co_return F(c);
}

}  // namespace
}  // namespace file_mod

void register_file_module(registry& reg) {
  using namespace file_mod;
  using k = registry::kind;
  reg.add("file.file_exists", now<file_exists>,
          "file.file_exists(path) -> True when path is a regular file (symlinks followed).\n\n"
          "CLI example: brine cmd '*' file.file_exists /etc/passwd",
          k::may_block);
  reg.add("file.directory_exists", now<directory_exists>,
          "file.directory_exists(path) -> True when path is a directory (symlinks followed).\n\n"
          "CLI example: brine cmd '*' file.directory_exists /etc",
          k::may_block);
  reg.add("file.readdir", now<readdir>,
          "file.readdir(path) -> '.', '..' and the entries of the directory path (absolute), in "
          "the directory's own order, as Salt's.\n\nCLI example: brine cmd '*' file.readdir /etc",
          k::may_block);
  reg.add("file.read", now<read>,
          "file.read(path, binary=False) -> the file's content as text (UTF-8 only).\n\n"
          "CLI example: brine cmd '*' file.read /etc/hostname",
          k::may_block);
  reg.add("file.write", now<write>,
          "file.write(path, *args) -> 'Wrote N lines to \"path\"'; replaces the file with one "
          "line per argument.\n\n"
          "CLI example: brine cmd '*' file.write /tmp/motd 'line one' 'line two'",
          k::may_block);
  reg.add("file.append", now<append>,
          "file.append(path, *args) -> 'Wrote N lines to \"path\"'; adds one line per argument "
          "to an existing file.\n\n"
          "CLI example: brine cmd '*' file.append /etc/motd 'welcome'",
          k::may_block);
  reg.add("file.touch", now<touch>,
          "file.touch(name, atime=None, mtime=None) -> True; creates the file or sets its times "
          "(epoch seconds, now by default).\n\n"
          "CLI example: brine cmd '*' file.touch /var/log/emptyfile",
          k::may_block);
  reg.add("file.remove", now<remove>,
          "file.remove(path) -> True when removed (directories recursively), False when it did "
          "not exist.\n\n"
          "CLI example: brine cmd '*' file.remove /tmp/foo",
          k::may_block);
  reg.add("file.mkdir", now<mkdir>,
          "file.mkdir(dir_path, user=None, group=None, mode=None) -> True; creates the directory "
          "and its missing parents, each with the owner and mode given.\n\n"
          "CLI example: brine cmd '*' file.mkdir /opt/app/data user=app mode=750",
          k::may_block);
  reg.add("file.get_user", now<stat_one<stat_field::user>>,
          "file.get_user(path, follow_symlinks=True) -> the name of the owner (the uid when it "
          "has no name), as file.stats.\n\nCLI example: brine cmd '*' file.get_user "
          "/etc/passwd",
          k::may_block);
  reg.add("file.get_group", now<stat_one<stat_field::group>>,
          "file.get_group(path, follow_symlinks=True) -> the name of the group (the gid when "
          "it has no name), as file.stats.\n\nCLI example: brine cmd '*' file.get_group "
          "/etc/passwd",
          k::may_block);
  reg.add("file.get_uid", now<stat_one<stat_field::uid>>,
          "file.get_uid(path, follow_symlinks=True) -> the uid of the owner.\n\nCLI example: "
          "brine cmd '*' file.get_uid /etc/passwd",
          k::may_block);
  reg.add("file.get_gid", now<stat_one<stat_field::gid>>,
          "file.get_gid(path, follow_symlinks=True) -> the gid of the group.\n\nCLI example: "
          "brine cmd '*' file.get_gid /etc/passwd",
          k::may_block);
  reg.add("file.get_mode", now<stat_one<stat_field::mode>>,
          "file.get_mode(path, follow_symlinks=True) -> the permission bits as Salt writes "
          "them ('0644').\n\nCLI example: brine cmd '*' file.get_mode /etc/passwd",
          k::may_block);
  reg.add("file.is_link", now<is_link>,
          "file.is_link(path) -> True when path is a symbolic link (dangling or not).\n\nCLI "
          "example: brine cmd '*' file.is_link /etc/localtime",
          k::may_block);
  reg.add("file.contains_regex", now<contains_regex>,
          "file.contains_regex(path, regex, lchar='') -> True when a line of path (lchar's "
          "characters stripped from its front) matches the Python regular expression; False "
          "when path cannot be read.\n\nCLI example: brine cmd '*' file.contains_regex "
          "/etc/ssh/sshd_config '^PermitRootLogin'",
          k::may_block);
  reg.add("file.check_hash", check_hash,
          "file.check_hash(path, file_hash) -> True when the file's digest is file_hash "
          "('sha256:HEX', 'md5=HEX', or a bare HEX whose length names md5, sha1, sha224, "
          "sha256, sha384 or sha512).\n\nCLI example: brine cmd '*' file.check_hash /etc/hosts "
          "sha256:0a1b...",
          k::may_block);
  reg.add("file.stats", stats,
          "file.stats(path, hash_type=None, follow_symlinks=True) -> {inode, uid, gid, user, "
          "group, atime, mtime, ctime, size, mode, type, target[, sum]}.\n\n"
          "CLI example: brine cmd '*' file.stats /etc/passwd hash_type=sha256",
          k::may_block);
  reg.add("file.get_hash", get_hash,
          "file.get_hash(path, form='sha256', chunk_size=65536) -> the hex digest (md5, sha1, "
          "sha224, sha256, sha384 or sha512).\n\n"
          "CLI example: brine cmd '*' file.get_hash /etc/shadow form=sha512",
          k::may_block);
  reg.add("file.chmod", now<chmod>,
          "file.chmod(path, mode) -> the new mode, e.g. '0640'.\n\n"
          "CLI example: brine cmd '*' file.chmod /etc/app.conf 640",
          k::may_block);
  reg.add("file.chown", now<chown>,
          "file.chown(path, user, group) -> None when done; Salt's message (user or group does "
          "not exist, file not found) otherwise.\n\n"
          "CLI example: brine cmd '*' file.chown /etc/app.conf root root",
          k::may_block);
  reg.add("file.symlink", now<symlink>,
          "file.symlink(src, path, force=False, atomic=False) -> True; creates the link path -> "
          "src (force: replaces what is at path, atomically).\n\n"
          "CLI example: brine cmd '*' file.symlink /opt/app/current /srv/app",
          k::may_block);
  reg.add("file.readlink", now<readlink>,
          "file.readlink(path, canonicalize=False) -> the link's target (canonicalize: fully "
          "resolved).\n\n"
          "CLI example: brine cmd '*' file.readlink /etc/localtime",
          k::may_block);
  reg.add("file.find", find,
          "file.find(path, name=, iname=, regex=, iregex=, type=, maxdepth=, mindepth=, "
          "print='path') -> the sorted list of matching paths (type: letters of b c d f l p s; "
          "at most 100000 entries are examined).\n\n"
          "CLI example: brine cmd '*' file.find /etc name='*.conf' type=f maxdepth=2",
          k::may_block);
  reg.add("file.replace", now<replace>,
          "file.replace(path, pattern, repl, count=0, flags=8, bufsize=1, "
          "append_if_not_found=False, prepend_if_not_found=False, not_found_content=None, "
          "backup='.bak', dry_run=False, search_only=False, show_changes=True, "
          "ignore_if_missing=False, preserve_inode=True, backslash_literal=False) -> a unified "
          "diff of the change ('' when none), or True/False when show_changes=False.\n\n"
          "CLI example: brine cmd '*' file.replace /etc/ssh/sshd_config '^#?PermitRootLogin .*' "
          "'PermitRootLogin no'",
          k::may_block);
  reg.add("file.contains", now<contains>,
          "file.contains(path, text) -> True when the file contains text (stripped).\n\n"
          "CLI example: brine cmd '*' file.contains /etc/hosts localhost",
          k::may_block);
  reg.add("file.search", now<search>,
          "file.search(path, pattern, flags=8, bufsize=1, ignore_if_missing=False, "
          "multiline=False) -> True when the pattern matches the file's content.\n\n"
          "CLI example: brine cmd '*' file.search /etc/crontab 'mymaintenance.sh'",
          k::may_block);
}

}  // namespace brine::modules
