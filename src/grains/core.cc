#include "grains/core.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <regex>
#include <stdexcept>
#include <string>

#include "grains/text.h"

namespace brine::grains {
namespace {

std::string env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

// What `dpkg --print-architecture` (Debian family) and `rpm --eval
// %{_host_cpu}` (RedHat, Suse) print: the architecture of the user space,
// which is the one this binary was built for.
std::string package_arch(const std::string& os_family, const std::string& cpuarch) {
  if (os_family == "Debian") {
#if defined(__x86_64__) && defined(__ILP32__)
    return "x32";
#elif defined(__x86_64__)
    return "amd64";
#elif defined(__i386__)
    return "i386";
#elif defined(__aarch64__)
    return "arm64";
#elif defined(__arm__) && defined(__ARM_PCS_VFP)
    return "armhf";
#elif defined(__arm__)
    return "armel";
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return "ppc64el";
#elif defined(__powerpc64__)
    return "ppc64";
#elif defined(__s390x__)
    return "s390x";
#elif defined(__riscv) && __riscv_xlen == 64
    return "riscv64";
#elif defined(__loongarch64)
    return "loong64";
#else
    return cpuarch;
#endif
  }
  if (os_family == "RedHat" || os_family == "Suse") {
#if defined(__x86_64__)
    return "x86_64";
#elif defined(__aarch64__)
    return "aarch64";
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return "ppc64le";
#elif defined(__s390x__)
    return "s390x";
#else
    return cpuarch;
#endif
  }
  return cpuarch;
}

// Salt's _ps.
std::string ps_grain(const nlohmann::json& g) {
  std::string os = g.value("os", "");
  std::string family = g.value("os_family", "");
  if (os == "FreeBSD" || os == "NetBSD" || os == "OpenBSD" || os == "MacOS") return "ps auxwww";
  if (family == "Solaris") return "/usr/ucb/ps auxwww";
  if (g.value("virtual", "") == "openvzhn") {
    return "ps -fH -p $(grep -l \"^envID:[[:space:]]*0\\$\" /proc/[0-9]*/status | sed -e "
           "\"s=/proc/\\([0-9]*\\)/.*=\\1=\")  | awk '{ $7=\"\"; print }'";
  }
  if (family == "AIX") return "/usr/bin/ps auxww";
  if (family == "NILinuxRT") return "ps -o user,pid,ppid,tty,time,comm";
  return "ps -efHww";
}

// A pattern of grains_blacklist, compiled once.
struct blacklist_pattern {
  std::string glob;
  std::optional<std::regex> re;
};

std::vector<blacklist_pattern> compile(const std::vector<std::string>& patterns) {
  std::vector<blacklist_pattern> out;
  for (const std::string& p : patterns) {
    blacklist_pattern b{.glob = p};
    try {
      b.re.emplace(p, std::regex::ECMAScript);
    } catch (const std::regex_error&) {
      // Salt ignores a pattern that is no regular expression (re.error).
    }
    out.push_back(std::move(b));
  }
  return out;
}

bool matches(std::string_view grain, const std::vector<blacklist_pattern>& patterns) {
  std::string name(grain);
  for (const blacklist_pattern& p : patterns) {
    // Python's fnmatch: no backslash escapes, '*' matches '/' and leading dots.
    if (::fnmatch(p.glob.c_str(), name.c_str(), FNM_NOESCAPE) == 0) return true;
    if (p.re && std::regex_match(name, *p.re)) return true;
  }
  return false;
}

}  // namespace

fs_root::fs_root(std::string root) : root_(std::move(root)) {
  while (!root_.empty() && root_.back() == '/') root_.pop_back();
}

std::string fs_root::path(std::string_view abs) const {
  if (root_.empty()) return std::string(abs);
  return root_ + (abs.starts_with('/') ? "" : "/") + std::string(abs);
}

std::optional<std::string> fs_root::read(std::string_view abs) const {
  std::string p = path(abs);
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string data;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      return std::nullopt;  // a directory (EISDIR), or a /proc file we may not read
    }
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return data;
}

bool fs_root::exists(std::string_view abs) const {
  struct stat st {};
  return ::stat(path(abs).c_str(), &st) == 0;
}

bool fs_root::is_file(std::string_view abs) const {
  struct stat st {};
  return ::stat(path(abs).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool fs_root::is_dir(std::string_view abs) const {
  struct stat st {};
  return ::stat(path(abs).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

nlohmann::json core_grains(const core_options& o) {
  fs_root root(o.root);
  std::string path_env = env("PATH", "");
  nlohmann::json g = nlohmann::json::object();
  g["id"] = o.id;

  struct utsname u {};
  if (::uname(&u) == 0) {
    g["kernel"] = u.sysname;
    g["nodename"] = u.nodename;
    g["kernelrelease"] = u.release;
    g["kernelversion"] = u.version;
    g["cpuarch"] = u.machine;
  }
  g["init"] = init_grain(root, path_env);
  g.update(os_grains(root));
  g.update(cpu_grains(root.read("/proc/cpuinfo").value_or("")));
  g["osarch"] = package_arch(g.value("os_family", ""), g.value("cpuarch", ""));
  g.update(mem_grains(root.read("/proc/meminfo").value_or("")));

  nlohmann::json hw = hw_grains(root);
  g.update(hw);
  // CPUID, our uid and PID 1's root describe the live host, not a fixture tree.
  live_facts live = root.live() ? probe_live_facts() : live_facts{};
  g.update(virtual_grains(root, live, path_env, hw));
  g["ps"] = ps_grain(g);

  g.update(hostname_grains());
  g.update(interface_grains(live_interfaces()));
  g.update(fqdn_ip_grains(g["fqdn"].get<std::string>(), !g["ipv4"].empty(), !g["ipv6"].empty()));

  for (const char* file : {"/etc/machine-id", "/var/lib/dbus/machine-id"}) {
    if (!root.exists(file)) continue;
    if (auto id = root.read(file)) g["machine_id"] = text::strip(*id);
    break;
  }

  std::string path = text::strip(path_env);
  g["path"] = path;
  g["systempath"] = text::split(path, ':');
  g["shell"] = env("SHELL", "/bin/sh");
  g["brineversion"] = o.brine_version;
  // The Salt release whose behaviour brine reproduces (its state compiler
  // and runner are checked against Salt 3006.23), and that release's Python
  // (the 3006 onedir's 3.10): formulas test these to pick their code paths,
  // e.g. `grains.saltversioninfo >= [3006]`, `grains.pythonversion[0] == 3`.
  g["saltversion"] = "3006.23";
  g["saltversioninfo"] = nlohmann::json::array({3006, 23});
  g["pythonversion"] = nlohmann::json::array({3, 10, 18, "final", 0});
  return g;
}

bool blacklisted(std::string_view grain, const std::vector<std::string>& blacklist) {
  return matches(grain, compile(blacklist));
}

nlohmann::json apply_custom(nlohmann::json core, const nlohmann::json& configured,
                            const std::vector<std::string>& blacklist) {
  if (!configured.is_null() && !configured.is_object()) {
    throw std::invalid_argument(std::string("grains must be a map of grain names to values, got ") +
                                configured.type_name() + "; write it as `grains: {name: value}`");
  }
  if (!core.is_object()) core = nlohmann::json::object();
  if (!blacklist.empty()) {
    std::vector<blacklist_pattern> patterns = compile(blacklist);
    for (auto it = core.begin(); it != core.end();) {
      if (matches(it.key(), patterns)) {
        it = core.erase(it);
      } else {
        ++it;
      }
    }
  }
  if (configured.is_object()) {
    for (const auto& [k, v] : configured.items()) core[k] = v;
  }
  return core;
}

}  // namespace brine::grains
