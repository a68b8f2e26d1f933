#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// The minion's core grains, named, typed and valued as Salt 3006 (onedir
// install) reports them on the same host, gathered by reading files and making
// system calls, never by running a command. README.md lists what is exact and
// what is approximated, and why.
namespace brine::grains {

// The file system the probes read: "/" on a live host, a fixture tree in tests.
// Only file reads go through it; uname(2), getifaddrs(3), the resolver, CPUID
// and the environment always describe the live host.
class fs_root {
 public:
  explicit fs_root(std::string root = "/");

  // `abs` is a path as the target system names it ("/etc/os-release").
  std::string path(std::string_view abs) const;
  // The whole file, or nullopt if it is missing or unreadable (as Salt, which
  // treats both as "not there").
  std::optional<std::string> read(std::string_view abs) const;
  bool exists(std::string_view abs) const;  // stat(2) succeeds, any type
  bool is_file(std::string_view abs) const;
  bool is_dir(std::string_view abs) const;
  bool live() const { return root_.empty(); }

 private:
  std::string root_;  // without a trailing '/'; empty for "/"
};

// The files Salt derives the OS grains from, as text; nullopt where absent.
struct os_files {
  std::optional<std::string> os_release;      // /etc/os-release, else /usr/lib/os-release
  std::optional<std::string> lsb_release;     // /etc/lsb-release
  std::optional<std::string> debian_version;  // /etc/debian_version
  std::optional<std::string> redhat_release;  // /etc/redhat-release
  std::optional<std::string> centos_release;  // /etc/centos-release
};

os_files read_os_files(const fs_root& root);

// os, os_family, osfullname, osrelease, oscodename, lsb_distrib_*, and (when
// osrelease is not empty) osrelease_info, osmajorrelease, osfinger. Pure.
nlohmann::json os_grains(const os_files& files);
nlohmann::json os_grains(const fs_root& root);

// Salt's _osrelease_data: osrelease_info (ints where a part is all digits,
// strings elsewhere), osmajorrelease (absent if the first part is no integer),
// osfinger.
nlohmann::json osrelease_data(const std::string& os, const std::string& osfullname,
                              const std::string& osrelease);

// Parsers of /proc files, as Salt's _linux_cpudata and _linux_memdata.
nlohmann::json cpu_grains(std::string_view cpuinfo);  // num_cpus, cpu_model, cpu_flags
nlohmann::json mem_grains(std::string_view meminfo);  // mem_total, swap_total (MiB)

// One network interface as Salt's `ip link show` + `ip addr show` parser sees it.
struct interface {
  std::string name;
  std::optional<std::string> hwaddr;
  std::vector<std::string> inet;  // primary IPv4 addresses, in kernel order
  std::vector<std::string> inet6;
  std::vector<std::string> secondary;  // secondary IPv4 addresses
};

std::vector<interface> live_interfaces();  // getifaddrs(3)

// ipv4, ipv6, ip_interfaces, ip4_interfaces, ip6_interfaces, hwaddr_interfaces.
nlohmann::json interface_grains(const std::vector<interface>& ifaces);

// localhost (gethostname), fqdn (the canonical name getaddrinfo gives the
// host name, else Python's socket.getfqdn), host and domain (fqdn split at its
// first dot), as Salt's hostname().
nlohmann::json hostname_grains();

// fqdn_ip4, fqdn_ip6: the addresses `fqdn` resolves to, [] where the host has
// no address of that family or resolution fails. Sorted (Salt's order is that
// of a Python set, which varies from run to run).
nlohmann::json fqdn_ip_grains(const std::string& fqdn, bool have_ipv4, bool have_ipv6);

// Salt's salt.utils.path.which: an executable file in PATH (plus /bin, /sbin,
// /usr/bin, /usr/sbin, /usr/local/bin), or `exe` itself if it names one.
// Returns the path as the target system names it.
std::optional<std::string> which(const fs_root& root, std::string_view exe,
                                 std::string_view path_env);

// Salt's _linux_init_system: "systemd", "upstart", "sysvinit", "supervisord",
// "dumb-init", "tini", "runit" or "unknown".
std::string init_grain(const fs_root& root, std::string_view path_env);

// Facts that cannot be read under a fixture root.
struct live_facts {
  bool cpuid_hypervisor = false;  // CPUID.1:ECX bit 31
  std::string cpuid_vendor;       // CPUID leaf 0x40000000 signature
  bool is_root = false;           // dmidecode and virt-what need it
  bool chroot = false;            // stat("/") differs from stat("/proc/1/root/.")
  bool brandz = false;            // a uname(2) field is "BrandZ virtual linux"
};

live_facts probe_live_facts();

// What systemd-detect-virt (systemd 252) would print: a container type first,
// else a VM type, else "none". Emulated from files and CPUID.
std::string detect_virt(const fs_root& root, const live_facts& live);

// virtual (and virtual_subtype where Salt sets one), as Salt's _virtual with
// the commands it would run emulated. Needs the hardware grains (productname).
nlohmann::json virtual_grains(const fs_root& root, const live_facts& live,
                              std::string_view path_env, const nlohmann::json& hw);

// biosversion, biosvendor, boardname, productname, manufacturer,
// biosreleasedate, uuid, serialnumber from /sys/class/dmi/id, where readable.
nlohmann::json hw_grains(const fs_root& root);

struct core_options {
  std::string id;             // the minion id (`id` grain)
  std::string brine_version;  // `brineversion` grain
  std::string root = "/";     // a fixture tree in tests
};

// Every core grain. Blocks on the resolver (fqdn, fqdn_ip4, fqdn_ip6) as Salt
// does; call it off the I/O threads.
nlohmann::json core_grains(const core_options& o);

// Salt's grains_blacklist match: the grain name matches a pattern as an
// fnmatch glob (no escapes, '*' crosses '/' and leading dots) or as an
// anchored regular expression.
bool blacklisted(std::string_view grain, const std::vector<std::string>& blacklist);

// The minion's grains from the collected ones and the configuration: collected
// grains matching `blacklist` are dropped, then the configured `grains:` map is
// laid over the rest top-level key by key (grains_deep_merge off, Salt's
// default). Configured grains are never blacklisted, so `['*']` leaves exactly
// the configured ones. Throws std::invalid_argument unless `configured` is an
// object or null.
nlohmann::json apply_custom(nlohmann::json core, const nlohmann::json& configured,
                            const std::vector<std::string>& blacklist);

}  // namespace brine::grains
