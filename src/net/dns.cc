#include "net/dns.h"

#include <ares.h>
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>

#include "base/error.h"

namespace brine::net {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr uint16_t k_type_srv = 33;
constexpr uint16_t k_class_in = 1;
constexpr size_t k_header_size = 12;
constexpr size_t k_rr_fixed_size = 10;  // type, class, ttl, rdlength
constexpr size_t k_srv_fixed_size = 6;  // priority, weight, port

void init_library() {
  static std::once_flag once;
  static int status = ARES_SUCCESS;
  std::call_once(once, [] { status = ares_library_init(ARES_LIB_INIT_ALL); });
  if (status != ARES_SUCCESS) {
    throw base::error(fmt::format("DNS: c-ares would not initialise: {}; check the c-ares library",
                                  ares_strerror(status)));
  }
}

struct channel_free {
  void operator()(ares_channel c) const { ares_destroy(c); }
};
using channel_ptr = std::unique_ptr<ares_channeldata, channel_free>;

// A channel for one lookup, and how messages name the server it asks.
struct session {
  channel_ptr channel;
  std::string where;
};

std::string system_servers(ares_channel ch) {
  ares_addr_port_node* list = nullptr;
  if (ares_get_servers_ports(ch, &list) != ARES_SUCCESS) return "the system resolver";
  std::string servers;
  for (auto* n = list; n != nullptr; n = n->next) {
    char buf[INET6_ADDRSTRLEN] = {};
    if (ares_inet_ntop(n->family, &n->addr, buf, sizeof buf) == nullptr) continue;
    int port = n->udp_port != 0 ? n->udp_port : 53;
    if (!servers.empty()) servers += ", ";
    servers +=
        n->family == AF_INET6 ? fmt::format("[{}]:{}", buf, port) : fmt::format("{}:{}", buf, port);
  }
  ares_free_data(list);
  if (servers.empty()) return "the system resolver";
  return "the system resolver (" + servers + " from /etc/resolv.conf)";
}

session open_session(const std::string& server, milliseconds timeout) {
  init_library();
  std::optional<resolver_address> named;
  if (!server.empty()) named = parse_resolver(server);

  ares_options opts{};
  int mask = ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES;
  // c-ares doubles the wait after each round over the servers: three tries of
  // t, 2t and 4t fill the caller's timeout, so a lost datagram is sent again.
  opts.tries = 3;
  opts.timeout = static_cast<int>(std::max<int64_t>(timeout.count() / 7, 100));
  char lookups[] = "b";
  if (named) {
    // The user named the server: ask it alone, not /etc/hosts, and do not
    // append the local search domains to names that are already absolute.
    mask |= ARES_OPT_LOOKUPS | ARES_OPT_DOMAINS;
    opts.lookups = lookups;
    opts.domains = nullptr;
    opts.ndomains = 0;
  }
  ares_channel raw = nullptr;
  int st = ares_init_options(&raw, &opts, mask);
  channel_ptr ch(raw);
  if (st != ARES_SUCCESS) {
    throw base::error(
        fmt::format("DNS: cannot set up a resolver: {}; check /etc/resolv.conf or set srv_resolver",
                    ares_strerror(st)));
  }
  session s{std::move(ch), {}};
  if (named) {
    s.where = named->text();
    st = ares_set_servers_ports_csv(s.channel.get(), s.where.c_str());
    if (st != ARES_SUCCESS) {
      throw base::error(
          fmt::format("srv_resolver '{}': c-ares refuses it as a server ({}); name the DNS server "
                      "as IPv4:PORT or [IPv6]:PORT",
                      server, ares_strerror(st)));
    }
  } else {
    s.where = system_servers(s.channel.get());
  }
  return s;
}

timeval to_timeval(milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// Drives the channel until `done` or the deadline. At the deadline its queries
// are cancelled, which runs their callbacks with ARES_ECANCELLED, so `done` is
// always set on return.
void drive(ares_channel ch, const bool& done, steady_clock::time_point deadline) {
  while (!done) {
    auto now = steady_clock::now();
    if (now >= deadline) {
      ares_cancel(ch);
      return;
    }
    ares_socket_t socks[ARES_GETSOCK_MAXNUM];
    int bits = ares_getsock(ch, socks, ARES_GETSOCK_MAXNUM);
    pollfd fds[ARES_GETSOCK_MAXNUM];
    nfds_t n = 0;
    for (int i = 0; i < ARES_GETSOCK_MAXNUM; ++i) {
      short events = 0;
      if (ARES_GETSOCK_READABLE(bits, i)) events |= POLLIN;
      if (ARES_GETSOCK_WRITABLE(bits, i)) events |= POLLOUT;
      if (events != 0) fds[n++] = pollfd{socks[i], events, 0};
    }
    auto left = std::chrono::ceil<milliseconds>(deadline - now);
    timeval max_wait = to_timeval(left);
    timeval wait{};
    timeval* w = ares_timeout(ch, &max_wait, &wait);
    int wait_ms = static_cast<int>(w->tv_sec * 1000 + (w->tv_usec + 999) / 1000);
    int ready = ::poll(fds, n, wait_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ares_cancel(ch);
      throw base::error(fmt::format("DNS: poll failed: {}", std::strerror(e)));
    }
    if (ready == 0) {
      ares_process_fd(ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD);  // retransmits and timeouts
      continue;
    }
    for (nfds_t i = 0; i < n; ++i) {
      short r = fds[i].revents;
      if (r == 0) continue;
      bool readable = (r & (POLLIN | POLLERR | POLLHUP | POLLNVAL)) != 0;
      bool writable = (r & (POLLOUT | POLLERR)) != 0;
      ares_process_fd(ch, readable ? fds[i].fd : ARES_SOCKET_BAD,
                      writable ? fds[i].fd : ARES_SOCKET_BAD);
    }
  }
}

std::string seconds_text(milliseconds ms) {
  return fmt::format("{:g} s", static_cast<double>(ms.count()) / 1000.0);
}

// What went wrong and what to do, for the c-ares status of a failed query.
// `subject` names what was asked for ("SRV" or "A or AAAA").
std::string failure_text(int status, milliseconds timeout, bool system, const char* subject,
                         const char* create_hint) {
  const char* check_server =
      system ? "check /etc/resolv.conf or set srv_resolver" : "check srv_resolver";
  switch (status) {
    case ARES_ENOTFOUND:
      return fmt::format("no such name (NXDOMAIN); {}", create_hint);
    case ARES_ENODATA:
      return fmt::format("no {} records (the name exists but has no {} data); {}", subject, subject,
                         create_hint);
    case ARES_ETIMEOUT:
    case ARES_ECANCELLED:
      return fmt::format("no answer within {} (is a DNS server listening there?); {}",
                         seconds_text(timeout), check_server);
    case ARES_ECONNREFUSED:
      return fmt::format("connection refused (is a DNS server listening there?); {}", check_server);
    case ARES_ESERVFAIL:
      return fmt::format(
          "the server could not answer (SERVFAIL); check its logs and the zone, or {}",
          check_server);
    case ARES_EREFUSED:
      return fmt::format(
          "the server refused the query (REFUSED); let it answer for this domain, or {}",
          check_server);
    case ARES_ENOTIMP:
      return fmt::format("the server does not implement the query (NOTIMP); {}", check_server);
    case ARES_EFORMERR:
      return fmt::format("the server calls the query malformed (FORMERR); {}", check_server);
    case ARES_EBADNAME:
    case ARES_EBADSTR:
      return "not a valid DNS name; fix the name (srv_domain)";
    case ARES_EBADRESP:
    case ARES_EBADFAMILY:
      return fmt::format("malformed reply: {}; fix the DNS server or {}", ares_strerror(status),
                         check_server);
    default:
      return fmt::format("{}; {}", ares_strerror(status), check_server);
  }
}

struct srv_query {
  bool done = false;
  int status = ARES_SUCCESS;
  std::vector<uint8_t> reply;
};

void on_srv_reply(void* arg, int status, int /*timeouts*/, unsigned char* abuf, int alen) {
  auto* q = static_cast<srv_query*>(arg);
  q->done = true;
  q->status = status;
  if (status == ARES_SUCCESS && abuf != nullptr && alen > 0) q->reply.assign(abuf, abuf + alen);
}

struct host_query {
  bool done = false;
  int status = ARES_SUCCESS;
  host_answer answer;
};

uint32_t clamp_ttl(int ttl) { return ttl > 0 ? static_cast<uint32_t>(ttl) : 0; }

void on_addrinfo(void* arg, int status, int /*timeouts*/, ares_addrinfo* res) {
  auto* q = static_cast<host_query*>(arg);
  q->done = true;
  q->status = status;
  if (res == nullptr) return;
  uint32_t ttl = std::numeric_limits<uint32_t>::max();
  for (auto* n = res->nodes; n != nullptr; n = n->ai_next) {
    asio::ip::address a;
    if (n->ai_family == AF_INET && n->ai_addrlen >= sizeof(sockaddr_in)) {
      sockaddr_in sin;
      std::memcpy(&sin, n->ai_addr, sizeof sin);
      asio::ip::address_v4::bytes_type b;
      std::memcpy(b.data(), &sin.sin_addr, b.size());
      a = asio::ip::address_v4(b);
    } else if (n->ai_family == AF_INET6 && n->ai_addrlen >= sizeof(sockaddr_in6)) {
      sockaddr_in6 sin6;
      std::memcpy(&sin6, n->ai_addr, sizeof sin6);
      asio::ip::address_v6::bytes_type b;
      std::memcpy(b.data(), &sin6.sin6_addr, b.size());
      a = asio::ip::address_v6(b, sin6.sin6_scope_id);
    } else {
      continue;
    }
    ttl = std::min(ttl, clamp_ttl(n->ai_ttl));
    auto& v = q->answer.addresses;
    if (std::find(v.begin(), v.end(), a) == v.end()) v.push_back(a);
  }
  for (auto* c = res->cnames; c != nullptr; c = c->next) ttl = std::min(ttl, clamp_ttl(c->ttl));
  q->answer.ttl = q->answer.addresses.empty() ? 0 : ttl;
  ares_freeaddrinfo(res);
}

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
uint32_t be32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
}

// Expands the (possibly compressed) name at `pos`. ares_expand_name checks
// every label and pointer against the buffer and refuses pointer loops; `pos`
// itself is checked here. `encoded` is the name's length at `pos`.
bool expand_name(std::span<const uint8_t> buf, size_t pos, std::string& name, size_t& encoded) {
  if (pos >= buf.size()) return false;
  char* s = nullptr;
  long len = 0;
  int st = ares_expand_name(buf.data() + pos, buf.data(), static_cast<int>(buf.size()), &s, &len);
  if (st != ARES_SUCCESS) return false;
  name = s;
  ares_free_string(s);
  if (len <= 0 || static_cast<size_t>(len) > buf.size() - pos) return false;
  encoded = static_cast<size_t>(len);
  return true;
}

// A target fit to connect to: letters, digits, '-', '_' and dots. c-ares
// writes other bytes as \DDD escapes, which this refuses too.
bool is_host_name(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
}

bool parse_port(const std::string& s, uint16_t& port) {
  if (s.empty() || s.size() > 5) return false;
  if (!std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  unsigned long v = std::stoul(s);
  if (v == 0 || v > 65535) return false;
  port = static_cast<uint16_t>(v);
  return true;
}

}  // namespace

std::string resolver_address::text() const {
  if (address.is_v6()) return fmt::format("[{}]:{}", address.to_string(), port);
  return fmt::format("{}:{}", address.to_string(), port);
}

resolver_address parse_resolver(const std::string& text) {
  auto fail = [&](const std::string& why) {
    return base::error(
        fmt::format("srv_resolver '{}': {}; name the DNS server as IPv4:PORT or [IPv6]:PORT, e.g. "
                    "192.0.2.53:53 or [2001:db8::53]:53",
                    text, why));
  };
  if (text.empty()) throw fail("empty");
  resolver_address r;
  std::string host;
  std::string port;
  bool bracketed = false;
  if (text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string::npos) throw fail("'[' without ']'");
    host = text.substr(1, close - 1);
    std::string rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') throw fail("text after ']' is not ':PORT'");
      port = rest.substr(1);
      if (port.empty()) throw fail("no port after ':'");
    }
    bracketed = true;
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos) {
      host = text;  // a bare IPv4 address: port 53
    } else {
      if (text.find(':') != colon) throw fail("an IPv6 address needs brackets");
      host = text.substr(0, colon);
      port = text.substr(colon + 1);
      if (port.empty()) throw fail("no port after ':'");
    }
  }
  if (!port.empty() && !parse_port(port, r.port)) {
    throw fail(fmt::format("port '{}' is not a number in 1..65535", port));
  }
  std::error_code ec;
  if (bracketed) {
    auto v6 = asio::ip::make_address_v6(host, ec);
    if (ec) throw fail(fmt::format("'{}' is not an IPv6 address", host));
    r.address = v6;
  } else {
    auto v4 = asio::ip::make_address_v4(host, ec);
    if (ec) {
      throw fail(
          fmt::format("'{}' is not an IPv4 address (the DNS server cannot be named by a "
                      "host name)",
                      host));
    }
    r.address = v4;
  }
  if (r.address.is_v6() && r.address.to_v6().scope_id() != 0) {
    throw fail("an IPv6 zone ('%...') is not supported");
  }
  return r;
}

srv_parse_result parse_srv_reply(std::span<const uint8_t> reply) {
  srv_parse_result out;
  auto fail = [&out](std::string why) {
    out.records.clear();
    out.error = std::move(why);
    return out;
  };
  const size_t len = reply.size();
  const uint8_t* p = reply.data();
  if (len < k_header_size) {
    return fail(fmt::format("{} bytes, shorter than a DNS header (12 bytes)", len));
  }
  if (len > 65535) return fail(fmt::format("{} bytes, longer than a DNS message can be", len));
  uint16_t flags = be16(p + 2);
  if ((flags & 0x8000) == 0) return fail("not a response (QR bit clear)");
  if (int rcode = flags & 0xf; rcode != 0) return fail(fmt::format("RCODE {}", rcode));
  uint16_t questions = be16(p + 4);
  uint16_t answers = be16(p + 6);

  size_t pos = k_header_size;
  std::string name;
  size_t encoded = 0;
  for (uint16_t i = 1; i <= questions; ++i) {
    if (!expand_name(reply, pos, name, encoded)) {
      return fail(fmt::format("question {}: bad or truncated name at byte {}", i, pos));
    }
    pos += encoded;
    if (len - pos < 4) return fail(fmt::format("question {}: truncated at byte {}", i, pos));
    pos += 4;
  }
  for (uint16_t i = 1; i <= answers; ++i) {
    if (!expand_name(reply, pos, name, encoded)) {
      return fail(fmt::format("answer {}: bad or truncated name at byte {}", i, pos));
    }
    pos += encoded;
    if (len - pos < k_rr_fixed_size) {
      return fail(fmt::format("answer {}: truncated at byte {}", i, pos));
    }
    uint16_t type = be16(p + pos);
    uint16_t klass = be16(p + pos + 2);
    uint32_t ttl = be32(p + pos + 4);
    size_t rdlength = be16(p + pos + 8);
    pos += k_rr_fixed_size;
    if (len - pos < rdlength) {
      return fail(fmt::format("answer {}: rdlength {} runs past the end of the reply ({} bytes)", i,
                              rdlength, len));
    }
    if (type == k_type_srv && klass == k_class_in) {
      size_t number = out.records.size() + 1;
      if (rdlength < k_srv_fixed_size + 1) {
        return fail(
            fmt::format("record {}: rdlength {} is too short for SRV data", number, rdlength));
      }
      srv_record r;
      r.priority = be16(p + pos);
      r.weight = be16(p + pos + 2);
      r.port = be16(p + pos + 4);
      // RFC 2181 8: a TTL with the top bit set is read as zero.
      r.ttl = ttl > 0x7fffffffu ? 0 : ttl;
      // The target is resolved against the whole reply but must end exactly
      // where rdlength says the record ends.
      if (!expand_name(reply, pos + k_srv_fixed_size, r.target, encoded)) {
        return fail(fmt::format("record {}: bad or truncated target name", number));
      }
      if (encoded != rdlength - k_srv_fixed_size) {
        return fail(fmt::format("record {}: rdlength {} does not match its data ({} bytes)", number,
                                rdlength, k_srv_fixed_size + encoded));
      }
      if (r.target.empty()) {
        r.target = ".";
      } else {
        if (r.target.back() == '.') r.target.pop_back();
        if (!is_host_name(r.target)) {
          return fail(fmt::format("record {}: target '{}' is not a host name", number, r.target));
        }
        if (r.port == 0) {
          return fail(fmt::format("record {} (target {}) has port 0", number, r.target));
        }
      }
      out.records.push_back(std::move(r));
    }
    pos += rdlength;
  }
  return out;
}

srv_answer lookup_srv(const std::string& name, const std::string& server, milliseconds timeout) {
  auto deadline = steady_clock::now() + timeout;
  // The query outlives the channel: ares_destroy still runs its callback.
  srv_query q;
  session s = open_session(server, timeout);
  auto prefix = fmt::format("DNS SRV lookup of {} at {}", name, s.where);
  const char* create = "create the SRV records or set 'master' instead of use_srv_records";
  ares_query(s.channel.get(), name.c_str(), k_class_in, k_type_srv, on_srv_reply, &q);
  drive(s.channel.get(), q.done, deadline);
  if (q.status != ARES_SUCCESS) {
    throw base::error(prefix + ": " +
                      failure_text(q.status, timeout, server.empty(), "SRV", create));
  }
  auto parsed = parse_srv_reply(q.reply);
  if (!parsed.error.empty()) {
    throw base::error(fmt::format("{}: malformed reply: {}; fix the SRV records or the DNS server",
                                  prefix, parsed.error));
  }
  if (parsed.records.empty()) {
    throw base::error(prefix + ": " +
                      failure_text(ARES_ENODATA, timeout, server.empty(), "SRV", create));
  }
  srv_answer answer;
  answer.ttl = std::numeric_limits<uint32_t>::max();
  for (auto& r : parsed.records) {
    answer.ttl = std::min(answer.ttl, r.ttl);
    if (r.target != ".") answer.records.push_back(std::move(r));
  }
  if (answer.records.empty()) {
    throw base::error(prefix +
                      ": the record says the service is not available here (target '.'); "
                      "set 'master' instead of use_srv_records, or publish SRV records "
                      "that name the masters");
  }
  return answer;
}

host_answer lookup_host(const std::string& host, const std::string& server, milliseconds timeout) {
  std::error_code ec;
  if (auto literal = asio::ip::make_address(host, ec); !ec) return {{literal}, 0};
  auto deadline = steady_clock::now() + timeout;
  host_query q;  // outlives the channel, as in lookup_srv
  session s = open_session(server, timeout);
  auto prefix = fmt::format("DNS lookup of {} at {}", host, s.where);
  const char* create = "create A or AAAA records for it, or fix the name (the SRV target)";
  ares_addrinfo_hints hints{};
  hints.ai_family = AF_UNSPEC;
  ares_getaddrinfo(s.channel.get(), host.c_str(), nullptr, &hints, on_addrinfo, &q);
  drive(s.channel.get(), q.done, deadline);
  if (q.status != ARES_SUCCESS) {
    throw base::error(prefix + ": " +
                      failure_text(q.status, timeout, server.empty(), "A or AAAA", create));
  }
  if (q.answer.addresses.empty()) {
    throw base::error(prefix + ": " +
                      failure_text(ARES_ENODATA, timeout, server.empty(), "A or AAAA", create));
  }
  return std::move(q.answer);
}

std::vector<srv_record> rfc2782_order(std::vector<srv_record> records, std::mt19937_64& rng) {
  std::stable_sort(records.begin(), records.end(), [](const srv_record& a, const srv_record& b) {
    return a.priority < b.priority;
  });
  std::vector<srv_record> out;
  out.reserve(records.size());
  auto group = records.begin();
  while (group != records.end()) {
    auto end = std::find_if(group, records.end(),
                            [&](const srv_record& r) { return r.priority != group->priority; });
    std::vector<srv_record> left(std::make_move_iterator(group), std::make_move_iterator(end));
    std::stable_partition(left.begin(), left.end(),
                          [](const srv_record& r) { return r.weight == 0; });
    while (!left.empty()) {
      uint64_t sum = 0;
      for (const auto& r : left) sum += r.weight;
      size_t pick = 0;
      if (sum == 0) {
        pick = std::uniform_int_distribution<size_t>(0, left.size() - 1)(rng);
      } else {
        uint64_t target = std::uniform_int_distribution<uint64_t>(0, sum)(rng);
        uint64_t running = 0;
        for (pick = 0; pick < left.size(); ++pick) {
          running += left[pick].weight;
          if (running >= target) break;
        }
      }
      out.push_back(std::move(left[pick]));
      left.erase(left.begin() + static_cast<std::ptrdiff_t>(pick));
    }
    group = end;
  }
  return out;
}

}  // namespace brine::net
