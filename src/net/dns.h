#pragma once

#include <asio/ip/address.hpp>
#include <chrono>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

// DNS lookups through c-ares for SRV discovery of masters (use_srv_records):
// SRV records with their TTLs, the A/AAAA addresses of their targets through
// the same DNS server, and RFC 2782's choice among them.
//
// Threading: every lookup is blocking (it waits on its own c-ares channel with
// poll) and bounded by its timeout; call it from a worker thread, never from an
// I/O thread. Calls on different threads are independent.
namespace brine::net {

// How long the minion waits for its DNS server to answer one lookup (SRV
// records of its masters, then each target's addresses).
inline constexpr std::chrono::seconds k_lookup_timeout{5};

struct srv_record {
  std::string target;  // host name, no trailing dot; "." for "not available here"
  uint16_t port = 0;
  uint16_t priority = 0;
  uint16_t weight = 0;
  uint32_t ttl = 0;  // seconds, from the answer
  bool operator==(const srv_record&) const = default;
};

struct srv_answer {
  std::vector<srv_record> records;  // as received, less any with target "."
  uint32_t ttl = 0;                 // the smallest record TTL
};

// The DNS server named by srv_resolver.
struct resolver_address {
  asio::ip::address address;
  uint16_t port = 53;
  // "HOST:PORT", with brackets around an IPv6 literal, as c-ares and messages take it.
  std::string text() const;
};

// Parses srv_resolver: "IPv4:PORT", "[IPv6]:PORT", or either without the port
// ("192.0.2.53", "[2001:db8::53]": port 53). HOST must be an IP address: the
// server that resolves names cannot itself be found by name; an IPv6 address
// always takes brackets, so that "::1:53" is never ambiguous. Throws
// base::error naming the text.
resolver_address parse_resolver(const std::string& text);

// Looks up the SRV records of `name` (e.g. "_brine._tcp.example.com"). `server`
// is "HOST:PORT" as parse_resolver() takes it, or empty for the system's
// resolver configuration (/etc/resolv.conf). Throws base::error with one line
// that names the record, the server asked, what went wrong and what to do:
// NXDOMAIN, no SRV data, a sole target "." (RFC 2782: decidedly not
// available), no answer within `timeout`, a malformed reply (a record with
// port 0 is one).
srv_answer lookup_srv(const std::string& name, const std::string& server,
                      std::chrono::milliseconds timeout);

struct host_answer {
  std::vector<asio::ip::address> addresses;
  uint32_t ttl = 0;  // the smallest TTL of the answers; 0 for an IP literal
};

// The A and AAAA addresses of `host` through `server` (as lookup_srv takes
// it), so that SRV targets resolve through the DNS server the user named; with
// a server named, /etc/hosts and the search domains are left out. An IP
// literal comes back as it is, without a query. Throws base::error as
// lookup_srv does.
host_answer lookup_host(const std::string& host, const std::string& server,
                        std::chrono::milliseconds timeout);

// RFC 2782's order: ascending priority; within one priority a weighted random
// permutation (repeatedly: sum the weights of the records left, pick a uniform
// number in [0, sum], take the first record whose running sum reaches it, with
// the zero-weight records placed first so that they have a small chance only
// when others exist). When every record left weighs 0, one is picked uniformly:
// the RFC's rule would always take the first as received and send every minion
// to one master whenever the DNS server does not rotate its answers.
// Deterministic for a given rng state.
std::vector<srv_record> rfc2782_order(std::vector<srv_record> records, std::mt19937_64& rng);

struct srv_parse_result {
  std::vector<srv_record> records;  // the SRV records of the answer section, in order
  std::string error;                // empty when the reply is well formed
};

// Parses a raw DNS reply (header, question section, answer section) into its
// SRV records with their TTLs, which c-ares 1.18's ares_parse_srv_reply drops.
// The bytes come from the network: every length is checked against the
// buffer, compression pointers are followed only inside it and loops are
// refused. Records of other types (a CNAME) are skipped. A record whose port is
// 0 (and whose target is not ".") or whose target is not a host name is an
// error, as is a non-zero RCODE. Public for tests and a fuzz target.
srv_parse_result parse_srv_reply(std::span<const uint8_t> reply);

}  // namespace brine::net
