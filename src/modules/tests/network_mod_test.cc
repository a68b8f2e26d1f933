// Tests of the network module on loopback only: the interface list is
// checked against the kernel's own view, connect against listeners the test
// opens on 127.0.0.1.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/ip/udp.hpp>
#include <filesystem>
#include <string>
#include <thread>

#include "base/error.h"
#include "modules/registry.h"
#include "modules/tests/test_util.h"

namespace brine::modules {
namespace {

using namespace testing;
using json = nlohmann::json;

bool on_path(const std::string& program) {
  const char* path = ::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  std::size_t start = 0;
  for (;;) {
    auto colon = dirs.find(':', start);
    std::string dir = dirs.substr(start, colon == std::string::npos ? colon : colon - start);
    if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0) return true;
    if (colon == std::string::npos) return false;
    start = colon + 1;
  }
}

class network_mod_test : public module_test {
 protected:
  network_mod_test() : module_test(register_network_module, 60s) {}
};

TEST_F(network_mod_test, every_function_is_registered_with_a_cli_example) {
  for (const char* fun : {"network.interfaces", "network.ip_addrs", "network.ip_addrs6",
                          "network.ping", "network.connect", "network.get_hostname"}) {
    ASSERT_NE(reg_.find(fun), nullptr) << fun;
    EXPECT_TRUE(reg_.doc(fun).starts_with(std::string(fun) + "(")) << reg_.doc(fun);
    EXPECT_CONTAINS(reg_.doc(fun), "\n\nCLI example: brine cmd '*' " + std::string(fun));
  }
}

TEST_F(network_mod_test, get_hostname_is_the_kernels_host_name) {
  char name[256] = {};
  ASSERT_EQ(::gethostname(name, sizeof name - 1), 0);
  EXPECT_EQ(ret("network.get_hostname"), std::string(name));
  EXPECT_CONTAINS(error_of("network.get_hostname", {"extra"}), "at most 0 positional");
}

// Python's ipaddress.ip_network(strict=False) for calc_net; in_subnet's
// strict parse (host bits set: False) for ip_in_subnet.
TEST_F(network_mod_test, calc_net_and_ip_in_subnet_as_python_computes_them) {
  EXPECT_EQ(ret("network.calc_net", {"172.17.0.5", "255.255.255.240"}), "172.17.0.0/28");
  EXPECT_EQ(ret("network.calc_net", {"10.1.2.3/24"}), "10.1.2.0/24");
  EXPECT_EQ(ret("network.calc_net", {"10.1.2.3", "0.0.0.255"}), "10.1.2.0/24");
  EXPECT_EQ(ret("network.calc_net", {"10.1.2.3"}), "10.1.2.3/32");
  EXPECT_EQ(ret("network.calc_net", {"2001:db8::7/64"}), "2001:db8::/64");
  EXPECT_THROW(call_fn("network.calc_net", {"10.1.2.3", "255.0.255.0"}), base::error);
  EXPECT_THROW(call_fn("network.calc_net", {"not-an-ip"}), base::error);
  EXPECT_EQ(ret("network.ip_in_subnet", {"172.17.0.4", "172.16.0.0/12"}), true);
  EXPECT_EQ(ret("network.ip_in_subnet", {"192.168.1.1", "172.16.0.0/12"}), false);
  EXPECT_EQ(ret("network.ip_in_subnet", {"10.0.0.1", "10.0.0.1/8"}), false);  // host bits
  EXPECT_EQ(ret("network.ip_in_subnet", {"2001:db8::1", "2001:db8::/32"}), true);
}

TEST_F(network_mod_test, interfaces_has_loopback_in_salts_shape) {
  json ifaces = ret("network.interfaces");
  ASSERT_TRUE(ifaces.contains("lo")) << ifaces.dump();
  const json& lo = ifaces["lo"];
  EXPECT_EQ(lo["up"], true);
  EXPECT_EQ(lo["hwaddr"], "00:00:00:00:00:00");
  ASSERT_TRUE(lo.contains("inet")) << lo.dump();
  json expected = {
      {"address", "127.0.0.1"}, {"netmask", "255.0.0.0"}, {"broadcast", nullptr}, {"label", "lo"}};
  EXPECT_NE(std::find(lo["inet"].begin(), lo["inet"].end(), expected), lo["inet"].end())
      << lo.dump();
  if (lo.contains("inet6")) {
    json v6 = {{"address", "::1"}, {"prefixlen", "128"}, {"scope", "host"}};
    EXPECT_NE(std::find(lo["inet6"].begin(), lo["inet6"].end(), v6), lo["inet6"].end())
        << lo.dump();
  }
  // Every interface the kernel lists is there, with up and the hwaddr sysfs gives.
  for (const auto& entry : std::filesystem::directory_iterator("/sys/class/net")) {
    const std::string name = entry.path().filename().string();
    ASSERT_TRUE(ifaces.contains(name)) << name;
    EXPECT_TRUE(ifaces[name]["up"].is_boolean()) << name;
  }
}

TEST_F(network_mod_test, ip_addrs_filters_loopback_cidr_and_type) {
  json all = ret("network.ip_addrs", json::array(), {{"include_loopback", true}});
  ASSERT_TRUE(all.is_array());
  EXPECT_NE(std::find(all.begin(), all.end(), "127.0.0.1"), all.end()) << all.dump();
  json without = ret("network.ip_addrs");
  EXPECT_EQ(std::find(without.begin(), without.end(), "127.0.0.1"), without.end());
  EXPECT_EQ(without.size() + 1, all.size()) << all.dump() << " vs " << without.dump();

  struct row {
    json kwargs;
    json expected;
  };
  for (const row& r :
       {row{{{"interface", "lo"}, {"include_loopback", true}}, {"127.0.0.1"}},
        row{{{"interface", "lo"}}, json::array()},
        row{{{"interface", "lo"}, {"include_loopback", true}, {"cidr", "127.0.0.0/8"}},
            {"127.0.0.1"}},
        row{{{"interface", "lo"}, {"include_loopback", true}, {"cidr", "10.0.0.0/8"}},
            json::array()},
        row{{{"interface", "lo"}, {"include_loopback", true}, {"type", "private"}}, {"127.0.0.1"}},
        row{{{"interface", "lo"}, {"include_loopback", true}, {"type", "public"}}, json::array()},
        row{{{"interface", "brine-none"}, {"include_loopback", true}}, json::array()}}) {
    EXPECT_EQ(ret("network.ip_addrs", json::array(), r.kwargs), r.expected) << r.kwargs.dump();
  }
  json six = ret("network.ip_addrs6", json::array(), {{"include_loopback", true}});
  for (const auto& a : six) EXPECT_NE(a.get<std::string>().find(':'), std::string::npos) << a;
  EXPECT_CONTAINS(error_of("network.ip_addrs", json::array(), {{"cidr", "nonsense"}}),
                  "cidr must be a network");
  EXPECT_CONTAINS(error_of("network.ip_addrs", json::array(), {{"type", "cheap"}}),
                  "type must be 'public' or 'private'");
}

TEST_F(network_mod_test, connect_to_a_listener_and_to_a_closed_port) {
  asio::io_context io;
  asio::ip::tcp::acceptor listener(io, {asio::ip::make_address("127.0.0.1"), 0});
  const int open_port = listener.local_endpoint().port();
  // A port that was free a moment ago: bound, then closed.
  int closed_port = 0;
  {
    asio::ip::tcp::acceptor gone(io, {asio::ip::make_address("127.0.0.1"), 0});
    closed_port = gone.local_endpoint().port();
  }
  const std::string p = std::to_string(open_port), q = std::to_string(closed_port);
  EXPECT_EQ(
      ret("network.connect", {"127.0.0.1", open_port}),
      (json{{"result", true},
            {"comment", "Successfully connected to 127.0.0.1 (127.0.0.1) on tcp port " + p}}));
  EXPECT_EQ(
      ret("network.connect", {"localhost", p}, {{"family", "ipv4"}}),
      (json{{"result", true},
            {"comment", "Successfully connected to localhost (127.0.0.1) on tcp port " + p}}));

  EXPECT_EQ(ret("network.connect", {"127.0.0.1", closed_port}),
            (json{{"result", false},
                  {"comment", "Unable to connect to 127.0.0.1 (127.0.0.1) on tcp port " + q}}));
}

TEST_F(network_mod_test, connect_udp_counts_an_answer) {
  asio::io_context io;
  asio::ip::udp::socket echo(io, {asio::ip::make_address("127.0.0.1"), 0});
  const int port = echo.local_endpoint().port();
  // The "server" answers from another thread while the probe waits.
  std::thread server([&] {
    std::array<char, 255> buf{};
    asio::ip::udp::endpoint from;
    std::size_t n = echo.receive_from(asio::buffer(buf), from);
    echo.send_to(asio::buffer(buf.data(), n), from);
  });
  json r = ret("network.connect", {"127.0.0.1", port}, {{"proto", "udp"}, {"timeout", 10}});
  server.join();
  EXPECT_EQ(r, (json{{"result", true},
                     {"comment", "Successfully connected to 127.0.0.1 (127.0.0.1) on udp port " +
                                     std::to_string(port)}}));

  // Nobody answers: the timeout decides.
  asio::ip::udp::socket silent(io, {asio::ip::make_address("127.0.0.1"), 0});
  json none = ret("network.connect", {"127.0.0.1", silent.local_endpoint().port()},
                  {{"proto", "udp"}, {"timeout", 0.3}});
  EXPECT_EQ(none["result"], false);
}

TEST_F(network_mod_test, connect_arguments) {
  EXPECT_EQ(ret("network.connect"),
            (json{{"result", false}, {"comment", "Required argument, host, is missing."}}));
  EXPECT_EQ(ret("network.connect", {"127.0.0.1"}),
            (json{{"result", false}, {"comment", "Required argument, port, is missing."}}));
  EXPECT_CONTAINS(error_of("network.connect", {"127.0.0.1", 70000}), "port must be 1..65535");
  EXPECT_CONTAINS(error_of("network.connect", {"127.0.0.1", 80}, {{"timeout", -1}}),
                  "timeout must be");
  EXPECT_CONTAINS(error_of("network.connect", {"127.0.0.1", 80}, {{"family", "ipx"}}),
                  "family must be");
  json unresolved = ret("network.connect", {"brine-no-such-host.invalid", 80}, {{"timeout", 10}});
  EXPECT_EQ(unresolved["result"], false);
  EXPECT_CONTAINS(unresolved["comment"].get<std::string>(),
                  "Unable to connect to brine-no-such-host.invalid");
}

TEST_F(network_mod_test, ping_loopback_or_says_ping_is_missing) {
  EXPECT_CONTAINS(error_of("network.ping", {"-f"}), "must not start with '-'");
  EXPECT_CONTAINS(error_of("network.ping", {"127.0.0.1"}, {{"timeout", "x"}}), "timeout must be");
  if (!on_path("ping")) {
    EXPECT_CONTAINS(error_of("network.ping", {"127.0.0.1"}), "ping is not installed");
    return;
  }
  outcome text = call_fn(make_call("network.ping", {"127.0.0.1"}));
  if (!text.success) GTEST_SKIP() << "ping cannot run here: " << text.ret.dump();
  EXPECT_CONTAINS(text.ret.get<std::string>(), "127.0.0.1");
  EXPECT_EQ(ret("network.ping", {"127.0.0.1"}, {{"return_boolean", true}}), true);
}

}  // namespace
}  // namespace brine::modules
