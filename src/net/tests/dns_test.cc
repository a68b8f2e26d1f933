#include "net/dns.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/ip/udp.hpp>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "base/error.h"
#include "support/temp_dir.h"

namespace brine::net {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;

srv_record rec(std::string target, uint16_t port, uint16_t priority, uint16_t weight) {
  return {std::move(target), port, priority, weight, 0};
}

// --- rfc2782_order ---

TEST(rfc2782_order, priorities_ascend_and_every_record_is_kept) {
  std::mt19937_64 rng(1);
  std::vector<srv_record> in{rec("c", 1, 30, 5), rec("a", 1, 10, 5), rec("b", 1, 20, 0),
                             rec("a2", 1, 10, 7), rec("c2", 1, 30, 0)};
  for (int i = 0; i < 100; ++i) {
    auto out = rfc2782_order(in, rng);
    ASSERT_EQ(out.size(), in.size());
    for (size_t j = 1; j < out.size(); ++j) EXPECT_LE(out[j - 1].priority, out[j].priority);
    std::vector<std::string> names;
    for (auto& r : out) names.push_back(r.target);
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"a", "a2", "b", "c", "c2"}));
  }
}

TEST(rfc2782_order, first_pick_follows_the_weights) {
  std::mt19937_64 rng(20240611);
  std::vector<srv_record> in{rec("w10", 1, 5, 10), rec("w30", 1, 5, 30), rec("w60", 1, 5, 60)};
  std::map<std::string, int> first;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++first[rfc2782_order(in, rng).front().target];
  // RFC 2782 draws from [0, sum] inclusive, so the shares are 11/101, 30/101
  // and 60/101: within 2 points of the weights.
  EXPECT_NEAR(100.0 * first["w10"] / n, 10.0, 2.0);
  EXPECT_NEAR(100.0 * first["w30"] / n, 30.0, 2.0);
  EXPECT_NEAR(100.0 * first["w60"] / n, 60.0, 2.0);
}

TEST(rfc2782_order, is_deterministic_for_a_seed) {
  std::vector<srv_record> in{rec("a", 1, 1, 10), rec("b", 1, 1, 30), rec("c", 1, 1, 60),
                             rec("d", 1, 2, 1), rec("e", 1, 2, 1)};
  std::mt19937_64 r1(7);
  std::mt19937_64 r2(7);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(rfc2782_order(in, r1), rfc2782_order(in, r2));
}

TEST(rfc2782_order, zero_weight_records_are_rarely_first_beside_weighted_ones) {
  std::mt19937_64 rng(3);
  std::vector<srv_record> in{rec("heavy", 1, 1, 99), rec("zero", 1, 1, 0)};
  int zero_first = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) zero_first += rfc2782_order(in, rng).front().target == "zero";
  // Chosen only when the draw from [0, 99] is 0: 1 in 100.
  EXPECT_GT(zero_first, 0);
  EXPECT_NEAR(100.0 * zero_first / n, 1.0, 0.5);
}

TEST(rfc2782_order, all_zero_weights_spread_evenly) {
  std::mt19937_64 rng(4);
  std::vector<srv_record> in{rec("a", 1, 1, 0), rec("b", 1, 1, 0), rec("c", 1, 1, 0)};
  std::map<std::string, int> first;
  const int n = 9000;
  for (int i = 0; i < n; ++i) ++first[rfc2782_order(in, rng).front().target];
  for (auto name : {"a", "b", "c"}) EXPECT_NEAR(100.0 * first[name] / n, 33.3, 2.0) << name;
}

TEST(rfc2782_order, single_record_and_empty_input) {
  std::mt19937_64 rng(5);
  EXPECT_TRUE(rfc2782_order({}, rng).empty());
  auto one = rfc2782_order({rec("only", 4506, 3, 0)}, rng);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], rec("only", 4506, 3, 0));
}

// --- parse_srv_reply on hand-built replies ---

void put16(std::vector<uint8_t>& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v >> 8));
  b.push_back(static_cast<uint8_t>(v));
}
void put32(std::vector<uint8_t>& b, uint32_t v) {
  put16(b, static_cast<uint16_t>(v >> 16));
  put16(b, static_cast<uint16_t>(v));
}
void put_labels(std::vector<uint8_t>& b, std::initializer_list<std::string> labels) {
  for (const auto& l : labels) {
    b.push_back(static_cast<uint8_t>(l.size()));
    b.insert(b.end(), l.begin(), l.end());
  }
}
void put_pointer(std::vector<uint8_t>& b, size_t offset) {
  put16(b, static_cast<uint16_t>(0xc000 | offset));
}
void header(std::vector<uint8_t>& b, uint16_t flags, uint16_t qd, uint16_t an) {
  put16(b, 0x1234);
  put16(b, flags);
  put16(b, qd);
  put16(b, an);
  put16(b, 0);
  put16(b, 0);
}
// Question "_brine._tcp.example.com" SRV IN at offset 12; "example" starts at 24.
constexpr size_t k_question = 12;
constexpr size_t k_example = 24;
void question(std::vector<uint8_t>& b) {
  put_labels(b, {"_brine", "_tcp", "example", "com"});
  b.push_back(0);
  put16(b, 33);
  put16(b, 1);
}
// The fixed part of an answer owned by the question's name.
void rr(std::vector<uint8_t>& b, uint16_t type, uint32_t ttl, uint16_t rdlength) {
  put_pointer(b, k_question);
  put16(b, type);
  put16(b, 1);
  put32(b, ttl);
  put16(b, rdlength);
}
void srv_fixed(std::vector<uint8_t>& b, uint16_t priority, uint16_t weight, uint16_t port) {
  put16(b, priority);
  put16(b, weight);
  put16(b, port);
}

// Four answers: SRV with a compressed target, an A record (skipped), SRV with
// a plain target and a TTL with the top bit set, SRV whose target is only a
// pointer to the first target.
std::vector<uint8_t> good_reply() {
  std::vector<uint8_t> b;
  header(b, 0x8580, 1, 4);
  question(b);
  rr(b, 33, 300, 6 + 3 + 2);
  srv_fixed(b, 10, 60, 4506);
  size_t first_target = b.size();
  put_labels(b, {"m1"});
  put_pointer(b, k_example);
  rr(b, 1, 60, 4);
  b.insert(b.end(), {127, 0, 0, 1});
  rr(b, 33, 0x80000005u, 6 + 16);
  srv_fixed(b, 20, 0, 4507);
  put_labels(b, {"m2", "example", "com"});
  b.push_back(0);
  rr(b, 33, 120, 6 + 2);
  srv_fixed(b, 10, 30, 4508);
  put_pointer(b, first_target);
  return b;
}

TEST(parse_srv_reply, reads_records_ttls_and_compressed_names) {
  auto reply = good_reply();
  auto r = parse_srv_reply(reply);
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.records.size(), 3u);
  EXPECT_EQ(r.records[0], (srv_record{"m1.example.com", 4506, 10, 60, 300}));
  // RFC 2181: a TTL with the top bit set counts as 0.
  EXPECT_EQ(r.records[1], (srv_record{"m2.example.com", 4507, 20, 0, 0}));
  EXPECT_EQ(r.records[2], (srv_record{"m1.example.com", 4508, 10, 30, 120}));
}

TEST(parse_srv_reply, every_truncation_is_an_error) {
  auto reply = good_reply();
  for (size_t n = 0; n < reply.size(); ++n) {
    std::vector<uint8_t> cut(reply.begin(), reply.begin() + static_cast<std::ptrdiff_t>(n));
    auto r = parse_srv_reply(cut);
    EXPECT_NE(r.error, "") << "prefix of " << n << " bytes";
    EXPECT_TRUE(r.records.empty());
  }
  EXPECT_EQ(parse_srv_reply(std::span<const uint8_t>()).error,
            "0 bytes, shorter than a DNS header (12 bytes)");
}

TEST(parse_srv_reply, pointer_loops_are_errors) {
  {  // the question's name points at itself
    std::vector<uint8_t> b;
    header(b, 0x8580, 1, 0);
    put_pointer(b, k_question);
    put16(b, 33);
    put16(b, 1);
    EXPECT_EQ(parse_srv_reply(b).error, "question 1: bad or truncated name at byte 12");
  }
  {  // two names pointing at each other
    std::vector<uint8_t> b;
    header(b, 0x8580, 1, 1);
    put_labels(b, {"abc"});
    size_t to_answer = b.size();
    put_pointer(b, 0);  // patched below
    put16(b, 33);
    put16(b, 1);
    size_t answer = b.size();
    put_pointer(b, k_question);
    b[to_answer + 1] = static_cast<uint8_t>(answer);
    EXPECT_NE(parse_srv_reply(b).error, "");
  }
  {  // an SRV target pointing at itself
    std::vector<uint8_t> b;
    header(b, 0x8580, 1, 1);
    question(b);
    rr(b, 33, 5, 6 + 2);
    srv_fixed(b, 1, 1, 4506);
    put_pointer(b, b.size());
    EXPECT_EQ(parse_srv_reply(b).error, "record 1: bad or truncated target name");
  }
  {  // a pointer past the end of the reply
    std::vector<uint8_t> b;
    header(b, 0x8580, 1, 1);
    question(b);
    rr(b, 33, 5, 6 + 2);
    srv_fixed(b, 1, 1, 4506);
    put_pointer(b, 0x3fff);
    EXPECT_EQ(parse_srv_reply(b).error, "record 1: bad or truncated target name");
  }
}

// One SRV answer for "m1.example.com" with `rdlength` as given and `tail`
// extra bytes after the target.
std::vector<uint8_t> one_srv(uint16_t rdlength, size_t tail = 0) {
  std::vector<uint8_t> b;
  header(b, 0x8580, 1, 1);
  question(b);
  rr(b, 33, 5, rdlength);
  srv_fixed(b, 1, 1, 4506);
  put_labels(b, {"m1"});
  put_pointer(b, k_example);
  b.insert(b.end(), tail, 0);
  return b;
}

TEST(parse_srv_reply, a_wrong_rdlength_is_an_error) {
  EXPECT_EQ(parse_srv_reply(one_srv(11)).error, "");
  EXPECT_EQ(parse_srv_reply(one_srv(12)).error,
            "answer 1: rdlength 12 runs past the end of the reply (64 bytes)");
  EXPECT_EQ(parse_srv_reply(one_srv(10, 0)).error,
            "record 1: rdlength 10 does not match its data (11 bytes)");
  EXPECT_EQ(parse_srv_reply(one_srv(12, 1)).error,
            "record 1: rdlength 12 does not match its data (11 bytes)");
  EXPECT_EQ(parse_srv_reply(one_srv(6, 5)).error, "record 1: rdlength 6 is too short for SRV data");
  EXPECT_EQ(parse_srv_reply(one_srv(0xffff, 0)).error,
            "answer 1: rdlength 65535 runs past the end of the reply (64 bytes)");
}

TEST(parse_srv_reply, refuses_port_zero_bad_targets_and_error_replies) {
  std::vector<uint8_t> b;
  header(b, 0x8580, 1, 3);
  question(b);
  rr(b, 33, 5, 6 + 1);  // target "." with port 0: "not available", kept
  srv_fixed(b, 0, 0, 0);
  b.push_back(0);
  rr(b, 33, 5, 6 + 3 + 2);
  srv_fixed(b, 1, 1, 4506);
  put_labels(b, {"m1"});
  put_pointer(b, k_example);
  rr(b, 33, 5, 6 + 3 + 2);
  srv_fixed(b, 1, 1, 0);
  put_labels(b, {"m1"});
  put_pointer(b, k_example);
  EXPECT_EQ(parse_srv_reply(b).error, "record 3 (target m1.example.com) has port 0");

  auto odd = one_srv(11);
  odd[odd.size() - 3] = ' ';  // "m1" becomes "m " inside the target
  EXPECT_EQ(parse_srv_reply(odd).error, "record 1: target 'm .example.com' is not a host name");

  auto nx = one_srv(11);
  nx[3] = 0x83;  // RCODE 3
  EXPECT_EQ(parse_srv_reply(nx).error, "RCODE 3");
  auto query = one_srv(11);
  query[2] = 0x01;  // QR clear
  EXPECT_EQ(parse_srv_reply(query).error, "not a response (QR bit clear)");

  std::vector<uint8_t> dot;
  header(dot, 0x8580, 1, 1);
  question(dot);
  rr(dot, 33, 9, 6 + 1);
  srv_fixed(dot, 0, 0, 0);
  dot.push_back(0);
  auto r = parse_srv_reply(dot);
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.records.size(), 1u);
  EXPECT_EQ(r.records[0].target, ".");
}

// Random damage to a good reply must give records or an error, never a
// crash or a read out of bounds (the debug preset runs this under ASan).
TEST(parse_srv_reply, survives_random_damage) {
  auto good = good_reply();
  std::mt19937_64 rng(99);
  int errors = 0;
  for (int i = 0; i < 30000; ++i) {
    auto b = good;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) b[rng() % b.size()] = static_cast<uint8_t>(rng());
    if (rng() % 4 == 0) b.resize(rng() % b.size());
    auto r = parse_srv_reply(b);
    errors += !r.error.empty();
    if (!r.error.empty()) {
      EXPECT_TRUE(r.records.empty());
    }
  }
  EXPECT_GT(errors, 0);
}

// --- parse_resolver ---

TEST(parse_resolver, takes_ipv4_and_bracketed_ipv6) {
  EXPECT_EQ(parse_resolver("127.0.0.1:5353").text(), "127.0.0.1:5353");
  EXPECT_EQ(parse_resolver("192.0.2.53").text(), "192.0.2.53:53");
  EXPECT_EQ(parse_resolver("[::1]:5353").text(), "[::1]:5353");
  EXPECT_EQ(parse_resolver("[2001:db8::53]").text(), "[2001:db8::53]:53");
  auto r = parse_resolver("[::1]:5353");
  EXPECT_TRUE(r.address.is_v6());
  EXPECT_EQ(r.port, 5353);
}

TEST(parse_resolver, errors_name_the_text) {
  auto message = [](const std::string& text) {
    try {
      parse_resolver(text);
    } catch (const base::error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string fix =
      "; name the DNS server as IPv4:PORT or [IPv6]:PORT, e.g. 192.0.2.53:53 or "
      "[2001:db8::53]:53";
  EXPECT_EQ(message("dns.example.com:53"),
            "srv_resolver 'dns.example.com:53': 'dns.example.com' is not an IPv4 address (the "
            "DNS server cannot be named by a host name)" +
                fix);
  EXPECT_EQ(message("127.0.0.1:70000"),
            "srv_resolver '127.0.0.1:70000': port '70000' is not a number in 1..65535" + fix);
  EXPECT_EQ(message("127.0.0.1:0"),
            "srv_resolver '127.0.0.1:0': port '0' is not a number in 1..65535" + fix);
  EXPECT_EQ(message("::1:53"), "srv_resolver '::1:53': an IPv6 address needs brackets" + fix);
  EXPECT_EQ(message("[::1"), "srv_resolver '[::1': '[' without ']'" + fix);
  EXPECT_EQ(message("[127.0.0.1]:53"),
            "srv_resolver '[127.0.0.1]:53': '127.0.0.1' is not an IPv6 address" + fix);
  EXPECT_EQ(message("127.0.0.1:"), "srv_resolver '127.0.0.1:': no port after ':'" + fix);
  EXPECT_EQ(message(""), "srv_resolver '': empty" + fix);
}

// --- against a real dnsmasq ---

// A port free on 127.0.0.1 (and ::1) for both UDP and TCP, as dnsmasq takes both.
uint16_t free_port(bool v6) {
  asio::io_context io;
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::error_code ec;
    asio::ip::udp::socket probe(io,
                                asio::ip::udp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    uint16_t port = probe.local_endpoint().port();
    asio::ip::tcp::acceptor tcp4(io);
    tcp4.open(asio::ip::tcp::v4(), ec);
    if (!ec) tcp4.bind({asio::ip::make_address("127.0.0.1"), port}, ec);
    if (!ec && v6) {
      asio::ip::udp::socket udp6(io);
      asio::ip::tcp::acceptor tcp6(io);
      udp6.open(asio::ip::udp::v6(), ec);
      if (!ec) udp6.bind({asio::ip::make_address("::1"), port}, ec);
      if (!ec) tcp6.open(asio::ip::tcp::v6(), ec);
      if (!ec) tcp6.bind({asio::ip::make_address("::1"), port}, ec);
    }
    if (!ec) return port;
  }
  return 0;
}

bool have_ipv6_loopback() {
  asio::io_context io;
  asio::ip::udp::socket s(io);
  std::error_code ec;
  s.open(asio::ip::udp::v6(), ec);
  if (!ec) s.bind({asio::ip::make_address("::1"), 0}, ec);
  return !ec;
}

// A dnsmasq serving only the records given on its command line, on loopback
// and a free port, with its log in a temp dir. It runs under timeout(1) so that
// it ends within a minute even if this test is killed: dnsmasq drops its
// privileges when started as root, which clears a parent-death signal.
//
// The TTL dnsmasq gives its own records (--srv-host, --host-record) is
// --local-ttl, 0 when that flag is absent; --auth-ttl applies only to
// --auth-zone data and leaves them alone (tried with dnsmasq 2.90). A TTL at
// the end of --host-record beats --local-ttl only when --local-ttl is absent.
class dnsmasq {
 public:
  static constexpr const char* k_binary = "/usr/sbin/dnsmasq";

  dnsmasq(std::vector<std::string> records, bool v6) : records_(std::move(records)), v6_(v6) {}
  ~dnsmasq() { stop(); }
  dnsmasq(const dnsmasq&) = delete;
  dnsmasq& operator=(const dnsmasq&) = delete;

  // Starts it and waits, bounded, until it answers an SRV query; an empty
  // string, else what went wrong.
  std::string start() {
    if (::access(k_binary, X_OK) != 0) {
      return std::string(k_binary) + " is missing: run scripts/deps.sh (dnsmasq-base)";
    }
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = free_port(v6_);
      if (port_ == 0) return "no free port";
      spawn();
      auto deadline = steady_clock::now() + 5s;
      while (steady_clock::now() < deadline) {
        if (exited()) break;  // most likely the port was taken meanwhile: try another
        try {
          lookup_srv("_brine._tcp.example.test", server(), 200ms);
          return "";
        } catch (const base::error&) {
        }
      }
      stop();
    }
    return "dnsmasq did not answer; its log:\n" + log();
  }

  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);  // timeout(1) passes it on to dnsmasq
    auto deadline = steady_clock::now() + 5s;
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(10ms);
    }
    pid_ = -1;
  }

  std::string server() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string server6() const { return "[::1]:" + std::to_string(port_); }
  uint16_t port() const { return port_; }
  std::string log() const {
    std::ifstream in(dir_.file("dnsmasq.log"));
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  void spawn() {
    std::vector<std::string> args{"/usr/bin/timeout",
                                  "-k",
                                  "5",
                                  "60",
                                  k_binary,
                                  "--keep-in-foreground",
                                  "--conf-file=/dev/null",
                                  "--no-resolv",
                                  "--no-hosts",
                                  "--bind-interfaces",
                                  "--listen-address=127.0.0.1",
                                  "--port=" + std::to_string(port_),
                                  "--pid-file=",
                                  "--log-facility=-",
                                  "--log-queries"};
    if (v6_) args.push_back("--listen-address=::1");
    args.insert(args.end(), records_.begin(), records_.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::string log_path = dir_.file("dnsmasq.log");
    pid_ = ::fork();
    if (pid_ == 0) {
      int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      // timeout(1) keeps its credentials, so this reaches it, and it ends dnsmasq.
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }

  bool exited() {
    int status = 0;
    if (pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return true;
    }
    return false;
  }

  std::vector<std::string> records_;
  bool v6_;
  test::temp_dir dir_{"brine-dns"};
  uint16_t port_ = 0;
  pid_t pid_ = -1;
};

constexpr uint32_t k_local_ttl = 7;

struct dns_server : ::testing::Test {
  bool v6 = have_ipv6_loopback();
  dnsmasq server{{"--local-ttl=" + std::to_string(k_local_ttl),
                  // Answer NXDOMAIN for unknown names of these domains instead
                  // of REFUSED (there is no upstream to forward to).
                  "--local=/example.test/", "--local=/down.test/",
                  "--srv-host=_brine._tcp.example.test,m1.example.test,4506,10,60",
                  "--srv-host=_brine._tcp.example.test,m2.example.test,4507,20,0",
                  // No target: dnsmasq answers target "." (not available).
                  "--srv-host=_brine._tcp.down.test", "--host-record=m1.example.test,127.0.0.1",
                  "--host-record=m6.example.test,::1"},
                 v6};

  void SetUp() override {
    std::string error = server.start();
    ASSERT_EQ(error, "");
  }

  // The message of the base::error that `f` throws.
  template <typename F>
  static std::string failure(F f) {
    try {
      f();
    } catch (const base::error& e) {
      return e.what();
    }
    return "no error";
  }
};

TEST_F(dns_server, lookup_srv_returns_the_records_with_their_ttl) {
  auto answer = lookup_srv("_brine._tcp.example.test", server.server(), 2s);
  auto records = answer.records;
  std::sort(records.begin(), records.end(),
            [](const srv_record& a, const srv_record& b) { return a.priority < b.priority; });
  ASSERT_EQ(records.size(), 2u) << server.log();
  EXPECT_EQ(records[0], (srv_record{"m1.example.test", 4506, 10, 60, k_local_ttl}));
  EXPECT_EQ(records[1], (srv_record{"m2.example.test", 4507, 20, 0, k_local_ttl}));
  EXPECT_EQ(answer.ttl, k_local_ttl);

  std::mt19937_64 rng(1);
  auto ordered = rfc2782_order(answer.records, rng);
  EXPECT_EQ(ordered.front().target, "m1.example.test");
}

TEST_F(dns_server, lookup_srv_over_ipv6) {
  if (!v6) GTEST_SKIP() << "no IPv6 loopback (::1) on this machine";
  auto answer = lookup_srv("_brine._tcp.example.test", server.server6(), 2s);
  EXPECT_EQ(answer.records.size(), 2u);
}

TEST_F(dns_server, unknown_name_is_nxdomain) {
  auto message = failure([&] { lookup_srv("_brine._tcp.nope.example.test", server.server(), 2s); });
  EXPECT_EQ(message, "DNS SRV lookup of _brine._tcp.nope.example.test at " + server.server() +
                         ": no such name (NXDOMAIN); create the SRV records or set 'master' "
                         "instead of use_srv_records");
}

TEST_F(dns_server, name_without_srv_data) {
  auto message = failure([&] { lookup_srv("m1.example.test", server.server(), 2s); });
  EXPECT_EQ(message, "DNS SRV lookup of m1.example.test at " + server.server() +
                         ": no SRV records (the name exists but has no SRV data); create the "
                         "SRV records or set 'master' instead of use_srv_records");
}

TEST_F(dns_server, target_dot_means_not_available) {
  auto message = failure([&] { lookup_srv("_brine._tcp.down.test", server.server(), 2s); });
  EXPECT_EQ(message, "DNS SRV lookup of _brine._tcp.down.test at " + server.server() +
                         ": the record says the service is not available here (target '.'); "
                         "set 'master' instead of use_srv_records, or publish SRV records that "
                         "name the masters");
}

TEST_F(dns_server, lookup_host_resolves_through_the_server) {
  auto a = lookup_host("m1.example.test", server.server(), 2s);
  ASSERT_EQ(a.addresses.size(), 1u);
  EXPECT_EQ(a.addresses[0], asio::ip::make_address("127.0.0.1"));
  EXPECT_EQ(a.ttl, k_local_ttl);

  auto b = lookup_host("m6.example.test", server.server(), 2s);
  ASSERT_EQ(b.addresses.size(), 1u);
  EXPECT_EQ(b.addresses[0], asio::ip::make_address("::1"));

  auto message = failure([&] { lookup_host("nope.example.test", server.server(), 2s); });
  EXPECT_EQ(message, "DNS lookup of nope.example.test at " + server.server() +
                         ": no such name (NXDOMAIN); create A or AAAA records for it, or fix "
                         "the name (the SRV target)");
}

TEST(lookup_host, returns_ip_literals_without_a_query) {
  // Port 1 on loopback serves no DNS: a query would fail.
  auto a = lookup_host("192.0.2.7", "127.0.0.1:1", 500ms);
  ASSERT_EQ(a.addresses.size(), 1u);
  EXPECT_EQ(a.addresses[0], asio::ip::make_address("192.0.2.7"));
  auto b = lookup_host("2001:db8::7", "127.0.0.1:1", 500ms);
  ASSERT_EQ(b.addresses.size(), 1u);
  EXPECT_EQ(b.addresses[0], asio::ip::make_address("2001:db8::7"));
}

TEST(lookup_srv, fails_within_the_timeout_where_nothing_listens) {
  uint16_t port = free_port(false);
  ASSERT_NE(port, 0);
  std::string server = "127.0.0.1:" + std::to_string(port);
  std::string message = "no error";
  try {
    lookup_srv("_brine._tcp.example.test", server, 1s);
  } catch (const base::error& e) {
    message = e.what();
  }
  // Loopback answers with ICMP port unreachable, which c-ares reports as a
  // refused connection: an answer, not the timeout.
  EXPECT_EQ(message, "DNS SRV lookup of _brine._tcp.example.test at " + server +
                         ": connection refused (is a DNS server listening there?); check "
                         "srv_resolver");
}

TEST(lookup_srv, a_silent_server_times_out_with_the_message) {
  // A socket that takes the queries and never answers.
  asio::io_context io;
  asio::ip::udp::socket silent(io, {asio::ip::make_address("127.0.0.1"), 0});
  std::string server = "127.0.0.1:" + std::to_string(silent.local_endpoint().port());
  auto start = steady_clock::now();
  std::string message = "no error";
  try {
    lookup_srv("_brine._tcp.example.test", server, 700ms);
  } catch (const base::error& e) {
    message = e.what();
  }
  auto took = steady_clock::now() - start;
  EXPECT_GE(took, 600ms);
  EXPECT_LT(took, 1700ms);
  EXPECT_EQ(message, "DNS SRV lookup of _brine._tcp.example.test at " + server +
                         ": no answer within 0.7 s (is a DNS server listening there?); check "
                         "srv_resolver");
  // c-ares sent the query again within the timeout.
  silent.non_blocking(true);
  int queries = 0;
  std::array<char, 512> buf;
  asio::ip::udp::endpoint from;
  std::error_code ec;
  while (silent.receive_from(asio::buffer(buf), from, 0, ec), !ec) ++queries;
  EXPECT_GE(queries, 2);
}

TEST(lookup_srv, a_bad_resolver_text_is_named) {
  try {
    lookup_srv("_brine._tcp.example.test", "dns.example.com", 1s);
    FAIL() << "no error";
  } catch (const base::error& e) {
    EXPECT_NE(std::string(e.what()).find("srv_resolver 'dns.example.com'"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace brine::net
