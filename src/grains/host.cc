// Host probes: /proc, /sys, getifaddrs(3), CPUID. Each follows the Salt 3006
// function named in its comment; where Salt runs a command, the command's
// answer is emulated from the files the command itself reads.

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if_arp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netpacket/packet.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "base/fs.h"
#include "grains/core.h"
#include "grains/text.h"

namespace brine::grains {
namespace {

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

std::string first_line(std::string_view s) {
  std::vector<std::string_view> l = text::lines(s);
  return l.empty() ? "" : std::string(l.front());
}

// <linux/if_arp.h> has it, glibc's <net/if_arp.h> does not (and the two clash).
constexpr unsigned short k_arphrd_ip6gre = 823;

// iproute2's ll_addr_n2a, which Salt's `ip link` parser reads back.
std::optional<std::string> format_hwaddr(const sockaddr_ll& ll) {
  if (ll.sll_halen == 0) return std::nullopt;  // `link/none`: Salt sets no hwaddr
  char buf[INET6_ADDRSTRLEN] = {};
  if (ll.sll_halen == 4 && (ll.sll_hatype == ARPHRD_TUNNEL || ll.sll_hatype == ARPHRD_SIT ||
                            ll.sll_hatype == ARPHRD_IPGRE)) {
    return ::inet_ntop(AF_INET, ll.sll_addr, buf, sizeof buf);
  }
  if (ll.sll_halen == 16 && (ll.sll_hatype == ARPHRD_TUNNEL6 || ll.sll_hatype == k_arphrd_ip6gre)) {
    return ::inet_ntop(AF_INET6, ll.sll_addr, buf, sizeof buf);
  }
  std::string out;
  size_t n = std::min<size_t>(ll.sll_halen, sizeof ll.sll_addr);
  for (size_t i = 0; i < n; ++i) {
    char hex[4];
    std::snprintf(hex, sizeof hex, i == 0 ? "%02x" : ":%02x", ll.sll_addr[i]);
    out += hex;
  }
  return out;
}

// Salt's `ip` parser takes an interface name only if it matches [\w.-]+.
bool salt_parses_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return text::is_ascii_alnum(c) || c == '_' || c == '.' || c == '-';
  });
}

// Sorts and de-duplicates addresses by value, as Salt's set of
// ipaddress objects does, and prints them back as inet_ntop does.
std::vector<std::string> sorted_addresses(const std::vector<std::string>& in, int family) {
  std::map<std::array<unsigned char, 16>, std::string> by_value;
  for (const std::string& a : in) {
    std::array<unsigned char, 16> raw{};
    if (::inet_pton(family, a.c_str(), raw.data()) != 1) continue;
    char buf[INET6_ADDRSTRLEN] = {};
    by_value.emplace(raw, ::inet_ntop(family, raw.data(), buf, sizeof buf));
  }
  std::vector<std::string> out;
  out.reserve(by_value.size());
  for (auto& [raw, text] : by_value) out.push_back(text);
  return out;
}

bool executable(const fs_root& root, const std::string& abs) {
  std::string p = root.path(abs);
  struct stat st {};
  if (::access(p.c_str(), X_OK) != 0) return false;
  return (::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode)) ||
         (::lstat(p.c_str(), &st) == 0 && S_ISLNK(st.st_mode));
}

// The part of /proc/<pid>/environ for `key`, or nullopt.
std::optional<std::string> environ_value(std::string_view environ, std::string_view key) {
  for (const std::string& kv : text::split(environ, '\0')) {
    if (kv.size() > key.size() && kv.starts_with(key) && kv[key.size()] == '=') {
      return kv.substr(key.size() + 1);
    }
  }
  return std::nullopt;
}

// systemd's detect_container (252), without the proot and user-namespace checks.
std::string detect_container(const fs_root& root) {
  static const std::map<std::string_view, std::string_view> names = {
      {"lxc", "lxc"},
      {"lxc-libvirt", "lxc-libvirt"},
      {"systemd-nspawn", "systemd-nspawn"},
      {"docker", "docker"},
      {"podman", "podman"},
      {"rkt", "rkt"},
      {"wsl", "wsl"},
      {"proot", "proot"},
      {"pouch", "pouch"},
  };
  auto files = [&]() -> std::string {
    if (root.exists("/run/.containerenv")) return "podman";
    if (root.exists("/.dockerenv")) return "docker";
    return "";
  };
  auto translate = [&](const std::string& e) -> std::string {
    if (e == "oci") {
      std::string f = files();
      return f.empty() ? "container-other" : f;
    }
    auto it = names.find(e);
    return it == names.end() ? "container-other" : std::string(it->second);
  };

  if (root.exists("/proc/vz") && !root.exists("/proc/bc")) return "openvz";
  if (auto o = root.read("/proc/sys/kernel/osrelease");
      o && (contains(*o, "Microsoft") || contains(*o, "WSL"))) {
    return "wsl";
  }
  for (std::string_view file : {"/run/host/container-manager", "/run/systemd/container"}) {
    if (auto c = root.read(file)) {
      std::string e = text::strip(first_line(*c));
      if (!e.empty()) return translate(e);
    }
  }
  if (auto env = root.read("/proc/1/environ")) {
    if (auto e = environ_value(*env, "container"); e && !e->empty()) return translate(*e);
  }
  if (std::string f = files(); !f.empty()) return f;
  return "none";
}

// systemd's detect_vm (252) for x86 and ARM; no device-tree or z/VM checks.
std::string detect_vm(const fs_root& root, const live_facts& live) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 15> dmi_vendors = {{
      {"KVM", "kvm"},
      {"OpenStack", "kvm"},
      {"KubeVirt", "kvm"},
      {"Amazon EC2", "amazon"},
      {"QEMU", "qemu"},
      {"VMware", "vmware"},
      {"VMW", "vmware"},
      {"innotek GmbH", "oracle"},
      {"VirtualBox", "oracle"},
      {"Xen", "xen"},
      {"Bochs", "bochs"},
      {"Parallels", "parallels"},
      {"BHYVE", "bhyve"},
      {"Hyper-V", "microsoft"},
      {"Apple Virtualization", "apple"},
  }};
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 11> cpuid_vendors = {{
      {"XenVMMXenVMM", "xen"},
      {"KVMKVMKVM", "kvm"},
      {"Linux KVM Hv", "kvm"},
      {"TCGTCGTCGTCG", "qemu"},
      {"VMwareVMware", "vmware"},
      {"Microsoft Hv", "microsoft"},
      {"bhyve bhyve ", "bhyve"},
      {"QNXQVMBSQG", "qnx"},
      {"ACRNACRNACRN", "acrn"},
      {"SRESRESRESRE", "sre"},
      {"Apple VZ", "apple"},
  }};

  auto xen_dom0 = [&] {
    if (auto features = root.read("/sys/hypervisor/properties/features")) {
      unsigned long bits = std::strtoul(text::strip(*features).c_str(), nullptr, 16);
      return (bits & (1UL << 11)) != 0;  // XENFEAT_dom0
    }
    auto caps = root.read("/proc/xen/capabilities");
    return caps && contains(*caps, "control_d");
  };
  auto finish = [&](const std::string& v) {
    return v == "xen" && xen_dom0() ? std::string("none") : v;
  };

  std::string dmi = "none";
  for (std::string_view file :
       {"product_name", "sys_vendor", "board_vendor", "bios_vendor", "product_version"}) {
    auto s = root.read("/sys/class/dmi/id/" + std::string(file));
    if (!s) continue;
    auto it = std::find_if(dmi_vendors.begin(), dmi_vendors.end(),
                           [&](const auto& v) { return s->starts_with(v.first); });
    if (it != dmi_vendors.end()) {
      dmi = it->second;
      break;
    }
  }
  if (dmi == "oracle" || dmi == "xen" || dmi == "amazon" || dmi == "parallels") {
    return finish(dmi);
  }
  if (auto cpuinfo = root.read("/proc/cpuinfo");
      cpuinfo && contains(*cpuinfo, "\nvendor_id\t: User Mode Linux\n")) {
    return "uml";
  }
  if (root.exists("/proc/xen")) return finish("xen");
  bool other = false;
  if (live.cpuid_hypervisor) {
    auto it = std::find_if(cpuid_vendors.begin(), cpuid_vendors.end(),
                           [&](const auto& v) { return live.cpuid_vendor == v.first; });
    if (it == cpuid_vendors.end()) {
      other = true;
    } else {
      return finish(std::string(it->second));
    }
  }
  if (dmi != "none") return finish(dmi);
  if (auto type = root.read("/sys/hypervisor/type")) {
    return text::strip(*type) == "xen" ? finish("xen") : "vm-other";
  }
  return other ? "vm-other" : "none";
}

// What virt-what would print, approximated from the same detection.
std::vector<std::string> virt_what_lines(const fs_root& root, const live_facts& live) {
  static const std::map<std::string_view, std::string_view> vm = {
      {"kvm", "kvm"},
      {"qemu", "qemu"},
      {"xen", "xen"},
      {"vmware", "vmware"},
      {"microsoft", "hyperv"},
      {"oracle", "virtualbox"},
      {"parallels", "parallels"},
      {"bhyve", "bhyve"},
      {"amazon", "aws"},
      {"uml", "uml"},
  };
  static const std::map<std::string_view, std::string_view> container = {
      {"lxc", "lxc"},
      {"lxc-libvirt", "lxc"},
      {"docker", "docker"},
      {"podman", "podman"},
      {"systemd-nspawn", "systemd_nspawn"},
      {"openvz", "openvz"},
      {"wsl", "wsl"},
  };
  std::vector<std::string> out;
  if (auto it = vm.find(detect_vm(root, live)); it != vm.end()) out.emplace_back(it->second);
  if (auto it = container.find(detect_container(root)); it != container.end()) {
    out.emplace_back(it->second);
  }
  return out;
}

std::string dmi_field(const fs_root& root, std::string_view file) {
  auto s = root.read("/sys/class/dmi/id/" + std::string(file));
  return s ? text::strip(*s) : "";
}

// The lines of `dmidecode` output Salt's checks can see, from the DMI fields
// the kernel exports.
std::string dmidecode_output(const fs_root& root) {
  auto f = [&](std::string_view file) { return dmi_field(root, file); };
  return "Vendor: " + f("bios_vendor") + "\nVersion: " + f("bios_version") +
         "\nRelease Date: " + f("bios_date") + "\nManufacturer: " + f("sys_vendor") +
         "\nProduct Name: " + f("product_name") + "\nVersion: " + f("product_version") +
         "\nFamily: " + f("product_family") + "\nManufacturer: " + f("board_vendor") +
         "\nProduct Name: " + f("board_name") + "\nVersion: " + f("board_version") +
         "\nManufacturer: " + f("chassis_vendor") + "\nVersion: " + f("chassis_version") + "\n";
}

// The words of `lspci` output Salt's checks look for, from the PCI ids the
// kernel exports and the names pci.ids gives them.
std::string lspci_words(const fs_root& root) {
  std::string out;
  std::error_code ec;
  for (const auto& dev :
       std::filesystem::directory_iterator(root.path("/sys/bus/pci/devices"), ec)) {
    std::string base = "/sys/bus/pci/devices/" + dev.path().filename().string();
    auto vendor = root.read(base + "/vendor");
    auto device = root.read(base + "/device");
    if (!vendor || !device) continue;
    unsigned long v = std::strtoul(vendor->c_str(), nullptr, 16);
    unsigned long d = std::strtoul(device->c_str(), nullptr, 16);
    if (v == 0x15ad) out += " vmware";
    if (v == 0x80ee) out += " virtualbox";
    if (v == 0x1b36 || (v == 0x1234 && d == 0x1111)) out += " qemu";
    if (v == 0x1af4 && d >= 0x1000 && d <= 0x107f) out += " virtio";
  }
  return out;
}

bool same_stat(const struct stat& a, const struct stat& b) {
  return a.st_mode == b.st_mode && a.st_ino == b.st_ino && a.st_dev == b.st_dev &&
         a.st_nlink == b.st_nlink && a.st_uid == b.st_uid && a.st_gid == b.st_gid &&
         a.st_size == b.st_size && a.st_atim.tv_sec == b.st_atim.tv_sec &&
         a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_ctim.tv_sec == b.st_ctim.tv_sec;
}

}  // namespace

// Salt's _linux_cpudata. Only the field before a second ':' counts as the value.
nlohmann::json cpu_grains(std::string_view cpuinfo) {
  int64_t num_cpus = 0;
  std::string model = "Unknown";
  std::vector<std::string> flags;
  for (std::string_view line : text::lines(cpuinfo)) {
    std::vector<std::string> comps = text::split(line, ':');
    if (comps.size() <= 1) continue;
    std::string key = text::strip(comps[0]);
    std::string val = text::strip(comps[1]);
    if (key == "processor") {
      ++num_cpus;
    } else if (key == "# processors") {
      num_cpus = text::py_int(val).value_or(num_cpus);
    } else if (key == "vendor_id" || key == "model name" || key == "cpu") {
      model = val;
    } else if (key == "flags" || key == "Features") {
      flags = text::split_ws(val);
    } else if (key == "Processor") {
      model = text::split(val, '-')[0];
      num_cpus = 1;
    }
  }
  return {{"num_cpus", num_cpus}, {"cpu_model", model}, {"cpu_flags", flags}};
}

// Salt's _linux_memdata: kB // 1024.
nlohmann::json mem_grains(std::string_view meminfo) {
  int64_t mem = 0;
  int64_t swap = 0;
  for (std::string_view line : text::lines(meminfo)) {
    std::vector<std::string> comps = text::split(line, ':');
    if (comps.size() <= 1) continue;
    std::string key = text::strip(comps[0]);
    if (key != "MemTotal" && key != "SwapTotal") continue;
    std::vector<std::string> words = text::split_ws(comps[1]);
    std::optional<int64_t> kb = words.empty() ? std::nullopt : text::py_int(words[0]);
    if (!kb) continue;
    (key == "MemTotal" ? mem : swap) = *kb >= 0 ? *kb / 1024 : -((-*kb + 1023) / 1024);
  }
  return {{"mem_total", mem}, {"swap_total", swap}};
}

std::vector<interface> live_interfaces() {
  ifaddrs* head = nullptr;
  if (::getifaddrs(&head) != 0) return {};
  std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> guard(head, ::freeifaddrs);

  std::vector<interface> out;
  auto find = [&](const std::string& name) -> interface& {
    auto it =
        std::find_if(out.begin(), out.end(), [&](const interface& i) { return i.name == name; });
    if (it != out.end()) return *it;
    out.push_back(interface{.name = name});
    return out.back();
  };
  struct v4 {
    uint32_t addr, mask;
  };
  std::map<std::string, std::vector<v4>> seen;  // per interface, in kernel order

  for (ifaddrs* p = head; p != nullptr; p = p->ifa_next) {
    if (p->ifa_name == nullptr) continue;
    // IPv4 addresses come under their label ("eth0:1"); ':' is not allowed in
    // an interface name, so what precedes it is the interface.
    std::string name = p->ifa_name;
    name = name.substr(0, name.find(':'));
    interface& i = find(name);
    if (p->ifa_addr == nullptr) continue;
    char buf[INET6_ADDRSTRLEN] = {};
    switch (p->ifa_addr->sa_family) {
      case AF_PACKET:
        i.hwaddr = format_hwaddr(*reinterpret_cast<const sockaddr_ll*>(p->ifa_addr));
        break;
      case AF_INET: {
        const auto* sin = reinterpret_cast<const sockaddr_in*>(p->ifa_addr);
        uint32_t addr = ntohl(sin->sin_addr.s_addr);
        uint32_t mask =
            p->ifa_netmask != nullptr
                ? ntohl(reinterpret_cast<const sockaddr_in*>(p->ifa_netmask)->sin_addr.s_addr)
                : 0xffffffffU;
        // The kernel flags an address secondary when one already on the
        // interface has the same mask and subnet; `ip` prints the flag and
        // Salt files such addresses apart.
        std::vector<v4>& prior = seen[name];
        bool secondary = std::any_of(prior.begin(), prior.end(), [&](const v4& o) {
          return o.mask == mask && ((o.addr ^ addr) & mask) == 0;
        });
        prior.push_back({addr, mask});
        std::string text = ::inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf);
        (secondary ? i.secondary : i.inet).push_back(text);
        break;
      }
      case AF_INET6: {
        const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(p->ifa_addr);
        i.inet6.emplace_back(::inet_ntop(AF_INET6, &sin6->sin6_addr, buf, sizeof buf));
        break;
      }
      default:
        break;
    }
  }
  std::erase_if(out, [](const interface& i) { return !salt_parses_name(i.name); });
  return out;
}

// Salt's ip_fqdn (addresses), ip_interfaces, ip4_interfaces, ip6_interfaces,
// hwaddr_interfaces.
nlohmann::json interface_grains(const std::vector<interface>& ifaces) {
  std::vector<std::string> v4;
  std::vector<std::string> v6;
  nlohmann::json ip = nlohmann::json::object();
  nlohmann::json ip4 = nlohmann::json::object();
  nlohmann::json ip6 = nlohmann::json::object();
  nlohmann::json hw = nlohmann::json::object();
  for (const interface& i : ifaces) {
    nlohmann::json all = i.inet;
    for (const auto& a : i.inet6) all.push_back(a);
    for (const auto& a : i.secondary) all.push_back(a);
    ip[i.name] = all;
    nlohmann::json only4 = i.inet;
    for (const auto& a : i.secondary) only4.push_back(a);
    ip4[i.name] = only4;
    ip6[i.name] = i.inet6;
    if (i.hwaddr) hw[i.name] = *i.hwaddr;
    v4.insert(v4.end(), i.inet.begin(), i.inet.end());
    v4.insert(v4.end(), i.secondary.begin(), i.secondary.end());
    v6.insert(v6.end(), i.inet6.begin(), i.inet6.end());
  }
  return {{"ipv4", sorted_addresses(v4, AF_INET)},
          {"ipv6", sorted_addresses(v6, AF_INET6)},
          {"ip_interfaces", ip},
          {"ip4_interfaces", ip4},
          {"ip6_interfaces", ip6},
          {"hwaddr_interfaces", hw}};
}

namespace {

// Python's socket.getfqdn(name): resolve the name, look the first address up
// again, and take the first of its names (canonical, then aliases) with a dot,
// else the canonical one; `name` itself when either step fails.
std::string python_getfqdn(const std::string& name) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  addrinfo* res = nullptr;
  if (::getaddrinfo(name.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return name;
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(res, ::freeaddrinfo);
  const void* addr = nullptr;
  socklen_t len = 0;
  if (res->ai_family == AF_INET) {
    addr = &reinterpret_cast<const sockaddr_in*>(res->ai_addr)->sin_addr;
    len = sizeof(in_addr);
  } else if (res->ai_family == AF_INET6) {
    addr = &reinterpret_cast<const sockaddr_in6*>(res->ai_addr)->sin6_addr;
    len = sizeof(in6_addr);
  } else {
    return name;
  }
  std::vector<char> buf(1024);
  hostent he{};
  hostent* result = nullptr;
  int herr = 0;
  for (;;) {
    int rc =
        ::gethostbyaddr_r(addr, len, res->ai_family, &he, buf.data(), buf.size(), &result, &herr);
    if (rc != ERANGE || buf.size() > (1U << 20)) break;
    buf.resize(buf.size() * 2);
  }
  if (result == nullptr || result->h_name == nullptr) return name;
  std::vector<std::string> names = {result->h_name};
  for (char** a = result->h_aliases; a != nullptr && *a != nullptr; ++a) names.emplace_back(*a);
  auto dotted = std::find_if(names.begin(), names.end(),
                             [](const std::string& n) { return contains(n, "."); });
  return dotted != names.end() ? *dotted : names.front();
}

std::vector<std::string> resolve(const std::string& host, int family) {
  addrinfo hints{};
  hints.ai_family = family;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return {};
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(res, ::freeaddrinfo);
  std::vector<std::string> out;
  for (addrinfo* p = res; p != nullptr; p = p->ai_next) {
    char buf[INET6_ADDRSTRLEN] = {};
    const void* addr =
        p->ai_family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(p->ai_addr)->sin_addr)
            : static_cast<const void*>(
                  &reinterpret_cast<const sockaddr_in6*>(p->ai_addr)->sin6_addr);
    if (p->ai_family == family && ::inet_ntop(family, addr, buf, sizeof buf) != nullptr) {
      out.emplace_back(buf);
    }
  }
  return sorted_addresses(out, family);
}

}  // namespace

nlohmann::json hostname_grains() {
  std::string localhost = base::host_name();
  // Salt's get_fqhostname: the last non-empty canonical name of
  // getaddrinfo(hostname, 0, AF_UNSPEC, SOCK_STREAM, SOL_TCP, AI_CANONNAME).
  std::string fqdn;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  hints.ai_flags = AI_CANONNAME;
  addrinfo* res = nullptr;
  if (::getaddrinfo(localhost.c_str(), "0", &hints, &res) == 0) {
    for (addrinfo* p = res; p != nullptr; p = p->ai_next) {
      if (p->ai_canonname != nullptr && *p->ai_canonname != '\0') fqdn = p->ai_canonname;
    }
    ::freeaddrinfo(res);
  }
  if (fqdn.empty()) fqdn = python_getfqdn(localhost);
  size_t dot = fqdn.find('.');
  return {{"localhost", localhost},
          {"fqdn", fqdn},
          {"host", fqdn.substr(0, dot)},
          {"domain", dot == std::string::npos ? "" : fqdn.substr(dot + 1)}};
}

nlohmann::json fqdn_ip_grains(const std::string& fqdn, bool have_ipv4, bool have_ipv6) {
  return {{"fqdn_ip4", have_ipv4 ? resolve(fqdn, AF_INET) : std::vector<std::string>{}},
          {"fqdn_ip6", have_ipv6 ? resolve(fqdn, AF_INET6) : std::vector<std::string>{}}};
}

std::optional<std::string> which(const fs_root& root, std::string_view exe,
                                 std::string_view path_env) {
  if (exe.empty()) return std::nullopt;
  std::string name(exe);
  if (name.find('/') != std::string::npos) {
    if (executable(root, name)) return name;
    if (name.front() == '/') return std::nullopt;
  }
  std::vector<std::string> dirs = text::split(path_env, ':');
  for (const char* extra : {"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin"}) {
    if (std::find(dirs.begin(), dirs.end(), extra) == dirs.end()) dirs.emplace_back(extra);
  }
  for (const std::string& dir : dirs) {
    if (dir.empty() || dir.front() != '/') continue;
    std::string full = dir;
    if (full.back() != '/') full += '/';
    full += name;
    if (executable(root, full)) return full;
  }
  return std::nullopt;
}

// Salt's _linux_init_system.
std::string init_grain(const fs_root& root, std::string_view path_env) {
  if (root.exists("/run/systemd/system")) return "systemd";
  auto cmdline_raw = root.read("/proc/1/cmdline");
  if (!cmdline_raw) return "unknown";
  std::replace(cmdline_raw->begin(), cmdline_raw->end(), '\0', ' ');
  std::vector<std::string> cmdline = text::split_ws(*cmdline_raw);
  auto in_cmdline = [&](std::string_view exe) {
    auto path = which(root, exe, path_env);
    return path && std::find(cmdline.begin(), cmdline.end(), *path) != cmdline.end();
  };

  auto init_bin = cmdline.empty() ? std::nullopt : which(root, cmdline[0], path_env);
  if (init_bin && init_bin->ends_with("bin/init")) {
    // Salt reads the binary in 256 KiB chunks (each with the last 7 bytes of
    // the one before) and takes the first name found in the first chunk that
    // has one, trying upstart, sysvinit, systemd in that order.
    auto data = root.read(*init_bin);
    if (!data) return "unknown";
    std::string lowered = text::lower(*data);
    constexpr size_t chunk = 262144;
    constexpr size_t edge = 7;
    for (size_t off = 0; off < lowered.size(); off += chunk) {
      size_t from = off >= edge ? off - edge : 0;
      std::string_view buf = std::string_view(lowered).substr(from, off + chunk - from);
      for (std::string_view item : {"upstart", "sysvinit", "systemd"}) {
        if (contains(buf, item)) return std::string(item);
      }
    }
    return "unknown";
  }
  if (in_cmdline("supervisord")) return "supervisord";
  if (in_cmdline("dumb-init")) return "dumb-init";
  if (in_cmdline("tini")) return "tini";
  if (cmdline == std::vector<std::string>{"runit"}) return "runit";
  if (std::find(cmdline.begin(), cmdline.end(), "/sbin/my_init") != cmdline.end()) return "runit";
  return "unknown";
}

live_facts probe_live_facts() {
  live_facts f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1U << 31)) != 0) {
    f.cpuid_hypervisor = true;
    __cpuid(0x40000000, eax, ebx, ecx, edx);
    char sig[13] = {};
    std::memcpy(sig, &ebx, 4);
    std::memcpy(sig + 4, &ecx, 4);
    std::memcpy(sig + 8, &edx, 4);
    f.cpuid_vendor = sig;
  }
#endif
  f.is_root = ::geteuid() == 0;
  struct stat self {
  }, init{};
  f.chroot =
      ::stat("/", &self) == 0 && ::stat("/proc/1/root/.", &init) == 0 && !same_stat(self, init);
  struct utsname u {};
  if (::uname(&u) == 0) {
    for (const char* field : {u.sysname, u.nodename, u.release, u.version, u.machine}) {
      if (std::string_view(field) == "BrandZ virtual linux") f.brandz = true;
    }
  }
  return f;
}

std::string detect_virt(const fs_root& root, const live_facts& live) {
  std::string c = detect_container(root);
  return c != "none" ? c : detect_vm(root, live);
}

// Salt's _virtual for Linux. The commands it would run (systemd-detect-virt,
// virt-what, dmidecode, lspci) run only if installed, as Salt runs them, and
// are answered by emulation.
nlohmann::json virtual_grains(const fs_root& root, const live_facts& live,
                              std::string_view path_env, const nlohmann::json& hw) {
  std::string virt = "physical";
  std::string subtype;
  auto installed = [&](std::string_view cmd) { return which(root, cmd, path_env).has_value(); };

  std::vector<std::string_view> cmds = {"systemd-detect-virt", "virt-what", "dmidecode"};
  if (installed("virt-what")) cmds = {"virt-what"};
  if (root.exists("/proc/bus/pci")) cmds.push_back("lspci");
  if (live.brandz) return {{"virtual", "zone"}};

  for (std::string_view cmd : cmds) {
    if (!installed(cmd)) continue;
    if (cmd == "systemd-detect-virt") {
      std::string out = detect_virt(root, live);
      static constexpr std::array<std::string_view, 8> as_is = {
          "qemu", "kvm", "oracle", "xen", "bochs", "chroot", "uml", "systemd-nspawn"};
      if (std::find(as_is.begin(), as_is.end(), out) != as_is.end()) {
        virt = out;
        break;
      }
      if (contains(out, "vmware")) {
        virt = "VMware";
        break;
      }
      if (contains(out, "microsoft")) {
        virt = "VirtualPC";
        break;
      }
      if (contains(out, "lxc")) {
        virt = "container";
        subtype = "LXC";
        break;
      }
      if (contains(out, "amazon")) {
        virt = "Nitro";
        subtype = "Amazon EC2";
        break;
      }
      continue;  // "none" exits 1; containers Salt does not name fall through
    }
    if (cmd == "virt-what") {
      if (!live.is_root) continue;  // "must be run as root": a failed command
      for (const std::string& line : virt_what_lines(root, live)) {
        if (line == "kvm" || line == "qemu" || line == "uml" || line == "xen") {
          virt = line;
        } else if (contains(line, "lxc")) {
          virt = "container";
          subtype = "LXC";
        } else if (contains(line, "vmware")) {
          virt = "VMware";
        } else if (contains(line, "parallels")) {
          virt = "Parallels";
        } else if (contains(line, "hyperv")) {
          virt = "HyperV";
        } else {
          continue;
        }
        break;
      }
      break;
    }
    if (cmd == "dmidecode") {
      if (!live.is_root || !root.is_dir("/sys/class/dmi/id")) continue;
      std::string out = dmidecode_output(root);
      if (contains(out, "Vendor: QEMU")) virt = "kvm";
      if (contains(out, "Manufacturer: QEMU")) virt = "kvm";
      if (contains(out, "Vendor: Bochs")) virt = "kvm";
      if (contains(out, "Manufacturer: Bochs")) virt = "kvm";
      if (contains(out, "BHYVE")) {
        virt = "bhyve";
      } else if (contains(out, "Manufacturer: oVirt")) {
        virt = "kvm";
        subtype = "ovirt";
      } else if (contains(out, "Product Name: RHEV Hypervisor")) {
        virt = "kvm";
        subtype = "rhev";
      } else if (contains(out, "VirtualBox")) {
        virt = "VirtualBox";
      } else if (contains(out, "VMware")) {
        virt = "VMware";
      } else if (contains(out, ": Microsoft") && contains(out, "Virtual Machine")) {
        virt = "VirtualPC";
      } else if (contains(out, "Parallels Software")) {
        virt = "Parallels";
      } else if (contains(out, "Manufacturer: Google") || contains(out, "Vendor: SeaBIOS")) {
        virt = "kvm";
      }
      break;
    }
    if (cmd == "lspci") {
      std::string model = lspci_words(root);
      if (contains(model, "vmware")) {
        virt = "VMware";
      } else if (contains(model, "virtualbox")) {
        virt = "VirtualBox";
      } else if (contains(model, "qemu") || contains(model, "virtio")) {
        virt = "kvm";
      }
      break;
    }
  }

  if (live.chroot) subtype = "chroot";
  if (root.is_dir("/proc/vz")) {
    if (root.is_file("/proc/vz/version")) {
      virt = "openvzhn";
    } else if (root.is_file("/proc/vz/veinfo")) {
      virt = "openvzve";
    }
  }
  if (auto status = root.read("/proc/self/status")) {
    for (std::string_view line : text::lines(*status)) {
      if (!line.starts_with("envID:")) continue;
      std::string rest = text::strip(line.substr(6));
      if (rest.empty() || line.size() == 6 || !text::is_space(line[6])) continue;
      if (auto id = text::py_int(rest);
          id && rest.find_first_not_of("0123456789") == std::string::npos) {
        virt = *id != 0 ? "openvzve" : "openvzhn";
      }
    }
  }
  if (root.is_dir("/proc/sys/xen") || root.is_dir("/sys/bus/xen") || root.is_dir("/proc/xen")) {
    if (root.is_file("/proc/xen/xsd_kva")) {
      subtype = "Xen Dom0";
    } else if (hw.value("productname", "") == "HVM domU") {
      subtype = "Xen HVM DomU";
    } else if (auto caps = root.read("/proc/xen/capabilities")) {
      subtype = contains(*caps, "control_d") ? "Xen Dom0" : "Xen PV DomU";
    } else if (root.is_dir("/sys/bus/xen") && root.is_dir("/sys/bus/xen/drivers/xenconsole")) {
      subtype = "Xen PV DomU";
    }
    if (contains(text::lower(subtype), "dom")) virt = "xen";
  }
  if (auto cpuinfo = root.read("/proc/cpuinfo");
      cpuinfo && contains(*cpuinfo, "QEMU Virtual CPU")) {
    virt = "kvm";
  }
  if (auto product = root.read("/sys/class/dmi/id/product_name")) {
    if (contains(*product, "VirtualBox")) {
      virt = "VirtualBox";
    } else if (contains(*product, "RHEV Hypervisor")) {
      virt = "kvm";
      subtype = "rhev";
    } else if (contains(*product, "oVirt Node")) {
      virt = "kvm";
      subtype = "ovirt";
    } else if (contains(*product, "Google")) {
      virt = "gce";
    } else if (contains(*product, "BHYVE")) {
      virt = "bhyve";
    }
  }
  if (auto cgroup = root.read("/proc/1/cgroup")) {
    if (contains(*cgroup, ":/lxc/")) {
      virt = "container";
      subtype = "LXC";
    } else if (contains(*cgroup, ":/kubepods/")) {
      subtype = "kubernetes";
    } else if (contains(*cgroup, ":/libpod_parent/")) {
      subtype = "libpod";
    } else if (contains(*cgroup, ":/system.slice/docker") || contains(*cgroup, ":/docker/") ||
               contains(*cgroup, ":/docker-ce/")) {
      virt = "container";
      subtype = "Docker";
    }
  }
  if (subtype != "LXC") {
    if (auto env = root.read("/proc/1/environ"); env && contains(*env, "container=lxc")) {
      virt = "container";
      subtype = "LXC";
    }
  }
  if (!subtype.empty() && virt == "physical") virt = "virtual";

  // Salt asks `dmidecode -t system` whether a qemu/kvm/xen guest is on EC2.
  if ((virt == "qemu" || virt == "kvm" || virt == "xen" || virt == "amazon") &&
      installed("dmidecode") && live.is_root) {
    std::string vendor = dmi_field(root, "sys_vendor");
    if (vendor.starts_with("Amazon EC2")) {
      if (virt != "xen") virt = "Nitro";
      std::string product = dmi_field(root, "product_name");
      subtype = "Amazon EC2 (" + product + ")";
    } else if (std::string version = dmi_field(root, "product_version");
               version.find(".amazon") != std::string::npos && version.find(".amazon") > 0) {
      subtype = "Amazon EC2";
    }
  }

  nlohmann::json g = {{"virtual", virt}};
  if (!subtype.empty()) g["virtual_subtype"] = subtype;
  return g;
}

// Salt's _hw_data for Linux with /sys/class/dmi/id.
nlohmann::json hw_grains(const fs_root& root) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 8> files = {{
      {"biosversion", "bios_version"},
      {"biosvendor", "bios_vendor"},
      {"boardname", "board_name"},
      {"productname", "product_name"},
      {"manufacturer", "sys_vendor"},
      {"biosreleasedate", "bios_date"},
      {"uuid", "product_uuid"},
      {"serialnumber", "product_serial"},
  }};
  nlohmann::json g = nlohmann::json::object();
  if (!root.exists("/sys/class/dmi/id")) return g;
  for (const auto& [grain, file] : files) {
    auto s = root.read("/sys/class/dmi/id/" + std::string(file));
    if (!s) continue;
    std::string v = text::strip(*s);
    g[std::string(grain)] = grain == "uuid" ? text::lower(v) : v;
  }
  return g;
}

}  // namespace brine::grains
