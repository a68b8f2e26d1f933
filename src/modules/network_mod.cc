// The network module: Salt's salt.modules.network for interfaces, addresses,
// ping and a TCP/UDP connection test. Interfaces come from getifaddrs(3) and
// /sys/class/net (Salt parses `ip addr show`, to the same shape); ping is the
// system's ping, run without a shell; connect resolves and connects through
// Asio, raced against the timeout so that the executor never blocks.

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/ip/udp.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

#include "base/error.h"
#include "modules/args.h"
#include "modules/arguments.h"
#include "modules/data.h"
#include "modules/process.h"
#include "modules/registry.h"

namespace brine::modules {
namespace network_mod {
namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& fun, const std::string& message) {
  throw base::error(fun + ": " + message);
}

std::string text_arg(const arguments& sig, std::string_view name, const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number()) return v.dump();
  sig.fail(std::string(name) + " must be text, got " + v.dump());
}

std::string address_text(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  } else if (sa->sa_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  }
  return buf;
}

int prefix_length(const sockaddr* mask) {
  if (mask == nullptr) return 0;
  const unsigned char* p = nullptr;
  std::size_t n = 0;
  if (mask->sa_family == AF_INET) {
    p = reinterpret_cast<const unsigned char*>(
        &reinterpret_cast<const sockaddr_in*>(mask)->sin_addr);
    n = 4;
  } else if (mask->sa_family == AF_INET6) {
    p = reinterpret_cast<const unsigned char*>(
        &reinterpret_cast<const sockaddr_in6*>(mask)->sin6_addr);
    n = 16;
  }
  int bits = 0;
  for (std::size_t i = 0; i < n; ++i) bits += __builtin_popcount(p[i]);
  return bits;
}

// What `ip addr` calls the scope of an IPv6 address.
std::string ipv6_scope(const in6_addr& a) {
  if (IN6_IS_ADDR_LOOPBACK(&a)) return "host";
  if (IN6_IS_ADDR_LINKLOCAL(&a)) return "link";
  if (IN6_IS_ADDR_SITELOCAL(&a)) return "site";
  return "global";
}

std::string sys_hwaddr(const std::string& ifname) {
  if (ifname.find('/') != std::string::npos || ifname == "." || ifname == "..") return "";
  std::ifstream in("/sys/class/net/" + ifname + "/address");
  std::string line;
  std::getline(in, line);
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

// Salt's linux_interfaces(): {name: {hwaddr, up, inet: [...], inet6: [...]}}.
json interfaces_json() {
  ifaddrs* raw = nullptr;
  if (::getifaddrs(&raw) != 0) {
    throw base::error(std::string("network.interfaces: getifaddrs: ") + std::strerror(errno));
  }
  std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> list(raw, &::freeifaddrs);
  json out = json::object();
  for (const ifaddrs* ifa = list.get(); ifa != nullptr; ifa = ifa->ifa_next) {
    const std::string label = ifa->ifa_name;
    // An IPv4 alias carries its label ("eth0:1"); the interface is before ':'.
    const std::string name = label.substr(0, label.find(':'));
    json& iface = out[name];
    if (!iface.contains("up") || label == name) iface["up"] = (ifa->ifa_flags & IFF_UP) != 0;
    if (ifa->ifa_addr == nullptr) continue;
    if (ifa->ifa_addr->sa_family == AF_INET) {
      json addr = json::object();
      addr["address"] = address_text(ifa->ifa_addr);
      addr["netmask"] = ifa->ifa_netmask ? address_text(ifa->ifa_netmask) : "";
      addr["broadcast"] = (ifa->ifa_flags & IFF_BROADCAST) && ifa->ifa_broadaddr
                              ? json(address_text(ifa->ifa_broadaddr))
                              : json(nullptr);
      addr["label"] = label;
      iface["inet"].push_back(std::move(addr));
    } else if (ifa->ifa_addr->sa_family == AF_INET6) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr);
      json addr = json::object();
      addr["address"] = address_text(ifa->ifa_addr);
      // Salt keeps the text `ip` printed.
      addr["prefixlen"] = std::to_string(prefix_length(ifa->ifa_netmask));
      addr["scope"] = ipv6_scope(sin6->sin6_addr);
      iface["inet6"].push_back(std::move(addr));
    }
  }
  for (auto& [name, iface] : out.items()) {
    std::string hw = sys_hwaddr(name);
    if (!hw.empty()) iface["hwaddr"] = hw;
  }
  return out;
}

// An address as bytes (4 or 16), which orders them as Python's ipaddress does
// within one family.
struct ip_address {
  int family = 0;
  std::array<unsigned char, 16> bytes{};
  std::size_t size() const { return family == AF_INET ? 4 : 16; }
  bool operator<(const ip_address& o) const { return bytes < o.bytes; }
};

std::optional<ip_address> parse_ip(const std::string& text) {
  ip_address a;
  if (::inet_pton(AF_INET, text.c_str(), a.bytes.data()) == 1) {
    a.family = AF_INET;
    return a;
  }
  if (::inet_pton(AF_INET6, text.c_str(), a.bytes.data()) == 1) {
    a.family = AF_INET6;
    return a;
  }
  return std::nullopt;
}

struct network {
  ip_address base;
  int prefix = 0;
  bool contains(const ip_address& a) const {
    if (a.family != base.family) return false;
    int bits = prefix;
    for (std::size_t i = 0; i < a.size() && bits > 0; ++i, bits -= 8) {
      unsigned mask = bits >= 8 ? 0xffu : (0xffu << (8 - bits)) & 0xffu;
      if ((a.bytes[i] & mask) != (base.bytes[i] & mask)) return false;
    }
    return true;
  }
};

std::optional<network> parse_network(const std::string& text) {
  auto slash = text.find('/');
  auto base = parse_ip(text.substr(0, slash));
  if (!base) return std::nullopt;
  network n{*base, static_cast<int>(base->size() * 8)};
  if (slash != std::string::npos) {
    const std::string bits = text.substr(slash + 1);
    if (bits.empty() || bits.size() > 3 ||
        !std::all_of(bits.begin(), bits.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      return std::nullopt;
    }
    n.prefix = std::stoi(bits);
    if (n.prefix > static_cast<int>(base->size() * 8)) return std::nullopt;
  }
  return n;
}

// Python's ipaddress.ip_network(text, strict): "ADDR", "ADDR/PREFIX" or,
// for IPv4, "ADDR/NETMASK" (255.255.255.0) or "ADDR/HOSTMASK" (0.0.0.255);
// strict refuses host bits, otherwise they are masked off. The reason in
// `error` when Python raises ValueError.
std::optional<network> python_ip_network(const std::string& text, bool strict, std::string& error) {
  auto slash = text.find('/');
  auto base = parse_ip(text.substr(0, slash));
  if (!base) {
    error = "'" + text + "' does not appear to be an IPv4 or IPv6 network";
    return std::nullopt;
  }
  const int width = static_cast<int>(base->size() * 8);
  network n{*base, width};
  if (slash != std::string::npos) {
    const std::string p = text.substr(slash + 1);
    auto mask = parse_ip(p);
    if (!p.empty() && p.size() <= 3 &&
        std::all_of(p.begin(), p.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      n.prefix = std::stoi(p);
    } else if (mask && mask->family == AF_INET && base->family == AF_INET) {
      std::uint32_t m = (std::uint32_t{mask->bytes[0]} << 24) | (std::uint32_t{mask->bytes[1]} << 16) |
                        (std::uint32_t{mask->bytes[2]} << 8) | mask->bytes[3];
      if (m != 0 && (m & 1u) && !(m & 0x80000000u)) m = ~m;  // a hostmask
      int ones = 0;
      while (ones < 32 && (m & (0x80000000u >> ones))) ++ones;
      if (ones < 32 && (m << ones) != 0) n.prefix = -1;
      else n.prefix = ones;
    } else {
      n.prefix = -1;
    }
    if (n.prefix < 0 || n.prefix > width) {
      error = "'" + p + "' is not a valid netmask";
      return std::nullopt;
    }
  }
  network masked = n;
  for (int b = n.prefix; b < width; ++b) {
    masked.base.bytes[static_cast<std::size_t>(b / 8)] &= static_cast<unsigned char>(~(0x80u >> (b % 8)));
  }
  if (strict && masked.base.bytes != n.base.bytes) {
    error = text + " has host bits set";
    return std::nullopt;
  }
  return masked;
}

std::string network_text(const network& n) {
  char buf[INET6_ADDRSTRLEN];
  ::inet_ntop(n.base.family, n.base.bytes.data(), buf, sizeof buf);
  return std::string(buf) + "/" + std::to_string(n.prefix);
}

// Salt's network.calc_net: the network (CIDR) an address is in, its
// netmask in the address ("10.1.2.3/24") or given apart.
asio::awaitable<outcome> calc_net(call c) {
  arguments sig("network.calc_net", c, {"ip_addr", "netmask"});
  if (sig.given("ip_addr") == nullptr) fail("network.calc_net", "needs ip_addr: network.calc_net 10.1.2.3/24");
  std::string text = sig.scalar_text("ip_addr", "");
  if (const auto* m = sig.given("netmask"); m != nullptr && !m->is_null()) {
    text += "/" + sig.scalar_text("netmask", "");
  }
  std::string error;
  auto n = python_ip_network(text, false, error);
  if (!n) fail("network.calc_net", error);
  co_return outcome{network_text(*n)};
}

// Salt's network.ip_in_subnet (salt.utils.network.in_subnet): whether the
// address lies in the network; False for a network that is not one
// (host bits set, as ipaddress's strict parse refuses).
asio::awaitable<outcome> ip_in_subnet(call c) {
  arguments sig("network.ip_in_subnet", c, {"ip_addr", "cidr"});
  std::string error;
  auto n = python_ip_network(sig.scalar_text("cidr", ""), true, error);
  if (!n) co_return outcome{false};
  std::vector<std::string> addrs;
  if (const auto* a = sig.given("ip_addr"); a != nullptr && a->is_array()) {
    for (const auto& item : *a) addrs.push_back(item.is_string() ? item.get<std::string>() : item.dump());
  } else {
    addrs.push_back(sig.scalar_text("ip_addr", ""));
  }
  for (const auto& text : addrs) {
    auto addr = parse_ip(text);
    if (!addr) fail("network.ip_in_subnet", "'" + text + "' does not appear to be an IPv4 or IPv6 address");
    if (n->contains(*addr)) co_return outcome{true};
  }
  co_return outcome{false};
}

// Python's ipaddress is_private (3.11's tables).
bool is_private(const ip_address& a) {
  static const std::vector<network> nets = [] {
    std::vector<network> v;
    for (const char* s :
         {"0.0.0.0/8",      "10.0.0.0/8",         "127.0.0.0/8",     "169.254.0.0/16",
          "172.16.0.0/12",  "192.0.0.0/29",       "192.0.0.170/31",  "192.0.2.0/24",
          "192.168.0.0/16", "198.18.0.0/15",      "198.51.100.0/24", "203.0.113.0/24",
          "240.0.0.0/4",    "255.255.255.255/32", "::1/128",         "::/128",
          "::ffff:0:0/96",  "100::/64",           "2001::/23",       "2001:2::/48",
          "2001:db8::/32",  "2001:10::/28",       "fc00::/7",        "fe80::/10"}) {
      v.push_back(*parse_network(s));
    }
    return v;
  }();
  return std::any_of(nets.begin(), nets.end(), [&](const network& n) { return n.contains(a); });
}

bool is_loopback(const ip_address& a) {
  if (a.family == AF_INET) return a.bytes[0] == 127;
  static const ip_address one = *parse_ip("::1");
  return a.bytes == one.bytes;
}

// network.ip_addrs and network.ip_addrs6.
outcome ip_addrs(const call& c, const std::string& fun, int family) {
  arguments sig(fun, c, {"interface", "include_loopback", "cidr", "type"});
  std::string interface = sig.scalar_text("interface", "");
  bool include_loopback = sig.flag("include_loopback", false);
  std::string cidr = sig.scalar_text("cidr", "");
  std::string type = sig.scalar_text("type", "");
  std::optional<network> subnet;
  if (!cidr.empty()) {
    subnet = parse_network(cidr);
    if (!subnet) fail(fun, "cidr must be a network such as 10.0.0.0/8, got " + cidr);
  }
  if (!type.empty() && type != "public" && type != "private") {
    fail(fun, "type must be 'public' or 'private', got " + type);
  }
  const char* key = family == AF_INET ? "inet" : "inet6";
  std::vector<ip_address> found;
  json ifaces = interfaces_json();
  for (const auto& [name, iface] : ifaces.items()) {
    if (!interface.empty() && name != interface) continue;
    auto it = iface.find(key);
    if (it == iface.end()) continue;
    for (const auto& addr : *it) {
      auto a = parse_ip(addr.value("address", ""));
      if (!a || a->family != family) continue;
      if (is_loopback(*a) && !include_loopback) continue;
      if (subnet ? !subnet->contains(*a)
                 : (type == "public" && is_private(*a)) || (type == "private" && !is_private(*a))) {
        continue;
      }
      found.push_back(*a);
    }
  }
  std::sort(found.begin(), found.end());
  found.erase(
      std::unique(found.begin(), found.end(),
                  [](const ip_address& x, const ip_address& y) { return x.bytes == y.bytes; }),
      found.end());
  json out = json::array();
  for (const auto& a : found) {
    char buf[INET6_ADDRSTRLEN] = {};
    ::inet_ntop(family, a.bytes.data(), buf, sizeof buf);
    out.push_back(buf);
  }
  return outcome{std::move(out)};
}

asio::awaitable<outcome> interfaces(call c) {
  arguments sig("network.interfaces", c, {});
  outcome o;
  o.ret = interfaces_json();
  co_return o;
}

asio::awaitable<outcome> ip_addrs4(call c) { co_return ip_addrs(c, "network.ip_addrs", AF_INET); }

asio::awaitable<outcome> ip_addrs6(call c) { co_return ip_addrs(c, "network.ip_addrs6", AF_INET6); }

// Salt's sanitize_host keeps letters, digits and ".-_"; ':' is kept too, for
// IPv6 addresses. A leading '-' would be an option to ping: refused.
std::string host_arg(const arguments& sig) {
  std::string host;
  for (char ch : text_arg(sig, "host", sig.need("host")).substr(0, 255)) {
    if (std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '_' ||
        ch == ':') {
      host += ch;
    }
  }
  if (host.empty()) sig.fail("host must be a host name or an address");
  if (host.front() == '-') sig.fail("host must not start with '-': " + host);
  return host;
}

asio::awaitable<outcome> ping(call c) {
  arguments sig("network.ping", c, {"host", "return_boolean", "timeout"});
  std::string host = host_arg(sig);
  bool return_boolean = sig.flag("return_boolean", false);
  long wait = 2;
  if (const json* t = sig.get("timeout"); t != nullptr) {
    auto n = as_number(*t);
    if (!n || *n < 0 || *n != static_cast<double>(static_cast<long>(*n))) {
      sig.fail("timeout must be a whole number of seconds >= 0, got " + t->dump());
    }
    if (*n > 0) wait = static_cast<long>(*n);
  }
  process_options opts;
  opts.argv = {"ping", "-W", std::to_string(wait), "-c", "4", host};
  opts.merge_stderr = true;
  opts.env = {{"LC_ALL", "C"}};
  opts.timeout = c.timeout > std::chrono::seconds::zero()
                     ? std::chrono::duration_cast<std::chrono::milliseconds>(c.timeout)
                     : std::chrono::milliseconds(std::chrono::hours(24));
  process_result r;
  try {
    r = co_await run_process(std::move(opts));
  } catch (const base::error& e) {
    if (std::string(e.what()).find("not found in PATH") == std::string::npos) throw;
    sig.fail("ping is not installed on this minion (Debian package iputils-ping)");
  }
  if (r.timed_out) sig.fail("ping " + host + " timed out and was killed");
  if (return_boolean) co_return outcome{r.retcode == 0};
  std::string out = std::move(r.stdout_text);
  while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
  co_return outcome{std::move(out), r.retcode == 0, r.retcode};
}

// One connection attempt; it reports failures rather than throwing, so that
// it finishes at once when refused (an exception would make `||` wait for
// the timer).
struct probe {
  bool connected = false;
  std::string address;
  std::string error;
};

template <typename Protocol>
asio::awaitable<probe> probe_endpoint(std::string host, std::string port, int family) {
  probe p;
  auto ex = co_await asio::this_coro::executor;
  typename Protocol::resolver resolver(ex);
  const auto flags = asio::ip::resolver_base::numeric_service;
  std::error_code rec;
  typename Protocol::resolver::results_type results;
  if (family == AF_INET) {
    std::tie(rec, results) = co_await resolver.async_resolve(
        Protocol::v4(), host, port, flags, asio::experimental::as_tuple(asio::use_awaitable));
  } else if (family == AF_INET6) {
    std::tie(rec, results) = co_await resolver.async_resolve(
        Protocol::v6(), host, port, flags, asio::experimental::as_tuple(asio::use_awaitable));
  } else {
    std::tie(rec, results) = co_await resolver.async_resolve(
        host, port, flags, asio::experimental::as_tuple(asio::use_awaitable));
  }
  if (rec || results.empty()) {
    p.address = host;
    p.error = rec ? rec.message() : "no address";
    co_return p;
  }
  const auto endpoint = results.begin()->endpoint();
  p.address = endpoint.address().to_string();
  typename Protocol::socket socket(ex);
  if constexpr (std::is_same_v<Protocol, asio::ip::tcp>) {
    auto [cec] =
        co_await socket.async_connect(endpoint, asio::experimental::as_tuple(asio::use_awaitable));
    if (cec) co_return p;
    std::error_code ignored;
    socket.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    p.connected = true;
  } else {
    // Salt's UDP test: send a datagram and count an answer as success.
    std::error_code oec;
    socket.open(endpoint.protocol(), oec);
    if (oec) co_return p;
    const std::string msg = "brine network.connect probe";
    auto [sec, sent] = co_await socket.async_send_to(
        asio::buffer(msg), endpoint, asio::experimental::as_tuple(asio::use_awaitable));
    if (sec) co_return p;
    std::array<char, 255> reply{};
    typename Protocol::endpoint from;
    auto [rec2, got] = co_await socket.async_receive_from(
        asio::buffer(reply), from, asio::experimental::as_tuple(asio::use_awaitable));
    p.connected = !rec2;
  }
  co_return p;
}

asio::awaitable<outcome> connect(call c) {
  arguments sig("network.connect", c, {"host", "port", "proto", "timeout", "family"});
  json ret = json::object();
  const json* host_v = sig.get("host");
  const json* port_v = sig.get("port");
  if (host_v == nullptr || (host_v->is_string() && host_v->get<std::string>().empty())) {
    ret["result"] = false;
    ret["comment"] = "Required argument, host, is missing.";
    co_return outcome{std::move(ret)};
  }
  if (port_v == nullptr || (port_v->is_string() && port_v->get<std::string>().empty())) {
    ret["result"] = false;
    ret["comment"] = "Required argument, port, is missing.";
    co_return outcome{std::move(ret)};
  }
  std::string host = text_arg(sig, "host", *host_v);
  auto port_n = as_number(*port_v);
  if (!port_n || *port_n < 1 || *port_n > 65535 ||
      *port_n != static_cast<double>(static_cast<int>(*port_n))) {
    sig.fail("port must be 1..65535, got " + port_v->dump());
  }
  const std::string port = std::to_string(static_cast<int>(*port_n));
  std::string proto = sig.scalar_text("proto", "tcp");
  if (proto != "udp") proto = "tcp";
  double timeout = 5;
  if (const json* t = sig.get("timeout"); t != nullptr) {
    auto n = as_number(*t);
    if (!n || !(*n > 0)) sig.fail("timeout must be a number of seconds > 0, got " + t->dump());
    timeout = *n;
  }
  int family = 0;
  std::string fam = sig.scalar_text("family", "");
  if (fam == "ipv4") {
    family = AF_INET;
  } else if (fam == "ipv6") {
    family = AF_INET6;
  } else if (!fam.empty()) {
    sig.fail("family must be 'ipv4' or 'ipv6', got " + fam);
  }

  using namespace asio::experimental::awaitable_operators;
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex, std::chrono::duration_cast<asio::steady_timer::duration>(
                                   std::chrono::duration<double>(timeout)));
  auto attempt = proto == "udp" ? probe_endpoint<asio::ip::udp>(host, port, family)
                                : probe_endpoint<asio::ip::tcp>(host, port, family);
  std::variant<probe, std::monostate> raced =
      co_await (std::move(attempt) || timer.async_wait(asio::use_awaitable));
  probe p;
  if (raced.index() == 0) p = std::get<0>(raced);
  const std::string address = p.address.empty() ? host : p.address;
  const std::string where = host + " (" + address + ") on " + proto + " port " + port;
  ret["result"] = p.connected;
  ret["comment"] = (p.connected ? "Successfully connected to " : "Unable to connect to ") + where;
  if (!p.connected && !p.error.empty())
    ret["comment"] = ret["comment"].get<std::string>() + ": " + p.error;
  co_return outcome{std::move(ret)};
}

// Salt's network.get_hostname: Python's socket.gethostname().
asio::awaitable<outcome> get_hostname(call c) {
  arguments sig("network.get_hostname", c, {});
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) {
    throw base::error(std::string("network.get_hostname: ") + std::strerror(errno));
  }
  co_return outcome{std::string(name)};
}

}  // namespace
}  // namespace network_mod

void register_network_module(registry& reg) {
  using namespace network_mod;
  using k = registry::kind;
  reg.add("network.get_hostname", get_hostname,
          "network.get_hostname() -> this host's name (gethostname).\n\n"
          "CLI example: brine cmd '*' network.get_hostname",
          k::instant);
  reg.add("network.calc_net", calc_net,
          "network.calc_net(ip_addr, netmask=None) -> the network an address is in, in CIDR "
          "notation (any address of the subnet will do).\n\n"
          "CLI example: brine cmd '*' network.calc_net 172.17.0.5 255.255.255.240",
          k::instant);
  reg.add("network.ip_in_subnet", ip_in_subnet,
          "network.ip_in_subnet(ip_addr, cidr) -> True when the address is in the network.\n\n"
          "CLI example: brine cmd '*' network.ip_in_subnet 172.17.0.4 172.16.0.0/12",
          k::instant);
  reg.add("network.interfaces", interfaces,
          "network.interfaces() -> {name: {hwaddr, up, inet: [{address, netmask, broadcast, "
          "label}], inet6: [{address, prefixlen, scope}]}} for every interface.\n\n"
          "CLI example: brine cmd '*' network.interfaces",
          k::instant);
  reg.add("network.ip_addrs", ip_addrs4,
          "network.ip_addrs(interface=None, include_loopback=False, cidr=None, type=None) -> the "
          "sorted IPv4 addresses (type: 'public' or 'private').\n\n"
          "CLI example: brine cmd '*' network.ip_addrs cidr=10.0.0.0/8",
          k::instant);
  reg.add("network.ip_addrs6", ip_addrs6,
          "network.ip_addrs6(interface=None, include_loopback=False, cidr=None, type=None) -> the "
          "sorted IPv6 addresses.\n\n"
          "CLI example: brine cmd '*' network.ip_addrs6 interface=eth0",
          k::instant);
  reg.add("network.ping", ping,
          "network.ping(host, return_boolean=False, timeout=0) -> ping's output (4 packets), or "
          "True/False with return_boolean.\n\n"
          "CLI example: brine cmd '*' network.ping archlinux.org return_boolean=True",
          k::may_block);
  reg.add("network.connect", connect,
          "network.connect(host, port, proto='tcp', timeout=5, family=None) -> {result, "
          "comment}: whether a connection (tcp) or an answer (udp) was had within timeout "
          "seconds.\n\n"
          "CLI example: brine cmd '*' network.connect archlinux.org 80 timeout=3",
          k::may_block);
}

}  // namespace brine::modules
